//! Seats on other machines: the same daemon over MCP's Streamable HTTP, with the seat's secret as its
//! bearer token on every request. Real `ovai serve`, real TCP (and TLS), every protocol version it speaks.

mod common;
use common::http::{Http, HttpSeat, Response, VERSIONS};
use common::*;
use serde_json::json;

fn serving(extra: serde_json::Value) -> (Instance, Daemon, Http) {
    let inst = Instance::new();
    let mut http = json!({ "listen": "127.0.0.1:0" });
    if let Some(o) = extra.as_object() {
        for (k, v) in o {
            http[k] = v.clone();
        }
    }
    inst.set_config(json!({ "http": http }));
    inst.fixture("echo.mjs");
    inst.add_seat("w1");
    let d = inst.start();
    let status = d.status().unwrap();
    let url = status["http"]
        .as_str()
        .unwrap_or_else(|| panic!("{status}"));
    (inst, d, Http::at(url))
}

/// Waits until the server counts at least `n` sessions (their streams registered).
fn sessions_registered(inst: &Instance, n: u64) {
    wait_until(&format!("{n} sessions to be registered"), || {
        let status = inst.cmd().args(["status", "--json"]).output().ok()?;
        let v: serde_json::Value = serde_json::from_slice(&status.stdout).ok()?;
        (v["sessions"].as_u64()? >= n).then_some(())
    });
}

#[test]
fn every_protocol_version_lists_and_calls_as_the_seat_its_token_names() {
    let (inst, _d, http) = serving(json!({}));
    for version in VERSIONS {
        for seat in ["lead", "w1"] {
            let mut s = HttpSeat::new(&http, &inst.secret(seat), version);
            s.initialize();
            let names = s.tool_names();
            assert!(
                names.contains(&"echo".to_string()) && names.contains(&"index".to_string()),
                "{version}: {names:?}"
            );
            assert_eq!(
                s.call("echo", json!({ "v": version })),
                (format!(r#"{seat}: {{"v":"{version}"}}"#), false),
                "{version}"
            );
        }
    }
    // The instructions name the seat, as over the socket.
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    let init = s.initialize();
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .starts_with("You are at seat w1, a Worker"),
        "{init}"
    );
}

#[test]
fn no_token_or_an_unknown_one_is_refused_with_a_challenge_and_a_sentence() {
    let (inst, d, http) = serving(json!({}));
    for token in [None, Some("not-a-secret"), Some("")] {
        let mut s = HttpSeat::new(&http, token.unwrap_or(""), "2025-11-25");
        if token.is_none() {
            s.token = None;
        }
        let (_, r) = s.send(
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "x", "version": "1" } }),
        );
        assert_eq!(r.status, 401, "{token:?}");
        assert!(
            r.header("www-authenticate")
                .is_some_and(|c| c.starts_with("Bearer")),
            "{:?}",
            r.headers
        );
        let body = r.json();
        let why = body["error"]["message"].as_str().unwrap();
        assert!(
            why.contains("bearer token") || why.contains("not the secret of any seat"),
            "{why}"
        );
    }
    // A token that is a secret no longer: `seat rotate` gives w1 a new one.
    let old = inst.secret("w1");
    inst.cmd().args(["seat", "rotate", "w1"]).assert().success();
    let mut s = HttpSeat::new(&http, &old, "2026-07-28");
    let (_, r) = s.send("tools/list", json!({}));
    assert_eq!(r.status, 401);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("removed or given a new secret")
    );
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2026-07-28");
    assert!(s.tool_names().contains(&"echo".to_string()));
    // No secret reaches a log.
    let log = std::fs::read_to_string(inst.root.join("runtime.log")).unwrap();
    let stderr = std::fs::read_to_string(&d.stderr).unwrap();
    for secret in [old, inst.secret("w1"), inst.secret("lead")] {
        assert!(!log.contains(&secret) && !stderr.contains(&secret));
    }
}

#[test]
fn an_origin_not_listed_is_forbidden_and_a_listed_one_passes() {
    let (inst, _d, http) = serving(json!({ "origins": ["https://app.example.com"] }));
    let s = HttpSeat::new(&http, &inst.secret("lead"), "2026-07-28");
    let mut headers = s.headers("tools/list", None);
    headers.push(("origin".into(), "http://evil.example".into()));
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } });
    let send = |h: &Vec<(String, String)>| {
        let r: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        http.request("POST", &r, &body.to_string())
    };
    let r = send(&headers);
    assert_eq!(r.status, 403);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the origin http://evil.example")
    );
    // One past ASCII is named too (helper-100: "the origin :", left empty).
    headers.pop();
    headers.push(("origin".into(), "http://\u{e9}vil.example".into()));
    let r = send(&headers);
    assert_eq!(r.status, 403);
    let said = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        said.contains("the origin http://\u{e9}vil.example:"),
        "{said}"
    );
    headers.pop();
    headers.push(("origin".into(), "https://app.example.com".into()));
    let mut r = send(&headers);
    assert_eq!(r.status, 200);
    assert!(r.answer(1)["result"]["tools"].is_array());
    // Without a token, a listed origin is still asked for one.
    headers.retain(|(k, _)| k != "authorization");
    assert_eq!(send(&headers).status, 401);
}

#[test]
fn list_changed_reaches_every_version_after_ovai_restart() {
    let (inst, _d, http) = serving(json!({}));
    let mut streams = Vec::new();
    for version in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        let mut s = HttpSeat::new(&http, &inst.secret("w1"), version);
        s.initialize();
        streams.push((version, s.open_changes(), s));
    }
    // The listen streams are registered before the restart announces anything.
    sessions_registered(&inst, 3);
    inst.write_plugin(
        "added.mjs",
        r#"export const description = "Added later."; export const inputSchema = { type: "object" }; export function run() { return { text: "added" }; }"#,
    );
    inst.set_config(
        json!({ "http": { "listen": "127.0.0.1:0", "origins": ["https://app.example.com"] } }),
    );
    inst.cmd().arg("restart").assert().success();
    assert!(
        inst.rows("server")
            .iter()
            .any(|r| r.contains("\"http\" changed; the HTTP endpoint keeps its settings")),
        "{:?}",
        inst.rows("server")
    );
    for (version, stream, s) in &mut streams {
        let m = stream
            .next_message()
            .unwrap_or_else(|| panic!("{version}: the stream ended"));
        assert_eq!(
            m["method"], "notifications/tools/list_changed",
            "{version}: {m}"
        );
        assert!(s.tool_names().contains(&"added".to_string()), "{version}");
        assert_eq!(s.call("added", json!({})), ("added".into(), false));
    }
}

/// A GET stream resumed with `Last-Event-ID` gets what the session sent from that event on; an id this
/// server never gave ends the stream at once (an error would have a client retry it for ever).
#[test]
fn a_resumed_get_stream_replays_and_a_bogus_event_id_ends_it() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let mut get = s.open_changes();
    sessions_registered(&inst, 1);
    let tool = |name: &str| {
        format!(
            r#"export const description = "{name}."; export const inputSchema = {{ type: "object" }}; export function run() {{ return {{ text: "{name}" }}; }}"#
        )
    };
    inst.write_plugin("first.mjs", &tool("first"));
    inst.cmd().arg("restart").assert().success();
    let (first, m) = get.next_event().expect("the first list change");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    let first = first.expect("the event has an id");
    drop(get);
    inst.write_plugin("second.mjs", &tool("second"));
    inst.cmd().arg("restart").assert().success();
    let mut resumed = s.resume_changes(&first);
    assert_eq!(resumed.status, 200);
    // rmcp replays from the event named on, that one too (its stream's first event shares its id with
    // the priming event before it): a list change twice is harmless.
    let (again, m) = resumed.next_event().expect("the first change is replayed");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    assert_eq!(again.as_deref(), Some(first.as_str()));
    let (then, m) = resumed
        .next_event()
        .expect("the change after it is replayed");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    assert_ne!(then.as_deref(), Some(first.as_str()));
    let mut bogus = s.resume_changes("no-such-event");
    assert_eq!(bogus.status, 200);
    assert!(bogus.next_event().is_none(), "a bogus id ends the stream");
}

/// A second GET stream of a session (a client reconnecting before the server saw its first one go)
/// takes the first one's place: the first ends, the second gets what the session sends; resumed with
/// `Last-Event-ID` while another is open, a stream replays.
#[test]
fn a_second_get_stream_takes_the_first_ones_place() {
    let (inst, _d, http) = serving(json!({}));
    let tool = |name: &str| {
        format!(
            r#"export const description = "{name}."; export const inputSchema = {{ type: "object" }}; export function run() {{ return {{ text: "{name}" }}; }}"#
        )
    };
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let mut first = s.open_changes();
    sessions_registered(&inst, 1);
    let mut second = s.open_changes();
    // Keep-alives come every 15 s: a stream that never ends would be read for ever.
    let within = |what: &str, read: Box<dyn FnOnce() -> bool + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read()));
        assert!(
            rx.recv_timeout(PATIENCE).unwrap_or(false),
            "{what} did not come"
        );
    };
    within(
        "the first stream's end",
        Box::new(move || {
            first.ends();
            true
        }),
    );
    inst.write_plugin("added.mjs", &tool("added"));
    inst.cmd().arg("restart").assert().success();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let event = second.next_event();
        let _ = tx.send((event, second));
    });
    let (event, mut second) = rx
        .recv_timeout(PATIENCE)
        .expect("the list change reaches the newest stream");
    let (_, m) = event.expect("the newest stream is open");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    // A second change, so the stream has an event past `0` to be resumed from.
    inst.write_plugin("again.mjs", &tool("again"));
    inst.cmd().arg("restart").assert().success();
    let (id, m) = second.next_event().expect("the second change");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    let id = id.expect("the event has an id");
    assert_ne!(id, "0");
    let mut third = s.resume_changes(&id);
    assert_eq!(third.status, 200);
    let (again, m) = third.next_event().expect("the change is replayed");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    assert_eq!(again.as_deref(), Some(id.as_str()));
    second.ends();
    // A GET from `0` (the priming id every stream starts with) while a request of the session is under
    // way (an EventSource reconnecting that request's stream) does not take the live stream's place,
    // which would take it back in turn.
    inst.write_plugin("gate.mjs", GATE);
    inst.cmd().arg("restart").assert().success();
    let (m, mut third) = next_of(third);
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    let mut caller = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    caller.session = s.session.clone();
    let call = std::thread::spawn(move || caller.call("gate", json!({})));
    wait_until("the call to be running", || {
        inst.root.join("work/gate.started").exists().then_some(())
    });
    let stale = s.resume_changes("0");
    assert_eq!(stale.status, 200);
    std::fs::write(inst.root.join("gate.go"), "").unwrap();
    assert_eq!(call.join().unwrap().0, "through the gate, w1");
    inst.write_plugin("more.mjs", &tool("more"));
    inst.cmd().arg("restart").assert().success();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(third.next_message());
    });
    let m = rx
        .recv_timeout(PATIENCE)
        .expect("the live stream still gets the session's messages")
        .expect("the live stream is open");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    drop(stale);
}

/// Over HTTP as over the socket: a progress token of another kind is `-32602`, named (rmcp took it as
/// none).
#[test]
fn a_progress_token_of_another_kind_is_invalid_params_over_http_too() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let answer = s.request(
        "tools/call",
        json!({ "name": "echo", "arguments": {}, "_meta": { "progressToken": { "a": 1 } } }),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains(
            "params._meta.progressToken is an object; a progress token is a string or an integer"
        ),
        "{answer}"
    );
}

/// An instance on HTTP with seat w1 and `gated`, a tool that reports its start, then waits until
/// gate.go is written in the instance and answers "done"; its daemon and endpoint.
fn at_a_gate() -> (Instance, Daemon, Http) {
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    inst.write_plugin(
        "gated.mjs",
        r#"import { existsSync } from "node:fs";
export const description = "Says it started, then waits at a gate.";
export const inputSchema = { type: "object" };
export async function run(args, { root, progress }) {
  progress("started", { progress: 1 });
  for (let i = 0; i < 3000 && !existsSync(`${root}/gate.go`); i++) await new Promise((r) => setTimeout(r, 20));
  return { text: "done" };
}"#,
    );
    inst.add_seat("w1");
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    (inst, d, http)
}

