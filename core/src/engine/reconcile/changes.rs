//! What `cairn update` does to one resource: heal it, update it in place
//! with its drift, adopt the template's properties, or reinstall it (delete,
//! then create). Each call is recorded before it is made, so that a crash
//! resumes it instead of sending another.

use crate::engine::kinds::Reconciles;
use std::sync::atomic::Ordering;

use cairn_sdk::{PropertyDifference, UpdateResult};
use serde_json::{Map, Value};

use crate::engine::protocol;
use crate::engine::protocol::UpdateChange;
use crate::engine::{Attempt, Op};
use crate::stack::{now, CallKind, Journal, ResourceRecord, ResourceStatus};
use crate::stack_policy::UpdateAction;

/// A group's attributes as an update's result (its physical id stays).
fn group_result(attributes: Map<String, Value>) -> UpdateResult {
    UpdateResult {
        physical_resource_id: None,
        attributes,
        no_echo: false,
    }
}

impl Reconciles<'_> {
    /// Heals one resource: a group replaces its unhealthy members, anything
    /// else is reinstalled.
    pub(super) async fn heal_one(&self, op: &Op, mut rec: ResourceRecord, why: &str) -> bool {
        if !crate::group::is_group(self.registry.canonical(&rec.resource_type)) {
            return self.reinstall(op, rec, &format!("Unhealthy: {why}")).await;
        }
        rec.status = ResourceStatus::UpdateInProgress;
        rec.status_reason = Some(format!("Unhealthy: {why}; healing"));
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        let healed = self.groups().group_heal(op, &rec).await.map(group_result);
        self.updates().record_updated(op, rec, healed).await
    }

    /// Whether the stack's policy denies `action` on `rec`: then the
    /// resource fails with the denial and nothing is called. (What the
    /// template changes is checked before the run starts; this catches
    /// what drift or health decided during it.)
    async fn denied(&self, op: &Op, rec: &mut ResourceRecord, action: UpdateAction) -> bool {
        let Some(denial) = op.policy_denies(action, &rec.logical_id, &rec.resource_type) else {
            return false;
        };
        rec.status = ResourceStatus::UpdateFailed;
        rec.status_reason = Some(denial);
        rec.updated_at = now();
        self.record(op, rec, Vec::new()).await;
        true
    }

    /// Records the template's properties for a resource whose provider
    /// reports it already matches them (seed 003: no update runs).
    pub(super) async fn adopt(&self, op: &Op, mut rec: ResourceRecord) -> bool {
        let Ok((_, props)) = self.protocol().properties_for(op, &rec.logical_id) else {
            return true;
        };
        rec.properties = props;
        if let Ok(metadata) = self.protocol().metadata_for(op, &rec.logical_id) {
            rec.metadata = metadata;
        }
        rec.status = ResourceStatus::UpdateComplete;
        rec.status_reason =
            Some("check_drift reports the resource in sync with the template: not updated".into());
        rec.updated_at = now();
        self.record(op, &rec, Vec::new()).await
    }

    /// The provider's update towards the template's properties, with the
    /// drift it reported (a group: converged, its drifted members healed).
    /// The call is recorded first, with the resource as it was in the
    /// journal: a crash resumes it ([`Reconciles::finish_in_place`]).
    pub(super) async fn update_in_place(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        changed: Vec<String>,
        drift: Option<Vec<PropertyDifference>>,
    ) -> bool {
        if op.aborted.load(Ordering::SeqCst)
            || self.denied(op, &mut rec, UpdateAction::Modify).await
        {
            return false;
        }
        let (props, metadata) = match self
            .protocol()
            .properties_for(op, &rec.logical_id)
            .and_then(|(_, p)| Ok((p, self.protocol().metadata_for(op, &rec.logical_id)?)))
        {
            Ok(v) => v,
            Err(reason) => {
                rec.status = ResourceStatus::UpdateFailed;
                rec.status_reason = Some(reason);
                rec.updated_at = now();
                self.record(op, &rec, Vec::new()).await;
                return false;
            }
        };
        rec.journal = Some(Journal::Changed {
            before: rec.snapshot(),
        });
        rec.properties = props;
        rec.metadata = metadata;
        rec.status = ResourceStatus::UpdateInProgress;
        rec.status_reason = Some(match &drift {
            Some(d) if !d.is_empty() => format!(
                "Drifted: {}; updating to the template",
                d.iter()
                    .map(|x| x.property_path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some(_) => "Drifted members; healing".into(),
            None => format!("Changed: {}", changed.join(", ")),
        });
        rec.pending = Some(protocol::begin(CallKind::Update));
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        self.finish_in_place(op, rec, Some((changed, drift))).await
    }

    /// Continues an in-place update from what its row records: the update
    /// call (`change`: sent now, with the drift it was decided on; `None`:
    /// recorded before a crash, so its outcome is learnt, not sent again),
    /// then the delete of the physical resource the provider replaced.
    pub(super) async fn finish_in_place(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        change: Option<(Vec<String>, Option<Vec<PropertyDifference>>)>,
    ) -> bool {
        let Some(Journal::Changed { before }) = rec.journal.clone() else {
            return false;
        };
        let Some(call) = protocol::recorded(rec.pending.as_ref(), CallKind::Update).cloned() else {
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
        let mut result = self
            .protocol()
            .call_update_with(
                op,
                &rec,
                &physical,
                &call.request_id,
                UpdateChange {
                    properties: &rec.properties,
                    old_properties: &before.properties,
                    changed,
                    drift,
                    attempt,
                },
            )
            .await;
        // A group whose members drifted: converged, then its members healed.
        if result.is_ok()
            && heal_members
            && crate::group::is_group(self.registry.canonical(&rec.resource_type))
        {
            result = self.groups().group_heal(op, &rec).await.map(group_result);
        }
        match result {
            // The provider replaced the resource while updating it (a
            // custom resource answering with a new PhysicalResourceId): the
            // new id and the delete of the old one are recorded together,
            // before that delete, as an update's cleanup would delete it.
            Ok(out)
                if out
                    .physical_resource_id
                    .as_ref()
                    .is_some_and(|p| *p != physical) =>
            {
                let new_physical = out.physical_resource_id.clone().unwrap_or_default();
                rec.physical_id = out.physical_resource_id;
                rec.attributes = out.attributes;
                rec.no_echo = out.no_echo;
                rec.status_reason = Some(format!(
                    "The provider replaced {physical} with {new_physical} while updating it: deleting {physical}"
                ));
                rec.pending = Some(protocol::begin(CallKind::Delete));
                rec.updated_at = now();
                if !self.record(op, &rec, Vec::new()).await {
                    return false;
                }
                op.results
                    .record(&rec.logical_id, &new_physical, &rec.attributes);
                self.delete_replaced(op, rec, Attempt::First).await
            }
            result => {
                rec.journal = None;
                self.updates().record_updated(op, rec, result).await
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
        if self.updates().retains_on_replace(op, &rec.logical_id) {
            rec.journal = None;
            rec.pending = None;
            rec.status = ResourceStatus::UpdateComplete;
            rec.status_reason = None;
            rec.updated_at = now();
            return self.record(op, &rec, Vec::new()).await;
        }
        let (call, attempt, new_call) =
            match protocol::recorded(rec.pending.as_ref(), CallKind::Delete) {
                Some(call) => (call.clone(), recorded, false),
                None => (protocol::begin(CallKind::Delete), Attempt::First, true),
            };
        if new_call {
            rec.pending = Some(call.clone());
            rec.status = ResourceStatus::UpdateInProgress;
            rec.status_reason = Some(format!(
                "Deleting {old}, which the provider replaced with {} while updating it",
                rec.physical_id.as_deref().unwrap_or_default()
            ));
            rec.updated_at = now();
            if !self.record(op, &rec, Vec::new()).await {
                return false;
            }
        }
        let mut gone = rec.clone();
        gone.restore(&before);
        let deleted = self
            .protocol()
            .call_delete(op, &gone, &old, &call.request_id, attempt)
            .await;
        rec.pending = None;
        rec.updated_at = now();
        match deleted {
            Ok(()) => {
                rec.journal = None;
                rec.status = ResourceStatus::UpdateComplete;
                rec.status_reason = None;
                self.record(op, &rec, Vec::new()).await
            }
            Err(e) => {
                rec.status = ResourceStatus::UpdateFailed;
                rec.status_reason = Some(format!(
                    "Updated, but the provider made {} in place of {old}, and deleting {old} failed: {}. Run cairn update again to delete it (deleting the stack deletes it too).",
                    rec.physical_id.as_deref().unwrap_or_default(),
                    e.message
                ));
                self.record(op, &rec, Vec::new()).await;
                false
            }
        }
    }

    /// Deletes the physical resource, then creates it again from the
    /// template (seed 003's reinstall; heal of an unhealthy resource). Each
    /// call is recorded before it is made.
    pub(super) async fn reinstall(&self, op: &Op, mut rec: ResourceRecord, why: &str) -> bool {
        if op.aborted.load(Ordering::SeqCst)
            || self.denied(op, &mut rec, UpdateAction::Replace).await
        {
            return false;
        }
        rec.status = ResourceStatus::UpdateInProgress;
        rec.status_reason = Some(format!("{why}; reinstalling it (delete, then create)"));
        rec.pending = rec
            .physical_id
            .as_ref()
            .map(|_| protocol::begin(CallKind::Delete));
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        self.finish_reinstall(op, rec, Attempt::First).await
    }

    /// Continues a reinstall from its recorded call: the delete (NotFound
    /// counts as deleted), then the create.
    /// `delete`: whether the recorded delete is sent now (`First`) or was
    /// recorded before a crash (`Again`).
    pub(super) async fn finish_reinstall(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        delete: Attempt,
    ) -> bool {
        // A create already recorded before this step (a resumed reinstall)
        // is learnt, not sent again.
        let mut attempt = Attempt::Again;
        if let Some(p) = protocol::recorded(rec.pending.as_ref(), CallKind::Delete).cloned() {
            let physical = rec.physical_id.clone().unwrap_or_default();
            if let Err(e) = self
                .protocol()
                .call_delete(op, &rec, &physical, &p.request_id, delete)
                .await
            {
                rec.status = ResourceStatus::UpdateFailed;
                rec.status_reason = Some(format!(
                    "Reinstall: deleting {physical} failed: {}",
                    e.message
                ));
                rec.pending = None;
                rec.updated_at = now();
                self.record(op, &rec, Vec::new()).await;
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
            rec.pending = Some(protocol::begin(CallKind::Create));
            rec.updated_at = now();
            if !self.record(op, &rec, Vec::new()).await {
                return false;
            }
            attempt = Attempt::First;
        }
        let Some(p) = protocol::recorded(rec.pending.as_ref(), CallKind::Create).cloned() else {
            return false;
        };
        self.updates()
            .replace_finish(op, rec, &p.request_id, attempt)
            .await
    }
}
