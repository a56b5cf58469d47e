//! Keeps `.ovai/` the running server's. A file of it removed under the server (a clean-up, a careless
//! `rm`) would leave it unreachable, every command saying that none runs, or its lock gone, so that a
//! second server could start beside it: the socket, the lock, the control secret and the plugin host
//! are made again from what the server holds. The folder itself removed or replaced (`rm -rf .ovai`, a
//! `git clean -fdx`) took the seats' hashed secrets and the plugin host's view without them: the server
//! stops, saying so, rather than serve on from a folder nobody can vouch for.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;

use super::daemon::Daemon;
use crate::runtime_log::Topic;

/// Removals closer together than this are one clean-up: it is let finish before anything is made again
/// (a file made in a folder being removed would fail the removal half-way).
const QUIET: Duration = Duration::from_millis(100);
/// However long a clean-up goes on, what it removed is made again after this.
const MOST_QUIET: Duration = Duration::from_secs(2);

/// serve.lock, taken: held for the daemon's life, or another process's pid when it holds it.
pub enum Lock {
    Held(File),
    HeldBy(Option<u32>),
}

/// Takes `path` as the lock that says this daemon runs, writing its pid there.
pub fn lock(path: &Path) -> std::io::Result<Lock> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        // A link put in its place is never written through (it could lead to any file of this user's).
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::other(
                "it is a symbolic link, which ovai never makes there: remove it",
            ),
            _ => e,
        })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            return Ok(Lock::HeldBy(pid.trim().parse().ok()));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(Lock::Held(file))
}

type Identity = Option<(u64, u64)>;

