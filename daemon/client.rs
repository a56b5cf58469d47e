//! The client side of the daemon's socket, synchronous: control requests (`ovai restart`, `ovai status`,
//! `ovai seat`), and the one MCP client of this project (newline-delimited JSON-RPC over any reader and
//! writer), which `ovai call`, the demo, the benchmark and the tests all use.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::instance::Instance;
use crate::wire::{self, ControlOp, Hello, Reply, Welcome};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("No ovai server is running for {root}: start one there with `ovai serve`.")]
    NoServer { root: String },
    /// Reached while it still reads plugins/ at its start: it answers once it has (a status only).
    #[error(
        "The ovai server for {root} (pid {pid}) is starting since {since}: it answers once it has read plugins/."
    )]
    Starting {
        root: String,
        pid: u64,
        since: String,
    },
    #[error(
        "The ovai server for {root} (pid {pid}) is stopping: it finishes its calls in flight, then ends. \
         Start it again with `ovai serve` (which waits for it to end)."
    )]
    Stopping { root: String, pid: u64 },
    #[error("The ovai server for {root} refused the connection: {why}")]
    Refused {
        root: String,
        why: String,
        /// Only a client started again gets in (another secret, the same binary): `Welcome::for_good`.
        for_good: bool,
    },
    /// A control operation the daemon could not do: its sentence.
    #[error("{0}")]
    NotDone(String),
    #[error("Talking to the ovai server failed: {0}.")]
    Io(#[from] std::io::Error),
    #[error("The ovai server answered something this client cannot read: {0}.")]
    Protocol(String),
    #[error(
        "The ovai server for {root} went away before it answered (it was stopped, or it crashed); \
         `ovai status` says whether one runs now."
    )]
    WentAway { root: String },
    #[error(
        "The ovai server for {root}{shown} took the connection and said nothing within {seconds} s: it is \
         stopped or stuck, and what was asked of it is done if it goes on. If it stays so, end its process \
         ({how}; `ovai stop` cannot reach it) and start it again with `ovai serve`: sessions reconnect.",
        shown = .pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        how = .pid.map_or("`pgrep -af 'ovai serve'` finds it".to_string(), |p| format!("`kill {p}`, then `kill -9 {p}` if it stays")),
    )]
    Silent {
        root: String,
        seconds: u64,
        /// The pid serve.lock names, when it can be read.
        pid: Option<u32>,
    },
    #[error(
        "An ovai server (pid {pid}) holds the instance at {root}, but {what} cannot be reached: something \
         removed it or took its place (runtime.log says which). Stop that server (`kill {pid}`) and start it \
         again with `ovai serve`."
    )]
    Unreachable {
        root: String,
        pid: u32,
        /// Its socket, or its control secret, and where.
        what: String,
    },
}

impl ClientError {
    /// Whether trying again may succeed with a server starting or coming back: there was none, or the
    /// one there went (its connection reset) before it answered. A refusal, a failure to reach the
    /// socket at all (its permissions) and a server that said something this client cannot read are
    /// final.
    pub fn may_pass(&self) -> bool {
        use std::io::ErrorKind::*;
        match self {
            ClientError::NoServer { .. }
            | ClientError::Starting { .. }
            | ClientError::Stopping { .. }
            | ClientError::WentAway { .. }
            | ClientError::Silent { .. }
            | ClientError::Unreachable { .. } => true,
            ClientError::Io(e) => {
                matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe)
            }
            ClientError::Protocol(_) | ClientError::Refused { .. } | ClientError::NotDone(_) => {
                false
            }
        }
    }
}

