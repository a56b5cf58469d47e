//! A real Gemini CLI, Codex CLI and opencode (the npm packages, pinned by scripts/test-tools), each started
//! headless in a desk exactly as `ovai seat add` left it (with the trust `ovai seat trust` writes in the
//! client's home where the client asks for it), over the socket and, from a desk made with `seat add
//! --url`, over Streamable HTTP: each is offered the plugin under its own name for it, calls it with no
//! approval prompt, and sends the plugin's answer back to its model; the plugin ran once, as that seat.
//! Each model is a stand-in on loopback: Gemini's generateContent, the OpenAI Responses API, and the
//! Messages API (which opencode speaks through its bundled @ai-sdk/anthropic provider).

mod common;
use common::gemini_api::{self, GeminiApi};
use common::messages_api::{self, MessagesApi, result_text};
use common::responses_api::{self, ResponsesApi, output_text};
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A client binary the tests run: `var`, else where scripts/test-tools installs it in its cache folder.
fn tool_binary(var: &str, in_cache: &str, what: &str, package: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    let cache = env_dir("OVAI_TEST_TOOLS")
        .or_else(|| env_dir("XDG_CACHE_HOME").map(|c| c.join("ovai-test-tools")))
        .or_else(|| env_dir("HOME").map(|h| h.join(".cache/ovai-test-tools")))
        .unwrap_or_else(|| PathBuf::from("/tmp/ovai-test-tools"));
    let path = cache.join(in_cache);
    assert!(
        path.exists(),
        "{what} is not installed for the tests (looked for {}): scripts/test installs it with npm ({package}, \
         pinned) into that cache folder; run scripts/test, or set {var} to its binary.",
        path.display()
    );
    path
}

fn gemini_binary() -> PathBuf {
    tool_binary(
        "OVAI_TEST_GEMINI",
        "gemini/node_modules/.bin/gemini",
        "Gemini CLI",
        "@google/gemini-cli",
    )
}

fn codex_binary() -> PathBuf {
    tool_binary(
        "OVAI_TEST_CODEX",
        "codex/node_modules/.bin/codex",
        "Codex CLI",
        "@openai/codex",
    )
}

fn opencode_binary() -> PathBuf {
    tool_binary(
        "OVAI_TEST_OPENCODE",
        "opencode/node_modules/.bin/opencode",
        "opencode",
        "opencode-ai",
    )
}

/// Notes the seat that called it under the instance's work/, and answers with a text no client makes up.
const STAMP: &str = r#"
import { appendFileSync } from "node:fs";
export const description = "Notes who called it in calls.log, and says so.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run(args, { seat, role, root }) {
  appendFileSync(`${root}/work/calls.log`, `${seat} ${role}\n`);
  return { text: `stamped by ${seat}, the plugin's own words` };
}
"#;

const PROMPT: &str = "Stamp, please.";
/// The model's last words, once the client sent the plugin's answer back.
const CLOSING: &str = "Stamped.";

fn stamp_answer(seat: &str) -> String {
    format!("stamped by {seat}, the plugin's own words")
}

#[derive(Clone, Copy)]
enum Reach {
    /// A desk `ovai seat add NAME` made: the client starts `ovai mcp`, which reaches the daemon's socket.
    Socket,
    /// A desk `ovai seat add NAME --url URL` made: the client speaks Streamable HTTP to `ovai serve`.
    Http,
}

/// An instance serving the stamp plugin, and a seat's desk as `ovai seat add` left it.
struct Desk {
    inst: Instance,
    daemon: Daemon,
    reach: Reach,
    seat: &'static str,
    path: PathBuf,
    /// What `seat add` printed.
    said: String,
}

impl Desk {
    fn new(reach: Reach) -> Self {
        Self::with(reach, &[("stamp.mjs", STAMP)], json!({}))
    }

    /// A desk of an instance serving `plugins`, with `config` in its openovai.json.
    fn with(reach: Reach, plugins: &[(&str, &str)], config: Value) -> Self {
        let inst = Instance::with_plugins(plugins);
        inst.set_config(config);
        let seat_add = |args: &[&str]| {
            let out = inst.cmd().args(args).assert().success();
            String::from_utf8(out.get_output().stdout.clone()).unwrap()
        };
        let (daemon, seat, said) = match reach {
            Reach::Socket => {
                let said = seat_add(&["seat", "add", "w1"]);
                (inst.start(), "w1", said)
            }
            Reach::Http => {
                inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
                let daemon = inst.start();
                let url = daemon.status().unwrap()["http"]
                    .as_str()
                    .expect("`ovai status --json` names the HTTP endpoint")
                    .to_string();
                let said = seat_add(&["seat", "add", "far", "--url", &url]);
                (daemon, "far", said)
            }
        };
        let path = inst.root.join("desks").join(seat);
        Self {
            inst,
            daemon,
            reach,
            seat,
            path,
            said,
        }
    }

