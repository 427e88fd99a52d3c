//! A resource type's schema in CloudFormation's form (the registry's
//! `schema.json`: typeName, properties as JSON Schema, createOnly, readOnly
//! and writeOnly properties, primaryIdentifier, handlers,
//! typeConfiguration) and the engine's [`ResourceSchema`].
//!
//! What CloudFormation's form cannot say is kept in `x-cairn` keywords,
//! which JSON Schema allows and other tools ignore: a property updated with
//! interruption or not at all (and the refusal's text), the capabilities a
//! stack must acknowledge, what `Ref` returns.

use std::collections::BTreeMap;

use cairn_sdk::{AttributeSchema, PropertySchema, PropertyType, ResourceSchema, UpdateBehavior};
use serde_json::{json, Map, Value};

/// CloudFormation's type name pattern for resource and hook types.
pub fn valid_type_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split("::").collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| (2..=64).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// A schema.json that does not describe a resource type Cairn can serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema.json: {0}")]
pub struct SchemaError(pub String);

fn err(message: impl Into<String>) -> SchemaError {
    SchemaError(message.into())
}

/// The CloudFormation-style schema of `schema`.
pub fn to_cloudformation(schema: &ResourceSchema) -> Value {
    let mut properties = Map::new();
    for (name, p) in &schema.properties {
        properties.insert(name.clone(), property_to_json(p));
    }
    // CloudFormation lists attributes as read-only properties.
    for (name, a) in &schema.attributes {
        let mut attr = Map::new();
        if !a.description.is_empty() {
            attr.insert("description".into(), json!(a.description));
        }
        properties
            .entry(name.clone())
            .or_insert(Value::Object(attr));
    }
    let pointers = |names: Vec<&String>| -> Vec<String> {
        names
            .into_iter()
            .map(|n| format!("/properties/{n}"))
            .collect()
    };
    let required: Vec<&String> = schema
        .properties
        .iter()
        .filter(|(_, p)| p.required)
        .map(|(n, _)| n)
        .collect();
    let create_only = pointers(
        schema
            .properties
            .iter()
            .filter(|(_, p)| p.update == UpdateBehavior::CreateOnly)
            .map(|(n, _)| n)
            .collect(),
    );
    let read_only = pointers(
        schema
            .attributes
            .keys()
            .filter(|n| !schema.properties.contains_key(*n))
            .collect(),
    );
    let mut out = Map::new();
    out.insert("typeName".into(), json!(schema.type_name));
    out.insert("description".into(), json!(schema.description));
    out.insert("properties".into(), Value::Object(properties));
    out.insert(
        "additionalProperties".into(),
        json!(schema.additional_properties),
    );
    if !required.is_empty() {
        out.insert("required".into(), json!(required));
    }
    if !create_only.is_empty() {
        out.insert("createOnlyProperties".into(), json!(create_only));
    }
    if !read_only.is_empty() {
        out.insert("readOnlyProperties".into(), json!(read_only));
    }
    let identifier: Vec<String> = schema
        .primary_identifier
        .iter()
        .map(|n| format!("/properties/{n}"))
        .collect();
    out.insert("primaryIdentifier".into(), json!(identifier));
    if schema.taggable {
        out.insert("tagging".into(), json!({"taggable": true}));
    }
    let handler = json!({"permissions": []});
    out.insert(
        "handlers".into(),
        json!({"create": handler, "read": handler, "update": handler, "delete": handler}),
    );
    let mut cairn = Map::new();
    if !schema.required_capabilities.is_empty() {
        cairn.insert(
            "requiredCapabilities".into(),
            json!(schema.required_capabilities),
        );
    }
    if schema.ref_returns != ResourceSchema::new("x").ref_returns {
        cairn.insert("refReturns".into(), json!(schema.ref_returns));
    }
    if !cairn.is_empty() {
        out.insert("x-cairn".into(), Value::Object(cairn));
    }
    Value::Object(out)
}

fn property_to_json(p: &PropertySchema) -> Value {
    let mut out = match type_to_json(&p.ty) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if !p.description.is_empty() {
        out.insert("description".into(), json!(p.description));
    }
    if !p.allowed_values.is_empty() {
        // A list's allowed values constrain each of its items.
        match out.get_mut("items") {
            Some(Value::Object(items)) => {
                items.insert("enum".into(), json!(p.allowed_values));
            }
            _ => {
                out.insert("enum".into(), json!(p.allowed_values));
            }
        }
    }
    let update = match p.update {
        UpdateBehavior::MutableWithInterruption => Some("MutableWithInterruption"),
        UpdateBehavior::Immutable => Some("Immutable"),
        UpdateBehavior::Mutable | UpdateBehavior::CreateOnly => None,
    };
    if update.is_some() || p.refusal.is_some() {
        let mut cairn = Map::new();
        if let Some(u) = update {
            cairn.insert("update".into(), json!(u));
        }
        if let Some(r) = &p.refusal {
            cairn.insert("refusal".into(), json!(r));
        }
        out.insert("x-cairn".into(), Value::Object(cairn));
    }
    Value::Object(out)
}

