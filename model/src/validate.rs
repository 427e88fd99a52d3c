//! Checks a template against the registered providers before any work starts:
//! every type is served, every `Fn::GetAtt` reads a declared attribute, and every
//! property value that is already known fits its schema.

use serde_json::Value;

use crate::catalog::TypeCatalog;
use crate::graph::Graph;
use crate::template::source::child;
use crate::template::{format_error, template_error, Template, TemplateError};

/// Unknown resource types, in template order (`Unrecognized resource types: [..]`).
pub fn check_types(template: &Template, registry: &dyn TypeCatalog) -> Result<(), TemplateError> {
    let mut unknown: Vec<&str> = Vec::new();
    for r in &template.resources {
        if registry.schema(&r.type_name).is_none() && !unknown.contains(&r.type_name.as_str()) {
            unknown.push(&r.type_name);
        }
    }
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(unrecognized(&unknown, registry))
    }
}

/// `Unrecognized resource types: [..]`; a type whose provider cannot start
/// is not unknown, so the message says which provider and why.
fn unrecognized(types: &[&str], registry: &dyn TypeCatalog) -> TemplateError {
    let reasons: Vec<String> = types
        .iter()
        .filter_map(|t| registry.unavailable_reason(t))
        .collect();
    let mut message = format!("Unrecognized resource types: [{}]", types.join(", "));
    if !reasons.is_empty() {
        message.push_str(&format!(" ({})", reasons.join("; ")));
    }
    format_error(message)
}

/// For a type that is an alias: which type serves it, so an error about
/// the template's type name says whose schema it was checked against.
fn alias_note(registry: &dyn TypeCatalog, type_name: &str) -> String {
    let canonical = registry.canonical(type_name);
    if canonical == type_name {
        return String::new();
    }
    let provider = registry
        .provider_name(type_name)
        .map(|p| format!(" of provider {p}"))
        .unwrap_or_default();
    format!(
        " ({type_name} is an alias: it is served by {canonical}{provider}, whose schema this is)"
    )
}

/// Every `Fn::GetAtt` (in resources and outputs) names an attribute its
/// resource's schema declares.
pub fn check_attributes(
    template: &Template,
    graph: &Graph,
    registry: &dyn TypeCatalog,
) -> Result<(), TemplateError> {
    let check = |res: &str, attr: &str, at: &str| -> Result<(), TemplateError> {
        let Some(r) = template.resource(res) else {
            return Ok(());
        };
        // All of them, as one map (HOT's `get_attr: [resource]`).
        if attr == crate::template::types::ALL_ATTRIBUTES {
            return Ok(());
        }
        let Some(schema) = registry.schema(&r.type_name) else {
            return Ok(());
        };
        if schema.additional_properties && schema.attributes.is_empty() {
            // Custom resources return arbitrary Data keys.
            return Ok(());
        }
        // A nested stack's attributes are its outputs (checked against the
        // child's template by `nested::collect`).
        if crate::nested::is_stack(registry.canonical(&r.type_name))
            && (attr.starts_with("Outputs.")
                || attr == crate::nested::OUTPUTS_ATTRIBUTE
                || attr == crate::nested::RESOURCES_ATTRIBUTE)
        {
            return Ok(());
        }
        if schema.attributes.contains_key(attr) {
            return Ok(());
        }
        let valid: Vec<&str> = schema.attributes.keys().map(String::as_str).collect();
        Err(template_error(format!(
            "resource {res} does not support attribute type {attr} in Fn::GetAtt (type {} has: {}){}",
            r.type_name,
            if valid.is_empty() { "no attributes".to_string() } else { valid.join(", ") },
            alias_note(registry, &r.type_name)
        ))
            .at(at))
    };
    each_get_att(template, graph, check)
}

/// Calls `check(resource, attribute, pointer)` for every `Fn::GetAtt` of
/// the resources (as the graph found them) and the outputs; stops at the
/// first error.
pub fn each_get_att(
    template: &Template,
    graph: &Graph,
    mut check: impl FnMut(&str, &str, &str) -> Result<(), TemplateError>,
) -> Result<(), TemplateError> {
    for (node, res, attr) in graph.attribute_uses() {
        check(res, attr, &child("/Resources", graph.name(*node)))?;
    }
    for o in &template.outputs {
        let path = child(&child("/Outputs", &o.name), "Value");
        let mut refs = Vec::new();
        crate::graph::references(&o.value, &path, &|_| None, &mut refs);
        for r in refs {
            if let Some(attr) = &r.attribute {
                check(&r.target, attr, &r.path)?;
            }
        }
    }
    Ok(())
}

/// Checks (and coerces) one resource's properties against its schema. Values that
/// are still unevaluated intrinsics pass; they are checked again once resolved.
pub fn check_properties(
    logical_id: &str,
    type_name: &str,
    properties: &serde_json::Map<String, Value>,
    registry: &dyn TypeCatalog,
) -> Result<serde_json::Map<String, Value>, TemplateError> {
    let Some(schema) = registry.schema(type_name) else {
        return Err(unrecognized(&[type_name], registry));
    };
    schema.validate(properties).map_err(|errors| {
        let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
        TemplateError::new(format!(
            "Properties validation failed for resource {logical_id} with message: {}{}",
            texts.join("; "),
            alias_note(registry, type_name)
        ))
        .at(&child(&child("/Resources", logical_id), "Properties"))
    })
}

/// The template-only checks `cairn validate` runs: structure (already done by
/// parsing), references and cycles with conditions unknown, types, attributes,
/// and the schema of literal property values.
pub fn validate_template(
    template: &Template,
    registry: &dyn TypeCatalog,
) -> Result<Graph, TemplateError> {
    let graph = Graph::build(template, &|_| None).map_err(|e| e.locate(&template.source_map))?;
    check_types(template, registry)?;
    check_attributes(template, &graph, registry).map_err(|e| e.locate(&template.source_map))?;
    for r in &template.resources {
        check_properties(&r.logical_id, &r.type_name, &r.properties, registry)
            .map_err(|e| e.locate(&template.source_map))?;
    }
    Ok(graph)
}
