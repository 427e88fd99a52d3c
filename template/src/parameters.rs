//! Template parameters: declarations, the values a stack operation supplies, and
//! CloudFormation's constraint checks with its error texts.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{format_error, TemplateError};

/// What `NoEcho` parameters are shown as.
pub const MASK: &str = "****";

/// `A::B::C::Id` → `A::B::C` (three `::`-separated alphanumeric parts, then Id).
fn resource_id_type(t: &str) -> Option<&str> {
    let prefix = t.strip_suffix("::Id")?;
    let parts: Vec<&str> = prefix.split("::").collect();
    (parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric())))
    .then_some(prefix)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParameterType {
    String,
    Number,
    ListNumber,
    CommaDelimitedList,
    /// An AWS-specific or SSM type (`AWS::EC2::KeyPair::KeyName`,
    /// `AWS::SSM::Parameter::Value<String>`, …), or a provider's resource-id
    /// type (`Vendor::Service::Thing::Id`), accepted as a plain string. An
    /// `…::Id` type whose resource type a provider serves is checked to name
    /// an existing resource when the operation runs (seed 000 run 31).
    AwsString(String),
    /// `List<AWS::…>` or `List<…::Id>`, accepted as a comma-delimited list.
    AwsList(String),
    /// HOT's `json`: the text is JSON; `get_param` yields the value.
    HeatJson,
    /// HOT's `boolean`: `get_param` yields true or false.
    HeatBoolean,
    /// HOT's `number`: `get_param` yields a number.
    HeatNumber,
}

/// The internal type names HOT parameters are lowered to.
pub const HEAT_JSON: &str = "Cairn::Heat::Json";
pub const HEAT_BOOLEAN: &str = "Cairn::Heat::Boolean";
pub const HEAT_NUMBER: &str = "Cairn::Heat::Number";

impl ParameterType {
    fn parse(s: &str) -> Option<ParameterType> {
        Some(match s {
            "String" => ParameterType::String,
            "Number" => ParameterType::Number,
            "List<Number>" => ParameterType::ListNumber,
            "CommaDelimitedList" => ParameterType::CommaDelimitedList,
            HEAT_JSON => ParameterType::HeatJson,
            HEAT_BOOLEAN => ParameterType::HeatBoolean,
            HEAT_NUMBER => ParameterType::HeatNumber,
            t if t.starts_with("List<AWS::") && t.ends_with('>') => {
                ParameterType::AwsList(t.into())
            }
            t if t.starts_with("AWS::SSM::Parameter::Value<List<") => {
                ParameterType::AwsList(t.into())
            }
            t if t.starts_with("AWS::") => ParameterType::AwsString(t.into()),
            t if resource_id_type(t).is_some() => ParameterType::AwsString(t.into()),
            t if t
                .strip_prefix("List<")
                .and_then(|r| r.strip_suffix('>'))
                .and_then(resource_id_type)
                .is_some() =>
            {
                ParameterType::AwsList(t.into())
            }
            _ => return None,
        })
    }

    /// For `T::Id` and `List<T::Id>`: the resource type `T` whose physical
    /// ids the values must be.
    pub fn resource_type(&self) -> Option<&str> {
        match self {
            ParameterType::AwsString(t) => resource_id_type(t),
            ParameterType::AwsList(t) => t
                .strip_prefix("List<")
                .and_then(|r| r.strip_suffix('>'))
                .and_then(resource_id_type),
            _ => None,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            ParameterType::String => "String",
            ParameterType::Number => "Number",
            ParameterType::ListNumber => "List<Number>",
            ParameterType::CommaDelimitedList => "CommaDelimitedList",
            ParameterType::AwsString(t) | ParameterType::AwsList(t) => t,
            ParameterType::HeatJson => "json",
            ParameterType::HeatBoolean => "boolean",
            ParameterType::HeatNumber => "number",
        }
    }

    pub fn is_list(&self) -> bool {
        matches!(
            self,
            ParameterType::ListNumber
                | ParameterType::CommaDelimitedList
                | ParameterType::AwsList(_)
        )
    }
}

