//! Running as a service: readiness and watchdog on NOTIFY_SOCKET, the unit and the agent that `ovai
//! service install` writes, sessions that survive the daemon, and each start-up error in one sentence.

mod common;
use common::*;
use predicates::prelude::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::time::Instant;

/// Reads notify datagrams until one contains `want` (others, such as WATCHDOG=1, are passed over).
fn expect(sock: &UnixDatagram, want: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut buf = vec![0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no notification with {want}");
        sock.set_read_timeout(Some(left)).unwrap();
        let n = sock
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("waiting for {want}: {e}"));
        let msg = String::from_utf8_lossy(&buf[..n]).to_string();
        if msg.lines().any(|l| l == want) {
            return msg;
        }
    }
}

#[test]
fn readiness_watchdog_reload_and_stopping_reach_the_service_manager() {
    let inst = Instance::new();
    let path = inst.root.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    let d = Daemon::start_with_env(
        &inst,
        &[
            ("NOTIFY_SOCKET", path.to_str().unwrap()),
            ("WATCHDOG_USEC", "400000"),
        ],
    );
    let ready = expect(&sock, "READY=1");
    assert!(ready.contains("STATUS=serving 2 tools"), "{ready}");
    expect(&sock, "WATCHDOG=1");
    inst.cmd().arg("restart").assert().success();
    let reloading = expect(&sock, "RELOADING=1");
    assert!(
        reloading.lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading}"
    );
    expect(&sock, "READY=1");
    expect(&sock, "WATCHDOG=1");
    assert!(d.stop().success());
    expect(&sock, "STOPPING=1");
    // More time while the calls finish: shutdownGraceSeconds may pass the unit's TimeoutStopSec.
    let extended = expect(&sock, "EXTEND_TIMEOUT_USEC=30000000");
    assert!(extended.contains("STATUS=stopping"), "{extended}");
}

/// The one unit `service install` wrote under `home`.
fn unit_file(home: &std::path::Path) -> std::path::PathBuf {
    let dir = home.join("config/systemd/user");
    std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no unit in {}", dir.display()))
}

fn installed(inst: &Instance, home: &std::path::Path, args: &[&str]) -> String {
    let out = inst
        .cmd()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .args(["service", "install"])
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_systemd_unit_is_written_filled_in_and_verifies() {
    let inst = Instance::new();
    let home = tempfile::tempdir_in("/tmp").unwrap();
    let said = installed(&inst, home.path(), &["--systemd"]);
    let file = unit_file(home.path());
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with(&format!(
            "ovai-{}-",
            inst.root
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_lowercase()
        )),
        "{name}"
    );
    assert!(
        said.contains(&format!(
            "systemctl --user daemon-reload && systemctl --user enable --now {name}"
        )),
        "{said}"
    );
    let unit = std::fs::read_to_string(&file).unwrap();
    let exe = std::fs::canonicalize(OVAI).unwrap().display().to_string();
    let root = inst.root.display().to_string();
    for line in [
        "Type=notify".to_string(),
        format!("ExecStart=\"{exe}\" \"serve\" \"--root\" \"{root}\""),
        format!("ExecReload=\"{exe}\" \"restart\" \"--root\" \"{root}\""),
        "Restart=on-failure".to_string(),
        "RestartSec=5".to_string(),
        // systemd's default gives up after five starts in ten seconds, and stays down once the cause
        // (a full disk) is gone.
        "StartLimitIntervalSec=0".to_string(),
        "RestartPreventExitStatus=2".to_string(),
        "WatchdogSec=30".to_string(),
        "KillMode=mixed".to_string(),
        "WantedBy=default.target".to_string(),
    ] {
        assert!(unit.lines().any(|l| l == line), "{line} in:\n{unit}");
    }
    // Where no user manager answers (root in a container, a login with none), the command printed
    // cannot run: said, with what makes one run.
    let reachable = std::process::Command::new("systemctl")
        .args(["--user", "show-environment"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert_eq!(
        said.contains("cannot run yet"),
        !reachable,
        "a user manager answers: {reachable}; said: {said}"
    );
    if !reachable {
        assert!(said.contains("loginctl enable-linger"), "{said}");
    }
    // Installing again updates the same file.
    assert!(installed(&inst, home.path(), &["--systemd"]).starts_with("Updated "));
    match std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&file)
        .output()
    {
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stderr.trim().is_empty(),
                "systemd-analyze verify: {stderr}"
            );
        }
        Err(_) => assert!(
            std::env::var_os("OVAI_REQUIRE_SYSTEMD_ANALYZE").is_none(),
            "systemd-analyze is required here (scripts/test installs it where it runs as root with apt-get) and was not found"
        ),
    }
}

