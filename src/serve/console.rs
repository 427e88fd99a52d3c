//! The web console at `/console/`: a stack list, and a stack's page with its
//! status, parameters (NoEcho masked), outputs and tags, the resource graph
//! drawn from the template's dependencies (layered, left to right) and the
//! events as a live timeline (Server-Sent Events; node colours follow them).
//! Server-rendered HTML with one small script and stylesheet, embedded in the
//! binary. Read-only so far, and served only with `[server] auth = "none"`:
//! a console login for SigV4 keys is not done yet, so with `sigv4` every
//! console page is refused rather than opened.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use cairn_core::config::ServerAuth;
use cairn_core::graph::Graph;
use cairn_core::stack::{StackRecord, StackStatus};
use cairn_core::template::Template;
use serde_json::{json, Value};

use super::App;

const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// How often a live event stream looks for new events.
const EVENT_POLL: Duration = Duration::from_millis(250);

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/console/", get(stack_list))
        .route("/console/stacks/{name}", get(stack_page))
        .route("/console/api/stacks/{name}/graph", get(graph))
        .route("/console/api/stacks/{name}/events", get(events))
        .route("/console/assets/console.js", get(script))
        .route("/console/assets/console.css", get(style))
}

/// Every console page answers this while a login is missing.
fn refused(app: &App) -> Option<Response> {
    (app.config.server.auth != ServerAuth::None).then(|| {
        (
            StatusCode::FORBIDDEN,
            "The console is served only with [server] auth = \"none\" for now: it has no login for SigV4 access keys yet.",
        )
            .into_response()
    })
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

async fn stack_list(State(app): State<Arc<App>>, Query(q): Query<ListQuery>) -> Response {
    if let Some(r) = refused(&app) {
        return r;
    }
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
    let body = format!(
        "<h1>Stacks</h1><form method=\"get\"><input name=\"name\" placeholder=\"name contains\" value=\"{}\"> <input name=\"status\" placeholder=\"status\" value=\"{}\"> <label><input type=\"checkbox\" name=\"deleted\" value=\"1\"{}> deleted stacks</label> <button>Filter</button></form><table id=\"stacks\"><tr><th>Name</th><th>Status</th><th>Last update</th><th>Drift</th></tr>{rows}</table>",
        escape(q.name.as_deref().unwrap_or_default()),
        escape(q.status.as_deref().unwrap_or_default()),
        if with_deleted { " checked" } else { "" },
    );
    page("Stacks", &body).into_response()
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn find(app: &App, name: &str) -> Result<StackRecord, Response> {
    match app.engine.store().find_stack(name).await {
        Ok(Some(s)) => Ok(s),
        Ok(None) => Err((
            StatusCode::NOT_FOUND,
            format!("Stack with id {name} does not exist"),
        )
            .into_response()),
        Err(e) => Err((StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()),
    }
}

async fn stack_page(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = refused(&app) {
        return r;
    }
    let stack = match find(&app, &name).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let mut params = String::new();
    for (k, v) in &stack.parameters {
        let shown = if stack.no_echo.contains(k) { "****" } else { v };
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
            escape(&o.output_value)
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
    let body = format!(
        "<p><a href=\"/console/\">Stacks</a></p><h1>{name}</h1><div id=\"stack\" data-stack=\"{id}\"><p>Status: <span id=\"status\" class=\"status {c}\">{status}</span> <span id=\"reason\">{reason}</span></p>\
<h2>Resources</h2><svg id=\"graph\" xmlns=\"http://www.w3.org/2000/svg\"></svg><dl id=\"detail\"></dl>\
<h2>Events</h2><ul id=\"events\"></ul>\
<h2>Parameters</h2><table id=\"parameters\">{params}</table><h2>Outputs</h2><table id=\"outputs\">{outputs}</table><h2>Tags</h2><table id=\"tags\">{tags}</table>\
<h2>Template</h2><pre id=\"template\">{template}</pre></div><script src=\"/console/assets/console.js\"></script>",
        name = escape(&stack.stack_name),
        id = escape(&stack.stack_id),
        c = status_class(status),
        reason = escape(stack.status_reason.as_deref().unwrap_or_default()),
        template = escape(&stack.template_body),
    );
    page(&stack.stack_name, &body).into_response()
}

/// The template's resources in layers (each one after every resource it
/// depends on), with the current status of each.
async fn graph(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = refused(&app) {
        return r;
    }
    let stack = match find(&app, &name).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let graph = Template::parse_with(&stack.template_body, &stack.context)
        .and_then(|t| Graph::build(&t, &|_| None).map(|g| (t, g)));
    let (template, graph) = match graph {
        Ok(g) => g,
        Err(e) => return (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).into_response(),
    };
    let rows: BTreeMap<String, _> = app
        .engine
        .store()
        .resources(&stack.stack_id)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.logical_id.clone(), r))
        .collect();
    Json(layout(&template, &graph, &rows)).into_response()
}

fn layout(
    template: &Template,
    graph: &Graph,
    rows: &BTreeMap<String, cairn_core::stack::ResourceRecord>,
) -> Value {
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
                "type": template.resource(id).map(|r| r.type_name.as_str()).unwrap_or_default(),
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

/// The stack's events, oldest first, then each new one as it is recorded.
async fn events(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = refused(&app) {
        return r;
    }
    let stack = match find(&app, &name).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let store = app.engine.store().clone();
    let stream = futures::stream::unfold(
        (store, stack.stack_id, 0usize, true),
        |(store, id, seen, first)| async move {
            if !first {
                tokio::time::sleep(EVENT_POLL).await;
            }
            let new = store.events_from(&id, seen).await.unwrap_or_default();
            let next = seen + new.len();
            let batch: Vec<Result<Event, Infallible>> = new
                .iter()
                .map(|e| {
                    Ok(Event::default().event("stack-event").data(
                        json!({
                            "event_id": e.event_id,
                            "timestamp": e.timestamp,
                            "logical_id": e.logical_id,
                            "physical_id": e.physical_id,
                            "resource_type": e.resource_type,
                            "status": e.status,
                            "status_reason": e.status_reason,
                        })
                        .to_string(),
                    ))
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
