//! Hooks: checks a platform team makes run before a resource is created,
//! updated or deleted (CloudFormation's Hooks). The pure part: a hook's
//! definition and configuration (CloudFormation's `HookConfiguration`:
//! invocation status, target operations, failure mode, target and stack
//! filters), which targets it applies to, what its events record, and the
//! document a Guard hook's rules see.
//!
//! A hook is kept in the type registry as a HOOK type (its definition is
//! the version's handler), so every engine on a state applies it, as an
//! account's hooks apply to every stack in it.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    PropertyType, ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::words::{status_enum, UnknownWord};

/// A Guard hook defined in a template: its rules judge every target in the
/// state once it exists.
pub const GUARD_HOOK: &str = "AWS::CloudFormation::GuardHook";

/// A Lambda hook defined in a template: where CloudFormation takes a
/// Lambda function's ARN, Cairn takes a webhook's URL, POSTed
/// CloudFormation's hook request (signed like custom-resource requests).
pub const LAMBDA_HOOK: &str = "AWS::CloudFormation::LambdaHook";

/// Whether a resource type is a hook defined in a template.
pub fn is_hook_type(type_name: &str) -> bool {
    type_name == GUARD_HOOK || type_name == LAMBDA_HOOK
}

/// How many times a webhook hook is invoked for one target at most: it may
/// answer IN_PROGRESS twice, and its third answer is its verdict
/// (CloudFormation invokes a Lambda hook up to 3 times).
pub const MAX_INVOCATIONS: u32 = 3;

/// The longest reason kept of a webhook hook's `message` (CloudFormation
/// truncates it to 4096 characters).
const MAX_MESSAGE: usize = 4096;

status_enum!(
    /// Whether a hook runs.
    HookInvocationStatus {
        Enabled => "ENABLED",
        Disabled => "DISABLED",
    }
);

status_enum!(
    /// What a hook's FAILED verdict does: FAIL stops the resource (it
    /// fails, and the stack rolls back as for any failure); WARN lets it
    /// go on, the events saying so.
    FailureMode {
        Fail => "FAIL",
        Warn => "WARN",
    }
);

status_enum!(
    /// The operations a hook judges.
    TargetOperation {
        Resource => "RESOURCE",
        Stack => "STACK",
        ChangeSet => "CHANGE_SET",
        CloudControl => "CLOUD_CONTROL",
    }
);

status_enum!(
    /// A resource action a hook is invoked before.
    HookAction {
        Create => "CREATE",
        Update => "UPDATE",
        Delete => "DELETE",
    }
);

status_enum!(
    /// A hook's progress on one target, as DescribeStackEvents shows it.
    /// `HOOK_FAILED`: the hook could not give a verdict (unreachable,
    /// timed out, its rules unreadable), treated per its failure mode.
    HookStatus {
        InProgress => "HOOK_IN_PROGRESS",
        Succeeded => "HOOK_COMPLETE_SUCCEEDED",
        Failed => "HOOK_COMPLETE_FAILED",
        Error => "HOOK_FAILED",
    }
);

/// The one invocation point CloudFormation has.
pub const PRE_PROVISION: &str = "PRE_PROVISION";

impl HookAction {
    /// The handler-side invocation point (`CREATE_PRE_PROVISION`, …).
    pub fn invocation_point(self) -> String {
        format!("{}_{PRE_PROVISION}", self.as_str())
    }
}

/// Which stacks a hook applies to (`StackFilters`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StackFilters {
    /// `ALL` (every filter given must match) or `ANY` (one must).
    #[serde(default = "all")]
    pub filtering_criteria: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_names: Option<IncludeExclude>,
}

fn all() -> String {
    "ALL".into()
}

/// Names to include and to exclude.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IncludeExclude {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

/// Which targets a hook applies to (`TargetFilters`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TargetFilters {
    /// The actions (none: every one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<HookAction>,
    /// The resource types (none: every one); `*` ends a prefix
    /// (`Cairn::Local::*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invocation_points: Vec<String>,
}