#[test]
fn the_launchd_agent_is_a_property_list() {
    let inst = Instance::new();
    let home = tempfile::tempdir_in("/tmp").unwrap();
    let said = installed(&inst, home.path(), &["--launchd"]);
    let dir = home.path().join("Library/LaunchAgents");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(said.contains("launchctl bootstrap gui/$(id -u) "), "{said}");
    let check = "import plistlib, json, sys; d = plistlib.load(open(sys.argv[1], 'rb')); print(json.dumps(d))";
    let out = std::process::Command::new("python3")
        .args(["-c", check])
        .arg(&file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plist: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let exe = std::fs::canonicalize(OVAI).unwrap().display().to_string();
    assert_eq!(
        plist["ProgramArguments"],
        json!([exe, "serve", "--root", inst.root.display().to_string()])
    );
    assert_eq!(plist["RunAtLoad"], true);
    assert_eq!(plist["KeepAlive"], json!({ "SuccessfulExit": false }));
    assert!(
        plist["StandardErrorPath"]
            .as_str()
            .unwrap()
            .starts_with(&inst.root.display().to_string())
    );
    assert!(
        plist["Label"]
            .as_str()
            .unwrap()
            .starts_with("dev.openovai.")
    );
}

#[test]
fn print_writes_nothing() {
    let inst = Instance::new();
    let home = tempfile::tempdir_in("/tmp").unwrap();
    let out = installed(&inst, home.path(), &["--print"]);
    assert!(out.contains("Type=notify"));
    assert!(!home.path().join("config").exists());
}

const SLOW: &str = r#"
export const description = "Answers after a while.";
export const inputSchema = { type: "object" };
export async function run() { await new Promise((r) => setTimeout(r, 30000)); return { text: "late" }; }
"#;

#[test]
fn a_session_survives_a_daemon_killed_and_started_again() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    inst.fixture("echo.mjs");
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let bridge = s.child.id();
    assert_eq!(
        s.call("echo", json!({ "before": 1 })),
        (r#"lead: {"before":1}"#.to_string(), false)
    );
    let interrupted = s.send_request("tools/call", json!({ "name": "slow", "arguments": {} }));
    let listing = s.send_request("tools/list", json!({}));
    // Both requests reached the daemon (an echo after them is answered), then it dies without a word.
    assert!(!s.call("echo", json!({})).1);
    let _ = s.response(listing);
    signal(d.pid(), libc::SIGKILL);
    let answer = s.response(interrupted);
    assert_eq!(
        text_of(&answer),
        (
            "The ovai server went away (it was stopped or it crashed) while this call was in flight, so it has no answer; nothing was retried. It may have been done all the same (a room message said, a plugin's work begun): look before calling it again.".to_string(),
            true
        )
    );
    drop(d);
    // A call made while no daemon runs waits for the next one.
    let waiting = s.send_request(
        "tools/call",
        json!({ "name": "echo", "arguments": { "during": 2 } }),
    );
    let _d = inst.start();
    assert_eq!(
        text_of(&s.response(waiting)),
        (r#"lead: {"during":2}"#.to_string(), false)
    );
    s.recv_where(|m| m["method"] == "notifications/tools/list_changed");
    assert_eq!(
        s.call("echo", json!({ "after": 3 })),
        (r#"lead: {"after":3}"#.to_string(), false)
    );
    assert_eq!(s.child.id(), bridge);
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the same bridge serves on"
    );
    // The replayed initialize was answered to the bridge, not to the client.
    assert!(
        !s.backlog
            .iter()
            .any(|m| m.get("result").and_then(|r| r.get("serverInfo")).is_some()),
        "{:?}",
        s.backlog
    );
}

/// The `_meta` a 2026-07-28 client (Claude Code, for one) puts on every request instead of `initialize`.
fn modern_meta() -> serde_json::Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "tests", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

#[test]
fn a_2026_session_survives_a_daemon_killed_and_started_again_in_its_own_shapes() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    inst.fixture("echo.mjs");
    let d = inst.start();
    let mut s = inst.session("lead");
    let meta = modern_meta();
    let discover = s.request("server/discover", json!({ "_meta": meta }));
    assert_eq!(discover["result"]["resultType"], "complete", "{discover}");
    let listen = s.send_request(
        "subscriptions/listen",
        json!({ "notifications": { "toolsListChanged": true }, "_meta": meta }),
    );
    s.recv_where(|m| m["method"] == "notifications/subscriptions/acknowledged");
    let call = |s: &mut Session, name: &str| {
        s.send_request(
            "tools/call",
            json!({ "name": name, "arguments": {}, "_meta": meta }),
        )
    };
    let id = call(&mut s, "echo");
    assert_eq!(s.response(id)["result"]["resultType"], "complete");
    let interrupted = call(&mut s, "slow");
    let id = call(&mut s, "echo");
    let _ = s.response(id);
    signal(d.pid(), libc::SIGKILL);
    let answer = s.response(interrupted);
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert!(text_of(&answer).1);
    drop(d);
    let _d = inst.start();
    // Told on its listen stream that the list may have changed, with the stream's subscription id.
    let changed = s.recv_where(|m| m["method"] == "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(listen),
        "{changed}"
    );
    let id = call(&mut s, "echo");
    let r = s.response(id);
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(!text_of(&r).1);
    // The listen stream was opened again on the new daemon: its own list changes arrive on it.
    inst.write_plugin("fresh.mjs", SLOW);
    inst.cmd().arg("restart").assert().success();
    let changed = s.recv_where(|m| m["method"] == "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(listen),
        "{changed}"
    );
}

#[test]
fn an_initialize_the_daemon_took_with_it_is_replayed_to_the_next_one_and_answered_once() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session("lead");
    // The bridge is connected; the daemon is frozen, so the initialize it is sent goes unanswered.
    assert!(
        s.request("ping", json!({})).get("result").is_some(),
        "connected"
    );
    freeze(d.pid());
    let id = s.send_request(
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "tests", "version": "1" } }),
    );
    let pid = d.pid();
    signal(pid, libc::SIGKILL);
    drop(d);
    wait_gone(pid);
    let _d = inst.start();
    let answer = s.response(id);
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "openovai",
        "{answer}"
    );
    s.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    assert!(!s.call("index", json!({})).1);
    let again: Vec<&serde_json::Value> =
        s.backlog.iter().filter(|m| m["id"] == json!(id)).collect();
    assert!(again.is_empty(), "answered once: {again:?}");
}

