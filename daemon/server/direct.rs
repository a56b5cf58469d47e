//! Plain `tools/call`s on a socket session, answered without rmcp's per-request machinery.
//!
//! rmcp gives every request two cancellation tokens, a map entry, a task for the handler, a trip through a
//! channel back to its service loop and a second task to send the answer. For the call a session makes
//! most (a `tools/call` with no `_meta`, once the session is initialised) that is most of what the daemon
//! does besides the call itself: the session transport hands such a call here instead, and its answer,
//! made by the same `SeatService::answer_call`, goes straight into the session's outbox. Everything rmcp
//! promised still holds: a `notifications/cancelled` stops the call and it is not answered, the end of the
//! session cancels what still runs (at once when the session is ended or its client died; when the client
//! closed only its side, the transport waits for its calls, each bounded by its deadline, and this stops
//! whatever is left 5 s after that), and every other message still takes rmcp's path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{JsonObject, NumberOrString, ServerJsonRpcMessage};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::session::SeatService;
use super::transport::Answers;
use crate::answer::Outcome;
use crate::legs::Step;
use crate::sync::lock;

/// How long calls may run on once the transport is done with a session, as rmcp gives its own.
const WIND_DOWN: Duration = Duration::from_secs(5);

pub struct Direct {
    service: SeatService,
    /// The session's own token: when the session is ended (its seat removed), its calls stop at once.
    session: CancellationToken,
    /// The calls running: id → (which call it is, how to stop it). An id a cancelled call left may be
    /// taken again while that call winds down, so each call knows itself by its number.
    running: Arc<Mutex<HashMap<NumberOrString, (u64, CancellationToken)>>>,
    next: u64,
    tasks: TaskTracker,
}

impl Direct {
    pub fn new(service: SeatService, session: CancellationToken) -> Self {
        Self {
            service,
            session,
            running: Arc::default(),
            next: 0,
            tasks: TaskTracker::new(),
        }
    }

    /// Runs the call in a task of its own; its answer goes to `answers` unless it is cancelled first.
    pub fn take(
        &mut self,
        id: NumberOrString,
        name: String,
        args: JsonObject,
        answers: &Arc<Answers>,
    ) {
        crate::legs::mark(Step::CallTaken);
        self.next += 1;
        let number = self.next;
        let ct = self.session.child_token();
        lock(&self.running).insert(id.clone(), (number, ct.clone()));
        let service = self.service.clone();
        let running = self.running.clone();
        let answers = answers.clone();
        self.tasks.spawn(async move {
            crate::legs::mark(Step::CallStarted);
            let outcome = service.call_outcome(&name, args, &ct, None).await;
            crate::legs::mark(Step::Answered);
            let mine = {
                let mut running = lock(&running);
                match running.get(&id) {
                    Some((n, _)) if *n == number => running.remove(&id).is_some(),
                    _ => false,
                }
            };
            // Cancelled (by the client, or at the end of the session): no answer, and the id may already be
            // another call's.
            if !mine {
                return;
            }
            match outcome {
                Ok(outcome) => {
                    let line = answer_line(&id, &outcome, &name);
                    answers.answer_line(&id, line);
                }
                Err(error) => {
                    tracing::warn!(%id, ?error, "response error");
                    answers.answer(&id, &ServerJsonRpcMessage::error(error, Some(id.clone())));
                }
            }
            crate::legs::mark(Step::AnswerQueued);
        });
    }

    /// Stops the call with this id, if it is one of these; true when it was.
    pub fn cancel(&self, id: &NumberOrString) -> bool {
        match lock(&self.running).remove(id) {
            Some((_, ct)) => {
                ct.cancel();
                true
            }
            None => false,
        }
    }

    /// Gives the calls still running until a few seconds after `since` (when the client closed, or now) to
    /// answer, then stops them and waits for them to end.
    pub async fn wind_down(&self, since: Option<std::time::Instant>) {
        self.tasks.close();
        let since = since.unwrap_or_else(std::time::Instant::now);
        if tokio::time::timeout_at((since + WIND_DOWN).into(), self.tasks.wait())
            .await
            .is_err()
        {
            self.stop_all();
            self.tasks.wait().await;
        }
    }

    /// Ends the session (its client died): its calls stop at once, rmcp's handlers with them.
    pub fn end_session(&self) {
        self.session.cancel();
    }

    fn stop_all(&self) {
        for (_, (_, ct)) in lock(&self.running).drain() {
            ct.cancel();
        }
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The answer's line, written as rmcp writes a `CallToolResult` of one text block for a session whose
/// revision is before 2026-07-28 (the only kind that comes here: it began with `initialize`), without
/// building rmcp's message and walking its serde for every call.
fn answer_line(id: &NumberOrString, outcome: &Outcome, name: &str) -> Vec<u8> {
    let cancelled;
    let (text, is_error) = match outcome {
        Outcome::Text(text) => (text.as_str(), false),
        Outcome::Refused(why) => (why.as_str(), true),
        Outcome::Cancelled => {
            cancelled = crate::answer::cancelled(
                name,
                &crate::runtime_log::timestamp(std::time::SystemTime::now()),
            );
            (cancelled.as_str(), true)
        }
    };
    let mut line = Vec::with_capacity(text.len() + 96);
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // Writing into memory cannot fail; an id is a number or a string, as rmcp writes it.
    let _ = serde_json::to_writer(&mut line, id);
    line.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    write_json_str(&mut line, text);
    line.extend_from_slice(if is_error {
        br#"}],"isError":true}}"#.as_slice()
    } else {
        br#"}],"isError":false}}"#.as_slice()
    });
    line
}

/// A string as JSON, escaped as serde_json escapes it (writing into memory cannot fail).
fn write_json_str(line: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *line, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolResult, ContentBlock, ServerResult};

    /// What rmcp's own path writes for the same outcome.
    fn rmcp_line(id: &NumberOrString, outcome: &Outcome) -> Vec<u8> {
        let text = match outcome {
            Outcome::Text(t) => CallToolResult::success(vec![ContentBlock::text(t.clone())]),
            Outcome::Refused(w) => CallToolResult::error(vec![ContentBlock::text(w.clone())]),
            Outcome::Cancelled => unreachable!("its text carries the time"),
        };
        let mut result = ServerResult::CallToolResult(text);
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
        serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone())).unwrap()
    }

    #[test]
    fn the_answer_line_is_what_rmcp_writes() {
        let ids = [
            NumberOrString::Number(7),
            NumberOrString::Number(-9_223_372_036_854_775_808),
            NumberOrString::String("a\"b\\c\u{1}é😀".into()),
            NumberOrString::String(String::new().into()),
        ];
        let outcomes = [
            Outcome::Text("echo: 1".into()),
            Outcome::Text("line\nnext \"quoted\" \u{7f}\u{0}\t\u{2028} ünï 😀".into()),
            Outcome::Text(String::new()),
            Outcome::Refused("plugins/x.mjs threw: boom".into()),
        ];
        for id in &ids {
            for outcome in &outcomes {
                let ours = answer_line(id, outcome, "echo");
                assert_eq!(
                    String::from_utf8(ours).unwrap(),
                    String::from_utf8(rmcp_line(id, outcome)).unwrap(),
                    "{id:?} {outcome:?}"
                );
            }
        }
    }

    #[test]
    fn a_cancelled_outcome_is_answered_as_an_error_naming_the_tool() {
        let line = answer_line(&NumberOrString::Number(3), &Outcome::Cancelled, "slow");
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["result"]["isError"], true);
        assert!(
            v["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("slow")
        );
    }
}
