//! Signals, the pure part: the bodies `cfn-signal`, `curl` and Heat's
//! clients send, `CreationPolicy` and `AWS::CloudFormation::WaitCondition`
//! read from a template, the schemas of the two wait condition types, and
//! the wait's outcome with CloudFormation's texts. The engine does the
//! waiting (`engine::signals`), the store keeps the signals, the callback
//! listener receives them at a handle's URL. No I/O here.

use std::time::Duration;

use std::sync::Arc;

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ErrorKind,
    PropertySchema, ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};

use crate::stack::SignalRecord;

pub use crate::template::types::{WAIT_CONDITION, WAIT_CONDITION_HANDLE};

/// CloudFormation's bound on a wait: 12 hours.
pub const MAX_WAIT: Duration = Duration::from_secs(43_200);

/// Whether the engine serves `type_name` itself (through `engine:signals`).
pub fn is_wait_condition(type_name: &str) -> bool {
    type_name == WAIT_CONDITION
}

/// The schemas of the two types.
pub fn schemas() -> Vec<ResourceSchema> {
    vec![
        ResourceSchema::new(WAIT_CONDITION_HANDLE)
            .describe("a URL that anything able to send an HTTP PUT signals (cfn-signal, curl)")
            // Heat's OS::Heat::WaitConditionHandle attributes.
            .attribute("endpoint", "the URL to signal")
            .attribute("curl_cli", "a curl command that signals (add --data-binary '{\"status\": \"SUCCESS\"}')")
            .attribute("token", "the URL's signature")
            .ref_returns("the handle's pre-signed URL"),
        ResourceSchema::new(WAIT_CONDITION)
            .describe("waits for Count success signals sent to its Handle (or, with a CreationPolicy, through SignalResource)")
            .property("Handle", PropertySchema::string().create_only())
            .property("Timeout", PropertySchema::string().create_only())
            .property("Count", PropertySchema::integer().create_only())
            .attribute("Data", "a JSON object of each signal's UniqueId and Data")
            .ref_returns("its physical name"),
    ]
}

/// A signal as sent: CloudFormation's `{"Status","Reason","UniqueId","Data"}`
/// or Heat's lower-case `{"status","reason","id","data"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub status: SignalStatus,
    pub reason: Option<String>,
    pub unique_id: String,
    pub data: Option<String>,
}

/// Why a signal, a CreationPolicy or a wait condition cannot be taken
/// (CloudFormation's and Heat's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// A signal's status, unique id or body.
    #[error("{0}")]
    InvalidSignal(String),
    /// A resource's CreationPolicy (or a group's MinSuccessfulInstancesPercent).
    #[error("{0}")]
    InvalidCreationPolicy(String),
    /// A wait condition's properties.
    #[error("{0}")]
    InvalidWaitCondition(String),
}

pub use crate::stack::SignalStatus;

impl SignalStatus {
    /// `SUCCESS` or `FAILURE` (Heat's lower case too).
    pub fn parse(text: &str) -> Result<SignalStatus, SignalError> {
        Self::parse_text(text).map_err(SignalError::InvalidSignal)
    }

    /// The checks, with their texts.
    fn parse_text(text: &str) -> Result<SignalStatus, String> {
        match text.to_ascii_uppercase().as_str() {
            "SUCCESS" => Ok(SignalStatus::Success),
            "FAILURE" => Ok(SignalStatus::Failure),
            _ => Err(format!(
                "1 validation error detected: Value '{text}' at 'status' failed to satisfy constraint: Member must satisfy enum value set: [SUCCESS, FAILURE]"
            )),
        }
    }
}

/// Checks a UniqueId as SignalResource does (1 to 64 characters).
pub fn check_unique_id(id: &str) -> Result<(), SignalError> {
    unique_id_text(id).map_err(SignalError::InvalidSignal)
}

/// The checks, with their texts.
fn unique_id_text(id: &str) -> Result<(), String> {
    if id.is_empty() || id.chars().count() > 64 {
        return Err(format!(
            "1 validation error detected: Value '{id}' at 'uniqueId' failed to satisfy constraint: Member must have length between 1 and 64"
        ));
    }
    Ok(())
}

impl Signal {
    /// Reads a body PUT to a handle's URL. `next_id` names a signal that
    /// carries no id (Heat numbers them).
    pub fn parse(body: &[u8], next_id: impl FnOnce() -> String) -> Result<Signal, SignalError> {
        Self::parse_body(body, next_id).map_err(SignalError::InvalidSignal)
    }

