"""Runs an unchanged AWS Lambda custom-resource handler (`handler(event,
context)`, answering with `cfnresponse` or crhelper), an unchanged macro
function (it returns CloudFormation's macro response), or an unchanged Lambda
hook function (it returns CloudFormation's hook response: hookStatus
SUCCESS, FAILED or IN_PROGRESS), behind Cairn's webhook:

    python -m cairn_provider.lambda_adapter handler.handler --listen 127.0.0.1:8081 [--secret S]

Each signed request is answered 200 at once and the handler runs in a thread
with a Lambda-like context, as an asynchronous Lambda invocation does; the
handler PUTs its response to the event's ResponseURL itself. The process
gets Lambda's environment where it is not set (AWS_REGION and
AWS_DEFAULT_REGION us-east-1, AWS_LAMBDA_FUNCTION_NAME, ..._VERSION,
..._MEMORY_SIZE, AWS_EXECUTION_ENV): handlers and the libraries they import
(crhelper makes boto3 clients at import) read them.

crhelper sends its response over HTTPS whatever the ResponseURL says: for an
http:// ResponseURL the adapter fetches the CA of Cairn's callback listener
(which speaks TLS on the same port, with a certificate from that CA) and adds
it to the process's trusted roots. The context's remaining time counts down
from --timeout-seconds (default 60): crhelper's default sleep_on_delete of
120 s then does not apply (it sleeps only when the time left allows it)."""

import argparse
import importlib
import json
import os
import ssl
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from http.server import ThreadingHTTPServer

from . import tracing
from .webhook import SignedRequests


class LambdaContext:
    """What handlers written for Lambda read from their context."""

    def __init__(self, function_name, timeout_seconds=900):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = "arn:aws:lambda:%s:123456789012:function:%s" % (
            os.environ.get("AWS_REGION", "us-east-1"), function_name)
        self.memory_limit_in_mb = "128"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = "/aws/lambda/" + function_name
        self.log_stream_name = "cairn/" + self.aws_request_id
        self._deadline = time.time() + timeout_seconds

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.time()) * 1000))


