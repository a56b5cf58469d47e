//! The MCP service of one connection: a seat's view of the current generation's tools.
//!
//! The seat was resolved from the connection's secret before this service existed, and is a field of it:
//! no argument, `_meta` or client info a session sends can change who it is. Over HTTP the secret comes
//! with every request, and `server::http` lets a request reach a service only with its own seat's.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressToken, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::arguments::{self, Refusal};
use super::daemon::Daemon;
use super::figures::{How, Tally};
use super::progress::{Relay, To};
use super::sessions::{Owned, SeatChange};
use super::traces::HostSpan;
use crate::answer::{self, Outcome};
use crate::generation::Generation;
use crate::host::{self, CallGuard, CallRequest};
use crate::runtime_log::timestamp;
use crate::tools::room::{self, RoomError};
use crate::tools::{Kind, index};

/// What index shows may be this old; who may connect is always decided afresh.
const INDEX_BOOK_AGE: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone)]
pub struct SeatService {
    daemon: Arc<Daemon>,
    seat: Arc<str>,
    via: Via,
    /// The progress tokens of the session's calls in flight.
    tokens: Arc<std::sync::Mutex<crate::maps::Set<rmcp::model::NumberOrString>>>,
}

/// A progress token taken by a call in flight, given back when the call is done with it.
pub struct TokenHeld {
    tokens: Arc<std::sync::Mutex<crate::maps::Set<rmcp::model::NumberOrString>>>,
    token: rmcp::model::NumberOrString,
}

impl Drop for TokenHeld {
    fn drop(&mut self) {
        crate::sync::lock(&self.tokens).remove(&self.token);
    }
}

/// How the session reaches the daemon, which decides how it is registered (for `index`, list changes, and
/// ending it when its seat goes).
#[derive(Clone)]
enum Via {
    /// A socket connection, registered before the service was made.
    Socket { session: u64 },
    /// An HTTP client: registered once initialised (a session of 2025-11-25 and before), or for as long as
    /// a listen stream is open (2026-07-28, where each request stands alone).
    Http {
        secret_hash: Arc<str>,
        registration: Arc<std::sync::Mutex<Option<Owned>>>,
    },
}

impl SeatService {
    pub fn new(daemon: Arc<Daemon>, seat: &str, session: u64) -> Self {
        Self {
            daemon,
            seat: seat.into(),
            via: Via::Socket { session },
            tokens: Arc::default(),
        }
    }

    /// Takes `token` for a call in flight; the words of `-32602` when another call of the session has it:
    /// its reports could not be told from that call's (MCP asks a token unique among requests in flight).
    pub fn hold_token(&self, token: &ProgressToken) -> Result<TokenHeld, String> {
        if !crate::sync::lock(&self.tokens).insert(token.0.clone()) {
            return Err(format!(
                "Invalid params: the progress token {} is another call's, in flight on this session; give each \
                 call a token of its own, or its reports cannot be told apart",
                crate::jsonrpc::key_of(&token.0)
            ));
        }
        Ok(TokenHeld {
            tokens: self.tokens.clone(),
            token: token.0.clone(),
        })
    }

    pub fn over_http(daemon: Arc<Daemon>, seat: &str, secret_hash: &str) -> Self {
        Self {
            daemon,
            seat: seat.into(),
            via: Via::Http {
                secret_hash: secret_hash.into(),
                registration: Arc::default(),
            },
            tokens: Arc::default(),
        }
    }

    /// The generation a call runs on, counted in so a restart lets it finish there. `None` when the
    /// server is shutting down.
    fn enter(&self) -> Option<(Arc<Generation>, CallGuard)> {
        loop {
            let generation = self.daemon.current();
            if let Some(guard) = generation.host.enter() {
                return Some((generation, guard));
            }
            // Retiring: a restart has put a newer generation in place, unless this is shutdown.
            if Arc::ptr_eq(&generation, &self.daemon.current()) {
                return None;
            }
        }
    }

