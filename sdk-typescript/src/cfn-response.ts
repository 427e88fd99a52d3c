// The `cfn-response` module Lambda gives inline (ZipFile) Node.js code, as
// AWS documents it: send(event, context, status, data, physicalResourceId,
// noEcho) PUTs the response over HTTPS to the ResponseURL's host, port 443,
// with the log stream as the reason (and as the physical id when none is
// given), then calls context.done(). There is no reason parameter.

import https = require("node:https");

export const SUCCESS = "SUCCESS";
export const FAILED = "FAILED";

interface Event {
  ResponseURL: string;
  StackId?: string;
  RequestId?: string;
  LogicalResourceId?: string;
}

interface Context {
  logStreamName: string;
  done: (error?: unknown, result?: unknown) => void;
}

export function send(
  event: Event,
  context: Context,
  responseStatus: string,
  responseData?: object,
  physicalResourceId?: string,
  noEcho?: boolean,
): void {
  const responseBody = JSON.stringify({
    Status: responseStatus,
    Reason: "See the details in CloudWatch Log Stream: " + context.logStreamName,
    PhysicalResourceId: physicalResourceId || context.logStreamName,
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
    NoEcho: noEcho || false,
    Data: responseData,
  });
  console.log("Response body:\n", responseBody);
  const target = new URL(event.ResponseURL);
  const request = https.request(
    {
      hostname: target.hostname,
      port: 443,
      path: target.pathname + target.search,
      method: "PUT",
      headers: { "content-type": "", "content-length": responseBody.length },
    },
    (response) => {
      console.log("Status code: " + response.statusCode);
      console.log("Status message: " + response.statusMessage);
      context.done();
    },
  );
  request.on("error", (error) => {
    console.log("send(..) failed executing https.request(..): " + error);
    context.done();
  });
  request.write(responseBody);
  request.end();
}
