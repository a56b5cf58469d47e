//! The instance's files: written whole or not at all (a temporary file beside it, synced, then renamed
//! over it) and readable by their owner only; read only when they are regular files of a sane size
//! (`open_regular`, `read_regular`, a plugin file's SHA-256); and the rotating `Appender` that
//! runtime.log and calls.jsonl are written with.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A file operation that failed: what was being done, to which file, and why.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct FileError {
    pub what: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Maps an io::Error to a [`FileError`] about `path`.
pub fn err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> FileError + 'a {
    move |source| FileError {
        what,
        path: path.to_path_buf(),
        source,
    }
}

pub fn set_mode(path: &Path, mode: u32) -> Result<(), FileError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(err("protecting", path))
}

/// Writes `bytes` to `path` (mode 0600) so that a reader sees the old file or the new one, never half of
/// one, and a crash leaves one of the two.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    stage_private(path, bytes)?.commit()
}

/// A file written beside its place, on disk and synced, that takes its place on `commit` (a rename,
/// which needs no room on the disk) or is removed when dropped: what can fail for want of room fails
/// before anything else is changed.
pub struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    done: bool,
}

/// Writes `bytes` beside `path`, as `write_private` writes them, to be put in place by `commit`.
pub fn stage_private(path: &Path, bytes: &[u8]) -> Result<Staged, FileError> {
    // A name nobody can guess, made new here and never followed: whoever could write the folder could
    // otherwise have put a link at a predictable name and read what is written through it.
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", crate::digest::hex(&random)));
    let tmp = path.with_file_name(name);
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(err("writing", &tmp))?;
    // Removed if anything below fails.
    let staged = Staged {
        tmp,
        path: path.to_path_buf(),
        done: false,
    };
    f.write_all(bytes).map_err(err("writing", &staged.tmp))?;
    f.sync_all().map_err(err("syncing", &staged.tmp))?;
    set_mode(&staged.tmp, 0o600)?;
    Ok(staged)
}

impl Staged {
    /// Puts the file in its place.
    pub fn commit(mut self) -> Result<(), FileError> {
        std::fs::rename(&self.tmp, &self.path).map_err(err("replacing", &self.path))?;
        self.done = true;
        // The rename is durable once the folder holding it is synced.
        if let Some(dir) = self.path.parent()
            && let Ok(d) = std::fs::File::open(dir)
        {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `path` as `write_private` does, unless it is a file of its own (no link) holding
/// them already: whether it wrote.
pub fn keep_private(path: &Path, bytes: &[u8]) -> Result<bool, FileError> {
    let is_file = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    let held = read_regular(path, bytes.len() as u64 + 1).ok();
    if is_file && held.as_deref().map(str::as_bytes) == Some(bytes) {
        return Ok(false);
    }
    write_private(path, bytes).map(|()| true)
}

/// The largest file of plugins/ the daemon reads (to fingerprint it) or serves.
pub const MAX_PLUGIN_BYTES: u64 = 64 * 1024 * 1024;

/// What a file type is in words when it is not a regular file ("a FIFO"), or `None` for a file.
pub fn not_a_file(kind: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a folder")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("a device")
    }
}

/// The most the daemon reads of a file of its own it reads whole (openovai.json, seats.json): past this
/// it is refused in words.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// The regular file at `path` (followed through links), open for reading, if it is at most `max` bytes;
/// anything else is refused in words ("it is a FIFO, not a file"), for the caller to put after the
/// path. Anyone with a shell here, or a plugin in plugins/, can leave a FIFO where a file was, whose open
/// would wait for a writer for ever, or a link to /dev/zero, which never ends: the type is checked
/// before the open (made with O_NONBLOCK), and again on what was opened.
pub fn open_regular(path: &Path, max: u64) -> std::io::Result<std::fs::File> {
    let check = |m: std::fs::Metadata| {
        let refused = |why: String| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("it is {why}"))
        };
        if let Some(what) = not_a_file(m.file_type()) {
            return Err(refused(format!("{what}, not a file")));
        }
        if m.len() > max {
            return Err(refused(format!(
                "{} bytes, more than the {} it may be",
                crate::names::thousands(usize::try_from(m.len()).unwrap_or(usize::MAX)),
                crate::names::thousands(usize::try_from(max).unwrap_or(usize::MAX))
            )));
        }
        Ok(())
    };
    check(std::fs::metadata(path)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    check(file.metadata()?)?;
    // O_NONBLOCK stays: a file on disk is read the same with it, and a kernel's file that passes for a
    // regular one and waits to be read (/proc/kmsg, to which a plugin can link) fails at once instead of
    // holding a thread of the daemon's for ever.
    Ok(file)
}

/// `text`, to take the place of the file at `path`, with that file's Windows line ends where it has them
/// (a checkout with `core.autocrlf`, an editor's setting): a rewrite then changes only what it changes.
pub fn keep_line_ends(path: &Path, text: String) -> String {
    // Windows' where most of its lines had them: one stray CRLF does not turn a file over.
    let mostly_crlf = |old: String| {
        let crlf = old.matches("\r\n").count();
        crlf > 0 && crlf * 2 >= old.matches('\n').count()
    };
    if read_regular(path, MAX_READ_BYTES).is_ok_and(mostly_crlf) {
        text.replace("\r\n", "\n").replace('\n', "\r\n")
    } else {
        text
    }
}

/// A file's size and modification time (through links), as far as they can be read: a file whose stamp
/// is as it was need not be read again.
pub fn stamp(path: &Path) -> Option<(u64, Option<std::time::SystemTime>)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()))
}

