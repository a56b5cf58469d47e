//! Freed memory given back to the system. glibc keeps what the daemon frees for the process; after a
//! session that held megabytes of answers, or large arguments dropped, it is asked to give it back. Not
//! after every session: trimming walks every arena and unmaps pages that the next session faults in
//! again, which cost each short session (an `ovai mcp` that lists the tools and goes) more than it saved.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Free memory grown past the least held since the last trim by this much is given back.
const GROWN_BY_BYTES: usize = 1 << 20;

/// And at most this long after the last trim it is given back anyway: free chunks whose pages a trim
/// gave back stay counted as free, and a session that used them again brings the pages back without
/// the count moving.
const AT_LEAST_EVERY: Duration = Duration::from_secs(10);

/// The last trim: when, and the fewest free bytes the allocator held since (or just after it).
static LAST_TRIM: Mutex<Option<(Instant, usize)>> = Mutex::new(None);

pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counts; malloc_trim only returns free heap pages
        // to the system. Neither touches a live allocation.
        let held = unsafe { libc::mallinfo2() }.fordblks;
        let mut last = crate::sync::lock(&LAST_TRIM);
        match last.as_mut() {
            Some((at, least))
                if at.elapsed() < AT_LEAST_EVERY && held <= *least + GROWN_BY_BYTES =>
            {
                *least = (*least).min(held);
            }
            _ => {
                // SAFETY: as above.
                unsafe { libc::malloc_trim(0) };
                // SAFETY: as above.
                *last = Some((Instant::now(), unsafe { libc::mallinfo2() }.fordblks));
            }
        }
    }
}
