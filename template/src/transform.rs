//! Transforms in CloudFormation's order: the macros and hosted transforms a
//! template names (`Transform` at its top level, `Fn::Transform` inside it),
//! where each runs, what fragment it is given and where its answer goes.
//!
//! CloudFormation processes them "from the most deeply nested outward to
//! the most general": every `Fn::Transform` deepest first (document order
//! between equals), then the `Transform` section's entries in list order,
//! each given the template as the entries before it left it. Nothing is
//! run twice: a transform that an answer brings in is not run (macros are
//! not processed iteratively). The macros themselves run outside this
//! crate (they are webhooks and plugins); the hosted transforms
//! (`AWS::Include`, `AWS::LanguageExtensions`) run here.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::source::child;
use super::{format_error, include, language_extensions, TemplateError};

/// The snippet form of a transform, a key of the map it transforms.
pub const FN_TRANSFORM: &str = "Fn::Transform";

/// The transforms Cairn runs itself, as CloudFormation hosts them.
pub fn is_hosted(name: &str) -> bool {
    name == include::INCLUDE || name == language_extensions::TRANSFORM
}

/// Where a transform stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// An `Fn::Transform` key of the map at this path (object keys and
    /// array indices from the top): the map's other keys are its fragment,
    /// and its answer replaces the map.
    Snippet(Vec<String>),
    /// The `Transform` section's entry at this index: the template without
    /// its `Transform` section is the fragment, and the answer replaces it.
    Section(usize),
}

/// One transform to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub name: String,
    /// Its `Parameters` as written (not evaluated); `{}` when it has none.
    pub params: Value,
    pub place: Place,
    /// Its index when the `Fn::Transform` is a list (AWS's samples write
    /// `Fn::Transform: [{Name: String, Parameters: …}]`): the list's
    /// entries run in order, each after the first given what the one
    /// before it answered, as the `Transform` section's entries are.
    pub entry: Option<usize>,
}

impl Site {
    /// The JSON pointer of the transform, for errors.
    pub fn pointer(&self) -> String {
        match &self.place {
            Place::Section(_) => "/Transform".into(),
            Place::Snippet(path) => {
                let map = path.iter().fold(String::new(), |p, s| child(&p, s));
                let at = child(&map, FN_TRANSFORM);
                match self.entry {
                    Some(i) => child(&at, &i.to_string()),
                    None => at,
                }
            }
        }
    }

    /// A later entry of an `Fn::Transform` list: its fragment is the
    /// answer of the entry before it.
    fn chained(&self) -> bool {
        self.entry.is_some_and(|i| i > 0)
    }
}

/// Every transform of `body`, in the order CloudFormation runs them.
pub fn sites(body: &Value) -> Result<Vec<Site>, TemplateError> {
    let mut snippets = Vec::new();
    if let Value::Object(top) = body {
        for (k, v) in top {
            if k != "Transform" {
                collect(v, &mut vec![k.clone()], &mut snippets)?;
            }
        }
    }
    // Deepest first; a stable sort keeps document order between equals.
    snippets.sort_by_key(|s: &Site| match &s.place {
        Place::Snippet(path) => std::cmp::Reverse(path.len()),
        Place::Section(_) => std::cmp::Reverse(0),
    });
    let entries = match body.get("Transform") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list.iter().collect(),
        Some(t) => vec![t],
    };
    for (i, t) in entries.into_iter().enumerate() {
        let (name, params) = match t {
            Value::String(name) => (name.clone(), Value::Object(Map::new())),
            other => named(other).ok_or_else(|| {
                format_error(
                    "each Transform must be a macro's name or {Name: name, Parameters: {…}}",
                )
                .at("/Transform")
            })?,
        };
        snippets.push(Site {
            name,
            params,
            place: Place::Section(i),
            entry: None,
        });
    }
    Ok(snippets)
}

/// `{Name, Parameters}`.
fn named(v: &Value) -> Option<(String, Value)> {
    let m = v.as_object()?;
    let name = m.get("Name")?.as_str()?.to_string();
    let params = match m.get("Parameters") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p) => p.clone(),
    };
    Some((name, params))
}

