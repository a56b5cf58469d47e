//! Keeps one generation's host alive: respawns it when it dies (with backoff), kills it when it stops
//! answering the heartbeat, gives up after a crash loop, and ends it when the generation is retired.
//!
//! Calls never wait on a dead process: when a host ends, every call it held is answered at once, and
//! calls that arrive while a new one starts wait briefly for it (bounded by their own deadline).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::blame;
use super::bounds::{Exceeded, Look};
use super::child::Launch;
use super::ending::{DownCause, HostEnd, Next, NoHost, NotReimported, RetireWhy, Retirement};
use super::host_rows as rows;
use super::import::{Imported, import_all};
use super::link::Link;
use super::process::{HostInit, HostProcess};
use super::protocol::ToHost;
use super::protocol::ToImport;
use super::where_held::shown;
use crate::runtime_log::{RuntimeLog, Topic};
use crate::sync::lock;

/// The heartbeat: a ping this often while calls are in flight; a host that leaves one unanswered for
/// `hostHangSeconds` is killed.
const PING_EVERY: Duration = Duration::from_millis(500);
/// Respawn backoff: the first stop in the window is respawned at once (its callers wait on it), the
/// next after FIRST_BACKOFF, doubling per stop, capped: a host that dies at once over and over is not
/// restarted in a spin.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How many times a new host that ends before it is ready is started again before the host stays down.
const EARLY_EXIT_TRIES: usize = 3;
/// How long a host may be held off while the seats change, if nobody says they have.
pub const HOLD_AT_MOST: Duration = Duration::from_secs(15);
/// How long the calls a host runs may take to finish when a seat change replaces it: the new secret
/// is written only once the host has ended, so they cannot read it.
pub const SEAT_DRAIN: Duration = Duration::from_secs(10);
/// How long a host ended on purpose is given to read why (`Link::last_words`).
const LAST_WORDS_READ: Duration = Duration::from_secs(1);
/// This many crashes within CRASH_WINDOW is a crash loop: the host stays down until `ovai restart`.
const CRASH_LIMIT: usize = 5;
/// This many ends of any kind within ENDS_WINDOW is one too: a plugin ending the host from a timer ends
/// it with no call in flight, again after every respawn (the window is long enough for a timer of a
/// minute; an operator's or the OOM killer's now and then stays well below it).
const ENDS_LIMIT: usize = 8;
const ENDS_WINDOW: Duration = Duration::from_secs(600);
/// Named this many times within ENDS_WINDOW as the file that ended or held a host, a file is not imported
/// by the next: fewer than either crash loop takes, so the other tools stay up.
const REPEAT_LIMIT: usize = 3;
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// How long a host whose pipe failed is given to be found dead before it is taken as deaf and killed.
const EXIT_FIRST: Duration = Duration::from_millis(200);

/// A plugin this generation serves, as the host must import it again after a respawn.
#[derive(Debug, Clone)]
pub struct ServedFile {
    pub import: ToImport,
    /// `plugins/NAME.mjs`, as refusals name it.
    pub shown: Arc<str>,
    /// The SHA-256 of its bytes when it was read: a new host imports it only while they are the same.
    pub read_as: Option<String>,
}

#[derive(Clone)]
pub enum HostState {
    Up(Arc<Link>),
    /// Between a host's end and its successor's `ready`.
    Respawning,
    /// Crash loop, or the host could not be started again.
    Down(DownCause),
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
    /// Why calls still running when the host is ended are refused.
    retirement: Mutex<Retirement>,
    respawns: Arc<AtomicU32>,
    /// The seats as the host must see them: a count of changes, and whether one is being written now
    /// (no host may run then). Watched rather than signalled, so that a hold and a replace asked for in
    /// quick succession are never taken in the wrong order: the latest word is the one that counts.
    seats: watch::Sender<SeatPhase>,
    /// A new host is being started (its box lists the secrets as they are when it starts).
    starting: AtomicBool,
    /// A host is being ended for a seat change: calls already wait for the next one, and it still runs.
    ending: AtomicBool,
    /// The files of the calls the last held seat change stopped (not finished within SEAT_DRAIN), with
    /// the change's number, for the seat command that held it to say.
    cut: Mutex<(u64, Vec<Arc<str>>)>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SeatPhase {
    changes: u64,
    holding: bool,
}

/// Everything the supervisor task needs, moved into it.
pub struct Supervision {
    pub launch: Launch,
    pub init: HostInit,
    pub files: Vec<ServedFile>,
    /// The modules in plugins/' folders as they were read: a new host imports none changed since.
    pub helpers: Arc<crate::helper_modules::Helpers>,
    pub import_timeout: Duration,
    /// How long the host may leave the heartbeat unanswered.
    pub hang_after: Duration,
    pub log: Arc<RuntimeLog>,
}

impl Host {
    /// Starts supervising `process`, which has imported `files` already.
    pub fn supervise(process: HostProcess, ids: Arc<AtomicU64>, job: Supervision) -> Arc<Host> {
        let (state_tx, state_rx) = watch::channel(HostState::Up(process.link.clone()));
        let host = Host::watching_with(state_rx, ids.clone());
        tokio::spawn(run(process, ids, job, state_tx, host.clone()));
        host
    }

