//! The plugin host killed or ended during a call: every call in flight is answered naming its file, the
//! daemon stays up, and a new host serves the next call.

mod common;
use common::*;
use serde_json::json;

const WAITS: &str = r#"
export const description = "Waits until it is killed.";
export const inputSchema = { type: "object" };
export async function run() { await new Promise(() => {}); }
"#;

const ECHO: &str = r#"
export const description = "Echoes.";
export const inputSchema = { type: "object" };
export function run(args) { return { text: JSON.stringify(args) }; }
"#;

const EXITS: &str = r#"
export const description = "Ends the host.";
export const inputSchema = { type: "object" };
export function run() { process.kill(process.pid, "SIGKILL"); }
"#;

#[test]
fn a_host_killed_during_calls_answers_each_naming_its_file() {
    let inst = Instance::with_plugins(&[
        ("waits.mjs", WAITS),
        ("waits-too.mjs", WAITS),
        ("echo.mjs", ECHO),
    ]);
    let mut d = inst.start();
    let daemon_pid = d.pid();
    let host_pid = d.host_pid();
    let mut s = inst.session("lead");
    s.initialize();
    let a = s.send_request("tools/call", json!({ "name": "waits", "arguments": {} }));
    let b = s.send_request(
        "tools/call",
        json!({ "name": "waits-too", "arguments": {} }),
    );
    // Both calls are in the host before it is killed: an echo sent after them has come back.
    assert_eq!(
        s.call("echo", json!({ "x": 1 })),
        (r#"{"x":1}"#.to_string(), false)
    );
    signal(host_pid, libc::SIGKILL);
    let (ta, ra) = text_of(&s.response(a));
    let (tb, rb) = text_of(&s.response(b));
    assert!(ra && rb);
    assert_eq!(
        ta,
        "plugins/waits.mjs did not answer: the plugin host stopped (signal SIGKILL) while it ran, with one other call in flight (which of the two stopped it, if either, is not known). A new plugin host is being started for the next call; nothing was retried."
    );
    assert!(
        tb.starts_with(
            "plugins/waits-too.mjs did not answer: the plugin host stopped (signal SIGKILL)"
        ),
        "{tb}"
    );
    // The next call is served by a new host; the daemon is the same process.
    assert_eq!(
        s.call("echo", json!({ "y": 2 })),
        (r#"{"y":2}"#.to_string(), false)
    );
    assert!(d.is_running());
    assert_eq!(d.pid(), daemon_pid);
    assert_ne!(d.host_pid(), host_pid);
    assert_eq!(d.status().unwrap()["host"]["respawns"], 1);
    let host_rows = inst.rows("host");
    assert!(
        host_rows[0].starts_with(&format!(
            "The plugin host (pid {host_pid}) stopped (signal SIGKILL); the calls in flight to plugins/waits-too.mjs, plugins/waits.mjs were answered with a refusal. A new plugin host is being started."
        )),
        "{host_rows:?}"
    );
    assert!(
        host_rows[1].starts_with("A new plugin host (pid "),
        "{host_rows:?}"
    );
}

#[test]
fn a_plugin_that_ends_the_host_is_refused_and_others_go_on() {
    let inst = Instance::with_plugins(&[("exits.mjs", EXITS), ("echo.mjs", ECHO)]);
    inst.add_seat("w1");
    let mut d = inst.start();
    let mut lead = inst.session("lead");
    let mut w1 = inst.session("w1");
    lead.initialize();
    w1.initialize();
    let (text, refused) = lead.call("exits", json!({}));
    assert!(refused);
    assert!(text.starts_with("plugins/exits.mjs did not answer: the plugin host stopped (signal SIGKILL), ended by a plugin at plugins/exits.mjs:"), "{text}");
    assert_eq!(w1.call("echo", json!({})), ("{}".to_string(), false));
    assert_eq!(
        lead.call("echo", json!({ "again": true })),
        (r#"{"again":true}"#.to_string(), false)
    );
    assert!(d.is_running());
}

#[test]
fn a_plugins_stdout_and_stderr_go_to_the_daemons_log_not_the_protocol() {
    let inst = Instance::with_plugins(&[(
        "chatty.mjs",
        r#"
export const description = "Talks a lot.";
export const inputSchema = { type: "object" };
export function run() {
  console.log('{"jsonrpc":"2.0","id":1,"result":"forged on stdout"}');
  console.error("a line on stderr from chatty");
  return { text: "the real answer" };
}
"#,
    )]);
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("chatty", json!({})),
        ("the real answer".to_string(), false)
    );
    let stderr_path = d.stderr.clone();
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr_path).unwrap();
    assert!(log.contains("forged on stdout"), "{log}");
    assert!(log.contains("a line on stderr from chatty"), "{log}");
}

#[test]
fn a_file_edited_after_the_read_is_not_served_by_a_new_host_and_the_rest_is() {
    let uses_helper = "import { said } from \"./lib/helper.mjs\";\nexport const description = \"Says.\";\nexport const inputSchema = { type: \"object\" };\nexport function run() { return { text: said }; }\n";
    let strict = "export const description = \"Takes n.\";\nexport const inputSchema = { type: \"object\", properties: { n: { type: \"number\", description: \"A number.\" } }, required: [\"n\"] };\nexport function run(a) { return { text: String(a.n) }; }\n";
    let inst = Instance::with_plugins(&[
        ("echo.mjs", ECHO),
        ("exits.mjs", EXITS),
        ("gone.mjs", ECHO),
        ("strict.mjs", strict),
        ("says.mjs", uses_helper),
        (
            "uses-echo.mjs",
            "import { run as echo } from \"./echo.mjs\";\nexport const description = \"Echoes through echo.\";\nexport const inputSchema = { type: \"object\" };\nexport function run(a, c) { return echo(a, c); }\n",
        ),
        (
            "requires-echo.mjs",
            "import { createRequire } from \"node:module\";\nconst require = createRequire(import.meta.url);\nexport const description = \"Requires echo in a call.\";\nexport const inputSchema = { type: \"object\" };\nexport function run() { return { text: typeof require(\"./echo.mjs\").run }; }\n",
        ),
    ]);
    std::fs::create_dir(inst.root.join("plugins/lib")).unwrap();
    inst.write_plugin("lib/helper.mjs", "export const said = \"as read\";\n");
    inst.write_plugin("toputil.js", "module.exports = { said: \"as read\" };\n");
    inst.write_plugin(
        "says-top.mjs",
        "import u from \"./toputil.js\";\nexport const description = \"Says.\";\nexport const inputSchema = { type: \"object\" };\nexport function run() { return { text: u.said }; }\n",
    );
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("echo", json!({})).1);
    assert_eq!(s.call("says", json!({})), ("as read".to_string(), false));
    // Saved after the last read: the running host serves it as read, and so does a new one, which
    // imports a changed file not at all rather than serve code nobody read.
    inst.write_plugin(
        "echo.mjs",
        "export const description = \"Echoes.\";\nexport const inputSchema = { type: \"object\" };\nexport function run() { return { text: \"edited\" }; }\n",
    );
    // A module a plugin imports is the plugin's code too: changed since the read, it is not imported
    // again (as it is, it would throw, or run code nobody read), and the plugin is refused, naming it.
    inst.write_plugin(
        "lib/helper.mjs",
        "export const said = \"x\";\nthrow new Error(\"half-edited\");\n",
    );
    std::fs::remove_file(inst.root.join("plugins/gone.mjs")).unwrap();
    inst.write_plugin("strict.mjs", &format!("{strict}// edited\n"));
    // What `ovai status` lists as changed since the read names the module too.
    let status = d.status().unwrap();
    assert!(
        status["stale"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("plugins/lib/helper.mjs"))),
        "{status}"
    );
    // A code file beside the tools that is no tool (a .js file) is a module of theirs too.
    inst.write_plugin("toputil.js", "module.exports = { said: \"edited\" };\n");
    let host = d.host_pid();
    let (text, refused) = s.call("exits", json!({}));
    assert!(refused, "{text}");
    wait_gone(host);
    let (text, refused) = s.call("says-top", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.contains("it imports plugins/toputil.js, which changed after it was read"),
        "{text}"
    );
    assert_eq!(
        s.call("gone", json!({})),
        (
            "plugins/gone.mjs is not answering calls since a new plugin host was started: it was removed (or cannot be read) since it was read, so a new host could not import it. Run `ovai check` and `ovai restart` to see and serve it as it is now.".to_string(),
            true
        )
    );
    let changed = "plugins/echo.mjs is not answering calls since a new plugin host was started: it changed after it was read, and a new host imports only what was read. Run `ovai check` and `ovai restart` to see and serve it as it is now.";
    assert_eq!(s.call("echo", json!({})), (changed.to_string(), true));
    // Not the tool's refusal, nor its arguments': its code never ran (helper-99).
    let status = inst.cmd().arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("Calls to echo: 2 (1 refused: 1 not run or stopped (its file was not imported again, the server was stopping, or its seat changed)); p50 "),
        "{status}"
    );
    // Called with arguments that do not fit, it is told why it is not answering, not to call again
    // with arguments that fit: a call that fits would be refused all the same.
    let (text, refused) = s.call("strict", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.starts_with("plugins/strict.mjs is not answering calls since a new plugin host was started: it changed after it was read"),
        "{text}"
    );
    let (text, refused) = s.call("says", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.starts_with("plugins/says.mjs is not answering calls since a new plugin host was started: importing it again failed: Error: it imports plugins/lib/helper.mjs, which changed after it was read, and a new host imports only what was read"),
        "{text}"
    );
    // Nor through another tool's file that imports it: that one is refused, naming it.
    let (text, refused) = s.call("uses-echo", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.starts_with("plugins/uses-echo.mjs is not answering calls since a new plugin host was started: importing it again failed: Error: it imports plugins/echo.mjs, which changed after it was read, and a new host imports only what was read"),
        "{text}"
    );
    // Nor by require() in a call: refused in the same words, not Node's internal assertion.
    let (text, refused) = s.call("requires-echo", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.contains("Error: it requires plugins/echo.mjs, which changed after it was read, and a new host imports only what was read"),
        "{text}"
    );
    // The unchanged file was imported again and serves on (and ends the new host, as it is written to).
    let (text, _) = s.call("exits", json!({}));
    assert!(
        text.starts_with("plugins/exits.mjs did not answer"),
        "{text}"
    );
    assert!(
        inst.rows("host").contains(&changed.to_string()),
        "{:?}",
        inst.rows("host")
    );
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn a_host_that_cannot_be_respawned_for_want_of_descriptors_comes_back_once_there_are_some() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let limit = 64;
    let mut d = Daemon::start_with(&inst, &[], Some(limit));
    assert!(
        inst.rows("server").iter().any(|r| r.starts_with(
            "maxConnections is 512, but this daemon may open only 64 file descriptors"
        )),
        "{:?}",
        inst.rows("server")
    );
    let host = d.host_pid();
    // Sessions take the daemon's descriptors until one or two are left.
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let mut held = Vec::new();
    while open_fds(d.pid()) < limit as usize - 2 {
        let mut sock = ovai::client::connect(&ovai_inst).unwrap();
        ovai::client::hello_seat(&ovai_inst, &mut sock, &inst.secret("lead"), PATIENCE).unwrap();
        held.push(sock);
    }
    signal(host, libc::SIGKILL);
    wait_until("the respawn to be put off", || {
        inst.rows("host")
            .iter()
            .any(|r| r.starts_with("A new plugin host could not be started for now"))
            .then_some(())
    });
    held.truncate(held.len().saturating_sub(10));
    // Not a crash loop, not down: the host comes back, and a call goes through.
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "back": true })),
        (r#"{"back":true}"#.to_string(), false)
    );
    let status = d.status().unwrap();
    assert!(status["host"]["down"].is_null(), "{status}");
    assert!(d.is_running());
    drop(held);
}

