//! Modules (CloudFormation's `Org::Service::Thing::MODULE` types): a
//! registered template fragment that a stack uses like a resource and that
//! expands into the stack. Each of the fragment's resources becomes
//! `<module id><resource id>`; its parameters take the module resource's
//! Properties; `Ref`/`Fn::GetAtt`/`Fn::Sub`/`DependsOn` inside the fragment
//! follow the renames; the template refers into the module as
//! CloudFormation documents (`!Ref Module.Resource`, `!GetAtt
//! Module.Resource.Attr`, `Module.Resource` in `Fn::Sub`, `DependsOn:
//! Module`), and `!GetAtt Module.Output` reads a fragment output.
//! The module's DeletionPolicy, UpdateReplacePolicy, DependsOn and
//! Condition apply to each of its resources (a resource's own win).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A module type's name.
pub fn is_module_type(type_name: &str) -> bool {
    type_name.ends_with("::MODULE")
}

/// The module types a template body uses.
pub fn module_types(body: &Value) -> Vec<String> {
    let mut found: Vec<String> = body
        .get("Resources")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(_, r)| r.get("Type").and_then(Value::as_str))
        .filter(|t| is_module_type(t))
        .map(String::from)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Why a fragment cannot be a module, in the CloudFormation CLI's words
/// where it has them.
pub fn check_fragment(fragment: &Value) -> Result<(), String> {
    let Some(resources) = fragment.get("Resources").and_then(Value::as_object) else {
        return Err("A Module template fragment must have a Resources section".into());
    };
    if resources.len() > 500 {
        return Err(format!(
            "The Module template fragment has {} resources but must not exceed the limit of 500 resources",
            resources.len()
        ));
    }
    if fragment.get("Transform").is_some() {
        return Err("Template fragment can't contain transform section.".into());
    }
    for (name, r) in resources {
        match r.get("Type").and_then(Value::as_str) {
            Some("AWS::CloudFormation::Stack") => {
                return Err("Template fragment can't contain nested stack.".into())
            }
            Some("AWS::CloudFormation::Macro") => {
                return Err("Template fragment can't contain any macro.".into())
            }
            None => return Err(format!("Resource {name} has no Type")),
            _ => {}
        }
    }
    for (name, p) in fragment
        .get("Parameters")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if p.get("Type").is_none() {
            return Err(format!("Parameter '{name}' must have a Type"));
        }
    }
    if let Some(outputs) = fragment.get("Outputs").and_then(Value::as_object) {
        if outputs.values().any(|o| o.get("Export").is_some()) {
            return Err("A Module template fragment's Outputs may not Export".into());
        }
    }
    if mentions(fragment, "Fn::ImportValue") {
        return Err("A Module template fragment may not use Fn::ImportValue".into());
    }
    Ok(())
}

fn mentions(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(key) || m.values().any(|x| mentions(x, key)),
        Value::Array(items) => items.iter().any(|x| mentions(x, key)),
        _ => false,
    }
}

/// Why a template's modules cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ModuleError(pub String);

/// How deep modules may nest (CloudFormation's three levels).
const MAX_DEPTH: usize = 3;

/// Expands every module resource of `body` with the fragments of
/// `modules` (type name → fragment body), modules inside modules too.
pub fn expand(body: &mut Value, modules: &BTreeMap<String, Value>) -> Result<(), ModuleError> {
    for _ in 0..=MAX_DEPTH {
        let used = module_types(body);
        if used.is_empty() {
            return Ok(());
        }
        if let Some(missing) = used.iter().find(|t| !modules.contains_key(*t)) {
            return Err(ModuleError(format!(
                "Template format error: Unrecognized resource types: [{missing}]"
            )));
        }
        expand_once(body, modules)?;
    }
    Err(ModuleError(format!(
        "Modules nest more than {MAX_DEPTH} levels deep"
    )))
}

/// One module resource's expansion: what the rest of the template's
/// references into it become.
struct Expanded {
    /// Its resources' new ids.
    resources: Vec<String>,
    /// Fragment output name → its value, rewritten.
    outputs: Map<String, Value>,
}