    /// A handle whose host is whatever `state` says, with no supervisor behind it: for tests of how calls
    /// find their host.
    #[cfg(test)]
    pub fn watching(state: watch::Receiver<HostState>) -> Arc<Host> {
        Self::watching_with(state, Arc::new(AtomicU64::new(1)))
    }

    /// A handle on the host `state` names, its calls numbered from `ids`.
    fn watching_with(state: watch::Receiver<HostState>, ids: Arc<AtomicU64>) -> Arc<Host> {
        Arc::new(Host {
            state,
            ids,
            in_flight: AtomicUsize::new(0),
            retiring: AtomicBool::new(false),
            drained: Notify::new(),
            retire: CancellationToken::new(),
            retirement: Mutex::new(Retirement {
                why: RetireWhy::Restarted,
                grace: Duration::ZERO,
            }),
            respawns: Arc::new(AtomicU32::new(0)),
            seats: watch::Sender::new(SeatPhase::default()),
            starting: AtomicBool::new(false),
            ending: AtomicBool::new(false),
            cut: Mutex::new((0, Vec::new())),
        })
    }

    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The live link now, if a host is up.
    pub fn live_link(&self) -> Option<Arc<Link>> {
        match &*self.state.borrow() {
            HostState::Up(link) => Some(link.clone()),
            _ => None,
        }
    }

    /// Waits (at most `patience`) for a live link.
    pub async fn link(&self, patience: Duration) -> Result<Arc<Link>, NoHost> {
        self.link_other_than(None, patience).await
    }

