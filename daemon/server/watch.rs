//! Watches plugins/ (and where its links lead) and says in runtime.log when a file there no longer
//! matches what is served, or does again: one row per changed file (however often it is saved again),
//! one row for a burst of many. It follows plugins/ removed, moved or made again. Nothing is re-read by itself; `ovai
//! restart` does that.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use super::daemon::Daemon;
use crate::plugins::candidates::{self, FolderMissing};
use crate::plugins::stale;
use crate::runtime_log::Topic;

/// Saves closer together than this are one burst (an editor writes, renames and touches in a row).
pub(super) const QUIET: Duration = Duration::from_millis(300);

/// A burst that goes on longer than this is looked at all the same: files changed amid endless churn
/// are said.
const LONGEST_BURST: Duration = Duration::from_secs(3);

/// While plugins/ is gone (or another folder took its place), how often it is looked for: the watch
/// was on the folder itself, and nothing is heard from there any more.
const LOOK_AGAIN: Duration = Duration::from_secs(2);

/// Starts watching; a watch that cannot be set up is a row, not a failure of the server.
pub fn spawn(daemon: Arc<Daemon>) {
    let dir = daemon.inst.plugins_dir();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (watcher, mut watched) = match watch(&dir, &tx) {
        Ok(w) => w,
        Err(e) => {
            daemon.log.row(Topic::Server, &cannot_watch(&e));
            return;
        }
    };
    let tasks = daemon.tasks.clone();
    tasks.spawn(async move {
        let mut watcher = Some(watcher);
        // Where plugins/' links lead, watched too: an edit there is an edit of the plugin.
        let mut linked = linked_files(&dir);
        let mut outside = watch_links(&linked, &tx);
        // What was last reported for each file, for the generation it was reported against: a file saved
        // again and again is said to have changed once (the row would say nothing new).
        let mut reported: HashMap<String, stale::Change> = HashMap::new();
        let mut reported_for = 0;
        // A folder that cannot be read is said once, not at every event.
        let mut unreadable_said = false;
        // The folder watched was itself removed or moved away: its watch hears nothing more, even if a
        // folder made in its place has its inode number again.
        let mut watch_ended = false;
        // The modules of plugins/' folders said to have changed, and the generation whose folders are
        // watched.
        let mut helpers_said: HashSet<String> = HashSet::new();
        let mut helpers_watched = (0, None);
        loop {
            // Listened for before the generation is looked at: a restart from then on wakes the wait.
            let swapped = daemon.swapped.notified();
            tokio::pin!(swapped);
            swapped.as_mut().enable();
            let generation = daemon.current();
            if generation.number != helpers_watched.0 {
                let folders = generation.helpers.folders();
                helpers_watched = (generation.number, watch_folders(&folders, &tx));
            }
            drop(generation);
            // Once the folder watched is not plugins/ any more, it is looked for now and then; and a
            // plugins/ that is a link, whose change of target is heard nowhere, now and then too.
            let lost = watch_ended || identity(&dir) != Some(watched);
            let look = if lost {
                Some(LOOK_AGAIN)
            } else if is_link(&dir) {
                Some(LOOK_AT_LINK)
            } else {
                None
            };
            let event = tokio::select! {
                e = rx.recv() => e,
                _ = tokio::time::sleep(look.unwrap_or_default()), if look.is_some() => None,
                // A restart's folders are watched from then on.
                _ = &mut swapped => continue,
                _ = daemon.closing.cancelled() => return,
            };
            let looked = event.is_none();
            // Each event is looked at as it comes and let go: a plugin making and removing files without
            // end once held them all (hundreds of megabytes), and its burst is cut at LONGEST_BURST.
            let mut errors = 0;
            let mut hear = |event: notify::Result<notify::Event>| match event {
                Ok(e) if ends_the_watch(&e, &dir) => watch_ended = true,
                Ok(_) => {}
                Err(e) if errors == 0 => {
                    errors += 1;
                    tracing::warn!(error = %e, "watching plugins/ reported an error");
                }
                Err(_) => {}
            };
            if let Some(event) = event {
                hear(event);
            }
            let cut = tokio::time::Instant::now() + LONGEST_BURST;
            while let Ok(Some(e)) = tokio::time::timeout(QUIET, rx.recv()).await {
                hear(e);
                if tokio::time::Instant::now() >= cut {
                    break;
                }
            }
            let here = identity(&dir);
            let back = here.is_some() && (watch_ended || here != Some(watched));
            if back {
                // Made again (or a link to another folder): the new one is watched, and read below.
                drop(watcher.take());
                watch_ended = false;
                match watch(&dir, &tx) {
                    Ok((w, id)) => (watcher, watched) = (Some(w), id),
                    Err(e) => {
                        // Not tried again until plugins/ changes again: one row, not one every look.
                        watched = here.unwrap_or_default();
                        daemon.log.row(Topic::Server, &cannot_watch(&e));
                    }
                }
            } else if looked && (!lost || unreadable_said) {
                // A look that found nothing new (the link leads where it led; still gone, and said so).
                continue;
            }
            let now_linked = linked_files(&dir);
            if now_linked != linked {
                drop(outside.take());
                outside = watch_links(&now_linked, &tx);
                linked = now_linked;
            }
            let generation = daemon.current();
            if generation.number != reported_for {
                reported.clear();
                helpers_said.clear();
                reported_for = generation.number;
            }
            // Reading and hashing files happens off the daemon's thread.
            let inst = daemon.inst.clone();
            let reading = generation.clone();
            let (found, helpers, gone) = tokio::task::spawn_blocking(move || {
                let (helpers, gone) = reading.helpers.changed_and_gone();
                (reading.stale(&inst), helpers, gone)
            })
            .await
            .unwrap_or_else(|e| {
                (Err(std::io::Error::other(e.to_string())), Vec::new(), Vec::new())
            });
            let named = |paths: &[std::path::PathBuf]| -> HashSet<String> {
                paths
                    .iter()
                    .filter_map(|p| p.strip_prefix(&dir).ok())
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect()
            };
            let gone = named(&gone);
            let helpers: HashSet<String> = named(&helpers).union(&gone).cloned().collect();
            let mut rows = Vec::new();
            match found {
                Ok(changes) => {
                    if std::mem::take(&mut unreadable_said) {
                        rows.push("plugins/ is there again, and can be read.".to_string());
                    }
                    // A file reported and now as the last read left it (an undo, `git stash`) is said
                    // to be so: its earlier row would otherwise stand.
                    let mut back: Vec<String> = {
                        let now: HashSet<&str> = changes.iter().map(|c| c.file()).collect();
                        reported
                            .keys()
                            .filter(|f| !now.contains(f.as_str()))
                            .cloned()
                            .collect()
                    };
                    back.sort_unstable();
                    for file in &back {
                        reported.remove(file);
                    }
                    // A host started while such a file was not as read left it out, and still does.
                    let left_out = left_out_as_changed(&generation);
                    let back: Vec<stale::Back> = back
                        .into_iter()
                        .map(|file| stale::Back {
                            left_out: left_out.contains(&file),
                            file,
                        })
                        .collect();
                    let mut fresh = Vec::new();
                    for change in changes {
                        if reported.get(change.file()) != Some(&change) {
                            reported.insert(change.file().to_string(), change.clone());
                            fresh.push(change);
                        }
                    }
                    rows.extend(stale::rows(&fresh, &back));
                }
                // The whole instance gone: the server stops (`private_dir`), and says so there.
                Err(_) if !daemon.inst.root.exists() => return,
                Err(e) if !unreadable_said => {
                    unreadable_said = true;
                    rows.push(match candidates::folder_missing(&e) {
                        Some(m) => format!(
                            "plugins/ {}; the plugins read last are still served. {}, then `ovai restart`.",
                            m.state(),
                            match m {
                                FolderMissing::Gone => "Put it back, or make it again (mkdir plugins)",
                                FolderMissing::FileInItsPlace => "Make it a folder again",
                            }
                        ),
                        None => format!(
                            "plugins/ cannot be read ({e}); the plugins read last are still served. `ovai restart` reads it once it can be read again."
                        ),
                    });
                }
                Err(_) => {}
            }
            let mut fresh: Vec<String> = helpers.difference(&helpers_said).cloned().collect();
            let mut back: Vec<String> = helpers_said.difference(&helpers).cloned().collect();
            fresh.sort_unstable();
            back.sort_unstable();
            if !fresh.is_empty() || !back.is_empty() {
                rows.extend(crate::helper_modules::rows(&fresh, &gone, &back));
                helpers_said = helpers;
            }
            // A server stopping (its instance moved or removed) serves nothing after: no row says it does.
            if daemon.closing.is_cancelled() {
                return;
            }
            daemon.log.rows(Topic::Plugins, &rows);
        }
    });
}