fn identity(path: &Path) -> Identity {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

pub struct PrivateWatch {
    changed: Arc<tokio::sync::Notify>,
    watcher: Option<notify::RecommendedWatcher>,
    folder: Identity,
    folder_path: std::path::PathBuf,
    /// The folder itself, held open (`O_PATH`): where it is now, once its path no longer leads to it.
    held: Option<File>,
    socket: Identity,
    /// The locks held: as taken at the start, and any taken since.
    locks: Vec<(u64, u64)>,
    relocked: Vec<File>,
    /// When the first change not looked at yet was heard, and when to look.
    first: Option<tokio::time::Instant>,
    due: Option<tokio::time::Instant>,
    looked: tokio::time::Instant,
    /// Files that could not be made again, said once until they are: each try stirs the folder, and
    /// would be said again at once.
    failing: std::collections::HashSet<String>,
    /// While some are failing, the folder is looked at again then, and not before: a try every 100 ms
    /// (each stirring the folder) would keep the event loop busy.
    rest_until: Option<tokio::time::Instant>,
}

/// What a look at the folder found.
pub enum Look {
    /// As it was, or made so again.
    Kept,
    /// The socket was bound again: this listener takes its connections.
    Rebound(UnixListener),
    /// The folder was removed, replaced or opened to others, or another server took the lock: the
    /// server stops, with this row said, for this reason.
    Stop { row: String, why: &'static str },
}

/// How often the folder is looked at where it cannot be watched (the system's watches all taken).
const LOOK_AGAIN: Duration = Duration::from_secs(2);

impl PrivateWatch {
    /// Watches the private folder holding `socket` (bound just now), whose lock `held` is.
    pub fn new(socket: &Path, held: &File) -> Self {
        let folder = socket.parent().unwrap_or(Path::new("."));
        let changed = Arc::new(tokio::sync::Notify::new());
        Self {
            watcher: watch(folder, &changed),
            changed,
            folder: identity(folder),
            folder_path: folder.to_path_buf(),
            held: std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(folder)
                .ok(),
            socket: identity(socket),
            locks: held
                .metadata()
                .ok()
                .map(|m| (m.dev(), m.ino()))
                .into_iter()
                .collect(),
            relocked: Vec::new(),
            first: None,
            due: None,
            looked: tokio::time::Instant::now(),
            failing: std::collections::HashSet::new(),
            rest_until: None,
        }
    }

    /// The instance's root where its private folder is now, if the folder is still there, elsewhere:
    /// the instance was moved (or renamed) while the server ran.
    fn moved_to(&self) -> Option<std::path::PathBuf> {
        use std::os::fd::AsRawFd;
        let held = self.held.as_ref()?;
        let now = std::fs::read_link(format!("/proc/self/fd/{}", held.as_raw_fd())).ok()?;
        let gone = now.to_string_lossy().ends_with(" (deleted)");
        // Under its own name, in another folder: the folder around it moved (a private folder renamed
        // beside a new one is a replacement, said as such).
        let moved = now.file_name() == self.folder_path.file_name()
            && now.parent() != self.folder_path.parent();
        (!gone && moved)
            .then(|| now.parent().map(std::path::Path::to_path_buf))
            .flatten()
    }

    /// Whether the socket at `path` is still the one this watch bound (the last to remove it).
    pub fn bound(&self, path: &Path) -> bool {
        self.socket.is_some() && identity(path) == self.socket
    }

    /// Whether the private folder is still the one watched, and this user's alone.
    pub fn holds_folder(&self) -> bool {
        let Ok(m) = std::fs::symlink_metadata(&self.folder_path) else {
            return false;
        };
        Some((m.dev(), m.ino())) == self.folder && m.mode() & 0o077 == 0
    }

    /// Told of every change in the folder but reads.
    pub fn changed(&self) -> Arc<tokio::sync::Notify> {
        self.changed.clone()
    }

    /// Something changed in the folder: what was removed is looked at once the change is over (a file
    /// made again in a folder being removed would fail the removal half-way).
    pub fn heard(&mut self) {
        let now = tokio::time::Instant::now();
        let first = *self.first.get_or_insert(now);
        let due = (now + QUIET).min(first + MOST_QUIET);
        self.due = Some(self.rest_until.map_or(due, |rest| rest.max(due)));
    }

    /// When the last change heard is over; never while nothing was heard, but now and then where the
    /// folder cannot be watched.
    pub async fn quiet(&self) {
        match (self.due, &self.watcher) {
            (Some(due), _) => tokio::time::sleep_until(due).await,
            // From the last look, whatever else woke the caller meanwhile.
            (None, None) => tokio::time::sleep_until(self.looked + LOOK_AGAIN).await,
            (None, Some(_)) => std::future::pending().await,
        }
    }

    /// Makes again what was removed from the folder, or finds the folder itself gone.
    pub fn look(&mut self, daemon: &Daemon) -> Look {
        self.first = None;
        self.due = None;
        self.looked = tokio::time::Instant::now();
        let inst = &daemon.inst;
        let folder = inst.private_dir();
        if identity(&folder) != self.folder {
            if let Some(root) = self.moved_to() {
                return Look::Stop {
                    why: "the move of its instance's folder",
                    row: format!(
                        "The instance was moved from {} to {} while the server ran: the server stops (the calls \
                         in flight finish first), as it reads every file by its old path. Start it where the \
                         instance is now (`ovai serve --root {}`); `ovai seat rebuild` there points the desks \
                         at it.",
                        inst.root.display(),
                        root.display(),
                        crate::names::shell_quote(&root.to_string_lossy())
                    ),
                };
            }
            // The whole instance, not its private folder alone (an `rm -rf` of the workspace, or a move
            // `moved_to` cannot follow: to another disk, or where there is no /proc).
            if std::fs::symlink_metadata(&inst.root)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
            {
                return Look::Stop {
                    why: "the removal of its instance's folder",
                    row: format!(
                        "The instance's folder {} was removed or moved away while the server ran, and \
                         everything in it: the server stops (the calls in flight finish first). Put the folder \
                         back, or start a server where it is now, with `ovai serve`.",
                        inst.root.display()
                    ),
                };
            }
            return Look::Stop {
                why: "the removal of its private folder",
                row: format!(
                    "The private folder {} was removed or replaced while the server ran, and with it the lock that \
                 keeps a second server from starting, the control secret and the seats' hashed secrets: the \
                 server stops (the calls in flight finish first). Start it again with `ovai serve`; while \
                 desks/ is there, `ovai seat rebuild` first makes the seats again from the desks, keeping their \
                 secrets.",
                    folder.display()
                ),
            };
        }
        // Opened to others (a `chmod -R` of the workspace), or holding another user's file: they could
        // have read the control secret, or put a plugin host or seats of their own there. Nothing in it is
        // trusted again.
        if let Some(unsound) = inst.private_dir_unsound() {
            return Look::Stop {
                why: "its private folder found open to other users",
                row: format!(
                    "The private folder {} was found {unsound} while the server ran: other users could have read \
                     its control secret, or put files of their own there. The server stops (the calls in flight \
                     finish first). Look at what is in it (`ls -la {}`), remove what is not yours, run `chmod \
                     700` on it, and start the server again (`ovai serve`), which draws a new control secret.",
                    folder.display(),
                    folder.display()
                ),
            };
        }
        // The lock first: a server that lost it to another writes nothing into that one's folder.
        match self.relock(daemon) {
            Ok(None) => {}
            Ok(Some(said)) => daemon.log.row(
                Topic::Server,
                &format!(
                    "{} was removed or replaced while the server ran; {said}.",
                    inst.serve_lock().display()
                ),
            ),
            Err(row) => {
                return Look::Stop {
                    why: "another server taking its lock",
                    row,
                };
            }
        }
        for (what, said) in self.restore_files(daemon) {
            daemon.log.row(
                Topic::Server,
                &format!("{what} was removed or replaced while the server ran; {said}."),
            );
        }
        // Tried again then, whatever is heard meanwhile.
        self.rest_until =
            (!self.failing.is_empty()).then(|| tokio::time::Instant::now() + LOOK_AGAIN);
        self.due = self.rest_until;
        match self.rebind(daemon) {
            Some(l) => Look::Rebound(l),
            None => Look::Kept,
        }
    }

    /// The control secret and the plugin host, each written again when missing: as (the file, what was
    /// done, in words).
    fn restore_files(&mut self, daemon: &Daemon) -> Vec<(String, String)> {
        let inst = &daemon.inst;
        let mut said = Vec::new();
        // Missing, something else than a file in its place (a link, dangling or not), or changed in
        // place (commands would present a secret this server does not hold): a new file.
        let secret = inst.control_secret();
        let ignore = inst.private_gitignore();
        for (path, bytes) in [
            (&secret, daemon.control_secret.as_bytes()),
            (&ignore, crate::instance::PRIVATE_GITIGNORE),
        ] {
            match crate::files::keep_private(path, bytes) {
                Ok(false) => {}
                done => said.push(written(path, done.map(drop).map_err(|e| e.to_string()))),
            }
        }
        let shim = inst.host_shim();
        if !std::fs::symlink_metadata(&shim).is_ok_and(|m| m.file_type().is_file()) {
            let done = crate::host::child::write_shim(&shim);
            said.push(written(&shim, done.map_err(|e| e.to_string())));
        }
        // Without it, a server killed after a long day (its "is up" row rotated away) goes unsaid. Another
        // server's in its place is this one's again.
        let up = inst.serving_marker();
        let mine = crate::files::read_regular(&up, 4096)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["pid"].as_u64() == Some(u64::from(std::process::id())));
        if !mine {
            let done = mark(&up, &daemon.started_at);
            said.push(written(&up, done.map_err(|e| e.to_string())));
        }
        // A failure is said once, until the file is made.
        said.retain(|(what, done)| {
            if done.starts_with("it cannot be made again") {
                self.failing.insert(what.clone())
            } else {
                self.failing.remove(what);
                true
            }
        });
        said
    }

    /// Takes the lock again when serve.lock is none this daemon holds: what was done, in words, or
    /// Err with the row to stop on when another server holds it now.
    fn relock(&mut self, daemon: &Daemon) -> Result<Option<String>, String> {
        let path = daemon.inst.serve_lock();
        if identity(&path).is_some_and(|id| self.locks.contains(&id)) {
            return Ok(None);
        }
        let pid = std::process::id();
        match lock(&path) {
            Ok(Lock::Held(file)) => {
                self.locks
                    .extend(file.metadata().ok().map(|m| (m.dev(), m.ino())));
                self.relocked.push(file);
                Ok(Some(
                    "it is made again and held, so that no second server starts".into(),
                ))
            }
            Ok(Lock::HeldBy(other)) => Err(format!(
                "{} was taken meanwhile by another ovai serve{}, which serves this instance now: this one (pid \
                 {pid}) stops (the calls in flight finish first).",
                path.display(),
                other.map(|p| format!(" (pid {p})")).unwrap_or_default()
            )),
            // Said once: a change of the folder (the thing in its place removed) tries again.
            Err(e) => {
                self.locks.extend(identity(&path));
                Ok(Some(format!(
                    "it cannot be made again ({e}), so a second server could start: remove what is at its \
                     place, or stop this one (kill {pid}) and start it again"
                )))
            }
        }
    }

    /// A new listener when the socket is not the one bound.
    fn rebind(&mut self, daemon: &Daemon) -> Option<UnixListener> {
        let socket = daemon.inst.socket();
        if identity(&socket) == self.socket {
            return None;
        }
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).and_then(|l| {
            std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).map(|()| l)
        });
        // Said once either way: the next change of the folder tries again.
        self.socket = identity(&socket);
        match listener {
            Ok(l) => {
                daemon.log.row(
                    Topic::Server,
                    &format!(
                        "The socket {} was removed or replaced while the server ran; it is made again, and \
                         sessions and commands reach the server as before.",
                        socket.display()
                    ),
                );
                Some(l)
            }
            Err(e) => {
                let pid = std::process::id();
                daemon.log.row(
                    Topic::Server,
                    &format!(
                        "The socket {} was removed or replaced while the server ran, and cannot be made \
                         again ({e}): sessions and commands cannot reach the server (pid {pid}). Remove what \
                         is at its place, or stop the server (kill {pid}) and start it again.",
                        socket.display(),
                    ),
                );
                None
            }
        }
    }
}

