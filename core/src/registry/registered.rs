//! Types registered in the state (RegisterType, `cairn type register`),
//! as this process last read them: every live version of each type, each
//! served by its own provider started on first need like a `[[providers]]`
//! entry's. A new resource gets the type's default version; a resource
//! keeps the version it was made with (its record names it) until an
//! update asks to move it, so the providers of older versions are served
//! too.
//!
//! [`Registry::refresh_registered`] reads the store's registry again when
//! its generation moved: a running engine calls it every `[registry]
//! poll_ms`, so a type registered through another engine is served within
//! that, with no restart. A version that stays the default keeps its
//! started provider. A registered type that a configured provider or a
//! built-in also claims is unavailable, with both named; it never makes
//! any other type unavailable.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_model::registry::{RegistryTypeKind, TypeVersionRecord, DEFAULT_ALIAS};

use super::{LazyProvider, RegisteredType, Registry, Starter};
use crate::store::{Store, StoreError};

/// Makes the provider of a registered version (the binary knows the
/// transports: it writes a dylib under its checksum and loads it, or
/// reaches a webhook handler).
pub trait VersionLoader: Send + Sync {
    /// The starter of `version`'s provider, serving exactly its type.
    /// `package` gives the version's package (a dylib handler reads it
    /// when it starts); `configuration` the type's default configuration
    /// (as set: secret references unresolved), which every request
    /// carries.
    fn starter(
        &self,
        version: &TypeVersionRecord,
        package: PackageSource,
        configuration: Option<String>,
    ) -> Starter;
}

/// Where a version's package is read from when its provider starts: the
/// state (so a command that never uses the type never reads it), or bytes
/// already in hand (a registration's check).
#[derive(Clone)]
pub enum PackageSource {
    Stored {
        store: Arc<dyn Store>,
        type_name: String,
        version_id: String,
    },
    Given(Arc<Vec<u8>>),
}

impl PackageSource {
    /// The package's bytes (`None`: the state no longer has it).
    pub async fn read(&self) -> Result<Option<Vec<u8>>, StoreError> {
        match self {
            PackageSource::Stored {
                store,
                type_name,
                version_id,
            } => store.type_package(type_name, version_id).await,
            PackageSource::Given(bytes) => Ok(Some(bytes.as_ref().clone())),
        }
    }
}

struct Served {
    package_sha256: String,
    configuration: Option<String>,
    provider: Arc<LazyProvider>,
}

/// The registered types this process serves.
#[derive(Default)]
pub(super) struct Registered {
    /// The store's registry generation they were read at.
    generation: Option<i64>,
    /// Each type's default version.
    defaults: BTreeMap<String, String>,
    /// Every live version, by type and version id.
    versions: BTreeMap<(String, String), Served>,
    /// Registered types this process will not serve, and why.
    refused: BTreeMap<String, String>,
    /// Every live version of each registered HOOK package (a library or a
    /// webhook judging targets; never served as a resource type).
    hooks: BTreeMap<(String, String), Served>,
}

impl Registered {
    /// The provider of `type_name`'s `version` (`None`: its default).
    pub(super) fn get(
        &self,
        type_name: &str,
        version: Option<&str>,
    ) -> Option<Arc<RegisteredType>> {
        let served = self.served(type_name, version)?;
        served.provider.start_for(type_name, &BTreeMap::new(), &[])
    }

    fn served(&self, type_name: &str, version: Option<&str>) -> Option<&Served> {
        let version = match version {
            Some(v) => v,
            None => self.defaults.get(type_name)?,
        };
        self.versions
            .get(&(type_name.to_string(), version.to_string()))
    }

    /// The provider of a registered HOOK package's `version`, started on
    /// first need; why not when it cannot be had.
    pub(super) fn hook(
        &self,
        type_name: &str,
        version: &str,
    ) -> Result<Arc<RegisteredType>, String> {
        let served = self
            .hooks
            .get(&(type_name.to_string(), version.to_string()))
            .ok_or_else(|| {
                format!("version {version} of the hook {type_name} is not registered on this engine (deregistered, or registered after this engine last read the registry)")
            })?;
        served
            .provider
            .start_for(type_name, &BTreeMap::new(), &[])
            .ok_or_else(|| {
                served.provider.failure().unwrap_or_else(|| {
                    format!("the library or webhook of the hook {type_name} does not serve it")
                })
            })
    }

    pub(super) fn defaults(&self) -> BTreeMap<String, String> {
        self.defaults.clone()
    }

    pub(super) fn default_version(&self, type_name: &str) -> Option<&str> {
        self.defaults.get(type_name).map(String::as_str)
    }

