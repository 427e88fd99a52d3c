//! The audit trail's writing side: every API call and console action that
//! changes something becomes a CloudTrail-shaped record in the state
//! ([`record`]), with the caller's key, address and user agent, and its
//! request parameters with NoEcho values and secrets hidden.

use std::sync::Arc;

use cairn_core::audit::{AuditCall, AuditRecord, Caller, STACK_RESOURCE, TYPE_RESOURCE};
use cairn_core::config::ServerConfig;
use serde_json::{json, Map, Value};

use super::form::Form;
use super::{ApiError, App};

/// What CloudTrail writes in place of a sensitive value.
pub const HIDDEN: &str = "HIDDEN_DUE_TO_SECURITY_REASONS";

/// Form members whose whole value is hidden: a type's configuration holds
/// its credentials.
const SECRET_MEMBERS: &[&str] = &["Configuration"];

/// Members left out (the action and the protocol's version), and the
/// template itself, recorded by its size and digest instead.
const LEFT_OUT: &[&str] = &["Action", "Version", "TemplateBody"];

/// Whether `action` only reads (not recorded, as CloudTrail's read-only
/// management events are not by default).
pub fn read_only(action: &str) -> bool {
    [
        "Describe",
        "List",
        "Get",
        "BatchDescribe",
        "Validate",
        "Estimate",
    ]
    .iter()
    .any(|p| action.starts_with(p))
        || matches!(
            action,
            "CairnDescribeStackHistory" | "CairnWaitForStackEvents" | "LookupEvents" | ""
        )
}

/// The caller of a request: the key's name from the configuration, the
/// peer's address.
pub fn caller(
    server: &ServerConfig,
    key: Option<&str>,
    peer: Option<std::net::SocketAddr>,
    headers: &axum::http::HeaderMap,
    console: bool,
) -> Caller {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    Caller {
        access_key: key.map(str::to_string),
        username: key.map(|k| {
            server
                .access_keys
                .get(k)
                .and_then(|a| a.name.clone())
                .unwrap_or_else(|| k.to_string())
        }),
        source_ip: peer.map(|p| p.ip().to_string()).unwrap_or_default(),
        user_agent: header("user-agent"),
        console,
    }
}

/// The names of the template's NoEcho (HOT: `hidden`) parameters, or
/// `None` when the text cannot be read.
fn no_echo_of(template: &str) -> Option<Vec<String>> {
    let (doc, _) = cairn_core::template::yaml::parse(template).ok()?;
    let (section, flag) = if doc.get("heat_template_version").is_some() {
        ("parameters", "hidden")
    } else {
        ("Parameters", "NoEcho")
    };
    let declared = doc.get(section).and_then(Value::as_object);
    Some(
        declared
            .into_iter()
            .flatten()
            .filter(|(_, d)| {
                matches!(d.get(flag), Some(Value::Bool(true)))
                    || d.get(flag)
                        .and_then(Value::as_str)
                        .is_some_and(|s| s.eq_ignore_ascii_case("true"))
            })
            .map(|(name, _)| name.clone())
            .collect(),
    )
}