    /// Whether the secret this service was made for is still its seat's.
    async fn still_mine(&self, secret_hash: &str) -> bool {
        let book = self.daemon.seats.get(&self.daemon.inst).await;
        book.as_ref().as_ref().is_ok_and(|b| {
            b.seats
                .get(&*self.seat)
                .is_some_and(|r| r.sha256 == secret_hash)
        })
    }

    fn instructions(&self) -> String {
        let generation = self.daemon.current();
        let role = generation.config.role_of(&self.seat);
        format!(
            "You are at seat {seat}, {role_words} of the openovai instance at {root} (the User is {user}; the \
             Leader's seat is {leader}). This server's tools are the instance's: `index` shows it at a glance, \
             `room` is the conversation every seat shares, and the others are tools the people here wrote \
             (plugins/). Your seat comes from this session's secret, not from anything you send. A tool that \
             refuses answers in words: read them and act on them.",
            seat = self.seat,
            role_words = if role == crate::instance::Role::Leader {
                "the Leader"
            } else {
                "a Worker"
            },
            root = self.daemon.inst.root.display(),
            user = generation.config.user,
            leader = generation.config.leader,
        )
    }

    /// The seat this session is.
    pub fn seat(&self) -> &str {
        &self.seat
    }

    /// The change of its seat that ended this session, if one did.
    pub fn ended_by(&self) -> Option<SeatChange> {
        let id = match &self.via {
            Via::Socket { session } => *session,
            Via::Http { registration, .. } => crate::sync::lock(registration).as_ref()?.id,
        };
        self.daemon.sessions.ended_by(id)
    }

    /// How a call's outcome is answered: a call stopped because a change of its seat ended the session
    /// says so (and `record` counts it refused, not run).
    pub fn answered_as(&self, tool: &str, outcome: Outcome) -> Outcome {
        match (outcome, self.ended_by()) {
            (outcome @ (Outcome::Cancelled | Outcome::Unsent), Some(change)) => {
                Outcome::Refused(answer::seat_changed(
                    tool,
                    &self.seat,
                    change == SeatChange::Removed,
                    matches!(self.via, Via::Http { .. }),
                    outcome == Outcome::Cancelled,
                ))
            }
            (outcome, _) => outcome,
        }
    }

    /// Whether a call of `name` may run now: admitted (counted in on its generation), an outcome when it is
    /// answered without running (the server is shutting down), or a protocol error for a tool this
    /// server does not have. Its arguments are checked next (`server::arguments`).
    pub fn enter_call(
        &self,
        name: &str,
    ) -> Result<Result<AdmittedCall, (Outcome, How)>, ErrorData> {
        let Some((generation, guard)) = self.enter() else {
            return Ok(Err((answer::shutting_down(name), How::NotRun)));
        };
        if generation.tools.get(name).is_none() {
            return Err(ErrorData::invalid_params(
                answer::unknown_tool(name, generation.tools.names(), &generation.rows),
                None,
            ));
        }
        if self.daemon.closing.is_cancelled() {
            return Ok(Err((answer::shutting_down(name), How::NotRun)));
        }
        // A tool whose file the live host left out says so before its arguments are judged: told to
        // call again with arguments that fit, a session would, and be refused for another reason.
        if let Some(Kind::Plugin { file }) = generation.tools.get(name).map(|e| &e.kind)
            && let Some(why) = host::unavailable(&generation.host, name)
        {
            let max = generation.config.max_answer_bytes;
            let outcome = answer::plugin(file, host::Ended::NotReimported(why), max);
            return Ok(Err((outcome, How::NotRun)));
        }
        Ok(Ok(AdmittedCall { generation, guard }))
    }

    /// Checks arguments too large to check on the daemon's thread, on a thread of their own, taking a
    /// share of what requests may hold once read (`cost`; none when it was taken for them already, as
    /// the HTTP endpoint does for the whole request).
    pub async fn check_apart(
        &self,
        admitted: &AdmittedCall,
        name: &str,
        args: Arc<str>,
        cost: usize,
    ) -> Result<(), Refusal> {
        let _share = if cost > 0 {
            Some(
                self.daemon
                    .budget
                    .share(&self.seat, cost)
                    .await
                    .map_err(Refusal::Params)?,
            )
        } else {
            None
        };
        arguments::check_apart(&self.daemon.budget, admitted.generation.clone(), name, args).await
    }

