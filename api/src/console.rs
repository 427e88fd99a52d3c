//! The web console at `/console/`: a stack list, and a stack's page with its
//! status, parameters (NoEcho masked), outputs and tags, the resource graph
//! drawn from the template's dependencies (layered, left to right) and the
//! events as a live timeline (Server-Sent Events; node colours follow them).
//! Server-rendered HTML with one small script and stylesheet, embedded in the
//! binary. With `[server] auth = "sigv4"` a person logs in with an access
//! key ([`session`]); a key limited to some stacks sees only those. Deleting
//! a stack goes through the API's own DeleteStack action, with a CSRF token.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use cairn_core::config::ServerAuth;
use cairn_core::graph::Graph;
use cairn_core::stack::{ResourceRecord, StackRecord, StackStatus};
use cairn_core::template::parameters::MASK;
use cairn_core::template::Template;
use serde_json::{json, Value};

use super::App;

mod highlight;
pub(super) mod session;

use session::Viewer;

const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// How often a live event stream looks for new events.
const EVENT_POLL: Duration = Duration::from_millis(250);

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/console/", get(stack_list))
        .route("/console/login", get(login_form).post(login))
        .route("/console/logout", post(logout))
        .route("/console/stacks/{name}", get(stack_page))
        .route("/console/types", get(type_list))
        .route(
            "/console/stacks/{name}/{action}",
            axum::routing::post(stack_action),
        )
        .route(
            "/console/stacks/{name}/change-sets/{set}",
            get(change_set_page),
        )
        .route(
            "/console/stacks/{name}/change-sets/{set}/{action}",
            axum::routing::post(change_set_action),
        )
        .route("/console/api/stacks/{name}/graph", get(graph))
        .route("/console/api/stacks/{name}/events", get(events))
        .route("/console/api/stacks/{name}/events/page", get(events_page))
        .route("/console/api/stacks/{name}/resources/{id}", get(resource))
        .route("/console/assets/console.js", get(script))
        .route("/console/assets/console.css", get(style))
}

/// A response given instead of the page (boxed: it is large).
type Refusal = Box<Response>;

/// The viewer, or the answer to give instead: a page sends the person to
/// the login form, an API call gets 401.
async fn access(app: &App, headers: &HeaderMap, page: bool) -> Result<Viewer, Refusal> {
    let viewer = session::viewer(&app.config.server, headers);
    // A cookie whose session was ended (logged out, on any engine) is no
    // session.
    let revoked = match &viewer {
        Some(Viewer::Key { session, .. }) => {
            match app.engine.store().session_revoked(session).await {
                Ok(revoked) => revoked,
                Err(e) => {
                    return Err(Box::new(
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("The console cannot check this session: the state store does not answer ({e}); try again when /healthz says ok."),
                        )
                            .into_response(),
                    ))
                }
            }
        }
        _ => false,
    };
    match viewer.filter(|_| !revoked) {
        Some(v) => Ok(v),
        None if page => Err(Box::new(
            (
                StatusCode::SEE_OTHER,
                [(header::LOCATION, "/console/login")],
                "log in at /console/login",
            )
                .into_response(),
        )),
        None => Err(Box::new(
            (
                StatusCode::UNAUTHORIZED,
                "Log in at /console/login: this request has no valid console session.",
            )
                .into_response(),
        )),
    }
}

/// 403 unless the viewer may see the stack.
fn visible(app: &App, viewer: &Viewer, stack: &StackRecord) -> Result<(), Refusal> {
    if session::may_see(&app.config.server, viewer, &stack.stack_name) {
        return Ok(());
    }
    let key = match viewer {
        Viewer::Key { key, .. } => key.as_str(),
        Viewer::Open => "",
    };
    Err(Box::new(
        (
            StatusCode::FORBIDDEN,
            format!(
                "User: {key} is not authorized to perform: cloudformation:DescribeStacks on resource: {}",
                stack.stack_name
            ),
        )
            .into_response(),
    ))
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn status_class(status: &str) -> &'static str {
    if status.ends_with("_FAILED") {
        "failed"
    } else if status.ends_with("_IN_PROGRESS") {
        "progress"
    } else if status.starts_with("DELETE_COMPLETE") {
        "deleted"
    } else if status.ends_with("_COMPLETE") {
        "complete"
    } else {
        "none"
    }
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{} - Cairn</title><link rel=\"stylesheet\" href=\"/console/assets/console.css\"></head><body>{body}</body></html>",
        escape(title)
    ))
}

#[derive(serde::Deserialize, Default)]
struct ListQuery {
    /// Only stacks whose name contains this.
    name: Option<String>,
    /// Only stacks in this status.
    status: Option<String>,
    /// Deleted stacks too.
    deleted: Option<String>,
}

