//! A 2025-* session's answer outlives the connection it was meant for: rmcp's session manager, wrapped.
//!
//! rmcp keeps a request's SSE events for a client that comes back with `Last-Event-ID`, but drops them the
//! moment it sends the answer (`tx_router.remove` on the response): a client whose connection broke while
//! its call ran, and that resumes (as the TS SDK does, after the `retry` rmcp itself advertises) once the
//! call is done, got an empty stream and never the answer. Here each request's stream is read by a task
//! of its own, which passes the events on and keeps an answered request's events for `KEPT_FOR`, for a
//! resume to replay: kept whether or not they seemed delivered, since a connection that broke without a
//! word (a laptop asleep, a NAT forgetting it) takes what was written to it with it unnoticed. Bounded
//! per session, in all, and in bytes; past the bounds of all, the seat keeping the most gives up its
//! oldest first, so a seat's flood of answers pushes out its own before another's. A resume naming an event its
//! request's stream never sent is turned away here: rmcp would hand it the running call's stream before
//! finding the index wrong, and the answer would go nowhere.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use tokio_util::task::TaskTracker;

use crate::sync::lock;

/// How long an answered request's events wait for their client to resume.
const KEPT_FOR: Duration = Duration::from_secs(60);
/// Requests kept of one session: its latest, past that.
const KEPT_PER_SESSION: usize = 16;
/// Requests kept over all sessions, and their events' bytes (as written): the oldest go first past either.
const KEPT_IN_ALL: usize = 1024;
const KEPT_BYTES: usize = 32 << 20;
/// Events kept of one request (its progress, then its answer); the oldest go first past it.
const MAX_EVENTS: usize = 64;
/// Events passed on to a reading client before the reader waits for it.
const PASSED_ON: usize = 16;

pub struct Resumable {
    pub inner: Arc<LocalSessionManager>,
    kept: Arc<Mutex<Kept>>,
    /// The daemon's: a shutdown waits for the readers too.
    tasks: TaskTracker,
    /// The seat of the request being handled (the gate's, read where rmcp calls in).
    seat_now: fn() -> Option<String>,
    /// The sessions a stop leaves for the next start: one closed is not.
    carried: Arc<super::carried::Carried>,
}

impl Resumable {
    pub fn new(
        inner: Arc<LocalSessionManager>,
        tasks: TaskTracker,
        seat_now: fn() -> Option<String>,
        carried: Arc<super::carried::Carried>,
    ) -> Self {
        Self {
            inner,
            kept: Arc::default(),
            tasks,
            seat_now,
            carried,
        }
    }

    /// Whether a request of session `id` is running (its stream not answered yet).
    pub fn running(&self, id: &str) -> bool {
        lock(&self.kept).running.contains_key(id)
    }

    /// Reads `events` (one request's) in a task of its own, passing them on to the stream returned.
    fn read_on(
        &self,
        session: &SessionId,
        events: impl Stream<Item = ServerSseMessage> + Send + 'static,
    ) -> Passed {
        let (tx, rx) = tokio::sync::mpsc::channel(PASSED_ON);
        let kept = self.kept.clone();
        let session = session.clone();
        let seat: Arc<str> = (self.seat_now)().unwrap_or_default().into();
        let reader = lock(&kept).next_reader();
        self.tasks.spawn(async move {
            let mut events = std::pin::pin!(events);
            let mut to = Some(tx);
            let mut request = None;
            let mut seen: VecDeque<ServerSseMessage> = VecDeque::new();
            while let Some(event) = events.next().await {
                let index = event_index(&event);
                request = request.or(index.map(|(_, r)| r));
                if seen.len() == MAX_EVENTS {
                    seen.pop_front();
                }
                seen.push_back(event.clone());
                match (index, is_answer(&event)) {
                    // The answer is kept before it is passed on (a connection gone without a word can
                    // hold the send), and the request stops running in the same step: a resume finds
                    // it one way or the other.
                    (Some((_, r)), true) => {
                        let events = std::mem::take(&mut seen);
                        let bytes = events.iter().map(bytes_of).sum();
                        let key = (session.clone(), r);
                        let mut kept_now = lock(&kept);
                        kept_now.ended(&key, reader);
                        if kept_now.keep(key, seat.clone(), events, bytes) {
                            tokio::spawn(sweep(kept.clone()));
                        }
                    }
                    (Some((i, r)), false) => lock(&kept).sent((session.clone(), r), reader, i),
                    (None, _) => {}
                }
                if let Some(tx) = &to
                    && tx.send(event).await.is_err()
                {
                    to = None;
                }
            }
            // A stream that ended unanswered (cancelled, or handed by rmcp to a resume, whose own reader
            // keeps what comes) is not kept.
            if let Some(r) = request {
                lock(&kept).ended(&(session.clone(), r), reader);
            }
        });
        Passed(rx)
    }
}

