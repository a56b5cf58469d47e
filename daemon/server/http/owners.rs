//! Which seat opened each HTTP session (2025-11-25 and before): a session answers only the secret that
//! opened it, a seat holds a bounded number, and a removed or re-keyed seat's sessions are closed.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use crate::sync::lock;

/// The sessions one seat may hold open at once.
pub const SESSIONS_PER_SEAT: usize = 64;

struct Owner {
    seat: String,
    hash: String,
    since: Instant,
}

#[derive(Default)]
pub struct Owners {
    map: Mutex<HashMap<String, Owner>>,
    /// Past this many entries, the next record first forgets sessions rmcp no longer holds.
    prune_at: Mutex<usize>,
}

/// What a request's session id says about the request.
pub enum Check {
    Mine,
    /// Opened with another secret.
    Other,
    /// Not a session of this server (never, or no longer).
    Unknown,
}

impl Owners {
    pub fn check(&self, id: &str, hash: &str) -> Check {
        match lock(&self.map).get(id) {
            Some(o) if o.hash == hash => Check::Mine,
            Some(_) => Check::Other,
            None => Check::Unknown,
        }
    }

    pub fn record(&self, id: &str, seat: &str, hash: &str) {
        lock(&self.map).insert(
            id.to_string(),
            Owner {
                seat: seat.to_string(),
                hash: hash.to_string(),
                since: Instant::now(),
            },
        );
    }

    pub fn forget(&self, id: &str) {
        lock(&self.map).remove(id);
    }

    pub fn count(&self, seat: &str) -> usize {
        lock(&self.map).values().filter(|o| o.seat == seat).count()
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

    /// Forgets, and returns, the sessions whose secret is no longer their seat's.
    pub fn take_invalid(&self, still_valid: impl Fn(&str, &str) -> bool) -> Vec<String> {
        let mut map = lock(&self.map);
        let gone: Vec<String> = map
            .iter()
            .filter(|(_, o)| !still_valid(&o.seat, &o.hash))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            map.remove(id);
        }
        gone
    }
}
