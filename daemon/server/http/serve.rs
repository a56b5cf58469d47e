//! The endpoint's connections: accepted, capped, (TLS-)greeted and served by hyper, each with a time
//! limit on its request head, so a connection that sends nothing, or only half a head, or stays idle
//! between requests, gives its place back instead of holding it.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::limits::{Counted, Counts};
use crate::server::connection::Admitted;
use crate::server::daemon::Daemon;
use crate::sync::lock;

/// How long a client has to send a request's head, from the moment the connection waits for one (its
/// start, or the end of the previous answer on a kept-alive connection).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts until `stop` fires. HTTP connections are counted apart from the socket's (each up to
/// `maxConnections`), so a flood on the network port cannot lock out the seats on this machine.
pub async fn accept(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    daemon: Arc<Daemon>,
    stop: CancellationToken,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let by_address: Counts<IpAddr> = Arc::default();
    loop {
        let (tcp, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors, most likely: back off instead of spinning on the error.
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => return,
            // Shutting down: calls in flight finish, and no new connection is taken meanwhile.
            _ = daemon.closing.cancelled() => return,
        };
        let max = daemon.current().config.max_connections;
        // One address cannot take every place: the others' clients still get in.
        let per_address = (max / 8).max(16);
        let Some(from) = admit(&by_address, peer.ip(), per_address) else {
            turn_away(
                &daemon,
                &tcp,
                format!(
                    "this server holds {per_address} HTTP connections from {} already, the most one address may hold; \
                     close some and try again",
                    peer.ip()
                ),
            );
            continue;
        };
        let Some(admitted) = Admitted::new(&open, max) else {
            turn_away(
                &daemon,
                &tcp,
                format!(
                    "this server holds {max} HTTP connections already, its limit (maxConnections in \
                     openovai.json); try again in a moment"
                ),
            );
            continue;
        };
        // An answer is written in pieces (head, events): without TCP_NODELAY, Nagle's algorithm holds
        // the last piece for the client's delayed ACK, 40 ms a call.
        let _ = tcp.set_nodelay(true);
        let app = app.clone();
        let stop = stop.clone();
        let tls = tls.clone();
        daemon.tasks.spawn(async move {
            let _admitted = (admitted, from);
            match tls {
                None => serve(tcp, app, stop).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => serve(stream, app, stop).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "a TLS handshake failed"),
                        Err(_) => tracing::debug!("a TLS handshake took too long"),
                    }
                }
            }
        });
    }
}

async fn serve<I>(io: I, app: Router, stop: CancellationToken)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(
            TokioIo::new(super::unreadable::Worded::new(io)),
            TowerToHyperService::new(app),
        );
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// One connection counted against its address, given back when dropped; `None` when the address holds
/// `max` already.
fn admit(counts: &Counts<IpAddr>, ip: IpAddr, max: usize) -> Option<Counted<IpAddr>> {
    let mut held = lock(counts);
    if held.get(&ip).is_some_and(|n| *n >= max) {
        return None;
    }
    Some(Counted::add(counts, &mut held, ip))
}

fn turn_away(daemon: &Daemon, tcp: &tokio::net::TcpStream, why: String) {
    daemon.refusals.note(&why);
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32001, "message": why } })
        .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // Never waited on: a client that does not read cannot hold the accept loop.
    let _ = tcp.try_write(response.as_bytes());
}
