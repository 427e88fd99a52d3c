//! `AWS::CloudFormation::Macro`: a stack resource that defines a macro every
//! template of this Cairn state may name (CloudFormation's macros are the
//! account's). The resource is a record and nothing else: its physical id
//! is the macro's name, and where its function is called is its
//! `FunctionName` (an `http(s)://` webhook, or the name of a `[[providers]]`
//! entry whose plugin runs it). The engine finds macros among the live rows
//! of this type when a template names one.

use async_trait::async_trait;
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::Value;

pub const MACRO_TYPE: &str = "AWS::CloudFormation::Macro";

/// Where a macro's function runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Function {
    /// POSTed CloudFormation's macro request (signed with the secret when
    /// there is one), answering the macro response.
    Webhook { url: String, secret: Option<String> },
    /// The `transform` of the provider of this `[[providers]]` entry.
    Provider(String),
}

impl Function {
    /// A `FunctionName`: a URL is a webhook, anything else a provider's name.
    pub fn named(function_name: &str) -> Function {
        if function_name.starts_with("https://") || function_name.starts_with("http://") {
            Function::Webhook {
                url: function_name.to_string(),
                secret: None,
            }
        } else {
            Function::Provider(function_name.to_string())
        }
    }
}

/// A macro name as CloudFormation allows it.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.'))
}

pub fn schema() -> ResourceSchema {
    ResourceSchema::new(MACRO_TYPE)
        .describe("a macro templates of this Cairn state may name in Transform or Fn::Transform")
        .property(
            "Name",
            PropertySchema::string()
                .required()
                .create_only()
                .describe("the macro's name, unique in this Cairn state"),
        )
        .property(
            "FunctionName",
            PropertySchema::string()
                .required()
                .describe("an http(s):// URL the macro request is POSTed to, or the name of a [[providers]] entry whose plugin serves the macro"),
        )
        .property("Description", PropertySchema::string())
        .property("LogGroupName", PropertySchema::string())
        .property("LogRoleARN", PropertySchema::string())
        .ref_returns("the macro's name")
}

/// The provider of `AWS::CloudFormation::Macro` (`engine:macros`).
pub struct MacroType;

fn checked(properties: &serde_json::Map<String, Value>) -> Result<String, ProviderError> {
    let name = properties
        .get("Name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !valid_name(name) {
        return Err(ProviderError::invalid_request(format!(
            "Name {name:?} is not a macro name: use letters, digits and _-:. (at most 255 characters)"
        )));
    }
    let function = properties
        .get("FunctionName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if function.trim().is_empty() {
        return Err(ProviderError::invalid_request(
            "FunctionName must be an http(s):// URL or the name of a [[providers]] entry",
        ));
    }
    Ok(name.to_string())
}

#[async_trait]
impl ResourceProvider for MacroType {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![schema()]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        Ok(CreateResult {
            physical_resource_id: checked(&req.properties)?,
            ..Default::default()
        })
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        checked(&req.properties)?;
        Ok(UpdateResult::default())
    }

    async fn check_drift(&self, _req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(DriftResult::InSync)
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Ok(())
    }
}
