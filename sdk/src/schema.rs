use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

/// How a change to a property is applied, from CloudFormation's "Update requires"
/// vocabulary (and Heat's `update_allowed_properties`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum UpdateBehavior {
    /// Updated in place with no interruption.
    #[default]
    Mutable,
    /// Updated in place; the resource is briefly interrupted.
    MutableWithInterruption,
    /// A change requires a new physical resource (CFN `createOnlyProperties`).
    CreateOnly,
    /// A change cannot be applied: the update fails.
    Immutable,
}

/// The JSON type a property takes. Values are coerced to it the way CloudFormation
/// does: a string that reads as a number or boolean is valid where one is expected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "Type", content = "Items")]
pub enum PropertyType {
    String,
    Integer,
    Number,
    Boolean,
    List(Box<PropertyType>),
    Map(Box<PropertyType>),
    /// Any JSON value, not checked.
    Json,
}

impl PropertyType {
    pub fn name(&self) -> String {
        match self {
            PropertyType::String => "String".into(),
            PropertyType::Integer => "Integer".into(),
            PropertyType::Number => "Number".into(),
            PropertyType::Boolean => "Boolean".into(),
            PropertyType::List(t) => format!("List<{}>", t.name()),
            PropertyType::Map(t) => format!("Map<{}>", t.name()),
            PropertyType::Json => "Json".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PropertySchema {
    #[serde(flatten)]
    pub ty: PropertyType,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub update: UpdateBehavior,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// For an `Immutable` property: the reason an update that changes it
    /// fails with, instead of the generic `Update of property X of type T is
    /// not supported` (e.g. CloudFormation's `Modifying service token is not
    /// allowed.`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// The strings the value may be (a list: each of its items); empty:
    /// any value of the type. A value outside them is refused before
    /// anything runs, naming them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_values: Vec<String>,
}

impl PropertySchema {
    pub fn of(ty: PropertyType) -> Self {
        PropertySchema {
            ty,
            required: false,
            update: UpdateBehavior::Mutable,
            description: String::new(),
            refusal: None,
            allowed_values: Vec::new(),
        }
    }
    /// The value (or each item of a list value) must be one of `values`.
    pub fn allowing(mut self, values: &[&str]) -> Self {
        self.allowed_values = values.iter().map(|v| v.to_string()).collect();
        self
    }
    pub fn string() -> Self {
        Self::of(PropertyType::String)
    }
    pub fn integer() -> Self {
        Self::of(PropertyType::Integer)
    }
    pub fn number() -> Self {
        Self::of(PropertyType::Number)
    }
    pub fn boolean() -> Self {
        Self::of(PropertyType::Boolean)
    }
    pub fn list(items: PropertyType) -> Self {
        Self::of(PropertyType::List(Box::new(items)))
    }
    pub fn map(values: PropertyType) -> Self {
        Self::of(PropertyType::Map(Box::new(values)))
    }
    pub fn json() -> Self {
        Self::of(PropertyType::Json)
    }
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
    pub fn update(mut self, update: UpdateBehavior) -> Self {
        self.update = update;
        self
    }
    pub fn create_only(self) -> Self {
        self.update(UpdateBehavior::CreateOnly)
    }
    pub fn with_interruption(self) -> Self {
        self.update(UpdateBehavior::MutableWithInterruption)
    }
    pub fn immutable(self) -> Self {
        self.update(UpdateBehavior::Immutable)
    }
    /// Immutable, with `reason` as the failure of an update that changes it.
    pub fn refusing_updates(mut self, reason: impl Into<String>) -> Self {
        self.refusal = Some(reason.into());
        self.immutable()
    }
    pub fn describe(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttributeSchema {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// Everything the engine needs to know about a resource type without calling its
/// provider: properties (type, required, update behaviour), attributes, and what
/// `Ref` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ResourceSchema {
    pub type_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default)]
    pub properties: BTreeMap<String, PropertySchema>,
    /// When true, properties not declared are accepted as they are (custom
    /// resources take arbitrary properties); declared ones are still checked.
    #[serde(default)]
    pub additional_properties: bool,
    #[serde(default)]
    pub attributes: BTreeMap<String, AttributeSchema>,
    /// What `Ref` returns, for documentation; the engine always uses the physical id.
    #[serde(default = "default_ref")]
    pub ref_returns: String,
    /// The capabilities a stack must acknowledge to make a resource of this
    /// type (`CAPABILITY_IAM`, or one of the platform's own such as
    /// `CAPABILITY_DATABASES`): CloudFormation's
    /// InsufficientCapabilitiesException without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_capabilities: Vec<String>,
    /// The provider applies the stack's tags (`RequestContext::tags`): an
    /// update that changes only the stack's tags calls it, and no other.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub taggable: bool,
    /// CloudFormation's `primaryIdentifier`: the properties (or attributes)
    /// whose values make the physical id (joined with `|` when there are
    /// several). What an import's `ResourceIdentifier` gives; a type
    /// without one cannot be imported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub primary_identifier: Vec<String>,
}

fn default_ref() -> String {
    "the physical resource id".into()
}

/// Why a `ResourceIdentifier` names no physical resource of a type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentifierError {
    #[error("{type_name} declares no primary identifier: it cannot be imported")]
    NotImportable { type_name: String },
    #[error("{name} is not a primary identifier of {type_name} (its identifier: {identifier})")]
    NotAnIdentifier {
        name: String,
        type_name: String,
        identifier: String,
    },
    #[error("the ResourceIdentifier of a {type_name} needs {name}")]
    Missing { name: String, type_name: String },
}

/// One way a resource's properties fail their schema. The messages follow
/// CloudFormation's resource-schema validation texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("#: extraneous key [{name}] is not permitted (valid properties: {})", valid.join(", "))]
    UnknownProperty { name: String, valid: Vec<String> },
    #[error("#: required key [{name}] not found")]
    MissingRequired { name: String },
    #[error("#{path}: expected type: {expected}, found: {found}")]
    WrongType {
        path: String,
        expected: String,
        found: String,
    },
    #[error("#{path}: {found} is not an accepted value (accepted: {})", allowed.join(", "))]
    NotAllowed {
        path: String,
        found: String,
        allowed: Vec<String>,
    },
}

impl ResourceSchema {
    pub fn new(type_name: impl Into<String>) -> Self {
        ResourceSchema {
            type_name: type_name.into(),
            description: String::new(),
            properties: BTreeMap::new(),
            additional_properties: false,
            attributes: BTreeMap::new(),
            ref_returns: default_ref(),
            required_capabilities: Vec::new(),
            taggable: false,
            primary_identifier: Vec::new(),
        }
    }

