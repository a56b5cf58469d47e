//! The operator's command line: the commands people expect of a daemon like this, the refusals that
//! protect them, and words that say what happened and what to do.

mod common;
use common::*;
use predicates::prelude::*;
use serde_json::{Value, json};

const TOOL: &str = r#"
export const description = "Echoes a branch.";
export const inputSchema = { type: "object", properties: { branch: { type: "string", description: "A branch." }, n: { type: "integer" } }, required: ["branch"], additionalProperties: false };
export function run({ branch }, { seat }) { return { text: `${branch} for ${seat}` }; }
"#;

#[test]
fn stop_drains_and_waits_and_says_when_nothing_runs() {
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    let mut d = inst.start();
    let pid = d.pid();
    inst.cmd()
        .arg("stop")
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "Stopped the ovai server for {} (pid {pid}).",
            inst.root.display()
        )));
    assert!(!process_alive(pid));
    wait_until("the stopped daemon to be reaped", || {
        (!d.is_running()).then_some(())
    });
    assert_eq!(
        inst.rows("server").last().unwrap(),
        "ovai serve stopped on `ovai stop`."
    );
    inst.cmd().arg("stop").assert().success().stdout(
        predicate::str::contains("No ovai server is running for")
            .and(predicate::str::contains("nothing to stop")),
    );
}

/// A row that something else wrote into runtime.log (a terminal's clipboard write, a carriage return
/// that hides what came before it, bytes that are not UTF-8) is shown escaped, never played on the
/// terminal.
#[test]
fn logs_show_control_characters_escaped() {
    let inst = Instance::new();
    std::fs::write(
        inst.root.join("runtime.log"),
        b"2026-01-01T00:00:00.000Z host \x1b]52;c;cHduZWQ=\x07copied\rhidden \xff\n".as_slice(),
    )
    .unwrap();
    let out = inst.cmd().args(["logs", "-n", "1"]).output().unwrap();
    assert!(out.status.success());
    let shown = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        shown,
        "2026-01-01T00:00:00.000Z host \\u{1b}]52;c;cHduZWQ=\\u{7}copied\\rhidden \u{fffd}\n"
    );
}

#[test]
fn logs_print_the_latest_rows_across_the_rotated_file_and_follow() {
    let inst = Instance::new();
    std::fs::write(
        inst.root.join("runtime.log.1"),
        "2026-01-01T00:00:00.000Z server old one\n2026-01-01T00:00:01.000Z server old two\n",
    )
    .unwrap();
    std::fs::write(
        inst.root.join("runtime.log"),
        "2026-01-01T00:00:02.000Z server new one\n",
    )
    .unwrap();
    inst.cmd()
        .args(["logs", "-n", "2"])
        .assert()
        .success()
        .stdout(
            "2026-01-01T00:00:01.000Z server old two\n2026-01-01T00:00:02.000Z server new one\n",
        );
    let _d = inst.start();
    let follow = Running::following(&inst);
    inst.cmd().arg("restart").assert().success();
    follow.wait_for_stdout("Restarted, asked by `ovai restart`");
}

/// A plugin call that answers once `scratch/release` exists, having said it started (the instance's root
/// is read-only in the box; its folders are not).
const HELD: &str = r#"
import { existsSync, writeFileSync } from "node:fs";
export const description = "Answers once it is let go.";
export const inputSchema = { type: "object", properties: {} };
export async function run(_, { root, signal }) {
  signal.addEventListener("abort", () => writeFileSync(root + "/scratch/aborted", String(signal.reason?.message)));
  writeFileSync(root + "/scratch/started", "");
  while (!existsSync(root + "/scratch/release")) await new Promise((r) => setTimeout(r, 20));
  return { text: "let go" };
}
"#;

/// HELD, its event loop busy most of the time: what the daemon sends waits a moment to be read.
const BUSY_HELD: &str = r#"
import { existsSync, writeFileSync } from "node:fs";
export const description = "Answers once it is let go, busy meanwhile.";
export const inputSchema = { type: "object", properties: {} };
export async function run(_, { root, signal }) {
  signal.addEventListener("abort", () => writeFileSync(root + "/scratch/aborted", String(signal.reason?.message)));
  writeFileSync(root + "/scratch/started", "");
  while (!existsSync(root + "/scratch/release")) {
    const until = Date.now() + 50;
    while (Date.now() < until);
    await new Promise((r) => setTimeout(r, 1));
  }
  return { text: "let go" };
}
"#;

/// A call cancelled on the host a restart left running for it hears its signal: that host, its last
/// call gone, was ended before it could read the cancel.
#[test]
fn a_call_cancelled_on_a_host_a_restart_left_hears_its_signal() {
    let inst = Instance::with_plugins(&[("held.mjs", BUSY_HELD)]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    let _d = inst.start();
    let (mut s, call) = held_call(&inst);
    inst.cmd().arg("restart").assert().success();
    s.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": call, "reason": "the user pressed Esc" }
    }));
    let why = wait_until("the plugin to hear the cancel", || {
        std::fs::read_to_string(inst.root.join("scratch/aborted")).ok()
    });
    assert!(why.contains("cancel"), "{why}");
}

/// While `ovai stop` waits for the calls in flight, the daemon is stopping, and every command says so:
/// status is not "no server", a second stop waits with the first, and a new serve waits for the lock.
#[test]
fn a_stopping_server_is_said_to_be_stopping_and_a_new_one_waits_for_it() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD)]);
    inst.set_config(json!({ "shutdownGraceSeconds": 120 }));
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    let mut d = inst.start();
    let pid = d.pid();
    let mut s = inst.session("lead");
    s.initialize();
    let call = s.send_request("tools/call", json!({ "name": "held", "arguments": {} }));
    wait_until("the call to start", || {
        inst.root.join("scratch/started").exists().then_some(())
    });
    let spawn = |args: &[&str]| {
        let mut cmd = std::process::Command::new(OVAI);
        cmd.args(args).arg("--root").arg(&inst.root);
        Running::spawn(cmd)
    };
    let first = spawn(&["stop"]);
    let status = wait_until("status to say the server is stopping", || {
        let out = inst.cmd().arg("status").output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        said.contains("is stopping")
            .then_some((out.status.code(), said))
    });
    assert_eq!(status.0, Some(0), "{}", status.1);
    assert!(
        status.1.contains(&format!("(pid {pid}) is stopping")),
        "{}",
        status.1
    );
    let json = inst.status_json();
    assert_eq!(json["stopping"], json!(true), "{json}");
    let refused = inst
        .cmd()
        .args(["call", "held", "--seat", "lead"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(!refused.status.success());
    assert!(said.contains("is stopping"), "{said}");
    // A second stop waits with the first, and a new serve waits for the lock: each says so.
    let second = spawn(&["stop"]);
    second.wait_for_stderr(&format!("waiting for the server (pid {pid})"));
    // A seat change waits too: the stopping host's box would see the new secret.
    let add = spawn(&["seat", "add", "w9"]);
    add.wait_for_stderr(&format!(
        "(pid {pid}) is stopping; the seats change once it has ended"
    ));
    assert!(!inst.root.join("desks/w9/.mcp.json").exists());
    let mut next = spawn(&["serve"]);
    next.wait_for_stderr(&format!("waiting for it (pid {pid}) to end"));
    std::fs::write(inst.root.join("scratch/release"), "").unwrap();
    assert_eq!(text_of(&s.response(call)), ("let go".to_string(), false));
    let (status, out, _) = first.wait();
    assert!(status.success());
    assert!(out.contains("Stopped the ovai server"), "{out}");
    let (status, out, err) = second.wait();
    assert!(status.success(), "{out} {err}");
    assert!(
        out.contains(&format!(
            "(pid {pid}) was stopping already, and has stopped"
        )),
        "{out}"
    );
    wait_until("the old daemon to end", || (!d.is_running()).then_some(()));
    // The new serve waited for the lock instead of failing, and serves now.
    let up = wait_until("the new serve to answer", || {
        let out = inst.cmd().args(["status", "--json"]).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["running"] == json!(true) && v["stopping"] != json!(true)).then_some(v)
    });
    assert_eq!(up["pid"], json!(next.id()), "{up}");
    assert!(next.running());
    let (status, _, err) = add.wait();
    assert!(status.success(), "{err}");
    assert!(inst.root.join("desks/w9/.mcp.json").exists());
    inst.cmd().arg("stop").assert().success();
    assert!(next.wait().0.success());
}

/// A session of lead with a `held` call running: the session and the call's id.
fn held_call(inst: &Instance) -> (Session, u64) {
    let mut s = inst.session("lead");
    s.initialize();
    let call = s.send_request("tools/call", json!({ "name": "held", "arguments": {} }));
    wait_until("the held call to start", || {
        inst.root.join("scratch/started").exists().then_some(())
    });
    (s, call)
}

/// A seat change replaces the boxed plugin host (a box made before could read the new secret), and the
/// calls it runs finish first: the secret is written once they have.
/// A session of lead with a `held` call running, and `ovai seat add w4` waiting for it: the session, the
/// call's id, and the command.
fn seat_add_waiting_on_a_held_call(inst: &Instance) -> (Session, u64, Running) {
    let (s, call) = held_call(inst);
    let mut cmd = std::process::Command::new(OVAI);
    cmd.args(["seat", "add", "w4", "--root"]).arg(&inst.root);
    let add = Running::spawn(cmd);
    add.wait_for_stderr(
        "ovai: waiting for the plugin calls in flight to finish before the seats change",
    );
    (s, call, add)
}

#[test]
fn a_seat_change_lets_the_calls_in_flight_finish() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD)]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    let _d = inst.start();
    let (mut s, call, add) = seat_add_waiting_on_a_held_call(&inst);
    std::fs::write(inst.root.join("scratch/release"), "").unwrap();
    assert_eq!(text_of(&s.response(call)), ("let go".to_string(), false));
    let (status, _, err) = add.wait();
    assert!(status.success(), "{err}");
    inst.session("w4").initialize();
}

/// A desk file that is a link refuses `seat rotate` before the plugin host is held: it used to cut the
/// calls in flight (after their 10 s), then fail.
#[test]
fn a_linked_desk_file_refuses_rotate_before_any_call_is_held() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD)]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    inst.add_seat("w1");
    let desk = inst.root.join("desks/w1");
    let real = inst.root.join("w1-opencode.json");
    std::fs::rename(desk.join("opencode.json"), &real).unwrap();
    std::os::unix::fs::symlink(&real, desk.join("opencode.json")).unwrap();
    let _d = inst.start();
    let (mut s, held) = held_call(&inst);
    inst.cmd()
        .args(["seat", "rotate", "w1"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains("opencode.json is a symbolic link"))
        .stderr(predicate::str::contains("waiting for the plugin calls").not());
    std::fs::write(inst.root.join("scratch/release"), "").unwrap();
    assert_eq!(text_of(&s.response(held)), ("let go".to_string(), false));
}

