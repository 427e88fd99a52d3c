//! A [`Hook`] served as a provider: what a hook's library exports.

use crate::hook::{dispatch, Hook, HookProgress, HookRequest};
use crate::{
    CreateRequest, CreateResult, DeleteRequest, ProviderError, ResourceProvider, ResourceSchema,
    UpdateRequest, UpdateResult,
};

/// A [`Hook`] served as a provider (what [`export_hook!`](crate::export_hook)
/// exports): its one "schema" names the hook type, so a registration checks
/// the library serves the type it registers; it makes no resources.
pub struct HookServer<H> {
    type_name: String,
    hook: H,
}

impl<H: Hook> HookServer<H> {
    pub fn new(type_name: impl Into<String>, hook: H) -> Self {
        HookServer {
            type_name: type_name.into(),
            hook,
        }
    }
}

/// The description a hook's schema carries (so a hook's library is never
/// taken for a resource provider).
pub const HOOK_SCHEMA_DESCRIPTION: &str =
    "a hook (CloudFormation's HOOK type): it judges targets, it makes no resources";

fn not_a_resource(type_name: &str) -> ProviderError {
    ProviderError::invalid_request(format!(
        "{type_name} is a hook: it judges resources, it makes none"
    ))
}

#[async_trait::async_trait]
impl<H: Hook> ResourceProvider for HookServer<H> {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new(&self.type_name).describe(HOOK_SCHEMA_DESCRIPTION)]
    }

    async fn create(&self, _req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        Err(not_a_resource(&self.type_name))
    }

    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Err(not_a_resource(&self.type_name))
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Err(not_a_resource(&self.type_name))
    }

    async fn hook(&self, req: &HookRequest) -> Result<HookProgress, ProviderError> {
        Ok(dispatch(&self.hook, req).await)
    }
}
