//! `ovai mcp`: the stdio bridge, in the session's own process. An MCP client starts it from a seat's
//! desk; it connects to the daemon, presents the seat's secret, and relays MCP lines both ways.
//!
//! MCP clients do not restart a stdio server by themselves, so the bridge outlives the daemon: when the
//! socket closes, it keeps the client's pipes open, answers every request that was in flight (an
//! `isError` result for a tool call, a JSON-RPC error otherwise: never silence), reconnects with backoff,
//! replays the client's `initialize` to the new daemon (and swallows its answer), re-opens any
//! `subscriptions/listen` stream, and tells the client the tool list may have changed. If no daemon comes
//! back in time, or the new one refuses the seat, it answers what is waiting, and every request from then
//! on, with why, and exits non-zero with its client.
//!
//! When it cannot connect at all, it still answers: the client's first request gets a JSON-RPC error
//! carrying the sentence, the sentence goes to stderr, and it exits 1.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{self, ClientError};
use crate::instance::{self, Instance};
use crate::jsonrpc::{self, MAX_LINE, Read as Message};
use crate::sync::lock;
use crate::wire;

/// The room kept for the client's lines that arrive together.
const BATCH_ROOM: usize = 64 * 1024;
/// How long the bridge waits for the daemon's welcome: a daemon still loading many plugins answers late.
const WELCOME_PATIENCE: Duration = Duration::from_secs(60);
/// How long a welcome is waited for from a server still reading its plugins before the bridge looks
/// again (and says, the first time, that it waits).
const STARTING_LOOK: Duration = Duration::from_secs(5);
/// How long the bridge waits for a daemon to come back (`OVAI_RECONNECT_SECONDS` overrides it).
const DEFAULT_RECONNECT: Duration = Duration::from_secs(30);
/// How long a bridge started before any daemon waits for one (`OVAI_CONNECT_SECONDS` overrides it): at
/// boot, sessions can start before the service.
const DEFAULT_CONNECT: Duration = Duration::from_secs(10);
/// How often a refused session looks for a daemon that takes it again, as its client sends requests.
const REVIVE_EVERY: Duration = Duration::from_secs(1);
/// How long a refused session's request waits for a daemon's welcome when it looks for one.
const REVIVE_PATIENCE: Duration = Duration::from_secs(2);
/// How the id the replayed `initialize` carries begins; a random part follows, so that no id a client
/// sends is taken for it (its answer is recognised by it and kept from the client).
const REPLAY_ID: &str = "ovai-bridge-replay";

pub fn run() -> i32 {
    relay_in_batches();
    own_mappings();
    let target = match Target::from_env() {
        Ok(t) => t,
        Err(sentence) => return fail(&sentence),
    };
    match target.connect_patiently() {
        Ok(link) => Bridge::new(target).relay(link),
        Err(e) => fail(&e.to_string()),
    }
}

/// Every allocation of a megabyte or more (a client's long line) is a mapping of its own, unmapped when
/// it is dropped. glibc otherwise raises that bound to the largest block freed, and the next long line
/// lands in a thread's heap, whose free top it keeps (24 MB held for good after three lines of 15 MiB).
fn own_mappings() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's parameters; no other thread has started yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// The bridge's threads (the one made later inherits it) run as `SCHED_BATCH` (`sched`): a client writing
/// several requests in a row, or the daemon answering several sessions at once, goes on until it waits,
/// and the bridge then takes what came in one read. Where every CPU is busy, a message may wait for the
/// running process's slice (milliseconds). `OVAI_BRIDGE_BATCH=0` keeps the policy the bridge was started
/// with.
fn relay_in_batches() {
    if let Some(said) = crate::sched::batch_as_asked(
        "OVAI_BRIDGE_BATCH",
        "the bridge's threads keep the policy they were started with",
    ) {
        eprintln!("ovai mcp: {said}");
    }
}

/// Seconds from an environment variable, or the default (with a sentence on stderr when it is not a number).
fn seconds_from_env(name: &str, default: Duration) -> Duration {
    match std::env::var(name) {
        Err(_) => default,
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(n) => Duration::from_secs(n),
            Err(_) => {
                eprintln!(
                    "ovai mcp: {name} is {text:?}, not a whole number of seconds; using {} s.",
                    default.as_secs()
                );
                default
            }
        },
    }
}

/// Where the bridge connects, and as whom.
struct Target {
    inst: Instance,
    secret: String,
    /// How long to wait for a daemon that is not there yet at start.
    connect: Duration,
    /// How long to wait for a daemon to come back after it went away.
    reconnect: Duration,
}

impl Target {
    fn from_env() -> Result<Self, String> {
        let secret = std::env::var("OVAI_SECRET").ok().filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            "OVAI_SECRET is not set. `ovai mcp` is started by an MCP client from a seat's desk, whose .mcp.json \
             sets it; `ovai seat add NAME` writes one."
                .to_string()
        })?;
        let inst = instance::find_root(None).map_err(|e| e.to_string())?;
        Ok(Self {
            inst,
            secret,
            connect: seconds_from_env("OVAI_CONNECT_SECONDS", DEFAULT_CONNECT),
            reconnect: seconds_from_env("OVAI_RECONNECT_SECONDS", DEFAULT_RECONNECT),
        })
    }

    /// Connects, waiting up to `connect` for a daemon that is not running yet, or for the next one when
    /// the one there went as it took the connection (a session started during a restart); the client's
    /// first request waits in the pipe meanwhile and is answered once connected. A refusal is final.
    /// A server still reading its plugins (bad files can take it a minute or more) takes the connection
    /// and answers once it serves: it is waited for as long as it reads, and said to be, never taken for
    /// a stuck one.
    fn connect_patiently(&self) -> Result<DaemonEnd, ClientError> {
        let deadline = Instant::now() + self.connect;
        let mut wait = Duration::from_millis(20);
        let mut told = false;
        // On the one connection, a look every STARTING_LOOK while the server says it is starting.
        let mut still_starting = || {
            let starting = self.starting();
            if starting && !told {
                eprintln!(
                    "ovai mcp: the ovai server for {} is starting (reading its plugins); this session waits \
                     for it (`ovai status` says how long it has been reading).",
                    self.inst.root.display()
                );
                told = true;
            }
            starting
        };
        loop {
            let patience = if self.starting() {
                STARTING_LOOK
            } else {
                WELCOME_PATIENCE
            };
            match self.connect_waiting(patience, &mut still_starting) {
                Err(e) if e.may_pass() && Instant::now() < deadline => {}
                other => return other,
            }
            std::thread::sleep(wait.min(deadline.saturating_duration_since(Instant::now())));
            wait = (wait * 2).min(Duration::from_millis(500));
        }
    }

    fn connect(&self) -> Result<DaemonEnd, ClientError> {
        self.connect_within(WELCOME_PATIENCE)
    }

    /// Whether a server is reading its plugins, before it serves.
    fn starting(&self) -> bool {
        client::marked(&self.inst, &self.inst.starting_marker()).is_some()
    }

    /// Connects, waiting up to `patience` for the daemon's welcome.
    fn connect_within(&self, patience: Duration) -> Result<DaemonEnd, ClientError> {
        self.connect_waiting(patience, &mut || false)
    }

    /// Connects, waiting `patience` for the daemon's welcome, and as long again each time
    /// `keep_waiting` says to.
    fn connect_waiting(
        &self,
        patience: Duration,
        keep_waiting: &mut dyn FnMut() -> bool,
    ) -> Result<DaemonEnd, ClientError> {
        let mut stream = client::connect(&self.inst)?;
        match client::hello_seat_over_pipes(
            &self.inst,
            &mut stream,
            &self.secret,
            patience,
            keep_waiting,
        )? {
            Some(pipes) => Ok(DaemonEnd {
                up: pipes.write,
                down: Down::Pipe(pipes.read),
                _socket: Some(stream),
            }),
            None => Ok(DaemonEnd {
                up: std::os::fd::OwnedFd::from(stream.try_clone()?).into(),
                down: Down::Socket(stream),
                _socket: None,
            }),
        }
    }
}