fn expand_once(body: &mut Value, modules: &BTreeMap<String, Value>) -> Result<(), ModuleError> {
    let Some(resources) = body.get("Resources").and_then(Value::as_object).cloned() else {
        return Ok(());
    };
    let mut out_resources = Map::new();
    let mut added_conditions = Map::new();
    let mut added_mappings = Map::new();
    let mut expanded: BTreeMap<String, Expanded> = BTreeMap::new();
    for (id, r) in resources {
        let type_name = r.get("Type").and_then(Value::as_str).unwrap_or_default();
        if !is_module_type(type_name) {
            out_resources.insert(id, r);
            continue;
        }
        let fragment = &modules[type_name];
        let names = Names::of(&id, fragment);
        let given = r
            .get("Properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut params = Map::new();
        for (p, def) in fragment
            .get("Parameters")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            match given.get(p).or_else(|| def.get("Default")) {
                Some(v) => {
                    params.insert(p.clone(), v.clone());
                }
                None => {
                    return Err(ModuleError(format!(
                        "Module {id}: its parameter {p} is required: set it in {id}'s Properties"
                    )))
                }
            }
        }
        if let Some(unknown) = given.keys().find(|k| !params.contains_key(*k)) {
            return Err(ModuleError(format!(
                "Module {id}: {unknown} is not a parameter of {type_name}"
            )));
        }
        let module_depends = depends_on(&r);
        let mut new_ids = Vec::new();
        for (inner, def) in fragment
            .get("Resources")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let mut def = names.rewrite(def, &params);
            if let Value::Object(d) = &mut def {
                for policy in ["DeletionPolicy", "UpdateReplacePolicy", "Condition"] {
                    if let (false, Some(v)) = (d.contains_key(policy), r.get(policy)) {
                        d.insert(policy.into(), v.clone());
                    }
                }
                if !module_depends.is_empty() {
                    let mut deps = depends_on(&Value::Object(d.clone()));
                    deps.extend(module_depends.iter().cloned());
                    d.insert("DependsOn".into(), Value::from(deps));
                }
            }
            let new_id = format!("{id}{inner}");
            new_ids.push(new_id.clone());
            out_resources.insert(new_id, def);
        }
        for (section, added) in [
            ("Conditions", &mut added_conditions),
            ("Mappings", &mut added_mappings),
        ] {
            for (name, v) in fragment
                .get(section)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                added.insert(format!("{id}{name}"), names.rewrite(v, &params));
            }
        }
        let outputs = fragment
            .get("Outputs")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, o)| Some((name.clone(), names.rewrite(o.get("Value")?, &params))))
            .collect();
        expanded.insert(
            id,
            Expanded {
                resources: new_ids,
                outputs,
            },
        );
    }
    let Value::Object(b) = body else {
        return Ok(());
    };
    b.insert("Resources".into(), Value::Object(out_resources));
    for (section, added) in [
        ("Conditions", added_conditions),
        ("Mappings", added_mappings),
    ] {
        if added.is_empty() {
            continue;
        }
        let entry = b
            .entry(section.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = entry {
            m.extend(added);
        }
    }
    // References into the modules, anywhere in the template.
    let rewritten = refer_into(&Value::Object(b.clone()), &expanded);
    *body = rewritten;
    Ok(())
}

