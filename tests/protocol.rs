//! MCP as a client meets it: the three protocol revisions, the server's name and instructions, the tool
//! list, unknown requests answered at once, and unknown tools as JSON-RPC errors.

mod common;
use common::*;
use serde_json::{Value, json};

const HELLO: &str = r#"
export const description = "Says hello.\nA second line.";
export const inputSchema = { type: "object", properties: { who: { type: "string", description: "Whom." } }, required: ["who"], additionalProperties: false };
export function run({ who }, { seat }) { return { text: `hello ${who} from ${seat}` }; }
"#;

fn started() -> (Instance, Daemon) {
    let inst = Instance::with_plugins(&[
        ("hello.mjs", HELLO),
        ("a-first.mjs", &HELLO.replace("hello ", "first ")),
    ]);
    let d = inst.start();
    (inst, d)
}

#[test]
fn the_revisions_with_initialize_work() {
    let (inst, _d) = started();
    for version in ["2025-06-18", "2025-11-25"] {
        let mut s = inst.session("lead");
        let init = s.initialize_as(version);
        let result = &init["result"];
        assert_eq!(result["protocolVersion"], version);
        assert_eq!(result["serverInfo"]["name"], "openovai");
        assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
        let instructions = result["instructions"].as_str().unwrap();
        assert!(
            instructions
                .starts_with("You are at seat lead, the Leader of the openovai instance at"),
            "{instructions}"
        );
        // Claude Code shows a session only the first 2,048 characters of a server's instructions.
        assert!(instructions.chars().count() < 2048, "{instructions}");
        assert_eq!(
            s.call("hello", json!({ "who": "you" })),
            ("hello you from lead".to_string(), false)
        );
    }
}

#[test]
fn the_revision_without_initialize_works() {
    let (inst, _d) = started();
    let mut s = inst.session("lead");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "tests", "version": "1" }
    });
    let list = s.request("tools/list", json!({ "_meta": meta }));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a-first", "hello", "index", "room"]);
    let r = s.request(
        "tools/call",
        json!({ "name": "hello", "arguments": { "who": "2026" }, "_meta": meta }),
    );
    assert_eq!(text_of(&r), ("hello 2026 from lead".to_string(), false));
}

