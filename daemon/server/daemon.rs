//! What the daemon holds while it runs, shared by every connection: the current generation (and the ones
//! retiring), the sessions, the room, the log, and every task it started. `ovai restart` swaps the
//! generation; everything else lives as long as the daemon.

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::sessions::{SeatChange, Sessions};
use crate::generation::{self, Generation};
use crate::host::ending::RetireWhy;
use crate::instance::{ConfigError, Instance, Role};
use crate::jsonrpc::{INVALID_PARAMS, INVALID_REQUEST};
use crate::plugins::load::LoadError;
use crate::runtime_log::{RuntimeLog, Topic};
use crate::seats::SeatCache;
use crate::sync::lock;
use crate::tools::room::Room;
use crate::wire::RestartReply;

pub struct Daemon {
    pub inst: Instance,
    pub log: Arc<RuntimeLog>,
    current: RwLock<Arc<Generation>>,
    /// Told each time a restart puts a new generation in place (the watch of plugins/' folders follows).
    pub swapped: tokio::sync::Notify,
    /// Generations a restart replaced, still finishing the calls they hold; shutdown waits for them.
    retiring: Mutex<Vec<Arc<Generation>>>,
    pub sessions: Arc<Sessions>,
    /// seats.json, read again only when it was replaced.
    pub seats: SeatCache,
    pub room: Room,
    pub started: Instant,
    pub started_at: String,
    /// The secret control clients present; rewritten at every start.
    pub control_secret: String,
    /// Call and load ids, unique across the daemon's life, so an answer can never reach the wrong call.
    ids: Arc<AtomicU64>,
    /// One restart at a time: a second waits, then reads plugins/ again itself.
    restarting: tokio::sync::Mutex<()>,
    /// Set when shutdown begins: new calls are refused instead of started.
    pub closing: CancellationToken,
    /// Every task the daemon starts (connections, retirements, the watcher): shutdown waits for them.
    pub tasks: TaskTracker,
    /// Connections open now, counted against `maxConnections`.
    pub connections: Arc<AtomicUsize>,
    /// Connections that have not said who they are yet, oldest first.
    pub waiting_hellos: WaitingHellos,
    /// Refused connections, logged as a count rather than a line each.
    pub refusals: Refusals,
    /// Each tool's calls since the start, and the opt-in call log.
    pub figures: super::figures::Figures,
    /// Prometheus's figures, when `"metrics"` asked for them at the start.
    pub metrics: std::sync::OnceLock<Arc<super::metrics::Metrics>>,
    /// What requests may hold once read, per seat and in all, and the threads that check large arguments.
    pub budget: super::arguments::Budget,
    /// Fired by `ovai stop`: the accept loop ends and the daemon drains as on SIGTERM.
    pub stop: CancellationToken,
    /// The HTTP endpoint's gate, when it listens: a removed or re-keyed seat's sessions are closed there.
    pub http: std::sync::OnceLock<Arc<dyn super::sessions::RemoteSessions>>,
    /// Fired once every call is answered at shutdown: the HTTP endpoint ends its streams and stops.
    pub http_stop: CancellationToken,
    /// The HTTP endpoint's URL, when it listens (`ovai status`).
    pub http_url: Mutex<Option<String>>,
    /// The metrics endpoint's URL, when it listens (`ovai status`).
    pub metrics_url: Mutex<Option<String>>,
    /// Listeners asked for that could not listen (the status page's, the metrics'), as sentences.
    pub unserved: Mutex<Vec<String>>,
    /// The status page's keys, when it is served.
    pub web: std::sync::OnceLock<super::web_keys::Web>,
    /// Seat changes asked for (holds and their ends): one told without a hold while a restart builds
    /// has its generation replaced once it is in place.
    seat_changes: AtomicU64,
    /// Where a seat command's hold stands; restarts wait while one is held.
    seat_hold: tokio::sync::watch::Sender<SeatHold>,
}

/// Refused connections in the operator's log: the first of each second in full, the rest counted.
#[derive(Default)]
pub struct Refusals {
    window: Mutex<(Option<Instant>, u64)>,
}

impl Refusals {
    pub fn note(&self, why: &str) {
        let mut w = lock(&self.window);
        let now = Instant::now();
        match w.0 {
            Some(start) if now.duration_since(start) < Duration::from_secs(1) => w.1 += 1,
            _ => {
                if w.1 > 0 {
                    tracing::info!(
                        "{} more connections or requests were refused in that second",
                        w.1
                    );
                }
                *w = (Some(now), 0);
                tracing::info!("refused a connection or request: {why}");
            }
        }
    }
}

/// Where a seat command's hold stands: none; its boxed hosts being ended; or ended since, while it
/// writes the desks.
#[derive(Debug, Clone, Copy)]
enum SeatHold {
    None,
    Ending,
    Since(tokio::time::Instant),
}

