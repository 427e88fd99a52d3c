//! The type registry's operations: registering a package (a token, then
//! IN_PROGRESS until it is COMPLETE with a new version or FAILED with the
//! reason), versions, the default version, deregistration.
//!
//! What a registration checks, in order: the package (its checksums, and
//! a trusted signature when `[registry] trusted_keys` is set), the type's
//! name (the one asked for, not a reserved namespace, not a type a
//! configured provider serves), its handler (a library for this machine's
//! platform), then the process's handler probe (`Shared::handlers`: the
//! binary reaches a webhook handler or loads the library). Each failure is the
//! registration's Description; nothing of a FAILED registration is served.

pub use cairn_model::registry::SecretSource;
use cairn_model::registry::{
    NewTypeVersion, RegistrationRecord, RegistrationStatus, RegistryTypeKind,
    TypeConfigurationRecord, TypeVersionRecord, DEFAULT_ALIAS,
};
use cairn_package::{Handler, Package, TypeKind};
use serde_json::Value;

use super::{Core, EngineError};
use crate::stack::{now, StackStatus};
use crate::store::StoreError;

/// A registration still IN_PROGRESS this long after its last change was
/// left by an engine that stopped mid-way: it is settled FAILED, so none
/// is ever stuck.
pub const REGISTRATION_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The longest the handler probe may take (half the limit: a registration
/// that is still working is never settled).
const PROBE_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// What a settled registration says.
pub const ABANDONED: &str =
    "the engine running this registration stopped before it finished; register the package again";

/// CloudFormation's reserved type namespaces.
const RESERVED: &[&str] = &["Alexa", "AMZN", "Amazon", "ASK", "AWS", "Custom", "Dev"];

/// The secret `source` names, read where it is named (on this engine).
pub fn read_secret(source: &SecretSource) -> Result<String, String> {
    match source {
        SecretSource::Env(name) => std::env::var(name).map_err(|_| {
            format!("the environment variable {name}, named to hold a secret, is not set on this engine")
        }),
        SecretSource::File(path) => std::fs::read_to_string(path)
            .map(|s| s.trim_end().to_string())
            .map_err(|e| {
                format!(
                    "cannot read the secret from {} on this engine: {e}",
                    path.display()
                )
            }),
    }
}

/// A configuration's values with their secret references resolved on this
/// engine: a string `{{resolve:env:NAME}}` is the environment variable's
/// value, `{{resolve:file:PATH}}` the file's (its last newline cut).
pub fn resolve_configuration(value: &Value) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => {
            let inner = s
                .strip_prefix("{{resolve:")
                .and_then(|r| r.strip_suffix("}}"));
            match inner.and_then(|r| r.split_once(':')) {
                Some(("env", name)) => Value::String(read_secret(&SecretSource::Env(name.into()))?),
                Some(("file", path)) => Value::String(read_secret(&SecretSource::File(path.into()))?),
                Some((other, _)) => {
                    return Err(format!(
                        "{s}: a configuration resolves {{{{resolve:env:NAME}}}} and {{{{resolve:file:PATH}}}}, not {other}"
                    ))
                }
                None => value.clone(),
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(resolve_configuration)
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), resolve_configuration(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// Why `config` does not fit `schema` (a `typeConfiguration`: an object's
/// `properties` with JSON types, `required`, `additionalProperties`). A
/// secret reference stands for a string.
fn check_configuration(schema: &Value, config: &Value, at: &str) -> Result<(), String> {
    let Some(object) = config.as_object() else {
        return Err(format!("{at} must be a JSON object"));
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !object.contains_key(name) {
            return Err(format!("{at}: the required property {name} is missing"));
        }
    }
    for (name, value) in object {
        let Some(p) = properties.and_then(|p| p.get(name)) else {
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                return Err(format!(
                    "{at}: {name} is not one of the type's configuration properties ({})",
                    properties
                        .map(|p| p.keys().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_default()
                ));
            }
            continue;
        };
        let fits = match p.get("type").and_then(Value::as_str) {
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("boolean") => value.is_boolean(),
            Some("array") => value.is_array(),
            Some("object") => {
                if value.is_object() {
                    check_configuration(p, value, &format!("{at}.{name}"))?;
                }
                value.is_object()
            }
            _ => true,
        };
        if !fits {
            return Err(format!(
                "{at}.{name} must be of type {}",
                p.get("type").and_then(Value::as_str).unwrap_or("?")
            ));
        }
    }
    Ok(())
}

/// What a registration is given besides the package.
#[derive(Debug, Clone, Default)]
pub struct RegisterOptions {
    /// The type name the caller registers (RegisterType's TypeName); the
    /// package's must be it.
    pub type_name: Option<String>,
    /// RegisterType's ClientRequestToken.
    pub client_token: Option<String>,
    /// A webhook handler's signing secret.
    pub secret: Option<SecretSource>,
    /// Run the provider kit's contract tests against the handler before
    /// the version is recorded (`register-type --test`).
    pub test: bool,
}

/// Why a type registry operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum TypeRegistryError {
    #[error("Type {type_name} is used by stacks {}: delete their resources of this type (or the stacks) before deregistering it", stacks.join(", "))]
    InUse {
        type_name: String,
        stacks: Vec<String>,
    },
    /// A version that resources still use (they keep the version they
    /// were made with until an update moves them).
    #[error("Version '{version_id}' of {type_name} is used by stacks {}: update them with --upgrade-types to move their resources to the default version (or delete the resources) before deregistering it", stacks.join(", "))]
    VersionInUse {
        type_name: String,
        version_id: String,
        stacks: Vec<String>,
    },
    /// A configuration the type's `typeConfiguration` does not take.
    #[error("{0}")]
    InvalidConfiguration(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<TypeRegistryError> for EngineError {
    fn from(e: TypeRegistryError) -> EngineError {
        match e {
            TypeRegistryError::Store(s) => EngineError::Store(s),
            other => EngineError::Validation(other.to_string()),
        }
    }
}

/// The platform a dylib package must be built for to load here: a target
/// triple names the architecture and the operating system.
fn loads_here(target: &str) -> bool {
    let parts: Vec<&str> = target.split('-').collect();
    parts.first() == Some(&std::env::consts::ARCH) && parts.contains(&std::env::consts::OS)
}

impl Core {
    /// Records a registration IN_PROGRESS (or, for a client token already
    /// used, finds the one it made).
    pub async fn begin_registration(
        &self,
        type_name: &str,
        kind: RegistryTypeKind,
        options: &RegisterOptions,
    ) -> Result<RegistrationRecord, StoreError> {
        let ts = now();
        let record = RegistrationRecord {
            token: uuid::Uuid::new_v4().to_string(),
            type_name: type_name.to_string(),
            kind,
            status: RegistrationStatus::InProgress,
            description: "Deployment is currently in progress.".into(),
            version_id: None,
            client_token: options.client_token.clone(),
            created_at: ts.clone(),
            updated_at: ts,
        };
        self.store.begin_registration(&record).await
    }

    /// Checks `package` and ends the registration `token`: COMPLETE with a
    /// new version, or FAILED with why. Last, the process's handler probe
    /// starts the package's provider once, as engines will serve it.
    pub async fn finish_registration(
        &self,
        token: &str,
        package: &[u8],
        options: &RegisterOptions,
    ) -> Result<RegistrationRecord, StoreError> {
        let checked = match self.check_package(package, options) {
            Ok(p) => p,
            Err(why) => return self.failed(token, &why).await,
        };
        let version = NewTypeVersion {
            type_name: checked.manifest.type_name.clone(),
            kind: match checked.manifest.kind {
                TypeKind::Hook => RegistryTypeKind::Hook,
                _ => RegistryTypeKind::Resource,
            },
            schema: checked.cloudformation_schema.to_string(),
            description: checked.manifest.description.clone(),
            handler: serde_json::to_string(&checked.manifest.handler).unwrap_or_default(),
            secret: options
                .secret
                .as_ref()
                .and_then(|s| serde_json::to_string(s).ok()),
            package_sha256: checked.sha256.clone(),
            signed_by: checked.signed_by.clone(),
        };
        let reached = tokio::time::timeout(
            PROBE_LIMIT,
            self.shared
                .handlers
                .reach(&checked, package, options.secret.as_ref(), options.test),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the handler did not answer within {} seconds",
                PROBE_LIMIT.as_secs()
            ))
        });
        if let Err(why) = reached {
            return self.failed(token, &why).await;
        }
        self.store
            .complete_registration(token, &version, package)
            .await?;
        tracing::info!(type_name = %version.type_name, %token, "type registered");
        self.store
            .registration(token)
            .await?
            .ok_or_else(|| StoreError::NoSuchRegistration(token.into()))
    }

    /// Ends the registration `token` of a MODULE type from its template
    /// `fragment` (JSON or YAML): COMPLETE with a new version (the fragment
    /// its package), or FAILED with why (CloudFormation's fragment rules).
    pub async fn finish_module_registration(
        &self,
        token: &str,
        type_name: &str,
        fragment: &[u8],
    ) -> Result<RegistrationRecord, StoreError> {
        let text = String::from_utf8_lossy(fragment);
        let checked = (|| {
            let base = type_name.strip_suffix("::MODULE").unwrap_or_default();
            if !cairn_package::schema::valid_type_name(base) {
                return Err(format!(
                    "{type_name} is not a module type name: Organization::Service::Thing::MODULE, each part 2 to 64 letters and digits"
                ));
            }
            let namespace = type_name.split("::").next().unwrap_or_default();
            if RESERVED.contains(&namespace) {
                return Err(format!(
                    "type names in the {namespace} namespace are reserved"
                ));
            }
            let body = crate::template::Template::body_of(&text).map_err(|e| e.to_string())?;
            crate::template::modules::check_fragment(&body)?;
            Ok(body)
        })();
        let body = match checked {
            Ok(b) => b,
            Err(why) => return self.failed(token, &why).await,
        };
        // The module's schema: its parameters are its properties.
        let properties: serde_json::Map<String, Value> = body
            .get("Parameters")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, p)| {
                let ty = match p.get("Type").and_then(Value::as_str) {
                    Some("Number") => "number",
                    Some(t) if t.starts_with("List<") || t == "CommaDelimitedList" => "array",
                    _ => "string",
                };
                (name.clone(), serde_json::json!({"type": ty, "description": p.get("Description").cloned().unwrap_or(Value::Null)}))
            })
            .collect();
        let description = body
            .get("Description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let schema = serde_json::json!({
            "typeName": type_name,
            "description": description,
            "properties": properties,
            "additionalProperties": false,
        });
        let version = NewTypeVersion {
            type_name: type_name.to_string(),
            kind: RegistryTypeKind::Module,
            schema: schema.to_string(),
            description,
            handler: "null".into(),
            secret: None,
            package_sha256: cairn_package::sha256_hex(fragment),
            signed_by: None,
        };
        self.store
            .complete_registration(token, &version, fragment)
            .await?;
        self.store
            .registration(token)
            .await?
            .ok_or_else(|| StoreError::NoSuchRegistration(token.into()))
    }

    async fn failed(&self, token: &str, why: &str) -> Result<RegistrationRecord, StoreError> {
        tracing::warn!(%token, reason = %why, "type registration failed");
        self.store.fail_registration(token, why).await?;
        self.store
            .registration(token)
            .await?
            .ok_or_else(|| StoreError::NoSuchRegistration(token.into()))
    }

    /// The package, if this engine would serve it: why not otherwise.
    fn check_package(&self, bytes: &[u8], options: &RegisterOptions) -> Result<Package, String> {
        let package = cairn_package::open(bytes, &self.config.registry.trusted_keys)
            .map_err(|e| e.to_string())?;
        let type_name = &package.manifest.type_name;
        if let Some(asked) = options.type_name.as_ref().filter(|t| *t != type_name) {
            return Err(format!(
                "the package is of type {type_name}, not {asked}: register it as {type_name}"
            ));
        }
        if package.manifest.kind == TypeKind::Hook
            && !matches!(
                package.manifest.handler,
                Some(cairn_package::Handler::Dylib { .. })
            )
        {
            return Err("a HOOK package's handler is a library made with cairn_sdk::export_hook!; a hook served by a webhook is an AWS::CloudFormation::LambdaHook resource".into());
        }
        if !matches!(package.manifest.kind, TypeKind::Resource | TypeKind::Hook) {
            return Err(format!(
                "the package is a {} type; this Cairn registers RESOURCE and HOOK packages (a MODULE is registered as a module)",
                package.manifest.kind.as_str()
            ));
        }
        let namespace = type_name.split("::").next().unwrap_or_default();
        if RESERVED.contains(&namespace) {
            return Err(format!(
                "type names in the {namespace} namespace are reserved; name the type with your organization's (e.g. Example::Service::Thing)"
            ));
        }
        if let Some(first) = self.registry.static_claimant(type_name) {
            return Err(format!(
                "resource type {type_name} is claimed by two providers: {first} (configured) and this registration; remove it from the configuration or register another name"
            ));
        }
        match &package.manifest.handler {
            Some(Handler::Dylib { target, .. }) if !loads_here(target) => Err(format!(
                "the package's library is built for {target}; this engine runs on {}-{}: package it on (or for) this platform",
                std::env::consts::ARCH,
                std::env::consts::OS
            )),
            Some(Handler::Webhook { .. }) if options.secret.is_none() => Err(
                "a webhook type needs its handler's signing secret: name where engines read it (cairn type register --secret-env NAME or --secret-file PATH; RegisterType's ExecutionRoleArn env:NAME or file:PATH)".into(),
            ),
            None => Err("the package names no handler".into()),
            Some(_) => Ok(package),
        }
    }

    /// SetTypeConfiguration: `configuration` (JSON) for `type_name` under
    /// `alias` (default `default`, the one providers receive), checked
    /// against the default version's `typeConfiguration`. Engines serve the
    /// type with it from their next read of the registry.
    pub async fn set_type_configuration(
        &self,
        type_name: &str,
        alias: Option<&str>,
        configuration: &str,
    ) -> Result<TypeConfigurationRecord, TypeRegistryError> {
        let alias = alias.unwrap_or(DEFAULT_ALIAS);
        if alias.is_empty()
            || alias.len() > 256
            || !alias.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(TypeRegistryError::InvalidConfiguration(format!(
                "ConfigurationAlias {alias} must be 1 to 256 letters and digits"
            )));
        }
        let version = self
            .store
            .type_versions()
            .await?
            .into_iter()
            .find(|v| v.type_name == type_name && v.is_default && !v.deprecated)
            .ok_or_else(|| StoreError::TypeNotFound {
                type_name: type_name.into(),
                version_id: None,
            })?;
        let given: Value = serde_json::from_str(configuration).map_err(|e| {
            TypeRegistryError::InvalidConfiguration(format!("the configuration is not JSON: {e}"))
        })?;
        if version.kind == RegistryTypeKind::Hook {
            check_hook_configuration(type_name, &given)?;
        } else {
            let schema: Value = serde_json::from_str(&version.schema).unwrap_or(Value::Null);
            let Some(wanted) = schema.get("typeConfiguration") else {
                return Err(TypeRegistryError::InvalidConfiguration(format!(
                    "{type_name} declares no typeConfiguration in its schema: it takes no configuration (package it with cairn provider package --configuration-schema FILE)"
                )));
            };
            check_configuration(wanted, &given, "Configuration")
                .map_err(TypeRegistryError::InvalidConfiguration)?;
        }
        let record = TypeConfigurationRecord {
            type_name: type_name.to_string(),
            alias: alias.to_string(),
            configuration: given.to_string(),
            updated_at: now(),
        };
        self.store.set_type_configuration(&record).await?;
        Ok(record)
    }

    /// Every type's configurations (as set: secret references unresolved).
    pub async fn type_configurations(&self) -> Result<Vec<TypeConfigurationRecord>, StoreError> {
        self.store.type_configurations().await
    }

    /// The package a RegisterType's SchemaHandlerPackage names: a
    /// `file://` URL under `[registry] package_dirs`, or an `https://` URL.
    pub async fn read_package(&self, url: &str) -> Result<Vec<u8>, String> {
        self.read_allowed(
            url,
            &self.config.registry.package_dirs,
            "SchemaHandlerPackage",
            "[registry] package_dirs",
        )
        .await
    }

    /// The bytes at `url`: a `file://` URL under one of `dirs` (the
    /// configuration's `dirs_name`), or an `https://` URL; `what` names the
    /// parameter it was given as.
    pub(super) async fn read_allowed(
        &self,
        url: &str,
        dirs: &[std::path::PathBuf],
        what: &str,
        dirs_name: &str,
    ) -> Result<Vec<u8>, String> {
        if let Some(path) = url.strip_prefix("file://") {
            let real = tokio::fs::canonicalize(path)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            if !crate::nested::under_any(&real, dirs).await {
                return Err(format!(
                    "{} is not under a directory of {dirs_name}",
                    real.display()
                ));
            }
            let size = tokio::fs::metadata(&real)
                .await
                .map_err(|e| format!("{url}: {e}"))?
                .len();
            if size > cairn_package::MAX_UNPACKED_BYTES {
                return Err(format!("{url} is larger than a package may be"));
            }
            return tokio::fs::read(&real)
                .await
                .map_err(|e| format!("{url}: {e}"));
        }
        if url.starts_with("https://") {
            return self
                .shared
                .https
                .get(url, std::time::Duration::from_secs(60))
                .await
                .map_err(|e| e.to_string());
        }
        Err(format!(
            "{what} {url} must be a file:// URL under {dirs_name} or an https:// URL"
        ))
    }

    /// A registration, settled first if its engine left it (see
    /// [`REGISTRATION_LIMIT`]).
    pub async fn registration(
        &self,
        token: &str,
    ) -> Result<Option<RegistrationRecord>, StoreError> {
        // Only this one: a waiter polls it every few seconds.
        let Some(r) = self.store.registration(token).await? else {
            return Ok(None);
        };
        if !self.settle_if_left(&r, jiff::Timestamp::now()).await? {
            return Ok(Some(r));
        }
        self.store.registration(token).await
    }

    /// Every registration, oldest first, settled as [`Core::registration`].
    pub async fn registrations(&self) -> Result<Vec<RegistrationRecord>, StoreError> {
        self.settle_registrations_at(jiff::Timestamp::now()).await?;
        self.store.registrations().await
    }

    /// Ends FAILED every registration still IN_PROGRESS
    /// [`REGISTRATION_LIMIT`] after its last change, as of `now`.
    pub(crate) async fn settle_registrations_at(
        &self,
        now: jiff::Timestamp,
    ) -> Result<(), StoreError> {
        for r in self.store.registrations().await? {
            self.settle_if_left(&r, now).await?;
        }
        Ok(())
    }

    /// Ends `r` FAILED if it is still IN_PROGRESS [`REGISTRATION_LIMIT`]
    /// after its last change, as of `now`; whether it did.
    async fn settle_if_left(
        &self,
        r: &RegistrationRecord,
        now: jiff::Timestamp,
    ) -> Result<bool, StoreError> {
        if r.status != RegistrationStatus::InProgress {
            return Ok(false);
        }
        let limit = jiff::SignedDuration::try_from(REGISTRATION_LIMIT).unwrap_or_default();
        let Ok(changed) = r.updated_at.parse::<jiff::Timestamp>() else {
            return Ok(false);
        };
        if !changed.checked_add(limit).is_ok_and(|due| due <= now) {
            return Ok(false);
        }
        // Another engine may settle or finish it at the same time:
        // whichever write lands first stands.
        match self.store.fail_registration(&r.token, ABANDONED).await {
            Ok(()) => {
                tracing::warn!(token = %r.token, type_name = %r.type_name, "a registration its engine left IN_PROGRESS is FAILED");
                Ok(true)
            }
            Err(StoreError::RegistrationEnded(_)) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Every version of every registered type.
    pub async fn type_versions(&self) -> Result<Vec<TypeVersionRecord>, StoreError> {
        self.store.type_versions().await
    }

    pub async fn set_type_default_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        self.store
            .set_default_type_version(type_name, version_id)
            .await
    }

    /// Deregisters a version (`Some`) or every live version of the type.
    /// The type's last live version is refused while a stack has a
    /// resource of the type, naming the stacks.
    pub async fn deregister_type(
        &self,
        type_name: &str,
        version_id: Option<&str>,
    ) -> Result<(), TypeRegistryError> {
        let live: Vec<TypeVersionRecord> = self
            .store
            .type_versions()
            .await?
            .into_iter()
            .filter(|v| v.type_name == type_name && !v.deprecated)
            .collect();
        if live.is_empty() {
            return Err(StoreError::TypeNotFound {
                type_name: type_name.into(),
                version_id: version_id.map(String::from),
            }
            .into());
        }
        let last = match version_id {
            Some(v) => live.len() == 1 && live[0].version_id == v,
            None => true,
        };
        if last {
            let stacks = self.stacks_using(type_name, None).await?;
            if !stacks.is_empty() {
                return Err(TypeRegistryError::InUse {
                    type_name: type_name.into(),
                    stacks,
                });
            }
        } else if let Some(v) = version_id
            // The default version is refused as such (by the store).
            .filter(|v| live.iter().any(|l| l.version_id == *v && !l.is_default))
        {
            let stacks = self.stacks_using(type_name, Some(v)).await?;
            if !stacks.is_empty() {
                return Err(TypeRegistryError::VersionInUse {
                    type_name: type_name.into(),
                    version_id: v.into(),
                    stacks,
                });
            }
        }
        match version_id {
            Some(v) => self.store.deregister_type_version(type_name, v).await?,
            None => {
                // The others first: the default goes last.
                let mut order = live;
                order.sort_by_key(|v| v.is_default);
                for v in order {
                    self.store
                        .deregister_type_version(type_name, &v.version_id)
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// The stacks (not deleted) with a resource of `type_name` (of its
    /// `version`, when given: the row's own, or one an update's journal
    /// keeps to go back to or delete), or, for a module, whose template
    /// uses it (its resources carry their own types: the template is what
    /// names the module).
    async fn stacks_using(
        &self,
        type_name: &str,
        version: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let module = crate::template::modules::is_module_type(type_name);
        let mut using = Vec::new();
        for s in self.store.list_stacks().await? {
            if s.status == StackStatus::DeleteComplete {
                continue;
            }
            let uses = if module {
                crate::template::Template::body_of(&s.template_body).is_ok_and(|b| {
                    crate::template::modules::module_types(&b)
                        .iter()
                        .any(|t| t == type_name)
                })
            } else {
                let rows = self.store.resources(&s.stack_id).await?;
                rows.iter().any(|r| match version {
                    // A template's hook is its resource's: its physical id.
                    None if crate::hooks::is_hook_type(&r.resource_type) => {
                        r.physical_id.as_deref() == Some(type_name)
                            && r.status != crate::stack::ResourceStatus::DeleteComplete
                    }
                    None => r.resource_type == type_name,
                    Some(v) => uses_version(r, type_name, v),
                })
            };
            if uses {
                using.push(s.stack_name.clone());
            }
        }
        Ok(using)
    }
}

/// A hook's configuration is CloudFormation's HookConfiguration document.
fn check_hook_configuration(type_name: &str, given: &Value) -> Result<(), TypeRegistryError> {
    if given
        .pointer("/CloudFormationConfiguration/HookConfiguration")
        .is_none()
    {
        return Err(TypeRegistryError::InvalidConfiguration(format!(
            "{type_name} is a hook: its configuration is {{\"CloudFormationConfiguration\": {{\"HookConfiguration\": {{…}}}}}}"
        )));
    }
    crate::hooks::parse_configuration(given)
        .map(|_| ())
        .map_err(TypeRegistryError::InvalidConfiguration)
}

/// Whether `r` is, or its update's journal keeps, a resource of
/// `type_name`'s version `version`.
fn uses_version(r: &crate::stack::ResourceRecord, type_name: &str, version: &str) -> bool {
    let kept = match &r.journal {
        Some(crate::stack::Journal::Changed { before }) => Some(before),
        Some(crate::stack::Journal::Restored { discard }) => discard.as_ref(),
        _ => None,
    };
    (r.resource_type == type_name && r.type_version.as_deref() == Some(version))
        || kept.is_some_and(|s| {
            s.resource_type == type_name && s.type_version.as_deref() == Some(version)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_is_checked_against_the_types_schema() {
        let schema = serde_json::json!({
            "properties": {"Root": {"type": "string"}, "Retries": {"type": "integer"}},
            "required": ["Root"],
            "additionalProperties": false,
        });
        let check = |v: Value| check_configuration(&schema, &v, "Configuration");
        assert_eq!(
            check(serde_json::json!({"Root": "/srv", "Retries": 3})),
            Ok(())
        );
        assert_eq!(
            check(serde_json::json!({"Retries": 3})),
            Err("Configuration: the required property Root is missing".into())
        );
        assert_eq!(
            check(serde_json::json!({"Root": 1})),
            Err("Configuration.Root must be of type string".into())
        );
        assert_eq!(
            check(serde_json::json!({"Root": "/srv", "Other": 1})),
            Err("Configuration: Other is not one of the type's configuration properties (Root, Retries)".into())
        );
    }

    #[test]
    fn secret_references_resolve_on_the_engine() {
        let dir = std::env::temp_dir().join(format!("cairn-config-{}", uuid::Uuid::new_v4()));
        std::fs::write(&dir, "pa55\n").unwrap();
        let given = serde_json::json!({
            "Password": format!("{{{{resolve:file:{}}}}}", dir.display()),
            "Plain": "x",
            "Nested": {"List": ["{{resolve:env:CAIRN_NO_SUCH_VARIABLE_FOR_TESTS}}"]},
        });
        let refused = resolve_configuration(&given).err();
        assert_eq!(
            refused.as_deref(),
            Some("the environment variable CAIRN_NO_SUCH_VARIABLE_FOR_TESTS, named to hold a secret, is not set on this engine")
        );
        let resolved = resolve_configuration(&serde_json::json!({
            "Password": format!("{{{{resolve:file:{}}}}}", dir.display()),
            "Plain": "x",
        }));
        assert_eq!(
            resolved,
            Ok(serde_json::json!({"Password": "pa55", "Plain": "x"}))
        );
        let _ = std::fs::remove_file(dir);
    }

    #[test]
    fn a_library_loads_on_its_own_platform_only() {
        let here = format!(
            "{}-unknown-{}-gnu",
            std::env::consts::ARCH,
            std::env::consts::OS
        );
        assert!(loads_here(&here));
        assert!(!loads_here("sparc64-unknown-netbsd"));
    }

    #[test]
    fn a_secret_is_read_where_it_is_named() {
        let missing = read_secret(&SecretSource::Env(
            "CAIRN_NO_SUCH_VARIABLE_FOR_TESTS".into(),
        ));
        assert_eq!(
            missing.err().as_deref(),
            Some("the environment variable CAIRN_NO_SUCH_VARIABLE_FOR_TESTS, named to hold a secret, is not set on this engine")
        );
        let dir = std::env::temp_dir().join(format!("cairn-secret-{}", uuid::Uuid::new_v4()));
        std::fs::write(&dir, "s3cret\n").unwrap();
        assert_eq!(
            read_secret(&SecretSource::File(dir.clone())).as_deref(),
            Ok("s3cret")
        );
        let _ = std::fs::remove_file(dir);
    }
}
