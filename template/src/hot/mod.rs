//! HOT, Heat's template language: a template with `heat_template_version`
//! is lowered into the same long form the CloudFormation front end reads,
//! so the graph, planner, executor and store see no difference.
//!
//! Sections map one to one (`resources` → `Resources`, `type` → `Type`, …);
//! HOT's functions become CloudFormation's where one means the same
//! (`get_resource` → `Ref`, `get_attr` → `Fn::GetAtt`, `equals` →
//! `Fn::Equals`, `if` → `Fn::If`) and internal intrinsics `Fn::Heat::…`
//! otherwise, evaluated by `functions` with Heat's semantics. Each version
//! enables exactly the functions Heat's `heat/engine/hot/template.py` gives
//! it; a function a version lacks is an error naming the version it needs,
//! a removed one Heat's `The function … is not supported in this version of
//! HOT.`

pub mod functions;
mod schema;

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::parameters::{HEAT_BOOLEAN, HEAT_JSON, HEAT_NUMBER};
use super::source::{child, SourceMap};
use super::{format_error, TemplateError};

/// The versions, oldest first, with their release names.
const VERSIONS: &[(&str, &str)] = &[
    ("2013-05-23", ""),
    ("2014-10-16", ""),
    ("2015-04-30", ""),
    ("2015-10-15", ""),
    ("2016-04-08", ""),
    ("2016-10-14", "newton"),
    ("2017-02-24", "ocata"),
    ("2017-09-01", "pike"),
    ("2018-03-02", "queens"),
    ("2018-08-31", "rocky"),
    ("2021-04-16", "wallaby"),
];

const V2014_10_16: usize = 1;
const V2015_04_30: usize = 2;
const V2015_10_15: usize = 3;
const V2016_04_08: usize = 4;
const V2016_10_14: usize = 5;
const V2017_02_24: usize = 6;
const V2017_09_01: usize = 7;
const V2021_04_16: usize = 10;

/// Each HOT function and the first version that has it.
const FUNCTIONS: &[(&str, usize)] = &[
    ("get_param", 0),
    ("get_resource", 0),
    ("get_attr", 0),
    ("get_file", 0),
    ("list_join", 0),
    ("str_replace", 0),
    ("resource_facade", 0),
    ("repeat", V2015_04_30),
    ("digest", V2015_04_30),
    ("str_split", V2015_10_15),
    ("map_merge", V2016_04_08),
    ("yaql", V2016_10_14),
    ("map_replace", V2016_10_14),
    ("if", V2016_10_14),
    ("filter", V2017_02_24),
    ("str_replace_strict", V2017_02_24),
    ("make_url", V2017_09_01),
    ("list_concat", V2017_09_01),
    ("str_replace_vstrict", V2017_09_01),
    ("list_concat_unique", V2017_09_01),
    ("contains", V2017_09_01),
];

/// CloudFormation functions HOT had at first, and the version that removed
/// each.
const REMOVED: &[(&str, usize)] = &[
    ("Fn::GetAZs", V2014_10_16),
    ("Fn::Join", V2014_10_16),
    ("Fn::Split", V2014_10_16),
    ("Fn::Replace", V2014_10_16),
    ("Fn::Base64", V2014_10_16),
    ("Fn::MemberListToMap", V2014_10_16),
    ("Fn::ResourceFacade", V2014_10_16),
    ("Ref", V2014_10_16),
    ("Fn::Select", V2015_10_15),
];

/// Functions of the `conditions` section (and `if`'s condition).
const CONDITION_FUNCTIONS: &[(&str, usize)] = &[
    ("get_param", V2016_10_14),
    ("equals", V2016_10_14),
    ("not", V2016_10_14),
    ("and", V2016_10_14),
    ("or", V2016_10_14),
    ("contains", V2017_09_01),
    ("yaql", V2017_09_01),
];

const HEAT_WAIT_CONDITION: &str = "OS::Heat::WaitCondition";
const HEAT_STACK: &str = "OS::Heat::Stack";
const RESOURCE_GROUP: &str = "OS::Heat::ResourceGroup";
const AUTOSCALING_GROUP: &str = "OS::Heat::AutoScalingGroup";
const HEAT_WAIT_CONDITION_HANDLE: &str = "OS::Heat::WaitConditionHandle";
const HEAT_UPDATE_WAIT_CONDITION_HANDLE: &str = "OS::Heat::UpdateWaitConditionHandle";

/// Whether `v` is a function call (a map of one function's name): its
/// value is known when it runs.
fn is_function_call(v: &Value) -> bool {
    v.as_object().is_some_and(|m| {
        m.len() == 1
            && m.keys().all(|k| {
                FUNCTIONS.iter().any(|(n, _)| n == k)
                    || REMOVED.iter().any(|(n, _)| n == k)
                    || k.starts_with("Fn::")
                    || k == "Ref"
            })
    })
}

/// Whether a parsed template is HOT.
pub fn is_hot(body: &Value) -> bool {
    body.get("heat_template_version").is_some()
}

/// The names a HOT template's `get_file` calls read (to be read beside the
/// template and handed back in the template context). Empty for other
/// templates.
pub fn files_needed(body: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.len() == 1 {
                    if let Some(Value::String(name)) = m.get("get_file") {
                        if !out.contains(name) {
                            out.push(name.clone());
                        }
                        return;
                    }
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if is_hot(body) {
        walk(body, &mut out);
    }
    out
}

/// HOT environments that cannot be merged or applied (Heat's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvironmentError(pub String);

/// Applies HOT environments (in order, later ones winning) to a template's
/// context: the merged environment is kept with it, and its `parameters`
/// are returned as values for the template (explicit values win over them).
pub fn apply_environments(
    context: &mut crate::TemplateContext,
    envs: &[Value],
) -> Result<BTreeMap<String, String>, EnvironmentError> {
    apply_environments_text(context, envs).map_err(EnvironmentError)
}

/// [`apply_environments`], its texts.
fn apply_environments_text(
    context: &mut crate::TemplateContext,
    envs: &[Value],
) -> Result<BTreeMap<String, String>, String> {
    let mut parameters = BTreeMap::new();
    if envs.is_empty() {
        return Ok(parameters);
    }
    let merged = merge_environments_text(envs)?;
    if let Some(Value::Object(p)) = merged.get("parameters") {
        for (k, v) in p {
            parameters.insert(k.clone(), super::parameters::parameter_text(v));
        }
    }
    context.environment = Some(merged);
    Ok(parameters)
}

/// `lowered` remembering the type its resource was written with, when it
/// is served as another (an environment's alias, a template file, Heat's
/// types served by CloudFormation's): Heat shows the type as written.
fn as_written_type(mut lowered: Value, written: Option<&Value>) -> Value {
    if let (Value::Object(m), Some(Value::String(w))) = (&mut lowered, written) {
        if m.get("Type").and_then(Value::as_str) != Some(w.as_str()) {
            m.insert(crate::model::WRITTEN_TYPE.into(), Value::String(w.clone()));
        }
    }
    lowered
}

/// The template files an environment's resource_registry maps types to
/// (top level and per resource): provider templates.
pub fn provider_templates(env: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(Value::Object(registry)) = env.get("resource_registry") else {
        return out;
    };
    let mut note = |v: &Value| {
        if let Value::String(s) = v {
            if is_template_file(s) && !out.contains(s) {
                out.push(s.clone());
            }
        }
    };
    for (k, v) in registry {
        if k == "resources" {
            for per in v.as_object().into_iter().flat_map(|m| m.values()) {
                per.as_object()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .for_each(&mut note);
            }
        } else {
            note(v);
        }
    }
    out
}

/// Merges HOT environment files in order, later ones winning (Heat's
/// `-e a.yaml -e b.yaml`): maps merge key by key, `resource_registry`'s
/// `resources` too; `event_sinks` add up.
pub fn merge_environments(envs: &[Value]) -> Result<Value, EnvironmentError> {
    merge_environments_text(envs).map_err(EnvironmentError)
}

/// [`merge_environments`], its texts.
fn merge_environments_text(envs: &[Value]) -> Result<Value, String> {
    const SECTIONS: &[&str] = &[
        "parameters",
        "parameter_defaults",
        "resource_registry",
        "event_sinks",
        "encrypted_param_names",
        "parameter_merge_strategies",
    ];
    let mut out = Map::new();
    for (i, env) in envs.iter().enumerate() {
        let Value::Object(env) = env else {
            return Err(format!("environment {} is not a mapping", i + 1));
        };
        for (section, v) in env {
            if !SECTIONS.contains(&section.as_str()) {
                return Err(format!(
                    "environment has an unknown section \"{section}\"; use {}",
                    SECTIONS.join(", ")
                ));
            }
            match (out.get_mut(section), v) {
                (Some(Value::Array(existing)), Value::Array(more)) => {
                    existing.extend(more.iter().cloned())
                }
                (Some(Value::Object(existing)), Value::Object(more)) => {
                    for (k, x) in more {
                        match (existing.get_mut(k), x) {
                            (Some(Value::Object(e)), Value::Object(m))
                                if section == "resource_registry" && k == "resources" =>
                            {
                                for (rk, rx) in m {
                                    match (e.get_mut(rk), rx) {
                                        (Some(Value::Object(re)), Value::Object(rm)) => {
                                            re.extend(rm.clone())
                                        }
                                        _ => {
                                            e.insert(rk.clone(), rx.clone());
                                        }
                                    }
                                }
                            }
                            _ => {
                                existing.insert(k.clone(), x.clone());
                            }
                        }
                    }
                }
                _ => {
                    out.insert(section.clone(), v.clone());
                }
            }
        }
    }
    Ok(Value::Object(out))
}

/// The index of a `heat_template_version` value in [`VERSIONS`].
fn version(v: &Value) -> Result<usize, TemplateError> {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    VERSIONS
        .iter()
        .position(|(date, name)| *date == text || (!name.is_empty() && *name == text))
        .ok_or_else(|| {
            let known: Vec<String> = VERSIONS
                .iter()
                .map(|(d, n)| if n.is_empty() { d.to_string() } else { format!("{d} ({n})") })
                .collect();
            TemplateError::new(format!(
                "The template version is invalid: \"heat_template_version: {text}\". \"heat_template_version\" should be one of: {}",
                known.join(", ")
            ))
            .at("/heat_template_version")
        })
}

/// The lowering of one template.
struct Lowering<'c> {
    version: usize,
    /// Conditions made for inline `if` conditions.
    extra_conditions: Map<String, Value>,
    /// The files `get_file` reads and the environment.
    context: &'c crate::TemplateContext,
    /// Resources whose type the registry maps to a template (provider
    /// templates): name → the template's name.
    template_resources: BTreeMap<String, String>,
    /// Resources of Heat's wait condition type (their `data` is `Data`).
    wait_conditions: Vec<String>,
    /// `OS::Heat::Stack` resources (`get_attr [s, outputs, X]`).
    heat_stacks: Vec<String>,
    /// `OS::Heat::ResourceGroup` and `OS::Heat::AutoScalingGroup`
    /// resources (`refs` is `MemberIds`…).
    resource_groups: Vec<String>,
    /// Of those, the ones whose members are provider templates (nested
    /// stacks: a member's attributes are its outputs).
    template_groups: Vec<String>,
    /// Of those, the `OS::Heat::AutoScalingGroup` ones.
    scaling_groups: Vec<String>,
    /// Template resources whose template has an `OS::stack_id` output: it
    /// is their reference (`get_resource`) instead of the nested stack's id.
    transparent_refs: Vec<String>,
    /// The declared parameters, while the outputs are lowered: Heat reports
    /// `get_param` of any other name as that output's error (its
    /// validation never resolves it), so it must not refuse the template.
    outputs_parameters: Option<Vec<String>>,
}