#[test]
fn tools_are_listed_sorted_with_their_schemas() {
    let (inst, _d) = started();
    let mut s = inst.session("lead");
    s.initialize();
    let list = s.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a-first", "hello", "index", "room"]);
    let hello = &tools[1];
    assert_eq!(hello["description"], "Says hello.\nA second line.");
    assert_eq!(hello["inputSchema"]["required"], json!(["who"]));
    assert_eq!(
        hello["inputSchema"]["properties"]["who"]["description"],
        "Whom."
    );
    assert_eq!(tools[2]["annotations"]["readOnlyHint"], true);
    // The room only ever adds a message (MCP's default for an unmarked tool is destructive), and
    // neither built-in reaches past the instance.
    assert_eq!(
        tools[3]["annotations"],
        json!({ "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false })
    );
    assert_eq!(tools[2]["annotations"]["openWorldHint"], false);
    // The same list twice: deterministic.
    assert_eq!(s.request("tools/list", json!({}))["result"], list["result"]);
}

#[test]
fn unknown_requests_are_answered_at_once() {
    let (inst, _d) = started();
    let mut s = inst.session("lead");
    s.initialize();
    let r = s.request("no/such-method", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    // A discovery probe without the metadata 2026-07-28 asks for is told what is missing, at once; in a
    // session begun with initialize, that it is not served there.
    let r = inst.session("lead").request("server/discover", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("io.modelcontextprotocol/protocolVersion"),
        "{r}"
    );
    let r = s.request("server/discover", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = s.request("prompts/list", json!({}));
    assert!(r.get("error").is_some(), "{r}");
}

#[test]
fn an_unknown_tool_is_a_json_rpc_error_naming_the_tools() {
    let (inst, _d) = started();
    let mut s = inst.session("lead");
    s.initialize();
    let r = s.request("tools/call", json!({ "name": "nope", "arguments": {} }));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert_eq!(
        msg,
        "There is no tool called nope on this server; the tools are a-first, hello, index, room."
    );
}

/// A tool whose file is there but broken is said to be so, with why: "there is no tool called" alone
/// sends the model (and its user) looking for a misspelt name.
#[test]
fn a_tool_whose_file_is_not_served_is_said_so_with_why() {
    let inst = Instance::with_plugins(&[
        ("hello.mjs", HELLO),
        (
            "broken.mjs",
            "export const description = 'x';\nexport const inputSchema = {\n",
        ),
    ]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let r = s.request("tools/call", json!({ "name": "broken", "arguments": {} }));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with(
            "There is no tool called broken on this server: plugins/broken.mjs is not served: importing it failed: SyntaxError"
        ) && msg.ends_with(
            ". Fix the file, then `ovai check plugins/broken.mjs` and `ovai restart`. The tools are hello, index, room."
        ),
        "{msg}"
    );
}

#[test]
fn arguments_that_break_the_schema_are_refused_before_the_plugin_runs() {
    let inst = Instance::with_plugins(&[(
        "strict.mjs",
        r#"
export const description = "Counts runs.";
export const inputSchema = { type: "object", properties: { n: { type: "integer", minimum: 1, description: "How many." } }, required: ["n"], additionalProperties: false };
let runs = 0;
export function run() { runs += 1; return { text: `runs: ${runs}` }; }
"#,
    )]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "\"n\" is a required property"),
        (
            json!({ "n": "3" }),
            "at /n: \"3\" is not of type \"integer\"",
        ),
        (json!({ "n": 0 }), "at /n: 0 is less than the minimum of 1"),
        (json!({ "n": 1, "extra": true }), "extra"),
    ];
    for (args, want) in cases {
        let (text, refused) = s.call("strict", args.clone());
        assert!(refused, "{args} is refused");
        assert!(
            text.starts_with(
                "The arguments do not fit the inputSchema of strict, so it was not run: "
            ),
            "{text}"
        );
        assert!(text.contains(want), "{args}: {text}");
    }
    // No call without arguments at all reaches the plugin either.
    let r = s.request("tools/call", json!({ "name": "strict" }));
    assert!(text_of(&r).1);
    // None of them ran it: the first good call is its first run.
    assert_eq!(
        s.call("strict", json!({ "n": 2 })),
        ("runs: 1".to_string(), false)
    );
    // Built-ins are held to their schemas the same way.
    let (text, refused) = s.call("room", json!({ "say": 5 }));
    assert!(refused && text.contains("at /say"), "{text}");
}

/// A tree of files and folders: the usual recursive schema, where every level of the arguments doubles
/// the errors a full naming would walk (each branch of the `oneOf` descends into the children).
const TREE: &str = r##"
export const description = "Files and folders as a tree.";
export const inputSchema = { type: "object",
  $defs: { entry: { description: "a file or a folder", oneOf: [
    { type: "object", required: ["file"], properties: { file: { type: "string", description: "name" }, children: { type: "array", description: "none", items: { $ref: "#/$defs/entry" } } } },
    { type: "object", required: ["folder"], properties: { folder: { type: "string", description: "name" }, children: { type: "array", description: "entries", items: { $ref: "#/$defs/entry" } } } } ] } },
  properties: { root: { $ref: "#/$defs/entry" } }, required: ["root"] };
export function run() { return { text: "ran" }; }
"##;

#[test]
fn naming_what_arguments_break_takes_bounded_work_and_says_little() {
    // Definitions that each refer to the next twice: a string at the end is checked 2^26 times, and
    // held the daemon's thread for seconds though the arguments fit.
    let mut defs = String::new();
    for i in 0..26 {
        defs.push_str(&format!(
            "d{i}: {{ allOf: [{{ $ref: '#/$defs/d{n}' }}, {{ $ref: '#/$defs/d{n}' }}] }}, ",
            n = i + 1
        ));
    }
    let dag = format!(
        "export const description = 'Rejoins.';\nexport const inputSchema = {{ type: 'object', $defs: {{ {defs}d26: {{ type: 'string' }} }}, properties: {{ s: {{ description: 's', $ref: '#/$defs/d0' }} }} }};\nexport function run() {{ return {{ text: 'ran' }}; }}"
    );
    let rows = r#"
export const description = "Takes rows.";
export const inputSchema = { type: "object", properties: { rows: { type: "array", description: "rows", items: { type: "object", properties: { a: { type: "integer", description: "a" } } } } } };
export function run() { return { text: "ran" }; }
"#;
    let inst = Instance::with_plugins(&[
        ("dag.mjs", &dag),
        ("rows.mjs", rows),
        ("tree.mjs", TREE),
        (
            "short.mjs",
            r#"
export const description = "Takes a short word.";
export const inputSchema = { type: "object", properties: { w: { type: "string", maxLength: 3, pattern: "^x+$", description: "A word." }, n: { not: { type: "string" }, description: "Not a word." } } };
export function run() { return { text: "ran" }; }
"#,
        ),
    ]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let tree = |depth: usize, leaf: Value| {
        let mut n = leaf;
        for _ in 0..depth {
            n = json!({ "folder": "f", "children": [n] });
        }
        json!({ "root": n })
    };
    // A few levels: named as ever.
    let (text, refused) = s.call("tree", tree(2, json!({ "file": 5 })));
    assert!(
        refused
            && text.contains(
                "not run: at /root/children/0/children/0/file: 5 is not of type \"string\". Call"
            ),
        "{text}"
    );
    assert_eq!(
        s.call("tree", tree(40, json!({ "file": "a" }))),
        ("ran".to_string(), false)
    );
    // Forty levels: naming them all would take 2^40 steps, which held the daemon's thread for good.
    let (text, refused) = s.call("tree", tree(40, json!({ "file": 5 })));
    assert_eq!(
        (text.as_str(), refused),
        (
            "The arguments do not fit the inputSchema of tree, so it was not run; naming where would take \
             too long. Call it again with arguments that fit.",
            true
        )
    );
    assert_eq!(
        s.call("short", json!({ "w": "x" })),
        ("ran".to_string(), false)
    );
    let (text, refused) = s.call("dag", json!({ "s": "x" }));
    assert_eq!(
        (text.as_str(), refused),
        (
            "The arguments could not be checked against the inputSchema of dag in reasonable time, so it \
             was not run: its schema has each value checked over and over. Send simpler arguments, or ask \
             for a simpler schema.",
            true
        )
    );
    // Large flat arguments with one slip are named, whatever their size: the budget grows with them.
    let mut many: Vec<Value> = (0..20_000).map(|i| json!({ "a": i })).collect();
    many[19_999] = json!({ "a": "x" });
    let (text, refused) = s.call("rows", json!({ "rows": many }));
    assert!(
        refused && text.contains("at /rows/19999/a: \"x\" is not of type \"integer\""),
        "{text}"
    );
    // A violation quotes the schema as the plugin wrote it.
    let (text, refused) = s.call("short", json!({ "n": "x" }));
    assert!(
        refused && text.contains(r#"at /n: "x" is what its 'not' rules out ({"type":"string"})"#),
        "{text}"
    );
    // A long value is shown clipped in each violation, not once per violation in full.
    let long = "y".repeat(100_000);
    let (text, refused) = s.call("short", json!({ "w": long }));
    assert!(
        refused && text.contains("at /w: \"yyy"),
        "{}",
        text.chars().take(200).collect::<String>()
    );
    assert!(text.len() < 2_000, "{} bytes", text.len());
    // So is a tool name made of plain letters.
    let r = s.request(
        "tools/call",
        json!({ "name": "n".repeat(100_000), "arguments": {} }),
    );
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.len() < 2_000, "{} bytes", message.len());
}

/// Claude Code keeps a `subscriptions/listen` stream open for the whole session. When it goes (its end of
/// the bridge's stdin closes), the bridge ends, and with it the seat's session, not minutes later.
#[test]
fn a_bridge_ends_with_its_client_though_a_listen_stream_is_open() {
    let inst = Instance::new();
    let _d = inst.start();
    let mut s = inst.session("lead");
    let lines = include_str!("../examples/bench/lines/claude-code-2.1.328.jsonl");
    for line in lines.lines().take(2) {
        s.send(&serde_json::from_str::<Value>(line).unwrap());
    }
    s.recv_where(|v| v["id"] == "server-discover-probe-1");
    let sessions = || {
        let out = inst
            .cmd()
            .args(["seat", "list", "--json"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["seats"][0]["sessions"].as_u64()
    };
    wait_until("the seat in a session", || {
        (sessions() == Some(1)).then_some(())
    });
    s.close_input();
    // Far less than the minute and more it stayed before; no figure of speed is asserted.
    let gone = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < gone,
            "ovai mcp is still up 20 s after its client closed its input"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    wait_until("the seat out of its session", || {
        (sessions().unwrap_or(0) == 0).then_some(())
    });
}

/// A client that is gone (its ends of the bridge's stdin and stdout both closed) while a call of its runs:
/// the bridge ends then, not when the call does (up to its deadline), and the daemon stops the call.
#[test]
fn a_bridge_ends_when_its_client_is_gone_though_a_call_runs() {
    use std::io::{BufRead, Write};
    let inst = Instance::with_plugins(&[(
        "waits.mjs",
        r#"export const description = "Waits until stopped.";
export const inputSchema = { type: "object" };
export function run(args, { signal }) {
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve({ text: "stopped" })));
}"#,
    )]);
    inst.set_config(json!({ "callTimeoutSeconds": 600 }));
    let _d = inst.start();
    let mut bridge = bridge_piped(&inst, "lead");
    let mut input = bridge.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(bridge.stdout.take().unwrap());
    for line in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"waits","arguments":{}}}),
    ] {
        writeln!(input, "{line}").unwrap();
    }
    let mut first = String::new();
    output.read_line(&mut first).unwrap();
    assert!(first.contains("\"id\":1"), "{first}");
    wait_until("the seat in a session", || {
        let out = inst.cmd().args(["seat", "list", "--json"]).output().ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["seats"][0]["sessions"].as_u64() == Some(1)).then_some(())
    });
    drop(input);
    drop(output);
    // Far less than the call's deadline (600 s); no figure of speed is asserted.
    let gone = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while bridge.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < gone,
            "ovai mcp is still up 20 s after its client went, with a call of 600 s to run"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Over the socket too, a 2026-07-28 request for a method not served is told what is served, and
