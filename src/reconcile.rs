//! `cairn update`: the deployment update of seed 003 (preview, or run and
//! follow, then what each phase did).

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use cairn_core::engine::{Engine, ReconcileFlags, ReconcileInput, ReconcilePlan, UpdateStackInput};
use cairn_core::stack::StackStatus;
use serde_json::Value;

use crate::stacks::{find, parameter_inputs, print_json, wait_for};
use crate::OutputFormat;

pub struct Args<'a> {
    pub stack: &'a str,
    pub template: Option<&'a Path>,
    pub parameters: &'a [String],
    pub use_previous: &'a [String],
    pub preview: bool,
    pub output: OutputFormat,
    /// `--stack-policy-during-update FILE`.
    pub stack_policy_during_update: Option<&'a Path>,
    /// `--upgrade-types`.
    pub upgrade_types: bool,
    pub flags: ReconcileFlags,
}

pub async fn run(engine: &Arc<Engine>, args: Args<'_>) -> anyhow::Result<()> {
    let template_body = match args.template {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read template {}", p.display()))?,
        ),
        None => None,
    };
    let input = ReconcileInput {
        update: UpdateStackInput {
            stack_policy: None,
            rollback_configuration: None,
            notification_arns: None,
            stack_policy_during_update: crate::stacks::read_policy(
                args.stack_policy_during_update,
            )?,
            stack_name: args.stack.to_string(),
            template_body,
            parameters: parameter_inputs(args.parameters, args.use_previous)?,
            tags: None,
            origin: Default::default(),
            context: None,
            disable_rollback: false,
            capabilities: None,
            upgrade_types: crate::stacks::upgrade_types(args.upgrade_types),
        },
        flags: args.flags,
    };
    let named = |e: cairn_core::engine::EngineError| match args.template {
        Some(p) => anyhow!("{}: {e}", p.display()),
        None => anyhow!("{e}"),
    };
    if args.preview {
        let plan = engine
            .reconciles()
            .plan_reconcile(&input)
            .await
            .map_err(named)?;
        return match args.output {
            OutputFormat::Json => print_json(&serde_json::to_value(&plan)?),
            OutputFormat::Text => {
                print_plan(&plan);
                Ok(())
            }
        };
    }
    let existing = find(engine, args.stack).await?;
    let before = engine.store().event_count(&existing.stack_id).await?;
    let stack_id = engine
        .reconciles()
        .start_reconcile(&input)
        .await
        .map_err(named)?;
    let outcome = wait_for(
        engine,
        args.stack,
        &stack_id,
        before,
        StackStatus::UpdateComplete,
    )
    .await;
    // What each phase did, from the history entry (also on failure).
    if let Some(details) = engine
        .store()
        .history(&stack_id)
        .await?
        .last()
        .and_then(|h| h.details.clone())
    {
        print_report(&details);
    }
    outcome
}

pub(crate) fn print_plan(plan: &ReconcilePlan) {
    println!(
        "Update of stack {} (preview: nothing changed)",
        plan.stack_name
    );
    if plan.steps.is_empty() {
        println!("  no template changes");
    }
    for s in &plan.steps {
        println!("  {:<7} {}", s.action, s.entity);
    }
    if !plan.changed_parameters.is_empty() {
        println!(
            "  parameters changed: {}",
            plan.changed_parameters.join(", ")
        );
    }
    let phase = |name: &str, list: &[String], skipped: bool| {
        if list.is_empty() {
            return;
        }
        let note = if skipped { "  (skipped)" } else { "" };
        println!("{name:<10} {}{note}", list.join(", "));
    };
    let f = &plan.flags;
    phase("uninstall", &plan.uninstall, f.skip_uninstall);
    phase("install", &plan.install, f.skip_install);
    phase("modify", &plan.modify, false);
    phase("reinstall", &plan.reinstall, f.skip_reinstall);
    println!(
        "then: {}, {}",
        if f.skip_heal {
            "no status check (--skip-heal)"
        } else {
            "check_status and heal every resource"
        },
        if f.skip_drift_check {
            "no drift check (--skip-drift-check)"
        } else {
            "check_drift and update drifted resources"
        }
    );
}

/// One line per phase that did something.
pub(crate) fn print_report(details: &Value) {
    let report = &details["Report"];
    for (key, label) in [
        ("Uninstalled", "uninstalled"),
        ("Installed", "installed"),
        ("Healed", "healed"),
        ("Updated", "updated"),
        ("InSync", "in sync"),
        ("Reinstalled", "reinstalled"),
        ("Failed", "failed"),
    ] {
        let names: Vec<&str> = report[key]
            .as_array()
            .map(|l| l.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !names.is_empty() {
            eprintln!("{label:<12} {}", names.join(", "));
        }
    }
    if let Some(skipped) = report["Skipped"].as_object() {
        for (phase, names) in skipped {
            let names: Vec<&str> = names
                .as_array()
                .map(|l| l.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            eprintln!("skipped      {phase} {}", names.join(", "));
        }
    }
}