#[test]
fn a_plugin_that_ends_the_host_from_a_timer_is_named_in_the_row() {
    // No call is in flight when these end the host, so only the host's last words can say who did.
    let timer = |how: &str| {
        format!(
            "export const description = 'Ends the host later.';\nexport const inputSchema = {{ type: 'object' }};\n\
             export function run() {{\n  setTimeout(() => {how}, 20);\n  return {{ text: 'armed' }};\n}}\n"
        )
    };
    let inst = Instance::with_plugins(&[
        ("kills.mjs", &timer("process.kill(process.pid, 'SIGKILL')")),
        ("leaves.mjs", &timer("process.reallyExit(7)")),
        ("echo.mjs", ECHO),
    ]);
    let mut d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for (tool, how, exit) in [
        ("kills", "process.kill(PID, SIGKILL)", "signal SIGKILL"),
        ("leaves", "process.reallyExit(7)", "exit code 7"),
    ] {
        let host = d.host_pid();
        let before = inst.rows("host").len();
        assert_eq!(s.call(tool, json!({})), ("armed".to_string(), false));
        let row = wait_until("the host's end to be written", || {
            inst.rows("host")
                .into_iter()
                .skip(before)
                .find(|r| r.starts_with("The plugin host (pid "))
        });
        // In a box the host's own pid is the box's; the row names the pid the daemon knows.
        let own = row
            .split("process.kill(")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .unwrap_or("PID")
            .to_string();
        let how = how.replace("PID", &own);
        assert!(
            row.starts_with(&format!(
                "The plugin host (pid {host}) stopped ({exit}) with no call in flight. A new plugin host is being started. A plugin ended it with {how} (at plugins/{tool}.mjs:4:"
            )),
            "{row}"
        );
        assert_eq!(
            s.call("echo", json!({ "n": 1 })),
            (r#"{"n":1}"#.to_string(), false)
        );
    }
    assert!(d.is_running());
    // Each ended a host that had run a call of its own: the end may be the call's doing, so the file is
    // imported by the next host as before, and called again.
    let host = inst.rows("host");
    assert!(
        !host
            .iter()
            .any(|r| r.contains("is not answering calls since")),
        "{host:#?}"
    );
    assert_eq!(s.call("leaves", json!({})), ("armed".to_string(), false));
}

/// A tool that minds its own business, beside `evil.mjs`, which tries to get it named as the file that
/// ended the host.
const VICTIM: &str = "export const description = 'Minds its own business.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'still here' }; }\n";

/// Calls evil (which arms the host's end), waits for the next host, and checks victim is served there
/// and named in no host row.
fn victim_is_not_blamed(inst: &Instance) {
    let d = inst.start();
    let host = d.host_pid();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("evil", json!({})), ("armed".to_string(), false));
    wait_until("a new host", || {
        let now = d.status()?["host"]["pid"].as_u64()?;
        (now != u64::from(host) && now != 0).then_some(())
    });
    assert_eq!(
        s.call("victim", json!({})),
        ("still here".to_string(), false)
    );
    let rows = inst.rows("host");
    assert!(
        !rows.iter().any(|r| r.contains("plugins/victim.mjs")),
        "{rows:#?}"
    );
}

