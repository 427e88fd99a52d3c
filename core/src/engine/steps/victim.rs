//! An update's cleanup victims: the physical resources its cleanup (or
//! its rollback's) deletes. A victim's delete is recorded in events that
//! carry its physical id, the row's status never changing (seed 000); the
//! call's request id is kept on its row (a removed row's `pending`, or the
//! journal snapshot of a replaced resource), or, for a physical resource
//! no row uses any more (what a kept failed update left), only in the
//! events. Tried `[engine] cleanup_attempts` times with backoff, then
//! disassociated.

use cairn_sdk::CreateResult;

use super::call;
use super::delete::{Ledger, Ready, Retries};
use super::Callee;
use crate::engine::{Op, Steps};
use crate::stack::{
    now, CallKind, EventRecord, Journal, PendingCall, ResourceRecord, ResourceStatus, Snapshot,
};

/// Something an update's cleanup deletes.
#[derive(Clone)]
pub(in crate::engine) struct Victim {
    pub logical_id: String,
    pub target: Snapshot,
    pub owner: VictimOf,
    pub retain: bool,
}

#[derive(Clone)]
pub(in crate::engine) enum VictimOf {
    /// The whole row goes (a removed, or rolled-back added, resource).
    Row(Box<ResourceRecord>),
    /// An old or abandoned physical resource of this row, which stays (as it
    /// was when the cleanup started; only its journal changes).
    Kept(Box<ResourceRecord>),
    /// A physical resource a kept failed update left that no row uses
    /// (see `kept`): only events record its delete; the operation's
    /// options keep it until the operation ends.
    Superseded,
}

impl Steps<'_> {
    /// One cleanup delete (see the module's documentation). `true` when
    /// deleted or retained.
    pub(in crate::engine) async fn delete_victim(&self, op: &Op, v: Victim) -> bool {
        let mut ledger = VictimLedger {
            steps: *self,
            op,
            v,
        };
        if ledger.v.retain {
            let ev = ledger.event(ResourceStatus::DeleteSkipped, None);
            ledger.finish(vec![ev]).await;
            return true;
        }
        let probe = ledger.row();
        let retries = Retries {
            attempts: self.config.engine.cleanup_attempts.max(1),
            backoff_seconds: self.config.engine.cleanup_backoff_seconds,
        };
        self.delete(op, &Callee::Resource(&probe), &mut ledger, retries)
            .await
    }
}

struct VictimLedger<'a> {
    steps: Steps<'a>,
    op: &'a Op,
    v: Victim,
}

impl VictimLedger<'_> {
    /// A record carrying the victim's identity, for events and provider
    /// calls.
    fn row(&self) -> ResourceRecord {
        let v = &self.v;
        ResourceRecord {
            stack_id: self.op.stack.stack_id.clone(),
            logical_id: v.logical_id.clone(),
            resource_type: v.target.resource_type.clone(),
            physical_id: v.target.physical_id.clone(),
            status: v.target.status,
            status_reason: None,
            properties: v.target.properties.clone(),
            attributes: v.target.attributes.clone(),
            pending: None,
            updated_at: now(),
            metadata: None,
            journal: None,
            no_echo: v.target.no_echo,
            type_version: v.target.type_version.clone(),
        }
    }

    fn event(&self, status: ResourceStatus, reason: Option<String>) -> EventRecord {
        let mut row = self.row();
        row.status = status;
        row.status_reason = reason;
        self.op.resource_event(&row)
    }

    /// Records the victim's delete request on its row (the row's status
    /// does not change) with its DELETE_IN_PROGRESS event.
    async fn begin(&mut self, delete: PendingCall, started: EventRecord) -> bool {
        let pending = Some(delete);
        // The whole target goes with it: a physical id just learnt by
        // asking again about its create must not be lost to a crash.
        self.v.target.pending = pending.clone();
        let target = self.v.target.clone();
        let row = match &mut self.v.owner {
            VictimOf::Row(row) => {
                row.physical_id = target.physical_id.clone();
                row.pending = pending;
                row
            }
            VictimOf::Kept(row) => {
                match &mut row.journal {
                    Some(Journal::Changed { before }) => **before = target,
                    Some(Journal::Restored { discard: Some(d) }) => **d = target,
                    _ => {}
                }
                row
            }
            VictimOf::Superseded => return self.note(vec![started]).await,
        };
        let written = self
            .steps
            .store
            .put_resource(&self.op.lease, row, vec![started])
            .await;
        self.steps.held(self.op, &self.v.logical_id, written)
    }

    /// Records events about the victim without changing its row.
    async fn note(&self, events: Vec<EventRecord>) -> bool {
        let written = self.steps.store.put_events(&self.op.lease, &events).await;
        self.steps.held(self.op, &self.v.logical_id, written)
    }

    /// The victim is gone (or given up): drop the row, or forget the old
    /// physical resource on it, with the final events.
    async fn finish(&self, events: Vec<EventRecord>) -> bool {
        let store = &self.steps.store;
        let lease = &self.op.lease;
        let result = match &self.v.owner {
            VictimOf::Row(_) => {
                store
                    .remove_resource(lease, &self.v.logical_id, &events)
                    .await
            }
            VictimOf::Kept(row) => {
                let mut row = (**row).clone();
                row.journal = match row.journal {
                    Some(Journal::Restored { .. }) => Some(Journal::Restored { discard: None }),
                    _ => None,
                };
                store.put_resource(lease, &row, events).await
            }
            VictimOf::Superseded => store.put_events(lease, &events).await,
        };
        self.steps.held(self.op, &self.v.logical_id, result)
    }
}

