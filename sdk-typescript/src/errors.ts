// Typed provider errors: the vocabulary of Cairn's ErrorKind (and of
// CloudFormation's resource handlers). The message becomes the resource's
// status reason; the kind travels as the response's ErrorCode, so Cairn
// reacts to it (NotFound on a delete counts as deleted, Throttling may be
// retried).

export type ErrorKind =
  | "NotFound"
  | "AlreadyExists"
  | "InvalidRequest"
  | "Throttling"
  | "NotUpdatable"
  | "InternalFailure"
  | "Timeout";

/** A failed call. `physicalId` names what a failed create left behind, so that rollback deletes it. */
export class ProviderError extends Error {
  readonly kind: ErrorKind;
  readonly physicalId?: string;

  constructor(kind: ErrorKind, message: string, physicalId?: string) {
    super(message);
    this.name = kind;
    this.kind = kind;
    this.physicalId = physicalId;
  }
}

const of = (kind: ErrorKind) =>
  class extends ProviderError {
    constructor(message: string, physicalId?: string) {
      super(kind, message, physicalId);
    }
  };

export class NotFound extends of("NotFound") {}
export class AlreadyExists extends of("AlreadyExists") {}
export class InvalidRequest extends of("InvalidRequest") {}
export class Throttling extends of("Throttling") {}
export class NotUpdatable extends of("NotUpdatable") {}
export class InternalFailure extends of("InternalFailure") {}
export class Timeout extends of("Timeout") {}
