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
}

#[derive(Serialize, Deserialize)]
struct File {
    /// When the server that wrote it stopped, in seconds since the Unix epoch.
    at: u64,
    sessions: HashMap<String, Session>,
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
    /// Takes up what the last stop left at `path` (the file goes: it is read once).
    pub fn new(path: PathBuf, caller: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        let left = read(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        Self {
            path,
            live: Mutex::default(),
            left: Mutex::new(left),
            caller: Box::new(caller),
        }
    }

    /// The hash of the secret of the seat whose session `id` the last stop left, if it did.
    pub fn left_by(&self, id: &str) -> Option<String> {
        lock(&self.left).get(id).map(|s| s.hash.clone())
    }

    /// Session `id` ended (closed, idled out, its seat changed): not kept.
    pub fn forget(&self, id: &str) {
        lock(&self.live).remove(id);
    }

    /// Writes the live sessions for the next start, as the server stops (before it ends them).
    pub fn keep(&self) {
        let sessions = std::mem::take(&mut *lock(&self.live));
        if sessions.is_empty() {
            return;
        }
        let at = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let written = serde_json::to_vec(&File { at, sessions })
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                crate::files::write_private(&self.path, &bytes).map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::warn!(
                "the HTTP sessions could not be kept for the next start ({e}): their clients open new ones"
            );
        }
    }
}

fn read(path: &Path) -> Option<HashMap<String, Session>> {
    let text = crate::files::read_regular(path, crate::files::MAX_READ_BYTES).ok()?;
    let file: File = serde_json::from_str(&text).ok()?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (now.saturating_sub(file.at) <= KEPT_FOR.as_secs()).then_some(file.sessions)
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
        let taken = {
            let mut left = lock(&self.left);
            match (left.get(session_id), (self.caller)()) {
                (Some(s), Some(hash)) if s.hash == hash => left.remove(session_id),
                _ => None,
            }
        };
        let state = taken.map(|s| {
            let state = s.state.clone();
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
