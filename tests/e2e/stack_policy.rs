//! Stack policies through the real binary: `deploy --stack-policy`, `cairn
//! stack-policy`, an implicit replacement denied before the resource is
//! touched (the update rolls back), a removal denied by a type condition,
//! the change-set preview naming what would be denied,
//! `--stack-policy-during-update`, and the default deny of a policy that
//! allows one resource.

use crate::update::{cairn, deploy, physical, scratch, sequence_after, status};

const POLICY: &str = r#"{"Statement": [
  {"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"},
  {"Effect": "Deny", "Action": "Update:Replace", "Principal": "*", "Resource": "LogicalResourceId/Db*"},
  {"Effect": "Deny", "Action": "Update:Delete", "Principal": "*", "Resource": "*",
   "Condition": {"StringLike": {"ResourceType": ["Cairn::Local::*"]}}}
]}"#;

const ALLOW_ALL: &str = r#"{"Statement": [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}]}"#;

/// A, a database named after A (its Name is A's physical id, so a new A
/// replaces it too), and a local file (when `file`).
fn template(a: &str, db_value: &str, file: bool) -> String {
    let mut t = format!(
        "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {{Name: {a}}}\n  Db1:\n    Type: Cairn::Test::Resource\n    Properties:\n      Name: !Sub '${{A}}-db'\n      Value: {db_value}\n"
    );
    if file {
        t.push_str("  F:\n    Type: Cairn::Local::File\n    Properties: {Path: kept.txt, Content: hello}\n");
    }
    t
}

fn denied(action: &str, statement: &str, logical: &str) -> String {
    format!("Action denied by stack policy: {statement} does not allow [{action}] for resource [LogicalResourceId/{logical}];")
}

