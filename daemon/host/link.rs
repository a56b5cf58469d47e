//! One live connection to a host process: the writer and reader tasks on its pipes and the calls waiting on
//! answers. A link lives exactly as long as its process; a restart makes a new one.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::time::Instant;

use crate::unix_io::ReadHalf;
use futures::StreamExt;
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use crate::lines::{CappedLines, Line, Outbox};
use crate::sync::lock;

use super::ending::{HostEnd, NotReimported};
use super::host_rows as rows;
use super::protocol::{Answer, FromHost, Loaded, Printed, Progress, Stray, ToHost};
use crate::runtime_log::{RuntimeLog, Topic};

/// The longest protocol line read from the host: an answer is capped well below this by maxAnswerBytes
/// (JSON escaping can at most sextuple it), so a longer line is a broken host, never a long answer.
pub fn max_line_len(max_answer_bytes: usize) -> usize {
    max_answer_bytes.saturating_mul(6).saturating_add(64 * 1024)
}

/// How much of a printed line the log takes, in bytes as written: room is left for the row's own fields
/// within the 4 KiB a line of the operator's log may hold.
const MOST_PRINTED: usize = 3_072;

/// A printed line as the log takes it: escaped, within MOST_PRINTED bytes, and saying how many bytes the
/// plugin printed were not written (`cut` of them cut by the host before it sent the rest).
fn shown_line(text: &str, cut: u64) -> String {
    let mut out = String::new();
    let mut more = cut;
    let mut buf = [0u8; 4];
    for (at, c) in text.char_indices() {
        let shown = crate::names::escape_controls(c.encode_utf8(&mut buf), false);
        if out.len() + shown.len() > MOST_PRINTED {
            more += (text.len() - at) as u64;
            break;
        }
        out.push_str(&shown);
    }
    if more > 0 {
        out.push_str(&format!("… ({more} bytes more, not written)"));
    }
    out
}

/// A line a plugin printed, into the operator's log under its file's name (the host counts a flood
/// per file, so one plugin's cannot drown another's lines). What comes on fd 4 is a plugin's to write
/// too, past the key: clipped and escaped.
fn printed(pid: u32, p: &Printed) {
    let clip = |t: &str, n: usize| {
        let t: String = t.chars().take(n).collect();
        crate::names::escape_controls(&t, false).into_owned()
    };
    let plugin = clip(&p.file, 200);
    let plugin = plugin.as_str();
    let stream = if p.stream == "stderr" {
        "stderr"
    } else {
        "stdout"
    };
    match &p.text {
        // No file on its stack (a promise job's console.log, a Worker): said unnamed.
        Some(text) if plugin.is_empty() => {
            tracing::info!(target: "ovai::plugin_output", pid, stream, "{}", shown_line(text, p.cut));
        }
        Some(text) => {
            tracing::info!(target: "ovai::plugin_output", pid, plugin, stream, "{}", shown_line(text, p.cut));
        }
        None => {}
    }
    match p.dropped {
        // Counted before any file was looked up: all plugins together printed past what the log takes.
        Some(n) if plugin == "*" => tracing::warn!(
            target: "ovai::plugin_output",
            pid,
            stream,
            "{n} lines of plugin output were not logged (more than 1000 a second from all plugins together)"
        ),
        Some(n) if plugin.is_empty() => tracing::warn!(
            target: "ovai::plugin_output",
            pid,
            stream,
            "{n} lines of plugin output naming no file were not logged (more than 100 a second)"
        ),
        Some(n) => tracing::warn!(
            target: "ovai::plugin_output",
            pid,
            plugin,
            stream,
            "{n} lines of plugin output were not logged (more than 100 a second)"
        ),
        None => {}
    }
}

/// How a call waiting on this link ends.
#[derive(Debug)]
pub enum CallEnd {
    Answered(Box<Answer>),
    /// The process went away (or was killed) with the call in flight: why.
    HostStopped(Stopped),
    /// The host ended and had never been sent the call whole: it may run elsewhere.
    NotReceived,
}

/// Why a host ended, and how many calls it may have been running then: a call's caller is told how
/// many others ran, since any of them may have ended it (not which: they may be other seats').
#[derive(Debug, Clone)]
pub struct Stopped {
    pub why: Arc<HostEnd>,
    pub in_flight: usize,
}

/// A call in flight: who to tell, and which file it runs, so a crash can name it.
struct WaitingCall {
    file: Arc<str>,
    /// Who made it, and since when it waits: what `running` shows an operator.
    seat: Arc<str>,
    since: std::time::SystemTime,
    /// What the answer must carry to be this call's.
    key: u64,
    /// Told how the call ended, on whichever of the link's tasks learns it (the reader's, the
    /// supervisor's, the deadline sweeper's).
    settle: Box<dyn Settle>,
    /// Where the call's progress reports go, when its caller asked for them.
    progress: Option<Arc<dyn Progressed>>,
    /// How many messages the host had sent when the call was registered: none since, at its deadline,
    /// and the host answered not even the heartbeat (every PING_EVERY while calls are in flight).
    heard: u64,
}

/// A call whose deadline passed: its id, file, settle, and how many messages the host had sent when it
/// was registered.
type Due = (u64, Arc<str>, Box<dyn Settle>, u64);

/// How a call ended.
pub enum End {
    Call(CallEnd),
    /// Its deadline passed; the host was told to stop it. `silent`: the host sent nothing at all in
    /// that time, its event loop held.
    Expired {
        silent: bool,
    },
    /// Its caller withdrew it (`Link::withdraw`) and told the host to stop it.
    Cancelled,
}

/// Who hears how a call ends: the call itself, which needs no task of its own to wait (a task per call
/// cost about as much of the daemon's work on a call as the rest together), or a task waiting on a
/// channel. Told exactly once; never while the link's own locks are held.
pub trait Settle: Send {
    fn end(self: Box<Self>, how: End);
}

/// Where a call's progress reports go, as they come; never while the link's own locks are held.
pub trait Progressed: Send + Sync {
    fn report(self: Arc<Self>, report: Progress);
}

/// The calls waiting on a link, and whether it still takes new ones.
#[derive(Default)]
struct LinkCalls {
    waiting: crate::maps::Map<u64, WaitingCall>,
    /// Set when the link answered everything it held because its host ended: a call registered after
    /// that would wait for its deadline, so it is turned away to find the next host.
    closed: bool,
    /// Random keys not handed out yet, drawn from the OS in batches.
    keys: Vec<u64>,
    /// The files this host was sent a call of: a file it was never sent one of ended or held it with
    /// code of its import (a timer it set then), which every new host would run again.
    called: crate::maps::Set<Arc<str>>,
    /// The file of the last call it was sent: where to look when it ends with none in flight.
    last_called: Option<Arc<str>>,
    /// The deadlines of the calls with no task of their own, in the order they came (one generation's
    /// calls share one timeout, so that is the order they fall due); an entry whose call ended is
    /// dropped when it reaches the front.
    deadlines: std::collections::VecDeque<(Instant, u64)>,
    /// The sweeper found no deadline to wait for and waits to be told of one.
    sweeper_idle: bool,
    /// The deadline the sweeper sleeps until, when it does.
    armed: Option<Instant>,
}

