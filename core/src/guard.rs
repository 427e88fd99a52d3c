//! CloudFormation Guard rules evaluated in process (the `cfn-guard`
//! crate): a Guard hook's verdict on the document its target shows.
//!
//! The crate's evaluator is synchronous and not `Send` inside: it runs on
//! a blocking thread, given the rules' text and the document as JSON.

use serde_json::Value;

/// What rules said of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardVerdict {
    /// Every rule that applies holds (or none applies).
    Compliant,
    /// Rules that do not hold: each its name and what it says (its custom
    /// message, else Guard's own).
    NonCompliant(Vec<(String, String)>),
}

/// Why rules could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// The rules do not parse (their location and Guard's words).
    #[error("the Guard rules at {location} cannot be read: {message}")]
    Rules { location: String, message: String },
    #[error("Guard could not evaluate the rules: {0}")]
    Evaluation(String),
}

/// Checks that `rules` parse (a hook's rules are checked when it is made).
pub fn check_rules(rules: &str, location: &str) -> Result<(), GuardError> {
    evaluate(rules, location, &serde_json::json!({})).map(|_| ())
}

/// `rules` (read from `location`) against `document`.
pub fn evaluate(rules: &str, location: &str, document: &Value) -> Result<GuardVerdict, GuardError> {
    let data = document.to_string();
    let report = cfn_guard::run_checks(
        cfn_guard::ValidateInput {
            content: &data,
            file_name: "target",
        },
        cfn_guard::ValidateInput {
            content: rules,
            file_name: location,
        },
        false,
    )
    .map_err(|e| GuardError::Rules {
        location: location.to_string(),
        message: e.to_string(),
    })?;
    // Rules with no rule in them answer nothing: nothing to hold.
    if report.trim().is_empty() {
        return Ok(GuardVerdict::Compliant);
    }
    let report: Value = serde_json::from_str(&report)
        .map_err(|e| GuardError::Evaluation(format!("its report is not JSON: {e}")))?;
    let failed: Vec<(String, String)> = report["not_compliant"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|clause| {
            let rule = &clause["Rule"];
            let name = rule["name"]
                .as_str()
                .unwrap_or("(unnamed rule)")
                .to_string();
            let mut messages = Vec::new();
            messages_of(clause, &mut messages);
            messages.dedup();
            (name, messages.join("; "))
        })
        .collect();
    Ok(match failed.is_empty() {
        true => GuardVerdict::Compliant,
        false => GuardVerdict::NonCompliant(failed),
    })
}

/// The messages of a report's failed checks, a custom message (the
/// rule's `<< … >>`) before Guard's own.
fn messages_of(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(messages)) = m.get("messages") {
                // A rule without `<< … >>` has an empty custom message.
                let custom = messages
                    .get("custom_message")
                    .and_then(Value::as_str)
                    .filter(|c| !c.trim().is_empty());
                let own = messages.get("error_message").and_then(Value::as_str);
                if let Some(text) = custom.or(own) {
                    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                    if !text.is_empty() {
                        out.push(text);
                    }
                }
            }
            for (k, child) in m {
                if k != "messages" {
                    messages_of(child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| messages_of(i, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MODE: &str = r#"
let files = Resources.*[ Type == 'Cairn::Local::File' ]
rule FILE_MODE_0600 when %files !empty {
    %files.Properties.Mode == "0600"
    <<
        every Cairn::Local::File must have Mode 0600
    >>
}
"#;

    fn file(mode: Option<&str>) -> Value {
        let props = match mode {
            Some(m) => json!({"Mode": m}),
            None => json!({}),
        };
        json!({"Resources": {"F": {"Type": "Cairn::Local::File", "Properties": props}}})
    }

    #[test]
    fn rules_judge_the_document() {
        assert_eq!(
            evaluate(MODE, "mode.guard", &file(Some("0600"))),
            Ok(GuardVerdict::Compliant)
        );
        let failed = vec![(
            "FILE_MODE_0600".to_string(),
            "every Cairn::Local::File must have Mode 0600".to_string(),
        )];
        assert_eq!(
            evaluate(MODE, "mode.guard", &file(Some("0644"))),
            Ok(GuardVerdict::NonCompliant(failed.clone()))
        );
        assert_eq!(
            evaluate(MODE, "mode.guard", &file(None)),
            Ok(GuardVerdict::NonCompliant(failed))
        );
        // Another type: the rule does not apply.
        let other =
            json!({"Resources": {"T": {"Type": "Cairn::Test::Resource", "Properties": {}}}});
        assert_eq!(
            evaluate(MODE, "mode.guard", &other),
            Ok(GuardVerdict::Compliant)
        );
    }

    #[test]
    fn a_rule_without_a_message_says_what_guard_found() {
        let plain = "let files = Resources.*[ Type == 'Cairn::Local::File' ]\nrule MODE when %files !empty {\n    %files.Properties.Mode == \"0600\"\n}\n";
        assert_eq!(
            evaluate(plain, "plain.guard", &file(Some("0644"))),
            Ok(GuardVerdict::NonCompliant(vec![(
                "MODE".to_string(),
                "Check was not compliant as property value [Path=/Resources/F/Properties/Mode[L:0,C:0] Value=\"0644\"] not equal to value [Path=[L:0,C:0] Value=\"0600\"].".to_string()
            )]))
        );
    }

    #[test]
    fn rules_that_do_not_parse_are_named() {
        let e = check_rules("rule X { ", "broken.guard").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the Guard rules at broken.guard cannot be read: "),
            "{e}"
        );
        assert_eq!(check_rules(MODE, "mode.guard"), Ok(()));
    }
}
