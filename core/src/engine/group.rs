//! Instance groups, run by the engine: members are resources of any
//! provider's type, created, rolled and deleted here through the same
//! provider calls as template resources, each with its own events.
//!
//! A group's create, update and delete all converge the stored group state
//! (`group::state`) to what the properties ask for, so a call re-issued
//! after a crash (same request id) continues from the stored state: member
//! calls are recorded before they are made (re-issued with their request
//! id), and a rolling replacement's plan and cursor are stored before its
//! first batch. A rollback is the same convergence towards the old launch
//! configuration.

use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DifferenceType, DriftRequest, DriftResult,
    ErrorKind, Health, PropertyDifference, ProviderError, StatusRequest, UpdateResult,
};
use serde_json::{Map, Value};

use super::{Engine, Op};
use crate::group::naming::{self, Batch};
use crate::group::policy::{self, RollingUpdate};
use crate::group::state::{GroupState, Member, Rollout};
use crate::group::types::{self, GroupSpec, MemberDefinition, LAUNCH_CONFIGURATION};
use crate::stack::{
    now, EventRecord, Journal, PendingCall, ResourceRecord, ResourceStatus, StackStatus,
};
use crate::template::eval::Evaluated;
use crate::template::source::child;
use crate::validate;

/// How often a new member's health is asked while it is not healthy yet.
const HEALTH_POLL: Duration = Duration::from_millis(250);

/// One group call: the group and its state, shared by the member tasks.
struct Run<'a> {
    engine: &'a Engine,
    op: &'a Op,
    logical_id: String,
    physical_id: String,
    state: tokio::sync::Mutex<GroupState>,
}

fn failed(message: impl Into<String>) -> ProviderError {
    ProviderError::internal(message)
}

/// Runs `work` concurrently, at most `limit` at once.
pub(super) async fn bounded<T>(
    limit: usize,
    work: Vec<impl std::future::Future<Output = T>>,
) -> Vec<T> {
    let permits = tokio::sync::Semaphore::new(limit.max(1));
    let permits = &permits;
    futures::future::join_all(work.into_iter().map(|w| async move {
        let _permit = permits.acquire().await;
        w.await
    }))
    .await
}

/// What is wrong with a member, found by its provider's drift and status
/// checks.
#[derive(Debug, Clone, PartialEq)]
enum Finding {
    Missing,
    Unhealthy(String),
    Drifted(Vec<PropertyDifference>),
}

impl Finding {
    fn describe(&self) -> String {
        match self {
            Finding::Missing => "DELETED".into(),
            Finding::Unhealthy(reason) => format!("UNHEALTHY: {reason}"),
            Finding::Drifted(d) => format!("MODIFIED ({} differences)", d.len()),
        }
    }
}

impl Engine {
    pub(super) async fn group_create(
        &self,
        op: &Op,
        r: &ResourceRecord,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        let physical = types::physical_name(&op.stack.stack_name, &r.logical_id, request_id);
        match self.converge(op, r, &physical, &r.properties, None).await {
            Ok(attributes) => Ok(CreateResult {
                physical_resource_id: physical,
                attributes,
                no_echo: false,
            }),
            // Members may exist: the group's physical id lets a rollback or
            // a delete find and delete them.
            Err(e) => Err(e.leaving(physical)),
        }
    }

