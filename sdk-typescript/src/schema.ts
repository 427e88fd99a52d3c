// Resource types and their properties, as Cairn's schema (GET /schema)
// describes them, and the coercion of CloudFormation's stringified
// property values back to the declared types.

import { InvalidRequest } from "./errors";

export type UpdateBehavior = "Mutable" | "MutableWithInterruption" | "CreateOnly" | "Immutable";

export interface PropertyOptions {
  required?: boolean;
  /** A change makes a new physical resource (replacement). */
  createOnly?: boolean;
  /** A change fails the update. */
  immutable?: boolean;
  /** A change interrupts the resource (updated in place). */
  interrupts?: boolean;
  description?: string;
  /** The strings the value (or each item of a list) may be. */
  allowed?: string[];
}

function refuse(path: string, expected: string, value: unknown): never {
  throw new InvalidRequest(`#${path}: expected type: ${expected}, found: ${JSON.stringify(value)}`);
}

/** One property: its type, whether it is required, what an update of it does. */
export abstract class Property<T = unknown> {
  readonly required: boolean;
  readonly update: UpdateBehavior;
  readonly description: string;
  readonly allowed: string[];

  constructor(o: PropertyOptions = {}) {
    this.required = o.required ?? false;
    this.update = o.createOnly ? "CreateOnly" : o.immutable ? "Immutable" : o.interrupts ? "MutableWithInterruption" : "Mutable";
    this.description = o.description ?? "";
    this.allowed = o.allowed ?? [];
  }

  abstract typeSchema(): Record<string, unknown>;

  schema(): Record<string, unknown> {
    return {
      ...this.typeSchema(),
      Required: this.required,
      Update: this.update,
      ...(this.description ? { Description: this.description } : {}),
      ...(this.allowed.length > 0 ? { AllowedValues: this.allowed } : {}),
    };
  }

  /** The value as the declared type (CloudFormation sends scalars as strings). */
  abstract coerce(value: unknown, path: string): T;
}

export class StringProperty extends Property<string> {
  typeSchema() {
    return { Type: "String" };
  }
  coerce(value: unknown, path: string): string {
    if (value !== null && typeof value === "object") refuse(path, "String", value);
    return typeof value === "string" ? value : String(value);
  }
}

export class IntegerProperty extends Property<number> {
  typeSchema() {
    return { Type: "Integer" };
  }
  coerce(value: unknown, path: string): number {
    const n = typeof value === "number" ? value : typeof value === "string" && /^\s*-?\d+\s*$/.test(value) ? Number(value) : NaN;
    if (!Number.isInteger(n)) refuse(path, "Integer", value);
    return n;
  }
}

export class NumberProperty extends Property<number> {
  typeSchema() {
    return { Type: "Number" };
  }
  coerce(value: unknown, path: string): number {
    const n = typeof value === "number" ? value : typeof value === "string" && value.trim() !== "" ? Number(value) : NaN;
    if (!Number.isFinite(n)) refuse(path, "Number", value);
    return n;
  }
}

export class BooleanProperty extends Property<boolean> {
  typeSchema() {
    return { Type: "Boolean" };
  }
  coerce(value: unknown, path: string): boolean {
    if (typeof value === "boolean") return value;
    if (typeof value === "string" && ["true", "false"].includes(value.toLowerCase())) return value.toLowerCase() === "true";
    return refuse(path, "Boolean", value);
  }
}

export class JsonProperty extends Property<unknown> {
  typeSchema() {
    return { Type: "Json" };
  }
  coerce(value: unknown): unknown {
    return value;
  }
}

export class ListProperty<T> extends Property<T[]> {
  constructor(readonly items: Property<T>, o: PropertyOptions = {}) {
    super(o);
  }
  typeSchema() {
    return { Type: "List", Items: this.items.typeSchema() };
  }
  coerce(value: unknown, path: string): T[] {
    if (!Array.isArray(value)) refuse(path, "JSONArray", value);
    return (value as unknown[]).map((v, i) => this.items.coerce(v, `${path}/${i}`));
  }
}

export class MapProperty<T> extends Property<Record<string, T>> {
  constructor(readonly values: Property<T>, o: PropertyOptions = {}) {
    super(o);
  }
  typeSchema() {
    return { Type: "Map", Items: this.values.typeSchema() };
  }
  coerce(value: unknown, path: string): Record<string, T> {
    if (value === null || typeof value !== "object" || Array.isArray(value)) refuse(path, "JSONObject", value);
    const out: Record<string, T> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = this.values.coerce(v, `${path}/${k}`);
    return out;
  }
}

/** Shorthands: `string({ required: true })`, `list(integer())`, … */
export const string = (o?: PropertyOptions) => new StringProperty(o);
export const integer = (o?: PropertyOptions) => new IntegerProperty(o);
export const number = (o?: PropertyOptions) => new NumberProperty(o);
export const boolean = (o?: PropertyOptions) => new BooleanProperty(o);
export const json = (o?: PropertyOptions) => new JsonProperty(o);
export const list = <T>(items: Property<T>, o?: PropertyOptions) => new ListProperty(items, o);
export const map = <T>(values: Property<T>, o?: PropertyOptions) => new MapProperty(values, o);

/** The properties of a type, by name. */
export type Properties = Record<string, Property>;

/** The values a type's properties take once coerced (Cairn has checked the required ones are there). */
export type Values<P extends Properties> = {
  [K in keyof P]?: ReturnType<P[K]["coerce"]>;
};

export interface ResourceTypeOptions<P extends Properties> {
  properties: P;
  /** Attribute name → description (what Fn::GetAtt reads). */
  attributes?: Record<string, string>;
  description?: string;
  additionalProperties?: boolean;
  refReturns?: string;
  /** Capabilities a stack must acknowledge to make one (CAPABILITY_…). */
  requiredCapabilities?: string[];
  /** Applies the stack's tags: called when only they change. */
  taggable?: boolean;
  /** The properties (or attributes) whose values make the physical id: what an import names it by. */
  primaryIdentifier?: string[];
}

/** A resource type: its name, properties, attributes and what Ref returns. */
export class ResourceType<P extends Properties = Properties> {
  constructor(readonly name: string, readonly options: ResourceTypeOptions<P>) {}

  schema(): Record<string, unknown> {
    const o = this.options;
    return {
      TypeName: this.name,
      Description: o.description ?? "",
      Properties: Object.fromEntries(Object.entries(o.properties).map(([n, p]) => [n, p.schema()])),
      AdditionalProperties: o.additionalProperties ?? false,
      Attributes: Object.fromEntries(Object.entries(o.attributes ?? {}).map(([n, d]) => [n, { Description: d }])),
      RefReturns: o.refReturns ?? "the physical resource id",
      ...(o.requiredCapabilities?.length ? { RequiredCapabilities: o.requiredCapabilities } : {}),
      ...(o.taggable ? { Taggable: true } : {}),
      ...(o.primaryIdentifier?.length ? { PrimaryIdentifier: o.primaryIdentifier } : {}),
    };
  }

  /** The request's (stringified) properties as the declared types. */
  coerce(properties: Record<string, unknown> | undefined): Values<P> {
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(properties ?? {})) {
      if (name === "ServiceToken" || name === "ServiceTimeout") continue;
      const p = this.options.properties[name];
      out[name] = p ? p.coerce(value, `/${name}`) : value;
    }
    return out as Values<P>;
  }
}