/// The files (as plugins/ names them) the live host did not import because they had changed or gone
/// since the last read.
fn left_out_as_changed(generation: &crate::generation::Generation) -> HashSet<String> {
    use crate::host::ending::NotReimported;
    generation
        .host
        .not_answering()
        .into_iter()
        .filter(|(_, why)| matches!(why, NotReimported::Changed | NotReimported::Removed))
        .filter_map(
            |(name, _)| match generation.tools.get(&name).map(|e| &e.kind) {
                Some(crate::tools::Kind::Plugin { file }) => {
                    file.strip_prefix("plugins/").map(str::to_string)
                }
                _ => None,
            },
        )
        .collect()
}

/// How often a plugins/ that is a link is looked at, to see where it leads.
const LOOK_AT_LINK: Duration = Duration::from_secs(5);

/// Whether `dir` is a link (to the folder that holds the plugins).
fn is_link(dir: &std::path::Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether an event says the folder watched was itself removed or moved: its watch is over.
fn ends_the_watch(event: &notify::Event, dir: &std::path::Path) -> bool {
    use notify::event::{EventKind, ModifyKind};
    matches!(
        event.kind,
        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
    ) && event.paths.iter().any(|p| p == dir)
}

/// Watches `dir` (through a link), sending what may be a change on `tx`; and the folder's identity.
fn watch(
    dir: &std::path::Path,
    tx: &tokio::sync::mpsc::UnboundedSender<notify::Result<notify::Event>>,
) -> notify::Result<(notify::RecommendedWatcher, (u64, u64))> {
    // Taken before the watch: a folder put in its place meanwhile is then another, and watched anew.
    let id = identity(dir).unwrap_or((0, 0));
    let tx = tx.clone();
    let mut w = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.as_ref().is_ok_and(|e| !says_a_change(e)) {
            return;
        }
        let _ = tx.send(event);
    })?;
    w.watch(dir, RecursiveMode::NonRecursive)?;
    Ok((w, id))
}