    pub(super) async fn group_update(
        &self,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
        properties: &Map<String, Value>,
        old_properties: &Map<String, Value>,
    ) -> Result<UpdateResult, ProviderError> {
        let attributes = self
            .converge(op, r, physical, properties, Some(old_properties))
            .await?;
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes,
            no_echo: false,
        })
    }

    /// Deletes every member (in parallel, bounded), then the group's state.
    pub(super) async fn group_delete(
        &self,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
    ) -> Result<(), ProviderError> {
        let run = Run::load(self, op, &r.logical_id, physical).await?;
        let names: Vec<String> = run
            .snapshot()
            .await
            .members
            .iter()
            .map(|m| m.name.clone())
            .collect();
        run.delete_members(&names).await?;
        run.engine
            .store
            .put_group(&op.lease, &r.logical_id, physical, None, &[])
            .await
            .map_err(|e| run.lost(e))
    }

    /// Moves the group's members to what `properties` ask for; returns the
    /// group's attributes.
    async fn converge(
        &self,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
        properties: &Map<String, Value>,
        old_properties: Option<&Map<String, Value>>,
    ) -> Result<Map<String, Value>, ProviderError> {
        let canonical = self.registry.canonical(&r.resource_type).to_string();
        let spec = types::spec(&canonical, &r.logical_id, properties)
            .map_err(ProviderError::invalid_request)?;
        let definition = self.launch_configuration(op, &r.logical_id, &spec).await?;
        let policy = self
            .rolling_policy(op, &r.logical_id)
            .map_err(ProviderError::invalid_request)?;
        let run = Run::load(self, op, &r.logical_id, physical).await?;
        run.settle().await?;
        let launch_changed = old_properties.is_some_and(|old| {
            old.get("LaunchConfigurationName") != properties.get("LaunchConfigurationName")
        });
        run.roll(&spec, &definition, policy, launch_changed).await?;
        run.resize(&spec, &definition).await?;
        Ok(run.snapshot().await.attributes())
    }

    /// The group's RollingUpdate policy. During an update rollback the policy
    /// of the update being rolled back counts too (the members go back under
    /// the policy that moved them).
    fn rolling_policy(&self, op: &Op, logical_id: &str) -> Result<Option<RollingUpdate>, String> {
        let own = op
            .template
            .resource(logical_id)
            .and_then(|r| r.update_policy.clone());
        let evaluated = match own {
            Some(p) => {
                let path = child(&child("/Resources", logical_id), "UpdatePolicy");
                match op.evaluator().eval(&p, &path).map_err(|e| e.to_string())? {
                    Evaluated::Value(v) => Some(v),
                    _ => None,
                }
            }
            None => None,
        };
        let found = policy::rolling_update(evaluated.as_ref(), logical_id)?;
        if found.is_some() || op.stack.status != StackStatus::UpdateRollbackInProgress {
            return Ok(found);
        }
        let forward = op
            .other
            .as_ref()
            .and_then(|o| o.template.resource(logical_id))
            .and_then(|r| r.update_policy.clone());
        // The abandoned template's policy is read as written: an intrinsic in
        // it cannot be evaluated here, and then Heat's defaults apply.
        Ok(forward.map(|p| {
            policy::rolling_update(Some(&p), logical_id)
                .ok()
                .flatten()
                .unwrap_or_default()
        }))
    }

    /// The member definition of the launch configuration `spec` names: a
    /// `Cairn::Group::LaunchConfiguration` of this stack (its current
    /// physical resource, or the one an update replaced, which a rollback
    /// returns to).
    async fn launch_configuration(
        &self,
        op: &Op,
        logical_id: &str,
        spec: &GroupSpec,
    ) -> Result<MemberDefinition, ProviderError> {
        let rows = self
            .store
            .resources(&op.stack.stack_id)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let is_lc = |t: &str| self.registry.canonical(t) == LAUNCH_CONFIGURATION;
        let found = rows.iter().find_map(|r| {
            let mut candidates = vec![(&r.resource_type, &r.physical_id, &r.properties)];
            match &r.journal {
                Some(Journal::Changed { before }) => candidates.push((
                    &before.resource_type,
                    &before.physical_id,
                    &before.properties,
                )),
                Some(Journal::Restored { discard: Some(d) }) => {
                    candidates.push((&d.resource_type, &d.physical_id, &d.properties))
                }
                _ => {}
            }
            candidates
                .into_iter()
                .find(|(t, p, _)| {
                    is_lc(t) && p.as_deref() == Some(spec.launch_configuration.as_str())
                })
                .map(|(_, _, props)| props.clone())
        });
        let props = found.ok_or_else(|| {
            ProviderError::invalid_request(format!(
                "LaunchConfigurationName {} of {logical_id} names no {LAUNCH_CONFIGURATION} of stack {}; use {{\"Ref\": \"<its logical id>\"}}",
                spec.launch_configuration, op.stack.stack_name
            ))
        })?;
        let definition = MemberDefinition::of(&props).ok_or_else(|| {
            ProviderError::invalid_request(format!(
                "launch configuration {} has no MemberType",
                spec.launch_configuration
            ))
        })?;
        let member_type = self.registry.canonical(&definition.member_type);
        if types::is_group(member_type) || member_type == LAUNCH_CONFIGURATION {
            return Err(ProviderError::invalid_request(format!(
                "MemberType {} of launch configuration {} cannot be a group type",
                definition.member_type, spec.launch_configuration
            )));
        }
        if self.registry.get(member_type).is_none() {
            return Err(ProviderError::invalid_request(format!(
                "MemberType {} of launch configuration {}: no provider serves it",
                definition.member_type, spec.launch_configuration
            )));
        }
        let properties = validate::check_properties(
            &naming::member_name(&spec.prefix, 0),
            &definition.member_type,
            &definition.properties,
            &self.registry,
        )
        .map_err(|e| {
            ProviderError::invalid_request(format!(
                "MemberProperties of launch configuration {}: {}",
                spec.launch_configuration,
                e.message()
            ))
        })?;
        Ok(MemberDefinition {
            member_type: member_type.to_string(),
            properties,
        })
    }
}

