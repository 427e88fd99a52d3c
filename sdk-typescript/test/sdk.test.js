// The SDK's own tests, against its build (dist/): node --test test/sdk.test.js
const test = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const sdk = require("../dist/index.js");

const NOTE = new sdk.ResourceType("Example::Test::Note", {
  properties: {
    Name: sdk.string({ required: true, createOnly: true }),
    Size: sdk.integer(),
    Ratio: sdk.number(),
    Loud: sdk.boolean(),
    Tags: sdk.list(sdk.string()),
    Limits: sdk.map(sdk.integer()),
  },
  attributes: { Path: "the file" },
  primaryIdentifier: ["Path"],
});

test("stringified values are coerced to the declared types", () => {
  const got = NOTE.coerce({ ServiceToken: "x", Name: 7, Size: "12", Ratio: "0.5", Loud: "True", Tags: [1, "b"], Limits: { a: "3" }, Other: "kept" });
  assert.deepEqual(got, { Name: "7", Size: 12, Ratio: 0.5, Loud: true, Tags: ["1", "b"], Limits: { a: 3 }, Other: "kept" });
  assert.throws(() => NOTE.coerce({ Size: "1.5" }), { name: "InvalidRequest", message: '#/Size: expected type: Integer, found: "1.5"' });
  assert.throws(() => NOTE.coerce({ Loud: "yes" }), { message: '#/Loud: expected type: Boolean, found: "yes"' });
  assert.throws(() => NOTE.coerce({ Tags: [{}] }), { message: "#/Tags/0: expected type: String, found: {}" });
});

test("the schema is Cairn's", () => {
  assert.deepEqual(NOTE.schema().Properties.Name, { Type: "String", Required: true, Update: "CreateOnly" });
  assert.deepEqual(NOTE.schema().Properties.Tags, { Type: "List", Items: { Type: "String" }, Required: false, Update: "Mutable" });
  assert.deepEqual(NOTE.schema().PrimaryIdentifier, ["Path"]);
});

test("drift is compared as CloudFormation reports it", () => {
  assert.deepEqual(sdk.compare({ A: "1", B: [1, 2] }, { A: "1", B: [1, 2] }), { Status: "IN_SYNC" });
  assert.deepEqual(sdk.compare({ A: "1", B: [1], "x/y": 2 }, { A: "2", B: [1, 3] }).PropertyDifferences, [
    { PropertyPath: "/A", ExpectedValue: "1", ActualValue: "2", DifferenceType: "NOT_EQUAL" },
    { PropertyPath: "/B/1", ExpectedValue: "null", ActualValue: "3", DifferenceType: "ADD" },
    { PropertyPath: "/x~1y", ExpectedValue: "2", ActualValue: "null", DifferenceType: "REMOVE" },
  ]);
});

test("a signature is checked as Cairn makes it", () => {
  const body = Buffer.from('{"a":1}');
  const ts = "1800000000";
  const sig = "v1=" + crypto.createHmac("sha256", "s").update(ts + "." + body).digest("hex");
  const headers = { "x-cairn-timestamp": ts, "x-cairn-signature": sig };
  assert.equal(sdk.signatureProblem("s", headers, body, 1800000010), undefined);
  assert.match(sdk.signatureProblem("t", headers, body, 1800000010), /the signature does not match/);
  assert.match(sdk.signatureProblem("s", headers, body, 1800001000), /more than 300 s away/);
  assert.match(sdk.signatureProblem("s", {}, body), /not signed/);
});

const event = (extra) => ({ StackId: "arn:aws:cloudformation:us-east-1:1:stack/st/id", RequestId: "r", LogicalResourceId: "N", ResourceType: "Example::Test::Note", ...extra });

