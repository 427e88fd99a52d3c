//! Stack policies (CloudFormation's `StackPolicyBody`): which update
//! actions a stack's resources may undergo. A policy is a JSON document of
//! statements; each names an effect (`Allow`/`Deny`), the actions
//! (`Update:Modify`, `Update:Replace`, `Update:Delete`, `Update:*`, or
//! `NotAction`), the principal (only `*`), the resources
//! (`LogicalResourceId/<id>` with `*`/`?` wildcards, or `*`, or
//! `NotResource`) and optionally a condition on the resource's type
//! (`StringEquals`/`StringLike` on `ResourceType`).
//!
//! Once a stack has a policy, an update action is denied unless a statement
//! allows it, and a `Deny` statement beats any `Allow`.
//! Pure: parsing and deciding only; the engine decides when to ask.

use serde_json::{Map, Value};
use std::fmt;

/// An update action a stack policy rules on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateAction {
    /// An in-place update: the physical id is kept.
    Modify,
    /// A replacement: a new physical resource.
    Replace,
    /// The resource's removal from the template.
    Delete,
}

impl UpdateAction {
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateAction::Modify => "Update:Modify",
            UpdateAction::Replace => "Update:Replace",
            UpdateAction::Delete => "Update:Delete",
        }
    }
}

impl fmt::Display for UpdateAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The actions a policy may name.
const ACTIONS: [&str; 4] = [
    "Update:Modify",
    "Update:Replace",
    "Update:Delete",
    "Update:*",
];

/// Which names a statement's list covers: the listed ones, or all but them.
#[derive(Debug, Clone, PartialEq)]
enum Names {
    Listed(Vec<String>),
    AllBut(Vec<String>),
}

impl Names {
    fn covers(&self, name: &str) -> bool {
        let any = |patterns: &[String]| patterns.iter().any(|p| wildcard_match(p, name));
        match self {
            Names::Listed(p) => any(p),
            Names::AllBut(p) => !any(p),
        }
    }
}

/// A `Condition` on the resource type: every operator must hold, and one of
/// its values is enough.
#[derive(Debug, Clone, PartialEq)]
struct TypeCondition {
    /// `StringLike` (wildcards) or `StringEquals` (exact).
    like: bool,
    types: Vec<String>,
}

