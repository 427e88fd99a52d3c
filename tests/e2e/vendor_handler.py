"""A remote handler written for CloudFormation (stdlib only): it serves
Vendor::Net::Subnet over the custom-resource protocol, lists it at
GET /schema, and answers any request type it does not know (Cairn's
CheckDrift) FAILED, as such handlers do. Prints `listening on HOST:PORT`.
Every request's RequestType goes to --log, one line each."""

import argparse
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCHEMA = {"Schemas": [{
    "TypeName": "Vendor::Net::Subnet",
    "Properties": {"Cidr": {"Type": "String"}},
    "Attributes": {},
}]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--config-log", help="where each Create's TypeConfiguration goes, as JSON")
    args = ap.parse_args()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = json.dumps(SCHEMA).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            event = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()
            with lock, open(args.log, "a") as f:
                f.write(event["RequestType"] + "\n")
            if args.config_log and event["RequestType"] == "Create":
                with lock, open(args.config_log, "a") as f:
                    f.write(json.dumps(event.get("TypeConfiguration")) + "\n")
            kind = event["RequestType"]
            response = {
                "Status": "SUCCESS",
                "PhysicalResourceId": event.get("PhysicalResourceId") or "subnet-" + event["RequestId"][:8],
                "StackId": event["StackId"],
                "RequestId": event["RequestId"],
                "LogicalResourceId": event["LogicalResourceId"],
                "Data": {},
            }
            if kind not in ("Create", "Update", "Delete"):
                response["Status"] = "FAILED"
                response["Reason"] = "Unknown request type " + kind
            req = urllib.request.Request(event["ResponseURL"], data=json.dumps(response).encode(), method="PUT",
                                         headers={"content-type": ""})
            urllib.request.urlopen(req, timeout=10).read()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("listening on %s:%d" % server.server_address, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
