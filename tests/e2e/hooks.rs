//! Hooks through the real binary: a Guard hook defined in a template
//! (`AWS::CloudFormation::GuardHook`, its rules in a file under `[hooks]
//! rule_dirs`) judges every stack's resources before their create, update
//! and delete; refused actions never reach the provider; the hook's verdict
//! is in the events. (boto3's view: `serve::boto3_guard_hooks`.)

use serde_json::Value;

use crate::support::Scratch;

const RULES: &str = "let files = Resources.*[ Type == 'Cairn::Local::File' ]\nrule FILE_MODE_0600 when %files !empty {\n    %files.Properties.Mode == \"0600\"\n    << every Cairn::Local::File must have Mode 0600 >>\n}\n";

const VERDICT: &str = "rule FILE_MODE_0600: every Cairn::Local::File must have Mode 0600";

fn cairn(s: &Scratch, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["--config", "cairn.toml"];
    all.extend_from_slice(args);
    s.cairn(&all)
}

/// The hook's template: `actions` it judges, its rules at `rules`.
fn hook_template(rules: &str, actions: &str) -> String {
    format!("Resources:\n  FileMode:\n    Type: AWS::CloudFormation::GuardHook\n    Properties:\n      Alias: Private::Guard::FileMode\n      RuleLocation: {{Uri: 'file://{rules}'}}\n      FailureMode: FAIL\n      TargetOperations: [RESOURCE]\n      TargetFilters: {{Actions: [{actions}], TargetNames: ['Cairn::Local::*']}}\n      ExecutionRole: arn:aws:iam::123456789012:role/hook\n")
}

fn file_template(path: &str, mode: &str, content: &str) -> String {
    format!("Resources:\n  Secret:\n    Type: Cairn::Local::File\n    Properties: {{Path: '{path}', Content: {content}, Mode: '{mode}'}}\n")
}

/// The stack's hook events: (resource status, hook status, reason).
fn hook_events(s: &Scratch, stack: &str) -> Vec<(String, String, String)> {
    let run = cairn(s, &["events", stack, "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut out: Vec<(String, String, String)> = run.json()["StackEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e.get("HookType").is_some())
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                text("ResourceStatus"),
                text("HookStatus"),
                text("HookStatusReason"),
            )
        })
        .collect();
    out.reverse();
    out
}

/// The reason of the latest event in `status` of a resource (not the
/// stack's own, not a hook's).
fn reason_of(s: &Scratch, stack: &str, status: &str) -> String {
    let run = cairn(s, &["events", stack, "--output", "json"]);
    run.json()["StackEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| {
            e["ResourceStatus"] == status
                && e.get("HookType").is_none()
                && e["ResourceType"] != "AWS::CloudFormation::Stack"
        })
        .and_then(|e| e["ResourceStatusReason"].as_str().map(String::from))
        .unwrap_or_default()
}

