//! `ovai plugin NAME`: the first step of the author's loop.

use super::{Failure, exit};
use crate::instance::Instance;
use crate::plugins::scaffold;
use crate::wire::{ControlOp, ToolsReply};

pub fn run(inst: &Instance, name: &str) -> Result<(), Failure> {
    // Named as its file is (`plugins/ci-status.mjs`, `ci-status.mjs`): the tool's name is what is meant.
    let name = name.strip_prefix("plugins/").unwrap_or(name);
    let name = name.strip_suffix(".mjs").unwrap_or(name);
    // A name the running server serves is taken, even where its file is gone since the last read: a new
    // file of that name would be served as a change of that tool. (With no server running, plugins/ is
    // the list, and the scaffold checks it, as it does a built-in's name, which never came from a file.)
    // Whatever the case (`Fresh` for a served `fresh`), as the scaffold judges a file that is there.
    if crate::tools::builtin_like(name).is_none()
        && let Ok(reply) = crate::client::control::<ToolsReply>(inst, ControlOp::Tools)
        && let Some(served) = reply.tools.iter().find(|t| {
            t.name.eq_ignore_ascii_case(name)
                && !inst.plugins_dir().join(format!("{}.mjs", t.name)).exists()
        })
    {
        let served = &served.name;
        let case = if served == name {
            String::new()
        } else {
            format!(" ({name} differs from it only in case, and would be taken for it)")
        };
        return Err(Failure::new(
            format!(
                "The server serves a tool called {served} already{case}, from plugins/{served}.mjs as it was read \
                 at its last start or `ovai restart`; that file is gone since. Run `ovai restart` to stop serving \
                 it, then `ovai plugin {name}`, or pick another name."
            ),
            exit::FAILED,
        ));
    }
    let path = scaffold::write(&inst.plugins_dir(), name).map_err(|e| {
        // A name no tool can have is a usage problem; the others are refusals of a good name.
        let code = match e {
            scaffold::ScaffoldError::BadName { .. } => exit::USAGE,
            _ => exit::FAILED,
        };
        Failure::new(e, code)
    })?;
    println!("Wrote plugins/{name}.mjs ({}).", path.display());
    // Each client the desks are made for names it its own way.
    let clients =
        crate::seats::desk_clients(inst).unwrap_or_else(|_| crate::instance::Client::ALL.to_vec());
    let shown: Vec<String> = clients
        .iter()
        .map(|c| match clients.len() {
            1 => c.tool_name(name),
            _ => format!("{} in {}", c.tool_name(name), c.name()),
        })
        .collect();
    println!(
        "Next: edit it, check it with `ovai check plugins/{name}.mjs`, then `ovai restart` serves it to every seat \
         as {}.",
        shown.join(", ")
    );
    Ok(())
}