/// CloudFormation's `HookConfiguration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HookConfiguration {
    #[serde(default = "enabled")]
    pub hook_invocation_status: HookInvocationStatus,
    #[serde(default = "resources")]
    pub target_operations: Vec<TargetOperation>,
    #[serde(default = "fail")]
    pub failure_mode: FailureMode,
    #[serde(default)]
    pub target_filters: TargetFilters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_filters: Option<StackFilters>,
    /// The hook's own settings (a registered hook's `typeConfiguration`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub properties: Map<String, Value>,
}

fn enabled() -> HookInvocationStatus {
    HookInvocationStatus::Enabled
}

fn resources() -> Vec<TargetOperation> {
    vec![TargetOperation::Resource]
}

fn fail() -> FailureMode {
    FailureMode::Fail
}

impl Default for HookConfiguration {
    fn default() -> Self {
        HookConfiguration {
            hook_invocation_status: enabled(),
            target_operations: resources(),
            failure_mode: fail(),
            target_filters: TargetFilters::default(),
            stack_filters: None,
            properties: Map::new(),
        }
    }
}

/// What checks a hook's targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum HookHandler {
    /// Guard rules, evaluated in the engine: their text (read once, when
    /// the hook was made) and where they were read from.
    Guard { rules: String, location: String },
    /// A webhook (a Lambda hook's function): POSTed CloudFormation's hook
    /// request, signed with the webhooks' secret; it answers with a
    /// verdict, or IN_PROGRESS and is invoked again with its
    /// callbackContext.
    Webhook { url: String },
    /// A registered HOOK package (a library made with `export_hook!`, or
    /// a webhook): the version that judges, through its provider's
    /// `hook`.
    Registered { version: String },
}

/// One invocation of a webhook hook: its `clientRequestToken` (one per
/// hook and target: kept while the hook answers IN_PROGRESS, and across a
/// crash), which invocation this is (from 1), and the `callbackContext`
/// its last IN_PROGRESS answer gave.
#[derive(Debug, Clone, Copy)]
pub struct HookInvocation<'a> {
    pub token: &'a str,
    pub invocation: u32,
    pub callback_context: Option<&'a Value>,
}

/// What a hook answered.
#[derive(Debug, Clone, PartialEq)]
pub enum HookAnswer {
    /// Its verdict (`HOOK_COMPLETE_SUCCEEDED`, `HOOK_COMPLETE_FAILED` or
    /// `HOOK_FAILED`) and why it did not succeed.
    Verdict(HookStatus, Option<String>),
    /// IN_PROGRESS: invoke it again after `delay_seconds` with
    /// `callback_context`.
    InProgress {
        callback_context: Value,
        delay_seconds: u64,
    },
}

/// What a hook judges: one resource's action, or a whole stack (its
/// operation, or a change set made for it).
#[derive(Debug, Clone, Copy)]
pub enum Judged<'a> {
    Resource(&'a HookTarget<'a>),
    Stack(&'a StackTarget<'a>),
}

