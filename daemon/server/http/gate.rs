//! What every HTTP request passes before rmcp sees it: a browser `Origin` the operator allowed, a bearer
//! token that is a seat's secret (looked up afresh each time: a removed or re-keyed seat is refused at its
//! next request), a session opened with that same secret, and room under the stream limits.
//!
//! Refusals are JSON-RPC error bodies holding one sentence; a secret never appears in one, nor in a log.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::settings::HttpSettings;
use crate::seats::hash_secret;
use crate::server::daemon::Daemon;
use crate::sync::lock;

/// Who is calling, for the one request being handled: read by the factory that makes its `SeatService`.
#[derive(Clone)]
pub struct Caller {
    pub seat: String,
    pub secret_hash: String,
}

tokio::task_local! {
    pub static CALLER: Caller;
}

const SESSION_HEADER: &str = "mcp-session-id";

pub struct Gate {
    daemon: Arc<Daemon>,
    origins: Vec<String>,
    /// Host names the endpoint answers to besides the loopback ones (`http.hosts`).
    hosts: Vec<String>,
    streams_per_seat: usize,
    manager: Arc<LocalSessionManager>,
    /// Each HTTP session's id → the hash of the secret it was opened with.
    owners: Mutex<HashMap<String, String>>,
    /// Streams open now (responses being written), by seat.
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl Gate {
    pub fn new(
        daemon: Arc<Daemon>,
        settings: &HttpSettings,
        manager: Arc<LocalSessionManager>,
    ) -> Self {
        Self {
            daemon,
            origins: settings
                .origins
                .iter()
                .map(|o| normalise_origin(o))
                .collect(),
            hosts: settings.hosts.clone(),
            streams_per_seat: settings.streams_per_seat,
            manager,
            owners: Mutex::default(),
            open: Arc::default(),
        }
    }
}

/// Whether `origin` is the server's own, at a host it answers to: a page it served itself, not one of a
/// name made to point at it (DNS rebinding), whose Host it does not answer to.
fn own_origin(origin: &str, host: &str, hosts: &[String]) -> bool {
    let origin = normalise_origin(origin);
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    if authority != host {
        return false;
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host.as_str(),
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
        || hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// One open stream of `seat`, given back when its response body is dropped.
struct Stream {
    open: Arc<Mutex<HashMap<String, usize>>>,
    seat: String,
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut open = lock(&self.open);
        if let Some(n) = open.get_mut(&self.seat) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.seat);
            }
        }
    }
}

