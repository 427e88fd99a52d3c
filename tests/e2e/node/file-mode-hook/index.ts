// A Lambda hook function in TypeScript, as CloudFormation's documentation
// shapes one: it reads requestData.targetModel and answers hookStatus. It
// takes two IN_PROGRESS rounds before its verdict, carrying in its
// callbackContext the invocations it saw and the request's token, so its
// verdict says whether it was invoked again with both.

interface HookEvent {
  clientRequestToken: string;
  actionInvocationPoint: string;
  requestData: {
    targetName: string;
    targetType: string;
    targetLogicalId: string;
    targetModel: { resourceProperties?: Record<string, unknown> };
  };
  requestContext: { invocation: number; callbackContext?: Progress };
}

interface Progress {
  seen?: number[];
  token?: string;
}

interface HookResponse {
  hookStatus: "SUCCESS" | "FAILED" | "IN_PROGRESS";
  errorCode?: "NonCompliant" | "InternalFailure";
  message?: string;
  clientRequestToken: string;
  callbackContext?: Progress;
  callbackDelaySeconds?: number;
}

export const handler = async (event: HookEvent): Promise<HookResponse> => {
  const token = event.clientRequestToken;
  const progress = event.requestContext.callbackContext ?? {};
  const seen = [...(progress.seen ?? []), event.requestContext.invocation];
  if (progress.token !== undefined && progress.token !== token) {
    return { hookStatus: "FAILED", errorCode: "InternalFailure", message: `the token changed from ${progress.token}`, clientRequestToken: token };
  }
  if (seen.length < 3) {
    return { hookStatus: "IN_PROGRESS", message: "still checking", callbackContext: { seen, token }, callbackDelaySeconds: 0, clientRequestToken: token };
  }
  const mode = event.requestData.targetModel.resourceProperties?.Mode;
  if (mode !== "0600") {
    return {
      hookStatus: "FAILED",
      errorCode: "NonCompliant",
      message: `Mode must be 0600, not ${String(mode)} (invocations ${seen.join(", ")} with one clientRequestToken)`,
      clientRequestToken: token,
    };
  }
  return { hookStatus: "SUCCESS", message: "compliant", clientRequestToken: token };
};
