//! The callback listener: the HTTP(S) endpoint behind every `ResponseURL`.
//!
//! A ResponseURL is `<base>/cfn-response/<StackId|LogicalResourceId|RequestId>`
//! (percent-encoded, the shape of CloudFormation's S3 keys) with a
//! `Signature` query parameter: an HMAC of the key under a secret this
//! process drew at start, so a URL cannot be guessed or forged. Each URL is
//! bound to one waiting request and used once: the first response settles
//! it; a duplicate (409), a response after the timeout (410), an unknown
//! request (404) or a bad signature (403) changes nothing.
//!
//! The process's listener is reached through [`Callbacks`], a value the
//! binary makes once (in `cairn_core::shared::Shared`) and hands to the webhook
//! transport, the wait condition handles and the engine: no process-global
//! state. With a shared state (every command and server shares the state
//! it opened), the secret is the state's, so any engine on the same database can
//! check a URL another engine minted; a response is kept in the state
//! before it is acted on, and an engine finds the responses that other
//! engines received for the requests it waits for by polling the state
//! every [`SHARED_POLL`]. Behind one load balancer (`[webhooks]
//! public_url`), a handler's PUT may reach any engine, and an engine that
//! takes over a dead one's Create waits for the handler's response instead
//! of failing it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::put;
use axum::Router;
use cairn_sdk::custom_resource::{CustomResourceRequest, CustomResourceResponse};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::sync::oneshot;

use super::handles::SignalError;
use super::response;
use super::WebhookError;
use crate::config::WebhookConfig;
use cairn_store::Store;

/// How often a listener looks in the shared state for responses other
/// engines received for the requests it waits for.
pub const SHARED_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// What a waiting request receives: the checked response, or why the
/// response that came is not acceptable.
pub type Answer = Result<CustomResourceResponse, String>;

/// How a request that no longer waits ended, for the HTTP answer to a late
/// or repeated response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    Answered,
    TimedOut,
}

struct Waiting {
    request: CustomResourceRequest,
    tx: oneshot::Sender<Answer>,
}

/// What to do with the physical id a response names when it comes after
/// its request stopped waiting (a Create's: delete what it made).
pub type OnLate = Box<dyn FnOnce(String) + Send>;

#[derive(Default)]
struct Slots {
    waiting: HashMap<String, Waiting>,
    closed: HashMap<String, Closed>,
    /// For requests still waiting: what a late response's physical id gets.
    on_late: HashMap<String, OnLate>,
    /// Requests that timed out with such a handler, kept for their late
    /// response.
    late: HashMap<String, (CustomResourceRequest, OnLate)>,
}

/// How many ended requests are remembered for precise 409/410 answers; past
/// that (a long-running server) the memory is cleared and a stray response
/// gets 404, which changes nothing either.
const REMEMBERED_CLOSED: usize = 65_536;

impl Slots {
    fn close(&mut self, request_id: &str, how: Closed) {
        if self.closed.len() >= REMEMBERED_CLOSED {
            self.closed.clear();
        }
        if self.late.len() >= REMEMBERED_CLOSED {
            self.late.clear();
        }
        self.closed.insert(request_id.to_string(), how);
        self.on_late.remove(request_id);
    }
}

/// The running listener and the requests waiting for a response.
pub struct CallbackListener {
    secret: Vec<u8>,
    /// The shared state, when the process shares one.
    store: Option<Arc<dyn Store>>,
    /// Whether ResponseURLs name an address other engines also answer
    /// (`[webhooks] public_url`), so a response to a request another engine
    /// sent can come to the state after that engine is gone.
    public: bool,
    base_url: String,
    slots: Mutex<Slots>,
    local_addr: SocketAddr,
    /// The local CA's certificate, when the listener also speaks TLS with a
    /// certificate it signed (`GET /cairn-ca.pem`).
    ca_pem: Option<String>,
}

/// What a ResponseURL key escapes: everything but RFC 3986's unreserved
/// characters (`:`, `/` and `|` of `StackId|Logical|Request` included).
const KEY_ESCAPES: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Where the state keeps that a request was sent: beside the responses,
/// under a key no request id has.
fn sent_key(request_id: &str) -> String {
    format!("{request_id}#sent")
}

/// The `Signature` of a ResponseURL key.
fn url_signature(secret: &[u8], key: &str) -> String {
    cairn_sdk::custom_resource::hmac_hex(secret, key.as_bytes())
}

