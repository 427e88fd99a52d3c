//! `cairn-webhook`: custom resources served by webhook handlers,
//! CloudFormation's custom-resource protocol over HTTP.
//!
//! A transport: it knows the SDK's contract, the stack model's signal
//! records and the store (responses and signals are kept in the state
//! before they are acknowledged), never the engine. What it reports to the
//! engine reaches it through values passed in: the process's
//! [`callback::Callbacks`] and a [`DeliveryCounter`].
//!
//! `AWS::CloudFormation::CustomResource` and every `Custom::<Name>` go to
//! [`WebhookProvider`]. Each call POSTs CloudFormation's request event
//! (properties stringified) to the handler the resource's `ServiceToken`
//! names, then waits, up to `ServiceTimeout`, for the response: PUT to the
//! request's `ResponseURL` ([`callback`]) or returned from the POST itself.
//! Replacement is the handler's to decide (a new PhysicalResourceId in an
//! Update response); the engine then deletes the old id during cleanup, as
//! for any provider.

#![forbid(unsafe_code)]

pub mod callback;
pub mod config;
mod delivery;
pub mod handles;
pub(crate) mod local_ca;
pub mod remote;
pub(crate) mod response;
pub mod tls;

pub use delivery::DeliveryCounter;

/// POSTs `body` (signed with `secret` as every Cairn request to a handler)
/// to `url` until it is answered with a 2xx or `timeout` passes, retrying
/// an unreachable or failing handler with backoff: the answer's body. For
/// what is not a resource's request (a macro).
pub async fn post_signed(
    url: &str,
    secret: Option<&[u8]>,
    body: Vec<u8>,
    timeout: std::time::Duration,
    metrics: &dyn DeliveryCounter,
) -> Result<Vec<u8>, DeliveryError> {
    let client = tls::client(None, url).map_err(|e| DeliveryError(e.to_string()))?;
    let deadline = tokio::time::Instant::now() + timeout;
    delivery::deliver(&client, url, secret, body.into(), deadline, metrics)
        .await
        .map(|b| b.to_vec())
        .map_err(DeliveryError)
}

/// A signed POST no handler accepted before its deadline: the last
/// attempt's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeliveryError(pub String);

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use cairn_sdk::custom_resource::{
    stringify_map, CustomResourceRequest, CustomResourceResponse, RequestType, ResponseStatus,
};
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ErrorKind,
    PropertySchema, ProviderError, ReadRequest, ReadResult, RequestContext, ResourceProvider,
    ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};
use tokio::sync::{OnceCell, Semaphore};
use tokio::time::Instant;

use crate::config::{EndpointConfig, WebhookConfig};
use callback::{CallbackListener, Callbacks};

/// The type every custom resource may be declared as.
pub const CUSTOM_RESOURCE_TYPE: &str = "AWS::CloudFormation::CustomResource";
/// The prefix of `Custom::<Name>` types.
pub const CUSTOM_TYPE_PREFIX: &str = "Custom::";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Listener(String),
}

/// The schema of a custom resource type: a required `ServiceToken`, an
/// optional `ServiceTimeout`, anything else passed to the handler as is.
pub fn custom_schema(type_name: &str) -> ResourceSchema {
    ResourceSchema::new(type_name)
        .describe("A CloudFormation custom resource, served by the webhook handler its ServiceToken names")
        .property(
            "ServiceToken",
            PropertySchema::string()
                .required()
                .refusing_updates("Modifying service token is not allowed.")
                .describe("An http(s):// URL, the name of a [webhooks.endpoints] entry, or a service token (e.g. a Lambda ARN) one of them lists"),
        )
        .property(
            "ServiceTimeout",
            PropertySchema::json().describe("Seconds to wait for the handler's response, 1 to 3600"),
        )
        .allow_additional_properties()
        .ref_returns("the PhysicalResourceId the handler returned")
}

/// Where one resource's requests go.
struct Target {
    url: String,
    /// The endpoint answers CheckDrift.
    drift: bool,
    /// The endpoint answers Read.
    read: bool,
    secret: Option<Vec<u8>>,
    default_timeout: (u64, String),
    client: reqwest::Client,
    slots: Arc<Semaphore>,
}

struct Endpoint {
    name: String,
    config: EndpointConfig,
    client: OnceCell<reqwest::Client>,
    slots: Arc<Semaphore>,
}

