//! The floors: the same process chains made of minimal Rust (or Node) processes, what the cases are held
//! against.

use super::*;

/// What the same process shapes serve at the throughput cases' concurrency with nothing of ovai's in them:
/// a chain of two relays with 32 calls in flight, and sixteen sessions each through a relay into one hub in
/// the daemon's shape (one poll loop), in front of one responder. The relay nearest the client is the
/// bridge's shape: a thread each way, scheduled as `SCHED_BATCH`.
pub(crate) fn throughput_floor_cases(setup: &Setup, runs: usize) -> Vec<(&'static str, Figures)> {
    vec![
        (
            "floor_chain_k32",
            repeat("floor_chain_k32", runs, || {
                floor_calls_k(
                    setup,
                    &["--floor-relay-batch", "--floor-relay"],
                    200_000,
                    32,
                )
            }),
        ),
        (
            "floor_sessions16",
            repeat("floor_sessions16", runs, || {
                floor_sessions_calls(setup, 16, 4, 5_000, false)
            }),
        ),
        // Not a floor any ratio is taken against: floor_sessions16 with a minimal Node process answering
        // in the host's place, what a Node host costs the shape by itself.
        (
            "floor_sessions16_node",
            repeat("floor_sessions16_node", runs, || {
                floor_sessions_calls(setup, 16, 4, 5_000, true)
            }),
        ),
    ]
}

/// What the same process chains cost with nothing of ovai's in them: the floor.
pub(crate) fn floor_cases(setup: &Setup, runs: usize) -> Vec<(&'static str, Figures)> {
    vec![
        (
            "floor_k1",
            repeat("floor_k1", runs, || floor_calls(setup, 0, 5000)),
        ),
        (
            "floor_chain_k1",
            repeat("floor_chain_k1", runs, || floor_calls(setup, 2, 5000)),
        ),
        (
            "floor_builtin_k1",
            repeat("floor_builtin_k1", runs, || floor_calls(setup, 1, 5000)),
        ),
        // Not a floor any ratio is taken against: the chain of floor_chain_k1 with a minimal Node process
        // answering in the host's place (what a Node host costs by itself, behind relays that cost nothing).
        (
            "floor_chain_node_k1",
            repeat("floor_chain_node_k1", runs, || {
                floor_node_calls(setup, 5000)
            }),
        ),
        // Not a floor any ratio is taken against: the chain of floor_chain_k1 with its first hop a Unix
        // socket, as the bridge → daemon hop is when the daemon hands over no pipes (and was until it did).
        (
            "floor_chain_socket_k1",
            repeat("floor_chain_socket_k1", runs, || {
                floor_calls_over(setup, &["--floor-relay-socket", "--floor-relay"], 5000)
            }),
        ),
        // Not a floor any ratio is taken against: the chain of floor_chain_k1 with the first relay in the
        // bridge's shape (`ovai mcp`: a thread for each direction, each in a blocking read on a pipe)
        // rather than one poll loop.
        (
            "floor_chain_threads_k1",
            repeat("floor_chain_threads_k1", runs, || {
                floor_calls_over(setup, &["--floor-relay-threads", "--floor-relay"], 5000)
            }),
        ),
    ]
}

/// `n` calls at K=1 through `relays` minimal relays in front of a minimal responder.
pub(crate) fn floor_calls(setup: &Setup, relays: usize, n: usize) -> Figures {
    floor_calls_over(setup, &vec!["--floor-relay"; relays], n)
}

/// The same through relays started as `relays` say (`--floor-relay`, `--floor-relay-socket` or
/// `--floor-relay-threads`), the first nearest the client.
pub(crate) fn floor_calls_over(setup: &Setup, relays: &[&str], n: usize) -> Figures {
    let mut c = floor_client_over(relays);
    c.calls("p0000", 200.min(n), 1);
    let (lat, wall, failed) = c.calls("p0000", setup.calls(n), 1);
    latency_figures(lat, wall, failed)
}

/// `n` calls with `k` in flight through relays started as `relays` say, warmed as ovai's are.
pub(crate) fn floor_calls_k(setup: &Setup, relays: &[&str], n: usize, k: usize) -> Figures {
    let mut c = floor_client_over(relays);
    c.calls("p0000", setup.warm_up(n), k);
    let (lat, wall, failed) = c.calls("p0000", setup.calls(n), k);
    latency_figures(lat, wall, failed)
}

pub(crate) fn floor_client(relays: usize) -> Client {
    floor_client_over(&vec!["--floor-relay"; relays])
}

/// A minimal Node process answering each request as the echo plugin would, in one `fs.writeSync`.
pub(crate) const FLOOR_NODE: &str = r#"import net from "node:net"; import fs from "node:fs";
new net.Socket({ fd: 0, readable: true, writable: false, onread: { buffer: Buffer.allocUnsafe(65536), callback(n, b) {
  let s = 0;
  for (;;) {
    const e = b.indexOf(10, s);
    if (e < 0 || e >= n) break;
    const m = JSON.parse(b.utf8Slice(s, e));
    s = e + 1;
    if (m.id === undefined) continue;
    const text = JSON.stringify(m.params?.arguments ?? {});
    fs.writeSync(1, `{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":{"content":[{"type":"text","text":${JSON.stringify(text)}}],"isError":false}}\n`);
  }
} } });
"#;

