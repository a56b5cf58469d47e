//! Seats: who may connect, and as whom.
//!
//! A seat is a name and a 256-bit secret. The secret is written in clear only into the seat's desk
//! (`desks/NAME/.mcp.json`, mode 0600), where the session's MCP client reads it; `.ovai/seats.json` keeps
//! its SHA-256. A connection presents the secret and is resolved to a seat by its hash, so nothing a
//! session says later can change who it is.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::desk::{self, Reach};
use crate::instance::{Client, Instance};
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
        "There is already a seat called {0}. To give it a new secret, run `ovai seat rotate {0}`."
    )]
    Exists(String),
    #[error(
        "There is already a seat called {existing}, and {name} differs from it only in case: on a disk that ignores case \
         the two would share one desk. Pick another name."
    )]
    CaseClash { name: String, existing: String },
    #[error(
        "There is already a seat called {existing}, and {name} reads the same (l, I and 1 look alike, and so do O \
         and 0): whoever reads the room, index or a log could take one for the other. Pick another name."
    )]
    LookAlike { name: String, existing: String },
    #[error("There is no seat called {name}{near}. The seats are: {known}.")]
    Unknown {
        name: String,
        /// A seat whose name differs only in case, as ` (there is NAME)`, or nothing.
        near: String,
        known: String,
    },
    #[error(
        "{} does not parse ({message} at line {line}, column {column}), so no seat can connect until it is fixed. \
         Run `ovai seat rebuild` to make it again from the desks' .mcp.json files (the version before its last \
         change is kept beside it as seats.json.previous).",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        message: String,
        line: usize,
        column: usize,
    },
    /// seats.json is gone and desks hold the seats: a book written now would hold the new seat alone.
    #[error("{why} Nothing was added: run `ovai seat add {name}` again after it.")]
    BookMissing { why: String, name: String },
    /// seats.json is gone, and a seat was named that it would hold.
    #[error("{0} Nothing was changed.")]
    BookGone(String),
    #[error(transparent)]
    Desk(Box<crate::desk::DeskError>),
    #[error("{0} Nothing was changed.")]
    Config(String),
    #[error("{0}")]
    NotOurs(String),
    #[error(
        "{} is not there (moved or removed?), and the seats are made again from the desks in it, so a rebuild \
         would leave no seat and end every session. Nothing was changed: put desks/ back, then run `ovai seat \
         rebuild` again.",
        .0.display()
    )]
    NoDesks(PathBuf),
    #[error(
        "No desk in {} holds a secret of this server, so a rebuild would leave no seat (there are {seats} now) and \
         end every session. Nothing was changed: put the desks back (each seat's folder with its .mcp.json), then \
         run `ovai seat rebuild` again.",
        desks.display()
    )]
    NoSeatLeft { desks: PathBuf, seats: String },
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// seats.json could not take a new seat after its desk was written.
    #[error(
        "{why}. The seat {name} was not added, {desk}: run `ovai seat add {name}` again once seats.json can be \
         written."
    )]
    NotAdded {
        why: String,
        name: String,
        desk: &'static str,
    },
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
        match crate::files::read_regular(&path, crate::files::MAX_READ_BYTES) {
            Ok(text) => Self::parse(&path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(io("reading", &path)(e)),
        }
    }

    fn parse(path: &Path, text: &str) -> Result<Self, SeatError> {
        serde_json::from_str(text).map_err(|e| SeatError::Corrupt {
            path: path.to_path_buf(),
            message: crate::instance::syntax_message(&e),
            line: e.line(),
            column: e.column(),
        })
    }

    /// The seat whose secret this is, if any.
    pub fn resolve(&self, secret: &str) -> Option<&str> {
        match self.resolve_all(secret).as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Every seat whose secret this is: one, or none; more only if seats.json was edited by hand.
    pub fn resolve_all(&self, secret: &str) -> Vec<&str> {
        let h = hash_secret(secret);
        self.seats
            .iter()
            .filter(|(_, rec)| same(&rec.sha256, &h))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// A new seat's name must be free, in any case.
    fn check_new(&self, name: &str) -> Result<(), SeatError> {
        if self.seats.contains_key(name) {
            return Err(SeatError::Exists(name.into()));
        }
        if let Some(existing) = self.names().find(|s| s.eq_ignore_ascii_case(name)) {
            return Err(SeatError::CaseClash {
                name: name.into(),
                existing: existing.into(),
            });
        }
        let looks = names::look(name);
        if let Some(existing) = self.names().find(|s| names::look(s) == looks) {
            return Err(SeatError::LookAlike {
                name: name.into(),
                existing: existing.into(),
            });
        }
        Ok(())
    }

    /// The refusal for a seat this book does not have, naming the ones it has.
    pub fn unknown(&self, name: &str) -> SeatError {
        let known: Vec<_> = self.names().collect();
        SeatError::Unknown {
            // Named as given, and given is anything.
            name: names::clipped(name, 64),
            near: known
                .iter()
                .find(|s| s.eq_ignore_ascii_case(name))
                .map_or(String::new(), |s| format!(" (there is {s})")),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.seats.keys().map(String::as_str)
    }

    /// Writes seats.json whole (a temporary file, synced, renamed over it), keeping the version before
    /// as seats.json.previous when that one is sound.
    fn save(&self, inst: &Instance) -> Result<(), SeatError> {
        Ok(self.stage(inst)?.commit()?)
    }

    /// Keeps the copy of seats.json as it is, and writes this book beside it, to take its place on
    /// `commit`: a change that writes desks too stages first, so a disk with no room fails it before
    /// a desk holds a secret seats.json does not know.
    fn stage(&self, inst: &Instance) -> Result<crate::files::Staged, SeatError> {
        let path = inst.seats_file();
        if let Ok(before) = crate::files::read_regular(&path, crate::files::MAX_READ_BYTES)
            && Self::parse(&path, &before).is_ok()
        {
            crate::files::write_private(&inst.seats_previous(), before.as_bytes())?;
        }
        let text = serde_json::to_string_pretty(self).unwrap_or_default() + "\n";
        Ok(crate::files::stage_private(&path, text.as_bytes())?)
    }
}

/// Whether seats.json can be written now (a full disk, a folder in the way), tried as a change writes it
/// and taken back: a seat command says so before it ends the plugin host and its calls for nothing.
pub fn check_writable(inst: &Instance) -> Result<(), SeatError> {
    // Gone with the seats' book (`rm -rf .ovai`): the rebuild that makes them again makes it.
    ensure_private_dir(inst)?;
    SeatBook::load(inst)
        .unwrap_or_default()
        .stage(inst)
        .map(drop)
}

/// What `ovai seat rebuild` made.
pub struct Rebuilt {
    /// The seats now in seats.json.
    pub seats: Vec<String>,
    /// Desks that hold no secret of this server (left out), as (seat, why).
    pub left_out: Vec<(String, String)>,
    /// Seats seats.json held that it holds no more (their sessions end), as (seat, why).
    pub dropped: Vec<(String, String)>,
    /// Desks that started an ovai no longer there, or named another root, now pointed here.
    pub repointed: Vec<(String, desk::Stale)>,
    /// Desks given the files of clients `"clients"` names that they had none of, as (seat, clients).
    pub completed: Vec<(String, Vec<&'static str>)>,
    /// Desks that named another instance (it moved), as (seat, the root they named).
    pub moved: Vec<(String, String)>,
    /// What could not be done in those desks, in words.
    pub warnings: Vec<String>,
}

/// Makes seats.json again from the secrets in the desks' `.mcp.json` files: a seat for each desk whose
/// folder is a seat name and whose `.mcp.json` holds this server's entry. Nobody has to re-key a desk.
pub fn rebuild(inst: &Instance, ovai_exe: &Path) -> Result<Rebuilt, SeatError> {
    let _lock = lock_book(inst)?;
    let old = SeatBook::load(inst).unwrap_or_default();
    let mut book = SeatBook::default();
    let mut left_out = Vec::new();
    let desks = inst.desks_dir();
    let mut names: Vec<String> = match std::fs::read_dir(&desks) {
        Ok(entries) => entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SeatError::NoDesks(desks));
        }
        Err(e) => return Err(io("reading", &desks)(e)),
    };
    names.sort();
    let mut found: Vec<(String, String)> = Vec::new();
    for name in names {
        if let Some(why) = names::why_not(&name) {
            left_out.push((name, format!("its folder name is not a seat name ({why})")));
            continue;
        }
        let Some(secret) = crate::desk::secret_in(&inst.desk(&name)) else {
            let why = if crate::desk::mcp_json(&inst.desk(&name)).exists() {
                "its .mcp.json holds no secret of this server".to_string()
            } else {
                format!(
                    "it has no .mcp.json (a removed seat's desk has none; `ovai seat add {name}` makes it a \
                     seat again)"
                )
            };
            left_out.push((name, why));
            continue;
        };
        found.push((name, hash_secret(&secret)));
    }
    // A desk copied into another seat's folder holds the same secret, and a secret of two seats opens
    // neither: the seat that held it keeps it (else the first by name), and the copy is left out.
    let mut holder: HashMap<&str, &str> = HashMap::new();
    for (name, hash) in &found {
        let held_before = old.seats.get(name).is_some_and(|r| &r.sha256 == hash);
        let entry = holder.entry(hash.as_str()).or_insert(name.as_str());
        if held_before && old.seats.get(*entry).is_none_or(|r| &r.sha256 != hash) {
            *entry = name.as_str();
        }
    }
    let mut copies = Vec::new();
    for (name, hash) in &found {
        let keeper = holder.get(hash.as_str()).copied().unwrap_or(name.as_str());
        if keeper != name {
            copies.push((
                name.clone(),
                format!(
                    "its .mcp.json holds the same secret as desks/{keeper} (a copied desk?): `ovai seat add \
                     {name}` gives it a secret of its own"
                ),
            ));
        }
    }
    let copied: HashSet<String> = copies.iter().map(|(n, _)| n.clone()).collect();
    left_out.extend(copies);
    left_out.sort();
    for (name, sha256) in found {
        if copied.contains(&name) {
            continue;
        }
        let added = old
            .seats
            .get(&name)
            .map(|r| r.added.clone())
            .unwrap_or_else(|| crate::runtime_log::timestamp(SystemTime::now()));
        book.seats.insert(name, SeatRecord { sha256, added });
    }
    if book.seats.is_empty() && !old.seats.is_empty() {
        return Err(SeatError::NoSeatLeft {
            desks,
            seats: old.seats.keys().cloned().collect::<Vec<_>>().join(", "),
        });
    }
    let dropped = old
        .seats
        .keys()
        .filter(|name| !book.seats.contains_key(*name))
        .map(|name| {
            let why = match left_out.iter().find(|(n, _)| n == name) {
                Some((_, why)) => why.clone(),
                None => format!("its desk desks/{name} is not there"),
            };
            (name.clone(), why)
        })
        .collect();
    // A desk that starts an ovai no longer there (the binary moved) is pointed at this one, its secret
    // kept: its client could not start the bridge at all.
    // And a desk made before a client was added to "clients" gets its file, with the same secret: no
    // session ends for it.
    let mut repointed = Vec::new();
    let mut completed = Vec::new();
    let mut moved = Vec::new();
    let mut warnings = Vec::new();
    let clients = desk_clients(inst).unwrap_or_default();
    for name in book.seats.keys() {
        let desk = inst.desk(name);
        let Some(secret) = desk::secret_in(&desk) else {
            continue;
        };
        let stale = desk::stale(inst, &desk);
        let other_root = desk::other_root(inst, &desk);
        let mut missing = desk::clients::missing(&desk, &clients);
        let unapproved =
            clients.contains(&Client::ClaudeCode) && !desk::settings_file(&desk).exists();
        if unapproved {
            missing.insert(0, Client::ClaudeCode.name());
        }
        if stale.is_none() && missing.is_empty() {
            continue;
        }
        // Completed, a desk keeps how it reaches the server (its URL, or the program it starts).
        let url = desk::url_in(&desk);
        let command = desk::command_in(&desk).map(PathBuf::from);
        let reach = match (&stale, url.as_deref(), command.as_deref()) {
            (None, Some(url), _) => Reach::Url { url },
            (None, None, Some(exe)) => Reach::Bridge { exe },
            _ => Reach::Bridge { exe: ovai_exe },
        };
        // One desk that cannot be written is said, and the book is made all the same: that is what
        // this command is for.
        match write_desk(inst, &desk, &reach, &secret) {
            Ok((_, left, written)) => warnings.extend(left.into_iter().chain(written)),
            Err(e) => {
                warnings.push(format!("desks/{name} was not written: {e}"));
                continue;
            }
        }
        if unapproved && let Err(e) = desk::approve(&desk).map(|w| warnings.extend(w)) {
            warnings.push(e.to_string());
        }
        // Said completed for the clients whose files are there now (one that could not be written is
        // said above).
        let still = desk::clients::missing(&desk, &clients);
        missing.retain(|c| !still.contains(c));
        if let Some(other) = other_root {
            moved.push((name.clone(), other));
        }
        match stale {
            Some(stale) => repointed.push((name.clone(), stale)),
            None if !missing.is_empty() => completed.push((name.clone(), missing)),
            None => {}
        }
    }
    book.save(inst)?;
    Ok(Rebuilt {
        seats: book.seats.keys().cloned().collect(),
        left_out,
        dropped,
        repointed,
        completed,
        moved,
        warnings,
    })
}

/// seats.json as the daemon last read it: read again (off the daemon's thread) only when the file was
/// replaced, which every write does (a rename), so a removed or rotated seat is seen at once.
#[derive(Default)]
pub struct SeatCache {
    last: std::sync::Mutex<Option<(BookStamp, BookRead)>>,
    /// When the file was last looked at, for readers that can take a book a moment old (`index`).
    checked: std::sync::Mutex<Option<std::time::Instant>>,
}

/// seats.json as read: the book, or why it cannot be read.
pub type BookRead = Arc<Result<SeatBook, SeatError>>;

/// What tells one version of seats.json from another: its inode, size and modification time.
type BookStamp = Option<(u64, u64, Option<SystemTime>)>;

fn stamp(path: &Path) -> BookStamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()))
}

