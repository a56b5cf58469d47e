//! `ovai restart`: read plugins/ and openovai.json again in the running daemon, and print the plugins rows.

use super::{Failure, exit, fail};
use crate::client;
use crate::instance::Instance;
use crate::wire::{ControlOp, RestartReply};

pub fn run(inst: &Instance) -> Result<(), Failure> {
    let r: RestartReply = client::control(inst, ControlOp::Restart).map_err(fail(exit::FAILED))?;
    for row in &r.rows {
        println!("{row}");
    }
    let changed = if r.changed {
        "the tool list changed, and connected sessions were told"
    } else {
        "the tool list is the same"
    };
    println!(
        "Restarted: generation {} serves now; {changed}.",
        r.generation
    );
    Ok(())
}