#[test]
fn a_stack_policy_denies_an_implicit_replacement_and_a_removal_and_the_update_rolls_back() {
    let s = scratch();
    let policy = s.write("policy.json", POLICY);
    let policy = policy.to_str().unwrap_or_default();
    let run = deploy(
        &s,
        "st",
        &template("a1", "x", true),
        &["--stack-policy", policy],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let shown = cairn(&s, &["stack-policy", "st", "--output", "json"]);
    assert_eq!(shown.json()["StackPolicyBody"], POLICY);
    assert_eq!(physical(&s, "st", "Db1"), "a1-db");

    // An in-place update of Db1 is allowed.
    let run = deploy(&s, "st", &template("a1", "y", true), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(crate::update::file(&s, "a1-db")["Properties"]["Value"], "y");

    // A new A would replace Db1 too (its Name follows A's id): the preview
    // says the policy denies it; the update replaces A, is refused at Db1
    // before Db1 is touched, and rolls back.
    let next = s.write("next.yaml", &template("a2", "y", true));
    let next = next.to_str().unwrap_or_default();
    let plan = cairn(&s, &["plan", "st", next, "--output", "json"]);
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    let changes = plan.json()["Changes"].clone();
    let marks: Vec<(String, String)> = changes
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let rc = &c["ResourceChange"];
            let text = |k: &str| rc[k].as_str().unwrap_or_default().to_string();
            (text("LogicalResourceId"), text("DeniedByStackPolicy"))
        })
        .collect();
    let db_denied = denied("Update:Replace", "Statement [#2]", "Db1");
    assert_eq!(
        marks,
        vec![
            ("A".to_string(), String::new()),
            ("Db1".into(), db_denied.clone())
        ]
    );
    let plan = cairn(&s, &["plan", "st", next]);
    assert!(plan.stdout().contains(&db_denied), "{}", plan.stdout());

    let before = crate::update::count(&s, "st");
    let files_before = s.resource_files();
    let run = cairn(&s, &["deploy", "st", next]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_COMPLETE");
    let seq = sequence_after(&s, "st", before);
    let db_events: Vec<_> = seq.iter().filter(|e| e.0 == "Db1").collect();
    // Refused, then put back by the rollback without a provider call.
    assert_eq!(
        db_events,
        vec![
            &crate::update::ev("Db1", "UPDATE_FAILED", &db_denied, "a1-db"),
            &crate::update::ev("Db1", "UPDATE_COMPLETE", "", "a1-db")
        ],
        "{seq:?}"
    );
    assert!(
        seq.iter().any(|e| e.0 == "st"
            && e.1 == "UPDATE_ROLLBACK_IN_PROGRESS"
            && e.2 == "The following resource(s) failed to update: [Db1]."),
        "{seq:?}"
    );
    // A is back, the a2 it made is gone, Db1 was never called.
    assert_eq!(physical(&s, "st", "A"), "a1");
    assert_eq!(physical(&s, "st", "Db1"), "a1-db");
    assert_eq!(s.resource_files(), files_before);

    // Removing the file is an Update:Delete of a Cairn::Local:: type: refused
    // before anything is touched.
    let before = crate::update::count(&s, "st");
    let run = deploy(&s, "st", &template("a1", "y", false), &[]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_COMPLETE");
    let seq = sequence_after(&s, "st", before);
    assert!(
        seq.iter().any(|e| e.0 == "st"
            && e.1 == "UPDATE_ROLLBACK_IN_PROGRESS"
            && e.2 == denied("Update:Delete", "Statement [#3]", "F")),
        "{seq:?}"
    );
    assert!(s.dir.path().join("kept.txt").exists());
    assert!(seq.iter().all(|e| e.0 != "A" && e.0 != "Db1"), "{seq:?}");

    // A policy for this update alone lets the replacement through; the
    // stack's policy stays.
    let allow = s.write("allow.json", ALLOW_ALL);
    let allow = allow.to_str().unwrap_or_default();
    let run = cairn(
        &s,
        &["deploy", "st", next, "--stack-policy-during-update", allow],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(physical(&s, "st", "Db1"), "a2-db");
    let shown = cairn(&s, &["stack-policy", "st", "--output", "json"]);
    assert_eq!(shown.json()["StackPolicyBody"], POLICY);
}

#[test]
fn once_a_stack_has_a_policy_what_it_does_not_allow_is_denied() {
    let s = scratch();
    let run = deploy(&s, "st", &template("b1", "x", false), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let shown = cairn(&s, &["stack-policy", "st"]);
    assert_eq!(
        shown.stdout().trim(),
        "stack st has no stack policy: every update is allowed"
    );
    let only_a = s.write(
        "only-a.json",
        r#"{"Statement": [{"Effect": "Allow", "Action": ["Update:Modify", "Update:Replace"], "Principal": "*", "Resource": ["LogicalResourceId/A"]}]}"#,
    );
    let run = cairn(
        &s,
        &[
            "stack-policy",
            "st",
            "--set",
            only_a.to_str().unwrap_or_default(),
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.stdout().trim(), "stack policy of stack st is set");
    let before = crate::update::count(&s, "st");
    let run = deploy(&s, "st", &template("b1", "y", false), &[]);
    assert_eq!(run.code(), 1);
    let seq = sequence_after(&s, "st", before);
    let reason = "Action denied by stack policy: no statement allows [Update:Modify] for resource [LogicalResourceId/Db1];";
    assert!(
        seq.contains(&crate::update::ev("Db1", "UPDATE_FAILED", reason, "b1-db")),
        "{seq:?}"
    );
    assert_eq!(crate::update::file(&s, "b1-db")["Properties"]["Value"], "x");
    // A malformed policy is refused, naming the statement and the fault;
    // the stack keeps its policy.
    let bad = s.write(
        "bad.json",
        r#"{"Statement": [{"Effect": "Allow", "Action": "Update:Rename", "Principal": "*", "Resource": "*"}]}"#,
    );
    let run = cairn(
        &s,
        &[
            "stack-policy",
            "st",
            "--set",
            bad.to_str().unwrap_or_default(),
        ],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("StackPolicyBody is not a valid stack policy: Statement [#1]: unknown action Update:Rename: the actions are Update:Modify, Update:Replace, Update:Delete, Update:*"),
        "{}",
        run.stderr()
    );
    // `--stack-policy-during-update` belongs to updates.
    let run = deploy(
        &s,
        "other",
        &template("c1", "x", false),
        &["--stack-policy-during-update", "bad.json"],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("--stack-policy-during-update applies to updating a stack; stack other does not exist (its policy is --stack-policy)"),
        "{}",
        run.stderr()
    );
}

/// `cairn update` is held to the stack's policy: what the template changes
/// is refused before anything runs (there is no rollback to undo it),
/// preview included; what drift asks for during the run fails the resource
/// with the denial; `--stack-policy-during-update` allows it for one run.
#[test]
fn cairn_update_is_held_to_the_stack_policy() {
    let s = scratch();
    let policy = s.write(
        "policy.json",
        r#"{"Statement": [
  {"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"},
  {"Effect": "Deny", "Action": "Update:*", "Principal": "*", "Resource": "LogicalResourceId/Motd"}
]}"#,
    );
    let allow = s.write("allow.json", ALLOW_ALL);
    let t = |content: &str, value: &str| {
        format!("Resources:\n  Motd:\n    Type: Cairn::Local::File\n    Properties: {{Path: out/motd.txt, Content: {content}}}\n  Free:\n    Type: Cairn::Test::Resource\n    Properties: {{Value: {value}}}\n")
    };
    let run = deploy(
        &s,
        "st",
        &t("hello", "one"),
        &["--stack-policy", policy.to_str().unwrap_or_default()],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let next = s.write("next.yaml", &t("hi", "two"));
    let next = next.to_str().unwrap_or_default();
    let events = crate::update::events(&s, "st").len();
    let refusal = format!(
        "cairn update st is refused by the stack policy; nothing was changed: {} Give --stack-policy-during-update FILE to allow it for this update.",
        denied("Update:Modify", "Statement [#2]", "Motd")
    );
    for args in [
        vec!["update", "st", next],
        vec!["update", "st", next, "--preview"],
    ] {
        let run = cairn(&s, &args);
        assert_ne!(run.code(), 0);
        assert!(run.stderr().contains(&refusal), "{}", run.stderr());
    }
    assert_eq!(status(&s, "st"), "CREATE_COMPLETE");
    assert_eq!(crate::update::events(&s, "st").len(), events);

    // Drift found during the run: the protected file is not touched.
    let motd = s.dir.path().join("out/motd.txt");
    std::fs::write(&motd, "hacked").expect("edit by hand");
    let run = cairn(&s, &["update", "st", "--drift-only"]);
    assert_ne!(run.code(), 0);
    assert_eq!(status(&s, "st"), "UPDATE_FAILED");
    let motd_events: Vec<_> = sequence_after(&s, "st", events)
        .into_iter()
        .filter(|e| e.0 == "Motd")
        .map(|e| (e.1, e.2))
        .collect();
    assert_eq!(
        motd_events,
        [(
            "UPDATE_FAILED".to_string(),
            denied("Update:Modify", "Statement [#2]", "Motd")
        )]
    );
    assert_eq!(std::fs::read_to_string(&motd).unwrap_or_default(), "hacked");

    // Allowed for one run: the template's changes and the drift's repair.
    let run = cairn(
        &s,
        &[
            "update",
            "st",
            next,
            "--stack-policy-during-update",
            allow.to_str().unwrap_or_default(),
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "st"), "UPDATE_COMPLETE");
    assert_eq!(std::fs::read_to_string(&motd).unwrap_or_default(), "hi");
    // The stack's own policy still holds for the next run.
    let back = s.write("back.yaml", &t("hello", "two"));
    let run = cairn(&s, &["update", "st", back.to_str().unwrap_or_default()]);
    assert_ne!(run.code(), 0);
    assert!(run
        .stderr()
        .contains("[Update:Modify] for resource [LogicalResourceId/Motd]"));
}
