//! Stack notifications (CloudFormation's `NotificationARNs`): where a
//! stack's events are sent, and what each delivery says. CloudFormation
//! publishes to SNS topics; Cairn POSTs to webhook URLs, with the fields
//! of CloudFormation's SNS message as JSON, and the message's text block
//! itself (`Message`) for consumers that parse it.
//! Pure: checking targets and shaping messages; the engine delivers.

use serde_json::{json, Value};

use crate::stack::EventRecord;

/// At most this many targets per stack (CloudFormation's limit).
pub const MAX_TARGETS: usize = 5;

/// CloudFormation's SNS subject, kept as the message's `Subject`.
pub const SUBJECT: &str = "AWS CloudFormation Notification";

/// Why `NotificationARNs` cannot be taken (CloudFormation's text where it
/// has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("1 validation error detected: Value at 'notificationARNs' failed to satisfy constraint: Member must have length less than or equal to {MAX_TARGETS}")]
    TooMany,
    #[error("Notification target {0} is not a webhook URL: Cairn sends a stack's events to http:// or https:// URLs (there are no SNS topics here)")]
    NotAWebhook(String),
    #[error("Notification target {0} is listed twice: list each target once")]
    ListedTwice(String),
}

/// `NotificationARNs` as given: each a webhook URL, at most 5.
pub fn check_targets(targets: &[String]) -> Result<(), TargetError> {
    if targets.len() > MAX_TARGETS {
        return Err(TargetError::TooMany);
    }
    if let Some(t) = targets
        .iter()
        .find(|t| !(t.starts_with("http://") || t.starts_with("https://")))
    {
        return Err(TargetError::NotAWebhook(t.clone()));
    }
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].contains(t) {
            return Err(TargetError::ListedTwice(t.clone()));
        }
    }
    Ok(())
}

/// The JSON a target receives for `e`: CloudFormation's SNS message
/// fields (`Namespace` is the account id), `Subject`, and `Message`, the
/// SNS text block (`Key='value'` lines in CloudFormation's order).
pub fn message(e: &EventRecord, account_id: &str) -> Value {
    let properties = e.properties.clone().unwrap_or_else(|| "null".into());
    let fields: [(&str, &str); 12] = [
        ("StackId", &e.stack_id),
        ("Timestamp", &e.timestamp),
        ("EventId", &e.event_id),
        ("LogicalResourceId", &e.logical_id),
        ("Namespace", account_id),
        ("PhysicalResourceId", &e.physical_id),
        ("ResourceProperties", &properties),
        ("ResourceStatus", e.status.as_str()),
        (
            "ResourceStatusReason",
            e.status_reason.as_deref().unwrap_or_default(),
        ),
        ("ResourceType", &e.resource_type),
        ("StackName", &e.stack_name),
        ("ClientRequestToken", "null"),
    ];
    let text: String = fields.iter().map(|(k, v)| format!("{k}='{v}'\n")).collect();
    let mut m: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    m.insert("Subject".into(), json!(SUBJECT));
    m.insert("Message".into(), json!(text));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_webhook_urls_at_most_five() {
        assert!(check_targets(&["https://hooks.example/cfn".into()]).is_ok());
        let e = check_targets(&["arn:aws:sns:us-east-1:1:topic".into()]).unwrap_err();
        assert_eq!(
            e,
            TargetError::NotAWebhook("arn:aws:sns:us-east-1:1:topic".into())
        );
        assert!(e
            .to_string()
            .starts_with("Notification target arn:aws:sns:us-east-1:1:topic is not a webhook URL"));
        let six: Vec<String> = (0..6).map(|i| format!("http://h/{i}")).collect();
        assert_eq!(check_targets(&six).unwrap_err().to_string(), "1 validation error detected: Value at 'notificationARNs' failed to satisfy constraint: Member must have length less than or equal to 5");
        assert_eq!(
            check_targets(&["http://h".into(), "http://h".into()]),
            Err(TargetError::ListedTwice("http://h".into()))
        );
    }

    #[test]
    fn a_message_has_the_sns_fields_and_text() {
        let e = EventRecord {
            hook: None,
            event_id: "e1".into(),
            stack_id: "arn:s".into(),
            stack_name: "st".into(),
            logical_id: "A".into(),
            physical_id: "p".into(),
            resource_type: "T::X".into(),
            timestamp: "2026-11-26T00:00:00.000Z".into(),
            status: crate::stack::EventStatus::CreateComplete,
            status_reason: None,
            properties: Some("{\"V\":1}".into()),
        };
        let m = message(&e, "123456789012");
        assert_eq!(m["EventId"], "e1");
        assert_eq!(m["Namespace"], "123456789012");
        assert_eq!(m["ResourceProperties"], "{\"V\":1}");
        assert_eq!(m["Subject"], SUBJECT);
        assert_eq!(
            m["Message"],
            "StackId='arn:s'\nTimestamp='2026-11-26T00:00:00.000Z'\nEventId='e1'\nLogicalResourceId='A'\nNamespace='123456789012'\nPhysicalResourceId='p'\nResourceProperties='{\"V\":1}'\nResourceStatus='CREATE_COMPLETE'\nResourceStatusReason=''\nResourceType='T::X'\nStackName='st'\nClientRequestToken='null'\n"
        );
    }
}
