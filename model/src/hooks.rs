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

/// Whether a resource type is a hook defined in a template.
pub fn is_hook_type(type_name: &str) -> bool {
    type_name == GUARD_HOOK
}

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
    ResourceSchema::new(GUARD_HOOK)
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
            PropertySchema::list(PropertyType::String)
                .allowing(&["RESOURCE", "STACK", "CHANGE_SET", "CLOUD_CONTROL"]),
        )
        .property("TargetFilters", PropertySchema::json())
        .property("StackFilters", PropertySchema::json())
        .property("ExecutionRole", PropertySchema::string())
        .property("LogBucket", PropertySchema::string())
        .property("Options", PropertySchema::json())
        .attribute("HookArn", "the hook's ARN")
        .ref_returns("the hook's ARN")
}

/// The provider of the hook types defined in templates (`engine:hooks`).
pub struct HookTypes;

const SERVED_BY_ENGINE: &str = "hooks are kept by the engine";

#[async_trait]
impl ResourceProvider for HookTypes {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![guard_hook_schema()]
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

/// A Guard hook's properties, checked: its alias, where its rules are,
/// and its configuration.
pub fn guard_hook_of(
    properties: &Map<String, Value>,
) -> Result<(String, String, HookConfiguration), String> {
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
    let location = properties
        .get("RuleLocation")
        .and_then(|l| l.get("Uri"))
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .ok_or("RuleLocation needs a Uri: the .guard rules' file:// or https:// URL")?;
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
    Ok((alias.to_string(), location.to_string(), configuration))
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
