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

/// What `/metrics` answers (and every other path); the figures' store is set up here.
pub fn app(daemon: &Arc<Daemon>) -> axum::Router {
    let _ = daemon
        .metrics
        .set(Arc::new(super::metrics::Metrics::default()));
    let for_route = daemon.clone();
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let daemon = for_route.clone();
                async move {
                    let Some(metrics) = daemon.metrics.get() else {
                        return StatusCode::NOT_FOUND.into_response();
                    };
                    let generation = daemon.current();
                    let now = Now {
                        sessions: daemon.sessions.count_by_seat_and_transport(),
                        generation: generation.number,
                        plugins: generation.plugin_counts(),
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
}
