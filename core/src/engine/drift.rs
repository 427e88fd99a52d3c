//! Drift detection: each resource's provider compares the live resource with
//! the properties the template set (`check_drift`); the results are reported
//! in CloudFormation's drift model and kept for `cairn drift --last`.

use crate::engine::kinds::Drift;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use cairn_sdk::{DriftRequest, DriftResult, PropertyDifference};

use super::EngineError;
use crate::stack::{
    now, DetectionStatus, ResourceDriftStatus, ResourceRecord, StackDriftStatus, StackStatus,
};

/// One resource's drift, as CloudFormation's `StackResourceDrift`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ResourceDrift {
    pub stack_id: String,
    pub logical_resource_id: String,
    pub physical_resource_id: String,
    pub resource_type: String,
    /// The properties the template set, as a JSON string.
    pub expected_properties: String,
    #[serde(default)]
    pub property_differences: Vec<PropertyDifference>,
    pub stack_resource_drift_status: ResourceDriftStatus,
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_status_reason: Option<String>,
}

/// A whole detection, as `DescribeStackDriftDetectionStatus` plus the
/// resource drifts `DescribeStackResourceDrifts` lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StackDriftDetection {
    pub stack_drift_detection_id: String,
    pub stack_id: String,
    pub stack_name: String,
    pub stack_drift_status: StackDriftStatus,
    /// DETECTION_FAILED when a resource could not be checked (the others'
    /// results stand).
    pub detection_status: DetectionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_status_reason: Option<String>,
    pub drifted_stack_resource_count: usize,
    pub timestamp: String,
    pub stack_resource_drifts: Vec<ResourceDrift>,
}

/// A stored detection read back.
fn decode(body: Option<Value>) -> Result<Option<StackDriftDetection>, EngineError> {
    body.map(serde_json::from_value).transpose().map_err(|e| {
        EngineError::Validation(format!("the recorded drift detection cannot be read: {e}"))
    })
}

/// The statuses drift can be detected in (CloudFormation's list).
fn detectable(status: StackStatus) -> bool {
    matches!(
        status,
        StackStatus::CreateComplete
            | StackStatus::UpdateComplete
            | StackStatus::UpdateRollbackComplete
            | StackStatus::UpdateRollbackFailed
            // After an import, as AWS recommends.
            | StackStatus::ImportComplete
            | StackStatus::ImportRollbackComplete
    )
}

