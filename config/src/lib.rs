//! `cairn.toml`: Cairn's configuration, one typed struct. Its own crate,
//! below the engine and the transports, so each reads its own section
//! (`[engine]`, `[webhooks]`, …) without depending on the other.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
}

/// The identity pseudo parameters report (`AWS::Region`, `AWS::AccountId`, …).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityConfig {
    pub region: String,
    pub account_id: String,
    pub partition: String,
    pub url_suffix: String,
    /// Region → availability zones, for `Fn::GetAZs`.
    pub availability_zones: BTreeMap<String, Vec<String>>,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        IdentityConfig {
            region: "us-east-1".into(),
            account_id: "123456789012".into(),
            partition: "aws".into(),
            url_suffix: "amazonaws.com".into(),
            availability_zones: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// How many provider calls one stack operation runs at once (64: an
    /// engine on two cores keeps its state file's group commit full at
    /// 64 and gains nothing above; a custom-resource endpoint is further
    /// bounded by its own `[webhooks] max_concurrency`, 16 by default).
    /// A resource holds its slot from its start until its call returns:
    /// the outcome's durable write does not keep the next one waiting.
    pub max_concurrency: usize,
    /// Seconds a provider call may take before it fails with a timeout.
    pub call_timeout_seconds: u64,
    /// The SQLite state file (overridden by `--state` and `CAIRN_STATE`).
    pub state: Option<PathBuf>,
    /// Where file-backed built-in providers (`Cairn::Test::Resource`) keep
    /// their resources (overridden by `--data-dir` and `CAIRN_DATA_DIR`;
    /// default: `<state file>.resources/`). Engines that share it share
    /// those resources.
    pub data_dir: Option<PathBuf>,
    /// How often an update's cleanup tries to delete a resource before it
    /// disassociates it (CloudFormation: 3).
    pub cleanup_attempts: u32,
    /// Wait before the first retry of a failed cleanup delete; doubled each time.
    pub cleanup_backoff_seconds: f64,
    /// Seconds a new group member has to report healthy (`check_status`)
    /// before its rolling-update batch fails.
    pub health_timeout_seconds: u64,
    /// Seconds an engine's lease on a running operation lasts unless renewed
    /// (renewed every third of it). Another engine takes over an operation
    /// whose lease ran out: the time to recover from a dead engine.
    pub lease_seconds: u64,
    /// How many stack operations one `cairn serve` engine runs at once; the
    /// rest wait (recorded) until this engine or another sharing the state
    /// has room.
    pub max_operations: usize,
    /// Milliseconds between two looks at the signals kept in the state by
    /// a resource (or a rolling-update batch) that waits for them.
    pub signal_poll_ms: u64,
    /// Milliseconds between two looks at an operation's rollback triggers
    /// (health checks, Alertmanager alerts) while it rolls forward and
    /// during its monitoring period.
    pub rollback_trigger_poll_ms: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_concurrency: 64,
            call_timeout_seconds: 3600,
            state: None,
            data_dir: None,
            cleanup_attempts: 3,
            cleanup_backoff_seconds: 5.0,
            health_timeout_seconds: 300,
            lease_seconds: 15,
            max_operations: 32,
            signal_poll_ms: 250,
            rollback_trigger_poll_ms: 5000,
        }
    }
}

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
    /// The handler answers Cairn's `Read` requests: set from a
    /// `[[providers]] kind = "webhook"` entry's `read`, never from
    /// `[webhooks.endpoints]` (custom resources are not imported, as in
    /// CloudFormation).
    #[serde(skip)]
    pub read: bool,
}

/// How a provider is reached.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// One of Cairn's built-in providers (`name` = `builtin:test`,
    /// `builtin:local` or `builtin:random`). With any such entry, only the
    /// built-ins listed are registered.
    Builtin,
    /// A dynamic library built with `cairn_sdk::export_provider!`.
    Dylib,
    /// A remote handler speaking the custom-resource protocol (e.g. one made
    /// with `cairn_sdk::webhook`), serving the types its `GET /schema` lists.
    Webhook,
}

/// Where a plugin runs.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// In a `cairn plugin-host` child process: a crash kills only the host.
    #[default]
    Process,
    /// Loaded into Cairn's own process: fastest, for trusted plugins.
    None,
}

