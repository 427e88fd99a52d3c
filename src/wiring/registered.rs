//! The providers of registered types (`cairn type register`): a version is
//! started as a `[[providers]]` entry naming exactly its type would be.
//! A dylib's package is opened again here (its checksums, and a trusted
//! signature when this engine's `[registry] trusted_keys` asks for one),
//! and its library written under its SHA-256 in the cache directory before
//! it is loaded; a webhook's secret is read where its registration named
//! it, on this engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_core::config::{Config, ProviderConfig, ProviderKind};
use cairn_core::engine::types::{read_secret, resolve_configuration, SecretSource};
use cairn_core::registry::assemble::{block_on_startup, per_entry};
use cairn_core::registry::{PackageSource, RegistryError, Starter, VersionLoader};
use cairn_core::shared::HandlerProbe;
use cairn_core::type_registry::{RegistryTypeKind, TypeVersionRecord};
use cairn_package::Handler;

use super::Process;

/// Starts registered versions' providers for one process.
pub struct Loader {
    pub config: Config,
    pub process: Process,
    /// Where libraries are written, each under its SHA-256.
    pub cache_dir: PathBuf,
}

impl VersionLoader for Loader {
    fn starter(
        &self,
        version: &TypeVersionRecord,
        package: PackageSource,
        configuration: Option<String>,
    ) -> Starter {
        let (config, process, cache) = (
            self.config.clone(),
            self.process.clone(),
            self.cache_dir.clone(),
        );
        let version = version.clone();
        Box::new(move || {
            let name = format!("{} version {}", version.type_name, version.version_id);
            let refuse = |message: String| RegistryError::Provider {
                name: name.clone(),
                message,
            };
            // A library's package is read from the state only now, when the
            // provider starts.
            let is_dylib = matches!(
                serde_json::from_str::<Handler>(&version.handler),
                Ok(Handler::Dylib { .. })
            );
            let bytes = if is_dylib {
                block_on_startup(package.read())
                    .map_err(|e| refuse(e.to_string()))?
                    .map_err(|e| {
                        refuse(format!("its package cannot be read from the state: {e}"))
                    })?
            } else {
                None
            };
            let entry = entry_for(&config, &version, bytes.as_deref(), &cache).map_err(refuse)?;
            // The type's configuration, its secrets resolved here, in every
            // request (`provider_settings`; a webhook's TypeConfiguration).
            let settings = match &configuration {
                Some(text) => {
                    let given: serde_json::Value = serde_json::from_str(text)
                        .map_err(|e| refuse(format!("its configuration cannot be read ({e})")))?;
                    Some(resolve_configuration(&given).map_err(refuse)?)
                }
                None => None,
            };
            let mut types = super::registry::start(&config, &entry, &name, &process)?;
            for t in &mut types {
                t.provider = per_entry(&name, None, settings.clone(), t.provider.clone());
            }
            Ok(types)
        })
    }
}

/// The `[[providers]]` entry a registered version stands for.
fn entry_for(
    config: &Config,
    version: &TypeVersionRecord,
    package: Option<&[u8]>,
    cache: &Path,
) -> Result<ProviderConfig, String> {
    let handler: Handler = serde_json::from_str(&version.handler)
        .map_err(|e| format!("its recorded handler cannot be read ({e})"))?;
    let mut entry = ProviderConfig::named(
        ProviderKind::Webhook,
        &format!("{} version {}", version.type_name, version.version_id),
    );
    entry.types = Some(vec![version.type_name.clone()]);
    match handler {
        Handler::Webhook { url } => {
            entry.url = Some(url);
            if let Some(source) = &version.secret {
                let source: SecretSource = serde_json::from_str(source)
                    .map_err(|e| format!("its recorded secret source cannot be read ({e})"))?;
                entry.secret = Some(read_secret(&source)?);
            }
            // The handler kit answers drift and read requests.
            entry.drift = true;
            entry.read = true;
        }
        Handler::Dylib { .. } => {
            let bytes = package.ok_or("its package is not in the state")?;
            let opened = cairn_package::open(bytes, &config.registry.trusted_keys)
                .map_err(|e| format!("its package is refused on this engine: {e}"))?;
            let (file, library) = opened.library().ok_or("its package holds no library")?;
            let sha = cairn_package::sha256_hex(library);
            let path = cairn_core::registry::assemble::off_the_workers(|| {
                materialise(cache, &sha, file, library)
            })?;
            entry.kind = ProviderKind::Dylib;
            entry.path = Some(path);
            entry.sha256 = Some(sha);
        }
    }
    Ok(entry)
}

