//! `cairn-plugin`: hosting provider plugins loaded from dynamic libraries
//! (the host side of `cairn_sdk::plugin`'s C ABI), in the engine's process
//! or (`process`) in a host process of their own. A transport: it knows
//! the SDK's contract and nothing of the engine, the store or the model.
//!
//! Before anything in a library runs, the host checks the exported symbol,
//! the magic, the ABI version and the protocol range, and (optionally) the
//! file's SHA-256. Libraries are never unloaded: anything that came from one
//! (function pointers, buffers) would dangle. A call crosses as JSON; its
//! outcome comes back through [`complete`] on a plugin thread and is handed
//! to the waiting future. A plugin that panicked is poisoned: its later calls
//! fail at once with the panic it died of.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use cairn_sdk::plugin::{
    Buf, Call, Decl, Host, Manifest, StaticDecl, ABI_VERSION, DECL_SYMBOL, MAGIC, PROTOCOL_MAX,
    PROTOCOL_MIN, STATUS_CANCELLED, STATUS_ERROR, STATUS_OK, STATUS_PANIC,
};
use cairn_sdk::{ErrorKind, ProviderError};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

/// Implements `ResourceProvider` for a plugin transport: the schemas of
/// its manifest, and each method as one `Call` through its `invoke`.
macro_rules! provider_over_calls {
    ($t:ty) => {
        #[async_trait::async_trait]
        impl cairn_sdk::ResourceProvider for $t {
            fn schema(&self) -> Vec<cairn_sdk::ResourceSchema> {
                self.manifest.schemas.clone()
            }

            async fn create(
                &self,
                req: &cairn_sdk::CreateRequest,
            ) -> Result<cairn_sdk::CreateResult, cairn_sdk::ProviderError> {
                self.invoke(&cairn_sdk::plugin::Call::Create(req.clone()))
                    .await
            }

            async fn update(
                &self,
                req: &cairn_sdk::UpdateRequest,
            ) -> Result<cairn_sdk::UpdateResult, cairn_sdk::ProviderError> {
                self.invoke(&cairn_sdk::plugin::Call::Update(req.clone()))
                    .await
            }

            async fn delete(
                &self,
                req: &cairn_sdk::DeleteRequest,
            ) -> Result<(), cairn_sdk::ProviderError> {
                self.invoke::<serde_json::Value>(&cairn_sdk::plugin::Call::Delete(req.clone()))
                    .await
                    .map(|_| ())
            }

            async fn check_drift(
                &self,
                req: &cairn_sdk::DriftRequest,
            ) -> Result<cairn_sdk::DriftResult, cairn_sdk::ProviderError> {
                self.invoke(&cairn_sdk::plugin::Call::CheckDrift(req.clone()))
                    .await
            }

            async fn check_status(
                &self,
                req: &cairn_sdk::StatusRequest,
            ) -> Result<cairn_sdk::Health, cairn_sdk::ProviderError> {
                self.invoke(&cairn_sdk::plugin::Call::CheckStatus(req.clone()))
                    .await
            }

            async fn read(
                &self,
                req: &cairn_sdk::ReadRequest,
            ) -> Result<cairn_sdk::ReadResult, cairn_sdk::ProviderError> {
                self.invoke(&cairn_sdk::plugin::Call::Read(req.clone()))
                    .await
            }

            async fn transform(
                &self,
                req: &cairn_sdk::MacroRequest,
            ) -> Result<cairn_sdk::MacroResponse, cairn_sdk::ProviderError> {
                self.invoke(&cairn_sdk::plugin::Call::Transform(req.clone()))
                    .await
            }

            async fn hook(
                &self,
                req: &cairn_sdk::HookRequest,
            ) -> Result<cairn_sdk::HookProgress, cairn_sdk::ProviderError> {
                self.invoke(&cairn_sdk::plugin::Call::Hook(req.clone()))
                    .await
            }
        }
    };
}

pub mod process;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot load provider plugin {path}: {reason}")]
pub struct PluginError {
    pub path: PathBuf,
    pub reason: String,
}

type Outcome = (i32, Vec<u8>);

/// What the plugin's `complete` callback reaches: the calls waiting for an
/// outcome. Leaked with the library (both live as long as the process).
struct HostState {
    decl: &'static StaticDecl,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Outcome>>>,
}

