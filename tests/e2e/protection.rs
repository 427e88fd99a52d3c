//! Termination protection through the real binary: a protected stack (and
//! every nested stack under a protected root) is not deleted, and its
//! status stays as it was; `cairn protect` turns it off; a parent's update
//! still removes a nested stack.

use crate::update::{cairn, count, deploy, physical, scratch, status};

const REFUSED: &str = "cannot be deleted while TerminationProtection is enabled";

#[test]
fn a_protected_stack_is_not_deleted_until_protection_is_turned_off() {
    let s = scratch();
    let t = "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Value: a}\n";
    let run = deploy(&s, "st", t, &["--enable-termination-protection"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let described = cairn(&s, &["describe", "st", "--output", "json"]).json();
    assert_eq!(described["Stacks"][0]["EnableTerminationProtection"], true);
    let events = count(&s, "st");
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(&format!("Stack [st] {REFUSED}")),
        "{}",
        run.stderr()
    );
    // Unchanged: status, events, the resource.
    assert_eq!(status(&s, "st"), "CREATE_COMPLETE");
    assert_eq!(count(&s, "st"), events);
    assert_eq!(s.resource_files().len(), 1);
    // It is a create's option; an update is told where to change it.
    let run = deploy(&s, "st", t, &["--enable-termination-protection"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(
            "--enable-termination-protection applies to creating a stack; stack st exists: use cairn protect st --on"
        ),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["protect", "st", "--off"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        run.stdout().trim(),
        "termination protection of stack st is off"
    );
    let described = cairn(&s, &["describe", "st", "--output", "json"]).json();
    assert_eq!(described["Stacks"][0]["EnableTerminationProtection"], false);
    assert_eq!(cairn(&s, &["delete", "st"]).code(), 0);
    assert!(s.resource_files().is_empty());
    let run = cairn(&s, &["protect", "gone", "--on"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Stack [gone] does not exist"),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_protected_roots_nested_stacks_are_protected_and_its_updates_still_remove_them() {
    let s = scratch();
    s.write(
        "child.yaml",
        "Resources:\n  C:\n    Type: Cairn::Test::Resource\n    Properties: {Value: c}\n",
    );
    let parent = "Resources:\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: child.yaml}\n  Own:\n    Type: Cairn::Test::Resource\n    Properties: {Value: own}\n";
    let run = deploy(&s, "parent", parent, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["protect", "parent", "--on"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let child = physical(&s, "parent", "Child");
    let child_name = cairn(&s, &["describe", &child, "--output", "json"]).json()["Stacks"][0]
        ["StackName"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The nested stack shares its root's protection, and is not set itself.
    let run = cairn(&s, &["delete", &child]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains(&format!("Stack [{child_name}] {REFUSED}")),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["protect", &child, "--off"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(&format!(
            "Stack [{child_name}] is a nested stack: termination protection is set on its root stack"
        )),
        "{}",
        run.stderr()
    );
    assert_eq!(status(&s, &child), "CREATE_COMPLETE");
    // The parent's update that removes it deletes it all the same.
    let without =
        "Resources:\n  Own:\n    Type: Cairn::Test::Resource\n    Properties: {Value: own}\n";
    let run = deploy(&s, "parent", without, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, &child), "DELETE_COMPLETE");
    assert_eq!(s.resource_files().len(), 1);
    let run = cairn(&s, &["delete", "parent"]);
    assert_eq!(run.code(), 1);
    assert_eq!(cairn(&s, &["protect", "parent", "--off"]).code(), 0);
    assert_eq!(cairn(&s, &["delete", "parent"]).code(), 0);
    assert!(s.resource_files().is_empty());
}
