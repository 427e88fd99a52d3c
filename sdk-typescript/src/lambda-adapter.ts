#!/usr/bin/env node
// Runs an unchanged Node.js Lambda custom-resource handler, an unchanged
// Lambda hook function (invoked synchronously: what it returns, hookStatus
// SUCCESS, FAILED or IN_PROGRESS, is the answer), or an unchanged macro
// function (invoked synchronously: what it returns, {requestId, status,
// fragment, errorMessage}, is the answer), behind Cairn's webhook, as the
// Python SDK's lambda_adapter does for Python handlers:
//
//   cairn-lambda-adapter index.handler [--dir DIR] [--listen 127.0.0.1:8081] [--secret S] [--timeout-seconds 60]
//   cairn-lambda-adapter --on-event index.onEvent [--is-complete index.isComplete]
//       [--query-interval-seconds 5] [--total-timeout-seconds 1800] [--dir DIR] ...
//
// Each signed request is answered 200 at once and the handler runs with a
// Lambda-like event and context, as an asynchronous invocation. A plain
// handler PUTs its response itself (cfn-response, inline or npm's); with
// --on-event the CDK provider framework's contract applies and the adapter
// PUTs it. A Lambda handler has no schema; --schema FILE (Cairn's schema
// document, as GET /schema answers it: {"Schemas": [...]}) gives it one, so
// Cairn can plan replacements and `cairn provider test` can run against it.
// Prints "listening on HOST:PORT" when ready.

import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { CdkHandlers, runCdk } from "./cdk";
import { Handler, expectResponse, invoke, lambdaEnvironment, loadHandler } from "./lambda";
import { putResponse } from "./respond";
import { listenOn, readBody } from "./listen";
import { handling } from "./tracing";
import { signatureProblem } from "./signing";

interface Options {
  handler?: string;
  onEvent?: string;
  isComplete?: string;
  dir: string;
  listen: string;
  secret: string;
  timeoutSeconds: number;
  queryIntervalSeconds: number;
  totalTimeoutSeconds: number;
  schema?: string;
}

const USAGE =
  "usage: cairn-lambda-adapter (FILE.FUNCTION | --on-event FILE.FUNCTION [--is-complete FILE.FUNCTION] [--query-interval-seconds 5] [--total-timeout-seconds 1800]) [--dir DIR] [--listen HOST:PORT] [--secret S] [--timeout-seconds 60] [--schema FILE]";

/** The schema document --schema names, checked to be one. */
function schemaDocument(file: string): string {
  const text = fs.readFileSync(file, "utf8");
  const doc = JSON.parse(text) as { Schemas?: unknown };
  if (!Array.isArray(doc.Schemas)) {
    throw new Error(`${file} is not a schema document: it holds {"Schemas": [...]}, each as Cairn's GET /schema answers`);
  }
  return JSON.stringify(doc);
}

function parse(argv: string[]): Options {
  const o: Options = {
    dir: process.cwd(),
    listen: "127.0.0.1:8081",
    secret: process.env.CAIRN_WEBHOOK_SECRET ?? "",
    timeoutSeconds: 60,
    queryIntervalSeconds: 5,
    totalTimeoutSeconds: 1800,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${USAGE}`);
      return v;
    };
    const seconds = (): number => {
      const v = Number(value());
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} takes a number of seconds\n${USAGE}`);
      return v;
    };
    switch (a) {
      case "--dir": o.dir = path.resolve(value()); break;
      case "--listen": o.listen = value(); break;
      case "--secret": o.secret = value(); break;
      case "--timeout-seconds": o.timeoutSeconds = seconds(); break;
      case "--on-event": o.onEvent = value(); break;
      case "--is-complete": o.isComplete = value(); break;
      case "--query-interval-seconds": o.queryIntervalSeconds = seconds(); break;
      case "--total-timeout-seconds": o.totalTimeoutSeconds = seconds(); break;
      case "--schema": o.schema = path.resolve(value()); break;
      default:
        if (a.startsWith("-") || o.handler !== undefined) throw new Error(`unexpected ${a}\n${USAGE}`);
        o.handler = a;
    }
  }
  if ((o.handler === undefined) === (o.onEvent === undefined)) {
    throw new Error(`name a handler, or --on-event (not both)\n${USAGE}`);
  }
  if (o.isComplete !== undefined && o.onEvent === undefined) {
    throw new Error(`--is-complete goes with --on-event\n${USAGE}`);
  }
  if (o.totalTimeoutSeconds > 7200) {
    throw new Error("--total-timeout-seconds is at most 7200 (2 hours), as the CDK framework's totalTimeout");
  }
  return o;
}

/** What runs one request. */
type Serve = (event: Record<string, unknown>) => Promise<void>;

async function plain(o: Options, spec: string, functionName: string): Promise<Serve> {
  const handler = await loadHandler(spec, o.dir);
  return async (event) => {
    const expected = await expectResponse(event.ResponseURL);
    try {
      await invoke(handler, event, functionName, o.timeoutSeconds);
    } catch (e) {
      console.error(`the handler failed on ${String(event.RequestType)} ${String(event.LogicalResourceId)}:`, e);
      // On Lambda, CloudFormation would wait an hour for an answer that
      // never comes; here the failure is the answer, unless the handler
      // PUT one before it threw.
      await new Promise((r) => setTimeout(r, 1000));
      if (!expected.answered() && typeof event.ResponseURL === "string") {
        await putResponse(event.ResponseURL, {
          Status: "FAILED",
          Reason: `the handler failed before answering: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`,
          PhysicalResourceId: event.PhysicalResourceId ?? `${functionName}-${String(event.RequestId)}`,
          StackId: event.StackId,
          RequestId: event.RequestId,
          LogicalResourceId: event.LogicalResourceId,
        });
      }
    } finally {
      // Its PUT may still be on the way: keep its redirect a while.
      setTimeout(expected.done, o.timeoutSeconds * 1000).unref();
    }
  };
}

