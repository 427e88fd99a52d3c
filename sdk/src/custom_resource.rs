//! CloudFormation's custom-resource protocol: the request Cairn POSTs to a
//! webhook handler and the response the handler PUTs to `ResponseURL` (or
//! returns from the POST). Field names and shapes are CloudFormation's, so a
//! handler written for AWS (`cfnresponse`, crhelper) reads them unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The longest response body CloudFormation accepts ("Custom resource response:
/// 4,096 bytes").
pub const MAX_RESPONSE_BYTES: usize = 4096;

/// Header with the Unix time (seconds) a request was signed at.
pub const TIMESTAMP_HEADER: &str = "X-Cairn-Timestamp";
/// Header with `v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`.
pub const SIGNATURE_HEADER: &str = "X-Cairn-Signature";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestType {
    Create,
    Update,
    Delete,
    /// Cairn's extension, sent only to endpoints configured with
    /// `drift = true`: compare the live resource with ResourceProperties and
    /// answer SUCCESS with `Data` = the drift result (`{"Status": "IN_SYNC" |
    /// "MODIFIED" | "DELETED" | "NOT_CHECKED", "PropertyDifferences": [...]}`).
    CheckDrift,
    /// Cairn's extension, sent only to handlers configured with `read =
    /// true` (a `[[providers]] kind = "webhook"` entry; custom resources are
    /// not read, as CloudFormation does not import them): report the live
    /// resource with PhysicalResourceId and answer SUCCESS with `Data` =
    /// the read result (`{"Outcome": "FOUND", "Properties": {...},
    /// "Attributes": {...}}` or `{"Outcome": "NOT_SUPPORTED"}`), or FAILED
    /// with `ErrorCode` `NotFound` when there is no such resource.
    Read,
}

/// The event a handler receives: CloudFormation's fields, and the tags of a
/// resource handler's request when the stack has any.
/// Properties are stringified (see [`stringify`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CustomResourceRequest {
    pub request_type: RequestType,
    pub service_token: String,
    #[serde(rename = "ResponseURL")]
    pub response_url: String,
    pub stack_id: String,
    pub request_id: String,
    pub resource_type: String,
    pub logical_resource_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_resource_id: Option<String>,
    pub resource_properties: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_resource_properties: Option<Map<String, Value>>,
    /// Cairn's extension, named as CloudFormation's resource handlers get
    /// them: the stack's tags, before an update, and the system tags.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub desired_resource_tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub previous_resource_tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_tags: BTreeMap<String, String>,
    /// Cairn's extension (CloudFormation's resource handlers get it as
    /// `requestData.typeConfiguration`): the type's configuration
    /// (SetTypeConfiguration, or a `[[providers]]` entry's `settings`),
    /// its secrets resolved by the engine. Absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_configuration: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResponseStatus {
    Success,
    Failed,
}

/// What a handler answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CustomResourceResponse {
    pub status: ResponseStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub physical_resource_id: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    #[serde(default)]
    pub no_echo: bool,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub data: Map<String, Value>,
    /// Cairn's extension (the field of CloudFormation's resource-handler
    /// progress events): why a FAILED request failed, in the provider error
    /// vocabulary (`NotFound`, `InvalidRequest`, …), so a typed error
    /// survives the wire. Handlers written for CloudFormation leave it out;
    /// a FAILED response without it is an `InternalFailure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<crate::ErrorKind>,
}

impl CustomResourceResponse {
    /// A response to `req` with the identifying fields copied from it.
    pub fn to(req: &CustomResourceRequest, status: ResponseStatus, physical_id: &str) -> Self {
        CustomResourceResponse {
            status,
            reason: None,
            physical_resource_id: physical_id.to_string(),
            stack_id: req.stack_id.clone(),
            request_id: req.request_id.clone(),
            logical_resource_id: req.logical_resource_id.clone(),
            no_echo: false,
            data: Map::new(),
            error_code: None,
        }
    }
}

/// CloudFormation sends every number and boolean, at any depth, as a string
/// (`14` → `"14"`, `true` → `"true"`); lists and maps keep their shape. A
/// `null` becomes the empty string, as nothing else can carry it.
pub fn stringify(v: &Value) -> Value {
    match v {
        Value::Null => Value::String(String::new()),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Number(n) => Value::String(n.to_string()),
        Value::String(_) => v.clone(),
        Value::Array(items) => Value::Array(items.iter().map(stringify).collect()),
        Value::Object(m) => Value::Object(stringify_map(m)),
    }
}

/// [`stringify`] applied to each value of a property map.
pub fn stringify_map(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter().map(|(k, v)| (k.clone(), stringify(v))).collect()
}

#[cfg(feature = "signing")]
mod signing {
    use hmac::{KeyInit, Mac};

    type HmacSha256 = hmac::Hmac<sha2::Sha256>;

    /// Why a signed request was refused.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum SignatureError {
        #[error("the request has no {0} header; it was not sent by Cairn (or Cairn has no secret for this endpoint)")]
        Missing(&'static str),
        #[error("the {header} header is not valid: {detail}")]
        Malformed {
            header: &'static str,
            detail: String,
        },
        #[error("the request was signed {age_seconds} s away from now, more than the {tolerance_seconds} s allowed; check the clocks, or it is a replay")]
        Stale {
            age_seconds: u64,
            tolerance_seconds: u64,
        },
        #[error("the signature does not match: the handler's secret differs from the endpoint's secret in Cairn's config, or the body was changed")]
        Mismatch,
    }