impl Engine {
    /// The group's stored state, by its physical id.
    async fn stored_group(
        &self,
        stack_id: &str,
        r: &ResourceRecord,
    ) -> Result<GroupState, ProviderError> {
        let physical = r.physical_id.clone().unwrap_or_default();
        match self.store.group(stack_id, &physical).await {
            Ok(Some(v)) => serde_json::from_value(v).map_err(|e| {
                failed(format!(
                    "the stored state of group {} is unreadable: {e}",
                    r.logical_id
                ))
            }),
            Ok(None) => Ok(GroupState::default()),
            Err(e) => Err(failed(e.to_string())),
        }
    }

    /// Asks each member's provider about it: gone, unhealthy, or (with
    /// `drift`) drifted from the properties it was made with.
    async fn member_findings(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
        drift: bool,
    ) -> Result<Vec<(Member, Finding)>, ProviderError> {
        let state = self.stored_group(stack_id, r).await?;
        let work: Vec<_> = state
            .members
            .into_iter()
            .map(|m| async move {
                let finding = self.member_finding(stack_id, stack_name, &m, drift).await;
                finding.map(|f| (m, f))
            })
            .collect();
        Ok(bounded(self.config.engine.max_concurrency, work)
            .await
            .into_iter()
            .flatten()
            .collect())
    }

    async fn member_finding(
        &self,
        stack_id: &str,
        stack_name: &str,
        m: &Member,
        drift: bool,
    ) -> Option<Finding> {
        let Some(physical) = m.physical_id.clone().filter(|_| m.is_in_service()) else {
            return Some(Finding::Unhealthy(format!("it is {}", m.status)));
        };
        let t = match self.provider_for(&m.resource_type) {
            Ok(t) => t,
            Err(e) => return Some(Finding::Unhealthy(e.message)),
        };
        let context = || {
            self.request_context(
                stack_id,
                stack_name,
                &m.name,
                &m.resource_type,
                &uuid::Uuid::new_v4().to_string(),
            )
        };
        if drift {
            let req = DriftRequest {
                context: context(),
                physical_resource_id: physical.clone(),
                properties: m.properties.clone(),
            };
            match self
                .timed("drift detection", t.provider.check_drift(&req))
                .await
            {
                Ok(DriftResult::Deleted) => return Some(Finding::Missing),
                Ok(DriftResult::Modified { differences }) => {
                    return Some(Finding::Drifted(differences))
                }
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Some(Finding::Missing),
                Err(e) => return Some(Finding::Unhealthy(e.message)),
            }
        }
        let req = StatusRequest {
            context: context(),
            physical_resource_id: physical,
            properties: m.properties.clone(),
        };
        match self
            .timed("status check", t.provider.check_status(&req))
            .await
        {
            Ok(Health::Healthy) => None,
            Ok(Health::Unhealthy { reason }) => Some(Finding::Unhealthy(reason)),
            Err(e) if e.is_not_found() => Some(Finding::Missing),
            Err(e) => Some(Finding::Unhealthy(e.message)),
        }
    }

    /// A group's drift: its members, each compared by its own provider. A
    /// member that is gone or unhealthy is a difference of the group.
    pub(super) async fn group_drift(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
    ) -> Result<DriftResult, ProviderError> {
        let findings = self.member_findings(stack_id, stack_name, r, true).await?;
        let mut differences = Vec::new();
        for (m, finding) in findings {
            let base = format!("/Members/{}", m.name);
            match finding {
                Finding::Missing => differences.push(PropertyDifference {
                    property_path: base,
                    expected_value: m.physical_id.clone().unwrap_or_default(),
                    actual_value: "null".into(),
                    difference_type: DifferenceType::Remove,
                }),
                Finding::Unhealthy(reason) => differences.push(PropertyDifference {
                    property_path: format!("{base}/Health"),
                    expected_value: "HEALTHY".into(),
                    actual_value: format!("UNHEALTHY: {reason}"),
                    difference_type: DifferenceType::NotEqual,
                }),
                Finding::Drifted(list) => differences.extend(list.into_iter().map(|mut d| {
                    d.property_path = format!("{base}/Properties{}", d.property_path);
                    d
                })),
            }
        }
        Ok(DriftResult::from_differences(differences))
    }

