//! The web console in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`, which `cargo xtask test` installs), driven over
//! WebDriver: log in, the stack list, a 60-resource create watched live
//! (node colours and events change without a reload), a failed create's
//! node and reason, a change set's marks, a delete round trip through the
//! confirmation dialog, a limited key, and no session refused. Each step
//! saves a screenshot under `target/console-screenshots/`; the assertions
//! read the page's content, never its pixels.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::console::SIGV4_KEYS;
use crate::support::{remote_as, remote_ok_as as remote_ok, Scratch, Served};
use crate::webdriver::{step, with_browser, STEP};

const ADMIN: (&str, &str) = ("AKIDCONSOLE", "console-secret");
const LIMITED: (&str, &str) = ("AKIDLIMITED", "limited-secret");

/// Sixty `Cairn::Test::Resource`s in ten layers of six, each layer waiting
/// on the one before, each resource taking `wait` seconds.
fn sixty(wait: f64) -> String {
    let mut t = String::from("Resources:\n");
    for layer in 0..10 {
        for i in 0..6 {
            let depends = if layer == 0 {
                String::new()
            } else {
                format!(", DependsOn: [R{}x{i}]", layer - 1)
            };
            t.push_str(&format!(
                "  R{layer}x{i}: {{Type: Cairn::Test::Resource{depends}, Properties: {{Value: v{layer}{i}, WaitSeconds: {wait}}}}}\n"
            ));
        }
    }
    t
}

