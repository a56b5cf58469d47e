//! Control requests from the CLI of the same instance (`ovai restart`, `status`, `stop`, `seat`, `tools`,
//! `web`): the
//! control secret proves the caller can read `.ovai/`, which is its owner's alone.

use std::collections::HashMap;
use std::sync::Arc;

use crate::unix_io::WriteHalf;
use serde::Serialize;
use tokio::io::AsyncWriteExt;

use super::daemon::Daemon;
use crate::runtime_log::Topic;
use crate::sync::lock;
use crate::wire::{
    self, ControlOp, HostStatus, Reply, SeatStatus, SeatsReply, StatusReply, StopReply, ToolEntry,
    ToolsReply,
};

pub async fn handle(
    daemon: &Arc<Daemon>,
    secret: &str,
    op: Option<ControlOp>,
    why: Option<&str>,
    write: &mut WriteHalf,
) {
    let mut held = false;
    let line = if !crate::seats::same(&daemon.control_secret, secret) {
        refused(
            "the control secret does not match this server's: .ovai/control.secret is rewritten at every start, so this command may belong to another instance",
        )
    } else {
        match op {
            Some(ControlOp::Restart) => {
                reply(daemon.restart(why.unwrap_or("`ovai restart`")).await)
            }
            Some(ControlOp::Status) => wire::line(&Reply::done(status(daemon, true).await)),
            Some(ControlOp::Seats) => {
                let changed = daemon.seats_changed(why).await;
                let left_out = match changed {
                    Ok(_) => left_out_by_a_new_host(daemon).await,
                    Err(_) => Vec::new(),
                };
                reply(changed.map(|ended| SeatsReply {
                    ended,
                    cut: Vec::new(),
                    left_out,
                }))
            }
            Some(ControlOp::SeatsHold) => {
                let mut cut = Vec::new();
                if daemon.hold_boxed_hosts(&mut cut).await {
                    held = true;
                    wire::line(&Reply::done(SeatsReply {
                        ended: Vec::new(),
                        cut,
                        left_out: Vec::new(),
                    }))
                } else {
                    // The secrets are about to be written: a box that might still see them must stop
                    // the command, not be waited on in silence.
                    daemon.seats_changed(None).await.ok();
                    wire::line(&Reply::<SeatsReply>::refused(
                        "a plugin host in its box did not end within 20 s, so the seats were not changed \
                         (a box started before the change could read the new secret); run the command again"
                            .into(),
                    ))
                }
            }
            Some(ControlOp::Stop) => {
                daemon.stop.cancel();
                wire::line(&Reply::done(StopReply {
                    pid: std::process::id(),
                    calls: daemon
                        .generations()
                        .iter()
                        .map(|g| g.host.calls_in_flight())
                        .sum(),
                }))
            }
            Some(ControlOp::Web) => match daemon.web.get().and_then(|w| w.link()) {
                Some(url) => wire::line(&Reply::done(wire::WebReply {
                    url,
                    seconds: super::web_keys::LINK_FOR.as_secs(),
                })),
                None => refused(&page_not_served(daemon)),
            },
            Some(ControlOp::WebEnd) => match daemon.web.get() {
                Some(web) if lock(&web.base).is_some() => {
                    let (sessions, links) = web.end_all();
                    daemon.log.row(
                        Topic::Server,
                        &format!(
                            "The status page's sessions were ended (`ovai web --end`): {}, {}.",
                            crate::names::counted(sessions, "session", "sessions"),
                            crate::names::counted(links, "unused link", "unused links")
                        ),
                    );
                    wire::line(&Reply::done(wire::WebEnded { sessions, links }))
                }
                _ => refused(&page_not_served(daemon)),
            },
            Some(ControlOp::Tools) => wire::line(&Reply::done(ToolsReply {
                tools: daemon
                    .current()
                    .tools
                    .listed()
                    .iter()
                    .map(|t| ToolEntry {
                        name: t.name.to_string(),
                        entry: serde_json::to_value(t).unwrap_or_default(),
                        bytes: super::restart_row::bytes(t),
                    })
                    .collect(),
            })),
            None => refused(
                "the hello carried the control secret but no operation; use a command of the same ovai binary",
            ),
        }
    };
    let told = write.write_all(line.as_bytes()).await;
    let _ = write.shutdown().await;
    // A command gone before it heard its hold was given (Ctrl-C while the calls drained) writes no
    // desk: the hosts and restarts it holds are let go now, not HOLD_AT_MOST later.
    if held && told.is_err() {
        let _ = daemon.seats_changed(None).await;
    }
}

