//! A POST's body read before rmcp sees it, by the rules a line on the socket is read by
//! (`jsonrpc::read`): a body that is no message gets the JSON-RPC error the socket gives, under the
//! request's id where one can be read (`200`), else with `id: null` (`400`); a notification, `202` and
//! nothing. A request for a method this server does not serve gets `-32601` naming what it does serve
//! (rmcp's own says only the method's name); a `tools/call` whose params do not fit gets `-32602` in the
//! socket's words; a request whose id is in flight in its session already gets `-32600`, as on the
//! socket. A large body takes a share of what requests may hold once read (`server::arguments`), kept
//! until its answer is written; one that would take more than a request may is `-32602` under its id.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::MAX_BODY_BYTES;
use super::owners::{IdInFlight, Owners};
use crate::jsonrpc::{self, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Read};
use crate::server::arguments::{self, Share};
use crate::server::daemon::Daemon;
use crate::server::params;

/// What a request holds while it is answered.
#[derive(Default)]
pub struct RequestHolds {
    pub share: Option<Share>,
    pub id: Option<IdInFlight>,
    /// The revision an `initialize` asks for, which its answer's stream is written for.
    pub asked: Option<String>,
    /// The span of a request other than a call, when traces are on: ended when its answer is written.
    pub span: Option<crate::server::traces::RequestSpan>,
    /// The body is a request (not a notification or a response, which are answered at once).
    pub request: bool,
    /// A `tools/call` as it came, for `refused_call` when rmcp turns it away before the service runs.
    pub call: Option<SeenCall>,
}

/// A `tools/call`'s body, and its headers when traces are on (for its span), as it came.
pub struct SeenCall {
    body: axum::body::Bytes,
    headers: Option<axum::http::HeaderMap>,
    started: std::time::Instant,
}

