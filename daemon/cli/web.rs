//! `ovai web`: a one-time link to the running server's status page (good for a minute, for one use),
//! asked for through the control socket, so only whoever holds the control secret gets one.

use super::{Failure, unreached};
use crate::client;
use crate::instance::Instance;
use crate::wire::{ControlOp, WebEnded, WebReply};

pub fn run(inst: &Instance, end: bool) -> Result<(), Failure> {
    if end {
        let ended: WebEnded = client::control(inst, ControlOp::WebEnd).map_err(unreached)?;
        println!(
            "Ended {} and {}: a browser showing the page is refused from now on; `ovai web` prints a new link.",
            crate::names::counted(ended.sessions, "page session", "page sessions"),
            crate::names::counted(ended.links, "unused link", "unused links")
        );
        return Ok(());
    }
    let reply: WebReply = client::control(inst, ControlOp::Web).map_err(unreached)?;
    println!("{}", reply.url);
    eprintln!(
        "Open it within {} s, once: the page then keeps a cookie of its own for 12 hours.",
        reply.seconds
    );
    Ok(())
}