/// Writes a marker of where this daemon is (starting, serving, stopping), as `client::marked` reads it:
/// its pid, when the process started (so a pid given since to another process is not believed), and
/// since when.
pub fn mark(path: &Path, since: &str) -> Result<(), crate::files::FileError> {
    let marker = serde_json::json!({
        "pid": std::process::id(),
        "started": crate::process_start::of(std::process::id()),
        "since": since,
    });
    crate::files::write_private(path, marker.to_string().as_bytes())
}

fn written(what: &Path, done: Result<(), String>) -> (String, String) {
    let what = what.display().to_string();
    match done {
        Ok(()) => (what, "it is made again".into()),
        Err(e) => (what, format!("it cannot be made again ({e})")),
    }
}

/// Whether `e` is the daemon marking its own start: starting.json written or removed, serving.json
/// written (each a staged copy renamed into place). A look it woke could find the instance moved
/// meanwhile, and stop a server only asked how it is. serving.json written over in place, removed or
/// renamed away is another's doing, looked at and made again (a file moved onto it from outside the
/// folder is not).
fn own_marking(e: &notify::Event) -> bool {
    use notify::event::{EventKind, ModifyKind, RenameMode};
    let name = |p: &Path| {
        p.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    };
    let ours = |p: &Path| {
        let n = name(p);
        n.starts_with("starting.json") || n.starts_with("serving.json.")
    };
    match (&e.kind, e.paths.as_slice()) {
        (EventKind::Modify(ModifyKind::Name(RenameMode::Both)), [from, to]) => {
            ours(from) && (ours(to) || name(to) == "serving.json")
        }
        // The rename's halves come first, each on its own; a half from outside the folder too.
        (EventKind::Modify(ModifyKind::Name(RenameMode::To)), [to]) => name(to) == "serving.json",
        (_, paths) => !paths.is_empty() && paths.iter().all(|p| ours(p)),
    }
}