fn type_to_json(t: &PropertyType) -> Value {
    match t {
        PropertyType::String => json!({"type": "string"}),
        PropertyType::Integer => json!({"type": "integer"}),
        PropertyType::Number => json!({"type": "number"}),
        PropertyType::Boolean => json!({"type": "boolean"}),
        PropertyType::List(items) => json!({"type": "array", "items": type_to_json(items)}),
        PropertyType::Map(values) => {
            json!({"type": "object", "additionalProperties": type_to_json(values)})
        }
        PropertyType::Json => json!({}),
    }
}

fn type_from_json(name: &str, v: &Value) -> Result<PropertyType, SchemaError> {
    let ty = match v.get("type") {
        None => return Ok(PropertyType::Json),
        Some(Value::String(t)) => t.as_str(),
        // ["string", "object"]: any of several is left unchecked.
        Some(Value::Array(_)) => return Ok(PropertyType::Json),
        Some(other) => {
            return Err(err(format!(
                "property {name}: type must be a string, not {other}"
            )))
        }
    };
    Ok(match ty {
        "string" => PropertyType::String,
        "integer" => PropertyType::Integer,
        "number" => PropertyType::Number,
        "boolean" => PropertyType::Boolean,
        "array" => PropertyType::List(Box::new(match v.get("items") {
            Some(items) => type_from_json(name, items)?,
            None => PropertyType::Json,
        })),
        "object" => match v.get("additionalProperties") {
            Some(values @ Value::Object(_)) => {
                PropertyType::Map(Box::new(type_from_json(name, values)?))
            }
            // An object with declared properties: its shape is the
            // provider's to check.
            _ => PropertyType::Json,
        },
        other => {
            return Err(err(format!(
                "property {name}: type {other} is not a JSON Schema type (string, integer, number, boolean, array, object)"
            )))
        }
    })
}

/// The names a list of `/properties/<Name>` pointers gives; `field` names
/// the list in errors.
fn pointer_names(schema: &Map<String, Value>, field: &str) -> Result<Vec<String>, SchemaError> {
    let Some(list) = schema.get(field) else {
        return Ok(Vec::new());
    };
    let Some(items) = list.as_array() else {
        return Err(err(format!(
            "{field} must be a list of JSON pointers such as /properties/Name"
        )));
    };
    items
        .iter()
        .map(|p| {
            p.as_str()
                .and_then(|p| p.strip_prefix("/properties/"))
                .map(|n| n.split('/').next().unwrap_or(n).to_string())
                .ok_or_else(|| {
                    err(format!(
                        "{field}: {p} is not a JSON pointer such as /properties/Name"
                    ))
                })
        })
        .collect()
}

