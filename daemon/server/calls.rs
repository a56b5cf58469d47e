//! Every `tools/call` of a socket session, from its params to its answer line: the one route a call
//! takes, whatever shape it comes in (a progress token, 2026-07-28's `_meta`, none).
//!
//! A call is taken as it is read. A plugin call whose host is up has no task of its own: its line goes
//! to the host at once, and its answer line is made (once) and queued on the link's reader as the answer
//! arrives; its progress reports go out the same way (`server::progress`). A task per call cost about as
//! much of the daemon's work as the rest of the call. What has to wait (a host being started, `room`'s
//! file, arguments too large to check on the daemon's one thread) runs as a task. A
//! `notifications/cancelled` stops a call and it is not answered; the end of the session stops what
//! still runs (at once when the session is ended or its client died; when the client closed only its
//! side, the transport waits for its calls, each bounded by its deadline, and this stops whatever is
//! left 5 s after that). Over HTTP rmcp owns the transport and runs each request in a task;
//! `SeatService::call_tool` takes the call through the same checks, the same host call and the same
//! outcome.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{NumberOrString, ProgressToken};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::answers::Answers;
use super::arguments::{self, Refusal};
use super::figures::How;
use super::progress::{Relay, To};
use super::session::{AdmittedCall, SeatService};
use super::traces::{HostSpan, RequestSpan};
use crate::answer::Outcome;
use crate::host::link::{CallEnd, End, Link, Settle};
use crate::host::{self, CallRequest, Ended};
use crate::jsonrpc::{self, INVALID_PARAMS};
use crate::sync::lock;
use crate::tools::Kind;

/// How long calls may run on once the transport is done with a session, as rmcp gives its own.
const WIND_DOWN: Duration = Duration::from_secs(5);

/// A call, as read from its line.
pub struct Call {
    pub id: NumberOrString,
    pub name: String,
    /// The arguments as the client wrote them (`{}` when it gave none): checked, and sent on as they are.
    pub args: Arc<str>,
    pub progress: Option<ProgressToken>,
    /// Asked under 2026-07-28 or later: its result says `resultType`.
    pub modern: bool,
    /// Its span, when traces are on; ended with the call.
    pub span: Mutex<Option<RequestSpan>>,
    /// The W3C trace context its caller passed on, if any.
    pub traceparent: Option<String>,
    /// Its progress token, taken from the session's others while it is in flight.
    pub token_held: Option<super::session::TokenHeld>,
}

impl Call {
    /// Ends the call's span, saying how a call that did not answer with text failed.
    fn end_span(&self, outcome: &Outcome) {
        if let Some(mut span) = lock(&self.span).take() {
            span.outcome(outcome);
        }
    }

    /// The host part's span (when traces are on) and the trace context the plugin gets: that span's, or
    /// the caller's own.
    pub fn host_trace(&self) -> (Option<HostSpan>, Option<String>) {
        let host = lock(&self.span)
            .as_ref()
            .and_then(|s| s.host_part(&self.name));
        let traceparent = host
            .as_ref()
            .map(HostSpan::traceparent)
            .or_else(|| self.traceparent.clone());
        (host, traceparent)
    }
}

/// One socket session's calls.
pub struct Calls {
    shared: Arc<Shared>,
    next: u64,
    /// Ends the task that stops the calls with no task of their own when the session's token is
    /// cancelled, should this go first.
    gone: CancellationToken,
}

/// What the session's calls share with it.
struct Shared {
    service: SeatService,
    /// The session's own token: when the session is ended (its seat removed), its calls stop at once.
    session: CancellationToken,
    /// The calls running: id → (which call it is, how to stop it). An id a cancelled call left may be
    /// taken again while that call winds down, so each call knows itself by its number.
    running: Mutex<crate::maps::Map<NumberOrString, (u64, StopBy)>>,
    /// The calls that run as tasks.
    tasks: TaskTracker,
    /// Woken as each plugin call with no task of its own ends.
    settled: tokio::sync::Notify,
}