async fn stack_list(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    let viewer = match access(&app, &headers, true).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let stacks = match app.engine.store().list_stacks().await {
        Ok(s) => s,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    };
    let with_deleted = q
        .deleted
        .as_deref()
        .is_some_and(|d| d == "1" || d == "true");
    let mut rows = String::new();
    for s in stacks.iter().rev().filter(|s| {
        (with_deleted || s.status != StackStatus::DeleteComplete)
            && q.name.as_deref().is_none_or(|n| s.stack_name.contains(n))
            && q.status
                .as_deref()
                .is_none_or(|st| st.is_empty() || s.status.as_str() == st)
            && s.parent_id.is_none()
            && session::may_see(&app.config.server, &viewer, &s.stack_name)
    }) {
        let drift = app
            .engine
            .store()
            .last_drift_detection(&s.stack_id)
            .await
            .ok()
            .flatten()
            .and_then(|d| {
                d.get("StackDriftStatus")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "NOT_CHECKED".into());
        let link = if s.status == StackStatus::DeleteComplete {
            &s.stack_id
        } else {
            &s.stack_name
        };
        let _ = write!(
            rows,
            "<tr class=\"stack\" data-stack=\"{n}\"><td><a href=\"/console/stacks/{href}\">{n}</a></td><td class=\"status {c}\">{st}</td><td>{u}</td><td>{drift}</td></tr>",
            n = escape(&s.stack_name),
            href = escape(&urlencode(link)),
            c = status_class(s.status.as_str()),
            st = s.status.as_str(),
            u = escape(&s.updated_at),
            drift = escape(&drift),
        );
    }
    let logout = match viewer {
        Viewer::Key { ref key, .. } => format!(
            "<form id=\"logout\" method=\"post\" action=\"/console/logout\"><span>{}</span> <button>Log out</button></form>",
            escape(key)
        ),
        Viewer::Open => String::new(),
    };
    let body = format!(
        "{logout}<p><a href=\"/console/types\">Types</a></p><h1>Stacks</h1><form method=\"get\"><input name=\"name\" placeholder=\"name contains\" value=\"{}\"> <input name=\"status\" placeholder=\"status\" value=\"{}\"> <label><input type=\"checkbox\" name=\"deleted\" value=\"1\"{}> deleted stacks</label> <button>Filter</button></form><table id=\"stacks\"><tr><th>Name</th><th>Status</th><th>Last update</th><th>Drift</th></tr>{rows}</table>",
        escape(q.name.as_deref().unwrap_or_default()),
        escape(q.status.as_deref().unwrap_or_default()),
        if with_deleted { " checked" } else { "" },
    );
    page("Stacks", &body).into_response()
}

/// The registered types and every version of each (the registry's
/// DescribeType and ListTypeVersions as one page). A key limited to some
/// stacks does not see the registry, as it may not call its actions.
async fn type_list(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let viewer = match access(&app, &headers, true).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    if let Viewer::Key { key, .. } = &viewer {
        let limited = app
            .config
            .server
            .access_keys
            .get(key)
            .is_some_and(|k| k.stacks.is_some());
        if limited {
            return (
                StatusCode::FORBIDDEN,
                page(
                    "Types",
                    "<p>This access key may reach only some stacks, not the type registry.</p>",
                ),
            )
                .into_response();
        }
    }
    let versions = match app.engine.type_versions().await {
        Ok(v) => v,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    };
    let mut rows = String::new();
    for v in &versions {
        let _ = write!(
            rows,
            "<tr class=\"type-version\"><td>{t}</td><td>{id}</td><td>{default}</td><td>{status}</td><td>{created}</td><td>{signed}</td><td><code>{sha}</code></td></tr>",
            t = escape(&v.type_name),
            id = escape(&v.version_id),
            default = if v.is_default { "default" } else { "" },
            status = if v.deprecated { "DEPRECATED" } else { "LIVE" },
            created = escape(&v.created_at),
            signed = if v.signed_by.is_some() { "signed" } else { "not signed" },
            sha = escape(&v.package_sha256),
        );
    }
    let body = format!(
        "<p><a href=\"/console/\">Stacks</a></p><h1>Types</h1><table id=\"types\"><tr><th>Type</th><th>Version</th><th>Default</th><th>Status</th><th>Registered</th><th>Signature</th><th>Package SHA-256</th></tr>{rows}</table>"
    );
    page("Types", &body).into_response()
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn find(app: &App, name: &str) -> Result<StackRecord, Refusal> {
    match app.engine.store().find_stack(name).await {
        Ok(Some(s)) => Ok(s),
        Ok(None) => Err(Box::new(
            (
                StatusCode::NOT_FOUND,
                format!("Stack with id {name} does not exist"),
            )
                .into_response(),
        )),
        Err(e) => Err(Box::new(
            (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
        )),
    }
}

/// The viewer and the stack `name`, when the viewer may see it.
async fn viewed(
    app: &App,
    headers: &HeaderMap,
    name: &str,
    page: bool,
) -> Result<(Viewer, StackRecord), Refusal> {
    let viewer = access(app, headers, page).await?;
    let stack = find(app, name).await?;
    visible(app, &viewer, &stack)?;
    Ok((viewer, stack))
}

async fn stack_page(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let (viewer, stack) = match viewed(&app, &headers, &name, true).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let csrf = session::csrf(&app.config.server, &app.open_secret, &viewer);
    let mut params = String::new();
    for (k, v) in &stack.parameters {
        let shown = if stack.no_echo.contains(k) { MASK } else { v };
        let _ = write!(
            params,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(k),
            escape(shown)
        );
    }
    let mut outputs = String::new();
    for o in &stack.outputs {
        let _ = write!(
            outputs,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(&o.output_key),
            match &o.output_error {
                Some(e) => format!("<em>output_error: {}</em>", escape(e)),
                None => match &o.output_value {
                    Some(v) => escape(v),
                    None => "<em>no value</em>".to_string(),
                },
            }
        );
    }
    let mut tags = String::new();
    for t in &stack.tags {
        let _ = write!(
            tags,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(&t.key),
            escape(&t.value)
        );
    }
    let status = stack.status.as_str();
    let resources = resources_table(&app, &stack).await;
    let audit = audit_table(&app, &stack).await;
    let trace = trace_link(&app, &stack).await;
    let sets = change_sets_table(&app, &stack).await;
    let drift = drift_section(&app, &stack, &csrf).await;
    let history = history_table(&app, &stack).await;
    let body = format!(
        "<p><a href=\"/console/\">Stacks</a></p><h1>{name}</h1><div id=\"stack\" data-stack=\"{id}\" data-name=\"{name}\"><p>Status: <span id=\"status\" class=\"status {c}\">{status}</span> <span id=\"reason\">{reason}</span>{trace}</p>\
<div class=\"live\"><div class=\"main\"><h2>Graph</h2><div class=\"graph-box\"><svg id=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"The stack's resources and their dependencies\"></svg></div></div>\
<div class=\"side\"><dl id=\"detail\"></dl><h2>Events</h2><ul id=\"events\" aria-live=\"polite\"></ul><button id=\"older\" type=\"button\" hidden>Older events</button></div></div>\
<h2 id=\"resources-heading\">Resources</h2>{resources}<h2>Audit trail</h2>{audit}\
<h2>Parameters</h2><table id=\"parameters\">{params}</table><h2>Outputs</h2><table id=\"outputs\">{outputs}</table><h2>Tags</h2><table id=\"tags\">{tags}</table>\
<h2>Change sets</h2>{sets}<h2>Drift</h2>{drift}<h2>History</h2>{history}<h2>Template</h2><pre id=\"template\">{template}</pre>{actions}</div><script src=\"/console/assets/console.js\"></script>",
        name = escape(&stack.stack_name),
        id = escape(&stack.stack_id),
        c = status_class(status),
        reason = escape(stack.status_reason.as_deref().unwrap_or_default()),
        template = highlight::highlight(&stack.template_body),
        actions = actions_html(&app, &stack, &csrf).await,
    );
    page(&stack.stack_name, &body).into_response()
}

/// The stack's resource rows by logical id (a row being replaced: its
/// latest).
async fn rows_by_id(app: &App, stack: &StackRecord) -> BTreeMap<String, ResourceRecord> {
    app.engine
        .store()
        .resources(&stack.stack_id)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.logical_id.clone(), r))
        .collect()
}

/// The stack's resources as CloudFormation's and Horizon's consoles list
/// them: logical id, physical id, type, status, reason, last updated;
/// those that failed marked. The script sorts (the headers are buttons)
/// and filters the rows, and keeps them live from the event stream.
async fn resources_table(app: &App, stack: &StackRecord) -> String {
    let rows = rows_by_id(app, stack).await;
    let failed = rows
        .values()
        .filter(|r| r.status.as_str().ends_with("_FAILED"))
        .count();
    let mut out = format!(
        "<p class=\"table-tools\"><label>Filter <input id=\"resource-filter\" type=\"search\" placeholder=\"logical id, type, status…\"></label> <span id=\"resource-count\">{n} resources{f}</span></p>\
<div class=\"table-box\"><table id=\"resources\"><thead><tr>",
        n = rows.len(),
        f = if failed > 0 {
            format!(", <span class=\"failed\">{failed} failed</span>")
        } else {
            String::new()
        },
    );
    for (key, label) in [
        ("logical", "Logical ID"),
        ("physical", "Physical ID"),
        ("type", "Type"),
        ("status", "Status"),
        ("reason", "Reason"),
        ("updated", "Last updated"),
    ] {
        let _ = write!(
            out,
            "<th scope=\"col\" aria-sort=\"none\"><button type=\"button\" data-sort=\"{key}\">{label}</button></th>"
        );
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows.values() {
        let status = r.status.as_str();
        let failed = status.ends_with("_FAILED");
        let _ = write!(
            out,
            "<tr data-logical-id=\"{id}\"{mark}><td class=\"logical\">{mark_icon}{id}</td><td class=\"physical\">{physical}</td><td class=\"type\">{kind}</td><td class=\"status {c}\">{status}</td><td class=\"reason\">{reason}</td><td class=\"updated\">{updated}</td></tr>",
            id = escape(&r.logical_id),
            mark = if failed { " class=\"failed-row\"" } else { "" },
            mark_icon = if failed {
                "<span class=\"failed-mark\" title=\"failed in the last operation\" aria-label=\"failed\">✖ </span>"
            } else {
                ""
            },
            physical = escape(r.physical_id.as_deref().unwrap_or_default()),
            kind = escape(&r.resource_type),
            c = status_class(status),
            reason = escape(r.status_reason.as_deref().unwrap_or_default()),
            updated = escape(&r.updated_at),
        );
    }
    out.push_str("</tbody></table></div>");
    out
}

/// The stack's latest audit records (who changed it, from where, how it
/// ended), newest first.
async fn audit_table(app: &App, stack: &StackRecord) -> String {
    let q = cairn_core::audit::AuditQuery {
        stack: Some(stack.stack_id.clone()),
        limit: 20,
        ..Default::default()
    };
    let records = app
        .engine
        .store()
        .audit_records(&q)
        .await
        .unwrap_or_default();
    if records.is_empty() {
        return "<p id=\"audit\">No API call or console action has changed this stack yet.</p>"
            .into();
    }
    let mut out = String::from("<table id=\"audit\"><thead><tr><th scope=\"col\">Time</th><th scope=\"col\">Action</th><th scope=\"col\">Who</th><th scope=\"col\">From</th><th scope=\"col\">Result</th></tr></thead><tbody>");
    for r in &records {
        let b = &r.body;
        let text = |v: &Value| escape(v.as_str().unwrap_or("-"));
        let via = if b["eventType"] == "AwsConsoleAction" {
            " (console)"
        } else {
            ""
        };
        let result = match b["errorCode"].as_str() {
            Some(code) => format!(
                "<span class=\"failed\">{}: {}</span>",
                escape(code),
                text(&b["errorMessage"])
            ),
            None => "ok".into(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}{via}</td><td>{}</td><td>{}</td><td>{result}</td></tr>",
            text(&b["eventTime"]),
            text(&b["eventName"]),
            text(&b["userIdentity"]["userName"]),
            text(&b["sourceIPAddress"]),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// A link to the running operation's trace in the trace UI (`[telemetry]
/// ui`), when there is one.
async fn trace_link(app: &App, stack: &StackRecord) -> String {
    let Some(ui) = app.config.telemetry.ui.as_deref() else {
        return String::new();
    };
    let Ok(Some(operation)) = app.engine.store().operation(&stack.stack_id).await else {
        return String::new();
    };
    let options = cairn_core::operation::OperationOptions::from_value(&operation.options);
    let Some(trace) = options.trace.as_deref().and_then(|t| t.split('-').nth(1)) else {
        return String::new();
    };
    format!(
        " <a id=\"trace\" href=\"{}/trace/{}\">Trace of this operation</a>",
        escape(ui.trim_end_matches('/')),
        escape(trace)
    )
}

/// The actions the stack's status allows, each a form with the CSRF token.
async fn actions_html(app: &App, stack: &StackRecord, csrf: &str) -> String {
    let n = escape(&stack.stack_name);
    let form = |action: &str, label: &str, confirm: &str, extra: &str| {
        format!(
            "<form id=\"{action}\" method=\"post\" action=\"/console/stacks/{n}/{action}\" onsubmit=\"return confirm('{confirm}')\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{extra}<button>{label}</button></form>"
        )
    };
    let mut out = String::new();
    match stack.status {
        StackStatus::DeleteComplete => return out,
        StackStatus::UpdateInProgress => out.push_str(&form(
            "cancel-update",
            "Cancel update",
            &format!("Cancel the update of {n}? It rolls back."),
            "",
        )),
        // Kept by DisableRollback: RollbackStack goes back.
        StackStatus::UpdateFailed | StackStatus::CreateFailed => out.push_str(&form(
            "rollback",
            "Roll back",
            &format!("Roll {n} back to its last stable state?"),
            "",
        )),
        StackStatus::UpdateRollbackFailed => {
            // CloudFormation lets the rollback skip resources it could not
            // roll back (UPDATE_FAILED).
            let rows = app
                .engine
                .store()
                .resources(&stack.stack_id)
                .await
                .unwrap_or_default();
            let boxes: String = rows
                .iter()
                .filter(|r| r.status == cairn_core::stack::ResourceStatus::UpdateFailed)
                .map(|r| {
                    format!(
                        "<label><input type=\"checkbox\" name=\"skip\" value=\"{id}\"> skip {id}</label> ",
                        id = escape(&r.logical_id)
                    )
                })
                .collect();
            out.push_str(&form(
                "continue-rollback",
                "Continue rollback",
                &format!("Continue the rollback of {n}?"),
                &boxes,
            ));
        }
        _ => {}
    }
    out.push_str(&form(
        "delete",
        "Delete stack",
        &format!("Delete stack {n} and its resources?"),
        "",
    ));
    format!("<h2>Actions</h2>{out}")
}

/// The template's resources in layers (each one after every resource it
/// depends on), with the current status of each.
async fn graph(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let (_, stack) = match viewed(&app, &headers, &name, false).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match graph_of(&app, &stack).await {
        Ok((graph, _)) => Json(graph).into_response(),
        Err(r) => *r,
    }
}

/// The stack's graph as the page draws it (nodes with layer and status,
/// groups' members; edges), and its resources by logical id.
async fn graph_of(
    app: &App,
    stack: &StackRecord,
) -> Result<(Value, BTreeMap<String, ResourceRecord>), Refusal> {
    let graph = Template::parse_with(&stack.template_body, &stack.context)
        .and_then(|t| Graph::build(&t, &|_| None).map(|g| (t, g)));
    let (template, graph) = match graph {
        Ok(g) => g,
        Err(e) => {
            return Err(Box::new(
                (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).into_response(),
            ))
        }
    };
    let rows = rows_by_id(app, stack).await;
    let groups = app
        .engine
        .store()
        .groups(&stack.stack_id)
        .await
        .unwrap_or_default();
    let mut out = layout(&template, &graph, &rows);
    add_groups(&mut out, &groups);
    // How many events the page's stream replays as history.
    out["event_count"] = app
        .engine
        .store()
        .event_count(&stack.stack_id)
        .await
        .unwrap_or_default()
        .into();
    Ok((out, rows))
}

/// One resource as the node's detail shows it: the graph's node (status,
/// reason, physical id, a group's members and rollout), its properties as
/// recorded (NoEcho values masked) and its differences in the latest drift
/// detection.
async fn resource(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path((name, id)): Path<(String, String)>,
) -> Response {
    let (_, stack) = match viewed(&app, &headers, &name, false).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let (graph, rows) = match graph_of(&app, &stack).await {
        Ok(g) => g,
        Err(r) => return *r,
    };
    let Some(mut node) = graph["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["id"] == id.as_str()))
        .cloned()
    else {
        return (
            StatusCode::NOT_FOUND,
            format!(
                "Resource {id} does not exist for stack {}",
                stack.stack_name
            ),
        )
            .into_response();
    };
    let secrets = secrets_of(&stack, &rows);
    if let Some(r) = rows.get(&id) {
        node["properties"] = masked(Value::Object(r.properties.clone()), &secrets);
    }
    let detection = app
        .engine
        .store()
        .last_drift_detection(&stack.stack_id)
        .await
        .ok()
        .flatten();
    if let Some(d) = detection.as_ref().and_then(|d| {
        d["StackResourceDrifts"]
            .as_array()?
            .iter()
            .find(|r| r["LogicalResourceId"] == id.as_str())
    }) {
        node["drift"] = masked(
            json!({
                "status": d["StackResourceDriftStatus"],
                "differences": d.get("PropertyDifferences").cloned().unwrap_or(json!([])),
            }),
            &secrets,
        );
    }
    Json(node).into_response()
}

/// The values the console never shows: NoEcho parameters' and NoEcho
/// resources' attributes, longest first (a secret containing another is
/// masked whole).
fn secrets_of(stack: &StackRecord, rows: &BTreeMap<String, ResourceRecord>) -> Vec<String> {
    let mut secrets: Vec<String> = stack
        .no_echo
        .iter()
        .filter_map(|k| stack.parameters.get(k))
        .filter(|v| !v.is_empty())
        .cloned()
        .collect();
    for r in rows.values().filter(|r| r.no_echo) {
        secrets.extend(
            r.attributes
                .values()
                .filter_map(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_string),
        );
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets
}

/// `value` with every secret inside its strings replaced by `****`.
fn masked(value: Value, secrets: &[String]) -> Value {
    match value {
        Value::String(s) => Value::String(
            secrets
                .iter()
                .fold(s, |t, secret| t.replace(secret.as_str(), MASK)),
        ),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| masked(v, secrets)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, masked(v, secrets)))
                .collect(),
        ),
        other => other,
    }
}

fn layout(template: &Template, graph: &Graph, rows: &BTreeMap<String, ResourceRecord>) -> Value {
    // Longest chain of dependencies before each node: its column.
    let mut layer: Vec<Option<usize>> = vec![None; graph.len()];
    fn place(i: usize, graph: &Graph, layer: &mut Vec<Option<usize>>, depth: usize) -> usize {
        if let Some(l) = layer[i] {
            return l;
        }
        // A cycle cannot reach here (Graph::build refuses one); the depth
        // bound keeps a bug from overflowing the stack.
        if depth > graph.len() {
            return 0;
        }
        let l = graph
            .depends_on(i)
            .iter()
            .map(|d| place(*d, graph, layer, depth + 1) + 1)
            .max()
            .unwrap_or(0);
        layer[i] = Some(l);
        l
    }
    for i in 0..graph.len() {
        place(i, graph, &mut layer, 0);
    }
    let nodes: Vec<Value> = (0..graph.len())
        .map(|i| {
            let id = graph.name(i);
            let row = rows.get(id);
            json!({
                "id": id,
                "type": template.resource(id).map(|r| r.shown_type()).unwrap_or_default(),
                "layer": layer[i].unwrap_or(0),
                "status": row.map(|r| r.status.as_str()),
                "reason": row.and_then(|r| r.status_reason.clone()),
                "physical_id": row.and_then(|r| r.physical_id.clone()),
            })
        })
        .collect();
    let edges: Vec<Value> = (0..graph.len())
        .flat_map(|i| {
            graph
                .depends_on(i)
                .iter()
                .map(move |d| json!([graph.name(*d), graph.name(i)]))
        })
        .collect();
    json!({"nodes": nodes, "edges": edges})
}

/// Each instance group's members (name, status, physical id, reason) and
/// the rolling update in progress (batches done of all) on its node.
fn add_groups(graph: &mut Value, groups: &[(String, String, Value)]) {
    let Some(nodes) = graph.get_mut("nodes").and_then(Value::as_array_mut) else {
        return;
    };
    for (logical, _, state) in groups {
        let Some(node) = nodes.iter_mut().find(|n| n["id"] == logical.as_str()) else {
            continue;
        };
        let members: Vec<Value> = state["Members"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                json!({
                    "name": m["Name"],
                    "status": m["Status"],
                    "physical_id": m["PhysicalId"],
                    "reason": m["StatusReason"],
                })
            })
            .collect();
        node["members"] = Value::Array(members);
        if let Some(r) = state.get("Rollout").filter(|r| r.is_object()) {
            node["rollout"] = json!({
                "batches_done": r["Done"],
                "batches": r["Batches"].as_array().map(Vec::len),
                "target": r["Target"],
            });
        }
    }
}

/// The stack's events, oldest first, then each new one as it is recorded.
#[derive(serde::Deserialize, Default)]
struct EventsFrom {
    /// The stream starts after this many events (the page shows the last
    /// ones; older ones come a page at a time).
    #[serde(default)]
    from: usize,
}

/// One event as the page shows it (a hook's event with its verdict).
fn event_json(e: &cairn_core::stack::EventRecord) -> Value {
    json!({
        "event_id": e.event_id,
        "timestamp": e.timestamp,
        "logical_id": e.logical_id,
        "physical_id": e.physical_id,
        "resource_type": e.resource_type,
        "status": e.status,
        "status_reason": match &e.hook {
            Some(h) => Some(h.summary()),
            None => e.status_reason.clone(),
        },
        "hook": e.hook,
    })
}

#[derive(serde::Deserialize)]
struct PageOf {
    skip: usize,
    limit: Option<usize>,
}

/// The most events one page gives.
const EVENTS_PAGE: usize = 500;

/// A page of a stack's events, oldest first: `limit` (at most
/// [`EVENTS_PAGE`]) after the first `skip`; what "Older events" loads.
async fn events_page(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<PageOf>,
) -> Response {
    let (_, stack) = match viewed(&app, &headers, &name, false).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let limit = q.limit.unwrap_or(100).clamp(1, EVENTS_PAGE);
    match app
        .engine
        .store()
        .events_page(&stack.stack_id, q.skip, limit)
        .await
    {
        Ok(events) => Json(json!({
            "skip": q.skip,
            "events": events.iter().map(event_json).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("The events cannot be read: {e}"),
        )
            .into_response(),
    }
}

async fn events(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(from): Query<EventsFrom>,
) -> Response {
    let (_, stack) = match viewed(&app, &headers, &name, false).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let store = app.engine.store().clone();
    let stream = futures::stream::unfold(
        (store, stack.stack_id, from.from, true),
        |(store, id, seen, first)| async move {
            if !first {
                tokio::time::sleep(EVENT_POLL).await;
            }
            let new = store.events_from(&id, seen).await.unwrap_or_default();
            let next = seen + new.len();
            let batch: Vec<Result<Event, Infallible>> = new
                .iter()
                .map(|e| {
                    Ok(Event::default()
                        .event("stack-event")
                        .data(event_json(e).to_string()))
                })
                .collect();
            Some((futures::stream::iter(batch), (store, id, next, false)))
        },
    );
    use futures::StreamExt as _;
    Sse::new(stream.flatten())
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

async fn login_form(State(app): State<Arc<App>>) -> Response {
    if app.config.server.auth == ServerAuth::None {
        return (StatusCode::SEE_OTHER, [(header::LOCATION, "/console/")], "").into_response();
    }
    login_page("").into_response()
}

fn login_page(error: &str) -> Html<String> {
    page(
        "Log in",
        &format!(
            "<h1>Cairn</h1><p class=\"failed\" id=\"error\">{}</p><form method=\"post\" action=\"/console/login\"><p><label>Access key id <input name=\"access_key_id\" autocomplete=\"username\"></label></p><p><label>Secret access key <input name=\"secret_access_key\" type=\"password\" autocomplete=\"current-password\"></label></p><button>Log in</button></form>",
            escape(error)
        ),
    )
}

#[derive(serde::Deserialize)]
struct LoginForm {
    access_key_id: String,
    secret_access_key: String,
}

async fn login(
    State(app): State<Arc<App>>,
    super::Peer(peer): super::Peer,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Response {
    let attempt = session::login(&app.config.server, &f.access_key_id, &f.secret_access_key);
    let caller = super::audit::caller(
        &app.config.server,
        Some(&f.access_key_id),
        peer,
        &headers,
        true,
    );
    super::audit::record_sign_in(&app, caller, "ConsoleLogin", attempt.is_ok()).await;
    match attempt {
        Ok(token) => {
            let secure = if app.config.server.tls_cert.is_some() {
                "; Secure"
            } else {
                ""
            };
            let cookie = format!(
                "{}={token}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
                session::COOKIE,
                session::LIFETIME_SECONDS
            );
            (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, "/console/".to_string()),
                    (header::SET_COOKIE, cookie),
                ],
                "",
            )
                .into_response()
        }
        Err(why) => (StatusCode::UNAUTHORIZED, login_page(why)).into_response(),
    }
}

/// Ends the login: the cookie is cleared and the person is sent to the
/// login form (with `auth = "none"`, back to the stack list).
async fn logout(
    State(app): State<Arc<App>>,
    super::Peer(peer): super::Peer,
    headers: HeaderMap,
) -> Response {
    if let Some(Viewer::Key {
        key,
        expiry,
        session,
    }) = session::viewer(&app.config.server, &headers)
    {
        let until_ms = i64::try_from(expiry).unwrap_or(i64::MAX / 1000) * 1000;
        if let Err(e) = app.engine.store().revoke_session(&session, until_ms).await {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("The session could not be ended: the state store does not answer ({e}); log out again when /healthz says ok."),
            )
                .into_response();
        }
        let caller = super::audit::caller(&app.config.server, Some(&key), peer, &headers, true);
        super::audit::record_sign_in(&app, caller, "ConsoleLogout", true).await;
    }
    let to = match app.config.server.auth {
        ServerAuth::Sigv4 => "/console/login",
        ServerAuth::None => "/console/",
    };
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, to.to_string()),
            (header::SET_COOKIE, session::logout_cookie()),
        ],
        "",
    )
        .into_response()
}

#[derive(serde::Deserialize)]
struct ActionForm {
    #[serde(default)]
    csrf: String,
}

/// A stack's action from its page, through the API's own action:
/// `delete` (DeleteStack; the person then follows the deleted stack by its
/// id), `detect-drift`, `cancel-update` (CancelUpdateStack) or
/// `continue-rollback` (ContinueUpdateRollback, with the checked `skip`s)
/// or `rollback` (RollbackStack).
async fn stack_action(
    State(app): State<Arc<App>>,
    super::Peer(peer): super::Peer,
    headers: HeaderMap,
    Path((name, action)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let (viewer, stack) = match viewed(&app, &headers, &name, false).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let fields: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let field = |k: &'static str| {
        fields
            .iter()
            .filter(move |(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let csrf = field("csrf").next().unwrap_or_default();
    let (api, back) = match action.as_str() {
        "delete" => ("DeleteStack", &stack.stack_id),
        "detect-drift" => ("DetectStackDrift", &stack.stack_name),
        "cancel-update" => ("CancelUpdateStack", &stack.stack_name),
        "continue-rollback" => ("ContinueUpdateRollback", &stack.stack_name),
        "rollback" => ("RollbackStack", &stack.stack_name),
        _ => {
            return (
                StatusCode::NOT_FOUND,
                "delete, detect-drift, cancel-update, continue-rollback or rollback",
            )
                .into_response()
        }
    };
    let skips: Vec<(String, String)> = field("skip")
        .enumerate()
        .map(|(i, s)| (format!("ResourcesToSkip.member.{}", i + 1), s))
        .collect();
    let mut params: Vec<(&str, &str)> = vec![("StackName", &stack.stack_name)];
    if api == "ContinueUpdateRollback" {
        params.extend(skips.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    let back = format!("/console/stacks/{}", urlencode(back));
    let from = (&headers, peer);
    act(&app, (&viewer, from), &csrf, api, &params, back).await
}

/// The stack's operations, newest first: what ran, from which change set,
/// when, and how it ended.
async fn history_table(app: &App, stack: &StackRecord) -> String {
    let entries = app
        .engine
        .store()
        .history(&stack.stack_id)
        .await
        .unwrap_or_default();
    let mut rows = String::new();
    for h in entries.iter().rev() {
        let status = h.status.as_deref().unwrap_or("IN_PROGRESS");
        let _ = write!(
            rows,
            "<tr class=\"operation\"><td>{kind}</td><td>{set}</td><td>{start}</td><td>{end}</td><td class=\"status {c}\">{status}</td><td>{reason}</td></tr>",
            kind = escape(h.kind.as_str()),
            set = escape(h.change_set.as_deref().unwrap_or_default()),
            start = escape(&h.started_at),
            end = escape(h.ended_at.as_deref().unwrap_or_default()),
            c = status_class(status),
            status = escape(status),
            reason = escape(h.status_reason.as_deref().unwrap_or_default()),
        );
    }
    format!("<table id=\"history\"><tr><th>Operation</th><th>Change set</th><th>Started</th><th>Ended</th><th>Status</th><th>Reason</th></tr>{rows}</table>")
}

/// The stack's change sets, newest first, each linking to its page.
async fn change_sets_table(app: &App, stack: &StackRecord) -> String {
    let sets = app
        .engine
        .store()
        .change_sets(&stack.stack_id)
        .await
        .unwrap_or_default();
    if sets.is_empty() {
        return "<p id=\"change-sets\">None.</p>".into();
    }
    let mut rows = String::new();
    for c in sets.iter().rev() {
        let _ = write!(
            rows,
            "<tr><td><a href=\"/console/stacks/{s}/change-sets/{n}\">{name}</a></td><td>{st}</td><td>{ex}</td><td>{at}</td></tr>",
            s = escape(&urlencode(&stack.stack_name)),
            n = escape(&urlencode(&c.change_set_name)),
            name = escape(&c.change_set_name),
            st = escape(c.status.as_str()),
            ex = escape(c.execution_status.as_str()),
            at = escape(&c.created_at),
        );
    }
    format!("<table id=\"change-sets\"><tr><th>Name</th><th>Status</th><th>Execution</th><th>Created</th></tr>{rows}</table>")
}

/// The latest drift detection with each difference, and the button that
/// starts one.
async fn drift_section(app: &App, stack: &StackRecord, csrf: &str) -> String {
    let last = app
        .engine
        .store()
        .last_drift_detection(&stack.stack_id)
        .await
        .ok()
        .flatten();
    let mut out = String::new();
    match &last {
        None => out.push_str("<p id=\"drift-status\">NOT_CHECKED</p>"),
        Some(d) => {
            let text = |v: &Value, k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let _ = write!(
                out,
                "<p id=\"drift-status\">{} ({})</p><table id=\"drifts\"><tr><th>Resource</th><th>Status</th><th>Property</th><th>Expected</th><th>Actual</th></tr>",
                escape(&text(d, "StackDriftStatus")),
                escape(&text(d, "Timestamp")),
            );
            for r in d
                .get("StackResourceDrifts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let diffs: Vec<Value> = r
                    .get("PropertyDifferences")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let status = text(r, "StackResourceDriftStatus");
                if diffs.is_empty() {
                    let _ = write!(
                        out,
                        "<tr><td>{}</td><td>{}</td><td></td><td></td><td></td></tr>",
                        escape(&text(r, "LogicalResourceId")),
                        escape(&status)
                    );
                }
                for p in &diffs {
                    let _ = write!(
                        out,
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        escape(&text(r, "LogicalResourceId")),
                        escape(&status),
                        escape(&text(p, "PropertyPath")),
                        escape(&text(p, "ExpectedValue")),
                        escape(&text(p, "ActualValue")),
                    );
                }
            }
            out.push_str("</table>");
        }
    }
    let _ = write!(
        out,
        "<form id=\"detect-drift\" method=\"post\" action=\"/console/stacks/{}/detect-drift\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button>Detect drift</button></form>",
        escape(&urlencode(&stack.stack_name))
    );
    out
}

/// Checks the CSRF token, then runs the API `action` with `params` (the
/// same code as the Query API), records it in the audit trail as the
/// viewer's console action, and sends the person to `back`.
async fn act(
    app: &Arc<App>,
    (viewer, (headers, peer)): (&Viewer, (&HeaderMap, Option<std::net::SocketAddr>)),
    csrf: &str,
    action: &str,
    params: &[(&str, &str)],
    back: String,
) -> Response {
    if !session::csrf_ok(&app.config.server, &app.open_secret, viewer, csrf) {
        return (
            StatusCode::FORBIDDEN,
            "The form's CSRF token is missing or wrong: reload the stack's page and try again.",
        )
            .into_response();
    }
    let query: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish();
    let form = super::form::Form::parse(query.as_bytes(), None);
    let key = match viewer {
        Viewer::Key { key, .. } => Some(key.as_str()),
        Viewer::Open => None,
    };
    let caller = super::audit::caller(&app.config.server, key, peer, headers, true);
    let before = super::audit::stack_before(app, &form, action).await;
    let outcome = super::actions::dispatch(app, &form, action).await;
    let request_id = uuid::Uuid::new_v4().to_string();
    let request = super::audit::Request {
        caller,
        action,
        form: &form,
        request_id: &request_id,
        before,
    };
    super::audit::record(app, request, outcome.as_ref().map(|_| ())).await;
    match outcome {
        Ok(_) => (StatusCode::SEE_OTHER, [(header::LOCATION, back)], "").into_response(),
        Err(e) => (
            StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
            e.message,
        )
            .into_response(),
    }
}

/// A change set: its changes as a table, the graph with the changed
/// resources marked, and Execute / Delete.
async fn change_set_page(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path((name, set)): Path<(String, String)>,
) -> Response {
    let (viewer, stack) = match viewed(&app, &headers, &name, true).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let cs = match app
        .engine
        .store()
        .find_change_set(&stack.stack_id, &set)
        .await
    {
        Ok(Some(c)) => c,
        _ => {
            return (
                StatusCode::NOT_FOUND,
                format!("ChangeSet [{set}] does not exist"),
            )
                .into_response()
        }
    };
    let csrf = session::csrf(&app.config.server, &app.open_secret, &viewer);
    let mut rows = String::new();
    let mut marks = serde_json::Map::new();
    for c in cs.changes.as_array().into_iter().flatten() {
        let rc = &c["ResourceChange"];
        let text = |k: &str| {
            rc.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let causes: Vec<String> = rc
            .get("Details")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|d| {
                let t = &d["Target"];
                if let (Some(before), Some(after)) = (
                    t.get("BeforeValue").and_then(Value::as_str),
                    t.get("AfterValue").and_then(Value::as_str),
                ) {
                    let attribute = t.get("Attribute").and_then(Value::as_str)?;
                    return Some(format!("{attribute} {before} -> {after}"));
                }
                let name = t.get("Name").and_then(Value::as_str)?;
                Some(format!(
                    "{name} ({})",
                    t.get("RequiresRecreation")
                        .and_then(Value::as_str)
                        .unwrap_or("Never")
                ))
            })
            .collect();
        let scope: Vec<&str> = rc
            .get("Scope")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let replacement = text("Replacement");
        let _ = write!(
            rows,
            "<tr class=\"change\" data-logical-id=\"{id}\"><td>{a}</td><td>{id}</td><td>{t}</td><td class=\"replacement\">{r}</td><td>{sc}</td><td>{c}</td></tr>",
            a = escape(&text("Action")),
            id = escape(&text("LogicalResourceId")),
            t = escape(&text("ResourceType")),
            r = escape(&replacement),
            sc = escape(&scope.join(", ")),
            c = escape(&causes.join(", ")),
        );
        let mark = match (text("Action").as_str(), replacement.as_str()) {
            ("Modify", "True") => "replace",
            ("Modify", "Conditional") => "maybe-replace",
            (a, _) => match a {
                "Add" => "add",
                "Remove" => "remove",
                _ => "modify",
            },
        };
        marks.insert(text("LogicalResourceId"), Value::String(mark.into()));
    }
    let base = format!(
        "/console/stacks/{}/change-sets/{}",
        escape(&urlencode(&stack.stack_name)),
        escape(&urlencode(&cs.change_set_name))
    );
    let body = format!(
        "<p><a href=\"/console/\">Stacks</a> / <a href=\"/console/stacks/{sn}\">{name}</a></p><h1>Change set {csn}</h1><p>Status: <span class=\"status\">{st}</span>, execution: {ex} {reason}</p>\
<table id=\"changes\"><tr><th>Action</th><th>Logical id</th><th>Type</th><th>Replacement</th><th>Scope</th><th>Caused by</th></tr>{rows}</table>\
<div id=\"stack\" data-stack=\"{id}\" data-name=\"{name}\" data-marks=\"{marks}\"><svg id=\"graph\" xmlns=\"http://www.w3.org/2000/svg\"></svg><dl id=\"detail\"></dl><ul id=\"events\" hidden></ul></div>\
<form id=\"execute\" method=\"post\" action=\"{base}/execute\" onsubmit=\"return confirm('Execute change set {csn}?')\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button>Execute</button></form>\
<form id=\"delete-change-set\" method=\"post\" action=\"{base}/delete\" onsubmit=\"return confirm('Delete change set {csn}?')\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button>Delete</button></form>\
<script src=\"/console/assets/console.js\"></script>",
        sn = escape(&urlencode(&stack.stack_name)),
        name = escape(&stack.stack_name),
        csn = escape(&cs.change_set_name),
        st = escape(cs.status.as_str()),
        ex = escape(cs.execution_status.as_str()),
        reason = escape(cs.status_reason.as_deref().unwrap_or_default()),
        id = escape(&stack.stack_id),
        marks = escape(&Value::Object(marks).to_string()),
    );
    page(&cs.change_set_name, &body).into_response()
}

async fn change_set_action(
    State(app): State<Arc<App>>,
    super::Peer(peer): super::Peer,
    headers: HeaderMap,
    Path((name, set, action)): Path<(String, String, String)>,
    Form(f): Form<ActionForm>,
) -> Response {
    let (viewer, stack) = match viewed(&app, &headers, &name, false).await {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let api = match action.as_str() {
        "execute" => "ExecuteChangeSet",
        "delete" => "DeleteChangeSet",
        _ => return (StatusCode::NOT_FOUND, "execute or delete").into_response(),
    };
    let back = format!("/console/stacks/{}", urlencode(&stack.stack_name));
    act(
        &app,
        (&viewer, (&headers, peer)),
        &f.csrf,
        api,
        &[("StackName", &stack.stack_name), ("ChangeSetName", &set)],
        back,
    )
    .await
}