/// One process's callback listener: the one a server hosts, or one bound
/// to `[webhooks] listen`, started on first use. Custom resources'
/// ResponseURLs and wait condition handles' URLs both point at it.
pub struct Callbacks {
    config: WebhookConfig,
    /// The state every engine of this process shares with the others:
    /// responses go through it, and its secret signs the URLs.
    shared: Option<Arc<dyn Store>>,
    /// A listener whose routes another server serves (`cairn serve` hosts
    /// the callback on its own address); used instead of binding
    /// `[webhooks] listen`.
    hosted: std::sync::OnceLock<Arc<CallbackListener>>,
    /// The listener bound to `[webhooks] listen`, when none is hosted.
    own: tokio::sync::OnceCell<Arc<CallbackListener>>,
}

impl Callbacks {
    /// The callbacks of a process configured with `config`, sharing
    /// responses through `shared` (the state it opened) when given.
    pub fn new(config: &WebhookConfig, shared: Option<Arc<dyn Store>>) -> Callbacks {
        Callbacks {
            config: config.clone(),
            shared,
            hosted: std::sync::OnceLock::new(),
            own: tokio::sync::OnceCell::new(),
        }
    }

    /// Makes the process's callback listener part of a server at `base_url`
    /// (bound at `local_addr`); returns the routes that server must serve.
    /// Call it before the first custom resource is created.
    pub async fn host_on(
        &self,
        base_url: &str,
        public: bool,
        local_addr: SocketAddr,
    ) -> Result<Router, WebhookError> {
        let (secret, store) = self.secret().await?;
        let listener = Arc::new(CallbackListener {
            secret,
            store,
            public,
            base_url: base_url.trim_end_matches('/').to_string(),
            slots: Mutex::new(Slots::default()),
            local_addr,
            // `cairn serve` serves these routes with its own TLS, or none.
            ca_pem: None,
        });
        listener.poll_shared();
        let router = CallbackListener::routes(listener.clone());
        self.hosted.set(listener).map_err(|_| {
            WebhookError::Listener("the callback listener is already hosted".into())
        })?;
        Ok(router)
    }

    /// The hosted listener, if a server hosts one.
    pub fn hosted(&self) -> Option<Arc<CallbackListener>> {
        self.hosted.get().cloned()
    }

    /// The process's callback listener: the hosted one, or one bound to
    /// `[webhooks] listen`, started on first use.
    pub async fn listener(&self) -> Result<Arc<CallbackListener>, WebhookError> {
        if let Some(hosted) = self.hosted() {
            return Ok(hosted);
        }
        self.own
            .get_or_try_init(|| async {
                let (secret, store) = self.secret().await?;
                CallbackListener::start(&self.config, secret, store).await
            })
            .await
            .cloned()
    }

    /// The URL-signing secret: the shared state's, or one drawn for this
    /// process.
    async fn secret(&self) -> Result<(Vec<u8>, Option<Arc<dyn Store>>), WebhookError> {
        if let Some(store) = &self.shared {
            let secret = store.callback_secret().await.map_err(|e| {
                WebhookError::Listener(format!(
                    "cannot read the callback secret from the state: {e}"
                ))
            })?;
            return Ok((secret, Some(store.clone())));
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| {
            WebhookError::Listener(format!("no randomness for the callback secret: {e}"))
        })?;
        Ok((secret.to_vec(), None))
    }
}

/// The names the listener's local certificate is for: loopback, the
/// address it is bound to, and the host of `[webhooks] public_url`.
fn listener_names(local_addr: SocketAddr, public_url: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    if !local_addr.ip().is_unspecified() {
        names.push(local_addr.ip().to_string());
    }
    if let Some(host) = public_url
        .and_then(|u| reqwest::Url::parse(u).ok())
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
    {
        names.push(host);
    }
    names.sort();
    names.dedup();
    names
}

