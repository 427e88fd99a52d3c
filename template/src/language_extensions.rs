//! `Transform: AWS::LanguageExtensions`, the one transform AWS runs itself:
//! `Fn::ForEach::<Name>` loops in Resources, Outputs and Conditions (nested
//! loops too; `${Id}` and `&{Id}` in keys and `Fn::Sub` strings, `Ref: Id`
//! in values) and a `Ref` to a parameter in `DeletionPolicy` /
//! `UpdateReplacePolicy`, expanded before the template is read. The other
//! functions the transform brings (`Fn::Length`, `Fn::ToJsonString`,
//! `Fn::FindInMap` with `DefaultValue`) are evaluated with the others; as
//! in CloudFormation, a template that uses any of them without the
//! transform is refused ([`refuse_without`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use std::fmt::Write;

use super::source::{child, push_segment};
use super::{format_error, TemplateError};

pub const TRANSFORM: &str = "AWS::LanguageExtensions";

/// Whether the template asks for the transform (alone or among others).
pub fn requested(body: &Value) -> bool {
    match body.get("Transform") {
        Some(Value::String(t)) => t == TRANSFORM,
        Some(Value::Array(list)) => list.iter().any(|t| t == TRANSFORM),
        _ => false,
    }
}

/// Refuses what only the transform brings in a CloudFormation template
/// that does not ask for it, as CloudFormation does: `Fn::Length`,
/// `Fn::ToJsonString`, `Fn::FindInMap`'s `DefaultValue`, and a function in
/// `DeletionPolicy` or `UpdateReplacePolicy`. (`Fn::ForEach::…` keys are
/// refused as names anyway.)
pub fn refuse_without(body: &Value) -> Result<(), TemplateError> {
    // One path, grown and cut back as the walk goes (a pointer built for
    // every node was a seventh of reading a large template).
    fn walk(v: &Value, path: &mut String) -> Result<(), TemplateError> {
        match v {
            Value::Object(m) => {
                if m.len() == 1 {
                    if let Some((k, arg)) = m.iter().next() {
                        let needs = match k.as_str() {
                            "Fn::Length" | "Fn::ToJsonString" => true,
                            "Fn::FindInMap" => arg.as_array().is_some_and(|a| a.len() == 4),
                            _ => false,
                        };
                        if needs {
                            let what = if k == "Fn::FindInMap" {
                                "Fn::FindInMap's DefaultValue".to_string()
                            } else {
                                format!("Encountered unsupported function: {k}")
                            };
                            return Err(crate::template_error(format!(
                                "{what} (it comes with Transform: {TRANSFORM})"
                            ))
                            .at(&child(path, k)));
                        }
                    }
                }
                for (k, x) in m {
                    let len = path.len();
                    push_segment(path, k);
                    walk(x, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    let len = path.len();
                    let _ = write!(path, "/{i}");
                    walk(x, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    let resources = body.get("Resources").and_then(Value::as_object);
    for (name, r) in resources.into_iter().flatten() {
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            if r.get(policy).is_some_and(|p| !p.is_string()) {
                return Err(format_error(format!(
                    "{policy} of resource {name} must be a string (a Ref to a parameter comes with Transform: {TRANSFORM})"
                ))
                .at(&child(&child("/Resources", name), policy)));
            }
        }
    }
    walk(body, &mut String::new())
}

/// Expands the loops with the parameter values given (others take their
/// default) and removes the Transform section.
pub fn expand(body: Value, supplied: &BTreeMap<String, String>) -> Result<Value, TemplateError> {
    let Value::Object(mut top) = body else {
        return Ok(body);
    };
    match top.remove("Transform") {
        Some(Value::String(_)) => {}
        Some(Value::Array(list)) => {
            if let Some(other) = list.iter().find(|t| **t != TRANSFORM) {
                return Err(crate::unprocessed_transform(
                    other.as_str().unwrap_or_default(),
                ));
            }
        }
        _ => {}
    }
    Ok(Value::Object(expand_loops(top, supplied)?))
}

/// The loops of a template whose `Transform` section is taken care of
/// (removed, or run in order with other transforms), expanded with the
/// parameter values given.
pub fn expand_loops(
    mut top: Map<String, Value>,
    supplied: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, TemplateError> {
    let params = parameter_values(&top, supplied);
    for section in ["Resources", "Outputs", "Conditions"] {
        if let Some(Value::Object(entries)) = top.remove(section) {
            let path = child("", section);
            let expanded = expand_map(entries, &params, &BTreeMap::new(), &path)?;
            top.insert(section.to_string(), Value::Object(expanded));
        }
    }
    if let Some(Value::Object(resources)) = top.get_mut("Resources") {
        for (name, r) in resources.iter_mut() {
            for key in ["DeletionPolicy", "UpdateReplacePolicy"] {
                if let Some(Value::Object(m)) = r.get(key) {
                    if let Some(Value::String(p)) = m.get("Ref") {
                        let value = params.get(p).cloned().ok_or_else(|| {
                            format_error(format!(
                                "{key} of {name} refers to {p}, which is not a parameter"
                            ))
                        })?;
                        r[key] = Value::String(value.join(","));
                    }
                }
            }
        }
    }
    Ok(top)
}

/// Each parameter's value as a list (a comma-delimited value split), the
/// supplied one or the default.
pub fn parameter_values(
    top: &Map<String, Value>,
    supplied: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(params)) = top.get("Parameters") {
        for (name, decl) in params {
            let raw = supplied
                .get(name)
                .cloned()
                .or_else(|| decl.get("Default").map(super::parameters::parameter_text));
            if let Some(raw) = raw {
                let list = decl
                    .get("Type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t == "CommaDelimitedList" || t.starts_with("List<"));
                let values = if list {
                    raw.split(',').map(|s| s.trim().to_string()).collect()
                } else {
                    vec![raw]
                };
                out.insert(name.clone(), values);
            }
        }
    }
    out
}

/// A section (or a loop's fragment) with its `Fn::ForEach::…` keys expanded.
fn expand_map(
    entries: Map<String, Value>,
    params: &BTreeMap<String, Vec<String>>,
    bound: &BTreeMap<String, String>,
    path: &str,
) -> Result<Map<String, Value>, TemplateError> {
    let mut out = Map::new();
    for (key, value) in entries {
        let at = child(path, &key);
        if !key.starts_with("Fn::ForEach::") {
            out.insert(substitute_key(&key, bound), substitute(&value, bound));
            continue;
        }
        let bad = || {
            format_error(format!(
                "{key} must be [identifier, collection, {{fragment}}]: the identifier a string, the collection a list or a Ref to a list parameter, the fragment a map"
            ))
            .at(&at)
        };
        let Value::Array(args) = value else {
            return Err(bad());
        };
        if args.len() != 3 {
            return Err(bad());
        }
        let Value::String(id) = &args[0] else {
            return Err(bad());
        };
        let items: Vec<String> = match substitute(&args[1], bound) {
            Value::Array(items) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| i.to_string())
                })
                .collect(),
            Value::Object(m) if m.len() == 1 && m.contains_key("Ref") => {
                let p = m.get("Ref").and_then(Value::as_str).unwrap_or_default();
                params.get(p).cloned().ok_or_else(|| {
                    format_error(format!(
                        "the collection of {key} refers to {p}, which is not a parameter with a value"
                    ))
                    .at(&at)
                })?
            }
            _ => return Err(bad()),
        };
        let Value::Object(fragment) = &args[2] else {
            return Err(bad());
        };
        for item in items {
            let mut inner = bound.clone();
            inner.insert(id.clone(), item);
            let expanded = expand_map(fragment.clone(), params, &inner, &at)?;
            for (k, v) in expanded {
                if out.contains_key(&k) {
                    return Err(format_error(format!(
                        "{key} makes {k} twice; the fragment's keys must use the identifier (${{{id}}} or &{{{id}}})"
                    ))
                    .at(&at));
                }
                out.insert(k, v);
            }
        }
    }
    Ok(out)
}

/// `${Id}` as the value, `&{Id}` as the value without its non-alphanumerics.
fn substitute_key(key: &str, bound: &BTreeMap<String, String>) -> String {
    let mut out = key.to_string();
    for (id, value) in bound {
        out = out.replace(&format!("${{{id}}}"), value);
        let alnum: String = value.chars().filter(char::is_ascii_alphanumeric).collect();
        out = out.replace(&format!("&{{{id}}}"), &alnum);
    }
    out
}

/// A fragment's value with the loop's identifiers bound: `Ref: Id` is the
/// item, `${Id}` / `&{Id}` in strings (Fn::Sub's and keys) too.
fn substitute(v: &Value, bound: &BTreeMap<String, String>) -> Value {
    if bound.is_empty() {
        return v.clone();
    }
    match v {
        Value::Object(m) if m.len() == 1 => {
            if let Some(Value::String(r)) = m.get("Ref") {
                if let Some(item) = bound.get(r) {
                    return Value::String(item.clone());
                }
            }
            // A Fn::Sub left with nothing to substitute is its text (so
            // `!GetAtt [!Sub 'Table${Id}', Arn]` names the resource).
            if let Some(Value::String(s)) = m.get("Fn::Sub") {
                let done = substitute_key(s, bound);
                if !done.contains("${") {
                    return Value::String(done);
                }
            }
            Value::Object(
                m.iter()
                    .map(|(k, x)| (substitute_key(k, bound), substitute(x, bound)))
                    .collect(),
            )
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (substitute_key(k, bound), substitute(x, bound)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, bound)).collect()),
        Value::String(s) => Value::String(substitute_key(s, bound)),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_function_of_the_transform_is_refused_at_its_pointer() {
        let body = json!({"Resources": {
            "A": {"Type": "T", "Properties": {"L": [1, {"x": "y"}]}},
            "B/1": {"Type": "T", "Properties": {"L": [1, {"Fn::Length": [1, 2]}]}}
        }});
        let e = refuse_without(&body).unwrap_err();
        assert_eq!(e.path(), "/Resources/B~11/Properties/L/1/Fn::Length");
        let body = json!({"Resources": {"A": {"Type": "T", "Properties": {"L": [{"x": [1, 2]}]}}}});
        assert!(refuse_without(&body).is_ok());
    }

    #[test]
    fn loops_expand_in_resources_and_outputs_with_parameters() {
        let body = json!({
            "Transform": "AWS::LanguageExtensions",
            "Parameters": {"Tables": {"Type": "CommaDelimitedList", "Default": "a,b"}, "Policy": {"Type": "String", "Default": "Retain"}},
            "Resources": {
                "Fn::ForEach::Tables": ["Table", {"Ref": "Tables"}, {
                    "Table${Table}": {"Type": "T", "DeletionPolicy": {"Ref": "Policy"}, "Properties": {"Name": {"Ref": "Table"}, "Arn": {"Fn::Sub": "arn:${Table}:x"}}}
                }]
            },
            "Outputs": {
                "Fn::ForEach::Out": ["Table", {"Ref": "Tables"}, {
                    "&{Table}Out": {"Value": {"Fn::GetAtt": ["Table${Table}", "Arn"]}}
                }]
            }
        });
        let supplied = BTreeMap::from([("Tables".to_string(), "users,order-items".to_string())]);
        let out = expand(body, &supplied).unwrap();
        assert!(out.get("Transform").is_none());
        let r = &out["Resources"];
        assert_eq!(r["Tableusers"]["Properties"]["Name"], json!("users"));
        assert_eq!(
            r["Tableorder-items"]["Properties"]["Arn"],
            json!("arn:order-items:x")
        );
        assert_eq!(r["Tableusers"]["DeletionPolicy"], json!("Retain"));
        assert_eq!(
            out["Outputs"]["orderitemsOut"]["Value"],
            json!({"Fn::GetAtt": ["Tableorder-items", "Arn"]})
        );
    }

    #[test]
    fn nested_loops_and_refusals() {
        let body = json!({
            "Transform": ["AWS::LanguageExtensions"],
            "Resources": {
                "Fn::ForEach::Outer": ["Env", ["dev", "prod"], {
                    "Fn::ForEach::Inner": ["Tier", ["web", "db"], {"${Env}${Tier}": {"Type": "T"}}]
                }]
            }
        });
        let out = expand(body, &BTreeMap::new()).unwrap();
        let keys: Vec<&String> = out["Resources"].as_object().unwrap().keys().collect();
        assert_eq!(keys, vec!["devweb", "devdb", "prodweb", "proddb"]);
        let dup =
            json!({"Resources": {"Fn::ForEach::X": ["I", ["a", "b"], {"Same": {"Type": "T"}}]}});
        assert!(expand(dup, &BTreeMap::new())
            .unwrap_err()
            .to_string()
            .contains("makes Same twice"));
        let other = json!({"Transform": ["AWS::LanguageExtensions", "AWS::Serverless-2016-10-31"], "Resources": {}});
        assert!(expand(other, &BTreeMap::new())
            .unwrap_err()
            .to_string()
            .contains("Transform AWS::Serverless-2016-10-31 names a macro"));
    }
}