/// Over HTTP as over the socket: a second call in flight under one progress token is refused.
#[test]
fn a_progress_token_in_use_is_refused_over_http_too() {
    let (inst, _d, http) = at_a_gate();
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let params = json!({ "name": "gated", "arguments": {}, "_meta": { "progressToken": "p" } });
    let (id, mut r) = s.send("tools/call", params.clone());
    while r.next_message().expect("the call's stream is open")["method"] != "notifications/progress"
    {
    }
    let refused = s.request("tools/call", params);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the progress token \"p\" is another call's, in flight on this session"),
        "{refused}"
    );
    std::fs::write(inst.root.join("gate.go"), "").unwrap();
    assert_eq!(text_of(&r.answer(id)).0, "done");
}

/// The next message a stream reads, within PATIENCE (a stream that gets none would be read for ever),
/// and the stream.
fn next_of(mut stream: Response) -> (serde_json::Value, Response) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let m = stream.next_message();
        let _ = tx.send((m, stream));
    });
    let (m, stream) = rx
        .recv_timeout(PATIENCE)
        .expect("the stream gets the session's message");
    (m.expect("the stream is open"), stream)
}

/// A client whose GET stream went quiet under it (a laptop asleep, a NAT that forgot the flow) comes
/// back from event `0` while the server still holds the old stream: with no request of the session
/// under way, the new stream takes the old one's place. It was kept beside it, deaf for good.
#[test]
fn a_get_stream_resumed_from_0_takes_the_place_of_one_gone_quiet() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let mut quiet = s.open_changes();
    assert_eq!(quiet.next_event_id().as_deref(), Some("0"));
    sessions_registered(&inst, 1);
    let back = s.resume_changes("0");
    assert_eq!(back.status, 200);
    inst.write_plugin("more.mjs", &good_tool("more"));
    inst.cmd().arg("restart").assert().success();
    let (m, _back) = next_of(back);
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    drop(quiet);
}

/// A GET the server refuses (a protocol version it does not speak) changes nothing: the session's live
/// stream stays. It was ended before the request was checked.
#[test]
fn a_refused_get_leaves_the_live_stream_alone() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let live = s.open_changes();
    sessions_registered(&inst, 1);
    let h = s.headers("GET", None);
    let mut refs: Vec<(&str, &str)> = h
        .iter()
        .filter(|(k, _)| k != "content-type" && k != "accept" && k != "mcp-protocol-version")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    refs.push(("accept", "text/event-stream"));
    refs.push(("mcp-protocol-version", "1999-01-01"));
    let refused = http.request("GET", &refs, "");
    assert_eq!(refused.status, 400);
    // Nor one rmcp answers with nothing: an event id it cannot read, a revision without sessions.
    for (name, value) in [
        ("last-event-id", "abc"),
        ("mcp-protocol-version", "2026-07-28"),
    ] {
        let mut refs: Vec<(&str, &str)> = refs
            .iter()
            .copied()
            .filter(|(k, _)| *k != "mcp-protocol-version")
            .collect();
        if name != "mcp-protocol-version" {
            refs.push(("mcp-protocol-version", "2025-11-25"));
        }
        refs.push((name, value));
        let mut other = http.request("GET", &refs, "");
        if other.status == 200 {
            other.ends();
        }
    }
    inst.write_plugin("more.mjs", &good_tool("more"));
    inst.cmd().arg("restart").assert().success();
    let (m, _live) = next_of(live);
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
}

/// A 2026-07-28 request that carries the id of a live session of an earlier revision is refused in words,
/// and that session goes on: such a call once ended the session without a word.
#[test]
fn a_2026_request_with_a_live_sessions_id_is_refused_and_the_session_goes_on() {
    let (inst, _d, http) = serving(json!({}));
    let secret = inst.secret("lead");
    let mut s = HttpSeat::new(&http, &secret, "2025-11-25");
    s.initialize();
    let live = s.session.clone().expect("a session");
    let bearer = format!("Bearer {secret}");
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": "p", "version": "1" } } } });
    for _ in 0..2 {
        let r = http.request(
            "POST",
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("authorization", &bearer),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-session-id", &live),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
            ],
            &body.to_string(),
        );
        let status = r.status;
        let message = r.json()["error"]["message"].to_string();
        assert_eq!(status, 400, "{message}");
        assert!(
            message.contains(
                "MCP 2026-07-28 has no sessions: send the request without the Mcp-Session-Id header"
            ),
            "{message}"
        );
        assert!(message.contains("goes on"), "{message}");
    }
    assert!(!s.call("echo", json!({ "a": 1 })).1);
}

/// A second `initialize` in a session is refused `-32600` (protocol.md), as on the socket, and the
/// session goes on in the revision it agreed: over HTTP it was answered as a first one.
#[test]
fn a_second_initialize_in_a_session_is_refused_and_the_session_goes_on() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-06-18");
    s.initialize();
    for version in ["2025-06-18", "2025-11-25"] {
        let (id, mut r) = s.send(
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": { "name": "again", "version": "1" },
            }),
        );
        let answer = r.answer(id);
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("this session is initialized already"),
            "{answer}"
        );
    }
    assert!(!s.call("echo", json!({})).1);
}

/// A ping in a 2025-11-25 session whose `_meta` names 2026-07-28 is refused as any request naming two
/// revisions is (400, `-32020`, naming both): it was told ping is gone from 2026-07-28, with a 404,
/// which tells a client its session is over (helper-100). The session goes on.
#[test]
fn a_sessions_ping_naming_two_revisions_is_told_so_not_404() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let (_, r) = s.send(
        "ping",
        json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } }),
    );
    assert_eq!(r.status, 400);
    let answer = r.json();
    assert_eq!(answer["error"]["code"], -32020, "{answer}");
    let said = answer["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("2025-11-25") && said.contains("2026-07-28"),
        "{said}"
    );
    assert!(!s.call("echo", json!({})).1);
}

/// A session begun with `initialize` has none of 2026-07-28's own methods: over HTTP as on the socket,
/// they are `-32601` in words, however their params read (they were `-32602` or `-32020`, and a
/// listen's message was its bare method; helper-88).
#[test]
fn a_2025_session_is_told_2026s_own_methods_are_not_served() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-06-18");
    s.initialize();
    for (method, params) in [
        ("server/discover", serde_json::Value::Null),
        ("server/discover", json!({})),
        (
            "subscriptions/listen",
            json!({ "notifications": { "toolsListChanged": true } }),
        ),
    ] {
        let (id, mut r) = s.send(method, params.clone());
        let answer = r.answer(id);
        assert_eq!(
            answer["error"]["code"], -32601,
            "{method} {params}: {answer}"
        );
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!(
                    "{method} is not served under the protocol revision this session speaks"
                )),
            "{answer}"
        );
    }
    assert!(!s.call("echo", json!({})).1);
}

/// A 2026-07-28 message without the header that names its method (or a call's tool) is told which header
/// to send and what it holds, rather than rmcp's bare "missing required Mcp-Method header".
#[test]
fn a_2026_message_without_its_method_header_is_told_what_to_send() {
    let (inst, _d, http) = serving(json!({}));
    let bearer = format!("Bearer {}", inst.secret("w1"));
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "echo", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": "p", "version": "1" } } } });
    let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 3 } });
    let mut older = call.clone();
    older["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    for (body, extra, words) in [
        (
            &call,
            None,
            "this message has no Mcp-Method header; MCP 2026-07-28 asks every message to name its method in one (here Mcp-Method: tools/call)",
        ),
        (
            &call,
            Some(("mcp-method", "tools/call")),
            "this tools/call has no Mcp-Name header; MCP 2026-07-28 asks a tools/call to name its tool in one, as params.name does",
        ),
        (&cancel, None, "(here Mcp-Method: notifications/cancelled)"),
        // The header and the body name two revisions (it was told to send initialize first).
        (
            &older,
            Some(("mcp-method", "tools/call")),
            "Header mismatch: the MCP-Protocol-Version header says 2026-07-28, and params._meta's \
             io.modelcontextprotocol/protocolVersion says 2025-11-25; a request names one revision in both",
        ),
    ] {
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("authorization", bearer.as_str()),
            ("mcp-protocol-version", "2026-07-28"),
        ];
        headers.extend(extra);
        let r = http.request("POST", &headers, &body.to_string());
        let status = r.status;
        let v = r.json();
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["error"]["code"], -32020, "{v}");
        assert_eq!(v["id"], body["id"], "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(words),
            "{v}"
        );
    }
    // A call that names no tool is told that, not to send the header naming it.
    let mut nameless = call.clone();
    nameless["params"].as_object_mut().unwrap().remove("name");
    let r = http.call_2026(&inst.secret("w1"), None, &nameless);
    let v = r.json();
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("params.name is missing"),
        "{v}"
    );
}

fn good_tool(name: &str) -> String {
    format!(
        r#"export const description = "{name}."; export const inputSchema = {{ type: "object" }}; export function run() {{ return {{ text: "{name}" }}; }}"#
    )
}

/// A resume naming an event past any its request's stream sent is turned away without touching the
/// stream: the call goes on, and its answer reaches the stream it was asked on. The stream was handed
/// to the resume before rmcp found the index wrong, and the answer was lost.
#[test]
fn a_resume_past_what_was_sent_leaves_the_running_call_alone() {
    let (inst, _d, http) = at_a_gate();
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let (id, mut r) = s.send(
        "tools/call",
        json!({ "name": "gated", "arguments": {}, "_meta": { "progressToken": "p" } }),
    );
    assert_eq!(r.status, 200);
    let progress_id = loop {
        let (event_id, m) = r.next_event().expect("the call's stream is open");
        if m["method"] == "notifications/progress" {
            break event_id.expect("a request's event has an id");
        }
    };
    let (index, request) = progress_id.split_once('/').expect("INDEX/REQUEST");
    let past = format!("{}/{request}", index.parse::<u64>().unwrap() + 5);
    let mut turned_away = s.resume_changes(&past);
    assert_eq!(turned_away.status, 200);
    turned_away.ends();
    std::fs::write(inst.root.join("gate.go"), "").unwrap();
    let answer = r.answer(id);
    assert_eq!(text_of(&answer).0, "done", "{answer}");
}

/// One seat's answers cannot push another seat's kept answer out: past the bounds of all, the seat
/// keeping the most gives up its oldest first.
#[test]
fn one_seats_answers_cannot_push_out_anothers_kept_answer() {
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    inst.write_plugin(
        "slow.mjs",
        r#"export const description = "Answers after a while."; export const inputSchema = { type: "object" }; export async function run() { await new Promise((r) => setTimeout(r, 700)); return { text: "slow done" }; }"#,
    );
    inst.write_plugin(
        "big.mjs",
        r#"export const description = "Answers 900 KB."; export const inputSchema = { type: "object" }; export function run() { return { text: "x".repeat(900 * 1024) }; }"#,
    );
    inst.add_seat("w1");
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let mut w1 = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    w1.initialize();
    let (id, mut r) = w1.send("tools/call", json!({ "name": "slow", "arguments": {} }));
    let primed = r.next_event_id().expect("the priming event's id");
    drop(r);
    wait_until("the call to be answered", || {
        (inst.tool_figures("slow")["calls"] == 1).then_some(())
    });
    // The Leader's answers, more than all kept answers may hold (32 MiB), over three sessions.
    for _ in 0..3 {
        let mut lead = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
        lead.initialize();
        for _ in 0..14 {
            let (text, _) = lead.call("big", json!({}));
            assert_eq!(text.len(), 900 * 1024);
        }
    }
    let mut resumed = w1.resume_changes(&primed);
    assert_eq!(text_of(&resumed.answer(id)).0, "slow done");
}