impl Drift<'_> {
    /// Checks every live resource of `stack` (or only `only`) for drift,
    /// concurrently (`max_concurrency` at once), and records the result.
    pub async fn detect_drift(
        &self,
        stack: &str,
        only: &[String],
    ) -> Result<StackDriftDetection, EngineError> {
        let Some(s) = self.store.find_stack(stack).await? else {
            return Err(EngineError::Validation(format!(
                "Stack with id {stack} does not exist"
            )));
        };
        if !detectable(s.status) {
            return Err(EngineError::Validation(format!(
                "Drift detection is not supported for stack {} in {} state; it is available in CREATE_COMPLETE, UPDATE_COMPLETE, UPDATE_ROLLBACK_COMPLETE, UPDATE_ROLLBACK_FAILED, IMPORT_COMPLETE and IMPORT_ROLLBACK_COMPLETE",
                s.stack_name, s.status
            )));
        }
        let rows: Vec<ResourceRecord> = self
            .store
            .resources(&s.stack_id)
            .await?
            .into_iter()
            .filter(|r| crate::plan::is_live(r) && r.physical_id.is_some())
            .collect();
        if let Some(missing) = only
            .iter()
            .find(|name| !rows.iter().any(|r| &r.logical_id == *name))
        {
            return Err(EngineError::Validation(format!(
                "Resource {missing} does not exist for stack {}",
                s.stack_name
            )));
        }
        let chosen: Vec<&ResourceRecord> = rows
            .iter()
            .filter(|r| only.is_empty() || only.contains(&r.logical_id))
            .collect();
        let limit = self.config.engine.max_concurrency.max(1);
        let stack_id = s.stack_id.clone();
        let stack_name = s.stack_name.clone();
        let work: Vec<_> = chosen
            .into_iter()
            .map(|r| self.check_one(&stack_id, &stack_name, r))
            .collect();
        let drifts: Vec<ResourceDrift> = super::group::bounded(limit, work).await;
        let drifted = drifts
            .iter()
            .filter(|d| d.stack_resource_drift_status.drifted())
            .count();
        let failed: Vec<&str> = drifts
            .iter()
            .filter(|d| d.stack_resource_drift_status == ResourceDriftStatus::Unknown)
            .map(|d| d.logical_resource_id.as_str())
            .collect();
        let detection = StackDriftDetection {
            stack_drift_detection_id: uuid::Uuid::new_v4().to_string(),
            stack_id: s.stack_id.clone(),
            stack_name: s.stack_name.clone(),
            stack_drift_status: if drifted > 0 {
                StackDriftStatus::Drifted
            } else if failed.is_empty() {
                StackDriftStatus::InSync
            } else {
                StackDriftStatus::Unknown
            },
            detection_status: if failed.is_empty() {
                DetectionStatus::DetectionComplete
            } else {
                DetectionStatus::DetectionFailed
            },
            detection_status_reason: (!failed.is_empty()).then(|| {
                format!(
                    "Failed to detect drift on resources [{}]",
                    failed.join(", ")
                )
            }),
            drifted_stack_resource_count: drifted,
            timestamp: now(),
            stack_resource_drifts: drifts,
        };
        let body = serde_json::to_value(&detection).map_err(|e| {
            EngineError::Validation(format!("cannot record the drift detection: {e}"))
        })?;
        self.store
            .put_drift_detection(
                &s.stack_id,
                &detection.stack_drift_detection_id,
                &detection.timestamp,
                &body,
            )
            .await?;
        Ok(detection)
    }

    /// A drift detection by its id (any stack's, any earlier one).
    pub async fn drift_detection(
        &self,
        detection_id: &str,
    ) -> Result<Option<StackDriftDetection>, EngineError> {
        decode(self.store.drift_detection(detection_id).await?)
    }

    /// The stack's last drift detection, as recorded.
    pub async fn last_drift_detection(
        &self,
        stack: &str,
    ) -> Result<Option<StackDriftDetection>, EngineError> {
        let Some(s) = self.store.find_stack(stack).await? else {
            return Err(EngineError::Validation(format!(
                "Stack with id {stack} does not exist"
            )));
        };
        decode(self.store.last_drift_detection(&s.stack_id).await?)
    }

    /// The provider's drift check of a stored resource against
    /// `properties` (a group's: its members, each by its own provider).
    pub(super) async fn resource_drift(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
        properties: &serde_json::Map<String, Value>,
    ) -> Result<DriftResult, cairn_sdk::ProviderError> {
        if crate::group::is_group(self.registry.canonical(&r.resource_type)) {
            return self.groups().group_drift(stack_id, stack_name, r).await;
        }
        let t = self
            .protocol()
            .provider_for(&r.resource_type, r.type_version.as_deref())?;
        let req = DriftRequest {
            context: self.resource_context(stack_id, stack_name, r),
            physical_resource_id: r.physical_id.clone().unwrap_or_default(),
            properties: properties.clone(),
        };
        self.protocol()
            .timed("drift detection", t.provider.check_drift(&req))
            .await
    }

    /// The provider's status check of a stored resource (a group's: its
    /// members').
    pub(super) async fn resource_health(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
    ) -> Result<cairn_sdk::Health, cairn_sdk::ProviderError> {
        if crate::group::is_group(self.registry.canonical(&r.resource_type)) {
            return self.groups().group_health(stack_id, stack_name, r).await;
        }
        let t = self
            .protocol()
            .provider_for(&r.resource_type, r.type_version.as_deref())?;
        let req = cairn_sdk::StatusRequest {
            context: self.resource_context(stack_id, stack_name, r),
            physical_resource_id: r.physical_id.clone().unwrap_or_default(),
            properties: r.properties.clone(),
        };
        self.protocol()
            .timed("status check", t.provider.check_status(&req))
            .await
    }

    fn resource_context(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
    ) -> cairn_sdk::RequestContext {
        self.protocol().request_context(
            stack_id,
            stack_name,
            &r.logical_id,
            &r.resource_type,
            &uuid::Uuid::new_v4().to_string(),
        )
    }

    async fn check_one(
        &self,
        stack_id: &str,
        stack_name: &str,
        r: &ResourceRecord,
    ) -> ResourceDrift {
        let physical = r.physical_id.clone().unwrap_or_default();
        let mut drift = ResourceDrift {
            stack_id: stack_id.to_string(),
            logical_resource_id: r.logical_id.clone(),
            physical_resource_id: physical.clone(),
            resource_type: r.resource_type.clone(),
            expected_properties: Value::Object(r.properties.clone()).to_string(),
            property_differences: Vec::new(),
            stack_resource_drift_status: ResourceDriftStatus::NotChecked,
            timestamp: now(),
            drift_status_reason: None,
        };
        let result = self
            .resource_drift(stack_id, stack_name, r, &r.properties)
            .await;
        drift.timestamp = now();
        match result {
            Ok(DriftResult::InSync) => {
                drift.stack_resource_drift_status = ResourceDriftStatus::InSync
            }
            Ok(DriftResult::Modified { differences }) => {
                drift.stack_resource_drift_status = ResourceDriftStatus::Modified;
                drift.property_differences = differences;
            }
            Ok(DriftResult::Deleted) => {
                drift.stack_resource_drift_status = ResourceDriftStatus::Deleted
            }
            Ok(DriftResult::NotChecked) => {
                drift.drift_status_reason = Some(format!(
                    "The provider of {} does not support drift detection",
                    r.resource_type
                ));
            }
            Err(e) => {
                drift.stack_resource_drift_status = ResourceDriftStatus::Unknown;
                drift.drift_status_reason = Some(e.message);
            }
        }
        drift
    }
}