/// How a running call is stopped.
#[derive(Clone)]
enum StopBy {
    /// Its task's token.
    Task(CancellationToken),
    /// A plugin call with no task of its own: withdrawn from its host's link, under its id there.
    Link(Arc<Link>, u64, Option<Arc<Relay>>),
}

impl Calls {
    pub fn new(service: SeatService, session: CancellationToken) -> Self {
        let shared = Arc::new(Shared {
            service,
            session: session.clone(),
            running: Mutex::default(),
            tasks: TaskTracker::new(),
            settled: tokio::sync::Notify::new(),
        });
        // The calls that run as tasks stop with the session's token (theirs are its children); those
        // with no task of their own are withdrawn from their hosts when it is cancelled (the seat
        // removed or given a new secret, the client gone), at once, as theirs are.
        let gone = CancellationToken::new();
        let (watched, until) = (Arc::downgrade(&shared), gone.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = session.cancelled() => {}
                _ = until.cancelled() => return,
            }
            if let Some(shared) = watched.upgrade() {
                // Ended by a change of its seat: the calls are still answered, saying so (the client
                // may read on); else nobody waits for their answers.
                match shared.service.ended_by() {
                    Some(change) => shared.withdraw_plain(change.why(), true),
                    None => shared.withdraw_plain(CANCELLED, false),
                }
            }
        });
        Self {
            shared,
            next: 0,
            gone,
        }
    }

    /// The seat whose calls these are.
    pub fn seat(&self) -> &str {
        self.shared.service.seat()
    }

    /// `name` where a tool has it (`Daemon::served`).
    pub fn served<'a>(&self, name: &'a str) -> Option<&'a str> {
        self.shared.service.served(name)
    }

    /// Counts a call refused as it was read (its params, its revision): `name` where it was read.
    pub fn count_error(&self, name: Option<&str>, code: i64) {
        self.shared.service.record_error(name, Instant::now(), code);
    }

    /// Runs the call; its answer goes to `answers` unless it is cancelled first.
    pub fn take(&mut self, mut call: Call, answers: &Arc<Answers>) {
        self.next += 1;
        let number = self.next;
        let started = Instant::now();
        let shared = &self.shared;
        if let Some(token) = &call.progress {
            match shared.service.hold_token(token) {
                Ok(held) => call.token_held = Some(held),
                Err(why) => {
                    return shared.error(&call, started, jsonrpc::INVALID_PARAMS, &why, answers);
                }
            }
        }
        let admitted = match shared.service.enter_call(&call.name) {
            Ok(Ok(admitted)) => admitted,
            Ok(Err((outcome, how))) => {
                return shared.answer_now(&call, started, &outcome, how, answers);
            }
            Err(error) => {
                let code = i64::from(error.code.0);
                return shared.error(&call, started, code, &error.message, answers);
            }
        };
        if let Some(args) =
            arguments::without_clients_own(&admitted.generation, &call.name, &call.args)
        {
            call.args = args;
        }
        if arguments::needs_share(&call.args) {
            let cost = arguments::cost(&call.args);
            if cost > arguments::MAX_READ {
                let why = arguments::too_large("The arguments", cost);
                return shared.refuse(&call, started, Refusal::Params(why), answers);
            }
            return self.spawn(call, number, admitted, started, answers, Some(cost));
        }
        match arguments::check_here(&admitted.generation, &call.name, &call.args) {
            Some(Ok(())) => {}
            Some(Err(refusal)) => return shared.refuse(&call, started, refusal, answers),
            None => return self.spawn(call, number, admitted, started, answers, Some(0)),
        }
        let generation = admitted.generation.clone();
        let file = match generation.tools.get(&call.name).map(|e| &e.kind) {
            Some(Kind::Plugin { file }) => file.clone(),
            Some(Kind::Index) => match shared.service.index_now(&generation) {
                Some(outcome) => {
                    drop(admitted);
                    return shared.answer_now(&call, started, &outcome, How::Ran, answers);
                }
                None => return self.spawn(call, number, admitted, started, answers, None),
            },
            _ => return self.spawn(call, number, admitted, started, answers, None),
        };
        let config = &generation.config;
        let (timeout, max) = (config.call_timeout, config.max_answer_bytes);
        let relay = call
            .progress
            .clone()
            .map(|token| Relay::new(token, To::Lines(answers.clone())));
        // No host up now: the waiting way waits for one, and makes the host part's span itself.
        let Some(link) = generation.host.live_link() else {
            return self.spawn(call, number, admitted, started, answers, None);
        };
        let (mut host_span, traceparent) = call.host_trace();
        let prepared = {
            let role = config.role_of(shared.service.seat());
            let request = CallRequest {
                tool: &call.name,
                file: &file,
                args: &call.args,
                seat: shared.service.seat(),
                role: role.as_str(),
                progress: relay.clone().map(|r| r as _),
                traceparent: traceparent.as_deref(),
            };
            host::prepare(&generation.host, link, &request)
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(why) => {
                let outcome = crate::answer::plugin(&file, Ended::NotReimported(why), max);
                if let Some(span) = &mut host_span {
                    span.outcome(&outcome);
                }
                return shared.answer_now(&call, started, &outcome, How::NotRun, answers);
            }
        };
        let (link, on_host) = (prepared.link().clone(), prepared.id());
        lock(&shared.running).insert(
            call.id.clone(),
            (number, StopBy::Link(link, on_host, relay.clone())),
        );
        let plain = Box::new(Plain {
            shared: shared.clone(),
            answers: answers.clone(),
            call,
            number,
            file,
            admitted,
            started,
            timeout,
            max,
            relay,
            host_span,
        });
        if let Err(plain) = prepared.send(tokio::time::Instant::from_std(started) + timeout, plain)
        {
            // The host has just ended and never saw it: the waiting way finds the next one.
            let gone = plain.link_sent_to();
            plain.take_the_waiting_way(gone);
        }
    }

    /// Runs a call in a task of its own: its arguments checked apart first when `apart` gives what they
    /// cost once read (none: checked already).
    fn spawn(
        &self,
        call: Call,
        number: u64,
        admitted: AdmittedCall,
        started: Instant,
        answers: &Arc<Answers>,
        apart: Option<usize>,
    ) {
        let ct = self.shared.session.child_token();
        lock(&self.shared.running).insert(call.id.clone(), (number, StopBy::Task(ct.clone())));
        let shared = self.shared.clone();
        let answers = answers.clone();
        self.shared.tasks.spawn(async move {
            let service = &shared.service;
            if let Some(cost) = apart {
                let checked = tokio::select! {
                    checked = service.check_apart(&admitted, &call.name, call.args.clone(), cost) => checked,
                    // Stopped while its arguments were checked: answered as any call stopped so.
                    _ = ct.cancelled() => {
                        if shared.release(&call.id, number) {
                            shared.answer_now(&call, started, &Outcome::Unsent, How::Ran, &answers);
                        }
                        return;
                    }
                };
                if let Err(refusal) = checked {
                    if shared.release(&call.id, number) {
                        shared.refuse(&call, started, refusal, &answers);
                    }
                    return;
                }
            }
            let relay = call
                .progress
                .clone()
                .map(|token| Relay::new(token, To::Lines(answers.clone())));
            let (outcome, how) = Box::pin(service.run_admitted(
                &call.name,
                &call.args,
                admitted,
                &ct,
                relay.clone(),
                &|| call.host_trace(),
            ))
            .await;
            // Cancelled (by the client, or at the end of the session): no answer, and the id may already
            // be another call's; nor the report held back, whose token may be another call's too.
            let answering = shared.release(&call.id, number);
            if let Some(relay) = &relay {
                relay.ends(answering);
            }
            service.record(&call.name, started, &outcome, how);
            call.end_span(&outcome);
            if answering {
                answers.answer_line(&call.id, shared.line(&call, &outcome));
            }
        });
    }

    /// Stops the call with this id, if it is one of these; true when it was.
    pub fn cancel(&self, id: &NumberOrString) -> bool {
        let Some((_, stop)) = lock(&self.shared.running).remove(id) else {
            return false;
        };
        stop.stop(CANCELLED);
        true
    }

    /// Gives the calls still running until a few seconds after `since` (when the client closed, or now) to
    /// answer, then stops them and waits for them to end.
    pub async fn wind_down(&self, since: Option<Instant>) {
        let shared = &self.shared;
        shared.tasks.close();
        let since = since.unwrap_or_else(Instant::now);
        if tokio::time::timeout_at((since + WIND_DOWN).into(), shared.all_ended())
            .await
            .is_err()
        {
            self.stop_all();
            shared.tasks.wait().await;
        }
    }

    /// Ends the session (its client died): its calls stop at once.
    pub fn end_session(&self) {
        self.shared.session.cancel();
        self.shared.withdraw_plain(CANCELLED, false);
    }

    fn stop_all(&self) {
        let all: Vec<(NumberOrString, (u64, StopBy))> =
            lock(&self.shared.running).drain().collect();
        for (_, (_, stop)) in all {
            stop.stop("the caller's session closed, and the call had not answered 5 s later");
        }
    }
}

