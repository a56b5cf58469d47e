//! The 2025 sessions a stopping server leaves for the next one (rmcp's `SessionStore`): what each was
//! initialised with and the hash of its seat's secret, written to the private folder as the server stops
//! and read once by the next start. rmcp replays a kept session's `initialize` when its client comes back
//! with its id, so a client that never opens another session after a 404 (Gemini CLI) goes on after an
//! upgrade or a service restart (helper-95). A crash keeps nothing: only a stop writes them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use serde::{Deserialize, Serialize};

use crate::sync::lock;

/// Sessions left by a stop longer ago than this are not taken up: their clients have moved on.
const KEPT_FOR: Duration = Duration::from_secs(15 * 60);

/// A session as the file keeps it.
#[derive(Serialize, Deserialize)]
struct Session {
    /// The hash of the secret of the seat that opened it: only that seat, with that secret, takes it up.
    hash: String,
    state: SessionState,
    /// When the server it was live on stopped, in seconds since the Unix epoch (0 while live): one left
    /// by a stop and not taken up by the next is kept for the one after from the same time, no longer.
    #[serde(default)]
    left_at: u64,
}

impl Session {
    /// Left by a stop less than KEPT_FOR ago (and not in the future: a clock stepped back, a hand edit).
    fn fresh(&self, now: u64) -> bool {
        self.left_at <= now && now - self.left_at <= KEPT_FOR.as_secs()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub struct Carried {
    path: PathBuf,
    /// The live sessions, as rmcp stored them at their handshake.
    live: Mutex<HashMap<String, Session>>,
    /// Those the last stop left, until their clients come back.
    left: Mutex<HashMap<String, Session>>,
    /// The hash of the secret of the request being answered (the gate's caller).
    caller: Box<dyn Fn() -> Option<String> + Send + Sync>,
}

impl Carried {
    /// Takes up what the last stop left at `path` (the file goes: it is read once); what it was, in
    /// words for runtime.log when there is something to say.
    pub fn new(
        path: PathBuf,
        caller: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> (Self, Option<String>) {
        let (left, said) = match std::fs::symlink_metadata(&path) {
            Err(_) => (HashMap::new(), None),
            Ok(_) => match read(&path) {
                Ok(left) if left.is_empty() => (left, None),
                Ok(mut left) => {
                    let all = left.len();
                    let now = now();
                    left.retain(|_, s| s.fresh(now));
                    let mut said = Vec::new();
                    if !left.is_empty() {
                        said.push(format!(
                            "{} of the last server {} kept for their clients to take up, each by its own seat, \
                             for {} minutes from that server's stop.",
                            crate::names::counted(left.len(), "HTTP session", "HTTP sessions"),
                            if left.len() == 1 { "is" } else { "are" },
                            KEPT_FOR.as_secs() / 60
                        ));
                    }
                    // A clock stepped between the stop and this start (or a stop long ago) is said, not
                    // left for a client's 404 to show.
                    let stale = all - left.len();
                    if stale > 0 {
                        said.push(format!(
                            "{} of the last server {} not taken up, left more than {} minutes ago by this machine's \
                             clock (or at a time still to come): a client whose session is not taken up opens a \
                             new one.",
                            crate::names::counted(stale, "HTTP session", "HTTP sessions"),
                            if stale == 1 { "is" } else { "are" },
                            KEPT_FOR.as_secs() / 60
                        ));
                    }
                    (left, Some(said.join(" ")))
                }
                Err(why) => (
                    HashMap::new(),
                    Some(format!(
                        "{} could not be read ({why}): the HTTP sessions of the last server are not taken up, \
                         and their clients open new ones.",
                        path.display()
                    )),
                ),
            },
        };
        let _ = std::fs::remove_file(&path);
        let carried = Self {
            path,
            live: Mutex::default(),
            left: Mutex::new(left),
            caller: Box::new(caller),
        };
        (carried, said)
    }

    /// The hash of the secret of the seat whose session `id` a stop left, if one did, not too long ago.
    pub fn left_by(&self, id: &str) -> Option<String> {
        let now = now();
        lock(&self.left)
            .get(id)
            .filter(|s| s.fresh(now))
            .map(|s| s.hash.clone())
    }

    /// Session `id` ended (closed, idled out, its seat changed, ended with DELETE): not kept, nor taken
    /// up.
    pub fn forget(&self, id: &str) {
        lock(&self.live).remove(id);
        lock(&self.left).remove(id);
    }

    /// Writes the sessions for the next start, as the server stops (before it ends them): the live ones,
    /// and those a stop before left that were not taken up yet, from that stop's time. Why they could
    /// not be written, in words for runtime.log.
    pub fn keep(&self) -> Result<(), String> {
        let now = now();
        let mut sessions = std::mem::take(&mut *lock(&self.live));
        for s in sessions.values_mut() {
            s.left_at = now;
        }
        // Those a stop before left come after the live ones of their seat: at most a seat's 64 are kept
        // (helper-105: five stops in a row kept 1,024).
        let mut earlier: Vec<(String, Session)> = std::mem::take(&mut *lock(&self.left))
            .into_iter()
            .filter(|(_, s)| s.fresh(now))
            .collect();
        earlier.sort_by_key(|(_, s)| std::cmp::Reverse(s.left_at));
        let mut per_seat: HashMap<String, usize> = HashMap::new();
        for s in sessions.values() {
            *per_seat.entry(s.hash.clone()).or_default() += 1;
        }
        for (id, s) in earlier {
            let n = per_seat.entry(s.hash.clone()).or_default();
            if *n < crate::server::sessions::SESSIONS_PER_SEAT {
                *n += 1;
                sessions.insert(id, s);
            }
        }
        if sessions.is_empty() {
            return Ok(());
        }
        serde_json::to_vec(&sessions)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                crate::files::write_private(&self.path, &bytes).map_err(|e| e.to_string())
            })
            .map_err(|e| {
                format!(
                    "{} could not be kept for the next start ({}): a client whose session is not taken up \
                     opens a new one.",
                    crate::names::counted(sessions.len(), "HTTP session", "HTTP sessions"),
                    crate::names::escape_controls(&e, false)
                )
            })
    }
}

fn read(path: &Path) -> Result<HashMap<String, Session>, String> {
    let text = crate::files::read_regular(path, crate::files::MAX_READ_BYTES)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

impl SessionStore for Carried {
    fn load<'a, 'b, 'c>(
        &'a self,
        session_id: &'b str,
    ) -> BoxFuture<'c, Result<Option<SessionState>, SessionStoreError>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        // Taken up once, by its own seat (the gate let only that one through): live again.
        let now = now();
        let taken = {
            let mut left = lock(&self.left);
            match (left.get(session_id), (self.caller)()) {
                (Some(s), Some(hash)) if s.hash == hash && s.fresh(now) => left.remove(session_id),
                _ => None,
            }
        };
        let state = taken.map(|mut s| {
            let state = s.state.clone();
            s.left_at = 0;
            lock(&self.live).insert(session_id.to_string(), s);
            state
        });
        Box::pin(async move { Ok(state) })
    }

