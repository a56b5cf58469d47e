//! The daemon stays awake for a moment before it sleeps, waiting for its next event.
//!
//! Where an idle CPU halts at once (a VM with guest halt polling off, as `haltpoll guest_halt_poll_ns 0`;
//! a deep idle state), every wake-up of a sleeping process costs the waker and the woken tens of µs: a
//! plugin call one at a time wakes the daemon twice (the session's request, the host's answer), and the
//! CPU it slept on has to come back first. Before the runtime sleeps in `epoll_wait`, this polls its epoll
//! for up to `OVAI_AWAKE_US` µs (100 unless set; 0: never), giving the CPU to anything else runnable
//! between polls: an event that comes in that time finds the daemon awake, and whoever sent it wakes
//! nobody. It is what the kernel's own halt polling does for the whole machine (200 µs by default), done
//! for the daemon alone. It costs at most that much CPU per sleep: at a call a second, 0.01 % of a core.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How long the daemon waits awake unless `OVAI_AWAKE_US` says otherwise.
const DEFAULT: Duration = Duration::from_micros(100);
/// The most `OVAI_AWAKE_US` may ask for: past this, waiting awake is a core spent, not a wake-up saved.
const MOST_US: u64 = 10_000;

/// How long to wait awake, from `OVAI_AWAKE_US`'s value; a sentence when it cannot be used.
pub fn awake_for(value: Option<&str>) -> Result<Duration, String> {
    let Some(text) = value else {
        return Ok(DEFAULT);
    };
    match text.trim().parse::<u64>() {
        Ok(us) if us <= MOST_US => Ok(Duration::from_micros(us)),
        _ => Err(format!(
            "OVAI_AWAKE_US is {text:?}, not a whole number of microseconds from 0 to {MOST_US}; the \
             daemon waits awake for {} µs before each sleep (0 turns that off).",
            DEFAULT.as_micros()
        )),
    }
}

/// The epoll descriptors open in this process now.
pub fn epolls() -> Vec<RawFd> {
    let mut found = Vec::new();
    #[cfg(target_os = "linux")]
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for entry in dir.flatten() {
            let is_epoll = std::fs::read_link(entry.path())
                .is_ok_and(|target| target.as_os_str() == "anon_inode:[eventpoll]");
            if let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok())
                && is_epoll
            {
                found.push(fd);
            }
        }
    }
    found
}

/// The runtime's epolls: those its build opened. tokio does not name its descriptor; on a system with no
/// epoll (or no /proc) there are none, and the daemon sleeps as the runtime does.
pub fn opened_by(before: &[RawFd], after: Vec<RawFd>) -> Vec<RawFd> {
    after
        .into_iter()
        .filter(|fd| !before.contains(fd))
        .collect()
}

/// How a wait awake ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Woke {
    /// An event is ready: the runtime's `epoll_wait` returns at once.
    Event,
    /// None came in time: the runtime sleeps.
    Waited,
}

/// Polls the epolls until one has an event or `bound` has passed, yielding the CPU between polls.
pub fn wait(epolls: &[RawFd], bound: Duration) -> Woke {
    let started = Instant::now();
    let mut fds: Vec<libc::pollfd> = epolls
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `fds` is a live array of `fds.len()` pollfds; a zero timeout never blocks.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        // An error (the descriptors gone) ends the wait too: the runtime's own wait says what it is.
        if ready != 0 {
            return Woke::Event;
        }
        if started.elapsed() >= bound {
            return Woke::Waited;
        }
        // SAFETY: no arguments; it only gives the CPU to another runnable thread, if there is one.
        unsafe { libc::sched_yield() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_value_is_microseconds_within_bounds_and_anything_else_is_named() {
        assert_eq!(awake_for(None), Ok(DEFAULT));
        assert_eq!(awake_for(Some("0")), Ok(Duration::ZERO));
        assert_eq!(awake_for(Some(" 250 ")), Ok(Duration::from_micros(250)));
        for bad in ["fast", "-1", "1.5", "10001"] {
            let why = awake_for(Some(bad)).expect_err(bad);
            assert!(
                why.contains(&format!("{bad:?}")) && why.contains("0 to 10000"),
                "{why}"
            );
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_runtimes_epoll_is_found_among_the_descriptors_its_build_opened() {
        let before = epolls();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let opened = opened_by(&before, epolls());
        assert!(!opened.is_empty(), "no epoll among {:?}", epolls());
        // The runtime sleeps in one of them: an event on a descriptor it watches shows there.
        let woke = rt.block_on(async {
            let (a, b) = tokio::net::UnixStream::pair().expect("a socket pair");
            b.try_write(b"x").expect("a byte");
            let woke = wait(&opened, Duration::from_secs(60));
            drop(a);
            woke
        });
        assert_eq!(woke, Woke::Event);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_wait_ends_on_an_event_and_otherwise_at_its_bound() {
        use std::os::fd::{FromRawFd, OwnedFd};
        // SAFETY: epoll_create1 returns a new descriptor (owned here) or -1.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epoll >= 0, "an epoll");
        // SAFETY: just created, and owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        let (r, w) = nix::unistd::pipe().expect("a pipe");
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 1,
        };
        // SAFETY: both descriptors are open; `event` lives through the call.
        let added = unsafe {
            libc::epoll_ctl(
                epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                r.as_raw_fd(),
                &mut event,
            )
        };
        assert_eq!(added, 0, "the pipe added");
        let fd = epoll.as_raw_fd();
        assert_eq!(wait(&[fd], Duration::from_millis(1)), Woke::Waited);
        std::fs::File::from(w).write_all(b"x").expect("a byte");
        // A bound no test waits out: only the event ends this wait.
        assert_eq!(wait(&[fd], Duration::from_secs(60)), Woke::Event);
    }
}
