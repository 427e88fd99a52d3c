//! `cairn-api`: the CloudFormation Query API over HTTP(S), so the aws CLI,
//! boto3 and the other AWS SDKs (with their waiters) drive Cairn unchanged,
//! and the web console. `cairn serve` (the binary) opens the engine, binds
//! the address and serves [`router`].
//!
//! `POST /` (or `GET /?Action=…`): SigV4 checked ([`auth`]), the form read
//! ([`form`]), the action run against the engine ([`actions`]), the answer
//! written as CloudFormation's XML ([`xml`]). Operations run in background
//! tasks, exactly as the CLI runs them, so their state is durable and a
//! restart resumes them. `GET /healthz`, `GET /metrics` (Prometheus text).

#![forbid(unsafe_code)]

mod actions;
mod audit;
mod auth;
mod console;
mod form;
mod metrics;
mod trail;
mod types;
mod xml;

pub use metrics::SpanCounts;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use cairn_core::config::{Config, ServerAuth};
use cairn_core::engine::{Engine, EngineError};
use cairn_core::store::StoreError;

/// A refused request: HTTP status, AWS error code, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn validation(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            code: "ValidationError",
            message: message.into(),
        }
    }

    fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
}

impl From<EngineError> for ApiError {
    /// The codes clients match on (boto3's modeled exceptions, the CLI's
    /// `deploy`), by the kind of the engine's error.
    fn from(e: EngineError) -> ApiError {
        let message = e.to_string();
        match e {
            EngineError::Store(StoreError::StackExists(_))
            | EngineError::Store(StoreError::ChangeSetExists(_)) => {
                ApiError::new(400, "AlreadyExistsException", message)
            }
            EngineError::Store(StoreError::Backend(_) | StoreError::Database(_)) => {
                ApiError::new(500, "InternalFailure", message)
            }
            EngineError::ChangeSetNotFound(m) => ApiError::new(404, "ChangeSetNotFound", m),
            EngineError::InsufficientCapabilities(m) => {
                ApiError::new(400, "InsufficientCapabilitiesException", m)
            }
            EngineError::InvalidChangeSetStatus(m) => {
                ApiError::new(400, "InvalidChangeSetStatus", m)
            }
            _ => ApiError::validation(message),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        ApiError::from(EngineError::from(e))
    }
}

pub struct App {
    pub engine: Arc<Engine>,
    pub config: Config,
    pub metrics: metrics::Metrics,
    /// One permit per operation this engine runs (`[engine] max_operations`).
    pub slots: Arc<tokio::sync::Semaphore>,
    /// Woken when a slot frees, so queued operations are claimed at once.
    pub slot_freed: tokio::sync::Notify,
    /// What the console signs `auth = "none"` CSRF tokens with (the same
    /// on every engine of the state).
    pub open_secret: Vec<u8>,
}

/// The server's routes over `app`: the Query API (`/`), `/healthz`,
/// `/metrics` and the console, each request body at most `[server]
/// max_body_bytes`.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(query).post(query))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_page))
        .merge(console::routes())
        .layer(DefaultBodyLimit::max(app.config.server.max_body_bytes))
        .with_state(app)
}

/// How often an engine looks for operations nobody runs (handed off by a
/// full engine, or left by one whose lease ran out).
const CLAIM_EVERY: Duration = Duration::from_secs(1);

impl App {
    /// The server of `engine`; `state_secret` is the state's shared secret
    /// (`Store::callback_secret`), which the console's `auth = "none"`
    /// CSRF tokens are signed with, so every engine of a state accepts
    /// them.
    pub fn new(
        engine: Arc<Engine>,
        config: Config,
        state_secret: &[u8],
        spans: Option<Arc<SpanCounts>>,
    ) -> Arc<App> {
        Arc::new(App {
            open_secret: console::session::open_secret(state_secret),
            engine,
            slots: Arc::new(tokio::sync::Semaphore::new(
                config.engine.max_operations.max(1),
            )),
            config,
            metrics: metrics::Metrics::with_spans(spans),
            slot_freed: tokio::sync::Notify::new(),
        })
    }

