//! The `Rules` section checked against the parameter values: the part of
//! the rules that evaluates (the shape and functions are checked when the
//! template is read, in `rules`).

use serde_json::{Map, Value};

use super::Rule;
use crate::eval::{Evaluated, Evaluator};
use crate::source::child;
use crate::{format_error, TemplateError};

/// Checks every rule against the parameter values `ev` has: a rule
/// whose condition holds must have every assertion true. The first false
/// one refuses the operation with its `AssertDescription`.
pub fn check(rules: &[Rule], ev: &Evaluator<'_>) -> Result<(), TemplateError> {
    for rule in rules {
        let path = child("/Rules", &rule.name);
        if let Some(c) = &rule.condition {
            if !truth(ev, c, &child(&path, "RuleCondition"))? {
                continue;
            }
        }
        for (i, a) in rule.assertions.iter().enumerate() {
            let at = child(
                &child(&child(&path, "Assertions"), &i.to_string()),
                "Assert",
            );
            if !truth(ev, &a.assert, &at)? {
                let text = a
                    .description
                    .clone()
                    .unwrap_or_else(|| format!("Assertion {i} of rule {} failed", rule.name));
                return Err(TemplateError::new(text).at(&at));
            }
        }
    }
    Ok(())
}

/// A rule expression that must be true or false.
fn truth(ev: &Evaluator<'_>, v: &Value, path: &str) -> Result<bool, TemplateError> {
    match value(ev, v, path)? {
        Value::Bool(b) => Ok(b),
        Value::String(s) if s == "true" || s == "false" => Ok(s == "true"),
        other => Err(format_error(format!(
            "a rule condition or assertion must be true or false, not {other}"
        ))
        .at(path)),
    }
}

/// A rule expression's value: a boolean, a string or a list.
fn value(ev: &Evaluator<'_>, v: &Value, path: &str) -> Result<Value, TemplateError> {
    let Value::Object(m) = v else {
        return match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| value(ev, item, &child(path, &i.to_string())))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            scalar => Ok(scalar.clone()),
        };
    };
    let Some((name, args)) = m.iter().next() else {
        return Ok(Value::Object(Map::new()));
    };
    let at = child(path, name);
    // The arguments' count was checked when the template was read.
    let list = args.as_array().map(Vec::as_slice).unwrap_or_default();
    let nth = |i: usize| list.get(i).unwrap_or(&Value::Null);
    let arg = |i: usize| value(ev, nth(i), &child(&at, &i.to_string()));
    let flag = |i: usize| truth(ev, nth(i), &child(&at, &i.to_string()));
    Ok(match name.as_str() {
        "Ref" => match ev.eval(v, path)? {
            Evaluated::Value(v) => v,
            // AWS::NoValue, or a value known only once resources exist.
            _ => Value::Null,
        },
        "Fn::And" => Value::Bool(
            (0..list.len()).try_fold(true, |all, i| Ok::<_, TemplateError>(all && flag(i)?))?,
        ),
        "Fn::Or" => Value::Bool(
            (0..list.len()).try_fold(false, |any, i| Ok::<_, TemplateError>(any || flag(i)?))?,
        ),
        "Fn::Not" => Value::Bool(!flag(0)?),
        "Fn::Equals" => Value::Bool(same(&arg(0)?, &arg(1)?)),
        "Fn::If" => {
            let condition = nth(0).as_str().unwrap_or_default();
            if ev.condition(condition) {
                arg(1)?
            } else {
                arg(2)?
            }
        }
        "Fn::Contains" => {
            let needle = arg(1)?;
            Value::Bool(members(&arg(0)?).iter().any(|m| same(m, &needle)))
        }
        "Fn::EachMemberEquals" => {
            let needle = arg(1)?;
            Value::Bool(members(&arg(0)?).iter().all(|m| same(m, &needle)))
        }
        "Fn::EachMemberIn" => {
            let allowed = members(&arg(1)?);
            Value::Bool(
                members(&arg(0)?)
                    .iter()
                    .all(|m| allowed.iter().any(|a| same(m, a))),
            )
        }
        _ => v.clone(),
    })
}

/// A list argument's members: a list, or a comma-delimited string (a
/// `CommaDelimitedList` parameter's value).
pub(super) fn members(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items.clone(),
        Value::String(s) => s
            .split(',')
            .map(|m| Value::String(m.trim().to_string()))
            .collect(),
        other => vec![other.clone()],
    }
}

/// Equality as CloudFormation compares parameter values: as text.
pub(super) fn same(a: &Value, b: &Value) -> bool {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text(a) == text(b)
}
