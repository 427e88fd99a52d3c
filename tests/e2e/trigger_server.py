"""A health check and an Alertmanager for rollback-trigger tests.

GET /health answers with the HTTP status written in DIR/health (200 when
the file is missing); GET /api/v2/alerts answers with the JSON list in
DIR/alerts ([] when missing). Every request's path and query is appended
to DIR/requests.log. Prints `listening on 127.0.0.1:PORT` first."""

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR = sys.argv[1]


def read(name, default):
    try:
        with open(os.path.join(DIR, name)) as f:
            return f.read().strip() or default
    except FileNotFoundError:
        return default


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(DIR, "requests.log"), "a") as log:
            log.write(self.path + "\n")
        if self.path.startswith("/health"):
            status, body = int(read("health", "200")), b"health\n"
        elif self.path.startswith("/api/v2/alerts"):
            status, body = 200, read("alerts", "[]").encode()
        else:
            status, body = 404, b"not found\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
server.serve_forever()