/// The engine's schema of a CloudFormation-style `schema`.
pub fn from_cloudformation(schema: &Value) -> Result<ResourceSchema, SchemaError> {
    let Some(s) = schema.as_object() else {
        return Err(err("the schema must be a JSON object"));
    };
    let type_name = match s.get("typeName") {
        Some(Value::String(t)) => t.clone(),
        _ => return Err(err("the required property typeName is missing")),
    };
    if !valid_type_name(&type_name) {
        return Err(err(format!(
            "typeName {type_name} must be three parts of 2 to 64 letters and digits, separated by :: (Organization::Service::Resource)"
        )));
    }
    let Some(Value::Object(props)) = s.get("properties") else {
        return Err(err("the required property properties is missing"));
    };
    if !s.contains_key("primaryIdentifier") {
        return Err(err("the required property primaryIdentifier is missing"));
    }
    let required = match s.get("required") {
        None => Vec::new(),
        Some(Value::Array(r)) => r
            .iter()
            .map(|n| {
                n.as_str()
                    .map(String::from)
                    .ok_or_else(|| err("required must be a list of property names"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(err("required must be a list of property names")),
    };
    let create_only = pointer_names(s, "createOnlyProperties")?;
    let read_only = pointer_names(s, "readOnlyProperties")?;
    let identifier = pointer_names(s, "primaryIdentifier")?;
    for (field, names) in [
        ("required", &required),
        ("createOnlyProperties", &create_only),
        ("readOnlyProperties", &read_only),
        ("primaryIdentifier", &identifier),
    ] {
        if let Some(n) = names.iter().find(|n| !props.contains_key(*n)) {
            return Err(err(format!(
                "{field} names {n}, which is not one of its properties"
            )));
        }
    }
    let mut properties = BTreeMap::new();
    let mut attributes = BTreeMap::new();
    for (name, p) in props {
        let description = p
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if read_only.contains(name) {
            attributes.insert(name.clone(), AttributeSchema { description });
            continue;
        }
        let mut prop = PropertySchema::of(type_from_json(name, p)?);
        prop.description = description;
        prop.required = required.contains(name);
        let allowed = p
            .get("enum")
            .or_else(|| p.get("items").and_then(|i| i.get("enum")));
        if let Some(Value::Array(values)) = allowed {
            prop.allowed_values = values
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect();
        }
        let cairn = p.get("x-cairn");
        prop.update = match cairn.and_then(|c| c.get("update")).and_then(Value::as_str) {
            Some("MutableWithInterruption") => UpdateBehavior::MutableWithInterruption,
            Some("Immutable") => UpdateBehavior::Immutable,
            _ if create_only.contains(name) => UpdateBehavior::CreateOnly,
            _ => UpdateBehavior::Mutable,
        };
        prop.refusal = cairn
            .and_then(|c| c.get("refusal"))
            .and_then(Value::as_str)
            .map(String::from);
        properties.insert(name.clone(), prop);
    }
    let mut out = ResourceSchema::new(&type_name);
    out.description = s
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    out.properties = properties;
    out.attributes = attributes;
    out.additional_properties = s.get("additionalProperties") == Some(&Value::Bool(true));
    out.primary_identifier = identifier;
    out.taggable = s
        .get("tagging")
        .and_then(|t| t.get("taggable"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let cairn = s.get("x-cairn");
    if let Some(Value::Array(caps)) = cairn.and_then(|c| c.get("requiredCapabilities")) {
        out.required_capabilities = caps
            .iter()
            .filter_map(|c| c.as_str().map(String::from))
            .collect();
    }
    if let Some(r) = cairn
        .and_then(|c| c.get("refReturns"))
        .and_then(Value::as_str)
    {
        out.ref_returns = r.to_string();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note() -> ResourceSchema {
        let mut s = ResourceSchema::new("Example::Notes::Note");
        s.description = "A note".into();
        s.properties.insert(
            "Title".into(),
            PropertySchema::string().required().create_only(),
        );
        s.properties.insert(
            "Body".into(),
            PropertySchema::string()
                .describe("The text")
                .with_interruption(),
        );
        s.properties.insert(
            "Tags".into(),
            PropertySchema::list(PropertyType::String).allowing(&["a", "b"]),
        );
        s.properties.insert(
            "Size".into(),
            PropertySchema::integer().refusing_updates("Size cannot change."),
        );
        s.properties
            .insert("Labels".into(), PropertySchema::map(PropertyType::Integer));
        s.attributes.insert(
            "Id".into(),
            AttributeSchema {
                description: "Its id".into(),
            },
        );
        s.primary_identifier = vec!["Id".into()];
        s.required_capabilities = vec!["CAPABILITY_NOTES".into()];
        s.taggable = true;
        s
    }

    #[test]
    fn a_schema_reads_back_as_it_was_written() {
        let cfn = to_cloudformation(&note());
        assert_eq!(from_cloudformation(&cfn), Ok(note()));
    }

    #[test]
    fn the_cloudformation_form_uses_cloudformations_fields() {
        let cfn = to_cloudformation(&note());
        assert_eq!(cfn["typeName"], "Example::Notes::Note");
        assert_eq!(cfn["createOnlyProperties"], json!(["/properties/Title"]));
        assert_eq!(cfn["readOnlyProperties"], json!(["/properties/Id"]));
        assert_eq!(cfn["primaryIdentifier"], json!(["/properties/Id"]));
        assert_eq!(cfn["required"], json!(["Title"]));
        assert_eq!(cfn["additionalProperties"], json!(false));
        assert_eq!(
            cfn["properties"]["Tags"],
            json!({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}})
        );
        assert_eq!(
            cfn["properties"]["Labels"],
            json!({"type": "object", "additionalProperties": {"type": "integer"}})
        );
        assert_eq!(
            cfn["properties"]["Size"]["x-cairn"],
            json!({"update": "Immutable", "refusal": "Size cannot change."})
        );
        assert_eq!(cfn["tagging"], json!({"taggable": true}));
    }

    #[test]
    fn a_schema_that_names_what_it_lacks_is_refused_with_the_name() {
        let refused = |v: Value| from_cloudformation(&v).err().map(|e| e.to_string());
        assert_eq!(
            refused(json!({"properties": {}, "primaryIdentifier": []})).as_deref(),
            Some("schema.json: the required property typeName is missing")
        );
        assert_eq!(
            refused(json!({"typeName": "Bad::Name", "properties": {}, "primaryIdentifier": []})).as_deref(),
            Some("schema.json: typeName Bad::Name must be three parts of 2 to 64 letters and digits, separated by :: (Organization::Service::Resource)")
        );
        assert_eq!(
            refused(json!({"typeName": "A1::B2::C3", "properties": {"X": {"type": "string"}}, "primaryIdentifier": ["/properties/Y"]})).as_deref(),
            Some("schema.json: primaryIdentifier names Y, which is not one of its properties")
        );
        assert_eq!(
            refused(json!({"typeName": "A1::B2::C3", "properties": {"X": {"type": "text"}}, "primaryIdentifier": ["/properties/X"]})).as_deref(),
            Some("schema.json: property X: type text is not a JSON Schema type (string, integer, number, boolean, array, object)")
        );
    }

    #[test]
    fn type_names_follow_cloudformations_pattern() {
        assert!(valid_type_name("Example::Notes::Note"));
        assert!(!valid_type_name("Example::Notes"));
        assert!(!valid_type_name("E::Notes::Note"));
        assert!(!valid_type_name("Ex-1::Notes::Note"));
    }
}
