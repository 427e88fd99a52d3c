//! `cairn update`'s calls on one resource: an update in place with the
//! drift it was decided on (the resource as it was kept in the row's
//! journal, so a crash resumes the call), then the delete of the physical
//! resource a provider replaced while updating it; and a reinstall (the
//! delete, then the create), each call recorded before it is made.
//!
//! An in-place update that fails while naming a new physical id (a
//! handler that made a new resource, then failed): the update failed, so
//! the row keeps the resource it had (its properties as before), and the
//! new one is the journal's discard (`Journal::Restored`), deleted by the
//! next `cairn update` first, or with the stack; a template update refuses
//! to start while it is there. Neither id is forgotten.

use cairn_sdk::{PropertyDifference, UpdateResult};
use serde_json::Map;

use super::call;
use super::create::{Then, REPLACED};
use super::delete::{Ledger, Retries};
use super::victim::{Victim, VictimOf};
use super::Callee;
use crate::engine::protocol::UpdateChange;
use crate::engine::{Attempt, Op, Steps};
use crate::stack::{now, CallKind, Journal, PendingCall, ResourceRecord, ResourceStatus};

/// The changed property names and the drift an in-place update is sent
/// with (`UpdateRequest.changed`, `UpdateRequest.drift`).
pub(in crate::engine) type Change = (Vec<String>, Option<Vec<PropertyDifference>>);

