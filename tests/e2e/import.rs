//! Resource import through the real binary: a file made out of band joins
//! a stack without being created (IMPORT_IN_PROGRESS, IMPORT_COMPLETE),
//! drift then compares the template with it, CloudFormation's refusals
//! change nothing, and its DeletionPolicy keeps it when it leaves.

use crate::update::{cairn, count, deploy, physical, scratch, sequence_after, status};

fn base() -> String {
    "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Name: a1, Value: x}\n"
        .to_string()
}

/// BASE with the file `path` (its content `hello`) under `policy`.
fn with_file(path: &str, policy: Option<&str>) -> String {
    let policy = policy
        .map(|p| format!("    DeletionPolicy: {p}\n"))
        .unwrap_or_default();
    format!(
        "{}  F:\n    Type: Cairn::Local::File\n{policy}    Properties: {{Path: '{path}', Content: hello}}\n",
        base()
    )
}

/// `cairn import STACK TEMPLATE --resources LIST`.
fn import(
    s: &crate::support::Scratch,
    stack: &str,
    template: &std::path::Path,
    list: &std::path::Path,
) -> crate::support::Run {
    cairn(
        s,
        &[
            "import",
            stack,
            template.to_str().unwrap_or_default(),
            "--resources",
            list.to_str().unwrap_or_default(),
        ],
    )
}

fn resources(list: &[(&str, &str, &str, &str)]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|(ty, logical, key, value)| {
            format!("- {{ResourceType: '{ty}', LogicalResourceId: {logical}, ResourceIdentifier: {{{key}: '{value}'}}}}\n")
        })
        .collect();
    items.concat()
}

#[test]
fn a_file_made_out_of_band_is_imported_then_drift_compares_it() {
    let s = scratch();
    assert_eq!(deploy(&s, "st", &base(), &[]).code(), 0);
    // Made by hand, outside any stack.
    let file = s.dir.path().join("made-by-hand.txt");
    std::fs::write(&file, "hello").unwrap_or_default();
    let path = file.display().to_string();
    let template = s.write("with-file.yaml", &with_file(&path, Some("Retain")));
    let list = s.write(
        "import.yaml",
        &resources(&[("Cairn::Local::File", "F", "Path", &path)]),
    );
    let before = count(&s, "st");
    let run = import(&s, "st", &template, &list);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("stack st is IMPORT_COMPLETE"),
        "{}",
        run.stdout()
    );
    let seq: Vec<(String, String, String)> = sequence_after(&s, "st", before)
        .into_iter()
        .map(|(l, st, _, p)| (l, st, p))
        .collect();
    let ev = |l: &str, st: &str, p: &str| (l.to_string(), st.to_string(), p.to_string());
    assert_eq!(
        seq,
        vec![
            ev("st", "IMPORT_IN_PROGRESS", ""),
            ev("F", "IMPORT_IN_PROGRESS", &path),
            ev("F", "IMPORT_COMPLETE", &path),
            ev("st", "IMPORT_COMPLETE", ""),
        ]
    );
    assert_eq!(physical(&s, "st", "F"), path);
    // The file was not written: it is the one made by hand.
    assert_eq!(std::fs::read_to_string(&file).unwrap_or_default(), "hello");
    // Drift compares the template with it.
    let drift = cairn(&s, &["drift", "st", "--output", "json"]);
    assert_eq!(drift.code(), 0, "{}", drift.stderr());
    assert_eq!(
        drift.json()["StackDriftStatus"],
        "IN_SYNC",
        "{}",
        drift.stdout()
    );
    std::fs::write(&file, "changed by hand").unwrap_or_default();
    let drift = cairn(&s, &["drift", "st", "--output", "json"]);
    assert_eq!(
        drift.json()["StackDriftStatus"],
        "DRIFTED",
        "{}",
        drift.stdout()
    );
    // An update goes on from IMPORT_COMPLETE; the stack's delete keeps the
    // file (Retain).
    let run = deploy(
        &s,
        "st",
        &with_file(&path, Some("Retain")).replace("Value: x", "Value: y"),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(cairn(&s, &["delete", "st"]).code(), 0);
    assert!(file.exists());
}

