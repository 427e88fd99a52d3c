//! Change sets (`cairn plan` / `cairn execute`), `cairn cancel-update`,
//! `cairn history`, and seed 000 run 31 (parameter values checked inside the
//! workflow), through the real binary.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::Scratch;
use crate::update::{cairn, count, ev, events, file, physical, scratch, sequence_after, status};

fn template(s: &Scratch, name: &str, body: &str) -> String {
    s.write(name, body).to_string_lossy().into_owned()
}

/// `cairn plan … --output json`, asserting it succeeded.
fn plan(s: &Scratch, args: &[&str]) -> Value {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let run = cairn(s, &all);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.json()
}

/// The change set's `ResourceChange`s by logical id.
fn changes(cs: &Value) -> BTreeMap<String, Value> {
    cs["Changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            assert_eq!(c["Type"], "Resource");
            let rc = c["ResourceChange"].clone();
            (
                rc["LogicalResourceId"].as_str().unwrap_or_default().into(),
                rc,
            )
        })
        .collect()
}

fn resources(s: &Scratch, stack: &str) -> BTreeMap<String, String> {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    run.json()["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["LogicalResourceId"].as_str().unwrap_or_default().into(),
                r["PhysicalResourceId"].as_str().unwrap_or_default().into(),
            )
        })
        .collect()
}

const T0: &str = "Parameters:
  P: {Type: String, Default: one}
Resources:
  A:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref P, Name: a}
  B:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref A}
  C:
    Type: Cairn::Test::Resource
    Properties: {Value: c}
  E:
    Type: Cairn::Test::Resource
    Metadata: {Version: 1}
    Properties: {Value: e}
";

/// A replaced (Name), B re-pointed at the new A, C removed, D added, E's
/// Metadata changed.
const T1: &str = "Parameters:
  P: {Type: String, Default: one}
Resources:
  A:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref P, Name: a2}
  B:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref A}
  D:
    Type: Cairn::Test::Resource
    Properties: {Value: d}
  E:
    Type: Cairn::Test::Resource
    Metadata: {Version: 2}
    Properties: {Value: e}
";

const T: &str = "Cairn::Test::Resource";