/// The text of the regular file at `path`, of at most `max` bytes (see `open_regular`).
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    open_regular(path, max)?
        .take(max.saturating_add(1))
        .read_to_string(&mut text)?;
    if text.len() as u64 > max {
        // It grew after it was looked at.
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "it is longer than the {} bytes it may be",
                crate::names::thousands(usize::try_from(max).unwrap_or(usize::MAX))
            ),
        ));
    }
    Ok(text)
}

/// The SHA-256 (hex) of the regular file at `path` (followed through links), or `None` for anything else:
/// one that cannot be read, one past MAX_PLUGIN_BYTES, and what is not a file (`open_regular`).
pub fn fingerprint(path: &Path) -> Option<String> {
    fingerprint_counted(path, MAX_PLUGIN_BYTES).0
}

/// `fingerprint`, reading at most `most` bytes (past them, `None`), and how many it read: a file of
/// /proc says it holds none, and holds megabytes.
pub fn fingerprint_counted(path: &Path, most: u64) -> (Option<String>, u64) {
    use sha2::Digest;
    use std::io::Read;
    let Ok(mut file) = open_regular(path, MAX_PLUGIN_BYTES) else {
        return (None, 0);
    };
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut read = 0u64;
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                read += n as u64;
                if read > most {
                    return (None, read);
                }
                hash.update(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return (None, read),
        }
    }
    (Some(crate::digest::hex(&hash.finalize())), read)
}

/// A folder held open: the files the daemon writes in the instance's root are opened relative to it,
/// never through a link, and a name that holds something else than a regular file (a link a plugin left
/// there, a FIFO, a folder) is refused in words rather than written through.
pub struct Folder {
    fd: std::os::fd::OwnedFd,
    path: PathBuf,
}

