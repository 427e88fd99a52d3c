use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{ProviderError, ResourceSchema};

/// Who is asking and until when. Every request carries one.
///
/// `request_id` is stable across retries of the same logical call (after a crash the
/// engine re-issues an in-flight call with the same id): a provider must treat a
/// repeated id as the same request, e.g. return the resource it already created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RequestContext {
    pub stack_id: String,
    pub stack_name: String,
    pub logical_resource_id: String,
    pub resource_type: String,
    pub request_id: String,
    /// Milliseconds since the Unix epoch after which the engine stops waiting.
    pub deadline_unix_ms: u64,
    /// The tags the resource should carry: the stack's, and the system
    /// tags CloudFormation adds. A provider whose schema says `taggable`
    /// applies them (and is called when only they change).
    #[serde(default, skip_serializing_if = "ResourceTags::is_empty")]
    pub tags: ResourceTags,
    /// The `settings` of the provider's `[[providers]]` entry (connection
    /// URLs, regions, where a password is kept): what an operator
    /// configures once for every resource of the provider's types, never
    /// written in templates. `None` when the entry has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_settings: Option<serde_json::Value>,
}

/// The tags of a provider request, as CloudFormation's resource handlers
/// receive them (`desiredResourceTags`, `previousResourceTags`,
/// `systemTags`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ResourceTags {
    /// The stack's tags now.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub desired: BTreeMap<String, String>,
    /// The stack's tags before the update (empty on create).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub previous: BTreeMap<String, String>,
    /// `aws:cloudformation:stack-name`, `aws:cloudformation:stack-id`,
    /// `aws:cloudformation:logical-id`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system: BTreeMap<String, String>,
}

impl ResourceTags {
    pub fn is_empty(&self) -> bool {
        self.desired.is_empty() && self.previous.is_empty() && self.system.is_empty()
    }
}

impl RequestContext {
    /// Time left until the deadline (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        Duration::from_millis(self.deadline_unix_ms.saturating_sub(now))
    }

    /// A `Timeout` error when the deadline has already passed: a provider
    /// must not start work the engine has stopped waiting for (it would make
    /// a resource nobody records). The plugin glue and the webhook handler
    /// kit check it before every call; a provider that works in steps may
    /// check it between them.
    pub fn check_deadline(&self, operation: &str) -> Result<(), ProviderError> {
        if self.remaining().is_zero() {
            return Err(ProviderError::timeout(format!(
                "the deadline of request {} ({} {} of {}) had passed when the provider received it; nothing was done",
                self.request_id, operation, self.logical_resource_id, self.resource_type
            )));
        }
        Ok(())
    }
}

fn typed<T: DeserializeOwned>(v: &Map<String, Value>) -> Result<T, ProviderError> {
    serde_json::from_value(Value::Object(v.clone())).map_err(ProviderError::from)
}

/// Create a new physical resource from evaluated, schema-checked properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateRequest {
    pub context: RequestContext,
    pub properties: Map<String, Value>,
}

impl CreateRequest {
    /// The properties deserialized into the provider's own type.
    pub fn properties<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        typed(&self.properties)
    }
}

/// Update an existing physical resource in place.
///
/// `changed` lists the top-level property names whose values differ. During an
/// update rollback the engine sends `properties` = the values being restored and
/// `old_properties` = the values being rolled back from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UpdateRequest {
    pub context: RequestContext,
    pub physical_resource_id: String,
    pub properties: Map<String, Value>,
    pub old_properties: Map<String, Value>,
    pub changed: Vec<String>,
    /// Set when `cairn update` found the live resource drifted (seed 003's
    /// `ctx.instance.drift`): what `check_drift` reported, so the provider
    /// can converge it to `properties`. `None` for a template update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Vec<PropertyDifference>>,
}

impl UpdateRequest {
    pub fn properties<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        typed(&self.properties)
    }
    pub fn old_properties<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        typed(&self.old_properties)
    }
}

/// Delete a physical resource. A resource that is already gone must be reported as
/// `NotFound` (the engine counts it as deleted) or as success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteRequest {
    pub context: RequestContext,
    pub physical_resource_id: String,
    pub properties: Map<String, Value>,
}

impl DeleteRequest {
    pub fn properties<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        typed(&self.properties)
    }
}

/// Compare the live resource with the properties the template set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DriftRequest {
    pub context: RequestContext,
    pub physical_resource_id: String,
    pub properties: Map<String, Value>,
}

impl DriftRequest {
    pub fn properties<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        typed(&self.properties)
    }
}

/// Read a live resource by its identifier: what an import adopts, and
/// what the contract kit compares with what a create was given.
/// CloudFormation's read handler: it must answer within 30 s, report every
/// property that has a value (defaults and read-only ones included, never a
/// null) and fail with `NotFound` when there is no such resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReadRequest {
    pub context: RequestContext,
    /// The resource's physical id (for an import, the value of the type's
    /// primary identifier).
    pub physical_resource_id: String,
}

