//! `cairn update`: Cloudify's deployment update (seed 003) on a stack. It
//! moves the stack to a new template and parameters (or keeps them, with
//! `--drift-only`) and brings reality back to the template on the way:
//!
//! 1. compute the steps (add / remove / modify, each at its most top-level
//!    change); refuse unsupported changes before anything runs;
//! 2. uninstall removed resources; 3. install added ones;
//! 4. `check_status` every resource and heal the unhealthy (replace; a
//!    group replaces its unhealthy members);
//! 5. `check_drift` the healthy ones: drifted ones get the provider's
//!    update with the drift (converging to the template), or are marked for
//!    reinstall when their changes cannot be applied in place; a provider
//!    that reports no drift is left alone even if its template properties
//!    changed (seed 003's rule); without drift support, drift means "the
//!    template properties changed";
//! 6. reinstall (delete, then create) what cannot be changed in place, and
//!    apply in place what changed because something it depends on did.
//!
//! Each phase can be skipped with a flag. It does not roll back: a failure
//! ends in UPDATE_FAILED, and running `cairn update` again (or with the old
//! template) recovers, as in Cloudify. Every phase recomputes its work from
//! the stored rows, so an interrupted run resumes by running the phases
//! again; a reinstall records each of its calls first.
//!
//! Here: the plan, the start and the driver; `phases` (each phase), `changes`
//! (what a phase does to one resource).

use crate::engine::kinds::Reconciles;
use std::collections::{BTreeSet, HashSet};

use cairn_sdk::{PropertyDifference, UpdateBehavior};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::update::{PreparedUpdate, UpdateStackInput};
use super::{EngineError, Op};
use crate::plan;
use crate::stack::{Journal, ResourceStatus, StackStatus};
use crate::stack_policy::UpdateAction;
use crate::template::Template;

mod changes;
mod phases;

pub use crate::operation::{ReconcileFlags, ReconcilePlan, Step};

pub struct ReconcileInput {
    pub update: UpdateStackInput,
    pub flags: ReconcileFlags,
}

fn step(action: &str, entity: String) -> Step {
    Step {
        action: action.into(),
        entity,
    }
}

/// What the update did, phase by phase (kept in the history entry).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReconcileReport {
    pub uninstalled: Vec<String>,
    pub installed: Vec<String>,
    pub healed: Vec<String>,
    /// Updated in place (drift, or a template change).
    pub updated: Vec<String>,
    /// Their provider reported no drift: left as they are.
    pub in_sync: Vec<String>,
    pub reinstalled: Vec<String>,
    /// Phase name → the resources a flag left alone.
    pub skipped: std::collections::BTreeMap<String, Vec<String>>,
    pub failed: Vec<String>,
}

/// The template's changes as seed 003's steps.
fn steps_of(old: &Template, new: &Template, changes: &[plan::ResourceChange]) -> Vec<Step> {
    let mut steps = Vec::new();
    for c in changes {
        let entity = format!("Resources.{}", c.logical_resource_id);
        match c.action.as_str() {
            "Add" => steps.push(step("add", entity)),
            "Remove" => steps.push(step("remove", entity)),
            _ => {
                let mut seen = BTreeSet::new();
                for d in &c.details {
                    let e = match &d.target.name {
                        Some(n) => format!("{entity}.{}.{n}", d.target.attribute),
                        None => format!("{entity}.{}", d.target.attribute),
                    };
                    if seen.insert(e.clone()) {
                        steps.push(step("modify", e));
                    }
                }
            }
        }
    }
    let outputs = |t: &Template| -> Vec<(String, Value)> {
        t.outputs
            .iter()
            .map(|o| (o.name.clone(), o.value.clone()))
            .collect()
    };
    let (before, after) = (outputs(old), outputs(new));
    for (name, value) in &after {
        match before.iter().find(|(n, _)| n == name) {
            None => steps.push(step("add", format!("Outputs.{name}"))),
            Some((_, v)) if v != value => steps.push(step("modify", format!("Outputs.{name}"))),
            _ => {}
        }
    }
    for (name, _) in &before {
        if !after.iter().any(|(n, _)| n == name) {
            steps.push(step("remove", format!("Outputs.{name}")));
        }
    }
    match (&old.description, &new.description) {
        (None, Some(_)) => steps.push(step("add", "Description".into())),
        (Some(_), None) => steps.push(step("remove", "Description".into())),
        (Some(a), Some(b)) if a != b => steps.push(step("modify", "Description".into())),
        _ => {}
    }
    steps
}

