//! The fault matrix: for each way a plugin can misbehave, the daemon stays up, the caller gets a refusal
//! naming the file and what happened, other plugins and seats keep being answered, and the next call to
//! a healthy plugin succeeds. One fixture plugin per fault, in tests/fixtures/plugins.

mod common;
use common::*;
use serde_json::{Value, json};

fn instance(faults: &[&str], config: Value) -> Instance {
    let inst = Instance::new();
    inst.fixture("echo.mjs");
    for f in faults {
        inst.fixture(&format!("{f}.mjs"));
    }
    inst.set_config(config);
    inst.add_seat("w1");
    inst
}

/// Calls `fault` as the Leader and returns the answer, after checking the Worker is answered meanwhile
/// and the healthy plugin answers next; the daemon's pid never changes.
fn fault_call(inst: &Instance, d: &mut Daemon, fault: &str, args: Value) -> (String, bool) {
    let pid = d.pid();
    let mut lead = inst.session("lead");
    let mut w1 = inst.session("w1");
    lead.initialize();
    w1.initialize();
    let answer = lead.call(fault, args);
    assert_eq!(
        w1.call("echo", json!({ "from": "w1" })),
        (r#"w1: {"from":"w1"}"#.to_string(), false)
    );
    assert_eq!(
        lead.call("echo", json!({ "n": 1 })),
        (r#"lead: {"n":1}"#.to_string(), false)
    );
    assert!(d.is_running());
    assert_eq!(d.pid(), pid);
    answer
}

#[test]
fn a_sync_throw_is_a_refusal_naming_the_file() {
    let inst = instance(&["fault-throw"], json!({}));
    let mut d = inst.start();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-throw", json!({})),
        (
            "plugins/fault-throw.mjs threw at 4:9: RangeError: sync throw".to_string(),
            true
        )
    );
    assert_eq!(d.status().unwrap()["host"]["respawns"], 0);
}

#[test]
fn a_thrown_errors_causes_are_said_bounded_escaped_and_no_getter_is_run() {
    // A port nothing listens on: fetch fails, and only its cause says why.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let inst = Instance::with_plugins(&[
        (
            "fetches.mjs",
            &format!(
                "export const description = 'Fetches.';\nexport const inputSchema = {{ type: 'object' }};\n\
                 export async function run() {{ await fetch('http://127.0.0.1:{port}/'); return {{ text: 'no' }}; }}\n"
            ),
        ),
        (
            "chains.mjs",
            "export const description = 'Throws a chain.';\nexport const inputSchema = { type: 'object' };\n\
             export function run() {\n\
               let e = new Error('five');\n\
               for (const w of ['four', 'three\\u001b[31m', 'two', 'one']) e = new Error(w, { cause: e });\n\
               throw new Error('top', { cause: e });\n\
             }\n",
        ),
        (
            "lures.mjs",
            "export const description = 'Throws a cause behind a getter.';\nexport const inputSchema = { type: 'object' };\n\
             export function run() {\n\
               const lure = new Error('lure');\n\
               Object.defineProperty(lure, 'cause', { get() { return new Error('from the getter'); } });\n\
               throw lure;\n\
             }\n",
        ),
    ]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let (text, refused) = s.call("fetches", json!({}));
    assert!(refused);
    assert!(
        text.contains(&format!(
            "TypeError: fetch failed (cause: Error: connect ECONNREFUSED 127.0.0.1:{port})"
        )),
        "{text}"
    );
    let (text, refused) = s.call("chains", json!({}));
    assert!(refused);
    // Three causes at most, a control character escaped.
    assert!(
        text.ends_with(
            "Error: top (cause: Error: one (cause: Error: two (cause: Error: three\\u{1b}[31m)))"
        ),
        "{text}"
    );
    let (text, refused) = s.call("lures", json!({}));
    assert!(refused);
    assert!(text.ends_with(": Error: lure"), "{text}");
}

#[test]
fn an_async_rejection_is_a_refusal_naming_the_file() {
    let inst = instance(&["fault-reject"], json!({}));
    let mut d = inst.start();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-reject", json!({})),
        (
            "plugins/fault-reject.mjs threw at 5:9: Error: async rejection".to_string(),
            true
        )
    );
}

#[test]
fn errors_left_behind_after_answering_do_not_end_the_host() {
    let inst = instance(&["fault-late-errors"], json!({}));
    let mut d = inst.start();
    let host = d.host_pid();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-late-errors", json!({})),
        ("answered before the mess".to_string(), false)
    );
    assert_eq!(d.host_pid(), host, "the same host serves on");
    assert_eq!(d.status().unwrap()["host"]["respawns"], 0);
    // And in runtime.log, where the person who wrote the plugin looks.
    let want = [
        "A plugin left a promise rejected (at plugins/fault-late-errors.mjs:5:18): Error: nobody awaits this. The plugin host goes on; errors from the same place are not written here again until it is started again.",
        "A plugin threw outside a call (at plugins/fault-late-errors.mjs:6:28): Error: thrown from a timer. The plugin host goes on; errors from the same place are not written here again until it is started again.",
    ];
    wait_until("both rows", || {
        let rows = inst.rows("host");
        want.iter()
            .all(|w| rows.iter().any(|r| r == w))
            .then_some(())
    });
    let stderr = d.stderr.clone();
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr).unwrap();
    // Each named by the place in plugins/ it came from.
    assert!(
        log.contains(
            "a plugin threw outside a call (at plugins/fault-late-errors.mjs:6:28): Error: thrown from a timer"
        ),
        "{log}"
    );
    assert!(
        log.contains(
            "a plugin left a promise rejected (at plugins/fault-late-errors.mjs:5:18): Error: nobody awaits this"
        ),
        "{log}"
    );
}

