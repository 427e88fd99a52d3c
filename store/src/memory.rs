//! `MemoryStore`: the whole [`Store`] in one process's memory, behind one
//! lock. Every method is one atomic step, as a backend's transaction is,
//! with the same fencing, lease and claim rules; nothing survives the
//! process. It lets the engine's own tests (and its crash simulator, under
//! [`crate::crash::CrashStore`]) run without a database driver, and it
//! passes the same conformance suite as the SQLite and PostgreSQL
//! backends.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use cairn_model::stack::{
    ChangeSetRecord, EventRecord, ExecutionStatus, HistoryRecord, ResourceRecord, SignalRecord,
    StackRecord, StackStatus,
};

use cairn_model::registry::{
    self as registry, NewTypeVersion, RegistrationRecord, RegistrationStatus,
    TypeConfigurationRecord, TypeVersionRecord,
};

use cairn_model::audit::{AuditQuery, AuditRecord};

use crate::{
    Audit, ChangeSets, Claim, DriftDetections, Events, Exports, Inbox, Lease, Leases,
    NotificationCursor, Notifications, OperationRecord, OperationStart, Operations, RefactorWrite,
    Refactors, Resources, Stacks, Store, StoreError, TypeRegistry,
};

/// A stack's lease row.
#[derive(Clone)]
struct LeaseRow {
    owner: Option<String>,
    expires: i64,
    token: i64,
}

/// An operation's record with what only the store keeps of it.
#[derive(Clone)]
struct OperationRow {
    record: OperationRecord,
    cancel: bool,
    resume_attempts: i64,
    resume_events: i64,
}

/// A notification target's place and claim.
#[derive(Clone)]
struct TargetRow {
    delivered: usize,
    claim_owner: Option<String>,
    claim_expires: i64,
}

#[derive(Default)]
struct State {
    /// Stacks in the order they were made.
    stacks: Vec<StackRecord>,
    leases: BTreeMap<String, LeaseRow>,
    /// Per stack, its rows in the order they were first written.
    resources: BTreeMap<String, Vec<ResourceRecord>>,
    events: BTreeMap<String, Vec<EventRecord>>,
    operations: BTreeMap<String, OperationRow>,
    history: Vec<HistoryRecord>,
    change_sets: Vec<ChangeSetRecord>,
    /// (stack id, group physical id) → (logical id, state).
    groups: BTreeMap<(String, String), (String, serde_json::Value)>,
    /// Export name → (stack id, value).
    exports: BTreeMap<String, (String, String)>,
    imports: BTreeSet<(String, String)>,
    callback_secret: Option<Vec<u8>>,
    /// Request id → (body, received at).
    callback_responses: BTreeMap<String, (Vec<u8>, i64)>,
    signals: Vec<SignalRecord>,
    /// (detection id, stack id, body), oldest first.
    drift: Vec<(String, String, serde_json::Value)>,
    /// (stack id, target) → its row.
    targets: BTreeMap<(String, String), TargetRow>,
    /// (refactor id, body), oldest first.
    refactors: Vec<(String, serde_json::Value)>,
    /// Registrations, oldest first.
    registrations: Vec<RegistrationRecord>,
    /// Every type version with its package, in the order registered.
    versions: Vec<(TypeVersionRecord, Vec<u8>)>,
    registry_generation: i64,
    /// (type name, alias) → its configuration.
    configurations: BTreeMap<(String, String), TypeConfigurationRecord>,
    /// The audit trail, oldest first, and the last `seq` given.
    audit: Vec<AuditRecord>,
    audit_seq: i64,
    /// Export target → (delivered seq, claim owner, claim expiry).
    audit_exports: BTreeMap<String, (i64, Option<String>, i64)>,
    /// Ended console sessions → until when they are remembered.
    revoked: BTreeMap<String, i64>,
}