#[test]
fn refused_imports_say_why_and_change_nothing() {
    let s = scratch();
    assert_eq!(deploy(&s, "st", &base(), &[]).code(), 0);
    let file = s.dir.path().join("by-hand.txt");
    std::fs::write(&file, "hello").unwrap_or_default();
    let path = file.display().to_string();
    let before = count(&s, "st");
    let refused = |name: &str, template: &str, list: &str| -> String {
        let t = s.write(&format!("{name}.yaml"), template);
        let l = s.write(&format!("{name}-import.yaml"), list);
        let run = import(&s, "st", &t, &l);
        assert_eq!(run.code(), 1, "{name}: {}", run.stdout());
        run.stderr()
    };
    let file_list = resources(&[("Cairn::Local::File", "F", "Path", &path)]);
    // Every imported resource needs a DeletionPolicy.
    let err = refused("no-policy", &with_file(&path, None), &file_list);
    assert!(
        err.contains("The following resources to import [F] must have DeletionPolicy attribute specified in the template."),
        "{err}"
    );
    // Nothing else may change.
    let err = refused(
        "also-changed",
        &with_file(&path, Some("Retain")).replace("Value: x", "Value: changed"),
        &file_list,
    );
    assert!(
        err.contains("You have modified resources [A] in your template that are not being imported. Update, create or delete operations cannot be executed during import operations."),
        "{err}"
    );
    // A resource that does not exist.
    let missing = s.dir.path().join("nowhere.txt").display().to_string();
    let err = refused(
        "missing",
        &with_file(&missing, Some("Retain")),
        &resources(&[("Cairn::Local::File", "F", "Path", &missing)]),
    );
    assert!(
        err.contains(&format!(
            "Resource F cannot be imported: Cairn::Local::File {missing} does not exist (file {missing} does not exist)"
        )),
        "{err}"
    );
    // A resource a stack already has.
    let twice = format!(
        "{}  B:\n    Type: Cairn::Test::Resource\n    DeletionPolicy: Retain\n    Properties: {{Name: a1}}\n",
        base()
    );
    let err = refused(
        "owned",
        &twice,
        &resources(&[("Cairn::Test::Resource", "B", "Name", "a1")]),
    );
    assert!(
        err.contains("Resource B cannot be imported: Cairn::Test::Resource a1 already belongs to stack st (as A)"),
        "{err}"
    );
    // The identifier is the type's primary identifier.
    let err = refused(
        "wrong-key",
        &with_file(&path, Some("Retain")),
        &resources(&[("Cairn::Local::File", "F", "Name", &path)]),
    );
    assert!(
        err.contains("Resource F cannot be imported: Name is not a primary identifier of Cairn::Local::File (its identifier: Path)"),
        "{err}"
    );
    // A type that keeps nothing outside the stack cannot be imported.
    let random = format!(
        "{}  R:\n    Type: Cairn::Random::String\n    DeletionPolicy: Retain\n",
        base()
    );
    let err = refused(
        "random",
        &random,
        &resources(&[("Cairn::Random::String", "R", "Value", "abc")]),
    );
    assert!(
        err.contains("Resource R cannot be imported: Cairn::Random::String declares no primary identifier: it cannot be imported"),
        "{err}"
    );
    // Nothing was recorded.
    assert_eq!(count(&s, "st"), before);
    assert_eq!(status(&s, "st"), "CREATE_COMPLETE");
    // A new stack of imported resources only: one it would create is
    // refused.
    let t = s.write("new.yaml", &with_file(&path, Some("Retain")));
    let l = s.write("new-import.yaml", &file_list);
    let run = import(&s, "other", &t, &l);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("You have modified resources [A] in your template that are not being imported. Update, create or delete operations cannot be executed during import operations."),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["describe", "other"]);
    assert_eq!(run.code(), 1, "nothing was recorded: {}", run.stdout());
}

