//! A row's in-place update: the call recorded before it is sent (the
//! resource as it was kept in the row's journal), or taken up again after
//! a crash with its request id (a handler never gets it twice), and its
//! outcome; and the update back of a rollback (properties = the old ones,
//! old properties = the abandoned ones).

use cairn_sdk::{ProviderError, UpdateResult};

use super::call;
use super::judged::Gate;
use crate::engine::protocol::UpdateChange;
use crate::engine::{Attempt, Op, Steps};
use crate::hooks::HookAction;
use crate::stack::{now, CallKind, Journal, PendingCall, ResourceRecord, ResourceStatus, Snapshot};

impl Steps<'_> {
    /// Updates `rec` in place from `before` (the journal's snapshot) to
    /// its properties: a new call recorded with `rec` as it shows the step,
    /// or the one recorded before a crash taken up. True when it is
    /// updated and recorded.
    pub(in crate::engine) async fn update_in_place(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        before: &Snapshot,
    ) -> bool {
        let (call, attempt) = call::begin_or_resume(rec.pending.as_ref(), CallKind::Update);
        if attempt == Attempt::First {
            let mut events = Vec::new();
            let gate = self
                .judged(
                    op,
                    &mut rec,
                    (HookAction::Update, CallKind::Update),
                    Some(&before.properties),
                    &mut events,
                )
                .await;
            match gate {
                Gate::Go => {}
                Gate::Refused(refusal) => {
                    // Nothing was sent: the row stays as it was (a
                    // rollback has nothing to undo), failed with the
                    // hooks' reason.
                    rec.restore(before);
                    rec.status = ResourceStatus::UpdateFailed;
                    rec.status_reason = Some(refusal);
                    rec.pending = None;
                    rec.updated_at = now();
                    self.record(op, &rec, events).await;
                    return false;
                }
                Gate::Stopped => return false,
            }
            rec.pending = Some(call.clone());
            rec.updated_at = now();
            if !self.record(op, &rec, events).await {
                return false;
            }
        }
        let forward = UpdateChange::between(&rec.properties, &before.properties, attempt);
        let result = self.send_update(op, &rec, before, &call, forward).await;
        self.record_updated(op, rec, result).await
    }

    /// Puts a resource changed in place back to `before`: one whose
    /// provider changed it is updated back (properties = OLD, old
    /// properties = NEW; the call recorded first, or taken up after a
    /// crash); then the row is `before` again (UPDATE_COMPLETE, its
    /// journal Restored).
    pub(in crate::engine) async fn roll_back_in_place(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        before: &Snapshot,
    ) -> bool {
        // A resource the update moved to another version of its type is
        // handed back to the version it had, even with its properties
        // unchanged.
        // An update the hooks were still judging was never sent: nothing
        // to update back.
        let sent = rec
            .pending
            .as_ref()
            .is_none_or(|p| p.action != CallKind::Hook);
        if sent && (rec.properties != before.properties || rec.type_version != before.type_version)
        {
            let (call, attempt) =
                call::begin_or_resume(rec.pending.as_ref(), CallKind::RollbackUpdate);
            rec.status = ResourceStatus::UpdateInProgress;
            rec.status_reason = None;
            rec.pending = Some(call.clone());
            rec.updated_at = now();
            if !self.record(op, &rec, Vec::new()).await {
                return false;
            }
            let back = UpdateChange::between(&before.properties, &rec.properties, attempt);
            // Sent to the version it goes back to; the row keeps the one
            // it has until the call's outcome is recorded (a resumed
            // rollback sees the move still to undo).
            let mut to = rec.clone();
            to.type_version = before.type_version.clone();
            match self.send_update(op, &to, before, &call, back).await {
                Ok(out) => {
                    rec.restore(before);
                    rec.attributes = out.attributes;
                    rec.no_echo = out.no_echo;
                }
                Err(e) => {
                    rec.pending = None;
                    rec.status = ResourceStatus::UpdateFailed;
                    rec.status_reason = Some(e.message);
                    rec.updated_at = now();
                    self.record(op, &rec, Vec::new()).await;
                    return false;
                }
            }
        } else {
            rec.restore(before);
        }
        rec.pending = None;
        rec.status = ResourceStatus::UpdateComplete;
        rec.status_reason = None;
        rec.journal = Some(Journal::Restored { discard: None });
        rec.updated_at = now();
        self.record(op, &rec, Vec::new()).await
    }

    /// The update call of `rec`, whose physical resource is `before`'s.
    pub(super) async fn send_update(
        &self,
        op: &Op,
        rec: &ResourceRecord,
        before: &Snapshot,
        call: &PendingCall,
        change: UpdateChange<'_>,
    ) -> Result<UpdateResult, ProviderError> {
        let physical = before.physical_id.clone().unwrap_or_default();
        self.protocol()
            .call_update_with(op, rec, &physical, &call.request_id, change)
            .await
    }

    /// Records the outcome of an in-place update: the physical id (if the
    /// provider answered with a new one), attributes and NoEcho learned, or
    /// the failure with any physical resource it left behind.
    pub(in crate::engine) async fn record_updated(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        result: Result<UpdateResult, ProviderError>,
    ) -> bool {
        rec.pending = None;
        rec.updated_at = now();
        match result {
            Ok(out) => {
                if let Some(p) = out.physical_resource_id {
                    rec.physical_id = Some(p);
                }
                rec.attributes = out.attributes;
                rec.no_echo = out.no_echo;
                rec.status = ResourceStatus::UpdateComplete;
                rec.status_reason = None;
                if !self.record(op, &rec, Vec::new()).await {
                    return false;
                }
                if let Some(p) = &rec.physical_id {
                    op.results.record(&rec.logical_id, p, &rec.attributes);
                }
                true
            }
            Err(e) => {
                rec.status = ResourceStatus::UpdateFailed;
                rec.status_reason = Some(e.message);
                // A replacement the failed call left behind is deleted by rollback.
                if e.physical_resource_id.is_some() {
                    rec.physical_id = e.physical_resource_id;
                }
                self.record(op, &rec, Vec::new()).await;
                false
            }
        }
    }
}
