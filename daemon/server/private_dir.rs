//! Keeps `.ovai/` the running server's. A clean-up (`rm -rf .ovai`, a `git clean -fdx` of the workspace,
//! a careless `rm`) would leave it running unreachable, every command saying that none runs, and its lock
//! gone, so that a second server could start beside it. What was removed is made again from what the
//! server holds: the folder, the socket, the lock, the control secret, the plugin host and, when the
//! whole folder went, the seats' hashed secrets.

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
        .open(path)?;
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

/// What tells one seats.json from another: its inode, size and modification time.
type Stamp = Option<(u64, u64, i64, i64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

pub struct PrivateWatch {
    pub changed: Arc<tokio::sync::Notify>,
    watcher: Option<notify::RecommendedWatcher>,
    folder: Identity,
    socket: Identity,
    /// The lock held, as it was taken at the start or since.
    lock: Identity,
    /// A lock taken again since the start (the first is held by the caller).
    relocked: Option<File>,
    /// seats.json as last read sound, and which one it was.
    seats: (Stamp, Option<String>),
    /// When the first change not looked at yet was heard, and when to look.
    first: Option<tokio::time::Instant>,
    due: Option<tokio::time::Instant>,
}

impl PrivateWatch {
    /// Watches the daemon's private folder, whose lock `held` is.
    pub fn new(daemon: &Daemon, held: &File) -> Self {
        let folder = daemon.inst.private_dir();
        let changed = Arc::new(tokio::sync::Notify::new());
        let mut me = Self {
            watcher: watch(&folder, &changed),
            changed,
            folder: identity(&folder),
            socket: identity(&daemon.inst.socket()),
            lock: held.metadata().ok().map(|m| (m.dev(), m.ino())),
            relocked: None,
            seats: (None, None),
            first: None,
            due: None,
        };
        me.keep_seats(daemon);
        me
    }

    /// Something changed in the folder: what was removed is looked at once the change is over.
    pub fn heard(&mut self) {
        let now = tokio::time::Instant::now();
        let first = *self.first.get_or_insert(now);
        self.due = Some((now + QUIET).min(first + MOST_QUIET));
    }

    /// When the last change heard is over (a clean-up let finish, never waited for while accepting).
    pub async fn quiet(&self) {
        match self.due {
            Some(due) => tokio::time::sleep_until(due).await,
            None => std::future::pending().await,
        }
    }

    /// Makes again what was removed; a new listener when the socket had to be bound again.
    pub fn look(&mut self, daemon: &Daemon) -> Option<UnixListener> {
        self.first = None;
        self.due = None;
        let inst = &daemon.inst;
        let folder = inst.private_dir();
        if identity(&folder) == self.folder {
            self.keep_seats(daemon);
            let lock = self.relock(daemon);
            let listener = self.rebind(daemon, false);
            for (what, said) in self.restore_files(daemon, false) {
                daemon.log.row(
                    Topic::Server,
                    &format!("{what} was removed while the server ran; {said}."),
                );
            }
            if let Some(said) = lock {
                daemon.log.row(
                    Topic::Server,
                    &format!(
                        "{} was removed while the server ran; {said}.",
                        inst.serve_lock().display()
                    ),
                );
            }
            return listener;
        }
        if let Err(e) = crate::seats::ensure_private_dir(inst) {
            // Said once: the next change tries again.
            self.folder = identity(&folder);
            daemon.log.row(
                Topic::Server,
                &format!(
                    "The private folder {} was removed while the server ran, and cannot be made again ({e}): \
                     sessions and commands cannot reach the server. Stop it (kill {}) and start it again.",
                    folder.display(),
                    std::process::id()
                ),
            );
            return None;
        }
        self.folder = identity(&folder);
        // The watch was on the folder removed, and hears nothing from the new one.
        self.watcher = watch(&folder, &self.changed);
        let mut made = Vec::new();
        let mut problems = Vec::new();
        for (what, said) in self.restore_files(daemon, true) {
            if said.starts_with("it is made again") {
                made.push(what);
            } else {
                problems.push(format!("{what}: {said}"));
            }
        }
        match self.relock(daemon) {
            Some(said) if said.starts_with("it is made again") => {
                made.push("the server's lock".into())
            }
            Some(said) => problems.push(format!("{}: {said}", inst.serve_lock().display())),
            None => {}
        }
        let listener = self.rebind(daemon, true);
        if listener.is_some() {
            made.push("the socket".into());
        }
        let mut row = format!(
            "The private folder {} was removed while the server ran; it is made again, with {}",
            folder.display(),
            match made.split_last() {
                None => "nothing in it".to_string(),
                Some((last, [])) => last.clone(),
                Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            }
        );
        if problems.is_empty() {
            row.push_str(": sessions and commands reach the server as before.");
        } else {
            row.push_str(&format!("; but {}.", problems.join("; ")));
        }
        daemon.log.row(Topic::Server, &row);
        listener
    }

    /// Keeps seats.json as last read sound, for a folder removed whole.
    fn keep_seats(&mut self, daemon: &Daemon) {
        let path = daemon.inst.seats_file();
        let now = stamp(&path);
        if now.is_none() || now == self.seats.0 {
            return;
        }
        let Ok(text) = crate::files::read_regular(&path, crate::files::MAX_READ_BYTES) else {
            return;
        };
        if serde_json::from_str::<crate::seats::SeatBook>(&text).is_ok() {
            self.seats = (now, Some(text));
        }
    }

    /// The control secret, the plugin host and (when the folder went whole) seats.json, each written
    /// again when missing: each as (what, what was done, in words).
    fn restore_files(&mut self, daemon: &Daemon, whole: bool) -> Vec<(String, String)> {
        let inst = &daemon.inst;
        let mut said = Vec::new();
        let missing = |p: &Path| identity(p).is_none();
        let secret = inst.control_secret();
        if missing(&secret) {
            let done = crate::files::write_private(&secret, daemon.control_secret.as_bytes());
            said.push(written(
                if whole {
                    "the control secret".into()
                } else {
                    secret.display().to_string()
                },
                done.map_err(|e| e.to_string()),
            ));
        }
        let shim = inst.host_shim();
        if missing(&shim) {
            let done = crate::host::child::write_shim(&shim);
            said.push(written(
                if whole {
                    "the plugin host".into()
                } else {
                    shim.display().to_string()
                },
                done.map_err(|e| e.to_string()),
            ));
        }
        let seats = inst.seats_file();
        if whole
            && missing(&seats)
            && let Some(text) = &self.seats.1
        {
            let done = crate::files::write_private(&seats, text.as_bytes());
            said.push(written(
                "the seats' hashed secrets".into(),
                done.map_err(|e| e.to_string()),
            ));
            self.seats.0 = stamp(&seats);
        }
        said
    }

    /// Takes the lock again when serve.lock is not the file this daemon holds; what was done, in words.
    fn relock(&mut self, daemon: &Daemon) -> Option<String> {
        let path = daemon.inst.serve_lock();
        if identity(&path) == self.lock {
            return None;
        }
        let pid = std::process::id();
        Some(match lock(&path) {
            Ok(Lock::Held(file)) => {
                self.lock = file.metadata().ok().map(|m| (m.dev(), m.ino()));
                self.relocked = Some(file);
                "it is made again and held, so that no second server starts".into()
            }
            Ok(Lock::HeldBy(other)) => {
                self.lock = identity(&path);
                format!(
                    "another ovai serve{} took it meanwhile, and serves this instance beside this one (pid {pid}): \
                     stop this one (kill {pid})",
                    other.map(|p| format!(" (pid {p})")).unwrap_or_default()
                )
            }
            Err(e) => {
                self.lock = identity(&path);
                format!(
                    "it cannot be made again ({e}), so a second server could start: stop this one (kill {pid}) and start it again"
                )
            }
        })
    }

    /// A new listener when the socket is not the one bound (or, `whole`, its folder was made again).
    fn rebind(&mut self, daemon: &Daemon, whole: bool) -> Option<UnixListener> {
        let socket = daemon.inst.socket();
        if !whole && identity(&socket) == self.socket {
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
                if !whole {
                    daemon.log.row(
                        Topic::Server,
                        &format!(
                            "The socket {} was removed or replaced while the server ran; it is made again, and \
                             sessions and commands reach the server as before.",
                            socket.display()
                        ),
                    );
                }
                Some(l)
            }
            Err(e) => {
                daemon.log.row(
                    Topic::Server,
                    &format!(
                        "The socket {} was removed or replaced while the server ran, and cannot be made \
                         again ({e}): sessions and commands cannot reach the server. Stop it (kill {}) and \
                         start it again.",
                        socket.display(),
                        std::process::id()
                    ),
                );
                None
            }
        }
    }
}

fn written(what: String, done: Result<(), String>) -> (String, String) {
    match done {
        Ok(()) => (what, "it is made again".into()),
        Err(e) => (what, format!("it cannot be made again ({e})")),
    }
}

/// Watches `folder` for anything but reads (the daemon's own, and every command's, would wake it).
fn watch(folder: &Path, changed: &Arc<tokio::sync::Notify>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let told = changed.clone();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event
            .as_ref()
            .is_ok_and(|e| matches!(e.kind, notify::EventKind::Access(_)))
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
            "the private folder cannot be watched: what is removed from it under the server is not made again"
        );
    }
    watcher
}
