//! One host process from start to end: spawned, greeted (`ready`, then `init`), asked to import files,
//! and finally waited for or killed with its whole process group.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Child;
use tokio::task::JoinHandle;

use super::child::{Launch, MIN_NODE_MAJOR, SpawnError, node_major};
use super::link::{Link, max_line_len};
use super::protocol::{Loaded, PROTOCOL, ToHost};

/// How long a new host may take to say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Lines of the host's stderr kept for the log row that reports its end.
const STDERR_TAIL: usize = 8;
/// A line of the host's stdout or stderr longer than this is cut: output is logs, not data.
const MAX_LOG_LINE: usize = 4096;
/// At most this many lines a second of each stream reach the daemon's log; a flood is counted, not copied.
const MAX_LOG_LINES_PER_S: u32 = 100;

/// What every call's context shares, sent once to each new process.
#[derive(Debug, Clone)]
pub struct HostInit {
    pub root: String,
    pub plugins_dir: String,
    pub config: serde_json::Value,
    pub max_answer_bytes: usize,
}

pub struct HostProcess {
    child: Child,
    pub link: Arc<Link>,
    reader: Option<JoinHandle<()>>,
    /// The task reading stderr: joined after an exit, so the tail holds the host's last words.
    stderr_drain: Option<JoinHandle<()>>,
    pub pid: u32,
    /// The Node version the host reported.
    pub node: String,
    /// The last lines the host wrote to stderr.
    tail: Arc<Mutex<Tail>>,
}

/// What the host last said on stderr, for the row that reports its end.
#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
    /// Node's `FATAL ERROR: …` line, kept apart: a native stack trace follows it and would push it out.
    fatal: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("the plugin host stopped before it was ready ({exit}){tail}", tail = tail_clause(.tail))]
    Exited { exit: String, tail: Vec<String> },
    #[error("the plugin host did not say it was ready within {} s{tail}", READY_TIMEOUT.as_secs(), tail = tail_clause(.tail))]
    Silent { tail: Vec<String> },
    #[error(
        "the plugin host speaks protocol {got} and this ovai speaks {PROTOCOL}; .ovai/host.mjs is from another version of ovai"
    )]
    Protocol { got: u32 },
}

fn tail_clause(tail: &[String]) -> String {
    match tail.last() {
        Some(last) => format!("; its last words on stderr: {last}"),
        None => String::new(),
    }
}

/// How one import ended.
pub enum LoadEnd {
    Reported(Box<Loaded>),
    /// The process ended while importing (the file killed it): how it ended.
    Stopped(String),
    TimedOut,
}

impl HostProcess {
    pub async fn start(launch: &Launch, init: &HostInit) -> Result<Self, StartError> {
        let spawned = launch.spawn()?;
        let mut child = spawned.child;
        let pid = spawned.pid;
        let tail = Arc::new(Mutex::new(Tail::default()));
        if let Some(out) = child.stdout.take() {
            tokio::spawn(drain_output(out, pid, "stdout", None));
        }
        let stderr_drain = child
            .stderr
            .take()
            .map(|err| tokio::spawn(drain_output(err, pid, "stderr", Some(tail.clone()))));
        let (link, ready, reader) =
            Link::start(spawned.channel, pid, max_line_len(init.max_answer_bytes));
        let mut this = Self {
            child,
            link,
            reader: Some(reader),
            stderr_drain,
            pid,
            node: String::new(),
            tail,
        };
        let (v, node) = tokio::select! {
            r = ready => match r {
                Ok(r) => r,
                Err(_) => {
                    let exit = this.wait_exit().await;
                    return Err(StartError::Exited { exit, tail: this.tail() });
                }
            },
            _ = tokio::time::sleep(READY_TIMEOUT) => {
                this.kill().await;
                return Err(StartError::Silent { tail: this.tail() });
            }
        };
        if v != PROTOCOL {
            this.kill().await;
            return Err(StartError::Protocol { got: v });
        }
        if node_major(&node).is_some_and(|m| m < MIN_NODE_MAJOR) {
            this.kill().await;
            return Err(SpawnError::OldNode {
                node: launch.node.clone(),
                version: node,
            }
            .into());
        }
        this.node = node;
        this.link.send(&ToHost::Init {
            root: &init.root,
            plugins_dir: &init.plugins_dir,
            config: &init.config,
            max_answer_bytes: init.max_answer_bytes,
        });
        Ok(this)
    }

    /// Imports one file and waits for the host's report, its end, or the timeout.
    pub async fn load(
        &mut self,
        ids: &AtomicU64,
        name: &str,
        file: &str,
        timeout: Duration,
    ) -> LoadEnd {
        let id = ids.fetch_add(1, Ordering::Relaxed);
        let rx = self.link.expect_load(id);
        self.link.send(&ToHost::Load { id, name, file });
        tokio::select! {
            r = rx => match r {
                Ok(loaded) => LoadEnd::Reported(Box::new(loaded)),
                Err(_) => LoadEnd::Stopped(self.wait_exit().await),
            },
            exit = self.child.wait() => {
                let exit = describe_wait(exit);
                self.after_exit().await;
                LoadEnd::Stopped(exit)
            }
            _ = tokio::time::sleep(timeout) => LoadEnd::TimedOut,
        }
    }

