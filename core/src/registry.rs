//! Which provider serves which resource type: the registry every stack
//! operation resolves types through, with Heat-style type aliases.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_sdk::{ResourceProvider, ResourceSchema};

/// How a provider is reached, for display (`cairn providers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Run by the engine itself (instance groups).
    Engine,
    Builtin,
    Dylib,
    Process,
    Webhook,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Engine => "engine",
            Transport::Builtin => "builtin",
            Transport::Dylib => "dylib",
            Transport::Process => "process",
            Transport::Webhook => "webhook",
        }
    }
}

/// One registered resource type.
#[derive(Clone)]
pub struct RegisteredType {
    pub schema: ResourceSchema,
    pub provider: Arc<dyn ResourceProvider>,
    /// The name the provider was registered under (for error messages).
    pub provider_name: String,
    pub transport: Transport,
    /// The provider's version (a plugin's own; Cairn's for built-ins).
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("resource type {type_name} is claimed by two providers: {first} and {second}; remove it from one of them (set `types` in its [[providers]] entry)")]
    DuplicateType {
        type_name: String,
        first: String,
        second: String,
    },
    #[error("type alias {alias} points at {target}, which no provider serves")]
    DanglingAlias { alias: String, target: String },
    #[error("type alias {alias} names a type that a provider already serves; remove the alias or the provider's claim")]
    AliasShadowsType { alias: String },
    #[error("provider {name} cannot start: {message}")]
    Provider { name: String, message: String },
}

/// Resource types → providers.
#[derive(Clone, Default)]
pub struct Registry {
    types: BTreeMap<String, RegisteredType>,
    aliases: BTreeMap<String, String>,
    /// A family of types served by one provider, e.g. every `Custom::<Name>`
    /// (CloudFormation custom resources); exact registrations win.
    families: Vec<(String, RegisteredType)>,
}

/// `Custom::<Name>`: at most 60 characters, the name alphanumeric or `_@-`.
fn is_custom_type_name(prefix: &str, type_name: &str) -> bool {
    type_name.len() <= 60
        && type_name.strip_prefix(prefix).is_some_and(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '@' | '-'))
        })
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers every type the provider's schema declares (or only `only`, when
    /// given). Two providers claiming one type is an error naming both.
    pub fn register(
        &mut self,
        provider_name: &str,
        transport: Transport,
        provider: Arc<dyn ResourceProvider>,
        only: Option<&[String]>,
    ) -> Result<(), RegistryError> {
        self.register_versioned(
            provider_name,
            env!("CARGO_PKG_VERSION"),
            transport,
            provider,
            only,
        )
    }

    /// [`Registry::register`] for a provider with its own version (a plugin).
    pub fn register_versioned(
        &mut self,
        provider_name: &str,
        version: &str,
        transport: Transport,
        provider: Arc<dyn ResourceProvider>,
        only: Option<&[String]>,
    ) -> Result<(), RegistryError> {
        if let Some(wanted) = only {
            let served: Vec<String> = provider.schema().into_iter().map(|s| s.type_name).collect();
            if let Some(missing) = wanted.iter().find(|t| !served.contains(t)) {
                return Err(RegistryError::Provider {
                    name: provider_name.to_string(),
                    message: format!(
                        "types lists {missing}, which it does not serve (it serves: {})",
                        served.join(", ")
                    ),
                });
            }
        }
        for schema in provider.schema() {
            if only.is_some_and(|o| !o.contains(&schema.type_name)) {
                continue;
            }
            if let Some(existing) = self.types.get(&schema.type_name) {
                return Err(RegistryError::DuplicateType {
                    type_name: schema.type_name.clone(),
                    first: existing.provider_name.clone(),
                    second: provider_name.to_string(),
                });
            }
            self.types.insert(
                schema.type_name.clone(),
                RegisteredType {
                    schema,
                    provider: provider.clone(),
                    provider_name: provider_name.to_string(),
                    transport,
                    version: version.to_string(),
                },
            );
        }
        Ok(())
    }

    /// Adds an alias (Heat's resource_registry): templates may use `alias`
    /// wherever `target` is meant.
    pub fn alias(&mut self, alias: &str, target: &str) -> Result<(), RegistryError> {
        if self.types.contains_key(alias) {
            return Err(RegistryError::AliasShadowsType {
                alias: alias.into(),
            });
        }
        if !self.types.contains_key(target) {
            return Err(RegistryError::DanglingAlias {
                alias: alias.into(),
                target: target.into(),
            });
        }
        self.aliases.insert(alias.to_string(), target.to_string());
        Ok(())
    }

    /// The canonical type name for `type_name` (following an alias).
    pub fn canonical<'a>(&'a self, type_name: &'a str) -> &'a str {
        self.aliases
            .get(type_name)
            .map(String::as_str)
            .unwrap_or(type_name)
    }

    pub fn get(&self, type_name: &str) -> Option<&RegisteredType> {
        let canonical = self.canonical(type_name);
        self.types.get(canonical).or_else(|| {
            self.families
                .iter()
                .find(|(prefix, _)| is_custom_type_name(prefix, canonical))
                .map(|(_, t)| t)
        })
    }

    /// Registers `schema` for every type named `<prefix><Name>` that no
    /// provider claims exactly (CloudFormation's `Custom::<Name>`).
    pub fn register_family(
        &mut self,
        prefix: &str,
        provider_name: &str,
        transport: Transport,
        provider: Arc<dyn ResourceProvider>,
        schema: ResourceSchema,
    ) {
        self.families.push((
            prefix.to_string(),
            RegisteredType {
                schema,
                provider,
                provider_name: provider_name.to_string(),
                transport,
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
        ));
    }

    /// The families registered with [`Registry::register_family`].
    pub fn families(&self) -> impl Iterator<Item = (&String, &RegisteredType)> {
        self.families.iter().map(|(p, t)| (p, t))
    }

    pub fn schema(&self, type_name: &str) -> Option<&ResourceSchema> {
        self.get(type_name).map(|t| &t.schema)
    }

    pub fn types(&self) -> impl Iterator<Item = (&String, &RegisteredType)> {
        self.types.iter()
    }

    pub fn aliases(&self) -> &BTreeMap<String, String> {
        &self.aliases
    }
}
