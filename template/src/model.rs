//! The template's sections, checked for structure. Values inside properties,
//! outputs and conditions stay JSON (long form) until evaluation.

use serde_json::{Map, Value};

use super::parameters::ParameterDecl;
use super::source::{child, SourceMap};
use super::{format_error, yaml, TemplateError};

const SECTIONS: &[&str] = &[
    "AWSTemplateFormatVersion",
    "Description",
    "Metadata",
    "Parameters",
    "Mappings",
    "Conditions",
    "Resources",
    "Outputs",
    "Transform",
    "Rules",
];

const RESOURCE_ATTRIBUTES: &[&str] = &[
    "Type",
    "Properties",
    "DependsOn",
    "Metadata",
    "Condition",
    "DeletionPolicy",
    "UpdateReplacePolicy",
    "CreationPolicy",
    "UpdatePolicy",
    EXTERNAL_ID,
    WRITTEN_TYPE,
    WRITTEN_MEMBER_TYPE,
    REPLACE_ON_UPDATE,
];

/// HOT's `external_id` as the front end lowers it: the resource adopts an
/// existing physical resource instead of creating one.
pub const EXTERNAL_ID: &str = "Cairn::ExternalId";

/// The type a HOT resource was written with when it is served as another
/// (`My::Thing` an environment maps to `OS::Heat::RandomString`): shown
/// as written, as Heat does.
pub const WRITTEN_TYPE: &str = "Cairn::WrittenType";

/// The type a HOT group's members were written with when they are served
/// as another (`resource_def: {type: server.yaml}`: each member a nested
/// stack), on the group: its members are shown as written.
pub const WRITTEN_MEMBER_TYPE: &str = "Cairn::WrittenMemberType";

/// A resource replaced on every update of its stack, whatever changed
/// (Heat's `OS::Heat::UpdateWaitConditionHandle`, whose `update` raises
/// UpdateReplace): a new handle, so a new wait, each time.
pub const REPLACE_ON_UPDATE: &str = "Cairn::ReplaceOnUpdate";

/// One entry of the Resources section.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub logical_id: String,
    pub type_name: String,
    /// The Properties object, intrinsics unevaluated.
    pub properties: Map<String, Value>,
    pub depends_on: Vec<String>,
    pub condition: Option<String>,
    pub metadata: Option<Value>,
    pub deletion_policy: Option<Value>,
    pub update_replace_policy: Option<Value>,
    pub creation_policy: Option<Value>,
    pub update_policy: Option<Value>,
    /// HOT's `external_id` (unevaluated): the physical id of an existing
    /// resource it adopts; never created, updated only to itself.
    pub external_id: Option<Value>,
    /// The type as written, when it differs from `type_name` (see
    /// [`WRITTEN_TYPE`]).
    pub written_type: Option<String>,
    /// A group's members' type as written, when it differs from the type
    /// that serves them (see [`WRITTEN_MEMBER_TYPE`]).
    pub written_member_type: Option<String>,
    /// Replaced on every update (see [`REPLACE_ON_UPDATE`]).
    pub replace_on_update: bool,
}

impl Resource {
    /// The type to show: as written.
    pub fn shown_type(&self) -> &str {
        self.written_type.as_deref().unwrap_or(&self.type_name)
    }
}

/// One entry of the Outputs section.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub name: String,
    pub value: Value,
    pub description: Option<String>,
    pub condition: Option<String>,
    /// `Export: {Name: …}`, unevaluated.
    pub export_name: Option<Value>,
}

/// A parsed, structurally valid template.
#[derive(Debug, Clone)]
pub struct Template {
    pub format_version: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Value>,
    pub parameters: Vec<ParameterDecl>,
    pub mappings: Map<String, Value>,
    pub conditions: Map<String, Value>,
    /// The `Rules` section: assertions on parameter values (`rules`).
    pub rules: Vec<crate::rules::Rule>,
    pub resources: Vec<Resource>,
    pub outputs: Vec<Output>,
    /// Lowered from HOT: where Heat's run-time rules differ from
    /// CloudFormation's (an output that cannot be resolved), Heat's apply.
    pub heat: bool,
    /// Logical id → position in `resources` (lookups are on every hot path).
    resource_index: std::collections::HashMap<String, usize>,
    pub source_map: SourceMap,
}

