//! The sessions connected now: which seat each holds, so `index` can say who is here, a removed seat's
//! sessions can be ended, and a changed tool list can be announced to everybody.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::sync::lock;

struct SessionEntry {
    seat: String,
    /// "socket" or "http", for the operator's metrics.
    transport: &'static str,
    /// The hash of the secret the session presented, so a seat removed and added again (a new secret)
    /// ends the sessions of the old one.
    secret_hash: String,
    ct: CancellationToken,
    peer: Option<Peer<RoleServer>>,
    /// Open `subscriptions/listen` streams (2026-07-28), by key: where list changes go for such sessions.
    sinks: Vec<(u64, SubscriptionSink)>,
    /// Set when a change of its seat ended it: the calls it cut off say which.
    ended_by: Option<SeatChange>,
}

impl SessionEntry {
    fn new(
        seat: &str,
        transport: &'static str,
        secret_hash: String,
        ct: CancellationToken,
    ) -> Self {
        Self {
            seat: seat.to_string(),
            transport,
            secret_hash,
            ct,
            peer: None,
            sinks: Vec::new(),
            ended_by: None,
        }
    }
}

/// A change of a seat that ends the sessions holding its old secret.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SeatChange {
    /// `ovai seat rotate` (or a desk's secret rebuilt otherwise).
    NewSecret,
    /// `ovai seat remove`.
    Removed,
}

impl SeatChange {
    /// Why a session of `seat` ended, as its bridge says it to every request after (`wire::Farewell`).
    pub fn ended_session(self, seat: &str) -> String {
        match self {
            SeatChange::NewSecret => format!(
                "the seat {seat} was given a new secret (`ovai seat rotate`), which ended this session: the \
                 secret it holds is not the secret of any seat now"
            ),
            SeatChange::Removed => format!(
                "the seat {seat} was removed (`ovai seat remove`), which ended this session: {} (`ovai seat \
                 add {seat}`)",
                crate::wire::SEAT_GONE
            ),
        }
    }

    /// Why a call of such a session stopped, as its plugin's signal says.
    pub fn why(self) -> &'static str {
        match self {
            SeatChange::NewSecret => {
                "the caller's seat was given a new secret (`ovai seat rotate`), which ended its session"
            }
            SeatChange::Removed => {
                "the caller's seat was removed (`ovai seat remove`), which ended its session"
            }
        }
    }
}

/// The sessions one seat may hold open at once, on the socket and (counted apart) over HTTP: one seat's
/// client cannot take every place.
pub const SESSIONS_PER_SEAT: usize = 64;

/// The requests one seat's socket sessions may have in flight together (each session 64 of them) before
/// their calls wait: one seat cannot fill the plugin host, or the daemon's memory with answers, ahead of
/// the others. What the daemon answers itself still goes, so a new session can say hello.
pub const SEAT_IN_FLIGHT: usize = 256;

/// What one seat's socket sessions hold together: requests in flight (and a wake-up for those waiting on
/// SEAT_IN_FLIGHT when one ends), lines not yet ended, answers unread.
#[derive(Default)]
pub struct SeatLoad {
    in_flight: AtomicUsize,
    pub freed: tokio::sync::Notify,
    /// The bytes of its sessions' lines not yet ended (`CappedLines::share`).
    pub unfinished: std::sync::Arc<AtomicUsize>,
    /// The bytes of answers its sessions left unread, together (`Outbox::count_in`).
    pub unread: std::sync::Arc<AtomicUsize>,
}

/// Answers a seat's socket sessions may leave unread together. Past it each of them acts on one request
/// at a time, and only once it read all it was sent: each session's own bound (`sessionQueueBytes`, and
/// the 64 calls in flight as it reached it), times the 64 sessions a seat may hold, was gigabytes
/// (helper-100: 2.3 GB with 32 sessions).
pub const SEAT_UNREAD: usize = 64 << 20;

impl SeatLoad {
    /// Whether the seat's sessions left more than SEAT_UNREAD unread together.
    pub fn unread_past_bound(&self) -> bool {
        self.unread.load(Ordering::Relaxed) > SEAT_UNREAD
    }