#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error(
        "{0} Fix it and run `ovai restart` again; the server goes on serving what it read before."
    )]
    Config(#[from] ConfigError),
    #[error(
        "The plugins could not be loaded: {}. The server goes on serving what it read before.",
        .0.to_string().trim_end_matches('.')
    )]
    Load(#[from] LoadError),
    #[error("{0} The server goes on serving what it read before.")]
    Leader(#[from] super::leader::NoLeader),
    #[error(
        "The server began shutting down while the plugins were being read; nothing new is served."
    )]
    ShuttingDown,
    #[error(
        "openovai.json's hostIsolation now gives the plugin host no box, and the running server boxes it: a \
         restart never drops the box (a plugin can write openovai.json). Stop the server and start it again \
         to run without one; the server goes on serving what it read before."
    )]
    WouldUnbox,
}

impl Daemon {
    pub fn new(
        inst: Instance,
        log: Arc<RuntimeLog>,
        first: Generation,
        ids: Arc<AtomicU64>,
        control_secret: String,
    ) -> Self {
        let room = Room::new(inst.room_file());
        Self {
            inst,
            log,
            current: RwLock::new(Arc::new(first)),
            swapped: tokio::sync::Notify::new(),
            retiring: Mutex::new(Vec::new()),
            sessions: Arc::default(),
            seats: SeatCache::default(),
            room,
            started: Instant::now(),
            started_at: crate::runtime_log::timestamp(std::time::SystemTime::now()),
            control_secret,
            ids,
            restarting: tokio::sync::Mutex::new(()),
            closing: CancellationToken::new(),
            tasks: TaskTracker::new(),
            connections: Arc::new(AtomicUsize::new(0)),
            waiting_hellos: WaitingHellos::default(),
            refusals: Refusals::default(),
            figures: super::figures::Figures::default(),
            metrics: std::sync::OnceLock::new(),
            budget: super::arguments::Budget::default(),
            stop: CancellationToken::new(),
            http: std::sync::OnceLock::new(),
            http_stop: CancellationToken::new(),
            http_url: Mutex::new(None),
            metrics_url: Mutex::new(None),
            unserved: Mutex::new(Vec::new()),
            web: std::sync::OnceLock::new(),
            seat_changes: AtomicU64::new(0),
            seat_hold: tokio::sync::watch::Sender::new(SeatHold::None),
        }
    }