impl Folder {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        use nix::fcntl::OFlag;
        let fd = nix::fcntl::open(
            path,
            OFlag::O_DIRECTORY | OFlag::O_PATH | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        Ok(Self {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// `name` opened for appending (made, 0600, if it is not there), and readable.
    pub fn append(&self, name: &str) -> std::io::Result<std::fs::File> {
        use nix::fcntl::OFlag;
        self.open_file(name, OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT)
    }

    /// `name` opened for reading; `None` when it is not there.
    pub fn read(&self, name: &str) -> std::io::Result<Option<std::fs::File>> {
        match self.open_file(name, nix::fcntl::OFlag::O_RDONLY) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `name` in this folder is `file` still (not removed, moved away or replaced).
    pub fn holds(&self, name: &str, file: &std::fs::File) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(there) =
            nix::sys::stat::fstatat(&self.fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        else {
            return false;
        };
        file.metadata()
            .is_ok_and(|m| m.dev() == there.st_dev && m.ino() == there.st_ino)
    }

    /// Renames `from` to `to`, both in this folder (a link at either name is renamed, never followed).
    pub fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        nix::fcntl::renameat(&self.fd, from, &self.fd, to)?;
        Ok(())
    }

    fn open_file(&self, name: &str, flags: nix::fcntl::OFlag) -> std::io::Result<std::fs::File> {
        use nix::fcntl::OFlag;
        // Not following a link, and not waiting on a FIFO that nobody reads.
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(
            &self.fd,
            name,
            flags,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| match e {
            nix::errno::Errno::ELOOP => self.not_a_file(name, "a symbolic link"),
            other => std::io::Error::from(other),
        })?;
        let file = std::fs::File::from(fd);
        if let Some(what) = not_a_file(file.metadata()?.file_type()) {
            return Err(self.not_a_file(name, what));
        }
        // O_NONBLOCK was for the open: reads and writes of the file itself wait as usual.
        let _ = nix::fcntl::fcntl(
            &file,
            nix::fcntl::FcntlArg::F_SETFL(flags & OFlag::O_APPEND),
        );
        Ok(file)
    }

    fn not_a_file(&self, name: &str, what: &str) -> std::io::Error {
        let path = self.path.join(name);
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} is {what}, not a file: ovai writes only into a file of its own there, never through \
                 something else. Remove it (rm {}); ovai makes the file again.",
                path.display(),
                crate::names::shell_quote(&path.to_string_lossy())
            ),
        )
    }
}

/// Lines appended to a file of a folder (runtime.log, calls.jsonl), which is rotated to `NAME.1` (one old
/// file kept) when a write would take it past `rotate_at`, so that it cannot fill a disk.
pub struct Appender {
    folder: PathBuf,
    name: String,
    rotate_at: u64,
    open: Option<(Folder, std::fs::File)>,
    /// The appends that failed since the last that worked (the first was said on stderr), and why the
    /// first failed.
    lost: Option<(usize, String)>,
    /// The file's end was looked at: a server before this one may have left half a line (a full disk).
    looked: bool,
}

impl Appender {
    pub fn new(path: &Path, rotate_at: u64) -> Self {
        Self {
            folder: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            rotate_at,
            open: None,
            looked: false,
            lost: None,
        }
    }

    /// The lines lost since the last append that worked, and why the first failed; `None` while it works.
    pub fn lost(&self) -> Option<&(usize, String)> {
        self.lost.as_ref()
    }

    /// Appends, and says on the daemon's stderr (once, until an append works again) when it cannot. The
    /// first append to work again gives the count of those lost before it, and why the first was.
    pub fn append_or_say(&mut self, bytes: &[u8]) -> Option<(usize, String)> {
        // Counted in lines: several rows may go in one write.
        let lines = bytes.iter().filter(|&&b| b == b'\n').count().max(1);
        // A write cut off by a full disk may have left part of a line: it is taken away (a reader of JSON
        // lines would meet half of one), or, when that cannot be done, what follows starts a line of its
        // own.
        let mended;
        let first = !std::mem::replace(&mut self.looked, true);
        let bytes = if (self.lost.is_some() || first) && !self.cut_partial() {
            mended = [b"\n", bytes].concat();
            &mended[..]
        } else {
            bytes
        };
        match self.append(bytes) {
            Ok(()) => self.lost.take(),
            Err(e) => {
                match &mut self.lost {
                    Some((n, _)) => *n += lines,
                    None => {
                        tracing::error!(
                            "{} cannot be written: {e}",
                            self.folder.join(&self.name).display()
                        );
                        self.lost = Some((lines, e.to_string()));
                    }
                }
                None
            }
        }
    }