fn collect(v: &Value, path: &mut Vec<String>, out: &mut Vec<Site>) -> Result<(), TemplateError> {
    match v {
        Value::Object(m) => {
            if let Some(t) = m.get(FN_TRANSFORM) {
                let entries: Vec<(Option<usize>, &Value)> = match t {
                    Value::Array(list) if !list.is_empty() => {
                        list.iter().enumerate().map(|(i, e)| (Some(i), e)).collect()
                    }
                    one => vec![(None, one)],
                };
                for (entry, t) in entries {
                    let place = Place::Snippet(path.clone());
                    let Some((name, params)) = named(t) else {
                        let at = Site {
                            name: String::new(),
                            params: Value::Null,
                            place,
                            entry,
                        }
                        .pointer();
                        return Err(format_error(
                            "Fn::Transform must be {Name: macro name, Parameters: {…}}, or a list of them",
                        )
                        .at(&at));
                    };
                    out.push(Site {
                        name,
                        params,
                        place,
                        entry,
                    });
                }
            }
            for (k, v) in m {
                if k == FN_TRANSFORM {
                    continue;
                }
                path.push(k.clone());
                collect(v, path, out)?;
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                collect(item, path, out)?;
                path.pop();
            }
        }
        _ => {}
    }
    Ok(())
}

/// The names of the macros `body` runs (every transform Cairn does not
/// host), in the order they run; none when the transforms cannot be read
/// (parsing reports that).
pub fn macro_names(body: &Value) -> Vec<String> {
    sites(body)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !is_hosted(&s.name))
        .map(|s| s.name)
        .collect()
}

/// Whether `body` names a transform of any kind.
pub fn any(body: &Value) -> bool {
    sites(body).is_ok_and(|s| !s.is_empty())
}

/// Whether `text` must be read by the engine before it can be parsed: it
/// names a macro, uses a module (expanded from the registry), or includes
/// a snippet from an https:// (or s3://) location.
pub fn needs_reading(text: &str) -> bool {
    names_a_macro(text)
        || (text.contains("::MODULE")
            && super::Template::body_of(text)
                .is_ok_and(|b| !super::modules::module_types(&b).is_empty()))
        || (text.contains(include::INCLUDE)
            && (text.contains("https://") || text.contains("s3://")))
}

/// Whether `text` names a macro (a transform Cairn does not host), or has
/// a transform that cannot be read (reading it reports where).
pub fn names_a_macro(text: &str) -> bool {
    text.contains("Transform")
        && super::Template::body_of(text)
            .is_ok_and(|b| sites(&b).map_or(true, |s| s.iter().any(|s| !is_hosted(&s.name))))
}

