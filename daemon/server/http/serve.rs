//! The endpoint's connections: accepted, capped, (TLS-)greeted and served by hyper, each with a time
//! limit on its request head, so a connection that sends nothing, or only half a head, or stays idle
//! between requests, gives its place back instead of holding it.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::limits::{Counted, Counts};
use crate::server::connection::ConnectionSlot;
use crate::server::daemon::Daemon;
use crate::server::places::Places;
use crate::sync::lock;

/// How long a client has to send a request's head, from the moment the connection waits for one (its
/// start, or the end of the previous answer on a kept-alive connection).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection that has shown no seat's secret keeps its place however full the server is: it
/// may be a seat's whose request is on its way (a TLS handshake, a slow link). A newcomer that finds only
/// such connections is refused (503, Retry-After), and gets in once a flood's have aged past it.
const SEAT_GRACE: Duration = Duration::from_secs(2);
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
    let places = Places::default();
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
        // An IPv4 client of a listener on [::] is ::ffff:a.b.c.d: named as itself.
        let ip = peer.ip().to_canonical();
        // One address cannot take every place: the others' clients still get in. This machine's own are
        // held only to the total: a TLS proxy here carries every remote seat, and any 127.x address is
        // another address anyway.
        let per_address = if ip.is_loopback() {
            usize::MAX
        } else {
            (max / 8).max(16)
        };
        // Full, for the address or in all: a connection on which no request has shown a seat's secret
        // and that is past SEAT_GRACE gives its place up, the oldest first: connections holding no secret
        // (a plugin's, anybody's) keep a seat out for at most SEAT_GRACE, and never close a seat's own
        // whose request is on its way. Past the total, a seat holding more than a quarter of them gives
        // up one it is not using (kept alive between requests): one seat cannot keep the others out.
        let from = match admit(&by_address, ip, per_address) {
            Some(from) => from,
            None if places.close_oldest_unseated(Some(ip), SEAT_GRACE) => {
                Counted::add(&by_address, &mut lock(&by_address), ip)
            }
            None => {
                turn_away(
                    &daemon,
                    &tcp,
                    format!(
                        "this server holds {per_address} HTTP connections from {ip} already, the most one address \
                         may hold; close some and try again"
                    ),
                );
                continue;
            }
        };
        let admitted = match ConnectionSlot::new(&open, max) {
            Some(admitted) => admitted,
            None if places.close_oldest_unseated(None, SEAT_GRACE)
                || places.wind_down_idle_of_fullest_seat(max / 4) =>
            {
                ConnectionSlot::over(&open)
            }
            None => {
                turn_away(
                    &daemon,
                    &tcp,
                    format!(
                        "this server holds {max} HTTP connections already, its limit (maxConnections in \
                         openovai.json); try again in a moment"
                    ),
                );
                continue;
            }
        };
        let place = places.add(ip);
        // An answer is written in pieces (head, events): without TCP_NODELAY, Nagle's algorithm holds
        // the last piece for the client's delayed ACK, 40 ms a call.
        let _ = tcp.set_nodelay(true);
        let app = app.clone();
        let stop = stop.clone();
        let tls = tls.clone();
        let places = places.clone();
        let told = daemon.clone();
        let counts = by_address.clone();
        daemon.tasks.spawn(async move {
            let _admitted = (
                admitted,
                ConnectionPlace {
                    from: Some(from),
                    counts,
                },
            );
            let closed = place.close.clone();
            let wind_down = place.wind_down.clone();
            let app = app.layer(axum::Extension(place.clone()));
            let served = async {
                match tls {
                    None => serve(tcp, app, stop, wind_down, true).await,
                    Some(acceptor) => {
                        let accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
                            // A request in the clear (`http://` for `https://`) begins with its method's
                            // letters, never with a TLS record: told so, rather than sent a TLS alert.
                            let mut first = [0u8; 1];
                            if matches!(tcp.peek(&mut first).await, Ok(1)) && first[0].is_ascii_alphabetic() {
                                return Err(Some(tcp));
                            }
                            acceptor.accept(tcp).await.map_err(|e| {
                                tracing::debug!(error = %e, "a TLS handshake failed");
                                None
                            })
                        });
                        match accepted.await {
                            Ok(Ok(stream)) => serve(stream, app, stop, wind_down, true).await,
                            Ok(Err(Some(mut tcp))) => {
                                use tokio::io::AsyncWriteExt as _;
                                told.refusals.note(&format!(
                                    "a request came in the clear on the HTTPS endpoint, from {ip}"
                                ));
                                let answer = super::unreadable::worded(
                                    "400 Bad Request",
                                    "This endpoint speaks HTTPS, and the request came in the clear: use its https:// \
                                     address",
                                    true,
                                );
                                let _ = tcp.write_all(&answer).await;
                                let _ = tcp.shutdown().await;
                                // The request read (a moment, a little) before the close: closed with it
                                // unread, the answer may be lost to a reset.
                                use tokio::io::AsyncReadExt as _;
                                let mut rest = [0u8; 16 * 1024];
                                let _ = tokio::time::timeout(Duration::from_millis(200), async {
                                    let mut left: usize = 256 * 1024;
                                    while left > 0 {
                                        match tcp.read(&mut rest).await {
                                            Ok(0) | Err(_) => break,
                                            Ok(n) => left = left.saturating_sub(n),
                                        }
                                    }
                                })
                                .await;
                            }
                            Ok(Err(None)) => {}
                            Err(_) => tracing::debug!("a TLS handshake took too long"),
                        }
                    }
                }
            };
            tokio::select! {
                _ = served => {}
                _ = closed.cancelled() => tracing::debug!("an HTTP connection with no seat gave its place up"),
            }
            places.remove(&place);
        });
    }
}

