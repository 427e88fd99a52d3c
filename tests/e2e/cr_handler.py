"""A custom-resource handler for Cairn's end-to-end tests (stdlib only).

It answers CloudFormation custom-resource requests the way a Lambda handler
using cfnresponse does, steered by the resource's properties (which arrive
stringified, as from CloudFormation):

  Mode          async (default: 200 to the POST, then a PUT to ResponseURL),
                sync (the response is the POST's reply), silent (never
                answers), oversize, malformed, duplicate (PUTs twice),
                wrongid (answers with another RequestId), forged (first PUTs
                to the ResponseURL with its Signature changed), late (never
                answers a Create; when the Delete comes, first PUTs to the
                Create's expired ResponseURL)
  ModeOn        request types Mode applies to (default: all)
  FailOn        request types answered FAILED, e.g. "Create" or "Update,Delete"
  FailWhile     a file path: FailOn applies only while that file exists
  Reason        the Reason of a FAILED response
  PhysicalId    the PhysicalResourceId to answer with (default: a new
                "<LogicalResourceId>-<n>" on Create, the request's otherwise)
  Data          a map returned as Data
  NoEcho        "true" to answer with NoEcho
  Delay         seconds to wait before PUTting the response (async mode)
  PostDelay     seconds to hold the POST open before answering it 200 (async
                mode; the response is PUT all the same, even when the
                sender is gone by then)
  DriftAnswer   the Data of the answer to a CheckDrift request (Cairn's
                extension): {"Status": ..., "PropertyDifferences": [...]}

Every request is appended to the --log file as one JSON line: the event, the
signature check, and the HTTP status of each PUT the handler made. The number
of requests received so far is in <log>.received (written before answering).
"""

import argparse
import hashlib
import hmac
import json
import os
import ssl
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTER = {"n": 0}
EXPIRED = {}


SSL_CONTEXT = None


def put(url, body):
    req = urllib.request.Request(url, data=body, method="PUT", headers={"content-type": ""})
    try:
        with urllib.request.urlopen(req, timeout=10, context=SSL_CONTEXT) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--secret", default="")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (and --tls-key)")
    ap.add_argument("--tls-key")
    ap.add_argument("--cafile", help="trust this PEM CA for the responses' PUTs")
    args = ap.parse_args()
    if args.cafile:
        global SSL_CONTEXT
        SSL_CONTEXT = ssl.create_default_context(cafile=args.cafile)

    def record(entry):
        with LOCK:
            with open(args.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            # Counted before answering: a reader of the log waits until every
            # request received has its line (written after its PUTs).
            with LOCK:
                COUNTER["received"] = COUNTER.get("received", 0) + 1
                with open(args.log + ".received", "w") as f:
                    f.write(str(COUNTER["received"]))
            ts = self.headers.get("X-Cairn-Timestamp", "")
            sig = self.headers.get("X-Cairn-Signature", "")
            want = "v1=" + hmac.new(args.secret.encode(), (ts + ".").encode() + raw, hashlib.sha256).hexdigest()
            event = json.loads(raw)
            props = event.get("ResourceProperties", {})
            mode = props.get("Mode", "async")
            rtype = event["RequestType"]
            mode_on = props.get("ModeOn")
            if mode_on and rtype not in [s.strip() for s in mode_on.split(",")]:
                mode = "late-delete" if mode == "late" else "async"
            failed = rtype in [s.strip() for s in props.get("FailOn", "").split(",")]
            if props.get("FailWhile") and not os.path.exists(props["FailWhile"]):
                failed = False
            if props.get("PhysicalId"):
                physical = props["PhysicalId"]
            elif rtype == "Create":
                with LOCK:
                    COUNTER["n"] += 1
                    physical = "%s-%d" % (event["LogicalResourceId"], COUNTER["n"])
            else:
                physical = event["PhysicalResourceId"]
            response = {
                "Status": "FAILED" if failed else "SUCCESS",
                "Reason": props.get("Reason", "See the details in CloudWatch Log Stream: test"),
                "PhysicalResourceId": physical,
                "StackId": event["StackId"],
                "RequestId": event["RequestId"],
                "LogicalResourceId": event["LogicalResourceId"],
                "NoEcho": props.get("NoEcho") == "true",
                "Data": props.get("Data", {}),
            }
            if rtype == "CheckDrift":
                response["Data"] = props.get("DriftAnswer", {"Status": "IN_SYNC"})
            if mode == "wrongid":
                response["RequestId"] = "not-" + event["RequestId"]
            body = json.dumps(response).encode()
            if mode == "oversize":
                response["Data"] = {"Blob": "x" * 5000}
                body = json.dumps(response).encode()
            if mode == "malformed":
                body = b'{"Status": "SUCCESS", '
            entry = {"event": event, "signature_ok": hmac.compare_digest(sig, want), "puts": []}
            if mode == "sync":
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(body)
                record(entry)
                return
            post_delay = float(props.get("PostDelay", "0"))
            if not post_delay:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()
            if mode in ("silent", "late"):
                with LOCK:
                    EXPIRED[event["LogicalResourceId"]] = event["ResponseURL"]
                record(entry)
                return

            def answer():
                if props.get("Delay"):
                    time.sleep(float(props["Delay"]))
                if mode == "late-delete":
                    entry["puts"].append(put(EXPIRED.get(event["LogicalResourceId"], ""), body))
                if mode == "forged":
                    url = event["ResponseURL"]
                    forged = url[:-4] + ("0000" if not url.endswith("0000") else "1111")
                    entry["puts"].append(put(forged, body))
                entry["puts"].append(put(event["ResponseURL"], body))
                if mode == "duplicate":
                    time.sleep(0.05)
                    entry["puts"].append(put(event["ResponseURL"], body))
                record(entry)

            threading.Thread(target=answer).start()
            if post_delay:
                time.sleep(post_delay)
                try:
                    self.send_response(200)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender is gone

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
