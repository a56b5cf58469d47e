//! The MCP transport of a seat's connection: newline-delimited JSON-RPC, as rmcp's own async read/write
//! transport does it, with these differences:
//!
//! - Every line gets its answer (`server::jsonrpc`): one that is not JSON, not UTF-8, over the length cap,
//!   or JSON of the wrong shape is answered as JSON-RPC says, and the session stays open.
//! - A request whose id is already in flight on this session is answered `-32600` naming the id; the
//!   first goes on.
//! - Answers wait in an outbox bounded in bytes (`sessionQueueBytes`): past the bound, the session's
//!   requests are not read until it drains, so a session that never reads cannot hold the daemon's memory.
//! - The common `tools/call` line (no `_meta`, a plain id) is read into a small struct: rmcp's generic
//!   parse goes through serde's untagged and flattened enums, which buffer the message and build an error
//!   for each variant tried. Once the session is initialised the call does not go to rmcp at all:
//!   `server::direct` runs it and its answer goes straight into the outbox. Every other line takes
//!   rmcp's own parse and path.
//! - A request cancelled in the last 5 s still counts against the 64 in flight: its plugin may run on.
//!   At 64 the session is still read (`server::held`): a cancellation is acted on at once, and other
//!   lines wait, bounded, for room.
//! - A client that closed only its writing side (the bridge, when its own client closes its input) is
//!   still reading: its calls run to their end and are answered. One that died (its socket closed whole,
//!   or its answers cannot be written) has its calls stopped and what it left waiting dropped.
//!
//! `receive` is cancel-safe: the partial line lives in the codec, and the in-flight ids and the outbox's
//! count in fields, not in the future.

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta,
    JsonObject, JsonRpcRequest, NumberOrString, ProtocolVersion, Request, ServerJsonRpcMessage,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncRead;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::direct::Direct;
use super::held::Held;
use super::jsonrpc::{self, INVALID_REQUEST, PARSE_ERROR};
use super::session::SeatService;
use crate::legs::Step;
use crate::lines::{CappedLines, Line, Outbox};
use crate::sync::lock;
use crate::unix_io::{Hangup, WriteHalf};

/// The longest line a session may send: generous for arguments, bounded for the daemon (each connection
/// may hold one partial line this long).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// Requests of one session read and not yet answered (or cancelled within CANCELLED_HOLD): past this, its
/// next requests wait (`server::held`). With the outbox's bound, what one session can make the daemon
/// hold is bounded however fast it sends.
pub const MAX_IN_FLIGHT: usize = 64;

pub struct SessionTransport<R> {
    lines: FramedRead<R, CappedLines>,
    answers: Arc<Answers>,
    /// The task writing what is queued; `close` waits for it, so the last answers reach the wire.
    writer: Option<tokio::task::JoinHandle<()>>,
    /// Past this many bytes of unsent answers, the session's requests wait.
    queue_limit: usize,
    /// Ids of requests the session cancelled, and until when they may still be winding down (a handler
    /// runs on after its cancellation; an id reused meanwhile would be confused with it).
    cancelled: Vec<(NumberOrString, std::time::Instant)>,
    /// Plain calls taken here rather than by rmcp, once the session is initialised.
    direct: Option<Direct>,
    /// An `initialize` went to rmcp.
    initializing: bool,
    /// ... and then `notifications/initialized`: the handshake is done.
    initialized: bool,
    /// A request that starts the session went to rmcp. Before it rmcp ends the session at any
    /// notification, so none is passed on (a notification is never answered; `notifications/initialized`
    /// sent before `initialize` is a client's slip, not a reason to drop it).
    begun: bool,
    /// When the client closed its side and nothing it sent was left to start: the calls still running
    /// have until `closing_grace` after it to answer.
    closed_at: Option<std::time::Instant>,
    /// How long calls may run on after the client closed its side: their deadline, and a little.
    closing_grace: std::time::Duration,
    /// Lines read while the session had all it may have in flight.
    held: Held,
    /// The session's input has ended (what is held is still acted on).
    input_ended: bool,
    /// To tell a client that died from one that only closed its side.
    hangup: Option<Hangup>,
}