#[test]
fn an_import_whose_resource_is_gone_when_read_again_rolls_back_without_a_provider_call() {
    let (s, _handler) = with_records(Some(1));
    assert_eq!(deploy(&s, "st", &base(), &[]).code(), 0);
    let template = format!(
        "{}  X:\n    Type: Test::Flaky::Thing\n    DeletionPolicy: Retain\n    Properties: {{Name: x1}}\n",
        base()
    );
    let t = s.write("with-x.yaml", &template);
    let l = s.write(
        "import.yaml",
        &resources(&[("Test::Flaky::Thing", "X", "Name", "x1")]),
    );
    let before = count(&s, "st");
    let run = import(&s, "st", &t, &l);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let seq: Vec<(String, String, String)> = sequence_after(&s, "st", before)
        .into_iter()
        .map(|(l, st, r, _)| (l, st, r))
        .collect();
    let ev = |l: &str, st: &str, r: &str| (l.to_string(), st.to_string(), r.to_string());
    assert_eq!(
        seq,
        vec![
            ev("st", "IMPORT_IN_PROGRESS", "User Initiated"),
            ev("X", "IMPORT_IN_PROGRESS", ""),
            ev(
                "X",
                "IMPORT_FAILED",
                "Test::Flaky::Thing x1 does not exist (record x1 is gone since it was checked)"
            ),
            ev(
                "st",
                "IMPORT_ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to import: [X]. "
            ),
            ev("X", "IMPORT_ROLLBACK_IN_PROGRESS", ""),
            ev("X", "IMPORT_ROLLBACK_COMPLETE", ""),
            ev("st", "IMPORT_ROLLBACK_COMPLETE", ""),
        ]
    );
    // The stack is as it was: its resource and template.
    assert_eq!(status(&s, "st"), "IMPORT_ROLLBACK_COMPLETE");
    assert_eq!(physical(&s, "st", "X"), "");
    let shown = cairn(&s, &["template", "st"]);
    assert_eq!(shown.stdout().trim_end(), base().trim_end());
    // It goes on from there.
    let run = deploy(&s, "st", &base().replace("Value: x", "Value: y"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
}

#[test]
fn a_new_stack_is_made_of_imported_resources() {
    let s = scratch();
    let file = s.dir.path().join("by-hand.txt");
    std::fs::write(&file, "hello").unwrap_or_default();
    let path = file.display().to_string();
    let template = format!(
        "Resources:\n  F:\n    Type: Cairn::Local::File\n    DeletionPolicy: Retain\n    Properties: {{Path: '{path}', Content: hello}}\nOutputs:\n  Where: {{Value: !GetAtt F.Path}}\n"
    );
    let t = s.write("new.yaml", &template);
    let l = s.write(
        "import.yaml",
        &resources(&[("Cairn::Local::File", "F", "Path", &path)]),
    );
    let run = import(&s, "fresh", &t, &l);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seq: Vec<(String, String)> = sequence_after(&s, "fresh", 0)
        .into_iter()
        .map(|(l, st, _, _)| (l, st))
        .collect();
    let ev = |l: &str, st: &str| (l.to_string(), st.to_string());
    assert_eq!(
        seq,
        vec![
            ev("fresh", "IMPORT_IN_PROGRESS"),
            ev("F", "IMPORT_IN_PROGRESS"),
            ev("F", "IMPORT_COMPLETE"),
            ev("fresh", "IMPORT_COMPLETE"),
        ]
    );
    // The outputs read what the provider's read returned.
    let outputs = cairn(&s, &["outputs", "fresh", "--output", "json"]).json();
    assert_eq!(
        outputs["Outputs"][0]["OutputValue"],
        path.as_str(),
        "{outputs}"
    );
    assert_eq!(physical(&s, "fresh", "F"), path);
}

/// A scratch directory whose config serves `Test::Flaky::Thing` from a
/// webhook provider (`flaky_reader.py`), each record gone after
/// `reads_before_gone` reads when given.
fn with_records(
    reads_before_gone: Option<u32>,
) -> (crate::support::Scratch, crate::webhooks::Program) {
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/flaky_reader.py"
    ))
    .args([
        "--listen",
        "127.0.0.1:0",
        "--secret",
        crate::webhooks::SECRET,
    ])
    .env(
        "PYTHONPATH",
        concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"),
    );
    if let Some(n) = reads_before_gone {
        cmd.env("READS_BEFORE_GONE", n.to_string());
    }
    let handler = crate::webhooks::Program::start(cmd);
    let s = crate::support::Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[[providers]]\nkind = \"webhook\"\nname = \"records\"\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{}\"\nread = true\n",
            handler.port,
            crate::webhooks::SECRET
        ),
    );
    (s, handler)
}

#[test]
fn a_webhook_providers_records_are_imported_into_a_new_stack() {
    let (s, _handler) = with_records(None);
    let template = "Resources:\n  X:\n    Type: Test::Flaky::Thing\n    DeletionPolicy: Retain\n    Properties: {Name: rec-7}\n  Y:\n    Type: Test::Flaky::Thing\n    DeletionPolicy: Delete\n    Properties: {Name: rec-8}\n";
    let t = s.write("records.yaml", template);
    let l = s.write(
        "import.yaml",
        &resources(&[
            ("Test::Flaky::Thing", "X", "Name", "rec-7"),
            ("Test::Flaky::Thing", "Y", "Name", "rec-8"),
        ]),
    );
    let run = import(&s, "records", &t, &l);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "records"), "IMPORT_COMPLETE");
    assert_eq!(physical(&s, "records", "X"), "rec-7");
    assert_eq!(physical(&s, "records", "Y"), "rec-8");
    // The same records cannot be imported again by another stack.
    let run = import(&s, "again", &t, &l);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Resource X cannot be imported: Test::Flaky::Thing rec-7 already belongs to stack records (as X)"),
        "{}",
        run.stderr()
    );
}
