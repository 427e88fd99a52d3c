//! Process isolation: a plugin loaded in a child `cairn plugin-host <path>`
//! and spoken to over its stdin/stdout, so a plugin that aborts or segfaults
//! kills only its host.
//!
//! Frames are a 4-byte big-endian length and a JSON document. The child
//! first sends a [`Hello`] (its protocol and the plugin's manifest, or why it
//! could not load); then the engine sends [`Request`]s and the child answers
//! each with a [`Response`] carrying the same id. When the child dies, the
//! calls in flight fail with its exit status, and the next call starts a new
//! child.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn_sdk::plugin::{Call, Manifest, PROTOCOL_MAX, STATUS_PANIC};
use cairn_sdk::ProviderError;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::{read_outcome, PluginError};

/// Set in the child's environment: `cairn plugin-host` run by hand says
/// what it is for instead of waiting on stdin.
pub const MAGIC_COOKIE_ENV: &str = "CAIRN_PLUGIN_MAGIC_COOKIE";
pub const MAGIC_COOKIE: &str = "b7e1a3c0-cairn-provider-plugin";
/// How long a plugin host may take to load its plugin and say hello.
const HELLO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The largest frame either side accepts.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// The child's first frame.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Hello {
    pub protocol: u32,
    #[serde(default)]
    pub manifest: Option<Manifest>,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Request {
    pub id: u64,
    #[serde(default)]
    pub call: Option<Call>,
    /// Cancel call `id` instead.
    #[serde(default)]
    pub cancel: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Response {
    pub id: u64,
    pub status: i32,
    /// The plugin's output buffer as text (JSON for results and errors).
    pub body: String,
}

pub fn write_frame(w: &mut impl Write, value: &impl Serialize) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(bytes.len()).map_err(std::io::Error::other)?;
    w.write_all(&len.to_be_bytes())?;
    w.write_all(&bytes)?;
    w.flush()
}

/// The next frame, or `None` at end of stream.
pub fn read_frame<T: serde::de::DeserializeOwned>(r: &mut impl Read) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!(
            "a frame of {len} bytes is too large"
        )));
    }
    let mut bytes = vec![0u8; len];
    r.read_exact(&mut bytes)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(std::io::Error::other)
}

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<(i32, Vec<u8>)>>>>;

/// One running child.
struct Host {
    stdin: Mutex<ChildStdin>,
    waiting: Waiting,
    /// Set by the reader when the child's stdout closes.
    dead: Arc<Mutex<Option<String>>>,
    child: Arc<Mutex<Child>>,
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A provider served by a plugin in a child process.
pub struct ProcessProvider {
    exe: PathBuf,
    path: PathBuf,
    sha256: Option<String>,
    manifest: Manifest,
    host: Mutex<Option<Arc<Host>>>,
    restarting: tokio::sync::Mutex<()>,
    next_call: AtomicU64,
}

/// Starts `exe plugin-host path` and reads its hello.
fn spawn(exe: &Path, path: &Path, sha256: Option<&str>) -> Result<(Host, Manifest), PluginError> {
    let fail = |reason: String| PluginError {
        path: path.to_path_buf(),
        reason,
    };
    let mut cmd = Command::new(exe);
    cmd.arg("plugin-host").arg(path);
    if let Some(pin) = sha256 {
        cmd.args(["--sha256", pin]);
    }
    let mut child = cmd
        .env(MAGIC_COOKIE_ENV, MAGIC_COOKIE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            fail(format!(
                "cannot start the plugin host {}: {e}",
                exe.display()
            ))
        })?;
    let (Some(stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err(fail("the plugin host has no stdin/stdout".into()));
    };
    // The hello is read on a thread so that a plugin whose start hangs
    // cannot hang Cairn: no hello in time and the host is killed.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let hello = read_frame::<Hello>(&mut stdout);
        let _ = tx.send((hello, stdout));
    });
    let (hello, mut stdout) = match rx.recv_timeout(HELLO_TIMEOUT) {
        Ok(got) => got,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!(
                "the plugin host sent no hello within {} s (the plugin's start hangs)",
                HELLO_TIMEOUT.as_secs()
            )));
        }
    };
    let hello: Option<Hello> =
        hello.map_err(|e| fail(format!("the plugin host's hello cannot be read: {e}")))?;
    let Some(hello) = hello else {
        let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
        return Err(fail(format!(
            "the plugin host exited before its hello ({status})"
        )));
    };
    if let Some(error) = hello.error {
        let _ = child.kill();
        let _ = child.wait();
        return Err(fail(error));
    }
    if hello.protocol != PROTOCOL_MAX {
        let _ = child.kill();
        return Err(fail(format!(
            "the plugin host speaks protocol {}, this Cairn {PROTOCOL_MAX}",
            hello.protocol
        )));
    }
    let manifest = hello
        .manifest
        .ok_or_else(|| fail("the plugin host's hello has no manifest".into()))?;
    let waiting: Waiting = Arc::new(Mutex::new(HashMap::new()));
    let dead = Arc::new(Mutex::new(None));
    let child = Arc::new(Mutex::new(child));
    // The reader: dispatches responses; at end of stream, fails every call
    // in flight with the child's exit status.
    {
        let (waiting, dead, child) = (waiting.clone(), dead.clone(), child.clone());
        let name = manifest.name.clone();
        std::thread::Builder::new()
            .name(format!("plugin-host-{name}"))
            .spawn(move || {
                while let Ok(Some(r)) = read_frame::<Response>(&mut stdout) {
                    let tx = waiting.lock().ok().and_then(|mut w| w.remove(&r.id));
                    if let Some(tx) = tx {
                        let _ = tx.send((r.status, r.body.into_bytes()));
                    }
                }
                let status = child
                    .lock()
                    .ok()
                    .and_then(|mut c| c.wait().ok())
                    .map(|s| describe_exit(&s))
                    .unwrap_or_else(|| "it stopped".into());
                let reason = format!("the plugin host of {name} died ({status})");
                if let Ok(mut d) = dead.lock() {
                    *d = Some(reason.clone());
                }
                if let Ok(mut w) = waiting.lock() {
                    for (_, tx) in w.drain() {
                        let _ = tx.send((STATUS_HOST_DIED, reason.clone().into_bytes()));
                    }
                }
            })
            .map_err(|e| fail(format!("cannot start the plugin host reader: {e}")))?;
    }
    Ok((
        Host {
            stdin: Mutex::new(stdin),
            waiting,
            dead,
            child,
        },
        manifest,
    ))
}