/// Ctrl-C on `ovai stop` while the server finishes its calls ends the wait, and says the server goes on
/// stopping and how to end its calls now: the command used to vanish with nothing said.
#[test]
fn ctrl_c_on_stop_says_the_server_goes_on_stopping() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD)]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    inst.set_config(json!({ "shutdownGraceSeconds": 60 }));
    let mut d = inst.start();
    let pid = d.pid();
    let (_s, _call) = held_call(&inst);
    let mut cmd = std::process::Command::new(OVAI);
    cmd.args(["stop", "--root"]).arg(&inst.root);
    let stop = Running::spawn(cmd);
    stop.wait_for_stderr("ovai: waiting for the server");
    // The daemon, stopped by a command and not by Ctrl-C, does not speak of Ctrl-C (helper-81).
    wait_until("the daemon to say how its calls end now", || {
        let said = std::fs::read_to_string(&d.stderr).ok()?;
        said.contains(&format!(
            "(shutdownGraceSeconds); `kill -INT {pid}` ends them now"
        ))
        .then_some(())
    });
    assert!(
        !std::fs::read_to_string(&d.stderr)
            .unwrap()
            .contains("Ctrl-C again")
    );
    signal(stop.id(), libc::SIGINT);
    let (status, _, err) = stop.wait();
    // Ended by the signal, as a shell loop that sent it expects.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{err}");
    assert!(
        err.contains(&format!(
            "ovai: no longer waiting (SIGINT); the server (pid {pid}) goes on stopping, its calls in flight \
             finishing within shutdownGraceSeconds. `kill -INT {pid}` ends them now."
        )),
        "{err}"
    );
    assert!(d.is_running());
    // As it says: the server ends its calls at once.
    signal(pid, libc::SIGINT);
    wait_until("the server to end", || (!d.is_running()).then_some(()));
}

/// Whether the daemon's plugin host runs in a box, which a seat change replaces.
fn boxed(d: &Daemon) -> bool {
    d.status().unwrap()["host"]["isolation"]
        .as_str()
        .unwrap()
        .starts_with("The plugin host runs in a")
}

/// A call of a seat being given a new secret, made while the change waits for the calls in flight, waits
/// for the next host and never reaches one: its session ends first. It is told it was not made (it was
/// told it may have run in part, though it never ran).
#[test]
fn a_call_waiting_for_the_host_when_its_seat_is_rotated_was_not_made() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD), ("echo.mjs", TOOL)]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    inst.add_seat("w1");
    let d = inst.start();
    if !boxed(&d) {
        // Unboxed, a seat change does not replace the host: nothing to wait for.
        return;
    }
    let mut w1 = inst.session("w1");
    w1.initialize();
    let (mut s, held) = held_call(&inst);
    let mut cmd = std::process::Command::new(OVAI);
    cmd.args(["seat", "rotate", "w1", "--root"]).arg(&inst.root);
    let rotate = Running::spawn(cmd);
    rotate.wait_for_stderr(
        "ovai: waiting for the plugin calls in flight to finish before the seats change",
    );
    let call = w1.send_request(
        "tools/call",
        json!({ "name": "echo", "arguments": { "branch": "main" } }),
    );
    // Given a moment to reach the server (sent later, its bridge says it was not made all the same).
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(inst.root.join("scratch/release"), "").unwrap();
    assert_eq!(text_of(&s.response(held)), ("let go".to_string(), false));
    let (text, is_error) = text_of(&w1.response(call));
    assert!(is_error, "{text}");
    assert!(text.contains("was not made"), "{text}");
    assert!(!text.contains("may have run in part"), "{text}");
    let (status, _, err) = rotate.wait();
    assert!(status.success(), "{err}");
}

/// A call made while a seat change waits for the calls in flight (up to 10 s) and the next host then
/// reads its plugins waits for that host, as the docs say new calls do: it was refused after 10 s.
#[test]
fn a_call_made_during_a_seat_change_waits_for_the_next_host() {
    let inst = Instance::with_plugins(&[
        ("held.mjs", HELD),
        ("echo.mjs", TOOL),
        (
            "slow-start.mjs",
            "await new Promise((r) => setTimeout(r, 2000));\nexport const description = 'Slow to import.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'x' }; }\n",
        ),
    ]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    let d = inst.start();
    if !boxed(&d) {
        // Unboxed, a seat change does not replace the host: nothing to wait for.
        return;
    }
    let (mut s, held, add) = seat_add_waiting_on_a_held_call(&inst);
    // Never let go: the change waits its 10 s for it, and the next host takes 2 s to read plugins/.
    let (text, is_error) = s.call("echo", json!({ "branch": "main" }));
    assert_eq!(
        (text.as_str(), is_error),
        ("main for lead", false),
        "{text}"
    );
    let (text, is_error) = text_of(&s.response(held));
    assert!(
        is_error && text.contains("the seats changed while it ran"),
        "{text}"
    );
    // It ran for 10 s: it may have done some of its work, which "call it again" would do twice.
    assert!(
        text.ends_with("It may have run in part: look before calling it again."),
        "{text}"
    );
    // Its signal fired before its host was ended: the plugin could clean up.
    let why = std::fs::read_to_string(inst.root.join("scratch/aborted")).unwrap_or_default();
    assert!(why.contains("the seats changed"), "{why:?}");
    let (status, _, err) = add.wait();
    assert!(status.success(), "{err}");
    // The person who changed the seats is told whose work was cut, not only runtime.log.
    assert!(
        err.contains(
            "ovai: the calls in flight to plugins/held.mjs had not finished within 10 s, and were stopped"
        ),
        "{err}"
    );
}

/// A socket removed under a running server (a clean-up of `.ovai/`) is made again: commands and sessions
/// reach it as before, and runtime.log says what happened.
#[test]
fn a_removed_socket_is_made_again() {
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    let d = inst.start();
    let socket = inst.root.join(".ovai/ovai.sock");
    std::fs::remove_file(&socket).unwrap();
    let v = wait_until("the socket to be made again", || d.status());
    assert_eq!(v["pid"], json!(d.pid()), "{v}");
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "branch": "main" })),
        ("main for lead".to_string(), false)
    );
    assert!(
        inst.rows("server").iter().any(|r| r.starts_with(&format!(
            "The socket {} was removed or replaced while the server ran; it is made again",
            socket.display()
        ))),
        "{:?}",
        inst.rows("server")
    );
}

/// A file of the private folder removed under a running server is made again from what it holds (the
/// lock, so no second server starts; the control secret, so commands reach it). The folder itself
/// removed (`rm -rf .ovai`, a `git clean -fdx`) took the seats' secrets and the plugin host's view without
/// them: the server stops saying so, and `ovai seat rebuild` then `ovai serve` bring the seats back.
#[test]
fn a_removed_private_file_is_made_again_and_a_removed_folder_stops_the_server() {
    use std::os::unix::fs::PermissionsExt;
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    let mut d = inst.start();
    let private = inst.root.join(".ovai");
    std::fs::remove_file(private.join("serve.lock")).unwrap();
    std::fs::remove_file(private.join("control.secret")).unwrap();
    inst.wait_for_row(
        "server",
        "serve.lock was removed or replaced while the server ran; it is made again and held, so that no second server starts.",
    );
    let v = wait_until("the control secret to be made again", || d.status());
    assert_eq!(v["pid"], json!(d.pid()), "{v}");
    // The mark that the server is up: without it, one killed after a long day goes unsaid.
    let up = private.join("serving.json");
    std::fs::remove_file(&up).unwrap();
    inst.wait_for_row(
        "server",
        "serving.json was removed or replaced while the server ran; it is made again.",
    );
    let mark: Value = serde_json::from_str(&std::fs::read_to_string(&up).unwrap()).unwrap();
    assert_eq!(mark["pid"], json!(d.pid()), "{mark}");
    assert_eq!(mark["since"], v["startedAt"], "{mark} {v}");
    // Another's in its place is written over; a folder there, which cannot be, is said once.
    std::fs::write(&up, r#"{"pid":1}"#).unwrap();
    wait_until("the mark to be this server's again", || {
        std::fs::read_to_string(&up)
            .ok()
            .filter(|t| t.contains(&format!("\"pid\":{}", d.pid())))
    });
    std::fs::remove_file(&up).unwrap();
    std::fs::create_dir(&up).unwrap();
    inst.wait_for_row(
        "server",
        "serving.json was removed or replaced while the server ran; it cannot be made again",
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    let said = inst
        .rows("server")
        .iter()
        .filter(|r| r.contains("serving.json was removed or replaced while the server ran; it cannot be made again"))
        .count();
    assert_eq!(said, 1, "{:?}", inst.rows("server"));
    std::fs::remove_dir(&up).unwrap();
    wait_until("the mark to be made again", || up.is_file().then_some(()));
    // Changed in place, it is written again too; and the folder's .gitignore is kept.
    std::fs::write(private.join("control.secret"), "not the secret").unwrap();
    std::fs::remove_file(private.join(".gitignore")).unwrap();
    wait_until(
        "the control secret and the .gitignore to be written again",
        || (d.status().is_some() && private.join(".gitignore").exists()).then_some(()),
    );
    // A link put in the lock's place is never written through.
    let victim = inst.root.join("victim.txt");
    std::fs::write(&victim, "kept").unwrap();
    // Put in place at once (a rename over the lock), not removed then made: the server remakes what
    // goes missing.
    std::os::unix::fs::symlink(&victim, private.join("link.tmp")).unwrap();
    std::fs::rename(private.join("link.tmp"), private.join("serve.lock")).unwrap();
    inst.wait_for_row(
        "server",
        "serve.lock was removed or replaced while the server ran; it cannot be made again (it is a symbolic link, which ovai never makes there: remove it)",
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept");
    std::fs::remove_file(private.join("serve.lock")).unwrap();
    wait_until("the lock to be taken again", || {
        std::fs::read_to_string(private.join("serve.lock"))
            .ok()
            .filter(|pid| pid == &d.pid().to_string())
    });
    inst.cmd()
        .arg("serve")
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "Another ovai serve is already serving {} (pid {})",
            inst.root.display(),
            d.pid()
        )));

    // A socket something else took the place of: commands name the server that holds the instance, and
    // how to end it, rather than saying none runs; once the thing goes, the socket is made again.
    let socket = private.join("ovai.sock");
    // The server may bind the socket again between the removal and the folder's making: until it
    // does not.
    wait_until("a folder in the socket's place", || {
        let _ = std::fs::remove_file(&socket);
        std::fs::create_dir(&socket).ok()
    });
    inst.wait_for_row(
        "server",
        "ovai.sock was removed or replaced while the server ran, and cannot be made again",
    );
    for cmd in ["status", "stop"] {
        inst.cmd().arg(cmd).assert().failure().stderr(predicate::str::contains(format!(
            "An ovai server (pid {}) holds the instance at {}, but its socket {} cannot be reached",
            d.pid(),
            inst.root.display(),
            socket.display()
        )));
    }
    std::fs::remove_dir(&socket).unwrap();
    wait_until("the socket to be made again", || d.status());

    let mut s = inst.session("lead");
    s.initialize();
    // The server stops, its row saying why, and its last what it stopped on.
    let stops = |d: &mut Daemon, why: &str, on: &str| {
        wait_until("the server to stop", || (!d.is_running()).then_some(()));
        let rows = inst.rows("server");
        assert!(rows.iter().any(|r| r.starts_with(why)), "{rows:?}");
        assert_eq!(
            rows.last().unwrap(),
            &format!("ovai serve stopped on {on}.")
        );
    };
    std::fs::remove_dir_all(&private).unwrap();
    stops(
        &mut d,
        &format!(
            "The private folder {} was removed or replaced while the server ran, and with it the lock",
            private.display()
        ),
        "the removal of its private folder",
    );
    // A server started before the rebuild says what is missing, and what makes it again.
    let early = inst.start();
    assert!(
        inst.rows("seats").iter().any(|r| r
            == &format!(
                "{} is not there, so no seat can connect; 1 desk in {} holds the seats' secrets: `ovai seat \
                 rebuild` makes the seats again from them.",
                private.join("seats.json").display(),
                inst.root.join("desks").display()
            )),
        "{:?}",
        inst.rows("seats")
    );
    early.stop();
    inst.cmd().args(["seat", "rebuild"]).assert().success();
    let mut d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "branch": "main" })),
        ("main for lead".to_string(), false)
    );
    // Opened to other users, it is trusted no more: the server stops, and a new one draws a new secret.
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o777)).unwrap();
    stops(
        &mut d,
        &format!(
            "The private folder {} was found open to other users (mode 777) while the server ran",
            private.display()
        ),
        "its private folder found open to other users",
    );
}

