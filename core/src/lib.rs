//! `cairn-core`: Cairn's engine: the registry (types → providers, the
//! transports wired in) and the engine that runs stack operations over the
//! resource-call protocol.
//!
//! See ARCHITECTURE.md for the map. The template language (`template`) and
//! the stack model (`stack`, `graph`, `plan`, `validate`, …) are their own
//! pure crates; the store (`store`) and the plugin and webhook transports
//! (`plugin`, `webhook`) are their own crates too. All are re-exported here
//! at their old paths. No `unsafe` here: the C ABI of plugins is
//! `cairn-plugin`'s.

#![forbid(unsafe_code)]

pub mod config;
pub mod contract;
pub mod engine;
pub mod metrics;
pub mod nested;
/// The plugin transport, its own crate; re-exported at its old path.
pub use cairn_plugin as plugin;
#[cfg(test)]
mod proptests;
pub mod registry;
pub mod shared;
/// Durable state, its own crate; re-exported at its old path.
pub use cairn_store as store;
#[cfg(test)]
mod validate_tests;
/// The stack model, its own crate (pure); re-exported at the old paths.
pub use cairn_model::{catalog, graph, group, plan, signal, stack, validate};
/// The template language, its own crate (pure: no I/O); re-exported at
/// its old path.
pub use cairn_template as template;
/// The webhook transport, its own crate; re-exported at its old path.
pub use cairn_webhook as webhook;