#[test]
fn a_bridge_whose_daemon_never_returns_answers_every_call_with_a_sentence() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let d = inst.start();
    let mut s = inst.session_with_env("lead", &[("OVAI_RECONNECT_SECONDS", "1")]);
    s.initialize();
    let pending = s.send_request("tools/call", json!({ "name": "slow", "arguments": {} }));
    assert!(!s.call("room", json!({ "last": 0 })).1);
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    let answer = s.response(pending);
    assert!(text_of(&answer).1);
    let why = format!(
        "the ovai server for {} went away and none came back within 1 s; start it with `ovai serve`",
        inst.root.display()
    );
    s.wait_for_stderr(&why);
    // Every call is answered in those words while no server runs, saying the session takes one up.
    let (text, is_error) = s.call("room", json!({ "last": 0 }));
    assert!(is_error && text.contains(&why), "{text}");
    assert!(
        text.contains("The session looks for the server again as it calls, at most once a second."),
        "{text}"
    );
    s.close_input();
    let status = s.wait();
    assert!(!status.success());
}

/// A session whose bridge gave up on a server that did not come back in time is taken up again by the
/// next one, at a call made once it runs: its client (which may not restart the server's process by
/// itself) is told the list may have changed, and calls go on. Before, it had to be started again.
#[test]
fn a_session_given_up_takes_a_server_started_later_up_again() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let d = inst.start();
    let mut s = inst.session_with_env("lead", &[("OVAI_RECONNECT_SECONDS", "1")]);
    s.initialize();
    assert!(!s.call("room", json!({ "last": 0 })).1);
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    s.wait_for_stderr("none came back within 1 s");
    let (text, is_error) = s.call("room", json!({ "last": 0 }));
    assert!(is_error && text.contains("none came back"), "{text}");
    let _d = inst.start();
    let text = wait_until("a call to be answered by the server started again", || {
        let (text, is_error) = s.call("room", json!({ "last": 0 }));
        (!is_error).then_some(text)
    });
    assert!(!text.contains("none came back"), "{text}");
    s.recv_where(|m| m["method"] == "notifications/tools/list_changed");
    s.wait_for_stderr("ovai mcp: the server takes this session again.");
    s.close_input();
    assert!(s.wait().success(), "a session taken up again ends well");
}

