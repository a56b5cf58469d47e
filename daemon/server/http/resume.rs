//! A 2025-* session's answer outlives the connection it was meant for: rmcp's session manager, wrapped.
//!
//! rmcp keeps a request's SSE events for a client that comes back with `Last-Event-ID`, but drops them the
//! moment it sends the answer (`tx_router.remove` on the response): a client whose connection broke while
//! its call ran, and that resumes (as the TS SDK does, after the `retry` rmcp itself advertises) once the
//! call is done, got an empty stream and never the answer. Here each request's stream is read by a task
//! of its own, which passes the events on and keeps an answered request's events for `KEPT_FOR`, for a
//! resume to replay: kept whether or not they seemed delivered, since a connection that broke without a
//! word (a laptop asleep, a NAT forgetting it) takes what was written to it with it unnoticed. Bounded
//! per session, in all, and in bytes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
}

impl Resumable {
    pub fn new(inner: Arc<LocalSessionManager>, tasks: TaskTracker) -> Self {
        Self {
            inner,
            kept: Arc::default(),
            tasks,
        }
    }

    /// Reads `events` (one request's) in a task of its own, passing them on to the stream returned.
    fn read_on(
        &self,
        session: &SessionId,
        events: impl Stream<Item = ServerSseMessage> + Send + 'static,
    ) -> Passed {
        let (tx, rx) = tokio::sync::mpsc::channel(PASSED_ON);
        let kept = self.kept.clone();
        let inner = self.inner.clone();
        let session = session.clone();
        self.tasks.spawn(async move {
            let mut events = std::pin::pin!(events);
            let mut to = Some(tx);
            let mut request = None;
            let mut seen: VecDeque<ServerSseMessage> = VecDeque::new();
            let mut answered = false;
            while let Some(event) = events.next().await {
                request = request.or_else(|| request_of(&event));
                answered |= is_answer(&event);
                if seen.len() == MAX_EVENTS {
                    seen.pop_front();
                }
                seen.push_back(event.clone());
                if let Some(tx) = &to
                    && tx.send(event).await.is_err()
                {
                    to = None;
                }
            }
            // A stream that ended unanswered (cancelled, or handed by rmcp to a resume, whose own reader
            // keeps what comes) is not kept; nor is one of a session closed meanwhile.
            let Some(request) = request.filter(|_| answered) else {
                return;
            };
            if !inner.has_session(&session).await.unwrap_or(false) {
                return;
            }
            let bytes = seen.iter().map(bytes_of).sum();
            lock(&kept).keep((session, request), seen, bytes);
        });
        Passed(rx)
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

/// The kept requests' events. Every step is O(1) but for an occasional compaction: a request is kept
/// for each answer an HTTP session gets.
#[derive(Default)]
struct Kept {
    streams: HashMap<(SessionId, u64), (VecDeque<ServerSseMessage>, usize)>,
    /// Oldest first, when each was kept; a key whose request went since (its session's cap, its
    /// session's end) stays here until it is reached or the queue is compacted.
    order: VecDeque<((SessionId, u64), Instant)>,
    /// Each session's kept requests, oldest first.
    by_session: HashMap<SessionId, VecDeque<u64>>,
    bytes: usize,
}

impl Kept {
    fn keep(&mut self, key: (SessionId, u64), events: VecDeque<ServerSseMessage>, bytes: usize) {
        if bytes > KEPT_BYTES {
            return;
        }
        let (session, request) = key.clone();
        match self.streams.insert(key.clone(), (events, bytes)) {
            Some((_, old)) => self.bytes -= old,
            None => {
                self.by_session
                    .entry(session.clone())
                    .or_default()
                    .push_back(request);
                self.order.push_back((key, Instant::now()));
            }
        }
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
            match self.order.pop_front() {
                Some((key, _)) => self.forget(&key),
                None => break,
            }
        }
        if self.order.len() > 4 * self.streams.len() + 1024 {
            let streams = &self.streams;
            self.order.retain(|(k, _)| streams.contains_key(k));
        }
    }

    /// Drops a request's events (its session's list is the caller's to mend).
    fn drop_stream(&mut self, key: &(SessionId, u64)) {
        if let Some((_, bytes)) = self.streams.remove(key) {
            self.bytes -= bytes;
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
            .is_some_and(|(_, at)| at.elapsed() > KEPT_FOR)
        {
            if let Some((key, _)) = self.order.pop_front() {
                self.forget(&key);
            }
        }
    }

    /// A request's kept events from `index` on (that one too, as rmcp replays).
    fn replay(&mut self, key: &(SessionId, u64), index: u64) -> Option<Vec<ServerSseMessage>> {
        self.expire();
        let (events, _) = self.streams.get(key)?;
        Some(
            events
                .iter()
                .filter(|e| event_index(e).is_some_and(|(i, _)| i >= index))
                .cloned()
                .collect(),
        )
    }

    fn forget_session(&mut self, session: &SessionId) {
        for request in self.by_session.remove(session).unwrap_or_default() {
            self.drop_stream(&(session.clone(), request));
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

fn request_of(event: &ServerSseMessage) -> Option<u64> {
    event_index(event).map(|(_, request)| request)
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
        self.inner.close_session(id).await
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
            let kept = lock(&self.kept).replay(&(id.clone(), request), index);
            if let Some(events) = kept {
                let (tx, rx) = tokio::sync::mpsc::channel(events.len().max(1));
                for event in events {
                    let _ = tx.try_send(event);
                }
                return Ok(Passed(rx).left_stream());
            }
            let events = self.inner.resume(id, last_event_id).await?;
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
        for r in 0..40 {
            kept.keep((a.clone(), r), events(r), 100);
        }
        // Its latest 16, the oldest gone.
        assert!(kept.replay(&(a.clone(), 23), 0).is_none());
        assert!(kept.replay(&(a.clone(), 24), 0).is_some());
        assert_eq!(kept.by_session[&a].len(), KEPT_PER_SESSION);
        assert_eq!(kept.bytes, 100 * KEPT_PER_SESSION);
        // Past the bytes of all, the oldest of any session go first.
        kept.keep((b.clone(), 1), events(1), KEPT_BYTES - 100);
        assert!(kept.bytes <= KEPT_BYTES);
        assert!(kept.replay(&(b.clone(), 1), 0).is_some());
        assert!(kept.replay(&(a.clone(), 24), 0).is_none());
        // More than all may hold: not kept.
        kept.keep((b.clone(), 2), events(2), KEPT_BYTES + 1);
        assert!(kept.replay(&(b.clone(), 2), 0).is_none());
        kept.forget_session(&b);
        assert!(kept.replay(&(b, 1), 0).is_none());
        let left: usize = kept.streams.values().map(|(_, n)| n).sum();
        assert_eq!(kept.bytes, left);
    }
}
