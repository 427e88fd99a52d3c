//! `cairn validate`: parse and check a template, print what
//! `aws cloudformation validate-template` prints.

use std::path::Path;

use anyhow::Context;
use cairn_core::config::Config;
use cairn_core::template::parameters::ParameterValues;
use cairn_core::template::Template;
use serde_json::{json, Value};

use crate::OutputFormat;

/// A template parameter as `cairn validate` shows it.
pub(crate) struct ParameterLine {
    pub name: String,
    pub type_name: String,
    /// Already masked for a NoEcho parameter.
    pub default: Option<String>,
    pub no_echo: bool,
    pub description: Option<String>,
}

pub async fn run(
    config: &Config,
    state: &Path,
    path: &Path,
    parameters: &[String],
    environments: &[std::path::PathBuf],
    output: OutputFormat,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read template {}", path.display()))?;
    // HOT's files and environments, as deploy reads them.
    let gathered = crate::environment::gather(path, &text, environments)?;
    let mut supplied = gathered.parameters;
    supplied.extend(crate::stacks::parse_parameters(parameters)?);
    let context = gathered.context.for_template(&text, &supplied);
    // A template that names a macro (or includes an https:// snippet) is
    // read as deploy reads it: after the macros ran, those of this state's
    // stacks included.
    let context = if cairn_core::engine::macros::needs_reading(&text) {
        let engine = crate::stacks::open_without_resume(config, state).await?;
        engine
            .process_template(&text, context, &supplied)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
    } else {
        context
    };
    let template = Template::parse_with(&text, &context)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // Validation never creates resources; the data directory is not touched.
    let registry = crate::wiring::assemble(
        config,
        cairn_providers::builtins(Path::new(".")),
        &crate::wiring::Process::new(&config.webhooks, None),
    )?;
    let shown = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    cairn_core::validate::validate_template(&template, &registry)
        .map_err(|e| anyhow::anyhow!(shown(&e)))?;
    // The static pass a create runs before anything starts: every error it
    // finds, with parameters from -p and the defaults.
    let missing: Vec<&str> = template
        .parameters
        .iter()
        .filter(|d| d.default.is_none() && !supplied.contains_key(&d.name))
        .map(|d| d.name.as_str())
        .collect();
    if missing.is_empty() {
        let values = ParameterValues::resolve(&template.parameters, &supplied)
            .map_err(|e| anyhow::anyhow!(shown(&e)))?;
        if let Err(errors) =
            cairn_core::engine::check_statically(&registry, config, &template, &values, "validate")
        {
            let lines: Vec<String> = errors.iter().map(|e| shown(e)).collect();
            anyhow::bail!("{}", lines.join("\nerror: "));
        }
    } else {
        // Like CloudFormation's ValidateTemplate, values are not required;
        // without them the intrinsics that read them cannot be checked.
        eprintln!(
            "note: parameters [{}] have no default: give them with -p KEY=VALUE to check everything a deploy checks before it starts",
            missing.join(", ")
        );
    }
    let parameters: Vec<ParameterLine> = template
        .parameters
        .iter()
        .map(|p| ParameterLine {
            name: p.name.clone(),
            type_name: p.ty.name().to_string(),
            default: p.default.as_ref().map(|d| {
                if p.no_echo {
                    cairn_core::template::parameters::MASK.to_string()
                } else {
                    d.clone()
                }
            }),
            no_echo: p.no_echo,
            description: p.description.clone(),
        })
        .collect();
    let mut required = cairn_core::engine::capabilities::Required::default();
    required.add(&template, &text, &registry, true);
    let capabilities = Capabilities {
        list: required.list(),
        reason: required.reason(),
    };
    show(
        path,
        template.description.as_deref(),
        &parameters,
        &capabilities,
        output,
    )
}

/// What a template requires to be acknowledged (ValidateTemplate's
/// `Capabilities` and `CapabilitiesReason`).
pub(crate) struct Capabilities {
    pub list: Vec<String>,
    pub reason: Option<String>,
}

/// `cairn validate`'s output for a valid template.
pub(crate) fn show(
    path: &Path,
    description: Option<&str>,
    parameters: &[ParameterLine],
    capabilities: &Capabilities,
    output: OutputFormat,
) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            let list: Vec<Value> = parameters
                .iter()
                .map(|p| {
                    let mut v = json!({"ParameterKey": p.name, "NoEcho": p.no_echo});
                    if let Some(d) = &p.default {
                        v["DefaultValue"] = json!(d);
                    }
                    if let Some(d) = &p.description {
                        v["Description"] = json!(d);
                    }
                    v
                })
                .collect();
            let mut out = json!({"Parameters": list, "Capabilities": capabilities.list});
            if let Some(d) = description {
                out["Description"] = json!(d);
            }
            if let Some(r) = &capabilities.reason {
                out["CapabilitiesReason"] = json!(r);
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        OutputFormat::Text => {
            println!("Template {} is valid.", path.display());
            if let Some(d) = description {
                println!("Description: {d}");
            }
            if parameters.is_empty() {
                println!("Parameters: none");
            } else {
                println!("Parameters:");
                for p in parameters {
                    let default = match &p.default {
                        Some(d) => format!(" (default {d})"),
                        None => String::new(),
                    };
                    let desc = p
                        .description
                        .as_deref()
                        .map(|d| format!(" - {d}"))
                        .unwrap_or_default();
                    println!(
                        "  {} [{}]{default}{}{desc}",
                        p.name,
                        p.type_name,
                        if p.no_echo { " NoEcho" } else { "" }
                    );
                }
            }
            if !capabilities.list.is_empty() {
                let reason = capabilities
                    .reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default();
                println!("Capabilities: {}{reason}", capabilities.list.join(", "));
            }
        }
    }
    Ok(())
}