/// How many folders outside plugins/ its links may have watched: a plugin writing links to every
/// folder of the disk cannot take the system's watches.
const MAX_LINKED_FOLDERS: usize = 16;

/// The files outside plugins/ that its links (directly in it) lead to.
fn linked_files(dir: &std::path::Path) -> HashSet<std::path::PathBuf> {
    let Ok(real_dir) = std::fs::canonicalize(dir) else {
        return HashSet::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return HashSet::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| std::fs::canonicalize(e.path()).ok())
        .filter(|t| t.is_file() && t.parent() != Some(real_dir.as_path()))
        .collect()
}

/// A watch on the folders of `files`, sending on only what may be a change of one of them.
fn watch_links(
    files: &HashSet<std::path::PathBuf>,
    tx: &tokio::sync::mpsc::UnboundedSender<notify::Result<notify::Event>>,
) -> Option<notify::RecommendedWatcher> {
    if files.is_empty() {
        return None;
    }
    let wanted = files.clone();
    let tx = tx.clone();
    let mut w = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(e) = &event
            && (!says_a_change(e) || !e.paths.iter().any(|p| wanted.contains(p)))
        {
            return;
        }
        let _ = tx.send(event);
    })
    .ok()?;
    let folders: HashSet<&std::path::Path> = files.iter().filter_map(|f| f.parent()).collect();
    for folder in folders.into_iter().take(MAX_LINKED_FOLDERS) {
        let _ = w.watch(folder, RecursiveMode::NonRecursive);
    }
    Some(w)
}

/// How many of plugins/' folders are watched for the modules in them: a plugin making folders without
/// end cannot take the system's watches (`ovai status` lists a change in the others).
const MAX_MODULE_FOLDERS: usize = 256;

/// A watch on the folders holding the modules the tools import, sending on what may be a change there.
fn watch_folders(
    folders: &[std::path::PathBuf],
    tx: &tokio::sync::mpsc::UnboundedSender<notify::Result<notify::Event>>,
) -> Option<notify::RecommendedWatcher> {
    if folders.is_empty() {
        return None;
    }
    let tx = tx.clone();
    let mut w = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.as_ref().is_ok_and(|e| !says_a_change(e)) {
            return;
        }
        let _ = tx.send(event);
    })
    .ok()?;
    for folder in folders.iter().take(MAX_MODULE_FOLDERS) {
        let _ = w.watch(folder, RecursiveMode::NonRecursive);
    }
    Some(w)
}

/// Which folder `dir` is now (device and inode, through a link); `None` when there is none.
fn identity(dir: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino()))
}

/// Whether an event may mean a file changed. Opening and reading are not changes, and are not only
/// other processes': reading plugins/ after a change opens the folder and its files, and heard as events
/// that would read it again, every QUIET, for as long as the daemon ran.
pub(super) fn says_a_change(event: &notify::Event) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match event.kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        _ => true,
    }
}

fn cannot_watch(e: &notify::Error) -> String {
    let why = match &e.kind {
        notify::ErrorKind::MaxFilesWatch => {
            "the system's limit on watched files is reached (raise fs.inotify.max_user_watches)"
                .to_string()
        }
        _ => e.to_string(),
    };
    format!(
        "plugins/ cannot be watched for changes: {why}. Files saved there are not reported in this log; `ovai status` still lists them."
    )
}

#[cfg(test)]
mod tests {
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
    use notify::{Event, EventKind};

    use super::says_a_change;

    #[test]
    fn reading_a_file_is_not_a_change_and_writing_one_is() {
        let of = |kind| says_a_change(&Event::new(kind));
        assert!(!of(EventKind::Access(AccessKind::Open(AccessMode::Any))));
        assert!(!of(EventKind::Access(AccessKind::Close(AccessMode::Read))));
        assert!(of(EventKind::Access(AccessKind::Close(AccessMode::Write))));
        assert!(of(EventKind::Modify(ModifyKind::Any)));
        assert!(of(EventKind::Create(CreateKind::File)));
        assert!(of(EventKind::Remove(notify::event::RemoveKind::Any)));
    }
}
