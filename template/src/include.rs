//! `AWS::Include`: a snippet inserted where the transform is written, at
//! the template's top level (`Transform: {Name: AWS::Include, Parameters:
//! {Location: …}}`) or anywhere inside a section (`Fn::Transform`: as a
//! key, the snippet's entries join the map it stands in; as a value, the
//! snippet is the value). The snippets' texts are read by the caller (this
//! crate does no I/O) and handed in the template's context files, keyed by
//! their `Location` as written; `locations` says which are needed.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::source::child;
use super::{format_error, TemplateError};

pub const INCLUDE: &str = "AWS::Include";

/// Whether `t` (a `Transform` entry or an `Fn::Transform` argument) is an
/// include, and its location.
pub fn include_location(t: &Value) -> Option<&str> {
    let m = t.as_object()?;
    if m.get("Name").and_then(Value::as_str) != Some(INCLUDE) {
        return None;
    }
    m.get("Parameters")?.get("Location")?.as_str()
}

/// The `Transform` section's entries.
fn transforms(body: &Value) -> Vec<&Value> {
    match body.get("Transform") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(t) => vec![t],
        None => Vec::new(),
    }
}

/// The snippets the template includes, by their `Location` as written.
pub fn locations(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = transforms(body)
        .into_iter()
        .filter_map(include_location)
        .map(str::to_string)
        .collect();
    collect(body, &mut out);
    out.sort();
    out.dedup();
    out
}

/// The includes of an `Fn::Transform` argument, one or a list of them
/// (in order); none when any entry is not an include (the engine runs
/// such a list with its macros).
fn included(t: &Value) -> Vec<&str> {
    match t {
        Value::Array(list) => list
            .iter()
            .map(include_location)
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default(),
        one => include_location(one).into_iter().collect(),
    }
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "Fn::Transform" {
                    out.extend(included(v).into_iter().map(str::to_string));
                }
                collect(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        _ => {}
    }
}

/// Whether the template includes anything.
pub fn requested(body: &Value) -> bool {
    !locations(body).is_empty()
}

/// Inserts every snippet (`files`: location → text) and removes the
/// includes from the `Transform` section.
pub fn expand(body: Value, files: &BTreeMap<String, String>) -> Result<Value, TemplateError> {
    let Value::Object(mut top) = body else {
        return Ok(body);
    };
    // Top-level includes: their sections join the template's.
    let mut rest = Vec::new();
    let entries = match top.remove("Transform") {
        Some(Value::Array(list)) => list,
        Some(t) => vec![t],
        None => Vec::new(),
    };
    for t in entries {
        let Some(location) = include_location(&t) else {
            rest.push(t);
            continue;
        };
        merge_sections(&mut top, location, files)?;
    }
    match rest.len() {
        0 => {}
        1 => {
            top.insert("Transform".into(), rest.remove(0));
        }
        _ => {
            top.insert("Transform".into(), Value::Array(rest));
        }
    }
    let mut out = Map::new();
    for (k, v) in top {
        let path = child("", &k);
        out.insert(k, inline(v, files, &path)?);
    }
    Ok(Value::Object(out))
}

/// A top-level include: the snippet at `location` (a map of template
/// sections) joins the template's sections.
pub fn merge_sections(
    top: &mut Map<String, Value>,
    location: &str,
    files: &BTreeMap<String, String>,
) -> Result<(), TemplateError> {
    let Value::Object(snippet) = snippet(location, files, "/Transform")? else {
        return Err(format_error(format!(
            "{INCLUDE} at the top level needs a snippet that is a map of template sections ({location})"
        ))
        .at("/Transform"));
    };
    for (k, v) in snippet {
        merge_into(top, k, v);
    }
    Ok(())
}

/// A section of a top-level snippet joins the template's: maps merge (the
/// template's own entries win), anything else is taken when absent.
fn merge_into(top: &mut Map<String, Value>, key: String, value: Value) {
    match (top.get_mut(&key), value) {
        (Some(Value::Object(mine)), Value::Object(theirs)) => {
            for (k, v) in theirs {
                mine.entry(k).or_insert(v);
            }
        }
        (Some(_), _) => {}
        (None, v) => {
            top.insert(key, v);
        }
    }
}