    /// Runs an admitted call, its arguments checked, to its outcome. Each kind of tool has its own
    /// function: the future of a call holds only its own kind's state.
    pub async fn run_admitted(
        &self,
        name: &str,
        args: &Arc<str>,
        admitted: AdmittedCall,
        ct: &CancellationToken,
        progress: Option<Arc<Relay>>,
        trace: &(dyn Fn() -> (Option<HostSpan>, Option<String>) + Sync),
    ) -> (Outcome, How) {
        let AdmittedCall {
            generation,
            guard: _in_flight,
        } = admitted;
        // The generation's table does not change: the entry `enter_call` found is there.
        let Some(entry) = generation.tools.get(name) else {
            return (answer::shutting_down(name), How::NotRun);
        };
        match &entry.kind {
            Kind::Index => (Box::pin(self.index(&generation)).await, How::Ran),
            Kind::Room => {
                let args: Value = serde_json::from_str(args).unwrap_or_default();
                (Box::pin(self.room(&generation, &args, ct)).await, How::Ran)
            }
            Kind::Plugin { file } => {
                let role = generation.config.role_of(&self.seat);
                let (mut host_span, traceparent) = trace();
                let request = CallRequest {
                    tool: name,
                    file,
                    args,
                    seat: &self.seat,
                    role: role.as_str(),
                    progress: progress.map(|r| r as _),
                    traceparent: traceparent.as_deref(),
                };
                let (timeout, max) = (
                    generation.config.call_timeout,
                    generation.config.max_answer_bytes,
                );
                let ended = host::call(&generation.host, request, timeout, ct).await;
                let how = How::of(&ended);
                let outcome = answer::plugin(file, ended, max);
                if let Some(span) = &mut host_span {
                    span.outcome(&outcome);
                }
                (outcome, how)
            }
        }
    }

    /// Counts a call that started at `started` in the figures `ovai status` shows.
    pub fn record(&self, name: &str, started: std::time::Instant, outcome: &Outcome, how: How) {
        // Stopped by a change of its seat, a call is answered as refused (`answered_as`), and counted so:
        // not run, as far as its tool goes (helper-106: counted a success, and cancelled in metrics). A
        // client's own cancel racing the change counts so too; the call's span still ends cancelled.
        let (counted, how) = match (outcome, how) {
            (Outcome::Cancelled | Outcome::Unsent, _) if self.ended_by().is_some() => {
                (Tally::Refused, How::NotRun)
            }
            (outcome, how) => (Self::tally(outcome, how), how),
        };
        let took = started.elapsed();
        self.daemon
            .figures
            .record(&self.seat, name, took, counted, how);
        if let Some(metrics) = self.daemon.metrics.get() {
            metrics.call(&self.seat, name, took, counted);
        }
    }

    /// What a call that ended so counts as.
    fn tally(outcome: &Outcome, how: How) -> Tally {
        match (outcome, how) {
            (Outcome::Text(_) | Outcome::Json(_), _) => Tally::Text,
            (Outcome::Cancelled | Outcome::Unsent, _) => Tally::Cancelled,
            (Outcome::Refused(_), How::HostStopped) => Tally::HostStopped,
            (Outcome::Refused(_), How::TimedOut) => Tally::TimedOut,
            (Outcome::Refused(_), How::Ran | How::Failed | How::Misfit | How::NotRun) => {
                Tally::Refused
            }
        }
    }