/// A resource's DependsOn as a list.
fn depends_on(r: &Value) -> Vec<Value> {
    match r.get("DependsOn") {
        Some(Value::String(s)) => vec![Value::String(s.clone())],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// The names a fragment defines, and how they are renamed in module `id`.
struct Names {
    id: String,
    resources: Vec<String>,
    conditions: Vec<String>,
    mappings: Vec<String>,
}

impl Names {
    fn of(id: &str, fragment: &Value) -> Names {
        let keys = |section: &str| -> Vec<String> {
            fragment
                .get(section)
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        Names {
            id: id.to_string(),
            resources: keys("Resources"),
            conditions: keys("Conditions"),
            mappings: keys("Mappings"),
        }
    }

    fn renamed(&self, name: &str, list: &[String]) -> Option<String> {
        list.iter()
            .any(|n| n == name)
            .then(|| format!("{}{name}", self.id))
    }

    /// A fragment value with its parameters replaced by the module's
    /// values and its own names prefixed.
    fn rewrite(&self, v: &Value, params: &Map<String, Value>) -> Value {
        match v {
            Value::Array(items) => {
                Value::Array(items.iter().map(|x| self.rewrite(x, params)).collect())
            }
            Value::Object(m) if m.len() == 1 => {
                let (k, arg) = m
                    .iter()
                    .next()
                    .map(|(k, a)| (k.as_str(), a))
                    .unwrap_or(("", v));
                match (k, arg) {
                    ("Ref", Value::String(name)) => {
                        if let Some(value) = params.get(name) {
                            return value.clone();
                        }
                        if let Some(n) = self.renamed(name, &self.resources) {
                            return single("Ref", Value::String(n));
                        }
                        v.clone()
                    }
                    ("Fn::GetAtt", _) => {
                        let (res, attr) = get_att_parts(arg);
                        match self.renamed(&res, &self.resources) {
                            Some(n) => single(
                                "Fn::GetAtt",
                                Value::from(vec![Value::from(n), Value::from(attr)]),
                            ),
                            None => single(k, self.rewrite(arg, params)),
                        }
                    }
                    ("Condition", Value::String(c)) => match self.renamed(c, &self.conditions) {
                        Some(n) => single("Condition", Value::String(n)),
                        None => v.clone(),
                    },
                    // Their first argument names a condition, a mapping.
                    ("Fn::If", Value::Array(items)) if !items.is_empty() => {
                        single(k, self.rewrite_first(items, params, &self.conditions))
                    }
                    ("Fn::FindInMap", Value::Array(items)) if !items.is_empty() => {
                        single(k, self.rewrite_first(items, params, &self.mappings))
                    }
                    ("Fn::Sub", _) => single("Fn::Sub", self.rewrite_sub(arg, params)),
                    _ => single(k, self.rewrite(arg, params)),
                }
            }
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    let x = match (k.as_str(), x) {
                        ("DependsOn", Value::String(d)) => Value::String(
                            self.renamed(d, &self.resources)
                                .unwrap_or_else(|| d.clone()),
                        ),
                        ("DependsOn", Value::Array(ds)) => Value::Array(
                            ds.iter()
                                .map(|d| {
                                    match d.as_str().and_then(|d| self.renamed(d, &self.resources))
                                    {
                                        Some(n) => Value::String(n),
                                        None => d.clone(),
                                    }
                                })
                                .collect(),
                        ),
                        ("Condition", Value::String(c)) => Value::String(
                            self.renamed(c, &self.conditions)
                                .unwrap_or_else(|| c.clone()),
                        ),
                        _ => self.rewrite(x, params),
                    };
                    out.insert(k.clone(), x);
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }

    /// `items` rewritten, the first (a name of `names`) prefixed.
    fn rewrite_first(
        &self,
        items: &[Value],
        params: &Map<String, Value>,
        names: &[String],
    ) -> Value {
        let mut items: Vec<Value> = items.iter().map(|x| self.rewrite(x, params)).collect();
        if let Some(n) = items[0].as_str().and_then(|c| self.renamed(c, names)) {
            items[0] = Value::String(n);
        }
        Value::Array(items)
    }

    /// `Fn::Sub` inside the fragment: `${Param}` takes the module's value
    /// (as a variable of the Sub when it is not a plain string), `${R}` and
    /// `${R.Attr}` the renamed resource.
    fn rewrite_sub(&self, arg: &Value, params: &Map<String, Value>) -> Value {
        let (text, vars) = match arg {
            Value::String(s) => (s.clone(), Map::new()),
            Value::Array(items) => (
                items
                    .first()
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                items
                    .get(1)
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), self.rewrite(v, params)))
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            other => return other.clone(),
        };
        let mut vars = vars;
        let text = map_sub_names(&text, |name| {
            if vars.contains_key(name) {
                return None;
            }
            if let Some(value) = params.get(name) {
                return Some(match value {
                    Value::String(s) => Replacement::Literal(s.clone()),
                    other => {
                        vars.insert(name.to_string(), other.clone());
                        Replacement::Keep
                    }
                });
            }
            let (res, attr) = name
                .split_once('.')
                .map(|(r, a)| (r, Some(a)))
                .unwrap_or((name, None));
            self.renamed(res, &self.resources).map(|n| {
                Replacement::Name(match attr {
                    Some(a) => format!("{n}.{a}"),
                    None => n,
                })
            })
        });
        if vars.is_empty() {
            Value::String(text)
        } else {
            Value::from(vec![Value::String(text), Value::Object(vars)])
        }
    }
}

enum Replacement {
    /// The text itself, in place of `${name}`.
    Literal(String),
    /// Another name: `${other}`.
    Name(String),
    /// Left as it is.
    Keep,
}

/// `text` with each `${name}` (not `${!literal}`) replaced as `f` says.
fn map_sub_names(text: &str, mut f: impl FnMut(&str) -> Option<Replacement>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        match (name.starts_with('!'), f(name)) {
            (false, Some(Replacement::Literal(s))) => out.push_str(&s),
            (false, Some(Replacement::Name(n))) => {
                out.push_str("${");
                out.push_str(&n);
                out.push('}');
            }
            _ => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

fn single(k: &str, v: Value) -> Value {
    let mut m = Map::new();
    m.insert(k.to_string(), v);
    Value::Object(m)
}

/// `[R, Attr]` or `"R.Attr"`, as (R, Attr) (the attribute may hold dots).
fn get_att_parts(arg: &Value) -> (String, String) {
    match arg {
        Value::Array(items) => (
            items
                .first()
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            match items.get(1) {
                Some(Value::String(a)) => a.clone(),
                _ => String::new(),
            },
        ),
        Value::String(s) => s
            .split_once('.')
            .map(|(r, a)| (r.to_string(), a.to_string()))
            .unwrap_or((s.clone(), String::new())),
        _ => (String::new(), String::new()),
    }
}

/// The template's references into expanded modules: `Module.Resource`
/// (Ref, Sub), `Module.Resource.Attr` and `[Module, Resource.Attr]`
/// (GetAtt), `[Module, Output]` (a fragment output's value), `DependsOn:
/// Module` (all its resources).
fn refer_into(v: &Value, modules: &BTreeMap<String, Expanded>) -> Value {
    let split = |name: &str| -> Option<(String, String)> {
        let (m, rest) = name.split_once('.')?;
        modules
            .contains_key(m)
            .then(|| (m.to_string(), rest.to_string()))
    };
    match v {
        Value::Array(items) => Value::Array(items.iter().map(|x| refer_into(x, modules)).collect()),
        Value::Object(m) if m.len() == 1 => {
            let (k, arg) = m
                .iter()
                .next()
                .map(|(k, a)| (k.as_str(), a))
                .unwrap_or(("", v));
            match (k, arg) {
                ("Ref", Value::String(name)) => match split(name) {
                    Some((module, res)) => single("Ref", Value::String(format!("{module}{res}"))),
                    None => v.clone(),
                },
                ("Fn::GetAtt", _) => {
                    let (first, attr) = get_att_parts(arg);
                    // `Module.Resource.Attr` as one string: the module is
                    // the first part.
                    let (module, path) = match (modules.contains_key(&first), split(&first)) {
                        (true, _) => (first.clone(), attr.clone()),
                        (false, Some((m, rest))) => (m, format!("{rest}.{attr}")),
                        _ => return single(k, refer_into(arg, modules)),
                    };
                    let e = &modules[&module];
                    if let Some(value) = e.outputs.get(&path) {
                        return refer_into(value, modules);
                    }
                    match path.split_once('.') {
                        Some((res, attr)) => single(
                            "Fn::GetAtt",
                            Value::from(vec![
                                Value::from(format!("{module}{res}")),
                                Value::from(attr),
                            ]),
                        ),
                        None => single(k, refer_into(arg, modules)),
                    }
                }
                ("Fn::Sub", _) => {
                    let rewrite = |text: &str| {
                        map_sub_names(text, |name| {
                            let (m, rest) = name.split_once('.')?;
                            modules
                                .contains_key(m)
                                .then(|| Replacement::Name(format!("{m}{rest}")))
                        })
                    };
                    match arg {
                        Value::String(s) => single("Fn::Sub", Value::String(rewrite(s))),
                        Value::Array(items) => {
                            let mut items: Vec<Value> =
                                items.iter().map(|x| refer_into(x, modules)).collect();
                            if let Some(Value::String(s)) = items.first().cloned() {
                                items[0] = Value::String(rewrite(&s));
                            }
                            single("Fn::Sub", Value::Array(items))
                        }
                        other => single("Fn::Sub", other.clone()),
                    }
                }
                _ => single(k, refer_into(arg, modules)),
            }
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                let x = if k == "DependsOn" {
                    let deps: Vec<Value> = match x {
                        Value::String(s) => vec![Value::String(s.clone())],
                        Value::Array(items) => items.clone(),
                        other => vec![other.clone()],
                    };
                    let mut out_deps = Vec::new();
                    for d in deps {
                        match d.as_str().and_then(|d| modules.get(d)) {
                            Some(e) => out_deps
                                .extend(e.resources.iter().map(|r| Value::String(r.clone()))),
                            None => out_deps.push(d),
                        }
                    }
                    match (x, out_deps.len()) {
                        (Value::String(_), 1) => out_deps.remove(0),
                        _ => Value::Array(out_deps),
                    }
                } else {
                    refer_into(x, modules)
                };
                out.insert(k.clone(), x);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bucket_module() -> Value {
        json!({
            "Parameters": {"Name": {"Type": "String"}, "Size": {"Type": "Number", "Default": 1}},
            "Conditions": {"Big": {"Fn::Equals": [{"Ref": "Size"}, 10]}},
            "Resources": {
                "Store": {"Type": "Cairn::Test::Resource", "Properties": {"Value": {"Fn::Sub": "${Name}-store"}, "Size": {"Ref": "Size"}}},
                "Log": {"Type": "Cairn::Test::Resource", "DependsOn": "Store", "Condition": "Big",
                        "Properties": {"Value": {"Fn::GetAtt": ["Store", "Value"]}, "Of": {"Fn::Sub": "${Store}/${Store.Value}"}}}
            },
            "Outputs": {"StoreValue": {"Value": {"Fn::GetAtt": ["Store", "Value"]}}}
        })
    }

    fn modules() -> BTreeMap<String, Value> {
        [("My::Bucket::Thing::MODULE".to_string(), bucket_module())]
            .into_iter()
            .collect()
    }

    #[test]
    fn a_module_expands_into_prefixed_resources_with_its_parameters() {
        let mut body = json!({
            "Parameters": {"Env": {"Type": "String"}},
            "Resources": {
                "Data": {"Type": "My::Bucket::Thing::MODULE", "DeletionPolicy": "Retain",
                         "Properties": {"Name": {"Ref": "Env"}, "Size": 10}},
                "User": {"Type": "Cairn::Test::Resource", "DependsOn": "Data",
                         "Properties": {"A": {"Ref": "Data.Store"}, "B": {"Fn::GetAtt": ["Data", "Store.Value"]},
                                        "C": {"Fn::GetAtt": "Data.Log.Value"}, "D": {"Fn::Sub": "${Data.Store}!"},
                                        "E": {"Fn::GetAtt": ["Data", "StoreValue"]}}}
            }
        });
        expand(&mut body, &modules()).unwrap();
        let r = &body["Resources"];
        assert_eq!(
            r.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["DataStore", "DataLog", "User"]
        );
        assert_eq!(
            r["DataStore"]["Properties"]["Value"],
            json!({"Fn::Sub": ["${Name}-store", {"Name": {"Ref": "Env"}}]})
        );
        assert_eq!(r["DataStore"]["Properties"]["Size"], json!(10));
        assert_eq!(r["DataStore"]["DeletionPolicy"], "Retain");
        assert_eq!(r["DataLog"]["DependsOn"], "DataStore");
        assert_eq!(r["DataLog"]["Condition"], "DataBig");
        assert_eq!(
            r["DataLog"]["Properties"]["Value"],
            json!({"Fn::GetAtt": ["DataStore", "Value"]})
        );
        assert_eq!(
            r["DataLog"]["Properties"]["Of"],
            json!({"Fn::Sub": "${DataStore}/${DataStore.Value}"})
        );
        assert_eq!(
            body["Conditions"]["DataBig"],
            json!({"Fn::Equals": [10, 10]})
        );
        let u = &r["User"];
        assert_eq!(u["DependsOn"], json!(["DataStore", "DataLog"]));
        assert_eq!(u["Properties"]["A"], json!({"Ref": "DataStore"}));
        assert_eq!(
            u["Properties"]["B"],
            json!({"Fn::GetAtt": ["DataStore", "Value"]})
        );
        assert_eq!(
            u["Properties"]["C"],
            json!({"Fn::GetAtt": ["DataLog", "Value"]})
        );
        assert_eq!(u["Properties"]["D"], json!({"Fn::Sub": "${DataStore}!"}));
        assert_eq!(
            u["Properties"]["E"],
            json!({"Fn::GetAtt": ["DataStore", "Value"]})
        );
    }

    #[test]
    fn a_plain_string_parameter_is_written_into_a_sub() {
        let mut body = json!({"Resources": {"M": {"Type": "My::Bucket::Thing::MODULE", "Properties": {"Name": "logs"}}}});
        expand(&mut body, &modules()).unwrap();
        assert_eq!(
            body["Resources"]["MStore"]["Properties"]["Value"],
            json!({"Fn::Sub": "logs-store"})
        );
        assert_eq!(body["Resources"]["MStore"]["Properties"]["Size"], json!(1));
    }

    #[test]
    fn what_a_module_cannot_take_is_refused_by_name() {
        let run = |props: Value| {
            let mut body = json!({"Resources": {"M": {"Type": "My::Bucket::Thing::MODULE", "Properties": props}}});
            expand(&mut body, &modules()).err().map(|e| e.0)
        };
        assert_eq!(
            run(json!({})).as_deref(),
            Some("Module M: its parameter Name is required: set it in M's Properties")
        );
        assert_eq!(
            run(json!({"Name": "x", "Colour": "red"})).as_deref(),
            Some("Module M: Colour is not a parameter of My::Bucket::Thing::MODULE")
        );
        let mut unknown = json!({"Resources": {"M": {"Type": "No::Such::Thing::MODULE"}}});
        assert_eq!(
            expand(&mut unknown, &modules())
                .err()
                .map(|e| e.0)
                .as_deref(),
            Some("Template format error: Unrecognized resource types: [No::Such::Thing::MODULE]")
        );
    }

    #[test]
    fn fragments_follow_cloudformations_rules() {
        assert_eq!(check_fragment(&bucket_module()), Ok(()));
        assert_eq!(
            check_fragment(&json!({"Parameters": {}})).err().as_deref(),
            Some("A Module template fragment must have a Resources section")
        );
        assert_eq!(
            check_fragment(&json!({"Resources": {"S": {"Type": "AWS::CloudFormation::Stack"}}}))
                .err()
                .as_deref(),
            Some("Template fragment can't contain nested stack.")
        );
        assert_eq!(
            check_fragment(&json!({"Parameters": {"P": {}}, "Resources": {}}))
                .err()
                .as_deref(),
            Some("Parameter 'P' must have a Type")
        );
        assert_eq!(
            check_fragment(&json!({"Transform": "X", "Resources": {}}))
                .err()
                .as_deref(),
            Some("Template fragment can't contain transform section.")
        );
    }

    #[test]
    fn modules_inside_modules_expand_and_nest_at_most_three_deep() {
        let inner = json!({"Parameters": {"V": {"Type": "String"}}, "Resources": {"T": {"Type": "Cairn::Test::Resource", "Properties": {"Value": {"Ref": "V"}}}}});
        let outer = json!({"Parameters": {"V": {"Type": "String"}}, "Resources": {"In": {"Type": "A::B::Inner::MODULE", "Properties": {"V": {"Ref": "V"}}}}});
        let set: BTreeMap<String, Value> = [
            ("A::B::Inner::MODULE".to_string(), inner),
            ("A::B::Outer::MODULE".to_string(), outer),
        ]
        .into_iter()
        .collect();
        let mut body = json!({"Resources": {"Out": {"Type": "A::B::Outer::MODULE", "Properties": {"V": "v"}}}});
        expand(&mut body, &set).unwrap();
        assert_eq!(
            body["Resources"]["OutInT"]["Properties"]["Value"],
            json!("v")
        );
        let looping: BTreeMap<String, Value> = [(
            "A::B::Loop::MODULE".to_string(),
            json!({"Resources": {"L": {"Type": "A::B::Loop::MODULE"}}}),
        )]
        .into_iter()
        .collect();
        let mut body = json!({"Resources": {"X": {"Type": "A::B::Loop::MODULE"}}});
        assert_eq!(
            expand(&mut body, &looping).err().map(|e| e.0).as_deref(),
            Some("Modules nest more than 3 levels deep")
        );
    }
}