/// The node at `path`.
fn at_path<'a>(body: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(body, |node, key| match node {
        Value::Object(m) => m.get_mut(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

/// The fragment the transform at `site` is given: the template without its
/// `Transform` section, or the map holding the `Fn::Transform` without it.
pub fn fragment(body: &mut Value, site: &Site) -> Value {
    match &site.place {
        Place::Section(_) => {
            let mut whole = body.as_object().cloned().unwrap_or_default();
            whole.remove("Transform");
            Value::Object(whole)
        }
        Place::Snippet(path) if site.chained() => at_path(body, path)
            .map(|v| v.clone())
            .unwrap_or(Value::Null),
        Place::Snippet(path) => {
            let mut siblings = at_path(body, path)
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            siblings.remove(FN_TRANSFORM);
            Value::Object(siblings)
        }
    }
}

/// Puts a transform's answer where it ran: a section transform's answer is
/// the whole template (a map), a snippet's replaces the map it stood in.
pub fn replace(body: &mut Value, site: &Site, answer: Value) -> Result<(), TemplateError> {
    match &site.place {
        Place::Section(_) => {
            if !answer.is_object() {
                return Err(format_error(format!(
                    "the transform {} returned a template that is not a map",
                    site.name
                ))
                .at("/Transform"));
            }
            *body = answer;
        }
        Place::Snippet(path) => {
            let slot = at_path(body, path).ok_or_else(|| {
                format_error(format!(
                    "the place of the transform {} is gone from the template",
                    site.name
                ))
                .at(&site.pointer())
            })?;
            *slot = answer;
        }
    }
    Ok(())
}

/// Runs a hosted transform at `site`: `files` holds the included
/// snippets' texts, `supplied` the parameter values the language
/// extensions' loops expand with.
pub fn run_hosted(
    body: &mut Value,
    site: &Site,
    files: &BTreeMap<String, String>,
    supplied: &BTreeMap<String, String>,
) -> Result<(), TemplateError> {
    let at = site.pointer();
    let location = || {
        site.params
            .get("Location")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                format_error(format!(
                    "{} needs Parameters: {{Location: …}}",
                    include::INCLUDE
                ))
                .at(&at)
            })
    };
    match (site.name.as_str(), &site.place) {
        (include::INCLUDE, Place::Section(_)) => {
            let location = location()?;
            let Value::Object(mut top) = fragment(body, site) else {
                return Ok(());
            };
            include::merge_sections(&mut top, &location, files)?;
            *body = Value::Object(top);
            Ok(())
        }
        (include::INCLUDE, Place::Snippet(_)) => {
            let location = location()?;
            let Value::Object(siblings) = fragment(body, site) else {
                return Err(format_error(format!(
                    "the transform before {} {location} did not answer a map, so the snippet cannot join it",
                    include::INCLUDE
                ))
                .at(&at));
            };
            let inserted = include::insert(siblings, &location, files, &at)?;
            replace(body, site, inserted)
        }
        (language_extensions::TRANSFORM, Place::Section(_)) => {
            let Value::Object(top) = fragment(body, site) else {
                return Ok(());
            };
            *body = Value::Object(language_extensions::expand_loops(top, supplied)?);
            Ok(())
        }
        (language_extensions::TRANSFORM, Place::Snippet(_)) => Err(format_error(format!(
            "{} is a template-level transform: name it in the Transform section, not in Fn::Transform",
            language_extensions::TRANSFORM
        ))
        .at(&at)),
        (other, _) => Err(format_error(format!("{other} is not a transform Cairn hosts")).at(&at)),
    }
}

/// The template's parameter values as a macro is given them
/// (`templateParameterValues`): each supplied value or its default, a list
/// for a list type.
pub fn parameter_values(body: &Value, supplied: &BTreeMap<String, String>) -> Value {
    let Some(top) = body.as_object() else {
        return Value::Object(Map::new());
    };
    let lists: Vec<&str> = top
        .get("Parameters")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, d)| {
                    d.get("Type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t == "CommaDelimitedList" || t.starts_with("List<"))
                })
                .map(|(k, _)| k.as_str())
                .collect()
        })
        .unwrap_or_default();
    let values = language_extensions::parameter_values(top, supplied)
        .into_iter()
        .map(|(name, mut values)| {
            let v = if lists.contains(&name.as_str()) {
                Value::Array(values.into_iter().map(Value::String).collect())
            } else {
                Value::String(values.pop().unwrap_or_default())
            };
            (name, v)
        })
        .collect();
    Value::Object(values)
}