    /// Runs the trust line `seat add` printed, `ovai seat trust NAME`, for the person whose home is `home`.
    fn trust(&self, home: &Path) {
        // A desk at a URL trusts on its own machine, with no --root; one here names this instance.
        let line = match self.reach {
            Reach::Socket => format!(" seat trust {} --root ", self.seat),
            Reach::Http => format!("`ovai seat trust {}` there", self.seat),
        };
        assert!(
            self.said.contains(&line),
            "`seat add` names the command that trusts the desk ({line}): {}",
            self.said
        );
        self.inst
            .cmd()
            .args(["seat", "trust", self.seat])
            .env("HOME", home)
            .env("CODEX_HOME", home.join(".codex"))
            .assert()
            .success();
    }

    /// The plugin ran once, as the desk's seat; and, over the socket, the bridge ended with its client.
    fn check_plugin_ran(&self, client: &Ran) {
        assert_eq!(
            std::fs::read_to_string(self.inst.root.join("work/calls.log")).unwrap_or_default(),
            format!("{} Worker\n", self.seat),
            "the plugin ran once, as the desk's seat; {client}"
        );
        if let Reach::Socket = self.reach {
            wait_until("the seat to show no session once its client ended", || {
                let status = self.daemon.status()?;
                let seat = status["seats"]
                    .as_array()?
                    .iter()
                    .find(|s| s["name"] == self.seat)?
                    .clone();
                (seat["sessions"] == 0).then_some(())
            });
        }
    }
}

/// A client running headless at a desk, in a process group of its own (its `ovai mcp` bridges with it),
/// with a HOME of its own; what it writes is kept in files there.
struct Client {
    name: &'static str,
    child: std::process::Child,
    home: tempfile::TempDir,
}

/// What a client wrote, once it ended well.
struct Ran {
    name: &'static str,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} wrote on stdout:\n{}\nand on stderr:\n{}",
            self.name, self.stdout, self.stderr
        )
    }
}

/// A HOME of the client's own, for the settings that are not ovai's (the stand-in model, no updates).
fn home() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ovai-home")
        .tempdir_in("/tmp")
        .unwrap()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

