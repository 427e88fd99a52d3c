//! `cairn serve` driven by boto3 and the aws CLI (`cfn_client.py`, one
//! scenario per test), each against its own server on a free loopback port
//! with its own state file.

use std::process::{Child, Command};
use std::time::Duration;

use crate::support::Scratch;

const KEY: &str = "AKIDCAIRNTEST";
const SECRET: &str = "cairn-test-secret";

/// A running `cairn serve`; killed when dropped.
struct Server {
    child: Child,
    endpoint: String,
}

impl Server {
    /// Starts the server in `s` with `extra` config and reads the line that
    /// names its address.
    fn start(s: &Scratch, extra: &str) -> Server {
        Self::start_with(s, extra, "")
    }

    /// `extra` goes into `[server]`, `sections` after it.
    fn start_with(s: &Scratch, extra: &str, sections: &str) -> Server {
        s.write(
            "cairn.toml",
            &format!(
                "[engine]\ncleanup_attempts = 2\ncleanup_backoff_seconds = 0.05\n\n[server]\nauth = \"sigv4\"\n{extra}\n[server.access_keys.{KEY}]\nsecret = \"{SECRET}\"\n\n[server.access_keys.AKIDLIMITED]\nsecret = \"limited-secret\"\nstacks = [\"mine\"]\n\n{sections}"
            ),
        );
        let (child, endpoint) = s.serve();
        Server { child, endpoint }
    }

