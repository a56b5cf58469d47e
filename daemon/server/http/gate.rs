//! What every HTTP request passes before rmcp sees it: a `Host` this server answers to and a browser
//! `Origin` the operator allowed (`browser`), a bearer token that is a seat's secret (looked up afresh each
//! time: a removed or re-keyed seat is refused at its next request), a session opened with that same
//! secret (`owners`), room under the stream and session limits, and a body of bounded size that arrives
//! in bounded time.
//!
//! Refusals are JSON-RPC error bodies holding one sentence; a secret never appears in one, nor in a log.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::MAX_BODY_BYTES;
use super::browser::Browsers;
use super::limits::{Bodies, Streams, with_body_deadline};
use super::owners::{Check, Owners, SESSIONS_PER_SEAT};
use super::refusal::{NO_SUCH_SESSION, refuse};
use super::resume::Resumable;
use crate::instance::http::HttpSettings;
use crate::runtime_log::Topic;
use crate::seats::hash_secret;
use crate::server::daemon::Daemon;

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
/// How long a session ended by a change of its seat waits for its stopped calls' answers to be written.
const ENDING_ANSWERED: Duration = Duration::from_secs(2);

pub struct Gate {
    daemon: Arc<Daemon>,
    browsers: Browsers,
    streams: Streams,
    bodies: Bodies,
    /// rmcp's sessions, wrapped: closing a session through it forgets what it kept for a resume too.
    manager: Arc<Resumable>,
    owners: Owners,
    /// For each seat that tried another's session: when it was last said, and the tries since.
    other_sessions: std::sync::Mutex<HashMap<String, (Option<Instant>, u64)>>,
    /// The sessions the last stop left, and those the next start is to take up.
    carried: Arc<super::carried::Carried>,
}

impl Gate {
    pub fn new(
        daemon: Arc<Daemon>,
        settings: &HttpSettings,
        manager: Arc<Resumable>,
        carried: Arc<super::carried::Carried>,
    ) -> Self {
        Self {
            carried,
            daemon,
            browsers: Browsers::new(settings),
            streams: Streams::new(settings.streams_per_seat),
            bodies: Bodies::new(super::BODIES_IN_FLIGHT),
            manager,
            owners: Owners::default(),
            other_sessions: std::sync::Mutex::default(),
        }
    }

    /// Closes an HTTP session, which ends its streams.
    pub async fn close(&self, id: &str) {
        self.owners.forget(id);
        let _ = self.manager.close_session(&id.to_string().into()).await;
    }

    /// A runtime.log row for a seat that sent a request in another seat's session: no client does that
    /// by mistake. One a minute for each seat, the rest counted into the next (helper-80: it was said
    /// only on stderr, without a seat).
    fn tried_other_session(&self, seat: &str, owner: &str) {
        let now = Instant::now();
        let mut tried = crate::sync::lock(&self.other_sessions);
        let (last, unsaid) = tried.entry(seat.to_string()).or_insert((None, 0));
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(60)) {
            *unsaid += 1;
            return;
        }
        let more = match std::mem::take(unsaid) {
            0 => String::new(),
            n => format!(" It tried {n} more times since the last row."),
        };
        *last = Some(now);
        let whose = if owner == seat {
            format!("its own old secret (before `ovai seat rotate {seat}`)")
        } else {
            format!("the seat {owner}'s secret")
        };
        self.daemon.log.row(
            crate::runtime_log::Topic::Seats,
            &format!(
                "The seat {seat} sent a request over HTTP in a session opened with {whose}, and was refused: a \
                 session is its own seat's alone.{more}"
            ),
        );
    }

    /// Forgets sessions rmcp no longer holds (closed, or idle past its limit).
    async fn prune(&self) {
        prune(&self.manager.inner, &self.owners).await;
    }
}

async fn prune(manager: &LocalSessionManager, owners: &Owners) {
    let taken = Instant::now();
    let live: HashSet<String> = manager
        .sessions
        .read()
        .await
        .keys()
        .map(|k| k.to_string())
        .collect();
    owners.prune(&live, taken);
}

