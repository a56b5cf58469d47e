//! A plugin's progress reports on their way to the caller: `notifications/progress` for the token the
//! call carried, at most one every PACE (the latest report waiting wins, so a plugin in a loop cannot
//! flood a session), and never once the call has its answer.

use std::future::Future;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::host::protocol::Progress;

/// At most ten reports a second reach one call's caller.
const PACE: Duration = Duration::from_millis(100);
/// The longest progress message passed on, in characters.
const MAX_MESSAGE_CHARS: usize = 1000;

/// Runs `call` to its end, passing the plugin's progress reports (from `reports`) on to the caller meanwhile.
pub async fn relay<T>(
    call: impl Future<Output = T>,
    mut reports: watch::Receiver<Option<Progress>>,
    peer: &Peer<RoleServer>,
    token: ProgressToken,
) -> T {
    tokio::pin!(call);
    let mut last_sent: Option<Instant> = None;
    let mut sent = 0u32;
    // MCP asks that progress grow with every notification: a report that does not is sent just above
    // the last one, so a client that checks never sees it fall.
    let mut last_value = f64::NEG_INFINITY;
    loop {
        tokio::select! {
            biased;
            end = &mut call => return end,
            changed = reports.changed() => {
                if changed.is_err() {
                    // The host side is gone; only the answer is left to wait for.
                    return call.await;
                }
            }
        }
        if let Some(at) = last_sent {
            tokio::select! {
                biased;
                end = &mut call => return end,
                _ = tokio::time::sleep_until(at + PACE) => {}
            }
        }
        let Some(report) = reports.borrow_and_update().clone() else {
            continue;
        };
        sent += 1;
        let mut note = notification(&token, &report, sent);
        if note.progress <= last_value {
            note.progress = last_value + (last_value.abs() * 1e-9).max(1e-9);
        }
        last_value = note.progress;
        let _ = peer.notify_progress(note).await;
        last_sent = Some(Instant::now());
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
        p = p.with_message(message.chars().take(MAX_MESSAGE_CHARS).collect::<String>());
    }
    p
}
