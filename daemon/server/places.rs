//! The open connections of an HTTP listener (the endpoint's, the status page's), oldest first, and which
//! have shown they are wanted (a seat's secret, the page's cookie): when the listener is full, the oldest
//! of the others gives its place up.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::sync::lock;

/// An HTTP connection as the accept loop knows it: whether a request on it has shown it is wanted (a
/// seat's secret, the page's cookie), and how to close it to make room for one that may.
pub struct Place {
    ip: IpAddr,
    since: std::time::Instant,
    seated: AtomicBool,
    /// Fired to close it.
    pub close: CancellationToken,
}

impl Place {
    /// A request on this connection presented a seat's secret or the page's cookie: it keeps its place.
    pub fn seat_seen(&self) {
        self.seated.store(true, Ordering::Relaxed);
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
            close: CancellationToken::new(),
        });
        lock(&self.0).push(place.clone());
        place
    }

    pub fn remove(&self, place: &Arc<Place>) {
        lock(&self.0).retain(|p| !Arc::ptr_eq(p, place));
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
