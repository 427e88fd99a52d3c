//! `cairn-providers`: the resource types built into Cairn.
//!
//! - `Cairn::Test::Resource` ([`test_resource`]): a resource backed by one JSON
//!   file per physical resource, for tests and for trying Cairn out.
//! - `Cairn::Local::File` ([`local_file`]): a file on the local machine.
//! - `Cairn::Random::String` ([`random_string`]): a random string, kept until a
//!   CreateOnly property changes.
//!
//! Custom resources (`AWS::CloudFormation::CustomResource`, `Custom::<Name>`)
//! are served by `cairn_core::webhook`, registered here with the rest.

pub mod local_file;
pub mod random_string;
pub mod test_resource;

use std::path::Path;
use std::sync::Arc;

use cairn_core::config::{Config, Isolation, ProviderConfig, ProviderKind};
use cairn_core::plugin::limit::TimeLimited;
use cairn_core::plugin::process::ProcessProvider;
use cairn_core::plugin::DylibProvider;
use cairn_core::registry::{Registry, RegistryError, Transport};
use cairn_core::webhook::remote::RemoteProvider;
use cairn_core::webhook::{custom_schema, WebhookProvider, CUSTOM_TYPE_PREFIX};
use cairn_sdk::ResourceProvider;

/// A plugin's name (the configured one, else its own) and version.
fn named(configured: Option<&String>, manifest: &cairn_sdk::plugin::Manifest) -> (String, String) {
    (
        configured.cloned().unwrap_or_else(|| manifest.name.clone()),
        manifest.version.clone(),
    )
}

/// One `[[providers]]` entry.
fn register_configured(
    r: &mut Registry,
    config: &Config,
    p: &ProviderConfig,
) -> Result<(), RegistryError> {
    let location = p
        .path
        .as_ref()
        .map(|f| f.display().to_string())
        .or_else(|| p.url.clone())
        .unwrap_or_default();
    let name = p.name.clone().unwrap_or_else(|| {
        p.path
            .as_ref()
            .and_then(|f| f.file_name())
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| location.clone())
    });
    let refuse = |message: String| RegistryError::Provider {
        name: name.clone(),
        message,
    };
    if p.kind == ProviderKind::Webhook {
        let url = p
            .url
            .clone()
            .ok_or_else(|| refuse("a kind = \"webhook\" entry needs url".into()))?;
        let connect = RemoteProvider::connect(
            &name,
            &url,
            p.secret.clone(),
            p.ca_bundle.clone(),
            &config.webhooks,
        );
        let remote = block_on_startup(connect)
            .map_err(&refuse)?
            .map_err(|e| refuse(e.to_string()))?;
        let remote = limited(&name, p.timeout_seconds, Arc::new(remote));
        return r.register_versioned(
            &name,
            "remote",
            Transport::Webhook,
            remote,
            p.types.as_deref(),
        );
    }
    let path = p
        .path
        .clone()
        .ok_or_else(|| refuse("a kind = \"dylib\" entry needs path".into()))?;
    let (name, version, transport, plugin) = match p.isolation {
        Isolation::None => {
            let plugin = DylibProvider::load(&path, p.sha256.as_deref())
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
    r.register_versioned(&name, &version, transport, plugin, p.types.as_deref())
}

/// Runs blocking startup work (a plugin host's hello) off the async workers
/// when called from one.
fn off_the_workers<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Runs `f` to completion from startup code that may or may not be inside
/// the runtime (registries are built from sync code).
fn block_on_startup<F: std::future::Future>(f: F) -> Result<F::Output, String> {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| h.block_on(f)))
        }
        _ => tokio::runtime::Builder::new_current_thread()
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

/// The registry of built-in providers plus the configured type aliases.
/// `data_dir` is where file-backed providers keep their resources.
pub fn registry(config: &Config, data_dir: &Path) -> Result<Registry, RegistryError> {
    let mut r = Registry::new();
    let builtins: [(&str, Arc<dyn ResourceProvider>); 3] = [
        (
            "builtin:test",
            Arc::new(test_resource::TestResourceProvider::new(
                data_dir.join("test-resources"),
            )),
        ),
        ("builtin:local", Arc::new(local_file::LocalFileProvider)),
        (
            "builtin:random",
            Arc::new(random_string::RandomStringProvider),
        ),
    ];
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
            return Err(RegistryError::Provider {
                name: c.name.clone().unwrap_or_default(),
                message: format!(
                    "a kind = \"builtin\" entry names one of: {}",
                    builtins.map(|(b, _)| b).join(", ")
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
        Arc::new(cairn_core::group::GroupTypes),
        None,
    )?;
    // Custom resources: AWS::CloudFormation::CustomResource, the Custom::
    // types endpoints declare schemas for, and every other Custom::<Name>.
    let webhooks =
        Arc::new(
            WebhookProvider::new(&config.webhooks).map_err(|e| RegistryError::Provider {
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
        register_configured(&mut r, config, p)?;
    }
    for (alias, target) in &config.type_aliases {
        r.alias(alias, target)?;
    }
    // Heat's and CloudFormation's group type names, unless configured
    // otherwise or served by a provider.
    for (alias, target) in cairn_core::group::DEFAULT_ALIASES {
        if !config.type_aliases.contains_key(alias) && r.get(alias).is_none() {
            r.alias(alias, target)?;
        }
    }
    Ok(r)
}
