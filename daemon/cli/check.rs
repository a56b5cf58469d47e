//! `ovai check [FILE…]`: what a restart would make of plugins/, from a throw-away host that touches no
//! running daemon. Prints the rows a restart would write; exits 1 if any candidate would not be served.

use std::path::Path;
use std::sync::atomic::AtomicU64;

use super::{Failure, exit, fail};
use crate::generation;
use crate::instance::Instance;
use crate::plugins::candidates::{self, Candidate};
use crate::plugins::load::{self, Verdict};
use crate::seats;
use crate::tools::BUILTINS;

pub fn run(inst: &Instance, files: &[String]) -> Result<(), Failure> {
    let config = inst.read_config().map_err(super::config_failure)?;
    for warning in &config.warnings {
        println!("{warning}");
    }
    let dir = inst.plugins_dir();
    let found = if files.is_empty() {
        load::scan(&dir).map_err(fail(exit::FAILED))?
    } else {
        files
            .iter()
            .map(|f| named(&dir, f))
            .collect::<Result<Vec<_>, _>>()?
    };
    seats::ensure_private_dir(inst).map_err(fail(exit::FAILED))?;
    // A shim of its own: the daemon's .ovai/host.mjs is what its host restarts from, and stays as it is.
    let shim = inst
        .private_dir()
        .join(format!("host-check-{}.mjs", std::process::id()));
    crate::host::child::write_shim(&shim)
        .map_err(|e| Failure::new(format!("{} cannot be written: {e}.", shim.display()), 1))?;
    let launch = generation::launch(inst, &config, &shim).map_err(fail(exit::FAILED))?;
    let init = generation::host_init(inst, &config);
    // As a start does: a file saved while it is read is not served.
    let snapshot = crate::plugins::stale::Snapshot::take(&dir, &found);
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(fail(exit::FAILED))
        .and_then(|rt| {
            rt.block_on(async {
                let mut loaded = load::load(
                    &dir,
                    found,
                    &launch,
                    &init,
                    &AtomicU64::new(1),
                    config.import_timeout,
                )
                .await?;
                loaded.refuse_changed(&dir, &snapshot);
                let mut process = loaded.process;
                process.kill().await;
                Ok::<_, load::LoadError>(loaded.verdicts)
            })
            .map_err(fail(exit::FAILED))
        });
    let _ = std::fs::remove_file(&shim);
    let verdicts = result?;
    for (c, v) in &verdicts {
        for row in v.rows(c.file()) {
            println!("{row}");
        }
    }
    let refused = verdicts
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::NotServed(_)))
        .count();
    match refused {
        0 => Ok(()),
        n => Err(Failure::new(
            format!(
                "{n} of the {} files checked would not be served.",
                verdicts.len()
            ),
            1,
        )),
    }
}

/// A file named on the command line, as a candidate of plugins/: `plugins/x.mjs`, `x.mjs` or `x`.
fn named(dir: &Path, arg: &str) -> Result<Candidate, Failure> {
    let path = Path::new(arg);
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = if !file.contains('.') && !dir.join(&file).exists() {
        format!("{file}.mjs")
    } else {
        file
    };
    let inside = path.parent().is_none_or(|p| {
        p.as_os_str().is_empty()
            || p == Path::new("plugins")
            || crate::instance::absolute(p) == crate::instance::absolute(dir)
    });
    if !inside {
        return Err(Failure::new(
            format!(
                "{arg} is not a file in plugins/; ovai check looks only at the tools of this instance."
            ),
            2,
        ));
    }
    if dir.join(&file).is_dir() {
        return Err(Failure::new(
            format!(
                "plugins/{file} is a folder, not a plugin's file: a tool is one .mjs file in plugins/."
            ),
            2,
        ));
    }
    if !dir.join(&file).is_file() {
        return Err(Failure::new(
            format!("plugins/{file} does not exist; `ovai plugin NAME` makes a new one."),
            2,
        ));
    }
    candidates::classify(file.clone(), BUILTINS).ok_or_else(|| {
        Failure::new(
            format!(
                "plugins/{file} is not a tool file (only .mjs files are); restart gives it no row."
            ),
            2,
        )
    })
}
