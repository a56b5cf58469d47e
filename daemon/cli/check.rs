//! `ovai check [FILE…]`: what a restart would make of plugins/, from a throw-away host that touches no
//! running daemon. Prints the rows a restart would write; exits 1 if any candidate would not be served.

use std::path::Path;
use std::sync::atomic::AtomicU64;

use super::{Failure, exit, fail};
use crate::generation;
use crate::instance::Instance;
use crate::plugins::candidates::Candidate;
use crate::plugins::load::{self, Verdict};
use crate::plugins::plugin_rows;
use crate::seats;

pub fn run(inst: &Instance, files: &[String]) -> Result<(), Failure> {
    let config = inst.read_config().map_err(super::config_failure)?;
    for warning in &config.check_warnings() {
        println!("{warning}");
    }
    for said in crate::permissions::too_open(inst) {
        println!("{said}");
    }
    let dir = inst.plugins_dir();
    let mut not_checked: Vec<String> = Vec::new();
    // Named files are judged as the whole folder's read judges them (a name that differs from
    // another's only in case, a FIFO, a size), so check says of a file what a restart would.
    let all = load::scan(&dir).map_err(fail(exit::FAILED))?;
    // `ovai check plugins` is a check of all of it.
    let whole = |f: &String| {
        let p = Path::new(f);
        p == Path::new("plugins")
            || (p.is_dir() && crate::instance::absolute(p) == crate::instance::absolute(&dir))
    };
    let whole = files.is_empty() || files.iter().all(whole);
    // A tool written in a folder is said on a check of the whole folder, and counted as a file checked.
    let in_folders: Vec<String> = if whole {
        crate::plugins::candidates::tools_in_folders(&dir)
            .iter()
            .map(|(file, tool)| {
                plugin_rows::as_checked(&plugin_rows::in_a_folder(file, tool.as_deref()))
            })
            .collect()
    } else {
        Vec::new()
    };
    let found = if whole {
        all
    } else {
        let mut found: Vec<Candidate> = Vec::new();
        for f in files {
            match named(&dir, f, &all) {
                // Named twice, checked once.
                Ok(c) if found.iter().any(|seen| seen.file() == c.file()) => {}
                Ok(c) => found.push(c),
                // Said at once, and the others checked all the same, as `ls` goes on past a name.
                Err(e) => not_checked.push(e.sentence),
            }
        }
        if found.is_empty() {
            return Err(all_not_checked(not_checked));
        }
        for sentence in &not_checked {
            eprintln!("ovai: {sentence}");
        }
        found
    };
    if found.is_empty() {
        if in_folders.is_empty() {
            println!("plugins/ holds no tool files yet; `ovai plugin NAME` writes one.");
            return Ok(());
        }
        in_folders.iter().for_each(|row| println!("{row}"));
        let n = in_folders.len();
        return Err(Failure::new(
            format!("{n} of the {n} files checked would not be served."),
            1,
        ));
    }
    seats::ensure_private_dir(inst).map_err(fail(exit::FAILED))?;
    sweep_shims(&inst.private_dir());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(fail(exit::FAILED))?;
    // Listened for before the shim is written: stopped from outside (a Ctrl-C, a timeout's TERM), the
    // check still takes its shim away; its host, killed when dropped, takes its box with it.
    let stopped = {
        let _in = rt.enter();
        stop_signals()
    };
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
    let work = async {
        let mut loaded = load::load(
            None,
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
        Ok::<_, load::LoadError>((loaded.notes, loaded.verdicts))
    };
    // A hung import is named only at its timeout: until then, check says why it waits.
    let import_timeout = config.import_timeout;
    let slow = async move {
        // With a timeout this short, the file is named before anything need be said.
        if import_timeout <= super::SAY_WAITING_AFTER {
            return std::future::pending().await;
        }
        tokio::time::sleep(super::SAY_WAITING_AFTER).await;
        eprintln!(
            "ovai: the imports are taking a while; a file whose import has not finished within {} s \
             (importTimeoutSeconds) is named then, and would not be served.",
            import_timeout.as_secs()
        );
        // Said once; the imports' own end decides.
        std::future::pending().await
    };
    let result = rt.block_on(async {
        tokio::select! {
            done = work => done.map_err(fail(exit::FAILED)),
            never = slow => never,
            (name, code) = stopped => Err(Failure::new(
                format!("ovai check was stopped by {name} before it finished; nothing was changed."),
                code,
            )),
        }
    });
    drop(rt);
    default_signals();
    let _ = std::fs::remove_file(&shim);
    let (notes, verdicts) = result?;
    for note in &notes {
        println!("{}", plugin_rows::as_checked(note));
    }
    for (c, v) in &verdicts {
        for row in v.rows(c.file()) {
            println!("{}", plugin_rows::as_checked(&row));
        }
    }
    in_folders.iter().for_each(|row| println!("{row}"));
    let refused = verdicts
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::NotServed(_)))
        .count()
        + in_folders.len();
    let checked = verdicts.len() + in_folders.len();
    match (refused, not_checked.len()) {
        (0, 0) => Ok(()),
        (n, 0) => Err(Failure::new(
            format!("{n} of the {checked} files checked would not be served."),
            1,
        )),
        (n, bad) => {
            let was = if bad == 1 { "was" } else { "were" };
            let served = match n {
                0 => "the rest would be served".to_string(),
                n => format!("{n} of the {checked} checked would not be served"),
            };
            Err(Failure::new(
                format!("{bad} of the names given {was} not checked (said above); {served}."),
                2,
            ))
        }
    }
}

