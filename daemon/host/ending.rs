//! Why a host, or a call on it, ended: typed causes that travel from the supervisor to the edges, where
//! `answer` (what a caller reads) and `host::host_rows` (what runtime.log says) put them into words.

use std::sync::Arc;
use std::time::Duration;

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;

use super::child::SpawnError;
use super::protocol::PROTOCOL;
use super::protocol::Thrown;

/// How long a new host may take to say `ready`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// How a process ended, as the log rows and refusals say it: "exit code 3", "signal SIGKILL".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(String),
    /// The wait itself failed: why.
    Unreadable(String),
    Unknown,
}

impl Exit {
    pub fn of(status: ExitStatus) -> Self {
        if let Some(code) = status.code() {
            Exit::Code(code)
        } else if let Some(sig) = status.signal() {
            Exit::Signal(match Signal::try_from(sig) {
                Ok(s) => s.as_str().to_string(),
                Err(_) => sig.to_string(),
            })
        } else {
            Exit::Unknown
        }
    }

    pub(super) fn of_wait(r: std::io::Result<ExitStatus>, boxed: bool) -> Self {
        match r {
            Ok(s) => Exit::of(s).unboxed(boxed),
            Err(e) => Exit::Unreadable(e.to_string()),
        }
    }

    /// bubblewrap ends with 128 + N when what it runs was killed by signal N: say the signal.
    fn unboxed(self, boxed: bool) -> Self {
        match self {
            Exit::Code(c) if boxed && (129..=128 + 64).contains(&c) => {
                match Signal::try_from(c - 128) {
                    Ok(s) => Exit::Signal(s.as_str().to_string()),
                    Err(_) => Exit::Code(c),
                }
            }
            other => other,
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit code {c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
            Exit::Unreadable(e) => write!(f, "an end that could not be read: {e}"),
            Exit::Unknown => f.write_str("an unknown end"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("the plugin host stopped before it was ready ({exit}){tail}", tail = tail_clause(.tail))]
    Exited { exit: Exit, tail: Vec<String> },
    #[error("the plugin host did not say it was ready within {} s{tail}", READY_TIMEOUT.as_secs(), tail = tail_clause(.tail))]
    Silent { tail: Vec<String> },
    #[error(
        "the plugin host speaks protocol {got} and this ovai speaks {PROTOCOL}; .ovai/host.mjs is from another version of ovai"
    )]
    Protocol { got: u32 },
}

impl StartError {
    /// A failure that may pass by itself (out of descriptors or processes for a moment), as opposed to
    /// one that will fail the same way every time (no Node, a broken shim).
    pub fn is_transient(&self) -> bool {
        match self {
            StartError::Spawn(SpawnError::Io { source, .. }) => source
                .raw_os_error()
                .map(nix::errno::Errno::from_raw)
                .is_some_and(|e| {
                    matches!(
                        e,
                        nix::errno::Errno::EMFILE
                            | nix::errno::Errno::ENFILE
                            | nix::errno::Errno::EAGAIN
                            | nix::errno::Errno::ENOMEM
                    )
                }),
            _ => false,
        }
    }
}

fn tail_clause(tail: &[String]) -> String {
    match tail.iter().rev().find(|l| !l.trim().is_empty()) {
        Some(last) => format!("; its last words on stderr: {last}"),
        None => String::new(),
    }
}

/// Hosts ended since the daemon started, by cause, over every generation: for the operator's metrics.
static ENDS: [std::sync::atomic::AtomicU64; 5] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 5];
/// New hosts started in place of one that ended or was replaced, over every generation.
static RESPAWNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Why a host ended, as the metrics name it.
#[derive(Debug, Clone, Copy)]
pub enum EndCause {
    /// It stopped by itself (a plugin ended it, it ran out of memory, something killed it).
    Stopped = 0,
    /// It left the heartbeat unanswered and was killed.
    Hung = 1,
    /// Its protocol pipe closed and it was ended.
    Deaf = 2,
    /// Its box went past a bound and it was ended.
    OverBound = 3,
    /// A seat change ended it, for a new one whose box hides the seats' secrets as they are now.
    Replaced = 4,
}

const CAUSES: [&str; 5] = ["stopped", "hung", "deaf", "over_bound", "replaced"];

