//! `cairn-core`: Cairn's engine: the registry (types → providers) and the
//! engine that runs stack operations over the resource-call protocol.
//!
//! See ARCHITECTURE.md for the map. The template language (`template`),
//! the configuration (`config`) and the stack model (`stack`, `graph`,
//! `plan`, `validate`, …) are their own pure crates, and the store
//! (`store`) is its own crate too; all are re-exported here at their old
//! paths. The transports (plugins, webhooks) are not known here: the binary
//! wires them into the registry and hands the engine what it needs of them
//! as values (`shared`).

#![forbid(unsafe_code)]

/// `cairn.toml`, its own crate; re-exported at its old path.
pub use cairn_config as config;
pub mod contract;
pub mod engine;
pub mod guard;
pub mod http;
pub mod metrics;
pub mod nested;
#[cfg(test)]
mod proptests;
pub mod registry;
pub mod shared;
pub mod shown;
/// Durable state, its own crate; re-exported at its old path.
pub use cairn_store as store;
#[cfg(test)]
mod validate_tests;
/// The type registry's records (the model's `registry`; `registry` here
/// is the provider registry).
pub use cairn_model::registry as type_registry;
/// The stack model, its own crate (pure); re-exported at the old paths.
pub use cairn_model::{
    audit, catalog, graph, group, hooks, import, macros, notifications, operation, plan, refactor,
    rollback_triggers, signal, stack, stack_policy, validate,
};
/// The template language, its own crate (pure: no I/O); re-exported at
/// its old path.
pub use cairn_template as template;