impl TypeCondition {
    fn holds(&self, resource_type: &str) -> bool {
        self.types.iter().any(|t| {
            if self.like {
                wildcard_match(t, resource_type)
            } else {
                t == resource_type
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Statement {
    allow: bool,
    actions: Names,
    resources: Names,
    conditions: Vec<TypeCondition>,
}

impl Statement {
    fn applies(&self, action: UpdateAction, logical_id: &str, resource_type: &str) -> bool {
        self.actions.covers(action.as_str())
            && self
                .resources
                .covers(&format!("LogicalResourceId/{logical_id}"))
            && self.conditions.iter().all(|c| c.holds(resource_type))
    }
}

/// A parsed stack policy.
#[derive(Debug, Clone, PartialEq)]
pub struct StackPolicy {
    statements: Vec<Statement>,
}

/// Why a policy denies an action: the text of the resource's UPDATE_FAILED
/// event (CloudFormation's prefix, `Action denied by stack policy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial(pub String);

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a stack policy cannot be read: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the stack policy is not a JSON document: {0}")]
    NotJson(String),
    #[error("the stack policy must be a JSON object with a Statement list")]
    NotAnObject,
    #[error("the stack policy has an unknown key {0}: only Statement is allowed")]
    UnknownKey(String),
    #[error("the stack policy must have a Statement list")]
    NoStatements,
    /// A statement (numbered from 1, as CloudFormation's denials name them).
    #[error("Statement [#{index}]: {reason}")]
    Statement { index: usize, reason: String },
}

impl StackPolicy {
    /// Parses and checks a policy document; the error says what is wrong
    /// and where (`Statement [#2]`).
    pub fn parse(body: &str) -> Result<StackPolicy, PolicyError> {
        let doc: Value =
            serde_json::from_str(body).map_err(|e| PolicyError::NotJson(e.to_string()))?;
        let Some(doc) = doc.as_object() else {
            return Err(PolicyError::NotAnObject);
        };
        if let Some(other) = doc.keys().find(|k| *k != "Statement") {
            return Err(PolicyError::UnknownKey(other.clone()));
        }
        let statements = match doc.get("Statement") {
            Some(Value::Array(list)) => list.iter().collect::<Vec<_>>(),
            Some(one @ Value::Object(_)) => vec![one],
            _ => return Err(PolicyError::NoStatements),
        };
        let statements = statements
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                statement(s).map_err(|reason| PolicyError::Statement {
                    index: i + 1,
                    reason,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StackPolicy { statements })
    }

    /// Whether the policy lets `logical_id` (of `resource_type`) undergo
    /// `action`: a matching Deny denies, else a matching Allow allows, else
    /// it is denied.
    pub fn check(
        &self,
        action: UpdateAction,
        logical_id: &str,
        resource_type: &str,
    ) -> Result<(), Denial> {
        let mut allowed = false;
        for (i, s) in self.statements.iter().enumerate() {
            if !s.applies(action, logical_id, resource_type) {
                continue;
            }
            if !s.allow {
                return Err(Denial(format!(
                    "Action denied by stack policy: Statement [#{}] does not allow [{action}] for resource [LogicalResourceId/{logical_id}];",
                    i + 1
                )));
            }
            allowed = true;
        }
        if allowed {
            return Ok(());
        }
        Err(Denial(format!(
            "Action denied by stack policy: no statement allows [{action}] for resource [LogicalResourceId/{logical_id}];"
        )))
    }
}

fn statement(v: &Value) -> Result<Statement, String> {
    let Some(s) = v.as_object() else {
        return Err("a statement must be an object".into());
    };
    const KEYS: [&str; 8] = [
        "Effect",
        "Action",
        "NotAction",
        "Principal",
        "Resource",
        "NotResource",
        "Condition",
        "Sid",
    ];
    if let Some(other) = s.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key {other}"));
    }
    let allow = match s.get("Effect").and_then(Value::as_str) {
        Some("Allow") => true,
        Some("Deny") => false,
        Some(other) => return Err(format!("Effect must be Allow or Deny, not {other}")),
        None => return Err("Effect is required (Allow or Deny)".into()),
    };
    match s.get("Principal") {
        Some(Value::String(p)) if p == "*" => {}
        Some(_) => {
            return Err(
                "Principal must be \"*\" (the only principal a stack policy supports)".into(),
            )
        }
        None => return Err("Principal is required and must be \"*\"".into()),
    }
    let actions = names(s, "Action", "NotAction")?;
    let (Names::Listed(a) | Names::AllBut(a)) = &actions;
    if let Some(bad) = a.iter().find(|a| !ACTIONS.contains(&a.as_str())) {
        return Err(format!(
            "unknown action {bad}: the actions are {}",
            ACTIONS.join(", ")
        ));
    }
    let resources = names(s, "Resource", "NotResource")?;
    let (Names::Listed(r) | Names::AllBut(r)) = &resources;
    if let Some(bad) = r
        .iter()
        .find(|r| *r != "*" && !r.starts_with("LogicalResourceId/"))
    {
        return Err(format!(
            "resource {bad} must be \"*\" or LogicalResourceId/<logical id> (wildcards allowed)"
        ));
    }
    let conditions = match s.get("Condition") {
        None => Vec::new(),
        Some(Value::Object(c)) => conditions(c)?,
        Some(_) => return Err("Condition must be an object".into()),
    };
    Ok(Statement {
        allow,
        actions,
        resources,
        conditions,
    })
}

/// `key` or `not_key` (exactly one), a string or a list of strings.
fn names(s: &Map<String, Value>, key: &str, not_key: &str) -> Result<Names, String> {
    let list = |v: &Value, k: &str| -> Result<Vec<String>, String> {
        strings(v).ok_or_else(|| format!("{k} must be a string or a list of strings"))
    };
    match (s.get(key), s.get(not_key)) {
        (Some(v), None) => Ok(Names::Listed(list(v, key)?)),
        (None, Some(v)) => Ok(Names::AllBut(list(v, not_key)?)),
        (Some(_), Some(_)) => Err(format!("{key} and {not_key} cannot both be given")),
        (None, None) => Err(format!("{key} or {not_key} is required")),
    }
}

fn strings(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => None,
    }
}

fn conditions(c: &Map<String, Value>) -> Result<Vec<TypeCondition>, String> {
    c.iter()
        .map(|(operator, keys)| {
            let like = match operator.as_str() {
                "StringLike" => true,
                "StringEquals" => false,
                other => {
                    return Err(format!(
                    "condition operator {other} is not supported: use StringEquals or StringLike"
                ))
                }
            };
            let Some(keys) = keys.as_object() else {
                return Err(format!(
                    "{operator} must map ResourceType to a list of types"
                ));
            };
            if let Some(other) = keys.keys().find(|k| *k != "ResourceType") {
                return Err(format!(
                    "condition key {other} is not supported: the only key is ResourceType"
                ));
            }
            let types = keys
                .get("ResourceType")
                .and_then(strings)
                .ok_or_else(|| format!("{operator} must map ResourceType to a list of types"))?;
            Ok(TypeCondition { like, types })
        })
        .collect()
}

/// `pattern` against `text`: `*` any run of characters, `?` one character.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen and the text position it stands at, to backtrack.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use UpdateAction::*;

    fn policy(statements: &str) -> StackPolicy {
        StackPolicy::parse(&format!("{{\"Statement\": {statements}}}")).unwrap()
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match(
            "LogicalResourceId/Critical*",
            "LogicalResourceId/CriticalDb"
        ));
        assert!(wildcard_match(
            "LogicalResourceId/Db?",
            "LogicalResourceId/Db1"
        ));
        assert!(!wildcard_match(
            "LogicalResourceId/Db?",
            "LogicalResourceId/Db12"
        ));
        assert!(wildcard_match("AWS::EC2::*", "AWS::EC2::Instance"));
        assert!(wildcard_match("a*b*c", "aXXbYYbc"));
        assert!(!wildcard_match("a*b*c", "aXXbYY"));
        assert!(!wildcard_match("Update:Modify", "Update:Replace"));
    }

    #[test]
    fn allow_all_but_deny_beats_allow() {
        let p = policy(
            r#"[{"Effect":"Allow","Action":"Update:*","Principal":"*","Resource":"*"},
                {"Effect":"Deny","Action":"Update:Replace","Principal":"*","Resource":"LogicalResourceId/Db*"}]"#,
        );
        assert_eq!(p.check(Modify, "Db1", "T"), Ok(()));
        assert_eq!(p.check(Replace, "Web", "T"), Ok(()));
        assert_eq!(
            p.check(Replace, "Db1", "T"),
            Err(Denial("Action denied by stack policy: Statement [#2] does not allow [Update:Replace] for resource [LogicalResourceId/Db1];".into()))
        );
    }

