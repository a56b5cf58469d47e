//! `ovai plugin NAME`: the first step of the author's loop.

use super::{Failure, exit};
use crate::instance::Instance;
use crate::plugins::scaffold;

pub fn run(inst: &Instance, name: &str) -> Result<(), Failure> {
    let path = scaffold::write(&inst.plugins_dir(), name).map_err(|e| {
        // A name no tool can have is a usage problem; the others are refusals of a good name.
        let code = match e {
            scaffold::ScaffoldError::BadName { .. } => exit::USAGE,
            _ => exit::FAILED,
        };
        Failure::new(e, code)
    })?;
    println!("Wrote plugins/{name}.mjs ({}).", path.display());
    println!(
        "Next: edit it, check it with `ovai check plugins/{name}.mjs`, then `ovai restart` serves it to every seat as mcp__openovai__{name}."
    );
    Ok(())
}
