//! Heat's own resource types, as Heat defines them
//! (`heat/engine/resources/openstack/heat/`): `OS::Heat::None` (a stub that
//! accepts anything), `OS::Heat::Value` (a value, typed), `OS::Heat::RandomString`
//! (a random string from character classes and sequences) and
//! `OS::Heat::TestResource` (Heat's test type: a value, a wait, a failure
//! on demand, replacement on demand).

use std::time::Duration;

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    PropertyType, ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub const NONE: &str = "OS::Heat::None";
pub const VALUE: &str = "OS::Heat::Value";
pub const RANDOM_STRING: &str = "OS::Heat::RandomString";
pub const TEST_RESOURCE: &str = "OS::Heat::TestResource";

/// The provider of the four types.
#[derive(Default)]
pub struct HeatTypes;

/// A name unique to the request (a retried create gets the same one).
fn physical_name(req_stack: &str, logical: &str, request_id: &str) -> String {
    let digest = Sha256::digest(request_id.as_bytes());
    let suffix: String = digest
        .iter()
        .take(12)
        .map(|b| (b'a' + b % 26) as char)
        .collect();
    format!("{req_stack}-{logical}-{suffix}")
}

fn bool_prop(p: &Map<String, Value>, key: &str) -> bool {
    match p.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "1" | "yes" | "on" | "t" | "y"
        ),
        _ => false,
    }
}

