//! A plugin's progress reports on their way to the caller: `notifications/progress` for the token the
//! call carried, at most one every PACE (the latest report waiting wins, so a plugin in a loop cannot
//! flood a session), never once the call has its answer, and never past what a session may leave
//! unread (`sessionQueueBytes`): a report that would go past it is dropped, as a later one would
//! supersede it. Never an answer is dropped.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    Notification, ProgressNotificationParam, ProgressToken, ServerJsonRpcMessage,
    ServerNotification,
};
use tokio::time::Instant;

use super::answers::Answers;
use crate::host::link::Progressed;
use crate::host::protocol::Progress;
use crate::sync::lock;

/// At most ten reports a second reach one call's caller.
const PACE: Duration = Duration::from_millis(100);
/// The longest progress message passed on, in characters.
const MAX_MESSAGE_CHARS: usize = 1000;

/// One call's reports, paced, on their way out.
pub struct Relay {
    token: ProgressToken,
    to: To,
    state: Mutex<State>,
}

/// Where the notifications go.
pub enum To {
    /// A socket session's outbox, as lines.
    Lines(Arc<Answers>),
    /// The task answering an HTTP request, which passes them to rmcp in order, before the answer.
    Channel(tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>),
}

#[derive(Default)]
struct State {
    last_sent: Option<Instant>,
    /// The latest report that came within PACE of the last one sent.
    waiting: Option<Progress>,
    /// A timer will send `waiting` at the end of the pace.
    armed: bool,
    sent: u32,
    last_value: Option<f64>,
    /// The call has its answer: nothing more goes out.
    closed: bool,
}

impl Relay {
    pub fn new(token: ProgressToken, to: To) -> Arc<Self> {
        Arc::new(Self {
            token,
            to,
            state: Mutex::default(),
        })
    }

    /// The call is gone without an answer to follow: no report goes out after this.
    pub fn close(&self) {
        lock(&self.state).closed = true;
    }

    /// The call has ended: with `answering`, its answer goes out next, and the report the pace held back
    /// goes first (a progress bar reaches the end the plugin reported); none goes out after.
    pub fn ends(&self, answering: bool) {
        let mut state = lock(&self.state);
        if let Some(report) = state.waiting.take()
            && answering
            && !state.closed
        {
            self.send(&mut state, &report);
        }
        state.closed = true;
    }

    /// Sends `report` now (the pace allows it), under the lock that orders it with the others.
    fn send(&self, state: &mut State, report: &Progress) {
        state.sent += 1;
        let mut note = notification(&self.token, report, state.sent);
        mend(&mut note, state.last_value);
        state.last_value = Some(note.progress);
        state.last_sent = Some(Instant::now());
        match &self.to {
            To::Lines(answers) => {
                let msg = ServerJsonRpcMessage::notification(
                    ServerNotification::ProgressNotification(Notification::new(note)),
                );
                if let Ok(line) = serde_json::to_vec(&msg) {
                    answers.notify(line);
                }
            }
            To::Channel(tx) => {
                let _ = tx.send(note);
            }
        }
    }
}

impl Progressed for Relay {
    fn report(self: Arc<Self>, report: Progress) {
        let mut state = lock(&self.state);
        if state.closed {
            return;
        }
        let due = state.last_sent.map(|at| at + PACE);
        if due.is_none_or(|due| due <= Instant::now()) {
            // A report waiting for a timer that has fired but not yet run is older than this one.
            state.waiting = None;
            self.send(&mut state, &report);
            return;
        }
        state.waiting = Some(report);
        if state.armed {
            return;
        }
        state.armed = true;
        let relay = self.clone();
        let mut at = due.unwrap_or_else(Instant::now);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep_until(at).await;
                let mut state = lock(&relay.state);
                // A report sent at once meanwhile moved the pace on: this one waits for it.
                if let Some(due) = state.last_sent.map(|sent| sent + PACE)
                    && due > Instant::now()
                    && state.waiting.is_some()
                    && !state.closed
                {
                    at = due;
                    continue;
                }
                state.armed = false;
                if let Some(report) = state.waiting.take()
                    && !state.closed
                {
                    relay.send(&mut state, &report);
                }
                return;
            }
        });
    }
}

/// MCP asks that progress grow with every notification: a report that does not is sent just above the
/// last one, so a client that checks never sees it fall. Past its total (so mended, or so reported), the
/// total goes: a client would show more than all of it done.
fn mend(note: &mut ProgressNotificationParam, last: Option<f64>) {
    if let Some(last) = last
        && note.progress <= last
    {
        note.progress = last + (last.abs() * 1e-9).max(1e-9);
    }
    if note.total.is_some_and(|total| note.progress > total) {
        note.total = None;
    }
}

/// The notification for one report: the plugin's own numbers, or the report's count when it gave none.
fn notification(token: &ProgressToken, report: &Progress, count: u32) -> ProgressNotificationParam {
    let mut p =
        ProgressNotificationParam::new(token.clone(), report.progress.unwrap_or(f64::from(count)));
    if let Some(total) = report.total {
        p = p.with_total(total);
    }
    if let Some(message) = &report.message {
        // Shown to a person on one line (a spinner, a status bar): escaped, as a description is.
        let clipped: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
        p = p.with_message(crate::names::escape_controls(&clipped, false).into_owned());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report that comes when the pace allows it, while the timer for a waiting one has fired but
    /// not yet run, goes out and the waiting (older) one does not follow it.
    #[test]
    fn a_report_sent_at_once_supersedes_the_one_waiting() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
            let relay = Relay::new(token, To::Channel(tx));
            let report = |message: &str| Progress {
                id: 1,
                key: 1,
                message: Some(message.into()),
                progress: None,
                total: None,
            };
            relay.clone().report(report("first"));
            relay.clone().report(report("older"));
            // Blocking: the timer's task cannot run on this thread until the next await.
            std::thread::sleep(PACE * 2);
            relay.clone().report(report("newer"));
            tokio::time::sleep(PACE * 2).await;
            relay.close();
            let mut sent = Vec::new();
            while let Ok(note) = rx.try_recv() {
                sent.push(note.message.unwrap_or_default());
            }
            assert_eq!(sent, ["first", "newer"]);
        });
    }

    #[test]
    fn progress_grows_and_never_passes_its_total() {
        let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
        let note = |progress: f64, total: f64| {
            ProgressNotificationParam::new(token.clone(), progress).with_total(total)
        };
        // Counting down from 10 of 10: sent just above 10, with no total.
        let mut n = note(9.0, 10.0);
        mend(&mut n, Some(10.0));
        assert!(n.progress > 10.0 && n.total.is_none(), "{n:?}");
        // Reported past its total.
        let mut n = note(50.0, 2.0);
        mend(&mut n, None);
        assert_eq!((n.progress, n.total), (50.0, None));
        // Within it, as reported.
        let mut n = note(3.0, 10.0);
        mend(&mut n, Some(2.0));
        assert_eq!((n.progress, n.total), (3.0, Some(10.0)));
        // At it, kept.
        let mut n = note(10.0, 10.0);
        mend(&mut n, Some(9.0));
        assert_eq!((n.progress, n.total), (10.0, Some(10.0)));
    }
}
