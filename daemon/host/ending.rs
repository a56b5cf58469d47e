//! Why a host, or a call on it, ended: typed causes that travel from the supervisor to the edges, where
//! `answer` (what a caller reads) and `host::rows` (what runtime.log says) put them into words.

use std::sync::Arc;
use std::time::Duration;

use super::process::{Exit, StartError};
use super::protocol::Thrown;

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
}

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
