"""The Python SDK on its own: signatures, coercion, drift comparison and
the responses a Handler builds (typed errors travel as ErrorCode)."""

import hashlib
import hmac
import json
import os
import sys
import threading
import unittest
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cairn_provider as cp  # noqa: E402

THING = cp.ResourceType("Test::Py::Thing", attributes={"Arn": "its ARN"}, properties={
    "Name": cp.String(required=True, create_only=True),
    "Size": cp.Integer(),
    "Ratio": cp.Number(),
    "On": cp.Boolean(),
    "Tags": cp.List(cp.String()),
    "Limits": cp.Map(cp.Integer()),
})


class Things(cp.Provider):
    types = [THING]

    def __init__(self):
        self.made = {}

    def create(self, request):
        if request.properties.get("Size", 0) > 100:
            raise cp.InvalidRequest("Size must be at most 100")
        pid = "thing-" + request.properties["Name"]
        self.made[pid] = request.properties
        return cp.Result(pid, {"Arn": "arn:" + pid})

    def update(self, request):
        self.made[request.physical_id] = request.properties
        return {"Arn": "arn:" + request.physical_id}

    def delete(self, request):
        if self.made.pop(request.physical_id, None) is None:
            raise cp.NotFound(request.physical_id)

    def check_drift(self, request):
        if request.physical_id not in self.made:
            return cp.deleted()
        return cp.compare(request.properties, self.made[request.physical_id])


def event(kind, props, physical=None, old=None):
    e = {"RequestType": kind, "ResponseURL": "http://127.0.0.1:1/r", "StackId":
         "arn:aws:cloudformation:us-east-1:123456789012:stack/st/1", "RequestId": "r-1",
         "ResourceType": "Test::Py::Thing", "LogicalResourceId": "T",
         "ResourceProperties": dict(props, ServiceToken="http://h/")}
    if physical:
        e["PhysicalResourceId"] = physical
    if old is not None:
        e["OldResourceProperties"] = old
    return e


class SchemaAndCoercion(unittest.TestCase):
    def test_the_schema_is_cairns(self):
        s = THING.schema()
        self.assertEqual(s["Properties"]["Name"], {"Type": "String", "Required": True, "Update": "CreateOnly"})
        self.assertEqual(s["Properties"]["Tags"]["Items"], {"Type": "String"})
        self.assertEqual(s["Properties"]["Limits"], {"Type": "Map", "Items": {"Type": "Integer"}, "Required": False, "Update": "Mutable"})
        self.assertEqual(s["Attributes"], {"Arn": {"Description": "its ARN"}})

    def test_stringified_values_come_back_typed(self):
        got = THING.coerce({"ServiceToken": "x", "Name": "a", "Size": "14", "Ratio": "0.5",
                            "On": "true", "Tags": ["1", "b"], "Limits": {"cpu": "2"}})
        self.assertEqual(got, {"Name": "a", "Size": 14, "Ratio": 0.5, "On": True,
                               "Tags": ["1", "b"], "Limits": {"cpu": 2}})

    def test_a_wrong_type_names_the_property(self):
        with self.assertRaises(cp.InvalidRequest) as e:
            THING.coerce({"Name": "a", "Limits": {"cpu": "many"}})
        self.assertEqual(e.exception.message, "#/Limits/cpu: expected type: Integer, found: 'many'")


