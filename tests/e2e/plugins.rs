//! Provider plugins (dynamic libraries) through the real binary: the example
//! plugin `examples/kv-provider` and the test plugins in `tests/plugins/`,
//! each built as a cdylib by the test itself.

use std::path::PathBuf;

use crate::support::Scratch;
use crate::update::{cairn, deploy, ev, sequence_after};

/// A cdylib of this workspace, built by the test (once per test process)
/// with the same cargo and target directory as the test itself.
pub(crate) fn library(crate_name: &str) -> PathBuf {
    crate::support::workspace_built();
    PathBuf::from(env!("CARGO_BIN_EXE_cairn"))
        .parent()
        .map(|d| d.join(format!("lib{crate_name}.so")))
        .unwrap_or_default()
}

fn scratch_with(provider: &str) -> Scratch {
    let s = Scratch::new();
    s.write("cairn.toml", &format!("[[providers]]\n{provider}"));
    s
}

pub(crate) fn kv_entry(extra: &str) -> String {
    format!(
        "kind = \"dylib\"\npath = \"{}\"\nname = \"kv\"\n{extra}",
        library("cairn_example_kv").display()
    )
}

const RECORD: &str = "Resources:\n  R:\n    Type: Example::KV::Record\n    Properties: {Store: ./store, Key: greeting, Value: hello, Ttl: 30}\n  User:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !GetAtt R.Path}\nOutputs:\n  Size: {Value: !GetAtt R.Size}\n";

#[test]
fn the_example_plugin_serves_its_type_in_process() {
    let s = scratch_with(&kv_entry("isolation = \"none\"\n"));
    let run = deploy(&s, "st", RECORD, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let file = s.dir.path().join("store/greeting");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nttl=30\n");
    let physical = std::fs::canonicalize(&file).unwrap().display().to_string();
    let seq = sequence_after(&s, "st", 0);
    assert_eq!(seq[3], ev("R", "CREATE_COMPLETE", "", &physical));
    let out = cairn(&s, &["outputs", "st", "--output", "json"]).json();
    assert_eq!(out["Outputs"][0]["OutputValue"], "13", "{out}");
    // Value is Mutable: updated in place; Key is CreateOnly: replaced.
    let run = deploy(&s, "st", &RECORD.replace("Value: hello", "Value: bye"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "bye\nttl=30\n");
    let run = deploy(
        &s,
        "st",
        &RECORD.replace("Key: greeting", "Key: other"),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!file.exists());
    assert!(s.dir.path().join("store/other").exists());
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!s.dir.path().join("store/other").exists());
}

/// A bare file name (`examples/postgres/cairn.toml`'s form) is looked
/// for in the working directory, then beside the cairn binary, where cargo
/// puts the workspace's plugin libraries of the same profile; in either
/// isolation. Found nowhere, the error names the file.
#[test]
fn a_bare_library_name_is_found_beside_the_cairn_binary() {
    library("cairn_example_kv");
    for isolation in ["none", "process"] {
        let s = scratch_with(&format!(
            "kind = \"dylib\"\npath = \"libcairn_example_kv.so\"\nname = \"kv\"\nisolation = \"{isolation}\"\n"
        ));
        let run = deploy(&s, "st", RECORD, &[]);
        assert_eq!(run.code(), 0, "{isolation}: {}", run.stderr());
        assert!(s.dir.path().join("store/greeting").exists(), "{isolation}");
        assert_eq!(cairn(&s, &["delete", "st"]).code(), 0, "{isolation}");
    }
    let s = scratch_with("kind = \"dylib\"\npath = \"libnowhere.so\"\nname = \"kv\"\n");
    let run = deploy(&s, "st", RECORD, &[]);
    assert_eq!(run.code(), 1);
    assert!(run.stderr().contains("libnowhere.so"), "{}", run.stderr());
}

#[test]
fn a_plugin_is_given_its_entrys_settings_in_either_isolation() {
    for isolation in ["none", "process"] {
        let s = Scratch::new();
        let root = s.dir.path().join("records-root");
        s.write(
            "cairn.toml",
            &format!(
                "[[providers]]\n{}settings = {{ Root = \"{}\" }}\n",
                kv_entry(&format!("isolation = \"{isolation}\"\n")),
                root.display()
            ),
        );
        let run = deploy(&s, "st", RECORD, &[]);
        assert_eq!(run.code(), 0, "{isolation}: {}", run.stderr());
        // The relative Store is under the configured Root.
        let file = root.join("store/greeting");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap_or_default(),
            "hello\nttl=30\n",
            "{isolation}"
        );
        assert!(!s.dir.path().join("store/greeting").exists());
        assert_eq!(cairn(&s, &["delete", "st"]).code(), 0);
        assert!(!file.exists());
    }
    // A webhook handler receives them too, as each request's
    // TypeConfiguration (the registry's type configuration is the same).
    let s = Scratch::new();
    let log = s.dir.path().join("vendor.log");
    let config_log = s.dir.path().join("vendor-config.log");
    let handler = crate::webhooks::vendor_handler_with(
        &log,
        &["--config-log", config_log.to_str().unwrap_or_default()],
    );
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[[providers]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:{}/\"\nname = \"vendor\"\nsettings = {{ Zone = \"eu-1\" }}\n",
            handler.port
        ),
    );
    let run = deploy(
        &s,
        "net",
        "Resources:\n  N:\n    Type: Vendor::Net::Subnet\n    Properties: {Cidr: 10.0.0.0/24}\n",
        &[],
    );
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    assert_eq!(
        std::fs::read_to_string(&config_log)
            .unwrap_or_default()
            .trim(),
        r#"{"Zone": "eu-1"}"#
    );
}