test("the handler answers each request type and error", async () => {
  const made = [];
  const h = new sdk.Handler({
    types: [NOTE],
    create: (r) => { made.push(r.properties); return { physicalId: "n-" + r.properties.Name, attributes: { Path: "/p" } }; },
    update: (r) => { if (r.changed.includes("Size")) throw new sdk.NotUpdatable("Size cannot change"); },
    delete: () => { throw new sdk.NotFound("gone"); },
  });
  const created = await h.run(event({ RequestType: "Create", ResourceProperties: { Name: "a", Size: "2" } }));
  assert.deepEqual(created, { Status: "SUCCESS", StackId: event().StackId, RequestId: "r", LogicalResourceId: "N", PhysicalResourceId: "n-a", Data: { Path: "/p" } });
  assert.deepEqual(made, [{ Name: "a", Size: 2 }]);
  const kept = await h.run(event({ RequestType: "Update", PhysicalResourceId: "n-a", ResourceProperties: { Name: "a" }, OldResourceProperties: { Name: "a" } }));
  assert.equal(kept.PhysicalResourceId, "n-a");
  const refused = await h.run(event({ RequestType: "Update", PhysicalResourceId: "n-a", ResourceProperties: { Name: "a", Size: 3 }, OldResourceProperties: { Name: "a" } }));
  assert.deepEqual([refused.Status, refused.Reason, refused.ErrorCode, refused.PhysicalResourceId], ["FAILED", "Size cannot change", "NotUpdatable", "n-a"]);
  assert.equal((await h.run(event({ RequestType: "Delete", PhysicalResourceId: "n-a", ResourceProperties: {} }))).Status, "SUCCESS");
  assert.deepEqual((await h.run(event({ RequestType: "CheckDrift", PhysicalResourceId: "n-a", ResourceProperties: {} }))).Data, { Status: "NOT_CHECKED" });
  assert.deepEqual((await h.run(event({ RequestType: "Read", PhysicalResourceId: "n-a" }))).Data, { Outcome: "NOT_SUPPORTED" });
  const bad = await h.run(event({ RequestType: "Create", ResourceProperties: { Name: "a", Size: "x" } }));
  assert.equal(bad.ErrorCode, "InvalidRequest");
  assert.match(bad.PhysicalResourceId, /^st_N_[A-Z0-9]{8}$/);
});

test("the type's configuration reaches the request", async () => {
  const seen = [];
  const h = new sdk.Handler({
    types: [NOTE],
    create: (r) => { seen.push(r.typeConfiguration); return { physicalId: "n" }; },
    update: () => {},
    delete: () => {},
  });
  await h.run(event({ RequestType: "Create", ResourceProperties: { Name: "a" } }));
  await h.run(event({ RequestType: "Create", ResourceProperties: { Name: "b" }, TypeConfiguration: { Root: "/srv" } }));
  assert.deepEqual(seen, [undefined, { Root: "/srv" }]);
});

const cdk = (onEvent, isComplete, totalTimeoutMs = 1000) => ({ onEvent, isComplete, queryIntervalMs: 10, totalTimeoutMs, functionName: "f", timeoutSeconds: 60 });

test("the CDK contract: ids, isComplete, timeouts and failed creates", async () => {
  const seen = [];
  let polls = 0;
  const ok = await sdk.runCdk(event({ RequestType: "Create", ResponseURL: "http://x/", ResourceProperties: {} }), cdk(
    async (e) => { seen.push("ResponseURL" in e); return { Data: { A: "1" }, Extra: 5 }; },
    async (e) => { polls++; assert.equal(e.Extra, 5); return polls < 2 ? { IsComplete: false } : { IsComplete: true, Data: { B: "2" } }; },
  ));
  assert.deepEqual([ok.Status, ok.PhysicalResourceId, ok.Data, seen, polls], ["SUCCESS", "r", { A: "1", B: "2" }, [false], 2]);
  const slow = await sdk.runCdk(event({ RequestType: "Update", PhysicalResourceId: "p", ResourceProperties: {} }), cdk(async () => ({}), async () => ({ IsComplete: false }), 50));
  assert.deepEqual([slow.Status, slow.Reason, slow.PhysicalResourceId], ["FAILED", "Operation timed out", "p"]);
  const early = await sdk.runCdk(event({ RequestType: "Update", PhysicalResourceId: "p" }), cdk(async () => ({}), async () => ({ IsComplete: false, Data: {} })));
  assert.equal(early.Reason, '"Data" is not allowed if "IsComplete" is "False"');
  const renamed = await sdk.runCdk(event({ RequestType: "Delete", PhysicalResourceId: "p" }), cdk(async () => ({ PhysicalResourceId: "q" })));
  assert.equal(renamed.Reason, 'DELETE: cannot change the physical resource ID from "p" to "q" during deletion');
  const failed = await sdk.runCdk(event({ RequestType: "Create" }), cdk(async () => { throw new Error("no"); }));
  assert.deepEqual([failed.Status, failed.Reason, failed.PhysicalResourceId], ["FAILED", "no", sdk.CREATE_FAILED_MARKER]);
  let called = false;
  const skipped = await sdk.runCdk(event({ RequestType: "Delete", PhysicalResourceId: sdk.CREATE_FAILED_MARKER }), cdk(async () => { called = true; }));
  assert.deepEqual([skipped.Status, called], ["SUCCESS", false]);
});

