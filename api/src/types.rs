//! The registry's Query API actions, for the aws CLI and boto3 unchanged:
//! RegisterType (asynchronous: a token at once, the registration run in a
//! task), DescribeTypeRegistration, ListTypeRegistrations, ListTypes,
//! DescribeType, ListTypeVersions, SetTypeDefaultVersion, DeregisterType.
//! A `file://` package under `[registry] package_dirs` or an `https://`
//! one stands where CloudFormation takes `s3://`.

use std::sync::Arc;

use cairn_core::engine::types::{RegisterOptions, SecretSource, TypeRegistryError};
use cairn_core::store::StoreError;
use cairn_core::type_registry::{RegistrationRecord, TypeVersionRecord};

use super::form::Form;
use super::xml::Xml;
use super::{ApiError, App};

type Outcome = Result<Option<Xml>, ApiError>;

fn registry_error(message: impl Into<String>) -> ApiError {
    ApiError {
        status: 400,
        code: "CFNRegistryException",
        message: message.into(),
    }
}

fn not_found(message: impl Into<String>) -> ApiError {
    ApiError {
        status: 404,
        code: "TypeNotFoundException",
        message: message.into(),
    }
}

/// A store error in the registry's codes.
fn store(e: StoreError) -> ApiError {
    match e {
        StoreError::TypeNotFound { .. } => not_found(e.to_string()),
        StoreError::DefaultTypeVersion { .. } | StoreError::NoSuchRegistration(_) => {
            registry_error(e.to_string())
        }
        other => ApiError {
            status: 500,
            code: "InternalFailure",
            message: other.to_string(),
        },
    }
}

/// `arn:…:type/resource/Org-Service-Thing`, and with `/VersionId`.
fn type_arn(app: &App, type_name: &str, version: Option<&str>) -> String {
    let id = &app.config.identity;
    let base = format!(
        "arn:{}:cloudformation:{}:{}:type/resource/{}",
        id.partition,
        id.region,
        id.account_id,
        type_name.replace("::", "-")
    );
    match version {
        Some(v) => format!("{base}/{v}"),
        None => base,
    }
}

/// The type (and version) an `Arn` (or `TypeArn`) names, else TypeName
/// (and VersionId).
fn named(f: &Form, arn_key: &str) -> Result<(String, Option<String>), ApiError> {
    if let Some(arn) = f.get(arn_key).filter(|a| !a.is_empty()) {
        let rest = arn
            .split_once(":type/resource/")
            .map(|(_, r)| r)
            .ok_or_else(|| registry_error(format!("{arn} is not the ARN of a resource type")))?;
        let (name, version) = match rest.split_once('/') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (rest, None),
        };
        return Ok((name.replace('-', "::"), version));
    }
    let name = f
        .get("TypeName")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| registry_error("Either Arn or TypeName must be given"))?;
    Ok((name.to_string(), f.get("VersionId").map(String::from)))
}

fn only_resources(f: &Form) -> Result<(), ApiError> {
    match f.get("Type") {
        None | Some("RESOURCE") | Some("MODULE") | Some("HOOK") => Ok(()),
        Some(other) => Err(registry_error(format!(
            "Type {other} is not registered by this Cairn: it registers RESOURCE, MODULE and HOOK types"
        ))),
    }
}

fn result(build: impl FnOnce(&mut Xml)) -> Outcome {
    let mut x = Xml::default();
    build(&mut x);
    Ok(Some(x))
}