/// A webhook hook's answer (`invocation`: which one it was) read: its
/// verdict, or IN_PROGRESS with what to invoke it again with. SUCCESS is
/// HOOK_COMPLETE_SUCCEEDED; FAILED with `NonCompliant` is
/// HOOK_COMPLETE_FAILED; FAILED with any other error code, an answer that
/// is not a hook response, and IN_PROGRESS at the last invocation are
/// HOOK_FAILED.
pub fn read_hook_answer(body: &[u8], invocation: u32) -> HookAnswer {
    let failed = |why: String| HookAnswer::Verdict(HookStatus::Error, Some(why));
    let answer: cairn_sdk::HookProgress = match serde_json::from_slice(body) {
        Ok(a) => a,
        Err(e) => {
            let shown: String = String::from_utf8_lossy(body).chars().take(200).collect();
            return failed(format!(
                "the hook's answer is not a hook response ({e}): {shown:?}; it answers {{\"hookStatus\": \"SUCCESS|FAILED|IN_PROGRESS\", \"errorCode\": …, \"message\": …}}"
            ));
        }
    };
    let message = || {
        answer
            .message
            .as_deref()
            .filter(|m| !m.is_empty())
            .map(|m| m.chars().take(MAX_MESSAGE).collect::<String>())
    };
    match answer.hook_status.as_str() {
        "SUCCESS" => HookAnswer::Verdict(HookStatus::Succeeded, None),
        "FAILED" => match answer.error_code.as_deref() {
            Some("NonCompliant") => HookAnswer::Verdict(
                HookStatus::Failed,
                Some(message().unwrap_or_else(|| "NonCompliant".into())),
            ),
            Some(code) => failed(match message() {
                Some(m) => format!("{code}: {m}"),
                None => code.to_string(),
            }),
            None => failed(format!(
                "the hook answered FAILED without an errorCode (NonCompliant or InternalFailure){}",
                message().map(|m| format!(": {m}")).unwrap_or_default()
            )),
        },
        "IN_PROGRESS" if invocation >= MAX_INVOCATIONS => failed(format!(
            "the hook answered IN_PROGRESS {MAX_INVOCATIONS} times: it is invoked {MAX_INVOCATIONS} times at most, the last answer must be SUCCESS or FAILED"
        )),
        "IN_PROGRESS" => HookAnswer::InProgress {
            callback_context: answer.callback_context.unwrap_or_else(|| json!({})),
            delay_seconds: answer.callback_delay_seconds.unwrap_or(0).clamp(0, 900) as u64,
        },
        other => failed(format!(
            "the hook answered hookStatus {other:?}: SUCCESS, FAILED or IN_PROGRESS"
        )),
    }
}

/// A hook as the registry keeps it (its version's handler, as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HookDefinition {
    /// Its type name (`Alias`: `Private::Guard::FileMode`).
    pub type_name: String,
    pub handler: HookHandler,
    pub configuration: HookConfiguration,
}

/// A resource a hook may judge: before its action, in a stack.
#[derive(Debug, Clone, Copy)]
pub struct HookTarget<'a> {
    pub stack_name: &'a str,
    pub stack_id: &'a str,
    pub logical_id: &'a str,
    pub type_name: &'a str,
    pub action: HookAction,
    pub properties: &'a Map<String, Value>,
    /// An update's properties before it.
    pub previous: Option<&'a Map<String, Value>>,
}

/// A whole stack a hook may judge: before its operation (STACK), or when
/// a change set is made for it (CHANGE_SET).
#[derive(Debug, Clone, Copy)]
pub struct StackTarget<'a> {
    pub operation: TargetOperation,
    pub stack_name: &'a str,
    pub stack_id: &'a str,
    pub change_set_id: Option<&'a str>,
    pub action: HookAction,
    /// The template as it will be (JSON).
    pub template: &'a Value,
    /// Its parameter values, NoEcho ones masked.
    pub parameters: &'a Map<String, Value>,
    /// An update's template before it.
    pub previous: Option<&'a Value>,
    /// A change set's changes (its `Changes`).
    pub changes: Option<&'a Value>,
}

/// One hook's verdict on a change set, kept with it (ListHookResults'
/// fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HookResult {
    pub type_name: String,
    pub status: HookStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_status_reason: Option<String>,
    pub invocation_point: String,
    pub failure_mode: FailureMode,
    pub invoked_at: String,
}

/// Whether `name` is one of `patterns` (a pattern ending in `*` is a
/// prefix).
fn matches_any(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => p == name,
    })
}

impl HookDefinition {
    /// Whether this hook judges `target`.
    pub fn applies_to(&self, target: &HookTarget<'_>) -> bool {
        let c = &self.configuration;
        let f = &c.target_filters;
        c.hook_invocation_status == HookInvocationStatus::Enabled
            && c.target_operations.contains(&TargetOperation::Resource)
            && (f.actions.is_empty() || f.actions.contains(&target.action))
            && (f.target_names.is_empty() || matches_any(&f.target_names, target.type_name))
            && (f.invocation_points.is_empty()
                || f.invocation_points.iter().any(|p| p == PRE_PROVISION))
            && c.stack_filters
                .as_ref()
                .is_none_or(|s| s.admits(target.stack_name))
    }

