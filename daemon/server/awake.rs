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
//! A machine whose CPUs other processes keep busy (a build, a test run) is another matter. No CPU halts
//! there, so waiting awake saves nothing; a yield hands such a process a whole slice, milliseconds, and an
//! event that comes meanwhile finds the daemon runnable but not running; and with two CPU-bound processes
//! on a 2-vCPU VM, one call at a time through a daemon that waited awake went, in most runs, at half the
//! rate of one that slept or less (docs/performance-log.md, 2026-12-04). Such a machine shows itself in
//! two ways: a wait whose yield kept the daemon away longer than twice the most it waits, and a sleep
//! whose wake-up waited on the runqueue for a millisecond or more (the thread's run delay in
//! `/proc/thread-self/schedstat`; the pipeline's own processes run for µs at a time). Under two CPU-bound
//! processes these came about 20 to 190 times a second, on the idle machine three at most. Ten within a
//! second turn waiting awake off for a second, and while it is off each one puts the end off again: while
//! they keep coming, the daemon sleeps, as with `OVAI_AWAKE_US=0`.
//! (Timers have no descriptor: one due during a wait fires at its end, late by the window, or once in such
//! a while by another process's slice.)

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
    /// The runtime thread's run delay, where /proc has it.
    run_delay: std::sync::OnceLock<Option<RunDelay>>,
    most: Duration,
    state: Mutex<Learnt>,
}

/// The scheduler's figures for the thread that opened it: `/proc/thread-self/schedstat`, read again from
/// the start (one `pread`) each time.
struct RunDelay {
    file: std::fs::File,
    thread: std::thread::ThreadId,
}

impl RunDelay {
    fn open() -> Option<Self> {
        let file = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
        let delay = Self {
            file,
            thread: std::thread::current().id(),
        };
        delay.now().map(|_| delay)
    }

    /// The run delay, read on the thread it is of (any other's would tell nothing of this one).
    fn now_here(&self) -> Option<Duration> {
        (std::thread::current().id() == self.thread)
            .then(|| self.now())
            .flatten()
    }

    /// How long the thread has run, and how long it has waited on a runqueue, all told.
    fn times(&self) -> Option<(Duration, Duration)> {
        use std::os::unix::fs::FileExt;
        let mut text = [0u8; 96];
        let n = self.file.read_at(&mut text, 0).ok()?;
        let mut fields = std::str::from_utf8(text.get(..n)?).ok()?.split_whitespace();
        let mut next = || fields.next()?.parse().ok().map(Duration::from_nanos);
        Some((next()?, next()?))
    }

    fn now(&self) -> Option<Duration> {
        self.times().map(|(_, waited)| waited)
    }
}

/// A wake-up that waited this long on the runqueue or longer waited for another process's slice to end.
const STALLED: Duration = Duration::from_millis(1);

/// Whether a sleep's wake-up, with the thread's run delay `before` it and `after` it, waited that long.
fn stalled(before: Option<Duration>, after: Option<Duration>) -> bool {
    before
        .zip(after)
        .is_some_and(|(before, after)| after.saturating_sub(before) >= STALLED)
}

/// A park that ended in a real sleep.
struct Parked {
    at: Instant,
    /// The window it waited awake first (zero when the window was, or waiting awake was off).
    waited: Duration,
    /// The thread's run delay as it went to sleep.
    run_delay: Option<Duration>,
}

#[derive(Default)]
struct Learnt {
    window: Duration,
    /// Since a full window missed its event: growing back takes a sleep within the most (see `learn`).
    missed_full: bool,
    /// A park that ended in a sleep the window can learn from (not one that caught an event, nor one cut
    /// short by a crowded CPU).
    parked: Option<Parked>,
    /// Until when the daemon sleeps without waiting awake, since the CPU was found crowded (see `mark`).
    off_until: Option<Instant>,
    /// Sleeps since waiting awake went off (see `measured`).
    sleeps_off: u32,
    /// The crowded waits and wake-ups counted since `counting_since`.
    marks: u32,
    counting_since: Option<Instant>,
}

/// How many crowded waits or wake-ups within `MARKS_WITHIN` turn waiting awake off, and for how long.
/// Under two CPU-bound processes on a 2-vCPU VM they came about 20 to 190 times a second; on the idle
/// machine, at K=1, K=32 or sixteen sessions, three a second at most, and turning waiting awake off on
/// each cost the sixteen sessions 3–7 % of their calls (docs/performance-log.md, 2026-12-04).
const MARKS: u32 = 10;
const MARKS_WITHIN: Duration = Duration::from_secs(1);
const OFF_FOR: Duration = Duration::from_secs(1);
const MEASURED_WHILE_OFF: u32 = 8;