/// Why there is no status page to open or end.
fn page_not_served(daemon: &Daemon) -> String {
    match daemon.web.get().and_then(|w| lock(&w.unbound).clone()) {
        Some(why) => format!(
            "{why}, so it is not served: pick a free address in openovai.json's \"web\" and start the server again"
        ),
        // Read at the last restart, kept only from the start: the setting is there, the page is not yet.
        None if daemon.current().config.web.is_some() => "the status page is off: openovai.json's \"web\" \
                 was added after this server started, and the page is made only as it starts: start the server \
                 again (`ovai stop`, then `ovai serve`)"
            .into(),
        None => "the status page is off: add \"web\": {\"listen\": \"127.0.0.1:7780\"} (or {\"onHttp\": true}) to \
                 openovai.json and start the server again"
            .into(),
    }
}

fn reply<T: Serialize, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(body) => wire::line(&Reply::done(body)),
        Err(e) => wire::line(&Reply::<T>::refused(e.to_string())),
    }
}

/// The served files a host started for a seat change leaves out (a boxed host is replaced, and a new
/// host imports only what was read): those changed since the read, as plugins/ names them.
async fn left_out_by_a_new_host(daemon: &Arc<Daemon>) -> Vec<String> {
    let generation = daemon.current();
    if !generation.isolation.is_boxed() {
        return Vec::new();
    }
    let inst = daemon.inst.clone();
    let changes = tokio::task::spawn_blocking(move || generation.stale(&inst))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    changes
        .iter()
        .filter(|c| {
            matches!(
                c,
                crate::plugins::stale::Change::Changed { served: true, .. }
            )
        })
        .map(|c| format!("plugins/{}", crate::names::escape_controls(c.file(), false)))
        .collect()
}

fn refused(why: &str) -> String {
    wire::line(&Reply::<()>::refused(why.to_string()))
}

/// The binary this server was started from, when it was replaced or removed since (an upgrade moved
/// into place): Linux names it `… (deleted)`. `ovai restart` keeps the running one, which is easy to miss.
fn binary_replaced() -> Option<String> {
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    let shown = exe.to_string_lossy();
    let path = shown.strip_suffix(" (deleted)")?;
    Some(format!(
        "The ovai binary this server was started from, {}, was replaced or removed since: it runs the old \
         one still. `ovai restart` reads plugins/ and openovai.json again and keeps it; `ovai stop`, then `ovai \
         serve` (or the service manager's restart) runs the new one.",
        crate::names::escape_controls(path, false)
    ))
}