    /// Whether this hook judges a whole stack's `action` (the STACK
    /// target) or, with `TargetOperation::ChangeSet`, a change set made
    /// for the stack `stack_name`.
    pub fn applies_to_stack(
        &self,
        operation: TargetOperation,
        stack_name: &str,
        action: HookAction,
    ) -> bool {
        let c = &self.configuration;
        let f = &c.target_filters;
        c.hook_invocation_status == HookInvocationStatus::Enabled
            && c.target_operations.contains(&operation)
            && (f.actions.is_empty() || f.actions.contains(&action))
            && c.stack_filters
                .as_ref()
                .is_none_or(|s| s.admits(stack_name))
    }

    /// What a Guard hook's rules see of a whole stack (the STACK and
    /// CHANGE_SET targets): the template as it will be (so rules written
    /// for templates apply: `Resources`, `Parameters`, …), CloudFormation's
    /// `HookContext`, the parameter values under `ParameterValues` (NoEcho
    /// ones masked), an update's template before it under `Previous`, and a
    /// change set's `Changes`.
    pub fn stack_input(&self, target: &StackTarget<'_>, account_id: &str) -> Value {
        let mut doc = match target.template {
            Value::Object(m) => Value::Object(m.clone()),
            _ => json!({}),
        };
        let kind = target.operation.as_str();
        doc["HookContext"] = json!({
            "AWSAccountID": account_id,
            "StackId": target.stack_id,
            "ChangeSetId": target.change_set_id,
            "HookTypeName": self.type_name,
            "HookTypeVersion": "00000001",
            "InvocationPoint": target.action.invocation_point(),
            "TargetName": kind,
            "TargetType": kind,
            "TargetLogicalId": target.stack_name,
        });
        doc["ParameterValues"] = Value::Object(target.parameters.clone());
        if let Some(previous) = target.previous {
            doc["Previous"] = previous.clone();
        }
        if let Some(changes) = target.changes {
            doc["Changes"] = changes.clone();
        }
        doc
    }

    /// What a Guard hook's rules see for `target`: CloudFormation's
    /// `HookContext`, the resource under `Resources` as a template has it
    /// (`Type` and `Properties`, so rules written for templates apply) and,
    /// for an update, as it was under `Previous`.
    pub fn guard_input(&self, target: &HookTarget<'_>, account_id: &str) -> Value {
        let resource = |props: &Map<String, Value>| {
            json!({
                "Type": target.type_name,
                "Properties": props,
                "ResourceType": target.type_name,
                "ResourceProperties": props,
            })
        };
        let mut doc = json!({
            "HookContext": {
                "AWSAccountID": account_id,
                "StackId": target.stack_id,
                "HookTypeName": self.type_name,
                "HookTypeVersion": "00000001",
                "InvocationPoint": target.action.invocation_point(),
                "TargetName": target.type_name,
                "TargetType": "RESOURCE",
                "TargetLogicalId": target.logical_id,
            },
            "Resources": { target.logical_id: resource(target.properties) },
        });
        if let Some(previous) = target.previous {
            doc["Previous"] = json!({ target.logical_id: resource(previous) });
        }
        doc
    }
}

impl HookDefinition {
    /// What a Guard hook's rules see of `judged`.
    pub fn guard_document(&self, judged: &Judged<'_>, account_id: &str) -> Value {
        match judged {
            Judged::Resource(t) => self.guard_input(t, account_id),
            Judged::Stack(t) => self.stack_input(t, account_id),
        }
    }