    /// `name` where a tool has it (`Daemon::served`).
    pub fn served<'a>(&self, name: &'a str) -> Option<&'a str> {
        self.daemon.served(name)
    }

    /// Counts a call answered with a JSON-RPC error `code`, not run (no such tool, params not taken).
    pub fn record_error(&self, name: Option<&str>, started: std::time::Instant, code: i64) {
        self.daemon
            .count_call_error(&self.seat, name, started.elapsed(), code);
    }

    async fn index(&self, generation: &Generation) -> Outcome {
        let book = self
            .daemon
            .seats
            .recent(&self.daemon.inst, INDEX_BOOK_AGE)
            .await;
        self.index_of(generation, &book)
    }

    /// `index` at once, when the seat book it shows was read recently enough not to be read again (it
    /// is, but for a call each second): then it needs no task of its own.
    pub fn index_now(&self, generation: &Generation) -> Option<Outcome> {
        let book = self.daemon.seats.read_within(INDEX_BOOK_AGE)?;
        Some(self.index_of(generation, &book))
    }

    fn index_of(&self, generation: &Generation, book: &crate::seats::BookRead) -> Outcome {
        let counts = self.daemon.sessions.count_by_seat();
        let seats = match book.as_ref() {
            Ok(book) => Ok(book
                .names()
                .map(|s| {
                    (
                        s.to_string(),
                        generation.config.role_of(s).as_str(),
                        counts.get(s).copied().unwrap_or(0),
                    )
                })
                .collect()),
            Err(e) => Err(e.to_string()),
        };
        let root = self.daemon.inst.root.display().to_string();
        // A served file's row says what the tool list says already.
        let served = crate::plugins::plugin_rows::SERVED;
        let (served, rows): (Vec<&String>, Vec<&String>) =
            generation.rows.iter().partition(|r| r.starts_with(served));
        Outcome::Text(index::render(&index::Facts {
            root: &root,
            user: &generation.config.user,
            leader: &generation.config.leader,
            seats,
            caller: &self.seat,
            tools: &generation.tools,
            generation: generation.number,
            loaded_at: &generation.loaded_at,
            served: served.len(),
            rows: &rows,
            isolation: generation.isolation.describe(),
            max_bytes: generation.config.max_answer_bytes,
        }))
    }

    async fn room(&self, generation: &Generation, args: &Value, ct: &CancellationToken) -> Outcome {
        match self
            .daemon
            .room
            .answer(&self.seat, args, generation.config.max_answer_bytes, ct)
            .await
        {
            Ok(text) => {
                // A read works whether or not a write would; a write is said only by a message said.
                let works = if args.get("say").is_some() {
                    room::WRITE | room::READ
                } else {
                    room::READ
                };
                let troubled = &self.daemon.room.troubled;
                if troubled.load(Ordering::Relaxed) & works != 0 {
                    let was = troubled.fetch_and(!works, Ordering::Relaxed) & works;
                    let what = match was {
                        room::WRITE => "written",
                        room::READ => "read",
                        _ => "written and read",
                    };
                    if was != 0 {
                        self.daemon.log.row(
                            crate::runtime_log::Topic::Server,
                            &format!("room.jsonl can be {what} again."),
                        );
                    }
                }
                Outcome::Text(text)
            }
            // The caller cancelled, or its session ended: no refusal, nobody to read one.
            Err(RoomError::Gone) => Outcome::Cancelled,
            Err(e) => {
                // Said once, until the room works again: a session saying on cannot flood the log.
                let what = match &e {
                    RoomError::Write(err) => {
                        Some((room::WRITE, "written", "each message said", err))
                    }
                    RoomError::Read(err) => Some((room::READ, "read", "each read", err)),
                    _ => None,
                };
                if let Some((mark, what, refused, err)) = what
                    && self.daemon.room.troubled.fetch_or(mark, Ordering::Relaxed) & mark == 0
                {
                    self.daemon.log.warn_row(
                        crate::runtime_log::Topic::Server,
                        &format!(
                            "The room could not be {what} (room.jsonl: {err}): {refused} is refused until it \
                             can be. Free space on its disk, or give the server's user the file and its folder \
                             again."
                        ),
                    );
                }
                answer::room_failed(&e)
            }
        }
    }
}

