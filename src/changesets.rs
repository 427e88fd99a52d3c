//! Change-set commands (plan, execute, change-sets, change-set,
//! delete-change-set), cancel-update and history.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use cairn_core::engine::{CreateChangeSetInput, Engine, ParameterInput};
use cairn_core::stack::{
    ChangeSetRecord, ChangeSetType, ExecutionStatus, HistoryRecord, OnFailure, StackStatus,
};
use cairn_core::template::parameters::MASK;
use serde_json::{json, Value};

use crate::stacks::{event_count, find, parameter_inputs, print_json, wait_for};
use crate::OutputFormat;

pub struct PlanArgs<'a> {
    pub stack: &'a str,
    pub template: Option<&'a Path>,
    pub parameters: &'a [String],
    pub use_previous: &'a [String],
    pub name: Option<&'a str>,
    pub description: Option<&'a str>,
    pub include_nested: bool,
    /// HOT environment files (`-e`).
    pub environments: &'a [std::path::PathBuf],
    pub output: OutputFormat,
    /// The capabilities acknowledged (`--capabilities`).
    pub capabilities: &'a [String],
    /// `KEY=VALUE` stack tags once executed (none: keep the stack's).
    pub tags: &'a [String],
    /// `--upgrade-types`: the set moves resources to their types' default
    /// versions.
    pub upgrade_types: bool,
}

/// `cairn plan`: creates a change set and prints what it would do.
pub async fn plan(engine: &Arc<Engine>, args: PlanArgs<'_>) -> anyhow::Result<()> {
    let template_body = match args.template {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read template {}", path.display()))?,
        ),
        None => None,
    };
    let name = match args.name {
        Some(n) => n.to_string(),
        None => format!("plan-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
    };
    let gathered = match (args.template, &template_body) {
        (Some(path), Some(body)) => {
            Some(crate::environment::gather(path, body, args.environments)?)
        }
        _ => None,
    };
    let mut parameters: std::collections::BTreeMap<String, ParameterInput> = gathered
        .as_ref()
        .map(|g| {
            g.parameters
                .iter()
                .map(|(k, v)| (k.clone(), ParameterInput::Value(v.clone())))
                .collect()
        })
        .unwrap_or_default();
    parameters.extend(parameter_inputs(args.parameters, args.use_previous)?);
    let input = CreateChangeSetInput {
        resources_to_import: Vec::new(),
        stack_name: args.stack.to_string(),
        change_set_name: name,
        change_set_type: None,
        template_body,
        parameters,
        context: gathered.map(|g| g.context).unwrap_or_default(),
        description: args.description.map(str::to_string),
        tags: (!args.tags.is_empty())
            .then(|| crate::stacks::tag_list(args.tags))
            .transpose()?,
        origin: args
            .template
            .map(cairn_core::nested::Origin::file)
            .unwrap_or_default(),
        include_nested_stacks: args.include_nested,
        capabilities: Some(args.capabilities.to_vec()),
        rollback_configuration: None,
        notification_arns: None,
        upgrade_types: args.upgrade_types,
    };
    let cs = engine
        .change_sets()
        .create_change_set(&input)
        .await
        .map_err(|e| match args.template {
            Some(path) => anyhow!("{}: {e}", path.display()),
            None => anyhow!("{e}"),
        })?;
    print_change_set(&cs, args.output)?;
    if cs.execution_status == ExecutionStatus::Available && args.output == OutputFormat::Text {
        println!(
            "execute it with: cairn execute {} {}",
            cs.stack_name, cs.change_set_name
        );
    }
    Ok(())
}

fn parameters_json(cs: &ChangeSetRecord) -> Vec<Value> {
    cs.parameters
        .iter()
        .map(|(k, v)| {
            let shown = if cs.no_echo.contains(k) { MASK } else { v };
            json!({"ParameterKey": k, "ParameterValue": shown})
        })
        .collect()
}

