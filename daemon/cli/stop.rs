//! `ovai stop`: the running daemon finishes its calls (within shutdownGraceSeconds), answers the rest,
//! ends its plugin host and exits; this waits until it has.

use std::time::{Duration, Instant};

use super::{Failure, exit, unreached};
use crate::client::{self, ClientError};
use crate::instance::Instance;
use crate::wire::{ControlOp, StopReply};

pub fn run(inst: &Instance) -> Result<(), Failure> {
    let reply: StopReply = match client::control(inst, ControlOp::Stop) {
        Ok(r) => r,
        Err(ClientError::NoServer { root }) => {
            println!("No ovai server is running for {root}; there is nothing to stop.");
            return Ok(());
        }
        Err(e) => return Err(unreached(e)),
    };
    let grace = inst
        .read_config()
        .map_or(Duration::from_secs(10), |c| c.shutdown_grace);
    let deadline = Instant::now() + grace + Duration::from_secs(30);
    while running(reply.pid) {
        if Instant::now() > deadline {
            return Err(Failure::new(
                format!(
                    "The ovai server for {} (pid {}) was asked to stop and is still running {} s later; \
                     `kill {}` ends it (its calls in flight are then answered by their bridges).",
                    inst.root.display(),
                    reply.pid,
                    (grace + Duration::from_secs(30)).as_secs(),
                    reply.pid
                ),
                exit::FAILED,
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "Stopped the ovai server for {} (pid {}).",
        inst.root.display(),
        reply.pid
    );
    Ok(())
}

/// Whether the process still runs: there, and not a zombie waiting for its parent to reap it.
fn running(pid: u32) -> bool {
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}
