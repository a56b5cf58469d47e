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
    // A name nobody can guess, made new here and never followed: whoever could write the folder could
    // otherwise have put a link at a predictable name and read what is written through it.
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", crate::digest::hex(&random)));
    let tmp = path.with_file_name(name);
    let written = (|| {
        let mut f = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
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

#[cfg(test)]
mod private_writes {
    use super::*;

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
}
