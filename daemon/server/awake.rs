//! The daemon stays awake for a moment before it sleeps, when its next event has been coming soon.
//!
//! Where an idle CPU halts at once (a VM with guest halt polling off, as `haltpoll guest_halt_poll_ns 0`;
//! a deep idle state), every wake-up of a sleeping process costs the waker and the woken tens of µs: a
//! plugin call one at a time wakes the daemon twice (the host's answer, the session's next request), and
//! the CPU it slept on has to come back first. Before the runtime sleeps in `epoll_wait`, this polls its
//! epoll for a while: a descriptor's event that comes in that time finds the daemon awake, and whoever sent
//! it wakes nobody. (A timer has no descriptor: one due meanwhile fires at the window's end, at most
//! `OVAI_AWAKE_US` late.) How long is learnt as the kernel's own halt polling learns it (`cpuidle-haltpoll`): the window
//! grows while the daemon's sleeps are short and shrinks to nothing while they are long, so an idle
//! daemon (a ping every half second) or one waiting on slow plugins polls for nothing, and a busy one
//! polls for at most `OVAI_AWAKE_US` µs (100 unless set; 0: never) per sleep.

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
}

/// Polls the epolls until one has an event or `bound` has passed.
pub fn wait(epolls: &[RawFd], bound: Duration) -> Woke {
    let started = Instant::now();
    // SAFETY: the caller's descriptors stay open for this call (the runtime's epolls while it runs).
    let borrowed: Vec<BorrowedFd<'_>> = epolls
        .iter()
        .map(|&fd| unsafe { BorrowedFd::borrow_raw(fd) })
        .collect();
    let mut fds: Vec<PollFd<'_>> = borrowed
        .iter()
        .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
        .collect();
    loop {
        // An error (a descriptor gone) ends the wait too: the runtime's own wait says what it is.
        if poll(&mut fds, PollTimeout::ZERO) != Ok(0) {
            return Woke::Event;
        }
        if started.elapsed() >= bound {
            return Woke::Waited;
        }
        // Whatever else is runnable on this CPU runs first: waiting awake is for a CPU nobody else
        // wants. Spinning instead held the CPU from the sessions' bridges and the plugin host when they
        // had work (sixteen sessions: 131,000–136,000 calls/s spinning, 137,000–148,000 yielding), and
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
}

impl Awake {
    pub fn new(most: Duration) -> Self {
        Self {
            epolls: std::sync::OnceLock::new(),
            most,
            state: Mutex::new(Learnt {
                window: most,
                slept_at: None,
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
        let window = lock(&self.state).window;
        if !window.is_zero() && wait(epolls, window) == Woke::Event {
            return;
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

/// The window after a sleep that lasted `gap` from the daemon's park (awake and asleep, and the wake-up
/// itself, which is what the window saves): doubled (from an eighth of the most) when it came within twice
/// the most, halved (to nothing, below an eighth) when not. The slack keeps events that come a little under
/// the most apart, measured with their wake-up on top, from shrinking the window for good.
fn next_window(window: Duration, gap: Duration, most: Duration) -> Duration {
    let start = most / 8;
    if gap <= most * 2 {
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
        // Events 90 µs apart, 30 more with the wake-up, keep the window where it is.
        assert_eq!(next_window(most, us(120), most), most);
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
    fn the_wait_ends_on_an_event_of_the_runtime_and_otherwise_at_its_bound() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let (before, after) = rt.block_on(async {
            let epolls = runtime_epolls();
            assert!(!epolls.is_empty(), "the runtime's epoll is found");
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
                before = wait(&epolls, Duration::from_millis(1));
                if before == Woke::Waited {
                    break;
                }
            }
            theirs.write_all(b"x").expect("a byte");
            // A bound no test waits out: only the event ends this wait.
            let after = wait(&epolls, Duration::from_secs(60));
            drop(ours);
            (before, after)
        });
        assert_eq!((before, after), (Woke::Waited, Woke::Event));
    }
}