    /// Why a registered type (or one version of it) is not served:
    /// refused, deregistered, or its provider cannot start.
    pub(super) fn unavailable_reason(
        &self,
        type_name: &str,
        version: Option<&str>,
    ) -> Option<String> {
        if let Some(why) = self.refused.get(type_name) {
            return Some(why.clone());
        }
        match (self.served(type_name, version), version) {
            (Some(served), _) => served.provider.failure(),
            (None, Some(v)) => Some(format!(
                "version {v} of {type_name} is not registered (deregistered, or never registered here); register it again, or move the resource to the default version with an update given --upgrade-types"
            )),
            (None, None) => None,
        }
    }
}

impl Registry {
    /// Reads the store's registered types again if they changed since the
    /// last read; whether they had. Each type's default version is served
    /// (a provider started on first need).
    pub async fn refresh_registered(
        &self,
        store: &Arc<dyn Store>,
        loader: &dyn VersionLoader,
    ) -> Result<bool, StoreError> {
        let generation = store.registry_generation().await?;
        let current = self.registered_now();
        if current.generation == Some(generation) {
            return Ok(false);
        }
        let versions = store.type_versions().await?;
        let configurations: BTreeMap<String, String> = store
            .type_configurations()
            .await?
            .into_iter()
            .filter(|c| c.alias == DEFAULT_ALIAS)
            .map(|c| (c.type_name, c.configuration))
            .collect();
        let mut next = Registered {
            generation: Some(generation),
            ..Registered::default()
        };
        // HOOK packages (a template's hook keeps its definition, not a
        // package's handler, and is run by the engine itself).
        for v in versions.iter().filter(|v| {
            !v.deprecated
                && v.kind == RegistryTypeKind::Hook
                && serde_json::from_str::<cairn_package::Handler>(&v.handler).is_ok()
        }) {
            let key = (v.type_name.clone(), v.version_id.clone());
            let kept = current
                .hooks
                .get(&key)
                .filter(|s| s.package_sha256 == v.package_sha256);
            let provider = match kept {
                Some(s) => s.provider.clone(),
                None => self.lazy_version(store, loader, v, None),
            };
            next.hooks.insert(
                key,
                Served {
                    package_sha256: v.package_sha256.clone(),
                    configuration: None,
                    provider,
                },
            );
        }
        for v in versions
            .into_iter()
            // Modules expand into templates: nothing serves them.
            .filter(|v| !v.deprecated && v.kind == RegistryTypeKind::Resource)
        {
            if let Some(first) = self.static_claimant(&v.type_name) {
                if v.is_default {
                    next.refused.insert(
                        v.type_name.clone(),
                        format!(
                            "resource type {} is claimed by two providers: {first} (configured) and the registered type {} version {}; deregister the type or remove it from the configuration",
                            v.type_name, v.type_name, v.version_id
                        ),
                    );
                }
                continue;
            }
            if v.is_default {
                next.defaults
                    .insert(v.type_name.clone(), v.version_id.clone());
            }
            let configuration = configurations.get(&v.type_name).cloned();
            let key = (v.type_name.clone(), v.version_id.clone());
            // A new package or configuration starts a new provider.
            let kept = current.versions.get(&key).filter(|s| {
                s.package_sha256 == v.package_sha256 && s.configuration == configuration
            });
            let provider = match kept {
                Some(s) => s.provider.clone(),
                None => self.lazy_version(store, loader, &v, configuration.clone()),
            };
            next.versions.insert(
                key,
                Served {
                    package_sha256: v.package_sha256.clone(),
                    configuration,
                    provider,
                },
            );
        }
        tracing::info!(
            generation,
            types = next.defaults.len(),
            versions = next.versions.len(),
            "registered types read from the state"
        );
        self.set_registered(next);
        Ok(true)
    }

    /// The provider of a registered version, started on first need.
    fn lazy_version(
        &self,
        store: &Arc<dyn Store>,
        loader: &dyn VersionLoader,
        v: &TypeVersionRecord,
        configuration: Option<String>,
    ) -> Arc<LazyProvider> {
        let package = PackageSource::Stored {
            store: store.clone(),
            type_name: v.type_name.clone(),
            version_id: v.version_id.clone(),
        };
        let name = format!("{} version {}", v.type_name, v.version_id);
        Arc::new(LazyProvider::new(
            &name,
            Some(vec![v.type_name.clone()]),
            loader.starter(v, package, configuration),
        ))
    }

    /// The provider of `version` of the registered HOOK package
    /// `type_name` (a library's or a webhook's), started on first need;
    /// why not when it cannot be had.
    pub fn hook_provider(
        &self,
        type_name: &str,
        version: &str,
    ) -> Result<Arc<dyn cairn_sdk::ResourceProvider>, String> {
        self.registered_now()
            .hook(type_name, version)
            .map(|t| t.provider.clone())
    }

    /// Who claims `type_name` besides the registry: a built-in, a
    /// configured provider, a family (`Custom::`), the engine.
    pub fn static_claimant(&self, type_name: &str) -> Option<String> {
        self.claimant(type_name).or_else(|| {
            self.families()
                .find(|(prefix, _)| type_name.starts_with(prefix.as_str()))
                .map(|(_, t)| t.provider_name.clone())
        })
    }
}
