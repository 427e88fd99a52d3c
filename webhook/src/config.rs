//! `[webhooks]` of `cairn.toml`: the webhook transport's configuration,
//! typed in `cairn-config` with the rest of the file and re-exported here.

pub use cairn_config::{EndpointConfig, WebhookConfig};
