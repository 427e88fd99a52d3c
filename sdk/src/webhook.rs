//! The handler kit: serve any [`ResourceProvider`] as a CloudFormation-
//! compatible custom-resource webhook, so the same provider code runs built
//! into Cairn, from a dynamic library, or behind HTTP.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # async fn run(provider: Arc<dyn cairn_sdk::ResourceProvider>) -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! cairn_sdk::webhook::WebhookHandler::new(provider)
//!     .secret(std::env::var("CAIRN_WEBHOOK_SECRET").unwrap_or_default())
//!     .serve(listener)
//!     .await
//! # }
//! ```
//!
//! Each POST is checked against the endpoint's secret (the `X-Cairn-Signature`
//! header Cairn sends), answered `200` at once, and the provider's outcome is
//! PUT to the request's `ResponseURL` (retried with backoff), as a Lambda
//! using `cfnresponse` does. With [`WebhookHandler::respond_in_reply`] the
//! response is the POST's reply instead. Properties arrive stringified, as
//! CloudFormation sends them; the kit coerces them to the provider's schema
//! before the provider sees them.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use backon::{ExponentialBuilder, Retryable};
use serde_json::{Map, Value};

use crate::custom_resource::{
    verify, CustomResourceRequest, CustomResourceResponse, RequestType, ResponseStatus,
    SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use crate::{
    CreateRequest, DeleteRequest, DriftRequest, ProviderError, ReadRequest, RequestContext,
    ResourceProvider, UpdateRequest,
};

/// How far a request's signing time may be from the handler's clock.
const SIGNATURE_TOLERANCE_SECONDS: u64 = 300;

/// A provider served as a webhook.
#[derive(Clone)]
pub struct WebhookHandler {
    provider: Arc<dyn ResourceProvider>,
    secret: Option<Vec<u8>>,
    in_reply: bool,
    client: reqwest::Client,
}

impl WebhookHandler {
    pub fn new(provider: Arc<dyn ResourceProvider>) -> Self {
        // reqwest is built without a TLS provider: ring is the process's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        WebhookHandler {
            provider,
            secret: None,
            in_reply: false,
            client: reqwest::Client::new(),
        }
    }

    /// Refuse requests not signed with `secret` (the endpoint's `secret` in
    /// Cairn's config). An empty secret turns the check off.
    pub fn secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        let s = secret.into();
        self.secret = (!s.is_empty()).then_some(s);
        self
    }

    /// Answer in the POST's reply instead of a PUT to `ResponseURL`.
    pub fn respond_in_reply(mut self) -> Self {
        self.in_reply = true;
        self
    }

    /// The axum service: `POST /` takes requests; `GET /schema` returns the
    /// provider's schemas (`{"Schemas": […]}`), which Cairn reads for a
    /// `[[providers]] kind = "webhook"` entry.
    pub fn router(self) -> Router {
        Router::new()
            .route("/", post(receive))
            .route("/schema", axum::routing::get(schemas))
            .with_state(Arc::new(self))
    }

    /// Serves [`WebhookHandler::router`] on `listener` until the process ends.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        axum::serve(listener, self.router()).await
    }

    /// Runs the provider for one request and builds its response.
    pub async fn handle(&self, req: &CustomResourceRequest) -> CustomResourceResponse {
        let outcome = self.run(req).await;
        let mut r = CustomResourceResponse::to(req, ResponseStatus::Success, "");
        match outcome {
            Ok(done) => {
                r.physical_resource_id = done.physical_id;
                r.data = done.data;
                r.no_echo = done.no_echo;
            }
            Err(e) => {
                r.status = ResponseStatus::Failed;
                r.reason = Some(e.message.clone());
                r.error_code = Some(e.kind);
                // A failed request still names a physical id: the one the
                // provider left, the request's, or a new one.
                r.physical_resource_id = e
                    .physical_resource_id
                    .or_else(|| req.physical_resource_id.clone())
                    .unwrap_or_else(|| failed_create_id(req));
            }
        }
        r
    }

    async fn run(&self, req: &CustomResourceRequest) -> Result<Done, ProviderError> {
        let context = context(req);
        if req.request_type == RequestType::Read {
            // A read names the resource only: there are no properties to
            // check against the schema.
            let physical = req.physical_resource_id.clone().unwrap_or_default();
            let found = self
                .provider
                .read(&ReadRequest {
                    context,
                    physical_resource_id: physical.clone(),
                })
                .await?;
            let data = match serde_json::to_value(&found) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            return Ok(Done {
                physical_id: physical,
                data,
                no_echo: false,
            });
        }
        let properties = self.coerce(&req.resource_type, &req.resource_properties)?;
        match req.request_type {
            RequestType::Read => Err(ProviderError::internal("a read is answered above")),
            RequestType::Create => {
                let made = self
                    .provider
                    .create(&CreateRequest {
                        context,
                        properties,
                    })
                    .await?;
                Ok(Done {
                    physical_id: made.physical_resource_id,
                    data: made.attributes,
                    no_echo: made.no_echo,
                })
            }
            RequestType::Update => {
                let physical = req.physical_resource_id.clone().unwrap_or_default();
                let old = self.coerce(
                    &req.resource_type,
                    req.old_resource_properties.as_ref().unwrap_or(&Map::new()),
                )?;
                let changed = old
                    .keys()
                    .chain(properties.keys())
                    .filter(|k| old.get(*k) != properties.get(*k))
                    .cloned()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let updated = self
                    .provider
                    .update(&UpdateRequest {
                        context,
                        physical_resource_id: physical.clone(),
                        properties,
                        old_properties: old,
                        changed,
                        drift: None,
                    })
                    .await?;
                Ok(Done {
                    physical_id: updated.physical_resource_id.unwrap_or(physical),
                    data: updated.attributes,
                    no_echo: updated.no_echo,
                })
            }
            RequestType::Delete => {
                let physical = req.physical_resource_id.clone().unwrap_or_default();
                let gone = self
                    .provider
                    .delete(&DeleteRequest {
                        context,
                        physical_resource_id: physical.clone(),
                        properties,
                    })
                    .await;
                match gone {
                    // An unknown id (a Create that failed) is deleted already.
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
                Ok(Done {
                    physical_id: physical,
                    data: Map::new(),
                    no_echo: false,
                })
            }
            RequestType::CheckDrift => {
                let physical = req.physical_resource_id.clone().unwrap_or_default();
                let drift = self
                    .provider
                    .check_drift(&DriftRequest {
                        context,
                        physical_resource_id: physical.clone(),
                        properties,
                    })
                    .await?;
                let data = match serde_json::to_value(&drift) {
                    Ok(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                Ok(Done {
                    physical_id: physical,
                    data,
                    no_echo: false,
                })
            }
        }
    }

    /// The stringified properties coerced to the schema of `type_name` (or
    /// of the provider's only type): `"3"` becomes `3` where an Integer is
    /// declared. `ServiceToken` and `ServiceTimeout` are Cairn's, not the
    /// provider's.
    fn coerce(
        &self,
        type_name: &str,
        props: &Map<String, Value>,
    ) -> Result<Map<String, Value>, ProviderError> {
        let mut own = props.clone();
        own.remove("ServiceToken");
        own.remove("ServiceTimeout");
        let schemas = self.provider.schema();
        let schema = schemas
            .iter()
            .find(|s| s.type_name == type_name)
            .or(if schemas.len() == 1 {
                schemas.first()
            } else {
                None
            });
        let Some(schema) = schema else {
            return Err(ProviderError::invalid_request(format!(
                "this handler does not serve {type_name}; it serves {}",
                schemas
                    .iter()
                    .map(|s| s.type_name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        schema.validate(&own).map_err(|errors| {
            ProviderError::invalid_request(
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
    }

    /// PUTs `response` to the request's ResponseURL, retried with backoff
    /// for a minute (S3 answers 200; so does Cairn's listener).
    async fn send(&self, url: &str, response: &CustomResourceResponse) {
        let Ok(body) = serde_json::to_vec(response) else {
            return;
        };
        let put = || async {
            let r = self
                .client
                .put(url)
                .header("content-type", "")
                .timeout(Duration::from_secs(30))
                .body(body.clone())
                .send()
                .await?;
            // 4xx: the URL refused it (expired, already answered); final.
            if r.status().is_server_error() {
                return r.error_for_status().map(|_| ());
            }
            Ok(())
        };
        let sent = put
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_delay(Duration::from_secs(10))
                    .with_max_times(8),
            )
            .sleep(tokio::time::sleep)
            .await;
        if let Err(e) = sent {
            tracing::error!(url, "could not send the custom-resource response: {e}");
        }
    }
}

struct Done {
    physical_id: String,
    data: Map<String, Value>,
    no_echo: bool,
}

/// The request as a provider sees it.
fn context(req: &CustomResourceRequest) -> RequestContext {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    RequestContext {
        stack_id: req.stack_id.clone(),
        stack_name: stack_name(&req.stack_id).to_string(),
        logical_resource_id: req.logical_resource_id.clone(),
        resource_type: req.resource_type.clone(),
        request_id: req.request_id.clone(),
        // CloudFormation's longest wait for a custom resource.
        deadline_unix_ms: now + 3_600_000,
        tags: crate::ResourceTags {
            desired: req.desired_resource_tags.clone(),
            previous: req.previous_resource_tags.clone(),
            system: req.system_tags.clone(),
        },
        // The type's configuration the engine sent.
        provider_settings: req.type_configuration.clone(),
    }
}

/// `mystack` of `arn:…:stack/mystack/<uuid>`.
fn stack_name(stack_id: &str) -> &str {
    stack_id
        .split_once(":stack/")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or(stack_id)
}

/// A physical id for a Create that failed before the provider named one
/// (as crhelper does: `<stack>_<logical>_<8 random characters>`).
fn failed_create_id(req: &CustomResourceRequest) -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    let suffix: String = bytes
        .iter()
        .map(|b| char::from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[usize::from(*b) % 36]))
        .collect();
    format!(
        "{}_{}_{suffix}",
        stack_name(&req.stack_id),
        req.logical_resource_id
    )
}

async fn schemas(State(kit): State<Arc<WebhookHandler>>) -> Response {
    axum::Json(serde_json::json!({ "Schemas": kit.provider.schema() })).into_response()
}

async fn receive(
    State(kit): State<Arc<WebhookHandler>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(secret) = &kit.secret {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        if let Err(e) = verify(
            secret,
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            &body,
            now,
            SIGNATURE_TOLERANCE_SECONDS,
        ) {
            return (StatusCode::UNAUTHORIZED, e.to_string()).into_response();
        }
    }
    let req: CustomResourceRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("not a custom-resource request: {e}"),
            )
                .into_response()
        }
    };
    if kit.in_reply {
        let response = kit.handle(&req).await;
        return axum::Json(response).into_response();
    }
    // Like an asynchronous Lambda invocation: accepted now, answered later.
    tokio::spawn(async move {
        let response = kit.handle(&req).await;
        kit.send(&req.response_url, &response).await;
    });
    StatusCode::OK.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_names_come_from_stack_ids() {
        assert_eq!(
            stack_name("arn:aws:cloudformation:us-east-1:123456789012:stack/my-stack/5b918d10"),
            "my-stack"
        );
        assert_eq!(stack_name("plain"), "plain");
    }
}
