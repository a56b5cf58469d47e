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
        if let Ok(text) = std::fs::read_to_string(file) {
            rows.extend(text.lines().map(str::to_string));
        }
    }
    if rows.is_empty() && !path.exists() && !follow {
        println!(
            "{} has no rows yet: the server writes them when it starts (`ovai serve`).",
            path.display()
        );
        return Ok(());
    }
    for row in &rows[rows.len().saturating_sub(n)..] {
        println!("{row}");
    }
    if !follow {
        return Ok(());
    }
    let mut at = std::fs::metadata(&path).map_or(0, |m| m.len());
    let mut ino = inode(&path);
    let mut partial = String::new();
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
fn print_from(path: &std::path::Path, from: u64, partial: &mut String) -> Result<u64, Failure> {
    let Ok(mut f) = std::fs::File::open(path) else {
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
    let mut text = String::new();
    let _ = f.read_to_string(&mut text);
    partial.push_str(&text);
    while let Some(end) = partial.find('\n') {
        println!("{}", &partial[..end]);
        partial.drain(..=end);
    }
    Ok(len)
}
