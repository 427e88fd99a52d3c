// What an unchanged Node.js Lambda handler expects around it: Lambda's
// context object and environment, `require('cfn-response')` for inline
// (ZipFile) code, and its response PUT reaching Cairn. AWS's cfn-response
// sends its PUT over HTTPS to port 443 of the ResponseURL's host, whatever
// the URL says; Cairn's ResponseURL is http:// on a port of its own, so a
// PUT to the host and path of a ResponseURL in flight is sent there. The CA
// of Cairn's callback listener (which speaks TLS on the same port) is
// trusted too, for handlers that use https themselves.

import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import * as tls from "node:tls";
import http = require("node:http");
import https = require("node:https");
import Module = require("node:module");

/** A Lambda event: custom-resource requests and anything else. */
export type LambdaEvent = Record<string, unknown>;

/** Lambda's Node.js context, with the legacy done/succeed/fail. */
export class LambdaContext {
  readonly functionName: string;
  readonly functionVersion = "$LATEST";
  readonly invokedFunctionArn: string;
  readonly memoryLimitInMB = "128";
  readonly awsRequestId = crypto.randomUUID();
  readonly logGroupName: string;
  readonly logStreamName: string;
  readonly identity = undefined;
  readonly clientContext = undefined;
  callbackWaitsForEmptyEventLoop = true;
  private readonly deadline: number;
  private readonly finish: (error: unknown, result: unknown) => void;

  constructor(functionName: string, timeoutSeconds: number, finish: (error: unknown, result: unknown) => void) {
    const region = process.env.AWS_REGION ?? "us-east-1";
    this.functionName = functionName;
    this.invokedFunctionArn = `arn:aws:lambda:${region}:123456789012:function:${functionName}`;
    this.logGroupName = `/aws/lambda/${functionName}`;
    const day = new Date().toISOString().slice(0, 10).replace(/-/g, "/");
    this.logStreamName = `${day}/[$LATEST]${crypto.randomBytes(16).toString("hex")}`;
    this.deadline = Date.now() + timeoutSeconds * 1000;
    this.finish = finish;
  }

  getRemainingTimeInMillis(): number {
    return Math.max(0, this.deadline - Date.now());
  }

  done(error?: unknown, result?: unknown): void {
    this.finish(error ?? null, result);
  }

  succeed(result?: unknown): void {
    this.finish(null, result);
  }

  fail(error?: unknown): void {
    this.finish(error ?? new Error("failed"), undefined);
  }
}

/** Lambda's environment variables, for those not set already. */
export function lambdaEnvironment(functionName: string, taskRoot: string): void {
  const region = process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? "us-east-1";
  const major = process.versions.node.split(".")[0];
  const defaults: Record<string, string> = {
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
    AWS_LAMBDA_FUNCTION_NAME: functionName,
    AWS_LAMBDA_FUNCTION_VERSION: "$LATEST",
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: "128",
    AWS_EXECUTION_ENV: `AWS_Lambda_nodejs${major}.x`,
    LAMBDA_TASK_ROOT: taskRoot,
  };
  for (const [k, v] of Object.entries(defaults)) {
    if (process.env[k] === undefined) process.env[k] = v;
  }
}

/** ResponseURLs in flight, by host and path, and whether a PUT went to one. */
const inFlight = new Map<string, { url: URL; answered: boolean }>();
const trusted = new Map<string, string>();

function key(host: string, pathAndQuery: string): string {
  return `${host}${pathAndQuery}`;
}

/**
 * A request to `host:port/path` with `method`: marks the ResponseURL in
 * flight there answered (a PUT); returns that URL when the request is
 * aimed at port 443 and must be sent to the URL's own port instead.
 */
function seen(o: http.RequestOptions): URL | undefined {
  const host = o.hostname ?? o.host;
  if (!host || !o.path) return undefined;
  const entry = inFlight.get(key(host, o.path));
  if (!entry) return undefined;
  if ((o.method ?? "GET").toUpperCase() === "PUT") entry.answered = true;
  return o.port === undefined || o.port === null || String(o.port) === "443" ? entry.url : undefined;
}

let redirecting = false;

/** Sends HTTPS requests aimed at a ResponseURL's host:443 to the URL. */
function redirectResponsePuts(): void {
  if (redirecting) return;
  redirecting = true;
  const original = https.request;
  const originalHttp = http.request;
  // A handler that PUTs over plain HTTP to the URL is only noted.
  (http as { request: unknown }).request = function (this: unknown, ...args: unknown[]) {
    const [first] = args;
    if (first && typeof first === "object" && !(first instanceof URL)) seen(first as http.RequestOptions);
    return (originalHttp as (...a: unknown[]) => http.ClientRequest).apply(http, args);
  };
  const patched = function (this: unknown, ...args: unknown[]): http.ClientRequest {
    const [first, second] = args;
    if (first && typeof first === "object" && !(first instanceof URL)) {
      const o = first as https.RequestOptions;
      const target = seen(o);
      if (target && target.protocol === "http:") {
        const { agent: _agent, ...rest } = o;
        void _agent;
        const options: http.RequestOptions = {
          ...rest,
          protocol: "http:",
          hostname: target.hostname,
          host: undefined,
          port: target.port,
        };
        return http.request(options, second as (res: http.IncomingMessage) => void);
      }
    }
    return (original as (...a: unknown[]) => http.ClientRequest).apply(https, args);
  };
  (https as { request: unknown }).request = patched;
  (https as { get: unknown }).get = function (...args: unknown[]) {
    const req = patched(...args);
    req.end();
    return req;
  };
}

