//! The daemon's file descriptors: every connection holds one (a session's bridge, a control request),
//! and so do the host, its pipes, runtime.log and the room. At start the soft limit is raised to the hard
//! one, and runtime.log says so if `maxConnections` does not fit under it with room for the rest.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use crate::runtime_log::{RuntimeLog, Topic};

/// Descriptors kept for everything but connections: the host and its pipes, files, the watcher, a
/// respawning host beside a retiring one.
const RESERVE: u64 = 64;

/// `per_connection`: descriptors each connection may hold (a session holds up to four: what it reads and
/// what it writes, its pipes or its socket's halves; the write end's registration while the peer does not
/// read; and the socket it asks whether its client died. For a moment at its welcome, two more: the
/// client's ends of its pipes), counted with the HTTP endpoint's own connections when it listens.
pub fn raise_limit(log: &RuntimeLog, max_connections: usize, per_connection: usize) {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let wanted = (max_connections * per_connection) as u64 + RESERVE;
    if wanted > limit {
        log.row(
            Topic::Server,
            &format!(
                "maxConnections is {max_connections}, but this daemon may open only {limit} file descriptors \
                 and keeps {RESERVE} for its own files and the plugin host: past about {} connections, new ones \
                 may fail before they are refused in words. Lower maxConnections in openovai.json, or raise the \
                 limit (ulimit -n, or LimitNOFILE= in the service unit).",
                limit.saturating_sub(RESERVE) / per_connection as u64
            ),
        );
    }
}