    /// Runs the stack's operation to its end in the background (as the CLI
    /// does after starting it); its state is in the store all along.
    ///
    /// The answer waits until the operation ends or `[server]
    /// answer_within_ms` passes, whichever is first: most operations end in
    /// milliseconds, and an SDK waiter that finds the stack done on its
    /// first poll does not sleep its 30-second delay.
    pub async fn drive(self: &Arc<Self>, stack_id: String, kind: &'static str) {
        self.metrics.operation_started(kind);
        // Full: the operation is recorded; the next engine with room (this
        // one included) claims it.
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            tracing::info!(stack = %stack_id, "at max_operations: handing the operation to the next engine with room");
            if let Err(e) = self.engine.claims().hand_off(&stack_id).await {
                tracing::error!(stack = %stack_id, "cannot hand the operation off: {e}");
            }
            return;
        };
        let running = self.spawn_run(stack_id, Some(kind), permit);
        let wait = Duration::from_millis(self.config.server.answer_within_ms);
        let _ = tokio::time::timeout(wait, running).await;
    }

    /// Runs a stack's operation (started or claimed by this engine) to its
    /// end in the background, holding one of the engine's slots.
    fn spawn_run(
        self: &Arc<Self>,
        stack_id: String,
        kind: Option<&'static str>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> tokio::task::JoinHandle<()> {
        let app = self.clone();
        // Started by a request: its logs carry the request's span too.
        let run = async move {
            let ran = app.engine.run(&stack_id).await;
            drop(permit);
            app.slot_freed.notify_one();
            match ran {
                Ok(status) => {
                    app.metrics
                        .operation_ended(kind.unwrap_or("RESUMED"), status.as_str());
                }
                // Another engine holds it and runs it.
                Err(EngineError::Store(StoreError::Busy { .. })) => {}
                Err(EngineError::Store(StoreError::LeaseLost(_))) => {
                    tracing::warn!("dropped the operation of {stack_id}: another engine took its lease over; this engine's late writes for it were refused");
                }
                Err(e) => tracing::error!(stack = %stack_id, "operation failed: {e}"),
            }
        };
        tokio::spawn(tracing::Instrument::in_current_span(run))
    }

    /// Claims, every [`CLAIM_EVERY`], as many operations nobody runs as this
    /// engine has free slots, and runs them.
    pub async fn claim_forever(self: Arc<Self>) {
        loop {
            let room = self.slots.available_permits();
            match self.engine.claims().claim(room, true).await {
                Ok(ids) => {
                    for id in ids {
                        match self.slots.clone().try_acquire_owned() {
                            Ok(permit) => {
                                tracing::warn!("running the operation of {id} (claimed)");
                                self.spawn_run(id, None, permit);
                            }
                            Err(_) => {
                                let _ = self.engine.claims().hand_off(&id).await;
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!("cannot claim operations: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(CLAIM_EVERY) => {}
                _ = self.slot_freed.notified() => {}
            }
        }
    }
}

/// How often the audit trail is pruned, and how often its exports look
/// for new records.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
const EXPORT_EVERY: Duration = Duration::from_secs(1);

impl App {
    /// Prunes the audit trail (now, then every [`PRUNE_EVERY`]) and exports
    /// its new records to `[audit] export_file` / `export_url`.
    pub async fn keep_audit_forever(self: Arc<Self>) {
        let keeper = cairn_core::engine::audit_trail::AuditKeeper::new(self.engine.clone());
        let mut pruned_at: Option<std::time::Instant> = None;
        loop {
            if pruned_at.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
                match keeper.prune().await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!("pruned {n} audit records older than [audit] keep_days")
                    }
                    Err(e) => tracing::warn!("cannot prune the audit trail: {e}"),
                }
                pruned_at = Some(std::time::Instant::now());
            }
            for round in keeper.export_round().await {
                self.metrics
                    .audit_export(round.kind, round.sent, !round.failed);
            }
            tokio::time::sleep(EXPORT_EVERY).await;
        }
    }
}

async fn metrics_page(State(app): State<Arc<App>>) -> Response {
    let providers = app.engine.registry().provider_statuses();
    let started = std::time::Instant::now();
    let ping = tokio::time::timeout(Duration::from_secs(5), app.engine.store().ping()).await;
    let max_operations = app.config.engine.max_operations.max(1);
    let figures = metrics::EngineFigures {
        leases_held: max_operations - app.slots.available_permits(),
        max_operations,
        store_round_trip: matches!(ping, Ok(Ok(()))).then(|| started.elapsed()),
        counters: app.engine.shared().metrics.clone(),
    };
    (
        [("content-type", "text/plain; version=0.0.4")],
        app.metrics.render(&providers, &figures),
    )
        .into_response()
}

/// `GET /healthz`: `ok` while the server answers, then one line per
/// configured provider. A provider that cannot start does not make the
/// server unhealthy (only its types are unavailable); it is named with the
/// cause.
async fn healthz(State(app): State<Arc<App>>) -> Response {
    // The state store first: without it nothing works (503).
    let started = std::time::Instant::now();
    let store = tokio::time::timeout(Duration::from_secs(5), app.engine.store().ping()).await;
    let (status, mut out) = match store {
        Ok(Ok(())) => (
            StatusCode::OK,
            format!(
                "ok\nengine {}\nstore: reachable ({} ms)\n",
                app.engine.id(),
                started.elapsed().as_millis()
            ),
        ),
        Ok(Err(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "unavailable\nengine {}\nstore: unreachable: {e}\n",
                app.engine.id()
            ),
        ),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "unavailable\nengine {}\nstore: no answer within 5 s\n",
                app.engine.id()
            ),
        ),
    };
    for p in app.engine.registry().provider_statuses() {
        match p.cause {
            Some(cause) => out.push_str(&format!("provider {}: {}: {cause}\n", p.name, p.state)),
            None => out.push_str(&format!("provider {}: {}\n", p.name, p.state)),
        }
    }
    (status, out).into_response()
}