/// The whole state in memory (see the module's documentation).
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// One atomic step on the state.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut State) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| StoreError::Backend("the in-memory state was poisoned".into()))?;
        f(&mut state)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl State {
    /// Fails unless `lease` is still the stack's current lease.
    fn fence(&self, lease: &Lease) -> Result<(), StoreError> {
        match self.leases.get(&lease.stack_id) {
            Some(l) if l.token == lease.token && l.owner.as_deref() == Some(&lease.owner) => Ok(()),
            _ => Err(StoreError::LeaseLost(lease.stack_id.clone())),
        }
    }

    fn stack_mut(&mut self, stack_id: &str) -> Option<&mut StackRecord> {
        self.stacks.iter_mut().find(|s| s.stack_id == stack_id)
    }

    fn event_count(&self, stack_id: &str) -> usize {
        self.events.get(stack_id).map_or(0, Vec::len)
    }

    fn add_events(&mut self, events: &[EventRecord]) {
        for e in events {
            self.events
                .entry(e.stack_id.clone())
                .or_default()
                .push(e.clone());
        }
    }

    /// A stack's new status, its event, and what the status ends.
    fn write_status(
        &mut self,
        stack_id: &str,
        status: StackStatus,
        reason: Option<&str>,
        event: &EventRecord,
    ) {
        if let Some(s) = self.stack_mut(stack_id) {
            s.status = status;
            s.status_reason = reason.map(str::to_string);
            s.updated_at = event.timestamp.clone();
            if status == StackStatus::DeleteComplete {
                s.deleted_at = Some(event.timestamp.clone());
            }
        }
        let open = |h: &&mut HistoryRecord| h.stack_id == stack_id && h.ended_at.is_none();
        if let Some(r) = reason.filter(|r| *r != "User Initiated") {
            for h in self.history.iter_mut().filter(|h| open(h)) {
                h.status_reason = Some(r.to_string());
            }
        }
        if !status.is_in_progress() && status != StackStatus::ReviewInProgress {
            for h in self.history.iter_mut().filter(|h| open(h)) {
                h.ended_at = Some(event.timestamp.clone());
                h.status = Some(status.as_str().to_string());
            }
            self.change_sets.retain(|c| {
                !(c.stack_id == stack_id
                    && c.execution_status == ExecutionStatus::ExecuteInProgress)
            });
        }
        self.add_events(std::slice::from_ref(event));
    }

    /// The stack's stored fields (not its status, protection, policy,
    /// targets or family).
    fn write_stack_fields(&mut self, s: &StackRecord) {
        if let Some(t) = self.stack_mut(&s.stack_id) {
            t.description = s.description.clone();
            t.template_body = s.template_body.clone();
            t.parameters = s.parameters.clone();
            t.no_echo = s.no_echo.clone();
            t.outputs = s.outputs.clone();
            t.on_failure = s.on_failure;
            t.updated_at = s.updated_at.clone();
            t.tags = s.tags.clone();
            t.context = s.context.clone();
            t.capabilities = s.capabilities.clone();
            t.rollback_configuration = s.rollback_configuration.clone();
        }
    }

    fn write_operation(&mut self, op: &OperationRecord) {
        self.operations.insert(
            op.stack_id.clone(),
            OperationRow {
                record: op.clone(),
                cancel: false,
                resume_attempts: 0,
                resume_events: 0,
            },
        );
    }
}

#[async_trait::async_trait]
impl Stacks for MemoryStore {
    async fn insert_stack(
        &self,
        s: &StackRecord,
        first_event: &EventRecord,
        operation: Option<&OperationRecord>,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        self.with(|st| {
            let live = st
                .stacks
                .iter()
                .any(|x| x.stack_name == s.stack_name && x.status != StackStatus::DeleteComplete);
            if live {
                return Err(StoreError::StackExists(s.stack_name.clone()));
            }
            st.stacks.push(s.clone());
            for target in &s.notification_arns {
                st.targets
                    .entry((s.stack_id.clone(), target.clone()))
                    .or_insert(TargetRow {
                        delivered: 0,
                        claim_owner: None,
                        claim_expires: 0,
                    });
            }
            let token = match st.leases.get(&s.stack_id) {
                Some(l) => l.token + 1,
                None => 1,
            };
            st.leases.insert(
                s.stack_id.clone(),
                LeaseRow {
                    owner: Some(owner.to_string()),
                    expires: now_ms() + ttl_ms,
                    token,
                },
            );
            st.add_events(std::slice::from_ref(first_event));
            if let Some(op) = operation {
                st.write_operation(op);
            }
            Ok(Lease {
                stack_id: s.stack_id.clone(),
                owner: owner.to_string(),
                token,
            })
        })
    }

    async fn find_stack(&self, name_or_id: &str) -> Result<Option<StackRecord>, StoreError> {
        self.with(|st| {
            if let Some(s) = st.stacks.iter().find(|s| s.stack_id == name_or_id) {
                return Ok(Some(s.clone()));
            }
            Ok(st
                .stacks
                .iter()
                .rev()
                .find(|s| s.stack_name == name_or_id && s.status != StackStatus::DeleteComplete)
                .cloned())
        })
    }

    async fn list_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        self.with(|st| Ok(st.stacks.clone()))
    }

    async fn in_progress_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        self.with(|st| {
            Ok(st
                .stacks
                .iter()
                .filter(|s| s.status.is_in_progress())
                .cloned()
                .collect())
        })
    }

    async fn set_stack_status(
        &self,
        lease: &Lease,
        status: StackStatus,
        reason: Option<&str>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.write_status(&lease.stack_id, status, reason, event);
            Ok(())
        })
    }

    async fn save_stack(&self, lease: &Lease, stack: &StackRecord) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.write_stack_fields(stack);
            Ok(())
        })
    }

    async fn set_termination_protection(
        &self,
        stack_id: &str,
        enabled: bool,
    ) -> Result<bool, StoreError> {
        self.with(|st| {
            Ok(st
                .stack_mut(stack_id)
                .map(|s| s.termination_protection = enabled)
                .is_some())
        })
    }

    async fn set_stack_policy(&self, stack_id: &str, policy: &str) -> Result<bool, StoreError> {
        self.with(|st| {
            Ok(st
                .stack_mut(stack_id)
                .map(|s| s.stack_policy = Some(policy.to_string()))
                .is_some())
        })
    }
}