/// Serves custom resources by calling webhook handlers.
///
/// CloudFormation sends a custom resource's Create once, and handlers are
/// written for that: a second Create with the same RequestId makes a second
/// resource. So a Create is never sent twice. It runs in a task of its own
/// that keeps its ResponseURL open until the handler answers or the timeout
/// passes, even when the engine stops waiting (a sibling failed and the
/// create was cancelled); whoever later needs its outcome
/// ([`ResourceProvider::recover_create`]: the rollback that deletes it)
/// joins that wait and deletes exactly what the answer names.
pub struct WebhookProvider {
    calls: Arc<Calls>,
    creates: Arc<Mutex<HashMap<String, CreateInFlight>>>,
}

type CreateOutcome = Result<CreateResult, ProviderError>;

/// A Create sent by this process whose outcome nobody has collected yet.
struct CreateInFlight {
    outcome: tokio::sync::watch::Receiver<Option<CreateOutcome>>,
    /// When the answer came (for forgetting uncollected ones).
    ended: Arc<Mutex<Option<Instant>>>,
}

/// How long an outcome nobody collected is kept.
const UNCOLLECTED_KEPT: Duration = Duration::from_secs(3600);

impl WebhookProvider {
    /// Responses come to `callbacks`' listener; deliveries are counted in
    /// `metrics`.
    pub fn new(
        config: &WebhookConfig,
        callbacks: Arc<Callbacks>,
        metrics: Arc<dyn DeliveryCounter>,
    ) -> Result<WebhookProvider, WebhookError> {
        Ok(WebhookProvider {
            calls: Arc::new(Calls::new(config, callbacks, metrics)?),
            creates: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<String, CreateInFlight>> {
        self.creates.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The wait for `req`'s Create: the one under way, else (when `send`) a
    /// new one.
    fn create_wait(
        &self,
        req: &CreateRequest,
        send: bool,
    ) -> Option<tokio::sync::watch::Receiver<Option<CreateOutcome>>> {
        let id = req.context.request_id.clone();
        let mut creates = self.in_flight();
        if let Some(c) = creates.get(&id) {
            return Some(c.outcome.clone());
        }
        if !send {
            return None;
        }
        creates.retain(|_, c| {
            c.ended
                .lock()
                .ok()
                .and_then(|e| *e)
                .is_none_or(|at| at.elapsed() < UNCOLLECTED_KEPT)
        });
        let (tx, rx) = tokio::sync::watch::channel(None);
        let ended = Arc::new(Mutex::new(None));
        creates.insert(
            id,
            CreateInFlight {
                outcome: rx.clone(),
                ended: ended.clone(),
            },
        );
        let calls = self.calls.clone();
        let req = req.clone();
        // In the caller's span: the request's traceparent names it.
        let create = async move {
            let outcome = calls.create(&req).await;
            if let Ok(mut e) = ended.lock() {
                *e = Some(Instant::now());
            }
            let _ = tx.send(Some(outcome));
        };
        tokio::spawn(tracing::Instrument::in_current_span(create));
        Some(rx)
    }

    /// Waits for a Create's outcome, and forgets it once collected.
    async fn collect(
        &self,
        id: &str,
        mut wait: tokio::sync::watch::Receiver<Option<CreateOutcome>>,
    ) -> CreateOutcome {
        let outcome = match wait.wait_for(Option::is_some).await {
            Ok(o) => o.clone().unwrap_or_else(|| {
                Err(ProviderError::internal(
                    "the custom-resource call ended without an outcome",
                ))
            }),
            Err(_) => Err(ProviderError::internal(
                "the custom-resource call stopped before its handler answered",
            )),
        };
        self.in_flight().remove(id);
        outcome
    }
}

/// Sends custom-resource requests and waits for their responses.
struct Calls {
    config: WebhookConfig,
    endpoints: Vec<Endpoint>,
    /// The client for URL service tokens no endpoint names.
    default_client: OnceCell<reqwest::Client>,
    /// Per-URL concurrency for those.
    direct_slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// The process's callback listener (started there on first use, or
    /// hosted by a server).
    callbacks: Arc<Callbacks>,
    /// The process's counters.
    metrics: Arc<dyn DeliveryCounter>,
}

impl Calls {
    fn new(
        config: &WebhookConfig,
        callbacks: Arc<Callbacks>,
        metrics: Arc<dyn DeliveryCounter>,
    ) -> Result<Calls, WebhookError> {
        let mut declared: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, e) in &config.endpoints {
            if !(e.url.starts_with("http://") || e.url.starts_with("https://")) {
                return Err(WebhookError::Config(format!(
                    "webhook endpoint {name} needs a url starting with http:// or https://, not {:?}",
                    e.url
                )));
            }
            if e.timeout_seconds.is_some_and(|t| !(1..=3600).contains(&t)) {
                return Err(WebhookError::Config(format!(
                    "timeout_seconds of webhook endpoint {name} must be from 1 to 3600"
                )));
            }
            for t in &e.types {
                if !t.starts_with(CUSTOM_TYPE_PREFIX) {
                    return Err(WebhookError::Config(format!(
                        "webhook endpoint {name} declares type {t}; only Custom::<Name> types can be served by webhooks"
                    )));
                }
                if let Some(other) = declared.insert(t, name) {
                    return Err(WebhookError::Config(format!(
                        "type {t} is declared by webhook endpoints {other} and {name}; keep it in one"
                    )));
                }
            }
        }
        if !(1..=3600).contains(&config.timeout_seconds) {
            return Err(WebhookError::Config(
                "[webhooks] timeout_seconds must be from 1 to 3600".into(),
            ));
        }
        let slots =
            |n: Option<usize>| Arc::new(Semaphore::new(n.unwrap_or(config.max_concurrency).max(1)));
        Ok(Calls {
            endpoints: config
                .endpoints
                .iter()
                .map(|(name, e)| Endpoint {
                    name: name.clone(),
                    config: e.clone(),
                    client: OnceCell::new(),
                    slots: slots(e.max_concurrency),
                })
                .collect(),
            config: config.clone(),
            default_client: OnceCell::new(),
            direct_slots: Mutex::new(HashMap::new()),
            callbacks,
            metrics,
        })
    }

    /// The endpoint a ServiceToken names.
    async fn target(&self, token: &str) -> Result<Target, ProviderError> {
        let is_url = token.starts_with("http://") || token.starts_with("https://");
        let endpoint = self.endpoints.iter().find(|e| {
            e.name == token
                || e.config.service_tokens.iter().any(|t| t == token)
                || (is_url && e.config.url == token)
        });
        if let Some(e) = endpoint {
            let client = e
                .client
                .get_or_try_init(|| async { tls::client(e.config.ca_bundle.as_deref(), &e.name) })
                .await
                .map_err(|err| ProviderError::invalid_request(err.to_string()))?;
            let default_timeout = match e.config.timeout_seconds {
                Some(t) => (t, format!("timeout_seconds of webhook endpoint {}", e.name)),
                None => (
                    self.config.timeout_seconds,
                    "[webhooks] timeout_seconds".into(),
                ),
            };
            return Ok(Target {
                url: e.config.url.clone(),
                drift: e.config.drift,
                read: e.config.read,
                secret: e
                    .config
                    .secret
                    .as_ref()
                    .or(self.config.secret.as_ref())
                    .map(|s| s.as_bytes().to_vec()),
                default_timeout,
                client: client.clone(),
                slots: e.slots.clone(),
            });
        }
        if !is_url {
            return Err(ProviderError::invalid_request(format!(
                "ServiceToken [{token}] is not an http:// or https:// URL, the name of a [webhooks.endpoints] entry, or a service token one of them lists; add it to the service_tokens of the endpoint that serves it in the config file"
            )));
        }
        let client = self
            .default_client
            .get_or_try_init(|| async { tls::client(None, token) })
            .await
            .map_err(|err| ProviderError::invalid_request(err.to_string()))?;
        let slots = match self.direct_slots.lock() {
            Ok(mut m) => m
                .entry(token.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.config.max_concurrency.max(1))))
                .clone(),
            Err(_) => Arc::new(Semaphore::new(self.config.max_concurrency.max(1))),
        };
        Ok(Target {
            url: token.to_string(),
            drift: false,
            read: false,
            secret: self.config.secret.as_ref().map(|s| s.as_bytes().to_vec()),
            default_timeout: (
                self.config.timeout_seconds,
                "[webhooks] timeout_seconds".into(),
            ),
            client: client.clone(),
            slots,
        })
    }

    /// What a Create's late answer gets: a Delete of the physical id it
    /// names, with the Create's properties, sent in the background.
    fn delete_late(self: &Arc<Self>, req: &CreateRequest) -> callback::OnLate {
        let calls = Arc::clone(self);
        let req = req.clone();
        Box::new(move |physical: String| {
            tokio::spawn(async move {
                let mut ctx = req.context.clone();
                ctx.request_id = uuid::Uuid::new_v4().to_string();
                ctx.deadline_unix_ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0)
                    + 3_600_000;
                let deleted = calls
                    .call(
                        &ctx,
                        RequestType::Delete,
                        Some(&physical),
                        &req.properties,
                        None,
                        None,
                    )
                    .await;
                match deleted {
                    Ok(r) if r.status == ResponseStatus::Success => tracing::info!(
                        logical = %ctx.logical_resource_id, %physical,
                        "deleted what a custom resource made after its Create timed out"
                    ),
                    Ok(r) => tracing::error!(
                        logical = %ctx.logical_resource_id, %physical,
                        "the Delete of what a late Create made failed: {}", failed_reason(&r)
                    ),
                    Err(f) => tracing::error!(
                        logical = %ctx.logical_resource_id, %physical,
                        "the Delete of what a late Create made failed: {}", f.into_error()
                    ),
                }
            });
        })
    }

