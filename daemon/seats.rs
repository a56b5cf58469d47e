//! Seats: who may connect, and as whom.
//!
//! A seat is a name and a 256-bit secret. The secret is written in clear only into the seat's desk
//! (`desks/NAME/.mcp.json`, mode 0600), where the session's MCP client reads it; `.ovai/seats.json` keeps
//! its SHA-256. A connection presents the secret and is resolved to a seat by its hash, so nothing a
//! session says later can change who it is.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

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
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
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
    Ok(hex(&bytes))
}

pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.trim().as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
        write_private(&path, text.as_bytes())
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
    set_mode(&dir, 0o700).map_err(io("protecting", &dir))
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Writes a file readable by its owner only, whole or not at all (a temporary file, then a rename).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), SeatError> {
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("writing", &tmp))?;
    f.write_all(bytes).map_err(io("writing", &tmp))?;
    f.sync_all().map_err(io("syncing", &tmp))?;
    set_mode(&tmp, 0o600).map_err(io("protecting", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io("replacing", path))
}

/// What `ovai seat add` made.
pub struct AddedSeat {
    pub mcp_json: PathBuf,
}

/// Makes a seat: its secret, its hash in seats.json, and its desk with the `.mcp.json` a client reads.
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
    let mcp_json = desk.join(".mcp.json");
    write_private(
        &mcp_json,
        mcp_json_text(&mcp_json, inst, ovai_exe, &secret).as_bytes(),
    )?;
    book.seats.insert(
        name.into(),
        SeatRecord {
            sha256: hash_secret(&secret),
            added: crate::runtime_log::timestamp(SystemTime::now()),
        },
    );
    book.save(inst)?;
    Ok(AddedSeat { mcp_json })
}

/// Forgets a seat: its hash leaves seats.json and its entry leaves the desk's `.mcp.json`. The desk
/// itself is somebody's working directory and stays.
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
    let mcp_json = inst.desk(name).join(".mcp.json");
    if let Ok(text) = std::fs::read_to_string(&mcp_json)
        && let Ok(mut v) = serde_json::from_str::<Value>(&text)
    {
        let emptied = match v.get_mut("mcpServers").and_then(Value::as_object_mut) {
            Some(servers) => {
                servers.remove(SERVER_NAME);
                servers.is_empty()
            }
            None => false,
        };
        if emptied && v.as_object().is_some_and(|o| o.len() == 1) {
            std::fs::remove_file(&mcp_json).map_err(io("removing", &mcp_json))?;
        } else {
            let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
            write_private(&mcp_json, text.as_bytes())?;
        }
    }
    Ok(())
}

/// The MCP server's name in a client's configuration: tools then show as `mcp__openovai__NAME`.
pub const SERVER_NAME: &str = "openovai";

/// The desk's `.mcp.json`, keeping any other servers a person configured there.
fn mcp_json_text(path: &Path, inst: &Instance, ovai_exe: &Path, secret: &str) -> String {
    let mut doc = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let entry = json!({
        "type": "stdio",
        "command": ovai_exe.display().to_string(),
        "args": ["mcp"],
        "env": { "OVAI_ROOT": inst.root.display().to_string(), "OVAI_SECRET": secret }
    });
    if let Some(obj) = doc.as_object_mut() {
        let servers = obj.entry("mcpServers").or_insert_with(|| json!({}));
        if !servers.is_object() {
            *servers = json!({});
        }
        if let Some(s) = servers.as_object_mut() {
            s.insert(SERVER_NAME.into(), entry);
        }
    }
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// The secret written in a desk's `.mcp.json`, for `ovai call --seat NAME` from a terminal.
pub fn secret_in_desk(inst: &Instance, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(inst.desk(name).join(".mcp.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v.pointer(&format!("/mcpServers/{SERVER_NAME}/env/OVAI_SECRET"))?
        .as_str()
        .map(str::to_string)
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