fn number_prop(p: &Map<String, Value>, key: &str) -> Option<f64> {
    match p.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// TestResource's wait for an action: `action_wait_secs.<action>`, else
/// `wait_secs`.
fn wait_for(p: &Map<String, Value>, action: &str) -> Duration {
    let secs = p
        .get("action_wait_secs")
        .and_then(|a| a.get(action))
        .and_then(|v| {
            v.as_f64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .or_else(|| number_prop(p, "wait_secs"))
        .unwrap_or(0.0);
    Duration::from_secs_f64(secs.clamp(0.0, 3600.0))
}

/// `OS::Heat::Value`'s `value` as its `type` says.
fn typed_value(p: &Map<String, Value>) -> Result<Value, ProviderError> {
    let v = p.get("value").cloned().unwrap_or(Value::Null);
    let ty = p.get("type").and_then(Value::as_str);
    let bad = |t: &str| {
        ProviderError::invalid_request(format!("Property value: the value {v} is not a valid {t}"))
    };
    Ok(match ty {
        None => v,
        Some("string") => match &v {
            Value::String(_) => v,
            other => Value::String(other.to_string()),
        },
        Some("number") => match &v {
            Value::Number(_) => v,
            Value::String(s) => match s.trim().parse::<i64>() {
                Ok(i) => Value::from(i),
                Err(_) => s
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .ok_or_else(|| bad("number"))?,
            },
            _ => return Err(bad("number")),
        },
        Some("comma_delimited_list") => match &v {
            Value::Array(_) => v,
            Value::String(s) => Value::Array(s.split(',').map(|x| Value::String(x.to_string())).collect()),
            _ => return Err(bad("comma_delimited_list")),
        },
        Some("json") => match &v {
            Value::Object(_) => v,
            Value::String(s) => serde_json::from_str(s).map_err(|_| bad("json"))?,
            _ => return Err(bad("json")),
        },
        Some("boolean") => match &v {
            Value::Bool(_) => v,
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" | "t" | "y" => Value::Bool(true),
                "false" | "0" | "no" | "off" | "f" | "n" => Value::Bool(false),
                _ => return Err(bad("boolean")),
            },
            _ => return Err(bad("boolean")),
        },
        Some(other) => {
            return Err(ProviderError::invalid_request(format!(
                "Property type: \"{other}\" is not an allowed value [string, number, comma_delimited_list, json, boolean]"
            )))
        }
    })
}

/// Heat's character classes.
fn class_chars(class: &str) -> Option<&'static str> {
    Some(match class {
        "lettersdigits" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        "letters" => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        "lowercase" => "abcdefghijklmnopqrstuvwxyz",
        "uppercase" => "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "digits" => "0123456789",
        "hexdigits" => "0123456789abcdefABCDEF",
        "octdigits" => "01234567",
        _ => return None,
    })
}

/// A deterministic stream of random bytes from the request id (a retried
/// create makes the same string; each new create a new one).
struct Draw {
    seed: String,
    counter: u64,
    buffer: Vec<u8>,
}

impl Draw {
    fn new(seed: &str) -> Draw {
        Draw {
            seed: seed.to_string(),
            counter: 0,
            buffer: Vec::new(),
        }
    }

    /// A uniform index below `n` (rejection sampling).
    fn below(&mut self, n: usize) -> usize {
        let limit = 256 - (256 % n.max(1));
        loop {
            if self.buffer.is_empty() {
                let block = Sha256::new()
                    .chain_update(self.seed.as_bytes())
                    .chain_update(self.counter.to_le_bytes())
                    .finalize();
                self.counter += 1;
                self.buffer = block.to_vec();
            }
            let b = self.buffer.pop().unwrap_or(0) as usize;
            if n <= 256 && b < limit {
                return b % n.max(1);
            }
        }
    }
}

/// `OS::Heat::RandomString`: `length` characters with at least `min` from
/// each character class and sequence, the rest from their union, shuffled.
fn random_string(p: &Map<String, Value>, seed: &str) -> Result<String, ProviderError> {
    let length = number_prop(p, "length").unwrap_or(32.0) as usize;
    if !(1..=512).contains(&length) {
        return Err(ProviderError::invalid_request(format!(
            "Property length: {length} is out of range (min: 1, max: 512)"
        )));
    }
    let mut pools: Vec<(Vec<char>, usize)> = Vec::new();
    if let Some(seq) = p.get("sequence").and_then(Value::as_str) {
        let chars = class_chars(seq).ok_or_else(|| {
            ProviderError::invalid_request(format!(
                "Property sequence: \"{seq}\" is not an allowed value"
            ))
        })?;
        pools.push((chars.chars().collect(), 0));
    }
    for c in p
        .get("character_classes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let class = c
            .get("class")
            .and_then(Value::as_str)
            .unwrap_or("lettersdigits");
        let chars = class_chars(class).ok_or_else(|| {
            ProviderError::invalid_request(format!("Property character_classes: class \"{class}\" is not an allowed value [lettersdigits, letters, lowercase, uppercase, digits, hexdigits, octdigits]"))
        })?;
        let min = c.get("min").and_then(Value::as_u64).unwrap_or(1) as usize;
        pools.push((chars.chars().collect(), min));
    }
    for s in p
        .get("character_sequences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let chars: Vec<char> = s
            .get("sequence")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .chars()
            .collect();
        if chars.is_empty() {
            return Err(ProviderError::invalid_request(
                "Property character_sequences: a sequence must not be empty",
            ));
        }
        let min = s.get("min").and_then(Value::as_u64).unwrap_or(1) as usize;
        pools.push((chars, min));
    }
    if pools.is_empty() {
        pools.push((
            class_chars("lettersdigits")
                .unwrap_or_default()
                .chars()
                .collect(),
            0,
        ));
    }
    let required: usize = pools.iter().map(|(_, m)| m).sum();
    if required > length {
        return Err(ProviderError::invalid_request(format!(
            "Length property cannot be smaller than combined character class and character sequence minimums (length {length}, minimums {required})"
        )));
    }
    let mut draw = Draw::new(seed);
    let mut out: Vec<char> = Vec::with_capacity(length);
    for (chars, min) in &pools {
        for _ in 0..*min {
            out.push(chars[draw.below(chars.len())]);
        }
    }
    let mut union: Vec<char> = pools.iter().flat_map(|(c, _)| c.iter().copied()).collect();
    union.sort_unstable();
    union.dedup();
    while out.len() < length {
        out.push(union[draw.below(union.len())]);
    }
    // Fisher–Yates, so the required characters are not all first.
    for i in (1..out.len()).rev() {
        let j = draw.below(i + 1);
        out.swap(i, j);
    }
    Ok(out.into_iter().collect())
}

#[async_trait::async_trait]
impl ResourceProvider for HeatTypes {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![
            ResourceSchema::new(NONE)
                .describe("does nothing: stubs out any other type (it accepts any properties)")
                .allow_additional_properties()
                .ref_returns("a generated id"),
            ResourceSchema::new(VALUE)
                .describe("a value, available as an attribute, typed")
                .property("value", PropertySchema::json().required())
                .property(
                    "type",
                    PropertySchema::string().allowing(&["string", "number", "comma_delimited_list", "json", "boolean"]),
                )
                .attribute("value", "the value, of its type")
                .ref_returns("a generated name"),
            ResourceSchema::new(RANDOM_STRING)
                .describe("a random string, from character classes and sequences")
                .property("length", PropertySchema::integer().create_only())
                .property(
                    "sequence",
                    PropertySchema::string()
                        .create_only()
                        .allowing(&["lettersdigits", "letters", "lowercase", "uppercase", "digits", "hexdigits", "octdigits"]),
                )
                .property("character_classes", PropertySchema::list(PropertyType::Json).create_only())
                .property("character_sequences", PropertySchema::list(PropertyType::Json).create_only())
                .property("salt", PropertySchema::string().create_only())
                .attribute("value", "the random string")
                .ref_returns("the random string"),
            ResourceSchema::new(TEST_RESOURCE)
                .describe("Heat's test resource: stores a value, waits, fails or replaces itself on demand")
                .property("value", PropertySchema::string())
                .property("update_replace", PropertySchema::boolean())
                .property("update_replace_value", PropertySchema::string())
                .property("fail", PropertySchema::boolean())
                .property("client_name", PropertySchema::string())
                .property("entity_name", PropertySchema::string())
                .property("wait_secs", PropertySchema::number())
                .property("action_wait_secs", PropertySchema::json())
                .property("attr_wait_secs", PropertySchema::number())
                .property("constraint_prop_secs", PropertySchema::number())
                .attribute("output", "the value stored")
                .ref_returns("its physical name"),
        ]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let ctx = &req.context;
        let p = &req.properties;
        let name = physical_name(&ctx.stack_name, &ctx.logical_resource_id, &ctx.request_id);
        let mut attributes = Map::new();
        let physical = match ctx.resource_type.as_str() {
            NONE => uuid_like(&ctx.request_id),
            VALUE => {
                attributes.insert("value".into(), typed_value(p)?);
                name
            }
            RANDOM_STRING => {
                let s = random_string(p, &ctx.request_id)?;
                attributes.insert("value".into(), Value::String(s.clone()));
                // Heat's Ref of a RandomString is the string itself.
                s
            }
            _ => {
                tokio::time::sleep(wait_for(p, "create")).await;
                if bool_prop(p, "fail") {
                    return Err(ProviderError::internal(format!(
                        "ValueError: resources.{0}: Test Resource failed {0}",
                        ctx.logical_resource_id
                    )));
                }
                attributes.insert(
                    "output".into(),
                    p.get("value")
                        .cloned()
                        .unwrap_or(Value::String("test_string".into())),
                );
                name
            }
        };
        Ok(CreateResult {
            physical_resource_id: physical,
            attributes,
            no_echo: false,
        })
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let ctx = &req.context;
        let p = &req.properties;
        let mut attributes = Map::new();
        let mut physical = None;
        match ctx.resource_type.as_str() {
            NONE => {}
            VALUE => {
                attributes.insert("value".into(), typed_value(p)?);
            }
            RANDOM_STRING => {
                attributes.insert(
                    "value".into(),
                    Value::String(req.physical_resource_id.clone()),
                );
            }
            _ => {
                let value_changed = p.get("value") != req.old_properties.get("value");
                if value_changed {
                    tokio::time::sleep(wait_for(p, "update")).await;
                    if bool_prop(p, "fail") {
                        return Err(ProviderError::internal(format!(
                            "ValueError: resources.{0}: Test Resource failed {0}",
                            ctx.logical_resource_id
                        )));
                    }
                    // update_replace: a new physical resource; the engine
                    // deletes the old one in cleanup.
                    if bool_prop(p, "update_replace") {
                        physical = Some(physical_name(
                            &ctx.stack_name,
                            &ctx.logical_resource_id,
                            &ctx.request_id,
                        ));
                    }
                }
                attributes.insert(
                    "output".into(),
                    p.get("value")
                        .cloned()
                        .unwrap_or(Value::String("test_string".into())),
                );
            }
        }
        Ok(UpdateResult {
            physical_resource_id: physical,
            attributes,
            no_echo: false,
        })
    }

    async fn check_drift(&self, _req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(DriftResult::NotChecked)
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        if req.context.resource_type == TEST_RESOURCE {
            tokio::time::sleep(wait_for(&req.properties, "delete")).await;
        }
        Ok(())
    }
}

