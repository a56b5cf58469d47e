//! Writing the instance's files: whole or not at all (a temporary file beside it, synced, then renamed
//! over it), and readable by their owner only.

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
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = (|| {
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(err("writing", &tmp))?;
        f.write_all(bytes).map_err(err("writing", &tmp))?;
        f.sync_all().map_err(err("syncing", &tmp))?;
        set_mode(&tmp, 0o600)?;
        std::fs::rename(&tmp, path).map_err(err("replacing", path))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    // The rename is durable once the folder holding it is synced.
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}
