"""Serving a `Provider` as a custom-resource webhook, as Cairn's Rust
handler kit (`cairn_sdk::webhook`) does: `GET /schema` lists the types;
`POST /` takes a custom-resource request signed by Cairn (X-Cairn-Timestamp,
X-Cairn-Signature: v1=HMAC-SHA256 of "<timestamp>.<body>"), answers 200 at
once, runs the provider and PUTs the response to the request's ResponseURL
(retried), or, with `respond_in_reply`, answers the POST with it."""

import argparse
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import tracing
from .errors import InvalidRequest, NotFound, ProviderError
from .provider import Request, Result

#: How far a request's timestamp may be from now (seconds).
SIGNATURE_TOLERANCE = 300


def signature_problem(secret, headers, body, now=None):
    """Why a request's signature is refused, or None when it is Cairn's."""
    ts = headers.get("X-Cairn-Timestamp")
    sig = headers.get("X-Cairn-Signature")
    if ts is None or sig is None:
        return "the request is not signed: it was not sent by Cairn, or Cairn has no secret for this handler"
    if not ts.strip().isdigit():
        return "the X-Cairn-Timestamp header is not a Unix time in seconds"
    now = time.time() if now is None else now
    if abs(now - int(ts)) > SIGNATURE_TOLERANCE:
        return "the request was signed more than %d s away from now; check the clocks, or it is a replay" % SIGNATURE_TOLERANCE
    want = "v1=" + hmac.new(secret.encode(), ts.strip().encode() + b"." + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(sig.strip(), want):
        return "the signature does not match: the handler's secret differs from the endpoint's secret in Cairn's config, or the body was changed"
    return None


def _failed_create_id(event):
    stack = (event.get("StackId") or "").split(":stack/")[-1].split("/")[0]
    suffix = "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(8))
    return "%s_%s_%s" % (stack, event.get("LogicalResourceId"), suffix)


class Handler:
    """Runs a provider for custom-resource requests."""

    def __init__(self, provider, secret="", respond_in_reply=False):
        self.provider = provider
        self.secret = secret
        self.respond_in_reply = respond_in_reply
        self.types = {t.name: t for t in provider.types}

    def schemas(self):
        return {"Schemas": [t.schema() for t in self.provider.types]}

    def _type(self, name):
        if name in self.types:
            return self.types[name]
        if len(self.types) == 1:
            return next(iter(self.types.values()))
        raise InvalidRequest("this handler does not serve %s; it serves %s" % (name, ", ".join(self.types)))

    def run(self, event):
        """The response to one request (a dict in CloudFormation's shape)."""
        response = {
            "Status": "SUCCESS",
            "StackId": event.get("StackId"),
            "RequestId": event.get("RequestId"),
            "LogicalResourceId": event.get("LogicalResourceId"),
            "PhysicalResourceId": event.get("PhysicalResourceId") or "",
        }
        try:
            rtype = self._type(event.get("ResourceType"))
            if event.get("RequestType") == "Read":
                # A read names the resource only: no properties to coerce.
                response["Data"] = self.provider.read(Request(event, {}, None))
                return response
            old = event.get("OldResourceProperties")
            request = Request(event, rtype.coerce(event.get("ResourceProperties")),
                              rtype.coerce(old) if old is not None else None)
            kind = event.get("RequestType")
            if kind == "Create":
                made = self.provider.create(request)
                self._fill(response, made, None)
            elif kind == "Update":
                made = self.provider.update(request)
                self._fill(response, made, request.physical_id)
            elif kind == "Delete":
                try:
                    self.provider.delete(request)
                except NotFound:
                    pass  # already gone: deleted
            elif kind == "CheckDrift":
                response["Data"] = self.provider.check_drift(request)
            else:
                raise InvalidRequest("unknown RequestType %r" % kind)
        except ProviderError as e:
            self._failed(response, event, e.message, e.kind, e.physical_id)
        except Exception as e:  # a bug in the provider: its text is the reason
            traceback.print_exc()
            self._failed(response, event, "%s: %s" % (type(e).__name__, e), "InternalFailure", None)
        return response

    @staticmethod
    def _fill(response, made, current_id):
        if made is None:
            made = Result()
        elif isinstance(made, tuple):
            made = Result(*made)
        elif isinstance(made, dict):
            made = Result(attributes=made)
        response["PhysicalResourceId"] = made.physical_id or current_id or ""
        if made.attributes:
            response["Data"] = made.attributes
        if made.no_echo:
            response["NoEcho"] = True

    @staticmethod
    def _failed(response, event, reason, kind, physical_id):
        response["Status"] = "FAILED"
        response["Reason"] = reason
        response["ErrorCode"] = kind
        response["PhysicalResourceId"] = (
            physical_id or event.get("PhysicalResourceId") or _failed_create_id(event))
        response.pop("Data", None)


def put_response(url, response, attempts=6):
    """PUTs `response` to the ResponseURL, retrying connection failures and
    5xx answers with backoff (about 6 s in all)."""
    body = json.dumps(response).encode()
    delay = 0.2
    for attempt in range(attempts):
        req = urllib.request.Request(url, data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
                return True
        except urllib.error.HTTPError as e:
            if e.code < 500:
                print("the ResponseURL refused the response: HTTP %d %s" % (e.code, e.read()[:200]),
                      file=sys.stderr, flush=True)
                return False
        except (urllib.error.URLError, OSError):
            pass
        if attempt + 1 < attempts:
            time.sleep(delay)
            delay *= 2
    print("could not PUT the response to %s" % url, file=sys.stderr, flush=True)
    return False


class SignedRequests(BaseHTTPRequestHandler):
    """An HTTP handler for Cairn's signed JSON requests: `secret` is the
    shared signing secret ("" accepts unsigned requests)."""

    secret = ""

    def log_message(self, *args):
        pass

    def _send(self, code, body=b"", content_type="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def signed_event(self):
        """The POSTed JSON when it is Cairn's, else None (refused with the
        reason already)."""
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.secret:
            problem = signature_problem(self.secret, self.headers, body)
            if problem:
                self._send(401, problem.encode(), "text/plain")
                return None
        try:
            return json.loads(body)
        except ValueError as e:
            self._send(400, ("the body is not JSON: %s" % e).encode(), "text/plain")
            return None


def _http_handler(handler):
    class Http(SignedRequests):
        secret = handler.secret

        def do_GET(self):
            if self.path.rstrip("/") == "/schema":
                self._send(200, json.dumps(handler.schemas()).encode())
            else:
                self._send(404, b"GET /schema lists the types; POST / takes requests", "text/plain")

        def do_POST(self):
            event = self.signed_event()
            if event is None:
                return
            headers = dict(self.headers.items())
            name = "%s %s" % (event.get("RequestType", "Request"), event.get("ResourceType", ""))
            attributes = {"cairn.request_id": str(event.get("RequestId", "")),
                          "cairn.logical_id": str(event.get("LogicalResourceId", ""))}

            def run():
                # The request's span, the child of the Cairn call's.
                with tracing.handling(headers, name.strip(), attributes):
                    return handler.run(event)
            if handler.respond_in_reply:
                self._send(200, json.dumps(run()).encode())
                return
            self._send(200)

            def answer():
                put_response(event.get("ResponseURL"), run())
            threading.Thread(target=answer, daemon=True).start()

    return Http


def server(provider, listen="127.0.0.1:8080", secret="", respond_in_reply=False):
    """An HTTP server for `provider` (not started)."""
    host, port = listen.rsplit(":", 1)
    handler = Handler(provider, secret, respond_in_reply)
    return ThreadingHTTPServer((host, int(port)), _http_handler(handler))


def serve(provider, argv=None):
    """Serves `provider` until interrupted. Command line: `--listen
    HOST:PORT` (default 127.0.0.1:8080), `--secret S` (or the environment's
    CAIRN_WEBHOOK_SECRET), `--respond-in-reply`. Prints `listening on
    HOST:PORT` first."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:8080")
    ap.add_argument("--secret", default=os.environ.get("CAIRN_WEBHOOK_SECRET", ""))
    ap.add_argument("--respond-in-reply", action="store_true")
    args = ap.parse_args(argv)
    httpd = server(provider, args.listen, args.secret, args.respond_in_reply)
    print("listening on %s:%d" % httpd.server_address, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


def replying_server(answer, listen="127.0.0.1:8080", secret=""):
    """An HTTP server (not started) answering each signed POST in the reply
    with `answer(event)` as JSON: what macros and hooks are served with."""
    signing_secret = secret

    class Http(SignedRequests):
        secret = signing_secret

        def do_POST(self):
            event = self.signed_event()
            if event is not None:
                with tracing.handling(dict(self.headers.items()), "cairn request"):
                    reply = answer(event)
                self._send(200, json.dumps(reply).encode())

    host, port = listen.rsplit(":", 1)
    return ThreadingHTTPServer((host, int(port)), Http)


def serve_replying(answer, argv=None):
    """Serves `answer` (see replying_server) until interrupted. Command
    line: `--listen HOST:PORT` (default 127.0.0.1:8080), `--secret S` (or
    CAIRN_WEBHOOK_SECRET). Prints `listening on HOST:PORT` first."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:8080")
    ap.add_argument("--secret", default=os.environ.get("CAIRN_WEBHOOK_SECRET", ""))
    args = ap.parse_args(argv)
    httpd = replying_server(answer, args.listen, args.secret)
    print("listening on %s:%d" % httpd.server_address, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