/// One `[[providers]]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// The library file (`dylib`).
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The handler's URL (`webhook`).
    #[serde(default)]
    pub url: Option<String>,
    /// The handler's signing secret (`webhook`).
    #[serde(default)]
    pub secret: Option<String>,
    /// Extra PEM CA certificates trusted for the handler (`webhook`).
    #[serde(default)]
    pub ca_bundle: Option<PathBuf>,
    /// Shown in errors and `cairn providers`; default: the file name.
    #[serde(default)]
    pub name: Option<String>,
    /// Only these of the types the provider declares (default: all).
    #[serde(default)]
    pub types: Option<Vec<String>>,
    #[serde(default)]
    pub isolation: Isolation,
    /// Refuse the library unless its SHA-256 (hex) is this.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Seconds a call may take (default: `[engine] call_timeout_seconds`).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// The handler answers Cairn's `CheckDrift` request (`webhook`): drift
    /// detection and resource-id parameter checks ask it. Off by default, as
    /// for custom-resource endpoints: a handler written for CloudFormation
    /// does not know that request type.
    #[serde(default)]
    pub drift: bool,
    /// The handler answers Cairn's `Read` request (`webhook`): a resource
    /// of its types can be imported and the kit's read tests run. Off by
    /// default, like `drift`.
    #[serde(default)]
    pub read: bool,
    /// What the provider is configured with (a table: connection URLs,
    /// regions, where a password is kept), given to it with every call
    /// as the request context's `ProviderSettings` (`dylib`).
    #[serde(default)]
    pub settings: Option<cairn_sdk::serde_json::Value>,
}

impl ProviderConfig {
    /// An entry of `kind` named `name` with nothing else set (what the
    /// registry starts a registered type's provider from).
    pub fn named(kind: ProviderKind, name: &str) -> ProviderConfig {
        ProviderConfig {
            kind,
            path: None,
            url: None,
            secret: None,
            ca_bundle: None,
            name: Some(name.to_string()),
            types: None,
            isolation: Isolation::default(),
            sha256: None,
            timeout_seconds: None,
            drift: false,
            read: false,
            settings: None,
        }
    }
}

/// One `[[macros]]` entry: a macro every template may name in `Transform`
/// or `Fn::Transform`, run by a webhook (`url`) or by a plugin's
/// `transform` (`provider`: the name of a `[[providers]]` entry).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MacroConfig {
    pub name: String,
    /// POSTed CloudFormation's macro request; answers the macro response.
    #[serde(default)]
    pub url: Option<String>,
    /// The webhook's signing secret (default: `[webhooks] secret`).
    #[serde(default)]
    pub secret: Option<String>,
    /// The `[[providers]]` entry whose plugin runs the macro.
    #[serde(default)]
    pub provider: Option<String>,
    /// Seconds the macro may take (default 60).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

/// `cairn serve`: the CloudFormation Query API.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on (`--listen` overrides it). Port 0: any free port.
    pub listen: String,
    /// PEM certificate chain and key: serve HTTPS.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// `sigv4` (every request signed with a key below) or `none` (no
    /// check: only for a trusted network; the server says so at start).
    pub auth: ServerAuth,
    /// Access key id → its secret and, optionally, the stacks it may touch.
    pub access_keys: BTreeMap<String, AccessKey>,
    /// Largest request body accepted (bytes).
    pub max_body_bytes: usize,
    /// Largest TemplateBody accepted (bytes; CloudFormation: 51,200 inline).
    pub max_template_bytes: usize,
    /// Seconds a signed request's X-Amz-Date may be off (AWS: 15 minutes).
    pub max_clock_skew_seconds: u64,
    /// Directories a `TemplateURL` of the form `file:///path` may read from
    /// (other URLs are refused; none by default).
    pub template_dirs: Vec<PathBuf>,
    /// CreateStack, UpdateStack, DeleteStack, ExecuteChangeSet, … answer
    /// when their operation ends or after this many milliseconds, whichever
    /// is first (the operation goes on either way).
    pub answer_within_ms: u64,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ServerAuth {
    #[default]
    Sigv4,
    None,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AccessKey {
    pub secret: String,
    /// Who the key belongs to: the audit trail's userName (default: the
    /// key id).
    #[serde(default)]
    pub name: Option<String>,
    /// Stack names this key may operate on (default: all).
    #[serde(default)]
    pub stacks: Option<Vec<String>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8080".into(),
            tls_cert: None,
            tls_key: None,
            auth: ServerAuth::Sigv4,
            access_keys: BTreeMap::new(),
            max_body_bytes: 2 * 1024 * 1024,
            max_template_bytes: 1024 * 1024,
            max_clock_skew_seconds: 900,
            answer_within_ms: 2000,
            template_dirs: Vec::new(),
        }
    }
}