    /// The checks, with their texts.
    fn parse_body(body: &[u8], next_id: impl FnOnce() -> String) -> Result<Signal, String> {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            format!("the signal is not JSON ({e}); send {{\"Status\":\"SUCCESS\",\"Reason\":\"…\",\"UniqueId\":\"…\",\"Data\":\"…\"}}")
        })?;
        let Value::Object(fields) = value else {
            return Err(
                "the signal must be a JSON object with Status, Reason, UniqueId and Data".into(),
            );
        };
        let field = |upper: &str, lower: &str| -> Option<String> {
            fields
                .get(upper)
                .or_else(|| fields.get(lower))
                .and_then(|v| match v {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                })
        };
        let status = match field("Status", "status") {
            Some(s) => SignalStatus::parse_text(&s)?,
            None => return Err("the signal has no Status (SUCCESS or FAILURE)".into()),
        };
        let unique_id = field("UniqueId", "id").unwrap_or_else(next_id);
        unique_id_text(&unique_id)?;
        Ok(Signal {
            status,
            reason: field("Reason", "reason"),
            unique_id,
            data: field("Data", "data"),
        })
    }
}

/// What a resource waits for: `count` successes within `timeout`.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub count: u32,
    pub timeout: Duration,
    pub kind: WaitKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// A `CreationPolicy` `ResourceSignal`: signals name the resource.
    CreationPolicy,
    /// A group's `CreationPolicy` with `AutoScalingCreationPolicy`: its
    /// members signal the group; this percentage of `count` must succeed.
    Group { min_successful_percent: u32 },
    /// An `AWS::CloudFormation::WaitCondition` counting its handle's signals.
    WaitCondition,
}

/// A resource's `CreationPolicy.ResourceSignal`, if it has one.
pub fn creation_policy(
    policy: Option<&Value>,
    logical_id: &str,
) -> Result<Option<Wait>, SignalError> {
    creation_policy_text(policy, logical_id).map_err(SignalError::InvalidCreationPolicy)
}

/// The checks, with their texts.
fn creation_policy_text(policy: Option<&Value>, logical_id: &str) -> Result<Option<Wait>, String> {
    let Some(signal) = policy.and_then(|p| p.get("ResourceSignal")) else {
        return Ok(None);
    };
    let count = match signal.get("Count") {
        None => 1,
        Some(v) => positive_count(v).ok_or_else(|| {
            format!(
                "CreationPolicy of {logical_id}: ResourceSignal Count must be a positive integer"
            )
        })?,
    };
    let timeout = match signal.get("Timeout") {
        None => Duration::from_secs(300),
        Some(Value::String(t)) => iso_duration(t).ok_or_else(|| {
            format!("CreationPolicy of {logical_id}: ResourceSignal Timeout must be an ISO 8601 duration of the form PT#H#M#S, at most PT12H")
        })?,
        Some(_) => {
            return Err(format!(
                "CreationPolicy of {logical_id}: ResourceSignal Timeout must be an ISO 8601 duration of the form PT#H#M#S, at most PT12H"
            ))
        }
    };
    let percent = policy
        .and_then(|p| p.get("AutoScalingCreationPolicy"))
        .and_then(|a| a.get("MinSuccessfulInstancesPercent"));
    let kind = match percent {
        None => WaitKind::CreationPolicy,
        Some(v) => {
            let p = match v {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            }
            .filter(|p| *p <= 100)
            .ok_or_else(|| format!("CreationPolicy of {logical_id}: MinSuccessfulInstancesPercent must be an integer from 0 to 100"))?;
            WaitKind::Group {
                min_successful_percent: p as u32,
            }
        }
    };
    Ok(Some(Wait {
        count,
        timeout,
        kind,
    }))
}

/// A WaitCondition's own wait, from its evaluated properties (used when it
/// has no CreationPolicy).
pub fn wait_condition(properties: &Map<String, Value>) -> Result<Wait, SignalError> {
    wait_condition_text(properties).map_err(SignalError::InvalidWaitCondition)
}