impl ServerHandler for SeatService {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            crate::desk::SERVER_NAME,
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(self.instructions())
    }

    /// 2026-07-28 sessions hear of list changes through `subscriptions/listen`; tools are all there is.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Always acknowledged: a listen for what this server never sends (prompts, resources) is an open
        // stream that stays quiet, not a method this server lacks.
        Some(if requested.tools_list_changed == Some(true) {
            SubscriptionFilter::builder().tools_list_changed().build()
        } else {
            SubscriptionFilter::builder().build()
        })
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        match &self.via {
            Via::Socket { session } => {
                // How many a session may hold is the transport's to say, before rmcp acknowledges one.
                let key = self.daemon.sessions.add_sink(*session, sink);
                context.cancelled().await;
                self.daemon.sessions.remove_sink(*session, key);
            }
            Via::Http { secret_hash, .. } => {
                // The stream is the session: registered while it is open, ended when its seat goes.
                let ended = CancellationToken::new();
                let registered = Owned::open(
                    &self.daemon.sessions,
                    &self.seat,
                    secret_hash,
                    ended.clone(),
                );
                // The seat may have changed between the gate's look-up and this registration (a change
                // ends the streams registered then): look again now that this one is registered.
                if !self.still_mine(secret_hash).await {
                    return Ok(());
                }
                self.daemon.sessions.add_sink(registered.id, sink);
                tokio::select! {
                    _ = context.cancelled() => {}
                    _ = ended.cancelled() => {}
                    _ = self.daemon.closing.cancelled() => {}
                }
            }
        }
        Ok(())
    }

    /// An HTTP session of 2025-11-25 or before is registered once initialised; when its seat is removed or
    /// re-keyed, rmcp closes it, which ends its streams.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(id) = session_id(&context.extensions) {
            self.register_http(id, context.peer).await;
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // MCP asks that a cursor the server never gave be refused: this one gives none.
        if let Some(cursor) = request.and_then(|r| r.cursor) {
            return Err(ErrorData::invalid_params(
                format!(
                    "Invalid params: {}",
                    super::params::no_cursor(&format!(
                        "cursor {:?}",
                        crate::jsonrpc::clip(&cursor)
                    ))
                ),
                None,
            ));
        }
        Ok(ListToolsResult::with_all_items(
            self.daemon.current().tools.listed().to_vec(),
        ))
    }

    /// Over HTTP, rmcp runs each request in a task of its own and has read its params: the call takes the
    /// socket's route from here (`server::calls`), its progress passed to rmcp in order, before its
    /// answer.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Made first, so a call refused on the way (an unknown tool, arguments that do not fit) has its
        // span too, failed with the words its caller read.
        let span = std::sync::Mutex::new(self.http_span(&request.name, &context));
        let _counted = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<HttpTicket>())
            .cloned();
        let name = request.name.clone();
        let started = std::time::Instant::now();
        let outcome = Box::pin(self.http_call(request, &context, &span)).await;
        if let Err(e) = &outcome {
            self.record_error(Some(&name), started, i64::from(e.code.0));
        }
        if let Some(mut span) = crate::sync::lock(&span).take() {
            match &outcome {
                Err(e) => span.failed(&e.message),
                Ok(outcome) => span.outcome(outcome),
            }
        }
        Ok(result_of(&name, &outcome?).into())
    }
}

impl SeatService {
    /// A `tools/call` over HTTP, to its outcome.
    async fn http_call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        span: &std::sync::Mutex<Option<crate::server::traces::RequestSpan>>,
    ) -> Result<Outcome, ErrorData> {
        let token = context.meta.get_progress_token();
        // rmcp takes one of another kind as none: its progress would never come, and nothing would say.
        if token.is_none()
            && let Some(given) = context.meta.0.get("progressToken").filter(|v| !v.is_null())
        {
            let raw = serde_json::value::to_raw_value(given).map_err(|_| {
                ErrorData::invalid_params("Invalid params: params._meta.progressToken", None)
            })?;
            return Err(ErrorData::invalid_params(
                format!(
                    "Invalid params: {}",
                    super::params::progress_token_kind(&raw)
                ),
                None,
            ));
        }
        if let Some(why) = token
            .as_ref()
            .and_then(super::params::progress_token_too_long)
        {
            return Err(ErrorData::invalid_params(
                format!("Invalid params: {why}"),
                None,
            ));
        }
        let _held = match &token {
            Some(token) => Some(
                self.hold_token(token)
                    .map_err(|why| ErrorData::invalid_params(why, None))?,
            ),
            None => None,
        };
        let args: Arc<str> = serde_json::to_string(&request.arguments.unwrap_or_default())
            .unwrap_or_else(|_| "{}".into())
            .into();
        Box::pin(self.http_outcome(&request.name, args, token, context, span)).await
    }
}

