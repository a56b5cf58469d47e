//! `ovai restart`: read plugins/ and openovai.json again in the running daemon, and print the plugins rows.

use super::{Failure, unreached};
use crate::client;
use crate::instance::Instance;
use crate::wire::{ControlOp, RestartReply};

pub fn run(inst: &Instance) -> Result<(), Failure> {
    // systemd runs ExecReload with MAINPID set: the row then says the service manager asked.
    let why = if std::env::var_os("MAINPID").is_some() {
        "the service manager's reload"
    } else {
        "`ovai restart`"
    };
    let r: RestartReply =
        client::control_because(inst, ControlOp::Restart, Some(why)).map_err(unreached)?;
    for row in &r.rows {
        println!("{row}");
    }
    // The row runtime.log has, as the one who asked it reads it (a daemon that sends none: its facts).
    let told = match (r.changed, r.told) {
        (false, _) | (true, 0) => String::new(),
        (true, 1) => " The one session connected was told.".to_string(),
        (true, n) => format!(" The {n} sessions connected were told."),
    };
    if r.said.is_empty() {
        let changed = if r.changed {
            "the tool list changed"
        } else {
            "the tool list is the same"
        };
        println!(
            "Restarted: generation {} serves now; {changed}.{told}",
            r.generation
        );
    } else {
        println!("{}{told}", r.said);
    }
    Ok(())
}