/// None of the names given is a file to check: each said, the last as the failure.
fn all_not_checked(mut sentences: Vec<String>) -> Failure {
    let last = sentences.pop().unwrap_or_default();
    for sentence in &sentences {
        eprintln!("ovai: {sentence}");
    }
    Failure::new(last, 2)
}

/// Listens for the signals that ask a command to stop (within a runtime's context); the future resolves
/// with the first one's name and the exit code a shell gives it.
fn stop_signals() -> impl std::future::Future<Output = (&'static str, i32)> {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    async move {
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = handlers else {
            // Without handlers a signal ends the command as it always would: nothing to wait for here.
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => ("SIGTERM", 143),
            _ = int.recv() => ("SIGINT", 130),
            _ = hup.recv() => ("SIGHUP", 129),
        }
    }
}

/// Gives the stop signals their default effect back: what is left (printing the rows) ends at once on
/// a Ctrl-C, as any command does.
fn default_signals() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: SIG_DFL runs no code of ours in a handler; the runtime that listened is gone.
        let _ = unsafe { signal(s, SigHandler::SigDfl) };
    }
}

/// Removes the shims of checks that were killed outright (a SIGKILL leaves no chance to): those whose
/// process is gone.
fn sweep_shims(private: &Path) {
    const SHIM_OUTLIVES: std::time::Duration = std::time::Duration::from_secs(3600);
    let Ok(entries) = std::fs::read_dir(private) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("host-check-"))
            .and_then(|n| n.strip_suffix(".mjs"))
            .and_then(|n| n.parse::<i32>().ok());
        let Some(pid) = pid.filter(|p| *p > 0) else {
            continue;
        };
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        // A check in another process namespace (a container sharing the workspace) is not seen from
        // here: a shim is taken away only once it is older than any check runs.
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > SHIM_OUTLIVES);
        if gone && old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A file named on the command line, as a candidate of plugins/ (`all`): `plugins/x.mjs`, `x.mjs` or
/// `x`.
fn named(dir: &Path, arg: &str, all: &[Candidate]) -> Result<Candidate, Failure> {
    let path = Path::new(arg);
    let Some(file) = path.file_name().map(|f| f.to_string_lossy().into_owned()) else {
        // '', '.', '..': no file's name.
        return Err(Failure::new(
            format!(
                "{arg:?} is not a file in plugins/; ovai check names plugins/NAME.mjs, NAME.mjs or NAME."
            ),
            2,
        ));
    };
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
    let below = path.parent().is_some_and(|p| {
        let climbs = p.components().any(|c| c == std::path::Component::ParentDir);
        (p.starts_with("plugins") && !climbs)
            || crate::instance::absolute(p).starts_with(crate::instance::absolute(dir))
    });
    if !inside && below {
        return Err(Failure::new(
            format!(
                "{} is in a subfolder of plugins/, where a file is code tools import, never a tool: check a \
                 tool that imports it (what it imports is checked with it).",
                crate::names::clipped(arg, 200)
            ),
            2,
        ));
    }
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
    if let Some(found) = all.iter().find(|c| c.file() == file) {
        return Ok(found.clone());
    }
    // Not a link either: nothing there.
    if std::fs::symlink_metadata(dir.join(&file)).is_err() {
        return Err(Failure::new(
            format!("plugins/{file} does not exist; `ovai plugin NAME` makes a new one."),
            2,
        ));
    }
    let why = if file.starts_with('.') {
        "is hidden (its name starts with a dot), and no hidden file is a tool"
    } else {
        "is not a tool file (only .mjs files are)"
    };
    Err(Failure::new(
        format!("plugins/{file} {why}; restart gives it no row."),
        2,
    ))
}