/// A session of `lead` whose bridge gave up (`OVAI_RECONNECT_SECONDS=1`) on a server killed under it,
/// after `begin` ran on it (an initialize, a listen stream), and what `begin` gave.
fn given_up<T>(inst: &Instance, begin: impl FnOnce(&mut Session) -> T) -> (Session, T) {
    let d = inst.start();
    let mut s = inst.session_with_env("lead", &[("OVAI_RECONNECT_SECONDS", "1")]);
    let begun = begin(&mut s);
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    s.wait_for_stderr("none came back");
    (s, begun)
}

/// A call made once the bridge may look for a server again (a second after its last look), refused:
/// its words.
fn refused_call_after_a_look(s: &mut Session) -> String {
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (text, is_error) = s.call("room", json!({ "last": 0 }));
    assert!(is_error, "{text}");
    text
}

/// Opens a 2026-07-28 listen stream for list changes, acknowledged: its id.
fn listen_for_changes(s: &mut Session) -> u64 {
    let listen = s.send_request(
        "subscriptions/listen",
        json!({ "notifications": { "toolsListChanged": true }, "_meta": modern_meta() }),
    );
    s.recv_where(|m| m["method"] == "notifications/subscriptions/acknowledged");
    listen
}

fn fake_node(dir: &std::path::Path, says: &str) -> String {
    let path = dir.join("node");
    std::fs::write(&path, format!("#!/bin/sh\necho {says}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn start_up_errors_are_one_sentence_and_a_non_zero_exit() {
    let inst = Instance::new();
    let bin = tempfile::tempdir_in("/tmp").unwrap();
    inst.cmd()
        .env("OVAI_NODE", "/nonexistent/node")
        .arg("serve")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "ovai: Node.js was not found (looked for /nonexistent/node); ovai runs plugins in Node 18 or newer. Install it, or name it with OVAI_NODE.",
        ));
    let old = fake_node(bin.path(), "v16.20.2");
    inst.cmd().env("OVAI_NODE", &old).arg("serve").assert().code(1).stderr(format!(
        "ovai: ovai runs plugins in Node.js 18 or newer, and {old} is v16.20.2. Install a newer Node, or name one with OVAI_NODE.\n"
    ));
    let odd = fake_node(bin.path(), "hello");
    inst.cmd()
        .env("OVAI_NODE", &odd)
        .arg("serve")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "does not answer `--version` as Node.js does (it said \"hello\")",
        ));
    // Nothing was left running or bound.
    assert!(!inst.root.join(".ovai/ovai.sock").exists());
}

/// A folder whose socket path would be too long for a Unix socket: `init` makes nothing there, and an
/// instance moved there is refused by `serve` and every command, each saying how much shorter to go.
#[test]
fn a_socket_path_too_long_says_so_and_how_to_move_it() {
    let base = tempfile::tempdir_in("/tmp").unwrap();
    let base_path = std::fs::canonicalize(base.path()).unwrap();
    let deep = base_path.join("a".repeat(60)).join("b".repeat(50));
    let sock = deep.join(".ovai/ovai.sock").display().to_string();
    let why = format!(
        "its socket {sock} would be {} bytes long, more than the 107 a Unix socket takes, so no server can serve \
         it there: the instance needs a folder whose path is at least {} bytes shorter",
        sock.len(),
        sock.len() - 107
    );
    ovai()
        .args(["init"])
        .arg(&deep)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "{} cannot be an instance: {why}. Nothing was made.",
            deep.display()
        )));
    assert!(!deep.exists());
    let short = base_path.join("i");
    ovai().args(["init"]).arg(&short).assert().success();
    std::fs::create_dir_all(deep.parent().unwrap()).unwrap();
    std::fs::rename(&short, &deep).unwrap();
    ovai()
        .args(["serve", "--root"])
        .arg(&deep)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "The instance at {} cannot be served: {why}. Move it to such a folder, and start again.",
            deep.display()
        )));
    ovai()
        .args(["status", "--root"])
        .arg(&deep)
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "No server can serve the instance at {}: {why}. Move it, and start it with `ovai serve` there.",
            deep.display()
        )));
}

