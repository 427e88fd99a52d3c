//! The registry a configuration asks for: the built-in providers the binary
//! hands in, the engine's own types, custom resources over webhooks, the
//! `[[providers]]` entries (plugins in either isolation, webhook handlers
//! serving their own types) and the type aliases. The engine knows no
//! transport: this is where they are composed into its registry.
//!
//! Configured providers are started lazily (`LazyProvider`): a command that
//! touches none of their types never reaches them, and one that cannot
//! start makes only its own types unavailable.

use std::sync::Arc;

use cairn_core::config::{Config, EndpointConfig, Isolation, ProviderConfig, ProviderKind};
use cairn_core::registry::assemble::{
    block_on_startup, off_the_workers, per_entry, with_builtins, Builtin,
};
use cairn_core::registry::{
    types_of, LazyProvider, RegisteredType, Registry, RegistryError, Transport,
};
use cairn_plugin::process::ProcessProvider;
use cairn_plugin::DylibProvider;
use cairn_sdk::ResourceProvider;
use cairn_webhook::remote::RemoteProvider;
use cairn_webhook::{custom_schema, WebhookProvider, CUSTOM_TYPE_PREFIX};

use super::Process;

/// The registry for `config`, with `builtins` (the binary's built-in
/// providers). Nothing outside the process is contacted here.
/// Custom resources and wait condition handles use `process`'s callback
/// listener, and count their deliveries in its metrics.
pub fn assemble(
    config: &Config,
    builtins: Vec<Builtin>,
    process: &Process,
) -> Result<Registry, RegistryError> {
    let mut r = with_builtins(config, builtins)?;
    r.register_engine_types(process.callbacks.clone())?;
    // Custom resources: AWS::CloudFormation::CustomResource, the Custom::
    // types endpoints declare schemas for, and every other Custom::<Name>.
    let webhooks = Arc::new(
        WebhookProvider::new(
            &config.webhooks,
            process.callbacks.clone(),
            process.deliveries(),
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
        let lazy = configured(config, p, process)?;
        r.register_configured(p, lazy)?;
    }
    r.alias_configured(config)?;
    Ok(r)
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
    process: &Process,
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
    let process = process.clone();
    Ok(LazyProvider::new(
        &name,
        p.types.clone(),
        Box::new(move || start(&config, &entry, &shown, &process)),
    ))
}

/// Starts one configured provider: reads a handler's types, loads a library
/// or starts its host process.
pub(crate) fn start(
    config: &Config,
    p: &ProviderConfig,
    name: &str,
    process: &Process,
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
            read: p.read,
            ..Default::default()
        };
        let connect = RemoteProvider::connect(
            name,
            endpoint,
            &config.webhooks,
            process.callbacks.clone(),
            process.deliveries(),
        );
        let remote = block_on_startup(connect)
            .map_err(|e| refuse(e.to_string()))?
            .map_err(|e| refuse(e.to_string()))?;
        // The entry's settings reach the handler as each request's
        // TypeConfiguration, as a registered type's configuration does.
        let remote = per_entry(
            name,
            p.timeout_seconds,
            p.settings.clone(),
            Arc::new(remote),
        );
        return types_of(
            name,
            "remote",
            Transport::Webhook,
            remote,
            p.types.as_deref(),
        );
    }
    let path = plugin_path(&p.path.clone().unwrap_or_default());
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
    let plugin = per_entry(&name, p.timeout_seconds, p.settings.clone(), plugin);
    types_of(&name, &version, transport, plugin, p.types.as_deref())
}

/// Where a dylib entry's library is: its `path` as given (relative to the
/// working directory), or, for a bare file name found nowhere there, the
/// file beside the running `cairn` binary. Cargo puts a workspace's plugin
/// libraries beside the binary of the same profile, so one configuration
/// (`examples/postgres/cairn.toml`) serves a debug and a release build.
fn plugin_path(path: &std::path::Path) -> std::path::PathBuf {
    let bare = path.components().count() == 1 && path.is_relative();
    if !bare || path.exists() {
        return path.to_path_buf();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(path)))
        .filter(|beside| beside.exists())
        .unwrap_or_else(|| path.to_path_buf())
}

/// A plugin's name (the configured one, else its own) and version.
fn named(configured: Option<&String>, manifest: &cairn_sdk::plugin::Manifest) -> (String, String) {
    (
        configured.cloned().unwrap_or_else(|| manifest.name.clone()),
        manifest.version.clone(),
    )
}