pub async fn admit(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !gate.origins.iter().any(|o| *o == normalise_origin(origin))
            && !own_origin(origin, host, &gate.hosts)
        {
            return refuse(
                &gate.daemon,
                StatusCode::FORBIDDEN,
                format!(
                    "this server does not take requests from pages of the origin {}: a browser page may reach it only \
                     from an origin listed in openovai.json's \"http\".\"origins\"",
                    crate::names::escape_controls(
                        &origin.chars().take(200).collect::<String>(),
                        false
                    )
                ),
                None,
            );
        }
    }
    let secret = match bearer(request.headers()) {
        Ok(secret) => secret,
        Err(why) => {
            return refuse(
                &gate.daemon,
                StatusCode::UNAUTHORIZED,
                why,
                Some(r#"Bearer realm="ovai""#),
            );
        }
    };
    let book = gate.daemon.seats.get(&gate.daemon.inst).await;
    let caller = match book.as_ref() {
        Err(e) => {
            return refuse(
                &gate.daemon,
                StatusCode::SERVICE_UNAVAILABLE,
                e.to_string(),
                None,
            );
        }
        Ok(book) => match book.resolve_all(&secret).as_slice() {
            [seat] => Caller {
                seat: seat.to_string(),
                secret_hash: hash_secret(&secret),
            },
            [] => {
                return refuse(
                    &gate.daemon,
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "the bearer token is not the secret of any seat of the instance at {}: the seat may have been \
                         removed or given a new secret. Ask the operator for the seat's desk again (`ovai seat add \
                         NAME --url …` or `ovai seat rotate NAME` writes its .mcp.json)",
                        gate.daemon.inst.root.display()
                    ),
                    Some(r#"Bearer realm="ovai", error="invalid_token""#),
                );
            }
            several => {
                return refuse(
                    &gate.daemon,
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "the bearer token is the secret of several seats ({}), which `ovai seat` never writes: run \
                         `ovai seat rebuild` on the server",
                        several.join(", ")
                    ),
                    Some(r#"Bearer realm="ovai", error="invalid_token""#),
                );
            }
        },
    };
    drop(book);
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session {
        let owner = lock(&gate.owners).get(id).cloned();
        if owner.is_some_and(|hash| hash != caller.secret_hash) {
            return refuse(
                &gate.daemon,
                StatusCode::FORBIDDEN,
                "this MCP session was opened with another seat's secret, and a session is its own seat's alone: \
                 initialize a session of your own"
                    .into(),
                None,
            );
        }
    }
    // Room for one more stream: for the seat, and for the server as a whole (maxConnections).
    let max_total = gate.daemon.current().config.max_connections;
    let stream = {
        let mut open = lock(&gate.open);
        let total: usize = open.values().sum();
        let mine = open.get(&caller.seat).copied().unwrap_or(0);
        if mine >= gate.streams_per_seat || total >= max_total {
            let why = if mine >= gate.streams_per_seat {
                format!(
                    "the seat {} has {mine} requests and streams open on this server, its limit (\"http\".\"maxStreamsPerSeat\" \
                     in openovai.json): wait for one to finish, or close a stream, and send this again",
                    caller.seat
                )
            } else {
                format!(
                    "this server has {total} requests and streams open, its limit (maxConnections in openovai.json): \
                     send this again in a moment"
                )
            };
            drop(open);
            let mut r = refuse(&gate.daemon, StatusCode::TOO_MANY_REQUESTS, why, None);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        }
        *open.entry(caller.seat.clone()).or_insert(0) += 1;
        Stream {
            open: gate.open.clone(),
            seat: caller.seat.clone(),
        }
    };
    let is_delete = request.method() == axum::http::Method::DELETE;
    let hash = caller.secret_hash.clone();
    let response = CALLER.scope(caller, next.run(request)).await;
    match (&session, response.headers().get(SESSION_HEADER)) {
        (None, Some(id)) => {
            if let Ok(id) = id.to_str() {
                remember(&gate, id, hash).await;
            }
        }
        (Some(id), _) if is_delete => {
            lock(&gate.owners).remove(id);
        }
        _ => {}
    }
    // The stream is counted until its body is dropped: written out, or its client gone.
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _held = &stream;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// Records a new session's owner, forgetting sessions rmcp no longer holds (closed or timed out).
async fn remember(gate: &Gate, id: &str, hash: String) {
    let live: Option<Vec<String>> = if lock(&gate.owners).len() >= 64 {
        Some(
            gate.manager
                .sessions
                .read()
                .await
                .keys()
                .map(|k| k.to_string())
                .collect(),
        )
    } else {
        None
    };
    let mut owners = lock(&gate.owners);
    if let Some(live) = live {
        owners.retain(|k, _| live.contains(k));
    }
    owners.insert(id.to_string(), hash);
}

/// The secret from `Authorization: Bearer …`, or why there is none.
fn bearer(headers: &HeaderMap) -> Result<String, String> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(
            "this server needs the seat's secret as a bearer token (Authorization: Bearer …) on every request; \
             the desk that `ovai seat add NAME --url …` writes has it in .mcp.json"
                .into(),
        );
    };
    let value = value.to_str().unwrap_or("");
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(
            "the Authorization header is not a bearer token: send \"Authorization: Bearer <the seat's secret>\", as \
             the desk's .mcp.json has it"
                .into(),
        );
    }
    Ok(token.to_string())
}

/// A refusal: the status, a JSON-RPC error body with the sentence, and the challenge for a 401.
fn refuse(
    daemon: &Daemon,
    status: StatusCode,
    why: String,
    challenge: Option<&'static str>,
) -> Response {
    daemon.refusals.note(&why);
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32001, "message": why },
    });
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    if let Some(challenge) = challenge {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    response
}

/// Any path but `/mcp`.
pub async fn not_here() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "This is an ovai server: its MCP endpoint is /mcp.\n",
    )
        .into_response()
}

/// `HTTPS://Example.com:443/` and `https://example.com` are the same origin.
fn normalise_origin(origin: &str) -> String {
    let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    o.strip_suffix(":443")
        .filter(|_| o.starts_with("https://"))
        .or_else(|| o.strip_suffix(":80").filter(|_| o.starts_with("http://")))
        .map(str::to_string)
        .unwrap_or(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_as_browsers_send_them() {
        assert_eq!(
            normalise_origin("HTTPS://App.example.com:443/"),
            "https://app.example.com"
        );
        assert_eq!(normalise_origin("http://localhost:80"), "http://localhost");
        assert_eq!(
            normalise_origin("http://localhost:8080"),
            "http://localhost:8080"
        );
    }

    #[test]
    fn a_page_of_the_servers_own_origin_passes_and_a_rebound_name_does_not() {
        let gate = |origin: &str, host: &str| own_origin(origin, host, &[]);
        assert!(gate("http://localhost:7777", "localhost:7777"));
        assert!(gate("http://127.0.0.1:7777", "127.0.0.1:7777"));
        assert!(!gate(
            "http://evil.example.com:7777",
            "evil.example.com:7777"
        ));
        assert!(!gate("http://localhost:9999", "localhost:7777"));
    }

    #[test]
    fn only_a_bearer_token_is_a_secret() {
        let mut h = HeaderMap::new();
        assert!(bearer(&h).unwrap_err().contains("bearer token"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert!(bearer(&h).is_err());
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  s3cret "),
        );
        assert_eq!(bearer(&h).unwrap(), "s3cret");
    }
}
