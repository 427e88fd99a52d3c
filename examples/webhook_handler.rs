//! A custom-resource webhook handler written with Cairn's handler kit.
//!
//! It serves `Custom::Greeting`: properties `Name` (required, CreateOnly)
//! and `Excited` (Boolean); attribute `Message`. Changing `Name` makes a new
//! greeting: served as a `[[providers]]` webhook, whose schema Cairn reads,
//! Cairn replaces it (a create, then the old one deleted in cleanup); as a
//! custom-resource endpoint it receives an Update and answers with a new
//! PhysicalResourceId, and Cairn deletes the old one in cleanup as
//! CloudFormation does. Changing `Excited` updates it in place. Drift: a greeting the handler no
//! longer holds (it keeps them in memory) is DELETED. The same provider could be built
//! into Cairn or loaded as a plugin: only this `main` is webhook-specific.
//!
//! ```text
//! cargo run --example webhook_handler -- --listen 127.0.0.1:8080 --secret s3cret
//! ```
//! and in cairn.toml:
//! ```toml
//! [webhooks.endpoints.greetings]
//! url = "http://127.0.0.1:8080/"
//! secret = "s3cret"
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cairn_sdk::serde_json::{json, Map, Value};
use cairn_sdk::webhook::WebhookHandler;
use cairn_sdk::{
    async_trait, CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult,
    PropertyDifference, PropertySchema, ProviderError, ReadRequest, ReadResult, ResourceProvider,
    ResourceSchema, UpdateRequest, UpdateResult,
};

/// Greetings kept in memory, by physical id.
#[derive(Default)]
struct Greetings {
    made: Mutex<BTreeMap<String, String>>,
}

fn message(props: &Map<String, Value>) -> Result<(String, String), ProviderError> {
    let name = props
        .get("Name")
        .and_then(Value::as_str)
        .ok_or_else(|| ProviderError::invalid_request("Name is required"))?;
    let excited = props
        .get("Excited")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let text = format!("Hello, {name}{}", if excited { "!" } else { "." });
    Ok((format!("greeting-{name}"), text))
}

impl Greetings {
    fn put(&self, id: &str, text: &str) -> Map<String, Value> {
        if let Ok(mut m) = self.made.lock() {
            m.insert(id.to_string(), text.to_string());
        }
        let mut attrs = Map::new();
        attrs.insert("Message".into(), json!(text));
        attrs
    }
}

#[async_trait]
impl ResourceProvider for Greetings {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new("Custom::Greeting")
            .property("Name", PropertySchema::string().required().create_only())
            .property("Excited", PropertySchema::boolean())
            .attribute("Message", "the greeting")]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let (id, text) = message(&req.properties)?;
        Ok(CreateResult {
            attributes: self.put(&id, &text),
            physical_resource_id: id,
            no_echo: false,
        })
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let (id, text) = message(&req.properties)?;
        Ok(UpdateResult {
            attributes: self.put(&id, &text),
            // A new name is a new greeting: the old id is deleted by Cairn.
            physical_resource_id: Some(id),
            no_echo: false,
        })
    }

    /// A greeting this handler does not hold (it forgets all when restarted)
    /// is DELETED; otherwise the stored message is compared with the one the
    /// properties make.
    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        let stored = self
            .made
            .lock()
            .ok()
            .and_then(|m| m.get(&req.physical_resource_id).cloned());
        let Some(stored) = stored else {
            return Ok(DriftResult::Deleted);
        };
        let (_, expected) = message(&req.properties)?;
        let mut want = Map::new();
        want.insert("Message".into(), json!(expected));
        let mut have = Map::new();
        have.insert("Message".into(), json!(stored));
        Ok(DriftResult::from_differences(PropertyDifference::compare(
            &want, &have,
        )))
    }

    /// A greeting it holds, its properties told by its id and message; one
    /// it does not hold is NotFound.
    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        let id = &req.physical_resource_id;
        let stored = self.made.lock().ok().and_then(|m| m.get(id).cloned());
        let (Some(text), Some(name)) = (stored, id.strip_prefix("greeting-")) else {
            return Err(ProviderError::not_found(format!("no greeting {id}")));
        };
        let mut properties = Map::new();
        properties.insert("Name".into(), json!(name));
        properties.insert("Excited".into(), json!(text.ends_with('!')));
        let mut attributes = Map::new();
        attributes.insert("Message".into(), json!(text));
        Ok(ReadResult::Found {
            properties,
            attributes,
        })
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        if let Ok(mut m) = self.made.lock() {
            m.remove(&req.physical_resource_id);
        }
        Ok(())
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listen = arg("--listen").unwrap_or_else(|| "127.0.0.1:8080".into());
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    // Tests read the port of `--listen 127.0.0.1:0` from here.
    println!("listening on {}", listener.local_addr()?);
    let mut handler = WebhookHandler::new(Arc::new(Greetings::default()))
        .secret(arg("--secret").unwrap_or_default());
    if std::env::args().any(|a| a == "--respond-in-reply") {
        handler = handler.respond_in_reply();
    }
    handler.serve(listener).await
}
