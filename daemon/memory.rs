//! Freed memory given back to the system. glibc keeps what the daemon frees for the process; after a
//! session that held megabytes of answers, or large arguments dropped, it is asked to give it back. Not
//! after every session: trimming walks every arena and unmaps pages that the next session faults in
//! again, which cost each short session (an `ovai mcp` that lists the tools and goes) more than it saved.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Free memory grown past the least held since the last trim by this much is given back.
const GROWN_BY_BYTES: usize = 1 << 20;

/// And at most this long after the last trim it is given back anyway: free chunks whose pages a trim
/// gave back stay counted as free, and a session that used them again brings the pages back without
/// the count moving.
const AT_LEAST_EVERY: Duration = Duration::from_secs(10);

/// The fewest free bytes the allocator held since the last trim, or just after it.
static LEAST_HELD: AtomicUsize = AtomicUsize::new(0);
static LAST_TRIM: Mutex<Option<Instant>> = Mutex::new(None);

pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 only reads the allocator's counts; malloc_trim only returns free heap pages to
    // the system. Neither touches a live allocation.
    unsafe {
        let held = libc::mallinfo2().fordblks;
        let least = LEAST_HELD.load(Ordering::Relaxed);
        let mut last = crate::sync::lock(&LAST_TRIM);
        let due = last.is_none_or(|at| at.elapsed() >= AT_LEAST_EVERY);
        if held > least + GROWN_BY_BYTES || due {
            libc::malloc_trim(0);
            *last = Some(Instant::now());
            LEAST_HELD.store(libc::mallinfo2().fordblks, Ordering::Relaxed);
        } else if held < least {
            LEAST_HELD.store(held, Ordering::Relaxed);
        }
    }
}
