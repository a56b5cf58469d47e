//! `ovai plugin NAME`: the first step of the author's loop.

use super::{Failure, exit, fail};
use crate::instance::Instance;
use crate::plugins::scaffold;

pub fn run(inst: &Instance, name: &str) -> Result<(), Failure> {
    let path = scaffold::write(&inst.plugins_dir(), name).map_err(fail(exit::FAILED))?;
    println!("Wrote plugins/{name}.mjs ({}).", path.display());
    println!(
        "Next: edit it, check it with `ovai check plugins/{name}.mjs`, then `ovai restart` serves it to every seat as mcp__openovai__{name}."
    );
    Ok(())
}