/// A plugin that freezes `Error.prepareStackTrace` to a stack naming another file, then ends the host,
/// gets no other file left out: the place comes from V8's call sites or not at all. Nor do the host's
/// words, printed by a plugin from a promise job (no file on its stack), read as its last words.
#[test]
fn a_forged_stack_cannot_get_another_file_left_out() {
    let inst = Instance::with_plugins(&[
        ("victim.mjs", VICTIM),
        (
            "evil.mjs",
            "export const description = 'Blames another.';\nexport const inputSchema = { type: 'object' };\n\
             export function run() {\n  const other = new URL('./victim.mjs', import.meta.url).href;\n\
             Object.defineProperty(Error, 'prepareStackTrace', { value: () => 'Error: x\\n    at f (' + other + ':1:1)', writable: false, configurable: false });\n\
             Promise.resolve('ovai host: a plugin ended the plugin host with process.abort() (at plugins/victim.mjs:1:1)').then(console.error);\n\
             setTimeout(() => process.abort(), 20);\n  return { text: 'armed' };\n}\n",
        ),
    ]);
    victim_is_not_blamed(&inst);
}

/// The host's words, written to fd 2 by a plugin that then has the host killed from outside (so the
/// host says nothing itself), are not quoted as its last words: they would blame another file.
#[test]
fn the_hosts_words_written_by_a_plugin_are_no_last_words() {
    let inst = Instance::with_plugins(&[
        ("victim.mjs", VICTIM),
        (
            "evil.mjs",
            "import { execSync } from 'node:child_process';\nimport { writeSync } from 'node:fs';\n\
             export const description = 'Frames another.';\nexport const inputSchema = { type: 'object' };\n\
             export function run() {\n\
             writeSync(2, 'ovai host: a plugin ended the plugin host with process.reallyExit(1) (at plugins/victim.mjs:1:1)\\n');\n\
             setTimeout(() => execSync('kill -9 ' + process.pid), 20);\n  return { text: 'armed' };\n}\n",
        ),
    ]);
    victim_is_not_blamed(&inst);
}

