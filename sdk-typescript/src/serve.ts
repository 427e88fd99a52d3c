// Serving a Provider as a custom-resource webhook, as Cairn's Rust handler
// kit and the Python SDK do: GET /schema lists the types; POST / takes a
// request signed by Cairn, answers 200 at once, runs the provider and PUTs
// the response to the request's ResponseURL (retried), or, with
// respondInReply, answers the POST with it.

import * as crypto from "node:crypto";
import * as http from "node:http";
import { handling } from "./tracing";
import { InvalidRequest, NotFound, ProviderError } from "./errors";
import { Provider, Request, Result } from "./provider";
import { putResponse } from "./respond";
import { ResourceType } from "./schema";
import { listenOn, readBody } from "./listen";
import { signatureProblem } from "./signing";

type Event = Record<string, unknown>;
type Response = Record<string, unknown>;

function failedCreateId(event: Event): string {
  const stack = String(event.StackId ?? "").split(":stack/").pop()?.split("/")[0] ?? "";
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const suffix = Array.from(crypto.randomBytes(8), (b) => alphabet[b % alphabet.length]).join("");
  return `${stack}_${String(event.LogicalResourceId)}_${suffix}`;
}

/** Runs a provider for custom-resource requests. */
export class Handler {
  private readonly types: Map<string, ResourceType>;

  constructor(readonly provider: Provider) {
    this.types = new Map(provider.types.map((t) => [t.name, t]));
  }

  schemas(): { Schemas: Record<string, unknown>[] } {
    return { Schemas: this.provider.types.map((t) => t.schema()) };
  }

  private type(name: unknown): ResourceType {
    const t = this.types.get(String(name));
    if (t) return t;
    if (this.types.size === 1) return [...this.types.values()][0];
    throw new InvalidRequest(`this handler does not serve ${String(name)}; it serves ${[...this.types.keys()].join(", ")}`);
  }

  private request(event: Event, t: ResourceType, coerce: boolean): Request {
    const props = coerce ? t.coerce(event.ResourceProperties as Record<string, unknown>) : {};
    const oldRaw = event.OldResourceProperties as Record<string, unknown> | undefined;
    const old = coerce && oldRaw !== undefined ? t.coerce(oldRaw) : undefined;
    const tags = (k: string) => ({ ...((event[k] as Record<string, string> | undefined) ?? {}) });
    const changed = old
      ? [...new Set([...Object.keys(old), ...Object.keys(props)])]
          .filter((k) => JSON.stringify((old as Record<string, unknown>)[k]) !== JSON.stringify((props as Record<string, unknown>)[k]))
          .sort()
      : [];
    return {
      requestType: String(event.RequestType),
      typeName: String(event.ResourceType),
      logicalId: String(event.LogicalResourceId),
      requestId: String(event.RequestId),
      stackId: String(event.StackId),
      physicalId: event.PhysicalResourceId as string | undefined,
      properties: props,
      oldProperties: old,
      tags: tags("DesiredResourceTags"),
      previousTags: tags("PreviousResourceTags"),
      systemTags: tags("SystemTags"),
      typeConfiguration: event.TypeConfiguration as Record<string, unknown> | undefined,
      changed,
      event,
    };
  }