/// Why a resource needs work in the apply phases.
enum Need {
    InPlace {
        changed: Vec<String>,
        drift: Option<Vec<PropertyDifference>>,
    },
    Reinstall(String),
    /// The template changed, but the provider reports the live resource in
    /// sync with it: no call, the record takes the template's properties.
    Adopt,
}

impl Reconciles<'_> {
    /// The plan of a `cairn update` (also what `--preview` shows).
    pub async fn plan_reconcile(
        &self,
        input: &ReconcileInput,
    ) -> Result<ReconcilePlan, EngineError> {
        Ok(self.prepare_reconcile(input).await?.1)
    }

    async fn prepare_reconcile(
        &self,
        input: &ReconcileInput,
    ) -> Result<(PreparedUpdate, ReconcilePlan), EngineError> {
        let update = if input.flags.drift_only {
            if input.update.template_body.is_some() || !input.update.parameters.is_empty() {
                return Err(EngineError::Validation(
                    "--drift-only keeps the stack's template and parameters: give neither".into(),
                ));
            }
            UpdateStackInput {
                stack_policy: None,
                rollback_configuration: None,
                notification_arns: None,
                stack_policy_during_update: input.update.stack_policy_during_update.clone(),
                stack_name: input.update.stack_name.clone(),
                template_body: None,
                parameters: Default::default(),
                tags: None,
                origin: Default::default(),
                context: None,
                disable_rollback: false,
                capabilities: None,
                upgrade_types: input.update.upgrade_types.clone(),
            }
        } else {
            if input.update.template_body.is_none() && input.update.parameters.is_empty() {
                return Err(EngineError::Validation(format!(
                    "cairn update {} needs a template, parameters (-p K=V), or --drift-only",
                    input.update.stack_name
                )));
            }
            input.update.clone()
        };
        // The stack's existence and status, the template, the parameters,
        // a resource type change ("Update of resource type is not
        // permitted…"): checked as for any update.
        let prepared = self.updates().prepare_update(&update).await?;
        let old = Template::parse_with(&prepared.stack.template_body, &prepared.stack.context)?;
        let new = Template::parse_with(&prepared.target.template_body, &prepared.target.context)?;
        let mut unsupported = Vec::new();
        let mut plan = ReconcilePlan {
            stack_name: prepared.stack.stack_name.clone(),
            steps: steps_of(&old, &new, &prepared.changes),
            flags: input.flags.clone(),
            ..Default::default()
        };
        for c in &prepared.changes {
            let name = c.logical_resource_id.clone();
            match c.action.as_str() {
                "Add" => plan.install.push(name),
                "Remove" => plan.uninstall.push(name),
                _ => {
                    let found = self.registry.schema(&c.resource_type);
                    let schema = found.as_deref();
                    for d in c
                        .details
                        .iter()
                        .filter(|d| d.target.attribute == "Properties")
                    {
                        let Some(p) = &d.target.name else { continue };
                        if schema.map(|s| s.update_behavior(p)) == Some(UpdateBehavior::Immutable) {
                            unsupported.push(format!(
                                "Resources.{name}.Properties.{p} (an Immutable property of {})",
                                c.resource_type
                            ));
                        }
                    }
                    if c.replacement.as_deref() == Some("True") {
                        plan.reinstall.push(name);
                    } else {
                        plan.modify.push(name);
                    }
                }
            }
        }
        if !unsupported.is_empty() {
            return Err(EngineError::Validation(format!(
                "The update cannot be applied; these changes are not supported: {}",
                unsupported.join(", ")
            )));
        }
        // The stack's policy (or this update's) rules on what the template
        // changes before anything runs: `cairn update` has no rollback.
        let written = |t: &Template, name: &str| {
            t.resource(name)
                .map(|r| r.type_name.clone())
                .unwrap_or_default()
        };
        let actions: Vec<(UpdateAction, String, String)> = plan
            .modify
            .iter()
            .map(|n| (UpdateAction::Modify, n.clone(), written(&new, n)))
            .chain(
                plan.reinstall
                    .iter()
                    .map(|n| (UpdateAction::Replace, n.clone(), written(&new, n))),
            )
            .chain(
                plan.uninstall
                    .iter()
                    .map(|n| (UpdateAction::Delete, n.clone(), written(&old, n))),
            )
            .collect();
        let denied =
            super::stack_policy::denials(prepared.options.stack_policy.as_deref(), &actions)?;
        if !denied.is_empty() {
            return Err(EngineError::Validation(format!(
                "cairn update {} is refused by the stack policy; nothing was changed: {} Give --stack-policy-during-update FILE to allow it for this update.",
                prepared.stack.stack_name,
                denied.join(" ")
            )));
        }
        plan.changed_parameters = prepared
            .target
            .parameters
            .iter()
            .filter(|(k, v)| prepared.stack.parameters.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .collect();
        Ok((prepared, plan))
    }

    /// Starts a `cairn update` (UPDATE_IN_PROGRESS); follow it with
    /// [`Engine::run`].
    pub async fn start_reconcile(&self, input: &ReconcileInput) -> Result<String, EngineError> {
        self.nested_stacks()
            .refuse_nested_named(&input.update.stack_name, "update")
            .await?;
        let (mut prepared, plan) = self.prepare_reconcile(input).await?;
        let details = serde_json::to_value(&plan)
            .map_err(|e| EngineError::Validation(format!("cannot record the plan: {e}")))?;
        prepared.options.plan = Some(plan);
        self.updates()
            .begin_updating(
                prepared,
                None,
                crate::stack::OperationKind::Reconcile,
                Some(details),
            )
            .await
    }

    /// Runs the phases (again, after a crash) and ends the stack in
    /// UPDATE_COMPLETE or UPDATE_FAILED.
    pub(super) async fn drive_reconcile(
        &self,
        op: &Op,
        plan: ReconcilePlan,
    ) -> Result<StackStatus, EngineError> {
        let flags = plan.flags.clone();
        let mut report = ReconcileReport::default();
        let outcome = self.reconcile_phases(op, &flags, &mut report).await;
        let failure = match outcome {
            // Outputs and exports of the template the stack now has.
            Ok(None) => self.creates().finish_create(op).await.err(),
            Ok(Some(reason)) => Some(reason),
            Err(e) => return Err(e),
        };
        let details = json!({"Plan": plan, "Report": report});
        self.store.set_history_details(&op.lease, &details).await?;
        match failure {
            None => self.set_status(op, StackStatus::UpdateComplete, None).await,
            Some(reason) => {
                self.set_status(op, StackStatus::UpdateFailed, Some(&reason))
                    .await
            }
        }
    }

    /// The phases; `Ok(Some(reason))` when one failed.
    async fn reconcile_phases(
        &self,
        op: &Op,
        flags: &ReconcileFlags,
        report: &mut ReconcileReport,
    ) -> Result<Option<String>, EngineError> {
        // Calls a crash interrupted, and the delete of a resource a
        // provider replaced that an earlier run could not delete: finished
        // first, from what their rows record.
        for rec in self.store.resources(&op.stack.stack_id).await? {
            let name = rec.logical_id.clone();
            let unfinished = matches!(
                rec.journal,
                Some(Journal::Changed { .. }) | Some(Journal::Restored { discard: Some(_) })
            );
            let (finished, what) = if unfinished {
                (self.steps().finish_in_place(op, rec, None).await, "update")
            } else if rec.status == ResourceStatus::UpdateInProgress && rec.pending.is_some() {
                let again = crate::engine::Attempt::Again;
                (
                    self.steps().finish_reinstall(op, rec, again).await,
                    "reinstall",
                )
            } else {
                continue;
            };
            if !finished {
                report.failed.push(name);
                return Ok(Some(failed_to(what, &report.failed)));
            }
        }
        if let Some(reason) = self.uninstall_phase(op, flags, report).await? {
            return Ok(Some(reason));
        }
        if let Some(reason) = self.install_phase(op, flags, report).await? {
            return Ok(Some(reason));
        }
        let installed: HashSet<String> = report.installed.iter().cloned().collect();
        if flags.skip_heal {
            report.skipped.insert("Heal".into(), Vec::new());
        } else if let Some(reason) = self.heal_phase(op, &installed, report).await? {
            return Ok(Some(reason));
        }
        let mut needs = std::collections::HashMap::new();
        let mut in_sync = HashSet::new();
        if flags.skip_drift_check {
            report.skipped.insert("DriftCheck".into(), Vec::new());
        } else if let Some(reason) = self
            .drift_phase(op, &installed, &mut needs, &mut in_sync, report)
            .await?
        {
            return Ok(Some(reason));
        }
        self.apply_phase(op, flags, &installed, needs, &in_sync, report)
            .await
    }
}

