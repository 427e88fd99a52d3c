//! The property schemas of Heat's own types that HOT lowers into the
//! engine's (`OS::Heat::ResourceGroup`, `OS::Heat::AutoScalingGroup`,
//! `OS::Heat::Stack`, `OS::Heat::WaitCondition`), checked as Heat's
//! `heat/engine/properties.py` checks them, with its texts. A value that
//! is a function is checked by what it gives, when it runs.

use serde_json::Value;

use super::super::source::child;
use super::super::TemplateError;

#[derive(Clone, Copy)]
enum Kind {
    Integer,
    Number,
    String,
    Map,
    List,
    /// A string or a map (OS::Heat::Stack's `template`).
    Any,
}

struct Prop {
    name: &'static str,
    kind: Kind,
    required: bool,
    allowed: &'static [&'static str],
}

const fn prop(name: &'static str, kind: Kind) -> Prop {
    Prop {
        name,
        kind,
        required: false,
        allowed: &[],
    }
}

const fn required(name: &'static str, kind: Kind) -> Prop {
    Prop {
        name,
        kind,
        required: true,
        allowed: &[],
    }
}

/// heat/engine/resources/openstack/heat/resource_group.py.
const RESOURCE_GROUP: &[Prop] = &[
    prop("count", Kind::Integer),
    prop("index_var", Kind::String),
    required("resource_def", Kind::Map),
    prop("removal_policies", Kind::List),
    Prop {
        name: "removal_policies_mode",
        kind: Kind::String,
        required: false,
        allowed: &["append", "update"],
    },
];

/// heat/engine/resources/openstack/heat/autoscaling_group.py.
const AUTOSCALING_GROUP: &[Prop] = &[
    required("resource", Kind::Map),
    required("max_size", Kind::Integer),
    required("min_size", Kind::Integer),
    prop("cooldown", Kind::Integer),
    prop("desired_capacity", Kind::Integer),
    prop("rolling_updates", Kind::Map),
];

/// heat/engine/resources/openstack/heat/remote_stack.py.
const STACK: &[Prop] = &[
    prop("context", Kind::Map),
    required("template", Kind::Any),
    prop("timeout", Kind::Integer),
    prop("parameters", Kind::Map),
];

/// heat/engine/resources/openstack/heat/wait_condition.py.
const WAIT_CONDITION: &[Prop] = &[
    required("handle", Kind::String),
    prop("timeout", Kind::Number),
    prop("count", Kind::Integer),
];

fn schema(type_name: &str) -> Option<&'static [Prop]> {
    Some(match type_name {
        super::RESOURCE_GROUP => RESOURCE_GROUP,
        super::AUTOSCALING_GROUP => AUTOSCALING_GROUP,
        super::HEAT_STACK => STACK,
        super::HEAT_WAIT_CONDITION => WAIT_CONDITION,
        _ => return None,
    })
}

