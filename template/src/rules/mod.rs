//! CloudFormation's `Rules` section: assertions on parameter values,
//! checked once the parameters resolve and before anything is created or
//! updated. A rule whose `RuleCondition` is false is skipped; a false
//! `Assert` refuses the operation with its `AssertDescription`.
//!
//! The rule functions are `Fn::And`, `Fn::Or`, `Fn::Not`, `Fn::Equals`,
//! `Fn::If`, `Fn::Contains`, `Fn::EachMemberEquals`, `Fn::EachMemberIn`,
//! with `Ref` to a parameter or pseudo parameter. `Fn::RefAll`,
//! `Fn::ValueOf` and `Fn::ValueOfAll` read the AWS account's resources,
//! which Cairn has no access to: they are refused when the template is
//! read, whatever the rule's condition.

use serde_json::{Map, Value};

use crate::source::child;
use crate::{format_error, TemplateError};

mod check;
pub use check::check;

/// One rule of the `Rules` section.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: String,
    pub condition: Option<Value>,
    pub assertions: Vec<Assertion>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Assertion {
    pub assert: Value,
    pub description: Option<String>,
}

/// The functions a rule may use besides `Ref`, with how many arguments
/// each takes (at least, at most).
const FUNCTIONS: [(&str, usize, usize); 8] = [
    ("Fn::And", 2, 10),
    ("Fn::Or", 2, 10),
    ("Fn::Not", 1, 1),
    ("Fn::Equals", 2, 2),
    ("Fn::If", 3, 3),
    ("Fn::Contains", 2, 2),
    ("Fn::EachMemberEquals", 2, 2),
    ("Fn::EachMemberIn", 2, 2),
];

/// The rule functions that look up the account's resources.
const ACCOUNT_LOOKUPS: [&str; 3] = ["Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll"];

/// Reads the `Rules` section and checks its shape and functions.
pub fn parse(section: Map<String, Value>) -> Result<Vec<Rule>, TemplateError> {
    let mut rules = Vec::with_capacity(section.len());
    for (name, rule) in section {
        let path = child("/Rules", &name);
        let Value::Object(mut rule) = rule else {
            return Err(format_error(format!("Rule {name} must be an object")).at(&path));
        };
        if let Some(k) = rule
            .keys()
            .find(|k| !matches!(k.as_str(), "RuleCondition" | "Assertions"))
        {
            return Err(format_error(format!(
                "Invalid rule property {k} in rule {name}; a rule has RuleCondition and Assertions"
            ))
            .at(&child(&path, k)));
        }
        let condition = rule.remove("RuleCondition");
        if let Some(c) = &condition {
            check_expression(c, &child(&path, "RuleCondition"))?;
        }
        let at = child(&path, "Assertions");
        let assertions = match rule.remove("Assertions") {
            Some(Value::Array(list)) if !list.is_empty() => list,
            _ => {
                return Err(format_error(format!(
                    "Rule {name} must have Assertions: a list of at least one {{Assert, AssertDescription}}"
                ))
                .at(&at))
            }
        };
        let mut checked = Vec::with_capacity(assertions.len());
        for (i, a) in assertions.into_iter().enumerate() {
            let at = child(&at, &i.to_string());
            let Value::Object(mut a) = a else {
                return Err(format_error(format!(
                    "Each assertion of rule {name} must be an object with Assert"
                ))
                .at(&at));
            };
            if let Some(k) = a
                .keys()
                .find(|k| !matches!(k.as_str(), "Assert" | "AssertDescription"))
            {
                return Err(format_error(format!(
                    "Invalid assertion property {k} in rule {name}; an assertion has Assert and AssertDescription"
                ))
                .at(&child(&at, k)));
            }
            let Some(assert) = a.remove("Assert") else {
                return Err(
                    format_error(format!("An assertion of rule {name} has no Assert")).at(&at),
                );
            };
            check_expression(&assert, &child(&at, "Assert"))?;
            let description = match a.remove("AssertDescription") {
                None => None,
                Some(Value::String(s)) => Some(s),
                Some(_) => {
                    return Err(format_error(format!(
                        "AssertDescription of rule {name} must be a string"
                    ))
                    .at(&child(&at, "AssertDescription")))
                }
            };
            checked.push(Assertion {
                assert,
                description,
            });
        }
        rules.push(Rule {
            name,
            condition,
            assertions: checked,
        });
    }
    Ok(rules)
}