impl LinkCalls {
    /// A fresh random key: each call's own, so the keys of other calls say nothing about it.
    fn fresh_key(&mut self) -> u64 {
        let key = match self.keys.pop() {
            Some(key) => key,
            None => {
                let mut bytes = [0u8; 8 * KEY_BATCH];
                if getrandom::fill(&mut bytes).is_ok() {
                    self.keys = bytes
                        .chunks_exact(8)
                        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                        .collect();
                    self.keys.pop().unwrap_or_default()
                } else {
                    // No OS randomness now: std's randomly keyed SipHash of the moment is still unguessable.
                    std::hash::BuildHasher::hash_one(
                        &std::collections::hash_map::RandomState::new(),
                        std::time::Instant::now(),
                    )
                }
            }
        };
        // 53 bits: the host reads it as a JavaScript number and must write it back exactly.
        key & ((1 << 53) - 1)
    }
}

/// The heartbeat's pace while no call is in flight. The host wakes once for each ping, the daemon about
/// four times (tokio's timer wheel wakes at each level a long sleep cascades through, then the pong):
/// at 4 s that was one wake-up a second together; at 10 s, 0.5 (`scripts/bench --idle`).
pub const IDLE_PING_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// How many call keys are drawn from the OS at once.
const KEY_BATCH: usize = 64;

impl LinkCalls {
    /// Notes a call as waiting on this link, and its file as one this host was sent a call of.
    fn wait(&mut self, id: u64, waiting: WaitingCall) {
        if !self.called.contains(&waiting.file) {
            self.called.insert(waiting.file.clone());
        }
        if !self
            .last_called
            .as_ref()
            .is_some_and(|last| Arc::ptr_eq(last, &waiting.file))
        {
            self.last_called = Some(waiting.file.clone());
        }
        self.waiting.insert(id, waiting);
    }

    /// Drops the deadlines at the front whose calls have ended; the first one still waiting, if any.
    fn first_deadline(&mut self) -> Option<Instant> {
        while let Some((at, id)) = self.deadlines.front().copied() {
            if self.waiting.contains_key(&id) {
                return Some(at);
            }
            self.deadlines.pop_front();
        }
        None
    }

    /// Notes a task-less call's deadline; true when the sweeper must be told (it waits for none).
    fn note_deadline(&mut self, id: u64, at: Instant) -> bool {
        self.first_deadline();
        // A long call at the front keeps the ended ones behind it: past a bound they are let go of.
        if self.deadlines.len() > 2 * self.waiting.len() + 64 {
            let waiting = &self.waiting;
            self.deadlines.retain(|(_, id)| waiting.contains_key(id));
        }
        self.deadlines.push_back((at, id));
        // One generation's calls share a timeout, so a call's deadline is never before those queued
        // already; should one be, the queue is put in order again and the sweeper told.
        if self.deadlines.len() > 1 && self.deadlines[self.deadlines.len() - 2].0 > at {
            self.deadlines.make_contiguous().sort_unstable();
        }
        let wake = self.sweeper_idle || self.armed.is_some_and(|armed| at < armed);
        self.sweeper_idle = false;
        wake
    }

    /// Takes out the task-less calls whose deadline is `now` or before.
    fn due(&mut self, now: Instant) -> Vec<Due> {
        let mut due = Vec::new();
        while let Some(at) = self.first_deadline() {
            if at > now {
                break;
            }
            if let Some((_, id)) = self.deadlines.pop_front()
                && let Some(w) = self.waiting.remove(&id)
            {
                due.push((id, w.file, w.settle, w.heard));
            }
        }
        due
    }
}

pub struct Link {
    out: Outbox,
    calls: Mutex<LinkCalls>,
    /// Loads waiting on a report: id → the key the report must carry, and who waits.
    loads: Mutex<HashMap<u64, (u64, oneshot::Sender<Loaded>)>>,
    /// Sent in `init` and carried by every `stray`.
    host_key: u64,
    ready: Mutex<Option<oneshot::Sender<(u32, String)>>>,
    /// How many well-formed messages the host has sent, for the heartbeat (which notes when it changes:
    /// a clock read for every message was a clock read a call).
    heard: AtomicU64,
    /// How many pongs came with the host's key, and answers and load reports with their own: what the
    /// heartbeat takes for the host at work. Not progress or printed lines, which a plugin's Worker can
    /// send for ever while the host's own thread is held; nor a pong without the key.
    pongs: AtomicU64,
    /// The host's pid, for status and log rows.
    pub pid: u32,
    /// Plugins that did not import again after a crash: name → why (calls to them are refused).
    unavailable: Mutex<HashMap<String, NotReimported>>,
    /// The ping `ask` sent and `answered` looks for, and whether its pong came (no other pong counts).
    awaited_pong: AtomicU64,
    ponged: std::sync::atomic::AtomicBool,
    /// Where errors left behind outside a call are written, and the places written so far.
    log: Option<Arc<RuntimeLog>>,
    strays: StrayBook,
    /// The files a call of which was given up at its deadline, each said once.
    timed_out: Mutex<std::collections::HashSet<Arc<str>>>,
    stray_rows: Mutex<StrayRows>,
    /// The places in plugins/ on the stack when the host said, under its key, a plugin is ending it,
    /// innermost first.
    ended_at: Mutex<Vec<String>>,
    /// How it said it is being ended (`process.abort()`), where it said so.
    ended_how: Mutex<Option<String>>,
    /// The variable names already said in a row (`env_row`).
    env_said: Mutex<std::collections::HashSet<String>>,
    /// Wakes the deadline sweeper: a first deadline to wait for, or the link's end.
    sweep: Arc<tokio::sync::Notify>,
    /// The heartbeat waits at its idle pace, to be woken by the first call that comes.
    beat_idle: std::sync::atomic::AtomicBool,
    busy: tokio::sync::Notify,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.sweep.notify_one();
    }
}

/// The places of errors left behind that the rows of one host, and of the hosts a start discarded before
/// it (which ran the same files), have named: each once.
pub type StrayBook = Arc<Mutex<std::collections::HashSet<String>>>;

