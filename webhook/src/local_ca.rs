//! The callback listener's local certificate authority: handlers that send
//! their responses over HTTPS whatever the ResponseURL says (crhelper) need
//! the listener to speak TLS with a certificate they can trust. Without a
//! configured certificate, Cairn makes a CA once, keeps it in its data
//! directory (`ca.pem`, and `ca.key` readable by its owner only), and signs
//! a certificate for the listener's names at each start. The listener serves
//! the CA at `GET /cairn-ca.pem`; the Python SDK's Lambda adapter fetches it
//! and adds it to the handler process's trusted roots.

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use super::WebhookError;

/// The CA's distinguished name; the leaf's issuer must match it, so the CA
/// is described the same way at each start.
fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name.push(
        DnType::CommonName,
        "Cairn local CA for custom-resource responses",
    );
    p.distinguished_name.push(DnType::OrganizationName, "Cairn");
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(p)
}

fn failed(dir: &Path, what: impl std::fmt::Display) -> WebhookError {
    WebhookError::Listener(format!(
        "the callback listener's local CA in {} ([webhooks] local_ca_dir): {what}",
        dir.display()
    ))
}

/// The CA (certificate PEM and key), made and kept in `dir` on first use.
fn load_or_make(dir: &Path) -> Result<(String, KeyPair), WebhookError> {
    let (cert_path, key_path) = (dir.join("ca.pem"), dir.join("ca.key"));
    if let (Ok(cert), Ok(key)) = (
        std::fs::read_to_string(&cert_path),
        std::fs::read_to_string(&key_path),
    ) {
        let key = KeyPair::from_pem(&key).map_err(|e| failed(dir, format!("ca.key: {e}")))?;
        return Ok((cert, key));
    }
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    let key = KeyPair::generate().map_err(|e| failed(dir, e))?;
    let cert = ca_params()
        .and_then(|p| p.self_signed(&key))
        .map_err(|e| failed(dir, e))?
        .pem();
    write_private(&key_path, &key.serialize_pem()).map_err(|e| failed(dir, e))?;
    std::fs::write(&cert_path, &cert).map_err(|e| failed(dir, e))?;
    Ok((cert, key))
}

/// Writes `text` to `path`, readable by its owner only.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(text.as_bytes())
}

/// The CA's PEM and a TLS configuration for the listener, whose
/// certificate (signed by the CA) names `names` (host names or IPs).
pub fn server_config(
    dir: &Path,
    names: &[String],
) -> Result<(String, Arc<rustls::ServerConfig>), WebhookError> {
    super::tls::install_provider();
    let (ca_pem, ca_key) = load_or_make(dir)?;
    let issuer = Issuer::new(ca_params().map_err(|e| failed(dir, e))?, ca_key);
    let leaf_key = KeyPair::generate().map_err(|e| failed(dir, e))?;
    let mut leaf = CertificateParams::new(names.to_vec()).map_err(|e| failed(dir, e))?;
    leaf.distinguished_name
        .push(DnType::CommonName, "Cairn callback listener");
    let leaf = leaf
        .signed_by(&leaf_key, &issuer)
        .map_err(|e| failed(dir, e))?;
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der())
        .map_err(|e| failed(dir, e))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .map_err(|e| failed(dir, e))?;
    Ok((ca_pem, Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_made_once_and_signs_each_start() {
        let dir = std::env::temp_dir().join(format!("cairn-local-ca-{}", uuid::Uuid::new_v4()));
        let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let (first, _) = server_config(&dir, &names).expect("made");
        let (again, _) = server_config(&dir, &names).expect("loaded");
        assert_eq!(first, again);
        assert!(first.starts_with("-----BEGIN CERTIFICATE-----"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("ca.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
