"""A stack-notification webhook for tests: checks each POST's signature,
answers 200 and appends the message (with `signature_ok`) to
DIR/accepted.jsonl. When DIR/stall_at holds N and N messages were
accepted, the next one is held (DIR/stalled is written) until DIR/stall_at
is removed, and then refused with a 503: the engine that sent it may be
gone, and an event refused is not accepted. Prints `listening on
127.0.0.1:PORT` first."""

import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR, SECRET = sys.argv[1], sys.argv[2].encode()
LOCK = threading.Lock()


def path(name):
    return os.path.join(DIR, name)


def accepted():
    try:
        with open(path("accepted.jsonl")) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def stall_at():
    try:
        with open(path("stall_at")) as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ts = self.headers.get("X-Cairn-Timestamp", "")
        sig = self.headers.get("X-Cairn-Signature", "")
        want = "v1=" + hmac.new(SECRET, (ts + ".").encode() + raw, hashlib.sha256).hexdigest()
        status = 200
        with LOCK:
            n = stall_at()
            if n is not None and accepted() >= n:
                with open(path("stalled"), "w") as f:
                    f.write("yes")
                while stall_at() is not None:
                    time.sleep(0.05)
                status = 503
            else:
                message = json.loads(raw)
                message["signature_ok"] = hmac.compare_digest(sig, want)
                with open(path("accepted.jsonl"), "a") as f:
                    f.write(json.dumps(message) + "\n")
        try:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
server.serve_forever()
