//! One accepted connection: its hello decides whether it is a seat's MCP session or a control request.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::unix_io::{Hangup, PipePair, ReadHalf, WriteHalf};
use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

use super::control;
use super::daemon::Daemon;
use super::session::SeatService;
use super::sessions::{Full, SESSIONS_PER_SEAT};
use super::transport::SessionTransport;
use crate::seats::hash_secret;
use crate::wire::{self, ControlOp, Hello, Welcome};

/// How long a new connection has to say who it is: a client sends its hello at once, and a connection
/// that says nothing should not hold a place long.
const HELLO_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection counted against `maxConnections` for as long as it is handled.
pub struct ConnectionSlot(Arc<AtomicUsize>);

impl ConnectionSlot {
    /// Counts one more connection, unless `max` are open already.
    pub fn new(open: &Arc<AtomicUsize>, max: usize) -> Option<Self> {
        let mut now = open.load(Ordering::Relaxed);
        loop {
            if now >= max {
                return None;
            }
            match open.compare_exchange(now, now + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(Self(open.clone())),
                Err(actual) => now = actual,
            }
        }
    }
}

impl ConnectionSlot {
    /// Counts one more connection past the cap: one waiting for its hello was just told to go.
    pub fn over(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        Self(open.clone())
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Places on the socket past `maxConnections` that only the operator's commands can keep: sessions
/// filling every place they may have must not lock out `ovai status`, `ovai stop` or `ovai seat rotate`.
pub const COMMANDS_RESERVE: usize = 8;

/// The connections the socket takes at once: `max` sessions, and the commands' places.
pub fn socket_places(max: usize) -> usize {
    max.saturating_add(COMMANDS_RESERVE)
}

/// Why a session was not let in, and what to do.
fn full_words(seat: &str, full: &Full) -> String {
    match full {
        Full::Seat => format!(
            "the seat {seat} holds {SESSIONS_PER_SEAT} sessions on this server already, the most one seat may hold, \
             so that no seat can keep the others out; quit one of the clients started at its desk (`ovai status` \
             counts each seat's sessions), then connect again"
        ),
        Full::All(max) => format!(
            "this server holds {max} sessions already, its limit (maxConnections in openovai.json); close a \
             session or raise the limit, then connect again"
        ),
    }
}

/// A connection past every place: told why in one line, if its socket takes it at once, and closed.
pub fn turn_away(daemon: &Daemon, stream: &UnixStream, max: usize) {
    let why = format!(
        "this server holds {} connections already, its limit ({max} sessions, as maxConnections in \
         openovai.json says, and {COMMANDS_RESERVE} places for `ovai` commands); close a session or raise the \
         limit, then connect again",
        socket_places(max)
    );
    daemon.refusals.note(&why);
    let w = Welcome {
        ok: false,
        error: Some(why),
        ..Welcome::default()
    };
    // Never waited on: a client that does not read cannot hold the accept loop.
    let _ = stream.try_write(wire::line(&w).as_bytes());
}

/// Why a connection that had not said who it is gave up its place to a newcomer.
const EVICTED: &str = "the server holds as many connections as it takes (maxConnections, and the places kept for \
     `ovai` commands), and this one had not said who it is; connect again and send the hello at once";

pub async fn handle(
    daemon: Arc<Daemon>,
    stream: UnixStream,
    _admitted: ConnectionSlot,
    (waiting, evicted): (u64, CancellationToken),
) {
    let (read, mut write) = match crate::unix_io::split_tokio(stream) {
        Ok(halves) => halves,
        Err(e) => {
            daemon.waiting_hellos.done(waiting);
            tracing::debug!(error = %e, "an accepted connection could not be set up");
            return;
        }
    };
    let mut reader = BufReader::new(read);
    let hello = tokio::select! {
        h = tokio::time::timeout(HELLO_TIMEOUT, read_hello(&mut reader)) => h,
        _ = evicted.cancelled() => return refuse(&daemon, &mut write, EVICTED.into()).await,
    };
    daemon.waiting_hellos.done(waiting);
    // Told to go just as its hello arrived: its place went to a newcomer, so it goes all the same (or
    // the two would hold one place). Once `done`, it can no longer be told.
    if evicted.is_cancelled() {
        return refuse(&daemon, &mut write, EVICTED.into()).await;
    }
    let hello = match hello {
        Ok(Ok(h)) => h,
        Ok(Err(why)) => return refuse(&daemon, &mut write, why).await,
        Err(_) => {
            return refuse(
                &daemon,
                &mut write,
                format!("no hello arrived within {} s", HELLO_TIMEOUT.as_secs()),
            )
            .await;
        }
    };
    if hello.ovai != wire::VERSION {
        return refuse_for_good(
            &daemon,
            &mut write,
            format!(
                "this ovai server speaks version {} of its socket protocol and the client speaks {}: use the same ovai binary for both",
                wire::VERSION,
                hello.ovai
            ),
        )
        .await;
    }
    // Moved while it ran: it reads every file by its old path. Only stopping it, and asking how it is,
    // make sense now.
    let asks = hello.op.filter(|_| hello.control_secret.is_some());
    if !matches!(asks, Some(ControlOp::Stop | ControlOp::Status))
        && let Some(why) = crate::instance::moved(&daemon.inst.root, hello.root.as_deref())
    {
        return refuse(&daemon, &mut write, why).await;
    }
    if let Some(secret) = hello.control_secret {
        return control::handle(&daemon, &secret, hello.op, hello.why.as_deref(), &mut write).await;
    }
    let Some(secret) = hello.seat_secret else {
        return refuse(
            &daemon,
            &mut write,
            "the hello carried neither a seat's secret nor the control secret".into(),
        )
        .await;
    };
    let book = daemon.seats.get(&daemon.inst).await;
    let book = match book.as_ref() {
        Ok(b) => b,
        Err(e) => return refuse(&daemon, &mut write, e.to_string()).await,
    };
    let matches = book.resolve_all(&secret);
    if matches.len() > 1 {
        let why = format!(
            "the secret in OVAI_SECRET is the secret of several seats ({}) in {}, which `ovai seat` never writes: \
             run `ovai seat rebuild` there to make it again from the desks",
            matches.join(", "),
            daemon.inst.seats_file().display()
        );
        return refuse_for_good(&daemon, &mut write, why).await;
    }
    let Some(seat) = matches.first().map(|s| s.to_string()) else {
        let book_file = daemon.inst.seats_file();
        if !book_file.exists() {
            let why = format!(
                "the seats' book {} is missing (removed while the server ran?), so no seat's secret opens a \
                 session: `ovai seat rebuild` makes it again from the desks, keeping every seat's secret",
                book_file.display()
            );
            return refuse(&daemon, &mut write, why).await;
        }
        let why = format!(
            "the secret in OVAI_SECRET is not the secret of any seat of the instance at {}: the seat may have been \
             removed, or given a new secret (`ovai seat rotate`, which writes the new one into the desk's file for \
             each client: .mcp.json, and those of Gemini CLI, Codex and opencode). Run `ovai seat list` there to see \
             the seats, and `ovai seat add NAME` to make one (it makes desks/NAME, with a file for each client)",
            daemon.inst.root.display()
        );
        return refuse_for_good(&daemon, &mut write, why).await;
    };
    // Counted in before it is welcomed: one seat cannot take every place, nor sessions those kept for
    // the operator's commands.
    let ct = CancellationToken::new();
    let max = daemon.current().config.max_connections;
    let registered = match daemon
        .sessions
        .open_within(&seat, hash_secret(&secret), ct.clone(), max)
    {
        Ok(registered) => registered,
        Err(full) => return refuse(&daemon, &mut write, full_words(&seat, &full)).await,
    };
    // The session's own pipes, when its hello offers to take them: made here, so the daemon's ends are
    // its own open files, which no client can make blocking. None made (out of descriptors): the
    // session goes on over the socket.
    let pipes = hello.pipes.then(PipePair::new).and_then(|made| {
        made.inspect_err(
            |e| tracing::debug!(error = %e, "no pipes for a session; it goes on over its socket"),
        )
        .ok()
    });
    let welcome = wire::line(&Welcome {
        ok: true,
        pipes: pipes.is_some(),
        ..Welcome::default()
    });
    let sent = match &pipes {
        Some(p) => {
            let theirs = [p.their_write.as_fd(), p.their_read.as_fd()];
            write.send_with_fds(welcome.as_bytes(), &theirs).await
        }
        None => write.write_all(welcome.as_bytes()).await,
    };
    if sent.is_err() {
        return;
    }
    let hangup = Hangup::of(&write);
    // Over pipes, the socket carries one more line at most: why the daemon ended the session, when it did.
    let mut farewell = None;
    let (reader, write) = match pipes {
        Some(PipePair {
            read,
            write: to,
            their_write,
            their_read,
        }) => {
            // Theirs are the client's alone now: its closing them must end what the daemon reads.
            drop((their_write, their_read));
            // The socket stays open, unread and unwatched, for as long as the session: it closes whole
            // only when the client's process is gone, which a pipe it closed its side of cannot tell.
            drop(reader);
            farewell = Some(write);
            match crate::unix_io::pipes(read, to) {
                Ok((read, to)) => (BufReader::new(read), to),
                Err(e) => {
                    tracing::debug!(error = %e, "a session's pipes could not be set up");
                    return;
                }
            }
        }
        None => (reader, write),
    };
    // The seats may have changed between the look-up and the registration (a rotation ends the sessions
    // registered then): look again now that this one is registered, so none slips through.
    let still = daemon.seats.get(&daemon.inst).await;
    if !still
        .as_ref()
        .as_ref()
        .is_ok_and(|b| b.resolve(&secret) == Some(seat.as_str()))
    {
        tracing::debug!(
            seat,
            "a session whose seat changed as it connected was ended"
        );
        return;
    }
    tracing::debug!(seat, id = registered.id, "session connected");
    let service = SeatService::new(daemon.clone(), &seat, registered.id);
    let (queue_bytes, call_timeout) = {
        let generation = daemon.current();
        (
            generation.config.session_queue_bytes,
            generation.config.call_timeout,
        )
    };
    let transport = SessionTransport::new(reader, write, hangup, queue_bytes)
        .with_seat_load(daemon.sessions.load_of(&seat))
        .with_call_deadline(call_timeout)
        .with_calls(service.clone(), ct.clone());
    match service.serve_with_ct(transport, ct).await {
        Ok(running) => {
            daemon
                .sessions
                .set_peer(registered.id, running.peer().clone());
            let _ = running.waiting().await;
        }
        Err(e) => tracing::debug!(seat, error = %e, "a session ended before it was initialised"),
    }
    // Ended by a change of its seat, the session answered every call it took, and reads nothing more:
    // its bridge answers what its client sent after in these words, not as cut off by a server gone.
    if let (Some(mut socket), Some(change)) = (farewell, daemon.sessions.ended_by(registered.id)) {
        let line = wire::line(&wire::Farewell {
            ended: change.ended_session(&seat),
        });
        let _ =
            tokio::time::timeout(Duration::from_secs(2), socket.write_all(line.as_bytes())).await;
    }
    tracing::debug!(seat, id = registered.id, "session ended");
    drop(registered);
    // It may have held megabytes of answers (up to sessionQueueBytes).
    crate::memory::give_back();
}

async fn read_hello(reader: &mut BufReader<ReadHalf>) -> Result<Hello, String> {
    let mut line = String::new();
    let n = (&mut *reader)
        .take(wire::MAX_HELLO)
        .read_line(&mut line)
        .await
        .map_err(|e| format!("the hello could not be read: {e}"))?;
    if n == 0 {
        return Err("the connection closed before its hello".into());
    }
    if !line.ends_with('\n') {
        return Err(format!(
            "the hello is longer than {} bytes",
            wire::MAX_HELLO
        ));
    }
    serde_json::from_str(line.trim()).map_err(|e| {
        format!("the first line is not an ovai hello ({e}); connect through `ovai mcp`, which an MCP client starts from desks/NAME/.mcp.json")
    })
}

async fn refuse(daemon: &Daemon, write: &mut WriteHalf, why: String) {
    say_refused(daemon, write, why, false).await;
}

/// Refuses what only a session started again can change (the seat's secret, the binary): its bridge
/// does not look for a server again.
async fn refuse_for_good(daemon: &Daemon, write: &mut WriteHalf, why: String) {
    say_refused(daemon, write, why, true).await;
}

async fn say_refused(daemon: &Daemon, write: &mut WriteHalf, why: String, for_good: bool) {
    daemon.refusals.note(&why);
    let w = Welcome {
        ok: false,
        error: Some(why),
        pipes: false,
        for_good,
    };
    let _ = write.write_all(wire::line(&w).as_bytes()).await;
    let _ = write.shutdown().await;
}
