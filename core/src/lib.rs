//! `cairn-core`: Cairn's engine.
//!
//! See ARCHITECTURE.md for the map: `template` (parse, validate, evaluate),
//! `graph` (dependencies and scheduling order), `registry` (types → providers),
//! `validate` (template checks against provider schemas).

pub mod config;
pub mod contract;
pub mod engine;
pub mod graph;
pub mod group;
pub mod metrics;
pub mod nested;
pub mod plan;
pub mod plugin;
#[cfg(test)]
mod proptests;
pub mod registry;
pub mod signal;
pub mod stack;
pub mod store;
/// The template language, its own crate (pure: no I/O); re-exported at
/// its old path.
pub use cairn_template as template;
pub mod validate;
pub mod webhook;