/// A private folder that is a link (to a folder another user may control) or no folder is refused in
/// words, never written through.
#[test]
fn a_private_folder_that_is_a_link_or_no_folder_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let inst = Instance::new();
    let private = inst.root.join(".ovai");
    let elsewhere = tempfile::tempdir_in("/tmp").unwrap();
    let moved = elsewhere.path().join("ovai");
    std::fs::rename(&private, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &private).unwrap();
    inst.cmd()
        .arg("serve")
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{} is a symbolic link: ovai keeps the seats' and the server's secrets there",
            private.display()
        )));
    assert!(!moved.join("ovai.sock").exists());
    std::fs::remove_file(&private).unwrap();
    std::fs::rename(&moved, &private).unwrap();
    // Opened to others, it may hold what they put there: looked at by the operator first.
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
    inst.cmd()
        .arg("serve")
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{} is open to other users (mode 755): ovai keeps",
            private.display()
        )));
    inst.cmd()
        .args(["call", "index", "--seat", "lead"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "is open to other users (mode 755)",
        ));
    std::fs::remove_dir_all(&private).unwrap();
    std::fs::write(&private, "").unwrap();
    inst.cmd()
        .arg("serve")
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{} is no folder: ovai keeps",
            private.display()
        )));
}

/// A secret goes to nobody else's listener: a socket held by another user's process (a folder opened
/// once, a socket moved in) gets no hello, and the command says whose it is.
#[test]
fn no_secret_is_sent_to_another_users_socket() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: only root can start a listener of another user here");
        return;
    }
    let inst = Instance::new();
    let elsewhere = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::set_permissions(elsewhere.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = elsewhere.path().join("sock");
    let mut listener = std::process::Command::new("python3")
        .args([
            "-c",
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen()\nprint('up',flush=True)\ns.settimeout(20)\nc,_=s.accept()\nc.settimeout(2)\ntry:\n  print('got',c.recv(4096),flush=True)\nexcept Exception as e:\n  print('nothing',flush=True)\n",
        ])
        .arg(&theirs)
        .stdout(std::process::Stdio::piped())
        .uid(65534)
        .gid(65534)
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(listener.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "up");
    std::fs::rename(&theirs, inst.root.join(".ovai/ovai.sock")).unwrap();
    // The file made ours (a folder holding another user's file is refused before any connect): the
    // listener is still theirs.
    std::os::unix::fs::chown(inst.root.join(".ovai/ovai.sock"), Some(0), Some(0)).unwrap();
    inst.cmd()
        .args(["call", "index", "--seat", "lead"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "The socket {} is held by a process of another user (uid 65534), not by an ovai server of yours: nothing was sent there.",
            inst.root.join(".ovai/ovai.sock").display(),
        )));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let _ = listener.wait();
    // The connection is closed with nothing on it (or never written to).
    assert!(
        matches!(rest.trim(), "got b''" | "nothing"),
        "the listener was sent: {rest}"
    );
}

/// runtime.log removed under a running server (by hand, or a clean-up script) is made again at the
/// next row, and `logs -f` follows the new file without playing the rotated one as new rows.
#[test]
fn a_removed_runtime_log_is_made_again_and_followed() {
    let inst = Instance::new();
    std::fs::write(
        inst.root.join("runtime.log.1"),
        "2026-01-01T00:00:00.000Z server an old row of the rotated file\n",
    )
    .unwrap();
    let _d = inst.start();
    let follow = Running::following(&inst);
    // A row before the removal, so the follower is known to hold the file.
    inst.cmd().arg("restart").assert().success();
    follow.wait_for_stdout("Restarted, asked by `ovai restart`");
    std::fs::remove_file(inst.root.join("runtime.log")).unwrap();
    inst.cmd().arg("restart").assert().success();
    let kept = std::fs::read_to_string(inst.root.join("runtime.log")).unwrap_or_default();
    assert!(
        kept.contains("Restarted, asked by `ovai restart`"),
        "{kept:?}"
    );
    follow.wait_for_stdout("generation 3 serves now");
    let shown = follow.shown();
    assert!(!shown.contains("an old row"), "{shown}");
    inst.cmd()
        .args(["logs", "-n", "1"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Restarted, asked by `ovai restart`",
        ));
}

