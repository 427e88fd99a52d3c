//! Every built-in refuses a call whose deadline has passed before it starts
//! it, as plugins made with the SDK do (`cairn_sdk::plugin::Call::run`): the
//! engine has stopped waiting, and a resource made now would be recorded by
//! nobody.

use std::sync::Arc;

use cairn_sdk::{
    Cancellation, CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, Health,
    ProviderError, ReadRequest, ReadResult, ResourceProvider, ResourceSchema, StatusRequest,
    UpdateRequest, UpdateResult,
};

/// `inner`, checking each request's deadline first.
pub struct Deadlined(pub Arc<dyn ResourceProvider>);

#[async_trait::async_trait]
impl ResourceProvider for Deadlined {
    fn schema(&self) -> Vec<ResourceSchema> {
        self.0.schema()
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        req.context.check_deadline("Create")?;
        self.0.create(req).await
    }

    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        req.context.check_deadline("Create")?;
        self.0.recover_create(req).await
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        req.context.check_deadline("Update")?;
        self.0.update(req).await
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        req.context.check_deadline("Delete")?;
        self.0.delete(req).await
    }

    // A cancellation is never refused for lateness: it undoes work.
    async fn cancel_create(&self, req: &CreateRequest) -> Result<Cancellation, ProviderError> {
        self.0.cancel_create(req).await
    }

    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        req.context.check_deadline("Update")?;
        self.0.recover_update(req).await
    }

    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        req.context.check_deadline("Delete")?;
        self.0.recover_delete(req).await
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        req.context.check_deadline("CheckDrift")?;
        self.0.check_drift(req).await
    }

    async fn check_status(&self, req: &StatusRequest) -> Result<Health, ProviderError> {
        req.context.check_deadline("CheckStatus")?;
        self.0.check_status(req).await
    }

    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        req.context.check_deadline("Read")?;
        self.0.read(req).await
    }
}

#[cfg(test)]
mod tests {
    use cairn_sdk::{CreateRequest, ErrorKind, RequestContext};
    use serde_json::json;

    #[tokio::test]
    async fn every_builtin_refuses_a_call_past_its_deadline_and_makes_nothing() {
        let dir = std::env::temp_dir().join(format!("cairn-deadline-{}", std::process::id()));
        for (name, p) in crate::builtins(&dir) {
            let Some(schema) = p.schema().into_iter().next() else {
                continue;
            };
            let req = CreateRequest {
                context: RequestContext {
                    stack_id: "s".into(),
                    stack_name: "s".into(),
                    logical_resource_id: "R".into(),
                    resource_type: schema.type_name.clone(),
                    request_id: "late".into(),
                    deadline_unix_ms: 1,
                    tags: Default::default(),
                    provider_settings: None,
                },
                properties: json!({"Value": "v"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            };
            let e = p.create(&req).await.expect_err(name);
            assert_eq!(e.kind, ErrorKind::Timeout, "{name}: {e}");
            assert!(
                e.message
                    .starts_with("the deadline of request late (Create R of "),
                "{name}: {e}"
            );
        }
        assert!(!dir.join("test-resources").exists());
    }
}
