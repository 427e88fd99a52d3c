//! `GET /metrics`: Prometheus text exposition of the server's requests and
//! the operations it ran.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The engine's figures read for one page.
pub struct EngineFigures {
    pub leases_held: usize,
    pub max_operations: usize,
    /// None when the store did not answer.
    pub store_round_trip: Option<Duration>,
    /// The engine's own counters (provider calls, deliveries, leases).
    pub counters: Arc<cairn_core::metrics::Metrics>,
}

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Counters>,
    /// Spans exported over OTLP, when traces are.
    pub spans: Option<std::sync::Arc<SpanCounts>>,
}

/// What happened to the spans this process ended: exported, or dropped
/// (the export queue was full, or an export failed).
#[derive(Debug, Default)]
pub struct SpanCounts {
    pub exported: std::sync::atomic::AtomicU64,
    pub dropped: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Counters {
    /// (action, HTTP status) → count.
    requests: BTreeMap<(String, u16), u64>,
    /// action → (seconds summed, count).
    latency: BTreeMap<String, (f64, u64)>,
    operations_started: BTreeMap<String, u64>,
    /// (kind, final status) → count.
    operations_ended: BTreeMap<(String, String), u64>,
    /// Audit records written, and those that could not be.
    audit_written: u64,
    audit_failed: u64,
    /// Audit records exported, by target kind (`file`, `http`), and
    /// export attempts that failed.
    audit_exported: BTreeMap<String, u64>,
    audit_export_failures: BTreeMap<String, u64>,
}

impl Metrics {
    pub fn request(&self, action: &str, status: u16, took: Duration) {
        if let Ok(mut c) = self.inner.lock() {
            *c.requests.entry((action.to_string(), status)).or_default() += 1;
            let l = c.latency.entry(action.to_string()).or_default();
            l.0 += took.as_secs_f64();
            l.1 += 1;
        }
    }

    pub fn operation_started(&self, kind: &str) {
        if let Ok(mut c) = self.inner.lock() {
            *c.operations_started.entry(kind.to_string()).or_default() += 1;
        }
    }

    pub fn operation_ended(&self, kind: &str, status: &str) {
        if let Ok(mut c) = self.inner.lock() {
            *c.operations_ended
                .entry((kind.to_string(), status.to_string()))
                .or_default() += 1;
        }
    }

    /// The counters, with the trace spans' when traces are exported.
    pub fn with_spans(spans: Option<std::sync::Arc<SpanCounts>>) -> Metrics {
        Metrics {
            spans,
            ..Metrics::default()
        }
    }

    pub fn audit_recorded(&self, written: bool) {
        if let Ok(mut c) = self.inner.lock() {
            if written {
                c.audit_written += 1;
            } else {
                c.audit_failed += 1;
            }
        }
    }

    /// `n` records sent to an export target of `kind`, or (`ok` false) an
    /// attempt that failed.
    pub fn audit_export(&self, kind: &str, n: usize, ok: bool) {
        if let Ok(mut c) = self.inner.lock() {
            if ok {
                *c.audit_exported.entry(kind.to_string()).or_default() += n as u64;
            } else {
                *c.audit_export_failures.entry(kind.to_string()).or_default() += 1;
            }
        }
    }