pub async fn register_type(app: &Arc<App>, f: &Form) -> Outcome {
    only_resources(f)?;
    let type_name = f.required("TypeName")?.to_string();
    let url = f.required("SchemaHandlerPackage")?.to_string();
    // Where engines read a webhook's signing secret: Cairn's own
    // parameters, or (for the aws CLI, which has no other slot)
    // ExecutionRoleArn, CloudFormation's credentials of the handler, as
    // `env:NAME` or `file:PATH`. The secret itself is never sent.
    let role = f.get("ExecutionRoleArn");
    let secret = match (f.get("CairnSecretEnv"), f.get("CairnSecretFile")) {
        (Some(name), _) => Some(SecretSource::Env(name.to_string())),
        (_, Some(path)) => Some(SecretSource::File(path.into())),
        _ => match role.and_then(|r| r.split_once(':')) {
            Some(("env", name)) if !name.is_empty() => Some(SecretSource::Env(name.to_string())),
            Some(("file", path)) if !path.is_empty() => Some(SecretSource::File(path.into())),
            _ => None,
        },
    };
    let options = RegisterOptions {
        type_name: Some(type_name.clone()),
        client_token: f.get("ClientRequestToken").map(String::from),
        secret,
        // Cairn's own: the provider kit's contract tests first.
        test: f.get("CairnTest") == Some("true"),
    };
    let module = f.get("Type") == Some("MODULE");
    let kind = match f.get("Type") {
        Some("MODULE") => cairn_core::type_registry::RegistryTypeKind::Module,
        Some("HOOK") => cairn_core::type_registry::RegistryTypeKind::Hook,
        _ => cairn_core::type_registry::RegistryTypeKind::Resource,
    };
    let begun = app
        .engine
        .begin_registration(&type_name, kind, &options)
        .await
        .map_err(store)?;
    if begun.status == cairn_core::type_registry::RegistrationStatus::InProgress {
        let engine = app.engine.clone();
        let token = begun.token.clone();
        tokio::spawn(async move {
            let finished = match engine.read_package(&url).await {
                // A MODULE's SchemaHandlerPackage is its template fragment.
                Ok(bytes) if module => engine
                    .finish_module_registration(&token, &type_name, &bytes)
                    .await
                    .map(|_| ()),
                Ok(bytes) => engine
                    .finish_registration(&token, &bytes, &options)
                    .await
                    .map(|_| ()),
                Err(why) => {
                    engine
                        .store()
                        .fail_registration(&token, &format!("the package cannot be read: {why}"))
                        .await
                }
            };
            if let Err(e) = finished {
                tracing::warn!(%token, "the registration could not be recorded: {e}");
            }
        });
    }
    result(|x| {
        x.leaf("RegistrationToken", &begun.token);
    })
}

fn registration_xml(app: &App, x: &mut Xml, r: &RegistrationRecord) {
    x.leaf("ProgressStatus", r.status.as_str())
        .leaf("Description", &r.description);
    if let Some(v) = &r.version_id {
        x.leaf("TypeArn", &type_arn(app, &r.type_name, None))
            .leaf("TypeVersionArn", &type_arn(app, &r.type_name, Some(v)));
    }
}

pub async fn describe_type_registration(app: &Arc<App>, f: &Form) -> Outcome {
    let token = f.required("RegistrationToken")?;
    let r = app
        .engine
        .registration(token)
        .await
        .map_err(store)?
        .ok_or_else(|| registry_error(format!("Registration token {token} not found")))?;
    result(|x| registration_xml(app, x, &r))
}

pub async fn list_type_registrations(app: &Arc<App>, f: &Form) -> Outcome {
    only_resources(f)?;
    let filter = f.get("RegistrationStatusFilter");
    let (name, _) = named(f, "TypeArn").unwrap_or_default();
    let tokens: Vec<String> = app
        .engine
        .registrations()
        .await
        .map_err(store)?
        .into_iter()
        .filter(|r| name.is_empty() || r.type_name == name)
        .filter(|r| filter.is_none_or(|s| s == r.status.as_str()))
        .map(|r| r.token)
        .collect();
    result(|x| {
        x.list("RegistrationTokenList", &tokens, |x, t| {
            x.out_text(t);
        });
    })
}

fn live(versions: &[TypeVersionRecord], name: &str) -> Vec<TypeVersionRecord> {
    versions
        .iter()
        .filter(|v| v.type_name == name && !v.deprecated)
        .cloned()
        .collect()
}