/// The host's `complete`: copies the plugin's buffer, frees it with the
/// plugin's `free_buf`, and wakes the waiting call. Never unwinds.
unsafe extern "C" fn complete(ctx: *mut c_void, call: u64, status: i32, out: Buf) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: ctx is the leaked HostState given at init.
        let state = unsafe { &*(ctx as *const HostState) };
        // SAFETY: the plugin hands a buffer it allocated and keeps alive until freed.
        let bytes = unsafe { out.to_vec() };
        // SAFETY: the buffer came from this plugin; it frees its own memory.
        unsafe { (state.decl.0.free_buf)(out) };
        let waiter = state.waiting.lock().ok().and_then(|mut w| w.remove(&call));
        if let Some(tx) = waiter {
            let _ = tx.send((status, bytes));
        }
    });
}

/// A provider served by a plugin loaded into this process.
pub struct DylibProvider {
    path: PathBuf,
    state: &'static HostState,
    manifest: Manifest,
    next_call: AtomicU64,
    /// The panic that poisoned the plugin, if one did.
    poisoned: Mutex<Option<String>>,
}

/// Cancels a call whose future was dropped before its outcome came.
struct InFlight<'a> {
    provider: &'a DylibProvider,
    call: u64,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            if let Ok(mut w) = self.provider.state.waiting.lock() {
                w.remove(&self.call);
            }
            // SAFETY: a function of the declaration, valid for the process's life.
            unsafe { (self.provider.state.decl.0.cancel)(self.call) };
        }
    }
}

