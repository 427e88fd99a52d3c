//! Rolling replacement (its stored plan and batch cursor) and resizing.

use std::collections::HashSet;

use cairn_sdk::ProviderError;

use super::{failed, Run};
use crate::group::in_place;
use crate::group::naming::{self, Batch};
use crate::group::policy::{BatchCreate, RollingUpdate};
use crate::group::state::Rollout;
use crate::group::types::{GroupSpec, MemberDefinition};
use crate::signal::{self, Progress, Wait, WaitKind};

impl<'a> Run<'a> {
    /// The rolling replacement, when one is due: the launch configuration
    /// changed under a RollingUpdate policy, or one is stored (a crash, or a
    /// rollback of a failed one, which runs under the same policy).
    pub(super) async fn roll(
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
            // With WaitOnResourceSignals, PauseTime bounds the wait for the
            // batch's signals instead of pausing.
            if i > 0 && rollout.policy.pause_ms > 0 && !rollout.policy.wait_on_resource_signals {
                tokio::time::sleep(rollout.policy.pause()).await;
            }
            let batch = &rollout.batches[i];
            let names = |ix: &[u64]| {
                ix.iter()
                    .map(|x| naming::member_name(&spec.prefix, *x))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            // A batch resumed after a crash or takeover was announced.
            let resumed = matches!(&rollout.signals_since, Some((b, _)) if *b == i);
            let steps = if spec.in_place {
                // Members kept by name: what the batch makes, moves and
                // removes, each only when it has some.
                [
                    ("creating", &batch.create),
                    ("updating", &batch.update),
                    ("deleting", &batch.replace),
                ]
                .iter()
                .filter(|(_, ix)| !ix.is_empty())
                .map(|(what, ix)| format!("{what} {}", names(ix)))
                .collect::<Vec<_>>()
                .join(", then ")
            } else {
                format!(
                    "creating {}, then deleting {}",
                    names(&batch.create),
                    names(&batch.replace)
                )
            };
            let start = self.progress(format!(
                "Rolling update batch {} of {total}: {steps}",
                i + 1
            ));
            // The batch's signals are those sent since it started (kept
            // across a resume of the same batch).
            let since = match &rollout.signals_since {
                Some((batch_index, at)) if *batch_index == i => at.clone(),
                _ => crate::stack::now(),
            };
            let stored_since = (i, since.clone());
            let announce = if resumed { vec![] } else { vec![start] };
            self.save(announce, |st| {
                if let Some(r) = st.rollout.as_mut() {
                    r.signals_since = Some(stored_since);
                }
            })
            .await?;
            if let Err(reason) = self
                .run_batch(spec, definition, &rollout.policy, batch, &since)
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
    pub(super) async fn plan_rollout(
        &self,
        spec: &GroupSpec,
        policy: RollingUpdate,
    ) -> Result<Rollout, ProviderError> {
        let stale = |m: &crate::group::state::Member| {
            m.launch_configuration != spec.launch_configuration
                || m.status == crate::stack::ResourceStatus::UpdateFailed
        };
        let batches = if spec.in_place {
            // Heat's batches resize the group too (surge, growth, shrink).
            let st = self.snapshot().await;
            let slots: Vec<in_place::Slot> = st
                .members
                .iter()
                .map(|m| in_place::Slot {
                    index: m.index,
                    up_to_date: !stale(m),
                })
                .collect();
            in_place::plan(
                &slots,
                &st.removed,
                spec.size,
                policy.max_batch_size as usize,
                policy.min_instances_in_service as usize,
            )
        } else {
            self.shrink_to(spec.size, &spec.removal).await?;
            let st = self.snapshot().await;
            let stale: Vec<u64> = st
                .members
                .iter()
                .filter(|m| stale(m))
                .map(|m| m.index)
                .collect();
            // New indices avoid the removed ones too.
            naming::rolling_plan_of(&st.taken(), &stale, policy.max_batch_size as usize)
        };
        let rollout = Rollout {
            target: spec.launch_configuration.clone(),
            batches,
            policy,
            done: 0,
            signals_since: None,
        };
        let stored = rollout.clone();
        self.save(Vec::new(), |st| st.rollout = Some(stored))
            .await?;
        Ok(rollout)
    }

    /// One batch: create its members (in parallel), wait until they are
    /// healthy, check that MinInstancesInService healthy members remain
    /// without the ones it replaces, delete those.
    pub(super) async fn run_batch(
        &self,
        spec: &GroupSpec,
        definition: &MemberDefinition,
        policy: &RollingUpdate,
        batch: &Batch,
        signals_since: &str,
    ) -> Result<(), String> {
        if spec.in_place {
            return self
                .run_in_place_batch(spec, definition, policy, batch, signals_since)
                .await;
        }
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
        self.batch_ready(&new, policy, signals_since).await?;
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

    /// One batch of a group whose members keep their names (Heat's
    /// ResourceGroup, one update of its nested stack): its new members made
    /// and its members moved to the new definition together, then, once
    /// they are healthy, the members it removes deleted. Heat's batch sizes
    /// already keep min_in_service members untouched.
    async fn run_in_place_batch(
        &self,
        spec: &GroupSpec,
        definition: &MemberDefinition,
        policy: &RollingUpdate,
        batch: &Batch,
        signals_since: &str,
    ) -> Result<(), String> {
        let lc = spec.launch_configuration.as_str();
        let (made, moved) = futures::join!(
            Box::pin(self.create_members(&spec.prefix, &batch.create, lc, definition)),
            Box::pin(self.update_members(&batch.update, &spec.prefix, lc, definition)),
        );
        made.and(moved)?;
        let name = |x: &u64| naming::member_name(&spec.prefix, *x);
        let changed: Vec<String> = batch.create.iter().chain(&batch.update).map(name).collect();
        self.batch_ready(&changed, policy, signals_since).await?;
        let gone: Vec<String> = batch.replace.iter().map(name).collect();
        self.delete_members(&gone).await.map_err(|e| e.message)
    }

    /// A batch's new (or moved) members are healthy and, with
    /// WaitOnResourceSignals, have signalled.
    async fn batch_ready(
        &self,
        members: &[String],
        policy: &RollingUpdate,
        signals_since: &str,
    ) -> Result<(), String> {
        let checks: Vec<_> = members.iter().map(|n| self.wait_healthy(n)).collect();
        self.bounded(checks)
            .await
            .into_iter()
            .collect::<Result<(), String>>()?;
        if policy.wait_on_resource_signals && !members.is_empty() {
            self.await_batch_signals(members.len(), signals_since, policy)
                .await?;
        }
        Ok(())
    }

    /// WaitOnResourceSignals: waits until the batch's `count` new members
    /// signalled the group (MinSuccessfulInstancesPercent of them
    /// successfully), within PauseTime. Each signal is a group event.
    async fn await_batch_signals(
        &self,
        count: usize,
        since: &str,
        policy: &RollingUpdate,
    ) -> Result<(), String> {
        let wait = Wait {
            count: count as u32,
            timeout: policy.pause(),
            kind: WaitKind::Group {
                min_successful_percent: policy.min_successful_instances_percent as u32,
            },
        };
        let started = since
            .parse::<jiff::Timestamp>()
            .map(std::time::SystemTime::from)
            .unwrap_or_else(|_| std::time::SystemTime::now());
        let deadline = started + wait.timeout;
        let stack_id = self.op.stack.stack_id.clone();
        let mut shown: HashSet<String> = HashSet::new();
        loop {
            let signals: Vec<_> = self
                .groups
                .store
                .signals(&stack_id, &self.logical_id)
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|s| s.received_at.as_str() >= since)
                .collect();
            let events: Vec<_> = signals
                .iter()
                .map(signal::event_reason)
                .filter(|r| shown.insert(r.clone()))
                .map(|r| self.progress(r))
                .collect();
            if !events.is_empty() {
                self.save(events, |_| {}).await.map_err(|e| e.message)?;
            }
            match wait.progress(&signals) {
                Progress::Done => return Ok(()),
                Progress::Failed(reason) => return Err(reason),
                Progress::Waiting if std::time::SystemTime::now() >= deadline => {
                    let successes = signals
                        .iter()
                        .filter(|s| s.status == crate::stack::SignalStatus::Success)
                        .count();
                    return Err(format!(
                        "Failed to receive {} resource signal(s) for the current batch.  Each resource signal timeout is counted as a FAILURE.",
                        count.saturating_sub(successes)
                    ));
                }
                Progress::Waiting => tokio::time::sleep(self.groups.signal_poll()).await,
            }
        }
    }

    /// Heat's removal_policies (resource_group.py, `_update_name_blacklist`):
    /// the members they name are removed on every create and update that
    /// names them, even when the size does not shrink (a resize then
    /// makes up the count with new indices), and their indices are
    /// recorded so that no new member takes one. At create, an index or a
    /// member name stands for a member to be: it is skipped from the start.
    /// `RemovalPoliciesMode: update` forgets the indices recorded before,
    /// except those this update names again.
    pub(super) async fn apply_removal_policies(
        &self,
        spec: &GroupSpec,
        creating: bool,
    ) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        let index_named = |i: u64| {
            spec.removal
                .iter()
                .any(|r| *r == i.to_string() || *r == naming::member_name(&spec.prefix, i))
        };
        let doomed: Vec<&crate::group::state::Member> = st
            .members
            .iter()
            .filter(|m| names_member(&spec.removal, m))
            .collect();
        let mut removed: Vec<u64> = st
            .removed
            .iter()
            .copied()
            .filter(|i| !spec.removal_reset || index_named(*i))
            .collect();
        removed.extend(doomed.iter().map(|m| m.index));
        if creating {
            removed.extend(spec.removal.iter().filter_map(|r| {
                r.parse::<u64>()
                    .ok()
                    .or_else(|| naming::member_index(&spec.prefix, r))
            }));
        }
        removed.sort_unstable();
        removed.dedup();
        if removed != st.removed {
            self.save(Vec::new(), |st| st.removed = removed).await?;
        }
        let names: Vec<String> = doomed.iter().map(|m| m.name.clone()).collect();
        self.delete_members(&names).await
    }

    /// Deletes the highest-numbered members down to `size`.
    /// Deletes members down to `size`: those `removal` names first (by
    /// name, index or physical id), then the highest-numbered.
    pub(super) async fn shrink_to(
        &self,
        size: usize,
        removal: &[String],
    ) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        let excess = st.members.len().saturating_sub(size);
        let named: Vec<u64> = st
            .members
            .iter()
            .filter(|m| names_member(removal, m))
            .map(|m| m.index)
            .take(excess)
            .collect();
        let rest: Vec<u64> = st
            .indices()
            .into_iter()
            .filter(|i| !named.contains(i))
            .collect();
        let mut doomed_indices = named.clone();
        doomed_indices.extend(naming::shrink(&rest, size));
        let doomed: Vec<String> = doomed_indices
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
    /// `batches` (HOT's batch_create, on create): the new members are made
    /// that many at a time, in index order, pausing between batches.
    pub(super) async fn resize(
        &self,
        spec: &GroupSpec,
        definition: &MemberDefinition,
        batches: Option<BatchCreate>,
    ) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        if st.members.len() > spec.size {
            return self.shrink_to(spec.size, &spec.removal).await;
        }
        let adding = naming::grow_avoiding(&st.indices(), &st.removed, spec.size);
        if adding.is_empty() {
            return Ok(());
        }
        let size = batches.map_or(adding.len(), |b| b.max_batch_size.max(1) as usize);
        let chunks: Vec<&[u64]> = adding.chunks(size).collect();
        let total = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            if let (true, Some(b)) = (i > 0, batches) {
                if b.pause_ms > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(b.pause_ms)).await;
                }
            }
            if total > 1 {
                // Shown once, recorded with its announcement: a batch
                // resumed after a crash is not announced again.
                let announced = self.snapshot().await.create_batch;
                if announced.is_none_or(|a| a < i) {
                    let names: Vec<String> = chunk
                        .iter()
                        .map(|x| naming::member_name(&spec.prefix, *x))
                        .collect();
                    let event = self.progress(format!(
                        "Batch create {} of {total}: creating {}",
                        i + 1,
                        names.join(", ")
                    ));
                    self.save(vec![event], |st| st.create_batch = Some(i))
                        .await?;
                }
            }
            self.create_members(&spec.prefix, chunk, &spec.launch_configuration, definition)
                .await
                .map_err(|reason| {
                    failed(format!(
                        "{} could not grow to {} members: {reason}",
                        self.logical_id, spec.size
                    ))
                })?;
        }
        Ok(())
    }
}

/// Whether a removal_policies entry names `m`: by name, index or
/// physical id.
fn names_member(removal: &[String], m: &crate::group::state::Member) -> bool {
    removal.iter().any(|r| {
        *r == m.name || *r == m.index.to_string() || m.physical_id.as_deref() == Some(r.as_str())
    })
}