impl Drop for Calls {
    fn drop(&mut self) {
        self.gone.cancel();
        self.stop_all();
    }
}

/// Why a call its caller (or its session's end) stopped is stopped, as its signal says.
const CANCELLED: &str = "the caller cancelled the call";

impl StopBy {
    /// Stops the call: answered as it ends if its entry is still in `running`, else not.
    fn stop(self, why: &str) {
        match self {
            StopBy::Task(ct) => ct.cancel(),
            StopBy::Link(link, on_host, relay) => {
                if let Some(relay) = relay {
                    relay.close();
                }
                if let Some(settle) = link.withdraw(on_host) {
                    link.send(&host::protocol::ToHost::Cancel {
                        id: on_host,
                        why,
                        timeout: false,
                    });
                    settle.end(End::Cancelled);
                }
            }
        }
    }
}

impl Shared {
    /// Answers a call that ended as it was taken (refused, or a built-in that needed no task), and counts it.
    fn answer_now(
        &self,
        call: &Call,
        started: Instant,
        outcome: &Outcome,
        how: How,
        answers: &Answers,
    ) {
        self.service.record(&call.name, started, outcome, how);
        call.end_span(outcome);
        answers.answer_line(&call.id, self.line(call, outcome));
    }

    /// The line answering `call`: one stopped because a change of its seat ended the session says so.
    fn line(&self, call: &Call, outcome: &Outcome) -> Vec<u8> {
        match outcome {
            Outcome::Cancelled | Outcome::Unsent => {
                answer_line(call, &self.service.answered_as(&call.name, outcome.clone()))
            }
            outcome => answer_line(call, outcome),
        }
    }

