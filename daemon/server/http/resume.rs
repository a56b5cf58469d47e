//! A 2025-* session's answer outlives the connection it was meant for: rmcp's session manager, wrapped.
//!
//! rmcp keeps a request's SSE events for a client that comes back with `Last-Event-ID`, but drops them the
//! moment it sends the answer (`tx_router.remove` on the response): a client whose connection broke while
//! its call ran, and that resumes (as the TS SDK does, after the `retry` rmcp itself advertises) once the
//! call is done, got an empty stream and never the answer. Here each request's stream is read by a task
//! of its own, which passes the events on while the client reads and keeps those it could not deliver for
//! `KEPT_FOR`, for a resume to replay.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sync::lock;
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

/// How long a request's undelivered events wait for their client to resume.
const KEPT_FOR: Duration = Duration::from_secs(60);
/// Requests whose events are kept at once, over all sessions; the oldest goes first past it.
const MAX_KEPT: usize = 256;
/// Events kept of one request (its progress, then its answer); the oldest go first past it.
const MAX_EVENTS: usize = 64;
/// Events passed on to a reading client before the reader waits for it.
const PASSED_ON: usize = 16;

pub struct Resumable {
    pub inner: Arc<LocalSessionManager>,
    kept: Arc<Mutex<Kept>>,
}

impl Resumable {
    pub fn new(inner: Arc<LocalSessionManager>) -> Self {
        Self {
            inner,
            kept: Arc::default(),
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
        let session = session.clone();
        tokio::spawn(async move {
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
            // Delivered to a client still reading, the answer needs no keeping. Otherwise (the client
            // went, or rmcp handed the stream to a resume before the answer) what came is kept.
            if let (Some(request), true) = (request, to.is_none() || !answered) {
                lock(&kept).keep((session, request), seen, answered);
            }
        });
        Passed(rx)
    }
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

#[derive(Default)]
struct Kept {
    streams: HashMap<(SessionId, u64), KeptStream>,
    order: VecDeque<((SessionId, u64), Instant)>,
}

struct KeptStream {
    events: VecDeque<ServerSseMessage>,
    /// The answer is among them: the request is over, and a resume replays them and ends.
    answered: bool,
}

impl Kept {
    fn keep(&mut self, key: (SessionId, u64), events: VecDeque<ServerSseMessage>, answered: bool) {
        self.expire();
        while self.streams.len() >= MAX_KEPT {
            match self.order.pop_front() {
                Some((old, _)) => {
                    self.streams.remove(&old);
                }
                None => break,
            }
        }
        match self.streams.get_mut(&key) {
            // What rmcp handed on to a resume goes on from what was kept before it.
            Some(stream) => {
                for event in events {
                    if !stream.events.iter().any(|e| e.event_id == event.event_id) {
                        if stream.events.len() == MAX_EVENTS {
                            stream.events.pop_front();
                        }
                        stream.events.push_back(event);
                    }
                }
                stream.answered |= answered;
            }
            None => {
                self.streams
                    .insert(key.clone(), KeptStream { events, answered });
            }
        }
        self.order.retain(|(k, _)| *k != key);
        self.order.push_back((key, Instant::now()));
    }

    fn expire(&mut self) {
        while let Some((key, at)) = self.order.front()
            && at.elapsed() > KEPT_FOR
        {
            self.streams.remove(key);
            self.order.pop_front();
        }
    }

    /// A request's kept events from `index` on (that one too, as rmcp replays), once it was answered.
    fn replay(&mut self, key: &(SessionId, u64), index: u64) -> Option<Vec<ServerSseMessage>> {
        self.expire();
        let stream = self.streams.get(key).filter(|s| s.answered)?;
        Some(
            stream
                .events
                .iter()
                .filter(|e| event_index(e).is_some_and(|(i, _)| i >= index))
                .cloned()
                .collect(),
        )
    }

    fn forget_session(&mut self, session: &SessionId) {
        self.streams.retain(|(s, _), _| s != session);
        self.order.retain(|((s, _), _)| s != session);
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
