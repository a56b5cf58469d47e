//! The MCP transport of a seat's connection: newline-delimited JSON-RPC, as rmcp's own async read/write
//! transport does it, with these differences:
//!
//! - Every line is read by `jsonrpc::read`, the rules the bridge reads by too (a `tools/call`'s with its
//!   params, in one pass: `read_within`): a line that is no message is answered as JSON-RPC says and the
//!   session stays open; a request is answered under its id, exactly once, whatever its params hold.
//! - A request whose id is already in flight on this session is answered `-32600` naming the id; the
//!   first goes on.
//! - Every `tools/call` takes the daemon's own call path (`server::calls`), whatever its shape; every other
//!   message goes to rmcp.
//! - Answers and notifications wait in an outbox bounded in bytes (`sessionQueueBytes`): past the bound,
//!   the session's requests are not read until it drains (and a progress report that would go past it is
//!   dropped), so a session that never reads cannot hold the daemon's memory.
//! - A request cancelled in the last 5 s still counts against the 64 in flight: its plugin may run on.
//!   At 64 the session is still read (`server::backlog`): a cancellation is acted on at once, and other
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
    ClientJsonRpcMessage, ClientRequest, ErrorData, GetMeta, NumberOrString, ProtocolVersion,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::AsyncRead;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::answers::Answers;
use super::backlog::Backlog;
use super::calls::{Call, Calls};
use super::params;
use super::session::SeatService;
use super::traces::{self, RequestSpan};
use crate::jsonrpc::{
    self, INVALID_PARAMS, INVALID_REQUEST, MAX_LINE, METHOD_NOT_FOUND, PARSE_ERROR, Read as Message,
};
use crate::lines::{CappedLines, Line, Outbox};
use crate::sync::lock;
use crate::unix_io::{Hangup, WriteHalf};

/// Requests of one session read and not yet answered (or cancelled within CANCELLED_HOLD): past this, its
/// next requests wait (`server::backlog`). With the outbox's bound, what one session can make the daemon
/// hold is bounded however fast it sends.
pub const MAX_IN_FLIGHT: usize = 64;
/// The longest request rmcp is given (anything but a `tools/call`, whose arguments are bounded by what they
/// take once read): none of them needs more.
const MAX_OTHER: usize = 1024 * 1024;

pub struct SessionTransport<R> {
    lines: FramedRead<R, CappedLines>,
    answers: Arc<Answers>,
    /// The task writing what is queued; `close` waits for it, so the last answers reach the wire.
    writer: Option<tokio::task::JoinHandle<()>>,
    /// Ids of requests the session cancelled, and until when they may still be winding down (a handler
    /// runs on after its cancellation; an id reused meanwhile would be confused with it).
    cancelled: Vec<(NumberOrString, std::time::Instant)>,
    /// The session's `tools/call`s.
    calls: Option<Calls>,
    /// How the session began, for its calls: with `initialize`, or with 2026-07-28's `_meta`.
    lifecycle: Lifecycle,
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
    backlog: Backlog,
    /// The session's input has ended (what is held is still acted on).
    input_ended: bool,
    /// To tell a client that died from one that only closed its side.
    hangup: Option<Hangup>,
    /// The client capabilities its calls last carried that were read whole (`params::call`).
    capabilities: Option<Box<str>>,
    /// The revision an `initialize` agreed, for the spans of requests that carry none of their own.
    version: Option<Box<str>>,
    /// The `subscriptions/listen` requests let through to rmcp, while their ids are in flight.
    listens: Vec<NumberOrString>,
}

/// `subscriptions/listen` streams one socket session may hold open at once: each holds one of its
/// requests in flight for the session's life, and a few are all a client needs.
const MAX_LISTENS: usize = 8;

/// How a session began, which decides what its calls must carry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    /// Not yet: a call needs 2026-07-28's `_meta` (which begins it).
    None,
    /// With `initialize` (a revision before 2026-07-28): calls need no `_meta`.
    Handshake,
    /// With a request of 2026-07-28: every call carries the `_meta` that revision asks for.
    Inline,
}