/// A resource's type after an environment's `resource_registry`: the
/// resource's own mapping (`resources: {name: {Old: New}}`), an exact one,
/// or the longest glob (`"OS::Networking::*": "OS::Neutron::*"`). Also
/// for a type known only when the stack runs (a group's computed
/// `resource_def` type, mapped by the engine).
pub fn registered(environment: Option<&Value>, name: &str, t: &str) -> Result<Registered, String> {
    let Some(registry) = environment
        .and_then(|e| e.get("resource_registry"))
        .and_then(Value::as_object)
    else {
        return Ok(as_written(t));
    };
    let own = registry
        .get("resources")
        .and_then(|r| r.get(name))
        .and_then(|r| r.get(t));
    let exact = registry.get(t);
    let glob = registry
        .iter()
        .filter(|(k, _)| k.ends_with('*') && t.starts_with(k.trim_end_matches('*')))
        .max_by_key(|(k, _)| k.len())
        .map(|(k, v)| (k.trim_end_matches('*').len(), v));
    let mapped = match (own, exact, glob) {
        (Some(v), _, _) | (None, Some(v), _) => v.clone(),
        (None, None, Some((cut, Value::String(v)))) if v.ends_with('*') => {
            Value::String(format!("{}{}", v.trim_end_matches('*'), &t[cut..]))
        }
        (None, None, Some((_, v))) => v.clone(),
        (None, None, None) => return Ok(as_written(t)),
    };
    match mapped {
        Value::Null => Ok(as_written(t)),
        Value::String(m) if is_template_file(&m) => Ok(Registered::Template(m)),
        Value::String(m) => Ok(Registered::Type(m)),
        other => Err(format!(
            "resource_registry maps {t} to {other}; a mapping must be a type name or null"
        )),
    }
}

/// What the resource registry makes of a resource's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    Type(String),
    /// A provider template: the resource is a nested stack of it.
    Template(String),
}

/// Whether a registry value names a template file.
/// A resource type no registry entry maps: a type name, or a template
/// file when it names one (`type: child.yaml`: Heat's template resource
/// for a type ending in `.yaml` or `.template`, heat/engine/environment.py),
/// read from the template's files.
fn as_written(t: &str) -> Registered {
    if is_template_type(t) {
        Registered::Template(t.to_string())
    } else {
        Registered::Type(t.to_string())
    }
}

/// A batch size no group reaches: a ResourceGroup without a rolling
/// update replaces all its members in one batch.
const ALL_MEMBERS_AT_ONCE: i64 = 1_000_000;

/// Whether a resource's `type` names a template file (Heat: a type ending
/// in `.yaml` or `.template`).
pub fn is_template_type(t: &str) -> bool {
    t.ends_with(".yaml") || t.ends_with(".template")
}