impl SeatCache {
    /// The book as read at most `age` ago (for showing, never for deciding who connects).
    pub async fn recent(&self, inst: &Instance, age: std::time::Duration) -> BookRead {
        match self.read_within(age) {
            Some(book) => book,
            None => self.get(inst).await,
        }
    }

    /// The book, when it was read at most `age` ago; otherwise `recent` reads it.
    pub fn read_within(&self, age: std::time::Duration) -> Option<BookRead> {
        let fresh = crate::sync::lock(&self.checked).is_some_and(|t| t.elapsed() < age);
        if !fresh {
            return None;
        }
        crate::sync::lock(&self.last)
            .as_ref()
            .map(|(_, book)| book.clone())
    }

    /// Forgets what was read, so the next look reads the file again whatever its stamp says.
    pub fn forget(&self) {
        *crate::sync::lock(&self.last) = None;
    }

    /// The book as the file is now.
    pub async fn get(&self, inst: &Instance) -> BookRead {
        *crate::sync::lock(&self.checked) = Some(std::time::Instant::now());
        let path = inst.seats_file();
        let inst = inst.clone();
        let cached = crate::sync::lock(&self.last).clone();
        let now = match tokio::task::spawn_blocking(move || {
            let now = stamp(&path);
            match cached {
                Some((was, book)) if was == now => (now, book, false),
                _ => (now, Arc::new(SeatBook::load(&inst)), true),
            }
        })
        .await
        {
            Ok(now) => now,
            Err(e) => {
                return Arc::new(Err(SeatError::Io {
                    what: "reading",
                    path: PathBuf::from("seats.json"),
                    source: std::io::Error::other(e.to_string()),
                }));
            }
        };
        let (stamp, book, fresh) = now;
        if fresh {
            *crate::sync::lock(&self.last) = Some((stamp, book.clone()));
        }
        book
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

/// `ovai seat add` adds to the book there is: where it is gone and desks hold the seats, to none
/// (helper-92: the others were locked out, their secrets in no book). Not so `ovai init`, which makes
/// the book, beside whatever desks are there.
fn no_book_missing(inst: &Instance, name: &str) -> Result<(), SeatError> {
    match book_missing(inst) {
        Some(why) => Err(SeatError::BookMissing {
            why,
            name: name.to_string(),
        }),
        None => Ok(()),
    }
}

/// When seats.json is not there but desks are (the private folder removed, a `git clean`): no seat can
/// connect, and the desks hold what makes the seats again. In words, or `None`.
pub fn book_missing(inst: &Instance) -> Option<String> {
    if std::fs::symlink_metadata(inst.seats_file()).is_ok() {
        return None;
    }
    let desks = std::fs::read_dir(inst.desks_dir())
        .ok()?
        .flatten()
        .filter(|e| e.path().join(".mcp.json").is_file())
        .count();
    (desks > 0).then(|| {
        format!(
            "{} is not there, so no seat can connect; {desks} desk{} in {} hold{} the seats' secrets: \
             `ovai seat rebuild` makes the seats again from them.",
            inst.seats_file().display(),
            if desks == 1 { "" } else { "s" },
            inst.desks_dir().display(),
            if desks == 1 { "s" } else { "" },
        )
    })
}

/// Makes `.ovai/` (mode 0700) if it is not there; refuses one that is a link, no folder, another user's or
/// open to others (they could have put files of their own there).
pub fn ensure_private_dir(inst: &Instance) -> Result<(), SeatError> {
    let dir = inst.private_dir();
    if let Some(why) = inst.private_dir_unsound() {
        return Err(SeatError::NotOurs(inst.private_dir_refusal(&why)));
    }
    if std::fs::symlink_metadata(&dir).is_err() {
        // Made 0700 at once: never open to others for a moment, which a bridge connecting then would
        // refuse.
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io("making", &dir))?;
    }
    crate::files::set_mode(&dir, 0o700)?;
    // Where the instance is a checkout, `git add -A` at its root stages none of its secrets.
    crate::files::keep_private(
        &inst.private_gitignore(),
        crate::instance::PRIVATE_GITIGNORE,
    )?;
    Ok(())
}

/// The refusals `ovai seat add NAME [--url URL]` can meet before anything is written, asked before the
/// daemon ends its boxed plugin hosts for the change: a mistyped command ends nobody's calls. `add`
/// asks again under the book's lock.
pub fn precheck_add(inst: &Instance, name: &str, url: Option<&str>) -> Result<(), SeatError> {
    check_name(name)?;
    check_not_a_role(inst, name)?;
    let clients = desk_clients(inst)?;
    no_book_missing(inst, name)?;
    SeatBook::load(inst)?.check_new(name)?;
    if let Some(url) = url {
        desk::check_url(url)?;
    }
    let desk = inst.desk(name);
    desk::check_writable(&desk)?;
    // Before the hosts are held: a desk refused then would have cut their calls for nothing.
    if desk.exists() {
        desk::check_for_secret(&desk, &clients)?;
    }
    Ok(())
}

/// The same for `rotate` (which writes the desk again, keeping its URL unless given one) and `remove`.
pub fn precheck_existing(
    inst: &Instance,
    name: &str,
    rotate: Option<(Option<&str>, bool)>,
) -> Result<(), SeatError> {
    let book = SeatBook::load(inst)?;
    if !book.seats.contains_key(name) {
        // "The seats are: none" would hide where they went.
        if let Some(why) = book_missing(inst) {
            return Err(SeatError::BookGone(why));
        }
        return Err(book.unknown(name));
    }
    if let Some((url, local)) = rotate {
        let clients = desk_clients(inst)?;
        let desk = inst.desk(name);
        desk::check_writable(&desk)?;
        // `--local` drops the desk's URL: it is not judged.
        let kept = desk::url_in(&desk).filter(|_| !local);
        if let Some(url) = url.map(str::to_string).or(kept) {
            desk::check_url(&url)?;
        }
        if desk.exists() {
            desk::check_for_secret(&desk, &clients)?;
        }
    }
    Ok(())
}

pub fn check_name(name: &str) -> Result<(), SeatError> {
    match names::why_not(name) {
        Some(why) => Err(SeatError::BadName {
            name: name.into(),
            why,
        }),
        None => Ok(()),
    }
}

/// A Worker named for a role would read as that role wherever it is named (`Seat Leader: Worker`).
fn check_not_a_role(inst: &Instance, name: &str) -> Result<(), SeatError> {
    let config = inst.read_config();
    let leader = config
        .as_ref()
        .map(|c| c.leader.clone())
        .unwrap_or_default();
    let role_word = ["leader", "worker", "user"]
        .iter()
        .any(|r| name.eq_ignore_ascii_case(r));
    if role_word && name != leader {
        return Err(SeatError::BadName {
            name: name.into(),
            why: format!(
                "it would read as a role, and be a Worker's seat (the Leader's is {leader})"
            ),
        });
    }
    // Signed so in the room, a seat would read as the person, or as the server (helper-94).
    if let Ok(c) = &config
        && name.eq_ignore_ascii_case(&c.user)
        && name != leader
    {
        return Err(SeatError::BadName {
            name: name.into(),
            why: "it is the User's name in openovai.json, and the room would read its messages as the \
                  User's"
                .into(),
        });
    }
    if ["ovai", "openovai", "server", "system"]
        .iter()
        .any(|r| name.eq_ignore_ascii_case(r))
    {
        return Err(SeatError::BadName {
            name: name.into(),
            why: "it would read as the server speaking, in the room and the logs".into(),
        });
    }
    Ok(())
}

/// What `ovai seat add` made.
pub struct AddedSeat {
    pub mcp_json: PathBuf,
    /// What else was said of the desk, as sentences.
    pub warnings: Vec<String>,
    /// The clients' files that could not be written, as sentences: the seat was added all the same, and
    /// the command fails for them.
    pub left: Vec<String>,
    /// The clients those files are for: a session of theirs at the desk does not reach ovai.
    pub clients_left: Vec<Client>,
}

/// Makes a seat: its secret, its hash in seats.json, and its desk with the `.mcp.json` a client reads and
/// the Claude Code settings that approve the server and its tools.
pub fn add(
    inst: &Instance,
    name: &str,
    ovai_exe: &Path,
    url: Option<&str>,
) -> Result<AddedSeat, SeatError> {
    check_name(name)?;
    let _lock = lock_book(inst)?;
    let mut book = SeatBook::load(inst)?;
    book.check_new(name)?;
    let mut warnings: Vec<String> = match url {
        Some(url) => desk::check_url(url)?.into_iter().collect(),
        None => Vec::new(),
    };
    let secret = new_secret().map_err(io("drawing a secret for", &inst.seats_file()))?;
    let desk = inst.desk(name);
    let clients = desk_clients(inst)?;
    desk::check_for_secret(&desk, &clients)?;
    let reach = match url {
        Some(url) => Reach::Url { url },
        None => Reach::Bridge { exe: ovai_exe },
    };
    book.seats.insert(
        name.into(),
        SeatRecord {
            sha256: hash_secret(&secret),
            added: crate::runtime_log::timestamp(SystemTime::now()),
        },
    );
    // Before the desk is made: a seats.json that cannot be written leaves no empty desk behind.
    let staged = book.stage(inst)?;
    let desk_was_there = std::fs::symlink_metadata(&desk).is_ok();
    std::fs::create_dir_all(&desk).map_err(io("making the desk", &desk))?;
    let mcp_json = desk::write_server_entry(inst, &desk, &reach, &secret)?;
    let (clients_left, left): (Vec<Client>, Vec<String>) =
        desk::clients::write(inst, &desk, &reach, &secret, &clients)
            .into_iter()
            .unzip();
    // Replacing seats.json can still fail (made immutable, its folder taken away): the desk goes too.
    if let Err(e) = staged.commit() {
        let desk = if desk_was_there {
            "and its desk, which was there before, keeps the files written for it (their secret is in no book; \
             a `seat rebuild` would make it a seat)"
        } else if std::fs::remove_dir_all(&desk).is_ok() {
            "and its desk was taken away again"
        } else {
            "and its desk could not be taken away again (its secret is in no book; a `seat rebuild` would make \
             it a seat: remove the desk)"
        };
        return Err(SeatError::NotAdded {
            why: e.to_string().trim_end_matches('.').to_string(),
            name: name.to_string(),
            desk,
        });
    }
    if clients.contains(&Client::ClaudeCode) {
        match desk::approve(&desk) {
            Ok(w) => warnings.extend(w),
            Err(e) => warnings.push(e.to_string()),
        }
    }
    if let Err(why) = desk::git::keep_out(&desk) {
        warnings.push(format!(
            "{why}: the desk's files that hold the secret are not kept out of git"
        ));
    }
    Ok(AddedSeat {
        mcp_json,
        warnings,
        left,
        clients_left,
    })
}

/// The clients a desk is made for, as openovai.json's `"clients"` says: all of them where it says
/// nothing, or cannot be read at all (the command that reads it says why); what is wrong with the key.
pub fn desk_clients(inst: &Instance) -> Result<Vec<Client>, SeatError> {
    let raw = std::fs::read_to_string(inst.root.join(crate::instance::CONFIG_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    crate::instance::clients(raw.as_ref().and_then(|v| v.get("clients")))
        .map_err(|e| SeatError::Config(e.to_string()))
}

/// Gives a seat a new secret: written to its desk, its hash into seats.json in the same step, so the old
/// one opens nothing from then on. The seat itself never leaves the book (so the Leader stays the Leader).
/// A remote seat's desk keeps its URL unless `url` names another, or `local` points it back at the bridge.
pub fn rotate(
    inst: &Instance,
    name: &str,
    ovai_exe: &Path,
    url: Option<&str>,
    local: bool,
) -> Result<Rotated, SeatError> {
    let _lock = lock_book(inst)?;
    let mut book = SeatBook::load(inst)?;
    let Some(record) = book.seats.get_mut(name) else {
        return Err(book.unknown(name));
    };
    let secret = new_secret().map_err(io("drawing a secret for", &inst.seats_file()))?;
    record.sha256 = hash_secret(&secret);
    let desk = inst.desk(name);
    // Gone (moved away, removed): made again whole, as `seat add` makes it, and said.
    let made = !desk.exists();
    std::fs::create_dir_all(&desk).map_err(io("making the desk", &desk))?;
    let kept = desk::url_in(&desk).filter(|_| !local);
    let url = url.or(kept.as_deref());
    let warning = match url {
        Some(url) => desk::check_url(url)?,
        None => None,
    };
    let reach = match url {
        Some(url) => Reach::Url { url },
        None => Reach::Bridge { exe: ovai_exe },
    };
    let staged = book.stage(inst)?;
    let (path, left, written) = write_desk(inst, &desk, &reach, &secret)?;
    let mut warning = warning.into_iter().collect::<Vec<_>>();
    warning.extend(written);
    staged.commit()?;
    if made {
        // Its URL, if it had one, went with it: made for this machine unless the command names one.
        let reached = if url.is_some() {
            String::new()
        } else {
            format!(
                " for a session on this machine (a seat on another machine wants `ovai seat rotate {name} --url \
                 URL`)"
            )
        };
        warning.push(format!(
            "{} was not there (moved or removed?): it is made again{reached}, with every client's files; a copy \
             of it elsewhere holds the old secret, which opens nothing now.",
            desk.display()
        ));
        if desk_clients(inst).is_ok_and(|c| c.contains(&Client::ClaudeCode)) {
            match desk::approve(&desk) {
                Ok(w) => warning.extend(w),
                Err(e) => warning.push(e.to_string()),
            }
        }
    }
    Ok(Rotated {
        mcp_json: path,
        warning: (!warning.is_empty()).then(|| warning.join(" ")),
        left,
    })
}

/// What `ovai seat rotate` did: the seat has its new secret whatever `left` says.
pub struct Rotated {
    pub mcp_json: PathBuf,
    pub warning: Option<String>,
    /// The clients' files left with the old secret, as sentences: the command fails for them.
    pub left: Vec<String>,
}

/// Writes a desk's files for every client it is made for, with `secret`; the clients' files it could not
/// write, and what else could not be done, in words.
fn write_desk(
    inst: &Instance,
    desk: &Path,
    reach: &Reach<'_>,
    secret: &str,
) -> Result<(PathBuf, Vec<String>, Vec<String>), SeatError> {
    let clients = desk_clients(inst)?;
    desk::check_for_secret(desk, &clients)?;
    let path = desk::write_server_entry(inst, desk, reach, secret)?;
    let left = desk::clients::write(inst, desk, reach, secret, &clients)
        .into_iter()
        .map(|(_, said)| said)
        .collect();
    let mut warning = Vec::new();
    if let Err(why) = desk::git::keep_out(desk) {
        warning.push(format!(
            "{why}: the desk's files that hold the secret are not kept out of git"
        ));
    }
    Ok((path, left, warning))
}

/// Forgets a seat: its hash leaves seats.json, and its entries leave the desk's `.mcp.json` and Claude
/// Code settings. The desk itself is somebody's working directory and stays.
pub fn remove(inst: &Instance, name: &str) -> Result<(), SeatError> {
    let _lock = lock_book(inst)?;
    let mut book = SeatBook::load(inst)?;
    if book.seats.remove(name).is_none() {
        return Err(book.unknown(name));
    }
    book.save(inst)?;
    let desk = inst.desk(name);
    desk::remove_server_entry(&desk)?;
    desk::unapprove(&desk)?;
    desk::clients::remove(&desk)?;
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
