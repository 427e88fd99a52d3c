//! Instance groups through the real binary: members of `Cairn::Test::Resource`
//! (one backing file each, so the test can count what exists at any moment)
//! and of a webhook handler; rolling updates, resizes, failures, health, a
//! SIGKILL mid-rollout.

use std::time::{Duration, Instant};

use crate::support::Scratch;
use crate::update::{cairn, deploy, events, file, status};

/// A scratch dir whose config makes cleanup retries and health waits short.
fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        "[engine]\ncleanup_attempts = 2\ncleanup_backoff_seconds = 0.05\nhealth_timeout_seconds = 1\n",
    );
    s
}

/// A launch configuration of test resources (Value = `version`, plus
/// `member_extra` properties) and an InstanceGroup `Web` of `size` with
/// `policy` (YAML under `UpdatePolicy:`, or empty for none).
fn template(version: &str, size: u32, policy: &str, member_extra: &str) -> String {
    let policy = if policy.is_empty() {
        String::new()
    } else {
        format!("    UpdatePolicy:\n      RollingUpdate: {policy}\n")
    };
    format!(
        "Resources:
  WebConfig:
    Type: Cairn::Group::LaunchConfiguration
    Properties:
      MemberType: Cairn::Test::Resource
      MemberProperties: {{Value: {version}{member_extra}}}
  Web:
    Type: Cairn::Group::InstanceGroup
{policy}    Properties:
      LaunchConfigurationName: !Ref WebConfig
      Size: {size}
Outputs:
  Names:
    Value: !Join [',', !GetAtt Web.MemberNames]
  Ids:
    Value: !Join [',', !GetAtt Web.MemberIds]
"
    )
}

/// (name, physical id) of the group's members, as `cairn resources` lists them.
fn members(s: &Scratch, stack: &str) -> Vec<(String, String)> {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.json()["StackResources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|r| r["GroupResourceId"] == "Web")
        .map(|r| {
            assert_eq!(r["ResourceStatus"], "CREATE_COMPLETE", "{r}");
            (
                r["LogicalResourceId"].as_str().unwrap_or_default().into(),
                r["PhysicalResourceId"].as_str().unwrap_or_default().into(),
            )
        })
        .collect()
}

fn names(list: &[(String, String)]) -> Vec<&str> {
    list.iter().map(|(n, _)| n.as_str()).collect()
}

/// The Value property in each member's backing file, in member order.
fn values(s: &Scratch, stack: &str) -> Vec<String> {
    members(s, stack)
        .iter()
        .map(|(_, p)| {
            file(s, p)["Properties"]["Value"]
                .as_str()
                .unwrap_or("<no file>")
                .to_string()
        })
        .collect()
}

/// Every backing file is a member of the group (nothing leaked).
fn no_leaks(s: &Scratch, stack: &str) {
    let mut owned: Vec<String> = members(s, stack)
        .iter()
        .map(|(_, p)| format!("{p}.json"))
        .collect();
    owned.sort();
    assert_eq!(s.resource_files(), owned);
}

fn output(s: &Scratch, stack: &str, key: &str) -> String {
    let run = cairn(s, &["outputs", stack, "--output", "json"]);
    run.json()["Outputs"]
        .as_array()
        .and_then(|l| l.iter().find(|o| o["OutputKey"] == key).cloned())
        .and_then(|o| o["OutputValue"].as_str().map(String::from))
        .unwrap_or_default()
}

/// (logical id, status, reason, seconds since midnight) of the events after
/// the first `skip`, the stack's own included.
pub(crate) fn sequence(
    s: &Scratch,
    stack: &str,
    skip: usize,
) -> Vec<(String, String, String, f64)> {
    events(s, stack)
        .iter()
        .skip(skip)
        .map(|e| {
            let t = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                t("LogicalResourceId"),
                t("ResourceStatus"),
                t("ResourceStatusReason"),
                seconds(&t("Timestamp")),
            )
        })
        .collect()
}

/// Seconds since midnight of an RFC 3339 UTC timestamp (`…T20:35:18.207Z`).
fn seconds(ts: &str) -> f64 {
    let time = ts
        .split('T')
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches('Z');
    time.split(':')
        .map(|p| p.parse::<f64>().unwrap_or(0.0))
        .fold(0.0, |acc, p| acc * 60.0 + p)
}