#[test]
fn a_rotate_keeps_what_the_person_added_to_the_bridges_environment() {
    let inst = Instance::new();
    let path = inst.root.join("desks/lead/.mcp.json");
    let mut doc: serde_json::Value = read_json(&path);
    doc["mcpServers"]["openovai"]["env"]["OVAI_BRIDGE_BATCH"] = json!("0");
    std::fs::write(&path, doc.to_string()).unwrap();
    let old = inst.secret("lead");
    inst.cmd()
        .args(["seat", "rotate", "lead"])
        .assert()
        .success();
    let doc: serde_json::Value = read_json(&path);
    let env = &doc["mcpServers"]["openovai"]["env"];
    assert_eq!(env["OVAI_BRIDGE_BATCH"], json!("0"), "{doc}");
    assert_eq!(env["OVAI_SECRET"], json!(inst.secret("lead")), "{doc}");
    assert_ne!(inst.secret("lead"), old, "the rotate drew a new secret");
    assert_eq!(
        env["OVAI_ROOT"],
        json!(inst.root.display().to_string()),
        "{doc}"
    );
    // A rebuild reads the desks and writes none of them.
    let before = std::fs::read(&path).unwrap();
    inst.cmd().args(["seat", "rebuild"]).assert().success();
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A seat with two sessions has both counted, where `seat rotate` and the row said "the session".
#[test]
fn seat_rotate_counts_every_session_it_ends() {
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    inst.add_seat("w1");
    let _d = inst.start();
    let mut one = inst.session("w1");
    one.initialize();
    let mut two = inst.session("w1");
    two.initialize();
    let mut lead = inst.session("lead");
    lead.initialize();
    inst.cmd()
        .args(["seat", "rotate", "w1"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "and the 2 sessions holding it were ended",
        ));
    assert!(
        inst.rows("seats").contains(
            &"The seat w1 was given a new secret; its 2 sessions were ended.".to_string()
        ),
        "{:?}",
        inst.rows("seats")
    );
    assert!(!lead.call("echo", json!({ "branch": "main" })).1);
}

#[test]
fn seat_rotate_refuses_the_old_secret_ends_its_session_and_keeps_the_leader() {
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    let _d = inst.start();
    let old = inst.secret("lead");
    let mut s = inst.session("lead");
    s.initialize();
    inst.cmd()
        .args(["seat", "rotate", "lead"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Gave the seat lead a new secret")
                .and(predicate::str::contains(
                    "the session holding it was ended (its client reads the new secret when it starts \
                     `ovai mcp` again: a new session in the desk, or the client's own reconnect, /mcp in \
                     Claude Code)",
                )),
        );
    assert_ne!(inst.secret("lead"), old);
    // The session of the old secret was ended: once its bridge is refused, its calls are answered saying
    // why, until its client ends.
    s.wait_for_stderr("is not the secret of any seat");
    let (text, is_error) = s.call("echo", json!({ "branch": "main" }));
    assert!(
        is_error && text.contains("is not the secret of any seat"),
        "{text}"
    );
    s.close_input();
    let status = s.wait();
    assert!(!status.success(), "the session of the old secret was ended");
    let (_stale, r) = inst.try_session(&old);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not the secret of any seat of the instance at"),
        "{r}"
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the seat may have been removed, or given a new secret (`ovai seat rotate`"),
        "{r}"
    );
    let mut fresh = inst.session("lead");
    let init = fresh.initialize();
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("seat lead, the Leader")
    );
    assert!(
        inst.rows("seats")
            .contains(&"The seats changed: `ovai seat rotate lead`.".to_string()),
        "{:?}",
        inst.rows("seats")
    );
    assert!(
        inst.rows("seats")
            .contains(&"The seat lead was given a new secret; its session was ended.".to_string())
    );
    let out = inst
        .cmd()
        .args(["seat", "list", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["running"], true);
    assert_eq!(v["seats"][0]["name"], "lead");
    assert_eq!(v["seats"][0]["role"], "Leader");
    assert_eq!(v["seats"][0]["sessions"], 1);
}

#[test]
fn status_says_when_nothing_runs_lists_what_is_not_served_and_counts_calls() {
    let inst = Instance::with_plugins(&[
        ("echo.mjs", TOOL),
        ("broken.mjs", "export const description = 'x';"),
        (
            "throws.mjs",
            "export const description = 'x';\nexport const inputSchema = { type: 'object' };\nexport function run() { throw new Error('bug'); }",
        ),
        (
            "silent.mjs",
            "export const description = 'x';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: ' ' }; }",
        ),
        (
            "picky.mjs",
            "export const description = 'x';\nexport const inputSchema = { type: 'object', properties: { n: { type: 'integer', description: 'n' } }, additionalProperties: false };\nexport function run({ n }) { return n ? { text: 'ok' } : { refused: 'not today' }; }",
        ),
    ]);
    let out = inst.cmd().args(["status", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["running"], false);
    // Said on stderr as every other command says it.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "No ovai server is running for {}: start one there with `ovai serve`.",
            inst.root.display()
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    inst.cmd()
        .arg("status")
        .assert()
        .code(3)
        .stderr(predicate::str::contains("No ovai server is running for"));
    inst.set_config(json!({ "callLog": true }));
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("echo", json!({ "branch": "main" })).1);
    assert!(s.call("echo", json!({})).1);
    assert!(s.call("throws", json!({})).1);
    assert!(s.call("silent", json!({})).1);
    assert!(s.call("picky", json!({})).1);
    assert!(s.call("picky", json!({ "n": "x" })).1);
    assert!(!s.call("picky", json!({ "n": 1 })).1);
    // A refusal for the caller's arguments is not the tool's fault; a throw is, and its author reads so.
    // A refusal in the tool's own words is told apart from the server's for the arguments (helper-92).
    // Kinds with none are not named (helper-81: "0 refused, of which 0 … and 0 …").
    inst.cmd().arg("status").assert().success().stdout(
        predicate::str::contains(
            "\nplugins/broken.mjs is not served: it does not export inputSchema or run (add `export const inputSchema = ...` and `export async function run(args, context) { ... }`)\n",
        )
        .and(predicate::str::contains(
            "Calls to echo: 2 (1 refused: 1 for arguments that did not fit its inputSchema); p50 ",
        ))
        .and(predicate::str::contains(
            "Calls to picky: 3 (2 refused: 1 in the tool's own words, 1 for arguments that did not fit its inputSchema); p50 ",
        ))
        .and(predicate::str::contains(
            "Calls to throws: 1 (1 refused: 1 for a fault in the tool's code); p50 ",
        ))
        .and(predicate::str::contains(
            "Calls to silent: 1 (1 refused: 1 for a fault in the tool's code); p50 ",
        )),
    );
    let v = d.status().unwrap();
    assert_eq!(v["running"], true);
    let echo = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "echo")
        .unwrap()
        .clone();
    assert_eq!(
        (echo["calls"].clone(), echo["refusals"].clone()),
        (json!(2), json!(1))
    );
    // The call log: one line a call, the owner's alone, never the arguments or the answer.
    let log = wait_until("the call log", || {
        let text = std::fs::read_to_string(inst.root.join("calls.jsonl")).ok()?;
        (text.lines().count() >= 2).then_some(text)
    });
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(
        (
            first["seat"].clone(),
            first["tool"].clone(),
            first["outcome"].clone()
        ),
        (json!("lead"), json!("echo"), json!("text"))
    );
    assert!(!log.contains("main"), "no arguments, no answers: {log}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(inst.root.join("calls.jsonl"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
}

#[test]
fn tools_show_what_each_costs_a_turn_and_call_reads_stdin_and_suggests_from_the_schema() {
    let inst =
        Instance::with_plugins(&[("echo.mjs", TOOL), ("broken.mjs", "export const run = 5;")]);
    let _d = inst.start();
    let out = inst
        .cmd()
        .args(["tools", "echo", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = &v["tools"][0];
    assert_eq!(
        entry["bytes"],
        serde_json::to_vec(&entry["entry"]).unwrap().len()
    );
    let mut s = inst.session("lead");
    s.initialize();
    let listed = s.request("tools/list", json!({}));
    let echo = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap()
        .clone();
    assert_eq!(entry["entry"], echo, "the entry as tools/list sends it");
    inst.cmd().arg("tools").assert().success().stdout(
        predicate::str::contains(format!("echo ({} bytes each turn)", entry["bytes"])).and(
            predicate::str::contains("3 tools; together they cost every session"),
        ),
    );
    inst.cmd()
        .args(["call", "echo", "-", "--seat", "lead"])
        .write_stdin("{\"branch\": \"from-stdin\"}")
        .assert()
        .success()
        .stdout("from-stdin for lead\n");
    inst.cmd()
        .args(["call", "echo", "{bad json}", "--seat", "lead"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("call echo '{\"branch\":\"…\"}'"));
    inst.cmd()
        .args(["call", "broken", "--seat", "lead"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("There is no tool called broken here: plugins/broken.mjs is not served: it does not export description or inputSchema (add `export const description = ...` and `export const inputSchema = ...`); its run is a number, not a function"));
}

#[test]
fn completions_version_and_service_uninstall_work() {
    ovai()
        .args(["completions", "bash"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("_clap_complete_ovai")
                .and(predicate::str::contains(" ovai\n")),
        );
    ovai()
        .args(["completions", "fish"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "complete --keep-order --exclusive --command ovai",
        ));
    ovai()
        .arg("version")
        .assert()
        .success()
        .stdout(format!("ovai {}\n", env!("CARGO_PKG_VERSION")));
    let inst = Instance::new();
    let home = tempfile::tempdir().unwrap();
    inst.cmd()
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["service", "install", "--systemd", "--print"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("The file above goes to ")
                .and(predicate::str::contains(".config/systemd/user/ovai-")),
        );
    inst.cmd()
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["service", "install", "--systemd"])
        .assert()
        .success();
    inst.cmd()
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["service", "uninstall", "--systemd", "--print"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Would remove").and(predicate::str::contains(
                "systemctl --user disable --now ovai-",
            )),
        );
    inst.cmd()
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["service", "uninstall", "--systemd"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Removed "));
    let units = std::fs::read_dir(home.path().join(".config/systemd/user"))
        .unwrap()
        .count();
    assert_eq!(units, 0);
    let help = ovai().arg("--help").output().unwrap().stdout;
    let help = String::from_utf8(help).unwrap();
    for cmd in [
        "init",
        "serve",
        "stop",
        "mcp",
        "plugin",
        "check",
        "restart",
        "status",
        "tools",
        "logs",
        "seat",
        "call",
        "service",
        "completions",
        "version",
        "demo",
    ] {
        assert!(
            help.contains(&format!("  {cmd} ")),
            "{cmd} in --help: {help}"
        );
    }
}

/// What a shell is offered, asked as the script `ovai completions fish` wires it to ask.
fn offered(inst: &Instance, words: &[&str]) -> Vec<String> {
    let out = ovai()
        .env("COMPLETE", "fish")
        .env("OVAI_ROOT", &inst.root)
        .arg("--")
        .arg("ovai")
        .args(words)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .filter(|w| !w.starts_with('-'))
        .collect()
}

#[test]
fn completion_offers_the_instances_tools_and_seats_and_not_host_box() {
    let inst = Instance::new();
    inst.add_seat("w1");
    std::fs::write(inst.root.join("plugins/ci-status.mjs"), "").unwrap();
    std::fs::write(inst.root.join("plugins/not_a_tool.mjs"), "").unwrap();
    let tools = offered(&inst, &["call", ""]);
    for t in ["ci-status", "index", "room"] {
        assert!(tools.contains(&t.to_string()), "{t} in {tools:?}");
    }
    assert!(!tools.iter().any(|t| t == "not_a_tool"), "{tools:?}");
    let seats = offered(&inst, &["call", "index", "--seat", ""]);
    assert_eq!(seats, ["lead", "w1"]);
    assert_eq!(offered(&inst, &["seat", "remove", ""]), ["lead", "w1"]);
    let commands = offered(&inst, &[""]);
    assert!(commands.contains(&"call".to_string()), "{commands:?}");
    assert!(!commands.iter().any(|c| c == "host-box"), "{commands:?}");
}

#[test]
fn init_refuses_a_nested_instance_an_empty_user_and_two_places() {
    let inst = Instance::new();
    for inside in ["desks/lead", "plugins"] {
        ovai()
            .arg("init")
            .arg(inst.root.join(inside).join("sub"))
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!(
                "is inside the openovai instance at {}: a second instance there would take over every command \
                 run in it. Nothing was made",
                inst.root.display()
            )));
    }
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    ovai()
        .args(["init", "--user", ""])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--user is empty"));
    let other = tempfile::tempdir_in("/tmp").unwrap();
    ovai()
        .arg("init")
        .arg(dir.path())
        .arg("--root")
        .arg(other.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("two places"));
    ovai()
        .args(["demo", "--root"])
        .arg(other.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("takes no --root"));
    assert!(!dir.path().join("openovai.json").exists());
    // Next steps are said the way the binary was run, with the root: they work from where init ran.
    let fresh = tempfile::tempdir_in("/tmp").unwrap();
    let root = fresh.path().display().to_string();
    ovai()
        .current_dir("/")
        .arg("init")
        .arg(fresh.path())
        .assert()
        .success()
        .stdout(
            predicate::str::contains(format!(
                "Next: `{OVAI} serve --root {root}` runs the server; `{OVAI} seat add NAME --root {root}` adds a Worker."
            ))
            .and(
                // As `seat add` says it: Gemini CLI and Codex leave an untrusted desk's server out.
                predicate::str::contains(format!(
                    "Gemini CLI and Codex read a desk's settings only in a folder you trust: `{OVAI} seat trust lead --root {root}`"
                )),
            ),
        );
    ovai()
        .current_dir("/")
        .args(["seat", "add", "w1", "--root", &root])
        .assert()
        .success();
}

#[test]
fn the_leader_cannot_be_removed_or_be_no_seat_and_names_cannot_clash_in_case() {
    let inst = Instance::new();
    inst.add_seat("w1");
    inst.cmd()
        .args(["seat", "remove", "lead"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("lead is the Leader's seat")
                .and(predicate::str::contains("Hand over first")),
        );
    inst.cmd()
        .args(["seat", "add", "W1"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "There is already a seat called w1, and W1 differs from it only in case",
        ));
    inst.cmd()
        .args(["seat", "remove", "W1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "There is no seat called W1 (there is w1). The seats are: lead, w1.",
        ));
    inst.set_config(json!({ "leader": "nobody" }));
    inst.cmd()
        .arg("serve")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "openovai.json names nobody as the Leader, and there is no seat called nobody",
        ));
    inst.set_config(json!({ "leader": "lead" }));
    let d = inst.start();
    inst.set_config(json!({ "leader": "nobody" }));
    inst.cmd()
        .arg("restart")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("there is no seat called nobody"));
    assert_eq!(d.status().unwrap()["generation"], 1);
    // openovai.json names w1 now, and no restart has served it: lead is still the Leader being served.
    inst.set_config(json!({ "leader": "w1" }));
    inst.cmd()
        .args(["seat", "remove", "lead"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "lead is the Leader's seat the running server serves (openovai.json names another, and no `ovai restart` has served it yet)",
        ));
    assert!(inst.secret("lead").len() == 64, "lead keeps its seat");
}

#[test]
fn near_misses_of_settings_are_named_and_a_broken_config_is_said_once_rightly() {
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    inst.set_config(json!({ "callTimeoutSecs": 5, "team": "blue" }));
    let near = "openovai.json has \"callTimeoutSecs\", which ovai does not read: did you mean \"callTimeoutSeconds\"?";
    inst.cmd()
        .arg("check")
        .assert()
        .success()
        .stdout(predicate::str::contains(near).and(predicate::str::contains("team").not()));
    let d = inst.start();
    assert!(
        inst.rows("server").iter().any(|r| r.starts_with(near)),
        "{:?}",
        inst.rows("server")
    );
    // A warning on the operator's stderr, not an INFO line among the start's (helper-92).
    let stderr = std::fs::read_to_string(&d.stderr).unwrap();
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("WARN") && l.contains("callTimeoutSecs")),
        "{stderr}"
    );
    // A restart prints them too, before the plugins rows.
    inst.cmd().arg("restart").assert().success().stdout(
        predicate::str::starts_with(near).and(predicate::str::contains("Restarted: generation 2")),
    );
    std::fs::write(inst.root.join("openovai.json"), "{ \"user\": ").unwrap();
    let out = inst.cmd().arg("restart").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("openovai.json does not parse") && err.contains("Fix it and run `ovai restart` again; the server goes on serving what it read before."), "{err}");
    assert!(
        !err.contains("start again")
            && !err.contains("..")
            && !err.contains("refused the connection"),
        "{err}"
    );
    assert!(inst.rows("server").iter().any(|r| r.starts_with("A restart asked by `ovai restart` failed, and generation 2 goes on serving: openovai.json does not parse")));
}

