//! `cairn update` (seed 003's deployment update): preview, drift-only
//! healing, each skip flag, unsupported changes, history.

use serde_json::{json, Value};

use crate::support::Scratch;
use crate::update::{cairn, deploy, events, file, status};

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        "[engine]\ncleanup_attempts = 2\ncleanup_backoff_seconds = 0.05\nhealth_timeout_seconds = 2\n",
    );
    s
}

/// (logical id, status, reason) of the events after the first `skip`,
/// the stack's own included.
fn sequence(s: &Scratch, stack: &str, skip: usize) -> Vec<(String, String, String)> {
    crate::groups::sequence(s, stack, skip)
        .into_iter()
        .map(|(l, st, r, _)| (l, st, r))
        .collect()
}

fn ev(l: &str, st: &str, r: &str) -> (String, String, String) {
    (l.into(), st.into(), r.into())
}

fn update(s: &Scratch, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["update"];
    all.extend_from_slice(args);
    cairn(s, &all)
}

fn physical(s: &Scratch, stack: &str, logical: &str) -> String {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    run.json()["StackResources"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|r| r["LogicalResourceId"] == logical)
                .cloned()
        })
        .and_then(|r| r["PhysicalResourceId"].as_str().map(String::from))
        .unwrap_or_default()
}

fn logical_ids(s: &Scratch, stack: &str) -> Vec<String> {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    run.json()["StackResources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r["LogicalResourceId"].as_str().map(String::from))
        .collect()
}

/// The last history entry's details (plan and report).
fn last_details(s: &Scratch, stack: &str) -> Value {
    let run = cairn(s, &["history", stack, "--output", "json"]);
    let ops = run.json()["Operations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let last = ops.last().cloned().unwrap_or_default();
    assert_eq!(last["Operation"], "RECONCILE", "{last}");
    last["Details"].clone()
}

const FILE: &str = "Resources:
  F:
    Type: Cairn::Local::File
    Properties:
      Path: out/motd.txt
      Content: hello
  T:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref F}
";

#[test]
fn drift_only_restores_an_edited_and_a_deleted_file() {
    let s = scratch();
    assert_eq!(deploy(&s, "f", FILE, &[]).code(), 0);
    let path = s.dir.path().join("out/motd.txt");
    std::fs::write(&path, "hacked").expect("edit by hand");
    let d = cairn(&s, &["drift", "f", "--output", "json"]).json();
    let f = d["StackResourceDrifts"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == "F").cloned())
        .unwrap_or_default();
    assert_eq!(f["StackResourceDriftStatus"], "MODIFIED");
    assert_eq!(
        f["PropertyDifferences"],
        json!([{"PropertyPath": "/Content", "ExpectedValue": "hello", "ActualValue": "hacked", "DifferenceType": "NOT_EQUAL"}])
    );

    let n = events(&s, "f").len();
    let run = update(&s, &["f", "--drift-only"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), "hello");
    assert_eq!(
        sequence(&s, "f", n),
        [
            ev("f", "UPDATE_IN_PROGRESS", "User Initiated"),
            ev(
                "F",
                "UPDATE_IN_PROGRESS",
                "Drifted: /Content; updating to the template"
            ),
            ev("F", "UPDATE_COMPLETE", ""),
            ev("f", "UPDATE_COMPLETE", ""),
        ]
    );
    let details = last_details(&s, "f");
    assert_eq!(details["Report"]["Updated"], json!(["F"]));
    assert_eq!(details["Report"]["InSync"], json!(["T"]));

    // Deleted: DELETED, then reinstalled.
    std::fs::remove_file(&path).expect("delete by hand");
    let d = cairn(&s, &["drift", "f", "--output", "json"]).json();
    assert_eq!(
        d["StackResourceDrifts"][0]["StackResourceDriftStatus"],
        "DELETED"
    );
    let n = events(&s, "f").len();
    let run = update(&s, &["f", "--drift-only"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), "hello");
    assert_eq!(
        sequence(&s, "f", n),
        [
            ev("f", "UPDATE_IN_PROGRESS", "User Initiated"),
            ev(
                "F",
                "UPDATE_IN_PROGRESS",
                "Drifted: the resource is gone; reinstalling it (delete, then create)"
            ),
            ev("F", "UPDATE_IN_PROGRESS", "Resource creation Initiated"),
            ev("F", "UPDATE_COMPLETE", ""),
            ev("f", "UPDATE_COMPLETE", ""),
        ]
    );
    assert_eq!(last_details(&s, "f")["Report"]["Reinstalled"], json!(["F"]));
    let d = cairn(&s, &["drift", "f", "--output", "json"]).json();
    assert_eq!(d["StackDriftStatus"], "IN_SYNC");
    // A random string's provider has no drift check: NOT_CHECKED.
    let t = "Resources:\n  R: {Type: Cairn::Random::String}\n";
    assert_eq!(deploy(&s, "r", t, &[]).code(), 0);
    let d = cairn(&s, &["drift", "r", "--output", "json"]).json();
    assert_eq!(
        d["StackResourceDrifts"][0]["StackResourceDriftStatus"],
        "NOT_CHECKED"
    );
}