/// What the transport and the calls it runs itself share: the way out, and the requests not yet answered.
pub struct Answers {
    out: Mutex<Option<Outbox>>,
    /// The ids of the requests read and not yet answered.
    in_flight: Mutex<crate::maps::Set<NumberOrString>>,
    /// Woken when an answer goes out, for a receive waiting on MAX_IN_FLIGHT.
    answered: tokio::sync::Notify,
}

impl Answers {
    fn queue_line(&self, mut line: Vec<u8>) -> Result<(), std::io::Error> {
        line.push(b'\n');
        lock(&self.out)
            .as_ref()
            .ok_or(())
            .and_then(|o| o.send(line).map_err(|_| ()))
            .map_err(|()| {
                std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the session's connection is closed",
                )
            })
    }

    /// Queues the answer to request `id` if it is still in flight (not cancelled meanwhile), freeing the id.
    pub fn answer(&self, id: &NumberOrString, msg: &ServerJsonRpcMessage) {
        if !lock(&self.in_flight).remove(id) {
            return;
        }
        self.answered.notify_one();
        let _ = serde_json::to_vec(msg)
            .map_err(std::io::Error::other)
            .and_then(|line| self.queue_line(line));
    }

    /// Queues the answer line made for request `id` if it is still in flight, freeing the id.
    pub fn answer_line(&self, id: &NumberOrString, line: Vec<u8>) {
        if !lock(&self.in_flight).remove(id) {
            return;
        }
        self.answered.notify_one();
        let _ = self.queue_line(line);
    }

    /// Queues a message; an answer frees its request's id.
    pub fn queue(&self, msg: &ServerJsonRpcMessage) -> Result<(), std::io::Error> {
        if let Some(said) = method_not_found_in_words(msg) {
            return self.queue(&said);
        }
        let id = match msg {
            ServerJsonRpcMessage::Response(r) => Some(&r.id),
            ServerJsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        if let Some(id) = id
            && lock(&self.in_flight).remove(id)
        {
            self.answered.notify_one();
        }
        self.queue_line(serde_json::to_vec(msg).map_err(std::io::Error::other)?)
    }

    fn outbox(&self) -> Option<Outbox> {
        lock(&self.out).clone()
    }
}

/// rmcp answers a method it does not serve with `-32601` and the bare method name as the message: said as
/// a sentence instead, which names what the server does serve.
fn method_not_found_in_words(msg: &ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
    let ServerJsonRpcMessage::Error(e) = msg else {
        return None;
    };
    if e.error.code != rmcp::model::ErrorCode::METHOD_NOT_FOUND || e.error.message.contains(' ') {
        return None;
    }
    let mut said = e.clone();
    said.error.message = jsonrpc::method_not_found_words(&e.error.message).into();
    Some(ServerJsonRpcMessage::Error(said))
}

/// What calls get beyond their deadline to answer, once the client closed its side.
const CLOSING_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// How often a session that is not being read (it fills what may be held) is asked whether its client
/// is still there.
const CLIENT_CHECK: std::time::Duration = std::time::Duration::from_secs(1);
/// How long a cancelled request's id stays taken (a handler winds down soon after its cancellation).
const CANCELLED_HOLD: std::time::Duration = std::time::Duration::from_secs(5);
/// At most this many cancelled ids are remembered; the oldest goes first.
const CANCELLED_KEPT: usize = 64;
/// The longest id a request may carry, in bytes as written.
pub const MAX_ID_BYTES: usize = 1024;

