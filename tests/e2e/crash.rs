//! SIGKILL the engine mid-operation; the next command must finish the job.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Scratch;

fn events_json(s: &Scratch, stack: &str) -> Vec<Value> {
    let run = s.cairn(&["events", stack, "--output", "json"]);
    run.json()["StackEvents"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits until some event satisfies `pred` (the deploy is still running).
fn wait_for(s: &Scratch, stack: &str, what: &str, pred: impl Fn(&Value) -> bool) {
    let start = Instant::now();
    // Generous: other tests compile plugin libraries alongside; this returns
    // as soon as the event is there. Polled gently: every poll is a process
    // that opens the state file too.
    let mut last = String::new();
    while start.elapsed() < Duration::from_secs(120) {
        let run = s.cairn(&["events", stack, "--output", "json"]);
        if run.code() == 0
            && run.json()["StackEvents"]
                .as_array()
                .is_some_and(|l| l.iter().any(&pred))
        {
            return;
        }
        last = format!("{}{}", run.stdout(), run.stderr());
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "timed out waiting for {what}; the last `cairn events`: {last}\nthe background run's stderr:\n{}",
        s.spawned_stderr()
    );
}

fn spawn_deploy(s: &Scratch, stack: &str, template: &std::path::Path) -> std::process::Child {
    s.spawn_cairn(&["deploy", stack, template.to_str().unwrap_or_default()])
}

#[test]
fn sigkill_during_create_is_resumed_by_the_next_command() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n  B:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref A, WaitSeconds: 1.5}\n  C: {Type: Cairn::Test::Resource, DependsOn: B}\n",
    );
    let mut child = spawn_deploy(&s, "crashy", &t);
    wait_for(&s, "crashy", "B to be in flight", |e| {
        e["LogicalResourceId"] == "B" && e["ResourceStatusReason"] == "Resource creation Initiated"
    });
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    // Any command resumes the operation: B's create is re-issued with the same
    // request id (the provider returns the same resource), C is created.
    let run = s.cairn(&["list", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("resumed the interrupted operation"),
        "{}",
        run.stderr()
    );
    assert_eq!(
        run.json()["StackSummaries"][0]["StackStatus"],
        "CREATE_COMPLETE"
    );

    let res = s.cairn(&["resources", "crashy", "--output", "json"]).json();
    let mut owned: Vec<String> = res["StackResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}.json", r["PhysicalResourceId"].as_str().unwrap()))
        .collect();
    owned.sort();
    assert_eq!(owned.len(), 3);
    assert_eq!(
        s.resource_files(),
        owned,
        "every file belongs to the stack, none is leaked"
    );
    let b_created = events_json(&s, "crashy")
        .iter()
        .filter(|e| e["LogicalResourceId"] == "B" && e["ResourceStatus"] == "CREATE_COMPLETE")
        .count();
    assert_eq!(b_created, 1);
    assert_eq!(s.cairn(&["delete", "crashy"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

#[test]
fn sigkill_during_rollback_is_resumed_by_the_next_command() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: slow-a, WaitSeconds: 1.0}}\n  B:\n    Type: Cairn::Test::Resource\n    DependsOn: A\n    Properties: {Fail: create}\n",
    );
    let mut child = spawn_deploy(&s, "rb", &t);
    wait_for(&s, "rb", "A's delete during rollback", |e| {
        e["LogicalResourceId"] == "A" && e["ResourceStatus"] == "DELETE_IN_PROGRESS"
    });
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // A's delete was in flight (the provider removes the file at once and then
    // takes WaitSeconds to "complete"); the next command re-issues it, the
    // provider answers NotFound, which counts as deleted.

    let run = s.cairn(&["describe", "rb", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("resumed the interrupted operation"),
        "the rollback was still in progress when killed: {}",
        run.stderr()
    );
    assert_eq!(run.json()["Stacks"][0]["StackStatus"], "ROLLBACK_COMPLETE");
    let a_deleted = events_json(&s, "rb")
        .iter()
        .filter(|e| e["LogicalResourceId"] == "A" && e["ResourceStatus"] == "DELETE_COMPLETE")
        .count();
    assert_eq!(a_deleted, 1);
    assert!(
        s.resource_files().is_empty(),
        "the rollback finished deleting A"
    );
}

#[test]
fn sigkill_during_an_update_is_resumed_by_the_next_command() {
    let s = Scratch::new();
    let v1 = s.write(
        "v1.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a-1}}\n  B: {Type: Cairn::Test::Resource, Properties: {Value: !Ref A}}\n",
    );
    assert_eq!(s.cairn(&["deploy", "up", v1.to_str().unwrap()]).code(), 0);
    let v2 = s.write(
        "v2.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a-2, WaitSeconds: 1.5}}\n  B: {Type: Cairn::Test::Resource, Properties: {Value: !Ref A}}\n",
    );
    let mut child = spawn_deploy(&s, "up", &v2);
    wait_for(&s, "up", "A's replacement to be in flight", |e| {
        e["LogicalResourceId"] == "A"
            && e["ResourceStatus"] == "UPDATE_IN_PROGRESS"
            && e["ResourceStatusReason"] == "Resource creation Initiated"
    });
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    let run = s.cairn(&["describe", "up", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stderr().contains("resumed the interrupted operation"));
    assert_eq!(run.json()["Stacks"][0]["StackStatus"], "UPDATE_COMPLETE");
    let b = s.cairn(&["resources", "up", "--output", "json"]).json();
    let b_physical = b["StackResources"][1]["PhysicalResourceId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The replacement finished with the same request id (one a-2), B followed
    // it, and the cleanup removed a-1.
    let mut expected = vec!["a-2.json".to_string(), format!("{b_physical}.json")];
    expected.sort();
    assert_eq!(s.resource_files(), expected);
    let a_complete = events_json(&s, "up")
        .iter()
        .filter(|e| e["LogicalResourceId"] == "A" && e["ResourceStatus"] == "UPDATE_COMPLETE")
        .count();
    assert_eq!(a_complete, 1);
}