/// A body this server would not read as its client meant it, and why: compressed (it reads bodies as
/// sent), or in a transfer coding other than chunked (which hyper would pass on undecoded). One framed by
/// both Transfer-Encoding and Content-Length is read chunked by hyper, which drops the length.
fn unread_framing(headers: &axum::http::HeaderMap) -> Option<(StatusCode, &'static str)> {
    let said = |name| {
        headers
            .get_all(name)
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("?").split(','))
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect::<Vec<_>>()
    };
    let encoding = said(header::CONTENT_ENCODING);
    if encoding.iter().any(|c| c != "identity") {
        return Some((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body is sent with a Content-Encoding (compressed), and this server reads bodies as they are: \
             send it without one",
        ));
    }
    let transfer = said(header::TRANSFER_ENCODING);
    if transfer.iter().any(|c| c != "chunked") {
        return Some((
            StatusCode::NOT_IMPLEMENTED,
            "the body is sent in a Transfer-Encoding other than chunked, which this server does not read: send \
             it plain or chunked",
        ));
    }
    None
}

/// A session's GET stream opened (or resumed) while it has one open ends that one first: rmcp would give
/// the newcomer none of the session's messages, for good, where it is a client reconnecting before the
/// server saw its old stream go. Not so a request's own stream resumed (`Last-Event-ID` naming one), nor
/// a GET from `0` (the id every stream's priming event has) while a request of the session runs: an
/// EventSource reconnecting that request's stream would take the live stream's place, and be taken from
/// in turn. Nor one rmcp will turn away (no `text/event-stream` accepted, a protocol version it does
/// not know): a refused request changes nothing.
async fn takes_the_stream(gate: &Gate, id: &str, headers: &axum::http::HeaderMap) {
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let streams = headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")));
    // A version rmcp does not know, or one without sessions (2026-07-28: rmcp answers 405), and an id
    // it cannot read as the session stream's (it answers an empty stream), are refused there.
    let served = headers.get("mcp-protocol-version").is_none_or(|v| {
        v.to_str().is_ok_and(|v| {
            super::super::params::known_version(v) && v < super::super::params::INLINE
        })
    });
    let readable = last.is_none_or(|v| v.trim().parse::<u64>().is_ok());
    if !streams || !served || !readable {
        return;
    }
    if last.is_some_and(|v| v.trim() == "0") && gate.manager.running(id) {
        return;
    }
    let handle = gate
        .manager
        .inner
        .sessions
        .read()
        .await
        .get(&rmcp::transport::common::server_side_http::SessionId::from(
            id,
        ))
        .cloned();
    if let Some(handle) = handle {
        let _ = handle.close_standalone_sse_stream(None).await;
    }
}

/// Closes a session whose seat changed once the requests it is answering are written (the calls the change
/// stopped say why, and its client may read on), or after ENDING_ANSWERED: its new requests are refused
/// already, the secret being no seat's.
async fn close_when_answered(manager: Arc<Resumable>, owners: Owners, id: String) {
    // An initialised session's registration ends with its seat too: one of the two closes it.
    if !owners.claim_close(&id) {
        return;
    }
    let until = tokio::time::Instant::now() + ENDING_ANSWERED;
    while owners.answering(&id) && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    owners.forget(&id);
    let _ = manager.close_session(&id.into()).await;
}

impl crate::server::sessions::RemoteSessions for Gate {
    fn close(&self, id: String) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(close_when_answered(
            self.manager.clone(),
            self.owners.clone(),
            id,
        ))
    }

    /// Closes the sessions of seats that are gone or re-keyed (initialised or not), each in a task of its
    /// own: closing waits on the session's worker, and a seat change must not.
    fn end_unless(&self, still_valid: &dyn Fn(&str, &str) -> bool) {
        for id in self.owners.ending(still_valid) {
            let closing = close_when_answered(self.manager.clone(), self.owners.clone(), id);
            self.daemon.tasks.spawn(closing);
        }
    }

    fn initialized(&self, id: &str, ended: tokio_util::sync::CancellationToken) {
        self.owners.initialized(id, ended);
    }

    fn carry_over(&self) {
        // A row, not only stderr: the person whose clients start over reads runtime.log (helper-101).
        if let Err(row) = self.carried.keep() {
            self.daemon.log.warn_row(Topic::Server, &row);
        }
    }

    fn starting(&self) -> futures::future::BoxFuture<'static, HashMap<String, usize>> {
        let (manager, owners) = (self.manager.clone(), self.owners.clone());
        Box::pin(async move {
            prune(&manager.inner, &owners).await;
            owners.starting()
        })
    }
}

