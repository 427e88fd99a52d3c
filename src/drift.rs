//! `cairn drift STACK`: detect drift (or show the last detection) in
//! CloudFormation's drift model.

use std::sync::Arc;

use cairn_core::engine::drift::StackDriftDetection;
use cairn_core::engine::Engine;
use cairn_core::stack::ResourceDriftStatus;

use crate::stacks::print_json;
use crate::OutputFormat;

pub async fn run(
    engine: &Arc<Engine>,
    stack: &str,
    only: &[String],
    last: bool,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let detection = if last {
        match engine.drift().last_drift_detection(stack).await? {
            Some(d) => d,
            None => anyhow::bail!(
                "drift was never detected on stack {stack}; run `cairn drift {stack}`"
            ),
        }
    } else {
        engine.drift().detect_drift(stack, only).await?
    };
    show(&detection, output)
}

/// `cairn drift`'s output.
pub(crate) fn show(detection: &StackDriftDetection, output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => print_json(&serde_json::to_value(detection)?),
        OutputFormat::Text => {
            print_text(detection);
            Ok(())
        }
    }
}

fn print_text(d: &StackDriftDetection) {
    let checked = d
        .stack_resource_drifts
        .iter()
        .filter(|r| r.stack_resource_drift_status != ResourceDriftStatus::NotChecked)
        .count();
    println!(
        "Stack {}: {} ({}, detection {} at {}): {} of {} checked resources drifted",
        d.stack_name,
        d.stack_drift_status,
        d.detection_status,
        d.stack_drift_detection_id,
        d.timestamp,
        d.drifted_stack_resource_count,
        checked
    );
    if let Some(reason) = &d.detection_status_reason {
        println!("  {reason}");
    }
    for r in &d.stack_resource_drifts {
        let reason = r
            .drift_status_reason
            .as_deref()
            .map(|x| format!("  ({x})"))
            .unwrap_or_default();
        println!(
            "{:<24} {:<30} {:<12} {}{reason}",
            r.logical_resource_id,
            r.resource_type,
            r.stack_resource_drift_status,
            r.physical_resource_id
        );
        for p in &r.property_differences {
            let kind = serde_json::to_value(p.difference_type)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            println!(
                "    {}: expected {:?}, actual {:?} ({kind})",
                p.property_path, p.expected_value, p.actual_value
            );
        }
    }
}