/// The checks, with their texts.
fn wait_condition_text(properties: &Map<String, Value>) -> Result<Wait, String> {
    if !properties.contains_key("Handle") {
        return Err("Property Handle cannot be empty.".into());
    }
    let timeout = match properties.get("Timeout") {
        Some(v) => {
            let seconds = match v {
                Value::String(s) => s.trim().parse::<u64>().ok(),
                Value::Number(n) => n.as_u64(),
                _ => None,
            };
            match seconds {
                Some(s) if s <= MAX_WAIT.as_secs() => Duration::from_secs(s),
                Some(_) => {
                    return Err(format!(
                        "Property Timeout of a WaitCondition must be at most {} seconds",
                        MAX_WAIT.as_secs()
                    ))
                }
                None => return Err("Property Timeout must be a number of seconds".into()),
            }
        }
        None => return Err("Property Timeout cannot be empty.".into()),
    };
    let count = match properties.get("Count") {
        None => 1,
        Some(v) => positive_count(v).ok_or("Property Count must be a positive integer")?,
    };
    Ok(Wait {
        count,
        timeout,
        kind: WaitKind::WaitCondition,
    })
}

fn positive_count(v: &Value) -> Option<u32> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }?;
    u32::try_from(n).ok().filter(|n| *n > 0)
}

/// `PT#H#M#S`, at most 12 hours.
fn iso_duration(text: &str) -> Option<Duration> {
    let span: jiff::Span = text.parse().ok()?;
    if !text.starts_with("PT") || span.is_negative() {
        return None;
    }
    let seconds = span.total(jiff::Unit::Second).ok()?;
    let d = Duration::from_secs_f64(seconds.max(0.0));
    (d <= MAX_WAIT).then_some(d)
}

/// Where a wait stands, given the signals kept so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    Waiting,
    Done,
    Failed(String),
}

impl Wait {
    /// How many successes complete the wait.
    fn needed(&self) -> usize {
        match self.kind {
            // Rounded up, as a percentage of instances is.
            WaitKind::Group {
                min_successful_percent,
            } => (self.count as usize * min_successful_percent as usize).div_ceil(100),
            _ => self.count as usize,
        }
    }

    /// The wait's state after `signals`.
    pub fn progress(&self, signals: &[SignalRecord]) -> Progress {
        if let WaitKind::Group {
            min_successful_percent,
        } = self.kind
        {
            let failures = signals
                .iter()
                .filter(|s| s.status == SignalStatus::Failure)
                .count();
            if failures > self.count as usize - self.needed() {
                return Progress::Failed(format!(
                    "Received {failures} FAILURE signal(s) out of {}. Unable to satisfy {min_successful_percent}% MinSuccessfulInstancesPercent requirement",
                    self.count
                ));
            }
            return if successes(signals) >= self.needed() {
                Progress::Done
            } else {
                Progress::Waiting
            };
        }
        if let Some(f) = signals.iter().find(|s| s.status == SignalStatus::Failure) {
            return Progress::Failed(match self.kind {
                WaitKind::WaitCondition => format!(
                    "WaitCondition received failed message: '{}' for uniqueId: {}",
                    f.reason.as_deref().unwrap_or_default(),
                    f.unique_id
                ),
                _ => format!("Received FAILURE signal with UniqueId {}", f.unique_id),
            });
        }
        if successes(signals) >= self.count as usize {
            Progress::Done
        } else {
            Progress::Waiting
        }
    }

    /// Why the wait failed when its time ran out.
    pub fn timed_out(&self, signals: &[SignalRecord]) -> String {
        match self.kind {
            WaitKind::WaitCondition => format!(
                "WaitCondition timed out. Received {} conditions when expecting {}",
                successes(signals),
                self.count
            ),
            _ => format!(
                "Failed to receive {} resource signal(s) within the specified duration",
                self.needed()
            ),
        }
    }
}

fn successes(signals: &[SignalRecord]) -> usize {
    signals
        .iter()
        .filter(|s| s.status == SignalStatus::Success)
        .count()
}

/// A WaitCondition's `Data`: each success's UniqueId and Data, as a JSON
/// object in text.
pub fn data_attribute(signals: &[SignalRecord]) -> String {
    let map: Map<String, Value> = signals
        .iter()
        .filter(|s| s.status == SignalStatus::Success)
        .map(|s| {
            (
                s.unique_id.clone(),
                Value::String(s.data.clone().unwrap_or_default()),
            )
        })
        .collect();
    Value::Object(map).to_string()
}

/// The event a signal gets in the resource's stream (CreationPolicy).
pub fn event_reason(signal: &SignalRecord) -> String {
    format!(
        "Received {} signal with UniqueId {}",
        signal.status, signal.unique_id
    )
}

