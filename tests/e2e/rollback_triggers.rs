//! Rollback triggers through the real binary, against a health check and
//! an Alertmanager served on loopback (`trigger_server.py`): a health
//! check failing mid-update rolls the update back, an alert firing during
//! the monitoring period rolls a create back, a trigger that cannot be read
//! fails the operation, and the configuration is kept, replaced and
//! cleared as CloudFormation's is.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::Scratch;
use crate::update::{cairn, deploy, ev, events, sequence_after, status};
use crate::webhooks::Program;

/// A scratch dir whose engine looks at triggers every 100 ms.
fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        "[engine]\ncleanup_attempts = 3\ncleanup_backoff_seconds = 0.05\nrollback_trigger_poll_ms = 100\n",
    );
    s
}

/// The health check and Alertmanager, reading their answers from `s`.
fn trigger_server(s: &Scratch) -> Program {
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/trigger_server.py"
    ))
    .arg(s.dir.path());
    Program::start(cmd)
}

fn body(value: &str, wait_seconds: u32) -> String {
    format!("Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {{Value: {value}, WaitSeconds: {wait_seconds}}}\n")
}

fn described(s: &Scratch, stack: &str) -> Value {
    let run = cairn(s, &["describe", stack, "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.json()["Stacks"][0].clone()
}

/// Waits until `stack` has an event of `logical` in `status`.
fn wait_for_event(s: &Scratch, stack: &str, logical: &str, wanted: &str) {
    let started = Instant::now();
    let seen = || {
        // The stack may not exist yet.
        let run = cairn(s, &["events", stack, "--output", "json"]);
        run.code() == 0
            && run.json()["StackEvents"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["LogicalResourceId"] == logical && e["ResourceStatus"] == wanted)
    };
    while !seen() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{logical} never reached {wanted}: {}",
            s.spawned_stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn finished(child: &mut std::process::Child) -> i32 {
    let started = Instant::now();
    loop {
        if let Ok(Some(code)) = child.try_wait() {
            return code.code().unwrap_or(-1);
        }
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "the operation did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_health_check_failing_mid_update_rolls_the_update_back_and_the_triggers_are_kept() {
    let s = scratch();
    let server = trigger_server(&s);
    let url = format!("http://127.0.0.1:{}/health", server.port);
    let config = json!({
        "RollbackTriggers": [{"Arn": url, "Type": "Cairn::Http::HealthCheck"}],
        "MonitoringTimeInMinutes": 0
    })
    .to_string();
    let run = deploy(
        &s,
        "st",
        &body("v1", 0),
        &["--rollback-configuration", &config],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        described(&s, "st")["RollbackConfiguration"],
        json!({"RollbackTriggers": [{"Arn": url, "Type": "Cairn::Http::HealthCheck"}], "MonitoringTimeInMinutes": 0})
    );
    let before = events(&s, "st").len();

    // The update of A takes 30 s; the health check fails meanwhile.
    let next = s.write("next.yaml", &body("v2", 30));
    let mut update = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "st",
        next.to_str().unwrap_or_default(),
    ]);
    wait_for_event(&s, "st", "A", "UPDATE_IN_PROGRESS");
    s.write("health", "503");
    assert_ne!(finished(&mut update), 0);
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_COMPLETE");
    let reason = format!(
        "Rollback trigger Cairn::Http::HealthCheck [{url}] is in ALARM: the health check answered HTTP 503. "
    );
    let physical = crate::update::physical(&s, "st", "A");
    assert_eq!(
        sequence_after(&s, "st", before),
        vec![
            ev("st", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("A", "UPDATE_IN_PROGRESS", "", &physical),
            ev("A", "UPDATE_FAILED", "Resource update cancelled", &physical),
            ev("st", "UPDATE_ROLLBACK_IN_PROGRESS", &reason, ""),
            ev("A", "UPDATE_IN_PROGRESS", "", &physical),
            ev("A", "UPDATE_COMPLETE", "", &physical),
            ev("st", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("st", "UPDATE_ROLLBACK_COMPLETE", "", ""),
        ]
    );
    assert_eq!(
        crate::update::file(&s, &physical)["Properties"]["Value"],
        "v1"
    );

    // Healthy again: an update that leaves the configuration out keeps
    // it, and one with an empty trigger list clears it.
    s.write("health", "200");
    let run = deploy(&s, "st", &body("v3", 0), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        described(&s, "st")["RollbackConfiguration"]["RollbackTriggers"][0]["Arn"],
        url.as_str()
    );
    let run = deploy(
        &s,
        "st",
        &body("v4", 0),
        &["--rollback-configuration", r#"{"RollbackTriggers": []}"#],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(described(&s, "st").get("RollbackConfiguration"), None);
}

#[test]
fn an_alert_firing_in_the_monitoring_period_rolls_a_create_back() {
    let s = scratch();
    let server = trigger_server(&s);
    let arn = format!("http://127.0.0.1:{}#HighErrorRate", server.port);
    let config = s.write(
        "rollback.yaml",
        &format!("RollbackTriggers:\n  - Arn: '{arn}'\n    Type: Cairn::Prometheus::Alert\nMonitoringTimeInMinutes: 10\n"),
    );
    let template = s.write("t.yaml", &body("v1", 0));
    let mut create = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "st",
        template.to_str().unwrap_or_default(),
        "--rollback-configuration",
        config.to_str().unwrap_or_default(),
    ]);
    wait_for_event(&s, "st", "A", "CREATE_COMPLETE");
    // Another alert firing, or this one silenced, is not this trigger's.
    s.write(
        "alerts",
        r#"[{"labels": {"alertname": "Other"}, "status": {"state": "active"}},
            {"labels": {"alertname": "HighErrorRate"}, "status": {"state": "suppressed"}}]"#,
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(status(&s, "st"), "CREATE_IN_PROGRESS");
    s.write(
        "alerts",
        r#"[{"labels": {"alertname": "HighErrorRate", "severity": "page"}, "status": {"state": "active"}}]"#,
    );
    assert_ne!(finished(&mut create), 0);
    assert_eq!(status(&s, "st"), "ROLLBACK_COMPLETE");
    let physical = crate::update::physical(&s, "st", "A");
    let reason = format!("Rollback trigger Cairn::Prometheus::Alert [{arn}] is in ALARM: alert HighErrorRate is firing (1 active). Rollback requested by user.");
    assert_eq!(
        sequence_after(&s, "st", 0),
        vec![
            ev("st", "CREATE_IN_PROGRESS", "User Initiated", ""),
            ev("A", "CREATE_IN_PROGRESS", "", ""),
            ev("A", "CREATE_IN_PROGRESS", "Resource creation Initiated", ""),
            ev("A", "CREATE_COMPLETE", "", &physical),
            ev("st", "ROLLBACK_IN_PROGRESS", &reason, ""),
            ev("A", "DELETE_IN_PROGRESS", "", &physical),
            ev("A", "DELETE_COMPLETE", "", &physical),
            ev("st", "ROLLBACK_COMPLETE", "", ""),
        ]
    );
    // Alertmanager was asked for that alert by name.
    let asked = std::fs::read_to_string(s.dir.path().join("requests.log")).unwrap_or_default();
    assert!(
        asked.lines().any(|l| l == "/api/v2/alerts?active=true&silenced=false&inhibited=false&filter=alertname%3D%22HighErrorRate%22"),
        "{asked}"
    );
}

#[test]
fn a_trigger_that_cannot_be_read_fails_the_operation_and_limits_are_cloudformations() {
    let s = scratch();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(9);
    let url = format!("http://127.0.0.1:{port}/health");
    let config =
        json!({"RollbackTriggers": [{"Arn": url, "Type": "Cairn::Http::HealthCheck"}]}).to_string();
    let run = deploy(
        &s,
        "st",
        &body("v1", 0),
        &["--rollback-configuration", &config],
    );
    assert_ne!(run.code(), 0);
    assert_eq!(status(&s, "st"), "ROLLBACK_COMPLETE");
    let reason = described(&s, "st")["StackStatusReason"].clone();
    let rollback = events(&s, "st")
        .into_iter()
        .find(|e| e["ResourceStatus"] == "ROLLBACK_IN_PROGRESS")
        .map(|e| {
            e["ResourceStatusReason"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .unwrap_or_default();
    let prefix = format!("Rollback trigger Cairn::Http::HealthCheck [{url}] cannot be read: ");
    assert!(rollback.starts_with(&prefix), "{rollback}");
    assert!(
        rollback.ends_with(
            ". A trigger that cannot be read fails the operation. Rollback requested by user."
        ),
        "{rollback} / {reason}"
    );

    // CloudFormation's limits, refused before anything is recorded.
    let six: Vec<Value> = (0..6)
        .map(|i| json!({"Arn": format!("http://127.0.0.1:{port}/{i}"), "Type": "Cairn::Http::HealthCheck"}))
        .collect();
    let too_many = json!({ "RollbackTriggers": six }).to_string();
    let run = deploy(
        &s,
        "other",
        &body("v1", 0),
        &["--rollback-configuration", &too_many],
    );
    assert_ne!(run.code(), 0);
    assert!(run.stderr().contains("--rollback-configuration: 1 validation error detected: Value at 'rollbackConfiguration.rollbackTriggers' failed to satisfy constraint: Member must have length less than or equal to 5"), "{}", run.stderr());
    let cloudwatch = r#"{"RollbackTriggers": [{"Arn": "arn:aws:cloudwatch:us-east-1:1:alarm:x", "Type": "AWS::CloudWatch::Alarm"}], "MonitoringTimeInMinutes": 181}"#;
    let run = deploy(
        &s,
        "other",
        &body("v1", 0),
        &["--rollback-configuration", cloudwatch],
    );
    assert!(run.stderr().contains("Value '181' at 'rollbackConfiguration.monitoringTimeInMinutes' failed to satisfy constraint: Member must have value less than or equal to 180"), "{}", run.stderr());
    let cloudwatch = cloudwatch.replace("181", "5");
    let run = deploy(
        &s,
        "other",
        &body("v1", 0),
        &["--rollback-configuration", &cloudwatch],
    );
    assert!(run.stderr().contains("Rollback trigger type AWS::CloudWatch::Alarm is not supported: Cairn reads Cairn::Http::HealthCheck"), "{}", run.stderr());
    assert_eq!(
        cairn(&s, &["describe", "other"]).code(),
        1,
        "nothing was recorded"
    );
}