    /// Sends one Create and maps its response. Should the handler answer
    /// after the timeout, what it names is deleted then.
    async fn create(self: &Arc<Self>, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let on_late = self.delete_late(req);
        let answered = self
            .call(
                &req.context,
                RequestType::Create,
                None,
                &req.properties,
                None,
                Some(on_late),
            )
            .await;
        create_outcome(answered, generated_physical_id(&req.context))
    }

    /// The outcome of a Create that an engine which is gone sent (its
    /// ResponseURL signed with the shared state's secret): the response
    /// kept in the state, waited for until the request's timeout when
    /// handlers answer at an address every engine serves (`[webhooks]
    /// public_url`), otherwise only one already kept. `None`: it cannot be
    /// learned.
    async fn recover_create(self: &Arc<Self>, req: &CreateRequest) -> Option<CreateOutcome> {
        let answered = self
            .recover(
                &req.context,
                RequestType::Create,
                None,
                &req.properties,
                None,
                Some(self.delete_late(req)),
            )
            .await?;
        Some(create_outcome(
            answered,
            generated_physical_id(&req.context),
        ))
    }

    /// The response to any request an engine which is gone sent (see
    /// [`Calls::recover_create`]); `None`: it cannot be learned.
    async fn recover(
        &self,
        ctx: &RequestContext,
        request_type: RequestType,
        physical_id: Option<&str>,
        properties: &Map<String, Value>,
        old_properties: Option<&Map<String, Value>>,
        on_late: Option<callback::OnLate>,
    ) -> Option<Result<CustomResourceResponse, Failure>> {
        let p = self
            .prepare(ctx, request_type, physical_id, properties, old_properties)
            .await
            .ok()?;
        // The stopped engine recorded the request but never sent it (it
        // was waiting for a delivery slot): no handler has seen it, so it
        // is sent now, under its own request id.
        if !ctx.remaining().is_zero() && p.listener.never_sent(&ctx.request_id).await {
            tracing::info!(request = %ctx.request_id, logical = %ctx.logical_resource_id, "sending a {request_type:?} the stopped engine recorded but never sent");
            return Some(
                self.call(
                    ctx,
                    request_type,
                    physical_id,
                    properties,
                    old_properties,
                    on_late,
                )
                .await,
            );
        }
        if !p.listener.answers_for_other_engines() {
            let body = p.listener.kept_response(&ctx.request_id).await?;
            return Some(response::check(&p.request, &body).map_err(Failure::Failed));
        }
        tracing::info!(request = %ctx.request_id, logical = %ctx.logical_resource_id, "waiting for the response to a {request_type:?} another engine sent");
        let answer = match on_late {
            Some(on_late) => p.listener.expect_with_late(p.request.clone(), on_late),
            None => p.listener.expect(p.request.clone()),
        };
        Some(p.wait(answer).await)
    }