/// Watches `folder` for anything but reads (the daemon's own, and every command's, would wake it).
fn watch(folder: &Path, changed: &Arc<tokio::sync::Notify>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let told = changed.clone();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event
            .as_ref()
            .is_ok_and(|e| matches!(e.kind, notify::EventKind::Access(_)) || own_marking(e))
        {
            return;
        }
        told.notify_one();
    })
    .ok()
    .and_then(|mut w| {
        w.watch(folder, notify::RecursiveMode::NonRecursive)
            .ok()
            .map(|()| w)
    });
    if watcher.is_none() {
        tracing::warn!(
            "the private folder cannot be watched (the system's watches are all taken): it is looked at every 2 s"
        );
    }
    watcher
}

#[cfg(test)]
mod tests {
    use super::own_marking;
    use notify::event::{CreateKind, DataChange, EventKind, ModifyKind, RemoveKind, RenameMode};

    fn event(kind: EventKind, names: &[&str]) -> notify::Event {
        let mut e = notify::Event::new(kind);
        for n in names {
            e = e.add_path(std::path::Path::new("/i/.ovai").join(n));
        }
        e
    }

    #[test]
    fn only_the_daemons_own_marks_wake_no_look() {
        let staged = "serving.json.0123456789abcdef.tmp";
        let name = |m| EventKind::Modify(ModifyKind::Name(m));
        for ours in [
            event(EventKind::Create(CreateKind::File), &[staged]),
            event(name(RenameMode::From), &[staged]),
            event(name(RenameMode::To), &["serving.json"]),
            event(name(RenameMode::Both), &[staged, "serving.json"]),
            event(EventKind::Remove(RemoveKind::File), &["starting.json"]),
        ] {
            assert!(own_marking(&ours), "{ours:?}");
        }
        for theirs in [
            event(
                EventKind::Modify(ModifyKind::Data(DataChange::Any)),
                &["serving.json"],
            ),
            event(EventKind::Remove(RemoveKind::File), &["serving.json"]),
            event(name(RenameMode::From), &["serving.json"]),
            event(name(RenameMode::Both), &["serving.json", "elsewhere"]),
            event(EventKind::Create(CreateKind::File), &["poke"]),
            event(EventKind::Remove(RemoveKind::File), &["control.secret"]),
            event(EventKind::Any, &[]),
        ] {
            assert!(!own_marking(&theirs), "{theirs:?}");
        }
    }
}