/// What a read found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "Outcome", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReadResult {
    /// The resource as it is: its properties in the template's terms and
    /// the attributes `Fn::GetAtt` reads.
    Found {
        #[serde(rename = "Properties")]
        properties: Map<String, Value>,
        #[serde(rename = "Attributes", default)]
        attributes: Map<String, Value>,
    },
    /// The provider cannot read this type (the default): it cannot be
    /// imported.
    NotSupported,
}

/// Ask whether the live resource is healthy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StatusRequest {
    pub context: RequestContext,
    pub physical_resource_id: String,
    pub properties: Map<String, Value>,
}

/// What a successful create learned: the physical id (what `Ref` returns unless the
/// schema says otherwise) and the attributes `Fn::GetAtt` can read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateResult {
    pub physical_resource_id: String,
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// The attributes are secret: Cairn masks their values wherever it shows
    /// them (a custom resource's `NoEcho`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_echo: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What a successful update learned. A `physical_resource_id` different from the
/// request's means the provider replaced the resource: the engine then deletes the
/// old physical resource during cleanup, as CloudFormation does for custom resources.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UpdateResult {
    #[serde(default)]
    pub physical_resource_id: Option<String>,
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// As [`CreateResult::no_echo`].
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_echo: bool,
}

/// CloudFormation's `DifferenceType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DifferenceType {
    Add,
    Remove,
    NotEqual,
}

/// One drifted property, as CloudFormation's `PropertyDifference`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PropertyDifference {
    /// A JSON pointer into the properties, e.g. `/Tags/0/Value`.
    pub property_path: String,
    pub expected_value: String,
    pub actual_value: String,
    pub difference_type: DifferenceType,
}

impl PropertyDifference {
    /// Differences between what the template set (`expected`) and what is live
    /// (`actual`). Only properties present in `expected` are compared, as
    /// CloudFormation does; values are compared after stringifying scalars so `5`
    /// and `"5"` agree.
    pub fn compare(expected: &Map<String, Value>, actual: &Map<String, Value>) -> Vec<Self> {
        let mut out = Vec::new();
        for (k, v) in expected {
            let path = format!("/{}", escape_pointer(k));
            match actual.get(k) {
                Some(a) => diff_value(&path, v, a, &mut out),
                None => out.push(PropertyDifference {
                    property_path: path,
                    expected_value: render(v),
                    actual_value: "null".into(),
                    difference_type: DifferenceType::Remove,
                }),
            }
        }
        out
    }
}

fn escape_pointer(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => a == b,
        _ => render(a) == render(b),
    }
}

fn diff_value(path: &str, expected: &Value, actual: &Value, out: &mut Vec<PropertyDifference>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, v) in e {
                let p = format!("{path}/{}", escape_pointer(k));
                match a.get(k) {
                    Some(av) => diff_value(&p, v, av, out),
                    None => out.push(PropertyDifference {
                        property_path: p,
                        expected_value: render(v),
                        actual_value: "null".into(),
                        difference_type: DifferenceType::Remove,
                    }),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            for (i, v) in e.iter().enumerate() {
                let p = format!("{path}/{i}");
                match a.get(i) {
                    Some(av) => diff_value(&p, v, av, out),
                    None => out.push(PropertyDifference {
                        property_path: p,
                        expected_value: render(v),
                        actual_value: "null".into(),
                        difference_type: DifferenceType::Remove,
                    }),
                }
            }
            for (i, av) in a.iter().enumerate().skip(e.len()) {
                out.push(PropertyDifference {
                    property_path: format!("{path}/{i}"),
                    expected_value: "null".into(),
                    actual_value: render(av),
                    difference_type: DifferenceType::Add,
                });
            }
        }
        _ if scalar_eq(expected, actual) => {}
        _ => out.push(PropertyDifference {
            property_path: path.to_string(),
            expected_value: render(expected),
            actual_value: render(actual),
            difference_type: DifferenceType::NotEqual,
        }),
    }
}

/// The outcome of a drift check, in CloudFormation's `StackResourceDriftStatus` terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "Status", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DriftResult {
    InSync,
    Modified {
        #[serde(rename = "PropertyDifferences")]
        differences: Vec<PropertyDifference>,
    },
    Deleted,
    /// The provider cannot check drift for this type.
    NotChecked,
}

impl DriftResult {
    /// `InSync` when there is no difference, `Modified` otherwise.
    pub fn from_differences(differences: Vec<PropertyDifference>) -> Self {
        if differences.is_empty() {
            DriftResult::InSync
        } else {
            DriftResult::Modified { differences }
        }
    }
}

/// What a provider says of a create the engine stopped waiting for (the
/// stack's timeout, a failure elsewhere, a cancelled update).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Cancellation {
    /// The work was stopped and undone: the request made nothing, so the
    /// rollback has nothing to learn or delete.
    NothingMade,
    /// The provider cannot tell (the default): the engine asks again with
    /// `recover_create` before it deletes the resource.
    Unknown,
}

