//! Macros: CloudFormation's transform functions, served by a provider
//! (a plugin's [`ResourceProvider::transform`](crate::ResourceProvider::transform))
//! or by a webhook that takes the same JSON. The request and the answer are
//! CloudFormation's, field for field, so a macro's Lambda code ports as it is.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a macro is sent (`template-macros.md`): the fragment to transform,
/// its `Parameters` as written, and the template's parameter values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MacroRequest {
    pub region: String,
    pub account_id: String,
    /// The template without its `Transform` section (a section macro), or
    /// the map that holds the `Fn::Transform`, without it (a snippet).
    pub fragment: Value,
    /// `<account id>::<macro name>`.
    pub transform_id: String,
    /// The transform's `Parameters`, not evaluated; `{}` for none.
    #[serde(default)]
    pub params: Value,
    /// To be echoed in the answer.
    pub request_id: String,
    /// Each template parameter's value (a list for a list type).
    #[serde(default)]
    pub template_parameter_values: Value,
}

/// A macro's answer: `status` is `success` (in any case) or anything else
/// for a failure, which `error_message` explains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MacroResponse {
    pub request_id: String,
    pub status: String,
    #[serde(default)]
    pub fragment: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

impl MacroResponse {
    /// The transformed fragment.
    pub fn success(req: &MacroRequest, fragment: Value) -> Self {
        MacroResponse {
            request_id: req.request_id.clone(),
            status: "success".into(),
            fragment,
            error_message: None,
        }
    }

    /// A failure, with the text CloudFormation shows after `failed with:`.
    pub fn failure(req: &MacroRequest, message: impl Into<String>) -> Self {
        MacroResponse {
            request_id: req.request_id.clone(),
            status: "failure".into(),
            fragment: Value::Null,
            error_message: Some(message.into()),
        }
    }

    /// Whether the macro succeeded (`status` is `success` in any case).
    pub fn succeeded(&self) -> bool {
        self.status.eq_ignore_ascii_case("success")
    }
}