pub async fn list_types(app: &Arc<App>, f: &Form) -> Outcome {
    only_resources(f)?;
    if f.get("Visibility") == Some("PUBLIC") {
        // No public registry: nothing is public.
        return result(|x| {
            x.list("TypeSummaries", &[] as &[TypeVersionRecord], |_, _| {});
        });
    }
    let prefix = f.get("Filters.TypeNamePrefix").unwrap_or_default();
    let versions = app.engine.type_versions().await.map_err(store)?;
    let kind = f.get("Type");
    let defaults: Vec<&TypeVersionRecord> = versions
        .iter()
        .filter(|v| v.is_default && !v.deprecated && v.type_name.starts_with(prefix))
        .filter(|v| kind.is_none_or(|k| k == v.kind.as_str()))
        .collect();
    result(|x| {
        x.list("TypeSummaries", &defaults, |x, v| {
            x.leaf("Type", v.kind.as_str())
                .leaf("TypeName", &v.type_name)
                .leaf("DefaultVersionId", &v.version_id)
                .leaf("TypeArn", &type_arn(app, &v.type_name, None))
                .leaf("LastUpdated", &v.created_at)
                .leaf("Description", &v.description);
        });
    })
}

pub async fn describe_type(app: &Arc<App>, f: &Form) -> Outcome {
    let (name, version) = named(f, "Arn")?;
    let versions = app.engine.type_versions().await.map_err(store)?;
    let of_type = live(&versions, &name);
    let default = of_type.iter().find(|v| v.is_default).cloned();
    let v = match &version {
        Some(id) => versions
            .iter()
            .find(|v| v.type_name == name && &v.version_id == id)
            .cloned(),
        None => default.clone(),
    }
    .ok_or_else(|| not_found(format!("The type '{name}' cannot be found.")))?;
    result(|x| {
        x.leaf("Arn", &type_arn(app, &name, Some(&v.version_id)))
            .leaf("Type", v.kind.as_str())
            .leaf("TypeName", &name)
            .opt(
                "DefaultVersionId",
                default.as_ref().map(|d| d.version_id.as_str()),
            )
            .leaf(
                "IsDefaultVersion",
                if v.is_default { "true" } else { "false" },
            )
            .leaf("TypeTestsStatus", "NOT_TESTED")
            .leaf("Description", &v.description)
            .leaf("Schema", &v.schema)
            .leaf("ProvisioningType", "FULLY_MUTABLE")
            .leaf(
                "DeprecatedStatus",
                if v.deprecated { "DEPRECATED" } else { "LIVE" },
            )
            .leaf("Visibility", "PRIVATE")
            .leaf("LastUpdated", &v.created_at)
            .leaf("TimeCreated", &v.created_at);
    })
}

pub async fn list_type_versions(app: &Arc<App>, f: &Form) -> Outcome {
    let (name, _) = named(f, "Arn")?;
    let status = f.get("DeprecatedStatus").unwrap_or("LIVE");
    let versions: Vec<TypeVersionRecord> = app
        .engine
        .type_versions()
        .await
        .map_err(store)?
        .into_iter()
        .filter(|v| v.type_name == name)
        .filter(|v| v.deprecated == (status == "DEPRECATED"))
        .collect();
    result(|x| {
        x.list("TypeVersionSummaries", &versions, |x, v| {
            x.leaf("Type", v.kind.as_str())
                .leaf("TypeName", &v.type_name)
                .leaf("VersionId", &v.version_id)
                .leaf(
                    "IsDefaultVersion",
                    if v.is_default { "true" } else { "false" },
                )
                .leaf("Arn", &type_arn(app, &v.type_name, Some(&v.version_id)))
                .leaf("TimeCreated", &v.created_at)
                .leaf("Description", &v.description);
        });
    })
}

pub async fn set_type_default_version(app: &Arc<App>, f: &Form) -> Outcome {
    let (name, version) = named(f, "Arn")?;
    let version = version.ok_or_else(|| registry_error("VersionId must be given"))?;
    app.engine
        .set_type_default_version(&name, &version)
        .await
        .map_err(store)?;
    result(|_| {})
}