impl Awake {
    pub fn new(most: Duration) -> Self {
        Self {
            epolls: std::sync::OnceLock::new(),
            run_delay: std::sync::OnceLock::new(),
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

    /// The runtime's epolls, once it runs; called on the thread that drives it, whose run delay is then
    /// opened (before the daemon serves, so that it holds no descriptor it did not hold from the start).
    pub fn found(&self, epolls: Vec<RawFd>) {
        let _ = self.epolls.set(epolls);
        let _ = self.run_delay.set(RunDelay::open());
    }

    /// The run delay of the thread that parks, if it is the one that opened it.
    fn run_delay(&self) -> Option<Duration> {
        self.run_delay.get()?.as_ref()?.now_here()
    }

    /// Before the runtime sleeps: waits awake for the window, if there is one.
    pub fn before_sleep(&self) {
        let Some(epolls) = self.epolls.get().filter(|e| !e.is_empty()) else {
            return;
        };
        let parked_at = Instant::now();
        let (window, measured) = {
            let mut state = lock(&self.state);
            state.parked = None;
            (state.window_at(parked_at), state.measured(parked_at))
        };
        if !window.is_zero() {
            // SAFETY: the runtime's epolls stay open while it runs, and this runs only inside its park.
            let borrowed: Vec<BorrowedFd<'_>> = epolls
                .iter()
                .map(|&fd| unsafe { BorrowedFd::borrow_raw(fd) })
                .collect();
            let woke = wait(&borrowed, window, self.most * 2);
            self.after(&woke);
            if woke != Woke::Waited {
                return;
            }
        }
        let run_delay = if measured { self.run_delay() } else { None };
        lock(&self.state).parked = Some(Parked {
            at: parked_at,
            waited: window,
            run_delay,
        });
    }

    /// After the runtime woke: a park that a window up to the most would have caught grows it, a longer
    /// one shrinks it. A wake-up that waited long on the runqueue counts as a crowded wait instead.
    pub fn after_sleep(&self) {
        let Some(parked) = lock(&self.state).parked.take() else {
            return;
        };
        let gap = parked.at.elapsed();
        if stalled(parked.run_delay, self.run_delay()) {
            self.after(&Woke::Crowded);
            return;
        }
        let mut state = lock(&self.state);
        (state.window, state.missed_full) = learn(
            state.window,
            state.missed_full,
            parked.waited,
            gap,
            self.most,
        );
    }

    /// After a wait (or a wake-up) that ended as `woke`: a crowded one counts towards turning waiting
    /// awake off.
    fn after(&self, woke: &Woke) {
        if *woke != Woke::Crowded {
            return;
        }
        let turned_off = lock(&self.state).mark(Instant::now());
        if turned_off {
            tracing::debug!(
                "waiting awake is off while other processes keep the CPUs busy: {MARKS} waits or wake-ups \
                 within {MARKS_WITHIN:?} waited for their turn"
            );
        }
    }
}

impl Learnt {
    /// The window to wait awake for in a park at `at`: none while waiting awake is off.
    fn window_at(&self, at: Instant) -> Duration {
        if self.off_until.is_some_and(|until| at < until) {
            Duration::ZERO
        } else {
            self.window
        }
    }

    /// Whether a sleep at `at` has its wake-up's run delay read: every one while waiting awake is on, one
    /// in `MEASURED_WHILE_OFF` while it is off (enough to keep it off: they come tens of times a second
    /// there, and one a second does), so that a busy machine's daemon spends little on reading them.
    fn measured(&mut self, at: Instant) -> bool {
        if self.off_until.is_none_or(|until| at >= until) {
            self.sleeps_off = 0;
            return true;
        }
        self.sleeps_off = self.sleeps_off.wrapping_add(1);
        self.sleeps_off.is_multiple_of(MEASURED_WHILE_OFF)
    }

    /// A crowded wait or wake-up at `now`: the `MARKS`th within `MARKS_WITHIN` of the first turns waiting
    /// awake off for `OFF_FOR` from now, and while it is off each one puts the end off again. True when
    /// it turned waiting awake off.
    fn mark(&mut self, now: Instant) -> bool {
        if self
            .counting_since
            .is_none_or(|since| now.saturating_duration_since(since) > MARKS_WITHIN)
        {
            self.counting_since = Some(now);
            self.marks = 0;
        }
        self.marks = self.marks.saturating_add(1);
        let off = self.off_until.is_some_and(|until| now < until);
        if off || self.marks >= MARKS {
            self.off_until = Some(now + OFF_FOR);
        }
        !off && self.marks >= MARKS
    }
}

/// The window, and whether a full one has missed a stream of events, after a park that waited awake for
/// `waited` and lasted `gap` (awake and asleep, and the wake-up itself, which is what the window saves):
/// doubled (from an eighth of the most) when the event came within the most, halved (to nothing, below an
/// eighth) when not. Events a little under the most apart measure more than it, their wake-up on top: below
/// the most, twice the most counts as within, so that such events grow a window that went to nothing back
/// to where it catches them. But a full window that waited and missed by less than the most again has
/// found events farther apart than any window, and that slack would only grow it back to miss again
/// (events 150 µs apart: 100, 50, 100, …): it is off from then, so that the window goes to nothing and
/// stays there, until a park comes within the most or lasts longer than twice it (that stream has ended).
fn learn(
    window: Duration,
    missed_full: bool,
    waited: Duration,
    gap: Duration,
    most: Duration,
) -> (Duration, bool) {
    let start = most / 8;
    let slack = most * 2;
    let missed_full = if gap <= most || gap > slack {
        false
    } else {
        missed_full || waited >= most
    };
    let next = if gap <= most || (!missed_full && window < most && gap <= slack) {
        (window * 2).clamp(start, most)
    } else if window / 2 < start {
        Duration::ZERO
    } else {
        window / 2
    };
    (next, missed_full)
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

    /// The windows, in µs, after parks of `gaps` µs each (each waiting the window it had), from `window`
    /// with no full window missed.
    fn windows(window: Duration, gaps: &[u64]) -> Vec<u128> {
        let most = Duration::from_micros(100);
        let (mut window, mut missed_full) = (window, false);
        gaps.iter()
            .map(|&gap| {
                (window, missed_full) = learn(
                    window,
                    missed_full,
                    window,
                    Duration::from_micros(gap),
                    most,
                );
                window.as_micros()
            })
            .collect()
    }

    #[test]
    fn the_window_grows_while_sleeps_are_short_and_goes_while_they_are_long() {
        let most = Duration::from_micros(100);
        // A daemon whose only events are a ping every half second stops waiting awake.
        assert_eq!(windows(most, &[500_000; 4]), [50, 25, 12, 0]);
        // Calls one after another, each park short: back to the most in four parks, and there it stays.
        assert_eq!(windows(Duration::ZERO, &[40; 5]), [12, 25, 50, 100, 100]);
        // Events 90 µs apart, 120 with the wake-up, grow a window that had gone to nothing.
        assert_eq!(windows(Duration::ZERO, &[120; 4]), [12, 25, 50, 100]);
        // Events 150 µs apart, which no window catches: once a full one has missed, it goes to nothing
        // and stays there rather than grow back to miss again.
        assert_eq!(windows(most, &[150; 6]), [50, 25, 12, 0, 0, 0]);
        // From nothing they grow it once to the most, and then it goes for good.
        assert_eq!(
            windows(Duration::ZERO, &[150; 10]),
            [12, 25, 50, 100, 50, 25, 12, 0, 0, 0]
        );
        // A pause (parks far longer than twice the most) does not count as a miss: events 90 µs apart
        // after it grow the window straight back (and at the most it catches them: no park to learn from).
        assert_eq!(windows(most, &[5_000, 120]), [50, 100]);
        // Nor does a park that waited no full window (made while waiting awake was off).
        let us = Duration::from_micros;
        assert_eq!(
            learn(most, false, Duration::ZERO, us(150), most),
            (most / 2, false)
        );
    }

    #[test]
    fn crowded_waits_and_wake_ups_many_times_a_second_turn_waiting_awake_off() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        // One every 120 ms (the idle machine had three a second at most): never off.
        let mut learnt = Learnt::default();
        for n in 0..40 {
            assert!(!learnt.mark(ms(120 * n)));
        }
        assert_eq!(learnt.off_until, None);
        // Ten within a second: off for a second from the tenth.
        let mut learnt = Learnt {
            window: Duration::from_micros(100),
            ..Learnt::default()
        };
        for n in 0..9 {
            assert!(!learnt.mark(ms(50 * n)));
        }
        assert_eq!(learnt.off_until, None);
        assert!(learnt.mark(ms(450)), "the tenth turns it off");
        assert_eq!(learnt.off_until, Some(ms(1450)));
        assert_eq!(learnt.window_at(ms(1449)), Duration::ZERO);
        assert_eq!(learnt.window_at(ms(1450)), Duration::from_micros(100));
        // While it is off, each one puts the end off again, in the count's second or after it.
        assert!(!learnt.mark(ms(900)));
        assert_eq!(learnt.off_until, Some(ms(1900)));
        assert!(!learnt.mark(ms(1500)));
        assert_eq!(learnt.off_until, Some(ms(2500)));
        // While it is off, one sleep in eight has its wake-up measured; every one once it is on again.
        let measured: Vec<bool> = (0..16).map(|n| learnt.measured(ms(1600 + n))).collect();
        assert_eq!(measured.iter().filter(|&&m| m).count(), 2, "{measured:?}");
        assert!(learnt.measured(ms(2500)) && learnt.measured(ms(2501)));
        // Once it is on again, nine within a second leave it on.
        for n in 0..9 {
            assert!(!learnt.mark(ms(3000 + 50 * n)));
        }
        assert_eq!(learnt.window_at(ms(3450)), Duration::from_micros(100));
        // Only a crowded wait or wake-up counts.
        let awake = Awake::new(Duration::from_micros(100));
        for _ in 0..MARKS {
            awake.after(&Woke::Event);
            awake.after(&Woke::Waited);
        }
        assert_eq!(lock(&awake.state).off_until, None);
        for _ in 0..MARKS {
            awake.after(&Woke::Crowded);
        }
        assert_eq!(lock(&awake.state).window_at(Instant::now()), Duration::ZERO);
    }

    #[test]
    fn a_wake_up_stalled_when_it_waited_a_millisecond_or_more_on_the_runqueue() {
        let us = |n: u64| Some(Duration::from_micros(n));
        assert!(!stalled(us(5_000), us(5_999)));
        assert!(stalled(us(5_000), us(6_000)));
        assert!(stalled(us(0), us(8_000)));
        // Without a reading either side (no /proc), nothing stalls.
        assert!(!stalled(None, us(8_000)));
        assert!(!stalled(us(0), None));
    }

    #[test]
    fn the_run_delay_is_read_from_the_schedstat_of_the_thread_that_opened_it() {
        let mine = RunDelay::open().expect("/proc/thread-self/schedstat on Linux");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (opened_tx, opened_rx) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            let theirs = RunDelay::open().expect("the other thread's schedstat");
            opened_tx.send(theirs).expect("sent");
            // Blocked, running nothing, until told.
            let _ = rx.recv();
        });
        let theirs = opened_rx.recv().expect("the other thread's file");
        let (ran, _) = mine.times().expect("a reading");
        let (they_ran, _) = theirs.times().expect("a reading of the other thread's");
        // Spin until this thread's own figure shows 20 ms more run: it is this thread's, and read afresh.
        let give_up = Instant::now() + Duration::from_secs(20);
        let mut now = ran;
        while now < ran + Duration::from_millis(20) {
            assert!(Instant::now() < give_up, "the run time never grew: {ran:?}");
            now = mine.times().expect("a reading").0;
        }
        let (they_ran_now, _) = theirs.times().expect("a reading of the other thread's");
        assert!(
            they_ran_now < they_ran + Duration::from_millis(20),
            "the blocked thread ran {:?}",
            they_ran_now - they_ran
        );
        assert!(mine.now_here().is_some());
        assert_eq!(
            theirs.now_here(),
            None,
            "read here, the other thread's tells nothing"
        );
        drop(tx);
        other.join().expect("the other thread");
    }

    #[test]
    fn the_wait_ends_on_an_event_of_the_runtime_and_otherwise_at_its_bound() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let (before, crowded, after) = rt.block_on(async {
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
            // A wait that counts any time between two polls as crowded gives up after its first poll,
            // long before its bound.
            let (mut before, mut crowded) = (Woke::Event, Woke::Event);
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                before = wait(&epolls, Duration::from_millis(1), never);
                crowded = wait(&epolls, Duration::from_secs(1), Duration::ZERO);
                if (&before, &crowded) == (&Woke::Waited, &Woke::Crowded) {
                    break;
                }
            }
            theirs.write_all(b"x").expect("a byte");
            // Only the event ends this wait.
            let after = wait(&epolls, Duration::from_secs(60), never);
            drop(ours);
            (before, crowded, after)
        });
        assert_eq!(
            (before, crowded, after),
            (Woke::Waited, Woke::Crowded, Woke::Event)
        );
    }
}
