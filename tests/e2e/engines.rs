//! Several `cairn serve` engines on one PostgreSQL database behind one
//! address (`balancer.py`): work spreads, an engine killed with SIGKILL has
//! its operations taken over, a paused engine's late writes are refused,
//! a handler's response may reach any engine, a custom resource's Update in
//! flight is never sent again by the engine that takes over, and an
//! operation waiting for a handler survives repeated takeovers.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::postgres::Database;
use crate::support::Scratch;
use crate::webhooks::{things_handler, things_left, things_requests, Program};

/// One engine: its process, address and stderr file.
struct Engine {
    child: Child,
    endpoint: String,
    stderr: std::path::PathBuf,
}

impl Engine {
    fn start(s: &Scratch, n: usize) -> Engine {
        let stderr = s.dir.path().join(format!("engine-{n}.stderr"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--config", "cairn.toml", "serve", "--listen", "127.0.0.1:0"])
            .current_dir(s.dir.path())
            .env_remove("CAIRN_CONFIG")
            .env_remove("CAIRN_STATE")
            .env(
                "RUST_LOG",
                std::env::var("CAIRN_TEST_ENGINE_LOG")
                    .unwrap_or_else(|_| "cairn=warn,cairn_core=warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("cairn serve starts");
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let mut reader = std::io::BufReader::new(out);
            let _ = reader.read_line(&mut line);
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        }
        let endpoint = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| {
                panic!(
                    "engine {n} did not start: {line:?} {}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                )
            })
            .to_string();
        Engine {
            child,
            endpoint,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {}", self.child.id());
    }

    /// A figure of this engine's `/metrics`.
    fn metric(&self, name: &str) -> f64 {
        let page = crate::support::http_get(&self.endpoint, "/metrics");
        page.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics: {page}"))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `balancer.py` in front of the engines listed in `backends`.
fn balancer(s: &Scratch) -> (Program, std::path::PathBuf) {
    let backends = s.dir.path().join("backends");
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/balancer.py"
    ))
    .args(["--backends", backends.to_str().unwrap_or_default()]);
    (Program::start(cmd), backends)
}

/// Runs `engines_client.py` and returns its stdout; fails the test with
/// its stderr and the engines' logs when a check fails.
fn client(s: &Scratch, engines: &[Engine], args: &[&str]) -> String {
    let out = crate::support::python_with("boto3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/e2e/engines_client.py"
        ))
        .args(args)
        .current_dir(s.dir.path())
        .env("AWS_ACCESS_KEY_ID", "AKIDENGINES")
        .env("AWS_SECRET_ACCESS_KEY", "unused")
        .env_remove("AWS_PROFILE")
        .output()
        .expect("python3 runs");
    if !out.status.success() {
        let logs: String = engines
            .iter()
            .enumerate()
            .map(|(i, e)| format!("--- engine {i}\n{}", e.stderr()))
            .collect();
        // Where each request went (the balancer's log) and what the things
        // handler was asked: what a stuck operation waited for.
        let read =
            |name: &str| std::fs::read_to_string(s.dir.path().join(name)).unwrap_or_default();
        panic!(
            "engines_client.py {args:?} failed:\n{}\n{}\n{logs}--- balancer\n{}--- handler requests\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout),
            read("backends.log"),
            read("requests.jsonl"),
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Twenty resources: sixteen test resources (two of them slow, in chains)
/// and four custom resources behind the things handler.
fn template(handler_port: u16) -> String {
    let mut t = String::from("Resources:\n");
    for i in 0..16 {
        let mut props = if i % 4 == 1 {
            format!("Value: !Ref R{}", i - 1)
        } else {
            format!("Value: v{i}")
        };
        if i == 2 || i == 9 {
            props.push_str(", WaitSeconds: 2");
        }
        t.push_str(&format!(
            "  R{i}: {{Type: Cairn::Test::Resource, Properties: {{{props}}}}}\n"
        ));
    }
    for i in 0..4 {
        t.push_str(&format!(
            "  C{i}:\n    Type: Custom::Thing\n    Properties: {{ServiceToken: 'http://127.0.0.1:{handler_port}/', ServiceTimeout: '60', Sleep: '1', Of: !Ref R{i}}}\n"
        ));
    }
    t
}

fn config(s: &Scratch, db: &Database, balancer_port: u16, lease_seconds: u64, max: usize) {
    s.write(
        "cairn.toml",
        &format!(
            "[engine]\nstate = \"{}\"\ndata_dir = \"data\"\nlease_seconds = {lease_seconds}\nmax_operations = {max}\n\n[server]\nauth = \"none\"\n\n[webhooks]\npublic_url = \"http://127.0.0.1:{balancer_port}\"\n",
            db.url
        ),
    );
}

/// The test resources' backing files (physical ids).
fn backing_files(s: &Scratch) -> BTreeSet<String> {
    crate::support::backing_files_in(&s.dir.path().join("data"))
        .into_iter()
        .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
        .collect()
}

#[test]
fn three_engines_share_the_work_and_survive_a_sigkill() {
    let db = Database::new();
    let s = Scratch::new();
    let things = s.dir.path().join("things");
    let handler = things_handler(&things, "");
    let (lb, backends) = balancer(&s);
    config(&s, &db, lb.port, 3, 8);
    let mut engines: Vec<Engine> = (0..3).map(|n| Engine::start(&s, n)).collect();
    let list: Vec<&str> = engines.iter().map(|e| e.endpoint.as_str()).collect();
    std::fs::write(&backends, list.join("\n")).expect("backends");
    let endpoint = format!("http://127.0.0.1:{}", lb.port);
    s.write("t.yaml", &template(handler.port));

    let began = Instant::now();
    // 30 stacks through the balancer: ten to each engine, of which each
    // runs eight at once and hands two to whoever has room.
    let ids: Vec<String> = serde_json::from_str(&client(
        &s,
        &engines,
        &["create", &endpoint, "30", "t.yaml"],
    ))
    .expect("stack ids");
    assert_eq!(ids.len(), 30);
    eprintln!("30 CreateStack answered after {:?}", began.elapsed());
    // Mid-flight: the slow resources and the handlers are still working.
    std::thread::sleep(Duration::from_millis(800));
    let killed_at = Instant::now();
    let _ = engines[0].child.kill();
    let _ = engines[0].child.wait();

    // A Create the killed engine recorded as sent may never have left it
    // (killed between the record and the POST): the engine that takes over
    // must not send it again, so it waits for the response until the
    // ServiceTimeout (60 s) and the stack rolls back, as CloudFormation
    // would. Such a stack is let through, checked below.
    let waited: Value = serde_json::from_str(&client(
        &s,
        &engines,
        &[
            "wait",
            &endpoint,
            "30",
            "CREATE_COMPLETE",
            "--lost-creates-roll-back",
        ],
    ))
    .expect("wait's JSON");
    let stacks = &waited["done"];
    let lost: Vec<String> = waited["lost"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(_, creates)| creates.as_object().cloned().unwrap_or_default())
        .map(|(_, request)| request.as_str().unwrap_or_default().to_string())
        .collect();
    let complete = stacks.as_object().map(|m| m.len()).unwrap_or_default();
    assert_eq!(
        complete
            + waited["lost"]
                .as_object()
                .map(|m| m.len())
                .unwrap_or_default(),
        30
    );
    // Only what was in flight at the kill can be lost.
    assert!(lost.len() <= 8, "{waited}");
    let recovered_in = killed_at.elapsed();
    // The killed engine's operations were taken over by the others.
    let takeovers =
        engines[1].metric("cairn_takeovers_total") + engines[2].metric("cairn_takeovers_total");
    assert!(takeovers >= 1.0, "no takeover: {}", engines[1].stderr());
    let claimed = engines[1].stderr().matches("(claimed)").count()
        + engines[2].stderr().matches("(claimed)").count();
    assert!(claimed >= takeovers as usize);

    // Nothing leaked or made twice: the backing files are exactly the live
    // test resources, the handler's things exactly the live custom
    // resources, and every custom resource got exactly one Create.
    let mut live_files = BTreeSet::new();
    let mut live_things = BTreeSet::new();
    for (_, resources) in stacks.as_object().expect("stacks") {
        for (_, r) in resources.as_object().expect("resources") {
            let physical = r[1].as_str().unwrap_or_default().to_string();
            match r[0].as_str() {
                Some("Cairn::Test::Resource") => live_files.insert(physical),
                _ => live_things.insert(physical),
            };
        }
    }
    assert_eq!(live_files.len(), complete * 16);
    assert_eq!(backing_files(&s), live_files);
    assert_eq!(live_things.len(), complete * 4);
    let left: BTreeSet<String> = things_left(&things)
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, live_things);
    // Every custom resource got exactly one Create, but a lost one, which
    // got none: its request never reached the handler.
    let received: Vec<String> = std::fs::read_to_string(s.dir.path().join("requests.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["RequestType"] == "Create")
        .map(|r| r["RequestId"].as_str().unwrap_or_default().to_string())
        .collect();
    let distinct: BTreeSet<&String> = received.iter().collect();
    assert_eq!(
        distinct.len(),
        received.len(),
        "a custom-resource Create was sent twice"
    );
    assert!(lost.iter().all(|id| !distinct.contains(id)), "{lost:?}");
    // And lost only in the kill: the stopped engine had recorded each as
    // going out (else the engine that took over would have sent it).
    for id in &lost {
        let marked = std::process::Command::new("psql")
            .args([
                db.url.as_str(),
                "-qAtc",
                &format!("SELECT count(*) FROM callback_responses WHERE request_id = '{id}#sent'"),
            ])
            .output()
            .expect("psql runs");
        assert_eq!(String::from_utf8_lossy(&marked.stdout).trim(), "1", "{id}");
    }
    // A rolled-back stack's other Creates were received, cancelled or
    // never started.
    assert!(received.len() >= complete * 4);
    assert!(received.len() <= 30 * 4 - lost.len());
    if lost.is_empty() {
        assert_eq!(received.len(), 30 * 4);
    }
    eprintln!(
        "30 stacks of 20 resources done {recovered_in:?} after the SIGKILL; {takeovers} takeovers; {} Creates lost in the kill",
        lost.len()
    );

    eprintln!("created and checked after {:?}", began.elapsed());
    // Deleted through the survivors, nothing is left anywhere.
    assert_eq!(
        client(&s, &engines, &["delete", &endpoint, "30"]).trim(),
        "deleted"
    );
    assert!(backing_files(&s).is_empty());
    assert!(things_left(&things).is_empty());
    eprintln!("deleted after {:?}", began.elapsed());
}

/// An engine paused (SIGSTOP) past its lease: another engine takes the
/// operation over and finishes it; the paused one, resumed, finds its
/// writes refused on the fencing token and lets go.
#[test]
fn a_paused_engine_cannot_write_after_a_takeover() {
    let db = Database::new();
    let s = Scratch::new();
    let (lb, backends) = balancer(&s);
    config(&s, &db, lb.port, 2, 8);
    let engines: Vec<Engine> = (0..3).map(|n| Engine::start(&s, n)).collect();
    std::fs::write(
        &backends,
        format!("{}\n{}", engines[1].endpoint, engines[2].endpoint),
    )
    .expect("backends");
    s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n  Slow: {Type: Cairn::Test::Resource, Properties: {Value: !Ref A, WaitSeconds: 3}}\n  After: {Type: Cairn::Test::Resource, DependsOn: Slow}\n",
    );
    // Started on engine 0 directly.
    let mut body = std::fs::read_to_string(s.dir.path().join("t.yaml")).unwrap_or_default();
    body = urlencode(&body);
    let answer = post(
        &engines[0].endpoint,
        &format!("Action=CreateStack&StackName=paused&TemplateBody={body}"),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    // Slow's create is in flight on engine 0: pause it there.
    let started = Instant::now();
    while !has_event(
        &describe_events(&engines[1].endpoint, "paused"),
        "Slow",
        "Resource creation Initiated",
    ) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Slow never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    engines[0].signal("STOP");
    // Engine 1 or 2 takes it over once the lease runs out, re-issues
    // Slow's create with the same request id and finishes the stack.
    wait_for_status(&engines[1], &engines, "paused", "CREATE_COMPLETE");
    let events_before = describe_events(&engines[1].endpoint, "paused");
    engines[0].signal("CONT");
    // Woken, engine 0's renewal and writes fail on the fencing token.
    let started = Instant::now();
    while !engines[0].stderr().contains("dropped the operation of") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "engine 0 did not let go: {}",
            engines[0].stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        engines[0].stderr().contains(
            "another engine took its lease over; this engine's late writes for it were refused"
        ),
        "{}",
        engines[0].stderr()
    );
    assert_eq!(engines[0].metric("cairn_operations_dropped_total"), 1.0);
    assert_eq!(
        engines[1].metric("cairn_takeovers_total") + engines[2].metric("cairn_takeovers_total"),
        1.0
    );
    // Nothing engine 0 did after waking landed: the events are the same,
    // Slow completed once, and its one backing file is the live one.
    std::thread::sleep(Duration::from_millis(500));
    let events_after = describe_events(&engines[1].endpoint, "paused");
    assert_eq!(events_before, events_after);
    assert_eq!(
        events_after
            .matches("<LogicalResourceId>Slow</LogicalResourceId>")
            .count(),
        3
    );
    assert_eq!(backing_files(&s).len(), 3);
}

/// A handler's response PUT to an engine other than the one waiting for it
/// completes the resource: the balancer sends each request to the next
/// engine, so the response goes to the other engine.
#[test]
fn a_response_sent_to_another_engine_completes_the_resource() {
    let db = Database::new();
    let s = Scratch::new();
    let things = s.dir.path().join("things");
    let handler = things_handler(&things, "");
    let (lb, backends) = balancer(&s);
    config(&s, &db, lb.port, 15, 8);
    let engines: Vec<Engine> = (0..2).map(|n| Engine::start(&s, n)).collect();
    // The balancer knows only engine 1; the stack runs on engine 0.
    std::fs::write(&backends, &engines[1].endpoint).expect("backends");
    let template = format!(
        "Resources:\n  Thing:\n    Type: Custom::Thing\n    Properties: {{ServiceToken: 'http://127.0.0.1:{}/'}}\n",
        handler.port
    );
    let answer = post(
        &engines[0].endpoint,
        &format!(
            "Action=CreateStack&StackName=relayed&TemplateBody={}",
            urlencode(&template)
        ),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    wait_for_status(&engines[0], &engines, "relayed", "CREATE_COMPLETE");
    let log = std::fs::read_to_string(backends.with_extension("log")).unwrap_or_default();
    assert!(
        log.contains("PUT /cfn-response/")
            && log.contains(&format!("-> {} 200", engines[1].endpoint)),
        "the response went through engine 1: {log}"
    );
    assert_eq!(things_left(&things).len(), 1);
    let resources = post(
        &engines[0].endpoint,
        "Action=DescribeStackResources&StackName=relayed",
    );
    let thing = things_left(&things)[0].to_string_lossy().into_owned();
    assert!(
        resources.contains(&format!("<PhysicalResourceId>{thing}</PhysicalResourceId>")),
        "{resources}"
    );
}

/// Waits (60 s at most) until the things handler received `n` requests.
fn wait_for_handler(things: &std::path::Path, n: usize, engines: &[Engine]) {
    let started = Instant::now();
    while things_requests(things, None).len() < n {
        if started.elapsed() > Duration::from_secs(60) {
            let logs: Vec<String> = engines.iter().map(Engine::stderr).collect();
            panic!(
                "the handler did not get {n} requests:\n{}",
                logs.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The engine (other than those in `not`) that took an operation over.
fn taker(engines: &[Engine], not: &[usize]) -> usize {
    let started = Instant::now();
    loop {
        for (i, e) in engines.iter().enumerate() {
            if !not.contains(&i) && e.metric("cairn_takeovers_total") >= 1.0 {
                return i;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "nobody took the operation over"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `n` engines on a fresh database behind the balancer (all of them
/// listed), 2-second leases, and the things handler; with `cuttable`, the
/// engines reach the database through `tcp_cut.py`, which the test can cut.
struct Cluster {
    // Dropped in this order: engines first, the database last.
    engines: Vec<Engine>,
    handler: Program,
    _balancer: Program,
    /// The relay to the database and its control file.
    relay: Option<(Program, std::path::PathBuf)>,
    backends: std::path::PathBuf,
    things: std::path::PathBuf,
    _scratch: Scratch,
    _db: Database,
}

impl Cluster {
    fn start(n: usize) -> Cluster {
        Self::start_with(n, false)
    }

    fn start_with(n: usize, cuttable: bool) -> Cluster {
        let mut db = Database::new();
        let s = Scratch::new();
        let things = s.dir.path().join("things");
        let handler = things_handler(&things, "");
        let (lb, backends) = balancer(&s);
        let relay = cuttable.then(|| {
            // postgres://user@HOST:PORT/name: the relay stands for HOST:PORT.
            let (head, tail) = db.url.split_once('@').expect("a user in the URL");
            let (upstream, name) = tail.split_once('/').expect("a database in the URL");
            let control = s.dir.path().join("database.cut");
            let mut cmd = crate::support::python();
            cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/tcp_cut.py"))
                .args(["--upstream", upstream, "--control"])
                .arg(&control);
            let relay = Program::start(cmd);
            db.url = format!("{head}@127.0.0.1:{}/{name}", relay.port);
            (relay, control)
        });
        config(&s, &db, lb.port, 2, 8);
        let engines: Vec<Engine> = (0..n).map(|i| Engine::start(&s, i)).collect();
        let list: Vec<&str> = engines.iter().map(|e| e.endpoint.as_str()).collect();
        std::fs::write(&backends, list.join("\n")).expect("backends");
        Cluster {
            engines,
            handler,
            _balancer: lb,
            relay,
            backends,
            things,
            _scratch: s,
            _db: db,
        }
    }
}

impl Cluster {
    /// Cuts the engines off the database (`false`) or lets them reach it.
    fn database(&self, up: bool) {
        let (_, control) = self.relay.as_ref().expect("a cuttable cluster");
        std::fs::write(control, if up { "up" } else { "down" }).expect("control file");
    }
}

/// A `Custom::Thing` stack's template; `props` are its extra properties.
fn thing_template(handler_port: u16, props: &str) -> String {
    format!(
        "Resources:\n  Thing:\n    Type: Custom::Thing\n    Properties: {{ServiceToken: 'http://127.0.0.1:{handler_port}/'{props}}}\n"
    )
}

/// Finding 6 of the resource-call protocol issue, across engines: a custom
/// resource's Update in flight when its engine is SIGKILLed was sent again
/// (same RequestId) by the engine that took the operation over, and a
/// handler that replaces on Update made a second thing that was never
/// deleted. Now the engine that takes over waits for the answer to the
/// Update that was sent: the handler sees Create, Update, and the cleanup's
/// Delete of the old thing, once each, and one thing is left.
#[test]
fn an_update_in_flight_on_a_killed_engine_is_not_sent_again_by_the_next() {
    let c = Cluster::start(3);
    let (things, engines) = (&c.things, &c.engines);
    let v1 = thing_template(c.handler.port, ", ReplaceOnUpdate: 'true', Version: '1'");
    let answer = post(
        &engines[0].endpoint,
        &format!(
            "Action=CreateStack&StackName=replaced&TemplateBody={}",
            urlencode(&v1)
        ),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    wait_for_status(&engines[0], engines, "replaced", "CREATE_COMPLETE");
    let first = things_left(things);
    assert_eq!(first.len(), 1);
    // The Update takes the handler 4 s; engine 0 is killed once it is sent.
    let v2 = thing_template(
        c.handler.port,
        ", ReplaceOnUpdate: 'true', Version: '2', Sleep: '4'",
    );
    let answer = post(
        &engines[0].endpoint,
        &format!(
            "Action=UpdateStack&StackName=replaced&TemplateBody={}",
            urlencode(&v2)
        ),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    wait_for_handler(things, 2, engines);
    engines[0].signal("KILL");
    let next = taker(engines, &[0]);
    wait_for_status(&engines[next], engines, "replaced", "UPDATE_COMPLETE");
    let requests: Vec<String> = things_requests(things, Some("Thing"))
        .into_iter()
        .map(|(kind, _)| kind)
        .collect();
    assert_eq!(requests, ["Create", "Update", "Delete"], "{requests:?}");
    let deleted = things_requests(things, Some("Thing"))[2].1.clone();
    assert_eq!(
        deleted,
        first[0].to_string_lossy(),
        "the old thing is deleted"
    );
    let left = things_left(things);
    assert_eq!(left.len(), 1, "one thing is left: {left:?}");
    let resources = post(
        &engines[next].endpoint,
        "Action=DescribeStackResources&StackName=replaced",
    );
    assert!(
        resources.contains(&format!(
            "<PhysicalResourceId>{}</PhysicalResourceId>",
            left[0].to_string_lossy()
        )),
        "{resources}"
    );
}

/// Finding 7 of the resource-call protocol issue, across engines: an
/// operation that only waits for a handler's answer records nothing, so
/// after the engine running it and the next two that took it over were
/// killed, the "two resumes in a row recorded nothing" rule marked it
/// CREATE_FAILED while the resource was still being made. Waiting is
/// progress: the fourth engine waits for the answer and the create
/// completes, the handler having received one Create.
#[test]
fn an_operation_waiting_for_a_handler_survives_engines_killed_in_turn() {
    let c = Cluster::start(4);
    let (things, engines) = (&c.things, &c.engines);
    let t = thing_template(c.handler.port, ", Sleep: '14'");
    let answer = post(
        &engines[0].endpoint,
        &format!(
            "Action=CreateStack&StackName=waiting&TemplateBody={}",
            urlencode(&t)
        ),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    wait_for_handler(things, 1, engines);
    engines[0].signal("KILL");
    let mut killed = vec![0];
    for _ in 0..2 {
        let next = taker(engines, &killed);
        engines[next].signal("KILL");
        killed.push(next);
    }
    let last = (0..4).find(|i| !killed.contains(i)).unwrap_or(3);
    wait_for_status(&engines[last], engines, "waiting", "CREATE_COMPLETE");
    let requests = things_requests(things, Some("Thing"));
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(things_left(things).len(), 1);
}

/// Finding 8 of the resource-call protocol issue, across engines: a
/// handler's response that arrived while PostgreSQL could not be reached
/// was refused (503, "send it again"), and `cfnresponse` PUTs once, so the
/// resource waited out its ServiceTimeout and the stack rolled back. Now
/// the engine that receives it keeps it and records it once the database
/// is back: the create completes with the one thing the handler made.
#[test]
fn a_handlers_response_during_a_database_outage_completes_the_resource() {
    let c = Cluster::start_with(2, true);
    let (things, engines) = (&c.things, &c.engines);
    let t = thing_template(c.handler.port, ", Sleep: '4'");
    let answer = post(
        &engines[0].endpoint,
        &format!(
            "Action=CreateStack&StackName=outage&TemplateBody={}",
            urlencode(&t)
        ),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    wait_for_handler(things, 1, engines);
    // The database goes away; the handler answers meanwhile (4 s after
    // its request) and its one PUT is accepted.
    c.database(false);
    let log = c.backends.with_extension("log");
    let started = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("PUT /cfn-response/")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the handler never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let puts: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("PUT /cfn-response/"))
        .map(str::to_string)
        .collect();
    assert_eq!(puts.len(), 1, "{puts:?}");
    assert!(
        puts[0].ends_with(" 200"),
        "the response was refused: {puts:?}"
    );
    std::thread::sleep(Duration::from_secs(2));
    // The engines did lose the database meanwhile.
    let logs: String = engines.iter().map(Engine::stderr).collect();
    assert!(
        logs.contains("cannot renew the lease"),
        "the outage went unnoticed: {logs}"
    );
    c.database(true);
    wait_for_status(&engines[1], engines, "outage", "CREATE_COMPLETE");
    assert_eq!(things_requests(things, Some("Thing")).len(), 1);
    let left = things_left(things);
    assert_eq!(left.len(), 1);
    let resources = post(
        &engines[1].endpoint,
        "Action=DescribeStackResources&StackName=outage",
    );
    assert!(
        resources.contains(&format!(
            "<PhysicalResourceId>{}</PhysicalResourceId>",
            left[0].to_string_lossy()
        )),
        "{resources}"
    );
}

pub(crate) fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// POSTs a Query API form to an engine (auth is off) and returns the body.
pub(crate) fn post(endpoint: &str, form: &str) -> String {
    use std::io::{Read, Write};
    let addr = endpoint.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).expect("connect");
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    );
    conn.write_all(request.as_bytes()).expect("send");
    let mut out = String::new();
    let _ = conn.read_to_string(&mut out);
    out
}

/// The `<StackEvents>` of a DescribeStackEvents answer.
fn describe_events(endpoint: &str, stack: &str) -> String {
    let page = post(
        endpoint,
        &format!("Action=DescribeStackEvents&StackName={stack}"),
    );
    page.split_once("<StackEvents>")
        .and_then(|(_, rest)| rest.split_once("</StackEvents>"))
        .map(|(events, _)| events.to_string())
        .unwrap_or(page)
}

/// Whether a DescribeStackEvents page has an event of `logical` mentioning `text`.
fn has_event(page: &str, logical: &str, text: &str) -> bool {
    page.split("<member>").any(|m| {
        m.contains(&format!("<LogicalResourceId>{logical}</LogicalResourceId>")) && m.contains(text)
    })
}

/// Waits (60 s at most) until `engine` describes `stack` in `status`.
fn wait_for_status(engine: &Engine, all: &[Engine], stack: &str, status: &str) {
    let started = Instant::now();
    loop {
        let page = post(
            &engine.endpoint,
            &format!("Action=DescribeStacks&StackName={stack}"),
        );
        if page.contains(&format!("<StackStatus>{status}</StackStatus>")) {
            return;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let logs: Vec<String> = all.iter().map(Engine::stderr).collect();
            panic!("{stack} is not {status}: {page}\n{}", logs.join("\n---\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A follower asking one engine hears of an event another engine wrote at
/// once (LISTEN/NOTIFY): `CairnWaitForStackEvents` answers within a few
/// milliseconds of the write, not at its next check a second later.
#[test]
fn a_follower_hears_of_another_engines_events_at_once() {
    let db = Database::new();
    let s = Scratch::new();
    config(&s, &db, 1, 15, 8);
    let engines: Vec<Engine> = (0..2).map(|n| Engine::start(&s, n)).collect();
    // CreateStack's answer waits up to [server] answer_within_ms (2 s) for
    // the operation: Slow lasts well beyond, so the wait below starts
    // before Slow completes.
    let template =
        "Resources:\n  Slow: {Type: Cairn::Test::Resource, Properties: {WaitSeconds: 5}}\n";
    let answer = post(
        &engines[0].endpoint,
        &format!(
            "Action=CreateStack&StackName=followed&TemplateBody={}",
            urlencode(template)
        ),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    let started = Instant::now();
    let known = loop {
        let events = describe_events(&engines[1].endpoint, "followed");
        if has_event(&events, "Slow", "Resource creation Initiated") {
            break events.matches("<member>").count();
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{events}");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Slow completes on engine 0 about five seconds after it started;
    // engine 1 is asked to wait for it.
    let waited = post(
        &engines[1].endpoint,
        &format!(
            "Action=CairnWaitForStackEvents&StackName=followed&KnownEvents={known}&WaitSeconds=10"
        ),
    );
    let heard = jiff::Timestamp::now();
    let count: usize = waited
        .split_once("<EventCount>")
        .and_then(|(_, rest)| rest.split_once("</EventCount>"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("{waited}"));
    assert!(count > known, "{waited}");
    let events = describe_events(&engines[1].endpoint, "followed");
    // Newest first: the event that ended the wait is the oldest of the new.
    let stamps: Vec<jiff::Timestamp> = events
        .split("<Timestamp>")
        .skip(1)
        .filter_map(|t| t.split_once("</Timestamp>"))
        .filter_map(|(t, _)| t.parse().ok())
        .collect();
    let written = stamps[stamps.len() - 1 - known];
    let latency = heard.duration_since(written);
    eprintln!("the follower on engine 1 heard of engine 0's event after {latency:#}");
    // A few milliseconds when quiet; the bound leaves room for a loaded
    // CI machine and still fails when the answer came from the 1-second
    // re-check instead of the announcement.
    assert!(
        latency < jiff::SignedDuration::from_millis(900),
        "heard after {latency:#}"
    );
}

/// A lost connection is not a lost lease: the database goes away for well
/// under a lease while the handler answers, so the engine's write of the
/// outcome fails; once the database answers again the same engine carries
/// on under its lease (no takeover, nothing dropped, no wait for the lease
/// to run out) and says what happened.
#[test]
fn a_write_lost_to_a_short_database_outage_carries_on_under_the_same_lease() {
    let c = Cluster::start_with(3, true);
    let engines = &c.engines;
    let t = "Resources:\n  Slow: {Type: Cairn::Test::Resource, Properties: {Value: v, WaitSeconds: 4}}\n";
    let answer = post(
        &engines[0].endpoint,
        &format!(
            "Action=CreateStack&StackName=blip&TemplateBody={}",
            urlencode(t)
        ),
    );
    assert!(answer.contains("<StackId>"), "{answer}");
    // When Slow's create was sent (its event's time, on this machine's
    // clock).
    let started = Instant::now();
    let sent: jiff::Timestamp = loop {
        let page = describe_events(&engines[0].endpoint, "blip");
        let initiated = page.split("<member>").find(|m| {
            m.contains("<LogicalResourceId>Slow</LogicalResourceId>")
                && m.contains("Resource creation Initiated")
        });
        if let Some(t) = initiated
            .and_then(|m| m.split_once("<Timestamp>"))
            .and_then(|(_, rest)| rest.split_once("</Timestamp>"))
            .and_then(|(t, _)| t.parse().ok())
        {
            break t;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "Slow never started: {page}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The create ends 4 s after it was sent: cut the database around that
    // moment, for less than a lease (2 s), so the engine's write of its
    // outcome fails.
    let cut_at = sent + jiff::SignedDuration::from_millis(3700);
    let until = jiff::Timestamp::now().duration_until(cut_at);
    std::thread::sleep(Duration::try_from(until).unwrap_or_default());
    c.database(false);
    std::thread::sleep(Duration::from_millis(800));
    c.database(true);
    wait_for_status(&engines[1], engines, "blip", "CREATE_COMPLETE");
    let logs: String = engines.iter().map(Engine::stderr).collect();
    assert!(
        logs.contains("it answers again and the lease is still this engine's: the operation carries on from what it recorded"),
        "{logs}\n{}",
        describe_events(&engines[1].endpoint, "blip")
    );
    assert!(
        !logs.contains("another engine took its lease over"),
        "{logs}"
    );
    let takeovers: f64 = engines
        .iter()
        .map(|e| e.metric("cairn_takeovers_total"))
        .sum();
    assert_eq!(takeovers, 0.0, "{logs}");
}