    /// The request a webhook hook is POSTed for `judged` (CloudFormation's
    /// hook invocation request). A resource's properties are under
    /// `requestData.targetModel` (`resourceProperties`,
    /// `previousResourceProperties`); a whole stack's template is inlined
    /// there too (`template`, `previousTemplate`, a change set's
    /// `changedResources`, the `parameterValues` with NoEcho ones masked),
    /// where CloudFormation hands a presigned `payload` URL.
    pub fn webhook_request(
        &self,
        judged: &Judged<'_>,
        account_id: &str,
        call: &HookInvocation<'_>,
    ) -> Value {
        let (stack_id, change_set_id, action, request_data) = match judged {
            Judged::Resource(t) => {
                let mut model = json!({ "resourceProperties": t.properties });
                if let Some(previous) = t.previous {
                    model["previousResourceProperties"] = json!(previous);
                }
                let data = json!({
                    "targetName": t.type_name,
                    "targetType": "RESOURCE",
                    "targetLogicalId": t.logical_id,
                    "targetModel": model,
                    "payload": null,
                });
                (t.stack_id, None, t.action, data)
            }
            Judged::Stack(t) => {
                let kind = t.operation.as_str();
                let mut model = json!({
                    "template": t.template,
                    "parameterValues": t.parameters,
                });
                if let Some(previous) = t.previous {
                    model["previousTemplate"] = previous.clone();
                }
                if let Some(changes) = t.changes {
                    model["changedResources"] = changes.clone();
                }
                let data = json!({
                    "targetName": kind,
                    "targetType": kind,
                    "targetLogicalId": t.stack_name,
                    "targetModel": model,
                    "payload": null,
                });
                (t.stack_id, t.change_set_id, t.action, data)
            }
        };
        json!({
            "clientRequestToken": call.token,
            "awsAccountId": account_id,
            "stackId": stack_id,
            "changeSetId": change_set_id,
            "hookTypeName": self.type_name,
            "hookTypeVersion": "00000001",
            "hookModel": self.configuration.properties,
            "actionInvocationPoint": action.invocation_point(),
            "requestData": request_data,
            "requestContext": {
                "invocation": call.invocation,
                "callbackContext": call.callback_context.cloned().unwrap_or_else(|| json!({})),
            },
        })
    }
}

impl StackFilters {
    /// Whether the stack named `stack_name` is one the hook judges.
    pub fn admits(&self, stack_name: &str) -> bool {
        let Some(names) = &self.stack_names else {
            return true;
        };
        let included = names.include.is_empty() || names.include.iter().any(|n| n == stack_name);
        let excluded = names.exclude.iter().any(|n| n == stack_name);
        included && !excluded
    }
}

/// A hook's verdict on one target, as a stack event carries it
/// (DescribeStackEvents' `HookType`, `HookStatus`, `HookStatusReason`,
/// `HookInvocationPoint`, `HookFailureMode`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HookEvent {
    pub hook_type: String,
    pub hook_status: HookStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_status_reason: Option<String>,
    pub hook_invocation_point: String,
    pub hook_failure_mode: FailureMode,
}

impl HookEvent {
    /// The verdict in one line: `Alias HOOK_COMPLETE_FAILED (FAIL): why`.
    pub fn summary(&self) -> String {
        format!(
            "{} {} ({}){}",
            self.hook_type,
            self.hook_status,
            self.hook_failure_mode,
            self.hook_status_reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        )
    }
}

/// A hook configuration from CloudFormation's document
/// (`{"CloudFormationConfiguration": {"HookConfiguration": {…}}}`) or the
/// HookConfiguration alone.
pub fn parse_configuration(doc: &Value) -> Result<HookConfiguration, String> {
    let inner = doc
        .pointer("/CloudFormationConfiguration/HookConfiguration")
        .unwrap_or(doc);
    serde_json::from_value(inner.clone()).map_err(|e| {
        format!("the hook configuration is not CloudFormation's HookConfiguration: {e}")
    })
}

/// The schema of `AWS::CloudFormation::GuardHook` (`engine:hooks`); the
/// engine serves it (the hook is kept in the type registry), so its calls
/// never reach this provider.
pub fn guard_hook_schema() -> ResourceSchema {
    let schema = ResourceSchema::new(GUARD_HOOK)
        .describe("a Guard hook: rules every resource of this Cairn state is checked against before it is created, updated or deleted")
        .property(
            "Alias",
            PropertySchema::string()
                .required()
                .create_only()
                .describe("the hook's type name, three parts (Private::Guard::FileMode), unique in the state"),
        )
        .property(
            "RuleLocation",
            PropertySchema::json()
                .required()
                .describe("{Uri}: the .guard rules, a file:// URL under [hooks] rule_dirs or an https:// URL, read when the hook is made or updated"),
        )
        .property("ExecutionRole", PropertySchema::string())
        .property("LogBucket", PropertySchema::string())
        .property("Options", PropertySchema::json());
    with_hook_settings(schema)
        .attribute("HookArn", "the hook's ARN")
        .ref_returns("the hook's ARN")
}

