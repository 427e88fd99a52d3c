//! Traces through `cairn serve`: an OTLP/HTTP receiver (OpenTelemetry's
//! protobuf types) gets one trace for a deploy, from the API request to
//! the operation, each resource step, each provider call and the webhook
//! POST, and the Python SDK's span for the handler's work as a child of
//! that POST; a collector that never answers slows nothing and its dropped
//! spans are counted.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use crate::support::{http_get, Scratch, Served};

/// A span as received, with the service that sent it.
#[derive(Clone, Debug)]
struct Got {
    service: String,
    span: Span,
}

impl Got {
    fn attribute(&self, key: &str) -> String {
        self.span
            .attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref()?.value.as_ref())
            .map(|v| match v {
                AnyValue::StringValue(s) => s.clone(),
                AnyValue::IntValue(i) => i.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default()
    }
}

/// An OTLP/HTTP receiver on a free loopback port: every span of every
/// `POST /v1/traces` (decoded with OpenTelemetry's protobuf types), or
/// (`answer` false) a collector that takes the connection and never
/// answers.
pub(crate) struct Receiver {
    port: u16,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Receiver {
    pub(crate) fn start(answer: bool) -> Receiver {
        if answer {
            let (port, bodies) = crate::support::http_sink();
            return Receiver { port, bodies };
        }
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                // Held open, never answered.
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_secs(600));
                    drop(conn);
                });
            }
        });
        Receiver {
            port,
            bodies: Arc::default(),
        }
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Got> {
        let bodies = self.bodies.lock().map(|b| b.clone()).unwrap_or_default();
        let mut got = Vec::new();
        for body in bodies {
            let Ok(request) = ExportTraceServiceRequest::decode(body.as_slice()) else {
                continue;
            };
            for rs in request.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                    .and_then(|a| a.value.as_ref()?.value.as_ref())
                    .map(|v| match v {
                        AnyValue::StringValue(s) => s.clone(),
                        _ => String::new(),
                    })
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        got.push(Got {
                            service: service.clone(),
                            span,
                        });
                    }
                }
            }
        }
        got
    }

    /// Whether a span of trace `trace` (hex) arrived.
    pub(crate) fn has_trace(&self, trace: &str) -> bool {
        self.spans().iter().any(|g| hex(&g.span.trace_id) == trace)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn named<'a>(spans: &'a [Got], name: &str) -> Vec<&'a Got> {
    spans.iter().filter(|g| g.span.name == name).collect()
}

fn one<'a>(spans: &'a [Got], name: &str) -> &'a Got {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        1,
        "one span {name:?}; got: {:?}",
        spans
            .iter()
            .map(|g| (&g.service, &g.span.name))
            .collect::<Vec<_>>()
    );
    found[0]
}

/// `cairn --endpoint … deploy NAME TEMPLATE`, which must succeed; how long
/// it took.
fn deploy(s: &Scratch, endpoint: &str, name: &str, template: &str) -> Duration {
    let started = Instant::now();
    crate::support::remote_ok_as(s, endpoint, ("AKIDANY", "any"), &["deploy", name, template]);
    started.elapsed()
}

