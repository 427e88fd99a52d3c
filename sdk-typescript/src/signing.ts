// Cairn signs every webhook request: X-Cairn-Timestamp (Unix seconds) and
// X-Cairn-Signature: v1=HMAC-SHA256(secret, "<timestamp>.<body>"), hex.

import { createHmac, timingSafeEqual } from "node:crypto";

/** How far a request's timestamp may be from now (seconds). */
export const SIGNATURE_TOLERANCE = 300;

/** The headers of a request, as Node gives them (lower-case names). */
export type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** Why a request's signature is refused, or `undefined` when it is Cairn's. */
export function signatureProblem(
  secret: string,
  headers: Headers,
  body: Buffer,
  now: number = Date.now() / 1000,
): string | undefined {
  const ts = header(headers, "X-Cairn-Timestamp");
  const sig = header(headers, "X-Cairn-Signature");
  if (ts === undefined || sig === undefined) {
    return "the request is not signed: it was not sent by Cairn, or Cairn has no secret for this handler";
  }
  if (!/^\s*\d+\s*$/.test(ts)) {
    return "the X-Cairn-Timestamp header is not a Unix time in seconds";
  }
  if (Math.abs(now - Number(ts.trim())) > SIGNATURE_TOLERANCE) {
    return `the request was signed more than ${SIGNATURE_TOLERANCE} s away from now; check the clocks, or it is a replay`;
  }
  const want = Buffer.from(
    "v1=" +
      createHmac("sha256", secret)
        .update(Buffer.concat([Buffer.from(ts.trim() + "."), body]))
        .digest("hex"),
  );
  const got = Buffer.from(sig.trim());
  if (got.length !== want.length || !timingSafeEqual(got, want)) {
    return "the signature does not match: the handler's secret differs from the endpoint's secret in Cairn's config, or the body was changed";
  }
  return undefined;
}
