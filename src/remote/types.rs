//! `cairn --endpoint URL type …`: the registry commands through the Query
//! API (RegisterType and the rest), with the local commands' output. A
//! package is named to the server as a URL: an `https://` one as given, a
//! path as `file://` (the server reads it under its `[registry]
//! package_dirs`, so it must share the file).

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use serde_json::{json, Value};

use super::xml::Node;
use super::Remote;
use crate::stacks::print_json;
use crate::types::{RegisterArgs, TypeCommand};
use crate::OutputFormat;

fn p(k: &str, v: &str) -> (String, String) {
    (k.to_string(), v.to_string())
}

/// How long `register` follows a registration before giving up on it
/// (the server settles one its engine left after ten minutes).
const FOLLOW: Duration = Duration::from_secs(11 * 60);

pub(super) async fn run(r: &Remote, command: &TypeCommand) -> anyhow::Result<()> {
    match command {
        TypeCommand::Register(a) => register(r, a).await,
        TypeCommand::List { output } => {
            let answer = r.call("ListTypes", &[]).await?;
            let summaries: Vec<Value> = answer
                .members("TypeSummaries")
                .iter()
                .map(|t| {
                    json!({
                        "TypeName": t.text_or_empty("TypeName"),
                        "Type": t.text_or_empty("Type"),
                        "DefaultVersionId": t.text_or_empty("DefaultVersionId"),
                        "Description": t.text_or_empty("Description"),
                        "LastUpdated": t.text_or_empty("LastUpdated"),
                    })
                })
                .collect();
            match output {
                OutputFormat::Json => print_json(&json!({ "TypeSummaries": summaries })),
                OutputFormat::Text => {
                    if summaries.is_empty() {
                        println!("no types are registered");
                    }
                    for t in &summaries {
                        println!(
                            "{:<50} {:<9} default {}",
                            t["TypeName"].as_str().unwrap_or_default(),
                            t["Type"].as_str().unwrap_or_default(),
                            t["DefaultVersionId"].as_str().unwrap_or_default()
                        );
                    }
                    Ok(())
                }
            }
        }
        TypeCommand::Describe {
            type_name,
            version,
            output,
        } => {
            let mut params = vec![p("Type", "RESOURCE"), p("TypeName", type_name)];
            if let Some(v) = version {
                params.push(p("VersionId", v));
            }
            let t = r.call("DescribeType", &params).await?;
            let arn = t.text_or_empty("Arn");
            let out = json!({
                "TypeName": t.text_or_empty("TypeName"),
                "Type": t.text_or_empty("Type"),
                "VersionId": arn.rsplit('/').next().unwrap_or_default(),
                "IsDefaultVersion": t.text_or_empty("IsDefaultVersion") == "true",
                "DefaultVersionId": t.text_of("DefaultVersionId"),
                "DeprecatedStatus": t.text_or_empty("DeprecatedStatus"),
                "Description": t.text_or_empty("Description"),
                "TimeCreated": t.text_or_empty("TimeCreated"),
                "Arn": arn,
                "Schema": serde_json::from_str::<Value>(&t.text_or_empty("Schema")).unwrap_or(Value::Null),
            });
            match output {
                OutputFormat::Json => print_json(&out),
                OutputFormat::Text => {
                    println!(
                        "{} version {}",
                        out["TypeName"].as_str().unwrap_or_default(),
                        out["VersionId"].as_str().unwrap_or_default()
                    );
                    println!(
                        "  default version:  {}",
                        out["DefaultVersionId"].as_str().unwrap_or("none")
                    );
                    println!(
                        "  status:           {}",
                        out["DeprecatedStatus"].as_str().unwrap_or_default()
                    );
                    println!(
                        "  schema:           {}",
                        serde_json::to_string_pretty(&out["Schema"])?
                    );
                    Ok(())
                }
            }
        }
        TypeCommand::Versions { type_name, output } => {
            let answer = r
                .call(
                    "ListTypeVersions",
                    &[p("Type", "RESOURCE"), p("TypeName", type_name)],
                )
                .await?;
            let versions: Vec<Value> = answer
                .members("TypeVersionSummaries")
                .iter()
                .map(|v| {
                    json!({
                        "TypeName": v.text_or_empty("TypeName"),
                        "Type": v.text_or_empty("Type"),
                        "VersionId": v.text_or_empty("VersionId"),
                        "IsDefaultVersion": v.text_or_empty("IsDefaultVersion") == "true",
                        "Description": v.text_or_empty("Description"),
                        "TimeCreated": v.text_or_empty("TimeCreated"),
                    })
                })
                .collect();
            if versions.is_empty() {
                return Err(anyhow!("Type {type_name} not found"));
            }
            match output {
                OutputFormat::Json => print_json(&json!({ "TypeVersionSummaries": versions })),
                OutputFormat::Text => {
                    for v in &versions {
                        println!(
                            "{}  LIVE       {}{}",
                            v["VersionId"].as_str().unwrap_or_default(),
                            v["TimeCreated"].as_str().unwrap_or_default(),
                            if v["IsDefaultVersion"] == true {
                                "  (default)"
                            } else {
                                ""
                            }
                        );
                    }
                    Ok(())
                }
            }
        }
        TypeCommand::SetDefault { type_name, version } => {
            r.call(
                "SetTypeDefaultVersion",
                &[
                    p("Type", "RESOURCE"),
                    p("TypeName", type_name),
                    p("VersionId", version),
                ],
            )
            .await?;
            println!("{type_name} version {version} is the default");
            Ok(())
        }
        TypeCommand::Deregister { type_name, version } => {
            let mut params = vec![p("Type", "RESOURCE"), p("TypeName", type_name)];
            if let Some(v) = version {
                params.push(p("VersionId", v));
            }
            r.call("DeregisterType", &params).await?;
            match version {
                Some(v) => println!("{type_name} version {v} is deregistered"),
                None => println!("{type_name} is deregistered"),
            }
            Ok(())
        }
        TypeCommand::Configure {
            type_name,
            configuration,
            alias,
        } => {
            let text = crate::types::configuration_text(configuration)?;
            let mut params = vec![
                p("Type", "RESOURCE"),
                p("TypeName", type_name),
                p("Configuration", &text),
            ];
            if let Some(a) = alias {
                params.push(p("ConfigurationAlias", a));
            }
            r.call("SetTypeConfiguration", &params).await?;
            println!(
                "{type_name} configuration {} is set",
                alias.as_deref().unwrap_or("default")
            );
            Ok(())
        }
        TypeCommand::Configurations { type_name, output } => {
            let Some(type_name) = type_name else {
                bail!("give the type: cairn --endpoint … type configurations TYPE (the API describes configurations by type)");
            };
            let answer = r
                .call(
                    "BatchDescribeTypeConfigurations",
                    &[p(
                        "TypeConfigurationIdentifiers.member.1.TypeName",
                        type_name,
                    )],
                )
                .await?;
            let all: Vec<Value> = answer
                .members("TypeConfigurations")
                .iter()
                .map(|c| {
                    json!({
                        "TypeName": c.text_or_empty("TypeName"),
                        "Alias": c.text_or_empty("Alias"),
                        "Configuration": c.text_or_empty("Configuration"),
                        "IsDefaultConfiguration": c.text_or_empty("IsDefaultConfiguration") == "true",
                        "LastUpdated": c.text_or_empty("LastUpdated"),
                    })
                })
                .collect();
            crate::types::print_configurations(&all, *output)
        }
        TypeCommand::Registrations { token, output } => {
            let tokens = match token {
                Some(t) => vec![t.clone()],
                None => r
                    .call("ListTypeRegistrations", &[p("Type", "RESOURCE")])
                    .await?
                    .members("RegistrationTokenList")
                    .iter()
                    .map(|m| m.text.clone())
                    .collect(),
            };
            let mut shown = Vec::new();
            for t in tokens {
                let d = r
                    .call("DescribeTypeRegistration", &[p("RegistrationToken", &t)])
                    .await?;
                shown.push(registration_json(&t, &d));
            }
            match output {
                OutputFormat::Json => print_json(&json!({ "Registrations": shown })),
                OutputFormat::Text => {
                    for s in &shown {
                        println!(
                            "{}  {:<11} {}",
                            s["RegistrationToken"].as_str().unwrap_or_default(),
                            s["ProgressStatus"].as_str().unwrap_or_default(),
                            s["Description"].as_str().unwrap_or_default()
                        );
                    }
                    Ok(())
                }
            }
        }
    }
}