/// The template files a HOT template's resources name as their type
/// (`type: child.yaml`), to be read beside the template and handed in
/// with its files. Empty for other templates.
pub fn template_types(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !is_hot(body) {
        return out;
    }
    let resources = body.get("resources").and_then(Value::as_object);
    for r in resources.into_iter().flat_map(|m| m.values()) {
        // A group's members' type too (ResourceGroup's `resource_def`,
        // AutoScalingGroup's `resource`).
        let member = |key: &str| {
            r.get("properties")
                .and_then(|p| p.get(key))
                .and_then(|d| d.get("type"))
                .and_then(Value::as_str)
        };
        let types = [
            r.get("type").and_then(Value::as_str),
            member("resource_def"),
            member("resource"),
        ];
        for t in types.into_iter().flatten() {
            if is_template_type(t) && !out.iter().any(|o| o == t) {
                out.push(t.to_string());
            }
        }
        // An OS::Heat::Stack's inline template is given the parent's
        // files (Heat sends `files: self.stack.t.files`): its own file
        // types are read with the parent's.
        if r.get("type").and_then(Value::as_str) == Some(HEAT_STACK) {
            let inline = match r.get("properties").and_then(|p| p.get("template")) {
                Some(m @ Value::Object(_)) => Some(m.clone()),
                Some(Value::String(text)) => crate::Template::body_of(text).ok(),
                _ => None,
            };
            for t in inline.iter().flat_map(template_types) {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
    out
}

/// The template files a group's computed member type may name (Heat's
/// `resource_def: {type: {get_param: p}}`): the parameter's default and
/// its allowed values that name one. Read with the template when they
/// exist, so the engine finds them once the parameter's value is known.
pub fn computed_template_types(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !is_hot(body) {
        return out;
    }
    let params = body.get("parameters").and_then(Value::as_object);
    let resources = body.get("resources").and_then(Value::as_object);
    for r in resources.into_iter().flat_map(|m| m.values()) {
        let computed = ["resource_def", "resource"].into_iter().filter_map(|key| {
            r.get("properties")?
                .get(key)?
                .get("type")?
                .get("get_param")?
                .as_str()
        });
        for p in computed {
            let Some(decl) = params.and_then(|ps| ps.get(p)) else {
                continue;
            };
            let allowed = decl
                .get("constraints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("allowed_values").and_then(Value::as_array))
                .flatten();
            for v in decl.get("default").into_iter().chain(allowed) {
                if let Some(t) = v.as_str().filter(|t| is_template_type(t)) {
                    if !out.iter().any(|o| o == t) {
                        out.push(t.to_string());
                    }
                }
            }
        }
    }
    out
}

pub fn is_template_file(v: &str) -> bool {
    v.ends_with(".yaml") || v.ends_with(".yml") || v.ends_with(".template") || v.ends_with(".json")
}

/// Lowers a HOT template (as parsed) into CloudFormation's long form, and
/// its source map's pointers with it.
pub fn lower(
    body: Value,
    map: SourceMap,
    context: &crate::TemplateContext,
) -> Result<(Value, SourceMap), TemplateError> {
    let Value::Object(top) = body else {
        return Err(format_error(
            "The template is not a JSON object or YAML mapping.",
        ));
    };
    let v = version(top.get("heat_template_version").unwrap_or(&Value::Null))
        .map_err(|e| e.locate(&map))?;
    let mut l = Lowering {
        version: v,
        extra_conditions: Map::new(),
        context,
        template_resources: BTreeMap::new(),
        wait_conditions: Vec::new(),
        heat_stacks: Vec::new(),
        resource_groups: Vec::new(),
        scaling_groups: Vec::new(),
        template_groups: Vec::new(),
        transparent_refs: Vec::new(),
        outputs_parameters: None,
    };
    let out = l.template(top).map_err(|e| e.locate(&map))?;
    Ok((out, translate_map(map)))
}

/// The output of a provider template that is its resource's reference.
const STACK_ID_OUTPUT: &str = "OS::stack_id";

impl Lowering<'_> {
    /// Whether the provider template `file` (among the files handed in)
    /// declares an `OS::stack_id` output.
    fn declares_stack_id_output(&self, file: &str) -> bool {
        let Some(text) = self.context.files.get(file) else {
            return false;
        };
        crate::model::Template::body_of(text).is_ok_and(|body| {
            body.get("outputs")
                .and_then(Value::as_object)
                .is_some_and(|o| o.contains_key(STACK_ID_OUTPUT))
        })
    }

    fn version_name(&self) -> &'static str {
        VERSIONS[self.version].0
    }

    /// A section of the environment, when there is one.
    fn environment(&self, section: &str) -> Option<&Map<String, Value>> {
        self.context
            .environment
            .as_ref()
            .and_then(|e| e.get(section))
            .and_then(Value::as_object)
    }

    /// [`registered`] with this template's environment: a mapping to
    /// `null` removes it; one to a template file is a provider template.
    fn registered_type(
        &self,
        name: &str,
        t: &str,
        path: &str,
    ) -> Result<Registered, TemplateError> {
        registered(self.context.environment.as_ref(), name, t)
            .map_err(|e| TemplateError::new(e).at(&child(path, "type")))
    }

    fn template(&mut self, top: Map<String, Value>) -> Result<Value, TemplateError> {
        let mut sections = vec![
            "heat_template_version",
            "description",
            "parameter_groups",
            "parameters",
            "resources",
            "outputs",
        ];
        if self.version >= V2016_10_14 {
            sections.push("conditions");
        }
        for k in top.keys() {
            if !sections.contains(&k.as_str()) {
                return Err(
                    TemplateError::new(format!("The template section is invalid: {k}"))
                        .at(&child("", k)),
                );
            }
        }
        let mut out = Map::new();
        if let Some(d) = top.get("description") {
            out.insert("Description".into(), Value::String(text(d)));
        }
        if let Some(Value::Object(params)) = top.get("parameters") {
            let mut p = Map::new();
            for (name, decl) in params {
                p.insert(name.clone(), self.parameter(name, decl)?);
            }
            out.insert("Parameters".into(), Value::Object(p));
        }
        if let Some(groups) = top.get("parameter_groups") {
            let names: Vec<&String> = match top.get("parameters") {
                Some(Value::Object(p)) => p.keys().collect(),
                _ => Vec::new(),
            };
            parameter_groups(groups, &names)?;
        }
        // Provider templates first: get_attr of such a resource reads an
        // output of its nested stack.
        if let Some(Value::Object(res)) = top.get("resources") {
            for (name, r) in res {
                if let Some(Value::String(t)) = r.get("type") {
                    let path = child("/resources", name);
                    match self.registered_type(name, t, &path)? {
                        Registered::Template(file) => {
                            if self.declares_stack_id_output(&file) {
                                self.transparent_refs.push(name.clone());
                            }
                            self.template_resources.insert(name.clone(), file);
                        }
                        Registered::Type(t) if t == HEAT_WAIT_CONDITION => {
                            self.wait_conditions.push(name.clone());
                        }
                        Registered::Type(t) if t == HEAT_STACK => {
                            self.heat_stacks.push(name.clone());
                        }
                        Registered::Type(t) if t == RESOURCE_GROUP || t == AUTOSCALING_GROUP => {
                            self.resource_groups.push(name.clone());
                            let def_key = if t == AUTOSCALING_GROUP {
                                self.scaling_groups.push(name.clone());
                                "resource"
                            } else {
                                "resource_def"
                            };
                            let member = r
                                .get("properties")
                                .and_then(|p| p.get(def_key))
                                .and_then(|d| d.get("type"))
                                .and_then(Value::as_str);
                            if let Some(m) = member {
                                let at = format!("{name}.member");
                                if let Registered::Template(_) =
                                    self.registered_type(&at, m, &path)?
                                {
                                    self.template_groups.push(name.clone());
                                }
                            }
                        }
                        Registered::Type(_) => {}
                    }
                }
            }
        }
        let mut conditions = Map::new();
        if let Some(Value::Object(conds)) = top.get("conditions") {
            for (name, c) in conds {
                let path = child("/conditions", name);
                conditions.insert(name.clone(), self.condition(c, &path)?);
            }
        }
        let mut resources = Map::new();
        if let Some(Value::Object(res)) = top.get("resources") {
            for (name, r) in res {
                let written = r.get("type");
                if self.resource_groups.contains(name) {
                    for (n, lowered) in self.resource_group(name, r)? {
                        let lowered = match n == *name {
                            true => as_written_type(lowered, written),
                            false => lowered,
                        };
                        resources.insert(n, lowered);
                    }
                    continue;
                }
                let lowered = self.resource(name, r)?;
                resources.insert(name.clone(), as_written_type(lowered, written));
            }
        }
        out.insert("Resources".into(), Value::Object(resources));
        if let Some(Value::Object(outputs)) = top.get("outputs") {
            self.outputs_parameters = Some(match top.get("parameters") {
                Some(Value::Object(p)) => p.keys().cloned().collect(),
                _ => Vec::new(),
            });
            let mut o = Map::new();
            for (name, def) in outputs {
                o.insert(name.clone(), self.output(name, def)?);
            }
            self.outputs_parameters = None;
            out.insert("Outputs".into(), Value::Object(o));
        }
        conditions.extend(std::mem::take(&mut self.extra_conditions));
        if !conditions.is_empty() {
            out.insert("Conditions".into(), Value::Object(conditions));
        }
        Ok(Value::Object(out))
    }

    fn parameter(&self, name: &str, decl: &Value) -> Result<Value, TemplateError> {
        let path = child("/parameters", name);
        let Value::Object(d) = decl else {
            return Err(TemplateError::new(format!("Parameter {name} must be a map")).at(&path));
        };
        let known = [
            "type",
            "label",
            "description",
            "default",
            "hidden",
            "constraints",
            "immutable",
            "tags",
        ];
        if let Some(k) = d.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(
                TemplateError::new(format!("Invalid key '{k}' for parameter ({name})"))
                    .at(&child(&path, k)),
            );
        }
        let ty = match d.get("type").and_then(Value::as_str) {
            Some("string") => "String",
            Some("number") => HEAT_NUMBER,
            Some("comma_delimited_list") => "CommaDelimitedList",
            Some("json") => HEAT_JSON,
            Some("boolean") => HEAT_BOOLEAN,
            Some(other) => {
                return Err(
                    TemplateError::new(format!("Invalid type ({other})")).at(&child(&path, "type"))
                )
            }
            None => {
                return Err(TemplateError::new(format!(
                    "Missing parameter type for parameter: {name}"
                ))
                .at(&path))
            }
        };
        let mut out = Map::new();
        out.insert("Type".into(), json!(ty));
        out.insert(crate::parameters::HEAT_MARK.into(), json!(true));
        // The environment's parameter_defaults replace the template's.
        let env_default = self
            .environment("parameter_defaults")
            .and_then(|m| m.get(name));
        if let Some(default) = env_default.or_else(|| d.get("default")) {
            let text = match (ty, default) {
                (HEAT_JSON, v) if !v.is_string() => v.to_string(),
                ("CommaDelimitedList", Value::Array(items)) => {
                    items.iter().map(text).collect::<Vec<_>>().join(",")
                }
                (_, v) => text(v),
            };
            out.insert("Default".into(), Value::String(text));
        }
        if let Some(desc) = d.get("description").or_else(|| d.get("label")) {
            out.insert("Description".into(), Value::String(text(desc)));
        }
        let flag = |k: &str| {
            d.get(k)
                .is_some_and(|h| h == &json!(true) || h == &json!("true"))
        };
        if flag("hidden") {
            out.insert("NoEcho".into(), json!(true));
        }
        if flag("immutable") {
            out.insert(crate::parameters::HEAT_IMMUTABLE.into(), json!(true));
        }
        lower_constraints(name, &path, d, &mut out)?;
        Ok(Value::Object(out))
    }

    fn resource(&mut self, name: &str, r: &Value) -> Result<Value, TemplateError> {
        let path = child("/resources", name);
        let Value::Object(r) = r else {
            return Err(TemplateError::new(format!("Resource {name} must be a map")).at(&path));
        };
        let mut keys = vec![
            "type",
            "properties",
            "metadata",
            "depends_on",
            "deletion_policy",
            "update_policy",
            "description",
        ];
        if self.version >= V2016_10_14 {
            keys.extend(["external_id", "condition"]);
        }
        if let Some(k) = r.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(TemplateError::new(format!(
                "\"{k}\" is not a valid keyword inside a resource definition"
            ))
            .at(&child(&path, k)));
        }
        let mut out = Map::new();
        match r.get("type") {
            Some(Value::String(t)) => match self.registered_type(name, t, &path)? {
                // Heat's wait conditions are CloudFormation's, run by the
                // engine's signal machinery.
                Registered::Type(t) if t == HEAT_WAIT_CONDITION_HANDLE => {
                    return Ok(with_depends_on(
                        json!({"Type": crate::types::WAIT_CONDITION_HANDLE}),
                        r,
                    ));
                }
                // heat/engine/resources/openstack/heat/wait_condition_handle.py:
                // its update raises UpdateReplace, so every stack update
                // makes a new handle (and a new wait of what uses it).
                Registered::Type(t) if t == HEAT_UPDATE_WAIT_CONDITION_HANDLE => {
                    return Ok(with_depends_on(
                        json!({
                            "Type": crate::types::WAIT_CONDITION_HANDLE,
                            crate::model::REPLACE_ON_UPDATE: true,
                        }),
                        r,
                    ));
                }
                Registered::Type(t) if t == HEAT_STACK => {
                    schema::check(
                        name,
                        HEAT_STACK,
                        r.get("properties"),
                        &path,
                        is_function_call,
                    )?;
                    return Ok(with_depends_on(self.inline_stack(name, r, &path)?, r));
                }
                Registered::Type(t) if t == HEAT_WAIT_CONDITION => {
                    schema::check(
                        name,
                        HEAT_WAIT_CONDITION,
                        r.get("properties"),
                        &path,
                        is_function_call,
                    )?;
                    return Ok(with_depends_on(self.wait_condition(r, &path)?, r));
                }
                Registered::Type(t) => {
                    out.insert("Type".into(), json!(t));
                }
                // Heat's TemplateResource: a nested stack of the template,
                // the properties its parameters.
                Registered::Template(file) => {
                    out.insert("Type".into(), json!(crate::types::STACK_TYPE));
                    let params = match r.get("properties") {
                        Some(p) => self.value(p, &child(&path, "properties"))?,
                        None => json!({}),
                    };
                    out.insert(
                        "Properties".into(),
                        json!({
                            "TemplateURL": format!("{}{file}", crate::types::CONTEXT_FILE),
                            "Parameters": params,
                        }),
                    );
                }
            },
            _ => {
                return Err(
                    TemplateError::new(format!("Resource {name} is missing \"type\"")).at(&path),
                )
            }
        }
        if let (Some(p), false) = (
            r.get("properties"),
            self.template_resources.contains_key(name),
        ) {
            out.insert(
                "Properties".into(),
                self.value(p, &child(&path, "properties"))?,
            );
        }
        if let Some(m) = r.get("metadata") {
            out.insert("Metadata".into(), self.value(m, &child(&path, "metadata"))?);
        }
        if let Some(d) = r.get("depends_on") {
            out.insert("DependsOn".into(), d.clone());
        }
        if let Some(u) = r.get("update_policy") {
            out.insert(
                "UpdatePolicy".into(),
                self.value(u, &child(&path, "update_policy"))?,
            );
        }
        if let Some(d) = r.get("deletion_policy") {
            out.insert(
                "DeletionPolicy".into(),
                json!(deletion_policy(d, &child(&path, "deletion_policy"))?),
            );
        }
        if let Some(id) = r.get("external_id") {
            let id = self.value(id, &child(&path, "external_id"))?;
            out.insert(crate::model::EXTERNAL_ID.into(), id);
        }
        if let Some(c) = r.get("condition") {
            out.insert(
                "Condition".into(),
                self.condition_ref(c, &child(&path, "condition"))?,
            );
        }
        Ok(Value::Object(out))
    }

    /// `OS::Heat::Stack`: a nested stack of an inline template (the
    /// template is the child's own text, not lowered here).
    fn inline_stack(
        &mut self,
        name: &str,
        r: &Map<String, Value>,
        path: &str,
    ) -> Result<Value, TemplateError> {
        let mut outer = r.get("properties").cloned().unwrap_or(json!({}));
        if let Some(m) = outer.as_object_mut() {
            m.remove("template");
        }
        let p = self.value(&outer, &child(path, "properties"))?;
        let raw = r.get("properties").cloned().unwrap_or(json!({}));
        let text = match raw.get("template") {
            Some(Value::String(s)) => s.clone(),
            // `template: {get_file: child.yaml}` is the file's text (Heat
            // resolves the property before it reads the template).
            Some(Value::Object(m)) if m.len() == 1 && m.contains_key("get_file") => {
                let at = child(&child(path, "properties"), "template");
                match self.function("get_file", &m["get_file"], &at)? {
                    Value::String(text) => text,
                    other => other.to_string(),
                }
            }
            Some(m @ Value::Object(_)) => m.to_string(),
            _ => {
                return Err(TemplateError::new(format!(
                    "Property template of {name} must be a template (a map or its text)"
                ))
                .at(&child(path, "properties")))
            }
        };
        let mut props = Map::new();
        props.insert(
            "TemplateURL".into(),
            Value::String(format!("{}{text}", crate::types::INLINE)),
        );
        if let Some(params) = p.get("parameters") {
            props.insert("Parameters".into(), params.clone());
        }
        if let Some(t) = p.get("timeout") {
            props.insert("TimeoutInMinutes".into(), t.clone());
        }
        Ok(json!({"Type": crate::types::STACK_TYPE, "Properties": props}))
    }

    /// `OS::Heat::WaitCondition` as CloudFormation's (Heat's timeout
    /// defaults to an hour).
    fn wait_condition(
        &mut self,
        r: &Map<String, Value>,
        path: &str,
    ) -> Result<Value, TemplateError> {
        let p = match r.get("properties") {
            Some(p) => self.value(p, &child(path, "properties"))?,
            None => json!({}),
        };
        let mut props = Map::new();
        if let Some(h) = p.get("handle") {
            props.insert("Handle".into(), h.clone());
        }
        props.insert(
            "Timeout".into(),
            p.get("timeout").cloned().unwrap_or(json!(3600)),
        );
        if let Some(c) = p.get("count") {
            props.insert("Count".into(), c.clone());
        }
        Ok(json!({"Type": crate::types::WAIT_CONDITION, "Properties": props}))
    }

    /// `OS::Heat::ResourceGroup` and `OS::Heat::AutoScalingGroup` as the
    /// engine's groups: a launch configuration `<name>-launch` (the member
    /// definition: ResourceGroup's resource_def with its index_var, the
    /// AutoScalingGroup's resource) and the group (count or sizes,
    /// removal_policies, the rolling update policy).
    fn resource_group(
        &mut self,
        name: &str,
        r: &Value,
    ) -> Result<Vec<(String, Value)>, TemplateError> {
        let path = child("/resources", name);
        let scaling = self.scaling_groups.iter().any(|g| g == name);
        let heat_type = if scaling {
            AUTOSCALING_GROUP
        } else {
            RESOURCE_GROUP
        };
        schema::check(
            name,
            heat_type,
            r.get("properties"),
            &path,
            is_function_call,
        )?;
        let props = r.get("properties").cloned().unwrap_or(json!({}));
        let at = child(&path, "properties");
        let def_key = if scaling { "resource" } else { "resource_def" };
        let def = props.get(def_key).cloned().unwrap_or(Value::Null);
        let member_props = match def.get("properties") {
            Some(p) => self.value(p, &child(&child(&at, def_key), "properties"))?,
            None => json!({}),
        };
        let (written_member, member_type, member_props) = match def.get("type") {
            Some(Value::String(t)) => (
                json!(t),
                Some(self.registered_type(&format!("{name}.member"), t, &path)?),
                member_props,
            ),
            // A computed type (Heat resolves resource_def's functions
            // before it makes members): the members' type is known when
            // the group is made, a provider's type (a template file must
            // be written out: its template is read before the operation).
            Some(t) if is_function_call(t) => {
                let computed = self.value(t, &child(&child(&at, def_key), "type"))?;
                (computed, None, member_props)
            }
            _ => {
                return Err(TemplateError::new(format!(
                    "Property {def_key} of {name} needs a type"
                ))
                .at(&child(&at, def_key)))
            }
        };
        let (member_type, member_props) = match member_type {
            None => (written_member.clone(), member_props),
            Some(Registered::Type(t)) => (json!(t), member_props),
            // Each member is a nested stack of the template (Heat's
            // group of template resources), its properties the
            // template's parameters.
            Some(Registered::Template(file)) => (
                json!(crate::types::STACK_TYPE),
                json!({
                    "TemplateURL": format!("{}{file}", crate::types::CONTEXT_FILE),
                    "Parameters": member_props,
                }),
            ),
        };
        let mut launch_props = Map::new();
        launch_props.insert("MemberType".into(), member_type);
        launch_props.insert("MemberProperties".into(), member_props);
        if !scaling {
            let index_var = props
                .get("index_var")
                .and_then(Value::as_str)
                .unwrap_or("%index%");
            launch_props.insert("IndexVariable".into(), json!(index_var));
        }
        let launch = format!("{name}-launch");
        let mut launch_def = json!({
            "Type": crate::types::LAUNCH_CONFIGURATION,
            "Properties": launch_props,
        });
        let mut group_props = Map::new();
        group_props.insert("LaunchConfigurationName".into(), json!({"Ref": launch}));
        group_props.insert("MemberNamePrefix".into(), json!(name));
        let group_type = if scaling {
            for (heat, cfn) in [
                ("min_size", "MinSize"),
                ("max_size", "MaxSize"),
                ("desired_capacity", "DesiredCapacity"),
            ] {
                match props.get(heat) {
                    Some(v) => {
                        group_props.insert(cfn.into(), self.value(v, &child(&at, heat))?);
                    }
                    None if heat != "desired_capacity" => {
                        return Err(TemplateError::new(format!(
                        "Property error: resources.{name}.properties: Property {heat} not assigned"
                    ))
                        .at(&at))
                    }
                    None => {}
                }
            }
            crate::types::AUTO_SCALING_GROUP
        } else {
            let count = match props.get("count") {
                Some(c) => self.value(c, &child(&at, "count"))?,
                None => json!(1),
            };
            group_props.insert("Size".into(), count);
            // Heat's ResourceGroup updates its members under their names
            // (the group's nested stack is updated): indices and every
            // %index%-derived property stay.
            group_props.insert("MemberUpdate".into(), json!("InPlace"));
            if let Some(rp) = props.get("removal_policies") {
                group_props.insert(
                    "RemovalPolicies".into(),
                    self.value(rp, &child(&at, "removal_policies"))?,
                );
            }
            if let Some(mode) = props.get("removal_policies_mode") {
                group_props.insert(
                    "RemovalPoliciesMode".into(),
                    self.value(mode, &child(&at, "removal_policies_mode"))?,
                );
            }
            crate::types::INSTANCE_GROUP
        };
        let mut group = Map::new();
        group.insert("Type".into(), json!(group_type));
        group.insert("Properties".into(), Value::Object(group_props));
        // Heat shows the members with the type as written (`server.yaml`).
        if written_member.is_string() && written_member != launch_def["Properties"]["MemberType"] {
            group.insert(
                crate::model::WRITTEN_MEMBER_TYPE.into(),
                json!(written_member),
            );
        }
        // ResourceGroup: update_policy.rolling_update; without one, Heat
        // updates every member at once when resource_def changes (the
        // group's nested stack is updated: heat_integrationtests
        // test_resource_group.py, test_props_update), so all members are
        // replaced in one batch. The AutoScalingGroup: the rolling_updates
        // property, always on with Heat's defaults {0, 1, 0}.
        // ResourceGroup's batch_create (resource_group.py): a new group's
        // members are made max_batch_size at a time, pause_time seconds
        // between batches.
        let batch_create = r
            .get("update_policy")
            .and_then(|u| u.get("batch_create"))
            .filter(|_| !scaling)
            .cloned();
        let rolling = if scaling {
            Some(props.get("rolling_updates").cloned().unwrap_or(json!({})))
        } else {
            Some(
                r.get("update_policy")
                    .and_then(|u| u.get("rolling_update"))
                    .cloned()
                    .unwrap_or(json!({"max_batch_size": ALL_MEMBERS_AT_ONCE})),
            )
        };
        if let Some(ru) = rolling {
            let num = |k: &str, default: i64| {
                ru.get(k)
                    .and_then(|v| {
                        v.as_i64()
                            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    })
                    .unwrap_or(default)
            };
            let mut policy = json!({"RollingUpdate": {
                "MinInstancesInService": num("min_in_service", 0),
                "MaxBatchSize": num("max_batch_size", 1),
                "PauseTime": format!("PT{}S", num("pause_time", 0)),
            }});
            if let Some(bc) = &batch_create {
                let num = |k: &str, default: i64| {
                    bc.get(k)
                        .and_then(|v| {
                            v.as_i64()
                                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                        })
                        .unwrap_or(default)
                };
                policy["BatchCreate"] = json!({
                    "MaxBatchSize": num("max_batch_size", 1),
                    "PauseTime": format!("PT{}S", num("pause_time", 0)),
                });
            }
            group.insert("UpdatePolicy".into(), policy);
        }
        if let Some(d) = r.get("depends_on") {
            group.insert("DependsOn".into(), d.clone());
        }
        if let Some(c) = r.get("condition") {
            let c = self.condition_ref(c, &child(&path, "condition"))?;
            launch_def["Condition"] = c.clone();
            group.insert("Condition".into(), c);
        }
        Ok(vec![
            (launch, launch_def),
            (name.to_string(), Value::Object(group)),
        ])
    }

    fn output(&mut self, name: &str, o: &Value) -> Result<Value, TemplateError> {
        let path = child("/outputs", name);
        let Value::Object(o) = o else {
            return Err(TemplateError::new(format!("Output {name} must be a map")).at(&path));
        };
        let mut out = Map::new();
        // An output's value may be any JSON: CloudFormation's outputs are
        // text, so maps and lists are shown as JSON.
        let value = self.value(
            o.get("value").unwrap_or(&Value::Null),
            &child(&path, "value"),
        )?;
        out.insert("Value".into(), json!({"Fn::Heat::OutputText": value}));
        if let Some(d) = o.get("description") {
            out.insert("Description".into(), Value::String(text(d)));
        }
        if let Some(c) = o.get("condition") {
            out.insert(
                "Condition".into(),
                self.condition_ref(c, &child(&path, "condition"))?,
            );
        }
        Ok(Value::Object(out))
    }

    /// A resource's or output's `condition`: a name, or (an expression) a
    /// condition of its own.
    fn condition_ref(&mut self, c: &Value, path: &str) -> Result<Value, TemplateError> {
        match c {
            Value::String(name) => Ok(json!(name)),
            other => {
                let name = format!("Cairn::Heat::Condition{}", self.extra_conditions.len() + 1);
                let lowered = self.condition(other, path)?;
                self.extra_conditions.insert(name.clone(), lowered);
                Ok(json!(name))
            }
        }
    }

    /// A condition expression.
    fn condition(&mut self, c: &Value, path: &str) -> Result<Value, TemplateError> {
        match c {
            Value::Bool(true) => Ok(json!({"Fn::Equals": ["1", "1"]})),
            Value::Bool(false) => Ok(json!({"Fn::Equals": ["1", "0"]})),
            Value::String(name) => Ok(json!({"Condition": name})),
            Value::Object(m) if m.len() == 1 => {
                let (f, args) = m.iter().next().map(|(k, v)| (k.as_str(), v)).unwrap_or(("", &Value::Null));
                let at = child(path, f);
                let Some((_, since)) = CONDITION_FUNCTIONS.iter().find(|(n, _)| *n == f) else {
                    return Err(TemplateError::new(format!(
                        "The function \"{f}\" is invalid in this context"
                    ))
                    .at(&at));
                };
                self.available(f, *since, &at)?;
                match f {
                    "equals" => {
                        let Value::Array(a) = args else {
                            return Err(TemplateError::new("Arguments to \"equals\" must be of the form: [value_1, value_2]").at(&at));
                        };
                        if a.len() != 2 {
                            return Err(TemplateError::new("Arguments to \"equals\" must be of the form: [value_1, value_2]").at(&at));
                        }
                        let l = self.condition_value(&a[0], &child(&at, "0"))?;
                        let r = self.condition_value(&a[1], &child(&at, "1"))?;
                        Ok(json!({"Fn::Equals": [l, r]}))
                    }
                    "not" => Ok(json!({"Fn::Not": [self.condition(args, &at)?]})),
                    "and" | "or" => {
                        let Value::Array(items) = args else {
                            return Err(TemplateError::new(format!("Arguments to \"{f}\" must be a list of conditions")).at(&at));
                        };
                        if items.len() < 2 {
                            return Err(TemplateError::new(format!("The minimum number of condition arguments to \"{f}\" is 2.")).at(&at));
                        }
                        let lowered: Vec<Value> = items
                            .iter()
                            .enumerate()
                            .map(|(i, x)| self.condition(x, &child(&at, &i.to_string())))
                            .collect::<Result<_, _>>()?;
                        let name = if f == "and" { "Fn::And" } else { "Fn::Or" };
                        Ok(json!({ name: lowered }))
                    }
                    "contains" => Ok(json!({"Fn::Heat::Contains": self.condition_value(args, &at)?})),
                    "get_param" => Ok(json!({"Fn::Heat::Truth": self.value(c, path)?})),
                    _ => Err(yaql(&at)),
                }
            }
            other => Err(TemplateError::new(format!(
                "Invalid condition: {other}; use a condition name, true/false or one of equals, not, and, or"
            ))
            .at(path)),
        }
    }

    /// A value inside a condition function: get_param and literals.
    fn condition_value(&mut self, v: &Value, path: &str) -> Result<Value, TemplateError> {
        match v {
            Value::Object(m) if m.len() == 1 && m.contains_key("get_param") => self.value(v, path),
            Value::Array(items) => Ok(Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.condition_value(x, &child(path, &i.to_string())))
                    .collect::<Result<_, _>>()?,
            )),
            Value::Object(m) if m.len() == 1 => self.condition(v, path),
            other => Ok(other.clone()),
        }
    }

    fn available(&self, f: &str, since: usize, at: &str) -> Result<(), TemplateError> {
        if self.version < since {
            return Err(TemplateError::new(format!(
                "The function \"{f}\" is not supported in heat_template_version {}; it needs {} or later",
                self.version_name(),
                VERSIONS[since].0
            ))
            .at(at));
        }
        Ok(())
    }

    /// A value (properties, metadata, outputs): HOT's functions lowered,
    /// everything else as it is.
    fn value(&mut self, v: &Value, path: &str) -> Result<Value, TemplateError> {
        match v {
            Value::Object(m) if m.len() == 1 => {
                let (k, args) = m
                    .iter()
                    .next()
                    .map(|(k, v)| (k.as_str(), v))
                    .unwrap_or(("", &Value::Null));
                let at = child(path, k);
                if let Some((_, removed)) = REMOVED.iter().find(|(n, _)| *n == k) {
                    if self.version >= *removed {
                        return Err(TemplateError::new(format!(
                            "The template version is invalid: The function {k} is not supported in this version of HOT."
                        ))
                        .at(&at));
                    }
                    // HOT 2013-05-23 reads CloudFormation's functions.
                    return match k {
                        "Fn::ResourceFacade" => self.resource_facade(k, args, &at),
                        "Fn::Replace" | "Fn::MemberListToMap" => {
                            Err(TemplateError::new(format!("{k} is not supported by Cairn"))
                                .at(&at))
                        }
                        // Heat's Select also takes a map's key.
                        "Fn::Select" => Ok(json!({"Fn::Heat::Select": self.value(args, &at)?})),
                        _ => Ok(json!({ k: self.value(args, &at)? })),
                    };
                }
                match FUNCTIONS.iter().find(|(n, _)| *n == k) {
                    Some((_, since)) => {
                        self.available(k, *since, &at)?;
                        self.function(k, args, &at)
                    }
                    None => Ok(json!({ k: self.value(args, &at)? })),
                }
            }
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    out.insert(k.clone(), self.value(x, &child(path, k))?);
                }
                Ok(Value::Object(out))
            }
            Value::Array(items) => Ok(Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.value(x, &child(path, &i.to_string())))
                    .collect::<Result<_, _>>()?,
            )),
            other => Ok(other.clone()),
        }
    }

    fn function(&mut self, f: &str, args: &Value, at: &str) -> Result<Value, TemplateError> {
        let err = |m: String| TemplateError::new(m).at(at);
        let lowered = |s: &mut Self, v: &Value| s.value(v, at);
        Ok(match f {
            "get_param" => self.get_param(args, at)?,
            "get_resource" => match args {
                // A provider template's `OS::stack_id` output stands for
                // the resource's id (template_resource.py,
                // get_reference_id).
                Value::String(name) if self.transparent_refs.contains(name) => {
                    json!({"Fn::GetAtt": [name, format!("Outputs.{STACK_ID_OUTPUT}")]})
                }
                Value::String(name) => json!({"Ref": name}),
                _ => return Err(err("Argument to \"get_resource\" must be a string".into())),
            },
            "get_attr" => self.get_attr(args, at)?,
            "get_file" => {
                let Value::String(name) = args else {
                    return Err(err("Argument to \"get_file\" must be a string".into()));
                };
                match self.context.files.get(name) {
                    Some(content) => Value::String(content.clone()),
                    None => {
                        return Err(err(format!(
                            "No content found in the \"files\" section for get_file path: {name}"
                        )))
                    }
                }
            }
            "resource_facade" => self.resource_facade(f, args, at)?,
            "yaql" => return Err(yaql(at)),
            "list_join" => {
                let Value::Array(a) = args else {
                    return Err(err("Incorrect arguments to \"list_join\" should be: \"list_join\" : [ \" \", [ \"str1\", \"str2\"] ...]".into()));
                };
                if self.version < V2015_10_15 && a.len() != 2 {
                    return Err(err("Incorrect arguments to \"list_join\" should be: \"list_join\" : [ \" \", [ \"str1\", \"str2\"]]".into()));
                }
                json!({"Fn::Heat::ListJoin": lowered(self, args)?})
            }
            "str_replace" | "str_replace_strict" | "str_replace_vstrict" => {
                let Value::Object(m) = args else {
                    return Err(err(format!("Arguments to \"{f}\" must be a map")));
                };
                let (Some(t), Some(p)) = (m.get("template"), m.get("params")) else {
                    return Err(err(format!("\"{f}\" syntax should be {f}:\n  template: This is var1 template var2\n  params:\n    var1: a\n    var2: string")));
                };
                json!({"Fn::Heat::StrReplace": [f, lowered(self, t)?, lowered(self, p)?]})
            }
            "repeat" => {
                let maps = self.version >= V2016_10_14;
                let permutations = self.version >= V2017_09_01;
                json!({"Fn::Heat::Repeat": [lowered(self, args)?, maps, permutations]})
            }
            "if" => self.if_function(args, at)?,
            other => {
                let name = match other {
                    "digest" => "Fn::Heat::Digest",
                    "str_split" => "Fn::Heat::StrSplit",
                    "map_merge" => "Fn::Heat::MapMerge",
                    "map_replace" => "Fn::Heat::MapReplace",
                    "filter" => "Fn::Heat::Filter",
                    "make_url" => "Fn::Heat::MakeUrl",
                    "list_concat" => "Fn::Heat::ListConcat",
                    "list_concat_unique" => "Fn::Heat::ListConcatUnique",
                    _ => "Fn::Heat::Contains",
                };
                json!({ name: lowered(self, args)? })
            }
        })
    }

    /// `resource_facade`: what the resource this provider template
    /// implements has as `metadata`, `deletion_policy` or `update_policy`
    /// (heat/engine/hot/functions.py, ResourceFacade). Its parent hands
    /// them in (`TemplateContext::facade`); a template read on its own
    /// (validation, a top-level stack) reads Heat's defaults.
    /// HOT 2013-05-23's `Fn::ResourceFacade` names them as CloudFormation
    /// does (heat/engine/cfn/functions.py).
    fn resource_facade(&self, f: &str, args: &Value, at: &str) -> Result<Value, TemplateError> {
        const HOT: [&str; 3] = ["metadata", "deletion_policy", "update_policy"];
        const CFN: [&str; 3] = ["Metadata", "DeletionPolicy", "UpdatePolicy"];
        let names = if f == "resource_facade" { HOT } else { CFN };
        let facade = self.context.facade.clone().unwrap_or_default();
        args.as_str()
            .and_then(|a| names.iter().position(|n| *n == a))
            .and_then(|i| facade.get(HOT[i]))
            .ok_or_else(|| {
                TemplateError::new(format!(
                    "Incorrect arguments to \"{f}\" should be one of: {}",
                    names.join(", ")
                ))
                .at(at)
            })
    }

    /// `get_param`: a parameter, or a path into one.
    fn get_param(&mut self, args: &Value, at: &str) -> Result<Value, TemplateError> {
        let err = |m: String| TemplateError::new(m).at(at);
        let lowered = |s: &mut Self, v: &Value| s.value(v, at);
        let name = match args {
            Value::String(name) => Some(name.as_str()),
            Value::Array(a) => a.first().and_then(Value::as_str),
            _ => None,
        };
        if let (Some(name), Some(declared)) = (name, &self.outputs_parameters) {
            if !declared.iter().any(|d| d == name) && !is_pseudo_parameter(name) {
                // heat/engine/hot/functions.py, GetParam.result:
                // UserParameterMissing, reported as the output's error.
                return Ok(json!({"Fn::Heat::MissingParameter": name}));
            }
        }
        Ok(match args {
            Value::String(name) => parameter_ref(name),
            Value::Array(a) if !a.is_empty() => {
                let Value::String(name) = &a[0] else {
                    return Err(err("Parameter name in \"get_param\" must be string".into()));
                };
                if a.len() == 1 {
                    parameter_ref(name)
                } else {
                    let rest = lowered(self, &Value::Array(a[1..].to_vec()))?;
                    json!({"Fn::Heat::Path": [parameter_ref(name), rest, "get_param"]})
                }
            }
            Value::Array(_) => {
                return Err(err("Function \"get_param\" must have arguments".into()))
            }
            _ => {
                return Err(err(
                    "Argument to \"get_param\" must be string or list".into()
                ))
            }
        })
    }

    /// `get_attr`: an attribute (a group member's, a nested stack's output,
    /// a provider template's output), or a path into one.
    fn get_attr(&mut self, args: &Value, at: &str) -> Result<Value, TemplateError> {
        let err = |m: String| TemplateError::new(m).at(at);
        let lowered = |s: &mut Self, v: &Value| s.value(v, at);
        let Value::Array(a) = args else {
            return Err(err("Argument to \"get_attr\" must be a list".into()));
        };
        match a.len() {
            0 => return Err(err("Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]".into())),
            // heat/engine/hot/functions.py GetAttAllAttributes (from
            // 2015-10-15): the map of all the resource's attributes.
            1 if self.version >= V2015_10_15 => {
                return match &a[0] {
                    Value::String(res) => {
                        Ok(json!({"Fn::GetAtt": [res, crate::types::ALL_ATTRIBUTES]}))
                    }
                    _ => Err(err("Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]".into())),
                };
            }
            1 => return Err(err("Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]".into())),
            _ => {}
        }
        let Value::String(res) = &a[0] else {
            return Err(err("Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]".into()));
        };
        if self.resource_groups.contains(res) {
            return self.group_attribute(res, a, at, &err);
        }
        // OS::Heat::Stack: [s, outputs] is the map of its outputs, [s,
        // outputs, X, path…] reads output X.
        if self.heat_stacks.contains(res) && a[1] == json!("outputs") {
            if a.len() == 2 {
                // The map of all the nested stack's outputs.
                return Ok(json!({"Fn::GetAtt": [res, "Outputs"]}));
            }
            let Some(Value::String(output)) = a.get(2) else {
                return Err(err(format!(
                    "get_attr of {res}'s outputs takes an output's name: [{res}, outputs, <name>]"
                )));
            };
            let getatt = json!({"Fn::GetAtt": [res, format!("Outputs.{output}")]});
            if a.len() == 3 {
                return Ok(getatt);
            }
            let rest = lowered(self, &Value::Array(a[3..].to_vec()))?;
            return Ok(json!({"Fn::Heat::Path": [getatt, rest, "get_attr"]}));
        }
        if let (true, Value::String(key)) = (self.template_resources.contains_key(res), &a[1]) {
            if let Some(inner) = key.strip_prefix("resource.") {
                return self.nested_resource_attribute(res, inner, &a[2..], at);
            }
        }
        let attr = lowered(self, &a[1])?;
        // A provider template's attributes are its outputs.
        let attr = match (&attr, self.template_resources.contains_key(res)) {
            (Value::String(name), true) => json!(format!("Outputs.{name}")),
            // Heat's wait condition `data` is CloudFormation's Data.
            (Value::String(name), false)
                if name == "data" && self.wait_conditions.contains(res) =>
            {
                json!("Data")
            }
            _ => attr,
        };
        let getatt = json!({"Fn::GetAtt": [res, attr]});
        if a.len() == 2 {
            return Ok(getatt);
        }
        let rest = lowered(self, &Value::Array(a[2..].to_vec()))?;
        Ok(json!({"Fn::Heat::Path": [getatt, rest, "get_attr"]}))
    }

    /// `get_attr: [r, resource.<name>.<attr>, path…]` of a template
    /// resource (heat/engine/resources/template_resource.py, nested
    /// attributes): an attribute of a resource inside its nested stack, or
    /// with no attribute (`resource.<name>`) that resource's id.
    fn nested_resource_attribute(
        &mut self,
        res: &str,
        inner: &str,
        rest: &[Value],
        at: &str,
    ) -> Result<Value, TemplateError> {
        let mut parts = inner.splitn(2, '.');
        let name = parts.next().unwrap_or_default();
        let mut path = vec![json!(name)];
        let rest = match self.value(&Value::Array(rest.to_vec()), at)? {
            Value::Array(r) => r,
            _ => Vec::new(),
        };
        match parts.next() {
            Some(attr) => path.extend([json!("Attributes"), json!(attr)]),
            None if rest.is_empty() => path.push(json!("PhysicalId")),
            None => path.push(json!("Attributes")),
        }
        path.extend(rest);
        Ok(json!({"Fn::Heat::Path": [
            {"Fn::GetAtt": [res, crate::types::NESTED_RESOURCES_ATTRIBUTE]},
            path,
            "get_attr"
        ]}))
    }

    /// `if`: CloudFormation's Fn::If over a condition's name.
    fn if_function(&mut self, args: &Value, at: &str) -> Result<Value, TemplateError> {
        let err = |m: String| TemplateError::new(m).at(at);
        let Value::Array(a) = args else {
            return Err(err("Arguments to \"if\" must be of the form: [condition_name, value_if_true, value_if_false]".into()));
        };
        if a.len() != 3 {
            return Err(err("Arguments to \"if\" must be of the form: [condition_name, value_if_true, value_if_false]".into()));
        }
        let cond = self.condition_ref(&a[0], &child(at, "0"))?;
        // From 2021-04-16, a null branch removes the property.
        let branch = |s: &mut Self, v: &Value, i: &str| -> Result<Value, TemplateError> {
            if v.is_null() && s.version >= V2021_04_16 {
                Ok(json!({"Ref": "AWS::NoValue"}))
            } else {
                s.value(v, &child(at, i))
            }
        };
        let yes = branch(self, &a[1], "1")?;
        let no = branch(self, &a[2], "2")?;
        Ok(json!({"Fn::If": [cond, yes, no]}))
    }
}