#[test]
fn process_exit_in_run_is_a_refusal_and_the_host_stays_up() {
    let inst = instance(&["fault-exit"], json!({}));
    let mut d = inst.start();
    let host = d.host_pid();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-exit", json!({})),
        (
            "plugins/fault-exit.mjs called process.exit(3), which would end the plugin host for everybody; the host stayed up and this call was refused.".to_string(),
            true
        )
    );
    assert_eq!(d.host_pid(), host);
}

#[test]
fn a_plugin_killing_its_host_costs_a_refusal_and_a_restart() {
    let inst = instance(&["fault-sigkill"], json!({}));
    let mut d = inst.start();
    let host = d.host_pid();
    let (text, refused) = fault_call(&inst, &mut d, "fault-sigkill", json!({}));
    assert!(refused);
    assert_eq!(
        text,
        "plugins/fault-sigkill.mjs did not answer: the plugin host stopped (signal SIGKILL), ended by a plugin at plugins/fault-sigkill.mjs:4:11, while it ran. A new plugin host is being started for the next call; nothing was retried."
    );
    assert_ne!(d.host_pid(), host);
    assert!(!process_alive(host));
    let rows = inst.rows("host");
    assert!(rows[0].starts_with(&format!("The plugin host (pid {host}) stopped (signal SIGKILL); the calls in flight to plugins/fault-sigkill.mjs were answered with a refusal.")), "{rows:?}");
}

#[test]
fn a_promise_that_never_settles_meets_its_deadline_and_its_signal_fires() {
    let inst = instance(&["fault-never"], json!({ "callTimeoutSeconds": 1 }));
    let mut d = inst.start();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-never", json!({ "tag": "deadline" })),
        (
            "plugins/fault-never.mjs did not answer in time: the call was given up after 1 s and its signal fired, but what it started may still finish: look before calling it again (callTimeoutSeconds in openovai.json sets the limit).".to_string(),
            true
        )
    );
    assert_eq!(
        note_of(&inst, "aborted-deadline"),
        "TimeoutError: the call took longer than its deadline"
    );
    // Its author reads of it in runtime.log, once a host however often it happens.
    assert!(fault_call(&inst, &mut d, "fault-never", json!({ "tag": "again" })).1);
    let said = format!(
        "A call to plugins/fault-never.mjs reached its deadline (callTimeoutSeconds in openovai.json) and was given up; if its code does not stop at its signal, it runs on in the plugin host (pid {}). Said once a file for each host.",
        d.host_pid()
    );
    let rows = inst.rows("host");
    assert_eq!(rows.iter().filter(|r| **r == said).count(), 1, "{rows:#?}");
}

/// A call given up while another call's code holds the host's event loop (callTimeoutSeconds below
/// hostHangSeconds) is told the host answered nothing: "what it started may still finish" blamed the
/// innocent call, which never started.
#[test]
fn a_call_given_up_while_the_host_is_held_says_the_host_answered_nothing() {
    let inst = instance(&[], json!({ "callTimeoutSeconds": 1 }));
    // The root's own files are read-only in the box; its folders (work/, made by the test instance) are
    // the plugins' to write.
    let spinning = inst.root.join("work/spinning");
    inst.write_plugin(
        "spin.mjs",
        &format!(
            "import {{ writeFileSync }} from 'node:fs';\nexport const description = 'Holds the event loop.';\n\
             export const inputSchema = {{ type: 'object' }};\nexport function run() {{\n\
             writeFileSync({:?}, 'yes');\n  const until = Date.now() + 4000;\n  while (Date.now() < until) {{}}\n\
             return {{ text: 'spun' }};\n}}\n",
            spinning.display().to_string()
        ),
    );
    let d = inst.start();
    let host = d.host_pid();
    let mut s = inst.session("lead");
    s.initialize();
    let spin = s.send_request("tools/call", json!({ "name": "spin", "arguments": {} }));
    wait_until("the spin to start", || spinning.exists().then_some(()));
    // A pong the host wrote just before it began is read by now.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (text, refused) = s.call("echo", json!({}));
    assert!(refused, "{text}");
    assert_eq!(
        text,
        "plugins/echo.mjs did not answer in time: the call was given up after 1 s, in which the plugin host \
         answered nothing, not even the server's heartbeat. Its event loop is held, by this call's code or \
         another call's, so this call may not have started; the host is ended and started again if it stays \
         so for hostHangSeconds, and a call after that runs (callTimeoutSeconds in openovai.json sets the \
         limit)."
    );
    let (text, refused) = text_of(&s.response(spin));
    assert!(refused && text.contains("answered nothing"), "{text}");
    let rows = inst.rows("host");
    assert!(
        rows.contains(&format!(
            "A call to plugins/echo.mjs reached its deadline (callTimeoutSeconds in openovai.json) while the \
             plugin host (pid {host}) answered nothing, not even its heartbeat: its event loop is held, by this \
             call's code or another's, and the host is ended if it stays so for hostHangSeconds. Said once a \
             file for each host."
        )),
        "{rows:#?}"
    );
    // Once the loop turns again, calls are answered.
    wait_until("echo to answer again", || {
        (!s.call("echo", json!({ "n": 1 })).1).then_some(())
    });
}

#[test]
fn a_cancelled_call_fires_its_signal_and_gets_no_answer() {
    let inst = instance(&["fault-never"], json!({}));
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let id = s.send_request(
        "tools/call",
        json!({ "name": "fault-never", "arguments": { "tag": "cancel" } }),
    );
    // Once the echo after it is answered, the call has reached the host.
    assert!(!s.call("echo", json!({})).1);
    s.send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": id, "reason": "user pressed stop" } }));
    assert_eq!(
        note_of(&inst, "aborted-cancel"),
        "AbortError: the caller cancelled the call"
    );
    s.request("tools/list", json!({}));
    assert!(
        !s.backlog.iter().any(|m| m.get("id") == Some(&json!(id))),
        "no answer for a cancelled call: {:?}",
        s.backlog
    );
}