/// The template with every transform's trace gone (the `Transform`
/// section), once all have run.
pub fn finish(body: &mut Value) {
    if let Value::Object(top) = body {
        top.remove("Transform");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snippets_run_deepest_first_then_the_section_in_list_order() {
        let body = json!({
            "Transform": ["First", {"Name": "AWS::Include", "Parameters": {"Location": "x.yaml"}}, "Last"],
            "Resources": {
                "A": {"Type": "T", "Properties": {
                    "Fn::Transform": {"Name": "Outer", "Parameters": {"P": 1}},
                    "Deep": {"Fn::Transform": {"Name": "Inner"}}
                }},
                "B": {"Type": "T", "Properties": {"List": [{"Fn::Transform": {"Name": "InList"}}]}}
            }
        });
        let s = sites(&body).unwrap();
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["InList", "Inner", "Outer", "First", "AWS::Include", "Last"]
        );
        assert_eq!(
            s[0].pointer(),
            "/Resources/B/Properties/List/0/Fn::Transform"
        );
        assert_eq!(s[2].params, json!({"P": 1}));
        assert_eq!(s[3].params, json!({}));
        assert_eq!(
            macro_names(&body),
            vec!["InList", "Inner", "Outer", "First", "Last"]
        );
    }

    #[test]
    fn a_snippet_answer_replaces_the_map_it_stood_in() {
        let mut body = json!({"Resources": {"A": {"Type": "T", "Properties": {
            "Keep": 1,
            "Fn::Transform": {"Name": "M"}
        }}}});
        let s = sites(&body).unwrap().remove(0);
        assert_eq!(fragment(&mut body, &s), json!({"Keep": 1}));
        replace(&mut body, &s, json!({"Made": 2})).unwrap();
        assert_eq!(
            body,
            json!({"Resources": {"A": {"Type": "T", "Properties": {"Made": 2}}}})
        );
    }

    #[test]
    fn a_section_answer_is_the_whole_template_and_the_section_goes() {
        let mut body = json!({"Transform": "M", "Resources": {"A": {"Type": "T"}}});
        let s = sites(&body).unwrap().remove(0);
        assert_eq!(
            fragment(&mut body, &s),
            json!({"Resources": {"A": {"Type": "T"}}})
        );
        replace(&mut body, &s, json!({"Resources": {}})).unwrap();
        finish(&mut body);
        assert_eq!(body, json!({"Resources": {}}));
        let bad = replace(&mut body, &s, json!([1])).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "Template format error: the transform M returned a template that is not a map (at /Transform)"
        );
    }

    #[test]
    fn hosted_transforms_run_in_their_place() {
        let files: BTreeMap<String, String> =
            [("s.yaml".to_string(), "Value: included\n".to_string())].into();
        let mut body = json!({
            "Transform": "AWS::LanguageExtensions",
            "Parameters": {"Names": {"Type": "CommaDelimitedList", "Default": "a,b"}},
            "Resources": {"Fn::ForEach::R": ["N", {"Ref": "Names"}, {"R${N}": {"Type": "T", "Properties": {
                "Fn::Transform": {"Name": "AWS::Include", "Parameters": {"Location": "s.yaml"}}
            }}}]}
        });
        for s in sites(&body).unwrap() {
            run_hosted(&mut body, &s, &files, &BTreeMap::new()).unwrap();
        }
        finish(&mut body);
        assert_eq!(
            body["Resources"],
            json!({"Ra": {"Type": "T", "Properties": {"Value": "included"}}, "Rb": {"Type": "T", "Properties": {"Value": "included"}}})
        );
        assert_eq!(
            parameter_values(&body, &[("Names".to_string(), "x, y".to_string())].into()),
            json!({"Names": ["x", "y"]})
        );
    }

    #[test]
    fn a_transform_that_is_not_named_is_refused_with_its_place() {
        let e = sites(&json!({"Resources": {"A": {"Fn::Transform": "M"}}})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Template format error: Fn::Transform must be {Name: macro name, Parameters: {…}}, or a list of them (at /Resources/A/Fn::Transform)"
        );
        let e = sites(&json!({"Resources": {"A": {"Fn::Transform": [{"Name": "M"}, "N"]}}}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Template format error: Fn::Transform must be {Name: macro name, Parameters: {…}}, or a list of them (at /Resources/A/Fn::Transform/1)"
        );
    }

    #[test]
    fn a_list_of_snippet_transforms_runs_in_order_each_given_the_answer_before() {
        let mut body = json!({"Resources": {"A": {"Type": "T", "Properties": {"Tag": {
            "Keep": 1,
            "Fn::Transform": [{"Name": "First", "Parameters": {"P": 1}}, {"Name": "Second"}]
        }}}}});
        let s = sites(&body).unwrap();
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["First", "Second"]);
        assert_eq!(
            s[1].pointer(),
            "/Resources/A/Properties/Tag/Fn::Transform/1"
        );
        assert_eq!(fragment(&mut body, &s[0]), json!({"Keep": 1}));
        replace(&mut body, &s[0], json!("first")).unwrap();
        assert_eq!(fragment(&mut body, &s[1]), json!("first"));
        replace(&mut body, &s[1], json!("FIRST")).unwrap();
        assert_eq!(body["Resources"]["A"]["Properties"]["Tag"], json!("FIRST"));
    }
}