/// The daemon's end of the session: two pipes its welcome handed over, or the socket itself (a daemon
/// that makes none).
struct DaemonEnd {
    up: File,
    down: Down,
    /// Kept open, unused, beside the pipes: the daemon tells this process's death (the socket closes
    /// whole) from its closing only its side, which a pipe cannot tell.
    _socket: Option<UnixStream>,
}

/// Where the daemon's lines come from.
enum Down {
    Pipe(File),
    Socket(UnixStream),
}

impl Read for Down {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            // A read blocked on a pipe wakes only for what is written to it.
            Down::Pipe(pipe) => pipe.read(buf),
            Down::Socket(socket) => WaitForData(socket).read(buf),
        }
    }
}

/// Ends the daemon's input: a socket is shut for writing (its reading side still brings answers), a
/// pipe closed, its one descriptor.
fn close_writing(up: File) {
    use std::os::fd::AsRawFd;
    let _ = nix::sys::socket::shutdown(up.as_raw_fd(), nix::sys::socket::Shutdown::Write);
}

/// What the bridge knows of the session, shared by the thread reading the client and the one reading
/// the daemon.
#[derive(Default)]
struct Session {
    /// Requests sent to the daemon and not yet answered: id (as JSON text) → what they are.
    pending: HashMap<String, Pending>,
    /// The client's `initialize` request, replayed to a new daemon.
    initialize: Option<Vec<u8>>,
    /// Whether the daemon answered it (if not, the replay carries the client's own id).
    initialize_answered: bool,
    initialized: Option<Vec<u8>>,
    /// Open `subscriptions/listen` requests (2026-07-28), re-sent to a new daemon: id → line.
    listens: HashMap<String, Vec<u8>>,
    /// The listens whose acknowledgement reached the client. A new daemon acknowledges them again,
    /// which the client must not see: MCP has a stream acknowledged once, before all else on it.
    acked: HashSet<String>,
    /// The client closed its side: nothing more will come, and the bridge ends with the daemon's answers.
    client_done: bool,
    /// Why no daemon will take this session's lines now (the seat's secret changed, no daemon came
    /// back): each request is answered with it, unless a daemon takes the session again (`revive`), and
    /// the bridge ends with its client.
    refused: Option<String>,
    /// The refusal is the server's (a secret it does not take): only a session started again, which
    /// reads the desk's secret anew, reaches it. Else (no server came back) the next request may.
    for_good: bool,
    /// When a refused session last looked for a daemon.
    looked: Option<Instant>,
    /// How many times a refused session was taken up again: a relay that gave up tells by it that
    /// another carries the session now.
    era: u64,
}

impl Session {
    /// The client is gone and nothing it asked waits for an answer but streams (`subscriptions/listen`),
    /// which never end by themselves: the bridge has nothing left to do.
    fn finished(&self) -> bool {
        self.client_done && self.pending.keys().all(|k| self.listens.contains_key(k))
    }
}

impl Session {
    /// The requests a refusal answers: all waiting but the listen streams, which stay open unless
    /// the refusal is for good (then they end too).
    fn take_answerable(&mut self, for_good: bool) -> Vec<(String, Pending)> {
        if for_good {
            self.listens.clear();
            self.acked.clear();
        }
        let listens = &self.listens;
        let (kept, cut): (Vec<_>, Vec<_>) = self
            .pending
            .drain()
            .partition(|(k, _)| listens.contains_key(k));
        self.pending.extend(kept);
        cut
    }

    /// Every request waiting for its answer.
    fn pending(&mut self) -> &mut HashMap<String, Pending> {
        &mut self.pending
    }

    /// Notes a request, as the daemon reads it.
    fn apply(&mut self, line: &[u8], noted: Noted) {
        let Noted {
            method,
            key,
            revision,
            cancels,
        } = noted;
        // A notification has no id, and a message with one is a request whatever its method says: the
        // daemon answers it, and it neither stands for the session's `initialized` nor cancels anything.
        match (method.as_str(), &key) {
            ("initialize", Some(_)) => self.initialize = Some(line.to_vec()),
            ("notifications/initialized", None) => self.initialized = Some(line.to_vec()),
            // A request the client cancelled gets no answer (MCP): it is not waited for any more, when
            // the daemon takes the line for a cancellation, and not otherwise.
            ("notifications/cancelled", None) => {
                if let Some(key) = cancels
                    && settle(&mut self.pending, &key).is_some()
                {
                    self.listens.remove(&key);
                    self.acked.remove(&key);
                }
            }
            _ => {}
        }
        let Some(key) = key else {
            return;
        };
        // A second listen under an id still open is refused: the first one's line is the one kept.
        if method == "subscriptions/listen" && !self.listens.contains_key(&key) {
            self.listens.insert(key.clone(), line.to_vec());
        }
        note(&mut self.pending, key, Pending::new(method, revision));
    }

    /// The daemon answered under `key`: the request that answer is for waits no more. Given back when
    /// this was its last answer.
    fn settle_answer(&mut self, key: &str) -> Option<Pending> {
        settle(&mut self.pending, key)
    }
}

/// What a line has the bridge note: a request under the id the daemon answers it under, or a
/// notification.
struct Noted {
    method: String,
    key: Option<String>,
    /// The revision it was sent under.
    revision: Revision,
    /// For a cancellation: the request it cancels.
    cancels: Option<String>,
}

/// The daemon's end of the connection, and what the client sent while there was none.
#[derive(Default)]
struct Upstream {
    stream: Option<File>,
    queued: Vec<Vec<u8>>,
}

struct Bridge {
    target: Target,
    /// Held while a write to the client is under way, so an exit never cuts a line in two; and from
    /// taking requests off those waiting to writing their answers, so nothing waiting means nothing owed.
    writing: Mutex<()>,
    session: Mutex<Session>,
    upstream: Mutex<Upstream>,
    /// The replayed `initialize`'s id, as it stands in a line of JSON.
    replay_key: String,
}

/// A request in flight, as much as the bridge needs to answer it itself.
#[derive(Debug, Clone)]
struct Pending {
    method: std::borrow::Cow<'static, str>,
    revision: Revision,
    /// How many more requests under the same id wait for their answers: a client that sends an id
    /// still in flight is refused under it, and that refusal must not count as the first one's answer.
    more: u32,
}

impl Pending {
    fn new(method: impl Into<std::borrow::Cow<'static, str>>, revision: Revision) -> Self {
        Self {
            method: method.into(),
            revision,
            more: 0,
        }
    }
}

/// Whether a call was sent under 2026-07-28 or later, whose results carry `resultType`. A call's params
/// are read for it only when the daemon goes away with the call: reading Claude Code's `_meta` on every
/// call was a quarter of the bridge's time, for an answer it almost never makes.
#[derive(Debug, Clone)]
enum Revision {
    Known(bool),
    /// A call's params, kept up to `KEPT_PARAMS` bytes.
    InParams(Box<str>),
}

/// The largest params kept to be read later; larger ones are read at once.
const KEPT_PARAMS: usize = 16 * 1024;

impl Revision {
    fn of_call(params: Option<&serde_json::value::RawValue>) -> Self {
        match params {
            Some(p) if p.get().len() <= KEPT_PARAMS => Revision::InParams(p.get().into()),
            p => Revision::Known(is_modern(p.map(|p| p.get()))),
        }
    }

    fn is_modern(&self) -> bool {
        match self {
            Revision::Known(modern) => *modern,
            Revision::InParams(params) => is_modern(Some(params)),
        }
    }
}

/// Notes a request under `key`, beside any already waiting under it.
fn note(pending: &mut HashMap<String, Pending>, key: String, p: Pending) {
    match pending.get_mut(&key) {
        Some(waiting) => waiting.more = waiting.more.saturating_add(1),
        None => {
            pending.insert(key, p);
        }
    }
}

/// One request under `key` is answered (or cancelled, which gets no answer); the entry goes with the
/// last of them, and is given back then.
fn settle(pending: &mut HashMap<String, Pending>, key: &str) -> Option<Pending> {
    match pending.get_mut(key) {
        Some(waiting) if waiting.more > 0 => {
            waiting.more -= 1;
            None
        }
        Some(_) => pending.remove(key),
        None => None,
    }
}