#[test]
fn a_removed_seat_is_refused_at_its_next_request_and_its_streams_end() {
    let (inst, _d, http) = serving(json!({}));
    let secret = inst.secret("w1");
    let mut old = HttpSeat::new(&http, &secret, "2025-11-25");
    old.initialize();
    let mut get = old.open_changes();
    let mut new = HttpSeat::new(&http, &secret, "2026-07-28");
    let mut listen = new.open_changes();
    sessions_registered(&inst, 2);
    inst.cmd().args(["seat", "remove", "w1"]).assert().success();
    get.ends();
    listen.ends();
    let (_, r) = old.send("tools/list", json!({}));
    assert_eq!(r.status, 401);
    let (_, r) = new.send("tools/list", json!({}));
    assert_eq!(r.status, 401);
    assert!(
        inst.rows("seats")
            .iter()
            .any(|r| r.contains("The seat w1 was removed"))
    );
}

#[test]
fn a_session_answers_only_the_seat_that_opened_it() {
    let (inst, _d, http) = serving(json!({}));
    let mut lead = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    lead.initialize();
    let mut thief = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    thief.session = lead.session.clone();
    let (_, r) = thief.send("tools/call", json!({ "name": "echo", "arguments": {} }));
    assert_eq!(r.status, 403);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another seat's secret")
    );
    assert_eq!(lead.call("echo", json!({})), ("lead: {}".into(), false));
}

#[test]
fn streams_are_bounded_per_seat_in_words() {
    let (inst, _d, http) = serving(json!({ "maxStreamsPerSeat": 2 }));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2026-07-28");
    let _a = s.open_changes();
    let _b = s.open_changes();
    let (_, r) = s.send("tools/list", json!({}));
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maxStreamsPerSeat")
    );
    // Another seat is not held up by w1's streams.
    let mut lead = HttpSeat::new(&http, &inst.secret("lead"), "2026-07-28");
    assert!(lead.tool_names().contains(&"echo".to_string()));
}

#[test]
fn plain_http_where_other_machines_listen_is_refused_at_start_unless_said_insecure() {
    let inst = Instance::new();
    let out = inst
        .cmd()
        .args(["serve", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without TLS") && err.contains("\"insecure\": true"),
        "{err}"
    );
    // The file's settings without its address: `--http` names it, and they apply.
    inst.set_config(json!({ "http": { "insecure": true } }));
    let out = inst.cmd().arg("serve").output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "\"http\" has no \"listen\": name the address, such as \"127.0.0.1:7777\", or pass --http ADDR to ovai serve"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    inst.cmd().arg("check").assert().success();
    let mut serving = std::process::Command::new(OVAI)
        .args(["serve", "--http", "0.0.0.0:0", "--root"])
        .arg(&inst.root)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = wait_until("the endpoint to listen", || {
        let out = inst.cmd().args(["status", "--json"]).output().ok()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["http"].as_str().map(str::to_string)
    });
    assert!(url.starts_with("http://"), "{url}");
    inst.cmd().arg("stop").assert().success();
    assert!(serving.wait().unwrap().success());
    inst.set_config(json!({ "http": { "listen": "0.0.0.0:0", "insecure": true } }));
    let d = inst.start();
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert!(
        url.starts_with(&format!("http://{host}:")),
        "a URL a client elsewhere can use: {url}"
    );
}

#[test]
fn stopping_the_daemon_ends_the_streams_cleanly() {
    let (inst, d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let mut get = s.open_changes();
    let mut n = HttpSeat::new(&http, &inst.secret("w1"), "2026-07-28");
    let mut listen = n.open_changes();
    assert!(d.stop().success());
    get.ends();
    listen.ends();
}

#[test]
fn tls_in_the_daemon_with_a_key_no_plugin_can_read() {
    let inst = Instance::new();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::create_dir_all(inst.root.join("tls")).unwrap();
    std::fs::write(inst.root.join("tls/cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(
        inst.root.join("tls/key.pem"),
        cert.signing_key.serialize_pem(),
    )
    .unwrap();
    inst.set_config(json!({
        "http": { "listen": "127.0.0.1:0", "tls": { "cert": "tls/cert.pem", "key": "tls/key.pem" } },
        "web": { "onHttp": true },
    }));
    // A key others can read is refused, in words saying how to mend it.
    let out = inst.cmd().arg("serve").timeout(PATIENCE).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("can be read by users other than its owner") && said.contains("chmod 600"),
        "{said}"
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        inst.root.join("tls/key.pem"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    inst.write_plugin(
        "reads.mjs",
        r#"import { readFileSync } from "node:fs";
export const description = "Reads a file of the instance.";
export const inputSchema = { type: "object", properties: { path: { type: "string" } } };
export function run({ path }, { root }) {
  try { return { text: readFileSync(`${root}/${path}`, "utf8").slice(0, 20) }; } catch (e) { return { text: e.code }; }
}"#,
    );
    // A plugin that would swap in a key of its own for the next start.
    inst.write_plugin(
        "swaps.mjs",
        r#"import { writeFileSync, renameSync } from "node:fs";
export const description = "Swaps the TLS files.";
export const inputSchema = { type: "object" };
const attempt = (f) => { try { f(); return "done"; } catch (e) { return e.code; } };
export function run(args, { root }) {
  return { text: JSON.stringify({
    write: attempt(() => writeFileSync(`${root}/tls/cert.pem`, "mine")),
    rename: attempt(() => renameSync(`${root}/tls`, `${root}/tls.old`)),
  }) };
}"#,
    );
    let d = inst.start();
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let mut http = Http::at(&url);
    http.host = format!("localhost:{}", http.addr.port());
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    http.tls = Some(std::sync::Arc::new(
        tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    ));
    let mut s = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    s.initialize();
    let (text, _) = s.call("reads", json!({ "path": "tls/key.pem" }));
    let boxed = d.status().unwrap()["host"]["isolation"]
        .as_str()
        .unwrap()
        .starts_with("The plugin host runs in a");
    if boxed {
        assert!(
            text == "EACCES" || text.is_empty(),
            "the TLS key is hidden: {text}"
        );
    }
    let (text, _) = s.call("reads", json!({ "path": "tls/cert.pem" }));
    assert!(text.starts_with("-----BEGIN"), "{text}");
    // The status page beside it: its cookie is never sent without TLS.
    let out = inst.cmd().arg("web").output().unwrap();
    let link = String::from_utf8_lossy(&out.stdout).to_string();
    let login = link[link.find("/web/login?t=").expect("ovai web prints a link")..]
        .split_whitespace()
        .next()
        .unwrap();
    let answer = http.request_at(login, "GET", &[], "");
    assert_eq!(answer.status, 303);
    let cookie = answer.header("set-cookie").unwrap_or_default().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.ends_with("; Secure"),
        "{cookie}"
    );
    if boxed {
        let (text, _) = s.call("swaps", json!({}));
        assert_eq!(text, r#"{"write":"EROFS","rename":"EROFS"}"#);
    }
    // Plain HTTP on the TLS port is not answered as MCP, but told in words to use https.
    use std::io::{Read, Write};
    let mut plain = std::net::TcpStream::connect(http.addr).unwrap();
    plain.set_read_timeout(Some(PATIENCE)).unwrap();
    plain
        .write_all(b"GET /mcp HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("HTTP/1.1 400 ")
            && got.contains("This endpoint speaks HTTPS, and the request came in the clear")
            && !got.contains("\"result\""),
        "{got}"
    );
    // And the operator reads it among the refusals, as a client's mistake, not a failed handshake.
    wait_until("the refusal in the daemon's log", || {
        let log = std::fs::read_to_string(&d.stderr).unwrap_or_default();
        log.contains(
            "refused a connection or request: a request came in the clear on the HTTPS endpoint",
        )
        .then_some(())
    });
}

#[test]
fn a_desk_for_a_remote_seat_reaches_the_endpoint_and_survives_rotate_and_rebuild() {
    let (inst, _d, http) = serving(json!({}));
    let url = format!("http://{}/mcp", http.host);
    let out = inst
        .cmd()
        .args(["seat", "add", "far", "--url", &url])
        .output()
        .unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&url)
            && said.contains("`codex exec --trust --skip-git-repo-check` once there"),
        "{said}"
    );
    // Codex's own file in the desk reaches the endpoint with the token and approves the tools.
    let codex = std::fs::read_to_string(inst.root.join("desks/far/.codex/config.toml")).unwrap();
    assert!(
        codex.contains(&format!("url = \"{url}\""))
            && codex.contains("Authorization = \"Bearer ")
            && codex.contains("default_tools_approval_mode = \"approve\""),
        "{codex}"
    );
    let mcp_json = inst.root.join("desks/far/.mcp.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&mcp_json).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let desk: serde_json::Value = read_json(&mcp_json);
    let entry = &desk["mcpServers"]["openovai"];
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["url"], url.as_str());
    let token = entry["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_string();
    assert!(
        inst.root
            .join("desks/far/.claude/settings.local.json")
            .exists()
    );
    let mut s = HttpSeat::new(&http, &token, "2025-11-25");
    s.initialize();
    assert_eq!(s.call("echo", json!({})), ("far: {}".into(), false));
    // Re-keyed: the desk keeps its URL and gets the new token; the old one opens nothing. Its session,
    // over HTTP, is not told to start `ovai mcp` again, and the desk is to be copied again (helper-92).
    let out = inst.cmd().args(["seat", "rotate", "far"]).output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !said.contains("ovai mcp")
            && said.contains(
                "its client reads the new secret from the desk's files, once they are on its machine)."
            )
            && said.contains(&format!(
                "The desk reaches {url}: copy the folder {} to the seat's machine again (it holds the new \
                 secret: scp -r, never a chat).",
                inst.root.join("desks/far").display()
            )),
        "{said}"
    );
    let desk: serde_json::Value = read_json(&mcp_json);
    let entry = &desk["mcpServers"]["openovai"];
    assert_eq!(entry["url"], url.as_str());
    let new_token = entry["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_string();
    assert_ne!(new_token, token);
    let (_, r) = HttpSeat::new(&http, &token, "2026-07-28").send("tools/list", json!({}));
    assert_eq!(r.status, 401);
    // seats.json lost: rebuilt from the desks, the remote one included.
    std::fs::remove_file(inst.root.join(".ovai/seats.json")).unwrap();
    inst.cmd().args(["seat", "rebuild"]).assert().success();
    let mut s = HttpSeat::new(&http, &new_token, "2026-07-28");
    assert_eq!(s.call("echo", json!({})), ("far: {}".into(), false));
    // A URL that is not one is refused in words, and nothing is made.
    let out = inst
        .cmd()
        .args(["seat", "add", "bad", "--url", "buildbox:7777"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("http:// or https://"));
    // A URL no client could reach is refused, saying why; nothing is made.
    for (n, (url, why)) in [
        (
            "http://127.0.0.1:99999/mcp",
            "\"99999\" is not a port (1 to 65535)",
        ),
        ("http://127.0.0.1:0/mcp", "\"0\" is not a port"),
        (
            "http://[::1:7777/mcp",
            "its IPv6 address has no closing \"]\"",
        ),
        (
            "http://127.0.0.1:7777/mcp\"}",
            "it holds '\"', which a URL does not",
        ),
        (
            "http://u:p@127.0.0.1:7777/mcp",
            "it names a user (and a password) before the host",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let seat = format!("bad{n}");
        let out = inst
            .cmd()
            .args(["seat", "add", &seat, "--url", url])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{url}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !inst
                .root
                .join("desks")
                .join(&seat)
                .join(".mcp.json")
                .exists()
        );
    }
    // The scheme may be written in any case.
    inst.cmd()
        .args(["seat", "add", "upper", "--url", "HTTP://127.0.0.1:7777/mcp"])
        .assert()
        .success();
    // A URL without the endpoint's path is taken (a proxy may map it), with a warning.
    let out = inst
        .cmd()
        .args(["seat", "add", "bare", "--url", "https://buildbox.example"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("names no path, and ovai's endpoint is at /mcp"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!inst.root.join("desks/bad/.mcp.json").exists());
}

fn raw(http: &Http, text: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut t = std::net::TcpStream::connect(http.addr).unwrap();
    t.set_read_timeout(Some(PATIENCE)).unwrap();
    t.write_all(text.as_bytes()).unwrap();
    t
}

fn read_all(mut t: std::net::TcpStream) -> String {
    use std::io::Read;
    let mut got = Vec::new();
    let _ = t.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn connections_that_send_no_request_give_their_place_back_and_the_cap_is_said() {
    let inst = Instance::new();
    inst.set_config(json!({ "maxConnections": 3, "http": { "listen": "127.0.0.1:0" } }));
    inst.fixture("echo.mjs");
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    // Half a request head, and then nothing: the server closes the connection after the head's time
    // limit (10 s) instead of holding it for ever. The client waits longer than that, and reads the end.
    let half = raw(&http, "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    half.set_read_timeout(Some(std::time::Duration::from_secs(40)))
        .unwrap();
    let mut got = Vec::new();
    let end = std::io::Read::read_to_end(&mut &half, &mut got);
    assert!(
        end.is_ok(),
        "the server closed the connection (not a read timeout): {end:?}"
    );
    // Three streams hold the three places; a fourth connection is told why, in words, and closed.
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut s = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
        s.initialize();
        streams.push(s.open_changes());
    }
    let got = read_all(raw(&http, ""));
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(got.contains("maxConnections"), "{got}");
    // Seats on this machine are not locked out by the network port's connections.
    inst.cmd()
        .args(["call", "echo", "{}", "--seat", "lead"])
        .assert()
        .success();
}

#[test]
fn a_refused_delete_keeps_the_session_its_seats_and_unknown_sessions_are_named() {
    let (inst, _d, http) = serving(json!({}));
    let mut w1 = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    w1.initialize();
    let mut h = w1.headers("DELETE", None);
    h.retain(|(k, _)| k != "mcp-protocol-version");
    h.push(("mcp-protocol-version".into(), "bogus".into()));
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = http.request("DELETE", &refs, "");
    assert!(!(200..300).contains(&r.status), "{}", r.status);
    let mut thief = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    thief.session = w1.session.clone();
    let (_, r) = thief.send("tools/call", json!({ "name": "echo", "arguments": {} }));
    assert_eq!(r.status, 403, "still w1's session");
    // Said in runtime.log, naming both seats, once a minute (helper-80: only on stderr, no seat).
    let (_, r) = thief.send("tools/list", json!({}));
    assert_eq!(r.status, 403);
    let tried: Vec<String> = inst
        .rows("seats")
        .into_iter()
        .filter(|r| r.contains("in a session opened with"))
        .collect();
    assert_eq!(
        tried,
        [
            "The seat lead sent a request over HTTP in a session opened with the seat w1's secret, and was \
          refused: a session is its own seat's alone."
        ]
    );
    // A real DELETE ends it; the id then names nothing, in words.
    let h = w1.headers("DELETE", None);
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // 204, not rmcp's 202: the Python SDK takes anything but 200 and 204 for a failed end.
    assert_eq!(http.request("DELETE", &refs, "").status, 204);
    let (_, r) = w1.send("tools/list", json!({}));
    assert_eq!(r.status, 404);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialize a new session")
    );
}

#[test]
fn a_seat_holds_a_bounded_number_of_sessions_the_idle_making_room_and_its_stream_ends_with_it() {
    let (inst, _d, http) = serving(json!({}));
    let secret = inst.secret("w1");
    let open = |s: &mut HttpSeat| {
        s.send(
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "x", "version": "1" } }),
        )
        .1
    };
    let mut first = HttpSeat::new(&http, &secret, "2025-11-25");
    let r = open(&mut first);
    first.session = r.header("mcp-session-id").map(str::to_string);
    // Never initialised, and listening: its stream ends when the seat goes.
    let mut get = first.open_changes();
    let mut left = Vec::new();
    for _ in 1..64 {
        let mut s = HttpSeat::new(&http, &secret, "2025-11-25");
        let r = open(&mut s);
        assert_eq!(r.status, 200);
        s.session = r.header("mcp-session-id").map(str::to_string);
        left.push(s);
    }
    // Full: a new session ends the one idle longest (a client that left without ending it), never one
    // with a stream open; a client that comes back to the one ended is told to open another.
    let r = open(&mut HttpSeat::new(&http, &secret, "2025-11-25"));
    assert_eq!(r.status, 200);
    let (_, r) = left[0].send("tools/list", json!({}));
    assert_eq!(r.status, 404);
    let said = r.json()["error"]["message"].to_string();
    assert!(said.contains("initialize a new session"), "{said}");
    // Why it may have gone is said, the seat's bound among the reasons.
    assert!(
        said.contains("ended to make room for a new one, as the one idle longest of its seat's 64"),
        "{said}"
    );
    // The operator's list says what holds the places: sessions that were opened and never initialised,
    // which serve no seat a tools/list_changed and were counted nowhere.
    // Another seat is not held to w1's sessions.
    let mut lead = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    lead.initialize();
    let listed = inst.cmd().args(["seat", "list"]).assert().success();
    let listed = String::from_utf8_lossy(&listed.get_output().stdout).to_string();
    assert!(
        listed.contains(
            "w1: Worker, no session now; 64 HTTP sessions opened and never initialized \
             (no notifications/initialized)"
        ),
        "{listed}"
    );
    assert!(
        listed.contains("lead: Leader, in a session now\n"),
        "{listed}"
    );
    let status = inst.cmd().args(["status"]).assert().success();
    let status = String::from_utf8_lossy(&status.get_output().stdout).to_string();
    assert!(
        status.contains("Seat w1: Worker, no session now; 64 HTTP sessions opened and never"),
        "{status}"
    );
    inst.cmd().args(["seat", "remove", "w1"]).assert().success();
    get.ends();
}

/// Past 64 sessions all in use (each holding its stream), a new one is refused in words, and none of
/// those in use is ended to make room.
#[test]
fn a_seat_whose_64_sessions_are_all_in_use_is_refused_a_new_one_in_words() {
    let (inst, _d, http) = serving(json!({ "maxStreamsPerSeat": 100 }));
    let secret = inst.secret("w1");
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut s = HttpSeat::new(&http, &secret, "2025-11-25");
        s.initialize();
        let stream = s.open_changes();
        assert_eq!(stream.status, 200);
        held.push((s, stream));
    }
    let mut late = HttpSeat::new(&http, &secret, "2025-11-25");
    let (_, r) = late.send(
        "initialize",
        json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "x", "version": "1" } }),
    );
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("5"));
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(
            "the seat w1 holds 64 MCP sessions on this server, its limit: end one (DELETE /mcp"
        ),
        "{message}"
    );
    // Every session in use still answers.
    for (s, _) in held.iter_mut() {
        let (_, r) = s.send("tools/list", json!({}));
        assert_eq!(r.status, 200);
    }
}