#[async_trait::async_trait]
impl Leases for MemoryStore {
    async fn acquire_lease(
        &self,
        stack_id: &str,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        self.with(|st| {
            let now = now_ms();
            let Some(l) = st.leases.get_mut(stack_id) else {
                return Err(StoreError::NoSuchStack(stack_id.to_string()));
            };
            if let Some(h) = &l.owner {
                if l.expires > now && h != owner {
                    return Err(StoreError::Busy {
                        stack: stack_id.to_string(),
                        owner: h.clone(),
                    });
                }
            }
            l.token += 1;
            l.owner = Some(owner.to_string());
            l.expires = now + ttl_ms;
            Ok(Lease {
                stack_id: stack_id.to_string(),
                owner: owner.to_string(),
                token: l.token,
            })
        })
    }

    async fn renew_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            if let Some(l) = st.leases.get_mut(&lease.stack_id) {
                l.expires = now_ms() + ttl_ms;
            }
            Ok(())
        })
    }

    async fn lease_owner(&self, stack_id: &str) -> Result<Option<String>, StoreError> {
        self.with(|st| {
            Ok(st
                .leases
                .get(stack_id)
                .filter(|l| l.expires > now_ms())
                .and_then(|l| l.owner.clone()))
        })
    }

    async fn break_lease(&self, stack_id: &str, owner: &str) -> Result<(), StoreError> {
        self.with(|st| {
            if let Some(l) = st.leases.get_mut(stack_id) {
                if l.owner.as_deref() == Some(owner) {
                    l.expires = 0;
                }
            }
            Ok(())
        })
    }

    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            if let Some(l) = st.leases.get_mut(&lease.stack_id) {
                l.owner = None;
                l.expires = 0;
            }
            Ok(())
        })
    }

    async fn hand_off_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            if let Some(l) = st.leases.get_mut(&lease.stack_id) {
                l.owner = None;
                l.expires = now_ms() + ttl_ms;
            }
            Ok(())
        })
    }

    async fn claim_operations(
        &self,
        owners: &[String],
        ttl_ms: i64,
        handed_off: bool,
    ) -> Result<Vec<Claim>, StoreError> {
        self.with(|st| {
            let now = now_ms();
            let parent_busy = |s: &StackRecord| {
                s.parent_id.as_ref().is_some_and(|p| {
                    st.stacks
                        .iter()
                        .any(|x| &x.stack_id == p && x.status.as_str().ends_with("_IN_PROGRESS"))
                })
            };
            let free: Vec<String> = st
                .stacks
                .iter()
                .filter(|s| s.status.is_in_progress() && !parent_busy(s))
                .filter(|s| {
                    st.leases
                        .get(&s.stack_id)
                        .is_some_and(|l| (l.owner.is_none() && handed_off) || l.expires <= now)
                })
                .map(|s| s.stack_id.clone())
                .take(owners.len())
                .collect();
            let mut claims = Vec::with_capacity(free.len());
            for (stack_id, owner) in free.into_iter().zip(owners) {
                let Some(l) = st.leases.get_mut(&stack_id) else {
                    continue;
                };
                let taken_from = l.owner.take();
                l.token += 1;
                l.owner = Some(owner.clone());
                l.expires = now + ttl_ms;
                claims.push(Claim {
                    lease: Lease {
                        stack_id,
                        owner: owner.clone(),
                        token: l.token,
                    },
                    taken_from,
                });
            }
            Ok(claims)
        })
    }
}

#[async_trait::async_trait]
impl Operations for MemoryStore {
    async fn begin_operation(
        &self,
        lease: &Lease,
        start: &OperationStart,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.write_operation(&start.operation);
            if let Some(id) = &start.change_set_id {
                st.change_sets
                    .retain(|c| c.stack_id != lease.stack_id || &c.change_set_id == id);
                for c in st.change_sets.iter_mut().filter(|c| &c.change_set_id == id) {
                    c.execution_status = ExecutionStatus::ExecuteInProgress;
                }
            }
            st.write_stack_fields(&start.stack);
            let rows = st.resources.entry(lease.stack_id.clone()).or_default();
            for row in &start.rows {
                match rows.iter_mut().find(|r| r.logical_id == row.logical_id) {
                    Some(r) => *r = row.clone(),
                    None => rows.push(row.clone()),
                }
            }
            rows.retain(|r| !start.removed_rows.contains(&r.logical_id));
            st.history.push(start.history.clone());
            st.write_status(
                &lease.stack_id,
                start.stack.status,
                start.stack.status_reason.as_deref(),
                &start.event,
            );
            Ok(())
        })
    }

    async fn operation(&self, stack_id: &str) -> Result<Option<OperationRecord>, StoreError> {
        self.with(|st| Ok(st.operations.get(stack_id).map(|o| o.record.clone())))
    }

    async fn clear_operation(&self, lease: &Lease) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.operations.remove(&lease.stack_id);
            Ok(())
        })
    }

    async fn set_operation_options(
        &self,
        lease: &Lease,
        options: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            if let Some(o) = st.operations.get_mut(&lease.stack_id) {
                o.record.options = options.clone();
            }
            Ok(())
        })
    }

    async fn note_resume(&self, stack_id: &str) -> Result<u32, StoreError> {
        self.with(|st| {
            let events = st.event_count(stack_id) as i64;
            let Some(o) = st.operations.get_mut(stack_id) else {
                return Ok(1);
            };
            o.resume_attempts = if events > o.resume_events {
                1
            } else {
                o.resume_attempts + 1
            };
            o.resume_events = events;
            Ok(u32::try_from(o.resume_attempts).unwrap_or(u32::MAX))
        })
    }

    async fn request_cancel(&self, stack_id: &str) -> Result<bool, StoreError> {
        self.with(|st| {
            Ok(match st.operations.get_mut(stack_id) {
                Some(o) if o.record.kind == cairn_model::stack::OperationKind::Update => {
                    o.cancel = true;
                    true
                }
                _ => false,
            })
        })
    }

    async fn cancel_requested(&self, stack_id: &str) -> Result<bool, StoreError> {
        self.with(|st| Ok(st.operations.get(stack_id).is_some_and(|o| o.cancel)))
    }

    async fn open_history(&self, lease: &Lease, entry: &HistoryRecord) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.history.push(entry.clone());
            Ok(())
        })
    }

    async fn set_history_details(
        &self,
        lease: &Lease,
        details: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            for h in st
                .history
                .iter_mut()
                .filter(|h| h.stack_id == lease.stack_id && h.ended_at.is_none())
            {
                h.details = Some(details.clone());
            }
            Ok(())
        })
    }

    async fn history(&self, stack_id: &str) -> Result<Vec<HistoryRecord>, StoreError> {
        self.with(|st| {
            Ok(st
                .history
                .iter()
                .filter(|h| h.stack_id == stack_id)
                .cloned()
                .collect())
        })
    }
}