/// One entry of the Parameters section.
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterDecl {
    pub name: String,
    pub ty: ParameterType,
    pub default: Option<String>,
    pub description: Option<String>,
    pub allowed_values: Vec<String>,
    pub allowed_pattern: Option<String>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_value: Option<f64>,
    pub max_value: Option<f64>,
    pub no_echo: bool,
    pub constraint_description: Option<String>,
    /// Declared in a HOT template: errors in Heat's words.
    pub heat: bool,
    /// HOT `immutable`: an update may not change the value.
    pub immutable: bool,
    /// HOT's `modulo` constraint: (step, offset).
    pub modulo: Option<(i64, i64)>,
    /// HOT `custom_constraint` names (nova.flavor, …): Cairn has no
    /// plugins for them, so values are used unchecked, with a warning.
    pub custom_constraints: Vec<String>,
    /// HOT: each constraint's own description (length, range, modulo,
    /// allowed_values, allowed_pattern), Heat's text when it fails.
    pub heat_descriptions: BTreeMap<String, String>,
}

/// The key the HOT front end marks its parameters with.
pub const HEAT_MARK: &str = "Cairn::Heat";
/// HOT `immutable: true`.
pub const HEAT_IMMUTABLE: &str = "Cairn::Heat::Immutable";
/// HOT's modulo constraint, `{"step": n, "offset": m}`.
pub const HEAT_MODULO: &str = "Cairn::Heat::Modulo";
/// HOT's custom_constraint names.
pub const HEAT_CUSTOM_CONSTRAINTS: &str = "Cairn::Heat::CustomConstraints";
/// HOT constraints' descriptions, by kind.
pub const HEAT_DESCRIPTIONS: &str = "Cairn::Heat::Descriptions";

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

const PARAMETER_KEYS: &[&str] = &[
    "Type",
    "Default",
    "Description",
    "AllowedValues",
    "AllowedPattern",
    "MinLength",
    "MaxLength",
    "MinValue",
    "MaxValue",
    "NoEcho",
    "ConstraintDescription",
    HEAT_MARK,
    HEAT_IMMUTABLE,
    HEAT_MODULO,
    HEAT_CUSTOM_CONSTRAINTS,
    HEAT_DESCRIPTIONS,
];

