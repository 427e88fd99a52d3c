//! Macros through the real binary: a Python macro served as a webhook (the
//! SDK's `Macro`), an unchanged macro Lambda behind the Lambda adapter
//! defined by an `AWS::CloudFormation::Macro` of another stack, and a
//! plugin's macro (a dylib in its host process). Each runs in
//! CloudFormation's order, before anything is created; the original and
//! processed templates are both kept.

use crate::support::Scratch;
use crate::update::{cairn, deploy, ev, sequence_after, status};
use crate::webhooks::{Program, SECRET};

/// The Python SDK's example macro `Count` (`examples/python-macro`).
pub(crate) fn count_macro() -> Program {
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/python-macro/count.py"
    ))
    .args(["--listen", "127.0.0.1:0", "--secret", SECRET]);
    Program::start(cmd)
}

/// A scratch directory whose configuration names `handler` as the macro
/// `Count`.
fn count_scratch(handler: &Program) -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\nsecret = \"{SECRET}\"\n\n[[macros]]\nname = \"Count\"\nurl = \"http://127.0.0.1:{}/\"\n",
            handler.port
        ),
    );
    s
}

const COUNTED: &str = "Transform: Count\nResources:\n  B:\n    Type: Cairn::Test::Resource\n    Count: 3\n    Properties: {Value: bucket-%d}\n  Plain:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !GetAtt B2.Value}\nOutputs:\n  Second: {Value: !GetAtt B2.Value}\n";

/// Asserts that `run` failed with `text` in its error.
fn refused(run: &crate::support::Run, text: &str) {
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(run.stderr().contains(text), "{}", run.stderr());
}

/// A configuration where the kv plugin serves the macro `name`.
fn kv_macro_config(s: &Scratch, name: &str) {
    s.write(
        "cairn.toml",
        &format!(
            "[[providers]]\n{}\n[[macros]]\nname = \"{name}\"\nprovider = \"kv\"\n",
            crate::plugins::kv_entry("")
        ),
    );
}