    /// Answers a call whose arguments were not taken.
    fn refuse(&self, call: &Call, started: Instant, refusal: Refusal, answers: &Answers) {
        match refusal {
            Refusal::Tool(why) => {
                self.answer_now(call, started, &Outcome::Refused(why), How::Misfit, answers);
            }
            Refusal::Params(why) => {
                let why = format!("Invalid params: {why}");
                self.error(call, started, INVALID_PARAMS, &why, answers);
            }
        }
    }

    /// Answers a call it did not run with a JSON-RPC error, counted and its span failed.
    fn error(&self, call: &Call, started: Instant, code: i64, why: &str, answers: &Answers) {
        if let Some(mut span) = lock(&call.span).take() {
            span.failed(why);
        }
        self.service.record_error(Some(&call.name), started, code);
        answers.answer_line(&call.id, jsonrpc::error_under(&call.id, code, why));
    }

    /// Stops every call with no task of its own, `why` as its signal says: unanswered, or, when
    /// `answered`, left in `running`, so each is answered as it ends (`Shared::line`).
    fn withdraw_plain(&self, why: &str, answered: bool) {
        let withdrawn: Vec<StopBy> = {
            let mut running = lock(&self.running);
            let plain = running
                .iter()
                .filter(|(_, (_, stop))| matches!(stop, StopBy::Link(..)));
            if answered {
                plain.map(|(_, (_, stop))| stop.clone()).collect()
            } else {
                let ids: Vec<NumberOrString> = plain.map(|(id, _)| id.clone()).collect();
                ids.iter()
                    .filter_map(|id| running.remove(id).map(|(_, stop)| stop))
                    .collect()
            }
        };
        for stop in withdrawn {
            stop.stop(why);
        }
    }

