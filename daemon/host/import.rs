//! Importing plugin files into a fresh host: the one loop that a start (or `ovai restart`) and a respawn
//! after a crash both go through.
//!
//! The first host is sent every file at once, so a top-level `await` that is slow, or never settles,
//! costs one import timeout in all rather than one each, and holds up nobody's start past it. A file
//! still importing at the timeout while the host answers a ping is waiting, not blocking: it is left out
//! and the host kept. When the host ends, or its event loop stops turning, which file did it is not known:
//! a new host then imports the files one at a time, and a file whose import ends that host or blocks it
//! is left out and another host started without it (a new process is the only way to a clean module
//! cache, so the files before it are imported again there).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::child::Launch;
use super::process::{Exit, HostInit, HostProcess, LoadEnd, StartError, Together};
use super::protocol::Loaded;

/// A file to import: the tool's name, and the module's absolute path.
#[derive(Debug, Clone)]
pub struct ToImport {
    pub name: String,
    pub path: String,
}

/// How long a host whose import outlived its timeout has to answer a ping, to be kept.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// How importing one file ended.
pub enum Imported {
    /// The host imported it (or tried) and reported what it found.
    Reported(Box<Loaded>),
    /// Importing it ended the host: how the host ended.
    StoppedHost(Exit),
    /// Importing it took longer than the import timeout.
    Hung,
}

/// The host that imported every file it could, ready to serve calls, and one outcome per file in order.
pub struct Import {
    pub process: HostProcess,
    pub outcomes: Vec<Imported>,
}

pub async fn import_all(
    launch: &Launch,
    init: &HostInit,
    files: &[ToImport],
    ids: &AtomicU64,
    timeout: Duration,
) -> Result<Import, StartError> {
    // Files that ended or hung a host, by position: they are not imported again.
    let mut left_out: HashMap<usize, Imported> = HashMap::new();
    let mut together = files.len() > 1;
    'hosts: loop {
        let mut process = HostProcess::start(launch, init).await?;
        let mut reports: HashMap<usize, Box<Loaded>> = HashMap::new();
        if std::mem::take(&mut together) {
            let all: Vec<(usize, &ToImport)> = files.iter().enumerate().collect();
            match process.load_together(ids, &all, timeout).await {
                Together::Done { reported, pending } => {
                    if pending.is_empty() || process.answers_within(ANSWER_WITHIN).await {
                        reports.extend(reported);
                        left_out.extend(pending.into_iter().map(|i| (i, Imported::Hung)));
                        return Ok(done(process, files.len(), left_out, reports));
                    }
                    process.kill().await;
                    continue 'hosts;
                }
                Together::Stopped => continue 'hosts,
            }
        }
        for (i, f) in files.iter().enumerate() {
            if left_out.contains_key(&i) {
                continue;
            }
            match process.load(ids, &f.name, &f.path, timeout).await {
                LoadEnd::Reported(l) => {
                    reports.insert(i, l);
                }
                LoadEnd::Stopped(exit) => {
                    left_out.insert(i, Imported::StoppedHost(exit));
                    continue 'hosts;
                }
                LoadEnd::TimedOut => {
                    left_out.insert(i, Imported::Hung);
                    if process.answers_within(ANSWER_WITHIN).await {
                        continue;
                    }
                    process.kill().await;
                    continue 'hosts;
                }
            }
        }
        return Ok(done(process, files.len(), left_out, reports));
    }
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
