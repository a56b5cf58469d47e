//! `ovai mcp`: the stdio server an MCP client starts from a seat's desk. It connects to the daemon,
//! presents the seat's secret, and then relays bytes both ways until either side closes.
//!
//! When it cannot connect (no daemon, an unknown secret), it still answers: the client's first request
//! gets a JSON-RPC error carrying the sentence, the sentence goes to stderr, and it exits non-zero. A
//! session never hangs on a dead server.

use std::fs::File;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::mem::ManuallyDrop;
use std::net::Shutdown;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client;
use crate::instance;

/// How long the bridge waits for the daemon's welcome: a daemon still loading many plugins answers late.
const WELCOME_PATIENCE: Duration = Duration::from_secs(60);

pub fn run() -> i32 {
    match connect() {
        Ok(stream) => relay(stream),
        Err(sentence) => fail(&sentence),
    }
}

fn connect() -> Result<UnixStream, String> {
    let secret = std::env::var("OVAI_SECRET").ok().filter(|s| !s.trim().is_empty()).ok_or_else(|| {
        "OVAI_SECRET is not set. `ovai mcp` is started by an MCP client from a seat's desk, whose .mcp.json sets it; \
         `ovai seat add NAME` writes one."
            .to_string()
    })?;
    let inst = instance::find_root(None).map_err(|e| e.to_string())?;
    let mut stream = client::connect(&inst).map_err(|e| e.to_string())?;
    client::hello_seat(&inst, &mut stream, &secret, WELCOME_PATIENCE).map_err(|e| e.to_string())?;
    Ok(stream)
}

fn relay(stream: UnixStream) -> i32 {
    let Ok(mut up) = stream.try_clone() else {
        return fail(
            "the connection to the ovai server could not be shared between its two directions",
        );
    };
    // SAFETY: fds 0 and 1 are this process's stdin and stdout for its whole life; ManuallyDrop keeps
    // them open when these handles go away.
    let mut stdin = ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    let mut stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
    let client_done = std::thread::spawn(move || {
        pump(&mut *stdin, &mut up);
        // Half-close: the daemon sees end-of-input and finishes what it holds; answers still flow back.
        let _ = up.shutdown(Shutdown::Write);
    });
    let mut down = stream;
    pump(&mut down, &mut *stdout);
    if client_done.is_finished() {
        0
    } else {
        eprintln!(
            "ovai mcp: the ovai server closed this session (it stopped, or this seat was removed)."
        );
        1
    }
}

/// Copies until end-of-input or an error. Not `std::io::copy`: on Linux it turns pipe/socket pairs into
/// splice(2), which was seen to sit on data a session was waiting for; a read and a write per chunk is as
/// fast for messages this size, and behaves the same on pipes, sockets and terminals.
fn pump(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if to.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// Says why on stderr, answers the client's first request with the same sentence, and exits 1.
fn fail(sentence: &str) -> i32 {
    eprintln!("ovai mcp: {sentence}");
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return 1;
    }
    // Notifications get no answer; the first request does. A client that sends nothing is not waited on
    // past end-of-input.
    for line in stdin.lock().lines().take(64) {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()) else {
            continue;
        };
        let answer = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": -32000, "message": sentence }
        });
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
        break;
    }
    1
}
