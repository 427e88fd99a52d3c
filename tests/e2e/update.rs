//! Stack update through the real binary: seed 000's runs with
//! `Cairn::Test::Resource` (Value/Tags mutable, Name CreateOnly, Fixed
//! Immutable).

use serde_json::Value;

use crate::support::Scratch;

/// A scratch dir with a config whose cleanup retries are quick.
pub(crate) fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        "[engine]\ncleanup_attempts = 3\ncleanup_backoff_seconds = 0.05\n",
    );
    s
}

pub(crate) fn cairn(s: &Scratch, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["--config", "cairn.toml"];
    all.extend_from_slice(args);
    s.cairn(&all)
}

pub(crate) fn events(s: &Scratch, stack: &str) -> Vec<Value> {
    let run = cairn(s, &["events", stack, "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut list = run.json()["StackEvents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    list.reverse();
    list
}

pub(crate) type Ev = (String, String, String, String);

/// (logical id, status, reason, physical id) of the events after the first
/// `skip`, oldest first; the stack's own physical id is left out.
pub(crate) fn sequence_after(s: &Scratch, stack: &str, skip: usize) -> Vec<Ev> {
    events(s, stack)
        .iter()
        .skip(skip)
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            let physical = if e["ResourceType"] == "AWS::CloudFormation::Stack" {
                String::new()
            } else {
                text("PhysicalResourceId")
            };
            (
                text("LogicalResourceId"),
                text("ResourceStatus"),
                text("ResourceStatusReason"),
                physical,
            )
        })
        .collect()
}

pub(crate) fn ev(l: &str, s: &str, r: &str, p: &str) -> Ev {
    (l.into(), s.into(), r.into(), p.into())
}

pub(crate) fn deploy(s: &Scratch, stack: &str, body: &str, extra: &[&str]) -> crate::support::Run {
    let path = s.write(&format!("{stack}-{}.yaml", rand_name(body)), body);
    let mut args = vec!["deploy", stack, path.to_str().unwrap_or_default()];
    args.extend_from_slice(extra);
    cairn(s, &args)
}

fn rand_name(body: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    format!("{:x}", h.finish())
}

pub(crate) fn physical(s: &Scratch, stack: &str, logical: &str) -> String {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    run.json()["StackResources"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == logical))
        .and_then(|r| r["PhysicalResourceId"].as_str())
        .unwrap_or_default()
        .to_string()
}

pub(crate) fn file(s: &Scratch, physical: &str) -> Value {
    let p = crate::support::backing_file(&s.dir.path().join("cairn-state.db.resources"), physical);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default()).unwrap_or(Value::Null)
}

pub(crate) fn count(s: &Scratch, stack: &str) -> usize {
    events(s, stack).len()
}

