//! The metrics endpoint: `/metrics` on its own address, the figures read from the daemon at each scrape.

use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::daemon::Daemon;
use super::metrics::Now;

/// Binds the metrics address (before the first load, so a mistake stops the start).
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// What `/metrics` answers (and every other path); the figures' store is set up here. On `loopback`,
/// only a request naming a loopback host is answered.
pub fn app(daemon: &Arc<Daemon>, loopback: bool) -> axum::Router {
    let _ = daemon
        .metrics
        .set(Arc::new(super::metrics::Metrics::default()));
    let for_route = daemon.clone();
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let daemon = for_route.clone();
                async move {
                    let Some(metrics) = daemon.metrics.get() else {
                        return StatusCode::NOT_FOUND.into_response();
                    };
                    let generation = daemon.current();
                    // Every seat has its series, 0 when it has no session: a series that goes away
                    // reads as no data, not as none open.
                    let mut sessions = daemon.sessions.count_by_seat_and_transport();
                    let book = daemon.seats.get(&daemon.inst).await;
                    if let Ok(book) = book.as_ref().as_ref() {
                        let transports: &[&'static str] = if daemon.http.get().is_some() {
                            &["socket", "http"]
                        } else {
                            &["socket"]
                        };
                        for seat in book.seats.keys() {
                            for t in transports {
                                sessions.entry((seat.clone(), *t)).or_insert(0);
                            }
                        }
                    }
                    let (served, not_served) = generation.plugin_counts();
                    let not_answering = generation.host.not_answering().len();
                    let now = Now {
                        sessions,
                        generation: generation.number,
                        plugins: (
                            served.saturating_sub(not_answering),
                            not_served,
                            not_answering,
                        ),
                        running: daemon
                            .generations()
                            .iter()
                            .map(|g| g.host.calls_in_flight())
                            .sum(),
                    };
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.scraped(now),
                    )
                        .into_response()
                }
            }),
        )
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "This is ovai's metrics endpoint: Prometheus reads /metrics.\n",
            )
        })
        .method_not_allowed_fallback(|| async {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                "/metrics is read with GET, as Prometheus does.\n",
            )
        });
    if loopback {
        app.layer(axum::middleware::from_fn(loopback_only))
    } else {
        app
    }
}

/// On loopback, a request naming another host is refused, so that a page the operator's browser loads
/// cannot read the seats' and tools' names by pointing a name of its own at 127.0.0.1 (DNS rebinding).
async fn loopback_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let line = request.uri().authority().map(|a| a.as_str());
    let ours = match (hosts.next().map(|h| h.to_str()), hosts.next()) {
        // No Host at all (HTTP/1.0, a script): no browser's request.
        (None, _) => line.is_none_or(crate::names::is_loopback_authority),
        (Some(Ok(host)), None) => {
            crate::names::is_loopback_authority(host)
                && !crate::names::line_names_another_host(line, host)
        }
        _ => false,
    };
    if ours {
        return next.run(request).await;
    }
    (
        StatusCode::FORBIDDEN,
        "This is ovai's metrics endpoint, on loopback: it answers a request naming 127.0.0.1, localhost or \
         another loopback address, and refuses one naming another host.\n",
    )
        .into_response()
}
