//! What a template needs besides its own text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a template needs besides its text, kept with the stack: the files
/// HOT's `get_file` reads (by the name the template gives) and a HOT
/// environment (its `parameter_defaults` and `resource_registry`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TemplateContext {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Value>,
    /// The parameter values a template with `Transform:
    /// AWS::LanguageExtensions` is expanded with (its loops' collections).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// A provider template's view of the resource it implements (Heat's
    /// `resource_facade`): that resource's `metadata` (resolved),
    /// `deletion_policy` and `update_policy`. Set by the parent for each
    /// child; never inherited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facade: Option<Facade>,
    /// The template after its macros ran (with every other transform, in
    /// CloudFormation's order), as JSON: what the stack is made of, kept
    /// because macros are not run again to read it (a rollback uses the
    /// copy, as CloudFormation does). `None`: the template names no macro
    /// and is read from its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processed: Option<Value>,
}

/// What `resource_facade` reads of the resource a provider template
/// implements (heat/engine/hot/functions.py, ResourceFacade).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Facade {
    #[serde(default)]
    pub metadata: Value,
    #[serde(default)]
    pub deletion_policy: String,
    #[serde(default)]
    pub update_policy: Value,
}

impl Facade {
    /// One of `metadata`, `deletion_policy`, `update_policy`; a resource
    /// that sets none of them reads Heat's defaults (`{}`, `Delete`, `{}`).
    pub fn get(&self, attribute: &str) -> Option<Value> {
        let or_empty = |v: &Value| match v {
            Value::Null => Value::Object(Default::default()),
            v => v.clone(),
        };
        match attribute {
            "metadata" => Some(or_empty(&self.metadata)),
            "deletion_policy" => Some(Value::String(if self.deletion_policy.is_empty() {
                "Delete".into()
            } else {
                self.deletion_policy.clone()
            })),
            "update_policy" => Some(or_empty(&self.update_policy)),
            _ => None,
        }
    }
}

impl TemplateContext {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.environment.is_none()
            && self.parameters.is_empty()
            && self.facade.is_none()
            && self.processed.is_none()
    }

    /// What a nested stack of this template gets (Heat's child
    /// environment): the same files and environment, without the
    /// environment's `parameters` (a child's values come from its
    /// resource's properties) and the parent's language-extension values.
    pub fn for_child(&self) -> TemplateContext {
        let environment = self.environment.clone().map(|mut e| {
            if let Some(m) = e.as_object_mut() {
                m.remove("parameters");
            }
            e
        });
        TemplateContext {
            files: self.files.clone(),
            environment,
            parameters: BTreeMap::new(),
            facade: None,
            processed: None,
        }
    }

    /// What the nested stack whose TemplateURL is `url` gets: [`Self::for_child`],
    /// and when the child is a template file the environment's
    /// `resource_registry` maps types to, those mappings are ignored
    /// inside it (Heat's template resource ignores its own mapping,
    /// heat/engine/resources/template_resource.py: a template that uses the
    /// type it stands for gets that type, not itself again).
    pub fn for_nested(&self, url: &str) -> TemplateContext {
        let mut child = self.for_child();
        let Some(file) = url.strip_prefix(crate::types::CONTEXT_FILE) else {
            return child;
        };
        let registry = child
            .environment
            .as_mut()
            .and_then(|e| e.get_mut("resource_registry"))
            .and_then(Value::as_object_mut);
        if let Some(registry) = registry {
            registry.retain(|_, v| v.as_str() != Some(file));
            let per_resource = registry.get_mut("resources").and_then(Value::as_object_mut);
            for entries in per_resource.into_iter().flat_map(|r| r.values_mut()) {
                if let Some(entries) = entries.as_object_mut() {
                    entries.retain(|_, v| v.as_str() != Some(file));
                }
            }
        }
        child
    }

    /// This context for `text` with `parameters`: a template using
    /// `AWS::LanguageExtensions` keeps the values its loops expand with.
    pub fn for_template(mut self, text: &str, parameters: &BTreeMap<String, String>) -> Self {
        if text.contains(super::language_extensions::TRANSFORM) {
            self.parameters = parameters.clone();
        }
        self
    }
}