    /// The request for `ctx` (its ResponseURL from the listener), with its
    /// handler and deadline; nothing is sent.
    async fn prepare(
        &self,
        ctx: &RequestContext,
        request_type: RequestType,
        physical_id: Option<&str>,
        properties: &Map<String, Value>,
        old_properties: Option<&Map<String, Value>>,
    ) -> Result<Prepared, Failure> {
        let token = match properties.get("ServiceToken") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(Failure::before_sending(
                    "The ServiceToken property is required: the URL or endpoint of the custom resource's handler",
                ))
            }
        };
        let target = self.target(&token).await.map_err(Failure::Refused)?;
        let (seconds, source) = match properties.get("ServiceTimeout") {
            None | Some(Value::Null) => target.default_timeout.clone(),
            Some(v) => (
                service_timeout(v).map_err(Failure::before_sending)?,
                "ServiceTimeout".into(),
            ),
        };
        let deadline = deadline(ctx, Duration::from_secs(seconds));
        let listener = self
            .callbacks
            .listener()
            .await
            .map_err(|e| Failure::before_sending(&e.to_string()))?;
        let request = CustomResourceRequest {
            request_type,
            service_token: token,
            response_url: listener.response_url(
                &ctx.stack_id,
                &ctx.logical_resource_id,
                &ctx.request_id,
            ),
            stack_id: ctx.stack_id.clone(),
            request_id: ctx.request_id.clone(),
            resource_type: ctx.resource_type.clone(),
            logical_resource_id: ctx.logical_resource_id.clone(),
            physical_resource_id: physical_id.map(str::to_string),
            resource_properties: stringify_map(properties),
            old_resource_properties: old_properties.map(stringify_map),
            desired_resource_tags: ctx.tags.desired.clone(),
            previous_resource_tags: ctx.tags.previous.clone(),
            system_tags: ctx.tags.system.clone(),
            type_configuration: ctx.provider_settings.clone(),
        };
        Ok(Prepared {
            listener,
            target,
            request,
            deadline,
            seconds,
            source,
        })
    }

    /// Sends one request and waits for its response.
    async fn call(
        &self,
        ctx: &RequestContext,
        request_type: RequestType,
        physical_id: Option<&str>,
        properties: &Map<String, Value>,
        old_properties: Option<&Map<String, Value>>,
        on_late: Option<callback::OnLate>,
    ) -> Result<CustomResourceResponse, Failure> {
        // Nobody waits for the answer any more: sending it could only make
        // a resource no one records.
        if ctx.remaining().is_zero() {
            return Err(Failure::Refused(ProviderError::timeout(format!(
                "the deadline of request {} had passed before it was sent; nothing was sent",
                ctx.request_id
            ))));
        }
        let p = self
            .prepare(ctx, request_type, physical_id, properties, old_properties)
            .await?;
        let (listener, target, request, deadline) =
            (&p.listener, &p.target, &p.request, p.deadline);
        let body =
            Bytes::from(serde_json::to_vec(request).map_err(|e| {
                Failure::before_sending(&format!("cannot encode the request: {e}"))
            })?);
        let answer = match on_late {
            Some(on_late) => listener.expect_with_late(request.clone(), on_late),
            None => listener.expect(request.clone()),
        };
        let delivered = {
            let permit = tokio::time::timeout_at(deadline, target.slots.acquire()).await;
            match permit {
                Ok(Ok(_permit)) => match listener.note_sending(&request.request_id).await {
                    // Not recorded: not sent either, so that an engine that
                    // takes over never sends it a second time.
                    Err(reason) => Err(reason),
                    Ok(()) => {
                        delivery::deliver(&target.client, &target.url, target.secret.as_deref(), body, deadline, self.metrics.as_ref())
                            .await
                    }
                },
                _ => Err(format!(
                    "the custom-resource request could not be delivered to {} before the timeout: the endpoint's max_concurrency requests were all in flight",
                    target.url
                )),
            }
        };
        let reply = match delivered {
            Ok(reply) => reply,
            Err(reason) => {
                listener.expire(&request.request_id);
                return Err(Failure::Failed(reason));
            }
        };
        // Synchronous mode: the handler answered the POST with the response.
        if is_response(&reply) && listener.settle(&request.request_id) {
            return response::check(request, &reply).map_err(Failure::Failed);
        }
        p.wait(answer).await
    }
}