/// A request's answer: authenticated, authorised, then the action; a call
/// that changes something (or was refused trying) is recorded in the
/// audit trail before it is answered.
async fn answer(
    app: &Arc<App>,
    (method, uri, headers): (&Method, &Uri, &HeaderMap),
    body: &Bytes,
    (form, action): (&form::Form, &str),
    (read, peer, request_id): (Result<(), ApiError>, Option<SocketAddr>, &str),
) -> Result<Option<xml::Xml>, ApiError> {
    read?;
    let key = authenticate(app, method, uri, headers, body)?;
    let caller = audit::caller(&app.config.server, key.as_deref(), peer, headers, false);
    let before = audit::stack_before(app, form, action).await;
    let outcome = match authorize(app, key.as_deref(), form, action).await {
        Ok(()) => actions::dispatch(app, form, action).await,
        Err(e) => Err(e),
    };
    let request = audit::Request {
        caller,
        action,
        form,
        request_id,
        before,
    };
    audit::record(app, request, outcome.as_ref().map(|_| ())).await;
    outcome
}

/// The address a request came from (the server's connection info; none
/// when the router is driven without one, as in tests).
pub(crate) struct Peer(pub Option<SocketAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Peer, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<SocketAddr>>()
                .map(|c| c.0),
        ))
    }
}

/// A request's span: every log line written while it is answered names
/// it (JSON logs show its fields), and in a trace it is the SERVER span
/// of the action, the child of the caller's `traceparent` when one came.
fn request_span(action: &str, request_id: &str, headers: &HeaderMap) -> tracing::Span {
    let span = tracing::info_span!(
        "request",
        otel.name = %action,
        otel.kind = "server",
        action = %action,
        request_id = %request_id,
        trace_id = tracing::field::Empty,
    );
    let parent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(cairn_core::engine::trace::parse_traceparent);
    if let Some(parent) = parent {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let cx = opentelemetry::Context::new().with_remote_span_context(parent);
        let _ = span.set_parent(cx);
    }
    cairn_core::engine::trace::record_trace_id(&span);
    span
}

