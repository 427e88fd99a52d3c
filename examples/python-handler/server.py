"""Runs a Lambda-style `handler(event, context)` behind HTTP for Cairn.

Cairn POSTs the custom-resource event; this answers 200 at once and invokes
the handler in a thread with a Lambda-like context, as an asynchronous Lambda
invocation does; the handler sends its response to the event's ResponseURL
itself (cfnresponse). With CAIRN_WEBHOOK_SECRET set, requests whose
X-Cairn-Signature does not match are refused with 401.

    python3 server.py --listen 127.0.0.1:8081 [--module handler --function handler]
"""

import argparse
import hashlib
import hmac
import importlib
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LambdaContext:
    """What handlers written for Lambda read from their context."""

    def __init__(self, function_name, timeout_seconds=900):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = "/cairn/" + function_name
        self.log_stream_name = "cairn/" + self.aws_request_id
        self.memory_limit_in_mb = "128"
        self._deadline = time.time() + timeout_seconds

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.time()) * 1000))

    # Node-style callers.
    def done(self, *args, **kwargs):
        pass


def signature_ok(secret, headers, body):
    ts = headers.get("X-Cairn-Timestamp", "")
    sig = headers.get("X-Cairn-Signature", "")
    want = "v1=" + hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    fresh = ts.isdigit() and abs(time.time() - int(ts)) <= 300
    return fresh and hmac.compare_digest(sig, want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:8081")
    ap.add_argument("--module", default="handler")
    ap.add_argument("--function", default="handler")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    function = getattr(importlib.import_module(args.module), args.function)
    secret = os.environ.get("CAIRN_WEBHOOK_SECRET", "")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if secret and not signature_ok(secret, self.headers, body):
                self.send_response(401)
                self.end_headers()
                self.wfile.write(b"the request signature does not match CAIRN_WEBHOOK_SECRET")
                return
            event = json.loads(body)
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()
            context = LambdaContext(args.module + "." + args.function)
            threading.Thread(target=function, args=(event, context)).start()

    host, port = args.listen.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    print("listening on %s:%d" % server.server_address, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