#[async_trait::async_trait]
impl Resources for MemoryStore {
    async fn put_resource(
        &self,
        lease: &Lease,
        resource: &ResourceRecord,
        events: Vec<EventRecord>,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            let rows = st.resources.entry(resource.stack_id.clone()).or_default();
            match rows
                .iter_mut()
                .find(|r| r.logical_id == resource.logical_id)
            {
                Some(r) => *r = resource.clone(),
                None => rows.push(resource.clone()),
            }
            st.add_events(&events);
            Ok(())
        })
    }

    async fn remove_resource(
        &self,
        lease: &Lease,
        logical_id: &str,
        events: &[EventRecord],
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            if let Some(rows) = st.resources.get_mut(&lease.stack_id) {
                rows.retain(|r| r.logical_id != logical_id);
            }
            st.add_events(events);
            Ok(())
        })
    }

    async fn clear_journals(&self, lease: &Lease) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            for r in st.resources.entry(lease.stack_id.clone()).or_default() {
                r.journal = None;
            }
            Ok(())
        })
    }

    async fn resources(&self, stack_id: &str) -> Result<Vec<ResourceRecord>, StoreError> {
        self.with(|st| Ok(st.resources.get(stack_id).cloned().unwrap_or_default()))
    }

    async fn put_group(
        &self,
        lease: &Lease,
        logical_id: &str,
        physical_id: &str,
        state: Option<&serde_json::Value>,
        events: &[EventRecord],
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            let key = (lease.stack_id.clone(), physical_id.to_string());
            match state {
                Some(v) => {
                    // A group keeps the logical id it was first stored under.
                    let logical = st
                        .groups
                        .get(&key)
                        .map(|(l, _)| l.clone())
                        .unwrap_or_else(|| logical_id.to_string());
                    st.groups.insert(key, (logical, v.clone()));
                }
                None => {
                    st.groups.remove(&key);
                }
            }
            st.add_events(events);
            Ok(())
        })
    }

    async fn group(
        &self,
        stack_id: &str,
        physical_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.with(|st| {
            Ok(st
                .groups
                .get(&(stack_id.to_string(), physical_id.to_string()))
                .map(|(_, v)| v.clone()))
        })
    }

    async fn groups(
        &self,
        stack_id: &str,
    ) -> Result<Vec<(String, String, serde_json::Value)>, StoreError> {
        self.with(|st| {
            let mut found: Vec<(String, String, serde_json::Value)> = st
                .groups
                .iter()
                .filter(|((s, _), _)| s == stack_id)
                .map(|((_, p), (l, v))| (l.clone(), p.clone(), v.clone()))
                .collect();
            found.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            Ok(found)
        })
    }
}

#[async_trait::async_trait]
impl Events for MemoryStore {
    async fn put_events(&self, lease: &Lease, events: &[EventRecord]) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.add_events(events);
            Ok(())
        })
    }

    async fn events_from(
        &self,
        stack_id: &str,
        skip: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.with(|st| {
            Ok(st
                .events
                .get(stack_id)
                .map(|e| e.iter().skip(skip).cloned().collect())
                .unwrap_or_default())
        })
    }

    async fn event_count(&self, stack_id: &str) -> Result<usize, StoreError> {
        self.with(|st| Ok(st.event_count(stack_id)))
    }
}

#[async_trait::async_trait]
impl Inbox for MemoryStore {
    async fn callback_secret(&self) -> Result<Vec<u8>, StoreError> {
        self.with(|st| {
            // Not a secret anyone else could read: the process's own memory.
            let fresh = || {
                let seed = process_random_bytes();
                seed.to_vec()
            };
            Ok(st.callback_secret.get_or_insert_with(fresh).clone())
        })
    }

