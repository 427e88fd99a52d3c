//! W3C trace context of the current span: what an operation records so a
//! run that resumes it links to its trace. Spans are `tracing`'s; when the
//! binary exports them (OpenTelemetry), each carries a span context, else
//! none and nothing here does anything.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The current span's `traceparent` (`00-<trace id>-<span id>-<flags>`),
/// when it has a valid span context.
pub fn current_traceparent() -> Option<String> {
    let cx = tracing::Span::current().context();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// Records `span`'s trace id in its `trace_id` field (the JSON logs show
/// it on every line written in the span), when traces are exported.
pub fn record_trace_id(span: &tracing::Span) {
    let cx = span.context();
    let id = cx.span().span_context().trace_id();
    if id != TraceId::INVALID {
        span.record("trace_id", id.to_string().as_str());
    }
}

/// The span context a `traceparent` names (version 00), if it is one.
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 {
        return None;
    }
    let sc = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}

/// Links `span` to the trace `traceparent` names (a resumed operation to
/// the run it continues).
pub fn link(span: &tracing::Span, traceparent: &str) {
    if let Some(sc) = parse_traceparent(traceparent) {
        span.add_link(sc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_read_as_w3c_writes_them() {
        let sc =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_sampled());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-xyz-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        // Without an exporting subscriber there is no context.
        assert_eq!(current_traceparent(), None);
    }
}
