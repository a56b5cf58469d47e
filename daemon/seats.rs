//! Seats: who may connect, and as whom.
//!
//! A seat is a name and a 256-bit secret. The secret is written in clear only into the seat's desk
//! (`desks/NAME/.mcp.json`, mode 0600), where the session's MCP client reads it; `.ovai/seats.json` keeps
//! its SHA-256. A connection presents the secret and is resolved to a seat by its hash, so nothing a
//! session says later can change who it is.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::desk::{self, Reach};
use crate::instance::Instance;
use crate::names;

/// The contents of `.ovai/seats.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SeatBook {
    /// Seat name → its record; sorted so the file and every listing read the same everywhere.
    pub seats: BTreeMap<String, SeatRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SeatRecord {
    /// SHA-256 of the secret, as hex: enough to recognise it, useless to present.
    pub sha256: String,
    /// When the seat was made, for `ovai seat list`.
    pub added: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SeatError {
    #[error("{name:?} cannot be a seat name: {why} ({rule}).", rule = names::RULE)]
    BadName { name: String, why: String },
    #[error(
        "There is already a seat called {0}. To give it a new secret, run `ovai seat remove {0}` and then `ovai seat add {0}`."
    )]
    Exists(String),
    #[error("There is no seat called {name}. The seats are: {known}.")]
    Unknown { name: String, known: String },
    #[error("{} is not readable as a seat list: {reason}. It is written only by `ovai seat`; restore it or remove it and add the seats again.", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error(transparent)]
    Desk(Box<crate::desk::DeskError>),
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<crate::desk::DeskError> for SeatError {
    fn from(e: crate::desk::DeskError) -> Self {
        SeatError::Desk(Box::new(e))
    }
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SeatError + 'a {
    move |source| SeatError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// A new 256-bit secret, as 64 hex digits.
pub fn new_secret() -> Result<String, std::io::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(crate::digest::hex(&bytes))
}

pub fn hash_secret(secret: &str) -> String {
    crate::digest::sha256_hex(secret.trim().as_bytes())
}

/// Equal without an early exit, so the time taken says nothing about how much of a secret matched.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl SeatBook {
    /// Reads `.ovai/seats.json`; an instance without one has no seats yet.
    pub fn load(inst: &Instance) -> Result<Self, SeatError> {
        let path = inst.seats_file();
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| SeatError::Corrupt {
                path,
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(io("reading", &path)(e)),
        }
    }

    /// The seat whose secret this is, if any.
    pub fn resolve(&self, secret: &str) -> Option<&str> {
        let h = hash_secret(secret);
        let mut found = None;
        for (name, rec) in &self.seats {
            if same(&rec.sha256, &h) {
                found = Some(name.as_str());
            }
        }
        found
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.seats.keys().map(String::as_str)
    }

    fn save(&self, inst: &Instance) -> Result<(), SeatError> {
        let path = inst.seats_file();
        let text = serde_json::to_string_pretty(self).map_err(|e| SeatError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Ok(crate::files::write_private(&path, text.as_bytes())?)
    }
}

/// Holds `.ovai/seats.lock` so two `ovai seat` commands never interleave their read and write.
struct BookLock(#[allow(dead_code)] File);

fn lock_book(inst: &Instance) -> Result<BookLock, SeatError> {
    ensure_private_dir(inst)?;
    let path = inst.seats_lock();
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(io("opening", &path))?;
    file.lock().map_err(io("locking", &path))?;
    Ok(BookLock(file))
}

/// Makes `.ovai/` (mode 0700) if it is not there.
pub fn ensure_private_dir(inst: &Instance) -> Result<(), SeatError> {
    let dir = inst.private_dir();
    std::fs::create_dir_all(&dir).map_err(io("making", &dir))?;
    Ok(crate::files::set_mode(&dir, 0o700)?)
}

/// What `ovai seat add` made.
pub struct AddedSeat {
    pub mcp_json: PathBuf,
    /// What could not be written into the desk, as sentences (the seat was added all the same).
    pub warnings: Vec<String>,
}

/// Makes a seat: its secret, its hash in seats.json, and its desk with the `.mcp.json` a client reads and
/// the Claude Code settings that approve the server and its tools.
pub fn add(inst: &Instance, name: &str, ovai_exe: &Path) -> Result<AddedSeat, SeatError> {
    if let Some(why) = names::why_not(name) {
        return Err(SeatError::BadName {
            name: name.into(),
            why,
        });
    }
    let _lock = lock_book(inst)?;
    let mut book = SeatBook::load(inst)?;
    if book.seats.contains_key(name) {
        return Err(SeatError::Exists(name.into()));
    }
    let secret = new_secret().map_err(io("drawing a secret for", &inst.seats_file()))?;
    let desk = inst.desk(name);
    std::fs::create_dir_all(&desk).map_err(io("making the desk", &desk))?;
    let mcp_json =
        desk::write_server_entry(inst, &desk, &Reach::Bridge { exe: ovai_exe }, &secret)?;
    book.seats.insert(
        name.into(),
        SeatRecord {
            sha256: hash_secret(&secret),
            added: crate::runtime_log::timestamp(SystemTime::now()),
        },
    );
    book.save(inst)?;
    let warnings = match desk::approve(&desk) {
        Ok(w) => w.into_iter().collect(),
        Err(e) => vec![e.to_string()],
    };
    Ok(AddedSeat { mcp_json, warnings })
}

/// Forgets a seat: its hash leaves seats.json, and its entries leave the desk's `.mcp.json` and Claude
/// Code settings. The desk itself is somebody's working directory and stays.
pub fn remove(inst: &Instance, name: &str) -> Result<(), SeatError> {
    let _lock = lock_book(inst)?;
    let mut book = SeatBook::load(inst)?;
    if book.seats.remove(name).is_none() {
        let known: Vec<_> = book.names().collect();
        return Err(SeatError::Unknown {
            name: name.into(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        });
    }
    book.save(inst)?;
    let desk = inst.desk(name);
    desk::remove_server_entry(&desk)?;
    desk::unapprove(&desk)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_resolve_by_hash_only() {
        let mut book = SeatBook::default();
        let s = new_secret().unwrap();
        assert_eq!(s.len(), 64);
        book.seats.insert(
            "lead".into(),
            SeatRecord {
                sha256: hash_secret(&s),
                added: String::new(),
            },
        );
        assert_eq!(book.resolve(&s), Some("lead"));
        assert_eq!(book.resolve(&hash_secret(&s)), None);
        assert_eq!(book.resolve(""), None);
    }
}
