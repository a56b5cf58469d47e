//! TLS in the daemon (`http.tls`): rustls with the certificate chain and key from PEM files. Each handshake
//! runs in its connection's own task (`serve`), so a client that stalls it never holds the accept loop.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::instance::http::TlsFiles;

pub fn acceptor(files: &TlsFiles, root: &Path) -> Result<TlsAcceptor, String> {
    let cert_path = root.join(&files.cert);
    let key_path = root.join(&files.key);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| {
            format!(
                "The TLS certificate {} (\"http\".\"tls\".\"cert\") could not be read as PEM: {e}.",
                cert_path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "The TLS certificate file {} holds no certificate (it wants PEM, \"-----BEGIN CERTIFICATE-----\").",
            cert_path.display()
        ));
    }
    refuse_if_others_read(&key_path)?;
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
        format!(
            "The TLS key {} (\"http\".\"tls\".\"key\") could not be read as a PEM private key: {e}.",
            key_path.display()
        )
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS could not be set up: {e}."))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!(
                "The TLS certificate {} and key {} do not make a usable pair: {e}.",
                cert_path.display(),
                key_path.display()
            )
        })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A key that others on this machine can read is no longer the endpoint's alone: refused, saying how to
/// make it so.
fn refuse_if_others_read(key: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(key)
        .map_err(|e| {
            format!(
                "The TLS key {} (\"http\".\"tls\".\"key\") could not be read: {e}.",
                key.display()
            )
        })?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(format!(
            "The TLS key {} can be read by users other than its owner (mode {:o}): anybody who can read it \
             can pose as this server. Make it the owner's alone (chmod 600 {}) and start again.",
            key.display(),
            mode & 0o777,
            key.display()
        ));
    }
    Ok(())
}