#[test]
fn restarts_are_logged_with_who_asked_and_what_changed() {
    let inst = Instance::with_plugins(&[
        ("echo.mjs", TOOL),
        ("gone.mjs", &TOOL.replace("Echoes", "Goes")),
    ]);
    let d = inst.start();
    inst.write_plugin(
        "echo.mjs",
        &TOOL.replace("Echoes a branch.", "Echoes a branch, now longer."),
    );
    std::fs::remove_file(inst.root.join("plugins/gone.mjs")).unwrap();
    inst.write_plugin("fresh.mjs", TOOL);
    inst.cmd().arg("restart").assert().success();
    let row = inst
        .rows("server")
        .into_iter()
        .find(|r| r.starts_with("Restarted, asked by `ovai restart`: generation 2 serves now"))
        .unwrap();
    assert!(row.contains("added: fresh ("), "{row}");
    assert!(row.contains("no longer served: gone"), "{row}");
    assert!(row.contains("changed: echo (its description; "), "{row}");
    assert!(row.contains("The tool list costs every session "), "{row}");
    signal(d.pid(), libc::SIGHUP);
    wait_until("the SIGHUP restart's row", || {
        inst.rows("server").iter().any(|r| r.starts_with("Restarted, asked by SIGHUP: generation 3 serves now; the tool list is the same")).then_some(())
    });
    inst.cmd()
        .env("MAINPID", "1")
        .arg("restart")
        .assert()
        .success();
    assert!(
        inst.rows("server").iter().any(
            |r| r.starts_with("Restarted, asked by the service manager's reload: generation 4")
        )
    );
    inst.add_seat("w9");
    assert!(
        inst.rows("seats")
            .contains(&"The seats changed: `ovai seat add w9`.".to_string())
    );
}

#[test]
fn the_scaffold_reads_well_in_index() {
    let inst = Instance::new();
    inst.cmd().args(["plugin", "tracker"]).assert().success();
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let (index, _) = s.call("index", json!({}));
    assert!(
        index.contains("  tracker: Repeats a note back to the Leader."),
        "{index}"
    );
    assert!(!index.contains("tracker: tracker:"), "{index}");
}

#[test]
fn a_starting_marker_left_by_a_dead_daemon_whose_pid_went_to_another_process_is_not_believed() {
    // A daemon killed while it read plugins/ left its marker and its pid in serve.lock; the pid now
    // belongs to another process, which started later than the marker says.
    let inst = Instance::new();
    let mut other = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid = other.id();
    std::fs::create_dir_all(inst.root.join(".ovai")).unwrap();
    std::fs::write(inst.root.join(".ovai/serve.lock"), pid.to_string()).unwrap();
    std::fs::write(
        inst.root.join(".ovai/starting.json"),
        json!({ "pid": pid, "started": 1, "since": "2026-12-01T03:00:00Z" }).to_string(),
    )
    .unwrap();
    let out = inst.cmd().arg("status").output().unwrap();
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No ovai server is running for "),
        "{out:?}"
    );
}

#[test]
fn status_says_a_daemon_is_starting_while_it_reads_plugins() {
    // An import that takes a while: until it is done the daemon answers nobody, and status says why.
    let inst = Instance::with_plugins(&[(
        "slow.mjs",
        "await new Promise((r) => setTimeout(r, 6000));\nexport const description = 'Slow to import.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'x' }; }\n",
    )]);
    let mut serve = serve_unwaited(&inst);
    let said = wait_until("status to say it is starting", || {
        let out = inst.cmd().arg("status").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (out.status.success() && text.contains(" is starting: ")).then_some(text)
    });
    assert!(
        said.contains(&format!(
            "(pid {}) is starting: it has been reading plugins/ since ",
            serve.id()
        )),
        "{said}"
    );
    let json = inst.cmd().args(["status", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    // The import may have finished between the two: then it is up.
    assert!(v["starting"] == true || v["generation"] == 1, "{v}");
    wait_until("the daemon to be up", || {
        let out = inst.cmd().arg("status").output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .contains("Tools: index, room, slow.")
            .then_some(())
    });
    assert!(!inst.root.join(".ovai/starting.json").exists());
    inst.cmd().arg("stop").assert().success();
    let _ = serve.wait();
}

/// A session started while the server reads its plugins waits for it, and says so: a start that takes
/// a minute (files that hang, imported again one at a time) is no stuck server.
#[test]
fn a_session_waits_for_a_server_reading_its_plugins_and_says_so() {
    let inst = Instance::with_plugins(&[(
        "slow.mjs",
        "await new Promise((r) => setTimeout(r, 8000));\nexport const description = 'Slow to import.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'slow' }; }\n",
    )]);
    let mut serve = serve_unwaited(&inst);
    wait_until("the server to be starting", || {
        inst.root.join(".ovai/starting.json").exists().then_some(())
    });
    let mut s = inst.session("lead");
    let init = s.initialize();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    assert_eq!(s.call("slow", json!({})), ("slow".to_string(), false));
    s.wait_for_stderr("is starting (reading its plugins); this session waits for it");
    assert!(!s.stderr.lock().unwrap().contains("stuck"));
    inst.cmd().arg("stop").assert().success();
    let _ = serve.wait();
}

/// A daemon that dies while `ovai restart` waits for it is said to have gone away, not to have answered
/// something unreadable.
#[test]
fn a_daemon_that_dies_during_a_restart_is_said_to_have_gone_away() {
    let inst = Instance::new();
    inst.write_plugin(
        "slow-import.mjs",
        r#"import { appendFileSync } from "node:fs";
appendFileSync(`${process.cwd()}/work/imports`, "one\n");
await new Promise((done) => setTimeout(done, 2000));
export const description = "Takes a while to import.";
export const inputSchema = { type: "object" };
export function run() { return { text: "ok" }; }
"#,
    );
    let mut d = inst.start();
    let restart = std::process::Command::new(OVAI)
        .args(["restart", "--root"])
        .arg(&inst.root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the restart to import the file", || {
        let n = std::fs::read_to_string(inst.root.join("work/imports"))
            .unwrap_or_default()
            .lines()
            .count();
        (n >= 2).then_some(())
    });
    let _ = d.child.kill();
    let _ = d.child.wait();
    let out = restart.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("went away before it answered"), "{said}");
    assert!(!said.contains("cannot read"), "{said}");
}

/// What `umask 000` leaves (plugins/, the desks and openovai.json writable by every user, a seat's secret
/// readable by them) is said by `ovai check`, `ovai status` and `ovai serve`, with the command that
/// mends each.
#[test]
fn permissions_that_let_other_users_in_are_said() {
    use std::os::unix::fs::PermissionsExt;
    let inst = Instance::new();
    inst.add_seat("w1");
    inst.write_plugin(
        "echo.mjs",
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/plugins/echo.mjs"),
        )
        .unwrap(),
    );
    let mode = |p: &str, m: u32| {
        std::fs::set_permissions(inst.root.join(p), std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode("plugins", 0o777);
    mode("openovai.json", 0o666);
    mode("desks", 0o777);
    mode("desks/w1/.mcp.json", 0o644);
    // A client's file of the person's own, which holds no secret of ours, is not said to hold one.
    std::fs::write(inst.root.join("desks/w1/opencode.json"), "{ not json").unwrap();
    mode("desks/w1/opencode.json", 0o644);
    let wanted = [
        "plugins can be changed by every user of this machine (mode 777): any of them could add a tool",
        "openovai.json can be changed by every user of this machine (mode 666)",
        "desks can be changed by every user of this machine (mode 777)",
        "desks/w1/.mcp.json can be read by users other than its owner (mode 644): it holds a seat's secret. Run `chmod 600 ",
        // A mode put right does not take back a secret read meanwhile.
        "Other users may have read those seats' secrets meanwhile: once the modes are put right, give each a new one (`ovai seat rotate w1`).",
    ];
    let out = inst.cmd().arg("check").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    for w in wanted {
        assert!(said.contains(w), "check: {w}\n{said}");
    }
    assert!(!said.contains("opencode.json can be read"), "{said}");
    let d = inst.start();
    let rows = inst.rows("server").join("\n");
    for w in wanted {
        assert!(rows.contains(w), "runtime.log: {w}\n{rows}");
    }
    let out = inst.cmd().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    for w in wanted {
        assert!(said.contains(w), "status: {w}\n{said}");
    }
    mode("plugins", 0o755);
    mode("openovai.json", 0o644);
    mode("desks", 0o755);
    mode("desks/w1/.mcp.json", 0o600);
    let out = inst.cmd().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !said.contains("every user of this machine") && !said.contains("other than its owner"),
        "{said}"
    );
    drop(d);
}

/// A supervisor that captured the daemon's stderr and never reads it, or a terminal paused with Ctrl-S:
/// once that pipe is full the daemon goes on answering (its tracing waits in a thread of its own), and
/// what waited is written once somebody reads again.
#[test]
fn a_stderr_nobody_reads_does_not_stop_the_daemon() {
    let files: Vec<(String, &str)> = (0..30).map(|i| (format!("echo{i:02}.mjs"), TOOL)).collect();
    let plugins: Vec<(&str, &str)> = files.iter().map(|(f, s)| (f.as_str(), *s)).collect();
    let inst = Instance::with_plugins(&plugins);
    let (mut reader, writer) = std::io::pipe().unwrap();
    // The smallest pipe the system makes: a restart's rows (one for each tool) fill it.
    let size = nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    assert!(size <= 16 * 1024, "{size}");
    let mut daemon = Ended(
        std::process::Command::new(OVAI)
            .args(["serve", "--root"])
            .arg(&inst.root)
            .env_remove("OVAI_ROOT")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(writer)
            .spawn()
            .unwrap(),
    );
    wait_until("ovai serve to answer", || {
        inst.cmd().arg("status").ok().ok().map(|_| ())
    });
    for _ in 0..6 {
        inst.cmd().arg("restart").assert().success();
    }
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo29", json!({ "branch": "main" })),
        ("main for lead".to_string(), false)
    );
    drop(s);
    // Somebody reads again: the daemon ends, and every row it held was written.
    let reading = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut reader, &mut text);
        text
    });
    signal(daemon.0.id(), libc::SIGTERM);
    assert!(wait_exit(&mut daemon.0).success());
    let text = reading.join().unwrap();
    assert_eq!(
        text.matches("Restarted, asked by `ovai restart`").count(),
        6,
        "{text}"
    );
    assert!(!text.contains("were dropped"), "{text}");
}

