//! The one way the daemon takes a std mutex. Every critical section under these locks is a single
//! insert, remove or swap, or (the HTTP answers kept for a resume) steps that cannot panic, so a panic
//! while one was held cannot have left its value half-updated: a poisoned lock is taken as it is rather
//! than spreading the panic to every later caller.

use std::sync::{Mutex, MutexGuard};

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