pub(crate) fn status(s: &Scratch, stack: &str) -> String {
    let run = cairn(s, &["describe", stack, "--output", "json"]);
    run.json()["Stacks"][0]["StackStatus"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const BASE: &str = "AWSTemplateFormatVersion: '2010-09-09'
Description: base
Metadata: {Top: 1}
Parameters:
  P: {Type: String, Default: x}
  Unused: {Type: String, Default: u}
  Same1: {Type: String, Default: same}
  Same2: {Type: String, Default: same}
Mappings:
  M: {K: {V: one}}
  Unused: {K: {V: one}}
Conditions:
  Yes: !Equals [a, a]
  Spare: !Equals [a, b]
Resources:
  A:
    Type: Cairn::Test::Resource
    DeletionPolicy: Delete
    CreationPolicy: {ResourceSignal: {Timeout: PT5M}}
    Properties: {Value: !Ref P, Tags: !FindInMap [M, K, V], Description: !Ref Same1}
  B:
    Type: Cairn::Test::Resource
    DependsOn: A
    Properties: {Value: b}
Outputs:
  O: {Value: !Ref A}
";

#[test]
fn changes_that_are_not_updates_are_refused() {
    // Seed 000 runs 1, 11–18, 21–24, 27–29, and the 3rd's state check.
    let s = scratch();
    // A's CreationPolicy makes its create wait for a signal (run 27 is
    // about changing the policy later, which is no update).
    let path = s.write("noop-base.yaml", BASE);
    let mut first = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "noop",
        path.to_str().unwrap_or_default(),
    ]);
    let started = std::time::Instant::now();
    while cairn(&s, &["signal", "noop", "A", "--id", "ready"]).code() != 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "A never waited for its signal"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        first.wait().expect("deploy ends").success(),
        "{}",
        s.spawned_stderr()
    );
    let variants = [
        ("same template and parameters (run 1)", BASE.to_string()),
        ("whitespace and key order (run 11)", BASE.replace("  B:\n    Type: Cairn::Test::Resource\n    DependsOn: A\n    Properties: {Value: b}", "  B:\n    Properties:   {Value:   b}\n    DependsOn: A\n    Type: Cairn::Test::Resource")),
        ("Description (run 12)", BASE.replace("Description: base", "Description: other")),
        ("AWSTemplateFormatVersion (run 13)", BASE.replace("AWSTemplateFormatVersion: '2010-09-09'\n", "")),
        ("Outputs (run 14)", BASE.replace("O: {Value: !Ref A}", "O2: {Value: changed}")),
        ("an unused mapping (run 18)", BASE.replace("Unused: {K: {V: one}}", "Unused: {K: {V: two}}")),
        ("a Ref to another parameter with the same value (run 17)", BASE.replace("Description: !Ref Same1", "Description: !Ref Same2")),
        ("an unused condition (run 21)", BASE.replace("Spare: !Equals [a, b]", "Spare: !Equals [a, a]")),
        ("top-level Metadata (runs 22–24)", BASE.replace("Metadata: {Top: 1}\n", "")),
        ("CreationPolicy (run 27)", BASE.replace("    CreationPolicy: {ResourceSignal: {Timeout: PT5M}}\n", "")),
        ("DependsOn (runs 28, 29)", BASE.replace("    DependsOn: A\n", "")),
        ("DeletionPolicy alone", BASE.replace("DeletionPolicy: Delete", "DeletionPolicy: Retain")),
    ];
    for (what, body) in variants {
        let run = deploy(&s, "noop", &body, &[]);
        assert_eq!(run.code(), 1, "{what}: {}", run.stderr());
        assert!(
            run.stderr()
                .trim_end()
                .ends_with("No updates are to be performed."),
            "{what}: {}",
            run.stderr()
        );
    }
    // An unused parameter's new value (run 16).
    let run = deploy(&s, "noop", BASE, &["-p", "Unused=v"]);
    assert!(
        run.stderr().contains("No updates are to be performed."),
        "{}",
        run.stderr()
    );
    // A used mapping value is an update (run 19).
    let before = count(&s, "noop");
    let run = deploy(
        &s,
        "noop",
        &BASE.replace("M: {K: {V: one}}", "M: {K: {V: two}}"),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "noop", before)
            .into_iter()
            .map(|e| (e.0, e.1))
            .collect::<Vec<_>>(),
        vec![
            ("noop".into(), "UPDATE_IN_PROGRESS".into()),
            ("A".into(), "UPDATE_IN_PROGRESS".into()),
            ("A".into(), "UPDATE_COMPLETE".into()),
            ("noop".into(), "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS".into()),
            ("noop".into(), "UPDATE_COMPLETE".into()),
        ]
    );
    // Changing a resource's type is refused before anything changes.
    let run = deploy(
        &s,
        "noop",
        &BASE.replace(
            "  B:\n    Type: Cairn::Test::Resource\n    DependsOn: A\n    Properties: {Value: b}",
            "  B:\n    Type: Cairn::Random::String\n    Properties: {Length: 4}",
        ),
        &[],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Update of resource type is not permitted. The new template modifies resource type of the following resources: [B]"),
        "{}",
        run.stderr()
    );
    assert_eq!(status(&s, "noop"), "UPDATE_COMPLETE");
}

