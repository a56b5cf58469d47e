//! A real Claude Code (the npm package, pinned by scripts/test) at a desk made by `ovai seat add`, against a
//! local stand-in for the Messages API: the plugin runs as that seat with no approval prompt and no
//! permission denial, a restart during a call lets it finish and offers the new tool on the next turn, and
//! a daemon killed during a call gives that call an `isError` answer while the next call succeeds.

mod common;
use common::messages_api::{MessagesApi, Step, result_text};
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Claude Code the tests run: OVAI_TEST_CLAUDE, else where scripts/test installs it.
fn claude_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("OVAI_TEST_CLAUDE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let path = cache.join("ovai-test-tools/claude/node_modules/.bin/claude");
    assert!(
        path.exists(),
        "Claude Code is not installed for the tests (looked for {}): scripts/test installs it with npm \
         (@anthropic-ai/claude-code, pinned) into that cache folder; run scripts/test, or set OVAI_TEST_CLAUDE \
         to a claude binary.",
        path.display()
    );
    path
}

const STAMP: &str = r#"
import { appendFileSync } from "node:fs";
export const description = "Notes who called it in calls.log, and says so.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run(args, { seat, role, root }) {
  appendFileSync(`${root}/work/calls.log`, `${seat} ${role}\n`);
  return { text: `stamp from ${seat}` };
}
"#;

/// Marks that it started, then waits for `gate.go` in the root before it answers.
const GATE: &str = r#"
import { existsSync, writeFileSync } from "node:fs";
export const description = "Waits at a gate the test opens.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run(args, { root }) {
  writeFileSync(`${root}/work/gate.started`, "");
  for (let i = 0; i < 3000 && !existsSync(`${root}/gate.go`); i++) await sleep(20);
  return { text: "through the gate" };
}
"#;

const FRESH: &str = r#"
export const description = "A tool that arrived with a restart.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run(args, { seat }) { return { text: `fresh for ${seat}` }; }
"#;

/// A headless Claude Code session at `desk`, with a HOME of its own and the stand-in as its API.
struct Claude {
    child: std::process::Child,
    home: tempfile::TempDir,
    stdout: PathBuf,
}

impl Claude {
    fn start(desk: &Path, api: &MessagesApi, prompt: &str) -> Self {
        let home = tempfile::tempdir_in("/tmp").unwrap();
        let stdout = home.path().join("claude.stdout");
        let child = Command::new(claude_binary())
            .args(["-p", prompt, "--output-format", "json"])
            .current_dir(desk)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("TERM", "dumb")
            .env("ANTHROPIC_BASE_URL", &api.url)
            .env("ANTHROPIC_API_KEY", "stand-in")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("ENABLE_TOOL_SEARCH", "false")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("Claude Code starts");
        Self {
            child,
            home,
            stdout,
        }
    }

    /// Waits for the session to end; its JSON result.
    fn finish(mut self) -> (Value, String) {
        let status = wait_exit(&mut self.child);
        let out = std::fs::read_to_string(&self.stdout).unwrap_or_default();
        assert!(status.success(), "Claude Code exited {status}: {out}");
        let result: Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("Claude Code's output is not JSON ({e}): {out}"));
        (result, self.mcp_log())
    }

    /// Everything Claude Code logged about its MCP servers.
    fn mcp_log(&self) -> String {
        let mut text = String::new();
        let mut dirs = vec![self.home.path().join(".cache/claude-cli-nodejs")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.to_string_lossy().contains("mcp-logs-openovai") {
                    text.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
                }
            }
        }
        text
    }
}