    /// The properties (or attributes) whose values make the physical id
    /// (see `primary_identifier`).
    pub fn identified_by(mut self, names: &[&str]) -> Self {
        self.primary_identifier = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// The physical id an import's `ResourceIdentifier` names: the primary
    /// identifier's values in order, joined with `|`. The error names what
    /// is missing or extra.
    pub fn physical_id_of(
        &self,
        identifier: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, IdentifierError> {
        if self.primary_identifier.is_empty() {
            return Err(IdentifierError::NotImportable {
                type_name: self.type_name.clone(),
            });
        }
        if let Some(extra) = identifier
            .keys()
            .find(|k| !self.primary_identifier.contains(k))
        {
            return Err(IdentifierError::NotAnIdentifier {
                name: extra.clone(),
                type_name: self.type_name.clone(),
                identifier: self.primary_identifier.join(", "),
            });
        }
        let mut parts = Vec::new();
        for name in &self.primary_identifier {
            match identifier.get(name) {
                Some(serde_json::Value::String(s)) if !s.is_empty() => parts.push(s.clone()),
                Some(serde_json::Value::Number(n)) => parts.push(n.to_string()),
                _ => {
                    return Err(IdentifierError::Missing {
                        name: name.clone(),
                        type_name: self.type_name.clone(),
                    })
                }
            }
        }
        Ok(parts.join("|"))
    }

    /// The provider applies the stack's tags (see `taggable`).
    pub fn taggable(mut self) -> Self {
        self.taggable = true;
        self
    }

    /// Stacks must acknowledge `capability` (`CAPABILITY_…`) to make a
    /// resource of this type.
    pub fn requiring(mut self, capability: impl Into<String>) -> Self {
        self.required_capabilities.push(capability.into());
        self
    }
    pub fn describe(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
    pub fn property(mut self, name: impl Into<String>, p: PropertySchema) -> Self {
        self.properties.insert(name.into(), p);
        self
    }
    pub fn attribute(mut self, name: impl Into<String>, description: impl Into<String>) -> Self {
        self.attributes.insert(
            name.into(),
            AttributeSchema {
                description: description.into(),
            },
        );
        self
    }
    pub fn allow_additional_properties(mut self) -> Self {
        self.additional_properties = true;
        self
    }
    pub fn ref_returns(mut self, what: impl Into<String>) -> Self {
        self.ref_returns = what.into();
        self
    }

    /// The update behaviour of a property; undeclared properties (custom
    /// resources) are mutable.
    pub fn update_behavior(&self, property: &str) -> UpdateBehavior {
        self.properties
            .get(property)
            .map(|p| p.update)
            .unwrap_or(UpdateBehavior::Mutable)
    }

    /// Checks `props` against the schema and returns them coerced to the declared
    /// types. Values that are still unevaluated intrinsic functions (a single-key
    /// object `Ref`/`Fn::*`, resolved only during execution) are accepted as they
    /// are; they are checked again once resolved. All errors are reported, not just
    /// the first.
    pub fn validate(
        &self,
        props: &Map<String, Value>,
    ) -> Result<Map<String, Value>, Vec<SchemaError>> {
        let mut errors = Vec::new();
        let mut out = Map::new();
        for (name, value) in props {
            match self.properties.get(name) {
                Some(p) => match coerce(&p.ty, value, &format!("/{name}"))
                    .and_then(|v| check_allowed(p, v, &format!("/{name}")))
                {
                    Ok(v) => {
                        out.insert(name.clone(), v);
                    }
                    Err(e) => errors.push(e),
                },
                None if self.additional_properties => {
                    out.insert(name.clone(), value.clone());
                }
                None => errors.push(SchemaError::UnknownProperty {
                    name: name.clone(),
                    valid: self.properties.keys().cloned().collect(),
                }),
            }
        }
        for (name, p) in &self.properties {
            if p.required && !props.contains_key(name) {
                errors.push(SchemaError::MissingRequired { name: name.clone() });
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }
}

/// True for a value that is an unevaluated intrinsic function or a `Ref`.
pub fn is_unresolved_intrinsic(v: &Value) -> bool {
    match v {
        Value::Object(m) if m.len() == 1 => m
            .keys()
            .next()
            .is_some_and(|k| k == "Ref" || k.starts_with("Fn::")),
        _ => false,
    }
}

fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "Null",
        Value::Bool(_) => "Boolean",
        Value::Number(_) => "Number",
        Value::String(_) => "String",
        Value::Array(_) => "JSONArray",
        Value::Object(_) => "JSONObject",
    }
}

fn coerce(ty: &PropertyType, v: &Value, path: &str) -> Result<Value, SchemaError> {
    if is_unresolved_intrinsic(v) {
        return Ok(v.clone());
    }
    let wrong = || SchemaError::WrongType {
        path: path.to_string(),
        expected: ty.name(),
        found: json_type_name(v).to_string(),
    };
    match (ty, v) {
        (PropertyType::Json, _) => Ok(v.clone()),
        (PropertyType::String, Value::String(_)) => Ok(v.clone()),
        (PropertyType::String, Value::Number(n)) => Ok(Value::String(n.to_string())),
        (PropertyType::String, Value::Bool(b)) => Ok(Value::String(b.to_string())),
        (PropertyType::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(v.clone()),
        (PropertyType::Integer, Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map(|i| Value::Number(i.into()))
            .map_err(|_| wrong()),
        (PropertyType::Number, Value::Number(_)) => Ok(v.clone()),
        (PropertyType::Number, Value::String(s)) => parse_number(s.trim()).ok_or_else(wrong),
        (PropertyType::Boolean, Value::Bool(_)) => Ok(v.clone()),
        (PropertyType::Boolean, Value::String(s)) => match s.as_str() {
            "true" | "True" | "TRUE" => Ok(Value::Bool(true)),
            "false" | "False" | "FALSE" => Ok(Value::Bool(false)),
            _ => Err(wrong()),
        },
        (PropertyType::List(item), Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, x)| coerce(item, x, &format!("{path}/{i}")))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        (PropertyType::Map(item), Value::Object(m)) => {
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(k.clone(), coerce(item, x, &format!("{path}/{k}"))?);
            }
            Ok(Value::Object(out))
        }
        _ => Err(wrong()),
    }
}

/// `v` when the property accepts it: a string among its allowed values, or
/// a list of them; anything else is refused with the accepted values.
fn check_allowed(p: &PropertySchema, v: Value, path: &str) -> Result<Value, SchemaError> {
    if p.allowed_values.is_empty() || is_unresolved_intrinsic(&v) {
        return Ok(v);
    }
    let refuse = |found: &Value, at: String| SchemaError::NotAllowed {
        path: at,
        found: found.to_string(),
        allowed: p.allowed_values.clone(),
    };
    let fits = |x: &Value| {
        x.as_str()
            .is_some_and(|s| p.allowed_values.iter().any(|a| a == s))
    };
    match &v {
        Value::Array(items) => {
            if let Some((i, bad)) = items
                .iter()
                .enumerate()
                .find(|(_, x)| !is_unresolved_intrinsic(x) && !fits(x))
            {
                return Err(refuse(bad, format!("{path}/{i}")));
            }
            Ok(v)
        }
        x if fits(x) => Ok(v),
        x => Err(refuse(x, path.to_string())),
    }
}

fn parse_number(s: &str) -> Option<Value> {
    if let Ok(i) = s.parse::<i64>() {
        return Some(Value::Number(i.into()));
    }
    let f = s.parse::<f64>().ok()?;
    Number::from_f64(f).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_import_identifier_makes_the_physical_id() {
        let obj = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
        let one = ResourceSchema::new("T::X").identified_by(&["Name"]);
        assert_eq!(
            one.physical_id_of(&obj(json!({"Name": "a"}))),
            Ok("a".into())
        );
        let two = ResourceSchema::new("T::Y").identified_by(&["Db", "Table"]);
        assert_eq!(
            two.physical_id_of(&obj(json!({"Table": "t", "Db": "d"}))),
            Ok("d|t".into())
        );
        let text = |r: Result<String, IdentifierError>| r.unwrap_err().to_string();
        assert_eq!(
            two.physical_id_of(&obj(json!({"Db": "d"}))),
            Err(IdentifierError::Missing {
                name: "Table".into(),
                type_name: "T::Y".into()
            })
        );
        assert_eq!(
            text(two.physical_id_of(&obj(json!({"Db": "d"})))),
            "the ResourceIdentifier of a T::Y needs Table"
        );
        assert_eq!(
            text(one.physical_id_of(&obj(json!({"Name": "a", "Id": "b"})))),
            "Id is not a primary identifier of T::X (its identifier: Name)"
        );
        assert_eq!(
            text(ResourceSchema::new("T::Z").physical_id_of(&obj(json!({"Name": "a"})))),
            "T::Z declares no primary identifier: it cannot be imported"
        );
        // It travels in the schema's JSON (a handler's /schema).
        let wire = serde_json::to_value(&two).unwrap_or_default();
        assert_eq!(wire["PrimaryIdentifier"], json!(["Db", "Table"]));
    }

    fn schema() -> ResourceSchema {
        ResourceSchema::new("T::X")
            .property("Name", PropertySchema::string().required().create_only())
            .property("Size", PropertySchema::integer())
            .property("Ratio", PropertySchema::number())
            .property("On", PropertySchema::boolean())
            .property("Tags", PropertySchema::list(PropertyType::String))
    }

    fn props(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn coerces_strings_to_declared_types() {
        let out = schema()
            .validate(&props(
                json!({"Name": 5, "Size": "10", "Ratio": "1.5", "On": "true", "Tags": [1, true]}),
            ))
            .unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"Name": "5", "Size": 10, "Ratio": 1.5, "On": true, "Tags": ["1", "true"]})
        );
    }

    #[test]
    fn reports_every_error_with_cfn_text() {
        let errs = schema()
            .validate(&props(json!({"Size": "ten", "Bogus": 1})))
            .unwrap_err();
        let texts: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            texts,
            vec![
                "#/Size: expected type: Integer, found: String",
                "#: extraneous key [Bogus] is not permitted (valid properties: Name, On, Ratio, Size, Tags)",
                "#: required key [Name] not found",
            ]
        );
    }

    #[test]
    fn unresolved_intrinsics_pass_through() {
        let out = schema()
            .validate(&props(
                json!({"Name": {"Ref": "X"}, "Size": {"Fn::GetAtt": ["A", "B"]}}),
            ))
            .unwrap();
        assert_eq!(out["Name"], json!({"Ref": "X"}));
    }

    #[test]
    fn nested_type_errors_name_the_path() {
        let errs = schema()
            .validate(&props(json!({"Name": "n", "Tags": ["a", {"k": 1}]})))
            .unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "#/Tags/1: expected type: String, found: JSONObject"
        );
    }
}