/// How many files' deadlines a host's log rows name; one more row says the rest are not.
const MAX_TIMEOUT_ROWS: usize = 16;

/// How many places this host's rows named, and whether it said it stops there.
#[derive(Default)]
struct StrayRows {
    written: usize,
    capped: bool,
}

/// How many places of errors left behind one host writes to runtime.log; the rest are on stderr.
const MAX_STRAY_ROWS: usize = 16;

impl Link {
    /// Starts the reader and writer tasks on `channel`. The returned receiver gets the host's `ready`
    /// (protocol version, Node version); the join handle ends when the host closes fd 4.
    pub fn start(
        channel: (ReadHalf, crate::unix_io::WriteHalf),
        pid: u32,
        max_line: usize,
        log: Option<Arc<RuntimeLog>>,
        strays: StrayBook,
    ) -> (
        Arc<Self>,
        oneshot::Receiver<(u32, String)>,
        tokio::task::JoinHandle<()>,
    ) {
        let (read, write) = channel;
        // The writer ends when the link (its one sender) is dropped, or the host is gone.
        let (out, _writer) = Outbox::keeping_unwritten(write);
        let (ready_tx, ready_rx) = oneshot::channel();
        let mut calls = LinkCalls::default();
        let host_key = calls.fresh_key();
        let link = Arc::new(Self {
            out,
            calls: Mutex::new(calls),
            host_key,
            loads: Mutex::new(HashMap::new()),
            ready: Mutex::new(Some(ready_tx)),
            heard: AtomicU64::new(0),
            pongs: AtomicU64::new(0),
            pid,
            unavailable: Mutex::new(HashMap::new()),
            awaited_pong: AtomicU64::new(0),
            ponged: std::sync::atomic::AtomicBool::new(false),
            log,
            strays,
            timed_out: Mutex::default(),
            stray_rows: Mutex::new(StrayRows::default()),
            ended_at: Mutex::new(Vec::new()),
            ended_how: Mutex::new(None),
            env_said: Mutex::new(std::collections::HashSet::new()),
            sweep: Arc::new(tokio::sync::Notify::new()),
            beat_idle: std::sync::atomic::AtomicBool::new(false),
            busy: tokio::sync::Notify::new(),
        });
        tokio::spawn(sweep_deadlines(Arc::downgrade(&link), link.sweep.clone()));
        let reader = tokio::spawn(read_lines(link.clone(), read, max_line));
        (link, ready_rx, reader)
    }

    /// Resolves once a write to the host failed: nothing reads what the daemon sends it any more (its
    /// process ended, or a plugin closed the pipe it reads).
    pub async fn unreachable(&self) {
        self.out.closed().await
    }

    /// Queues a message for the host; `false` when the host is gone (the supervisor answers whatever
    /// was waiting on it).
    pub fn send(&self, msg: &ToHost<'_>) -> bool {
        self.send_line(msg.line())
    }

    /// Queues a message's line (`ToHost::line`) for the host.
    pub fn send_line(&self, line: Vec<u8>) -> bool {
        self.out.send(line).is_ok()
    }

    /// A call was registered: a heartbeat waiting at its idle pace is woken to its faster one (the first
    /// call only; one load a call besides).
    fn a_call_came(&self) {
        if self.beat_idle.load(Ordering::Relaxed) && self.beat_idle.swap(false, Ordering::AcqRel) {
            self.busy.notify_one();
        }
    }

    /// The heartbeat's idle wait: true when a call came before IDLE_PING_EVERY passed.
    pub async fn idle_beat(&self) -> bool {
        self.beat_idle.store(true, Ordering::Release);
        let woken = tokio::select! {
            _ = tokio::time::sleep(IDLE_PING_EVERY) => false,
            _ = self.busy.notified() => true,
        };
        self.beat_idle.store(false, Ordering::Release);
        woken
    }

    /// Whether any call waits on this link.
    pub fn has_calls(&self) -> bool {
        !lock(&self.calls).waiting.is_empty()
    }

    /// A key for a call about to be registered with `expect`.
    pub fn call_key(&self) -> u64 {
        self.fresh_key()
    }