#[test]
fn an_oversized_body_is_refused_before_it_is_sent_and_words_leak_nothing() {
    let (inst, _d, http) = serving(json!({}));
    let t = raw(
        &http,
        &format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\ncontent-length: 999999999\r\nconnection: close\r\n\r\n",
            inst.secret("lead")
        ),
    );
    let got = read_all(t);
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    assert!(got.contains("more than the 4 MiB"), "{got}");
    // Sent in chunks, with no length said: read up to the limit, and refused in the same words.
    let mut t = raw(
        &http,
        &format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
            inst.secret("lead")
        ),
    );
    {
        use std::io::Write;
        let chunk = format!("100000\r\n{}\r\n", "x".repeat(0x100000));
        for _ in 0..5 {
            if t.write_all(chunk.as_bytes()).is_err() {
                break;
            }
        }
        let _ = t.write_all(b"0\r\n\r\n");
    }
    let got = read_all(t);
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    assert!(
        got.contains("more than the 4 MiB"),
        "{}",
        &got[..got.len().min(400)]
    );
    // A wrong token is not told where the instance is; a broken seat book is not described to it.
    let mut s = HttpSeat::new(&http, "nobody", "2026-07-28");
    let (_, r) = s.send("tools/list", json!({}));
    let body = r.text();
    assert!(!body.contains(inst.root.to_str().unwrap()), "{body}");
    std::fs::write(inst.root.join(".ovai/seats.json"), "{ broken").unwrap();
    let (_, r) = s.send("tools/list", json!({}));
    assert_eq!(r.status, 503);
    let body = r.text();
    assert!(
        !body.contains("seats.json") && body.contains("operator"),
        "{body}"
    );
}

/// A name in "hosts" written as a URL writes it, with a port ("buildbox.example:7777", the proxy's), is
/// let in at any port: the Host a client sends behind a proxy may name the proxy's port or none. Before,
/// such an entry matched nothing, and the refusal listed it as a name the server answers to.
#[test]
fn a_host_listed_with_a_port_is_answered_at_its_name() {
    let (inst, _d, http) = serving(json!({ "hosts": ["buildbox.example:7777"] }));
    let s = HttpSeat::new(&http, &inst.secret("lead"), "2026-07-28");
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } });
    let h = s.headers("tools/list", None);
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    for (host, status) in [
        ("buildbox.example:7777", 200),
        ("BuildBox.Example", 200),
        (&*format!("buildbox.example:{}", http.addr.port()), 200),
        ("evil.example:7777", 403),
    ] {
        let mut at = http.clone();
        at.host = host.to_string();
        let r = at.request("POST", &refs, &body.to_string());
        let got = r.status;
        assert_eq!(got, status, "{host}: {}", r.text());
    }
}

#[test]
fn a_page_of_a_listed_origin_gets_its_preflight_and_reads_its_answers() {
    let (inst, _d, http) = serving(json!({ "origins": ["https://app.example.com"] }));
    let pre = http.request(
        "OPTIONS",
        &[
            ("origin", "https://app.example.com"),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "authorization, content-type",
            ),
        ],
        "",
    );
    assert_eq!(pre.status, 204);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    // The trace context a page passes on (docs/observability.md) is let through too.
    let allowed = pre.header("access-control-allow-headers").unwrap();
    for name in [
        "authorization",
        "mcp-session-id",
        "traceparent",
        "tracestate",
    ] {
        assert!(allowed.contains(name), "{name}: {allowed}");
    }
    let s = HttpSeat::new(&http, &inst.secret("lead"), "2026-07-28");
    let mut h = s.headers("tools/list", None);
    h.push(("origin".into(), "https://app.example.com".into()));
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } });
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = http.request("POST", &refs, &body.to_string());
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    // A name made to point at the server is refused, in words naming the setting.
    let mut h = s.headers("tools/list", None);
    let mut rebound = http.clone();
    rebound.host = format!("evil.example:{}", http.addr.port());
    h.retain(|(k, _)| k != "origin");
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = rebound.request("POST", &refs, &body.to_string());
    assert_eq!(r.status, 403);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"hosts\"")
    );
    // A loopback address is no name a page can point elsewhere: one the endpoint may listen on too.
    let mut other_loopback = http.clone();
    other_loopback.host = format!("127.0.0.2:{}", http.addr.port());
    let r = other_loopback.request("POST", &refs, &body.to_string());
    let status = r.status;
    assert_eq!(status, 200, "{}", r.text());
}

