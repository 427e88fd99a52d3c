//! `cairn hooks check STACK TEMPLATE`: every hook in force against a
//! template, nothing run or recorded (a dry run for a pipeline: exit 1
//! when a hook whose failure mode is FAIL would refuse).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use cairn_core::engine::Engine;
use cairn_core::hooks::{FailureMode, HookStatus};

use crate::stacks::{parse_parameters, print_json};
use crate::OutputFormat;

#[derive(clap::Subcommand)]
pub enum HooksCommand {
    /// Evaluate every hook in force against TEMPLATE as STACK's template
    /// (an update if STACK exists, else a create), changing nothing.
    /// Exits 1 when a hook whose failure mode is FAIL would refuse.
    Check {
        stack: String,
        template: PathBuf,
        /// A parameter value, KEY=VALUE (repeatable).
        #[arg(long = "parameter", short = 'p')]
        parameters: Vec<String>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

pub async fn run(engine: &Arc<Engine>, command: &HooksCommand) -> anyhow::Result<()> {
    let HooksCommand::Check {
        stack,
        template,
        parameters,
        output,
    } = command;
    let body = std::fs::read_to_string(template)
        .with_context(|| format!("cannot read template {}", template.display()))?;
    let values = parse_parameters(parameters)?;
    let checks = engine
        .check_hooks(stack, &body, &values)
        .await
        .map_err(|e| anyhow::anyhow!("{}: {e}", template.display()))?;
    match output {
        OutputFormat::Json => print_json(&serde_json::json!({ "HookChecks": checks }))?,
        OutputFormat::Text => {
            if checks.is_empty() {
                println!("no hook in force judges {stack}");
            }
            for c in &checks {
                println!(
                    "{:<8} {:<24} {:<6} {} {} ({}){}",
                    c.target_type,
                    c.target,
                    c.action,
                    c.hook_type,
                    c.hook_status,
                    c.hook_failure_mode,
                    c.hook_status_reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    let refused: Vec<String> = checks
        .iter()
        .filter(|c| {
            c.hook_status != HookStatus::Succeeded && c.hook_failure_mode == FailureMode::Fail
        })
        .map(|c| format!("{} on {}", c.hook_type, c.target))
        .collect();
    if !refused.is_empty() {
        bail!("hooks would refuse it: {}", refused.join(", "));
    }
    Ok(())
}
