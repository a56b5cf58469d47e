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
    let changed = if r.changed {
        "the tool list changed, and connected sessions were told"
    } else {
        "the tool list is the same"
    };
    let new_code = if r.new_code.is_empty() {
        String::new()
    } else {
        format!(" New code runs for: {}.", r.new_code.join(", "))
    };
    println!(
        "Restarted: generation {} serves now; {changed}.{new_code}",
        r.generation
    );
    Ok(())
}
