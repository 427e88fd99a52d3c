//! `cairn-model`: what a stack is, independent of where it is kept or how
//! its resources are reached. Stack records and statuses (`stack`), the
//! dependency graph (`graph`), the planner (`plan`), validation against the
//! types on offer (`validate`, through `catalog::TypeCatalog`), and the
//! models of the types the engine serves itself: groups (`group`), signals
//! and wait conditions (`signal`), nested stacks (`nested`).
//!
//! Pure: no I/O, no async runtime, no transports (`cargo xtask layers`
//! checks it). `cairn-core` re-exports every module at its old path.

#![forbid(unsafe_code)]

// Paths into the template language read as they did inside the core.
use cairn_template as template;

pub mod audit;
pub mod catalog;
pub mod graph;
pub mod group;
pub mod hooks;
pub mod import;
pub mod macros;
pub mod nested;
pub mod notifications;
pub mod operation;
pub mod plan;
pub mod refactor;
pub mod registry;
pub mod rollback_triggers;
pub mod signal;
pub mod stack;
pub mod stack_policy;
pub mod validate;
mod words;