/// `initialize` carrying 2026-07-28's `_meta` is a method that revision no longer has.
#[test]
fn a_2026_07_28_request_gets_ovais_words_for_a_method_not_served() {
    let inst = Instance::new();
    let _d = inst.start();
    let mut s = inst.session("lead");
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "t", "version": "1" },
    });
    let r = s.request("prompts/list", json!({ "_meta": meta }));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Method not found: this server does not serve prompts/list"),
        "{r}"
    );
    let r = s.request(
        "initialize",
        json!({ "_meta": meta, "protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
    );
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize is gone"),
        "{r}"
    );
}

/// A session keeps the revision it began with: one begun with 2026-07-28's `_meta` is answered
/// `-32601` for `initialize` and `ping` without it too, and one begun with `initialize` at 2025-06-18
/// is answered in that revision whatever a request's `_meta` says, and is not served 2026-07-28's methods.
#[test]
fn a_session_keeps_the_revision_it_began_with() {
    let inst = Instance::new();
    let _d = inst.start();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "t", "version": "1" },
    });
    let mut modern = inst.session("lead");
    let r = modern.request(
        "tools/call",
        json!({ "name": "index", "arguments": {}, "_meta": meta }),
    );
    assert!(r.get("result").is_some(), "{r}");
    let r = modern.request(
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
    );
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains(
            "initialize is gone from MCP 2026-07-28 on, and this connection began as 2026-07-28 and keeps that \
             revision; to speak 2025-11-25, start `ovai mcp` again and begin with initialize"
        ),
        "{r}"
    );
    let r = modern.request("ping", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ping is gone"),
        "{r}"
    );
    // Its requests still need their _meta.
    let r = modern.request("tools/call", json!({ "name": "index", "arguments": {} }));
    assert_eq!(r["error"]["code"], -32602, "{r}");

    let mut old = inst.session("lead");
    let r = old.initialize();
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18", "{r}");
    let r = old.request(
        "tools/call",
        json!({ "name": "index", "arguments": {}, "_meta": meta }),
    );
    assert!(r["result"]["content"].is_array(), "{r}");
    assert!(
        r["result"].get("resultType").is_none(),
        "answered as 2025-06-18: {r}"
    );
    let r = old.request("tools/list", json!({ "_meta": meta }));
    assert!(r["result"]["tools"].is_array(), "{r}");
    assert!(
        r["result"].get("resultType").is_none(),
        "answered as 2025-06-18: {r}"
    );
    assert_eq!(
        old.request("ping", json!({ "_meta": meta }))["result"],
        json!({})
    );
    let r = old.request(
        "initialize",
        json!({ "_meta": meta, "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
    );
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("this session is initialized already"),
        "{r}"
    );
    for method in ["server/discover", "subscriptions/listen"] {
        let r = old.request(method, json!({ "_meta": meta }));
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("is not served under the protocol revision this session speaks"),
            "{method}: {r}"
        );
    }
}

