//! Stack refactoring through the real binary: a move between stacks found
//! by logical id and a rename given with --map, with no provider call (the
//! provider's records are byte for byte what they were), the preview, and
//! the refusals (a create, a delete, a changed property, a property that
//! names its stack).

use serde_json::Value;

use crate::update::{cairn, deploy, events, physical, scratch, status};

const A: &str = "Resources:\n  Keep: {Type: Cairn::Test::Resource, Properties: {Value: k}}\n  Old: {Type: Cairn::Test::Resource, Properties: {Value: !Ref Keep}}\n  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\nOutputs:\n  Keep: {Value: !Ref Keep}\n";
const B: &str = "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n";

/// Every backing file of the provider, with its text: what a create,
/// update or delete would change.
fn provider_records(s: &crate::support::Scratch) -> Vec<(String, String)> {
    let dir = s.dir.path().join("cairn-state.db.resources");
    s.resource_files()
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(&f)).unwrap_or_default();
            (f, text)
        })
        .collect()
}

fn resources(s: &crate::support::Scratch, stack: &str) -> Vec<(String, String)> {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    let mut v: Vec<(String, String)> = run.json()["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (text("LogicalResourceId"), text("PhysicalResourceId"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_move_and_a_rename_call_no_provider_and_the_stacks_carry_on() {
    let s = scratch();
    assert_eq!(deploy(&s, "a", A, &[]).code(), 0);
    assert_eq!(deploy(&s, "b", B, &[]).code(), 0);
    let (db, old) = (physical(&s, "a", "Db"), physical(&s, "a", "Old"));
    let before = provider_records(&s);

    // Db leaves a's template and appears in b's: a move found by its id;
    // Old becomes New in a (its Ref keeps naming Keep).
    let a2 = s.write(
        "a2.yaml",
        "Resources:\n  Keep: {Type: Cairn::Test::Resource, Properties: {Value: k}}\n  New: {Type: Cairn::Test::Resource, Properties: {Value: !Ref Keep}}\nOutputs:\n  Keep: {Value: !Ref Keep}\n",
    );
    let b2 = s.write(
        "b2.yaml",
        "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n",
    );
    let stack = |name: &str, path: &std::path::Path| format!("{name}={}", path.display());
    let (sa, sb) = (stack("a", &a2), stack("b", &b2));
    let args = [
        "refactor",
        "--stack",
        &sa,
        "--stack",
        &sb,
        "--map",
        "a.Old=a.New",
    ];
    let preview = cairn(&s, &[&args[..], &["--output", "json"]].concat());
    assert_eq!(preview.code(), 0, "{}", preview.stderr());
    let shown = preview.json();
    assert_eq!(shown["Status"], "CREATE_COMPLETE");
    assert_eq!(shown["ExecutionStatus"], "AVAILABLE");
    let actions: Vec<(String, String, String)> = shown["Actions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&a["Detection"]),
                text(&a["Description"]),
                text(&a["PhysicalResourceId"]),
            )
        })
        .collect();
    assert_eq!(
        actions,
        vec![
            (
                "AUTO".into(),
                "Move a.Db (Cairn::Test::Resource) to b.Db".into(),
                db.clone()
            ),
            (
                "MANUAL".into(),
                "Rename a.Old (Cairn::Test::Resource) to a.New".into(),
                old.clone()
            ),
        ]
    );
    // The preview changed nothing.
    assert_eq!(resources(&s, "b").len(), 1);

    let run = cairn(&s, &[&args[..], &["--execute"]].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("execution EXECUTE_COMPLETE"),
        "{}",
        run.stdout()
    );
    assert_eq!(provider_records(&s), before, "a provider was called");
    let keep = physical(&s, "a", "Keep");
    assert_eq!(
        resources(&s, "a"),
        vec![("Keep".to_string(), keep), ("New".to_string(), old.clone())]
    );
    assert_eq!(
        resources(&s, "b"),
        vec![
            ("B".to_string(), physical(&s, "b", "B")),
            ("Db".to_string(), db.clone())
        ]
    );
    assert_eq!(status(&s, "a"), "UPDATE_COMPLETE");
    let tail: Vec<(String, String, String)> = events(&s, "a")
        .iter()
        .rev()
        .take(4)
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                text("LogicalResourceId"),
                text("ResourceStatus"),
                text("ResourceStatusReason"),
            )
        })
        .collect();
    let id = shown["StackRefactorId"].as_str().unwrap_or_default();
    let id = run
        .stdout()
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("stack refactor "))
        .unwrap_or(id)
        .to_string();
    let ev = |l: &str, st: &str, r: String| (l.to_string(), st.to_string(), r);
    assert_eq!(
        tail,
        vec![
            ev("a", "UPDATE_COMPLETE", format!("Stack refactor {id}")),
            ev(
                "New",
                "IMPORT_COMPLETE",
                format!("Moved from a.Old by stack refactor {id}")
            ),
            ev(
                "Old",
                "DELETE_SKIPPED",
                format!("Moved to a.New by stack refactor {id}")
            ),
            ev(
                "Db",
                "DELETE_SKIPPED",
                format!("Moved to b.Db by stack refactor {id}")
            ),
        ]
    );

    // The stacks carry on from their new templates: nothing to update,
    // and the moved resource belongs to b now (deleting a leaves it).
    let again = cairn(&s, &["deploy", "b", b2.to_str().unwrap_or_default()]);
    assert!(
        again.stderr().contains("No updates are to be performed."),
        "{}",
        again.stderr()
    );
    assert_eq!(cairn(&s, &["delete", "a"]).code(), 0);
    assert!(s.resource_files().iter().any(|f| f.contains(&db)));
    assert!(!s.resource_files().iter().any(|f| f.contains(&old)));
    assert_eq!(cairn(&s, &["delete", "b"]).code(), 0);
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
}

