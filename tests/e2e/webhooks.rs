//! Custom resources through the real binary and a real handler process on
//! loopback (`cr_handler.py`, which answers like a cfnresponse Lambda).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::Scratch;
use crate::update::{cairn, deploy, ev, events, sequence_after, status};

pub(crate) const SECRET: &str = "handler-secret";
pub(crate) const ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:widgets";

/// A handler process; killed when dropped.
pub(crate) struct Handler {
    child: Child,
    log: PathBuf,
    pub port: u16,
}

impl Handler {
    pub(crate) fn start(s: &Scratch, port: u16) -> Handler {
        Self::start_with(s, port, &[])
    }

    /// With extra arguments (`--tls-cert`, `--tls-key`, `--cafile`).
    pub(crate) fn start_with(s: &Scratch, port: u16, extra: &[&str]) -> Handler {
        let n = std::fs::read_dir(s.dir.path())
            .map(|d| d.count())
            .unwrap_or(0);
        let log = s.dir.path().join(format!("handler-{n}.jsonl"));
        let port_file = s.dir.path().join(format!("handler-{n}.port"));
        let child = crate::support::python()
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/e2e/cr_handler.py"
            ))
            .args(["--log", log.to_str().unwrap_or_default()])
            .args(["--port-file", port_file.to_str().unwrap_or_default()])
            .args(["--secret", SECRET, "--port", &port.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 runs the test handler");
        let started = Instant::now();
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break p;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "handler did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Handler { child, log, port }
    }

    /// Every request the handler received, in order, with its signature check
    /// and the HTTP statuses of the responses it PUT.
    pub(crate) fn requests(&self) -> Vec<Value> {
        // A request's line is written once its PUTs are done, which can be
        // just after Cairn has the response: wait for every request received.
        let received_file = PathBuf::from(format!("{}.received", self.log.display()));
        let started = Instant::now();
        loop {
            let received: usize = std::fs::read_to_string(&received_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0);
            let lines: Vec<Value> = std::fs::read_to_string(&self.log)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if lines.len() >= received || started.elapsed() > Duration::from_secs(10) {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How many requests the handler received so far (counted before it
    /// answers).
    pub(crate) fn received(&self) -> usize {
        std::fs::read_to_string(format!("{}.received", self.log.display()))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    /// (RequestType, LogicalResourceId, PhysicalResourceId) of each request.
    pub(crate) fn calls(&self) -> Vec<(String, String, String)> {
        self.requests()
            .iter()
            .map(|r| {
                let e = &r["event"];
                let t = |k: &str| e[k].as_str().unwrap_or("-").to_string();
                (
                    t("RequestType"),
                    t("LogicalResourceId"),
                    t("PhysicalResourceId"),
                )
            })
            .collect()
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scratch dir and a handler whose port its config names.
pub(crate) fn with_handler() -> (Scratch, Handler) {
    let s = Scratch::new();
    let h = Handler::start(&s, 0);
    write_config(&s, h.port);
    (s, h)
}

/// Makes the callback listener bind a fixed free port that is also its
/// `public_url`: a process resuming another's operation then waits for
/// the responses to the requests that one sent (they reach it there).
pub(crate) fn listen_publicly(s: &Scratch) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let cfg = std::fs::read_to_string(s.dir.path().join("cairn.toml")).expect("config");
    s.write(
        "cairn.toml",
        &cfg.replace(
            "[webhooks]\n",
            &format!(
                "[webhooks]\nlisten = \"127.0.0.1:{port}\"\npublic_url = \"http://127.0.0.1:{port}\"\n"
            ),
        ),
    );
}

/// `cairn deploy STACK TEMPLATE` started in the background (to be killed).
fn spawn_deploy(s: &Scratch, stack: &str, template: &std::path::Path) -> std::process::Child {
    s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        stack,
        template.to_str().unwrap_or_default(),
    ])
}

/// Waits until the handler received `n` requests.
pub(crate) fn wait_for_requests(s: &Scratch, h: &Handler, n: usize) {
    let started = Instant::now();
    while h.received() < n {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the handler did not receive {n} requests: {}",
            s.spawned_stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Finding 6 of the resource-call protocol issue: a custom resource's
/// Update in flight when its engine died was sent again, with the same
/// RequestId, by the process that resumed the operation (a handler that
/// replaces on Update made a second resource). Now the resumed update
/// waits for the response to the one that was sent.
#[test]
fn an_update_in_flight_when_the_engine_dies_is_not_sent_again() {
    let (s, h) = with_handler();
    listen_publicly(&s);
    let v1 = s.write("v1.yaml", &widget("      Version: \"1\"\n"));
    let v2 = s.write(
        "v2.yaml",
        &widget("      Version: \"2\"\n      Delay: \"3\"\n"),
    );
    let run = cairn(&s, &["deploy", "w", v1.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut child = spawn_deploy(&s, "w", &v2);
    // The Update reached the handler, which answers 3 s later.
    wait_for_requests(&s, &h, 2);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let run = cairn(&s, &["list", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "w"), "UPDATE_COMPLETE");
    let calls = h.calls();
    assert_eq!(
        calls.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["Create", "Update"],
        "{calls:?}"
    );
    let updated = h.requests()[1]["event"].clone();
    assert_eq!(updated["ResourceProperties"]["Version"], "2");
    assert_eq!(updated["OldResourceProperties"]["Version"], "1");
    assert_eq!(cairn(&s, &["delete", "w"]).code(), 0);
    let calls = h.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[2].0, "Delete");
    assert_eq!(
        calls[2].2, calls[1].2,
        "the one resource is deleted: {calls:?}"
    );
}

/// A Create the engine recorded but never sent (it waited for a delivery
/// slot: the endpoint's max_concurrency was taken) when the engine died is
/// sent by the engine that takes the operation over, once, instead of
/// being waited for until the timeout as if a handler had it. The one that
/// was sent is waited for, not sent again.
#[test]
fn a_create_recorded_but_never_sent_is_sent_by_the_engine_that_takes_over() {
    let (s, h) = with_handler();
    listen_publicly(&s);
    let cfg = std::fs::read_to_string(s.dir.path().join("cairn.toml")).expect("config");
    s.write(
        "cairn.toml",
        &cfg.replace(
            "service_tokens = [",
            "max_concurrency = 1\nservice_tokens = [",
        ),
    );
    let t = s.write(
        "t.yaml",
        &format!(
            "Resources:\n  A:\n    Type: Custom::Widget\n    Properties: {{ServiceToken: {ARN}, PostDelay: \"3\"}}\n  B:\n    Type: Custom::Widget\n    Properties: {{ServiceToken: {ARN}, PostDelay: \"3\"}}\n"
        ),
    );
    let mut child = spawn_deploy(&s, "w", &t);
    // One Create holds the endpoint's only slot; the other is recorded and
    // waits for it.
    wait_for_requests(&s, &h, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(h.received(), 1);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let resumed = Instant::now();
    let run = cairn(&s, &["list", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "w"), "CREATE_COMPLETE");
    // Well within the 30 s the never-sent one would have been waited for.
    assert!(
        resumed.elapsed() < Duration::from_secs(20),
        "{:?}",
        resumed.elapsed()
    );
    let calls = h.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let mut logical: Vec<&str> = calls.iter().map(|c| c.1.as_str()).collect();
    logical.sort();
    assert_eq!(logical, ["A", "B"], "each Create was sent once: {calls:?}");
    assert!(calls.iter().all(|c| c.0 == "Create"), "{calls:?}");
    assert_eq!(cairn(&s, &["delete", "w"]).code(), 0);
}

/// Finding 7 of the resource-call protocol issue: an operation that only
/// waits for a handler's answer records nothing, so after two resumes in a
/// row were killed the third marked it failed ("Cairn stopped 2 times in a
/// row…") while its resource was still being made. Waiting is progress:
/// the third resume waits for the answer and the create completes.
#[test]
fn an_operation_waiting_for_a_handler_survives_repeated_takeovers() {
    let (s, h) = with_handler();
    listen_publicly(&s);
    let t = s.write("t.yaml", &widget("      Delay: \"6\"\n"));
    let mut child = spawn_deploy(&s, "w", &t);
    wait_for_requests(&s, &h, 1);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // Two commands in a row resume the operation and are killed while it
    // waits for the handler.
    for _ in 0..2 {
        let mut resuming = s.spawn_cairn(&["--config", "cairn.toml", "list"]);
        std::thread::sleep(Duration::from_millis(1200));
        resuming.kill().expect("SIGKILL");
        let _ = resuming.wait();
    }
    let run = cairn(&s, &["list", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "w"), "CREATE_COMPLETE", "{}", run.stderr());
    let calls = h.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(cairn(&s, &["delete", "w"]).code(), 0);
}

/// The config maps the Lambda ARN to a handler on `port`.
fn write_config(s: &Scratch, port: u16) {
    s.write(
        "cairn.toml",
        &format!(
            "[engine]\ncleanup_attempts = 2\ncleanup_backoff_seconds = 0.05\n\n[webhooks]\ntimeout_seconds = 30\n\n[webhooks.endpoints.widgets]\nurl = \"http://127.0.0.1:{port}/\"\nsecret = \"{SECRET}\"\nservice_tokens = [\"{ARN}\"]\n"
        ),
    );
}

fn call(t: &str, l: &str, p: &str) -> (String, String, String) {
    (t.into(), l.into(), p.into())
}

fn widget(props: &str) -> String {
    format!(
        "Resources:\n  W:\n    Type: Custom::Widget\n    Properties:\n      ServiceToken: {ARN}\n{props}"
    )
}

/// The reason the resource `logical` failed with, from the stack's events.
fn failure_reason(s: &Scratch, stack: &str, logical: &str) -> String {
    events(s, stack)
        .iter()
        .find(|e| {
            e["LogicalResourceId"] == logical
                && e["ResourceStatus"]
                    .as_str()
                    .is_some_and(|st| st.ends_with("_FAILED"))
        })
        .and_then(|e| e["ResourceStatusReason"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn create_update_delete_send_cloudformation_requests() {
    let (s, h) = with_handler();
    let v1 = widget(
        "      Size: 3\n      Enabled: true\n      Ratio: 1.5\n      Limits: {Max: 10, Zones: [a, 2, false]}\n      Data: {Arn: 'arn:widget:1', Dotted.Key: v}\n  User:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !GetAtt W.Arn, Description: !GetAtt W.Dotted.Key}\nOutputs:\n  Arn: {Value: !GetAtt W.Arn}\n  Id: {Value: !Ref W}\n",
    );
    let run = deploy(&s, "st", &v1, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seq = sequence_after(&s, "st", 0);
    assert_eq!(
        seq[..4],
        [
            ev("st", "CREATE_IN_PROGRESS", "User Initiated", ""),
            ev("W", "CREATE_IN_PROGRESS", "", ""),
            ev("W", "CREATE_IN_PROGRESS", "Resource creation Initiated", ""),
            ev("W", "CREATE_COMPLETE", "", "W-1"),
        ]
    );
    let reqs = h.requests();
    let create = &reqs[0]["event"];
    assert_eq!(
        reqs[0]["signature_ok"], true,
        "requests are signed with the endpoint's secret"
    );
    let mut keys: Vec<&str> = create
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "LogicalResourceId",
            "RequestId",
            "RequestType",
            "ResourceProperties",
            "ResourceType",
            "ResponseURL",
            "ServiceToken",
            "StackId"
        ]
    );
    let stack_id =
        cairn(&s, &["describe", "st", "--output", "json"]).json()["Stacks"][0]["StackId"].clone();
    assert_eq!(create["StackId"], stack_id);
    assert_eq!(create["RequestType"], "Create");
    assert_eq!(create["ServiceToken"], ARN);
    assert_eq!(create["ResourceType"], "Custom::Widget");
    assert_eq!(create["LogicalResourceId"], "W");
    assert!(create["ResponseURL"]
        .as_str()
        .unwrap()
        .contains("/cfn-response/"));
    assert_eq!(
        create["ResourceProperties"],
        json!({"ServiceToken": ARN, "Size": "3", "Enabled": "true", "Ratio": "1.5",
               "Limits": {"Max": "10", "Zones": ["a", "2", "false"]},
               "Data": {"Arn": "arn:widget:1", "Dotted.Key": "v"}})
    );
    let out = cairn(&s, &["describe", "st", "--output", "json"]).json();
    let outputs: Vec<(String, String)> = out["Stacks"][0]["Outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["OutputKey"].as_str().unwrap().into(),
                o["OutputValue"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        outputs,
        [
            ("Arn".into(), "arn:widget:1".into()),
            ("Id".into(), "W-1".into())
        ]
    );

    // Update: old and new properties, the physical id kept.
    let v2 = v1.replace("Size: 3", "Size: 4");
    let run = deploy(&s, "st", &v2, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let reqs = h.requests();
    let update = &reqs[1]["event"];
    assert_eq!(update["RequestType"], "Update");
    assert_eq!(update["PhysicalResourceId"], "W-1");
    assert_eq!(update["ResourceProperties"]["Size"], "4");
    assert_eq!(update["OldResourceProperties"]["Size"], "3");
    assert_eq!(update["OldResourceProperties"]["Enabled"], "true");
    assert_ne!(update["RequestId"], create["RequestId"]);
    assert_eq!(status(&s, "st"), "UPDATE_COMPLETE");

    // Unchanged custom resources are not contacted.
    let v3 = v2.replace("Description: !GetAtt W.Dotted.Key", "Description: other");
    let run = deploy(&s, "st", &v3, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(h.requests().len(), 2);

    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let reqs = h.requests();
    let delete = &reqs[2]["event"];
    assert_eq!(delete["RequestType"], "Delete");
    assert_eq!(delete["PhysicalResourceId"], "W-1");
    assert_eq!(delete["ResourceProperties"]["Size"], "4");
    assert!(delete.get("OldResourceProperties").is_none());
    assert_eq!(h.calls().len(), 3);
}

#[test]
fn synchronous_responses_and_endpoint_names_and_urls() {
    let (s, h) = with_handler();
    let body = format!(
        "Resources:\n  A:\n    Type: AWS::CloudFormation::CustomResource\n    Properties: {{ServiceToken: widgets, Mode: sync, Data: {{K: a}}}}\n  B:\n    Type: Custom::Other\n    Properties: {{ServiceToken: 'http://127.0.0.1:{}/', PhysicalId: b-fixed}}\nOutputs:\n  K: {{Value: !GetAtt A.K}}\n",
        h.port
    );
    let run = deploy(&s, "st", &body, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut calls = h.calls();
    calls.sort();
    assert_eq!(calls, [call("Create", "A", "-"), call("Create", "B", "-")]);
    let reqs = h.requests();
    // A was answered in the POST's reply: the handler PUT nothing.
    let a = reqs
        .iter()
        .find(|r| r["event"]["LogicalResourceId"] == "A")
        .unwrap();
    assert_eq!(a["puts"], json!([]));
    let out = cairn(&s, &["describe", "st", "--output", "json"]).json();
    assert_eq!(out["Stacks"][0]["Outputs"][0]["OutputValue"], "a");
    let run = cairn(&s, &["resources", "st", "--output", "json"]);
    let mut ids: Vec<String> = run.json()["StackResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["PhysicalResourceId"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    ids.sort();
    assert!(
        ids == ["A-1", "b-fixed"] || ids == ["A-2", "b-fixed"],
        "{ids:?}"
    );
}

#[test]
fn a_new_physical_id_on_update_deletes_the_old_one_in_cleanup() {
    let (s, h) = with_handler();
    let v1 = widget("      Size: 3\n  User:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref W}\n");
    assert_eq!(deploy(&s, "st", &v1, &[]).code(), 0);
    let skip = events(&s, "st").len();
    let v2 = v1.replace("Size: 3", "Size: 4\n      PhysicalId: W-new");
    let run = deploy(&s, "st", &v2, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "st", skip),
        [
            ev("st", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("W", "UPDATE_IN_PROGRESS", "", "W-1"),
            ev("W", "UPDATE_COMPLETE", "", "W-new"),
            ev(
                "User",
                "UPDATE_IN_PROGRESS",
                "",
                &crate::update::physical(&s, "st", "User")
            ),
            ev(
                "User",
                "UPDATE_COMPLETE",
                "",
                &crate::update::physical(&s, "st", "User")
            ),
            ev("st", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("W", "DELETE_IN_PROGRESS", "", "W-1"),
            ev("W", "DELETE_COMPLETE", "", "W-1"),
            ev("st", "UPDATE_COMPLETE", "", ""),
        ]
    );
    assert_eq!(
        h.calls(),
        [
            call("Create", "W", "-"),
            call("Update", "W", "W-1"),
            call("Delete", "W", "W-1")
        ]
    );
    // The old resource is deleted with its old properties.
    assert_eq!(h.requests()[2]["event"]["ResourceProperties"]["Size"], "3");
}

#[test]
fn update_rollback_sends_an_update_with_old_and_new_swapped() {
    let (s, h) = with_handler();
    let v1 = widget(
        "      Size: 3\n  Other:\n    Type: Cairn::Test::Resource\n    Properties: {Value: a}\n",
    );
    assert_eq!(deploy(&s, "st", &v1, &[]).code(), 0);
    let v2 = v1.replace("Size: 3", "Size: 4").replace(
        "{Value: a}",
        "{Value: b, Fail: update, FailMessage: broken}\n    DependsOn: W",
    );
    let run = deploy(&s, "st", &v2, &[]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_COMPLETE");
    let reqs = h.requests();
    let kinds: Vec<&str> = reqs
        .iter()
        .map(|r| r["event"]["RequestType"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Create", "Update", "Update"]);
    let rollback = &reqs[2]["event"];
    assert_eq!(rollback["PhysicalResourceId"], "W-1");
    assert_eq!(rollback["ResourceProperties"]["Size"], "3");
    assert_eq!(rollback["OldResourceProperties"]["Size"], "4");
}

#[test]
fn a_failed_create_is_deleted_with_the_physical_id_it_returned() {
    let (s, h) = with_handler();
    let body = widget("      FailOn: Create\n      Reason: 'quota exceeded for widgets'\n      PhysicalId: w-half-made\n");
    let run = deploy(&s, "st", &body, &[]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        sequence_after(&s, "st", 0),
        [
            ev("st", "CREATE_IN_PROGRESS", "User Initiated", ""),
            ev("W", "CREATE_IN_PROGRESS", "", ""),
            ev("W", "CREATE_IN_PROGRESS", "Resource creation Initiated", ""),
            ev(
                "W",
                "CREATE_FAILED",
                "quota exceeded for widgets",
                "w-half-made"
            ),
            ev(
                "st",
                "ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to create: [W]. Rollback requested by user.",
                ""
            ),
            ev("W", "DELETE_IN_PROGRESS", "", "w-half-made"),
            ev("W", "DELETE_COMPLETE", "", "w-half-made"),
            ev("st", "ROLLBACK_COMPLETE", "", ""),
        ]
    );
    assert_eq!(
        h.calls(),
        [call("Create", "W", "-"), call("Delete", "W", "w-half-made")]
    );
}

#[test]
fn no_response_within_the_service_timeout_fails_and_a_late_one_is_refused() {
    let (s, h) = with_handler();
    let body = widget("      ServiceTimeout: 1\n      Mode: late\n      ModeOn: Create\n");
    let started = Instant::now();
    let run = deploy(&s, "st", &body, &[]);
    assert_eq!(run.code(), 1);
    assert!(started.elapsed() < Duration::from_secs(10));
    let reqs = h.requests();
    let request_id = reqs[0]["event"]["RequestId"].as_str().unwrap().to_string();
    assert_eq!(
        failure_reason(&s, "st", "W"),
        format!("CloudFormation did not receive a response from your Custom Resource. Please check your logs for requestId [{request_id}]. (No response within 1 s, the ServiceTimeout.)")
    );
    // Rollback deletes the id Cairn generated; the handler's late answer to
    // the Create (sent first when the Delete came) got 410 Gone.
    let delete = &reqs[1];
    assert_eq!(delete["event"]["RequestType"], "Delete");
    let generated = delete["event"]["PhysicalResourceId"].as_str().unwrap();
    assert!(
        generated.starts_with("st-W-") && generated.len() == "st-W-".len() + 12,
        "{generated}"
    );
    assert_eq!(delete["puts"], json!([410, 200]));
    assert_eq!(status(&s, "st"), "ROLLBACK_COMPLETE");
}

#[test]
fn a_handler_that_is_down_at_first_is_retried() {
    // A port nothing listens on yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = Scratch::new();
    write_config(&s, port);
    let path = s.write("t.yaml", &widget("      Size: 1\n"));
    let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "--config",
            "cairn.toml",
            "deploy",
            "st",
            path.to_str().unwrap(),
        ])
        .current_dir(s.dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let h = Handler::start(&s, port);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(h.calls(), [call("Create", "W", "-")]);
    assert_eq!(status(&s, "st"), "CREATE_COMPLETE");
}

#[test]
fn invalid_repeated_and_forged_responses() {
    let (s, h) = with_handler();
    let cases = [
        ("oversize", "Response object is too long.".to_string()),
        ("malformed", "Invalid response object: the body is not valid JSON (EOF while parsing a value at line 1 column 22); send the JSON object cfnresponse sends".to_string()),
    ];
    for (i, (mode, reason)) in cases.iter().enumerate() {
        let stack = format!("bad{i}");
        let run = deploy(
            &s,
            &stack,
            &widget(&format!("      Mode: {mode}\n      ModeOn: Create\n")),
            &[],
        );
        assert_eq!(run.code(), 1);
        assert_eq!(&failure_reason(&s, &stack, "W"), reason, "{mode}");
        // The listener told the handler too.
        let reqs = h.requests();
        assert_eq!(reqs[reqs.len() - 2]["puts"], json!([400]), "{mode}");
    }
    let run = deploy(
        &s,
        "wrong",
        &widget("      Mode: wrongid\n      ModeOn: Create\n"),
        &[],
    );
    assert_eq!(run.code(), 1);
    let reqs = h.requests();
    let id = reqs[reqs.len() - 2]["event"]["RequestId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        failure_reason(&s, "wrong", "W"),
        format!(
            "Invalid response object: RequestId [not-{id}] does not match the request's [{id}]"
        )
    );
    // Only the first response counts: the second gets 409 Conflict.
    // (The stack lives on for a second after W, so the second PUT reaches
    // a running process.)
    let run = deploy(
        &s,
        "dup",
        &widget("      Mode: duplicate\n  After:\n    Type: Cairn::Test::Resource\n    DependsOn: W\n    Properties: {WaitSeconds: 1}\n"),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(h.requests().last().unwrap()["puts"], json!([200, 409]));
    // A forged URL (wrong Signature) gets 403 and changes nothing.
    let run = deploy(&s, "forged", &widget("      Mode: forged\n"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(h.requests().last().unwrap()["puts"], json!([403, 200]));
}

#[test]
fn data_is_read_by_getatt_and_no_echo_masks_it() {
    let (s, _handler) = with_handler();
    let body = widget("      NoEcho: true\n      Data: {Password: hunter2-secret}\n  User:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !GetAtt W.Password, Description: !Sub 'pw=${W.Password}'}\nOutputs:\n  Pw: {Value: !GetAtt W.Password}\n");
    let run = deploy(&s, "st", &body, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let user = events(&s, "st")
        .into_iter()
        .find(|e| e["LogicalResourceId"] == "User" && e["ResourceStatus"] == "CREATE_COMPLETE")
        .unwrap();
    let props: Value = serde_json::from_str(user["ResourceProperties"].as_str().unwrap()).unwrap();
    assert_eq!(props["Value"], "*****");
    assert_eq!(props["Description"], "pw=*****");
    // The resource got the real value; CloudFormation does not mask Outputs.
    let physical = crate::update::physical(&s, "st", "User");
    assert_eq!(
        crate::update::file(&s, &physical)["Properties"]["Value"],
        "hunter2-secret"
    );
    let out = cairn(&s, &["describe", "st", "--output", "json"]).json();
    assert_eq!(
        out["Stacks"][0]["Outputs"][0]["OutputValue"],
        "hunter2-secret"
    );
}

/// A handler program that prints `listening on HOST:PORT` first; killed
/// when dropped.
pub(crate) struct Program {
    child: Child,
    pub(crate) port: u16,
}

impl Program {
    pub(crate) fn start(mut cmd: Command) -> Program {
        use std::io::BufRead;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the handler program starts");
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let mut reader = std::io::BufReader::new(out);
            let _ = reader.read_line(&mut line);
            // Keep draining: a handler that prints (cfnresponse does) must
            // not die of a closed pipe.
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        }
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the handler did not say where it listens: {line:?}"));
        Program { child, port }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Rust handler kit example (`examples/webhook_handler.rs`).
/// The kit example's executable, built first.
pub(crate) fn kit_example() -> PathBuf {
    crate::support::workspace_built();
    PathBuf::from(env!("CARGO_BIN_EXE_cairn"))
        .parent()
        .map(|d| d.join("examples/webhook_handler"))
        .unwrap_or_default()
}

fn rust_kit_handler(secret: &str) -> Program {
    let mut cmd = Command::new(kit_example());
    cmd.args(["--listen", "127.0.0.1:0", "--secret", secret]);
    Program::start(cmd)
}

/// An unchanged Lambda handler (`module.function` in `dir`) behind the
/// Python SDK's Lambda adapter (`sdk-python`, on the PYTHONPATH as an
/// installed package would be).
pub(crate) fn lambda_adapter(handler: &str, dir: &str, secret: &str) -> Command {
    let mut cmd = crate::support::python_with("cfnresponse");
    cmd.args(["-m", "cairn_provider.lambda_adapter", handler, "--dir", dir])
        .args(["--listen", "127.0.0.1:0"])
        .env(
            "PYTHONPATH",
            concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"),
        )
        .env("CAIRN_WEBHOOK_SECRET", secret);
    cmd
}

/// The Python example: a Lambda handler using PyPI's cfnresponse, unchanged.
fn python_cfnresponse_handler(secret: &str) -> Program {
    Program::start(lambda_adapter(
        "handler.handler",
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/python-handler"),
        secret,
    ))
}

/// A scratch dir whose config names `handler` as endpoint `greetings`.
fn greetings_scratch(handler: &Program) -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[webhooks.endpoints.greetings]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\n",
            handler.port
        ),
    );
    s
}

/// Deploys `body` to stack `st` and checks that the handler replaced
/// `logical`: updated to the new physical id `new`, then `old` deleted in
/// the cleanup.
pub(crate) fn deploy_replacing(s: &Scratch, body: &str, logical: &str, old: &str, new: &str) {
    let skip = events(s, "st").len();
    let run = deploy(s, "st", body, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seq: Vec<_> = sequence_after(s, "st", skip)
        .into_iter()
        .filter(|e| e.0 == logical)
        .collect();
    assert_eq!(
        seq,
        [
            ev(logical, "UPDATE_IN_PROGRESS", "", old),
            ev(logical, "UPDATE_COMPLETE", "", new),
            ev(logical, "DELETE_IN_PROGRESS", "", old),
            ev(logical, "DELETE_COMPLETE", "", old),
        ]
    );
}

/// The values of `stack`'s outputs, in order.
pub(crate) fn output_values(s: &Scratch, stack: &str) -> Vec<String> {
    cairn(s, &["describe", stack, "--output", "json"]).json()["Stacks"][0]["Outputs"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|o| o["OutputValue"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Create, update (a new Name: a new greeting, the old one deleted in
/// cleanup), delete, against a handler serving Custom::Greeting.
fn greeting_lifecycle(handler: Program, id_prefix: &str) {
    let s = greetings_scratch(&handler);
    let v1 = "Resources:\n  G:\n    Type: Custom::Greeting\n    Properties: {ServiceToken: greetings, Name: world, Excited: false}\n  User:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !GetAtt G.Message}\nOutputs:\n  Message: {Value: !GetAtt G.Message}\n  Id: {Value: !Ref G}\n";
    let run = deploy(&s, "st", v1, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let outputs = |s: &Scratch| output_values(s, "st");
    let old = format!("{id_prefix}world");
    assert_eq!(outputs(&s), ["Hello, world.".to_string(), old.clone()]);
    let skip = events(&s, "st").len();
    let v2 = v1.replace("Name: world", "Name: there");
    let run = deploy(&s, "st", &v2, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let new = format!("{id_prefix}there");
    let seq: Vec<_> = sequence_after(&s, "st", skip)
        .into_iter()
        .filter(|e| e.0 == "G")
        .collect();
    assert_eq!(
        seq,
        [
            ev("G", "UPDATE_IN_PROGRESS", "", &old),
            ev("G", "UPDATE_COMPLETE", "", &new),
            ev("G", "DELETE_IN_PROGRESS", "", &old),
            ev("G", "DELETE_COMPLETE", "", &old),
        ]
    );
    assert_eq!(outputs(&s), ["Hello, there.".to_string(), new.clone()]);
    let stack_id = cairn(&s, &["describe", "st", "--output", "json"]).json()["Stacks"][0]
        ["StackId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // A deleted stack's events are read by its id, as in CloudFormation.
    let last: Vec<_> = sequence_after(&s, &stack_id, 0)
        .into_iter()
        .filter(|e| e.0 == "G")
        .rev()
        .take(2)
        .collect();
    assert_eq!(
        last,
        [
            ev("G", "DELETE_COMPLETE", "", &new),
            ev("G", "DELETE_IN_PROGRESS", "", &new)
        ]
    );
}

#[test]
fn the_rust_handler_kit_serves_a_provider() {
    greeting_lifecycle(rust_kit_handler(SECRET), "greeting-");
}

#[test]
fn the_typescript_example_serves_the_same_lifecycle() {
    greeting_lifecycle(
        Program::start(crate::node::typescript_example()),
        "ts-greeting-",
    );
}

#[test]
fn the_python_cfnresponse_example_serves_the_same_lifecycle() {
    greeting_lifecycle(python_cfnresponse_handler(SECRET), "py-greeting-");
}

#[test]
fn handlers_refuse_requests_with_a_wrong_signature() {
    for handler in [
        rust_kit_handler("another-secret"),
        python_cfnresponse_handler("another-secret"),
    ] {
        let s = greetings_scratch(&handler);
        let body = "Resources:\n  G:\n    Type: Custom::Greeting\n    Properties: {ServiceToken: greetings, Name: world}\n";
        let run = deploy(&s, "st", body, &[]);
        assert_eq!(run.code(), 1);
        let reason = failure_reason(&s, "st", "G");
        assert!(
            reason.starts_with(&format!(
                "the handler at http://127.0.0.1:{}/ answered HTTP 401 Unauthorized: ",
                handler.port
            )),
            "{reason}"
        );
    }
}

#[test]
fn a_missing_data_key_fails_its_reader_with_cloudformations_text() {
    let (s, _handler) = with_handler();
    let body = widget("      Data: {Arn: 'arn:widget:1'}\n  User:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !GetAtt W.Missing}\n");
    let run = deploy(&s, "st", &body, &[]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        failure_reason(&s, "st", "User"),
        "CustomResource attribute error: Vendor response doesn't contain Missing attribute in object W (at /Resources/User/Properties/Value/Fn::GetAtt, line 9, column 25)"
    );
}

#[test]
fn an_endpoint_schema_lets_the_engine_plan_replacement() {
    let s = Scratch::new();
    let h = Handler::start(&s, 0);
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[webhooks.endpoints.planned]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\ntypes = [\"Custom::Planned\"]\nattributes = [\"Arn\"]\n[webhooks.endpoints.planned.properties]\nName = \"CreateOnly\"\nSize = \"Mutable\"\n",
            h.port
        ),
    );
    let v1 = "Resources:\n  P:\n    Type: Custom::Planned\n    Properties: {ServiceToken: planned, Name: a, Size: 1, Data: {Arn: x}}\n";
    assert_eq!(deploy(&s, "st", v1, &[]).code(), 0);
    // A declared attribute is checked before anything runs.
    let bad = "Resources:\n  P:\n    Type: Custom::Planned\n    Properties: {ServiceToken: planned, Name: a, Size: 1}\nOutputs:\n  O: {Value: !GetAtt P.Nope}\n";
    let run = deploy(&s, "st", bad, &[]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Template error: resource P does not support attribute type Nope in Fn::GetAtt (type Custom::Planned has: Arn)"),
        "{}",
        run.stderr()
    );
    // Size is Mutable: an Update. Name is CreateOnly: the engine creates a
    // replacement and deletes the old one in cleanup; no Update is sent.
    let v2 = v1.replace("Size: 1", "Size: 2");
    assert_eq!(deploy(&s, "st", &v2, &[]).code(), 0);
    let v3 = v2.replace("Name: a", "Name: b");
    let run = deploy(&s, "st", &v3, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        h.calls(),
        [
            call("Create", "P", "-"),
            call("Update", "P", "P-1"),
            call("Create", "P", "-"),
            call("Delete", "P", "P-1"),
        ]
    );
}

/// A self-signed certificate for 127.0.0.1 (PEM certificate, PEM key).
pub(crate) fn self_signed(s: &Scratch) -> (String, String) {
    let cert = s.dir.path().join("cert.pem");
    let key = s.dir.path().join("key.pem");
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl makes a test certificate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert.display().to_string(), key.display().to_string())
}

#[test]
fn https_both_ways_with_an_extra_ca_bundle() {
    let s = Scratch::new();
    let (cert, key) = self_signed(&s);
    let h = Handler::start_with(
        &s,
        0,
        &["--tls-cert", &cert, "--tls-key", &key, "--cafile", &cert],
    );
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\ntls_cert = \"{cert}\"\ntls_key = \"{key}\"\n\n[webhooks.endpoints.widgets]\nurl = \"https://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\nca_bundle = \"{cert}\"\nservice_tokens = [\"{ARN}\"]\n",
            h.port
        ),
    );
    let run = deploy(&s, "st", &widget("      Size: 1\n"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let reqs = h.requests();
    assert!(reqs[0]["event"]["ResponseURL"]
        .as_str()
        .unwrap()
        .starts_with("https://127.0.0.1:"));
    assert_eq!(reqs[0]["puts"], json!([200]));
    // Without the CA bundle the handler's certificate is not trusted.
    let cfg = std::fs::read_to_string(s.dir.path().join("cairn.toml")).unwrap();
    s.write(
        "cairn.toml",
        &cfg.replace(&format!("ca_bundle = \"{cert}\"\n"), ""),
    );
    // A refused certificate is not retried until the timeout.
    let started = Instant::now();
    let run = deploy(
        &s,
        "other",
        &widget("      Size: 1\n      ServiceTimeout: 20\n"),
        &[],
    );
    assert_eq!(run.code(), 1);
    assert!(started.elapsed() < Duration::from_secs(10));
    let reason = failure_reason(&s, "other", "W");
    assert!(reason.contains("certificate"), "{reason}");
}

#[test]
fn changing_the_service_token_fails_the_update_without_contacting_the_handler() {
    let (s, h) = with_handler();
    let v1 = widget("      Size: 1\n");
    assert_eq!(deploy(&s, "st", &v1, &[]).code(), 0);
    let skip = events(&s, "st").len();
    // The same handler under another token: still a change of token.
    let v2 = v1.replace(&format!("ServiceToken: {ARN}"), "ServiceToken: widgets");
    let run = deploy(&s, "st", &v2, &[]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        sequence_after(&s, "st", skip),
        [
            ev("st", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev(
                "W",
                "UPDATE_FAILED",
                "Modifying service token is not allowed.",
                "W-1"
            ),
            ev(
                "st",
                "UPDATE_ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to update: [W].",
                ""
            ),
            ev("W", "UPDATE_COMPLETE", "", "W-1"),
            ev("st", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("st", "UPDATE_ROLLBACK_COMPLETE", "", ""),
        ]
    );
    assert_eq!(h.calls(), [call("Create", "W", "-")]);
}

#[test]
fn a_remote_handler_serves_its_own_types_as_a_webhook_provider() {
    let handler = rust_kit_handler(SECRET);
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[[providers]]\nkind = \"webhook\"\nname = \"greetings\"\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\n",
            handler.port
        ),
    );
    // The handler's schema: Name required, Excited a Boolean, attribute Message.
    let run = cairn(
        &s,
        &[
            "providers",
            "--type",
            "Custom::Greeting",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let listed = run.json();
    assert_eq!(listed["Provider"], "greetings");
    assert_eq!(listed["Transport"], "webhook");
    assert_eq!(listed["Schema"]["Properties"]["Name"]["Required"], true);
    // No ServiceToken in the template: the provider entry says where to go.
    let body = "Resources:\n  G:\n    Type: Custom::Greeting\n    Properties: {Name: world, Excited: true}\nOutputs:\n  M: {Value: !GetAtt G.Message}\n";
    let run = deploy(&s, "st", body, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = cairn(&s, &["outputs", "st", "--output", "json"]).json();
    assert_eq!(out["Outputs"][0]["OutputValue"], "Hello, world!");
    // The schema is checked before anything runs.
    let bad = "Resources:\n  G:\n    Type: Custom::Greeting\n    Properties: {Excited: true}\n";
    let run = deploy(&s, "other", bad, &[]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("required key [Name] not found"),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
}

#[test]
fn drift_of_custom_resources_is_checked_only_by_endpoints_that_opt_in() {
    let (s, h) = with_handler();
    let answer = "{Status: MODIFIED, PropertyDifferences: [{PropertyPath: /Size, ExpectedValue: '3', ActualValue: '4', DifferenceType: NOT_EQUAL}]}";
    let body = widget(&format!("      Size: 3\n      DriftAnswer: {answer}\n"));
    assert_eq!(deploy(&s, "st", &body, &[]).code(), 0);
    // Without `drift = true` the handler is not asked.
    let run = cairn(&s, &["drift", "st", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        run.json()["StackResourceDrifts"][0]["StackResourceDriftStatus"],
        "NOT_CHECKED"
    );
    assert_eq!(h.calls().len(), 1);
    let cfg = std::fs::read_to_string(s.dir.path().join("cairn.toml")).unwrap();
    s.write("cairn.toml", &format!("{cfg}drift = true\n"));
    let run = cairn(&s, &["drift", "st", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let d = run.json();
    assert_eq!(d["StackDriftStatus"], "DRIFTED");
    assert_eq!(
        d["StackResourceDrifts"][0]["PropertyDifferences"],
        json!([{"PropertyPath": "/Size", "ExpectedValue": "3", "ActualValue": "4", "DifferenceType": "NOT_EQUAL"}])
    );
    let check = &h.requests()[1]["event"];
    assert_eq!(check["RequestType"], "CheckDrift");
    assert_eq!(check["PhysicalResourceId"], "W-1");
    assert_eq!(check["ResourceProperties"]["Size"], "3");
}

#[test]
fn the_handler_kit_answers_check_drift_for_its_provider() {
    let handler = rust_kit_handler(SECRET);
    let port = handler.port;
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[[providers]]\nkind = \"webhook\"\nname = \"greetings\"\nurl = \"http://127.0.0.1:{port}/\"\nsecret = \"{SECRET}\"\ndrift = true\n"
        ),
    );
    let body = "Resources:\n  G: {Type: Custom::Greeting, Properties: {Name: world}}\n";
    assert_eq!(deploy(&s, "st", body, &[]).code(), 0);
    let status = |s: &Scratch| {
        let run = cairn(s, &["drift", "st", "--output", "json"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        run.json()["StackResourceDrifts"][0]["StackResourceDriftStatus"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(status(&s), "IN_SYNC");
    // The handler restarts and forgets its greetings: the resource is gone.
    drop(handler);
    let mut cmd = Command::new(kit_example());
    cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--secret", SECRET]);
    let _again = Program::start(cmd);
    assert_eq!(status(&s), "DELETED");
}

/// `tests/e2e/things_handler.py` behind the Python SDK's Lambda adapter: a
/// handler written for CloudFormation that makes a file in `things` per
/// Create (requests logged beside it in `requests.jsonl`).
pub(crate) fn things_handler(things: &std::path::Path, secret: &str) -> Program {
    std::fs::create_dir_all(things).expect("things dir");
    let mut cmd = lambda_adapter(
        "things_handler.handler",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e"),
        secret,
    );
    cmd.env("THINGS_DIR", things);
    Program::start(cmd)
}

/// The requests `things_handler` received, in order, for `logical` (every
/// resource with `None`): (RequestType, PhysicalResourceId).
pub(crate) fn things_requests(
    things: &std::path::Path,
    logical: Option<&str>,
) -> Vec<(String, String)> {
    std::fs::read_to_string(things.join("../requests.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| logical.is_none_or(|l| r["LogicalResourceId"] == l))
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (text("RequestType"), text("PhysicalResourceId"))
        })
        .collect()
}

/// The things `things_handler` holds (made and not deleted).
pub(crate) fn things_left(things: &std::path::Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(things)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// CloudFormation sends a custom resource's Create once, and handlers are
/// written for that. A Create cancelled because a sibling failed keeps its
/// ResponseURL open; the rollback waits for its answer and deletes exactly
/// the thing it names, instead of sending the Create again (which would make
/// a second thing, leaked).
#[test]
fn a_cancelled_custom_resource_create_is_never_sent_again_and_what_it_made_is_deleted() {
    let s = Scratch::new();
    let things = s.dir.path().join("things");
    let handler = things_handler(&things, SECRET);
    let s = {
        s.write(
            "cairn.toml",
            &format!(
                "[webhooks]\ntimeout_seconds = 30\n\n[webhooks.endpoints.things]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\n",
                handler.port
            ),
        );
        s
    };
    let t = "Resources:\n  Slow:\n    Type: Custom::Thing\n    Properties: {ServiceToken: things, Sleep: 3}\n  Bad:\n    Type: Custom::Thing\n    Properties: {ServiceToken: things, Fail: true}\n";
    let run = deploy(&s, "st", t, &[]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let status = cairn(&s, &["describe", "st", "--output", "json"]).json()["Stacks"][0]
        ["StackStatus"]
        .clone();
    assert_eq!(status, "ROLLBACK_COMPLETE");
    let slow = things_requests(&things, Some("Slow"));
    // One Create, then a Delete of the thing that Create made.
    assert_eq!(slow.len(), 2, "{slow:?}");
    assert_eq!(slow[0].0, "Create");
    assert_eq!(slow[1].0, "Delete");
    assert!(slow[1].1.starts_with("thing-"), "{slow:?}");
    let left = things_left(&things);
    assert!(left.is_empty(), "the handler still holds {left:?}");
    let seq: Vec<_> = sequence_after(&s, "st", 0)
        .into_iter()
        .filter(|e| e.0 == "Slow")
        .map(|e| (e.1, e.2))
        .collect();
    assert_eq!(
        seq,
        [
            ("CREATE_IN_PROGRESS".to_string(), String::new()),
            (
                "CREATE_IN_PROGRESS".to_string(),
                "Resource creation Initiated".to_string()
            ),
            (
                "CREATE_FAILED".to_string(),
                "Resource creation cancelled".to_string()
            ),
            ("DELETE_IN_PROGRESS".to_string(), String::new()),
            ("DELETE_COMPLETE".to_string(), String::new()),
        ]
    );
    drop(handler);
}

/// `vendor_handler.py` (Vendor::Net::Subnet, written for CloudFormation),
/// each request's type logged to `log`.
pub(crate) fn vendor_handler(log: &std::path::Path) -> Program {
    vendor_handler_with(log, &[])
}

/// [`vendor_handler`] with more arguments (`--config-log FILE`).
pub(crate) fn vendor_handler_with(log: &std::path::Path, more: &[&str]) -> Program {
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/vendor_handler.py"
    ))
    .args(["--log", log.to_str().unwrap_or_default()])
    .args(more);
    Program::start(cmd)
}

/// A parameter of a resource-id type served by a remote handler written for
/// CloudFormation: the handler is not asked Cairn's CheckDrift (its entry
/// does not opt in), the value is used with a warning event, and with
/// `drift = true` a handler that cannot answer still does not fail the stack.
#[test]
fn resource_id_parameters_of_a_handler_without_drift_support_are_used_with_a_warning() {
    let s = Scratch::new();
    let log = s.dir.path().join("vendor.log");
    let handler = vendor_handler(&log);
    let body = "Parameters:\n  Subnet: {Type: Vendor::Net::Subnet::Id}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref Subnet}}\n";
    for (drift, stack) in [("", "plain"), ("drift = true\n", "asked")] {
        s.write(
            "cairn.toml",
            &format!(
                "[webhooks]\ntimeout_seconds = 30\n\n[[providers]]\nkind = \"webhook\"\nname = \"vendor\"\nurl = \"http://127.0.0.1:{}/\"\n{drift}",
                handler.port
            ),
        );
        let run = deploy(&s, stack, body, &["-p", "Subnet=subnet-123"]);
        assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
        let warning = sequence_after(&s, stack, 0)
            .into_iter()
            .find(|e| e.0 == stack && e.2.contains("was not checked"))
            .map(|e| (e.1, e.2));
        let expected_why = if drift.is_empty() {
            "provider vendor cannot tell whether a Vendor::Net::Subnet exists".to_string()
        } else {
            "asking provider vendor failed: Unknown request type CheckDrift".to_string()
        };
        assert_eq!(
            warning,
            Some((
                "CREATE_IN_PROGRESS".to_string(),
                format!("Parameter value subnet-123 for parameter name Subnet was not checked: {expected_why}; it is used as given")
            ))
        );
    }
    // Only the entry that opted in was asked.
    let asked = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(asked.lines().collect::<Vec<_>>(), ["CheckDrift"]);
}

/// An unchanged Lambda handler serving Custom::Note (see
/// `crhelper_notes.py`) through create, an update (the previous Text from
/// OldResourceProperties), a replacement, a failed update and delete, behind
/// the Python SDK's Lambda adapter. crhelper sends its responses over HTTPS
/// to the http:// ResponseURL's port: the callback listener speaks TLS there
/// with its local CA's certificate, which the adapter trusted; nothing is
/// configured for it.
fn notes_lifecycle(module: &str) {
    notes_lifecycle_of(
        |notes| {
            let mut cmd = lambda_adapter(
                &format!("{module}.handler"),
                concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e"),
                SECRET,
            );
            cmd.env("NOTES_DIR", notes);
            cmd
        },
        |reason| reason == "told to fail on update",
    );
}

/// The notes lifecycle against the handler `command` starts (given the
/// directory its notes go in); `failure` checks the failed update's reason.
pub(crate) fn notes_lifecycle_of(
    command: impl FnOnce(&std::path::Path) -> Command,
    failure: impl Fn(&str) -> bool,
) {
    let s = Scratch::new();
    let notes = s.dir.path().join("notes");
    std::fs::create_dir_all(&notes).expect("notes dir");
    let handler = Program::start(command(&notes));
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 60\n\n[webhooks.endpoints.notes]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\n",
            handler.port
        ),
    );
    let note = |props: &str| {
        format!("Resources:\n  N:\n    Type: Custom::Note\n    Properties: {{ServiceToken: notes, {props}}}\nOutputs:\n  Text: {{Value: !GetAtt N.Text}}\n  Id: {{Value: !Ref N}}\n")
    };
    let outputs = |s: &Scratch| output_values(s, "st");
    let read = |name: &str| std::fs::read_to_string(notes.join(name)).ok();

    let run = deploy(&s, "st", &note("Name: a, Text: one"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(outputs(&s), ["one", "note-a"]);
    assert_eq!(read("a").as_deref(), Some("one"));

    // In place: the handler sees the old Text.
    let v2 = note("Name: a, Text: two").replace(
        "  Id: {Value: !Ref N}\n",
        "  Id: {Value: !Ref N}\n  Old: {Value: !GetAtt N.Old}\n",
    );
    let run = deploy(&s, "st", &v2, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(outputs(&s), ["two", "note-a", "one"]);

    // A new Name: a new physical id, the old note deleted in cleanup.
    deploy_replacing(&s, &note("Name: b, Text: two"), "N", "note-a", "note-b");
    assert_eq!((read("a"), read("b").as_deref()), (None, Some("two")));

    // A failed update: its reason, then the rollback (Old and New swapped).
    let skip = events(&s, "st").len();
    let run = deploy(&s, "st", &note("Name: b, Text: three, Fail: update"), &[]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let seq: Vec<_> = sequence_after(&s, "st", skip)
        .into_iter()
        .filter(|e| e.0 == "N" || e.0 == "st")
        .map(|e| (e.0, e.1, e.2))
        .collect();
    assert_eq!(
        (seq[2].0.as_str(), seq[2].1.as_str()),
        ("N", "UPDATE_FAILED")
    );
    assert!(failure(&seq[2].2), "{:?}", seq[2]);
    assert_eq!(
        seq.last().map(|e| e.1.as_str()),
        Some("UPDATE_ROLLBACK_COMPLETE")
    );
    assert_eq!(read("b").as_deref(), Some("two"));

    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(read("b"), None);
}

#[test]
fn an_unchanged_crhelper_handler_runs_with_no_setup() {
    notes_lifecycle("crhelper_notes");
}

#[test]
fn an_unchanged_cfnresponse_handler_runs_the_same_lifecycle() {
    notes_lifecycle("cfnresponse_notes");
}

/// A vendor's provider for a type Cairn otherwise aliases to its own
/// groups: its schema says so only when it starts.
const VENDOR_ASG: &str = r#"
from cairn_provider import Provider, ResourceType, Result, String, serve

ASG = ResourceType("AWS::AutoScaling::AutoScalingGroup", attributes={
    "Size": "MaxSize", "Team": "the stack's team tag", "Logical": "its logical-id system tag"}, properties={
    "MinSize": String(required=True), "MaxSize": String(required=True)},
    required_capabilities=["CAPABILITY_AUTOSCALING"])


class Vendor(Provider):
    types = [ASG]

    def create(self, request):
        return Result("vendor-asg-" + request.logical_id, {
            "Size": request.properties["MaxSize"], "Team": request.tags.get("team", "-"),
            "Logical": request.system_tags.get("aws:cloudformation:logical-id", "-")})

    def update(self, request):
        return self.create(request)

    def delete(self, request):
        pass


if __name__ == "__main__":
    serve(Vendor())
"#;

/// Issue 31 point 7: a configured provider's own type wins over Cairn's
/// alias of that name (`AWS::AutoScaling::AutoScalingGroup` →
/// `Cairn::Group::AutoScalingGroup`) though its entry lists no types;
/// `cairn providers` lists the type under it and not the alias; two
/// providers listing one type are refused at load, naming both. Its schema
/// requires a capability of the vendor's own, which a deploy must
/// acknowledge (issue 31 point 3).
#[test]
fn a_providers_own_type_wins_over_cairns_alias() {
    let s = Scratch::new();
    let script = s.write("vendor_asg.py", VENDOR_ASG);
    let mut cmd = crate::support::python();
    cmd.arg(&script)
        .args(["--listen", "127.0.0.1:0", "--secret", SECRET])
        .env(
            "PYTHONPATH",
            concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"),
        );
    let handler = Program::start(cmd);
    let entry = format!(
        "[[providers]]\nkind = \"webhook\"\nname = \"vendor\"\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\n",
        handler.port
    );
    s.write("cairn.toml", &entry);
    let listed = cairn(&s, &["providers", "--output", "json"]);
    assert_eq!(listed.code(), 0, "{}", listed.stderr());
    let listed = listed.json();
    let owner = listed["Types"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["TypeName"] == "AWS::AutoScaling::AutoScalingGroup")
        .map(|t| t["Provider"].clone());
    assert_eq!(owner, Some(json!("vendor")));
    assert_eq!(
        listed["Aliases"]["AWS::AutoScaling::AutoScalingGroup"],
        Value::Null
    );
    // Cairn's other aliases stay.
    assert_eq!(
        listed["Aliases"]["OS::Heat::InstanceGroup"],
        "Cairn::Group::InstanceGroup"
    );
    let body = "Resources:\n  Asg:\n    Type: AWS::AutoScaling::AutoScalingGroup\n    Properties: {MinSize: '1', MaxSize: '3'}\nOutputs:\n  Size: {Value: !GetAtt Asg.Size}\n  Team: {Value: !GetAtt Asg.Team}\n  Logical: {Value: !GetAtt Asg.Logical}\n";
    let run = deploy(&s, "vend", body, &[]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .ends_with(": Requires capabilities : [CAPABILITY_AUTOSCALING]\n"),
        "{}",
        run.stderr()
    );
    let run = deploy(
        &s,
        "vend",
        body,
        // The stack's tags reach the handler too (issue 31 point 4).
        &[
            "--capabilities",
            "CAPABILITY_AUTOSCALING",
            "--tag",
            "team=ops",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let resources = cairn(&s, &["resources", "vend", "--output", "json"]).json();
    let asg = &resources["StackResources"][0];
    assert_eq!(asg["ResourceType"], "AWS::AutoScaling::AutoScalingGroup");
    assert_eq!(asg["PhysicalResourceId"], "vendor-asg-Asg");
    assert_eq!(
        cairn(&s, &["outputs", "vend"]).stdout(),
        "Size = 3\nTeam = ops\nLogical = Asg\n"
    );
    // Two providers listing one type: refused at load, naming both.
    s.write(
        "cairn.toml",
        &format!(
            "{entry}types = [\"AWS::AutoScaling::AutoScalingGroup\"]\n\n[[providers]]\nkind = \"webhook\"\nname = \"other\"\nurl = \"http://127.0.0.1:{}/\"\ntypes = [\"AWS::AutoScaling::AutoScalingGroup\"]\n",
            handler.port
        ),
    );
    let refused = cairn(&s, &["providers"]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr().contains("resource type AWS::AutoScaling::AutoScalingGroup is claimed by two providers: vendor and other;"),
        "{}",
        refused.stderr()
    );
}
