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

use super::child::{Launch, SpawnError};
use super::link::{Link, max_line_len};
use super::protocol::{Loaded, PROTOCOL, ToHost};

/// How long a new host may take to say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// The oldest Node the shim is written for.
pub const MIN_NODE_MAJOR: u32 = 18;
/// Lines of the host's stderr kept for the log row that reports its end.
const STDERR_TAIL: usize = 8;
/// A line of the host's stdout or stderr longer than this is cut: output is logs, not data.
const MAX_LOG_LINE: usize = 4096;

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
    pub pid: u32,
    /// The Node version the host reported.
    pub node: String,
    /// The last lines the host wrote to stderr.
    tail: Arc<Mutex<VecDeque<String>>>,
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
    #[error("ovai runs plugins in Node.js {MIN_NODE_MAJOR} or newer, and {node} is {version}. Install a newer Node, or name one with OVAI_NODE.", node = .node.display())]
    OldNode {
        node: std::path::PathBuf,
        version: String,
    },
}

fn tail_clause(tail: &[String]) -> String {
    match tail.last() {
        Some(last) => format!("; its last words on stderr: {last}"),
        None => String::new(),
    }
}

/// How one import ended.
pub enum LoadEnd {
    Reported(Loaded),
    /// The process ended while importing (the file killed it): how it ended.
    Stopped(String),
    TimedOut,
}

impl HostProcess {
    pub async fn start(launch: &Launch, init: &HostInit) -> Result<Self, StartError> {
        let spawned = launch.spawn()?;
        let mut child = spawned.child;
        let pid = spawned.pid;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = child.stdout.take() {
            tokio::spawn(drain_output(out, pid, "stdout", None));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(drain_output(err, pid, "stderr", Some(tail.clone())));
        }
        let (link, ready, reader) =
            Link::start(spawned.channel, pid, max_line_len(init.max_answer_bytes));
        let mut this = Self {
            child,
            link,
            reader: Some(reader),
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
            return Err(StartError::OldNode {
                node: launch.node.clone(),
                version: node,
            });
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
                Ok(loaded) => LoadEnd::Reported(loaded),
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
        if let Some(reader) = self.reader.take() {
            // A grandchild holding fd 3 open would keep the reader waiting; its group was just killed,
            // and past a second the answers it holds are not worth waiting for.
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
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

    pub fn tail(&self) -> Vec<String> {
        self.tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }
}

fn node_major(version: &str) -> Option<u32> {
    version
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
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
    tail: Option<Arc<Mutex<VecDeque<String>>>>,
) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // read_until on a bounded BufReader still grows `buf` without bound on a newline-free flood, so
        // cut it by hand: only the first MAX_LOG_LINE bytes of a line are kept.
        let n = match read_line_capped(&mut reader, &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end_matches(['\n', '\r']);
        let cut = if n > buf.len() { " …(cut)" } else { "" };
        tracing::info!(target: "ovai::plugin_output", pid, stream = which, "{line}{cut}");
        if let Some(tail) = &tail
            && let Ok(mut t) = tail.lock()
        {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(format!("{line}{cut}"));
        }
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
