//! The audit trail: one durable record per API call or console action
//! that changed something, shaped as CloudTrail's event record (the
//! `CloudTrailEvent` LookupEvents returns), so the tools that read
//! CloudTrail read Cairn's.
//!
//! The record's body is the CloudTrail JSON; the fields a query filters on
//! (time, action, key, the stack or type it touched) are kept beside it as
//! columns by the stores.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// CloudTrail's record version (major compared with ==, minor with >=).
pub const EVENT_VERSION: &str = "1.11";
/// Where the calls are recorded as coming from: CloudFormation's service.
pub const EVENT_SOURCE: &str = "cloudformation.amazonaws.com";
/// How long records are kept unless `[audit] keep_days` says otherwise
/// (CloudTrail's LookupEvents window).
pub const DEFAULT_KEEP_DAYS: u64 = 90;
/// The resource type of a record about a stack.
pub const STACK_RESOURCE: &str = "AWS::CloudFormation::Stack";
/// The resource type of a record about a registry type.
pub const TYPE_RESOURCE: &str = "AWS::CloudFormation::Type";

/// One recorded call. `seq` is the store's order (0 until stored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub seq: i64,
    pub event_id: String,
    /// When the call was answered (Unix milliseconds).
    pub event_time_ms: i64,
    /// The action (`CreateStack`, …).
    pub event_name: String,
    /// The access key that signed the call (none with `auth = "none"`).
    pub access_key: Option<String>,
    /// The key's name (`[server.access_keys.K] name`).
    pub username: Option<String>,
    /// [`STACK_RESOURCE`] or [`TYPE_RESOURCE`], when the call named one.
    pub resource_type: Option<String>,
    /// The stack's or type's name.
    pub resource_name: Option<String>,
    /// The stack's id, when the stack was found.
    pub stack_id: Option<String>,
    pub request_id: String,
    pub error_code: Option<String>,
    /// The CloudTrail record.
    pub body: Value,
}

/// Who made a call and from where.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caller {
    pub access_key: Option<String>,
    pub username: Option<String>,
    pub source_ip: String,
    pub user_agent: String,
    /// From the console (CloudTrail's `AwsConsoleAction`) rather than the API.
    pub console: bool,
}

/// What a call was and how it ended, for [`AuditRecord::new`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditCall {
    pub event_name: String,
    pub event_time_ms: i64,
    pub request_id: String,
    pub event_id: String,
    /// Already masked: NoEcho values and secrets replaced.
    pub request_parameters: Value,
    pub response_elements: Option<Value>,
    pub resource_type: Option<String>,
    pub resource_name: Option<String>,
    pub stack_id: Option<String>,
    pub error: Option<(String, String)>,
    /// A console sign-in or sign-out (CloudTrail's `AwsConsoleSignIn`).
    pub sign_in: bool,
    pub region: String,
    pub account_id: String,
}