/// A UUID-shaped id from the request id (OS::Heat::None's).
fn uuid_like(request_id: &str) -> String {
    let d = Sha256::digest(request_id.as_bytes());
    let h: String = d.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn random_strings_meet_their_minimums_and_follow_the_request() {
        let p: Map<String, Value> = serde_json::from_value(json!({
            "length": 12,
            "character_classes": [{"class": "digits", "min": 3}, {"class": "uppercase", "min": 2}],
            "character_sequences": [{"sequence": "!@", "min": 1}]
        }))
        .unwrap();
        let s = random_string(&p, "req-1").unwrap();
        assert_eq!(s.chars().count(), 12);
        assert!(s.chars().filter(char::is_ascii_digit).count() >= 3, "{s}");
        assert!(
            s.chars().filter(char::is_ascii_uppercase).count() >= 2,
            "{s}"
        );
        assert!(s.chars().any(|c| c == '!' || c == '@'), "{s}");
        assert_eq!(s, random_string(&p, "req-1").unwrap());
        assert_ne!(s, random_string(&p, "req-2").unwrap());
        let short: Map<String, Value> = serde_json::from_value(
            json!({"length": 2, "character_classes": [{"class": "digits", "min": 3}]}),
        )
        .unwrap();
        assert!(random_string(&short, "r")
            .unwrap_err()
            .message
            .contains("cannot be smaller"));
        let default = random_string(&Map::new(), "r").unwrap();
        assert_eq!(default.len(), 32);
    }

    #[test]
    fn values_take_their_type() {
        let p: Map<String, Value> =
            serde_json::from_value(json!({"value": "a,b", "type": "comma_delimited_list"}))
                .unwrap();
        assert_eq!(typed_value(&p).unwrap(), json!(["a", "b"]));
        let p: Map<String, Value> =
            serde_json::from_value(json!({"value": "{\"k\": 1}", "type": "json"})).unwrap();
        assert_eq!(typed_value(&p).unwrap(), json!({"k": 1}));
        let p: Map<String, Value> =
            serde_json::from_value(json!({"value": "nope", "type": "boolean"})).unwrap();
        assert!(typed_value(&p).is_err());
    }
}
