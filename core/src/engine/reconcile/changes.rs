//! What `cairn update` does to one resource: heal it, update it in place
//! with its drift, adopt the template's properties, or reinstall it (delete,
//! then create; each call recorded before it is made).

use std::sync::atomic::Ordering;

use cairn_sdk::{PropertyDifference, UpdateResult};
use serde_json::{Map, Value};

use crate::engine::protocol;
use crate::engine::update::UpdateChange;
use crate::engine::{Attempt, Engine, Op};
use crate::stack::{now, CallKind, ResourceRecord, ResourceStatus};

/// A group's attributes as an update's result (its physical id stays).
fn group_result(attributes: Map<String, Value>) -> UpdateResult {
    UpdateResult {
        physical_resource_id: None,
        attributes,
        no_echo: false,
    }
}

impl Engine {
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
        let healed = self.group_heal(op, &rec).await.map(group_result);
        self.record_updated(op, rec, healed).await
    }

    /// Records the template's properties for a resource whose provider
    /// reports it already matches them (seed 003: no update runs).
    pub(super) async fn adopt(&self, op: &Op, mut rec: ResourceRecord) -> bool {
        let Ok((_, props)) = self.properties_for(op, &rec.logical_id) else {
            return true;
        };
        rec.properties = props;
        if let Ok(metadata) = self.metadata_for(op, &rec.logical_id) {
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
    pub(super) async fn update_in_place(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        changed: Vec<String>,
        drift: Option<Vec<PropertyDifference>>,
    ) -> bool {
        if op.aborted.load(Ordering::SeqCst) {
            return false;
        }
        let (props, metadata) = match self
            .properties_for(op, &rec.logical_id)
            .and_then(|(_, p)| Ok((p, self.metadata_for(op, &rec.logical_id)?)))
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
        let old = std::mem::replace(&mut rec.properties, props);
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
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        let physical = rec.physical_id.clone().unwrap_or_default();
        let heal_members = drift.is_some();
        let mut result = self
            .call_update_with(
                op,
                &rec,
                &physical,
                &uuid::Uuid::new_v4().to_string(),
                UpdateChange {
                    properties: &rec.properties,
                    old_properties: &old,
                    changed,
                    drift,
                    attempt: Attempt::First,
                },
            )
            .await;
        // A group whose members drifted: converged, then its members healed.
        if result.is_ok()
            && heal_members
            && crate::group::is_group(self.registry.canonical(&rec.resource_type))
        {
            result = self.group_heal(op, &rec).await.map(group_result);
        }
        let replaced_by = result
            .as_ref()
            .ok()
            .and_then(|u| u.physical_resource_id.clone())
            .filter(|p| *p != physical);
        if !self.record_updated(op, rec.clone(), result).await {
            return false;
        }
        // The provider replaced the resource while updating it (a custom
        // resource answering with a new PhysicalResourceId): the old one
        // goes, as an update's cleanup would delete it.
        match replaced_by {
            None => true,
            Some(new_physical) => {
                let mut gone = rec.clone();
                gone.properties = old;
                // Not recorded (the row already holds the new physical id):
                // a crash before this delete leaves the old resource.
                let request_id = protocol::begin(CallKind::Delete).request_id;
                match self
                    .call_delete(op, &gone, &physical, &request_id, Attempt::First)
                    .await
                {
                    Ok(()) => true,
                    Err(e) => {
                        let mut now_rec = rec;
                        now_rec.physical_id = Some(new_physical);
                        now_rec.status = ResourceStatus::UpdateFailed;
                        now_rec.status_reason = Some(format!(
                            "Updated, but the provider made {} in place of {physical}, and deleting {physical} failed: {}. Run the update again to retry.",
                            now_rec.physical_id.as_deref().unwrap_or_default(),
                            e.message
                        ));
                        now_rec.updated_at = now();
                        self.record(op, &now_rec, Vec::new()).await;
                        false
                    }
                }
            }
        }
    }

    /// Deletes the physical resource, then creates it again from the
    /// template (seed 003's reinstall; heal of an unhealthy resource). Each
    /// call is recorded before it is made.
    pub(super) async fn reinstall(&self, op: &Op, mut rec: ResourceRecord, why: &str) -> bool {
        if op.aborted.load(Ordering::SeqCst) {
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
                .properties_for(op, &rec.logical_id)
                .and_then(|(_, p)| Ok((p, self.metadata_for(op, &rec.logical_id)?)))
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
        let result = self.call_create(op, &rec, &p.request_id, attempt).await;
        self.record_created(
            op,
            rec,
            result,
            ResourceStatus::UpdateComplete,
            ResourceStatus::UpdateFailed,
        )
        .await
    }
}