/// The request with its body read, and what it holds while answered; or the answer it gets instead.
/// `session`: the id of a session of its caller's (checked by the gate), so rmcp's own checks would pass
/// it to the method.
pub async fn checked(
    daemon: &Daemon,
    owners: &Owners,
    seat: &str,
    request: Request,
    session: Option<&str>,
) -> Result<(Request, RequestHolds), Response> {
    let started = std::time::Instant::now();
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
    let mended = jsonrpc::mended(text);
    let mut held = RequestHolds::default();
    // What the body takes once read is weighed before anything else reads it (a count of brackets): one
    // past what a request may take is refused after a single read for its id, under it as on the socket,
    // rather than read three times over on the daemon's thread (4 MiB of `[[]],` held it 0.8 s a body).
    let cost = arguments::needs_share(&mended).then(|| arguments::cost(&mended));
    let read = jsonrpc::read(&mended, "body");
    held.request = matches!(read, Read::Request(_));
    let is_call = matches!(&read, Read::Request(r) if r.method == "tools/call");
    if let Some(cost) = cost.filter(|cost| *cost > arguments::MAX_READ) {
        let why = arguments::too_large("The request's body", cost);
        daemon.refusals.note(&why);
        return Err(match read {
            Read::Request(r) => {
                if let Some(mut span) = span_of(&r, &parts.headers, seat, None, None) {
                    span.failed(&why);
                }
                if r.method == "tools/call" {
                    daemon.count_call_error(seat, None, started.elapsed(), INVALID_PARAMS);
                }
                answered(Some(jsonrpc::error_under(
                    &r.id,
                    INVALID_PARAMS,
                    &format!("Invalid params: {why}"),
                )))
            }
            _ => super::refusal::refuse(daemon, StatusCode::PAYLOAD_TOO_LARGE, why, None),
        });
    }
    if let Read::Request(r) = read {
        if r.method == "initialize" {
            held.asked = params::asked_version(r.params);
        }
        // A call's span is made by the service, with its tool's name; any other request's here, so
        // that one refused on the way has its span too, as on the socket.
        if r.method != "tools/call" {
            held.span = span_of(&r, &parts.headers, seat, held.asked.as_deref(), None);
        }
        let mut refuse = |code: i64, why: String| {
            let mut span = held
                .span
                .take()
                .or_else(|| span_of(&r, &parts.headers, seat, None, None));
            if let Some(span) = span.as_mut() {
                span.failed(&why);
            }
            if r.method == "tools/call" {
                let name = r
                    .params
                    .and_then(|p| jsonrpc::members(p.get(), ["name"]).ok())
                    .and_then(|found| found.values[0])
                    .and_then(jsonrpc::as_string);
                daemon.count_call_error(seat, name.as_deref(), started.elapsed(), code);
            }
            answered(Some(jsonrpc::error_under(&r.id, code, &why)))
        };
        // rmcp's words for a version that does not match echo it whole: one that is no date is refused
        // here, its length said.
        let version = r
            .params
            .and_then(|p| jsonrpc::members(p.get(), ["_meta"]).ok())
            .and_then(|found| found.values[0])
            .and_then(|meta| {
                jsonrpc::members(meta.get(), ["io.modelcontextprotocol/protocolVersion"]).ok()
            })
            .and_then(|found| found.values[0]);
        if let Some(v) = version.filter(|v| v.get().len() > MAX_VERSION_BYTES) {
            return Err(refuse(
                INVALID_PARAMS,
                format!(
                    "Invalid params: params._meta's io.modelcontextprotocol/protocolVersion is {} bytes long; a \
                     protocol version is a date, such as {}",
                    v.get().len(),
                    params::INLINE
                ),
            ));
        }
        // Outside a session both name a revision, one of them 2026-07-28: they must agree, as that
        // revision asks (a session keeps its own, whatever _meta says).
        if session.is_none()
            && let Some(named) = version.and_then(jsonrpc::as_string)
            && let Some(said) = parts
                .headers
                .get("mcp-protocol-version")
                .and_then(|h| h.to_str().ok())
            && said != named
            && (params::inline_version(said) || params::inline_version(&named))
        {
            let (_, body) = refuse(
                HEADER_MISMATCH,
                format!(
                    "Header mismatch: the MCP-Protocol-Version header says {}, and params._meta's \
                     io.modelcontextprotocol/protocolVersion says {}; a request names one revision in both",
                    jsonrpc::clip(said),
                    jsonrpc::clip(&named)
                ),
            )
            .into_parts();
            return Err(with_status(StatusCode::BAD_REQUEST, body));
        }
        // Outside a session, a revision with initialize named in _meta begins none (rmcp served it as
        // 2026-07-28 would, statelessly), as on the socket.
        if r.method != "initialize"
            && !parts.headers.contains_key("mcp-session-id")
            && let Some(named) = version.and_then(jsonrpc::as_string)
            && params::known_version(&named)
            && !params::inline_version(&named)
        {
            let (_, body) = refuse(
                INVALID_REQUEST,
                format!(
                    "Invalid request: this request carries no Mcp-Session-Id, and the revision its _meta names, \
                     {named}, begins with initialize: send initialize first, then the Mcp-Session-Id header its \
                     answer carries on every request (or name {}, which has no sessions)",
                    params::INLINE
                ),
            )
            .into_parts();
            return Err(with_status(StatusCode::BAD_REQUEST, body));
        }
        // What the session's service serves is exactly the known methods. Outside a session rmcp
        // answers first what is missing (the session, or a 2026-07-28 request's own headers).
        // From 2026-07-28 on a method not served is a 404 (rmcp's answer, in words here): one this server
        // lacks, and `initialize` and `ping`, gone from that revision.
        // A session keeps its own revision, whatever a request's _meta names (helper-100: a 2025-11-25
        // session's ping whose _meta said 2026-07-28 was told ping is gone, with a 404 that ends sessions).
        let modern = super::speaks_2026(&parts.headers)
            || session.is_none()
                && version
                    .and_then(jsonrpc::as_string)
                    .is_some_and(|v| params::inline_version(&v));
        let gone = match params::removed_words(&r.method) {
            Some(why) if modern => Some(why),
            _ if modern && !params::is_known_method(&r.method) => {
                Some(params::method_not_found_words(&r.method))
            }
            _ => None,
        };
        if let Some(why) = gone {
            let (_, body) = refuse(METHOD_NOT_FOUND, why).into_parts();
            return Err(with_status(StatusCode::NOT_FOUND, body));
        }
        // rmcp asks for Mcp-Name only of a call that names its tool (one that does not is told so).
        let names_a_tool = r.method == "tools/call"
            && r.params
                .and_then(|p| jsonrpc::members(p.get(), ["name"]).ok())
                .and_then(|found| found.values[0])
                .and_then(jsonrpc::as_string)
                .is_some();
        if let Some(why) = header_missing(&parts.headers, &r.method, names_a_tool) {
            let (_, body) = refuse(HEADER_MISMATCH, why).into_parts();
            return Err(with_status(StatusCode::BAD_REQUEST, body));
        }
        if session.is_some() && r.method == "initialize" {
            return Err(refuse(
                INVALID_REQUEST,
                params::INITIALIZED_ALREADY.to_string(),
            ));
        }
        // A session begun with initialize has none of 2026-07-28's own methods, as on the socket.
        if session.is_some()
            && (!params::is_known_method(&r.method) || params::is_2026_method(&r.method))
        {
            return Err(refuse(
                METHOD_NOT_FOUND,
                params::method_not_found_words(&r.method),
            ));
        }
        if r.method == "tools/call" {
            if let Err(why) = params::call(r.params, &mut None) {
                return Err(refuse(INVALID_PARAMS, format!("Invalid params: {why}")));
            }
            // rmcp reads the body whole, as deep as serde reads: past that it would answer its own
            // parse failure, as a 415.
            if jsonrpc::depth(&mended) > jsonrpc::MAX_DEPTH {
                return Err(refuse(
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: params.arguments are nested deeper than this server reads: a request \
                         over HTTP is read whole, at most {} levels deep, the message, its params and \
                         arguments among them",
                        jsonrpc::MAX_DEPTH
                    ),
                ));
            }
        } else if let Err(answer) = params::for_rmcp(&mended, &r) {
            // The same line, said through `refuse` so the request's span carries its words.
            let said: Value = serde_json::from_slice(&answer).unwrap_or_default();
            let why = said["error"]["message"]
                .as_str()
                .unwrap_or("Invalid params");
            return Err(refuse(INVALID_PARAMS, why.to_string()));
        }
        if let Some(session) = session {
            match owners.take_id(session, &r.key()) {
                Some(id) => held.id = Some(id),
                None => {
                    return Err(refuse(
                        INVALID_REQUEST,
                        format!(
                            "Invalid request: a request with the id {} is already in flight in this session; each \
                             request in flight needs an id of its own",
                            r.key()
                        ),
                    ));
                }
            }
        }
    } else if let Read::Notification(n) = &read
        && let Some(why) = header_missing(&parts.headers, &n.method, false)
    {
        let answer = jsonrpc::error(&Value::Null, HEADER_MISMATCH, &why);
        return Err(with_status(StatusCode::BAD_REQUEST, Body::from(answer)));
    } else if let Read::Bad(answer, _) = read {
        return Err(answered(answer));
    } else if serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(&mended).is_err() {
        // A notification (or an answer) rmcp cannot read: nothing is answered, as on the socket.
        return Err(answered(None));
    }
    if let Some(cost) = cost {
        match daemon.budget.share(seat, cost).await {
            Ok(share) => held.share = Some(share),
            Err(why) => {
                if let Some(span) = held.span.as_mut() {
                    span.failed(&why);
                }
                let mut r =
                    super::refusal::refuse(daemon, StatusCode::TOO_MANY_REQUESTS, why, None);
                r.headers_mut().insert(
                    header::RETRY_AFTER,
                    axum::http::HeaderValue::from_static("1"),
                );
                return Err(r);
            }
        }
    }
    if is_call {
        held.call = Some(SeenCall {
            body: bytes.clone(),
            headers: crate::server::traces::tracer().map(|_| parts.headers.clone()),
            started,
        });
    }
    // Half a surrogate pair is taken as U+FFFD, as over the socket: rmcp is given the mended body.
    let body = match mended {
        std::borrow::Cow::Owned(fixed) => Body::from(fixed),
        std::borrow::Cow::Borrowed(_) => Body::from(bytes),
    };
    Ok((Request::from_parts(parts, body), held))
}