/// A plugin's own loader hook can serve code under another file's URL with a query: that code ending
/// the host gets no file left out.
#[test]
fn code_served_under_another_files_url_cannot_get_it_left_out() {
    let inst = Instance::with_plugins(&[
        ("victim.mjs", VICTIM),
        (
            "evil.mjs",
            "import { register } from 'node:module';\nexport const description = 'Frames another.';\nexport const inputSchema = { type: 'object' };\n\
             export async function run() {\n\
               const victim = new URL('./victim.mjs', import.meta.url).href;\n\
               const hook = 'export async function load(url, ctx, next) { if (url.includes(\"?framed\")) return { format: \"module\", source: \"setTimeout(function t() { process.abort(); }, 50); export {};\", shortCircuit: true }; return next(url, ctx); }';\n\
               register('data:text/javascript,' + encodeURIComponent(hook));\n\
               await import(victim + '?framed');\n\
               return { text: 'armed' };\n}\n",
        ),
    ]);
    victim_is_not_blamed(&inst);
}

#[test]
fn an_answer_made_in_the_turn_a_plugin_ends_the_host_reaches_its_caller() {
    // The call answers, and in the same turn (a microtask) ends the host: the host writes what it holds
    // before it says who ended it.
    let soon = "export const description = 'Ends the host once it has answered.';\nexport const inputSchema = { type: 'object' };\nexport function run() { queueMicrotask(() => process.reallyExit(4)); return { text: 'done first' }; }\n";
    let inst = Instance::with_plugins(&[("soon.mjs", soon), ("echo.mjs", ECHO)]);
    let d = inst.start();
    let host = d.host_pid();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("soon", json!({})), ("done first".to_string(), false));
    wait_until("the host to end", || (!process_alive(host)).then_some(()));
    assert_eq!(s.call("echo", json!({})), ("{}".to_string(), false));
    // It had run a call of its own: it is served again.
    assert_eq!(s.call("soon", json!({})), ("done first".to_string(), false));
}