/// "signal 6 (SIGABRT)", "exit status 3".
fn describe_exit(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match s.signal() {
        Some(6) => "killed by signal 6, SIGABRT: the plugin aborted".into(),
        Some(11) => "killed by signal 11, SIGSEGV: the plugin crashed".into(),
        Some(9) => "killed by signal 9, SIGKILL".into(),
        Some(n) => format!("killed by signal {n}"),
        None => s.to_string(),
    }
}

/// Status of a call failed because the host died (not a plugin status).
const STATUS_HOST_DIED: i32 = 101;

impl ProcessProvider {
    /// Starts a host for the plugin at `path` (`exe` is the `cairn` binary).
    pub fn start(
        exe: &Path,
        path: &Path,
        sha256: Option<&str>,
    ) -> Result<ProcessProvider, PluginError> {
        let (host, manifest) = spawn(exe, path, sha256)?;
        Ok(ProcessProvider {
            exe: exe.to_path_buf(),
            path: path.to_path_buf(),
            sha256: sha256.map(str::to_string),
            manifest,
            host: Mutex::new(Some(Arc::new(host))),
            restarting: tokio::sync::Mutex::new(()),
            next_call: AtomicU64::new(1),
        })
    }

    /// The live host, if there is one.
    fn live_host(&self) -> Option<Arc<Host>> {
        self.host
            .lock()
            .ok()
            .and_then(|h| h.clone())
            .filter(|h| h.dead.lock().map(|d| d.is_none()).unwrap_or(false))
    }

    /// The running host, restarted if the last one died (one restart at a
    /// time: concurrent calls wait for it and share the new host).
    async fn host(&self) -> Result<Arc<Host>, ProviderError> {
        if let Some(h) = self.live_host() {
            return Ok(h);
        }
        let _restarting = self.restarting.lock().await;
        if let Some(h) = self.live_host() {
            return Ok(h);
        }
        let (exe, path, sha) = (self.exe.clone(), self.path.clone(), self.sha256.clone());
        let (host, _) = tokio::task::spawn_blocking(move || spawn(&exe, &path, sha.as_deref()))
            .await
            .map_err(|e| ProviderError::internal(format!("cannot restart the plugin host: {e}")))?
            .map_err(|e| ProviderError::internal(e.to_string()))?;
        let host = Arc::new(host);
        if let Ok(mut h) = self.host.lock() {
            *h = Some(host.clone());
        }
        Ok(host)
    }