fn registration_json(token: &str, d: &Node) -> Value {
    let version_arn = d.text_of("TypeVersionArn");
    json!({
        "RegistrationToken": token,
        "ProgressStatus": d.text_or_empty("ProgressStatus"),
        "Description": d.text_or_empty("Description"),
        "TypeArn": d.text_of("TypeArn"),
        "TypeVersionArn": version_arn,
        "VersionId": version_arn.as_deref().and_then(|a| a.rsplit('/').next()),
    })
}

async fn register(r: &Remote, a: &RegisterArgs) -> anyhow::Result<()> {
    let shown = a.package.display().to_string();
    let url = if shown.starts_with("https://") || shown.starts_with("file://") {
        shown
    } else {
        let absolute = std::path::absolute(&a.package)?;
        format!("file://{}", absolute.display())
    };
    let type_name = match &a.type_name {
        Some(t) => t.clone(),
        None => {
            let bytes = std::fs::read(&a.package).map_err(|e| {
                anyhow!(
                    "cannot read {} for its type name ({e}): give --type-name",
                    a.package.display()
                )
            })?;
            cairn_package::open(&bytes, &[])
                .map(|p| p.manifest.type_name)
                .map_err(|e| anyhow!("{}: {e}", a.package.display()))?
        }
    };
    let mut params = vec![
        p("Type", if a.module { "MODULE" } else { "RESOURCE" }),
        p("TypeName", &type_name),
        p("SchemaHandlerPackage", &url),
    ];
    if let Some(t) = &a.client_token {
        params.push(p("ClientRequestToken", t));
    }
    if let Some(name) = &a.secret_env {
        params.push(p("CairnSecretEnv", name));
    }
    if let Some(path) = &a.secret_file {
        params.push(p("CairnSecretFile", &path.display().to_string()));
    }
    if a.test {
        params.push(p("CairnTest", "true"));
    }
    let token = r
        .call("RegisterType", &params)
        .await?
        .text_or_empty("RegistrationToken");
    let started = Instant::now();
    let done = loop {
        let d = r
            .call(
                "DescribeTypeRegistration",
                &[p("RegistrationToken", &token)],
            )
            .await?;
        if d.text_or_empty("ProgressStatus") != "IN_PROGRESS" || started.elapsed() > FOLLOW {
            break registration_json(&token, &d);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let status = done["ProgressStatus"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut out = done.clone();
    out["TypeName"] = json!(type_name);
    match a.output {
        OutputFormat::Json => print_json(&out)?,
        OutputFormat::Text => match status.as_str() {
            "COMPLETE" => println!(
                "registration {token}: COMPLETE, {type_name} version {}",
                out["VersionId"].as_str().unwrap_or("?")
            ),
            other => println!(
                "registration {token}: {other}: {}",
                out["Description"].as_str().unwrap_or_default()
            ),
        },
    }
    match status.as_str() {
        "COMPLETE" => Ok(()),
        "IN_PROGRESS" => bail!("the registration of {type_name} is still IN_PROGRESS; follow it with cairn type registrations {token}"),
        _ => bail!(
            "the registration of {type_name} FAILED: {}",
            out["Description"].as_str().unwrap_or_default()
        ),
    }
}
