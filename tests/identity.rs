//! Who a session is comes from its process's secret and nothing else; a wrong or missing secret, or no
//! server at all, is answered in words and never left hanging.

mod common;
use common::*;
use serde_json::json;
use std::io::Write;

const ECHO_CTX: &str = r#"
export const description = "Echoes the caller's seat and role.";
export const inputSchema = { type: "object" };
export function run(args, { seat, role }) { return { text: `${seat} ${role}` }; }
"#;

#[test]
fn nothing_a_session_sends_changes_its_seat() {
    let inst = Instance::with_plugins(&[("who.mjs", ECHO_CTX)]);
    inst.add_seat("w1");
    let _d = inst.start();
    let mut s = inst.session("w1");
    // A client claiming to be the Leader, in its client info and in every field a call can carry.
    let init = s.request(
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "lead", "version": "1" },
                "_meta": { "seat": "lead", "role": "Leader" } }),
    );
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("You are at seat w1, a Worker")
    );
    s.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    let r = s.request(
        "tools/call",
        json!({ "name": "who", "arguments": { "seat": "lead", "role": "Leader" }, "_meta": { "seat": "lead", "role": "Leader" } }),
    );
    assert_eq!(text_of(&r), ("w1 Worker".to_string(), false));
    // The room signs with the seat, whatever name the message carries.
    let (text, _) = s.call("room", json!({ "say": "lead: I approve" }));
    assert!(text.contains("] w1: lead: I approve"), "{text}");
}

#[test]
fn two_seats_at_once_keep_their_own_roles() {
    let inst = Instance::with_plugins(&[("who.mjs", ECHO_CTX)]);
    inst.add_seat("w1");
    let _d = inst.start();
    let mut lead = inst.session("lead");
    let mut w1 = inst.session("w1");
    lead.initialize();
    w1.initialize();
    for _ in 0..5 {
        let a = lead.send_request("tools/call", json!({ "name": "who", "arguments": {} }));
        let b = w1.send_request("tools/call", json!({ "name": "who", "arguments": {} }));
        assert_eq!(text_of(&w1.response(b)).0, "w1 Worker");
        assert_eq!(text_of(&lead.response(a)).0, "lead Leader");
    }
    let (index, _) = lead.call("index", json!({}));
    assert!(
        index.contains("  lead: Leader, in a session now"),
        "{index}"
    );
    assert!(index.contains("  w1: Worker, in a session now"), "{index}");
}

fn refused_first_request(
    root: &std::path::Path,
    secret: Option<&str>,
) -> (serde_json::Value, String) {
    let mut cmd = bridge_command(root, secret);
    cmd.env("OVAI_CONNECT_SECONDS", "1");
    let mut s = Session::spawn_command(cmd);
    // Only the request: the bridge answers it and exits, so there is nobody to send `initialized` to.
    let r = s.request(
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "tests", "version": "1" } }),
    );
    let status = s.wait();
    assert!(
        !status.success(),
        "ovai mcp exits non-zero when it cannot connect"
    );
    let stderr = s.stderr.lock().unwrap().clone();
    (r, stderr)
}

#[test]
fn an_unknown_secret_is_answered_with_an_error_and_a_sentence() {
    let inst = Instance::new();
    let _d = inst.start();
    let (r, stderr) = refused_first_request(&inst.root, Some(&"0".repeat(64)));
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("is not the secret of any seat of the instance at"),
        "{msg}"
    );
    assert!(msg.contains("ovai seat list"), "{msg}");
    assert!(stderr.contains(msg), "stderr says the same: {stderr}");
}

#[test]
fn a_missing_secret_is_answered_with_an_error_and_a_sentence() {
    let inst = Instance::new();
    let _d = inst.start();
    let (r, stderr) = refused_first_request(&inst.root, None);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("OVAI_SECRET is not set."), "{msg}");
    assert!(stderr.contains("OVAI_SECRET is not set."), "{stderr}");
}

#[test]
fn no_server_is_answered_with_an_error_and_a_sentence() {
    let inst = Instance::new();
    let (r, stderr) = refused_first_request(&inst.root, Some(&inst.secret("lead")));
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!(
            "No ovai server is running for {}",
            inst.root.display()
        )),
        "{msg}"
    );
    assert!(msg.contains("ovai serve"), "{msg}");
    assert!(stderr.contains(msg), "{stderr}");
}

#[test]
fn with_no_server_a_line_over_the_cap_is_answered_unheld() {
    let inst = Instance::new();
    let mut cmd = bridge_command(&inst.root, Some(&inst.secret("lead")));
    cmd.env("OVAI_CONNECT_SECONDS", "1");
    let mut s = Session::spawn_command(cmd);
    let bridge = s.child.id();
    let rss = || rss_kb(bridge);
    let mut line = br#"{"jsonrpc":"2.0","method":"ping","params":{"pad":""#.to_vec();
    line.resize(64 << 20, b'x');
    s.writer().write_all(&line).unwrap();
    s.writer().flush().unwrap();
    // All but what the pipe holds has been read by now, and at most the cap of it held (a debug
    // build's bridge alone holds about 20 MB; the cap is 16 MiB).
    let during = rss();
    assert!(
        during < 30 * 1024,
        "ovai mcp held {during} kB reading a line of 64 MiB"
    );
    s.writer().write_all(b"\"},\"id\":9}\n").unwrap();
    s.writer().flush().unwrap();
    let r = s.recv_where(|m| m["id"] == 9);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("No ovai server is running for"), "{msg}");
}