class Responses(unittest.TestCase):
    def setUp(self):
        self.h = cp.Handler(Things())

    def test_create_update_drift_delete(self):
        r = self.h.run(event("Create", {"Name": "a", "Size": "1"}))
        self.assertEqual((r["Status"], r["PhysicalResourceId"], r["Data"]), ("SUCCESS", "thing-a", {"Arn": "arn:thing-a"}))
        r = self.h.run(event("Update", {"Name": "a", "Size": "2"}, "thing-a", {"Name": "a", "Size": "1"}))
        self.assertEqual((r["Status"], r["PhysicalResourceId"]), ("SUCCESS", "thing-a"))
        r = self.h.run(event("CheckDrift", {"Name": "a", "Size": "3"}, "thing-a"))
        self.assertEqual(r["Data"], {"Status": "MODIFIED", "PropertyDifferences": [
            {"PropertyPath": "/Size", "ExpectedValue": "3", "ActualValue": "2", "DifferenceType": "NOT_EQUAL"}]})
        self.assertEqual(self.h.run(event("Delete", {"Name": "a"}, "thing-a"))["Status"], "SUCCESS")
        # Deleting what is gone succeeds (NotFound counts as deleted).
        self.assertEqual(self.h.run(event("Delete", {"Name": "a"}, "thing-a"))["Status"], "SUCCESS")
        self.assertEqual(self.h.run(event("CheckDrift", {"Name": "a"}, "thing-a"))["Data"], {"Status": "DELETED"})

    def test_the_types_configuration_reaches_the_request(self):
        seen = []

        class Configured(Things):
            def create(self, request):
                seen.append(request.type_configuration)
                return super().create(request)

        h = cp.Handler(Configured())
        e = event("Create", {"Name": "c"})
        h.run(e)
        e["TypeConfiguration"] = {"Root": "/srv"}
        h.run(e)
        self.assertEqual(seen, [None, {"Root": "/srv"}])

    def test_read_found_missing_and_not_supported(self):
        class Readable(Things):
            def read(self, request):
                if request.physical_id not in self.made:
                    raise cp.NotFound("no %s" % request.physical_id)
                return cp.found(dict(self.made[request.physical_id], Gone=None),
                                {"Arn": "arn:" + request.physical_id})
        h = cp.Handler(Readable())
        h.run(event("Create", {"Name": "a", "Size": "1"}))
        # A read names the resource only: its properties are not coerced.
        r = h.run(dict(event("Read", {}, "thing-a")))
        self.assertEqual((r["Status"], r["Data"]), ("SUCCESS", {
            "Outcome": "FOUND", "Properties": {"Name": "a", "Size": 1}, "Attributes": {"Arn": "arn:thing-a"}}))
        r = h.run(event("Read", {}, "thing-b"))
        self.assertEqual((r["Status"], r["ErrorCode"], r["Reason"]), ("FAILED", "NotFound", "no thing-b"))
        self.assertEqual(self.h.run(event("Read", {}, "thing-a"))["Data"], {"Outcome": "NOT_SUPPORTED"})

    def test_typed_errors_travel_as_error_code(self):
        r = self.h.run(event("Create", {"Name": "a", "Size": "1000"}))
        self.assertEqual((r["Status"], r["Reason"], r["ErrorCode"]), ("FAILED", "Size must be at most 100", "InvalidRequest"))
        self.assertTrue(r["PhysicalResourceId"].startswith("st_T_"), r)

    def test_a_bug_is_an_internal_failure_with_its_text(self):
        class Buggy(Things):
            def create(self, request):
                return {}["missing"]
        r = cp.Handler(Buggy()).run(event("Create", {"Name": "a"}))
        self.assertEqual((r["Status"], r["Reason"], r["ErrorCode"]), ("FAILED", "KeyError: 'missing'", "InternalFailure"))


class Signatures(unittest.TestCase):
    def test_cairns_signature_is_accepted_and_others_are_not(self):
        body = b'{"a":1}'
        sig = "v1=" + hmac.new(b"s3cret", b"1000." + body, hashlib.sha256).hexdigest()
        ok = {"X-Cairn-Timestamp": "1000", "X-Cairn-Signature": sig}
        self.assertIsNone(cp.signature_problem("s3cret", ok, body, now=1100))
        self.assertIn("does not match", cp.signature_problem("other", ok, body, now=1100))
        self.assertIn("more than 300 s", cp.signature_problem("s3cret", ok, body, now=2000))
        self.assertIn("not signed", cp.signature_problem("s3cret", {}, body))


