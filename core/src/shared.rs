//! What the engines, registries and servers of one process share, as one
//! value the binary makes and hands to each: the counters a server's
//! `/metrics` reads, and what the engine needs of the process's transports
//! (whose wait condition handle a URL is; https:// nested templates),
//! as values, so the engine depends on no transport. Nothing in the library
//! crates is process-global, so two engines in one test (the crash
//! simulator's "processes") are as apart as two processes when given two
//! values, and as together as one when given the same.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::nested::HttpsGet;
use crate::signal::HandleUrls;

#[derive(Clone)]
pub struct Shared {
    pub metrics: Arc<Metrics>,
    /// The process's callback listener, asked whose handle a URL is.
    pub handles: Arc<dyn HandleUrls>,
    /// Fetches https:// nested templates.
    pub https: Arc<dyn HttpsGet>,
    /// POSTs signed requests to webhooks (macros, stack notifications).
    pub webhooks: Arc<dyn WebhookPoster>,
    /// Reads rollback triggers (health checks, Alertmanager).
    pub probes: Arc<dyn HttpProbe>,
    /// Starts a registered type's provider once, at its registration.
    pub handlers: Arc<dyn HandlerProbe>,
}

impl Shared {
    /// A process's shared value, with new counters.
    pub fn new(handles: Arc<dyn HandleUrls>, https: Arc<dyn HttpsGet>) -> Shared {
        Shared {
            metrics: Arc::new(Metrics::default()),
            handles,
            https,
            webhooks: Arc::new(NoWebhookPoster),
            probes: Arc::new(NoProbes),
            handlers: Arc::new(NoHandlerProbe),
        }
    }

    /// This value, checking registered types' handlers with `probe`.
    pub fn with_handler_probe(mut self, probe: Arc<dyn HandlerProbe>) -> Shared {
        self.handlers = probe;
        self
    }

    /// This value, reading rollback triggers with `client`.
    pub fn with_probes(mut self, client: Arc<dyn HttpProbe>) -> Shared {
        self.probes = client;
        self
    }

    /// This value, calling webhook macros with `client`.
    pub fn with_webhook_poster(mut self, client: Arc<dyn WebhookPoster>) -> Shared {
        self.webhooks = client;
        self
    }
}

/// Starts a package's provider once, as engines will serve it (a webhook
/// handler reached, a library loaded in a host process): why it cannot
/// serve the package's type. The binary hands in its transports.
#[async_trait::async_trait]
pub trait HandlerProbe: Send + Sync {
    /// With `test`, the provider kit's contract tests run against it too.
    async fn reach(
        &self,
        package: &cairn_package::Package,
        bytes: &[u8],
        secret: Option<&cairn_model::registry::SecretSource>,
        test: bool,
    ) -> Result<(), String>;
}

/// A process without transports: handlers are not reached (the engine's
/// own tests).
struct NoHandlerProbe;

#[async_trait::async_trait]
impl HandlerProbe for NoHandlerProbe {
    async fn reach(
        &self,
        _: &cairn_package::Package,
        _: &[u8],
        _: Option<&cairn_model::registry::SecretSource>,
        _: bool,
    ) -> Result<(), String> {
        Ok(())
    }
}

/// POSTs a macro request to a webhook: the binary hands in its signed
/// HTTP client, so the engine links none.
#[async_trait::async_trait]
pub trait WebhookPoster: Send + Sync {
    /// The answer's body, or why there is none (`{url}: {cause}`).
    async fn post(
        &self,
        url: &str,
        secret: Option<&str>,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, PostError>;
}

pub use crate::http::HttpError;

/// A signed POST that got no accepted answer (the delivery's reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PostError(pub String);

/// For an engine given no webhook client (tests, the crash simulator).
pub struct NoWebhookPoster;

#[async_trait::async_trait]
impl WebhookPoster for NoWebhookPoster {
    async fn post(
        &self,
        url: &str,
        _: Option<&str>,
        _: Vec<u8>,
        _: Duration,
    ) -> Result<Vec<u8>, PostError> {
        Err(PostError(format!("{url}: this engine calls no webhooks")))
    }
}

/// GETs a rollback trigger's URL: the binary hands in its HTTP client, so
/// the engine links none.
#[async_trait::async_trait]
pub trait HttpProbe: Send + Sync {
    /// The answer's status and body (whatever the status), or why there is
    /// no answer.
    async fn get(&self, url: &str, timeout: Duration) -> Result<(u16, Vec<u8>), HttpError>;
}

/// For an engine given no HTTP client (the crash simulator): every trigger
/// is one that cannot be read.
pub struct NoProbes;

#[async_trait::async_trait]
impl HttpProbe for NoProbes {
    async fn get(&self, url: &str, _: Duration) -> Result<(u16, Vec<u8>), HttpError> {
        Err(HttpError::new(
            url,
            "this engine reads no rollback triggers",
        ))
    }
}