/** A ResponseURL the adapter watches for its handler's PUT. */
export interface Expected {
  /** Whether the handler PUT something to it (as far as can be seen). */
  answered(): boolean;
  /** Stops watching it. */
  done(): void;
}

const unwatched: Expected = { answered: () => false, done: () => {} };

/**
 * Gets the callback listener behind an http:// ResponseURL ready for the
 * handler's PUT: its CA trusted (fetched once from /cairn-ca.pem), its
 * host:443 sent to its port, the PUT noted.
 */
export async function expectResponse(responseUrl: unknown): Promise<Expected> {
  if (typeof responseUrl !== "string") return unwatched;
  let u: URL;
  try {
    u = new URL(responseUrl);
  } catch {
    return unwatched;
  }
  if (u.protocol !== "http:") return unwatched;
  redirectResponsePuts();
  const k = key(u.hostname, u.pathname + u.search);
  const entry = { url: u, answered: false };
  inFlight.set(k, entry);
  if (!trusted.has(u.host)) {
    trusted.set(u.host, await fetchCa(`http://${u.host}/cairn-ca.pem`));
    const extra = [...trusted.values()].filter((p) => p.includes("BEGIN CERTIFICATE"));
    if (extra.length > 0) {
      https.globalAgent.options.ca = [...tls.rootCertificates, ...extra];
    }
  }
  return { answered: () => entry.answered, done: () => inFlight.delete(k) };
}

function fetchCa(url: string): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 5000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve(res.statusCode === 200 ? text : ""));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(""));
  });
}

let inlineModules = false;

/**
 * `require('cfn-response')` answers with this package's copy of the
 * module Lambda provides to inline code, unless the handler brings its
 * own (npm's `cfn-response` in its node_modules).
 */
function provideInlineModules(): void {
  if (inlineModules) return;
  inlineModules = true;
  const m = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
  const resolve = m._resolveFilename;
  m._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]): string {
    try {
      return resolve.call(this, request, ...rest);
    } catch (e) {
      if (request === "cfn-response") return path.join(__dirname, "cfn-response.js");
      throw e;
    }
  };
}

/** A Lambda handler: promise-returning or callback style. */
export type Handler = (event: LambdaEvent, context: LambdaContext, callback?: (error: unknown, result?: unknown) => void) => unknown;

/** `file.function` (Lambda's handler setting) loaded from `dir`. */
export async function loadHandler(spec: string, dir: string): Promise<Handler> {
  const dot = spec.lastIndexOf(".");
  if (dot <= 0) {
    throw new Error(`the handler is file.function (Lambda's handler setting), not ${spec}`);
  }
  provideInlineModules();
  const base = path.resolve(dir, spec.slice(0, dot));
  const name = spec.slice(dot + 1);
  // As Lambda looks for it: FILE.js, FILE.mjs (an ES module), FILE.cjs.
  const file = [".js", ".mjs", ".cjs"].map((ext) => base + ext).find((f) => fs.existsSync(f));
  if (file === undefined) {
    throw new Error(`no ${base}.js, .mjs or .cjs: the handler ${spec} is FILE.FUNCTION, FILE relative to ${dir}`);
  }
  let module: Record<string, unknown>;
  try {
    if (file.endsWith(".mjs")) throw Object.assign(new Error("an ES module"), { code: "ERR_REQUIRE_ESM" });
    module = require(file) as Record<string, unknown>;
  } catch (e) {
    if ((e as { code?: string }).code !== "ERR_REQUIRE_ESM") throw e;
    const url = require("node:url") as typeof import("node:url");
    module = (await import(url.pathToFileURL(file).href)) as Record<string, unknown>;
  }
  const fn = module[name];
  if (typeof fn !== "function") {
    throw new Error(`${file} exports no function ${name}`);
  }
  return fn as Handler;
}

/**
 * Runs `handler` on `event` as Lambda would: its result is what it
 * returns (a promise), passes to its callback, or to context.done/succeed/
 * fail, whichever comes first.
 */
export function invoke(handler: Handler, event: LambdaEvent, functionName: string, timeoutSeconds: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (error: unknown, result: unknown) => {
      if (settled) return;
      settled = true;
      if (error) reject(error);
      else resolve(result);
    };
    const context = new LambdaContext(functionName, timeoutSeconds, finish);
    try {
      const out = handler(event, context, (error, result) => finish(error, result));
      if (out && typeof (out as Promise<unknown>).then === "function") {
        (out as Promise<unknown>).then(
          (r) => finish(null, r),
          (e) => finish(e ?? new Error("the handler's promise was rejected"), undefined),
        );
      } else if (handler.length < 3 && out !== undefined) {
        finish(null, out);
      }
    } catch (e) {
      finish(e, undefined);
    }
  });
}
