//! A seat's session through `ovai mcp` carries its lines over two pipes the bridge passes to the daemon
//! once welcomed (a pipe costs each message less of the kernel's time than a socket), and keeps the socket
//! open beside them so the daemon can tell its death from its closing its side. What a hostile client
//! passes instead of two pipes is refused with a sentence, and leaves nothing open in the daemon.

mod common;
use common::*;
use serde_json::{Value, json};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

const WAITS: &str = r#"
import { writeFileSync } from "node:fs";
export const description = "Waits until cancelled.";
export const inputSchema = { type: "object" };
export async function run(args, context) {
  globalThis.runs = (globalThis.runs ?? 0) + 1;
  await new Promise((r) => context.signal.addEventListener("abort", r));
  writeFileSync(`${args.dir}/aborted-${args.n}`, "stopped");
  return { text: "ended" };
}
"#;

const RUNS: &str = r#"
export const description = "How many waits ran.";
export const inputSchema = { type: "object" };
export function run() { return { text: String(globalThis.runs ?? 0) }; }
"#;

/// The pipes among a process's descriptors, by the kernel's name for each (`pipe:[inode]`), past stdio.
fn pipes_of(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let fd: u32 = e.file_name().to_string_lossy().parse().ok()?;
        let target = std::fs::read_link(e.path()).ok()?;
        let target = target.to_string_lossy().into_owned();
        (fd > 2 && target.starts_with("pipe:")).then_some(target)
    })
    .collect()
}

fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn a_seat_session_goes_over_two_pipes_whose_other_ends_the_daemon_holds() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert!(s.tool_names().contains(&"index".to_string()));
    let (text, is_error) = s.call("index", json!({}));
    assert!(!is_error, "{text}");

    // Both may have inherited other pipes from this process (a test runner's jobserver): not counted.
    let daemon = pipes_of(d.pid());
    let inherited = pipes_of(std::process::id());
    let shared: Vec<String> = pipes_of(s.child.id())
        .into_iter()
        .filter(|p| daemon.contains(p) && !inherited.contains(p))
        .collect();
    assert_eq!(
        shared.len(),
        2,
        "pipes the bridge and the daemon share: {shared:?}; the daemon's: {daemon:?}"
    );
}

#[test]
fn a_session_over_pipes_that_closed_its_input_and_died_has_its_calls_stopped() {
    let inst = Instance::with_plugins(&[("waits.mjs", WAITS), ("runs.mjs", RUNS)]);
    inst.set_config(json!({ "callTimeoutSeconds": 600 }));
    let d = inst.start();
    let mut probe = inst.session("lead");
    probe.initialize();
    let mut s = inst.session("lead");
    s.initialize();
    let dir = inst.root.display().to_string();
    for n in 1..=3 {
        s.send_request(
            "tools/call",
            json!({ "name": "waits", "arguments": { "dir": dir, "n": n } }),
        );
    }
    wait_until("the three calls to run", || {
        (probe.call("runs", json!({})).0 == "3").then_some(())
    });
    // Its client closes its input (the bridge closes the pipe the daemon reads, and waits for answers);
    // then the bridge dies. Only the socket beside the pipes tells the daemon that nobody will read them.
    s.close_input();
    wait_until("the daemon to see the session's input end", || {
        let status = d.status()?;
        (status["seats"][0]["sessions"] == 2).then_some(())
    });
    signal(s.child.id(), libc::SIGKILL);
    wait_until("the dead session's calls to be stopped", || {
        (1..=3)
            .all(|n| inst.root.join(format!("aborted-{n}")).exists())
            .then_some(())
    });
    wait_until("the dead session to end", || {
        let status = d.status()?;
        (status["seats"][0]["sessions"] == 1).then_some(())
    });
}

/// A seat's hello on a fresh connection that offers pipes, and the daemon's welcome.
fn offer_pipes(inst: &Instance) -> (UnixStream, Value) {
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai_inst).unwrap();
    let hello =
        json!({ "ovai": ovai::wire::VERSION, "seatSecret": inst.secret("lead"), "pipes": true });
    sock.write_all(format!("{hello}\n").as_bytes()).unwrap();
    let welcome = next_line(&mut sock);
    (sock, welcome)
}

