//! Node.js Lambda handlers run unchanged behind the TypeScript SDK's
//! adapter (`sdk-typescript`, built by `cargo xtask test`): a ZipFile
//! handler using the inline `cfn-response` module, an async one using npm's
//! `cfn-response` package, and a CDK provider-framework pair
//! (`onEvent`/`isComplete`) whose resource completes after three polls.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::Scratch;
use crate::update::{cairn, deploy, sequence_after};
use crate::webhooks::{deploy_replacing, notes_lifecycle_of, output_values, Program, SECRET};

/// `node sdk-typescript/dist/lambda-adapter.js ARGS… --dir DIR`, on a
/// port of its own.
fn node_adapter(args: &[&str], dir: &Path) -> Command {
    let adapter = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sdk-typescript/dist/lambda-adapter.js"
    );
    assert!(
        Path::new(adapter).exists(),
        "{adapter} is missing: `cargo xtask test` builds it (npm ci && npm run build in sdk-typescript)"
    );
    let mut cmd = Command::new("node");
    cmd.arg(adapter)
        .args(args)
        .arg("--dir")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .env("CAIRN_WEBHOOK_SECRET", SECRET);
    cmd
}

/// `examples/typescript-provider` (built by `cargo xtask test`), serving
/// Custom::Greeting on a port of its own.
pub(crate) fn typescript_example() -> Command {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/typescript-provider");
    let built = dir.join("dist/greetings.js");
    assert!(
        built.exists(),
        "{} is missing: `cargo xtask test` builds it (npm ci && npm run build there)",
        built.display()
    );
    let mut cmd = Command::new("node");
    cmd.arg(built)
        .args(["--listen", "127.0.0.1:0", "--secret", SECRET]);
    cmd
}

fn handler_dir(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e/node")
        .join(name)
}

/// Node's cfn-response has no reason: a failure says where the log is.
fn log_stream_reason(reason: &str) -> bool {
    reason.starts_with("See the details in CloudWatch Log Stream: ")
        && reason.contains("/[$LATEST]")
}

#[test]
fn an_unchanged_inline_cfn_response_handler_runs_the_notes_lifecycle() {
    notes_lifecycle_of(
        |notes| {
            let mut cmd = node_adapter(&["index.handler"], &handler_dir("notes-inline"));
            cmd.env("NOTES_DIR", notes);
            cmd
        },
        log_stream_reason,
    );
}

#[test]
fn an_unchanged_npm_cfn_response_handler_runs_the_notes_lifecycle() {
    let dir = handler_dir("notes-npm");
    assert!(
        dir.join("node_modules/cfn-response").exists(),
        "npm's cfn-response is not installed in {}: `cargo xtask test` runs npm ci there",
        dir.display()
    );
    notes_lifecycle_of(
        |notes| {
            let mut cmd = node_adapter(&["index.handler"], &dir);
            cmd.env("NOTES_DIR", notes);
            cmd
        },
        log_stream_reason,
    );
}

/// The CDK handlers' calls, in order: (handler, RequestType, physical id).
fn calls(jobs: &Path) -> Vec<(String, String, String)> {
    std::fs::read_to_string(jobs.join("calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .inspect(|c| assert_eq!(c["HasResponseURL"], false, "{c}"))
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (
                text("what"),
                text("RequestType"),
                text("PhysicalResourceId"),
            )
        })
        .collect()
}

fn call(what: &str, kind: &str, id: &str) -> (String, String, String) {
    (what.into(), kind.into(), id.into())
}

