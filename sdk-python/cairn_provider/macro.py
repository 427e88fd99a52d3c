"""Macros: CloudFormation's template transforms, served as Cairn webhooks.

A macro is given a fragment of a template and answers it transformed:

    from cairn_provider import Macro, serve_macro

    class Upper(Macro):
        def transform(self, fragment, request):
            return {k: v.upper() if isinstance(v, str) else v for k, v in fragment.items()}

    serve_macro(Upper())

`POST /` takes CloudFormation's macro request (`fragment`, `params`,
`templateParameterValues`, `transformId`, `requestId`, `region`,
`accountId`), signed by Cairn like every webhook request, and is answered
in the reply with CloudFormation's macro response (`requestId`, `status`,
`fragment`, `errorMessage`). A `MacroError` (or any exception) raised by
`transform` is a failure whose message Cairn shows as `Transform
<account>::<name> failed with: <message>`."""

import traceback

from .webhook import replying_server, serve_replying


class MacroError(Exception):
    """A failure to show the template's author."""


class MacroRequest:
    """One macro request, its fields by their Python names."""

    def __init__(self, event):
        self.event = event
        self.fragment = event.get("fragment")
        self.params = event.get("params") or {}
        self.template_parameter_values = event.get("templateParameterValues") or {}
        self.transform_id = event.get("transformId", "")
        self.request_id = event.get("requestId", "")
        self.region = event.get("region", "")
        self.account_id = event.get("accountId", "")


class Macro:
    """Subclass and define `transform(fragment, request)`: the new fragment."""

    def transform(self, fragment, request):
        raise NotImplementedError("a Macro defines transform(fragment, request)")


def run(macro, event):
    """CloudFormation's macro response for `event`."""
    request = MacroRequest(event)
    try:
        fragment = macro.transform(request.fragment, request)
        return {"requestId": request.request_id, "status": "success", "fragment": fragment}
    except MacroError as e:
        message = str(e)
    except Exception as e:  # noqa: BLE001 - any failure is the macro's answer
        traceback.print_exc()
        message = "%s: %s" % (type(e).__name__, e)
    return {"requestId": request.request_id, "status": "failure", "errorMessage": message}


def macro_server(macro, listen="127.0.0.1:8080", secret=""):
    """An HTTP server for `macro` (not started)."""
    return replying_server(lambda event: run(macro, event), listen, secret)


def serve_macro(macro, argv=None):
    """Serves `macro` until interrupted. Command line: `--listen HOST:PORT`
    (default 127.0.0.1:8080), `--secret S` (or CAIRN_WEBHOOK_SECRET).
    Prints `listening on HOST:PORT` first."""
    serve_replying(lambda event: run(macro, event), argv)
