//! The embedded CLI on a PostgreSQL state (`--state postgres://…`): each
//! test makes a database of its own and drops it.

use std::process::Command;

use crate::support::Scratch;

/// A new database on the test server (`CAIRN_TEST_POSTGRES`, else the
/// machine's PostgreSQL that `cargo xtask test` starts): its URL, dropped
/// when the guard goes.
pub(crate) struct Database {
    pub url: String,
    name: String,
    server: String,
}

impl Database {
    pub fn new() -> Database {
        let server = std::env::var("CAIRN_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let name = format!("cairn_e2e_{}", uuid::Uuid::new_v4().simple());
        let out = Command::new("psql")
            .args([server.as_str(), "-qAtc", &format!("CREATE DATABASE {name}")])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "cannot create a test database on {server}: {} — run the tests with `cargo xtask test`, which starts PostgreSQL, or set CAIRN_TEST_POSTGRES",
            String::from_utf8_lossy(&out.stderr)
        );
        let prefix = server.rsplit_once('/').map(|(p, _)| p).unwrap_or(&server);
        Database {
            url: format!("{prefix}/{name}"),
            name,
            server,
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                self.server.as_str(),
                "-qAtc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

#[test]
fn the_cli_runs_a_stack_on_postgres() {
    let db = Database::new();
    let s = Scratch::new();
    s.write(
        "t.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n  B: {Type: Cairn::Test::Resource, Properties: {Value: !GetAtt A.Value}}\nOutputs:\n  O: {Value: !GetAtt B.Value, Export: {Name: shared}}\n",
    );
    let state = ["--state", db.url.as_str()];
    let cairn = |args: &[&str]| {
        let mut all = state.to_vec();
        all.extend_from_slice(args);
        s.cairn(&all)
    };
    let run = cairn(&["deploy", "pg", "t.yaml"]);
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    assert!(run.stdout().contains("stack pg is CREATE_COMPLETE"));
    // Without a data directory, the test resources live in ./cairn-data.
    let files = crate::support::backing_files_in(&s.dir.path().join("cairn-data")).len();
    assert_eq!(files, 2);
    let events = cairn(&["events", "pg", "--output", "json"]).json();
    let statuses: Vec<String> = events["StackEvents"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| {
                    format!(
                        "{} {}",
                        e["LogicalResourceId"].as_str().unwrap_or_default(),
                        e["ResourceStatus"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(statuses.len(), 8, "{statuses:?}");
    // Newest first, as DescribeStackEvents.
    assert_eq!(
        statuses.first().map(String::as_str),
        Some("pg CREATE_COMPLETE")
    );
    assert_eq!(
        statuses.last().map(String::as_str),
        Some("pg CREATE_IN_PROGRESS")
    );
    let run = cairn(&["outputs", "pg"]);
    assert_eq!(run.stdout().trim(), "O = a  (export shared)");
    // An update, a change set and the history go through the same store.
    let run = cairn(&["plan", "pg", "t.yaml", "--name", "again"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&["deploy", "pg", "t.yaml"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("No updates are to be performed."),
        "{}",
        run.stderr()
    );
    let history = cairn(&["history", "pg", "--output", "json"]);
    assert_eq!(history.code(), 0, "{}", history.stderr());
    let run = cairn(&["delete", "pg"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = cairn(&["list", "--output", "json"]);
    assert_eq!(
        run.json()["StackSummaries"][0]["StackStatus"],
        "DELETE_COMPLETE"
    );
    let files = crate::support::backing_files_in(&s.dir.path().join("cairn-data")).len();
    assert_eq!(files, 0);
}

/// Runs `q` through the server's own `postgres` database (a session on
/// `db` could not, say, lift a read-only setting of `db`).
fn admin_sql(db: &Database, q: &str) {
    let server = format!(
        "{}/postgres",
        db.url.rsplit_once('/').map(|(p, _)| p).unwrap_or_default()
    );
    let out = Command::new("psql")
        .args([server.as_str(), "-qAtc", q])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "{q}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cairn serve` on PostgreSQL: /healthz names the engine and the store's
/// state, and answers 503 once the database is gone.
#[test]
fn healthz_reports_the_database() {
    let db = Database::new();
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[engine]\nstate = \"{}\"\n\n[server]\nauth = \"none\"\n",
            db.url
        ),
    );
    let (child, endpoint) = s.serve();
    let _served = crate::support::Served(child);
    let get = || crate::support::http_get(&endpoint, "/healthz");
    let up = get();
    // Read-only (finding 9 of the resource-call protocol issue: /healthz
    // said 200): new sessions are read-only once the database's default
    // is, and the server's sessions are ended so that it makes new ones.
    // Through the server's own database: a session on the read-only one
    // could not lift the setting.
    let sql = |q: &str| admin_sql(&db, q);
    let name = db.url.rsplit('/').next().unwrap_or_default().to_string();
    let end_sessions = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    );
    sql(&format!(
        "ALTER DATABASE {name} SET default_transaction_read_only = on"
    ));
    sql(&end_sessions);
    let read_only = (0..20)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            get()
        })
        .find(|r| r.contains("read-only"))
        .unwrap_or_else(get);
    sql(&format!(
        "ALTER DATABASE {name} SET default_transaction_read_only = off"
    ));
    let writable = (0..20)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            get()
        })
        .find(|r| r.starts_with("HTTP/1.1 200"))
        .unwrap_or_else(get);
    drop(db);
    let down = get();
    assert!(up.starts_with("HTTP/1.1 200"), "{up}");
    assert!(up.contains("\r\n\r\nok\nengine "), "{up}");
    assert!(up.contains("\nstore: reachable ("), "{up}");
    assert!(read_only.starts_with("HTTP/1.1 503"), "{read_only}");
    assert!(
        read_only.contains("\nstore: unreachable: state database error: the PostgreSQL state database is read-only (transaction_read_only is on"),
        "{read_only}"
    );
    assert!(writable.starts_with("HTTP/1.1 200"), "{writable}");
    assert!(down.starts_with("HTTP/1.1 503"), "{down}");
    assert!(down.contains("\r\n\r\nunavailable\nengine "), "{down}");
    assert!(down.contains("\nstore: unreachable: "), "{down}");
}

/// Finding 9 of the resource-call protocol issue: the database's
/// `default_transaction_read_only` is read when a session starts, so the
/// sessions a server made while the database was read-only stayed
/// read-only after the setting was lifted, and nothing could be recorded
/// until they were ended by hand. Now a session found read-only makes the
/// pool check the sessions it hands out: once the setting is lifted, the
/// next CreateStack works (no `/healthz` in between).
#[test]
fn writes_resume_once_a_read_only_database_is_writable_again() {
    use crate::engines::{post, urlencode};
    let db = Database::new();
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[engine]\nstate = \"{}\"\n\n[server]\nauth = \"none\"\n",
            db.url
        ),
    );
    let (child, endpoint) = s.serve();
    let _served = crate::support::Served(child);
    let template = urlencode("Resources:\n  R: {Type: Cairn::Test::Resource}\n");
    let create = |name: &str| {
        post(
            &endpoint,
            &format!("Action=CreateStack&StackName={name}&TemplateBody={template}"),
        )
    };
    let complete = |name: &str| {
        (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            post(
                &endpoint,
                &format!("Action=DescribeStacks&StackName={name}"),
            )
            .contains("<StackStatus>CREATE_COMPLETE</StackStatus>")
        })
    };
    assert!(create("before").contains("<StackId>"));
    assert!(complete("before"));
    let sql = |q: &str| admin_sql(&db, q);
    let name = db.url.rsplit('/').next().unwrap_or_default().to_string();
    sql(&format!(
        "ALTER DATABASE {name} SET default_transaction_read_only = on"
    ));
    sql(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    ));
    // The server's new sessions are read-only: nothing can be recorded,
    // and the API says so as /healthz does (not PostgreSQL's "cannot
    // execute INSERT in a read-only transaction"), as does the CLI.
    let said = "state database error: the PostgreSQL state database is read-only (transaction_read_only is on: default_transaction_read_only, or a standby); nothing can be recorded until it accepts writes";
    let refused = (0..20)
        .map(|i| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            create(&format!("during{i}"))
        })
        .find(|a| a.contains("read-only"))
        .unwrap_or_else(|| create("during"));
    assert!(
        refused.contains(&format!(
            "<Code>InternalFailure</Code><Message>{said}</Message>"
        )),
        "{refused}"
    );
    let t = s.write("t.yaml", "Resources:\n  R: {Type: Cairn::Test::Resource}\n");
    let cli = s.cairn(&[
        "--state",
        &db.url,
        "deploy",
        "by-cli",
        t.to_str().unwrap_or_default(),
    ]);
    assert_ne!(cli.code(), 0);
    assert!(cli.stderr().contains(said), "{}", cli.stderr());
    // Lifted, without ending the server's sessions.
    sql(&format!(
        "ALTER DATABASE {name} SET default_transaction_read_only = off"
    ));
    let after = create("after");
    assert!(after.contains("<StackId>"), "{after}");
    assert!(complete("after"));
}

