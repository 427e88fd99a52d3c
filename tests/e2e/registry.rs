//! The type registry through the real binary: a provider project packaged
//! (`cairn provider package`, signed with `cairn provider keygen`'s key),
//! registered (`cairn type register`) on a PostgreSQL state, and served by
//! an engine that was already running, without a restart; a tampered or
//! unsigned package refused at registration; versions, the default
//! version and deregistration with CloudFormation's refusals.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::plugins::library;
use crate::postgres::Database;
use crate::support::{Scratch, Served};
use crate::webhooks::vendor_handler_with;

const KV: &str = "Example::KV::Record";

/// `cairn type register` of the vendor handler's package, its secret in a
/// file each engine reads.
const REGISTER_WITH_SECRET: &[&str] = &[
    "type",
    "register",
    "vendor.tar.gz",
    "--secret-file",
    "vendor.secret",
    "--output",
    "json",
];

/// `cairn type deregister` of the vendor handler's first version.
const DEREGISTER_VENDOR_ONE: &[&str] = &[
    "type",
    "deregister",
    "Vendor::Net::Subnet",
    "--version",
    "00000001",
];

fn cairn(s: &Scratch, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["--config", "cairn.toml"];
    all.extend_from_slice(args);
    s.cairn(&all)
}

/// `cairn --endpoint ENDPOINT ARGS…` in `s` (the server asks no key).
fn through(s: &Scratch, endpoint: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--endpoint", endpoint])
        .args(args)
        .current_dir(s.dir.path())
        .env_remove("CAIRN_CONFIG")
        .env_remove("CAIRN_STATE")
        .output()
        .expect("run cairn")
}

