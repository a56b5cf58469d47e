//! The plugin host: a supervised Node child that imports plugins and runs their `run`.
//!
//! A call goes `prepare` (here: its line for the live host) and `Ready::send`, with no task of its own;
//! or, when no host is up and over HTTP, `call`, a task that waits for one. Either way: `supervisor` (the
//! generation's live host) → `link` (one NDJSON line on the host's fd 3, the answer back on its fd 4) →
//! the host shim → the plugin. Around it: `child` starts
//! a process (its two protocol pipes and the watcher's socket, process group, minimal environment),
//! `output` drains its stdout and stderr, `process` greets it and imports files, `import` imports a
//! generation's files (leaving out one that ends the host or holds its event loop), `ending` types why
//! a host or a call on it ended, `where_held` asks a host that stopped answering where a plugin holds
//! it, and `host_rows` words the host's runtime.log rows. Plugin code never runs in the daemon.

pub mod supervisor;
#[cfg(target_os = "linux")]
pub mod userns;
pub mod import;
pub mod blame;
pub mod process;
pub mod link;
pub mod output;
pub mod where_held;
pub mod host_rows;
pub mod ending;
pub mod child;
pub mod bounds;
pub mod protocol;
pub mod sandbox;
#[cfg(target_os = "linux")]
pub mod seccomp;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use ending::{NoHost, NotReimported};
use link::{CallEnd, End};
use protocol::Answer;
use protocol::ToHost;
pub use supervisor::{CallGuard, Host};

/// The host shim, embedded so a single binary is the whole install; written to `.ovai/host.mjs` at start.
pub const SHIM: &str = include_str!("../../host-shim/host.mjs");

/// One call of a plugin, as the MCP session hands it over.
pub struct CallRequest<'a> {
    pub tool: &'a str,
    /// `plugins/NAME.mjs`, for every sentence about this call.
    pub file: &'a Arc<str>,
    /// The arguments as the caller wrote them (a JSON object), checked against the tool's schema: sent
    /// on as they are.
    pub args: &'a str,
    pub seat: &'a str,
    pub role: &'a str,
    /// Where the plugin's progress reports go, when the caller asked for them.
    pub progress: Option<Arc<dyn link::Progressed>>,
    /// The call's W3C trace context, for the plugin to pass on.
    pub traceparent: Option<&'a str>,
}

/// How a plugin call ended; `answer` puts it into the caller's words.
#[derive(Debug)]
pub enum Ended {
    /// The host answered for the plugin (its text, its refusal, or what it did instead).
    Answered(Box<Answer>),
    /// The host ended while the call ran.
    HostEnded(link::Stopped),
    /// No host could take the call.
    NotRun(NoHost),
    /// The plugin's file did not import again when its host was respawned.
    NotReimported(NotReimported),
    /// The call reached its deadline (`callTimeoutSeconds`); its signal fired. `silent`: its host
    /// answered nothing at all in that time.
    Deadline { limit: Duration, silent: bool },
    /// The caller cancelled it.
    Cancelled,
    /// The caller cancelled it while it waited for a host: no host was sent it.
    Unsent,
}

/// Runs one call to its end, in the caller's task: an answer, the host's end, the deadline, or the
/// caller's cancellation. The caller holds the host's [`supervisor::CallGuard`] for the whole call.
pub async fn call(
    host: &Arc<Host>,
    req: CallRequest<'_>,
    deadline: Duration,
    cancel: &CancellationToken,
) -> Ended {
    call_from(host, req, deadline, Instant::now(), None, cancel).await
}

