//! `Test::Unruly::Thing`: property `Behavior` decides what a create does:
//! `ok` (succeeds), `panic`, `abort` (`std::process::abort`), or `slow`
//! (sleeps `Seconds`, then appends `finished` to the file `Marker`, or
//! `cancelled` if the call is cancelled first). Updates and deletes always succeed.

use cairn_sdk::serde_json::{Map, Value};
use cairn_sdk::{
    async_trait, export_provider, CreateRequest, CreateResult, DeleteRequest, PropertySchema,
    ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};

#[derive(Default)]
struct Unruly;

/// Writes its word to its file when dropped.
struct Marker(String, &'static str);

impl Drop for Marker {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.0)
            {
                let _ = writeln!(f, "{}", self.1);
            }
        }
    }
}

fn text<'a>(props: &'a Map<String, Value>, key: &str) -> &'a str {
    props.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[async_trait]
impl ResourceProvider for Unruly {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new("Test::Unruly::Thing")
            .property("Behavior", PropertySchema::string().required())
            .property("Seconds", PropertySchema::number())
            .property("Marker", PropertySchema::string())]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        match text(&req.properties, "Behavior") {
            "panic" => panic!("the unruly plugin was told to panic"),
            "abort" => std::process::abort(),
            "slow" => {
                let secs = req
                    .properties
                    .get("Seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(30.0);
                // Dropped unfinished (the call was cancelled): says so.
                let mut marker = Marker(text(&req.properties, "Marker").to_string(), "cancelled");
                tokio::time::sleep(std::time::Duration::from_secs_f64(secs)).await;
                marker.1 = "finished";
            }
            _ => {}
        }
        Ok(CreateResult {
            physical_resource_id: format!("unruly-{}", req.context.logical_resource_id),
            attributes: Map::new(),
            no_echo: false,
        })
    }

    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Ok(UpdateResult::default())
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Ok(())
    }
}

export_provider!(Unruly::default);
