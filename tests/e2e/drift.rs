//! Drift detection through the real binary: built-in providers and a plugin
//! compare the live resources with what the template set.

use serde_json::{json, Value};

use crate::support::Scratch;
use crate::update::{cairn, deploy};

const TEMPLATE: &str = "Resources:\n  F: {Type: Cairn::Local::File, Properties: {Path: ./f.txt, Content: hello}}\n  T: {Type: Cairn::Test::Resource, Properties: {Name: t1, Value: v1}}\n  R: {Type: Cairn::Random::String, Properties: {Length: 8}}\n";

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write("cairn.toml", "");
    s
}

fn drift(s: &Scratch, args: &[&str]) -> Value {
    let mut all = vec!["drift"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let run = cairn(s, &all);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.json()
}

/// (LogicalResourceId, StackResourceDriftStatus, PropertyDifferences).
fn statuses(d: &Value) -> Vec<(String, String, Value)> {
    d["StackResourceDrifts"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|r| {
                    (
                        r["LogicalResourceId"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        r["StackResourceDriftStatus"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        r["PropertyDifferences"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn st(l: &str, s: &str, d: Value) -> (String, String, Value) {
    (l.into(), s.into(), d)
}

#[test]
fn edits_and_deletions_are_reported_per_property() {
    let s = scratch();
    assert_eq!(deploy(&s, "st", TEMPLATE, &[]).code(), 0);
    let d = drift(&s, &["st"]);
    assert_eq!(d["StackDriftStatus"], "IN_SYNC");
    assert_eq!(d["DetectionStatus"], "DETECTION_COMPLETE");
    assert_eq!(
        statuses(&d),
        [
            st("F", "IN_SYNC", json!([])),
            st("R", "NOT_CHECKED", json!([])),
            st("T", "IN_SYNC", json!([])),
        ]
    );
    let r = &d["StackResourceDrifts"][1];
    assert_eq!(
        r["DriftStatusReason"],
        "The provider of Cairn::Random::String does not support drift detection"
    );
    assert_eq!(r["ExpectedProperties"], "{\"Length\":8}");

    // Someone edits the file and the test resource's backing file.
    std::fs::write(s.dir.path().join("f.txt"), "bye").unwrap();
    let backing =
        crate::support::backing_file(&s.dir.path().join("cairn-state.db.resources"), "t1");
    let mut t: Value = serde_json::from_str(&std::fs::read_to_string(&backing).unwrap()).unwrap();
    t["Properties"]["Value"] = json!("v2");
    std::fs::write(&backing, t.to_string()).unwrap();
    let d = drift(&s, &["st"]);
    assert_eq!(d["StackDriftStatus"], "DRIFTED");
    assert_eq!(d["DriftedStackResourceCount"], 2);
    assert_eq!(
        statuses(&d),
        [
            st(
                "F",
                "MODIFIED",
                json!([{"PropertyPath": "/Content", "ExpectedValue": "hello", "ActualValue": "bye", "DifferenceType": "NOT_EQUAL"}])
            ),
            st("R", "NOT_CHECKED", json!([])),
            st(
                "T",
                "MODIFIED",
                json!([{"PropertyPath": "/Value", "ExpectedValue": "v1", "ActualValue": "v2", "DifferenceType": "NOT_EQUAL"}])
            ),
        ]
    );
    // The last detection is kept and shown again.
    let last = drift(&s, &["st", "--last"]);
    assert_eq!(last, d);

    // Deleted behind Cairn's back; only the resources asked for are checked.
    std::fs::remove_file(s.dir.path().join("f.txt")).unwrap();
    let d = drift(&s, &["st", "--resource", "F"]);
    assert_eq!(statuses(&d), [st("F", "DELETED", json!([]))]);
    assert_eq!(d["StackDriftStatus"], "DRIFTED");
    let run = cairn(&s, &["drift", "st", "--resource", "Nope"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Resource Nope does not exist for stack st"),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["drift", "missing"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Stack with id missing does not exist"),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_plugin_checks_drift_through_its_plugin_host() {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[[providers]]\nkind = \"dylib\"\npath = \"{}\"\n",
            crate::plugins::library("cairn_example_kv").display()
        ),
    );
    let body = "Resources:\n  K: {Type: Example::KV::Record, Properties: {Store: ./kv, Key: k, Value: one}}\n";
    assert_eq!(deploy(&s, "st", body, &[]).code(), 0);
    std::fs::write(s.dir.path().join("kv/k"), "two\n").unwrap();
    let d = drift(&s, &["st"]);
    assert_eq!(
        statuses(&d),
        [st(
            "K",
            "MODIFIED",
            json!([{"PropertyPath": "/Value", "ExpectedValue": "one", "ActualValue": "two", "DifferenceType": "NOT_EQUAL"}])
        )]
    );
    // The text form says the same.
    let run = cairn(&s, &["drift", "st", "--last"]);
    assert!(
        run.stdout()
            .contains("    /Value: expected \"one\", actual \"two\" (NOT_EQUAL)"),
        "{}",
        run.stdout()
    );
}
