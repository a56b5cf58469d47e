//! Keeps one generation's host alive: restarts it when it dies (with backoff), kills it when it stops
//! answering the heartbeat, gives up after a crash loop, and ends it when the generation is retired.
//!
//! Calls never wait on a dead process: when a host ends, every call it held is answered at once, and
//! calls that arrive while a new one starts wait briefly for it (bounded by their own deadline).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::child::Launch;
use super::link::Link;
use super::process::{HostInit, HostProcess, LoadEnd};
use super::protocol::ToHost;
use crate::runtime_log::{RuntimeLog, Topic};

/// The heartbeat: a ping this often; a host that leaves one unanswered for `hostHangSeconds` is killed.
const PING_EVERY: Duration = Duration::from_millis(500);
/// Restart backoff: the first restart after FIRST_BACKOFF, doubling per crash in the window, capped.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// This many crashes within CRASH_WINDOW is a crash loop: the host stays down until `ovai restart`.
const CRASH_LIMIT: usize = 5;
const CRASH_WINDOW: Duration = Duration::from_secs(60);

/// A plugin this generation serves, as the host must import it again after a restart.
#[derive(Debug, Clone)]
pub struct ServedFile {
    pub name: String,
    /// Absolute path of the module.
    pub path: String,
    /// `plugins/NAME.mjs`, as refusals name it.
    pub shown: Arc<str>,
}

#[derive(Clone)]
pub enum HostState {
    Up(Arc<Link>),
    /// Between a host's end and its successor's `ready`.
    Restarting,
    /// Crash loop, or the host could not be started again: why, in words.
    Down(Arc<str>),
    Retired,
}

/// The generation's handle on its host, shared by every call.
pub struct Host {
    state: watch::Receiver<HostState>,
    ids: Arc<AtomicU64>,
    /// Calls that have started and not yet ended, so retiring waits for them.
    in_flight: AtomicUsize,
    /// Set when retiring begins; a call that counts itself in and then sees it goes to the new generation.
    retiring: AtomicBool,
    drained: Notify,
    retire: CancellationToken,
    /// What calls still running when the host is ended are told.
    retire_why: std::sync::Mutex<Arc<str>>,
    restarts: Arc<AtomicU32>,
}

/// Everything the supervisor task needs, moved into it.
pub struct Supervision {
    pub launch: Launch,
    pub init: HostInit,
    pub files: Vec<ServedFile>,
    pub import_timeout: Duration,
    /// How long the host may leave the heartbeat unanswered.
    pub hang_after: Duration,
    pub log: Arc<RuntimeLog>,
}

impl Host {
    /// Starts supervising `process`, which has imported `files` already.
    pub fn supervise(process: HostProcess, ids: Arc<AtomicU64>, job: Supervision) -> Arc<Host> {
        let (state_tx, state_rx) = watch::channel(HostState::Up(process.link.clone()));
        let host = Arc::new(Host {
            state: state_rx,
            ids: ids.clone(),
            in_flight: AtomicUsize::new(0),
            retiring: AtomicBool::new(false),
            drained: Notify::new(),
            retire: CancellationToken::new(),
            retire_why: std::sync::Mutex::new(
                "the server ended this plugin host before the call finished".into(),
            ),
            restarts: Arc::new(AtomicU32::new(0)),
        });
        tokio::spawn(run(process, ids, job, state_tx, host.clone()));
        host
    }

    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Waits (at most `patience`) for a live link; `Err` carries why there is none.
    pub async fn link(&self, patience: Duration) -> Result<Arc<Link>, Arc<str>> {
        let mut state = self.state.clone();
        let wait = state.wait_for(|s| !matches!(s, HostState::Restarting));
        match tokio::time::timeout(patience, wait).await {
            Ok(Ok(s)) => match &*s {
                HostState::Up(link) => Ok(link.clone()),
                HostState::Down(why) => Err(why.clone()),
                HostState::Retired | HostState::Restarting => {
                    Err("the plugin host has been ended".into())
                }
            },
            Ok(Err(_)) => Err("the plugin host has been ended".into()),
            Err(_) => Err(format!(
                "the plugin host is restarting and was not back within {} s",
                patience.as_secs().max(1)
            )
            .into()),
        }
    }