/// The schema of `AWS::CloudFormation::LambdaHook` (`engine:hooks`): its
/// `LambdaFunction` is a webhook's URL.
pub fn lambda_hook_schema() -> ResourceSchema {
    let schema = ResourceSchema::new(LAMBDA_HOOK)
        .describe("a Lambda hook: a webhook every resource of this Cairn state is sent to before it is created, updated or deleted, answering CloudFormation's hook response")
        .property(
            "Alias",
            PropertySchema::string()
                .required()
                .create_only()
                .describe("the hook's type name, three parts (Private::Lambda::MyHook), unique in the state"),
        )
        .property(
            "LambdaFunction",
            PropertySchema::string()
                .required()
                .describe("the hook's webhook: an http(s):// URL POSTed CloudFormation's hook request, signed with [webhooks] secret"),
        )
        .property(
            "ExecutionRole",
            PropertySchema::string().describe("accepted for CloudFormation's templates; unused"),
        );
    with_hook_settings(schema)
        .attribute("HookArn", "the hook's ARN")
        .ref_returns("the hook's ARN")
}

/// The properties every template hook has besides its source.
fn with_hook_settings(schema: ResourceSchema) -> ResourceSchema {
    schema
        .property(
            "FailureMode",
            PropertySchema::string().allowing(&["FAIL", "WARN"]),
        )
        .property(
            "HookStatus",
            PropertySchema::string().allowing(&["ENABLED", "DISABLED"]),
        )
        .property(
            "TargetOperations",
            PropertySchema::list(PropertyType::String).allowing(&[
                "RESOURCE",
                "STACK",
                "CHANGE_SET",
                "CLOUD_CONTROL",
            ]),
        )
        .property("TargetFilters", PropertySchema::json())
        .property("StackFilters", PropertySchema::json())
}

/// The provider of the hook types defined in templates (`engine:hooks`).
pub struct HookTypes;

const SERVED_BY_ENGINE: &str = "hooks are kept by the engine";

#[async_trait]
impl ResourceProvider for HookTypes {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![guard_hook_schema(), lambda_hook_schema()]
    }

    async fn create(&self, _req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        Err(ProviderError::internal(SERVED_BY_ENGINE))
    }

    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Err(ProviderError::internal(SERVED_BY_ENGINE))
    }

    async fn check_drift(&self, _req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(DriftResult::NotChecked)
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Err(ProviderError::internal(SERVED_BY_ENGINE))
    }
}

/// Where a template's hook's verdicts come from: Guard rules to read (a
/// GuardHook's `RuleLocation.Uri`), or a webhook to call (a LambdaHook's
/// `LambdaFunction`).
#[derive(Debug, Clone, PartialEq)]
pub enum HookSource {
    Rules(String),
    Webhook(String),
}

/// A template's hook's properties (a `GuardHook` or a `LambdaHook`),
/// checked: its alias, where its verdicts come from, and its configuration.
pub fn hook_of(
    type_name: &str,
    properties: &Map<String, Value>,
) -> Result<(String, HookSource, HookConfiguration), String> {
    let source = match type_name {
        LAMBDA_HOOK => {
            let url = properties
                .get("LambdaFunction")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "LambdaFunction {url:?} is not a webhook: Cairn calls a Lambda hook's function at an http(s):// URL (the Lambda adapter serves an unchanged function at one)"
                ));
            }
            HookSource::Webhook(url.to_string())
        }
        _ => HookSource::Rules(
            properties
                .get("RuleLocation")
                .and_then(|l| l.get("Uri"))
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
                .ok_or("RuleLocation needs a Uri: the .guard rules' file:// or https:// URL")?
                .to_string(),
        ),
    };
    let (alias, configuration) = hook_settings(properties)?;
    Ok((alias, source, configuration))
}

