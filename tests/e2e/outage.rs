//! A configured provider that cannot start (a webhook handler that does not
//! answer, a plugin library that is missing) makes only its own types
//! unavailable: read commands, stacks of other types and `cairn serve` go on.

use std::io::Read;

use crate::support::Scratch;

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A config with a webhook provider nobody answers for and a plugin whose
/// library is missing.
fn down_providers(s: &Scratch) -> u16 {
    let port = dead_port();
    s.write(
        "cairn.toml",
        &format!(
            "[[providers]]\nkind = \"webhook\"\nname = \"vendor\"\nurl = \"http://127.0.0.1:{port}\"\ntypes = [\"Vendor::Thing\"]\n\n[[providers]]\nkind = \"dylib\"\nname = \"gone\"\npath = \"missing/libgone.so\"\n"
        ),
    );
    port
}

const OWN: &str = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n";

#[test]
fn stacks_of_other_types_and_read_commands_work_while_a_provider_is_down() {
    let s = Scratch::new();
    let port = down_providers(&s);
    let t = s.write("own.yaml", OWN);
    let deploy = s.cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "own",
        t.to_str().unwrap_or_default(),
    ]);
    assert_eq!(deploy.code(), 0, "{}{}", deploy.stdout(), deploy.stderr());
    assert!(
        deploy.stdout().contains("CREATE_COMPLETE"),
        "{}",
        deploy.stdout()
    );
    for args in [
        &["--config", "cairn.toml", "list"][..],
        &["--config", "cairn.toml", "describe", "own"],
        &["--config", "cairn.toml", "events", "own"],
        &[
            "--config",
            "cairn.toml",
            "resources",
            "own",
            "--output",
            "json",
        ],
    ] {
        let r = s.cairn(args);
        assert_eq!(r.code(), 0, "cairn {args:?}: {}", r.stderr());
    }
    // A template that needs the down provider's type is refused before
    // anything runs, naming the provider and the cause.
    let t = s.write(
        "vendor.yaml",
        "Resources:\n  V: {Type: Vendor::Thing, Properties: {Size: 1}}\n",
    );
    let r = s.cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "vendor",
        t.to_str().unwrap_or_default(),
    ]);
    assert_eq!(r.code(), 1, "{}", r.stdout());
    let expected = format!(
        "Template format error: Unrecognized resource types: [Vendor::Thing] (Vendor::Thing is unavailable: provider vendor cannot start: webhook provider vendor: cannot read its types from http://127.0.0.1:{port}/schema:"
    );
    assert!(r.stderr().contains(&expected), "{}", r.stderr());
    // `cairn providers` lists the rest and names both providers that are down.
    let r = s.cairn(&["--config", "cairn.toml", "providers", "--output", "json"]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(
        r.stderr().contains("provider gone cannot start: "),
        "{}",
        r.stderr()
    );
    let listed = r.json();
    let down: Vec<&str> = listed["Unavailable"]
        .as_array()
        .map(|a| a.iter().filter_map(|u| u["Provider"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(down, ["vendor", "gone"]);
    assert!(listed["Unavailable"][1]["Cause"]
        .as_str()
        .unwrap_or_default()
        .contains("missing/libgone.so"));
    let delete = s.cairn(&["--config", "cairn.toml", "delete", "own"]);
    assert_eq!(delete.code(), 0, "{}{}", delete.stdout(), delete.stderr());
    assert!(delete.stdout().contains("DELETE_COMPLETE"));
    assert!(s.resource_files().is_empty());
}

#[test]
fn cairn_serve_starts_and_reports_the_provider_that_is_down() {
    let s = Scratch::new();
    down_providers(&s);
    s.write(
        "cairn.toml",
        &format!(
            "{}\n[server]\nauth = \"none\"\n",
            std::fs::read_to_string(s.dir.path().join("cairn.toml")).unwrap_or_default()
        ),
    );
    let (mut child, endpoint) = s.serve();
    let addr = endpoint.strip_prefix("http://").map(str::to_string);
    let get = |path: &str| crate::support::http_get(&endpoint, path);
    let health = addr.as_ref().map(|_| get("/healthz")).unwrap_or_default();
    let metrics = addr.as_ref().map(|_| get("/metrics")).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(addr.is_some(), "cairn serve did not start: {endpoint}");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains("\r\n\r\nok\nengine "), "{health}");
    assert!(health.contains("\nstore: reachable ("), "{health}");
    assert!(
        health.contains(
            "provider vendor: unavailable: webhook provider vendor: cannot read its types from"
        ),
        "{health}"
    );
    assert!(
        health.contains("provider gone: unavailable: cannot load"),
        "{health}"
    );
    assert!(
        metrics.contains("cairn_provider_up{provider=\"vendor\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cairn_provider_up{provider=\"gone\"} 0"),
        "{metrics}"
    );
}

/// `cairn events S --output json | head -1`: a closed stdout ends every
/// read command quietly with status 0 (what the reader wanted it has), in
/// both output modes, with no panic, backtrace or error line.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let s = Scratch::new();
    let t = s.write("own.yaml", OWN);
    let deploy = s.cairn(&["deploy", "own", t.to_str().unwrap_or_default()]);
    assert_eq!(deploy.code(), 0, "{}", deploy.stderr());
    let reads: [&[&str]; 8] = [
        &["providers"],
        &["events", "own"],
        &["resources", "own"],
        &["outputs", "own"],
        &["describe", "own"],
        &["list"],
        &["history", "own"],
        &["template", "own"],
    ];
    for read in reads {
        for output in ["json", "text"] {
            let mut args = read.to_vec();
            args.extend(["--output", output]);
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
                .args(&args)
                .current_dir(s.dir.path())
                .env_remove("CAIRN_CONFIG")
                .env_remove("CAIRN_STATE")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("cairn starts");
            drop(child.stdout.take());
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let status = child.wait().expect("cairn ends");
            assert_eq!(status.code(), Some(0), "cairn {args:?}: {status:?}: {err}");
            assert_eq!(err, "", "cairn {args:?}");
        }
    }
}