#[test]
fn a_cdk_on_event_is_complete_handler_completes_after_three_polls() {
    let s = Scratch::new();
    let jobs = s.dir.path().join("jobs");
    std::fs::create_dir_all(&jobs).expect("jobs dir");
    let mut cmd = node_adapter(
        &[
            "--on-event",
            "index.onEvent",
            "--is-complete",
            "index.isComplete",
            "--query-interval-seconds",
            "0.2",
        ],
        &handler_dir("cdk"),
    );
    cmd.env("JOBS_DIR", &jobs);
    let handler = Program::start(cmd);
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[webhooks.endpoints.jobs]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\n",
            handler.port
        ),
    );
    let job = |props: &str| {
        format!("Resources:\n  J:\n    Type: Custom::Job\n    Properties: {{ServiceToken: jobs, {props}}}\nOutputs:\n  Id: {{Value: !Ref J}}\n  Polls: {{Value: !GetAtt J.Polls}}\n  Name: {{Value: !GetAtt J.Name}}\n")
    };
    let outputs = |s: &Scratch| output_values(s, "st");

    // Created: onEvent once, then isComplete until its third poll.
    let run = deploy(&s, "st", &job("Name: a"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(outputs(&s), ["job-a", "3", "a"]);
    assert_eq!(
        calls(&jobs),
        [
            call("onEvent", "Create", ""),
            call("isComplete", "Create", "job-a"),
            call("isComplete", "Create", "job-a"),
            call("isComplete", "Create", "job-a"),
        ]
    );

    // A new Name: onEvent answers a new physical id, a replacement; the
    // old job is deleted in the cleanup.
    deploy_replacing(&s, &job("Name: b"), "J", "job-a", "job-b");
    assert_eq!(outputs(&s), ["job-b", "3", "b"]);
    assert!(!jobs.join("job-a").exists());

    // A create that throws: CREATE_FAILED with its message; the rollback's
    // Delete is not sent to the handler (there is nothing to delete).
    let before = calls(&jobs).len();
    let run = deploy(&s, "bad", &job("Name: c, Fail: create"), &[]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let failed: Vec<_> = sequence_after(&s, "bad", 0)
        .into_iter()
        .filter(|e| e.0 == "J")
        .map(|e| (e.1, e.2))
        .collect();
    let text = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        failed,
        [
            text("CREATE_IN_PROGRESS", ""),
            text("CREATE_IN_PROGRESS", "Resource creation Initiated"),
            text(
                "CREATE_FAILED",
                "the job could not start: told to fail on create"
            ),
            text("DELETE_IN_PROGRESS", ""),
            text("DELETE_COMPLETE", ""),
        ]
    );
    assert_eq!(calls(&jobs)[before..], [call("onEvent", "Create", "")]);

    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!jobs.join("job-b").exists());
    let last = calls(&jobs);
    assert_eq!(
        last[last.len() - 2..],
        [
            call("onEvent", "Delete", "job-b"),
            call("isComplete", "Delete", "job-b"),
        ]
    );
}

/// The contract kit against both unchanged handlers, given their schema
/// with `--schema` (a Lambda handler serves none): everything they do
/// passes; drift and read, which cfn-response handlers do not answer, are
/// skipped.
#[test]
fn the_contract_kit_passes_against_the_unchanged_handlers_given_a_schema() {
    kit_against("notes-inline");
    kit_against("notes-npm");
}

fn kit_against(handler: &str) {
    let s = Scratch::new();
    let notes = s.dir.path().join("notes");
    std::fs::create_dir_all(&notes).expect("notes dir");
    let schema = handler_dir("notes-schema.json");
    let mut cmd = node_adapter(
        &[
            "index.handler",
            "--schema",
            schema.to_str().unwrap_or_default(),
        ],
        &handler_dir(handler),
    );
    cmd.env("NOTES_DIR", &notes);
    let handler = Program::start(cmd);
    let props = s.write(
        "props.yaml",
        "Custom::Note:\n  Create: {Name: a, Text: one}\n  Updates: [{Name: a, Text: two}, {Name: b, Text: two}]\n",
    );
    let url = format!("http://127.0.0.1:{}/", handler.port);
    let report = crate::provider_kit::kit(
        &s,
        &[
            "--webhook",
            &url,
            "--secret",
            SECRET,
            "--properties",
            props.to_str().unwrap_or_default(),
        ],
        0,
    );
    let statuses: Vec<(String, String)> = report
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let text = |k: &str| t[k].as_str().unwrap_or_default().to_string();
            (text("Test"), text("Status"))
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("schema_well_formed", "PASSED"),
        ("create_returns_id_and_attributes", "PASSED"),
        ("create_repeated_request_id_same_resource", "PASSED"),
        ("drift_in_sync_after_create", "SKIPPED"),
        ("read_after_create_matches", "SKIPPED"),
        ("update_in_place[Text]", "PASSED"),
        ("update_create_only_replaces[Name]", "PASSED"),
        ("invalid_properties_refused", "PASSED"),
        ("delete_succeeds", "PASSED"),
        ("delete_again_not_found_or_success", "PASSED"),
        ("drift_deleted_after_delete", "SKIPPED"),
        ("read_missing_is_not_found", "SKIPPED"),
        ("expired_deadline_refused", "PASSED"),
    ]
    .iter()
    .map(|(t, st)| (t.to_string(), st.to_string()))
    .collect();
    assert_eq!(statuses, want);
    let left: Vec<_> = std::fs::read_dir(&notes)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// A handler that throws before it answers: on Lambda, CloudFormation
