//! Delivering one request to a handler: a signed POST, retried with backoff
//! while the handler is unreachable or failing (connection refused, 5xx,
//! 429, timeouts), never past the request's deadline.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use backon::{ExponentialBuilder, Retryable};
use cairn_sdk::custom_resource::{sign, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use tokio::time::Instant;

/// Where deliveries are counted (the engine's metrics, for a server's
/// `/metrics`): a value the engine passes in, so the transport keeps no
/// counters of its own.
pub trait DeliveryCounter: Send + Sync {
    /// One delivery event: `delivered`, `retried` or `failed`.
    fn delivery(&self, outcome: &str);
}

/// One attempt's failure: whether another attempt may succeed, and why.
#[derive(Debug)]
struct Failure {
    retry: bool,
    reason: String,
}

/// The longest a single POST may take before it is tried again.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// POSTs `body` to `url` until a handler accepts it (any 2xx), returning the
/// handler's reply body: a response in synchronous mode, anything else in
/// asynchronous mode. The error is the resource's failure reason.
pub async fn deliver(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&[u8]>,
    body: Bytes,
    deadline: Instant,
    metrics: &dyn DeliveryCounter,
) -> Result<Bytes, String> {
    let last = Arc::new(Mutex::new(None::<String>));
    let attempt = || {
        let body = body.clone();
        async move { post_once(client, url, secret, body, deadline).await }
    };
    let retried = attempt
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(5))
                .with_jitter()
                .with_max_times(usize::MAX),
        )
        .sleep(tokio::time::sleep)
        .when(|f: &Failure| f.retry)
        .notify(|f: &Failure, wait: Duration| {
            metrics.delivery("retried");
            tracing::warn!(
                url,
                "delivering a custom-resource request failed, retrying in {wait:?}: {}",
                f.reason
            );
            if let Ok(mut l) = last.lock() {
                *l = Some(f.reason.clone());
            }
        });
    let outcome = tokio::time::timeout_at(deadline, retried).await;
    metrics.delivery(if matches!(outcome, Ok(Ok(_))) {
        "delivered"
    } else {
        "failed"
    });
    match outcome {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(f)) => Err(f.reason),
        Err(_) => {
            let why = last
                .lock()
                .ok()
                .and_then(|l| l.clone())
                .map(|r| format!("; the last attempt failed: {r}"))
                .unwrap_or_default();
            Err(format!(
                "the custom-resource request could not be delivered to {url} before the timeout{why}"
            ))
        }
    }
}

/// The W3C `traceparent` of `span`, when traces are exported.
fn traceparent(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// `url` as a span shows it: no user, password or query (a ServiceToken
/// may carry a function key there), as OpenTelemetry's `url.full` asks.
fn span_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            if u.query().is_some() {
                u.set_query(Some("REDACTED"));
            }
            u.to_string()
        }
        Err(_) => "(not a URL)".to_string(),
    }
}

/// One POST, in a CLIENT span of its own whose context the request
/// carries as `traceparent`.
async fn post_once(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&[u8]>,
    body: Bytes,
    deadline: Instant,
) -> Result<Bytes, Failure> {
    let span = tracing::info_span!(
        "webhook",
        otel.name = "POST",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        http.request.method = "POST",
        url.full = %span_url(url),
        http.response.status_code = tracing::field::Empty,
    );
    let sent = tracing::Instrument::instrument(
        post_in_span(client, url, secret, body, deadline, &span),
        span.clone(),
    )
    .await;
    if let Err(f) = &sent {
        span.record("otel.status_code", "ERROR");
        tracing::debug!(parent: &span, "{}", f.reason);
    }
    sent
}

async fn post_in_span(
    client: &reqwest::Client,
    url: &str,
    secret: Option<&[u8]>,
    body: Bytes,
    deadline: Instant,
    span: &tracing::Span,
) -> Result<Bytes, Failure> {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .timeout(ATTEMPT_TIMEOUT.min(deadline.saturating_duration_since(Instant::now())));
    if let Some(parent) = traceparent(span) {
        req = req.header("traceparent", parent);
    }
    if let Some(secret) = secret {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        req = req
            .header(TIMESTAMP_HEADER, now.to_string())
            .header(SIGNATURE_HEADER, sign(secret, now, &body));
    }
    let reply = req.body(body).send().await.map_err(|e| Failure {
        // A certificate the endpoint's trust does not accept will not be
        // accepted on the next attempt either.
        retry: !certificate_refused(&e),
        reason: describe(&e),
    })?;
    let status = reply.status();
    span.record("http.response.status_code", status.as_u16());
    let text = reply.bytes().await.map_err(|e| Failure {
        retry: true,
        reason: describe(&e),
    })?;
    if status.is_success() {
        return Ok(text);
    }
    let snippet: String = String::from_utf8_lossy(&text).chars().take(200).collect();
    Err(Failure {
        // The handler is overloaded or broken for now; a 4xx is its answer.
        retry: status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408,
        reason: format!(
            "the handler at {url} answered HTTP {status}: {}",
            snippet.trim()
        ),
    })
}

/// Whether TLS refused the handler's certificate somewhere in `e`'s causes.
fn certificate_refused(e: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if matches!(
            c.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
        ) {
            return true;
        }
        // An io::Error's `source()` skips its payload (hyper nests the TLS
        // error in two of them): step into the payload instead.
        cause = match c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => c.source(),
        };
    }
    false
}

/// A transport error in one line, with its cause (reqwest's own text omits it).
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod span_url_tests {
    #[test]
    fn a_spans_url_shows_no_credentials_or_query() {
        assert_eq!(
            super::span_url("https://user:pw@fn.example/run?code=s3cret"),
            "https://fn.example/run?REDACTED"
        );
        assert_eq!(
            super::span_url("http://127.0.0.1:8080/"),
            "http://127.0.0.1:8080/"
        );
    }
}
