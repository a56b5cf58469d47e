//! `ovai logs [-f] [-n N]`: runtime.log's latest rows, the rotated file included, and with -f the new
//! ones as they are written (across a rotation too).

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
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
    // The file followed is held open, as `tail -F` does: once the name leads elsewhere (rotated to
    // runtime.log.1, removed, replaced), the rest of what was held is printed, then the new file
    // from its start.
    let mut held = open(&path).map(|mut f| {
        let _ = f.seek(SeekFrom::End(0));
        f
    });
    let mut partial = Vec::new();
    loop {
        if let Some(f) = held.as_mut() {
            print_rest(f, &mut partial);
        }
        let moved = match (&held, inode(&path)) {
            (Some(f), now) => now != f.metadata().ok().map(|m| m.ino()),
            (None, now) => now.is_some(),
        };
        if moved {
            if let Some(mut f) = held.take() {
                print_rest(&mut f, &mut partial);
            }
            partial.clear();
            // Read from its start at the next turn; a name that cannot be opened (a folder put in its
            // place) is looked at again then, never in a spin.
            held = open(&path);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn open(path: &std::path::Path) -> Option<std::fs::File> {
    crate::files::open_regular(path, u64::MAX).ok()
}

fn inode(path: &std::path::Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// Prints the whole rows the file holds past where it was read to.
fn print_rest(f: &mut std::fs::File, partial: &mut Vec<u8>) {
    // Emptied in place (`: > runtime.log`): read on from its start.
    let len = f.metadata().map_or(0, |m| m.len());
    if f.stream_position().is_ok_and(|at| at > len) {
        let _ = f.seek(SeekFrom::Start(0));
        partial.clear();
    }
    let _ = f.read_to_end(partial);
    while let Some(end) = partial.iter().position(|b| *b == b'\n') {
        show(&partial[..end]);
        partial.drain(..=end);
    }
}

/// A row as a terminal may show it: the daemon writes its rows escaped, but anything else that wrote to
/// the file (by hand, or a plugin of a host without a box) could have put a terminal's commands there.
fn show(row: &[u8]) {
    let row = String::from_utf8_lossy(row);
    println!("{}", crate::names::escape_controls(&row, false));
}
