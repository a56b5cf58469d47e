//! Starting one plugin host process: `node host.mjs` reading the protocol from fd 3 and writing to fd 4
//! (and its watcher thread on a socket, fd 5), in a process group of its own, with a minimal environment,
//! and killed if the daemon dies.
//!
//! Why two pipes and not one socket pair: a message through a pipe costs the kernel less than one
//! through a Unix socket (no buffer allocated and charged per write).

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

/// Variables the host gets from the daemon's environment whatever `pluginEnv` says: enough to find
/// programs, to format text and to trust the machine's own certificates, for Node, OpenSSL, git and curl
/// (without them, behind a proxy that signs with its own, every `fetch` fails), nothing that could carry
/// a secret.
const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
    "CURL_CA_BUNDLE",
];

/// How to start a host; the same for every child of one generation.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `node` to run: `OVAI_NODE` when set, else `node` on PATH.
    pub node: PathBuf,
    /// The host shim written under `.ovai/` at start.
    pub shim: PathBuf,
    /// The instance root: the child's working directory.
    pub cwd: PathBuf,
    /// `--max-old-space-size` (`hostMaxMemoryMB`).
    pub max_memory_mb: u64,
    /// Extra variable names passed through (`pluginEnv`).
    pub pass_env: Vec<String>,
    /// The box the host runs in (or why none).
    pub isolation: super::sandbox::Isolation,
    /// Where the secrets are that the box hides.
    pub secrets: super::sandbox::Secrets,
    /// What the box may hold.
    pub bounds: super::bounds::Bounds,
}

pub fn node_program() -> PathBuf {
    std::env::var_os("OVAI_NODE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("node"))
}

pub struct Spawned {
    pub child: Child,
    /// The daemon's ends of the protocol pipes: it reads what the host writes to its fd 4 and writes
    /// what the host reads from its fd 3.
    pub channel: (crate::unix_io::ReadHalf, crate::unix_io::WriteHalf),
    /// The daemon's end of the socket the host's watcher thread reads on fd 5 (`where_held`).
    pub watch: std::os::unix::net::UnixStream,
    pub pid: u32,
    /// Its control group, where one could be made (else the daemon looks at the box from outside).
    pub group: Option<super::bounds::HostGroup>,
}

/// Checks `node --version` before anything is started, so a missing or old Node is one sentence at
/// start-up; returns the version.
pub fn check_node(node: &Path) -> Result<String, SpawnError> {
    let out = std::process::Command::new(node)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                SpawnError::NoNode(node.to_path_buf())
            } else {
                SpawnError::Io {
                    node: node.to_path_buf(),
                    source: e,
                }
            }
        })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match node_major(&version) {
        Some(m) if m >= MIN_NODE_MAJOR => Ok(version),
        Some(_) => Err(SpawnError::OldNode {
            node: node.to_path_buf(),
            version,
        }),
        None => Err(SpawnError::NotNode {
            node: node.to_path_buf(),
            said: version,
        }),
    }
}

/// The major version in Node's `v20.20.2`.
pub fn node_major(version: &str) -> Option<u32> {
    version
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// The oldest Node the shim is written for.
pub const MIN_NODE_MAJOR: u32 = 18;

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("ovai runs plugins in Node.js {MIN_NODE_MAJOR} or newer, and {node} is {version}. Install a newer Node, or name one with OVAI_NODE.", node = .node.display())]
    OldNode { node: PathBuf, version: String },
    #[error("{node} does not answer `--version` as Node.js does (it said {said:?}); name Node.js 18 or newer with OVAI_NODE.", node = .node.display())]
    NotNode { node: PathBuf, said: String },
    #[error("Node.js was not found (looked for {node}); ovai runs plugins in Node 18 or newer. Install it, or name it with OVAI_NODE.", node = .0.display())]
    NoNode(PathBuf),
    #[error("{program} was not found: the plugin host's box is started by it, and it was moved or removed since the server started. Put it back, or run `ovai stop`, then `ovai serve` (which looks for it again).", program = .0.display())]
    NoBoxProgram(PathBuf),
    #[error("the plugin host could not be started with {node}: {source}", node = node.display())]
    Io {
        node: PathBuf,
        source: std::io::Error,
    },
}

