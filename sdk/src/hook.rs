//! Hooks: checks a platform team runs before a resource is created,
//! updated or deleted, before a stack's operation, and when a change set
//! is made (CloudFormation's Hooks). A hook implements [`Hook`]; the
//! request and its answer are CloudFormation's hook invocation request and
//! progress event, field for field, so the same JSON reaches a Lambda
//! hook's webhook, a plugin's [`Hook`], and the SDKs' hook handlers.
//!
//! A plugin serves a hook with [`export_hook!`](crate::export_hook) (its
//! type name, and how to make it); each invocation reaches
//! [`ResourceProvider::hook`](crate::ResourceProvider::hook) through the
//! same ABI as resource calls, in either isolation.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A hook's invocation (CloudFormation's hook request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRequest {
    /// One per hook and target; kept while the hook answers IN_PROGRESS.
    pub client_request_token: String,
    #[serde(default)]
    pub aws_account_id: String,
    #[serde(default)]
    pub stack_id: String,
    #[serde(default)]
    pub change_set_id: Option<String>,
    pub hook_type_name: String,
    #[serde(default)]
    pub hook_type_version: String,
    /// The hook's settings: its configuration's `Properties`.
    #[serde(default)]
    pub hook_model: Value,
    /// `CREATE_PRE_PROVISION`, `UPDATE_PRE_PROVISION` or
    /// `DELETE_PRE_PROVISION`.
    pub action_invocation_point: String,
    pub request_data: HookRequestData,
    #[serde(default)]
    pub request_context: HookRequestContext,
}

/// What the hook judges (`requestData`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRequestData {
    /// The resource type, or `STACK` / `CHANGE_SET`.
    pub target_name: String,
    /// `RESOURCE`, `STACK` or `CHANGE_SET`.
    pub target_type: String,
    /// The resource's logical id, or the stack's name.
    pub target_logical_id: String,
    /// A resource's `resourceProperties` and `previousResourceProperties`;
    /// a stack's `template`, `previousTemplate`, `parameterValues` and a
    /// change set's `changedResources`.
    #[serde(default)]
    pub target_model: Value,
    #[serde(default)]
    pub payload: Option<String>,
}

/// Which invocation this is, and the context the last IN_PROGRESS gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRequestContext {
    #[serde(default)]
    pub invocation: u32,
    #[serde(default)]
    pub callback_context: Value,
}

/// What a hook target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookTargetType {
    Resource,
    Stack,
    ChangeSet,
}

impl HookRequest {
    /// The kind of target judged.
    pub fn target_type(&self) -> HookTargetType {
        match self.request_data.target_type.as_str() {
            "STACK" => HookTargetType::Stack,
            "CHANGE_SET" => HookTargetType::ChangeSet,
            _ => HookTargetType::Resource,
        }
    }

    /// A resource target's properties as its call will send them.
    pub fn resource_properties(&self) -> Map<String, Value> {
        self.model_object("resourceProperties")
    }

    /// An update's properties before it (empty for a create or delete).
    pub fn previous_resource_properties(&self) -> Map<String, Value> {
        self.model_object("previousResourceProperties")
    }

    /// A stack or change-set target's template as it will be.
    pub fn template(&self) -> Map<String, Value> {
        self.model_object("template")
    }

    /// The callbackContext the hook's last IN_PROGRESS answer gave (`{}`
    /// at the first invocation).
    pub fn callback_context(&self) -> &Value {
        &self.request_context.callback_context
    }

    fn model_object(&self, key: &str) -> Map<String, Value> {
        self.request_data
            .target_model
            .get(key)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }
}

/// A hook's answer (CloudFormation's hook progress event).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookProgress {
    /// `SUCCESS`, `FAILED` or `IN_PROGRESS`.
    pub hook_status: String,
    /// On FAILED: `NonCompliant` (the target breaks the rule) or
    /// `InternalFailure` (the hook could not judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// On IN_PROGRESS: given back at the next invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_context: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_delay_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_request_token: Option<String>,
}

impl HookProgress {
    fn of(status: &str) -> Self {
        HookProgress {
            hook_status: status.into(),
            error_code: None,
            message: None,
            callback_context: None,
            callback_delay_seconds: None,
            client_request_token: None,
        }
    }

    /// The target may go on.
    pub fn success() -> Self {
        Self::of("SUCCESS")
    }