/// The first protocol revision without `initialize`, whose every result says `resultType`.
const MODERN: &str = "2026-07-28";

impl Bridge {
    fn new(target: Target) -> Arc<Self> {
        let mut random = [0u8; 8];
        // Without the OS's randomness the time still makes an id no client has chosen.
        if getrandom::fill(&mut random).is_err() {
            random = std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                Instant::now(),
            )
            .to_le_bytes();
        }
        let replay_id = format!("{REPLAY_ID}-{:016x}", u64::from_le_bytes(random));
        Arc::new(Self {
            target,
            writing: Mutex::new(()),
            session: Mutex::new(Session::default()),
            upstream: Mutex::new(Upstream::default()),
            replay_key: Value::String(replay_id).to_string(),
        })
    }

    fn relay(self: Arc<Self>, link: DaemonEnd) -> i32 {
        let DaemonEnd { up, down, _socket } = link;
        lock(&self.upstream).stream = Some(up);
        let reader = self.clone();
        std::thread::spawn(move || reader.read_client());
        self.relay_from(down, _socket)
    }

    /// Daemon → client, and a daemon found again each time one goes, until the client is done (the exit
    /// code) or none will take the session (then the reader answers, and this waits for the end).
    fn relay_from(&self, mut down: Down, mut socket: Option<UnixStream>) -> i32 {
        // SAFETY: fd 1 is this process's stdout for its whole life; ManuallyDrop keeps it open.
        let mut stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        loop {
            let era = lock(&self.session).era;
            self.read_daemon(&mut down, &mut stdout);
            // A daemon that ended the session on purpose took nothing after its last answer: what is
            // still waiting was not made, and nothing of this session will be.
            let farewell = socket.as_mut().and_then(farewell_on);
            if lock(&self.session).client_done {
                // The client sent all it will: nothing goes to a next daemon, but whatever this one left
                // unanswered still gets an answer.
                let take = || lock(&self.session).pending().drain().collect();
                match &farewell {
                    Some(why) => self
                        .answer_taken(&mut stdout, take, |id, p| refused_answer(id, p, why, true)),
                    None => self.answer_taken(&mut stdout, take, interrupted_answer),
                }
                return 0;
            }
            let next = match farewell {
                Some(why) => {
                    lock(&self.upstream).stream = None;
                    Err(self.give_up(&mut stdout, &why, true))
                }
                None => self.reconnect(&mut stdout),
            };
            match next {
                Ok((next, next_socket)) => {
                    down = next;
                    drop(std::mem::replace(&mut socket, next_socket));
                }
                Err(code) => {
                    let s = lock(&self.session);
                    // Taken up again meanwhile (this relay slow to get here: its stderr not read): the
                    // revival's relay carries the session on.
                    if s.era != era {
                        drop((s, down, socket));
                        loop {
                            std::thread::park();
                        }
                    }
                    if s.refused.is_none() || s.client_done {
                        return code;
                    }
                    drop(s);
                    // The reader answers what the client still sends, in the refusal's words (a client
                    // shows a tool's answer to its model, where a closed connection says nothing), and
                    // ends the bridge with the client.
                    // Once nobody reads its answers (the client gone, its stdin held by another
                    // process), it ends all the same.
                    self.exit_once_unread();
                    loop {
                        std::thread::park();
                    }
                }
            }
        }
    }

    /// Client → daemon, line by line, noting what waits for an answer.
    fn read_client(self: Arc<Self>) {
        // SAFETY: fd 0 is this process's stdin for its whole life; ManuallyDrop keeps it open.
        let stdin = ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
        let mut input = BufReader::with_capacity(64 * 1024, Blocking(&stdin));
        // The lines that arrived together, one after another, and where each ends.
        let mut batch: Vec<u8> = Vec::with_capacity(BATCH_ROOM);
        let mut ends: Vec<usize> = Vec::new();
        loop {
            let over = match read_capped(&mut input, &mut batch) {
                Ok(Got::End) | Err(_) => break,
                Ok(Got::Line) => {
                    ends.push(batch.len());
                    None
                }
                Ok(Got::Over(skeleton)) => Some(skeleton),
            };
            if over.is_none() && has_line(input.buffer()) {
                continue;
            }
            if !batch.is_empty() {
                self.send_on(&batch, &ends);
            }
            batch.clear();
            ends.clear();
            // A line of megabytes leaves its room behind: given back (`own_mappings`), not kept for
            // the small lines that follow.
            if batch.capacity() > BATCH_ROOM {
                batch = Vec::with_capacity(BATCH_ROOM);
            }
            // A line over the daemon's cap is answered here as the daemon answers one, rather than
            // held whole and sent on to be skipped there.
            if let Some(answer) =
                over.and_then(|skeleton| jsonrpc::overlong_answer(skeleton.as_deref()))
            {
                // SAFETY: fd 1 is this process's stdout for its whole life; ManuallyDrop keeps it open.
                let mut stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
                self.write_out(&mut stdout, &[answer.as_slice(), b"\n"].concat());
            }
        }
        let finished = {
            let mut s = lock(&self.session);
            s.client_done = true;
            s.finished()
        };
        if finished {
            self.exit();
        }
        if let Some(up) = lock(&self.upstream).stream.take() {
            // Half-close: the daemon sees end-of-input and finishes what it holds; answers still flow back.
            close_writing(up);
        }
        self.exit_once_unread();
    }

    /// Sends the lines that arrived together on in one write. Noting the requests and choosing between
    /// sending and queueing happen under the upstream lock, as `reconnect` drains what is pending under
    /// it: a request is either in flight on the old daemon or queued for the next.
    fn send_on(self: &Arc<Self>, batch: &[u8], ends: &[usize]) {
        let mut up = lock(&self.upstream);
        // Refused (set under this lock): unless a daemon takes the session again now, each line is
        // answered here, in order.
        if self.refusal().is_some() {
            drop(up);
            match self.revive() {
                Ok(()) => up = lock(&self.upstream),
                Err((why, for_good)) => return self.refuse(batch, ends, &why, for_good),
            }
        }
        for line in lines_of(batch, ends) {
            self.note_request(line);
        }
        match up.stream.as_mut() {
            // A failed write means the daemon just went: what it may have read it may have run, so
            // these stay in flight and are answered as interrupted, never sent to the next daemon.
            Some(s) => {
                let _ = s.write_all(batch);
            }
            // No daemon now: kept for the next one, which is the first to see them; or, with none to
            // come, answered here and now. A request cancelled while kept never starts: both go.
            None => {
                for line in lines_of(batch, ends) {
                    if let Some(Noted {
                        cancels: Some(key),
                        key: None,
                        ..
                    }) = read_request(line)
                    {
                        // One line, as the cancel settled one request under its id.
                        let held = up.queued.iter().rposition(|q| {
                            read_request(q).is_some_and(|n| n.key.as_deref() == Some(key.as_str()))
                        });
                        if let Some(i) = held {
                            up.queued.remove(i);
                            continue;
                        }
                    }
                    up.queued.push(line.to_vec());
                }
            }
        }
    }

    /// Answers each line as no daemon will, in order, in the refusal's words: a request under its id, a
    /// line that is none (not JSON, a batch, an id the daemon does not take) under `null`, as the daemon
    /// answers such a line under null; a notification not at all. Ends the bridge once its client no
    /// longer reads.
    fn refuse(&self, batch: &[u8], ends: &[usize], why: &str, for_good: bool) {
        let mut out = Vec::new();
        for line in lines_of(batch, ends) {
            let answer = match read_request(line) {
                // A notification is noted (a cancelled listen stream is not opened again), never
                // answered.
                Some(noted @ Noted { key: None, .. }) => {
                    lock(&self.session).apply(line, noted);
                    continue;
                }
                Some(Noted {
                    key: Some(key),
                    method,
                    revision,
                    ..
                }) => refused_answer(&key, &Pending::new(method, revision), why, for_good),
                None if response_id(line).is_some() || line.iter().all(u8::is_ascii_whitespace) => {
                    continue;
                }
                None => refused_answer(
                    "null",
                    &Pending::new("request", Revision::Known(false)),
                    why,
                    for_good,
                ),
            };
            out.extend_from_slice(answer.to_string().as_bytes());
            out.push(b'\n');
        }
        // SAFETY: fd 1 is this process's stdout for its whole life; ManuallyDrop keeps it open.
        let stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        let written = {
            let _writing = lock(&self.writing);
            Blocking(&stdout).write_all(&out).is_ok()
        };
        if !written {
            self.exit();
        }
    }

    /// With its input ended and answers still owed, a client may still be reading them (a pipe of
    /// requests); once nobody is (stdout's reader closed: the client is gone), the bridge ends at once
    /// rather than with the last call, and the daemon, seeing the connection close, stops those calls.
    fn exit_once_unread(&self) {
        loop {
            match reader_gone(nix::poll::PollTimeout::NONE) {
                Some(true) => self.exit(),
                Some(false) => {}
                None => return,
            }
        }
    }

    /// A refused session looks for a daemon that takes it again, at most every REVIVE_EVERY, as its
    /// client sends something (a server started again after the bridge gave up, seats.json made again
    /// by `ovai seat rebuild`): found, the session goes on there, and a relay of its own reads it; else
    /// the reason to answer with, as it is now.
    fn revive(self: &Arc<Self>) -> Result<(), (String, bool)> {
        let refused = || {
            let s = lock(&self.session);
            (s.refused.clone().unwrap_or_default(), s.for_good)
        };
        {
            let mut s = lock(&self.session);
            // Refused for good, only the session started again gets in, as its words say.
            if s.for_good || s.looked.is_some_and(|at| at.elapsed() < REVIVE_EVERY) {
                drop(s);
                return Err(refused());
            }
            s.looked = Some(Instant::now());
        }
        // A daemon that is there and silent (stopped, stuck) holds the request a moment only.
        let link = match self.target.connect_within(REVIVE_PATIENCE) {
            Ok(link) => link,
            Err(e) => {
                let inst = &self.target.inst;
                // One still reading its plugins is no stuck one.
                let why = match e {
                    ClientError::Silent { .. } if self.target.starting() => {
                        format!(
                            "the ovai server for {} is starting (reading its plugins)",
                            inst.root.display()
                        )
                    }
                    ref e => e.to_string(),
                };
                let now_for_good = for_good(&e);
                let ended = {
                    let mut s = lock(&self.session);
                    (s.refused, s.for_good) = (Some(why.clone()), now_for_good);
                    // Refused for good now: the listen streams kept open end, with the refusal.
                    if now_for_good {
                        s.take_answerable(true)
                    } else {
                        Vec::new()
                    }
                };
                if !ended.is_empty() {
                    // SAFETY: fd 1 is this process's stdout for its whole life; ManuallyDrop keeps it open.
                    let mut stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
                    self.answer_taken(
                        &mut stdout,
                        || ended,
                        |id, p| refused_answer(id, p, &why, true),
                    );
                }
                return Err(refused());
            }
        };
        // SAFETY: fd 1 is this process's stdout for its whole life; ManuallyDrop keeps it open.
        let mut stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        let (down, socket) = self.resume(link, &mut stdout).map_err(|_| refused())?;
        {
            let _up = lock(&self.upstream);
            let mut s = lock(&self.session);
            s.refused = None;
            s.era += 1;
        }
        let relay = self.clone();
        std::thread::spawn(move || {
            let code = relay.relay_from(down, socket);
            let _writing = lock(&relay.writing);
            std::process::exit(code)
        });
        say_aside("ovai mcp: the server takes this session again.".into());
        Ok(())
    }

    /// Why no daemon takes this session's lines now, if none does.
    fn refusal(&self) -> Option<String> {
        lock(&self.session).refused.clone()
    }

    /// Ends the bridge once its client is gone and owed nothing: the daemon sees the connection close
    /// and ends the session (a seat's listen stream would otherwise keep it, and the seat, for minutes).
    /// A refused bridge ends non-zero.
    fn exit(&self) -> ! {
        let refused = lock(&self.session).refused.is_some();
        let _writing = lock(&self.writing);
        std::process::exit(i32::from(refused))
    }

    /// Answers the requests `take` removes from those waiting, each as `answer` says, and holds off an
    /// exit until every answer is out: an exit that saw nothing waiting would otherwise cut them off.
    fn answer_taken(
        &self,
        stdout: &mut File,
        take: impl FnOnce() -> Vec<(String, Pending)>,
        answer: impl Fn(&str, &Pending) -> Value,
    ) {
        let _writing = lock(&self.writing);
        let mut out = Vec::new();
        for (id, p) in take() {
            let line = answer(&id, &p).to_string();
            for _ in 0..=p.more {
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
        }
        let _ = Blocking(stdout).write_all(&out);
    }

    /// Writes `lines` to the client as one, where no exit cuts them.
    fn write_out(&self, stdout: &mut File, lines: &[u8]) {
        let _writing = lock(&self.writing);
        let _ = Blocking(stdout).write_all(lines);
    }

    fn note_request(&self, line: &[u8]) {
        if let Some(noted) = read_request(line) {
            lock(&self.session).apply(line, noted);
        }
    }

    /// Daemon → client until the daemon's side closes. An answer's request waits until the answer is
    /// written: the bridge may end once nothing waits, and must not end with an answer unwritten.
    fn read_daemon(&self, down: &mut Down, stdout: &mut File) {
        let mut input = BufReader::with_capacity(64 * 1024, down);
        let mut line = Vec::new();
        let mut out = Vec::new();
        // The ids the lines in `out` answer.
        let mut answered: Vec<String> = Vec::new();
        loop {
            if !out.is_empty() && !has_line(input.buffer()) {
                // Everything that arrived together goes to the client in one write.
                let written = {
                    let _writing = lock(&self.writing);
                    Blocking(stdout).write_all(&out).is_ok()
                };
                out.clear();
                // Done once nothing is owed; and once the client stopped reading (its stdout closed),
                // as nothing more reaches it: the daemon, seeing the connection close, stops its calls.
                if self.settle_answers(&mut answered) || !written {
                    self.exit();
                }
            }
            line.clear();
            // The daemon's side closed. A line it cut off in going (its last, unended) is no answer:
            // the client never sees half a line, and that line's request is answered as interrupted.
            if input.read_until(b'\n', &mut line).is_err() || !line.ends_with(b"\n") {
                self.write_out(stdout, &out);
                self.settle_answers(&mut answered);
                return;
            }
            let key = match response_id(&line).and_then(|id| std::str::from_utf8(id).ok()) {
                Some(id) => Some(id.to_owned()),
                None => answered_key(&line),
            };
            if let Some(key) = key {
                if key == self.replay_key {
                    continue;
                }
                answered.push(key);
            } else if let Some(listen) = acknowledged(&line)
                && !lock(&self.session).acked.insert(listen)
            {
                continue;
            }
            out.extend_from_slice(&line);
        }
    }

    /// The requests these answers are for wait no more; true once the bridge has nothing left to do.
    fn settle_answers(&self, answered: &mut Vec<String>) -> bool {
        let mut s = lock(&self.session);
        for key in answered.drain(..) {
            // A refusal of a second request under an id in flight leaves the first one's entry.
            if let Some(p) = s.settle_answer(&key) {
                if p.method == "initialize" {
                    s.initialize_answered = true;
                }
                if !s.listens.is_empty() {
                    s.listens.remove(&key);
                    s.acked.remove(&key);
                }
            }
        }
        s.finished()
    }

    /// After the daemon's side closed: answer what was in flight, then find a daemon again.
    fn reconnect(&self, stdout: &mut File) -> Result<(Down, Option<UnixStream>), i32> {
        let root = self.target.inst.root.display().to_string();
        let interrupted = || {
            let mut up = lock(&self.upstream);
            up.stream = None;
            let mut s = lock(&self.session);
            // Listen streams are re-opened on the next daemon, and an unanswered initialize is replayed
            // with the client's own id: both stay pending. Everything else was cut off.
            let s = &mut *s;
            let (kept, cut): (Vec<_>, Vec<_>) = s
                .pending
                .drain()
                .partition(|(k, p)| p.method == "initialize" || s.listens.contains_key(k));
            s.pending.extend(kept);
            cut
        };
        self.answer_taken(stdout, interrupted, interrupted_answer);
        let deadline = Instant::now() + self.target.reconnect;
        let mut wait = Duration::from_millis(50);
        loop {
            // A daemon there and silent (or holding the instance unreachable) is said as such if none
            // answers in time.
            let silent = match self.target.connect() {
                Ok(link) => match self.resume(link, stdout) {
                    Ok(resumed) => return Ok(resumed),
                    // That daemon went as it was taken on: what was sent to it may have run, and is
                    // answered as cut off; the next one is looked for.
                    Err(_) => {
                        self.answer_taken(stdout, interrupted, interrupted_answer);
                        None
                    }
                },
                Err(e @ (ClientError::Silent { .. } | ClientError::Unreachable { .. })) => {
                    Some(e.to_string())
                }
                Err(e) if e.may_pass() => None,
                Err(e) => return Err(self.give_up(stdout, &e.to_string(), for_good(&e))),
            };
            let done = {
                let mut s = lock(&self.session);
                s.client_done && s.pending().is_empty()
            };
            if done {
                return Err(0);
            }
            // A client gone meanwhile is owed nothing more.
            if reader_gone(nix::poll::PollTimeout::ZERO) == Some(true) {
                self.exit();
            }
            if Instant::now() >= deadline {
                let why = silent.unwrap_or_else(|| format!(
                    "the ovai server for {root} went away and none came back within {} s; start it with `ovai serve`",
                    self.target.reconnect.as_secs()
                ));
                return Err(self.give_up(stdout, &why, false));
            }
            std::thread::sleep(wait.min(deadline.saturating_duration_since(Instant::now())));
            // A failed connect costs microseconds: trying often finds the next daemon, and notices a
            // client gone, within a fifth of a second.
            wait = (wait * 2).min(Duration::from_millis(200));
        }
    }

    /// Re-establishes the session on a new daemon, then lets the client's queued lines through.
    fn resume(
        &self,
        link: DaemonEnd,
        stdout: &mut File,
    ) -> Result<(Down, Option<UnixStream>), String> {
        let DaemonEnd {
            mut up,
            down,
            _socket: socket,
        } = link;
        let (replay, initialized, listens) = {
            let s = lock(&self.session);
            let replay = s.initialize.as_ref().map(|line| {
                if s.initialize_answered {
                    with_id(line, &parse_id(&self.replay_key))
                } else {
                    line.clone()
                }
            });
            (
                replay,
                s.initialized.clone(),
                s.listens.values().cloned().collect::<Vec<_>>(),
            )
        };
        for line in replay
            .iter()
            .chain(initialized.iter())
            .chain(listens.iter())
        {
            up.write_all(line).map_err(|e| e.to_string())?;
        }
        {
            let mut upstream = lock(&self.upstream);
            // A line queued while no daemon ran may be the very one just replayed (the client's
            // initialize, a listen): it goes once.
            let replayed: Vec<&Vec<u8>> = replay
                .iter()
                .chain(initialized.iter())
                .chain(listens.iter())
                .collect();
            for line in std::mem::take(&mut upstream.queued) {
                if replayed.iter().any(|r| **r == line) {
                    continue;
                }
                up.write_all(&line).map_err(|e| e.to_string())?;
            }
            if lock(&self.session).client_done {
                close_writing(up);
            } else {
                upstream.stream = Some(up);
            }
        }
        // A new daemon may serve a different list; the client asks again when told: on its listen streams
        // (2026-07-28), else as a plain notification to an initialized session.
        let listen_ids: Vec<Value> = lock(&self.session)
            .listens
            .keys()
            .map(|k| parse_id(k))
            .collect();
        let mut told = Vec::new();
        for id in &listen_ids {
            let _ = writeln!(
                told,
                "{}",
                json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                        "params": { "_meta": { "io.modelcontextprotocol/subscriptionId": id } } })
            );
        }
        if listen_ids.is_empty() && replay.is_some() {
            let _ = writeln!(
                told,
                "{}",
                json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" })
            );
        }
        self.write_out(stdout, &told);
        Ok((down, socket))
    }

    /// Answers everything still waiting with `why`, and everything the client sends from now on; says
    /// it on stderr, and gives the exit code.
    fn give_up(&self, stdout: &mut File, why: &str, for_good: bool) -> i32 {
        // Queued requests were noted as pending when they were read (cancelled ones forgotten since):
        // each is answered once, here or by the reader once `refused` is set. Set and taken in one
        // go: a revival cannot come between them and send on a request answered here too.
        self.answer_taken(
            stdout,
            || {
                let mut up = lock(&self.upstream);
                up.queued.clear();
                let mut s = lock(&self.session);
                (s.refused, s.for_good) = (Some(why.to_string()), for_good);
                s.looked = Some(Instant::now());
                // An initialize no daemon answered is answered here: a daemon that takes the session
                // again is not sent it (the client sends another), nor tells the client of list changes.
                if !s.initialize_answered {
                    (s.initialize, s.initialized) = (None, None);
                }
                // Listen streams stay open for a daemon that may take the session again, as when one
                // comes back in time; refused for good, they end now, with the refusal.
                s.take_answerable(for_good)
            },
            |id, p| refused_answer(id, p, why, for_good),
        );
        say_aside(format!("ovai mcp: {why}"));
        1
    }
}