    /// A group's health: unhealthy when a member is gone or unhealthy.
    pub(super) async fn group_health(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
    ) -> Result<Health, ProviderError> {
        let findings = self.member_findings(stack_id, stack_name, r, false).await?;
        if findings.is_empty() {
            return Ok(Health::Healthy);
        }
        let list: Vec<String> = findings
            .iter()
            .map(|(m, f)| format!("{} ({})", m.name, f.describe()))
            .collect();
        Ok(Health::Unhealthy {
            reason: format!("members not healthy: {}", list.join(", ")),
        })
    }

    /// Heals a group: every member that is gone, unhealthy or drifted is
    /// deleted and made again (same name) from the current launch
    /// configuration, in batches of the group's MaxBatchSize, each waiting
    /// until its members report healthy. Returns the group's attributes.
    pub(super) async fn group_heal(
        &self,
        op: &Op,
        r: &ResourceRecord,
    ) -> Result<Map<String, Value>, ProviderError> {
        let physical = r.physical_id.clone().unwrap_or_default();
        let canonical = self.registry.canonical(&r.resource_type).to_string();
        let spec = types::spec(&canonical, &r.logical_id, &r.properties)
            .map_err(ProviderError::invalid_request)?;
        let definition = self.launch_configuration(op, &r.logical_id, &spec).await?;
        let policy = self
            .rolling_policy(op, &r.logical_id)
            .map_err(ProviderError::invalid_request)?
            .unwrap_or_default();
        let run = Run::load(self, op, &r.logical_id, &physical).await?;
        run.settle().await?;
        let findings = self
            .member_findings(&op.stack.stack_id, &op.stack.stack_name, r, true)
            .await?;
        // A member that is gone or unhealthy serves nothing: it is deleted
        // first and made again under its own name (the names stay one
        // contiguous run, and a host keeps its name).
        let batch_size = policy.max_batch_size.max(1) as usize;
        for batch in findings.chunks(batch_size) {
            let names: Vec<String> = batch.iter().map(|(m, _)| m.name.clone()).collect();
            let indices: Vec<u64> = batch.iter().map(|(m, _)| m.index).collect();
            let why: Vec<String> = batch
                .iter()
                .map(|(m, f)| format!("{} is {}", m.name, f.describe()))
                .collect();
            let start = run.progress(format!(
                "Healing: replacing {} ({})",
                names.join(", "),
                why.join("; ")
            ));
            run.save(vec![start], |_| {}).await?;
            run.delete_members(&names).await?;
            let made = run
                .create_members(
                    &spec.prefix,
                    &indices,
                    &spec.launch_configuration,
                    &definition,
                )
                .await;
            let healthy = match made {
                Ok(()) => {
                    let checks: Vec<_> = names.iter().map(|n| run.wait_healthy(n)).collect();
                    run.bounded(checks)
                        .await
                        .into_iter()
                        .collect::<Result<(), String>>()
                }
                Err(reason) => Err(reason),
            };
            if let Err(reason) = healthy {
                return Err(failed(format!("Healing {} failed: {reason}", r.logical_id)));
            }
        }
        Ok(run.snapshot().await.attributes())
    }
}