#[test]
fn a_deploy_through_the_server_is_one_trace_from_the_request_to_the_handlers_span() {
    let receiver = Receiver::start(true);
    let s = Scratch::new();
    let things = s.dir.path().join("things");
    std::fs::create_dir_all(&things).expect("things dir");
    let mut handler = crate::webhooks::lambda_adapter(
        "things_handler.handler",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e"),
        "",
    );
    handler
        .env("THINGS_DIR", &things)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_SERVICE_NAME", "things")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    let handler = crate::webhooks::Program::start(handler);
    s.write(
        "cairn.toml",
        &format!(
            "[server]\nauth = \"none\"\n\n[telemetry]\nendpoint = \"{}\"\nservice_name = \"cairn-test\"\n",
            receiver.endpoint()
        ),
    );
    let (server, endpoint) = s.serve();
    let _server = Served(server);
    let template = s.write(
        "t.yaml",
        &format!(
            "Resources:\n  Base: {{Type: Cairn::Test::Resource, Properties: {{Value: b}}}}\n  Thing:\n    Type: Custom::Thing\n    DependsOn: Base\n    Properties: {{ServiceToken: 'http://127.0.0.1:{}/'}}\n",
            handler.port
        ),
    );
    deploy(
        &s,
        &endpoint,
        "traced",
        template.to_str().unwrap_or_default(),
    );

    // Everything arrives within a few export rounds.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut spans = receiver.spans();
    while Instant::now() < deadline {
        spans = receiver.spans();
        let handler_done = spans.iter().any(|g| g.service == "things");
        let operation_done = spans.iter().any(|g| {
            g.span.name == "CREATE_IN_PROGRESS traced" && !g.attribute("cairn.outcome").is_empty()
        });
        if handler_done && operation_done {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let request = one(&spans, "CreateStack");
    assert_eq!(request.service, "cairn-test");
    assert_eq!(request.span.kind, 2, "SERVER");
    let trace = hex(&request.span.trace_id);
    let operation = one(&spans, "CREATE_IN_PROGRESS traced");
    assert_eq!(operation.span.parent_span_id, request.span.span_id);
    assert_eq!(operation.attribute("cairn.outcome"), "CREATE_COMPLETE");
    assert_eq!(operation.attribute("cairn.kind"), "CREATE");
    for (step, call, transport) in [
        ("create Base", "creation Cairn::Test::Resource", "builtin"),
        ("create Thing", "creation Custom::Thing", "webhook"),
    ] {
        let step_span = one(&spans, step);
        assert_eq!(hex(&step_span.span.trace_id), trace, "{step}");
        assert_eq!(
            step_span.span.parent_span_id, operation.span.span_id,
            "{step}"
        );
        assert_eq!(step_span.attribute("cairn.succeeded"), "true");
        let call_span = one(&spans, call);
        assert_eq!(
            call_span.span.parent_span_id, step_span.span.span_id,
            "{call}"
        );
        assert_eq!(call_span.span.kind, 3, "CLIENT");
        assert_eq!(call_span.attribute("cairn.transport"), transport);
        assert_eq!(call_span.attribute("cairn.outcome"), "ok");
        assert_eq!(call_span.attribute("cairn.attempt"), "first");
        assert!(
            !call_span.attribute("cairn.physical_id").is_empty(),
            "{call}"
        );
        assert!(
            !call_span.attribute("cairn.request_id").is_empty(),
            "{call}"
        );
    }
    // The custom resource's POST, and the handler's span under it.
    let call = one(&spans, "creation Custom::Thing");
    let post = spans
        .iter()
        .find(|g| g.span.name == "POST" && g.span.parent_span_id == call.span.span_id)
        .unwrap_or_else(|| panic!("no POST under the call: {spans:?}"));
    assert_eq!(post.attribute("http.response.status_code"), "200");
    let served = one(&spans, "Create Custom::Thing");
    assert_eq!(served.service, "things");
    assert_eq!(hex(&served.span.trace_id), trace);
    assert_eq!(served.span.parent_span_id, post.span.span_id);
    assert_eq!(served.attribute("cairn.logical_id"), "Thing");
    assert_eq!(
        served.attribute("cairn.request_id"),
        call.attribute("cairn.request_id")
    );
    // Counted, nothing dropped.
    let metrics = http_get(&endpoint, "/metrics");
    assert!(
        metrics.contains("cairn_spans_total{outcome=\"dropped\"} 0"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("cairn_spans_total{outcome=\"exported\"} 0\n"),
        "{metrics}"
    );
}

#[test]
fn a_collector_that_never_answers_slows_no_deploy_and_its_dropped_spans_are_counted() {
    let many: String = (0..40)
        .map(|i| format!("  R{i}: {{Type: Cairn::Test::Resource, Properties: {{Value: v{i}}}}}\n"))
        .collect();
    let template = format!("Resources:\n{many}");
    let timed = |telemetry: &str| {
        let s = Scratch::new();
        s.write(
            "cairn.toml",
            &format!("[server]\nauth = \"none\"\n\n{telemetry}"),
        );
        let (server, endpoint) = s.serve();
        let _server = Served(server);
        let t = s.write("t.yaml", &template);
        let took = deploy(&s, &endpoint, "many", t.to_str().unwrap_or_default());
        // The first export gives up after its timeout: its spans are then
        // counted as dropped.
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut metrics = http_get(&endpoint, "/metrics");
        while Instant::now() < deadline
            && metrics.contains("cairn_spans_total{outcome=\"dropped\"} 0")
        {
            std::thread::sleep(Duration::from_millis(250));
            metrics = http_get(&endpoint, "/metrics");
        }
        (took, metrics)
    };
    let (alone, _) = timed("");
    let hole = Receiver::start(false);
    let (traced, metrics) = timed(&format!(
        "[telemetry]\nendpoint = \"{}\"\nqueue_size = 8\ntimeout_seconds = 1\n",
        hole.endpoint()
    ));
    println!("40-resource deploy through the server: {alone:?} without traces, {traced:?} exporting to a collector that never answers");
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("cairn_spans_total{outcome=\"dropped\"} "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(dropped > 0, "{metrics}");
    // Noise, not the collector: an export waits 10 s for an answer.
    assert!(
        traced < alone * 3 + Duration::from_secs(3),
        "{alone:?} vs {traced:?}"
    );
}

#[test]
fn an_operation_resumed_after_a_crash_links_to_the_trace_of_its_first_run() {
    let receiver = Receiver::start(true);
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[server]\nauth = \"none\"\nanswer_within_ms = 0\n\n[telemetry]\nendpoint = \"{}\"\n",
            receiver.endpoint()
        ),
    );
    let (server, endpoint) = s.serve();
    let mut first = Served(server);
    let template = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {WaitSeconds: 4}}\n  B: {Type: Cairn::Test::Resource, DependsOn: A}\n";
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("Action", "CreateStack"),
            ("Version", "2010-05-15"),
            ("StackName", "slow"),
            ("TemplateBody", template),
        ])
        .finish();
    let answer = crate::support::http(
        &endpoint,
        "POST",
        "/",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &body,
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The operation's first run records its trace context (the request's
    // trace: the request span stays open while the operation it started
    // runs, so nothing of it is exported before the crash); then the
    // engine dies.
    let first_trace = recorded_trace(&s, Duration::from_secs(10));
    let _ = first.0.kill();
    let _ = first.0.wait();
    // The next engine resumes the create, in a trace of its own linked to
    // the first one.
    let (again, _) = s.serve();
    let _again = Served(again);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut resumed = None;
    while Instant::now() < deadline && resumed.is_none() {
        resumed = receiver.spans().into_iter().find(|g| {
            g.span.name == "CREATE_IN_PROGRESS slow" && !g.attribute("cairn.outcome").is_empty()
        });
        std::thread::sleep(Duration::from_millis(200));
    }
    let resumed =
        resumed.unwrap_or_else(|| panic!("no resumed operation span: {:?}", receiver.spans()));
    assert_eq!(resumed.attribute("cairn.outcome"), "CREATE_COMPLETE");
    assert!(resumed.span.parent_span_id.is_empty(), "a trace of its own");
    assert_ne!(hex(&resumed.span.trace_id), first_trace);
    let linked: Vec<String> = resumed
        .span
        .links
        .iter()
        .map(|l| hex(&l.trace_id))
        .collect();
    assert_eq!(linked, [first_trace]);
}

/// The trace id the running operation recorded in the SQLite state
/// (`OperationOptions::trace`), waiting up to `within` for it.
fn recorded_trace(s: &Scratch, within: Duration) -> String {
    let script = "import json, sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nfor (o,) in c.execute('SELECT options FROM operations'):\n    t = json.loads(o or '{}').get('Trace')\n    if t: print(t.split('-')[1])\n";
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let out = crate::support::python()
            .args(["-c", script, "cairn-state.db"])
            .current_dir(s.dir.path())
            .output()
            .expect("python runs");
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if text.len() == 32 {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the operation recorded no trace context");
}