/// The daemon's `Farewell` on a session's socket, read once its pipe closed: why it ended the session,
/// when it did so on purpose. A daemon gone (the socket closed) or silent says nothing.
fn farewell_on(socket: &mut UnixStream) -> Option<String> {
    socket.set_read_timeout(Some(FAREWELL_PATIENCE)).ok()?;
    let mut line = Vec::new();
    BufReader::new(&*socket)
        .take(wire::MAX_HELLO)
        .read_until(b'\n', &mut line)
        .ok()?;
    let farewell: wire::Farewell = serde_json::from_slice(&line).ok()?;
    Some(farewell.ended)
}

/// How long a daemon whose side of a session closed has to say why: it writes at once, as its session
/// ends.
const FAREWELL_PATIENCE: Duration = Duration::from_secs(2);

/// Says `line` on stderr from a thread of its own: a stderr nobody reads holds no request, nor the
/// bridge's end.
fn say_aside(line: String) {
    std::thread::spawn(move || eprintln!("{line}"));
}

/// Whether the reader of the bridge's stdout is gone (the client), waiting up to `timeout` for that;
/// `None` where that cannot be told. Only a pipe or a socket says its reader is gone; some systems'
/// poll(2) calls a terminal or /dev/null invalid, which is no client's end.
fn reader_gone(timeout: nix::poll::PollTimeout) -> Option<bool> {
    use nix::poll::{PollFd, PollFlags, poll};
    use nix::sys::stat::{SFlag, fstat};
    let stdout = std::io::stdout();
    let kind = fstat(&stdout).map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT);
    if !kind.is_ok_and(|k| k == SFlag::S_IFIFO || k == SFlag::S_IFSOCK) {
        return None;
    }
    // No event asked for: poll(2) reports only the error and hang-up it always reports.
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    match poll(&mut fds, timeout) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
        Err(_) => return None,
    }
    let gone = PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL;
    Some(fds[0].revents().is_some_and(|r| r.intersects(gone)))
}

