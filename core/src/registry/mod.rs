//! Which provider serves which resource type: the registry every stack
//! operation resolves types through, with Heat-style type aliases.
//!
//! Providers that live outside the process (a `[[providers]]` webhook
//! handler, a plugin library) are started lazily, the first time a lookup
//! needs a type they may serve ([`assemble`] builds the registry from the
//! configuration). One that cannot start makes only its own types
//! unavailable: lookups of them fail with the provider's name and the cause,
//! and the start is tried again on later use, after a backoff.

pub mod assemble;
mod lazy;
mod limit;
mod registered;

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
    #[error("no provider is named {0}")]
    NoSuchProvider(String),
    /// A provider that started and serves no type: nothing of it can be
    /// reached.
    #[error("provider {0} serves no resource types, so Cairn cannot reach it")]
    ServesNoType(String),
    /// Why a configured provider did not start (its own words).
    #[error("{0}")]
    DidNotStart(String),
}

pub use lazy::{LazyProvider, ProviderStatus, Starter};
pub use registered::{PackageSource, VersionLoader};

/// Resource types → providers.
#[derive(Default)]
pub struct Registry {
    types: BTreeMap<String, Arc<RegisteredType>>,
    aliases: BTreeMap<String, String>,
    /// Cairn's own aliases (CloudFormation's and Heat's group type names
    /// for the engine's groups): a provider serving the type as named wins
    /// over them, even one that says so only when it starts.
    default_aliases: BTreeMap<String, String>,
    /// A family of types served by one provider, e.g. every `Custom::<Name>`
    /// (CloudFormation custom resources); exact registrations win.
    families: Vec<(String, Arc<RegisteredType>)>,
    /// Providers started on first need (configured plugins and handlers).
    lazy: Vec<LazyProvider>,
    /// The types registered in the state, as last read
    /// ([`Registry::refresh_registered`]).
    registered: std::sync::RwLock<Arc<registered::Registered>>,
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

/// The types `provider` declares (or only `only`, when given), each as a
/// registered type; `only` naming a type it does not serve is an error.
pub fn types_of(
    provider_name: &str,
    version: &str,
    transport: Transport,
    provider: Arc<dyn ResourceProvider>,
    only: Option<&[String]>,
) -> Result<Vec<RegisteredType>, RegistryError> {
    let schemas = provider.schema();
    if let Some(wanted) = only {
        if let Some(missing) = wanted
            .iter()
            .find(|t| !schemas.iter().any(|s| &s.type_name == *t))
        {
            let served: Vec<&str> = schemas.iter().map(|s| s.type_name.as_str()).collect();
            return Err(RegistryError::Provider {
                name: provider_name.to_string(),
                message: format!(
                    "types lists {missing}, which it does not serve (it serves: {})",
                    served.join(", ")
                ),
            });
        }
    }
    Ok(schemas
        .into_iter()
        .filter(|s| only.is_none_or(|o| o.contains(&s.type_name)))
        .map(|schema| RegisteredType {
            schema,
            provider: provider.clone(),
            provider_name: provider_name.to_string(),
            transport,
            version: version.to_string(),
        })
        .collect())
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
        for t in types_of(provider_name, version, transport, provider, only)? {
            if let Some(first) = self.claimant(&t.schema.type_name) {
                return Err(RegistryError::DuplicateType {
                    type_name: t.schema.type_name.clone(),
                    first,
                    second: provider_name.to_string(),
                });
            }
            self.types.insert(t.schema.type_name.clone(), Arc::new(t));
        }
        Ok(())
    }

    /// Adds a provider started on first need (see [`LazyProvider`]).
    pub fn register_lazy(&mut self, provider: LazyProvider) {
        self.lazy.push(provider);
    }

    /// Who already claims `type_name`: a registered provider, or a lazy one
    /// that declares it.
    fn claimant(&self, type_name: &str) -> Option<String> {
        self.types
            .get(type_name)
            .map(|t| t.provider_name.clone())
            .or_else(|| {
                self.lazy
                    .iter()
                    .find(|l| l.declares(type_name))
                    .map(|l| l.name().to_string())
            })
    }

    /// Adds an alias (Heat's resource_registry): templates may use `alias`
    /// wherever `target` is meant.
    pub fn alias(&mut self, alias: &str, target: &str) -> Result<(), RegistryError> {
        if self.claimant(alias).is_some() {
            return Err(RegistryError::AliasShadowsType {
                alias: alias.into(),
            });
        }
        // A lazily started provider that does not list its types may serve
        // the target; whether it does is known when it starts.
        let may_be_served =
            self.claimant(target).is_some() || self.lazy.iter().any(|l| l.may_serve(target));
        if !may_be_served {
            return Err(RegistryError::DanglingAlias {
                alias: alias.into(),
                target: target.into(),
            });
        }
        self.aliases.insert(alias.to_string(), target.to_string());
        Ok(())
    }