/// Waits at a gate the test opens, having said it started.
const GATE: &str = r#"
import { existsSync, writeFileSync } from "node:fs";
export const description = "Waits at a gate the test opens.";
export const inputSchema = { type: "object" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run(args, { root, seat }) {
  writeFileSync(`${root}/work/gate.started`, "");
  for (let i = 0; i < 3000 && !existsSync(`${root}/gate.go`); i++) await sleep(20);
  return { text: `through the gate, ${seat}` };
}
"#;

#[test]
fn a_call_in_flight_over_http_finishes_across_ovai_restart() {
    let (inst, _d, http) = serving(json!({}));
    inst.write_plugin("gate.mjs", GATE);
    inst.cmd().arg("restart").assert().success();
    let mut results = Vec::new();
    for version in ["2025-11-25", "2026-07-28"] {
        let _ = std::fs::remove_file(inst.root.join("work/gate.started"));
        let _ = std::fs::remove_file(inst.root.join("gate.go"));
        let mut s = HttpSeat::new(&http, &inst.secret("w1"), version);
        s.initialize();
        let call = std::thread::spawn(move || s.call("gate", json!({})));
        wait_until("the call to be running", || {
            inst.root.join("work/gate.started").exists().then_some(())
        });
        inst.cmd().arg("restart").assert().success();
        std::fs::write(inst.root.join("gate.go"), "").unwrap();
        results.push(call.join().unwrap());
    }
    for r in results {
        assert_eq!(r, ("through the gate, w1".to_string(), false));
    }
}

/// A call in flight in a session of a seat that is then re-keyed is answered saying so before the
/// session ends (it was left with no answer: its stream just ended).
/// A call of w1's running at the gate when w1 is re-keyed: its answer, and the instance. `initialized`:
/// whether the session's client sent `notifications/initialized`.
fn call_when_re_keyed(initialized: bool) -> (String, bool, Instance, Daemon) {
    let inst = Instance::new();
    // Unboxed, a seat change does not wait for the host's calls: the call in flight is cut off.
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" }, "hostIsolation": "none" }));
    inst.add_seat("w1");
    inst.write_plugin("gate.mjs", GATE);
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    if initialized {
        s.initialize();
        sessions_registered(&inst, 1);
    } else {
        s.initialize_only();
    }
    let call = std::thread::spawn(move || s.call("gate", json!({})));
    wait_until("the call to be running", || {
        inst.root.join("work/gate.started").exists().then_some(())
    });
    inst.cmd().args(["seat", "rotate", "w1"]).assert().success();
    let (text, is_error) = call.join().expect("the call is answered");
    (text, is_error, inst, d)
}

#[test]
fn a_call_in_flight_when_its_seat_is_re_keyed_is_answered_saying_so() {
    let (text, is_error, inst, _d) = call_when_re_keyed(true);
    assert!(is_error, "{text}");
    assert!(
        text.contains("The call to gate was stopped: the seat w1 was given a new secret"),
        "{text}"
    );
    // A seat over HTTP gets its new secret with its desk; it runs no `ovai mcp`.
    assert!(
        text.contains("ask the operator for its desk again") && !text.contains("ovai mcp"),
        "{text}"
    );
    // Counted as the caller read it, refused, and not as the tool's doing: not run (helper-106: it was
    // counted a success, and cancelled in the metrics).
    let gate = inst.tool_figures("gate");
    assert_eq!(
        (&gate["calls"], &gate["refusals"], &gate["unrun"]),
        (&json!(1), &json!(1), &json!(1)),
        "{gate}"
    );
    inst.cmd().arg("status").assert().success().stdout(predicates::str::contains(
        "Calls to gate: 1 (1 refused: 1 not run or stopped (its file was not imported again, the server \
         was stopping, or its seat changed))",
    ));
}

/// The same for a session whose client never sent `notifications/initialized` (rmcp serves its calls
/// all the same): its call was left with no answer, its session closed 2 s after the change.
#[test]
fn a_call_of_a_session_never_initialized_is_answered_when_its_seat_is_re_keyed() {
    let (text, is_error, _inst, _d) = call_when_re_keyed(false);
    assert!(is_error, "{text}");
    assert!(
        text.contains("The call to gate was stopped: the seat w1 was given a new secret"),
        "{text}"
    );
}

/// One of this machine's addresses other than loopback, as another machine on the network would
/// reach it: the address the route to the outside goes from (no packet is sent).
fn this_machines_network_address() -> std::net::IpAddr {
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    udp.connect("192.0.2.1:9")
        .or_else(|_| udp.connect("10.255.255.1:9"))
        .expect("this test needs an IPv4 network interface other than loopback");
    let ip = udp.local_addr().unwrap().ip();
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    ip
}

#[test]
fn one_address_cannot_take_every_place() {
    let inst = Instance::new();
    inst.set_config(json!({
        "maxConnections": 128,
        "http": { "listen": "0.0.0.0:0", "insecure": true }
    }));
    let d = inst.start();
    // The URL names this machine by its host name: its port is what counts here.
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    let port = url.trim_end_matches("/mcp").rsplit(':').next().unwrap();
    let ip = this_machines_network_address();
    let http = Http::at(&format!("http://{ip}:{port}/mcp"));
    // 128 places, 16 of them for any one address: held here by 16 open streams.
    let mut streams = Vec::new();
    for _ in 0..16 {
        let mut s = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
        s.initialize();
        streams.push(s.open_changes());
    }
    let got = read_all(raw(&http, ""));
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(got.contains(&format!("from {ip}")), "{got}");
}

/// Connections from this machine (a TLS proxy in front of every remote seat, a local client) are held
/// only to the total: an eighth of the places would be two busy seats' worth, and any 127.x address is
/// another address anyway.
#[test]
fn this_machines_own_connections_are_held_only_to_the_total() {
    let inst = Instance::new();
    inst.fixture("echo.mjs");
    inst.add_seat("w1");
    inst.set_config(json!({ "maxConnections": 128, "http": { "listen": "127.0.0.1:0" } }));
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    // Two seats' streams, more than the 16 one address other than loopback may hold.
    let mut streams = Vec::new();
    for seat in ["lead", "w1"] {
        for _ in 0..12 {
            let mut s = HttpSeat::new(&http, &inst.secret(seat), "2025-11-25");
            s.initialize();
            streams.push(s.open_changes());
        }
    }
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2026-07-28");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "n": 1 })),
        (r#"w1: {"n":1}"#.to_string(), false)
    );
}

/// A connection from `from` (an address of this machine), with `text` written on it.
fn raw_from(http: &Http, from: std::net::Ipv4Addr, text: &str) -> std::net::TcpStream {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let std::net::SocketAddr::V4(to) = http.addr else {
        panic!("an IPv4 endpoint")
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(std::net::SocketAddrV4::new(from, 0)),
    )
    .unwrap();
    connect(fd.as_raw_fd(), &SockaddrIn::from(to)).unwrap();
    let mut t = std::net::TcpStream::from(fd);
    t.set_read_timeout(Some(PATIENCE)).unwrap();
    t.write_all(text.as_bytes()).unwrap();
    t
}

/// A connection keeps its place for its first two seconds however full the server is: a flood of
/// connections that say nothing cannot close a seat's whose request comes late (a TLS handshake, a slow
/// link); the flood's newcomers are refused instead.
#[test]
fn a_flood_cannot_close_a_seats_connection_whose_request_comes_late() {
    use std::io::Write;
    let inst = Instance::new();
    inst.fixture("echo.mjs");
    inst.set_config(json!({ "maxConnections": 20, "http": { "listen": "127.0.0.1:0" } }));
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let mut late = raw_from(&http, std::net::Ipv4Addr::new(127, 0, 0, 2), "");
    // An answer to a later connection: the accept loop has taken the seat's.
    let asked = format!(
        "GET /mcp HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
        http.host
    );
    assert!(read_all(raw(&http, &asked)).starts_with("HTTP/1.1 401"));
    // Every place and more, from three other addresses.
    let flood: Vec<std::net::TcpStream> = (0..30u8)
        .map(|i| {
            raw_from(
                &http,
                std::net::Ipv4Addr::new(127, 0, 0, [1, 3, 4][usize::from(i % 3)]),
                "",
            )
        })
        .collect();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        http.host,
        inst.secret("lead"),
        body.len()
    );
    // Written now, as a request whose head came late; on a closed connection it may fail.
    let _ = late.write_all(head.as_bytes());
    let got = read_all(late);
    assert!(
        got.starts_with("HTTP/1.1 200"),
        "the late seat's connection was closed: {got:?}"
    );
    drop(flood);
}

/// Connections that hold no seat's secret (a plugin's, anybody's on 127.0.0.1, where a TLS proxy puts
/// every remote seat) cannot keep a seat out: a request that presents a secret finds a place whatever
/// they hold, and they give theirs up, the oldest first.
#[test]
fn connections_with_no_secret_cannot_keep_a_seat_out() {
    let inst = Instance::new();
    inst.fixture("echo.mjs");
    inst.add_seat("w1");
    inst.set_config(json!({ "maxConnections": 20, "http": { "listen": "127.0.0.1:0" } }));
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    // Every place (20) and more, held by connections that say nothing, or ask without a token.
    let mut idle: Vec<std::net::TcpStream> = (0..16).map(|_| raw(&http, "")).collect();
    let asked = "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}";
    let mut asking: Vec<std::net::TcpStream> = (0..8).map(|_| raw(&http, asked)).collect();
    // Past the two seconds a connection keeps its place whatever (it may be a seat's, its request on
    // the way), theirs are given up to the seat's.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for _ in 0..3 {
        let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
        s.initialize();
        assert_eq!(
            s.call("echo", json!({ "n": 1 })),
            (r#"w1: {"n":1}"#.to_string(), false)
        );
    }
    idle.clear();
    asking.clear();
}

/// What a session sends over HTTP gets the answers it gets over the socket, in the same words: a body
/// that is not JSON or not a request, and a known method whose params do not fit.
#[test]
fn bad_bodies_are_answered_in_json_rpc_words_as_over_the_socket() {
    let (inst, _d, http) = serving(json!({}));
    for version in VERSIONS {
        let mut s = HttpSeat::new(&http, &inst.secret("w1"), version);
        s.initialize();
        let h = s.headers("tools/call", Some("echo"));
        let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        // No id can be read: 400, and the JSON-RPC error with `id: null`.
        for (body, code, words) in [
            ("{oops", -32700, "Parse error: the body is not JSON"),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                -32600,
                "a JSON-RPC message is an object, and this body is an array: send one message a body (this \
                 server takes no batches, which MCP dropped in 2025-06-18)",
            ),
        ] {
            let r = http.request("POST", &refs, body);
            assert_eq!(r.status, 400, "{version} {body}");
            assert_eq!(r.header("content-type"), Some("application/json"));
            let v = r.json();
            assert_eq!(v["id"], serde_json::Value::Null, "{v}");
            assert_eq!(v["error"]["code"], code, "{v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains(words),
                "{version}: {v}"
            );
        }
        // A request whose id can be read is answered under it.
        let r = http.request(
            "POST",
            &refs,
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#,
        );
        assert_eq!(r.status, 200, "{version}");
        let v = r.json();
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!(9), json!(-32602)),
            "{v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("params.arguments is an array, not an object"),
            "{version}: {v}"
        );
        // A notification is never answered, whatever is wrong with it.
        let r = http.request(
            "POST",
            &refs,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":5}"#,
        );
        assert_eq!(r.status, 202, "{version}");
        assert_eq!(r.text(), "", "{version}");
        // And the session goes on.
        assert!(!s.call("echo", json!({})).1, "{version}");
    }
}

/// A session is idle when it has sent nothing and holds no stream: one whose client keeps its GET stream
/// open (waiting for list changes, as Claude Code does) is not, however long it is quiet.
#[test]
fn a_session_holding_its_stream_is_not_idle_and_one_that_holds_nothing_is_closed() {
    let (inst, _d, http) = serving(json!({ "sessionIdleSeconds": 2 }));
    let mut listening = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    listening.initialize();
    let _stream = listening.open_changes();
    let mut quiet = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    quiet.initialize();
    std::thread::sleep(std::time::Duration::from_secs(5));
    let (_, r) = quiet.send("tools/list", json!({}));
    assert_eq!(r.status, 404);
    assert!(
        r.text()
            .contains("holds no MCP session with that id (it ended, idled out"),
        "the quiet one was closed"
    );
    assert!(
        listening.tool_names().contains(&"echo".to_string()),
        "the one holding its stream serves on"
    );
}