/// `cairn migrate-state`: a SQLite state with stacks in several statuses is
/// copied; every read command prints the same from both; a non-empty target
/// is refused.
#[test]
fn migrate_state_copies_a_sqlite_state() {
    let db = Database::new();
    let s = Scratch::new();
    s.write(
        "t.yaml",
        "Parameters:\n  V: {Type: String, Default: one}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref V}}\n  B: {Type: Cairn::Test::Resource, Properties: {Value: !GetAtt A.Value}}\nOutputs:\n  O: {Value: !GetAtt B.Value, Export: {Name: shared}}\n",
    );
    s.write(
        "bad.yaml",
        "Resources:\n  A: {Type: Cairn::Test::Resource}\n  B: {Type: Cairn::Test::Resource, DependsOn: A, Properties: {Fail: create}}\n",
    );
    let sqlite = ["--state", "cairn-state.db"];
    let on = |state: &[&str], args: &[&str]| {
        let mut all = state.to_vec();
        all.extend_from_slice(args);
        s.cairn(&all)
    };
    for args in [
        &["deploy", "good", "t.yaml"][..],
        &["deploy", "good", "t.yaml", "--parameter", "V=two"],
        &[
            "plan",
            "good",
            "t.yaml",
            "--parameter",
            "V=three",
            "--name",
            "pending",
        ],
        &["drift", "good"],
        &["deploy", "failed", "bad.yaml"],
        &["deploy", "gone", "bad.yaml", "--on-failure", "DO_NOTHING"],
        &["delete", "gone"],
    ] {
        let run = on(&sqlite, args);
        assert!(run.code() <= 1, "{args:?}: {}", run.stderr());
    }
    let run = s.cairn(&["migrate-state", "--from", "cairn-state.db", "--to", &db.url]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = run.stdout();
    assert!(out.contains("  stacks                      3\n"), "{out}");
    assert!(out.contains("  change_sets                 1\n"), "{out}");
    assert!(out.contains("  drift_detections            1\n"), "{out}");
    assert!(out.contains("  exports                     1\n"), "{out}");
    assert!(
        out.contains("verified: 3 stacks, 6 resources and 42 events "),
        "{out}"
    );
    let pg = ["--state", db.url.as_str()];
    let list = on(&pg, &["list", "--output", "json"]);
    assert_eq!(
        list.stdout(),
        on(&sqlite, &["list", "--output", "json"]).stdout()
    );
    let statuses: Vec<String> = list.json()["StackSummaries"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|s| s["StackStatus"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        statuses,
        ["UPDATE_COMPLETE", "ROLLBACK_COMPLETE", "DELETE_COMPLETE"]
    );
    for stack in ["good", "failed"] {
        for command in ["describe", "events", "resources", "history", "change-sets"] {
            let (a, b) = (
                on(&sqlite, &[command, stack, "--output", "json"]),
                on(&pg, &[command, stack, "--output", "json"]),
            );
            assert_eq!(a.code(), 0, "{command} {stack}: {}", a.stderr());
            assert_eq!(a.stdout(), b.stdout(), "{command} {stack}");
        }
    }
    assert_eq!(
        on(&pg, &["drift", "good", "--last", "--output", "json"]).stdout(),
        on(&sqlite, &["drift", "good", "--last", "--output", "json"]).stdout()
    );
    // The copy is live: the PostgreSQL state runs operations on from it
    // (its test resources are where the SQLite state kept them).
    let run = on(
        &pg,
        &[
            "--data-dir",
            "cairn-state.db.resources",
            "deploy",
            "good",
            "t.yaml",
            "--parameter",
            "V=four",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // A second copy into the same database is refused.
    let run = s.cairn(&["migrate-state", "--from", "cairn-state.db", "--to", &db.url]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("the target database already holds 3 stacks: migrate-state copies into an empty database only"),
        "{}",
        run.stderr()
    );
}
