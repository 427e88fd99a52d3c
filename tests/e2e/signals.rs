//! Wait conditions, creation policies and signals through the real binary:
//! handles signalled with `curl` as a user-data script would, `cairn
//! signal`, a signal sent while no Cairn runs (SIGKILL), and the stack
//! timeout.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Scratch;
use crate::update::{cairn, ev, events, scratch, sequence_after, status};

/// Starts `cairn deploy` of `body` in the background.
fn spawn_deploy(s: &Scratch, stack: &str, body: &str, extra: &[&str]) -> std::process::Child {
    let path = s.write(&format!("{stack}.yaml"), body);
    let mut args = vec![
        "--config",
        "cairn.toml",
        "deploy",
        stack,
        path.to_str().unwrap_or_default(),
    ];
    args.extend_from_slice(extra);
    s.spawn_cairn(&args)
}

/// Waits until an event of the stack satisfies `pred`.
fn wait_for_event(s: &Scratch, stack: &str, what: &str, pred: impl Fn(&Value) -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        let run = cairn(s, &["events", stack, "--output", "json"]);
        if run.code() == 0
            && run.json()["StackEvents"]
                .as_array()
                .is_some_and(|l| l.iter().any(&pred))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}:\n{}", s.spawned_stderr());
}

/// Waits for the resource's provider to be done: it now waits for signals.
fn wait_until_waiting(s: &Scratch, stack: &str, logical: &str) {
    wait_for_event(s, stack, &format!("{logical} to start"), |e| {
        e["LogicalResourceId"] == logical
            && e["ResourceStatusReason"] == "Resource creation Initiated"
    });
}