/// `Parameters.member.1.ParameterKey` → `parameters[0].parameterKey`:
/// the Query form as CloudTrail's requestParameters (camelCase members,
/// lists as arrays), with `hidden` parameters' values and the secret
/// members replaced by [`HIDDEN`]; `hidden` `None` hides every
/// parameter's value (nothing says which are NoEcho).
pub fn request_parameters(form: &Form, hidden: Option<&[String]>) -> Value {
    let mut root = Value::Object(Map::new());
    for (key, value) in form.fields() {
        if LEFT_OUT.contains(&key) {
            continue;
        }
        let value = if SECRET_MEMBERS.contains(&key) {
            HIDDEN.to_string()
        } else {
            without_url_secrets(value)
        };
        let parts: Vec<&str> = key.split('.').collect();
        insert(&mut root, &parts, value);
    }
    if let Some(body) = form.get("TemplateBody") {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(body.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        root["templateBody"] = json!({ "bytes": body.len(), "sha256": hex });
    }
    if let Some(params) = root.get_mut("parameters").and_then(Value::as_array_mut) {
        for p in params.iter_mut().filter_map(Value::as_object_mut) {
            let name = p.get("parameterKey").and_then(Value::as_str).unwrap_or("");
            let hide = hidden.is_none_or(|h| h.iter().any(|n| n == name));
            if hide && p.contains_key("parameterValue") {
                p.insert("parameterValue".into(), json!(HIDDEN));
            }
        }
    }
    root
}

/// A webhook URL (a notification target, a rollback trigger's alert)
/// without what may be a credential: its user and password, and its
/// query (a function key, a token). Other values as given.
fn without_url_secrets(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_string();
    };
    if !matches!(scheme, "http" | "https") {
        return value.to_string();
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let path = match path.split_once('?') {
        Some((p, _)) => format!("{p}?{HIDDEN}"),
        None => path.to_string(),
    };
    format!("{scheme}://{host}{path}")
}

/// Puts `value` at the form member's path: `member.N` is the list's N-th
/// item; every other part a camelCase key.
fn insert(at: &mut Value, parts: &[&str], value: String) {
    let Some((first, rest)) = parts.split_first() else {
        *at = Value::String(value);
        return;
    };
    if *first == "member" {
        let Some((index, rest)) = rest.split_first() else {
            return;
        };
        let Ok(n) = index.parse::<usize>() else {
            return;
        };
        if !at.is_array() {
            *at = Value::Array(Vec::new());
        }
        if let Value::Array(items) = at {
            let i = n.saturating_sub(1);
            while items.len() <= i {
                items.push(Value::Null);
            }
            insert(&mut items[i], rest, value);
        }
        return;
    }
    let mut name = first.to_string();
    if let Some(c) = name.get_mut(0..1) {
        c.make_ascii_lowercase();
    }
    if !at.is_object() {
        *at = Value::Object(Map::new());
    }
    if let Value::Object(map) = at {
        let slot = map.entry(name).or_insert(Value::Null);
        // `Tags=` (an empty list, as botocore writes one).
        if rest.is_empty() && value.is_empty() && slot.is_null() {
            *slot = Value::Array(Vec::new());
            return;
        }
        insert(slot, rest, value);
    }
}

/// The stack's name in a StackName member (a name, or a stack ARN).
fn stack_name(given: &str) -> String {
    given
        .split_once(":stack/")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or(given)
        .to_string()
}

/// What the call touched: a stack (by StackName) or a registry type.
fn touched(form: &Form) -> Option<(&'static str, String)> {
    if let Some(name) = form.get("StackName") {
        return Some((STACK_RESOURCE, stack_name(name)));
    }
    form.get("TypeName")
        .or_else(|| form.get("Arn"))
        .or_else(|| form.get("TypeArn"))
        .map(|t| (TYPE_RESOURCE, t.to_string()))
}

/// The stack a request names, if it is known yet (before the call, so a
/// deleted stack is still found by its name).
pub async fn stack_before(app: &App, form: &Form, action: &str) -> Option<(String, Vec<String>)> {
    if read_only(action) {
        return None;
    }
    let name = form.get("StackName")?;
    let stack = app.engine.store().find_stack(name).await.ok()??;
    Some((stack.stack_id, stack.no_echo))
}

/// One request to record.
pub struct Request<'a> {
    pub caller: Caller,
    pub action: &'a str,
    pub form: &'a Form,
    pub request_id: &'a str,
    /// The stack's id and NoEcho parameters before the call.
    pub before: Option<(String, Vec<String>)>,
}

/// Records a call that changed something (or was refused trying), durably,
/// before it is answered. A trail that cannot be written is logged and
/// counted; the call's own outcome stands.
pub async fn record(app: &Arc<App>, r: Request<'_>, outcome: Result<(), &ApiError>) {
    if read_only(r.action) {
        return;
    }
    let touched = touched(r.form);
    // The stack after the call (a new one, or the new template's NoEcho).
    let mut stack = r.before.clone();
    if touched.as_ref().is_some_and(|(t, _)| *t == STACK_RESOURCE) {
        let id = stack.as_ref().map(|(id, _)| id.clone());
        let name = id.or_else(|| r.form.get("StackName").map(str::to_string));
        if let Some(name) = name {
            if let Ok(Some(s)) = app.engine.store().find_stack(&name).await {
                stack = Some((s.stack_id, s.no_echo));
            }
        }
    }
    // Which parameters are NoEcho: the template sent, else the stack's.
    let hidden = match r.form.get("TemplateBody") {
        Some(body) => no_echo_of(body),
        None => stack.as_ref().map(|(_, n)| n.clone()),
    };
    let stack_id = stack.map(|(id, _)| id);
    let identity = &app.config.identity;
    let call = AuditCall {
        event_name: r.action.to_string(),
        event_time_ms: now_ms(),
        request_id: r.request_id.to_string(),
        event_id: uuid::Uuid::new_v4().to_string(),
        request_parameters: request_parameters(r.form, hidden.as_deref()),
        response_elements: match (&outcome, &stack_id) {
            (Ok(()), Some(id)) if touched.as_ref().is_some_and(|(t, _)| *t == STACK_RESOURCE) => {
                Some(json!({ "stackId": id }))
            }
            _ => None,
        },
        resource_type: touched.as_ref().map(|(t, _)| t.to_string()),
        resource_name: touched.map(|(_, n)| n),
        stack_id,
        error: outcome
            .err()
            .map(|e| (e.code.to_string(), e.message.clone())),
        sign_in: false,
        region: identity.region.clone(),
        account_id: identity.account_id.clone(),
    };
    keep(app, AuditRecord::new(&r.caller, call)).await;
}