/// Heat's checks of `parameter_groups`: a list of groups, each with a list
/// of declared parameters, none in two groups.
fn parameter_groups(groups: &Value, names: &[&String]) -> Result<(), TemplateError> {
    let fail = |label: Option<&str>, message: String, at: String| {
        let path = match label {
            Some(l) => format!("parameter_groups.{l}"),
            None => "parameter_groups".into(),
        };
        Err(TemplateError::new(format!("Parameter Groups error: {path}: {message}")).at(&at))
    };
    let Value::Array(groups) = groups else {
        return fail(
            None,
            "The parameter_groups should be a list.".into(),
            "/parameter_groups".into(),
        );
    };
    let mut grouped: Vec<&Value> = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let at = child("/parameter_groups", &i.to_string());
        let label = g.get("label").map(text).unwrap_or_default();
        let members = match g.get("parameters") {
            None | Some(Value::Null) => {
                return fail(
                    Some(&label),
                    "The parameters must be provided for each parameter group.".into(),
                    at,
                )
            }
            Some(Value::Array(m)) => m,
            Some(_) => {
                return fail(
                    Some(&label),
                    "The parameters of parameter group should be a list.".into(),
                    child(&at, "parameters"),
                )
            }
        };
        for p in members {
            let shown = text(p);
            if grouped.contains(&p) {
                return fail(
                    Some(&label),
                    format!("The {shown} parameter must be assigned to one parameter group only."),
                    child(&at, "parameters"),
                );
            }
            grouped.push(p);
            if !names.iter().any(|n| **n == shown) {
                return fail(
                    Some(&label),
                    format!("The grouped parameter {shown} does not reference a valid parameter."),
                    child(&at, "parameters"),
                );
            }
        }
    }
    Ok(())
}

