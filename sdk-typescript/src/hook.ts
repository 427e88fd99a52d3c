// Hooks: checks run before a resource is created, updated or deleted, before
// a stack's operation, and when a change set is made (CloudFormation's
// Hooks), served as a Cairn webhook that an AWS::CloudFormation::LambdaHook's
// LambdaFunction names. POST / takes CloudFormation's hook request, signed by
// Cairn, and is answered in the reply with CloudFormation's hook response.
//
//   import { Hook, nonCompliant, serveHook, success } from "cairn-provider";
//   const fileMode: Hook = {
//     preCreate: (req) => req.resourceProperties.Mode === "0600" ? success() : nonCompliant("Mode must be 0600"),
//   };
//   serveHook(fileMode);

import * as http from "node:http";
import { listenOn, readBody } from "./listen";
import { signatureProblem } from "./signing";

/** CloudFormation's hook response. */
export interface HookResponse {
  hookStatus: "SUCCESS" | "FAILED" | "IN_PROGRESS";
  errorCode?: string;
  message?: string;
  callbackContext?: Record<string, unknown>;
  callbackDelaySeconds?: number;
  clientRequestToken?: string;
}

/** One hook request, its fields by their TypeScript names. */
export interface HookRequest {
  clientRequestToken: string;
  stackId: string;
  hookTypeName: string;
  /** The hook's configuration's Properties. */
  hookModel: Record<string, unknown>;
  /** CREATE_PRE_PROVISION, UPDATE_PRE_PROVISION or DELETE_PRE_PROVISION. */
  invocationPoint: string;
  /** RESOURCE, STACK or CHANGE_SET. */
  targetType: string;
  /** The resource type (or STACK / CHANGE_SET). */
  targetName: string;
  targetLogicalId: string;
  resourceProperties: Record<string, unknown>;
  previousResourceProperties: Record<string, unknown>;
  template: Record<string, unknown>;
  invocation: number;
  callbackContext: Record<string, unknown>;
  /** The request as it came. */
  event: Record<string, unknown>;
}

type Verdict = HookResponse | Promise<HookResponse>;

/** A hook: each method defaults to success. */
export interface Hook {
  preCreate?(req: HookRequest): Verdict;
  preUpdate?(req: HookRequest): Verdict;
  preDelete?(req: HookRequest): Verdict;
}

export const success = (message?: string): HookResponse => (message ? { hookStatus: "SUCCESS", message } : { hookStatus: "SUCCESS" });
export const nonCompliant = (message: string): HookResponse => ({ hookStatus: "FAILED", errorCode: "NonCompliant", message });
export const internalFailure = (message: string): HookResponse => ({ hookStatus: "FAILED", errorCode: "InternalFailure", message });
export const inProgress = (callbackContext: Record<string, unknown>, callbackDelaySeconds = 0): HookResponse => ({
  hookStatus: "IN_PROGRESS",
  callbackContext,
  callbackDelaySeconds,
});

const object = (v: unknown): Record<string, unknown> => (v !== null && typeof v === "object" ? (v as Record<string, unknown>) : {});

/** The request `event` as a HookRequest. */
export function hookRequest(event: Record<string, unknown>): HookRequest {
  const data = object(event.requestData);
  const model = object(data.targetModel);
  const context = object(event.requestContext);
  return {
    clientRequestToken: String(event.clientRequestToken ?? ""),
    stackId: String(event.stackId ?? ""),
    hookTypeName: String(event.hookTypeName ?? ""),
    hookModel: object(event.hookModel),
    invocationPoint: String(event.actionInvocationPoint ?? ""),
    targetType: String(data.targetType ?? ""),
    targetName: String(data.targetName ?? ""),
    targetLogicalId: String(data.targetLogicalId ?? ""),
    resourceProperties: object(model.resourceProperties),
    previousResourceProperties: object(model.previousResourceProperties),
    template: object(model.template),
    invocation: Number(context.invocation ?? 1),
    callbackContext: object(context.callbackContext),
    event,
  };
}

/** The hook's response to `event`: by its invocation point, the token echoed; a throw is an InternalFailure naming it. */
export async function runHook(hook: Hook, event: Record<string, unknown>): Promise<HookResponse> {
  const req = hookRequest(event);
  const method = { CREATE_PRE_PROVISION: hook.preCreate, UPDATE_PRE_PROVISION: hook.preUpdate, DELETE_PRE_PROVISION: hook.preDelete }[
    req.invocationPoint
  ];
  let answer: HookResponse;
  if (!["CREATE_PRE_PROVISION", "UPDATE_PRE_PROVISION", "DELETE_PRE_PROVISION"].includes(req.invocationPoint)) {
    answer = internalFailure(`unknown invocation point ${req.invocationPoint}`);
  } else {
    try {
      answer = method === undefined ? success() : await method.call(hook, req);
    } catch (e) {
      answer = internalFailure(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    }
  }
  return { ...answer, clientRequestToken: answer.clientRequestToken ?? req.clientRequestToken };
}

/** An HTTP server for `hook` (not listening yet). */
export function hookServer(hook: Hook, o: { secret?: string } = {}): http.Server {
  const secret = o.secret ?? "";
  return http.createServer((req, res) => {
    const send = (status: number, body: string, type = "application/json") => {
      res.writeHead(status, { "content-type": type });
      res.end(body);
    };
    readBody(req).then(async (body) => {
      if (secret) {
        const problem = signatureProblem(secret, req.headers, body);
        if (problem) return send(401, problem, "text/plain");
      }
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
      } catch (e) {
        return send(400, `the body is not JSON: ${(e as Error).message}`, "text/plain");
      }
      send(200, JSON.stringify(await runHook(hook, event)));
    }, () => send(400, "the request could not be read", "text/plain"));
  });
}

/** Serves `hook` (command line: --listen HOST:PORT, --secret S or CAIRN_WEBHOOK_SECRET); prints where it listens. */
export function serveHook(hook: Hook, argv: string[] = process.argv.slice(2)): http.Server {
  let listen = "127.0.0.1:8080";
  let secret = process.env.CAIRN_WEBHOOK_SECRET ?? "";
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--listen") listen = argv[++i] ?? listen;
    else if (argv[i] === "--secret") secret = argv[++i] ?? "";
    else throw new Error(`unexpected ${argv[i]}: serveHook takes --listen HOST:PORT, --secret S`);
  }
  const s = hookServer(hook, { secret });
  listenOn(s, listen);
  return s;
}