    async fn put_callback_response(
        &self,
        request_id: &str,
        body: &[u8],
    ) -> Result<bool, StoreError> {
        self.with(|st| {
            let now = now_ms();
            st.callback_responses
                .retain(|_, (_, at)| *at >= now - crate::CALLBACK_RESPONSE_TTL_MS);
            if st.callback_responses.contains_key(request_id) {
                return Ok(false);
            }
            st.callback_responses
                .insert(request_id.to_string(), (body.to_vec(), now));
            Ok(true)
        })
    }

    async fn callback_responses(
        &self,
        request_ids: &[String],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.with(|st| {
            Ok(request_ids
                .iter()
                .filter_map(|id| {
                    st.callback_responses
                        .get(id)
                        .map(|(b, _)| (id.clone(), b.clone()))
                })
                .collect())
        })
    }

    async fn put_signal(&self, signal: &SignalRecord) -> Result<(), StoreError> {
        self.with(|st| {
            let same = |s: &SignalRecord| {
                s.stack_id == signal.stack_id
                    && s.logical_id == signal.logical_id
                    && s.unique_id == signal.unique_id
            };
            match st.signals.iter_mut().find(|s| same(s)) {
                Some(s) => *s = signal.clone(),
                None => st.signals.push(signal.clone()),
            }
            Ok(())
        })
    }

    async fn add_signal(&self, signal: &SignalRecord) -> Result<bool, StoreError> {
        self.with(|st| {
            let taken = st.signals.iter().any(|s| {
                s.stack_id == signal.stack_id
                    && s.logical_id == signal.logical_id
                    && s.unique_id == signal.unique_id
            });
            if !taken {
                st.signals.push(signal.clone());
            }
            Ok(!taken)
        })
    }

    async fn signals(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<Vec<SignalRecord>, StoreError> {
        self.with(|st| {
            Ok(st
                .signals
                .iter()
                .filter(|s| s.stack_id == stack_id && s.logical_id == logical_id)
                .cloned()
                .collect())
        })
    }

    async fn clear_signals(&self, stack_id: &str, logical_id: &str) -> Result<(), StoreError> {
        self.with(|st| {
            st.signals
                .retain(|s| !(s.stack_id == stack_id && s.logical_id == logical_id));
            Ok(())
        })
    }
}

/// 32 bytes that differ between processes and calls (the in-memory
/// state's ResponseURL secret: it never leaves the process).
fn process_random_bytes() -> [u8; 32] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 32];
    for chunk in out.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_i64(now_ms());
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

#[async_trait::async_trait]
impl ChangeSets for MemoryStore {
    async fn put_change_set(&self, cs: &ChangeSetRecord) -> Result<(), StoreError> {
        self.with(|st| {
            if st
                .change_sets
                .iter()
                .any(|c| c.stack_id == cs.stack_id && c.change_set_name == cs.change_set_name)
            {
                return Err(StoreError::ChangeSetExists(cs.change_set_name.clone()));
            }
            st.change_sets.push(cs.clone());
            Ok(())
        })
    }

    async fn find_change_set(
        &self,
        stack_id: &str,
        name_or_id: &str,
    ) -> Result<Option<ChangeSetRecord>, StoreError> {
        self.with(|st| {
            Ok(st
                .change_sets
                .iter()
                .find(|c| {
                    c.change_set_id == name_or_id
                        || (c.stack_id == stack_id && c.change_set_name == name_or_id)
                })
                .cloned())
        })
    }

    async fn change_sets(&self, stack_id: &str) -> Result<Vec<ChangeSetRecord>, StoreError> {
        self.with(|st| {
            Ok(st
                .change_sets
                .iter()
                .filter(|c| c.stack_id == stack_id)
                .cloned()
                .collect())
        })
    }

    async fn delete_change_set(&self, change_set_id: &str) -> Result<(), StoreError> {
        self.with(|st| {
            st.change_sets.retain(|c| c.change_set_id != change_set_id);
            Ok(())
        })
    }

    async fn obsolete_change_set(
        &self,
        change_set_id: &str,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            for c in st.change_sets.iter_mut().filter(|c| {
                c.change_set_id == change_set_id && c.execution_status == ExecutionStatus::Available
            }) {
                c.execution_status = ExecutionStatus::Obsolete;
                c.status_reason = Some(reason.to_string());
            }
            Ok(())
        })
    }
}