impl AuditRecord {
    /// The record of `call` made by `caller`, its body CloudTrail's.
    pub fn new(caller: &Caller, call: AuditCall) -> AuditRecord {
        let identity = match &caller.access_key {
            Some(key) => json!({
                "type": "IAMUser",
                "principalId": key,
                "arn": format!("arn:aws:iam::{}:user/{}", call.account_id, caller.username.as_deref().unwrap_or(key)),
                "accountId": call.account_id,
                "accessKeyId": key,
                "userName": caller.username.clone().unwrap_or_else(|| key.clone()),
            }),
            // `auth = "none"`: nobody was asked who they are.
            None => json!({ "type": "Anonymous", "accountId": call.account_id }),
        };
        let mut body = Map::new();
        body.insert("eventVersion".into(), json!(EVENT_VERSION));
        body.insert("userIdentity".into(), identity);
        body.insert("eventTime".into(), json!(iso_seconds(call.event_time_ms)));
        body.insert("eventSource".into(), json!(EVENT_SOURCE));
        body.insert("eventName".into(), json!(call.event_name));
        body.insert("awsRegion".into(), json!(call.region));
        body.insert("sourceIPAddress".into(), json!(caller.source_ip));
        body.insert("userAgent".into(), json!(caller.user_agent));
        if let Some((code, message)) = &call.error {
            body.insert("errorCode".into(), json!(code));
            body.insert("errorMessage".into(), json!(message));
        }
        body.insert("requestParameters".into(), call.request_parameters);
        body.insert(
            "responseElements".into(),
            call.response_elements.unwrap_or(Value::Null),
        );
        body.insert("requestID".into(), json!(call.request_id));
        body.insert("eventID".into(), json!(call.event_id));
        body.insert("readOnly".into(), json!(false));
        if let (Some(kind), Some(name)) = (&call.resource_type, &call.resource_name) {
            let arn = call.stack_id.clone().unwrap_or_else(|| name.clone());
            body.insert(
                "resources".into(),
                json!([{ "ARN": arn, "accountId": call.account_id, "type": kind }]),
            );
        }
        body.insert(
            "eventType".into(),
            json!(match (call.sign_in, caller.console) {
                (true, _) => "AwsConsoleSignIn",
                (false, true) => "AwsConsoleAction",
                (false, false) => "AwsApiCall",
            }),
        );
        body.insert("managementEvent".into(), json!(true));
        body.insert("recipientAccountId".into(), json!(call.account_id));
        body.insert("eventCategory".into(), json!("Management"));
        AuditRecord {
            seq: 0,
            event_id: call.event_id,
            event_time_ms: call.event_time_ms,
            event_name: call.event_name,
            access_key: caller.access_key.clone(),
            username: caller.username.clone(),
            resource_type: call.resource_type,
            resource_name: call.resource_name,
            stack_id: call.stack_id,
            request_id: call.request_id,
            error_code: call.error.map(|(code, _)| code),
            body: Value::Object(body),
        }
    }

    /// Whether the record is about the stack named or identified by `stack`.
    pub fn is_about_stack(&self, stack: &str) -> bool {
        self.resource_type.as_deref() == Some(STACK_RESOURCE)
            && (self.resource_name.as_deref() == Some(stack)
                || self.stack_id.as_deref() == Some(stack))
    }
}

/// What a reading of the trail asks for; every filter given must hold.
/// Records come newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditQuery {
    /// A stack's name or id.
    pub stack: Option<String>,
    pub access_key: Option<String>,
    pub username: Option<String>,
    pub event_name: Option<String>,
    pub event_id: Option<String>,
    pub resource_type: Option<String>,
    /// A stack's or type's name, or a stack's id.
    pub resource_name: Option<String>,
    /// At or after (Unix ms).
    pub since_ms: Option<i64>,
    /// At or before (Unix ms).
    pub until_ms: Option<i64>,
    /// Only records about these stacks (a key limited to them).
    pub only_stacks: Option<Vec<String>>,
    /// Only records older than this `seq` (the next page).
    pub before_seq: Option<i64>,
    /// At most this many (0: no limit).
    pub limit: usize,
}

impl AuditQuery {
    /// Whether `r` passes every filter but the paging ones; what the stores'
    /// SQL does, for the in-memory store and the tests.
    pub fn matches(&self, r: &AuditRecord) -> bool {
        let same = |want: &Option<String>, have: &Option<String>| {
            want.as_ref().is_none_or(|w| have.as_ref() == Some(w))
        };
        self.stack.as_ref().is_none_or(|s| r.is_about_stack(s))
            && same(&self.access_key, &r.access_key)
            && same(&self.username, &r.username)
            && self.event_name.as_ref().is_none_or(|e| *e == r.event_name)
            && self.event_id.as_ref().is_none_or(|e| *e == r.event_id)
            && same(&self.resource_type, &r.resource_type)
            && self.resource_name.as_ref().is_none_or(|n| {
                r.resource_name.as_ref() == Some(n) || r.stack_id.as_ref() == Some(n)
            })
            && self.since_ms.is_none_or(|t| r.event_time_ms >= t)
            && self.until_ms.is_none_or(|t| r.event_time_ms <= t)
            && self.only_stacks.as_ref().is_none_or(|names| {
                r.resource_type.as_deref() == Some(STACK_RESOURCE)
                    && r.resource_name.as_ref().is_some_and(|n| names.contains(n))
            })
            && self.before_seq.is_none_or(|s| r.seq < s)
    }
}