    /// Takes call `number` out of `running`; false when it is no longer there (cancelled), and its id
    /// then may be another call's.
    fn release(&self, id: &NumberOrString, number: u64) -> bool {
        let mut running = lock(&self.running);
        match running.get(id) {
            Some((n, _)) if *n == number => running.remove(id).is_some(),
            _ => false,
        }
    }

    /// Resolves once every call of the session has ended, task or not.
    async fn all_ended(&self) {
        loop {
            self.tasks.wait().await;
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let plain = lock(&self.running)
                .values()
                .any(|(_, stop)| matches!(stop, StopBy::Link(..)));
            if !plain && self.tasks.is_empty() {
                return;
            }
            if plain {
                settled.await;
            }
        }
    }
}

/// A plugin call with no task of its own, waiting on its host's link for its end.
struct Plain {
    shared: Arc<Shared>,
    answers: Arc<Answers>,
    call: Call,
    number: u64,
    file: Arc<str>,
    admitted: AdmittedCall,
    started: Instant,
    timeout: Duration,
    max: usize,
    relay: Option<Arc<Relay>>,
    /// The host part's span, when traces are on.
    host_span: Option<HostSpan>,
}

impl Settle for Plain {
    fn end(self: Box<Self>, how: End) {
        let ended = match how {
            End::Call(CallEnd::Answered(answer)) => Ended::Answered(answer),
            End::Call(CallEnd::HostStopped(why)) => Ended::HostEnded(why),
            End::Call(CallEnd::NotReceived) => {
                let gone = self.link_sent_to();
                return self.take_the_waiting_way(gone);
            }
            End::Expired { silent } => Ended::Deadline {
                limit: self.timeout,
                silent,
            },
            End::Cancelled => Ended::Cancelled,
        };
        (*self).finish(ended);
    }
}

impl Plain {
    /// The link this call was sent to, while it is still running.
    fn link_sent_to(&self) -> Option<Arc<Link>> {
        match lock(&self.shared.running).get(&self.call.id) {
            Some((n, StopBy::Link(link, ..))) if *n == self.number => Some(link.clone()),
            _ => None,
        }
    }

    /// The call's host ended without receiving it (`gone`, when known): it runs as a task of its own,
    /// which waits for the next host as any call does. One stopped meanwhile ends unanswered.
    fn take_the_waiting_way(self: Box<Self>, gone: Option<Arc<Link>>) {
        let shared = self.shared.clone();
        let ct = shared.session.child_token();
        let still_running = {
            let mut running = lock(&shared.running);
            match running.get_mut(&self.call.id) {
                Some((n, stop)) if *n == self.number => {
                    *stop = StopBy::Task(ct.clone());
                    true
                }
                _ => false,
            }
        };
        if !still_running {
            return (*self).finish(Ended::Unsent);
        }
        shared.tasks.spawn(async move {
            let generation = self.admitted.generation.clone();
            let role = generation.config.role_of(self.shared.service.seat());
            let traceparent = self
                .host_span
                .as_ref()
                .map(HostSpan::traceparent)
                .or_else(|| self.call.traceparent.clone());
            let request = CallRequest {
                tool: &self.call.name,
                file: &self.file,
                args: &self.call.args,
                seat: self.shared.service.seat(),
                role: role.as_str(),
                progress: self.relay.clone().map(|r| r as _),
                traceparent: traceparent.as_deref(),
            };
            let ended = host::call_from(
                &generation.host,
                request,
                self.timeout,
                self.started,
                gone,
                &ct,
            )
            .await;
            (*self).finish(ended);
        });
        // Tells a wind-down waiting on plain calls that this one is a task now.
        shared.settled.notify_waiters();
    }