#[async_trait::async_trait]
impl Exports for MemoryStore {
    async fn put_exports(
        &self,
        lease: &Lease,
        exports: &[(String, String)],
    ) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            for (name, _) in exports {
                if let Some((other, _)) = st.exports.get(name).filter(|(s, _)| *s != lease.stack_id)
                {
                    let stack = st
                        .stacks
                        .iter()
                        .find(|s| &s.stack_id == other)
                        .map(|s| s.stack_name.clone())
                        .unwrap_or_else(|| other.clone());
                    return Err(StoreError::ExportExists {
                        name: name.clone(),
                        stack,
                    });
                }
            }
            st.exports.retain(|_, (s, _)| *s != lease.stack_id);
            for (name, value) in exports {
                st.exports
                    .insert(name.clone(), (lease.stack_id.clone(), value.clone()));
            }
            Ok(())
        })
    }

    async fn delete_exports(&self, lease: &Lease) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.exports.retain(|_, (s, _)| *s != lease.stack_id);
            st.imports.retain(|(s, _)| *s != lease.stack_id);
            Ok(())
        })
    }

    async fn export(&self, name: &str) -> Result<Option<(String, String)>, StoreError> {
        self.with(|st| Ok(st.exports.get(name).map(|(s, v)| (v.clone(), s.clone()))))
    }

    async fn exports(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        self.with(|st| {
            Ok(st
                .exports
                .iter()
                .map(|(n, (s, v))| (n.clone(), v.clone(), s.clone()))
                .collect())
        })
    }

    async fn put_imports(&self, lease: &Lease, names: &[String]) -> Result<(), StoreError> {
        self.with(|st| {
            st.fence(lease)?;
            st.imports.retain(|(s, _)| *s != lease.stack_id);
            for n in names {
                st.imports.insert((lease.stack_id.clone(), n.clone()));
            }
            Ok(())
        })
    }

    async fn importers(&self, export_name: &str) -> Result<Vec<String>, StoreError> {
        self.with(|st| {
            let mut names: Vec<String> = st
                .imports
                .iter()
                .filter(|(_, e)| e == export_name)
                .filter_map(|(s, _)| {
                    st.stacks
                        .iter()
                        .find(|x| &x.stack_id == s && x.status != StackStatus::DeleteComplete)
                        .map(|x| x.stack_name.clone())
                })
                .collect();
            names.sort();
            Ok(names)
        })
    }
}

#[async_trait::async_trait]
impl DriftDetections for MemoryStore {
    async fn put_drift_detection(
        &self,
        stack_id: &str,
        detection_id: &str,
        _at: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            if st.drift.iter().any(|(id, _, _)| id == detection_id) {
                return Err(StoreError::Backend(format!(
                    "drift detection {detection_id} is kept already"
                )));
            }
            st.drift
                .push((detection_id.to_string(), stack_id.to_string(), body.clone()));
            Ok(())
        })
    }

    async fn drift_detection(
        &self,
        detection_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.with(|st| {
            Ok(st
                .drift
                .iter()
                .find(|(id, _, _)| id == detection_id)
                .map(|(_, _, b)| b.clone()))
        })
    }

    async fn last_drift_detection(
        &self,
        stack_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.with(|st| {
            Ok(st
                .drift
                .iter()
                .rev()
                .find(|(_, s, _)| s == stack_id)
                .map(|(_, _, b)| b.clone()))
        })
    }
}

#[async_trait::async_trait]
impl Notifications for MemoryStore {
    async fn set_notification_targets(
        &self,
        stack_id: &str,
        targets: &[String],
    ) -> Result<(), StoreError> {
        self.with(|st| {
            if let Some(s) = st.stack_mut(stack_id) {
                s.notification_arns = targets.to_vec();
            }
            st.targets
                .retain(|(s, t), _| s != stack_id || targets.contains(t));
            let count = st.event_count(stack_id);
            for t in targets {
                st.targets
                    .entry((stack_id.to_string(), t.clone()))
                    .or_insert(TargetRow {
                        delivered: count,
                        claim_owner: None,
                        claim_expires: 0,
                    });
            }
            Ok(())
        })
    }

    async fn claim_notifications(
        &self,
        owner: &str,
        dead: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<NotificationCursor>, StoreError> {
        self.with(|st| {
            let now = now_ms();
            let counts: BTreeMap<String, usize> = st
                .events
                .iter()
                .map(|(s, e)| (s.clone(), e.len()))
                .collect();
            let mut claimed = Vec::new();
            for ((stack_id, target), row) in st.targets.iter_mut() {
                if claimed.len() >= limit {
                    break;
                }
                let free = match &row.claim_owner {
                    None => true,
                    Some(o) => o == owner || row.claim_expires < now || dead.contains(o),
                };
                let behind = row.delivered < counts.get(stack_id).copied().unwrap_or(0);
                if free && behind {
                    row.claim_owner = Some(owner.to_string());
                    row.claim_expires = now + ttl_ms;
                    claimed.push(NotificationCursor {
                        stack_id: stack_id.clone(),
                        target: target.clone(),
                        delivered: row.delivered,
                    });
                }
            }
            Ok(claimed)
        })
    }

    async fn notification_claimants(&self) -> Result<Vec<String>, StoreError> {
        self.with(|st| {
            let owners: BTreeSet<String> = st
                .targets
                .values()
                .filter_map(|r| r.claim_owner.clone())
                .collect();
            Ok(owners.into_iter().collect())
        })
    }

    async fn notified(
        &self,
        owner: &str,
        cursor: &NotificationCursor,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        self.with(|st| {
            let key = (cursor.stack_id.clone(), cursor.target.clone());
            Ok(match st.targets.get_mut(&key) {
                Some(row) if row.claim_owner.as_deref() == Some(owner) => {
                    row.delivered = cursor.delivered;
                    row.claim_expires = now_ms() + ttl_ms;
                    true
                }
                _ => false,
            })
        })
    }

    async fn release_notification(
        &self,
        owner: &str,
        cursor: &NotificationCursor,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            let key = (cursor.stack_id.clone(), cursor.target.clone());
            if let Some(row) = st.targets.get_mut(&key) {
                if row.claim_owner.as_deref() == Some(owner) {
                    row.claim_owner = None;
                    row.claim_expires = 0;
                }
            }
            Ok(())
        })
    }
}