#[test]
fn a_call_that_ends_the_host_through_another_files_helper_leaves_neither_out_and_every_call_is_told()
 {
    // a's call ends the host through a helper util exports, while waits' call is in flight: a call of
    // a file on the stack ran, so nothing is left out, and both callers are told where it ended.
    let util = "export function die() { process.reallyExit(6); }\nexport const description = 'Has a helper.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'util' }; }\n";
    let a = "import { die } from './util.mjs';\nexport const description = 'Calls it.';\nexport const inputSchema = { type: 'object' };\nexport function run() { die(); }\n";
    let inst = Instance::with_plugins(&[("a.mjs", a), ("util.mjs", util), ("waits.mjs", WAITS)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let waits = s.send_request("tools/call", json!({ "name": "waits", "arguments": {} }));
    let (text, refused) = s.call("a", json!({}));
    let ended = "the plugin host stopped (exit code 6), ended by a plugin at plugins/util.mjs:1:";
    assert!(
        refused && text.starts_with(&format!("plugins/a.mjs did not answer: {ended}")),
        "{text}"
    );
    let (other, refused) = text_of(&s.response(waits));
    assert!(
        refused && other.starts_with(&format!("plugins/waits.mjs did not answer: {ended}")),
        "{other}"
    );
    let host = inst.host_rows_after_respawn();
    assert!(
        !host
            .iter()
            .any(|r| r.contains("is not answering calls since")),
        "{host:#?}"
    );
    assert_eq!(s.call("util", json!({})), ("util".to_string(), false));
}

/// Starts `inst`: the second host row once a new host is up must start with `left_out`, and `tool`
/// still answer `answer` there.
fn left_out_and_the_rest_served(inst: &Instance, left_out: &str, tool: &str, answer: &str) {
    let _d = inst.start();
    let host = inst.host_rows_after_respawn();
    assert!(host[1].starts_with(left_out), "{host:#?}");
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call(tool, json!({})), (answer.to_string(), false));
}

#[test]
fn code_a_plugin_evaluates_under_another_files_name_does_not_get_that_file_left_out() {
    // g ends the host from code it evaluates with a sourceURL naming b: the host reads its stack from
    // V8's call sites and passes over evaluated code, so g is the file named.
    let inst = Instance::with_plugins(&[
        ("b.mjs", ECHO),
        (
            "g.mjs",
            "setTimeout(() => (0, eval)('process.abort()\\n//# sourceURL=' + new URL('./b.mjs', import.meta.url)), 1500);\nexport const description = 'Frames b.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'g' }; }\n",
        ),
    ]);
    left_out_and_the_rest_served(
        &inst,
        "plugins/g.mjs is not answering calls since a new plugin host was started: it ended a plugin host (",
        "b",
        "{}",
    );
}

#[test]
fn the_file_whose_code_ends_the_host_is_left_out_not_the_scheduler_that_called_it() {
    // sched exports a scheduler; spinner has it call, at import, a function of spinner's that ends the
    // host. Both are on the stack; spinner's code did it, and spinner is the one left out.
    let inst = Instance::with_plugins(&[
        (
            "sched.mjs",
            "export function later(f, ms) { setTimeout(() => f(), ms); }\nexport const description = 'Schedules.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'sched' }; }\n",
        ),
        (
            "spinner.mjs",
            "import { later } from './sched.mjs';\nlater(function boom() { process.reallyExit(5); }, 1500);\nexport const description = 'Ends it.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'spinner' }; }\n",
        ),
    ]);
    left_out_and_the_rest_served(
        &inst,
        "plugins/spinner.mjs is not answering calls since a new plugin host was started: it ended a plugin host (exit code 5) before any call of its own ran there (at plugins/spinner.mjs:2:",
        "sched",
        "sched",
    );
}

#[test]
fn a_plugin_whose_calls_end_the_host_again_and_again_is_left_out_before_every_tool_goes_down() {
    // Each call of a ends the host a moment after it answered: the third time it is named, the next host
    // does not import it, and the other tools stay up.
    let a = "export const description = 'Ends the host after each call.';\nexport const inputSchema = { type: 'object' };\nexport function run() { setTimeout(() => process.reallyExit(3), 50); return { text: 'armed' }; }\n";
    let inst = Instance::with_plugins(&[("a.mjs", a), ("echo.mjs", ECHO)]);
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for _ in 0..3 {
        let host = d.host_pid();
        assert_eq!(s.call("a", json!({})), ("armed".to_string(), false));
        wait_until("the host to end", || (!process_alive(host)).then_some(()));
        // The next host: a call made before the daemon has seen the end goes to the one that ended.
        wait_until("a new plugin host", || {
            d.status()
                .and_then(|s| s["host"]["pid"].as_u64())
                .filter(|pid| *pid != u64::from(host))
        });
        assert_eq!(s.call("echo", json!({})), ("{}".to_string(), false));
    }
    let left = "plugins/a.mjs is not answering calls since a new plugin host was started: it ended or held the plugin host 3 times within 600 s, the last at plugins/a.mjs:3:";
    let (text, refused) = s.call("a", json!({}));
    assert!(refused && text.starts_with(left), "{text}");
    assert!(
        text.ends_with("; its calls would go on taking every tool down with them. Fix it, then run `ovai restart`, which serves it again. `ovai check` may pass it as it is: it only imports the file, and runs no call and waits for no timer."),
        "{text}"
    );
    assert_eq!(s.call("echo", json!({})), ("{}".to_string(), false));
}

#[test]
fn a_plugin_that_froze_error_does_not_hide_which_file_ended_the_host() {
    // Hardening libraries freeze Error: the host reads the call sites in a realm of its own all the same.
    let inst = Instance::with_plugins(&[
        (
            "a-harden.mjs",
            "Object.freeze(Error);\nexport const description = 'Hardens.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'hard' }; }\n",
        ),
        (
            "b-timer.mjs",
            "setTimeout(() => process.reallyExit(7), 1500);\nexport const description = 'Ends it.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'b' }; }\n",
        ),
    ]);
    left_out_and_the_rest_served(
        &inst,
        "plugins/b-timer.mjs is not answering calls since a new plugin host was started: it ended a plugin host (exit code 7) before any call of its own ran there (at plugins/b-timer.mjs:1:",
        "a-harden",
        "hard",
    );
}

#[test]
fn a_plugin_that_ends_the_host_from_a_timer_is_left_out_of_the_next_and_the_rest_served() {
    // It imports cleanly, so every new host would import it again, and it ends each with no call in
    // flight: the host names it, and the next host serves the rest without it.
    let inst = Instance::with_plugins(&[
        (
            "timer.mjs",
            "setTimeout(() => process.reallyExit(9), 1500);\nexport const description = 'Ends its host.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'x' }; }\n",
        ),
        ("echo.mjs", ECHO),
    ]);
    let d = inst.start();
    let host = inst.host_rows_after_respawn();
    assert!(
        host[0].starts_with("The plugin host (pid ")
            && host[0].contains(") stopped (exit code 9) with no call in flight. A new plugin host is being started."),
        "{host:#?}"
    );
    let left = "plugins/timer.mjs is not answering calls since a new plugin host was started: it ended a plugin host (exit code 9) before any call of its own ran there (at plugins/timer.mjs:1:";
    assert!(host[1].starts_with(left), "{host:#?}");
    assert!(
        host[1].ends_with(
            "): code its import runs, which would end every new host. Fix it, then run `ovai restart`, which serves it again. `ovai check` may pass it as it is: it only imports the file, and runs no call and waits for no timer."
        ),
        "{host:#?}"
    );
    assert!(
        host[2].starts_with("A new plugin host (pid ")
            && host[2].ends_with(") was started, serving the same files but the one named above."),
        "{host:#?}"
    );
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("echo", json!({})), ("{}".to_string(), false));
    let (text, refused) = s.call("timer", json!({}));
    assert!(refused && text.starts_with(left), "{text}");
    // Status says so too, as the callers read it.
    let status = d.status().unwrap();
    assert_eq!(status["host"]["notAnswering"], json!([text]), "{status}");
    let out = inst.cmd().arg("status").output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&text),
        "{out:?}"
    );
}