/// would wait an hour; the adapter answers FAILED with the error at once,
/// and the rollback's Delete reaches the handler.
#[test]
fn a_handler_that_throws_before_answering_fails_its_resource_at_once() {
    let s = Scratch::new();
    let notes = s.dir.path().join("notes");
    std::fs::create_dir_all(&notes).expect("notes dir");
    let mut cmd = node_adapter(&["index.handler"], &handler_dir("notes-inline"));
    cmd.env("NOTES_DIR", &notes);
    let handler = Program::start(cmd);
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 60\n\n[webhooks.endpoints.notes]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\n",
            handler.port
        ),
    );
    let started = std::time::Instant::now();
    let run = deploy(
        &s,
        "st",
        "Resources:\n  N:\n    Type: Custom::Note\n    Properties: {ServiceToken: notes, Name: a, Fail: throw-create}\n",
        &[],
    );
    assert_eq!(run.code(), 1, "{}", run.stdout());
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let n: Vec<(String, String)> = sequence_after(&s, "st", 0)
        .into_iter()
        .filter(|e| e.0 == "N")
        .map(|e| (e.1, e.2))
        .collect();
    assert!(
        n.contains(&(
            "CREATE_FAILED".to_string(),
            "the handler failed before answering: Error: told to throw on create".to_string()
        )),
        "{n:?}"
    );
    assert_eq!(
        n.last().map(|e| e.0.as_str()),
        Some("DELETE_COMPLETE"),
        "{n:?}"
    );
    let status = cairn(&s, &["describe", "st", "--output", "json"]).json()["Stacks"][0]
        ["StackStatus"]
        .clone();
    assert_eq!(status, "ROLLBACK_COMPLETE");
}

/// `tests/e2e/node/file-mode-hook/index.ts` compiled with the SDK's
/// TypeScript into `out`, as a Lambda's build would.
fn compile_hook(out: &Path) {
    let tsc = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sdk-typescript/node_modules/typescript/bin/tsc"
    );
    assert!(
        Path::new(tsc).exists(),
        "{tsc} is missing: `cargo xtask test` installs it (npm ci in sdk-typescript)"
    );
    let built = Command::new("node")
        .arg(tsc)
        .arg(handler_dir("file-mode-hook").join("index.ts"))
        .args(["--outDir", out.to_str().unwrap_or_default()])
        .args(["--module", "commonjs", "--target", "es2020", "--strict"])
        .output()
        .expect("node runs tsc");
    assert!(
        built.status.success(),
        "tsc: {}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
}

#[test]
fn an_unchanged_typescript_lambda_hook_judges_files_behind_the_node_adapter() {
    let s = Scratch::new();
    let out = s.dir.path().join("hook");
    compile_hook(&out);
    let hook = Program::start(node_adapter(&["index.handler"], &out));
    s.write(
        "cairn.toml",
        &format!("[webhooks]\nsecret = \"{SECRET}\"\n"),
    );
    let hooks = format!(
        "Resources:\n  FileMode:\n    Type: AWS::CloudFormation::LambdaHook\n    Properties:\n      Alias: Private::Lambda::TsFileMode\n      LambdaFunction: 'http://127.0.0.1:{}/'\n      ExecutionRole: arn:aws:iam::123456789012:role/hook\n      FailureMode: FAIL\n      TargetOperations: [RESOURCE]\n      TargetFilters: {{TargetNames: [Cairn::Local::File]}}\n",
        hook.port
    );
    let run = deploy(&s, "hooks", &hooks, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let file = |name: &str, mode: &str| {
        let path = s.dir.path().join(name).display().to_string();
        format!("Resources:\n  F:\n    Type: Cairn::Local::File\n    Properties: {{Path: '{path}', Content: x, Mode: '{mode}'}}\n")
    };
    let run = deploy(&s, "good", &file("good.txt", "0600"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let verdicts: Vec<String> = crate::update::events(&s, "good")
        .iter()
        .filter_map(|e| e["HookStatus"].as_str().map(String::from))
        .collect();
    assert_eq!(verdicts, ["HOOK_IN_PROGRESS", "HOOK_COMPLETE_SUCCEEDED"]);
    let run = deploy(&s, "bad", &file("bad.txt", "0644"), &[]);
    assert_ne!(run.code(), 0);
    let failed = crate::update::events(&s, "bad")
        .iter()
        .find(|e| e["LogicalResourceId"] == "F" && e["ResourceStatus"] == "CREATE_FAILED")
        .and_then(|e| e["ResourceStatusReason"].as_str().map(String::from))
        .unwrap_or_default();
    assert_eq!(
        failed,
        "The following hook(s) failed: [Private::Lambda::TsFileMode]. Private::Lambda::TsFileMode: Mode must be 0600, not 0644 (invocations 1, 2, 3 with one clientRequestToken)"
    );
    assert!(!s.dir.path().join("bad.txt").exists());
    for stack in ["good", "bad", "hooks"] {
        assert_eq!(cairn(&s, &["delete", stack]).code(), 0);
    }
}

/// An unchanged Node.js macro function (AWS's StringFunctions sample,
/// `tests/e2e/node/string-macro/index.js`) behind the Node adapter, as
/// the Python adapter serves Python ones: its return value is the answer,
/// a failure it returns or an error it throws is the transform's failure.
#[test]
fn an_unchanged_node_macro_function_runs_behind_the_node_adapter() {
    let s = Scratch::new();
    let handler = Program::start(node_adapter(
        &["index.handler"],
        &handler_dir("string-macro"),
    ));
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\nsecret = \"{SECRET}\"\n\n[[macros]]\nname = \"String\"\nurl = \"http://127.0.0.1:{}/\"\n",
            handler.port
        ),
    );
    let template = |operation: &str| {
        format!("Resources:\n  R:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value:\n        Fn::Transform:\n          - {{Name: String, Parameters: {{InputString: hello world, Operation: Replace, Old: world, New: node}}}}\n          - {{Name: String, Parameters: {{Operation: {operation}}}}}\n")
    };
    let auto = ["--capabilities", "CAPABILITY_AUTO_EXPAND"];
    let run = deploy(&s, "st", &template("Upper"), &auto);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let processed = cairn(&s, &["template", "st", "--stage", "processed"]).json();
    assert_eq!(
        processed["Resources"]["R"]["Properties"]["Value"],
        "HELLO NODE"
    );
    let run = deploy(&s, "bad", &template("Sideways"), &auto);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Transform 123456789012::String failed with: unknown operation Sideways (at /Resources/R/Properties/Value/Fn::Transform/1)"),
        "{}",
        run.stderr()
    );
    let run = deploy(&s, "bad", &template("Throw"), &auto);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Transform 123456789012::String failed with: TypeError: cannot read the input (at /Resources/R/Properties/Value/Fn::Transform/1)"),
        "{}",
        run.stderr()
    );
    assert_eq!(cairn(&s, &["delete", "st"]).code(), 0);
}