    /// Takes away the part of a line a cut-off write left at the file's end; whether the file now ends a
    /// line (or is empty, or cannot be looked at).
    fn cut_partial(&self) -> bool {
        use std::os::unix::fs::FileExt;
        let Ok(folder) = Folder::open(&self.folder) else {
            return true;
        };
        let Ok(Some(file)) = folder.read(&self.name) else {
            return true;
        };
        let size = file.metadata().map_or(0, |m| m.len());
        if size == 0 {
            return true;
        }
        let from = size.saturating_sub(64 * 1024);
        let mut tail = vec![0u8; (size - from) as usize];
        if file.read_exact_at(&mut tail, from).is_err() {
            return true;
        }
        let keep = match tail.iter().rposition(|b| *b == b'\n') {
            Some(i) if i + 1 == tail.len() => return true,
            Some(i) => from + i as u64 + 1,
            None if from == 0 => 0,
            None => return false,
        };
        folder
            .append(&self.name)
            .and_then(|f| f.set_len(keep))
            .is_ok()
    }

    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let written = self.append_once(bytes);
        if written.is_err() {
            // Opened again next time: the file may have been moved or mended meanwhile.
            self.open = None;
        }
        written
    }

    fn append_once(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        // A file removed or moved away meanwhile (by hand, a clean-up script) is let go: rows written to it
        // would be read by nobody.
        let open = self
            .open
            .take()
            .filter(|(folder, file)| folder.holds(&self.name, file));
        let (folder, file) = match open {
            Some(open) => open,
            None => {
                let folder = Folder::open(&self.folder)?;
                let file = folder.append(&self.name)?;
                (folder, file)
            }
        };
        let size = file.metadata()?.len();
        let (folder, mut file) = if size > 0 && size + bytes.len() as u64 > self.rotate_at {
            folder.rename(&self.name, &format!("{}.1", self.name))?;
            let file = folder.append(&self.name)?;
            (folder, file)
        } else {
            (folder, file)
        };
        file.write_all(bytes)?;
        self.open = Some((folder, file));
        Ok(())
    }
}

#[cfg(test)]
mod private_writes {
    use super::*;

    /// Half a line left by a server before (stopped while the disk was full) goes at the first write.
    #[test]
    fn half_a_line_left_before_is_taken_away_at_the_first_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"at\":\"2026-").unwrap();
        let mut log = Appender::new(&path, 1 << 20);
        assert!(log.append_or_say(b"{\"c\":3}\n").is_none());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"c\":3}\n"
        );
    }

    /// Half a line a write cut off by a full disk left is taken away once writing works again: a reader
    /// of calls.jsonl met it as a line that does not parse.
    #[test]
    fn half_a_line_left_by_a_lost_write_is_taken_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls.jsonl");
        let mut log = Appender::new(&path, 1 << 20);
        assert!(log.append_or_say(b"{\"a\":1}\n").is_none());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"{\"b\":"))
            .unwrap();
        log.lost = Some((1, "No space left on device".into()));
        assert_eq!(
            log.append_or_say(b"{\"c\":3}\n"),
            Some((1, "No space left on device".into()))
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"c\":3}\n"
        );
    }

    /// A hard link planted at the name a writer would use (as a plugin with write access to the desks
    /// could) must not receive what is written.
    #[test]
    fn a_link_planted_beside_the_file_gets_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let trap = dir.path().join("trap");
        std::fs::write(&trap, "").unwrap();
        let target = dir.path().join(".mcp.json");
        std::fs::hard_link(
            &trap,
            dir.path()
                .join(format!(".mcp.json.{}.tmp", std::process::id())),
        )
        .unwrap();
        write_private(&target, b"the secret").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "the secret");
        assert_eq!(std::fs::read_to_string(&trap).unwrap(), "");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp") && !n.contains(&std::process::id().to_string()))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_file_removed_or_moved_away_is_made_again_at_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.log");
        let mut log = Appender::new(&path, 1 << 20);
        log.append(b"one\n").unwrap();
        std::fs::remove_file(&path).unwrap();
        log.append(b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        std::fs::rename(&path, dir.path().join("kept")).unwrap();
        log.append(b"three\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("kept")).unwrap(),
            "two\n"
        );
    }
}