impl Steps<'_> {
    /// Starts an in-place update of `rec` (as it shows the step, its
    /// journal keeping what it was): the call recorded, then sent with
    /// `change`, then the replaced resource's delete.
    pub(in crate::engine) async fn reconcile_in_place(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        change: Change,
    ) -> bool {
        rec.pending = Some(call::begin(CallKind::Update));
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        self.finish_in_place(op, rec, Some(change)).await
    }

    /// Continues an in-place update from what its row records: the update
    /// call (`change`: sent now, with the drift it was decided on; `None`:
    /// recorded before a crash, so its outcome is learnt, not sent again),
    /// then the delete of the physical resource the provider replaced. A
    /// discard a failed update left is deleted.
    pub(in crate::engine) async fn finish_in_place(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        change: Option<Change>,
    ) -> bool {
        if let Some(Journal::Restored {
            discard: Some(discard),
        }) = rec.journal.clone()
        {
            let victim = Victim {
                logical_id: rec.logical_id.clone(),
                target: *discard,
                owner: VictimOf::Kept(Box::new(rec.clone())),
                retain: false,
            };
            if !self.delete_victim(op, victim).await {
                return false;
            }
            rec.journal = None;
            return self.record(op, &rec, Vec::new()).await;
        }
        let Some(Journal::Changed { before }) = rec.journal.clone() else {
            return false;
        };
        let Some(call) = call::recorded(rec.pending.as_ref(), CallKind::Update).cloned() else {
            // The update is done; what is left is the replaced resource.
            return self.delete_replaced(op, rec, Attempt::Again).await;
        };
        let physical = before.physical_id.clone().unwrap_or_default();
        let (changed, drift, attempt) = match change {
            Some((changed, drift)) => (changed, drift, Attempt::First),
            None => (
                crate::plan::changed_properties(&before.properties, &rec.properties),
                None,
                Attempt::Again,
            ),
        };
        let heal_members = drift.is_some();
        let change = UpdateChange {
            properties: &rec.properties,
            old_properties: &before.properties,
            changed,
            drift,
            attempt,
        };
        let mut result = self.send_update(op, &rec, &before, &call, change).await;
        // A group whose members drifted: converged, then its members healed.
        if result.is_ok()
            && heal_members
            && crate::group::is_group(self.registry.canonical(&rec.resource_type))
        {
            result = self
                .protocol()
                .heal_group(op, &rec)
                .await
                .map(|attributes| UpdateResult {
                    physical_resource_id: None,
                    attributes,
                    no_echo: false,
                });
        }
        let replaced_by = |p: &Option<String>| p.as_ref().filter(|p| **p != physical).cloned();
        match result {
            // The provider replaced the resource while updating it (a
            // custom resource answering with a new PhysicalResourceId): the
            // new id and the delete of the old one are recorded together,
            // before that delete, as an update's cleanup would delete it.
            Ok(out) if replaced_by(&out.physical_resource_id).is_some() => {
                let new_physical = out.physical_resource_id.clone().unwrap_or_default();
                rec.physical_id = out.physical_resource_id;
                rec.attributes = out.attributes;
                rec.no_echo = out.no_echo;
                rec.status_reason = Some(format!(
                    "The provider replaced {physical} with {new_physical} while updating it: deleting {physical}"
                ));
                rec.pending = Some(call::begin(CallKind::Delete));
                rec.updated_at = now();
                if !self.record(op, &rec, Vec::new()).await {
                    return false;
                }
                op.results
                    .record(&rec.logical_id, &new_physical, &rec.attributes);
                self.delete_replaced(op, rec, Attempt::First).await
            }
            // It failed, naming a new physical resource: the row keeps its
            // own, the new one is the journal's discard (never forgotten).
            Err(e) if replaced_by(&e.physical_resource_id).is_some() => {
                let left = e.physical_resource_id.clone().unwrap_or_default();
                let mut made = rec.snapshot();
                made.physical_id = Some(left.clone());
                made.pending = None;
                made.attributes = Map::new();
                rec.restore(&before);
                rec.pending = None;
                rec.status = ResourceStatus::UpdateFailed;
                rec.status_reason = Some(format!(
                    "{} The provider left {left} behind when the update of {physical} failed: the next cairn update deletes it (deleting the stack does too).",
                    e.message.trim_end()
                ));
                rec.journal = Some(Journal::Restored {
                    discard: Some(Box::new(made)),
                });
                rec.updated_at = now();
                self.record(op, &rec, Vec::new()).await;
                false
            }
            result => {
                rec.journal = None;
                self.record_updated(op, rec, result).await
            }
        }
    }

    /// Deletes the physical resource the journal names, which the provider
    /// replaced while updating in place, with its recorded delete call
    /// (`recorded`: sent now, or recorded before a crash), or a new one
    /// when none is recorded (the retry of a delete that failed). Deleted:
    /// UPDATE_COMPLETE. A failed delete keeps it in the journal: the next
    /// `cairn update` deletes it first, and so does deleting the stack.
    async fn delete_replaced(&self, op: &Op, mut rec: ResourceRecord, recorded: Attempt) -> bool {
        let Some(Journal::Changed { before }) = rec.journal.clone() else {
            return false;
        };
        let old = match before.physical_id.clone() {
            Some(old) if before.physical_id != rec.physical_id => old,
            // Nothing was replaced: the journal has no more work.
            _ => {
                rec.journal = None;
                rec.pending = None;
                return self.record(op, &rec, Vec::new()).await;
            }
        };
        // UpdateReplacePolicy: Retain keeps it, out of the stack.
        if crate::engine::update::retains_on_replace(op, &rec.logical_id) {
            rec.journal = None;
            rec.pending = None;
            rec.status = ResourceStatus::UpdateComplete;
            rec.status_reason = None;
            rec.updated_at = now();
            return self.record(op, &rec, Vec::new()).await;
        }
        let given = call::recorded(rec.pending.as_ref(), CallKind::Delete)
            .cloned()
            .map(|c| (c, recorded));
        let mut gone = rec.clone();
        gone.restore(&before);
        let mut ledger = Replaced {
            steps: *self,
            op,
            rec,
            old,
            given,
        };
        self.delete(op, &Callee::Resource(&gone), &mut ledger, Retries::ONCE)
            .await
    }

    /// Starts a reinstall of `rec` (as it shows the step): its delete
    /// recorded (when it has a physical resource), then the delete and the
    /// create.
    pub(in crate::engine) async fn reinstall(&self, op: &Op, mut rec: ResourceRecord) -> bool {
        rec.pending = rec
            .physical_id
            .as_ref()
            .map(|_| call::begin(CallKind::Delete));
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        self.finish_reinstall(op, rec, Attempt::First).await
    }

    /// Continues a reinstall from its recorded call: the delete (NotFound
    /// counts as deleted), then the create. `delete`: whether the recorded
    /// delete is sent now (`First`) or was recorded before a crash
    /// (`Again`). A create recorded before this step is learnt, not sent
    /// again.
    pub(in crate::engine) async fn finish_reinstall(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        delete: Attempt,
    ) -> bool {
        if let Some(p) = call::recorded(rec.pending.as_ref(), CallKind::Delete).cloned() {
            let callee = rec.clone();
            let physical = rec.physical_id.clone().unwrap_or_default();
            let mut ledger = ReinstallDelete {
                steps: *self,
                op,
                rec: rec.clone(),
                given: (p, delete),
                physical,
            };
            if !self
                .delete(op, &Callee::Resource(&callee), &mut ledger, Retries::ONCE)
                .await
            {
                return false;
            }
            match self
                .protocol()
                .properties_for(op, &rec.logical_id)
                .and_then(|(_, p)| Ok((p, self.protocol().metadata_for(op, &rec.logical_id)?)))
            {
                Ok((props, metadata)) => {
                    rec.properties = props;
                    rec.metadata = metadata;
                }
                Err(reason) => {
                    rec.status = ResourceStatus::UpdateFailed;
                    rec.status_reason = Some(reason);
                    rec.pending = None;
                    rec.physical_id = None;
                    rec.updated_at = now();
                    self.record(op, &rec, Vec::new()).await;
                    return false;
                }
            }
            op.results.forget(&rec.logical_id);
            rec.physical_id = None;
            rec.attributes = Map::new();
            rec.status_reason = Some("Resource creation Initiated".into());
            rec.pending = None;
            rec.updated_at = now();
            return self
                .create(op, rec, Vec::new(), Then::Record(REPLACED))
                .await;
        }
        if !self.create_in_flight(&rec) {
            return false;
        }
        self.create(op, rec, Vec::new(), Then::Record(REPLACED))
            .await
    }
}