#[test]
fn add_remove_update_in_place_and_outputs() {
    // Runs 4, 5, 15: Instance1 removed, Instance2 updated in place, Instance3 added.
    let s = scratch();
    let v1 = "Resources:\n  I1: {Type: Cairn::Test::Resource, Properties: {Name: i1}}\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: small}}\nOutputs:\n  O: {Value: !GetAtt I2.Value}\n";
    let v2 = "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: large}}\n  I3: {Type: Cairn::Test::Resource, DependsOn: I2, Properties: {Name: i3}}\nOutputs:\n  O: {Value: !GetAtt I2.Value}\n";
    assert_eq!(deploy(&s, "st", v1, &[]).code(), 0);
    let before = count(&s, "st");
    let run = deploy(&s, "st", v2, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stdout().contains("stack st is UPDATE_COMPLETE"));
    assert_eq!(
        sequence_after(&s, "st", before),
        vec![
            ev("st", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("I2", "UPDATE_IN_PROGRESS", "", "i2"),
            ev("I2", "UPDATE_COMPLETE", "", "i2"),
            ev("I3", "CREATE_IN_PROGRESS", "", ""),
            ev(
                "I3",
                "CREATE_IN_PROGRESS",
                "Resource creation Initiated",
                ""
            ),
            ev("I3", "CREATE_COMPLETE", "", "i3"),
            ev("st", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("I1", "DELETE_IN_PROGRESS", "", "i1"),
            ev("I1", "DELETE_COMPLETE", "", "i1"),
            ev("st", "UPDATE_COMPLETE", "", ""),
        ]
    );
    assert_eq!(file(&s, "i2")["Properties"]["Value"], "large");
    assert_eq!(s.resource_files(), vec!["i2.json", "i3.json"]);
    let res = cairn(&s, &["resources", "st", "--output", "json"]).json();
    let rows: Vec<(String, String)> = res["StackResources"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|r| {
                    (
                        r["LogicalResourceId"].as_str().unwrap_or_default().into(),
                        r["ResourceStatus"].as_str().unwrap_or_default().into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        rows,
        vec![
            ("I2".into(), "UPDATE_COMPLETE".into()),
            ("I3".into(), "CREATE_COMPLETE".into())
        ]
    );
    let out = cairn(&s, &["outputs", "st", "--output", "json"]).json();
    assert_eq!(out["Outputs"][0]["OutputValue"], "large");
    let template = cairn(&s, &["template", "st"]);
    assert_eq!(template.stdout().trim_end(), v2.trim_end());
}

#[test]
fn replacement_cascades_only_to_changed_dependents() {
    // Runs 6, 7, 9: a CreateOnly change replaces; dependents whose evaluated
    // properties change follow, by their own schema. Run 8/10: an in-place
    // change that keeps the Ref leaves dependents alone.
    let s = scratch();
    let v1 = "Parameters:\n  Cidr: {Type: String, Default: 10.0.0.0/16}\nResources:\n  Vpc: {Type: Cairn::Test::Resource, Properties: {Name: !Sub 'vpc-${Cidr}', Value: !Ref Cidr}}\n  Subnet: {Type: Cairn::Test::Resource, Properties: {Name: !Sub '${Vpc}-subnet'}}\n  Policy: {Type: Cairn::Test::Resource, Properties: {Name: policy, Value: !Ref Vpc}}\n  Other: {Type: Cairn::Test::Resource, Properties: {Name: other, Value: !GetAtt Vpc.Arn}}\n";
    let v1 = v1.replace("10.0.0.0/16", "a");
    assert_eq!(deploy(&s, "cas", &v1, &[]).code(), 0);
    let before = count(&s, "cas");
    let run = deploy(&s, "cas", &v1, &["-p", "Cidr=b"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seq = sequence_after(&s, "cas", before);
    let of = |l: &str| -> Vec<Ev> { seq.iter().filter(|e| e.0 == l).cloned().collect() };
    const REPL: &str =
        "Requested update requires the creation of a new physical resource; hence creating one.";
    assert_eq!(
        of("Vpc"),
        vec![
            ev("Vpc", "UPDATE_IN_PROGRESS", REPL, ""),
            ev(
                "Vpc",
                "UPDATE_IN_PROGRESS",
                "Resource creation Initiated",
                ""
            ),
            ev("Vpc", "UPDATE_COMPLETE", "", "vpc-b"),
            ev("Vpc", "DELETE_IN_PROGRESS", "", "vpc-a"),
            ev("Vpc", "DELETE_COMPLETE", "", "vpc-a"),
        ]
    );
    assert_eq!(
        of("Subnet"),
        vec![
            ev("Subnet", "UPDATE_IN_PROGRESS", REPL, ""),
            ev(
                "Subnet",
                "UPDATE_IN_PROGRESS",
                "Resource creation Initiated",
                ""
            ),
            ev("Subnet", "UPDATE_COMPLETE", "", "vpc-b-subnet"),
            ev("Subnet", "DELETE_IN_PROGRESS", "", "vpc-a-subnet"),
            ev("Subnet", "DELETE_COMPLETE", "", "vpc-a-subnet"),
        ]
    );
    // The Ref changed: updated in place, same physical id.
    assert_eq!(
        of("Policy"),
        vec![
            ev("Policy", "UPDATE_IN_PROGRESS", "", "policy"),
            ev("Policy", "UPDATE_COMPLETE", "", "policy"),
        ]
    );
    assert_eq!(file(&s, "policy")["Properties"]["Value"], "vpc-b");
    assert_eq!(of("Other").len(), 2, "its GetAtt changed too: {seq:?}");
    // Cleanup deletes old physical resources after everything that used them.
    let pos = |l: &str, st: &str| {
        seq.iter()
            .position(|e| e.0 == l && e.1 == st)
            .unwrap_or(usize::MAX)
    };
    assert!(pos("Subnet", "DELETE_COMPLETE") < pos("Vpc", "DELETE_IN_PROGRESS"));
    assert!(
        pos("cas", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS") < pos("Subnet", "DELETE_IN_PROGRESS")
    );
    assert_eq!(
        s.resource_files(),
        vec![
            "other.json",
            "policy.json",
            "vpc-b-subnet.json",
            "vpc-b.json"
        ]
    );

    // Run 8/10: Tags on Vpc only; nothing that refers to it changes.
    let before = count(&s, "cas");
    let v2 = v1.replace("Value: !Ref Cidr}", "Value: !Ref Cidr, Tags: [t]}");
    assert_eq!(deploy(&s, "cas", &v2, &["-p", "Cidr=b"]).code(), 0);
    let seq = sequence_after(&s, "cas", before);
    assert_eq!(
        seq.iter()
            .filter(|e| e.0 != "cas")
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            ev("Vpc", "UPDATE_IN_PROGRESS", "", "vpc-b"),
            ev("Vpc", "UPDATE_COMPLETE", "", "vpc-b"),
        ]
    );
}

#[test]
fn metadata_only_change_updates_without_a_provider_call() {
    // Run 26.
    let s = scratch();
    let v1 = "Resources:\n  I1:\n    Type: Cairn::Test::Resource\n    Metadata: {Config: 1}\n    Properties: {Name: meta}\n";
    assert_eq!(deploy(&s, "md", v1, &[]).code(), 0);
    let written = file(&s, "meta");
    let before = count(&s, "md");
    assert_eq!(
        deploy(&s, "md", &v1.replace("Config: 1", "Config: 2"), &[]).code(),
        0
    );
    assert_eq!(
        sequence_after(&s, "md", before),
        vec![
            ev("md", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("I1", "UPDATE_COMPLETE", "", "meta"),
            ev("md", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("md", "UPDATE_COMPLETE", "", ""),
        ]
    );
    assert_eq!(file(&s, "meta"), written, "the provider was not called");
}

#[test]
fn immutable_property_fails_the_update_and_rolls_back() {
    // Run 32.
    let s = scratch();
    let v1 = "Resources:\n  W: {Type: Cairn::Test::Resource, Properties: {Name: w, Fixed: 300}}\n";
    assert_eq!(deploy(&s, "imm", v1, &[]).code(), 0);
    let before = count(&s, "imm");
    let run = deploy(&s, "imm", &v1.replace("300", "450"), &[]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().starts_with("error: stack imm is UPDATE_ROLLBACK_COMPLETE: The following resource(s) failed to update: [W]."),
        "{}",
        run.stderr()
    );
    assert_eq!(
        sequence_after(&s, "imm", before),
        vec![
            ev("imm", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev(
                "W",
                "UPDATE_FAILED",
                "Update of property Fixed of type Cairn::Test::Resource is not supported",
                "w"
            ),
            ev(
                "imm",
                "UPDATE_ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to update: [W].",
                ""
            ),
            ev("W", "UPDATE_COMPLETE", "", "w"),
            ev(
                "imm",
                "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
                "",
                ""
            ),
            ev("imm", "UPDATE_ROLLBACK_COMPLETE", "", ""),
        ]
    );
    // After the rollback the stack shows the old template (seed 004).
    let template = cairn(&s, &["template", "imm"]);
    assert!(template.stdout().contains("Fixed: 300"));
    // UPDATE_ROLLBACK_COMPLETE can be updated again.
    assert_eq!(
        deploy(&s, "imm", &v1.replace("w, ", "w, Value: v, "), &[]).code(),
        0
    );
}

#[test]
fn rollback_restores_updates_replacements_and_deletes_what_the_update_made() {
    // Run 33: I2 updated in place, I3 replaced, I4 added, I5 fails to create;
    // rollback updates I2 back (provider gets OLD as properties), restores
    // I3's original, deletes I4, I5 and I3's replacement; I1 never deleted.
    let s = scratch();
    let v1 = "Resources:\n  I1: {Type: Cairn::Test::Resource, Properties: {Name: i1}}\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: micro}}\n  I3: {Type: Cairn::Test::Resource, Properties: {Name: i3-a}}\n";
    let v2 = "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: small}}\n  I3: {Type: Cairn::Test::Resource, Properties: {Name: i3-b}}\n  I4: {Type: Cairn::Test::Resource, DependsOn: [I2, I3], Properties: {Name: i4}}\n  I5: {Type: Cairn::Test::Resource, Properties: {Name: i5, Value: !Ref I4, Fail: create, FailMessage: 'Invalid id: \"i-d8d4a266\" (expecting \"ami-...\")'}}\n";
    assert_eq!(deploy(&s, "rb", v1, &[]).code(), 0);
    let before = count(&s, "rb");
    let run = deploy(&s, "rb", v2, &[]);
    assert_eq!(run.code(), 1);
    let seq = sequence_after(&s, "rb", before);
    let of = |l: &str| -> Vec<(String, String)> {
        seq.iter()
            .filter(|e| e.0 == l)
            .map(|e| (e.1.clone(), e.3.clone()))
            .collect()
    };
    let st = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        of("rb").into_iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![
            "UPDATE_IN_PROGRESS",
            "UPDATE_ROLLBACK_IN_PROGRESS",
            "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
            "UPDATE_ROLLBACK_COMPLETE"
        ]
    );
    assert!(seq.contains(&ev(
        "rb",
        "UPDATE_ROLLBACK_IN_PROGRESS",
        "The following resource(s) failed to create: [I5].",
        ""
    )));
    assert_eq!(
        of("I2"),
        st(&[
            ("UPDATE_IN_PROGRESS", "i2"),
            ("UPDATE_COMPLETE", "i2"),
            ("UPDATE_IN_PROGRESS", "i2"),
            ("UPDATE_COMPLETE", "i2")
        ])
    );
    assert_eq!(
        of("I3"),
        st(&[
            ("UPDATE_IN_PROGRESS", ""),
            ("UPDATE_IN_PROGRESS", ""),
            ("UPDATE_COMPLETE", "i3-b"),
            ("UPDATE_COMPLETE", "i3-a"),
            ("DELETE_IN_PROGRESS", "i3-b"),
            ("DELETE_COMPLETE", "i3-b")
        ])
    );
    assert_eq!(
        of("I4"),
        st(&[
            ("CREATE_IN_PROGRESS", ""),
            ("CREATE_IN_PROGRESS", ""),
            ("CREATE_COMPLETE", "i4"),
            ("DELETE_IN_PROGRESS", "i4"),
            ("DELETE_COMPLETE", "i4")
        ])
    );
    assert!(of("I1").is_empty(), "I1 is never touched");
    // I2's provider got the old properties back: its file says micro again.
    assert_eq!(file(&s, "i2")["Properties"]["Value"], "micro");
    assert_eq!(
        s.resource_files(),
        vec!["i1.json", "i2.json", "i3-a.json"],
        "nothing leaked, nothing lost"
    );
    let res = cairn(&s, &["resources", "rb", "--output", "json"]).json();
    let ids: Vec<&str> = res["StackResources"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|r| r["PhysicalResourceId"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, vec!["i1", "i2", "i3-a"]);
    assert!(cairn(&s, &["template", "rb"]).stdout().contains("I1:"));
}

#[test]
fn a_failing_rollback_update_leaves_update_rollback_failed() {
    // Run 36: I2 is updated, I4 fails, and updating I2 back fails.
    let s = scratch();
    let v1 = "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: micro, Fail: update, FailMessage: \"This instance 'i-da702864' is not in a state from which it can be stopped.\"}}\n";
    let v2 = "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: small}}\n  I4: {Type: Cairn::Test::Resource, DependsOn: I2, Properties: {Name: i4, Fail: create}}\n";
    assert_eq!(deploy(&s, "rf", v1, &[]).code(), 0);
    let before = count(&s, "rf");
    let run = deploy(&s, "rf", v2, &[]);
    assert_eq!(run.code(), 1);
    let seq = sequence_after(&s, "rf", before);
    assert_eq!(
        seq.last(),
        Some(&ev(
            "rf",
            "UPDATE_ROLLBACK_FAILED",
            "The following resource(s) failed to update: [I2].",
            ""
        ))
    );
    assert!(seq.contains(&ev(
        "I2",
        "UPDATE_FAILED",
        "This instance 'i-da702864' is not in a state from which it can be stopped.",
        "i2"
    )));
    assert_eq!(status(&s, "rf"), "UPDATE_ROLLBACK_FAILED");
    let again = deploy(&s, "rf", v2, &[]);
    assert!(again
        .stderr()
        .contains("is in UPDATE_ROLLBACK_FAILED state and can not be updated."));

    // continue-rollback --skip I2: marked rolled back without a provider call,
    // then the rollback's cleanup deletes what the update created.
    let before = count(&s, "rf");
    let run = cairn(&s, &["continue-rollback", "rf", "--skip", "I2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "rf", before),
        vec![
            ev(
                "I2",
                "UPDATE_COMPLETE",
                "Skipped by continue-rollback",
                "i2"
            ),
            ev("rf", "UPDATE_ROLLBACK_IN_PROGRESS", "User Initiated", ""),
            ev("rf", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("I4", "DELETE_IN_PROGRESS", "", ""),
            ev("I4", "DELETE_COMPLETE", "", ""),
            ev("rf", "UPDATE_ROLLBACK_COMPLETE", "", ""),
        ]
    );
    // The provider was not asked: the file still holds the update's values.
    assert_eq!(file(&s, "i2")["Properties"]["Value"], "small");
    assert_eq!(s.resource_files(), vec!["i2.json"]);
    let again = cairn(&s, &["continue-rollback", "rf"]);
    assert!(again
        .stderr()
        .contains("is in UPDATE_ROLLBACK_COMPLETE state and can not continue update rollback"));
}

#[test]
fn deleting_a_stack_in_update_rollback_failed_deletes_every_physical_resource() {
    // A is replaced (a2 made) and restored by the rollback, which abandons a2;
    // C's update back fails, so the stack stops in UPDATE_ROLLBACK_FAILED
    // with a2 known only to A's journal. Deleting the stack must delete a2.
    let s = scratch();
    let v1 = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a1}}\n  C: {Type: Cairn::Test::Resource, Properties: {Name: c, Value: micro, Fail: update}}\n";
    let v2 = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a2}}\n  C: {Type: Cairn::Test::Resource, Properties: {Name: c, Value: small}}\n  B: {Type: Cairn::Test::Resource, DependsOn: [A, C], Properties: {Name: b, Fail: create}}\n";
    assert_eq!(deploy(&s, "lf", v1, &[]).code(), 0);
    assert_eq!(deploy(&s, "lf", v2, &[]).code(), 1);
    assert_eq!(status(&s, "lf"), "UPDATE_ROLLBACK_FAILED");
    assert_eq!(s.resource_files(), vec!["a1.json", "a2.json", "c.json"]);
    let run = cairn(&s, &["delete", "lf"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.resource_files(),
        Vec::<String>::new(),
        "a physical resource leaked"
    );
}

#[test]
fn cleanup_failures_are_retried_then_disassociated() {
    // Run 37: SG1 cannot be deleted; three attempts, then the update still
    // succeeds and SG1 leaves the stack.
    let s = scratch();
    let v1 = "Resources:\n  SG1: {Type: Cairn::Test::Resource, Properties: {Name: sg1, Fail: delete, FailMessage: resource sg-0da0f86b has a dependent object}}\n  SG2: {Type: Cairn::Test::Resource, Properties: {Name: sg2}}\n";
    let v2 = "Resources:\n  SG2: {Type: Cairn::Test::Resource, Properties: {Name: sg2}}\n  SG3: {Type: Cairn::Test::Resource, Properties: {Name: sg3}}\n";
    assert_eq!(deploy(&s, "cl", v1, &[]).code(), 0);
    let before = count(&s, "cl");
    let run = deploy(&s, "cl", v2, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    const DEP: &str = "resource sg-0da0f86b has a dependent object";
    assert_eq!(
        sequence_after(&s, "cl", before),
        vec![
            ev("cl", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("SG3", "CREATE_IN_PROGRESS", "", ""),
            ev(
                "SG3",
                "CREATE_IN_PROGRESS",
                "Resource creation Initiated",
                ""
            ),
            ev("SG3", "CREATE_COMPLETE", "", "sg3"),
            ev("cl", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("SG1", "DELETE_IN_PROGRESS", "", "sg1"),
            ev("SG1", "DELETE_FAILED", DEP, "sg1"),
            ev("SG1", "DELETE_IN_PROGRESS", "", "sg1"),
            ev("SG1", "DELETE_FAILED", DEP, "sg1"),
            ev("SG1", "DELETE_IN_PROGRESS", "", "sg1"),
            ev("SG1", "DELETE_FAILED", DEP, "sg1"),
            ev(
                "cl",
                "UPDATE_COMPLETE",
                "Update successful. One or more resources could not be deleted.",
                ""
            ),
        ]
    );
    // Disassociated: no longer a resource of the stack; its file remains.
    assert!(physical(&s, "cl", "SG1").is_empty());
    assert_eq!(s.resource_files(), vec!["sg1.json", "sg2.json", "sg3.json"]);
}

#[test]
fn rollback_cleanup_failures_are_disassociated_too() {
    // Run 38: SG3 is created, Instance3 fails; SG3 cannot be deleted in the
    // rollback's cleanup; the stack still ends UPDATE_ROLLBACK_COMPLETE.
    let s = scratch();
    let v1 = "Resources:\n  SG2: {Type: Cairn::Test::Resource, Properties: {Name: sg2}}\n";
    let v2 = "Resources:\n  SG2: {Type: Cairn::Test::Resource, Properties: {Name: sg2}}\n  SG3: {Type: Cairn::Test::Resource, Properties: {Name: sg3, Fail: delete}}\n  Instance3: {Type: Cairn::Test::Resource, DependsOn: SG3, Properties: {Name: i3, Fail: create}}\n";
    assert_eq!(deploy(&s, "rc", v1, &[]).code(), 0);
    let before = count(&s, "rc");
    assert_eq!(deploy(&s, "rc", v2, &[]).code(), 1);
    let seq = sequence_after(&s, "rc", before);
    assert_eq!(
        seq.last(),
        Some(&ev(
            "rc",
            "UPDATE_ROLLBACK_COMPLETE",
            "Update successful. One or more resources could not be deleted.",
            ""
        ))
    );
    assert_eq!(
        seq.iter()
            .filter(|e| e.0 == "SG3" && e.1 == "DELETE_FAILED")
            .count(),
        3
    );
    assert_eq!(physical(&s, "rc", "SG3"), "");
    assert_eq!(physical(&s, "rc", "Instance3"), "");
    assert_eq!(s.resource_files(), vec!["sg2.json", "sg3.json"]);
}

#[test]
fn a_failed_update_cancels_creates_in_flight() {
    // Run 34: I2's update fails while I3's create is in flight. I2 fails
    // 0.3 s into its call: failing at once, its failure could be recorded
    // before I3's create was, and I3 was then never started (nothing sent,
    // nothing to cancel), which is right but not this run.
    let s = scratch();
    let v1 =
        "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: micro}}\n";
    let v2 = "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: small, Fail: update, FailMessage: gone, WaitSeconds: 0.3}}\n  I3: {Type: Cairn::Test::Resource, Properties: {Name: i3, WaitSeconds: 1.5}}\n";
    assert_eq!(deploy(&s, "cx", v1, &[]).code(), 0);
    let before = count(&s, "cx");
    assert_eq!(deploy(&s, "cx", v2, &[]).code(), 1);
    let seq = sequence_after(&s, "cx", before);
    assert!(
        seq.contains(&ev(
            "I3",
            "CREATE_FAILED",
            "Resource creation cancelled",
            ""
        )),
        "{seq:?}"
    );
    assert!(seq.contains(&ev(
        "cx",
        "UPDATE_ROLLBACK_IN_PROGRESS",
        "The following resource(s) failed to create: [I3]. The following resource(s) failed to update: [I2].",
        ""
    )), "{seq:?}");
    assert_eq!(
        seq.last().map(|e| e.1.as_str()),
        Some("UPDATE_ROLLBACK_COMPLETE")
    );
    // I3's create had reached the provider: the rollback's cleanup deleted it.
    assert_eq!(s.resource_files(), vec!["i2.json"]);
    assert_eq!(file(&s, "i2")["Properties"]["Value"], "micro");
}

/// UPDATE_ROLLBACK_FAILED names the resources whose rollback failed and
/// counts those it never reached (they waited on a failed one), instead of
/// calling them all failed.
#[test]
fn update_rollback_failed_names_the_failures_and_counts_the_rest() {
    let s = scratch();
    let v1 = "Resources:\n  D1: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n  D2: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n  A: {Type: Cairn::Test::Resource, DependsOn: [D1, D2], Properties: {Value: a, Fail: update}}\n";
    let v2 = "Resources:\n  D1: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n  D2: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n  A: {Type: Cairn::Test::Resource, DependsOn: [D1, D2], Properties: {Value: b}}\n  Bad: {Type: Cairn::Test::Resource, DependsOn: A, Properties: {Fail: create}}\n";
    assert_eq!(deploy(&s, "rf", v1, &[]).code(), 0);
    let before = count(&s, "rf");
    assert_eq!(deploy(&s, "rf", v2, &[]).code(), 1);
    let seq = sequence_after(&s, "rf", before);
    assert_eq!(
        seq.last(),
        Some(&ev(
            "rf",
            "UPDATE_ROLLBACK_FAILED",
            "The following resource(s) failed to update: [A]. 2 other resource(s) were not rolled back.",
            ""
        ))
    );
}

/// Finding 5 of the resource-call protocol issue: the rollback of an update
/// deleted every resource the update added, whatever its DeletionPolicy.
/// Retain keeps it (DELETE_SKIPPED, the file stays); RetainExceptOnCreate
/// deletes it (its own creation is what rolls back).
#[test]
fn an_update_rollback_keeps_an_added_resource_whose_policy_retains_it() {
    let s = scratch();
    let one = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a-one}}\n";
    assert_eq!(deploy(&s, "keep", one, &[]).code(), 0);
    let two = format!(
        "{one}  Kept:\n    Type: Cairn::Test::Resource\n    DeletionPolicy: Retain\n    Properties: {{Name: kept}}\n  Gone:\n    Type: Cairn::Test::Resource\n    DeletionPolicy: RetainExceptOnCreate\n    Properties: {{Name: gone}}\n  Bad:\n    Type: Cairn::Test::Resource\n    DependsOn: [Kept, Gone]\n    Properties: {{Name: bad, Fail: create}}\n"
    );
    let run = deploy(&s, "keep", &two, &[]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_eq!(status(&s, "keep"), "UPDATE_ROLLBACK_COMPLETE");
    let seq = sequence_after(&s, "keep", 0);
    assert!(
        seq.contains(&ev("Kept", "DELETE_SKIPPED", "", "kept")),
        "{seq:#?}"
    );
    assert!(
        seq.contains(&ev("Gone", "DELETE_COMPLETE", "", "gone")),
        "{seq:#?}"
    );
    assert_eq!(s.resource_files(), ["a-one.json", "kept.json"]);
    assert_eq!(cairn(&s, &["delete", "keep"]).code(), 0);
    assert_eq!(s.resource_files(), ["kept.json"]);
}

/// Stack tags reach the providers (issue 31 point 4): every request
/// carries the stack's tags and CloudFormation's system tags; an update
/// that changes only the tags calls the providers that apply them
/// (`taggable`: the test resource) and no other (the random string), and
/// a change set shows those as Modify with Scope Tags.
#[test]
fn stack_tags_reach_taggable_providers() {
    let s = scratch();
    let body = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: tagged}}\n  R: {Type: Cairn::Random::String, Properties: {Length: 8}}\n";
    assert_eq!(deploy(&s, "tg", body, &["--tag", "team=a"]).code(), 0);
    let record = file(&s, "tagged");
    assert_eq!(record["Tags"], serde_json::json!({"team": "a"}));
    let id =
        cairn(&s, &["describe", "tg", "--output", "json"]).json()["Stacks"][0]["StackId"].clone();
    assert_eq!(
        record["SystemTags"],
        serde_json::json!({
            "aws:cloudformation:logical-id": "A",
            "aws:cloudformation:stack-id": id,
            "aws:cloudformation:stack-name": "tg",
        })
    );
    let random = physical(&s, "tg", "R");
    // The change set of a tag-only update: the taggable resource only.
    let path = s.write("tg.yaml", body);
    let plan = cairn(
        &s,
        &[
            "plan",
            "tg",
            path.to_str().unwrap_or_default(),
            "--tag",
            "team=b",
            "--output",
            "json",
        ],
    );
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    let changes = plan.json()["Changes"].clone();
    assert_eq!(changes.as_array().map(Vec::len), Some(1), "{changes}");
    let change = &changes[0]["ResourceChange"];
    assert_eq!(
        (
            change["Action"].clone(),
            change["LogicalResourceId"].clone(),
            change["Scope"].clone()
        ),
        (
            serde_json::json!("Modify"),
            serde_json::json!("A"),
            serde_json::json!(["Tags"])
        )
    );
    let before = count(&s, "tg");
    let run = deploy(&s, "tg", body, &["--tag", "team=b"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "tg", before),
        vec![
            ev("tg", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("A", "UPDATE_IN_PROGRESS", "", "tagged"),
            ev("A", "UPDATE_COMPLETE", "", "tagged"),
            ev("tg", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("tg", "UPDATE_COMPLETE", "", ""),
        ]
    );
    assert_eq!(file(&s, "tagged")["Tags"], serde_json::json!({"team": "b"}));
    assert_eq!(physical(&s, "tg", "R"), random);
}