/// `aws --endpoint-url ENDPOINT cloudformation ARGS… --output json`.
fn aws(s: &Scratch, endpoint: &str, args: &[&str]) -> Value {
    let out = Command::new("aws")
        .args([
            "--endpoint-url",
            endpoint,
            "--output",
            "json",
            "cloudformation",
        ])
        .args(args)
        .current_dir(s.dir.path())
        .env("AWS_ACCESS_KEY_ID", "AKIDANY")
        .env("AWS_SECRET_ACCESS_KEY", "any")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", s.dir.path().join("none"))
        .output()
        .expect("aws runs");
    assert!(
        out.status.success(),
        "aws {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// `aws cloudformation register-type ARGS…`, then describe-type-registration
/// until it is no longer IN_PROGRESS: the registration as it ended.
fn aws_register(s: &Scratch, endpoint: &str, args: &[&str]) -> Value {
    let mut all = vec!["register-type", "--type", "RESOURCE"];
    all.extend_from_slice(args);
    let token = aws(s, endpoint, &all)["RegistrationToken"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = aws(
            s,
            endpoint,
            &["describe-type-registration", "--registration-token", &token],
        );
        if r["ProgressStatus"] != "IN_PROGRESS" || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A key pair in `s`; the public key as `[registry] trusted_keys` takes it.
fn keygen(s: &Scratch) -> String {
    let run = s.cairn(&["provider", "keygen", "--dir", "keys"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let public = std::fs::read_to_string(s.dir.path().join("keys/cairn.pub")).unwrap_or_default();
    public.lines().nth(1).unwrap_or_default().to_string()
}

fn kv_project() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kv-provider").to_string()
}

/// Packages the example plugin as `out`, signed with `keys/cairn.key`
/// when `signed`.
fn package_kv(s: &Scratch, out: &str, signed: bool) {
    let lib = library("cairn_example_kv").display().to_string();
    let project = kv_project();
    s.write(
        "kv-config.json",
        r#"{"properties": {"Root": {"type": "string"}}, "additionalProperties": false}"#,
    );
    let mut args = vec![
        "provider",
        "package",
        &project,
        "--library",
        &lib,
        "--configuration-schema",
        "kv-config.json",
        "-o",
        out,
    ];
    if signed {
        args.extend_from_slice(&["--sign-key", "keys/cairn.key"]);
    }
    let run = s.cairn(&args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stdout().contains(KV), "{}", run.stdout());
}

/// The package `from` with one byte of `file` changed and its manifest
/// untouched (unpacked and packed again with tar).
fn tampered(s: &Scratch, from: &str, file: &str, to: &str) {
    let dir = s.dir.path().join(format!("unpacked-{to}"));
    std::fs::create_dir_all(&dir).unwrap();
    let status = Command::new("tar")
        .args(["xzf", &s.dir.path().join(from).display().to_string(), "-C"])
        .arg(&dir)
        .status()
        .expect("tar runs");
    assert!(status.success());
    let path = dir.join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let status = Command::new("tar")
        .args(["czf", &s.dir.path().join(to).display().to_string(), "-C"])
        .arg(&dir)
        .arg(".")
        .status()
        .expect("tar runs");
    assert!(status.success());
}

fn record_template(store: &Path, value: &str) -> String {
    format!(
        "Resources:\n  R:\n    Type: {KV}\n    Properties: {{Store: {}, Key: greeting, Value: {value}}}\nOutputs:\n  Path: {{Value: !GetAtt R.Path}}\n",
        store.display()
    )
}

/// `cairn type describe TYPE --output json`.
fn type_described(s: &Scratch, type_name: &str) -> Value {
    registered(&cairn(
        s,
        &["type", "describe", type_name, "--output", "json"],
    ))
}

fn registered(run: &crate::support::Run) -> Value {
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    run.json()
}

#[test]
fn a_signed_plugin_registered_through_one_engine_is_served_by_a_running_one() {
    let db = Database::new();
    let s = Scratch::new();
    let public = keygen(&s);
    s.write(
        "cairn.toml",
        &format!(
            "[engine]\nstate = \"{}\"\ndata_dir = \"data\"\n\n[server]\nauth = \"none\"\n\n[registry]\npoll_ms = 200\ntrusted_keys = [\"{public}\"]\npackage_dirs = [\"{}\"]\n",
            db.url,
            s.dir.path().display()
        ),
    );
    package_kv(&s, "kv.tar.gz", true);
    // The engine runs before the type exists.
    let (child, endpoint) = s.serve();
    let _server = Served(child);
    let store = s.dir.path().join("records");
    let template = s.write("record.yaml", &record_template(&store, "hello"));
    let template = template.display().to_string();
    let before = through(&s, &endpoint, &["deploy", "early", &template]);
    assert_ne!(before.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&before.stderr).contains(KV),
        "{}",
        String::from_utf8_lossy(&before.stderr)
    );

    // Registered by another process on the same state.
    let done = registered(&cairn(
        &s,
        &["type", "register", "kv.tar.gz", "--output", "json"],
    ));
    assert_eq!(done["ProgressStatus"], "COMPLETE", "{done}");
    assert_eq!(done["TypeName"], KV);
    assert_eq!(done["VersionId"], "00000001");
    let token = done["RegistrationToken"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let shown = registered(&cairn(
        &s,
        &["type", "registrations", &token, "--output", "json"],
    ));
    assert_eq!(shown["Registrations"][0]["ProgressStatus"], "COMPLETE");

    // The running engine serves it within its poll: no restart.
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = through(&s, &endpoint, &["deploy", "st", &template]);
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(store.join("greeting")).unwrap_or_default(),
        "hello\n"
    );
    // The library was written under its checksum, in the data directory.
    let cached: Vec<_> = std::fs::read_dir(s.dir.path().join("data/types"))
        .map(|d| d.filter_map(|e| e.ok()).collect())
        .unwrap_or_default();
    assert_eq!(cached.len(), 1, "one library, under its SHA-256");

    // The type's configuration (its Root, read from a file on each engine)
    // reaches the provider in every request: a relative Store lands under
    // it. The configuration is shown as set, the reference unresolved.
    let rooted = s.dir.path().join("rooted");
    s.write("root.txt", &format!("{}\n", rooted.display()));
    let reference = format!(
        "{{{{resolve:file:{}}}}}",
        s.dir.path().join("root.txt").display()
    );
    let run = cairn(&s, &["type", "configure", KV, r#"{"Root": 7}"#]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        "error: Configuration.Root must be of type string"
    );
    let config = serde_json::json!({ "Root": reference }).to_string();
    let run = cairn(&s, &["type", "configure", KV, &config]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let configs = registered(&cairn(
        &s,
        &["type", "configurations", KV, "--output", "json"],
    ));
    assert_eq!(
        configs["TypeConfigurations"][0]["Configuration"],
        config.as_str()
    );
    assert_eq!(
        configs["TypeConfigurations"][0]["IsDefaultConfiguration"],
        true
    );
    std::thread::sleep(Duration::from_millis(1500));
    let relative = s.write(
        "relative.yaml",
        &format!("Resources:\n  R:\n    Type: {KV}\n    Properties: {{Store: inner, Key: greeting, Value: rooted}}\n"),
    );
    let out = through(
        &s,
        &endpoint,
        &["deploy", "rooted", &relative.display().to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(rooted.join("inner/greeting")).unwrap_or_default(),
        "rooted\n"
    );
    let out = through(&s, &endpoint, &["delete", "rooted"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let described = type_described(&s, KV);
    assert!(!described.to_string().contains("rooted"), "{described}");
    assert_eq!(
        described["Schema"]["typeConfiguration"]["properties"]["Root"]["type"],
        "string"
    );

    // Tampered packages (a byte of the schema or of the library changed,
    // the manifest untouched) and an unsigned one are refused, FAILED with
    // the reason, and never served.
    for (file, to) in [
        ("schema.json", "bad-schema.tar.gz"),
        ("handler/libcairn_example_kv.so", "bad-lib.tar.gz"),
    ] {
        tampered(&s, "kv.tar.gz", file, to);
        let run = cairn(&s, &["type", "register", to, "--output", "json"]);
        assert_eq!(run.code(), 1);
        let failed = run.json();
        assert_eq!(failed["ProgressStatus"], "FAILED", "{failed}");
        let why = failed["Description"].as_str().unwrap_or_default();
        assert!(
            why.starts_with(&format!(
                "{file} does not match its SHA-256 in the package's manifest"
            )),
            "{why}"
        );
    }
    package_kv(&s, "unsigned.tar.gz", false);
    let run = cairn(
        &s,
        &["type", "register", "unsigned.tar.gz", "--output", "json"],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.json()["Description"],
        "the package is not signed, and [registry] trusted_keys requires a signature by one of its keys; sign it with cairn provider package --sign-key"
    );

    // With --test the provider kit's contract tests run against the
    // started handler first (inputs derived from the schema): the example
    // plugin reads a relative Store back as an absolute path, which the
    // kit catches, so the registration FAILS naming the test, and no
    // version is recorded.
    let run = cairn(
        &s,
        &[
            "type",
            "register",
            "kv.tar.gz",
            "--test",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let tested = run.json();
    assert_eq!(tested["ProgressStatus"], "FAILED", "{tested}");
    let why = tested["Description"].as_str().unwrap_or_default();
    assert!(why.starts_with("the contract tests failed ("), "{why}");
    assert!(
        why.contains("read_after_create_matches: read must return every property the create set, as set: Store reads"),
        "{why}"
    );
    // A second version, registered through the aws CLI (RegisterType is
    // asynchronous: a token, then COMPLETE); the first stays the default
    // until it is set.
    let package = format!("file://{}", s.dir.path().join("kv.tar.gz").display());
    let registration = aws_register(
        &s,
        &endpoint,
        &["--type-name", KV, "--schema-handler-package", &package],
    );
    assert_eq!(registration["ProgressStatus"], "COMPLETE", "{registration}");
    let version_arn =
        "arn:aws:cloudformation:us-east-1:123456789012:type/resource/Example-KV-Record/00000002"
            .to_string();
    assert_eq!(registration["TypeVersionArn"], version_arn.as_str());
    let versions = aws(
        &s,
        &endpoint,
        &[
            "list-type-versions",
            "--type",
            "RESOURCE",
            "--type-name",
            KV,
        ],
    );
    let summary: Vec<(String, bool)> = versions["TypeVersionSummaries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v["VersionId"].as_str().unwrap_or_default().to_string(),
                v["IsDefaultVersion"].as_bool().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("00000001".to_string(), true),
            ("00000002".to_string(), false)
        ]
    );
    let run = cairn(&s, &["type", "deregister", KV, "--version", "00000001"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        format!("error: Version '00000001' is the default version of {KV} and cannot be deregistered while other versions exist; make another version the default first (cairn type set-default)")
    );
    aws(
        &s,
        &endpoint,
        &["set-type-default-version", "--arn", &version_arn],
    );
    let described = aws(
        &s,
        &endpoint,
        &["describe-type", "--type", "RESOURCE", "--type-name", KV],
    );
    assert_eq!(described["DefaultVersionId"], "00000002");
    assert_eq!(described["IsDefaultVersion"], true);
    assert_eq!(described["Arn"], version_arn.as_str());
    // The console lists the types and their versions.
    let console = crate::support::http_get(&endpoint, "/console/types");
    assert!(console.starts_with("HTTP/1.1 200"), "{console}");
    assert!(
        console.contains(&format!(
            "<td>{KV}</td><td>00000002</td><td>default</td><td>LIVE</td>"
        )),
        "{console}"
    );
    assert!(
        console.contains(&format!(
            "<td>{KV}</td><td>00000001</td><td></td><td>LIVE</td>"
        )),
        "{console}"
    );
    // `cairn type` through the server: the same commands, the same output.
    let out = through(&s, &endpoint, &["type", "list", "--output", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(listed["TypeSummaries"][0]["TypeName"], KV, "{listed}");
    assert_eq!(listed["TypeSummaries"][0]["DefaultVersionId"], "00000002");
    let out = through(
        &s,
        &endpoint,
        &["type", "register", "kv.tar.gz", "--output", "json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let third: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(third["ProgressStatus"], "COMPLETE", "{third}");
    assert_eq!(third["VersionId"], "00000003");
    let out = through(
        &s,
        &endpoint,
        &["type", "deregister", KV, "--version", "00000003"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let described = type_described(&s, KV);
    assert_eq!(described["VersionId"], "00000002");
    assert_eq!(described["DefaultVersionId"], "00000002");
    assert_eq!(described["SignedBy"], public.as_str());
    assert_eq!(described["Schema"]["typeName"], KV);
    assert_eq!(
        described["Schema"]["createOnlyProperties"],
        serde_json::json!(["/properties/Key", "/properties/Store"])
    );
    // st's record was made with version 1 and stays on it: that version
    // is not deregistered while it does.
    let run = cairn(&s, &["type", "deregister", KV, "--version", "00000001"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        format!("error: Version '00000001' of {KV} is used by stacks st: update them with --upgrade-types to move their resources to the default version (or delete the resources) before deregistering it")
    );
    let versions_of = |stack: &str| -> Vec<String> {
        let out = through(&s, &endpoint, &["resources", stack, "--output", "json"]);
        let listed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        listed["StackResources"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["TypeVersionId"].as_str().unwrap_or("none").to_string())
            .collect()
    };
    assert_eq!(versions_of("st"), ["00000001"]);
    // The same template with --upgrade-types: the record moves to the
    // default version (an update by its provider), and version 1 is free.
    let out = through(
        &s,
        &endpoint,
        &["deploy", "st", &template, "--upgrade-types"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(versions_of("st"), ["00000002"]);
    let run = cairn(&s, &["type", "deregister", KV, "--version", "00000001"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // The type's last version, while a stack has a resource of it.
    let run = cairn(&s, &["type", "deregister", KV]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        format!("error: Type {KV} is used by stacks st: delete their resources of this type (or the stacks) before deregistering it")
    );
    let out = through(&s, &endpoint, &["delete", "st"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!store.join("greeting").exists());
    let run = cairn(&s, &["type", "deregister", KV]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let listed = registered(&cairn(&s, &["type", "list", "--output", "json"]));
    assert_eq!(listed["TypeSummaries"], serde_json::json!([]));
}

#[test]
fn a_webhook_type_is_registered_with_where_engines_read_its_secret() {
    // Two engines on PostgreSQL: `cairn serve` runs, the type is
    // registered and configured by other processes, and the stack is made
    // through the running engine.
    let db = Database::new();
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[engine]\nstate = \"{}\"\ndata_dir = \"data\"\n\n[server]\nauth = \"none\"\n\n[webhooks]\ntimeout_seconds = 30\n\n[registry]\npoll_ms = 200\npackage_dirs = [\"{}\"]\n",
            db.url,
            s.dir.path().display()
        ),
    );
    let (child, endpoint) = s.serve();
    let _server = Served(child);
    let log = s.dir.path().join("vendor.log");
    let config_log = s.dir.path().join("vendor-config.log");
    let handler = vendor_handler_with(
        &log,
        &["--config-log", config_log.to_str().unwrap_or_default()],
    );
    let url = format!("http://127.0.0.1:{}/", handler.port);
    std::fs::create_dir_all(s.dir.path().join("handler")).unwrap();
    s.write(
        "vendor-config.json",
        r#"{"properties": {"Zone": {"type": "string"}}, "required": ["Zone"], "additionalProperties": false}"#,
    );
    let run = s.cairn(&[
        "provider",
        "package",
        "handler",
        "--url",
        &url,
        "--configuration-schema",
        "vendor-config.json",
        "-o",
        "vendor.tar.gz",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // Without a secret source, refused.
    let run = cairn(
        &s,
        &["type", "register", "vendor.tar.gz", "--output", "json"],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.json()["Description"],
        "a webhook type needs its handler's signing secret: name where engines read it (cairn type register --secret-env NAME or --secret-file PATH; RegisterType's ExecutionRoleArn env:NAME or file:PATH)"
    );
    s.write("vendor.secret", "not-in-the-state\n");
    let done = registered(&cairn(&s, REGISTER_WITH_SECRET));
    assert_eq!(done["ProgressStatus"], "COMPLETE", "{done}");
    let providers = registered(&cairn(&s, &["providers", "--output", "json"]));
    let vendor: Vec<&Value> = providers["Types"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["TypeName"] == "Vendor::Net::Subnet")
        .collect();
    assert_eq!(vendor.len(), 1, "{providers}");
    assert_eq!(vendor[0]["Provider"], "registry");
    assert_eq!(vendor[0]["Transport"], "webhook");
    assert_eq!(vendor[0]["Version"], "00000001");
    let described = type_described(&s, "Vendor::Net::Subnet");
    assert_eq!(described["Handler"]["webhook"]["url"], url.as_str());
    assert_eq!(
        described["SecretSource"],
        serde_json::json!({"File": "vendor.secret"})
    );
    assert!(!described.to_string().contains("not-in-the-state"));
    let template = s.write(
        "subnet.yaml",
        "Resources:\n  Net:\n    Type: Vendor::Net::Subnet\n    Properties: {Cidr: 10.0.0.0/24}\n",
    );
    // Its configuration: the Zone a secret file on the engine holds.
    s.write("zone.secret", "eu-1\n");
    let run = cairn(
        &s,
        &[
            "type",
            "configure",
            "Vendor::Net::Subnet",
            r#"{"Region": "x"}"#,
        ],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        "error: Configuration: the required property Zone is missing"
    );
    let run = cairn(
        &s,
        &[
            "type",
            "configure",
            "Vendor::Net::Subnet",
            r#"{"Zone": "{{resolve:file:zone.secret}}"}"#,
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // The running engine serves it (with its configuration) within its poll.
    let template = template.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = through(&s, &endpoint, &["deploy", "net", &template]);
        let configured = std::fs::read_to_string(&config_log).unwrap_or_default();
        if (out.status.success() && configured.contains("eu-1")) || Instant::now() > deadline {
            break out;
        }
        // An attempt before the engine read the type, or its configuration,
        // is undone and made again.
        let _ = through(&s, &endpoint, &["delete", "net"]);
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&config_log);
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The handler got the configuration, resolved; nothing shows it.
    assert_eq!(
        std::fs::read_to_string(&config_log)
            .unwrap_or_default()
            .trim(),
        r#"{"Zone": "eu-1"}"#
    );
    let shown = type_described(&s, "Vendor::Net::Subnet");
    assert!(!shown.to_string().contains("eu-1"), "{shown}");
    let events = registered(&cairn(&s, &["events", "net", "--output", "json"]));
    assert!(!events.to_string().contains("eu-1"), "{events}");

    // A second version, at another handler, registered through the aws
    // CLI (ExecutionRoleArn names where engines read its secret) and made
    // the default: the stack's subnet stays on version 1.
    let log_two = s.dir.path().join("vendor-two.log");
    let handler_two = vendor_handler_with(&log_two, &[]);
    let url_two = format!("http://127.0.0.1:{}/", handler_two.port);
    let run = s.cairn(&[
        "provider",
        "package",
        "handler",
        "--url",
        &url_two,
        "--configuration-schema",
        "vendor-config.json",
        "-o",
        "vendor-two.tar.gz",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let package = format!(
        "file://{}",
        s.dir.path().join("vendor-two.tar.gz").display()
    );
    let registration = aws_register(
        &s,
        &endpoint,
        &[
            "--type-name",
            "Vendor::Net::Subnet",
            "--schema-handler-package",
            &package,
            "--execution-role-arn",
            "file:vendor.secret",
        ],
    );
    assert_eq!(registration["ProgressStatus"], "COMPLETE", "{registration}");
    aws(
        &s,
        &endpoint,
        &[
            "set-type-default-version",
            "--type",
            "RESOURCE",
            "--type-name",
            "Vendor::Net::Subnet",
            "--version-id",
            "00000002",
        ],
    );
    let described = type_described(&s, "Vendor::Net::Subnet");
    assert_eq!(described["DefaultVersionId"], "00000002");
    assert_eq!(described["Handler"]["webhook"]["url"], url_two.as_str());
    assert_eq!(
        described["SecretSource"],
        serde_json::json!({"File": "vendor.secret"})
    );
    std::thread::sleep(Duration::from_millis(1000));
    // A plain update goes to the version the subnet was made with.
    let wider = s.write(
        "subnet-wider.yaml",
        "Resources:\n  Net:\n    Type: Vendor::Net::Subnet\n    Properties: {Cidr: 10.0.0.0/16}\n",
    );
    let wider = wider.display().to_string();
    let out = through(&s, &endpoint, &["deploy", "net", &wider]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = cairn(&s, DEREGISTER_VENDOR_ONE);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        "error: Version '00000001' of Vendor::Net::Subnet is used by stacks net: update them with --upgrade-types to move their resources to the default version (or delete the resources) before deregistering it"
    );
    // A change set asked to move it shows the move as a change of the
    // resource; executed, the update goes to version 2's handler.
    let out = through(
        &s,
        &endpoint,
        &[
            "plan",
            "net",
            "--upgrade-types",
            "--name",
            "move",
            "--output",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let change = &plan["Changes"][0]["ResourceChange"];
    assert_eq!(change["Action"], "Modify", "{plan}");
    assert_eq!(change["LogicalResourceId"], "Net");
    assert_eq!(change["Replacement"], "False");
    assert_eq!(change["Scope"], serde_json::json!(["TypeVersion"]));
    assert_eq!(
        change["Details"][0]["Target"],
        serde_json::json!({
            "Attribute": "TypeVersion",
            "RequiresRecreation": "Never",
            "BeforeValue": "00000001",
            "AfterValue": "00000002",
            "AttributeChangeType": "Modify",
        })
    );
    let out = through(&s, &endpoint, &["execute", "net", "move"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = through(&s, &endpoint, &["resources", "net", "--output", "json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        listed["StackResources"][0]["TypeVersionId"], "00000002",
        "{listed}"
    );
    let run = cairn(&s, DEREGISTER_VENDOR_ONE);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = through(&s, &endpoint, &["delete", "net"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    };
    assert_eq!(lines(&log), ["Create", "Update"]);
    assert_eq!(lines(&log_two), ["Update", "Delete"]);
    drop(handler_two);
    // A handler that cannot be reached fails the registration.
    drop(handler);
    let run = cairn(&s, REGISTER_WITH_SECRET);
    assert_eq!(run.code(), 1);
    let why = run.json()["Description"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.starts_with("the handler cannot be reached or loaded: "),
        "{why}"
    );
}

const FRAGMENT: &str = "Description: A value and its echo\nParameters:\n  Name: {Type: String}\nResources:\n  Store:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value: !Sub \"${Name}-store\"\n  Echo:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value: !GetAtt Store.Value\nOutputs:\n  StoreValue:\n    Value: !GetAtt Store.Value\n";

const USES_MODULE: &str = "Parameters:\n  Env: {Type: String, Default: dev}\nResources:\n  Data:\n    Type: Example::Pair::Thing::MODULE\n    Properties:\n      Name: !Ref Env\n  User:\n    Type: Cairn::Test::Resource\n    DependsOn: Data\n    Properties:\n      Value: !GetAtt Data.Echo.Value\nOutputs:\n  Out:\n    Value: !GetAtt Data.StoreValue\n  Id:\n    Value: !Ref Data.Store\n";

fn outputs(s: &Scratch, stack: &str) -> std::collections::BTreeMap<String, String> {
    let out = registered(&cairn(s, &["outputs", stack, "--output", "json"]));
    out["Outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            (
                o["OutputKey"].as_str().unwrap_or_default().to_string(),
                o["OutputValue"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn physical_ids(s: &Scratch, stack: &str) -> std::collections::BTreeMap<String, String> {
    let out = registered(&cairn(s, &["resources", stack, "--output", "json"]));
    out["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["LogicalResourceId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                r["PhysicalResourceId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// A MODULE type from a template fragment: its resources under prefixed
/// ids, its parameter from the module's Properties, `Ref`/`GetAtt` into it
/// (`Data.Store`, `Data.Echo.Value`, an output), `DependsOn` the module;
/// an update of the parameter updates its resources in place; delete.
#[test]
fn a_module_type_deploys_updates_and_deletes_with_prefixed_resources() {
    let s = Scratch::new();
    s.write("cairn.toml", "");
    s.write(
        "bad.yaml",
        "Transform: AWS::Serverless-2016-10-31\nResources: {}\n",
    );
    let run = cairn(
        &s,
        &[
            "type",
            "register",
            "bad.yaml",
            "--module",
            "--type-name",
            "Example::Pair::Thing::MODULE",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.json()["Description"],
        "Template fragment can't contain transform section."
    );
    s.write("pair.yaml", FRAGMENT);
    let done = registered(&cairn(
        &s,
        &[
            "type",
            "register",
            "pair.yaml",
            "--module",
            "--type-name",
            "Example::Pair::Thing::MODULE",
            "--output",
            "json",
        ],
    ));
    assert_eq!(done["ProgressStatus"], "COMPLETE", "{done}");
    let described = type_described(&s, "Example::Pair::Thing::MODULE");
    assert_eq!(described["Type"], "MODULE");
    assert_eq!(described["Schema"]["properties"]["Name"]["type"], "string");
    let template = s.write("uses.yaml", USES_MODULE).display().to_string();
    let run = cairn(&s, &["deploy", "st", &template]);
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    let ids = physical_ids(&s, "st");
    assert_eq!(
        ids.keys().collect::<Vec<_>>(),
        ["DataEcho", "DataStore", "User"]
    );
    let out = outputs(&s, "st");
    assert_eq!(out["Out"], "dev-store");
    assert_eq!(out["Id"], ids["DataStore"]);
    // The processed template is the expanded one.
    let run = cairn(&s, &["template", "st", "--stage", "processed"]);
    assert!(
        run.stdout().contains("DataStore") && !run.stdout().contains("::MODULE"),
        "{}",
        run.stdout()
    );
    // A parameter change updates the module's resources in place.
    let run = cairn(&s, &["deploy", "st", &template, "-p", "Env=prod"]);
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    assert_eq!(outputs(&s, "st")["Out"], "prod-store");
    assert_eq!(physical_ids(&s, "st"), ids);
    // A module a stack's template uses is not deregistered.
    let run = cairn(&s, &["type", "deregister", "Example::Pair::Thing::MODULE"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim(),
        "error: Type Example::Pair::Thing::MODULE is used by stacks st: delete their resources of this type (or the stacks) before deregistering it"
    );
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // A module's parameter left out is named.
    let missing = s
        .write(
            "missing.yaml",
            "Resources:\n  Data:\n    Type: Example::Pair::Thing::MODULE\n",
        )
        .display()
        .to_string();
    let run = cairn(&s, &["deploy", "other", &missing]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Module Data: its parameter Name is required: set it in Data's Properties"),
        "{}",
        run.stderr()
    );
    let run = cairn(&s, &["type", "deregister", "Example::Pair::Thing::MODULE"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
}