/// The callback listener could not be reached (or started) to sign or
/// read a handle's URL; the cause is the listener's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the callback listener cannot be reached: {0}")]
pub struct ListenerUnavailable(pub String);

/// Whose wait condition handle a `Handle` URL is: the engine asks this of
/// the process's callback listener (which signs the URLs), handed to it as
/// a value, so the engine knows no HTTP.
#[async_trait::async_trait]
pub trait HandleUrls: Send + Sync {
    /// The handle's (stack id, logical id) when `url` is a handle URL of
    /// this state, `None` when it is not, `Err` when the listener cannot be
    /// reached to tell.
    async fn handle_target(
        &self,
        url: &str,
    ) -> Result<Option<(String, String)>, ListenerUnavailable>;

    /// The signed URL of the handle `logical_id` of stack `stack_id`
    /// (its physical id), `Err` when the listener cannot be started.
    async fn handle_url(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<String, ListenerUnavailable>;
}

/// The provider behind the two wait condition types (`engine:signals`):
/// a handle is its URL; a wait condition is a name, the engine does the
/// waiting. Neither has anything outside the store to delete or drift.
pub struct SignalTypes {
    /// The process's callback listener, which a handle's URL names.
    handles: Arc<dyn HandleUrls>,
}

impl SignalTypes {
    pub fn new(handles: Arc<dyn HandleUrls>) -> SignalTypes {
        SignalTypes { handles }
    }
}

#[async_trait::async_trait]
impl ResourceProvider for SignalTypes {
    fn schema(&self) -> Vec<ResourceSchema> {
        schemas()
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let ctx = &req.context;
        let physical = if ctx.resource_type == WAIT_CONDITION_HANDLE {
            self.handles
                .handle_url(&ctx.stack_id, &ctx.logical_resource_id)
                .await
                .map_err(|e| {
                    ProviderError::new(
                        ErrorKind::InternalFailure,
                        format!("a wait condition handle needs the callback listener: {e}"),
                    )
                })?
        } else {
            format!("{}/{}", ctx.stack_id, ctx.logical_resource_id)
        };
        let mut attributes = Map::new();
        if ctx.resource_type == WAIT_CONDITION_HANDLE {
            attributes.insert("endpoint".into(), Value::String(physical.clone()));
            attributes.insert(
                "curl_cli".into(),
                Value::String(format!(
                    "curl -i -X POST -H 'Content-Type: application/json' -H 'Accept: application/json' '{physical}'"
                )),
            );
            let token = physical
                .split_once("Signature=")
                .map(|(_, s)| s.to_string())
                .unwrap_or_default();
            attributes.insert("token".into(), Value::String(token));
        }
        Ok(CreateResult {
            physical_resource_id: physical,
            attributes,
            no_echo: false,
        })
    }