/// The outcome of a status check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "Health", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Health {
    Healthy,
    Unhealthy {
        #[serde(rename = "Reason")]
        reason: String,
    },
}

/// A provider of one or more resource types.
///
/// Implementations must be idempotent per `request_id` (the engine delivers at least
/// once) and should honour `context.deadline_unix_ms`. Properties arrive evaluated
/// and coerced to the types the schema declares, so a provider can deserialize them
/// into its own struct with `req.properties::<MyProps>()`.
#[async_trait::async_trait]
pub trait ResourceProvider: Send + Sync {
    /// The schema of every resource type this provider serves.
    fn schema(&self) -> Vec<ResourceSchema>;

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError>;

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError>;

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError>;

    /// Per-property differences between the template and the live resource.
    /// The default says drift detection is not supported.
    async fn check_drift(&self, _req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(DriftResult::NotChecked)
    }

    /// The live resource with this physical id, or `NotFound`
    /// ([`ProviderError::not_found`]) when there is none. The default says
    /// reading is not supported.
    async fn read(&self, _req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        Ok(ReadResult::NotSupported)
    }

    /// Whether the live resource is healthy. The default says it is.
    async fn check_status(&self, _req: &StatusRequest) -> Result<Health, ProviderError> {
        Ok(Health::Healthy)
    }

    /// The outcome of a create the engine already sent with this request id
    /// and never learnt (the engine stopped, the call was cancelled or timed
    /// out): called instead of `create` before the resource is created again
    /// or deleted. The default sends the create again: right for a provider
    /// that recognises a repeated request id and answers with what the first
    /// one made (every built-in, plugins made with this SDK, the webhook
    /// handler kit). A provider whose handler would make a second resource
    /// (a CloudFormation custom-resource handler) answers from what it knows
    /// instead, and may fail with the physical id to delete
    /// ([`ProviderError::leaving`]).
    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.create(req).await
    }

    /// The engine stopped waiting for the create with this request id (its
    /// call was dropped): stop its work and undo what it did when you can,
    /// then answer [`Cancellation::NothingMade`]. The default cannot tell.
    async fn cancel_create(&self, _req: &CreateRequest) -> Result<Cancellation, ProviderError> {
        Ok(Cancellation::Unknown)
    }

    /// The outcome of an update the engine already sent with this request
    /// id and never learnt (the engine stopped while it was in flight):
    /// called instead of `update` when the operation resumes. The default
    /// sends the update again, right for a provider that is idempotent per
    /// request id. A custom-resource handler is never sent a request twice:
    /// its provider answers from the response it kept, or fails.
    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        self.update(req).await
    }

    /// As [`ResourceProvider::recover_update`], for a delete.
    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        self.delete(req).await
    }

    /// Runs a macro this provider serves (a `[[macros]]` entry or an
    /// `AWS::CloudFormation::Macro` whose function names the provider):
    /// `req.transform_id` ends with the macro's name. The default serves
    /// none.
    async fn transform(
        &self,
        req: &crate::MacroRequest,
    ) -> Result<crate::MacroResponse, ProviderError> {
        Err(ProviderError::invalid_request(format!(
            "this provider serves no macros (asked for {})",
            req.transform_id
        )))
    }

    /// Runs a hook this provider serves (a registered HOOK type whose
    /// library is made with [`export_hook!`](crate::export_hook)): its
    /// verdict on `req`. The default serves none.
    async fn hook(&self, req: &crate::HookRequest) -> Result<crate::HookProgress, ProviderError> {
        Err(ProviderError::invalid_request(format!(
            "this provider serves no hooks (asked for {})",
            req.hook_type_name
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn compare_reports_each_kind_of_difference() {
        let expected = obj(json!({"A": "1", "B": {"C": 2}, "L": [1], "Gone": "x"}));
        let actual = obj(json!({"A": 1, "B": {"C": 3}, "L": [1, 2], "Extra": true}));
        let d = PropertyDifference::compare(&expected, &actual);
        assert_eq!(
            d,
            vec![
                PropertyDifference {
                    property_path: "/B/C".into(),
                    expected_value: "2".into(),
                    actual_value: "3".into(),
                    difference_type: DifferenceType::NotEqual
                },
                PropertyDifference {
                    property_path: "/L/1".into(),
                    expected_value: "null".into(),
                    actual_value: "2".into(),
                    difference_type: DifferenceType::Add
                },
                PropertyDifference {
                    property_path: "/Gone".into(),
                    expected_value: "x".into(),
                    actual_value: "null".into(),
                    difference_type: DifferenceType::Remove
                },
            ]
        );
    }

    #[test]
    fn drift_result_wire_form() {
        let r = DriftResult::from_differences(vec![]);
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"Status": "IN_SYNC"})
        );
        let h = Health::Unhealthy { reason: "x".into() };
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            json!({"Health": "UNHEALTHY", "Reason": "x"})
        );
    }
}