fn logical_ids(s: &Scratch, stack: &str) -> Vec<String> {
    let run = cairn(s, &["resources", stack, "--output", "json"]);
    let mut ids: Vec<String> = run.json()["StackResources"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|r| {
                    r["LogicalResourceId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

#[test]
fn a_python_macro_expands_the_whole_template_and_both_stages_are_kept() {
    let handler = count_macro();
    let s = count_scratch(&handler);
    // Run directly, a macro must be acknowledged; nothing is recorded.
    let run = deploy(&s, "st", COUNTED, &[]);
    refused(&run, "Requires capabilities : [CAPABILITY_AUTO_EXPAND]");
    assert_ne!(cairn(&s, &["describe", "st"]).code(), 0);
    // validate runs the macro as deploy does, and says what it requires.
    let path = s.write("counted.yaml", COUNTED);
    let run = cairn(
        &s,
        &[
            "validate",
            path.to_str().unwrap_or_default(),
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        run.json()["Capabilities"],
        serde_json::json!(["CAPABILITY_AUTO_EXPAND"])
    );
    let auto = ["--capabilities", "CAPABILITY_AUTO_EXPAND"];
    let run = deploy(&s, "st", COUNTED, &auto);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(logical_ids(&s, "st"), ["B1", "B2", "B3", "Plain"]);
    let described = cairn(&s, &["describe", "st", "--output", "json"]).json();
    assert_eq!(
        described["Stacks"][0]["Capabilities"],
        serde_json::json!(["CAPABILITY_AUTO_EXPAND"])
    );
    let out = cairn(&s, &["outputs", "st", "--output", "json"]).json();
    assert_eq!(out["Outputs"][0]["OutputValue"], "bucket-2", "{out}");
    // The template as written, and as the macro left it (JSON).
    let original = cairn(&s, &["template", "st"]);
    assert_eq!(original.stdout().trim_end(), COUNTED.trim_end());
    let processed = cairn(&s, &["template", "st", "--stage", "processed"]).json();
    assert_eq!(
        processed["Resources"]["B3"]["Properties"]["Value"],
        "bucket-3"
    );
    assert!(processed.get("Transform").is_none(), "{processed}");
    assert!(processed["Resources"].get("B").is_none(), "{processed}");
    // An update runs the macro again: one copy fewer is one resource deleted.
    let events = sequence_after(&s, "st", 0).len();
    let fewer = COUNTED.replace("Count: 3", "Count: 2");
    let run = deploy(&s, "st", &fewer, &auto);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(logical_ids(&s, "st"), ["B1", "B2", "Plain"]);
    let after = sequence_after(&s, "st", events);
    assert!(
        after.contains(&ev(
            "B3",
            "DELETE_COMPLETE",
            "",
            &after_physical(&after, "B3")
        )),
        "{after:?}"
    );
    // A macro's failure is CloudFormation's text, the same from validate,
    // deploy and plan; the stack is untouched.
    let broken = COUNTED.replace("Count: 3", "Count: many");
    let want = "Transform 123456789012::Count failed with: Count of B must be a whole number, not 'many' (at /Transform";
    let path = s.write("broken.yaml", &broken);
    let path = path.to_str().unwrap_or_default();
    for args in [
        vec!["validate", path],
        vec![
            "deploy",
            "st",
            path,
            "--capabilities",
            "CAPABILITY_AUTO_EXPAND",
        ],
        vec!["plan", "st", path],
    ] {
        let run = cairn(&s, &args);
        assert_eq!(run.code(), 1, "{args:?}");
        assert!(run.stderr().contains(want), "{args:?}: {}", run.stderr());
    }
    assert_eq!(status(&s, "st"), "UPDATE_COMPLETE");
    // An undefined macro is named.
    let run = deploy(
        &s,
        "st",
        &COUNTED.replace("Transform: Count", "Transform: Countless"),
        &auto,
    );
    assert!(
        run.stderr()
            .contains("No transform named 123456789012::Countless found."),
        "{}",
        run.stderr()
    );
    assert_eq!(cairn(&s, &["delete", "st"]).code(), 0);
}

/// The physical id `after` shows for `logical`.
fn after_physical(after: &[crate::update::Ev], logical: &str) -> String {
    after
        .iter()
        .find(|e| e.0 == logical)
        .map(|e| e.3.clone())
        .unwrap_or_default()
}

/// An unchanged macro Lambda (AWS's StringFunctions sample, shortened): it
/// returns CloudFormation's macro response itself.
const STRING_FUNCTIONS: &str = r#"
def handler(event, context):
    params = event["params"]
    operation = params.get("Operation")
    # A later entry of an Fn::Transform list works on the entry before's
    # answer (its fragment) unless given an InputString.
    text = params.get("InputString", event["fragment"])
    if operation == "Upper":
        result = text.upper()
    elif operation == "Repeat":
        result = text * int(params.get("Count", 2))
    else:
        return {"requestId": event["requestId"], "status": "failure",
                "errorMessage": "unknown operation %s" % operation}
    return {"requestId": event["requestId"], "status": "success", "fragment": result}
"#;

const USES_STRING: &str = "Resources:\n  R:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value:\n        Fn::Transform: {Name: String, Parameters: {InputString: hello, Operation: Upper}}\n      Fn::Transform: {Name: String, Parameters: {InputString: ignored, Operation: Bogus}}\n";

#[test]
fn a_macro_resource_defines_a_macro_that_other_stacks_use_inside_a_resource() {
    let s = Scratch::new();
    s.write("string_functions.py", STRING_FUNCTIONS);
    let handler = Program::start(crate::webhooks::lambda_adapter(
        "string_functions.handler",
        s.dir.path().to_str().unwrap_or_default(),
        SECRET,
    ));
    s.write(
        "cairn.toml",
        &format!("[webhooks]\nsecret = \"{SECRET}\"\n"),
    );
    let url = format!("http://127.0.0.1:{}/", handler.port);
    let macros = format!(
        "Resources:\n  M:\n    Type: AWS::CloudFormation::Macro\n    Properties: {{Name: String, FunctionName: '{url}', Description: string functions}}\n"
    );
    let run = deploy(&s, "macros", &macros, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        sequence_after(&s, "macros", 0)[3],
        ev("M", "CREATE_COMPLETE", "", "String")
    );
    let auto = ["--capabilities", "CAPABILITY_AUTO_EXPAND"];
    // Deepest first: the value's transform runs before the one beside it,
    // and that one fails.
    let run = deploy(&s, "app", USES_STRING, &auto);
    refused(&run, "Transform 123456789012::String failed with: unknown operation Bogus (at /Resources/R/Properties/Fn::Transform");
    // The transform inside the resource's properties; a list of them as
    // AWS's StringFunctions sample writes it (one entry), and two entries,
    // the second given the first's answer.
    let one = USES_STRING.replace(
        "      Fn::Transform: {Name: String, Parameters: {InputString: ignored, Operation: Bogus}}\n",
        "      Name:\n        Fn::Transform: {Name: String, Parameters: {InputString: ab, Operation: Repeat, Count: 3}}\n      Tags:\n        - Key: Upper\n          Value:\n            'Fn::Transform':\n             - Name: 'String'\n               Parameters:\n                 InputString: sample\n                 Operation: Upper\n        - Key: Chained\n          Value:\n            Fn::Transform:\n              - {Name: String, Parameters: {InputString: ab, Operation: Repeat, Count: 2}}\n              - {Name: String, Parameters: {Operation: Upper}}\n",
    );
    let run = deploy(&s, "app", &one, &auto);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let processed = cairn(&s, &["template", "app", "--stage", "processed"]).json();
    assert_eq!(
        processed["Resources"]["R"]["Properties"],
        serde_json::json!({"Value": "HELLO", "Name": "ababab", "Tags": [
            {"Key": "Upper", "Value": "SAMPLE"},
            {"Key": "Chained", "Value": "ABAB"}
        ]})
    );
    let bad = one.replace(
        "              - {Name: String, Parameters: {Operation: Upper}}\n",
        "              - String\n",
    );
    let run = deploy(&s, "bad", &bad, &auto);
    refused(&run, "Template format error: Fn::Transform must be {Name: macro name, Parameters: {…}}, or a list of them (at /Resources/R/Properties/Tags/1/Value/Fn::Transform/1)");
    // Macro names are the state's: another stack cannot define String.
    let run = deploy(&s, "other", &macros, &[]);
    refused(&run, "Macro String of M already exists: stack macros defines it. Macro names are unique in a Cairn state; choose another Name");
    // Once its stack is gone, the macro is too.
    assert_eq!(cairn(&s, &["delete", "macros"]).code(), 0);
    let run = deploy(&s, "again", &one, &auto);
    assert!(
        run.stderr()
            .contains("No transform named 123456789012::String found."),
        "{}",
        run.stderr()
    );
    // The stack made with it keeps its processed template: it deletes
    // without the macro.
    assert_eq!(cairn(&s, &["delete", "app"]).code(), 0);
}

#[test]
fn a_plugin_serves_a_macro_from_its_host_process_in_a_change_set() {
    let s = Scratch::new();
    kv_macro_config(&s, "KvRecords");
    // Resources: one of its keys is the transform; its Store parameter is
    // not evaluated by the macro (a Ref the template evaluates later).
    let template = "Parameters:\n  Dir: {Type: String, Default: ./store}\nResources:\n  Fn::Transform:\n    Name: KvRecords\n    Parameters: {Store: !Ref Dir, Entries: {alpha: one, beta: two}}\n  Other:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !GetAtt Recordalpha.Path}\n";
    let path = s.write("kv.yaml", template);
    // A change set needs no CAPABILITY_AUTO_EXPAND: it is reviewed.
    let run = cairn(
        &s,
        &[
            "plan",
            "kv",
            path.to_str().unwrap_or_default(),
            "--name",
            "first",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&s, &["execute", "kv", "first"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        logical_ids(&s, "kv"),
        ["Other", "Recordalpha", "Recordbeta"]
    );
    let store = s.dir.path().join("store");
    assert_eq!(
        std::fs::read_to_string(store.join("alpha")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(store.join("beta")).unwrap(),
        "two\n"
    );
    let processed = cairn(&s, &["template", "kv", "--stage", "processed"]).json();
    assert_eq!(
        processed["Resources"]["Recordbeta"]["Properties"]["Store"],
        serde_json::json!({"Ref": "Dir"})
    );
    assert_eq!(cairn(&s, &["delete", "kv"]).code(), 0);
    assert!(!store.join("alpha").exists());
    // A provider that serves no macro by that name answers with a failure.
    let wrong = template.replace("Name: KvRecords", "Name: Other");
    kv_macro_config(&s, "Other");
    let path = s.write("wrong.yaml", &wrong);
    let run = cairn(&s, &["validate", path.to_str().unwrap_or_default()]);
    refused(&run, "Transform 123456789012::Other failed with: kv serves the macro KvRecords, not 123456789012::Other (at /Resources/Fn::Transform");
}

#[test]
fn a_macros_entry_needs_one_function() {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        "[[macros]]\nname = \"M\"\nurl = \"http://127.0.0.1:1/\"\nprovider = \"kv\"\n",
    );
    let run = cairn(&s, &["list"]);
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr().contains(
            "[[macros]] M needs exactly one of url (a webhook) and provider (a [[providers]] entry's name)"
        ),
        "{}",
        run.stderr()
    );
}

const SAM: &str = "Transform: AWS::Serverless-2016-10-31\nParameters:\n  Stage: {Type: String, Default: dev}\nResources:\n  Hello:\n    Type: AWS::Serverless::Function\n    Properties:\n      Runtime: python3.12\n      Handler: app.handler\n      InlineCode: \"def handler(event, context): return {'statusCode': 200}\"\n      Environment: {Variables: {TABLE: !Ref Table, STAGE: !Ref Stage}}\n      Events:\n        Api: {Type: Api, Properties: {Path: /hello, Method: get}}\n  Table:\n    Type: AWS::Serverless::SimpleTable\nOutputs:\n  FunctionArn: {Value: !GetAtt Hello.Arn}\n";

#[test]
fn a_sam_template_deploys_through_the_sam_translator_served_as_a_macro() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sam-macro");
    let mut translator = crate::support::python_with("samtranslator");
    translator.arg(format!("{example}/sam.py")).args([
        "--listen",
        "127.0.0.1:0",
        "--secret",
        SECRET,
    ]);
    let translator = Program::start(translator);
    let mut echo = crate::support::python();
    echo.arg(format!("{example}/aws_echo.py")).args([
        "--listen",
        "127.0.0.1:0",
        "--secret",
        SECRET,
    ]);
    let echo = Program::start(echo);
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\nsecret = \"{SECRET}\"\n\n[[macros]]\nname = \"AWS::Serverless-2016-10-31\"\nurl = \"http://127.0.0.1:{}/\"\n\n[[providers]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{SECRET}\"\nname = \"aws\"\n",
            translator.port, echo.port
        ),
    );
    // The function's role is made by the expansion: CAPABILITY_IAM counts
    // what the macro made.
    let run = deploy(
        &s,
        "sam",
        SAM,
        &["--capabilities", "CAPABILITY_AUTO_EXPAND"],
    );
    refused(&run, "Requires capabilities : [CAPABILITY_IAM]");
    let caps = ["--capabilities", "CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"];
    let run = deploy(&s, "sam", SAM, &caps);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let ids = logical_ids(&s, "sam");
    assert_eq!(ids.len(), 7, "{ids:?}");
    for want in [
        "Hello",
        "HelloApiPermissionProd",
        "HelloRole",
        "ServerlessRestApi",
        "ServerlessRestApiProdStage",
        "Table",
    ] {
        assert!(ids.iter().any(|i| i == want), "{want} in {ids:?}");
    }
    assert!(
        ids.iter()
            .any(|i| i.starts_with("ServerlessRestApiDeployment")),
        "{ids:?}"
    );
    let processed = cairn(&s, &["template", "sam", "--stage", "processed"]).json();
    assert_eq!(
        processed["Resources"]["Hello"]["Type"],
        "AWS::Lambda::Function"
    );
    assert_eq!(
        processed["Resources"]["Hello"]["Properties"]["Role"],
        serde_json::json!({"Fn::GetAtt": ["HelloRole", "Arn"]})
    );
    assert_eq!(
        processed["Resources"]["Table"]["Type"],
        "AWS::DynamoDB::Table"
    );
    let out = cairn(&s, &["outputs", "sam", "--output", "json"]).json();
    let arn = out["Outputs"][0]["OutputValue"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        arn.starts_with("arn:aws:lambda:us-east-1:123456789012:function/Hello-"),
        "{out}"
    );
    // A parameter the function's environment reads: the function is updated
    // in place, the rest is left alone.
    let events = sequence_after(&s, "sam", 0).len();
    let run = deploy(&s, "sam", SAM, &[&caps[..], &["-p", "Stage=prod"]].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let after = sequence_after(&s, "sam", events);
    let updated: Vec<&str> = after
        .iter()
        .filter(|e| e.1 == "UPDATE_COMPLETE" && !e.0.is_empty() && e.0 != "sam")
        .map(|e| e.0.as_str())
        .collect();
    assert_eq!(updated, ["Hello"], "{after:?}");
    assert_eq!(cairn(&s, &["delete", "sam"]).code(), 0);
}

#[test]
fn a_nested_stacks_macros_run_with_its_own_parameters_when_it_is_made() {
    let handler = count_macro();
    let s = count_scratch(&handler);
    s.write(
        "child.yaml",
        "Transform: Count\nParameters:\n  N: {Type: String}\nResources:\n  C:\n    Type: Cairn::Test::Resource\n    Count: 2\n    Properties: {Value: !Sub 'child-%d-${N}'}\nOutputs:\n  First: {Value: !GetAtt C1.Value}\n",
    );
    let parent = "Parameters:\n  N: {Type: String, Default: x}\nResources:\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: child.yaml\n      Parameters: {N: !Ref N}\nOutputs:\n  FromChild: {Value: !GetAtt Child.Outputs.First}\n";
    // The child's transform needs the parent's acknowledgement.
    let run = deploy(&s, "parent", parent, &[]);
    refused(&run, "Requires capabilities : [CAPABILITY_AUTO_EXPAND]");
    let auto = ["--capabilities", "CAPABILITY_AUTO_EXPAND"];
    let run = deploy(&s, "parent", parent, &auto);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let output = |s: &Scratch| {
        cairn(s, &["outputs", "parent", "--output", "json"]).json()["Outputs"][0]["OutputValue"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(output(&s), "child-1-x");
    let child = cairn(&s, &["resources", "parent", "--output", "json"]).json()["StackResources"][0]
        ["PhysicalResourceId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let processed = cairn(&s, &["template", &child, "--stage", "processed"]).json();
    assert_eq!(
        processed["Resources"]["C2"]["Properties"]["Value"],
        serde_json::json!({"Fn::Sub": "child-2-${N}"})
    );
    // An update gives the child new values: its macro runs again with them.
    let run = deploy(&s, "parent", parent, &[&auto[..], &["-p", "N=y"]].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(output(&s), "child-1-y");
    assert_eq!(cairn(&s, &["delete", "parent"]).code(), 0);
    assert!(s.resource_files().is_empty());
}