impl<'a> Run<'a> {
    async fn load(
        engine: &'a Engine,
        op: &'a Op,
        logical_id: &str,
        physical_id: &str,
    ) -> Result<Run<'a>, ProviderError> {
        let stored = engine
            .store
            .group(&op.stack.stack_id, physical_id)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let state = match stored {
            Some(v) => serde_json::from_value(v).map_err(|e| {
                failed(format!(
                    "the stored state of group {logical_id} is unreadable: {e}"
                ))
            })?,
            None => GroupState::default(),
        };
        Ok(Run {
            engine,
            op,
            logical_id: logical_id.to_string(),
            physical_id: physical_id.to_string(),
            state: tokio::sync::Mutex::new(state),
        })
    }

    async fn snapshot(&self) -> GroupState {
        self.state.lock().await.clone()
    }

    /// A write that did not hold: the operation stops (as for any resource).
    fn lost(&self, e: crate::store::StoreError) -> ProviderError {
        tracing::error!(stack = %self.op.stack.stack_name, group = %self.logical_id, "cannot record group state: {e}");
        self.op.aborted.store(true, Ordering::SeqCst);
        failed(format!(
            "cannot record the state of group {}: {e}",
            self.logical_id
        ))
    }

    /// Applies `change` to the state and stores it with `events`.
    async fn save(
        &self,
        events: Vec<EventRecord>,
        change: impl FnOnce(&mut GroupState),
    ) -> Result<(), ProviderError> {
        if self.op.aborted.load(Ordering::SeqCst) {
            return Err(failed("the operation lost its lease"));
        }
        let mut st = self.state.lock().await;
        change(&mut st);
        let doc = serde_json::to_value(&*st).map_err(|e| failed(e.to_string()))?;
        self.engine
            .store
            .put_group(
                &self.op.lease,
                &self.logical_id,
                &self.physical_id,
                Some(&doc),
                &events,
            )
            .await
            .map_err(|e| self.lost(e))
    }

    /// A member's event, as a template resource's (its name as logical id).
    fn event(&self, m: &Member) -> EventRecord {
        EventRecord {
            event_id: uuid::Uuid::new_v4().to_string(),
            stack_id: self.op.stack.stack_id.clone(),
            stack_name: self.op.stack.stack_name.clone(),
            logical_id: m.name.clone(),
            physical_id: m.physical_id.clone().unwrap_or_default(),
            resource_type: m.resource_type.clone(),
            timestamp: m.updated_at.clone(),
            status: m.status.as_str().into(),
            status_reason: m.status_reason.clone(),
            properties: Some(
                self.op
                    .mask(Value::Object(m.properties.clone()).to_string()),
            ),
        }
    }

    /// A progress event of the group itself (e.g. a batch starting).
    fn progress(&self, reason: String) -> EventRecord {
        let status = match self.op.stack.status {
            StackStatus::CreateInProgress => ResourceStatus::CreateInProgress,
            StackStatus::DeleteInProgress | StackStatus::RollbackInProgress => {
                ResourceStatus::DeleteInProgress
            }
            _ => ResourceStatus::UpdateInProgress,
        };
        let type_name = self
            .op
            .template
            .resource(&self.logical_id)
            .map(|r| r.type_name.clone())
            .unwrap_or_default();
        EventRecord {
            event_id: uuid::Uuid::new_v4().to_string(),
            stack_id: self.op.stack.stack_id.clone(),
            stack_name: self.op.stack.stack_name.clone(),
            logical_id: self.logical_id.clone(),
            physical_id: self.physical_id.clone(),
            resource_type: type_name,
            timestamp: now(),
            status: status.as_str().into(),
            status_reason: Some(reason),
            properties: None,
        }
    }

    fn context(&self, m: &Member, request_id: &str) -> cairn_sdk::RequestContext {
        self.engine
            .context(self.op, &m.name, &m.resource_type, request_id)
    }

    async fn bounded<T>(&self, work: Vec<impl std::future::Future<Output = T>>) -> Vec<T> {
        bounded(self.engine.config.engine.max_concurrency, work).await
    }

    /// Finishes what a crash interrupted and clears failures: members with
    /// a call in flight get it again (same request id); failed members are
    /// deleted.
    async fn settle(&self) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        let resumed: Vec<Member> = st
            .members
            .iter()
            .filter(|m| m.pending.as_ref().is_some_and(|p| p.action == "CREATE"))
            .cloned()
            .collect();
        let work: Vec<_> = resumed.into_iter().map(|m| self.finish_create(m)).collect();
        // A failed one is deleted just below.
        self.bounded(work).await;
        let doomed: Vec<String> = self
            .snapshot()
            .await
            .members
            .iter()
            .filter(|m| {
                m.pending.as_ref().is_some_and(|p| p.action == "DELETE")
                    || matches!(
                        m.status,
                        ResourceStatus::CreateFailed | ResourceStatus::DeleteFailed
                    )
            })
            .map(|m| m.name.clone())
            .collect();
        self.delete_members(&doomed).await
    }

    /// Creates the members `indices` from `definition` in parallel; the
    /// first failure's reason, if any (the others are still awaited).
    async fn create_members(
        &self,
        prefix: &str,
        indices: &[u64],
        launch_configuration: &str,
        definition: &MemberDefinition,
    ) -> Result<(), String> {
        let work: Vec<_> = indices
            .iter()
            .map(|i| self.create_member(prefix, *i, launch_configuration, definition))
            .collect();
        self.bounded(work).await.into_iter().collect()
    }

    async fn create_member(
        &self,
        prefix: &str,
        index: u64,
        launch_configuration: &str,
        definition: &MemberDefinition,
    ) -> Result<(), String> {
        let name = naming::member_name(prefix, index);
        if let Some(existing) = self.state.lock().await.member(&name).cloned() {
            if existing.pending.is_some() {
                return self.finish_create(existing).await;
            }
            return match existing.status {
                ResourceStatus::CreateFailed => Err(format!(
                    "{name}: {}",
                    existing.status_reason.unwrap_or_default()
                )),
                _ => Ok(()),
            };
        }
        let mut m = Member {
            name: name.clone(),
            index,
            resource_type: definition.member_type.clone(),
            launch_configuration: launch_configuration.to_string(),
            physical_id: None,
            status: ResourceStatus::CreateInProgress,
            status_reason: None,
            properties: definition.properties.clone(),
            attributes: Map::new(),
            pending: None,
            updated_at: now(),
        };
        let started = self.event(&m);
        m.status_reason = Some("Resource creation Initiated".into());
        m.pending = Some(PendingCall {
            action: "CREATE".into(),
            request_id: uuid::Uuid::new_v4().to_string(),
        });
        m.updated_at = now();
        let initiated = self.event(&m);
        let stored = m.clone();
        // Durable before the call: a crash from here on re-issues it.
        self.save(vec![started, initiated], |st| st.put(stored))
            .await
            .map_err(|e| e.message)?;
        self.finish_create(m).await
    }

    /// Makes (or re-issues) the member's recorded create call and records
    /// the outcome.
    async fn finish_create(&self, mut m: Member) -> Result<(), String> {
        let request_id = m
            .pending
            .as_ref()
            .map(|p| p.request_id.clone())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let outcome = match self.engine.provider_for(&m.resource_type) {
            Ok(t) => {
                let req = CreateRequest {
                    context: self.context(&m, &request_id),
                    properties: m.properties.clone(),
                };
                self.engine.timed("creation", t.provider.create(&req)).await
            }
            Err(e) => Err(e),
        };
        // As for template resources: a timed-out call may have made the
        // member, so its record stays for the delete to ask again.
        let unknown = matches!(&outcome, Err(e) if e.kind == ErrorKind::Timeout && e.physical_resource_id.is_none());
        if !unknown {
            m.pending = None;
        }
        m.updated_at = now();
        let reason = match outcome {
            Ok(made) => {
                m.physical_id = Some(made.physical_resource_id);
                m.attributes = made.attributes;
                m.status = ResourceStatus::CreateComplete;
                m.status_reason = None;
                None
            }
            Err(e) => {
                m.status = ResourceStatus::CreateFailed;
                m.status_reason = Some(e.message.clone());
                if e.physical_resource_id.is_some() {
                    m.physical_id = e.physical_resource_id;
                }
                Some(format!("{}: {}", m.name, e.message))
            }
        };
        let event = self.event(&m);
        self.save(vec![event], |st| st.put(m))
            .await
            .map_err(|e| e.message)?;
        reason.map_or(Ok(()), Err)
    }

    /// Deletes the named members in parallel; all are tried, the first
    /// failure is returned.
    async fn delete_members(&self, names: &[String]) -> Result<(), ProviderError> {
        let work: Vec<_> = names
            .iter()
            .map(|n| self.delete_member(n.clone()))
            .collect();
        self.bounded(work)
            .await
            .into_iter()
            .collect::<Result<(), String>>()
            .map_err(failed)
    }

    async fn delete_member(&self, name: String) -> Result<(), String> {
        let Some(mut m) = self.state.lock().await.member(&name).cloned() else {
            return Ok(());
        };
        // A create whose outcome is unknown: ask again first, to learn the
        // physical id of what it made.
        if m.pending.as_ref().is_some_and(|p| p.action == "CREATE") {
            let _ = self.finish_create(m.clone()).await;
            match self.state.lock().await.member(&name).cloned() {
                Some(now_known) if now_known.pending.is_none() => m = now_known,
                _ => {
                    return Err(format!(
                        "{name}: cannot tell whether the create that did not finish made a resource; delete again when the provider answers"
                    ))
                }
            }
        }
        let Some(physical) = m.physical_id.clone() else {
            // Nothing was made: the member only leaves the state.
            m.status = ResourceStatus::DeleteComplete;
            m.status_reason = None;
            m.updated_at = now();
            let event = self.event(&m);
            return self
                .save(vec![event], |st| st.remove(&name))
                .await
                .map_err(|e| e.message);
        };
        let request_id = match m.pending.as_ref().filter(|p| p.action == "DELETE") {
            Some(p) => p.request_id.clone(),
            None => {
                let id = uuid::Uuid::new_v4().to_string();
                m.pending = Some(PendingCall {
                    action: "DELETE".into(),
                    request_id: id.clone(),
                });
                m.status = ResourceStatus::DeleteInProgress;
                m.status_reason = None;
                m.updated_at = now();
                let event = self.event(&m);
                let stored = m.clone();
                self.save(vec![event], |st| st.put(stored))
                    .await
                    .map_err(|e| e.message)?;
                id
            }
        };
        let outcome = match self.engine.provider_for(&m.resource_type) {
            Ok(t) => {
                let req = DeleteRequest {
                    context: self.context(&m, &request_id),
                    physical_resource_id: physical,
                    properties: m.properties.clone(),
                };
                match self.engine.timed("deletion", t.provider.delete(&req)).await {
                    Err(e) if e.is_not_found() => Ok(()),
                    other => other,
                }
            }
            Err(e) => Err(e),
        };
        m.pending = None;
        m.updated_at = now();
        match outcome {
            Ok(()) => {
                m.status = ResourceStatus::DeleteComplete;
                m.status_reason = None;
                let event = self.event(&m);
                self.save(vec![event], |st| st.remove(&name))
                    .await
                    .map_err(|e| e.message)
            }
            Err(e) => {
                m.status = ResourceStatus::DeleteFailed;
                m.status_reason = Some(e.message.clone());
                let event = self.event(&m);
                self.save(vec![event], |st| st.put(m))
                    .await
                    .map_err(|e| e.message)?;
                Err(format!("{name}: {}", e.message))
            }
        }
    }

    /// Asks the member's provider until it reports healthy, or fails after
    /// the health timeout with the last reason.
    async fn wait_healthy(&self, name: &str) -> Result<(), String> {
        let limit = Duration::from_secs(self.engine.config.engine.health_timeout_seconds);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let reason = match self.health(name).await {
                Ok(()) => return Ok(()),
                Err(reason) => reason,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "{name} did not report healthy within {} seconds: {reason}",
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(HEALTH_POLL).await;
        }
    }

    /// One health check of a member: Ok when healthy, else the reason.
    async fn health(&self, name: &str) -> Result<(), String> {
        let Some(m) = self.state.lock().await.member(name).cloned() else {
            return Err(format!("{name} is not a member"));
        };
        let Some(physical) = m.physical_id.clone().filter(|_| m.is_in_service()) else {
            return Err(format!("{name} is {}", m.status));
        };
        let t = self
            .engine
            .provider_for(&m.resource_type)
            .map_err(|e| e.message)?;
        let req = StatusRequest {
            context: self.context(&m, &uuid::Uuid::new_v4().to_string()),
            physical_resource_id: physical,
            properties: m.properties.clone(),
        };
        match self
            .engine
            .timed("status check", t.provider.check_status(&req))
            .await
        {
            Ok(Health::Healthy) => Ok(()),
            Ok(Health::Unhealthy { reason }) => Err(reason),
            Err(e) => Err(e.message),
        }
    }

    /// The rolling replacement, when one is due: the launch configuration
    /// changed under a RollingUpdate policy, or one is stored (a crash, or a
    /// rollback of a failed one, which runs under the same policy).
    async fn roll(
        &self,
        spec: &GroupSpec,
        definition: &MemberDefinition,
        policy: Option<RollingUpdate>,
        launch_changed: bool,
    ) -> Result<(), ProviderError> {
        let target = spec.launch_configuration.as_str();
        let stored = self.snapshot().await.rollout;
        let rollout = match stored {
            Some(r) if r.target == target => r,
            Some(r) => self.plan_rollout(spec, r.policy).await?,
            None => match policy {
                Some(p) if launch_changed => self.plan_rollout(spec, p).await?,
                _ => return Ok(()),
            },
        };
        let total = rollout.batches.len();
        for i in rollout.done..total {
            if i > 0 && rollout.policy.pause_ms > 0 {
                tokio::time::sleep(rollout.policy.pause()).await;
            }
            let batch = &rollout.batches[i];
            let names = |ix: &[u64]| {
                ix.iter()
                    .map(|x| naming::member_name(&spec.prefix, *x))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let start = self.progress(format!(
                "Rolling update batch {} of {total}: creating {}, then deleting {}",
                i + 1,
                names(&batch.create),
                names(&batch.replace)
            ));
            self.save(vec![start], |_| {}).await?;
            if let Err(reason) = self
                .run_batch(spec, definition, &rollout.policy, batch)
                .await
            {
                // Undo the batch's new members; the old ones still serve.
                let made: Vec<String> = batch
                    .create
                    .iter()
                    .map(|x| naming::member_name(&spec.prefix, *x))
                    .collect();
                let undone = self.delete_members(&made).await;
                let message = format!(
                    "Rolling update of {} failed in batch {} of {total}: {reason}",
                    self.logical_id,
                    i + 1
                );
                return Err(match undone {
                    Ok(()) => failed(message),
                    Err(e) => failed(format!(
                        "{message}; undoing the batch failed too: {}",
                        e.message
                    )),
                });
            }
            self.save(Vec::new(), |st| {
                if let Some(r) = st.rollout.as_mut() {
                    r.done = i + 1;
                }
            })
            .await?;
        }
        self.save(Vec::new(), |st| st.rollout = None).await
    }

    /// Plans (and stores, before anything runs) the replacement of every
    /// member not made from the target launch configuration. A group larger
    /// than asked shrinks first, so no surplus member is replaced.
    async fn plan_rollout(
        &self,
        spec: &GroupSpec,
        policy: RollingUpdate,
    ) -> Result<Rollout, ProviderError> {
        self.shrink_to(spec.size).await?;
        let st = self.snapshot().await;
        let stale: Vec<u64> = st
            .members
            .iter()
            .filter(|m| m.launch_configuration != spec.launch_configuration)
            .map(|m| m.index)
            .collect();
        let rollout = Rollout {
            target: spec.launch_configuration.clone(),
            batches: naming::rolling_plan_of(&st.indices(), &stale, policy.max_batch_size as usize),
            policy,
            done: 0,
        };
        let stored = rollout.clone();
        self.save(Vec::new(), |st| st.rollout = Some(stored))
            .await?;
        Ok(rollout)
    }

    /// One batch: create its members (in parallel), wait until they are
    /// healthy, check that MinInstancesInService healthy members remain
    /// without the ones it replaces, delete those.
    async fn run_batch(
        &self,
        spec: &GroupSpec,
        definition: &MemberDefinition,
        policy: &RollingUpdate,
        batch: &Batch,
    ) -> Result<(), String> {
        self.create_members(
            &spec.prefix,
            &batch.create,
            &spec.launch_configuration,
            definition,
        )
        .await?;
        let new: Vec<String> = batch
            .create
            .iter()
            .map(|x| naming::member_name(&spec.prefix, *x))
            .collect();
        let checks: Vec<_> = new.iter().map(|n| self.wait_healthy(n)).collect();
        self.bounded(checks)
            .await
            .into_iter()
            .collect::<Result<(), String>>()?;
        let old: Vec<String> = batch
            .replace
            .iter()
            .map(|x| naming::member_name(&spec.prefix, *x))
            .collect();
        let staying: Vec<String> = self
            .snapshot()
            .await
            .members
            .iter()
            .filter(|m| m.is_in_service() && !old.contains(&m.name) && !new.contains(&m.name))
            .map(|m| m.name.clone())
            .collect();
        let checks: Vec<_> = staying.iter().map(|n| self.health(n)).collect();
        let healthy_staying = self
            .bounded(checks)
            .await
            .iter()
            .filter(|h| h.is_ok())
            .count();
        let healthy = healthy_staying + new.len();
        let min = policy.min_instances_in_service as usize;
        if healthy < min {
            return Err(format!(
                "deleting {} would leave {healthy} healthy members, fewer than MinInstancesInService {min}",
                old.join(", ")
            ));
        }
        self.delete_members(&old).await.map_err(|e| e.message)
    }

    /// Deletes the highest-numbered members down to `size`.
    async fn shrink_to(&self, size: usize) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        let doomed: Vec<String> = naming::shrink(&st.indices(), size)
            .into_iter()
            .filter_map(|i| st.members.iter().find(|m| m.index == i))
            .map(|m| m.name.clone())
            .collect();
        self.delete_members(&doomed).await
    }

    /// Grows (new members from the current launch configuration, after the
    /// highest index) or shrinks (the highest indices) to the asked size.
    /// Without a rolling update, this is the only way a new launch
    /// configuration reaches members (CloudFormation's behaviour).
    async fn resize(
        &self,
        spec: &GroupSpec,
        definition: &MemberDefinition,
    ) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        if st.members.len() > spec.size {
            return self.shrink_to(spec.size).await;
        }
        let adding = naming::grow(&st.indices(), spec.size);
        if adding.is_empty() {
            return Ok(());
        }
        self.create_members(
            &spec.prefix,
            &adding,
            &spec.launch_configuration,
            definition,
        )
        .await
        .map_err(|reason| {
            failed(format!(
                "{} could not grow to {} members: {reason}",
                self.logical_id, spec.size
            ))
        })
    }
}
