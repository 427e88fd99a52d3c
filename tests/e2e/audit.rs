//! The audit trail through `cairn serve`: API calls signed by named keys,
//! a console delete, a refused call, each recorded with CloudTrail's
//! fields (the key and its name, the source address, NoEcho values
//! hidden), read back by `cairn audit` (from the state and through the
//! server), by boto3's CloudTrail client (LookupEvents, a limited key
//! seeing only its stacks' records), and exported to a JSON-lines file.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{header, http, remote_as, remote_ok_as as ok, Scratch, Served};

const CONFIG: &str = "[server]\nauth = \"sigv4\"\n\n[server.access_keys.AKIDOPS]\nsecret = \"ops-secret\"\nname = \"ops\"\n\n[server.access_keys.AKIDLIMITED]\nsecret = \"limited-secret\"\nstacks = [\"mine\"]\n\n[audit]\nexport_file = \"audit.jsonl\"\n";

const TEMPLATE: &str = "Parameters:\n  Pw: {Type: String, NoEcho: true}\n  Size: {Type: String, Default: '1'}\nResources:\n  R: {Type: Cairn::Test::Resource, Properties: {Value: !Ref Size}}\n";

const OPS: (&str, &str) = ("AKIDOPS", "ops-secret");
const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// The records `cairn audit ARGS --output json` prints, newest first.
fn audit(s: &Scratch, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--config", "cairn.toml", "audit"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let run = s.cairn(&all);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.json()["Records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn names(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            let stack = r["requestParameters"]["stackName"].as_str().unwrap_or("-");
            format!("{} {stack}", r["eventName"].as_str().unwrap_or_default())
        })
        .collect()
}