/// `call`, for a call that started at `started` and, when `gone` names one, was sent to that link,
/// whose host ended without receiving it (a call with no task of its own, taken up by one).
pub async fn call_from(
    host: &Arc<Host>,
    req: CallRequest<'_>,
    deadline: Duration,
    started: Instant,
    gone: Option<Arc<link::Link>>,
    cancel: &CancellationToken,
) -> Ended {
    // A host that ended without ever being sent the call: it runs on the host started next, once (a
    // second such end is the host's to answer for).
    let mut gone = gone;
    let due = tokio::time::Instant::from_std(started) + deadline;
    loop {
        let left = deadline.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Ended::Deadline {
                limit: deadline,
                silent: false,
            };
        }
        let link = tokio::select! {
            // A host being started is waited for as long as the call may take: a seat change's drain
            // (10 s) and the next host's reading of plugins/ can take longer than any fixed wait.
            l = host.link_other_than(gone.as_ref(), left) => l,
            _ = cancel.cancelled() => return Ended::Unsent,
        };
        let ready = match link {
            Ok(link) => match prepare(host, link, &req) {
                Ok(ready) => ready,
                Err(why) => return Ended::NotReimported(why),
            },
            Err(why) => return Ended::NotRun(why),
        };
        let (link, id) = (ready.link.clone(), ready.id);
        let (tx, rx) = tokio::sync::oneshot::channel();
        if ready.send(due, Box::new(Waiter(tx))).is_err() {
            // The host ended between the look-up and the registration, and never saw the call.
            if gone.is_some() {
                return Ended::NotRun(NoHost::Ended);
            }
            gone = Some(link);
            continue;
        }
        let end = tokio::select! {
            end = rx => end,
            _ = cancel.cancelled() => {
                if link.withdraw(id).is_some() {
                    link.send(&ToHost::Cancel {
                        id,
                        why: "the caller cancelled the call",
                        timeout: false,
                    });
                }
                return Ended::Cancelled;
            }
        };
        match end {
            Ok(End::Call(CallEnd::Answered(a))) => return Ended::Answered(a),
            Ok(End::Call(CallEnd::HostStopped(why))) => return Ended::HostEnded(why),
            // Its line never reached the host whole (the pipe failed under it).
            Ok(End::Call(CallEnd::NotReceived)) => {
                if gone.is_some() {
                    return Ended::NotRun(NoHost::Ended);
                }
                gone = Some(link);
            }
            Ok(End::Expired { silent }) => {
                return Ended::Deadline {
                    limit: deadline,
                    silent,
                };
            }
            Ok(End::Cancelled) => return Ended::Cancelled,
            // The link is dropped only after it has answered every call it held.
            Err(_) => return Ended::NotRun(NoHost::Ended),
        }
    }
}

/// A task waiting for its call's end on a channel.
struct Waiter(tokio::sync::oneshot::Sender<End>);

impl link::Settle for Waiter {
    fn end(self: Box<Self>, how: End) {
        let _ = self.0.send(how);
    }
}

/// Why the live host does not answer `tool`'s calls (its file was left out when the host was made
/// again), if it does not.
pub fn unavailable(host: &Arc<Host>, tool: &str) -> Option<NotReimported> {
    host.live_link()?.unavailable(tool)
}

/// Makes a call's line for `link` (the live host's, `Host::live_link`), for a call with no task waiting
/// on it (`Ready::send`); refused when that host does not serve the tool.
pub fn prepare(
    host: &Arc<Host>,
    link: Arc<link::Link>,
    req: &CallRequest<'_>,
) -> Result<Ready, NotReimported> {
    if let Some(why) = link.unavailable(req.tool) {
        return Err(why);
    }
    let id = host.next_id();
    let key = link.call_key();
    let line = ToHost::Call {
        id,
        tool: req.tool,
        args: req.args,
        seat: req.seat,
        role: req.role,
        progress: req.progress.is_some(),
        key,
        traceparent: req.traceparent,
    }
    .line();
    Ok(Ready {
        link,
        id,
        key,
        file: req.file.clone(),
        seat: Arc::from(req.seat),
        line,
        progress: req.progress.clone(),
    })
}

/// A call's line, made for the live host's link.
pub struct Ready {
    link: Arc<link::Link>,
    id: u64,
    key: u64,
    file: Arc<str>,
    seat: Arc<str>,
    line: Vec<u8>,
    progress: Option<Arc<dyn link::Progressed>>,
}

impl Ready {
    pub fn link(&self) -> &Arc<link::Link> {
        &self.link
    }