/// The bytes of lines not yet ended (a megabyte or more each) that a seat's sessions may hold together:
/// four whole lines' worth. Past it, a line that would go over is skipped as it comes.
const SEAT_UNFINISHED: usize = 4 * MAX_LINE;

/// What calls get beyond their deadline to answer, once the client closed its side.
const CLOSING_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// How often a session that is not being read (it fills what may be held) is asked whether its client
/// is still there.
const CLIENT_CHECK: std::time::Duration = std::time::Duration::from_secs(1);
/// How long a cancelled request's id stays taken (a handler winds down soon after its cancellation).
const CANCELLED_HOLD: std::time::Duration = std::time::Duration::from_secs(5);
/// At most this many cancelled ids are remembered; the oldest goes first.
const CANCELLED_KEPT: usize = 64;

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
                limit: queue_limit,
                spans: Mutex::default(),
                seat: Arc::default(),
            }),
            writer: Some(writer),
            cancelled: Vec::new(),
            calls: None,
            lifecycle: Lifecycle::None,
            begun: false,
            closed_at: None,
            backlog: Backlog::default(),
            input_ended: false,
            hangup,
            capabilities: None,
            version: None,
            listens: Vec::new(),
            closing_grace: CLOSING_GRACE,
        }
    }

    /// Calls of a client that closed its side may run for `deadline` (plus a little) to answer.
    pub fn with_call_deadline(mut self, deadline: std::time::Duration) -> Self {
        self.closing_grace = deadline + CLOSING_GRACE;
        self
    }

    /// The session's `tools/call`s are answered by `service` (`server::calls`); `session` is the token
    /// that ends the session.
    pub fn with_calls(mut self, service: SeatService, session: CancellationToken) -> Self {
        self.calls = Some(Calls::new(service, session));
        self
    }

    fn queue_line(&self, line: Vec<u8>) -> Result<(), std::io::Error> {
        self.answers.queue_line(line)
    }

    /// The next line to act on: one held while the session was at its cap, once there is room, or a new
    /// one. At the cap the session is read on into `backlog`, so that a cancellation is acted on at once;
    /// a call cancelled in the last seconds counts against the cap too, as its plugin may not have
    /// stopped, and calling and cancelling at once must not start plugins without end.
    async fn next_line(&mut self) -> Option<String> {
        loop {
            let out = self.answers.outbox();
            if self.client_died(out.as_ref()) {
                return None;
            }
            if let Some(out) = out
                && out.queued() > self.answers.limit
            {
                // The session is not reading its answers: act on nothing more of it until it does.
                out.drained_to(self.answers.limit).await;
                continue;
            }
            self.forget_wound_down();
            if self.has_room() {
                if let Some(line) = self.backlog.pop() {
                    return Some(line);
                }
                if !self.input_ended {
                    match self.read_line().await {
                        // The seat's other sessions may have taken its room while this one read.
                        LineRead::Line(line) if !self.has_room() => {
                            if let Some(line) = self.take_or_hold(line) {
                                return Some(line);
                            }
                        }
                        LineRead::Line(line) => return Some(line),
                        LineRead::Answered => {}
                        LineRead::End => self.input_ended = true,
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
            // And room made by the seat's other sessions.
            let freed = answers.seat.freed.notified();
            // And, held by its seat's unread answers, its own read (its own calls' answers: `answered`).
            let out = answers.outbox();
            let held = self.held_by_seat() && out.as_ref().is_some_and(|o| o.queued() > 0);
            let read_out = async {
                match &out {
                    Some(out) => out.drained_to(0).await,
                    None => std::future::pending().await,
                }
            };
            if self.can_go_on() {
                continue;
            }
            let wound_down = self.cancelled.first().map(|(_, until)| *until);
            let read_on = !self.input_ended && self.backlog.has_room();
            let closing_over = self.closed_at.map(|at| at + self.closing_grace);
            tokio::select! {
                _ = answered => {}
                _ = freed => {}
                _ = read_out, if held => {}
                _ = sleep_until(wound_down) => {}
                _ = sleep_until(closing_over) => {}
                // Not reading (its input ended, or what it sent fills what is held), so its client's end
                // would go unseen: look.
                _ = tokio::time::sleep(CLIENT_CHECK), if !read_on => {}
                read = self.read_line(), if read_on => match read {
                    LineRead::End => self.input_ended = true,
                    LineRead::Answered => {}
                    LineRead::Line(line) => {
                        if let Some(line) = self.take_or_hold(line) {
                            return Some(line);
                        }
                    }
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
        if self.input_ended && self.backlog.is_empty() {
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
        let look = self.input_ended || !self.backlog.has_room();
        let died = unwritable || (look && self.hangup.as_ref().is_some_and(Hangup::peer_gone));
        if died {
            tracing::debug!("a session's client died: its calls are stopped");
            self.backlog = Backlog::default();
            self.input_ended = true;
            self.closed_at = Some(std::time::Instant::now());
            if let Some(calls) = &self.calls {
                calls.end_session();
            }
        }
        died
    }

    /// The next line with something on it. One too long or not UTF-8 is answered here, and the caller
    /// looks at the session's bounds again before reading on.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let line = match self.lines.next().await {
                Some(Ok(Line::Text(line))) => line,
                Some(Ok(Line::TooLong(skeleton))) => {
                    let Some(answer) = jsonrpc::overlong_answer(skeleton.as_deref()) else {
                        tracing::debug!("a notification or response over the line cap was skipped");
                        continue;
                    };
                    let _ = self.queue_line(answer);
                    return LineRead::Answered;
                }
                Some(Ok(Line::Crowded(skeleton))) => {
                    let words = format!(
                        "Invalid request: this seat's sessions held more than {} MiB of lines not yet ended, \
                         its share, so this line was skipped as it came; send each line whole",
                        SEAT_UNFINISHED >> 20
                    );
                    let Some(answer) = jsonrpc::skipped_answer(skeleton.as_deref(), &words) else {
                        continue;
                    };
                    let _ = self.queue_line(answer);
                    return LineRead::Answered;
                }
                Some(Ok(Line::NotUtf8)) => {
                    let _ = self.queue_line(jsonrpc::error(
                        &Value::Null,
                        PARSE_ERROR,
                        "Parse error: the line is not UTF-8",
                    ));
                    return LineRead::Answered;
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "reading a session failed");
                    return LineRead::End;
                }
                None => return LineRead::End,
            };
            if !line.trim().is_empty() {
                return LineRead::Line(line);
            }
        }
    }

    /// Whether the session may have one more request in flight (cancelled ones winding down count).
    fn has_room(&self) -> bool {
        self.has_own_room() && self.answers.seat.has_room() && !self.held_by_seat()
    }

    /// Whether its seat's sessions left more answers unread together than they may, and this one holds
    /// some of them, or has calls whose answers are coming (a listen is no such call): it then acts on
    /// one request at a time, once it read all it was sent.
    fn held_by_seat(&self) -> bool {
        if !self.answers.seat.unread_past_bound() {
            return false;
        }
        let unread = lock(&self.answers.out).as_ref().map_or(0, Outbox::queued);
        unread > 0
            || lock(&self.answers.in_flight)
                .iter()
                .any(|id| !self.listens.contains(id))
    }

    /// Whether the session is below its own cap, whatever its seat's other sessions have in flight.
    fn has_own_room(&self) -> bool {
        lock(&self.answers.in_flight).len() + self.cancelled.len() < MAX_IN_FLIGHT
    }

    /// Counts the session's requests in flight with its seat's other sessions', against SEAT_IN_FLIGHT.
    pub fn with_seat_load(mut self, load: Arc<super::sessions::SeatLoad>) -> Self {
        self.lines
            .decoder_mut()
            .share(load.unfinished.clone(), SEAT_UNFINISHED);
        if let Some(out) = lock(&self.answers.out).as_ref() {
            out.count_in(load.unread.clone());
        }
        if let Some(answers) = Arc::get_mut(&mut self.answers) {
            answers.seat = load;
        }
        self
    }

    /// A line read while the session (or its seat) has all it may in flight: a cancellation is acted on at
    /// once (what it names, if held, never starts), anything else held until there is room.
    fn take_or_hold(&mut self, line: String) -> Option<String> {
        match cancellation(&line) {
            Some(id) => {
                // Never both held and in flight: a request under an id taken is refused as it is read
                // (`hold`).
                if let Some(id) = &id {
                    self.backlog.cancel(id);
                }
                Some(line)
            }
            // The seat's share bounds its calls: anything else is answered by the daemon itself, so a
            // new session of a busy seat still says hello and lists its tools.
            None if self.has_own_room() && !is_call(&line) => Some(line),
            None => {
                self.hold(line);
                None
            }
        }
    }

    /// Forgets the cancelled requests whose time to wind down is over.
    fn forget_wound_down(&mut self) {
        if !self.cancelled.is_empty() {
            let now = std::time::Instant::now();
            self.cancelled.retain(|(_, until)| *until > now);
        }
    }

    /// Holds a line read while the session has all it may in flight; a request under an id in flight or
    /// held already is refused now, as it would have been had there been room (run later, once the first
    /// was answered, it would be a second answer under one id).
    fn hold(&mut self, line: String) {
        let id = super::backlog::request_id(&line);
        if let Some(id) = &id
            && (self.backlog.holds(id) || lock(&self.answers.in_flight).contains(id))
        {
            let _ = self.queue_line(jsonrpc::error_under(
                id,
                INVALID_REQUEST,
                &in_flight_words(id),
            ));
            return;
        }
        self.backlog.push(id, line);
    }

    /// Notes a request's id as in flight; `false` (after answering it) when that id cannot be taken.
    fn admit_id(&mut self, id: &NumberOrString) -> bool {
        self.forget_wound_down();
        let winding_down = self.cancelled.iter().any(|(c, _)| c == id);
        if !winding_down && self.answers.take_id(id) {
            return true;
        }
        let shown = jsonrpc::key_of(id);
        let why = if winding_down {
            format!(
                "Invalid request: the id {shown} belongs to a request this session cancelled, which may still \
                 be winding down; send it again with an id of its own"
            )
        } else {
            in_flight_words(id)
        };
        let _ = self.queue_line(jsonrpc::error_under(id, INVALID_REQUEST, &why));
        false
    }

    /// A cancellation: the request it names gets no answer, its id is free again (once it has wound
    /// down), and a call of the session's own is stopped.
    fn cancel(&mut self, id: Option<NumberOrString>) {
        let Some(id) = id else { return };
        if !self.answers.free_id(&id) {
            return;
        }
        if let Some(calls) = &self.calls {
            calls.cancel(&id);
        }
        if self.cancelled.len() == CANCELLED_KEPT {
            self.cancelled.remove(0);
        }
        self.cancelled
            .push((id, std::time::Instant::now() + CANCELLED_HOLD));
        self.answers.answered.notify_one();
    }

    /// Acts on one line: what rmcp is to read, if anything.
    fn act_on(&mut self, line: &str) -> Option<ClientJsonRpcMessage> {
        let text = jsonrpc::mended(line);
        // A call's params are read with its envelope, in one pass; any other line is read again, with its
        // params as written, for rmcp (or for words where the params read as a call's do not fit).
        if let (Message::Request(r), read) = jsonrpc::read_within(&text, "line", Some(params::CALL))
        {
            if r.method == "tools/call" {
                if self.admit_id(&r.id) {
                    let call = params::call_read(read, &mut self.capabilities);
                    self.take_call(r.id, call);
                }
                return None;
            }
            // Past what any other request may be: refused as below, without reading it again.
            if text.len() > MAX_OTHER && r.method != "initialize" {
                if self.admit_id(&r.id) {
                    self.refuse_long(&r.id, &r.method, text.len());
                }
                return None;
            }
        }
        match jsonrpc::read(&text, "line") {
            Message::Bad(answer, _) => {
                if let Some(answer) = answer {
                    let _ = self.queue_line(answer);
                }
                None
            }
            Message::Response(_) => None,
            Message::Notification(n) => {
                if n.method == "notifications/cancelled" {
                    self.cancel(jsonrpc::cancelled_request(n.params));
                }
                if !self.begun {
                    tracing::debug!(method = %n.method, "a notification before the session began was dropped");
                    return None;
                }
                serde_json::from_str(&text).ok()
            }
            Message::Request(r) => {
                if !self.admit_id(&r.id) {
                    return None;
                }
                if r.method == "tools/call" {
                    let call = params::call(r.params, &mut self.capabilities);
                    self.take_call(r.id, call);
                    return None;
                }
                // A session keeps the revision it began with: one begun as 2026-07-28 has no initialize
                // or ping, and one begun with initialize none of 2026-07-28's methods.
                let gone = match self.lifecycle {
                    Lifecycle::Inline => params::removed_words(&r.method)
                        .map(|_| params::removed_in_session_words(&r.method)),
                    Lifecycle::None if params::modern_meta(r.params) => {
                        params::removed_words(&r.method)
                    }
                    _ => None,
                };
                let not_yet = (self.lifecycle == Lifecycle::Handshake
                    && params::is_2026_method(&r.method))
                .then(|| params::method_not_found_words(&r.method));
                if let Some(why) = gone.or(not_yet) {
                    self.refused_span(&r.id, &r.method, &why);
                    self.answers
                        .answer_line(&r.id, jsonrpc::error_under(&r.id, METHOD_NOT_FOUND, &why));
                    return None;
                }
                if text.len() > MAX_OTHER {
                    self.refuse_long(&r.id, &r.method, text.len());
                    return None;
                }
                // Counted here, as each is read, and refused before rmcp acknowledges it: a stream
                // acknowledged then failed reads as live.
                if r.method == "subscriptions/listen" {
                    let in_flight = lock(&self.answers.in_flight);
                    self.listens.retain(|id| in_flight.contains(id));
                    drop(in_flight);
                    if self.listens.len() >= MAX_LISTENS {
                        let why = format!(
                            "Invalid request: this session holds {MAX_LISTENS} subscriptions/listen streams \
                             already, the most it may (one hears every change of the tool list); cancel one it \
                             does not need (notifications/cancelled) before opening another"
                        );
                        self.refused_span(&r.id, &r.method, &why);
                        self.answers
                            .answer_line(&r.id, jsonrpc::error_under(&r.id, INVALID_REQUEST, &why));
                        return None;
                    }
                    self.listens.push(r.id.clone());
                }
                let initialize_version = (r.method == "initialize" && traces::tracer().is_some())
                    .then(|| params::asked_version(r.params))
                    .flatten();
                if let Some(calls) = &self.calls
                    && traces::tracer().is_some()
                    && let Some(span) = RequestSpan::start(&traces::Request {
                        method: &r.method,
                        served: params::is_known_method(&r.method),
                        tool: None,
                        id: Some(&r.id),
                        seat: calls.seat(),
                        session: None,
                        version: params::meta_string(
                            r.params,
                            "io.modelcontextprotocol/protocolVersion",
                        )
                        .as_deref()
                        .or(self.version.as_deref())
                        .or(initialize_version.as_deref()),
                        transport: "unix",
                        traceparent: params::meta_string(r.params, "traceparent").as_deref(),
                        tracestate: params::meta_string(r.params, "tracestate").as_deref(),
                    })
                {
                    lock(&self.answers.spans).insert(r.id.clone(), span);
                }
                let mut msg = match params::for_rmcp(&text, &r) {
                    Ok(msg) => msg,
                    Err(answer) => {
                        self.answers.answer_line(&r.id, answer);
                        return None;
                    }
                };
                // Begun with initialize, it is answered in the revision initialize agreed: rmcp goes
                // by a request's own protocolVersion first.
                if self.lifecycle == Lifecycle::Handshake
                    && let ClientJsonRpcMessage::Request(request) = &mut msg
                {
                    request
                        .request
                        .get_meta_mut()
                        .remove("io.modelcontextprotocol/protocolVersion");
                }
                self.begins(&r, msg)
            }
        }
    }

    /// Refuses a request (not a call) longer than any but a call may be.
    fn refuse_long(&self, id: &NumberOrString, method: &str, len: usize) {
        let why = format!(
            "Invalid request: a {} request of {len} bytes; this server reads at most {} KiB of any request \
             but tools/call",
            jsonrpc::clip(method),
            MAX_OTHER >> 10
        );
        self.refused_span(id, method, &why);
        self.answers
            .answer_line(id, jsonrpc::error_under(id, INVALID_REQUEST, &why));
    }

    /// A request refused before it reached its method, as a span failed in the words its caller read,
    /// as over HTTP (when traces are on, and the session's seat is known).
    fn refused_span(&self, id: &NumberOrString, method: &str, why: &str) {
        if traces::tracer().is_none() {
            return;
        }
        let Some(calls) = &self.calls else {
            return;
        };
        if let Some(mut span) = RequestSpan::start(&traces::Request {
            method,
            served: params::is_known_method(method),
            tool: None,
            id: Some(id),
            seat: calls.seat(),
            session: None,
            version: self.version.as_deref(),
            transport: "unix",
            traceparent: None,
            tracestate: None,
        }) {
            span.failed(why);
        }
    }

    /// A request for rmcp: passed on, and the session's beginning noted; or, before it began, answered
    /// here when it cannot begin it.
    fn begins(
        &mut self,
        r: &jsonrpc::Request<'_>,
        msg: ClientJsonRpcMessage,
    ) -> Option<ClientJsonRpcMessage> {
        let ClientJsonRpcMessage::Request(request) = &msg else {
            return Some(msg);
        };
        let initialize = matches!(request.request, ClientRequest::InitializeRequest(_));
        // Before the session begins rmcp answers such a request by naming 2026-07-28's `_meta` keys,
        // which says nothing to a client that forgot its `initialize`.
        if !self.begun
            && !initialize
            && !matches!(
                request.request,
                ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_)
            )
            && !request
                .request
                .get_meta()
                .protocol_version()
                .is_some_and(|v| params::inline_version(v.as_str()))
        {
            let line = jsonrpc::error_under(&r.id, INVALID_REQUEST, params::NOT_BEGUN);
            self.answers.answer_line(&r.id, line);
            return None;
        }
        if initialize && self.lifecycle == Lifecycle::Handshake {
            // Answered, it would leave the session half in one revision, half in another.
            let line = jsonrpc::error_under(&r.id, INVALID_REQUEST, params::INITIALIZED_ALREADY);
            self.answers.answer_line(&r.id, line);
            return None;
        }
        if initialize {
            self.begun = true;
            self.lifecycle = Lifecycle::Handshake;
        } else if starts_session(&request.request) {
            self.begun = true;
            if self.lifecycle == Lifecycle::None
                && !matches!(request.request, ClientRequest::DiscoverRequest(_))
            {
                self.lifecycle = Lifecycle::Inline;
            }
        }
        Some(msg)
    }

    /// A `tools/call`, taken by the session's call path after the checks rmcp makes of any request: its
    /// params, and what the session's beginning asks of its `_meta`.
    fn take_call(&mut self, id: NumberOrString, call: Result<params::CallParams<'_>, String>) {
        let refuse = |this: &Self, name: Option<&str>, code: i64, why: String| {
            this.refused_span(&id, "tools/call", &why);
            if let Some(calls) = &this.calls {
                calls.count_error(name, code);
            }
            this.answers
                .answer_line(&id, jsonrpc::error_under(&id, code, &why));
        };
        let call = match call {
            Ok(call) => call,
            Err(why) => {
                return refuse(self, None, INVALID_PARAMS, format!("Invalid params: {why}"));
            }
        };
        let modern = match (&call.version, self.lifecycle) {
            // Begun with initialize, it is answered in the revision initialize agreed, whatever the
            // call's _meta says.
            (_, Lifecycle::Handshake) => false,
            (Some(version), _) => {
                if !params::known_version(version) {
                    let error = ErrorData::unsupported_protocol_version(
                        serde_json::from_value(Value::String(version.to_string()))
                            .unwrap_or(ProtocolVersion::V_2026_07_28),
                        ProtocolVersion::KNOWN_VERSIONS,
                    );
                    self.refused_span(&id, "tools/call", &error.message);
                    if let Some(calls) = &self.calls {
                        calls.count_error(Some(&call.name), i64::from(error.code.0));
                    }
                    let line =
                        serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(id.clone())))
                            .unwrap_or_default();
                    return self.answers.answer_line(&id, line);
                }
                let modern = params::inline_version(version);
                // A revision with `initialize` named in a call's _meta begins no session.
                if !modern && self.lifecycle == Lifecycle::None {
                    return refuse(
                        self,
                        Some(&call.name),
                        INVALID_REQUEST,
                        params::NOT_BEGUN.into(),
                    );
                }
                if modern && !call.missing.is_empty() {
                    let why = params::missing_words(&call.missing);
                    return refuse(self, Some(&call.name), INVALID_PARAMS, why);
                }
                if modern && self.lifecycle == Lifecycle::None {
                    self.lifecycle = Lifecycle::Inline;
                }
                modern
            }
            (None, Lifecycle::Inline) => {
                let why = params::missing_words(&call.missing);
                return refuse(self, Some(&call.name), INVALID_PARAMS, why);
            }
            (None, Lifecycle::None) => {
                return refuse(
                    self,
                    Some(&call.name),
                    INVALID_REQUEST,
                    params::NOT_BEGUN.into(),
                );
            }
        };
        // Traces off, nothing is looked up: this is every call's path.
        let traced = self.calls.as_ref().filter(|_| traces::tracer().is_some());
        let span = traced.and_then(|calls| {
            RequestSpan::start(&traces::Request {
                method: "tools/call",
                served: true,
                tool: calls.served(&call.name),
                id: Some(&id),
                seat: calls.seat(),
                session: None,
                version: call.version.as_deref().or(self.version.as_deref()),
                transport: "unix",
                traceparent: call.traceparent.as_deref(),
                tracestate: call.tracestate.as_deref(),
            })
        });
        let call = Call {
            id,
            name: call.name.into_owned(),
            args: Arc::from(call.arguments.map_or("{}", RawValue::get)),
            progress: call.progress,
            modern,
            span: Mutex::new(span),
            traceparent: call.traceparent,
            token_held: None,
        };
        if let Some(calls) = &mut self.calls {
            calls.take(call, &self.answers);
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for SessionTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // An initialize answered with a revision: the handshake is done, whatever the client sent first.
        if let ServerJsonRpcMessage::Response(r) = &item
            && let ServerResult::InitializeResult(agreed) = &r.result
        {
            self.lifecycle = Lifecycle::Handshake;
            self.version = Some(agreed.protocol_version.to_string().into());
        }
        std::future::ready(self.answers.queue(&item))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let line = self.next_line().await?;
            if let Some(msg) = self.act_on(&line) {
                return Some(msg);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(calls) = &self.calls {
            calls.wind_down(self.closed_at).await;
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
enum LineRead {
    Line(String),
    /// A line that could not be read was answered.
    Answered,
    /// The session's input ended.
    End,
}

/// Whether a line is a `notifications/cancelled`, and the id it cancels (as the daemon reads it).
fn cancellation(line: &str) -> Option<Option<NumberOrString>> {
    if !line.contains("notifications/cancelled") {
        return None;
    }
    let text = jsonrpc::mended(line);
    match jsonrpc::read(&text, "line") {
        Message::Notification(n) if n.method == "notifications/cancelled" => {
            Some(jsonrpc::cancelled_request(n.params))
        }
        _ => None,
    }
}

/// Whether `line` is a `tools/call` request, as the daemon reads it (read whole: `tools\/call` is one too).
fn is_call(line: &str) -> bool {
    matches!(jsonrpc::read(&jsonrpc::mended(line), "line"),
        Message::Request(r) if r.method == "tools/call")
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Why a request is refused whose id is taken: by one in flight, or one held behind the session's cap.
fn in_flight_words(id: &NumberOrString) -> String {
    format!(
        "Invalid request: a request with the id {} is already in flight on this session (or waiting for room \
         behind the 64 it may have); each request in flight needs an id of its own",
        jsonrpc::key_of(id)
    )
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
            .is_some_and(|v| params::inline_version(v.as_str()))
}
