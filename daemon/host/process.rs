//! One host process from start to end: spawned, greeted (`ready`, then `init`), asked to import files,
//! and finally waited for or killed with its whole process group.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::task::JoinHandle;

use super::child::{Launch, MIN_NODE_MAJOR, SpawnError, node_major};
use super::ending::{Exit, READY_TIMEOUT, StartError};
use super::link::{Link, max_line_len};
use super::output::{self, StderrTail};
use super::protocol::{Loaded, PROTOCOL, ToHost, ToImport};
use super::where_held::{Frame, Watch};
use crate::sync::lock;

/// How often a host importing files together is asked whether its event loop turns.
const ASK_EVERY: Duration = Duration::from_millis(100);

/// What every call's context shares, sent once to each new process.
#[derive(Clone)]
pub struct HostInit {
    pub root: String,
    pub plugins_dir: String,
    pub config: serde_json::Value,
    pub max_answer_bytes: usize,
    /// Where an error a plugin leaves behind outside a call is written (none for `ovai check`).
    pub log: Option<Arc<crate::runtime_log::RuntimeLog>>,
    /// The places of those errors written already: shared by the hosts of one import, fresh for each.
    pub strays: super::link::StrayBook,
    /// Tool files changed since the generation read them: a new host imports them not at all, nor lets
    /// another file import them.
    pub unread: Vec<String>,
    /// The host starts its second thread at once, not once its imports are done: it is to say where
    /// an import holds its event loop (a host before it was held there).
    pub rescuer_first: bool,
}

pub struct HostProcess {
    child: Child,
    pub link: Arc<Link>,
    /// The task reading the host's fd 4, and the ones draining stdout and stderr: joined after an exit, so every
    /// answer the host wrote is delivered and the stderr tail holds its last words.
    readers: Vec<JoinHandle<()>>,
    pub pid: u32,
    /// The Node version the host reported.
    pub node: String,
    /// The last lines the host wrote to stderr.
    tail: Arc<Mutex<StderrTail>>,
    /// It runs in a bubblewrap box (whose exit codes stand for the host's signals).
    boxed: bool,
    /// Its watcher thread's socket, which says where a held main thread is.
    watch: Watch,
    /// Its end was waited for and its group killed: the pid may be another's by now.
    ended: bool,
    /// What its box may hold, and its control group where it has one.
    bounds: super::bounds::Bounds,
    group: Option<super::bounds::HostGroup>,
}

/// A host given up on before its end was waited for (an import cut short by a restart or shutdown) takes
/// its process group with it.
impl Drop for HostProcess {
    fn drop(&mut self) {
        if !self.ended {
            self.kill_group(Signal::SIGKILL);
        }
    }
}

/// How importing several files at once ended.
pub enum Together {
    /// Each file's report, by position, and the positions that had none when the timeout came: with
    /// `blocked`, because the host stopped answering (its event loop held: `held_at` says where), else
    /// because they wait for something while it answers.
    Done {
        reported: Vec<(usize, Box<Loaded>)>,
        pending: Vec<usize>,
        blocked: bool,
    },
    /// The process ended while importing, how; which file ended it is known only if the host said.
    Stopped(Exit),
}