/// Open connections the status page's and the metrics' own listeners each hold at most: a browser or
/// two and a Prometheus need a few.
const OPERATOR_CONNECTIONS: usize = 32;

/// Accepts on an operator's listener (the status page's, the metrics') until the daemon closes: each
/// connection with the same time limit on its request head as the endpoint's, and at most
/// OPERATOR_CONNECTIONS open, the oldest closed to make room, so that connections left open by anybody
/// on this machine cannot take the daemon's descriptors (nor keep the operator out for long). One that
/// showed the page's cookie is never closed so (anybody's connections would cut the page's live
/// stream); when every one has, a new connection is turned away.
pub async fn accept_operator(listener: TcpListener, app: Router, daemon: Arc<Daemon>) {
    let places = Places::default();
    let open = Arc::new(AtomicUsize::new(0));
    loop {
        let tcp = tokio::select! {
            a = listener.accept() => match a {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection to the status page or metrics failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = daemon.closing.cancelled() => return,
        };
        if open.load(Ordering::Relaxed) >= OPERATOR_CONNECTIONS
            && !places.close_oldest_unseated(None, Duration::ZERO)
        {
            let why = format!(
                "This listener holds {OPERATOR_CONNECTIONS} connections of the status page already, the most it \
                 holds: close a tab of it and try again.\n"
            );
            let response = format!(
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n\
                 content-length: {}\r\n\r\n{why}",
                why.len()
            );
            // Never waited on: a client that does not read cannot hold the accept loop.
            let _ = tcp.try_write(response.as_bytes());
            continue;
        }
        let place = places.add(
            tcp.peer_addr()
                .map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip()),
        );
        let _ = tcp.set_nodelay(true);
        let (app, stop, places, open) = (
            app.clone(),
            daemon.closing.clone(),
            places.clone(),
            open.clone(),
        );
        open.fetch_add(1, Ordering::Relaxed);
        let app = app.layer(axum::Extension(place.clone()));
        daemon.tasks.spawn(async move {
            tokio::select! {
                _ = serve(tcp, app, stop, place.wind_down.clone(), false) => {}
                _ = place.close.cancelled() => {}
            }
            places.remove(&place);
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Serves one connection until it closes; `stop` (the daemon's) or `wind_down` (room wanted) closes it
/// once what is under way on it is answered. `mcp`: the MCP endpoint, whose refusals are JSON-RPC's.
async fn serve<I>(
    io: I,
    app: Router,
    stop: CancellationToken,
    wind_down: CancellationToken,
    mcp: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(
            TokioIo::new(super::unreadable::Worded::new(io, mcp)),
            TowerToHyperService::new(app),
        );
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
        _ = wind_down.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// A connection's place in its address's count. The last connection closed gives back what the
/// endpoint's requests freed, as a socket session's end does: an instance whose seats are all remote
/// held its peak for good (helper-105). Not per request: the allocator's count walks every arena.
struct ConnectionPlace {
    from: Option<Counted<IpAddr>>,
    counts: Counts<IpAddr>,
}

impl Drop for ConnectionPlace {
    fn drop(&mut self) {
        drop(self.from.take());
        if lock(&self.counts).is_empty() {
            crate::memory::give_back();
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
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": { "code": crate::jsonrpc::SERVER_ERROR, "message": why } })
        .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // Never waited on: a client that does not read cannot hold the accept loop.
    let _ = tcp.try_write(response.as_bytes());
}