/// Connects to the instance's daemon; a missing socket or a refused connect means none runs, or one
/// that is stopping.
/// Nothing is sent there unless the private folder is this user's alone and the process at the other
/// end of the socket is this user's: a secret goes to nobody else's listener.
pub fn connect(inst: &Instance) -> Result<UnixStream, ClientError> {
    if let Some(why) = inst.private_dir_unsound() {
        return Err(ClientError::NotDone(inst.private_dir_refusal(&why)));
    }
    if let Some(why) = inst.socket_too_long() {
        return Err(ClientError::NotDone(format!(
            "No server can serve the instance at {}: {why}. Move it, and start it with `ovai serve` there.",
            inst.root.display()
        )));
    }
    let absent = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
        )
    };
    let stream = match UnixStream::connect(inst.socket()) {
        Ok(s) => s,
        Err(e) if absent(&e) => {
            // A server starting marks so as soon as it holds the lock, and binds its socket a moment
            // later: it is waited for (a command then reaches it, `ovai stop` included), as is one that
            // bound its socket meanwhile (started, or made it again).
            let give_up = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let none = none_runs(
                    inst,
                    &format!("its socket {}", inst.socket().display()),
                    true,
                );
                if !matches!(none, ClientError::NoServer { .. }) {
                    return Err(none);
                }
                match UnixStream::connect(inst.socket()) {
                    Ok(s) => break s,
                    Err(e) if absent(&e) => {}
                    Err(e) => return Err(ClientError::Io(e)),
                }
                if marked(inst, &inst.starting_marker()).is_none()
                    || std::time::Instant::now() >= give_up
                {
                    return Err(none);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Err(e) => return Err(ClientError::Io(e)),
    };
    let me = nix::unistd::geteuid().as_raw();
    match peer_uid(&stream) {
        Ok(uid) if uid == me => Ok(stream),
        Ok(uid) => Err(ClientError::NotDone(format!(
            "The socket {} is held by a process of another user (uid {uid}), not by an ovai server of yours: \
             nothing was sent there. Stop that process, and start the server again with `ovai serve`.",
            inst.socket().display(),
        ))),
        Err(e) => Err(ClientError::Io(std::io::Error::other(format!(
            "who holds the socket {} cannot be told ({e})",
            inst.socket().display()
        )))),
    }
}

/// The user of the process at the other end of a Unix socket.
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials)
            .map(|c| c.uid())
            .map_err(std::io::Error::from)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        nix::unistd::getpeereid(stream)
            .map(|(uid, _)| uid.as_raw())
            .map_err(std::io::Error::from)
    }
}

/// What a daemon that cannot be reached is: stopping, holding the instance with no socket to reach it
/// by, or not there.
fn none_runs(inst: &Instance, what: &str, socket: bool) -> ClientError {
    let root = inst.root.display().to_string();
    if let Some(m) = marked(inst, &inst.stopping_marker()) {
        return ClientError::Stopping { root, pid: m.pid };
    }
    // A server starting holds the lock before it binds its socket, and marks that it starts at once
    // after taking the lock: looked at again a moment later, it has.
    let starting = || marked(inst, &inst.starting_marker()).is_some();
    if starting() {
        return ClientError::NoServer { root };
    }
    let holder = lock_holder(inst).filter(|pid| *pid != std::process::id());
    // Starting, or started meanwhile (its marker gone, its socket there): not one that cannot be
    // reached. A loaded machine may hold a start between its lock and its marker a while.
    let bound =
        || std::fs::symlink_metadata(inst.socket()).is_ok_and(|m| m.file_type().is_socket());
    for _ in 0..20 {
        if holder.is_none() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        if starting() || (socket && bound()) {
            return ClientError::NoServer { root };
        }
    }
    match holder {
        Some(pid) => ClientError::Unreachable {
            root,
            pid,
            what: what.to_string(),
        },
        _ => ClientError::NoServer { root },
    }
}

/// The process that holds serve.lock, as the kernel lists its locks (Linux), without taking the lock:
/// a daemon starting then would find it held. Believed only for the pid serve.lock names, alive.
fn lock_holder(inst: &Instance) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(inst.serve_lock()).ok()?;
    let named = lock_names(inst)?;
    // Matched by inode: a file system's own device numbers (btrfs' subvolumes) may differ from the one
    // the list gives.
    let inode = format!(":{}", m.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after the number, and
    // a holder outside this pid namespace is listed as pid 0.
    let held = locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        matches!(fields.as_slice(), [_, "FLOCK", _, _, pid, at, ..]
            if at.ends_with(&inode) && pid.parse() == Ok(named))
    });
    (held && alive(named)).then_some(named)
}

