// PUTting a custom-resource response to the request's ResponseURL, as
// CloudFormation's own helpers do, with retries: a listener that is briefly
// away (a restarting engine) still gets the answer.

import * as http from "node:http";
import * as https from "node:https";

/** One PUT: the HTTP status, or the error that kept it from an answer. */
function putOnce(url: string, body: string, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const send = u.protocol === "https:" ? https.request : http.request;
    const req = send(
      u,
      {
        method: "PUT",
        headers: { "content-type": "", "content-length": Buffer.byteLength(body) },
        timeout: timeoutMs,
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * PUTs `response` to `url`, retrying connection failures and 5xx answers
 * with backoff (about 6 s in all). True when it was taken.
 */
export async function putResponse(url: string, response: object, attempts = 6): Promise<boolean> {
  const body = JSON.stringify(response);
  let delay = 200;
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      const status = await putOnce(url, body, 30_000);
      if (status < 300) return true;
      if (status < 500) {
        console.error(`the ResponseURL refused the response: HTTP ${status}`);
        return false;
      }
    } catch {
      // not reached: tried again
    }
    if (attempt + 1 < attempts) {
      await new Promise((r) => setTimeout(r, delay));
      delay *= 2;
    }
  }
  console.error(`could not PUT the response to ${url}`);
  return false;
}