    /// Waits for the process to end; then its group is killed (nothing it started outlives it) and the
    /// reader has delivered every answer it wrote first.
    pub async fn wait_exit(&mut self) -> String {
        let exit = describe_wait(self.child.wait().await);
        self.after_exit().await;
        exit
    }

    async fn after_exit(&mut self) {
        self.kill_group(Signal::SIGKILL);
        // A grandchild holding fd 3 or stderr open would keep these waiting; its group was just killed,
        // and past a second what they hold is not worth waiting for.
        for task in [self.reader.take(), self.stderr_drain.take()]
            .into_iter()
            .flatten()
        {
            let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
        }
    }

    /// Kills the process group and waits for the process.
    pub async fn kill(&mut self) -> String {
        self.kill_group(Signal::SIGKILL);
        self.wait_exit().await
    }

    pub fn kill_group(&self, signal: Signal) {
        if self.pid > 0 {
            // ESRCH (already gone) is the common case after an exit; nothing to report.
            let _ = killpg(Pid::from_raw(self.pid as i32), signal);
        }
    }

    /// The host's last words on stderr: a fatal error if it printed one, else its last line.
    pub fn last_words(&self) -> Option<String> {
        let t = self.tail.lock().ok()?;
        t.fatal.clone().or_else(|| t.lines.back().cloned())
    }

    /// Whether the host said it ran out of heap.
    pub fn ran_out_of_memory(&self) -> bool {
        self.tail.lock().is_ok_and(|t| {
            t.fatal
                .as_deref()
                .is_some_and(|f| f.contains("heap out of memory"))
        })
    }

    fn tail(&self) -> Vec<String> {
        self.tail
            .lock()
            .map(|t| t.lines.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// "exit code 3" or "signal SIGKILL": how a process ended, in the words of the log rows.
pub fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        format!("exit code {code}")
    } else if let Some(sig) = status.signal() {
        match Signal::try_from(sig) {
            Ok(s) => format!("signal {}", s.as_str()),
            Err(_) => format!("signal {sig}"),
        }
    } else {
        "an unknown end".into()
    }
}

fn describe_wait(r: std::io::Result<ExitStatus>) -> String {
    match r {
        Ok(s) => describe_exit(s),
        Err(e) => format!("an end that could not be read: {e}"),
    }
}

/// Reads the host's stdout or stderr line by line into the daemon's log, keeping stderr's tail.
async fn drain_output(
    stream: impl AsyncRead + Unpin,
    pid: u32,
    which: &'static str,
    tail: Option<Arc<Mutex<Tail>>>,
) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    let mut throttle = Throttle::new(pid, which);
    loop {
        // While lines are being dropped, a quiet second still reports how many: a flood that stops is
        // counted when it stops, not when the next line happens to come.
        let read = if throttle.dropped > 0 {
            tokio::select! {
                r = read_line_capped(&mut reader, &mut buf) => r,
                _ = tokio::time::sleep_until(throttle.window_end()) => {
                    throttle.roll();
                    continue;
                }
            }
        } else {
            read_line_capped(&mut reader, &mut buf).await
        };
        let n = match read {
            Ok(0) | Err(_) => {
                throttle.roll();
                return;
            }
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end_matches(['\n', '\r']);
        let cut = if n > buf.len() { " …(cut)" } else { "" };
        if throttle.admit() {
            tracing::info!(target: "ovai::plugin_output", pid, stream = which, "{line}{cut}");
        }
        if let Some(tail) = &tail
            && let Ok(mut t) = tail.lock()
        {
            if t.lines.len() == STDERR_TAIL {
                t.lines.pop_front();
            }
            t.lines.push_back(format!("{line}{cut}"));
            if line.starts_with("FATAL ERROR") {
                t.fatal = Some(line.to_string());
            }
        }
        buf.clear();
    }
}

/// At most MAX_LOG_LINES_PER_S lines a second into the daemon's log; the rest are counted.
struct Throttle {
    pid: u32,
    which: &'static str,
    window: tokio::time::Instant,
    logged: u32,
    dropped: u64,
}

impl Throttle {
    fn new(pid: u32, which: &'static str) -> Self {
        Self {
            pid,
            which,
            window: tokio::time::Instant::now(),
            logged: 0,
            dropped: 0,
        }
    }

    fn window_end(&self) -> tokio::time::Instant {
        self.window + Duration::from_secs(1)
    }

    fn admit(&mut self) -> bool {
        if tokio::time::Instant::now() >= self.window_end() {
            self.roll();
        }
        if self.logged < MAX_LOG_LINES_PER_S {
            self.logged += 1;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Reports what was dropped and starts a new second.
    fn roll(&mut self) {
        if self.dropped > 0 {
            tracing::warn!(
                target: "ovai::plugin_output",
                pid = self.pid,
                stream = self.which,
                "{} lines of plugin output were not logged (more than {MAX_LOG_LINES_PER_S} a second)",
                self.dropped
            );
        }
        self.window = tokio::time::Instant::now();
        self.logged = 0;
        self.dropped = 0;
    }
}

/// Reads one line, keeping at most MAX_LOG_LINE bytes of it; returns the line's full length.
async fn read_line_capped<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let room = MAX_LOG_LINE.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = chunk.len();
        total += used;
        reader.consume(used);
        if done {
            return Ok(total);
        }
    }
}