fn is_alphanumeric_id(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric())
}

fn string_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Template {
    /// Parses a JSON or YAML template (JSON when the text starts with `{`).
    /// A template's text as its JSON long form (before any checks).
    pub fn body_of(text: &str) -> Result<Value, TemplateError> {
        if text.trim_start().starts_with('{') {
            return serde_json::from_str(text).map_err(|e| {
                format_error(format!(
                    "JSON not well-formed. {e} (line {}, column {})",
                    e.line(),
                    e.column()
                ))
            });
        }
        Ok(yaml::parse(text)?.0)
    }

    /// Builds a template from its JSON long form.
    pub fn from_value(body: Value, source_map: SourceMap) -> Result<Template, TemplateError> {
        match Self::build(body, false) {
            Ok(mut t) => {
                t.source_map = source_map;
                Ok(t)
            }
            Err(e) => Err(e.locate(&source_map)),
        }
    }

    /// Takes the sections out of `body` (a 10,000-resource template must not
    /// be deep-copied on the way).
    pub(crate) fn build(body: Value, heat_names: bool) -> Result<Template, TemplateError> {
        let valid_id = |s: &str| {
            if heat_names {
                !s.is_empty()
            } else {
                is_alphanumeric_id(s)
            }
        };
        let Value::Object(mut top) = body else {
            return Err(format_error("a template must be a JSON or YAML object"));
        };
        let invalid: Vec<&str> = top
            .keys()
            .map(String::as_str)
            .filter(|k| !SECTIONS.contains(k))
            .collect();
        if !invalid.is_empty() {
            return Err(format_error(format!(
                "Invalid template property or properties [{}]",
                invalid.join(", ")
            )));
        }
        if let Some(t) = top.get("Transform") {
            let name = match t {
                Value::Array(list) => list.first().cloned().unwrap_or(Value::Null),
                other => other.clone(),
            };
            let name = match &name {
                Value::String(s) => s.clone(),
                other => other
                    .get("Name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            };
            return Err(crate::unprocessed_transform(&name));
        }
        let format_version = match top.get("AWSTemplateFormatVersion") {
            None => None,
            Some(v) => {
                let s = string_of(v).unwrap_or_default();
                if s != "2010-09-09" {
                    return Err(format_error(format!(
                        "Unsupported AWSTemplateFormatVersion '{s}'; the only valid version is 2010-09-09"
                    ))
                    .at("/AWSTemplateFormatVersion"));
                }
                Some(s)
            }
        };
        let description = match top.get("Description") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(format_error("Description must be a string").at("/Description")),
        };
        let mut section = |name: &str| -> Result<Map<String, Value>, TemplateError> {
            match top.remove(name) {
                None | Some(Value::Null) => Ok(Map::new()),
                Some(Value::Object(m)) => Ok(m),
                Some(_) => {
                    Err(format_error(format!("{name} must be an object")).at(&format!("/{name}")))
                }
            }
        };

        let mut parameters = Vec::new();
        for (name, decl) in section("Parameters")? {
            let path = child("/Parameters", &name);
            if !valid_id(&name) {
                return Err(
                    format_error(format!("Parameter name {name} is non alphanumeric.")).at(&path),
                );
            }
            parameters.push(ParameterDecl::parse(&name, &decl).map_err(|e| e.at(&path))?);
        }

        let mappings = section("Mappings")?;
        Self::check_mappings(&mappings)?;
        let conditions = section("Conditions")?;
        let rules = crate::rules::parse(section("Rules")?)?;

        let resources_map = section("Resources")?;
        // Heat accepts a template without resources (parameters and
        // outputs only; heat/engine/template.py, `create_empty_template`);
        // CloudFormation does not.
        if resources_map.is_empty() && !heat_names {
            return Err(
                format_error("At least one Resources member must be defined.").at("/Resources"),
            );
        }
        let mut resources = Vec::with_capacity(resources_map.len());
        for (id, decl) in resources_map {
            let path = child("/Resources", &id);
            if !valid_id(&id) {
                return Err(
                    format_error(format!("Resource name {id} is non alphanumeric.")).at(&path),
                );
            }
            resources.push(Self::parse_resource(&id, decl, &path)?);
        }

        let mut outputs = Vec::new();
        for (name, decl) in section("Outputs")? {
            let path = child("/Outputs", &name);
            if !valid_id(&name) {
                return Err(
                    format_error(format!("Output name {name} is non alphanumeric.")).at(&path),
                );
            }
            outputs.push(Self::parse_output(&name, &decl, &path)?);
        }

        let resource_index = resources
            .iter()
            .enumerate()
            .map(|(i, r)| (r.logical_id.clone(), i))
            .collect();
        let t = Template {
            heat: heat_names,
            resource_index,
            format_version,
            description,
            metadata: top.remove("Metadata"),
            parameters,
            mappings,
            conditions,
            rules,
            resources,
            outputs,
            source_map: SourceMap::default(),
        };
        t.check_condition_names()?;
        Ok(t)
    }

    /// Every Mappings attribute is a map of maps.
    fn check_mappings(mappings: &Map<String, Value>) -> Result<(), TemplateError> {
        for (name, m) in mappings {
            let path = child("/Mappings", name);
            let Value::Object(top_keys) = m else {
                return Err(
                    format_error(format!("Mappings attribute [{name}] must be an object"))
                        .at(&path),
                );
            };
            for (k, second) in top_keys {
                let Value::Object(values) = second else {
                    return Err(format_error(format!(
                        "Every Mappings attribute must be a map; [{name}.{k}] is not"
                    ))
                    .at(&child(&path, k)));
                };
                // No parameter, pseudo parameter or function in Mappings:
                // a value is text (a number or boolean written bare too) or
                // a list of them.
                let scalar = |v: &Value| !v.is_object() && !v.is_array() && !v.is_null();
                for (key, v) in values {
                    let ok = match v {
                        Value::Array(items) => items.iter().all(scalar),
                        other => scalar(other),
                    };
                    if !ok {
                        return Err(format_error(
                            "Every Mappings attribute must be a String or a List.",
                        )
                        .at(&child(&child(&path, k), key)));
                    }
                }
            }
        }
        Ok(())
    }

    /// One Outputs member: a Value, and only the keys CloudFormation knows.
    fn parse_output(name: &str, decl: &Value, path: &str) -> Result<Output, TemplateError> {
        let no_value = || format_error("Every Outputs member must contain a Value object").at(path);
        let Value::Object(o) = decl else {
            return Err(no_value());
        };
        let Some(value) = o.get("Value") else {
            return Err(no_value());
        };
        for k in o.keys() {
            if !matches!(k.as_str(), "Value" | "Description" | "Condition" | "Export") {
                return Err(
                    format_error(format!("Invalid outputs property : [{k}]")).at(&child(path, k))
                );
            }
        }
        let no_name =
            || format_error("Every Export member must contain a Name").at(&child(path, "Export"));
        if o.get("Description").is_some_and(|d| !d.is_string()) {
            return Err(format_error(format!(
                "Description of output {name} must be a string: CloudFormation takes no parameter or function there"
            ))
            .at(&child(path, "Description")));
        }
        let export_name = match o.get("Export") {
            None => None,
            Some(Value::Object(e)) => match e.get("Name") {
                Some(n) => Some(n.clone()),
                None => return Err(no_name()),
            },
            Some(_) => return Err(no_name()),
        };
        Ok(Output {
            name: name.to_string(),
            value: value.clone(),
            description: o.get("Description").and_then(string_of),
            condition: o.get("Condition").and_then(string_of),
            export_name,
        })
    }

    fn parse_resource(id: &str, decl: Value, path: &str) -> Result<Resource, TemplateError> {
        let Value::Object(mut r) = decl else {
            return Err(
                format_error("Every Resources object must contain a Type member.").at(path),
            );
        };
        // A custom resource may carry `Version` (templates published by
        // AWS do; CloudFormation accepts it there and nowhere else).
        let custom = r
            .get("Type")
            .and_then(Value::as_str)
            .is_some_and(crate::types::is_custom_resource);
        for k in r.keys() {
            let allowed = RESOURCE_ATTRIBUTES.contains(&k.as_str()) || (custom && k == "Version");
            if !allowed {
                return Err(
                    format_error(format!("Invalid template resource property '{k}'"))
                        .at(&child(path, k)),
                );
            }
        }
        let type_name = match r.get("Type") {
            Some(Value::String(t)) if !t.is_empty() => t.clone(),
            Some(_) => {
                return Err(format_error(
                    "Every Resources object must contain a Type member of type String.",
                )
                .at(&child(path, "Type")))
            }
            None => {
                return Err(
                    format_error("Every Resources object must contain a Type member.").at(path),
                )
            }
        };
        let properties = match r.remove("Properties") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(
                    format_error(format!("Properties of resource {id} must be an object"))
                        .at(&child(path, "Properties")),
                )
            }
        };
        let depends_on = match r.get("DependsOn") {
            None => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        _ => {
                            return Err(format_error(format!(
                                "DependsOn must be a string or a list of strings (resource {id})"
                            ))
                            .at(&child(&child(path, "DependsOn"), &i.to_string())))
                        }
                    }
                }
                out
            }
            Some(_) => {
                return Err(format_error(format!(
                    "DependsOn must be a string or a list of strings (resource {id})"
                ))
                .at(&child(path, "DependsOn")))
            }
        };
        let condition = match r.get("Condition") {
            None => None,
            Some(Value::String(c)) => Some(c.clone()),
            Some(_) => {
                return Err(format_error(format!(
                    "Condition of resource {id} must be a condition name"
                ))
                .at(&child(path, "Condition")))
            }
        };
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            if let Some(Value::String(p)) = r.get(policy) {
                if !matches!(
                    p.as_str(),
                    "Delete" | "Retain" | "Snapshot" | "RetainExceptOnCreate"
                ) {
                    return Err(format_error(format!(
                        "Unrecognized {policy} {p} for resource {id}; valid values are Delete, Retain, RetainExceptOnCreate, Snapshot"
                    ))
                    .at(&child(path, policy)));
                }
            }
        }
        Ok(Resource {
            logical_id: id.to_string(),
            type_name,
            properties,
            depends_on,
            condition,
            metadata: r.remove("Metadata"),
            deletion_policy: r.remove("DeletionPolicy"),
            update_replace_policy: r.remove("UpdateReplacePolicy"),
            creation_policy: r.remove("CreationPolicy"),
            update_policy: r.remove("UpdatePolicy"),
            external_id: r.remove(EXTERNAL_ID),
            written_type: match r.remove(WRITTEN_TYPE) {
                Some(Value::String(t)) => Some(t),
                _ => None,
            },
            written_member_type: match r.remove(WRITTEN_MEMBER_TYPE) {
                Some(Value::String(t)) => Some(t),
                _ => None,
            },
            replace_on_update: r.remove(REPLACE_ON_UPDATE) == Some(Value::Bool(true)),
        })
    }

    /// Every `Condition:` on a resource or output names a declared condition.
    fn check_condition_names(&self) -> Result<(), TemplateError> {
        for r in &self.resources {
            if let Some(c) = &r.condition {
                if !self.conditions.contains_key(c) {
                    return Err(format_error(format!(
                        "Unresolved condition dependencies [{c}] in the Resources block of the template"
                    ))
                    .at(&child(&child("/Resources", &r.logical_id), "Condition")));
                }
            }
        }
        for o in &self.outputs {
            if let Some(c) = &o.condition {
                if !self.conditions.contains_key(c) {
                    return Err(format_error(format!(
                        "Unresolved condition dependencies [{c}] in the Outputs block of the template"
                    ))
                    .at(&child(&child("/Outputs", &o.name), "Condition")));
                }
            }
        }
        Ok(())
    }

    pub fn resource(&self, logical_id: &str) -> Option<&Resource> {
        self.resource_index
            .get(logical_id)
            .and_then(|&i| self.resources.get(i))
    }

    pub fn parameter(&self, name: &str) -> Option<&ParameterDecl> {
        self.parameters.iter().find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> TemplateError {
        match Template::parse(text) {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => e,
        }
    }

    #[test]
    fn invalid_top_level_keys() {
        let e = err("{\"Resources\": {\"A\": {\"Type\": \"T\"}}, \"a\": 1, \"b\": 2}");
        assert_eq!(
            e.message(),
            "Template format error: Invalid template property or properties [a, b]"
        );
    }

    #[test]
    fn an_unprocessed_macro_is_refused() {
        let e = err("Transform: AWS::Serverless-2016-10-31\nResources:\n  A:\n    Type: T\n");
        assert!(
            e.message()
                .starts_with("Template format error: Transform AWS::Serverless-2016-10-31 names a macro, and macros run only when a stack's template is deployed"),
            "{e}"
        );
        assert_eq!(e.location().map(|l| l.line), Some(1));
    }

    #[test]
    fn resources_are_required_and_typed() {
        assert_eq!(
            err("Description: x\n").message(),
            "Template format error: At least one Resources member must be defined."
        );
        let e = err("Resources:\n  A:\n    Properties: {}\n");
        assert_eq!(
            e.message(),
            "Template format error: Every Resources object must contain a Type member."
        );
        assert_eq!(e.path(), "/Resources/A");
        assert_eq!(e.to_string(), "Template format error: Every Resources object must contain a Type member. (at /Resources/A, line 3, column 5)");
        assert_eq!(
            err("Resources:\n  A-1:\n    Type: T\n").message(),
            "Template format error: Resource name A-1 is non alphanumeric."
        );
        assert_eq!(
            err("Resources:\n  A:\n    Type: T\n    Bogus: 1\n").message(),
            "Template format error: Invalid template resource property 'Bogus'"
        );
        // Version: on a custom resource only.
        assert_eq!(
            err("Resources:\n  A:\n    Type: T\n    Version: '1.0'\n").message(),
            "Template format error: Invalid template resource property 'Version'"
        );
        for custom in ["Custom::Thing", "AWS::CloudFormation::CustomResource"] {
            let t = format!("Resources:\n  A:\n    Type: {custom}\n    Version: '1.0'\n    Properties: {{ServiceToken: x}}\n");
            assert!(Template::parse(&t).is_ok(), "{custom}");
        }
    }

    #[test]
    fn outputs_need_values() {
        let e = err("Resources:\n  A:\n    Type: T\nOutputs:\n  O:\n    Description: x\n");
        assert_eq!(
            e.message(),
            "Template format error: Every Outputs member must contain a Value object"
        );
    }

    #[test]
    fn unknown_condition_on_resource() {
        let e = err("Resources:\n  A:\n    Type: T\n    Condition: Nope\n");
        assert_eq!(e.message(), "Template format error: Unresolved condition dependencies [Nope] in the Resources block of the template");
    }

    #[test]
    fn sections_are_read() {
        let t = Template::parse(
            "AWSTemplateFormatVersion: '2010-09-09'\nDescription: demo\nResources:\n  A:\n    Type: T\n    DependsOn: B\n    Properties: {X: 1}\n  B:\n    Type: T\n    DependsOn: [A]\nOutputs:\n  O:\n    Value: !Ref A\n    Export: {Name: e}\n",
        )
        .unwrap();
        assert_eq!(t.description.as_deref(), Some("demo"));
        assert_eq!(t.resources.len(), 2);
        assert_eq!(t.resources[0].depends_on, vec!["B"]);
        assert_eq!(t.resources[1].depends_on, vec!["A"]);
        assert_eq!(t.outputs[0].export_name, Some(Value::String("e".into())));
    }

    #[test]
    fn bad_json_says_where() {
        let e = err("{\"Resources\": ");
        assert!(
            e.message()
                .starts_with("Template format error: JSON not well-formed."),
            "{e}"
        );
    }
}