/// DescribeChangeSet's shape.
fn change_set_json(cs: &ChangeSetRecord) -> Value {
    let mut v = json!({
        "ChangeSetName": cs.change_set_name,
        "ChangeSetId": cs.change_set_id,
        "StackId": cs.stack_id,
        "StackName": cs.stack_name,
        "ChangeSetType": cs.change_set_type,
        "Parameters": parameters_json(cs),
        "CreationTime": cs.created_at,
        "ExecutionStatus": cs.execution_status,
        "Status": cs.status,
        "Changes": cs.changes,
    });
    if let Some(r) = &cs.status_reason {
        v["StatusReason"] = json!(r);
    }
    if let Some(d) = &cs.description {
        v["Description"] = json!(d);
    }
    v["IncludeNestedStacks"] = json!(cs.nested.include_nested_stacks);
    if let Some(p) = &cs.nested.parent_change_set_id {
        v["ParentChangeSetId"] = json!(p);
    }
    if let Some(r) = &cs.nested.root_change_set_id {
        v["RootChangeSetId"] = json!(r);
    }
    if !cs.nested.hook_results.is_empty() {
        v["HookResults"] = json!(cs.nested.hook_results);
    }
    v
}

pub(crate) fn print_change_set(cs: &ChangeSetRecord, output: OutputFormat) -> anyhow::Result<()> {
    if output == OutputFormat::Json {
        return print_json(&change_set_json(cs));
    }
    println!(
        "change set {} ({}) of stack {}: {}, {}",
        cs.change_set_name, cs.change_set_type, cs.stack_name, cs.status, cs.execution_status
    );
    if let Some(r) = &cs.status_reason {
        println!("  {r}");
    }
    for h in &cs.nested.hook_results {
        println!(
            "  hook {} {} ({}){}",
            h.type_name,
            h.status,
            h.failure_mode,
            h.hook_status_reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    for change in cs.changes.as_array().into_iter().flatten() {
        let rc = &change["ResourceChange"];
        let s = |k: &str| rc[k].as_str().unwrap_or_default().to_string();
        let replacement = match rc["Replacement"].as_str() {
            Some(r) => format!("  Replacement: {r}"),
            None => String::new(),
        };
        println!(
            "  {:<7} {:<30} {}{replacement}",
            s("Action"),
            s("LogicalResourceId"),
            s("ResourceType")
        );
        if let Some(id) = rc["ChangeSetId"].as_str() {
            println!("      nested change set {id}");
        }
        if let Some(denial) = rc[cairn_core::engine::stack_policy::DENIED].as_str() {
            println!("      {denial}");
        }
        for d in rc["Details"].as_array().into_iter().flatten() {
            let t = &d["Target"];
            let what = match (t["Name"].as_str(), t["BeforeValue"].as_str()) {
                (Some(n), _) => format!("{}.{n}", t["Attribute"].as_str().unwrap_or_default()),
                // A move to another type version: from and to.
                (None, Some(before)) => format!(
                    "{} {before} -> {}",
                    t["Attribute"].as_str().unwrap_or_default(),
                    t["AfterValue"].as_str().unwrap_or_default()
                ),
                (None, None) => t["Attribute"].as_str().unwrap_or_default().to_string(),
            };
            let cause = d["CausingEntity"]
                .as_str()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            println!(
                "      {what:<30} RequiresRecreation: {:<13} {:<7} {}{cause}",
                t["RequiresRecreation"].as_str().unwrap_or_default(),
                d["Evaluation"].as_str().unwrap_or_default(),
                d["ChangeSource"].as_str().unwrap_or_default(),
            );
        }
    }
    Ok(())
}

/// `cairn execute`: runs a change set and follows it like `deploy`.
pub async fn execute(
    engine: &Arc<Engine>,
    stack: &str,
    change_set: &str,
    disable_rollback: bool,
) -> anyhow::Result<()> {
    let cs = engine
        .change_sets()
        .describe_change_set(stack, change_set)
        .await?;
    let on_failure = if disable_rollback {
        OnFailure::DoNothing
    } else {
        OnFailure::Rollback
    };
    let before = event_count(engine, stack).await?;
    let stack_id = engine
        .change_sets()
        .execute_change_set(stack, change_set, on_failure)
        .await?;
    let success = if cs.change_set_type == ChangeSetType::Create {
        StackStatus::CreateComplete
    } else {
        StackStatus::UpdateComplete
    };
    wait_for(engine, stack, &stack_id, before, success).await
}

pub async fn list(engine: &Arc<Engine>, stack: &str, output: OutputFormat) -> anyhow::Result<()> {
    show_list(&engine.change_sets().list_change_sets(stack).await?, output)
}

/// `cairn change-sets`'s output.
pub(crate) fn show_list(sets: &[ChangeSetRecord], output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            let summaries: Vec<Value> = sets
                .iter()
                .map(|cs| {
                    let mut v = json!({
                        "StackId": cs.stack_id, "StackName": cs.stack_name,
                        "ChangeSetId": cs.change_set_id, "ChangeSetName": cs.change_set_name,
                        "ExecutionStatus": cs.execution_status, "Status": cs.status,
                        "CreationTime": cs.created_at,
                    });
                    if let Some(r) = &cs.status_reason {
                        v["StatusReason"] = json!(r);
                    }
                    if let Some(d) = &cs.description {
                        v["Description"] = json!(d);
                    }
                    v
                })
                .collect();
            print_json(&json!({"Summaries": summaries}))
        }
        OutputFormat::Text => {
            for cs in sets {
                println!(
                    "{:<30} {:<16} {:<20} {}",
                    cs.change_set_name, cs.status, cs.execution_status, cs.created_at
                );
            }
            Ok(())
        }
    }
}

