//! Query API answers turned back into the records the local commands print.

use cairn_core::engine::drift::{ResourceDrift, StackDriftDetection};
use cairn_core::stack::{
    ChangeSetRecord, ChangeSetType, EventRecord, HistoryRecord, OnFailure, OutputRecord,
    StackRecord, StackStatus, Tag,
};
use std::collections::BTreeMap;

use anyhow::anyhow;

use super::xml::Node;

/// A word of the answer that names one of Cairn's typed values.
fn word<T: std::str::FromStr>(m: &Node, name: &str) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    m.text_or_empty(name).parse().map_err(|why: T::Err| {
        anyhow!("the server sent a {name} Cairn does not know ({why}): is it a newer Cairn?")
    })
}

pub(super) fn change_set_record(m: &Node) -> anyhow::Result<ChangeSetRecord> {
    Ok(ChangeSetRecord {
        change_set_id: m.text_or_empty("ChangeSetId"),
        change_set_name: m.text_or_empty("ChangeSetName"),
        stack_id: m.text_or_empty("StackId"),
        stack_name: m.text_or_empty("StackName"),
        // A summary (ListChangeSets) does not carry it; nothing shown
        // from a summary reads it.
        change_set_type: match m.text_of("ChangeSetType") {
            Some(t) => t.parse()?,
            None => ChangeSetType::Update,
        },
        status: word(m, "Status")?,
        execution_status: word(m, "ExecutionStatus")?,
        status_reason: m.text_of("StatusReason"),
        description: m.text_of("Description"),
        template_body: String::new(),
        parameters: m
            .members("Parameters")
            .iter()
            .map(|p| {
                (
                    p.text_or_empty("ParameterKey"),
                    p.text_or_empty("ParameterValue"),
                )
            })
            .collect(),
        no_echo: Vec::new(),
        changes: serde_json::Value::Array(Vec::new()),
        created_at: m.text_or_empty("CreationTime"),
        base_version: 0,
        tags: None,
        nested: cairn_core::stack::ChangeSetNesting {
            templates: Default::default(),
            include_nested_stacks: m.text_of("IncludeNestedStacks").as_deref() == Some("true"),
            parent_change_set_id: m.text_of("ParentChangeSetId"),
            root_change_set_id: m.text_of("RootChangeSetId"),
            context: Default::default(),
            rollback_configuration: None,
            notification_arns: None,
            upgrade_types: Default::default(),
            hook_results: m
                .members("HookResults")
                .iter()
                .map(|h| {
                    Ok(cairn_core::hooks::HookResult {
                        type_name: h.text_or_empty("TypeName"),
                        status: word(h, "Status")?,
                        hook_status_reason: h.text_of("HookStatusReason"),
                        invocation_point: h.text_or_empty("InvocationPoint"),
                        failure_mode: word(h, "FailureMode")?,
                        invoked_at: h.text_or_empty("InvokedAt"),
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
        },
    })
}

pub(super) fn drift_detection(
    s: &StackRecord,
    status: &Node,
    drifts: &[Node],
) -> anyhow::Result<StackDriftDetection> {
    let resources = drifts
        .iter()
        .map(|d| {
            Ok(ResourceDrift {
                stack_id: d.text_or_empty("StackId"),
                logical_resource_id: d.text_or_empty("LogicalResourceId"),
                physical_resource_id: d.text_or_empty("PhysicalResourceId"),
                resource_type: d.text_or_empty("ResourceType"),
                expected_properties: d.text_or_empty("ExpectedProperties"),
                property_differences: serde_json::from_value(
                    d.child("PropertyDifferences")
                        .map(Node::to_json)
                        .unwrap_or_default(),
                )?,
                stack_resource_drift_status: word(d, "StackResourceDriftStatus")?,
                timestamp: d.text_or_empty("Timestamp"),
                drift_status_reason: d.text_of("DriftStatusReason"),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(StackDriftDetection {
        stack_drift_detection_id: status.text_or_empty("StackDriftDetectionId"),
        stack_id: status.text_or_empty("StackId"),
        stack_name: s.stack_name.clone(),
        stack_drift_status: word(status, "StackDriftStatus")?,
        detection_status: word(status, "DetectionStatus")?,
        detection_status_reason: status.text_of("DetectionStatusReason"),
        drifted_stack_resource_count: status
            .text_or_empty("DriftedStackResourceCount")
            .parse()
            .unwrap_or(0),
        timestamp: status.text_or_empty("Timestamp"),
        stack_resource_drifts: resources,
    })
}

pub(super) fn history_record(m: &Node) -> anyhow::Result<HistoryRecord> {
    Ok(HistoryRecord {
        stack_id: String::new(),
        kind: word(m, "Operation")?,
        change_set: m.text_of("ChangeSetName"),
        template_body: m.text_or_empty("TemplateBody"),
        parameters: m
            .members("Parameters")
            .iter()
            .map(|p| {
                (
                    p.text_or_empty("ParameterKey"),
                    p.text_or_empty("ParameterValue"),
                )
            })
            .collect(),
        started_at: m.text_or_empty("StartTime"),
        ended_at: m.text_of("EndTime"),
        status: m.text_of("Status"),
        status_reason: m.text_of("StatusReason"),
        details: m
            .text_of("Details")
            .and_then(|d| serde_json::from_str(&d).ok()),
    })
}

pub(super) fn stack_record(m: &Node) -> anyhow::Result<StackRecord> {
    let status: StackStatus = word(m, "StackStatus")?;
    let parameters: BTreeMap<String, String> = m
        .members("Parameters")
        .iter()
        .map(|p| {
            (
                p.text_or_empty("ParameterKey"),
                p.text_or_empty("ParameterValue"),
            )
        })
        .collect();
    let outputs = m
        .members("Outputs")
        .iter()
        .map(|o| OutputRecord {
            output_key: o.text_or_empty("OutputKey"),
            output_value: o.text_of("OutputValue"),
            description: o.text_of("Description"),
            export_name: o.text_of("ExportName"),
            output_error: None,
            typed_value: None,
        })
        .collect();
    let created = m.text_or_empty("CreationTime");
    Ok(StackRecord {
        stack_id: m.text_or_empty("StackId"),
        stack_name: m.text_or_empty("StackName"),
        status,
        status_reason: m.text_of("StackStatusReason"),
        description: m.text_of("Description"),
        template_body: String::new(),
        parameters,
        no_echo: Vec::new(),
        outputs,
        on_failure: if m.text_of("DisableRollback").as_deref() == Some("true") {
            OnFailure::DoNothing
        } else {
            OnFailure::Rollback
        },
        updated_at: m
            .text_of("LastUpdatedTime")
            .unwrap_or_else(|| created.clone()),
        created_at: created,
        deleted_at: m.text_of("DeletionTime"),
        tags: m
            .members("Tags")
            .iter()
            .map(|t| Tag {
                key: t.text_or_empty("Key"),
                value: t.text_or_empty("Value"),
            })
            .collect(),
        parent_id: m.text_of("ParentId"),
        root_id: m.text_of("RootId"),
        context: Default::default(),
        capabilities: m
            .members("Capabilities")
            .iter()
            .map(|c| c.text.clone())
            .collect(),
        termination_protection: m.text_of("EnableTerminationProtection").as_deref() == Some("true"),
        // DescribeStacks does not show it (GetStackPolicy does).
        stack_policy: None,
        notification_arns: m
            .members("NotificationARNs")
            .iter()
            .map(|t| t.text.clone())
            .collect(),
        rollback_configuration: m.child("RollbackConfiguration").and_then(|c| {
            let triggers = c
                .members("RollbackTriggers")
                .iter()
                .map(|t| cairn_core::rollback_triggers::RollbackTrigger {
                    arn: t.text_or_empty("Arn"),
                    kind: t.text_or_empty("Type"),
                })
                .collect();
            let minutes = c.text_of("MonitoringTimeInMinutes")?.parse().ok();
            Some(cairn_core::rollback_triggers::RollbackConfiguration {
                rollback_triggers: Some(triggers),
                monitoring_time_in_minutes: minutes,
            })
        }),
    })
}

pub(super) fn event_record(e: &Node) -> anyhow::Result<EventRecord> {
    let status = word(e, "ResourceStatus")?;
    let hook = match e.text_of("HookType") {
        Some(hook_type) => Some(cairn_core::hooks::HookEvent {
            hook_type,
            hook_status: word(e, "HookStatus")?,
            hook_status_reason: e.text_of("HookStatusReason"),
            hook_invocation_point: e.text_or_empty("HookInvocationPoint"),
            hook_failure_mode: word(e, "HookFailureMode")?,
        }),
        None => None,
    };
    Ok(EventRecord {
        hook,
        event_id: e.text_or_empty("EventId"),
        stack_id: e.text_or_empty("StackId"),
        stack_name: e.text_or_empty("StackName"),
        logical_id: e.text_or_empty("LogicalResourceId"),
        physical_id: e.text_or_empty("PhysicalResourceId"),
        resource_type: e.text_or_empty("ResourceType"),
        timestamp: e.text_or_empty("Timestamp"),
        status,
        status_reason: e.text_of("ResourceStatusReason"),
        properties: e.text_of("ResourceProperties"),
    })
}