/// `[nested]`: nested stacks (`AWS::CloudFormation::Stack`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NestedConfig {
    /// How many levels of nested stacks a root may have (Heat's
    /// max_nested_stack_depth).
    pub max_depth: usize,
    /// The most resources a whole tree of stacks may have (Heat's
    /// max_resources_per_stack, counted over the tree).
    pub max_resources: usize,
    /// Directories a `file:///` TemplateURL may name (a relative path is
    /// read beside its parent template).
    pub template_dirs: Vec<PathBuf>,
    /// Whether an `https://` TemplateURL is fetched.
    pub allow_https: bool,
    /// How often (milliseconds) a parent looks at a nested stack it waits
    /// for; it runs a child's operation again after ten looks without
    /// progress by another task or engine.
    pub poll_ms: u64,
}

impl Default for NestedConfig {
    fn default() -> Self {
        NestedConfig {
            max_depth: 5,
            max_resources: 1000,
            template_dirs: Vec::new(),
            allow_https: false,
            poll_ms: 100,
        }
    }
}

/// `[registry]`: resource types registered in the state (`cairn type
/// register`, RegisterType) and served by every engine sharing it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RegistryConfig {
    /// Minisign public keys (base64, the second line of a `.pub` file): when
    /// any is given, a package must be signed by one of them to register.
    pub trusted_keys: Vec<String>,
    /// How often (milliseconds) a running engine looks for registry
    /// changes; a new type or default version is served within this.
    pub poll_ms: u64,
    /// Where the libraries of registered dylib types are written, each
    /// under its SHA-256 (default: `types/` in the data directory).
    pub cache_dir: Option<PathBuf>,
    /// Directories a `file://` SchemaHandlerPackage of RegisterType may
    /// name (an `https://` one is fetched).
    pub package_dirs: Vec<PathBuf>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            trusted_keys: Vec::new(),
            poll_ms: 2000,
            cache_dir: None,
            package_dirs: Vec::new(),
        }
    }
}

/// Hooks (`[hooks]`): where a Guard hook's rules may be read from, and
/// how long a webhook hook is waited for.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// Directories a Guard hook's `file://` RuleLocation may name (an
    /// `https://` one is fetched).
    pub rule_dirs: Vec<PathBuf>,
    /// How long one invocation of a webhook hook (a LambdaHook) is waited
    /// for before it is HOOK_FAILED (CloudFormation waits 30 s for a
    /// Lambda hook).
    pub timeout_seconds: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            rule_dirs: Vec::new(),
            timeout_seconds: 30,
        }
    }
}