/// A request ready to send or to wait for.
struct Prepared {
    listener: Arc<CallbackListener>,
    target: Target,
    request: CustomResourceRequest,
    deadline: Instant,
    seconds: u64,
    source: String,
}

impl Prepared {
    /// Waits for the response to the request until its deadline.
    async fn wait(
        &self,
        mut answer: tokio::sync::oneshot::Receiver<callback::Answer>,
    ) -> Result<CustomResourceResponse, Failure> {
        let request = &self.request;
        match tokio::time::timeout_at(self.deadline, &mut answer).await {
            Ok(Ok(checked)) => checked.map_err(Failure::Failed),
            Ok(Err(_)) => Err(Failure::Failed("the callback listener stopped".into())),
            Err(_) => {
                self.listener.expire(&request.request_id);
                // A response that came at the last moment still counts.
                match answer.try_recv() {
                    Ok(checked) => checked.map_err(Failure::Failed),
                    Err(_) => Err(Failure::TimedOut(format!(
                        "CloudFormation did not receive a response from your Custom Resource. Please check your logs for requestId [{}]. (No response within {} s, the {}.)",
                        request.request_id, self.seconds, self.source
                    ))),
                }
            }
        }
    }
}

/// A Create's result from its response: a failed Create still leaves a
/// physical id (the handler's, or `fallback_id`), which the rollback's
/// Delete names.
fn create_outcome(
    answered: Result<CustomResourceResponse, Failure>,
    fallback_id: String,
) -> CreateOutcome {
    match answered {
        Ok(r) if r.status == ResponseStatus::Success => Ok(CreateResult {
            physical_resource_id: r.physical_resource_id,
            attributes: r.data,
            no_echo: r.no_echo,
        }),
        Ok(r) => {
            let id = if r.physical_resource_id.is_empty() {
                fallback_id
            } else {
                r.physical_resource_id.clone()
            };
            Err(ProviderError::new(failed_kind(&r), failed_reason(&r)).leaving(id))
        }
        Err(Failure::Refused(e)) => Err(e),
        Err(f) => Err(f.into_error().leaving(fallback_id)),
    }
}