    /// Waits (at most `patience`) for a live link other than `gone` (a link whose process has ended but
    /// whose end the supervisor has not taken in yet).
    pub async fn link_other_than(
        &self,
        gone: Option<&Arc<Link>>,
        patience: Duration,
    ) -> Result<Arc<Link>, NoHost> {
        let mut state = self.state.clone();
        let wait = state.wait_for(|s| match s {
            HostState::Respawning => false,
            HostState::Up(link) => gone.is_none_or(|g| !Arc::ptr_eq(g, link)),
            _ => true,
        });
        match tokio::time::timeout(patience, wait).await {
            Ok(Ok(s)) => match &*s {
                HostState::Up(link) => Ok(link.clone()),
                HostState::Down(why) => Err(NoHost::Down(why.clone())),
                HostState::Retired | HostState::Respawning => Err(NoHost::Ended),
            },
            Ok(Err(_)) => Err(NoHost::Ended),
            Err(_) => Err(NoHost::NotBack(patience)),
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

    /// How many calls run on this generation's host.
    pub fn calls_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The calls the live host is running: each one's file, seat, and when it was made.
    pub fn running(&self) -> Vec<(Arc<str>, Arc<str>, std::time::SystemTime)> {
        self.live_link().map(|l| l.running()).unwrap_or_default()
    }

    /// The tools the live host does not answer (a file a new host did not import), and why.
    pub fn not_answering(&self) -> Vec<(String, NotReimported)> {
        match &*self.state.borrow() {
            HostState::Up(link) => link.all_unavailable(),
            _ => Vec::new(),
        }
    }

    /// How many times a new host was started after one stopped.
    pub fn respawns(&self) -> u32 {
        self.respawns.load(Ordering::Relaxed)
    }

    pub fn down(&self) -> Option<DownCause> {
        match &*self.state.borrow() {
            HostState::Down(why) => Some(why.clone()),
            _ => None,
        }
    }

    /// Replaces the live host with a new one now: a boxed host hides the seats' secrets as they were when
    /// it started, so a seat added or re-keyed since must not be in reach of the old one. Calls in flight
    /// on it are refused in words.
    pub fn replace(&self) {
        self.seats.send_modify(|p| {
            p.changes += 1;
            p.holding = false;
        });
    }

    /// Ends the live host and starts none until [`Host::replace`] (or HOLD_AT_MOST): the seats' secrets
    /// are about to be written, and no box made before may see them.
    /// Returns the change it is, for `take_cut`.
    pub fn hold(&self) -> u64 {
        let mut change = 0;
        self.seats.send_modify(|p| {
            p.changes += 1;
            p.holding = true;
            change = p.changes;
        });
        change
    }

    /// The files of the calls the seat change `change` (`hold`'s) stopped: only that change's, so that
    /// no other command, nor a later one, is told of them.
    pub fn take_cut(&self, change: u64) -> Vec<Arc<str>> {
        let mut cut = lock(&self.cut);
        if cut.0 == change {
            std::mem::take(&mut cut.1)
        } else {
            Vec::new()
        }
    }

    /// Resolves once no host of this supervisor is running or being started (after [`Host::hold`]), or
    /// after `patience`; false then.
    pub async fn held(&self, patience: Duration) -> bool {
        let quiet = async {
            loop {
                let up = matches!(&*self.state.borrow(), HostState::Up(_));
                if !up
                    && !self.starting.load(Ordering::SeqCst)
                    && !self.ending.load(Ordering::SeqCst)
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(patience, quiet).await.is_ok()
    }

    /// Ends the host once the calls it holds have finished, or when `grace` has passed; calls still
    /// running then are refused for `why`.
    pub async fn retire(&self, grace: Duration, why: RetireWhy) {
        *lock(&self.retirement) = Retirement { why, grace };
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
    // Stops with calls in flight (a plugin's doing, most likely): five in the window is a crash loop.
    let mut crashes: VecDeque<Instant> = VecDeque::new();
    // Every stop, for the backoff: a host that dies at once over and over is not restarted in a spin.
    let mut stops: VecDeque<Instant> = VecDeque::new();
    // Every stop again, over ENDS_WINDOW.
    let mut ends: VecDeque<Instant> = VecDeque::new();
    // The file each ended host was last sent a call of, for a crash loop no place explains.
    let mut last_called: VecDeque<(Instant, Arc<str>)> = VecDeque::new();
    // The seats as the live host's box saw them when it started.
    let mut seats = host.seats.subscribe();
    seats.mark_unchanged();
    // Files no new host imports: each ended or held a host from outside any call of its own, or again
    // and again.
    let mut left_out: Vec<(usize, NotReimported)> = Vec::new();
    // When each file was named as having ended or held a host, over ENDS_WINDOW.
    let mut named: std::collections::HashMap<usize, VecDeque<Instant>> = Default::default();
    loop {
        let link = process.link.clone();
        let look = process.look();
        // How it ended: (exit, what the rows say, out of memory, hung after).
        let ended = tokio::select! {
            exit = process.wait_exit() => stopped(&process, &look, &job, exit),
            beat = heartbeat(&link, job.hang_after, &look) => {
                if let Beat::Over(over) = beat {
                    let exit = process.kill().await;
                    (rows::over_bound(&over, &exit), Ending::Over(exit, over))
                } else {
                let frames = process.held_at().await;
                let at = shown(&frames, Path::new(&job.init.plugins_dir));
                // A file left out already runs on as a module of another: the next one out is named.
                let held = blame::held_by(
                    &frames,
                    job.files.iter().map(|f| &f.import),
                    Path::new(&job.init.plugins_dir),
                    |i| left_out.iter().any(|(j, _)| *j == i),
                );
                let exit = process.kill().await;
                (rows::hung(job.hang_after.as_secs(), &exit, at.as_deref()), Ending::Hung(exit, at, held))
                }
            }
            // Writing to it failed. A host that died makes its pipe fail too: its exit, if it comes at
            // once, is the reason; a host still running stopped reading, and waits for nothing now.
            _ = link.unreachable() => {
                match tokio::time::timeout(EXIT_FIRST, process.ended()).await {
                    Ok(()) => {
                        let exit = process.wait_exit().await;
                        stopped(&process, &look, &job, exit)
                    }
                    Err(_) => {
                        let exit = process.kill().await;
                        (rows::deaf(&exit), Ending::Deaf(exit))
                    }
                }
            }
            // A seat's secret changed (replace), or is about to (hold: no host may see it change; the
            // next starts once it has, or after HOLD_AT_MOST if nobody says so).
            changed = seats.changed() => {
                if changed.is_err() {
                    // The host itself is gone: nothing can ask for a replacement any more.
                    let _ = state.send(HostState::Retired);
                    return;
                }
                // Calls from now on wait for the new host instead of reaching this one. It is not held
                // until it has ended: a seat command writes the secrets once it is.
                host.ending.store(true, Ordering::SeqCst);
                let _ = state.send(HostState::Respawning);
                // Held before a seat command writes a secret, its calls finish first (the secret is not
                // written yet), within SEAT_DRAIN. Replaced without a hold, a secret may be on disk
                // already (two seat commands at once, a restart meanwhile): it ends at once.
                let (drain, change) = {
                    let phase = seats.borrow();
                    (if phase.holding { SEAT_DRAIN } else { Duration::ZERO }, phase.changes)
                };
                let drained = tokio::time::Instant::now() + drain;
                let mut gone = false;
                while process.link.in_flight() > 0 && tokio::time::Instant::now() < drained {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                        () = process.ended() => {
                            gone = true;
                            break;
                        }
                    }
                }
                // Its calls' signals fire before it ends, only while no secret is written yet: one
                // replaced without a hold may read a new one, and plugin code runs on abort.
                if drain > Duration::ZERO && !gone {
                    let link = process.link.clone();
                    tokio::select! {
                        () = link.last_words("the seats changed, and its plugin host is being replaced", LAST_WORDS_READ) => {}
                        () = process.ended() => {}
                    }
                }
                process.kill().await;
                super::ending::count_end(super::ending::EndCause::Replaced);
                let files = process.link.fail_all(&Arc::new(HostEnd::Replaced));
                job.log.row(Topic::Host, &rows::replaced(process.pid, &files));
                // For the seat command holding it, which looks once `ending` is down.
                if drain > Duration::ZERO {
                    *lock(&host.cut) = (change, files.clone());
                }
                host.ending.store(false, Ordering::SeqCst);
                match start_when_settled(&job, &ids, &host, &mut seats, Duration::ZERO, &left_out).await {
                    Ok(next) => {
                        process = next;
                        let _ = state.send(HostState::Up(process.link.clone()));
                        host.starting.store(false, Ordering::SeqCst);
                        continue;
                    }
                    Err(stop) => return stop.end(&job, &state, &host).await,
                }
            }
            _ = host.retire.cancelled() => {
                let retirement = lock(&host.retirement).clone();
                let why = match retirement.why {
                    RetireWhy::Restarted => super::ending::OUTLIVED,
                    RetireWhy::ShuttingDown(_) | RetireWhy::StoppedAtOnce(_) => {
                        "the server is shutting down"
                    }
                };
                // A host that ended already hears nothing: not waited for.
                let link = process.link.clone();
                tokio::select! {
                    () = link.last_words(why, LAST_WORDS_READ) => {}
                    () = process.ended() => {}
                }
                process.kill().await;
                process.link.fail_all(&Arc::new(HostEnd::Retired(retirement)));
                let _ = state.send(HostState::Retired);
                return;
            }
        };
        let _ = state.send(HostState::Respawning);
        let now = Instant::now();
        let in_flight = process.link.calls_waiting();
        note(&mut stops, now, CRASH_WINDOW);
        note(&mut ends, now, ENDS_WINDOW);
        if in_flight > 0 {
            note(&mut crashes, now, CRASH_WINDOW);
        }
        // A file the host named that would do it to every new host (see `culprit`) is not imported by
        // the next, which serves the rest: a way forward, so it is taken before any crash loop is
        // declared.
        let culprit = culprit(&process, &job, &ended.1, &left_out, &mut named, now);
        let next = if let Some(c) = culprit {
            left_out.push(c);
            Next::Respawn
        } else if crashes.len() >= CRASH_LIMIT {
            Next::StaysDown {
                stops: crashes.len(),
                window: CRASH_WINDOW,
            }
        } else if ends.len() >= ENDS_LIMIT {
            Next::StaysDown {
                stops: ends.len(),
                window: ENDS_WINDOW,
            }
        } else {
            Next::Respawn
        };
        let (what, ending) = ended;
        super::ending::count_end(match &ending {
            Ending::Stopped(..) => super::ending::EndCause::Stopped,
            Ending::Hung(..) => super::ending::EndCause::Hung,
            Ending::Deaf(..) => super::ending::EndCause::Deaf,
            Ending::Over(..) => super::ending::EndCause::OverBound,
        });
        let end = Arc::new(match ending {
            Ending::Stopped(exit, out_of_memory) => HostEnd::Stopped {
                exit,
                out_of_memory,
                by: process.link.ended_at().into_iter().next(),
                next,
            },
            Ending::Hung(exit, at, _) => HostEnd::Hung {
                exit,
                after: job.hang_after,
                at,
                next,
            },
            Ending::Deaf(exit) => HostEnd::Deaf { exit, next },
            Ending::Over(exit, exceeded) => HostEnd::OverBound {
                exit,
                exceeded,
                next,
            },
        });
        let files = process.link.fail_all(&end);
        // A hung host said its last words before it stopped answering.
        let within = match &*end {
            HostEnd::Hung { after, .. } => super::output::LAST_WORDS_WINDOW + *after,
            _ => super::output::LAST_WORDS_WINDOW,
        };
        let called = process.link.last_called();
        job.log.row(
            Topic::Host,
            &rows::stopped(
                process.pid,
                &what,
                &files,
                next,
                process.link.ended_by(),
                process.last_words(within),
                called.as_deref(),
            ),
        );
        if let Some(file) = called {
            last_called.push_back((now, file));
            while last_called
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) > ENDS_WINDOW.max(CRASH_WINDOW))
            {
                last_called.pop_front();
            }
        }
        if let Next::StaysDown { stops, window } = next {
            let last_at = match &*end {
                HostEnd::Stopped { by, .. } => by.clone(),
                HostEnd::Hung { at, .. } => at.clone(),
                _ => None,
            };
            let mut suspects: Vec<Arc<str>> = Vec::new();
            for (at, file) in &last_called {
                if now.duration_since(*at) <= window && !suspects.contains(file) {
                    suspects.push(file.clone());
                }
            }
            let cause = DownCause::CrashLoop {
                stops,
                window,
                last_at,
                last_called: suspects,
            };
            return stay_down(cause, &job, &state, &host).await;
        }
        let backoff = match stops.len() {
            0 | 1 => Duration::ZERO,
            n => FIRST_BACKOFF
                .saturating_mul(1 << (n - 2).min(16))
                .min(MAX_BACKOFF),
        };
        match start_when_settled(&job, &ids, &host, &mut seats, backoff, &left_out).await {
            Ok(next) => {
                process = next;
                let _ = state.send(HostState::Up(process.link.clone()));
                host.starting.store(false, Ordering::SeqCst);
            }
            Err(stop) => return stop.end(&job, &state, &host).await,
        }
    }
}

/// Starts a new host once no seat change is being written, and again if the seats changed while it
/// started (its box listed the secrets to hide as they were when it started).
async fn start_when_settled(
    job: &Supervision,
    ids: &AtomicU64,
    host: &Host,
    seats: &mut watch::Receiver<SeatPhase>,
    mut first_wait: Duration,
    left_out: &[(usize, NotReimported)],
) -> Result<HostProcess, NoNewHost> {
    loop {
        tokio::select! {
            _ = seats.wait_for(|p| !p.holding) => {}
            _ = tokio::time::sleep(HOLD_AT_MOST) => {}
            _ = host.retire.cancelled() => return Err(NoNewHost::Retired),
        }
        seats.mark_unchanged();
        host.starting.store(true, Ordering::SeqCst);
        let started = respawn_until_up(job, ids, host, first_wait, left_out).await;
        let Ok(mut next) = started else {
            host.starting.store(false, Ordering::SeqCst);
            return started;
        };
        // Still `starting` until the caller has said it is up: a hold asked for meanwhile waits for it
        // to be ended, rather than find no host up and let the secrets be written while this one runs.
        if !seats.has_changed().unwrap_or(false) {
            return Ok(next);
        }
        next.kill().await;
        host.starting.store(false, Ordering::SeqCst);
        first_wait = Duration::ZERO;
    }
}

/// Why no new host came up.
enum NoNewHost {
    Retired,
    Down(DownCause),
}

impl NoNewHost {
    async fn end(self, job: &Supervision, state: &watch::Sender<HostState>, host: &Host) {
        match self {
            NoNewHost::Retired => {
                let _ = state.send(HostState::Retired);
            }
            NoNewHost::Down(cause) => stay_down(cause, job, state, host).await,
        }
    }
}

/// Starts a new host after `first_wait` (the backoff after a crash), trying again while the failure is
/// passing (out of descriptors or processes for a moment: not the plugins' doing, and not a crash).
async fn respawn_until_up(
    job: &Supervision,
    ids: &AtomicU64,
    host: &Host,
    first_wait: Duration,
    left_out: &[(usize, NotReimported)],
) -> Result<HostProcess, NoNewHost> {
    if !first_wait.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(first_wait) => {}
            _ = host.retire.cancelled() => return Err(NoNewHost::Retired),
        }
    }
    let mut wait = FIRST_BACKOFF;
    let mut said_transient = false;
    let mut early_exits = 0;
    loop {
        // A restart or shutdown does not wait for the import (a file that never settles holds it for
        // the import timeout): the host being started is dropped, and its group killed with it.
        let respawned = tokio::select! {
            r = respawn(job, ids, left_out) => r,
            _ = host.retire.cancelled() => return Err(NoNewHost::Retired),
        };
        match respawned {
            Ok((next, not_served)) => {
                host.respawns.fetch_add(1, Ordering::Relaxed);
                super::ending::count_respawn();
                job.log
                    .row(Topic::Host, &rows::respawned(next.pid, not_served));
                return Ok(next);
            }
            // A host that ends before it is ready ran no plugin: its box could not be set up, as when a
            // desk's .mcp.json it was to hide went away meanwhile. The next try lists the files again.
            Err(e @ super::ending::StartError::Exited { .. }) if early_exits < EARLY_EXIT_TRIES => {
                early_exits += 1;
                tracing::warn!(error = %e, "a new plugin host ended before it was ready; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = host.retire.cancelled() => return Err(NoNewHost::Retired),
                }
                wait = (wait * 2).min(MAX_BACKOFF);
            }
            Err(e) if e.is_transient() => {
                if !said_transient {
                    said_transient = true;
                    job.log.row(Topic::Host, &rows::respawn_delayed(&e));
                }
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = host.retire.cancelled() => return Err(NoNewHost::Retired),
                }
                wait = (wait * 2).min(MAX_BACKOFF);
            }
            Err(e) => return Err(NoNewHost::Down(DownCause::CannotRespawn(Arc::new(e)))),
        }
    }
}

