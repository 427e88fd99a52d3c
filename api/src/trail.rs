//! The audit trail's reading side: CloudTrail's `LookupEvents` (JSON 1.1,
//! `X-Amz-Target: com.amazonaws.cloudtrail.v20131101.CloudTrail_20131101.LookupEvents`),
//! so boto3's `cloudtrail` client and the aws CLI's `cloudtrail
//! lookup-events` read Cairn's trail. A key limited to some stacks reads
//! only those stacks' records.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_core::audit::{AuditQuery, AuditRecord, EVENT_SOURCE};
use serde_json::{json, Value};

use super::{ApiError, App};

/// The target prefix of CloudTrail's actions.
pub const TARGET_PREFIX: &str = "com.amazonaws.cloudtrail.v20131101.CloudTrail_20131101.";

/// CloudTrail's page size: 1–50, 50 by default.
const MAX_RESULTS: usize = 50;

fn error(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status: 400,
        code,
        message: message.into(),
    }
}

/// A JSON 1.1 answer (an error's `__type` and `message`, as botocore reads
/// them).
pub fn respond(outcome: Result<Value, ApiError>, request_id: &str) -> Response {
    let (status, body) = match outcome {
        Ok(v) => (StatusCode::OK, v),
        Err(e) => (
            StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
            json!({ "__type": e.code, "message": e.message }),
        ),
    };
    (
        status,
        [
            ("content-type", "application/x-amz-json-1.1".to_string()),
            ("x-amzn-requestid", request_id.to_string()),
        ],
        body.to_string(),
    )
        .into_response()
}

/// A JSON 1.1 action: `LookupEvents` is the one served.
pub async fn dispatch(
    app: &Arc<App>,
    key: Option<&str>,
    action: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    if action != "LookupEvents" {
        return Err(ApiError {
            status: 400,
            code: "UnknownOperationException",
            message: format!("Cairn serves CloudTrail's LookupEvents only, not {action}"),
        });
    }
    let request: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| {
            error(
                "SerializationException",
                format!("the request body is not JSON: {e}"),
            )
        })?
    };
    let mut q = query(&request)?;
    // A key limited to some stacks reads only their records.
    if let Some(allowed) = key
        .and_then(|k| app.config.server.access_keys.get(k))
        .and_then(|k| k.stacks.clone())
    {
        q.only_stacks = Some(allowed);
    }
    let want = q.limit;
    q.limit = want + 1;
    let empty = request["LookupAttributes"]
        .as_array()
        .and_then(|a| a.first())
        .is_some_and(|a| {
            let value = a["AttributeValue"].as_str().unwrap_or_default();
            match a["AttributeKey"].as_str() {
                // Only calls that change something are recorded.
                Some("ReadOnly") => value == "true",
                Some("EventSource") => value != EVENT_SOURCE,
                _ => false,
            }
        });
    let mut records = if empty {
        Vec::new()
    } else {
        app.engine.store().audit_records(&q).await?
    };
    let next = (records.len() > want).then(|| {
        records.truncate(want);
        records
            .last()
            .map(|r| r.seq.to_string())
            .unwrap_or_default()
    });
    let mut answer = json!({ "Events": records.iter().map(event).collect::<Vec<_>>() });
    if let Some(token) = next {
        answer["NextToken"] = json!(token);
    }
    Ok(answer)
}

