//! The binary composes its crates: the transports (`cairn-webhook`,
//! `cairn-plugin`) wired into the engine's registry, and what the engine
//! needs of them (whose wait condition handle a URL is, an https client
//! for nested templates, a counter of webhook deliveries) handed to it as
//! values. The engine (`cairn-core`) depends on no transport.

pub mod registered;
pub mod registry;

use std::sync::Arc;
use std::time::Duration;

use cairn_core::config::WebhookConfig;
use cairn_core::metrics::Metrics;
use cairn_core::nested::HttpsGet;
use cairn_core::shared::Shared;
use cairn_core::shared::{HttpError, HttpProbe, PostError, WebhookPoster};
use cairn_core::store::Store;
use cairn_webhook::callback::Callbacks;
use cairn_webhook::DeliveryCounter;

pub use registry::assemble;

/// One process's transports and the shared value its engines hold.
#[derive(Clone)]
pub struct Process {
    /// What the engines, registries and server of the process share.
    pub shared: Shared,
    /// The custom-resource callback listener (`cairn serve` hosts it on
    /// its own port; every other command starts it on first use).
    pub callbacks: Arc<Callbacks>,
}

impl Process {
    /// A process configured with `webhooks`; custom-resource responses go
    /// through `state` (the state it opened), so that any engine on it can
    /// take one for another, when given.
    pub fn new(webhooks: &WebhookConfig, state: Option<Arc<dyn Store>>) -> Process {
        let callbacks = Arc::new(Callbacks::new(webhooks, state));
        let shared = Shared::new(callbacks.clone(), Arc::new(TemplatesOverHttps));
        let macros = SignedPosts(Arc::new(Deliveries(shared.metrics.clone())));
        Process {
            shared: shared
                .with_webhook_poster(Arc::new(macros))
                .with_probes(Arc::new(TriggersOverHttp)),
            callbacks,
        }
    }

    /// The webhook transport's counter of deliveries: the process's metrics.
    pub fn deliveries(&self) -> Arc<dyn DeliveryCounter> {
        Arc::new(Deliveries(self.shared.metrics.clone()))
    }
}

/// Webhook deliveries counted in the process's metrics.
struct Deliveries(Arc<Metrics>);

impl DeliveryCounter for Deliveries {
    fn delivery(&self, outcome: &str) {
        self.0.delivery(outcome);
    }
}

/// Macros served by webhooks: signed POSTs with the webhooks' delivery
/// (retried while the handler is unreachable), counted with the others.
struct SignedPosts(Arc<dyn DeliveryCounter>);

#[async_trait::async_trait]
impl WebhookPoster for SignedPosts {
    async fn post(
        &self,
        url: &str,
        secret: Option<&str>,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, PostError> {
        cairn_webhook::post_signed(
            url,
            secret.map(str::as_bytes),
            body,
            timeout,
            self.0.as_ref(),
        )
        .await
        .map_err(|e| PostError(e.to_string()))
    }
}

/// A GET with the webhooks' client (rustls with ring and the platform's
/// roots): the status and body, whatever the status.
async fn get_with_webhook_client(
    url: &str,
    timeout: Duration,
    purpose: &str,
) -> Result<(u16, Vec<u8>), HttpError> {
    let failed = |e: &dyn std::fmt::Display| HttpError::new(url, e);
    let client = cairn_webhook::tls::client(None, purpose).map_err(|e| failed(&e))?;
    let answer = client
        .get(url)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| failed(&e))?;
    let status = answer.status().as_u16();
    let bytes = answer.bytes().await.map_err(|e| failed(&e))?;
    Ok((status, bytes.to_vec()))
}

/// Rollback triggers (health checks, Alertmanager) read with the
/// webhooks' client.
struct TriggersOverHttp;

#[async_trait::async_trait]
impl HttpProbe for TriggersOverHttp {
    async fn get(&self, url: &str, timeout: Duration) -> Result<(u16, Vec<u8>), HttpError> {
        get_with_webhook_client(url, timeout, "rollback triggers").await
    }
}

/// Nested templates behind `https://` TemplateURLs, fetched with the
/// webhooks' client (rustls with ring and the platform's roots).
struct TemplatesOverHttps;

#[async_trait::async_trait]
impl HttpsGet for TemplatesOverHttps {
    async fn get(&self, url: &str, timeout: Duration) -> Result<Vec<u8>, HttpError> {
        match get_with_webhook_client(url, timeout, "nested templates").await? {
            (200..=299, body) => Ok(body),
            (status, _) => Err(HttpError::new(url, format!("HTTP status {status}"))),
        }
    }
}