/// `n` calls at K=1 through two relays in front of a minimal Node responder, warmed as the baseline is.
pub(crate) fn floor_node_calls(setup: &Setup, n: usize) -> Figures {
    let mut c = floor_node_client(setup);
    c.calls("p0000", setup.warm_up(n), 1);
    let (lat, wall, failed) = c.calls("p0000", setup.calls(n), 1);
    latency_figures(lat, wall, failed)
}

/// The floor's chain with the minimal Node responder (FLOOR_NODE) at its end.
pub(crate) fn floor_node_client(setup: &Setup) -> Client {
    let script = setup.work.join("floor-node.mjs");
    std::fs::write(&script, FLOOR_NODE).expect("the Node responder's script");
    let me = std::env::current_exe().expect("the bench's own path");
    let mut cmd = Command::new(&me);
    cmd.arg("--floor-relay")
        .arg(&me)
        .arg("--floor-relay")
        .arg(&setup.node)
        .arg(&script);
    Client::spawn(cmd)
}

/// The floor's chain, each relay started as `relays` says (`--floor-relay`, `--floor-relay-socket` or
/// `--floor-relay-threads`).
pub(crate) fn floor_client_over(relays: &[&str]) -> Client {
    let me = std::env::current_exe().expect("the bench's own path");
    let mut cmd = Command::new(&me);
    for relay in relays {
        cmd.arg(relay).arg(&me);
    }
    cmd.arg("--floor-responder");
    // The first argument names what this process is; the rest is the chain behind it.
    let mut args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let first = args.remove(0);
    let mut cmd = Command::new(&me);
    cmd.arg(first).args(args);
    Client::spawn(cmd)
}

/// `n` sessions, each through a relay in the bridge's shape, into one hub in the daemon's (one poll loop
/// over every session's pipes) in front of one minimal responder: sessions16's process shape with
/// nothing of ovai's in it. The hub is kept alive by the clients' relays; it ends when they do.
pub(crate) fn floor_sessions(n: usize, responder: &[&std::ffi::OsStr]) -> (Vec<Client>, Child) {
    use std::os::fd::{AsRawFd, OwnedFd};
    let me = std::env::current_exe().expect("the bench's own path");
    // Per session: (the relay's write end, the hub's read end), (the hub's write end, the relay's read end).
    let pipes: Vec<((OwnedFd, OwnedFd), (OwnedFd, OwnedFd))> = (0..n)
        .map(|_| {
            let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
            let (up_r, up_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
            let (down_r, down_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
            ((up_w, up_r), (down_w, down_r))
        })
        .collect();
    let hub_fds: Vec<i32> = pipes
        .iter()
        .flat_map(|((_, up_r), (down_w, _))| [up_r.as_raw_fd(), down_w.as_raw_fd()])
        .collect();
    let mut hub = Command::new(&me);
    hub.arg("--floor-hub")
        .args(hub_fds.iter().map(i32::to_string));
    if !responder.is_empty() {
        hub.arg("--").args(responder);
    }
    hub.stdin(Stdio::null()).stdout(Stdio::null());
    kept_open_across_exec(&mut hub, hub_fds);
    let hub = hub.spawn().expect("the hub");
    let clients = pipes
        .into_iter()
        .map(|((up_w, up_r), (down_w, down_r))| {
            drop((up_r, down_w));
            let fds = vec![up_w.as_raw_fd(), down_r.as_raw_fd()];
            let mut cmd = Command::new(&me);
            cmd.arg("--floor-relay-fds")
                .args(fds.iter().map(i32::to_string));
            kept_open_across_exec(&mut cmd, fds);
            let c = Client::spawn(cmd);
            drop((up_w, down_r));
            c
        })
        .collect();
    (clients, hub)
}

/// `fds`, opened close-on-exec, are kept open in the process `cmd` starts (which is told their numbers).
pub(crate) fn kept_open_across_exec(cmd: &mut Command, fds: Vec<i32>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only fcntl, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::fcntl(*fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// sessions16 with the floor's processes: `n` sessions, `k` in flight each, warmed as ovai's are.
pub(crate) fn floor_sessions_calls(
    setup: &Setup,
    n: usize,
    k: usize,
    per: usize,
    node: bool,
) -> Figures {
    let script = setup.work.join("floor-node.mjs");
    let responder: Vec<&std::ffi::OsStr> = if node {
        std::fs::write(&script, FLOOR_NODE).expect("the Node responder's script");
        vec![setup.node.as_os_str(), script.as_os_str()]
    } else {
        Vec::new()
    };
    let (mut clients, mut hub) = floor_sessions(n, &responder);
    let f = sessions_settled(&mut clients, setup.calls(per), k);
    drop(clients);
    let _ = hub.kill();
    let _ = hub.wait();
    f
}