    /// Registers a call (its file, and the seat that made it), its line made with `key`: `settle` hears how it ends, `progress` (when its caller
    /// asked) its reports, and `deadline` is kept here. Gives `settle` back once the link's host has ended
    /// and its calls were answered.
    pub fn expect<S: Settle + 'static>(
        &self,
        id: u64,
        (file, seat): (Arc<str>, Arc<str>),
        key: u64,
        deadline: Instant,
        settle: Box<S>,
        progress: Option<Arc<dyn Progressed>>,
    ) -> Result<(), Box<S>> {
        let wake = {
            let mut calls = lock(&self.calls);
            if calls.closed {
                return Err(settle);
            }
            let waiting = WaitingCall {
                file,
                seat,
                since: std::time::SystemTime::now(),
                key,
                settle,
                progress,
                heard: self.heard(),
            };
            calls.wait(id, waiting);
            calls.note_deadline(id, deadline)
        };
        if wake {
            self.sweep.notify_one();
        }
        self.a_call_came();
        Ok(())
    }

    /// Takes back a call that is still waiting (to stop it): its settle, which has not been told anything.
    pub fn withdraw(&self, id: u64) -> Option<Box<dyn Settle>> {
        lock(&self.calls).waiting.remove(&id).map(|w| w.settle)
    }

    /// The deadline sweeper's look: the calls now due are taken out and told, each host told to stop
    /// it; the next deadline to wait for, if any (else the sweeper is marked idle).
    fn sweep_due(&self) -> Option<Instant> {
        let (due, next) = {
            let mut calls = lock(&self.calls);
            let due = calls.due(Instant::now());
            let next = calls.first_deadline();
            calls.sweeper_idle = next.is_none();
            calls.armed = next;
            (due, next)
        };
        for (id, file, settle, heard) in due {
            self.send(&ToHost::Cancel {
                id,
                why: "the call took longer than its deadline",
                timeout: true,
            });
            let silent = self.heard() == heard;
            settle.end(End::Expired { silent });
            // Its author learns of it, once a file for each host (the first 16 files): code that does not
            // stop at its signal runs on.
            if let Some(log) = &self.log {
                let said = {
                    let mut seen = lock(&self.timed_out);
                    if seen.len() > MAX_TIMEOUT_ROWS || !seen.insert(file.clone()) {
                        None
                    } else if seen.len() > MAX_TIMEOUT_ROWS {
                        Some(format!(
                            "Calls to more plugins reached their deadline on the plugin host (pid {}); no more \
                             is said of them until a new host starts.",
                            self.pid
                        ))
                    } else if silent {
                        Some(format!(
                            "A call to {file} reached its deadline (callTimeoutSeconds in openovai.json) while the \
                             plugin host (pid {}) answered nothing, not even its heartbeat: its event loop is held, \
                             by this call's code or another's, and the host is ended if it stays so for \
                             hostHangSeconds. Said once a file for each host.",
                            self.pid
                        ))
                    } else {
                        Some(format!(
                            "A call to {file} reached its deadline (callTimeoutSeconds in openovai.json) and was \
                             given up; if its code does not stop at its signal, it runs on in the plugin host (pid \
                             {}). Said once a file for each host.",
                            self.pid
                        ))
                    }
                };
                if let Some(row) = said {
                    log.row(Topic::Host, &row);
                }
            }
        }
        next
    }

    /// Whether this host was ever sent a call of `file` (`plugins/x.mjs`).
    pub fn was_called(&self, file: &str) -> bool {
        lock(&self.calls).called.contains(file)
    }

    /// The key a load's report must carry, and where the report arrives.
    pub fn expect_load(&self, id: u64) -> (u64, oneshot::Receiver<Loaded>) {
        let key = self.fresh_key();
        let (tx, rx) = oneshot::channel();
        lock(&self.loads).insert(id, (key, tx));
        (key, rx)
    }

    /// The key `init` gives the host, which its `stray` messages carry.
    pub fn host_key(&self) -> u64 {
        self.host_key
    }

    fn fresh_key(&self) -> u64 {
        lock(&self.calls).fresh_key()
    }

    /// A load nobody waits for any more (it outlived the import timeout).
    pub fn forget_load(&self, id: u64) {
        lock(&self.loads).remove(&id);
    }

    /// Asks whether the host's event loop turns: `answered` says once it has answered. An import that
    /// has not finished while it does is waiting (a top-level await), not blocking the process.
    pub fn ask(&self) {
        // Unguessable, and no pong from before counts: a plugin writing to fd 4 cannot answer for it.
        let n = self.fresh_key();
        self.ponged.store(false, Ordering::Relaxed);
        self.awaited_pong.store(n, Ordering::Relaxed);
        self.send(&ToHost::Ping { n });
    }

    /// Before the host is ended on purpose: each call still waiting is cancelled with `why` (its
    /// plugin's signal fires), and the host is asked a ping, which it answers once it has read those and
    /// any cancel sent before (the last call of a host left behind by a restart). Waits for the answer
    /// at most `patience`: a host whose event loop is held hears nothing anyway.
    pub async fn last_words(&self, why: &str, patience: std::time::Duration) {
        for id in self.sent_calls() {
            self.send(&ToHost::Cancel {
                id,
                why,
                timeout: false,
            });
        }
        self.ask();
        let _ = tokio::time::timeout(patience, async {
            while !self.answered() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await;
    }

    /// Whether the host answered the last `ask`.
    pub fn answered(&self) -> bool {
        self.ponged.load(Ordering::Relaxed)
    }

    /// How many calls the host may be running: those waiting, less any it was never sent whole.
    pub fn calls_waiting(&self) -> usize {
        self.sent_calls().len()
    }

    /// The calls waiting that the host was sent whole.
    fn sent_calls(&self) -> Vec<u64> {
        let unsent = self.unsent_calls();
        lock(&self.calls)
            .waiting
            .keys()
            .filter(|id| !unsent.contains(id))
            .copied()
            .collect()
    }

    /// How many calls wait on this link.
    pub fn in_flight(&self) -> usize {
        lock(&self.calls).waiting.len()
    }

    /// The calls waiting on this link: each one's file, seat, and when it was made.
    pub fn running(&self) -> Vec<(Arc<str>, Arc<str>, std::time::SystemTime)> {
        lock(&self.calls)
            .waiting
            .values()
            .map(|w| (w.file.clone(), w.seat.clone(), w.since))
            .collect()
    }

    /// Answers every waiting call with `why` (or, one the host was never sent whole, with
    /// `NotReceived`), and takes no more; returns the files of the calls the host may have run, sorted,
    /// once each.
    pub fn fail_all(&self, why: &Arc<HostEnd>) -> Vec<Arc<str>> {
        let unsent = self.unsent_calls();
        let waiting: Vec<(u64, WaitingCall)> = {
            let mut calls = lock(&self.calls);
            calls.closed = true;
            calls.waiting.drain().collect()
        };
        lock(&self.loads).clear();
        let mut files: Vec<Arc<str>> = waiting
            .iter()
            .filter(|(id, _)| !unsent.contains(id))
            .map(|(_, w)| w.file.clone())
            .collect();
        files.sort();
        files.dedup();
        let stopped = Stopped {
            why: why.clone(),
            in_flight: waiting
                .iter()
                .filter(|(id, _)| !unsent.contains(id))
                .count(),
        };
        for (id, w) in waiting {
            let end = if unsent.contains(&id) {
                CallEnd::NotReceived
            } else {
                CallEnd::HostStopped(stopped.clone())
            };
            w.settle.end(End::Call(end));
        }
        files
    }

    /// The calls whose lines a failed write left unsent (the host can have acted on none of them).
    fn unsent_calls(&self) -> std::collections::HashSet<u64> {
        const CALL: &[u8] = b"{\"t\":\"call\",\"id\":";
        self.out
            .unwritten()
            .split(|b| *b == b'\n')
            .filter_map(|line| {
                let rest = line.strip_prefix(CALL)?;
                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
            })
            .collect()
    }

    /// How many well-formed messages the host has sent so far.
    pub fn heard(&self) -> u64 {
        self.heard.load(Ordering::Relaxed)
    }

    /// How many signs of the host at work came so far (`pongs`).
    pub fn pongs(&self) -> u64 {
        self.pongs.load(Ordering::Relaxed)
    }

    pub fn mark_unavailable(&self, name: &str, why: NotReimported) {
        lock(&self.unavailable).insert(name.to_string(), why);
    }

    pub fn unavailable(&self, name: &str) -> Option<NotReimported> {
        lock(&self.unavailable).get(name).cloned()
    }

    /// Every tool this host does not answer, and why, by name.
    pub fn all_unavailable(&self) -> Vec<(String, NotReimported)> {
        let mut all: Vec<(String, NotReimported)> = lock(&self.unavailable)
            .iter()
            .map(|(n, w)| (n.clone(), w.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The file of the last call this host was sent, if it was sent one.
    pub fn last_called(&self) -> Option<Arc<str>> {
        lock(&self.calls).last_called.clone()
    }

    /// The places in plugins/ (`plugins/x.mjs:4:28`) the host said, under its key, were on its stack
    /// when a plugin ended it, innermost first: the first is where it was ended from. Empty when it did
    /// not say.
    pub fn ended_at(&self) -> Vec<String> {
        lock(&self.ended_at).clone()
    }

    /// How a plugin ended the host and where from, as the host said it under its key:
    /// `process.reallyExit(7) (at plugins/x.mjs:4:28)`.
    pub fn ended_by(&self) -> Option<String> {
        let how = lock(&self.ended_how).clone()?;
        Some(match lock(&self.ended_at).first() {
            Some(at) => format!("{how} (at {at})"),
            None => how,
        })
    }

    /// An error a plugin left behind, in runtime.log once for its place. What arrives on fd 4 is a
    /// plugin's to write too: it is clipped, and one host writes at most MAX_STRAY_ROWS of these.
    fn stray(&self, s: Stray) {
        let Some(log) = &self.log else { return };
        if s.key != self.host_key {
            return;
        }
        let clip = |t: &str, n: usize| t.chars().take(n).collect::<String>();
        let at = s.at.as_deref().map(|a| clip(a, 200));
        let row = {
            let mut rows_here = lock(&self.stray_rows);
            if rows_here.capped {
                return;
            }
            // Without a place, an error is told apart by its words (as the host does).
            let place = at
                .clone()
                .unwrap_or_else(|| format!("?{}", clip(&s.message, 200)));
            if !lock(&self.strays).insert(place) {
                return;
            }
            rows_here.written += 1;
            if rows_here.written > MAX_STRAY_ROWS {
                rows_here.capped = true;
                rows::strays_capped(MAX_STRAY_ROWS)
            } else {
                rows::stray(&s.how, &clip(&s.message, 500), at.as_deref())
            }
        };
        log.row(Topic::Host, &row);
    }

    /// A call that failed naming a variable ovai has and does not pass, in runtime.log once a name for
    /// each host (the caller is not told: its arguments may be what the error names).
    fn env_row(&self, file: &str, t: &super::protocol::Thrown) {
        let Some(log) = &self.log else { return };
        let fresh: Vec<String> = {
            let mut said = lock(&self.env_said);
            t.env_unset
                .iter()
                .take(8)
                .filter(|n| said.len() < 32 && said.insert((*n).clone()))
                .cloned()
                .collect()
        };
        let t = super::protocol::Thrown {
            env_unset: fresh,
            ..Default::default()
        };
        if let Some(words) = rows::env_unpassed(&t) {
            log.row(Topic::Host, &format!("A call to {file} failed: {words}"));
        }
    }

    fn deliver(&self, msg: FromHost) {
        self.heard.fetch_add(1, Ordering::Relaxed);
        match msg {
            FromHost::Answer(a) => {
                let settle = {
                    let mut calls = lock(&self.calls);
                    match calls.waiting.get(&a.id) {
                        Some(w) if w.key == a.key => calls.waiting.remove(&a.id),
                        Some(_) => {
                            tracing::warn!(
                                pid = self.pid,
                                id = a.id,
                                "an answer without its call's key reached the daemon (a plugin writing to fd 4?); it was dropped"
                            );
                            None
                        }
                        None => None,
                    }
                };
                if let Some(w) = settle {
                    self.pongs.fetch_add(1, Ordering::Relaxed);
                    if let Some(t) = a.threw.as_ref().filter(|t| !t.env_unset.is_empty()) {
                        self.env_row(&w.file, t);
                    }
                    w.settle.end(End::Call(CallEnd::Answered(a)));
                }
            }
            FromHost::Progress(p) => {
                let to = lock(&self.calls)
                    .waiting
                    .get(&p.id)
                    .filter(|w| w.key == p.key)
                    .and_then(|w| w.progress.clone());
                if let Some(to) = to {
                    to.report(p);
                }
            }
            FromHost::Loaded(l) => {
                let mut loads = lock(&self.loads);
                match loads.get(&l.id) {
                    Some((key, _)) if *key == l.key => {
                        self.pongs.fetch_add(1, Ordering::Relaxed);
                        if let Some((_, tx)) = loads.remove(&l.id) {
                            let _ = tx.send(*l);
                        }
                    }
                    Some(_) => tracing::warn!(
                        pid = self.pid,
                        id = l.id,
                        "a load report without its load's key reached the daemon (a plugin writing to fd 4?); it was dropped"
                    ),
                    // A report for a load that outlived its timeout: nobody waits for it.
                    None => {}
                }
            }
            FromHost::Pong { n, key } if key == self.host_key => {
                self.pongs.fetch_add(1, Ordering::Relaxed);
                if n != 0 && n == self.awaited_pong.load(Ordering::Relaxed) {
                    self.ponged.store(true, Ordering::Relaxed);
                }
            }
            FromHost::Pong { .. } => {}
            FromHost::Stray(s) => self.stray(s),
            FromHost::Out(p) if p.key == self.host_key => printed(self.pid, &p),
            FromHost::Out(_) => {}
            FromHost::Ended(e) if e.key == self.host_key => {
                let clip = |t: String| t.chars().take(500).collect::<String>();
                *lock(&self.ended_at) = e.places.into_iter().take(32).map(clip).collect();
                if !e.how.is_empty() {
                    let how = crate::names::escape_controls(&clip(e.how), false).into_owned();
                    *lock(&self.ended_how) = Some(how);
                }
            }
            FromHost::Ended(_) => {}
            FromHost::Ready { v, node, .. } => {
                if let Some(tx) = lock(&self.ready).take() {
                    let _ = tx.send((v, node));
                }
            }
        }
    }
}

/// Ends the task-less calls whose deadline passed, sleeping until the next one; ends with the link.
async fn sweep_deadlines(link: std::sync::Weak<Link>, wake: Arc<tokio::sync::Notify>) {
    loop {
        let next = match link.upgrade() {
            Some(link) => link.sweep_due(),
            None => return,
        };
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

async fn read_lines(link: Arc<Link>, read: ReadHalf, max_line: usize) {
    // The host writes only UTF-8: other bytes are a plugin's, and the message after them is still read.
    let mut lines = FramedRead::new(read, CappedLines::lossy(max_line));
    while let Some(line) = lines.next().await {
        match line {
            Ok(Line::Text(line)) => match parse_resyncing(&line) {
                Some((msg, skipped)) => {
                    if skipped > 0 {
                        tracing::warn!(
                            pid = link.pid,
                            skipped,
                            "the plugin host's channel carried bytes that are not a protocol message before one; they were skipped"
                        );
                        refuse_damaged(&link, &line[..skipped]);
                    }
                    link.deliver(msg);
                }
                None => {
                    tracing::warn!(pid = link.pid, line = %line.chars().take(200).collect::<String>(), "the plugin host sent a line that is not a protocol message; it was skipped");
                    refuse_damaged(&link, &line);
                }
            },
            Ok(Line::NotUtf8) => {
                tracing::warn!(
                    pid = link.pid,
                    "the plugin host sent a protocol line that is not UTF-8; it was dropped"
                );
            }
            Ok(Line::TooLong(_) | Line::Crowded(_)) => {
                tracing::warn!(
                    pid = link.pid,
                    max_line,
                    "the plugin host sent a protocol line over the cap; it was dropped"
                );
            }
            Err(e) => {
                tracing::debug!(pid = link.pid, error = %e, "reading the plugin host's channel failed");
                break;
            }
        }
    }
}

/// Places a message may start at that are tried, from the line's end: junk a plugin wrote to fd 4 comes
/// before the host's message, so the message is a suffix, found first unless its own text holds such a
/// place. Every place tried costs a read of the rest of the line, so a line of nested openings
/// (`{"t":"pong","a":{"t":…`) cannot make the daemon's thread read it hundreds of times. Only places
/// that open with a tag the host writes count, so a schema's own `{"t": "v"}` objects are passed over.
const RESYNC_TRIES: usize = 4;

/// The openings of the messages the host writes (`FromHost`'s tags).
const OPENINGS: [&str; 7] = [
    "{\"t\":\"ready\"",
    "{\"t\":\"loaded\"",
    "{\"t\":\"answer\"",
    "{\"t\":\"progress\"",
    "{\"t\":\"pong\"",
    "{\"t\":\"stray\"",
    "{\"t\":\"ended\"",
];

/// A protocol message, read from the start of `line` or, when junk came before it (a plugin writing to
/// fd 4), from one of the last places a message starts; with how many bytes were skipped.
fn parse_resyncing(line: &str) -> Option<(FromHost, usize)> {
    // The host writes an answer's tag first: read it straight into its struct (which passes over the tag),
    // without the detour an internally tagged enum takes (every field buffered, then read again).
    if line.starts_with("{\"t\":\"answer\",") {
        if let Some(answer) = text_answer(line) {
            return Some((FromHost::Answer(Box::new(answer)), 0));
        }
        if let Ok(answer) = serde_json::from_str::<Answer>(line) {
            return Some((FromHost::Answer(Box::new(answer)), 0));
        }
    }
    if let Ok(msg) = serde_json::from_str::<FromHost>(line) {
        return Some((msg, 0));
    }
    line.rmatch_indices("{\"t\":\"")
        .map(|(at, _)| at)
        .filter(|at| *at > 0 && OPENINGS.iter().any(|o| line[*at..].starts_with(o)))
        .take(RESYNC_TRIES)
        .find_map(|at| {
            serde_json::from_str::<FromHost>(&line[at..])
                .ok()
                .map(|m| (m, at))
        })
}

/// The common answer (`{"t":"answer","id":N,"key":K,"text":"…"}`) with its text kept as the JSON string
/// the host wrote, when that is what serde_json would write for it: no escape but `\"`, `\\`, `\b`, `\f`,
/// `\n`, `\r` and `\t` (V8 and serde_json write those the same; a `\u` escape is the host's mending of a
/// lone surrogate, or somebody else's bytes, and takes the full read).
fn text_answer(line: &str) -> Option<Answer> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Text<'a> {
        #[serde(rename = "t")]
        _t: serde::de::IgnoredAny,
        id: u64,
        key: u64,
        #[serde(borrow)]
        text: &'a serde_json::value::RawValue,
    }
    let read: Text<'_> = serde_json::from_str(line).ok()?;
    let json = read.text.get();
    if !json.starts_with('"') || !escaped_as_serde_does(json.as_bytes()) {
        return None;
    }
    Some(Answer {
        id: read.id,
        key: read.key,
        text_json: Some(json.to_string()),
        ..Answer::default()
    })
}

fn escaped_as_serde_does(json: &[u8]) -> bool {
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'\\', &json[at..]) {
        let escape = at + found;
        match json.get(escape + 1) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => at = escape + 2,
            _ => return false,
        }
    }
    true
}

/// An answer broken by bytes that landed inside it: its caller hears so now, not at its deadline (the
/// key it carries still has to match).
fn refuse_damaged(link: &Link, text: &str) {
    for (id, key) in damaged_answers(text) {
        link.deliver(FromHost::Answer(Box::new(Answer {
            id,
            key,
            damaged: true,
            ..Answer::default()
        })));
    }
}

/// The id and key of each common answer that starts in `line` (`{"t":"answer","id":N,"key":K,`).
fn damaged_answers(line: &str) -> Vec<(u64, u64)> {
    const START: &str = "{\"t\":\"answer\",\"id\":";
    let number = |text: &str| -> Option<(u64, usize)> {
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        Some((text[..digits].parse().ok()?, digits))
    };
    line.match_indices(START)
        .filter_map(|(at, _)| {
            let rest = &line[at + START.len()..];
            let (id, n) = number(rest)?;
            let rest = rest[n..].strip_prefix(",\"key\":")?;
            let (key, _) = number(rest)?;
            Some((id, key))
        })
        .take(8)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link whose host end is the other half of a socket pair, kept open for the test.
    fn link() -> (
        Arc<Link>,
        std::os::unix::net::UnixStream,
        tokio::task::JoinHandle<()>,
    ) {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        let halves = crate::unix_io::split(ours).expect("the halves");
        let (link, _ready, reader) = Link::start(halves, 1, 1024, None, Default::default());
        (link, theirs, reader)
    }

    /// A call with no task of its own that reports how it ended on a channel.
    struct Told(tokio::sync::mpsc::UnboundedSender<String>);

    impl Settle for Told {
        fn end(self: Box<Self>, how: End) {
            let said = match how {
                End::Call(CallEnd::Answered(a)) => {
                    format!("answered {}", a.text().unwrap_or_default())
                }
                End::Call(CallEnd::HostStopped(_)) => "host stopped".into(),
                End::Call(CallEnd::NotReceived) => "not received".into(),
                End::Expired { .. } => "expired".into(),
                End::Cancelled => "cancelled".into(),
            };
            let _ = self.0.send(said);
        }
    }

    fn told() -> (Box<Told>, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Box::new(Told(tx)), rx)
    }

    /// A call registered as a task waiting on a channel registers it: its end, and its key.
    fn waiter(
        link: &Link,
        id: u64,
        file: Arc<str>,
    ) -> Option<(tokio::sync::oneshot::Receiver<End>, u64)> {
        struct Waits(tokio::sync::oneshot::Sender<End>);
        impl Settle for Waits {
            fn end(self: Box<Self>, how: End) {
                let _ = self.0.send(how);
            }
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let key = link.call_key();
        link.expect(
            id,
            (file, Arc::from("s")),
            key,
            far(),
            Box::new(Waits(tx)),
            None,
        )
        .ok()
        .map(|()| (rx, key))
    }

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(3600)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_with_no_task_is_told_its_answer_once_and_only_under_its_key() {
        use std::io::Write;
        let (link, mut host, _) = link();
        let (settle, mut heard) = told();
        let key = link.call_key();
        assert!(
            link.expect(
                7,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                key,
                far(),
                settle,
                None
            )
            .is_ok()
        );
        let wire = format!(
            "{{\"t\":\"answer\",\"id\":7,\"key\":{},\"text\":\"forged\"}}\n\
             {{\"t\":\"answer\",\"id\":7,\"key\":{key},\"text\":\"ok\"}}\n\
             {{\"t\":\"answer\",\"id\":7,\"key\":{key},\"text\":\"again\"}}\n",
            key ^ 1
        );
        host.write_all(wire.as_bytes()).expect("written");
        assert_eq!(heard.recv().await.as_deref(), Some("answered ok"));
        drop(host);
        // The settle was told once and dropped: nothing more can come.
        assert_eq!(heard.recv().await, None);
        assert_eq!(link.calls_waiting(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_call_with_no_task_is_ended_at_its_deadline_and_its_host_told_to_stop_it() {
        let (link, host, _) = link();
        let reading = std::thread::spawn(move || {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(&host), &mut line)
                .expect("a line");
            line
        });
        let (settle, mut heard) = told();
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        let key = link.call_key();
        assert!(
            link.expect(
                3,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                key,
                deadline,
                settle,
                None
            )
            .is_ok()
        );
        assert_eq!(heard.recv().await.as_deref(), Some("expired"));
        assert!(Instant::now() >= deadline, "not before its deadline");
        let line = tokio::task::spawn_blocking(move || reading.join().expect("read"))
            .await
            .expect("joined");
        assert_eq!(
            line,
            "{\"t\":\"cancel\",\"id\":3,\"why\":\"the call took longer than its deadline\",\"timeout\":true}\n"
        );
        assert_eq!(link.calls_waiting(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_deadline_sweeper_waits_for_a_first_deadline_after_finding_none() {
        let (link, _host, _) = link();
        let (first, mut first_heard) = told();
        let soon = Instant::now() + std::time::Duration::from_secs(1);
        assert!(
            link.expect(
                1,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                1,
                soon,
                first,
                None
            )
            .is_ok()
        );
        assert_eq!(first_heard.recv().await.as_deref(), Some("expired"));
        // The sweeper found nothing more and went idle: a new call must wake it.
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        let (second, mut second_heard) = told();
        let later = Instant::now() + std::time::Duration::from_secs(2);
        assert!(
            link.expect(
                2,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                2,
                later,
                second,
                None
            )
            .is_ok()
        );
        assert_eq!(second_heard.recv().await.as_deref(), Some("expired"));
        assert!(Instant::now() >= later);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_deadline_earlier_than_those_queued_is_kept_all_the_same() {
        let (link, _host, _) = link();
        let (late, mut late_heard) = told();
        assert!(
            link.expect(
                1,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                1,
                far(),
                late,
                None
            )
            .is_ok()
        );
        // The sweeper sleeps until the first deadline; a second, sooner, must wake it.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let (soon, mut soon_heard) = told();
        let at = Instant::now() + std::time::Duration::from_secs(2);
        assert!(
            link.expect(
                2,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                2,
                at,
                soon,
                None
            )
            .is_ok()
        );
        assert_eq!(soon_heard.recv().await.as_deref(), Some("expired"));
        assert!(late_heard.try_recv().is_err(), "the later one still waits");
        assert_eq!(link.calls_waiting(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_withdrawn_call_is_given_back_untold_and_its_answer_dropped() {
        use std::io::Write;
        let (link, mut host, reader) = link();
        let (settle, mut heard) = told();
        assert!(
            link.expect(
                9,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                5,
                far(),
                settle,
                None
            )
            .is_ok()
        );
        let back = link.withdraw(9).expect("it was waiting");
        assert!(link.withdraw(9).is_none(), "given back once");
        host.write_all(b"{\"t\":\"answer\",\"id\":9,\"key\":5,\"text\":\"late\"}\n")
            .expect("written");
        drop(host);
        reader.await.expect("the reader ends");
        assert!(heard.try_recv().is_err(), "nothing was told");
        back.end(End::Cancelled);
        assert_eq!(heard.recv().await.as_deref(), Some("cancelled"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_with_no_task_its_host_never_received_is_told_so() {
        let (link, host, reader) = link();
        drop(host);
        reader.await.expect("the reader ends");
        let (settle, mut heard) = told();
        assert!(
            link.expect(
                4,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                8,
                far(),
                settle,
                None
            )
            .is_ok()
        );
        let _ = link.send_line(
            ToHost::Call {
                id: 4,
                tool: "p",
                args: "{}",
                seat: "s",
                role: "Worker",
                progress: false,
                key: 8,
                traceparent: None,
            }
            .line(),
        );
        // The writer finds the pipe closed: the call's line never reached the host whole.
        link.unreachable().await;
        link.fail_all(&Arc::new(HostEnd::Replaced));
        assert_eq!(heard.recv().await.as_deref(), Some("not received"));
        let (late, _) = told();
        assert!(
            link.expect(
                5,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                9,
                far(),
                late,
                None
            )
            .is_err(),
            "a link whose calls were answered for its end takes no more"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn calls_that_ended_do_not_pile_up_behind_a_long_one() {
        let (link, _host, _) = link();
        let (long, _long_heard) = told();
        assert!(
            link.expect(
                1,
                (Arc::from("plugins/p.mjs"), Arc::from("s")),
                1,
                far(),
                long,
                None
            )
            .is_ok()
        );
        for id in 2..10_000u64 {
            let (settle, _) = told();
            assert!(
                link.expect(
                    id,
                    (Arc::from("plugins/p.mjs"), Arc::from("s")),
                    id,
                    far(),
                    settle,
                    None
                )
                .is_ok()
            );
            assert!(link.withdraw(id).is_some());
        }
        let kept = lock(&link.calls).deadlines.len();
        assert!(
            kept <= 2 + 64 + 1,
            "{kept} deadlines kept for one call waiting"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn each_call_gets_its_own_random_key() {
        let (link, _host, _) = link();
        let file: Arc<str> = Arc::from("plugins/p.mjs");
        let (_, first) = waiter(&link, 7, file.clone()).expect("the link takes calls");
        link.withdraw(7);
        let (_, again) = waiter(&link, 7, file.clone()).expect("the link takes calls");
        assert_ne!(first, again, "a key is not a function of the call's id");
        assert!(
            first < 1 << 53 && again < 1 << 53,
            "keys fit a JavaScript number"
        );
        let keys: std::collections::HashSet<u64> = (100..300)
            .map(|id| waiter(&link, id, file.clone()).expect("taken").1)
            .collect();
        assert_eq!(keys.len(), 200, "keys of different calls differ");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_broken_on_the_wire_reaches_its_caller_as_damaged_and_a_forged_one_does_not()
    {
        use std::io::Write;
        let (link, mut host, reader) = link();
        let file: Arc<str> = Arc::from("plugins/p.mjs");
        let (broken, key) = waiter(&link, 3, file.clone()).expect("taken");
        let (forged, _) = waiter(&link, 4, file).expect("taken");
        // Junk lands inside call 3's answer; call 4's "answer" carries a key it guessed.
        let wire = format!(
            "{{\"t\":\"answer\",\"id\":3,\"key\":{key},\"text\":\"ab{nul}junk\"junk\"}}\n\
             {{\"t\":\"answer\",\"id\":4,\"key\":1,\"text\":\"forged\"}}\n",
            nul = '\u{0}'
        );
        host.write_all(wire.as_bytes()).expect("written");
        let Ok(End::Call(CallEnd::Answered(answer))) = broken.await else {
            panic!("the broken answer reaches its caller");
        };
        assert!(answer.damaged && answer.id == 3 && answer.text().is_none());
        drop(host);
        // The reader ends at the end of the wire, having read every line.
        reader.await.expect("the reader ends");
        let end = link.fail_all(&Arc::new(HostEnd::Replaced));
        assert_eq!(end.len(), 1, "call 4 was still waiting when its host ended");
        assert!(matches!(
            forged.await,
            Ok(End::Call(CallEnd::HostStopped(_)))
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_cut_off_by_its_hosts_end_is_the_hosts_end_not_a_damaged_answer() {
        use std::io::Write;
        let (link, mut host, reader) = link();
        let file: Arc<str> = Arc::from("plugins/p.mjs");
        let (call, key) = waiter(&link, 5, file).expect("taken");
        // The host dies in the middle of writing the answer.
        let cut = format!("{{\"t\":\"answer\",\"id\":5,\"key\":{key},\"text\":\"the first half");
        host.write_all(cut.as_bytes()).expect("written");
        drop(host);
        reader.await.expect("the reader ends");
        link.fail_all(&Arc::new(HostEnd::Replaced));
        assert!(
            matches!(call.await, Ok(End::Call(CallEnd::HostStopped(_)))),
            "the call is answered for its host's end"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_link_whose_calls_were_answered_for_its_end_takes_no_more() {
        let (link, _host, _) = link();
        let file: Arc<str> = Arc::from("plugins/p.mjs");
        let (waiting, _) = waiter(&link, 1, file.clone()).expect("taken");
        let files = link.fail_all(&Arc::new(HostEnd::Replaced));
        assert_eq!(files, vec![file.clone()]);
        assert!(matches!(
            waiting.await,
            Ok(End::Call(CallEnd::HostStopped(_)))
        ));
        assert!(
            waiter(&link, 2, file).is_none(),
            "a call registered after the end would wait for its deadline"
        );
    }

    #[test]
    fn an_answer_broken_by_junk_inside_it_is_still_named() {
        let line =
            "junk{\"t\":\"answer\",\"id\":12,\"key\":3456,\"text\":\"ab\u{0}junk\"junk cd\"}";
        assert!(parse_resyncing(line).is_none());
        assert_eq!(damaged_answers(line), vec![(12, 3456)]);
        assert!(damaged_answers("{\"t\":\"answer\",\"id\":x,\"key\":1").is_empty());
    }

    #[test]
    fn answers_read_straight_and_through_the_enum_are_the_same() {
        let line = r#"{"t":"answer","id":4,"key":77,"text":"a \"b\" é"}"#;
        let (Some((FromHost::Answer(fast), 0)), Ok(FromHost::Answer(slow))) = (
            parse_resyncing(line),
            serde_json::from_str::<FromHost>(line),
        ) else {
            panic!("both read an answer");
        };
        assert_eq!((fast.id, fast.key), (slow.id, slow.key));
        // The common answer's text stays the JSON string it came as, and reads back as the enum reads it.
        let json = fast.text_json.as_deref().expect("kept as it came");
        assert_eq!(json, r#""a \"b\" é""#);
        assert_eq!(Some(crate::host::protocol::json_text(json)), slow.text);
        assert!(fast.text.is_none());
    }

    #[test]
    fn an_answer_keeps_its_text_as_json_only_when_serde_would_write_it_so() {
        for (text, kept) in [
            (r#""plain""#, true),
            (r#""tab\t nl\n cr\r bs\\ q\" ff\f b\b""#, true),
            (r#""""#, true),
            // The host's mending of a lone surrogate, and escapes V8 never writes, are read in full.
            (r#""\ufffd""#, false),
            (r#""\u0001""#, false),
            (r#""a\/b""#, false),
        ] {
            let line = format!(r#"{{"t":"answer","id":1,"key":2,"text":{text}}}"#);
            let Some((FromHost::Answer(a), 0)) = parse_resyncing(&line) else {
                panic!("an answer: {line}");
            };
            let slow: Answer = serde_json::from_str(&line).unwrap();
            assert_eq!(a.text_json.is_some(), kept, "{line}");
            let read = a
                .text_json
                .as_deref()
                .map(crate::host::protocol::json_text)
                .or(a.text);
            assert_eq!(read, slow.text, "{line}");
            if kept {
                assert_eq!(
                    a.text_json.as_deref(),
                    Some(serde_json::to_string(&slow.text.unwrap()).unwrap().as_str())
                );
            }
        }
        // Anything beside the text (a refusal, a field of another kind) takes the full read.
        let refused = parse_resyncing(r#"{"t":"answer","id":1,"key":2,"refused":"no"}"#);
        assert!(
            matches!(refused, Some((FromHost::Answer(a), 0)) if a.text_json.is_none() && a.refused.as_deref() == Some("no"))
        );
    }

    #[test]
    fn a_message_after_junk_is_still_read() {
        let (msg, skipped) =
            parse_resyncing("garbage-without-newline{\"t\":\"pong\",\"n\":3,\"key\":9}").unwrap();
        assert!(matches!(msg, FromHost::Pong { n: 3, .. }));
        assert_eq!(skipped, 23);
        assert!(parse_resyncing("{\"t\":\"nope\"").is_none());
    }
}