impl Lowering<'_> {
    /// `get_attr` of an `OS::Heat::ResourceGroup`, as Heat reads it: `refs`
    /// (ids in order), `refs_map` (index → id), `resource.N` (member N's
    /// id), `resource.N.attr` or `[resource.N, attr]` (member N's attribute),
    /// `[attributes, attr]` (index → each member's attr), and any other name
    /// (the list of that attribute of every member), each with a path.
    fn group_attribute(
        &mut self,
        res: &str,
        a: &[Value],
        at: &str,
        err: &dyn Fn(String) -> TemplateError,
    ) -> Result<Value, TemplateError> {
        let rest = |l: &mut Self, from: usize| -> Result<Value, TemplateError> {
            let items: Vec<Value> = a.get(from..).map(<[Value]>::to_vec).unwrap_or_default();
            l.value(&Value::Array(items), at)
        };
        let path_of = |v: Value, rest: Value| -> Value {
            match &rest {
                Value::Array(r) if r.is_empty() => v,
                _ => json!({"Fn::Heat::Path": [v, rest, "get_attr"]}),
            }
        };
        // A member that is a provider template has its outputs as
        // attributes: `[group, attributes, x]` reads each one's output x.
        let template_members = self.template_groups.iter().any(|g| g == res);
        let members = |attr: Value, rest: Value, mode: &str| -> Value {
            let (attr, rest) = match (template_members, rest) {
                (true, Value::Array(mut r)) => {
                    r.insert(0, attr);
                    (json!("Outputs"), Value::Array(r))
                }
                (_, rest) => (attr, rest),
            };
            json!({"Fn::Heat::Members": [
                {"Fn::GetAtt": [res, "MemberAttributes"]}, attr, rest, mode
            ]})
        };
        let Value::String(key) = &a[1] else {
            let attr = self.value(&a[1], at)?;
            let rest = rest(self, 2)?;
            return Ok(members(attr, rest, "list"));
        };
        let scaling = self.scaling_groups.iter().any(|g| g == res);
        match key.as_str() {
            "current_size" if scaling => {
                Ok(json!({"Fn::Length": {"Fn::GetAtt": [res, "MemberIds"]}}))
            }
            "outputs" | "outputs_list" if scaling => {
                let Some(attr) = a.get(2) else {
                    return Err(err(format!(
                        "get_attr of {res}'s {key} needs the member attribute: [{res}, {key}, <attribute>]"
                    )));
                };
                let attr = self.value(attr, at)?;
                let rest = rest(self, 3)?;
                let mode = if key == "outputs" { "map" } else { "list" };
                Ok(members(attr, rest, mode))
            }
            "refs" => Ok(path_of(
                json!({"Fn::GetAtt": [res, "MemberIds"]}),
                rest(self, 2)?,
            )),
            "refs_map" => Ok(path_of(
                json!({"Fn::GetAtt": [res, "MemberIdsByIndex"]}),
                rest(self, 2)?,
            )),
            "removed_rsrc_list" => Ok(path_of(
                json!({"Fn::GetAtt": [res, "RemovedIndices"]}),
                rest(self, 2)?,
            )),
            "attributes" => {
                let Some(attr) = a.get(2) else {
                    return Err(err(format!(
                        "The Referenced Attribute ({res} attributes) is incorrect."
                    )));
                };
                let attr = self.value(attr, at)?;
                let rest = rest(self, 3)?;
                Ok(members(attr, rest, "map"))
            }
            k if k.starts_with("resource.") => {
                let mut parts = k.splitn(3, '.').skip(1);
                let index = parts.next().unwrap_or_default().to_string();
                let mut path: Vec<Value> = parts.map(|p| json!(p)).collect();
                if let Value::Array(r) = rest(self, 2)? {
                    path.extend(r);
                }
                if path.is_empty() {
                    return Ok(json!({"Fn::Heat::Member": [
                        {"Fn::GetAtt": [res, "MemberIdsByIndex"]}, index, [], res
                    ]}));
                }
                if template_members {
                    path.insert(0, json!("Outputs"));
                }
                Ok(json!({"Fn::Heat::Member": [
                    {"Fn::GetAtt": [res, "MemberAttributes"]}, index, path, res
                ]}))
            }
            _ => {
                let rest = rest(self, 2)?;
                Ok(members(json!(key), rest, "list"))
            }
        }
    }
}