    pub fn has_room(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) < SEAT_IN_FLIGHT
    }

    pub fn add(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` requests ended; those waiting for room are woken when there was none.
    pub fn sub(&self, n: usize) {
        if n > 0 && self.in_flight.fetch_sub(n, Ordering::Relaxed) >= SEAT_IN_FLIGHT {
            self.freed.notify_waiters();
        }
    }
}

/// Why a socket session was not let in: the seat's share, or all sessions may have, is taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    Seat,
    All(usize),
}

#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<u64, SessionEntry>>,
    next: AtomicU64,
    /// Each seat's requests in flight on the socket (a seat's entry stays: seats are few).
    loads: Mutex<HashMap<String, std::sync::Arc<SeatLoad>>>,
}

/// Removes its session from the registry when the connection ends, however it ends.
pub struct Registered<'a> {
    sessions: &'a Sessions,
    pub id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.sessions.lock().remove(&self.id);
    }
}

/// Sessions held elsewhere than in a connection task (the HTTP endpoint's): closed by id, or all those
/// of secrets that are no longer their seat's. The endpoint implements it; the daemon and the sessions
/// know only this.
pub trait RemoteSessions: Send + Sync {
    fn close(&self, id: String) -> futures::future::BoxFuture<'static, ()>;
    fn end_unless(&self, still_valid: &dyn Fn(&str, &str) -> bool);
    /// Its client sent `notifications/initialized` (or its first call): `ended` stops its calls when
    /// its client ends it (DELETE).
    fn initialized(&self, id: &str, ended: CancellationToken);
    /// For each seat, its sessions opened and never initialised (registered nowhere else).
    fn starting(&self) -> futures::future::BoxFuture<'static, HashMap<String, usize>>;
    /// The server stops: its sessions are left for the next start to take up.
    fn carry_over(&self);
}

/// A registration that owns its way back to the registry: an HTTP session's, which lives in rmcp's session
/// worker rather than in a connection task. Dropping it removes the entry and fires its token.
pub struct Owned {
    sessions: std::sync::Arc<Sessions>,
    pub id: u64,
    ct: CancellationToken,
}

impl Owned {
    pub fn open(
        sessions: &std::sync::Arc<Sessions>,
        seat: &str,
        secret_hash: &str,
        ct: CancellationToken,
    ) -> Self {
        let id = sessions.insert(seat, "http", secret_hash.to_string(), ct.clone());
        Self {
            sessions: sessions.clone(),
            id,
            ct,
        }
    }

    /// Fired when the registration ends: the seat changed, or it was dropped.
    pub fn ended(&self) -> CancellationToken {
        self.ct.clone()
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.sessions.lock().remove(&self.id);
        self.ct.cancel();
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, SessionEntry>> {
        lock(&self.map)
    }

    /// What `seat`'s socket sessions have in flight together.
    pub fn load_of(&self, seat: &str) -> std::sync::Arc<SeatLoad> {
        lock(&self.loads)
            .entry(seat.to_string())
            .or_default()
            .clone()
    }

    /// Registers a socket session, unless its seat holds SESSIONS_PER_SEAT of them or all seats `most`
    /// (counted and added in one step: connections are handled side by side).
    pub fn open_within(
        &self,
        seat: &str,
        secret_hash: String,
        ct: CancellationToken,
        most: usize,
    ) -> Result<Registered<'_>, Full> {
        let mut map = self.lock();
        let socket = map.values().filter(|e| e.transport == "socket");
        let (all, of_seat) = socket.fold((0, 0), |(all, of_seat), e| {
            (all + 1, of_seat + usize::from(e.seat == seat))
        });
        if of_seat >= SESSIONS_PER_SEAT {
            return Err(Full::Seat);
        }
        if all >= most {
            return Err(Full::All(most));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        map.insert(id, SessionEntry::new(seat, "socket", secret_hash, ct));
        Ok(Registered { sessions: self, id })
    }

    fn insert(
        &self,
        seat: &str,
        transport: &'static str,
        secret_hash: String,
        ct: CancellationToken,
    ) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .insert(id, SessionEntry::new(seat, transport, secret_hash, ct));
        id
    }

    pub fn set_peer(&self, id: u64, peer: Peer<RoleServer>) {
        if let Some(e) = self.lock().get_mut(&id) {
            e.peer = Some(peer);
        }
    }

    /// Sessions open now by (seat, transport).
    pub fn count_by_seat_and_transport(&self) -> HashMap<(String, &'static str), usize> {
        let mut counts = HashMap::new();
        for e in self.lock().values() {
            *counts.entry((e.seat.clone(), e.transport)).or_insert(0) += 1;
        }
        counts
    }

    pub fn count_by_seat(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for e in self.lock().values() {
            *counts.entry(e.seat.clone()).or_insert(0) += 1;
        }
        counts
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// Ends every session whose secret is no longer a seat's, by the change `change` names for its seat;
    /// returns the seats whose sessions ended.
    pub fn end_unless(
        &self,
        still_valid: impl Fn(&str, &str) -> bool,
        change: impl Fn(&str) -> SeatChange,
    ) -> Vec<String> {
        let mut ended = Vec::new();
        for e in self.lock().values_mut() {
            if !still_valid(&e.seat, &e.secret_hash) {
                // Set before the token fires: the calls it stops read it as they answer.
                e.ended_by = Some(change(&e.seat));
                e.ct.cancel();
                ended.push(e.seat.clone());
            }
        }
        ended.sort();
        ended
    }

    /// The change of its seat that ended session `id`, if one did.
    pub fn ended_by(&self, id: u64) -> Option<SeatChange> {
        self.lock().get(&id).and_then(|e| e.ended_by)
    }

    pub fn end_all(&self) {
        for e in self.lock().values() {
            e.ct.cancel();
        }
    }

    pub fn add_sink(&self, id: u64, sink: SubscriptionSink) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = self.lock().get_mut(&id) {
            e.sinks.push((key, sink));
        }
        key
    }

    pub fn remove_sink(&self, id: u64, key: u64) {
        if let Some(e) = self.lock().get_mut(&id) {
            e.sinks.retain(|(k, _)| *k != key);
        }
    }

    /// Sends `notifications/tools/list_changed` to every session: through its listen streams where it
    /// opened any (2026-07-28), else as a plain notification.
    /// Returns how many sessions it told.
    pub fn announce_tool_list_changed(&self, tasks: &TaskTracker) -> usize {
        let mut told = 0;
        for e in self.lock().values() {
            if e.sinks.is_empty() {
                if let Some(peer) = e.peer.clone() {
                    told += 1;
                    tasks.spawn(async move {
                        let _ = peer.notify_tool_list_changed().await;
                    });
                }
            } else {
                told += 1;
                for (_, sink) in &e.sinks {
                    let sink = sink.clone();
                    tasks.spawn(async move {
                        let _ = sink.notify_tool_list_changed().await;
                    });
                }
            }
        }
        told
    }
}