    async fn invoke<T: serde::de::DeserializeOwned>(
        &self,
        call: &Call,
    ) -> Result<T, ProviderError> {
        let host = self.host().await?;
        let id = self.next_call.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = host.waiting.lock() {
            w.insert(id, tx);
        }
        let send = {
            let host = host.clone();
            move |req: Request| {
                let host = host.clone();
                let write = move || {
                    host.stdin
                        .lock()
                        .map_err(|_| std::io::Error::other("the plugin host's stdin is unusable"))
                        .and_then(|mut w| write_frame(&mut *w, &req))
                };
                // Outside a runtime (a call dropped at shutdown) there is
                // nothing to hand the write to; the child sees its stdin close.
                tokio::runtime::Handle::try_current()
                    .ok()
                    .map(|h| h.spawn_blocking(write))
            }
        };
        let sent = match send(Request {
            id,
            call: Some(call.clone()),
            cancel: false,
        }) {
            Some(write) => write.await,
            None => Ok(Err(std::io::Error::other("no runtime to send the call on"))),
        };
        if !matches!(sent, Ok(Ok(()))) {
            if let Ok(mut w) = host.waiting.lock() {
                w.remove(&id);
            }
            let dead = host.dead.lock().ok().and_then(|d| d.clone());
            return Err(ProviderError::internal(dead.unwrap_or_else(|| {
                format!(
                    "cannot send the call to the plugin host of {}",
                    self.manifest.name
                )
            })));
        }
        // Dropping this future (the engine cancels the call) cancels it in the child.
        struct CancelOnDrop<F: FnOnce()>(Option<F>);
        impl<F: FnOnce()> Drop for CancelOnDrop<F> {
            fn drop(&mut self) {
                if let Some(f) = self.0.take() {
                    f();
                }
            }
        }
        let mut guard = CancelOnDrop(Some(|| {
            // Sent in the background: the JoinHandle is not awaited.
            drop(send(Request {
                id,
                call: None,
                cancel: true,
            }));
        }));
        let outcome = rx.await;
        guard.0 = None;
        let (status, bytes) = outcome.map_err(|_| {
            ProviderError::internal(format!(
                "the plugin host of {} dropped the call",
                self.manifest.name
            ))
        })?;
        if status == STATUS_HOST_DIED {
            return Err(ProviderError::internal(
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
        if status == STATUS_PANIC {
            // The host ends after reporting a panic: no call may go to it.
            if let Ok(mut d) = host.dead.lock() {
                d.get_or_insert_with(|| "the plugin panicked".into());
            }
        }
        read_outcome(&self.manifest.name, status, &bytes)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
}

provider_over_calls!(ProcessProvider);

/// `cairn plugin-host <path>`: loads the plugin in this process and serves
/// it on stdin/stdout until stdin closes.
pub async fn serve_stdio(path: &Path, sha256: Option<&str>) -> std::io::Result<()> {
    let provider = match super::DylibProvider::load(path, sha256) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            let hello = Hello {
                protocol: PROTOCOL_MAX,
                manifest: None,
                error: Some(e.reason),
            };
            return tokio::task::spawn_blocking(move || {
                write_frame(&mut std::io::stdout().lock(), &hello)
            })
            .await
            .map_err(std::io::Error::other)?;
        }
    };
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let hello = Hello {
        protocol: PROTOCOL_MAX,
        manifest: Some(provider.manifest().clone()),
        error: None,
    };
    {
        let out = out.clone();
        tokio::task::spawn_blocking(move || {
            out.lock()
                .map_err(|_| std::io::Error::other("stdout is unusable"))
                .and_then(|mut o| write_frame(&mut *o, &hello))
        })
        .await
        .map_err(std::io::Error::other)??;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Request>();
    // Requests are read on a thread (blocking stdin), handled on the runtime.
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        while let Ok(Some(req)) = read_frame::<Request>(&mut stdin) {
            if tx.send(req).is_err() {
                break;
            }
        }
    });
    let mut running: HashMap<u64, tokio::task::AbortHandle> = HashMap::new();
    while let Some(req) = rx.recv().await {
        running.retain(|_, h| !h.is_finished());
        if req.cancel {
            if let Some(h) = running.remove(&req.id) {
                h.abort();
            }
            continue;
        }
        let Some(call) = req.call else { continue };
        let (provider, out) = (provider.clone(), out.clone());
        let task = tokio::spawn(async move {
            let (status, body) = provider.run_raw(&call).await;
            let status_copy = status;
            let response = Response {
                id: req.id,
                status,
                body: String::from_utf8_lossy(&body).into_owned(),
            };
            let _ = tokio::task::spawn_blocking(move || {
                out.lock()
                    .map_err(|_| std::io::Error::other("stdout is unusable"))
                    .and_then(|mut o| write_frame(&mut *o, &response))
            })
            .await;
            // A panicked plugin is poisoned: this host ends after reporting
            // it, and the engine starts a fresh one for the next call.
            if status_copy == STATUS_PANIC {
                std::process::exit(70);
            }
        });
        running.insert(req.id, task.abort_handle());
    }
    Ok(())
}
