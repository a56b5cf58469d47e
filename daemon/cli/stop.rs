//! `ovai stop`: the running daemon finishes its calls (within shutdownGraceSeconds), answers the rest,
//! ends its plugin host and exits; this waits until it has.

use std::time::Duration;

use super::{Failure, exit, unreached};
use crate::client::{self, ClientError};
use crate::instance::Instance;
use crate::wire::{ControlOp, StopReply};

pub fn run(inst: &Instance) -> Result<(), Failure> {
    // A server still reading plugins/ answers nobody until it serves: a TERM stops its start at once,
    // where asking it would wait out its imports.
    if let Some(m) = client::marked(inst, &inst.starting_marker())
        && let Ok(pid) = i32::try_from(m.pid)
        && nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .is_ok()
    {
        let pid = pid.unsigned_abs();
        wait_for_end(inst, pid, None)?;
        println!(
            "Stopped the ovai server for {} (pid {pid}) while it read plugins/.",
            inst.root.display()
        );
        return Ok(());
    }
    let reply: StopReply = match client::control(inst, ControlOp::Stop) {
        Ok(r) => r,
        Err(ClientError::NoServer { root }) => {
            println!("No ovai server is running for {root}; there is nothing to stop.");
            return Ok(());
        }
        // Asked already (by another `ovai stop`, a signal): waited for all the same.
        Err(ClientError::Stopping { root, pid }) => {
            let pid = u32::try_from(pid).unwrap_or(u32::MAX);
            wait_for_end(inst, pid, None)?;
            println!(
                "The ovai server for {root} (pid {pid}) was stopping already, and has stopped."
            );
            return Ok(());
        }
        Err(e) => return Err(unreached(e)),
    };
    wait_for_end(inst, reply.pid, Some(reply.calls))?;
    println!(
        "Stopped the ovai server for {} (pid {}).",
        inst.root.display(),
        reply.pid
    );
    Ok(())
}

/// Ctrl-C (or a TERM) on this command while it waits ends the wait, not the server's stop, and says so:
/// otherwise the command vanished with nothing said, and the server was taken to have stopped.
fn said_when_interrupted(pid: u32) {
    use nix::sys::signal::{SigHandler, SigSet, Signal};
    let mut set = SigSet::empty();
    // One the caller ignores (`ovai stop &` in a script) stays ignored.
    for s in [Signal::SIGINT, Signal::SIGTERM] {
        if !ignored(s) {
            set.add(s);
        }
    }
    // Blocked here, before the thread starts (it inherits the mask), so that only its wait takes them.
    if set.iter().next().is_none() || set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        if let Ok(signal) = set.wait() {
            eprintln!(
                "ovai: no longer waiting ({signal}); the server (pid {pid}) goes on stopping, its calls in flight \
                 finishing within shutdownGraceSeconds. `kill -INT {pid}` ends them now."
            );
            // Ended by the signal itself, as the shell that sent it expects (a loop stops on it).
            // SAFETY: SIG_DFL runs no code of ours.
            let _ = unsafe { nix::sys::signal::signal(signal, SigHandler::SigDfl) };
            let mut only = SigSet::empty();
            only.add(signal);
            let _ = only.thread_unblock();
            let _ = nix::sys::signal::kill(nix::unistd::getpid(), signal);
            std::process::exit(128 + signal as i32);
        }
    });
}

/// Whether `signal` is ignored in this process (as the caller left it).
fn ignored(signal: nix::sys::signal::Signal) -> bool {
    // SAFETY: a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal as libc::c_int, std::ptr::null(), &raw mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Waits for the daemon to end, saying so once a second has passed: its `calls` in flight (unknown when
/// it was not asked here) may take up to shutdownGraceSeconds; with none, its sessions, its plugin host
/// and its exports (the last spans, before a collector that may be slow) take the time.
fn wait_for_end(inst: &Instance, pid: u32, calls: Option<usize>) -> Result<(), Failure> {
    let grace = inst.read_config().map_or(
        Duration::from_secs(crate::instance::DEFAULT_SHUTDOWN_GRACE_S),
        |c| c.shutdown_grace,
    );
    said_when_interrupted(pid);
    let ended = client::wait_for_end(inst, pid, || {
        let what = match calls {
            Some(0) => {
                "no call is in flight; it ends its sessions, its plugin host and its exports".into()
            }
            Some(1) => format!(
                "its call in flight finishes first (at most {} s, shutdownGraceSeconds)",
                grace.as_secs()
            ),
            Some(n) => format!(
                "its {n} calls in flight finish first (at most {} s, shutdownGraceSeconds)",
                grace.as_secs()
            ),
            None => format!(
                "its calls in flight finish first (at most {} s, shutdownGraceSeconds)",
                grace.as_secs()
            ),
        };
        eprintln!("ovai: waiting for the server (pid {pid}) to stop: {what}…");
    });
    if ended {
        return Ok(());
    }
    Err(Failure::new(
        format!(
            "The ovai server for {} (pid {pid}) was asked to stop and is still running {} s later; \
             `kill {pid}` ends it (its calls in flight are then answered by their bridges).",
            inst.root.display(),
            client::stop_patience(inst).as_secs(),
        ),
        exit::FAILED,
    ))
}