    #[test]
    fn default_deny_once_a_policy_exists() {
        let p = policy(
            r#"[{"Effect":"Allow","Action":["Update:Modify"],"Principal":"*","Resource":["LogicalResourceId/Web"]}]"#,
        );
        assert_eq!(p.check(Modify, "Web", "T"), Ok(()));
        assert_eq!(
            p.check(Delete, "Web", "T"),
            Err(Denial("Action denied by stack policy: no statement allows [Update:Delete] for resource [LogicalResourceId/Web];".into()))
        );
        assert!(p.check(Modify, "Other", "T").is_err());
    }

    #[test]
    fn not_action_not_resource_and_type_conditions() {
        let p = policy(
            r#"[{"Effect":"Allow","NotAction":"Update:Delete","Principal":"*","NotResource":"LogicalResourceId/Keep"},
                {"Effect":"Deny","Action":"Update:*","Principal":"*","Resource":"*",
                 "Condition":{"StringLike":{"ResourceType":["Cairn::Local::*"]}}},
                {"Effect":"Deny","Action":"Update:Modify","Principal":"*","Resource":"*",
                 "Condition":{"StringEquals":{"ResourceType":"Cairn::Test::Exact"}}}]"#,
        );
        assert_eq!(p.check(Replace, "A", "Cairn::Test::Resource"), Ok(()));
        assert!(p.check(Delete, "A", "Cairn::Test::Resource").is_err());
        assert!(p.check(Modify, "Keep", "Cairn::Test::Resource").is_err());
        assert!(p
            .check(Modify, "A", "Cairn::Local::File")
            .unwrap_err()
            .0
            .contains("Statement [#2]"));
        assert!(p
            .check(Modify, "A", "Cairn::Test::Exact")
            .unwrap_err()
            .0
            .contains("Statement [#3]"));
        assert_eq!(p.check(Modify, "A", "Cairn::Test::Exactly"), Ok(()));
    }

    #[test]
    fn refusals_name_the_statement_and_the_fault() {
        let err = |body: &str| StackPolicy::parse(body).unwrap_err().to_string();
        assert_eq!(StackPolicy::parse("[]"), Err(PolicyError::NotAnObject));
        assert_eq!(
            err("[]"),
            "the stack policy must be a JSON object with a Statement list"
        );
        assert!(err("{").starts_with("the stack policy is not a JSON document"));
        assert_eq!(
            err(
                r#"{"Statement":[{"Effect":"Allow","Action":"Update:*","Principal":"*","Resource":"*"},{"Effect":"Maybe","Action":"Update:*","Principal":"*","Resource":"*"}]}"#
            ),
            "Statement [#2]: Effect must be Allow or Deny, not Maybe"
        );
        assert_eq!(
            err(r#"{"Statement":[{"Effect":"Allow","Action":"Update:Create","Principal":"*","Resource":"*"}]}"#),
            "Statement [#1]: unknown action Update:Create: the actions are Update:Modify, Update:Replace, Update:Delete, Update:*"
        );
        assert_eq!(
            err(
                r#"{"Statement":[{"Effect":"Allow","Action":"Update:*","Principal":"arn:x","Resource":"*"}]}"#
            ),
            "Statement [#1]: Principal must be \"*\" (the only principal a stack policy supports)"
        );
        assert_eq!(
            err(r#"{"Statement":[{"Effect":"Allow","Action":"Update:*","Principal":"*","Resource":"Web"}]}"#),
            "Statement [#1]: resource Web must be \"*\" or LogicalResourceId/<logical id> (wildcards allowed)"
        );
        assert_eq!(
            err(
                r#"{"Statement":[{"Effect":"Allow","Action":"Update:*","Principal":"*","Resource":"*","NotResource":"*"}]}"#
            ),
            "Statement [#1]: Resource and NotResource cannot both be given"
        );
        assert_eq!(
            err(r#"{"Statement":[{"Effect":"Allow","Action":"Update:*","Principal":"*","Resource":"*","Condition":{"StringNotEquals":{"ResourceType":["T"]}}}]}"#),
            "Statement [#1]: condition operator StringNotEquals is not supported: use StringEquals or StringLike"
        );
    }
}