/// What rmcp would answer in a line of plain text of its own (a header missing or wrong) or with a bare
/// method name is said as the socket says it: a JSON-RPC error whose message is a sentence.
#[test]
fn what_is_wrong_with_a_request_is_said_in_json_rpc_words() {
    let (inst, _d, http) = serving(json!({}));
    for version in VERSIONS {
        let mut s = HttpSeat::new(&http, &inst.secret("w1"), version);
        s.initialize();
        if version >= "2026-07-28" {
            // Without a session, rmcp answers: 404 and its own -32601.
            let (_, r) = s.send("resources/list", json!({}));
            assert_eq!(r.status, 404, "{version}");
            assert_eq!(r.json()["error"]["code"], -32601, "{version}");
            continue;
        }
        let (id, mut r) = s.send("resources/list", json!({}));
        assert_eq!(r.status, 200, "{version}");
        let v = r.answer(id);
        assert_eq!(v["error"]["code"], -32601, "{version}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(
                "Method not found: this server does not serve resources/list; it serves tools/list and \
                 tools/call, initialize and ping up to 2025-11-25"
            ),
            "{version}: {v}"
        );
    }
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let with = |drop: &[&str], add: &[(&str, &str)]| {
        let mut h: Vec<(String, String)> = s
            .headers("tools/list", None)
            .into_iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()))
            .collect();
        for (k, v) in add {
            h.retain(|(name, _)| name != k);
            h.push((k.to_string(), v.to_string()));
        }
        h
    };
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    for (method, headers, status, words) in [
        (
            "POST",
            with(&["mcp-session-id"], &[]),
            400,
            "this request carries no Mcp-Session-Id header",
        ),
        (
            "GET",
            with(&["mcp-session-id"], &[]),
            400,
            "this request carries no Mcp-Session-Id header",
        ),
        (
            "POST",
            with(&[], &[("mcp-protocol-version", "1999-01-01")]),
            400,
            "the MCP-Protocol-Version header says 1999-01-01, a revision this server does not speak",
        ),
        // Revisions are dates, but one that sorts after 2026-07-28 is not therefore 2026-07-28.
        (
            "POST",
            with(&[], &[("mcp-protocol-version", "2099-01-01")]),
            400,
            "the MCP-Protocol-Version header says 2099-01-01, a revision this server does not speak",
        ),
        (
            "GET",
            with(&[], &[("mcp-protocol-version", "zzz")]),
            400,
            "the MCP-Protocol-Version header says zzz, a revision this server does not speak",
        ),
        (
            "POST",
            with(
                &["mcp-session-id"],
                &[("mcp-protocol-version", "2026-07-29")],
            ),
            400,
            "the MCP-Protocol-Version header says 2026-07-29, a revision this server does not speak",
        ),
        // A header past what rmcp's answer can be read back at: said all the same (helper-80).
        (
            "POST",
            with(
                &[],
                &[(
                    "mcp-protocol-version",
                    &format!("2025-06-18{}", "x".repeat(5000)),
                )],
            ),
            400,
            "the MCP-Protocol-Version header is 5,010 bytes long: a protocol version is a date",
        ),
        (
            "POST",
            with(&[], &[("accept", "application/json")]),
            406,
            "the Accept header must name both application/json and text/event-stream",
        ),
        (
            "POST",
            with(&[], &[("content-type", "text/plain")]),
            415,
            "the body must be sent with Content-Type: application/json",
        ),
    ] {
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let body = if method == "POST" { list } else { "" };
        let r = http.request(method, &refs, body);
        assert_eq!(r.status, status, "{method} {headers:?}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v = r.json();
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(words), "{method} {headers:?}: {v}");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        // The generic server error: -32001 is the SDKs' RequestTimeout, shown as such.
        assert_eq!(v["error"]["code"], -32000, "{v}");
    }
    // Two of a header that says who is asking: which one a proxy in front checked is anybody's guess.
    let token = format!("Bearer {}", inst.secret("w1"));
    for (extra, words) in [
        (
            ("authorization", "Bearer not-a-secret"),
            "this request carries 2 Authorization headers, and this server takes exactly one",
        ),
        (
            ("host", "example.com"),
            "this request carries 2 Host headers, and this server takes exactly one",
        ),
        (
            ("mcp-session-id", "another"),
            "this request carries 2 Mcp-Session-Id headers, and this server takes exactly one",
        ),
        (
            ("content-type", "text/plain"),
            "this request carries 2 Content-Type headers, and this server takes exactly one",
        ),
        (
            ("mcp-protocol-version", "2025-06-18"),
            "this request carries 2 MCP-Protocol-Version headers, and this server takes exactly one",
        ),
        // The second after the server's own: only the first was checked (helper-80).
        (
            ("origin", "http://evil.com"),
            "this request carries 2 Origin headers, and this server takes exactly one",
        ),
    ] {
        let mut headers = with(&[], &[]);
        if extra.0 == "authorization" {
            headers.retain(|(k, _)| k != "authorization");
            headers.push(("authorization".into(), token.clone()));
        }
        if extra.0 == "origin" {
            headers.push(("origin".into(), format!("http://{}", http.host)));
        }
        headers.push((extra.0.to_string(), extra.1.to_string()));
        let refs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let r = http.request("POST", &refs, list);
        assert_eq!(r.status, 400, "{extra:?}");
        let v = r.json();
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with(words),
            "{extra:?}: {v}"
        );
    }
    // The session is none the worse.
    assert!(s.tool_names().contains(&"echo".to_string()));
}

#[test]
fn a_request_hyper_cannot_read_is_answered_in_json_rpc_words() {
    let (_inst, _d, http) = serving(json!({}));
    let host = format!("host: {}\r\n", http.addr);
    let many: String = (0..120).map(|i| format!("x-h{i}: v\r\n")).collect();
    for (head, status, words) in [
        (
            format!("POST /mcp HTTP/1.1\r\n{host}bad header: x\r\n\r\n"),
            "HTTP/1.1 400 ",
            "The request could not be read as HTTP/1.1",
        ),
        (
            format!(
                "POST /mcp HTTP/1.1\r\n{host}content-length: 2\r\ncontent-length: 3\r\n\r\n{{}}"
            ),
            "HTTP/1.1 400 ",
            "The request could not be read as HTTP/1.1",
        ),
        (
            format!("POST /mcp HTTP/1.1\r\n{host}{many}\r\n"),
            "HTTP/1.1 431 ",
            "The request's head is larger than this server reads",
        ),
        (
            format!("POST /mcp?{} HTTP/1.1\r\n{host}\r\n", "q".repeat(70_000)),
            "HTTP/1.1 414 ",
            "The request's target is longer than this server reads",
        ),
    ] {
        let got = read_all(raw(&http, &head));
        assert!(got.starts_with(status), "{head}: {got}");
        let (answer_head, body) = got.split_once("\r\n\r\n").unwrap();
        assert!(
            answer_head.contains("content-type: application/json"),
            "{got}"
        );
        let v: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {got}"));
        assert_eq!(v["error"]["code"], -32600, "{got}");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(words),
            "{got}"
        );
    }
}

/// A request whose id is already in flight in its session is refused under that id, as on the socket:
/// rmcp would run it a second time and leave the first unanswered.
#[test]
fn an_id_already_in_flight_in_a_session_is_refused_as_on_the_socket() {
    let (inst, _d, http) = serving(json!({}));
    inst.write_plugin(
        "gate.mjs",
        r#"import { existsSync, writeFileSync } from "node:fs";
export const description = "Waits at a gate the test opens, counting its runs.";
export const inputSchema = { type: "object" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function run(args, { root }) {
  writeFileSync(`${root}/work/gate-${Date.now()}-${Math.random()}`, "");
  for (let i = 0; i < 3000 && !existsSync(`${root}/work/gate.go`); i++) await sleep(10);
  return { text: "through" };
}
"#,
    );
    inst.cmd().arg("restart").assert().success();
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let body = json!({ "jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": { "name": "gate", "arguments": {} } });
    let first = {
        let mut other = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
        other.session = s.session.clone();
        let s = other;
        let body = body.clone();
        std::thread::spawn(move || s.post("tools/call", Some("gate"), &body).answer(77))
    };
    let runs = |inst: &Instance| {
        std::fs::read_dir(inst.root.join("work"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("gate-"))
            .count()
    };
    wait_until("the first call to run", || (runs(&inst) == 1).then_some(()));
    let second = s.post("tools/call", Some("gate"), &body).json();
    assert_eq!(second["id"], 77, "{second}");
    assert_eq!(second["error"]["code"], -32600, "{second}");
    assert!(
        second["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a request with the id 77 is already in flight in this session"),
        "{second}"
    );
    std::fs::write(inst.root.join("work/gate.go"), "").unwrap();
    let answer = first.join().unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"], "through",
        "{answer}"
    );
    assert_eq!(runs(&inst), 1, "the plugin ran once");
    // Its answer given, the id is free again.
    assert_eq!(s.call("gate", json!({})), ("through".to_string(), false));
}

/// What a body takes once read is bounded as a line's is: one that would take too much is refused in
/// words before rmcp reads it, with `-32602` under its id as on the socket (protocol.md), so a client
/// knows which call it was.
#[test]
fn a_body_that_would_take_too_much_once_read_is_refused_in_words() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let heavy = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"echo","arguments":{{"a":[{}[]]}}}}}}"#,
        "[[]],".repeat(700_000)
    );
    let h = s.headers("tools/call", Some("echo"));
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = http.request("POST", &refs, &heavy);
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["id"], 5, "{v}");
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MB once read, more than the 64 MB this server reads for one request"),
        "{v}"
    );
    assert!(!s.call("echo", json!({})).1);
}

/// Whether an SSE body holds an event whose data is empty (a priming event).
fn has_priming(sse: &str) -> bool {
    sse.split("\n\n").any(|event| {
        event.lines().any(|l| l.starts_with("data:"))
            && event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .all(|d| d.trim().is_empty())
    })
}

#[test]
fn priming_events_go_only_to_clients_of_2025_11_25_and_later() {
    let (inst, _d, http) = serving(json!({}));
    // As Gemini CLI: initialize at 2025-06-18, then requests with no MCP-Protocol-Version header.
    let mut old = HttpSeat::new(&http, &inst.secret("lead"), "2025-06-18");
    old.initialize();
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {} });
    let headers: Vec<(String, String)> = old
        .headers("tools/list", None)
        .into_iter()
        .filter(|(k, _)| k != "mcp-protocol-version")
        .collect();
    let refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = http.request("POST", &refs, &body.to_string());
    assert_eq!(r.status, 200);
    let sse = r.text();
    assert!(sse.contains("\"tools\""), "{sse}");
    assert!(!has_priming(&sse), "{sse}");
    // A client of 2025-11-25 gets its priming event, to resume from.
    let mut new = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    new.initialize();
    let (_, r) = new.send("tools/list", json!({}));
    let sse = r.text();
    assert!(sse.contains("\"tools\"") && has_priming(&sse), "{sse}");
}

/// A 2026-07-28 client at a URL desk (Claude Code) ends its session by closing its listen stream: the
/// listen's final result then has nobody to go to, which is no error. rmcp said `ERROR ... failed to send
/// pending response during drain` on the operator's stderr at every such end (helper-95).
#[test]
fn a_listen_stream_closed_by_its_client_is_no_error_on_stderr() {
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    inst.fixture("echo.mjs");
    // rmcp's own "serve finished" comes after its drain: a mark that the close was dealt with.
    let d = Daemon::start_with_env(&inst, &[("OVAI_LOG", "info,rmcp=warn,rmcp::service=info")]);
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let mut s = HttpSeat::new(&http, &inst.secret("lead"), "2026-07-28");
    let (_, mut r) = s.send(
        "subscriptions/listen",
        json!({ "notifications": { "toolsListChanged": true } }),
    );
    assert_eq!(r.status, 200);
    let ack = r.next_message().unwrap();
    assert!(ack.get("error").is_none(), "{ack}");
    drop(r);
    let said = wait_until("the listen's serve loop to finish", || {
        let said = std::fs::read_to_string(&d.stderr).ok()?;
        said.contains("serve finished").then_some(said)
    });
    assert!(!said.contains("ERROR"), "{said}");
    assert!(!s.call("echo", json!({})).1);
}