/// How logs are written (`[log]`).
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` (the default) or `json`: one JSON object per line, with the
    /// fields of the request and operation it belongs to.
    pub format: LogFormat,
}

/// A log line's format.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The audit trail (`[audit]`): every API call and console action that
/// changed something, kept in the state.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Days a record is kept (CloudTrail's LookupEvents window: 90).
    pub keep_days: u64,
    /// Also append every record, as one JSON line, to this file.
    pub export_file: Option<PathBuf>,
    /// Also POST every record (a JSON array of CloudTrail records per
    /// batch) to this http(s) URL, signed as webhooks are.
    pub export_url: Option<String>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            keep_days: 90,
            export_file: None,
            export_url: None,
        }
    }
}

/// Traces (`[telemetry]`): spans exported over OTLP. Off unless an
/// endpoint is given here or in `OTEL_EXPORTER_OTLP_ENDPOINT` /
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector: `http://host:4318` for OTLP/HTTP (`/v1/traces` is
    /// appended), `http://host:4317` for gRPC.
    pub endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc` (else
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Option<String>,
    /// Headers sent with every export (an API key), besides
    /// `OTEL_EXPORTER_OTLP_HEADERS`.
    pub headers: BTreeMap<String, String>,
    /// The fraction of new traces kept (0.0–1.0); a request that arrives
    /// with a sampled `traceparent` is kept as its caller decided.
    pub sampling: f64,
    /// Spans kept waiting for the collector; beyond it they are dropped
    /// (and counted), never waited for.
    pub queue_size: usize,
    /// Seconds an export may take before its spans are given up (and
    /// counted as dropped).
    pub timeout_seconds: u64,
    /// The `service.name` spans are exported under.
    pub service_name: String,
    /// A trace UI's address: the console links each operation's trace
    /// (`{ui}/trace/{trace id}`, Jaeger's and Tempo's form).
    pub ui: Option<String>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            endpoint: None,
            protocol: None,
            headers: BTreeMap::new(),
            sampling: 1.0,
            queue_size: 2048,
            timeout_seconds: 10,
            service_name: "cairn".into(),
            ui: None,
        }
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub identity: IdentityConfig,
    pub engine: EngineConfig,
    pub webhooks: WebhookConfig,
    pub server: ServerConfig,
    pub nested: NestedConfig,
    /// Provider plugins (`[[providers]]`).
    pub providers: Vec<ProviderConfig>,
    /// Type alias → canonical type (Heat's resource_registry).
    pub type_aliases: BTreeMap<String, String>,
    /// Macros (`[[macros]]`).
    pub macros: Vec<MacroConfig>,
    pub registry: RegistryConfig,
    pub hooks: HooksConfig,
    pub log: LogConfig,
    pub audit: AuditConfig,
    pub telemetry: TelemetryConfig,
}

impl Config {
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            // toml's Display spans several lines with a snippet; keep one line.
            let line = e
                .span()
                .map(|s| {
                    format!(
                        "line {}: ",
                        text[..s.start.min(text.len())].matches('\n').count() + 1
                    )
                })
                .unwrap_or_default();
            ConfigError::Parse {
                path: path.to_path_buf(),
                message: format!("{line}{}", e.message().trim()),
            }
        })?;
        // A call's deadline is this far away: at 0 every provider would
        // refuse every call as already late.
        if config.engine.call_timeout_seconds == 0 {
            return Err(ConfigError::Parse {
                path: path.to_path_buf(),
                message: "[engine] call_timeout_seconds must be at least 1".into(),
            });
        }
        for (i, m) in config.macros.iter().enumerate() {
            let refuse = |message: String| ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            };
            if m.url.is_some() == m.provider.is_some() {
                return Err(refuse(format!(
                    "[[macros]] {} needs exactly one of url (a webhook) and provider (a [[providers]] entry's name)",
                    m.name
                )));
            }
            if config.macros[..i].iter().any(|o| o.name == m.name) {
                return Err(refuse(format!(
                    "[[macros]] {} is defined twice; macro names are unique",
                    m.name
                )));
            }
        }
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_file_states_the_defaults() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/cairn.toml"));
        let c = Config::load(path).unwrap();
        assert_eq!(c.engine, EngineConfig::default());
        assert_eq!(c.webhooks, WebhookConfig::default());
        assert_eq!(c.server, ServerConfig::default());
        assert_eq!(c.nested, NestedConfig::default());
    }

    #[test]
    fn defaults_and_unknown_keys() {
        let c = Config::parse("[identity]\nregion = \"eu-west-1\"\n", Path::new("c.toml")).unwrap();
        assert_eq!(c.identity.region, "eu-west-1");
        assert_eq!(c.identity.account_id, "123456789012");
        assert_eq!(c.engine.max_concurrency, 64);
        assert_eq!(c.webhooks.max_concurrency, 16);
        let e = Config::parse("[engine]\nmax_concurency = 3\n", Path::new("c.toml")).unwrap_err();
        assert!(
            e.to_string().starts_with("invalid config file c.toml: "),
            "{e}"
        );
        assert!(e.to_string().contains("max_concurency"), "{e}");
    }
}
