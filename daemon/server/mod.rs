//! `ovai serve`: the daemon. Claims the instance (one daemon per root), binds the socket, loads the first
//! generation, then accepts connections until SIGTERM/SIGINT; SIGHUP is `ovai restart`.

pub mod http;
pub mod web;
pub mod metrics_http;
pub mod connection;
pub mod control;
pub mod private_dir;
pub mod config_watch;
pub mod watch;
pub mod transport;
pub mod backlog;
pub mod calls;
pub mod session;
pub mod progress;
pub mod answers;
pub mod params;
pub mod daemon;
pub mod web_keys;
pub mod arguments;
pub mod sessions;
pub mod metrics;
pub mod traces;
pub mod figures;
pub mod leader;
pub mod restart_row;
pub mod service_manager;
pub mod descriptors;
pub mod places;
pub mod signals;

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::net::UnixListener;

use crate::generation;
use crate::host::ending::RetireWhy;
use crate::instance::{ConfigError, Instance};
use crate::plugins::load::LoadError;
use crate::runtime_log::{RuntimeLog, Topic};
use crate::seats::{self, SeatError};
use crate::sync::lock;
use daemon::Daemon;
use signals::{Heard, Signals};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "{0} Fix {them} and start the server again.",
        them = if matches!(.0, ConfigError::Several(_)) { "them" } else { "it" }
    )]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Seats(#[from] SeatError),
    #[error("Another ovai serve is already serving {root}{pid}. Stop it first, or run `ovai restart` to read plugins/ again.", pid = .pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    AlreadyServing { root: String, pid: Option<u32> },
    #[error(
        "The instance at {root} is still served, by pid {pid}, from where it was before it was moved ({old}). \
         That server stops once it sees the move; if `ovai status` still finds it, stop it (`ovai stop`). Then run \
         `ovai serve` here, and `ovai seat rebuild` to point the desks here."
    )]
    MovedServing { root: String, old: String, pid: u32 },
    #[error(
        "The instance at {root} cannot be served: {why}. Move it to such a folder, and start again."
    )]
    SocketPathTooLong { root: String, why: String },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("The server could not start: {0}")]
    Load(#[from] LoadError),
    #[error("{0}")]
    Node(#[from] crate::host::child::SpawnError),
    #[error("{0}")]
    Leader(#[from] leader::NoLeader),
    #[error("{0}")]
    Http(String),
    #[error(transparent)]
    HttpBind(#[from] http::HttpError),
    #[error("{0}")]
    Web(String),
}

fn io_err<'a>(
    what: &'static str,
    path: &'a std::path::Path,
) -> impl FnOnce(std::io::Error) -> ServeError + 'a {
    move |source| ServeError::Io {
        what,
        path: path.display().to_string(),
        source,
    }
}

/// Runs the daemon until it is told to stop. A current-thread runtime: one core does a call's work with
/// no cross-thread hand-offs, and the host is spawned (and its parent-death signal tied) to this thread.
pub fn serve(inst: Instance, http_listen: Option<&str>) -> Result<(), ServeError> {
    // Before the runtime and its threads: the host's writes, and the sessions', then do not stop the
    // writer to run the daemon (`sched`); the plugin host starts under the ordinary policy again.
    if let Some(said) = crate::sched::batch_as_asked(
        "OVAI_DAEMON_BATCH",
        "the daemon keeps the policy it was started with",
    ) {
        tracing::warn!("{said}");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_err("starting the runtime for", &inst.root))?;
    rt.block_on(run(inst, http_listen))
}

/// `"http"` from openovai.json, with `--http ADDR` in place of its address.
fn http_settings(
    config: &crate::instance::Config,
    listen: Option<&str>,
) -> Result<Option<crate::instance::http::HttpSettings>, ServeError> {
    let Some(listen) = listen else {
        if let Some(settings) = &config.http {
            settings
                .require_listen()
                .map_err(|problem| ConfigError::Bad {
                    key: "http",
                    problem,
                })?;
        }
        return Ok(config.http.clone());
    };
    let addr = crate::instance::http::parse_listen(listen)
        .map_err(|why| ServeError::Http(format!("--http is {why}.")))?;
    let mut settings = config
        .http
        .clone()
        .unwrap_or_else(|| crate::instance::http::HttpSettings::listening_on(addr));
    settings.listen = addr;
    settings.listen_named = true;
    settings
        .check_exposure()
        .map_err(|why| ServeError::Http(format!("The HTTP endpoint {why}.")))?;
    Ok(Some(settings))
}

async fn run(inst: Instance, http_listen: Option<&str>) -> Result<(), ServeError> {
    let config = inst.read_config()?;
    let http_settings = http_settings(&config, http_listen)?;
    // A broken seats.json never stops the daemon: said at start (a service manager would otherwise see
    // a healthy server refusing every seat), and when seats connect.
    let seats_unread = match seats::SeatBook::load(&inst) {
        Ok(book) => {
            leader::check(&config, &book)?;
            None
        }
        Err(e) => Some(e.to_string()),
    };
    crate::host::child::check_node(&crate::host::child::node_program())?;
    seats::ensure_private_dir(&inst)?;
    let claimed = claim_once_stopped(&inst).await?;
    let mut signals = Signals::listen().map_err(io_err("listening for signals in", &inst.root))?;
    // Read before this start writes a row: the lock held, no other server writes there.
    let before = crate::runtime_log::ended_without_stopping(
        &inst.runtime_log(),
        marked_up(&inst.serving_marker()),
        marked_up(&inst.starting_marker()),
    );
    // Best effort: without it `ovai status` waits for the answer instead of saying the server starts.
    // Written as soon as the lock is held and before the socket is bound, so that no command finds the
    // lock held, or the socket, and not the marker.
    mark(&inst.starting_marker());
    // Gone however the start ends: a start that fails leaves no marker behind.
    let _starting = RemovedOnDrop(inst.starting_marker());
    let socket = inst.socket();
    if let Some(why) = inst.socket_too_long() {
        return Err(ServeError::SocketPathTooLong {
            root: inst.root.display().to_string(),
            why,
        });
    }
    // Left as it is when it holds the script already: a start on a full disk failed writing the same
    // bytes again (helper-101).
    crate::host::child::keep_shim(&inst.host_shim())
        .map_err(io_err("writing the plugin host to", &inst.host_shim()))?;
    let control_secret =
        seats::new_secret().map_err(io_err("drawing the control secret for", &inst.root))?;
    crate::files::write_private(&inst.control_secret(), control_secret.as_bytes())
        .map_err(SeatError::from)?;
    std::fs::create_dir_all(inst.plugins_dir()).map_err(io_err("making", &inst.plugins_dir()))?;

    // Bound before the first load: a client that connects meanwhile waits in the backlog and is answered
    // once the tools are known, instead of being told no server runs.
    match std::fs::remove_file(&socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("removing the old socket", &socket)(e)),
    }
    let listener = UnixListener::bind(&socket).map_err(io_err("binding the socket", &socket))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("protecting the socket", &socket))?;
    // Watched from here on: a folder removed while the plugins are read is seen too.
    let mut watch = private_dir::PrivateWatch::new(&socket, &claimed);
    // A start that fails takes its socket with it, and only its own: another server may have bound its
    // own there since.
    let unbind = |watch: &private_dir::PrivateWatch| {
        if watch.bound(&socket) {
            let _ = std::fs::remove_file(&socket);
        }
    };
    let http_bound = match &http_settings {
        Some(settings) => match http::bind(settings, &inst.root).await {
            Ok(b) => Some(b),
            Err(e) => {
                unbind(&watch);
                return Err(e.into());
            }
        },
        None => None,
    };

    // The page's and the metrics' listeners are the operator's conveniences: one that cannot listen (its
    // port taken, by anybody on the machine) is said, and the server goes on for its seats.
    let mut unbound: Vec<String> = Vec::new();
    let mut web_unbound = None;
    let web_bound = match config.web {
        Some(Some(addr)) => match std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
        {
            Ok(l) => Some(l),
            Err(e) => {
                web_unbound = Some(format!("the status page cannot listen on {addr}: {e}"));
                unbound.push(format!(
                    "The status page cannot listen on {addr} (openovai.json's \"web\".\"listen\"): {e}; the server \
                     goes on without it. Pick a free address and start the server again."
                ));
                None
            }
        },
        Some(None) if http_settings.is_none() => {
            unbind(&watch);
            return Err(ServeError::Web(
                "openovai.json's \"web\" asks for the status page on the HTTP endpoint (\"onHttp\": true), and there is \
                 none: add \"http\": {\"listen\": …}, or give \"web\" a \"listen\" address of its own, and start again."
                    .into(),
            ));
        }
        Some(None)
            if http_settings
                .as_ref()
                .is_some_and(|h| h.tls.is_none() && !h.listen.ip().is_loopback()) =>
        {
            unbind(&watch);
            return Err(ServeError::Web(
                "openovai.json's \"web\" asks for the status page on the HTTP endpoint (\"onHttp\": true), which other \
                 machines reach over plain HTTP: the page's one-time link and its cookie would cross the network in \
                 clear. Give the endpoint TLS (\"http\": {\"tls\": …}), or give \"web\" a \"listen\" address of its \
                 own on loopback, and start again."
                    .into(),
            ));
        }
        _ => None,
    };
    let metrics_bound = match config.metrics {
        Some(addr) => match metrics_http::bind(addr) {
            Ok(l) => Some(l),
            Err(e) => {
                unbound.push(format!(
                    "The metrics endpoint cannot listen on {addr} (openovai.json's \"metrics\".\"listen\"): {e}; the \
                     server goes on without it. Pick a free address and start the server again."
                ));
                None
            }
        },
        None => None,
    };
    let log = Arc::new(RuntimeLog::new(inst.runtime_log()));
    if let Some(said) = &before {
        log.row(Topic::Server, said);
    }
    for said in unbound.iter().chain(&seats_unread) {
        log.warn_row(Topic::Server, said);
    }
    if let Some(said) = traces::start(&log) {
        log.row(Topic::Server, &said);
    }
    descriptors::raise_limit(
        &log,
        config.max_connections,
        4 + usize::from(http_settings.is_some()),
    );
    // Warnings on stderr too: a misspelt setting is read by nobody (helper-92).
    for warning in &config.serve_warnings() {
        log.warn_row(Topic::Server, warning);
    }
    if let Some(said) = seats::book_missing(&inst) {
        log.warn_row(Topic::Seats, &said);
    }
    for said in crate::permissions::too_open(&inst) {
        log.warn_row(Topic::Server, &said);
    }
    let call_log = config.call_log.then(|| inst.call_log());
    let ids = Arc::new(AtomicU64::new(1));
    let extending = service_manager::extend_start();
    // Stopped while its plugins are read (Ctrl-C, a service manager, `ovai stop`): the host they are
    // read in goes with the build, and the socket and marker with the start.
    let built = tokio::select! {
        built = generation::build(&inst, config, 1, &ids, &log) => built,
        why = signals.stop() => {
            drop(_starting);
            extending.cancel();
            unbind(&watch);
            log.row(
                Topic::Server,
                &format!("ovai serve stopped on {why}, while it read plugins/: nothing was served."),
            );
            return Ok(());
        }
    };
    drop(_starting);
    extending.cancel();
    let first = match built {
        Ok(g) => g,
        Err(e) => {
            unbind(&watch);
            log.row(Topic::Server, &format!("ovai serve could not start: {e}"));
            return Err(e.into());
        }
    };
    log.rows(Topic::Plugins, &first.rows);
    let isolation = first.isolation.describe();
    let bounds = first.bounds.describe();
    let boxed = first.isolation.is_boxed();
    let tools = first.tools.entries().len();
    let node = first.node.clone();
    let daemon = Arc::new(Daemon::new(
        inst.clone(),
        log.clone(),
        first,
        ids,
        control_secret,
    ));
    log.row(
        Topic::Server,
        &format!(
            "ovai serve is up for {} (pid {}), serving {tools} tools with Node {node}.",
            inst.root.display(),
            std::process::id()
        ),
    );
    // Since when the daemon says it is up, so that the mark, made again, says the same.
    let _ = private_dir::mark(&inst.serving_marker(), &daemon.started_at);
    log.row(Topic::Server, &isolation);
    log.row(Topic::Server, &bounds);
    if nix::unistd::geteuid().is_root() {
        let said = if boxed {
            "ovai serve runs as root, so a plugin reads whatever root may read outside what its box hides \
             (/etc/shadow, every user's files) and uses the network as root. Run it as an ordinary user."
        } else {
            "ovai serve runs as root, and its plugin host has no box: a plugin may read and write whatever root \
             may (/etc/shadow, every user's files) and uses the network as root. Run it as an ordinary user."
        };
        log.warn_row(Topic::Server, said);
    }
    *lock(&daemon.unserved) = unbound;
    let web_on_http = matches!(&daemon.current().config.web, Some(None));
    if web_on_http || web_bound.is_some() || web_unbound.is_some() {
        let web = web_keys::Web::default();
        *lock(&web.unbound) = web_unbound;
        let _ = daemon.web.set(web);
    }
    if let Some(bound) = http_bound {
        log.row(
            Topic::Server,
            &format!(
                "Seats on other machines reach this server at {} (Streamable HTTP, the seat's secret as a bearer token).",
                bound.url()
            ),
        );
        *lock(&daemon.http_url) = Some(bound.url());
        if web_on_http && let Some(web) = daemon.web.get() {
            let base = bound.url().trim_end_matches("/mcp").to_string();
            *lock(&web.base) = Some(format!("{base}/web/"));
        }
        bound.serve(&daemon);
    }
    if let Some(listener) = web_bound {
        match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => {
                let addr = listener
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                if let Some(web) = daemon.web.get() {
                    *lock(&web.base) = Some(format!("http://{addr}/web/"));
                }
                let app = web::router(daemon.clone(), false);
                daemon
                    .tasks
                    .spawn(http::serve::accept_operator(listener, app, daemon.clone()));
                log.row(
                    Topic::Server,
                    &format!("The status page is served at http://{addr}/web/: `ovai web` prints a link to it."),
                );
            }
            Err(e) => log.row(
                Topic::Server,
                &format!("The status page could not start ({e}); the server goes on without it."),
            ),
        }
    }
    daemon.figures.set_call_log(call_log);
    if let Some(listener) = metrics_bound {
        let served = tokio::net::TcpListener::from_std(listener).and_then(|listener| {
            let addr = listener.local_addr()?;
            let app = metrics_http::app(&daemon, addr.ip().is_loopback());
            daemon
                .tasks
                .spawn(http::serve::accept_operator(listener, app, daemon.clone()));
            Ok(addr)
        });
        match served {
            Ok(addr) => {
                let url = format!("http://{addr}/metrics");
                log.row(
                    Topic::Server,
                    &format!("Prometheus reads this server's figures at {url}."),
                );
                *lock(&daemon.metrics_url) = Some(url);
            }
            Err(e) => log.row(
                Topic::Server,
                &format!(
                    "The metrics endpoint could not start ({e}); the server goes on without it."
                ),
            ),
        }
    }

    watch::spawn(daemon.clone());
    config_watch::spawn(daemon.clone());
    service_manager::ready(&format!("serving {tools} tools"));
    service_manager::spawn_watchdog(&daemon.tasks, daemon.closing.clone());
    let mut listener = listener;
    let why = accept_until_stopped(&daemon, &mut listener, &mut watch, &mut signals).await;
    // Written before the socket goes: a command that finds no socket from now on reads that the server
    // is stopping, and `ovai serve` waits for it to end instead of being refused.
    // No marker where the folder is another's (or others'), which another server may hold.
    let _stopping = watch.holds_folder().then(|| {
        mark(&inst.stopping_marker());
        RemovedOnDrop(inst.stopping_marker())
    });
    drop(listener);
    unbind(&watch);
    shut_down(&daemon, why, &mut signals).await;
    Ok(())
}