/// Python's `repr` of a JSON value, as Heat's messages show values.
fn repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("'{k}': {}", repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Python's `str` of a JSON value.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// Why `v` is not of `kind`, in Heat's words; `None`: it is.
fn mismatch(kind: Kind, v: &Value) -> Option<String> {
    let integer = |s: &str| s.trim().parse::<i64>().is_ok();
    match (kind, v) {
        (Kind::Any, _) => None,
        (Kind::List, Value::Array(_)) => None,
        (Kind::List, other) => Some(format!("\"{}\" is not a list", repr(other))),
        (Kind::Map, Value::Object(_)) => None,
        (Kind::Map, other) => Some(format!("\"{}\" is not a map", text(other))),
        (Kind::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => None,
        (Kind::Integer, Value::Bool(_)) => None,
        (Kind::Integer, Value::String(s)) if integer(s) => None,
        (Kind::Integer, other) => Some(format!("Value '{}' is not an integer", text(other))),
        (Kind::Number, Value::Number(_)) => None,
        (Kind::Number, Value::String(s)) if s.trim().parse::<f64>().is_ok() => None,
        (Kind::Number, other) => Some(format!(
            "could not convert string to float: {}",
            repr(other)
        )),
        (Kind::String, Value::String(_) | Value::Number(_) | Value::Bool(_)) => None,
        (Kind::String, other) => Some(format!("Value must be a string; got {}", repr(other))),
    }
}

/// Checks the `properties` of resource `name` of Heat type `type_name`
/// (at `path`, the resource's): unknown properties, required ones, and
/// each literal value's type and allowed values. `is_function`: whether a
/// value is a function call (checked when it runs).
pub(super) fn check(
    name: &str,
    type_name: &str,
    properties: Option<&Value>,
    path: &str,
    is_function: impl Fn(&Value) -> bool,
) -> Result<(), TemplateError> {
    let Some(schema) = schema(type_name) else {
        return Ok(());
    };
    let at = child(path, "properties");
    let error = |suffix: &str, message: String, at: &str| {
        TemplateError::new(format!(
            "Property error: resources.{name}.properties{suffix}: {message}"
        ))
        .at(at)
    };
    let empty = serde_json::Map::new();
    let props = match properties {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(other) if is_function(other) => return Ok(()),
        Some(other) => return Err(error("", format!("\"{}\" is not a map", text(other)), &at)),
    };
    if let Some(k) = props
        .keys()
        .find(|k| !schema.iter().any(|p| p.name == k.as_str()))
    {
        return Err(error("", format!("Unknown Property {k}"), &child(&at, k)));
    }
    for p in schema {
        let value = props.get(p.name).filter(|v| !v.is_null());
        let Some(v) = value else {
            if p.required {
                return Err(error("", format!("Property {} not assigned", p.name), &at));
            }
            continue;
        };
        if is_function(v) {
            continue;
        }
        let suffix = format!(".{}", p.name);
        let here = child(&at, p.name);
        if let Some(why) = mismatch(p.kind, v) {
            return Err(error(&suffix, why, &here));
        }
        if !p.allowed.is_empty() && !p.allowed.contains(&text(v).as_str()) {
            let allowed: Vec<String> = p.allowed.iter().map(|a| format!("'{a}'")).collect();
            return Err(error(
                &suffix,
                format!(
                    "\"{}\" is not an allowed value ({})",
                    text(v),
                    allowed.join(", ")
                ),
                &here,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checked(type_name: &str, props: Value) -> Result<(), String> {
        check("g", type_name, Some(&props), "/resources/g", |v| {
            v.as_object()
                .is_some_and(|m| m.len() == 1 && m.contains_key("get_param"))
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn heats_texts_for_each_kind_of_mismatch() {
        let rg = "OS::Heat::ResourceGroup";
        let def = json!({"type": "OS::Heat::None"});
        assert_eq!(
            checked(rg, json!({"resource_def": def, "removal_policies": "RP"})).unwrap_err(),
            "Property error: resources.g.properties.removal_policies: \"'RP'\" is not a list (at /resources/g/properties/removal_policies)"
        );
        assert_eq!(
            checked(rg, json!({"resource_def": def, "count": "two"})).unwrap_err(),
            "Property error: resources.g.properties.count: Value 'two' is not an integer (at /resources/g/properties/count)"
        );
        assert_eq!(
            checked(rg, json!({"resource_def": "x"})).unwrap_err(),
            "Property error: resources.g.properties.resource_def: \"x\" is not a map (at /resources/g/properties/resource_def)"
        );
        assert_eq!(
            checked(rg, json!({"resource_def": def, "removal_policies_mode": "sometimes"})).unwrap_err(),
            "Property error: resources.g.properties.removal_policies_mode: \"sometimes\" is not an allowed value ('append', 'update') (at /resources/g/properties/removal_policies_mode)"
        );
        assert_eq!(
            checked(rg, json!({"resource_def": def, "size": 2})).unwrap_err(),
            "Property error: resources.g.properties: Unknown Property size (at /resources/g/properties/size)"
        );
        assert_eq!(
            checked(rg, json!({})).unwrap_err(),
            "Property error: resources.g.properties: Property resource_def not assigned (at /resources/g/properties)"
        );
        assert_eq!(
            checked("OS::Heat::WaitCondition", json!({"handle": {"a": 1}})).unwrap_err(),
            "Property error: resources.g.properties.handle: Value must be a string; got {'a': 1} (at /resources/g/properties/handle)"
        );
        // Functions are checked when they run; numbers as text are numbers.
        checked(rg, json!({"resource_def": def, "count": {"get_param": "n"}, "removal_policies": {"get_param": "rp"}})).unwrap();
        checked(rg, json!({"resource_def": def, "count": "3"})).unwrap();
        checked(
            "OS::Heat::WaitCondition",
            json!({"handle": "h", "timeout": "60.5"}),
        )
        .unwrap();
    }
}