#[test]
fn a_plugin_that_ends_every_host_from_a_module_it_imports_makes_a_crash_loop() {
    // The place is in plugins/lib/, which no file's name is: nothing says which file to leave out, so
    // every new host imports it again, and eight ends within the window leave the host down.
    let inst = Instance::with_plugins(&[
        (
            "timer.mjs",
            "import './lib/ends.mjs';\nexport const description = 'Ends its host.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'x' }; }\n",
        ),
        ("echo.mjs", ECHO),
    ]);
    std::fs::create_dir_all(inst.root.join("plugins/lib")).unwrap();
    std::fs::write(
        inst.root.join("plugins/lib/ends.mjs"),
        "setTimeout(() => process.reallyExit(9), 1000);\n",
    )
    .unwrap();
    let d = inst.start();
    let down = wait_until("the crash loop", || {
        inst.rows("host")
            .into_iter()
            .find(|r| r.starts_with("The plugin host stays down: "))
    });
    assert!(
        down.starts_with("The plugin host stays down: it stopped 8 times within 600 s, the last time from plugins/lib/ends.mjs:1:")
            && down.ends_with(". Fix the plugin that ends it, then run `ovai restart`."),
        "{down}"
    );
    let stopped: Vec<String> = inst
        .rows("host")
        .into_iter()
        .filter(|r| r.starts_with("The plugin host (pid "))
        .collect();
    assert_eq!(stopped.len(), 8, "{stopped:#?}");
    assert!(
        stopped.iter().all(|r| r.contains("with no call in flight")
            && r.contains(
                "A plugin ended it with process.reallyExit(9) (at plugins/lib/ends.mjs:1:"
            )),
        "{stopped:#?}"
    );
    let mut s = inst.session("lead");
    s.initialize();
    let (text, refused) = s.call("echo", json!({}));
    assert!(
        refused
            && text.contains(
                "the plugin host stopped 8 times within 600 s (the last time from plugins/lib/ends.mjs:1:"
            )
            && text.contains("stays down until `ovai restart`"),
        "{text}"
    );
    drop(d);
}