    /// The target breaks the hook's rule: `message` says how.
    pub fn non_compliant(message: impl Into<String>) -> Self {
        let mut p = Self::of("FAILED");
        p.error_code = Some("NonCompliant".into());
        p.message = Some(message.into());
        p
    }

    /// The hook could not judge (HOOK_FAILED).
    pub fn internal_failure(message: impl Into<String>) -> Self {
        let mut p = Self::of("FAILED");
        p.error_code = Some("InternalFailure".into());
        p.message = Some(message.into());
        p
    }

    /// Not decided yet: invoke again after `delay_seconds` with `context`.
    pub fn in_progress(context: Value, delay_seconds: i64) -> Self {
        let mut p = Self::of("IN_PROGRESS");
        p.callback_context = Some(context);
        p.callback_delay_seconds = Some(delay_seconds);
        p
    }
}

/// A hook: its verdict before each kind of action, on a resource (its
/// type in `req.request_data.target_name`), a whole stack
/// ([`HookTargetType::Stack`]) or a change set being made
/// ([`HookTargetType::ChangeSet`]). Each default lets the target through.
#[async_trait::async_trait]
pub trait Hook: Send + Sync {
    /// Before a create (a resource's, or a stack's).
    async fn pre_create(&self, _req: &HookRequest) -> HookProgress {
        HookProgress::success()
    }

    /// Before an update (in place, or a replacement's create).
    async fn pre_update(&self, _req: &HookRequest) -> HookProgress {
        HookProgress::success()
    }

    /// Before a delete.
    async fn pre_delete(&self, _req: &HookRequest) -> HookProgress {
        HookProgress::success()
    }
}

/// The answer of `hook` to `req`, by its invocation point; the request's
/// token echoed.
pub async fn dispatch(hook: &dyn Hook, req: &HookRequest) -> HookProgress {
    let mut answer = match req.action_invocation_point.as_str() {
        "CREATE_PRE_PROVISION" => hook.pre_create(req).await,
        "UPDATE_PRE_PROVISION" => hook.pre_update(req).await,
        "DELETE_PRE_PROVISION" => hook.pre_delete(req).await,
        other => HookProgress::internal_failure(format!(
            "unknown invocation point {other}: CREATE_PRE_PROVISION, UPDATE_PRE_PROVISION or DELETE_PRE_PROVISION"
        )),
    };
    if answer.client_request_token.is_none() {
        answer.client_request_token = Some(req.client_request_token.clone());
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HookServer, ResourceProvider};

    struct Mode;

    #[async_trait::async_trait]
    impl Hook for Mode {
        async fn pre_create(&self, req: &HookRequest) -> HookProgress {
            match req
                .resource_properties()
                .get("Mode")
                .and_then(Value::as_str)
            {
                Some("0600") => HookProgress::success(),
                other => HookProgress::non_compliant(format!("Mode {other:?} is not 0600")),
            }
        }
    }

    fn request(point: &str, mode: &str) -> HookRequest {
        serde_json::from_value(serde_json::json!({
            "clientRequestToken": "t-1",
            "hookTypeName": "Org::Files::Mode",
            "actionInvocationPoint": point,
            "requestData": {"targetName": "Cairn::Local::File", "targetType": "RESOURCE",
                            "targetLogicalId": "F", "targetModel": {"resourceProperties": {"Mode": mode}}},
            "requestContext": {"invocation": 1, "callbackContext": {}},
        }))
        .unwrap()
    }

    /// Runs a future that never waits (the hooks here answer at once).
    fn now<T>(f: impl std::future::Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the hook waited"),
        }
    }

    #[test]
    fn a_hook_is_answered_by_its_invocation_point_with_the_token() {
        let server = HookServer::new("Org::Files::Mode", Mode);
        let ok = now(server.hook(&request("CREATE_PRE_PROVISION", "0600"))).unwrap();
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            serde_json::json!({"hookStatus": "SUCCESS", "clientRequestToken": "t-1"})
        );
        let no = now(server.hook(&request("CREATE_PRE_PROVISION", "0644"))).unwrap();
        assert_eq!(no.error_code.as_deref(), Some("NonCompliant"));
        assert_eq!(
            no.message.as_deref(),
            Some("Mode Some(\"0644\") is not 0600")
        );
        // The default lets a delete through.
        let delete = now(server.hook(&request("DELETE_PRE_PROVISION", "0644"))).unwrap();
        assert_eq!(delete.hook_status, "SUCCESS");
        assert_eq!(server.schema()[0].type_name, "Org::Files::Mode");
    }
}