#[test]
fn operator_logs_carry_no_colour_codes_when_not_a_terminal() {
    let inst = Instance::new();
    let d = inst.start();
    let stderr = d.stderr.clone();
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr).unwrap();
    assert!(log.contains("ovai serve is up"), "{log}");
    assert!(!log.contains('\u{1b}'), "no ANSI escapes: {log:?}");
}

#[test]
fn a_start_that_reads_plugins_for_long_asks_the_service_manager_for_time() {
    // An import that takes a while: systemd is told to wait for it rather than kill a slow start.
    let inst = Instance::with_plugins(&[(
        "slow.mjs",
        "await new Promise((r) => setTimeout(r, 1500));\nexport const description = 'Slow to import.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'x' }; }\n",
    )]);
    let path = inst.root.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    let _d = Daemon::start_with_env(&inst, &[("NOTIFY_SOCKET", path.to_str().unwrap())]);
    let extend = expect(&sock, "EXTEND_TIMEOUT_USEC=30000000");
    assert!(extend.contains("STATUS=reading plugins/"), "{extend}");
    expect(&sock, "READY=1");
}

/// systemd expands `$` in a unit's command line: a root holding one is written `$$`, so the unit serves
/// the folder named, not one made from the service's environment.
#[test]
fn a_root_with_a_dollar_is_written_so_systemd_reads_it_back() {
    let base = tempfile::tempdir_in("/tmp").unwrap();
    let root = base.path().join("a ${HOME} $b");
    ovai().arg("init").arg(&root).assert().success();
    let home = tempfile::tempdir_in("/tmp").unwrap();
    // A Node whose path holds a `$` too: `Environment=` expands nothing, so it is written as it is.
    let node_dir = base.path().join("nd$x");
    std::fs::create_dir(&node_dir).unwrap();
    let node = which_node();
    std::os::unix::fs::symlink(&node, node_dir.join("node")).unwrap();
    ovai()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("OVAI_NODE", node_dir.join("node"))
        .args(["service", "install", "--systemd", "--root"])
        .arg(&root)
        .assert()
        .success();
    let file = unit_file(home.path());
    let unit = std::fs::read_to_string(&file).unwrap();
    let canonical = std::fs::canonicalize(&root).unwrap().display().to_string();
    let written = format!("\"--root\" \"{}\"", canonical.replace('$', "$$"));
    assert!(
        unit.lines()
            .any(|l| l.starts_with("ExecStart=") && l.ends_with(&written)),
        "{written} in:\n{unit}"
    );
    let env = format!("Environment=\"OVAI_NODE={}/node\"", node_dir.display());
    assert!(unit.lines().any(|l| l == env), "{env} in:\n{unit}");
}

/// The `node` on this PATH, as an absolute path.
fn which_node() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("node"))
                .find(|p| p.is_file())
        })
        .expect("node on PATH")
}

/// `service uninstall` will not remove a unit that is enabled, even where no user manager answers to
/// say so (a `su` or ssh shell of a lingering user): its link in `*.wants/` says it, and removing the file
/// would leave that link dangling and the unit no longer disabled by name.
#[test]
fn uninstall_refuses_an_enabled_unit_even_with_no_user_manager_answering() {
    let inst = Instance::new();
    let home = tempfile::tempdir_in("/tmp").unwrap();
    installed(&inst, home.path(), &["--systemd"]);
    let file = unit_file(home.path());
    let name = file.file_name().unwrap().to_owned();
    let wants = file.parent().unwrap().join("default.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(&file, wants.join(&name)).unwrap();
    let uninstall = || {
        inst.cmd()
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .args(["service", "uninstall", "--systemd"])
            .output()
            .unwrap()
    };
    let out = uninstall();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is enabled"), "{err}");
    assert!(err.contains("systemctl --user disable --now"), "{err}");
    assert!(file.exists(), "the unit is kept");
    std::fs::remove_file(wants.join(&name)).unwrap();
    let out = uninstall();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!file.exists());
}