#[test]
fn a_daemon_stopped_while_a_new_host_imports_does_not_wait_for_the_import() {
    // Once it has ended a host, the file's import never settles: the new host would take the whole
    // import timeout (five minutes here) to give up on it.
    let crashes = r#"
import fs from "node:fs";
if (fs.existsSync(new URL("./crashed", import.meta.url))) await new Promise(() => {});
export const description = "Ends the host, and never imports again.";
export const inputSchema = { type: "object" };
export function run() { fs.writeFileSync(new URL("./crashed", import.meta.url), "x"); process.kill(process.pid, "SIGKILL"); }
"#;
    let inst = Instance::with_plugins(&[("crashes.mjs", crashes), ("echo.mjs", ECHO)]);
    inst.set_config(json!({ "importTimeoutSeconds": 300 }));
    let mut d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let (text, refused) = s.call("crashes", json!({}));
    assert!(refused, "{text}");
    wait_until("the new host to be importing", || {
        let status = d.status()?;
        status["host"]["pid"].is_null().then_some(())
    });
    assert!(d.is_running());
    let status = d.stop();
    assert!(status.success(), "{status:?}");
    let host = inst.rows("host");
    assert!(
        !host.iter().any(|r| r.starts_with("A new plugin host")),
        "{host:#?}"
    );
}

/// A plugin's own `uncaughtException` handler that logs and exits (a common Node pattern) ends the host
/// with Node's crash print, whose last line (`Node.js v20.…`) says nothing: the row gives the error's own
/// line and the place in plugins/ its stack names.
#[test]
fn a_host_ended_by_a_plugins_own_fatal_handler_is_said_by_its_error() {
    let inst = Instance::with_plugins(&[
        (
            "own-handler.mjs",
            "export const description = 'Installs its own handler.';\nexport const inputSchema = { type: 'object' };\n\
             process.on('uncaughtException', (e) => { console.error('fatal:', e.message); process.exit(1); });\n\
             export function run() { setTimeout(() => { throw new Error('boom in timer'); }, 50); return { text: 'armed' }; }\n",
        ),
        ("echo.mjs", ECHO),
    ]);
    let mut d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let before = inst.rows("host").len();
    assert_eq!(
        s.call("own-handler", json!({})),
        ("armed".to_string(), false)
    );
    let row = wait_until("the host's end to be written", || {
        inst.rows("host")
            .into_iter()
            .skip(before)
            .find(|r| r.starts_with("The plugin host (pid "))
    });
    let words = row.split("Its last words on stderr: ").nth(1).unwrap_or("");
    assert!(!words.starts_with("Node.js v"), "{row}");
    assert!(words.contains("process.exit(1)"), "{row}");
    assert!(words.contains("(at plugins/own-handler.mjs:3:"), "{row}");
    assert_eq!(
        s.call("echo", json!({ "n": 1 })),
        (r#"{"n":1}"#.to_string(), false)
    );
    assert!(d.is_running());
}

/// A plugin whose processes end the host after its call was answered (no call in flight, no place in
/// plugins/ said) is the one to look at: each host's row names the last call it was sent, and the crash
/// loop's row names those calls' files, where "Fix the plugin that ends it" named nothing.
#[test]
fn a_crash_loop_with_no_place_said_names_the_last_calls() {
    // Each call waits for the host the last end left starting.
    let inst = Instance::with_plugins(&[
        (
            "spawns.mjs",
            "import { spawn } from 'node:child_process';\nexport const description = 'Starts a process that ends the host.';\n\
             export const inputSchema = { type: 'object' };\n\
             export function run() { spawn('sh', ['-c', 'sleep 0.2; kill -9 $PPID'], { stdio: 'ignore' }); return { text: 'started' }; }\n",
        ),
        ("echo.mjs", ECHO),
    ]);
    let mut d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for i in 0..8 {
        let before = inst
            .rows("host")
            .iter()
            .filter(|r| r.starts_with("The plugin host (pid "))
            .count();
        let (text, _) = s.call("spawns", json!({}));
        assert_eq!(text, "started", "{i}");
        let row = wait_until("the host's end", || {
            inst.rows("host")
                .into_iter()
                .filter(|r| r.starts_with("The plugin host (pid "))
                .nth(before)
        });
        assert!(
            row.contains("with no call in flight")
                && row.ends_with(" The last call it was sent was to plugins/spawns.mjs."),
            "{row}"
        );
    }
    let down = wait_until("the crash loop", || {
        inst.rows("host")
            .into_iter()
            .find(|r| r.starts_with("The plugin host stays down: "))
    });
    assert_eq!(
        down,
        "The plugin host stays down: it stopped 8 times within 600 s. Fix the plugin that ends it (no place was said; the last calls the ended hosts were sent were to plugins/spawns.mjs), then run `ovai restart`."
    );
    assert!(d.is_running());
}

/// `.ovai/host.mjs` damaged in place (emptied, the same file) is written again by `ovai restart`, as
/// the refusals ask: before, every new host failed from it until the server itself was started again.
#[test]
fn a_host_script_damaged_in_place_is_mended_by_a_restart() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let d = inst.start();
    let shim = inst.root.join(".ovai/host.mjs");
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&shim)
        .unwrap();
    let host = d.host_pid();
    signal(host, libc::SIGKILL);
    wait_gone(host);
    inst.cmd().arg("restart").assert().success();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "n": 1 })),
        (r#"{"n":1}"#.to_string(), false)
    );
    assert!(std::fs::metadata(&shim).unwrap().len() > 1000);
}