/// A call rmcp turned away before its service ran (its 2026-07-28 headers do not match its body, say):
/// counted and traced as a call refused on the way, as every other is (helper-96: neither). The answer
/// is given back as it was.
pub async fn refused_call(
    daemon: &Daemon,
    seat: &str,
    seen: &SeenCall,
    response: Response,
) -> Response {
    let (parts, body) = response.into_parts();
    // rmcp's refusal may echo the request (a name of 100 KB): read as large as a body may be, and said
    // in words should even that fail, never sent on empty (helper-98).
    let bytes = match axum::body::to_bytes(body, 2 * MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let why = format!("the server's refusal of this call could not be read: {e}");
            jsonrpc::error(&Value::Null, INVALID_REQUEST, &why).into()
        }
    };
    let said: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let code = said["error"]["code"].as_i64().unwrap_or(INVALID_REQUEST);
    let why = said["error"]["message"]
        .as_str()
        .map_or_else(|| format!("answered HTTP {}", parts.status), str::to_string);
    let text = String::from_utf8_lossy(&seen.body);
    if let Read::Request(r) = jsonrpc::read(&text, "body") {
        let name = r
            .params
            .and_then(|p| jsonrpc::members(p.get(), ["name"]).ok())
            .and_then(|found| found.values[0])
            .and_then(jsonrpc::as_string);
        daemon.count_call_error(seat, name.as_deref(), seen.started.elapsed(), code);
        let tool = name.as_deref().and_then(|n| daemon.served(n));
        if let Some(headers) = &seen.headers
            && let Some(mut span) = span_of(&r, headers, seat, None, tool)
        {
            span.failed(&why);
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// rmcp's code for a 2026-07-28 message whose headers do not match its body.
const HEADER_MISMATCH: i64 = -32020;

/// Under 2026-07-28 (by its MCP-Protocol-Version header, as rmcp checks) a message names its method in
/// Mcp-Method, and a call its tool in Mcp-Name; rmcp's refusal of one without says only "missing
/// required Mcp-Method header". What to send, in words; `None` when nothing is missing. `names_a_tool`:
/// a `tools/call` whose params name its tool.
fn header_missing(
    headers: &axum::http::HeaderMap,
    method: &str,
    names_a_tool: bool,
) -> Option<String> {
    if !super::speaks_2026(headers) || method == "initialize" {
        return None;
    }
    if !headers.contains_key("mcp-method") {
        return Some(format!(
            "Header mismatch: this message has no Mcp-Method header; MCP 2026-07-28 asks every message to name \
             its method in one (here Mcp-Method: {}), and a tools/call its tool in Mcp-Name too",
            jsonrpc::clip(method)
        ));
    }
    (names_a_tool && !headers.contains_key("mcp-name")).then(|| {
        "Header mismatch: this tools/call has no Mcp-Name header; MCP 2026-07-28 asks a tools/call to name \
         its tool in one, as params.name does"
            .to_string()
    })
}

fn with_status(status: StatusCode, body: Body) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The span of a request read from the body, when traces are on: its parent from its `_meta`, else its
/// headers.
fn span_of(
    r: &jsonrpc::Request<'_>,
    headers: &axum::http::HeaderMap,
    seat: &str,
    asked: Option<&str>,
    tool: Option<&str>,
) -> Option<crate::server::traces::RequestSpan> {
    crate::server::traces::tracer()?;
    let header = |h: &str| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= 512)
            .map(str::to_string)
    };
    let traceparent =
        params::meta_string(r.params, "traceparent").or_else(|| header("traceparent"));
    let tracestate = params::meta_string(r.params, "tracestate").or_else(|| header("tracestate"));
    let version = params::meta_string(r.params, "io.modelcontextprotocol/protocolVersion")
        .or_else(|| header("mcp-protocol-version"))
        .or_else(|| asked.map(str::to_string));
    crate::server::traces::RequestSpan::start(&crate::server::traces::Request {
        method: &r.method,
        served: params::is_known_method(&r.method),
        tool,
        id: Some(&r.id),
        seat,
        session: header("mcp-session-id"),
        version: version.as_deref(),
        transport: "tcp",
        traceparent: traceparent.as_deref(),
        tracestate: tracestate.as_deref(),
    })
}

