//! The daemon stays awake for a moment before it sleeps, when its next event has been coming soon.
//!
//! Where an idle CPU halts at once (a VM with guest halt polling off, as `haltpoll guest_halt_poll_ns 0`;
//! a deep idle state), every wake-up of a sleeping process costs the waker and the woken tens of µs: a
//! plugin call one at a time wakes the daemon twice (the host's answer, the session's next request), and
//! the CPU it slept on has to come back first. Before the runtime sleeps in `epoll_wait`, this polls its
//! epoll for a while, yielding the CPU between polls to whatever else is runnable on it: a descriptor's
//! event that comes in that time finds the daemon awake, and whoever sent it wakes nobody. How long is
//! learnt as the kernel's own halt polling learns it (`cpuidle-haltpoll`): the window grows while the
//! daemon's sleeps are short and shrinks to nothing while they are long, so an idle daemon (a ping every
//! half second) or one waiting on slow plugins polls for nothing, and a busy one polls for at most
//! `OVAI_AWAKE_US` µs (100 unless set; 0: never) per sleep.
//!
//! A CPU shared with a process that runs for long (a build, a test run) is another matter: a yield hands
//! it a whole slice, milliseconds, and an event that comes meanwhile finds the daemon runnable but not
//! running, where a sleeping daemon would have been woken ahead of it. A yield that kept the daemon away
//! longer than twice the most it waits therefore ends waiting awake, for a number of sleeps that doubles
//! while it keeps happening. (Timers have no descriptor: one due during a wait fires at its end, late by
//! the window, or once in such a while by another process's slice.)

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::sync::lock;

/// The most the daemon waits awake unless `OVAI_AWAKE_US` says otherwise.
pub const DEFAULT: Duration = Duration::from_micros(100);
/// The most `OVAI_AWAKE_US` may ask for: past this, waiting awake is a core spent, not a wake-up saved.
const MOST_US: u64 = 10_000;

/// `OVAI_AWAKE_US` holds something other than a number of microseconds the daemon can use.
#[derive(Debug, PartialEq, Eq)]
pub struct BadAwake(pub String);

impl std::fmt::Display for BadAwake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OVAI_AWAKE_US is {:?}, not a whole number of microseconds from 0 to {MOST_US}; the daemon \
             waits awake for up to {} µs before each sleep (0 turns that off).",
            self.0,
            DEFAULT.as_micros()
        )
    }
}

/// The most to wait awake, from `OVAI_AWAKE_US`'s value.
pub fn most_from(value: Option<&str>) -> Result<Duration, BadAwake> {
    let Some(text) = value else {
        return Ok(DEFAULT);
    };
    match text.trim().parse::<u64>() {
        Ok(us) if us <= MOST_US => Ok(Duration::from_micros(us)),
        _ => Err(BadAwake(text.to_string())),
    }
}

/// The epolls the current runtime sleeps in: those that a descriptor just registered with it is in.
/// tokio does not name its own; where there is no epoll (or no /proc) there are none, and the daemon
/// sleeps as the runtime does. Called inside the runtime.
pub fn runtime_epolls() -> Vec<RawFd> {
    let Ok((probe, _other_end)) = tokio::net::UnixStream::pair() else {
        return Vec::new();
    };
    let fd = probe.as_raw_fd();
    epolls()
        .into_iter()
        .filter(|&epoll| watches(epoll, fd))
        .collect()
}

/// The epoll descriptors open in this process.
fn epolls() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.as_os_str() == "anon_inode:[eventpoll]")
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

/// Whether the epoll `epoll` has `fd` among its descriptors (`tfd:` lines of its fdinfo).
fn watches(epoll: RawFd, fd: RawFd) -> bool {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{epoll}")).is_ok_and(|info| {
        info.lines().any(|line| {
            line.strip_prefix("tfd:")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse::<RawFd>().ok())
                == Some(fd)
        })
    })
}

/// How a wait awake ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Woke {
    /// An event is ready: the runtime's `epoll_wait` returns at once.
    Event,
    /// None came in time: the runtime sleeps.
    Waited,
    /// A yield gave the CPU away for long: another process wants it, and the runtime sleeps.
    Crowded,
}