/// `v` with its `Fn::Transform` includes replaced, deepest first.
fn inline(v: Value, files: &BTreeMap<String, String>, path: &str) -> Result<Value, TemplateError> {
    match v {
        Value::Object(m) => {
            let at = child(path, "Fn::Transform");
            let locations: Vec<String> = m
                .get("Fn::Transform")
                .map(included)
                .unwrap_or_default()
                .into_iter()
                .map(str::to_string)
                .collect();
            let mut out = Map::new();
            for (k, v) in m {
                if k == "Fn::Transform" && !locations.is_empty() {
                    continue;
                }
                let p = child(path, &k);
                out.insert(k, inline(v, files, &p)?);
            }
            // A list's entries run in order, each joining what the one
            // before it made.
            let mut made = Value::Object(out);
            for location in &locations {
                let Value::Object(siblings) = made else {
                    return Err(format_error(format!(
                        "the {INCLUDE} snippet before {location} is not a map, so {location} cannot join it"
                    ))
                    .at(&at));
                };
                let inserted = inline(snippet(location, files, &at)?, files, &at)?;
                made = join(siblings, inserted, location, &at)?;
            }
            Ok(made)
        }
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| inline(item, files, &child(path, &i.to_string())))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other),
    }
}

/// An `Fn::Transform` include: the snippet at `location` where the
/// transform stands in `siblings` (the map holding it, without it).
/// Snippets are not searched for includes of their own (CloudFormation
/// runs no transform twice).
pub fn insert(
    siblings: Map<String, Value>,
    location: &str,
    files: &BTreeMap<String, String>,
    at: &str,
) -> Result<Value, TemplateError> {
    join(siblings, snippet(location, files, at)?, location, at)
}

/// A snippet joining the map its `Fn::Transform` stands in.
fn join(
    mut out: Map<String, Value>,
    inserted: Value,
    location: &str,
    at: &str,
) -> Result<Value, TemplateError> {
    match inserted {
        // As a key: its entries join the map (the map's own win).
        Value::Object(entries) => {
            for (k, v) in entries {
                out.entry(k).or_insert(v);
            }
            Ok(Value::Object(out))
        }
        // As the whole value: the snippet is the value.
        other if out.is_empty() => Ok(other),
        _ => Err(format_error(format!(
            "the {INCLUDE} snippet {location} is not a map, so it cannot join the other keys beside its Fn::Transform"
        ))
        .at(at)),
    }
}

/// The snippet at `location`, read as JSON or YAML.
fn snippet(
    location: &str,
    files: &BTreeMap<String, String>,
    path: &str,
) -> Result<Value, TemplateError> {
    let Some(text) = files.get(location) else {
        return Err(format_error(format!(
            "{INCLUDE}: the snippet at {location} was not read (give it beside the template, or as a file of the request)"
        ))
        .at(path));
    };
    crate::model::Template::body_of(text)
        .map_err(|e| format_error(format!("{INCLUDE}: the snippet at {location}: {e}")).at(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snippets_are_inserted_at_the_top_key_and_value_levels() {
        let body = json!({
            "Transform": [{"Name": "AWS::Include", "Parameters": {"Location": "top.yaml"}}],
            "Resources": {
                "A": {"Type": "T", "Properties": {"Value": {"Fn::Transform": {"Name": "AWS::Include", "Parameters": {"Location": "value.json"}}}}},
                "Fn::Transform": {"Name": "AWS::Include", "Parameters": {"Location": "more.yaml"}},
                "C": {"Fn::Transform": [
                    {"Name": "AWS::Include", "Parameters": {"Location": "type.yaml"}},
                    {"Name": "AWS::Include", "Parameters": {"Location": "props.yaml"}}
                ]}
            }
        });
        assert_eq!(
            locations(&body),
            vec![
                "more.yaml",
                "props.yaml",
                "top.yaml",
                "type.yaml",
                "value.json"
            ]
        );
        let files: BTreeMap<String, String> = [
            ("type.yaml", "Type: T\n"),
            ("props.yaml", "Properties: {Value: 2}\n"),
            ("top.yaml", "Outputs:\n  O: {Value: x}\n"),
            ("value.json", "[1, 2]"),
            ("more.yaml", "B: {Type: T}\n"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let out = expand(body, &files).unwrap();
        assert_eq!(
            out,
            json!({
                "Outputs": {"O": {"Value": "x"}},
                "Resources": {
                    "A": {"Type": "T", "Properties": {"Value": [1, 2]}},
                    "B": {"Type": "T"},
                    "C": {"Type": "T", "Properties": {"Value": 2}}
                }
            })
        );
        let missing = expand(
            json!({"Resources": {"Fn::Transform": {"Name": "AWS::Include", "Parameters": {"Location": "gone.yaml"}}}}),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert!(
            missing.to_string().starts_with(
                "Template format error: AWS::Include: the snippet at gone.yaml was not read"
            ),
            "{missing}"
        );
    }
}
