//! Inputs derived from a schema, for the tests an author gave none for:
//! a create input of the required properties, one update per Mutable and
//! per CreateOnly property, and an input of the wrong type.

use cairn_sdk::{PropertySchema, PropertyType, ResourceSchema, UpdateBehavior};
use serde_json::{json, Map, Value};

/// A value of `ty`; `n` tells two values apart (create 1, update 2).
fn value_of(p: &PropertySchema, n: usize) -> Option<Value> {
    if !p.allowed_values.is_empty() {
        let i = (n - 1).min(p.allowed_values.len() - 1);
        return Some(Value::String(p.allowed_values[i].clone()));
    }
    Some(match &p.ty {
        PropertyType::String => Value::String(format!("contract-test-{n}")),
        PropertyType::Integer => json!(n),
        PropertyType::Number => json!(n as f64 + 0.5),
        PropertyType::Boolean => Value::Bool(n.is_multiple_of(2)),
        PropertyType::List(item) => {
            let inner = PropertySchema::of((**item).clone());
            Value::Array(vec![value_of(&inner, n)?])
        }
        PropertyType::Map(item) => {
            let inner = PropertySchema::of((**item).clone());
            json!({ "ContractTest": value_of(&inner, n)? })
        }
        PropertyType::Json => json!({ "ContractTest": n }),
    })
}

/// A required property no value can be derived for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no create input given and none can be derived for property {0}; give one with --properties"
)]
pub struct NoInputFor(pub String);

/// The required properties, each with a value of its type; an error names
/// the property no value can be made for.
pub fn create_input(schema: &ResourceSchema) -> Result<Map<String, Value>, NoInputFor> {
    let mut out = Map::new();
    for (name, p) in schema.properties.iter().filter(|(_, p)| p.required) {
        let v = value_of(p, 1).ok_or_else(|| NoInputFor(name.clone()))?;
        out.insert(name.clone(), v);
    }
    Ok(out)
}

/// From `current`: one update per Mutable property (then per CreateOnly
/// one), each changing that property alone. Properties with a single
/// allowed value cannot change and are left out.
pub fn updates(schema: &ResourceSchema, current: &Map<String, Value>) -> Vec<Map<String, Value>> {
    let mut steps = Vec::new();
    let mut state = current.clone();
    for wanted in [
        UpdateBehavior::Mutable,
        UpdateBehavior::MutableWithInterruption,
        UpdateBehavior::CreateOnly,
    ] {
        for (name, p) in schema.properties.iter().filter(|(_, p)| p.update == wanted) {
            let Some(next) = [2, 1]
                .into_iter()
                .filter_map(|n| value_of(p, n))
                .find(|v| state.get(name) != Some(v))
            else {
                continue;
            };
            state.insert(name.clone(), next);
            steps.push(state.clone());
        }
    }
    steps
}

/// `valid` with one declared property given a value of the wrong type (an
/// object where a scalar or list is expected, a string where an object is).
pub fn invalid_input(
    schema: &ResourceSchema,
    valid: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let (name, wrong) = schema.properties.iter().find_map(|(name, p)| {
        let wrong = match &p.ty {
            PropertyType::String
            | PropertyType::Integer
            | PropertyType::Number
            | PropertyType::Boolean
            | PropertyType::List(_) => json!({ "NotA": p.ty.name() }),
            PropertyType::Map(_) => json!(["not", "a", "map"]),
            PropertyType::Json => return None,
        };
        Some((name.clone(), wrong))
    })?;
    let mut out = valid.clone();
    out.insert(name, wrong);
    Some(out)
}
