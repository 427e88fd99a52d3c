//! Resource types the engine serves itself, behind the protocol's seam.
//!
//! A group runs its members and a nested stack runs its child stack
//! through the store and the registry, so no provider can serve them. The
//! protocol ([`super::protocol`]) sends their calls here instead of to a
//! provider; everything else about the call (its request id recorded
//! first, the outcome, the rule for an unknown one, retention) is the
//! protocol's, as for any resource. A new engine-served type is a variant
//! of [`EngineServed`], named in [`Protocol::served_by_engine`].

use cairn_sdk::{CreateResult, ProviderError, UpdateResult};
use serde_json::{Map, Value};

use super::{Op, Protocol};
use crate::stack::ResourceRecord;

/// A resource type the engine serves itself. A create is idempotent for
/// its request id (the same group or child stack is found again), so a
/// resumed create is simply run again, and a cancellation is never
/// confirmed (the engine learns these from its own state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EngineServed {
    /// Instance and resource groups: their members are converged.
    Group,
    /// Nested stacks: the child stack is created, updated or deleted.
    NestedStack,
    /// Hooks defined in templates: kept in the type registry.
    Hook,
}

/// One update of an engine-served resource.
pub(super) struct Update<'a> {
    pub rec: &'a ResourceRecord,
    pub physical_id: &'a str,
    pub request_id: &'a str,
    pub properties: &'a Map<String, Value>,
    pub old_properties: &'a Map<String, Value>,
}

impl EngineServed {
    pub(super) async fn create(
        self,
        protocol: &Protocol<'_>,
        op: &Op,
        r: &ResourceRecord,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        match self {
            Self::Group => protocol.groups().group_create(op, r, request_id).await,
            Self::NestedStack => {
                protocol
                    .nested_stacks()
                    .nested_create(op, r, request_id)
                    .await
            }
            Self::Hook => protocol.hooks().hook_create(r, request_id).await,
        }
    }

    pub(super) async fn update(
        self,
        protocol: &Protocol<'_>,
        op: &Op,
        call: Update<'_>,
    ) -> Result<UpdateResult, ProviderError> {
        match self {
            Self::Group => {
                let (old, new) = (call.old_properties, call.properties);
                protocol
                    .groups()
                    .group_update(op, call.rec, call.physical_id, new, old)
                    .await
            }
            Self::NestedStack => {
                protocol
                    .nested_stacks()
                    .nested_update(
                        op,
                        call.rec,
                        call.physical_id,
                        call.properties,
                        call.request_id,
                    )
                    .await
            }
            Self::Hook => {
                protocol
                    .hooks()
                    .hook_update(call.rec, call.physical_id, call.properties, call.request_id)
                    .await
            }
        }
    }

    pub(super) async fn delete(
        self,
        protocol: &Protocol<'_>,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
    ) -> Result<(), ProviderError> {
        match self {
            Self::Group => protocol.groups().group_delete(op, r, physical).await,
            Self::NestedStack => protocol.nested_stacks().nested_delete(op, physical).await,
            Self::Hook => protocol.hooks().hook_delete(physical).await,
        }
    }
}
