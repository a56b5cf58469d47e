//! The floor's processes: what a chain of processes costs with no work of ovai's in it.

use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// Answers each request line with a canned tools/call result carrying its id.
pub fn responder() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let Some(id) = id_of(&line) else { continue };
        let _ = writeln!(
            out,
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"ok\"}}],\"isError\":false}}}}"
        );
        let _ = out.flush();
    }
}

/// The id of a request line, as it stands in the JSON.
fn id_of(line: &str) -> Option<&str> {
    let rest = &line[line.find("\"id\":")? + 5..];
    let end = rest.find([',', '}'])?;
    Some(rest[..end].trim())
}

/// Starts `chain` (the next process) and copies bytes both ways with `copy` (one poll loop, or a
/// thread each way); over pipes, or over one Unix socket pair when `socket`.
pub fn relay(chain: &[String], socket: bool, copy: fn(File, File)) {
    let mut cmd = Command::new(&chain[0]);
    cmd.args(&chain[1..]);
    let ours: Option<UnixStream> = if socket {
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        let theirs: OwnedFd = theirs.into();
        let both = theirs.try_clone().expect("the socket's second descriptor");
        cmd.stdin(Stdio::from(theirs)).stdout(Stdio::from(both));
        Some(ours)
    } else {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        None
    };
    let mut child = cmd.spawn().expect("the next process in the chain");
    // Our copies of the child's ends close here, so the child's end is seen.
    drop(cmd);
    let ends: Option<(OwnedFd, OwnedFd)> = match ours {
        Some(ours) => ours.try_clone().ok().map(|to| (to.into(), ours.into())),
        None => child
            .stdin
            .take()
            .zip(child.stdout.take())
            .map(|(to, from)| (to.into(), from.into())),
    };
    if let Some((to_child, from_child)) = ends {
        copy(File::from(to_child), File::from(from_child));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `ovai mcp`'s shape of relay: a thread for each direction, each sleeping in a blocking read.
pub fn copy_on_threads(mut to_child: File, mut from_child: File) {
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut buf = vec![0u8; 64 * 1024];
        // At the end of the input the thread ends, and with it our end of the next process's input.
        while let Ok(n @ 1..) = stdin.read(&mut buf) {
            if to_child.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    let mut stdout = std::io::stdout();
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = from_child.read(&mut buf) {
        if stdout.write_all(&buf[..n]).is_err() || stdout.flush().is_err() {
            break;
        }
    }
}

/// `copy_on_threads` scheduled as `ovai mcp` is (`SCHED_BATCH`): the throughput floors' first relay is
/// the bridge's shape, its scheduling included. Set once the next process is started, which keeps
/// the ordinary policy, as the host does. (The relays and the hub in the daemon's place keep the
/// ordinary policy, where the daemon runs batched: at K=1 and K=32 that was not told apart.)
pub fn copy_on_threads_batched(to_child: File, from_child: File) {
    ovai::sched::schedule_as_batch();
    copy_on_threads(to_child, from_child);
}

/// `files`, which this process was handed open across exec, closed on exec again: whatever it starts
/// holds none of them, so a peer sees their end when this process ends.
fn close_on_exec<'a>(files: impl IntoIterator<Item = &'a File>) {
    for f in files {
        let _ = nix::fcntl::fcntl(
            f,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
    }
}

/// The bridge's shape of relay in front of the hub: a thread each way between its stdio and the two
/// pipes whose descriptors `args` gives (to the hub, from it), as `ovai mcp` holds the daemon's pipes.
pub fn relay_to_fds(args: &[String]) {
    let fds: Vec<i32> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let [to, from] = fds[..] else {
        eprintln!("--floor-relay-fds takes two descriptors, to the hub and from it");
        return;
    };
    // SAFETY: the driver left these two descriptors open for this process alone.
    let (to_hub, from_hub) = unsafe { (File::from_raw_fd(to), File::from_raw_fd(from)) };
    close_on_exec([&to_hub, &from_hub]);
    copy_on_threads_batched(to_hub, from_hub);
}

/// The daemon's shape of relay for many sessions: one poll loop over every session's pipe (the pairs
/// of fds in `args`: from the session's relay, to it) and one responder behind it, which answers in
/// order, so each answer goes back to the session of the oldest line not yet answered. That holds while
/// every line the sessions send is a request with an id, each answered once: the driver sends only
/// `tools/call`s, and a line without one would send every later answer to the wrong session. What comes
/// in together goes on in one write, as the daemon's writers batch.
pub fn hub(args: &[String]) {
    // After `--`, the responder's command (a minimal Node process); otherwise this binary's own.
    let (fds, responder) = match args.iter().position(|a| a == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => (args, &[][..]),
    };
    let fds: Vec<i32> = fds.iter().filter_map(|a| a.parse().ok()).collect();
    // SAFETY: the driver left these fds open for this process; closed on exec again, so the responder
    // holds none of them and a relay sees the hub's end when the hub ends.
    let sessions: Vec<(File, File)> = fds
        .chunks_exact(2)
        .map(|p| unsafe { (File::from_raw_fd(p[0]), File::from_raw_fd(p[1])) })
        .collect();
    close_on_exec(sessions.iter().flat_map(|(a, b)| [a, b]));
    let mut child = match responder.split_first() {
        Some((program, rest)) => {
            let mut cmd = Command::new(program);
            cmd.args(rest);
            cmd
        }
        None => {
            let mut cmd = Command::new(std::env::current_exe().expect("the bench's own path"));
            cmd.arg("--floor-responder");
            cmd
        }
    };
    let mut child = child
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the responder");
    if let (Some(to_resp), Some(from_resp)) = (child.stdin.take(), child.stdout.take()) {
        hub_loop(&sessions, to_resp, from_resp);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The hub's poll loop, until a session or the responder ends.
fn hub_loop(
    sessions: &[(File, File)],
    mut to_resp: std::process::ChildStdin,
    mut from_resp: std::process::ChildStdout,
) {
    let mut partial: Vec<Vec<u8>> = vec![Vec::new(); sessions.len()];
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); sessions.len()];
    let mut answers_partial = Vec::new();
    let mut order = std::collections::VecDeque::new();
    let mut to_send = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut polled: Vec<PollFd> = sessions
            .iter()
            .map(|(from, _)| PollFd::new(from.as_fd(), PollFlags::POLLIN))
            .collect();
        polled.push(PollFd::new(from_resp.as_fd(), PollFlags::POLLIN));
        if poll(&mut polled, PollTimeout::NONE).is_err() {
            break;
        }
        let ready: Vec<bool> = polled
            .iter()
            .map(|f| {
                // An error or a bad descriptor counts too: its read fails and the hub ends.
                f.revents().is_some_and(|r| {
                    r.intersects(
                        PollFlags::POLLIN
                            | PollFlags::POLLHUP
                            | PollFlags::POLLERR
                            | PollFlags::POLLNVAL,
                    )
                })
            })
            .collect();
        drop(polled);
        for (i, (from, _)) in sessions.iter().enumerate() {
            if !ready[i] {
                continue;
            }
            let n = match (&*from).read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            partial[i].extend_from_slice(&buf[..n]);
            if let Some(end) = partial[i].iter().rposition(|b| *b == b'\n') {
                let whole: Vec<u8> = partial[i].drain(..=end).collect();
                order.extend(std::iter::repeat_n(
                    i,
                    whole.iter().filter(|b| **b == b'\n').count(),
                ));
                to_send.extend_from_slice(&whole);
            }
        }
        // Blocking writes hold up nothing here: at most sessions × calls in flight lines (a few KB) are
        // ever outstanding, well within a pipe's 64 KiB.
        if !to_send.is_empty() {
            if to_resp.write_all(&to_send).is_err() {
                break;
            }
            to_send.clear();
        }
        if ready[sessions.len()] {
            let n = match from_resp.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            answers_partial.extend_from_slice(&buf[..n]);
            let mut start = 0;
            while let Some(len) = answers_partial[start..].iter().position(|b| *b == b'\n') {
                let line = &answers_partial[start..=start + len];
                if let Some(i) = order.pop_front() {
                    out[i].extend_from_slice(line);
                }
                start += len + 1;
            }
            answers_partial.drain(..start);
            for (i, (_, to)) in sessions.iter().enumerate() {
                if !out[i].is_empty() {
                    let _ = (&*to).write_all(&out[i]);
                    out[i].clear();
                }
            }
        }
    }
}

pub fn copy_both_ways(mut to_child: File, mut from_child: File) {
    let mut stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(from_child.as_fd(), PollFlags::POLLIN),
        ];
        if poll(&mut fds, PollTimeout::NONE).is_err() {
            return;
        }
        let ready = |f: &PollFd| {
            f.revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP))
        };
        let (up, down) = (ready(&fds[0]), ready(&fds[1]));
        if up {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if to_child.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
        if down {
            match from_child.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if stdout.write_all(&buf[..n]).is_err() || stdout.flush().is_err() {
                        return;
                    }
                }
            }
        }
    }
}
