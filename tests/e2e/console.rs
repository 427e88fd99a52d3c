//! The web console of `cairn serve` over real HTTP: the stack list, a
//! stack's page (NoEcho masked), the graph's layers and statuses, and the
//! live event stream of a create in flight: what the server sends
//! (`browser.rs` drives the same pages in headless Chromium).

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{header, http, http_get, remote_as, Scratch, Served};

const CHAIN: &str = "Parameters:\n  Secret: {Type: String, NoEcho: true}\n  Colour: {Type: String}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a, WaitSeconds: 0.4}}\n  B: {Type: Cairn::Test::Resource, Properties: {Value: !Ref A, WaitSeconds: 0.4}}\n  C: {Type: Cairn::Test::Resource, DependsOn: B, Properties: {Value: c, WaitSeconds: 0.4}}\n  D: {Type: Cairn::Test::Resource, DependsOn: A, Properties: {Value: !Sub 'd-${Secret}'}}\nOutputs:\n  Last: {Value: !Ref C}\n";

fn remote(s: &Scratch, endpoint: &str, args: &[&str]) -> Command {
    remote_as(s, endpoint, ("AKIDCONSOLE", "console-secret"), args)
}

/// `cairn serve` with `auth = "none"` in `s`.
fn open_server(s: &Scratch) -> (std::process::Child, String) {
    s.write("cairn.toml", "[server]\nauth = \"none\"\n");
    s.serve()
}

