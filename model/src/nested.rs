//! Nested stacks (`AWS::CloudFormation::Stack`), the model: the type's
//! schema, the nested templates an operation read (with their digests),
//! the child stack's name, parameters and timeout. Reading the templates is
//! I/O and lives in the core (`cairn_core::nested::collect`); the engine
//! runs the children (`engine::nested`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    PropertyType, ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use crate::template::types::STACK_TYPE;

/// A property Cairn adds to a nested stack resource's recorded properties:
/// the digest of the nested template, so that an update whose TemplateURL
/// text is unchanged but whose file changed updates the child.
pub const DIGEST: &str = "CairnTemplateDigest";

/// A nested stack resource's attribute with the child's resources (each
/// one's `PhysicalId` and `Attributes`): what HOT's `get_attr: [r,
/// resource.<name>.<attr>]` of a template resource reads. Recorded only
/// when the parent's template reads it.
pub const RESOURCES_ATTRIBUTE: &str = crate::template::types::NESTED_RESOURCES_ATTRIBUTE;

/// A nested stack resource's attribute with the map of all the child's
/// outputs (HOT's `get_attr: [stack, outputs]`), beside `Outputs.<Name>`.
pub const OUTPUTS_ATTRIBUTE: &str = "Outputs";

pub fn is_stack(canonical_type: &str) -> bool {
    canonical_type == STACK_TYPE
}

pub fn schema() -> ResourceSchema {
    ResourceSchema::new(STACK_TYPE)
        .describe("a nested stack: a real stack of its own, made, updated and deleted with its parent")
        .property(
            "TemplateURL",
            PropertySchema::string()
                .required()
                .describe("a path relative to the parent template, a file:/// URL under [nested] template_dirs, or an https:// URL with [nested] allow_https"),
        )
        .property(
            "Parameters",
            PropertySchema::map(PropertyType::Json).describe("the child's parameter values (lists are passed comma-joined)"),
        )
        .property("TimeoutInMinutes", PropertySchema::integer())
        .property("NotificationARNs", PropertySchema::list(PropertyType::String))
        .property("Tags", PropertySchema::json())
        .property(
            DIGEST,
            PropertySchema::string().describe("set by Cairn: the digest of the nested template"),
        )
        .ref_returns("the child stack's id")
}

/// The nested templates of a tree of stacks, by the logical path of the
/// stack resource that uses each (`Network`, `Network/Subnets`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NestedTemplates(pub BTreeMap<String, NestedTemplate>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestedTemplate {
    /// Where it was read from (a path or a URL), for messages.
    pub location: String,
    pub body: String,
}

impl NestedTemplates {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The template of the stack resource `logical` of this level.
    pub fn child(&self, logical: &str) -> Option<&NestedTemplate> {
        self.0.get(logical)
    }

    /// What the child stack of `logical` needs for its own children.
    pub fn below(&self, logical: &str) -> NestedTemplates {
        let prefix = format!("{logical}/");
        NestedTemplates(
            self.0
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_string(), v.clone())))
                .collect(),
        )
    }
}

/// The digest [`DIGEST`] records.
pub fn digest(body: &str) -> String {
    Sha256::digest(body.as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A nested stack resource's properties with its template's digest: from
/// `templates` when the operation read the template, else the one recorded
/// (an update that reuses the stack's template keeps the children's).
pub fn with_digest(
    logical: &str,
    mut properties: Map<String, Value>,
    templates: &NestedTemplates,
    recorded: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let d = templates
        .child(logical)
        .map(|t| Value::String(digest(&t.body)))
        .or_else(|| recorded.and_then(|r| r.get(DIGEST).cloned()));
    match d {
        Some(d) => {
            properties.insert(DIGEST.into(), d);
        }
        None => {
            properties.remove(DIGEST);
        }
    }
    properties
}

/// [`with_digest`] for a launch configuration whose members are nested
/// stacks: the digest of their template goes into `MemberProperties`, so a
/// changed member template is a changed launch configuration and the
/// members are rolled out onto it. `recorded`: the digest recorded in the
/// launch configuration's `MemberProperties` (`{DIGEST: …}`), kept when the
/// template was not read. Any other launch configuration is unchanged.
pub fn with_member_digest(
    logical: &str,
    mut properties: Map<String, Value>,
    catalog: &dyn crate::catalog::TypeCatalog,
    templates: &NestedTemplates,
    recorded: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let member_stacks = properties
        .get("MemberType")
        .and_then(Value::as_str)
        .is_some_and(|t| is_stack(catalog.canonical(t)));
    if !member_stacks {
        return properties;
    }
    if let Some(Value::Object(members)) = properties.remove("MemberProperties") {
        let members = with_digest(logical, members, templates, recorded);
        properties.insert("MemberProperties".into(), Value::Object(members));
    }
    properties
}

/// The child stack's name: `<parent>-<Logical>-<13 upper-case
/// alphanumerics>` (derived from the create's request id, so a re-issued
/// create finds the same child), cut to 128 characters.
pub fn child_stack_name(parent: &str, logical: &str, request_id: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let suffix: String = Sha256::digest(request_id.as_bytes())
        .iter()
        .take(13)
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect();
    let mut head = format!("{parent}-{logical}");
    let room = 128 - 1 - suffix.len();
    if head.len() > room {
        head.truncate(room);
    }
    format!("{head}-{suffix}")
}

/// A nested stack's `Parameters` that cannot be passed to its child.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidParameters(pub String);

/// The child's parameter values from the evaluated `Parameters`: strings
/// as they are, lists comma-joined, numbers and booleans as text.
pub fn child_parameters(
    logical: &str,
    properties: &Map<String, Value>,
) -> Result<BTreeMap<String, String>, InvalidParameters> {
    parameters_text(logical, properties).map_err(InvalidParameters)
}

/// [`child_parameters`], its texts.
fn parameters_text(
    logical: &str,
    properties: &Map<String, Value>,
) -> Result<BTreeMap<String, String>, String> {
    let Some(params) = properties.get("Parameters") else {
        return Ok(BTreeMap::new());
    };
    let Value::Object(params) = params else {
        return Err(format!(
            "Parameters of {logical} must be a map of parameter names to values"
        ));
    };
    params
        .iter()
        .map(|(k, v)| {
            // Lists comma-joined, maps (a HOT json parameter) as JSON.
            let text = match v {
                Value::Null => String::new(),
                other => crate::template::parameters::parameter_text(other),
            };
            Ok((k.clone(), text))
        })
        .collect()
}

/// The `TimeoutInMinutes` of a nested stack resource.
pub fn timeout_minutes(properties: &Map<String, Value>) -> Option<u32> {
    properties
        .get("TimeoutInMinutes")
        .and_then(Value::as_u64)
        .and_then(|t| u32::try_from(t).ok())
        .filter(|t| *t > 0)
}

/// The schema of `AWS::CloudFormation::Stack` (`engine:stacks`); the engine
/// runs the type itself, so its calls never reach this provider.
pub struct NestedStackType;

#[async_trait]
impl ResourceProvider for NestedStackType {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![schema()]
    }

    async fn create(&self, _req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        Err(ProviderError::internal(
            "nested stacks are run by the engine",
        ))
    }

    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Err(ProviderError::internal(
            "nested stacks are run by the engine",
        ))
    }

    /// A nested stack's drift is its own stack's (detect it there).
    async fn check_drift(&self, _req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(DriftResult::NotChecked)
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Err(ProviderError::internal(
            "nested stacks are run by the engine",
        ))
    }
}