#[test]
fn from_2026_07_28_a_method_not_served_and_initialize_are_404_in_words() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("lead"), "2026-07-28");
    // initialize and ping are gone from that revision: rmcp's answer to ping named only the method.
    for (method, params, words) in [
        (
            "prompts/list",
            json!({}),
            "Method not found: this server does not serve prompts/list; it serves",
        ),
        (
            "initialize",
            json!({ "protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": { "name": "x", "version": "1" } }),
            "Method not found: initialize is gone from MCP 2026-07-28 on",
        ),
        (
            "ping",
            json!({}),
            "Method not found: ping is gone from MCP 2026-07-28 on",
        ),
    ] {
        let (_, r) = s.send(method, params);
        assert_eq!(r.status, 404, "{method}");
        let v = r.json();
        assert_eq!(v["error"]["code"], -32601, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(words),
            "{v}"
        );
    }
    // A listen for notifications this server never sends is acknowledged, not refused.
    let (_, mut r) = s.send(
        "subscriptions/listen",
        json!({ "notifications": { "promptsListChanged": true } }),
    );
    assert_eq!(r.status, 200);
    let ack = r.next_message().unwrap();
    assert!(ack.get("error").is_none(), "{ack}");
}

/// A call whose arguments are nested past what the server reads gets the JSON-RPC error a line gets on
/// the socket (`-32602`, in words, under its id, 200), not rmcp's parse failure as a 415.
#[test]
fn arguments_nested_too_deep_are_invalid_params_under_the_id() {
    let (inst, _d, http) = serving(json!({}));
    let nested = |n: usize| {
        let mut v = json!(1);
        for _ in 0..n {
            v = json!([v]);
        }
        v
    };
    for version in VERSIONS {
        let mut s = HttpSeat::new(&http, &inst.secret("w1"), version);
        s.initialize();
        let (text, is_error) = s.call("echo", json!({ "v": nested(100) }));
        assert!(!is_error, "{version}: {text}");
        for depth in [125, 300] {
            let (id, mut r) = s.send(
                "tools/call",
                json!({ "name": "echo", "arguments": { "v": nested(depth) } }),
            );
            assert_eq!(r.status, 200, "{version} {depth}");
            let a = r.answer(id);
            assert_eq!(a["error"]["code"], -32602, "{version} {depth}: {a}");
            let words = a["error"]["message"].as_str().unwrap();
            assert!(
                words.starts_with("Invalid params: ") && words.contains("nested deeper than"),
                "{version} {depth}: {words}"
            );
        }
    }
}

/// A 2026-07-28 request whose `_meta` names a protocol version of megabytes is refused in words that
/// say its length, not echoed whole.
#[test]
fn a_huge_protocol_version_is_refused_not_echoed() {
    let (inst, _d, http) = serving(json!({}));
    let s = HttpSeat::new(&http, &inst.secret("w1"), "2026-07-28");
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": "x".repeat(1 << 20),
        "io.modelcontextprotocol/clientCapabilities": {} } } });
    let r = s.post("tools/list", None, &body);
    assert_eq!(r.status, 200);
    let text = r.text();
    assert!(text.len() < 1000, "{} bytes", text.len());
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["id"], 7);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("protocolVersion is 1048578 bytes long"),
        "{v}"
    );
}

/// A 405 says in words what its Allow header says: a 2026-07-28 client (no session, so no stream to GET)
/// is told to POST, a 2025-* one what the endpoint takes.
#[test]
fn a_405_says_what_its_allow_header_says() {
    let (inst, _d, http) = serving(json!({}));
    let token = format!("Bearer {}", inst.secret("w1"));
    let r = http.request(
        "GET",
        &[
            ("authorization", &token),
            ("accept", "text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
        ],
        "",
    );
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
    let v = r.json();
    let words = v["error"]["message"].as_str().unwrap();
    assert!(
        words.contains("takes only POST from a client of MCP 2026-07-28")
            && !words.contains("DELETE"),
        "{words}"
    );
}

/// A 2026-07-28 request carrying an `Mcp-Session-Id` the server does not hold is told to drop the header:
/// there is no session to initialize from that revision on.
#[test]
fn a_stale_session_id_on_a_2026_request_is_told_to_go() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2026-07-28");
    s.session = Some("no-such-session".into());
    let (_, r) = s.send("tools/list", json!({}));
    assert_eq!(r.status, 404);
    let v = r.json();
    let words = v["error"]["message"].as_str().unwrap();
    assert!(
        words.contains("send the request without the Mcp-Session-Id header")
            && !words.contains("initialize"),
        "{words}"
    );
}

/// A body this server would not read as the client meant it is refused in words: compressed (415), or in
/// a transfer coding it does not read (501).
#[test]
fn bodies_framed_or_coded_as_this_server_does_not_read_are_refused_in_words() {
    let (inst, _d, http) = serving(json!({}));
    let token = format!("Bearer {}", inst.secret("w1"));
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let chunked = format!("{:x}\r\n{ping}\r\n0\r\n\r\n", ping.len());
    for (extra, body, status, words) in [
        (
            ("content-encoding", "gzip"),
            ping.to_string(),
            415,
            "Content-Encoding",
        ),
        (
            ("transfer-encoding", "gzip, chunked"),
            chunked,
            501,
            "Transfer-Encoding other than chunked",
        ),
    ] {
        let r = http.request(
            "POST",
            &[
                ("authorization", &token),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-11-25"),
                extra,
            ],
            &body,
        );
        assert_eq!(r.status, status, "{extra:?}");
        let v = r.json();
        assert!(
            v["error"]["message"].as_str().unwrap().contains(words),
            "{extra:?}: {v}"
        );
    }
}

/// A 2025-11-25 call whose connection broke while it ran, resumed with `Last-Event-ID` after it was
/// answered, gets its answer: rmcp alone dropped a request's events as it sent the answer, and the
/// client got an empty stream.
#[test]
fn an_answer_made_while_its_client_was_away_is_replayed_on_resume() {
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    inst.write_plugin(
        "slow.mjs",
        r#"export const description = "Answers after a while."; export const inputSchema = { type: "object" }; export async function run() { await new Promise((r) => setTimeout(r, 700)); return { text: "slow done" }; }"#,
    );
    inst.add_seat("w1");
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let (id, mut r) = s.send("tools/call", json!({ "name": "slow", "arguments": {} }));
    assert_eq!(r.status, 200);
    let primed = r.next_event_id().expect("the priming event's id");
    drop(r);
    wait_until("the call to be answered", || {
        (inst.tool_figures("slow")["calls"] == 1).then_some(())
    });
    let mut resumed = s.resume_changes(&primed);
    assert_eq!(resumed.status, 200);
    let answer = resumed.answer(id);
    assert_eq!(
        text_of(&answer),
        ("slow done".to_string(), false),
        "{answer}"
    );
    // And once more, within the minute its events are kept.
    let mut again = s.resume_changes(&primed);
    assert_eq!(text_of(&again.answer(id)).0, "slow done");
    // Resumed from the answer's own event, nothing is replayed: what comes after it, as MCP asks (the
    // answer again made a client that counts an error as no answer resume for ever).
    let mut answered = s.resume_changes(&primed);
    let answer_event = loop {
        let (event, m) = answered.next_event().expect("the answer's event");
        if m.get("result").is_some() {
            break event.expect("the answer's event has an id");
        }
    };
    let mut after = s.resume_changes(&answer_event);
    assert_eq!(after.status, 200);
    assert!(after.next_event().is_none(), "nothing after the answer");
    // Resumed while the call still runs, the stream goes on to the answer; broken again, and resumed
    // after, the answer is there still.
    let (id, mut r) = s.send("tools/call", json!({ "name": "slow", "arguments": {} }));
    let primed = r.next_event_id().expect("the priming event's id");
    drop(r);
    let mut resumed = s.resume_changes(&primed);
    assert_eq!(text_of(&resumed.answer(id)).0, "slow done");
    let (id, mut r) = s.send("tools/call", json!({ "name": "slow", "arguments": {} }));
    let primed = r.next_event_id().expect("the priming event's id");
    drop(r);
    drop(s.resume_changes(&primed));
    wait_until("the third call to be answered", || {
        (inst.tool_figures("slow")["calls"] == 3).then_some(())
    });
    let mut last = s.resume_changes(&primed);
    assert_eq!(text_of(&last.answer(id)).0, "slow done");
    // A connection that broke without a word is written to as if it were there: its answer is kept
    // all the same (here the client holds the connection and reads nothing more).
    let (id, mut r) = s.send("tools/call", json!({ "name": "slow", "arguments": {} }));
    let primed = r.next_event_id().expect("the priming event's id");
    wait_until("the fourth call to be answered", || {
        (inst.tool_figures("slow")["calls"] == 4).then_some(())
    });
    let mut elsewhere = s.resume_changes(&primed);
    assert_eq!(text_of(&elsewhere.answer(id)).0, "slow done");
    drop(r);
}

/// One seat's client holding every connection the server takes, idle between its requests, cannot keep
/// another seat out: a newcomer closes the idle connection of the seat that holds the most.
#[test]
fn one_seat_holding_every_connection_cannot_keep_another_out() {
    use std::io::{BufRead, BufReader, Read, Write};
    let (inst, d, http) = serving(json!({}));
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(inst.root.join("openovai.json")).unwrap())
            .unwrap();
    config["maxConnections"] = json!(4);
    std::fs::write(inst.root.join("openovai.json"), config.to_string()).unwrap();
    inst.cmd().arg("restart").assert().success();
    let addr = d.status().unwrap()["http"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    // Four kept-alive connections of w1, each with a request answered and nothing under way.
    let lead = inst.secret("lead");
    let held: Vec<_> = (0..4)
        .map(|_| {
            let mut tcp = std::net::TcpStream::connect(&addr).unwrap();
            tcp.set_read_timeout(Some(PATIENCE)).unwrap();
            write!(
                tcp,
                "GET /mcp HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {lead}\r\naccept: text/event-stream\r\n\r\n"
            )
            .unwrap();
            let mut reader = BufReader::new(tcp.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = n.trim().parse().unwrap();
                }
                if line.trim().is_empty() {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            tcp
        })
        .collect();
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "v": 1 })),
        (r#"w1: {"v":1}"#.to_string(), false)
    );
    drop(held);
}

/// A session id holding characters no id has is said to be such, not to be missing (helper-61).
#[test]
fn a_session_id_no_session_could_have_is_said_so() {
    let (inst, _d, http) = serving(json!({}));
    let s = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    let mut h = s.headers("tools/list", None);
    h.retain(|(k, _)| k != "mcp-session-id");
    h.push(("mcp-session-id".into(), "ü<script>".into()));
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {} });
    let r = http.request("POST", &refs, &body.to_string());
    assert_eq!(r.status, 400);
    let message = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("the Mcp-Session-Id header holds characters no session id has"),
        "{message}"
    );
}