/// A provider that claims a type the engine already serves makes only that
/// type ambiguous: its other types are served, and the claimed one is
/// refused with both claimants named, whatever was looked up first.
#[test]
fn a_provider_claiming_an_engine_type_makes_only_that_type_ambiguous() {
    let s = Scratch::new();
    let notes = s.dir.path().join("notes");
    std::fs::create_dir_all(&notes).expect("notes dir");
    let schemas: Value = serde_json::from_str(
        &std::fs::read_to_string(handler_dir("notes-schema.json")).expect("schema"),
    )
    .expect("schema json");
    let mut note = schemas["Schemas"][0].clone();
    note["TypeName"] = "Vendor::Notes::Note".into();
    let mut macro_type = schemas["Schemas"][0].clone();
    macro_type["TypeName"] = "AWS::CloudFormation::Macro".into();
    let schema = s.write(
        "schema.json",
        &serde_json::json!({"Schemas": [note, macro_type]}).to_string(),
    );
    let mut cmd = node_adapter(
        &[
            "index.handler",
            "--schema",
            schema.to_str().unwrap_or_default(),
        ],
        &handler_dir("notes-inline"),
    );
    cmd.env("NOTES_DIR", &notes);
    let handler = Program::start(cmd);
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\nsecret = \"{SECRET}\"\n\n[[providers]]\nkind = \"webhook\"\nname = \"notes\"\nurl = \"http://127.0.0.1:{}/\"\n",
            handler.port
        ),
    );
    let ambiguous = "resource type AWS::CloudFormation::Macro is claimed by two providers: engine:macros and notes; remove it from one of them (set `types` in its [[providers]] entry)";
    // Looked up first, the engine's type is already ambiguous.
    let run = deploy(
        &s,
        "macro",
        "Resources:\n  M:\n    Type: AWS::CloudFormation::Macro\n    Properties: {Name: M, FunctionName: 'http://127.0.0.1:1/'}\n",
        &[],
    );
    assert_eq!(run.code(), 1);
    assert!(run.stderr().contains(ambiguous), "{}", run.stderr());
    // The provider's own type is served.
    let run = deploy(
        &s,
        "note",
        "Resources:\n  N:\n    Type: Vendor::Notes::Note\n    Properties: {Name: a, Text: one}\n",
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let providers = cairn(&s, &["providers"]);
    assert_eq!(providers.code(), 1);
    assert!(
        providers.stdout().contains("Vendor::Notes::Note"),
        "{}",
        providers.stdout()
    );
    assert!(
        providers
            .stderr()
            .contains(&format!("provider notes: {ambiguous}")),
        "{}",
        providers.stderr()
    );
    assert_eq!(cairn(&s, &["delete", "note"]).code(), 0);
}