/// The client's stdin or stdout, which it may hand over non-blocking (a descriptor it shares with
/// another process): a read or write that would block waits for the descriptor, rather than be taken
/// for the client's end.
struct Blocking<'a>(&'a File);

impl Blocking<'_> {
    fn wait(&self, event: nix::poll::PollFlags) -> std::io::Result<()> {
        use nix::poll::{PollFd, PollTimeout, poll};
        match poll(&mut [PollFd::new(self.0.as_fd(), event)], PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Read for Blocking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match (&*self.0).read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.wait(nix::poll::PollFlags::POLLIN)?
                }
                done => return done,
            }
        }
    }
}

impl Write for Blocking<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        loop {
            match (&*self.0).write(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.wait(nix::poll::PollFlags::POLLOUT)?
                }
                done => return done,
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The id the client gets an answer under after sending `line` (its key, as the answer writes it), if
/// any: waited for from the daemon, or for a line over the cap given by the bridge itself. What
/// `tests/bridge_rules.rs` holds against what a daemon answers.
pub fn answered_under(line: &[u8]) -> Option<String> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    if body.len() > MAX_LINE {
        return match jsonrpc::overlong(crate::skim::skeleton(body).as_deref()) {
            jsonrpc::Overlong::Under(id) => Some(jsonrpc::key_of(&id)),
            jsonrpc::Overlong::Echoed(raw) => Some(raw),
            jsonrpc::Overlong::Unanswered => None,
        };
    }
    read_request(line)?.key
}