fn next_line(sock: &mut UnixStream) -> Value {
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let line = ovai::client::read_line_unbuffered(sock, 64 * 1024).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

fn send_fds(sock: &UnixStream, fds: &[&OwnedFd]) {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsgs = if raw.is_empty() {
        vec![]
    } else {
        vec![ControlMessage::ScmRights(&raw)]
    };
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[std::io::IoSlice::new(b"\n")],
        &cmsgs,
        MsgFlags::empty(),
        None,
    )
    .unwrap();
}

#[test]
fn what_a_client_passes_instead_of_two_pipes_is_refused_with_a_sentence_and_nothing_is_kept() {
    let inst = Instance::new();
    let d = inst.start();
    let mut first = inst.session("lead");
    first.initialize();
    let before = descriptors(d.pid());

    let pipe = || nix::unistd::pipe().unwrap();
    let file: OwnedFd = std::fs::File::open(inst.root.join("openovai.json"))
        .unwrap()
        .into();
    let (a_read, a_write) = pipe();
    let (b_read, b_write) = pipe();
    let cases: Vec<(Vec<&OwnedFd>, &str)> = vec![
        (vec![], "carried 0 descriptors"),
        (vec![&a_read], "carried 1 descriptors"),
        (vec![&a_read, &b_write, &a_write], "carried 3 descriptors"),
        (
            vec![&file, &b_write],
            "the first descriptor passed after the welcome is not the reading end of a pipe",
        ),
        (
            vec![&a_write, &b_read],
            "the first descriptor passed after the welcome is not the reading end of a pipe",
        ),
        (
            vec![&a_read, &b_read],
            "the second descriptor passed after the welcome is not the writing end of a pipe",
        ),
        (
            vec![&a_read, &a_write],
            "the two descriptors passed after the welcome are the two ends of one pipe",
        ),
    ];
    for (fds, why) in cases {
        let (mut sock, welcome) = offer_pipes(&inst);
        assert_eq!(welcome, json!({ "ok": true, "pipes": true }));
        send_fds(&sock, &fds);
        let refusal = next_line(&mut sock);
        assert_eq!(refusal["ok"], false, "{refusal}");
        let error = refusal["error"].as_str().unwrap_or_default();
        assert!(error.contains(why), "{why}: {error}");
    }

    // Lines sent with the hello, before any pipes: the daemon says so rather than read them as the
    // session's; sent in the pipes' stead, they are a message without descriptors.
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai_inst).unwrap();
    let hello =
        json!({ "ovai": ovai::wire::VERSION, "seatSecret": inst.secret("lead"), "pipes": true });
    let ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    sock.write_all(format!("{hello}\n{ping}").as_bytes())
        .unwrap();
    assert_eq!(next_line(&mut sock), json!({ "ok": true, "pipes": true }));
    let refusal = next_line(&mut sock);
    assert!(
        refusal["error"]
            .as_str()
            .is_some_and(|e| e.contains("send the two pipes once welcomed")),
        "{refusal}"
    );
    let (mut sock, _) = offer_pipes(&inst);
    sock.write_all(ping.as_bytes()).unwrap();
    let refusal = next_line(&mut sock);
    assert!(
        refusal["error"]
            .as_str()
            .is_some_and(|e| e.contains("carried 0 descriptors")),
        "{refusal}"
    );

    // Two good pipes after all that: the session goes on over them.
    let (mut sock, _) = offer_pipes(&inst);
    let (daemon_reads, to_daemon) = pipe();
    let (from_daemon, daemon_writes) = pipe();
    send_fds(&sock, &[&daemon_reads, &daemon_writes]);
    drop((daemon_reads, daemon_writes));
    assert_eq!(next_line(&mut sock), json!({ "ok": true }));
    let reader = std::io::BufReader::new(TimedReader::new(std::fs::File::from(from_daemon)));
    let mut mcp = ovai::client::McpClient::new(reader, std::fs::File::from(to_daemon));
    mcp.initialize("pipes").unwrap();
    let answer = mcp
        .request("tools/call", json!({ "name": "index", "arguments": {} }))
        .unwrap()
        .unwrap();
    assert_eq!(answer["isError"], false, "{answer}");
    drop(mcp);
    drop(sock);

    // Nothing the refused ones passed is still open in the daemon, and the first session goes on.
    wait_until("the daemon to hold no more descriptors than before", || {
        (descriptors(d.pid()) <= before).then_some(())
    });
    assert!(!first.call("index", json!({})).1);
}
