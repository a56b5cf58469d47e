//! `ovai seat add|list|remove`.

use super::{Failure, SeatAction, exit, fail, own_exe};
use crate::client::{self, ClientError};
use crate::instance::Instance;
use crate::seats::{self, SeatBook};
use crate::tools::index::sessions_now;
use crate::wire::{ControlOp, SeatsReply, StatusReply};

pub fn run(inst: &Instance, action: SeatAction) -> Result<(), Failure> {
    match action {
        SeatAction::Add { name } => {
            let added = seats::add(inst, &name, &own_exe()?).map_err(fail(exit::FAILED))?;
            let role = inst
                .read_config()
                .map(|c| c.role_of(&name).to_string())
                .unwrap_or_else(|_| "Worker".into());
            println!("Added the seat {name} ({role}).");
            for w in &added.warnings {
                eprintln!("ovai: warning: {w}");
            }
            // A running daemon gives its plugin host a box that hides the new seat's secret too.
            if let Err(e) = client::control::<SeatsReply>(inst, ControlOp::Seats)
                && !matches!(e, ClientError::NoServer { .. })
            {
                eprintln!(
                    "ovai: warning: the running server could not be told of the new seat, so its plugin host may read the seat's secret until it is restarted: {e}"
                );
            }
            println!(
                "Its desk is {}: an MCP client started there reads {} and is {name}.",
                inst.desk(&name).display(),
                added
                    .mcp_json
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            );
            Ok(())
        }
        SeatAction::List => {
            let book = SeatBook::load(inst).map_err(fail(exit::FAILED))?;
            let config = inst.read_config().map_err(fail(exit::FAILED))?;
            let sessions = match client::control::<StatusReply>(inst, ControlOp::Status) {
                Ok(v) => Some(v),
                Err(ClientError::NoServer { .. }) => None,
                Err(e) => return Err(fail(exit::FAILED)(e)),
            };
            if book.seats.is_empty() {
                println!("No seats yet: `ovai seat add NAME` makes one.");
            }
            for name in book.names() {
                let role = config.role_of(name);
                let now = match &sessions {
                    None => String::new(),
                    Some(v) => {
                        let n = v
                            .seats
                            .iter()
                            .find(|s| s.name == name)
                            .map_or(0, |s| s.sessions);
                        format!(", {}", sessions_now(n))
                    }
                };
                println!("{name}: {role}{now}");
            }
            if sessions.is_none() && !book.seats.is_empty() {
                println!("(No server is running, so nobody is connected.)");
            }
            Ok(())
        }
        SeatAction::Rebuild => {
            let rebuilt = seats::rebuild(inst).map_err(fail(exit::FAILED))?;
            for (seat, why) in &rebuilt.left_out {
                eprintln!("ovai: warning: desks/{seat} was left out: {why}.");
            }
            println!(
                "Rebuilt {} from the desks: {}.",
                inst.seats_file().display(),
                if rebuilt.seats.is_empty() {
                    "no seat".to_string()
                } else {
                    rebuilt.seats.join(", ")
                }
            );
            if let Ok(config) = inst.read_config()
                && !rebuilt.seats.contains(&config.leader)
            {
                eprintln!(
                    "ovai: warning: the Leader's seat {} has no desk with a secret; `ovai seat add {}` makes it.",
                    config.leader, config.leader
                );
            }
            // A running daemon ends the sessions of seats that are not in the rebuilt list.
            match client::control::<SeatsReply>(inst, ControlOp::Seats) {
                Ok(_) | Err(ClientError::NoServer { .. }) => Ok(()),
                Err(e) => Err(fail(exit::FAILED)(e)),
            }
        }
        SeatAction::Remove { name } => {
            seats::remove(inst, &name).map_err(fail(exit::FAILED))?;
            let ended = match client::control::<SeatsReply>(inst, ControlOp::Seats) {
                Ok(v) => v.ended.len(),
                Err(ClientError::NoServer { .. }) => 0,
                Err(e) => {
                    println!(
                        "Removed the seat {name}; its desk {} stays.",
                        inst.desk(&name).display()
                    );
                    return Err(Failure::new(
                        format!(
                            "The running server could not be told, so a session of {name} may still be connected: {e}"
                        ),
                        exit::FAILED,
                    ));
                }
            };
            println!(
                "Removed the seat {name}{}; its desk {} stays.",
                match ended {
                    0 => String::new(),
                    1 => ", and ended its session".into(),
                    n => format!(", and ended its {n} sessions"),
                },
                inst.desk(&name).display()
            );
            Ok(())
        }
    }
}