/// CloudTrail's `eventTime`: UTC to the second.
pub fn iso_seconds(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => format!("{t:.0}"),
        Err(_) => String::new(),
    }
}

/// The value a masked parameter or secret is recorded as (what
/// DescribeStacks shows for a NoEcho parameter).
pub const MASKED: &str = "****";

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> AuditCall {
        AuditCall {
            event_name: "CreateStack".into(),
            event_time_ms: 1_795_000_000_123,
            request_id: "r-1".into(),
            event_id: "e-1".into(),
            request_parameters: json!({"stackName": "web"}),
            resource_type: Some(STACK_RESOURCE.into()),
            resource_name: Some("web".into()),
            stack_id: Some("arn:aws:cloudformation:us-east-1:123456789012:stack/web/1".into()),
            region: "us-east-1".into(),
            account_id: "123456789012".into(),
            ..AuditCall::default()
        }
    }

    #[test]
    fn a_record_is_cloudtrails_with_the_key_and_the_stack() {
        let caller = Caller {
            access_key: Some("AKIDOPS".into()),
            username: Some("ops".into()),
            source_ip: "127.0.0.1".into(),
            user_agent: "Boto3/1.35".into(),
            console: false,
        };
        let r = AuditRecord::new(&caller, call());
        assert_eq!(r.body["eventTime"], "2026-11-18T11:06:40Z");
        assert_eq!(r.body["userIdentity"]["accessKeyId"], "AKIDOPS");
        assert_eq!(r.body["userIdentity"]["userName"], "ops");
        assert_eq!(r.body["eventType"], "AwsApiCall");
        assert_eq!(r.body["sourceIPAddress"], "127.0.0.1");
        assert_eq!(
            r.body["resources"][0]["ARN"],
            "arn:aws:cloudformation:us-east-1:123456789012:stack/web/1"
        );
        assert!(r.body.get("errorCode").is_none());
        assert!(r.is_about_stack("web"));
        assert!(r.is_about_stack("arn:aws:cloudformation:us-east-1:123456789012:stack/web/1"));
        assert!(!r.is_about_stack("db"));
    }

    #[test]
    fn queries_filter_by_every_field_given() {
        let mut r = AuditRecord::new(
            &Caller {
                access_key: Some("AKID".into()),
                console: true,
                ..Caller::default()
            },
            AuditCall {
                error: Some(("ValidationError".into(), "no".into())),
                ..call()
            },
        );
        r.seq = 7;
        assert_eq!(r.body["eventType"], "AwsConsoleAction");
        assert_eq!(r.body["errorCode"], "ValidationError");
        let all = AuditQuery::default();
        assert!(all.matches(&r));
        let q = |f: fn(&mut AuditQuery)| {
            let mut q = AuditQuery::default();
            f(&mut q);
            q.matches(&r)
        };
        assert!(q(|q| q.stack = Some("web".into())));
        assert!(!q(|q| q.stack = Some("db".into())));
        assert!(q(|q| q.access_key = Some("AKID".into())));
        assert!(!q(|q| q.access_key = Some("OTHER".into())));
        assert!(q(|q| q.only_stacks = Some(vec!["web".into()])));
        assert!(!q(|q| q.only_stacks = Some(vec!["db".into()])));
        assert!(q(|q| q.since_ms = Some(1_795_000_000_000)));
        assert!(!q(|q| q.since_ms = Some(1_795_000_000_124)));
        assert!(!q(|q| q.until_ms = Some(1_795_000_000_000)));
        assert!(q(|q| q.before_seq = Some(8)));
        assert!(!q(|q| q.before_seq = Some(7)));
        assert!(q(|q| q.resource_name = Some(
            "arn:aws:cloudformation:us-east-1:123456789012:stack/web/1".into()
        )));
    }
}