#[test]
fn in_a_browser_a_person_logs_in_and_watches_a_create_live() {
    let s = Scratch::new();
    s.write("cairn.toml", SIGV4_KEYS);
    let (server, endpoint) = s.serve();
    let _server = Served(server);
    let small = s.write(
        "small.yaml",
        "Resources:\n  Only: {Type: Cairn::Test::Resource, Properties: {Value: x}}\n",
    );
    remote_ok(
        &s,
        &endpoint,
        ADMIN,
        &["deploy", "mine", small.to_str().unwrap_or_default()],
    );
    let big = s.write("sixty.yaml", &sixty(0.8));
    let failing = s.write(
        "failing.yaml",
        "Resources:\n  Good: {Type: Cairn::Test::Resource, Properties: {Value: g}}\n  Bad: {Type: Cairn::Test::Resource, DependsOn: Good, Properties: {Value: b, Fail: create}}\n",
    );
    with_browser("live", |b| async move {
        // No session: the page sends the person to the login form, the API
        // refuses.
        b.goto(&format!("{endpoint}/console/stacks/mine")).await;
        b.until(
            "the login form is shown without a session",
            STEP,
            "return location.pathname === '/console/login' && !!document.querySelector('input[name=secret_access_key]')",
        )
        .await;
        assert_eq!(
            b.fetch_status("/console/api/stacks/mine/graph").await,
            json!(401)
        );
        b.shot("01-login").await;

        // A wrong secret is refused on the form.
        b.log_in(&endpoint, ADMIN.0, "not-the-secret").await;
        b.until(
            "a wrong secret is refused",
            STEP,
            "return !!document.querySelector('#error') && document.querySelector('#error').innerText.length > 0",
        )
        .await;
        let refused = b.text().await;
        assert!(
            refused.contains("The access key id or secret is not valid."),
            "{refused}"
        );

        // Logged in: the stack list.
        b.log_in(&endpoint, ADMIN.0, ADMIN.1).await;
        b.until(
            "the stack list after logging in",
            STEP,
            "return !!document.querySelector('tr.stack[data-stack=mine]')",
        )
        .await;
        let list = b.text().await;
        assert!(list.contains("mine\tCREATE_COMPLETE"), "{list}");
        b.shot("02-stack-list").await;

        // A 60-resource create, watched from its page while it runs.
        let mut deploy = remote_as(
            &s,
            &endpoint,
            ADMIN,
            &["deploy", "sixty", big.to_str().unwrap_or_default()],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("deploy starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            b.goto(&format!("{endpoint}/console/stacks/sixty")).await;
            if b.js("return !!document.querySelector('#stack')").await == json!(true) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the stack's page never opened: {}",
                b.text().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        b.js("window.cairnNotReloaded = true; return true").await;
        b.until(
            "60 nodes drawn",
            STEP,
            "return document.querySelectorAll('#graph g.node').length === 60",
        )
        .await;
        let first_status = b
            .js("return document.getElementById('status').textContent")
            .await;
        assert_eq!(
            first_status,
            json!("CREATE_IN_PROGRESS"),
            "the page opened after the create ended"
        );
        b.until(
            "a node turns blue (in progress) from the event stream",
            STEP,
            "return document.querySelectorAll('#graph g.node.progress').length > 0",
        )
        .await;
        let events_at_start = b
            .js("return document.querySelectorAll('#events li').length")
            .await;
        b.shot("03-create-started").await;
        // Half way: nodes already green while the stack is still creating.
        b.until(
            "four layers green while the create runs",
            STEP,
            "return document.querySelectorAll('#graph g.node.complete').length >= 24",
        )
        .await;
        let half_way = b
            .js("return [document.getElementById('status').textContent, document.querySelectorAll('#graph g.node.complete').length]")
            .await;
        assert_eq!(half_way[0], json!("CREATE_IN_PROGRESS"), "{half_way}");
        b.shot("04-create-half-way").await;
        b.until(
            "the create ends on the page",
            Duration::from_secs(60),
            "return document.getElementById('status').textContent === 'CREATE_COMPLETE'",
        )
        .await;
        assert!(deploy.wait().expect("deploy ends").success());
        b.until(
            "every node green",
            STEP,
            "return document.querySelectorAll('#graph g.node.complete').length === 60",
        )
        .await;
        let after = b
            .js("return [window.cairnNotReloaded === true, document.querySelectorAll('#events li').length]")
            .await;
        assert_eq!(after[0], json!(true), "the page was reloaded");
        // Three events per resource (CREATE_IN_PROGRESS, the same with
        // "Resource creation Initiated", CREATE_COMPLETE) and two of the
        // stack.
        assert_eq!(after[1], json!(182), "{after}");
        assert!(
            events_at_start.as_u64().unwrap_or(182) < 182,
            "no event arrived live: {events_at_start}"
        );
        // The layers: ten columns, left to right.
        let columns = b
            .js("return new Set([...document.querySelectorAll('#graph g.node')].map(g => g.transform.baseVal[0].matrix.e)).size")
            .await;
        assert_eq!(columns, json!(10));
        b.shot("05-create-complete").await;

        // A failing create kept as it failed (OnFailure DO_NOTHING): the
        // failed node, red, and its reason.
        let out = remote_as(
            &s,
            &endpoint,
            ADMIN,
            &[
                "deploy",
                "failing",
                failing.to_str().unwrap_or_default(),
                "--disable-rollback",
            ],
        )
        .output()
        .expect("deploy runs");
        assert!(!out.status.success());
        b.goto(&format!("{endpoint}/console/stacks/failing")).await;
        b.until(
            "the failed node is red",
            STEP,
            "return !!document.querySelector('#graph g.node.failed[data-id=Bad]')",
        )
        .await;
        b.click("#graph g.node[data-id=Bad]").await;
        b.until(
            "the failed node's detail",
            STEP,
            "return document.getElementById('detail').innerText.includes('was told to fail')",
        )
        .await;
        let status = b
            .js("return document.getElementById('status').textContent")
            .await;
        assert_eq!(status, json!("CREATE_FAILED"));
        let good = b.js("return document.querySelector('#graph g.node[data-id=Good]').getAttribute('class')").await;
        assert_eq!(good, json!("node complete"));
        let detail = b
            .js("return document.getElementById('detail').innerText")
            .await;
        let detail = detail.as_str().unwrap_or_default();
        assert!(
            detail.contains("Cairn::Test::Resource Bad was told to fail on create"),
            "{detail}"
        );
        assert!(detail.contains("CREATE_FAILED"), "{detail}");
        let failed_events = b
            .js("return [...document.querySelectorAll('#events li.failed')].map(li => li.textContent).join('\\n')")
            .await;
        let failed_events = failed_events.as_str().unwrap_or_default();
        assert!(
            failed_events.contains("CREATE_FAILED  Bad  Cairn::Test::Resource  Cairn::Test::Resource Bad was told to fail on create"),
            "{failed_events}"
        );
        b.shot("06-failed-create").await;

        // A key limited to `mine` sees only that stack.
        step("delete cookies", b.client.delete_all_cookies()).await;
        b.log_in(&endpoint, LIMITED.0, LIMITED.1).await;
        b.until(
            "the limited key's list",
            STEP,
            "return !!document.querySelector('tr.stack[data-stack=mine]')",
        )
        .await;
        let rows = b
            .js("return [...document.querySelectorAll('tr.stack')].map(r => r.dataset.stack)")
            .await;
        assert_eq!(rows, json!(["mine"]));
        b.goto(&format!("{endpoint}/console/stacks/sixty")).await;
        let denied = b.text().await;
        assert!(
            denied.contains("User: AKIDLIMITED is not authorized to perform: cloudformation:DescribeStacks on resource: sixty"),
            "{denied}"
        );
        assert_eq!(
            b.fetch_status("/console/api/stacks/sixty/graph").await,
            json!(403)
        );
        b.shot("07-limited-key").await;
        let _ = tokio::time::timeout(STEP, b.client.clone().close()).await;
    });
}

#[test]
fn in_a_browser_a_change_set_is_marked_and_a_stack_is_deleted() {
    let s = Scratch::new();
    // A Guard hook refuses a test resource whose Value is "forbidden".
    s.write(
        "no-forbidden.guard",
        "let things = Resources.*[ Type == 'Cairn::Test::Resource' ]\nrule NOT_FORBIDDEN when %things !empty {\n    %things.Properties.Value != \"forbidden\"\n    << a test resource's Value may not be forbidden >>\n}\n",
    );
    let dir = s.dir.path().display().to_string();
    s.write(
        "cairn.toml",
        &format!("[server]\nauth = \"none\"\n\n[hooks]\nrule_dirs = [\"{dir}\"]\n"),
    );
    let (server, endpoint) = s.serve();
    let _server = Served(server);
    let hook = s.write(
        "hook.yaml",
        &format!("Resources:\n  Rules:\n    Type: AWS::CloudFormation::GuardHook\n    Properties:\n      Alias: Private::Guard::NoForbidden\n      RuleLocation: {{Uri: 'file://{dir}/no-forbidden.guard'}}\n      ExecutionRole: arn:aws:iam::123456789012:role/hook\n      TargetOperations: [RESOURCE]\n"),
    );
    remote_ok(
        &s,
        &endpoint,
        ADMIN,
        &["deploy", "hooks", hook.to_str().unwrap_or_default()],
    );
    let refused = s.write(
        "refused.yaml",
        "Resources:\n  Judged: {Type: Cairn::Test::Resource, Properties: {Value: forbidden}}\n",
    );
    let run = remote_as(
        &s,
        &endpoint,
        ADMIN,
        &["deploy", "refused", refused.to_str().unwrap_or_default()],
    )
    .output()
    .expect("cairn runs");
    assert!(!run.status.success());
    let v1 = "Resources:\n  Named: {Type: Cairn::Test::Resource, Properties: {Name: first-name, Value: a}}\n  Plain: {Type: Cairn::Test::Resource, DependsOn: Named, Properties: {Value: p}}\n";
    let t1 = s.write("v1.yaml", v1);
    remote_ok(
        &s,
        &endpoint,
        ADMIN,
        &["deploy", "app", t1.to_str().unwrap_or_default()],
    );
    let v2 = v1
        .replace("Name: first-name", "Name: second-name")
        .replace("Value: p", "Value: q");
    let t2 = s.write("v2.yaml", &v2);
    remote_ok(
        &s,
        &endpoint,
        ADMIN,
        &[
            "plan",
            "app",
            t2.to_str().unwrap_or_default(),
            "--name",
            "rename",
        ],
    );
    with_browser("change-set-and-delete", |b| async move {
        // A hook's verdict on the resource it judged, in the stack's events.
        b.goto(&format!("{endpoint}/console/stacks/refused")).await;
        b.until(
            "the refused stack's events",
            STEP,
            "return [...document.querySelectorAll('#events li')].some(li => li.textContent.includes('HOOK_COMPLETE_FAILED'))",
        )
        .await;
        let verdicts = b
            .js("return [...document.querySelectorAll('#events li')].map(li => li.textContent.split('  ').slice(1).join('  ')).filter(t => t.includes('Private::Guard::NoForbidden'))")
            .await;
        // Newest first, each after its time.
        assert_eq!(
            verdicts,
            json!([
                "CREATE_FAILED  Judged  Cairn::Test::Resource  The following hook(s) failed: [Private::Guard::NoForbidden]. Private::Guard::NoForbidden: rule NOT_FORBIDDEN: a test resource's Value may not be forbidden",
                "CREATE_IN_PROGRESS  Judged  Cairn::Test::Resource  Private::Guard::NoForbidden HOOK_COMPLETE_FAILED (FAIL): rule NOT_FORBIDDEN: a test resource's Value may not be forbidden",
                "CREATE_IN_PROGRESS  Judged  Cairn::Test::Resource  Private::Guard::NoForbidden HOOK_IN_PROGRESS (FAIL)",
            ]),
            "{verdicts}"
        );
        b.shot("00-hook-verdict").await;
        // Gone with their stacks: the list below holds the others.
        for stack in ["refused", "hooks"] {
            remote_ok(&s, &endpoint, ADMIN, &["delete", stack]);
        }

        // The change set: its table and the graph's marks.
        b.goto(&format!("{endpoint}/console/stacks/app")).await;
        b.click("#change-sets a").await;
        // On the change set's page: the stack's page, still shown while the
        // click's navigation is under way, has the same two nodes unmarked.
        b.until(
            "the change set's graph",
            STEP,
            "return location.pathname.includes('/change-sets/') && document.querySelectorAll('#graph g.node').length === 2",
        )
        .await;
        let marks = b
            .js("return [...document.querySelectorAll('#graph g.node')].map(g => [g.dataset.id, g.dataset.change || '', getComputedStyle(g.querySelector('rect')).strokeDasharray])")
            .await;
        assert_eq!(marks[0][0], json!("Named"), "{marks}");
        assert_eq!(marks[0][1], json!("replace"), "{marks}");
        assert_eq!(marks[1][0], json!("Plain"), "{marks}");
        assert_eq!(marks[1][1], json!("modify"), "{marks}");
        // Replacement is drawn dashed, an in-place change is not.
        assert_ne!(marks[0][2], json!("none"), "{marks}");
        assert_eq!(marks[1][2], json!("none"), "{marks}");
        let rows = b
            .js("return [...document.querySelectorAll('#changes tr.change')].map(r => r.innerText)")
            .await;
        assert_eq!(
            rows,
            json!([
                "Modify\tNamed\tCairn::Test::Resource\tTrue\tProperties\tName (Always)",
                "Modify\tPlain\tCairn::Test::Resource\tFalse\tProperties\tValue (Never)"
            ])
        );
        b.shot("01-change-set").await;

        // Execute it from its page: the stack's page follows the update.
        let asked = b.click_for_confirmation("#execute button").await;
        assert_eq!(asked, "Execute change set rename?");
        step("accept", b.client.accept_alert()).await;
        b.until(
            "the update ends on the stack's page",
            STEP,
            "return !!document.getElementById('status') && document.getElementById('status').textContent === 'UPDATE_COMPLETE'",
        )
        .await;
        b.goto(&format!("{endpoint}/console/stacks/app")).await;
        let history = b
            .js("return [...document.querySelectorAll('#history tr.operation')].map(r => [r.cells[0].textContent, r.cells[1].textContent, r.cells[4].textContent])")
            .await;
        assert_eq!(
            history,
            json!([
                ["UPDATE", "rename", "UPDATE_COMPLETE"],
                ["CREATE", "", "CREATE_COMPLETE"]
            ])
        );
        // The template as given, coloured: keys, strings.
        let keys = b
            .js("return [...document.querySelectorAll('#template span.k')].slice(0, 4).map(e => e.textContent)")
            .await;
        assert_eq!(keys, json!(["Resources", "Named", "Type", "Properties"]));
        let template = b
            .js("return document.getElementById('template').textContent")
            .await;
        assert_eq!(template.as_str().unwrap_or_default(), v2);

        // A node's detail: the properties as recorded; after a change behind
        // Cairn's back and a detection from the page, its drift.
        b.click("#graph g.node[data-id=Plain]").await;
        b.until(
            "Plain's detail",
            STEP,
            "return document.getElementById('detail').dataset.id === 'Plain'",
        )
        .await;
        let properties = b
            .js("return JSON.parse(document.querySelector('#detail pre.properties').textContent)")
            .await;
        assert_eq!(properties, json!({"Value": "q"}));
        let physical = b
            .js("return [...document.querySelectorAll('#detail dt')].find(dt => dt.textContent === 'Physical id').nextSibling.textContent")
            .await;
        let physical = physical.as_str().unwrap_or_default().to_string();
        assert!(physical.starts_with("app-Plain-"), "{physical}");
        s.edit_backing_file(&physical, |r| {
            r["Properties"]["Value"] = "changed by hand".into()
        });
        b.click("#detect-drift button").await;
        b.until(
            "the detection ends",
            STEP,
            "return !!document.getElementById('drift-status') && document.getElementById('drift-status').textContent.startsWith('DRIFTED')",
        )
        .await;
        b.click("#graph g.node[data-id=Plain]").await;
        b.until(
            "Plain's drift in its detail",
            STEP,
            "return document.getElementById('detail').innerText.includes('Drift /Value')",
        )
        .await;
        let detail = b
            .js("return document.getElementById('detail').innerText")
            .await;
        assert!(
            detail
                .as_str()
                .unwrap_or_default()
                .contains("Drift /Value\nNOT_EQUAL: expected q, actual changed by hand"),
            "{detail}"
        );
        b.shot("02-drift-detail").await;

        // Delete, dismissed at the confirmation: nothing happens.
        b.goto(&format!("{endpoint}/console/stacks/app")).await;
        // The graph is drawn after the page loads and moves what is below
        // it: a click before that can land beside the button.
        b.until(
            "the stack's graph is drawn",
            STEP,
            "return !!window.cairnGraphDrawn",
        )
        .await;
        let asked = b.click_for_confirmation("#delete button").await;
        assert_eq!(asked, "Delete stack app and its resources?");
        step("dismiss", b.client.dismiss_alert()).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let status = b
            .js("return document.getElementById('status').textContent")
            .await;
        assert_eq!(status, json!("UPDATE_COMPLETE"));

        // Confirmed: the stack is deleted and the page says so.
        b.click_for_confirmation("#delete button").await;
        step("accept", b.client.accept_alert()).await;
        b.until(
            "the stack is deleted",
            STEP,
            "return !!document.getElementById('status') && document.getElementById('status').textContent === 'DELETE_COMPLETE'",
        )
        .await;
        b.shot("03-deleted").await;
        b.goto(&format!("{endpoint}/console/")).await;
        let list = b
            .js("return [...document.querySelectorAll('tr.stack')].map(r => r.dataset.stack)")
            .await;
        assert_eq!(list, json!([]));
        b.click("input[name=deleted]").await;
        b.click("form button").await;
        b.until(
            "deleted stacks behind the toggle",
            STEP,
            "return !!document.querySelector('tr.stack[data-stack=app]')",
        )
        .await;
        let row = b
            .js("return document.querySelector('tr.stack[data-stack=app]').innerText")
            .await;
        assert!(
            row.as_str().unwrap_or_default().contains("DELETE_COMPLETE"),
            "{row}"
        );
        let _ = tokio::time::timeout(STEP, b.client.clone().close()).await;
    });
}

/// Adds filler events to stack `stack` in the SQLite state `db` until it
/// has `total`: copies of its own events with new ids (as past operations
/// would have left), inserted with Python's sqlite3 while no engine runs.
fn grow_history(s: &Scratch, db: &str, stack: &str, total: usize) {
    let script = r#"
import sqlite3, sys
db, stack, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = sqlite3.connect(db)
cols = "event_id, stack_key, stack_name, logical_id, physical_id, resource_type, timestamp, status, status_reason, properties, hook"
rows = c.execute("SELECT " + cols + " FROM events WHERE stack_name = ? ORDER BY seq", (stack,)).fetchall()
need = total - len(rows)
filler = []
for i in range(need):
    r = list(rows[i % len(rows)])
    r[0] = "%s-h%d" % (r[0], i)
    filler.append(r)
c.executemany("INSERT INTO events (" + cols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", filler)
c.commit()
print(c.execute("SELECT COUNT(*) FROM events WHERE stack_name = ?", (stack,)).fetchone()[0])
"#;
    let out = crate::support::python()
        .args(["-c", script, db, stack, &total.to_string()])
        .current_dir(s.dir.path())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn in_a_browser_a_big_stack_opens_at_once_with_its_resource_table_and_paged_events() {
    let s = Scratch::new();
    s.write("cairn.toml", SIGV4_KEYS);
    let resources = |fail: bool| -> String {
        let mut t = String::from("Resources:\n");
        for i in 0..1000 {
            let extra = if fail && i == 500 {
                ", Fail: update, FailMessage: disk full"
            } else {
                ""
            };
            let value = if fail && i == 500 { "changed" } else { "v" };
            t.push_str(&format!(
                "  R{i:04}: {{Type: Cairn::Test::Resource, Properties: {{Value: {value}{extra}}}}}\n"
            ));
        }
        t
    };
    let first = s.write("big.yaml", &resources(false));
    let second = s.write("big-failing.yaml", &resources(true));
    let run = s.cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "big",
        first.to_str().unwrap_or_default(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // A long history, then an update that fails on one resource and is
    // kept (no rollback): the last events are the update's.
    grow_history(&s, "cairn-state.db", "big", 100_000);
    let run = s.cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "big",
        second.to_str().unwrap_or_default(),
        "--disable-rollback",
    ]);
    assert_ne!(run.code(), 0, "the update fails on R0500");
    let (server, endpoint) = s.serve();
    let _server = Served(server);
    // A second engine on the same state, for the logout.
    let (other, other_endpoint) = s.serve();
    let _other = Served(other);
    with_browser("big", |b| async move {
        b.log_in(&endpoint, ADMIN.0, ADMIN.1).await;
        b.until(
            "logged in",
            STEP,
            "return location.pathname === '/console/'",
        )
        .await;
        let opened = Instant::now();
        b.goto(&format!("{endpoint}/console/stacks/big")).await;
        b.until(
            "the graph is drawn and the last page of events shown",
            STEP,
            "return !!window.cairnGraphDrawn && document.querySelectorAll('#events li').length === 100",
        )
        .await;
        let drawn = b.js("return window.cairnGraphDrawn").await;
        println!(
            "a 1,000-resource stack with 100,000+ events: graph drawn {:.0} ms after navigation started; 100 newest events shown {} ms after the page was asked for",
            drawn["since_navigation_ms"].as_f64().unwrap_or_default(),
            opened.elapsed().as_millis()
        );
        b.shot("10-big-stack").await;
        // The newest event is the update's end.
        let newest = b
            .js("return document.querySelector('#events li').textContent")
            .await;
        assert!(
            newest
                .as_str()
                .unwrap_or_default()
                .contains("UPDATE_FAILED"),
            "{newest}"
        );
        // The older ones a page at a time.
        let older = b
            .js("return document.getElementById('older').textContent")
            .await;
        let total: usize = older
            .as_str()
            .unwrap_or_default()
            .trim_start_matches("Older events (")
            .trim_end_matches(')')
            .parse()
            .unwrap_or_default();
        assert!(total >= 99_900, "{older}");
        b.click("#older").await;
        b.until(
            "a page of older events is added",
            STEP,
            "return document.querySelectorAll('#events li').length === 200",
        )
        .await;

        // The resource table: every resource, the failed one marked.
        let rows = b
            .js("return document.querySelectorAll('#resources tbody tr').length")
            .await;
        assert_eq!(rows, json!(1000));
        let failed = b
            .js("return Array.from(document.querySelectorAll('#resources tr.failed-row')).map(r => [r.dataset.logicalId, r.querySelector('td.status').textContent, r.querySelector('td.reason').textContent, !!r.querySelector('.failed-mark')])")
            .await;
        assert_eq!(failed[0][0], json!("R0500"), "{failed}");
        assert_eq!(failed[0][1], json!("UPDATE_FAILED"));
        assert!(
            failed[0][2]
                .as_str()
                .unwrap_or_default()
                .contains("disk full"),
            "{failed}"
        );
        assert_eq!(failed[0][3], json!(true));
        assert_eq!(failed.as_array().map(Vec::len), Some(1));
        let count = b
            .js("return document.getElementById('resource-count').textContent")
            .await;
        assert_eq!(count, json!("1000 resources, 1 failed"));
        // Sorted by status, descending: the failed one first.
        b.click("#resources th button[data-sort=status]").await;
        b.click("#resources th button[data-sort=status]").await;
        let first_row = b
            .js("return document.querySelector('#resources tbody tr').dataset.logicalId")
            .await;
        assert_eq!(first_row, json!("R0500"));
        let sorted = b
            .js("return document.querySelector('#resources th button[data-sort=status]').parentElement.getAttribute('aria-sort')")
            .await;
        assert_eq!(sorted, json!("descending"));
        // Filtered.
        b.fill("#resource-filter", "R099").await;
        // The filter reads the whole row: a random physical id may hold
        // "r099" too, so the rows it must show are counted from the rows.
        let shown = b
            .js("return Array.from(document.querySelectorAll('#resources tbody tr')).filter(r => !r.hidden).map(r => r.dataset.logicalId)")
            .await;
        let matching = b
            .js("return Array.from(document.querySelectorAll('#resources tbody tr')).filter(r => r.textContent.toLowerCase().includes('r099')).map(r => r.dataset.logicalId)")
            .await;
        assert_eq!(shown, matching);
        let named: Vec<&str> = shown
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|id| id.starts_with("R099"))
            .collect();
        assert_eq!(
            named,
            [
                "R0990", "R0991", "R0992", "R0993", "R0994", "R0995", "R0996", "R0997", "R0998",
                "R0999"
            ]
        );
        // Every control is a button, a link or a field: reachable with Tab.
        let focusable = b
            .js("return Array.from(document.querySelectorAll('#resources th')).every(th => th.querySelector('button'))")
            .await;
        assert_eq!(focusable, json!(true));
        b.shot("11-resource-table").await;

        // Logging out revokes the session on every engine: the cookie,
        // copied before, no longer opens the stack on the other engine.
        let cookies = step("cookies", b.client.get_all_cookies()).await;
        let stolen = cookies
            .iter()
            .find(|c| c.name() == "cairn_console")
            .map(|c| c.value().to_string())
            .expect("the session cookie");
        b.goto(&format!("{other_endpoint}/console/stacks/big"))
            .await;
        b.until(
            "the other engine accepts the session",
            STEP,
            "return location.pathname === '/console/stacks/big'",
        )
        .await;
        b.goto(&format!("{endpoint}/console/")).await;
        b.click("#logout button").await;
        b.until(
            "logged out",
            STEP,
            "return location.pathname === '/console/login'",
        )
        .await;
        // The copied cookie, replayed against the other engine (a thief's
        // request), finds no session.
        let replayed = crate::support::http(
            &other_endpoint,
            "GET",
            "/console/stacks/big",
            &[("Cookie", &format!("cairn_console={stolen}"))],
            "",
        );
        assert!(replayed.starts_with("HTTP/1.1 303"), "{replayed}");
        assert_eq!(
            crate::support::header(&replayed, "location"),
            Some("/console/login")
        );
        // And the browser, logged out, is sent to the login form there too.
        b.goto(&format!("{other_endpoint}/console/stacks/big"))
            .await;
        b.until(
            "the other engine asks for a login",
            STEP,
            "return location.pathname === '/console/login'",
        )
        .await;
        b.shot("12-revoked").await;
    });
}