/// Notes a stop at `now` in `times`, forgetting those older than `window`.
fn note(times: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    times.push_back(now);
    while times
        .front()
        .is_some_and(|t| now.duration_since(*t) > window)
    {
        times.pop_front();
    }
}

/// How a host that ended by itself ended: past a bound of its box (its control group had a process
/// killed for memory), out of V8's heap, or otherwise.
fn stopped(
    process: &HostProcess,
    look: &Look,
    job: &Supervision,
    exit: super::ending::Exit,
) -> (String, Ending) {
    if let Some(over) = look.exceeded() {
        return (rows::over_bound(&over, &exit), Ending::Over(exit, over));
    }
    let oom = process
        .ran_out_of_memory()
        .then_some(job.launch.max_memory_mb);
    (rows::what_happened(&exit, oom), Ending::Stopped(exit, oom))
}

/// How a host's life ended, before it is known what comes next.
enum Ending {
    Stopped(super::ending::Exit, Option<u64>),
    /// Killed for not answering: where it was held, and the served files on its stack (by position, with
    /// each one's place), innermost first.
    Hung(super::ending::Exit, Option<String>, Vec<(usize, String)>),
    Deaf(super::ending::Exit),
    /// Past a bound of its box, and ended for it.
    Over(super::ending::Exit, Exceeded),
}