/// Serves `app` on `tcp`, each connection as TLS when its first byte opens
/// a TLS handshake (0x16), else as plain HTTP.
async fn serve_both(tcp: tokio::net::TcpListener, app: Router, tls: tokio_rustls::TlsAcceptor) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    loop {
        let stream = match tcp.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("the custom-resource callback listener could not accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let (app, tls) = (app.clone(), tls.clone());
        tokio::spawn(async move {
            let mut first = [0u8; 1];
            let peeked =
                tokio::time::timeout(std::time::Duration::from_secs(10), stream.peek(&mut first))
                    .await;
            let is_tls = matches!(peeked, Ok(Ok(1))) && first[0] == 0x16;
            let service = TowerToHyperService::new(app);
            let server = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let served = if is_tls {
                match tls.accept(stream).await {
                    Ok(s) => server.serve_connection(TokioIo::new(s), service).await,
                    Err(e) => {
                        tracing::debug!("a TLS handshake on the callback listener failed: {e}");
                        return;
                    }
                }
            } else {
                server.serve_connection(TokioIo::new(stream), service).await
            };
            if let Err(e) = served {
                tracing::debug!("a callback connection ended: {e}");
            }
        });
    }
}

fn unavailable(e: impl std::fmt::Display) -> cairn_model::signal::ListenerUnavailable {
    cairn_model::signal::ListenerUnavailable(e.to_string())
}

/// The engine asks the process's listener whose handle a URL is (the
/// listener signs handle URLs, so only it can tell).
#[async_trait::async_trait]
impl cairn_model::signal::HandleUrls for Callbacks {
    async fn handle_url(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<String, cairn_model::signal::ListenerUnavailable> {
        let listener = self.listener().await.map_err(unavailable)?;
        Ok(listener.handle_url(stack_id, logical_id))
    }

    async fn handle_target(
        &self,
        url: &str,
    ) -> Result<Option<(String, String)>, cairn_model::signal::ListenerUnavailable> {
        let listener = self.listener().await.map_err(unavailable)?;
        Ok(listener.handle_target(url))
    }
}

/// `GET /cairn-ca.pem`: the local CA's certificate, for handlers to trust.
async fn serve_ca(State(listener): State<Arc<CallbackListener>>) -> (StatusCode, String) {
    match &listener.ca_pem {
        Some(pem) => (StatusCode::OK, pem.clone()),
        None => (
            StatusCode::NOT_FOUND,
            "this listener has no local CA: it serves the certificate [webhooks] tls_cert names"
                .into(),
        ),
    }
}

impl CallbackListener {
    fn routes(listener: Arc<CallbackListener>) -> Router {
        Router::new()
            .route("/cfn-response/{key}", put(receive).post(receive))
            .route(
                "/cfn-signal/{key}",
                put(receive_signal).post(receive_signal),
            )
            .route("/cairn-ca.pem", axum::routing::get(serve_ca))
            .with_state(listener)
    }