test("a callback-style handler and context.succeed settle an invocation", async () => {
  assert.equal(await sdk.invoke((e, c, cb) => cb(null, "cb"), {}, "f", 60), "cb");
  assert.equal(await sdk.invoke((e, c) => { c.succeed("ok"); }, {}, "f", 60), "ok");
  await assert.rejects(sdk.invoke(async () => { throw new Error("boom"); }, {}, "f", 60), /boom/);
  await sdk.invoke((e, c) => {
    assert.match(c.logStreamName, /^\d{4}\/\d{2}\/\d{2}\/\[\$LATEST\][0-9a-f]{32}$/);
    assert.ok(c.getRemainingTimeInMillis() > 59000);
    c.done();
  }, {}, "f", 60);
});

test("a hook is answered by its invocation point, the token echoed", async () => {
  const hook = {
    preCreate: (req) => {
      if (req.callbackContext.looked !== true) return sdk.inProgress({ looked: true });
      return req.resourceProperties.Mode === "0600" ? sdk.success() : sdk.nonCompliant(`Mode must be 0600, not ${req.resourceProperties.Mode}`);
    },
    preUpdate: () => {
      throw new TypeError("broken");
    },
  };
  const event = (point, mode, context) => ({
    clientRequestToken: "t-1",
    actionInvocationPoint: point,
    requestData: { targetName: "Cairn::Local::File", targetType: "RESOURCE", targetLogicalId: "F", targetModel: { resourceProperties: { Mode: mode } } },
    requestContext: { invocation: 1, callbackContext: context ?? {} },
  });
  assert.deepEqual(await sdk.runHook(hook, event("CREATE_PRE_PROVISION", "0644")), {
    hookStatus: "IN_PROGRESS",
    callbackContext: { looked: true },
    callbackDelaySeconds: 0,
    clientRequestToken: "t-1",
  });
  assert.deepEqual(await sdk.runHook(hook, event("CREATE_PRE_PROVISION", "0644", { looked: true })), {
    hookStatus: "FAILED",
    errorCode: "NonCompliant",
    message: "Mode must be 0600, not 0644",
    clientRequestToken: "t-1",
  });
  const broken = await sdk.runHook(hook, event("UPDATE_PRE_PROVISION", "0600"));
  assert.equal(broken.message, "TypeError: broken");
  assert.equal((await sdk.runHook(hook, event("DELETE_PRE_PROVISION", "0644"))).hookStatus, "SUCCESS");
});

test("a served request runs in a span that continues the traceparent's trace", async () => {
  const otel = require("@opentelemetry/api");
  const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-base");
  const spans = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  otel.trace.setGlobalTracerProvider(provider);
  assert.equal(sdk.traceparentOf({ traceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01" }), undefined);
  const headers = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" };
  const answer = await sdk.handling(headers, "Create Custom::Thing", { "cairn.request_id": "r-1" }, async () => "done");
  assert.equal(answer, "done");
  const [served] = spans.getFinishedSpans();
  assert.equal(served.name, "Create Custom::Thing");
  assert.equal(served.spanContext().traceId, "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal((served.parentSpanContext ?? {}).spanId ?? served.parentSpanId, "00f067aa0ba902b7");
  assert.equal(served.kind, otel.SpanKind.SERVER);
  assert.equal(served.attributes["cairn.request_id"], "r-1");
  await assert.rejects(sdk.handling(headers, "Delete Custom::Thing", {}, async () => { throw new Error("boom"); }), /boom/);
  assert.equal(spans.getFinishedSpans()[1].status.code, otel.SpanStatusCode.ERROR);
});
