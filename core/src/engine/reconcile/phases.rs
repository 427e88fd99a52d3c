//! The phases of `cairn update`, each recomputed from the stored rows:
//! uninstall, install, heal, drift, apply (in-place updates, reinstalls and
//! what changed because something it refers to did).

use crate::engine::kinds::Reconciles;
use std::collections::{BTreeSet, HashSet};

use cairn_sdk::{DriftResult, Health, UpdateBehavior};

use super::{Need, ReconcileFlags, ReconcileReport};
use crate::engine::dag::Outcome;
use crate::engine::protocol;
use crate::engine::{EngineError, Op};
use crate::plan;
use crate::stack::{ResourceRecord, ResourceStatus};

impl Reconciles<'_> {
    /// Removed resources are deleted (their old template's DeletionPolicy
    /// applies), or with `--skip-uninstall` left in place; either way they
    /// leave the stack.
    pub(super) async fn uninstall_phase(
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
            op.other().is_some_and(|o| {
                self.updates().policy_retains(
                    op,
                    o,
                    &r.logical_id,
                    protocol::Policy::Deletion,
                    protocol::Removal::Delete,
                )
            })
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
        if let Some(other) = op.other() {
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
            .schedule(
                op,
                &preds,
                initial,
                (false, false),
                ("delete", &|i| removed_ref[i].logical_id.clone()),
                |i| async move {
                    let r = removed_ref[i].clone();
                    let keep = skip || retained(&r);
                    (i, self.steps().delete_row(op, r, keep).await)
                },
            )
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
    pub(super) async fn install_phase(
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
            .schedule(
                op,
                &preds,
                initial,
                (true, false),
                ("create", &|i| op.graph.name(i).to_string()),
                |i| async move {
                    let name = op.graph.name(i);
                    let resumed = rows_ref
                        .iter()
                        .find(|r| r.logical_id == name && r.pending.is_some())
                        .cloned();
                    (i, self.creates().create_one(op, name, resumed, None).await)
                },
            )
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
    pub(super) async fn heal_phase(
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
        let verdicts =
            crate::engine::group::bounded(self.config.engine.max_concurrency, work).await;
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
        for (name, ok) in
            crate::engine::group::bounded(self.config.engine.max_concurrency, work).await
        {
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
    pub(super) async fn checkable_rows(
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
    pub(super) async fn health_of(&self, op: &Op, r: &ResourceRecord) -> Result<(), String> {
        let health = self
            .drift()
            .resource_health(&op.stack.stack_id, &op.stack.stack_name, r)
            .await;
        match health {
            Ok(Health::Healthy) => Ok(()),
            Ok(Health::Unhealthy { reason }) => Err(reason),
            Err(e) if e.is_not_found() => Err(format!("it no longer exists ({})", e.message)),
            Err(e) => Err(e.message),
        }
    }

    /// Asks every healthy resource's provider for drift against the
    /// template and decides what each needs.
    pub(super) async fn drift_phase(
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
        for (name, verdict) in
            crate::engine::group::bounded(self.config.engine.max_concurrency, work).await
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
    pub(super) async fn drift_of(
        &self,
        op: &Op,
        r: &ResourceRecord,
    ) -> Result<Option<Need>, String> {
        let (_, props) = self.protocol().properties_for(op, &r.logical_id)?;
        let template_changed = plan::changed_properties(&r.properties, &props);
        let is_group = crate::group::is_group(self.registry.canonical(&r.resource_type));
        let result = self
            .drift()
            .resource_drift(&op.stack.stack_id, &op.stack.stack_name, r, &props)
            .await;
        let drift = match result {
            Ok(d) => d,
            Err(e) if e.is_not_found() => DriftResult::Deleted,
            Err(e) => return Err(e.message),
        };
        let found = self.registry.schema(&r.resource_type);
        let schema = found.as_deref();
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
    pub(super) async fn apply_phase(
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
        // What this phase reinstalled or updated: what refers to it was
        // checked (installed, drift) before it changed, so it is looked at
        // again against the template.
        let changed = std::sync::Mutex::new(HashSet::<usize>::new());
        let changed_ref = &changed;
        let outcomes = self
            .schedule(
                op,
                &preds,
                vec![Outcome::NotRun; n],
                (true, false),
                ("reconcile", &|i| op.graph.name(i).to_string()),
                |i| async move {
                    let name = op.graph.name(i);
                    let Some(rec) = rows_ref
                        .iter()
                        .find(|r| r.logical_id == name && plan::is_live(r))
                        .cloned()
                    else {
                        return (i, true);
                    };
                    let refers_to_changed = changed_ref
                        .lock()
                        .is_ok_and(|c| op.graph.depends_on(i).iter().any(|d| c.contains(d)));
                    if rec.physical_id.is_none() {
                        return (i, true);
                    }
                    if !refers_to_changed {
                        if matches!(needs_ref.get(name), Some(Need::Adopt)) {
                            return (i, self.adopt(op, rec).await);
                        }
                        if installed.contains(name) || in_sync.contains(name) {
                            return (i, true);
                        }
                    }
                    // A drifted resource is converged even when what it
                    // refers to changed too (its update sends the
                    // properties evaluated now); else what it refers to
                    // may have changed what the template gives it.
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
                    if ok && matches!(what, "reinstalled" | "updated") {
                        if let Ok(mut c) = changed_ref.lock() {
                            c.insert(i);
                        }
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

    /// What a resource the drift phase did not decide about needs because
    /// its template properties (or what they refer to) changed.
    pub(super) fn template_need(&self, op: &Op, rec: &ResourceRecord) -> Option<Need> {
        let (_, props) = self.protocol().properties_for(op, &rec.logical_id).ok()?;
        let changed = plan::changed_properties(&rec.properties, &props);
        if changed.is_empty() {
            return None;
        }
        let found = self.registry.schema(&rec.resource_type);
        let schema = found.as_deref();
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
}
