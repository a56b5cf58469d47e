//! `ovai status`: what the running daemon serves, and to whom.

use super::{Failure, exit, fail};
use crate::client;
use crate::instance::Instance;
use crate::tools::index::sessions_now;
use crate::wire::{ControlOp, StatusReply};

pub fn run(inst: &Instance, json: bool) -> Result<(), Failure> {
    let v: StatusReply = client::control(inst, ControlOp::Status).map_err(fail(exit::FAILED))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    println!(
        "ovai serve for {} (pid {}), up {} s since {}.",
        v.root, v.pid, v.uptime_seconds, v.started_at
    );
    let host = match (&v.host.down, v.host.pid) {
        (Some(why), _) => format!("down: {why}"),
        (None, Some(pid)) => format!("pid {pid}"),
        (None, None) => "being respawned".into(),
    };
    println!(
        "Generation {} (read at {}), Node {}; plugin host {host}, {}.",
        v.generation,
        v.loaded_at,
        v.node,
        respawned(v.host.respawns)
    );
    println!("{}", v.host.isolation);
    println!("Tools: {}.", v.tools.join(", "));
    if v.stale.is_empty() {
        println!("plugins/ is as it was read.");
    } else {
        println!(
            "Changed since the last read (`ovai restart` serves them as they are now): {}.",
            v.stale.join(", ")
        );
    }
    if let Some(why) = &v.seats_error {
        println!("Seats: cannot be listed: {why}");
    }
    for seat in &v.seats {
        println!(
            "Seat {}: {}, {}.",
            seat.name,
            seat.role,
            sessions_now(seat.sessions)
        );
    }
    Ok(())
}

/// "never respawned", "respawned once", "respawned 3 times".
fn respawned(n: u32) -> String {
    match n {
        0 => "never respawned".into(),
        1 => "respawned once".into(),
        n => format!("respawned {n} times"),
    }
}