    /// Binds the listener (`[webhooks] listen`) and serves it in the
    /// background for as long as the process runs.
    /// The URLs are signed with `secret`; responses are kept in `store`
    /// when the process shares one.
    async fn start(
        config: &WebhookConfig,
        secret: Vec<u8>,
        store: Option<Arc<dyn Store>>,
    ) -> Result<Arc<CallbackListener>, WebhookError> {
        let tcp = std::net::TcpListener::bind(&config.listen).map_err(|e| {
            WebhookError::Listener(format!(
                "cannot listen for custom-resource responses on {} ([webhooks] listen): {e}",
                config.listen
            ))
        })?;
        tcp.set_nonblocking(true).map_err(|e| {
            WebhookError::Listener(format!("cannot set up the callback socket: {e}"))
        })?;
        let local_addr = tcp.local_addr().map_err(|e| {
            WebhookError::Listener(format!("cannot read the callback address: {e}"))
        })?;
        let tls = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => Some(super::tls::server_config(cert, key).await?),
            (None, None) => None,
            _ => {
                return Err(WebhookError::Listener(
                    "[webhooks] needs both tls_cert and tls_key, or neither".into(),
                ))
            }
        };
        // Without a configured certificate the listener speaks both plain
        // HTTP (the ResponseURLs say http://) and TLS with a certificate
        // from the local CA, for handlers that answer over HTTPS only.
        let local = match (&tls, &config.local_ca_dir) {
            (None, Some(dir)) => Some(super::local_ca::server_config(
                dir,
                &listener_names(local_addr, config.public_url.as_deref()),
            )?),
            _ => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let base_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{local_addr}"))
            .trim_end_matches('/')
            .to_string();
        let listener = Arc::new(CallbackListener {
            secret,
            store,
            public: config.public_url.is_some(),
            base_url,
            slots: Mutex::new(Slots::default()),
            local_addr,
            ca_pem: local.as_ref().map(|(pem, _)| pem.clone()),
        });
        listener.poll_shared();
        let app = Self::routes(listener.clone());
        match tls {
            Some(tls) => {
                let server = axum_server::from_tcp_rustls(tcp, tls).map_err(|e| {
                    WebhookError::Listener(format!("cannot serve HTTPS on {local_addr}: {e}"))
                })?;
                tokio::spawn(async move {
                    if let Err(e) = server.serve(app.into_make_service()).await {
                        tracing::error!("the custom-resource callback listener stopped: {e}");
                    }
                });
            }
            None => {
                let tcp = tokio::net::TcpListener::from_std(tcp).map_err(|e| {
                    WebhookError::Listener(format!("cannot serve on {local_addr}: {e}"))
                })?;
                match local {
                    Some((_, tls)) => {
                        tokio::spawn(serve_both(tcp, app, tokio_rustls::TlsAcceptor::from(tls)));
                    }
                    None => {
                        tokio::spawn(async move {
                            if let Err(e) = axum::serve(tcp, app).await {
                                tracing::error!(
                                    "the custom-resource callback listener stopped: {e}"
                                );
                            }
                        });
                    }
                }
            }
        }
        tracing::debug!(address = %local_addr, base = %listener.base_url, "custom-resource callback listener started");
        Ok(listener)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Whether a response to a request that another engine sent can still
    /// come to this one (through the shared state, at a shared address).
    pub fn answers_for_other_engines(&self) -> bool {
        self.store.is_some() && self.public
    }

    /// Delivers to the requests waiting here the responses other engines
    /// kept for them, every [`SHARED_POLL`], for as long as the process runs.
    fn poll_shared(self: &Arc<Self>) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let listener = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SHARED_POLL).await;
                let Some(listener) = listener.upgrade() else {
                    return;
                };
                let ids: Vec<String> = match listener.slots.lock() {
                    Ok(s) => s.waiting.keys().cloned().collect(),
                    Err(_) => return,
                };
                if ids.is_empty() {
                    continue;
                }
                match store.callback_responses(&ids).await {
                    Ok(found) => {
                        for (id, body) in found {
                            if let Ok(waiting) = listener.take(&id) {
                                let _ = waiting.tx.send(response::check(&waiting.request, &body));
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!("cannot read custom-resource responses from the state: {e}")
                    }
                }
            }
        });
    }

    /// Records in the shared state that `request_id` goes out now (its
    /// POST is about to start): an engine that takes the operation over
    /// then knows whether a request the stopped engine recorded ever left
    /// it ([`CallbackListener::never_sent`]). Without a shared state there
    /// is nothing to record. Kept beside the responses, under a key no
    /// response has.
    pub(crate) async fn note_sending(&self, request_id: &str) -> Result<(), String> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        store
            .put_callback_response(&sent_key(request_id), b"sent")
            .await
            .map(|_| ())
            .map_err(|e| {
                format!("cannot record in the state that request {request_id} is sent: {e}")
            })
    }

    /// Whether `request_id` certainly never left the engine that recorded
    /// it: the state holds neither that it was sent nor a response. False
    /// when that cannot be known (no shared state, the state cannot be
    /// read).
    pub async fn never_sent(&self, request_id: &str) -> bool {
        let Some(store) = &self.store else {
            return false;
        };
        store
            .callback_responses(&[sent_key(request_id), request_id.to_string()])
            .await
            .is_ok_and(|found| found.is_empty())
    }

    /// A kept response to `request_id`, if any engine received one.
    pub async fn kept_response(&self, request_id: &str) -> Option<Vec<u8>> {
        let store = self.store.as_ref()?;
        let found = store
            .callback_responses(&[request_id.to_string()])
            .await
            .ok()?;
        found.into_iter().next().map(|(_, body)| body)
    }

    /// How the request ended here, if it did.
    fn closed_here(&self, request_id: &str) -> Option<Closed> {
        self.slots.lock().ok()?.closed.get(request_id).copied()
    }

    fn waits_here(&self, request_id: &str) -> bool {
        self.slots
            .lock()
            .map(|s| s.waiting.contains_key(request_id))
            .unwrap_or(false)
    }

    /// The ResponseURL for a request.
    pub fn response_url(&self, stack_id: &str, logical_id: &str, request_id: &str) -> String {
        let key = format!("{stack_id}|{logical_id}|{request_id}");
        format!(
            "{}/cfn-response/{}?Signature={}",
            self.base_url,
            utf8_percent_encode(&key, KEY_ESCAPES),
            url_signature(&self.secret, &key)
        )
    }

    /// Whether a URL's `Signature` is this state's for `key`
    /// (constant-time: the signature is the URL's only secret).
    fn signed(&self, key: &str, query: &HashMap<String, String>) -> bool {
        let expected = url_signature(&self.secret, key);
        let given = query.get("Signature").map(String::as_str).unwrap_or("");
        constant_time_eq(given.as_bytes(), expected.as_bytes())
    }

    /// The URL of a wait condition handle: `<base>/cfn-signal/<StackId|Logical>`
    /// signed like a ResponseURL, so only this state's engines mint one.
    pub fn handle_url(&self, stack_id: &str, logical_id: &str) -> String {
        let key = format!("{stack_id}|{logical_id}");
        format!(
            "{}/cfn-signal/{}?Signature={}",
            self.base_url,
            utf8_percent_encode(&key, KEY_ESCAPES),
            url_signature(&self.secret, &key)
        )
    }

    /// The stack id and logical id of the handle a URL (from
    /// [`CallbackListener::handle_url`]) names, when its signature holds.
    pub fn handle_target(&self, url: &str) -> Option<(String, String)> {
        let rest = url.split_once("/cfn-signal/")?.1;
        let (key, query) = rest.split_once('?')?;
        let key = percent_encoding::percent_decode_str(key)
            .decode_utf8()
            .ok()?
            .into_owned();
        let signature = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("Signature="))?;
        let expected = url_signature(&self.secret, &key);
        if !constant_time_eq(signature.as_bytes(), expected.as_bytes()) {
            return None;
        }
        let (stack, logical) = key.rsplit_once('|')?;
        Some((stack.to_string(), logical.to_string()))
    }

    /// Waits for the response to `request` (whose `response_url` came from
    /// [`CallbackListener::response_url`]). A request id waited for again
    /// (a re-delivery) replaces the earlier wait.
    pub fn expect(&self, request: CustomResourceRequest) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut s) = self.slots.lock() {
            s.closed.remove(&request.request_id);
            s.waiting
                .insert(request.request_id.clone(), Waiting { request, tx });
        }
        rx
    }

    /// [`CallbackListener::expect`], and should the request time out, a
    /// late SUCCESS response's physical id is handed to `on_late` (a Create:
    /// what the handler made after all is deleted, not leaked).
    pub fn expect_with_late(
        &self,
        request: CustomResourceRequest,
        on_late: OnLate,
    ) -> oneshot::Receiver<Answer> {
        let id = request.request_id.clone();
        let rx = self.expect(request);
        if let Ok(mut s) = self.slots.lock() {
            s.on_late.insert(id, on_late);
        }
        rx
    }

    /// Stops waiting for `request_id`: a later response gets 410 Gone.
    pub fn expire(&self, request_id: &str) {
        if let Ok(mut s) = self.slots.lock() {
            if let Some(w) = s.waiting.remove(request_id) {
                let on_late = s.on_late.remove(request_id);
                s.close(request_id, Closed::TimedOut);
                if let Some(on_late) = on_late {
                    s.late.insert(request_id.to_string(), (w.request, on_late));
                }
            }
        }
    }

    /// The late-response handler of a timed-out request, taken once.
    fn take_late(&self, request_id: &str) -> Option<(CustomResourceRequest, OnLate)> {
        self.slots.lock().ok()?.late.remove(request_id)
    }

    /// Settles `request_id` with a response that came another way (the
    /// handler answered the POST itself). False when a response already
    /// came to the URL: that one counts.
    pub fn settle(&self, request_id: &str) -> bool {
        match self.slots.lock() {
            Ok(mut s) => {
                let was_waiting = s.waiting.remove(request_id).is_some();
                if was_waiting {
                    s.close(request_id, Closed::Answered);
                }
                was_waiting
            }
            Err(_) => false,
        }
    }

    /// Takes the waiting request a response is for, if any.
    fn take(&self, request_id: &str) -> Result<Waiting, (StatusCode, String)> {
        let mut s = self.slots.lock().map_err(|_| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the callback listener is unusable".to_string(),
            )
        })?;
        if let Some(w) = s.waiting.remove(request_id) {
            s.close(request_id, Closed::Answered);
            return Ok(w);
        }
        Err(match s.closed.get(request_id) {
            Some(Closed::Answered) => (
                StatusCode::CONFLICT,
                format!("request {request_id} was already answered; only the first response counts"),
            ),
            Some(Closed::TimedOut) => (
                StatusCode::GONE,
                format!("request {request_id} timed out before this response came; the resource has already failed"),
            ),
            None => (
                StatusCode::NOT_FOUND,
                format!("no request {request_id} is waiting for a response here"),
            ),
        })
    }
}

