//! `cairn validate`: parse and check a template, print what
//! `aws cloudformation validate-template` prints.

use std::path::Path;

use anyhow::Context;
use cairn_core::config::Config;
use cairn_core::template::Template;
use serde_json::{json, Value};

use crate::OutputFormat;

pub fn run(config: &Config, path: &Path, output: OutputFormat) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read template {}", path.display()))?;
    let template =
        Template::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // Validation never creates resources; the data directory is not touched.
    let registry = cairn_providers::registry(config, Path::new("."))?;
    cairn_core::validate::validate_template(&template, &registry)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;

    let parameters: Vec<Value> = template
        .parameters
        .iter()
        .map(|p| {
            let mut v = json!({"ParameterKey": p.name, "NoEcho": p.no_echo});
            if let Some(d) = &p.default {
                v["DefaultValue"] = json!(if p.no_echo {
                    cairn_core::template::parameters::MASK
                } else {
                    d
                });
            }
            if let Some(d) = &p.description {
                v["Description"] = json!(d);
            }
            v
        })
        .collect();
    match output {
        OutputFormat::Json => {
            let mut out = json!({"Parameters": parameters});
            if let Some(d) = &template.description {
                out["Description"] = json!(d);
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        OutputFormat::Text => {
            println!("Template {} is valid.", path.display());
            if let Some(d) = &template.description {
                println!("Description: {d}");
            }
            if parameters.is_empty() {
                println!("Parameters: none");
            } else {
                println!("Parameters:");
                for p in &template.parameters {
                    let default = match &p.default {
                        Some(_) if p.no_echo => {
                            format!(" (default {})", cairn_core::template::parameters::MASK)
                        }
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
                        p.ty.name(),
                        if p.no_echo { " NoEcho" } else { "" }
                    );
                }
            }
        }
    }
    Ok(())
}
