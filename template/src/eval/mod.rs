//! Evaluation of intrinsic functions and conditions.
//!
//! Evaluation runs twice per stack operation. Before any work starts, everything
//! that needs no provider output is resolved (parameters, pseudo parameters,
//! mappings, conditions, and every function over them); a subtree that needs a
//! resource's `Ref`/`Fn::GetAtt` (or an import) is reported as pending and kept
//! unevaluated. During execution the same expressions are evaluated again with a
//! [`Resolver`] that reads the recorded provider results.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::model::Template;
use super::parameters::ParameterValues;
use super::source::child;
use super::{format_error, template_error, TemplateError};

/// The identity of the stack being evaluated: what the pseudo parameters return.
#[derive(Debug, Clone, PartialEq)]
pub struct StackContext {
    pub stack_name: String,
    pub stack_id: String,
    pub region: String,
    pub account_id: String,
    pub partition: String,
    pub url_suffix: String,
    pub notification_arns: Vec<String>,
    /// Region → its availability zones (for `Fn::GetAZs`). A region not listed
    /// gets `<region>a`, `<region>b`, `<region>c`.
    pub availability_zones: BTreeMap<String, Vec<String>>,
}

impl StackContext {
    /// A context for `stack_name` with CloudFormation's stack ARN format.
    pub fn new(stack_name: &str, stack_uuid: &str, region: &str, account_id: &str) -> Self {
        StackContext {
            stack_name: stack_name.to_string(),
            stack_id: format!(
                "arn:aws:cloudformation:{region}:{account_id}:stack/{stack_name}/{stack_uuid}"
            ),
            region: region.to_string(),
            account_id: account_id.to_string(),
            partition: "aws".into(),
            url_suffix: "amazonaws.com".into(),
            notification_arns: Vec::new(),
            availability_zones: BTreeMap::new(),
        }
    }

    fn azs(&self, region: &str) -> Vec<String> {
        let region = if region.is_empty() {
            &self.region
        } else {
            region
        };
        self.availability_zones
            .get(region)
            .cloned()
            .unwrap_or_else(|| {
                ["a", "b", "c"]
                    .iter()
                    .map(|s| format!("{region}{s}"))
                    .collect()
            })
    }
}

/// Functions CloudFormation refuses in the Conditions block (besides the
/// ones that read resources or other stacks, which say so themselves).
const NOT_IN_CONDITIONS: [&str; 3] = ["Fn::Base64", "Fn::GetAZs", "Fn::Cidr"];

/// What a reference to a resource or an export resolves to.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Value(Value),
    /// Not known yet: the resource has not been created (or this is the static pass).
    Pending,
    /// Does not exist (a resource whose condition is false, an export nobody made).
    Absent,
}

/// Supplies resource references and imports to the evaluator.
pub trait Resolver: Sync {
    /// What `Ref` of a resource returns (its physical id, usually).
    fn resource_ref(&self, logical_id: &str) -> Lookup;
    fn resource_attribute(&self, logical_id: &str, attribute: &str) -> Lookup;
    fn import_value(&self, export_name: &str) -> Lookup;
    /// `Fn::GetStackOutput`: output `output` of the stack named `stack`.
    /// Pending unless a resolver knows other stacks' outputs.
    fn stack_output(&self, _stack: &str, _output: &str) -> Lookup {
        Lookup::Pending
    }
}

/// The resolver of the static pass: every resource and import is pending.
pub struct StaticPass;

impl Resolver for StaticPass {
    fn resource_ref(&self, _: &str) -> Lookup {
        Lookup::Pending
    }
    fn resource_attribute(&self, _: &str, _: &str) -> Lookup {
        Lookup::Pending
    }
    fn import_value(&self, _: &str) -> Lookup {
        Lookup::Pending
    }
}

/// The result of evaluating one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Evaluated {
    Value(Value),
    /// `Ref: AWS::NoValue`: removes the enclosing property or list element.
    NoValue,
    /// Needs provider output; the node is kept unevaluated.
    Pending,
}

impl Evaluated {
    /// The value, with a pending node replaced by its unevaluated form and
    /// `AWS::NoValue` by `None`.
    pub fn or_original(self, original: &Value) -> Option<Value> {
        match self {
            Evaluated::Value(v) => Some(v),
            Evaluated::NoValue => None,
            Evaluated::Pending => Some(original.clone()),
        }
    }
}

