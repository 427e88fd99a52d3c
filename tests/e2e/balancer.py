"""A round-robin HTTP load balancer for the several-engines tests: the one
address in front of every `cairn serve` engine, as a platform team runs them.

    python3 balancer.py --backends FILE

It prints `listening on http://127.0.0.1:PORT` first. FILE lists the
engines' base URLs, one per line; it is read again for every request, so the
test can write it after the engines start. Each request goes to the next
engine in turn; an engine that refuses the connection (killed) is skipped,
as a load balancer's health check would, and the request goes to the next.
An engine that fails after the request reached it (killed meanwhile) gets
a POST answered 502, as nginx does; an idempotent request (GET, PUT: a
custom resource's response) goes to the next engine instead, as nginx's
`proxy_next_upstream error` does. Every forwarded
request is logged to FILE.log as `<method> <path> -> <backend> <status>`.
"""

import argparse
import http.client
import itertools
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", required=True)
    args = ap.parse_args()
    turn = itertools.count()
    log_lock = threading.Lock()

    def backends():
        try:
            with open(args.backends) as f:
                return [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            return []

    class Balancer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def forward(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            urls = backends()
            if not urls:
                return self.answer(503, b"no engine yet")
            start = next(turn)
            for i in range(len(urls)):
                url = urls[(start + i) % len(urls)]
                target = urllib.parse.urlsplit(url)
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
                try:
                    conn.connect()
                except OSError:
                    continue  # down: the next engine gets it
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    reply = conn.getresponse()
                    data = reply.read()
                except OSError as e:
                    self.note(url, 502)
                    if self.command in ("GET", "PUT"):
                        continue
                    return self.answer(502, f"the engine failed: {e}".encode())
                finally:
                    conn.close()
                self.note(url, reply.status)
                self.send_response(reply.status)
                for k, v in reply.getheaders():
                    if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.answer(503, b"every engine is down")

        def note(self, url, status):
            with log_lock:
                with open(args.backends + ".log", "a") as log:
                    log.write(f"{self.command} {self.path.split('?')[0]} -> {url} {status}\n")

        def answer(self, status, text):
            self.send_response(status)
            self.send_header("content-length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        do_GET = do_POST = do_PUT = forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Balancer)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
