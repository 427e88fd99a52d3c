//! TLS for webhooks: rustls with the ring provider, for the callback
//! listener (certificate and key from config) and the outgoing client
//! (the platform's roots plus an endpoint's extra CA bundle).

use std::path::Path;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;

use super::WebhookError;

/// Makes ring the process's rustls provider (reqwest is built without one).
/// Installing it again does nothing.
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The listener's TLS configuration from PEM files.
pub async fn server_config(cert: &Path, key: &Path) -> Result<RustlsConfig, WebhookError> {
    install_provider();
    RustlsConfig::from_pem_file(cert, key).await.map_err(|e| {
        WebhookError::Listener(format!(
            "cannot load the callback listener's TLS certificate {} and key {} ([webhooks] tls_cert, tls_key): {e}",
            cert.display(),
            key.display()
        ))
    })
}

/// An HTTP client for one endpoint: pooled connections, HTTPS via rustls,
/// `ca_bundle`'s certificates trusted besides the platform's.
pub fn client(ca_bundle: Option<&Path>, endpoint: &str) -> Result<reqwest::Client, WebhookError> {
    install_provider();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(60));
    if let Some(path) = ca_bundle {
        let pem = std::fs::read(path).map_err(|e| {
            WebhookError::Config(format!(
                "cannot read ca_bundle {} of webhook endpoint {endpoint}: {e}",
                path.display()
            ))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            WebhookError::Config(format!(
                "ca_bundle {} of webhook endpoint {endpoint} is not a PEM certificate bundle: {e}",
                path.display()
            ))
        })?;
        for c in certs {
            builder = builder.add_root_certificate(c);
        }
    }
    builder.build().map_err(|e| {
        WebhookError::Config(format!(
            "cannot set up the HTTP client of webhook endpoint {endpoint}: {e}"
        ))
    })
}