/// Polls the epolls until one has an event or `bound` has passed, yielding the CPU between polls; gives
/// up once one round of polling and yielding took longer than `crowded` (another process had the CPU).
pub fn wait(epolls: &[BorrowedFd<'_>], bound: Duration, crowded: Duration) -> Woke {
    let started = Instant::now();
    let mut fds: Vec<PollFd<'_>> = epolls
        .iter()
        .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
        .collect();
    let mut last = started;
    loop {
        // An error (a descriptor gone) ends the wait too: the runtime's own wait says what it is.
        if poll(&mut fds, PollTimeout::ZERO) != Ok(0) {
            return Woke::Event;
        }
        let now = Instant::now();
        // Kept away, by a yield or by the scheduler between two polls: someone else wants this CPU.
        if now - last > crowded {
            return Woke::Crowded;
        }
        if now - started >= bound {
            return Woke::Waited;
        }
        last = now;
        // Whatever else is runnable on this CPU runs first: waiting awake is for a CPU nobody else wants.
        // Spinning held it from the bridges and the plugin host when they had work (the log, 2026-12-04);
        // with nobody else runnable the yield returns at once.
        let _ = nix::sched::sched_yield();
    }
}

/// The window the daemon waits awake for, learnt from how long its sleeps turn out.
pub struct Awake {
    epolls: std::sync::OnceLock<Vec<RawFd>>,
    most: Duration,
    state: Mutex<Learnt>,
}

#[derive(Default)]
struct Learnt {
    window: Duration,
    /// When the daemon went to sleep after waiting awake for nothing (or not at all).
    slept_at: Option<Instant>,
    /// Sleeps still to go without waiting awake, since a wait found the CPU crowded.
    skip: u32,
    /// How many sleeps the next crowded wait skips: doubled each time, forgotten once none has been
    /// crowded for `CROWDED_FORGOTTEN`.
    backoff: u32,
    /// When a wait last found the CPU crowded.
    crowded_at: Option<Instant>,
}

/// The sleeps a first crowded wait skips, and the most any does: with a process holding the CPU for
/// good, one wait in this many costs it a slice of that process's time.
const SKIP_FIRST: u32 = 16;
const SKIP_MOST: u32 = 4096;
/// How long after the last crowded wait the back-off starts again from `SKIP_FIRST`.
const CROWDED_FORGOTTEN: Duration = Duration::from_secs(10);

impl Awake {
    pub fn new(most: Duration) -> Self {
        Self {
            epolls: std::sync::OnceLock::new(),
            most,
            state: Mutex::new(Learnt {
                window: most,
                ..Learnt::default()
            }),
        }
    }

    /// Whether there is anything to wait awake for.
    pub fn on(&self) -> bool {
        !self.most.is_zero()
    }

    /// The runtime's epolls, once it runs.
    pub fn found(&self, epolls: Vec<RawFd>) {
        let _ = self.epolls.set(epolls);
    }

    /// Before the runtime sleeps: waits awake for the window, if there is one.
    pub fn before_sleep(&self) {
        let Some(epolls) = self.epolls.get().filter(|e| !e.is_empty()) else {
            return;
        };
        let window = {
            let mut state = lock(&self.state);
            if state.skip > 0 {
                state.skip -= 1;
                Duration::ZERO
            } else {
                state.window
            }
        };
        if !window.is_zero() {
            // SAFETY: the runtime's epolls stay open while it runs, and this runs only inside its park.
            let borrowed: Vec<BorrowedFd<'_>> = epolls
                .iter()
                .map(|&fd| unsafe { BorrowedFd::borrow_raw(fd) })
                .collect();
            let woke = wait(&borrowed, window, self.most * 2);
            let mut state = lock(&self.state);
            let since = state.crowded_at.map(|at| at.elapsed());
            (state.skip, state.backoff) = after_wait(&woke, state.backoff, since);
            if woke == Woke::Crowded {
                state.crowded_at = Some(Instant::now());
            }
            if woke == Woke::Event {
                return;
            }
        }
        lock(&self.state).slept_at = Some(Instant::now());
    }

    /// After the runtime woke: a sleep that a window up to the most would have caught grows it, a longer
    /// one shrinks it.
    pub fn after_sleep(&self) {
        let mut state = lock(&self.state);
        if let Some(at) = state.slept_at.take() {
            state.window = next_window(state.window, state.window + at.elapsed(), self.most);
        }
    }
}

/// The sleeps to skip and the back-off after a wait that ended as `woke`, with `backoff` the one before
/// and the last crowded wait `since` ago.
fn after_wait(woke: &Woke, backoff: u32, since: Option<Duration>) -> (u32, u32) {
    let backoff = match since {
        Some(since) if since < CROWDED_FORGOTTEN => backoff,
        _ => 0,
    };
    if *woke == Woke::Crowded {
        let skip = backoff.saturating_mul(2).clamp(SKIP_FIRST, SKIP_MOST);
        (skip, skip)
    } else {
        (0, backoff)
    }
}

/// The window after a sleep that lasted `gap` from the daemon's park (awake and asleep, and the wake-up
/// itself, which is what the window saves): doubled (from an eighth of the most) when it came within the
/// most, halved (to nothing, below an eighth) when not. Below the most the slack is twice that: events
/// that come a little under the window's most apart, measured with their wake-up on top, then grow it back
/// rather than shrink it for good; at the most an event it missed could not have been caught.
fn next_window(window: Duration, gap: Duration, most: Duration) -> Duration {
    let start = most / 8;
    if gap <= most || (window < most && gap <= most * 2) {
        (window * 2).clamp(start, most)
    } else if window / 2 < start {
        Duration::ZERO
    } else {
        window / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_most_is_microseconds_within_bounds_and_anything_else_is_named() {
        assert_eq!(most_from(None), Ok(DEFAULT));
        assert_eq!(most_from(Some("0")), Ok(Duration::ZERO));
        assert_eq!(most_from(Some(" 250 ")), Ok(Duration::from_micros(250)));
        for bad in ["fast", "-1", "1.5", "10001"] {
            let why = most_from(Some(bad)).expect_err(bad).to_string();
            assert!(
                why.contains(&format!("{bad:?}")) && why.contains("0 to 10000"),
                "{why}"
            );
        }
    }

    #[test]
    fn the_window_grows_while_sleeps_are_short_and_goes_while_they_are_long() {
        let most = Duration::from_micros(100);
        let us = Duration::from_micros;
        let mut window = most;
        // Below the most, events 90 µs apart, 30 more with the wake-up, grow the window back.
        assert_eq!(next_window(most / 2, us(120), most), most);
        // At the most, events 150 µs apart are never caught: the window shrinks rather than poll for them.
        assert_eq!(next_window(most, us(150), most), most / 2);
        // A daemon whose only events are a ping every half second stops waiting awake.
        for _ in 0..4 {
            window = next_window(window, Duration::from_millis(500), most);
        }
        assert_eq!(window, Duration::ZERO);
        // Calls one after another, each sleep short: back to the most in four sleeps.
        let mut grown = Vec::new();
        for _ in 0..4 {
            window = next_window(window, us(40), most);
            grown.push(window.as_micros());
        }
        assert_eq!(grown, [12, 25, 50, 100]);
        assert_eq!(next_window(most, us(40), most), most);
    }

    #[test]
    fn a_crowded_cpu_ends_waiting_awake_for_sleeps_that_double_while_it_lasts() {
        let recent = Some(Duration::from_millis(50));
        let mut backoff = 0;
        let mut skips = Vec::new();
        for _ in 0..10 {
            let skip;
            (skip, backoff) = after_wait(&Woke::Crowded, backoff, recent);
            skips.push(skip);
        }
        assert_eq!(skips, [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 4096]);
        // A wait that was not crowded skips nothing itself, and the back-off stands while the last
        // crowded one is recent: a process holding the CPU costs the daemon one slice in 4,096 sleeps.
        assert_eq!(after_wait(&Woke::Event, 4096, recent), (0, 4096));
        assert_eq!(after_wait(&Woke::Waited, 4096, recent), (0, 4096));
        // Ten seconds without a crowded wait and it starts again from the first.
        let long_ago = Some(Duration::from_secs(11));
        assert_eq!(after_wait(&Woke::Waited, 4096, long_ago), (0, 0));
        assert_eq!(after_wait(&Woke::Crowded, 4096, long_ago), (16, 16));
        assert_eq!(after_wait(&Woke::Crowded, 0, None), (16, 16));
    }

    #[test]
    fn the_wait_ends_on_an_event_of_the_runtime_and_otherwise_at_its_bound() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let (before, after) = rt.block_on(async {
            let epolls = runtime_epolls();
            assert!(!epolls.is_empty(), "the runtime's epoll is found");
            // SAFETY: the runtime's epolls stay open while it runs, as it does throughout.
            let epolls: Vec<BorrowedFd<'_>> = epolls
                .iter()
                .map(|&fd| unsafe { BorrowedFd::borrow_raw(fd) })
                .collect();
            // Never crowded: a busy test machine may keep a yield away for long.
            let never = Duration::MAX;
            let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
            ours.set_nonblocking(true).expect("non-blocking");
            let ours = tokio::net::UnixStream::from_std(ours).expect("registered");
            // A sleep of the runtime takes in what registering made ready (edge-triggered, as mio
            // registers): the epoll has nothing now.
            // (A signal to the process, which every runtime's signal socket hears, can make it ready: a
            // quiet moment is looked for more than once.)
            let mut before = Woke::Event;
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                before = wait(&epolls, Duration::from_millis(1), never);
                if before == Woke::Waited {
                    break;
                }
            }
            theirs.write_all(b"x").expect("a byte");
            // A bound no test waits out: only the event ends this wait.
            let after = wait(&epolls, Duration::from_secs(60), never);
            drop(ours);
            (before, after)
        });
        assert_eq!((before, after), (Woke::Waited, Woke::Event));
    }
}
