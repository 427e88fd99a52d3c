"""Typed provider errors: the vocabulary of Cairn's `ErrorKind` (and of
CloudFormation's resource handlers). The message becomes the resource's
status reason; the kind travels as the response's `ErrorCode`, so Cairn
reacts to it (a `NotFound` on delete counts as deleted, `Throttling` may be
retried)."""


class ProviderError(Exception):
    """A failed call. `physical_id` names what a failed create left behind,
    so that rollback deletes it."""

    kind = "InternalFailure"

    def __init__(self, message, physical_id=None):
        super().__init__(message)
        self.message = str(message)
        self.physical_id = physical_id


class NotFound(ProviderError):
    kind = "NotFound"


class AlreadyExists(ProviderError):
    kind = "AlreadyExists"


class InvalidRequest(ProviderError):
    kind = "InvalidRequest"


class Throttling(ProviderError):
    kind = "Throttling"


class NotUpdatable(ProviderError):
    kind = "NotUpdatable"


class InternalFailure(ProviderError):
    kind = "InternalFailure"


class Timeout(ProviderError):
    kind = "Timeout"
