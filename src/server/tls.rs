//! TLS for `serve`: rustls with the aws-lc-rs provider, preferring the post-quantum hybrid key
//! exchange X25519MLKEM768 and falling back to classical groups for older clients; ALPN offers
//! HTTP/2 and HTTP/1.1.

use std::path::Path;
use std::sync::Arc;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate chain {path}: {reason}")]
    Certificate { path: String, reason: String },
    #[error("cannot read the private key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("invalid TLS configuration: {0}")]
    Config(String),
}

/// The crypto provider: aws-lc-rs with its default key-exchange groups, which put the hybrid
/// X25519MLKEM768 first.
pub fn provider() -> CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

/// The key-exchange groups offered, most preferred first (for logs and tests).
pub fn key_exchange_groups() -> Vec<String> {
    provider()
        .kx_groups
        .iter()
        .map(|group| format!("{:?}", group.name()))
        .collect()
}

/// A server configuration from PEM files: a certificate chain and its private key.
pub fn server_config(cert_path: &Path, key_path: &Path) -> Result<ServerConfig, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .and_then(|certs| certs.collect())
        .map_err(|e| TlsError::Certificate {
            path: cert_path.display().to_string(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Certificate {
            path: cert_path.display().to_string(),
            reason: "no certificate found".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| TlsError::Key {
        path: key_path.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The axum-server form of [`server_config`].
pub fn rustls_config(cert_path: &Path, key_path: &Path) -> Result<RustlsConfig, TlsError> {
    Ok(RustlsConfig::from_config(Arc::new(server_config(
        cert_path, key_path,
    )?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hybrid_post_quantum_group_is_preferred_with_classical_fallback() {
        let groups = key_exchange_groups();
        assert_eq!(
            groups.first().map(String::as_str),
            Some("X25519MLKEM768"),
            "{groups:?}"
        );
        assert!(groups.iter().any(|g| g == "X25519"), "{groups:?}");
    }

    #[test]
    fn missing_files_are_named_in_the_error() {
        let err = server_config(
            Path::new("/nonexistent/cert.pem"),
            Path::new("/nonexistent/key.pem"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/nonexistent/cert.pem"), "{err}");
    }
}