/// The delete of the resource a provider replaced while updating in
/// place: recorded on the row (UPDATE_IN_PROGRESS, its journal keeping the
/// old resource until it is gone).
struct Replaced<'a> {
    steps: Steps<'a>,
    op: &'a Op,
    rec: ResourceRecord,
    old: String,
    given: Option<(PendingCall, Attempt)>,
}

#[async_trait::async_trait]
impl Ledger for Replaced<'_> {
    fn physical(&self) -> Option<String> {
        Some(self.old.clone())
    }

    fn recorded(&self) -> Option<&PendingCall> {
        self.rec.pending.as_ref()
    }

    fn given(&self) -> Option<(PendingCall, Attempt)> {
        self.given.clone()
    }

    async fn sending(&mut self, call: &PendingCall, _n: u32, _resumed: bool) -> bool {
        if self.given.is_some() {
            return true;
        }
        self.rec.pending = Some(call.clone());
        self.rec.status = ResourceStatus::UpdateInProgress;
        self.rec.status_reason = Some(format!(
            "Deleting {}, which the provider replaced with {} while updating it",
            self.old,
            self.rec.physical_id.as_deref().unwrap_or_default()
        ));
        self.rec.updated_at = now();
        self.steps.record(self.op, &self.rec, Vec::new()).await
    }

    async fn deleted(&mut self) -> bool {
        self.rec.pending = None;
        self.rec.updated_at = now();
        self.rec.journal = None;
        self.rec.status = ResourceStatus::UpdateComplete;
        self.rec.status_reason = None;
        self.steps.record(self.op, &self.rec, Vec::new()).await
    }

    async fn failed(&mut self, reason: String) {
        self.rec.pending = None;
        self.rec.updated_at = now();
        self.rec.status = ResourceStatus::UpdateFailed;
        self.rec.status_reason = Some(format!(
            "Updated, but the provider made {} in place of {old}, and deleting {old} failed: {reason}. Run cairn update again to delete it (deleting the stack deletes it too).",
            self.rec.physical_id.as_deref().unwrap_or_default(),
            old = self.old
        ));
        self.steps.record(self.op, &self.rec, Vec::new()).await;
    }

    async fn unknown(&mut self, reason: String) {
        self.failed(reason).await;
    }
}

/// A reinstall's delete: recorded with the reinstall's start; a failure
/// ends the reinstall (UPDATE_FAILED).
struct ReinstallDelete<'a> {
    steps: Steps<'a>,
    op: &'a Op,
    rec: ResourceRecord,
    given: (PendingCall, Attempt),
    physical: String,
}

#[async_trait::async_trait]
impl Ledger for ReinstallDelete<'_> {
    /// The physical id the reinstall's delete was recorded for (a row
    /// without one had no delete recorded).
    fn physical(&self) -> Option<String> {
        Some(self.physical.clone())
    }

    fn recorded(&self) -> Option<&PendingCall> {
        self.rec.pending.as_ref()
    }

    fn given(&self) -> Option<(PendingCall, Attempt)> {
        Some(self.given.clone())
    }

    async fn sending(&mut self, _call: &PendingCall, _n: u32, _resumed: bool) -> bool {
        true
    }

    async fn deleted(&mut self) -> bool {
        true
    }

    async fn failed(&mut self, reason: String) {
        self.rec.status = ResourceStatus::UpdateFailed;
        self.rec.status_reason = Some(format!(
            "Reinstall: deleting {} failed: {reason}",
            self.physical
        ));
        self.rec.pending = None;
        self.rec.updated_at = now();
        self.steps.record(self.op, &self.rec, Vec::new()).await;
    }

    async fn unknown(&mut self, reason: String) {
        self.failed(reason).await;
    }
}
