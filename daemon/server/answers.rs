//! The way out of one session: its answers and notifications, queued in order on its outbox, and the ids
//! of its requests not yet answered (each answered once). Shared by the transport, the calls it runs
//! itself and their progress.

use std::sync::{Arc, Mutex};

use rmcp::model::{NumberOrString, ServerJsonRpcMessage};

use super::params;
use super::sessions::SeatLoad;
use super::traces::RequestSpan;
use crate::lines::Outbox;
use crate::sync::lock;

/// What the transport and the calls it runs itself share: the way out, and the requests not yet answered.
pub struct Answers {
    pub(super) out: Mutex<Option<Outbox>>,
    /// The ids of the requests read and not yet answered.
    pub(super) in_flight: Mutex<crate::maps::Set<NumberOrString>>,
    /// Woken when an answer goes out, for a receive waiting on MAX_IN_FLIGHT.
    pub(super) answered: tokio::sync::Notify,
    /// Past this many bytes of unsent lines, the session's requests wait, and notifications are dropped.
    pub(super) limit: usize,
    /// The spans of requests other than calls, when traces are on: ended as each is answered.
    pub(super) spans: Mutex<crate::maps::Map<NumberOrString, RequestSpan>>,
    /// What the session's seat has in flight in all its sessions, this one's among them.
    pub(super) seat: Arc<SeatLoad>,
}

impl Drop for Answers {
    fn drop(&mut self) {
        // The session is over: what it left unanswered is no longer in flight for its seat.
        self.seat.sub(lock(&self.in_flight).len());
    }
}

impl Answers {
    /// Notes request `id` as in flight; `false` when that id is in flight already.
    pub(super) fn take_id(&self, id: &NumberOrString) -> bool {
        let taken = lock(&self.in_flight).insert(id.clone());
        if taken {
            self.seat.add();
        }
        taken
    }

    /// Frees request `id`; `false` when it was not in flight.
    pub(super) fn free_id(&self, id: &NumberOrString) -> bool {
        let freed = lock(&self.in_flight).remove(id);
        if freed {
            self.seat.sub(1);
        }
        freed
    }

    pub(super) fn queue_line(&self, mut line: Vec<u8>) -> Result<(), std::io::Error> {
        line.push(b'\n');
        lock(&self.out)
            .as_ref()
            .ok_or(())
            .and_then(|o| o.send(line).map_err(|_| ()))
            .map_err(|()| {
                std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the session's connection is closed",
                )
            })
    }

    /// Queues the answer line made for request `id` if it is still in flight, freeing the id.
    pub fn answer_line(&self, id: &NumberOrString, line: Vec<u8>) {
        if !self.free_id(id) {
            return;
        }
        self.end_span(id, || {
            memchr::memmem::find(&line, b"\"error\":").map(|_| "answered with an error".to_string())
        });
        self.answered.notify_one();
        let _ = self.queue_line(line);
    }

    /// Queues a notification (a progress report) unless the session has left more than it may unread:
    /// then it is dropped, as a later one supersedes it.
    pub fn notify(&self, line: Vec<u8>) {
        let full = lock(&self.out)
            .as_ref()
            .is_none_or(|o| o.queued() > self.limit);
        if !full {
            let _ = self.queue_line(line);
        }
    }

    /// Queues a message of rmcp's; an answer frees its request's id.
    pub fn queue(&self, msg: &ServerJsonRpcMessage) -> Result<(), std::io::Error> {
        if let Some(said) = method_not_found_in_words(msg) {
            return self.queue(&said);
        }
        let id = match msg {
            ServerJsonRpcMessage::Response(r) => Some(&r.id),
            ServerJsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        if let Some(id) = id
            && self.free_id(id)
        {
            self.answered.notify_one();
            self.end_span(id, || match msg {
                ServerJsonRpcMessage::Error(e) => Some(e.error.message.to_string()),
                _ => None,
            });
        }
        self.queue_line(serde_json::to_vec(msg).map_err(std::io::Error::other)?)
    }

    /// Ends the span of the request answered under `id`, if it has one, failed when `failure` says so.
    fn end_span(&self, id: &NumberOrString, failure: impl FnOnce() -> Option<String>) {
        let span = {
            let mut spans = lock(&self.spans);
            if spans.is_empty() {
                return;
            }
            spans.remove(id)
        };
        if let Some(mut span) = span
            && let Some(why) = failure()
        {
            span.failed(&why);
        }
    }

    pub(super) fn outbox(&self) -> Option<Outbox> {
        lock(&self.out).clone()
    }
}

/// rmcp answers a method it does not serve with `-32601` and the bare method name as the message: said as
/// a sentence instead, which names what the server does serve.
fn method_not_found_in_words(msg: &ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
    let ServerJsonRpcMessage::Error(e) = msg else {
        return None;
    };
    // rmcp's own is the method's bare name (which may hold spaces); this server's are worded already,
    // and short (a method named as they begin is still clipped).
    if e.error.code != rmcp::model::ErrorCode::METHOD_NOT_FOUND
        || e.error.message.starts_with("Method not found: ") && e.error.message.len() <= 2048
    {
        return None;
    }
    let mut said = e.clone();
    said.error.message = params::method_not_found_words(&e.error.message).into();
    Some(ServerJsonRpcMessage::Error(said))
}