/// An Update's result from its response: a handler that answers with
/// another PhysicalResourceId replaced the resource.
fn update_outcome(
    answered: Result<CustomResourceResponse, Failure>,
    req: &UpdateRequest,
) -> Result<UpdateResult, ProviderError> {
    let r = answered.map_err(Failure::into_error)?;
    let changed_id = (!r.physical_resource_id.is_empty()
        && r.physical_resource_id != req.physical_resource_id)
        .then(|| r.physical_resource_id.clone());
    if r.status == ResponseStatus::Failed {
        let e = ProviderError::new(failed_kind(&r), failed_reason(&r));
        return Err(match changed_id {
            Some(id) => e.leaving(id),
            None => e,
        });
    }
    Ok(UpdateResult {
        physical_resource_id: changed_id,
        attributes: r.data,
        no_echo: r.no_echo,
    })
}

fn delete_outcome(answered: Result<CustomResourceResponse, Failure>) -> Result<(), ProviderError> {
    let r = answered.map_err(Failure::into_error)?;
    match r.status {
        ResponseStatus::Success => Ok(()),
        ResponseStatus::Failed => Err(ProviderError::new(failed_kind(&r), failed_reason(&r))),
    }
}

/// A request sent by a process that stopped before the answer came, whose
/// response was not kept: sending it again could make or change a second
/// resource, so it fails (an internal failure: the outcome is unknown).
fn never_sent_twice(request_type: &str, request_id: &str) -> ProviderError {
    ProviderError::internal(format!(
        "Cairn stopped waiting for the handler's response to {request_type} request {request_id} (the process ended); a custom-resource request is never sent twice"
    ))
}

/// Why a call did not produce a response.
enum Failure {
    /// Nothing was sent: the request itself is wrong.
    Refused(ProviderError),
    /// Sent (or tried), and failed: delivery, an invalid response.
    Failed(String),
    TimedOut(String),
}

impl Failure {
    fn before_sending(reason: &str) -> Failure {
        Failure::Refused(ProviderError::invalid_request(reason))
    }

    fn into_error(self) -> ProviderError {
        match self {
            Failure::Refused(e) => e,
            Failure::Failed(reason) => ProviderError::new(ErrorKind::InternalFailure, reason),
            Failure::TimedOut(reason) => ProviderError::timeout(reason),
        }
    }
}