const BEFORE: &str = "Description: one
Resources:
  Keep: {Type: Cairn::Test::Resource, Properties: {Value: a}}
  Named: {Type: Cairn::Test::Resource, Properties: {Name: first-name, Value: n}}
  Gone: {Type: Cairn::Test::Resource, Properties: {Value: g}}
Outputs:
  K: {Value: !Ref Keep}
";

const AFTER: &str = "Description: two
Resources:
  Keep: {Type: Cairn::Test::Resource, Properties: {Value: b}}
  Named: {Type: Cairn::Test::Resource, Properties: {Name: second-name, Value: n}}
  New: {Type: Cairn::Test::Resource, Properties: {Value: new}}
Outputs:
  K: {Value: !GetAtt Keep.Value}
";

#[test]
fn preview_changes_nothing_and_prints_the_steps() {
    let s = scratch();
    assert_eq!(deploy(&s, "p", BEFORE, &[]).code(), 0);
    let after = s.write("after.yaml", AFTER);
    let files = s.resource_files();
    let n = events(&s, "p").len();
    let run = update(
        &s,
        &[
            "p",
            after.to_str().unwrap_or_default(),
            "--preview",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let steps: Vec<String> = run.json()["Steps"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| {
            format!(
                "{} {}",
                s["Action"].as_str().unwrap_or_default(),
                s["Entity"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            "modify Resources.Keep.Properties.Value",
            "modify Resources.Named.Properties.Name",
            "add Resources.New",
            "remove Resources.Gone",
            "modify Outputs.K",
            "modify Description",
        ]
    );
    let plan = run.json();
    assert_eq!(plan["Install"], json!(["New"]));
    assert_eq!(plan["Uninstall"], json!(["Gone"]));
    assert_eq!(plan["Reinstall"], json!(["Named"]));
    assert_eq!(plan["Modify"], json!(["Keep"]));
    let text = update(&s, &["p", after.to_str().unwrap_or_default(), "--preview"]);
    assert_eq!(text.code(), 0);
    assert!(
        text.stdout()
            .contains("  modify  Resources.Named.Properties.Name\n"),
        "{}",
        text.stdout()
    );
    assert!(
        text.stdout().contains("reinstall  Named\n"),
        "{}",
        text.stdout()
    );
    // Nothing changed.
    assert_eq!(events(&s, "p").len(), n);
    assert_eq!(s.resource_files(), files);
    assert_eq!(status(&s, "p"), "CREATE_COMPLETE");

    // Run it: every phase does its part.
    let run = update(&s, &["p", after.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(logical_ids(&s, "p"), ["Keep", "Named", "New"]);
    assert_eq!(physical(&s, "p", "Named"), "second-name");
    assert_eq!(
        file(&s, &physical(&s, "p", "Keep"))["Properties"]["Value"],
        "b"
    );
    let report = &last_details(&s, "p")["Report"];
    assert_eq!(report["Uninstalled"], json!(["Gone"]));
    assert_eq!(report["Installed"], json!(["New"]));
    assert_eq!(report["Updated"], json!(["Keep"]));
    assert_eq!(report["Reinstalled"], json!(["Named"]));
    let history = cairn(&s, &["history", "p"]).stdout();
    assert!(history.contains("step: remove Resources.Gone"), "{history}");
    assert!(history.contains("Reinstalled: Named"), "{history}");
}

#[test]
fn each_skip_flag_skips_exactly_its_phase() {
    // --skip-uninstall / --skip-install / --skip-reinstall.
    let s = scratch();
    assert_eq!(deploy(&s, "k", BEFORE, &[]).code(), 0);
    let gone = physical(&s, "k", "Gone");
    let after = s.write("after.yaml", AFTER);
    let n = events(&s, "k").len();
    let run = update(
        &s,
        &[
            "k",
            after.to_str().unwrap_or_default(),
            "--skip-uninstall",
            "--skip-install",
            "--skip-reinstall",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // Gone left the stack but its resource is still there; New was not
    // made; Named keeps its old physical resource; Keep was updated.
    assert_eq!(logical_ids(&s, "k"), ["Keep", "Named"]);
    assert!(s.resource_files().contains(&format!("{gone}.json")));
    assert!(sequence(&s, "k", n).contains(&ev("Gone", "DELETE_SKIPPED", "")));
    assert_eq!(physical(&s, "k", "Named"), "first-name");
    assert_eq!(
        file(&s, &physical(&s, "k", "Keep"))["Properties"]["Value"],
        "b"
    );
    let report = &last_details(&s, "k")["Report"];
    assert_eq!(
        report["Skipped"],
        json!({"Install": ["New"], "Uninstall": ["Gone"], "Reinstall": ["Named"]})
    );
    assert_eq!(report["Updated"], json!(["Keep"]));

    // --skip-heal: an unhealthy resource stays; without it, it is healed.
    let s = scratch();
    let t = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n";
    assert_eq!(deploy(&s, "h", t, &[]).code(), 0);
    let a = physical(&s, "h", "A");
    s.edit_backing_file(&a, |r| r["Properties"]["Unhealthy"] = true.into());
    assert_eq!(update(&s, &["h", "--drift-only", "--skip-heal"]).code(), 0);
    assert_eq!(physical(&s, "h", "A"), a);
    assert_eq!(last_details(&s, "h")["Report"]["Healed"], json!([]));
    let n = events(&s, "h").len();
    assert_eq!(update(&s, &["h", "--drift-only"]).code(), 0);
    let healed = physical(&s, "h", "A");
    assert_ne!(healed, a);
    assert_eq!(s.resource_files(), [format!("{healed}.json")]);
    assert_eq!(
        sequence(&s, "h", n)[1],
        ev("A", "UPDATE_IN_PROGRESS", &format!("Unhealthy: Cairn::Test::Resource {a} is marked Unhealthy; reinstalling it (delete, then create)"))
    );
    assert_eq!(last_details(&s, "h")["Report"]["Healed"], json!(["A"]));

    // --skip-drift-check: a drifted resource is not touched; without it, it
    // is updated with the drift.
    s.edit_backing_file(&healed, |r| r["Properties"]["Value"] = "hacked".into());
    assert_eq!(
        update(&s, &["h", "--drift-only", "--skip-drift-check"]).code(),
        0
    );
    assert_eq!(file(&s, &healed)["Properties"]["Value"], "hacked");
    assert_eq!(update(&s, &["h", "--drift-only"]).code(), 0);
    assert_eq!(file(&s, &healed)["Properties"]["Value"], "a");
    assert_eq!(last_details(&s, "h")["Report"]["Updated"], json!(["A"]));

    // --ignore-failure: a delete that fails while uninstalling.
    let s = scratch();
    let t = "Resources:\n  A: {Type: Cairn::Test::Resource}\n  B: {Type: Cairn::Test::Resource, Properties: {Fail: delete, FailMessage: stuck}}\n";
    assert_eq!(deploy(&s, "i", t, &[]).code(), 0);
    let only_a = s.write("a.yaml", "Resources:\n  A: {Type: Cairn::Test::Resource}\n");
    let run = update(&s, &["i", only_a.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "i"), "UPDATE_FAILED");
    let reason = sequence(&s, "i", 0).last().cloned().unwrap_or_default();
    assert_eq!(
        reason,
        ev(
            "i",
            "UPDATE_FAILED",
            "The following resource(s) failed to delete: [B]."
        )
    );
    assert_eq!(logical_ids(&s, "i"), ["A", "B"]);
    let run = update(
        &s,
        &["i", only_a.to_str().unwrap_or_default(), "--ignore-failure"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "i"), "UPDATE_COMPLETE");
    assert_eq!(logical_ids(&s, "i"), ["A"]);
}

#[test]
fn a_provider_reporting_no_drift_is_not_updated_even_if_the_template_changed() {
    let s = scratch();
    let t = |v: &str| {
        format!("Resources:\n  A: {{Type: Cairn::Test::Resource, Properties: {{Value: {v}}}}}\n")
    };
    assert_eq!(deploy(&s, "ns", &t("one"), &[]).code(), 0);
    let a = physical(&s, "ns", "A");
    // Someone already made the live resource what the new template says.
    s.edit_backing_file(&a, |r| r["Properties"]["Value"] = "two".into());
    let two = s.write("two.yaml", &t("two"));
    let n = events(&s, "ns").len();
    assert_eq!(
        update(&s, &["ns", two.to_str().unwrap_or_default()]).code(),
        0
    );
    assert_eq!(
        sequence(&s, "ns", n)[1],
        ev(
            "A",
            "UPDATE_COMPLETE",
            "check_drift reports the resource in sync with the template: not updated"
        )
    );
    let report = &last_details(&s, "ns")["Report"];
    assert_eq!(report["InSync"], json!(["A"]));
    assert_eq!(report["Updated"], json!([]));
    let d = cairn(&s, &["drift", "ns", "--output", "json"]).json();
    assert_eq!(d["StackDriftStatus"], "IN_SYNC");
}

#[test]
fn unsupported_changes_are_refused_before_anything_runs() {
    let s = scratch();
    let t = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Fixed: 1}}\n  B: {Type: Cairn::Test::Resource, Properties: {Fixed: 1}}\n";
    assert_eq!(deploy(&s, "u", t, &[]).code(), 0);
    let n = events(&s, "u").len();
    let fixed = s.write("fixed.yaml", &t.replace("Fixed: 1", "Fixed: 2"));
    let run = update(&s, &["u", fixed.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("The update cannot be applied; these changes are not supported: Resources.A.Properties.Fixed (an Immutable property of Cairn::Test::Resource), Resources.B.Properties.Fixed (an Immutable property of Cairn::Test::Resource)"),
        "{}",
        run.stderr()
    );
    let retyped = s.write("type.yaml", "Resources:\n  A: {Type: Cairn::Random::String}\n  B: {Type: Cairn::Test::Resource, Properties: {Fixed: 1}}\n");
    let run = update(&s, &["u", retyped.to_str().unwrap_or_default()]);
    assert!(
        run.stderr().contains("Update of resource type is not permitted. The new template modifies resource type of the following resources: [A]"),
        "{}",
        run.stderr()
    );
    let run = update(&s, &["u"]);
    assert!(
        run.stderr()
            .contains("cairn update u needs a template, parameters (-p K=V), or --drift-only"),
        "{}",
        run.stderr()
    );
    assert_eq!(events(&s, "u").len(), n, "nothing ran");
}

#[test]
fn an_unhealthy_group_member_is_healed_under_its_own_name() {
    let s = scratch();
    let t = "Resources:
  Config:
    Type: Cairn::Group::LaunchConfiguration
    Properties: {MemberType: Cairn::Test::Resource, MemberProperties: {Value: m}}
  Web:
    Type: Cairn::Group::InstanceGroup
    Properties: {LaunchConfigurationName: !Ref Config, Size: 3}
";
    assert_eq!(deploy(&s, "g", t, &[]).code(), 0);
    let members = |s: &Scratch| -> Vec<(String, String)> {
        let run = cairn(s, &["resources", "g", "--output", "json"]);
        run.json()["StackResources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|r| r["GroupResourceId"] == "Web")
            .map(|r| {
                (
                    r["LogicalResourceId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    r["PhysicalResourceId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect()
    };
    let before = members(&s);
    s.edit_backing_file(&before[1].1, |r| r["Properties"]["Unhealthy"] = true.into());
    let n = events(&s, "g").len();
    let run = update(&s, &["g", "--drift-only"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let after = members(&s);
    assert_eq!(after[0], before[0]);
    assert_eq!(after[2], before[2]);
    assert_eq!(after[1].0, "Web-1");
    assert_ne!(after[1].1, before[1].1);
    let mut owned: Vec<String> = after.iter().map(|(_, p)| format!("{p}.json")).collect();
    owned.sort();
    assert_eq!(s.resource_files(), owned);
    let why = format!(
        "Web-1 is UNHEALTHY: Cairn::Test::Resource {} is marked Unhealthy",
        before[1].1
    );
    let seq = sequence(&s, "g", n);
    assert_eq!(
        seq[1..3],
        [
            ev(
                "Web",
                "UPDATE_IN_PROGRESS",
                &format!(
                    "Unhealthy: members not healthy: Web-1 ({}); healing",
                    why.trim_start_matches("Web-1 is ")
                )
            ),
            ev(
                "Web",
                "UPDATE_IN_PROGRESS",
                &format!("Healing: replacing Web-1 ({why})")
            ),
        ]
    );
    assert_eq!(
        seq[3..],
        [
            ev("Web-1", "DELETE_IN_PROGRESS", ""),
            ev("Web-1", "DELETE_COMPLETE", ""),
            ev("Web-1", "CREATE_IN_PROGRESS", ""),
            ev("Web-1", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ev("Web-1", "CREATE_COMPLETE", ""),
            ev("Web", "UPDATE_COMPLETE", ""),
            ev("g", "UPDATE_COMPLETE", ""),
        ]
    );
    assert_eq!(last_details(&s, "g")["Report"]["Healed"], json!(["Web"]));
}

#[test]
fn sigkill_mid_reinstall_is_finished_by_the_next_command() {
    let s = scratch();
    let t = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: one, WaitSeconds: 1.0}}\n  B: {Type: Cairn::Test::Resource, Properties: {Value: !Ref A}}\n";
    assert_eq!(deploy(&s, "kr", t, &[]).code(), 0);
    let two = s.write("two.yaml", &t.replace("Name: one", "Name: two"));
    let n = events(&s, "kr").len();
    let mut child = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "update",
        "kr",
        two.to_str().unwrap_or_default(),
    ]);
    let started = std::time::Instant::now();
    while !sequence(&s, "kr", n).contains(&ev(
        "A",
        "UPDATE_IN_PROGRESS",
        "Resource creation Initiated",
    )) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the reinstall never started its create"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // The next command resumes: the recorded create is re-issued, then the
    // rest of the phases run.
    let run = cairn(&s, &["describe", "kr"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("resumed the interrupted operation"),
        "{}",
        run.stderr()
    );
    assert_eq!(status(&s, "kr"), "UPDATE_COMPLETE");
    assert_eq!(physical(&s, "kr", "A"), "two");
    assert_eq!(
        file(&s, &physical(&s, "kr", "B"))["Properties"]["Value"],
        "two"
    );
    let mut files = s.resource_files();
    files.retain(|f| f != "two.json");
    assert_eq!(files, [format!("{}.json", physical(&s, "kr", "B"))]);
    let creates = sequence(&s, "kr", n)
        .iter()
        .filter(|e| **e == ev("A", "UPDATE_COMPLETE", ""))
        .count();
    assert_eq!(creates, 1);
}

#[test]
fn a_handler_that_replaces_the_resource_on_update_gets_the_old_one_deleted() {
    let (s, h) = crate::webhooks::with_handler();
    let arn = crate::webhooks::ARN;
    let t = |extra: &str| {
        format!("Resources:\n  W:\n    Type: Custom::Widget\n    Properties:\n      ServiceToken: {arn}\n      Size: '1'\n{extra}")
    };
    assert_eq!(deploy(&s, "rp", &t(""), &[]).code(), 0);
    let first = physical(&s, "rp", "W");
    let next = s.write("next.yaml", &t("      PhysicalId: W-second\n"));
    let run = update(&s, &["rp", next.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(physical(&s, "rp", "W"), "W-second");
    let calls = h.calls();
    let call = |t: &str, p: &str| (t.to_string(), "W".to_string(), p.to_string());
    assert_eq!(
        calls[1..],
        [call("Update", &first), call("Delete", &first)],
        "{calls:?}"
    );
}

#[test]
fn an_old_resource_whose_delete_failed_is_kept_until_the_next_cairn_update_deletes_it() {
    let (s, h) = crate::webhooks::with_handler();
    let arn = crate::webhooks::ARN;
    let broken = s.write("delete-is-broken", "");
    let t = |extra: &str| {
        format!("Resources:\n  W:\n    Type: Custom::Widget\n    Properties:\n      ServiceToken: {arn}\n{extra}")
    };
    let first_template = t(&format!(
        "      FailOn: Delete\n      FailWhile: {}\n      Reason: the widget is busy\n",
        broken.display()
    ));
    assert_eq!(deploy(&s, "lf", &first_template, &[]).code(), 0);
    let first = physical(&s, "lf", "W");
    let n = events(&s, "lf").len();
    let next = s.write("next.yaml", &t("      PhysicalId: W-second\n"));
    let run = update(&s, &["lf", next.to_str().unwrap_or_default()]);
    assert_ne!(run.code(), 0, "{}", run.stdout());
    assert_eq!(status(&s, "lf"), "UPDATE_FAILED");
    assert_eq!(physical(&s, "lf", "W"), "W-second");
    let failed = format!(
        "Updated, but the provider made W-second in place of {first}, and deleting {first} failed: the widget is busy. Run cairn update again to delete it (deleting the stack deletes it too)."
    );
    assert_eq!(
        sequence(&s, "lf", n),
        [
            ev("lf", "UPDATE_IN_PROGRESS", "User Initiated"),
            ev(
                "W",
                "UPDATE_IN_PROGRESS",
                "Changed: FailOn, FailWhile, PhysicalId, Reason"
            ),
            ev("W", "UPDATE_IN_PROGRESS", &format!("The provider replaced {first} with W-second while updating it: deleting {first}")),
            ev("W", "UPDATE_FAILED", &failed),
            ev("lf", "UPDATE_FAILED", "The following resource(s) failed to update: [W]."),
        ]
    );
    // A template update would lose track of the old widget: refused.
    let third = t("      PhysicalId: W-second\n      Size: '2'\n");
    let run = deploy(&s, "lf", &third, &[]);
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr().contains(&format!(
            "has physical resources that a cairn update replaced and could not delete: W ({first}). Run cairn update lf again to delete them (or delete the stack) before updating it with a template."
        )),
        "{}",
        run.stderr()
    );
    // Once the handler deletes again, the next cairn update deletes it
    // first (a new request), then runs its phases.
    std::fs::remove_file(&broken).expect("rm");
    let run = update(&s, &["lf", "--drift-only"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "lf"), "UPDATE_COMPLETE");
    let deletes: Vec<String> = h
        .calls()
        .into_iter()
        .filter(|(t, _, p)| t == "Delete" && *p == first)
        .map(|(t, _, _)| t)
        .collect();
    assert_eq!(deletes.len(), 2, "{:?}", h.calls());
    assert_eq!(deploy(&s, "lf", &third, &[]).code(), 0);
    assert_eq!(status(&s, "lf"), "UPDATE_COMPLETE");
}

#[test]
fn a_replaced_resource_kept_by_its_update_replace_policy_is_not_deleted() {
    let (s, h) = crate::webhooks::with_handler();
    let arn = crate::webhooks::ARN;
    let t = |extra: &str| {
        format!("Resources:\n  W:\n    Type: Custom::Widget\n    UpdateReplacePolicy: Retain\n    Properties:\n      ServiceToken: {arn}\n      Size: '1'\n{extra}")
    };
    assert_eq!(deploy(&s, "rr", &t(""), &[]).code(), 0);
    let first = physical(&s, "rr", "W");
    let next = s.write("next.yaml", &t("      PhysicalId: W-second\n"));
    let run = update(&s, &["rr", next.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "rr"), "UPDATE_COMPLETE");
    assert_eq!(physical(&s, "rr", "W"), "W-second");
    let calls = h.calls();
    assert_eq!(
        calls[1..],
        [("Update".to_string(), "W".to_string(), first)],
        "{calls:?}"
    );
}