/// A template's hook's alias and configuration, checked.
fn hook_settings(properties: &Map<String, Value>) -> Result<(String, HookConfiguration), String> {
    let alias = properties
        .get("Alias")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let parts: Vec<&str> = alias.split("::").collect();
    let valid = parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty() && p.len() <= 64 && p.chars().all(|c| c.is_ascii_alphanumeric())
        });
    if !valid {
        return Err(format!(
            "Alias {alias:?} is not a hook type name: three parts of letters and digits, Name1::Name2::Name3"
        ));
    }
    if alias.starts_with("AWS::") || alias.starts_with("Cairn::") {
        return Err(format!(
            "Alias {alias} is in a reserved namespace: a hook's alias may not start with AWS or Cairn"
        ));
    }
    let mut config = Map::new();
    for key in [
        "FailureMode",
        "TargetOperations",
        "TargetFilters",
        "StackFilters",
    ] {
        if let Some(v) = properties.get(key) {
            config.insert(key.into(), v.clone());
        }
    }
    if let Some(status) = properties.get("HookStatus") {
        config.insert("HookInvocationStatus".into(), status.clone());
    }
    let configuration = parse_configuration(&Value::Object(config))?;
    Ok((alias.to_string(), configuration))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(config: Value) -> HookDefinition {
        HookDefinition {
            type_name: "Private::Guard::FileMode".into(),
            handler: HookHandler::Guard {
                rules: String::new(),
                location: "file:///rules.guard".into(),
            },
            configuration: parse_configuration(&config).unwrap(),
        }
    }

    fn target<'a>(
        stack: &'a str,
        type_name: &'a str,
        action: HookAction,
        props: &'a Map<String, Value>,
    ) -> HookTarget<'a> {
        HookTarget {
            stack_name: stack,
            stack_id: "id",
            logical_id: "File",
            type_name,
            action,
            properties: props,
            previous: None,
        }
    }

    #[test]
    fn filters_choose_the_targets() {
        let props = Map::new();
        let h = hook(
            json!({"CloudFormationConfiguration": {"HookConfiguration": {
                "TargetOperations": ["RESOURCE"],
                "FailureMode": "WARN",
                "TargetFilters": {"Actions": ["CREATE", "UPDATE"], "TargetNames": ["Cairn::Local::*"]},
                "StackFilters": {"FilteringCriteria": "ALL", "StackNames": {"Exclude": ["sandbox"]}},
            }}}),
        );
        assert_eq!(h.configuration.failure_mode, FailureMode::Warn);
        let file = "Cairn::Local::File";
        assert!(h.applies_to(&target("app", file, HookAction::Create, &props)));
        assert!(!h.applies_to(&target("app", file, HookAction::Delete, &props)));
        assert!(!h.applies_to(&target(
            "app",
            "Cairn::Test::Resource",
            HookAction::Create,
            &props
        )));
        assert!(!h.applies_to(&target("sandbox", file, HookAction::Create, &props)));
        let off = hook(json!({"HookInvocationStatus": "DISABLED"}));
        assert!(!off.applies_to(&target("app", file, HookAction::Create, &props)));
        let stacks_only = hook(json!({"TargetOperations": ["STACK"]}));
        assert!(!stacks_only.applies_to(&target("app", file, HookAction::Create, &props)));
        assert_eq!(
            parse_configuration(&json!({"FailureMode": "SOMETIMES"})).map(|_| ()),
            Err("the hook configuration is not CloudFormation's HookConfiguration: unknown FailureMode SOMETIMES".into())
        );
    }

    #[test]
    fn a_webhook_hooks_answers_are_read_as_cloudformation_defines_them() {
        let read = |v: Value, n| read_hook_answer(v.to_string().as_bytes(), n);
        assert_eq!(
            read(
                json!({"hookStatus": "SUCCESS", "clientRequestToken": "t"}),
                1
            ),
            HookAnswer::Verdict(HookStatus::Succeeded, None)
        );
        assert_eq!(
            read(
                json!({"hookStatus": "FAILED", "errorCode": "NonCompliant", "message": "no"}),
                1
            ),
            HookAnswer::Verdict(HookStatus::Failed, Some("no".into()))
        );
        assert_eq!(
            read(
                json!({"hookStatus": "FAILED", "errorCode": "InternalFailure", "message": "boom"}),
                1
            ),
            HookAnswer::Verdict(HookStatus::Error, Some("InternalFailure: boom".into()))
        );
        assert_eq!(
            read(json!({"hookStatus": "FAILED", "message": "no"}), 1),
            HookAnswer::Verdict(HookStatus::Error, Some("the hook answered FAILED without an errorCode (NonCompliant or InternalFailure): no".into()))
        );
        assert_eq!(
            read(
                json!({"hookStatus": "IN_PROGRESS", "callbackContext": {"n": 1}, "callbackDelaySeconds": 5}),
                2
            ),
            HookAnswer::InProgress {
                callback_context: json!({"n": 1}),
                delay_seconds: 5
            }
        );
        assert_eq!(
            read(json!({"hookStatus": "IN_PROGRESS"}), MAX_INVOCATIONS),
            HookAnswer::Verdict(HookStatus::Error, Some("the hook answered IN_PROGRESS 3 times: it is invoked 3 times at most, the last answer must be SUCCESS or FAILED".into()))
        );
        let long = "x".repeat(5000);
        match read(
            json!({"hookStatus": "FAILED", "errorCode": "NonCompliant", "message": long}),
            1,
        ) {
            HookAnswer::Verdict(_, Some(m)) => assert_eq!(m.len(), 4096),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_hook_answer(b"<html>", 1),
            HookAnswer::Verdict(HookStatus::Error, Some(m)) if m.starts_with("the hook's answer is not a hook response")
        ));
    }

    #[test]
    fn a_webhook_hook_is_sent_cloudformations_request() {
        let h = hook(json!({"Properties": {"Level": "strict"}}));
        let mut props = Map::new();
        props.insert("Mode".into(), json!("0644"));
        let t = target("app", "Cairn::Local::File", HookAction::Create, &props);
        let context = json!({"step": 1});
        let call = HookInvocation {
            token: "tok",
            invocation: 2,
            callback_context: Some(&context),
        };
        let r = h.webhook_request(&Judged::Resource(&t), "123456789012", &call);
        assert_eq!(r["clientRequestToken"], "tok");
        assert_eq!(r["actionInvocationPoint"], "CREATE_PRE_PROVISION");
        assert_eq!(r["hookTypeName"], "Private::Guard::FileMode");
        assert_eq!(r["hookModel"], json!({"Level": "strict"}));
        assert_eq!(
            r["requestData"],
            json!({"targetName": "Cairn::Local::File", "targetType": "RESOURCE", "targetLogicalId": "File",
                   "targetModel": {"resourceProperties": {"Mode": "0644"}}, "payload": null})
        );
        assert_eq!(
            r["requestContext"],
            json!({"invocation": 2, "callbackContext": {"step": 1}})
        );
    }

    #[test]
    fn guard_sees_the_resource_as_a_template_has_it() {
        let h = hook(json!({}));
        let mut props = Map::new();
        props.insert("Mode".into(), json!("0644"));
        let mut old = Map::new();
        old.insert("Mode".into(), json!("0600"));
        let mut t = target("app", "Cairn::Local::File", HookAction::Update, &props);
        t.previous = Some(&old);
        let doc = h.guard_input(&t, "123456789012");
        assert_eq!(
            doc["HookContext"]["InvocationPoint"],
            "UPDATE_PRE_PROVISION"
        );
        assert_eq!(doc["Resources"]["File"]["Type"], "Cairn::Local::File");
        assert_eq!(doc["Resources"]["File"]["Properties"]["Mode"], "0644");
        assert_eq!(doc["Previous"]["File"]["Properties"]["Mode"], "0600");
    }
}
