// Continuing Cairn's trace in a handler.
//
// Every request Cairn sends carries a W3C `traceparent` naming the span
// that sent it. When the handler's process has OpenTelemetry's API
// (`@opentelemetry/api`, with a tracer provider the handler's own setup
// registered, e.g. the Node SDK's), each request a handler serves runs in a
// SERVER span that is the child of that span, so the handler's own spans
// join the operation's trace. Without it, nothing happens: the SDK has no
// dependencies.

import type * as http from "node:http";

// The part of `@opentelemetry/api` used here, typed structurally so that
// the SDK compiles without it.
interface SpanContext { traceId: string; spanId: string; traceFlags: number; isRemote?: boolean }
interface Span {
  setStatus(status: { code: number; message?: string }): void;
  end(): void;
}
interface Tracer {
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: { kind: number; attributes: Record<string, string> },
    context: unknown,
    fn: F,
  ): ReturnType<F>;
}
interface Api {
  ROOT_CONTEXT: unknown;
  context: { active(): unknown };
  trace: { setSpanContext(context: unknown, span: SpanContext): unknown; getTracer(name: string): Tracer };
  TraceFlags: { NONE: number; SAMPLED: number };
  SpanKind: { SERVER: number };
  SpanStatusCode: { ERROR: number };
}

let api: Api | null | undefined;

function loadApi(): Api | null {
  if (api === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      api = require("@opentelemetry/api") as Api;
    } catch {
      api = null;
    }
  }
  return api;
}

/** The trace context a `traceparent` header names (version 00), if any. */
export function traceparentOf(headers: http.IncomingHttpHeaders): { traceId: string; spanId: string; sampled: boolean } | undefined {
  const value = headers["traceparent"];
  const text = Array.isArray(value) ? value[0] : value;
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec((text ?? "").trim());
  if (!m || /^0+$/.test(m[1]) || /^0+$/.test(m[2])) return undefined;
  return { traceId: m[1], spanId: m[2], sampled: (parseInt(m[3], 16) & 1) === 1 };
}

/**
 * Runs `work` in a SERVER span named `name` whose parent is the request's
 * `traceparent` (when OpenTelemetry's API is installed); `work`'s own
 * spans are its children.
 */
export async function handling<T>(
  headers: http.IncomingHttpHeaders,
  name: string,
  attributes: Record<string, string>,
  work: () => Promise<T>,
): Promise<T> {
  const otel = loadApi();
  if (otel === null) return work();
  const parent = traceparentOf(headers);
  const context = parent === undefined
    ? otel.context.active()
    : otel.trace.setSpanContext(otel.ROOT_CONTEXT, {
      traceId: parent.traceId,
      spanId: parent.spanId,
      traceFlags: parent.sampled ? otel.TraceFlags.SAMPLED : otel.TraceFlags.NONE,
      isRemote: true,
    });
  const tracer = otel.trace.getTracer("cairn-provider");
  return tracer.startActiveSpan(name, { kind: otel.SpanKind.SERVER, attributes }, context, async (span) => {
    try {
      return await work();
    } catch (e) {
      span.setStatus({ code: otel.SpanStatusCode.ERROR, message: String(e) });
      throw e;
    } finally {
      span.end();
    }
  });
}