/// One Query API request.
async fn query(
    State(app): State<Arc<App>>,
    Peer(peer): Peer,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let request_id = uuid::Uuid::new_v4().to_string();
    let started = std::time::Instant::now();
    // Read here rather than by an extractor, so that a body over the limit
    // gets the Query API's XML error like any other (SDKs parse it).
    let limit = app.config.server.max_body_bytes;
    let read = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            413,
            "ValidationError",
            format!(
                "The request body is larger than the server accepts ({limit} bytes, [server] max_body_bytes); send a smaller template, or a TemplateURL"
            ),
        )
    });
    let body: Bytes = read.as_ref().cloned().unwrap_or_default();
    // CloudTrail's JSON actions (LookupEvents) on the same endpoint.
    let target = headers.get("x-amz-target").and_then(|t| t.to_str().ok());
    if let Some(action) = target.and_then(|t| t.strip_prefix(trail::TARGET_PREFIX)) {
        let action = action.to_string();
        let span = request_span(&action, &request_id, &headers);
        let outcome = tracing::Instrument::instrument(
            async {
                read?;
                let key = authenticate(&app, &method, &uri, &headers, &body)?;
                trail::dispatch(&app, key.as_deref(), &action, &body).await
            },
            span,
        )
        .await;
        let status = outcome.as_ref().map(|_| 200).unwrap_or_else(|e| e.status);
        app.metrics.request(&action, status, started.elapsed());
        return trail::respond(outcome, &request_id);
    }
    let form = form::Form::parse(&body, uri.query());
    let action = form.get("Action").unwrap_or("").to_string();
    // Every log line written while the request is answered names it
    // (JSON logs show the span's fields).
    let span = request_span(&action, &request_id, &headers);
    let outcome = tracing::Instrument::instrument(
        answer(
            &app,
            (&method, &uri, &headers),
            &body,
            (&form, &action),
            (read.map(|_| ()), peer, &request_id),
        ),
        span,
    )
    .await;
    let (status, text) = match outcome {
        Ok(result) => (200, xml::response(&action, &request_id, result)),
        Err(e) => {
            let kind = if e.status >= 500 {
                "Receiver"
            } else {
                "Sender"
            };
            (e.status, xml::error(kind, e.code, &e.message, &request_id))
        }
    };
    app.metrics.request(&action, status, started.elapsed());
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [
            ("content-type", "text/xml".to_string()),
            ("x-amzn-requestid", request_id),
        ],
        text,
    )
        .into_response()
}

/// The request's access key (`None` with auth off).
fn authenticate(
    app: &App,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Option<String>, ApiError> {
    let server = &app.config.server;
    if server.auth == ServerAuth::None {
        return Ok(None);
    }
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    auth::verify(
        method.as_str(),
        path,
        headers,
        body,
        |key| server.access_keys.get(key).map(|k| k.secret.clone()),
        SystemTime::now(),
        Duration::from_secs(server.max_clock_skew_seconds),
    )
    .map(Some)
    .map_err(|e| ApiError::new(e.status, e.code, e.message))
}

/// A key limited to some stacks may only reach those: by the StackName
/// parameter, and by any change-set ARN in the request (a change set is
/// authorised against the stack it belongs to, whatever StackName says).
async fn authorize(
    app: &App,
    key: Option<&str>,
    form: &form::Form,
    action: &str,
) -> Result<(), ApiError> {
    let Some(key) = key else { return Ok(()) };
    let Some(allowed) = app
        .config
        .server
        .access_keys
        .get(key)
        .and_then(|k| k.stacks.as_ref())
    else {
        return Ok(());
    };
    let named = form.get("StackName");
    let permitted = match named {
        Some(name) => allowed
            .iter()
            .any(|a| a == name || name.contains(&format!(":stack/{a}/"))),
        // Account-wide reads (DescribeStacks without a name, ListStacks, …)
        // are refused to a key limited to some stacks.
        None => false,
    };
    let denied = |resource: &str| {
        ApiError::new(
            403,
            "AccessDenied",
            format!(
                "User: {key} is not authorized to perform: cloudformation:{action} on resource: {resource}"
            ),
        )
    };
    if !permitted {
        return Err(denied(named.unwrap_or("*")));
    }
    // A change set named by its ARN (or id) may belong to another stack.
    if let Some(change_set) = form.get("ChangeSetName").filter(|c| c.starts_with("arn:")) {
        let owner = app
            .engine
            .store()
            .find_change_set("", change_set)
            .await
            .map_err(|e| ApiError::new(500, "InternalFailure", e.to_string()))?;
        if let Some(cs) = owner {
            if !allowed.contains(&cs.stack_name) {
                return Err(denied(change_set));
            }
        }
    }
    Ok(())
}
