//! The stack engine through the real binary on a temp state file.

use serde_json::{json, Value};

use crate::support::Scratch;

fn events(s: &Scratch, stack: &str) -> Vec<Value> {
    let run = s.cairn(&["events", stack, "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut list = run.json()["StackEvents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    list.reverse(); // oldest first
    list
}

/// (logical id, status, reason) of every event, oldest first.
fn sequence(s: &Scratch, stack: &str) -> Vec<(String, String, String)> {
    events(s, stack)
        .iter()
        .map(|e| {
            (
                e["LogicalResourceId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                e["ResourceStatus"].as_str().unwrap_or_default().to_string(),
                e["ResourceStatusReason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn ev(l: &str, s: &str, r: &str) -> (String, String, String) {
    (l.into(), s.into(), r.into())
}

fn status(s: &Scratch, stack: &str) -> String {
    let run = s.cairn(&["describe", stack, "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.json()["Stacks"][0]["StackStatus"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn create_and_delete_with_exact_events() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Name: a-1, Value: x}\n  B:\n    Type: Cairn::Test::Resource\n    Properties: {Name: b-1, Value: !GetAtt A.Arn}\nOutputs:\n  Out: {Value: !GetAtt B.Value}\n",
    );
    let run = s.cairn(&["deploy", "st", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence(&s, "st"),
        vec![
            ev("st", "CREATE_IN_PROGRESS", "User Initiated"),
            ev("A", "CREATE_IN_PROGRESS", ""),
            ev("A", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ev("A", "CREATE_COMPLETE", ""),
            ev("B", "CREATE_IN_PROGRESS", ""),
            ev("B", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ev("B", "CREATE_COMPLETE", ""),
            ev("st", "CREATE_COMPLETE", ""),
        ]
    );
    let all = events(&s, "st");
    assert_eq!(all[0]["ResourceType"], json!("AWS::CloudFormation::Stack"));
    assert_eq!(all[0]["PhysicalResourceId"], all[0]["StackId"]);
    assert_eq!(all[3]["PhysicalResourceId"], json!("a-1"));
    assert_eq!(all[4]["ResourceProperties"], json!("{}"));
    assert_eq!(
        all[5]["ResourceProperties"],
        json!("{\"Name\":\"b-1\",\"Value\":\"arn:cairn:test::resource/a-1\"}")
    );
    assert_eq!(s.resource_files(), vec!["a-1.json", "b-1.json"]);
    let out = s.cairn(&["outputs", "st", "--output", "json"]).json();
    assert_eq!(
        out,
        json!({"Outputs": [{"OutputKey": "Out", "OutputValue": "arn:cairn:test::resource/a-1"}]})
    );

    let stack_id = s.cairn(&["describe", "st", "--output", "json"]).json()["Stacks"][0]["StackId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        stack_id.starts_with("arn:aws:cloudformation:us-east-1:123456789012:stack/st/"),
        "{stack_id}"
    );
    let run = s.cairn(&["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(s.resource_files().is_empty());
    let seq = sequence(&s, &stack_id);
    assert_eq!(
        seq[8..].to_vec(),
        vec![
            ev("st", "DELETE_IN_PROGRESS", "User Initiated"),
            ev("B", "DELETE_IN_PROGRESS", ""),
            ev("B", "DELETE_COMPLETE", ""),
            ev("A", "DELETE_IN_PROGRESS", ""),
            ev("A", "DELETE_COMPLETE", ""),
            ev("st", "DELETE_COMPLETE", ""),
        ]
    );
    // Deleted stacks: gone by name, listed and describable by id.
    let run = s.cairn(&["describe", "st"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        "error: Stack with id st does not exist"
    );
    assert_eq!(status(&s, &stack_id), "DELETE_COMPLETE");
    let list = s.cairn(&["list", "--output", "json"]).json();
    assert_eq!(
        list["StackSummaries"][0]["StackStatus"],
        json!("DELETE_COMPLETE")
    );
    assert!(list["StackSummaries"][0]["DeletionTime"].is_string());
    // Deleting again is not an error.
    assert_eq!(s.cairn(&["delete", "st"]).code(), 0);
}

#[test]
fn independent_resources_run_concurrently() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {WaitSeconds: 0.5}}\n  B: {Type: Cairn::Test::Resource, Properties: {WaitSeconds: 0.5}}\n",
    );
    assert_eq!(s.cairn(&["deploy", "par", t.to_str().unwrap()]).code(), 0);
    let seq = sequence(&s, "par");
    let first_complete = seq.iter().position(|e| e.1 == "CREATE_COMPLETE").unwrap();
    let initiated = seq
        .iter()
        .filter(|e| e.2 == "Resource creation Initiated")
        .count();
    let initiated_before = seq[..first_complete]
        .iter()
        .filter(|e| e.2 == "Resource creation Initiated")
        .count();
    assert_eq!(
        (initiated, initiated_before),
        (2, 2),
        "both creates overlap: {seq:?}"
    );
}

#[test]
fn failed_create_rolls_back_with_the_exact_sequence() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Name: a-ok}\n  B:\n    Type: Cairn::Test::Resource\n    DependsOn: A\n    Properties: {Fail: create, FailMessage: disk full}\n",
    );
    let run = s.cairn(&["deploy", "fails", t.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().starts_with("error: stack fails is ROLLBACK_COMPLETE: The following resource(s) failed to create: [B]. Rollback requested by user.\n  B CREATE_FAILED: disk full"),
        "{}",
        run.stderr()
    );
    assert_eq!(
        sequence(&s, "fails"),
        vec![
            ev("fails", "CREATE_IN_PROGRESS", "User Initiated"),
            ev("A", "CREATE_IN_PROGRESS", ""),
            ev("A", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ev("A", "CREATE_COMPLETE", ""),
            ev("B", "CREATE_IN_PROGRESS", ""),
            ev("B", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ev("B", "CREATE_FAILED", "disk full"),
            ev(
                "fails",
                "ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to create: [B]. Rollback requested by user."
            ),
            ev("B", "DELETE_IN_PROGRESS", ""),
            ev("B", "DELETE_COMPLETE", ""),
            ev("A", "DELETE_IN_PROGRESS", ""),
            ev("A", "DELETE_COMPLETE", ""),
            ev("fails", "ROLLBACK_COMPLETE", ""),
        ]
    );
    assert!(s.resource_files().is_empty());
    // A ROLLBACK_COMPLETE stack still holds the name until deleted, and
    // cannot be updated (seed 000 run 3); its state is reported before
    // anything about the new template.
    let broken = s.write("broken.yaml", "Resources: [not, a, map]\n");
    for body in [&t, &broken] {
        let again = s.cairn(&["deploy", "fails", body.to_str().unwrap()]);
        assert_eq!(again.code(), 1);
        assert!(
            again
                .stderr()
                .contains("is in ROLLBACK_COMPLETE state and can not be updated."),
            "{}",
            again.stderr()
        );
    }
}

#[test]
fn a_failure_cancels_creates_in_flight_and_the_rollback_deletes_them() {
    let s = Scratch::new();
    // A fails after 0.2 s while B (1.5 s) is in flight; C waits on B, never starts.
    let t = s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Fail: create, WaitSeconds: 0.2}}\n  B: {Type: Cairn::Test::Resource, Properties: {Name: slow-b, WaitSeconds: 1.5}}\n  C: {Type: Cairn::Test::Resource, DependsOn: B}\n",
    );
    let run = s.cairn(&["deploy", "cx", t.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    let seq = sequence(&s, "cx");
    let b: Vec<_> = seq.iter().filter(|e| e.0 == "B").cloned().collect();
    assert_eq!(
        b,
        vec![
            ev("B", "CREATE_IN_PROGRESS", ""),
            ev("B", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ev("B", "CREATE_FAILED", "Resource creation cancelled"),
            ev("B", "DELETE_IN_PROGRESS", ""),
            ev("B", "DELETE_COMPLETE", ""),
        ]
    );
    assert!(seq.iter().all(|e| e.0 != "C"), "C never started: {seq:?}");
    assert!(seq.contains(&ev(
        "cx",
        "ROLLBACK_IN_PROGRESS",
        "The following resource(s) failed to create: [A, B]. Rollback requested by user."
    )));
    assert_eq!(seq.last(), Some(&ev("cx", "ROLLBACK_COMPLETE", "")));
    // B's create had reached the provider (its file exists from the start of
    // the call): the rollback re-issued it to learn the id and deleted it.
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
}

#[test]
fn disable_rollback_keeps_resources_and_on_failure_delete_deletes() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Name: kept}\n  B:\n    Type: Cairn::Test::Resource\n    DependsOn: A\n    Properties: {Fail: [create]}\n",
    );
    let run = s.cairn(&["deploy", "keep", t.to_str().unwrap(), "--disable-rollback"]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "keep"), "CREATE_FAILED");
    let d = s.cairn(&["describe", "keep", "--output", "json"]).json();
    assert_eq!(
        d["Stacks"][0]["StackStatusReason"],
        json!("The following resource(s) failed to create: [B]. ")
    );
    assert_eq!(s.resource_files(), vec!["kept.json"]);
    assert_eq!(s.cairn(&["delete", "keep"]).code(), 0);
    assert!(s.resource_files().is_empty());

    let run = s.cairn(&[
        "deploy",
        "gone",
        t.to_str().unwrap(),
        "--on-failure",
        "DELETE",
    ]);
    assert_eq!(run.code(), 1);
    let list = s.cairn(&["list", "--output", "json"]).json();
    let gone = list["StackSummaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["StackName"] == "gone")
        .cloned()
        .unwrap();
    assert_eq!(gone["StackStatus"], json!("DELETE_COMPLETE"));
    assert!(s.resource_files().is_empty());
}

#[test]
fn deletion_policy_retain_and_retry_with_retain() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Transform: AWS::LanguageExtensions\nParameters:\n  Keep: {Type: String, Default: 'yes'}\nConditions:\n  Keeping: !Equals [!Ref Keep, 'yes']\nResources:\n  Kept:\n    Type: Cairn::Test::Resource\n    DeletionPolicy: !If [Keeping, Retain, Delete]\n    Properties: {Name: kept}\n  Stuck:\n    Type: Cairn::Test::Resource\n    Properties: {Name: stuck, Fail: delete, FailMessage: still in use}\n  Plain:\n    Type: Cairn::Test::Resource\n    Properties: {Name: plain}\n",
    );
    let deploy = s.cairn(&[
        "deploy",
        "pol",
        t.to_str().unwrap(),
        "--capabilities",
        "CAPABILITY_AUTO_EXPAND",
    ]);
    assert_eq!(deploy.code(), 0, "{}", deploy.stderr());
    let run = s.cairn(&["delete", "pol"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().starts_with("error: stack pol is DELETE_FAILED: The following resource(s) failed to delete: [Stuck].\n  Stuck DELETE_FAILED: still in use"),
        "{}",
        run.stderr()
    );
    assert_eq!(run.stderr().lines().count(), 2, "{}", run.stderr());
    let res = s.cairn(&["resources", "pol", "--output", "json"]).json();
    let by_id = |id: &str| {
        res["StackResources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["LogicalResourceId"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_id("Kept")["ResourceStatus"], json!("DELETE_SKIPPED"));
    assert_eq!(by_id("Stuck")["ResourceStatus"], json!("DELETE_FAILED"));
    assert_eq!(
        by_id("Stuck")["ResourceStatusReason"],
        json!("still in use")
    );
    assert_eq!(by_id("Plain")["ResourceStatus"], json!("DELETE_COMPLETE"));
    assert_eq!(s.resource_files(), vec!["kept.json", "stuck.json"]);

    let run = s.cairn(&["delete", "pol", "--retain", "Stuck"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let stack_id = s.cairn(&["list", "--output", "json"]).json()["StackSummaries"][0]["StackId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(status(&s, &stack_id), "DELETE_COMPLETE");
    assert_eq!(s.resource_files(), vec!["kept.json", "stuck.json"]);
}

#[test]
fn retain_is_refused_unless_delete_failed() {
    let s = Scratch::new();
    let t = s.write("t.yaml", "Resources:\n  A: {Type: Cairn::Test::Resource}\n");
    assert_eq!(s.cairn(&["deploy", "r", t.to_str().unwrap()]).code(), 0);
    let run = s.cairn(&["delete", "r", "--retain", "A"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("RetainResources can only be specified when stack is in DELETE_FAILED state"),
        "{}",
        run.stderr()
    );
    assert_eq!(status(&s, "r"), "CREATE_COMPLETE");
}

#[test]
fn exports_are_unique_and_protected_while_imported() {
    let s = Scratch::new();
    let producer = s.write(
        "p.yaml",
        "Resources:\n  Net: {Type: Cairn::Test::Resource, Properties: {Name: net}}\nOutputs:\n  NetId:\n    Value: !Ref Net\n    Export: {Name: shared-net}\n",
    );
    let consumer = s.write(
        "c.yaml",
        "Resources:\n  App: {Type: Cairn::Test::Resource, Properties: {Value: !ImportValue shared-net}}\nOutputs:\n  Got: {Value: !GetAtt App.Value}\n",
    );
    assert_eq!(
        s.cairn(&["deploy", "prod", producer.to_str().unwrap()])
            .code(),
        0
    );
    let run = s.cairn(&["deploy", "cons", consumer.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "cons", "--output", "json"]).json()["Outputs"][0]["OutputValue"],
        json!("net")
    );

    let dup = s.write(
        "d.yaml",
        "Resources:\n  Other: {Type: Cairn::Test::Resource}\nOutputs:\n  X:\n    Value: !Ref Other\n    Export: {Name: shared-net}\n",
    );
    let run = s.cairn(&["deploy", "dup", dup.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().starts_with("error: stack dup is ROLLBACK_COMPLETE: Export with name shared-net is already exported by stack prod"),
        "{}",
        run.stderr()
    );

    let run = s.cairn(&["delete", "prod"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        "error: Export shared-net cannot be deleted as it is in use by cons"
    );
    assert_eq!(status(&s, "prod"), "CREATE_COMPLETE");
    assert_eq!(s.cairn(&["delete", "cons"]).code(), 0);
    assert_eq!(s.cairn(&["delete", "prod"]).code(), 0);

    let missing = s.write("m.yaml", "Resources:\n  App: {Type: Cairn::Test::Resource, Properties: {Value: !ImportValue nope}}\n");
    let run = s.cairn(&["deploy", "miss", missing.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("No export named nope found."),
        "{}",
        run.stderr()
    );
}

/// CloudFormation's Fn::GetStackOutput (intrinsic-function-reference-getstackoutput):
/// another stack's output without an export, read when the operation runs
/// (a weak reference: the producer may change or go), in the long and the
/// short form; Region and RoleArn may only name this engine's own.
#[test]
fn get_stack_output_reads_another_stacks_output_without_an_export() {
    let s = Scratch::new();
    let producer = s.write(
        "net.yaml",
        "Resources:\n  Vpc: {Type: Cairn::Test::Resource, Properties: {Name: vpc-1}}\nOutputs:\n  VpcId: {Value: !Ref Vpc}\n",
    );
    assert_eq!(
        s.cairn(&["deploy", "net", producer.to_str().unwrap()])
            .code(),
        0
    );
    let consumer = s.write(
        "app.yaml",
        "Parameters:\n  Source: {Type: String, Default: net}\nResources:\n  App:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value:\n        Fn::GetStackOutput: {StackName: !Ref Source, OutputName: VpcId, Region: us-east-1}\nOutputs:\n  Short: {Value: !GetStackOutput {StackName: net, OutputName: VpcId}}\n",
    );
    let run = s.cairn(&["deploy", "app", consumer.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = s.cairn(&["outputs", "app", "--output", "json"]).json();
    assert_eq!(out["Outputs"][0]["OutputValue"], "vpc-1");
    let app = s.cairn(&["resources", "app", "--output", "json"]).json();
    let physical = app["StackResources"][0]["PhysicalResourceId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        crate::update::file(&s, &physical)["Properties"]["Value"],
        "vpc-1"
    );
    // A weak reference: the producer goes, the consumer stays.
    assert_eq!(s.cairn(&["delete", "net"]).code(), 0);
    assert_eq!(
        s.cairn(&["outputs", "app", "--output", "json"]).json()["Outputs"][0]["OutputValue"],
        "vpc-1"
    );
    // Read when the operation runs: now there is no such output.
    let run = s.cairn(&["deploy", "again", consumer.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(
            "Fn::GetStackOutput: stack net has no output VpcId (the stack does not exist, or has no such output with a value)"
        ),
        "{}",
        run.stderr()
    );
    let other = s.write(
        "other.yaml",
        "Resources:\n  App: {Type: Cairn::Test::Resource, Properties: {Value: {'Fn::GetStackOutput': {StackName: net, OutputName: VpcId, Region: eu-west-1}}}}\n",
    );
    let run = s.cairn(&["validate", other.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Fn::GetStackOutput: Region eu-west-1 is not this engine's region us-east-1; Cairn reads the outputs of its own stacks only"),
        "{}",
        run.stderr()
    );
}

#[test]
fn no_echo_parameters_are_masked() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Parameters:\n  Pw: {Type: String, NoEcho: true}\n  User: {Type: String}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Sub '${User}:${Pw}'}}\n",
    );
    let run = s.cairn(&[
        "deploy",
        "sec",
        t.to_str().unwrap(),
        "--parameter",
        "Pw=hunter2",
        "-p",
        "User=bob",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!run.stdout().contains("hunter2"));
    let d = s.cairn(&["describe", "sec", "--output", "json"]).json();
    assert_eq!(
        d["Stacks"][0]["Parameters"],
        json!([{"ParameterKey": "Pw", "ParameterValue": "****"}, {"ParameterKey": "User", "ParameterValue": "bob"}])
    );
    let ev = s.cairn(&["events", "sec", "--output", "json"]).stdout();
    assert!(!ev.contains("hunter2"), "{ev}");
    assert!(ev.contains("bob:****"), "{ev}");
}

#[test]
fn json_output_uses_cloudformation_field_names() {
    let s = Scratch::new();
    let t = s.write("t.yaml", "Description: d\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: n}}\nOutputs:\n  O: {Value: !Ref A, Description: the name, Export: {Name: n-export}}\n");
    assert_eq!(s.cairn(&["deploy", "js", t.to_str().unwrap()]).code(), 0);
    let d = s.cairn(&["describe", "js", "--output", "json"]).json();
    let st = &d["Stacks"][0];
    for k in [
        "StackName",
        "StackId",
        "StackStatus",
        "CreationTime",
        "Description",
        "Outputs",
        "Parameters",
    ] {
        assert!(st.get(k).is_some(), "{k} in {st}");
    }
    assert_eq!(
        st["Outputs"],
        json!([{"OutputKey": "O", "OutputValue": "n", "Description": "the name", "ExportName": "n-export"}])
    );
    let r = s.cairn(&["resources", "js", "--output", "json"]).json();
    let r0 = &r["StackResources"][0];
    assert_eq!(r0["LogicalResourceId"], json!("A"));
    assert_eq!(r0["PhysicalResourceId"], json!("n"));
    assert_eq!(r0["ResourceType"], json!("Cairn::Test::Resource"));
    assert_eq!(r0["ResourceStatus"], json!("CREATE_COMPLETE"));
    assert!(r0["Timestamp"].is_string());
    let e = s.cairn(&["events", "js", "--output", "json"]).json();
    let e0 = &e["StackEvents"][0];
    for k in [
        "EventId",
        "StackId",
        "StackName",
        "LogicalResourceId",
        "PhysicalResourceId",
        "ResourceType",
        "Timestamp",
        "ResourceStatus",
    ] {
        assert!(e0.get(k).is_some(), "{k} in {e0}");
    }
    let tpl = s.cairn(&["template", "js", "--output", "json"]).json();
    assert_eq!(
        tpl["TemplateBody"].as_str().unwrap(),
        std::fs::read_to_string(&t).unwrap()
    );
}

#[test]
fn bad_input_is_one_clear_line() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Parameters:\n  P: {Type: Number}\nResources:\n  A: {Type: Cairn::Test::Resource}\n",
    );
    let run = s.cairn(&["deploy", "x", t.to_str().unwrap()]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        format!("error: {}: Parameters: [P] must have values", t.display())
    );
    let run = s.cairn(&["deploy", "x", t.to_str().unwrap(), "-p", "P=abc"]);
    assert_eq!(
        run.stderr().trim(),
        format!("error: {}: Parameter 'P' must be a number", t.display())
    );
    let run = s.cairn(&["deploy", "1bad", t.to_str().unwrap(), "-p", "P=1"]);
    assert!(
        run.stderr()
            .contains("Value '1bad' at 'stackName' failed to satisfy constraint"),
        "{}",
        run.stderr()
    );
    let garbage = s.write("state.db", "this is not sqlite at all, not even close................................................................................");
    let run = s.cairn(&["--state", garbage.to_str().unwrap(), "list"]);
    assert_eq!(run.code(), 1);
    assert_eq!(run.stderr().lines().count(), 1, "{}", run.stderr());
    assert!(
        run.stderr().starts_with("error: state file error: "),
        "{}",
        run.stderr()
    );
}

#[test]
fn local_file_and_random_string_are_real() {
    let s = Scratch::new();
    let target = s.dir.path().join("out/secret.txt");
    let t = s.write(
        "t.yaml",
        &format!(
            "Resources:\n  Pw:\n    Type: Cairn::Random::String\n    Properties: {{Length: 24, Characters: abcdef}}\n  F:\n    Type: Cairn::Local::File\n    Properties:\n      Path: '{}'\n      Content: !GetAtt Pw.Value\n      Mode: '0600'\nOutputs:\n  Where: {{Value: !Ref F}}\n",
            target.display()
        ),
    );
    let run = s.cairn(&["deploy", "files", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let content = std::fs::read_to_string(&target).unwrap();
    assert_eq!(content.len(), 24);
    assert!(content.chars().all(|c| "abcdef".contains(c)), "{content}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let out = s.cairn(&["outputs", "files", "--output", "json"]).json();
    assert_eq!(
        out["Outputs"][0]["OutputValue"],
        json!(target.display().to_string())
    );
    assert_eq!(s.cairn(&["delete", "files"]).code(), 0);
    assert!(!target.exists());
}

#[test]
fn a_create_that_timed_out_is_not_forgotten() {
    // The test resource writes its file at once, then takes WaitSeconds; the
    // engine gives up after call_timeout_seconds: the file exists, but no
    // physical id was returned.
    let s = Scratch::new();
    s.write("cairn.toml", "[engine]\ncall_timeout_seconds = 1\n");
    let t = s.write(
        "t.yaml",
        "Resources:\n  Slow: {Type: Cairn::Test::Resource, Properties: {Name: slow-one, WaitSeconds: 3}}\n",
    );
    let run = s.cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "st",
        t.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 1);
    // The rollback asked the provider again (same request id); that timed out
    // too, so the delete fails and keeps the record instead of forgetting
    // the file.
    assert_eq!(s.resource_files(), ["slow-one.json"]);
    let seq = sequence(&s, "st");
    assert!(
        seq.contains(&ev(
            "Slow",
            "CREATE_FAILED",
            "Resource creation timed out after 1 seconds"
        )),
        "{seq:?}"
    );
    let failed = seq
        .iter()
        .find(|e| e.0 == "Slow" && e.1 == "DELETE_FAILED")
        .unwrap_or_else(|| panic!("{seq:?}"));
    assert!(
        failed.2.starts_with("Cannot tell whether the create that did not finish made a resource: asking the provider again (request ")
            && failed.2.ends_with("failed: Resource creation timed out after 1 seconds. Delete again when the provider answers."),
        "{}",
        failed.2
    );
    assert_eq!(status(&s, "st"), "ROLLBACK_FAILED");
    // With time enough, deleting learns the resource and deletes it.
    s.write("cairn.toml", "[engine]\ncall_timeout_seconds = 30\n");
    let run = s.cairn(&["--config", "cairn.toml", "delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(s.resource_files().is_empty());
}

/// Finding 4 of the resource-call protocol issue: a create cancelled by the
/// stack's timeout was sent again by the rollback (to learn what it made),
/// which waited the whole 150 s again before deleting: the "1-minute"
/// stack ended after 3.5 minutes. Now the engine tells the provider it
/// stopped waiting; the test resource undoes its file and confirms that
/// nothing was made, so the rollback has nothing to ask or delete.
#[test]
fn a_create_cancelled_by_the_stack_timeout_is_not_run_again() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Resources:\n  Quick: {Type: Cairn::Test::Resource, Properties: {Name: quick}}\n  Slow:\n    Type: Cairn::Test::Resource\n    DependsOn: Quick\n    Properties: {Name: slow, WaitSeconds: 150}\n",
    );
    let started = std::time::Instant::now();
    let run = s.cairn(&[
        "deploy",
        "st",
        t.to_str().unwrap(),
        "--timeout-minutes",
        "1",
    ]);
    let took = started.elapsed();
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        took >= std::time::Duration::from_secs(60) && took < std::time::Duration::from_secs(80),
        "{took:?}"
    );
    assert_eq!(status(&s, "st"), "ROLLBACK_COMPLETE");
    let seq = sequence(&s, "st");
    let tail: Vec<_> = seq
        .iter()
        .skip_while(|e| e.1 != "CREATE_FAILED")
        .cloned()
        .collect();
    assert_eq!(
        tail,
        [
            ev("Slow", "CREATE_FAILED", "Resource creation cancelled"),
            ev(
                "st",
                "ROLLBACK_IN_PROGRESS",
                "Stack creation time exceeded the specified timeout. Rollback requested by user."
            ),
            ev("Slow", "DELETE_IN_PROGRESS", ""),
            ev("Slow", "DELETE_COMPLETE", ""),
            ev("Quick", "DELETE_IN_PROGRESS", ""),
            ev("Quick", "DELETE_COMPLETE", ""),
            ev("st", "ROLLBACK_COMPLETE", ""),
        ]
    );
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
}

/// Finding 2 of the resource-call protocol issue: a delete treated every
/// failed re-ask other than a timeout as "nothing was made", so a create
/// whose outcome was unknown was forgotten when its provider could not
/// start at delete time. Now that is no answer: the delete fails and keeps
/// the record, and a delete once the provider is back removes it.
#[test]
fn a_delete_does_not_forget_an_unknown_create_while_its_provider_cannot_start() {
    let s = Scratch::new();
    s.write("cairn.toml", "[engine]\ncall_timeout_seconds = 1\n");
    let t = s.write(
        "t.yaml",
        "Resources:\n  Slow: {Type: Cairn::Test::Resource, Properties: {Name: slow-one, WaitSeconds: 3}}\n",
    );
    let run = s.cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "st",
        t.to_str().unwrap(),
        "--on-failure",
        "DO_NOTHING",
    ]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_eq!(status(&s, "st"), "CREATE_FAILED");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(s.resource_files(), ["slow-one.json"]);
    // The test resource's type is now served by a plugin that cannot start.
    s.write(
        "down.toml",
        "[engine]\ncall_timeout_seconds = 30\n\n[[providers]]\nkind = \"builtin\"\nname = \"builtin:random\"\n\n[[providers]]\nkind = \"dylib\"\nname = \"gone\"\npath = \"/nonexistent/libgone.so\"\ntypes = [\"Cairn::Test::Resource\"]\n",
    );
    let run = s.cairn(&["--config", "down.toml", "delete", "st"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_eq!(status(&s, "st"), "DELETE_FAILED");
    let seq = sequence(&s, "st");
    let failed = seq
        .iter()
        .find(|e| e.0 == "Slow" && e.1 == "DELETE_FAILED")
        .unwrap_or_else(|| panic!("{seq:?}"));
    assert!(
        failed.2.starts_with("Cannot tell whether the create that did not finish made a resource: asking the provider again (request ")
            && failed.2.contains("gone")
            && failed.2.ends_with(". Delete again when the provider answers."),
        "{}",
        failed.2
    );
    assert_eq!(s.resource_files(), ["slow-one.json"]);
    s.write("up.toml", "[engine]\ncall_timeout_seconds = 30\n");
    let run = s.cairn(&["--config", "up.toml", "delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(s.resource_files().is_empty());
}

/// The failed update's rollback events of `logical`: its cleanup's
/// DELETE_FAILED reason, which must say the outcome is unknown.
fn assert_cannot_tell(seq: &[(String, String, String)], logical: &str) {
    let failed = seq
        .iter()
        .find(|e| e.0 == logical && e.1 == "DELETE_FAILED")
        .unwrap_or_else(|| panic!("{seq:?}"));
    assert!(
        failed.2.starts_with("Cannot tell whether the create that did not finish made a resource: asking the provider again (request ")
            && failed.2.ends_with("failed: Resource creation timed out after 1 seconds. Delete again when the provider answers."),
        "{}",
        failed.2
    );
}

/// Finding 1 of the resource-call protocol issue: an update that adds a
/// resource whose create times out rolled back "deleting" it with no
/// provider call, and the resource leaked. Now the rollback asks again,
/// and while that cannot tell, the stack ends UPDATE_ROLLBACK_FAILED with
/// the record kept; continue-rollback deletes it once the provider answers.
#[test]
fn an_update_whose_added_resource_timed_out_does_not_forget_it() {
    let s = Scratch::new();
    s.write("cairn.toml", "[engine]\ncall_timeout_seconds = 1\n");
    let one = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Name: a-one}}\n";
    let t1 = s.write("t1.yaml", one);
    let t2 = s.write(
        "t2.yaml",
        &format!("{one}  Slow: {{Type: Cairn::Test::Resource, Properties: {{Name: slow-added, WaitSeconds: 3}}}}\n"),
    );
    let cfg = ["--config", "cairn.toml"];
    let deploy = |t: &std::path::Path| {
        s.cairn(&[cfg[0], cfg[1], "deploy", "st", t.to_str().unwrap()])
            .code()
    };
    assert_eq!(deploy(&t1), 0);
    assert_eq!(deploy(&t2), 1);
    let seq = sequence(&s, "st");
    assert!(
        seq.contains(&ev(
            "Slow",
            "CREATE_FAILED",
            "Resource creation timed out after 1 seconds"
        )),
        "{seq:?}"
    );
    assert_cannot_tell(&seq, "Slow");
    assert!(
        !seq.iter()
            .any(|e| e.0 == "Slow" && e.1 == "DELETE_COMPLETE"),
        "{seq:?}"
    );
    assert!(
        seq.contains(&ev(
            "st",
            "UPDATE_ROLLBACK_FAILED",
            "The following resource(s) failed to delete: [Slow]. "
        )),
        "{seq:?}"
    );
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_FAILED");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(s.resource_files(), ["a-one.json", "slow-added.json"]);
    // With time enough, continuing the rollback learns and deletes it.
    s.write("cairn.toml", "[engine]\ncall_timeout_seconds = 30\n");
    let run = s.cairn(&[cfg[0], cfg[1], "continue-rollback", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_COMPLETE");
    assert_eq!(s.resource_files(), ["a-one.json"]);
    assert_eq!(s.cairn(&[cfg[0], cfg[1], "delete", "st"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

/// Finding 1, by replacement: the replacing create times out; its
/// resource is kept on record through the rollback and a later delete
/// removes both physical resources.
#[test]
fn an_update_whose_replacement_timed_out_does_not_forget_it() {
    let s = Scratch::new();
    s.write("cairn.toml", "[engine]\ncall_timeout_seconds = 1\n");
    let t1 = s.write(
        "t1.yaml",
        "Resources:\n  R: {Type: Cairn::Test::Resource, Properties: {Name: r-one}}\n",
    );
    let t2 = s.write(
        "t2.yaml",
        "Resources:\n  R: {Type: Cairn::Test::Resource, Properties: {Name: r-two, WaitSeconds: 3}}\n",
    );
    let cfg = ["--config", "cairn.toml"];
    let deploy = |t: &std::path::Path| {
        s.cairn(&[cfg[0], cfg[1], "deploy", "st", t.to_str().unwrap()])
            .code()
    };
    assert_eq!(deploy(&t1), 0);
    assert_eq!(deploy(&t2), 1);
    let seq = sequence(&s, "st");
    assert_cannot_tell(&seq, "R");
    assert_eq!(status(&s, "st"), "UPDATE_ROLLBACK_FAILED");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(s.resource_files(), ["r-one.json", "r-two.json"]);
    s.write("cairn.toml", "[engine]\ncall_timeout_seconds = 30\n");
    let run = s.cairn(&[cfg[0], cfg[1], "delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
}

/// At a 100-column terminal, event lines fit (the reason wraps below them,
/// indented) and the progress line counts `done/total`.
#[test]
fn events_fit_the_terminal_and_progress_shows_the_total() {
    let s = Scratch::new();
    s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {WaitSeconds: 0.3}}\n  VeryLongLogicalIdentifierForTheSecondResourceOfThisStackThatGoesOn: {Type: Cairn::Test::Resource, DependsOn: A}\n  Bad: {Type: Cairn::Test::Resource, DependsOn: A, Properties: {Fail: create, FailMessage: \"this resource was told to fail its create and the reason is deliberately long so that it must wrap onto several lines of a narrow terminal window\"}}\n",
    );
    let cmd = format!(
        "stty cols 100 rows 50; {} deploy w t.yaml",
        env!("CARGO_BIN_EXE_cairn")
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(s.dir.path())
        .env_remove("CAIRN_CONFIG")
        .env_remove("CAIRN_STATE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script runs cairn in a pseudo-terminal");
    let text = String::from_utf8_lossy(&out.stdout).replace("\u{1b}[2K", "");
    let event_lines: Vec<&str> = text
        .split(['\r', '\n'])
        .filter(|l| {
            let b = l.as_bytes();
            l.len() > 12 && b[2] == b':' && b[5] == b':' && b[8] == b'.'
        })
        .collect();
    assert!(event_lines.len() >= 8, "{text}");
    for line in &event_lines {
        assert!(line.chars().count() <= 100, "{line:?}");
    }
    assert!(
        event_lines
            .iter()
            .any(|l| l.contains("VeryLongLogicalIdentifierForTheSecondResour") && l.ends_with('…')),
        "{event_lines:?}"
    );
    assert!(
        text.contains("\n              this resource was told to fail its create and the reason is deliberately long so that"),
        "{text}"
    );
    assert!(text.contains("CREATE_IN_PROGRESS: 0/3 done"), "{text}");
}

/// `--data-dir` (or CAIRN_DATA_DIR, `[engine] data_dir`) says where the
/// test resource's files live; two state files given one data directory
/// share them.
#[test]
fn the_data_directory_is_configurable() {
    let s = Scratch::new();
    s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n",
    );
    let run = s.cairn(&["--data-dir", "shared", "deploy", "st", "t.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let files =
        |dir: &str| -> usize { crate::support::backing_files_in(&s.dir.path().join(dir)).len() };
    assert_eq!(files("shared"), 1);
    assert!(s.resource_files().is_empty());
    s.write(
        "c.toml",
        "[engine]\nstate = \"other.db\"\ndata_dir = \"shared\"\n",
    );
    let run = s.cairn(&["--config", "c.toml", "deploy", "st", "t.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(files("shared"), 2);
    let run = s.cairn(&["--data-dir", "shared", "delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(files("shared"), 1);
}