#[test]
fn api_calls_and_console_actions_are_audited_with_who_where_and_no_secrets() {
    let s = Scratch::new();
    // The export endpoint: batches of CloudTrail's log shape.
    let (sink, posted) = crate::support::http_sink();
    s.write(
        "cairn.toml",
        &format!("{CONFIG}export_url = \"http://127.0.0.1:{sink}/trail\"\n"),
    );
    let (server, endpoint) = s.serve();
    let _server = Served(server);
    let t = s.write("t.yaml", TEMPLATE);
    let t = t.to_str().unwrap_or_default();
    ok(
        &s,
        &endpoint,
        OPS,
        &["deploy", "mine", t, "-p", "Pw=hunter2"],
    );
    ok(
        &s,
        &endpoint,
        OPS,
        &["deploy", "mine", t, "-p", "Pw=hunter3", "-p", "Size=2"],
    );
    ok(
        &s,
        &endpoint,
        OPS,
        &["deploy", "theirs", t, "-p", "Pw=hunter4"],
    );
    ok(&s, &endpoint, OPS, &["delete", "theirs"]);
    // The console: a wrong secret, then a login, then `mine` deleted from
    // its page.
    let refused = http(
        &endpoint,
        "POST",
        "/console/login",
        &[FORM],
        "access_key_id=AKIDOPS&secret_access_key=guess",
    );
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    let login = http(
        &endpoint,
        "POST",
        "/console/login",
        &[FORM, ("User-Agent", "console-browser/1.0")],
        "access_key_id=AKIDOPS&secret_access_key=ops-secret",
    );
    let cookie = header(&login, "set-cookie")
        .and_then(|c| c.split(';').next())
        .unwrap_or_default()
        .to_string();
    let page = http(
        &endpoint,
        "GET",
        "/console/stacks/mine",
        &[("Cookie", &cookie)],
        "",
    );
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default()
        .to_string();
    let deleted = http(
        &endpoint,
        "POST",
        "/console/stacks/mine/delete",
        &[
            FORM,
            ("Cookie", &cookie),
            ("User-Agent", "console-browser/1.0"),
        ],
        &format!("csrf={csrf}"),
    );
    assert!(deleted.starts_with("HTTP/1.1 303"), "{deleted}");

    // boto3: a limited key's refused write, then LookupEvents as each key.
    crate::support::cfn_client(&s, &endpoint, "audit", OPS, None);

    // `cairn audit` from the state: every call that changed something,
    // newest first; the reads (DescribeStacks, …) are not recorded.
    let records = audit(&s, &[]);
    assert_eq!(
        names(&records),
        [
            "CreateStack other",
            "DeleteStack mine",
            "ConsoleLogin -",
            "ConsoleLogin -",
            "DeleteStack theirs",
            "CreateStack theirs",
            "UpdateStack mine",
            "CreateStack mine",
        ]
    );
    let text = serde_json::to_string(&records).unwrap_or_default();
    for secret in [
        "hunter2",
        "hunter3",
        "hunter4",
        "ops-secret",
        "limited-secret",
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let created = &records[7];
    assert_eq!(created["eventSource"], "cloudformation.amazonaws.com");
    assert_eq!(created["eventType"], "AwsApiCall");
    assert_eq!(created["userIdentity"]["accessKeyId"], "AKIDOPS");
    assert_eq!(created["userIdentity"]["userName"], "ops");
    assert_eq!(created["sourceIPAddress"], "127.0.0.1");
    assert_eq!(
        created["requestParameters"]["parameters"],
        serde_json::json!([{"parameterKey": "Pw", "parameterValue": "HIDDEN_DUE_TO_SECURITY_REASONS"}])
    );
    assert_eq!(
        created["requestParameters"]["templateBody"]["bytes"],
        TEMPLATE.len()
    );
    let stack_id = created["responseElements"]["stackId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        stack_id.starts_with("arn:aws:cloudformation:us-east-1:123456789012:stack/mine/"),
        "{created}"
    );
    assert_eq!(created["resources"][0]["ARN"], stack_id.as_str());
    assert_eq!(
        records[6]["requestParameters"]["parameters"][1],
        serde_json::json!({"parameterKey": "Size", "parameterValue": "2"})
    );
    let console = &records[1];
    assert_eq!(console["eventType"], "AwsConsoleAction");
    assert_eq!(console["userAgent"], "console-browser/1.0");
    assert_eq!(console["userIdentity"]["userName"], "ops");
    assert_eq!(console["resources"][0]["ARN"], stack_id.as_str());
    for (login, outcome) in [(&records[2], "Success"), (&records[3], "Failure")] {
        assert_eq!(login["eventType"], "AwsConsoleSignIn", "{login}");
        assert_eq!(login["userIdentity"]["accessKeyId"], "AKIDOPS");
        assert_eq!(login["responseElements"]["ConsoleLogin"], outcome);
    }
    assert_eq!(records[3]["errorMessage"], "Failed authentication");
    let refused = &records[0];
    assert_eq!(refused["errorCode"], "AccessDenied");
    assert_eq!(
        refused["errorMessage"],
        "User: AKIDLIMITED is not authorized to perform: cloudformation:CreateStack on resource: other"
    );
    assert_eq!(refused["userIdentity"]["userName"], "AKIDLIMITED");

    // Filters: a stack by name or id, a key, an action, a time.
    assert_eq!(
        names(&audit(&s, &["--stack", "mine"])),
        ["DeleteStack mine", "UpdateStack mine", "CreateStack mine"]
    );
    assert_eq!(audit(&s, &["--stack", &stack_id]).len(), 3);
    assert_eq!(
        names(&audit(&s, &["--key", "AKIDLIMITED"])),
        ["CreateStack other"]
    );
    assert_eq!(audit(&s, &["--event", "DeleteStack"]).len(), 2);
    assert_eq!(audit(&s, &["--since", "1h"]).len(), 8);
    assert!(audit(&s, &["--since", "2999-01-01T00:00:00Z"]).is_empty());
    let table = s.cairn(&["--config", "cairn.toml", "audit", "--stack", "mine"]);
    assert_eq!(table.code(), 0, "{}", table.stderr());
    let lines: Vec<String> = table.stdout().lines().map(str::to_string).collect();
    assert!(lines[0].starts_with("TIME"), "{}", table.stdout());
    assert!(
        lines[1].contains("DeleteStack (console)")
            && lines[1].contains("ops")
            && lines[1].contains("127.0.0.1")
            && lines[1].ends_with("ok"),
        "{}",
        table.stdout()
    );

    // Through the server (LookupEvents) the same records.
    let remote = remote_as(
        &s,
        &endpoint,
        OPS,
        &["audit", "--stack", "mine", "--output", "json"],
    )
    .output()
    .expect("cairn runs");
    assert!(
        remote.status.success(),
        "{}",
        String::from_utf8_lossy(&remote.stderr)
    );
    let remote: Value = serde_json::from_slice(&remote.stdout).unwrap_or_default();
    assert_eq!(
        remote["Records"],
        Value::Array(audit(&s, &["--stack", "mine"]))
    );

    // The export file gets every record, oldest first, once.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut exported: Vec<Value> = Vec::new();
    while Instant::now() < deadline {
        exported = std::fs::read_to_string(s.dir.path().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if exported.len() >= 8 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut newest_first = exported.clone();
    newest_first.reverse();
    assert_eq!(newest_first, records);
    // And to the HTTP endpoint, in `{"Records": [...]}` batches.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sent: Vec<Value> = Vec::new();
    while Instant::now() < deadline && sent.len() < 8 {
        sent = posted
            .lock()
            .map(|b| b.clone())
            .unwrap_or_default()
            .iter()
            .filter_map(|b| serde_json::from_slice::<Value>(b).ok())
            .flat_map(|batch| batch["Records"].as_array().cloned().unwrap_or_default())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
    }
    sent.reverse();
    assert_eq!(sent, records);
    let metrics = http(&endpoint, "GET", "/metrics", &[], "");
    assert!(
        metrics.contains("cairn_audit_records_total{outcome=\"written\"} 8")
            && metrics.contains("cairn_audit_exported_total{target=\"file\"} 8")
            && metrics.contains("cairn_audit_exported_total{target=\"http\"} 8"),
        "{metrics}"
    );
}