pub async fn admit(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    // A page of an allowed origin may read what it was answered (refusals included); no other may.
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .filter(|o| {
            gate.browsers
                .origin_allowed(o.to_str().unwrap_or(""), request.headers())
        })
        .cloned();
    // Busy from the start: a connection is not wound down to make room while its request is checked.
    let working = request
        .extensions()
        .get::<Arc<crate::server::places::Place>>()
        .map(|place| place.working());
    let mut response = check_and_run(&gate, request, next, working).await;
    if let Some(origin) = origin {
        Browsers::allow(response.headers_mut(), &origin, false);
    }
    response
}

/// The endpoint's Host rules for what it serves beside `/mcp` (the status page, which has its own
/// cookie in place of a bearer token): one Host, and one this server answers to.
pub async fn host_checked(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    if let Some(refused) = given_twice(&gate, request.headers(), &[("host", "Host")]) {
        return refused;
    }
    if let Some(why) = other_authority(&request) {
        return refuse(&gate.daemon, StatusCode::BAD_REQUEST, why, None);
    }
    if let Some((status, why)) = gate.browsers.host_refused(request.headers()) {
        return refuse(&gate.daemon, status, why, None);
    }
    next.run(request).await
}

/// A request line naming a host (`POST http://name/mcp`) is for that host, whatever the Host header says
/// (RFC 9112): the Host rule reads the header, so the two must name the same (helper-80).
fn other_authority(request: &Request) -> Option<String> {
    let named = request.uri().authority()?;
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .unwrap_or_default();
    if !crate::names::line_names_another_host(Some(named.as_str()), &host) {
        return None;
    }
    let shown = |s: &str| {
        crate::names::escape_controls(&s.chars().take(200).collect::<String>(), false).into_owned()
    };
    Some(format!(
        "this request's line names the host {:?}, and its Host header {:?}: send the path alone (POST /mcp), \
         with a Host header naming this server",
        shown(named.as_str()),
        shown(&host)
    ))
}

/// The refusal of a request that gives one of these headers (name, as written) more than once.
fn given_twice(gate: &Gate, headers: &HeaderMap, names: &[(&str, &str)]) -> Option<Response> {
    let (n, written) = names
        .iter()
        .map(|(name, written)| (headers.get_all(*name).iter().count(), *written))
        .find(|(n, _)| *n > 1)?;
    let why = format!(
        "this request carries {n} {written} headers, and this server takes exactly one: send one"
    );
    Some(refuse(&gate.daemon, StatusCode::BAD_REQUEST, why, None))
}