    fn mac(secret: &[u8], timestamp: u64, body: &[u8]) -> HmacSha256 {
        // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
        let mut m = match HmacSha256::new_from_slice(secret) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC accepts keys of any length"),
        };
        m.update(timestamp.to_string().as_bytes());
        m.update(b".");
        m.update(body);
        m
    }

    /// The value of the signature header for `body` sent at `timestamp`.
    pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
        format!(
            "v1={}",
            hex(&mac(secret, timestamp, body).finalize().into_bytes())
        )
    }

    /// Hex HMAC-SHA256 of `message` (what Cairn signs its ResponseURLs with).
    pub fn hmac_hex(secret: &[u8], message: &[u8]) -> String {
        let mut m = match HmacSha256::new_from_slice(secret) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC accepts keys of any length"),
        };
        m.update(message);
        hex(&m.finalize().into_bytes())
    }

    fn hex(bytes: &[u8]) -> String {
        let mut s = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }

    /// Checks the two headers of a request against `secret` (in constant
    /// time), refusing requests signed more than `tolerance_seconds` from `now`.
    pub fn verify(
        secret: &[u8],
        timestamp_header: Option<&str>,
        signature_header: Option<&str>,
        body: &[u8],
        now: u64,
        tolerance_seconds: u64,
    ) -> Result<(), SignatureError> {
        let ts = timestamp_header.ok_or(SignatureError::Missing(super::TIMESTAMP_HEADER))?;
        let sig = signature_header.ok_or(SignatureError::Missing(super::SIGNATURE_HEADER))?;
        let ts: u64 = ts.trim().parse().map_err(|_| SignatureError::Malformed {
            header: super::TIMESTAMP_HEADER,
            detail: format!("{ts:?} is not a Unix time in seconds"),
        })?;
        let age = now.abs_diff(ts);
        if age > tolerance_seconds {
            return Err(SignatureError::Stale {
                age_seconds: age,
                tolerance_seconds,
            });
        }
        let hex = sig
            .trim()
            .strip_prefix("v1=")
            .ok_or_else(|| SignatureError::Malformed {
                header: super::SIGNATURE_HEADER,
                detail: "expected v1=<hex>".into(),
            })?;
        let bytes = decode_hex(hex).ok_or_else(|| SignatureError::Malformed {
            header: super::SIGNATURE_HEADER,
            detail: "the signature is not hex".into(),
        })?;
        mac(secret, ts, body)
            .verify_slice(&bytes)
            .map_err(|_| SignatureError::Mismatch)
    }

    fn decode_hex(s: &str) -> Option<Vec<u8>> {
        if !s.len().is_multiple_of(2) {
            return None;
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
            .collect()
    }
}

#[cfg(feature = "signing")]
pub use signing::{hmac_hex, sign, verify, SignatureError};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stringify_recasts_scalars_at_any_depth() {
        let v = json!({"Size": 3, "On": true, "Ratio": 1.5, "Zones": ["a", 2, false],
                       "Limits": {"Max": 10, "Nested": [{"X": 1}]}, "Gone": null});
        assert_eq!(
            stringify(&v),
            json!({"Size": "3", "On": "true", "Ratio": "1.5", "Zones": ["a", "2", "false"],
                   "Limits": {"Max": "10", "Nested": [{"X": "1"}]}, "Gone": ""})
        );
    }

    #[test]
    fn request_wire_form_has_cloudformation_field_names() {
        let req = CustomResourceRequest {
            request_type: RequestType::Update,
            service_token: "t".into(),
            response_url: "http://x/cb".into(),
            stack_id: "s".into(),
            request_id: "r".into(),
            resource_type: "Custom::W".into(),
            logical_resource_id: "W".into(),
            physical_resource_id: Some("p".into()),
            resource_properties: Map::new(),
            old_resource_properties: Some(Map::new()),
            desired_resource_tags: Default::default(),
            previous_resource_tags: Default::default(),
            system_tags: Default::default(),
            type_configuration: None,
        };
        let v = serde_json::to_value(&req).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "LogicalResourceId",
                "OldResourceProperties",
                "PhysicalResourceId",
                "RequestId",
                "RequestType",
                "ResourceProperties",
                "ResourceType",
                "ResponseURL",
                "ServiceToken",
                "StackId"
            ]
        );
        // A type's configuration, when there is one, as TypeConfiguration.
        let configured = CustomResourceRequest {
            type_configuration: Some(serde_json::json!({"Root": "/srv"})),
            ..req
        };
        let v = serde_json::to_value(&configured).unwrap();
        assert_eq!(v["TypeConfiguration"], serde_json::json!({"Root": "/srv"}));
    }

    #[cfg(feature = "signing")]
    #[test]
    fn signatures_verify_and_reject_tampering() {
        let sig = sign(b"secret", 1_700_000_000, b"{\"a\":1}");
        assert!(sig.starts_with("v1=") && sig.len() == 67);
        let ok = verify(
            b"secret",
            Some("1700000000"),
            Some(&sig),
            b"{\"a\":1}",
            1_700_000_010,
            300,
        );
        assert_eq!(ok, Ok(()));
        let body = verify(
            b"secret",
            Some("1700000000"),
            Some(&sig),
            b"{\"a\":2}",
            1_700_000_010,
            300,
        );
        assert_eq!(body, Err(SignatureError::Mismatch));
        let key = verify(
            b"other",
            Some("1700000000"),
            Some(&sig),
            b"{\"a\":1}",
            1_700_000_010,
            300,
        );
        assert_eq!(key, Err(SignatureError::Mismatch));
        let old = verify(
            b"secret",
            Some("1700000000"),
            Some(&sig),
            b"{\"a\":1}",
            1_700_001_000,
            300,
        );
        assert!(matches!(
            old,
            Err(SignatureError::Stale {
                age_seconds: 1000,
                ..
            })
        ));
        let none = verify(b"secret", None, Some(&sig), b"", 0, 300);
        assert_eq!(none, Err(SignatureError::Missing(TIMESTAMP_HEADER)));
    }
}