    /// Every property is CreateOnly: nothing changes in place.
    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes: Map::new(),
            no_echo: false,
        })
    }

    async fn check_drift(&self, _req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(DriftResult::InSync)
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kept(id: &str, status: &str, data: &str) -> SignalRecord {
        SignalRecord {
            stack_id: "s".into(),
            logical_id: "W".into(),
            unique_id: id.into(),
            status: SignalStatus::parse(status).unwrap(),
            reason: Some("went wrong".into()),
            data: Some(data.into()),
            received_at: String::new(),
        }
    }

    #[test]
    fn reads_cfn_signal_and_heat_bodies() {
        let cfn = br#"{"Status":"SUCCESS","Reason":"Configuration Complete","UniqueId":"ID1234","Data":"done"}"#;
        let s = Signal::parse(cfn, || "1".into()).unwrap();
        assert_eq!(
            s,
            Signal {
                status: SignalStatus::Success,
                reason: Some("Configuration Complete".into()),
                unique_id: "ID1234".into(),
                data: Some("done".into())
            }
        );
        let heat = br#"{"status":"FAILURE","reason":"boom","data":"x"}"#;
        let s = Signal::parse(heat, || "3".into()).unwrap();
        assert_eq!(
            (s.status, s.unique_id.as_str()),
            (SignalStatus::Failure, "3")
        );
        assert!(
            Signal::parse(br#"{"Status":"MAYBE","UniqueId":"a"}"#, || "1".into())
                .unwrap_err()
                .to_string()
                .contains("[SUCCESS, FAILURE]")
        );
        assert!(Signal::parse(b"not json", || "1".into()).is_err());
        let long = format!(r#"{{"Status":"SUCCESS","UniqueId":"{}"}}"#, "x".repeat(65));
        assert!(Signal::parse(long.as_bytes(), || "1".into())
            .unwrap_err()
            .to_string()
            .contains("between 1 and 64"));
    }

    #[test]
    fn creation_policy_reads_count_and_timeout() {
        let p = json!({"ResourceSignal": {"Count": "3", "Timeout": "PT1M30S"}});
        let w = creation_policy(Some(&p), "R").unwrap().unwrap();
        assert_eq!((w.count, w.timeout), (3, Duration::from_secs(90)));
        assert_eq!(creation_policy(None, "R").unwrap(), None);
        let bad = json!({"ResourceSignal": {"Timeout": "PT13H"}});
        assert!(creation_policy(Some(&bad), "R")
            .unwrap_err()
            .to_string()
            .contains("PT12H"));
        let zero = json!({"ResourceSignal": {"Count": 0}});
        assert!(creation_policy(Some(&zero), "R").is_err());
    }

    #[test]
    fn wait_condition_texts_are_cloudformations() {
        let mut props = Map::new();
        props.insert("Handle".into(), json!("http://h"));
        props.insert("Timeout".into(), json!("30"));
        props.insert("Count".into(), json!(2));
        let w = wait_condition(&props).unwrap();
        assert_eq!(w.timeout, Duration::from_secs(30));
        let one = [kept("a", "SUCCESS", "1")];
        assert_eq!(w.progress(&one), Progress::Waiting);
        assert_eq!(
            w.timed_out(&one),
            "WaitCondition timed out. Received 1 conditions when expecting 2"
        );
        let two = [kept("a", "SUCCESS", "1"), kept("b", "SUCCESS", "2")];
        assert_eq!(w.progress(&two), Progress::Done);
        assert_eq!(data_attribute(&two), r#"{"a":"1","b":"2"}"#);
        let failed = [kept("a", "SUCCESS", "1"), kept("i-1", "FAILURE", "")];
        assert_eq!(
            w.progress(&failed),
            Progress::Failed(
                "WaitCondition received failed message: 'went wrong' for uniqueId: i-1".into()
            )
        );
        props.insert("Timeout".into(), json!("43201"));
        assert!(wait_condition(&props).is_err());
        let policy = Wait {
            count: 2,
            timeout: Duration::from_secs(1),
            kind: WaitKind::CreationPolicy,
        };
        assert_eq!(
            policy.timed_out(&[]),
            "Failed to receive 2 resource signal(s) within the specified duration"
        );
        assert_eq!(
            policy.progress(&failed),
            Progress::Failed("Received FAILURE signal with UniqueId i-1".into())
        );
    }

    #[test]
    fn a_group_tolerates_failures_down_to_its_percentage() {
        let p = json!({"ResourceSignal": {"Count": 4}, "AutoScalingCreationPolicy": {"MinSuccessfulInstancesPercent": 50}});
        let w = creation_policy(Some(&p), "G").unwrap().unwrap();
        let one_bad = [kept("i-1", "FAILURE", ""), kept("i-2", "SUCCESS", "")];
        assert_eq!(w.progress(&one_bad), Progress::Waiting);
        let done = [
            kept("i-1", "FAILURE", ""),
            kept("i-2", "SUCCESS", ""),
            kept("i-3", "SUCCESS", ""),
        ];
        assert_eq!(w.progress(&done), Progress::Done);
        let three_bad = [
            kept("i-1", "FAILURE", ""),
            kept("i-2", "FAILURE", ""),
            kept("i-3", "FAILURE", ""),
        ];
        assert_eq!(
            w.progress(&three_bad),
            Progress::Failed("Received 3 FAILURE signal(s) out of 4. Unable to satisfy 50% MinSuccessfulInstancesPercent requirement".into())
        );
        let all = json!({"ResourceSignal": {"Count": 1}, "AutoScalingCreationPolicy": {"MinSuccessfulInstancesPercent": 100}});
        let w = creation_policy(Some(&all), "G").unwrap().unwrap();
        assert_eq!(
            w.progress(&[kept("i-1", "FAILURE", "")]),
            Progress::Failed("Received 1 FAILURE signal(s) out of 1. Unable to satisfy 100% MinSuccessfulInstancesPercent requirement".into())
        );
    }
}