fn yaql(at: &str) -> TemplateError {
    TemplateError::new("yaql is not supported by Cairn: write the expression with HOT's other functions (repeat, map_merge, filter, list_concat, …)").at(at)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The source map's pointers in the lowered sections' names, so errors
/// found after lowering point at the HOT text.
fn translate_map(map: SourceMap) -> SourceMap {
    map.translated(|p| {
        let mut segments: Vec<String> = p.split('/').map(String::from).collect();
        if segments.len() > 1 {
            let renamed = match segments[1].as_str() {
                "parameters" => "Parameters",
                "resources" => "Resources",
                "outputs" => "Outputs",
                "conditions" => "Conditions",
                "description" => "Description",
                _ => return p.to_string(),
            };
            segments[1] = renamed.into();
        }
        if segments.len() > 3 && (segments[1] == "Resources" || segments[1] == "Outputs") {
            let renamed = match segments[3].as_str() {
                "type" => "Type",
                "properties" => "Properties",
                "metadata" => "Metadata",
                "depends_on" => "DependsOn",
                "update_policy" => "UpdatePolicy",
                "deletion_policy" => "DeletionPolicy",
                "condition" => "Condition",
                "value" => "Value",
                "description" => "Description",
                other => other,
            }
            .to_string();
            segments[3] = renamed;
        }
        segments.join("/")
    })
}

/// A Heat parameter's constraints as the parameter's CloudFormation keys
/// (MinLength, MaxValue, AllowedValues, …) and Cairn's Heat marks (modulo,
/// custom constraints, each constraint's description).
fn lower_constraints(
    name: &str,
    path: &str,
    d: &Map<String, Value>,
    out: &mut Map<String, Value>,
) -> Result<(), TemplateError> {
    let mut custom = Vec::new();
    let mut descriptions = Map::new();
    for (i, c) in d
        .get("constraints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let cpath = child(&child(path, "constraints"), &i.to_string());
        let Value::Object(c) = c else {
            return Err(
                TemplateError::new("Invalid parameter constraints: each must be a map").at(&cpath),
            );
        };
        if let Some(desc) = c.get("description") {
            for kind in c.keys().filter(|k| *k != "description") {
                descriptions.insert(kind.clone(), Value::String(text(desc)));
            }
        }
        for (k, v) in c {
            match k.as_str() {
                "description" => {}
                "length" => {
                    if let Some(min) = v.get("min") {
                        out.insert("MinLength".into(), min.clone());
                    }
                    if let Some(max) = v.get("max") {
                        out.insert("MaxLength".into(), max.clone());
                    }
                }
                "range" => {
                    if let Some(min) = v.get("min") {
                        out.insert("MinValue".into(), min.clone());
                    }
                    if let Some(max) = v.get("max") {
                        out.insert("MaxValue".into(), max.clone());
                    }
                }
                "allowed_values" => {
                    let values: Vec<Value> = v
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|x| Value::String(text(x)))
                        .collect();
                    out.insert("AllowedValues".into(), Value::Array(values));
                }
                "allowed_pattern" => {
                    out.insert("AllowedPattern".into(), Value::String(text(v)));
                }
                // Accepted and reported as not checked when used: Cairn
                // has no custom constraint plugins (nova.flavor, …).
                "custom_constraint" => custom.push(Value::String(text(v))),
                "modulo" => {
                    out.insert(
                        crate::parameters::HEAT_MODULO.into(),
                        lower_modulo(v, &child(&cpath, "modulo"))?,
                    );
                }
                other => {
                    return Err(TemplateError::new(format!(
                        "Invalid parameter constraints for parameter {name}, expected a list of: length, range, modulo, allowed_values, allowed_pattern, custom_constraint; got {other}"
                    ))
                    .at(&cpath))
                }
            }
        }
    }
    if !custom.is_empty() {
        out.insert(
            crate::parameters::HEAT_CUSTOM_CONSTRAINTS.into(),
            Value::Array(custom),
        );
    }
    if !descriptions.is_empty() {
        out.insert(
            crate::parameters::HEAT_DESCRIPTIONS.into(),
            Value::Object(descriptions),
        );
    }
    Ok(())
}

