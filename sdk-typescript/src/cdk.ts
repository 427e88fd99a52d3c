// The AWS CDK provider framework's contract, served without Step
// Functions: `onEvent` answers each request ({PhysicalResourceId?, Data?,
// NoEcho?}; throwing fails it) and an optional `isComplete` is asked at
// once and then every query interval until it says {IsComplete: true} or
// the total timeout passes ("Operation timed out"). The handlers never see
// the ResponseURL: the adapter sends the response.

import { Handler, LambdaEvent, invoke } from "./lambda";

/** The physical id a failed Create reports: its Delete is then skipped. */
export const CREATE_FAILED_MARKER = "AWSCDK::CustomResourceProviderFramework::CREATE_FAILED";

export interface CdkHandlers {
  onEvent: Handler;
  isComplete?: Handler;
  /** Between two isComplete calls (the framework's default: 5 s). */
  queryIntervalMs: number;
  /** How long isComplete may take to say so (default 30 min, at most 2 h). */
  totalTimeoutMs: number;
  functionName: string;
  timeoutSeconds: number;
}

type Response = Record<string, unknown>;

function message(e: unknown): string {
  if (e instanceof Error) return e.message;
  return typeof e === "string" ? e : JSON.stringify(e);
}

function object(v: unknown, what: string): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (typeof v !== "object" || Array.isArray(v)) {
    throw new Error(`${what} must return an object, not ${JSON.stringify(v)}`);
  }
  return v as Record<string, unknown>;
}

/** The custom-resource response to `event` under the CDK contract. */
export async function runCdk(event: LambdaEvent, h: CdkHandlers): Promise<Response> {
  const { ResponseURL: _url, ...request } = event;
  void _url;
  const kind = request.RequestType;
  const current = request.PhysicalResourceId as string | undefined;
  const response: Response = {
    Status: "SUCCESS",
    StackId: request.StackId,
    RequestId: request.RequestId,
    LogicalResourceId: request.LogicalResourceId,
    PhysicalResourceId: current ?? request.RequestId,
  };
  // The Create failed: there is nothing for the handler to delete.
  if (kind === "Delete" && current === CREATE_FAILED_MARKER) return response;
  try {
    const out = object(await invoke(h.onEvent, request, h.functionName, h.timeoutSeconds), "onEvent");
    const id = (out.PhysicalResourceId as string | undefined) ?? (kind === "Create" ? request.RequestId : current);
    if (kind === "Delete" && id !== current) {
      throw new Error(`DELETE: cannot change the physical resource ID from "${current}" to "${id}" during deletion`);
    }
    response.PhysicalResourceId = id;
    let data = object(out.Data, "onEvent's Data");
    if (h.isComplete) {
      const started = Date.now();
      const asked = { ...request, ...out, PhysicalResourceId: id };
      for (;;) {
        const done = object(await invoke(h.isComplete, asked, h.functionName, h.timeoutSeconds), "isComplete");
        if (done.IsComplete === true) {
          data = { ...data, ...object(done.Data, "isComplete's Data") };
          break;
        }
        if (done.Data !== undefined) {
          throw new Error('"Data" is not allowed if "IsComplete" is "False"');
        }
        if (Date.now() - started + h.queryIntervalMs > h.totalTimeoutMs) {
          throw new Error("Operation timed out");
        }
        await new Promise((r) => setTimeout(r, h.queryIntervalMs));
      }
    }
    if (Object.keys(data).length > 0) response.Data = data;
    if (out.NoEcho === true) response.NoEcho = true;
  } catch (e) {
    response.Status = "FAILED";
    response.Reason = message(e);
    if (kind === "Create") response.PhysicalResourceId = CREATE_FAILED_MARKER;
    delete response.Data;
  }
  return response;
}