#[async_trait::async_trait]
impl Ledger for VictimLedger<'_> {
    fn physical(&self) -> Option<String> {
        self.v.target.physical_id.clone()
    }

    fn recorded(&self) -> Option<&PendingCall> {
        self.v.target.pending.as_ref()
    }

    fn learnt(&mut self, made: Option<CreateResult>) {
        if let Some(created) = made {
            self.v.target.physical_id = Some(created.physical_resource_id);
        }
    }

    /// A superseded resource has no row to record its delete on: its
    /// events say how far the delete got before a crash.
    async fn ready(&mut self) -> Ready {
        if !matches!(self.v.owner, VictimOf::Superseded) {
            return Ready::Go;
        }
        let physical = self.v.target.physical_id.clone();
        let step = self
            .steps
            .superseded_step(self.op, &self.v.logical_id, physical.as_deref())
            .await;
        match step {
            Ok(Some(ResourceStatus::DeleteComplete)) => Ready::Done(true),
            Ok(Some(ResourceStatus::DeleteInProgress | ResourceStatus::DeleteFailed)) => {
                // Announced before a crash: taken up, not announced again.
                self.v.target.pending = Some(call::begin(CallKind::Delete));
                Ready::Go
            }
            Ok(_) => Ready::Go,
            Err(e) => {
                tracing::warn!(stack = %self.op.stack.stack_id, "cannot read the events of a superseded resource's delete: {e}");
                Ready::Done(false)
            }
        }
    }

    async fn sending(&mut self, call: &PendingCall, n: u32, resumed: bool) -> bool {
        let started = self.event(ResourceStatus::DeleteInProgress, None);
        match (n, resumed) {
            // The request id is durable with the first announcement: a
            // crash from here on resumes this delete (and does not
            // announce it again).
            (1, false) => self.begin(call.clone(), started).await,
            (1, true) => true,
            _ => self.note(vec![started]).await,
        }
    }

    async fn retrying(&mut self, reason: &str) -> bool {
        let failed = self.event(ResourceStatus::DeleteFailed, Some(reason.to_string()));
        self.note(vec![failed]).await
    }

    async fn deleted(&mut self) -> bool {
        let done = self.event(ResourceStatus::DeleteComplete, None);
        self.finish(vec![done]).await
    }

    async fn failed(&mut self, reason: String) {
        let failed = self.event(ResourceStatus::DeleteFailed, Some(reason));
        self.finish(vec![failed]).await;
    }

    /// Not forgotten: the victim keeps its record (the rollback fails and
    /// keeps its journal; a forward cleanup keeps the removed row).
    async fn unknown(&mut self, reason: String) {
        let failed = self.event(ResourceStatus::DeleteFailed, Some(reason));
        self.note(vec![failed]).await;
    }
}