#[test]
fn a_refactor_creates_the_stack_it_moves_resources_into() {
    let s = scratch();
    assert_eq!(deploy(&s, "a", A, &[]).code(), 0);
    let db = physical(&s, "a", "Db");
    let before = provider_records(&s);
    let a2 = s.write(
        "a2.yaml",
        &A.replace(
            "  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n",
            "",
        ),
    );
    let data = s.write(
        "data.yaml",
        "Resources:\n  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n",
    );
    let stacks = [
        "refactor".to_string(),
        "--stack".into(),
        format!("a={}", a2.display()),
        "--stack".into(),
        format!("data={}", data.display()),
    ];
    let args: Vec<&str> = stacks.iter().map(String::as_str).collect();
    let refused = cairn(&s, &args);
    assert!(
        refused.stderr().contains(
            "Stack [data] does not exist (EnableStackCreation lets the refactor create it)"
        ),
        "{}",
        refused.stderr()
    );
    let run = cairn(
        &s,
        &[&args[..], &["--enable-stack-creation", "--execute"]].concat(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout()
            .contains("CREATE [MANUAL] Create stack data for what moves into it"),
        "{}",
        run.stdout()
    );
    assert_eq!(provider_records(&s), before, "a provider was called");
    assert_eq!(status(&s, "data"), "CREATE_COMPLETE");
    assert_eq!(resources(&s, "data"), vec![("Db".to_string(), db)]);
    let again = cairn(&s, &["deploy", "data", data.to_str().unwrap_or_default()]);
    assert!(
        again.stderr().contains("No updates are to be performed."),
        "{}",
        again.stderr()
    );
}

#[test]
fn a_refactor_that_would_create_delete_or_change_is_refused() {
    let s = scratch();
    assert_eq!(deploy(&s, "a", A, &[]).code(), 0);
    assert_eq!(deploy(&s, "b", B, &[]).code(), 0);
    let before = provider_records(&s);
    let refused = |a: &str, b: &str| {
        let (pa, pb) = (s.write("ra.yaml", a), s.write("rb.yaml", b));
        let run = cairn(
            &s,
            &[
                "refactor",
                "--stack",
                &format!("a={}", pa.display()),
                "--stack",
                &format!("b={}", pb.display()),
                "--execute",
            ],
        );
        assert_ne!(run.code(), 0, "{}", run.stdout());
        assert!(
            run.stdout()
                .contains("status CREATE_FAILED, execution UNAVAILABLE"),
            "{}",
            run.stdout()
        );
        run.stderr()
    };
    // Db dropped from a and in no other template: a delete.
    let a_without_db = A.replace(
        "  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n",
        "",
    );
    let e = refused(&a_without_db, B);
    assert!(e.contains("Resource Db of stack a is in none of the refactored templates: a refactor can't delete resources (remove it with an update first)"), "{e}");
    // A resource in no stack: a create.
    let e = refused(A, &format!("{B}  C: {{Type: Cairn::Test::Resource}}\n"));
    assert!(e.contains("Resource C of stack b's template is in no stack of the refactor: a refactor can't create resources"), "{e}");
    // Moved with another value: a change.
    let e = refused(
        &a_without_db,
        &format!("{B}  Db: {{Type: Cairn::Test::Resource, Properties: {{Value: other}}}}\n"),
    );
    assert!(e.contains("Resource Db of stack b would change (Modify Value): a refactor can't change a resource's configuration"), "{e}");
    // Moved, naming its stack: the value differs between the stacks.
    let named = A.replace("{Value: data}", "{Value: !Ref 'AWS::StackName'}");
    let s2 = scratch();
    assert_eq!(deploy(&s2, "a", &named, &[]).code(), 0);
    assert_eq!(deploy(&s2, "b", B, &[]).code(), 0);
    let (pa, pb) = (
        s2.write("ra.yaml", &named.replace("  Db: {Type: Cairn::Test::Resource, Properties: {Value: !Ref 'AWS::StackName'}}\n", "")),
        s2.write("rb.yaml", &format!("{B}  Db: {{Type: Cairn::Test::Resource, Properties: {{Value: !Ref 'AWS::StackName'}}}}\n")),
    );
    let run = cairn(
        &s2,
        &[
            "refactor",
            "--stack",
            &format!("a={}", pa.display()),
            "--stack",
            &format!("b={}", pb.display()),
        ],
    );
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr()
            .contains("Resource Db of stack b would change (Modify Value)"),
        "{}",
        run.stderr()
    );
    // Nothing reached a provider, nothing moved.
    assert_eq!(provider_records(&s), before);
    assert_eq!(resources(&s, "b").len(), 1);
    // An export another stack imports may not go with what it names.
    let exported = format!("{A}    Export: {{Name: db-name}}\n").replace(
        "Outputs:\n  Keep: {Value: !Ref Keep}\n    Export: {Name: db-name}\n",
        "Outputs:\n  Keep: {Value: !Ref Keep}\n  DbName:\n    Value: !Ref Db\n    Export: {Name: db-name}\n",
    );
    let s3 = scratch();
    assert_eq!(deploy(&s3, "a", &exported, &[]).code(), 0);
    let user = format!(
        "{B}  U: {{Type: Cairn::Test::Resource, Properties: {{Value: !ImportValue db-name}}}}\n"
    );
    assert_eq!(deploy(&s3, "b", &user, &[]).code(), 0);
    let moved_out = exported
        .replace(
            "  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n",
            "",
        )
        .replace(
            "  DbName:\n    Value: !Ref Db\n    Export: {Name: db-name}\n",
            "",
        );
    let (pa, pb) = (
        s3.write("ra.yaml", &moved_out),
        s3.write(
            "rb.yaml",
            &format!("{user}  Db: {{Type: Cairn::Test::Resource, Properties: {{Value: data}}}}\n"),
        ),
    );
    let run = cairn(
        &s3,
        &[
            "refactor",
            "--stack",
            &format!("a={}", pa.display()),
            "--stack",
            &format!("b={}", pb.display()),
        ],
    );
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr()
            .contains("Cannot delete export db-name as it is in use by b"),
        "{}",
        run.stderr()
    );
    // A changed parameter section is refused before anything else.
    let with_param = format!("Parameters:\n  P: {{Type: String, Default: x}}\n{A}");
    let e = refused(&with_param, B);
    assert!(e.contains("The template of stack a changes its Parameters: a refactor can't change or add Parameters, Conditions or Mappings"), "{e}");
}