impl SeatService {
    /// Registers HTTP session `id` (once: a second `initialized` changes nothing, since replacing the
    /// registration would end the session). From its `initialized`, or its first call when its client
    /// never sent one: rmcp serves it all the same, and a call needs the registration to be stopped and
    /// answered when the seat changes.
    async fn register_http(&self, id: String, peer: rmcp::Peer<RoleServer>) {
        let Via::Http {
            secret_hash,
            registration,
        } = &self.via
        else {
            return;
        };
        let ended = {
            let mut registration = crate::sync::lock(registration);
            if registration.is_some() {
                return;
            }
            let ended = CancellationToken::new();
            if let Some(http) = self.daemon.http.get() {
                http.initialized(&id, ended.clone());
            }
            let registered = Owned::open(
                &self.daemon.sessions,
                &self.seat,
                secret_hash,
                ended.clone(),
            );
            self.daemon.sessions.set_peer(registered.id, peer);
            *registration = Some(registered);
            ended
        };
        // As for a listen stream: a seat changed meanwhile ends this session at once.
        if !self.still_mine(secret_hash).await {
            ended.cancel();
        }
        if let Some(http) = self.daemon.http.get().cloned() {
            self.daemon.tasks.spawn(async move {
                ended.cancelled().await;
                http.close(id).await;
            });
        }
    }

    /// An HTTP call's outcome, counted.
    async fn http_outcome(
        &self,
        name: &str,
        args: Arc<str>,
        token: Option<ProgressToken>,
        context: &RequestContext<RoleServer>,
        span: &std::sync::Mutex<Option<crate::server::traces::RequestSpan>>,
    ) -> Result<Outcome, ErrorData> {
        let started = std::time::Instant::now();
        // The secret was checked as the request arrived; a seat removed or re-keyed since (the request's
        // body may have taken its time) runs nothing more.
        if let Via::Http { secret_hash, .. } = &self.via
            && !Box::pin(self.still_mine(secret_hash)).await
        {
            return Ok(Outcome::Refused(format!(
                "{name} was not run: the seat {} was removed or given a new secret as this call arrived",
                self.seat
            )));
        }
        let admitted = match self.enter_call(name)? {
            Ok(admitted) => admitted,
            Err((outcome, how)) => {
                self.record(name, started, &outcome, how);
                return Ok(outcome);
            }
        };
        let args =
            arguments::without_clients_own(&admitted.generation, name, &args).unwrap_or(args);
        let checked = match arguments::check_here(&admitted.generation, name, &args) {
            Some(checked) => checked,
            // The endpoint took the request's share of what requests may hold as it read the body.
            None => Box::pin(self.check_apart(&admitted, name, args.clone(), 0)).await,
        };
        match checked {
            Ok(()) => {}
            Err(Refusal::Params(why)) => {
                return Err(ErrorData::invalid_params(
                    format!("Invalid params: {why}"),
                    None,
                ));
            }
            Err(Refusal::Tool(why)) => {
                let outcome = Outcome::Refused(why);
                self.record(name, started, &outcome, How::Misfit);
                return Ok(outcome);
            }
        }
        let (tx, mut notes) = tokio::sync::mpsc::unbounded_channel();
        let relay = token.map(|t| Relay::new(t, To::Channel(tx)));
        let incoming = trace_header(context, "traceparent");
        let trace = || {
            let host = crate::sync::lock(span)
                .as_ref()
                .and_then(|s| s.host_part(name));
            let tp = host
                .as_ref()
                .map(HostSpan::traceparent)
                .or_else(|| incoming.clone());
            (host, tp)
        };
        // A session of 2025-11-25 or before ends when its seat changes: its calls stop then, and are
        // answered saying so before the session closes (`http::gate`).
        let stop = context.ct.child_token();
        if let Via::Http { registration, .. } = &self.via
            && crate::sync::lock(registration).is_none()
            && let Some(id) = session_id(&context.extensions)
        {
            self.register_http(id, context.peer.clone()).await;
        }
        let session_ended = match &self.via {
            Via::Http { registration, .. } => {
                crate::sync::lock(registration).as_ref().map(Owned::ended)
            }
            Via::Socket { .. } => None,
        };
        let (outcome, how) = {
            let call = self.run_admitted(name, &args, admitted, &stop, relay.clone(), &trace);
            tokio::pin!(call);
            loop {
                tokio::select! {
                    biased;
                    ended = &mut call => break ended,
                    Some(note) = notes.recv() => {
                        let _ = context.peer.notify_progress(note).await;
                    }
                    () = fired(session_ended.as_ref()), if !stop.is_cancelled() => stop.cancel(),
                }
            }
        };
        // Stopped (cancelled, its session ended), the call's answer goes nowhere, and no report either.
        let answering = !stop.is_cancelled();
        if let Some(relay) = &relay {
            relay.ends(answering);
        }
        // What came before the answer goes before it, the report the pace held back included.
        while let Ok(note) = notes.try_recv() {
            if answering {
                let _ = context.peer.notify_progress(note).await;
            }
        }
        self.record(name, started, &outcome, how);
        Ok(self.answered_as(name, outcome))
    }

