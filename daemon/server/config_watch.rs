//! Watches openovai.json and says in runtime.log when it no longer matches the settings served, or cannot
//! be used, or is as read again: the server goes on with what it read until `ovai restart`, and a person
//! following `ovai logs -f` after an edit is told so then, not at the next `ovai status` (helper-82).

use std::sync::Arc;

use notify::{RecursiveMode, Watcher};

use super::daemon::Daemon;
use super::watch::{QUIET, says_a_change};
use crate::instance::{CONFIG_CHANGED, CONFIG_FILE};
use crate::runtime_log::Topic;

/// What the file is now, against the settings served.
#[derive(PartialEq)]
enum Found {
    AsRead,
    Changed,
    /// Why it cannot be used, in words.
    Unusable(String),
}

/// Starts watching the instance's folder for saves of openovai.json; a watch that cannot be set up is a
/// row, not a failure of the server (`ovai status` still says a change).
pub fn spawn(daemon: Arc<Daemon>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watched = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // The folder is the workspace: only this one file's changes wake the task.
        if let Ok(e) = event
            && says_a_change(&e)
            && e.paths
                .iter()
                .any(|p| p.file_name().is_some_and(|n| n == CONFIG_FILE))
        {
            let _ = tx.send(());
        }
    })
    .and_then(|mut w| {
        w.watch(&daemon.inst.root, RecursiveMode::NonRecursive)?;
        Ok(w)
    });
    let watcher = match watched {
        Ok(w) => w,
        Err(e) => {
            daemon.log.row(
                Topic::Server,
                &format!(
                    "{CONFIG_FILE} cannot be watched for changes: {e}. Its edits are not said in this log; \
                     `ovai status` still says them."
                ),
            );
            return;
        }
    };
    let tasks = daemon.tasks.clone();
    tasks.spawn(async move {
        let _watcher = watcher;
        // What was last said, for the generation it was said against: a restart reads the file anew.
        let mut said = (daemon.current().number, Found::AsRead);
        loop {
            tokio::select! {
                heard = rx.recv() => if heard.is_none() { return },
                _ = daemon.closing.cancelled() => return,
            }
            while let Ok(Some(())) = tokio::time::timeout(QUIET, rx.recv()).await {}
            let generation = daemon.current();
            if generation.number != said.0 {
                said = (generation.number, Found::AsRead);
            }
            let inst = daemon.inst.clone();
            let now = tokio::task::spawn_blocking(move || inst.read_config())
                .await
                .map_err(|e| e.to_string())
                .and_then(|read| read.map_err(|e| e.to_string()));
            let found = match now {
                Ok(config) if config.raw == generation.config.raw => Found::AsRead,
                Ok(_) => Found::Changed,
                Err(why) => Found::Unusable(why),
            };
            // A server stopping (its instance moved or removed) reads nothing again: no row says it goes on.
            if daemon.closing.is_cancelled() || !daemon.inst.root.exists() {
                return;
            }
            if found == said.1 {
                continue;
            }
            daemon.log.row(Topic::Server, &row(&found));
            said.1 = found;
        }
    });
}

fn row(found: &Found) -> String {
    match found {
        Found::AsRead => format!("{CONFIG_FILE} is as the server read it again."),
        Found::Changed => CONFIG_CHANGED.to_string(),
        Found::Unusable(why) => format!(
            "{CONFIG_FILE} changed since the last read and cannot be used as it is: {why} The server goes on \
             with the settings it read; fix it, then `ovai restart`."
        ),
    }
}