/// A daemon started by hand, killed if the test fails before it is stopped.
struct Ended(std::process::Child);

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A FIFO or a link to /dev/zero where a file of the daemon's was: each read of it is refused in words at
/// once, and the daemon goes on serving (an open of a FIFO waits for a writer for ever, /dev/zero never
/// ends). Put back, the file is read again.
#[test]
fn files_the_daemon_reads_that_are_not_files_are_refused_in_words() {
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    let d = inst.start();
    // What was there is kept aside while something else takes its place.
    let fifo = |path: &std::path::Path| {
        std::fs::rename(path, path.with_extension("kept")).unwrap();
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    };
    let zero = |path: &std::path::Path| {
        std::fs::rename(path, path.with_extension("kept")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    };
    let put_back = |path: &std::path::Path| {
        std::fs::remove_file(path).unwrap();
        std::fs::rename(path.with_extension("kept"), path).unwrap();
    };
    // openovai.json, at a restart the service manager asks for (SIGHUP).
    let config = inst.root.join("openovai.json");
    for (swap, what) in [
        (&fifo as &dyn Fn(&std::path::Path), "a FIFO"),
        (&zero, "a device"),
    ] {
        swap(&config);
        signal(d.pid(), libc::SIGHUP);
        let said = format!("openovai.json cannot be read: it is {what}, not a file");
        wait_until("the refused restart's row", || {
            inst.rows("server")
                .iter()
                .any(|r| r.contains(&said))
                .then_some(())
        });
        // `ovai status` itself needs the file back to find the instance.
        put_back(&config);
        assert!(d.status().is_some(), "the daemon answers");
    }
    // seats.json, read as each session connects.
    let seats = inst.root.join(".ovai/seats.json");
    fifo(&seats);
    let (_s, refused) = inst.try_session(&inst.secret("lead"));
    assert!(
        refused.to_string().contains("it is a FIFO, not a file"),
        "{refused}"
    );
    put_back(&seats);
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "branch": "main" })),
        ("main for lead".to_string(), false)
    );
    // runtime.log, as `ovai logs` reads it.
    let log = inst.root.join("runtime.log");
    fifo(&log);
    inst.cmd()
        .arg("logs")
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "runtime.log cannot be read: it is a FIFO, not a file.",
        ));
    put_back(&log);
}

/// A plugin that marks a file once it runs, then waits `ms` before it answers.
const MARKS_AND_WAITS: &str = r#"
import { writeFileSync } from "node:fs";
export const description = "Marks a file, then waits.";
export const inputSchema = { type: "object", properties: { mark: { type: "string" }, ms: { type: "number" } } };
export async function run({ mark, ms }) {
  if (mark) writeFileSync(mark, "running");
  await new Promise((r) => setTimeout(r, ms));
  return { text: "done" };
}
"#;

/// A call cut off because its seat was re-keyed or removed says so: neither that its caller cancelled it
/// nor that the server went away, which is what it was told before.
#[test]
fn a_call_cut_off_by_a_seat_change_says_what_changed() {
    for (change, words) in [
        (
            "rotate",
            "the seat w1 was given a new secret (`ovai seat rotate`)",
        ),
        ("remove", "the seat w1 was removed (`ovai seat remove`)"),
    ] {
        let inst = Instance::with_plugins(&[("wait.mjs", MARKS_AND_WAITS)]);
        // Unboxed, a seat change does not wait for the host's calls: the call in flight is cut off.
        inst.set_config(json!({ "hostIsolation": "none" }));
        inst.add_seat("w1");
        let _d = inst.start();
        let mut s = inst.session("w1");
        s.initialize();
        let mark = inst.root.join("running");
        let id = s.send_request(
            "tools/call",
            json!({ "name": "wait", "arguments": { "mark": mark, "ms": 60_000 } }),
        );
        wait_until("the call to run", || mark.exists().then_some(()));
        inst.cmd().args(["seat", change, "w1"]).assert().success();
        let (text, is_error) = text_of(&s.response(id));
        assert!(is_error, "{change}: {text}");
        assert!(
            text.contains("The call to wait was stopped: ") && text.contains(words),
            "{change}: {text}"
        );
        assert!(text.contains("It may have run in part"), "{change}: {text}");
        if change == "rotate" {
            assert!(
                text.contains("look before calling it again, in a session started again"),
                "{text}"
            );
        }
        // Counted as the caller read it, refused, and not as the tool's doing: not run or stopped.
        let wait = inst.tool_figures("wait");
        assert_eq!(
            (&wait["calls"], &wait["refusals"], &wait["unrun"]),
            (&json!(1), &json!(1), &json!(1)),
            "{wait}"
        );
    }
}