/// Forgets kept requests as their minute passes, while any is kept: memory comes back though nobody
/// resumes (an idle daemon wakes for nothing once none is kept).
async fn sweep(kept: Arc<Mutex<Kept>>) {
    loop {
        let next = {
            let mut kept = lock(&kept);
            kept.expire();
            match kept.order.front() {
                Some((_, at)) => *at + KEPT_FOR,
                None => {
                    kept.sweeping = false;
                    drop(kept);
                    // The answers kept for resuming are all gone: their memory comes back.
                    crate::memory::give_back();
                    return;
                }
            }
        };
        tokio::time::sleep_until(next).await;
    }
}

/// What an event takes kept: its message as written (counted, not written out again), and its id.
fn bytes_of(event: &ServerSseMessage) -> usize {
    struct Counted(usize);
    impl std::io::Write for Counted {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counted = Counted(0);
    if let Some(message) = event.message.as_deref() {
        let _ = serde_json::to_writer(&mut counted, message);
    }
    counted.0 + event.event_id.as_ref().map_or(0, String::len) + 64
}

/// The events passed on to the client's stream.
pub struct Passed(tokio::sync::mpsc::Receiver<ServerSseMessage>);

impl Stream for Passed {
    type Item = ServerSseMessage;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<ServerSseMessage>> {
        self.0.poll_recv(cx)
    }
}

type Key = (SessionId, u64);

struct KeptStream {
    events: VecDeque<ServerSseMessage>,
    bytes: usize,
    seat: Arc<str>,
}

/// What one seat keeps: its bytes and requests, and its keys oldest first (a key whose request went
/// since stays until it is reached or the list is compacted).
#[derive(Default)]
struct Share {
    bytes: usize,
    count: usize,
    keys: VecDeque<Key>,
}

/// The kept requests' events, and the requests running. Every step is O(1) but for an occasional
/// compaction and a look over the seats: a request is kept for each answer an HTTP session gets.
#[derive(Default)]
struct Kept {
    streams: HashMap<Key, KeptStream>,
    /// Oldest first, when each was kept; a key whose request went since (its session's cap, its
    /// session's end) stays here until it is reached or the queue is compacted.
    order: VecDeque<(Key, Instant)>,
    /// Each session's kept requests, oldest first.
    by_session: HashMap<SessionId, VecDeque<u64>>,
    by_seat: HashMap<Arc<str>, Share>,
    bytes: usize,
    /// Each running request's reader and the last index its stream sent.
    live: HashMap<Key, (u64, u64)>,
    /// How many requests of each session are running.
    running: HashMap<SessionId, usize>,
    readers: u64,
    /// A sweep is waiting for the oldest kept request's minute.
    sweeping: bool,
}

impl Kept {
    fn next_reader(&mut self) -> u64 {
        self.readers += 1;
        self.readers
    }

    /// Reader `reader` passed on event `index` of request `key` (a resume's reader takes the request
    /// over from the one before).
    /// Reader numbers only grow: one older than the entry's (draining what it was sent before the resume)
    /// changes nothing.
    fn sent(&mut self, key: Key, reader: u64, index: u64) {
        let session = key.0.clone();
        match self.live.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((reader, index));
                *self.running.entry(session).or_default() += 1;
            }
            std::collections::hash_map::Entry::Occupied(mut o) => {
                let (r, last) = *o.get();
                if reader > r {
                    o.insert((reader, index));
                } else if reader == r {
                    o.insert((reader, last.max(index)));
                }
            }
        }
    }

    /// Reader `reader`'s stream ended: its request runs no more, unless a later reader holds it.
    fn ended(&mut self, key: &Key, reader: u64) {
        if self.live.get(key).is_some_and(|(r, _)| *r == reader) {
            self.live.remove(key);
            if let Some(n) = self.running.get_mut(&key.0) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.running.remove(&key.0);
                }
            }
        }
    }

    /// Keeps a request's events; true when a sweep is to start.
    fn keep(
        &mut self,
        key: Key,
        seat: Arc<str>,
        events: VecDeque<ServerSseMessage>,
        bytes: usize,
    ) -> bool {
        self.expire();
        if bytes > KEPT_BYTES {
            return false;
        }
        let (session, request) = key.clone();
        self.forget(&key);
        self.by_session
            .entry(session.clone())
            .or_default()
            .push_back(request);
        self.order.push_back((key.clone(), Instant::now()));
        let share = self.by_seat.entry(seat.clone()).or_default();
        share.bytes += bytes;
        share.count += 1;
        share.keys.push_back(key.clone());
        self.streams.insert(
            key,
            KeptStream {
                events,
                bytes,
                seat,
            },
        );
        self.bytes += bytes;
        let oldest_of_session = self
            .by_session
            .get_mut(&session)
            .filter(|kept| kept.len() > KEPT_PER_SESSION)
            .and_then(VecDeque::pop_front);
        if let Some(old) = oldest_of_session {
            self.drop_stream(&(session, old));
        }
        while self.streams.len() > KEPT_IN_ALL || self.bytes > KEPT_BYTES {
            let Some(oldest) = self.oldest_of_the_most() else {
                break;
            };
            self.forget(&oldest);
        }
        self.compact();
        !std::mem::replace(&mut self.sweeping, true)
    }

    /// The oldest kept request of the seat keeping the most (by count past the count's bound, else by
    /// bytes).
    fn oldest_of_the_most(&mut self) -> Option<Key> {
        let by_count = self.streams.len() > KEPT_IN_ALL;
        let seat = self
            .by_seat
            .iter()
            .filter(|(_, share)| share.count > 0)
            .max_by_key(|(_, share)| if by_count { share.count } else { share.bytes })
            .map(|(seat, _)| seat.clone())?;
        let share = self.by_seat.get_mut(&seat)?;
        while let Some(key) = share.keys.pop_front() {
            if self.streams.get(&key).is_some_and(|s| s.seat == seat) {
                return Some(key);
            }
        }
        None
    }

    fn compact(&mut self) {
        if self.order.len() > 4 * self.streams.len() + 1024 {
            let streams = &self.streams;
            self.order.retain(|(k, _)| streams.contains_key(k));
        }
        let streams = &self.streams;
        self.by_seat.retain(|seat, share| {
            if share.keys.len() > 4 * share.count + 64 {
                share
                    .keys
                    .retain(|k| streams.get(k).is_some_and(|s| &s.seat == seat));
            }
            share.count > 0
        });
    }

    /// Drops a request's events (its session's list is the caller's to mend).
    fn drop_stream(&mut self, key: &Key) {
        if let Some(gone) = self.streams.remove(key) {
            self.bytes = self.bytes.saturating_sub(gone.bytes);
            if let Some(share) = self.by_seat.get_mut(&gone.seat) {
                share.bytes = share.bytes.saturating_sub(gone.bytes);
                share.count = share.count.saturating_sub(1);
            }
        }
    }

    /// Drops a request's events and its place in its session's list.
    fn forget(&mut self, key: &(SessionId, u64)) {
        self.drop_stream(key);
        if let Some(kept) = self.by_session.get_mut(&key.0) {
            kept.retain(|r| *r != key.1);
            if kept.is_empty() {
                self.by_session.remove(&key.0);
            }
        }
    }

    fn expire(&mut self) {
        while self
            .order
            .front()
            .is_some_and(|(_, at)| at.elapsed() >= KEPT_FOR)
        {
            if let Some((key, _)) = self.order.pop_front() {
                self.forget(&key);
            }
        }
    }

    /// A request's kept events after `index`, as MCP asks (its priming event has an index of its own).
    fn replay(&mut self, key: &Key, index: u64) -> Option<Vec<ServerSseMessage>> {
        self.expire();
        let kept = self.streams.get(key)?;
        Some(
            kept.events
                .iter()
                .filter(|e| event_index(e).is_some_and(|(i, _)| i > index))
                .cloned()
                .collect(),
        )
    }

    fn forget_session(&mut self, session: &SessionId) {
        for request in self.by_session.remove(session).unwrap_or_default() {
            self.drop_stream(&(session.clone(), request));
        }
        self.live.retain(|(s, _), _| s != session);
        self.running.remove(session);
    }

    /// Whether a resume from event `index` of running request `key` names one its stream never sent.
    fn past_what_was_sent(&self, key: &Key, index: u64) -> bool {
        match self.live.get(key) {
            Some((_, last)) => index > *last,
            // Not running and not kept: no stream of it to resume.
            None => true,
        }
    }
}