/// `working`: the connection's request under way, held until the answer's body is out (an early
/// refusal's small body goes right after this returns).
async fn check_and_run(
    gate: &Arc<Gate>,
    request: Request,
    next: Next,
    working: Option<crate::server::places::Working>,
) -> Response {
    // Two of a header that decides who may ask, from which page, in what name, in which session or how
    // the body is read are two answers to one question: a proxy in front may have checked the other one.
    let once = [
        ("host", "Host"),
        ("authorization", "Authorization"),
        ("content-type", "Content-Type"),
        (SESSION_HEADER, "Mcp-Session-Id"),
        ("mcp-protocol-version", "MCP-Protocol-Version"),
        ("origin", "Origin"),
    ];
    if let Some(refused) = given_twice(gate, request.headers(), &once) {
        return refused;
    }
    if let Some(why) = other_authority(&request) {
        return refuse(&gate.daemon, StatusCode::BAD_REQUEST, why, None);
    }
    if let Some((status, why)) = gate.browsers.host_refused(request.headers()) {
        return refuse(&gate.daemon, status, why, None);
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let text = origin.to_str().unwrap_or("");
        if !gate.browsers.origin_allowed(text, request.headers()) {
            // Bytes past ASCII are shown as what they read as, not left out.
            let shown = String::from_utf8_lossy(origin.as_bytes());
            let why = format!(
                "this server does not take requests from pages of the origin {}: a browser page may reach it only \
                 from an origin listed in openovai.json's \"http\".\"origins\"",
                crate::names::escape_controls(&shown.chars().take(200).collect::<String>(), false)
            );
            return refuse(&gate.daemon, StatusCode::FORBIDDEN, why, None);
        }
        // A browser asks before it sends the token: the preflight is answered without one.
        if Browsers::preflight(request.method()) {
            let mut r = StatusCode::NO_CONTENT.into_response();
            Browsers::allow(r.headers_mut(), origin, true);
            return r;
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
    let caller = match who(gate, &secret).await {
        Ok(caller) => caller,
        Err(r) => return *r,
    };
    if let Some(place) = request
        .extensions()
        .get::<Arc<crate::server::places::Place>>()
    {
        place.seated_as(&caller.seat);
    }
    if let Some((status, why)) = unread_framing(request.headers()) {
        return refuse(&gate.daemon, status, why.into(), None);
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        let why = format!(
            "the request's body is {} bytes, more than the {} MiB this server reads in one request",
            declared.unwrap_or(0),
            MAX_BODY_BYTES >> 20
        );
        return refuse(&gate.daemon, StatusCode::PAYLOAD_TOO_LARGE, why, None);
    }
    // A session id is visible ASCII: one that is not was not given by initialize, and read as no header
    // at all it would be refused as missing.
    if let Some(v) = request.headers().get(SESSION_HEADER)
        && v.to_str().is_err()
    {
        return refuse(
            &gate.daemon,
            StatusCode::BAD_REQUEST,
            "the Mcp-Session-Id header holds characters no session id has: send the id initialize's answer \
             gave, as it gave it"
                .into(),
            None,
        );
    }
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut in_use = None;
    let modern = super::speaks_2026(request.headers());
    if let Some(id) = &session {
        match gate.owners.check(id, &caller.secret_hash) {
            // rmcp took such a request for the session's and ended the session, saying nothing (and
            // answers a DELETE under 2026-07-28 with 405: the session's own revision ends it).
            Check::Mine if modern => {
                return refuse(
                    &gate.daemon,
                    StatusCode::BAD_REQUEST,
                    "MCP 2026-07-28 has no sessions: send the request without the Mcp-Session-Id header \
                     (the session of that id, opened under an earlier revision, goes on)"
                        .into(),
                    None,
                );
            }
            Check::Mine => in_use = Some(gate.owners.in_use(id)),
            Check::Other(owner) => {
                gate.tried_other_session(&caller.seat, &owner);
                return refuse(
                    &gate.daemon,
                    StatusCode::FORBIDDEN,
                    "this MCP session was opened with another seat's secret, and a session is its own seat's alone: \
                     initialize a session of your own"
                        .into(),
                    None,
                );
            }
            // One the last stop left for this seat, with this secret: taken up (rmcp replays its
            // initialize), so a client that never opens another (Gemini CLI) goes on.
            Check::Unknown
                if !modern
                    && gate.carried.left_by(id).as_deref() == Some(caller.secret_hash.as_str())
                    && gate.owners.count(&caller.seat) < SESSIONS_PER_SEAT =>
            {
                gate.owners.record(id, &caller.seat, &caller.secret_hash);
                in_use = Some(gate.owners.in_use(id));
            }
            Check::Unknown => {
                // From 2026-07-28 on there are no sessions to initialize: the header is what is wrong.
                let why = if modern {
                    "this server holds no MCP session with that id, and MCP 2026-07-28 has no sessions: send \
                     the request without the Mcp-Session-Id header"
                } else {
                    NO_SUCH_SESSION
                };
                return refuse(&gate.daemon, StatusCode::NOT_FOUND, why.into(), None);
            }
        }
    }
    let method = request.method().clone();
    // A stream is counted for a GET, and a request's POST: not for a DELETE, a notification (a
    // cancellation among them) or a response, answered at once, which a seat at its limit must still
    // send. A body is read (bounded apart, `Bodies`) before it is known which.
    let open = || {
        let max_total = gate.daemon.current().config.max_connections;
        gate.streams.open(&caller.seat, max_total)
    };
    let too_many = |why| {
        let mut r = refuse(&gate.daemon, StatusCode::TOO_MANY_REQUESTS, why, None);
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        r
    };
    let mut stream = None;
    if method == Method::GET {
        match open() {
            Ok(s) => stream = Some(s),
            Err(why) => return too_many(why),
        }
    }
    // rmcp's refusal of a version echoes it, past what its answer is read back at (`plain`): a long one
    // is refused here.
    if let Some(v) = request
        .headers()
        .get("mcp-protocol-version")
        .filter(|v| v.len() > 64)
    {
        let why = format!(
            "the MCP-Protocol-Version header is {} bytes long: a protocol version is a date, such as \
             2025-11-25. Send the revision initialize agreed (this server speaks {})",
            crate::names::thousands(v.len()),
            super::plain::known_versions()
        );
        return refuse(&gate.daemon, StatusCode::BAD_REQUEST, why, None);
    }
    // The revision the request is made under, as a header names it (every request after `initialize`
    // should carry it); without one, a client of a revision before the header was asked for.
    let revision = request
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let seat = caller.seat.clone();
    let hash = caller.secret_hash.clone();
    let request = with_body_deadline(request, &gate.bodies, &seat);
    let (request, mut held) = if method == Method::POST {
        let session = session.as_deref().filter(|_| in_use.is_some());
        match super::body::checked(&gate.daemon, &gate.owners, &seat, request, session).await {
            Ok(checked) => checked,
            Err(answer) => return answer,
        }
    } else {
        (request, super::body::RequestHolds::default())
    };
    if method == Method::POST && held.request {
        match open() {
            Ok(s) => stream = Some(s),
            Err(why) => {
                if let Some(span) = held.span.as_mut() {
                    span.failed(&why);
                }
                return too_many(why);
            }
        }
    }
    if method == Method::GET
        && in_use.is_some()
        && let Some(id) = session.as_deref()
    {
        takes_the_stream(gate, id, request.headers()).await;
    }
    // The request's call holds its count and its session's use too (`HttpTicket`): one whose client
    // went away still counts, and its session is not idle while it runs.
    let counted = Arc::new((stream, in_use));
    let mut request = request;
    request
        .extensions_mut()
        .insert(crate::server::session::HttpTicket(counted.clone()));
    let response = CALLER.scope(caller, next.run(request)).await;
    let mut response = super::plain::reworded(&gate.daemon, response).await;
    // The call's body is let go of here, whatever the answer: it is not held while the call runs.
    if let Some(seen) = held.call.take()
        && response.status().is_client_error()
    {
        response = super::body::refused_call(&gate.daemon, &seat, &seen, response).await;
    }
    match (&session, response.headers().get(SESSION_HEADER)) {
        (None, Some(id)) => {
            let id = id.to_str().unwrap_or("").to_string();
            if let Some(refusal) = keep_session(gate, &id, &seat, &hash).await {
                response = refusal;
            }
        }
        (Some(id), _) if method == Method::DELETE && response.status().is_success() => {
            // Its calls stop: rmcp ends the session's streams, not the calls its handler runs.
            if let Some(ended) = gate.owners.forget(id) {
                ended.cancel();
            }
            // rmcp answers 202, which the Python SDK takes for a failed end (it wants 200 or 204).
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        _ => {}
    }
    // SSE priming events (empty data, for a client to resume from) go only to clients of 2025-11-25 or
    // later, as the TS SDK's server does: older clients parse every event's data as JSON, and Gemini CLI
    // (2025-06-18) drops the server at the first one.
    if !response.status().is_success()
        && let Some(span) = held.span.as_mut()
    {
        span.failed(&format!("answered HTTP {}", response.status()));
    }
    let primes = revision
        .as_deref()
        .or(held.asked.as_deref())
        .is_some_and(|v| v >= "2025-11-25");
    // The stream is counted until its body is dropped: written out, or its client gone.
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(body.into_data_stream().filter_map(move |chunk| {
        let _held = (&counted, &held, &working);
        let drop = !primes && chunk.as_ref().is_ok_and(|c| is_priming(c));
        std::future::ready((!drop).then_some(chunk))
    }));
    Response::from_parts(parts, body)
}

/// Whether an SSE frame is one event whose data is empty: a priming event, not a message.
fn is_priming(frame: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(frame) else {
        return false;
    };
    let mut data = None;
    for line in text.lines() {
        if let Some(d) = line.strip_prefix("data:") {
            data = Some(data.unwrap_or(true) && d.trim().is_empty());
        } else if !(line.is_empty()
            || line.starts_with("id:")
            || line.starts_with("retry:")
            || line.starts_with("event:"))
        {
            return false;
        }
    }
    data == Some(true)
}

/// The seat whose secret `secret` is, or the refusal.
async fn who(gate: &Gate, secret: &str) -> Result<Caller, Box<Response>> {
    let book = gate.daemon.seats.get(&gate.daemon.inst).await;
    let book = match book.as_ref() {
        Ok(book) => book,
        Err(e) => {
            // The operator reads why; a client that may be anybody learns no path or parse error.
            gate.daemon.refusals.note(&e.to_string());
            return Err(Box::new(refuse(
                &gate.daemon,
                StatusCode::SERVICE_UNAVAILABLE,
                "this server cannot read its seats right now; its operator finds why in runtime.log and `ovai \
                 status`"
                    .into(),
                None,
            )));
        }
    };
    match book.resolve_all(secret).as_slice() {
        [seat] => Ok(Caller {
            seat: seat.to_string(),
            secret_hash: hash_secret(secret),
        }),
        [] => Err(Box::new(refuse(
            &gate.daemon,
            StatusCode::UNAUTHORIZED,
            "the bearer token is not the secret of any seat of this server: the seat may have been removed or \
             given a new secret. Ask the operator for the seat's desk again (`ovai seat add NAME --url …` or `ovai \
             seat rotate NAME` writes its .mcp.json)"
                .into(),
            Some(r#"Bearer realm="ovai", error="invalid_token""#),
        ))),
        several => Err(Box::new(refuse(
            &gate.daemon,
            StatusCode::UNAUTHORIZED,
            format!(
                "the bearer token is the secret of several seats ({}), which `ovai seat` never writes: run `ovai \
                 seat rebuild` on the server",
                several.join(", ")
            ),
            Some(r#"Bearer realm="ovai", error="invalid_token""#),
        ))),
    }
}

/// Closes the sessions that have had no request and no stream for `idle` (their client gone without a
/// word), until the endpoint stops. rmcp's own idle timer counts only requests, and would close a
/// session whose client is waiting on its GET stream.
pub async fn close_idle(
    gate: Arc<Gate>,
    idle: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let every = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(30));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        for id in gate.owners.take_idle(idle) {
            let manager = gate.manager.clone();
            // Closing waits on the session's worker: never the loop.
            gate.daemon.tasks.spawn(async move {
                let _ = manager.close_session(&id.into()).await;
            });
        }
    }
}

/// Records a new session's owner; past the seat's limit, ends the seat's session idle longest, or, when
/// every one is in use, closes the new one again and says so.
async fn keep_session(gate: &Gate, id: &str, seat: &str, hash: &str) -> Option<Response> {
    if gate.owners.wants_pruning() {
        gate.prune().await;
    }
    if gate.owners.count(seat) >= SESSIONS_PER_SEAT {
        gate.prune().await;
    }
    // A seat's sessions past its limit are most often ones their clients left without ending them (a
    // headless run that exited): the one idle longest makes room, and its client, if it comes back,
    // gets 404 and opens another. One with a request or a stream open is never ended.
    if gate.owners.count(seat) >= SESSIONS_PER_SEAT
        && let Some(old) = gate.owners.take_longest_idle(seat)
    {
        // Not a row: a seat's client looping on `initialize` would write one a request.
        tracing::debug!(
            seat,
            "a new MCP session ends the seat's session idle longest, past its limit"
        );
        let manager = gate.manager.clone();
        gate.daemon.tasks.spawn(async move {
            let _ = manager.close_session(&old.into()).await;
        });
    }
    if gate.owners.count(seat) >= SESSIONS_PER_SEAT {
        let _ = gate.manager.close_session(&id.to_string().into()).await;
        // Sessions opened and never initialised are what a client that loops on `initialize` leaves.
        let never = match gate.owners.starting().get(seat).copied().unwrap_or(0) {
            0 => String::new(),
            n => format!(" ({n} of them never sent notifications/initialized)"),
        };
        let why = format!(
            "the seat {seat} holds {SESSIONS_PER_SEAT} MCP sessions on this server, its limit{never}: end one \
             (DELETE /mcp with its Mcp-Session-Id), or let one idle out (sessionIdleSeconds in openovai.json's \
             \"http\"), then initialize again"
        );
        let mut r = refuse(&gate.daemon, StatusCode::TOO_MANY_REQUESTS, why, None);
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return Some(r);
    }
    gate.owners.record(id, seat, hash);
    // The seat may have changed since the token was looked up (a change closes the sessions recorded
    // then): look again now that this one is recorded.
    let book = gate.daemon.seats.get(&gate.daemon.inst).await;
    let still = book
        .as_ref()
        .as_ref()
        .is_ok_and(|b| b.seats.get(seat).is_some_and(|r| r.sha256 == hash));
    if !still {
        gate.close(id).await;
    }
    None
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

/// Any path but `/mcp`.
pub async fn not_here() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "This is an ovai server: its MCP endpoint is /mcp.\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

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