#[test]
fn a_call_in_flight_when_its_seat_is_removed_is_stopped_at_once() {
    // Without a box the host is not replaced for a change of seats, so the call is stopped by its
    // session's end alone.
    let inst = instance(&["fault-never"], json!({ "hostIsolation": "none" }));
    let _d = inst.start();
    let mut w1 = inst.session("w1");
    w1.initialize();
    w1.send_request(
        "tools/call",
        json!({ "name": "fault-never", "arguments": { "tag": "removed" } }),
    );
    // Once the echo after it is answered, the call has reached the host.
    assert!(!w1.call("echo", json!({})).1);
    inst.cmd().args(["seat", "remove", "w1"]).assert().success();
    // Not the words of a session that closed and was given 5 s: it was stopped as its session ended,
    // and its signal says why.
    assert_eq!(
        note_of(&inst, "aborted-removed"),
        "AbortError: the caller's seat was removed (`ovai seat remove`), which ended its session"
    );
}

#[test]
fn a_blocked_event_loop_is_found_by_the_heartbeat_and_the_host_restarted() {
    let inst = instance(&["fault-loop"], json!({ "hostHangSeconds": 2 }));
    let mut d = inst.start();
    let host = d.host_pid();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-loop", json!({})),
        (
            "plugins/fault-loop.mjs did not answer: the plugin host stopped answering for 2 s (a plugin blocking its event loop, at plugins/fault-loop.mjs:4:3; synchronous work such as execSync or a long loop does that: run commands with the async exec, execFile or spawn, or raise hostHangSeconds in openovai.json) and was killed (signal SIGKILL) while it ran. A new plugin host is being started for the next call; nothing was retried.".to_string(),
            true
        )
    );
    assert!(!process_alive(host));
    assert!(inst.rows("host")[0].contains("stopped answering for 2 s (a plugin blocking its event loop, at plugins/fault-loop.mjs:4:3; synchronous work such as execSync or a long loop does that: run commands with the async exec, execFile or spawn, or raise hostHangSeconds in openovai.json) and was killed (signal SIGKILL); the calls in flight to plugins/fault-loop.mjs"));
}

/// A Worker that reads the host's pipe and answers its pings cannot keep a host whose own thread is
/// held: a pong counts only with the host's key, which plugins never see (helper-87: the host was
/// never ended, and other plugins' calls timed out, blamed on them).
#[test]
fn a_worker_answering_the_heartbeat_does_not_keep_a_blocked_host() {
    let inst = instance(
        &["fault-forged-pong"],
        json!({ "hostHangSeconds": 2, "callTimeoutSeconds": 30 }),
    );
    let mut d = inst.start();
    let host = d.host_pid();
    let (text, refused) = fault_call(&inst, &mut d, "fault-forged-pong", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.starts_with(
            "plugins/fault-forged-pong.mjs did not answer: the plugin host stopped answering for 2 s"
        ),
        "{text}"
    );
    assert!(!process_alive(host));
}

#[test]
fn a_timer_that_blocks_the_event_loop_is_named_and_left_out_of_the_next_host() {
    let inst = instance(&["fault-timer-loop"], json!({ "hostHangSeconds": 2 }));
    let _d = inst.start();
    let host = inst.host_rows_after_respawn();
    assert!(
        host[0].contains(") stopped answering for 2 s (a plugin blocking its event loop, at plugins/fault-timer-loop.mjs:4:3; synchronous work such as execSync or a long loop does that: run commands with the async exec, execFile or spawn, or raise hostHangSeconds in openovai.json) and was killed (signal SIGKILL) with no call in flight."),
        "{host:#?}"
    );
    let left = "plugins/fault-timer-loop.mjs is not answering calls since a new plugin host was started: its code held a plugin host's event loop before any call of its own ran there (at plugins/fault-timer-loop.mjs:4:3): code its import runs, which would hold every new host's. Fix it, then run `ovai restart`, which serves it again. `ovai check` may pass it as it is: it only imports the file, and runs no call and waits for no timer.";
    assert_eq!(host[1], left, "{host:#?}");
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "n": 1 })),
        (r#"lead: {"n":1}"#.to_string(), false)
    );
    assert_eq!(
        s.call("fault-timer-loop", json!({})),
        (left.to_string(), true)
    );
}

#[test]
fn a_memory_blow_up_is_capped_and_said() {
    let inst = instance(&["fault-memory"], json!({ "hostMaxMemoryMB": 64 }));
    let mut d = inst.start();
    let (text, refused) = fault_call(&inst, &mut d, "fault-memory", json!({}));
    assert!(refused);
    assert!(
        text.starts_with("plugins/fault-memory.mjs did not answer: the plugin host ran out of memory (its heap is capped at 64 MB by hostMaxMemoryMB in openovai.json) and stopped ("),
        "{text}"
    );
    assert!(
        inst.rows("host")[0].contains("Its last words on stderr:"),
        "{:?}",
        inst.rows("host")
    );
}

/// What a plugin prints reaches the daemon's stderr with its control characters escaped: a carriage
/// return cannot hide what came before it on the operator's terminal, nor an escape sequence act there.
#[test]
fn a_plugins_output_reaches_the_daemons_stderr_escaped() {
    let inst = instance(&[], json!({}));
    inst.write_plugin(
        "prints.mjs",
        r#"export const description = "Prints what a terminal would act on.";
export const inputSchema = { type: "object" };
export function run() { console.error("shown\rhidden \u001b[2Jcleared \u001b]52;c;eA==\u0007"); console.log("out\rput"); setTimeout(() => { throw new Error("stray one\nstray two"); }, 1); return { text: "printed" }; }
"#,
    );
    let mut d = inst.start();
    assert_eq!(
        fault_call(&inst, &mut d, "prints", json!({})),
        ("printed".to_string(), false)
    );
    // An error's second line stays on its row's line: in the host's own words, and in the copy of
    // runtime.log's row.
    wait_until("the stray error's row", || {
        inst.rows("host")
            .iter()
            .any(|r| r.contains("stray one\\nstray two"))
            .then_some(())
    });
    let stderr = d.stderr.clone();
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr).unwrap();
    assert!(
        !log.lines()
            .any(|l| l.contains("stray two") && !l.contains("stray one")),
        "{log}"
    );
    assert!(
        log.contains("shown\\rhidden \\u{1b}[2Jcleared \\u{1b}]52;c;eA==\\u{7}"),
        "{log}"
    );
    assert!(log.contains("out\\rput"), "{log}");
    assert!(!log.contains('\r') && !log.contains('\u{7}'), "{log:?}");
}