impl ParameterDecl {
    pub fn parse(name: &str, decl: &Value) -> Result<ParameterDecl, TemplateError> {
        let Value::Object(d) = decl else {
            return Err(format_error(
                "Every Parameters object must contain a Type member.",
            ));
        };
        if let Some(k) = d.keys().find(|k| !PARAMETER_KEYS.contains(&k.as_str())) {
            return Err(format_error(format!(
                "Invalid template parameter property '{k}'"
            )));
        }
        let ty_text = match d.get("Type") {
            Some(Value::String(t)) => t.clone(),
            _ => {
                return Err(format_error(
                    "Every Parameters object must contain a Type member.",
                ))
            }
        };
        let ty = ParameterType::parse(&ty_text)
            .ok_or_else(|| format_error(format!("Unrecognized parameter type: {ty_text}")))?;
        let number = |key: &str| -> Result<Option<f64>, TemplateError> {
            match d.get(key) {
                None => Ok(None),
                Some(v) => scalar_text(v)
                    .and_then(|s| s.parse::<f64>().ok())
                    .map(Some)
                    .ok_or_else(|| {
                        format_error(format!("{key} of parameter {name} must be a number"))
                    }),
            }
        };
        let count = |key: &str| -> Result<Option<u64>, TemplateError> {
            match number(key)? {
                None => Ok(None),
                Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f as u64)),
                Some(_) => Err(format_error(format!(
                    "{key} of parameter {name} must be a non-negative integer"
                ))),
            }
        };
        let allowed_values = match d.get("AllowedValues") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    scalar_text(v).ok_or_else(|| {
                        format_error(format!(
                            "AllowedValues of parameter {name} must be a list of strings"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(format_error(format!(
                    "AllowedValues of parameter {name} must be a list"
                )))
            }
        };
        let allowed_pattern = d.get("AllowedPattern").and_then(scalar_text);
        if let Some(p) = &allowed_pattern {
            let dialect = if d.get(HEAT_MARK) == Some(&Value::Bool(true)) {
                super::pattern::Dialect::Python
            } else {
                super::pattern::Dialect::Java
            };
            super::pattern::AllowedPattern::new(p, dialect).map_err(|e| {
                format_error(format!(
                    "AllowedPattern of parameter {name} is not a valid regular expression: {e}"
                ))
            })?;
        }
        let default = match d.get("Default") {
            None => None,
            Some(Value::Array(a)) if ty.is_list() => Some(
                a.iter()
                    .filter_map(scalar_text)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            Some(v) => Some(scalar_text(v).ok_or_else(|| {
                format_error(format!("Default of parameter {name} must be a string"))
            })?),
        };
        let no_echo = match d.get("NoEcho") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            Some(_) => false,
        };
        Ok(ParameterDecl {
            name: name.to_string(),
            ty,
            default,
            description: d.get("Description").and_then(scalar_text),
            allowed_values,
            allowed_pattern,
            min_length: count("MinLength")?,
            max_length: count("MaxLength")?,
            min_value: number("MinValue")?,
            max_value: number("MaxValue")?,
            no_echo,
            constraint_description: d.get("ConstraintDescription").and_then(scalar_text),
            heat: d.get(HEAT_MARK) == Some(&Value::Bool(true)),
            immutable: d.get(HEAT_IMMUTABLE) == Some(&Value::Bool(true)),
            modulo: d
                .get(HEAT_MODULO)
                .and_then(|m| Some((m.get("step")?.as_i64()?, m.get("offset")?.as_i64()?))),
            custom_constraints: d
                .get(HEAT_CUSTOM_CONSTRAINTS)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(scalar_text)
                .collect(),
            heat_descriptions: d
                .get(HEAT_DESCRIPTIONS)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), scalar_text(v)?)))
                .collect(),
        })
    }

    /// Checks a supplied value and returns what `Ref` yields: a string, or a list
    /// of strings for list types. Number parameters keep their text (`1000.0`).
    pub fn check(&self, raw: &str) -> Result<Value, TemplateError> {
        match self.ty {
            ParameterType::HeatJson => {
                let v: Value = serde_json::from_str(raw).map_err(|e| {
                    TemplateError::new(format!(
                        "Parameter '{}' is invalid: Value must be valid JSON: {e}",
                        self.name
                    ))
                })?;
                return Ok(v);
            }
            ParameterType::HeatBoolean => {
                return heat_bool(raw).map(Value::Bool).ok_or_else(|| {
                    TemplateError::new(format!(
                        "Parameter '{}' is invalid: Unrecognized value \"{raw}\", acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'",
                        self.name
                    ))
                });
            }
            _ => {}
        }
        let items: Vec<&str> = if self.ty.is_list() {
            if raw.is_empty() {
                Vec::new()
            } else {
                raw.split(',').collect()
            }
        } else {
            vec![raw]
        };
        for item in &items {
            let numeric = matches!(
                self.ty,
                ParameterType::Number | ParameterType::ListNumber | ParameterType::HeatNumber
            );
            if numeric {
                self.check_number(item)?;
            } else {
                self.check_text(item)?;
            }
            if !self.allowed_values.is_empty() && !self.allowed_values.iter().any(|a| a == item) {
                return Err(self.failure(
                    "allowed_values",
                    format!("Parameter '{}' must be one of AllowedValues", self.name),
                    format!(
                        "\"{item}\" is not an allowed value [{}]",
                        self.allowed_values.join(", ")
                    ),
                ));
            }
        }
        if self.ty == ParameterType::HeatNumber {
            let n: f64 = raw.trim().parse().unwrap_or_default();
            let v = if n.fract() == 0.0 && n.abs() < 9e15 {
                Value::from(n as i64)
            } else {
                serde_json::Number::from_f64(n)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            };
            return Ok(v);
        }
        Ok(if self.ty.is_list() {
            Value::Array(
                items
                    .into_iter()
                    .map(|s| Value::String(s.to_string()))
                    .collect(),
            )
        } else {
            Value::String(raw.to_string())
        })
    }

    /// A constraint of `kind` the value failed: CloudFormation's text (or
    /// the ConstraintDescription), or Heat's ("Parameter 'x' is invalid: "
    /// and the constraint's description, else Heat's own text).
    fn failure(&self, kind: &str, cfn: String, heat: String) -> TemplateError {
        if self.heat {
            let why = self.heat_descriptions.get(kind).cloned().unwrap_or(heat);
            return TemplateError::new(format!("Parameter '{}' is invalid: {why}", self.name));
        }
        match &self.constraint_description {
            Some(d) => TemplateError::new(format!(
                "Parameter '{}' failed to satisfy constraint: {d}",
                self.name
            )),
            None => TemplateError::new(cfn),
        }
    }

    /// MinValue, MaxValue and (Heat) modulo of one numeric item.
    fn check_number(&self, item: &str) -> Result<(), TemplateError> {
        let n: f64 = item.trim().parse().map_err(|_| {
            TemplateError::new(format!("Parameter '{}' must be a number", self.name))
        })?;
        // Heat's text of a range: its bounds, `None` for a missing one.
        let range = || {
            format!(
                "{} is out of range (min: {}, max: {})",
                item.trim(),
                bound(self.min_value.map(fmt_num)),
                bound(self.max_value.map(fmt_num))
            )
        };
        if let Some(min) = self.min_value.filter(|min| n < *min) {
            return Err(self.failure(
                "range",
                format!(
                    "Parameter '{}' must be a number not less than {}",
                    self.name,
                    fmt_num(min)
                ),
                range(),
            ));
        }
        if let Some(max) = self.max_value.filter(|max| n > *max) {
            return Err(self.failure(
                "range",
                format!(
                    "Parameter '{}' must be a number not greater than {}",
                    self.name,
                    fmt_num(max)
                ),
                range(),
            ));
        }
        if let Some((step, offset)) = self.modulo {
            // Heat: integers only, the remainder's sign that of the step
            // (Python's %).
            let fits = n.fract() == 0.0 && step != 0 && {
                let r = (n as i64).rem_euclid(step.abs());
                let r = if step < 0 && r != 0 { r + step } else { r };
                r == offset
            };
            if !fits {
                let why = format!(
                    "{} is not a multiple of {step} with an offset of {offset}",
                    item.trim()
                );
                return Err(self.failure("modulo", why.clone(), why));
            }
        }
        Ok(())
    }

    /// MinLength, MaxLength and AllowedPattern of one text item.
    fn check_text(&self, item: &str) -> Result<(), TemplateError> {
        let len = item.chars().count() as u64;
        let length = || {
            format!(
                "length ({len}) is out of range (min: {}, max: {})",
                bound(self.min_length.map(|m| m.to_string())),
                bound(self.max_length.map(|m| m.to_string()))
            )
        };
        if let Some(min) = self.min_length.filter(|min| len < *min) {
            return Err(self.failure(
                "length",
                format!(
                    "Parameter '{}' must contain at least {min} characters",
                    self.name
                ),
                length(),
            ));
        }
        if let Some(max) = self.max_length.filter(|max| len > *max) {
            return Err(self.failure(
                "length",
                format!(
                    "Parameter '{}' must contain at most {max} characters",
                    self.name
                ),
                length(),
            ));
        }
        if let Some(p) = &self.allowed_pattern {
            // The pattern must match the whole value, as in CloudFormation
            // (and Heat: its match must end at the value's end). A HOT
            // parameter's is Python's.
            let dialect = if self.heat {
                super::pattern::Dialect::Python
            } else {
                super::pattern::Dialect::Java
            };
            let anchored = super::pattern::AllowedPattern::new(p, dialect).map_err(|e| {
                TemplateError::new(format!(
                    "AllowedPattern of parameter {} is invalid: {e}",
                    self.name
                ))
            })?;
            if !anchored.matches(item) {
                return Err(self.failure(
                    "allowed_pattern",
                    format!("Parameter '{}' must match pattern {p}", self.name),
                    format!("\"{item}\" does not match pattern \"{p}\""),
                ));
            }
        }
        Ok(())
    }
}

