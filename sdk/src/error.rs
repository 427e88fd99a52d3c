use serde::{Deserialize, Serialize};

/// What went wrong in a provider call, in CloudFormation's handler error vocabulary.
///
/// The engine reacts to the kind (a `NotFound` on delete counts as deleted; a
/// `Throttling` may be retried); the message becomes the resource's status reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorKind {
    NotFound,
    AlreadyExists,
    InvalidRequest,
    Throttling,
    NotUpdatable,
    InternalFailure,
    Timeout,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "NotFound",
            ErrorKind::AlreadyExists => "AlreadyExists",
            ErrorKind::InvalidRequest => "InvalidRequest",
            ErrorKind::Throttling => "Throttling",
            ErrorKind::NotUpdatable => "NotUpdatable",
            ErrorKind::InternalFailure => "InternalFailure",
            ErrorKind::Timeout => "Timeout",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed failure returned by a provider. `message` is shown to the user as the
/// resource's status reason, so it should say what failed and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub kind: ErrorKind,
    pub message: String,
    /// A physical resource the failed call left behind (a custom resource's
    /// FAILED Create still names one): the engine records it so that
    /// rollback deletes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_resource_id: Option<String>,
}

impl ProviderError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProviderError {
            kind,
            message: message.into(),
            physical_resource_id: None,
        }
    }
    /// Names the physical resource the failed call left behind.
    pub fn leaving(mut self, physical_resource_id: impl Into<String>) -> Self {
        self.physical_resource_id = Some(physical_resource_id.into());
        self
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AlreadyExists, message)
    }
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidRequest, message)
    }
    pub fn throttling(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Throttling, message)
    }
    pub fn not_updatable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotUpdatable, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InternalFailure, message)
    }
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }
}

impl From<serde_json::Error> for ProviderError {
    fn from(e: serde_json::Error) -> Self {
        ProviderError::invalid_request(format!("invalid properties: {e}"))
    }
}