    /// Runs a `cfn_client.py` scenario against this server.
    fn scenario(&self, s: &Scratch, name: &str, ca: Option<&str>) {
        crate::support::cfn_client(s, &self.endpoint, name, (KEY, SECRET), ca);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(name: &str) {
    run_with(name, "");
}

/// A scenario with `extra` in `[server]`.
fn run_with(name: &str, extra: &str) {
    let s = Scratch::new();
    let server = Server::start(&s, &format!("template_dirs = [\"templates\"]\n{extra}"));
    std::fs::create_dir_all(s.dir.path().join("templates")).expect("templates dir");
    server.scenario(&s, name, None);
}

#[test]
fn boto3_creates_updates_and_deletes_stacks_with_waiters() {
    run("lifecycle");
}

#[test]
fn boto3_signals_wait_conditions_and_signal_resource() {
    run("signals");
}

#[test]
fn boto3_nested_stacks_through_template_dirs() {
    run("nested");
}

#[test]
fn boto3_change_sets() {
    run("changesets");
}

#[test]
fn aws_cli_deploy_wait_and_pagination() {
    run("deploy_cli");
}

#[test]
fn continue_rollback_and_cancel_update() {
    run("rollback_and_cancel");
}

#[test]
fn exports_imports_and_drift() {
    run("exports_and_drift");
}

#[test]
fn hostile_bodies_get_xml_errors_and_the_server_stays_up() {
    run_with("limits", "max_body_bytes = 100000\n");
}

#[test]
fn racing_updates_and_deletes_leave_no_stack_in_progress() {
    run_with("racing", "answer_within_ms = 0\n");
}

#[test]
fn boto3_capabilities() {
    let s = Scratch::new();
    let server = Server::start_with(
        &s,
        "",
        "[type_aliases]\n\"AWS::IAM::Role\" = \"OS::Heat::None\"\n",
    );
    server.scenario(&s, "capabilities", None);
}

#[test]
fn boto3_termination_protection() {
    run("protection");
}

#[test]
fn boto3_stack_refactor() {
    run("refactor");
}

#[test]
fn boto3_notifications() {
    run("notifications");
}

#[test]
fn boto3_rollback_triggers() {
    run("rollback_triggers");
}

/// Guard hooks judge creates before a provider is called (rules read
/// from the scratch directory, `[hooks] rule_dirs`).
#[test]
fn boto3_guard_hooks() {
    let s = Scratch::new();
    let rules = format!("[hooks]\nrule_dirs = [\"{}\"]\n", s.dir.path().display());
    let server = Server::start_with(&s, "", &rules);
    server.scenario(&s, "hooks", None);
}

#[test]
fn boto3_stack_policy() {
    run("stack_policy");
}

#[test]
fn boto3_import_through_a_change_set() {
    run("import_resources");
}

#[test]
fn boto3_macros() {
    let handler = crate::macros::count_macro();
    let s = Scratch::new();
    let server = Server::start_with(
        &s,
        "",
        &format!(
            "[webhooks]\nsecret = \"{}\"\n\n[[macros]]\nname = \"Count\"\nurl = \"http://127.0.0.1:{}/\"\n",
            crate::webhooks::SECRET,
            handler.port
        ),
    );
    server.scenario(&s, "macros", None);
}

#[test]
fn signature_failures_and_key_limits() {
    run("auth");
}

#[test]
fn https_with_the_servers_certificate() {
    let s = Scratch::new();
    let (cert, key) = crate::webhooks::self_signed(&s);
    let server = Server::start(&s, &format!("tls_cert = \"{cert}\"\ntls_key = \"{key}\"\n"));
    assert!(
        server.endpoint.starts_with("https://127.0.0.1:"),
        "{}",
        server.endpoint
    );
    server.scenario(&s, "tls", Some(&cert));
}

#[test]
fn sigterm_stops_the_server_and_the_next_start_resumes_the_operation() {
    let s = Scratch::new();
    let server = Server::start(&s, "answer_within_ms = 0\n");
    let t = s.write(
        "slow.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {WaitSeconds: 2}}\n  B: {Type: Cairn::Test::Resource, DependsOn: A}\n",
    );
    let out = Command::new("aws")
        .args([
            "--endpoint-url",
            &server.endpoint,
            "cloudformation",
            "create-stack",
            "--stack-name",
            "term",
            "--template-body",
        ])
        .arg(format!("file://{}", t.display()))
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", s.dir.path().join("none"))
        .output()
        .expect("aws runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = server.child.id().to_string();
    let term = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(term.success());
    let mut server = server;
    let status = server.child.wait().expect("the server exits");
    assert!(status.success(), "{status:?}");
    // The create was interrupted; the next server resumes it.
    let again = Server::start(&s, "");
    again.scenario(&s, "resumed", None);
}

/// `cairn --endpoint URL …` with the test key.
fn remote(s: &Scratch, server: &Server, args: &[&str]) -> crate::support::Run {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--endpoint", &server.endpoint])
        .args(args)
        .current_dir(s.dir.path())
        .env_remove("CAIRN_CONFIG")
        .env_remove("CAIRN_STATE")
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("cairn runs");
    crate::support::Run(out)
}

#[test]
fn the_cli_runs_against_a_server_with_the_same_output() {
    let s = Scratch::new();
    let server = Server::start(&s, "");
    let hello = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/hello.yaml");
    let run = remote(
        &s,
        &server,
        &[
            "deploy",
            "hello",
            hello,
            "-p",
            "Greeting=hi",
            "--tag",
            "team=a",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("stack hello is CREATE_COMPLETE"),
        "{}",
        run.stdout()
    );
    assert!(
        run.stdout()
            .contains("CREATE_COMPLETE                               First"),
        "{}",
        run.stdout()
    );
    let described = remote(&s, &server, &["describe", "hello", "--output", "json"]).json();
    assert_eq!(
        described["Stacks"][0]["Tags"],
        serde_json::json!([{"Key": "team", "Value": "a"}])
    );
    // Read commands print what the embedded engine prints for the same state.
    for args in [
        &["describe", "hello", "--output", "json"][..],
        &["resources", "hello", "--output", "json"],
        &["outputs", "hello", "--output", "json"],
        &["events", "hello", "--output", "json"],
        &["template", "hello"],
        &["template", "hello", "--stage", "processed"],
        &["validate", hello],
        &["validate", hello, "--output", "json"],
        &["list", "--output", "json"],
        &["describe", "hello"],
    ] {
        let there = remote(&s, &server, args);
        let here = s.cairn(args);
        assert_eq!(there.code(), 0, "{args:?}: {}", there.stderr());
        assert_eq!(there.stdout(), here.stdout(), "{args:?}");
    }
    // Change sets and drift.
    let run = remote(
        &s,
        &server,
        &["plan", "hello", "-p", "Greeting=hello", "--name", "cs1"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout()
            .contains("change set cs1 (UPDATE) of stack hello: CREATE_COMPLETE, AVAILABLE"),
        "{}",
        run.stdout()
    );
    assert!(
        run.stdout()
            .contains("execute it with: cairn execute hello cs1"),
        "{}",
        run.stdout()
    );
    for args in [
        &["change-set", "hello", "cs1", "--output", "json"][..],
        &["change-set", "hello", "cs1"],
        &["change-sets", "hello", "--output", "json"],
    ] {
        let there = remote(&s, &server, args);
        assert_eq!(there.code(), 0, "{args:?}: {}", there.stderr());
        assert_eq!(there.stdout(), s.cairn(args).stdout(), "{args:?}");
    }
    let run = remote(&s, &server, &["execute", "hello", "cs1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("stack hello is UPDATE_COMPLETE"),
        "{}",
        run.stdout()
    );
    let run = remote(
        &s,
        &server,
        &["plan", "hello", "--name", "cs2", "-p", "Greeting=hello"],
    );
    assert!(
        run.stdout()
            .contains("The submitted information didn't contain changes."),
        "{}",
        run.stdout()
    );
    assert_eq!(
        remote(&s, &server, &["delete-change-set", "hello", "cs2"]).stdout(),
        "change set cs2 of stack hello deleted\n"
    );
    // cairn update (Cairn's own action) and history.
    for args in [
        &["update", "hello", "--drift-only", "--preview"][..],
        &[
            "update",
            "hello",
            "--drift-only",
            "--preview",
            "--output",
            "json",
        ],
    ] {
        let there = remote(&s, &server, args);
        assert_eq!(there.code(), 0, "{args:?}: {}", there.stderr());
        assert_eq!(there.stdout(), s.cairn(args).stdout(), "{args:?}");
    }
    let run = remote(&s, &server, &["update", "hello", "--drift-only"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("stack hello is UPDATE_COMPLETE"),
        "{}",
        run.stdout()
    );
    assert!(run.stderr().contains("in sync    "), "{}", run.stderr());
    for args in [
        &["history", "hello"][..],
        &["history", "hello", "--output", "json"],
    ] {
        let there = remote(&s, &server, args);
        assert_eq!(there.code(), 0, "{args:?}: {}", there.stderr());
        assert_eq!(there.stdout(), s.cairn(args).stdout(), "{args:?}");
    }
    let there = remote(&s, &server, &["drift", "hello", "--output", "json"]);
    assert_eq!(there.code(), 0, "{}", there.stderr());
    assert_eq!(
        there.stdout(),
        s.cairn(&["drift", "hello", "--last", "--output", "json"])
            .stdout()
    );
    let bad = s.write("bad.yaml", "Resources:\n  X: {Type: Cairn::Test::Resource, Properties: {Fail: create, FailMessage: nope}}\n");
    let run = remote(
        &s,
        &server,
        &["deploy", "bad", bad.to_str().unwrap_or_default()],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("error: stack bad is ROLLBACK_COMPLETE: The following resource(s) failed to create: [X]. Rollback requested by user.\n  X CREATE_FAILED: nope"),
        "{}",
        run.stderr()
    );
    let run = remote(
        &s,
        &server,
        &["deploy", "hello", hello, "-p", "Greeting=hello"],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("No updates are to be performed."),
        "{}",
        run.stderr()
    );
    let run = remote(&s, &server, &["delete", "hello"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("stack hello is DELETE_COMPLETE"),
        "{}",
        run.stdout()
    );
    let run = remote(&s, &server, &["describe", "hello"]);
    assert_eq!(
        run.stderr().trim(),
        "error: Stack with id hello does not exist"
    );
    let unsigned = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--endpoint", &server.endpoint, "list"])
        .env("AWS_ACCESS_KEY_ID", KEY)
        .env("AWS_SECRET_ACCESS_KEY", "wrong")
        .output()
        .expect("cairn runs");
    assert!(String::from_utf8_lossy(&unsigned.stderr)
        .contains("The request signature we calculated does not match"));
    let run = remote(&s, &server, &["drift", "hello", "--last"]);
    assert!(
        run.stderr()
            .contains("this command does not run with --endpoint"),
        "{}",
        run.stderr()
    );
}

#[test]
fn custom_resource_handlers_answer_on_the_servers_own_address() {
    let s = Scratch::new();
    let handler = crate::webhooks::Handler::start(&s, 0);
    let server = Server::start_with(
        &s,
        "",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[webhooks.endpoints.widgets]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"{}\"\nservice_tokens = [\"{}\"]\n",
            handler.port,
            crate::webhooks::SECRET,
            crate::webhooks::ARN
        ),
    );
    let t = s.write(
        "w.yaml",
        &format!(
            "Resources:\n  W:\n    Type: Custom::Widget\n    Properties:\n      ServiceToken: {}\n      Data: {{Answer: 42}}\nOutputs:\n  A:\n    Value: !GetAtt W.Answer\n",
            crate::webhooks::ARN
        ),
    );
    let run = remote(
        &s,
        &server,
        &["deploy", "w", t.to_str().unwrap_or_default()],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = remote(&s, &server, &["outputs", "w"]);
    assert_eq!(out.stdout(), "A = 42\n");
    let requests = handler.requests();
    let url = requests[0]["event"]["ResponseURL"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        url.starts_with(&format!("{}/cfn-response/", server.endpoint)),
        "{url} is not on {}",
        server.endpoint
    );
    assert_eq!(
        requests[0]["puts"],
        serde_json::json!([200]),
        "{requests:?}"
    );
}

#[test]
fn the_cli_reads_credentials_from_the_aws_shared_files() {
    let s = Scratch::new();
    let server = Server::start(&s, "");
    let creds = s.write(
        "credentials",
        &format!("[default]\naws_access_key_id = AKIDNONE\naws_secret_access_key = nope\n\n[ci]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n"),
    );
    let config = s.write("config", "[profile ci]\nregion = us-east-1\n");
    let run = |profile: &str| {
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--endpoint", &server.endpoint, "list", "--output", "json"])
            .current_dir(s.dir.path())
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
            .env("AWS_CONFIG_FILE", &config)
            .env("AWS_PROFILE", profile)
            .output()
            .expect("cairn runs")
    };
    let ok = run("ci");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "{\n  \"StackSummaries\": []\n}\n"
    );
    let refused = run("default");
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("The security token included in the request is invalid."),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// A provider whose handler is down when `cairn serve` starts: the server
/// starts and says so in /healthz; once the handler is up, the next use of
/// its type (after the backoff) starts it and the stack is created.
#[test]
fn a_provider_down_at_start_is_started_on_a_later_use() {
    let s = Scratch::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0);
    let server = Server::start_with(
        &s,
        "",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[[providers]]\nkind = \"webhook\"\nname = \"greetings\"\nurl = \"http://127.0.0.1:{port}/\"\nsecret = \"hook-secret\"\ntypes = [\"Custom::Greeting\"]\n"
        ),
    );
    let health = || crate::support::http_get(&server.endpoint, "/healthz");
    assert!(
        health().contains("provider greetings: unavailable: webhook provider greetings: cannot read its types from"),
        "{}",
        health()
    );
    let t = s.write(
        "g.yaml",
        "Resources:\n  G: {Type: Custom::Greeting, Properties: {Name: world}}\n",
    );
    let t = t.to_str().unwrap_or_default();
    let run = remote(&s, &server, &["deploy", "early", t]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Custom::Greeting is unavailable: provider greetings cannot start"),
        "{}",
        run.stderr()
    );
    let mut cmd = Command::new(crate::webhooks::kit_example());
    cmd.args([
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--secret",
        "hook-secret",
    ]);
    let _handler = crate::webhooks::Program::start(cmd);
    // The start is retried once its backoff (1 s after the first failures,
    // doubling) has passed.
    let started = std::time::Instant::now();
    let run = loop {
        let run = remote(&s, &server, &["deploy", "late", t]);
        if run.code() == 0 || started.elapsed() > Duration::from_secs(20) {
            break run;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    assert!(run.stdout().contains("CREATE_COMPLETE"));
    assert!(health().contains("provider greetings: up"), "{}", health());
    // With the handler gone, a command of another process that needs it
    // fails that resource, naming the provider and the cause.
    drop(_handler);
    let run = s.cairn(&["--config", "cairn.toml", "delete", "late"]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let events = s.cairn(&[
        "--config",
        "cairn.toml",
        "events",
        "late",
        "--output",
        "json",
    ]);
    let reason = events.json()["StackEvents"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|e| e["LogicalResourceId"] == "G" && e["ResourceStatus"] == "DELETE_FAILED")
                .map(|e| {
                    e["ResourceStatusReason"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
        })
        .unwrap_or_default();
    assert!(
        reason.starts_with("Custom::Greeting is unavailable: provider greetings cannot start: webhook provider greetings: cannot read its types from"),
        "{reason}"
    );
}

/// A custom resource whose handler answers its Create after the
/// ServiceTimeout: the resource fails and is rolled back (Delete of the
/// generated id), and when the late answer comes the server deletes the
/// thing it names too, so the handler is left holding nothing.
#[test]
fn a_create_answered_after_the_timeout_gets_what_it_made_deleted() {
    let s = Scratch::new();
    let things = s.dir.path().join("things");
    let handler = crate::webhooks::things_handler(&things, "hook-secret");
    let server = Server::start_with(
        &s,
        "",
        &format!(
            "[webhooks]\ntimeout_seconds = 30\n\n[webhooks.endpoints.things]\nurl = \"http://127.0.0.1:{}/\"\nsecret = \"hook-secret\"\n",
            handler.port
        ),
    );
    let t = s.write(
        "late.yaml",
        "Resources:\n  Slow:\n    Type: Custom::Thing\n    Properties: {ServiceToken: things, Sleep: 3, ServiceTimeout: 1}\n",
    );
    let run = remote(
        &s,
        &server,
        &["deploy", "late", t.to_str().unwrap_or_default()],
    );
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let requests = || crate::webhooks::things_requests(&things, None);
    let started = std::time::Instant::now();
    while requests().len() < 3 && started.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let seen = requests();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0].0, "Create");
    assert_eq!(seen[1].0, "Delete");
    assert!(seen[1].1.starts_with("late-Slow-"), "{seen:?}");
    assert_eq!(seen[2].0, "Delete");
    assert!(seen[2].1.starts_with("thing-"), "{seen:?}");
    let started = std::time::Instant::now();
    let left = loop {
        let left = crate::webhooks::things_left(&things);
        if left.is_empty() || started.elapsed() > Duration::from_secs(5) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(left.is_empty(), "the handler still holds {left:?}");
}

/// HOT through the API: `cairn --endpoint … deploy -e` sends the merged
/// environment and the files get_file and provider templates read
/// (Cairn's `Environments` / `Files` extension); the server applies them
/// as the embedded engine does.
#[test]
fn hot_environments_and_files_reach_the_server() {
    let s = Scratch::new();
    let server = Server::start(&s, "");
    std::fs::create_dir_all(s.dir.path().join("envs")).expect("envs dir");
    s.write(
        "app.yaml",
        "heat_template_version: 2018-08-31
parameters:
  tier: {type: string}
  owner: {type: string, default: nobody}
resources:
  banner:
    type: Cairn::Test::Resource
    properties:
      Value: {get_file: banner.txt}
  server:
    type: Corp::Server
    properties:
      name: {get_param: tier}
outputs:
  banner: {value: {get_attr: [banner, Value]}}
  motd: {value: {get_attr: [server, motd]}}
  who: {value: {list_join: ['@', [{get_param: owner}, {get_param: tier}]]}}
",
    );
    s.write("banner.txt", "hello");
    s.write(
        "envs/base.yaml",
        "parameters:\n  tier: web\nparameter_defaults:\n  owner: base\nresource_registry:\n  Corp::Server: server.yaml\n",
    );
    s.write("envs/prod.yaml", "parameter_defaults:\n  owner: prod\n");
    s.write(
        "envs/server.yaml",
        "heat_template_version: 2018-08-31
parameters:
  name: {type: string}
resources:
  vm:
    type: Cairn::Test::Resource
    properties:
      Value: {str_replace: {template: 'NAME: MOTD', params: {NAME: {get_param: name}, MOTD: {get_file: motd.txt}}}}
outputs:
  motd: {value: {get_attr: [vm, Value]}}
",
    );
    s.write("envs/motd.txt", "be nice");
    let run = remote(
        &s,
        &server,
        &["deploy", "h", "app.yaml", "-e", "envs/base.yaml"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = remote(&s, &server, &["outputs", "h"]);
    assert_eq!(
        out.stdout(),
        "banner = hello\nmotd = web: be nice\nwho = base@web\n",
        "{}",
        out.stderr()
    );
    // A later environment wins; -p wins over the environments' parameters.
    let layered = [
        "app.yaml",
        "-e",
        "envs/base.yaml",
        "-e",
        "envs/prod.yaml",
        "-p",
        "tier=api",
    ];
    let plan = remote(
        &s,
        &server,
        &[&["plan", "h"][..], &layered, &["--output", "json"]].concat(),
    );
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    let changes = plan.json()["Changes"].to_string();
    assert!(
        changes.contains("\"LogicalResourceId\":\"server\""),
        "{changes}"
    );
    let run = remote(&s, &server, &[&["deploy", "h"][..], &layered].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = remote(&s, &server, &["outputs", "h"]);
    assert_eq!(
        out.stdout(),
        "banner = hello\nmotd = api: be nice\nwho = prod@api\n"
    );
    let d = remote(&s, &server, &["describe", "h", "--output", "json"]).json();
    assert_eq!(d["Stacks"][0]["StackStatus"], "UPDATE_COMPLETE");
    // A file get_file needs that the request lacks: Heat's text.
    let run = remote(
        &s,
        &server,
        &["deploy", "h2", "envs/server.yaml", "-p", "name=x"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    std::fs::remove_file(s.dir.path().join("banner.txt")).expect("remove");
    let run = remote(
        &s,
        &server,
        &["deploy", "h3", "app.yaml", "-e", "envs/base.yaml"],
    );
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("get_file banner.txt: cannot read"),
        "{}",
        run.stderr()
    );
    for stack in ["h", "h2"] {
        let run = remote(&s, &server, &["delete", stack]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    assert_eq!(s.resource_files(), Vec::<String>::new());
}

#[test]
fn cairn_import_through_a_server_runs_an_import_change_set() {
    let s = Scratch::new();
    let server = Server::start(&s, "");
    let base = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: x}}\n";
    s.write("base.yaml", base);
    let run = remote(&s, &server, &["deploy", "st", "base.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let path = file_to_import(&s, "with-file.yaml", base);
    let run = remote(
        &s,
        &server,
        &[
            "import",
            "st",
            "with-file.yaml",
            "--resources",
            "import.json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("stack st is IMPORT_COMPLETE"),
        "{}",
        run.stdout()
    );
    let resources = remote(&s, &server, &["resources", "st", "--output", "json"]).json();
    let f = resources["StackResources"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == "F").cloned())
        .unwrap_or_default();
    assert_eq!(f["ResourceStatus"], "IMPORT_COMPLETE", "{resources}");
    assert_eq!(f["PhysicalResourceId"], path.as_str());
}

#[test]
fn cairn_import_through_a_server_makes_a_new_stack_in_review_first() {
    let s = Scratch::new();
    let server = Server::start(&s, "");
    file_to_import(&s, "new.yaml", "");
    let run = remote(
        &s,
        &server,
        &["import", "fresh", "new.yaml", "--resources", "import.json"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let events = remote(&s, &server, &["events", "fresh", "--output", "json"]).json();
    let mut statuses: Vec<String> = events["StackEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["LogicalResourceId"] == "fresh")
        .map(|e| e["ResourceStatus"].as_str().unwrap_or_default().to_string())
        .collect();
    statuses.reverse();
    assert_eq!(
        statuses,
        vec![
            "REVIEW_IN_PROGRESS",
            "IMPORT_IN_PROGRESS",
            "IMPORT_COMPLETE"
        ]
    );
}

/// A file made by hand, `template` (`base`'s resources and the file, with
/// a DeletionPolicy) and `import.json` naming it: its path.
fn file_to_import(s: &Scratch, template: &str, base: &str) -> String {
    let file = s.dir.path().join("by-hand.txt");
    std::fs::write(&file, "hello").unwrap_or_default();
    let path = file.display().to_string();
    let resources = if base.is_empty() {
        "Resources:\n"
    } else {
        base
    };
    s.write(
        template,
        &format!("{resources}  F:\n    Type: Cairn::Local::File\n    DeletionPolicy: Retain\n    Properties: {{Path: '{path}', Content: hello}}\n"),
    );
    s.write(
        "import.json",
        &format!(r#"[{{"ResourceType": "Cairn::Local::File", "LogicalResourceId": "F", "ResourceIdentifier": {{"Path": "{path}"}}}}]"#),
    );
    path
}

#[test]
fn cairn_refactor_through_a_server_previews_and_moves() {
    let s = Scratch::new();
    let server = Server::start(&s, "");
    s.write(
        "a.yaml",
        "Resources:\n  Keep: {Type: Cairn::Test::Resource, Properties: {Value: k}}\n  Db: {Type: Cairn::Test::Resource, Properties: {Value: d}}\n",
    );
    s.write(
        "b.yaml",
        "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n",
    );
    for (stack, file) in [("a", "a.yaml"), ("b", "b.yaml")] {
        let run = remote(&s, &server, &["deploy", stack, file]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    }
    s.write(
        "a2.yaml",
        "Resources:\n  Kept: {Type: Cairn::Test::Resource, Properties: {Value: k}}\n",
    );
    s.write(
        "b2.yaml",
        "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n  Db: {Type: Cairn::Test::Resource, Properties: {Value: d}}\n",
    );
    let args = [
        "refactor",
        "--stack",
        "a=a2.yaml",
        "--stack",
        "b=b2.yaml",
        "--map",
        "a.Keep=a.Kept",
    ];
    let preview = remote(&s, &server, &[&args[..], &["--output", "json"]].concat());
    assert_eq!(preview.code(), 0, "{}", preview.stderr());
    let shown = preview.json();
    assert_eq!(shown["ExecutionStatus"], "AVAILABLE", "{shown}");
    let moves: Vec<(String, String)> = shown["Actions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&a["Detection"]),
                text(&a["ResourceMapping"]["Destination"]["LogicalResourceId"]),
            )
        })
        .collect();
    assert_eq!(
        moves,
        vec![
            ("AUTO".to_string(), "Db".to_string()),
            ("MANUAL".into(), "Kept".into())
        ]
    );
    let run = remote(&s, &server, &[&args[..], &["--execute"]].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("execution EXECUTE_COMPLETE"),
        "{}",
        run.stdout()
    );
    let b = remote(&s, &server, &["resources", "b", "--output", "json"]).json();
    let ids: Vec<&str> = b["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["LogicalResourceId"].as_str())
        .collect();
    assert_eq!(ids, ["B", "Db"]);
}

/// `cairn --endpoint URL update` is held to the stack policy too, and
/// takes `--stack-policy-during-update` to the server.
#[test]
fn cairn_update_through_a_server_is_held_to_the_stack_policy() {
    let s = Scratch::new();
    let server = Server::start(&s, "");
    s.write(
        "deny.json",
        r#"{"Statement": [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "LogicalResourceId/Other"}]}"#,
    );
    s.write(
        "allow.json",
        r#"{"Statement": [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}]}"#,
    );
    s.write(
        "v1.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: one}}\n",
    );
    s.write(
        "v2.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: two}}\n",
    );
    let run = remote(
        &s,
        &server,
        &["deploy", "st", "v1.yaml", "--stack-policy", "deny.json"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = remote(&s, &server, &["update", "st", "v2.yaml"]);
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr().contains("cairn update st is refused by the stack policy; nothing was changed: Action denied by stack policy: no statement allows [Update:Modify] for resource [LogicalResourceId/A]"),
        "{}",
        run.stderr()
    );
    let run = remote(
        &s,
        &server,
        &[
            "update",
            "st",
            "v2.yaml",
            "--stack-policy-during-update",
            "allow.json",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let shown = remote(&s, &server, &["describe", "st", "--output", "json"]).json();
    assert_eq!(shown["Stacks"][0]["StackStatus"], "UPDATE_COMPLETE");
}

/// `[log] format = "json"`: every line the server writes to stderr is one
/// JSON object, and an operation's lines carry the request that started it
/// (its action and request id, the one the API answered with) and the
/// operation's stack.
#[test]
fn json_logs_carry_the_request_and_the_operation() {
    use std::io::BufRead;
    let s = Scratch::new();
    // Traces exported too: the lines carry the trace id.
    let receiver = crate::traces::Receiver::start(true);
    s.write(
        "cairn.toml",
        &format!(
            "[server]\nauth = \"none\"\n\n[log]\nformat = \"json\"\n\n[telemetry]\nendpoint = \"{}\"\n",
            receiver.endpoint()
        ),
    );
    let log = std::fs::File::create(s.dir.path().join("serve.log")).expect("a log file");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--config", "cairn.toml", "serve", "--listen", "127.0.0.1:0"])
        .current_dir(s.dir.path())
        .env_remove("CAIRN_CONFIG")
        .env_remove("CAIRN_STATE")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("cairn serve starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the server prints its address");
    let endpoint = line.trim().trim_start_matches("listening on ").to_string();
    let _served = crate::support::Served(child);
    let template = crate::engines::urlencode("Resources:\n  R: {Type: Cairn::Test::Resource}\n");
    let answer = crate::engines::post(
        &endpoint,
        &format!("Action=CreateStack&StackName=logged&TemplateBody={template}"),
    );
    let request_id = answer
        .split("<RequestId>")
        .nth(1)
        .and_then(|r| r.split("</RequestId>").next())
        .unwrap_or_default()
        .to_string();
    assert!(!request_id.is_empty(), "{answer}");
    let read = || std::fs::read_to_string(s.dir.path().join("serve.log")).unwrap_or_default();
    let started = std::time::Instant::now();
    while !read().contains("operation stopped") {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{}",
            read()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let lines: Vec<serde_json::Value> = read()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let stopped = lines
        .iter()
        .find(|l| l["fields"]["message"] == "operation stopped")
        .expect("the operation's last line");
    assert_eq!(stopped["fields"]["ended"], "CREATE_COMPLETE", "{stopped}");
    let spans = stopped["spans"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["request", "operation"], "{stopped}");
    assert_eq!(spans[0]["action"], "CreateStack", "{stopped}");
    assert_eq!(spans[0]["request_id"], request_id.as_str(), "{stopped}");
    assert_eq!(spans[1]["stack"], "logged", "{stopped}");
    assert!(
        spans[1]["stack_id"]
            .as_str()
            .is_some_and(|id| id.contains(":stack/logged/")),
        "{stopped}"
    );
    // One trace id on both, the one of the exported request span.
    let trace = spans[0]["trace_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(trace.len(), 32, "{stopped}");
    assert_eq!(spans[1]["trace_id"], trace.as_str(), "{stopped}");
    let started = std::time::Instant::now();
    while !receiver.has_trace(&trace) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "no exported span of trace {trace}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
