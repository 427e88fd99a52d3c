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

/// The events of `hooks` hooks letting a create through, one after the
/// other.
fn passed_before_create(hooks: usize) -> Vec<(String, String, String)> {
    let event = |status: &str| ("CREATE_IN_PROGRESS".into(), status.into(), String::new());
    (0..hooks)
        .flat_map(|_| [event("HOOK_IN_PROGRESS"), event("HOOK_COMPLETE_SUCCEEDED")])
        .collect()
}

/// The reason of the latest event in `status` of the resource `logical_id`.
fn reason_of_resource(s: &Scratch, stack: &str, logical_id: &str, status: &str) -> String {
    let run = cairn(s, &["events", stack, "--output", "json"]);
    run.json()["StackEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| {
            e["ResourceStatus"] == status
                && e.get("HookType").is_none()
                && e["LogicalResourceId"] == logical_id
        })
        .and_then(|e| e["ResourceStatusReason"].as_str().map(String::from))
        .unwrap_or_default()
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
    assert_eq!(hook_events(&s, "app"), passed_before_create(1));
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

/// An unchanged Lambda hook function in CloudFormation's documented shape
/// (it reads `requestData.targetModel`, answers `hookStatus`), which takes
/// two IN_PROGRESS rounds (its callbackContext counting them) before its
/// verdict and logs every invocation it gets.
const LAMBDA_HOOK: &str = r#"import json
import os

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "invocations.log")
DELAY = int(os.environ.get("HOOK_DELAY", "0"))


def handler(event, context):
    request = event["requestData"]
    ctx = event["requestContext"].get("callbackContext") or {}
    with open(LOG, "a") as f:
        f.write(json.dumps({
            "token": event["clientRequestToken"],
            "invocation": event["requestContext"]["invocation"],
            "context": ctx,
            "point": event["actionInvocationPoint"],
            "target": request["targetLogicalId"],
            "type": request["targetType"],
        }) + "\n")
    step = ctx.get("step", 0)
    if step < 2:
        return {"hookStatus": "IN_PROGRESS", "message": "still checking",
                "callbackContext": {"step": step + 1}, "callbackDelaySeconds": DELAY,
                "clientRequestToken": event["clientRequestToken"]}
    if request["targetType"] == "STACK":
        template = request["targetModel"]["template"]
        if "Description" not in template:
            return {"hookStatus": "FAILED", "errorCode": "NonCompliant",
                    "message": "every stack needs a Description (resources: %s)"
                               % ", ".join(sorted(template.get("Resources", {}))),
                    "clientRequestToken": event["clientRequestToken"]}
        return {"hookStatus": "SUCCESS", "clientRequestToken": event["clientRequestToken"]}
    props = request["targetModel"]["resourceProperties"]
    if props.get("Mode") != "0600":
        return {"hookStatus": "FAILED", "errorCode": "NonCompliant",
                "message": "Mode must be 0600, not %s" % props.get("Mode"),
                "clientRequestToken": event["clientRequestToken"]}
    return {"hookStatus": "SUCCESS", "message": "compliant",
            "clientRequestToken": event["clientRequestToken"]}
"#;

const SECRET: &str = "hook-secret";

/// The Lambda hook function behind the Python SDK's Lambda adapter, its
/// IN_PROGRESS answers asking to be invoked again after `delay` seconds.
fn lambda_hook(s: &Scratch, delay: u32) -> crate::webhooks::Program {
    s.write("file_mode.py", LAMBDA_HOOK);
    let mut cmd = crate::support::python();
    cmd.args(["-m", "cairn_provider.lambda_adapter", "file_mode.handler"])
        .args(["--dir", &s.dir.path().display().to_string()])
        .args(["--listen", "127.0.0.1:0"])
        .env(
            "PYTHONPATH",
            concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"),
        )
        .env("CAIRN_WEBHOOK_SECRET", SECRET)
        .env("HOOK_DELAY", delay.to_string());
    crate::webhooks::Program::start(cmd)
}

/// A LambdaHook resource `alias` calling `url` before the creates of
/// `targets`, for the `operations` targets.
fn lambda_hook_resource(
    logical_id: &str,
    alias: &str,
    url: &str,
    targets: &str,
    operations: &str,
) -> String {
    format!("  {logical_id}:\n    Type: AWS::CloudFormation::LambdaHook\n    Properties:\n      Alias: {alias}\n      LambdaFunction: '{url}'\n      ExecutionRole: arn:aws:iam::123456789012:role/hook\n      FailureMode: FAIL\n      TargetOperations: [{operations}]\n      TargetFilters: {{Actions: [CREATE], TargetNames: [{targets}]}}\n")
}

