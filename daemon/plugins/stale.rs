//! Files in plugins/ that changed after the last read. Plugins are read only at start and at `ovai
//! restart`, so a saved file keeps being served as it was read; this says which files that is, so
//! nobody wonders which code they are running.

use std::collections::BTreeMap;
use std::path::Path;

use super::candidates::{self, Candidate};
use crate::files::stamp;
use crate::tools::BUILTINS;

/// What each candidate held when it was read: file name → its size and time, and the SHA-256 of its
/// bytes (`None` if unreadable). A file whose size and time are as they were is not read again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(BTreeMap<String, (FileStamp, Option<String>)>);

/// A file's size and modification time, as far as they can be read.
type FileStamp = Option<(u64, Option<std::time::SystemTime>)>;

impl Snapshot {
    pub fn take(dir: &Path, found: &[Candidate]) -> Self {
        Self(
            found
                .iter()
                .map(|c| {
                    let path = dir.join(c.file());
                    (
                        c.file().to_string(),
                        (stamp(&path), crate::files::fingerprint(&path)),
                    )
                })
                .collect(),
        )
    }

    /// The SHA-256 of the file's bytes as they were read (`None`: not read, or unreadable then).
    pub fn digest(&self, file: &str) -> Option<String> {
        self.0.get(file).and_then(|(_, hash)| hash.clone())
    }

