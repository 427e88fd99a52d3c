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

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;

use cairn_sdk::{
    DriftRequest, DriftResult, Health, PropertyDifference, ProviderError, StatusRequest,
    UpdateBehavior, UpdateRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::dag::Outcome;
use super::update::{PreparedUpdate, UpdateStackInput};
use super::{Engine, EngineError, Op};
use crate::plan;
use crate::stack::{now, PendingCall, ResourceRecord, ResourceStatus, StackStatus};
use crate::template::Template;

/// The operation kind of a `cairn update` (its history entry's too).
pub const KIND: &str = "RECONCILE";

/// Which phases run (seed 003's flags; all phases by default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ReconcileFlags {
    /// Keep the template and parameters; still heal and fix drift.
    pub drift_only: bool,
    pub skip_install: bool,
    pub skip_uninstall: bool,
    pub skip_reinstall: bool,
    pub skip_heal: bool,
    pub skip_drift_check: bool,
    /// A failed delete while uninstalling does not stop the update.
    pub ignore_failure: bool,
}

pub struct ReconcileInput {
    pub update: UpdateStackInput,
    pub flags: ReconcileFlags,
}

/// One change of the template, at its most top-level entity
/// (`Resources.Web`, `Resources.Db.Properties.Size`, `Outputs.Url`, …).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Step {
    /// `add`, `remove` or `modify`.
    pub action: String,
    pub entity: String,
}

fn step(action: &str, entity: String) -> Step {
    Step {
        action: action.into(),
        entity,
    }
}

/// What an update will do, as far as it is known before it runs (status and
/// drift are learned while it runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReconcilePlan {
    pub stack_name: String,
    pub steps: Vec<Step>,
    pub changed_parameters: Vec<String>,
    pub uninstall: Vec<String>,
    pub install: Vec<String>,
    /// Changed in a way that cannot be applied in place.
    pub reinstall: Vec<String>,
    /// Changed in a way the provider applies in place (if its drift check
    /// agrees).
    pub modify: Vec<String>,
    pub flags: ReconcileFlags,
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

