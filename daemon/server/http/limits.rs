//! What one client can make the endpoint hold: streams open at once (per seat, and in all), and a
//! request's body, which must arrive whole within a time limit.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::Method;
use futures::StreamExt;

use crate::sync::lock;

/// How long a request's body may take to arrive, all of it.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How a body past BODY_TIMEOUT is said, for the answer to tell it apart.
pub const BODY_LATE: &str = "the request's body did not arrive within";

/// How a body past its seat's share of BODIES_IN_FLIGHT is said, for the answer to tell it apart.
pub const SEAT_BODIES: &str = "the seat's requests being read hold";
/// How a body past the server's bound is said.
pub const ALL_BODIES: &str = "the server is reading";

/// Bytes of request bodies read and not yet let go of, over all requests, and by seat: one seat may
/// hold a quarter of them, so that bodies sent slowly by one seat keep no other out.
pub struct Bodies {
    in_flight: Arc<AtomicUsize>,
    /// Each seat's bytes: looked up once a request (a seat's entry stays, as seats are few).
    by_seat: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    budget: usize,
}

impl Bodies {
    pub fn new(budget: usize) -> Self {
        Self {
            in_flight: Arc::default(),
            by_seat: Mutex::default(),
            budget,
        }
    }
}

/// One body's share of the bytes in flight, given back when its stream is dropped (parsed, or failed).
struct BodyShare {
    bytes: usize,
    in_flight: Arc<AtomicUsize>,
    seat: Arc<AtomicUsize>,
}

impl BodyShare {
    /// Takes `n` more bytes; the seat's bytes now, and all of them.
    fn take(&mut self, n: usize) -> (usize, usize) {
        self.bytes += n;
        let all = self.in_flight.fetch_add(n, Ordering::SeqCst) + n;
        let mine = self.seat.fetch_add(n, Ordering::SeqCst) + n;
        (mine, all)
    }
}

impl Drop for BodyShare {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(self.bytes, Ordering::SeqCst);
        self.seat.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// Streams open now (responses being written), by seat.
pub struct Streams {
    open: Counts<String>,
    per_seat: usize,
}

/// How many of something each key holds now.
pub type Counts<K> = Arc<Mutex<HashMap<K, usize>>>;

/// One of a key's count, given back when dropped; a key at zero is forgotten, so the map holds only keys
/// in use.
pub struct Counted<K: Hash + Eq> {
    counts: Counts<K>,
    key: K,
}

impl<K: Hash + Eq + Clone> Counted<K> {
    /// Counts one more for `key`, in `held`: the map of `counts`, locked by the caller, who decided first.
    pub fn add(counts: &Counts<K>, held: &mut HashMap<K, usize>, key: K) -> Self {
        *held.entry(key.clone()).or_insert(0) += 1;
        Self {
            counts: counts.clone(),
            key,
        }
    }
}

impl<K: Hash + Eq> Drop for Counted<K> {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts);
        if let Some(n) = counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// One open stream of a seat, given back when dropped (with its response's body).
pub type Stream = Counted<String>;

impl Streams {
    pub fn new(per_seat: usize) -> Self {
        Self {
            open: Arc::default(),
            per_seat,
        }
    }

    /// Counts one more stream of `seat`, or says why not: past the seat's limit, or the server's.
    pub fn open(&self, seat: &str, max_total: usize) -> Result<Stream, String> {
        let mut open = lock(&self.open);
        let total: usize = open.values().sum();
        let mine = open.get(seat).copied().unwrap_or(0);
        if mine < self.per_seat && total < max_total {
            return Ok(Counted::add(&self.open, &mut open, seat.to_string()));
        }
        Err(if mine >= self.per_seat {
            format!(
                "the seat {seat} has {mine} requests and streams open on this server, its limit \
                 (\"http\".\"maxStreamsPerSeat\" in openovai.json): wait for one to finish, or close a stream, and \
                 send this again"
            )
        } else {
            format!(
                "this server has {total} HTTP requests and streams open, its limit (maxConnections in \
                 openovai.json): send this again in a moment"
            )
        })
    }
}

/// The request with a body that must arrive whole within BODY_TIMEOUT: a client sending a byte at a
/// time cannot hold the body's memory for long. `seat` sends it.
pub fn with_body_deadline(request: Request, bodies: &Bodies, seat: &str) -> Request {
    if request.method() != Method::POST {
        return request;
    }
    let deadline = tokio::time::Instant::now() + BODY_TIMEOUT;
    let (parts, body) = request.into_parts();
    let found = lock(&bodies.by_seat).get(seat).cloned();
    let seat = found.unwrap_or_else(|| {
        lock(&bodies.by_seat)
            .entry(seat.to_string())
            .or_default()
            .clone()
    });
    let held = BodyShare {
        bytes: 0,
        in_flight: bodies.in_flight.clone(),
        seat,
    };
    let budget = bodies.budget;
    let seat_budget = budget / 4;
    let chunks = futures::stream::unfold(
        (body.into_data_stream(), false, held),
        move |(mut chunks, failed, mut held)| async move {
            if failed {
                return None;
            }
            match tokio::time::timeout_at(deadline, chunks.next()).await {
                Ok(Some(Ok(chunk))) => {
                    // Bodies being read are held in memory until parsed: all of them together are
                    // bounded, and each seat's to a quarter of that.
                    let (mine, all) = held.take(chunk.len());
                    let why = if mine > seat_budget {
                        Some(format!(
                            "{SEAT_BODIES} more than {} MiB at once, a seat's share of what the server reads: send \
                             this again once they are read",
                            seat_budget >> 20
                        ))
                    } else if all > budget {
                        Some(format!(
                            "{ALL_BODIES} {} MiB of request bodies at once, its limit: send this again in a moment",
                            budget >> 20
                        ))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        return Some((
                            Err(axum::Error::new(std::io::Error::other(why))),
                            (chunks, true, held),
                        ));
                    }
                    Some((Ok(chunk), (chunks, false, held)))
                }
                Ok(Some(Err(e))) => Some((Err(e), (chunks, true, held))),
                Ok(None) => None,
                Err(_) => Some((
                    Err(axum::Error::new(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("{BODY_LATE} {} s", BODY_TIMEOUT.as_secs()),
                    ))),
                    (chunks, true, held),
                )),
            }
        },
    );
    Request::from_parts(parts, Body::from_stream(chunks))
}
