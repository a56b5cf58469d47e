//! The scheduling policy of ovai's own processes (Linux): `SCHED_BATCH`, whose wake-ups preempt no
//! process of the ordinary policy.
//!
//! The bridge relays for its client and the daemon, the daemon for its sessions and the plugin host: each
//! is woken by a write of the process it works for, and under the ordinary policy each such wake-up may
//! stop the writer where it stands (the kernel's `check_preempt_wakeup_fair`), a switch of the CPU before
//! the writer has written the rest of what it has. A `SCHED_BATCH` thread is woken as any other but runs
//! once the running one gives up the CPU or its slice ends, or at once where a CPU is free, and then takes
//! all that came in one read. A process started under another policy (a client run in real time, or
//! idle) keeps it.

use std::ffi::OsStr;
#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether an `OVAI_*_BATCH` variable asks for `SCHED_BATCH`: unset, empty or 1 yes, 0 no; anything else
/// is named in a sentence (`keeps`: what 0 means for this process) and taken as 1.
pub fn batch_wanted(name: &str, value: Option<&OsStr>, keeps: &str) -> (bool, Option<String>) {
    let value = value.map(|v| v.to_string_lossy());
    match value.as_deref().map(str::trim) {
        None | Some("" | "1") => (true, None),
        Some("0") => (false, None),
        Some(other) => (
            true,
            Some(format!(
                "{name} is {other:?}, which is neither 0 ({keeps}) nor 1 (SCHED_BATCH, the default); using 1."
            )),
        ),
    }
}

/// Runs this thread as `SCHED_BATCH` unless the variable `name` says 0 (`batch_wanted`); the sentence for
/// a value it does not take, for the caller to say where its reader looks.
pub fn batch_as_asked(name: &str, keeps: &str) -> Option<String> {
    let (batch, said) = batch_wanted(name, std::env::var_os(name).as_deref(), keeps);
    if batch {
        schedule_as_batch();
    }
    said
}

/// Whether `schedule_as_batch` changed this process's policy: the plugin host then goes back to the
/// ordinary one as it starts (`ordinary_in_child`).
#[cfg(target_os = "linux")]
static BATCHED: AtomicBool = AtomicBool::new(false);

/// This thread, and those it makes from now on, run as `SCHED_BATCH` if they run under the ordinary
/// policy (elsewhere than Linux nothing changes). A refusal (a sandbox that forbids the change) leaves
/// the policy as it was, which only costs speed.
pub fn schedule_as_batch() {
    #[cfg(target_os = "linux")]
    // SAFETY: both calls name this thread (0) and read or set its policy, from a valid parameter.
    unsafe {
        if libc::sched_getscheduler(0) == libc::SCHED_OTHER {
            let param = libc::sched_param { sched_priority: 0 };
            if libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) == 0 {
                BATCHED.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Between fork and exec: the child goes back to the ordinary policy if `schedule_as_batch` left its
/// parent batched (a child inherits its parent's policy; even `SCHED_RESET_ON_FORK` would reset only a
/// real-time policy or a negative nice). The plugin host is woken by the daemon's writes and should run
/// at once, preempting whoever runs: a plugin call waits on it. Two system calls, no allocation.
pub fn ordinary_in_child() {
    #[cfg(target_os = "linux")]
    if BATCHED.load(Ordering::Relaxed) {
        // SAFETY: names this (forked) thread, from a valid parameter; leaving SCHED_BATCH for the ordinary
        // policy needs no privilege.
        unsafe {
            if libc::sched_getscheduler(0) == libc::SCHED_BATCH {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_neither_0_nor_1_is_named_and_taken_as_1() {
        assert_eq!(batch_wanted("X", None, "k"), (true, None));
        assert_eq!(batch_wanted("X", Some(OsStr::new("")), "k"), (true, None));
        assert_eq!(
            batch_wanted("X", Some(OsStr::new(" 1 ")), "k"),
            (true, None)
        );
        assert_eq!(batch_wanted("X", Some(OsStr::new("0")), "k"), (false, None));
        let (on, said) = batch_wanted("X", Some(OsStr::new("no")), "they keep theirs");
        assert!(on);
        assert_eq!(
            said.as_deref(),
            Some(
                "X is \"no\", which is neither 0 (they keep theirs) nor 1 (SCHED_BATCH, the default); using 1."
            )
        );
    }
}