/// A `modulo` constraint: a step and an offset, checked as Heat does.
fn lower_modulo(v: &Value, path: &str) -> Result<Value, TemplateError> {
    let int = |k: &str| {
        v.get(k).and_then(|x| {
            x.as_i64()
                .or_else(|| x.as_str().and_then(|s| s.trim().parse().ok()))
        })
    };
    let (Some(step), Some(offset)) = (int("step"), int("offset")) else {
        return Err(TemplateError::new(
            "A modulo constraint must have a step value and an offset value specified.",
        )
        .at(path));
    };
    if step == 0 {
        return Err(TemplateError::new("step cannot be 0.").at(path));
    }
    if offset.abs() >= step.abs() {
        return Err(
            TemplateError::new("offset must be smaller (by absolute value) than step.").at(path),
        );
    }
    if step.signum() * offset.signum() < 0 {
        return Err(
            TemplateError::new("step and offset must be both positive or both negative.").at(path),
        );
    }
    Ok(json!({"step": step, "offset": offset}))
}

/// A parameter's value: a declared parameter's `Ref`, or one of Heat's
/// pseudo parameters (heat/engine/hot/parameters.py, `PSEUDO_PARAMETERS`)
/// as CloudFormation's: `OS::stack_name` is the stack's name,
/// `OS::stack_id` its id as Heat has it (a UUID: the last part of Cairn's
/// stack ARN), `OS::project_id` the account, `OS::region` the region.
/// A name every template's `get_param` resolves without a declaration:
/// Heat's pseudo parameters and CloudFormation's (which Cairn's HOT keeps).
fn is_pseudo_parameter(name: &str) -> bool {
    name.starts_with("OS::") || name.starts_with("AWS::")
}