/// `PUT /cfn-response/{key}?Signature=…`: a handler's response.
async fn receive(
    State(listener): State<Arc<CallbackListener>>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> (StatusCode, String) {
    if !listener.signed(&key, &query) {
        return (
            StatusCode::FORBIDDEN,
            "the Signature of this response URL is not valid; send the response to the ResponseURL of the request unchanged".into(),
        );
    }
    let Some(request_id) = key.rsplit('|').next().filter(|id| !id.is_empty()) else {
        return (StatusCode::NOT_FOUND, "not a response URL".into());
    };
    // With a shared state the response is kept there first (durable before
    // it is acted on; the first one kept counts), unless this engine knows
    // the request already ended.
    let mut kept = false;
    if let Some(store) = &listener.store {
        if listener.closed_here(request_id).is_none() {
            match store.put_callback_response(request_id, &body).await {
                Ok(true) => kept = true,
                Ok(false) => {
                    return (
                        StatusCode::CONFLICT,
                        format!(
                        "request {request_id} was already answered; only the first response counts"
                    ),
                    )
                }
                // The state cannot be reached now. A handler PUTs once
                // (cfnresponse): refused, the response would be lost. It is
                // accepted, handed to the request waiting here, and written
                // to the state as soon as it answers, for whichever engine
                // resumes the operation.
                Err(e) => {
                    tracing::warn!(request = %request_id, "the state cannot keep a handler's response now ({e}); holding it and retrying");
                    tokio::spawn(keep_when_reachable(
                        store.clone(),
                        request_id.to_string(),
                        body.clone(),
                    ));
                    kept = true;
                }
            }
            if !listener.waits_here(request_id) {
                // Another engine waits for it (or will, after a takeover):
                // it finds the response in the state.
                return (StatusCode::OK, String::new());
            }
        }
    }
    let waiting = match listener.take(request_id) {
        Ok(w) => w,
        // Kept above, and the poll of the state delivered it meanwhile.
        Err((StatusCode::CONFLICT, _)) if kept => return (StatusCode::OK, String::new()),
        Err((StatusCode::GONE, message)) => {
            // Too late for the resource, not for what it made.
            if let Some((request, on_late)) = listener.take_late(request_id) {
                if let Ok(r) = response::check(&request, &body) {
                    if r.status == cairn_sdk::custom_resource::ResponseStatus::Success
                        && !r.physical_resource_id.is_empty()
                    {
                        let physical = r.physical_resource_id.clone();
                        tracing::warn!(request = %request_id, %physical, "a custom resource answered its Create after the timeout; deleting what it made");
                        on_late(physical.clone());
                        return (
                            StatusCode::GONE,
                            format!("{message}; Cairn deletes the resource this response names ({physical})"),
                        );
                    }
                }
            }
            return (StatusCode::GONE, message);
        }
        Err(refused) => return refused,
    };
    let answer = response::check(&waiting.request, &body);
    let reply = match &answer {
        Ok(_) => (StatusCode::OK, String::new()),
        Err(reason) => (StatusCode::BAD_REQUEST, reason.clone()),
    };
    let _ = waiting.tx.send(answer);
    reply
}

/// Writes a response the state refused into it once it answers again
/// (retried for as long as a request may wait: an hour).
async fn keep_when_reachable(store: Arc<dyn Store>, request_id: String, body: Bytes) {
    use backon::{ExponentialBuilder, Retryable};
    let attempt = || {
        let (store, request_id, body) = (store.clone(), request_id.clone(), body.clone());
        async move { store.put_callback_response(&request_id, &body).await }
    };
    let kept = attempt
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(std::time::Duration::from_millis(200))
                .with_max_delay(std::time::Duration::from_secs(5))
                .with_jitter()
                .without_max_times()
                .with_total_delay(Some(std::time::Duration::from_secs(3600))),
        )
        .sleep(tokio::time::sleep)
        .await;
    match kept {
        Ok(_) => {
            tracing::info!(request = %request_id, "kept the handler's response that came while the state was unreachable")
        }
        Err(e) => {
            tracing::error!(request = %request_id, "the handler's response that came while the state was unreachable could not be kept within an hour: {e}")
        }
    }
}