impl Engine {
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
                stack_name: input.update.stack_name.clone(),
                template_body: None,
                parameters: Default::default(),
                tags: None,
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
        let prepared = self.prepare_update(&update).await?;
        let old = Template::parse(&prepared.stack.template_body)?;
        let new = Template::parse(&prepared.target.template_body)?;
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
                    let schema = self.registry.schema(&c.resource_type);
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
        let (prepared, plan) = self.prepare_reconcile(input).await?;
        let details = serde_json::to_value(&plan)
            .map_err(|e| EngineError::Validation(format!("cannot record the plan: {e}")))?;
        self.begin_updating(prepared, None, KIND, Some(("Plan", details)))
            .await
    }

    /// Runs the phases (again, after a crash) and ends the stack in
    /// UPDATE_COMPLETE or UPDATE_FAILED.
    pub(super) async fn drive_reconcile(
        &self,
        op: &Op,
        options: &Value,
    ) -> Result<StackStatus, EngineError> {
        let plan: ReconcilePlan = options
            .get("Plan")
            .cloned()
            .and_then(|p| serde_json::from_value(p).ok())
            .unwrap_or_default();
        let flags = plan.flags.clone();
        let mut report = ReconcileReport::default();
        let outcome = self.reconcile_phases(op, &flags, &mut report).await;
        let failure = match outcome {
            // Outputs and exports of the template the stack now has.
            Ok(None) => self.finish_create(op).await.err(),
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
        // Reinstalls a crash interrupted: finish them first.
        for rec in self.store.resources(&op.stack.stack_id).await? {
            if rec.status == ResourceStatus::UpdateInProgress && rec.pending.is_some() {
                let name = rec.logical_id.clone();
                if !self.finish_reinstall(op, rec).await {
                    report.failed.push(name);
                    return Ok(Some(failed_to("reinstall", &report.failed)));
                }
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

    /// Removed resources are deleted (their old template's DeletionPolicy
    /// applies), or with `--skip-uninstall` left in place; either way they
    /// leave the stack.
    async fn uninstall_phase(
        &self,
        op: &Op,
        flags: &ReconcileFlags,
        report: &mut ReconcileReport,
    ) -> Result<Option<String>, EngineError> {
        let rows = self.store.resources(&op.stack.stack_id).await?;
        let removed: Vec<ResourceRecord> = rows
            .into_iter()
            .filter(|r| op.graph.index_of(&r.logical_id).is_none())
            .collect();
        if removed.is_empty() {
            return Ok(None);
        }
        let retained = |r: &ResourceRecord| {
            op.other
                .as_ref()
                .and_then(|o| o.template.resource(&r.logical_id))
                .and_then(|t| t.deletion_policy.as_ref())
                .is_some_and(|p| p.as_str() == Some("Retain"))
        };
        let n = removed.len();
        // Dependents first: in the old template, a removed resource waits
        // for the removed resources that depend on it.
        let index: std::collections::HashMap<&str, usize> = removed
            .iter()
            .enumerate()
            .map(|(i, r)| (r.logical_id.as_str(), i))
            .collect();
        let mut preds = vec![Vec::new(); n];
        if let Some(other) = &op.other {
            for (i, r) in removed.iter().enumerate() {
                if let Some(g) = other.graph.index_of(&r.logical_id) {
                    for &d in other.graph.dependents(g) {
                        if let Some(&j) = index.get(other.graph.name(d)) {
                            preds[i].push(j);
                        }
                    }
                }
            }
        }
        let initial: Vec<Outcome> = removed
            .iter()
            .map(|r| {
                if plan::is_live(r) {
                    Outcome::NotRun
                } else {
                    Outcome::Done
                }
            })
            .collect();
        let skip = flags.skip_uninstall;
        let removed_ref = &removed;
        let outcomes = self
            .schedule(op, &preds, initial, false, false, |i| async move {
                let r = removed_ref[i].clone();
                let keep = skip || retained(&r);
                (i, self.delete_one(op, r, keep).await)
            })
            .await?;
        let mut failed = Vec::new();
        for (r, o) in removed.iter().zip(&outcomes) {
            if *o == Outcome::Failed && !flags.ignore_failure {
                failed.push(r.logical_id.clone());
                continue;
            }
            let list = if skip {
                report.skipped.entry("Uninstall".into()).or_default()
            } else {
                &mut report.uninstalled
            };
            list.push(r.logical_id.clone());
            // Out of the stack (a failure `--ignore-failure` let pass stays
            // visible in the events).
            self.store
                .remove_resource(&op.lease, &r.logical_id, &[])
                .await?;
        }
        Ok(report.phase_failed("delete", failed))
    }

    /// Added resources are created in dependency order (or, with
    /// `--skip-install`, not).
    async fn install_phase(
        &self,
        op: &Op,
        flags: &ReconcileFlags,
        report: &mut ReconcileReport,
    ) -> Result<Option<String>, EngineError> {
        let rows = self.store.resources(&op.stack.stack_id).await?;
        let existing: std::collections::HashMap<&str, &ResourceRecord> = rows
            .iter()
            .filter(|r| {
                plan::is_live(r)
                    && !(r.status == ResourceStatus::CreateInProgress
                        || r.status == ResourceStatus::CreateFailed)
            })
            .map(|r| (r.logical_id.as_str(), r))
            .collect();
        let n = op.graph.len();
        let added: Vec<usize> = (0..n)
            .filter(|&i| !existing.contains_key(op.graph.name(i)))
            .collect();
        if added.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = added
            .iter()
            .map(|&i| op.graph.name(i).to_string())
            .collect();
        if flags.skip_install {
            report.skipped.insert("Install".into(), names);
            return Ok(None);
        }
        let preds: Vec<Vec<usize>> = (0..n).map(|i| op.graph.depends_on(i).to_vec()).collect();
        let initial: Vec<Outcome> = (0..n)
            .map(|i| {
                if added.contains(&i) {
                    Outcome::NotRun
                } else {
                    Outcome::Done
                }
            })
            .collect();
        let rows_ref = &rows;
        let outcomes = self
            .schedule(op, &preds, initial, true, false, |i| async move {
                let name = op.graph.name(i);
                let resumed = rows_ref
                    .iter()
                    .find(|r| r.logical_id == name && r.pending.is_some())
                    .cloned();
                (i, self.create_one(op, name, resumed, None).await)
            })
            .await?;
        let failed: Vec<String> = added
            .iter()
            .filter(|&&i| outcomes[i] != Outcome::Done)
            .map(|&i| op.graph.name(i).to_string())
            .collect();
        report.installed = names.into_iter().filter(|n| !failed.contains(n)).collect();
        Ok(report.phase_failed("create", failed))
    }

    /// Every resource's health; the unhealthy ones are healed.
    async fn heal_phase(
        &self,
        op: &Op,
        installed: &HashSet<String>,
        report: &mut ReconcileReport,
    ) -> Result<Option<String>, EngineError> {
        let rows = self.checkable_rows(op, installed).await?;
        let work: Vec<_> = rows
            .iter()
            .map(|r| async move { (r.logical_id.clone(), self.health_of(op, r).await) })
            .collect();
        let verdicts = super::group::bounded(self.config.engine.max_concurrency, work).await;
        let unhealthy: std::collections::HashMap<String, String> = verdicts
            .into_iter()
            .filter_map(|(name, h)| h.err().map(|reason| (name, reason)))
            .collect();
        if unhealthy.is_empty() {
            return Ok(None);
        }
        let work: Vec<_> = rows
            .into_iter()
            .filter_map(|r| unhealthy.get(&r.logical_id).map(|why| (r, why.clone())))
            .map(|(r, why)| async move {
                let name = r.logical_id.clone();
                let ok = self.heal_one(op, r, &why).await;
                (name, ok)
            })
            .collect();
        let mut failed = Vec::new();
        for (name, ok) in super::group::bounded(self.config.engine.max_concurrency, work).await {
            if ok {
                report.healed.push(name);
            } else {
                failed.push(name);
            }
        }
        report.healed.sort();
        Ok(report.phase_failed("heal", failed))
    }

    /// Rows the status and drift phases look at: existing, settled, not
    /// made by this update.
    async fn checkable_rows(
        &self,
        op: &Op,
        installed: &HashSet<String>,
    ) -> Result<Vec<ResourceRecord>, EngineError> {
        Ok(self
            .store
            .resources(&op.stack.stack_id)
            .await?
            .into_iter()
            .filter(|r| {
                op.graph.index_of(&r.logical_id).is_some()
                    && !installed.contains(&r.logical_id)
                    && r.physical_id.is_some()
                    && r.pending.is_none()
                    && matches!(
                        r.status,
                        ResourceStatus::CreateComplete | ResourceStatus::UpdateComplete
                    )
            })
            .collect())
    }

    /// Ok when healthy, else why not.
    async fn health_of(&self, op: &Op, r: &ResourceRecord) -> Result<(), String> {
        let health = if crate::group::is_group(self.registry.canonical(&r.resource_type)) {
            self.group_health(&op.stack.stack_id, &op.stack.stack_name, r)
                .await
        } else {
            let t = self.provider_for(&r.resource_type).map_err(|e| e.message)?;
            let req = StatusRequest {
                context: self.context(
                    op,
                    &r.logical_id,
                    &r.resource_type,
                    &uuid::Uuid::new_v4().to_string(),
                ),
                physical_resource_id: r.physical_id.clone().unwrap_or_default(),
                properties: r.properties.clone(),
            };
            self.timed("status check", t.provider.check_status(&req))
                .await
        };
        match health {
            Ok(Health::Healthy) => Ok(()),
            Ok(Health::Unhealthy { reason }) => Err(reason),
            Err(e) if e.is_not_found() => Err(format!("it no longer exists ({})", e.message)),
            Err(e) => Err(e.message),
        }
    }

    /// Heals one resource: a group replaces its unhealthy members, anything
    /// else is reinstalled.
    async fn heal_one(&self, op: &Op, mut rec: ResourceRecord, why: &str) -> bool {
        if !crate::group::is_group(self.registry.canonical(&rec.resource_type)) {
            return self.reinstall(op, rec, &format!("Unhealthy: {why}")).await;
        }
        rec.status = ResourceStatus::UpdateInProgress;
        rec.status_reason = Some(format!("Unhealthy: {why}; healing"));
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        let healed = self.group_heal(op, &rec).await;
        self.record_updated(op, rec, healed).await
    }

    /// Records the outcome of an in-place change (attributes learned, or the
    /// failure).
    async fn record_updated(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        result: Result<Map<String, Value>, ProviderError>,
    ) -> bool {
        rec.updated_at = now();
        rec.pending = None;
        match result {
            Ok(attributes) => {
                rec.attributes = attributes;
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
                self.record(op, &rec, Vec::new()).await;
                false
            }
        }
    }

    /// Asks every healthy resource's provider for drift against the
    /// template and decides what each needs.
    async fn drift_phase(
        &self,
        op: &Op,
        installed: &HashSet<String>,
        needs: &mut std::collections::HashMap<String, Need>,
        in_sync: &mut HashSet<String>,
        report: &mut ReconcileReport,
    ) -> Result<Option<String>, EngineError> {
        let rows = self.checkable_rows(op, installed).await?;
        let work: Vec<_> = rows
            .iter()
            .map(|r| async move { (r.logical_id.clone(), self.drift_of(op, r).await) })
            .collect();
        let mut failed = Vec::new();
        for (name, verdict) in super::group::bounded(self.config.engine.max_concurrency, work).await
        {
            match verdict {
                Ok(Some(Need::Adopt)) => {
                    in_sync.insert(name.clone());
                    needs.insert(name, Need::Adopt);
                }
                Ok(Some(need)) => {
                    needs.insert(name, need);
                }
                Ok(None) => {
                    in_sync.insert(name);
                }
                Err(reason) => {
                    tracing::warn!(resource = %name, "drift check failed: {reason}");
                    failed.push(name);
                }
            }
        }
        report.in_sync = in_sync.iter().cloned().collect();
        report.in_sync.sort();
        Ok(report.phase_failed("check drift of", failed))
    }

    /// `Ok(None)`: nothing to do (in sync). A group's members drifting is a
    /// heal of the group; its own property changes are an in-place update.
    async fn drift_of(&self, op: &Op, r: &ResourceRecord) -> Result<Option<Need>, String> {
        let (_, props) = self.properties_for(op, &r.logical_id)?;
        let template_changed = plan::changed_properties(&r.properties, &props);
        let is_group = crate::group::is_group(self.registry.canonical(&r.resource_type));
        let result = if is_group {
            self.group_drift(&op.stack.stack_id, &op.stack.stack_name, r)
                .await
        } else {
            let t = self.provider_for(&r.resource_type).map_err(|e| e.message)?;
            let req = DriftRequest {
                context: self.context(
                    op,
                    &r.logical_id,
                    &r.resource_type,
                    &uuid::Uuid::new_v4().to_string(),
                ),
                physical_resource_id: r.physical_id.clone().unwrap_or_default(),
                properties: props.clone(),
            };
            self.timed("drift detection", t.provider.check_drift(&req))
                .await
        };
        let drift = match result {
            Ok(d) => d,
            Err(e) if e.is_not_found() => DriftResult::Deleted,
            Err(e) => return Err(e.message),
        };
        let schema = self.registry.schema(&r.resource_type);
        let in_place = |names: &[String]| {
            names.iter().all(|n| {
                !matches!(
                    schema.map(|s| s.update_behavior(n)),
                    Some(UpdateBehavior::CreateOnly | UpdateBehavior::Immutable)
                )
            })
        };
        Ok(match drift {
            DriftResult::InSync if is_group && !template_changed.is_empty() => {
                Some(Need::InPlace {
                    changed: template_changed,
                    drift: None,
                })
            }
            DriftResult::InSync if template_changed.is_empty() => None,
            DriftResult::InSync => Some(Need::Adopt),
            DriftResult::Deleted => Some(Need::Reinstall("Drifted: the resource is gone".into())),
            DriftResult::NotChecked if template_changed.is_empty() => None,
            DriftResult::NotChecked if in_place(&template_changed) => Some(Need::InPlace {
                changed: template_changed,
                drift: None,
            }),
            DriftResult::NotChecked => Some(Need::Reinstall(format!(
                "Changed: {} cannot be updated in place",
                template_changed.join(", ")
            ))),
            // Members drifted: the group converges and heals them.
            DriftResult::Modified { .. } if is_group => Some(Need::InPlace {
                changed: template_changed,
                drift: Some(Vec::new()),
            }),
            DriftResult::Modified { differences } => {
                let mut changed: BTreeSet<String> = template_changed.into_iter().collect();
                for d in &differences {
                    if let Some(top) = d.property_path.trim_start_matches('/').split('/').next() {
                        changed.insert(top.replace("~1", "/").replace("~0", "~"));
                    }
                }
                let changed: Vec<String> = changed.into_iter().collect();
                let paths: Vec<&str> = differences
                    .iter()
                    .map(|d| d.property_path.as_str())
                    .collect();
                if in_place(&changed) {
                    Some(Need::InPlace {
                        changed,
                        drift: Some(differences),
                    })
                } else {
                    Some(Need::Reinstall(format!(
                        "Drifted: {} cannot be updated in place",
                        paths.join(", ")
                    )))
                }
            }
        })
    }

    /// In dependency order: in-place updates (drift, or template changes),
    /// reinstalls, and whatever changed because something it depends on
    /// did. A resource its provider called in sync is left alone.
    async fn apply_phase(
        &self,
        op: &Op,
        flags: &ReconcileFlags,
        installed: &HashSet<String>,
        needs: std::collections::HashMap<String, Need>,
        in_sync: &HashSet<String>,
        report: &mut ReconcileReport,
    ) -> Result<Option<String>, EngineError> {
        let n = op.graph.len();
        let preds: Vec<Vec<usize>> = (0..n).map(|i| op.graph.depends_on(i).to_vec()).collect();
        let rows = self.store.resources(&op.stack.stack_id).await?;
        let rows_ref = &rows;
        let needs_ref = &needs;
        let done = std::sync::Mutex::new(Vec::<(String, &'static str)>::new());
        let done_ref = &done;
        let outcomes = self
            .schedule(
                op,
                &preds,
                vec![Outcome::NotRun; n],
                true,
                false,
                |i| async move {
                    let name = op.graph.name(i);
                    let Some(rec) = rows_ref
                        .iter()
                        .find(|r| r.logical_id == name && plan::is_live(r))
                        .cloned()
                    else {
                        return (i, true);
                    };
                    if matches!(needs_ref.get(name), Some(Need::Adopt)) {
                        return (i, self.adopt(op, rec).await);
                    }
                    if installed.contains(name)
                        || in_sync.contains(name)
                        || rec.physical_id.is_none()
                    {
                        return (i, true);
                    }
                    let need = match needs_ref.get(name) {
                        Some(Need::InPlace { changed, drift }) => Some(Need::InPlace {
                            changed: changed.clone(),
                            drift: drift.clone(),
                        }),
                        Some(Need::Reinstall(why)) => Some(Need::Reinstall(why.clone())),
                        Some(Need::Adopt) | None => self.template_need(op, &rec),
                    };
                    let (ok, what) = match need {
                        None | Some(Need::Adopt) => (true, ""),
                        Some(Need::Reinstall(_)) if flags.skip_reinstall => (true, "skipped"),
                        Some(Need::Reinstall(why)) => {
                            (self.reinstall(op, rec, &why).await, "reinstalled")
                        }
                        Some(Need::InPlace { changed, drift }) => (
                            self.update_in_place(op, rec, changed, drift).await,
                            "updated",
                        ),
                    };
                    if let Ok(mut d) = done_ref.lock() {
                        d.push((name.to_string(), if ok { what } else { "failed" }));
                    }
                    (i, ok)
                },
            )
            .await?;
        let mut failed = Vec::new();
        for (name, what) in done.into_inner().unwrap_or_default() {
            match what {
                "reinstalled" => report.reinstalled.push(name),
                "updated" => report.updated.push(name),
                "skipped" => report
                    .skipped
                    .entry("Reinstall".into())
                    .or_default()
                    .push(name),
                "failed" => failed.push(name),
                _ => {}
            }
        }
        for (i, o) in outcomes.iter().enumerate() {
            if *o == Outcome::Failed && !failed.iter().any(|f| f == op.graph.name(i)) {
                failed.push(op.graph.name(i).to_string());
            }
        }
        report.reinstalled.sort();
        report.updated.sort();
        Ok(report.phase_failed("update", failed))
    }

    /// Records the template's properties for a resource whose provider
    /// reports it already matches them (seed 003: no update runs).
    async fn adopt(&self, op: &Op, mut rec: ResourceRecord) -> bool {
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

    /// What a resource the drift phase did not decide about needs because
    /// its template properties (or what they refer to) changed.
    fn template_need(&self, op: &Op, rec: &ResourceRecord) -> Option<Need> {
        let (_, props) = self.properties_for(op, &rec.logical_id).ok()?;
        let changed = plan::changed_properties(&rec.properties, &props);
        if changed.is_empty() {
            return None;
        }
        let schema = self.registry.schema(&rec.resource_type);
        let replace = changed.iter().find(|n| {
            matches!(
                schema.map(|s| s.update_behavior(n)),
                Some(UpdateBehavior::CreateOnly | UpdateBehavior::Immutable)
            )
        });
        Some(match replace {
            Some(p) => Need::Reinstall(format!("Changed: {p} cannot be updated in place")),
            None => Need::InPlace {
                changed,
                drift: None,
            },
        })
    }

    /// The provider's update towards the template's properties, with the
    /// drift it reported (a group: converged, its drifted members healed).
    async fn update_in_place(
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
        let result = if crate::group::is_group(self.registry.canonical(&rec.resource_type)) {
            match self
                .group_update(op, &rec, &physical, &rec.properties, &old)
                .await
            {
                Ok(_) if drift.is_some() => self.group_heal(op, &rec).await,
                Ok(u) => Ok(u.attributes),
                Err(e) => Err(e),
            }
        } else {
            match self.provider_for(&rec.resource_type) {
                Ok(t) => {
                    let req = UpdateRequest {
                        context: self.context(
                            op,
                            &rec.logical_id,
                            &rec.resource_type,
                            &uuid::Uuid::new_v4().to_string(),
                        ),
                        physical_resource_id: physical,
                        properties: rec.properties.clone(),
                        old_properties: old,
                        changed,
                        drift,
                    };
                    self.timed("update", t.provider.update(&req))
                        .await
                        .map(|u| {
                            if let Some(p) = u.physical_resource_id {
                                rec.physical_id = Some(p);
                            }
                            u.attributes
                        })
                }
                Err(e) => Err(e),
            }
        };
        self.record_updated(op, rec, result).await
    }

    /// Deletes the physical resource, then creates it again from the
    /// template (seed 003's reinstall; heal of an unhealthy resource). Each
    /// call is recorded before it is made.
    async fn reinstall(&self, op: &Op, mut rec: ResourceRecord, why: &str) -> bool {
        if op.aborted.load(Ordering::SeqCst) {
            return false;
        }
        rec.status = ResourceStatus::UpdateInProgress;
        rec.status_reason = Some(format!("{why}; reinstalling it (delete, then create)"));
        rec.pending = rec.physical_id.as_ref().map(|_| PendingCall {
            action: "DELETE".into(),
            request_id: uuid::Uuid::new_v4().to_string(),
        });
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        self.finish_reinstall(op, rec).await
    }

    /// Continues a reinstall from its recorded call: the delete (NotFound
    /// counts as deleted), then the create.
    async fn finish_reinstall(&self, op: &Op, mut rec: ResourceRecord) -> bool {
        if let Some(p) = rec.pending.clone().filter(|p| p.action == "DELETE") {
            let physical = rec.physical_id.clone().unwrap_or_default();
            if let Err(e) = self.call_delete(op, &rec, &physical, &p.request_id).await {
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
            rec.pending = Some(PendingCall {
                action: "CREATE".into(),
                request_id: uuid::Uuid::new_v4().to_string(),
            });
            rec.updated_at = now();
            if !self.record(op, &rec, Vec::new()).await {
                return false;
            }
        }
        let Some(p) = rec.pending.clone().filter(|p| p.action == "CREATE") else {
            return false;
        };
        let result = self.call_create(op, &rec, &p.request_id).await;
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
