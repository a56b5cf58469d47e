//! Importing plugin files into a fresh host, one at a time: the one loop that a start (or `ovai
//! restart`) and a respawn after a crash both go through. A file whose import ends the host, or never
//! finishes, is left out and a new host is started without it: a new process is the only way to a clean
//! module cache, so the files before it are imported again there.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::child::Launch;
use super::process::{Exit, HostInit, HostProcess, LoadEnd, StartError};
use super::protocol::Loaded;

/// A file to import: the tool's name, and the module's absolute path.
#[derive(Debug, Clone)]
pub struct ToImport {
    pub name: String,
    pub path: String,
}

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
    'hosts: loop {
        let mut process = HostProcess::start(launch, init).await?;
        let mut reports: HashMap<usize, Box<Loaded>> = HashMap::new();
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
                    process.kill().await;
                    left_out.insert(i, Imported::Hung);
                    continue 'hosts;
                }
            }
        }
        let outcomes = (0..files.len())
            .map(|i| {
                left_out
                    .remove(&i)
                    .or_else(|| reports.remove(&i).map(Imported::Reported))
                    .unwrap_or(Imported::Hung)
            })
            .collect();
        return Ok(Import { process, outcomes });
    }
}