    pub fn render(
        &self,
        providers: &[cairn_core::registry::ProviderStatus],
        engine: &EngineFigures,
    ) -> String {
        let mut out = String::new();
        let Ok(c) = self.inner.lock() else {
            return out;
        };
        let _ = writeln!(
            out,
            "# HELP cairn_api_requests_total Query API requests by action and HTTP status."
        );
        let _ = writeln!(out, "# TYPE cairn_api_requests_total counter");
        for ((action, status), n) in &c.requests {
            let _ = writeln!(
                out,
                "cairn_api_requests_total{{action=\"{action}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP cairn_api_request_seconds Time spent answering Query API requests."
        );
        let _ = writeln!(out, "# TYPE cairn_api_request_seconds summary");
        for (action, (sum, count)) in &c.latency {
            let _ = writeln!(
                out,
                "cairn_api_request_seconds_sum{{action=\"{action}\"}} {sum}"
            );
            let _ = writeln!(
                out,
                "cairn_api_request_seconds_count{{action=\"{action}\"}} {count}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP cairn_operations_started_total Stack operations started by this server."
        );
        let _ = writeln!(out, "# TYPE cairn_operations_started_total counter");
        for (kind, n) in &c.operations_started {
            let _ = writeln!(out, "cairn_operations_started_total{{kind=\"{kind}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP cairn_operations_ended_total Stack operations ended, by final stack status."
        );
        let _ = writeln!(out, "# TYPE cairn_operations_ended_total counter");
        for ((kind, status), n) in &c.operations_ended {
            let _ = writeln!(
                out,
                "cairn_operations_ended_total{{kind=\"{kind}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP cairn_audit_records_total Audit records this server wrote (written) or could not write (failed)."
        );
        let _ = writeln!(out, "# TYPE cairn_audit_records_total counter");
        let _ = writeln!(
            out,
            "cairn_audit_records_total{{outcome=\"written\"}} {}",
            c.audit_written
        );
        let _ = writeln!(
            out,
            "cairn_audit_records_total{{outcome=\"failed\"}} {}",
            c.audit_failed
        );
        let _ = writeln!(
            out,
            "# HELP cairn_audit_exported_total Audit records exported, by target kind."
        );
        let _ = writeln!(out, "# TYPE cairn_audit_exported_total counter");
        for (kind, n) in &c.audit_exported {
            let _ = writeln!(out, "cairn_audit_exported_total{{target=\"{kind}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP cairn_audit_export_failures_total Audit export attempts that failed (retried), by target kind."
        );
        let _ = writeln!(out, "# TYPE cairn_audit_export_failures_total counter");
        for (kind, n) in &c.audit_export_failures {
            let _ = writeln!(
                out,
                "cairn_audit_export_failures_total{{target=\"{kind}\"}} {n}"
            );
        }
        if let Some(spans) = &self.spans {
            use std::sync::atomic::Ordering::Relaxed;
            let _ = writeln!(
                out,
                "# HELP cairn_spans_total Trace spans by what became of them: exported over OTLP, or dropped (the queue was full or the collector did not take them)."
            );
            let _ = writeln!(out, "# TYPE cairn_spans_total counter");
            let _ = writeln!(
                out,
                "cairn_spans_total{{outcome=\"exported\"}} {}",
                spans.exported.load(Relaxed)
            );
            let _ = writeln!(
                out,
                "cairn_spans_total{{outcome=\"dropped\"}} {}",
                spans.dropped.load(Relaxed)
            );
        }
        let _ = writeln!(out, "# HELP cairn_provider_calls_total Provider calls by kind and outcome (ok or the error kind).");
        let _ = writeln!(out, "# TYPE cairn_provider_calls_total counter");
        let calls = engine.counters.provider_calls();
        for ((kind, outcome), t) in &calls {
            let _ = writeln!(
                out,
                "cairn_provider_calls_total{{kind=\"{kind}\",outcome=\"{outcome}\"}} {}",
                t.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP cairn_provider_call_seconds Time spent in provider calls."
        );
        let _ = writeln!(out, "# TYPE cairn_provider_call_seconds summary");
        for ((kind, outcome), t) in &calls {
            let _ = writeln!(
                out,
                "cairn_provider_call_seconds_sum{{kind=\"{kind}\",outcome=\"{outcome}\"}} {}",
                t.seconds
            );
            let _ = writeln!(
                out,
                "cairn_provider_call_seconds_count{{kind=\"{kind}\",outcome=\"{outcome}\"}} {}",
                t.count
            );
        }
        let hooks = engine.counters.hook_calls();
        let _ = writeln!(
            out,
            "# HELP cairn_hook_invocations_total Hook invocations by hook type and verdict (HookStatus)."
        );
        let _ = writeln!(out, "# TYPE cairn_hook_invocations_total counter");
        for ((hook, status), t) in &hooks {
            let _ = writeln!(
                out,
                "cairn_hook_invocations_total{{hook=\"{hook}\",status=\"{status}\"}} {}",
                t.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP cairn_hook_seconds Time spent in hook invocations."
        );
        let _ = writeln!(out, "# TYPE cairn_hook_seconds summary");
        for ((hook, status), t) in &hooks {
            let _ = writeln!(
                out,
                "cairn_hook_seconds_sum{{hook=\"{hook}\",status=\"{status}\"}} {}",
                t.seconds
            );
            let _ = writeln!(
                out,
                "cairn_hook_seconds_count{{hook=\"{hook}\",status=\"{status}\"}} {}",
                t.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP cairn_provider_up Whether a configured provider is started (1) or cannot start (0; not yet needed: absent)."
        );
        let _ = writeln!(out, "# TYPE cairn_provider_up gauge");
        for p in providers.iter().filter(|p| p.state != "not started") {
            let up = u8::from(p.cause.is_none());
            let _ = writeln!(out, "cairn_provider_up{{provider=\"{}\"}} {up}", p.name);
        }
        let (takeovers, dropped) = engine.counters.leases();
        let _ = writeln!(
            out,
            "# HELP cairn_leases_held Stack operations this engine runs now (each under a lease)."
        );
        let _ = writeln!(out, "# TYPE cairn_leases_held gauge");
        let _ = writeln!(out, "cairn_leases_held {}", engine.leases_held);
        let _ = writeln!(
            out,
            "# HELP cairn_operations_max What this engine runs at once ([engine] max_operations)."
        );
        let _ = writeln!(out, "# TYPE cairn_operations_max gauge");
        let _ = writeln!(out, "cairn_operations_max {}", engine.max_operations);
        let _ = writeln!(out, "# HELP cairn_takeovers_total Operations this engine took over from an engine whose lease ran out.");
        let _ = writeln!(out, "# TYPE cairn_takeovers_total counter");
        let _ = writeln!(out, "cairn_takeovers_total {takeovers}");
        let _ = writeln!(out, "# HELP cairn_operations_dropped_total Operations this engine let go because another took its lease over (its writes were refused).");
        let _ = writeln!(out, "# TYPE cairn_operations_dropped_total counter");
        let _ = writeln!(out, "cairn_operations_dropped_total {dropped}");
        if let Some(rtt) = engine.store_round_trip {
            let _ = writeln!(
                out,
                "# HELP cairn_store_round_trip_seconds One round trip to the state store, measured for this page."
            );
            let _ = writeln!(out, "# TYPE cairn_store_round_trip_seconds gauge");
            let _ = writeln!(out, "cairn_store_round_trip_seconds {}", rtt.as_secs_f64());
        }
        let _ = writeln!(out, "# HELP cairn_webhook_deliveries_total Custom-resource request deliveries: delivered, retried (one per retry), failed.");
        let _ = writeln!(out, "# TYPE cairn_webhook_deliveries_total counter");
        for (outcome, n) in engine.counters.deliveries() {
            let _ = writeln!(
                out,
                "cairn_webhook_deliveries_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
        out
    }
}
