//! The Streamable HTTP endpoint at `/mcp`, for seats on other machines: the same daemon, tools, generation
//! and promises as the Unix socket, with the seat's secret as a bearer token on every request.
//!
//! A request passes `gate` first (its `Origin`, its token, its session's owner, the stream limits) and only
//! then reaches rmcp's `StreamableHttpService`, which makes a `SeatService` for the seat the token named.

mod gate;
mod body;
mod plain;
pub mod serve;
mod tls;
mod browser;
mod owners;
mod refusal;
mod limits;
mod unreadable;
mod resume;
mod carried;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::daemon::Daemon;
use super::session::SeatService;
use crate::instance::http::HttpSettings;

/// The largest request body. Smaller than the socket's line limit: a remote client is anybody with a
/// token, and a parsed message takes many times its size in memory.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of request bodies all clients together may have the server hold at once.
pub const BODIES_IN_FLIGHT: usize = 32 * 1024 * 1024;

/// Whether a request's MCP-Protocol-Version header says 2026-07-28 or a later revision this server
/// speaks: such a request has no session, and names its method (and a call's tool) in headers of its
/// own. Any other revision is rmcp's to refuse.
fn speaks_2026(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(super::params::inline_version)
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "The HTTP endpoint could not listen on {addr}: {source}. Choose another address or port in openovai.json's \"http\" (or --http), or stop what uses it."
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Tls(String),
}

/// The endpoint, bound and ready to be served once the daemon exists.
pub use gate::Gate;

pub struct Bound {
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    settings: HttpSettings,
    pub addr: SocketAddr,
}

/// Binds the address (and reads the certificate) before the first load, so a mistake stops the start.
pub async fn bind(settings: &HttpSettings, root: &std::path::Path) -> Result<Bound, HttpError> {
    if let Some(tls) = &settings.tls {
        crate::instance::http::serving_key(root.join(&tls.key));
    }
    let tls = match &settings.tls {
        Some(files) => Some(tls::acceptor(files, root).map_err(HttpError::Tls)?),
        None => None,
    };
    let listener = TcpListener::bind(settings.listen)
        .await
        .map_err(|source| HttpError::Bind {
            addr: settings.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| HttpError::Bind {
        addr: settings.listen,
        source,
    })?;
    Ok(Bound {
        listener,
        tls,
        settings: settings.clone(),
        addr,
    })
}

impl Bound {
    /// The URL sessions use, for runtime.log and `ovai status`.
    pub fn url(&self) -> String {
        // Listening on every address: name this machine, as a client elsewhere would.
        let host = if self.addr.ip().is_unspecified() {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .map(|h| format!("{h}:{}", self.addr.port()))
                .unwrap_or_else(|| self.addr.to_string())
        } else {
            self.addr.to_string()
        };
        format!("{}://{host}/mcp", self.settings.scheme())
    }

    /// Serves until the daemon's `http_stop` fires (once every call is answered at shutdown).
    pub fn serve(self, daemon: &Arc<Daemon>) {
        // Idle sessions are closed by the gate, which knows which hold a stream open (`gate::close_idle`).
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = None;
        let manager = Arc::new(manager);
        // Host and Origin are checked by the gate, in words naming the setting to change.
        let (carried, said) =
            carried::Carried::new(daemon.inst.private_dir().join("http-sessions.json"), || {
                gate::CALLER.try_with(|c| c.secret_hash.clone()).ok()
            });
        if let Some(said) = said {
            daemon.log.row(crate::runtime_log::Topic::Server, &said);
        }
        let carried = Arc::new(carried);
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(daemon.http_stop.child_token())
            .with_max_request_body_bytes(MAX_BODY_BYTES)
            .disable_allowed_hosts();
        config.session_store = Some(carried.clone());
        let resumable = Arc::new(resume::Resumable::new(
            manager.clone(),
            daemon.tasks.clone(),
            || gate::CALLER.try_with(|c| c.seat.clone()).ok(),
            carried.clone(),
        ));
        let for_factory = daemon.clone();
        let service = StreamableHttpService::new(
            move || {
                gate::CALLER
                    .try_with(|c| {
                        SeatService::over_http(for_factory.clone(), &c.seat, &c.secret_hash)
                    })
                    .map_err(|_| {
                        std::io::Error::other("a request reached the MCP service without a seat")
                    })
            },
            resumable.clone(),
            config,
        );
        let gate = Arc::new(gate::Gate::new(
            daemon.clone(),
            &self.settings,
            resumable,
            carried,
        ));
        daemon.tasks.spawn(gate::close_idle(
            gate.clone(),
            std::time::Duration::from_secs(self.settings.session_idle_secs),
            daemon.http_stop.clone(),
        ));
        let _ = daemon
            .http
            .set(gate.clone() as Arc<dyn super::sessions::RemoteSessions>);
        let mut app = Router::new()
            .route_service("/mcp", service)
            .fallback(gate::not_here)
            .layer(axum::middleware::from_fn_with_state(
                gate.clone(),
                gate::admit,
            ));
        // The operator's status page, when asked for here (`"onHttp": true`; one with a listener of its
        // own is not served here too), beside the seats' endpoint and outside its bearer check: it has a
        // check of its own (`server::web`).
        let page_here = matches!(&daemon.current().config.web, Some(None));
        if page_here && daemon.web.get().is_some() {
            let page = super::web::router(daemon.clone(), true).layer(
                axum::middleware::from_fn_with_state(gate.clone(), gate::host_checked),
            );
            app = app.merge(page);
        }
        let stop = daemon.http_stop.clone();
        daemon.tasks.spawn(serve::accept(
            self.listener,
            self.tls,
            app,
            daemon.clone(),
            stop,
        ));
    }
}