#[async_trait::async_trait]
impl Refactors for MemoryStore {
    async fn put_refactor(
        &self,
        refactor_id: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            match st.refactors.iter_mut().find(|(id, _)| id == refactor_id) {
                Some((_, b)) => *b = body.clone(),
                None => st.refactors.push((refactor_id.to_string(), body.clone())),
            }
            Ok(())
        })
    }

    async fn refactor(&self, refactor_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.with(|st| {
            Ok(st
                .refactors
                .iter()
                .find(|(id, _)| id == refactor_id)
                .map(|(_, b)| b.clone()))
        })
    }

    async fn refactors(&self) -> Result<Vec<serde_json::Value>, StoreError> {
        self.with(|st| Ok(st.refactors.iter().map(|(_, b)| b.clone()).collect()))
    }

    async fn apply_refactor(
        &self,
        leases: &[Lease],
        write: &RefactorWrite,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            for lease in leases {
                st.fence(lease)?;
            }
            // Every moved row is taken out first, so renames may swap.
            let mut moving = Vec::new();
            for m in &write.moves {
                if let Some(rows) = st.resources.get_mut(&m.from_stack) {
                    if let Some(i) = rows.iter().position(|r| r.logical_id == m.from_logical) {
                        moving.push((m, rows.remove(i)));
                    }
                }
            }
            for (m, mut row) in moving {
                row.stack_id = m.to_stack.clone();
                row.logical_id = m.to_logical.clone();
                st.resources
                    .entry(m.to_stack.clone())
                    .or_default()
                    .push(row);
            }
            st.add_events(&write.events);
            for (s, e) in &write.stacks {
                st.write_stack_fields(s);
                st.write_status(&s.stack_id, s.status, s.status_reason.as_deref(), e);
            }
            if let Some((_, b)) = st
                .refactors
                .iter_mut()
                .find(|(id, _)| *id == write.refactor_id)
            {
                *b = write.body.clone();
            }
            Ok(())
        })
    }
}

#[async_trait::async_trait]
impl TypeRegistry for MemoryStore {
    async fn begin_registration(
        &self,
        r: &RegistrationRecord,
    ) -> Result<RegistrationRecord, StoreError> {
        self.with(|st| {
            if let Some(earlier) = r.client_token.as_ref().and_then(|t| {
                st.registrations
                    .iter()
                    .find(|e| e.client_token.as_ref() == Some(t))
            }) {
                return Ok(earlier.clone());
            }
            st.registrations.push(r.clone());
            st.registry_generation += 1;
            Ok(r.clone())
        })
    }

    async fn complete_registration(
        &self,
        token: &str,
        version: &NewTypeVersion,
        package: &[u8],
    ) -> Result<String, StoreError> {
        self.with(|st| {
            let Some(i) = st.registrations.iter().position(|r| r.token == token) else {
                return Err(StoreError::NoSuchRegistration(token.into()));
            };
            if st.registrations[i].status != RegistrationStatus::InProgress {
                return Err(StoreError::RegistrationEnded(token.into()));
            }
            let of_type = || {
                st.versions
                    .iter()
                    .filter(|(v, _)| v.type_name == version.type_name)
            };
            let next = of_type()
                .filter_map(|(v, _)| registry::version_number(&v.version_id))
                .max()
                .unwrap_or(0)
                + 1;
            let is_default = !of_type().any(|(v, _)| !v.deprecated);
            let version_id = registry::version_id(next);
            let ts = cairn_model::stack::now();
            st.versions.push((
                TypeVersionRecord {
                    type_name: version.type_name.clone(),
                    version_id: version_id.clone(),
                    kind: version.kind,
                    is_default,
                    deprecated: false,
                    schema: version.schema.clone(),
                    description: version.description.clone(),
                    handler: version.handler.clone(),
                    secret: version.secret.clone(),
                    package_sha256: version.package_sha256.clone(),
                    signed_by: version.signed_by.clone(),
                    created_at: ts.clone(),
                },
                package.to_vec(),
            ));
            let r = &mut st.registrations[i];
            r.status = RegistrationStatus::Complete;
            r.description = crate::registered_as(&version_id);
            r.version_id = Some(version_id.clone());
            r.updated_at = ts;
            st.registry_generation += 1;
            Ok(version_id)
        })
    }

    async fn fail_registration(&self, token: &str, reason: &str) -> Result<(), StoreError> {
        self.with(|st| {
            let Some(r) = st.registrations.iter_mut().find(|r| r.token == token) else {
                return Err(StoreError::NoSuchRegistration(token.into()));
            };
            if r.status != RegistrationStatus::InProgress {
                return Err(StoreError::RegistrationEnded(token.into()));
            }
            r.status = RegistrationStatus::Failed;
            r.description = reason.to_string();
            r.updated_at = cairn_model::stack::now();
            st.registry_generation += 1;
            Ok(())
        })
    }

    async fn registration(&self, token: &str) -> Result<Option<RegistrationRecord>, StoreError> {
        self.with(|st| Ok(st.registrations.iter().find(|r| r.token == token).cloned()))
    }

    async fn registrations(&self) -> Result<Vec<RegistrationRecord>, StoreError> {
        self.with(|st| Ok(st.registrations.clone()))
    }