class OverHttp(unittest.TestCase):
    """The server answers /schema and PUTs responses to the ResponseURL."""

    def test_schema_and_an_asynchronous_response(self):
        got = []

        class Sink(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_PUT(self):
                got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        sink = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        httpd = cp.server(Things(), "127.0.0.1:0", secret="")
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = "http://127.0.0.1:%d" % httpd.server_address[1]
        with urllib.request.urlopen(base + "/schema") as r:
            self.assertEqual(json.load(r)["Schemas"][0]["TypeName"], "Test::Py::Thing")
        e = event("Create", {"Name": "b"})
        e["ResponseURL"] = "http://127.0.0.1:%d/response" % sink.server_address[1]
        req = urllib.request.Request(base + "/", data=json.dumps(e).encode(), method="POST")
        with urllib.request.urlopen(req) as r:
            self.assertEqual(r.status, 200)
        for _ in range(100):
            if got:
                break
            threading.Event().wait(0.05)
        self.assertEqual(got[0]["PhysicalResourceId"], "thing-b")
        httpd.shutdown()
        sink.shutdown()


class Macros(unittest.TestCase):
    class Double(cp.Macro):
        def transform(self, fragment, request):
            if request.params.get("Fail"):
                raise cp.MacroError("asked to fail")
            if request.params.get("Bug"):
                return {}["missing"]
            return dict(fragment, Value=fragment["Value"] * 2,
                        Seen=request.template_parameter_values["P"])

    def event(self, **params):
        return {"region": "us-east-1", "accountId": "123456789012", "transformId": "123456789012::Double",
                "requestId": "r1", "fragment": {"Value": 2}, "params": params,
                "templateParameterValues": {"P": "v"}}

    def test_success_failure_and_a_bug(self):
        self.assertEqual(cp.macro.run(self.Double(), self.event()),
                         {"requestId": "r1", "status": "success", "fragment": {"Value": 4, "Seen": "v"}})
        self.assertEqual(cp.macro.run(self.Double(), self.event(Fail=True)),
                         {"requestId": "r1", "status": "failure", "errorMessage": "asked to fail"})
        self.assertEqual(cp.macro.run(self.Double(), self.event(Bug=True))["errorMessage"], "KeyError: 'missing'")

    def test_a_signed_request_over_http(self):
        httpd = cp.macro_server(self.Double(), "127.0.0.1:0", "s3cret")
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d/" % httpd.server_address[1]
        body = json.dumps(self.event()).encode()
        ts = str(int(__import__("time").time()))
        sig = "v1=" + hmac.new(b"s3cret", ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(url, data=body, headers={"X-Cairn-Timestamp": ts, "X-Cairn-Signature": sig})
        with urllib.request.urlopen(req) as r:
            self.assertEqual(json.loads(r.read())["fragment"], {"Value": 4, "Seen": "v"})
        unsigned = urllib.request.Request(url, data=body)
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(unsigned)
        self.assertEqual(refused.exception.code, 401)
        refused.exception.close()
        httpd.shutdown()
        httpd.server_close()


class Hooks(unittest.TestCase):
    class Mode(cp.Hook):
        def pre_create(self, request):
            if request.target_name != "Cairn::Local::File":
                return cp.success()
            if request.callback_context.get("looked") is not True:
                return cp.in_progress({"looked": True}, 0)
            if request.resource_properties.get("Mode") != request.hook_model.get("Mode", "0600"):
                return cp.non_compliant("Mode must be 0600")
            return cp.success()

        def pre_update(self, request):
            raise ValueError("broken")

    @staticmethod
    def event(point, mode, context=None):
        return {"clientRequestToken": "t-1", "hookTypeName": "Org::Files::Mode",
                "actionInvocationPoint": point, "hookModel": {},
                "requestData": {"targetName": "Cairn::Local::File", "targetType": "RESOURCE",
                                "targetLogicalId": "F",
                                "targetModel": {"resourceProperties": {"Mode": mode}}},
                "requestContext": {"invocation": 1, "callbackContext": context or {}}}

    def test_each_invocation_point_is_answered_with_the_token(self):
        hook = self.Mode()
        first = cp.hook.run(hook, self.event("CREATE_PRE_PROVISION", "0644"))
        self.assertEqual(first, {"hookStatus": "IN_PROGRESS", "callbackContext": {"looked": True},
                                 "callbackDelaySeconds": 0, "clientRequestToken": "t-1"})
        refused = cp.hook.run(hook, self.event("CREATE_PRE_PROVISION", "0644", {"looked": True}))
        self.assertEqual(refused, {"hookStatus": "FAILED", "errorCode": "NonCompliant",
                                   "message": "Mode must be 0600", "clientRequestToken": "t-1"})
        ok = cp.hook.run(hook, self.event("CREATE_PRE_PROVISION", "0600", {"looked": True}))
        self.assertEqual(ok["hookStatus"], "SUCCESS")
        broken = cp.hook.run(hook, self.event("UPDATE_PRE_PROVISION", "0600"))
        self.assertEqual((broken["errorCode"], broken["message"]),
                         ("InternalFailure", "ValueError: broken"))
        self.assertEqual(cp.hook.run(hook, self.event("DELETE_PRE_PROVISION", "0644"))["hookStatus"],
                         "SUCCESS")


class Tracing(unittest.TestCase):
    """A served request runs in a span that continues Cairn's trace."""

    def test_a_request_span_is_the_child_of_the_requests_traceparent(self):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from cairn_provider import tracing
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        with tracing.handling({"Traceparent": parent}, "Create Custom::Thing", {"cairn.request_id": "r-1"}):
            with trace.get_tracer("handler").start_as_current_span("the handler's own"):
                pass
        done = {s.name: s for s in spans.get_finished_spans()}
        served = done["Create Custom::Thing"]
        self.assertEqual(format(served.context.trace_id, "032x"), "4bf92f3577b34da6a3ce929d0e0e4736")
        self.assertEqual(format(served.parent.span_id, "016x"), "00f067aa0ba902b7")
        self.assertEqual(served.kind, trace.SpanKind.SERVER)
        self.assertEqual(served.attributes["cairn.request_id"], "r-1")
        own = done["the handler's own"]
        self.assertEqual(own.parent.span_id, served.context.span_id)


if __name__ == "__main__":
    unittest.main()
