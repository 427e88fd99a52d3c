//! `cairn provider test` through the real binary: the contract tests pass
//! for the built-in types, the example plugin and the handler-kit example,
//! and fail, test by named test, for a provider built to break them
//! (`tests/plugins/broken`).

use std::process::Command;

use serde_json::Value;

use crate::support::Scratch;
use crate::webhooks::{kit_example, Program, SECRET};

/// `cairn provider test ARGS --output json` in `s`: its reports, after
/// checking the exit code.
pub(crate) fn kit(s: &Scratch, args: &[&str], code: i32) -> Value {
    let mut all = vec!["provider", "test"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let run = s.cairn(&all);
    assert_eq!(run.code(), code, "{}\n{}", run.stdout(), run.stderr());
    run.json()
}

/// (type, test, status) of each report of `cairn provider test --output json`.
fn outcomes(json: &Value) -> Vec<(String, String, String)> {
    json.as_array()
        .map(|l| {
            l.iter()
                .map(|r| {
                    let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                    (s("TypeName"), s("Test"), s("Status"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn expect(type_name: &str, list: &[(&str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(t, s)| (type_name.to_string(), t.to_string(), s.to_string()))
        .collect()
}

/// Every test passed: the list a provider that keeps the contract, drift
/// included, gets with one Mutable and one CreateOnly update.
fn all_passed(type_name: &str, mutable: &str, create_only: &str) -> Vec<(String, String, String)> {
    let in_place = format!("update_in_place[{mutable}]");
    let replaced = format!("update_create_only_replaces[{create_only}]");
    expect(
        type_name,
        &[
            ("schema_well_formed", "PASSED"),
            ("create_returns_id_and_attributes", "PASSED"),
            ("create_repeated_request_id_same_resource", "PASSED"),
            ("drift_in_sync_after_create", "PASSED"),
            ("read_after_create_matches", "PASSED"),
            (&in_place, "PASSED"),
            (&replaced, "PASSED"),
            ("invalid_properties_refused", "PASSED"),
            ("delete_succeeds", "PASSED"),
            ("delete_again_not_found_or_success", "PASSED"),
            ("drift_deleted_after_delete", "PASSED"),
            ("read_missing_is_not_found", "PASSED"),
            ("expired_deadline_refused", "PASSED"),
        ],
    )
}

#[test]
fn the_builtin_test_resource_keeps_the_contract_and_leaves_no_file() {
    let s = Scratch::new();
    s.write(
        "inputs.yaml",
        "Cairn::Test::Resource:\n  Create: {Name: contract-a, Value: one}\n  Updates:\n    - {Name: contract-a, Value: two}\n    - {Name: contract-b, Value: two}\n  Invalid: {Value: one, Colour: red}\n",
    );
    let json = kit(
        &s,
        &[
            "--type",
            "Cairn::Test::Resource",
            "--properties",
            "inputs.yaml",
        ],
        0,
    );
    assert_eq!(
        outcomes(&json),
        all_passed("Cairn::Test::Resource", "Value", "Name")
    );
    // The replacement was a new resource named by its CreateOnly property;
    // the schema refused the unknown property, naming it.
    let message = |test: &str| -> String {
        json.as_array()
            .and_then(|l| l.iter().find(|r| r["Test"] == test))
            .and_then(|r| r["Message"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        message("update_create_only_replaces[Name]"),
        "replaced: contract-a -> contract-b, the old one deleted; drift IN_SYNC"
    );
    assert_eq!(
        message("invalid_properties_refused"),
        "refused by the schema before the provider is called: #: extraneous key [Colour] is not permitted (valid properties: Description, Fail, FailFor, FailMessage, Fixed, Name, Restart, Tags, Unhealthy, Value, WaitSeconds)"
    );
    assert_eq!(s.resource_files(), Vec::<String>::new());
}

#[test]
fn the_random_string_is_tested_from_its_schema_alone() {
    let s = Scratch::new();
    let json = kit(&s, &["--type", "Cairn::Random::String"], 0);
    // Every property is CreateOnly and it does not check drift: each
    // update is a replacement, and the drift tests say why they did not run.
    assert_eq!(
        outcomes(&json),
        expect(
            "Cairn::Random::String",
            &[
                ("schema_well_formed", "PASSED"),
                ("create_returns_id_and_attributes", "PASSED"),
                ("create_repeated_request_id_same_resource", "PASSED"),
                ("drift_in_sync_after_create", "SKIPPED"),
                ("read_after_create_matches", "SKIPPED"),
                ("update_create_only_replaces[Characters]", "PASSED"),
                ("update_create_only_replaces[Keepers]", "PASSED"),
                ("update_create_only_replaces[Length]", "PASSED"),
                ("update_in_place", "SKIPPED"),
                ("invalid_properties_refused", "PASSED"),
                ("delete_succeeds", "PASSED"),
                ("delete_again_not_found_or_success", "PASSED"),
                ("drift_deleted_after_delete", "SKIPPED"),
                ("read_missing_is_not_found", "SKIPPED"),
                ("expired_deadline_refused", "PASSED"),
            ]
        )
    );
}

#[test]
fn every_other_builtin_passes_or_says_why_it_skipped() {
    let s = Scratch::new();
    s.write(
        "inputs.yaml",
        "OS::Heat::TestResource:\n  Create: {value: a}\n  Updates:\n    - {value: b}\n",
    );
    for (type_name, args) in [
        ("Cairn::Local::File", &[][..]),
        ("OS::Heat::None", &[][..]),
        ("OS::Heat::Value", &[][..]),
        ("OS::Heat::RandomString", &[][..]),
        (
            "OS::Heat::TestResource",
            &["--properties", "inputs.yaml"][..],
        ),
    ] {
        let mut all = vec!["--type", type_name];
        all.extend_from_slice(args);
        let json = kit(&s, &all, 0);
        let reports = json.as_array().cloned().unwrap_or_default();
        assert!(reports.len() >= 11, "{type_name}: {json}");
        for r in &reports {
            assert_ne!(r["Status"], "FAILED", "{type_name}: {r}");
            // A skip says why.
            if r["Status"] == "SKIPPED" {
                assert!(!r["Message"].as_str().unwrap_or_default().is_empty(), "{r}");
            }
        }
        assert!(
            reports
                .iter()
                .any(|r| r["Test"] == "expired_deadline_refused" && r["Status"] == "PASSED"),
            "{type_name}: {json}"
        );
    }
    // Cairn::Local::File's derived Mode is refused by the provider: skipped,
    // with the provider's reason.
    let json = kit(&s, &["--type", "Cairn::Local::File"], 0);
    let mode = json
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|r| r["Test"] == "update_in_place[Mode]")
                .cloned()
        })
        .unwrap_or_default();
    assert_eq!(mode["Status"], "SKIPPED");
    assert_eq!(
        mode["Message"],
        "the provider refused the update derived from the schema as invalid (Mode 'contract-test-2' is not an octal file mode such as 0644); give valid updates with --properties or --update"
    );
}

#[test]
fn the_example_plugin_keeps_the_contract_in_either_isolation() {
    let lib = crate::plugins::library("cairn_example_kv");
    for isolation in [&[][..], &["--in-process"][..]] {
        let s = Scratch::new();
        // The store by its absolute path: a read reports it so.
        let store = s.dir.path().join("store").display().to_string();
        s.write(
            "inputs.yaml",
            &format!("Example::KV::Record:\n  Create: {{Store: '{store}', Key: greeting, Value: hello, Ttl: 30}}\n  Updates:\n    - {{Store: '{store}', Key: greeting, Value: bye, Ttl: 30}}\n    - {{Store: '{store}', Key: other, Value: bye, Ttl: 30}}\n  Invalid: {{Store: '{store}', Key: ../escape, Value: hello}}\n"),
        );
        let lib = lib.display().to_string();
        let mut args = vec!["--plugin", &lib, "--properties", "inputs.yaml"];
        args.extend_from_slice(isolation);
        let json = kit(&s, &args, 0);
        assert_eq!(
            outcomes(&json),
            all_passed("Example::KV::Record", "Value", "Key")
        );
        // The schema lets the key through; the provider refuses it.
        assert_eq!(
            json[7]["Message"],
            "refused: Key \"../escape\" must be a plain file name (no slashes, not starting with a dot)"
        );
        let left: Vec<_> = std::fs::read_dir(s.dir.path().join("store"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn the_handler_kit_example_keeps_the_contract_over_http() {
    let mut cmd = Command::new(kit_example());
    cmd.args(["--listen", "127.0.0.1:0", "--secret", SECRET]);
    let handler = Program::start(cmd);
    let s = Scratch::new();
    let url = format!("http://127.0.0.1:{}/", handler.port);
    // Inputs derived from the handler's /schema.
    let json = kit(
        &s,
        &["--webhook", &url, "--secret", SECRET, "--drift", "--read"],
        0,
    );
    assert_eq!(
        outcomes(&json),
        all_passed("Custom::Greeting", "Excited", "Name")
    );
    // A wrong secret: the handler refuses every call, and the kit says why.
    let json = kit(&s, &["--webhook", &url, "--secret", "wrong"], 1);
    assert_eq!(json[1]["Test"], "create_returns_id_and_attributes");
    assert_eq!(json[1]["Status"], "FAILED");
    assert_eq!(
        json[1]["Message"],
        format!("create must succeed with valid properties; it failed: the handler at {url} answered HTTP 401 Unauthorized: the signature does not match: the handler's secret differs from the endpoint's secret in Cairn's config, or the body was changed")
    );
    assert_eq!(json[2]["Status"], "SKIPPED");
    assert_eq!(json[2]["Message"], "create failed");
}

#[test]
fn the_python_example_provider_keeps_the_contract_over_http() {
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/python-provider/greetings.py"
    ))
    .args(["--listen", "127.0.0.1:0", "--secret", SECRET])
    .env(
        "PYTHONPATH",
        concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"),
    );
    let handler = Program::start(cmd);
    let s = Scratch::new();
    let url = format!("http://127.0.0.1:{}/", handler.port);
    let json = kit(
        &s,
        &["--webhook", &url, "--secret", SECRET, "--drift", "--read"],
        0,
    );
    assert_eq!(
        outcomes(&json),
        all_passed("Custom::Greeting", "Excited", "Name")
    );
}

#[test]
fn the_typescript_example_provider_keeps_the_contract_over_http() {
    let handler = Program::start(crate::node::typescript_example());
    let s = Scratch::new();
    let url = format!("http://127.0.0.1:{}/", handler.port);
    let json = kit(
        &s,
        &["--webhook", &url, "--secret", SECRET, "--drift", "--read"],
        0,
    );
    assert_eq!(
        outcomes(&json),
        all_passed("Custom::Greeting", "Excited", "Name")
    );
}

#[test]
fn the_python_sdk_passes_its_own_tests() {
    let out = crate::support::python()
        .args(["-m", "unittest", "discover", "-s", "tests"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Ran 14 tests"), "{stderr}");
}

#[test]
fn the_typescript_sdk_passes_its_own_tests() {
    let out = Command::new("node")
        .args(["--test", "test/sdk.test.js"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-typescript"))
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("# pass 10\n"), "{stdout}");
}

#[test]
fn a_broken_provider_fails_exactly_the_tests_it_breaks() {
    let lib = crate::plugins::library("cairn_test_broken")
        .display()
        .to_string();
    let s = Scratch::new();
    s.write(
        "inputs.json",
        r#"{"Test::Broken::Thing": {"Create": {"Name": "a", "Size": 1}, "Updates": [{"Name": "a", "Size": 2}], "Invalid": {"Name": "a", "Size": 1000}}}"#,
    );
    s.write(
        "rename.json",
        r#"{"Test::Broken::Thing": {"Name": "b", "Size": 2}}"#,
    );
    let run = s.cairn(&[
        "provider",
        "test",
        "--plugin",
        &lib,
        "--properties",
        "inputs.json",
        "--update",
        "rename.json",
        "--output",
        "json",
        "--junit",
        "report.xml",
    ]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    assert_eq!(
        run.stderr().trim_end(),
        "error: 5 of 13 contract tests failed"
    );
    let json = run.json();
    assert_eq!(
        outcomes(&json),
        expect(
            "Test::Broken::Thing",
            &[
                ("schema_well_formed", "PASSED"),
                ("create_returns_id_and_attributes", "FAILED"),
                ("create_repeated_request_id_same_resource", "FAILED"),
                ("drift_in_sync_after_create", "PASSED"),
                ("read_after_create_matches", "SKIPPED"),
                ("update_in_place[Size]", "FAILED"),
                ("update_create_only_replaces[Name]", "PASSED"),
                ("invalid_properties_refused", "FAILED"),
                ("delete_succeeds", "PASSED"),
                ("delete_again_not_found_or_success", "FAILED"),
                ("drift_deleted_after_delete", "PASSED"),
                ("read_missing_is_not_found", "SKIPPED"),
                ("expired_deadline_refused", "PASSED"),
            ]
        )
    );
    // A failure shows what was sent, what came back and what was expected.
    let failed = |test: &str| -> Value {
        json.as_array()
            .and_then(|l| l.iter().find(|r| r["Test"] == test).cloned())
            .unwrap_or(Value::Null)
    };
    let attrs = failed("create_returns_id_and_attributes");
    assert_eq!(
        attrs["Message"],
        "create must return every attribute the schema declares (Fn::GetAtt reads them); missing: Arn"
    );
    assert_eq!(
        attrs["Sent"]["Properties"],
        serde_json::json!({"Name": "a", "Size": 1})
    );
    assert_eq!(
        attrs["Received"],
        serde_json::json!({"PhysicalResourceId": "a-1", "Attributes": {}})
    );
    let again = failed("create_repeated_request_id_same_resource");
    assert_eq!(again["Received"]["PhysicalResourceId"], "a-2");
    let moved = failed("update_in_place[Size]");
    assert_eq!(moved["Received"]["PhysicalResourceId"], "a-1-moved");
    let second = failed("delete_again_not_found_or_success");
    assert_eq!(
        second["Message"],
        "deleting a deleted resource must succeed or answer NotFound (the engine counts both as deleted); it answered InternalFailure"
    );
    // JUnit for CI: one suite per type, the failures by name.
    let xml = std::fs::read_to_string(s.dir.path().join("report.xml")).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="Test::Broken::Thing" tests="13" skipped="2" errors="0" failures="5">"#),
        "{xml}"
    );
    for name in [
        "create_returns_id_and_attributes",
        "create_repeated_request_id_same_resource",
        "update_in_place[Size]",
        "invalid_properties_refused",
        "delete_again_not_found_or_success",
    ] {
        let case = xml
            .split("<testcase ")
            .find(|c| c.starts_with(&format!("name=\"{name}\"")))
            .unwrap_or_else(|| panic!("no test case {name}: {xml}"));
        assert!(case.contains("<failure message="), "{name}: {case}");
    }
}

#[test]
fn the_kit_refuses_what_it_cannot_test() {
    let s = Scratch::new();
    let run = s.cairn(&["provider", "test", "--type", "Nope::Such::Type"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        "error: no provider serves Nope::Such::Type; `cairn providers` lists the types this configuration serves"
    );
    // A type the engine runs itself is not a provider's.
    let run = s.cairn(&[
        "provider",
        "test",
        "--type",
        "AWS::AutoScaling::AutoScalingGroup",
        "--output",
        "json",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.json()[0]["Test"], "engine_served");
    assert_eq!(run.json()[0]["Status"], "SKIPPED");
    // Inputs for a type not under test are a mistake in the file.
    s.write("inputs.yaml", "Cairn::Random::Strin: {Length: 4}\n");
    let run = s.cairn(&[
        "provider",
        "test",
        "--type",
        "Cairn::Random::String",
        "--properties",
        "inputs.yaml",
    ]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        "error: the properties file gives inputs for Cairn::Random::Strin, which is not under test (tested: Cairn::Random::String)"
    );
}