    /// The SHA-256 of the file's bytes now: read again only when its size or time moved.
    pub fn digest_now(&self, dir: &Path, file: &str) -> Option<String> {
        let path = dir.join(file);
        match self.0.get(file) {
            Some((was, hash)) if was.is_some() && *was == stamp(&path) => hash.clone(),
            _ => crate::files::fingerprint(&path),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Its bytes differ from what was read; `served` says whether the old reading is being served.
    Changed {
        file: String,
        served: bool,
    },
    Appeared {
        file: String,
    },
    /// Gone since it was read; `served` says whether the old reading is being served (one that was
    /// not may be the fix its own row asked for).
    Removed {
        file: String,
        served: bool,
    },
}

impl Change {
    pub fn file(&self) -> &str {
        match self {
            Change::Changed { file, .. }
            | Change::Appeared { file }
            | Change::Removed { file, .. } => file,
        }
    }

    /// The runtime.log row (topic `plugins`) that reports it.
    pub fn row(&self) -> String {
        crate::names::escape_controls(&self.words(), false).into_owned()
    }

    fn words(&self) -> String {
        match self {
            Change::Changed { file, served: true } => format!(
                "plugins/{file} changed after the last read: it is served, if at all, as it was read, and a plugin host started from now on (after a crash, or when the seats change) refuses its calls; `ovai restart` serves it as it is now"
            ),
            Change::Changed {
                file,
                served: false,
            } => format!(
                "plugins/{file} changed after the last read; `ovai restart` reads it again (`ovai check plugins/{file}` says first what it would make of it)"
            ),
            Change::Appeared { file } => format!(
                "plugins/{file} appeared after the last read and is not served yet; `ovai restart` reads it"
            ),
            Change::Removed { file, served: true } => format!(
                "plugins/{file} was removed after the last read: it is served, if at all, as it was read, and a plugin host started from now on (after a crash, or when the seats change) refuses its calls; `ovai restart` stops serving it"
            ),
            Change::Removed {
                file,
                served: false,
            } => format!(
                "plugins/{file}, which was not served, was removed after the last read; `ovai restart` reads plugins/ without it"
            ),
        }
    }
}

/// Past this many files in one burst (a checkout, a copy), one row says them all.
const MAX_FILE_ROWS: usize = 8;

/// A file reported as changed, appeared or removed, and now as the last read left it again; `left_out`:
/// the host running now started while it was not, and did not import it.
pub struct Back {
    pub file: String,
    pub left_out: bool,
}

/// The rows for one burst of changes: one a file (`back`: files as they were at the last read again),
/// or, for more than MAX_FILE_ROWS, one for all of them.
pub fn rows(fresh: &[Change], back: &[Back]) -> Vec<String> {
    if fresh.len() + back.len() <= MAX_FILE_ROWS {
        return back
            .iter()
            .map(back_as_read)
            .chain(fresh.iter().map(Change::row))
            .collect();
    }
    let of = |want: fn(&Change) -> bool| -> Vec<&str> {
        fresh.iter().filter(|c| want(c)).map(Change::file).collect()
    };
    let total = fresh.len() + back.len();
    let left_out: Vec<&str> = back
        .iter()
        .filter(|b| b.left_out)
        .map(|b| b.file.as_str())
        .collect();
    let back: Vec<&str> = back.iter().map(|b| b.file.as_str()).collect();
    let mut parts = Vec::new();
    for (files, one, more) in [
        (
            of(|c| matches!(c, Change::Changed { .. })),
            "changed after the last read",
            "changed after the last read",
        ),
        (
            of(|c| matches!(c, Change::Appeared { .. })),
            "appeared",
            "appeared",
        ),
        (
            of(|c| matches!(c, Change::Removed { .. })),
            "was removed",
            "were removed",
        ),
        (
            back,
            "is as it was at the last read again",
            "are as they were at the last read again",
        ),
    ] {
        if !files.is_empty() {
            let what = if files.len() == 1 { one } else { more };
            parts.push(format!("{} {what} ({})", files.len(), some_of(&files)));
        }
    }
    let mut then = Vec::new();
    if !fresh.is_empty() {
        then.push(
            "until `ovai restart` what was read is served (a plugin host started from now on refuses the \
             changed and removed ones); `ovai status` lists each"
                .to_string(),
        );
    } else if left_out.is_empty() {
        then.push("nothing of them waits for `ovai restart`".to_string());
    }
    if !left_out.is_empty() {
        then.push(format!(
            "the plugin host running now left out {} of those as read again ({}): their calls are refused \
             until the next host or `ovai restart` imports them",
            left_out.len(),
            some_of(&left_out)
        ));
    }
    let then = then.join("; ");
    let row = format!(
        "{total} files in plugins/ changed at once: {}; {then}.",
        parts.join(", ")
    );
    vec![crate::names::escape_controls(&row, false).into_owned()]
}

/// A few of `files`, and how many more.
fn some_of(files: &[&str]) -> String {
    const SHOWN: usize = 5;
    let mut shown = files
        .iter()
        .take(SHOWN)
        .map(|f| format!("plugins/{f}"))
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        shown.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    shown
}

/// The row for a file reported as changed, appeared or removed, and now as the last read left it again.
fn back_as_read(back: &Back) -> String {
    let file = &back.file;
    let words = if back.left_out {
        format!(
            "plugins/{file} is as it was at the last read again, but the plugin host running now started while it was not and left it out: its calls are refused until the next host (after a crash, or when the seats change) or `ovai restart` imports it"
        )
    } else {
        format!(
            "plugins/{file} is as it was at the last read again: nothing of it waits for `ovai restart`"
        )
    };
    crate::names::escape_controls(&words, false).into_owned()
}

/// How plugins/ differs now from `snapshot`, sorted by file name. `served` says which files the reading
/// serves.
pub fn changes(
    dir: &Path,
    snapshot: &Snapshot,
    served: &dyn Fn(&str) -> bool,
) -> std::io::Result<Vec<Change>> {
    // A folder that cannot be read is an error to report, never every file removed.
    let found = candidates::scan(dir, BUILTINS)?;
    // Only files that were read are read again: a new one is new whatever it holds (hashing every new
    // file on every `ovai status` let a plugin's big files make each one take seconds).
    let now: std::collections::BTreeSet<&str> = found.iter().map(Candidate::file).collect();
    let mut out = Vec::new();
    for (file, (_, then)) in &snapshot.0 {
        if now.contains(file.as_str()) {
            if snapshot.digest_now(dir, file) != *then {
                out.push(Change::Changed {
                    file: file.clone(),
                    served: served(file),
                });
            }
        } else {
            out.push(Change::Removed {
                file: file.clone(),
                served: served(file),
            });
        }
    }
    for file in now {
        if !snapshot.0.contains_key(file) {
            out.push(Change::Appeared {
                file: file.to_string(),
            });
        }
    }
    out.sort_by(|a, b| a.file().as_bytes().cmp(b.file().as_bytes()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_changed_new_and_removed_served_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for f in ["a.mjs", "b.mjs", "c.mjs", "gone-unserved.mjs"] {
            std::fs::write(p.join(f), f).unwrap();
        }
        let snap = Snapshot::take(p, &candidates::scan(p, BUILTINS).unwrap());
        std::fs::write(p.join("a.mjs"), "edited").unwrap();
        std::fs::write(p.join("b.mjs"), "b.mjs").unwrap(); // saved, same bytes
        std::fs::remove_file(p.join("c.mjs")).unwrap();
        std::fs::remove_file(p.join("gone-unserved.mjs")).unwrap();
        std::fs::write(p.join("d.mjs"), "new").unwrap();
        std::fs::write(p.join("notes.md"), "not a candidate").unwrap();
        let served = |f: &str| f != "gone-unserved.mjs";
        assert_eq!(
            changes(p, &snap, &served).unwrap(),
            [
                Change::Changed {
                    file: "a.mjs".into(),
                    served: true
                },
                Change::Removed {
                    file: "c.mjs".into(),
                    served: true
                },
                Change::Appeared {
                    file: "d.mjs".into()
                },
                Change::Removed {
                    file: "gone-unserved.mjs".into(),
                    served: false
                },
            ]
        );
    }

    #[test]
    fn a_burst_of_files_as_read_again_names_those_the_live_host_left_out() {
        let back: Vec<Back> = (0..9)
            .map(|i| Back {
                file: format!("t{i}.mjs"),
                left_out: i < 2,
            })
            .collect();
        assert_eq!(
            rows(&[], &back),
            [
                "9 files in plugins/ changed at once: 9 are as they were at the last read again (plugins/t0.mjs, \
              plugins/t1.mjs, plugins/t2.mjs, plugins/t3.mjs, plugins/t4.mjs and 4 more); the plugin host running \
              now left out 2 of those as read again (plugins/t0.mjs, plugins/t1.mjs): their calls are refused until \
              the next host or `ovai restart` imports them."
            ]
        );
        let none: Vec<Back> = back
            .into_iter()
            .map(|b| Back {
                left_out: false,
                ..b
            })
            .collect();
        assert!(rows(&[], &none)[0].ends_with("; nothing of them waits for `ovai restart`."));
    }
}