async function cdk(o: Options, onEvent: string, functionName: string): Promise<Serve> {
  const h: CdkHandlers = {
    onEvent: await loadHandler(onEvent, o.dir),
    isComplete: o.isComplete === undefined ? undefined : ((await loadHandler(o.isComplete, o.dir)) as Handler),
    queryIntervalMs: o.queryIntervalSeconds * 1000,
    totalTimeoutMs: o.totalTimeoutSeconds * 1000,
    functionName,
    timeoutSeconds: o.timeoutSeconds,
  };
  return async (event) => {
    const response = await runCdk(event, h);
    if (typeof event.ResponseURL === "string") await putResponse(event.ResponseURL, response);
  };
}


/** A Lambda hook's invocation (CloudFormation's hook request). */
export function isHookRequest(event: Record<string, unknown>): boolean {
  return "clientRequestToken" in event && "actionInvocationPoint" in event;
}

/**
 * A Lambda hook's answer to `event`: what the function returns (hookStatus
 * SUCCESS, FAILED or IN_PROGRESS), or a FAILED InternalFailure naming what it
 * threw or returned that is not a hook response.
 */
export async function runHook(
  handler: Handler,
  event: Record<string, unknown>,
  functionName: string,
  timeoutSeconds: number,
): Promise<Record<string, unknown>> {
  const token = event.clientRequestToken;
  const failed = (message: string) => ({ hookStatus: "FAILED", errorCode: "InternalFailure", message, clientRequestToken: token });
  let answer: unknown;
  try {
    answer = await invoke(handler, event, functionName, timeoutSeconds);
  } catch (e) {
    return failed(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  }
  if (typeof answer !== "object" || answer === null || !("hookStatus" in answer)) {
    return failed(`the hook function returned ${JSON.stringify(answer)?.slice(0, 300)}, not a hook response ({hookStatus, errorCode, message, ...})`);
  }
  const out = answer as Record<string, unknown>;
  if (out.clientRequestToken === undefined) out.clientRequestToken = token;
  return out;
}

/** A macro's invocation (CloudFormation's macro request). */
export function isMacroRequest(event: Record<string, unknown>): boolean {
  return "transformId" in event && "fragment" in event;
}

/**
 * A macro Lambda's answer to `event`: what the function returns, or a
 * failure naming what it threw.
 */
export async function runMacro(
  handler: Handler,
  event: Record<string, unknown>,
  functionName: string,
  timeoutSeconds: number,
): Promise<unknown> {
  try {
    return await invoke(handler, event, functionName, timeoutSeconds);
  } catch (e) {
    return {
      requestId: event.requestId,
      status: "failure",
      errorMessage: e instanceof Error ? `${e.name}: ${e.message}` : String(e),
    };
  }
}

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2));
  const spec = (o.handler ?? o.onEvent) as string;
  const functionName = path.basename(spec.slice(0, spec.lastIndexOf(".")) || spec);
  lambdaEnvironment(functionName, o.dir);
  const schema = o.schema === undefined ? undefined : schemaDocument(o.schema);
  const serve = o.onEvent !== undefined ? await cdk(o, o.onEvent, functionName) : await plain(o, spec, functionName);
  // A Lambda hook or a macro is invoked synchronously: its return value is
  // the answer.
  const syncHandler = o.handler !== undefined ? await loadHandler(o.handler, o.dir) : undefined;
  const server = http.createServer((req, res) => {
    const send = (status: number, text: string) => {
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(text);
    };
    if (req.method === "GET" && schema !== undefined && (req.url ?? "").replace(/\/+$/, "") === "/schema") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(schema);
      return;
    }
    if (req.method !== "POST") {
      send(404, "POST / takes Cairn's custom-resource requests (GET /schema: give --schema FILE)");
      return;
    }
    readBody(req).then((body) => {
      if (o.secret) {
        const problem = signatureProblem(o.secret, req.headers, body);
        if (problem) {
          send(401, problem);
          return;
        }
      }
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
      } catch (e) {
        send(400, `the body is not JSON: ${(e as Error).message}`);
        return;
      }
      const answerWith = (answer: Promise<unknown>) =>
        answer.then((a) => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(a ?? null));
        }, (e) => send(500, String(e)));
      if (syncHandler !== undefined && isMacroRequest(event)) {
        const name = `macro ${String(event.transformId ?? "")}`.trim();
        answerWith(handling(req.headers, name, {}, () => runMacro(syncHandler, event, functionName, o.timeoutSeconds)));
        return;
      }
      if (syncHandler !== undefined && isHookRequest(event)) {
        const hook = `hook ${String(event.hookTypeName ?? "")}`.trim();
        answerWith(handling(req.headers, hook, {}, () => runHook(syncHandler, event, functionName, o.timeoutSeconds)));
        return;
      }
      send(200, "");
      // Each invocation in a span continuing Cairn's trace (OpenTelemetry).
      const name = `${String(event.RequestType ?? "Request")} ${String(event.ResourceType ?? "")}`.trim();
      const attributes = { "cairn.request_id": String(event.RequestId ?? ""), "cairn.logical_id": String(event.LogicalResourceId ?? "") };
      handling(req.headers, name, attributes, () => serve(event)).catch((e) => console.error("the request failed:", e));
    }, () => send(400, "the request could not be read"));
  });
  listenOn(server, o.listen);
}

main().catch((e: unknown) => {
  console.error((e as Error).message ?? e);
  process.exit(2);
});