    async fn type_versions(&self) -> Result<Vec<TypeVersionRecord>, StoreError> {
        self.with(|st| {
            let mut all: Vec<TypeVersionRecord> =
                st.versions.iter().map(|(v, _)| v.clone()).collect();
            all.sort_by(|a, b| (&a.type_name, &a.version_id).cmp(&(&b.type_name, &b.version_id)));
            Ok(all)
        })
    }

    async fn type_package(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.with(|st| {
            Ok(st
                .versions
                .iter()
                .find(|(v, _)| v.type_name == type_name && v.version_id == version_id)
                .map(|(_, p)| p.clone()))
        })
    }

    async fn set_default_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            let live = |v: &TypeVersionRecord| v.type_name == type_name && !v.deprecated;
            if !st
                .versions
                .iter()
                .any(|(v, _)| live(v) && v.version_id == version_id)
            {
                return Err(StoreError::type_not_found(type_name, version_id));
            }
            for (v, _) in st.versions.iter_mut().filter(|(v, _)| live(v)) {
                v.is_default = v.version_id == version_id;
            }
            st.registry_generation += 1;
            Ok(())
        })
    }

    async fn deregister_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        self.with(|st| {
            let live = |v: &TypeVersionRecord| v.type_name == type_name && !v.deprecated;
            let others = st
                .versions
                .iter()
                .filter(|(v, _)| live(v) && v.version_id != version_id)
                .count();
            let Some((v, _)) = st
                .versions
                .iter_mut()
                .find(|(v, _)| live(v) && v.version_id == version_id)
            else {
                return Err(StoreError::type_not_found(type_name, version_id));
            };
            if v.is_default && others > 0 {
                return Err(StoreError::DefaultTypeVersion {
                    type_name: type_name.into(),
                    version_id: version_id.into(),
                });
            }
            v.deprecated = true;
            v.is_default = false;
            st.registry_generation += 1;
            Ok(())
        })
    }

    async fn registry_generation(&self) -> Result<i64, StoreError> {
        self.with(|st| Ok(st.registry_generation))
    }

    async fn set_type_configuration(&self, c: &TypeConfigurationRecord) -> Result<(), StoreError> {
        self.with(|st| {
            st.configurations
                .insert((c.type_name.clone(), c.alias.clone()), c.clone());
            st.registry_generation += 1;
            Ok(())
        })
    }

    async fn type_configurations(&self) -> Result<Vec<TypeConfigurationRecord>, StoreError> {
        self.with(|st| Ok(st.configurations.values().cloned().collect()))
    }
}

#[async_trait::async_trait]
impl Audit for MemoryStore {
    async fn add_audit(&self, record: &AuditRecord) -> Result<i64, StoreError> {
        self.with(|st| {
            st.audit_seq += 1;
            let mut r = record.clone();
            r.seq = st.audit_seq;
            st.audit.push(r);
            Ok(st.audit_seq)
        })
    }

    async fn audit_records(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        self.with(|st| {
            let limit = if q.limit == 0 { usize::MAX } else { q.limit };
            Ok(st
                .audit
                .iter()
                .rev()
                .filter(|r| q.matches(r))
                .take(limit)
                .cloned()
                .collect())
        })
    }

    async fn prune_audit(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.with(|st| {
            let before = st.audit.len();
            st.audit.retain(|r| r.event_time_ms >= before_ms);
            Ok((before - st.audit.len()) as u64)
        })
    }

    async fn audit_after(
        &self,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        self.with(|st| {
            Ok(st
                .audit
                .iter()
                .filter(|r| r.seq > after_seq)
                .take(limit)
                .cloned()
                .collect())
        })
    }

    async fn claim_audit_export(
        &self,
        owner: &str,
        target: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        self.with(|st| {
            let now = now_ms();
            let row = st
                .audit_exports
                .entry(target.to_string())
                .or_insert((0, None, 0));
            let free = match &row.1 {
                None => true,
                Some(o) => o == owner || row.2 < now,
            };
            if !free {
                return Ok(None);
            }
            row.1 = Some(owner.to_string());
            row.2 = now + ttl_ms;
            Ok(Some(row.0))
        })
    }

    async fn audit_exported(
        &self,
        owner: &str,
        target: &str,
        delivered: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        self.with(|st| {
            Ok(match st.audit_exports.get_mut(target) {
                Some(row) if row.1.as_deref() == Some(owner) => {
                    row.0 = delivered;
                    row.2 = now_ms() + ttl_ms;
                    true
                }
                _ => false,
            })
        })
    }

    async fn revoke_session(&self, session: &str, until_ms: i64) -> Result<(), StoreError> {
        self.with(|st| {
            let now = now_ms();
            st.revoked.retain(|_, until| *until >= now);
            st.revoked.insert(session.to_string(), until_ms);
            Ok(())
        })
    }

    async fn session_revoked(&self, session: &str) -> Result<bool, StoreError> {
        self.with(|st| Ok(st.revoked.contains_key(session)))
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(all(test, feature = "conformance"))]
mod tests {
    use super::*;

    /// The store conformance suite on a fresh in-memory state per check.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_conformance_suite_passes_in_memory() {
        crate::conformance::all(|| {
            std::future::ready(std::sync::Arc::new(MemoryStore::new()) as std::sync::Arc<dyn Store>)
        })
        .await;
    }
}
