//! `cairn-core`: Cairn's engine.
//!
//! See ARCHITECTURE.md for the map: `template` (parse, validate, evaluate),
//! `graph` (dependencies and scheduling order), `registry` (types → providers),
//! `validate` (template checks against provider schemas).

pub mod config;
pub mod graph;
pub mod registry;
pub mod template;
pub mod validate;