    fn store<'a, 'b, 'd, 'c>(
        &'a self,
        session_id: &'b str,
        state: &'d SessionState,
    ) -> BoxFuture<'c, Result<(), SessionStoreError>>
    where
        'a: 'c,
        'b: 'c,
        'd: 'c,
        Self: 'c,
    {
        if let Some(hash) = (self.caller)() {
            lock(&self.live).insert(
                session_id.to_string(),
                Session {
                    hash,
                    state: state.clone(),
                    left_at: 0,
                },
            );
        }
        Box::pin(async { Ok(()) })
    }

    fn delete<'a, 'b, 'c>(
        &'a self,
        session_id: &'b str,
    ) -> BoxFuture<'c, Result<(), SessionStoreError>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.forget(session_id);
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sessions left by stops in a row are kept at most a seat's 64, the newest first (helper-105: five
    /// stops of 64 sessions on each of three seats kept 1,024).
    #[test]
    fn a_stop_keeps_at_most_a_seats_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("http-sessions.json");
        let state: SessionState = serde_json::from_value(serde_json::json!({
            "initialize_params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "t", "version": "1" }
            }
        }))
        .unwrap();
        let now = now();
        let left: HashMap<String, Session> = (0..100u64)
            .map(|i| {
                let hash = if i < 90 { "a" } else { "b" };
                let session = Session {
                    hash: hash.into(),
                    state: state.clone(),
                    left_at: now - i,
                };
                (format!("s{i}"), session)
            })
            .collect();
        std::fs::write(&path, serde_json::to_vec(&left).unwrap()).unwrap();
        let (carried, _) = Carried::new(path.clone(), || None);
        carried.keep().unwrap();
        let kept = read(&path).unwrap();
        let of = |h: &str| kept.values().filter(|s| s.hash == h).count();
        assert_eq!((of("a"), of("b")), (64, 10));
        assert!(kept.contains_key("s0") && !kept.contains_key("s89"));
    }
}