/// The query a LookupEvents request asks for, checked as CloudTrail checks
/// it.
fn query(request: &Value) -> Result<AuditQuery, ApiError> {
    let mut q = AuditQuery {
        limit: MAX_RESULTS,
        ..AuditQuery::default()
    };
    if let Some(m) = request.get("MaxResults").filter(|m| !m.is_null()) {
        q.limit = m
            .as_u64()
            .filter(|n| (1..=MAX_RESULTS as u64).contains(n))
            .ok_or_else(|| {
                error(
                    "InvalidMaxResultsException",
                    format!("MaxResults must be between 1 and {MAX_RESULTS}, not {m}"),
                )
            })? as usize;
    }
    let time = |name: &str| -> Result<Option<i64>, ApiError> {
        match request.get(name).filter(|t| !t.is_null()) {
            None => Ok(None),
            Some(t) => t
                .as_f64()
                .map(|s| Some((s * 1000.0) as i64))
                .ok_or_else(|| {
                    error(
                        "InvalidTimeRangeException",
                        format!("{name} must be a time (seconds since the epoch), not {t}"),
                    )
                }),
        }
    };
    q.since_ms = time("StartTime")?;
    q.until_ms = time("EndTime")?;
    if let (Some(a), Some(b)) = (q.since_ms, q.until_ms) {
        if a > b {
            return Err(error(
                "InvalidTimeRangeException",
                "Start time must be less than or equal to end time",
            ));
        }
    }
    if let Some(token) = request.get("NextToken").and_then(Value::as_str) {
        q.before_seq = Some(token.parse().map_err(|_| {
            error(
                "InvalidNextTokenException",
                "The NextToken is not valid: use the one the previous page gave, with the same parameters",
            )
        })?);
    }
    let attributes = match request.get("LookupAttributes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => {
            return Err(error(
                "InvalidLookupAttributesException",
                format!("LookupAttributes must be a list, not {other}"),
            ))
        }
    };
    if attributes.len() > 1 {
        return Err(error(
            "InvalidLookupAttributesException",
            "You cannot specify more than one lookup attribute.",
        ));
    }
    if let Some(a) = attributes.first() {
        let value = a["AttributeValue"].as_str().unwrap_or_default();
        if value.is_empty() || value.len() > 2000 {
            return Err(error(
                "InvalidLookupAttributesException",
                "AttributeValue must be 1 to 2000 characters long",
            ));
        }
        let value = Some(value.to_string());
        match a["AttributeKey"].as_str().unwrap_or_default() {
            "EventId" => q.event_id = value,
            "EventName" => q.event_name = value,
            "Username" => q.username = value,
            "ResourceType" => q.resource_type = value,
            "ResourceName" => q.resource_name = value,
            "AccessKeyId" => q.access_key = value,
            "ReadOnly" | "EventSource" => {}
            other => {
                return Err(error(
                    "InvalidLookupAttributesException",
                    format!("AttributeKey {other} is not one of EventId, EventName, ReadOnly, Username, ResourceType, ResourceName, EventSource, AccessKeyId"),
                ))
            }
        }
    }
    Ok(q)
}

/// One record as LookupEvents lists it.
fn event(r: &AuditRecord) -> Value {
    let mut e = json!({
        "EventId": r.event_id,
        "EventName": r.event_name,
        "ReadOnly": "false",
        "EventTime": r.event_time_ms as f64 / 1000.0,
        "EventSource": EVENT_SOURCE,
        "CloudTrailEvent": r.body.to_string(),
        "Resources": [],
    });
    if let Some(key) = &r.access_key {
        e["AccessKeyId"] = json!(key);
    }
    if let Some(user) = &r.username {
        e["Username"] = json!(user);
    }
    if let (Some(kind), Some(name)) = (&r.resource_type, &r.resource_name) {
        e["Resources"] = json!([{ "ResourceType": kind, "ResourceName": name }]);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_requests_are_checked_as_cloudtrail_checks_them() {
        let q = query(&json!({})).unwrap();
        assert_eq!(q.limit, 50);
        let q = query(&json!({
            "LookupAttributes": [{"AttributeKey": "AccessKeyId", "AttributeValue": "AKID"}],
            "StartTime": 1795000000, "EndTime": 1795000100.5, "MaxResults": 5, "NextToken": "42"
        }))
        .unwrap();
        assert_eq!(q.access_key.as_deref(), Some("AKID"));
        assert_eq!(q.since_ms, Some(1_795_000_000_000));
        assert_eq!(q.until_ms, Some(1_795_000_100_500));
        assert_eq!((q.limit, q.before_seq), (5, Some(42)));
        let refused = |r: Value| query(&r).unwrap_err();
        assert_eq!(
            refused(json!({"LookupAttributes": [
                {"AttributeKey": "EventName", "AttributeValue": "A"},
                {"AttributeKey": "EventName", "AttributeValue": "B"}]}))
            .code,
            "InvalidLookupAttributesException"
        );
        assert_eq!(
            refused(
                json!({"LookupAttributes": [{"AttributeKey": "Colour", "AttributeValue": "A"}]})
            )
            .code,
            "InvalidLookupAttributesException"
        );
        assert_eq!(
            refused(json!({"StartTime": 20, "EndTime": 10})).message,
            "Start time must be less than or equal to end time"
        );
        assert_eq!(
            refused(json!({"MaxResults": 51})).code,
            "InvalidMaxResultsException"
        );
        assert_eq!(
            refused(json!({"NextToken": "x"})).code,
            "InvalidNextTokenException"
        );
    }
}