/// One seat sending bodies slowly keeps no other seat out: each seat may hold a quarter of the bodies
/// the server reads at once (helper-64: eight bodies of 4 MiB held one byte short locked every seat out
/// with 503 until they timed out, again and again).
#[test]
fn one_seats_bodies_held_unfinished_keep_no_other_seat_out() {
    use std::io::Write;
    let (inst, _d, http) = serving(json!({}));
    let w1 = HttpSeat::new(&http, &inst.secret("w1"), "2026-07-28");
    let mut head = format!("POST /mcp HTTP/1.1\r\nhost: {}\r\n", http.host);
    for (k, v) in w1.headers("tools/call", Some("echo")) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("content-length: 4194304\r\n\r\n");
    let held: Vec<std::net::TcpStream> = (0..9)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(http.addr).unwrap();
            c.set_write_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let _ = c.write_all(head.as_bytes());
            // All but the last byte, a chunk at a time, ignoring a connection closed on us.
            let chunk = vec![b' '; 64 * 1024];
            for _ in 0..63 {
                if c.write_all(&chunk).is_err() {
                    break;
                }
            }
            let _ = c.write_all(&chunk[1..]);
            c
        })
        .collect();
    // The Leader is answered meanwhile.
    let lead = HttpSeat::new(&http, &inst.secret("lead"), "2026-07-28");
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } });
    let r = lead.post("tools/list", None, &body);
    let status = r.status;
    assert_eq!(status, 200, "{}", r.text());
    drop(held);
}

/// Over HTTP as over the socket, the report the pace held back reaches the caller before the answer: a
/// progress bar reaches the end the plugin reported.
#[test]
fn the_last_progress_report_reaches_an_http_caller_before_the_answer() {
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    inst.write_plugin(
        "steady.mjs",
        r#"export const description = "Reports steadily, then answers at once."; export const inputSchema = { type: "object" };
export async function run(args, { progress }) {
  for (let i = 1; i <= 8; i++) { progress(`step ${i}`, { progress: i, total: 8 }); if (i < 8) await new Promise((r) => setTimeout(r, 30)); }
  return { text: "done" };
}"#,
    );
    inst.add_seat("w1");
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let (_, mut r) = s.send(
        "tools/call",
        json!({ "name": "steady", "arguments": {}, "_meta": { "progressToken": "bar" } }),
    );
    let mut last = None;
    let answer = loop {
        let m = r.next_message().expect("the call's stream is open");
        if m["method"] == "notifications/progress" {
            last = Some(m["params"]["message"].clone());
        } else if m.get("result").is_some() {
            break m;
        }
    };
    assert_eq!(text_of(&answer).0, "done");
    assert_eq!(last, Some(json!("step 8")), "{answer}");
}

/// A request with no session naming a revision that begins with initialize (2025-11-25) in its _meta is
/// told to initialize, as on the socket: rmcp served it as 2026-07-28 would, with no session.
#[test]
fn a_sessionless_request_of_a_handshake_revision_is_told_to_initialize() {
    let (inst, _d, http) = serving(json!({}));
    let s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    let h = s.headers("tools/call", Some("whoami"));
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    for (method, params) in [
        (
            "tools/call",
            r#"{"name":"whoami","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        ),
        (
            "ping",
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18","io.modelcontextprotocol/clientCapabilities":{}}}"#,
        ),
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#);
        let r = http.request("POST", &refs, &body);
        assert_eq!(r.status, 400, "{method}");
        let v = r.json();
        assert_eq!(v["error"]["code"], -32600, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("send initialize first"),
            "{v}"
        );
    }
}

/// A call whose client went away goes on (a 2025-* client may resume its stream), and still counts
/// against its seat's maxStreamsPerSeat until it ends: a Worker sending calls and closing each
/// connection ran a thousand at once, and other seats' calls waited behind them (helper-80). Ending the
/// session (DELETE) stops its calls.
#[test]
fn calls_whose_client_went_away_count_against_the_seat_until_their_session_ends() {
    let (inst, d, http) = serving(json!({ "maxStreamsPerSeat": 3 }));
    inst.fixture("fault-never.mjs");
    inst.cmd().arg("restart").assert().success();
    let running = || d.status().unwrap()["callsRunningTotal"].as_u64().unwrap();
    let mut w1 = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    w1.initialize();
    for i in 0..3 {
        let (_, r) = w1.send(
            "tools/call",
            json!({ "name": "fault-never", "arguments": { "tag": format!("w1-{i}") } }),
        );
        assert_eq!(r.status, 200);
        // The connection closes here, the call in flight.
    }
    wait_until("the three calls to run", || (running() == 3).then_some(()));
    let (_, r) = w1.send("tools/call", json!({ "name": "echo", "arguments": {} }));
    assert_eq!(r.status, 429);
    let said = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        said.contains("the seat w1 has 3 requests and streams open on this server, its limit"),
        "{said}"
    );
    // Another seat is not held up.
    let mut lead = HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    lead.initialize();
    assert!(!lead.call("echo", json!({})).1);
    // The session ends: its calls are stopped (their signals fire), and the seat has room again.
    let h = w1.headers("DELETE", None);
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(http.request("DELETE", &refs, "").status, 204);
    wait_until("the calls to be stopped", || (running() == 0).then_some(()));
    for i in 0..3 {
        let note = inst.root.join(format!("work/aborted-w1-{i}"));
        wait_until("the call's signal to fire", || note.exists().then_some(()));
    }
    let mut again = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    again.initialize();
    assert!(!again.call("echo", json!({})).1);
}

/// A session whose call runs on after its client went away is in use, not idle: it is not closed under
/// it (the call could be neither resumed nor stopped then), while an idle one beside it is (helper-83).
#[test]
fn a_session_with_a_call_running_is_not_closed_as_idle() {
    let (inst, d, http) = serving(json!({ "sessionIdleSeconds": 1 }));
    inst.fixture("fault-never.mjs");
    inst.cmd().arg("restart").assert().success();
    let mut busy = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    busy.initialize();
    let mut idle = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    idle.initialize();
    let (_, r) = busy.send(
        "tools/call",
        json!({ "name": "fault-never", "arguments": {} }),
    );
    assert_eq!(r.status, 200);
    drop(r);
    let running = || d.status().unwrap()["callsRunningTotal"].as_u64().unwrap();
    wait_until("the call to run", || (running() == 1).then_some(()));
    // The idle one goes (asked nothing meanwhile: a request is a use); the sweep that closed it
    // looked at the busy one too.
    wait_until("the idle session to be closed", || {
        (d.status().unwrap()["sessions"].as_u64()? == 1).then_some(())
    });
    let (_, r) = idle.send("ping", json!({}));
    assert_eq!(r.status, 404, "the idle session is closed");
    assert_eq!(running(), 1);
    let (_, r) = busy.send("tools/list", json!({}));
    assert_eq!(r.status, 200, "the busy session is open");
}

/// A request line naming another host than its Host header (`POST http://evil.com/mcp`, which RFC 9112
/// says is for evil.com) is refused; one naming this server is served (helper-80).
#[test]
fn a_request_line_naming_another_host_is_refused() {
    let (inst, _d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-11-25");
    s.initialize();
    let h = s.headers("tools/list", None);
    let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    let r = http.request_at("http://evil.com/mcp", "POST", &refs, list);
    assert_eq!(r.status, 400);
    let said = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(
        said,
        format!(
            "this request's line names the host \"evil.com\", and its Host header \"{}\": send the path alone \
             (POST /mcp), with a Host header naming this server",
            http.host
        )
    );
    let mut r = http.request_at(&format!("http://{}/mcp", http.host), "POST", &refs, list);
    assert_eq!(r.status, 200);
    assert!(r.answer(3)["result"]["tools"].is_array());
}

/// A stop that cannot keep the HTTP sessions says so in runtime.log, where the person whose clients
/// start over reads; it went to the server's stderr only (helper-101).
#[test]
fn a_stop_that_cannot_keep_the_http_sessions_says_so_in_a_row() {
    let (inst, d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-06-18");
    s.initialize();
    // A folder where the file goes: the write cannot replace it.
    std::fs::create_dir(inst.root.join(".ovai/http-sessions.json")).unwrap();
    assert!(d.stop().success());
    let rows = inst.rows("server");
    assert!(
        rows.iter().any(
            |r| r.starts_with("1 HTTP session could not be kept for the next start (")
                && r.ends_with("): a client whose session is not taken up opens a new one.")
        ),
        "{rows:?}"
    );
}

/// Sessions a stop left longer ago than they are kept by the clock (one stepped forward between stop and
/// start) are said not taken up, not counted as kept (helper-101).
#[test]
fn sessions_left_too_long_ago_are_said_not_taken_up() {
    let (inst, d, http) = serving(json!({}));
    let mut s = HttpSeat::new(&http, &inst.secret("w1"), "2025-06-18");
    s.initialize();
    assert!(d.stop().success());
    let path = inst.root.join(".ovai/http-sessions.json");
    let mut kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (_, session) in kept.as_object_mut().unwrap() {
        let at = session["left_at"].as_u64().unwrap();
        session["left_at"] = json!(at - 3600);
    }
    std::fs::write(&path, kept.to_string()).unwrap();
    let _d = inst.start();
    let rows = inst.rows("server");
    assert!(
        rows.contains(
            &"1 HTTP session of the last server is not taken up, left more than 15 minutes ago by this \
              machine's clock (or at a time still to come): a client whose session is not taken up opens a \
              new one."
                .to_string()
        ),
        "{rows:?}"
    );
    assert!(
        !rows
            .iter()
            .any(|r| r.contains("are kept for their clients")),
        "{rows:?}"
    );
}

/// A 2025 session outlives `ovai stop` and `ovai serve` (an upgrade, a service restarted): Gemini CLI
/// never opens another after a 404, and its seat stayed broken until Gemini was restarted (helper-95).
/// Only its own seat takes it up again, and only with the secret it had.
#[test]
fn a_session_outlives_a_stop_and_a_start_for_its_own_seat_only() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": format!("127.0.0.1:{port}") } }));
    inst.fixture("echo.mjs");
    inst.add_seat("w1");
    inst.add_seat("w2");
    let d = inst.start();
    let http = Http::at(&format!("http://127.0.0.1:{port}/mcp"));
    let mut w1 = HttpSeat::new(&http, &inst.secret("w1"), "2025-06-18");
    w1.initialize();
    assert!(!w1.call("echo", json!({ "text": "before" })).1);
    let mut w2 = HttpSeat::new(&http, &inst.secret("w2"), "2025-06-18");
    w2.initialize();
    let mut lead = HttpSeat::new(&http, &inst.secret("lead"), "2025-06-18");
    lead.initialize();
    assert!(d.stop().success());
    let d = inst.start();
    assert!(
        inst.rows("server")
            .iter()
            .any(|r| r.starts_with("3 HTTP sessions of the last server are kept")),
        "{:?}",
        inst.rows("server")
    );
    // Another seat's secret with w1's session id is turned away before it is taken up, and after.
    let mut other = HttpSeat::new(&http, &inst.secret("w2"), "2025-06-18");
    other.session = w1.session.clone();
    let (_, r) = other.send("tools/list", json!({}));
    assert_eq!(r.status, 404);
    let (text, refused) = w1.call("echo", json!({ "text": "after" }));
    assert!(!refused, "{text}");
    assert!(text.contains("after"), "{text}");
    let (_, r) = other.send("tools/list", json!({}));
    assert_eq!(r.status, 403);
    // A session ended with DELETE before it was taken up stays ended.
    let r = lead.http.request(
        "DELETE",
        &[
            ("authorization", &format!("Bearer {}", inst.secret("lead"))),
            ("mcp-session-id", lead.session.as_deref().unwrap()),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        "",
    );
    assert!(r.status < 300, "{}", r.status);
    // One not taken up by the next start is kept by its stop for the one after (an upgrade, then a
    // fix), as long as it is fresh.
    assert!(d.stop().success());
    let _d = inst.start();
    assert_eq!(w2.tool_names().len(), 3);
    let (_, r) = lead.send("tools/list", json!({}));
    assert_eq!(r.status, 404);
    // A seat given a new secret meanwhile does not take up its old session.
    inst.cmd().args(["seat", "rotate", "w2"]).assert().success();
    let mut rotated = HttpSeat::new(&http, &inst.secret("w2"), "2025-06-18");
    rotated.session = w2.session.clone();
    let (_, r) = rotated.send("tools/list", json!({}));
    assert_eq!(r.status, 404);
}