/// Heat's text of a bound: the bound, `None` for a missing one.
fn bound(b: Option<String>) -> String {
    b.unwrap_or_else(|| "None".into())
}

/// A value as a parameter's text: a string as it is, a list comma-joined,
/// anything else as JSON.
pub fn parameter_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(String::from)
                    .unwrap_or_else(|| i.to_string())
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// Heat's (oslo's strict) reading of a boolean parameter.
fn heat_bool(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
        "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
        _ => None,
    }
}

fn fmt_num(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

/// The parameter values of one stack operation, after defaults and constraints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParameterValues {
    /// Name → the raw text supplied or defaulted (what is stored and shown).
    pub raw: BTreeMap<String, String>,
    /// Name → what `Ref` yields.
    pub values: Map<String, Value>,
    /// Names of NoEcho parameters.
    pub no_echo: Vec<String>,
}

impl ParameterValues {
    /// Resolves supplied values against the declarations: unknown names, missing
    /// values and constraint violations are errors with CloudFormation's texts.
    pub fn resolve(
        decls: &[ParameterDecl],
        supplied: &BTreeMap<String, String>,
    ) -> Result<ParameterValues, TemplateError> {
        let unknown: Vec<&str> = supplied
            .keys()
            .filter(|k| !decls.iter().any(|d| &d.name == *k))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(TemplateError::new(format!(
                "Parameters: [{}] do not exist in the template",
                unknown.join(", ")
            )));
        }
        let missing: Vec<&str> = decls
            .iter()
            .filter(|d| d.default.is_none() && !supplied.contains_key(&d.name))
            .map(|d| d.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(TemplateError::new(format!(
                "Parameters: [{}] must have values",
                missing.join(", ")
            )));
        }
        let mut out = ParameterValues::default();
        for d in decls {
            let raw = match supplied.get(&d.name).or(d.default.as_ref()) {
                Some(r) => r.clone(),
                None => continue,
            };
            let v = d.check(&raw)?;
            out.values.insert(d.name.clone(), v);
            out.raw.insert(d.name.clone(), raw);
            if d.no_echo {
                out.no_echo.push(d.name.clone());
            }
        }
        Ok(out)
    }

    /// The raw values with NoEcho ones masked, for display.
    pub fn masked(&self) -> BTreeMap<String, String> {
        self.raw
            .iter()
            .map(|(k, v)| {
                let shown = if self.no_echo.contains(k) {
                    MASK.to_string()
                } else {
                    v.clone()
                };
                (k.clone(), shown)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl(v: Value) -> ParameterDecl {
        ParameterDecl::parse("P", &v).unwrap()
    }

    #[test]
    fn heat_parameters_fail_in_heats_words() {
        let heat = |v: Value| {
            let mut v = v;
            v[HEAT_MARK] = json!(true);
            decl(v)
        };
        let d = heat(json!({"Type": "String", "MinLength": 2, "MaxLength": 4}));
        assert_eq!(
            msg(&d, "x"),
            "Parameter 'P' is invalid: length (1) is out of range (min: 2, max: 4)"
        );
        let d = heat(json!({"Type": HEAT_NUMBER, "MinValue": 1}));
        assert_eq!(
            msg(&d, "0"),
            "Parameter 'P' is invalid: 0 is out of range (min: 1, max: None)"
        );
        let d = heat(json!({"Type": "String", "AllowedValues": ["a", "b"]}));
        assert_eq!(
            msg(&d, "c"),
            "Parameter 'P' is invalid: \"c\" is not an allowed value [a, b]"
        );
        let d = heat(json!({"Type": "String", "AllowedPattern": "[a-z]+"}));
        assert_eq!(
            msg(&d, "A1"),
            "Parameter 'P' is invalid: \"A1\" does not match pattern \"[a-z]+\""
        );
        let d = heat(
            json!({"Type": "String", "MinLength": 2, "MaxLength": 3, HEAT_DESCRIPTIONS: {"length": "too short"}, "AllowedPattern": "[a-z]+"}),
        );
        assert_eq!(msg(&d, "x"), "Parameter 'P' is invalid: too short");
        // Each constraint has its own description.
        assert_eq!(
            msg(&d, "AB"),
            "Parameter 'P' is invalid: \"AB\" does not match pattern \"[a-z]+\""
        );
        let d = heat(json!({"Type": HEAT_BOOLEAN}));
        assert_eq!(d.check("yes").unwrap(), json!(true));
        let d = heat(json!({"Type": HEAT_JSON}));
        assert_eq!(d.check("{\"a\": [1]}").unwrap(), json!({"a": [1]}));
        let d = heat(json!({"Type": HEAT_NUMBER, HEAT_MODULO: {"step": 2, "offset": 1}}));
        assert_eq!(d.check("7").unwrap(), json!(7));
        assert_eq!(
            msg(&d, "8"),
            "Parameter 'P' is invalid: 8 is not a multiple of 2 with an offset of 1"
        );
        assert_eq!(
            msg(&d, "7.5"),
            "Parameter 'P' is invalid: 7.5 is not a multiple of 2 with an offset of 1"
        );
        // Python's % takes the step's sign.
        let d = heat(json!({"Type": HEAT_NUMBER, HEAT_MODULO: {"step": -3, "offset": -1}}));
        assert!(d.check("5").is_ok());
        assert!(d.check("4").is_err());
    }

    fn msg(d: &ParameterDecl, raw: &str) -> String {
        d.check(raw).unwrap_err().message().to_string()
    }

    #[test]
    fn constraint_messages() {
        let d = decl(json!({"Type": "String", "AllowedValues": ["a", "b"]}));
        assert_eq!(msg(&d, "c"), "Parameter 'P' must be one of AllowedValues");
        let d = decl(json!({"Type": "String", "AllowedPattern": "[a-z]+"}));
        assert_eq!(msg(&d, "abc1"), "Parameter 'P' must match pattern [a-z]+");
        assert!(d.check("abc").is_ok());
        let d = decl(json!({"Type": "String", "MinLength": 2, "MaxLength": "3"}));
        assert_eq!(
            msg(&d, "a"),
            "Parameter 'P' must contain at least 2 characters"
        );
        assert_eq!(
            msg(&d, "abcd"),
            "Parameter 'P' must contain at most 3 characters"
        );
        let d = decl(json!({"Type": "Number", "MinValue": 1, "MaxValue": 10}));
        assert_eq!(
            msg(&d, "0"),
            "Parameter 'P' must be a number not less than 1"
        );
        assert_eq!(
            msg(&d, "11"),
            "Parameter 'P' must be a number not greater than 10"
        );
        assert_eq!(msg(&d, "x"), "Parameter 'P' must be a number");
        let d = decl(
            json!({"Type": "String", "AllowedPattern": "[0-9]+", "ConstraintDescription": "digits only"}),
        );
        assert_eq!(
            msg(&d, "x"),
            "Parameter 'P' failed to satisfy constraint: digits only"
        );
    }

    #[test]
    fn numbers_keep_their_text_and_lists_split() {
        let d = decl(json!({"Type": "Number"}));
        assert_eq!(d.check("1000.0").unwrap(), json!("1000.0"));
        let d = decl(json!({"Type": "List<Number>"}));
        assert_eq!(d.check("1,2.5").unwrap(), json!(["1", "2.5"]));
        assert_eq!(msg(&d, "1,x"), "Parameter 'P' must be a number");
        let d = decl(json!({"Type": "CommaDelimitedList", "Default": ["a", "b"]}));
        assert_eq!(d.default.as_deref(), Some("a,b"));
        let d = decl(json!({"Type": "AWS::EC2::KeyPair::KeyName"}));
        assert_eq!(d.check("k").unwrap(), json!("k"));
        let d = decl(json!({"Type": "List<AWS::EC2::Subnet::Id>"}));
        assert_eq!(d.check("s1,s2").unwrap(), json!(["s1", "s2"]));
        assert_eq!(d.ty.resource_type(), Some("AWS::EC2::Subnet"));
        let d = decl(json!({"Type": "Cairn::Test::Resource::Id"}));
        assert_eq!(d.check("r-1").unwrap(), json!("r-1"));
        assert_eq!(d.ty.resource_type(), Some("Cairn::Test::Resource"));
        let d = decl(json!({"Type": "List<Cairn::Test::Resource::Id>"}));
        assert_eq!(d.check("a,b").unwrap(), json!(["a", "b"]));
        assert_eq!(d.ty.resource_type(), Some("Cairn::Test::Resource"));
        assert!(ParameterDecl::parse("P", &json!({"Type": "Cairn::Id"})).is_err());
        assert_eq!(
            decl(json!({"Type": "AWS::EC2::KeyPair::KeyName"}))
                .ty
                .resource_type(),
            None
        );
    }

    #[test]
    fn unrecognized_type() {
        let e = ParameterDecl::parse("P", &json!({"Type": "Strin"})).unwrap_err();
        assert_eq!(
            e.message(),
            "Template format error: Unrecognized parameter type: Strin"
        );
        let e = ParameterDecl::parse("P", &json!({"Default": "x"})).unwrap_err();
        assert_eq!(
            e.message(),
            "Template format error: Every Parameters object must contain a Type member."
        );
    }

    #[test]
    fn resolve_reports_missing_and_unknown_and_masks() {
        let decls = vec![
            decl(json!({"Type": "String"})),
            ParameterDecl::parse("Q", &json!({"Type": "String"})).unwrap(),
            ParameterDecl::parse(
                "S",
                &json!({"Type": "String", "NoEcho": true, "Default": "secret"}),
            )
            .unwrap(),
        ];
        let e = ParameterValues::resolve(&decls, &BTreeMap::new()).unwrap_err();
        assert_eq!(e.message(), "Parameters: [P, Q] must have values");
        let mut given = BTreeMap::new();
        given.insert("Z".to_string(), "1".to_string());
        let e = ParameterValues::resolve(&decls, &given).unwrap_err();
        assert_eq!(e.message(), "Parameters: [Z] do not exist in the template");
        given.clear();
        given.insert("P".into(), "p".into());
        given.insert("Q".into(), "q".into());
        let v = ParameterValues::resolve(&decls, &given).unwrap();
        assert_eq!(v.masked().get("S").map(String::as_str), Some(MASK));
        assert_eq!(v.values["S"], json!("secret"));
    }
}
