//! `cairn type …`: the type registry of the state (CloudFormation's
//! RegisterType, DescribeTypeRegistration, ListTypes, DescribeType,
//! ListTypeVersions, SetTypeDefaultVersion, DeregisterType). Every engine
//! sharing the state serves a registered type's default version, without
//! a restart (`cairn serve` looks every `[registry] poll_ms`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use cairn_core::engine::types::{RegisterOptions, SecretSource};
use cairn_core::engine::Engine;
use cairn_core::type_registry::{
    RegistrationRecord, RegistrationStatus, RegistryTypeKind, TypeVersionRecord,
};
use serde_json::{json, Value};

use crate::stacks::print_json;
use crate::OutputFormat;

#[derive(clap::Subcommand)]
pub enum TypeCommand {
    /// Register a package (made by `cairn provider package`) as a new
    /// version of its type: checked (checksums, signature, name, handler,
    /// the handler reached or the library loaded) and recorded in the
    /// state; the type's first version becomes its default. Exits non-zero
    /// when the registration FAILED, printing why.
    Register(RegisterArgs),
    /// The registered types (each with its default version).
    List {
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// One type: its default version (or `--version`), schema, handler.
    Describe {
        type_name: String,
        #[arg(long)]
        version: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// A type's versions, deregistered ones included.
    Versions {
        type_name: String,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Make a version the type's default: what every engine serves.
    SetDefault { type_name: String, version: String },
    /// Deregister a version, or (without --version) the whole type. The
    /// default version is refused while others remain; the type's last
    /// version while a stack has a resource of the type.
    Deregister {
        type_name: String,
        #[arg(long)]
        version: Option<String>,
    },
    /// Set a type's configuration (SetTypeConfiguration): checked against
    /// its schema's typeConfiguration; providers receive the `default`
    /// alias's in every request. Secrets as references each engine
    /// resolves: "{{resolve:env:NAME}}", "{{resolve:file:PATH}}".
    Configure {
        type_name: String,
        /// The configuration (JSON), or @FILE to read it from a file.
        configuration: String,
        /// The alias (default: `default`).
        #[arg(long)]
        alias: Option<String>,
    },
    /// The types' configurations, as set (secret references unresolved).
    Configurations {
        /// Only this type's.
        type_name: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Registrations (tokens), or one of them.
    Registrations {
        /// Only this registration.
        token: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

#[derive(clap::Args)]
pub struct RegisterArgs {
    /// The package file.
    pub(crate) package: PathBuf,
    /// Register it as this type (the package's own name must be it).
    #[arg(long)]
    pub(crate) type_name: Option<String>,
    /// A webhook type: the environment variable of each engine that holds
    /// the handler's signing secret.
    #[arg(long, conflicts_with = "secret_file")]
    pub(crate) secret_env: Option<String>,
    /// A webhook type: the file on each engine's machine that holds the
    /// handler's signing secret.
    #[arg(long)]
    pub(crate) secret_file: Option<PathBuf>,
    /// An idempotency key: registering again with it makes no second
    /// version (RegisterType's ClientRequestToken).
    #[arg(long)]
    pub(crate) client_token: Option<String>,
    /// The file is a MODULE type's template fragment (JSON or YAML), not
    /// a package: --type-name names the module (Org::Service::Thing::MODULE).
    #[arg(long, requires = "type_name")]
    pub(crate) module: bool,
    /// Run the provider kit's contract tests against the handler (inputs
    /// derived from the schema) before the version is recorded: a failure
    /// FAILS the registration, naming the tests.
    #[arg(long)]
    pub(crate) test: bool,
    #[arg(long, value_enum, default_value_t)]
    pub(crate) output: OutputFormat,
}

pub async fn run(engine: &Arc<Engine>, command: &TypeCommand) -> anyhow::Result<()> {
    match command {
        TypeCommand::Register(a) => register(engine, a).await,
        TypeCommand::List { output } => list(engine, *output).await,
        TypeCommand::Describe {
            type_name,
            version,
            output,
        } => describe(engine, type_name, version.as_deref(), *output).await,
        TypeCommand::Versions { type_name, output } => versions(engine, type_name, *output).await,
        TypeCommand::SetDefault { type_name, version } => {
            engine.set_type_default_version(type_name, version).await?;
            println!("{type_name} version {version} is the default");
            Ok(())
        }
        TypeCommand::Deregister { type_name, version } => {
            engine
                .deregister_type(type_name, version.as_deref())
                .await?;
            match version {
                Some(v) => println!("{type_name} version {v} is deregistered"),
                None => println!("{type_name} is deregistered"),
            }
            Ok(())
        }
        TypeCommand::Registrations { token, output } => {
            registrations(engine, token.as_deref(), *output).await
        }
        TypeCommand::Configure {
            type_name,
            configuration,
            alias,
        } => {
            let text = configuration_text(configuration)?;
            let set = engine
                .set_type_configuration(type_name, alias.as_deref(), &text)
                .await?;
            println!("{} configuration {} is set", set.type_name, set.alias);
            Ok(())
        }
        TypeCommand::Configurations { type_name, output } => {
            let all: Vec<Value> = engine
                .type_configurations()
                .await?
                .into_iter()
                .filter(|c| type_name.as_ref().is_none_or(|t| *t == c.type_name))
                .map(|c| configuration_json(&c))
                .collect();
            print_configurations(&all, *output)
        }
    }
}

/// Configurations (as `configuration_json` makes them), in either form.
pub(crate) fn print_configurations(all: &[Value], output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => print_json(&json!({ "TypeConfigurations": all })),
        OutputFormat::Text => {
            for c in all {
                println!(
                    "{} {}: {}",
                    c["TypeName"].as_str().unwrap_or_default(),
                    c["Alias"].as_str().unwrap_or_default(),
                    c["Configuration"].as_str().unwrap_or_default()
                );
            }
            Ok(())
        }
    }
}

/// A configuration given inline, or `@FILE`.
pub(crate) fn configuration_text(given: &str) -> anyhow::Result<String> {
    match given.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the configuration from {path}")),
        None => Ok(given.to_string()),
    }
}

pub(crate) fn configuration_json(c: &cairn_core::type_registry::TypeConfigurationRecord) -> Value {
    json!({
        "TypeName": c.type_name,
        "Alias": c.alias,
        "Configuration": c.configuration,
        "IsDefaultConfiguration": c.alias == cairn_core::type_registry::DEFAULT_ALIAS,
        "LastUpdated": c.updated_at,
    })
}

fn registration_json(r: &RegistrationRecord) -> Value {
    json!({
        "RegistrationToken": r.token,
        "TypeName": r.type_name,
        "Type": r.kind.as_str(),
        "ProgressStatus": r.status.as_str(),
        "Description": r.description,
        "VersionId": r.version_id,
        "TimeCreated": r.created_at,
        "LastUpdated": r.updated_at,
    })
}

async fn register(engine: &Arc<Engine>, a: &RegisterArgs) -> anyhow::Result<()> {
    let bytes = std::fs::read(&a.package)
        .with_context(|| format!("cannot read the package {}", a.package.display()))?;
    let secret = match (&a.secret_env, &a.secret_file) {
        (Some(name), _) => Some(SecretSource::Env(name.clone())),
        (_, Some(path)) => Some(SecretSource::File(path.clone())),
        _ => None,
    };
    let options = RegisterOptions {
        type_name: a.type_name.clone(),
        client_token: a.client_token.clone(),
        secret,
        test: a.test,
    };
    // The token names the type as asked, or as the package says (read
    // without checking: the registration checks it).
    let peeked = cairn_package::open(&bytes, &[]).ok();
    let named = a
        .type_name
        .clone()
        .or_else(|| peeked.as_ref().map(|p| p.manifest.type_name.clone()))
        .unwrap_or_else(|| "unknown".into());
    let kind = match peeked.map(|p| p.manifest.kind) {
        _ if a.module => RegistryTypeKind::Module,
        Some(cairn_package::TypeKind::Hook) => RegistryTypeKind::Hook,
        _ => RegistryTypeKind::Resource,
    };
    let begun = engine.begin_registration(&named, kind, &options).await?;
    let done = if begun.status != RegistrationStatus::InProgress {
        begun
    } else if a.module {
        engine
            .finish_module_registration(&begun.token, &named, &bytes)
            .await?
    } else {
        engine
            .finish_registration(&begun.token, &bytes, &options)
            .await?
    };
    match a.output {
        OutputFormat::Json => print_json(&registration_json(&done))?,
        OutputFormat::Text => match done.status {
            RegistrationStatus::Complete => println!(
                "registration {}: COMPLETE, {} version {}",
                done.token,
                done.type_name,
                done.version_id.as_deref().unwrap_or("?")
            ),
            _ => println!(
                "registration {}: {}: {}",
                done.token,
                done.status.as_str(),
                done.description
            ),
        },
    }
    if done.status == RegistrationStatus::Failed {
        bail!(
            "the registration of {} FAILED: {}",
            done.type_name,
            done.description
        );
    }
    Ok(())
}

fn version_json(v: &TypeVersionRecord) -> Value {
    let handler: Value = serde_json::from_str(&v.handler).unwrap_or(Value::Null);
    let secret: Value = v
        .secret
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null);
    json!({
        "TypeName": v.type_name,
        "Type": v.kind.as_str(),
        "VersionId": v.version_id,
        "IsDefaultVersion": v.is_default,
        "DeprecatedStatus": if v.deprecated { "DEPRECATED" } else { "LIVE" },
        "Description": v.description,
        "Handler": handler,
        "SecretSource": secret,
        "PackageSha256": v.package_sha256,
        "SignedBy": v.signed_by,
        "TimeCreated": v.created_at,
    })
}

async fn list(engine: &Arc<Engine>, output: OutputFormat) -> anyhow::Result<()> {
    let versions = engine.type_versions().await?;
    let defaults: Vec<&TypeVersionRecord> = versions
        .iter()
        .filter(|v| v.is_default && !v.deprecated)
        .collect();
    match output {
        OutputFormat::Json => print_json(&json!({
            "TypeSummaries": defaults.iter().map(|v| json!({
                "TypeName": v.type_name,
                "Type": v.kind.as_str(),
                "DefaultVersionId": v.version_id,
                "Description": v.description,
                "LastUpdated": v.created_at,
            })).collect::<Vec<_>>()
        })),
        OutputFormat::Text => {
            if defaults.is_empty() {
                println!("no types are registered");
            }
            for v in defaults {
                println!("{:<50} {:<9} default {}", v.type_name, v.kind, v.version_id);
            }
            Ok(())
        }
    }
}

async fn describe(
    engine: &Arc<Engine>,
    type_name: &str,
    version: Option<&str>,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let versions = engine.type_versions().await?;
    let found = versions.iter().find(|v| {
        v.type_name == type_name
            && match version {
                Some(id) => v.version_id == id,
                None => v.is_default && !v.deprecated,
            }
    });
    let Some(v) = found else {
        bail!(
            "Type {type_name}{} not found",
            version.map(|v| format!(" version {v}")).unwrap_or_default()
        );
    };
    let schema: Value = serde_json::from_str(&v.schema).unwrap_or(Value::Null);
    let default = versions
        .iter()
        .find(|d| d.type_name == type_name && d.is_default && !d.deprecated)
        .map(|d| d.version_id.clone());
    let mut out = version_json(v);
    out["DefaultVersionId"] = json!(default);
    out["Schema"] = schema;
    match output {
        OutputFormat::Json => print_json(&out),
        OutputFormat::Text => {
            println!("{} version {}", v.type_name, v.version_id);
            println!(
                "  default version:  {}",
                default.as_deref().unwrap_or("none")
            );
            println!(
                "  status:           {}",
                out["DeprecatedStatus"].as_str().unwrap_or("")
            );
            println!("  handler:          {}", out["Handler"]);
            println!("  package SHA-256:  {}", v.package_sha256);
            println!(
                "  signed by:        {}",
                v.signed_by.as_deref().unwrap_or("not signed")
            );
            println!(
                "  schema:           {}",
                serde_json::to_string_pretty(&out["Schema"])?
            );
            Ok(())
        }
    }
}

async fn versions(
    engine: &Arc<Engine>,
    type_name: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let all: Vec<TypeVersionRecord> = engine
        .type_versions()
        .await?
        .into_iter()
        .filter(|v| v.type_name == type_name)
        .collect();
    if all.is_empty() {
        return Err(anyhow!("Type {type_name} not found"));
    }
    match output {
        OutputFormat::Json => print_json(&json!({
            "TypeVersionSummaries": all.iter().map(version_json).collect::<Vec<_>>()
        })),
        OutputFormat::Text => {
            for v in &all {
                println!(
                    "{}  {:<10} {}{}",
                    v.version_id,
                    if v.deprecated { "DEPRECATED" } else { "LIVE" },
                    v.created_at,
                    if v.is_default { "  (default)" } else { "" }
                );
            }
            Ok(())
        }
    }
}

async fn registrations(
    engine: &Arc<Engine>,
    token: Option<&str>,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let all = engine.registrations().await?;
    let shown: Vec<&RegistrationRecord> = match token {
        Some(t) => {
            let one: Vec<&RegistrationRecord> = all.iter().filter(|r| r.token == t).collect();
            if one.is_empty() {
                bail!("Registration {t} not found");
            }
            one
        }
        None => all.iter().collect(),
    };
    match output {
        OutputFormat::Json => print_json(&json!({
            "Registrations": shown.iter().map(|r| registration_json(r)).collect::<Vec<_>>()
        })),
        OutputFormat::Text => {
            for r in shown {
                println!(
                    "{}  {:<11} {} {}  {}",
                    r.token,
                    r.status.as_str(),
                    r.type_name,
                    r.version_id.as_deref().unwrap_or("-"),
                    r.description
                );
            }
            Ok(())
        }
    }
}
