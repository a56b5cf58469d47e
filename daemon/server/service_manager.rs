//! Telling the service manager how the daemon is (systemd's sd_notify protocol, through the sd-notify
//! crate): ready once the socket is bound and the first generation loaded, reloading around a restart,
//! stopping on shutdown, and a watchdog ping while the daemon's own loop runs. Without NOTIFY_SOCKET
//! (a terminal, launchd) every call here does nothing.

use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "the service manager could not be told the daemon's state");
    }
}

/// How long each "extend the start" (or the stop) asks for, and how often it is asked again.
const EXTEND_BY: Duration = Duration::from_secs(30);
const EXTEND_EVERY: Duration = Duration::from_secs(10);

/// Asks the service manager for more time to start until the returned token is cancelled: reading
/// plugins/ may take an import timeout or more, past systemd's 90 s if several files block (see
/// `host::import`), and a start that is killed for taking long only starts again.
pub fn extend_start() -> CancellationToken {
    extend("reading plugins/")
}

/// Asks for more time while `status` lasts, until the token is cancelled or the daemon's loop ends (a
/// stuck one stops asking, and is ended at the manager's timeout).
fn extend(status: &'static str) -> CancellationToken {
    let done = CancellationToken::new();
    let until = done.clone();
    tokio::spawn(async move {
        let usec = u32::try_from(EXTEND_BY.as_micros()).unwrap_or(u32::MAX);
        loop {
            send(&[
                NotifyState::ExtendTimeoutUsec(usec),
                NotifyState::Status(status),
            ]);
            tokio::select! {
                _ = tokio::time::sleep(EXTEND_EVERY) => {}
                _ = until.cancelled() => return,
            }
        }
    });
    done
}

pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

pub fn reloading() {
    // systemd 253 and newer want the monotonic time with RELOADING=1, or they fail the reload.
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// Stopping, and more time asked for while the calls have their `grace` (and a minute more for the rest
/// of the stop): the unit's TimeoutStopSec (30 s) would otherwise kill calls that shutdownGraceSeconds
/// lets run longer.
pub fn stopping(grace: Duration) {
    send(&[NotifyState::Stopping]);
    let asking = extend("stopping: finishing the calls in flight (shutdownGraceSeconds)");
    tokio::spawn(async move {
        tokio::time::sleep(grace.saturating_add(Duration::from_secs(60))).await;
        asking.cancel();
    });
}

/// Pings the watchdog at half the interval systemd asked for, until `closing`. The task runs on the
/// daemon's own (single-threaded) runtime, so a stuck daemon stops pinging and systemd restarts it.
pub fn spawn_watchdog(tasks: &TaskTracker, closing: CancellationToken) {
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return;
    };
    let every = (interval / 2).max(Duration::from_millis(100));
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = tick.tick() => send(&[NotifyState::Watchdog]),
                _ = closing.cancelled() => return,
            }
        }
    });
}
