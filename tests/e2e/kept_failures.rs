//! Failed updates kept for inspection: `deploy --disable-rollback` and
//! `execute --disable-rollback` on an existing stack (CloudFormation's
//! DisableRollback on UpdateStack and ExecuteChangeSet) stop in
//! UPDATE_FAILED; the next update continues from there, or `cairn
//! rollback` (RollbackStack) goes back to the last stable state. Also
//! Heat's `test_stack_update_from_failed` (heat_integrationtests/
//! functional/test_create_update.py), whose default is rollback disabled.

use crate::update::{cairn, count, deploy, ev, file, physical, scratch, sequence_after, status};

/// A is replaced (its Name is create-only), then B, which depends on it,
/// fails to update.
const V1: &str = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a1, Value: x}}\n  B: {Type: Cairn::Test::Resource, DependsOn: A, Properties: {Name: b, Value: 1}}\n";
const V2: &str = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a2, Value: x}}\n  B: {Type: Cairn::Test::Resource, DependsOn: A, Properties: {Name: b, Value: 2, Fail: update, FailMessage: broken}}\n";
/// V2 with B fixed.
const V3: &str = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a2, Value: x}}\n  B: {Type: Cairn::Test::Resource, DependsOn: A, Properties: {Name: b, Value: 2}}\n";