    fn finish(self, ended: Ended) {
        let how = How::of(&ended);
        let outcome = crate::answer::plugin(&self.file, ended, self.max);
        let Plain {
            shared,
            answers,
            call,
            number,
            admitted,
            started,
            host_span,
            relay,
            ..
        } = self;
        if let Some(mut span) = host_span {
            span.outcome(&outcome);
        }
        call.end_span(&outcome);
        shared.service.record(&call.name, started, &outcome, how);
        drop(admitted);
        // Cancelled (by the client, or at the end of the session): no answer, and the id may already be
        // another call's; nor the report held back, whose token may be another call's too.
        let answering = shared.release(&call.id, number);
        if let Some(relay) = &relay {
            relay.ends(answering);
        }
        if answering {
            answers.answer_line(&call.id, shared.line(&call, &outcome));
        }
        shared.settled.notify_waiters();
    }
}

/// The answer's line, written as rmcp writes a `CallToolResult` of one text block (with `resultType`
/// first for a call of 2026-07-28 or later), without building rmcp's message and walking its serde.
pub fn answer_line(call: &Call, outcome: &Outcome) -> Vec<u8> {
    let cancelled;
    let (text, is_error) = match outcome {
        Outcome::Json(json) => {
            let mut line = Vec::with_capacity(json.len() + 128);
            answer_line_into(
                &mut line,
                call,
                |line| line.extend_from_slice(json.as_bytes()),
                false,
            );
            return line;
        }
        Outcome::Text(text) => (text.as_str(), false),
        Outcome::Refused(why) => (why.as_str(), true),
        Outcome::Cancelled | Outcome::Unsent => {
            cancelled = crate::answer::cancelled(
                &call.name,
                &crate::runtime_log::timestamp(std::time::SystemTime::now()),
            );
            (cancelled.as_str(), true)
        }
    };
    let mut line = Vec::with_capacity(text.len() + 128);
    answer_line_into(&mut line, call, |line| write_json_str(line, text), is_error);
    line
}