#[test]
fn a_change_set_for_a_new_stack_reviews_then_creates() {
    let s = scratch();
    let t0 = template(&s, "t0.yaml", T0);
    let cs = plan(&s, &["new", &t0, "--name", "first"]);
    assert_eq!(cs["ChangeSetName"], "first");
    assert_eq!(cs["ChangeSetType"], "CREATE");
    assert_eq!(cs["Status"], "CREATE_COMPLETE");
    assert_eq!(cs["ExecutionStatus"], "AVAILABLE");
    let add = |id: &str| json!({"Type": "Resource", "ResourceChange": {"Action": "Add", "LogicalResourceId": id, "ResourceType": T, "Scope": [], "Details": []}});
    let mut listed = cs["Changes"].as_array().cloned().unwrap_or_default();
    listed.sort_by_key(|c| c["ResourceChange"]["LogicalResourceId"].to_string());
    assert_eq!(listed, vec![add("A"), add("B"), add("C"), add("E")]);
    // The stack exists, in review, with nothing made.
    assert_eq!(status(&s, "new"), "REVIEW_IN_PROGRESS");
    assert!(s.resource_files().is_empty());
    let run = cairn(&s, &["deploy", "new", &t0]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("is in REVIEW_IN_PROGRESS state and can not be updated."),
        "{}",
        run.stderr()
    );
    // A second CREATE set on the review stack is allowed; executing the first
    // deletes it, as CloudFormation does.
    plan(&s, &["new", &t0, "--name", "second", "-p", "P=two"]);
    let run = cairn(&s, &["execute", "new", "first"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seq: Vec<(String, String)> = sequence_after(&s, "new", 0)
        .into_iter()
        .filter(|e| e.0 == "new")
        .map(|e| (e.1, e.2))
        .collect();
    assert_eq!(
        seq,
        vec![
            ("REVIEW_IN_PROGRESS".into(), "User Initiated".into()),
            ("CREATE_IN_PROGRESS".into(), "User Initiated".into()),
            ("CREATE_COMPLETE".into(), String::new()),
        ]
    );
    assert_eq!(
        file(&s, &physical(&s, "new", "A"))["Properties"]["Value"],
        "one"
    );
    // Once executed, the set is gone from the list (as in CloudFormation,
    // which removes a stack's change sets when one is executed); the
    // history names it.
    let run = cairn(&s, &["change-sets", "new", "--output", "json"]);
    let summaries = run.json()["Summaries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(summaries.is_empty(), "{summaries:?}");
    let history = cairn(&s, &["history", "new", "--output", "json"]).json();
    assert!(history.to_string().contains("\"first\""), "{history}");
    // It cannot run again.
    let run = cairn(&s, &["execute", "new", "first"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("ChangeSet [first] does not exist"),
        "{}",
        run.stderr()
    );
    // A stack only in review is deleted without running anything.
    let run = cairn(&s, &["plan", "reviewed", &t0, "--name", "x"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["delete", "reviewed"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["list", "--output", "json"]);
    let deleted = run.json()["StackSummaries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["StackName"] == "reviewed")
        .cloned()
        .unwrap_or_default();
    assert_eq!(deleted["StackStatus"], "DELETE_COMPLETE");
}

#[test]
fn a_change_set_lists_add_modify_replace_remove_and_execution_does_exactly_that() {
    let s = scratch();
    let t0 = template(&s, "t0.yaml", T0);
    let t1 = template(&s, "t1.yaml", T1);
    assert_eq!(cairn(&s, &["deploy", "st", &t0]).code(), 0);
    let before = resources(&s, "st");
    let cs = plan(&s, &["st", &t1, "--name", "up", "-p", "P=two"]);
    assert_eq!(cs["ChangeSetType"], "UPDATE");
    assert_eq!(cs["Status"], "CREATE_COMPLETE");
    assert_eq!(cs["ExecutionStatus"], "AVAILABLE");
    assert_eq!(
        cs["Parameters"],
        json!([{"ParameterKey": "P", "ParameterValue": "two"}])
    );
    let planned = changes(&cs);
    let detail =
        |name: Option<&str>, attr: &str, rr: &str, eval: &str, src: &str, cause: Option<&str>| {
            let mut target = json!({"Attribute": attr, "RequiresRecreation": rr});
            if let Some(n) = name {
                target["Name"] = json!(n);
            }
            let mut d = json!({"Target": target, "Evaluation": eval, "ChangeSource": src});
            if let Some(c) = cause {
                d["CausingEntity"] = json!(c);
            }
            d
        };
    let expected = BTreeMap::from([
        (
            "A".to_string(),
            json!({
            "Action": "Modify", "LogicalResourceId": "A", "PhysicalResourceId": before["A"], "ResourceType": T,
            "Replacement": "True", "Scope": ["Properties"],
            "Details": [
                detail(Some("Name"), "Properties", "Always", "Static", "DirectModification", None),
                detail(Some("Value"), "Properties", "Never", "Static", "ParameterReference", Some("P")),
            ]}),
        ),
        (
            "B".to_string(),
            json!({
            "Action": "Modify", "LogicalResourceId": "B", "PhysicalResourceId": before["B"], "ResourceType": T,
            "Replacement": "False", "Scope": ["Properties"],
            "Details": [detail(Some("Value"), "Properties", "Never", "Dynamic", "ResourceReference", Some("A"))]}),
        ),
        (
            "C".to_string(),
            json!({
            "Action": "Remove", "LogicalResourceId": "C", "PhysicalResourceId": before["C"], "ResourceType": T,
            "Scope": [], "Details": []}),
        ),
        (
            "D".to_string(),
            json!({
            "Action": "Add", "LogicalResourceId": "D", "ResourceType": T, "Scope": [], "Details": []}),
        ),
        (
            "E".to_string(),
            json!({
            "Action": "Modify", "LogicalResourceId": "E", "PhysicalResourceId": before["E"], "ResourceType": T,
            "Replacement": "False", "Scope": ["Metadata"],
            "Details": [detail(None, "Metadata", "Never", "Static", "DirectModification", None)]}),
        ),
    ]);
    assert_eq!(planned, expected);
    // Planning touched nothing.
    assert_eq!(resources(&s, "st"), before);
    assert_eq!(status(&s, "st"), "CREATE_COMPLETE");

    let skip = count(&s, "st");
    let run = cairn(&s, &["execute", "st", "up"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let after = resources(&s, "st");
    let seq = sequence_after(&s, "st", skip);
    let touched = |id: &str| seq.iter().filter(|e| e.0 == id).count();
    // What ran is what the plan said, resource by resource.
    for (id, rc) in &planned {
        match (rc["Action"].as_str(), rc["Replacement"].as_str()) {
            (Some("Add"), _) => assert!(after.contains_key(id) && !before.contains_key(id), "{id}"),
            (Some("Remove"), _) => assert!(!after.contains_key(id), "{id}"),
            (Some("Modify"), Some("True")) => assert_ne!(after[id], before[id], "{id}"),
            (Some("Modify"), Some("False")) => {
                assert_eq!(after[id], before[id], "{id}");
                assert!(
                    seq.contains(&ev(id, "UPDATE_COMPLETE", "", &after[id])),
                    "{id}: {seq:?}"
                );
            }
            other => panic!("unexpected change {other:?}"),
        }
    }
    for id in after.keys().filter(|id| !planned.contains_key(*id)) {
        assert_eq!(touched(id), 0, "{id} was not in the plan: {seq:?}");
    }
    // The replaced A's old physical resource and C are gone; B points at A's new id.
    assert_eq!(file(&s, &before["A"]), Value::Null);
    assert_eq!(file(&s, &before["C"]), Value::Null);
    assert_eq!(
        file(&s, &after["B"])["Properties"]["Value"],
        json!(after["A"])
    );
    assert_eq!(file(&s, &after["A"])["Properties"]["Value"], "two");
    let run = cairn(&s, &["change-set", "st", "up", "--output", "json"]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    assert!(run.stderr().contains("ChangeSet [up] does not exist"));
}

#[test]
fn parameter_driven_no_change_and_obsolete_change_sets() {
    let s = scratch();
    let t0 = template(&s, "t0.yaml", T0);
    assert_eq!(cairn(&s, &["deploy", "st", &t0]).code(), 0);
    let a = physical(&s, "st", "A");
    // Only a parameter changes (the stack's own template is reused): A is
    // updated in place; B refers to A's unchanged id and is not listed.
    let cs = plan(&s, &["st", "--name", "param", "-p", "P=two"]);
    assert_eq!(
        cs["Changes"],
        json!([{"Type": "Resource", "ResourceChange": {
            "Action": "Modify", "LogicalResourceId": "A", "PhysicalResourceId": a, "ResourceType": T,
            "Replacement": "False", "Scope": ["Properties"],
            "Details": [{"Target": {"Attribute": "Properties", "Name": "Value", "RequiresRecreation": "Never"},
                         "Evaluation": "Static", "ChangeSource": "ParameterReference", "CausingEntity": "P"}]}}])
    );
    // Nothing changes: FAILED with CloudFormation's text, and not executable.
    let cs = plan(&s, &["st", &t0, "--name", "same"]);
    assert_eq!(cs["Status"], "FAILED");
    assert_eq!(cs["ExecutionStatus"], "UNAVAILABLE");
    assert_eq!(
        cs["StatusReason"],
        "The submitted information didn't contain changes. Submit different information to create a change set."
    );
    assert_eq!(cs["Changes"], json!([]));
    let run = cairn(&s, &["execute", "st", "same"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("cannot be executed in its current execution status of [UNAVAILABLE]"),
        "{}",
        run.stderr()
    );
    // The stack changes after the set was made: the set is obsolete.
    let t1 = template(&s, "t1.yaml", T1);
    assert_eq!(cairn(&s, &["deploy", "st", &t1]).code(), 0);
    let cs = cairn(&s, &["change-set", "st", "param", "--output", "json"]).json();
    assert_eq!(cs["ExecutionStatus"], "OBSOLETE");
    let run = cairn(&s, &["execute", "st", "param"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("cannot be executed in its current execution status of [OBSOLETE]"),
        "{}",
        run.stderr()
    );
    assert_eq!(
        file(&s, &physical(&s, "st", "A"))["Properties"]["Value"],
        "one"
    );
    // Unknown sets and duplicate names.
    let run = cairn(&s, &["change-set", "st", "nope"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("ChangeSet [nope] does not exist"),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["plan", "st", &t0, "--name", "param"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("ChangeSet [param] already exists"),
        "{}",
        run.stderr()
    );
    // An UPDATE set is only for a stack that exists.
    let run = cairn(&s, &["plan", "missing", "--name", "x"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Stack [missing] does not exist; a change set that creates it needs a template (cairn plan missing TEMPLATE)"),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["delete-change-set", "st", "same"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["change-sets", "st", "--output", "json"]);
    let names: Vec<String> = run.json()["Summaries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["ChangeSetName"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(names, vec!["param".to_string()]);
}

const SLOW: &str = "Resources:
  A:
    Type: Cairn::Test::Resource
    Properties: {Value: VALUE, WaitSeconds: WAIT}
  B:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref A, Tags: TAGS}
";

fn slow(value: &str, wait: &str, tags: &str) -> String {
    SLOW.replace("VALUE", value)
        .replace("WAIT", wait)
        .replace("TAGS", tags)
}

#[test]
fn cancel_update_stops_the_update_in_flight_and_rolls_back() {
    let s = scratch();
    let t0 = template(&s, "t0.yaml", &slow("one", "0", "x"));
    let t1 = template(&s, "t1.yaml", &slow("two", "60", "y"));
    assert_eq!(cairn(&s, &["deploy", "st", &t0]).code(), 0);
    let a = physical(&s, "st", "A");
    let run = cairn(&s, &["cancel-update", "st"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("CancelUpdateStack cannot be called from current stack status"),
        "{}",
        run.stderr()
    );
    let skip = count(&s, "st");
    let started = Instant::now();
    let mut deploy = s.spawn_cairn(&["--config", "cairn.toml", "deploy", "st", &t1]);
    // Wait until A's update is in flight.
    while !sequence_after(&s, "st", skip).contains(&ev("A", "UPDATE_IN_PROGRESS", "", &a)) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "A never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = cairn(&s, &["cancel-update", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout()
            .contains("stack st is UPDATE_ROLLBACK_COMPLETE"),
        "{}",
        run.stdout()
    );
    let code = deploy.wait().expect("deploy ends").code();
    assert_eq!(code, Some(1), "the cancelled deploy reports the rollback");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "A's 60 s update was not cancelled"
    );
    assert_eq!(
        sequence_after(&s, "st", skip),
        vec![
            ev("st", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("A", "UPDATE_IN_PROGRESS", "", &a),
            ev("A", "UPDATE_FAILED", "Resource update cancelled", &a),
            ev("st", "UPDATE_ROLLBACK_IN_PROGRESS", "User Initiated", ""),
            ev("A", "UPDATE_IN_PROGRESS", "", &a),
            ev("A", "UPDATE_COMPLETE", "", &a),
            ev("st", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "", ""),
            ev("st", "UPDATE_ROLLBACK_COMPLETE", "", ""),
        ]
    );
    // A is back to its old properties; B was never touched.
    assert_eq!(file(&s, &a)["Properties"]["Value"], "one");
    assert_eq!(
        file(&s, &physical(&s, "st", "B"))["Properties"]["Tags"],
        "x"
    );
    let template_now = cairn(&s, &["template", "st"]).stdout();
    assert!(template_now.contains("Value: one"), "{template_now}");
}

#[test]
fn history_keeps_every_operation() {
    let s = scratch();
    let body = "Parameters:
  Secret: {Type: String, NoEcho: true}
  V: {Type: String}
Resources:
  A:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref V, Fail: FAIL}
";
    let ok = template(&s, "ok.yaml", &body.replace("FAIL", "[]"));
    let bad = template(&s, "bad.yaml", &body.replace("FAIL", "[update]"));
    assert_eq!(
        cairn(&s, &["deploy", "h", &ok, "-p", "Secret=s3", "-p", "V=1"]).code(),
        0
    );
    assert_eq!(
        cairn(
            &s,
            &[
                "deploy",
                "h",
                &ok,
                "--use-previous-value",
                "Secret",
                "-p",
                "V=2"
            ]
        )
        .code(),
        0
    );
    assert_eq!(
        cairn(
            &s,
            &[
                "deploy",
                "h",
                &bad,
                "--use-previous-value",
                "Secret",
                "-p",
                "V=3"
            ]
        )
        .code(),
        1
    );
    assert_eq!(cairn(&s, &["delete", "h"]).code(), 0);
    let id = cairn(&s, &["list", "--output", "json"]).json()["StackSummaries"][0]["StackId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let run = cairn(&s, &["history", &id, "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let ops = run.json()["Operations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let summary: Vec<(String, String, String, String)> = ops
        .iter()
        .map(|o| {
            let p = o["Parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    format!(
                        "{}={}",
                        p["ParameterKey"].as_str().unwrap_or_default(),
                        p["ParameterValue"].as_str().unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join(",");
            (
                o["Operation"].as_str().unwrap_or_default().into(),
                o["Status"].as_str().unwrap_or_default().into(),
                o["StatusReason"].as_str().unwrap_or_default().into(),
                p,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "CREATE".into(),
                "CREATE_COMPLETE".into(),
                String::new(),
                "Secret=****,V=1".into()
            ),
            (
                "UPDATE".into(),
                "UPDATE_COMPLETE".into(),
                String::new(),
                "Secret=****,V=2".into()
            ),
            (
                "UPDATE".into(),
                "UPDATE_ROLLBACK_COMPLETE".into(),
                "The following resource(s) failed to update: [A].".into(),
                "Secret=****,V=3".into()
            ),
            (
                "DELETE".into(),
                "DELETE_COMPLETE".into(),
                String::new(),
                "Secret=****,V=2".into()
            ),
        ]
    );
    for o in &ops {
        assert!(
            o["StartTime"].as_str().is_some() && o["EndTime"].as_str().is_some(),
            "{o}"
        );
    }
    assert!(ops[2]["TemplateBody"]
        .as_str()
        .unwrap_or_default()
        .contains("[update]"));
    assert!(ops[1]["TemplateBody"]
        .as_str()
        .unwrap_or_default()
        .contains("[]"));
    let text = cairn(&s, &["history", &id]).stdout();
    assert!(text.contains("UPDATE_ROLLBACK_COMPLETE"), "{text}");
    assert!(!text.contains("s3"), "a NoEcho value leaked: {text}");
}

#[test]
fn parameter_values_are_checked_inside_the_workflow_and_roll_back() {
    // Seed 000 run 31: a resource-id parameter naming nothing fails after
    // UPDATE_IN_PROGRESS, before any resource is touched, and rolls back.
    let s = scratch();
    let img = template(
        &s,
        "img.yaml",
        "Resources:\n  Image:\n    Type: Cairn::Test::Resource\n    Properties: {Value: image}\n",
    );
    assert_eq!(cairn(&s, &["deploy", "images", &img]).code(), 0);
    let image = physical(&s, "images", "Image");
    let body = template(
        &s,
        "uses.yaml",
        "Parameters:
  ImageId: {Type: Cairn::Test::Resource::Id}
  InstanceType: {Type: String, Default: small}
Resources:
  Instance2:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref ImageId, Tags: !Ref InstanceType}
  Instance3:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref ImageId, Tags: !Ref InstanceType}
",
    );
    let arg = format!("ImageId={image}");
    let run = cairn(&s, &["deploy", "run31", &body, "-p", &arg]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let files = s.resource_files();
    let skip = count(&s, "run31");
    let run = cairn(
        &s,
        &["deploy", "run31", &body, "-p", "ImageId=img-does-not-exist"],
    );
    assert_eq!(run.code(), 1);
    let reason =
        "Parameter validation failed: parameter value for parameter name ImageId does not exist";
    assert!(run.stderr().contains(reason), "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "run31", skip),
        vec![
            ev("run31", "UPDATE_IN_PROGRESS", "User Initiated", ""),
            ev("run31", "UPDATE_ROLLBACK_IN_PROGRESS", reason, ""),
            ev(
                "run31",
                "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
                "",
                ""
            ),
            ev("run31", "UPDATE_ROLLBACK_COMPLETE", "", ""),
        ]
    );
    assert_eq!(s.resource_files(), files, "no resource was touched");
    let described = cairn(&s, &["describe", "run31", "--output", "json"]).json();
    assert_eq!(
        described["Stacks"][0]["Parameters"],
        json!([{"ParameterKey": "ImageId", "ParameterValue": image}, {"ParameterKey": "InstanceType", "ParameterValue": "small"}])
    );
    // The same check on create: rollback before anything is made.
    let run = cairn(
        &s,
        &[
            "deploy",
            "run31b",
            &body,
            "-p",
            "ImageId=img-does-not-exist",
        ],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        sequence_after(&s, "run31b", 0),
        vec![
            ev("run31b", "CREATE_IN_PROGRESS", "User Initiated", ""),
            ev(
                "run31b",
                "ROLLBACK_IN_PROGRESS",
                &format!("{reason}. Rollback requested by user."),
                ""
            ),
            ev("run31b", "ROLLBACK_COMPLETE", "", ""),
        ]
    );
    assert_eq!(s.resource_files(), files);
    assert_eq!(
        events(&s, "images").len(),
        5,
        "the image stack is untouched"
    );
}