/// Creates V1, then fails V2 with rollback disabled and checks where it
/// stopped.
fn failed_and_kept(s: &crate::support::Scratch) {
    assert_eq!(deploy(s, "kf", V1, &[]).code(), 0);
    let before = count(s, "kf");
    let run = deploy(s, "kf", V2, &["--disable-rollback"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        "error: stack kf is UPDATE_FAILED: The following resource(s) failed to update: [B].\n  B UPDATE_FAILED: broken"
    );
    assert_eq!(
        sequence_after(s, "kf", before),
        vec![
            ev("kf", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev(
                "A",
                "UPDATE_IN_PROGRESS",
                "Requested update requires the creation of a new physical resource; hence creating one.",
                ""
            ),
            ev("A", "UPDATE_IN_PROGRESS", "Resource creation Initiated", ""),
            ev("A", "UPDATE_COMPLETE", "", "a2"),
            ev("B", "UPDATE_IN_PROGRESS", "", "b"),
            ev("B", "UPDATE_FAILED", "broken", "b"),
            ev(
                "kf",
                "UPDATE_FAILED",
                "The following resource(s) failed to update: [B].",
                ""
            ),
        ]
    );
    // What succeeded is kept, and so is what the last stable state needs.
    assert_eq!(status(s, "kf"), "UPDATE_FAILED");
    assert_eq!(physical(s, "kf", "A"), "a2");
    assert_eq!(s.resource_files(), vec!["a1.json", "a2.json", "b.json"]);
}

#[test]
fn a_failed_update_is_kept_then_rolled_back_to_the_last_stable_state() {
    let s = scratch();
    failed_and_kept(&s);
    let before = count(&s, "kf");
    let run = cairn(&s, &["rollback", "kf"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        run.stdout().trim_end().lines().last(),
        Some("stack kf is UPDATE_ROLLBACK_COMPLETE")
    );
    assert_eq!(
        sequence_after(&s, "kf", before),
        vec![
            ev("kf", "UPDATE_ROLLBACK_IN_PROGRESS", "User Initiated", ""),
            ev("B", "UPDATE_IN_PROGRESS", "", "b"),
            ev("B", "UPDATE_COMPLETE", "", "b"),
            ev("A", "UPDATE_COMPLETE", "", "a1"),
            ev("kf", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("A", "DELETE_IN_PROGRESS", "", "a2"),
            ev("A", "DELETE_COMPLETE", "", "a2"),
            ev("kf", "UPDATE_ROLLBACK_COMPLETE", "", ""),
        ]
    );
    assert_eq!(physical(&s, "kf", "A"), "a1");
    assert_eq!(file(&s, "b")["Properties"]["Value"], 1);
    assert_eq!(s.resource_files(), vec!["a1.json", "b.json"]);
    // The stack shows the template it went back to.
    let template = cairn(&s, &["template", "kf"]);
    assert!(
        template.stdout().contains("Name: a1"),
        "{}",
        template.stdout()
    );
    let again = cairn(&s, &["rollback", "kf"]);
    assert_eq!(again.code(), 1);
    assert!(again.stderr().ends_with(
        "is in UPDATE_ROLLBACK_COMPLETE state and can not be rolled back; only a stack in CREATE_FAILED or UPDATE_FAILED can\n"
    ), "{}", again.stderr());
}

#[test]
fn the_next_update_continues_a_kept_failed_update() {
    let s = scratch();
    failed_and_kept(&s);
    // Fixed: B is updated again; A, replaced already, is not replaced
    // again; the physical resource A had before is deleted in the cleanup.
    let before = count(&s, "kf");
    let run = deploy(&s, "kf", V3, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "kf", before),
        vec![
            ev("kf", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("B", "UPDATE_IN_PROGRESS", "", "b"),
            ev("B", "UPDATE_COMPLETE", "", "b"),
            ev("kf", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("A", "DELETE_IN_PROGRESS", "", "a1"),
            ev("A", "DELETE_COMPLETE", "", "a1"),
            ev("kf", "UPDATE_COMPLETE", "", ""),
        ]
    );
    assert_eq!(physical(&s, "kf", "A"), "a2");
    assert_eq!(file(&s, "b")["Properties"]["Value"], 2);
    assert_eq!(s.resource_files(), vec!["a2.json", "b.json"]);
    let run = cairn(&s, &["rollback", "kf"]);
    assert_eq!(run.code(), 1);
    assert!(run
        .stderr()
        .contains("is in UPDATE_COMPLETE state and can not be rolled back"));
}

#[test]
fn updating_a_kept_failed_update_back_to_where_it_started_keeps_the_original() {
    // Heat's convergence case: a replacement that fails with rollback
    // disabled, then the original template again: the physical id is the
    // original one and the failed replacement is discarded.
    let s = scratch();
    let v1 = "Resources:\n  R: {Type: Cairn::Test::Resource, Properties: {Name: r1}}\n";
    let v2 =
        "Resources:\n  R: {Type: Cairn::Test::Resource, Properties: {Name: r2, Fail: create}}\n";
    assert_eq!(deploy(&s, "orig", v1, &[]).code(), 0);
    let run = deploy(&s, "orig", v2, &["--disable-rollback"]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "orig"), "UPDATE_FAILED");
    let before = count(&s, "orig");
    let run = deploy(&s, "orig", v1, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "orig", before),
        vec![
            ev("orig", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("orig", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("orig", "UPDATE_COMPLETE", "", ""),
        ]
    );
    assert_eq!(physical(&s, "orig", "R"), "r1");
    assert_eq!(s.resource_files(), vec!["r1.json"]);
}

#[test]
fn a_change_set_executed_with_rollback_disabled_is_kept_too() {
    let s = scratch();
    assert_eq!(deploy(&s, "cs", V1, &[]).code(), 0);
    let path = s.write("v2.yaml", V2);
    let plan = cairn(
        &s,
        &[
            "plan",
            "cs",
            path.to_str().unwrap_or_default(),
            "--name",
            "two",
        ],
    );
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    let run = cairn(&s, &["execute", "cs", "two", "--disable-rollback"]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "cs"), "UPDATE_FAILED");
    assert_eq!(s.resource_files(), vec!["a1.json", "a2.json", "b.json"]);
    let run = cairn(&s, &["rollback", "cs"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(s.resource_files(), vec!["a1.json", "b.json"]);
}

#[test]
fn a_create_kept_failed_is_rolled_back_by_cairn_rollback() {
    let s = scratch();
    let body = "Resources:\n  Ok: {Type: Cairn::Test::Resource, Properties: {Name: ok}}\n  Bad: {Type: Cairn::Test::Resource, DependsOn: Ok, Properties: {Name: bad, Fail: create, FailMessage: nope}}\n";
    let run = deploy(&s, "cf", body, &["--disable-rollback"]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "cf"), "CREATE_FAILED");
    assert_eq!(s.resource_files(), vec!["ok.json"]);
    let before = count(&s, "cf");
    let run = cairn(&s, &["rollback", "cf"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "cf", before),
        vec![
            ev("cf", "ROLLBACK_IN_PROGRESS", "User Initiated", ""),
            ev("Bad", "DELETE_IN_PROGRESS", "", ""),
            ev("Bad", "DELETE_COMPLETE", "", ""),
            ev("Ok", "DELETE_IN_PROGRESS", "", "ok"),
            ev("Ok", "DELETE_COMPLETE", "", "ok"),
            ev("cf", "ROLLBACK_COMPLETE", "", ""),
        ]
    );
    assert!(s.resource_files().is_empty());
}

#[test]
fn a_hot_stack_update_from_failed_continues() {
    // Heat's test_stack_update_from_failed: an update that fails with
    // rollback disabled (Heat's default) leaves UPDATE_FAILED; an update
    // with a good template then completes with both resources.
    let s = scratch();
    let one = "heat_template_version: 2015-10-15\nresources:\n  test1:\n    type: Cairn::Test::Resource\n    properties: {Name: t1}\n";
    let failing = "heat_template_version: 2015-10-15\nresources:\n  test1:\n    type: Cairn::Test::Resource\n    properties: {Name: t1}\n  test2:\n    type: Cairn::Test::Resource\n    properties: {Name: t2, Fail: create}\n";
    let good = "heat_template_version: 2015-10-15\nresources:\n  test1:\n    type: Cairn::Test::Resource\n    properties: {Name: t1}\n  test2:\n    type: Cairn::Test::Resource\n    properties: {Name: t2}\n";
    assert_eq!(deploy(&s, "hf", one, &[]).code(), 0);
    assert_eq!(deploy(&s, "hf", failing, &["--disable-rollback"]).code(), 1);
    assert_eq!(status(&s, "hf"), "UPDATE_FAILED");
    let run = deploy(&s, "hf", good, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "hf"), "UPDATE_COMPLETE");
    assert_eq!(physical(&s, "hf", "test1"), "t1");
    assert_eq!(physical(&s, "hf", "test2"), "t2");
    assert_eq!(s.resource_files(), vec!["t1.json", "t2.json"]);
}

#[test]
fn a_stack_with_nested_stacks_cannot_keep_a_failed_update_yet() {
    let s = scratch();
    s.write(
        "child.yaml",
        "Resources:\n  C: {Type: Cairn::Test::Resource, Properties: {Name: c1}}\n",
    );
    let v1 = "Resources:\n  N: {Type: AWS::CloudFormation::Stack, Properties: {TemplateURL: child.yaml}}\n";
    let v2 = "Resources:\n  N: {Type: AWS::CloudFormation::Stack, Properties: {TemplateURL: child.yaml}}\n  F: {Type: Cairn::Test::Resource, DependsOn: N, Properties: {Fail: create}}\n";
    assert_eq!(deploy(&s, "np", v1, &[]).code(), 0);
    let run = deploy(&s, "np", v2, &["--disable-rollback"]);
    assert_eq!(run.code(), 1);
    assert!(run.stderr().ends_with(": DisableRollback is not supported for an update of a stack with nested stacks (N): its nested stacks would finish their own updates; update without it\n"), "{}", run.stderr());
    assert_eq!(status(&s, "np"), "CREATE_COMPLETE");
}
