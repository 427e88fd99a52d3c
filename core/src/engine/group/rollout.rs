//! Rolling replacement (its stored plan and batch cursor) and resizing.

use cairn_sdk::ProviderError;

use super::{failed, Run};
use crate::group::naming::{self, Batch};
use crate::group::policy::RollingUpdate;
use crate::group::state::Rollout;
use crate::group::types::{GroupSpec, MemberDefinition};

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
            if i > 0 && rollout.policy.pause_ms > 0 {
                tokio::time::sleep(rollout.policy.pause()).await;
            }
            let batch = &rollout.batches[i];
            let names = |ix: &[u64]| {
                ix.iter()
                    .map(|x| naming::member_name(&spec.prefix, *x))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let start = self.progress(format!(
                "Rolling update batch {} of {total}: creating {}, then deleting {}",
                i + 1,
                names(&batch.create),
                names(&batch.replace)
            ));
            self.save(vec![start], |_| {}).await?;
            if let Err(reason) = self
                .run_batch(spec, definition, &rollout.policy, batch)
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
        self.shrink_to(spec.size).await?;
        let st = self.snapshot().await;
        let stale: Vec<u64> = st
            .members
            .iter()
            .filter(|m| m.launch_configuration != spec.launch_configuration)
            .map(|m| m.index)
            .collect();
        let rollout = Rollout {
            target: spec.launch_configuration.clone(),
            batches: naming::rolling_plan_of(&st.indices(), &stale, policy.max_batch_size as usize),
            policy,
            done: 0,
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
    ) -> Result<(), String> {
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
        let checks: Vec<_> = new.iter().map(|n| self.wait_healthy(n)).collect();
        self.bounded(checks)
            .await
            .into_iter()
            .collect::<Result<(), String>>()?;
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

    /// Deletes the highest-numbered members down to `size`.
    pub(super) async fn shrink_to(&self, size: usize) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        let doomed: Vec<String> = naming::shrink(&st.indices(), size)
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
    pub(super) async fn resize(
        &self,
        spec: &GroupSpec,
        definition: &MemberDefinition,
    ) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        if st.members.len() > spec.size {
            return self.shrink_to(spec.size).await;
        }
        let adding = naming::grow(&st.indices(), spec.size);
        if adding.is_empty() {
            return Ok(());
        }
        self.create_members(
            &spec.prefix,
            &adding,
            &spec.launch_configuration,
            definition,
        )
        .await
        .map_err(|reason| {
            failed(format!(
                "{} could not grow to {} members: {reason}",
                self.logical_id, spec.size
            ))
        })
    }
}