/// `PUT /cfn-signal/{key}?Signature=…`: a signal to a wait condition handle
/// (what `cfn-signal` and `curl` send). It is kept in the state before it is
/// acknowledged; the engine waiting on the handle counts it from there.
async fn receive_signal(
    State(listener): State<Arc<CallbackListener>>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> (StatusCode, String) {
    if !listener.signed(&key, &query) {
        return (
            StatusCode::FORBIDDEN,
            "the Signature of this wait condition handle URL is not valid; use the handle's URL (its Ref) unchanged".into(),
        );
    }
    let Some((stack_id, logical_id)) = key.rsplit_once('|') else {
        return (
            StatusCode::NOT_FOUND,
            "not a wait condition handle URL".into(),
        );
    };
    let Some(store) = &listener.store else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "this listener has no state to keep signals in".into(),
        );
    };
    match super::handles::accept_handle_signal(store.as_ref(), stack_id, logical_id, &body).await {
        Ok(()) => (StatusCode::OK, String::new()),
        Err(e @ SignalError::NotFound(_)) => (StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ SignalError::Invalid(_)) => (StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ SignalError::Store(_)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the signal cannot be kept now ({e}); send it again"),
        ),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_store::crash::CrashStore;
    use cairn_store::memory::MemoryStore;

    /// Finding 8 of the resource-call protocol issue: a handler's response
    /// that came while the database was down was refused with 503 ("send it
    /// again"), and a cfnresponse handler PUTs once, so it was lost. Now it
    /// is accepted, handed to the request waiting here, and kept in the
    /// state once the database answers again.
    #[tokio::test]
    async fn a_response_that_comes_while_the_state_is_down_is_kept_when_it_is_back() {
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let store = CrashStore::new(base.clone(), None);
        store.set_down(true);
        let listener = Arc::new(CallbackListener {
            secret: b"secret".to_vec(),
            store: Some(store.clone()),
            public: true,
            base_url: "http://127.0.0.1:9".into(),
            slots: Mutex::new(Slots::default()),
            local_addr: SocketAddr::from(([127, 0, 0, 1], 9)),
            ca_pem: None,
        });
        let request = CustomResourceRequest {
            request_type: cairn_sdk::custom_resource::RequestType::Create,
            service_token: "http://127.0.0.1:9".into(),
            response_url: listener.response_url("stack", "R", "req-1"),
            stack_id: "stack".into(),
            request_id: "req-1".into(),
            resource_type: "Custom::Thing".into(),
            logical_resource_id: "R".into(),
            physical_resource_id: None,
            resource_properties: Default::default(),
            old_resource_properties: None,
            desired_resource_tags: Default::default(),
            previous_resource_tags: Default::default(),
            system_tags: Default::default(),
            type_configuration: None,
        };
        let answer = listener.expect(request);
        let key = "stack|R|req-1";
        let query = HashMap::from([("Signature".to_string(), url_signature(b"secret", key))]);
        let body = Bytes::from_static(
            br#"{"Status":"SUCCESS","PhysicalResourceId":"thing-1","StackId":"stack","RequestId":"req-1","LogicalResourceId":"R"}"#,
        );
        let (code, text) = receive(
            State(listener.clone()),
            Path(key.into()),
            Query(query),
            body,
        )
        .await;
        assert_eq!((code, text.as_str()), (StatusCode::OK, ""));
        let got = answer.await.expect("answered").expect("a valid response");
        assert_eq!(got.physical_resource_id, "thing-1");
        let kept = || async {
            base.callback_responses(&["req-1".into()])
                .await
                .expect("read")
        };
        assert!(kept().await.is_empty());
        store.set_down(false);
        let started = std::time::Instant::now();
        while kept().await.is_empty() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the response was never kept"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}
