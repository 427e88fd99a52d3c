//! The intrinsic functions, one method each; [`Evaluator::intrinsic`]
//! dispatches to them by name. `Fn::Sub` and `Fn::FindInMap` (longer) and
//! HOT's `Fn::Heat::…` are in the parent module.

use base64::Engine as _;
use serde_json::Value;

use super::{check_size, stringify, ConditionPass, Evaluated, Evaluator, Lookup};
use crate::cidr;
use crate::source::child;
use crate::{format_error, template_error, TemplateError};

impl Evaluator<'_> {
    /// `Ref`: a parameter's value, a resource's physical id or a pseudo
    /// parameter (resources are refused in the Conditions block).
    pub(super) fn fn_ref(
        &self,
        arg: &Value,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let Value::String(target) = arg else {
            return Err(template_error(
                "Ref must be a string naming a parameter or resource",
            ));
        };
        if conds.is_some() && self.template.resource(target).is_some() {
            return Err(format_error(format!(
                "Unresolved dependencies [{target}]. Cannot reference resources in the Conditions block of the template"
            )));
        }
        self.reference(target)
    }

    /// `Condition` used as a value: the named condition's truth.
    pub(super) fn fn_condition(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let Value::String(c) = arg else {
            return Err(template_error("Condition must name a condition"));
        };
        match conds {
            Some(pass) => Ok(Evaluated::Value(Value::Bool(pass.condition(c, path)?))),
            None => Ok(Evaluated::Value(Value::Bool(self.condition(c)))),
        }
    }

    /// `Fn::GetAtt`: `Resource.Attribute` or `[Resource, Attribute]`, the
    /// attribute name itself possibly an expression.
    pub(super) fn fn_get_att(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let (res, attr) = match arg {
            Value::String(s) => match s.split_once('.') {
                Some((r, a)) => (r.to_string(), Value::String(a.to_string())),
                None => {
                    return Err(template_error(
                        "every Fn::GetAtt object requires two non-empty parameters",
                    ))
                }
            },
            Value::Array(a) if a.len() == 2 => match &a[0] {
                Value::String(r) => (r.clone(), a[1].clone()),
                _ => {
                    return Err(template_error(
                        "every Fn::GetAtt object requires two non-empty parameters",
                    ))
                }
            },
            _ => {
                return Err(template_error(
                    "every Fn::GetAtt object requires two non-empty parameters",
                ))
            }
        };
        if conds.is_some() {
            return Err(format_error(format!(
                "Unresolved dependencies [{res}]. Cannot reference resources in the Conditions block of the template"
            )));
        }
        let attr = match self.string_arg(
            &attr,
            &child(path, "1"),
            conds,
            "the attribute name of Fn::GetAtt",
        )? {
            Ok(a) => a,
            Err(()) => return Ok(Evaluated::Pending),
        };
        if res.is_empty() || attr.is_empty() {
            return Err(template_error(
                "every Fn::GetAtt object requires two non-empty parameters",
            ));
        }
        self.attribute(&res, &attr)
    }

    /// `Fn::Join`: a delimiter and a list of strings.
    pub(super) fn fn_join(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let bad = || {
            template_error("every Fn::Join object requires two parameters, (1) a string delimiter and (2) a list of strings to be joined or a function that returns a list of strings (such as Fn::GetAZs) to be joined.")
        };
        let Value::Array(a) = arg else {
            return Err(bad());
        };
        if a.len() != 2 {
            return Err(bad());
        }
        let Value::String(delim) = &a[0] else {
            return Err(bad());
        };
        let list = ready!(self.list_arg(&a[1], &child(path, "1"), conds)?);
        let Value::Array(items) = list else {
            return Err(bad());
        };
        let mut parts = Vec::with_capacity(items.len());
        for item in &items {
            parts.push(stringify(item).ok_or_else(bad)?);
        }
        let size = parts
            .iter()
            .map(String::len)
            .sum::<usize>()
            .saturating_add(delim.len().saturating_mul(parts.len().saturating_sub(1)));
        check_size("Fn::Join", size)?;
        Ok(Evaluated::Value(Value::String(parts.join(delim))))
    }

    /// `Fn::Select`: an integer index into a list.
    pub(super) fn fn_select(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let bad = || {
            template_error("Fn::Select requires a list argument with two elements: an integer index and a list")
        };
        let Value::Array(a) = arg else {
            return Err(bad());
        };
        if a.len() != 2 {
            return Err(bad());
        }
        let index = ready!(self.eval_in(&a[0], &child(path, "0"), conds)?);
        let index: i64 = stringify(&index)
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| template_error("Fn::Select index must be an integer"))?;
        let list = ready!(self.list_arg(&a[1], &child(path, "1"), conds)?);
        let Value::Array(items) = list else {
            return Err(bad());
        };
        usize::try_from(index)
            .ok()
            .and_then(|i| items.get(i).cloned())
            .map(Evaluated::Value)
            .ok_or_else(|| {
                template_error(format!(
                    "Fn::Select cannot select nonexistent value at index {index}"
                ))
            })
    }

    /// `Fn::Split`: a string cut at a (non-empty) delimiter.
    pub(super) fn fn_split(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let bad = || {
            template_error("Fn::Split requires a list argument with two elements: a string delimiter and a string")
        };
        let Value::Array(a) = arg else {
            return Err(bad());
        };
        if a.len() != 2 {
            return Err(bad());
        }
        let Value::String(delim) = &a[0] else {
            return Err(bad());
        };
        if delim.is_empty() {
            return Err(template_error("Fn::Split delimiter must not be empty"));
        }
        let source =
            match self.string_arg(&a[1], &child(path, "1"), conds, "the source of Fn::Split")? {
                Ok(s) => s,
                Err(()) => return Ok(Evaluated::Pending),
            };
        Ok(Evaluated::Value(Value::Array(
            source
                .split(delim.as_str())
                .map(|s| Value::String(s.into()))
                .collect(),
        )))
    }

    /// `Fn::Base64`: a string, encoded.
    pub(super) fn fn_base64(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        match self.string_arg(arg, path, conds, "the argument of Fn::Base64")? {
            Ok(s) => {
                check_size("Fn::Base64", s.len().div_ceil(3).saturating_mul(4))?;
                Ok(Evaluated::Value(Value::String(
                    base64::engine::general_purpose::STANDARD.encode(s),
                )))
            }
            Err(()) => Ok(Evaluated::Pending),
        }
    }

    /// `Fn::GetAZs`: the region's availability zones (`[identity]`).
    pub(super) fn fn_get_azs(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let region = match self.string_arg(arg, path, conds, "the region of Fn::GetAZs")? {
            Ok(s) => s,
            Err(()) => return Ok(Evaluated::Pending),
        };
        Ok(Evaluated::Value(Value::Array(
            self.ctx
                .azs(&region)
                .into_iter()
                .map(Value::String)
                .collect(),
        )))
    }

    /// `Fn::ImportValue`: another stack's export (never in Conditions).
    pub(super) fn fn_import_value(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        if conds.is_some() {
            return Err(template_error(
                "Fn::ImportValue cannot be used in the Conditions block",
            ));
        }
        // Known before any resource is made (CloudFormation's cross-stack
        // reference rules): pending here means it reads a resource.
        let name = match self.string_arg(arg, path, conds, "the export name of Fn::ImportValue")? {
            Ok(s) => s,
            Err(()) => {
                return Err(template_error(
                    "Fn::ImportValue cannot use Ref or Fn::GetAtt of a resource",
                ))
            }
        };
        match self.resolver.import_value(&name) {
            Lookup::Value(v) => Ok(Evaluated::Value(v)),
            Lookup::Pending => Ok(Evaluated::Pending),
            Lookup::Absent => Err(TemplateError::new(format!("No export named {name} found."))),
        }
    }

    /// `Fn::GetStackOutput`: an output of another stack of this engine, read
    /// when the operation runs (a weak reference: nothing ties the two
    /// stacks together afterwards). `Region` and `RoleArn` may only name
    /// this engine's region and account: Cairn reads no other.
    pub(super) fn fn_get_stack_output(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        const KEYS: [&str; 4] = ["StackName", "OutputName", "Region", "RoleArn"];
        if conds.is_some() {
            return Err(template_error(
                "Fn::GetStackOutput cannot be used in the Conditions block",
            ));
        }
        let Some(args) = arg.as_object() else {
            return Err(template_error(
                "Fn::GetStackOutput takes an object with StackName and OutputName (and optionally Region and RoleArn)",
            ));
        };
        if let Some(k) = args.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(template_error(format!(
                "Fn::GetStackOutput does not take {k}; its keys are StackName, OutputName, Region and RoleArn"
            )));
        }
        let text = |key: &str| -> Result<Option<Result<String, ()>>, TemplateError> {
            match args.get(key) {
                None => Ok(None),
                Some(v) => {
                    let what = format!("{key} of Fn::GetStackOutput");
                    self.string_arg(v, &format!("{path}/{key}"), conds, &what)
                        .map(Some)
                }
            }
        };
        let (stack, output, region, role) = (
            text("StackName")?,
            text("OutputName")?,
            text("Region")?,
            text("RoleArn")?,
        );
        let (Some(stack), Some(output)) = (stack, output) else {
            return Err(template_error(
                "Fn::GetStackOutput requires StackName and OutputName",
            ));
        };
        if let Some(Ok(region)) = &region {
            if *region != self.ctx.region {
                return Err(template_error(format!(
                    "Fn::GetStackOutput: Region {region} is not this engine's region {}; Cairn reads the outputs of its own stacks only",
                    self.ctx.region
                )));
            }
        }
        if let Some(Ok(role)) = &role {
            let account = role.split(':').nth(4).unwrap_or_default();
            if account != self.ctx.account_id {
                return Err(template_error(format!(
                    "Fn::GetStackOutput: RoleArn {role} is not a role of this engine's account {}; Cairn reads the outputs of its own stacks only",
                    self.ctx.account_id
                )));
            }
        }
        let (Ok(stack), Ok(output), false, false) = (
            stack,
            output,
            matches!(region, Some(Err(()))),
            matches!(role, Some(Err(()))),
        ) else {
            return Ok(Evaluated::Pending);
        };
        match self.resolver.stack_output(&stack, &output) {
            Lookup::Value(v) => Ok(Evaluated::Value(v)),
            Lookup::Pending => Ok(Evaluated::Pending),
            Lookup::Absent => Err(TemplateError::new(format!(
                "Fn::GetStackOutput: stack {stack} has no output {output} (the stack does not exist, or has no such output with a value)"
            ))),
        }
    }

    /// `Fn::Length` (AWS::LanguageExtensions): a list's length.
    pub(super) fn fn_length(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let list = ready!(self.list_arg(arg, path, conds)?);
        match list {
            Value::Array(items) => Ok(Evaluated::Value(Value::Number(items.len().into()))),
            _ => Err(template_error("Fn::Length requires a list")),
        }
    }

    /// `Fn::ToJsonString` (AWS::LanguageExtensions): an object or list as
    /// JSON text.
    pub(super) fn fn_to_json_string(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let v = ready!(self.eval_in(arg, path, conds)?);
        if !v.is_object() && !v.is_array() {
            return Err(template_error(
                "Fn::ToJsonString requires an object or a list",
            ));
        }
        let text = v.to_string();
        check_size("Fn::ToJsonString", text.len())?;
        Ok(Evaluated::Value(Value::String(text)))
    }

    /// `Fn::Cidr`: `count` subnets of `cidrBits` host bits in `ipBlock`.
    pub(super) fn fn_cidr(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let bad = || {
            template_error("Fn::Cidr requires a list argument with three elements: ipBlock, count and cidrBits")
        };
        let Value::Array(a) = arg else {
            return Err(bad());
        };
        if a.len() != 3 {
            return Err(bad());
        }
        let mut texts = Vec::new();
        for (i, x) in a.iter().enumerate() {
            match self.string_arg(
                x,
                &child(path, &i.to_string()),
                conds,
                "every Fn::Cidr argument",
            )? {
                Ok(s) => texts.push(s),
                Err(()) => return Ok(Evaluated::Pending),
            }
        }
        let count: u64 = texts[1]
            .trim()
            .parse()
            .map_err(|_| template_error("Fn::Cidr count must be an integer"))?;
        let bits: u32 = texts[2]
            .trim()
            .parse()
            .map_err(|_| template_error("Fn::Cidr cidrBits must be an integer"))?;
        let nets = cidr::subnets(&texts[0], count, bits).map_err(template_error)?;
        Ok(Evaluated::Value(Value::Array(
            nets.into_iter().map(Value::String).collect(),
        )))
    }

    /// `Fn::If`: only the branch taken is evaluated.
    pub(super) fn fn_if(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let bad = || template_error("Fn::If requires a list argument with three elements");
        let Value::Array(a) = arg else {
            return Err(bad());
        };
        if a.len() != 3 {
            return Err(bad());
        }
        let Value::String(cond) = &a[0] else {
            return Err(bad());
        };
        let chosen = match conds {
            Some(pass) => pass.condition(cond, path)?,
            None => {
                if !self.template.conditions.contains_key(cond) {
                    return Err(template_error(format!(
                        "unresolved condition dependency {cond} in Fn::If"
                    )));
                }
                self.condition(cond)
            }
        };
        // Only the branch taken is evaluated.
        let i = if chosen { 1 } else { 2 };
        self.eval_in(&a[i], &child(path, &i.to_string()), conds)
    }

    /// `Fn::Equals`: two values, compared as strings when both are scalars.
    pub(super) fn fn_equals(
        &self,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let Value::Array(a) = arg else {
            return Err(template_error(
                "Fn::Equals requires a list argument with two elements",
            ));
        };
        if a.len() != 2 {
            return Err(template_error(
                "Fn::Equals requires a list argument with two elements",
            ));
        }
        let x = ready!(self.eval_in(&a[0], &child(path, "0"), conds)?);
        let y = ready!(self.eval_in(&a[1], &child(path, "1"), conds)?);
        let eq = match (stringify(&x), stringify(&y)) {
            (Some(p), Some(q)) => p == q,
            _ => x == y,
        };
        Ok(Evaluated::Value(Value::Bool(eq)))
    }

    /// `Fn::And` and `Fn::Or` (`name`): 2 to 10 conditions.
    pub(super) fn fn_and_or(
        &self,
        name: &str,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let short = &name[4..];
        let Value::Array(a) = arg else {
            return Err(template_error(format!(
                "Fn::{short} requires a list argument with 2 to 10 conditions"
            )));
        };
        if !(2..=10).contains(&a.len()) {
            return Err(template_error(format!(
                "Fn::{short} requires a list argument with 2 to 10 conditions"
            )));
        }
        let mut values = Vec::new();
        for (i, x) in a.iter().enumerate() {
            values.push(self.boolean(x, &child(path, &i.to_string()), conds, name)?);
        }
        let Some(values) = values.into_iter().collect::<Option<Vec<bool>>>() else {
            return Ok(Evaluated::Pending);
        };
        let result = if name == "Fn::And" {
            values.iter().all(|b| *b)
        } else {
            values.iter().any(|b| *b)
        };
        Ok(Evaluated::Value(Value::Bool(result)))
    }

    /// `Fn::Not`: one condition.
    pub(super) fn fn_not(
        &self,
        name: &str,
        arg: &Value,
        path: &str,
        conds: Option<&ConditionPass<'_>>,
    ) -> Result<Evaluated, TemplateError> {
        let bad = || template_error("Fn::Not requires a list argument with one condition");
        let Value::Array(a) = arg else {
            return Err(bad());
        };
        if a.len() != 1 {
            return Err(bad());
        }
        match self.boolean(&a[0], &child(path, "0"), conds, name)? {
            Some(b) => Ok(Evaluated::Value(Value::Bool(!b))),
            None => Ok(Evaluated::Pending),
        }
    }
}