/// What the bridge notes for a line, read as the daemon reads it (`jsonrpc::read`): `None` for a line it
/// does not wait on (one the daemon answers at once, with `id: null`, or cannot read at all; a response).
fn read_request(line: &[u8]) -> Option<Noted> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    // Over the cap (as the daemon's reader counts it, a `\r` before the newline with it), a line is
    // answered by the bridge itself (`read_capped`), never sent on.
    if body.len() > MAX_LINE {
        return None;
    }
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    // As the daemon's reader takes a line: one that is not UTF-8 is answered at once, under null; a
    // blank one is skipped.
    let Ok(text) = std::str::from_utf8(body) else {
        return Some(Noted {
            method: "request".into(),
            key: Some("null".into()),
            revision: Revision::Known(false),
            cancels: None,
        });
    };
    if text.trim().is_empty() {
        return None;
    }
    let text = jsonrpc::mended(text);
    match jsonrpc::read(&text, "line") {
        Message::Request(r) => Some(Noted {
            revision: if r.method == "tools/call" {
                Revision::of_call(r.params)
            } else {
                Revision::Known(false)
            },
            method: r.method.to_string(),
            key: Some(r.key()),
            cancels: None,
        }),
        Message::Notification(n) => Some(Noted {
            cancels: (n.method == "notifications/cancelled")
                .then(|| jsonrpc::cancelled_request(n.params))
                .flatten()
                .map(|id| jsonrpc::key_of(&id)),
            method: n.method.into_owned(),
            key: None,
            revision: Revision::Known(false),
        }),
        // Answered at once, and under its id when it has one: an answer a daemon going away would
        // leave unsent all the same.
        Message::Bad(_, Some(id)) => Some(Noted {
            method: "request".into(),
            key: Some(jsonrpc::key_of(&id)),
            revision: Revision::Known(false),
            cancels: None,
        }),
        // Answered at once under an id no request can have (`null`, `1.5`): waited for under that id as
        // the answer writes it, so that a client that closes its input at once still gets it.
        Message::Bad(Some(answer), None) => Some(Noted {
            method: "request".into(),
            key: Some(raw_id_key(&answer)?),
            revision: Revision::Known(false),
            cancels: None,
        }),
        Message::Response(_) | Message::Bad(None, None) => None,
    }
}

/// Whether a request's `_meta` names 2026-07-28 or later (revisions are dates, so they sort as text).
fn is_modern(params: Option<&str>) -> bool {
    let revision = || {
        let meta = jsonrpc::members(params?, ["_meta"]).ok()?.values[0]?;
        let version = jsonrpc::members(meta.get(), ["io.modelcontextprotocol/protocolVersion"])
            .ok()?
            .values[0]?;
        serde_json::from_str::<String>(version.get()).ok()
    };
    revision().is_some_and(|v| v.as_str() >= MODERN)
}

/// The id of an answer of the daemon's, read as the daemon reads a line: an id no request can have
/// (`null`, `1.5`) as written.
fn answered_key(line: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(line).ok()?;
    match jsonrpc::read(text.trim_end(), "line") {
        Message::Response(Some(id)) => Some(jsonrpc::key_of(&id)),
        Message::Bad(..) => raw_id_key(line),
        _ => None,
    }
}

/// The listen a `notifications/subscriptions/acknowledged` line acknowledges, as its key.
fn acknowledged(line: &[u8]) -> Option<String> {
    // Read whole only when it may be one: progress reports pass here by the thousand.
    if !std::str::from_utf8(line)
        .ok()?
        .contains("subscriptions/acknowledged")
    {
        return None;
    }
    let v: Value = serde_json::from_slice(line).ok()?;
    (v["method"] == "notifications/subscriptions/acknowledged")
        .then(|| v["params"]["_meta"].get("io.modelcontextprotocol/subscriptionId"))?
        .map(Value::to_string)
}

/// The id of an answer (a message with a `result` or an `error`) as written, whatever it is.
fn raw_id_key(answer: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(answer).ok()?;
    let [id, result, error] = jsonrpc::members(text.trim_end(), ["id", "result", "error"])
        .ok()?
        .values;
    (result.is_some() || error.is_some()).then(|| id.map(|id| id.get().to_string()))?
}

/// The lines of `batch`, each ending where `ends` says.
fn lines_of<'a>(batch: &'a [u8], ends: &'a [usize]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts
        .zip(ends.iter().copied())
        .map(move |(from, to)| &batch[from..to])
}

/// What `read_capped` read.
enum Got {
    /// A line, appended to the batch (with its newline, unless input ended before one).
    Line,
    /// A line over the daemon's cap, dropped as it came, and its skeleton (`skim`).
    Over(Option<String>),
    /// The end of input.
    End,
}

/// The client's next line into `batch`, counted as the daemon's reader counts it (a `\r` before the
/// newline with it); one over the cap is skimmed and dropped as it comes, so a line that never ends
/// costs the bridge no memory.
fn read_capped(input: &mut impl BufRead, batch: &mut Vec<u8>) -> std::io::Result<Got> {
    let start = batch.len();
    let mut skim: Option<crate::skim::Skim> = None;
    loop {
        let buf = match input.fill_buf() {
            // A signal's handler ran: read again, as `read_until` does.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => other?,
        };
        if buf.is_empty() {
            return Ok(match skim {
                Some(skim) => Got::Over(skim.finish()),
                None if batch.len() > start => Got::Line,
                None => Got::End,
            });
        }
        let newline = memchr::memchr(b'\n', buf);
        let upto = newline.unwrap_or(buf.len());
        if skim.is_none() && batch.len() - start + upto > MAX_LINE {
            let mut s = crate::skim::Skim::default();
            s.feed(&batch[start..]);
            batch.truncate(start);
            batch.shrink_to(start.max(BATCH_ROOM));
            skim = Some(s);
        }
        match &mut skim {
            Some(s) => s.feed(&buf[..upto]),
            None => batch.extend_from_slice(&buf[..newline.map_or(upto, |at| at + 1)]),
        }
        input.consume(newline.map_or(upto, |at| at + 1));
        if newline.is_some() {
            return Ok(match skim {
                Some(skim) => Got::Over(skim.finish()),
                None => Got::Line,
            });
        }
    }
}

/// Whether a whole line is already buffered (so reading it will not wait).
fn has_line(buffered: &[u8]) -> bool {
    buffered.contains(&b'\n')
}