/// The handler's reply to the POST is a response (synchronous mode) when it
/// is a JSON object with a `Status`.
fn is_response(reply: &[u8]) -> bool {
    serde_json::from_slice::<Map<String, Value>>(reply).is_ok_and(|m| m.contains_key("Status"))
}

/// `ServiceTimeout`: whole seconds from 1 to 3600, as a number or a string.
fn service_timeout(v: &Value) -> Result<u64, &'static str> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    n.filter(|n| (1..=3600).contains(n))
        .ok_or("ServiceTimeout must be a whole number of seconds from 1 to 3600")
}

/// The earlier of `now + wait` and a second before the engine's own
/// deadline for the call (so the timeout reported is this one, with the
/// RequestId, and a Create still names the physical id to delete).
fn deadline(ctx: &RequestContext, wait: Duration) -> Instant {
    let ours = Instant::now() + wait;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let engine_ms = ctx
        .deadline_unix_ms
        .saturating_sub(now_ms)
        .saturating_sub(1000);
    ours.min(Instant::now() + Duration::from_millis(engine_ms))
}

/// The physical id of a Create whose handler named none (it failed, or
/// never answered): stable per request, so a re-delivered request and the
/// rollback's Delete use the same one.
fn generated_physical_id(ctx: &RequestContext) -> String {
    let suffix: String = ctx
        .request_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect::<String>()
        .to_ascii_uppercase();
    format!("{}-{}-{suffix}", ctx.stack_name, ctx.logical_resource_id)
}

/// The kind of a FAILED response's error: its `ErrorCode` (Cairn's
/// extension), else InternalFailure.
fn failed_kind(r: &CustomResourceResponse) -> ErrorKind {
    r.error_code.unwrap_or(ErrorKind::InternalFailure)
}

/// The reason of a FAILED response.
fn failed_reason(r: &CustomResourceResponse) -> String {
    r.reason
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "The custom resource handler reported FAILED without a Reason".into())
}

impl WebhookProvider {
    /// A read of the resource the handler that `properties`' ServiceToken
    /// names serves, when that handler answers reads (a `[[providers]]
    /// kind = "webhook"` entry with `read = true`). A custom resource itself
    /// is never read: CloudFormation does not import custom resources.
    pub(crate) async fn read_at(
        &self,
        req: &ReadRequest,
        properties: &Map<String, Value>,
    ) -> Result<ReadResult, ProviderError> {
        let answer = self
            .ask(
                &req.context,
                RequestType::Read,
                &req.physical_resource_id,
                properties,
                "{\"Outcome\": \"FOUND\", \"Properties\": {...}, \"Attributes\": {...}}",
            )
            .await?;
        Ok(answer.unwrap_or(ReadResult::NotSupported))
    }

    /// One of Cairn's own requests (CheckDrift, Read) to the handler
    /// `properties`' ServiceToken names, its answer read from `Data`
    /// (`shape`: what `Data` must look like, for the error). `None` when no
    /// handler is named or the handler is not configured to answer `kind`.
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        context: &RequestContext,
        kind: RequestType,
        physical_id: &str,
        properties: &Map<String, Value>,
        shape: &str,
    ) -> Result<Option<T>, ProviderError> {
        let Some(Value::String(token)) = properties.get("ServiceToken") else {
            return Ok(None);
        };
        let target = self.calls.target(token).await?;
        let answers = match kind {
            RequestType::CheckDrift => target.drift,
            RequestType::Read => target.read,
            _ => true,
        };
        if !answers {
            return Ok(None);
        }
        let r = self
            .calls
            .call(context, kind, Some(physical_id), properties, None, None)
            .await
            .map_err(Failure::into_error)?;
        if r.status == ResponseStatus::Failed {
            return Err(ProviderError::new(failed_kind(&r), failed_reason(&r)));
        }
        serde_json::from_value(Value::Object(r.data))
            .map(Some)
            .map_err(|e| {
                ProviderError::internal(format!(
                    "the handler's {kind:?} answer cannot be read ({e}); send Data = {shape}"
                ))
            })
    }
}

