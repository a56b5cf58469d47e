//! How the endpoint refuses a request: a status and a JSON-RPC error whose message says why.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::server::daemon::Daemon;

pub const NO_SUCH_SESSION: &str = "this server holds no MCP session with that id (it ended, idled out, was \
                                   ended to make room for a new one, as the one idle longest of its seat's 64, \
                                   or the server started again): initialize a new session";

/// A refusal: the status, a JSON-RPC error body with the sentence, and the challenge for a 401.
pub fn refuse(
    daemon: &Daemon,
    status: StatusCode,
    why: String,
    challenge: Option<&'static str>,
) -> Response {
    daemon.refusals.note(&why);
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": crate::jsonrpc::SERVER_ERROR, "message": why },
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