/// The pid serve.lock names: the daemon that took it last.
fn lock_names(inst: &Instance) -> Option<u32> {
    crate::files::read_regular(&inst.serve_lock(), 64)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether a process of this pid runs (another user's too).
fn alive(pid: u32) -> bool {
    i32::try_from(pid).ok().filter(|p| *p > 0).is_some_and(|p| {
        matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None),
            Ok(()) | Err(nix::errno::Errno::EPERM)
        )
    })
}

/// A daemon's marker of where it is (starting, stopping), when the daemon that wrote it runs still.
pub struct Marked {
    pub pid: u64,
    pub since: String,
}

/// The marker at `path`, believed only when the daemon holding serve.lock (its pid written there) wrote
/// it and is alive: a marker a dead daemon left says nothing. The lock itself is not taken, not even
/// for a moment: a daemon starting then would find it held.
pub fn marked(inst: &Instance, path: &std::path::Path) -> Option<Marked> {
    let text = crate::files::read_regular(path, 4096).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let pid = v["pid"].as_u64()?;
    let holder = u64::from(lock_names(inst)?);
    let alive = u32::try_from(pid).is_ok_and(alive);
    // And its pid, given since to another process, is that process's only if it started when the
    // marker says (where the system says when processes start).
    let same = match (
        v["started"].as_u64(),
        u32::try_from(pid).ok().and_then(crate::process_start::of),
    ) {
        (Some(marked), Some(now)) => marked == now,
        _ => true,
    };
    (holder == pid && alive && same).then(|| Marked {
        pid,
        since: v["since"].as_str().unwrap_or("").to_string(),
    })
}

