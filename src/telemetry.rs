//! Traces: `tracing`'s spans (the API request, the stack operation, each
//! resource step, each provider, hook, macro and webhook call) exported
//! over OTLP, HTTP protobuf or gRPC, when `[telemetry] endpoint` or
//! `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` names a collector; off otherwise.
//!
//! A collector that is slow or down never slows an operation: an ended
//! span goes into a bounded queue without waiting (a full queue drops it),
//! and one thread of its own exports batches from it. Dropped spans (a
//! full queue, or an export that failed) are counted for `/metrics`.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use cairn_core::config::TelemetryConfig;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    Sampler, SdkTracer, SdkTracerProvider, Span, SpanData, SpanExporter as _, SpanProcessor,
};
use opentelemetry_sdk::Resource;

/// Spans sent in one export, and the longest a span waits for one.
const BATCH: usize = 512;
const EVERY: Duration = Duration::from_secs(1);
/// How long the end of a command waits for its spans to be exported.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

pub use cairn_api::SpanCounts;

enum Msg {
    Span(Box<SpanData>),
    Flush(mpsc::Sender<()>),
}

/// Hands ended spans to the exporting thread without ever waiting.
#[derive(Debug)]
struct QueueProcessor {
    queue: SyncSender<Msg>,
    counts: Arc<SpanCounts>,
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if self.queue.try_send(Msg::Span(Box::new(span))).is_err() {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        let (done, finished) = mpsc::channel();
        if self.queue.send(Msg::Flush(done)).is_ok() {
            let _ = finished.recv_timeout(FLUSH_WAIT);
        }
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.force_flush()
    }
}

/// The exporting side of a running telemetry.
pub struct Telemetry {
    provider: SdkTracerProvider,
    pub counts: Arc<SpanCounts>,
}

impl Telemetry {
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer("cairn")
    }

    /// Exports what is queued (the end of a command), waiting at most a
    /// few seconds.
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }
}

/// Where spans go, resolved from the configuration and the environment.
#[derive(Debug, Clone, PartialEq)]
struct Target {
    grpc: bool,
    /// None: the exporter reads `OTEL_EXPORTER_OTLP_*` itself.
    endpoint: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn target(config: &TelemetryConfig) -> anyhow::Result<Option<Target>> {
    let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    if config.endpoint.is_none() && !from_env {
        return Ok(None);
    }
    let protocol = config
        .protocol
        .clone()
        .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".into());
    let grpc = match protocol.as_str() {
        "grpc" => true,
        "http/protobuf" => false,
        other => {
            return Err(anyhow!(
            "[telemetry] protocol {other} is not one Cairn exports with: use http/protobuf or grpc"
        ))
        }
    };
    let endpoint = config.endpoint.as_ref().map(|e| {
        let e = e.trim_end_matches('/');
        if grpc || e.ends_with("/v1/traces") {
            e.to_string()
        } else {
            format!("{e}/v1/traces")
        }
    });
    Ok(Some(Target { grpc, endpoint }))
}

/// Starts exporting when a collector is configured: the telemetry, whose
/// tracer the logs' subscriber takes as a layer.
pub fn start(config: &TelemetryConfig) -> anyhow::Result<Option<Telemetry>> {
    let Some(target) = target(config)? else {
        return Ok(None);
    };
    // The exporter's HTTPS client uses rustls with the process's provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if !(0.0..=1.0).contains(&config.sampling) {
        return Err(anyhow!(
            "[telemetry] sampling is {}: give the fraction of traces to keep, from 0.0 to 1.0",
            config.sampling
        ));
    }
    let resource = Resource::builder()
        .with_service_name(config.service_name.clone())
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("service.instance.id", uuid::Uuid::new_v4().to_string()),
        ])
        .build();
    let counts = Arc::new(SpanCounts::default());
    let (queue, spans) = mpsc::sync_channel(config.queue_size.max(1));
    let (ready, started) = mpsc::channel();
    let headers = config.headers.clone();
    let timeout = Duration::from_secs(config.timeout_seconds.max(1));
    {
        let counts = counts.clone();
        let resource = resource.clone();
        std::thread::Builder::new()
            .name("cairn-otlp-export".into())
            .spawn(move || {
                export_thread((target, timeout), headers, resource, spans, counts, ready)
            })
            .context("cannot start the thread that exports traces")?;
    }
    started
        .recv()
        .map_err(|_| anyhow!("the thread that exports traces stopped at its start"))?
        .map_err(|e| anyhow!("cannot export traces: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(QueueProcessor {
            queue,
            counts: counts.clone(),
        })
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            config.sampling,
        ))))
        .with_resource(resource)
        .build();
    Ok(Some(Telemetry { provider, counts }))
}