/// An expression uses only `Ref` and the rule functions, each with the
/// arguments it takes.
fn check_expression(v: &Value, path: &str) -> Result<(), TemplateError> {
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_expression(item, &child(path, &i.to_string()))?;
            }
            Ok(())
        }
        Value::Object(m) if m.len() == 1 => {
            let (name, args) = m
                .iter()
                .next()
                .map(|(k, v)| (k.as_str(), v))
                .unwrap_or_default();
            let at = child(path, name);
            if name == "Ref" {
                return match args {
                    Value::String(_) => Ok(()),
                    _ => Err(format_error("Ref in a rule takes a parameter's name").at(&at)),
                };
            }
            if ACCOUNT_LOOKUPS.contains(&name) {
                return Err(format_error(format!(
                    "{name} reads the AWS account's resources, which Cairn does not look up; assert on the parameter's value instead"
                ))
                .at(&at));
            }
            let Some((_, least, most)) = FUNCTIONS.iter().find(|(f, _, _)| *f == name) else {
                return Err(format_error(format!(
                    "{name} cannot be used in Rules; a rule uses Ref, Fn::And, Fn::Or, Fn::Not, Fn::Equals, Fn::If, Fn::Contains, Fn::EachMemberEquals and Fn::EachMemberIn"
                ))
                .at(&at));
            };
            let Value::Array(list) = args else {
                return Err(format_error(format!("{name} takes a list of arguments")).at(&at));
            };
            if list.len() < *least || list.len() > *most {
                let count = if least == most {
                    least.to_string()
                } else {
                    format!("{least} to {most}")
                };
                return Err(format_error(format!(
                    "{name} takes {count} arguments, not {}",
                    list.len()
                ))
                .at(&at));
            }
            // Fn::If's first argument names a condition.
            let skip = usize::from(name == "Fn::If");
            for (i, item) in list.iter().enumerate().skip(skip) {
                check_expression(item, &child(&at, &i.to_string()))?;
            }
            Ok(())
        }
        Value::Object(_) => Err(format_error(
            "an object in a rule must be one function: {\"Fn::…\": [arguments]} or {\"Ref\": name}",
        )
        .at(path)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::check::{members, same};
    use super::*;
    use crate::model::Template;

    fn refused(body: &str) -> String {
        Template::parse(body).map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn the_shape_and_functions_are_checked_when_the_template_is_read() {
        let base = "Parameters:\n  P: {Type: String}\nResources:\n  A: {Type: T}\nRules:\n";
        let e = refused(&format!("{base}  R: {{Assertions: []}}\n"));
        assert!(
            e.starts_with("Template format error: Rule R must have Assertions"),
            "{e}"
        );
        let e = refused(&format!(
            "{base}  R:\n    Assertions:\n      - Assert: {{'Fn::ValueOf': [P, VpcId]}}\n"
        ));
        assert!(
            e.starts_with("Template format error: Fn::ValueOf reads the AWS account's resources"),
            "{e}"
        );
        let e = refused(&format!(
            "{base}  R:\n    Assertions:\n      - Assert: {{'Fn::Sub': x}}\n"
        ));
        assert!(
            e.starts_with("Template format error: Fn::Sub cannot be used in Rules"),
            "{e}"
        );
        let e = refused(&format!(
            "{base}  R:\n    Assertions:\n      - Assert: {{'Fn::And': [true]}}\n"
        ));
        assert!(
            e.starts_with("Template format error: Fn::And takes 2 to 10 arguments, not 1"),
            "{e}"
        );
        let ok = Template::parse(&format!(
            "{base}  R:\n    RuleCondition: {{'Fn::Equals': [{{Ref: P}}, prod]}}\n    Assertions:\n      - Assert: {{'Fn::Contains': [[a, b], {{Ref: P}}]}}\n        AssertDescription: P must be a or b\n"
        ))
        .unwrap();
        assert_eq!(ok.rules.len(), 1);
        assert_eq!(
            ok.rules[0].assertions[0].description.as_deref(),
            Some("P must be a or b")
        );
    }

    #[test]
    fn list_members_are_compared_as_text() {
        assert_eq!(
            members(&Value::String("a, b".into())),
            vec![Value::from("a"), Value::from("b")]
        );
        assert!(same(&Value::from(3), &Value::from("3")));
    }
}