impl<R: AsyncRead + Unpin + Send + 'static> SessionTransport<R> {
    /// `hangup` tells a client that died from one that only closed its side (`None`: calls run on).
    pub fn new(read: R, write: WriteHalf, hangup: Option<Hangup>, queue_limit: usize) -> Self {
        let (out, writer) = Outbox::start(write);
        Self {
            lines: FramedRead::new(read, CappedLines::new(MAX_LINE)),
            answers: Arc::new(Answers {
                out: Mutex::new(Some(out)),
                in_flight: Mutex::default(),
                answered: tokio::sync::Notify::new(),
            }),
            writer: Some(writer),
            queue_limit,
            cancelled: Vec::new(),
            direct: None,
            initializing: false,
            initialized: false,
            begun: false,
            closed_at: None,
            held: Held::default(),
            input_ended: false,
            hangup,
            closing_grace: CLOSING_GRACE,
        }
    }

    /// Calls of a client that closed its side may run for `deadline` (plus a little) to answer.
    pub fn with_call_deadline(mut self, deadline: std::time::Duration) -> Self {
        self.closing_grace = deadline + CLOSING_GRACE;
        self
    }

    /// Plain `tools/call`s of an initialised session are answered by `service` here (`server::direct`);
    /// `session` is the token that ends the session.
    pub fn with_direct_calls(mut self, service: SeatService, session: CancellationToken) -> Self {
        self.direct = Some(Direct::new(service, session));
        self
    }

    fn queue_line(&self, line: Vec<u8>) -> Result<(), std::io::Error> {
        self.answers.queue_line(line)
    }

    /// The next line to act on: one held while the session was at its cap, once there is room, or a new
    /// one. At the cap the session is read on into `held`, so that a cancellation is acted on at once;
    /// a call cancelled in the last seconds counts against the cap too, as its plugin may not have
    /// stopped, and calling and cancelling at once must not start plugins without end.
    async fn next_line(&mut self) -> Option<Next> {
        loop {
            let out = self.answers.outbox();
            if self.client_died(out.as_ref()) {
                return None;
            }
            if let Some(out) = out
                && out.queued() > self.queue_limit
            {
                // The session is not reading its answers: act on nothing more of it until it does.
                out.drained_to(self.queue_limit).await;
                continue;
            }
            self.forget_wound_down();
            if self.has_room() {
                if let Some(line) = self.held.pop() {
                    return Some(Next::Line(line));
                }
                if !self.input_ended {
                    match self.read_line().await {
                        Read::Line(line) => return Some(Next::Line(line)),
                        Read::Answered => {}
                        Read::End => self.input_ended = true,
                    }
                    continue;
                }
                if self.closing_done() {
                    return None;
                }
            }
            // Registered before the second look, so an answer between the two is not missed.
            let answers = self.answers.clone();
            let answered = answers.answered.notified();
            if self.can_go_on() {
                continue;
            }
            let wound_down = self.cancelled.first().map(|(_, until)| *until);
            let read_on = !self.input_ended && self.held.has_room();
            let closing_over = self.closed_at.map(|at| at + self.closing_grace);
            tokio::select! {
                _ = answered => {}
                _ = sleep_until(wound_down) => {}
                _ = sleep_until(closing_over) => {}
                // Not reading (its input ended, or what it sent fills what is held), so its client's end
                // would go unseen: look.
                _ = tokio::time::sleep(CLIENT_CHECK), if !read_on => {}
                read = self.read_line(), if read_on => match read {
                    Read::End => self.input_ended = true,
                    Read::Answered => {}
                    Read::Line(line) => match cancellation(&line) {
                        Some((msg, id)) => {
                            // One held with an id in flight is a duplicate, refused in its turn.
                            if let Some(id) = id
                                && !lock(&self.answers.in_flight).contains(&id)
                            {
                                self.held.cancel(&id);
                            }
                            return Some(Next::Cancel(Box::new(msg)));
                        }
                        None => self.held.push(line),
                    },
                },
            }
        }
    }

    /// With the client's input ended and nothing held: whether the session is over. A client that closed
    /// only its side may still read, so its calls run to their end (each bounded by its deadline) and are
    /// answered; the session ends once none is left, or `closing_grace` after the last one started.
    fn closing_done(&mut self) -> bool {
        let since = *self.closed_at.get_or_insert_with(std::time::Instant::now);
        lock(&self.answers.in_flight).is_empty() || since.elapsed() >= self.closing_grace
    }

    /// Whether `next_line` has something to do now rather than wait.
    fn can_go_on(&mut self) -> bool {
        if self.input_ended && self.held.is_empty() {
            return self.closing_done();
        }
        self.has_room()
    }

    /// Whether the session's client died: its socket closed whole (not only its writing side), or its
    /// answers cannot be written. Nobody can read what its calls would answer, so they are stopped now
    /// (the session's token) and what it left waiting is dropped. Asked of the socket only once its input
    /// ended or is not being read, so a session in full flow pays nothing.
    fn client_died(&mut self, out: Option<&Outbox>) -> bool {
        let unwritable = out.is_some_and(Outbox::is_closed);
        let look = self.input_ended || !self.held.has_room();
        let died = unwritable || (look && self.hangup.as_ref().is_some_and(Hangup::peer_gone));
        if died {
            tracing::debug!("a session's client died: its calls are stopped");
            self.held = Held::default();
            self.input_ended = true;
            self.closed_at = Some(std::time::Instant::now());
            if let Some(direct) = &self.direct {
                direct.end_session();
            }
        }
        died
    }

    /// The next line with something on it. One too long or not UTF-8 is answered here, and the caller
    /// looks at the session's bounds again before reading on.
    async fn read_line(&mut self) -> Read {
        loop {
            let line = match self.lines.next().await {
                Some(Ok(Line::Text(line))) => line,
                Some(Ok(Line::TooLong)) => {
                    let _ = self.queue_line(jsonrpc::error(
                        &Value::Null,
                        INVALID_REQUEST,
                        &format!(
                            "Invalid request: a line longer than {} MiB was skipped",
                            MAX_LINE >> 20
                        ),
                    ));
                    return Read::Answered;
                }
                Some(Ok(Line::NotUtf8)) => {
                    let _ = self.queue_line(jsonrpc::error(
                        &Value::Null,
                        PARSE_ERROR,
                        "Parse error: the line is not UTF-8",
                    ));
                    return Read::Answered;
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "reading a session failed");
                    return Read::End;
                }
                None => return Read::End,
            };
            if !line.trim().is_empty() {
                crate::legs::mark(Step::SessionLine);
                return Read::Line(line);
            }
        }
    }

    /// Whether the session may have one more request in flight (cancelled ones winding down count).
    fn has_room(&self) -> bool {
        lock(&self.answers.in_flight).len() + self.cancelled.len() < MAX_IN_FLIGHT
    }

    /// Forgets the cancelled requests whose time to wind down is over.
    fn forget_wound_down(&mut self) {
        if !self.cancelled.is_empty() {
            let now = std::time::Instant::now();
            self.cancelled.retain(|(_, until)| *until > now);
        }
    }

    /// Notes a request's id as in flight; `false` (after answering it) when that id cannot be taken.
    fn admit_request(&mut self, id: &NumberOrString) -> bool {
        if let NumberOrString::String(text) = id
            && text.len() > MAX_ID_BYTES
        {
            let _ = self.queue_line(jsonrpc::error(
                &Value::Null,
                INVALID_REQUEST,
                &format!(
                    "Invalid request: an id of {} bytes; ids are at most {MAX_ID_BYTES} bytes",
                    text.len()
                ),
            ));
            return false;
        }
        self.forget_wound_down();
        let winding_down = self.cancelled.iter().any(|(c, _)| c == id);
        if !winding_down && lock(&self.answers.in_flight).insert(id.clone()) {
            return true;
        }
        let id = serde_json::to_value(id).unwrap_or(Value::Null);
        if winding_down {
            let _ = self.queue_line(jsonrpc::error(
                &id,
                INVALID_REQUEST,
                &format!(
                    "Invalid request: the id {id} belongs to a request this session cancelled, which may still \
                     be winding down; send it again with an id of its own"
                ),
            ));
            return false;
        }
        let _ = self.queue_line(jsonrpc::error(
            &id,
            INVALID_REQUEST,
            &format!(
                "Invalid request: a request with the id {id} is already in flight on this session; \
                 each request in flight needs an id of its own"
            ),
        ));
        false
    }

    /// Notes what a message changes (an id in flight, a cancellation); `false` when it was answered here
    /// and goes no further.
    fn admit(&mut self, msg: &ClientJsonRpcMessage) -> bool {
        match msg {
            ClientJsonRpcMessage::Request(r) => {
                let admitted = self.admit_request(&r.id);
                if admitted && matches!(r.request, ClientRequest::InitializeRequest(_)) {
                    self.initializing = true;
                }
                if admitted && (self.initializing || starts_session(&r.request)) {
                    self.begun = true;
                }
                admitted
            }
            ClientJsonRpcMessage::Notification(n) => {
                match &n.notification {
                    // A cancelled request gets no answer: its id is free again.
                    ClientNotification::CancelledNotification(c) => {
                        if let Some(id) = &c.params.request_id
                            && lock(&self.answers.in_flight).remove(id)
                        {
                            if let Some(direct) = &self.direct {
                                direct.cancel(id);
                            }
                            if self.cancelled.len() == CANCELLED_KEPT {
                                self.cancelled.remove(0);
                            }
                            self.cancelled
                                .push((id.clone(), std::time::Instant::now() + CANCELLED_HOLD));
                            self.answers.answered.notify_one();
                        }
                    }
                    // rmcp takes no other request before this (the handshake); from here on a plain
                    // call may be taken here.
                    ClientNotification::InitializedNotification(_) => {
                        self.initialized = self.initializing;
                    }
                    _ => {}
                }
                true
            }
            _ => true,
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for SessionTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.answers.queue(&item))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let line = match self.next_line().await? {
                Next::Line(line) => line,
                Next::Cancel(msg) => {
                    if self.begun && self.admit(&msg) {
                        return Some(*msg);
                    }
                    continue;
                }
            };
            let msg = match fast_call(&line) {
                Some(call) if self.initialized && self.direct.is_some() => {
                    if self.admit_request(&call.id)
                        && let Some(direct) = &mut self.direct
                    {
                        direct.take(call.id, call.name, call.arguments, &self.answers);
                    }
                    // Taken, or refused and answered by admit_request: rmcp never sees it.
                    continue;
                }
                Some(call) => call.into_message(),
                None => match jsonrpc::take(&line, "line") {
                    jsonrpc::Taken::Message(msg) => *msg,
                    jsonrpc::Taken::Answered(answer) => {
                        if let Some(answer) = answer {
                            let _ = self.queue_line(answer);
                        }
                        continue;
                    }
                },
            };
            if let ClientJsonRpcMessage::Notification(n) = &msg
                && !self.begun
            {
                tracing::debug!(?n, "a notification before the session began was dropped");
                continue;
            }
            // Before the session begins rmcp answers such a request by naming 2026-07-28's `_meta` keys,
            // which says nothing to a client that forgot its `initialize`.
            if let ClientJsonRpcMessage::Request(r) = &msg
                && !self.begun
                && !matches!(
                    r.request,
                    ClientRequest::InitializeRequest(_)
                        | ClientRequest::PingRequest(_)
                        | ClientRequest::DiscoverRequest(_)
                )
                && r.request.get_meta().protocol_version().is_none()
            {
                let id = serde_json::to_value(&r.id).unwrap_or(Value::Null);
                let _ = self.queue_line(jsonrpc::error(
                    &id,
                    INVALID_REQUEST,
                    "Invalid request: this session has not begun: send \"initialize\" first (or, from MCP \
                     2026-07-28 on, give each request the _meta keys io.modelcontextprotocol/protocolVersion \
                     and io.modelcontextprotocol/clientCapabilities)",
                ));
                continue;
            }
            if self.admit(&msg) {
                return Some(msg);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(direct) = &self.direct {
            direct.wind_down(self.closed_at).await;
        }
        // Dropping the outbox ends the writer task once it has written what was queued.
        lock(&self.answers.out).take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.await;
        }
        Ok(())
    }
}