macro_rules! ready {
    ($e:expr) => {
        match $e {
            Evaluated::Value(v) => v,
            Evaluated::Pending => return Ok(Evaluated::Pending),
            Evaluated::NoValue => Value::Null,
        }
    };
}

mod functions;

/// Evaluates template expressions for one stack operation.
pub struct Evaluator<'a> {
    template: &'a Template,
    params: &'a ParameterValues,
    ctx: &'a StackContext,
    resolver: &'a dyn Resolver,
    conditions: HashMap<String, bool>,
}

/// Evaluates the Conditions section once, detecting cycles.
struct ConditionPass<'t> {
    evaluator: &'t Evaluator<'t>,
    state: RefCell<HashMap<String, Option<bool>>>,
}

const PSEUDO: &[&str] = &[
    "AWS::StackName",
    "AWS::StackId",
    "AWS::Region",
    "AWS::AccountId",
    "AWS::Partition",
    "AWS::URLSuffix",
    "AWS::NoValue",
    "AWS::NotificationARNs",
];

fn stringify(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn unresolved(names: &str) -> TemplateError {
    format_error(format!(
        "Unresolved resource dependencies [{names}] in the Resources block of the template"
    ))
}

pub use crate::types::is_custom_resource;

impl<'a> Evaluator<'a> {
    /// Builds an evaluator and evaluates every condition.
    pub fn new(
        template: &'a Template,
        params: &'a ParameterValues,
        ctx: &'a StackContext,
        resolver: &'a dyn Resolver,
    ) -> Result<Self, TemplateError> {
        let mut ev = Evaluator {
            template,
            params,
            ctx,
            resolver,
            conditions: HashMap::new(),
        };
        let conditions = {
            let pass = ConditionPass {
                evaluator: &ev,
                state: RefCell::new(HashMap::new()),
            };
            let mut out = HashMap::new();
            for name in template.conditions.keys() {
                out.insert(name.clone(), pass.condition(name, "")?);
            }
            out
        };
        ev.conditions = conditions;
        Ok(ev)
    }

    /// Builds an evaluator from conditions evaluated earlier (they depend on
    /// parameters only), so the Conditions section is evaluated once per operation.
    pub fn with_conditions(
        template: &'a Template,
        params: &'a ParameterValues,
        ctx: &'a StackContext,
        resolver: &'a dyn Resolver,
        conditions: HashMap<String, bool>,
    ) -> Evaluator<'a> {
        Evaluator {
            template,
            params,
            ctx,
            resolver,
            conditions,
        }
    }

    /// Builds an evaluator for execution time, reusing already evaluated
    /// conditions (they depend on parameters only).
    pub fn with_resolver(&self, resolver: &'a dyn Resolver) -> Evaluator<'a> {
        Evaluator {
            template: self.template,
            params: self.params,
            ctx: self.ctx,
            resolver,
            conditions: self.conditions.clone(),
        }
    }

    /// The value of a named condition (false for an unknown name).
    pub fn condition(&self, name: &str) -> bool {
        self.conditions.get(name).copied().unwrap_or(false)
    }

    /// All conditions and their values.
    pub fn conditions(&self) -> &HashMap<String, bool> {
        &self.conditions
    }

    /// Evaluates `v`, found at JSON pointer `path`.
    pub fn eval(&self, v: &Value, path: &str) -> Result<Evaluated, TemplateError> {
        self.eval_in(v, path, None)
            .map_err(|e| e.at(path).locate(&self.template.source_map))
    }

    /// Evaluates an object of properties: `AWS::NoValue` removes keys, pending
    /// values are kept unevaluated. Returns the object and whether anything is
    /// still pending.
    pub fn eval_object(
        &self,
        props: &Map<String, Value>,
        path: &str,
    ) -> Result<(Map<String, Value>, bool), TemplateError> {
        let mut out = Map::new();
        let mut pending = false;
        for (k, v) in props {
            let p = child(path, k);
            match self.eval(v, &p)? {
                Evaluated::Value(x) => {
                    out.insert(k.clone(), x);
                }
                Evaluated::NoValue => {}
                Evaluated::Pending => {
                    pending = true;
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        Ok((out, pending))
    }

    fn eval_in(
        &self,
        v: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        match v {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut pending = false;
                for (i, item) in items.iter().enumerate() {
                    match self.eval_in(item, &child(path, &i.to_string()), conds)? {
                        Evaluated::Value(x) => out.push(x),
                        Evaluated::NoValue => {}
                        Evaluated::Pending => pending = true,
                    }
                }
                Ok(if pending {
                    Evaluated::Pending
                } else {
                    Evaluated::Value(Value::Array(out))
                })
            }
            Value::Object(m) if m.len() == 1 => {
                let (k, arg) = m
                    .iter()
                    .next()
                    .map(|(k, a)| (k.as_str(), a))
                    .unwrap_or(("", v));
                if k == "Ref" || k == "Condition" && conds.is_some() || k.starts_with("Fn::") {
                    let p = child(path, k);
                    return self.intrinsic(k, arg, &p, conds).map_err(|e| e.at(&p));
                }
                self.eval_map(m, path, conds)
            }
            Value::Object(m) => self.eval_map(m, path, conds),
            _ => Ok(Evaluated::Value(v.clone())),
        }
    }

    fn eval_map(
        &self,
        m: &Map<String, Value>,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let mut out = Map::new();
        let mut pending = false;
        for (k, x) in m {
            match self.eval_in(x, &child(path, k), conds)? {
                Evaluated::Value(y) => {
                    out.insert(k.clone(), y);
                }
                Evaluated::NoValue => {}
                Evaluated::Pending => pending = true,
            }
        }
        Ok(if pending {
            Evaluated::Pending
        } else {
            Evaluated::Value(Value::Object(out))
        })
    }

    fn string_arg(
        &self,
        v: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
        what: &str,
    ) -> Result<Result<String, ()>, TemplateError> {
        match self.eval_in(v, path, conds)? {
            Evaluated::Value(x) => stringify(&x)
                .map(Ok)
                .ok_or_else(|| template_error(format!("{what} must be a string"))),
            Evaluated::Pending => Ok(Err(())),
            Evaluated::NoValue => Err(template_error(format!(
                "{what} must be a string, not AWS::NoValue"
            ))),
        }
    }

    fn list_arg(
        &self,
        v: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        self.eval_in(v, path, conds)
    }

    fn reference(&self, name: &str) -> Result<Evaluated, TemplateError> {
        if let Some(v) = self.params.values.get(name) {
            return Ok(Evaluated::Value(v.clone()));
        }
        let c = self.ctx;
        let s = |x: &str| Ok(Evaluated::Value(Value::String(x.to_string())));
        match name {
            "AWS::StackName" => return s(&c.stack_name),
            "AWS::StackId" => return s(&c.stack_id),
            "AWS::Region" => return s(&c.region),
            "AWS::AccountId" => return s(&c.account_id),
            "AWS::Partition" => return s(&c.partition),
            "AWS::URLSuffix" => return s(&c.url_suffix),
            "AWS::NoValue" => return Ok(Evaluated::NoValue),
            "AWS::NotificationARNs" => {
                return Ok(Evaluated::Value(Value::Array(
                    c.notification_arns
                        .iter()
                        .cloned()
                        .map(Value::String)
                        .collect(),
                )))
            }
            _ => {}
        }
        match self.template.resource(name) {
            Some(r) => {
                if let Some(cond) = &r.condition {
                    if !self.condition(cond) {
                        return Err(unresolved(name));
                    }
                }
                match self.resolver.resource_ref(name) {
                    Lookup::Value(v) => Ok(Evaluated::Value(v)),
                    Lookup::Pending => Ok(Evaluated::Pending),
                    Lookup::Absent => Err(unresolved(name)),
                }
            }
            None => Err(unresolved(name)),
        }
    }

    fn attribute(&self, res: &str, attr: &str) -> Result<Evaluated, TemplateError> {
        let Some(r) = self.template.resource(res) else {
            return Err(template_error(format!(
                "instance of Fn::GetAtt references undefined resource {res}"
            )));
        };
        if let Some(cond) = &r.condition {
            if !self.condition(cond) {
                return Err(unresolved(res));
            }
        }
        match self.resolver.resource_attribute(res, attr) {
            Lookup::Value(v) => Ok(Evaluated::Value(v)),
            Lookup::Pending => Ok(Evaluated::Pending),
            // CloudFormation's text for a custom resource's missing Data key.
            Lookup::Absent if is_custom_resource(&r.type_name) => Err(TemplateError::new(format!(
                "CustomResource attribute error: Vendor response doesn't contain {attr} attribute in object {res}"
            ))),
            Lookup::Absent => {
                // A nested stack's output that its (HOT) child could not
                // resolve: heat/engine/resources/template_resource.py
                // raises TemplateOutputError with the child's error.
                let child_error = attr.strip_prefix("Outputs.").and_then(|output| {
                    match self.resolver.resource_attribute(
                        res,
                        crate::types::NESTED_OUTPUT_ERRORS_ATTRIBUTE,
                    ) {
                        Lookup::Value(Value::Object(errors)) => errors
                            .get(output)
                            .and_then(Value::as_str)
                            .map(|e| format!("Error in {res} output {output}: {e}")),
                        _ => None,
                    }
                });
                Err(match child_error {
                    Some(e) => TemplateError::new(e),
                    None => template_error(format!(
                        "resource {res} does not provide attribute {attr} for Fn::GetAtt"
                    )),
                })
            }
        }
    }

    fn intrinsic(
        &self,
        name: &str,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        // CloudFormation's Conditions take parameters, mappings and the
        // string functions (Fn::Sub, Fn::Join, Fn::Select, Fn::Split), not
        // these (cfn-lint's E8003 list of what Fn::Equals may hold there).
        if conds.is_some() && NOT_IN_CONDITIONS.contains(&name) {
            return Err(template_error(format!(
                "{name} cannot be used in the Conditions block"
            )));
        }
        match name {
            "Ref" => self.fn_ref(arg, conds),
            "Condition" => self.fn_condition(arg, path, conds),
            "Fn::GetAtt" => self.fn_get_att(arg, path, conds),
            "Fn::Join" => self.fn_join(arg, path, conds),
            "Fn::Sub" => self.sub(arg, path, conds),
            "Fn::Select" => self.fn_select(arg, path, conds),
            "Fn::Split" => self.fn_split(arg, path, conds),
            "Fn::FindInMap" => self.find_in_map(arg, path, conds),
            "Fn::Base64" => self.fn_base64(arg, path, conds),
            "Fn::GetAZs" => self.fn_get_azs(arg, path, conds),
            "Fn::ImportValue" => self.fn_import_value(arg, path, conds),
            "Fn::GetStackOutput" => self.fn_get_stack_output(arg, path, conds),
            "Fn::Length" => self.fn_length(arg, path, conds),
            "Fn::ToJsonString" => self.fn_to_json_string(arg, path, conds),
            "Fn::Cidr" => self.fn_cidr(arg, path, conds),
            "Fn::If" => self.fn_if(arg, path, conds),
            "Fn::Equals" => self.fn_equals(arg, path, conds),
            "Fn::And" | "Fn::Or" => self.fn_and_or(name, arg, path, conds),
            "Fn::Not" => self.fn_not(name, arg, path, conds),
            heat if heat.starts_with("Fn::Heat::") => self.heat(heat, arg, path, conds),
            other => Err(template_error(format!(
                "Encountered unsupported function: {other}"
            ))),
        }
    }

    /// HOT's functions without a CloudFormation equivalent (lowered by the
    /// HOT front end to `Fn::Heat::…`), once their arguments are known.
    fn heat(
        &self,
        name: &str,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        use super::hot::functions as f;
        let args = ready!(self.eval_in(arg, path, conds)?);
        let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
        let out = match name {
            "Fn::Heat::Path" => {
                let a = list(&args);
                let fn_name = a.get(2).and_then(Value::as_str).unwrap_or("get_param");
                f::path(
                    a.first().cloned().unwrap_or(Value::Null),
                    &list(a.get(1).unwrap_or(&Value::Null)),
                    fn_name,
                )
            }
            "Fn::Heat::Member" => {
                let a = list(&args);
                f::group_member(
                    a.first().unwrap_or(&Value::Null),
                    &a.get(1)
                        .map(super::parameters::parameter_text)
                        .unwrap_or_default(),
                    &list(a.get(2).unwrap_or(&Value::Null)),
                    a.get(3).and_then(Value::as_str).unwrap_or_default(),
                )
            }
            "Fn::Heat::Members" => {
                let a = list(&args);
                f::group_members(
                    a.first().unwrap_or(&Value::Null),
                    a.get(1).unwrap_or(&Value::Null),
                    &list(a.get(2).unwrap_or(&Value::Null)),
                    a.get(3).and_then(Value::as_str) == Some("map"),
                )
            }
            "Fn::Heat::ListJoin" => f::list_join(&list(&args)),
            "Fn::Heat::StrReplace" => {
                let a = list(&args);
                let fn_name = a.first().and_then(Value::as_str).unwrap_or("str_replace");
                f::str_replace(
                    fn_name,
                    a.get(1).unwrap_or(&Value::Null),
                    a.get(2).unwrap_or(&Value::Null),
                )
            }
            "Fn::Heat::Repeat" => {
                let a = list(&args);
                f::repeat(
                    a.first().unwrap_or(&Value::Null),
                    a.get(1) == Some(&Value::Bool(true)),
                    a.get(2) == Some(&Value::Bool(true)),
                )
            }
            "Fn::Heat::Digest" => f::digest(&args),
            "Fn::Heat::StrSplit" => f::str_split(&args),
            "Fn::Heat::MapMerge" => f::map_merge(&args),
            "Fn::Heat::MapReplace" => f::map_replace(&args),
            "Fn::Heat::Filter" => f::filter(&args),
            "Fn::Heat::MakeUrl" => f::make_url(&args),
            "Fn::Heat::ListConcat" => f::list_concat(&args, false),
            "Fn::Heat::ListConcatUnique" => f::list_concat(&args, true),
            "Fn::Heat::Contains" => f::contains(&args),
            "Fn::Heat::Select" => f::select(&args),
            "Fn::Heat::MissingParameter" => Err(format!(
                "The Parameter ({}) was not provided.",
                super::parameters::parameter_text(&args)
            )),
            // A boolean parameter used as a condition.
            "Fn::Heat::Truth" => Ok(Value::Bool(match &args {
                Value::Bool(b) => *b,
                Value::String(s) => matches!(
                    s.to_ascii_lowercase().as_str(),
                    "true" | "1" | "yes" | "on" | "t" | "y"
                ),
                Value::Null => false,
                _ => true,
            })),
            // An output's value as CloudFormation shows one: text, JSON for
            // maps and lists.
            "Fn::Heat::OutputText" => Ok(match args {
                Value::String(s) => Value::String(s),
                Value::Null => Value::String(String::new()),
                other => Value::String(other.to_string()),
            }),
            other => Err(format!("Encountered unsupported function: {other}")),
        };
        out.map(Evaluated::Value).map_err(template_error)
    }

    fn boolean(
        &self,
        v: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
        func: &str,
    ) -> Result<Option<bool>, TemplateError> {
        let r = match v {
            Value::Object(m) if m.len() == 1 && m.contains_key("Condition") => {
                let Some(Value::String(c)) = m.get("Condition") else {
                    return Err(template_error(format!(
                        "{func}: Condition must name a condition"
                    )));
                };
                match conds {
                    Some(pass) => Evaluated::Value(Value::Bool(pass.condition(c, path)?)),
                    None => Evaluated::Value(Value::Bool(self.condition(c))),
                }
            }
            _ => self.eval_in(v, path, conds)?,
        };
        match r {
            Evaluated::Value(Value::Bool(b)) => Ok(Some(b)),
            Evaluated::Value(Value::String(s)) if s == "true" => Ok(Some(true)),
            Evaluated::Value(Value::String(s)) if s == "false" => Ok(Some(false)),
            Evaluated::Pending => Ok(None),
            _ => Err(template_error(format!(
                "every element of {func} must be a condition"
            ))),
        }
    }

    fn sub(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let (text, vars) =
            match arg {
                Value::String(s) => (s.as_str(), None),
                Value::Array(a) if a.len() == 2 => match (&a[0], &a[1]) {
                    (Value::String(s), Value::Object(m)) => (s.as_str(), Some(m)),
                    _ => return Err(template_error(
                        "Fn::Sub requires a string, or a list of a string and a map of variables",
                    )),
                },
                _ => {
                    return Err(template_error(
                        "Fn::Sub requires a string, or a list of a string and a map of variables",
                    ))
                }
            };
        let mut values: HashMap<&str, String> = HashMap::new();
        let mut pending = false;
        if let Some(vars) = vars {
            for (k, v) in vars {
                match self.string_arg(
                    v,
                    &child(&child(path, "1"), k),
                    conds,
                    &format!("Fn::Sub variable {k}"),
                )? {
                    Ok(s) => {
                        values.insert(k.as_str(), s);
                    }
                    Err(()) => pending = true,
                }
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(template_error(format!(
                    "Fn::Sub: unterminated variable in '{}'",
                    super::quoted(text)
                )));
            };
            let name = &after[..end];
            rest = &after[end + 1..];
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str("${");
                out.push_str(literal);
                out.push('}');
                continue;
            }
            check_size("Fn::Sub", out.len())?;
            if let Some(v) = values.get(name) {
                out.push_str(v);
                continue;
            }
            if vars.is_some_and(|m| m.contains_key(name)) {
                continue; // pending variable
            }
            let resolved = if let Some((res, attr)) =
                name.split_once('.').filter(|_| !PSEUDO.contains(&name))
            {
                if self.template.resource(res).is_none() {
                    return Err(unresolved(name));
                }
                self.attribute(res, attr)?
            } else {
                self.reference(name)?
            };
            match resolved {
                Evaluated::Value(v) => match stringify(&v) {
                    Some(s) => out.push_str(&s),
                    None => {
                        return Err(template_error(format!(
                            "variable {name} in Fn::Sub expression must resolve to a string, not a list or object"
                        )))
                    }
                },
                Evaluated::Pending => pending = true,
                Evaluated::NoValue => {}
            }
        }
        out.push_str(rest);
        check_size("Fn::Sub", out.len())?;
        Ok(if pending {
            Evaluated::Pending
        } else {
            Evaluated::Value(Value::String(out))
        })
    }

    fn find_in_map(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let bad = || {
            template_error("Fn::FindInMap requires a list argument with three elements (MapName, TopLevelKey, SecondLevelKey) and an optional {DefaultValue: …}")
        };
        let Value::Array(a) = arg else {
            return Err(bad());
        };
        if a.len() != 3 && a.len() != 4 {
            return Err(bad());
        }
        let mut keys = Vec::new();
        for (i, x) in a.iter().take(3).enumerate() {
            match self.string_arg(
                x,
                &child(path, &i.to_string()),
                conds,
                "every Fn::FindInMap key",
            )? {
                Ok(s) => keys.push(s),
                Err(()) => return Ok(Evaluated::Pending),
            }
        }
        let found = self
            .template
            .mappings
            .get(&keys[0])
            .and_then(|m| m.get(&keys[1]))
            .and_then(|m| m.get(&keys[2]));
        match (found, a.get(3)) {
            (Some(v), _) => Ok(Evaluated::Value(v.clone())),
            (None, Some(Value::Object(d))) if d.contains_key("DefaultValue") => {
                let default = d.get("DefaultValue").unwrap_or(&Value::Null);
                self.eval_in(default, &child(&child(path, "3"), "DefaultValue"), conds)
            }
            (None, Some(_)) => Err(bad()),
            (None, None) => {
                if !self.template.mappings.contains_key(&keys[0]) {
                    return Err(template_error(format!(
                        "Mapping named '{}' is not present in the 'Mappings' section of template.",
                        keys[0]
                    )));
                }
                Err(template_error(format!(
                    "Unable to get mapping for {}::{}::{}",
                    keys[0], keys[1], keys[2]
                )))
            }
        }
    }
}

impl ConditionPass<'_> {
    fn condition(&self, name: &str, path: &str) -> Result<bool, TemplateError> {
        match self.state.borrow().get(name) {
            Some(Some(b)) => return Ok(*b),
            Some(None) => {
                return Err(format_error(format!(
                    "Circular dependency between conditions: [{name}]"
                )))
            }
            None => {}
        }
        let Some(expr) = self.evaluator.template.conditions.get(name) else {
            return Err(template_error(format!(
                "unresolved condition dependency {name} in Fn::If"
            ))
            .at(path));
        };
        self.state.borrow_mut().insert(name.to_string(), None);
        let cpath = child("/Conditions", name);
        let b = self
            .evaluator
            .boolean(expr, &cpath, Some(self), "a condition")
            .map_err(|e| e.at(&cpath).locate(&self.evaluator.template.source_map))?
            .unwrap_or(false);
        self.state.borrow_mut().insert(name.to_string(), Some(b));
        Ok(b)
    }
}

/// The most bytes a string an intrinsic function makes may hold: a
/// template body is at most 1 MB, and no property value needs more.
pub const MAX_VALUE_BYTES: usize = 1 << 20;

/// Refuses a value of `size` bytes from `function` past [`MAX_VALUE_BYTES`]
/// (before it is allocated).
fn check_size(function: &str, size: usize) -> Result<(), TemplateError> {
    if size > MAX_VALUE_BYTES {
        return Err(template_error(format!(
            "{function} would produce a value of {size} bytes; the limit is {MAX_VALUE_BYTES} bytes (1 MiB)"
        )));
    }
    Ok(())
}
