//! A `[[providers]] kind = "webhook"` entry: a remote handler that serves
//! ordinary resource types (not only `Custom::`) over the custom-resource
//! protocol. Its types and schemas come from its `GET /schema`; every request
//! carries the handler's URL as `ServiceToken`, so the same delivery,
//! signing, callback and timeout machinery as custom resources applies.

use std::sync::Arc;

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ProviderError,
    ReadRequest, ReadResult, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};

use super::callback::Callbacks;
use super::{WebhookError, WebhookProvider};
use crate::config::{EndpointConfig, WebhookConfig};
use crate::delivery::DeliveryCounter;

/// A remote provider.
pub struct RemoteProvider {
    url: String,
    schemas: Vec<ResourceSchema>,
    inner: Arc<WebhookProvider>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SchemaList {
    schemas: Vec<ResourceSchema>,
}

impl RemoteProvider {
    /// Reads the schemas of the handler at `endpoint` (its url, secret,
    /// CA bundle and whether it is asked for drift) and prepares delivery
    /// to it; responses come to `callbacks`' listener.
    pub async fn connect(
        name: &str,
        endpoint: EndpointConfig,
        webhooks: &WebhookConfig,
        callbacks: Arc<Callbacks>,
        metrics: Arc<dyn DeliveryCounter>,
    ) -> Result<RemoteProvider, WebhookError> {
        let url = endpoint.url.clone();
        let ca_bundle = endpoint.ca_bundle.clone();
        let mut config = webhooks.clone();
        config.endpoints.insert(name.to_string(), endpoint);
        let inner = Arc::new(WebhookProvider::new(&config, callbacks, metrics)?);
        let client = super::tls::client(ca_bundle.as_deref(), name)?;
        let schema_url = format!("{}/schema", url.trim_end_matches('/'));
        let fail = |e: String| {
            WebhookError::Config(format!(
                "webhook provider {name}: cannot read its types from {schema_url}: {e}"
            ))
        };
        let reply = client
            .get(&schema_url)
            .timeout(std::time::Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| fail(super::delivery::describe(&e)))?;
        if !reply.status().is_success() {
            return Err(fail(format!("HTTP {}", reply.status())));
        }
        let body = reply.bytes().await.map_err(|e| fail(e.to_string()))?;
        let list: SchemaList = serde_json::from_slice(&body).map_err(|e| fail(e.to_string()))?;
        Ok(RemoteProvider {
            url: url.to_string(),
            schemas: list.schemas,
            inner,
        })
    }

    /// `props` with the handler as ServiceToken.
    fn addressed(&self, props: &Map<String, Value>) -> Map<String, Value> {
        let mut p = props.clone();
        p.insert("ServiceToken".into(), Value::String(self.url.clone()));
        p
    }
}

impl RemoteProvider {
    fn addressed_update(&self, req: &UpdateRequest) -> UpdateRequest {
        let mut r = req.clone();
        r.properties = self.addressed(&req.properties);
        r.old_properties = self.addressed(&req.old_properties);
        r
    }
}

#[async_trait::async_trait]
impl ResourceProvider for RemoteProvider {
    fn schema(&self) -> Vec<ResourceSchema> {
        self.schemas.clone()
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let mut r = req.clone();
        r.properties = self.addressed(&req.properties);
        self.inner.create(&r).await
    }

    // A handler is never sent a request twice: what a request in flight
    // made is learnt from its kept response, as for any custom resource.
    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let mut r = req.clone();
        r.properties = self.addressed(&req.properties);
        self.inner.recover_create(&r).await
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        self.inner.update(&self.addressed_update(req)).await
    }

    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        self.inner.recover_update(&self.addressed_update(req)).await
    }

    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let mut r = req.clone();
        r.properties = self.addressed(&req.properties);
        self.inner.recover_delete(&r).await
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        let mut r = req.clone();
        r.properties = self.addressed(&req.properties);
        self.inner.check_drift(&r).await
    }

    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        self.inner.read_at(req, &self.addressed(&Map::new())).await
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let mut r = req.clone();
        r.properties = self.addressed(&req.properties);
        self.inner.delete(&r).await
    }
}