fn parameter_ref(name: &str) -> Value {
    match name {
        "OS::stack_name" => json!({"Ref": "AWS::StackName"}),
        "OS::stack_id" => {
            json!({"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]})
        }
        "OS::project_id" => json!({"Ref": "AWS::AccountId"}),
        "OS::region" => json!({"Ref": "AWS::Region"}),
        _ => json!({"Ref": name}),
    }
}

/// A lowered resource with the HOT resource's `depends_on`, when it has one.
fn with_depends_on(mut lowered: Value, r: &Map<String, Value>) -> Value {
    if let (Some(out), Some(d)) = (lowered.as_object_mut(), r.get("depends_on")) {
        out.insert("DependsOn".into(), d.clone());
    }
    lowered
}

/// A HOT `deletion_policy` as CloudFormation's: Heat snapshots when the
/// type can and deletes otherwise; Cairn's providers have no snapshots.
fn deletion_policy(d: &Value, at: &str) -> Result<&'static str, TemplateError> {
    match text(d).as_str() {
        "Delete" | "delete" | "Snapshot" | "snapshot" => Ok("Delete"),
        "Retain" | "retain" => Ok("Retain"),
        other => Err(TemplateError::new(format!("Invalid deletion policy \"{other}\"")).at(at)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_computed_member_types_files_come_from_its_parameter() {
        let body = json!({
            "heat_template_version": "2018-08-31",
            "parameters": {"t": {"type": "string", "default": "a.yaml",
                "constraints": [{"allowed_values": ["a.yaml", "b.template", "OS::Heat::None"]}]}},
            "resources": {
                "g": {"type": "OS::Heat::ResourceGroup",
                      "properties": {"resource_def": {"type": {"get_param": "t"}}}},
                "s": {"type": "OS::Heat::None"}
            }
        });
        assert_eq!(computed_template_types(&body), ["a.yaml", "b.template"]);
        assert!(computed_template_types(&json!({"Resources": {}})).is_empty());
    }

    #[test]
    fn the_registry_maps_a_type_known_late() {
        let env = json!({"resource_registry": {
            "My::Server": "server.yaml",
            "My::Gone": null,
            "OS::Old::*": "OS::New::*",
            "resources": {"g.member": {"My::Thing": "OS::Heat::None"}}
        }});
        let r = |name: &str, t: &str| registered(Some(&env), name, t);
        assert_eq!(
            r("g.member", "My::Server"),
            Ok(Registered::Template("server.yaml".into()))
        );
        assert_eq!(
            r("g.member", "My::Thing"),
            Ok(Registered::Type("OS::Heat::None".into()))
        );
        assert_eq!(
            r("other", "My::Thing"),
            Ok(Registered::Type("My::Thing".into()))
        );
        assert_eq!(
            r("g.member", "OS::Old::X"),
            Ok(Registered::Type("OS::New::X".into()))
        );
        assert_eq!(
            r("g.member", "My::Gone"),
            Ok(Registered::Type("My::Gone".into()))
        );
        assert_eq!(
            registered(None, "g", "x.yaml"),
            Ok(Registered::Template("x.yaml".into()))
        );
    }
}
