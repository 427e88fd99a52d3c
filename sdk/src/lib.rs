//! `cairn-sdk`: the contract between Cairn's engine and a resource provider.
//!
//! A provider serves one or more resource types. It declares a [`ResourceSchema`]
//! per type (properties with their update behaviour, attributes, what `Ref` returns)
//! and implements [`ResourceProvider`]. The same implementation runs built into the
//! engine, loaded from a dynamic library, or behind a webhook: every transport moves
//! the JSON form of the request and result types defined here.
//!
//! This crate is deliberately light: no engine internals, no runtime, no I/O.

pub mod custom_resource;
mod error;
pub mod hook;
pub mod hook_server;
pub mod macros;
#[cfg(feature = "plugin")]
pub mod plugin;
mod provider;
mod schema;
#[cfg(feature = "webhook")]
pub mod webhook;

pub use error::{ErrorKind, ProviderError};
pub use hook::{Hook, HookProgress, HookRequest, HookTargetType};
pub use hook_server::{HookServer, HOOK_SCHEMA_DESCRIPTION};
pub use macros::{MacroRequest, MacroResponse};
pub use provider::{
    Cancellation, CreateRequest, CreateResult, DeleteRequest, DifferenceType, DriftRequest,
    DriftResult, Health, PropertyDifference, ReadRequest, ReadResult, RequestContext,
    ResourceProvider, ResourceTags, StatusRequest, UpdateRequest, UpdateResult,
};
pub use schema::{
    is_unresolved_intrinsic, AttributeSchema, IdentifierError, PropertySchema, PropertyType,
    ResourceSchema, SchemaError, UpdateBehavior,
};

/// Re-exported so `#[cairn_sdk::async_trait]` works without a direct dependency.
pub use async_trait::async_trait;
/// Re-exported so provider authors use the same `serde_json` as their requests.
pub use serde_json;