/// Reads one line byte by byte, so nothing after it is taken from the stream (the bridge relays the rest).
pub fn read_line_unbuffered(stream: &mut impl Read, max: usize) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte)? {
            0 => break,
            _ if byte[0] == b'\n' => break,
            _ => line.push(byte[0]),
        }
        if line.len() > max {
            return Err(std::io::Error::other("the answer line is too long"));
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// As `read_line_unbuffered`, keeping the descriptors that come with the line.
fn read_line_receiving(
    stream: &UnixStream,
    max: usize,
    fds: &mut Vec<std::os::fd::OwnedFd>,
) -> std::io::Result<String> {
    let mut line = Vec::new();
    while let Some(byte) = recv_byte_and_fds(stream, fds)? {
        if byte == b'\n' {
            break;
        }
        line.push(byte);
        if line.len() > max {
            return Err(std::io::Error::other("the answer line is too long"));
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Presents a seat's secret; on success the stream is the seat's MCP session. A server still reading
/// its plugins (`starting.json`) is waited for past `patience`, as the bridge waits.
pub fn hello_seat(
    inst: &Instance,
    stream: &mut UnixStream,
    secret: &str,
    patience: Duration,
) -> Result<(), ClientError> {
    // A server that turns the connection away answers and closes at once, perhaps before the hello is
    // written: its answer is still there to read, and says more than the broken pipe.
    let hello = Hello::seat(secret).from_root(&inst.root);
    let sent = stream.write_all(wire::line(&hello).as_bytes());
    let mut starting = || marked(inst, &inst.starting_marker()).is_some();
    read_welcome(inst, stream, patience, sent, None, &mut starting).map(drop)
}

/// A seat's session carried by two pipes: lines to the daemon go into `write`, its lines come out of `read`.
pub struct SeatPipes {
    pub write: std::fs::File,
    pub read: std::fs::File,
}

/// Presents a seat's secret and offers to take two pipes for the session's lines. `None`: the daemon
/// did not make them (an older one, or one out of descriptors), and the stream is the session, as after
/// `hello_seat`.
/// `keep_waiting`: asked each time `patience` passes with no welcome; true waits that long again on the
/// same connection (a server still reading its plugins answers once it serves).
pub fn hello_seat_over_pipes(
    inst: &Instance,
    stream: &mut UnixStream,
    secret: &str,
    patience: Duration,
    keep_waiting: &mut dyn FnMut() -> bool,
) -> Result<Option<SeatPipes>, ClientError> {
    let hello = Hello {
        pipes: true,
        ..Hello::seat(secret).from_root(&inst.root)
    };
    let sent = stream.write_all(wire::line(&hello).as_bytes());
    let mut fds = Vec::new();
    let welcome = read_welcome(inst, stream, patience, sent, Some(&mut fds), keep_waiting)?;
    if !welcome.pipes {
        return Ok(None);
    }
    let n = fds.len();
    let (Some(read), Some(write), None) = (fds.pop(), fds.pop(), fds.pop()) else {
        return Err(ClientError::Protocol(format!(
            "the welcome said it came with two pipes, and it came with {n} descriptors"
        )));
    };
    for (fd, mode, end) in [
        (&write, nix::fcntl::OFlag::O_WRONLY, "the end to write into"),
        (&read, nix::fcntl::OFlag::O_RDONLY, "the end to read from"),
    ] {
        if !is_pipe_end(fd, mode) {
            return Err(ClientError::Protocol(format!(
                "the welcome came with descriptors, and {end} is not that end of a pipe"
            )));
        }
    }
    Ok(Some(SeatPipes {
        write: write.into(),
        read: read.into(),
    }))
}

/// Whether `fd` is a pipe open for `mode` alone.
fn is_pipe_end(fd: &std::os::fd::OwnedFd, mode: nix::fcntl::OFlag) -> bool {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use nix::sys::stat::{SFlag, fstat};
    let is_pipe = fstat(fd)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFIFO);
    is_pipe
        && fcntl(fd, FcntlArg::F_GETFL)
            .is_ok_and(|f| OFlag::from_bits_truncate(f) & OFlag::O_ACCMODE == mode)
}

/// One byte of a socket, and any descriptors that come with it (close-on-exec as they arrive).
fn recv_byte_and_fds(
    stream: &UnixStream,
    fds: &mut Vec<std::os::fd::OwnedFd>,
) -> std::io::Result<Option<u8>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::{AsRawFd, FromRawFd, RawFd};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let msg = loop {
        match recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other?,
        }
    };
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            // SAFETY: the kernel installed these descriptors in this process for this message alone;
            // each gets exactly one owner, which closes it.
            fds.extend(
                raw.into_iter()
                    .map(|fd| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    Ok((msg.bytes > 0).then_some(byte[0]))
}

/// The daemon's answer to a hello, as a refusal when it says no; with `fds`, the descriptors that came
/// with it too.
fn read_welcome(
    inst: &Instance,
    stream: &mut UnixStream,
    patience: Duration,
    sent: std::io::Result<()>,
    mut fds: Option<&mut Vec<std::os::fd::OwnedFd>>,
    keep_waiting: &mut dyn FnMut() -> bool,
) -> Result<Welcome, ClientError> {
    stream.set_read_timeout(Some(patience))?;
    let line = loop {
        let read = match fds.as_deref_mut() {
            Some(fds) => read_line_receiving(stream, 64 * 1024, fds),
            None => read_line_unbuffered(stream, 64 * 1024),
        };
        match read {
            Ok(line) if !line.is_empty() => break line,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if keep_waiting() {
                    continue;
                }
                return Err(silent(inst, patience));
            }
            other => {
                sent?;
                break other?;
            }
        }
    };
    stream.set_read_timeout(None)?;
    if line.is_empty() {
        return Err(ClientError::WentAway {
            root: inst.root.display().to_string(),
        });
    }
    let welcome: Welcome =
        serde_json::from_str(&line).map_err(|e| ClientError::Protocol(e.to_string()))?;
    if !welcome.ok {
        return Err(ClientError::Refused {
            root: inst.root.display().to_string(),
            why: ensure_period(welcome.error.unwrap_or_else(|| "no reason given".into())),
            for_good: welcome.for_good,
        });
    }
    Ok(welcome)
}

/// A server that took the connection and said nothing for `patience`.
fn silent(inst: &Instance, patience: Duration) -> ClientError {
    ClientError::Silent {
        root: inst.root.display().to_string(),
        seconds: patience.as_secs(),
        pid: lock_names(inst),
    }
}

/// A sentence ends with one period, whoever made it.
fn ensure_period(mut s: String) -> String {
    if !s.ends_with(['.', '!', '?']) {
        s.push('.');
    }
    s
}

/// Says that a command waits for a server still reading its plugins (`starting.json`'s mark).
pub fn say_starting(inst: &Instance, m: &Marked) {
    eprintln!(
        "ovai: the server for {} (pid {}) is starting, reading plugins/ since {}: this waits until it serves.",
        inst.root.display(),
        m.pid,
        m.since
    );
}

/// How long a command waits in silence before it says it waits (a control operation, a check's or a
/// restart's imports).
pub const SAY_WAITING_AFTER: Duration = Duration::from_secs(5);

/// One control operation and its typed reply.
pub fn control<T: DeserializeOwned>(inst: &Instance, op: ControlOp) -> Result<T, ClientError> {
    control_because(inst, op, None)
}

/// One control operation, saying who asks (for runtime.log), and its typed reply.
pub fn control_because<T: DeserializeOwned>(
    inst: &Instance,
    op: ControlOp,
    why: Option<&str>,
) -> Result<T, ClientError> {
    // Connected first: a server starting writes its secret before it binds its socket, so the file
    // read then is the one of the server reached (read before, it could be the last server's).
    let mut stream = connect(inst)?;
    // A server marks that it starts before it binds its socket: connected, a status asked of one still
    // reading plugins/ would wait in its backlog until it is up, so it is said to be starting instead
    // (the marker looked at before connecting may have been written just after).
    let starting = marked(inst, &inst.starting_marker());
    if let Some(m) = &starting {
        if matches!(op, ControlOp::Status) {
            return Err(ClientError::Starting {
                root: inst.root.display().to_string(),
                pid: m.pid,
                since: m.since.clone(),
            });
        }
        // Anything else is done once the server serves: said, so that the wait is not taken for a hang.
        say_starting(inst, m);
    }
    let read = || crate::files::read_regular(&inst.control_secret(), 4096);
    let mut secret = read();
    // Removed under a server that holds the instance, it is made again within a moment.
    if secret
        .as_ref()
        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        && lock_holder(inst).is_some()
    {
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(50));
            secret = read();
            if secret.is_ok() {
                break;
            }
        }
    }
    let secret = secret.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => none_runs(
            inst,
            &format!("its control secret {}", inst.control_secret().display()),
            false,
        ),
        _ => ClientError::Io(std::io::Error::new(
            e.kind(),
            format!("{} cannot be read: {e}", inst.control_secret().display()),
        )),
    })?;
    // A daemon that never answers is a failure with a sentence, not a command that hangs: a restart may
    // import many plugins, everything else answers at once.
    let patience = match op {
        // A seat change waits for a restart under way.
        ControlOp::Restart | ControlOp::SeatsHold => Duration::from_secs(600),
        _ => Duration::from_secs(60),
    };
    // A restart says itself why it waits (its imports), a seat change waits for one, and a server starting
    // was said above.
    let say_waiting =
        starting.is_none() && !matches!(op, ControlOp::Restart | ControlOp::SeatsHold);
    stream.set_read_timeout(Some(if say_waiting {
        SAY_WAITING_AFTER
    } else {
        patience
    }))?;
    // As for a seat: a connection turned away has its answer waiting even if the hello did not go out.
    let hello = Hello::control(&secret, op, why).from_root(&inst.root);
    let sent = stream.write_all(wire::line(&hello).as_bytes());
    let mut line = String::new();
    let asked = std::time::Instant::now();
    let mut reader = BufReader::new(&stream);
    let mut said = false;
    let read = loop {
        match reader.read_line(&mut line) {
            // A minute of nothing reads as a hang: that it waits, and how long, is said after a moment.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) && asked.elapsed() < patience =>
            {
                if say_waiting && !std::mem::replace(&mut said, true) {
                    eprintln!(
                        "ovai: the server for {}{} has not answered in {} s; this waits up to {} s for it.",
                        inst.root.display(),
                        lock_holder(inst)
                            .map(|p| format!(" (pid {p})"))
                            .unwrap_or_default(),
                        SAY_WAITING_AFTER.as_secs(),
                        patience.as_secs()
                    );
                }
                let left = patience.saturating_sub(asked.elapsed());
                reader
                    .get_ref()
                    .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            }
            other => break other,
        }
    };
    if line.is_empty() {
        if let Err(e) = &read
            && matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
        {
            return Err(silent(inst, patience));
        }
        // A server that stops drops the connections it had not taken yet (reset, or closed unanswered):
        // it is stopping, as a command that came a moment later reads (helper-106).
        if let Some(m) = marked(inst, &inst.stopping_marker()) {
            return Err(ClientError::Stopping {
                root: inst.root.display().to_string(),
                pid: m.pid,
            });
        }
        // Ended already (its marker gone with it): it went away, in words, not as a bare reset.
        let dropped = |e: &std::io::Error| {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            matches!(e.kind(), BrokenPipe | ConnectionAborted | ConnectionReset)
        };
        if !sent.as_ref().is_err_and(dropped) && !read.as_ref().is_err_and(dropped) {
            sent?;
            read?;
        }
        return Err(ClientError::WentAway {
            root: inst.root.display().to_string(),
        });
    }
    let reply: Reply<T> = serde_json::from_str(line.trim())
        .map_err(|e| ClientError::Protocol(format!("{e} in {line:?}")))?;
    match (reply.ok, reply.body) {
        (true, Some(body)) => Ok(body),
        (true, None) => Err(ClientError::Protocol(format!(
            "a reply without its fields: {line:?}"
        ))),
        (false, _) => Err(ClientError::NotDone(ensure_period(
            reply
                .error
                .unwrap_or_else(|| "the server gave no reason".into()),
        ))),
    }
}