/// The served file, by position, that the next host does not import, and why. The host names the files
/// of plugins/ on its stack (held, or ended through `process`). When it never ran a call of any of them,
/// the end came from code their imports run (a timer set then), which would do the same to every new
/// host: the innermost is left out. When it ran a call of one, the end may be that call's doing: the
/// innermost called one is counted, and left out once named REPEAT_LIMIT times within ENDS_WINDOW, before
/// it takes every tool down with a crash loop. None when the host named no file not already left out.
fn culprit(
    process: &HostProcess,
    job: &Supervision,
    ending: &Ending,
    left_out: &[(usize, NotReimported)],
    named: &mut std::collections::HashMap<usize, VecDeque<Instant>>,
    now: Instant,
) -> Option<(usize, NotReimported)> {
    let skip = |i: usize| left_out.iter().any(|(j, _)| *j == i);
    let (stack, exit) = match ending {
        Ending::Hung(_, _, held) => (held.clone(), None),
        Ending::Stopped(exit, _) => {
            let files = job.files.iter().map(|f| &f.import);
            (
                blame::ended_by(&process.link.ended_at(), files, skip),
                Some(exit),
            )
        }
        Ending::Deaf(_) | Ending::Over(..) => return None,
    };
    let called = |i: usize| {
        job.files
            .get(i)
            .is_none_or(|f| process.link.was_called(&f.shown))
    };
    let Some((i, at)) = stack.iter().find(|(i, _)| called(*i)).cloned() else {
        let (i, at) = stack.into_iter().next()?;
        let why = match exit {
            Some(exit) => NotReimported::EndedHost(exit.clone(), at),
            None => NotReimported::HeldHost(at),
        };
        return Some((i, why));
    };
    let times = named.entry(i).or_default();
    note(times, now, ENDS_WINDOW);
    let times = times.len();
    (times >= REPEAT_LIMIT).then_some((
        i,
        NotReimported::Repeatedly {
            times,
            window: ENDS_WINDOW,
            at,
        },
    ))
}

