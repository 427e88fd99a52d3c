//! `Test::Broken::Thing`: a provider that breaks the contract in exactly
//! these ways, each caught by one named test of `cairn provider test`:
//! - a create repeated with the same request id makes a second thing
//!   (`create_repeated_request_id_same_resource`);
//! - the declared attribute `Arn` is never returned
//!   (`create_returns_id_and_attributes`);
//! - an update of the Mutable `Size` answers with a new physical id
//!   (`update_in_place[Size]`);
//! - `Size` above 100 is accepted (`invalid_properties_refused`);
//! - deleting a deleted thing is an InternalFailure
//!   (`delete_again_not_found_or_success`).
//!
//! Everything else (drift, replacement, the deadline, which the SDK checks)
//! keeps the contract.

use std::collections::BTreeMap;
use std::sync::Mutex;

use cairn_sdk::serde_json::{Map, Value};
use cairn_sdk::{
    async_trait, export_provider, CreateRequest, CreateResult, DeleteRequest, DriftRequest,
    DriftResult, PropertyDifference, PropertySchema, ProviderError, ResourceProvider,
    ResourceSchema, UpdateRequest, UpdateResult,
};

#[derive(Default)]
struct Broken {
    /// physical id -> properties
    things: Mutex<BTreeMap<String, Map<String, Value>>>,
    made: Mutex<u64>,
}

impl Broken {
    fn fresh_id(&self, props: &Map<String, Value>) -> String {
        let mut n = self.made.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        let name = props.get("Name").and_then(Value::as_str).unwrap_or("thing");
        format!("{name}-{n}")
    }
}

#[async_trait]
impl ResourceProvider for Broken {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new("Test::Broken::Thing")
            .property("Name", PropertySchema::string().required().create_only())
            .property("Size", PropertySchema::integer())
            .attribute("Arn", "never returned")]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        // Ignores the request id: every create makes a new thing.
        let id = self.fresh_id(&req.properties);
        self.things
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), req.properties.clone());
        Ok(CreateResult {
            physical_resource_id: id,
            attributes: Map::new(),
            no_echo: false,
        })
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let mut things = self.things.lock().unwrap_or_else(|e| e.into_inner());
        if things.remove(&req.physical_resource_id).is_none() {
            return Err(ProviderError::not_found(format!(
                "thing {} does not exist",
                req.physical_resource_id
            )));
        }
        let moved = format!("{}-moved", req.physical_resource_id);
        things.insert(moved.clone(), req.properties.clone());
        Ok(UpdateResult {
            physical_resource_id: Some(moved),
            ..Default::default()
        })
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        match self
            .things
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&req.physical_resource_id)
        {
            Some(_) => Ok(()),
            None => Err(ProviderError::internal(format!(
                "cannot delete {}: it is not there",
                req.physical_resource_id
            ))),
        }
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        let things = self.things.lock().unwrap_or_else(|e| e.into_inner());
        Ok(match things.get(&req.physical_resource_id) {
            None => DriftResult::Deleted,
            Some(actual) => {
                DriftResult::from_differences(PropertyDifference::compare(&req.properties, actual))
            }
        })
    }
}

export_provider!(Broken::default);