/// Memory a plugin takes outside V8's heap (Buffers) counts against the box's bound all the same: the
/// host is ended, and the caller told why, in words naming the setting.
#[test]
fn memory_outside_the_heap_is_bounded_too() {
    let inst = instance(&[], json!({ "hostMaxMemoryMB": 64 }));
    inst.write_plugin(
        "buffers.mjs",
        r#"export const description = "Holds Buffers, far past the heap's bound.";
export const inputSchema = { type: "object" };
export async function run() {
  const kept = [];
  for (let i = 0; i < 48; i++) kept.push(Buffer.alloc(32 << 20, 1));
  await new Promise((done) => setTimeout(done, 5000));
  return { text: `held ${kept.length * 32} MB` };
}
"#,
    );
    let mut d = inst.start();
    let bounds = d.status().unwrap()["host"]["bounds"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        bounds.starts_with(
            "The plugin host's box may hold 64 MB (hostMaxMemoryMB) and 128 MB for Node itself"
        ),
        "{bounds}"
    );
    let (text, refused) = fault_call(&inst, &mut d, "buffers", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.starts_with("plugins/buffers.mjs did not answer: the plugin host used more memory than its box may hold (64 MB, hostMaxMemoryMB in openovai.json, and 128 MB for Node itself) and was ended ("),
        "{text}"
    );
}

/// A file whose import takes more memory than the box holds is not served, and its row says that was
/// memory, as a call's refusal does: "stopped the plugin host (signal SIGKILL)" said nothing to change.
#[test]
fn an_import_past_the_memory_bound_is_said_to_be_memory() {
    let inst = instance(&[], json!({ "hostMaxMemoryMB": 64 }));
    inst.write_plugin(
        "hog.mjs",
        r#"const kept = [];
for (let i = 0; i < 48; i++) kept.push(Buffer.alloc(32 << 20, 1));
export const description = "Holds Buffers at import.";
export const inputSchema = { type: "object" };
export function run() { return { text: String(kept.length) }; }
"#,
    );
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(
        rows.iter().any(|r| r.starts_with(
            "plugins/hog.mjs is not served: importing it stopped the plugin host, which used more memory than its box may hold (64 MB, hostMaxMemoryMB in openovai.json, and 128 MB for Node itself) and was ended ("
        )),
        "{rows:#?}"
    );
}

/// A plugin that starts processes without end (a fork bomb) reaches the box's bound on processes: the
/// host is ended, naming the file whose call was running, and the machine keeps its processes.
#[test]
fn processes_past_the_bound_end_the_host_naming_the_file() {
    let inst = instance(&[], json!({ "hostMaxProcesses": 64 }));
    inst.write_plugin(
        "forks.mjs",
        r#"import { spawn } from "node:child_process";
export const description = "Starts processes without end.";
export const inputSchema = { type: "object" };
export async function run() {
  let started = 0;
  for (let i = 0; i < 200; i++) {
    try { spawn("sleep", ["30"], { stdio: "ignore" }).on("error", () => {}); started++; } catch {}
  }
  await new Promise((done) => setTimeout(done, 5000));
  return { text: `started ${started}` };
}
"#,
    );
    let mut d = inst.start();
    let (text, refused) = fault_call(&inst, &mut d, "forks", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.starts_with("plugins/forks.mjs did not answer: the plugin host started more processes than its box may hold (64 processes and threads, hostMaxProcesses in openovai.json) and was ended ("),
        "{text}"
    );
    let row = inst
        .rows("host")
        .into_iter()
        .find(|r| r.contains("started more processes than its box may hold"))
        .unwrap();
    assert!(
        row.contains("the calls in flight to plugins/forks.mjs were answered with a refusal"),
        "{row}"
    );
}

#[test]
fn megabytes_on_stdout_and_stderr_are_drained_not_buffered() {
    let inst = instance(&["fault-flood"], json!({}));
    let mut d = inst.start();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-flood", json!({})),
        ("flooded".to_string(), false)
    );
    assert_eq!(d.status().unwrap()["host"]["respawns"], 0);
    let stderr = d.stderr.clone();
    // The flood is counted once its second is over.
    wait_until("the flood's count", || {
        std::fs::read_to_string(&stderr)
            .unwrap_or_default()
            .contains("lines of plugin output were not logged (more than 100 a second)")
            .then_some(())
    });
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr).unwrap();
    assert!(
        log.len() < 2_000_000,
        "the flood is not copied into the daemon's log: {} bytes",
        log.len()
    );
}