/// The host stays down until the generation is retired (by `ovai restart` or shutdown).
async fn stay_down(
    cause: DownCause,
    job: &Supervision,
    state: &watch::Sender<HostState>,
    host: &Host,
) {
    job.log.row(Topic::Host, &rows::stays_down(&cause));
    let _ = state.send(HostState::Down(cause));
    host.retire.cancelled().await;
    let _ = state.send(HostState::Retired);
}

/// What the heartbeat found.
enum Beat {
    /// The host has left a ping unanswered for `hang_after`.
    Hung,
    /// Its box went past a bound.
    Over(Exceeded),
}

/// Pings the host every PING_EVERY while calls are in flight and every IDLE_PING_EVERY while none is (an
/// idle instance wakes nobody for it), and looks at its box each time. Resolves when the host has left a
/// ping unanswered for `hang_after` (a plugin blocking its event loop), or its box went past a bound.
async fn heartbeat(link: &Link, hang_after: Duration, look: &Look) -> Beat {
    let mut n = 0u64;
    let mut answered = link.pongs();
    // The first ping sent since the host last showed itself at work (`Link::pongs`), while it has not
    // since: a host busy with a queue of calls answers them meanwhile.
    let mut unanswered: Option<Instant> = None;
    loop {
        // A ping left unanswered for a beat keeps the faster beat, calls or none: calls given up at their
        // deadline leave none in flight, and a host held past them was otherwise looked at every 10 s. (A
        // ping just sent, on an idle host, has not been left unanswered yet.)
        let waiting_on_host =
            unanswered.is_some_and(|sent| sent.elapsed() >= PING_EVERY) && link.pongs() == answered;
        if !link.has_calls() && !waiting_on_host {
            // The first call to come starts the faster beat at once.
            if link.idle_beat().await {
                continue;
            }
        } else {
            tokio::time::sleep(PING_EVERY).await;
        }
        if let Some(over) = look.exceeded() {
            return Beat::Over(over);
        }
        let now = link.pongs();
        if now != answered {
            answered = now;
            unanswered = None;
        } else if unanswered.is_some_and(|sent| sent.elapsed() >= hang_after) {
            return Beat::Hung;
        }
        n += 1;
        link.send(&ToHost::Ping { n });
        unanswered.get_or_insert_with(Instant::now);
    }
}