pub fn count_end(cause: EndCause) {
    ENDS[cause as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

pub fn count_respawn() {
    RESPAWNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// (cause, hosts ended for it) for each cause, and the respawns, since the daemon started.
pub fn counts() -> ([(&'static str, u64); 5], u64) {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    (
        std::array::from_fn(|i| (CAUSES[i], load(&ENDS[i]))),
        load(&RESPAWNS),
    )
}

/// Why the calls in flight on a host lost it.
#[derive(Debug, Clone)]
pub enum HostEnd {
    /// The process ended (a plugin ended it, or something outside killed it).
    Stopped {
        exit: Exit,
        /// The host said it ran out of heap: the `hostMaxMemoryMB` it was capped at.
        out_of_memory: Option<u64>,
        /// Where in plugins/ the host said, under its key, a plugin ended it from.
        by: Option<String>,
        next: Next,
    },
    /// It left the heartbeat unanswered for `after` (a plugin blocking its event loop) and was killed.
    Hung {
        exit: Exit,
        after: Duration,
        /// Where the host's own stack said a plugin held it (`plugins/x.mjs:3:5`), when it said.
        at: Option<String>,
        next: Next,
    },
    /// It stopped reading what the daemon sends it (a plugin closed its protocol pipe) and was killed.
    Deaf { exit: Exit, next: Next },
    /// Its box went past a bound (memory, processes) and it was ended.
    OverBound {
        exit: Exit,
        exceeded: super::bounds::Exceeded,
        next: Next,
    },
    /// Its generation was retired and the call outlived the time it was given.
    Retired(Retirement),
    /// It was replaced at once by a new host, because a seat's secret changed.
    Replaced,
}

/// What follows a host's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// A new host is started (respawned) with the same files.
    Respawn,
    /// The host stopped too often: it stays down until `ovai restart`.
    StaysDown { stops: usize, window: Duration },
}

/// Why a generation's host was ended on purpose.
#[derive(Debug, Clone)]
pub struct Retirement {
    pub why: RetireWhy,
    /// How long calls in flight were given to finish.
    pub grace: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetireWhy {
    /// `ovai restart` put a new generation in place; this call outlived its deadline on the old one.
    Restarted,
    /// The daemon is shutting down, on this signal.
    ShuttingDown(&'static str),
    /// Shutting down, it was asked again (this signal): calls in flight end now.
    StoppedAtOnce(&'static str),
}

/// Why a call on a host a restart left behind ended with it.
pub const OUTLIVED: &str = "the server was restarted and this call outlived its deadline";

/// Why there is no live host to run a call on.
#[derive(Debug, Clone)]
pub enum NoHost {
    /// The host stays down: a crash loop, or it could not be started again.
    Down(DownCause),
    /// The generation was retired.
    Ended,
    /// A new host was being started and was not ready within this long.
    NotBack(Duration),
}

#[derive(Debug, Clone)]
pub enum DownCause {
    CrashLoop {
        stops: usize,
        window: Duration,
        /// Where in plugins/ the host said the last end came from, when it said.
        last_at: Option<String>,
        /// Else the files the ended hosts were last sent a call of: an end with no call in flight (a
        /// plugin's processes or timers) names no place, and these are where to look.
        last_called: Vec<Arc<str>>,
    },
    CannotRespawn(Arc<StartError>),
}

/// Why a served file is not answering calls since its host was respawned.
#[derive(Debug, Clone)]
pub enum NotReimported {
    /// Importing it again threw, or it no longer has the three exports.
    Failed(Option<Thrown>),
    /// Importing it again ended the new host.
    StoppedHost(Exit),
    /// Importing it again took longer than the import timeout.
    Hung(Duration),
    /// Its code held the new host's event loop for the import timeout, at this place.
    Held(Duration, String),
    /// Its code held the last host's event loop before any call of its own ran there, at this place.
    HeldHost(String),
    /// It ended the last host before any call of its own ran there (how, and from where).
    EndedHost(Exit, String),
    /// It was named as having ended or held a host this many times within the window, the last at `at`.
    Repeatedly {
        times: usize,
        window: Duration,
        at: String,
    },
    /// Its bytes changed after they were read, so it was not imported again.
    Changed,
    /// It was gone (or could not be read) when the new host started.
    Removed,
}
