//! The type registry's records: registrations (RegisterType's tokens) and
//! the versions of each registered type, as the store keeps them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::words::{status_enum, UnknownWord};

status_enum!(
    /// What a registered type is (CloudFormation's `Type`).
    RegistryTypeKind {
        Resource => "RESOURCE",
        Module => "MODULE",
        Hook => "HOOK",
    }
);

status_enum!(
    /// A registration's progress (CloudFormation's
    /// `RegistrationStatus`/`ProgressStatus`).
    RegistrationStatus {
        InProgress => "IN_PROGRESS",
        Complete => "COMPLETE",
        Failed => "FAILED",
    }
);

/// Where an engine reads a webhook type's signing secret: named at
/// registration, never kept in the state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SecretSource {
    /// An environment variable of each engine.
    Env(String),
    /// A file on each engine's machine.
    File(std::path::PathBuf),
}

/// One RegisterType: its token, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RegistrationRecord {
    pub token: String,
    pub type_name: String,
    pub kind: RegistryTypeKind,
    pub status: RegistrationStatus,
    /// Why it failed, or what it did.
    pub description: String,
    /// The version it made, once COMPLETE.
    pub version_id: Option<String>,
    /// The caller's idempotency key (ClientRequestToken): the same key
    /// makes no second registration.
    pub client_token: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// What a registration records for a new version (the store gives it its
/// id and decides whether it is the default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTypeVersion {
    pub type_name: String,
    pub kind: RegistryTypeKind,
    /// The CloudFormation-style schema, as the package holds it.
    pub schema: String,
    pub description: String,
    /// How it is served: the package manifest's handler (JSON).
    pub handler: String,
    /// Where an engine reads a webhook handler's signing secret (JSON:
    /// `{"Env": NAME}` or `{"File": PATH}`): named at registration, never
    /// the secret itself.
    pub secret: Option<String>,
    /// The SHA-256 of the package.
    pub package_sha256: String,
    /// The trusted key that signed the package, if one did.
    pub signed_by: Option<String>,
}

/// One version of a registered type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TypeVersionRecord {
    pub type_name: String,
    /// `00000001`, `00000002`, … in the order registered.
    pub version_id: String,
    pub kind: RegistryTypeKind,
    pub is_default: bool,
    /// Deregistered: kept for the record, served to nothing new.
    pub deprecated: bool,
    pub schema: String,
    pub description: String,
    pub handler: String,
    pub secret: Option<String>,
    pub package_sha256: String,
    pub signed_by: Option<String>,
    pub created_at: String,
}

/// A type's configuration under one alias (SetTypeConfiguration): the JSON
/// as given, secrets as references (`{{resolve:env:NAME}}`,
/// `{{resolve:file:PATH}}`) each engine resolves when it calls the
/// provider, never their values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TypeConfigurationRecord {
    pub type_name: String,
    /// `default` unless given: the one providers receive.
    pub alias: String,
    pub configuration: String,
    pub updated_at: String,
}

/// The alias providers receive the configuration of.
pub const DEFAULT_ALIAS: &str = "default";

/// A version id from its number: CloudFormation's eight digits.
pub fn version_id(n: u32) -> String {
    format!("{n:08}")
}

/// The number of a version id (`None`: not one).
pub fn version_number(id: &str) -> Option<u32> {
    (id.len() == 8 && id.chars().all(|c| c.is_ascii_digit()))
        .then(|| id.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_are_eight_digits() {
        assert_eq!(version_id(1), "00000001");
        assert_eq!(version_number("00000012"), Some(12));
        assert_eq!(version_number("12"), None);
        assert_eq!("COMPLETE".parse(), Ok(RegistrationStatus::Complete));
        assert_eq!(
            "DONE"
                .parse::<RegistrationStatus>()
                .err()
                .map(|e| e.to_string()),
            Some("unknown RegistrationStatus DONE".into())
        );
    }
}
