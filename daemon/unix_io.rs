//! A Unix stream socket (or a pair of pipes) split into a reader the runtime waits on for reading only, and a writer that
//! writes straight away and waits for room only when the peer has stopped reading.
//!
//! Why not tokio's own halves: they register the socket for reading and writing at once, and a Unix
//! socket signals "writable" every time its peer reads what was written: a wake-up of the daemon's
//! thread for nothing per message. Registered for reading alone, it wakes only when there is something
//! to read.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The most one read takes: a line over many reads costs no more zeroing than its own size.
const READ_AT_MOST: usize = 64 * 1024;

/// The reading side. Dropping the writing side does not shut the socket's writing direction (tokio's
/// halves do): callers shut it down themselves (`Outbox` does when its last sender goes).
pub struct ReadHalf {
    fd: AsyncFd<OwnedFd>,
}

/// The writing side: its own descriptor of the same socket, registered with the runtime only while a
/// write waits for room.
pub struct WriteHalf {
    fd: OwnedFd,
    waiting: Option<AsyncFd<OwnedFd>>,
}

/// Splits `stream` (made non-blocking here). Must be called within the runtime.
pub fn split(stream: std::os::unix::net::UnixStream) -> io::Result<(ReadHalf, WriteHalf)> {
    stream.set_nonblocking(true)?;
    let read: OwnedFd = stream.into();
    let write = read.try_clone()?;
    halves(read, write)
}

fn halves(read: OwnedFd, write: OwnedFd) -> io::Result<(ReadHalf, WriteHalf)> {
    Ok((
        ReadHalf {
            fd: register(read, Interest::READABLE)?,
        },
        WriteHalf {
            fd: write,
            waiting: None,
        },
    ))
}

/// A pipe to read from and another to write to (made non-blocking here), as one channel. Must be called
/// within the runtime.
pub fn pipes(read: OwnedFd, write: OwnedFd) -> io::Result<(ReadHalf, WriteHalf)> {
    for fd in [&read, &write] {
        let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL)?;
        let flags = nix::fcntl::OFlag::from_bits_retain(flags) | nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(flags))?;
    }
    halves(read, write)
}

/// Splits a socket the runtime already holds (an accepted connection).
pub fn split_tokio(stream: tokio::net::UnixStream) -> io::Result<(ReadHalf, WriteHalf)> {
    split(stream.into_std()?)
}

/// A second descriptor of a connection's socket, to ask whether its peer is gone.
pub struct Hangup(OwnedFd);

impl Hangup {
    /// Watches `write`'s socket; `None` (said in the log) when no descriptor is left to watch it with.
    pub fn of(write: &WriteHalf) -> Option<Self> {
        write
            .fd
            .try_clone()
            .map(Self)
            .inspect_err(|e| tracing::warn!(error = %e, "a session's socket could not be watched for its client's death (out of descriptors?); its calls run on if it dies"))
            .ok()
    }

    /// Whether the peer closed its socket entirely (its process died or let go of it), as opposed to
    /// closing only its writing side and still reading answers: poll(2) says POLLHUP only for the first.
    pub fn peer_gone(&self) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::empty())];
        matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
            && fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLHUP))
    }
}

/// Two pipes for a channel with another process: the ends this one keeps (`read`, `write`) and the
/// ends to hand over (`their_write` fills `read`, `their_read` drains `write`). Made here, so the kept
/// ends are open file descriptions of this process's own, whose mode (blocking or not) no other process
/// can change. All close-on-exec.
pub struct PipePair {
    pub read: OwnedFd,
    pub write: OwnedFd,
    pub their_write: OwnedFd,
    pub their_read: OwnedFd,
}

impl PipePair {
    pub fn new() -> io::Result<Self> {
        let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
        let (read, their_write) = nix::unistd::pipe2(cloexec)?;
        let (their_read, write) = nix::unistd::pipe2(cloexec)?;
        Ok(Self {
            read,
            write,
            their_write,
            their_read,
        })
    }
}

impl WriteHalf {
    /// Writes `bytes` on a socket with `fds` attached to them (SCM_RIGHTS), waiting for room if need be.
    pub async fn send_with_fds(&mut self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        use tokio::io::AsyncWriteExt;
        let raw: Vec<i32> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
        loop {
            match sendmsg::<()>(
                self.fd.as_raw_fd(),
                &[io::IoSlice::new(bytes)],
                &[ControlMessage::ScmRights(&raw)],
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
                None,
            ) {
                // The descriptors went with the first byte; the rest is plain.
                Ok(n) => return self.write_all(&bytes[n..]).await,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(nix::errno::Errno::EAGAIN) => {
                    let waiting = register(self.fd.try_clone()?, Interest::WRITABLE)?;
                    waiting.writable().await?.clear_ready();
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd stays open, and names the same file description, for as long as the AsyncFd
    // that owns it; `as_raw_fd` always returns that one descriptor.
    Ok(unsafe { AsyncFd::register_with_interest(fd, interest) }?)
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            // Only what one read can fill is zeroed first, not the whole of a large buffer each time.
            let unfilled = buf.initialize_unfilled_to(buf.remaining().min(READ_AT_MOST));
            let wanted = unfilled.len();
            match guard
                .try_io(|fd| nix::unistd::read(fd.get_ref(), unfilled).map_err(io::Error::from))
            {
                Ok(Ok(n)) => {
                    // Less than asked for: the socket is drained, so wait for the next edge rather than
                    // find out with one more read (as tokio's own sockets do).
                    if n > 0 && n < wanted {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match nix::unistd::write(self.fd.as_fd(), buf) {
                Ok(n) => {
                    // Room again: stop listening for it, or every read of the peer would wake us.
                    self.waiting = None;
                    return Poll::Ready(Ok(n));
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(nix::errno::Errno::EAGAIN) => {
                    if self.waiting.is_none() {
                        let fd = self.fd.try_clone()?;
                        self.waiting = Some(register(fd, Interest::WRITABLE)?);
                    }
                    let Some(waiting) = self.waiting.as_ref() else {
                        continue;
                    };
                    let mut guard = ready!(waiting.poll_write_ready(cx))?;
                    guard.clear_ready();
                }
                Err(e) => return Poll::Ready(Err(e.into())),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = nix::sys::socket::shutdown(self.fd.as_raw_fd(), nix::sys::socket::Shutdown::Write);
        Poll::Ready(match r {
            // A pipe (ENOTSOCK) ends for its reader when this half is dropped, its one descriptor.
            Ok(()) | Err(nix::errno::Errno::ENOTCONN | nix::errno::Errno::ENOTSOCK) => Ok(()),
            Err(e) => Err(e.into()),
        })
    }
}