impl Drop for Claude {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn no_denials(result: &Value) {
    assert_eq!(
        result["permission_denials"],
        json!([]),
        "a desk made by `ovai seat add` needs no permission: {result}"
    );
}

#[test]
fn a_desk_made_by_seat_add_calls_a_plugin_with_no_prompt_and_no_denial() {
    let inst = Instance::with_plugins(&[("stamp.mjs", STAMP)]);
    inst.add_seat("w1");
    let _d = inst.start();
    let api = MessagesApi::start(vec![
        Step::Tool("mcp__openovai__stamp", json!({})),
        Step::Text("Stamped."),
    ]);
    let (result, log) = Claude::start(&inst.root.join("desks/w1"), &api, "Stamp, please.").finish();
    no_denials(&result);
    assert_eq!(result["result"], "Stamped.", "{result}");
    assert_eq!(
        std::fs::read_to_string(inst.root.join("work/calls.log")).unwrap(),
        "w1 Worker\n",
        "the plugin ran once, as the desk's seat"
    );
    let results = api.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(result_text(&results[0]), "stamp from w1");
    assert_ne!(results[0]["is_error"], true);
    assert!(
        api.tools_offered()[0].contains(&"mcp__openovai__stamp".to_string()),
        "{:?}",
        api.tools_offered()
    );
    assert!(!log.contains("omits required fields"), "{log}");
}

#[test]
fn a_restart_during_a_call_lets_it_finish_and_the_next_turn_is_offered_the_new_tool() {
    let inst = Instance::with_plugins(&[("gate.mjs", GATE)]);
    inst.add_seat("w1");
    let _d = inst.start();
    let api = MessagesApi::start(vec![
        Step::Tool("mcp__openovai__gate", json!({})),
        Step::Tool("mcp__openovai__fresh", json!({})),
        Step::Text("Both done."),
    ]);
    let claude = Claude::start(&inst.root.join("desks/w1"), &api, "Go through the gate.");
    wait_until("the gate plugin to start", || {
        inst.root.join("work/gate.started").exists().then_some(())
    });
    inst.write_plugin("fresh.mjs", FRESH);
    inst.cmd()
        .arg("restart")
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "This instance serves a tool of its own: fresh",
        ));
    // The gate opens once Claude Code has heard of the new list (it asks for it at once), so its next
    // turn is not raced against its own refresh.
    wait_until("Claude Code to hear that the tool list changed", || {
        claude
            .mcp_log()
            .contains("Received tools/list_changed notification")
            .then_some(())
    });
    std::fs::write(inst.root.join("gate.go"), "").unwrap();
    let (result, _) = claude.finish();
    no_denials(&result);
    let results = api.tool_results();
    assert_eq!(result_text(&results[0]), "through the gate", "{results:?}");
    assert_ne!(results[0]["is_error"], true);
    let offered = api.tools_offered();
    assert!(
        offered[1].contains(&"mcp__openovai__fresh".to_string()),
        "the turn after the restart is offered the new tool: {offered:?}"
    );
    assert_eq!(result_text(&results[1]), "fresh for w1", "{results:?}");
}

#[test]
fn a_daemon_killed_during_a_call_answers_it_as_an_error_and_the_next_call_succeeds() {
    let inst = Instance::with_plugins(&[("gate.mjs", GATE), ("stamp.mjs", STAMP)]);
    inst.add_seat("w1");
    let d = inst.start();
    let api = MessagesApi::start(vec![
        Step::Tool("mcp__openovai__gate", json!({})),
        Step::Tool("mcp__openovai__stamp", json!({})),
        Step::Text("Recovered."),
    ]);
    let claude = Claude::start(&inst.root.join("desks/w1"), &api, "Go through the gate.");
    wait_until("the gate plugin to start", || {
        inst.root.join("work/gate.started").exists().then_some(())
    });
    let pid = d.pid();
    signal(pid, libc::SIGKILL);
    drop(d);
    wait_gone(pid);
    let _d = inst.start();
    let (result, log) = claude.finish();
    no_denials(&result);
    let results = api.tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(
        result_text(&results[0])
            .contains("went away (it was stopped or it crashed) while this call was in flight"),
        "{results:?}"
    );
    assert_eq!(result_text(&results[1]), "stamp from w1");
    assert_ne!(results[1]["is_error"], true);
    assert!(
        !log.contains("omits required fields"),
        "the bridge's own answer has the negotiated revision's shape: {log}"
    );
}

/// A seat on another machine: `seat add --url` writes an HTTP desk, the desk is copied away from the
/// instance, and Claude Code there reaches the daemon over Streamable HTTP with the bearer token.
#[test]
fn a_remote_desk_copied_elsewhere_calls_over_http_with_no_prompt() {
    let inst = Instance::with_plugins(&[("stamp.mjs", STAMP)]);
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    let d = inst.start();
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    inst.cmd()
        .args(["seat", "add", "far", "--url", &url])
        .assert()
        .success();
    let elsewhere = tempfile::tempdir_in("/tmp").unwrap();
    let desk = elsewhere.path().join("far");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(inst.root.join("desks/far"))
        .arg(&desk)
        .status()
        .unwrap();
    assert!(copied.success());
    let api = MessagesApi::start(vec![
        Step::Tool("mcp__openovai__stamp", json!({})),
        Step::Text("Stamped from afar."),
    ]);
    let (result, log) = Claude::start(&desk, &api, "Stamp, please.").finish();
    no_denials(&result);
    assert_eq!(result["result"], "Stamped from afar.", "{result}\n{log}");
    assert_eq!(
        std::fs::read_to_string(inst.root.join("work/calls.log")).unwrap(),
        "far Worker\n"
    );
    let results = api.tool_results();
    assert_eq!(result_text(&results[0]), "stamp from far", "{results:?}");
}