pub async fn describe(
    engine: &Arc<Engine>,
    stack: &str,
    change_set: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let cs = engine
        .change_sets()
        .describe_change_set(stack, change_set)
        .await?;
    print_change_set(&cs, output)
}

pub async fn delete(engine: &Arc<Engine>, stack: &str, change_set: &str) -> anyhow::Result<()> {
    engine
        .change_sets()
        .delete_change_set(stack, change_set)
        .await?;
    println!("change set {change_set} of stack {stack} deleted");
    Ok(())
}

/// `cairn cancel-update`: asks the update to stop and roll back, then
/// follows the rollback to its end (running it here when no process is).
pub async fn cancel_update(engine: &Arc<Engine>, stack: &str) -> anyhow::Result<()> {
    let before = event_count(engine, stack).await?;
    let stack_id = engine.updates().cancel_update(stack).await?;
    wait_for(
        engine,
        stack,
        &stack_id,
        before,
        StackStatus::UpdateRollbackComplete,
    )
    .await
}

/// `cairn history`: the stack's operations, oldest first.
pub async fn history(
    engine: &Arc<Engine>,
    stack: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let s = find(engine, stack).await?;
    show_history(
        &s.stack_id,
        &engine.store().history(&s.stack_id).await?,
        output,
    )
}

/// `cairn history`'s output.
pub(crate) fn show_history(
    stack_id: &str,
    entries: &[HistoryRecord],
    output: OutputFormat,
) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            let list: Vec<Value> = entries
                .iter()
                .map(|h| {
                    let mut v = json!({
                        "Operation": h.kind,
                        "ChangeSetName": h.change_set,
                        "StartTime": h.started_at,
                        "EndTime": h.ended_at,
                        "Status": h.status,
                        "StatusReason": h.status_reason,
                        "Parameters": h.parameters.iter().map(|(k, v)| json!({"ParameterKey": k, "ParameterValue": v})).collect::<Vec<_>>(),
                        "TemplateBody": h.template_body,
                    });
                    if let Some(d) = &h.details {
                        v["Details"] = d.clone();
                    }
                    v
                })
                .collect();
            print_json(&json!({"StackId": stack_id, "Operations": list}))
        }
        OutputFormat::Text => {
            for (i, h) in entries.iter().enumerate() {
                let params: Vec<String> = h
                    .parameters
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let change_set = h
                    .change_set
                    .as_deref()
                    .map(|c| format!(" (change set {c})"))
                    .unwrap_or_default();
                println!(
                    "{:>3}  {:<24} {}  →  {}  {}{change_set}",
                    i + 1,
                    h.kind,
                    h.started_at,
                    h.ended_at.as_deref().unwrap_or("(running)"),
                    h.status.as_deref().unwrap_or("IN_PROGRESS"),
                );
                if let Some(r) = &h.status_reason {
                    println!("       reason: {r}");
                }
                if !params.is_empty() {
                    println!("       parameters: {}", params.join(" "));
                }
                if let Some(d) = &h.details {
                    for step in d["Plan"]["Steps"].as_array().into_iter().flatten() {
                        println!(
                            "       step: {} {}",
                            step["Action"].as_str().unwrap_or_default(),
                            step["Entity"].as_str().unwrap_or_default()
                        );
                    }
                    if let Some(report) = d["Report"].as_object() {
                        for (phase, names) in report {
                            let names: Vec<String> = match names {
                                Value::Array(l) => l
                                    .iter()
                                    .filter_map(|n| n.as_str().map(String::from))
                                    .collect(),
                                Value::Object(m) => m.keys().cloned().collect(),
                                _ => Vec::new(),
                            };
                            if !names.is_empty() {
                                println!("       {phase}: {}", names.join(", "));
                            }
                        }
                    }
                }
            }
            Ok(())
        }
    }
}