/// A call sent as a seat change ends its session, before the bridge has seen the end, is answered in the
/// seat's words (the daemon took nothing after its last answer, and says why it ended the session), not
/// as cut off by a server that went away.
#[test]
fn a_call_sent_as_a_seat_change_ends_its_session_says_what_changed() {
    const BIG: &str = r#"
export const description = "Answers 300 KB.";
export const inputSchema = { type: "object" };
export function run() { return { text: "x".repeat(300000) }; }
"#;
    let inst = Instance::with_plugins(&[("big.mjs", BIG)]);
    inst.add_seat("w1");
    let _d = inst.start();
    // The bridge's stdout is left unread until the end (a `Session` reads it as it comes): an answer
    // larger than a pipe holds keeps the bridge's relay where it writes it out, so the session's end
    // reaches the relay only after the next call is in.
    let mut bridge = bridge_piped(&inst, "w1");
    let mut input = bridge.stdin.take().unwrap();
    let mut call = |id: u64| {
        use std::io::Write;
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "big", "arguments": {},
            "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {} } } });
        writeln!(input, "{line}").unwrap();
    };
    call(1);
    wait_until("the big answer", || {
        (inst.tool_figures("big")["calls"] == 1).then_some(())
    });
    inst.cmd().args(["seat", "rotate", "w1"]).assert().success();
    call(2);
    // The bridge's reader notes it at once; the pause only puts that before the relay goes on.
    std::thread::sleep(std::time::Duration::from_millis(500));
    call(3);
    let mut output = std::io::BufReader::new(TimedReader::new(bridge.stdout.take().unwrap()));
    let mut answer = || {
        use std::io::BufRead;
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let first = answer();
    let (text, is_error) = text_of(&first);
    assert!(
        first["id"] == 1 && !is_error && text.len() == 300_000,
        "{}",
        text.len()
    );
    let words = "the seat w1 was given a new secret (`ovai seat rotate`), which ended this session";
    let mut ids = Vec::new();
    for _ in [2, 3] {
        let a = answer();
        ids.push(a["id"].as_u64());
        let (text, is_error) = text_of(&a);
        assert!(is_error, "{a}");
        assert!(
            text.contains("This call was not made") && text.contains(words),
            "{text}"
        );
    }
    ids.sort();
    assert_eq!(ids, [Some(2), Some(3)]);
    assert_eq!(inst.tool_figures("big")["calls"], 1);
    drop(input);
    assert!(!wait_exit(&mut bridge).success());
}

/// A plugin's description reaches the model escaped in `tools/list`, as people read it in `index`: a
/// direction override or a control there could make a tool read as another.
#[test]
fn a_plugins_description_reaches_the_model_escaped() {
    let inst = Instance::with_plugins(&[(
        "odd.mjs",
        "export const description = 'Looks \\u202eevil\\u0007 up.\\nSecond line.';\n\
         export const inputSchema = { type: 'object' };\n\
         export function run() { return { text: 'ok' }; }\n",
    )]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let list = s.request("tools/list", json!({}));
    let odd = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "odd")
        .cloned()
        .unwrap();
    assert_eq!(
        odd["description"], "Looks \\u{202e}evil\\u{7} up.\nSecond line.",
        "{odd}"
    );
}

/// What a plugin writes into its schema reaches the operator's terminal as text: C1 controls (a
/// terminal's CSI and OSC in one character) and bidirectional overrides are shown escaped by `ovai tools`,
/// and written as `\u` escapes by every `--json` (the same JSON once read).
#[test]
fn a_plugins_schema_cannot_write_control_codes_to_the_operators_terminal() {
    let hostile = "query\u{9d}0;TITLE\u{9c}\u{9b}2J\u{202e}evil";
    let plugin = format!(
        "export const description = 'Looks.';\n\
         export const inputSchema = {{ type: 'object', properties: {{ q: {{ type: 'string', description: {} }} }} }};\n\
         export function run() {{ return {{ text: 'ok' }}; }}",
        serde_json::to_string(hostile).unwrap()
    );
    let inst = Instance::with_plugins(&[
        ("c1.mjs", plugin.as_str()),
        ("broken.mjs", r"throw new Error('at import \u009b2J');"),
    ]);
    let _d = inst.start();
    let raw = ['\u{9b}', '\u{9c}', '\u{9d}', '\u{202e}'];
    let out = inst.cmd().args(["tools", "c1"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(!text.contains(raw), "{text:?}");
    assert!(
        text.contains(r"query\u009d0;TITLE\u009c\u009b2J\u202eevil"),
        "{text}"
    );
    for args in [&["tools", "--json"][..], &["status", "--json"]] {
        let out = inst.cmd().args(args).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains(raw), "{args:?}: {text:?}");
        let v: Value = serde_json::from_str(&text).unwrap();
        // The hostile text is there, escaped (status's rows are escaped as they are made).
        assert!(
            text.contains(r"\u009b") || text.contains(r"\\u{9b}"),
            "{args:?}: {text}"
        );
        if args[0] == "tools" {
            let tool = &v["tools"][0];
            assert_eq!(
                tool["entry"]["inputSchema"]["properties"]["q"]["description"], hostile,
                "{v}"
            );
        }
    }
}

/// openovai.json removed while the server runs: the server can still be asked and stopped, and what needs
/// the file says it is missing and to put it back, not that there is no instance.
#[test]
fn a_server_whose_config_was_removed_can_be_asked_and_stopped() {
    let inst = Instance::new();
    let d = inst.start();
    let config = inst.root.join("openovai.json");
    std::fs::remove_file(&config).unwrap();
    // status answers, and says what the next restart would meet.
    inst.cmd()
        .arg("status")
        .assert()
        .success()
        .stderr(predicates::str::contains(format!(
            "ovai: warning: {} is missing (removed while the instance was in use?): put it back.",
            config.display()
        )))
        .stderr(predicates::str::contains(
            "The server goes on with the settings it read; `ovai restart` is refused until the file is right.",
        ));
    inst.cmd()
        .arg("restart")
        .assert()
        .failure()
        .stderr(predicates::str::contains(format!(
            "{} is missing (removed while the instance was in use?): put it back.",
            config.display()
        )));
    std::fs::create_dir(&config).unwrap();
    inst.cmd()
        .arg("restart")
        .assert()
        .failure()
        .stderr(predicates::str::contains("it is a folder, not a file"));
    std::fs::remove_dir(&config).unwrap();
    std::fs::write(&config, "{\"user\": \"a\",").unwrap();
    inst.cmd()
        .arg("status")
        .assert()
        .success()
        .stderr(predicates::str::contains("ovai: warning: openovai.json"))
        .stderr(predicates::str::contains(
            "The server goes on with the settings it read; `ovai restart` is refused until the file is right.",
        ));
    inst.cmd().arg("stop").assert().success();
    // `stop` returns once the lock is let go; the process ends a moment later.
    let mut d = d;
    wait_until("the server to end", || (!d.is_running()).then_some(()));
}

/// The instance's folder moved while its server ran: from where it is now, the server can be asked and
/// stopped, and everything else is refused saying so and what to do, not blamed on a seat or a file.
#[test]
fn a_server_whose_folder_was_moved_says_so_to_every_command() {
    let inst = Instance::nested("first");
    let first = inst.root.clone();
    let base = first.parent().unwrap().to_path_buf();
    let mut serve = serve_unwaited(&inst);
    let root = |dir: &std::path::Path| {
        let mut c = ovai();
        c.arg("--root").arg(dir);
        c
    };
    wait_until("the server to serve", || {
        let out = root(&first).arg("status").output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .contains("Generation 1")
            .then_some(())
    });
    // It answers before it writes its serving marker: a write after the move would stop it.
    wait_until("the serving marker", || {
        let private = first.join(".ovai");
        (private.join("serving.json").exists() && !private.join("starting.json").exists())
            .then_some(())
    });
    let moved = base.join("moved");
    std::fs::rename(&first, &moved).unwrap();
    let words = format!(
        "this server serves {}, where the instance was when it started, and was reached at {}: the folder was \
         moved while the server ran, and it reads every file by its old path. Stop it (`ovai stop --root {}`)",
        first.display(),
        moved.display(),
        moved.display()
    );
    root(&moved)
        .arg("restart")
        .assert()
        .failure()
        .stderr(predicates::str::contains(words.clone()));
    root(&moved)
        .args(["call", "index", "{}", "--seat", "lead"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(words.clone()));
    // Status says what it can, and not that `ovai restart` (refused) would serve plugins/ "gone"
    // (helper-81); `seat list` warns as status does.
    root(&moved)
        .arg("status")
        .assert()
        .success()
        .stderr(predicates::str::contains(format!("ovai: warning: {words}")))
        .stdout(predicates::str::contains("ovai restart").not())
        .stdout(predicates::str::contains("which is gone").not());
    root(&moved)
        .args(["seat", "list"])
        .assert()
        .success()
        .stderr(predicates::str::contains(format!("ovai: warning: {words}")));
    root(&moved).arg("stop").assert().success();
    assert!(wait_exit(&mut serve).success());
}

/// A command other than `status` asked of a server still reading its plugins waits for it, and says so
/// at once, so the wait is not taken for a hang: `ovai call` too (helper-92: it sat silent for the whole
/// start).
#[test]
fn a_command_waiting_for_a_starting_server_says_why() {
    use std::io::BufRead;
    let inst = Instance::new();
    inst.set_config(json!({ "importTimeoutSeconds": 600 }));
    let go = inst.root.join("work/go");
    inst.write_plugin("gate.mjs", &gated_import(&go));
    let mut serve = serve_unwaited(&inst);
    wait_until("the server to be starting", || {
        inst.root.join(".ovai/starting.json").exists().then_some(())
    });
    let waiting: Vec<_> = [&["tools"][..], &["call", "index", "{}", "--seat", "lead"]]
        .into_iter()
        .map(|args| {
            let mut command = std::process::Command::new(OVAI)
                .args(args)
                .arg("--root")
                .arg(&inst.root)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut stderr = std::io::BufReader::new(command.stderr.take().unwrap());
            let mut said = String::new();
            stderr.read_line(&mut said).unwrap();
            assert!(
                said.contains(&format!(
                    "ovai: the server for {} (pid {}) is starting, reading plugins/ since ",
                    inst.root.display(),
                    serve.id()
                )) && said.contains("this waits until it serves."),
                "{args:?}: {said}"
            );
            (command, stderr)
        })
        .collect();
    // Nor is it said later that the server has not answered, as if stuck (helper-93: the two contradicted
    // each other). Past the moment after which a silent server is said to be.
    std::thread::sleep(std::time::Duration::from_secs(7));
    std::fs::write(&go, "").unwrap();
    for (mut command, mut stderr) in waiting {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        assert!(!rest.contains("has not answered"), "{rest}");
        assert!(wait_exit(&mut command).success());
    }
    inst.cmd().arg("stop").assert().success();
    let _ = serve.wait();
}

/// A server whose instance was moved stops once it looks at its private folder again (anything written
/// there), saying where the instance went and how to start it there, not that the folder was removed.
#[test]
fn a_server_whose_folder_was_moved_stops_saying_where_it_went() {
    let inst = Instance::nested("first");
    let first = inst.root.clone();
    let base_path = first.parent().unwrap().to_path_buf();
    let err = base_path.join("serve.err");
    let mut serve = serving_with_stderr_in(&inst, &err);
    let moved = base_path.join("moved");
    std::fs::rename(&first, &moved).unwrap();
    // What a command run there may write (`ovai serve` there does).
    std::fs::write(moved.join(".ovai/poke"), "").unwrap();
    wait_exit(&mut serve);
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(
        said.contains(&format!(
            "The instance was moved from {} to {} while the server ran: the server stops (the calls in flight \
             finish first), as it reads every file by its old path. Start it where the instance is now (`ovai \
             serve --root {}`)",
            first.display(),
            moved.display(),
            moved.display()
        )),
        "{said}"
    );
}

/// `ovai serve` for a nested instance, its stderr in `err` (outside the instance, which a test moves or
/// removes), once it serves.
fn serving_with_stderr_in(inst: &Instance, err: &std::path::Path) -> std::process::Child {
    let serve = std::process::Command::new(OVAI)
        .args(["serve", "--root"])
        .arg(&inst.root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap();
    wait_until("the server to serve", || {
        let out = inst.cmd().arg("status").output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .contains("Generation 1")
            .then_some(())
    });
    serve
}

/// An instance removed whole while its server runs: the server stops, saying the folder is gone, and
/// no row after says plugins/ is still served or to run `ovai restart` (helper-92: they contradicted
/// the stop, and named only the private folder).
#[test]
fn a_server_whose_folder_was_removed_stops_saying_so_and_nothing_else() {
    let inst = Instance::nested("gone");
    let root = inst.root.clone();
    let err = root.parent().unwrap().join("serve.err");
    let mut serve = serving_with_stderr_in(&inst, &err);
    std::fs::remove_dir_all(&root).unwrap();
    wait_exit(&mut serve);
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(
        said.contains(&format!(
            "The instance's folder {} was removed or moved away while the server ran, and everything in it: \
             the server stops (the calls in flight finish first). Put the folder back, or start a server where \
             it is now, with `ovai serve`.",
            root.display()
        )),
        "{said}"
    );
    // Nor does the watch of openovai.json say the server goes on with what it read (helper-93).
    assert!(
        !said.contains("plugins/ is gone") && !said.contains("openovai.json changed"),
        "{said}"
    );
}

/// A runtime.log that cannot be written is said by `ovai status` while it lasts: the rows went to the
/// server's stderr, with one ERROR line there, and status and the page said nothing (helper-92).
#[test]
fn status_says_while_runtime_log_cannot_be_written() {
    let inst = Instance::new();
    let _d = inst.start();
    let log = inst.root.join("runtime.log");
    std::fs::remove_file(&log).unwrap();
    std::fs::create_dir(&log).unwrap();
    // A restart writes its row, which cannot go there.
    inst.cmd().arg("restart").assert().success();
    let said = || {
        let out = inst.cmd().arg("status").output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let now = said();
    assert!(
        now.contains("runtime.log cannot be written (")
            && now.contains(" since went to the server's stderr instead"),
        "{now}"
    );
    assert!(inst.status_json()["logUnwritable"].is_string());
    std::fs::remove_dir(&log).unwrap();
    inst.cmd().arg("restart").assert().success();
    let now = said();
    assert!(!now.contains("cannot be written"), "{now}");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("before these could not be written"),
        "the rows lost are counted in the file"
    );
}

/// A calls.jsonl that cannot be written is said by `ovai status` while it lasts, with the calls it lost:
/// one ERROR line on the server's stderr was all (helper-92).
#[test]
fn status_says_while_the_call_log_cannot_be_written() {
    let inst = Instance::new();
    inst.set_config(json!({ "callLog": true }));
    let _d = inst.start();
    let calls = inst.root.join("calls.jsonl");
    std::fs::create_dir(&calls).unwrap();
    let mut s = inst.session("lead");
    s.initialize();
    for _ in 0..2 {
        assert!(!s.call("room", json!({ "last": 0 })).1);
    }
    let said = || {
        let out = inst.cmd().arg("status").output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let now = wait_until("status to say the call log cannot be written", || {
        let now = said();
        now.contains("2 calls since").then_some(now)
    });
    assert!(
        now.contains("calls.jsonl cannot be written (")
            && now.contains("): the 2 calls since are not in it (callLog)."),
        "{now}"
    );
    std::fs::remove_dir(&calls).unwrap();
    assert!(!s.call("room", json!({ "last": 0 })).1);
    wait_until("status to stop saying so", || {
        (!said().contains("cannot be written")).then_some(())
    });
    assert!(
        std::fs::read_to_string(&calls)
            .unwrap()
            .contains("\"lost\":2"),
        "the calls lost are counted in the file"
    );
}

/// A warning the server writes as a row is on its stderr once, as a warning: it was there twice, once
/// as the warning and once as the row's copy (helper-65).
#[test]
fn a_warning_row_is_on_the_servers_stderr_once() {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let inst = Instance::new();
    let d = inst.start();
    // The row's copy (it names its topic) is written after any other copy would have been.
    let said = wait_until("the root warning's row on stderr", || {
        let said = std::fs::read_to_string(&d.stderr).ok()?;
        said.lines()
            .any(|l| l.contains("ovai serve runs as root") && l.contains("topic="))
            .then_some(said)
    });
    let lines: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("ovai serve runs as root"))
        .collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(lines[0].contains("WARN"), "{said}");
}

/// `ovai status` says which ovai serves, and when the binary it was started from was replaced since
/// (an upgrade moved into place): `ovai restart` keeps running the old one, and nothing said so.
#[test]
fn status_names_the_version_and_a_binary_replaced_under_the_server() {
    let inst = Instance::new();
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let exe = dir.path().join("ovai");
    copy_ovai(&exe);
    let mut serve = serve_from(&exe, &inst);
    let said =
        String::from_utf8_lossy(&inst.cmd().arg("status").output().unwrap().stdout).into_owned();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        said.lines()
            .next()
            .unwrap_or_default()
            .contains(&format!("(pid {}, ovai {version})", serve.id())),
        "{said}"
    );
    assert!(!said.contains("was replaced"), "{said}");
    // An upgrade as `mv` makes it: a new file moved over the old name.
    let new = dir.path().join("ovai.new");
    copy_ovai(&new);
    std::fs::rename(&new, &exe).unwrap();
    let out = inst.cmd().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "The ovai binary this server was started from, {}, was replaced or removed since",
            exe.display()
        )) && said.contains("`ovai stop`, then `ovai serve`"),
        "{said}"
    );
    inst.cmd().arg("stop").assert().success();
    let _ = serve.wait();
}

/// Ctrl-C twice (or a second TERM) while the server lets its calls finish stops it at once, as a person
/// pressing it again means: the calls still running are told so, and their signals fire. The second
/// was ignored, and the server waited the whole of shutdownGraceSeconds.
#[test]
fn a_second_interrupt_while_stopping_stops_at_once() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD)]);
    inst.set_config(json!({ "shutdownGraceSeconds": 600 }));
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    let mut d = inst.start();
    let (mut s, call) = held_call(&inst);
    signal(d.pid(), libc::SIGINT);
    wait_until("the server to be stopping", || {
        let out = inst.cmd().arg("status").output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .contains("is stopping since")
            .then_some(())
    });
    signal(d.pid(), libc::SIGINT);
    let (text, is_error) = text_of(&s.response(call));
    assert!(
        is_error
            && text.contains("the server, stopping, was asked again (SIGINT) and ended it at once"),
        "{text}"
    );
    wait_until("the server to end", || (!d.is_running()).then_some(()));
    let why = std::fs::read_to_string(inst.root.join("scratch/aborted")).unwrap_or_default();
    assert!(why.contains("shutting down"), "{why:?}");
}