/// The id of a response as rmcp writes one (`{"jsonrpc":"2.0","id":ID,"result"` or `"error"`), read
/// without parsing the result, which may be large; `None` sends the line through the full parse.
fn response_id(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(br#"{"jsonrpc":"2.0","id":"#)?;
    let end = if rest.first() == Some(&b'"') {
        // A string id without escapes; one with a backslash takes the slow path.
        let close = rest[1..].iter().position(|b| *b == b'"' || *b == b'\\')? + 1;
        (rest[close] == b'"').then_some(close + 1)?
    } else {
        rest.iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'-'))?
    };
    let after = &rest[end..];
    (after.starts_with(br#","result":"#) || after.starts_with(br#","error":"#))
        .then_some(&rest[..end])
}

/// The answer to a request the daemon took with it when it went away, in the shape of the revision the
/// request was sent under.
fn interrupted_answer(id: &str, p: &Pending) -> Value {
    let id = parse_id(id);
    if p.method == "tools/call" {
        let mut result = json!({
            "content": [{ "type": "text", "text": "The ovai server went away (it was stopped or it crashed) while this call was in flight, so it has no answer; nothing was retried. It may have been done all the same (a room message said, a plugin's work begun): look before calling it again." }],
            "isError": true
        });
        if p.revision.is_modern() {
            result["resultType"] = json!("complete");
        }
        json!({ "jsonrpc": "2.0", "id": id, "result": result })
    } else {
        json!({ "jsonrpc": "2.0", "id": id, "error": {
            "code": jsonrpc::SERVER_ERROR,
            "message": format!(
                "The ovai server went away (it was stopped or it crashed) while this {} was in flight; send it again.",
                if p.method == "request" { "request".to_string() } else { format!("{} request", p.method) }
            )
        }})
    }
}

/// The answer to a request no daemon will take, in the shape of the revision it was sent under: a
/// call's is a tool's error result, which clients show their model (an error of the protocol, some
/// only log).
fn refused_answer(id: &str, p: &Pending, why: &str, for_good: bool) -> Value {
    let id = parse_id(id);
    let why = why.trim_end_matches('.');
    if p.method == "tools/call" {
        // "The ovai server …" within the sentence.
        let mut chars = why.chars();
        let lower = match (chars.next(), chars.next()) {
            (Some(first), Some(second)) if second.is_lowercase() => {
                format!("{}{}", first.to_lowercase(), &why[first.len_utf8()..])
            }
            _ => why.to_string(),
        };
        let text = if why.contains(wire::SEAT_GONE) {
            format!("This call was not made, and no call of this session can be: {lower}.")
        } else if for_good {
            format!(
                "This call was not made, and no call of this session can be: {lower}. Start this session again \
                 to reach the server (the bridge reads the seat's secret once, at its start)."
            )
        } else {
            format!(
                "This call was not made: {lower}. The session looks for the server again as it calls, at most once a second."
            )
        };
        let mut result = json!({
            "content": [{ "type": "text", "text": text }],
            "isError": true
        });
        if p.revision.is_modern() {
            result["resultType"] = json!("complete");
        }
        json!({ "jsonrpc": "2.0", "id": id, "result": result })
    } else {
        // "the ovai server …" as a sentence of its own.
        let mut chars = why.chars();
        let upper = chars
            .next()
            .map(|first| format!("{}{}", first.to_uppercase(), chars.as_str()))
            .unwrap_or_default();
        let then = if for_good {
            ""
        } else {
            " The session looks for the server again at its requests, at most once a second."
        };
        json!({ "jsonrpc": "2.0", "id": id, "error": { "code": jsonrpc::SERVER_ERROR, "message": format!("{upper}.{then}") } })
    }
}

/// Whether a refusal holds for as long as this bridge runs, as the daemon says: the seat's secret
/// refused (re-keyed, removed), or another version of the binary. Any other may be mended while the
/// session waits (the seat book made again, a place freed, a server started).
fn for_good(e: &ClientError) -> bool {
    matches!(e, ClientError::Refused { for_good: true, .. })
}

fn parse_id(key: &str) -> Value {
    serde_json::from_str(key).unwrap_or(Value::Null)
}

/// The same message with another id, as one line, read as the daemon reads it (half surrogate pairs
/// mended: the daemon answered the line, so it reads so).
fn with_id(line: &[u8], id: &Value) -> Vec<u8> {
    let text = String::from_utf8_lossy(line);
    match serde_json::from_str::<Value>(&jsonrpc::mended(&text)) {
        Ok(mut v) => {
            v["id"] = id.clone();
            let mut out = v.to_string().into_bytes();
            out.push(b'\n');
            out
        }
        Err(_) => line.to_vec(),
    }
}

/// Says why on stderr, answers the client's first request with the same sentence, and exits 1.
fn fail(sentence: &str) -> i32 {
    eprintln!("ovai mcp: {sentence}");
    if std::io::stdin().is_terminal() {
        return 1;
    }
    // SAFETY: fd 0 is this process's stdin for its whole life; ManuallyDrop keeps it open.
    let stdin = ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    // Notifications get no answer; the first request does. A client that sends nothing is not waited on
    // past end-of-input. A line over the cap is read for its skeleton only.
    let mut input = BufReader::new(Blocking(&stdin));
    let mut line = Vec::new();
    for _ in 0..64 {
        line.clear();
        let read = match read_capped(&mut input, &mut line) {
            Ok(Got::End) | Err(_) => break,
            Ok(Got::Line) => serde_json::from_slice::<Value>(&line),
            Ok(Got::Over(skeleton)) => serde_json::from_str(skeleton.as_deref().unwrap_or("")),
        };
        let Ok(msg) = read else {
            continue;
        };
        let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()) else {
            continue;
        };
        let answer = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": jsonrpc::SERVER_ERROR, "message": sentence }
        });
        // SAFETY: fd 1 is this process's stdout for its whole life; ManuallyDrop keeps it open.
        let stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
        let _ = Blocking(&stdout).write_all(format!("{answer}\n").as_bytes());
        break;
    }
    1
}

/// Reads a socket, waiting for data in poll(2) first. A thread blocked in read(2) on a Unix socket is
/// woken every time its peer reads what this process wrote (one wait queue serves both directions, and
/// a blocked read does not look at why it was woken): one wake-up for nothing per request. poll(2) wakes
/// only for what it waits for.
struct WaitForData<'a>(&'a UnixStream);

impl Read for WaitForData<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        loop {
            let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        (&*self.0).read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bridge for an instance that is not there: for what it notes, never connected.
    fn test_bridge() -> Arc<Bridge> {
        Bridge::new(Target {
            inst: Instance::at(std::path::PathBuf::from("/nonexistent")),
            secret: String::new(),
            reconnect: Duration::ZERO,
            connect: Duration::ZERO,
        })
    }