/// Writes `library` as `<cache>/<sha>/<file name>` unless it is there
/// already with that checksum (written whole first, then renamed: a
/// process that dies mid-write leaves no half library to load).
fn materialise(cache: &Path, sha: &str, file: &str, library: &[u8]) -> Result<PathBuf, String> {
    let name = Path::new(file)
        .file_name()
        .ok_or_else(|| format!("the package's library {file} has no file name"))?;
    let dir = cache.join(sha);
    let path = dir.join(name);
    if std::fs::read(&path).is_ok_and(|b| cairn_package::sha256_hex(&b) == sha) {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let partial = dir.join(format!(
        ".{}.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&partial, library)
        .and_then(|_| std::fs::rename(&partial, &path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// The loader for a process that writes libraries under `cache_dir`.
pub fn loader(config: &Config, cache_dir: PathBuf, process: &Process) -> Arc<Loader> {
    Arc::new(Loader {
        config: config.clone(),
        process: process.clone(),
        cache_dir,
    })
}

/// Starts a package's provider once, at its registration, as engines will
/// serve it: a webhook handler is reached (its `/schema`), a library loaded
/// in a host process; it must serve the package's type.
pub struct Probe(pub Arc<Loader>);

#[async_trait::async_trait]
impl HandlerProbe for Probe {
    async fn reach(
        &self,
        package: &cairn_package::Package,
        bytes: &[u8],
        secret: Option<&SecretSource>,
        test: bool,
    ) -> Result<(), String> {
        let version = TypeVersionRecord {
            type_name: package.manifest.type_name.clone(),
            version_id: "00000000".into(),
            kind: RegistryTypeKind::Resource,
            is_default: true,
            deprecated: false,
            schema: package.cloudformation_schema.to_string(),
            description: package.manifest.description.clone(),
            handler: serde_json::to_string(&package.manifest.handler).unwrap_or_default(),
            secret: secret.and_then(|s| serde_json::to_string(s).ok()),
            package_sha256: package.sha256.clone(),
            signed_by: package.signed_by.clone(),
            created_at: String::new(),
        };
        let given = PackageSource::Given(Arc::new(bytes.to_vec()));
        let starter = self.0.starter(&version, given, None);
        let started = tokio::task::spawn_blocking(starter)
            .await
            .map_err(|e| format!("the handler's check stopped: {e}"))?;
        let cause = |e: RegistryError| match e {
            RegistryError::Provider { message, .. } => message,
            other => other.to_string(),
        };
        let types = started
            .map_err(|e| format!("the handler cannot be reached or loaded: {}", cause(e)))?;
        let Some(t) = types.first() else {
            return Err(format!(
                "the handler does not serve {}",
                package.manifest.type_name
            ));
        };
        if test {
            contract_tests(t).await?;
        }
        Ok(())
    }
}

/// The provider kit's contract tests against a registered type's provider
/// (inputs derived from its schema): why they failed, naming each failure.
async fn contract_tests(t: &cairn_core::registry::RegisteredType) -> Result<(), String> {
    use cairn_core::contract::{self, Status};
    let target = contract::Target {
        type_name: &t.schema.type_name,
        schema: &t.schema,
        declared: t.provider.schema(),
        provider: t.provider.as_ref(),
        call_timeout: std::time::Duration::from_secs(60),
    };
    let reports = contract::run(&target, &contract::Inputs::default()).await;
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| r.status == Status::Failed)
        .map(|r| format!("{}: {}", r.test, r.message))
        .collect();
    if failed.is_empty() {
        tracing::info!(type_name = %t.schema.type_name, tests = reports.len(), "contract tests passed");
        return Ok(());
    }
    Err(format!(
        "the contract tests failed ({} of {}): {}",
        failed.len(),
        reports.len(),
        failed.join("; ")
    ))
}
