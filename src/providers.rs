//! `cairn providers`: the resource types this configuration serves, with
//! their provider, transport, version and schema.

use std::path::Path;

use cairn_core::config::Config;
use cairn_core::registry::{RegisteredType, Registry};
use serde_json::{json, Value};

use crate::stacks::print_json;
use crate::OutputFormat;

fn entry(type_name: &str, t: &RegisteredType) -> Value {
    json!({
        "TypeName": type_name,
        "Provider": t.provider_name,
        "Transport": t.transport.as_str(),
        "Version": t.version,
        "Schema": t.schema,
    })
}

/// Every type: exact registrations, families (`Custom::<Name>`), aliases.
fn all(registry: &Registry) -> Vec<Value> {
    let mut list: Vec<Value> = registry.types().iter().map(|(n, t)| entry(n, t)).collect();
    list.extend(
        registry
            .families()
            .map(|(prefix, t)| entry(&format!("{prefix}<Name>"), t)),
    );
    list
}

/// The state's registered types (each default version), when the state
/// exists: listing never creates one.
async fn registered(
    config: &Config,
    state: &Path,
    registry: &Registry,
    process: &crate::wiring::Process,
) -> anyhow::Result<Vec<Value>> {
    let is_file = crate::stacks::postgres_url(state).is_none();
    if is_file && !state.exists() {
        return Ok(Vec::new());
    }
    let store: std::sync::Arc<dyn cairn_core::store::Store> =
        match crate::stacks::postgres_url(state) {
            Some(url) => std::sync::Arc::new(cairn_store_postgres::PgStore::connect(url).await?),
            None => std::sync::Arc::new(cairn_store_sqlite::SqliteStore::open(state)?),
        };
    let loader = crate::wiring::registered::loader(
        config,
        crate::stacks::types_cache(config, state),
        process,
    );
    registry.refresh_registered(&store, loader.as_ref()).await?;
    Ok(store
        .type_versions()
        .await?
        .into_iter()
        .filter(|v| v.is_default && !v.deprecated)
        .map(|v| {
            let schema: Value = serde_json::from_str(&v.schema).unwrap_or(Value::Null);
            let handler: Value = serde_json::from_str(&v.handler).unwrap_or(Value::Null);
            let transport = if handler.get("dylib").is_some() {
                "dylib"
            } else {
                "webhook"
            };
            json!({
                "TypeName": v.type_name,
                "Provider": "registry",
                "Transport": transport,
                "Version": v.version_id,
                "Schema": cairn_package::schema::from_cloudformation(&schema).ok(),
            })
        })
        .collect())
}

pub async fn run(
    config: &Config,
    state: &Path,
    only: Option<&str>,
    output: OutputFormat,
) -> anyhow::Result<()> {
    // Listing types never creates resources; the data directory is not touched.
    let process = crate::wiring::Process::new(&config.webhooks, None);
    let registry =
        crate::wiring::assemble(config, cairn_providers::builtins(Path::new(".")), &process)?;
    let registered = registered(config, state, &registry, &process).await?;
    if let Some(type_name) = only {
        let Some(t) = registry.get(type_name) else {
            if let Some(reason) = registry.unavailable_reason(type_name) {
                anyhow::bail!("{reason}");
            }
            anyhow::bail!(
                "no provider serves {type_name}; `cairn providers` lists the types this configuration serves"
            );
        };
        let canonical = registry.canonical(type_name);
        let e = entry(canonical, &t);
        return match output {
            OutputFormat::Json => print_json(&e),
            OutputFormat::Text => {
                println!(
                    "{canonical}  (provider {}, {}, version {})",
                    t.provider_name,
                    t.transport.as_str(),
                    t.version
                );
                if !t.schema.description.is_empty() {
                    println!("{}", t.schema.description);
                }
                for (name, p) in &t.schema.properties {
                    println!(
                        "  property  {name:<24} {:<16} {:<24} {}",
                        p.ty.name(),
                        format!("{:?}", p.update),
                        if p.required { "required" } else { "" }
                    );
                }
                if t.schema.additional_properties {
                    println!("  (any other property is passed on as is)");
                }
                for name in t.schema.attributes.keys() {
                    println!("  attribute {name}");
                }
                println!("  Ref returns {}", t.schema.ref_returns);
                Ok(())
            }
        };
    }
    // Listing every type starts every configured provider; one that cannot
    // start is listed with the cause instead of failing the listing.
    let unavailable: Vec<Value> = registry
        .start_all()
        .into_iter()
        .filter_map(|s| {
            s.cause
                .map(|cause| json!({"Provider": s.name, "Status": s.state, "Cause": cause}))
        })
        .collect();
    let mut types = all(&registry);
    types.extend(registered);
    let listed = match output {
        OutputFormat::Json => print_json(&json!({
            "Types": types,
            "Aliases": registry.aliases(),
            "Unavailable": unavailable,
        })),
        OutputFormat::Text => {
            for e in &types {
                let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                println!(
                    "{:<40} {:<24} {:<9} {}",
                    text("TypeName"),
                    text("Provider"),
                    text("Transport"),
                    text("Version")
                );
            }
            for (alias, target) in registry.aliases() {
                println!("{alias:<40} alias of {target}");
            }
            Ok(())
        }
    };
    listed?;
    // The listing is complete; the exit status says whether every
    // configured provider could start.
    if !unavailable.is_empty() {
        let lines: Vec<String> = unavailable
            .iter()
            .map(|u| {
                let text = |k: &str| u[k].as_str().unwrap_or_default().to_string();
                // A provider that started with some types ambiguous serves
                // the others.
                let verb = if text("Status") == "unavailable" {
                    " cannot start"
                } else {
                    ""
                };
                format!("provider {}{verb}: {}", text("Provider"), text("Cause"))
            })
            .collect();
        anyhow::bail!("{}", lines.join("\n"));
    }
    Ok(())
}
