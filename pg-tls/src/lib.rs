//! TLS to PostgreSQL (Cairn's state database, and the databases its
//! PostgreSQL provider manages), with rustls (ring) as everywhere
//! else in Cairn, and libpq's `sslmode` / `sslrootcert` (in the URL or
//! `PGSSLMODE` / `PGSSLROOTCERT`): `disable`, `prefer` (the default: TLS
//! when the server offers it, unverified), `require` (TLS, unverified
//! unless a root certificate is given, as libpq does), `verify-ca` (the
//! server's chain must lead to `sslrootcert`) and `verify-full` (and its
//! name must be the host's).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Why TLS to the database cannot be set up (a bad `sslmode`, an unreadable
/// certificate authority).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, TlsError> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(TlsError(format!(
                    "sslmode={other} in the PostgreSQL URL is not one of disable, prefer, require, verify-ca, verify-full"
                )))
            }
        })
    }

    /// What tokio-postgres is told (it knows only disable, prefer, require).
    pub fn negotiation(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }
}

/// The TLS settings of a state URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<PathBuf>,
}

/// Takes `sslmode` and `sslrootcert` out of a `postgres://` URL (falling
/// back on `var("PGSSLMODE")`, `var("PGSSLROOTCERT")`), returning the URL
/// tokio-postgres is given and the settings.
pub fn split(
    url: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(String, TlsSettings), TlsError> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let (mut mode, mut root) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sslmode", v)) => mode = Some(v.to_string()),
            Some(("sslrootcert", v)) => root = Some(percent_decode(v)),
            _ => kept.push(pair),
        }
    }
    let mode = match mode.or_else(|| var("PGSSLMODE")) {
        Some(m) => SslMode::parse(&m)?,
        None => SslMode::Prefer,
    };
    let root_cert = root.or_else(|| var("PGSSLROOTCERT")).map(PathBuf::from);
    if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) && root_cert.is_none() {
        return Err(TlsError(format!(
            "sslmode={} needs the certificate authority to check the server against: add sslrootcert=/path/to/ca.pem to the PostgreSQL URL (or set PGSSLROOTCERT)",
            if mode == SslMode::VerifyCa { "verify-ca" } else { "verify-full" }
        )));
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, TlsSettings { mode, root_cert }))
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// The rustls connector for `settings`.
pub fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("cannot set up TLS: {e}")))?;
    let roots = match &settings.root_cert {
        Some(path) => Some(Arc::new(roots(path)?)),
        None => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match (settings.mode, roots) {
        (SslMode::VerifyFull, Some(roots)) | (SslMode::Require, Some(roots)) => {
            // libpq: require with a root certificate checks the chain (as
            // verify-ca); verify-full also the name.
            let inner = webpki(roots, provider.clone())?;
            if settings.mode == SslMode::VerifyFull {
                inner
            } else {
                Arc::new(ChainOnly(inner))
            }
        }
        (SslMode::VerifyCa, Some(roots)) => Arc::new(ChainOnly(webpki(roots, provider.clone())?)),
        _ => Arc::new(Unverified(provider)),
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let cannot = |e: &dyn std::fmt::Display| {
        TlsError(format!(
            "cannot read sslrootcert {} (PEM certificates): {e}",
            path.display()
        ))
    };
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| cannot(&e))? {
        store
            .add(cert.map_err(|e| cannot(&e))?)
            .map_err(|e| cannot(&e))?;
    }
    if store.is_empty() {
        return Err(cannot(&"no certificate in it"));
    }
    Ok(store)
}

fn webpki(
    roots: Arc<RootCertStore>,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, TlsError> {
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .map_err(|e| TlsError(format!("cannot set up TLS verification: {e}")))?;
    Ok(verifier)
}

/// verify-ca: the chain must lead to the root; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// prefer and require without a root certificate: encrypted, and the
/// handshake's signatures checked, but any certificate accepted (libpq's
/// meaning of these modes).
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        let (url, s) = split(
            "postgres://u@db/cairn?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
            no_env,
        )
        .unwrap();
        assert_eq!(url, "postgres://u@db/cairn?application_name=x");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        let (url, s) = split("postgres://u@db/cairn", no_env).unwrap();
        assert_eq!(url, "postgres://u@db/cairn");
        assert_eq!(s.mode, SslMode::Prefer);
        let env = |k: &str| (k == "PGSSLMODE").then(|| "require".to_string());
        assert_eq!(
            split("postgres://db/c", env).unwrap().1.mode,
            SslMode::Require
        );
        assert_eq!(
            split("postgres://db/c?sslmode=sometimes", no_env)
                .err()
                .map(|e| e.to_string()),
            Some("sslmode=sometimes in the PostgreSQL URL is not one of disable, prefer, require, verify-ca, verify-full".into())
        );
        assert!(split("postgres://db/c?sslmode=verify-full", no_env)
            .err()
            .is_some_and(|e| e.to_string().contains("add sslrootcert=/path/to/ca.pem")));
    }
}