/// The longest protocol version read as one (a date, quoted, with room for what a later one may add).
const MAX_VERSION_BYTES: usize = 64;

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
    let (status, why) = unread_words(e);
    let mut r = super::refusal::refuse(daemon, status, why, None);
    // Bodies past a bound are read again in a moment, when others are.
    if matches!(
        status,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
    ) {
        r.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("1"),
        );
    }
    r
}

/// The status and the sentence for a body that could not be read whole.
fn unread_words(e: &axum::Error) -> (StatusCode, String) {
    let inner = e.to_string();
    if inner.contains("length limit exceeded") {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request's body is more than the {} MiB this server reads in one request",
                MAX_BODY_BYTES >> 20
            ),
        )
    } else if inner.starts_with(super::limits::ALL_BODIES) {
        (StatusCode::SERVICE_UNAVAILABLE, inner)
    } else if inner.starts_with(super::limits::SEAT_BODIES) {
        (StatusCode::TOO_MANY_REQUESTS, inner)
    } else if inner.starts_with(super::limits::BODY_LATE) {
        // 408 tells a client that may retry that the fault was only the time its body took.
        (
            StatusCode::REQUEST_TIMEOUT,
            format!("{inner}: send it again, whole"),
        )
    } else {
        (
            StatusCode::BAD_REQUEST,
            format!("the request's body could not be read: {inner}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// A body whose first bytes come and whose rest never does.
    fn stalled() -> Request {
        let first = futures::stream::once(async {
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"{\"jsonrpc\""))
        });
        let body = Body::from_stream(first.chain(futures::stream::pending()));
        Request::post("/mcp").body(body).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_does_not_arrive_in_time_is_408_in_words() {
        let bodies = super::super::limits::Bodies::new(1 << 20);
        let request = super::super::limits::with_body_deadline(stalled(), &bodies, "w1");
        let e = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .unwrap_err();
        let (status, why) = unread_words(&e);
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{why}");
        assert_eq!(
            why,
            "the request's body did not arrive within 30 s: send it again, whole"
        );
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_413_in_words() {
        let big = Request::post("/mcp")
            .body(Body::from(vec![b' '; MAX_BODY_BYTES + 1]))
            .unwrap();
        let e = axum::body::to_bytes(big.into_body(), MAX_BODY_BYTES)
            .await
            .unwrap_err();
        let (status, why) = unread_words(&e);
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{why}");
        assert!(why.contains("more than the 4 MiB"), "{why}");
    }
}