fn physical_of(s: &Scratch, stack: &str, logical: &str) -> String {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    run.json()["StackResources"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == logical))
        .and_then(|r| r["PhysicalResourceId"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn resource_status(s: &Scratch, stack: &str, logical: &str) -> String {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    run.json()["StackResources"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == logical))
        .and_then(|r| r["ResourceStatus"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Runs `script` with `sh` (what a user-data script does), returning stdout.
fn sh(s: &Scratch, script: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(s.dir.path())
        .output()
        .expect("sh runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `curl` line `cfn-signal` amounts to, printing the HTTP status.
fn curl_signal(url: &str, status: &str, id: &str, reason: &str, data: &str) -> String {
    format!(
        "curl -s -o /dev/null -w '%{{http_code}}\\n' -X PUT -H 'Content-Type:' --data-binary '{{\"Status\":\"{status}\",\"Reason\":\"{reason}\",\"UniqueId\":\"{id}\",\"Data\":\"{data}\"}}' '{url}'\n"
    )
}

const WAIT_TEMPLATE: &str = "Resources:
  Handle:
    Type: AWS::CloudFormation::WaitConditionHandle
  Wait:
    Type: AWS::CloudFormation::WaitCondition
    Properties:
      Handle: !Ref Handle
      Timeout: TIMEOUT
      Count: COUNT
Outputs:
  Data:
    Value: !GetAtt Wait.Data
";

fn wait_template(count: u32, timeout: u32) -> String {
    WAIT_TEMPLATE
        .replace("TIMEOUT", &format!("'{timeout}'"))
        .replace("COUNT", &count.to_string())
}

#[test]
fn a_wait_condition_completes_on_its_count_of_curl_signals() {
    let s = scratch();
    let mut deploy = spawn_deploy(&s, "wc", &wait_template(3, 120), &[]);
    wait_until_waiting(&s, "wc", "Wait");
    let url = physical_of(&s, "wc", "Handle");
    assert!(
        url.starts_with("http://127.0.0.1:")
            && url.contains("/cfn-signal/")
            && url.contains("?Signature="),
        "{url}"
    );
    // Two successes and a repeated UniqueId (it replaces, not counts).
    let script = [
        curl_signal(&url, "SUCCESS", "web-1", "Configuration Complete", "first"),
        curl_signal(&url, "SUCCESS", "web-2", "Configuration Complete", "second"),
        curl_signal(
            &url,
            "SUCCESS",
            "web-2",
            "Configuration Complete",
            "second again",
        ),
    ]
    .concat();
    assert_eq!(sh(&s, &script), "200\n200\n200\n");
    // A forged signature and a body that is not a signal change nothing.
    let forged = format!("{}0", url);
    assert_eq!(
        sh(&s, &curl_signal(&forged, "SUCCESS", "x", "r", "d")),
        "403\n"
    );
    assert_eq!(
        sh(&s, &format!("curl -s -o /dev/null -w '%{{http_code}}\\n' -X PUT --data-binary 'Status=SUCCESS' '{url}'")),
        "400\n"
    );
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(resource_status(&s, "wc", "Wait"), "CREATE_IN_PROGRESS");
    assert_eq!(status(&s, "wc"), "CREATE_IN_PROGRESS");

    assert_eq!(
        sh(&s, &curl_signal(&url, "SUCCESS", "web-3", "done", "third")),
        "200\n"
    );
    let done = deploy.wait().expect("deploy ends");
    assert!(done.success(), "{}", s.spawned_stderr());
    assert_eq!(status(&s, "wc"), "CREATE_COMPLETE");
    let wait_events: Vec<_> = sequence_after(&s, "wc", 0)
        .into_iter()
        .filter(|e| e.0 == "Wait")
        .collect();
    let id = physical_of(&s, "wc", "Wait");
    assert_eq!(
        wait_events,
        vec![
            ev("Wait", "CREATE_IN_PROGRESS", "", ""),
            ev(
                "Wait",
                "CREATE_IN_PROGRESS",
                "Resource creation Initiated",
                ""
            ),
            ev("Wait", "CREATE_COMPLETE", "", &id),
        ]
    );
    let outputs = cairn(&s, &["outputs", "wc", "--output", "json"]).json();
    let data = outputs
        .as_array()
        .or_else(|| outputs["Outputs"].as_array())
        .and_then(|l| l.iter().find(|o| o["OutputKey"] == "Data"))
        .and_then(|o| o["OutputValue"].as_str())
        .unwrap_or_default()
        .to_string();
    let data: Value = serde_json::from_str(&data).expect("Data is a JSON object");
    assert_eq!(
        data,
        serde_json::json!({"web-1": "first", "web-2": "second again", "web-3": "third"})
    );
    // The handle is gone with its stack: its URL answers 404.
    assert_eq!(cairn(&s, &["delete", "wc"]).code(), 0);
    let late = sh(
        &s,
        &format!(
            "{}sleep 0\n",
            curl_signal(&url, "SUCCESS", "web-4", "r", "d")
        ),
    );
    assert!(late == "404\n" || late == "000\n", "{late}");
}

#[test]
fn a_failure_signal_fails_the_wait_condition_with_its_reason() {
    let s = scratch();
    let mut deploy = spawn_deploy(&s, "wcfail", &wait_template(2, 120), &[]);
    wait_until_waiting(&s, "wcfail", "Wait");
    let url = physical_of(&s, "wcfail", "Handle");
    let script = [
        curl_signal(&url, "SUCCESS", "i-1", "ok", "fine"),
        curl_signal(&url, "FAILURE", "i-2", "disk full", ""),
    ]
    .concat();
    assert_eq!(sh(&s, &script), "200\n200\n");
    let done = deploy.wait().expect("deploy ends");
    assert!(!done.success());
    assert_eq!(status(&s, "wcfail"), "ROLLBACK_COMPLETE");
    let all = events(&s, "wcfail");
    let reason = |logical: &str, st: &str| {
        all.iter()
            .find(|e| e["LogicalResourceId"] == logical && e["ResourceStatus"] == st)
            .and_then(|e| e["ResourceStatusReason"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        reason("Wait", "CREATE_FAILED"),
        "WaitCondition received failed message: 'disk full' for uniqueId: i-2"
    );
    assert_eq!(
        reason("wcfail", "ROLLBACK_IN_PROGRESS"),
        "The following resource(s) failed to create: [Wait]. Rollback requested by user."
    );
}

#[test]
fn a_wait_condition_times_out_with_cloudformations_text() {
    let s = scratch();
    let mut deploy = spawn_deploy(&s, "wcslow", &wait_template(2, 2), &["--disable-rollback"]);
    wait_until_waiting(&s, "wcslow", "Wait");
    let url = physical_of(&s, "wcslow", "Handle");
    assert_eq!(
        sh(&s, &curl_signal(&url, "SUCCESS", "only", "ok", "one")),
        "200\n"
    );
    let done = deploy.wait().expect("deploy ends");
    assert!(!done.success());
    assert_eq!(status(&s, "wcslow"), "CREATE_FAILED");
    let failed = events(&s, "wcslow")
        .into_iter()
        .find(|e| e["LogicalResourceId"] == "Wait" && e["ResourceStatus"] == "CREATE_FAILED")
        .expect("Wait failed");
    assert_eq!(
        failed["ResourceStatusReason"],
        "WaitCondition timed out. Received 1 conditions when expecting 2"
    );
}

/// A custom resource (a real handler process) with a CreationPolicy stays
/// CREATE_IN_PROGRESS until `cairn signal` sends its Count of successes;
/// each signal is an event.
#[test]
fn creation_policy_on_a_custom_resource_waits_for_cairn_signal() {
    let (s, _h) = crate::webhooks::with_handler();
    let body = format!(
        "Resources:\n  W:\n    Type: Custom::Widget\n    CreationPolicy:\n      ResourceSignal: {{Count: 2, Timeout: PT2M}}\n    Properties:\n      ServiceToken: {}\n      Size: 1\n  After:\n    Type: Cairn::Test::Resource\n    Properties: {{Value: !Ref W}}\n",
        crate::webhooks::ARN
    );
    let mut deploy = spawn_deploy(&s, "cp", &body, &[]);
    wait_until_waiting(&s, "cp", "W");
    // Not yet made (or made and waiting): a signal for a resource being
    // created is kept either way.
    let first = cairn(&s, &["signal", "cp", "W", "--id", "a"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    assert_eq!(first.stdout(), "SUCCESS signal a kept for W of stack cp\n");
    let again = cairn(&s, &["signal", "cp", "W", "--id", "a"]);
    assert_eq!(again.code(), 0, "{}", again.stderr());
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(resource_status(&s, "cp", "W"), "CREATE_IN_PROGRESS");
    assert_eq!(resource_status(&s, "cp", "After"), "");
    assert_eq!(cairn(&s, &["signal", "cp", "W", "--id", "b"]).code(), 0);
    let done = deploy.wait().expect("deploy ends");
    assert!(done.success(), "{}", s.spawned_stderr());
    let w_events: Vec<_> = sequence_after(&s, "cp", 0)
        .into_iter()
        .filter(|e| e.0 == "W")
        .map(|e| (e.1, e.2))
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        w_events,
        vec![
            pair("CREATE_IN_PROGRESS", ""),
            pair("CREATE_IN_PROGRESS", "Resource creation Initiated"),
            pair(
                "CREATE_IN_PROGRESS",
                "Received SUCCESS signal with UniqueId a"
            ),
            pair(
                "CREATE_IN_PROGRESS",
                "Received SUCCESS signal with UniqueId b"
            ),
            pair("CREATE_COMPLETE", ""),
        ]
    );
    // Once created it waits for nothing: a signal is refused.
    let late = cairn(&s, &["signal", "cp", "W", "--id", "c"]);
    assert_eq!(late.code(), 1);
    assert!(
        late.stderr()
            .contains("Resource W is in CREATE_COMPLETE state and cannot be signaled"),
        "{}",
        late.stderr()
    );
    let missing = cairn(&s, &["signal", "cp", "Nope", "--id", "c"]);
    assert!(
        missing
            .stderr()
            .contains("Resource Nope does not exist for stack cp"),
        "{}",
        missing.stderr()
    );
}

/// A group's CreationPolicy: its members signal the group; with
/// MinSuccessfulInstancesPercent 50, one failure of two is tolerated…
/// and two are not.
#[test]
fn creation_policy_on_an_instance_group_counts_its_members_signals() {
    let s = scratch();
    let body = |name: &str| {
        format!(
            "Resources:
  Config:
    Type: Cairn::Group::LaunchConfiguration
    Properties:
      MemberType: Cairn::Test::Resource
      MemberProperties: {{Value: {name}}}
  Web:
    Type: Cairn::Group::InstanceGroup
    CreationPolicy:
      ResourceSignal: {{Count: 2, Timeout: PT2M}}
      AutoScalingCreationPolicy: {{MinSuccessfulInstancesPercent: 50}}
    Properties:
      LaunchConfigurationName: !Ref Config
      Size: 2
"
        )
    };
    let mut deploy = spawn_deploy(&s, "grp", &body("v1"), &[]);
    wait_until_waiting(&s, "grp", "Web");
    for (id, st) in [("member-0", "FAILURE"), ("member-1", "SUCCESS")] {
        let run = cairn(&s, &["signal", "grp", "Web", "--id", id, "--status", st]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    assert!(
        deploy.wait().expect("deploy ends").success(),
        "{}",
        s.spawned_stderr()
    );
    assert_eq!(status(&s, "grp"), "CREATE_COMPLETE");

    let mut deploy = spawn_deploy(&s, "grp2", &body("v2"), &[]);
    wait_until_waiting(&s, "grp2", "Web");
    for id in ["member-0", "member-1"] {
        let run = cairn(
            &s,
            &["signal", "grp2", "Web", "--id", id, "--status", "FAILURE"],
        );
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    assert!(!deploy.wait().expect("deploy ends").success());
    let failed = events(&s, "grp2")
        .into_iter()
        .find(|e| e["LogicalResourceId"] == "Web" && e["ResourceStatus"] == "CREATE_FAILED")
        .expect("Web failed");
    assert_eq!(
        failed["ResourceStatusReason"],
        "Received 2 FAILURE signal(s) out of 2. Unable to satisfy 50% MinSuccessfulInstancesPercent requirement"
    );
    assert_eq!(status(&s, "grp2"), "ROLLBACK_COMPLETE");
}

/// The engine is SIGKILLed while a resource waits; a signal sent while no
/// Cairn runs is kept, and the next command's resume counts it.
#[test]
fn a_signal_sent_while_cairn_is_down_is_counted_after_the_resume() {
    let s = scratch();
    let body = "Resources:\n  Box:\n    Type: Cairn::Test::Resource\n    CreationPolicy:\n      ResourceSignal: {Timeout: PT5M}\n    Properties: {Value: boxed}\n";
    let mut deploy = spawn_deploy(&s, "down", body, &[]);
    wait_until_waiting(&s, "down", "Box");
    std::thread::sleep(Duration::from_millis(500));
    deploy.kill().expect("SIGKILL");
    let _ = deploy.wait();
    // (Any command but `cairn signal` would resume the create now.)

    let sent = cairn(&s, &["signal", "down", "Box", "--id", "while-down"]);
    assert_eq!(sent.code(), 0, "{}", sent.stderr());
    // Any command resumes the create; the wait finds the signal.
    let list = cairn(&s, &["list", "--output", "json"]);
    assert!(
        list.stderr().contains("resumed the interrupted operation"),
        "{}",
        list.stderr()
    );
    assert_eq!(status(&s, "down"), "CREATE_COMPLETE");
    let reasons: Vec<String> = events(&s, "down")
        .iter()
        .filter(|e| e["LogicalResourceId"] == "Box")
        .map(|e| {
            format!(
                "{} {}",
                e["ResourceStatus"].as_str().unwrap_or_default(),
                e["ResourceStatusReason"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        reasons,
        vec![
            "CREATE_IN_PROGRESS ",
            "CREATE_IN_PROGRESS Resource creation Initiated",
            "CREATE_IN_PROGRESS Received SUCCESS signal with UniqueId while-down",
            "CREATE_COMPLETE ",
        ]
    );
    // One backing file: the resumed create did not make a second one.
    assert_eq!(s.resource_files().len(), 1);
}

/// TimeoutInMinutes: a create still waiting at the limit fails with
/// CloudFormation's texts and rolls back.
#[test]
fn a_create_past_its_timeout_fails_at_the_limit() {
    let s = scratch();
    let started = Instant::now();
    let run = crate::update::deploy(
        &s,
        "late",
        "Resources:\n  Quick:\n    Type: Cairn::Test::Resource\n    Properties: {Value: a}\n  Slow:\n    Type: Cairn::Test::Resource\n    DependsOn: Quick\n    CreationPolicy:\n      ResourceSignal: {Timeout: PT10M}\n    Properties: {Value: b}\n",
        &["--timeout-minutes", "1"],
    );
    let took = started.elapsed();
    assert_eq!(run.code(), 1);
    assert!(
        took >= Duration::from_secs(60) && took < Duration::from_secs(90),
        "{took:?}"
    );
    assert!(
        run.stderr().contains("stack late is ROLLBACK_COMPLETE: Stack creation time exceeded the specified timeout. Rollback requested by user."),
        "{}",
        run.stderr()
    );
    let made = |logical: &str| {
        sequence_after(&s, "late", 0)
            .into_iter()
            .find(|e| e.0 == logical && !e.3.is_empty())
            .map(|e| e.3)
            .unwrap_or_default()
    };
    let (slow, quick) = (made("Slow"), made("Quick"));
    let tail: Vec<_> = sequence_after(&s, "late", 0)
        .into_iter()
        .skip_while(|e| e.1 != "CREATE_FAILED")
        .collect();
    let mut expected = vec![
        ev(
            "Slow",
            "CREATE_FAILED",
            "Resource creation cancelled",
            &slow,
        ),
        ev(
            "late",
            "ROLLBACK_IN_PROGRESS",
            "Stack creation time exceeded the specified timeout. Rollback requested by user.",
            "",
        ),
        ev("Slow", "DELETE_IN_PROGRESS", "", &slow),
        ev("Slow", "DELETE_COMPLETE", "", &slow),
        ev("Quick", "DELETE_IN_PROGRESS", "", &quick),
        ev("Quick", "DELETE_COMPLETE", "", &quick),
        ev("late", "ROLLBACK_COMPLETE", "", ""),
    ];
    assert_eq!(tail, std::mem::take(&mut expected));
    assert!(s.resource_files().is_empty());
}
