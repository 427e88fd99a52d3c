//! `[webhooks]` of `cairn.toml`: the webhook transport's configuration
//! (the rest of the file is `cairn_core::config`'s, which re-exports
//! these).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// Custom-resource webhooks: where handlers are, how requests are signed, and
/// the callback listener handlers send their responses to.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookConfig {
    /// Address the callback listener binds (port 0: any free port).
    pub listen: String,
    /// Base of every ResponseURL (what handlers can reach); by default the
    /// listener's own address, `https://` when TLS is configured.
    pub public_url: Option<String>,
    /// PEM certificate chain and key: the listener then serves HTTPS
    /// (crhelper and Node handlers send responses to https only).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Without tls_cert: where Cairn keeps the local CA whose certificate the
    /// listener also speaks TLS with, on the same port (handlers that answer
    /// over HTTPS only, crhelper). The CLI sets it to the data directory's
    /// `callback-ca`; unset, the listener speaks plain HTTP only.
    pub local_ca_dir: Option<PathBuf>,
    /// Seconds to wait for a response when neither the resource's
    /// `ServiceTimeout` nor its endpoint sets one (CloudFormation: 3600).
    pub timeout_seconds: u64,
    /// Signing secret for `http(s)://` service tokens that match no endpoint.
    pub secret: Option<String>,
    /// Requests delivered to one endpoint at once.
    pub max_concurrency: usize,
    /// Named endpoints; a template's `ServiceToken` is a URL, one of these
    /// names, or one of their `service_tokens` (e.g. a Lambda ARN).
    pub endpoints: BTreeMap<String, EndpointConfig>,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            listen: "127.0.0.1:0".into(),
            public_url: None,
            tls_cert: None,
            tls_key: None,
            local_ca_dir: None,
            timeout_seconds: 3600,
            secret: None,
            max_concurrency: 16,
            endpoints: BTreeMap::new(),
        }
    }
}

/// One custom-resource handler.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct EndpointConfig {
    /// Where requests are POSTed (`http://` or `https://`).
    pub url: String,
    /// HMAC-SHA256 secret the requests are signed with.
    pub secret: Option<String>,
    /// Service tokens of templates written for AWS (Lambda or SNS ARNs) that
    /// mean this endpoint.
    pub service_tokens: Vec<String>,
    /// Default wait for a response, overriding `[webhooks] timeout_seconds`.
    pub timeout_seconds: Option<u64>,
    /// Overrides `[webhooks] max_concurrency`.
    pub max_concurrency: Option<usize>,
    /// Extra PEM CA certificates trusted for this endpoint.
    pub ca_bundle: Option<PathBuf>,
    /// `Custom::<Name>` types this endpoint declares a schema for. With a
    /// schema the engine plans replacement itself (CreateOnly properties);
    /// without, every property change is an Update and the handler decides.
    pub types: Vec<String>,
    /// Property → update behaviour (`Mutable`, `MutableWithInterruption`,
    /// `CreateOnly`, `Immutable`) for `types`.
    pub properties: BTreeMap<String, cairn_sdk::UpdateBehavior>,
    /// Attributes (`Data` keys) of `types`; when given, `Fn::GetAtt` of
    /// another name is a template error.
    pub attributes: Vec<String>,
    /// The handler answers Cairn's `CheckDrift` requests (`cairn drift`).
    pub drift: bool,
}
