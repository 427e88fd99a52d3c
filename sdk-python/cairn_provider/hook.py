"""Hooks: checks run before a resource is created, updated or deleted, before
a stack's operation, and when a change set is made (CloudFormation's Hooks),
served as Cairn webhooks and named by an `AWS::CloudFormation::LambdaHook`'s
`LambdaFunction`:

    from cairn_provider import Hook, HookRequest, non_compliant, serve_hook, success

    class FileMode(Hook):
        def pre_create(self, request):
            if request.target_name != "Cairn::Local::File":
                return success()
            if request.resource_properties.get("Mode") != "0600":
                return non_compliant("every file must have Mode 0600")
            return success()

    serve_hook(FileMode())

`POST /` takes CloudFormation's hook request (`clientRequestToken`,
`hookTypeName`, `hookModel`, `actionInvocationPoint`, `requestData`,
`requestContext`), signed by Cairn like every webhook request, and is
answered in the reply with CloudFormation's hook response (`hookStatus`
SUCCESS, FAILED or IN_PROGRESS, `errorCode`, `message`, `callbackContext`,
`callbackDelaySeconds`, the request's `clientRequestToken`). `pre_create`,
`pre_update` and `pre_delete` each default to success; an exception they
raise is a FAILED InternalFailure naming it (HOOK_FAILED)."""

import traceback

from .webhook import replying_server, serve_replying


def success(message=None):
    """The target may go on."""
    answer = {"hookStatus": "SUCCESS"}
    if message:
        answer["message"] = message
    return answer


def non_compliant(message):
    """The target breaks the hook's rule: `message` says how."""
    return {"hookStatus": "FAILED", "errorCode": "NonCompliant", "message": message}


def internal_failure(message):
    """The hook could not judge (HOOK_FAILED)."""
    return {"hookStatus": "FAILED", "errorCode": "InternalFailure", "message": message}


def in_progress(callback_context, delay_seconds=0, message=None):
    """Not decided yet: Cairn invokes the hook again after `delay_seconds`
    with `callback_context` (three invocations at most)."""
    answer = {"hookStatus": "IN_PROGRESS", "callbackContext": callback_context,
              "callbackDelaySeconds": delay_seconds}
    if message:
        answer["message"] = message
    return answer


class HookRequest:
    """One hook request, its fields by their Python names."""

    def __init__(self, event):
        self.event = event
        data = event.get("requestData") or {}
        model = data.get("targetModel") or {}
        context = event.get("requestContext") or {}
        self.client_request_token = event.get("clientRequestToken", "")
        self.stack_id = event.get("stackId", "")
        self.hook_type_name = event.get("hookTypeName", "")
        self.hook_model = event.get("hookModel") or {}
        self.invocation_point = event.get("actionInvocationPoint", "")
        # RESOURCE, STACK or CHANGE_SET.
        self.target_type = data.get("targetType", "")
        # The resource type (or STACK / CHANGE_SET).
        self.target_name = data.get("targetName", "")
        self.target_logical_id = data.get("targetLogicalId", "")
        self.resource_properties = model.get("resourceProperties") or {}
        self.previous_resource_properties = model.get("previousResourceProperties") or {}
        self.template = model.get("template") or {}
        self.previous_template = model.get("previousTemplate") or {}
        self.invocation = context.get("invocation", 1)
        self.callback_context = context.get("callbackContext") or {}


class Hook:
    """Subclass and define `pre_create`, `pre_update` and `pre_delete`
    (each given a HookRequest; each defaults to success)."""

    def pre_create(self, request):
        return success()

    def pre_update(self, request):
        return success()

    def pre_delete(self, request):
        return success()


_POINTS = {
    "CREATE_PRE_PROVISION": "pre_create",
    "UPDATE_PRE_PROVISION": "pre_update",
    "DELETE_PRE_PROVISION": "pre_delete",
}


def run(hook, event):
    """CloudFormation's hook response of `hook` to `event`."""
    request = HookRequest(event)
    method = _POINTS.get(request.invocation_point)
    if method is None:
        answer = internal_failure("unknown invocation point %r" % request.invocation_point)
    else:
        try:
            answer = getattr(hook, method)(request)
        except Exception as e:  # noqa: BLE001 - any failure is the hook's answer
            traceback.print_exc()
            answer = internal_failure("%s: %s" % (type(e).__name__, e))
    if not isinstance(answer, dict) or "hookStatus" not in answer:
        answer = internal_failure("%s returned %r, not a hook response (success(), "
                                  "non_compliant(...), in_progress(...))" % (method, answer))
    answer = dict(answer)
    answer.setdefault("clientRequestToken", request.client_request_token)
    return answer


def hook_server(hook, listen="127.0.0.1:8080", secret=""):
    """An HTTP server for `hook` (not started)."""
    return replying_server(lambda event: run(hook, event), listen, secret)


def serve_hook(hook, argv=None):
    """Serves `hook` until interrupted. Command line: `--listen HOST:PORT`
    (default 127.0.0.1:8080), `--secret S` (or CAIRN_WEBHOOK_SECRET).
    Prints `listening on HOST:PORT` first."""
    serve_replying(lambda event: run(hook, event), argv)
