//! `Cairn::Random::String`: a random string generated once and kept until a
//! CreateOnly property (Length, Characters, Keepers) changes.

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, PropertySchema, ProviderError, ResourceProvider,
    ResourceSchema, UpdateRequest, UpdateResult,
};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub const TYPE_NAME: &str = "Cairn::Random::String";

const DEFAULT_CHARACTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Props {
    #[serde(default)]
    length: Option<i64>,
    #[serde(default)]
    characters: Option<String>,
}

/// Draws the string from the request id (a v4 UUID from the OS's random source,
/// 122 random bits) through SHA-256: a retried create (same request id) gets the
/// same value, every new create a fresh one. Rejection sampling keeps the
/// distribution uniform over `characters`.
fn generate(request_id: &str, length: usize, characters: &[char]) -> String {
    let n = characters.len();
    let limit = 256 - (256 % n);
    let mut out = String::with_capacity(length);
    let mut counter: u64 = 0;
    while out.chars().count() < length {
        let block = Sha256::new()
            .chain_update(request_id.as_bytes())
            .chain_update(counter.to_le_bytes())
            .finalize();
        counter += 1;
        for b in block.iter() {
            if (*b as usize) < limit && out.chars().count() < length {
                out.push(characters[(*b as usize) % n]);
            }
        }
    }
    out
}

#[derive(Default)]
pub struct RandomStringProvider;

#[async_trait::async_trait]
impl ResourceProvider for RandomStringProvider {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new(TYPE_NAME)
            .describe("A random string, generated once")
            .property(
                "Length",
                PropertySchema::integer()
                    .create_only()
                    .describe("1 to 4096; default 16"),
            )
            .property(
                "Characters",
                PropertySchema::string()
                    .create_only()
                    .describe("the alphabet; default A-Za-z0-9"),
            )
            .property(
                "Keepers",
                PropertySchema::json()
                    .create_only()
                    .describe("any values; changing them makes a new string"),
            )
            .attribute("Value", "the random string")
            .ref_returns("the physical id (not the value)")]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let p: Props = req.properties()?;
        let length = p.length.unwrap_or(16);
        if !(1..=4096).contains(&length) {
            return Err(ProviderError::invalid_request(format!(
                "Length must be between 1 and 4096, got {length}"
            )));
        }
        let mut chars: Vec<char> = p
            .characters
            .as_deref()
            .unwrap_or(DEFAULT_CHARACTERS)
            .chars()
            .collect();
        chars.sort_unstable();
        chars.dedup();
        if chars.is_empty() || chars.len() > 256 {
            return Err(ProviderError::invalid_request(
                "Characters must hold 1 to 256 distinct characters",
            ));
        }
        let value = generate(&req.context.request_id, length as usize, &chars);
        let ctx = &req.context;
        let id_suffix = generate(
            &format!("id:{}", ctx.request_id),
            12,
            &DEFAULT_CHARACTERS.chars().collect::<Vec<_>>(),
        );
        let mut attributes = Map::new();
        attributes.insert("Value".into(), Value::String(value));
        Ok(CreateResult {
            physical_resource_id: format!(
                "{}-{}-{id_suffix}",
                ctx.stack_name, ctx.logical_resource_id
            ),
            attributes,
            no_echo: false,
        })
    }

    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        // Every property is CreateOnly: the engine replaces instead of updating.
        Err(ProviderError::not_updatable(format!(
            "{TYPE_NAME} cannot be updated in place; every property change makes a new string"
        )))
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        // Nothing outside the engine's state holds the string.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_per_request_and_within_the_alphabet() {
        let abc: Vec<char> = "abc".chars().collect();
        let a = generate("req-1", 40, &abc);
        assert_eq!(a.len(), 40);
        assert!(a.chars().all(|c| abc.contains(&c)));
        assert_eq!(a, generate("req-1", 40, &abc));
        assert_ne!(a, generate("req-2", 40, &abc));
    }
}
