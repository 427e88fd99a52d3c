//! Wait condition handles, the part that lives with the callback
//! listener: the provider of the two wait condition types (a handle's
//! physical id is its signed URL on the listener) and the intake of a
//! signal PUT to that URL, kept in the store before it is acknowledged.
//! The engine waits for the kept signals (`engine::signals`); nothing
//! here knows the engine.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ErrorKind,
    ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};

use super::callback::Callbacks;
use cairn_model::signal::{self, Signal, WAIT_CONDITION_HANDLE};
use cairn_model::stack::{now, ResourceStatus, SignalRecord};
use cairn_store::{Store, StoreError};

/// Why a signal was refused.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// Keeps a signal PUT to a wait condition handle's URL, once the handle is
/// known to exist.
pub async fn accept_handle_signal(
    store: &dyn Store,
    stack_id: &str,
    logical_id: &str,
    body: &[u8],
) -> Result<(), SignalError> {
    let gone = || {
        SignalError::NotFound(format!(
            "the wait condition handle {logical_id} of stack {stack_id} does not exist (its stack or the handle was deleted)"
        ))
    };
    let stack = store.find_stack(stack_id).await?.ok_or_else(gone)?;
    if stack.status == cairn_model::stack::StackStatus::DeleteComplete {
        return Err(gone());
    }
    let rows = store.resources(&stack.stack_id).await?;
    let live = rows.iter().any(|r| {
        r.logical_id == logical_id
            && r.resource_type == WAIT_CONDITION_HANDLE
            && !matches!(
                r.status,
                ResourceStatus::DeleteComplete | ResourceStatus::DeleteInProgress
            )
    });
    if !live {
        return Err(gone());
    }
    let kept = store.signals(&stack.stack_id, logical_id).await?.len();
    let signal = Signal::parse(body, || (kept + 1).to_string()).map_err(SignalError::Invalid)?;
    store
        .put_signal(&SignalRecord {
            stack_id: stack.stack_id.clone(),
            logical_id: logical_id.to_string(),
            unique_id: signal.unique_id,
            status: signal.status.as_str().into(),
            reason: signal.reason,
            data: signal.data,
            received_at: now(),
        })
        .await?;
    Ok(())
}

/// The provider behind the two wait condition types (`engine:signals`):
/// a handle is its URL; a wait condition is a name, the engine does the
/// waiting. Neither has anything outside the store to delete or drift.
pub struct SignalTypes {
    /// The process's listener, which a handle's URL names.
    callbacks: Arc<Callbacks>,
}

impl SignalTypes {
    pub fn new(callbacks: Arc<Callbacks>) -> SignalTypes {
        SignalTypes { callbacks }
    }
}

#[async_trait]
impl ResourceProvider for SignalTypes {
    fn schema(&self) -> Vec<ResourceSchema> {
        signal::schemas()
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let ctx = &req.context;
        let physical = if ctx.resource_type == WAIT_CONDITION_HANDLE {
            let listener = self.callbacks.listener().await.map_err(|e| {
                ProviderError::new(
                    ErrorKind::InternalFailure,
                    format!("a wait condition handle needs the callback listener: {e}"),
                )
            })?;
            listener.handle_url(&ctx.stack_id, &ctx.logical_resource_id)
        } else {
            format!("{}/{}", ctx.stack_id, ctx.logical_resource_id)
        };
        let mut attributes = Map::new();
        if ctx.resource_type == WAIT_CONDITION_HANDLE {
            attributes.insert("endpoint".into(), Value::String(physical.clone()));
            attributes.insert(
                "curl_cli".into(),
                Value::String(format!(
                    "curl -i -X POST -H 'Content-Type: application/json' -H 'Accept: application/json' '{physical}'"
                )),
            );
            let token = physical
                .split_once("Signature=")
                .map(|(_, s)| s.to_string())
                .unwrap_or_default();
            attributes.insert("token".into(), Value::String(token));
        }
        Ok(CreateResult {
            physical_resource_id: physical,
            attributes,
            no_echo: false,
        })
    }

    /// Every property is CreateOnly: nothing changes in place.
    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes: Map::new(),
            no_echo: false,
        })
    }

    async fn check_drift(&self, _req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(DriftResult::InSync)
    }

    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Ok(())
    }
}