/// The daemon as `ovai status` shows it. File work (seats.json, hashing plugins/) runs off the daemon's
/// thread.
/// `files`: look whether openovai.json and plugins/ (its folders' modules and packages too) read
/// otherwise now, for `ovai status`; the status page, which asks every second, shows neither, and a
/// large node_modules/ would cost it tens of thousands of looks a second.
pub async fn status(daemon: &Arc<Daemon>, files: bool) -> StatusReply {
    let generation = daemon.current();
    let counts = daemon.sessions.count_by_seat();
    let starting = match daemon.http.get() {
        Some(http) => http.starting().await,
        None => HashMap::new(),
    };
    let book = daemon.seats.get(&daemon.inst).await;
    let (seats, seats_error) = match book.as_ref() {
        Ok(b) => (
            b.names()
                .map(|s| SeatStatus {
                    name: s.to_string(),
                    role: generation.config.role_of(s).to_string(),
                    sessions: counts.get(s).copied().unwrap_or(0),
                    starting: starting.get(s).copied().unwrap_or(0),
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    // A book read as empty because it is gone while desks hold the seats is said, not listed as none.
    let seats_error = seats_error.or_else(|| {
        seats
            .is_empty()
            .then(|| crate::seats::book_missing(&daemon.inst))
            .flatten()
    });
    let (stale, config_changed, (helpers_changed, removed_modules)) = {
        let generation = generation.clone();
        let inst = daemon.inst.clone();
        tokio::task::spawn_blocking(move || {
            // openovai.json edited since it was read is served as it was until a restart; a file that
            // no longer reads is said by the command, which reads it itself.
            if !files {
                return (Ok(Vec::new()), false, Default::default());
            }
            let changed = inst
                .read_config()
                .is_ok_and(|now| now.raw != generation.config.raw);
            // And the modules of its folders: a new host refuses those to what imports them.
            let dir = inst.plugins_dir();
            let named = |paths: Vec<std::path::PathBuf>| {
                let mut named: Vec<String> = paths
                    .into_iter()
                    .map(|p| {
                        let shown = p.strip_prefix(&dir).unwrap_or(&p).to_string_lossy();
                        format!("plugins/{}", crate::names::escape_controls(&shown, false))
                    })
                    .collect();
                named.sort_unstable();
                named
            };
            let (mut helpers, gone) = generation.helpers.changed_and_gone();
            helpers.extend(generation.helpers.appeared());
            let modules = (named(helpers), named(gone));
            (generation.stale(&inst), changed, modules)
        })
        .await
        .unwrap_or_else(|e| {
            (
                Err(std::io::Error::other(e.to_string())),
                false,
                Default::default(),
            )
        })
    };
    let shown = |c: &crate::plugins::stale::Change| {
        format!("plugins/{}", crate::names::escape_controls(c.file(), false))
    };
    let (mut stale, new_files, removed_files, removed_unserved) = match stale {
        Ok(changes) => {
            use crate::plugins::stale::Change;
            let pick =
                |want: fn(&Change) -> bool| changes.iter().filter(|c| want(c)).map(shown).collect();
            (
                pick(|c| matches!(c, Change::Changed { .. })),
                pick(|c| matches!(c, Change::Appeared { .. })),
                pick(|c| matches!(c, Change::Removed { served: true, .. })),
                pick(|c| matches!(c, Change::Removed { served: false, .. })),
            )
        }
        Err(e) => (
            vec![match crate::plugins::candidates::folder_missing(&e) {
                Some(m) => format!("plugins/ itself, which {}", m.state()),
                None => format!("plugins/ itself, which cannot be read ({e})"),
            }],
            Vec::new(),
            Vec::new(),
            Vec::new(),
        ),
    };
    stale.extend(helpers_changed);
    let generations = daemon.generations();
    let mut running: Vec<crate::wire::RunningCall> = generations
        .iter()
        .flat_map(|g| g.host.running())
        .map(|(file, seat, since)| crate::wire::RunningCall {
            file: file.to_string(),
            seat: seat.to_string(),
            seconds: since.elapsed().map_or(0, |d| d.as_secs()),
            started_ms: since
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        })
        .collect();
    running.sort_by_key(|c| std::cmp::Reverse(c.seconds));
    running.truncate(crate::wire::MAX_RUNNING_SHOWN);
    StatusReply {
        calls_running: running,
        calls_running_total: generations.iter().map(|g| g.host.calls_in_flight()).sum(),
        http: crate::sync::lock(&daemon.http_url).clone(),
        metrics: crate::sync::lock(&daemon.metrics_url).clone(),
        web: daemon
            .web
            .get()
            .and_then(|web| crate::sync::lock(&web.base).clone()),
        unserved: lock(&daemon.unserved).clone(),
        log_unwritable: daemon.log.unwritable(),
        calls_unwritable: daemon.figures.call_log_unwritable(),
        finishing: daemon
            .generations()
            .iter()
            .filter(|g| g.number != generation.number)
            .filter_map(|g| {
                let pid = g.host.pid()?;
                let calls = g.host.calls_in_flight();
                (calls > 0).then(|| {
                    format!(
                        "Generation {}'s plugin host (pid {pid}) finishes {calls} call{} begun before a restart \
                         (callTimeoutSeconds at most), then ends.",
                        g.number,
                        if calls == 1 { "" } else { "s" }
                    )
                })
            })
            .collect(),
        version: env!("CARGO_PKG_VERSION").into(),
        binary_replaced: if files { binary_replaced() } else { None },
        root: daemon.inst.root.display().to_string(),
        pid: std::process::id(),
        started_at: daemon.started_at.clone(),
        uptime_seconds: daemon.started.elapsed().as_secs(),
        generation: generation.number,
        loaded_at: generation.loaded_at.clone(),
        node: generation.node.clone(),
        host: HostStatus {
            pid: generation.host.pid(),
            respawns: generation.host.respawns(),
            down: generation.host.down().map(|c| crate::answer::down(&c)),
            isolation: generation.isolation.describe(),
            bounds: generation.bounds.describe(),
            not_answering: generation
                .host
                .not_answering()
                .into_iter()
                .map(|(name, why)| {
                    let file = match generation.tools.get(&name).map(|e| &e.kind) {
                        Some(crate::tools::Kind::Plugin { file }) => file.to_string(),
                        _ => format!("plugins/{name}.mjs"),
                    };
                    crate::host::host_rows::not_reimported(&file, &why)
                })
                .collect(),
        },
        seats,
        seats_error,
        sessions: daemon.sessions.count(),
        tools: generation.tools.names().map(str::to_string).collect(),
        rows: generation.rows.clone(),
        figures: daemon.figures.snapshot(),
        stale,
        config_changed,
        new_files,
        removed_files,
        removed_unserved,
        removed_modules,
    }
}
