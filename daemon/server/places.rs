//! The open connections of an HTTP listener (the endpoint's, the status page's), oldest first, and which
//! have shown they are wanted (a seat's secret, the page's cookie): when the listener is full, the oldest
//! of the others gives its place up.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::sync::lock;

/// An HTTP connection as the accept loop knows it: whether a request on it has shown it is wanted (a
/// seat's secret, the page's cookie), and how to close it to make room for one that may.
pub struct Place {
    ip: IpAddr,
    since: std::time::Instant,
    seated: AtomicBool,
    /// The seat whose secret its requests showed (the endpoint's), and how many of them are under way.
    seat: std::sync::Mutex<Option<Arc<str>>>,
    busy: AtomicUsize,
    /// Fired to close it.
    pub close: CancellationToken,
    /// Fired to close it once what is under way on it is answered (hyper's graceful shutdown).
    pub wind_down: CancellationToken,
}

impl Place {
    /// A request on this connection presented a seat's secret or the page's cookie: it keeps its place.
    pub fn seat_seen(&self) {
        self.seated.store(true, Ordering::Relaxed);
    }

    /// A request is under way on this connection until the guard goes (with its answer).
    pub fn working(self: &Arc<Self>) -> Working {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Working(self.clone())
    }

    /// A request on it showed `seat`'s secret: it keeps its place, and counts as that seat's.
    pub fn seated_as(&self, seat: &str) {
        self.seat_seen();
        let mut mine = lock(&self.seat);
        if mine.as_deref() != Some(seat) {
            *mine = Some(seat.into());
        }
    }
}

/// A request under way on a connection: it is not closed to make room while this lives.
pub struct Working(Arc<Place>);

impl Drop for Working {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The open connections, oldest first.
#[derive(Clone, Default)]
pub struct Places(Arc<std::sync::Mutex<Vec<Arc<Place>>>>);

impl Places {
    pub fn add(&self, ip: IpAddr) -> Arc<Place> {
        let place = Arc::new(Place {
            ip,
            since: std::time::Instant::now(),
            seated: AtomicBool::new(false),
            seat: std::sync::Mutex::new(None),
            busy: AtomicUsize::new(0),
            close: CancellationToken::new(),
            wind_down: CancellationToken::new(),
        });
        lock(&self.0).push(place.clone());
        place
    }

    pub fn remove(&self, place: &Arc<Place>) {
        lock(&self.0).retain(|p| !Arc::ptr_eq(p, place));
    }

    /// Winds down the oldest idle connection (kept alive, no request under way on it) of the seat that
    /// holds the most, when that is more than `share` of them: one seat's clients cannot keep every
    /// other seat out by holding connections open, and a seat holding its fair share keeps it. A client
    /// whose idle connection closes opens another as it next asks. False when there is none such.
    pub fn wind_down_idle_of_fullest_seat(&self, share: usize) -> bool {
        let all = lock(&self.0);
        let open = |p: &&Arc<Place>| !p.close.is_cancelled() && !p.wind_down.is_cancelled();
        let mut held: std::collections::HashMap<Arc<str>, usize> = std::collections::HashMap::new();
        for p in all.iter().filter(open) {
            if let Some(seat) = lock(&p.seat).clone() {
                *held.entry(seat).or_default() += 1;
            }
        }
        let Some((fullest, n)) = held.into_iter().max_by_key(|(_, n)| *n) else {
            return false;
        };
        if n <= share {
            return false;
        }
        let idle = all.iter().filter(open).find(|p| {
            p.busy.load(Ordering::SeqCst) == 0 && lock(&p.seat).as_ref() == Some(&fullest)
        });
        match idle {
            Some(p) => {
                p.wind_down.cancel();
                true
            }
            None => false,
        }
    }

    /// Closes the oldest connection on which nothing wanted has shown itself (of `ip`, when given) and that
    /// has been open for `grace` at least; false when there is none.
    pub fn close_oldest_unseated(&self, ip: Option<IpAddr>, grace: Duration) -> bool {
        let mut all = lock(&self.0);
        let found = all.iter().position(|p| {
            !p.seated.load(Ordering::Relaxed)
                && !p.close.is_cancelled()
                && ip.is_none_or(|ip| p.ip == ip)
                && p.since.elapsed() >= grace
        });
        match found {
            Some(i) => {
                all.remove(i).close.cancel();
                true
            }
            None => false,
        }
    }
}
