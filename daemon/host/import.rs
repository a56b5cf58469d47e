//! Importing plugin files into a fresh host: the one loop that a start (or `ovai restart`) and a respawn
//! after a crash both go through.
//!
//! A host is sent every file at once, so a top-level `await` that is slow, or never settles, costs one
//! import timeout in all rather than one each. Files still importing once the host has answered pings
//! for the timeout since a file last finished (time its event loop was held by a plugin does not count)
//! are left out; the host, which would go on running them, is not kept: a new one imports the others,
//! again all at once (a new process is the only way to a clean module cache).
//!
//! A plugin that ends the host or holds its event loop is found by what the host says: the file it names,
//! under its key on fd 4, as having ended it (`process.kill`, `abort`, `reallyExit`, from a timer too), or
//! the file its watcher thread finds on the held main thread's stack. That file is left out and the others go on
//! together. When the host says neither, the next host imports the files one at a time, and the file
//! importing when a host ends or stops answering is left out.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::blame;
use super::child::Launch;
use super::ending::{Exit, StartError};
use super::process::{HostInit, HostProcess, Together};
use super::protocol::Loaded;
use super::protocol::ToImport;

/// How importing one file ended.
pub enum Imported {
    /// The host imported it (or tried) and reported what it found.
    Reported(Box<Loaded>),
    /// Importing it ended the host: how the host ended, and the bound of its box it went past, if it did
    /// (memory, processes: the kernel's kill says nothing of why).
    StoppedHost(Exit, Option<super::bounds::Exceeded>),
    /// Importing it took longer than the import timeout.
    Hung,
    /// Its code held the host's event loop for the import timeout, at this place (`plugins/x.mjs:3:5`).
    Held(String),
}

/// The host that imported every file it could, ready to serve calls, and one outcome per file in order.
pub struct Import {
    pub process: HostProcess,
    pub outcomes: Vec<Imported>,
}

/// `first`: a host already started with `init` for this import (while its files were read), or none.
pub async fn import_all(
    mut first: Option<HostProcess>,
    launch: &Launch,
    init: &HostInit,
    files: &[ToImport],
    ids: &AtomicU64,
    timeout: Duration,
) -> Result<Import, StartError> {
    // The hosts of this import run the same files: an error one left behind is written once for all
    // (a host started before shares the book it was started with).
    let mut base = HostInit {
        strays: match &first {
            Some(_) => init.strays.clone(),
            None => Default::default(),
        },
        ..init.clone()
    };
    // Files that ended or hung a host, by position: they are not imported again.
    let mut left_out: HashMap<usize, Imported> = HashMap::new();
    let mut together = files.len() > 1;
    let mut rescuer_first = base.rescuer_first;
    'hosts: loop {
        base.rescuer_first = rescuer_first;
        let init = &base;
        let mut process = match first.take() {
            Some(started) => started,
            None => HostProcess::start(launch, init).await?,
        };
        let mut reports: HashMap<usize, Box<Loaded>> = HashMap::new();
        if together {
            let todo: Vec<(usize, &ToImport)> = files
                .iter()
                .enumerate()
                .filter(|(i, _)| !left_out.contains_key(i))
                .collect();
            match process.load_together(ids, &todo, timeout).await {
                Together::Done {
                    reported, pending, ..
                } if pending.is_empty() => {
                    reports.extend(reported);
                    return Ok(done(process, files.len(), left_out, reports));
                }
                Together::Done {
                    pending, blocked, ..
                } => {
                    if blocked {
                        // The host says where its event loop is held: that file is left out and the
                        // others go on together. A host whose second thread waited for the imports
                        // cannot: the next starts it first. Where that one cannot, one at a time.
                        match holder(&mut process, init, files, &left_out).await {
                            Some((j, at)) => {
                                left_out.insert(j, Imported::Held(at));
                            }
                            None if !init.rescuer_first => rescuer_first = true,
                            None => together = false,
                        }
                    } else {
                        left_out.extend(pending.into_iter().map(|i| (i, Imported::Hung)));
                    }
                    process.kill().await;
                    continue 'hosts;
                }
                Together::Stopped(exit) => {
                    // The host said which file ended it (its timer, say): the others go on together.
                    match culprit(&process, files, &left_out) {
                        Some(j) => {
                            let over = process.look().exceeded();
                            left_out.insert(j, Imported::StoppedHost(exit, over));
                        }
                        None => together = false,
                    }
                    continue 'hosts;
                }
            }
        }
        for (i, f) in files.iter().enumerate() {
            if left_out.contains_key(&i) {
                continue;
            }
            match process.load_together(ids, &[(i, f)], timeout).await {
                Together::Done { reported, .. } if !reported.is_empty() => {
                    reports.extend(reported);
                }
                Together::Done { blocked, .. } => {
                    if blocked {
                        // Named by where it is held, the file is left out and the rest go together again.
                        match holder(&mut process, init, files, &left_out).await {
                            Some((j, at)) => {
                                left_out.insert(j, Imported::Held(at));
                                together = files.len() - left_out.len() > 1;
                            }
                            // Its second thread waited for the imports: the next host starts it first.
                            None if !init.rescuer_first => rescuer_first = true,
                            None => {
                                left_out.insert(i, Imported::Hung);
                            }
                        }
                    } else {
                        left_out.insert(i, Imported::Hung);
                    }
                    process.kill().await;
                    continue 'hosts;
                }
                Together::Stopped(exit) => {
                    // A file imported before may have ended it from a timer: the host says which.
                    let j = culprit(&process, files, &left_out).unwrap_or(i);
                    let over = process.look().exceeded();
                    left_out.insert(j, Imported::StoppedHost(exit, over));
                    continue 'hosts;
                }
            }
        }
        return Ok(done(process, files.len(), left_out, reports));
    }
}

/// The file whose code holds the host's event loop, by the host's own stack (the innermost not left
/// out), and its place there, which the row shows.
async fn holder(
    process: &mut HostProcess,
    init: &HostInit,
    files: &[ToImport],
    left_out: &HashMap<usize, Imported>,
) -> Option<(usize, String)> {
    let frames = process.held_at().await;
    let dir = std::path::Path::new(&init.plugins_dir);
    blame::held_by(&frames, files.iter(), dir, |j| left_out.contains_key(&j))
        .into_iter()
        .next()
}

/// The position of the file the ended host said ended it, when it is one of these and not left out.
fn culprit(
    process: &HostProcess,
    files: &[ToImport],
    left_out: &HashMap<usize, Imported>,
) -> Option<usize> {
    let places = process.link.ended_at();
    blame::ended_by(&places, files.iter(), |j| left_out.contains_key(&j))
        .first()
        .map(|(j, _)| *j)
}

/// One outcome per file, in order.
fn done(
    process: HostProcess,
    files: usize,
    mut left_out: HashMap<usize, Imported>,
    mut reports: HashMap<usize, Box<Loaded>>,
) -> Import {
    let outcomes = (0..files)
        .map(|i| {
            left_out
                .remove(&i)
                .or_else(|| reports.remove(&i).map(Imported::Reported))
                .unwrap_or(Imported::Hung)
        })
        .collect();
    Import { process, outcomes }
}