/// The line of a one-text result, the text written by `text` as a JSON string.
fn answer_line_into(
    line: &mut Vec<u8>,
    call: &Call,
    text: impl FnOnce(&mut Vec<u8>),
    is_error: bool,
) {
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // Writing into memory cannot fail; an id is a number or a string, as rmcp writes it.
    let _ = serde_json::to_writer(&mut *line, &call.id);
    line.extend_from_slice(br#","result":{"#);
    if call.modern {
        line.extend_from_slice(br#""resultType":"complete","#);
    }
    line.extend_from_slice(br#""content":[{"type":"text","text":"#);
    text(line);
    line.extend_from_slice(if is_error {
        br#"}],"isError":true}}"#.as_slice()
    } else {
        br#"}],"isError":false}}"#.as_slice()
    });
}

/// A string as JSON, escaped as serde_json escapes it: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, and `\u00xx`
/// for the other control characters; every other character as it is. It looks at eight bytes at a time
/// for one to escape (serde_json looks at each in turn).
fn write_json_str(line: &mut Vec<u8>, s: &str) {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_in = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS != 0;
    // A byte below 0x20, a quote or a backslash among the eight.
    let to_escape = |w: u64| {
        w.wrapping_sub(ONES * 0x20) & !w & HIGHS != 0
            || zero_in(w ^ (ONES * u64::from(b'"')))
            || zero_in(w ^ (ONES * u64::from(b'\\')))
    };
    let bytes = s.as_bytes();
    line.reserve(bytes.len() + 2);
    line.push(b'"');
    let (mut from, mut at) = (0, 0);
    while at < bytes.len() {
        if let Some(eight) = bytes.get(at..at + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(eight);
            if !to_escape(u64::from_ne_bytes(word)) {
                at += 8;
                continue;
            }
        }
        let b = bytes[at];
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..0x20 => b"",
            _ => {
                at += 1;
                continue;
            }
        };
        line.extend_from_slice(&bytes[from..at]);
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            line.extend_from_slice(b"\\u00");
            line.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        } else {
            line.extend_from_slice(short);
        }
        at += 1;
        from = at;
    }
    line.extend_from_slice(&bytes[from..]);
    line.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ContentBlock, ServerJsonRpcMessage, ServerResult};

    fn call(id: NumberOrString, modern: bool) -> Call {
        Call {
            span: Mutex::new(None),
            traceparent: None,
            id,
            name: "echo".into(),
            args: Arc::from("{}"),
            progress: None,
            modern,
            token_held: None,
        }
    }

    /// What rmcp's own path writes for the same outcome, for a session of 2025 (`modern` false) or a
    /// request of 2026-07-28.
    fn rmcp_line(id: &NumberOrString, outcome: &Outcome, modern: bool) -> Vec<u8> {
        let text = match outcome {
            Outcome::Text(t) => CallToolResult::success(vec![ContentBlock::text(t.clone())]),
            Outcome::Json(j) => CallToolResult::success(vec![ContentBlock::text(
                crate::host::protocol::json_text(j),
            )]),
            Outcome::Refused(w) => CallToolResult::error(vec![ContentBlock::text(w.clone())]),
            Outcome::Cancelled | Outcome::Unsent => unreachable!("its text carries the time"),
        };
        let mut result = ServerResult::CallToolResult(text);
        if !modern {
            result.strip_result_type_for_legacy_peer();
        }
        result.strip_non_object_output_for_legacy_peer();
        serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone())).unwrap()
    }

    #[test]
    fn a_text_is_escaped_as_serde_json_escapes_it() {
        let mut texts: Vec<String> = (0u32..0x80)
            .filter_map(char::from_u32)
            .flat_map(|c| {
                // The character at every place in a word of eight, and beside every other.
                (0..9).map(move |k| format!("{}{c}{}", "a".repeat(k), "é".repeat(9 - k)))
            })
            .collect();
        let every: String = (0u32..0x80).filter_map(char::from_u32).collect();
        texts.push(every.clone() + "\u{2028}😀\u{7f}\u{80}" + &every);
        texts.push(String::new());
        texts.push("\"\\\n".repeat(40));
        for text in texts {
            let mut ours = Vec::new();
            write_json_str(&mut ours, &text);
            assert_eq!(
                String::from_utf8_lossy(&ours),
                serde_json::to_string(&text).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_answer_line_is_what_rmcp_writes() {
        let ids = [
            NumberOrString::Number(7),
            NumberOrString::Number(-9_223_372_036_854_775_808),
            NumberOrString::String("a\"b\\c\u{1}é😀".into()),
            NumberOrString::String(String::new().into()),
        ];
        let texts = [
            "echo: 1",
            "line\nnext \"quoted\" \\ \u{7f}\u{0}\t\r\u{8}\u{c}\u{1f}\u{2028} ünï 😀",
            "",
        ];
        let mut outcomes: Vec<Outcome> =
            texts.iter().map(|t| Outcome::Text(t.to_string())).collect();
        // The same texts as JSON strings, as the host's answers bring them.
        outcomes.extend(
            texts
                .iter()
                .map(|t| Outcome::Json(serde_json::to_string(t).unwrap())),
        );
        outcomes.push(Outcome::Refused("plugins/x.mjs threw: boom".into()));
        for modern in [false, true] {
            for id in &ids {
                for outcome in &outcomes {
                    let ours = answer_line(&call(id.clone(), modern), outcome);
                    assert_eq!(
                        String::from_utf8(ours).unwrap(),
                        String::from_utf8(rmcp_line(id, outcome, modern)).unwrap(),
                        "{id:?} {outcome:?} {modern}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_cancelled_outcome_is_answered_as_an_error_naming_the_tool() {
        let line = answer_line(&call(NumberOrString::Number(3), false), &Outcome::Cancelled);
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["result"]["isError"], true);
        assert!(
            v["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("echo")
        );
    }
}