    pub fn current(&self) -> Arc<Generation> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `name` where a tool has it: what metrics and traces may carry, so names a session makes up add
    /// no series and no span names.
    pub fn served<'a>(&self, name: &'a str) -> Option<&'a str> {
        self.current().tools.get(name).is_some().then_some(name)
    }

    /// Counts, in the metrics, a `tools/call` of `seat` answered with a JSON-RPC error `code` and not
    /// run: under its tool's name where a tool has it, else under none (`name` is the one it gave, if it
    /// could be read), so names a session makes up add no series.
    pub fn count_call_error(&self, seat: &str, name: Option<&str>, took: Duration, code: i64) {
        let Some(metrics) = self.metrics.get() else {
            return;
        };
        let served = name.and_then(|n| self.served(n));
        let outcome = match (name, served, code) {
            (Some(_), None, INVALID_PARAMS) => "unknown_tool",
            (_, _, INVALID_PARAMS) => "invalid_params",
            (_, _, INVALID_REQUEST) => "invalid_request",
            _ => "error",
        };
        metrics.error(seat, served.unwrap_or(""), took, outcome, code);
    }

    pub fn role_of(&self, seat: &str) -> Role {
        self.current().config.role_of(seat)
    }

    /// Reads openovai.json and plugins/ again into a new generation beside the old one, switches callers
    /// to it, and retires the old one once its calls are done. A failure leaves the old one serving.
    /// `by` says who asked, for runtime.log.
    pub async fn restart(self: &Arc<Self>, by: &str) -> Result<RestartReply, RestartError> {
        let _one_at_a_time = self.restarting.lock().await;
        self.seats_written().await;
        if self.closing.is_cancelled() {
            return Err(RestartError::ShuttingDown);
        }
        super::service_manager::reloading();
        let seat_changes = self.seat_changes.load(std::sync::atomic::Ordering::SeqCst);
        let next = self.next_generation().await;
        if self.closing.is_cancelled() {
            // Shutdown began while this was being read: what was built is ended, not served.
            if let Ok((_, built)) = &next {
                built
                    .host
                    .retire(Duration::ZERO, RetireWhy::ShuttingDown("shutdown"))
                    .await;
            }
            return Err(RestartError::ShuttingDown);
        }
        // Ready again either way: a failed restart leaves the old generation serving.
        super::service_manager::ready("serving");
        let (old, next) = match next {
            Ok(n) => n,
            Err(e) => {
                self.log.row(
                    Topic::Server,
                    &format!(
                        "A restart asked by {by} failed, and generation {} goes on serving: {e}",
                        self.current().number
                    ),
                );
                return Err(e);
            }
        };
        self.log.rows(Topic::Plugins, &next.rows);
        // Warnings on stderr too: a misspelt setting is read by nobody (helper-92).
        for warning in &next.config.serve_warnings() {
            self.log.warn_row(Topic::Server, warning);
        }
        // Set at the start: a restart that changes one says it waits for the next, in runtime.log and
        // to whoever asked for the restart.
        let start_only_keys = [
            (
                "http",
                "the HTTP endpoint",
                next.config.http != old.config.http,
            ),
            ("web", "the status page", next.config.web != old.config.web),
            (
                "metrics",
                "the metrics endpoint",
                next.config.metrics != old.config.metrics,
            ),
        ];
        let start_only: Vec<String> = start_only_keys
            .into_iter()
        .filter(|(_, _, changed)| *changed)
        .map(|(name, what, _)| {
            format!(
                "openovai.json's \"{name}\" changed; {what} keeps its settings until ovai serve starts again."
            )
        })
        .collect();
        for row in &start_only {
            self.log.row(Topic::Server, row);
        }
        let changed = next.tools.listed() != old.tools.listed();
        let new_code = next.new_code_since(&old);
        // Those said above apart.
        let settings = super::restart_row::changed_keys(
            &old.config.raw,
            &next.config.raw,
            &start_only_keys.map(|(name, ..)| name),
        );
        let row = |by| {
            super::restart_row::row(
                by,
                next.number,
                (old.tools.listed(), next.tools.listed()),
                &new_code,
                &settings,
            )
        };
        self.log.row(Topic::Server, &row(Some(by)));
        let said = row(None);
        let mut reply = RestartReply {
            generation: next.number,
            rows: next
                .config
                .serve_warnings()
                .iter()
                .chain(&start_only)
                .chain(&next.rows)
                .cloned()
                .collect(),
            changed,
            new_code,
            said,
            told: 0,
            not_served: next.tools_not_served(),
        };
        self.figures
            .set_call_log(next.config.call_log.then(|| self.inst.call_log()));
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        self.swapped.notify_waiters();
        // The seats changed while the new generation's box was being made: it is held (a change is
        // being written) or replaced (one was), as the others were.
        let current = self.current();
        if current.isolation.is_boxed()
            && self.seat_changes.load(std::sync::atomic::Ordering::SeqCst) != seat_changes
        {
            if !matches!(*self.seat_hold.borrow(), SeatHold::None) {
                current.host.hold();
            } else {
                current.host.replace();
            }
        }
        if changed {
            reply.told = self.sessions.announce_tool_list_changed(&self.tasks);
        }
        // The old host finishes what it holds (bounded by its longest deadline), then ends.
        let grace = old.config.call_timeout + Duration::from_secs(1);
        lock(&self.retiring).push(old.clone());
        let daemon = self.clone();
        self.tasks.spawn(async move {
            old.host.retire(grace, RetireWhy::Restarted).await;
            lock(&daemon.retiring).retain(|g| !Arc::ptr_eq(g, &old));
        });
        Ok(reply)
    }

    async fn next_generation(&self) -> Result<(Arc<Generation>, Generation), RestartError> {
        let old = self.current();
        let config = self.inst.read_config()?;
        if let Ok(book) = self.seats.get(&self.inst).await.as_ref() {
            super::leader::check(&config, book)?;
        }
        if old.isolation.is_boxed()
            && !crate::host::sandbox::decide(config.host_isolation).is_ok_and(|i| i.is_boxed())
        {
            return Err(RestartError::WouldUnbox);
        }
        let next =
            generation::build(&self.inst, config, old.number + 1, &self.ids, &self.log).await?;
        Ok((old, next))
    }

    /// Every generation still holding a host: the current one and those retiring.
    pub fn generations(&self) -> Vec<Arc<Generation>> {
        let mut all = vec![self.current()];
        all.extend(lock(&self.retiring).iter().cloned());
        all
    }

    /// Ends every boxed plugin host and starts none until the seats have changed (`seats_changed`);
    /// resolves once none is running or starting, so that no box sees what is written next. False when
    /// one did not end in time. `cut`: the files of the calls in flight that had not finished and were
    /// stopped.
    pub async fn hold_boxed_hosts(&self, cut: &mut Vec<String>) -> bool {
        // A restart's new host makes its box, and imports the plugins in it, before it is served: a
        // restart under way is let finish first (its generation is then held with the others), and none
        // starts while the seats are held.
        {
            let _no_restart = self.restarting.lock().await;
            self.seat_changes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.seat_hold.send_replace(SeatHold::Ending);
        }
        let boxed: Vec<_> = self
            .generations()
            .into_iter()
            .filter(|g| g.isolation.is_boxed())
            .collect();
        let changes: Vec<u64> = boxed.iter().map(|g| g.host.hold()).collect();
        let mut all = true;
        let patience = crate::host::supervisor::SEAT_DRAIN + Duration::from_secs(10);
        for (generation, change) in boxed.iter().zip(changes) {
            all &= generation.host.held(patience).await;
            cut.extend(
                generation
                    .host
                    .take_cut(change)
                    .iter()
                    .map(|f| f.to_string()),
            );
        }
        if all {
            self.seat_hold
                .send_replace(SeatHold::Since(tokio::time::Instant::now()));
        }
        all
    }

    /// Resolves once no seat command is writing the desks: it said it has (`seats_changed`), or
    /// HOLD_AT_MOST has passed since its hosts ended and it said nothing (it died meanwhile: the hosts
    /// start again then too), or shutdown began.
    async fn seats_written(&self) {
        let mut hold = self.seat_hold.subscribe();
        loop {
            let until = match *hold.borrow_and_update() {
                SeatHold::None => return,
                // Its hosts are being ended, within the hold's own patience.
                SeatHold::Ending => None,
                SeatHold::Since(ended) => Some(ended + crate::host::supervisor::HOLD_AT_MOST),
            };
            if until.is_some_and(|t| t <= tokio::time::Instant::now()) {
                return;
            }
            let bound = async {
                match until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = hold.changed() => {}
                () = bound => return,
                () = self.closing.cancelled() => return,
            }
        }
    }

    /// Reads the seats again and ends the sessions of seats that are gone (or whose secret changed).
    /// `why` is the command that changed them, for runtime.log.
    pub async fn seats_changed(&self, why: Option<&str>) -> Result<Vec<String>, String> {
        self.seat_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.seat_hold.send_replace(SeatHold::None);
        // A boxed host hides the secrets it saw at its start: a new or re-keyed seat's must not be in
        // reach of the old one. Replaced first, whatever the seat book says.
        for generation in self.generations() {
            if generation.isolation.is_boxed() {
                generation.host.replace();
            }
        }
        // A stamp (inode, size, time) can repeat across two quick writes: read the file itself.
        self.seats.forget();
        if let Some(why) = why {
            self.log
                .row(Topic::Seats, &format!("The seats changed: {why}."));
        }
        let book = self.seats.get(&self.inst).await;
        let book = book.as_ref().as_ref().map_err(|e| e.to_string())?;
        let still_valid =
            |seat: &str, hash: &str| book.seats.get(seat).is_some_and(|r| r.sha256 == hash);
        let change = |seat: &str| {
            if book.seats.contains_key(seat) {
                SeatChange::NewSecret
            } else {
                SeatChange::Removed
            }
        };
        // One for each session ended, sorted: a seat with three sessions is there three times.
        let ended = self.sessions.end_unless(still_valid, change);
        if let Some(http) = self.http.get() {
            http.end_unless(&still_valid);
        }
        for seat in ended.chunk_by(|a, b| a == b) {
            let what = match change(&seat[0]) {
                SeatChange::NewSecret => "was given a new secret",
                SeatChange::Removed => "was removed",
            };
            let sessions = match seat.len() {
                1 => "its session was ended".to_string(),
                n => format!("its {n} sessions were ended"),
            };
            self.log.row(
                Topic::Seats,
                &format!("The seat {} {what}; {sessions}.", seat[0]),
            );
        }
        Ok(ended)
    }
}

/// Connections that have not said who they are yet, oldest first: when the cap is reached, the oldest
/// gives up its place to the newest.
#[derive(Default)]
pub struct WaitingHellos {
    queue: std::sync::Mutex<std::collections::VecDeque<(u64, CancellationToken)>>,
    next: std::sync::atomic::AtomicU64,
}

impl WaitingHellos {
    /// Registered by the accept loop as it admits the connection, before its task runs: a newcomer
    /// accepted right after finds it here to take its place.
    pub fn add(&self) -> (u64, CancellationToken) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = CancellationToken::new();
        crate::sync::lock(&self.queue).push_back((id, token.clone()));
        (id, token)
    }

    pub fn done(&self, id: u64) {
        crate::sync::lock(&self.queue).retain(|(i, _)| *i != id);
    }

    /// Tells the oldest connection still waiting for its hello to go; false when there is none.
    pub fn evict_oldest(&self) -> bool {
        match crate::sync::lock(&self.queue).pop_front() {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}