impl HostProcess {
    pub async fn start(launch: &Launch, init: &HostInit) -> Result<Self, StartError> {
        let mut spawned = launch.spawn()?;
        let group = spawned.group.take();
        let mut child = spawned.child;
        let pid = spawned.pid;
        let watch = Watch::new(spawned.watch);
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(tokio::spawn(output::drain(out, pid, "stdout", None)));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(output::drain(
                err,
                pid,
                "stderr",
                Some(tail.clone()),
            )));
        }
        let (link, ready, reader) = Link::start(
            spawned.channel,
            pid,
            max_line_len(init.max_answer_bytes),
            init.log.clone(),
            init.strays.clone(),
        );
        readers.push(reader);
        let mut this = Self {
            child,
            link,
            readers,
            pid,
            node: String::new(),
            tail,
            boxed: launch.isolation.is_boxed(),
            watch,
            ended: false,
            bounds: launch.bounds.clone(),
            group,
        };
        // A box that fails to set up exits at once: that is seen then, not READY_TIMEOUT later (something
        // else may still hold fd 4 open).
        enum Before {
            Ready(Result<(u32, String), tokio::sync::oneshot::error::RecvError>),
            Exited,
            Silent,
        }
        let before = tokio::select! {
            r = ready => Before::Ready(r),
            _ = this.child.wait() => Before::Exited,
            _ = tokio::time::sleep(READY_TIMEOUT) => Before::Silent,
        };
        let (v, node) = match before {
            Before::Ready(Ok(r)) => r,
            Before::Ready(Err(_)) | Before::Exited => {
                let exit = this.wait_exit().await;
                return Err(StartError::Exited {
                    exit,
                    tail: this.tail(),
                });
            }
            Before::Silent => {
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
            key: this.link.host_key(),
            unread: &init.unread,
            rescuer_first: init.rescuer_first,
            boxed: this.boxed,
        });
        Ok(this)
    }

    /// Imports the files all at once and waits for every report or the process's end. Files still
    /// importing once the host has answered pings for `timeout` since the last report are given up on:
    /// the time counts only while its event loop turns, so a file that holds it for a while (a busy
    /// loop, a synchronous child process) costs the others nothing. A host that answers nothing for
    /// `timeout` is blocked.
    pub async fn load_together(
        &mut self,
        ids: &AtomicU64,
        files: &[(usize, &ToImport)],
        timeout: Duration,
    ) -> Together {
        let mut waiting = FuturesUnordered::new();
        let mut pending = HashMap::new();
        for (i, f) in files {
            let id = ids.fetch_add(1, Ordering::Relaxed);
            let (key, rx) = self.link.expect_load(id);
            self.link.send(&ToHost::Load {
                id,
                name: &f.name,
                file: &f.path,
                key,
            });
            pending.insert(*i, id);
            let i = *i;
            waiting.push(async move { (i, rx.await) });
        }
        let mut reported = Vec::new();
        // The host's time answering since the last report, and its time answering nothing in a row.
        let mut free = Duration::ZERO;
        let mut stuck = Duration::ZERO;
        let mut tick = tokio::time::interval(ASK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = tokio::time::Instant::now();
        self.link.ask();
        let blocked = loop {
            tokio::select! {
                biased;
                next = waiting.next() => match next {
                    Some((i, Ok(loaded))) => {
                        pending.remove(&i);
                        reported.push((i, Box::new(loaded)));
                        free = Duration::ZERO;
                    }
                    Some((_, Err(_))) => return Together::Stopped(self.wait_exit().await),
                    None => break false,
                },
                exit = self.child.wait() => {
                    let exit = Exit::of_wait(exit, self.boxed);
                    self.after_exit().await;
                    return Together::Stopped(exit);
                }
                now = tick.tick() => {
                    let passed = now - last;
                    last = now;
                    if self.link.answered() {
                        free += passed;
                        stuck = Duration::ZERO;
                        self.link.ask();
                    } else {
                        stuck += passed;
                    }
                    if free >= timeout {
                        break false;
                    }
                    if stuck >= timeout {
                        break true;
                    }
                }
            }
        };
        for id in pending.values() {
            self.link.forget_load(*id);
        }
        let mut pending: Vec<usize> = pending.into_keys().collect();
        pending.sort_unstable();
        Together::Done {
            reported,
            pending,
            blocked,
        }
    }

    /// Resolves once the process has ended (its group and readers are left to `wait_exit`).
    pub async fn ended(&mut self) {
        let _ = self.child.wait().await;
    }

    /// Waits for the process to end; then its group is killed (nothing it started outlives it) and the
    /// readers have delivered everything it wrote first.
    pub async fn wait_exit(&mut self) -> Exit {
        let exit = Exit::of_wait(self.child.wait().await, self.boxed);
        self.after_exit().await;
        exit
    }

    async fn after_exit(&mut self) {
        self.kill_group(Signal::SIGKILL);
        self.ended = true;
        // A grandchild holding fd 4 or stderr open would keep these waiting; its group was just killed,
        // and past a second what they hold is not worth waiting for.
        for task in self.readers.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
        }
    }

    /// Kills the process group and waits for the process.
    pub async fn kill(&mut self) -> Exit {
        self.kill_group(Signal::SIGKILL);
        self.wait_exit().await
    }

    pub fn kill_group(&self, signal: Signal) {
        // Once its end was waited for, the pid may be another process's group by now.
        if self.pid > 0 && !self.ended {
            // ESRCH (already gone) is the common case after an exit; nothing to report.
            let _ = killpg(Pid::from_raw(self.pid as i32), signal);
        }
    }

    /// The host's last words on stderr: which plugin ended it, a fatal error, or its last line.
    pub fn last_words(&self, within: Duration) -> Option<String> {
        lock(&self.tail).last_words(within)
    }

    /// Where the host's main thread is held, innermost first: for a host that stopped answering, just
    /// before it is killed.
    pub async fn held_at(&mut self) -> Vec<Frame> {
        self.watch.stack().await
    }

    /// Whether the host said it ran out of heap.
    pub fn ran_out_of_memory(&self) -> bool {
        lock(&self.tail).ran_out_of_memory()
    }

    /// How to look at its box's counts: its control group's, or its processes as the daemon sees them.
    pub fn look(&self) -> super::bounds::Look {
        match &self.group {
            Some(group) => group.look(&self.bounds),
            None => super::bounds::Look::tree(&self.bounds, self.pid),
        }
    }

    fn tail(&self) -> Vec<String> {
        lock(&self.tail).lines()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_descriptors_is_transient_and_no_node_is_not() {
        let spawn = |errno: nix::errno::Errno| {
            StartError::Spawn(SpawnError::Io {
                node: "node".into(),
                source: std::io::Error::from_raw_os_error(errno as i32),
            })
        };
        assert!(spawn(nix::errno::Errno::EMFILE).is_transient());
        assert!(spawn(nix::errno::Errno::EAGAIN).is_transient());
        assert!(!spawn(nix::errno::Errno::EACCES).is_transient());
        assert!(!StartError::Spawn(SpawnError::NoNode("node".into())).is_transient());
        assert_eq!(Exit::Code(3).to_string(), "exit code 3");
        assert_eq!(Exit::Signal("SIGKILL".into()).to_string(), "signal SIGKILL");
    }
}
