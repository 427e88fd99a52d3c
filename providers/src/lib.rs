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

use cairn_core::config::{Config, Isolation, ProviderKind};
use cairn_core::plugin::limit::TimeLimited;
use cairn_core::plugin::process::ProcessProvider;
use cairn_core::plugin::DylibProvider;
use cairn_core::registry::{Registry, RegistryError, Transport};
use cairn_core::webhook::{custom_schema, WebhookProvider, CUSTOM_TYPE_PREFIX};
use cairn_sdk::ResourceProvider;

/// A plugin's name (the configured one, else its own) and version.
fn named(configured: Option<&String>, manifest: &cairn_sdk::plugin::Manifest) -> (String, String) {
    (
        configured.cloned().unwrap_or_else(|| manifest.name.clone()),
        manifest.version.clone(),
    )
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
    r.register(
        "builtin:test",
        Transport::Builtin,
        Arc::new(test_resource::TestResourceProvider::new(
            data_dir.join("test-resources"),
        )),
        None,
    )?;
    r.register(
        "builtin:local",
        Transport::Builtin,
        Arc::new(local_file::LocalFileProvider),
        None,
    )?;
    r.register(
        "builtin:random",
        Transport::Builtin,
        Arc::new(random_string::RandomStringProvider),
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
    for p in &config.providers {
        let name = p.name.clone().unwrap_or_else(|| {
            p.path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.path.display().to_string())
        });
        match (p.kind, p.isolation) {
            (ProviderKind::Dylib, Isolation::None) => {
                let plugin = DylibProvider::load(&p.path, p.sha256.as_deref()).map_err(|e| {
                    RegistryError::Provider {
                        name: name.clone(),
                        message: e.to_string(),
                    }
                })?;
                let (name, version) = named(p.name.as_ref(), plugin.manifest());
                let plugin = limited(&name, p.timeout_seconds, Arc::new(plugin));
                r.register_versioned(
                    &name,
                    &version,
                    Transport::Dylib,
                    plugin,
                    p.types.as_deref(),
                )?;
            }
            (ProviderKind::Dylib, Isolation::Process) => {
                let start = || -> Result<ProcessProvider, String> {
                    let exe = std::env::current_exe().map_err(|e| {
                        format!("cannot find the cairn binary to host the plugin: {e}")
                    })?;
                    ProcessProvider::start(&exe, &p.path, p.sha256.as_deref())
                        .map_err(|e| e.to_string())
                };
                // Starting the host waits for its hello: off the async
                // workers when called from one.
                let started = match tokio::runtime::Handle::try_current() {
                    Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                        tokio::task::block_in_place(start)
                    }
                    _ => start(),
                };
                let plugin = started.map_err(|message| RegistryError::Provider {
                    name: name.clone(),
                    message,
                })?;
                let (name, version) = named(p.name.as_ref(), plugin.manifest());
                let plugin = limited(&name, p.timeout_seconds, Arc::new(plugin));
                r.register_versioned(
                    &name,
                    &version,
                    Transport::Process,
                    plugin,
                    p.types.as_deref(),
                )?;
            }
        }
    }
    for (alias, target) in &config.type_aliases {
        r.alias(alias, target)?;
    }
    Ok(r)
}