fn c_text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return "?".into();
    }
    // SAFETY: the declaration's strings are NUL-terminated 'static data.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl DylibProvider {
    /// Loads and starts the plugin at `path`; `sha256` pins the file.
    pub fn load(path: &Path, sha256: Option<&str>) -> Result<DylibProvider, PluginError> {
        let fail = |reason: String| PluginError {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(pin) = sha256 {
            let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
            let digest: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            if !digest.eq_ignore_ascii_case(pin.trim()) {
                return Err(fail(format!(
                    "its SHA-256 is {digest}, but the config pins {pin}; rebuild it or update sha256"
                )));
            }
        }
        // RTLD_NOW: unresolved symbols fail here, not at a later call;
        // RTLD_LOCAL: the plugin's symbols stay its own.
        let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
        // SAFETY: loading runs the library's initialisers; that is what
        // loading a plugin means. It is never unloaded (leaked below).
        let lib = unsafe { libloading::os::unix::Library::open(Some(path), flags) }
            .map_err(|e| fail(format!("{e}")))?;
        let lib: &'static libloading::os::unix::Library = Box::leak(Box::new(lib));
        // SAFETY: the symbol's type is fixed by the ABI named in its name.
        let declare = unsafe { lib.get::<extern "C" fn() -> *const Decl>(DECL_SYMBOL) }.map_err(|_| {
            fail(format!(
                "it does not export cairn_provider_decl_v{ABI_VERSION}: not a Cairn provider plugin of ABI version {ABI_VERSION} (build it with cairn_sdk::export_provider! from a matching cairn-sdk)"
            ))
        })?;
        let decl_ptr = declare();
        if decl_ptr.is_null() {
            return Err(fail("its declaration is null".into()));
        }
        // SAFETY: non-null pointer to the library's 'static declaration;
        // StaticDecl is its repr(transparent) Sync wrapper.
        let shared: &'static StaticDecl = unsafe { &*(decl_ptr as *const StaticDecl) };
        let decl: &'static Decl = &shared.0;
        if decl.magic != MAGIC {
            return Err(fail(format!(
                "its declaration starts with {:?}, expected the magic {:?}: not a Cairn provider plugin",
                String::from_utf8_lossy(&decl.magic),
                String::from_utf8_lossy(&MAGIC)
            )));
        }
        if decl.abi_version != ABI_VERSION {
            return Err(fail(format!(
                "it was built for plugin ABI version {}, this Cairn speaks {ABI_VERSION}; rebuild it against a matching cairn-sdk",
                decl.abi_version
            )));
        }
        if (decl.size as usize) < std::mem::size_of::<Decl>() {
            return Err(fail(format!(
                "its declaration has {} bytes, ABI version {ABI_VERSION} needs {}",
                decl.size,
                std::mem::size_of::<Decl>()
            )));
        }
        if decl.protocol_max < PROTOCOL_MIN || decl.protocol_min > PROTOCOL_MAX {
            return Err(fail(format!(
                "it speaks protocol versions {}..={}, this Cairn {PROTOCOL_MIN}..={PROTOCOL_MAX}",
                decl.protocol_min, decl.protocol_max
            )));
        }
        let state: &'static HostState = Box::leak(Box::new(HostState {
            decl: shared,
            waiting: Mutex::new(HashMap::new()),
        }));
        let host = Host {
            size: std::mem::size_of::<Host>() as u32,
            ctx: state as *const HostState as *mut c_void,
            complete,
        };
        let mut out = Buf::empty();
        // SAFETY: host and out outlive the call; init is the plugin's function.
        let status = unsafe { (decl.init)(&host, &mut out) };
        // SAFETY: init wrote a plugin-owned buffer (or left it empty).
        let bytes = unsafe { out.to_vec() };
        // SAFETY: freed by the plugin that allocated it.
        unsafe { (decl.free_buf)(out) };
        if status != STATUS_OK {
            return Err(fail(format!(
                "{} {} failed to start: {}",
                c_text(decl.provider_name),
                c_text(decl.provider_version),
                String::from_utf8_lossy(&bytes)
            )));
        }
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| fail(format!("its manifest is not valid: {e}")))?;
        Ok(DylibProvider {
            path: path.to_path_buf(),
            state,
            manifest,
            next_call: AtomicU64::new(1),
            poisoned: Mutex::new(None),
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Runs one call in the plugin and reads its result.
    async fn invoke<T: DeserializeOwned>(&self, call: &Call) -> Result<T, ProviderError> {
        let (status, bytes) = self.run_raw(call).await;
        read_outcome(&self.manifest.name, status, &bytes)
    }

    /// Runs one call: the plugin's status and output buffer as they are
    /// (what `cairn plugin-host` forwards). A panic poisons the plugin.
    pub async fn run_raw(&self, call: &Call) -> (i32, Vec<u8>) {
        if let Some(panic) = self.poisoned.lock().ok().and_then(|p| p.clone()) {
            return (
                STATUS_POISONED,
                format!(
                    "provider plugin {} is disabled after it panicked ({panic}); restart Cairn to load it again",
                    self.manifest.name
                )
                .into_bytes(),
            );
        }
        let msg = match serde_json::to_vec(call) {
            Ok(m) => m,
            Err(e) => {
                return (
                    STATUS_POISONED,
                    format!("cannot encode the call: {e}").into_bytes(),
                )
            }
        };
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.state.waiting.lock() {
            w.insert(id, tx);
        }
        let mut guard = InFlight {
            provider: self,
            call: id,
            done: false,
        };
        // SAFETY: msg lives across the call; call is the plugin's function.
        let started = unsafe { (self.state.decl.0.call)(id, msg.as_ptr(), msg.len()) };
        if started != STATUS_OK {
            // A refused start is normally delivered through complete too;
            // if it was not, nothing will come.
            let undelivered = self
                .state
                .waiting
                .lock()
                .ok()
                .and_then(|mut w| w.remove(&id))
                .is_some();
            if undelivered {
                guard.done = true;
                return (started, b"the plugin refused the call".to_vec());
            }
        }
        let outcome = rx.await;
        guard.done = true;
        let (status, bytes) = outcome.unwrap_or_else(|_| {
            (
                STATUS_POISONED,
                b"the plugin dropped the call without an outcome".to_vec(),
            )
        });
        if status == STATUS_PANIC {
            if let Ok(mut p) = self.poisoned.lock() {
                *p = Some(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
        (status, bytes)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A call that never reached the plugin (poisoned, not encodable): the
/// buffer is the reason.
pub const STATUS_POISONED: i32 = 100;

/// A plugin's status and output buffer as a provider result.
pub(crate) fn read_outcome<T: DeserializeOwned>(
    name: &str,
    status: i32,
    bytes: &[u8],
) -> Result<T, ProviderError> {
    match status {
        STATUS_OK => serde_json::from_slice(bytes).map_err(|e| {
            ProviderError::internal(format!(
                "provider plugin {name} returned a result that cannot be read: {e}"
            ))
        }),
        STATUS_ERROR => Err(serde_json::from_slice(bytes).unwrap_or_else(|e| {
            ProviderError::internal(format!(
                "provider plugin {name} returned an error that cannot be read: {e}"
            ))
        })),
        STATUS_PANIC => Err(ProviderError::internal(format!(
            "provider plugin {name} panicked: {}",
            String::from_utf8_lossy(bytes)
        ))),
        STATUS_CANCELLED => Err(ProviderError::new(
            ErrorKind::Timeout,
            "the call was cancelled",
        )),
        STATUS_POISONED => Err(ProviderError::internal(
            String::from_utf8_lossy(bytes).into_owned(),
        )),
        _ => Err(ProviderError::internal(format!(
            "provider plugin {name} refused the call: {}",
            String::from_utf8_lossy(bytes)
        ))),
    }
}

provider_over_calls!(DylibProvider);