pub async fn deregister_type(app: &Arc<App>, f: &Form) -> Outcome {
    let (name, version) = named(f, "Arn")?;
    app.engine
        .deregister_type(&name, version.as_deref())
        .await
        .map_err(|e| match e {
            TypeRegistryError::Store(s) => store(s),
            other => registry_error(other.to_string()),
        })?;
    result(|_| {})
}

/// `arn:…:type-configuration/resource/Org-Service-Thing/Alias`.
fn configuration_arn(app: &App, type_name: &str, alias: &str) -> String {
    let id = &app.config.identity;
    format!(
        "arn:{}:cloudformation:{}:{}:type-configuration/resource/{}/{alias}",
        id.partition,
        id.region,
        id.account_id,
        type_name.replace("::", "-")
    )
}

pub async fn set_type_configuration(app: &Arc<App>, f: &Form) -> Outcome {
    only_resources(f)?;
    let (name, _) = named(f, "TypeArn")?;
    let configuration = f.required("Configuration")?;
    let set = app
        .engine
        .set_type_configuration(&name, f.get("ConfigurationAlias"), configuration)
        .await
        .map_err(|e| match e {
            TypeRegistryError::Store(s) => store(s),
            other => registry_error(other.to_string()),
        })?;
    result(|x| {
        x.leaf(
            "ConfigurationArn",
            &configuration_arn(app, &set.type_name, &set.alias),
        );
    })
}

pub async fn batch_describe_type_configurations(app: &Arc<App>, f: &Form) -> Outcome {
    let all = app.engine.type_configurations().await.map_err(store)?;
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for i in 1.. {
        let key = |k: &str| format!("TypeConfigurationIdentifiers.member.{i}.{k}");
        let (arn, type_name) = (f.get(&key("TypeArn")), f.get(&key("TypeName")));
        if arn.is_none() && type_name.is_none() {
            break;
        }
        let name = match (arn, type_name) {
            (Some(a), _) => a
                .split_once(":type/resource/")
                .map(|(_, r)| r.split('/').next().unwrap_or(r).replace('-', "::"))
                .unwrap_or_default(),
            (None, Some(t)) => t.to_string(),
            _ => String::new(),
        };
        let alias = f.get(&key("TypeConfigurationAlias"));
        let matching: Vec<_> = all
            .iter()
            .filter(|c| c.type_name == name && alias.is_none_or(|a| a == c.alias))
            .collect();
        if matching.is_empty() {
            errors.push((name.clone(), alias.map(String::from)));
        }
        found.extend(matching.into_iter().cloned());
    }
    result(|x| {
        x.list("Errors", &errors, |x, (name, alias)| {
            x.leaf("ErrorCode", "TypeConfigurationNotFoundException")
                .leaf(
                    "ErrorMessage",
                    &format!(
                        "No configuration{} of {name} is set",
                        alias.as_ref().map(|a| format!(" {a}")).unwrap_or_default()
                    ),
                )
                .open("TypeConfigurationIdentifier")
                .leaf("TypeName", name)
                .opt("TypeConfigurationAlias", alias.as_deref())
                .close("TypeConfigurationIdentifier");
        });
        x.list("TypeConfigurations", &found, |x, c| {
            x.leaf("Arn", &configuration_arn(app, &c.type_name, &c.alias))
                .leaf("Alias", &c.alias)
                .leaf("Configuration", &c.configuration)
                .leaf("LastUpdated", &c.updated_at)
                .leaf("TypeArn", &type_arn(app, &c.type_name, None))
                .leaf("TypeName", &c.type_name)
                .leaf(
                    "IsDefaultConfiguration",
                    if c.alias == cairn_core::type_registry::DEFAULT_ALIAS {
                        "true"
                    } else {
                        "false"
                    },
                );
        });
    })
}
