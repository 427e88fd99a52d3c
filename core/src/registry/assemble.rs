//! The parts of a configured registry that need no transport: the built-in
//! providers the binary hands in (as `kind = "builtin"` entries choose
//! them), the engine's own types, configured providers' claims and the
//! type aliases. The binary wires the transports in between (custom
//! resources over webhooks, `[[providers]]` plugins and handlers), in this
//! order: built-ins, engine types, transports, aliases.
//!
//! Configured providers are started lazily ([`super::LazyProvider`]): a
//! command that touches none of their types never reaches them, and one
//! that cannot start makes only its own types unavailable.

use std::sync::Arc;

use cairn_sdk::ResourceProvider;

use super::limit::EntryCalls;
use super::{LazyProvider, Registry, RegistryError, Transport};
use crate::config::{Config, ProviderConfig, ProviderKind};
use crate::signal::{HandleUrls, SignalTypes};

/// A built-in provider: its name (`builtin:test`, …) and the provider.
pub type Builtin = (&'static str, Arc<dyn ResourceProvider>);

/// A registry with `builtins` (the binary's built-in providers): all of
/// them, or only those `kind = "builtin"` entries choose (with their
/// types).
pub fn with_builtins(config: &Config, builtins: Vec<Builtin>) -> Result<Registry, RegistryError> {
    let mut r = Registry::new();
    let chosen: Vec<&ProviderConfig> = config
        .providers
        .iter()
        .filter(|p| p.kind == ProviderKind::Builtin)
        .collect();
    for c in &chosen {
        let known = c
            .name
            .as_deref()
            .is_some_and(|n| builtins.iter().any(|(b, _)| *b == n));
        if !known {
            let names: Vec<&str> = builtins.iter().map(|(b, _)| *b).collect();
            return Err(RegistryError::Provider {
                name: c.name.clone().unwrap_or_default(),
                message: format!(
                    "a kind = \"builtin\" entry names one of: {}",
                    names.join(", ")
                ),
            });
        }
    }
    for (name, provider) in builtins {
        if chosen.is_empty() {
            r.register(name, Transport::Builtin, provider, None)?;
        } else if let Some(c) = chosen.iter().find(|c| c.name.as_deref() == Some(name)) {
            r.register(name, Transport::Builtin, provider, c.types.as_deref())?;
        }
    }
    Ok(r)
}

impl Registry {
    /// The types the engine runs itself: instance groups (their schemas
    /// and the launch configuration's provider), nested stacks, and wait
    /// conditions with their handles (a handle's physical id is a URL of
    /// the process's callback listener: `handles`).
    pub fn register_engine_types(
        &mut self,
        handles: Arc<dyn HandleUrls>,
    ) -> Result<(), RegistryError> {
        self.register(
            "engine:groups",
            Transport::Engine,
            Arc::new(crate::group::GroupTypes),
            None,
        )?;
        self.register(
            "engine:stacks",
            Transport::Engine,
            Arc::new(crate::nested::NestedStackType),
            None,
        )?;
        self.register(
            "engine:signals",
            Transport::Engine,
            Arc::new(SignalTypes::new(handles)),
            None,
        )?;
        self.register(
            "engine:macros",
            Transport::Engine,
            Arc::new(crate::macros::MacroType),
            None,
        )?;
        self.register(
            "engine:hooks",
            Transport::Engine,
            Arc::new(crate::hooks::HookTypes),
            None,
        )
    }

    /// Registers a configured provider to start on first need, refusing a
    /// type its entry lists that another provider already claims.
    pub fn register_configured(
        &mut self,
        entry: &ProviderConfig,
        lazy: LazyProvider,
    ) -> Result<(), RegistryError> {
        let taken = entry
            .types
            .iter()
            .flatten()
            .find_map(|t| self.claimant(t).map(|first| (t.clone(), first)));
        if let Some((type_name, first)) = taken {
            return Err(RegistryError::DuplicateType {
                type_name,
                first,
                second: lazy.name().to_string(),
            });
        }
        self.register_lazy(lazy);
        Ok(())
    }

    /// The configured type aliases, then Heat's and CloudFormation's group
    /// type names unless configured otherwise: a provider that serves one
    /// of those names (listed in its `types`, or declared by its schema
    /// when it starts) wins over Cairn's alias.
    pub fn alias_configured(&mut self, config: &Config) -> Result<(), RegistryError> {
        for (alias, target) in &config.type_aliases {
            self.alias(alias, target)?;
        }
        for (alias, target) in crate::group::DEFAULT_ALIASES {
            if !config.type_aliases.contains_key(alias) && !self.is_claimed(alias) {
                self.default_alias(alias, target);
            }
        }
        Ok(())
    }
}

/// `provider` as a `[[providers]]` entry configures it: limited to
/// `timeout_seconds` per call and given `settings`, when set.
pub fn per_entry(
    name: &str,
    timeout_seconds: Option<u64>,
    settings: Option<serde_json::Value>,
    provider: Arc<dyn ResourceProvider>,
) -> Arc<dyn ResourceProvider> {
    if timeout_seconds.is_none() && settings.is_none() {
        return provider;
    }
    Arc::new(EntryCalls {
        name: name.to_string(),
        limit: timeout_seconds.map(std::time::Duration::from_secs),
        settings,
        inner: provider,
    })
}

/// Runs blocking startup work (loading a library, a plugin host's hello)
/// off the async workers when called from one.
pub fn off_the_workers<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Why a provider's start could not be run to completion.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("cannot read the provider's types from inside a single-threaded runtime")]
    SingleThreaded,
    #[error("cannot start a runtime to read the provider's types: {0}")]
    NoRuntime(std::io::Error),
}

/// Runs `f` to completion from code that may or may not be inside the
/// runtime (a lookup that starts a provider is synchronous).
pub fn block_on_startup<F: std::future::Future>(f: F) -> Result<F::Output, StartupError> {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| h.block_on(f)))
        }
        Ok(_) => Err(StartupError::SingleThreaded),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(f))
            .map_err(StartupError::NoRuntime),
    }
}
