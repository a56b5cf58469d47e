//! Which seat opened each HTTP session (2025-11-25 and before): a session answers only the secret that
//! opened it, a seat holds a bounded number, and a removed or re-keyed seat's sessions are closed. And
//! whether each is in use: a session is idle only when it has sent nothing for a while and holds no
//! stream (a client waiting on its GET stream for list changes is there, however quiet).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sync::lock;

/// The sessions one seat may hold open at once, as on the socket.
pub use crate::server::sessions::SESSIONS_PER_SEAT;
// refusal::NO_SUCH_SESSION names the bound by number.
const _: () = assert!(SESSIONS_PER_SEAT == 64);

struct Owner {
    seat: String,
    hash: String,
    since: Instant,
    /// Its last request began or its last stream ended.
    seen: Instant,
    /// Requests and streams of it being answered now.
    open: usize,
    /// The ids of its requests being answered now (as their answers write them).
    ids: HashSet<String>,
    /// Its client sent `notifications/initialized`: until then the session is counted apart, since
    /// nothing else shows it (it is registered with the daemon's sessions only then).
    initialized: bool,
    /// Its seat changed: it closes once its requests are answered.
    ending: bool,
    /// Its closing has begun (from the seat's change, or its registration's end): once is enough.
    closing: bool,
    /// Fired when its client ends it, to stop its calls (from its registration with the daemon).
    ended: Option<tokio_util::sync::CancellationToken>,
}

#[derive(Default, Clone)]
pub struct Owners {
    map: Arc<Mutex<HashMap<String, Owner>>>,
    /// Past this many entries, the next record first forgets sessions rmcp no longer holds.
    prune_at: Arc<Mutex<usize>>,
}

/// A request or stream of a session being answered.
pub struct InUse {
    map: Arc<Mutex<HashMap<String, Owner>>>,
    id: String,
}

impl Drop for InUse {
    fn drop(&mut self) {
        if let Some(o) = lock(&self.map).get_mut(&self.id) {
            o.open = o.open.saturating_sub(1);
            o.seen = Instant::now();
        }
    }
}

/// A request's id, taken in its session for as long as the request is answered.
pub struct IdInFlight {
    map: Arc<Mutex<HashMap<String, Owner>>>,
    session: String,
    key: String,
}

impl Drop for IdInFlight {
    fn drop(&mut self) {
        if let Some(o) = lock(&self.map).get_mut(&self.session) {
            o.ids.remove(&self.key);
        }
    }
}

/// What a request's session id says about the request.
pub enum Check {
    Mine,
    /// Opened with another secret: this seat's (one it had before), or another's.
    Other(String),
    /// Not a session of this server (never, or no longer).
    Unknown,
}

impl Owners {
    /// Takes a request's id in its session for as long as the guard lives; `None` when a request of
    /// the session with that id is being answered already.
    pub fn take_id(&self, session: &str, key: &str) -> Option<IdInFlight> {
        let mut map = lock(&self.map);
        let owner = map.get_mut(session)?;
        if !owner.ids.insert(key.to_string()) {
            return None;
        }
        Some(IdInFlight {
            map: self.map.clone(),
            session: session.to_string(),
            key: key.to_string(),
        })
    }

    pub fn check(&self, id: &str, hash: &str) -> Check {
        match lock(&self.map).get(id) {
            Some(o) if o.hash == hash => Check::Mine,
            Some(o) => Check::Other(o.seat.clone()),
            None => Check::Unknown,
        }
    }

    pub fn record(&self, id: &str, seat: &str, hash: &str) {
        let now = Instant::now();
        lock(&self.map).insert(
            id.to_string(),
            Owner {
                seat: seat.to_string(),
                hash: hash.to_string(),
                since: now,
                seen: now,
                open: 0,
                ids: HashSet::new(),
                initialized: false,
                ending: false,
                closing: false,
                ended: None,
            },
        );
    }