/// A new process importing the generation's files again. A plugin's file whose bytes changed (or that is
/// gone) since it was read is not imported, by the host or through another file: a new host serves the
/// files as they were read, or refuses them, rather than run a file nobody read (nor a module in a folder
/// of plugins/ changed since: a file that imports it is refused, naming it). One that no longer imports
/// is refused by name when called (the generation's list stays as it was read).
async fn respawn(
    job: &Supervision,
    ids: &AtomicU64,
    left_out: &[(usize, NotReimported)],
) -> Result<(HostProcess, usize), super::ending::StartError> {
    let now = hashes(job.files.iter()).await;
    let mut not_served = 0;
    let mut same = Vec::new();
    let mut unread = Vec::new();
    for (i, f) in job.files.iter().enumerate() {
        if let Some((_, why)) = left_out.iter().find(|(j, _)| *j == i) {
            unread.push((f, why.clone()));
            continue;
        }
        match now.get(i) {
            Some(Some(hash)) if f.read_as.as_ref() == Some(hash) => same.push(f),
            Some(Some(_)) => unread.push((f, NotReimported::Changed)),
            _ => unread.push((f, NotReimported::Removed)),
        }
    }
    let imports: Vec<ToImport> = same.iter().map(|f| f.import.clone()).collect();
    // Nor through another file that imports one (`import { run } from "./changed.mjs"`).
    let helpers = job.helpers.clone();
    // And a file that was not there at the read (an install's, one a package's `main` now names).
    let changed_helpers = tokio::task::spawn_blocking(move || {
        let mut unread = helpers.changed();
        unread.extend(helpers.appeared());
        unread
    })
    .await
    .unwrap_or_default();
    let init = HostInit {
        unread: unread
            .iter()
            .filter(|(_, why)| matches!(why, NotReimported::Changed))
            .map(|(f, _)| f.import.path.clone())
            .chain(
                changed_helpers
                    .into_iter()
                    .map(|p| p.to_string_lossy().into_owned()),
            )
            .collect(),
        ..job.init.clone()
    };
    let done = import_all(None, &job.launch, &init, &imports, ids, job.import_timeout).await?;
    for (f, why) in unread {
        job.log
            .row(Topic::Host, &rows::not_reimported(&f.shown, &why));
        done.process.link.mark_unavailable(&f.import.name, why);
        not_served += 1;
    }
    // A file saved between the look above and its import was imported as saved: looked at again, and
    // refused if it is no longer what was read.
    let after = hashes(same.iter().copied()).await;
    for ((f, outcome), hash) in same.into_iter().zip(done.outcomes).zip(after) {
        let why = match outcome {
            Imported::Reported(l) if l.ok && hash.is_some() && hash == f.read_as => continue,
            Imported::Reported(l) if l.ok => NotReimported::Changed,
            Imported::Reported(l) => NotReimported::Failed(l.import.clone()),
            Imported::StoppedHost(exit, _) => NotReimported::StoppedHost(exit),
            Imported::Hung => NotReimported::Hung(job.import_timeout),
            Imported::Held(at) => NotReimported::Held(job.import_timeout, at),
        };
        job.log
            .row(Topic::Host, &rows::not_reimported(&f.shown, &why));
        done.process.link.mark_unavailable(&f.import.name, why);
        not_served += 1;
    }
    Ok((done.process, not_served))
}

/// The SHA-256 of each file's bytes now (`None`: gone or unreadable). Reading files is blocking work:
/// off the daemon's thread.
async fn hashes<'a>(files: impl Iterator<Item = &'a ServedFile>) -> Vec<Option<String>> {
    let paths: Vec<String> = files.map(|f| f.import.path.clone()).collect();
    let count = paths.len();
    tokio::task::spawn_blocking(move || {
        paths
            .iter()
            .map(|p| crate::files::fingerprint(std::path::Path::new(p)))
            .collect()
    })
    .await
    .unwrap_or_else(|_| vec![None; count])
}