    /// Whether `type_name` is served, or declared by a lazy provider, without
    /// starting anything.
    pub fn is_claimed(&self, type_name: &str) -> bool {
        self.claimant(type_name).is_some()
    }

    /// Adds one of Cairn's own aliases (see `default_aliases`).
    pub(super) fn default_alias(&mut self, alias: &str, target: &str) {
        self.default_aliases
            .insert(alias.to_string(), target.to_string());
    }

    /// The canonical type name for `type_name` (following an alias). For
    /// one of Cairn's own aliases, a provider that serves the type as
    /// named is asked first (a lazy one that lists no types is started to
    /// know).
    pub fn canonical<'a>(&'a self, type_name: &'a str) -> &'a str {
        if let Some(target) = self.aliases.get(type_name) {
            return target;
        }
        match self.default_aliases.get(type_name) {
            Some(target) if !self.served_as_named(type_name) => target,
            _ => type_name,
        }
    }

    /// Whether a provider serves `type_name` under that name.
    fn served_as_named(&self, type_name: &str) -> bool {
        self.types.contains_key(type_name)
            || self.lazy.iter().any(|l| {
                l.started_type(type_name).is_some()
                    || (l.may_serve(type_name)
                        && l.start_for(type_name, &self.types, &self.lazy).is_some())
            })
    }

    /// The provider serving `type_name` (starting a lazy provider that may
    /// serve it, when its backoff allows).
    pub fn get(&self, type_name: &str) -> Option<Arc<RegisteredType>> {
        let canonical = self.canonical(type_name);
        if self.ambiguity(canonical).is_some() {
            return None;
        }
        if let Some(t) = self.types.get(canonical) {
            return Some(t.clone());
        }
        if !self.lazy.is_empty() {
            if let Some(t) = self.lazy.iter().find_map(|l| l.started_type(canonical)) {
                return Some(t);
            }
            for l in self.lazy.iter().filter(|l| l.may_serve(canonical)) {
                if let Some(t) = l.start_for(canonical, &self.types, &self.lazy) {
                    return Some(t);
                }
            }
            // A type a provider lists is that provider's, even while it is
            // down: never served by a family (`Custom::<Name>`) meanwhile.
            if self.lazy.iter().any(|l| l.declares(canonical)) {
                return None;
            }
        }
        if let Some(t) = self.registered_now().get(canonical, None) {
            return Some(t);
        }
        self.families
            .iter()
            .find(|(prefix, _)| is_custom_type_name(prefix, canonical))
            .map(|(_, t)| t.clone())
    }

    /// Why `type_name` (canonical) is ambiguous: a provider that lists no
    /// types claims it beside another. Every provider that may claim it is
    /// started first, so the answer does not depend on earlier lookups;
    /// the providers' other types are served all the same.
    pub fn ambiguity(&self, type_name: &str) -> Option<RegistryError> {
        if self.lazy.is_empty() {
            return None;
        }
        for l in &self.lazy {
            if l.not_started() && l.may_serve(type_name) {
                l.start_now(&self.types, &self.lazy);
            }
        }
        self.lazy.iter().find_map(|l| l.conflict(type_name))
    }

    /// The provider registered or configured under `name` (a `[[providers]]`
    /// entry's name, started if it has not), for what is not a resource
    /// type's call: its macros. Why not, when it cannot be had.
    pub fn provider_named(&self, name: &str) -> Result<Arc<dyn ResourceProvider>, RegistryError> {
        if let Some(t) = self.types.values().find(|t| t.provider_name == name) {
            return Ok(t.provider.clone());
        }
        let Some(lazy) = self.lazy.iter().find(|l| l.name() == name) else {
            return Err(RegistryError::NoSuchProvider(name.to_string()));
        };
        lazy.start_now(&self.types, &self.lazy);
        if let Some(cause) = lazy.failure() {
            return Err(RegistryError::DidNotStart(cause));
        }
        lazy.started_types()
            .into_values()
            .next()
            .map(|t| t.provider.clone())
            .ok_or_else(|| RegistryError::ServesNoType(name.to_string()))
    }