    /// A request of session `id` is being answered: it is in use until the guard (kept with the answer's
    /// body) is dropped.
    pub fn in_use(&self, id: &str) -> InUse {
        if let Some(o) = lock(&self.map).get_mut(id) {
            o.open += 1;
            o.seen = Instant::now();
        }
        InUse {
            map: self.map.clone(),
            id: id.to_string(),
        }
    }

    /// Forgets, and returns, the sessions that have had nothing open for `idle`.
    pub fn take_idle(&self, idle: Duration) -> Vec<String> {
        self.take_where(|o| o.open == 0 && o.seen.elapsed() >= idle)
    }

    /// Forgets, and returns, the seat's session that has had nothing open for the longest.
    pub fn take_longest_idle(&self, seat: &str) -> Option<String> {
        let mut map = lock(&self.map);
        let id = map
            .iter()
            .filter(|(_, o)| o.seat == seat && o.open == 0)
            .min_by_key(|(_, o)| o.seen)
            .map(|(id, _)| id.clone())?;
        map.remove(&id);
        Some(id)
    }

    /// Forgets session `id`: what stops its calls, if it was registered.
    pub fn forget(&self, id: &str) -> Option<tokio_util::sync::CancellationToken> {
        lock(&self.map).remove(id).and_then(|o| o.ended)
    }

    pub fn count(&self, seat: &str) -> usize {
        lock(&self.map).values().filter(|o| o.seat == seat).count()
    }

    pub fn initialized(&self, id: &str, ended: tokio_util::sync::CancellationToken) {
        if let Some(o) = lock(&self.map).get_mut(id) {
            o.initialized = true;
            o.ended = Some(ended);
        }
    }

    /// For each seat, its sessions opened and never initialised.
    pub fn starting(&self) -> HashMap<String, usize> {
        let mut by_seat = HashMap::new();
        for o in lock(&self.map).values().filter(|o| !o.initialized) {
            *by_seat.entry(o.seat.clone()).or_default() += 1;
        }
        by_seat
    }

    /// Whether it is time to forget dead sessions (the map doubled since the last time).
    pub fn wants_pruning(&self) -> bool {
        lock(&self.map).len() >= (*lock(&self.prune_at)).max(64)
    }

    /// Forgets every session not in `live` (a snapshot of rmcp's taken at `taken`), keeping those
    /// recorded since the snapshot.
    pub fn prune(&self, live: &HashSet<String>, taken: Instant) {
        let mut map = lock(&self.map);
        map.retain(|id, o| o.since >= taken || live.contains(id));
        *lock(&self.prune_at) = map.len() * 2;
    }

    /// Returns the sessions whose secret is no longer their seat's (once each), still kept: the calls their
    /// seat's change stopped are answered before they close (`answering`).
    pub fn ending(&self, still_valid: impl Fn(&str, &str) -> bool) -> Vec<String> {
        let mut map = lock(&self.map);
        let mut ids = Vec::new();
        for (id, o) in map.iter_mut() {
            if !o.ending && !still_valid(&o.seat, &o.hash) {
                o.ending = true;
                ids.push(id.clone());
            }
        }
        ids
    }

    /// Takes on closing session `id`: false when that was taken on already.
    pub fn claim_close(&self, id: &str) -> bool {
        match lock(&self.map).get_mut(id) {
            Some(o) => !std::mem::replace(&mut o.closing, true),
            None => true,
        }
    }

    /// Whether a request of session `id` is still being answered.
    pub fn answering(&self, id: &str) -> bool {
        lock(&self.map).get(id).is_some_and(|o| !o.ids.is_empty())
    }

    fn take_where(&self, gone: impl Fn(&Owner) -> bool) -> Vec<String> {
        let mut map = lock(&self.map);
        let ids: Vec<String> = map
            .iter()
            .filter(|(_, o)| gone(o))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            map.remove(id);
        }
        ids
    }
}