    fn key_of_line(id: &str) -> Option<String> {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"e"}}}}"#
        );
        read_request(line.as_bytes())?.key
    }

    #[test]
    fn a_request_is_noted_under_the_id_rmcp_reads_and_answers_under() {
        use rmcp::model::NumberOrString;
        for spelled in [
            "5",
            "5.0",
            "5.000",
            "5e0",
            "-0",
            "-0.0",
            "1e2",
            "-7",
            "1.5",
            "1e300",
            "9007199254740991.0",
            "9007199254740992.0",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "\"5\"",
            "\"a\\\"b\"",
            "\"\\u0041\"",
            "null",
            "true",
            "{}",
            "[]",
        ] {
            // An id rmcp does not read is refused under it as written, and waited for so.
            let rmcp = serde_json::from_str::<NumberOrString>(spelled)
                .map_or(spelled.to_string(), |n| serde_json::to_string(&n).unwrap());
            assert_eq!(key_of_line(spelled), Some(rmcp), "{spelled}");
        }
        // One past the bound is not echoed: refused under null.
        let long = format!("\"{}\"", "x".repeat(jsonrpc::MAX_ID_BYTES + 1));
        assert_eq!(key_of_line(&long).as_deref(), Some("null"));
    }

    #[test]
    fn a_request_is_noted_whatever_its_params_hold_and_a_line_that_is_none_under_null() {
        let bridge = test_bridge();
        for line in [
            // Answered under their ids: whatever the params hold, the daemon reads the envelope first.
            r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1e400}}}"#,
            r#"{"jsonrpc":"2.0","id":21,"method":"tools/list","params":{"x":[-1e999]}}"#,
            // Not JSON (a raw control character in a string), an array, not UTF-8: answered with id: null,
            // and waited for so.
            "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"tools/list\",\"params\":{\"x\":\"\u{1}\"}}",
            r#"[7,"ping"]"#,
            r#"  ["2.0",8,"tools/call",{"name":"slow"}]"#,
        ] {
            bridge.note_request(line.as_bytes());
        }
        let mut not_utf8 =
            br#"{"jsonrpc":"2.0","id":23,"method":"tools/list","params":{"x":""#.to_vec();
        not_utf8.extend_from_slice(b"\xff\"}}");
        bridge.note_request(&not_utf8);
        // Half a surrogate pair, which the daemon reads as U+FFFD, and ids in float form.
        for line in [
            r#"{"jsonrpc":"2.0","id":"\ud800x","method":"tools/call","params":{"name":"slow"}}"#,
            r#"{"jsonrpc":"2.0","id":2.0,"method":"tools/call","params":{"name":"slow"}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"slow","arguments":{"s":"\udc00"}}}"#,
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"slow","_meta":{"io.modelcontextprotocol/protocolVersion":1}}}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":"x/y","params":5}"#,
        ] {
            bridge.note_request(line.as_bytes());
        }
        let mut keys: Vec<String> = lock(&bridge.session).pending().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            ["\"\u{fffd}x\"", "0", "10", "11", "2", "20", "21", "null"]
        );
        // Answered under null, each: the not-JSON line, the two arrays, the line that is not UTF-8.
        assert_eq!(lock(&bridge.session).pending()["null"].more, 3);
    }

    #[test]
    fn a_call_of_2026_is_noted_as_one_for_its_interrupted_answer() {
        let line = include_str!("../examples/bench/lines/claude-code-2.1.328.jsonl")
            .lines()
            .last()
            .unwrap();
        let noted = read_request(line.as_bytes()).unwrap();
        assert!(noted.revision.is_modern());
        assert_eq!(noted.key.as_deref(), Some("2"));
        let bare = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"e","_meta":{"progressToken":3}}}"#;
        assert!(!read_request(bare).unwrap().revision.is_modern());
        // Params too large to keep are read at once, to the same answer.
        for (version, modern) in [("2026-07-28", true), ("2025-11-25", false)] {
            let big = format!(
                r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"e","arguments":{{"a":"{}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{version}"}}}}}}"#,
                "x".repeat(KEPT_PARAMS)
            );
            let noted = read_request(big.as_bytes()).unwrap();
            assert!(matches!(noted.revision, Revision::Known(_)));
            assert_eq!(noted.revision.is_modern(), modern, "{version}");
        }
    }

    #[test]
    fn a_line_over_the_cap_is_answered_by_the_bridge_as_the_daemon_answers_it() {
        let over = |head: &str, tail: &str| {
            let mut line = head.as_bytes().to_vec();
            line.resize(MAX_LINE + 1, b'x');
            line.extend_from_slice(tail.as_bytes());
            line
        };
        let line = over(
            r#"{"jsonrpc":"2.0","method":"ping","params":{"pad":""#,
            r#""},"id":"last"}"#,
        );
        assert!(read_request(&line).is_none());
        assert_eq!(answered_under(&line).as_deref(), Some(r#""last""#));
        let mut input = std::io::Cursor::new([line.as_slice(), b"\r\n{}\n"].concat());
        let mut batch = Vec::new();
        let Ok(Got::Over(skeleton)) = read_capped(&mut input, &mut batch) else {
            panic!("not read as over the cap");
        };
        assert!(batch.is_empty());
        let answer: Value =
            serde_json::from_slice(&jsonrpc::overlong_answer(skeleton.as_deref()).unwrap())
                .unwrap();
        assert_eq!(answer["id"], "last");
        assert_eq!(answer["error"]["code"], jsonrpc::INVALID_REQUEST);
        assert!(matches!(read_capped(&mut input, &mut batch), Ok(Got::Line)));
        assert_eq!(batch, b"{}\n");
        // A notification over the cap is answered by nobody.
        let line = over(
            r#"{"jsonrpc":"2.0","method":"x/y","params":{"pad":""#,
            r#""}}"#,
        );
        assert_eq!(answered_under(&line), None);
        // A line refused at once is named once in the answer a daemon going away leaves to the bridge.
        let noted = read_request(br#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#).unwrap();
        let answer = interrupted_answer("5", &Pending::new(noted.method, noted.revision));
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("while this request was in flight"),
            "{answer}"
        );
    }

    #[test]
    fn a_notification_method_sent_with_an_id_is_a_request_and_nothing_more() {
        let bridge = test_bridge();
        let listen = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}"#;
        for line in [
            listen,
            r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"other":1}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"notifications/cancelled","params":{"requestId":1}}"#,
        ] {
            bridge.note_request(line.as_bytes());
        }
        let mut s = lock(&bridge.session);
        assert!(s.initialized.is_none(), "not the session's initialized");
        assert_eq!(
            s.pending()["1"].more,
            1,
            "the listen and its second, neither cancelled"
        );
        assert!(s.pending().contains_key("5") && s.pending().contains_key("6"));
        assert_eq!(
            s.listens["1"],
            listen.as_bytes(),
            "the first listen's line is kept"
        );
    }

    #[test]
    fn a_cancellation_names_the_request_the_daemon_stops() {
        let cancels = |params: &str| {
            let line = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{params}}}"#
            );
            read_request(line.as_bytes()).and_then(|n| n.cancels)
        };
        assert_eq!(cancels(r#"{"requestId":5}"#).as_deref(), Some("5"));
        assert_eq!(cancels(r#"{"requestId":5.0}"#).as_deref(), Some("5"));
        assert_eq!(cancels(r#"{"requestId":"a"}"#).as_deref(), Some("\"a\""));
        assert_eq!(cancels(r#"{"requestId":1.5}"#), None);
        assert_eq!(cancels("5"), None);
    }

    #[test]
    fn the_replayed_initialize_is_read_as_the_daemon_reads_it_and_carries_an_id_no_client_chose() {
        let line = br#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"clientInfo":{"name":"t\ud800"}}}"#;
        let replayed: Value = serde_json::from_slice(&with_id(line, &json!("r"))).unwrap();
        assert_eq!(replayed["id"], "r");
        assert_eq!(replayed["params"]["clientInfo"]["name"], "t\u{fffd}");
        let (a, b) = (test_bridge(), test_bridge());
        assert!(a.replay_key.starts_with("\"ovai-bridge-replay-"));
        assert_ne!(a.replay_key, b.replay_key);
    }

    #[test]
    fn a_second_request_under_an_id_in_flight_does_not_take_the_first_ones_answer() {
        let mut pending = HashMap::new();
        note(
            &mut pending,
            "5".into(),
            Pending::new("tools/call", Revision::Known(false)),
        );
        note(
            &mut pending,
            "5".into(),
            Pending::new("tools/call", Revision::Known(false)),
        );
        // The second is refused under the same id: the first still waits.
        assert!(settle(&mut pending, "5").is_none());
        assert!(pending.contains_key("5"));
        assert!(settle(&mut pending, "5").is_some());
        assert!(pending.is_empty());
        assert!(settle(&mut pending, "5").is_none());
    }

    #[test]
    fn response_ids_are_read_off_rmcp_lines_and_match_the_full_parse() {
        for (line, want) in [
            (
                &br#"{"jsonrpc":"2.0","id":42,"result":{"content":[]}}"#[..],
                Some("42"),
            ),
            (
                br#"{"jsonrpc":"2.0","id":"ab-c","error":{"code":1}}"#,
                Some("\"ab-c\""),
            ),
            (
                br#"{"jsonrpc":"2.0","id":"ovai-bridge-replay-00ff","result":{}}"#,
                Some("\"ovai-bridge-replay-00ff\""),
            ),
            (br#"{"jsonrpc":"2.0","id":"a\"b","result":{}}"#, None),
            (
                br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
                None,
            ),
            (br#"{"id":1,"jsonrpc":"2.0","result":{}}"#, None),
        ] {
            let got = response_id(line).map(|id| String::from_utf8_lossy(id).into_owned());
            assert_eq!(got.as_deref(), want, "{}", String::from_utf8_lossy(line));
            if let Some(key) = got {
                assert_eq!(answered_key(line), Some(key));
            }
        }
        assert_eq!(
            answered_key(br#"{"id":"a\"b","jsonrpc":"2.0","result":{}}"#).as_deref(),
            Some(r#""a\"b""#)
        );
    }
}
