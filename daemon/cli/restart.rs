//! `ovai restart`: read plugins/ and openovai.json again in the running daemon, and print the plugins rows.

use super::{Failure, unreached};
use crate::client;
use crate::instance::Instance;
use crate::wire::{ControlOp, RestartReply};

pub fn run(inst: &Instance) -> Result<(), Failure> {
    // systemd runs ExecReload with MAINPID set: the row then says the service manager asked.
    let reload = std::env::var_os("MAINPID").is_some();
    let why = if reload {
        "the service manager's reload"
    } else {
        "`ovai restart`"
    };
    // Imports that wait hold the answer up to importTimeoutSeconds: said once they take a while, as
    // `ovai check` says it, so that the wait is not taken for a hang.
    let (done, waiting) = std::sync::mpsc::channel::<()>();
    let timeout = inst.read_config().map(|c| c.import_timeout).ok();
    if let Some(timeout) = timeout.filter(|t| *t > super::SAY_WAITING_AFTER) {
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                waiting.recv_timeout(super::SAY_WAITING_AFTER)
            {
                eprintln!(
                    "ovai: the restart is taking a while: the new plugin host is still importing plugins/, and \
                     the tools served now go on being served until it is done. A file whose import has not \
                     finished within {} s (importTimeoutSeconds) is named then, and not served.",
                    timeout.as_secs()
                );
            }
        });
    }
    let r: RestartReply =
        client::control_because(inst, ControlOp::Restart, Some(why)).map_err(unreached)?;
    drop(done);
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
    // As `ovai check` does: a script that restarts after an edit learns that a file is left out. Not
    // so the service manager's reload: the new reading serves, and a failed reload reads as none.
    match r.not_served {
        0 => Ok(()),
        _ if reload => Ok(()),
        n => Err(Failure::new(
            format!(
                "{} in plugins/ {} not served (the rows above say why); the other tools are served as read. Fix \
                 {}, then `ovai restart` again (`ovai check` says which without a restart).",
                // .mjs: a `.js` helper beside the tools has its row above, and is no tool to fix.
                crate::names::counted(n, ".mjs file", ".mjs files"),
                if n == 1 { "is" } else { "are" },
                if n == 1 { "it" } else { "them" },
            ),
            super::exit::FAILED,
        )),
    }
}