/// A stderr nobody reads (a client that pipes it and never reads it) holds none of the session's
/// requests: a session given up is taken up again and answered, and is not ended by the give-up it
/// was slow to say.
#[test]
fn a_stderr_nobody_reads_holds_no_request_of_a_session_taken_up_again() {
    let inst = Instance::new();
    let d = inst.start();
    // A pipe already full, which nothing reads: every write to it waits.
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    nix::fcntl::fcntl(
        &write_end,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    while nix::unistd::write(&write_end, &[b'x'; 4096]).is_ok() {}
    nix::fcntl::fcntl(
        &write_end,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .unwrap();
    let mut cmd = bridge_command(&inst.root, Some(&inst.secret("lead")));
    cmd.env("OVAI_RECONNECT_SECONDS", "1");
    let mut s = Session::spawn_with_stderr(cmd, Some(std::process::Stdio::from(write_end)));
    s.initialize();
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    // Given up (its call answered with the refusal), its relay now waits to say so on stderr.
    let (text, is_error) = wait_until("the bridge to give up", || {
        let (text, is_error) = s.call("room", json!({ "last": 0 }));
        text.contains("none came back").then_some((text, is_error))
    });
    assert!(is_error, "{text}");
    let _d = inst.start();
    let text = wait_until("a call answered by the server started again", || {
        let (text, is_error) = s.call("room", json!({ "last": 0 }));
        (!is_error).then_some(text)
    });
    assert!(!text.contains("none came back"), "{text}");
    // Its stderr read at last, the give-up said: the session goes on all the same.
    let drain = std::thread::spawn(move || {
        let mut f = std::fs::File::from(read_end);
        let _ = std::io::copy(&mut f, &mut std::io::sink());
    });
    assert!(!s.call("room", json!({ "last": 0 })).1, "still taken");
    s.close_input();
    assert!(s.wait().success(), "ends well");
    drop(drain);
}

/// A refused session that looks for a server and finds one stopped (Ctrl-Z on `ovai serve`) waits a
/// moment for it, not a minute, and says what it found.
#[test]
fn a_refused_session_finding_a_stopped_server_says_so_at_once() {
    let inst = Instance::new();
    let (mut s, ()) = given_up(&inst, |s| {
        s.initialize();
    });
    let d = inst.start();
    freeze(d.pid());
    let text = refused_call_after_a_look(&mut s);
    assert!(text.contains("said nothing within 2 s"), "{text}");
    // Gone again: the words are of what the session finds now, not of the server it found before.
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    let text = refused_call_after_a_look(&mut s);
    assert!(
        text.contains("no ovai server is running for") && !text.contains("said nothing"),
        "{text}"
    );
}

/// A server still reading its plugins when a refused session looks for it is said to be starting,
/// not stopped or stuck (which would have a person end it).
#[test]
fn a_refused_session_finding_a_starting_server_says_it_is_starting() {
    let inst = Instance::new();
    let (mut s, ()) = given_up(&inst, |s| {
        s.initialize();
    });
    // A plugin whose import takes a while: the server reads plugins/ before it greets anybody.
    inst.write_plugin(
        "slowimport.mjs",
        "await new Promise((r) => setTimeout(r, 8000));\n\
         export const description = 'x';\nexport const inputSchema = { type: 'object' };\n\
         export function run() { return { text: 'x' }; }",
    );
    let mut cmd = std::process::Command::new(OVAI);
    cmd.args(["serve", "--root"]).arg(&inst.root);
    let _serving = Running::spawn(cmd);
    wait_until("the server to be starting", || {
        inst.root.join(".ovai/ovai.sock").exists().then_some(())
    });
    let text = refused_call_after_a_look(&mut s);
    assert!(
        text.contains("is starting (reading its plugins)") && !text.contains("stuck"),
        "{text}"
    );
}

/// A listen stream kept open through a give-up that may pass ends, with the refusal, once the refusal
/// is for good (the seat re-keyed meanwhile).
#[test]
fn a_kept_listen_stream_ends_when_the_refusal_turns_out_for_good() {
    let inst = Instance::new();
    let meta = modern_meta();
    let (mut s, listen) = given_up(&inst, listen_for_changes);
    inst.cmd()
        .args(["seat", "rotate", "lead"])
        .assert()
        .success();
    let _d = inst.start();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let call = s.send_request(
        "tools/call",
        json!({ "name": "room", "arguments": { "last": 0 }, "_meta": meta }),
    );
    let (text, _) = text_of(&s.response(call));
    assert!(text.contains("Start this session again"), "{text}");
    let ended = s.response(listen);
    assert!(
        ended["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("is not the secret of any seat")),
        "{ended}"
    );
}

/// A listen stream the client cancels while the session is refused is not opened again when a server
/// takes the session.
#[test]
fn a_listen_cancelled_while_refused_is_not_opened_again() {
    let inst = Instance::new();
    let meta = modern_meta();
    let (mut s, listen) = given_up(&inst, listen_for_changes);
    s.send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": listen } }));
    let _d = inst.start();
    wait_until("a call answered by the server started again", || {
        let id = s.send_request(
            "tools/call",
            json!({ "name": "room", "arguments": { "last": 0 }, "_meta": meta }),
        );
        (!text_of(&s.response(id)).1).then_some(())
    });
    // A round trip after: what the server sent meanwhile has arrived.
    let ping = s.send_request("ping", json!({ "_meta": meta }));
    let _ = s.response(ping);
    assert!(
        !s.backlog.iter().any(
            |m| m["method"] == "notifications/subscriptions/acknowledged"
                || m["method"] == "notifications/tools/list_changed"
        ),
        "the cancelled stream was opened again: {:?}",
        s.backlog
    );
}

/// A 2026-07-28 session's listen stream stays open through a give-up, and a server that takes the
/// session again re-opens it and says on it that the list may have changed.
#[test]
fn a_listen_stream_outlives_a_give_up_and_hears_of_the_server_taking_it_again() {
    let inst = Instance::new();
    let meta = modern_meta();
    let (mut s, listen) = given_up(&inst, listen_for_changes);
    let call = s.send_request(
        "tools/call",
        json!({ "name": "room", "arguments": { "last": 0 }, "_meta": meta }),
    );
    assert!(text_of(&s.response(call)).1);
    let _d = inst.start();
    wait_until("a call answered by the server started again", || {
        let id = s.send_request(
            "tools/call",
            json!({ "name": "room", "arguments": { "last": 0 }, "_meta": meta }),
        );
        (!text_of(&s.response(id)).1).then_some(())
    });
    let changed = s.recv_where(|m| m["method"] == "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(listen),
        "{changed}"
    );
    assert!(
        !s.backlog.iter().any(|m| m["id"] == json!(listen)),
        "the stream was not ended: {:?}",
        s.backlog
    );
    // The server that took it acknowledged it again; the client, told once, is not told twice
    // (helper-88). A request after makes sure that acknowledgement came.
    s.request("tools/list", json!({ "_meta": meta }));
    assert!(
        !s.backlog
            .iter()
            .any(|m| m["method"] == "notifications/subscriptions/acknowledged"),
        "{:?}",
        s.backlog
    );
}

/// An initialize no server answered before the bridge gave up is not replayed to the server that takes
/// the session again: the client's next initialize is answered, with nothing sent before it.
#[test]
fn an_initialize_refused_at_a_give_up_is_not_replayed_when_a_server_takes_the_session() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session_with_env("lead", &[("OVAI_RECONNECT_SECONDS", "1")]);
    assert!(
        s.request("ping", json!({})).get("result").is_some(),
        "connected"
    );
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    let first = s.send_request(
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
    );
    assert!(
        s.response(first).get("error").is_some(),
        "refused at the give-up"
    );
    let _d = inst.start();
    let answer = wait_until("an initialize answered by the server started again", || {
        let id = s.send_request(
            "initialize",
            json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
        );
        let r = s.response(id);
        r.get("result").is_some().then_some(r)
    });
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-06-18",
        "{answer}"
    );
    assert!(
        !s.backlog
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "nothing before the initialize's answer: {:?}",
        s.backlog
    );
}