/// A package in plugins/node_modules changed after the read is refused by a new host to what imports
/// it, as a module of plugins/' folders is: it ran as changed while the log said the same files were
/// served, and `ovai status` said plugins/ was as read (helper-78). A package's own require()s too.
#[test]
fn a_package_changed_after_the_read_is_refused_by_a_new_host() {
    let inst = Instance::new();
    let pkg = inst.root.join("plugins/node_modules/fake");
    std::fs::create_dir_all(pkg.join("lib")).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{ "name": "fake", "main": "index.js" }"#,
    )
    .unwrap();
    std::fs::write(
        pkg.join("index.js"),
        "module.exports = require('./lib/word.js');\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("lib/word.js"),
        "module.exports = { word: 'v1' };\n",
    )
    .unwrap();
    inst.write_plugin(
        "fake-word.mjs",
        "import fake from 'fake';\nexport const description = 'd';\nexport const inputSchema = { type: 'object' };\n\
         export function run() { return { text: fake.word }; }\n",
    );
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("fake-word", json!({})), ("v1".to_string(), false));
    std::fs::write(
        pkg.join("lib/word.js"),
        "module.exports = { word: 'PATCHED' };\n",
    )
    .unwrap();
    let status = d.status().unwrap();
    assert!(
        status["stale"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("plugins/node_modules/fake/lib/word.js"))),
        "{status}"
    );
    let host = d.host_pid();
    signal(host, libc::SIGKILL);
    wait_gone(host);
    // Called once the daemon has its new host: a call written as the old one died is refused for that.
    wait_until("a new host", || (d.host_pid() != host).then_some(()));
    let (text, refused) = s.call("fake-word", json!({}));
    assert!(refused, "{text}");
    assert!(
        text.contains(
            "it requires plugins/node_modules/fake/lib/word.js, which changed after it was read"
        ),
        "{text}"
    );
    inst.cmd().arg("restart").assert().success();
    assert_eq!(
        s.call("fake-word", json!({})),
        ("PATCHED".to_string(), false)
    );
    // An install that changes many files: `ovai status` names a few.
    for n in 0..12 {
        std::fs::write(pkg.join(format!("lib/m{n:02}.js")), "").unwrap();
    }
    inst.cmd().arg("restart").assert().success();
    for n in 0..12 {
        std::fs::write(pkg.join(format!("lib/m{n:02}.js")), "module.exports = 1;\n").unwrap();
    }
    inst.cmd().arg("status").assert().success().stdout(predicates::str::contains(
        "plugins/node_modules/fake/lib/m09.js and 2 more (`ovai status --json` lists them all).",
    ));
    // A package pointed at a file that was not there at the read (its `main`, a JSON file): refused too.
    inst.cmd().arg("restart").assert().success();
    std::fs::write(pkg.join("data.json"), r#"{ "word": "from a new file" }"#).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{ "name": "fake", "main": "data.json" }"#,
    )
    .unwrap();
    let host = d.host_pid();
    signal(host, libc::SIGKILL);
    wait_gone(host);
    wait_until("a new host", || (d.host_pid() != host).then_some(()));
    let (text, refused) = s.call("fake-word", json!({}));
    assert!(
        refused && text.contains("plugins/node_modules/fake/data.json"),
        "{text}"
    );
}