#[test]
fn a_guard_hook_judges_creates_updates_and_deletes_before_the_provider() {
    let s = Scratch::new();
    let rules = s.write("mode.guard", RULES).display().to_string();
    let rules_dir = s.dir.path().display().to_string();
    s.write(
        "cairn.toml",
        &format!("[hooks]\nrule_dirs = [\"{rules_dir}\"]\n"),
    );
    // Rules outside rule_dirs, or that do not parse, make no hook.
    let outside = std::env::temp_dir().join(format!("outside-{}.guard", std::process::id()));
    std::fs::write(&outside, RULES).unwrap();
    s.write(
        "bad.yaml",
        &hook_template(&outside.display().to_string(), "CREATE"),
    );
    let run = cairn(&s, &["deploy", "bad", "bad.yaml"]);
    let _ = std::fs::remove_file(&outside);
    assert_eq!(run.code(), 1);
    let why = reason_of(&s, "bad", "CREATE_FAILED");
    assert!(
        why.ends_with("is not under a directory of [hooks] rule_dirs"),
        "{why}"
    );
    let broken = s.write("broken.guard", "rule X {").display().to_string();
    s.write("bad.yaml", &hook_template(&broken, "CREATE"));
    let run = cairn(&s, &["delete", "bad"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["deploy", "bad", "bad.yaml"]);
    assert_eq!(run.code(), 1);
    let why = reason_of(&s, "bad", "CREATE_FAILED");
    assert!(
        why.starts_with(&format!(
            "the Guard rules at file://{broken} cannot be read: "
        )),
        "{why}"
    );
    let run = cairn(&s, &["type", "list", "--output", "json"]);
    assert_eq!(run.json()["TypeSummaries"], serde_json::json!([]));

    // The hook, in force for every stack of the state.
    s.write(
        "hook.yaml",
        &hook_template(&rules, "CREATE, UPDATE, DELETE"),
    );
    let run = cairn(&s, &["deploy", "guards", "hook.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["type", "list", "--output", "json"]);
    let listed = run.json();
    assert_eq!(
        listed["TypeSummaries"][0]["TypeName"],
        "Private::Guard::FileMode"
    );
    assert_eq!(listed["TypeSummaries"][0]["Type"], "HOOK", "{listed}");

    // A compliant file is made, the hook's success in its events.
    let path = s.dir.path().join("secret.txt").display().to_string();
    s.write("ok.yaml", &file_template(&path, "0600", "one"));
    let run = cairn(&s, &["deploy", "app", "ok.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        hook_events(&s, "app"),
        [
            (
                "CREATE_IN_PROGRESS".into(),
                "HOOK_IN_PROGRESS".into(),
                String::new()
            ),
            (
                "CREATE_IN_PROGRESS".into(),
                "HOOK_COMPLETE_SUCCEEDED".into(),
                String::new()
            ),
        ]
    );
    // An update to a mode the rules refuse: refused before the provider
    // is called (the file keeps its content), and rolled back.
    s.write("wide.yaml", &file_template(&path, "0644", "two"));
    let run = cairn(&s, &["deploy", "app", "wide.yaml"]);
    assert_eq!(run.code(), 1);
    assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), "one");
    assert_eq!(
        reason_of(&s, "app", "UPDATE_FAILED"),
        format!("The following hook(s) failed: [Private::Guard::FileMode]. Private::Guard::FileMode: {VERDICT}")
    );
    let run = cairn(&s, &["describe", "app", "--output", "json"]);
    assert_eq!(
        run.json()["Stacks"][0]["StackStatus"],
        "UPDATE_ROLLBACK_COMPLETE"
    );
    // The text events name the hook and its verdict.
    let run = cairn(&s, &["events", "app"]);
    assert!(
        run.stdout().contains(&format!(
            "Private::Guard::FileMode HOOK_COMPLETE_FAILED (FAIL): {VERDICT}"
        )),
        "{}",
        run.stdout()
    );
    // A stack's hook is its resource's: not deregistered beside it.
    let run = cairn(&s, &["type", "deregister", "Private::Guard::FileMode"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        "error: Type Private::Guard::FileMode is used by stacks guards: delete their resources of this type (or the stacks) before deregistering it"
    );
    // A file made before the hook existed, with a mode the rules refuse:
    // its delete is refused too (DELETE is judged), and the stack stays.
    let other = s.dir.path().join("other.txt").display().to_string();
    s.write("other.yaml", &file_template(&other, "0644", "x"));
    let run = cairn(&s, &["delete", "guards"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["deploy", "loose", "other.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["deploy", "guards", "hook.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["delete", "loose"]);
    assert_eq!(run.code(), 1);
    assert!(std::path::Path::new(&other).exists());
    assert_eq!(
        reason_of(&s, "loose", "DELETE_FAILED"),
        format!("The following hook(s) failed: [Private::Guard::FileMode]. Private::Guard::FileMode: {VERDICT}")
    );
    // Without the hook, the delete goes through.
    let run = cairn(&s, &["delete", "guards"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["delete", "loose"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!std::path::Path::new(&other).exists());
    let listed: Value = cairn(&s, &["type", "list", "--output", "json"]).json();
    assert_eq!(listed["TypeSummaries"], serde_json::json!([]));
}

/// A hook's template with `operations` targets and `rules`.
fn targeted(rules: &str, alias: &str, operations: &str, mode: &str) -> String {
    format!("Description: the platform's hooks\nResources:\n  Hook:\n    Type: AWS::CloudFormation::GuardHook\n    Properties:\n      Alias: {alias}\n      RuleLocation: {{Uri: 'file://{rules}'}}\n      FailureMode: {mode}\n      TargetOperations: [{operations}]\n      ExecutionRole: arn:aws:iam::123456789012:role/hook\n")
}

#[test]
fn stack_and_change_set_hooks_see_the_whole_template_and_the_changes() {
    let s = Scratch::new();
    let dir = s.dir.path().display().to_string();
    s.write("cairn.toml", &format!("[hooks]\nrule_dirs = [\"{dir}\"]\n"));
    let described = s
        .write(
            "described.guard",
            "rule DESCRIBED {\n    Description exists\n    << every stack needs a Description >>\n}\n",
        )
        .display()
        .to_string();
    let kept = s
        .write(
            "kept.guard",
            "rule NO_REMOVALS when Changes !empty {\n    Changes[*].ResourceChange.Action != \"Remove\"\n    << a change set may not remove resources >>\n}\n",
        )
        .display()
        .to_string();
    s.write(
        "stack-hook.yaml",
        &targeted(&described, "Private::Guard::Described", "STACK", "FAIL"),
    );
    s.write(
        "set-hook.yaml",
        &targeted(&kept, "Private::Guard::Kept", "CHANGE_SET", "FAIL"),
    );
    for (stack, file) in [("described", "stack-hook.yaml"), ("kept", "set-hook.yaml")] {
        let run = cairn(&s, &["deploy", stack, file]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    // A stack hook judges the whole template before anything is made.
    let path = s.dir.path().join("f.txt").display().to_string();
    let body = file_template(&path, "0600", "one");
    s.write("bare.yaml", &body);
    // The dry run says so first, and makes nothing.
    let run = cairn(
        &s,
        &["hooks", "check", "bare", "bare.yaml", "--output", "json"],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.json()["HookChecks"],
        serde_json::json!([{
            "HookType": "Private::Guard::Described",
            "TargetType": "STACK",
            "Target": "bare",
            "Action": "CREATE",
            "HookStatus": "HOOK_COMPLETE_FAILED",
            "HookStatusReason": "rule DESCRIBED: every stack needs a Description",
            "HookFailureMode": "FAIL",
        }])
    );
    assert_eq!(
        run.stderr().trim(),
        "error: hooks would refuse it: Private::Guard::Described on bare"
    );
    assert!(!std::path::Path::new(&path).exists());
    let run = cairn(&s, &["list", "--output", "json"]);
    assert!(!run.stdout().contains("\"bare\""), "{}", run.stdout());
    let run = cairn(&s, &["deploy", "bare", "bare.yaml"]);
    assert_eq!(run.code(), 1);
    assert!(!std::path::Path::new(&path).exists());
    let run = cairn(&s, &["describe", "bare", "--output", "json"]);
    assert_eq!(run.json()["Stacks"][0]["StackStatus"], "ROLLBACK_COMPLETE");
    let run = cairn(&s, &["events", "bare", "--output", "json"]);
    let rolled: Vec<String> = run.json()["StackEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["ResourceStatus"] == "ROLLBACK_IN_PROGRESS")
        .map(|e| {
            e["ResourceStatusReason"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let why = "Private::Guard::Described: rule DESCRIBED: every stack needs a Description";
    assert_eq!(
        rolled,
        [format!("The following hook(s) failed: [Private::Guard::Described]. {why}. Rollback requested by user.")]
    );
    let run = cairn(&s, &["events", "bare", "--output", "json"]);
    let hooked: Vec<(String, String, String)> = run.json()["StackEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .filter(|e| e.get("HookType").is_some())
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                text("LogicalResourceId"),
                text("ResourceType"),
                text("HookStatus"),
            )
        })
        .collect();
    let on_stack = |status: &str| {
        (
            "bare".to_string(),
            "AWS::CloudFormation::Stack".to_string(),
            status.to_string(),
        )
    };
    assert_eq!(
        hooked,
        [
            on_stack("HOOK_IN_PROGRESS"),
            on_stack("HOOK_COMPLETE_FAILED")
        ]
    );
    let run = cairn(&s, &["delete", "bare"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    s.write("app.yaml", &format!("Description: an app\n{body}"));
    let run = cairn(&s, &["deploy", "app", "app.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());

    // A change set hook's verdict is kept with the set: one that removes
    // a resource is FAILED with it; one that changes it is AVAILABLE.
    s.write(
        "app-more.yaml",
        &format!("Description: an app\n{}  Note:\n    Type: Cairn::Test::Resource\n    Properties: {{Value: n}}\n", body),
    );
    let run = cairn(&s, &["deploy", "app", "app-more.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(
        &s,
        &[
            "plan", "app", "app.yaml", "--name", "shrink", "--output", "json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let set = run.json();
    assert_eq!(set["Status"], "FAILED", "{set}");
    assert_eq!(
        set["StatusReason"],
        "The following hook(s) failed: [Private::Guard::Kept]. Private::Guard::Kept: rule NO_REMOVALS: a change set may not remove resources"
    );
    assert_eq!(set["HookResults"][0]["TypeName"], "Private::Guard::Kept");
    assert_eq!(set["HookResults"][0]["Status"], "HOOK_COMPLETE_FAILED");
    let changed = format!(
        "Description: an app\n{}  Note:\n    Type: Cairn::Test::Resource\n    Properties: {{Value: m}}\n",
        body
    );
    s.write("app-changed.yaml", &changed);
    let run = cairn(
        &s,
        &[
            "plan",
            "app",
            "app-changed.yaml",
            "--name",
            "change",
            "--output",
            "json",
        ],
    );
    let set = run.json();
    assert_eq!(set["Status"], "CREATE_COMPLETE", "{set}");
    assert_eq!(set["HookResults"][0]["Status"], "HOOK_COMPLETE_SUCCEEDED");
    let run = cairn(&s, &["change-set", "app", "change"]);
    assert!(
        run.stdout()
            .contains("hook Private::Guard::Kept HOOK_COMPLETE_SUCCEEDED (FAIL)"),
        "{}",
        run.stdout()
    );

    // An operator configures a hook (SetTypeConfiguration's
    // HookConfiguration wins over the template's properties): under WARN
    // the undescribed stack is made, the verdict in its events.
    let run = cairn(
        &s,
        &[
            "type",
            "configure",
            "Private::Guard::Described",
            r#"{"FailureMode": "WARN"}"#,
        ],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        r#"error: Private::Guard::Described is a hook: its configuration is {"CloudFormationConfiguration": {"HookConfiguration": {…}}}"#
    );
    let warn = r#"{"CloudFormationConfiguration": {"HookConfiguration": {"HookInvocationStatus": "ENABLED", "TargetOperations": ["STACK"], "FailureMode": "WARN"}}}"#;
    let run = cairn(
        &s,
        &["type", "configure", "Private::Guard::Described", warn],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["deploy", "bare", "bare.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(std::path::Path::new(&path).exists());
    let run = cairn(&s, &["events", "bare", "--output", "json"]);
    let warned: Vec<String> = run.json()["StackEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["HookStatus"] == "HOOK_COMPLETE_FAILED")
        .map(|e| {
            e["HookStatusReason"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        warned,
        ["rule DESCRIBED: every stack needs a Description (failure mode WARN: the create goes on)"]
    );
}

/// Guard's own messages quote the values they compared: a NoEcho
/// parameter's value never reaches an event, a refusal or the dry run.
#[test]
fn a_hooks_verdict_never_shows_a_noecho_value() {
    let s = Scratch::new();
    let dir = s.dir.path().display().to_string();
    s.write("cairn.toml", &format!("[hooks]\nrule_dirs = [\"{dir}\"]\n"));
    // No custom message: Guard says which value it found.
    let rules = s
        .write(
            "plain.guard",
            "let files = Resources.*[ Type == 'Cairn::Local::File' ]\nrule CONTENT when %files !empty {\n    %files.Properties.Content == \"public\"\n}\n",
        )
        .display()
        .to_string();
    s.write("hook.yaml", &hook_template(&rules, "CREATE"));
    let run = cairn(&s, &["deploy", "guards", "hook.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let path = s.dir.path().join("secret.txt").display().to_string();
    s.write(
        "secret.yaml",
        &format!("Parameters:\n  Word: {{Type: String, NoEcho: true}}\nResources:\n  Secret:\n    Type: Cairn::Local::File\n    Properties: {{Path: '{path}', Content: !Ref Word, Mode: '0600'}}\n"),
    );
    let run = cairn(
        &s,
        &[
            "hooks",
            "check",
            "app",
            "secret.yaml",
            "-p",
            "Word=hunter2",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 1);
    let checked = run.json().to_string();
    assert!(checked.contains("HOOK_COMPLETE_FAILED"), "{checked}");
    assert!(!checked.contains("hunter2"), "{checked}");
    let run = cairn(&s, &["deploy", "app", "secret.yaml", "-p", "Word=hunter2"]);
    assert_eq!(run.code(), 1);
    assert!(!run.stdout().contains("hunter2") && !run.stderr().contains("hunter2"));
    let events = cairn(&s, &["events", "app", "--output", "json"]).stdout();
    assert!(events.contains("HOOK_COMPLETE_FAILED"), "{events}");
    assert!(
        events.contains("rule CONTENT: Check was not compliant as property value [Path=/Resources/Secret/Properties/Content[L:0,C:0] Value=\\\"****\\\"]"),
        "{events}"
    );
    assert!(!events.contains("hunter2"), "{events}");
}
