//! The registry a configuration asks for: the built-in providers the binary
//! hands in, the engine's group types, custom resources over webhooks, the
//! `[[providers]]` entries (plugins in either isolation, webhook handlers
//! serving their own types) and the type aliases.
//!
//! Configured providers are started lazily ([`super::LazyProvider`]): a
//! command that touches none of their types never reaches them, and one
//! that cannot start makes only its own types unavailable.

use std::sync::Arc;

use cairn_sdk::ResourceProvider;

use super::limit::TimeLimited;
use super::{types_of, LazyProvider, RegisteredType, Registry, RegistryError, Transport};
use crate::config::{Config, EndpointConfig, Isolation, ProviderConfig, ProviderKind};
use crate::plugin::process::ProcessProvider;
use crate::plugin::DylibProvider;
use crate::shared::Shared;
use crate::webhook::remote::RemoteProvider;
use crate::webhook::{custom_schema, WebhookProvider, CUSTOM_TYPE_PREFIX};

/// A built-in provider: its name (`builtin:test`, …) and the provider.
pub type Builtin = (&'static str, Arc<dyn ResourceProvider>);

/// The registry for `config`, with `builtins` (the binary's built-in
/// providers). Nothing outside the process is contacted here.
/// Custom resources and wait condition handles use `shared`'s callback
/// listener, and count their deliveries in its metrics.
pub fn assemble(
    config: &Config,
    builtins: Vec<Builtin>,
    shared: &Shared,
) -> Result<Registry, RegistryError> {
    let mut r = Registry::new();
    // `kind = "builtin"` entries choose the built-ins (and their types);
    // without any, all are registered.
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
    // Instance groups: the engine runs them; this registers their schemas
    // and the launch configuration's provider.
    r.register(
        "engine:groups",
        Transport::Engine,
        Arc::new(crate::group::GroupTypes),
        None,
    )?;
    // Nested stacks: the engine runs them.
    r.register(
        "engine:stacks",
        Transport::Engine,
        Arc::new(crate::nested::NestedStackType),
        None,
    )?;
    // Wait conditions and their handles: the engine waits for the signals.
    r.register(
        "engine:signals",
        Transport::Engine,
        Arc::new(crate::webhook::handles::SignalTypes::new(
            shared.callbacks.clone(),
        )),
        None,
    )?;
    // Custom resources: AWS::CloudFormation::CustomResource, the Custom::
    // types endpoints declare schemas for, and every other Custom::<Name>.
    let webhooks = Arc::new(
        WebhookProvider::new(
            &config.webhooks,
            shared.callbacks.clone(),
            shared.metrics.clone(),
        )
        .map_err(|e| RegistryError::Provider {
            name: "webhooks".into(),
            message: e.to_string(),
        })?,
    );
    r.register("webhooks", Transport::Webhook, webhooks.clone(), None)?;
    r.register_family(
        CUSTOM_TYPE_PREFIX,
        "webhooks",
        Transport::Webhook,
        webhooks,
        custom_schema("Custom::<Name>"),
    );
    for p in config
        .providers
        .iter()
        .filter(|p| p.kind != ProviderKind::Builtin)
    {
        let lazy = configured(config, p, shared)?;
        if let Some(t) = lazy_claims_taken(&r, p) {
            return Err(RegistryError::DuplicateType {
                type_name: t.0,
                first: t.1,
                second: lazy.name().to_string(),
            });
        }
        r.register_lazy(lazy);
    }
    for (alias, target) in &config.type_aliases {
        r.alias(alias, target)?;
    }
    // Heat's and CloudFormation's group type names, unless configured
    // otherwise or claimed by a provider (a configured provider serving one
    // of them lists it in its `types`).
    for (alias, target) in crate::group::DEFAULT_ALIASES {
        if !config.type_aliases.contains_key(alias) && !r.is_claimed(alias) {
            r.alias(alias, target)?;
        }
    }
    Ok(r)
}

/// A type the entry lists that another provider already claims, with that
/// provider's name.
fn lazy_claims_taken(r: &Registry, p: &ProviderConfig) -> Option<(String, String)> {
    p.types
        .iter()
        .flatten()
        .find_map(|t| r.claimant(t).map(|first| (t.clone(), first)))
}

/// The name an entry is shown under: its `name`, else the file name or URL.
fn entry_name(p: &ProviderConfig) -> String {
    p.name.clone().unwrap_or_else(|| {
        p.path
            .as_ref()
            .and_then(|f| f.file_name())
            .map(|f| f.to_string_lossy().into_owned())
            .or_else(|| p.url.clone())
            .unwrap_or_default()
    })
}

/// One `[[providers]]` entry, to be started on first need. A malformed entry
/// is refused here; a provider that is down fails only when started.
fn configured(
    config: &Config,
    p: &ProviderConfig,
    shared: &Shared,
) -> Result<LazyProvider, RegistryError> {
    let name = entry_name(p);
    let refuse = |message: &str| RegistryError::Provider {
        name: name.clone(),
        message: message.to_string(),
    };
    match p.kind {
        ProviderKind::Webhook if p.url.is_none() => {
            return Err(refuse("a kind = \"webhook\" entry needs url"))
        }
        ProviderKind::Dylib if p.path.is_none() => {
            return Err(refuse("a kind = \"dylib\" entry needs path"))
        }
        _ => {}
    }
    let config = config.clone();
    let entry = p.clone();
    let shown = name.clone();
    let shared = shared.clone();
    Ok(LazyProvider::new(
        &name,
        p.types.clone(),
        Box::new(move || start(&config, &entry, &shown, &shared)),
    ))
}

/// Starts one configured provider: reads a handler's types, loads a library
/// or starts its host process.
fn start(
    config: &Config,
    p: &ProviderConfig,
    name: &str,
    shared: &Shared,
) -> Result<Vec<RegisteredType>, RegistryError> {
    let refuse = |message: String| RegistryError::Provider {
        name: name.to_string(),
        message,
    };
    if p.kind == ProviderKind::Webhook {
        let endpoint = EndpointConfig {
            url: p.url.clone().unwrap_or_default(),
            secret: p.secret.clone(),
            ca_bundle: p.ca_bundle.clone(),
            // Asked only when the entry opts in (the handler kit answers
            // it; a handler written for CloudFormation does not).
            drift: p.drift,
            ..Default::default()
        };
        let connect = RemoteProvider::connect(
            name,
            endpoint,
            &config.webhooks,
            shared.callbacks.clone(),
            shared.metrics.clone(),
        );
        let remote = block_on_startup(connect)
            .map_err(&refuse)?
            .map_err(|e| refuse(e.to_string()))?;
        let remote = limited(name, p.timeout_seconds, Arc::new(remote));
        return types_of(
            name,
            "remote",
            Transport::Webhook,
            remote,
            p.types.as_deref(),
        );
    }
    let path = p.path.clone().unwrap_or_default();
    let (name, version, transport, plugin) = match p.isolation {
        Isolation::None => {
            let plugin = off_the_workers(|| DylibProvider::load(&path, p.sha256.as_deref()))
                .map_err(|e| refuse(e.to_string()))?;
            let (name, version) = named(p.name.as_ref(), plugin.manifest());
            (
                name,
                version,
                Transport::Dylib,
                Arc::new(plugin) as Arc<dyn ResourceProvider>,
            )
        }
        Isolation::Process => {
            let start = || -> Result<ProcessProvider, String> {
                let exe = std::env::current_exe()
                    .map_err(|e| format!("cannot find the cairn binary to host the plugin: {e}"))?;
                ProcessProvider::start(&exe, &path, p.sha256.as_deref()).map_err(|e| e.to_string())
            };
            let plugin = off_the_workers(start).map_err(refuse)?;
            let (name, version) = named(p.name.as_ref(), plugin.manifest());
            (
                name,
                version,
                Transport::Process,
                Arc::new(plugin) as Arc<dyn ResourceProvider>,
            )
        }
    };
    let plugin = limited(&name, p.timeout_seconds, plugin);
    types_of(&name, &version, transport, plugin, p.types.as_deref())
}

/// A plugin's name (the configured one, else its own) and version.
fn named(configured: Option<&String>, manifest: &cairn_sdk::plugin::Manifest) -> (String, String) {
    (
        configured.cloned().unwrap_or_else(|| manifest.name.clone()),
        manifest.version.clone(),
    )
}

/// Runs blocking startup work (loading a library, a plugin host's hello)
/// off the async workers when called from one.
fn off_the_workers<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Runs `f` to completion from code that may or may not be inside the
/// runtime (a lookup that starts a provider is synchronous).
fn block_on_startup<F: std::future::Future>(f: F) -> Result<F::Output, String> {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| h.block_on(f)))
        }
        Ok(_) => Err(
            "cannot read the provider's types from inside a single-threaded runtime".to_string(),
        ),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(f))
            .map_err(|e| format!("cannot start a runtime to read the provider's types: {e}")),
    }
}

/// `provider`, limited to `timeout_seconds` per call when set.
fn limited(
    name: &str,
    timeout_seconds: Option<u64>,
    provider: Arc<dyn ResourceProvider>,
) -> Arc<dyn ResourceProvider> {
    match timeout_seconds {
        Some(s) => Arc::new(TimeLimited {
            name: name.to_string(),
            limit: std::time::Duration::from_secs(s),
            inner: provider,
        }),
        None => provider,
    }
}
