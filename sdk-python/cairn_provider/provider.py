"""What a provider author writes: a `Provider` with its types and the four
methods, the request each receives, the result each returns, and drift
results."""

import json


class Request:
    """One call. `properties` are coerced to the declared types;
    `old_properties` are set for an update; `physical_id` for everything but
    a create. `tags`, `previous_tags` and `system_tags` are the stack's tags
    (see ResourceType's `taggable`). `type_configuration` is the type's
    configuration (`cairn type configure`; CloudFormation's
    requestData.typeConfiguration), its secrets resolved by the engine, or
    None. `request_id` is stable across retries of the same call: treat
    a repeat as the same request (a create must answer with what the first
    one made)."""

    def __init__(self, event, properties, old_properties):
        self.request_type = event.get("RequestType")
        self.type_name = event.get("ResourceType")
        self.logical_id = event.get("LogicalResourceId")
        self.request_id = event.get("RequestId")
        self.stack_id = event.get("StackId")
        self.physical_id = event.get("PhysicalResourceId")
        self.properties = properties
        self.old_properties = old_properties
        # The stack's tags, before an update, and the system tags
        # (aws:cloudformation:stack-name, stack-id, logical-id).
        self.tags = dict(event.get("DesiredResourceTags") or {})
        self.previous_tags = dict(event.get("PreviousResourceTags") or {})
        self.system_tags = dict(event.get("SystemTags") or {})
        self.type_configuration = event.get("TypeConfiguration")
        self.event = event

    @property
    def changed(self):
        """The top-level properties an update changes."""
        old = self.old_properties or {}
        return sorted(k for k in set(old) | set(self.properties)
                      if old.get(k) != self.properties.get(k))


class Result:
    """What a create or update made: the physical id (what `Ref` returns; an
    update may leave it out to keep the current one) and the attributes
    `Fn::GetAtt` reads. `no_echo`: the attributes are secret."""

    def __init__(self, physical_id=None, attributes=None, no_echo=False):
        self.physical_id = physical_id
        self.attributes = dict(attributes or {})
        self.no_echo = no_echo


class Provider:
    """Subclass it: set `types` (a list of `ResourceType`) and write
    `create`, `update`, `delete` and, optionally, `check_drift`, `read`
    and `check_status`. Raise the errors of `cairn_provider.errors`."""

    types = []

    def create(self, request):
        raise NotImplementedError

    def update(self, request):
        raise NotImplementedError

    def delete(self, request):
        raise NotImplementedError

    def check_drift(self, request):
        return not_checked()

    def read(self, request):
        """The live resource `request.physical_id`: `found(properties,
        attributes)` with every property that has a value, or raise
        `NotFound`. The default cannot read (the type cannot be imported)."""
        return not_supported()


def found(properties, attributes=None):
    """A read's answer: the resource's properties and attributes."""
    return {"Outcome": "FOUND", "Properties": {k: v for k, v in properties.items() if v is not None},
            "Attributes": dict(attributes or {})}


def not_supported():
    return {"Outcome": "NOT_SUPPORTED"}


def in_sync():
    return {"Status": "IN_SYNC"}


def deleted():
    return {"Status": "DELETED"}


def not_checked():
    return {"Status": "NOT_CHECKED"}


def _render(v):
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def _diff(path, expected, actual, out):
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k, v in expected.items():
            p = "%s/%s" % (path, k.replace("~", "~0").replace("/", "~1"))
            if k in actual:
                _diff(p, v, actual[k], out)
            else:
                out.append((p, _render(v), "null", "REMOVE"))
    elif isinstance(expected, list) and isinstance(actual, list):
        for i, v in enumerate(expected):
            if i < len(actual):
                _diff("%s/%d" % (path, i), v, actual[i], out)
            else:
                out.append(("%s/%d" % (path, i), _render(v), "null", "REMOVE"))
        for i in range(len(expected), len(actual)):
            out.append(("%s/%d" % (path, i), "null", _render(actual[i]), "ADD"))
    elif isinstance(expected, (dict, list)) or isinstance(actual, (dict, list)):
        if expected != actual:
            out.append((path, _render(expected), _render(actual), "NOT_EQUAL"))
    elif _render(expected) != _render(actual):
        out.append((path, _render(expected), _render(actual), "NOT_EQUAL"))


def compare(expected, actual):
    """The drift result of the live resource's values `actual` against the
    template's `expected` (both dicts of properties): IN_SYNC, or MODIFIED
    with each difference, as CloudFormation reports them."""
    out = []
    _diff("", expected, actual, out)
    if not out:
        return in_sync()
    return {
        "Status": "MODIFIED",
        "PropertyDifferences": [
            {"PropertyPath": p, "ExpectedValue": e, "ActualValue": a, "DifferenceType": t}
            for p, e, a, t in out
        ],
    }
