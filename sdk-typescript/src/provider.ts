// What a provider author writes: a Provider with its types and the four
// calls, the request each receives, the result each returns, and drift.

import { Properties, ResourceType, Values } from "./schema";

/**
 * One call. `properties` are coerced to the declared types; `oldProperties`
 * are set for an update; `physicalId` for everything but a create.
 * `requestId` is stable across retries of the same call: a create sent
 * again must answer with what the first one made.
 */
export interface Request<P extends Properties = Properties> {
  requestType: string;
  typeName: string;
  logicalId: string;
  requestId: string;
  stackId: string;
  physicalId?: string;
  properties: Values<P>;
  oldProperties?: Values<P>;
  /** The stack's tags, before an update, and the system tags (aws:cloudformation:…). */
  tags: Record<string, string>;
  previousTags: Record<string, string>;
  systemTags: Record<string, string>;
  /**
   * The type's configuration (`cairn type configure`; CloudFormation's
   * requestData.typeConfiguration), its secrets resolved by the engine.
   */
  typeConfiguration?: Record<string, unknown>;
  /** The top-level properties an update changes. */
  changed: string[];
  /** The request as sent. */
  event: Record<string, unknown>;
}

/**
 * What a create or update made: the physical id (what Ref returns; an
 * update may leave it out to keep the current one; a new one on an update
 * is a replacement) and the attributes Fn::GetAtt reads. `noEcho`: the
 * attributes are secret.
 */
export interface Result {
  physicalId?: string;
  attributes?: Record<string, unknown>;
  noEcho?: boolean;
}

export interface PropertyDifference {
  PropertyPath: string;
  ExpectedValue: string;
  ActualValue: string;
  DifferenceType: "ADD" | "REMOVE" | "NOT_EQUAL";
}

export type DriftResult =
  | { Status: "IN_SYNC" | "DELETED" | "NOT_CHECKED" }
  | { Status: "MODIFIED"; PropertyDifferences: PropertyDifference[] };

export type ReadResult =
  | { Outcome: "FOUND"; Properties: Record<string, unknown>; Attributes: Record<string, unknown> }
  | { Outcome: "NOT_SUPPORTED" };

/**
 * A provider: its types and the calls. `checkDrift` and `read` are
 * optional (drift not checked; the type cannot be imported).
 */
export interface Provider {
  types: ResourceType[];
  create(request: Request): Promise<Result | void> | Result | void;
  update(request: Request): Promise<Result | void> | Result | void;
  delete(request: Request): Promise<void> | void;
  checkDrift?(request: Request): Promise<DriftResult> | DriftResult;
  read?(request: Request): Promise<ReadResult> | ReadResult;
}

/** A read's answer: the resource's properties (those with a value) and attributes. */
export function found(properties: Record<string, unknown>, attributes: Record<string, unknown> = {}): ReadResult {
  const Properties = Object.fromEntries(Object.entries(properties).filter(([, v]) => v !== undefined && v !== null));
  return { Outcome: "FOUND", Properties, Attributes: attributes };
}

export const inSync = (): DriftResult => ({ Status: "IN_SYNC" });
export const deleted = (): DriftResult => ({ Status: "DELETED" });
export const notChecked = (): DriftResult => ({ Status: "NOT_CHECKED" });

function render(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function diff(path: string, expected: unknown, actual: unknown, out: PropertyDifference[]): void {
  const push = (p: string, e: string, a: string, t: PropertyDifference["DifferenceType"]) =>
    out.push({ PropertyPath: p, ExpectedValue: e, ActualValue: a, DifferenceType: t });
  if (isObject(expected) && isObject(actual)) {
    for (const [k, v] of Object.entries(expected)) {
      const p = `${path}/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`;
      if (k in actual) diff(p, v, actual[k], out);
      else push(p, render(v), "null", "REMOVE");
    }
  } else if (Array.isArray(expected) && Array.isArray(actual)) {
    expected.forEach((v, i) => {
      if (i < actual.length) diff(`${path}/${i}`, v, actual[i], out);
      else push(`${path}/${i}`, render(v), "null", "REMOVE");
    });
    for (let i = expected.length; i < actual.length; i++) push(`${path}/${i}`, "null", render(actual[i]), "ADD");
  } else if (render(expected) !== render(actual)) {
    push(path, render(expected), render(actual), "NOT_EQUAL");
  }
}

/**
 * The drift of the live values `actual` against the template's `expected`:
 * IN_SYNC, or MODIFIED with each difference, as CloudFormation reports them.
 */
export function compare(expected: Record<string, unknown>, actual: Record<string, unknown>): DriftResult {
  const out: PropertyDifference[] = [];
  diff("", expected, actual, out);
  return out.length === 0 ? inSync() : { Status: "MODIFIED", PropertyDifferences: out };
}