/// An event id as rmcp writes a request's: `INDEX/REQUEST`.
fn event_index(event: &ServerSseMessage) -> Option<(u64, u64)> {
    parse_event_id(event.event_id.as_deref()?)
}

fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (index, request) = id.split_once('/')?;
    Some((index.parse().ok()?, request.parse().ok()?))
}

fn is_answer(event: &ServerSseMessage) -> bool {
    matches!(
        event.message.as_deref(),
        Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
    )
}

impl SessionManager for Resumable {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.kept).forget_session(id);
        self.carried.forget(id);
        let closed = self.inner.close_session(id).await;
        crate::memory::give_back();
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let events = self.inner.create_stream(id, message).await?;
        Ok(self.read_on(id, events))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        if let Some((index, request)) = parse_event_id(&last_event_id) {
            let key = (id.clone(), request);
            let (kept, past) = {
                let mut kept = lock(&self.kept);
                let events = kept.replay(&key, index);
                let past = events.is_none() && kept.past_what_was_sent(&key, index);
                (events, past)
            };
            // Nothing to resume: an empty stream that ends, as rmcp answers a resume it cannot make
            // (an error would have an EventSource retry the same id for ever), without its warning a
            // request (anyone with a seat's token could fill the log).
            let events = kept.or_else(|| past.then(Vec::new));
            if let Some(events) = events {
                if past {
                    tracing::debug!(last_event_id, "a resume names no event to resume from");
                }
                let (tx, rx) = tokio::sync::mpsc::channel(events.len().max(1));
                for event in events {
                    let _ = tx.try_send(event);
                }
                return Ok(Passed(rx).left_stream());
            }
            // rmcp replays a request's stream from the event named on, that one too: a client resuming
            // from the answer got it again (the TS SDK, counting an error as no answer, resumed for ever).
            let after = format!("{}/{request}", index.saturating_add(1));
            let events = self.inner.resume(id, after).await?;
            return Ok(self.read_on(id, events).left_stream());
        }
        let events = self.inner.resume(id, last_event_id).await?;
        Ok(events.right_stream())
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(request: u64) -> VecDeque<ServerSseMessage> {
        VecDeque::from([ServerSseMessage::priming(
            format!("1/{request}"),
            Duration::from_secs(3),
        )])
    }

    #[test]
    fn kept_requests_are_bounded_by_session_in_all_and_by_bytes() {
        let mut kept = Kept::default();
        let a: SessionId = Arc::from("a");
        let b: SessionId = Arc::from("b");
        let seat: Arc<str> = Arc::from("w1");
        for r in 0..40 {
            kept.keep((a.clone(), r), seat.clone(), events(r), 100);
        }
        // Its latest 16, the oldest gone.
        assert!(kept.replay(&(a.clone(), 23), 0).is_none());
        assert!(kept.replay(&(a.clone(), 24), 0).is_some());
        assert_eq!(kept.by_session[&a].len(), KEPT_PER_SESSION);
        assert_eq!(kept.bytes, 100 * KEPT_PER_SESSION);
        // Past the bytes of all, the oldest of any session go first.
        kept.keep((b.clone(), 1), seat.clone(), events(1), KEPT_BYTES - 100);
        assert!(kept.bytes <= KEPT_BYTES);
        assert!(kept.replay(&(b.clone(), 1), 0).is_some());
        assert!(kept.replay(&(a.clone(), 24), 0).is_none());
        // More than all may hold: not kept.
        kept.keep((b.clone(), 2), seat.clone(), events(2), KEPT_BYTES + 1);
        assert!(kept.replay(&(b.clone(), 2), 0).is_none());
        kept.forget_session(&b);
        assert!(kept.replay(&(b, 1), 0).is_none());
        let left: usize = kept.streams.values().map(|s| s.bytes).sum();
        assert_eq!(kept.bytes, left);
    }

    #[test]
    fn past_the_bounds_the_seat_keeping_the_most_gives_up_its_oldest() {
        let mut kept = Kept::default();
        let (a, b): (SessionId, SessionId) = (Arc::from("a"), Arc::from("b"));
        kept.keep((a.clone(), 0), Arc::from("w1"), events(0), 1000);
        for r in 0..40 {
            let session: SessionId = Arc::from(format!("b{}", r / 10));
            kept.keep((session, r), Arc::from("lead"), events(r), KEPT_BYTES / 20);
        }
        assert!(kept.replay(&(a, 0), 0).is_some());
        assert!(kept.replay(&(b, 0), 0).is_none());
        assert!(kept.bytes <= KEPT_BYTES);
        assert_eq!(kept.by_seat[&Arc::from("w1")].bytes, 1000);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn kept_requests_go_when_their_minute_passes_with_nobody_resuming() {
        let kept = Arc::new(Mutex::new(Kept::default()));
        let a: SessionId = Arc::from("a");
        assert!(lock(&kept).keep((a.clone(), 0), Arc::from("w1"), events(0), 100));
        let sweeping = tokio::spawn(sweep(kept.clone()));
        tokio::time::sleep(KEPT_FOR / 2).await;
        assert!(!lock(&kept).keep((a.clone(), 1), Arc::from("w1"), events(1), 100));
        tokio::time::sleep(KEPT_FOR / 2 + Duration::from_secs(1)).await;
        assert_eq!(lock(&kept).streams.len(), 1);
        tokio::time::sleep(KEPT_FOR / 2).await;
        assert!(lock(&kept).streams.is_empty());
        assert_eq!(lock(&kept).bytes, 0);
        sweeping.await.unwrap();
        assert!(!lock(&kept).sweeping);
    }

    #[test]
    fn a_resume_past_the_last_event_sent_is_told_apart() {
        let mut kept = Kept::default();
        let key: Key = (Arc::from("a"), 3);
        assert!(kept.past_what_was_sent(&key, 0));
        let reader = kept.next_reader();
        kept.sent(key.clone(), reader, 0);
        kept.sent(key.clone(), reader, 1);
        assert!(!kept.past_what_was_sent(&key, 1));
        assert!(kept.past_what_was_sent(&key, 2));
        // A resume's reader takes the request over; the first one, draining what it had, and its end
        // leave it running.
        let resumed = kept.next_reader();
        kept.sent(key.clone(), resumed, 2);
        kept.sent(key.clone(), reader, 1);
        kept.ended(&key, reader);
        assert!(!kept.past_what_was_sent(&key, 2));
        assert!(kept.past_what_was_sent(&key, 3));
        assert!(kept.running.contains_key(&key.0));
        kept.ended(&key, resumed);
        assert!(kept.past_what_was_sent(&key, 0));
        assert!(kept.running.is_empty());
    }
}