def lambda_environment(function_name):
    """Lambda's variables, for those not already set."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    for key, value in (
        ("AWS_REGION", region),
        ("AWS_DEFAULT_REGION", region),
        ("AWS_LAMBDA_FUNCTION_NAME", function_name),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_python%d.%d" % sys.version_info[:2]),
    ):
        os.environ.setdefault(key, value)


_trust_lock = threading.Lock()
_trusted = {}
# The roots the process trusts before any listener's CA is added.
_PLATFORM_CA_FILE = os.environ.get("SSL_CERT_FILE") or ssl.get_default_verify_paths().openssl_cafile


def trust_callback_ca(response_url):
    """Adds the CA of Cairn's callback listener behind an http:// ResponseURL
    to this process's trusted roots (SSL_CERT_FILE: the platform's bundle
    plus it), so a handler that sends its response over HTTPS whatever the
    URL says (crhelper) reaches the same listener. Fetched once per listener
    from its /cairn-ca.pem; a listener without one is left alone."""
    parts = urllib.parse.urlsplit(response_url or "")
    if parts.scheme != "http" or not parts.netloc:
        return
    base = "http://" + parts.netloc
    with _trust_lock:
        if base in _trusted:
            return
        try:
            with urllib.request.urlopen(base + "/cairn-ca.pem", timeout=5) as r:
                pem = r.read().decode()
        except Exception:
            pem = ""
        _trusted[base] = pem if "BEGIN CERTIFICATE" in pem else ""
        extra = "".join(p for p in _trusted.values() if p)
        if not extra:
            return
        platform = ""
        if _PLATFORM_CA_FILE and os.path.isfile(_PLATFORM_CA_FILE):
            with open(_PLATFORM_CA_FILE) as f:
                platform = f.read()
        fd, bundle = tempfile.mkstemp(prefix="cairn-ca-", suffix=".pem")
        with os.fdopen(fd, "w") as f:
            f.write(platform + "\n" + extra)
        os.environ["SSL_CERT_FILE"] = bundle


def load(spec, search_dir):
    """`module.function` (Lambda's handler setting), imported from
    `search_dir` first."""
    module, _, function = spec.rpartition(".")
    if not module:
        raise SystemExit("the handler is module.function (Lambda's handler setting), not %r" % spec)
    sys.path.insert(0, search_dir)
    return getattr(importlib.import_module(module), function)


def run_macro(function, event, function_name, timeout_seconds):
    """A macro Lambda's answer to `event`: what it returns, or a failure
    naming what it raised."""
    try:
        return function(event, LambdaContext(function_name, timeout_seconds))
    except Exception as e:  # noqa: BLE001 - any failure is the macro's answer
        return {"requestId": event.get("requestId"), "status": "failure",
                "errorMessage": "%s: %s" % (type(e).__name__, e)}


def is_hook_request(event):
    """A Lambda hook's invocation (CloudFormation's hook request)."""
    return "clientRequestToken" in event and "actionInvocationPoint" in event


def run_hook(function, event, function_name, timeout_seconds):
    """A Lambda hook's answer to `event`: what it returns (SUCCESS, FAILED
    or IN_PROGRESS), or HOOK_FAILED's InternalFailure naming what it raised
    or what it returned that is not a hook response."""
    token = event.get("clientRequestToken")
    try:
        answer = function(event, LambdaContext(function_name, timeout_seconds))
    except Exception as e:  # noqa: BLE001 - any failure is the hook's answer
        return {"hookStatus": "FAILED", "errorCode": "InternalFailure",
                "message": "%s: %s" % (type(e).__name__, e), "clientRequestToken": token}
    if not isinstance(answer, dict) or "hookStatus" not in answer:
        return {"hookStatus": "FAILED", "errorCode": "InternalFailure",
                "message": "the hook function returned %r, not a hook response "
                           "({hookStatus, errorCode, message, ...})" % (answer,)[:300],
                "clientRequestToken": token}
    answer.setdefault("clientRequestToken", token)
    return answer


def server(function, function_name, listen, secret, timeout_seconds=60):
    signing_secret = secret

    class Http(SignedRequests):
        secret = signing_secret

        def do_POST(self):
            event = self.signed_event()
            if event is None:
                return
            # Each invocation runs in a span continuing Cairn's trace.
            headers = dict(self.headers.items())
            if "transformId" in event and "fragment" in event:
                # A macro: Lambda invokes it synchronously and its return
                # value is the answer.
                with tracing.handling(headers, "macro %s" % event.get("transformId", "")):
                    reply = run_macro(function, event, function_name, timeout_seconds)
                self._send(200, json.dumps(reply).encode())
                return
            if is_hook_request(event):
                # A Lambda hook: invoked synchronously, its return value
                # is the verdict.
                with tracing.handling(headers, "hook %s" % event.get("hookTypeName", "")):
                    reply = run_hook(function, event, function_name, timeout_seconds)
                self._send(200, json.dumps(reply).encode())
                return
            self._send(200)
            trust_callback_ca(event.get("ResponseURL"))
            context = LambdaContext(function_name, timeout_seconds)
            name = "%s %s" % (event.get("RequestType", "Request"), event.get("ResourceType", ""))
            attributes = {"cairn.request_id": str(event.get("RequestId", "")),
                          "cairn.logical_id": str(event.get("LogicalResourceId", ""))}

            def invoke():
                with tracing.handling(headers, name.strip(), attributes):
                    function(event, context)
            threading.Thread(target=invoke, daemon=True).start()

    host, port = listen.rsplit(":", 1)
    return ThreadingHTTPServer((host, int(port)), Http)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m cairn_provider.lambda_adapter")
    ap.add_argument("handler", help="module.function, as Lambda's handler setting")
    ap.add_argument("--listen", default="127.0.0.1:8081")
    ap.add_argument("--secret", default=os.environ.get("CAIRN_WEBHOOK_SECRET", ""))
    ap.add_argument("--dir", default=os.getcwd(), help="where the handler's module is")
    ap.add_argument("--timeout-seconds", type=int, default=60,
                    help="the function's timeout, as its Lambda configuration's Timeout: what "
                         "context.get_remaining_time_in_millis() counts down from (crhelper waits "
                         "its sleep_on_delete on a Delete only when this leaves room for it)")
    args = ap.parse_args(argv)
    function_name = args.handler.rpartition(".")[0] or args.handler
    lambda_environment(function_name)
    function = load(args.handler, os.path.abspath(args.dir))
    httpd = server(function, function_name, args.listen, args.secret, args.timeout_seconds)
    print("listening on %s:%d" % httpd.server_address, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
