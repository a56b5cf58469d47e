//! A POST's body read before rmcp sees it, so that a body rmcp cannot take is answered as a line is on
//! the socket (`server::jsonrpc`): rmcp answers a body it cannot parse with `415` and a line of its own,
//! and a known method whose params do not fit as an unknown method. Such a body gets the JSON-RPC error
//! the socket gives, under the request's id where one can be read (`200`), else with `id: null` (`400`);
//! a notification, `202` and nothing. A request for a method this server does not serve gets `-32601`
//! naming what it does serve, as on the socket (rmcp's own says only the method's name).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use serde_json::Value;

use super::MAX_BODY_BYTES;
use crate::server::daemon::Daemon;
use crate::server::jsonrpc::{self, Taken};

/// The request with its body read, or the answer it gets instead. `in_session`: it carries the id of a
/// session of its caller's (checked by the gate), so rmcp's own checks would pass it to the method.
pub async fn checked(
    daemon: &Daemon,
    request: Request,
    in_session: bool,
) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => return Err(unread(daemon, &e)),
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Err(answered(Some(jsonrpc::error(
            &Value::Null,
            jsonrpc::PARSE_ERROR,
            "Parse error: the body is not UTF-8",
        ))));
    };
    match jsonrpc::take(text, "body") {
        // Half a surrogate pair is taken as U+FFFD, as over the socket: rmcp is given the mended body.
        Taken::Message(msg) => {
            // What the session's service serves is exactly the known methods. Outside a session rmcp
            // answers first what is missing (the session, or a 2026-07-28 request's own headers).
            if in_session
                && let ClientJsonRpcMessage::Request(r) = &*msg
                && !jsonrpc::is_known_method(r.request.method())
            {
                let method: String = r.request.method().chars().take(100).collect();
                return Err(answered(Some(jsonrpc::error(
                    &serde_json::to_value(&r.id).unwrap_or_default(),
                    jsonrpc::METHOD_NOT_FOUND,
                    &jsonrpc::method_not_found_words(&crate::names::escape_controls(
                        &method, false,
                    )),
                ))));
            }
            let body = match jsonrpc::well_formed(text) {
                Some(fixed) => Body::from(fixed),
                None => Body::from(bytes),
            };
            Ok(Request::from_parts(parts, body))
        }
        Taken::Answered(answer) => Err(answered(answer)),
    }
}

fn answered(answer: Option<Vec<u8>>) -> Response {
    let Some(answer) = answer else {
        return StatusCode::ACCEPTED.into_response();
    };
    let under_an_id = serde_json::from_slice::<Value>(&answer)
        .ok()
        .is_some_and(|v| !v["id"].is_null());
    let status = if under_an_id {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    (status, [(header::CONTENT_TYPE, "application/json")], answer).into_response()
}

/// A body that could not be read whole: too long, too slow, or more than the server reads at once.
fn unread(daemon: &Daemon, e: &axum::Error) -> Response {
    let inner = e.to_string();
    let (status, why) = if inner.contains("length limit exceeded") {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request's body is more than the {} MiB this server reads in one request",
                MAX_BODY_BYTES >> 20
            ),
        )
    } else if inner.starts_with("the server is reading") {
        (StatusCode::SERVICE_UNAVAILABLE, inner)
    } else {
        (
            StatusCode::BAD_REQUEST,
            format!("the request's body could not be read: {inner}"),
        )
    };
    super::gate::refuse(daemon, status, why, None)
}
