//! TLS in the daemon (`http.tls`): rustls with the certificate chain and key from PEM files. Handshakes run
//! in tasks of their own, so a client that stalls its handshake never holds the accept loop.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::settings::TlsFiles;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Connections whose handshake finished, for axum.
pub struct Listener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl Listener {
    pub fn new(
        tcp: TcpListener,
        acceptor: TlsAcceptor,
        tasks: &TaskTracker,
        stop: CancellationToken,
    ) -> Self {
        let local = tcp
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, ready) = mpsc::channel(64);
        let handshakes = tasks.clone();
        tasks.spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = tcp.accept() => a,
                    _ = stop.cancelled() => return,
                };
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting an HTTPS connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // See the plain listener: answers are written in pieces.
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                handshakes.spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "a TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "a TLS handshake took too long"),
                    }
                });
            }
        });
        Self { ready, local }
    }
}

impl axum::serve::Listener for Listener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop ended (shutdown): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
