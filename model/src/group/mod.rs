//! Instance groups: groups of identical members made from a launch
//! configuration, resized and rolled to a new one batch by batch. This
//! module is the pure part (naming, policy, schemas, the stored state); the
//! engine runs groups in `engine::group`.

pub mod in_place;
pub mod naming;
pub mod policy;
pub mod state;
pub mod types;

pub use types::{is_group, GroupTypes, DEFAULT_ALIASES};

/// Why a group's properties or update policy cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// Its properties (sizes, the launch configuration, removal policies).
    #[error("{0}")]
    InvalidProperties(String),
    /// Its UpdatePolicy's RollingUpdate (batch sizes, PauseTime).
    #[error("{0}")]
    InvalidUpdatePolicy(String),
}