impl Client {
    fn start(
        name: &'static str,
        binary: PathBuf,
        args: &[&str],
        desk: &Desk,
        home: tempfile::TempDir,
        env: &[(&str, &str)],
    ) -> Self {
        use std::os::unix::process::CommandExt;
        let child = Command::new(binary)
            .args(args)
            .current_dir(&desk.path)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("TERM", "dumb")
            .envs(env.iter().copied())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(home.path().join("client.stdout")).unwrap())
            .stderr(std::fs::File::create(home.path().join("client.stderr")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        Self { name, child, home }
    }

    /// Waits for the client to end; what it wrote. It must end well.
    fn finish(mut self) -> Ran {
        // A client's run may wait out a limit of its own of a minute.
        let status = wait_until_for("the client to exit", 3 * PATIENCE, || {
            self.child.try_wait().ok().flatten()
        });
        let read =
            |file: &str| std::fs::read_to_string(self.home.path().join(file)).unwrap_or_default();
        let ran = Ran {
            name: self.name,
            stdout: read("client.stdout"),
            stderr: read("client.stderr"),
        };
        assert!(status.success(), "{} exited {status}; {ran}", self.name);
        ran
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // The whole group: the npm launcher, the client it starts, and the bridges that one started.
        // SAFETY: sending a signal to a process group has no memory effects on this process.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Gemini CLI: `gemini -p PROMPT --output-format json`, with the stand-in as its Gemini API.
fn gemini_calls_the_plugin(reach: Reach) {
    let desk = Desk::new(reach);
    let home = home();
    // Not ovai's: the API key as the way in (else "Invalid auth method selected."), and no update checks
    // or usage statistics.
    write(
        &home.path().join(".gemini/settings.json"),
        &json!({
            "security": { "auth": { "selectedType": "gemini-api-key" } },
            "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
            "privacy": { "usageStatisticsEnabled": false }
        })
        .to_string(),
    );
    desk.trust(home.path());
    // Gemini CLI offers its model every tool with a `wait_for_previous` of its own added, its system
    // prompt asks for it, and it sends it on to the server (helper-95: every call refused).
    let api = GeminiApi::start(vec![
        gemini_api::Step::Call("mcp_openovai_stamp", json!({ "wait_for_previous": true })),
        gemini_api::Step::Text(CLOSING),
    ]);
    let ran = Client::start(
        "Gemini CLI",
        gemini_binary(),
        &["-p", PROMPT, "--output-format", "json"],
        &desk,
        home,
        &[
            ("GOOGLE_GEMINI_BASE_URL", &api.url),
            ("GEMINI_API_KEY", "stand-in"),
        ],
    )
    .finish();
    let offered = api.tools_offered();
    assert!(
        offered
            .first()
            .is_some_and(|t| t.contains(&"mcp_openovai_stamp".to_string())),
        "the first turn is offered the plugin as mcp_openovai_stamp: {offered:?}; {ran}"
    );
    let responses = api.function_responses();
    assert_eq!(responses.len(), 1, "{responses:#?}; {ran}");
    let response = &responses[0];
    assert_eq!(response["name"], "mcp_openovai_stamp", "{response}");
    assert!(
        response["response"].get("error").is_none()
            && response["response"]["output"]
                .as_str()
                .is_some_and(|o| o.contains(&stamp_answer(desk.seat))),
        "Gemini CLI sent the plugin's answer back: {response}; {ran}"
    );
    let result: Value = serde_json::from_str(ran.stdout.trim())
        .unwrap_or_else(|e| panic!("Gemini CLI's output is not JSON ({e}); {ran}"));
    assert_eq!(result["response"], CLOSING, "{ran}");
    desk.check_plugin_ran(&ran);
}

/// Codex CLI: `codex exec --skip-git-repo-check PROMPT` (a desk is no git work tree), with the stand-in as
/// a provider of the Responses API in `$CODEX_HOME/config.toml`.
fn codex_calls_the_plugin(reach: Reach) {
    let desk = Desk::new(reach);
    let home = home();
    let api = ResponsesApi::start(vec![
        responses_api::Step::Call("mcp__openovai", "stamp", json!({})),
        responses_api::Step::Text(CLOSING),
    ]);
    // Not ovai's: the stand-in as the model's provider, no retries, no update check, no analytics. The
    // trust `ovai seat trust` writes is merged into this file.
    let codex_home = home.path().join(".codex");
    write(
        &codex_home.join("config.toml"),
        &format!(
            r#"model = "stand-in"
model_provider = "standin"
check_for_update_on_startup = false

[model_providers.standin]
name = "stand-in"
base_url = "{}/v1"
wire_api = "responses"
env_key = "STANDIN_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
"#,
            api.url
        ),
    );
    desk.trust(home.path());
    let codex_home = codex_home.display().to_string();
    let ran = Client::start(
        "Codex CLI",
        codex_binary(),
        &["exec", "--skip-git-repo-check", "--color", "never", PROMPT],
        &desk,
        home,
        &[("CODEX_HOME", &codex_home), ("STANDIN_API_KEY", "stand-in")],
    )
    .finish();
    let offered = api.tools_offered();
    assert!(
        offered
            .first()
            .is_some_and(|t| t.contains(&"mcp__openovai/stamp".to_string())),
        "the first turn is offered the plugin as stamp in the namespace mcp__openovai: {offered:?}; {ran}"
    );
    let outputs = api.outputs();
    assert_eq!(outputs.len(), 1, "{outputs:#?}; {ran}");
    assert!(
        output_text(&outputs[0]).contains(&stamp_answer(desk.seat)),
        "Codex sent the plugin's answer back: {}; {ran}",
        outputs[0]
    );
    assert_eq!(ran.stdout.trim(), CLOSING, "{ran}");
    desk.check_plugin_ran(&ran);
}

/// opencode: `opencode run --title T --format json PROMPT`, with the stand-in as a provider of the
/// Messages API in `~/.config/opencode/opencode.json` (the title given, so no request asks for one).
fn opencode_calls_the_plugin(reach: Reach) {
    let desk = Desk::new(reach);
    let (ran, api) = opencode_calls(&desk, "openovai_stamp");
    let offered = api.tools_offered();
    assert!(
        offered
            .first()
            .is_some_and(|t| t.contains(&"openovai_stamp".to_string())),
        "the first turn is offered the plugin as openovai_stamp: {offered:?}; {ran}"
    );
    let results = api.tool_results();
    assert_eq!(results.len(), 1, "{results:#?}; {ran}");
    assert_ne!(results[0]["is_error"], true, "{}; {ran}", results[0]);
    assert!(
        result_text(&results[0]).contains(&stamp_answer(desk.seat)),
        "opencode sent the plugin's answer back: {}; {ran}",
        results[0]
    );
    let events: Vec<Value> = ran
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "text" && e["part"]["text"] == CLOSING),
        "opencode ends with the model's closing text; {ran}"
    );
    desk.check_plugin_ran(&ran);
}

/// opencode run at `desk`, its model calling `tool` once and then closing.
fn opencode_calls(desk: &Desk, tool: &'static str) -> (Ran, MessagesApi) {
    let home = home();
    let api = MessagesApi::start(vec![
        messages_api::Step::Tool(tool, json!({})),
        messages_api::Step::Text(CLOSING),
    ]);
    // Not ovai's: the stand-in as the model's provider, through the Anthropic SDK opencode bundles.
    write(
        &home.path().join(".config/opencode/opencode.json"),
        &json!({
            "$schema": "https://opencode.ai/config.json",
            "provider": { "standin": {
                "npm": "@ai-sdk/anthropic",
                "name": "Stand-in",
                "options": { "baseURL": format!("{}/v1", api.url), "apiKey": "stand-in" },
                "models": { "stand-in": { "name": "Stand-in" } }
            } },
            "model": "standin/stand-in",
            "autoupdate": false,
            "share": "disabled"
        })
        .to_string(),
    );
    // opencode reads a desk's opencode.json wherever it is: no trust to write.
    let ran = Client::start(
        "opencode",
        opencode_binary(),
        &[
            "run",
            "--title",
            "Stamp",
            "--format",
            "json",
            "--print-logs",
            "--log-level",
            "WARN",
            PROMPT,
        ],
        desk,
        home,
        &[
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            // It installs its plugin package into its config folder in the background: offline here,
            // that fails at once, with a warning.
            ("npm_config_offline", "true"),
        ],
    )
    .finish();
    (ran, api)
}

/// A plugin whose call never settles.
const HANG: &str = "export const description = 'Never answers.';\nexport const inputSchema = { type: 'object' };\nexport function run() { return new Promise(() => {}); }\n";

/// opencode gives up on a quiet request after 60 s unless its entry says otherwise: with ovai's own
/// limit past that, the model read opencode's "Request timed out", never ovai's words naming the file.
/// (It takes a minute: the limit is opencode's.)
#[test]
fn opencode_gets_ovais_words_for_a_call_that_never_settles() {
    let desk = Desk::with(
        Reach::Socket,
        &[("hang.mjs", HANG)],
        json!({ "callTimeoutSeconds": 62 }),
    );
    let (ran, api) = opencode_calls(&desk, "openovai_hang");
    let results = api.tool_results();
    assert_eq!(results.len(), 1, "{results:#?}; {ran}");
    let text = result_text(&results[0]);
    assert!(
        text.contains("plugins/hang.mjs did not answer in time"),
        "{text}; {ran}"
    );
}

#[test]
fn gemini_cli_at_a_desk_calls_a_plugin_over_the_socket() {
    gemini_calls_the_plugin(Reach::Socket);
}

#[test]
fn gemini_cli_at_a_url_desk_calls_a_plugin_over_http() {
    gemini_calls_the_plugin(Reach::Http);
}

#[test]
fn codex_at_a_desk_calls_a_plugin_over_the_socket() {
    codex_calls_the_plugin(Reach::Socket);
}

#[test]
fn codex_at_a_url_desk_calls_a_plugin_over_http() {
    codex_calls_the_plugin(Reach::Http);
}

#[test]
fn opencode_at_a_desk_calls_a_plugin_over_the_socket() {
    opencode_calls_the_plugin(Reach::Socket);
}

#[test]
fn opencode_at_a_url_desk_calls_a_plugin_over_http() {
    opencode_calls_the_plugin(Reach::Http);
}