    /// The registered types as last read (cheap: one shared snapshot).
    fn registered_now(&self) -> Arc<registered::Registered> {
        match self.registered.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_registered(&self, next: registered::Registered) {
        let next = Arc::new(next);
        match self.registered.write() {
            Ok(mut r) => *r = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }

    /// The registered version a new resource of `type_name` is made with
    /// (the type's default); `None` when the registry does not serve the
    /// type (a built-in or configured one).
    pub fn default_version(&self, type_name: &str) -> Option<String> {
        let canonical = self.canonical(type_name);
        if self.static_claimant(canonical).is_some() {
            return None;
        }
        self.registered_now()
            .default_version(canonical)
            .map(String::from)
    }

    /// Every registered type's default version (those the registry
    /// serves), by type.
    pub fn default_versions(&self) -> BTreeMap<String, String> {
        self.registered_now().defaults()
    }

    /// The provider serving `version` of `type_name` (`None`: whatever
    /// serves the type now, as [`Registry::get`]).
    pub fn get_version(
        &self,
        type_name: &str,
        version: Option<&str>,
    ) -> Option<Arc<RegisteredType>> {
        match version {
            None => self.get(type_name),
            Some(v) => self
                .registered_now()
                .get(self.canonical(type_name), Some(v)),
        }
    }

    /// [`Registry::schema`] of one version (the type's served one when
    /// that version's provider cannot be had: the call will say why).
    pub fn schema_of_version(&self, type_name: &str, version: Option<&str>) -> Option<TypeSchema> {
        self.get_version(type_name, version)
            .map(|t| TypeSchema::new(t as Arc<dyn cairn_model::catalog::HasSchema>))
            .or_else(|| self.schema(type_name))
    }

    /// Why `version` of `type_name` cannot be served now.
    pub fn version_unavailable_reason(
        &self,
        type_name: &str,
        version: Option<&str>,
    ) -> Option<String> {
        match version {
            None => self.unavailable_reason(type_name),
            Some(v) => self
                .registered_now()
                .unavailable_reason(self.canonical(type_name), Some(v)),
        }
    }

    /// Why `type_name` is unavailable, when a provider that may serve it
    /// cannot start: its name and the cause.
    pub fn unavailable_reason(&self, type_name: &str) -> Option<String> {
        let canonical = self.canonical(type_name);
        if let Some(two) = self.ambiguity(canonical) {
            return Some(two.to_string());
        }
        if let Some(why) = self.registered_now().unavailable_reason(canonical, None) {
            return Some(why);
        }
        let reasons: Vec<String> = self
            .lazy
            .iter()
            .filter(|l| l.may_serve(canonical))
            .filter_map(|l| l.failure())
            .collect();
        if reasons.is_empty() {
            return None;
        }
        let alias = if canonical != type_name {
            format!(" (an alias of {canonical})")
        } else {
            String::new()
        };
        Some(format!(
            "{type_name}{alias} is unavailable: {}; Cairn tries to start it again when it is next needed",
            reasons.join("; ")
        ))
    }

    /// Starts every lazy provider that is not running (those in backoff
    /// included) and returns each one's status: `cairn providers`, and
    /// `cairn serve` at start.
    pub fn start_all(&self) -> Vec<ProviderStatus> {
        for l in &self.lazy {
            l.start_now(&self.types, &self.lazy);
        }
        self.provider_statuses()
    }

    /// Each lazy provider's status, starting nothing.
    pub fn provider_statuses(&self) -> Vec<ProviderStatus> {
        self.lazy.iter().map(LazyProvider::status).collect()
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
            Arc::new(RegisteredType {
                schema,
                provider,
                provider_name: provider_name.to_string(),
                transport,
                version: env!("CARGO_PKG_VERSION").to_string(),
            }),
        ));
    }

    /// The families registered with [`Registry::register_family`].
    pub fn families(&self) -> impl Iterator<Item = (&String, &Arc<RegisteredType>)> {
        self.families.iter().map(|(p, t)| (p, t))
    }

    pub fn schema(&self, type_name: &str) -> Option<TypeSchema> {
        self.get(type_name)
            .map(|t| TypeSchema::new(t as Arc<dyn cairn_model::catalog::HasSchema>))
    }

    /// Every type served now: registered ones and those of started lazy
    /// providers, by name.
    pub fn types(&self) -> Vec<(String, Arc<RegisteredType>)> {
        let mut all: BTreeMap<String, Arc<RegisteredType>> = self.types.clone();
        for l in &self.lazy {
            all.extend(l.started_types());
        }
        all.into_iter().collect()
    }

    /// The aliases in force: the configured ones, and Cairn's own where
    /// no provider serves the type as named.
    pub fn aliases(&self) -> BTreeMap<String, String> {
        let mut all = self.aliases.clone();
        for (alias, target) in &self.default_aliases {
            if !self.served_as_named(alias) {
                all.insert(alias.clone(), target.clone());
            }
        }
        all
    }
}

pub use cairn_model::catalog::TypeSchema;

impl cairn_model::catalog::HasSchema for RegisteredType {
    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }
}

/// The model's view of the registry (planning and validation).
impl cairn_model::catalog::TypeCatalog for Registry {
    fn canonical<'a>(&'a self, type_name: &'a str) -> &'a str {
        Registry::canonical(self, type_name)
    }
    fn schema(&self, type_name: &str) -> Option<TypeSchema> {
        Registry::schema(self, type_name)
    }
    fn version_schema(&self, type_name: &str, version: Option<&str>) -> Option<TypeSchema> {
        self.schema_of_version(type_name, version)
    }
    fn provider_name(&self, type_name: &str) -> Option<String> {
        self.get(type_name).map(|t| t.provider_name.clone())
    }
    fn unavailable_reason(&self, type_name: &str) -> Option<String> {
        Registry::unavailable_reason(self, type_name)
    }
}
