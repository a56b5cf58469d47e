//! `context.progress(message, { progress, total })`: reaches a caller that asked for progress as
//! `notifications/progress`, paced (the latest report wins), never after the answer; a caller that did not
//! ask hears nothing.

mod common;
use common::*;
use serde_json::{Value, json};

const REPORTER: &str = r#"
export const description = "Reports progress while it works.";
export const inputSchema = { type: "object" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run(args, { progress }) {
  progress("starting", { progress: 0, total: 3 });
  for (let i = 1; i <= 100000; i++) progress(`step ${i}`, { progress: 1 + i / 100000, total: 3 });
  await sleep(400);
  progress("almost", { progress: 2.5, total: 3 });
  await sleep(400);
  return { text: "done" };
}
"#;

const EAGER: &str = r#"
export const description = "Reports after it has answered.";
export const inputSchema = { type: "object" };
export function run(args, { progress }) {
  setTimeout(() => progress("too late"), 50);
  for (let i = 0; i < 1000; i++) progress(`now ${i}`);
  return { text: "answered" };
}
"#;

/// Reports every 30 ms, and answers right after its last report.
const STEADY: &str = r#"
export const description = "Reports steadily, then answers at once.";
export const inputSchema = { type: "object" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run(args, { progress }) {
  for (let i = 1; i <= 8; i++) {
    progress(`step ${i}`, { progress: i, total: 8 });
    if (i < 8) await sleep(30);
  }
  return { text: "done" };
}
"#;

fn is_progress(v: &Value) -> bool {
    v["method"] == "notifications/progress"
}

#[test]
fn progress_reaches_a_caller_that_asked_paced_and_before_the_answer() {
    let inst = Instance::with_plugins(&[("reporter.mjs", REPORTER), ("eager.mjs", EAGER)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let id = s.send_request(
        "tools/call",
        json!({ "name": "reporter", "arguments": {}, "_meta": { "progressToken": "p-1" } }),
    );
    let answer = s.response(id);
    assert_eq!(text_of(&answer), ("done".to_string(), false));
    // Everything the session was sent before the answer is in the backlog now, in order.
    let reports: Vec<Value> = s
        .backlog
        .iter()
        .filter(|v| is_progress(v))
        .cloned()
        .collect();
    let messages: Vec<&str> = reports
        .iter()
        .map(|r| r["params"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.first(), Some(&"starting"), "{reports:?}");
    assert_eq!(messages.last(), Some(&"almost"), "{reports:?}");
    // The loop may take longer than one pace on a slow machine: then a report made during it goes out
    // too, but only ever the latest one waiting, in order, and the loop's last report before "almost".
    let steps: Vec<u32> = messages[1..messages.len() - 1]
        .iter()
        .map(|m| {
            m.strip_prefix("step ")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("only reports the plugin made are sent: {messages:?}"))
        })
        .collect();
    assert_eq!(steps.last(), Some(&100_000), "{messages:?}");
    assert!(steps.is_sorted(), "{messages:?}");
    assert!(
        messages.len() <= 100,
        "100,002 reports were paced: {messages:?}"
    );
    for r in &reports {
        assert_eq!(r["params"]["progressToken"], "p-1");
        assert_eq!(r["params"]["total"], 3.0);
    }
    assert_eq!(reports.last().unwrap()["params"]["progress"], 2.5);
    s.backlog.clear();

    // A report made after the answer (or while the answer is going out) never reaches the caller.
    let id = s.send_request(
        "tools/call",
        json!({ "name": "eager", "arguments": {}, "_meta": { "progressToken": 7 } }),
    );
    assert_eq!(text_of(&s.response(id)).0, "answered");
    // Paced: the first report, and the latest one held back, which goes out before the answer.
    let before: Vec<&Value> = s
        .backlog
        .iter()
        .filter(|v| is_progress(v))
        .map(|v| &v["params"]["message"])
        .collect();
    assert!(
        before.len() <= 2 && before.last().is_some_and(|m| *m == "now 999"),
        "{:?}",
        s.backlog
    );
    // The next exchange flushes anything the first could still have sent.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!s.call("index", json!({})).1);
    let late: Vec<&Value> = s
        .backlog
        .iter()
        .filter(|v| is_progress(v) && v["params"]["message"] == "too late")
        .collect();
    assert!(late.is_empty(), "{late:?}");
}

/// The last report before the answer reaches the caller, before the answer: held back by the pace, it
/// was dropped when the answer came, and a progress bar stopped short of its end.
#[test]
fn the_last_report_before_the_answer_is_not_lost() {
    let inst = Instance::with_plugins(&[("steady.mjs", STEADY)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let id = s.send_request(
        "tools/call",
        json!({ "name": "steady", "arguments": {}, "_meta": { "progressToken": "bar" } }),
    );
    assert_eq!(text_of(&s.response(id)), ("done".to_string(), false));
    let reports: Vec<&Value> = s.backlog.iter().filter(|v| is_progress(v)).collect();
    let last = reports.last().expect("reports before the answer");
    assert_eq!(last["params"]["message"], "step 8", "{reports:?}");
    assert_eq!(last["params"]["progress"], 8.0, "{reports:?}");
    assert_eq!(last["params"]["total"], 8.0, "{reports:?}");
    assert!(reports.len() <= 8, "{reports:?}");
}

#[test]
fn a_caller_without_a_progress_token_hears_no_progress() {
    let inst = Instance::with_plugins(&[("reporter.mjs", REPORTER)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("reporter", json!({})), ("done".to_string(), false));
    assert!(
        !s.backlog.iter().any(is_progress),
        "no token, no progress: {:?}",
        s.backlog
    );
}

#[test]
fn progress_that_falls_is_sent_growing() {
    let inst = Instance::with_plugins(&[(
        "falls.mjs",
        r#"
export const description = "Reports progress that falls.";
export const inputSchema = { type: "object" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run(args, { progress }) {
  for (const p of [1, -5, 3, 0, 5]) { progress(`at ${p}`, { progress: p }); await sleep(150); }
  return { text: "done" };
}
"#,
    )]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let id = s.send_request(
        "tools/call",
        json!({ "name": "falls", "arguments": {}, "_meta": { "progressToken": "t" } }),
    );
    assert_eq!(text_of(&s.response(id)).0, "done");
    let values: Vec<f64> = s
        .backlog
        .iter()
        .filter(|v| is_progress(v))
        .map(|v| v["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(values.len() >= 2, "{values:?}");
    assert!(
        values.windows(2).all(|w| w[1] > w[0]),
        "progress grows: {values:?}"
    );
}

/// A progress message is shown to a person on one line (a spinner, a status bar): its control characters,
/// line breaks and bidirectional overrides are escaped, as a description's are.
#[test]
fn a_progress_message_reaches_the_caller_escaped() {
    let inst = Instance::with_plugins(&[(
        "colours.mjs",
        r#"
export const description = "Reports progress in terminal colours.";
export const inputSchema = { type: "object" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run(args, { progress }) {
  progress("\x1b[2J\x1b[31mred\rline1\nline2\u202e", { progress: 1 });
  await sleep(300);
  return { text: "done" };
}
"#,
    )]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let id = s.send_request(
        "tools/call",
        json!({ "name": "colours", "arguments": {}, "_meta": { "progressToken": "c" } }),
    );
    assert_eq!(text_of(&s.response(id)).0, "done");
    let messages: Vec<String> = s
        .backlog
        .iter()
        .filter(|v| is_progress(v))
        .map(|v| v["params"]["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        messages,
        vec![r"\u{1b}[2J\u{1b}[31mred\rline1\nline2\u{202e}".to_string()]
    );
}

/// Spins synchronously (never yielding to its event loop) until the file `args.flag` exists.
const SPINS_AFTER_REPORTING: &str = r#"
import { existsSync } from "node:fs";
export const description = "Reports, then works without yielding until told to stop.";
export const inputSchema = { type: "object" };
export function run(args, { progress }) {
  progress("starting", { progress: 0, total: 1 });
  const until = Date.now() + 30000;
  while (!existsSync(args.flag) && Date.now() < until) {}
  return { text: existsSync(args.flag) ? "stopped" : "gave up waiting" };
}
"#;

#[test]
fn a_report_reaches_the_caller_while_the_plugin_is_still_busy() {
    let inst = Instance::with_plugins(&[("spin.mjs", SPINS_AFTER_REPORTING)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let flag = inst.root.join("stop-spinning");
    let id = s.send_request(
        "tools/call",
        json!({ "name": "spin", "arguments": { "flag": flag }, "_meta": { "progressToken": "busy" } }),
    );
    // The report was made before the plugin's long synchronous stretch: it must not wait for its end.
    let report = s.recv_where(|v| is_progress(v) || v["id"] == id);
    assert_eq!(
        report["params"]["message"], "starting",
        "no report reached the caller before the answer: {report}"
    );
    std::fs::write(&flag, "").unwrap();
    assert_eq!(text_of(&s.response(id)), ("stopped".to_string(), false));
}

/// A progress token is bounded as an id is: a long one is refused in words, before anything runs.
#[test]
fn a_progress_token_past_its_bound_is_refused_in_words() {
    let inst = Instance::with_plugins(&[("reporter.mjs", REPORTER)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let id = s.send_request(
        "tools/call",
        json!({ "name": "reporter", "arguments": {}, "_meta": { "progressToken": "p".repeat(2000) } }),
    );
    let answer = s.response(id);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains(
            "params._meta.progressToken is 2000 bytes long; a progress token is at most 1024 bytes"
        ),
        "{answer}"
    );
}

/// Reports a session leaves unread count against what it may leave unread (`sessionQueueBytes`), as its
/// answers do: past it they are dropped (a later report supersedes them), and every answer still comes.
#[test]
fn progress_a_session_does_not_read_is_dropped_and_no_answer_is() {
    const CHATTY: &str = r#"
import { writeFileSync } from "node:fs";
export const description = "Reports long progress for a while.";
export const inputSchema = { type: "object", properties: { n: { type: "integer" } } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run({ n }, { progress, root }) {
  const words = "w".repeat(1000);
  const until = Date.now() + 4000;
  for (let i = 0; Date.now() < until; i++) { progress(`${i} ${words}`, { progress: i }); await sleep(5); }
  writeFileSync(`${root}/work/done-${n}`, "");
  return { text: `done ${n}` };
}
"#;
    let inst = Instance::with_plugins(&[("chatty.mjs", CHATTY)]);
    inst.set_config(json!({ "sessionQueueBytes": 65536 }));
    let _d = inst.start();
    let ovai = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai).unwrap();
    ovai::client::hello_seat(&ovai, &mut sock, &inst.secret("lead"), PATIENCE).unwrap();
    let mut mcp =
        ovai::client::McpClient::new(std::io::BufReader::new(sock.try_clone().unwrap()), sock);
    mcp.initialize("tests").unwrap();
    let calls = 32;
    let ids: Vec<u64> = (0..calls)
        .map(|n| {
            mcp.send_request(
                "tools/call",
                json!({ "name": "chatty", "arguments": { "n": n }, "_meta": { "progressToken": n } }),
            )
            .unwrap()
        })
        .collect();
    // Nothing is read until every call has run to its end.
    wait_until("every call to run to its end", || {
        (0..calls)
            .all(|n| inst.root.join(format!("work/done-{n}")).exists())
            .then_some(())
    });
    let (mut answers, mut reported) = (0, 0usize);
    while answers < ids.len() {
        let v = mcp.next_message().unwrap();
        if is_progress(&v) {
            reported += v.to_string().len();
        } else if ids.contains(&v["id"].as_u64().unwrap_or(0)) {
            assert!(
                v["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("done "),
                "{v}"
            );
            answers += 1;
        }
    }
    // Each call reported about 400 KB over its four seconds, paced to about 40 KB: 1.3 MB in all, where the
    // session may leave 64 KB unread (and the socket holds a few hundred KB more).
    assert!(
        reported < 700_000,
        "{reported} bytes of progress were kept for a session that did not read"
    );
}

/// `progress` called as the MCP SDKs shape a report (`{ progress, total, message }`) or with bare
/// numbers reached the caller as the message "[object Object]" or "3" (helper-46): read for what it is.
/// One report a call, so no two are ever read together (the daemon passes on only the latest then).
#[test]
fn progress_given_in_the_sdks_shape_or_as_numbers_is_read_for_what_it_is() {
    let inst = Instance::with_plugins(&[(
        "shapes.mjs",
        r#"
export const description = "Reports progress the ways people write it.";
export const inputSchema = { type: "object" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run({ shape }, { progress }) {
  if (shape === "sdk") progress({ progress: 1, total: 10, message: "one of ten" });
  if (shape === "numbers") progress(3, 10);
  if (shape === "bare") progress({ progress: 5 });
  await sleep(100);
  return { text: "done" };
}
"#,
    )]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for (shape, want) in [
        (
            "sdk",
            json!({ "progressToken": "sdk", "progress": 1.0, "total": 10.0, "message": "one of ten" }),
        ),
        (
            "numbers",
            json!({ "progressToken": "numbers", "progress": 3.0, "total": 10.0 }),
        ),
        ("bare", json!({ "progressToken": "bare", "progress": 5.0 })),
    ] {
        s.backlog.clear();
        let id = s.send_request(
            "tools/call",
            json!({ "name": "shapes", "arguments": { "shape": shape }, "_meta": { "progressToken": shape } }),
        );
        assert_eq!(text_of(&s.response(id)).0, "done");
        let reports: Vec<Value> = s
            .backlog
            .iter()
            .filter(|v| is_progress(v))
            .map(|v| v["params"].clone())
            .collect();
        assert_eq!(reports, vec![want], "{shape}");
    }
}