  /** The response to one request, in CloudFormation's shape. */
  async run(event: Event): Promise<Response> {
    const response: Response = {
      Status: "SUCCESS",
      StackId: event.StackId,
      RequestId: event.RequestId,
      LogicalResourceId: event.LogicalResourceId,
      PhysicalResourceId: event.PhysicalResourceId ?? "",
    };
    const fill = (made: Result | void, current: string | undefined) => {
      response.PhysicalResourceId = made?.physicalId ?? current ?? "";
      if (made?.attributes && Object.keys(made.attributes).length > 0) response.Data = made.attributes;
      if (made?.noEcho) response.NoEcho = true;
    };
    try {
      const t = this.type(event.ResourceType);
      const kind = event.RequestType;
      if (kind === "Read") {
        // A read names the resource only: no properties to coerce.
        response.Data = this.provider.read ? await this.provider.read(this.request(event, t, false)) : { Outcome: "NOT_SUPPORTED" };
        return response;
      }
      const request = this.request(event, t, true);
      if (kind === "Create") fill(await this.provider.create(request), undefined);
      else if (kind === "Update") fill(await this.provider.update(request), request.physicalId);
      else if (kind === "Delete") {
        try {
          await this.provider.delete(request);
        } catch (e) {
          if (!(e instanceof NotFound)) throw e; // already gone: deleted
        }
      } else if (kind === "CheckDrift") {
        response.Data = this.provider.checkDrift ? await this.provider.checkDrift(request) : { Status: "NOT_CHECKED" };
      } else throw new InvalidRequest(`unknown RequestType ${JSON.stringify(kind)}`);
    } catch (e) {
      const pe = e instanceof ProviderError ? e : undefined;
      if (!pe) console.error(e);
      response.Status = "FAILED";
      response.Reason = pe ? pe.message : `${(e as Error)?.name ?? "Error"}: ${(e as Error)?.message ?? String(e)}`;
      response.ErrorCode = pe ? pe.kind : "InternalFailure";
      response.PhysicalResourceId = pe?.physicalId ?? (event.PhysicalResourceId as string | undefined) ?? failedCreateId(event);
      delete response.Data;
    }
    return response;
  }
}

export interface ServeOptions {
  listen?: string;
  secret?: string;
  respondInReply?: boolean;
}


/** An HTTP server for `provider` (not listening yet). */
export function server(provider: Provider, o: ServeOptions = {}): http.Server {
  const handler = new Handler(provider);
  const secret = o.secret ?? "";
  return http.createServer((req, res) => {
    const send = (status: number, body: string, type = "application/json") => {
      res.writeHead(status, { "content-type": type });
      res.end(body);
    };
    if (req.method === "GET") {
      if ((req.url ?? "").replace(/\/+$/, "") === "/schema") send(200, JSON.stringify(handler.schemas()));
      else send(404, "GET /schema lists the types; POST / takes requests", "text/plain");
      return;
    }
    readBody(req).then(async (body) => {
      if (secret) {
        const problem = signatureProblem(secret, req.headers, body);
        if (problem) return send(401, problem, "text/plain");
      }
      let event: Event;
      try {
        event = JSON.parse(body.toString("utf8")) as Event;
      } catch (e) {
        return send(400, `the body is not JSON: ${(e as Error).message}`, "text/plain");
      }
      // The request's span, the child of the Cairn call's (OpenTelemetry).
      const name = `${event.RequestType ?? "Request"} ${event.ResourceType ?? ""}`.trim();
      const attributes = { "cairn.request_id": String(event.RequestId ?? ""), "cairn.logical_id": String(event.LogicalResourceId ?? "") };
      const run = () => handling(req.headers, name, attributes, () => handler.run(event));
      if (o.respondInReply) return send(200, JSON.stringify(await run()));
      send(200, "");
      const response = await run();
      if (typeof event.ResponseURL === "string") await putResponse(event.ResponseURL, response);
    }, () => send(400, "the request could not be read", "text/plain"));
  });
}

/**
 * Serves `provider` until the process ends. Command line: `--listen
 * HOST:PORT` (default 127.0.0.1:8080), `--secret S` (or
 * CAIRN_WEBHOOK_SECRET), `--respond-in-reply`. Prints `listening on
 * HOST:PORT` first.
 */
export function serve(provider: Provider, argv: string[] = process.argv.slice(2)): http.Server {
  const o: Required<ServeOptions> = {
    listen: "127.0.0.1:8080",
    secret: process.env.CAIRN_WEBHOOK_SECRET ?? "",
    respondInReply: false,
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--listen") o.listen = argv[++i] ?? o.listen;
    else if (argv[i] === "--secret") o.secret = argv[++i] ?? "";
    else if (argv[i] === "--respond-in-reply") o.respondInReply = true;
    else throw new Error(`unexpected ${argv[i]}: serve takes --listen HOST:PORT, --secret S, --respond-in-reply`);
  }
  const s = server(provider, o);
  listenOn(s, o.listen);
  return s;
}