fn spawn_deploy(s: &Scratch, stack: &str, body: &str) -> std::process::Child {
    let path = s.write(&format!("{stack}-next.yaml"), body);
    s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        stack,
        path.to_str().unwrap_or_default(),
    ])
}

fn position(seq: &[(String, String, String, f64)], logical: &str, status: &str) -> usize {
    seq.iter()
        .position(|(l, st, _, _)| l == logical && st == status)
        .unwrap_or_else(|| panic!("no {status} event of {logical} in {seq:#?}"))
}

#[test]
fn a_rolling_update_creates_each_batch_before_deleting_and_keeps_the_minimum_in_service() {
    let s = scratch();
    let policy = "{MinInstancesInService: 3, MaxBatchSize: 2, PauseTime: PT1S}";
    let run = deploy(
        &s,
        "web",
        &template("v1", 4, policy, ", WaitSeconds: 0.3"),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        names(&members(&s, "web")),
        ["Web-0", "Web-1", "Web-2", "Web-3"]
    );
    assert_eq!(output(&s, "web", "Names"), "Web-0,Web-1,Web-2,Web-3");
    let before = events(&s, "web").len();

    // Roll to v2 while sampling what exists every few milliseconds.
    let mut child = spawn_deploy(&s, "web", &template("v2", 4, policy, ", WaitSeconds: 0.3"));
    let mut samples = Vec::new();
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        samples.push(s.resource_files().len());
        assert!(started.elapsed() < Duration::from_secs(60), "update hangs");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(child.wait().expect("exit").success());
    assert_eq!(status(&s, "web"), "UPDATE_COMPLETE");
    assert!(samples.len() > 50, "too few samples: {}", samples.len());
    // Never fewer than MinInstancesInService (in fact never fewer than the
    // group's size: new members come first), and at most one batch extra.
    let (low, high) = (
        samples.iter().copied().min().unwrap_or(0),
        samples.iter().copied().max().unwrap_or(0),
    );
    assert!(
        low >= 3,
        "fewer than MinInstancesInService members: {samples:?}"
    );
    assert_eq!((low, high), (4, 6), "{samples:?}");

    let seq = sequence(&s, "web", before);
    let batch = |n: u32, create: &str, delete: &str| {
        format!("Rolling update batch {n} of 2: creating {create}, then deleting {delete}")
    };
    let b1 = seq
        .iter()
        .position(|(l, _, r, _)| l == "Web" && *r == batch(1, "Web-4, Web-5", "Web-0, Web-1"))
        .expect("batch 1 event");
    let b2 = seq
        .iter()
        .position(|(l, _, r, _)| l == "Web" && *r == batch(2, "Web-6, Web-7", "Web-2, Web-3"))
        .expect("batch 2 event");
    // Each batch: its new members are created before any old one is deleted.
    for (start, end, new, old) in [
        (b1, b2, ["Web-4", "Web-5"], ["Web-0", "Web-1"]),
        (b2, seq.len(), ["Web-6", "Web-7"], ["Web-2", "Web-3"]),
    ] {
        let part = &seq[start..end];
        let last_created = new
            .iter()
            .map(|n| position(part, n, "CREATE_COMPLETE"))
            .max();
        let first_deleting = old
            .iter()
            .map(|n| position(part, n, "DELETE_IN_PROGRESS"))
            .min();
        assert!(last_created < first_deleting, "{part:#?}");
        for n in old {
            position(part, n, "DELETE_COMPLETE");
        }
    }
    // PauseTime PT1S between the batches.
    let deleted = seq[..b2]
        .iter()
        .filter(|(_, st, _, _)| st == "DELETE_COMPLETE")
        .map(|(_, _, _, t)| *t)
        .fold(0.0, f64::max);
    assert!(
        seq[b2].3 - deleted >= 0.99,
        "no pause: {:?}",
        (deleted, seq[b2].3)
    );
    // The stack's own statuses.
    let stack: Vec<&str> = seq
        .iter()
        .filter(|(l, ..)| l == "web")
        .map(|(_, st, _, _)| st.as_str())
        .collect();
    assert_eq!(
        stack,
        [
            "UPDATE_IN_PROGRESS",
            "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
            "UPDATE_COMPLETE"
        ]
    );

    assert_eq!(
        names(&members(&s, "web")),
        ["Web-4", "Web-5", "Web-6", "Web-7"]
    );
    assert_eq!(values(&s, "web"), ["v2"; 4]);
    assert_eq!(output(&s, "web", "Names"), "Web-4,Web-5,Web-6,Web-7");
    let ids: Vec<String> = members(&s, "web").into_iter().map(|(_, p)| p).collect();
    assert_eq!(output(&s, "web", "Ids"), ids.join(","));
    no_leaks(&s, "web");
    assert_eq!(cairn(&s, &["delete", "web"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

#[test]
fn resizes_keep_members_and_a_policy_alone_replaces_nothing() {
    let s = scratch();
    // CloudFormation's type names (aliases of Cairn's group types).
    let asg = |version: &str, desired: u32, policy: &str| {
        let policy = if policy.is_empty() {
            String::new()
        } else {
            format!("    UpdatePolicy:\n      AutoScalingRollingUpdate: {policy}\n")
        };
        format!(
            "Resources:
  WebConfig:
    Type: AWS::AutoScaling::LaunchConfiguration
    Properties:
      MemberType: Cairn::Test::Resource
      MemberProperties: {{Value: {version}}}
  Web:
    Type: AWS::AutoScaling::AutoScalingGroup
{policy}    Properties:
      LaunchConfigurationName: !Ref WebConfig
      MinSize: 1
      MaxSize: 6
      DesiredCapacity: {desired}
"
        )
    };
    assert_eq!(deploy(&s, "asg", &asg("v1", 2, ""), &[]).code(), 0);
    let first = members(&s, "asg");
    assert_eq!(names(&first), ["Web-0", "Web-1"]);

    // Grow: appended after the highest index, the others untouched.
    let n = events(&s, "asg").len();
    assert_eq!(deploy(&s, "asg", &asg("v1", 4, ""), &[]).code(), 0);
    let grown = members(&s, "asg");
    assert_eq!(names(&grown), ["Web-0", "Web-1", "Web-2", "Web-3"]);
    assert_eq!(grown[..2], first[..]);
    let touched: Vec<(String, String)> = sequence(&s, "asg", n)
        .into_iter()
        .filter(|(l, ..)| l.starts_with("Web-"))
        .map(|(l, st, ..)| (l, st))
        .collect();
    assert!(
        touched
            .iter()
            .all(|(l, st)| (l == "Web-2" || l == "Web-3") && st.starts_with("CREATE")),
        "{touched:?}"
    );

    // Shrink: the highest index goes.
    assert_eq!(deploy(&s, "asg", &asg("v1", 3, ""), &[]).code(), 0);
    assert_eq!(members(&s, "asg"), grown[..3]);

    // A new launch configuration without an UpdatePolicy reaches only new
    // members (CloudFormation's behaviour).
    let n = events(&s, "asg").len();
    assert_eq!(deploy(&s, "asg", &asg("v2", 3, ""), &[]).code(), 0);
    assert!(sequence(&s, "asg", n)
        .iter()
        .all(|(l, ..)| !l.starts_with("Web-")));
    assert_eq!(members(&s, "asg"), grown[..3]);
    assert_eq!(values(&s, "asg"), ["v1", "v1", "v1"]);
    assert_eq!(deploy(&s, "asg", &asg("v2", 4, ""), &[]).code(), 0);
    assert_eq!(values(&s, "asg"), ["v1", "v1", "v1", "v2"]);
    let kept = members(&s, "asg");

    // Adding an UpdatePolicy alone: a Modify of scope UpdatePolicy, no member touched.
    let policy = "{MaxBatchSize: 4}";
    let plan = s.write("policy.yaml", &asg("v2", 4, policy));
    let run = cairn(
        &s,
        &[
            "plan",
            "asg",
            plan.to_str().unwrap_or_default(),
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let changes = run.json()["Changes"].clone();
    assert_eq!(changes.as_array().map(Vec::len), Some(1), "{changes}");
    assert_eq!(changes[0]["ResourceChange"]["LogicalResourceId"], "Web");
    assert_eq!(
        changes[0]["ResourceChange"]["Scope"],
        serde_json::json!(["UpdatePolicy"])
    );
    let n = events(&s, "asg").len();
    assert_eq!(deploy(&s, "asg", &asg("v2", 4, policy), &[]).code(), 0);
    let seq = sequence(&s, "asg", n);
    assert!(seq.iter().all(|(l, ..)| !l.starts_with("Web-")), "{seq:#?}");
    assert!(seq
        .iter()
        .any(|(l, st, ..)| l == "Web" && st == "UPDATE_COMPLETE"));
    assert_eq!(members(&s, "asg"), kept);

    // With the policy in place, the next launch configuration replaces all
    // four in one batch: 4 names do not fit below Web-0, so after Web-3.
    assert_eq!(deploy(&s, "asg", &asg("v3", 4, policy), &[]).code(), 0);
    assert_eq!(
        names(&members(&s, "asg")),
        ["Web-4", "Web-5", "Web-6", "Web-7"]
    );
    assert_eq!(values(&s, "asg"), ["v3"; 4]);
    no_leaks(&s, "asg");
    assert_eq!(cairn(&s, &["delete", "asg"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

#[test]
fn a_failure_in_the_second_batch_rolls_the_group_back_without_leaks() {
    let s = scratch();
    let policy = "{MinInstancesInService: 1, MaxBatchSize: 2}";
    assert_eq!(
        deploy(&s, "roll", &template("v1", 4, policy, ""), &[]).code(),
        0
    );
    let n = events(&s, "roll").len();
    let failing = template("v2", 4, policy, ", Fail: create, FailFor: [Web-6]");
    let run = deploy(&s, "roll", &failing, &[]);
    assert_ne!(run.code(), 0);
    assert_eq!(status(&s, "roll"), "UPDATE_ROLLBACK_COMPLETE");
    let seq = sequence(&s, "roll", n);
    let stack: Vec<(&str, &str)> = seq
        .iter()
        .filter(|(l, ..)| l == "roll")
        .map(|(_, st, r, _)| (st.as_str(), r.as_str()))
        .collect();
    assert_eq!(
        stack,
        [
            ("UPDATE_IN_PROGRESS", "User Initiated"),
            (
                "UPDATE_ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to update: [Web]."
            ),
            ("UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", ""),
            ("UPDATE_ROLLBACK_COMPLETE", ""),
        ]
    );
    let group: Vec<(&str, &str)> = seq
        .iter()
        .filter(|(l, ..)| l == "Web")
        .map(|(_, st, r, _)| (st.as_str(), r.as_str()))
        .collect();
    assert_eq!(
        group,
        [
            ("UPDATE_IN_PROGRESS", ""),
            ("UPDATE_IN_PROGRESS", "Rolling update batch 1 of 2: creating Web-4, Web-5, then deleting Web-0, Web-1"),
            ("UPDATE_IN_PROGRESS", "Rolling update batch 2 of 2: creating Web-6, Web-7, then deleting Web-2, Web-3"),
            ("UPDATE_FAILED", "Rolling update of Web failed in batch 2 of 2: Web-6: Cairn::Test::Resource Web-6 was told to fail on create"),
            ("UPDATE_IN_PROGRESS", ""),
            // The rollback moves the two members batch 1 made back under the
            // same policy, with the free names below Web-2.
            ("UPDATE_IN_PROGRESS", "Rolling update batch 1 of 1: creating Web-0, Web-1, then deleting Web-4, Web-5"),
            ("UPDATE_COMPLETE", ""),
        ]
    );
    // The failed batch was undone: Web-6 (failed) and Web-7 (made) are gone.
    for n in ["Web-6", "Web-7"] {
        position(&seq, n, "DELETE_COMPLETE");
    }
    assert_eq!(
        names(&members(&s, "roll")),
        ["Web-0", "Web-1", "Web-2", "Web-3"]
    );
    assert_eq!(values(&s, "roll"), ["v1"; 4]);
    no_leaks(&s, "roll");
    assert_eq!(cairn(&s, &["delete", "roll"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

#[test]
fn unhealthy_members_stop_the_rollout_and_the_minimum_is_checked() {
    let s = scratch();
    let policy = "{MinInstancesInService: 2, MaxBatchSize: 1}";
    assert_eq!(
        deploy(&s, "health", &template("v1", 2, policy, ""), &[]).code(),
        0
    );
    let before = members(&s, "health");

    // A new member that never reports healthy (health_timeout_seconds = 1).
    let n = events(&s, "health").len();
    let run = deploy(
        &s,
        "health",
        &template("v2", 2, policy, ", Unhealthy: true"),
        &[],
    );
    assert_ne!(run.code(), 0);
    assert_eq!(status(&s, "health"), "UPDATE_ROLLBACK_COMPLETE");
    let seq = sequence(&s, "health", n);
    let failed = seq
        .iter()
        .find(|(l, st, ..)| l == "Web" && st == "UPDATE_FAILED")
        .map(|(.., r, _)| r.clone())
        .unwrap_or_default();
    let web2 = seq
        .iter()
        .find(|(l, st, ..)| l == "Web-2" && st == "CREATE_COMPLETE")
        .map(|_| ())
        .is_some();
    assert!(web2, "{seq:#?}");
    assert!(
        failed.starts_with("Rolling update of Web failed in batch 1 of 2: Web-2 did not report healthy within 1 seconds: Cairn::Test::Resource health-Web-2-")
            && failed.ends_with(" is marked Unhealthy"),
        "{failed}"
    );
    assert_eq!(members(&s, "health"), before);
    no_leaks(&s, "health");

    // An old member that is unhealthy: replacing Web-0 would leave one
    // healthy member (the new one), fewer than MinInstancesInService 2.
    s.edit_backing_file(&before[1].1, |r| r["Properties"]["Unhealthy"] = true.into());
    let n = events(&s, "health").len();
    let run = deploy(&s, "health", &template("v3", 2, policy, ""), &[]);
    assert_ne!(run.code(), 0);
    let failed = sequence(&s, "health", n)
        .into_iter()
        .find(|(l, st, ..)| l == "Web" && st == "UPDATE_FAILED")
        .map(|(.., r, _)| r)
        .unwrap_or_default();
    assert_eq!(
        failed,
        "Rolling update of Web failed in batch 1 of 2: deleting Web-0 would leave 1 healthy members, fewer than MinInstancesInService 2"
    );
    assert_eq!(status(&s, "health"), "UPDATE_ROLLBACK_COMPLETE");
    assert_eq!(members(&s, "health"), before);
    no_leaks(&s, "health");
}

#[test]
fn sigkill_mid_rollout_resumes_from_the_stored_batch() {
    let s = scratch();
    let policy = "{MaxBatchSize: 1}";
    let slow = ", WaitSeconds: 0.8";
    assert_eq!(
        deploy(&s, "kill", &template("v1", 4, policy, slow), &[]).code(),
        0
    );
    let n = events(&s, "kill").len();
    let mut child = spawn_deploy(&s, "kill", &template("v2", 4, policy, slow));
    let started = Instant::now();
    loop {
        let seq = sequence(&s, "kill", n);
        if seq
            .iter()
            .any(|(l, _, r, _)| l == "Web-5" && r == "Resource creation Initiated")
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "batch 2 never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();

    // The next command resumes: Web-5's create is re-issued with its request
    // id, the rollout continues from batch 2.
    let run = cairn(&s, &["describe", "kill", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("resumed the interrupted operation"),
        "{}",
        run.stderr()
    );
    assert_eq!(status(&s, "kill"), "UPDATE_COMPLETE");
    assert_eq!(
        names(&members(&s, "kill")),
        ["Web-4", "Web-5", "Web-6", "Web-7"]
    );
    assert_eq!(values(&s, "kill"), ["v2"; 4]);
    no_leaks(&s, "kill");
    let seq = sequence(&s, "kill", n);
    for (name, status) in [
        ("Web-4", "CREATE_COMPLETE"),
        ("Web-5", "CREATE_COMPLETE"),
        ("Web-6", "CREATE_COMPLETE"),
        ("Web-7", "CREATE_COMPLETE"),
        ("Web-0", "DELETE_COMPLETE"),
        ("Web-1", "DELETE_COMPLETE"),
        ("Web-2", "DELETE_COMPLETE"),
        ("Web-3", "DELETE_COMPLETE"),
    ] {
        let times = seq
            .iter()
            .filter(|(l, st, ..)| l == name && st == status)
            .count();
        assert_eq!(times, 1, "{name} {status}: {seq:#?}");
    }
    for b in 1..=4 {
        let started = seq
            .iter()
            .filter(|(l, _, r, _)| {
                l == "Web" && r.starts_with(&format!("Rolling update batch {b} of 4:"))
            })
            .count();
        // Batch 2 was running when the process died: the resume continues
        // it without announcing it again (finding 9 of the resource-call
        // protocol issue: a step is never reported twice).
        assert_eq!(started, 1, "batch {b}: {seq:#?}");
    }
}

#[test]
fn a_group_of_webhook_members_rolls_the_same_way() {
    let (s, h) = crate::webhooks::with_handler();
    let arn = crate::webhooks::ARN;
    let t = |version: &str| {
        format!(
            "Resources:
  WebConfig:
    Type: Cairn::Group::LaunchConfiguration
    Properties:
      MemberType: Custom::Widget
      MemberProperties: {{ServiceToken: {arn}, Version: {version}}}
  Web:
    Type: Cairn::Group::InstanceGroup
    UpdatePolicy:
      RollingUpdate: {{MinInstancesInService: 2, MaxBatchSize: 1}}
    Properties:
      LaunchConfigurationName: !Ref WebConfig
      Size: 2
"
        )
    };
    let run = deploy(&s, "hooks", &t("1"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let first = members(&s, "hooks");
    assert_eq!(names(&first), ["Web-0", "Web-1"]);
    let run = deploy(&s, "hooks", &t("2"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let second = members(&s, "hooks");
    assert_eq!(names(&second), ["Web-2", "Web-3"]);
    let mut calls = h.calls();
    let call = |t: &str, l: &str, p: &str| (t.to_string(), l.to_string(), p.to_string());
    let creates: Vec<_> = calls.drain(..2).collect();
    assert!(creates.iter().all(|(t, ..)| t == "Create"), "{creates:?}");
    // One member per batch: create the new one, then delete the old one.
    assert_eq!(
        calls,
        [
            call("Create", "Web-2", "-"),
            call("Delete", "Web-0", &first[0].1),
            call("Create", "Web-3", "-"),
            call("Delete", "Web-1", &first[1].1),
        ]
    );
    assert_eq!(cairn(&s, &["delete", "hooks"]).code(), 0);
    let mut deletes: Vec<_> = h.calls().split_off(6);
    deletes.sort();
    assert_eq!(
        deletes,
        [
            call("Delete", "Web-2", &second[0].1),
            call("Delete", "Web-3", &second[1].1)
        ]
    );
}

/// Finding 3 of the resource-call protocol issue: group members never
/// recovered their create, so the command that resumed a killed deploy
/// sent each member's Create to the handler again (same RequestId) and a
/// handler written for AWS made a second resource for each. Now a resumed
/// member learns the outcome of the Create in flight (here: it waits for
/// the handler's late response, which reaches the new process at the
/// public URL), and the handler sees every request exactly once.
#[test]
fn a_killed_create_of_handler_members_sends_each_create_once() {
    let (s, h) = crate::webhooks::with_handler();
    crate::webhooks::listen_publicly(&s);
    let arn = crate::webhooks::ARN;
    let t = s.write(
        "t.yaml",
        &format!(
            "Resources:
  Config:
    Type: Cairn::Group::LaunchConfiguration
    Properties:
      MemberType: Custom::Thing
      MemberProperties: {{ServiceToken: {arn}, Delay: \"3\"}}
  Web:
    Type: Cairn::Group::InstanceGroup
    Properties:
      LaunchConfigurationName: !Ref Config
      Size: 3
"
        ),
    );
    let mut child = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "things",
        t.to_str().unwrap_or_default(),
    ]);
    // The three Creates reached the handler, which answers 3 s later.
    crate::webhooks::wait_for_requests(&s, &h, 3);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // The next command resumes the create and waits for the responses.
    let run = cairn(&s, &["list", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "things"), "CREATE_COMPLETE");
    let creates: Vec<serde_json::Value> = h
        .requests()
        .into_iter()
        .map(|r| r["event"].clone())
        .filter(|e| e["RequestType"] == "Create")
        .collect();
    let mut ids: Vec<&str> = creates
        .iter()
        .filter_map(|e| e["RequestId"].as_str())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(creates.len(), 3, "{creates:#?}");
    assert_eq!(ids.len(), 3, "a Create was sent twice: {creates:#?}");
    let made: Vec<String> = members(&s, "things").into_iter().map(|m| m.1).collect();
    assert_eq!(made.len(), 3);
    assert_eq!(cairn(&s, &["delete", "things"]).code(), 0);
    let mut deleted: Vec<String> = h
        .calls()
        .into_iter()
        .filter(|c| c.0 == "Delete")
        .map(|c| c.2)
        .collect();
    deleted.sort();
    let mut made = made;
    made.sort();
    assert_eq!(deleted, made, "each member deleted once");
}

#[test]
fn a_member_that_fails_to_create_rolls_the_stack_back_and_deletes_the_others() {
    let s = scratch();
    let run = deploy(
        &s,
        "bad",
        &template("v1", 3, "", ", Fail: create, FailFor: [Web-1]"),
        &[],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "bad"), "ROLLBACK_COMPLETE");
    let seq = sequence(&s, "bad", 0);
    let failed = seq
        .iter()
        .find(|(l, st, ..)| l == "Web" && st == "CREATE_FAILED")
        .map(|(.., r, _)| r.as_str());
    assert_eq!(
        failed,
        Some("Web could not grow to 3 members: Web-1: Cairn::Test::Resource Web-1 was told to fail on create")
    );
    // The members that were made are deleted with the group.
    for n in ["Web-0", "Web-2"] {
        assert!(position(&seq, n, "CREATE_COMPLETE") < position(&seq, n, "DELETE_COMPLETE"));
    }
    position(&seq, "Web-1", "DELETE_COMPLETE");
    assert!(s.resource_files().is_empty());
    let run = cairn(&s, &["resources", "bad", "--output", "json"]);
    let listed = run.json()["StackResources"].clone();
    assert!(
        listed
            .as_array()
            .is_some_and(|l| l.iter().all(|r| r["GroupResourceId"].is_null())),
        "{listed}"
    );
}

#[test]
fn cancelling_mid_rollout_rolls_the_group_back() {
    let s = scratch();
    let policy = "{MaxBatchSize: 1}";
    // Long enough that the cancel lands while Web-4 is being created.
    let slow = ", WaitSeconds: 1.5";
    assert_eq!(
        deploy(&s, "cnl", &template("v1", 3, policy, slow), &[]).code(),
        0
    );
    let before = members(&s, "cnl");
    let n = events(&s, "cnl").len();
    let mut child = spawn_deploy(&s, "cnl", &template("v2", 3, policy, slow));
    let started = Instant::now();
    while !sequence(&s, "cnl", n)
        .iter()
        .any(|(l, _, r, _)| l == "Web-4" && r == "Resource creation Initiated")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "batch 2 never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = cairn(&s, &["cancel-update", "cnl"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let _ = child.wait();
    assert_eq!(status(&s, "cnl"), "UPDATE_ROLLBACK_COMPLETE");
    let seq = sequence(&s, "cnl", n);
    assert!(
        seq.contains(&(
            "Web".into(),
            "UPDATE_FAILED".into(),
            "Resource update cancelled".into(),
            seq.iter()
                .find(|(l, st, ..)| l == "Web" && st == "UPDATE_FAILED")
                .map(|e| e.3)
                .unwrap_or_default()
        )),
        "{seq:#?}"
    );
    // Batch 1 had moved Web-0 to Web-3 (v2); the rollback moves it back
    // under the same policy, to the free name below Web-1.
    let after = members(&s, "cnl");
    assert_eq!(names(&after), ["Web-0", "Web-1", "Web-2"]);
    assert_eq!(after[1..], before[1..]);
    assert_eq!(values(&s, "cnl"), ["v1"; 3]);
    no_leaks(&s, "cnl");
}

#[test]
fn a_bad_pause_time_is_refused_before_anything_runs() {
    let s = scratch();
    let run = deploy(&s, "pt", &template("v1", 2, "{PauseTime: PT2H}", ""), &[]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(
            "Template error: PauseTime of Web: Maximum PauseTime is 1 hour. (at /Resources/Web/UpdatePolicy, line 10"
        ),
        "{}",
        run.stderr()
    );
    let run = deploy(&s, "pt", &template("v1", 2, "{PauseTime: '30'}", ""), &[]);
    assert!(
        run.stderr().contains(
            "PauseTime of Web: Only ISO 8601 duration format of the form PT#H#M#S is supported."
        ),
        "{}",
        run.stderr()
    );
    assert!(s.resource_files().is_empty());
    assert_eq!(
        cairn(&s, &["describe", "pt"]).code(),
        1,
        "no stack was made"
    );
}

#[test]
fn drift_reports_missing_modified_and_unhealthy_members() {
    let s = scratch();
    assert_eq!(deploy(&s, "dr", &template("v1", 3, "", ""), &[]).code(), 0);
    let m = members(&s, "dr");
    let data = s.dir.path().join("cairn-state.db.resources");
    std::fs::remove_file(crate::support::backing_file(&data, &m[0].1))
        .expect("delete Web-0's file");
    s.edit_backing_file(&m[1].1, |r| r["Properties"]["Value"] = "hacked".into());
    s.edit_backing_file(&m[2].1, |r| r["Properties"]["Unhealthy"] = true.into());
    let run = cairn(&s, &["drift", "dr", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let d = run.json();
    assert_eq!(d["StackDriftStatus"], "DRIFTED");
    let drifts = d["StackResourceDrifts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let of = |l: &str| {
        drifts
            .iter()
            .find(|r| r["LogicalResourceId"] == l)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(of("WebConfig")["StackResourceDriftStatus"], "IN_SYNC");
    let web = of("Web");
    assert_eq!(web["StackResourceDriftStatus"], "MODIFIED");
    assert_eq!(
        web["PropertyDifferences"],
        serde_json::json!([
            {"PropertyPath": "/Members/Web-0", "ExpectedValue": m[0].1, "ActualValue": "null", "DifferenceType": "REMOVE"},
            {"PropertyPath": "/Members/Web-1/Properties/Value", "ExpectedValue": "v1", "ActualValue": "hacked", "DifferenceType": "NOT_EQUAL"},
            {"PropertyPath": "/Members/Web-2/Health", "ExpectedValue": "HEALTHY",
             "ActualValue": format!("UNHEALTHY: Cairn::Test::Resource {} is marked Unhealthy", m[2].1), "DifferenceType": "NOT_EQUAL"},
        ])
    );
}

/// WaitOnResourceSignals: each batch's new member signals the group before
/// the batch deletes what it replaces; a batch whose signal does not come
/// within PauseTime fails the update, which rolls back.
#[test]
fn a_rolling_update_waits_for_each_batchs_signals() {
    let s = scratch();
    let policy = "{MaxBatchSize: 1, MinInstancesInService: 1, WaitOnResourceSignals: true, PauseTime: PTSECS}";
    assert_eq!(
        deploy(
            &s,
            "sig",
            &template("v1", 2, &policy.replace("SECS", "60S"), ""),
            &[]
        )
        .code(),
        0
    );
    let before = events(&s, "sig").len();
    let path = s.write(
        "sig-v2.yaml",
        &template("v2", 2, &policy.replace("SECS", "60S"), ""),
    );
    let mut update = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "sig",
        path.to_str().unwrap_or_default(),
    ]);
    // One signal per batch, sent once the batch's new member exists.
    for (batch, id) in [(1, "web-2"), (2, "web-3")] {
        let started = Instant::now();
        loop {
            let reasons: Vec<String> = events(&s, "sig")
                .iter()
                .skip(before)
                .filter_map(|e| e["ResourceStatusReason"].as_str().map(String::from))
                .collect();
            if reasons
                .iter()
                .any(|r| r.starts_with(&format!("Rolling update batch {batch} of 2")))
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "batch {batch} never started: {reasons:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The batch waits: nothing is deleted without the signal.
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(
            s.resource_files().len(),
            3,
            "batch {batch} went on without its signal"
        );
        let run = cairn(&s, &["signal", "sig", "Web", "--id", id]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    assert!(
        update.wait().expect("deploy ends").success(),
        "{}",
        s.spawned_stderr()
    );
    assert_eq!(values(&s, "sig"), vec!["v2", "v2"]);
    let reasons: Vec<String> = events(&s, "sig")
        .iter()
        .skip(before)
        .filter(|e| e["LogicalResourceId"] == "Web")
        .filter_map(|e| e["ResourceStatusReason"].as_str().map(String::from))
        .filter(|r| r.starts_with("Received"))
        .collect();
    assert_eq!(
        reasons,
        vec![
            "Received SUCCESS signal with UniqueId web-2",
            "Received SUCCESS signal with UniqueId web-3"
        ]
    );

    // No signal within PauseTime: the batch fails and the update rolls back.
    let run = deploy(
        &s,
        "sig",
        &template("v3", 2, &policy.replace("SECS", "2S"), ""),
        &[],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Rolling update of Web failed in batch 1 of 2: Failed to receive 1 resource signal(s) for the current batch.  Each resource signal timeout is counted as a FAILURE."),
        "{}",
        run.stderr()
    );
    assert_eq!(status(&s, "sig"), "UPDATE_ROLLBACK_COMPLETE");
    assert_eq!(values(&s, "sig"), vec!["v2", "v2"]);
    no_leaks(&s, "sig");
}