    /// The call's id on its host.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Registers the call with its link (which keeps `deadline`) and sends it: `settle` hears how it
    /// ends, on the link's own tasks, and is told `NotReceived` at once if the host is already gone.
    /// Gives `settle` back, told nothing, when the link's host has ended and its calls were answered.
    pub fn send<S: link::Settle + 'static>(
        self,
        deadline: tokio::time::Instant,
        settle: Box<S>,
    ) -> Result<(), Box<S>> {
        self.link.expect(
            self.id,
            (self.file, self.seat),
            self.key,
            deadline,
            settle,
            self.progress,
        )?;
        if !self.link.send_line(self.line)
            && let Some(settle) = self.link.withdraw(self.id)
        {
            settle.end(End::Call(CallEnd::NotReceived));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ending::HostEnd;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    use supervisor::HostState;
    use tokio::sync::watch;

    /// A link whose host end is the other half of a socket pair, returned for the test to speak.
    fn link(pid: u32) -> (Arc<link::Link>, UnixStream) {
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        let halves = crate::unix_io::split(ours).expect("the halves");
        let (link, _ready, _reader) =
            link::Link::start(halves, pid, 1 << 20, None, Default::default());
        (link, theirs)
    }

    /// Answers the first call that arrives on `end` with `text`, in a thread of its own; gives the end
    /// back (still open) with the call's id.
    fn answer_first_call(
        end: UnixStream,
        text: &'static str,
    ) -> std::thread::JoinHandle<(UnixStream, u64)> {
        std::thread::spawn(move || {
            let mut line = String::new();
            BufReader::new(&end).read_line(&mut line).expect("a line");
            let call: serde_json::Value = serde_json::from_str(&line).expect("a message");
            assert_eq!(call["t"], "call", "{line}");
            let answer = serde_json::json!({ "t": "answer", "id": call["id"], "key": call["key"], "text": text });
            (&end)
                .write_all(format!("{answer}\n").as_bytes())
                .expect("written");
            let id = call["id"].as_u64().expect("an id");
            (end, id)
        })
    }

    fn request<'a>(file: &'a Arc<str>, args: &'a str) -> CallRequest<'a> {
        CallRequest {
            tool: "p",
            file,
            args,
            seat: "s",
            role: "Worker",
            progress: None,
            traceparent: None,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_its_ended_host_never_received_runs_on_the_next_one() {
        // The host ended and its calls were answered, but the supervisor has not taken that in yet: the
        // state still names its link.
        let (ended, _ended_end) = link(1);
        ended.fail_all(&Arc::new(HostEnd::Replaced));
        let (state, watched) = watch::channel(HostState::Up(ended.clone()));
        let host = supervisor::Host::watching(watched);
        let (next, next_end) = link(2);
        let host_side = answer_first_call(next_end, "ran on the next host");
        let (file, args) = (Arc::<str>::from("plugins/p.mjs"), "{}");
        let cancel = CancellationToken::new();
        // Polled first, the call finds the ended link, turns from it and waits for another; then the next
        // host comes up.
        let (end, ()) = tokio::join!(
            call(&host, request(&file, args), Duration::from_secs(5), &cancel),
            async {
                let _ = state.send(HostState::Up(next.clone()));
            }
        );
        match end {
            Ended::Answered(a) => assert_eq!(a.text().as_deref(), Some("ran on the next host")),
            other => panic!("the call runs on the next host: {other:?}"),
        }
        let (_next_end, _) =
            tokio::task::spawn_blocking(move || host_side.join().expect("answered"))
                .await
                .expect("joined");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_look_up_takes_only_a_host_other_than_the_one_that_ended() {
        let (ended, _ended_end) = link(1);
        let (state, watched) = watch::channel(HostState::Up(ended.clone()));
        let host = supervisor::Host::watching(watched);
        let short = Duration::from_millis(50);
        // The same link again is not taken: the look-up waits, and says nothing came back.
        assert!(matches!(
            host.link_other_than(Some(&ended), short).await,
            Err(NoHost::NotBack(d)) if d == short
        ));
        // Without one to avoid, the live link is taken at once.
        let now = host.link_other_than(None, short).await.expect("a link");
        assert!(Arc::ptr_eq(&now, &ended));
        // A respawn in between is waited through; a host that is down is said so.
        let (next, _next_end) = link(2);
        let _ = state.send(HostState::Respawning);
        let (found, ()) = tokio::join!(
            host.link_other_than(Some(&ended), Duration::from_secs(5)),
            async {
                let _ = state.send(HostState::Up(next.clone()));
            }
        );
        assert!(Arc::ptr_eq(&found.expect("the next link"), &next));
        let _ = state.send(HostState::Retired);
        assert!(matches!(
            host.link_other_than(Some(&next), Duration::from_secs(5))
                .await,
            Err(NoHost::Ended)
        ));
    }
}