/// Everything Claude Code wrote on `ovai mcp`'s stdin, through a tap put in the desk's `.mcp.json`.
fn tapped_session(inst: &Instance, seat: &str, script: Vec<Step>, prompt: &str) -> Vec<Value> {
    let desk = inst.root.join("desks").join(seat);
    let tap = inst.root.join("work/tap.sh");
    let lines = inst.root.join("work/tapped.jsonl");
    std::fs::write(
        &tap,
        "#!/bin/sh\ntee -a \"$OVAI_TAP\" | \"$OVAI_BIN\" mcp\n",
    )
    .unwrap();
    let mcp = desk.join(".mcp.json");
    let mut entry: Value = serde_json::from_str(&std::fs::read_to_string(&mcp).unwrap()).unwrap();
    let server = &mut entry["mcpServers"]["openovai"];
    server["command"] = json!("sh");
    server["args"] = json!([tap.display().to_string()]);
    server["env"]["OVAI_TAP"] = json!(lines.display().to_string());
    server["env"]["OVAI_BIN"] = json!(OVAI);
    std::fs::write(&mcp, entry.to_string()).unwrap();
    let api = MessagesApi::start(script);
    let (result, _) = Claude::start(&desk, &api, prompt).finish();
    no_denials(&result);
    std::fs::read_to_string(&lines)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A line with what changes from call to call taken out: its id, the tool, its arguments, Claude Code's
/// tool-use id and the progress token. What stays is its shape: its keys, their order, its `_meta`.
fn shape(line: &Value) -> String {
    let mut line = line.clone();
    line["id"] = json!(0);
    if line["method"] == "tools/call" {
        let params = &mut line["params"];
        params["name"] = json!("");
        params["arguments"] = json!({});
        let meta = &mut params["_meta"];
        meta["claudecode/toolUseId"] = json!("");
        meta["progressToken"] = json!(0);
    }
    line.to_string()
}

/// What the benchmark sends as Claude Code's lines (examples/bench/lines/) is what a real Claude Code
/// writes on `ovai mcp`'s stdin, read through a tap: its opening and its calls, each with its `_meta` and
/// its keys in its order. When Claude Code changes them, this fails, and the fixture is taken again.
#[test]
fn the_benchmark_sends_what_claude_code_writes() {
    let inst = Instance::with_plugins(&[("stamp.mjs", STAMP)]);
    inst.add_seat("w1");
    let _d = inst.start();
    let tapped = tapped_session(
        &inst,
        "w1",
        vec![
            Step::Tool("mcp__openovai__stamp", json!({})),
            Step::Tool("mcp__openovai__stamp", json!({})),
            Step::Text("Stamped."),
        ],
        "Stamp twice, please.",
    );
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/bench/lines/claude-code-2.1.328.jsonl"),
    )
    .unwrap();
    let fixture: Vec<Value> = fixture
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let opening = fixture.len() - 1;
    let tapped_shapes: Vec<String> = tapped.iter().map(shape).collect();
    let fixture_shapes: Vec<String> = fixture.iter().map(shape).collect();
    assert_eq!(
        tapped_shapes[..opening],
        fixture_shapes[..opening],
        "Claude Code opens its session otherwise now: {tapped:#?}"
    );
    let calls: Vec<&String> = tapped_shapes
        .iter()
        .filter(|s| s.contains(r#""method":"tools/call""#))
        .collect();
    assert_eq!(calls.len(), 2, "{tapped:#?}");
    for call in calls {
        assert_eq!(
            call, &fixture_shapes[opening],
            "Claude Code writes its calls otherwise now"
        );
    }
    // Its progress token is its request's id, as the benchmark writes it.
    for call in tapped.iter().filter(|l| l["method"] == "tools/call") {
        assert_eq!(
            call["params"]["_meta"]["progressToken"], call["id"],
            "{call}"
        );
    }
}

/// A call past 60 s at a URL desk: Claude Code gave up at 60 s ("The operation timed out."), and its
/// model never read ovai's words naming the file (helper-95). The desk's entry gives it ovai's backstop.
#[test]
fn a_call_past_a_minute_at_a_url_desk_gets_ovais_words() {
    const HANG: &str = "export const description = 'Never answers.';\nexport const inputSchema = { type: 'object', properties: {}, additionalProperties: false };\nexport function run() { return new Promise(() => {}); }\n";
    let inst = Instance::with_plugins(&[("hang.mjs", HANG)]);
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" }, "callTimeoutSeconds": 63 }));
    let d = inst.start();
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    inst.cmd()
        .args(["seat", "add", "far", "--url", &url])
        .assert()
        .success();
    let api = MessagesApi::start(vec![
        Step::Tool("mcp__openovai__hang", json!({})),
        Step::Text("Gave up."),
    ]);
    let mut claude = Claude::start(&inst.root.join("desks/far"), &api, "Run it, please.");
    // Past a minute, longer than the tests' usual patience.
    wait_until_for(
        "Claude Code to end",
        std::time::Duration::from_secs(120),
        || claude.child.try_wait().ok().flatten(),
    );
    let (result, log) = claude.finish();
    let results = api.tool_results();
    assert!(
        result_text(&results[0]).starts_with("plugins/hang.mjs did not answer in time"),
        "{results:?}\n{result}\n{log}"
    );
}