#[test]
fn a_seat_added_while_serving_connects_without_a_restart_and_a_removed_one_is_ended() {
    let inst = Instance::with_plugins(&[("who.mjs", ECHO_CTX)]);
    let _d = inst.start();
    inst.add_seat("late");
    let mut s = inst.session("late");
    s.initialize();
    assert_eq!(s.call("who", json!({})).0, "late Worker");
    let secret = inst.secret("late");
    inst.cmd()
        .args(["seat", "remove", "late"])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "Removed the seat late, and ended its session",
        ));
    // The server tells the session's bridge why it closed the session, and the bridge says it: on
    // stderr, and to the model, as the answer of every call from then on (a client that saw the
    // connection close would say only that); it ends with its client.
    let words = "the seat late was removed (`ovai seat remove`), which ended this session: no session \
                 started at its desk reaches the server until the seat is added again (`ovai seat add late`)";
    s.wait_for_stderr(words);
    let (text, is_error) = s.call("who", json!({}));
    assert!(is_error);
    assert!(
        text.starts_with("This call was not made, and no call of this session can be: ")
            && text.contains(words),
        "{text}"
    );
    // Starting the session again cannot help: the seat is gone.
    assert!(!text.contains("Start this session again"), "{text}");
    // A line that is no request is answered as the daemon answers one, under null; a notification not.
    s.send_raw(b"{not json\n");
    s.send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 99 } }));
    s.send(&json!({ "jsonrpc": "2.0", "id": "p", "method": "ping" }));
    let bad = s.recv_where(|m| m["id"].is_null());
    assert_eq!(bad["error"]["code"], -32000, "{bad}");
    let ping = s.recv_where(|m| m["id"] == "p");
    assert!(
        ping["error"]["message"].as_str().unwrap().starts_with(
            "The seat late was removed (`ovai seat remove`), which ended this session"
        ),
        "{ping}"
    );
    s.close_input();
    let status = s.wait();
    assert!(!status.success());
    assert!(
        inst.rows("seats")
            .contains(&"The seat late was removed; its session was ended.".to_string())
    );
    // Its secret no longer opens a session.
    let (r, _) = refused_first_request(&inst.root, Some(&secret));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not the secret of any seat")
    );
}

#[test]
fn a_session_started_before_the_daemon_waits_for_it() {
    let inst = Instance::with_plugins(&[("who.mjs", ECHO_CTX)]);
    let mut s = inst.session_with_env("lead", &[("OVAI_CONNECT_SECONDS", "60")]);
    // The client's first request arrives while no daemon runs; it is answered once one is up.
    let id = s.send_request(
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "tests", "version": "1" } }),
    );
    let _d = inst.start();
    let r = s.response(id);
    assert_eq!(r["result"]["serverInfo"]["name"], "openovai", "{r}");
    s.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    assert_eq!(s.call("who", json!({})).0, "lead Leader");
}

/// Connects to the daemon's socket by hand, sends `first` (if any), and reads the daemon's one answer.
fn raw_hello(inst: &Instance, first: Option<&[u8]>) -> serde_json::Value {
    use std::io::{BufRead, Write};
    let mut sock =
        std::os::unix::net::UnixStream::connect(inst.root.join(".ovai/ovai.sock")).unwrap();
    if let Some(bytes) = first {
        sock.write_all(bytes).unwrap();
    }
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(sock).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

#[test]
fn a_hello_of_another_version_too_long_or_never_sent_is_refused_in_words() {
    let inst = Instance::new();
    let _d = inst.start();
    let other = raw_hello(&inst, Some(b"{\"ovai\":99,\"seatSecret\":\"x\"}\n"));
    assert_eq!(
        other,
        // For good: a bridge of another version does not look for this server again.
        json!({ "ok": false, "error": "this ovai server speaks version 1 of its socket protocol and the client speaks 99: use the same ovai binary for both", "for_good": true })
    );
    let long = format!("{{\"ovai\":1,\"seatSecret\":\"{}\"}}\n", "x".repeat(9000));
    assert_eq!(
        raw_hello(&inst, Some(long.as_bytes()))["error"],
        "the hello is longer than 8192 bytes"
    );
    let garbage = raw_hello(
        &inst,
        Some(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n"),
    );
    assert!(
        garbage["error"].as_str().unwrap().contains(
            "connect through `ovai mcp`, which an MCP client starts from desks/NAME/.mcp.json"
        ),
        "{garbage}"
    );
    assert_eq!(
        raw_hello(&inst, None)["error"],
        "no hello arrived within 3 s"
    );
}

/// A refused bridge whose client is gone ends, even with its stdin held open by another process (a
/// child of the client that inherited it): nobody reads what it would answer.
#[test]
fn a_refused_bridge_ends_once_nobody_reads_it() {
    use std::io::BufRead;
    let inst = Instance::new();
    let _d = inst.start();
    inst.add_seat("w1");
    let mut bridge = bridge_command(&inst.root, Some(&inst.secret("w1")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(bridge.stdout.take().unwrap());
    let stderr = bridge.stderr.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } })
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    inst.cmd().args(["seat", "remove", "w1"]).assert().success();
    let mut said = String::new();
    std::io::BufReader::new(stderr)
        .read_line(&mut said)
        .unwrap();
    assert!(said.contains("until the seat is added again"), "{said}");
    // The client goes; its stdin stays open (held here).
    drop(stdout);
    let status = wait_exit(&mut bridge);
    assert!(!status.success());
    drop(stdin);
}
