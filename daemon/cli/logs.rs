//! `ovai logs [-f] [-n N]`: runtime.log's latest rows, the rotated file included, and with -f the new
//! ones as they are written (across a rotation too).

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use super::{Failure, exit};
use crate::instance::Instance;

pub fn run(inst: &Instance, n: usize, follow: bool) -> Result<(), Failure> {
    let path = inst.runtime_log();
    let old = path.with_extension("log.1");
    let mut rows: Vec<String> = Vec::new();
    for file in [&old, &path] {
        let mut bytes = Vec::new();
        match crate::files::open_regular(file, crate::files::MAX_READ_BYTES) {
            Ok(mut f) => {
                let _ = f.read_to_end(&mut bytes);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // A FIFO or a link to a device where the log was: said, never waited on.
            Err(e) => {
                return Err(Failure::new(
                    format!("{} cannot be read: {e}.", file.display()),
                    exit::FAILED,
                ));
            }
        }
        rows.extend(String::from_utf8_lossy(&bytes).lines().map(str::to_string));
    }
    if rows.is_empty() && !path.exists() && !follow {
        println!(
            "{} has no rows yet: the server writes them when it starts (`ovai serve`).",
            path.display()
        );
        return Ok(());
    }
    for row in &rows[rows.len().saturating_sub(n)..] {
        show(row.as_bytes());
    }
    if !follow {
        return Ok(());
    }
    let mut at = std::fs::metadata(&path).map_or(0, |m| m.len());
    let mut ino = inode(&path);
    let mut partial = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = inode(&path);
        if now != ino {
            // Rotated: the rest of the old file, then the new one from its start.
            print_from(&old, at, &mut partial)?;
            at = 0;
            ino = now;
        }
        at = print_from(&path, at, &mut partial)?;
    }
}

fn inode(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// Prints the whole rows after byte `from`; returns where it stopped.
fn print_from(path: &std::path::Path, from: u64, partial: &mut Vec<u8>) -> Result<u64, Failure> {
    let Ok(mut f) = crate::files::open_regular(path, u64::MAX) else {
        return Ok(from);
    };
    let len = f.metadata().map_or(0, |m| m.len());
    if len < from {
        return Ok(len);
    }
    f.seek(SeekFrom::Start(from)).map_err(|e| {
        Failure::new(
            format!("{} cannot be read: {e}.", path.display()),
            exit::FAILED,
        )
    })?;
    let _ = f.read_to_end(partial);
    while let Some(end) = partial.iter().position(|b| *b == b'\n') {
        show(&partial[..end]);
        partial.drain(..=end);
    }
    Ok(len)
}

/// A row as a terminal may show it: the daemon writes its rows escaped, but anything else that wrote to
/// the file (by hand, or a plugin of a host without a box) could have put a terminal's commands there.
fn show(row: &[u8]) {
    let row = String::from_utf8_lossy(row);
    println!("{}", crate::names::escape_controls(&row, false));
}