/// The hook function's invocations: (token, invocation, callback context,
/// target).
fn invocations(s: &Scratch) -> Vec<(String, u64, Value, String)> {
    std::fs::read_to_string(s.dir.path().join("invocations.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            (
                v["token"].as_str().unwrap_or_default().to_string(),
                v["invocation"].as_u64().unwrap_or_default(),
                v["context"].clone(),
                v["target"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// One target's three invocations, with one token and each callback
/// context the one the hook gave.
fn assert_invoked_again_with_its_context(calls: &[(String, u64, Value, String)], target: &str) {
    let mine: Vec<_> = calls.iter().filter(|c| c.3 == target).collect();
    assert_eq!(mine.len(), 3, "{calls:?}");
    assert!(mine.iter().all(|c| c.0 == mine[0].0), "one token: {mine:?}");
    let seen: Vec<(u64, Value)> = mine.iter().map(|c| (c.1, c.2.clone())).collect();
    assert_eq!(
        seen,
        vec![
            (1, serde_json::json!({})),
            (2, serde_json::json!({"step": 1})),
            (3, serde_json::json!({"step": 2})),
        ]
    );
}

#[test]
fn a_lambda_hook_is_invoked_again_with_its_callback_context_and_an_unreachable_one_fails_only_its_targets(
) {
    let s = Scratch::new();
    let hook = lambda_hook(&s, 0);
    s.write(
        "cairn.toml",
        &format!("[webhooks]\nsecret = \"{SECRET}\"\n\n[hooks]\ntimeout_seconds = 2\n"),
    );
    let url = format!("http://127.0.0.1:{}/", hook.port);
    // A port nothing listens on.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}/", l.local_addr().unwrap().port())
    };
    let hooks = format!(
        "Resources:\n{}{}{}",
        lambda_hook_resource(
            "FileMode",
            "Private::Lambda::FileMode",
            &url,
            "Cairn::Local::File",
            "RESOURCE"
        ),
        lambda_hook_resource(
            "Described",
            "Private::Lambda::Described",
            &url,
            "Cairn::Local::File",
            "STACK"
        ),
        lambda_hook_resource(
            "Gone",
            "Private::Lambda::Gone",
            &gone,
            "Cairn::Test::Resource",
            "RESOURCE"
        ),
    );
    let t = s.write("hooks.yaml", &hooks);
    let run = cairn(&s, &["deploy", "hooks", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());

    // A compliant file: invoked three times, the context carried along.
    let path = s.dir.path().join("secret.txt").display().to_string();
    let good = format!(
        "Description: a file\n{}",
        file_template(&path, "0600", "s3cr3t")
    );
    let t = s.write("good.yaml", &good);
    let run = cairn(&s, &["deploy", "app", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let calls = invocations(&s);
    assert_invoked_again_with_its_context(&calls, "Secret");
    // The stack hook saw the whole template (it has a Description).
    assert_invoked_again_with_its_context(&calls, "app");
    assert_eq!(hook_events(&s, "app"), passed_before_create(2));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "s3cr3t");

    // A non-compliant one: refused after its IN_PROGRESS rounds, before the
    // provider made anything; the stack rolls back with the hook's message.
    let bad_path = s.dir.path().join("open.txt").display().to_string();
    let bad = format!(
        "Description: open\n{}",
        file_template(&bad_path, "0644", "x")
    );
    let t = s.write("bad.yaml", &bad);
    let run = cairn(&s, &["deploy", "bad", t.to_str().unwrap()]);
    assert_ne!(run.code(), 0);
    assert_eq!(
        reason_of(&s, "bad", "CREATE_FAILED"),
        "The following hook(s) failed: [Private::Lambda::FileMode]. Private::Lambda::FileMode: Mode must be 0600, not 0644"
    );
    assert!(!std::path::Path::new(&bad_path).exists());
    let status = cairn(&s, &["list", "--output", "json"]).json();
    let bad_status = status["StackSummaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["StackName"] == "bad")
        .map(|st| st["StackStatus"].clone());
    assert_eq!(bad_status, Some(Value::from("ROLLBACK_COMPLETE")));

    // A stack hook's refusal names what it saw of the whole template.
    let t = s.write("plain.yaml", &file_template(&path, "0600", "s3cr3t"));
    let run = cairn(&s, &["deploy", "plain", t.to_str().unwrap()]);
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr().contains(
            "Private::Lambda::Described: every stack needs a Description (resources: Secret)"
        ),
        "{}",
        run.stderr()
    );

    // The unreachable hook fails only what it targets: the file beside
    // the test resource is made, the test resource is HOOK_FAILED.
    let mixed = format!(
        "Description: mixed\n{}  Other:\n    Type: Cairn::Test::Resource\n    Properties: {{Value: v}}\n",
        file_template(&s.dir.path().join("mixed.txt").display().to_string(), "0600", "m")
    );
    let t = s.write("mixed.yaml", &mixed);
    let run = cairn(&s, &["deploy", "mixed", t.to_str().unwrap()]);
    assert_ne!(run.code(), 0);
    let events = cairn(&s, &["events", "mixed", "--output", "json"]).json();
    let list = events["StackEvents"].as_array().unwrap();
    let gone_failed = list
        .iter()
        .find(|e| e["HookType"] == "Private::Lambda::Gone" && e["HookStatus"] == "HOOK_FAILED")
        .and_then(|e| e["HookStatusReason"].as_str())
        .unwrap_or_default();
    assert!(
        gone_failed.starts_with("the hook's webhook gave no answer within 2 seconds ("),
        "{gone_failed}"
    );
    assert!(list
        .iter()
        .any(|e| e["LogicalResourceId"] == "Secret" && e["ResourceStatus"] == "CREATE_COMPLETE"));
    assert!(reason_of_resource(&s, "mixed", "Other", "CREATE_FAILED")
        .starts_with("The following hook(s) failed: [Private::Lambda::Gone]. Private::Lambda::Gone: the hook's webhook gave no answer within 2 seconds"));

    // The hooks go with their stack.
    for stack in ["app", "bad", "plain", "mixed", "hooks"] {
        let run = cairn(&s, &["delete", stack]);
        assert_eq!(run.code(), 0, "{stack}: {}", run.stderr());
    }
}

#[test]
fn sigkill_while_a_lambda_hook_is_in_progress_resumes_the_hook() {
    killed_while_in_progress("RESOURCE", "Secret");
}

#[test]
fn sigkill_while_a_stack_lambda_hook_is_in_progress_resumes_the_hook() {
    killed_while_in_progress("STACK", "app");
}

/// Kills the engine while a Lambda hook targeting `operation` waits
/// between two invocations about `target`, then resumes it.
fn killed_while_in_progress(operation: &str, target: &str) {
    let s = Scratch::new();
    // Three seconds between invocations: time to kill the engine while it
    // waits.
    let hook = lambda_hook(&s, 3);
    s.write(
        "cairn.toml",
        &format!("[webhooks]\nsecret = \"{SECRET}\"\n"),
    );
    let url = format!("http://127.0.0.1:{}/", hook.port);
    let hooks = format!(
        "Resources:\n{}",
        lambda_hook_resource(
            "FileMode",
            "Private::Lambda::FileMode",
            &url,
            "Cairn::Local::File",
            operation
        )
    );
    let t = s.write("hooks.yaml", &hooks);
    assert_eq!(
        cairn(&s, &["deploy", "hooks", t.to_str().unwrap()]).code(),
        0
    );
    let path = s.dir.path().join("secret.txt").display().to_string();
    let body = format!(
        "Description: app\n{}",
        file_template(&path, "0600", "s3cr3t")
    );
    let t = s.write("app.yaml", &body);
    let mut child = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "app",
        t.to_str().unwrap(),
    ]);
    let started = std::time::Instant::now();
    while invocations(&s).is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the hook was never invoked: {}",
            s.spawned_stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Its IN_PROGRESS answer is recorded right after it came; the next
    // invocation is three seconds away.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    assert_eq!(
        invocations(&s).len(),
        1,
        "killed before the hook was asked again"
    );

    // The next command resumes the operation: the hook is asked again with
    // its token and callbackContext, not started from scratch.
    let run = cairn(&s, &["list", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("resumed the interrupted operation"),
        "{}",
        run.stderr()
    );
    let app = run.json()["StackSummaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["StackName"] == "app")
        .map(|st| st["StackStatus"].clone());
    assert_eq!(app, Some(Value::from("CREATE_COMPLETE")));
    assert_invoked_again_with_its_context(&invocations(&s), target);
    let created = cairn(&s, &["events", "app", "--output", "json"]).json()["StackEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["LogicalResourceId"] == "Secret" && e["ResourceStatus"] == "CREATE_COMPLETE")
        .count();
    assert_eq!(created, 1);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "s3cr3t");
    for stack in ["app", "hooks"] {
        assert_eq!(cairn(&s, &["delete", stack]).code(), 0);
    }
}

/// The hook plugin's type (`tests/plugins/file-mode-hook`).
const MODE_HOOK: &str = "Org::Files::ModeHook";

/// `cairn provider test --plugin LIB [--in-process] --output json`: each
/// test's (name, status).
fn kit_on_hook(s: &Scratch, lib: &str, in_process: bool) -> Vec<(String, String)> {
    let mut args = vec!["provider", "test", "--plugin", lib, "--output", "json"];
    if in_process {
        args.push("--in-process");
    }
    let run = cairn(s, &args);
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    run.json()
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["Test"].as_str().unwrap_or_default().to_string(),
                r["Status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_hook_plugin_passes_the_kit_and_judges_once_registered_and_enabled() {
    let s = Scratch::new();
    s.write("cairn.toml", "");
    let lib = crate::plugins::library("cairn_test_file_mode_hook")
        .display()
        .to_string();
    // The contract kit's hook tests, in either isolation.
    let passed: Vec<(String, String)> = [
        "hook_declared_once",
        "hook_pre_create_resource",
        "hook_pre_update_resource",
        "hook_pre_delete_resource",
        "hook_pre_create_stack",
        "hook_pre_create_change_set",
    ]
    .iter()
    .map(|t| (t.to_string(), "PASSED".to_string()))
    .collect();
    assert_eq!(kit_on_hook(&s, &lib, false), passed);
    assert_eq!(kit_on_hook(&s, &lib, true), passed);

    // Packaged as a HOOK, registered with the kit run first.
    let project = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/plugins/file-mode-hook");
    let run = cairn(
        &s,
        &[
            "provider",
            "package",
            project,
            "--library",
            &lib,
            "-o",
            "hook.tar.gz",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(
        &s,
        &[
            "type",
            "register",
            "hook.tar.gz",
            "--test",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    let described = cairn(&s, &["type", "describe", MODE_HOOK, "--output", "json"]);
    assert_eq!(described.code(), 0, "{}", described.stderr());
    assert_eq!(described.json()["Type"], "HOOK", "{}", described.stdout());

    // Off until its configuration turns it on (as CloudFormation's).
    let path = |name: &str| s.dir.path().join(name).display().to_string();
    let t = s.write("open.yaml", &file_template(&path("open.txt"), "0644", "x"));
    let run = cairn(&s, &["deploy", "open", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(hook_events(&s, "open").is_empty());

    let configuration = r#"{"CloudFormationConfiguration": {"HookConfiguration": {"HookInvocationStatus": "ENABLED", "FailureMode": "FAIL", "TargetOperations": ["RESOURCE"], "Properties": {"RequiredMode": "0640"}}}}"#;
    let run = cairn(&s, &["type", "configure", MODE_HOOK, configuration]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let t = s.write(
        "strict.yaml",
        &file_template(&path("strict.txt"), "0600", "x"),
    );
    let run = cairn(&s, &["deploy", "strict", t.to_str().unwrap()]);
    assert_ne!(run.code(), 0);
    assert_eq!(
        reason_of(&s, "strict", "CREATE_FAILED"),
        "The following hook(s) failed: [Org::Files::ModeHook]. Org::Files::ModeHook: Mode must be 0640, not \"0600\""
    );
    assert!(!std::path::Path::new(&path("strict.txt")).exists());
    let t = s.write("fits.yaml", &file_template(&path("fits.txt"), "0640", "x"));
    let run = cairn(&s, &["deploy", "fits", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(hook_events(&s, "fits"), passed_before_create(1));
    // A registered hook is the platform's: no stack owns it.
    let run = cairn(&s, &["type", "deregister", MODE_HOOK]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let t = s.write(
        "after.yaml",
        &file_template(&path("after.txt"), "0600", "x"),
    );
    assert_eq!(
        cairn(&s, &["deploy", "after", t.to_str().unwrap()]).code(),
        0
    );
}

/// A hook on the Python SDK (`cairn_provider.Hook`), served with
/// `serve_hook`: a file's Mode must be the configuration's.
const PYTHON_SDK_HOOK: &str = r#"import cairn_provider as cp


class FileMode(cp.Hook):
    def pre_create(self, request):
        if request.target_name != "Cairn::Local::File":
            return cp.success()
        if request.callback_context.get("looked") is not True:
            return cp.in_progress({"looked": True}, 0)
        mode = request.resource_properties.get("Mode")
        if mode != "0600":
            return cp.non_compliant("python: Mode must be 0600, not %s" % mode)
        return cp.success()


cp.serve_hook(FileMode())
"#;

/// A hook on the TypeScript SDK (`Hook`, `serveHook`): a test resource's
/// Value may not be "forbidden".
const TYPESCRIPT_SDK_HOOK: &str = r#"const sdk = require(process.env.CAIRN_TS_SDK);
sdk.serveHook({
  preCreate: (req) =>
    req.targetName === "Cairn::Test::Resource" && req.resourceProperties.Value === "forbidden"
      ? sdk.nonCompliant("typescript: Value may not be forbidden")
      : sdk.success(),
});
"#;

#[test]
fn hooks_written_with_the_python_and_typescript_sdks_judge_as_lambda_hooks() {
    let s = Scratch::new();
    let ts_sdk = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-typescript/dist/index.js");
    assert!(
        std::path::Path::new(ts_sdk).exists(),
        "{ts_sdk} is missing: `cargo xtask test` builds it (npm ci && npm run build in sdk-typescript)"
    );
    s.write("py_hook.py", PYTHON_SDK_HOOK);
    s.write("ts_hook.js", TYPESCRIPT_SDK_HOOK);
    let mut py = crate::support::python();
    py.arg(s.dir.path().join("py_hook.py"))
        .args(["--listen", "127.0.0.1:0", "--secret", SECRET])
        .env(
            "PYTHONPATH",
            concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"),
        );
    let py = crate::webhooks::Program::start(py);
    let mut ts = std::process::Command::new("node");
    ts.arg(s.dir.path().join("ts_hook.js"))
        .args(["--listen", "127.0.0.1:0", "--secret", SECRET])
        .env("CAIRN_TS_SDK", ts_sdk);
    let ts = crate::webhooks::Program::start(ts);
    s.write(
        "cairn.toml",
        &format!("[webhooks]\nsecret = \"{SECRET}\"\n"),
    );
    let hooks = format!(
        "Resources:\n{}{}",
        lambda_hook_resource(
            "Py",
            "Private::Python::FileMode",
            &format!("http://127.0.0.1:{}/", py.port),
            "Cairn::Local::File",
            "RESOURCE"
        ),
        lambda_hook_resource(
            "Ts",
            "Private::TypeScript::NoForbidden",
            &format!("http://127.0.0.1:{}/", ts.port),
            "Cairn::Test::Resource",
            "RESOURCE"
        ),
    );
    let t = s.write("hooks.yaml", &hooks);
    let run = cairn(&s, &["deploy", "hooks", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let stack = |mode: &str, value: &str| {
        let file = s.dir.path().join(format!("f{mode}{value}.txt"));
        format!(
            "{}  T:\n    Type: Cairn::Test::Resource\n    Properties: {{Value: {value}}}\n",
            file_template(&file.display().to_string(), mode, "x")
        )
    };
    let t = s.write("ok.yaml", &stack("0600", "fine"));
    let run = cairn(&s, &["deploy", "ok", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // Each resource judged by its own hook (the two resources in parallel).
    let mut judged = hook_events(&s, "ok");
    judged.sort();
    let mut expected = passed_before_create(2);
    expected.sort();
    assert_eq!(judged, expected);
    let t = s.write("open.yaml", &stack("0644", "fine"));
    assert_ne!(
        cairn(&s, &["deploy", "open", t.to_str().unwrap()]).code(),
        0
    );
    // The other resource may be cancelled meanwhile: each one's own reason.
    assert_eq!(
        reason_of_resource(&s, "open", "Secret", "CREATE_FAILED"),
        "The following hook(s) failed: [Private::Python::FileMode]. Private::Python::FileMode: python: Mode must be 0600, not 0644"
    );
    let t = s.write("forbidden.yaml", &stack("0600", "forbidden"));
    assert_ne!(
        cairn(&s, &["deploy", "forbidden", t.to_str().unwrap()]).code(),
        0
    );
    assert_eq!(
        reason_of_resource(&s, "forbidden", "T", "CREATE_FAILED"),
        "The following hook(s) failed: [Private::TypeScript::NoForbidden]. Private::TypeScript::NoForbidden: typescript: Value may not be forbidden"
    );
    for stack in ["ok", "open", "forbidden", "hooks"] {
        assert_eq!(cairn(&s, &["delete", stack]).code(), 0);
    }
}