impl ReconcileReport {
    /// Records a phase's failed resources; the stack's reason if any.
    fn phase_failed(&mut self, what: &str, mut failed: Vec<String>) -> Option<String> {
        if failed.is_empty() {
            return None;
        }
        failed.sort();
        self.failed.extend(failed.iter().cloned());
        Some(failed_to(what, &failed))
    }
}

fn failed_to(what: &str, names: &[String]) -> String {
    format!(
        "The following resource(s) failed to {what}: [{}].",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_scoped_at_their_top_level_change() {
        let old = Template::parse(
            "Description: a\nResources:\n  A: {Type: T, Properties: {X: 1}}\n  B: {Type: T}\nOutputs:\n  O: {Value: 1}\n  P: {Value: 2}\n",
        )
        .unwrap();
        let new = Template::parse(
            "Description: b\nResources:\n  A: {Type: T, Properties: {X: 2}}\n  C: {Type: T}\nOutputs:\n  O: {Value: 3}\n  Q: {Value: 2}\n",
        )
        .unwrap();
        let change = |action: &str, name: &str, props: &[&str]| plan::ResourceChange {
            action: action.into(),
            logical_resource_id: name.into(),
            physical_resource_id: None,
            resource_type: "T".into(),
            replacement: None,
            scope: Vec::new(),
            details: props
                .iter()
                .map(|p| plan::ChangeDetail {
                    target: plan::ChangeTarget {
                        values: None,
                        attribute: "Properties".into(),
                        name: Some(p.to_string()),
                        requires_recreation: "Never".into(),
                    },
                    evaluation: "Static".into(),
                    change_source: "DirectModification".into(),
                    causing_entity: None,
                })
                .collect(),
        };
        let steps = steps_of(
            &old,
            &new,
            &[
                change("Modify", "A", &["X"]),
                change("Add", "C", &[]),
                change("Remove", "B", &[]),
            ],
        );
        let shown: Vec<String> = steps
            .iter()
            .map(|s| format!("{} {}", s.action, s.entity))
            .collect();
        assert_eq!(
            shown,
            [
                "modify Resources.A.Properties.X",
                "add Resources.C",
                "remove Resources.B",
                "modify Outputs.O",
                "add Outputs.Q",
                "remove Outputs.P",
                "modify Description",
            ]
        );
    }
}
