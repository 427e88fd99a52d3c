//! What `cairn update` does to one resource: heal it, update it in place
//! with its drift, adopt the template's properties, or reinstall it (delete,
//! then create). Each call is recorded before it is made, so that a crash
//! resumes it instead of sending another.

use crate::engine::kinds::Reconciles;
use std::sync::atomic::Ordering;

use cairn_sdk::{PropertyDifference, UpdateResult};
use serde_json::{Map, Value};

use crate::engine::Op;
use crate::stack::{now, Journal, ResourceRecord, ResourceStatus};
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
        self.steps().record_updated(op, rec, healed).await
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
            before: Box::new(rec.snapshot()),
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
        self.steps()
            .reconcile_in_place(op, rec, (changed, drift))
            .await
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
        self.steps().reinstall(op, rec).await
    }
}
