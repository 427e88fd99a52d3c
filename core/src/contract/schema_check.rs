//! `schema_well_formed`: what can be wrong with a type's schema before any
//! call, each problem in one sentence naming the property.

use cairn_sdk::{PropertyType, ResourceSchema, UpdateBehavior};

use super::Inputs;

/// `Org::Service::Resource` (three or more segments), or `Custom::Name`.
fn well_named(type_name: &str) -> bool {
    let parts: Vec<&str> = type_name.split("::").collect();
    let segments_ok = parts
        .iter()
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    segments_ok && (parts.len() >= 3 || (parts.len() == 2 && parts[0] == "Custom"))
}

pub(super) fn problems(
    type_name: &str,
    schema: &ResourceSchema,
    declared: &[ResourceSchema],
    inputs: &Inputs,
) -> Vec<String> {
    let mut out = Vec::new();
    // An alias or a family (Custom::<Name>) is served under another name.
    if schema.type_name == type_name {
        if !well_named(type_name) {
            out.push(format!(
                "type name {type_name} must be Organization::Service::Resource (alphanumeric segments) or Custom::Name"
            ));
        }
        let times = declared.iter().filter(|s| s.type_name == type_name).count();
        if times != 1 {
            out.push(format!(
                "the provider's schema() must declare {type_name} once; it declares it {times} times"
            ));
        }
    }
    for name in &schema.primary_identifier {
        if !schema.properties.contains_key(name) && !schema.attributes.contains_key(name) {
            out.push(format!(
                "primary identifier {name} is neither a declared property nor an attribute"
            ));
        }
    }
    for (name, p) in &schema.properties {
        if p.refusal.is_some() && p.update != UpdateBehavior::Immutable {
            out.push(format!(
                "property {name} has a refusal reason but is {:?}: only an Immutable property refuses updates",
                p.update
            ));
        }
        // Json: a string or a list of them, checked when given (Cairn's
        // own test type takes `Fail: create` or `Fail: [create, delete]`).
        let strings = matches!(&p.ty, PropertyType::String | PropertyType::Json)
            || matches!(&p.ty, PropertyType::List(t) if **t == PropertyType::String);
        if !p.allowed_values.is_empty() && !strings {
            out.push(format!(
                "property {name} lists allowed values but is of type {}: allowed values are strings",
                p.ty.name()
            ));
        }
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(format!(
                "property name {name:?} must be alphanumeric (templates name it in Properties)"
            ));
        }
    }
    for name in schema.attributes.keys() {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        {
            out.push(format!(
                "attribute name {name:?} must be alphanumeric (dots allowed): Fn::GetAtt names it"
            ));
        }
    }
    if schema.ref_returns.trim().is_empty() {
        out.push("ref_returns must say what Ref returns".into());
    }
    if !schema.additional_properties {
        let given = inputs
            .create
            .iter()
            .chain(inputs.updates.iter())
            .flat_map(|m| m.keys());
        let mut unknown: Vec<&str> = given
            .filter(|k| !schema.properties.contains_key(*k))
            .map(String::as_str)
            .collect();
        unknown.sort_unstable();
        unknown.dedup();
        if !unknown.is_empty() {
            out.push(format!(
                "the create and update inputs name properties the schema does not declare: {}",
                unknown.join(", ")
            ));
        }
    }
    out
}
