// cairn-provider: Cairn providers in TypeScript, and Node.js Lambda
// handlers behind Cairn unchanged.

export * from "./errors";
export * from "./schema";
export * from "./provider";
export { Handler, server, serve } from "./serve";
export type { ServeOptions } from "./serve";
export { signatureProblem, SIGNATURE_TOLERANCE } from "./signing";
export { putResponse } from "./respond";
export { LambdaContext, invoke, loadHandler } from "./lambda";
export { runCdk, CREATE_FAILED_MARKER } from "./cdk";
export { hookRequest, hookServer, inProgress, internalFailure, nonCompliant, runHook, serveHook, success } from "./hook";
export type { Hook, HookRequest, HookResponse } from "./hook";
export type { CdkHandlers } from "./cdk";
export { handling, traceparentOf } from "./tracing";