/// The exporting thread: builds the exporter (gRPC's needs a runtime of
/// its own), then exports a batch when it is full, every [`EVERY`], and on
/// a flush.
fn export_thread(
    (target, timeout): (Target, Duration),
    headers: std::collections::BTreeMap<String, String>,
    resource: Resource,
    spans: mpsc::Receiver<Msg>,
    counts: Arc<SpanCounts>,
    ready: mpsc::Sender<Result<(), String>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    let built = if target.grpc {
        let mut metadata = tonic::metadata::MetadataMap::new();
        for (k, v) in &headers {
            if let (Ok(k), Ok(v)) = (
                k.parse::<tonic::metadata::MetadataKey<tonic::metadata::Ascii>>(),
                v.parse(),
            ) {
                metadata.insert(k, v);
            }
        }
        let _inside = runtime.enter();
        let mut b = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_timeout(timeout)
            .with_metadata(metadata);
        if let Some(e) = &target.endpoint {
            b = b.with_endpoint(e.clone());
        }
        b.build()
    } else {
        let mut b = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(timeout)
            .with_headers(headers.into_iter().collect());
        if let Some(e) = &target.endpoint {
            b = b.with_endpoint(e.clone());
        }
        b.build()
    };
    let mut exporter = match built {
        Ok(e) => e,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    exporter.set_resource(&resource);
    let _ = ready.send(Ok(()));
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH);
    let export = |batch: &mut Vec<SpanData>| {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let spans = std::mem::take(batch);
        // The HTTP exporter's client is a blocking one: not inside a runtime.
        let result = if target.grpc {
            runtime.block_on(exporter.export(spans))
        } else {
            futures_executor::block_on(exporter.export(spans))
        };
        match result {
            Ok(()) => counts.exported.fetch_add(n, Ordering::Relaxed),
            Err(e) => {
                tracing::debug!("a batch of {n} spans was not exported: {e}");
                counts.dropped.fetch_add(n, Ordering::Relaxed)
            }
        };
    };
    let mut due = Instant::now() + EVERY;
    loop {
        match spans.recv_timeout(due.saturating_duration_since(Instant::now())) {
            Ok(Msg::Span(s)) => {
                batch.push(*s);
                if batch.len() >= BATCH {
                    export(&mut batch);
                }
            }
            Ok(Msg::Flush(done)) => {
                while let Ok(Msg::Span(s)) = spans.try_recv() {
                    batch.push(*s);
                }
                export(&mut batch);
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => {
                export(&mut batch);
                due = Instant::now() + EVERY;
            }
            Err(RecvTimeoutError::Disconnected) => {
                export(&mut batch);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_and_protocol_come_from_the_config() {
        let mut c = TelemetryConfig::default();
        if env("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
            && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
        {
            assert_eq!(target(&c).unwrap(), None, "off by default");
        }
        c.endpoint = Some("http://collector:4318/".into());
        c.protocol = Some("http/protobuf".into());
        assert_eq!(
            target(&c).unwrap(),
            Some(Target {
                grpc: false,
                endpoint: Some("http://collector:4318/v1/traces".into())
            })
        );
        c.protocol = Some("grpc".into());
        c.endpoint = Some("http://collector:4317".into());
        assert_eq!(
            target(&c).unwrap().and_then(|t| t.endpoint),
            Some("http://collector:4317".into())
        );
        c.protocol = Some("http/json".into());
        assert!(target(&c)
            .unwrap_err()
            .to_string()
            .contains("use http/protobuf or grpc"));
    }
}
