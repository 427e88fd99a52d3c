//! Stack notifications through the real binary and a webhook on loopback
//! (`notification_receiver.py`): every event of a create, an update and
//! its rollback reaches the target once, in order, signed, also when the
//! engine sending them is killed mid-delivery and the next command sends
//! the rest.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Scratch;
use crate::update::{cairn, events, status};
use crate::webhooks::Program;

const SECRET: &str = "notify-secret";

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!("[engine]\ncleanup_attempts = 3\ncleanup_backoff_seconds = 0.05\nlease_seconds = 2\n\n[webhooks]\nsecret = \"{SECRET}\"\n"),
    );
    s
}

fn receiver(s: &Scratch) -> Program {
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/notification_receiver.py"
    ))
    .arg(s.dir.path())
    .arg(SECRET);
    Program::start(cmd)
}

fn accepted(s: &Scratch) -> Vec<Value> {
    std::fs::read_to_string(s.dir.path().join("accepted.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn wait_until(what: &str, s: &Scratch, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}: {}",
            s.spawned_stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// (event id, logical id, status) of each message, and of each event.
fn ids(list: &[Value], id: &str) -> Vec<(String, String, String)> {
    list.iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (text(id), text("LogicalResourceId"), text("ResourceStatus"))
        })
        .collect()
}

#[test]
fn a_webhook_gets_every_event_once_in_order_across_a_killed_engine() {
    let s = scratch();
    let hook = receiver(&s);
    let url = format!("http://127.0.0.1:{}/cfn-events", hook.port);
    let t = s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n  B:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref A, WaitSeconds: 2}\n  C: {Type: Cairn::Test::Resource, DependsOn: B}\n",
    );
    // The fourth message is held until the engine sending it is killed.
    s.write("stall_at", "3");
    let mut deploy = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "st",
        t.to_str().unwrap_or_default(),
        "--notify",
        &url,
    ]);
    wait_until("the webhook to hold a message", &s, || {
        s.dir.path().join("stalled").exists()
    });
    deploy.kill().expect("SIGKILL");
    let _ = deploy.wait();
    assert_eq!(accepted(&s).len(), 3);
    std::fs::remove_file(s.dir.path().join("stall_at")).expect("release the webhook");

    // The next command finishes the create and sends the rest.
    let run = cairn(&s, &["list"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stderr().contains("resumed the interrupted operation"));
    assert_eq!(status(&s, "st"), "CREATE_COMPLETE");

    // An update that fails and rolls back, with the same target kept.
    let failing = s.write(
        "t2.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a2}}\n  B:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref A, Fail: update}\n  C: {Type: Cairn::Test::Resource, DependsOn: B}\n",
    );
    let run = cairn(&s, &["deploy", "st", failing.to_str().unwrap_or_default()]);
    assert_ne!(run.code(), 0);
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_COMPLETE");

    let recorded = events(&s, "st");
    let got = accepted(&s);
    assert_eq!(ids(&got, "EventId"), ids(&recorded, "EventId"));
    assert!(got.len() > 20, "{}", got.len());
    assert!(got.iter().all(|m| m["signature_ok"] == true));
    let last = &got[got.len() - 1];
    assert_eq!(last["ResourceStatus"], "UPDATE_ROLLBACK_COMPLETE");
    assert_eq!(last["Subject"], "AWS CloudFormation Notification");
    assert_eq!(last["Namespace"], "123456789012");
    let text = last["Message"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(&format!(
            "StackId='{}'\n",
            last["StackId"].as_str().unwrap_or_default()
        )),
        "{text}"
    );
    assert!(
        text.contains("\nResourceStatus='UPDATE_ROLLBACK_COMPLETE'\n"),
        "{text}"
    );

    // The target is shown, and removed by --no-notify.
    let shown = cairn(&s, &["describe", "st", "--output", "json"]).json();
    assert_eq!(
        shown["Stacks"][0]["NotificationARNs"],
        serde_json::json!([url])
    );
    let quiet = s.write(
        "t3.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a3}}\n  B:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref A}\n  C: {Type: Cairn::Test::Resource, DependsOn: B}\n",
    );
    let run = cairn(
        &s,
        &[
            "deploy",
            "st",
            quiet.to_str().unwrap_or_default(),
            "--no-notify",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let shown = cairn(&s, &["describe", "st", "--output", "json"]).json();
    assert_eq!(
        shown["Stacks"][0]["NotificationARNs"],
        serde_json::json!([])
    );
    assert_eq!(accepted(&s).len(), got.len());
}