/// `cairn --endpoint … ARGS`, which must succeed.
fn remote_ok(s: &Scratch, endpoint: &str, args: &[&str]) -> std::process::Output {
    let out = remote(s, endpoint, args).output().expect("cairn runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The body of an HTTP answer (after the blank line).
fn body(answer: &str) -> &str {
    answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default()
}

#[test]
fn the_console_shows_stacks_the_graph_and_live_events() {
    let s = Scratch::new();
    let (server, endpoint) = open_server(&s);
    let _server = Served(server);
    let template = s.write("chain.yaml", CHAIN);
    let mut deploy = remote(
        &s,
        &endpoint,
        &[
            "deploy",
            "web",
            template.to_str().unwrap_or_default(),
            "-p",
            "Secret=hunter2",
            "-p",
            "Colour=blue",
        ],
    )
    .stdout(std::process::Stdio::null())
    .spawn()
    .expect("deploy starts");
    // Open the event stream while the create runs: the events arrive on it
    // as they are recorded, ending with the stack's CREATE_COMPLETE.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut page = String::new();
    while Instant::now() < deadline {
        page = http_get(&endpoint, "/console/stacks/web");
        if page.starts_with("HTTP/1.1 200") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let addr = endpoint.trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let _ = write!(
        stream,
        "GET /console/api/stacks/web/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut in_progress_seen_at = None;
    let stack_done = r#""resource_type":"AWS::CloudFormation::Stack","status":"CREATE_COMPLETE""#;
    while Instant::now() < deadline && !seen.contains(stack_done) {
        if let Ok(n) = stream.read(&mut buf) {
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        if in_progress_seen_at.is_none() && seen.contains(r#""status":"CREATE_IN_PROGRESS""#) {
            in_progress_seen_at = Some(seen.len());
        }
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("content-type: text/event-stream"), "{seen}");
    assert!(seen.contains("event: stack-event"), "{seen}");
    let done = seen
        .find(stack_done)
        .unwrap_or_else(|| panic!("no CREATE_COMPLETE on the stream: {seen}"));
    assert!(in_progress_seen_at.is_some_and(|at| at < done), "{seen}");
    for r in ["A", "B", "C", "D"] {
        assert!(
            seen.contains(&format!(r#""logical_id":"{r}","#)),
            "no event of {r}: {seen}"
        );
    }
    assert!(deploy.wait().expect("deploy ends").success());

    // The page: status, parameters with NoEcho masked, outputs, the script.
    let page = http_get(&endpoint, "/console/stacks/web");
    let html = body(&page);
    assert!(html.contains("<h1>web</h1>"), "{html}");
    assert!(
        html.contains("<tr><td>Secret</td><td>****</td></tr>"),
        "{html}"
    );
    assert!(
        html.contains("<tr><td>Colour</td><td>blue</td></tr>"),
        "{html}"
    );
    assert!(!html.contains("hunter2"), "{html}");
    assert!(html.contains("<script src=\"/console/assets/console.js\"></script>"));

    // The graph: each resource in the column after its dependencies.
    let graph = http_get(&endpoint, "/console/api/stacks/web/graph");
    let graph: serde_json::Value = serde_json::from_str(body(&graph)).expect("graph JSON");
    let layer = |id: &str| {
        graph["nodes"]
            .as_array()
            .and_then(|l| l.iter().find(|n| n["id"] == id))
            .map(|n| (n["layer"].as_u64().unwrap_or(99), n["status"].clone()))
    };
    assert_eq!(layer("A"), Some((0, "CREATE_COMPLETE".into())));
    assert_eq!(layer("B"), Some((1, "CREATE_COMPLETE".into())));
    assert_eq!(layer("C"), Some((2, "CREATE_COMPLETE".into())));
    assert_eq!(layer("D"), Some((1, "CREATE_COMPLETE".into())));
    let edges = graph["edges"].as_array().cloned().unwrap_or_default();
    assert!(edges.contains(&serde_json::json!(["A", "B"])), "{graph}");
    assert!(edges.contains(&serde_json::json!(["B", "C"])), "{graph}");

    // One resource's detail: properties as recorded, NoEcho masked.
    let d = http_get(&endpoint, "/console/api/stacks/web/resources/D");
    let d: serde_json::Value = serde_json::from_str(body(&d)).expect("resource JSON");
    assert_eq!(
        d["properties"],
        serde_json::json!({"Value": "d-****"}),
        "{d}"
    );
    assert_eq!(d["status"], "CREATE_COMPLETE", "{d}");
    assert_eq!(d["type"], "Cairn::Test::Resource", "{d}");
    assert!(d.get("drift").is_none(), "{d}");
    let missing = http_get(&endpoint, "/console/api/stacks/web/resources/Nope");
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    assert_eq!(body(&missing), "Resource Nope does not exist for stack web");

    // The list, filtered by name; assets are served from the binary.
    let list = http_get(&endpoint, "/console/?name=we");
    assert!(body(&list).contains("<a href=\"/console/stacks/web\">web</a></td><td class=\"status complete\">CREATE_COMPLETE</td>"), "{list}");
    let none = http_get(&endpoint, "/console/?name=zzz");
    assert!(!body(&none).contains("data-stack=\"web\""), "{none}");
    let js = http_get(&endpoint, "/console/assets/console.js");
    assert!(js.contains("new EventSource("), "{js}");
    assert!(http_get(&endpoint, "/console/stacks/nope").starts_with("HTTP/1.1 404"));
}

/// `auth = "sigv4"` with two keys: AKIDCONSOLE sees every stack,
/// AKIDLIMITED only `mine`.
pub const SIGV4_KEYS: &str = "[server]\nauth = \"sigv4\"\n\n[server.access_keys.AKIDCONSOLE]\nsecret = \"console-secret\"\n\n[server.access_keys.AKIDLIMITED]\nsecret = \"limited-secret\"\nstacks = [\"mine\"]\n";

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

#[test]
fn with_sigv4_a_key_logs_in_and_sees_only_its_stacks() {
    let s = Scratch::new();
    s.write("cairn.toml", SIGV4_KEYS);
    let (server, endpoint) = s.serve();
    let _server = Served(server);
    // A second engine on the same state, as behind a balancer.
    let (other, other_endpoint) = s.serve();
    let _other = Served(other);
    let template = s.write(
        "one.yaml",
        "Resources:\n  R: {Type: Cairn::Test::Resource}\n",
    );
    for name in ["mine", "theirs"] {
        remote_ok(
            &s,
            &endpoint,
            &["deploy", name, template.to_str().unwrap_or_default()],
        );
    }
    // No session: pages go to the login form, API calls are refused.
    let answer = http_get(&endpoint, "/console/");
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    assert_eq!(header(&answer, "location"), Some("/console/login"));
    let answer = http_get(&endpoint, "/console/api/stacks/mine/events");
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(http_get(&endpoint, "/console/login").contains("name=\"secret_access_key\""));
    // A wrong secret is refused; a forged cookie is no session.
    let wrong = http(
        &endpoint,
        "POST",
        "/console/login",
        &[FORM],
        "access_key_id=AKIDLIMITED&secret_access_key=nope",
    );
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    assert!(
        body(&wrong).contains("The access key id or secret is not valid."),
        "{wrong}"
    );
    let forged = http(
        &endpoint,
        "GET",
        "/console/",
        &[("Cookie", "cairn_console=AKIDLIMITED.99999999999.00")],
        "",
    );
    assert!(forged.starts_with("HTTP/1.1 303"), "{forged}");
    // The limited key logs in and sees only its stack.
    let ok = http(
        &endpoint,
        "POST",
        "/console/login",
        &[FORM],
        "access_key_id=AKIDLIMITED&secret_access_key=limited-secret",
    );
    assert!(ok.starts_with("HTTP/1.1 303"), "{ok}");
    let set = header(&ok, "set-cookie").unwrap_or_default().to_string();
    assert!(
        set.contains("; HttpOnly; SameSite=Strict; Max-Age=28800"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap_or_default().to_string();
    let list = http(&endpoint, "GET", "/console/", &[("Cookie", &cookie)], "");
    assert!(body(&list).contains("data-stack=\"mine\""), "{list}");
    assert!(!body(&list).contains("data-stack=\"theirs\""), "{list}");
    let theirs = http(
        &endpoint,
        "GET",
        "/console/stacks/theirs",
        &[("Cookie", &cookie)],
        "",
    );
    assert!(theirs.starts_with("HTTP/1.1 403"), "{theirs}");
    assert_eq!(
        body(&theirs),
        "User: AKIDLIMITED is not authorized to perform: cloudformation:DescribeStacks on resource: theirs"
    );
    let graph = http(
        &endpoint,
        "GET",
        "/console/api/stacks/theirs/graph",
        &[("Cookie", &cookie)],
        "",
    );
    assert!(graph.starts_with("HTTP/1.1 403"), "{graph}");
    let mine = http(
        &endpoint,
        "GET",
        "/console/stacks/mine",
        &[("Cookie", &cookie)],
        "",
    );
    assert!(mine.starts_with("HTTP/1.1 200"), "{mine}");
    let there = http(
        &other_endpoint,
        "GET",
        "/console/stacks/mine",
        &[("Cookie", &cookie)],
        "",
    );
    assert!(there.starts_with("HTTP/1.1 200"), "{there}");
    // The list offers to log out; logging out clears the cookie and goes
    // back to the login form.
    assert!(
        body(&list).contains("<form id=\"logout\" method=\"post\" action=\"/console/logout\"><span>AKIDLIMITED</span> <button>Log out</button></form>"),
        "{list}"
    );
    let out = http(
        &endpoint,
        "POST",
        "/console/logout",
        &[("Cookie", &cookie)],
        "",
    );
    assert!(out.starts_with("HTTP/1.1 303"), "{out}");
    assert_eq!(header(&out, "location"), Some("/console/login"));
    assert_eq!(
        header(&out, "set-cookie"),
        Some("cairn_console=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
    );
    // A copy of the cookie (stolen before the logout) works on neither
    // engine any more.
    for at in [&endpoint, &other_endpoint] {
        let page = http(
            at,
            "GET",
            "/console/stacks/mine",
            &[("Cookie", &cookie)],
            "",
        );
        assert!(page.starts_with("HTTP/1.1 303"), "{page}");
        assert_eq!(header(&page, "location"), Some("/console/login"));
        let api = http(
            at,
            "GET",
            "/console/api/stacks/mine/graph",
            &[("Cookie", &cookie)],
            "",
        );
        assert!(api.starts_with("HTTP/1.1 401"), "{api}");
    }
}

#[test]
fn deleting_a_stack_from_the_console_needs_its_csrf_token() {
    let s = Scratch::new();
    let (server, endpoint) = open_server(&s);
    let _server = Served(server);
    // A second engine on the same state (as behind a balancer): the token
    // one engine's page carries is good on the other.
    let (other, other_endpoint) = s.serve();
    let _other = Served(other);
    let template = s.write(
        "one.yaml",
        "Resources:\n  R: {Type: Cairn::Test::Resource}\n",
    );
    remote_ok(
        &s,
        &endpoint,
        &["deploy", "gone", template.to_str().unwrap_or_default()],
    );
    let page = http_get(&endpoint, "/console/stacks/gone");
    let csrf = body(&page)
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default()
        .to_string();
    assert_eq!(csrf.len(), 64, "{page}");
    // Without the token (a cross-site form), nothing happens.
    let refused = http(
        &endpoint,
        "POST",
        "/console/stacks/gone/delete",
        &[FORM],
        "csrf=forged",
    );
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(http_get(&endpoint, "/console/stacks/gone").contains("CREATE_COMPLETE"));
    // With it, sent to the other engine: the API's DeleteStack runs; the
    // page of the deleted stack (by its id) says so.
    let done = http(
        &other_endpoint,
        "POST",
        "/console/stacks/gone/delete",
        &[FORM],
        &format!("csrf={csrf}"),
    );
    assert!(done.starts_with("HTTP/1.1 303"), "{done}");
    let location = header(&done, "location").unwrap_or_default().to_string();
    assert!(
        location.starts_with("/console/stacks/arn%3Aaws%3Acloudformation%3A"),
        "{location}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        last = http_get(&endpoint, &location);
        if last.contains("class=\"status deleted\">DELETE_COMPLETE") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        last.contains("class=\"status deleted\">DELETE_COMPLETE"),
        "{last}"
    );
    assert!(s.resource_files().is_empty());
}

/// The CSRF token of a console page.
fn csrf_of(page: &str) -> String {
    body(page)
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default()
        .to_string()
}

/// Polls `path` until its page contains `text`.
fn wait_for(endpoint: &str, path: &str, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        last = http_get(endpoint, path);
        if last.contains(text) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last
}

#[test]
fn a_change_set_shows_its_replacements_and_runs_from_the_console_and_drift_is_detected() {
    let s = Scratch::new();
    let (server, endpoint) = open_server(&s);
    let _server = Served(server);
    let v1 = "Resources:\n  Named: {Type: Cairn::Test::Resource, Properties: {Name: first-name, Value: a}}\n  Plain: {Type: Cairn::Test::Resource, Properties: {Value: p}}\n";
    let t1 = s.write("v1.yaml", v1);
    remote_ok(
        &s,
        &endpoint,
        &["deploy", "app", t1.to_str().unwrap_or_default()],
    );
    let t2 = s.write(
        "v2.yaml",
        &v1.replace("Name: first-name", "Name: second-name")
            .replace("Value: p", "Value: q"),
    );
    remote_ok(
        &s,
        &endpoint,
        &[
            "plan",
            "app",
            t2.to_str().unwrap_or_default(),
            "--name",
            "rename",
        ],
    );
    // The stack's page lists the set; its page has the changes table.
    let stack_page = http_get(&endpoint, "/console/stacks/app");
    assert!(
        body(&stack_page).contains("<a href=\"/console/stacks/app/change-sets/rename\">rename</a>"),
        "{stack_page}"
    );
    let page = http_get(&endpoint, "/console/stacks/app/change-sets/rename");
    let html = body(&page);
    assert!(
        html.contains("<tr class=\"change\" data-logical-id=\"Named\"><td>Modify</td><td>Named</td><td>Cairn::Test::Resource</td><td class=\"replacement\">True</td><td>Properties</td><td>Name (Always)</td></tr>"),
        "{html}"
    );
    assert!(
        html.contains("<tr class=\"change\" data-logical-id=\"Plain\"><td>Modify</td><td>Plain</td><td>Cairn::Test::Resource</td><td class=\"replacement\">False</td><td>Properties</td><td>Value (Never)</td></tr>"),
        "{html}"
    );
    // The graph marks them: Named replaced, Plain modified.
    assert!(
        html.contains("data-marks=\"{&quot;Named&quot;:&quot;replace&quot;,&quot;Plain&quot;:&quot;modify&quot;}\""),
        "{html}"
    );
    // Execute it from the page.
    let csrf = csrf_of(&page);
    let answer = http(
        &endpoint,
        "POST",
        "/console/stacks/app/change-sets/rename/execute",
        &[FORM],
        &format!("csrf={csrf}"),
    );
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    let done = wait_for(&endpoint, "/console/stacks/app", ">UPDATE_COMPLETE<");
    assert!(
        done.contains("class=\"status complete\">UPDATE_COMPLETE<"),
        "{done}"
    );

    // Drift: change Plain's file behind Cairn's back, detect from the page.
    let physical = remote_ok(&s, &endpoint, &["resources", "app", "--output", "json"]);
    let resources: serde_json::Value =
        serde_json::from_slice(&physical.stdout).expect("resources JSON");
    let plain = resources["StackResources"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == "Plain"))
        .and_then(|r| r["PhysicalResourceId"].as_str())
        .unwrap_or_default()
        .to_string();
    s.edit_backing_file(&plain, |r| {
        r["Properties"]["Value"] = "changed by hand".into()
    });
    let page = http_get(&endpoint, "/console/stacks/app");
    assert!(
        body(&page).contains("<p id=\"drift-status\">NOT_CHECKED</p>"),
        "{page}"
    );
    let answer = http(
        &endpoint,
        "POST",
        "/console/stacks/app/detect-drift",
        &[FORM],
        &format!("csrf={}", csrf_of(&page)),
    );
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    let page = wait_for(
        &endpoint,
        "/console/stacks/app",
        "<p id=\"drift-status\">DRIFTED",
    );
    assert!(
        body(&page).contains("<tr><td>Plain</td><td>MODIFIED</td><td>/Value</td><td>q</td><td>changed by hand</td></tr>"),
        "{page}"
    );
}

#[test]
fn an_update_in_flight_is_cancelled_from_the_console() {
    let s = Scratch::new();
    let (server, endpoint) = open_server(&s);
    let _server = Served(server);
    let v1 = "Resources:\n  Slow: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n";
    let t1 = s.write("v1.yaml", v1);
    remote_ok(
        &s,
        &endpoint,
        &["deploy", "app", t1.to_str().unwrap_or_default()],
    );
    let page = http_get(&endpoint, "/console/stacks/app");
    assert!(!body(&page).contains("id=\"cancel-update\""), "{page}");
    assert!(!body(&page).contains("id=\"continue-rollback\""), "{page}");
    let t2 = s.write(
        "v2.yaml",
        &v1.replace("Value: a}", "Value: b, WaitSeconds: 5}"),
    );
    let mut update = remote(
        &s,
        &endpoint,
        &["deploy", "app", t2.to_str().unwrap_or_default()],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("update starts");
    let page = wait_for(&endpoint, "/console/stacks/app", "id=\"cancel-update\"");
    assert!(body(&page).contains(">UPDATE_IN_PROGRESS<"), "{page}");
    let answer = http(
        &endpoint,
        "POST",
        "/console/stacks/app/cancel-update",
        &[FORM],
        &format!("csrf={}", csrf_of(&page)),
    );
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    let done = wait_for(
        &endpoint,
        "/console/stacks/app",
        ">UPDATE_ROLLBACK_COMPLETE<",
    );
    assert!(done.contains(">UPDATE_ROLLBACK_COMPLETE<"), "{done}");
    let _ = update.wait();
}

#[test]
fn a_groups_node_lists_its_members_and_the_rolling_update_batch() {
    let s = Scratch::new();
    let (server, endpoint) = open_server(&s);
    let _server = Served(server);
    let group = "Parameters:\n  Release: {Type: String, Default: v1}\nResources:\n  Config:\n    Type: Cairn::Group::LaunchConfiguration\n    Properties:\n      MemberType: Cairn::Test::Resource\n      MemberProperties: {Value: !Ref Release, WaitSeconds: 0.5}\n  Web:\n    Type: Cairn::Group::InstanceGroup\n    UpdatePolicy:\n      RollingUpdate: {MinInstancesInService: 2, MaxBatchSize: 1}\n    Properties: {LaunchConfigurationName: !Ref Config, Size: 3, MemberNamePrefix: web}\n";
    let t = s.write("group.yaml", group);
    let t = t.to_str().unwrap_or_default();
    remote_ok(&s, &endpoint, &["deploy", "web", t]);
    let node = |graph: &serde_json::Value| {
        graph["nodes"]
            .as_array()
            .and_then(|l| l.iter().find(|n| n["id"] == "Web").cloned())
            .unwrap_or_default()
    };
    let graph = || -> serde_json::Value {
        serde_json::from_str(body(&http_get(&endpoint, "/console/api/stacks/web/graph")))
            .expect("graph JSON")
    };
    let web = node(&graph());
    let members: Vec<(String, String)> = web["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_string(),
                m["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(members.len(), 3, "{web}");
    assert!(
        members.iter().all(|(_, st)| st == "CREATE_COMPLETE"),
        "{web}"
    );
    assert!(web.get("rollout").is_none(), "{web}");
    // While a rolling update runs, the node says which batch it is at.
    let mut update = remote(&s, &endpoint, &["deploy", "web", t, "-p", "Release=v2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("update starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut rolling = serde_json::Value::Null;
    while Instant::now() < deadline {
        let web = node(&graph());
        if web.get("rollout").is_some() {
            rolling = web;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(rolling["rollout"]["batches"], 3, "{rolling}");
    assert!(
        rolling["rollout"]["batches_done"]
            .as_u64()
            .is_some_and(|d| d < 3),
        "{rolling}"
    );
    assert!(update.wait().expect("update ends").success());
}
