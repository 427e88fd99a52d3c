//! A group's members checked by their own providers: drift, health, and
//! healing (a member that is gone or unhealthy is made again under its name).

use crate::engine::kinds::Groups;
use cairn_sdk::{
    DifferenceType, DriftRequest, DriftResult, Health, PropertyDifference, ProviderError,
    StatusRequest,
};
use serde_json::{Map, Value};

use super::{bounded, failed, Run};
use crate::engine::Op;
use crate::group::state::{GroupState, Member};
use crate::group::types::{self};
use crate::stack::ResourceRecord;

/// What is wrong with a member, found by its provider's drift and status
/// checks.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Finding {
    Missing,
    Unhealthy(String),
    Drifted(Vec<PropertyDifference>),
}

impl Finding {
    fn describe(&self) -> String {
        match self {
            Finding::Missing => "DELETED".into(),
            Finding::Unhealthy(reason) => format!("UNHEALTHY: {reason}"),
            Finding::Drifted(d) => format!("MODIFIED ({} differences)", d.len()),
        }
    }
}

impl Groups<'_> {
    /// The group's stored state, by its physical id.
    pub(super) async fn stored_group(
        &self,
        stack_id: &str,
        r: &ResourceRecord,
    ) -> Result<GroupState, ProviderError> {
        let physical = r.physical_id.clone().unwrap_or_default();
        match self.store.group(stack_id, &physical).await {
            Ok(Some(v)) => serde_json::from_value(v).map_err(|e| {
                failed(format!(
                    "the stored state of group {} is unreadable: {e}",
                    r.logical_id
                ))
            }),
            Ok(None) => Ok(GroupState::default()),
            Err(e) => Err(failed(e.to_string())),
        }
    }

    /// Asks each member's provider about it: gone, unhealthy, or (with
    /// `drift`) drifted from the properties it was made with.
    pub(super) async fn member_findings(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
        drift: bool,
    ) -> Result<Vec<(Member, Finding)>, ProviderError> {
        let state = self.stored_group(stack_id, r).await?;
        let work: Vec<_> = state
            .members
            .into_iter()
            .map(|m| async move {
                let finding = self.member_finding(stack_id, stack_name, &m, drift).await;
                finding.map(|f| (m, f))
            })
            .collect();
        Ok(bounded(self.config.engine.max_concurrency, work)
            .await
            .into_iter()
            .flatten()
            .collect())
    }

    pub(super) async fn member_finding(
        &self,
        stack_id: &str,
        stack_name: &str,
        m: &Member,
        drift: bool,
    ) -> Option<Finding> {
        let Some(physical) = m.physical_id.clone().filter(|_| m.is_in_service()) else {
            return Some(Finding::Unhealthy(format!("it is {}", m.status)));
        };
        let t = match self.protocol().provider_for(&m.resource_type, None) {
            Ok(t) => t,
            Err(e) => return Some(Finding::Unhealthy(e.message)),
        };
        let context = || {
            self.protocol().request_context(
                stack_id,
                stack_name,
                &m.name,
                &m.resource_type,
                &uuid::Uuid::new_v4().to_string(),
            )
        };
        if drift {
            let req = DriftRequest {
                context: context(),
                physical_resource_id: physical.clone(),
                properties: m.properties.clone(),
            };
            match self
                .protocol()
                .timed("drift detection", t.provider.check_drift(&req))
                .await
            {
                Ok(DriftResult::Deleted) => return Some(Finding::Missing),
                Ok(DriftResult::Modified { differences }) => {
                    return Some(Finding::Drifted(differences))
                }
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Some(Finding::Missing),
                Err(e) => return Some(Finding::Unhealthy(e.message)),
            }
        }
        let req = StatusRequest {
            context: context(),
            physical_resource_id: physical,
            properties: m.properties.clone(),
        };
        match self
            .protocol()
            .timed("status check", t.provider.check_status(&req))
            .await
        {
            Ok(Health::Healthy) => None,
            Ok(Health::Unhealthy { reason }) => Some(Finding::Unhealthy(reason)),
            Err(e) if e.is_not_found() => Some(Finding::Missing),
            Err(e) => Some(Finding::Unhealthy(e.message)),
        }
    }

    /// A group's drift: its members, each compared by its own provider. A
    /// member that is gone or unhealthy is a difference of the group.
    pub(in crate::engine) async fn group_drift(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
    ) -> Result<DriftResult, ProviderError> {
        let findings = self.member_findings(stack_id, stack_name, r, true).await?;
        let mut differences = Vec::new();
        for (m, finding) in findings {
            let base = format!("/Members/{}", m.name);
            match finding {
                Finding::Missing => differences.push(PropertyDifference {
                    property_path: base,
                    expected_value: m.physical_id.clone().unwrap_or_default(),
                    actual_value: "null".into(),
                    difference_type: DifferenceType::Remove,
                }),
                Finding::Unhealthy(reason) => differences.push(PropertyDifference {
                    property_path: format!("{base}/Health"),
                    expected_value: "HEALTHY".into(),
                    actual_value: format!("UNHEALTHY: {reason}"),
                    difference_type: DifferenceType::NotEqual,
                }),
                Finding::Drifted(list) => differences.extend(list.into_iter().map(|mut d| {
                    d.property_path = format!("{base}/Properties{}", d.property_path);
                    d
                })),
            }
        }
        Ok(DriftResult::from_differences(differences))
    }

    /// A group's health: unhealthy when a member is gone or unhealthy.
    pub(in crate::engine) async fn group_health(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
    ) -> Result<Health, ProviderError> {
        let findings = self.member_findings(stack_id, stack_name, r, false).await?;
        if findings.is_empty() {
            return Ok(Health::Healthy);
        }
        let list: Vec<String> = findings
            .iter()
            .map(|(m, f)| format!("{} ({})", m.name, f.describe()))
            .collect();
        Ok(Health::Unhealthy {
            reason: format!("members not healthy: {}", list.join(", ")),
        })
    }

    /// Heals a group: every member that is gone, unhealthy or drifted is
    /// deleted and made again (same name) from the current launch
    /// configuration, in batches of the group's MaxBatchSize, each waiting
    /// until its members report healthy. Returns the group's attributes.
    pub(in crate::engine) async fn group_heal(
        &self,
        op: &Op,
        r: &ResourceRecord,
    ) -> Result<Map<String, Value>, ProviderError> {
        let physical = r.physical_id.clone().unwrap_or_default();
        let canonical = self.registry.canonical(&r.resource_type).to_string();
        let spec = types::spec(&canonical, &r.logical_id, &r.properties)
            .map_err(|e| ProviderError::invalid_request(e.to_string()))?;
        let definition = self.launch_configuration(op, &r.logical_id, &spec).await?;
        let policy = self
            .rolling_policy(op, &r.logical_id)
            .map_err(ProviderError::invalid_request)?
            .unwrap_or_default();
        let run = Run::load(*self, op, &r.logical_id, &physical).await?;
        run.settle().await?;
        let findings = self
            .member_findings(&op.stack.stack_id, &op.stack.stack_name, r, true)
            .await?;
        // A member that is gone or unhealthy serves nothing: it is deleted
        // first and made again under its own name (the names stay one
        // contiguous run, and a host keeps its name).
        let batch_size = policy.max_batch_size.max(1) as usize;
        for batch in findings.chunks(batch_size) {
            let names: Vec<String> = batch.iter().map(|(m, _)| m.name.clone()).collect();
            let indices: Vec<u64> = batch.iter().map(|(m, _)| m.index).collect();
            let why: Vec<String> = batch
                .iter()
                .map(|(m, f)| format!("{} is {}", m.name, f.describe()))
                .collect();
            let start = run.progress(format!(
                "Healing: replacing {} ({})",
                names.join(", "),
                why.join("; ")
            ));
            run.save(vec![start], |_| {}).await?;
            run.delete_members(&names).await?;
            let made = run
                .create_members(
                    &spec.prefix,
                    &indices,
                    &spec.launch_configuration,
                    &definition,
                )
                .await;
            let healthy = match made {
                Ok(()) => {
                    let checks: Vec<_> = names.iter().map(|n| run.wait_healthy(n)).collect();
                    run.bounded(checks)
                        .await
                        .into_iter()
                        .collect::<Result<(), String>>()
                }
                Err(reason) => Err(reason),
            };
            if let Err(reason) = healthy {
                return Err(failed(format!("Healing {} failed: {reason}", r.logical_id)));
            }
        }
        Ok(run.snapshot().await.attributes())
    }
}