/// Records a console sign-in (`ConsoleLogin`, successful or not) or
/// sign-out, as CloudTrail's `AwsConsoleSignIn` events: the key given,
/// never the secret.
pub async fn record_sign_in(app: &Arc<App>, caller: Caller, event_name: &str, success: bool) {
    let identity = &app.config.identity;
    let outcome = if success { "Success" } else { "Failure" };
    let call = AuditCall {
        event_name: event_name.to_string(),
        event_time_ms: now_ms(),
        request_id: uuid::Uuid::new_v4().to_string(),
        event_id: uuid::Uuid::new_v4().to_string(),
        request_parameters: Value::Null,
        response_elements: Some(json!({ event_name: outcome })),
        error: (!success).then(|| {
            (
                "AccessDenied".to_string(),
                "Failed authentication".to_string(),
            )
        }),
        sign_in: true,
        region: identity.region.clone(),
        account_id: identity.account_id.clone(),
        ..AuditCall::default()
    };
    keep(app, AuditRecord::new(&caller, call)).await;
}

/// Writes `record`; a trail that cannot be written is logged and counted.
async fn keep(app: &Arc<App>, record: AuditRecord) {
    match app.engine.store().add_audit(&record).await {
        Ok(_) => app.metrics.audit_recorded(true),
        Err(e) => {
            app.metrics.audit_recorded(false);
            tracing::error!(
                action = %record.event_name,
                request_id = %record.request_id,
                "the audit record of this call could not be written: {e}"
            );
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_becomes_cloudtrails_request_parameters_with_no_echo_hidden() {
        let form = Form::parse(
            b"Action=CreateStack&Version=2010-05-15&StackName=web&TemplateBody=Parameters%3A%0A  Pw%3A%0A    Type%3A+String%0A    NoEcho%3A+true%0A&Parameters.member.1.ParameterKey=Pw&Parameters.member.1.ParameterValue=hunter2&Parameters.member.2.ParameterKey=Size&Parameters.member.2.ParameterValue=3&Capabilities.member.1=CAPABILITY_IAM&Tags=",
            None,
        );
        let hidden = no_echo_of(form.get("TemplateBody").unwrap());
        assert_eq!(hidden.as_deref(), Some(&["Pw".to_string()][..]));
        let p = request_parameters(&form, hidden.as_deref());
        assert_eq!(p["stackName"], "web");
        assert_eq!(
            p["parameters"],
            json!([
                {"parameterKey": "Pw", "parameterValue": HIDDEN},
                {"parameterKey": "Size", "parameterValue": "3"}
            ])
        );
        assert_eq!(p["capabilities"], json!(["CAPABILITY_IAM"]));
        assert_eq!(p["tags"], json!([]));
        assert_eq!(p["templateBody"]["bytes"], 52);
        assert!(p.get("action").is_none() && p.get("version").is_none());
        // Nothing says which are NoEcho: every value is hidden.
        let p = request_parameters(&form, None);
        assert_eq!(p["parameters"][1]["parameterValue"], HIDDEN);
        assert!(!p.to_string().contains("hunter2"));
    }

    #[test]
    fn a_type_configuration_is_hidden_and_hot_hidden_parameters_are_no_echo() {
        let form = Form::parse(
            b"Action=SetTypeConfiguration&TypeName=Org%3A%3AA%3A%3AB&Configuration=%7B%22Token%22%3A%22t0ps3cret%22%7D",
            None,
        );
        let p = request_parameters(&form, Some(&[]));
        assert_eq!(p["configuration"], HIDDEN);
        assert_eq!(
            touched(&form),
            Some((TYPE_RESOURCE, "Org::A::B".to_string()))
        );
        assert_eq!(
            no_echo_of("heat_template_version: 2018-08-31\nparameters:\n  pw: {type: string, hidden: true}\n  n: {type: number}\n"),
            Some(vec!["pw".to_string()])
        );
        assert_eq!(no_echo_of("{not yaml: ["), None);
    }

    #[test]
    fn webhook_urls_lose_their_credentials_and_queries() {
        let form = Form::parse(
            b"Action=UpdateStack&StackName=web&NotificationARNs.member.1=https%3A%2F%2Fops%3Apw%40hooks.example%2Fin%3Ftoken%3Ds3cret&NotificationARNs.member.2=http%3A%2F%2F127.0.0.1%3A9%2F",
            None,
        );
        let p = request_parameters(&form, Some(&[]));
        assert_eq!(
            p["notificationARNs"],
            json!([
                format!("https://hooks.example/in?{HIDDEN}"),
                "http://127.0.0.1:9/"
            ])
        );
        assert_eq!(p["stackName"], "web");
    }

    #[test]
    fn reads_are_not_recorded_and_stack_arns_are_named() {
        assert!(read_only("DescribeStacks"));
        assert!(read_only("ListStacks"));
        assert!(read_only("GetTemplate"));
        assert!(read_only("ValidateTemplate"));
        assert!(!read_only("CreateStack"));
        assert!(!read_only("DetectStackDrift"));
        assert!(!read_only("SetTypeConfiguration"));
        assert_eq!(
            stack_name("arn:aws:cloudformation:us-east-1:123456789012:stack/web/abc-1"),
            "web"
        );
        assert_eq!(stack_name("web"), "web");
    }
}