/// A session that asks for 2024-11-05 or 2025-03-26 is answered in that revision (rmcp negotiates them,
/// as protocol.md says), served its tools, and refused a batch in words all the same.
#[test]
fn older_revisions_are_spoken_and_batches_refused_in_words() {
    use std::io::Write;
    let (inst, _d) = started();
    for version in ["2024-11-05", "2025-03-26"] {
        let mut s = inst.session("lead");
        let init = s.initialize_as(version);
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        assert!(s.tool_names().contains(&"index".to_string()));
        s.writer()
            .write_all(b"[{\"jsonrpc\":\"2.0\",\"id\":71,\"method\":\"ping\"}]\n")
            .unwrap();
        s.writer().flush().unwrap();
        let refused = s.recv_where(|m| m.get("error").is_some() && m["id"].is_null());
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("send one message a line"),
            "{refused}"
        );
    }
}

/// Gemini CLI adds `wait_for_previous` (for its own scheduling) to every tool it offers its model and
/// sends it on: a tool whose schema does not name it neither sees it nor refuses the call for it; one
/// that names it gets it (helper-95: every Gemini call to a closed schema was refused).
#[test]
fn gemini_clis_own_wait_for_previous_is_left_out_unless_the_tool_names_it() {
    const ARGS: &str = "export const description = 'Says its arguments.';\n\
        export function run(args) { return { text: JSON.stringify(args) }; }\n";
    let inst = Instance::with_plugins(&[
        ("hello.mjs", HELLO),
        (
            "open.mjs",
            &format!(
                "{ARGS}export const inputSchema = {{ type: 'object', properties: {{ a: {{ type: 'string', description: 'a' }} }} }};\n"
            ),
        ),
        (
            "waits.mjs",
            &format!(
                "{ARGS}export const inputSchema = {{ type: 'object', properties: {{ wait_for_previous: {{ type: 'boolean', description: 'w' }} }}, additionalProperties: false }};\n"
            ),
        ),
    ]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("hello", json!({ "who": "you", "wait_for_previous": true })),
        ("hello you from lead".to_string(), false)
    );
    // The other members as written, in their order, however large (helper-98: a write past 64 KiB was
    // refused, and the members came sorted).
    s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"o\",\"method\":\"tools/call\",\"params\":{\"name\":\"open\",\"arguments\":{\"zeta\":1.50,\"wait_for_previous\":false,\"a\":\"x\"}}}\n");
    let r = s.recv_where(|m| m["id"] == "o");
    assert_eq!(text_of(&r), (r#"{"zeta":1.5,"a":"x"}"#.to_string(), false));
    let big = "b".repeat(100_000);
    let (text, refused) = s.call("hello", json!({ "who": big, "wait_for_previous": true }));
    assert!(!refused && text.starts_with("hello bbb"), "{}", &text[..80]);
    assert_eq!(
        s.call("waits", json!({ "wait_for_previous": true })),
        (r#"{"wait_for_previous":true}"#.to_string(), false)
    );
    // Only Gemini's own, a boolean: anything else is the tool's to judge.
    let (text, refused) = s.call("hello", json!({ "who": "you", "wait_for_previous": "yes" }));
    assert!(refused && text.contains("wait_for_previous"), "{text}");
}
