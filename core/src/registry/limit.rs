//! What a `[[providers]]` entry adds to each call: its time limit
//! (`timeout_seconds`: the limit is the call's deadline, and the call fails
//! when it passes) and its `settings` (the request context's
//! `provider_settings`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_sdk::{
    Cancellation, CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, Health,
    MacroRequest, MacroResponse, ProviderError, ReadRequest, ReadResult, RequestContext,
    ResourceProvider, ResourceSchema, StatusRequest, UpdateRequest, UpdateResult,
};

/// `inner`, with each call limited to `limit` and given `settings`.
pub struct EntryCalls<P: ?Sized> {
    pub name: String,
    pub limit: Option<Duration>,
    pub settings: Option<serde_json::Value>,
    pub inner: std::sync::Arc<P>,
}

impl<P: ResourceProvider + ?Sized> EntryCalls<P> {
    /// The request's context with the deadline moved in to the limit and
    /// the entry's settings.
    fn context(&self, ctx: &RequestContext) -> RequestContext {
        let mut c = ctx.clone();
        if let Some(limit) = self.limit {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            c.deadline_unix_ms = c
                .deadline_unix_ms
                .min(now.saturating_add(limit.as_millis() as u64));
        }
        if self.settings.is_some() {
            c.provider_settings = self.settings.clone();
        }
        c
    }

    async fn limited<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let Some(limit) = self.limit else {
            return call.await;
        };
        tokio::time::timeout(limit, call).await.unwrap_or_else(|_| {
            Err(ProviderError::timeout(format!(
                "provider {} did not answer within {} seconds (timeout_seconds of its [[providers]] entry)",
                self.name,
                limit.as_secs()
            )))
        })
    }
}

#[async_trait::async_trait]
impl<P: ResourceProvider + ?Sized> ResourceProvider for EntryCalls<P> {
    fn schema(&self) -> Vec<ResourceSchema> {
        self.inner.schema()
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.create(&r)).await
    }

    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.recover_create(&r)).await
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.update(&r)).await
    }

    async fn cancel_create(&self, req: &CreateRequest) -> Result<Cancellation, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.cancel_create(&r)).await
    }

    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.recover_update(&r)).await
    }

    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.recover_delete(&r)).await
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.delete(&r)).await
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.check_drift(&r)).await
    }

    async fn check_status(&self, req: &StatusRequest) -> Result<Health, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.check_status(&r)).await
    }

    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        let mut r = req.clone();
        r.context = self.context(&req.context);
        self.limited(self.inner.read(&r)).await
    }

    async fn transform(&self, req: &MacroRequest) -> Result<MacroResponse, ProviderError> {
        self.limited(self.inner.transform(req)).await
    }

    async fn hook(
        &self,
        req: &cairn_sdk::HookRequest,
    ) -> Result<cairn_sdk::HookProgress, ProviderError> {
        self.limited(self.inner.hook(req)).await
    }
}