/// Best effort: a marker of where this daemon is from now on (`private_dir::mark`).
fn mark(path: &std::path::Path) {
    let now = crate::runtime_log::timestamp(std::time::SystemTime::now());
    let _ = private_dir::mark(path, &now);
}

/// A marker of this daemon's that goes when this is dropped: only while it is still this daemon's (its
/// private folder may have gone meanwhile, and another server's marker be there now).
struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let mine = crate::files::read_regular(&self.0, 4096)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|v| v["pid"].as_u64() == Some(u64::from(std::process::id())));
        if mine {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// `claim`, waiting for a daemon that holds the lock and is stopping (`ovai stop` then `ovai serve`
/// at once, or a service manager's restart) to end, as long as it may take.
async fn claim_once_stopped(inst: &Instance) -> Result<File, ServeError> {
    let mut said = false;
    let give_up = std::time::Instant::now() + crate::client::stop_patience(inst);
    loop {
        match claim(inst) {
            Err(ServeError::AlreadyServing { pid: Some(pid), .. })
                if std::time::Instant::now() < give_up
                    && crate::client::marked(inst, &inst.stopping_marker())
                        .is_some_and(|m| m.pid == u64::from(pid)) =>
            {
                if !said {
                    said = true;
                    eprintln!(
                        "ovai: the server for {} is stopping; waiting for it (pid {pid}) to end.",
                        inst.root.display()
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(ServeError::AlreadyServing { pid: Some(pid), .. }) => {
                return Err(
                    moved_serving(inst, pid).unwrap_or(ServeError::AlreadyServing {
                        root: inst.root.display().to_string(),
                        pid: Some(pid),
                    }),
                );
            }
            claimed => return claimed,
        }
    }
}

/// The error for a server `pid` holding the lock from where the instance was before it was moved, if it
/// does: restarting it here is not what to do.
fn moved_serving(inst: &Instance, pid: u32) -> Option<ServeError> {
    // Asked aside, for a moment only: a server that is stopped or stuck must not hold this answer.
    let (tx, rx) = std::sync::mpsc::channel();
    let asking = inst.clone();
    std::thread::spawn(move || {
        let _ = tx.send(crate::client::control::<crate::wire::StatusReply>(
            &asking,
            crate::wire::ControlOp::Status,
        ));
    });
    let reply = rx.recv_timeout(Duration::from_secs(2)).ok()?.ok()?;
    let here = inst.root.display().to_string();
    crate::instance::moved(std::path::Path::new(&reply.root), Some(&here))?;
    Some(ServeError::MovedServing {
        root: here,
        old: reply.root,
        pid,
    })
}

/// Holds `.ovai/serve.lock` for the daemon's life: the lock, not the socket file, says a daemon runs.
fn claim(inst: &Instance) -> Result<File, ServeError> {
    let path = inst.serve_lock();
    match private_dir::lock(&path).map_err(io_err("locking", &path))? {
        private_dir::Lock::Held(file) => Ok(file),
        private_dir::Lock::HeldBy(pid) => Err(ServeError::AlreadyServing {
            root: inst.root.display().to_string(),
            pid,
        }),
    }
}

async fn accept_until_stopped(
    daemon: &Arc<Daemon>,
    listener: &mut UnixListener,
    watch: &mut private_dir::PrivateWatch,
    signals: &mut Signals,
) -> &'static str {
    let changed = watch.changed();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let max = daemon.current().config.max_connections;
                    match connection::ConnectionSlot::new(&daemon.connections, connection::socket_places(max)) {
                        Some(admitted) => {
                            let waiting = daemon.waiting_hellos.add();
                            daemon.tasks.spawn(connection::handle(daemon.clone(), stream, admitted, waiting));
                        }
                        // Full: a connection that has not said who it is yet gives up its place to this
                        // one, so connections that say nothing cannot lock out sessions and commands.
                        None if daemon.waiting_hellos.evict_oldest() => {
                            let admitted = connection::ConnectionSlot::over(&daemon.connections);
                            let waiting = daemon.waiting_hellos.add();
                            daemon.tasks.spawn(connection::handle(daemon.clone(), stream, admitted, waiting));
                        }
                        None => connection::turn_away(daemon, &stream, max),
                    }
                }
                Err(e) => {
                    // Out of descriptors, most likely: back off instead of spinning on the error.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = changed.notified() => watch.heard(),
            () = watch.quiet() => match watch.look(daemon) {
                private_dir::Look::Kept => {}
                private_dir::Look::Rebound(l) => *listener = l,
                private_dir::Look::Stop { row, why } => {
                    daemon.log.row(Topic::Server, &row);
                    tracing::error!("{row}");
                    return why;
                }
            },
            _ = daemon.stop.cancelled() => return "`ovai stop`",
            heard = signals.next() => match heard {
                Heard::Stop(why) => return why,
                Heard::Restart => {
                let daemon = daemon.clone();
                daemon.clone().tasks.spawn(async move {
                    match daemon.restart("SIGHUP").await {
                        Ok(r) => tracing::info!(generation = r.generation, "restarted on SIGHUP"),
                        Err(e) => tracing::warn!("SIGHUP asked for a restart, and it failed: {e}"),
                    }
                });
                }
            },
        }
    }
}

/// Stops taking calls, lets those in flight finish within the grace period, answers the rest, ends every
/// generation's host (process group and all), then the sessions once their answers are written, and
/// waits for every task the daemon started.
async fn shut_down(daemon: &Arc<Daemon>, why: &'static str, signals: &mut Signals) {
    let grace = daemon.current().config.shutdown_grace;
    service_manager::stopping(grace);
    daemon.closing.cancel();
    let retiring: Vec<_> = daemon
        .generations()
        .into_iter()
        .map(|g| async move { g.host.retire(grace, RetireWhy::ShuttingDown(why)).await })
        .collect();
    // Ctrl-C again (or a second TERM) means now, as it does for other programs: the grace ends.
    let again = signals.stop();
    if !grace.is_zero() {
        // Said to the terminal it runs in: Ctrl-C only where that is what stopped it.
        let now = if why == "SIGINT" {
            "Ctrl-C again ends them now".to_string()
        } else {
            format!("`kill -INT {}` ends them now", std::process::id())
        };
        tracing::info!(
            "stopping: the calls in flight have {} s to finish (shutdownGraceSeconds); {now}",
            grace.as_secs()
        );
    }
    tokio::select! {
        _ = futures::future::join_all(retiring) => {}
        signal = again => {
            daemon.log.row(
                Topic::Server,
                &format!("Asked again ({signal}) while stopping: the calls in flight are ended now."),
            );
            let now: Vec<_> = daemon
                .generations()
                .into_iter()
                .map(|g| async move { g.host.retire(Duration::ZERO, RetireWhy::StoppedAtOnce(signal)).await })
                .collect();
            futures::future::join_all(now).await;
        }
    }
    // Every call has its answer now; ending a session lets its writer put what is queued on the wire.
    // HTTP sessions are left for the next start first: ending them forgets them.
    if let Some(http) = daemon.http.get() {
        http.carry_over();
    }
    daemon.sessions.end_all();
    daemon.http_stop.cancel();
    daemon.tasks.close();
    // A client that never reads cannot hold the daemon up forever.
    if tokio::time::timeout(TASKS_PATIENCE, daemon.tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            left = daemon.tasks.len(),
            "some connections had not finished {} s after the sessions were ended; stopping anyway",
            TASKS_PATIENCE.as_secs()
        );
    }
    // The spans of the last calls go before the daemon does (a collector that does not answer costs the
    // stop at most this).
    let _ = tokio::task::spawn_blocking(|| traces::flush(TRACES_PATIENCE)).await;
    daemon
        .log
        .row(Topic::Server, &format!("ovai serve stopped on {why}."));
    // Only while it is this server's: after its folder was removed, the next server's may be there.
    drop(RemovedOnDrop(daemon.inst.serving_marker()));
}

/// The pid and start time a server's up mark holds, when one was left (it never stopped).
fn marked_up(path: &std::path::Path) -> Option<(u32, String)> {
    let text = crate::files::read_regular(path, 4096).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = u32::try_from(v["pid"].as_u64()?).ok()?;
    Some((pid, v["since"].as_str()?.to_string()))
}

/// How long shutdown waits for connections to finish writing after their sessions were ended.
const TASKS_PATIENCE: Duration = Duration::from_secs(5);

/// How long a stop waits for the last spans to be sent.
const TRACES_PATIENCE: Duration = Duration::from_secs(3);