/// The host a restart leaves to finish its calls is in `ovai status`, with how many it finishes: it was
/// not named anywhere, though it holds its memory until its last call ends.
#[test]
fn status_names_the_hosts_a_restart_left_finishing_calls() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD)]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    let d = inst.start();
    let old = d.host_pid();
    let (mut s, call) = held_call(&inst);
    inst.cmd().arg("restart").assert().success();
    let out = inst.cmd().arg("status").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "Generation 1's plugin host (pid {old}) finishes 1 call begun before a restart"
        )),
        "{said}"
    );
    std::fs::write(inst.root.join("scratch/release"), "").unwrap();
    assert_eq!(text_of(&s.response(call)).0, "let go");
    wait_until("the old host to be gone from status", || {
        let out = inst.cmd().arg("status").output().unwrap();
        (!String::from_utf8_lossy(&out.stdout).contains("Generation 1's plugin host")).then_some(())
    });
}

/// A seat command that cannot write seats.json (a full disk; here a folder in the way of its copy) fails
/// before it ends the plugin host: the calls in flight go on, and no row says the seats changed.
#[test]
fn a_seat_command_that_cannot_write_leaves_the_calls_in_flight_alone() {
    let inst = Instance::with_plugins(&[("held.mjs", HELD)]);
    std::fs::create_dir(inst.root.join("scratch")).unwrap();
    inst.add_seat("w2");
    let d = inst.start();
    let host = d.host_pid();
    let (mut s, call) = held_call(&inst);
    let _ = std::fs::remove_file(inst.root.join(".ovai/seats.json.previous"));
    std::fs::create_dir(inst.root.join(".ovai/seats.json.previous")).unwrap();
    let out = inst.cmd().args(["seat", "rotate", "w2"]).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("seats.json"), "{said}");
    std::fs::write(inst.root.join("scratch/release"), "").unwrap();
    assert_eq!(text_of(&s.response(call)), ("let go".to_string(), false));
    assert_eq!(d.host_pid(), host, "the host was not replaced");
    let rows = inst.rows("host").join("\n");
    assert!(!rows.contains("was replaced"), "{rows}");
}

/// A plugin whose import waits a minute, saying it began first, and writing a file once it is imported.
const SLOW_START: &str = r#"import { writeFileSync } from "node:fs";
writeFileSync(`${process.cwd()}/work/importing`, "yes");
await new Promise((r) => setTimeout(r, 60000));
writeFileSync(`${process.cwd()}/work/imported`, "yes");
export const description = "Slow to import.";
export const inputSchema = { type: "object" };
export function run() { return { text: "x" }; }
"#;

/// An instance whose server is reading a plugin that takes a minute, and its plugin host's process
/// group (the pid a plugin reads may be its box's own).
fn starting_slowly() -> (Instance, std::process::Child, i32) {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW_START)]);
    inst.set_config(json!({ "importTimeoutSeconds": 120 }));
    let serve = serve_unwaited(&inst);
    wait_until("the plugin host to import", || {
        inst.root.join("work/importing").exists().then_some(())
    });
    assert!(inst.root.join(".ovai/starting.json").exists());
    let daemon = serve.id().to_string();
    let group = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .find_map(|stat| {
            // pid (comm) state ppid pgrp …, the comm in parentheses possibly holding spaces.
            let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            (rest.get(1) == Some(&daemon.as_str())).then(|| rest.get(2)?.parse().ok())?
        })
        .expect("the daemon has a child: its plugin host");
    (inst, serve, group)
}

fn group_gone(group: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(-group), None)
        == Err(nix::errno::Errno::ESRCH)
}

/// A server killed while it read plugins/ wrote no "is up" row; its starting mark says it was there, and
/// the next start says it ended without stopping, as after a kill when up (helper-101: no trace).
#[test]
fn a_server_killed_while_starting_is_said_by_the_next() {
    let (inst, mut serve, host) = starting_slowly();
    let pid = serve.id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    serve.wait().unwrap();
    wait_until("the plugin host to be gone", || {
        group_gone(host).then_some(())
    });
    std::fs::remove_file(inst.root.join("plugins/slow.mjs")).unwrap();
    let _d = inst.start();
    let said: Vec<String> = inst
        .rows("server")
        .into_iter()
        .filter(|r| r.contains("ended without stopping"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with(&format!(
            "The server before this one (pid {pid}, starting since 20"
        )) && said[0].ends_with(
            ") ended without stopping while it started (killed, crashed, or its machine went down): \
             it served nothing."
        ),
        "{said:?}"
    );
}

/// A stop whose row runtime.log could not take (a full disk) removed the server's mark all the same: the
/// next start does not say it ended without stopping (helper-101).
#[test]
fn a_stop_whose_row_was_lost_is_no_end_without_stopping() {
    let inst = Instance::new();
    let d = inst.start();
    d.stop();
    let log = inst.root.join("runtime.log");
    let text = std::fs::read_to_string(&log).unwrap();
    let cut = text.rfind(" server ovai serve stopped on ").unwrap();
    let cut = text[..cut].rfind('\n').map_or(0, |i| i + 1);
    std::fs::write(&log, &text[..cut]).unwrap();
    let _d = inst.start();
    no_end_without_stopping_said(&inst);
}

/// No row says the server before ended without stopping.
fn no_end_without_stopping_said(inst: &Instance) {
    let rows = inst.rows("server");
    assert!(
        !rows.iter().any(|r| r.contains("ended without stopping")),
        "{rows:?}"
    );
}

/// Ctrl-C (or a service manager's TERM) while the plugins are read stops the start as it would stop the
/// server: it was the default action, which left the socket and the starting marker behind.
#[test]
fn a_signal_while_starting_stops_the_start_and_leaves_nothing_behind() {
    for (signal, name) in [
        (nix::sys::signal::Signal::SIGINT, "SIGINT"),
        (nix::sys::signal::Signal::SIGTERM, "SIGTERM"),
    ] {
        let (inst, mut serve, host) = starting_slowly();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(serve.id() as i32), signal).unwrap();
        let status = serve.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{name}: {status:?}");
        assert!(!inst.root.join(".ovai/ovai.sock").exists(), "{name}");
        assert!(!inst.root.join(".ovai/starting.json").exists(), "{name}");
        wait_until("the plugin host to be gone", || {
            group_gone(host).then_some(())
        });
        assert!(!inst.root.join("work/imported").exists());
        let rows = inst.rows("server");
        assert!(
            rows.last().is_some_and(|r| r
                == &format!(
                    "ovai serve stopped on {name}, while it read plugins/: nothing was served."
                )),
            "{rows:?}"
        );
        // The next start does not take it for a server that ended without stopping.
        std::fs::remove_file(inst.root.join("plugins/slow.mjs")).unwrap();
        let _d = inst.start();
        no_end_without_stopping_said(&inst);
    }
}

/// `ovai stop` while the plugins are read stops the start at once, instead of waiting for the imports.
#[test]
fn stop_while_starting_stops_the_start_at_once() {
    let (inst, mut serve, host) = starting_slowly();
    let pid = serve.id();
    inst.cmd()
        .arg("stop")
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "Stopped the ovai server for {} (pid {pid}) while it read plugins/.",
            inst.root.display()
        )));
    // Its main thread gone, the rest of it may take a moment more: waited for.
    assert!(serve.wait().unwrap().success());
    assert!(!inst.root.join("work/imported").exists());
    wait_until("the plugin host to be gone", || {
        group_gone(host).then_some(())
    });
}

/// A start leaves `.ovai/host.mjs` as it is when it holds the plugin host's script already: it wrote the
/// same 90 KB again each time, and a start on a full disk failed for it alone (helper-101). One that
/// differs is written again.
#[test]
fn a_start_leaves_the_host_script_as_it_is_when_it_is_the_same() {
    use std::os::unix::fs::MetadataExt;
    let inst = Instance::new();
    let shim = inst.root.join(".ovai/host.mjs");
    let d = inst.start();
    d.stop();
    let (inode, text) = (
        std::fs::metadata(&shim).unwrap().ino(),
        std::fs::read_to_string(&shim).unwrap(),
    );
    let d = inst.start();
    assert_eq!(std::fs::metadata(&shim).unwrap().ino(), inode);
    d.stop();
    std::fs::write(&shim, format!("{text}// edited\n")).unwrap();
    let _d = inst.start();
    assert_eq!(std::fs::read_to_string(&shim).unwrap(), text);
}

/// A command whose connection waited in the server's backlog as it stopped was reset, and said "Talking
/// to the ovai server failed: Connection reset by peer" (helper-106: 4 in 10 of `ovai status` beside an
/// `ovai stop`). It reads that the server stops, as a command a moment later does. Frozen, the server
/// holds the command in its backlog; told to stop and let go, it may take that connection first or
/// drop it, so it is tried a few times (eight: the code before passed four in a row one time in eight).
#[test]
fn a_command_in_the_backlog_as_the_server_stops_is_told_it_stops() {
    let inst = Instance::with_plugins(&[("echo.mjs", TOOL)]);
    for _ in 0..8 {
        let mut d = inst.start();
        let pid = d.pid();
        signal(pid, libc::SIGSTOP);
        let status = std::process::Command::new(OVAI)
            .args(["status", "--root"])
            .arg(&inst.root)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Time to connect and ask; one that has not yet finds the server stopping, and passes too.
        std::thread::sleep(std::time::Duration::from_millis(500));
        signal(pid, libc::SIGTERM);
        signal(pid, libc::SIGCONT);
        let out = status.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !said.contains("Talking to the ovai server failed"),
            "{said}"
        );
        assert!(
            said.contains("stopping") || said.contains("Generation"),
            "{said}"
        );
        wait_until("the server to end", || (!d.is_running()).then_some(()));
    }
}

/// A call given up at callTimeoutSeconds is not said to be a fault of its tool's code: another call
/// may have held the host (helper-104). An instance of its own, where the limit holds no other call.
#[test]
fn status_counts_a_call_given_up_at_the_limit_apart_from_faults() {
    let inst = Instance::with_plugins(&[(
        "slow.mjs",
        "export const description = 'x';\nexport const inputSchema = { type: 'object' };\nexport async function run() { await new Promise((r) => setTimeout(r, 30000)); return { text: 'late' }; }",
    )]);
    inst.set_config(json!({ "callTimeoutSeconds": 1 }));
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert!(s.call("slow", json!({})).1);
    inst.cmd().arg("status").assert().success().stdout(predicate::str::contains(
        "Calls to slow: 1 (1 refused: 1 given up at callTimeoutSeconds (the tool was slow, or waited for a \
         host another call held)); p50 ",
    ));
}
