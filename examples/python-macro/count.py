"""A macro in Python: `Count`, after AWS's sample of that name. A resource
with `Count: N` at its top level is made N times, as <Name>1 … <Name>N, with
every `%d` in its strings replaced by the copy's number. Name it in a
template's Transform section:

    Transform: Count
    Resources:
      Bucket:
        Type: Cairn::Test::Resource
        Count: 3
        Properties: {Value: "bucket-%d"}

Serve it (`python3 count.py --listen 127.0.0.1:8090 --secret S`) and point a
`[[macros]]` entry (name = "Count", url = "http://127.0.0.1:8090/") or an
AWS::CloudFormation::Macro's FunctionName at it."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk-python"))

from cairn_provider import Macro, MacroError, serve_macro  # noqa: E402


def numbered(value, n):
    """`value` with every `%d` in its strings replaced by `n`."""
    if isinstance(value, str):
        return value.replace("%d", str(n))
    if isinstance(value, list):
        return [numbered(v, n) for v in value]
    if isinstance(value, dict):
        return {k: numbered(v, n) for k, v in value.items()}
    return value


class Count(Macro):
    def transform(self, fragment, request):
        resources = {}
        for name, resource in fragment.get("Resources", {}).items():
            if "Count" not in resource:
                resources[name] = resource
                continue
            count = resource.pop("Count")
            if not isinstance(count, int) or count < 0:
                raise MacroError("Count of %s must be a whole number, not %r" % (name, count))
            for n in range(1, count + 1):
                resources["%s%d" % (name, n)] = numbered(resource, n)
        return dict(fragment, Resources=resources)


if __name__ == "__main__":
    serve_macro(Count())