    /// The span of a `tools/call` over HTTP, its parent from the request's `_meta` or its header.
    fn http_span(
        &self,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<crate::server::traces::RequestSpan> {
        crate::server::traces::tracer()?;
        let header = |h: &str| header_of(context, h);
        let traceparent = trace_header(context, "traceparent");
        let tracestate = trace_header(context, "tracestate");
        crate::server::traces::RequestSpan::start(&crate::server::traces::Request {
            method: "tools/call",
            served: true,
            tool: self.daemon.served(name),
            id: Some(&context.id),
            seat: &self.seat,
            session: header("mcp-session-id"),
            version: header("mcp-protocol-version").as_deref(),
            transport: "tcp",
            traceparent: traceparent.as_deref(),
            tracestate: tracestate.as_deref(),
        })
    }
}

/// W3C trace context for a request over HTTP: its `_meta`'s, else its header's.
fn trace_header(context: &RequestContext<RoleServer>, key: &str) -> Option<String> {
    context
        .meta
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .or_else(|| header_of(context, key))
        .filter(|v| v.len() <= 512)
        .filter(|v| key != "traceparent" || super::params::w3c_traceparent(v))
}

/// What the HTTP endpoint counts against its seat for one request (one of `maxStreamsPerSeat`), handed to
/// the request's call, which holds it while it runs: a call whose client went away goes on (it may be
/// resumed) and still counts, so a seat cannot run any number of calls by closing each connection
/// (helper-80). Given back when its stream and its call are both done.
#[derive(Clone)]
pub struct HttpTicket(pub Arc<dyn std::any::Any + Send + Sync>);

/// A header of the HTTP request a request came in, if it came over HTTP.
fn header_of(context: &RequestContext<RoleServer>, name: &str) -> Option<String> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.headers.get(name))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Resolves when `token` fires; never without one.
async fn fired(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

/// A call's outcome as rmcp's result (rmcp writes it; over the socket `calls::answer_line` does).
fn result_of(name: &str, outcome: &Outcome) -> CallToolResult {
    match outcome {
        Outcome::Text(text) => CallToolResult::success(vec![ContentBlock::text(text.clone())]),
        Outcome::Json(json) => CallToolResult::success(vec![ContentBlock::text(
            crate::host::protocol::json_text(json),
        )]),
        Outcome::Refused(why) => CallToolResult::error(vec![ContentBlock::text(why.clone())]),
        Outcome::Cancelled | Outcome::Unsent => CallToolResult::error(vec![ContentBlock::text(
            answer::cancelled(name, &timestamp(std::time::SystemTime::now())),
        )]),
    }
}

/// A call counted in on the generation it runs on, its arguments checked.
pub struct AdmittedCall {
    pub generation: Arc<Generation>,
    pub guard: CallGuard,
}

/// A 2025-* HTTP request's session id (a 2026-07-28 request has none).
fn session_id(extensions: &rmcp::model::Extensions) -> Option<String> {
    extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
