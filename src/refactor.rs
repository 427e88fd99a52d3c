//! `cairn refactor`: renames resources and moves them between stacks
//! without calling a provider (CloudFormation's stack refactoring). The
//! refactor is checked and previewed first; `--execute` applies it.

use std::sync::Arc;

use anyhow::{anyhow, Context};
use cairn_core::engine::refactor::RefactorInput;
use cairn_core::engine::Engine;
use cairn_core::refactor::{ResourceLocation, ResourceMapping};
use serde_json::Value;

use crate::OutputFormat;

pub struct RefactorArgs<'a> {
    /// `NAME=TEMPLATE`: each stack and its template after the refactor.
    pub stacks: &'a [String],
    /// `STACK.LOGICAL=STACK.LOGICAL`: explicit moves and renames.
    pub maps: &'a [String],
    pub description: Option<&'a str>,
    /// `--enable-stack-creation`: a --stack that does not exist is made.
    pub enable_stack_creation: bool,
    pub execute: bool,
    pub output: OutputFormat,
}

fn location(text: &str, whole: &str) -> anyhow::Result<ResourceLocation> {
    let (stack, logical) = text
        .split_once('.')
        .filter(|(s, l)| !s.is_empty() && !l.is_empty())
        .ok_or_else(|| anyhow!("--map {whole}: each side is STACK.LOGICAL_ID"))?;
    Ok(ResourceLocation {
        stack_name: stack.to_string(),
        logical_resource_id: logical.to_string(),
    })
}

/// The input `args` describe, the templates read.
pub(crate) fn input(args: &RefactorArgs<'_>) -> anyhow::Result<RefactorInput> {
    let mut stacks = Vec::new();
    for s in args.stacks {
        let (name, path) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("--stack {s}: give NAME=TEMPLATE_FILE"))?;
        let body = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read template {path}"))?;
        stacks.push((name.to_string(), body));
    }
    let mut mappings = Vec::new();
    for m in args.maps {
        let (from, to) = m
            .split_once('=')
            .ok_or_else(|| anyhow!("--map {m}: give SOURCE_STACK.ID=DESTINATION_STACK.ID"))?;
        mappings.push(ResourceMapping {
            source: location(from, m)?,
            destination: location(to, m)?,
        });
    }
    Ok(RefactorInput {
        stacks,
        mappings,
        enable_stack_creation: args.enable_stack_creation,
        description: args.description.map(str::to_string),
    })
}

pub async fn run(engine: &Arc<Engine>, args: RefactorArgs<'_>) -> anyhow::Result<()> {
    let record = engine.refactors().create_refactor(&input(&args)?).await?;
    let id = record["StackRefactorId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let record = if args.execute && record["Status"] == "CREATE_COMPLETE" {
        engine.refactors().execute_refactor(&id).await?
    } else {
        record
    };
    show(&record, args.output)
}

/// Prints a refactor: its actions, and why it cannot run when it cannot.
pub(crate) fn show(record: &Value, output: OutputFormat) -> anyhow::Result<()> {
    if output == OutputFormat::Json {
        crate::stacks::print_json(record)?;
    } else {
        let text = |k: &str| record[k].as_str().unwrap_or_default().to_string();
        println!("stack refactor {}", text("StackRefactorId"));
        for a in record["Actions"].as_array().into_iter().flatten() {
            println!(
                "  {} [{}] {}",
                a["Action"].as_str().unwrap_or_default(),
                a["Detection"].as_str().unwrap_or_default(),
                a["Description"].as_str().unwrap_or_default()
            );
        }
        println!(
            "status {}, execution {}",
            text("Status"),
            text("ExecutionStatus")
        );
    }
    match record["Status"].as_str() {
        Some("CREATE_FAILED") => Err(anyhow!(
            "{}",
            record["StatusReason"]
                .as_str()
                .unwrap_or("the refactor cannot run")
        )),
        _ => Ok(()),
    }
}
