//! Freed memory given back to the system. glibc keeps what the daemon frees for the process; after a
//! session that held megabytes of answers, or large arguments dropped, it is asked to give it back. Only
//! then: trimming walks every arena and unmaps pages that the next session faults in again, which cost
//! each short session (an `ovai mcp` that lists the tools and goes) more than it saved.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Free memory grown past what was held after the last trim by this much is given back.
const GROWN_BY_BYTES: usize = 1 << 20;

/// The fewest free bytes the allocator held since the last trim, or just after it: free chunks amid live
/// ones stay counted after a trim (their pages are given back, not the chunks), so growth is measured
/// from there.
static HELD_AFTER_TRIM: AtomicUsize = AtomicUsize::new(0);

pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 only reads the allocator's counts; malloc_trim only returns free heap pages to
    // the system. Neither touches a live allocation.
    unsafe {
        let held = libc::mallinfo2().fordblks;
        let least = HELD_AFTER_TRIM.load(Ordering::Relaxed);
        if held > least + GROWN_BY_BYTES {
            libc::malloc_trim(0);
            HELD_AFTER_TRIM.store(libc::mallinfo2().fordblks, Ordering::Relaxed);
        } else if held < least {
            HELD_AFTER_TRIM.store(held, Ordering::Relaxed);
        }
    }
}