#[async_trait::async_trait]
impl ResourceProvider for WebhookProvider {
    fn schema(&self) -> Vec<ResourceSchema> {
        let mut schemas = vec![custom_schema(CUSTOM_RESOURCE_TYPE)];
        for e in &self.calls.endpoints {
            for t in &e.config.types {
                let mut s = custom_schema(t);
                for (name, behavior) in &e.config.properties {
                    s = s.property(name, PropertySchema::json().update(*behavior));
                }
                for a in &e.config.attributes {
                    s = s.attribute(a, format!("Data key {a} of the handler's response"));
                }
                schemas.push(s);
            }
        }
        schemas
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        match self.create_wait(req, true) {
            Some(wait) => self.collect(&req.context.request_id, wait).await,
            None => Err(ProviderError::internal(
                "the custom-resource Create was not sent",
            )),
        }
    }

    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        if let Some(wait) = self.create_wait(req, false) {
            return self.collect(&req.context.request_id, wait).await;
        }
        if let Some(outcome) = self.calls.recover_create(req).await {
            return outcome;
        }
        // Sent by a process that stopped before the answer came: the handler
        // may have made something, and sending the Create again would make a
        // second one. As CloudFormation does for a custom resource that never
        // answered, the rollback deletes the physical id generated for it.
        Err(ProviderError::internal(format!(
            "Cairn stopped waiting for the handler's response to Create request {} (the process ended); a custom-resource Create is never sent twice",
            req.context.request_id
        ))
        .leaving(generated_physical_id(&req.context)))
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        if req.properties.get("ServiceToken") != req.old_properties.get("ServiceToken") {
            // CloudFormation's text.
            return Err(ProviderError::not_updatable(
                "Modifying service token is not allowed.",
            ));
        }
        let r = self
            .calls
            .call(
                &req.context,
                RequestType::Update,
                Some(&req.physical_resource_id),
                &req.properties,
                Some(&req.old_properties),
                None,
            )
            .await;
        update_outcome(r, req)
    }

    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let answered = self
            .calls
            .recover(
                &req.context,
                RequestType::Update,
                Some(&req.physical_resource_id),
                &req.properties,
                Some(&req.old_properties),
                None,
            )
            .await
            .ok_or_else(|| never_sent_twice("Update", &req.context.request_id))?;
        update_outcome(answered, req)
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        let answer = self
            .ask(
                &req.context,
                RequestType::CheckDrift,
                &req.physical_resource_id,
                &req.properties,
                "{\"Status\": \"IN_SYNC\" | \"MODIFIED\" | \"DELETED\", \"PropertyDifferences\": [...]}",
            )
            .await?;
        Ok(answer.unwrap_or(DriftResult::NotChecked))
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let r = self
            .calls
            .call(
                &req.context,
                RequestType::Delete,
                Some(&req.physical_resource_id),
                &req.properties,
                None,
                None,
            )
            .await;
        delete_outcome(r)
    }

    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let answered = self
            .calls
            .recover(
                &req.context,
                RequestType::Delete,
                Some(&req.physical_resource_id),
                &req.properties,
                None,
                None,
            )
            .await
            .ok_or_else(|| never_sent_twice("Delete", &req.context.request_id))?;
        delete_outcome(answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_timeout_bounds() {
        assert_eq!(service_timeout(&json!(5)), Ok(5));
        assert_eq!(service_timeout(&json!("3600")), Ok(3600));
        assert!(service_timeout(&json!(0)).is_err());
        assert!(service_timeout(&json!(3601)).is_err());
        assert!(service_timeout(&json!("soon")).is_err());
    }

    #[test]
    fn synchronous_replies_are_json_objects_with_a_status() {
        assert!(is_response(br#"{"Status":"SUCCESS"}"#));
        assert!(!is_response(b""));
        assert!(!is_response(b"OK"));
        assert!(!is_response(br#"{"accepted":true}"#));
    }

    #[test]
    fn configuration_errors_name_the_endpoint() {
        let mut c = WebhookConfig::default();
        c.endpoints.insert(
            "w".into(),
            EndpointConfig {
                url: "ftp://x".into(),
                ..Default::default()
            },
        );
        let callbacks = Arc::new(Callbacks::new(&c, None));
        struct Uncounted;
        impl DeliveryCounter for Uncounted {
            fn delivery(&self, _: &str) {}
        }
        let e = Calls::new(&c, callbacks, Arc::new(Uncounted))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "webhook endpoint w needs a url starting with http:// or https://, not \"ftp://x\""
        );
    }
}