    /// Counts a call as in flight until the guard drops; `None` once retiring has begun, so the caller
    /// takes the current generation instead. Counting in before looking at the flag (and retire setting
    /// the flag before looking at the count) means no call slips past a retirement unseen.
    pub fn enter(self: &Arc<Self>) -> Option<CallGuard> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = CallGuard(self.clone());
        if self.retiring.load(Ordering::SeqCst) {
            return None;
        }
        Some(guard)
    }

    /// The pid of the live host, if one is up.
    pub fn pid(&self) -> Option<u32> {
        match &*self.state.borrow() {
            HostState::Up(link) => Some(link.pid),
            _ => None,
        }
    }

    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    pub fn down_reason(&self) -> Option<Arc<str>> {
        match &*self.state.borrow() {
            HostState::Down(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// Ends the host once the calls it holds have finished, or when `grace` has passed; calls still
    /// running then are refused with `why`.
    pub async fn retire(&self, grace: Duration, why: &str) {
        if let Ok(mut w) = self.retire_why.lock() {
            *w = why.into();
        }
        self.retiring.store(true, Ordering::SeqCst);
        let drained = async {
            loop {
                let notified = self.drained.notified();
                if self.in_flight.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(grace, drained).await;
        self.retire.cancel();
        let mut state = self.state.clone();
        let _ = state.wait_for(|s| matches!(s, HostState::Retired)).await;
    }
}

pub struct CallGuard(Arc<Host>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

async fn run(
    mut process: HostProcess,
    ids: Arc<AtomicU64>,
    job: Supervision,
    state: watch::Sender<HostState>,
    host: Arc<Host>,
) {
    let mut crashes: VecDeque<Instant> = VecDeque::new();
    loop {
        let link = process.link.clone();
        let why = tokio::select! {
            exit = process.wait_exit() => {
                if process.ran_out_of_memory() {
                    format!(
                        "ran out of memory (its heap is capped at {} MB by hostMaxMemoryMB in openovai.json) and stopped ({exit})",
                        job.launch.max_memory_mb
                    )
                } else {
                    format!("stopped ({exit})")
                }
            }
            _ = heartbeat(&link, job.hang_after) => {
                let exit = process.kill().await;
                format!(
                    "stopped answering for {} s (a plugin blocking its event loop) and was killed ({exit})",
                    job.hang_after.as_secs()
                )
            }
            _ = host.retire.cancelled() => {
                process.kill().await;
                let why = host.retire_why.lock().map(|w| w.clone()).unwrap_or_else(|p| p.into_inner().clone());
                process.link.fail_all(&why);
                let _ = state.send(HostState::Retired);
                return;
            }
        };
        let _ = state.send(HostState::Restarting);
        let sentence: Arc<str> = format!("the plugin host {why} while it ran").into();
        let files = process.link.fail_all(&sentence);
        let now = Instant::now();
        crashes.push_back(now);
        while crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW)
        {
            crashes.pop_front();
        }
        job.log.row(
            Topic::Host,
            &stopped_row(process.pid, &why, &files, process.last_words()),
        );
        if crashes.len() >= CRASH_LIMIT {
            let why: Arc<str> = format!(
                "the plugin host stopped {CRASH_LIMIT} times within {} s, so it stays down until `ovai restart`",
                CRASH_WINDOW.as_secs()
            )
            .into();
            job.log.row(Topic::Host, &format!("The plugin host stays down: it stopped {CRASH_LIMIT} times within {} s. Fix the plugin that ends it, then run `ovai restart`.", CRASH_WINDOW.as_secs()));
            let _ = state.send(HostState::Down(why));
            host.retire.cancelled().await;
            let _ = state.send(HostState::Retired);
            return;
        }
        let backoff = FIRST_BACKOFF
            .saturating_mul(1 << (crashes.len() - 1).min(16))
            .min(MAX_BACKOFF);
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = host.retire.cancelled() => {
                let _ = state.send(HostState::Retired);
                return;
            }
        }
        match restart(&job, &ids).await {
            Ok(next) => {
                host.restarts.fetch_add(1, Ordering::Relaxed);
                job.log.row(
                    Topic::Host,
                    &format!(
                        "The plugin host was started again (pid {}), serving the same files.",
                        next.pid
                    ),
                );
                process = next;
                let _ = state.send(HostState::Up(process.link.clone()));
            }
            Err(e) => {
                let why: Arc<str> =
                    format!("the plugin host could not be started again: {e}").into();
                job.log.row(Topic::Host, &format!("The plugin host stays down: it could not be started again: {e}. Run `ovai restart` once that is fixed."));
                let _ = state.send(HostState::Down(why));
                host.retire.cancelled().await;
                let _ = state.send(HostState::Retired);
                return;
            }
        }
    }
}

/// Resolves when the host has not answered a ping for `hang_after`.
async fn heartbeat(link: &Link, hang_after: Duration) {
    let mut sent = 0u64;
    let mut answered = Instant::now();
    loop {
        tokio::time::sleep(PING_EVERY).await;
        if link.last_pong() == sent {
            answered = Instant::now();
            sent += 1;
            link.send(&ToHost::Ping { n: sent });
        } else if answered.elapsed() >= hang_after {
            return;
        }
    }
}

/// A new process importing the generation's files again. A file that no longer imports is refused by
/// name when called (Node re-reads files on a new process; the generation's list stays as it was read).
async fn restart(
    job: &Supervision,
    ids: &AtomicU64,
) -> Result<HostProcess, super::process::StartError> {
    let mut process = HostProcess::start(&job.launch, &job.init).await?;
    for f in &job.files {
        let why = match process
            .load(ids, &f.name, &f.path, job.import_timeout)
            .await
        {
            LoadEnd::Reported(l) if l.ok => continue,
            LoadEnd::Reported(_) => "it no longer imports cleanly".to_string(),
            LoadEnd::Stopped(exit) => {
                // The file ended the new host while importing: start once more without it.
                let why = format!("importing it again stopped the plugin host ({exit})");
                return restart_without(job, ids, &f.name, why).await;
            }
            LoadEnd::TimedOut => {
                let why = format!(
                    "importing it again took longer than {} s",
                    job.import_timeout.as_secs()
                );
                process.kill().await;
                return restart_without(job, ids, &f.name, why).await;
            }
        };
        mark(&process.link, f, &why, &job.log);
    }
    Ok(process)
}

fn mark(link: &Link, f: &ServedFile, why: &str, log: &RuntimeLog) {
    let sentence = format!(
        "{} is not answering calls since the plugin host restarted: {why}. Run `ovai check` and `ovai restart` to see and serve it as it is now.",
        f.shown
    );
    log.row(Topic::Host, &sentence);
    link.mark_unavailable(&f.name, sentence.into());
}

fn restart_without<'a>(
    job: &'a Supervision,
    ids: &'a AtomicU64,
    skip: &'a str,
    why: String,
) -> std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<HostProcess, super::process::StartError>>
            + Send
            + 'a,
    >,
> {
    Box::pin(async move {
        let files: Vec<ServedFile> = job
            .files
            .iter()
            .filter(|f| f.name != skip)
            .cloned()
            .collect();
        let smaller = Supervision {
            launch: job.launch.clone(),
            init: job.init.clone(),
            files,
            import_timeout: job.import_timeout,
            hang_after: job.hang_after,
            log: job.log.clone(),
        };
        let process = restart(&smaller, ids).await?;
        if let Some(f) = job.files.iter().find(|f| f.name == skip) {
            mark(&process.link, f, &why, &job.log);
        }
        Ok(process)
    })
}

fn stopped_row(pid: u32, why: &str, files: &[Arc<str>], last_words: Option<String>) -> String {
    let mut row = format!("The plugin host (pid {pid}) {why}");
    if files.is_empty() {
        row.push_str(" with no call in flight");
    } else {
        let names: Vec<&str> = files.iter().map(|f| &**f).collect();
        row.push_str(&format!(
            "; the calls in flight to {} were answered with a refusal",
            names.join(", ")
        ));
    }
    row.push_str(". It is being started again.");
    if let Some(last) = last_words {
        row.push_str(&format!(" Its last words on stderr: {last}"));
    }
    row
}