/// What `read_line` read.
enum Read {
    Line(String),
    /// A line that could not be read was answered.
    Answered,
    /// The session's input ended.
    End,
}

/// What `next_line` hands on.
enum Next {
    /// A line to act on in its turn.
    Line(String),
    /// A cancellation read while the session waited for room: acted on now.
    Cancel(Box<ClientJsonRpcMessage>),
}

/// A `notifications/cancelled` line, with the id it cancels.
fn cancellation(line: &str) -> Option<(ClientJsonRpcMessage, Option<NumberOrString>)> {
    if !line.contains("notifications/cancelled") {
        return None;
    }
    let msg = serde_json::from_str::<ClientJsonRpcMessage>(line).ok()?;
    let ClientJsonRpcMessage::Notification(n) = &msg else {
        return None;
    };
    let ClientNotification::CancelledNotification(c) = &n.notification else {
        return None;
    };
    let id = c.params.request_id.clone();
    Some((msg, id))
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The shape of almost every call a session makes, read without rmcp's generic machinery.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastCall<'a> {
    jsonrpc: &'a str,
    id: FastId<'a>,
    method: &'a str,
    params: FastParams,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FastId<'a> {
    Number(i64),
    String(&'a str),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

/// Whether rmcp starts a session (of 2026-07-28 or later, without a handshake) with this request: it
/// carries every `_meta` key that revision asks for, and a revision rmcp serves. One it refuses leaves
/// rmcp waiting for a session to begin.
fn starts_session(request: &ClientRequest) -> bool {
    let meta = request.get_meta();
    meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
        .is_empty()
        && meta
            .protocol_version()
            .is_some_and(|v| ProtocolVersion::KNOWN_VERSIONS.contains(&v))
}

/// A plain `tools/call`, read.
struct PlainCall {
    id: NumberOrString,
    name: String,
    arguments: JsonObject,
    /// Whether the line carried `arguments` (rmcp's message says so).
    had_arguments: bool,
}

impl PlainCall {
    /// rmcp's message for it, exactly as rmcp's own parse builds it.
    fn into_message(self) -> ClientJsonRpcMessage {
        let mut params = CallToolRequestParams::new(self.name);
        params.arguments = self.had_arguments.then_some(self.arguments);
        let request = ClientRequest::CallToolRequest(Request::new(params));
        ClientJsonRpcMessage::Request(JsonRpcRequest::new(self.id, request))
    }
}

/// A plain `tools/call` line, read; `None` for anything else (rmcp parses those).
fn fast_call(line: &str) -> Option<PlainCall> {
    // An object only: serde reads a struct from an array too, by position, and an array is no request.
    if !line.trim_start().starts_with('{') || !line.contains("\"tools/call\"") {
        return None;
    }
    let call: FastCall<'_> = serde_json::from_str(line).ok()?;
    if call.jsonrpc != "2.0" || call.method != "tools/call" {
        return None;
    }
    let id = match call.id {
        FastId::Number(n) => NumberOrString::Number(n),
        FastId::String(s) => NumberOrString::String(s.into()),
    };
    Some(PlainCall {
        id,
        name: call.params.name,
        had_arguments: call.params.arguments.is_some(),
        arguments: call.params.arguments.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_not_served_is_named_for_what_it_is() {
        assert_eq!(
            jsonrpc::method_not_found_words("ping"),
            "Method not found: ping is not served under the protocol revision this session speaks"
        );
        assert!(jsonrpc::method_not_found_words("resources/list").starts_with(
            "Method not found: this server does not serve resources/list; it serves initialize, ping"
        ));
    }

    /// The fast path builds exactly what rmcp's own parse builds.
    #[test]
    fn fast_calls_equal_rmcp_parse() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"i":1,"s":"x\"y"}}}"#,
            r#"{"method":"tools/call","params":{"name":"echo"},"id":"abc","jsonrpc":"2.0"}"#,
        ] {
            let fast = fast_call(line)
                .expect("the fast path takes it")
                .into_message();
            let slow: ClientJsonRpcMessage = serde_json::from_str(line).unwrap();
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&slow).unwrap(),
                "{line}"
            );
        }
    }

    #[test]
    fn anything_unusual_takes_rmcps_parse() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"["2.0",8,"tools/call",{"name":"echo"}]"#,
        ] {
            assert!(fast_call(line).is_none(), "{line}");
        }
    }
}