/// A JSON-RPC error answer, as the server sent it.
#[derive(Debug)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

/// A minimal MCP client: newline-delimited JSON-RPC. Requests may be sent ahead of their answers;
/// whatever arrives while one particular message is awaited waits in the backlog.
pub struct McpClient<R: BufRead, W: Write> {
    reader: R,
    writer: W,
    next_id: u64,
    /// Messages read while waiting for something else (notifications, other answers), in order.
    pub backlog: Vec<Value>,
    line: String,
}

pub const PROTOCOL_VERSION: &str = "2025-06-18";

impl<R: BufRead, W: Write> McpClient<R, W> {
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader,
            writer,
            next_id: 1,
            backlog: Vec::new(),
            line: String::new(),
        }
    }

    /// `initialize` at `version`, then `notifications/initialized`; returns the whole response.
    pub fn initialize_as(&mut self, client: &str, version: &str) -> Result<Value, ClientError> {
        let id = self.send_request(
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": { "name": client, "version": env!("CARGO_PKG_VERSION") }
            }),
        )?;
        let response = self.response(id)?;
        if let Some(e) = response.get("error") {
            return Err(ClientError::Protocol(format!(
                "initialize was refused: {e}"
            )));
        }
        self.notify("notifications/initialized", json!({}))?;
        Ok(response)
    }

    /// `initialize` at PROTOCOL_VERSION; returns its result.
    pub fn initialize(&mut self, client: &str) -> Result<Value, ClientError> {
        let response = self.initialize_as(client, PROTOCOL_VERSION)?;
        Ok(response.get("result").cloned().unwrap_or(Value::Null))
    }

    /// The connection's two ends and the next request id, for a caller that writes and reads its own
    /// lines (the benchmark's driver, which must cost the machine as little as it can).
    pub fn raw(&mut self) -> (&mut R, &mut W, &mut u64) {
        (&mut self.reader, &mut self.writer, &mut self.next_id)
    }

    /// Writes one message as one line.
    pub fn send(&mut self, msg: &Value) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        self.writer.flush()?;
        Ok(())
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), ClientError> {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }))
    }

    /// Sends a request without waiting for its answer; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        Ok(id)
    }

    /// The next message off the wire (not the backlog). A line that is not JSON is an error: a server
    /// must never write one.
    pub fn next_message(&mut self) -> Result<Value, ClientError> {
        loop {
            self.line.clear();
            if self.reader.read_line(&mut self.line)? == 0 {
                return Err(ClientError::Protocol(
                    "the connection closed before the answer came".into(),
                ));
            }
            let text = self.line.trim();
            if text.is_empty() {
                continue;
            }
            return serde_json::from_str(text).map_err(|e| {
                ClientError::Protocol(format!("a line that is not JSON ({e}): {text}"))
            });
        }
    }

    /// The next message matching `pred`, from the backlog first; others are kept in the backlog.
    pub fn recv_where(&mut self, pred: impl Fn(&Value) -> bool) -> Result<Value, ClientError> {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return Ok(self.backlog.remove(i));
        }
        loop {
            let v = self.next_message()?;
            if pred(&v) {
                return Ok(v);
            }
            self.backlog.push(v);
        }
    }

    /// The whole response to request `id`.
    pub fn response(&mut self, id: u64) -> Result<Value, ClientError> {
        self.recv_where(|v| {
            v.get("id") == Some(&json!(id))
                && v.get("method").is_none()
                && (v.get("result").is_some() || v.get("error").is_some())
        })
    }

    /// Sends a request and waits for its answer: the result, or the JSON-RPC error.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, RpcError>, ClientError> {
        let id = self.send_request(method, params)?;
        let v = self.response(id)?;
        if let Some(err) = v.get("error") {
            return Ok(Err(RpcError {
                code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            }));
        }
        Ok(Ok(v.get("result").cloned().unwrap_or(Value::Null)))
    }

    pub fn writer(&mut self) -> &mut W {
        &mut self.writer
    }

    /// Gives back the writer (to close it, as a client does when it quits) and the reader.
    pub fn into_parts(self) -> (R, W) {
        (self.reader, self.writer)
    }
}

/// The text of a tools/call result and whether it is a refusal (`isError`).
pub fn call_text(result: &Value) -> (String, bool) {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let refused = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (text, refused)
}

/// How long a stopping daemon may take to end: its calls' grace, and its sessions' time to finish.
pub fn stop_patience(inst: &Instance) -> Duration {
    inst.read_config().map_or(
        Duration::from_secs(crate::instance::DEFAULT_SHUTDOWN_GRACE_S),
        |c| c.shutdown_grace,
    ) + Duration::from_secs(30)
}

/// Waits for a stopping daemon to end, within `stop_patience`; `said` is told once a second has passed,
/// for the command to say it waits. False when it still runs then.
pub fn wait_for_end(inst: &Instance, pid: u32, said: impl FnOnce()) -> bool {
    let start = std::time::Instant::now();
    let patience = stop_patience(inst);
    let mut said = Some(said);
    while running(pid) {
        if start.elapsed() > patience {
            return false;
        }
        if start.elapsed() >= Duration::from_secs(1)
            && let Some(say) = said.take()
        {
            say();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Whether the process still runs: there, and not a zombie waiting for its parent to reap it.
pub fn running(pid: u32) -> bool {
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}