/// What a plugin prints is logged under its file's name, whether it prints in a call, at its import or
/// later from a timer; one plugin's flood is counted apart and takes no other plugin's lines with it;
/// and a line left without its end is not glued to another plugin's output.
#[test]
fn what_a_plugin_prints_is_logged_under_its_name_and_a_flood_is_its_own() {
    let tool = |body: &str| {
        format!(
            "export const description = 'Prints.';\nexport const inputSchema = {{ type: 'object' }};\n{body}\n"
        )
    };
    let inst = Instance::with_plugins(&[
        (
            "flood.mjs",
            &tool(
                "export function run() { for (let i = 0; i < 3000; i++) console.log('flood line ' + i); return { text: 'flooded' }; }",
            ),
        ),
        (
            "talk.mjs",
            &tool(
                "console.log('TALK at its import');\nexport function run() { console.log('TALK in a call'); console.error('TALK on stderr'); setTimeout(() => console.log('TALK from a timer'), 10); return { text: 'talked' }; }",
            ),
        ),
        (
            "part.mjs",
            &tool(
                "export function run() { process.stdout.write('PART with no end'); return { text: 'parted' }; }",
            ),
        ),
        // A stack's text names whatever a plugin makes it name: the name comes from V8's call sites.
        (
            "forger.mjs",
            &tool(
                "export function run() { const other = new URL('./talk.mjs', import.meta.url).href; Error.prepareStackTrace = () => 'Error\\n    at x (' + other + ':1:1)'; console.log('FORGED by its stack'); Error.prepareStackTrace = undefined; (0, eval)('console.log(\"FORGED by eval\")\\n//# sourceURL=' + other); process.stdout.write('RGVjb2RlZAo=', 'base64'); return { text: 'forged' }; }",
            ),
        ),
        // Nor can a plugin reach the host's own reading of the stack through Object.prototype.
        (
            "hider.mjs",
            &tool(
                "export function run() { Object.prototype.Error = { captureStackTrace(h) { h.stack = []; } }; console.log('HIDDEN by a polluted prototype'); delete Object.prototype.Error; return { text: 'hid' }; }",
            ),
        ),
    ]);
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("hider", json!({})), ("hid".to_string(), false));
    assert_eq!(s.call("flood", json!({})), ("flooded".to_string(), false));
    assert_eq!(s.call("part", json!({})), ("parted".to_string(), false));
    assert_eq!(s.call("talk", json!({})), ("talked".to_string(), false));
    assert_eq!(s.call("forger", json!({})), ("forged".to_string(), false));
    let stderr = d.stderr.clone();
    // The flood is counted once its second is over.
    wait_until("the timer's line and the flood's count", || {
        let log = std::fs::read_to_string(&stderr).unwrap_or_default();
        (log.contains("TALK from a timer")
            && log.contains("were not logged")
            && log.contains("PART with no end"))
        .then_some(())
    });
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr).unwrap();
    let line_of = |words: &str| {
        log.lines()
            .find(|l| l.contains(words))
            .unwrap_or_else(|| panic!("no line with {words:?} in {log}"))
            .to_string()
    };
    for words in [
        "TALK at its import",
        "TALK in a call",
        "TALK on stderr",
        "TALK from a timer",
    ] {
        let line = line_of(words);
        assert!(line.contains(r#"plugin="plugins/talk.mjs""#), "{line}");
    }
    assert!(line_of("TALK on stderr").contains(r#"stream="stderr""#));
    let dropped = line_of("lines of plugin output were not logged (more than 100 a second)");
    assert!(
        dropped.contains(r#"plugin="plugins/flood.mjs""#),
        "{dropped}"
    );
    for words in ["FORGED by its stack", "FORGED by eval", "Decoded"] {
        let line = line_of(words);
        assert!(line.contains(r#"plugin="plugins/forger.mjs""#), "{line}");
    }
    let hidden = line_of("HIDDEN by a polluted prototype");
    assert!(hidden.contains(r#"plugin="plugins/hider.mjs""#), "{hidden}");
    let part = line_of("PART with no end");
    assert!(part.contains(r#"plugin="plugins/part.mjs""#), "{part}");
    assert!(!part.contains("TALK"), "{part}");
}

#[test]
fn an_answer_of_hundreds_of_mib_is_refused() {
    let inst = instance(&["fault-huge"], json!({}));
    let mut d = inst.start();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-huge", json!({})),
        (
            "plugins/fault-huge.mjs answered 314572800 bytes of text, more than the 1048576 this server passes on (maxAnswerBytes in openovai.json sets the limit).".to_string(),
            true
        )
    );
}

#[test]
fn answers_that_cannot_be_serialized_are_refusals() {
    let inst = instance(&["fault-unserializable"], json!({}));
    let mut d = inst.start();
    let tail = ": a tool answers { text } or { refused }, with a string in it.";
    assert_eq!(
        fault_call(
            &inst,
            &mut d,
            "fault-unserializable",
            json!({ "kind": "bigint" })
        ),
        (
            format!(
                "plugins/fault-unserializable.mjs answered {{ text }} holding a bigint, not a string{tail}"
            ),
            true
        )
    );
    assert_eq!(
        fault_call(
            &inst,
            &mut d,
            "fault-unserializable",
            json!({ "kind": "cycle" })
        ),
        (
            format!(
                "plugins/fault-unserializable.mjs answered {{ text }} holding an object, not a string{tail}"
            ),
            true
        )
    );
    assert_eq!(
        fault_call(
            &inst,
            &mut d,
            "fault-unserializable",
            json!({ "kind": "proxy" })
        ),
        (
            format!(
                "plugins/fault-unserializable.mjs answered something that cannot be read (Error: no keys for you){tail}"
            ),
            true
        )
    );
}

#[test]
fn a_plugin_that_spawns_a_child_and_crashes_leaves_no_orphan() {
    let inst = instance(&["fault-orphan"], json!({}));
    let mut d = inst.start();
    let (text, refused) = fault_call(&inst, &mut d, "fault-orphan", json!({}));
    assert!(
        refused
            && text.starts_with(
                "plugins/fault-orphan.mjs did not answer: the plugin host stopped (signal SIGKILL)"
            ),
        "{text}"
    );
    let mark = std::fs::read_to_string(inst.root.join("work/orphan.mark")).unwrap();
    wait_until("the plugin's child to end with its host", || {
        processes_with_arg(&mark).is_empty().then_some(())
    });
}

/// The pids of processes with `arg` on their command line.
fn processes_with_arg(arg: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
                && process_alive(*pid)
        })
        .collect()
}

#[test]
fn a_crash_loop_keeps_the_host_down_until_ovai_restart() {
    // Killed by a command, the host names no file to leave out: five crashes make the loop.
    let inst = instance(&["fault-unnamed-kill"], json!({}));
    let mut d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for i in 1..=5 {
        let (text, refused) = s.call("fault-unnamed-kill", json!({}));
        assert!(
            refused && text.contains("the plugin host stopped (signal SIGKILL)"),
            "{text}"
        );
        // The last refusal before the stop says the host stays down, never that it is coming back.
        assert_eq!(
            text.contains("so it stays down until `ovai restart`"),
            i == 5,
            "{i}: {text}"
        );
    }
    let down = "was not run: the plugin host stopped 5 times within 60 s (no place was said; the last calls the ended hosts were sent were to plugins/fault-unnamed-kill.mjs), so it stays down until `ovai restart`.";
    assert_eq!(
        s.call("echo", json!({})),
        (format!("plugins/echo.mjs {down}"), true)
    );
    assert!(inst.rows("host").contains(
        &"The plugin host stays down: it stopped 5 times within 60 s. Fix the plugin that ends it (no place was said; the last calls the ended hosts were sent were to plugins/fault-unnamed-kill.mjs), then run `ovai restart`.".to_string()
    ));
    assert!(
        d.status().unwrap()["host"]["down"]
            .as_str()
            .unwrap()
            .contains("stays down until `ovai restart`")
    );
    // The built-ins do not need the host.
    assert!(!s.call("room", json!({ "last": 0 })).1);
    inst.cmd().arg("restart").assert().success();
    assert_eq!(s.call("echo", json!({})), ("lead: {}".to_string(), false));
    assert!(d.is_running());
}

#[test]
fn the_host_gets_a_minimal_environment_and_plugin_env_passes_names_through() {
    let inst = instance(
        &["env"],
        json!({ "pluginEnv": ["CI_TOKEN", "TEST_NOT_SET", "OVAI_SECRET"] }),
    );
    // The machine's own certificates (a TLS-intercepting proxy's CA) are not a secret, and without them
    // every `fetch` failed with "self-signed certificate in certificate chain" (helper-91).
    let ca = inst.root.join("extra-ca.pem");
    std::fs::write(&ca, "").unwrap();
    let ca = ca.to_str().unwrap();
    let _d = Daemon::start_with_env(
        &inst,
        &[
            ("CI_TOKEN", "t"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("OVAI_SECRET", "x"),
            ("NODE_EXTRA_CA_CERTS", ca),
            ("SSL_CERT_FILE", ca),
        ],
    );
    let mut s = inst.session("lead");
    s.initialize();
    let (text, _) = s.call("env", json!({}));
    let names: Vec<String> = serde_json::from_str(&text).unwrap();
    assert!(names.contains(&"CI_TOKEN".to_string()), "{names:?}");
    assert!(
        names.contains(&"NODE_EXTRA_CA_CERTS".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"SSL_CERT_FILE".to_string()), "{names:?}");
    assert!(names.contains(&"OVAI_HOST".to_string()), "{names:?}");
    // A name the server's environment lacks is said, at its start and at each restart (where one may
    // expect `VAR=x ovai restart` to pass it on); one it has is not.
    let absent = "openovai.json's \"pluginEnv\" names TEST_NOT_SET, which is not set where ovai started, so plugins see none. Plugins see what `ovai serve` started with: set it there (the shell or the service that runs it) and start it again; `ovai restart` does not pass on its own environment.";
    assert!(
        inst.rows("server").contains(&absent.to_string()),
        "{:?}",
        inst.rows("server")
    );
    assert!(
        !inst
            .rows("server")
            .iter()
            .any(|r| r.contains("names CI_TOKEN"))
    );
    inst.cmd()
        .arg("restart")
        .env("TEST_NOT_SET", "y")
        .assert()
        .success()
        .stdout(predicates::str::contains(absent));
    // ovai's own names are not passed, and that is said.
    assert!(
        inst.rows("server").contains(&"openovai.json's \"pluginEnv\" names OVAI_SECRET, one of ovai's own variables, which plugins are never passed (OVAI_SECRET would hand them a seat's secret); take it out of the list.".to_string()),
        "{:?}",
        inst.rows("server")
    );
    // `ovai check` imports with its own environment, and says so in its own words.
    let checked = inst
        .cmd()
        .arg("check")
        .env_remove("TEST_NOT_SET")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(
        said.contains("names TEST_NOT_SET, which is not set where `ovai check` runs, so the plugins it imports see none; a server passes what `ovai serve` started with, so its verdict may differ.")
            && !said.contains("where ovai started"),
        "{said}"
    );
    for secret in ["AWS_SECRET_ACCESS_KEY", "OVAI_SECRET", "OVAI_ROOT"] {
        assert!(
            !names.contains(&secret.to_string()),
            "{secret} leaked: {names:?}"
        );
    }
    for name in &names {
        assert!(
            [
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
                "OVAI_HOST",
                "CI_TOKEN"
            ]
            .contains(&name.as_str()),
            "{name}"
        );
    }
}

#[test]
fn the_host_runs_in_its_own_process_group_and_dies_with_the_daemon() {
    let inst = instance(&[], json!({}));
    let d = inst.start();
    let host = d.host_pid();
    // SAFETY: getpgid only reads another process's group id.
    assert_eq!(unsafe { libc::getpgid(host as i32) }, host as i32);
    signal(d.pid(), libc::SIGKILL);
    wait_gone(host);
}

/// A server killed (or crashed, or its machine gone) leaves no row saying it stopped: the next one says
/// so, naming it, so whoever reads runtime.log later sees the gap (helper-45). A stop is not said so.
#[test]
fn a_server_that_ended_without_stopping_is_said_by_the_next() {
    let inst = instance(&[], json!({}));
    let d = inst.start();
    let first = d.pid();
    signal(first, libc::SIGKILL);
    wait_gone(first);
    drop(d);
    let d = inst.start();
    let said: Vec<String> = inst
        .rows("server")
        .into_iter()
        .filter(|r| r.starts_with("The server before this one"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with(&format!(
            "The server before this one (pid {first}, up since 20"
        )),
        "{said:?}"
    );
    assert!(
        said[0].contains(") ended without stopping (killed, crashed, or its machine went down); its last row was written at 20"),
        "{said:?}"
    );
    d.stop();
    let d = inst.start();
    let said = inst
        .rows("server")
        .into_iter()
        .filter(|r| r.starts_with("The server before this one"))
        .count();
    assert_eq!(said, 1, "a stop is not an end without stopping");
    // A server that ran long wrote more since its start than the log's tail holds: still said.
    let filler: String = (0..1000)
        .map(|i| {
            format!(
                "2026-12-06T00:00:00.000Z plugins a row of a long day, number {i}, {}\n",
                "x".repeat(80)
            )
        })
        .collect();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(inst.root.join("runtime.log"))
        .unwrap();
    std::io::Write::write_all(&mut log, filler.as_bytes()).unwrap();
    let second = d.pid();
    signal(second, libc::SIGKILL);
    wait_gone(second);
    drop(d);
    let _d = inst.start();
    let said: Vec<String> = inst
        .rows("server")
        .into_iter()
        .filter(|r| r.starts_with("The server before this one"))
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[1].starts_with(&format!(
            "The server before this one (pid {second}, up since 20"
        )),
        "{said:?}"
    );
}

#[test]
fn sigterm_lets_calls_finish_within_the_grace_and_answers_the_rest() {
    let inst = instance(
        &["slow", "fault-never"],
        json!({ "shutdownGraceSeconds": 2 }),
    );
    let d = inst.start();
    let host = d.host_pid();
    let mut s = inst.session("lead");
    s.initialize();
    let slow = s.send_request(
        "tools/call",
        json!({ "name": "slow", "arguments": { "ms": 500 } }),
    );
    let never = s.send_request(
        "tools/call",
        json!({ "name": "fault-never", "arguments": {} }),
    );
    assert!(!s.call("echo", json!({})).1);
    let status = d.stop();
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
    assert_eq!(
        text_of(&s.response(slow)),
        ("done after 500 ms".to_string(), false)
    );
    assert_eq!(
        text_of(&s.response(never)),
        (
            "plugins/fault-never.mjs did not answer: the server is shutting down (SIGTERM) and the call did not finish within 2 s (shutdownGraceSeconds in openovai.json).".to_string(),
            true
        )
    );
    wait_gone(host);
    assert_eq!(
        inst.rows("server").last().unwrap(),
        "ovai serve stopped on SIGTERM."
    );
}

#[test]
fn a_plugin_closing_its_hosts_protocol_pipes_costs_a_refusal_and_a_restart() {
    let inst = instance(&["fault-close"], json!({}));
    let mut d = inst.start();
    let host = d.host_pid();
    let (text, refused) = fault_call(&inst, &mut d, "fault-close", json!({}));
    assert!(refused, "{text}");
    // The host leaves when it can no longer write to the daemon, as when the daemon is gone.
    assert_eq!(
        text,
        "plugins/fault-close.mjs did not answer: the plugin host stopped (exit code 0) while it ran. A new plugin host is being started for the next call; nothing was retried."
    );
    assert_ne!(d.host_pid(), host);
}

#[test]
fn a_plugin_closing_the_pipe_its_host_reads_gets_the_host_replaced_not_left_deaf() {
    // The heartbeat would not find it: the plugin answers the pings' pongs itself. Only the daemon's
    // failed writes show that nothing reads what it sends.
    let inst = instance(
        &["fault-deaf"],
        json!({ "hostHangSeconds": 600, "callTimeoutSeconds": 600 }),
    );
    let mut d = inst.start();
    let host = d.host_pid();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-deaf", json!({})),
        ("deaf now".to_string(), false)
    );
    assert_ne!(d.host_pid(), host, "the deaf host was replaced");
    let rows = inst.rows("host");
    assert!(
        rows.iter().any(|r| r.starts_with(&format!(
            "The plugin host (pid {host}) stopped reading what the daemon sends it (a plugin closed its protocol pipe, fd 3) and was killed"
        ))),
        "{rows:?}"
    );
}

#[test]
fn a_protocol_line_over_the_cap_is_dropped_and_the_host_answers_on() {
    // With a 1000-byte answer cap the daemon reads protocol lines of at most 70 KB or so.
    let inst = instance(&["fault-pipe"], json!({ "maxAnswerBytes": 1000 }));
    let mut d = inst.start();
    let host = d.host_pid();
    assert_eq!(
        fault_call(&inst, &mut d, "fault-pipe", json!({})),
        ("still answering".to_string(), false)
    );
    assert_eq!(d.host_pid(), host);
    let stderr = d.stderr.clone();
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr).unwrap();
    assert!(
        log.contains("the plugin host sent a protocol line over the cap; it was dropped"),
        "{log}"
    );
}

#[test]
fn sigterm_while_a_restart_drains_the_old_generation_answers_its_calls_and_ends_both_hosts() {
    let inst = instance(
        &["fault-never"],
        json!({ "shutdownGraceSeconds": 1, "callTimeoutSeconds": 30 }),
    );
    let d = inst.start();
    let old_host = d.host_pid();
    let mut s = inst.session("lead");
    s.initialize();
    let never = s.send_request(
        "tools/call",
        json!({ "name": "fault-never", "arguments": {} }),
    );
    assert!(!s.call("echo", json!({})).1);
    // The restart switches to a new host; the old one waits for its call (up to 31 s).
    inst.cmd().arg("restart").assert().success();
    let new_host = d.host_pid();
    assert_ne!(new_host, old_host);
    assert!(process_alive(old_host), "the old host drains its call");
    let status = d.stop();
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
    assert_eq!(
        text_of(&s.response(never)),
        (
            "plugins/fault-never.mjs did not answer: the server is shutting down (SIGTERM) and the call did not finish within 1 s (shutdownGraceSeconds in openovai.json).".to_string(),
            true
        )
    );
    wait_gone(old_host);
    wait_gone(new_host);
}

/// Spins synchronously until the file `args.flag` exists, so that calls queue behind it.
const HOLDS_THE_HOST: &str = r#"
import { existsSync } from "node:fs";
export const description = "Holds the host's event loop until told to let go.";
export const inputSchema = { type: "object" };
export function run(args) {
  const until = Date.now() + 30000;
  while (!existsSync(args.flag) && Date.now() < until) {}
  return { text: "let go" };
}
"#;

#[test]
fn an_answer_made_just_before_another_plugin_hangs_is_not_lost() {
    answered_before_the_hang("echo", r#"lead: {"n":1}"#);
}

#[test]
fn an_async_answer_whose_call_came_with_a_hang_is_not_lost() {
    answered_before_the_hang("later", r#"later: {"n":1}"#);
}

/// Holds the host while a call of `tool` and then one that hangs reach it (it takes both in one read),
/// and checks that `tool` is answered before the hang costs the host.
fn answered_before_the_hang(tool: &str, answer: &str) {
    let inst = instance(&["fault-loop"], json!({ "hostHangSeconds": 3 }));
    inst.write_plugin("hold.mjs", HOLDS_THE_HOST);
    inst.write_plugin(
        "later.mjs",
        r#"
export const description = "Answers from an async run, with nothing to wait for.";
export const inputSchema = { type: "object" };
export async function run(args) { return { text: `later: ${JSON.stringify(args)}` }; }
"#,
    );
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let flag = inst.root.join("let-go");
    let hold = s.send_request(
        "tools/call",
        json!({ "name": "hold", "arguments": { "flag": flag } }),
    );
    // While the host is held, an echo and then a hang wait on its pipe: it takes both in one read.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let first = s.send_request(
        "tools/call",
        json!({ "name": tool, "arguments": { "n": 1 } }),
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let hang = s.send_request(
        "tools/call",
        json!({ "name": "fault-loop", "arguments": {} }),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(&flag, "").unwrap();
    assert_eq!(text_of(&s.response(hold)), ("let go".to_string(), false));
    assert_eq!(
        text_of(&s.response(first)),
        (answer.to_string(), false),
        "{tool} was answered before the hang began"
    );
    let (refusal, is_error) = text_of(&s.response(hang));
    assert!(
        is_error && refusal.starts_with("plugins/fault-loop.mjs did not answer"),
        "{refusal}"
    );
}

#[test]
fn errors_left_behind_are_one_row_a_place_and_only_so_many() {
    // One place that throws every few milliseconds, and twenty places that throw once each.
    let mut many = String::from(
        "export const description = 'Leaves errors behind.';\nexport const inputSchema = { type: 'object' };\n\
         export function run() {\n  globalThis.thrown = 0;\n",
    );
    for i in 0..20 {
        many.push_str(&format!(
            "  setTimeout(() => {{ globalThis.thrown++; throw new Error('place {i}'); }}, 1);\n"
        ));
    }
    many.push_str(
        "  setInterval(() => { globalThis.thrown++; throw new Error('again'); }, 2);\n  return { text: 'armed' };\n}\n",
    );
    let count = "export const description = 'How many were thrown.';\nexport const inputSchema = { type: 'object' };\n\
                 export function run() { return { text: String(globalThis.thrown ?? 0) }; }\n";
    let inst = Instance::with_plugins(&[("many.mjs", &many), ("count.mjs", count)]);
    let mut d = inst.start();
    let host = d.host_pid();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("many", json!({})), ("armed".to_string(), false));
    wait_until("the interval to have thrown many times", || {
        let (n, _) = s.call("count", json!({}));
        (n.parse::<u64>().unwrap_or(0) >= 60).then_some(())
    });
    assert_eq!(d.host_pid(), host, "the same host serves on");
    let rows = inst.rows("host");
    let strays: Vec<&String> = rows
        .iter()
        .filter(|r| r.starts_with("A plugin threw outside a call"))
        .collect();
    assert_eq!(strays.len(), 16, "{rows:#?}");
    assert!(
        strays.iter().all(|r| r.contains("(at plugins/many.mjs:")),
        "{strays:#?}"
    );
    assert_eq!(
        rows.iter()
            .filter(|r| r.as_str()
                == "Plugins left errors behind outside a call in more than 16 places; the others go only to the daemon's stderr until the plugin host is started again.")
            .count(),
        1,
        "{rows:#?}"
    );
    assert!(d.is_running());
}

#[test]
fn errors_left_behind_that_name_no_place_are_told_apart_by_their_words() {
    // A rejection with no Error has no stack: no place in plugins/ to key it by.
    let inst = Instance::with_plugins(&[(
        "rejects.mjs",
        "export const description = 'Leaves rejections behind.';\nexport const inputSchema = { type: 'object' };\n\
         export function run() { Promise.reject('first'); Promise.reject('second'); Promise.reject('first'); return { text: 'ok' }; }\n",
    )]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("rejects", json!({})), ("ok".to_string(), false));
    let row = |words: &str| {
        format!(
            "A plugin left a promise rejected, and its stack names no place in plugins/: {words}. The plugin host goes on; errors with these words that name no place are not written here again until it is started again."
        )
    };
    let want = [row("the string \"first\""), row("the string \"second\"")];
    let rows = wait_until("both rows", || {
        let rows = inst.rows("host");
        want.iter().all(|w| rows.contains(w)).then_some(rows)
    });
    assert_eq!(
        rows.iter().filter(|r| r.contains("rejected")).count(),
        2,
        "{rows:#?}"
    );
}

/// The note a fixture plugin leaves in work/ once its signal fires. The file is made, then written: a test
/// that read it as soon as it existed could read it empty.
fn note_of(inst: &Instance, name: &str) -> String {
    let path = inst.root.join("work").join(name);
    wait_until("the plugin's note", || {
        std::fs::read_to_string(&path)
            .ok()
            .filter(|note| !note.is_empty())
    })
}