#[test]
fn libraries_that_are_not_plugins_or_not_the_pinned_file_are_refused() {
    // A shared library without the declaration symbol.
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .expect("libm exists");
    let s = scratch_with(&format!(
        "kind = \"dylib\"\npath = \"{libm}\"\nisolation = \"none\"\n"
    ));
    // A provider that cannot start is named with the cause; the rest of
    // the configuration works.
    s.write("x.yaml", "Resources:\n  A: {Type: Cairn::Test::Resource}\n");
    assert_eq!(cairn(&s, &["validate", "x.yaml"]).code(), 0);
    let run = cairn(&s, &["providers"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(&format!("provider libm.so.6 cannot start: cannot load provider plugin {libm}: it does not export cairn_provider_decl_v1: not a Cairn provider plugin of ABI version 1")),
        "{}",
        run.stderr()
    );
    // A pinned digest that does not match.
    let s = scratch_with(&kv_entry("isolation = \"none\"\nsha256 = \"00\"\n"));
    let run = deploy(&s, "st", RECORD, &[]);
    assert_eq!(run.code(), 1);
    assert!(run.stderr().contains("its SHA-256 is "), "{}", run.stderr());
    assert!(
        run.stderr()
            .contains("but the config pins 00; rebuild it or update sha256"),
        "{}",
        run.stderr()
    );
}

fn unruly_entry(isolation: &str) -> String {
    format!(
        "kind = \"dylib\"\npath = \"{}\"\nisolation = \"{isolation}\"\n",
        library("cairn_test_unruly").display()
    )
}

/// The status and reason of `logical`'s last event with `status`.
fn reason_of(s: &Scratch, stack: &str, logical: &str, status: &str) -> String {
    sequence_after(s, stack, 0)
        .into_iter()
        .rfind(|e| e.0 == logical && e.1 == status)
        .map(|e| e.2)
        .unwrap_or_else(|| panic!("{logical} never went {status}"))
}

#[test]
fn the_example_plugin_behaves_the_same_in_a_plugin_host_process() {
    let s = scratch_with(&kv_entry(""));
    let run = deploy(&s, "st", RECORD, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let file = s.dir.path().join("store/greeting");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello\nttl=30\n");
    let physical = std::fs::canonicalize(&file).unwrap().display().to_string();
    assert_eq!(
        sequence_after(&s, "st", 0)[3],
        ev("R", "CREATE_COMPLETE", "", &physical)
    );
    let run = deploy(&s, "st", &RECORD.replace("Value: hello", "Value: bye"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "bye\nttl=30\n");
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!file.exists());
}

#[test]
fn a_library_with_the_wrong_magic_is_refused_before_it_runs() {
    let lib = library("cairn_test_wrong_magic");
    let s = scratch_with(&format!(
        "kind = \"dylib\"\npath = \"{}\"\nisolation = \"none\"\n",
        lib.display()
    ));
    s.write("x.yaml", "Resources:\n  A: {Type: Example::KV::Record}\n");
    let run = cairn(&s, &["validate", "x.yaml"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(&format!(
            "Unrecognized resource types: [Example::KV::Record] (Example::KV::Record is unavailable: provider libcairn_test_wrong_magic.so cannot start: cannot load provider plugin {}: its declaration starts with \"NOTCAIRN\", expected the magic \"CAIRNPV\\0\": not a Cairn provider plugin",
            lib.display()
        )),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_panicking_plugin_fails_the_resource_with_the_panic_message() {
    for isolation in ["none", "process"] {
        let s = scratch_with(&unruly_entry(isolation));
        let body = "Resources:\n  Fine: {Type: Test::Unruly::Thing, Properties: {Behavior: ok}}\n  P: {Type: Test::Unruly::Thing, DependsOn: Fine, Properties: {Behavior: panic}}\n";
        let run = deploy(&s, "st", body, &[]);
        assert_eq!(run.code(), 1, "{isolation}");
        assert_eq!(
            reason_of(&s, "st", "P", "CREATE_FAILED"),
            "provider plugin cairn-test-unruly panicked: the unruly plugin was told to panic",
            "{isolation}"
        );
        // The engine carried on; in-process the plugin is now disabled (its
        // rollback delete fails and says why), a plugin host is replaced.
        let seq = sequence_after(&s, "st", 0);
        if isolation == "process" {
            assert_eq!(crate::update::status(&s, "st"), "ROLLBACK_COMPLETE");
            assert!(
                seq.contains(&ev("Fine", "DELETE_COMPLETE", "", "unruly-Fine")),
                "{seq:?}"
            );
        } else {
            assert_eq!(crate::update::status(&s, "st"), "ROLLBACK_FAILED");
            assert_eq!(
                reason_of(&s, "st", "Fine", "DELETE_FAILED"),
                "provider plugin cairn-test-unruly is disabled after it panicked (the unruly plugin was told to panic); restart Cairn to load it again"
            );
        }
    }
}

#[test]
fn an_aborting_plugin_kills_only_its_host_and_the_next_call_gets_a_new_one() {
    let s = scratch_with(&unruly_entry("process"));
    let body = "Resources:\n  Made: {Type: Test::Unruly::Thing, Properties: {Behavior: ok}}\n  Boom: {Type: Test::Unruly::Thing, DependsOn: Made, Properties: {Behavior: abort}}\n";
    let run = deploy(&s, "st", body, &[]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        reason_of(&s, "st", "Boom", "CREATE_FAILED"),
        "the plugin host of cairn-test-unruly died (killed by signal 6, SIGABRT: the plugin aborted)"
    );
    // The rollback's delete ran in a restarted host.
    let seq = sequence_after(&s, "st", 0);
    assert!(
        seq.contains(&ev("Made", "DELETE_COMPLETE", "", "unruly-Made")),
        "{seq:?}"
    );
    assert_eq!(crate::update::status(&s, "st"), "ROLLBACK_COMPLETE");
}

#[test]
fn a_cancelled_call_is_cancelled_inside_the_plugin() {
    for isolation in ["none", "process"] {
        let s = scratch_with(&unruly_entry(isolation));
        let marker = s.dir.path().join("marker");
        let body = format!(
            "Resources:\n  Slow: {{Type: Test::Unruly::Thing, Properties: {{Behavior: slow, Seconds: 2, Marker: '{}'}}}}\n  Bad: {{Type: Cairn::Test::Resource, Properties: {{Fail: create, WaitSeconds: 0.3}}}}\n",
            marker.display()
        );
        let started = std::time::Instant::now();
        let run = deploy(&s, "st", &body, &[]);
        assert_eq!(run.code(), 1, "{isolation}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "{isolation}"
        );
        assert_eq!(
            reason_of(&s, "st", "Slow", "CREATE_FAILED"),
            "Resource creation cancelled",
            "{isolation}"
        );
        // The first call was cancelled inside the plugin; the rollback then
        // asked again with the same request id (to learn what the cancelled
        // call may have made) and deleted it.
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap_or_default(),
            "cancelled\nfinished\n",
            "{isolation}"
        );
        let seq = sequence_after(&s, "st", 0);
        assert!(
            seq.contains(&ev("Slow", "DELETE_COMPLETE", "", "unruly-Slow")),
            "{seq:?}"
        );
    }
}

#[test]
fn providers_lists_types_with_their_provider_transport_and_schema() {
    let s = scratch_with(&kv_entry(""));
    let run = cairn(&s, &["providers", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let types = run.json()["Types"].as_array().cloned().unwrap_or_default();
    let kv = types
        .iter()
        .find(|t| t["TypeName"] == "Example::KV::Record")
        .expect("the plugin's type is listed");
    assert_eq!(kv["Provider"], "kv");
    assert_eq!(kv["Transport"], "process");
    assert_eq!(kv["Version"], "0.1.0");
    let custom = types
        .iter()
        .find(|t| t["TypeName"] == "Custom::<Name>")
        .unwrap();
    assert_eq!(custom["Transport"], "webhook");
    let run = cairn(
        &s,
        &[
            "providers",
            "--type",
            "Example::KV::Record",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let schema = &run.json()["Schema"];
    assert_eq!(schema["Properties"]["Key"]["Update"], "CreateOnly");
    assert_eq!(schema["Properties"]["Value"]["Update"], "Mutable");
    assert_eq!(schema["Properties"]["Ttl"]["Type"], "Integer");
    let run = cairn(&s, &["providers", "--type", "Nope::Nope::Nope"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("no provider serves Nope::Nope::Nope"),
        "{}",
        run.stderr()
    );
}

#[test]
fn two_providers_claiming_one_type_is_an_error_naming_both() {
    let s = scratch_with(&format!(
        "{}\n[[providers]]\n{}",
        kv_entry("isolation = \"none\"\n"),
        kv_entry("isolation = \"none\"\n").replace("name = \"kv\"", "name = \"kv-again\"")
    ));
    let run = cairn(&s, &["providers"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("resource type Example::KV::Record is claimed by two providers: kv and kv-again; remove it from one of them (set `types` in its [[providers]] entry)"),
        "{}",
        run.stderr()
    );
    let s = scratch_with(&kv_entry(
        "isolation = \"none\"\ntypes = [\"Example::KV::Other\"]\n",
    ));
    let run = cairn(&s, &["providers"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("provider kv cannot start: types lists Example::KV::Other, which it does not serve (it serves: Example::KV::Record)"),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_provider_timeout_fails_a_call_that_takes_longer() {
    let s = scratch_with(&format!(
        "{}name = \"unruly\"\ntimeout_seconds = 1\n",
        unruly_entry("none")
    ));
    let body = "Resources:\n  Slow: {Type: Test::Unruly::Thing, Properties: {Behavior: slow, Seconds: 5}}\n";
    let started = std::time::Instant::now();
    let run = deploy(&s, "st", body, &[]);
    assert_eq!(run.code(), 1);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        reason_of(&s, "st", "Slow", "CREATE_FAILED"),
        "provider unruly did not answer within 1 seconds (timeout_seconds of its [[providers]] entry)"
    );
}

#[test]
fn builtin_entries_choose_the_built_in_providers() {
    let s = scratch_with("kind = \"builtin\"\nname = \"builtin:test\"\n");
    let run = cairn(&s, &["providers", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let names: Vec<String> = run.json()["Types"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter(|t| t["Transport"] == "builtin")
                .map(|t| t["TypeName"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["Cairn::Test::Resource"]);
    let run = deploy(
        &s,
        "st",
        "Resources:\n  F: {Type: Cairn::Local::File, Properties: {Path: x}}\n",
        &[],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Unrecognized resource types: [Cairn::Local::File]"),
        "{}",
        run.stderr()
    );
    let s = scratch_with("kind = \"builtin\"\nname = \"builtin:nope\"\n");
    let run = cairn(&s, &["providers"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("provider builtin:nope cannot start: a kind = \"builtin\" entry names one of: builtin:test, builtin:local, builtin:random, builtin:heat"),
        "{}",
        run.stderr()
    );
}

/// A plugin that aborts the process on the same call every time: each
/// command resumes the create and dies with it, until two resumes in a row
/// recorded nothing; then the create is marked failed with the reason and
/// every command works again.
#[test]
fn an_operation_that_kills_every_resume_is_marked_failed_after_two() {
    let s = scratch_with(&unruly_entry("none"));
    let body = "Resources:\n  Boom: {Type: Test::Unruly::Thing, Properties: {Behavior: abort}}\n";
    let run = deploy(&s, "st", body, &[]);
    assert_ne!(run.code(), 0);
    for attempt in 1..=2 {
        let run = cairn(&s, &["list"]);
        assert_ne!(
            run.code(),
            0,
            "resume {attempt} should have died with the plugin"
        );
    }
    let run = cairn(&s, &["list", "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let stack = &run.json()["StackSummaries"][0];
    assert_eq!(stack["StackStatus"], "CREATE_FAILED");
    assert_eq!(
        stack["StackStatusReason"],
        "Cairn stopped 2 times in a row while resuming this operation, recording nothing each time; it is marked CREATE_FAILED so that other commands can run: delete the stack to remove what it made. The stack's last events name the resource it was working on."
    );
    let run = cairn(&s, &["describe", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
}