impl Launch {
    pub fn spawn(&self) -> Result<Spawned, SpawnError> {
        let io = |source: std::io::Error| SpawnError::Io {
            node: self.node.clone(),
            source,
        };
        let (host_reads, we_write) = protocol_pipe().map_err(io)?;
        let (we_read, host_writes) = protocol_pipe().map_err(io)?;
        let (watch, host_watch) = std::os::unix::net::UnixStream::pair().map_err(io)?;
        // bubblewrap reads the box's seccomp filter from a descriptor of its own.
        let filter = match &self.isolation {
            super::sandbox::Isolation::Bwrap { .. } => seccomp_file().map_err(io)?,
            _ => None,
        };
        let mut fds = vec![
            host_reads.as_raw_fd(),
            host_writes.as_raw_fd(),
            host_watch.as_raw_fd(),
        ];
        fds.extend(filter.as_ref().map(|f| f.as_raw_fd()));
        let group = self.bounds.group();
        let join = group
            .as_ref()
            .map(super::bounds::HostGroup::join_fds)
            .unwrap_or_default();

        let node_args = [
            format!("--max-old-space-size={}", self.max_memory_mb),
            self.shim.display().to_string(),
        ];
        let (program, args) =
            self.isolation
                .command(&self.node, &node_args, &self.shim, &self.secrets);
        let started_by = PathBuf::from(&program);
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe functions
        // (dup2, fcntl, close, prctl, sched_getscheduler, sched_setscheduler) on descriptors it owns.
        unsafe {
            cmd.pre_exec(move || {
                // Its control group before anything else: whatever it starts is counted from the first.
                super::bounds::join(&join)?;
                put_on_fds(&fds)?;
                // Nothing else the daemon holds or inherited reaches the host: a descriptor its own
                // parent left open would be a way out of the box.
                close_on_exec_from(3 + fds.len() as RawFd);
                crate::sched::ordinary_in_child();
                // The host dies with the daemon even if nothing closes its pipes first.
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| match e.kind() {
            // Node, or what starts the box around it (bubblewrap, ovai itself).
            std::io::ErrorKind::NotFound if started_by != self.node && !started_by.exists() => {
                SpawnError::NoBoxProgram(started_by)
            }
            std::io::ErrorKind::NotFound if self.cwd.is_dir() => {
                SpawnError::NoNode(self.node.clone())
            }
            _ => io(e),
        })?;
        // Only the host holds its ends: its end is then the end of the daemon's reading.
        drop((host_reads, host_writes, host_watch, filter));
        let pid = child.id().unwrap_or(0);
        let channel = crate::unix_io::pipes(we_read, we_write).map_err(io)?;
        Ok(Spawned {
            child,
            channel,
            watch,
            pid,
            group,
        })
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = BASE_ENV
            .iter()
            .map(|s| s.to_string())
            .chain(self.pass_env.iter().cloned())
            .filter_map(|k| std::env::var(&k).ok().map(|v| (k, v)))
            .collect();
        env.push(("OVAI_HOST".into(), super::protocol::PROTOCOL.to_string()));
        env
    }
}

/// A pipe (read end, write end), close-on-exec: no other child of the daemon inherits it.
fn protocol_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    // Room for a large answer in few writes; the default (64 KiB) stays where the system refuses more.
    let _ = nix::fcntl::fcntl(&write, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
    Ok((read, write))
}

/// What a socket pair held by default: answers of a few hundred KiB go in one write.
const PIPE_BYTES: libc::c_int = 256 * 1024;

/// Makes the protocol pipe's ends the child's fds 3 (it reads) and 4 (it writes), the watcher's socket
/// its fd 5 and, for bubblewrap, the seccomp filter its fd 6, each without close-on-exec so they survive
/// exec.
pub fn put_on_fds(fds: &[RawFd]) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, fcntl};
    // Each first goes above them all, where no dup2 below can overwrite it (any could be 3 to 6 now).
    let mut high = [0 as RawFd; 4];
    for (slot, fd) in high.iter_mut().zip(fds) {
        // SAFETY: `fd` is open in this (forked) process until exec, which is all this borrow lasts.
        let borrowed = unsafe { BorrowedFd::borrow_raw(*fd) };
        *slot = fcntl(borrowed, FcntlArg::F_DUPFD_CLOEXEC(10))?;
    }
    for (fd, to) in high.into_iter().take(fds.len()).zip(3..) {
        // SAFETY: as above; the copy on 3 to 6 must stay open through exec, so it is never closed
        // here, and dup2 leaves it without close-on-exec.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let kept = unsafe { nix::unistd::dup2_raw(borrowed, to) }?;
        std::mem::forget(kept);
    }
    Ok(())
}

/// Marks every descriptor from `first` up close-on-exec, in a child between fork and exec
/// (async-signal-safe). Marked, not closed: the standard library's own pipe that reports a failed exec
/// is among them.
fn close_on_exec_from(first: RawFd) {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range and fcntl take plain integers, on descriptors this process holds.
    unsafe {
        let all = libc::c_uint::MAX;
        if libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            all,
            CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return;
        }
        // Before Linux 5.11: one at a time, up to the limit on descriptors.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let most = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 20) as RawFd
        } else {
            1024
        };
        for fd in first..most {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// The box's seccomp filter in a file of its own, read from the start, for bubblewrap's `--seccomp`.
fn seccomp_file() -> std::io::Result<Option<OwnedFd>> {
    let Some(bytes) = super::seccomp::bytes() else {
        return Ok(None);
    };
    let fd =
        nix::sys::memfd::memfd_create(c"ovai-seccomp", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, &bytes)?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    Ok(Some(OwnedFd::from(file)))
}

/// Writes the embedded host shim again unless it is there as it should be (damaged in place, the same
/// file, no watch sees it): each new generation starts from a whole one.
pub fn keep_shim(path: &Path) -> std::io::Result<()> {
    crate::files::keep_private(path, super::SHIM.as_bytes())
        .map(drop)
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Writes the embedded host shim where the child will run it.
pub fn write_shim(path: &Path) -> std::io::Result<()> {
    // A new file renamed into place, never written through a link put where it goes.
    crate::files::write_private(path, super::SHIM.as_bytes())
        .map_err(|e| std::io::Error::other(e.to_string()))
}
