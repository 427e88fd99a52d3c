"""Continuing Cairn's trace in a handler.

Every request Cairn sends carries a W3C `traceparent` naming the span
that sent it. When OpenTelemetry's Python API is installed, each request
a handler serves runs in a SERVER span that is the child of that span, so
the handler's own spans (and those of the libraries it calls) join the
operation's trace. When nothing else set up a tracer provider and
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) names a collector,
one is set up with the OTLP/HTTP exporter (opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-http installed). Without OpenTelemetry,
nothing happens.
"""

import contextlib
import os
import threading

try:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # OpenTelemetry is optional.
    trace = None

_lock = threading.Lock()
_configured = False


def _configure():
    """Sets up an exporting tracer provider once, when the environment
    names a collector and the handler's code set up none."""
    global _configured
    with _lock:
        if _configured:
            return
        _configured = True
        if not (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
            return
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            return
        name = os.environ.get("OTEL_SERVICE_NAME", "cairn-provider")
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)


@contextlib.contextmanager
def handling(headers, name, attributes=None):
    """Runs the block in a SERVER span named `name`, the child of the
    request's `traceparent` (`headers`: any mapping); yields the span, or
    None without OpenTelemetry."""
    if trace is None:
        yield None
        return
    _configure()
    carrier = {str(k).lower(): v for k, v in dict(headers or {}).items()}
    parent = TraceContextTextMapPropagator().extract(carrier)
    tracer = trace.get_tracer("cairn_provider")
    with tracer.start_as_current_span(name, context=parent, kind=trace.SpanKind.SERVER,
                                      attributes=attributes or {}) as span:
        yield span
