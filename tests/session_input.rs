//! What a session sends is hostile until checked: every line gets its answer as JSON-RPC 2.0 says (or
//! none, for a notification), the session stays open, ids are echoed as sent, and nothing a session sends
//! makes the bridge invent a restart.

mod common;
use common::*;
use serde_json::{Value, json};
use std::io::Write;

const SLOW: &str = r#"
export const description = "Answers after a moment.";
export const inputSchema = { type: "object" };
export async function run() { await new Promise((r) => setTimeout(r, 300)); return { text: "slow done" }; }
"#;

fn raw(s: &mut Session, bytes: &[u8]) {
    s.writer().write_all(bytes).unwrap();
    s.writer().flush().unwrap();
}

/// The next error answer with this id.
fn error_for(s: &mut Session, id: Value) -> Value {
    s.recv_where(|m| m["id"] == id && m.get("error").is_some())["error"].clone()
}

#[test]
fn every_bad_line_is_answered_and_the_session_goes_on() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let bridge = s.child.id();
    let rss = || rss_kb(bridge);
    let before = rss();

    raw(&mut s, b"this is not json\n");
    let e = error_for(&mut s, Value::Null);
    assert_eq!(e["code"], -32700, "{e}");

    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}\n",
    );
    let e = error_for(&mut s, Value::Null);
    assert_eq!(
        (e["code"].clone(), e["message"].clone()),
        (json!(-32700), json!("Parse error: the line is not UTF-8"))
    );

    // A byte order mark, invisible where a client's author looks, is named.
    raw(
        &mut s,
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n".as_bytes(),
    );
    let e = error_for(&mut s, Value::Null);
    assert_eq!(e["code"], -32700, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("byte order mark (U+FEFF)"),
        "{e}"
    );

    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{\"x\":\"a\x00b\"}}\n",
    );
    assert_eq!(error_for(&mut s, Value::Null)["code"], -32700);

    // Half a surrogate pair (a string cut mid-emoji) is taken as U+FFFD, and the call answered as sent.
    raw(&mut s, br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow","arguments":{"s":"hi \ud83d"}}}"#);
    raw(&mut s, b"\n");
    let r = s.recv_where(|m| m["id"] == 4);
    assert_eq!(text_of(&r), ("slow done".to_string(), false));

    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":500,"method":"tools/call","params":{{"name":"slow","arguments":{{"a":{}1{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    // Nested past what the daemon reads, in a request whose envelope it reads: answered under its id.
    raw(&mut s, format!("{deep}\n").as_bytes());
    let e = error_for(&mut s, json!(500));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("params.arguments are nested deeper than 127 levels"),
        "{e}"
    );
    // The bound, exactly: arguments 127 levels deep are read (and refused by the schema if at all), 128
    // are not.
    for (id, levels) in [(501, 127usize), (502, 128)] {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow","arguments":{{"a":{}1{}}}}}}}"#,
            "[".repeat(levels - 1),
            "]".repeat(levels - 1)
        );
        raw(&mut s, format!("{line}\n").as_bytes());
        let r = s.recv_where(|m| m["id"] == id);
        let said = r.to_string();
        assert_eq!(
            said.contains("nested deeper than 127"),
            levels == 128,
            "{levels}: {said}"
        );
    }

    let cases = [
        (json!({}), "params.name is missing"),
        (
            json!({ "name": 7 }),
            "params.name is a number, not a string naming the tool",
        ),
        (
            json!({ "name": "slow", "arguments": [1] }),
            "params.arguments is an array, not an object",
        ),
    ];
    for (params, want) in cases {
        let id = s.send_request("tools/call", params);
        let e = error_for(&mut s, json!(id));
        assert_eq!(e["code"], -32602, "{e}");
        assert!(e["message"].as_str().unwrap().contains(want), "{e}");
    }
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":600,\"method\":\"tools/call\"}\n",
    );
    let e = error_for(&mut s, json!(600));
    assert!(
        e["message"].as_str().unwrap().contains("has no params"),
        "{e}"
    );

    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}\n",
    );
    let e = error_for(&mut s, json!(1.5));
    assert_eq!(e["code"], -32600, "{e}");

    // A member given twice is named, in the envelope and in a call's params.
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":700,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"name\":\"index\"}}\n",
    );
    let e = error_for(&mut s, json!(700));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("give \"name\" more than once"),
        "{e}"
    );
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":701,\"method\":\"tools/call\",\"method\":\"tools/list\"}\n",
    );
    let e = error_for(&mut s, json!(701));
    assert_eq!(e["code"], -32600, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("gives \"method\" more than once"),
        "{e}"
    );

    // Two requests with one id in flight: the second is refused naming it, the first goes on.
    raw(&mut s, b"{\"jsonrpc\":\"2.0\",\"id\":\"twice\",\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"arguments\":{}}}\n");
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"twice\",\"method\":\"ping\"}\n",
    );
    let e = error_for(&mut s, json!("twice"));
    assert_eq!(e["code"], -32600);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("the id \"twice\" is already in flight"),
        "{e}"
    );
    let first = s.recv_where(|m| m["id"] == "twice" && m.get("result").is_some());
    assert_eq!(text_of(&first), ("slow done".to_string(), false));

    // A notification is never answered, whatever is wrong with it.
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":5}\n",
    );

    // A line over the 16 MiB cap is skipped and said so: under its id, wherever the id is, when it is
    // a request (a client waits for that answer), with `id: null` when it is not one.
    let mut long = vec![b'x'; 16 * 1024 * 1024 + 10];
    long.push(b'\n');
    raw(&mut s, &long);
    let e = error_for(&mut s, Value::Null);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("longer than 16 MiB was skipped; send less in one request"),
        "{e}"
    );
    let pad = "x".repeat(16 * 1024 * 1024);
    for (line, id) in [
        (
            format!(
                r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{pad}"}}}},"id":"last"}}"#
            ),
            json!("last"),
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":700,"method":"ping","params":{{"pad":"{pad}"}}}}"#),
            json!(700),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":703,"id":704,"method":"ping","params":{{"pad":"{pad}"}}}}"#
            ),
            Value::Null,
        ),
    ] {
        raw(&mut s, format!("{line}\n").as_bytes());
        let e = error_for(&mut s, id.clone());
        assert_eq!(e["code"], -32600, "{id}: {e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("longer than 16 MiB"),
            "{e}"
        );
    }
    // An id this server cannot take is echoed as written, as for any line.
    raw(
        &mut s,
        format!(r#"{{"jsonrpc":"2.0","id":1.5,"method":"ping","params":{{"pad":"{pad}"}}}}"#)
            .as_bytes(),
    );
    raw(&mut s, b"\n");
    assert!(
        error_for(&mut s, json!(1.5))["message"]
            .as_str()
            .unwrap()
            .contains("longer than 16 MiB")
    );
    // A notification, or a line of whitespace, over the cap is not answered, as no such line is.
    raw(&mut s, " ".repeat(17 << 20).as_bytes());
    raw(&mut s, b"\n");
    raw(
        &mut s,
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/x","params":{{"pad":"{pad}"}}}}"#)
            .as_bytes(),
    );
    raw(
        &mut s,
        b"\n{\"jsonrpc\":\"2.0\",\"id\":\"after\",\"method\":\"ping\"}\n",
    );
    let next = s.recv_where(|m| m["id"] == "after" || m["id"].is_null());
    assert_eq!(next["id"], "after", "{next}");
    // The bridge holds no line over the cap (it answers it itself, as the daemon does), and gives back
    // the room a long line took once it has gone on to the next.
    let mut long = br#"{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":""#.to_vec();
    long.resize(64 << 20, b'x');
    long.extend(b"\"}}\n");
    raw(&mut s, &long);
    assert!(
        error_for(&mut s, json!("big"))["message"]
            .as_str()
            .unwrap()
            .contains("longer than 16 MiB")
    );
    long.truncate(15 << 20);
    long.extend(b"\"}}\n");
    raw(&mut s, &long);
    assert!(
        error_for(&mut s, json!("big"))["message"]
            .as_str()
            .unwrap()
            .contains("at most 1024 KiB of any request but tools/call")
    );
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"after-big\",\"method\":\"ping\"}\n",
    );
    s.recv_where(|m| m["id"] == "after-big");
    let after = rss();
    assert!(
        after < before + 8 * 1024,
        "ovai mcp held {before} kB at first, and {after} kB after lines of up to 64 MiB"
    );

    // A request but a call past 1 MiB is refused under its id, unread; a call that long is read.
    let mut long = br#"{"jsonrpc":"2.0","id":702,"method":"tools/list","params":{"pad":""#.to_vec();
    long.extend(std::iter::repeat_n(b'x', 2 * 1024 * 1024));
    long.extend(b"\"}}\n");
    raw(&mut s, &long);
    let e = error_for(&mut s, json!(702));
    assert_eq!(e["code"], -32600, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("this server reads at most 1024 KiB of any request but tools/call"),
        "{e}"
    );

    // Requests the daemon answers with `id: null`, since it cannot take their id: the bridge, which reads
    // ids for itself, must not wait for an answer under theirs (it would invent one when the client
    // quits, saying the server went away).
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":701,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}\n",
    );
    assert_eq!(error_for(&mut s, Value::Null)["code"], -32700);
    raw(
        &mut s,
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"{}\",\"method\":\"ping\"}}\n",
            "i".repeat(1025)
        )
        .as_bytes(),
    );
    assert!(
        error_for(&mut s, Value::Null)["message"]
            .as_str()
            .unwrap()
            .contains("an id of 1025 bytes")
    );

    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"ping\"}\n",
    );
    assert!(
        error_for(&mut s, json!(1e20))["message"]
            .as_str()
            .unwrap()
            .contains("the id 99999999999999999999 is outside the 64-bit signed integers")
    );
    // In float form, past 2^53 and inside the integers: said for what it is.
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":1e18,\"method\":\"ping\"}\n",
    );
    let said = s.recv_where(|m| {
        m["error"]["message"]
            .as_str()
            .is_some_and(|w| w.contains("1e18"))
    });
    assert!(
        said["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the id 1e18 is an integer written in float form, at or past 2^53"),
        "{said}"
    );

    // A notification sent with an id is told to drop the id, not that its method is not served.
    let id = s.send_request("notifications/initialized", json!({}));
    let e = error_for(&mut s, json!(id));
    assert_eq!(e["code"], -32601, "{e}");
    assert!(
        e["message"].as_str().unwrap().starts_with(
            "Method not found: notifications/initialized is a notification, which is sent without an id"
        ),
        "{e}"
    );
    // A method this server does not serve is named in a sentence.
    for method in ["nosuch/method", "resources/list"] {
        let id = s.send_request(method, json!({}));
        let e = error_for(&mut s, json!(id));
        assert_eq!(
            (e["code"].clone(), e["message"].clone()),
            (
                json!(-32601),
                json!(format!(
                    "Method not found: this server does not serve {method}; it serves tools/list and tools/call, \
                     initialize and ping up to 2025-11-25, and server/discover and subscriptions/listen from \
                     2026-07-28 on"
                ))
            )
        );
    }

    // The session is as it was: a call works, and nothing claimed the server restarted.
    assert_eq!(s.call("slow", json!({})), ("slow done".to_string(), false));
    let nulls = s.backlog.iter().filter(|m| m["id"].is_null()).count();
    assert_eq!(
        nulls, 0,
        "every id-null answer was expected: {:?}",
        s.backlog
    );
    assert!(
        !s.backlog
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{:?}",
        s.backlog
    );
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the bridge is still up"
    );
    // The client quits: every request had its answer, so the bridge has none left to make up.
    s.close_input();
    let mut after = Vec::new();
    while let Ok(m) = s.next_message() {
        after.push(m);
    }
    assert!(after.is_empty(), "{after:?}");
    assert!(s.wait().success());
}

/// A client's initialize (and initialized), as raw lines for a connection whose answers are never read.
const INITIALIZE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"x\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

/// A seat's connection straight onto the daemon's socket, past its hello: the daemon's own line handling.
fn direct(inst: &Instance, seat: &str) -> std::os::unix::net::UnixStream {
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai_inst).unwrap();
    ovai::client::hello_seat(&ovai_inst, &mut sock, &inst.secret(seat), PATIENCE).unwrap();
    sock
}

fn rss_mb(pid: u32) -> f64 {
    rss_kb(pid) as f64 / 1024.0
}

/// A small deterministic generator (xorshift), so a failure can be run again as it was.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const ECHO: &str = r#"
export const description = "Echoes.";
export const inputSchema = { type: "object" };
export function run(args) { return { text: JSON.stringify(args) }; }
"#;

#[test]
fn generated_input_gets_each_request_answered_exactly_once_and_the_daemon_stays_up() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let mut d = inst.start();
    let sock = direct(&inst, "lead");
    let reader = std::io::BufReader::new(TimedReader::new(sock.try_clone().unwrap()));
    let mut mcp = ovai::client::McpClient::new(reader, sock);
    mcp.initialize("fuzz").unwrap();
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let mut expected: std::collections::HashMap<String, Value> = Default::default();
    let mut unattributable = 0usize;
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for n in 0..3000u64 {
        let id = match g.below(4) {
            0 => json!(n as i64 - 1500),
            1 => json!(format!("id-{n}-\"q\"\\")),
            2 => json!(i64::MAX - n as i64),
            _ => json!(format!("{n}")),
        };
        let request = match g.below(4) {
            0 => json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }),
            1 => json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {} }),
            2 => {
                json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": "echo", "arguments": { "n": n } } })
            }
            _ => {
                json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": "index" } })
            }
        };
        match g.below(10) {
            // A good request, with an id nothing else uses.
            0..=3 => {
                expected.insert(id.to_string(), id.clone());
                lines.push(request.to_string().into_bytes());
            }
            // The same, mutated: bytes flipped, cut or doubled. Its ids are another namespace.
            4 | 5 => {
                let mut b = json!({ "jsonrpc": "2.0", "id": format!("m{n}"), "method": "tools/call", "params": { "name": "echo", "arguments": { "n": n } } })
                    .to_string()
                    .into_bytes();
                for _ in 0..=g.below(3) {
                    if b.is_empty() {
                        break;
                    }
                    let at = g.below(b.len() as u64) as usize;
                    match g.below(3) {
                        0 => b[at] = (g.below(256) as u8).max(1),
                        1 => {
                            b.truncate(at);
                        }
                        _ => {
                            let copy = b[at..].to_vec();
                            b.extend_from_slice(&copy);
                        }
                    }
                }
                b.retain(|c| *c != b'\n');
                unattributable += 1;
                lines.push(b);
            }
            // Random bytes.
            6 => {
                let len = g.below(200) as usize;
                let b: Vec<u8> = (0..len).map(|_| (g.below(255) as u8) + 1).filter(|c| *c != b'\n').collect();
                unattributable += 1;
                lines.push(b);
            }
            // Deep nesting.
            7 => {
                let depth = 120 + g.below(300) as usize;
                let line = format!(
                    r#"{{"jsonrpc":"2.0","id":"deep{n}","method":"tools/call","params":{{"name":"echo","arguments":{{"a":{}0{}}}}}}}"#,
                    "[".repeat(depth),
                    "]".repeat(depth)
                );
                unattributable += 1;
                lines.push(line.into_bytes());
            }
            // Notifications, good and bad: never answered.
            8 => lines.push(
                json!({ "jsonrpc": "2.0", "method": if g.below(2) == 0 { "notifications/cancelled" } else { "tools/call" }, "params": { "requestId": "nobody" } })
                    .to_string()
                    .into_bytes(),
            ),
            // Odd ids: floats, booleans, objects, null.
            _ => {
                let odd = [json!(1.5 + n as f64), json!(true), json!({ "n": n }), Value::Null][g.below(4) as usize].clone();
                unattributable += 1;
                lines.push(json!({ "jsonrpc": "2.0", "id": odd, "method": "ping" }).to_string().into_bytes());
            }
        }
    }
    {
        let w = mcp.writer();
        for l in &lines {
            w.write_all(l).unwrap();
            w.write_all(b"\n").unwrap();
        }
        w.flush().unwrap();
    }
    let mut answered: std::collections::HashMap<String, usize> = Default::default();
    let mut others = 0usize;
    let deadline = std::time::Instant::now() + PATIENCE;
    while answered.len() < expected.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "answers still missing"
        );
        let m = mcp.next_message().expect("the daemon answers");
        let Some(id) = m.get("id") else { continue };
        let key = id.to_string();
        if expected.contains_key(&key) {
            *answered.entry(key).or_default() += 1;
        } else {
            others += 1;
        }
    }
    // Everything sent has been answered once the ping sent last is.
    let last = mcp.send_request("ping", json!({})).unwrap();
    loop {
        let m = mcp.next_message().unwrap();
        if m["id"] == json!(last) {
            break;
        }
        match m.get("id") {
            Some(id) if expected.contains_key(&id.to_string()) => {
                *answered.entry(id.to_string()).or_default() += 1;
            }
            Some(_) => others += 1,
            None => {}
        }
    }
    for (id, times) in &answered {
        assert_eq!(
            *times, 1,
            "the request with id {id} was answered {times} times"
        );
    }
    assert_eq!(answered.len(), expected.len());
    assert!(
        others <= unattributable,
        "{others} answers to {unattributable} bad lines: none invented"
    );
    assert!(d.is_running());
    let rss = rss_mb(d.pid());
    assert!(rss < 200.0, "the daemon holds {rss:.0} MB");
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("index", json!({})).1);
}

#[test]
fn a_session_that_never_reads_cannot_hold_the_daemons_memory_or_its_other_seats() {
    let inst = Instance::new();
    let d = inst.start();
    let before = rss_mb(d.pid());
    let mut sock = direct(&inst, "lead");
    sock.write_all(INITIALIZE).unwrap();
    // 200,000 index calls, about 300 MB of answers, none of them ever read.
    let writer = {
        let mut sock = sock.try_clone().unwrap();
        std::thread::spawn(move || {
            let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"index\",\"arguments\":{}}}\n";
            let mut batch = Vec::new();
            for _ in 0..200_000u64 {
                batch.extend_from_slice(&line[..]);
                if batch.len() > 64 * 1024 {
                    if sock.write_all(&batch).is_err() {
                        return;
                    }
                    batch.clear();
                }
            }
            let _ = sock.write_all(&batch);
        })
    };
    let mut most = 0.0f64;
    for _ in 0..100 {
        most = most.max(rss_mb(d.pid()));
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    // Meanwhile another seat is answered as ever.
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("index", json!({})).1);
    most = most.max(rss_mb(d.pid()));
    assert!(
        most < 120.0,
        "sessionQueueBytes bounds what a session that never reads holds: the daemon reached {most:.0} MB"
    );
    let _ = sock.shutdown(std::net::Shutdown::Both);
    drop(sock);
    let _ = writer.join();
    assert!(!s.call("index", json!({})).1);
    // Memory returns when the session ends: at least half of what it took.
    wait_until("the ended session's memory to be given back", || {
        (rss_mb(d.pid()) < most - (most - before) / 2.0).then_some(())
    });
}

#[test]
fn a_session_that_sends_without_waiting_cannot_hold_the_daemons_memory() {
    let inst = Instance::new();
    let d = inst.start();
    let mut sock = direct(&inst, "lead");
    sock.write_all(INITIALIZE).unwrap();
    // 100,000 requests at once, each with an id of its own, none of the answers ever read.
    let writer = {
        let mut sock = sock.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut batch = Vec::new();
            for i in 1..=100_000u64 {
                batch.extend_from_slice(
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n")
                        .as_bytes(),
                );
            }
            let _ = sock.write_all(&batch);
        })
    };
    let mut most = 0.0f64;
    for _ in 0..100 {
        most = most.max(rss_mb(d.pid()));
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("index", json!({})).1);
    assert!(most < 120.0, "the daemon reached {most:.0} MB");
    let _ = sock.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
}

#[test]
fn an_id_cancelled_and_sent_again_at_once_is_refused_not_confused() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    raw(&mut s, b"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"arguments\":{}}}\n");
    raw(&mut s, b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":11}}\n");
    raw(&mut s, b"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"arguments\":{}}}\n");
    let e = error_for(&mut s, json!(11));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("belongs to a request this session cancelled"),
        "{e}"
    );
    assert_eq!(s.call("slow", json!({})), ("slow done".to_string(), false));
}

#[test]
fn calling_and_cancelling_at_once_starts_no_more_plugins_than_a_session_may_have_in_flight() {
    // A plugin that ignores its signal runs on after its call is cancelled: a session that calls and
    // cancels as fast as it can must not start them without end.
    let stubborn = r#"
export const description = "Counts its runs and ignores its signal for a while.";
export const inputSchema = { type: "object" };
export async function run() {
  globalThis.started = (globalThis.started ?? 0) + 1;
  await new Promise((r) => setTimeout(r, 20000));
  return { text: "done" };
}
"#;
    let count = r#"
export const description = "How many stubborn calls started.";
export const inputSchema = { type: "object" };
export function run() { return { text: String(globalThis.started ?? 0) }; }
"#;
    let inst = Instance::with_plugins(&[("stubborn.mjs", stubborn), ("count.mjs", count)]);
    let _d = inst.start();
    let mut probe = inst.session("lead");
    probe.initialize();
    let mut s = inst.session("lead");
    s.initialize();
    let mut flood = Vec::new();
    for id in 0..300 {
        flood.extend_from_slice(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"stubborn\",\"arguments\":{{}}}}}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{id}}}}}\n").as_bytes());
    }
    raw(&mut s, &flood);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (started, _) = probe.call("count", json!({}));
    let started: usize = started.parse().unwrap();
    assert!(
        (1..=64).contains(&started),
        "{started} stubborn plugins started from one session"
    );
}

#[test]
fn a_notification_sent_before_initialize_is_ignored_and_the_session_goes_on() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
    );
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n",
    );
    // A call before initialize is refused in words, and the session stays open for the handshake.
    raw(&mut s, b"{\"jsonrpc\":\"2.0\",\"id\":\"early\",\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"arguments\":{}}}\n");
    let answer = s.recv_where(|m| m["id"] == "early");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send \"initialize\" first"),
        "{answer}"
    );
    s.initialize();
    assert_eq!(s.call("slow", json!({})), ("slow done".to_string(), false));
}

#[test]
fn a_plain_call_and_one_rmcp_takes_are_answered_alike() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let _d = inst.start();
    for version in ["2025-06-18", "2025-11-25"] {
        let mut s = inst.session("lead");
        s.initialize_as(version);
        // Without `_meta` the session transport runs the call itself; with it, rmcp's handler does.
        for (plain, through_rmcp) in [
            (
                json!({ "name": "slow", "arguments": {} }),
                json!({ "name": "slow", "arguments": {}, "_meta": {} }),
            ),
            (
                json!({ "name": "nope" }),
                json!({ "name": "nope", "_meta": {} }),
            ),
        ] {
            let a = s.request("tools/call", plain);
            let b = s.request("tools/call", through_rmcp);
            let strip = |mut m: Value| {
                m.as_object_mut().unwrap().remove("id");
                m
            };
            assert_eq!(strip(a), strip(b), "{version}");
        }
    }
}

#[test]
fn a_notification_after_a_refused_request_of_a_newer_revision_does_not_end_the_session() {
    use std::io::BufRead;
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let _d = inst.start();
    // Straight onto the socket: a bridge would hide a dropped connection by connecting again.
    let mut sock = direct(&inst, "lead");
    let mut answers = std::io::BufReader::new(sock.try_clone().unwrap());
    let mut next = || {
        let mut line = String::new();
        answers.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap_or(Value::Null)
    };
    // Names 2026-07-28 but leaves out clientCapabilities: refused, and the session has not begun.
    sock.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"half\",\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}\n").unwrap();
    let e = next();
    assert_eq!(e["error"]["code"], -32602, "{e}");
    sock.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();
    // Names a revision that has `initialize` (2025-11-25): it begins no session as 2026-07-28 would,
    // and is told to send initialize first.
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}"#;
    for (id, method, params) in [
        ("list", "tools/list", format!("{{{meta}}}")),
        (
            "call",
            "tools/call",
            format!(r#"{{"name":"slow","arguments":{{}},{meta}}}"#),
        ),
    ] {
        sock.write_all(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"method\":\"{method}\",\"params\":{params}}}\n")
                .as_bytes(),
        )
        .unwrap();
        let e = next();
        assert_eq!(
            (&e["id"], &e["error"]["code"]),
            (&json!(id), &json!(-32600)),
            "{e}"
        );
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("send \"initialize\" first"),
            "{e}"
        );
    }
    sock.write_all(INITIALIZE).unwrap();
    let init = next();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    sock.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"slow\",\"arguments\":{}}}\n").unwrap();
    let r = next();
    assert_eq!(text_of(&r), ("slow done".to_string(), false));
}

/// Waits for the `calls` calls of a session whose client died to be stopped (`aborted-1` to `aborted-N`,
/// noted by `WAITS`), and for the session to end, leaving the one other session of the seat.
fn wait_for_a_dead_session_to_be_stopped(inst: &Instance, d: &Daemon, calls: usize) {
    wait_until("the dead session's calls to be stopped", || {
        (1..=calls)
            .all(|n| inst.root.join(format!("work/aborted-{n}")).exists())
            .then_some(())
    });
    wait_until("the dead session to end", || {
        let status = d.status()?;
        (status["seats"][0]["sessions"] == 1).then_some(())
    });
}

/// Each call waits for its signal, then notes why it fired in `aborted-N`; `runs` says how many ran.
const WAITS: &str = r#"
import { writeFileSync } from "node:fs";
export const description = "Waits until cancelled.";
export const inputSchema = { type: "object" };
export async function run(args, context) {
  globalThis.runs = (globalThis.runs ?? 0) + 1;
  const signal = context.signal;
  await new Promise((r) => signal.addEventListener("abort", r));
  writeFileSync(`${args.dir}/work/aborted-${args.n}`, String(signal.reason?.message ?? signal.reason));
  return { text: "ended" };
}
"#;

const RUNS: &str = r#"
export const description = "How many waits ran.";
export const inputSchema = { type: "object" };
export function run() { return { text: String(globalThis.runs ?? 0) }; }
"#;

/// An instance serving `waits` and `runs` with a 600 s deadline, its daemon, and a session to ask `runs`.
fn waiting_calls() -> (Instance, Daemon, Session) {
    let inst = Instance::with_plugins(&[("waits.mjs", WAITS), ("runs.mjs", RUNS)]);
    inst.set_config(json!({ "callTimeoutSeconds": 600 }));
    let d = inst.start();
    let mut probe = inst.session("lead");
    probe.initialize();
    (inst, d, probe)
}

/// A raw `waits` call line with id `n`.
fn wait_call(inst: &Instance, n: u64) -> String {
    let dir = inst.root.display();
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"tools/call\",\"params\":{{\"name\":\"waits\",\"arguments\":{{\"dir\":\"{dir}\",\"n\":{n}}}}}}}\n"
    )
}

#[test]
fn a_cancellation_reaches_a_call_while_the_session_has_all_it_may_in_flight() {
    let (inst, _d, mut probe) = waiting_calls();
    let mut s = inst.session("lead");
    s.initialize();
    let call = |id: u64| wait_call(&inst, id);
    let cancel = |id: u64| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{id}}}}}\n"
        )
    };
    // Ids of their own: the client numbers its requests from 1.
    let mut full: String = (1001..=1064).map(call).collect();
    // Past the cap: a call that waits for room, then is cancelled before it ever starts.
    full.push_str(&call(1065));
    full.push_str(&cancel(1065));
    raw(&mut s, full.as_bytes());
    wait_until("64 calls running", || {
        (probe.call("runs", json!({})).0 == "64").then_some(())
    });
    // The session has all it may have in flight; its cancellation still reaches the call at once, not
    // when the call's 600 s deadline frees room.
    raw(&mut s, cancel(1001).as_bytes());
    let why = wait_until("the first call to hear its cancellation", || {
        // The file is made, then written: empty is not yet.
        std::fs::read_to_string(inst.root.join("work/aborted-1001"))
            .ok()
            .filter(|why| !why.is_empty())
    });
    assert_eq!(why, "the caller cancelled the call");
    let rest: String = (1002..=1064).map(cancel).collect();
    raw(&mut s, rest.as_bytes());
    // Once the cancelled calls have wound down the session is answered again; the call past the cap never ran.
    assert_eq!(s.call("runs", json!({})), ("64".to_string(), false));
    assert!(
        !s.backlog.iter().any(|m| m
            .get("id")
            .is_some_and(|id| id.as_u64().is_some_and(|n| n > 1000))),
        "cancelled calls get no answer: {:?}",
        s.backlog
    );
}

/// A request held at the cap under an id already in flight, or already held, is refused when it is read,
/// not run once the first is answered: the client would read two answers under one id.
#[test]
fn a_request_held_at_the_cap_under_an_id_in_flight_is_refused_at_once() {
    let (inst, _d, mut probe) = waiting_calls();
    let mut s = inst.session("lead");
    s.initialize();
    let full: String = (1001..=1064).map(|id| wait_call(&inst, id)).collect();
    raw(&mut s, full.as_bytes());
    wait_until("64 calls running", || {
        (probe.call("runs", json!({})).0 == "64").then_some(())
    });
    let more = [1001, 2000, 2000].map(|id| wait_call(&inst, id)).concat();
    raw(&mut s, more.as_bytes());
    for id in [1001, 2000] {
        let refused = s.recv_where(|m| m["id"] == id);
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!(
                    "a request with the id {id} is already in flight on this session"
                )),
            "{refused}"
        );
    }
    let cancel: String = (1001..=1064)
        .chain([2000])
        .map(|id| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{id}}}}}\n"
            )
        })
        .collect();
    raw(&mut s, cancel.as_bytes());
    assert_eq!(s.call("runs", json!({})), ("64".to_string(), false));
}

/// One seat's sessions together run at most 256 requests: past that, its requests wait in whichever of
/// its sessions they came, and go on as its calls end, so one seat cannot fill the host ahead of others.
#[test]
fn one_seats_sessions_together_run_at_most_the_seats_share() {
    let inst = Instance::with_plugins(&[("waits.mjs", WAITS), ("runs.mjs", RUNS)]);
    inst.set_config(json!({ "callTimeoutSeconds": 600 }));
    inst.add_seat("w1");
    let _d = inst.start();
    let mut probe = inst.session("lead");
    probe.initialize();
    let mut sessions: Vec<Session> = Vec::new();
    // One session after another, each with its 64 running, until the seat has its 256 (another seat's
    // calls are not held by it). A fifth session still says hello and lists the tools (only calls wait
    // for the seat's share), but its calls are all held.
    for i in 0..5 {
        let mut s = inst.session("w1");
        s.initialize();
        if i == 4 {
            let list = s.request("tools/list", json!({}));
            assert!(list["result"]["tools"].is_array(), "{list}");
        }
        // The fifth's 63 leave a place among the lines it may have held, for its ping; one of them
        // names its method as `tools\/call`, a call all the same.
        let calls: String = (0..if i == 4 { 63 } else { 64 })
            .map(|j| wait_call(&inst, 1000 * (i as u64 + 1) + j))
            .map(|line| {
                if i == 4 {
                    line.replacen("tools/call", "tools\\/call", 1)
                } else {
                    line
                }
            })
            .collect();
        raw(&mut s, calls.as_bytes());
        if i == 4 {
            // Read after its calls, so answered once they are read and held.
            let ping = s.request("ping", json!({}));
            assert!(ping.get("result").is_some(), "{ping}");
        }
        let running = (64 * (i + 1)).min(256).to_string();
        wait_until(&format!("{running} calls running"), || {
            (probe.call("runs", json!({})).0 == running).then_some(())
        });
        sessions.push(s);
    }
    // Ten of the first session's calls end: ten of the fifth's start.
    let cancel: String = (1000..1010)
        .map(|id| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{id}}}}}\n"
            )
        })
        .collect();
    raw(&mut sessions[0], cancel.as_bytes());
    wait_until("266 calls run", || {
        (probe.call("runs", json!({})).0 == "266").then_some(())
    });
}

/// Two calls in flight on one session under one progress token: the second is refused, since its
/// reports could not be told from the first's; once the first ends, the token is free again.
#[test]
fn a_progress_token_in_use_by_a_call_in_flight_is_refused() {
    let (inst, _d, mut probe) = waiting_calls();
    let mut s = inst.session("lead");
    s.initialize();
    let call = |id: u64| {
        let dir = inst.root.display();
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"waits\",\"arguments\":{{\"dir\":\"{dir}\",\"n\":{id}}},\"_meta\":{{\"progressToken\":\"t\"}}}}}}\n"
        )
    };
    raw(&mut s, call(1).as_bytes());
    wait_until("the first call running", || {
        (probe.call("runs", json!({})).0 == "1").then_some(())
    });
    raw(&mut s, call(2).as_bytes());
    let refused = error_for(&mut s, json!(2));
    assert_eq!(refused["code"], -32602, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("the progress token \"t\" is another call's, in flight on this session"),
        "{refused}"
    );
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n",
    );
    std::fs::create_dir_all(inst.root.join("work")).unwrap();
    wait_until("the first call to end", || {
        inst.root.join("work/aborted-1").exists().then_some(())
    });
    raw(&mut s, call(3).as_bytes());
    wait_until("the third call running", || {
        (probe.call("runs", json!({})).0 == "2").then_some(())
    });
}

#[test]
fn calls_past_the_cap_sent_just_before_the_client_closes_are_all_answered() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let calls: String = (1001..=1080)
        .map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"slow\",\"arguments\":{{}}}}}}\n"))
        .collect();
    raw(&mut s, calls.as_bytes());
    s.close_input();
    for id in 1001..=1080u64 {
        let answer = s.recv_where(|m| m["id"] == id);
        assert_eq!(text_of(&answer), ("slow done".to_string(), false), "{id}");
    }
    assert!(s.wait().success());
}

/// Lines the daemon answers under an id no request can have (null, `1.5`, `[1]`) are waited for too: a
/// client that writes them and closes its input at once (`… | ovai mcp`) gets every answer.
#[test]
fn answers_under_odd_ids_reach_a_client_that_closes_its_input_at_once() {
    use std::io::{BufRead, Read};
    let inst = Instance::new();
    let _d = inst.start();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let odd = [
        &b"not json\n"[..],
        br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        b"\n",
        br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
        b"\n\xff\n   \n",
    ]
    .concat();
    for round in 0..3 {
        let mut bridge = bridge_piped(&inst, "lead");
        let mut input = bridge.stdin.take().unwrap();
        let mut output = std::io::BufReader::new(bridge.stdout.take().unwrap());
        // Nothing is waited for once the ping is answered: the odd lines are all the bridge has left.
        writeln!(input, "{ping}").unwrap();
        let mut first = String::new();
        output.read_line(&mut first).unwrap();
        input.write_all(&odd).unwrap();
        drop(input);
        let mut rest = String::new();
        output.read_to_string(&mut rest).unwrap();
        let ids: Vec<String> = first
            .lines()
            .chain(rest.lines())
            .map(|l| {
                ovai::jsonrpc::members(l, ["id"])
                    .ok()
                    .and_then(|found| found.values[0])
                    .map_or("none".into(), |id| id.get().to_string())
            })
            .collect();
        // The blank line gets no answer, as the daemon gives it none.
        assert_eq!(ids, ["1", "null", "1.5", "[1]", "null"], "round {round}");
        assert!(bridge.wait().unwrap().success(), "round {round}");
    }
}

/// Sends `lines` on a connection whose answers are never read, and gives the highest RSS the daemon
/// reached meanwhile, watched for a few seconds or until it passes `bound` MB (while another seat is
/// still answered).
fn most_memory_while_never_reading(inst: &Instance, d: &Daemon, lines: Vec<u8>, bound: f64) -> f64 {
    most_memory_while_sending(inst, d, bound, move |sock| {
        let _ = sock.write_all(&lines);
    })
}

/// The same, with what is sent written by `send` (in a thread of its own, until it returns or the
/// connection is shut).
fn most_memory_while_sending(
    inst: &Instance,
    d: &Daemon,
    bound: f64,
    send: impl FnOnce(&mut std::os::unix::net::UnixStream) + Send + 'static,
) -> f64 {
    let mut sock = direct(inst, "lead");
    sock.write_all(INITIALIZE).unwrap();
    let writer = {
        let mut sock = sock.try_clone().unwrap();
        std::thread::spawn(move || send(&mut sock))
    };
    let mut most = 0.0f64;
    for _ in 0..200 {
        most = most.max(rss_mb(d.pid()));
        if most > bound {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("index", json!({})).1);
    let _ = sock.shutdown(std::net::Shutdown::Both);
    let _ = writer.join();
    most
}

#[test]
fn a_session_at_its_cap_that_never_reads_cannot_hold_the_daemons_memory() {
    // Slow calls with big answers keep the session at its 64 in flight, with more waiting behind them.
    let big = r#"
export const description = "A big answer, after a moment.";
export const inputSchema = { type: "object" };
export async function run() { await new Promise((r) => setTimeout(r, 20)); return { text: "x".repeat(256 * 1024) }; }
"#;
    let inst = Instance::with_plugins(&[("big.mjs", big)]);
    let d = inst.start();
    // 2,000 of them: 512 MB of answers, none ever read.
    let lines: Vec<u8> = (1..=2000u64)
        .flat_map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"big\",\"arguments\":{{}}}}}}\n").into_bytes())
        .collect();
    let most = most_memory_while_never_reading(&inst, &d, lines, 150.0);
    assert!(
        most < 150.0,
        "sessionQueueBytes bounds what a session that never reads holds: the daemon reached {most:.0} MB"
    );
}

#[test]
fn a_session_at_its_cap_is_read_no_further_than_what_may_be_held() {
    // 64 calls that wait fill what the session may have in flight; what it sends next is read and held
    // only up to a bound (64 lines, 1 MiB): here, a gigabyte of calls that would all wait their turn.
    let (inst, d, _probe) = waiting_calls();
    let first: String = (1..=64).map(|n| wait_call(&inst, n)).collect();
    let big = "x".repeat(256 * 1024);
    let most = most_memory_while_sending(&inst, &d, 150.0, move |sock| {
        if sock.write_all(first.as_bytes()).is_err() {
            return;
        }
        for id in 65..4096u64 {
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"runs\",\"arguments\":{{\"pad\":\"{big}\"}}}}}}\n"
            );
            if sock.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
    });
    assert!(
        most < 150.0,
        "a session at its cap holds at most 1 MiB of what it sent next: the daemon reached {most:.0} MB"
    );
}

#[test]
fn lines_that_cannot_be_read_sent_to_a_session_that_never_reads_cannot_hold_the_daemons_memory() {
    let inst = Instance::new();
    let d = inst.start();
    // 5,000,000 lines that are not UTF-8: each answered with a Parse error, 400 MB of answers.
    let lines = b"\xff\n".repeat(5_000_000);
    let most = most_memory_while_never_reading(&inst, &d, lines, 120.0);
    assert!(most < 120.0, "the daemon reached {most:.0} MB");
}

#[test]
fn a_session_whose_process_dies_has_its_calls_stopped_and_what_it_left_waiting_dropped() {
    let (inst, d, mut probe) = waiting_calls();
    let calls =
        |from: u64, to: u64| -> String { (from..=to).map(|n| wait_call(&inst, n)).collect() };
    // Three sessions each send more than they may have in flight: one whose waiting lines the daemon
    // still reads (36 past the cap), one that filled what the daemon holds and left more in the socket,
    // and one that closed its writing side first (as the bridge does when its client closes its input).
    let mut sessions = Vec::new();
    for (from, to) in [(1001, 1100), (2001, 2200), (3001, 3100)] {
        let mut sock = direct(&inst, "lead");
        sock.write_all(INITIALIZE).unwrap();
        sock.write_all(calls(from, to).as_bytes()).unwrap();
        sessions.push(sock);
    }
    wait_until("each session to have 64 calls running", || {
        (probe.call("runs", json!({})).0 == "192").then_some(())
    });
    sessions[2].shutdown(std::net::Shutdown::Write).unwrap();
    // The sessions' processes die: their sockets close whole, not only their writing side.
    drop(sessions);
    let stopped = || {
        std::fs::read_dir(inst.root.join("work"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("aborted-"))
            })
            .count()
    };
    wait_until("every call of the dead sessions to be stopped", || {
        (stopped() == 192).then_some(())
    });
    wait_until("the dead sessions to end", || {
        let status = d.status()?;
        (status["seats"][0]["sessions"] == 1).then_some(())
    });
    // Nobody can read the answers of what they left waiting: none of it ran.
    assert_eq!(probe.call("runs", json!({})), ("192".to_string(), false));
    assert_eq!(stopped(), 192);
}

#[test]
fn a_session_that_stopped_reading_past_its_queue_then_closed_and_died_has_its_calls_stopped() {
    let big = r#"
export const description = "A big answer at once.";
export const inputSchema = { type: "object" };
export function run() { return { text: "x".repeat(256 * 1024) }; }
"#;
    let inst =
        Instance::with_plugins(&[("waits.mjs", WAITS), ("runs.mjs", RUNS), ("big.mjs", big)]);
    inst.set_config(json!({ "callTimeoutSeconds": 600, "sessionQueueBytes": 1048576 }));
    let d = inst.start();
    let mut probe = inst.session("lead");
    probe.initialize();
    let mut sock = direct(&inst, "lead");
    sock.write_all(INITIALIZE).unwrap();
    // Eight calls that wait, then far more unread answers than the session may leave (200 of 256 KiB
    // against 1 MiB): the daemon stops acting on what it sends, and its calls wait on.
    let waits: String = (1..=8).map(|n| wait_call(&inst, n)).collect();
    sock.write_all(waits.as_bytes()).unwrap();
    wait_until("the eight calls to run", || {
        (probe.call("runs", json!({})).0 == "8").then_some(())
    });
    let bigs: String = (100..300)
        .map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"big\",\"arguments\":{{}}}}}}\n"))
        .collect();
    sock.write_all(bigs.as_bytes()).unwrap();
    // It closes its writing side, as the bridge does, then dies.
    sock.shutdown(std::net::Shutdown::Write).unwrap();
    drop(sock);
    wait_for_a_dead_session_to_be_stopped(&inst, &d, 8);
}

#[test]
fn a_client_that_closed_its_input_still_gets_the_answers_of_calls_longer_than_a_few_seconds() {
    let slower = r#"
export const description = "Answers after 7 s.";
export const inputSchema = { type: "object" };
export async function run() {
  await new Promise((r) => setTimeout(r, 7000));
  return { text: "slower done" };
}
"#;
    let inst = Instance::with_plugins(&[("slower.mjs", slower)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let ids: Vec<u64> = (0..3)
        .map(|_| s.send_request("tools/call", json!({ "name": "slower", "arguments": {} })))
        .collect();
    // `echo … | ovai mcp`: the client sends its requests and closes its input, and reads on.
    s.close_input();
    for id in ids {
        let answer = s.recv_where(|m| m["id"] == id);
        assert_eq!(text_of(&answer), ("slower done".to_string(), false), "{id}");
    }
    assert!(s.wait().success());
}

#[test]
fn a_client_that_closed_its_input_is_answered_for_calls_the_daemon_took_down_with_it() {
    let (inst, d, mut probe) = waiting_calls();
    let mut s = inst.session("lead");
    s.initialize();
    let dir = inst.root.display().to_string();
    let id = s.send_request(
        "tools/call",
        json!({ "name": "waits", "arguments": { "dir": dir, "n": 1 } }),
    );
    wait_until("the call to run", || {
        (probe.call("runs", json!({})).0 == "1").then_some(())
    });
    s.close_input();
    // The daemon dies with the call in flight; nothing more goes to a next one, but the call is answered.
    signal(d.pid(), libc::SIGKILL);
    let answer = s.recv_where(|m| m["id"] == id);
    let (text, is_error) = text_of(&answer);
    assert!(is_error, "{answer}");
    assert!(text.contains("went away"), "{text}");
    assert!(s.wait().success());
}

#[test]
fn a_session_over_pipes_that_closed_its_input_and_died_has_its_calls_stopped() {
    let (inst, d, mut probe) = waiting_calls();
    let mut s = inst.session("lead");
    s.initialize();
    let dir = inst.root.display().to_string();
    for n in 1..=3 {
        s.send_request(
            "tools/call",
            json!({ "name": "waits", "arguments": { "dir": dir, "n": n } }),
        );
    }
    wait_until("the three calls to run", || {
        (probe.call("runs", json!({})).0 == "3").then_some(())
    });
    // Its client closes its input (the bridge closes the pipe the daemon reads, and waits for answers);
    // then the bridge dies. The end of what the daemon reads looks the same either way: only the socket
    // beside the pipes tells it that nobody will read the answers.
    s.close_input();
    signal(s.child.id(), libc::SIGKILL);
    wait_for_a_dead_session_to_be_stopped(&inst, &d, 3);
}

/// A call the client cancelled is never answered (MCP), so the bridge stops waiting for it: when the
/// client then quits, nothing is made up for it.
#[test]
fn a_call_the_client_cancelled_is_not_answered_when_it_quits() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let id = s.send_request("tools/call", json!({ "name": "slow", "arguments": {} }));
    s.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "no longer wanted" }
    }));
    // The same id spelled as a JSON number with a fraction, which the daemon reads as the same id.
    let other = s.send_request("tools/call", json!({ "name": "slow", "arguments": {} }));
    raw(
        &mut s,
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":{other}.0}}}}\n"
        )
        .as_bytes(),
    );
    // Lines are taken in order: once this is answered, the cancellations were acted on.
    s.request("ping", json!({}));
    s.close_input();
    let mut after = Vec::new();
    while let Ok(m) = s.next_message() {
        after.push(m);
    }
    assert!(
        !after
            .iter()
            .any(|m| m["id"] == json!(id) || m["id"] == json!(other)),
        "a cancelled call gets no answer: {after:?}"
    );
    assert!(s.wait().success());
}

#[test]
fn params_that_do_not_fit_are_answered_naming_the_field() {
    let inst = Instance::new();
    let _d = inst.start();
    let mut s = inst.session("lead");
    // Before initialize: an initialize whose params do not fit names what is wrong, and a good one after
    // it is still taken.
    let init = |p: Value| json!(p);
    for (params, want) in [
        (
            init(json!(5)),
            "the params of initialize are a number, not an object",
        ),
        (init(json!({})), "params.protocolVersion is missing"),
        (
            init(
                json!({ "protocolVersion": 5, "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
            ),
            "params.protocolVersion is a number, not a string",
        ),
        (
            init(
                json!({ "protocolVersion": "2025-11-25", "clientInfo": { "name": "t", "version": "1" } }),
            ),
            "params.capabilities is missing",
        ),
        (
            init(
                json!({ "protocolVersion": "2025-11-25", "capabilities": 5, "clientInfo": { "name": "t", "version": "1" } }),
            ),
            "params.capabilities is a number, not an object",
        ),
        (
            init(json!({ "protocolVersion": "2025-11-25", "capabilities": {} })),
            "params.clientInfo is missing",
        ),
        (
            init(
                json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t" } }),
            ),
            "params.clientInfo.version is missing",
        ),
        (
            init(
                json!({ "protocolVersion": "2025-11-25", "capabilities": { "roots": { "listChanged": "x" } }, "clientInfo": { "name": "t", "version": "1" } }),
            ),
            "params.capabilities.roots.listChanged does not fit: invalid type: string \"x\", expected a boolean",
        ),
        (
            init(
                json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "t", "version": "1", "title": 7 } }),
            ),
            "params.clientInfo.title does not fit: invalid type: integer `7`, expected a string",
        ),
    ] {
        let id = s.send_request("initialize", params.clone());
        let e = error_for(&mut s, json!(id));
        assert_eq!(e["code"], -32602, "{params}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("Invalid params: {want}")),
            "{params}: {e}"
        );
    }
    s.initialize();
    for (method, params, want) in [
        (
            "tools/call",
            json!({ "name": "index", "_meta": 5 }),
            "params._meta is a number, not an object",
        ),
        (
            "tools/list",
            json!(5),
            "the params of tools/list are a number, not an object",
        ),
        (
            "ping",
            json!({ "_meta": "x" }),
            "params._meta is a string, not an object",
        ),
    ] {
        let id = s.send_request(method, params.clone());
        let e = error_for(&mut s, json!(id));
        assert_eq!(e["code"], -32602, "{method} {params}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("Invalid params: {want}")),
            "{method} {params}: {e}"
        );
    }
    assert!(s.tool_names().contains(&"index".to_string()));
    // A message with a method and a result is neither a request nor an answer (helper-88).
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":90,\"method\":\"ping\",\"result\":{}}\n",
    );
    let e = error_for(&mut s, json!(90));
    assert_eq!(e["code"], -32600, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("the message has a \"method\" and a \"result\""),
        "{e}"
    );
    // 2026-07-28's own requests name their field too.
    let mut modern = inst.session("lead");
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} });
    for (method, params, want) in [
        (
            "server/discover",
            Value::Null,
            "server/discover has no params; from 2026-07-28 on a request's params carry its _meta",
        ),
        (
            "subscriptions/listen",
            json!({ "_meta": meta, "notifications": { "toolsListChanged": "yes" } }),
            "params.notifications.toolsListChanged does not fit: invalid type: string \"yes\", expected a boolean",
        ),
    ] {
        let id = modern.send_request(method, params.clone());
        let e = error_for(&mut modern, json!(id));
        assert_eq!(e["code"], -32602, "{method} {params}: {e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("Invalid params: {want}")),
            "{method} {params}: {e}"
        );
    }
}

#[test]
fn every_request_the_daemon_took_down_is_answered_once_however_its_id_is_spelled() {
    let (inst, d, mut probe) = waiting_calls();
    let mut s = inst.session("lead");
    s.initialize();
    let dir = inst.root.display().to_string();
    // A number past f64's range in the arguments: the daemon reads the envelope, and answers under its
    // id that the arguments are not readable; nothing else answers it again.
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{\"name\":\"waits\",\"arguments\":{\"n\":1e400}}}\n",
    );
    assert_eq!(error_for(&mut s, json!(20))["code"], -32602);
    // An id in float form on a line refused at once is refused under the integer it stands for.
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":30.0,\"method\":\"tools/call\",\"params\":{\"name\":5}}\n",
    );
    assert_eq!(error_for(&mut s, json!(30))["code"], -32602);
    // An array is no request, even one that reads as a call by position: nothing runs, and nothing is
    // answered under its id (below).
    let call = |id: &str, n: u64| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"waits\",\"arguments\":{{\"dir\":\"{dir}\",\"n\":{n}}}}}}}\n"
        )
    };
    raw(
        &mut s,
        b"[\"2.0\",32,\"tools/call\",{\"name\":\"runs\",\"arguments\":{}}]\n",
    );
    assert_eq!(error_for(&mut s, Value::Null)["code"], -32600);
    // Ids in float form (rmcp reads them as the integers they stand for), half a surrogate pair (read
    // as U+FFFD), a _meta whose revision is not a string (rmcp runs the call all the same), and an id
    // sent again while its call runs (refused under it).
    for (id, n) in [("2.0", 1), ("-0", 2), ("\"\\ud800x\"", 3), ("5", 4)] {
        raw(&mut s, call(id, n).as_bytes());
    }
    raw(
        &mut s,
        format!("{{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{{\"name\":\"waits\",\"arguments\":{{\"dir\":\"{dir}\",\"n\":6}},\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":1}}}}}}\n").as_bytes(),
    );
    wait_until("the five calls to run", || {
        (probe.call("runs", json!({})).0 == "5").then_some(())
    });
    // A cancellation is read by its requestId alone (a reason that is not a string does not keep it
    // from being one): the call stops, and neither the daemon nor the bridge answers it.
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":12,\"reason\":5}}\n",
    );
    raw(&mut s, call("5", 5).as_bytes());
    let again = error_for(&mut s, json!(5));
    assert_eq!(again["code"], -32600, "{again}");
    close_and_take_the_daemon_down(
        &mut s,
        &d,
        &[json!(2), json!(0), json!("\u{fffd}x"), json!(5)],
    );
}

/// The client closes its input and the daemon is killed: each of `ids` is answered once as taken down
/// with it, and nothing else is answered.
fn close_and_take_the_daemon_down(s: &mut Session, d: &Daemon, ids: &[Value]) {
    s.close_input();
    signal(d.pid(), libc::SIGKILL);
    for id in ids {
        let answer = s.recv_where(|m| m["id"] == *id);
        let (text, is_error) = text_of(&answer);
        assert!(is_error && text.contains("went away"), "{id}: {answer}");
    }
    assert!(s.wait().success());
    let mut rest = std::mem::take(&mut s.backlog);
    while let Ok(m) = s.next_message() {
        rest.push(m);
    }
    assert!(
        rest.iter().all(|m| m.get("id").is_none()),
        "nothing more is answered: {rest:?}"
    );
}

/// The bridge keeps the commonest tool calls unread until it needs them: written as the TypeScript SDK
/// writes them (the id last), one the daemon could not read, one under an id already in flight and one
/// cancelled are each answered as before when the daemon goes, the one it took down once.
#[test]
fn tool_calls_written_id_last_are_answered_once_when_the_daemon_goes() {
    let (inst, d, mut probe) = waiting_calls();
    let mut s = inst.session("lead");
    s.initialize();
    let dir = inst.root.display().to_string();
    let call = |id: &str, n: &str| {
        format!(
            "{{\"method\":\"tools/call\",\"params\":{{\"name\":\"waits\",\"arguments\":{{\"dir\":\"{dir}\",\"n\":{n}}}}},\"jsonrpc\":\"2.0\",\"id\":{id}}}\n"
        )
    };
    raw(&mut s, call("40", "1e400").as_bytes());
    assert_eq!(error_for(&mut s, json!(40))["code"], -32602);
    raw(&mut s, call("\"ts-1\"", "1").as_bytes());
    raw(&mut s, call("41", "2").as_bytes());
    wait_until("the two calls to run", || {
        (probe.call("runs", json!({})).0 == "2").then_some(())
    });
    raw(&mut s, call("\"ts-1\"", "3").as_bytes());
    let again = error_for(&mut s, json!("ts-1"));
    assert_eq!(again["code"], -32600, "{again}");
    raw(
        &mut s,
        b"{\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":41},\"jsonrpc\":\"2.0\"}\n",
    );
    wait_until("the cancelled call to stop", || {
        inst.root.join("work/aborted-2").exists().then_some(())
    });
    close_and_take_the_daemon_down(&mut s, &d, &[json!("ts-1")]);
}

/// What a request's arguments take once read is bounded, not only their text: a line of a few MiB of
/// `[[]],` (about a hundred times its size once read) is refused in words, under its id, and the daemon
/// holds none of it after.
#[test]
fn arguments_that_would_take_too_much_once_read_are_refused_in_words() {
    let inst = Instance::with_plugins(&[("slow.mjs", SLOW)]);
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let heavy = format!(
        r#"{{"jsonrpc":"2.0","id":900,"method":"tools/call","params":{{"name":"slow","arguments":{{"a":[{}[]]}}}}}}"#,
        "[[]],".repeat(1 << 20)
    );
    let before = rss_mb(d.pid());
    for _ in 0..2 {
        raw(&mut s, format!("{heavy}\n").as_bytes());
        let e = error_for(&mut s, json!(900));
        assert_eq!(e["code"], -32602, "{e}");
        assert!(
            e["message"].as_str().unwrap().contains("would take about")
                && e["message"]
                    .as_str()
                    .unwrap()
                    .contains("MB once read, more than the 64 MB"),
            "{e}"
        );
    }
    let after = rss_mb(d.pid());
    assert!(
        after - before < 200.0,
        "the daemon grew from {before} MB to {after} MB"
    );
    // Arguments under the bound, however many values they hold, are read and checked as ever.
    let fits = format!(
        r#"{{"jsonrpc":"2.0","id":901,"method":"tools/call","params":{{"name":"slow","arguments":{{"a":[{}1]}}}}}}"#,
        "1,".repeat(200_000)
    );
    raw(&mut s, format!("{fits}\n").as_bytes());
    let r = s.recv_where(|m| m["id"] == 901);
    assert_eq!(text_of(&r), ("slow done".to_string(), false));
}

/// `ovai mcp` for `seat` under a client of the test's own, which reads the bridge's stdout only when it
/// chooses; the session is initialized.
fn slow_reader(
    inst: &Instance,
    seat: &str,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut bridge = bridge_command(&inst.root, Some(&inst.secret(seat)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = bridge.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(bridge.stdout.take().unwrap());
    input.write_all(INITIALIZE).unwrap();
    let mut line = String::new();
    output.read_line(&mut line).unwrap();
    assert!(line.contains("serverInfo"), "{line}");
    (bridge, input, output)
}

/// Every line left on the bridge's stdout, each of which must be whole JSON; a bridge that neither
/// writes nor ends fails the test rather than hang it.
fn lines_to_the_end<R: std::io::Read + Send + 'static>(
    output: std::io::BufReader<R>,
) -> Vec<Value> {
    use std::io::{BufRead, Read};
    let held = std::io::Cursor::new(output.buffer().to_vec());
    std::io::BufReader::new(held.chain(TimedReader::new(output.into_inner())))
        .lines()
        .map(|line| {
            let line = line.unwrap();
            serde_json::from_str(&line).unwrap_or_else(|e| {
                let start: String = line.chars().take(200).collect();
                panic!("{e}: {start}…")
            })
        })
        .collect()
}

/// The bridge answers each request the daemon took down with it, even while the client closes its
/// input and reads slowly: its exit waits for those answers, and never cuts one in two. (Once it cut
/// them off: the answers were taken from what waited, the bridge then saw nothing waiting and exited.)
#[test]
fn what_the_daemon_took_down_is_answered_whole_however_slowly_the_client_reads() {
    let inst = Instance::new();
    let d = inst.start();
    let (mut bridge, mut input, output) = slow_reader(&inst, "lead");
    // More answers than the bridge's stdout holds: writing them blocks until the client reads.
    freeze(d.pid());
    let ids = 1000..1500u64;
    let pings: String = ids
        .clone()
        .map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n"))
        .collect();
    input.write_all(pings.as_bytes()).unwrap();
    // Once the bridge has taken them all in, they are the daemon's, and are answered as taken down.
    let pid = bridge.id();
    wait_until("the bridge to read every ping", || {
        (unread(&input) == 0 && blocked_in(pid, "read", 0)).then_some(())
    });
    signal(d.pid(), libc::SIGKILL);
    wait_until(
        "the bridge to be blocked writing answers to its client",
        || blocked_in(pid, "write", 1).then_some(()),
    );
    drop(input);
    let mut answered = std::collections::BTreeMap::<u64, u32>::new();
    for m in lines_to_the_end(output) {
        let message = m["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("went away"), "{m}");
        *answered.entry(m["id"].as_u64().unwrap()).or_default() += 1;
    }
    let missing: Vec<u64> = ids
        .clone()
        .filter(|id| !answered.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} unanswered, from {:?}",
        missing.len(),
        missing.first()
    );
    assert!(answered.values().all(|&n| n == 1), "answered twice");
    assert!(wait_exit(&mut bridge).success());
}

/// A daemon that goes in the middle of writing an answer leaves half a line: the client never sees
/// it, and the call is answered as taken down with the daemon.
#[test]
fn an_answer_the_daemon_cut_off_in_going_is_not_passed_on_and_its_call_is_answered() {
    let big = r#"
import { existsSync } from "node:fs";
export const description = "A big answer, once work/go exists.";
export const inputSchema = { type: "object" };
export async function run(args, context) {
  while (!existsSync(`${context.root}/work/go`)) await new Promise((r) => setTimeout(r, 10));
  return { text: "x".repeat(256 * 1024) };
}
"#;
    let inst = Instance::with_plugins(&[("big.mjs", big)]);
    let d = inst.start();
    let (mut bridge, mut input, output) = slow_reader(&inst, "lead");
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"big\",\"arguments\":{}}}\n")
        .unwrap();
    let pid = bridge.id();
    wait_until("the bridge to pass the call on", || {
        (unread(&input) == 0 && blocked_in(pid, "read", 0)).then_some(())
    });
    // The bridge stops reading; the daemon fills the pipe with the first part of the answer.
    freeze(pid);
    let from_daemon = daemons_pipe(pid);
    std::fs::write(inst.root.join("work/go"), "").unwrap();
    wait_until(
        "the daemon to fill the pipe with part of the answer",
        || (unread(&from_daemon) == pipe_size(&from_daemon)).then_some(()),
    );
    signal(d.pid(), libc::SIGKILL);
    wait_gone(d.pid());
    signal(pid, libc::SIGCONT);
    drop(input);
    let lines = lines_to_the_end(output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["id"], 7);
    let (text, is_error) = text_of(&lines[0]);
    assert!(is_error && text.contains("went away"), "{}", lines[0]);
    assert!(wait_exit(&mut bridge).success());
}

/// A client that closes the bridge's stdout is gone, even with its input still open: the bridge ends
/// when it cannot write an answer, rather than take the broken write for a daemon gone and start again.
#[test]
fn the_bridge_ends_once_its_client_stops_reading_with_its_input_still_open() {
    let inst = Instance::new();
    let d = inst.start();
    let (mut bridge, mut input, output) = slow_reader(&inst, "lead");
    drop(output);
    input
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .unwrap();
    wait_exit(&mut bridge);
    // The daemon saw the session end with it.
    wait_until("the seat's session to end", || {
        let status = d.status()?;
        (status["seats"][0]["sessions"] == 0).then_some(())
    });
    drop(input);
}

/// `ovai mcp` for the Leader, its stdin and stdout the test's, started with nothing sent yet.
fn bridge_alone(inst: &Instance, env: &[(&str, &str)]) -> std::process::Child {
    bridge_command(&inst.root, Some(&inst.secret("lead")))
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The first line the bridge writes once `lines` are sent to it (when the test holds its stdin).
fn first_answer(bridge: &mut std::process::Child, lines: &[u8]) -> Value {
    use std::io::BufRead;
    if let Some(stdin) = bridge.stdin.as_mut() {
        stdin.write_all(lines).unwrap();
    }
    let mut line = String::new();
    // Longer than the bridge's patience for a daemon's welcome (60 s).
    let patience = std::time::Duration::from_secs(120);
    std::io::BufReader::new(TimedReader::with_patience(
        bridge.stdout.take().unwrap(),
        patience,
    ))
    .read_line(&mut line)
    .unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// A session started as the daemon goes (it took the connection, then died: a restart) waits for the
/// next daemon as for one not there yet, and is served by it; it once failed at once ("connection reset").
#[test]
fn a_session_started_as_the_daemon_goes_is_served_by_the_next_one() {
    let inst = Instance::new();
    let d = inst.start();
    freeze(d.pid());
    // Time enough for the next daemon to start on a busy machine.
    let mut bridge = bridge_alone(&inst, &[("OVAI_CONNECT_SECONDS", "60")]);
    let pid = bridge.id();
    wait_until("the bridge to wait for the daemon's welcome", || {
        blocked_in(pid, "recvmsg", 0).then_some(())
    });
    let gone = d.pid();
    signal(gone, libc::SIGKILL);
    drop(d);
    wait_gone(gone);
    let _d = inst.start();
    let answer = first_answer(&mut bridge, INITIALIZE);
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "openovai",
        "{answer}"
    );
    drop(bridge.stdin.take());
    assert!(wait_exit(&mut bridge).success());
}

/// A daemon that takes the connection and never answers it (stopped) is said in words, after the
/// bridge's patience for a daemon loading its plugins; it once was an errno ("Resource temporarily
/// unavailable").
#[test]
fn a_daemon_that_takes_the_connection_and_says_nothing_is_said_in_words() {
    let inst = Instance::new();
    let d = inst.start();
    freeze(d.pid());
    let mut bridge = bridge_alone(&inst, &[]);
    let answer = first_answer(&mut bridge, INITIALIZE);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("took the connection and said nothing within 60 s")
            && message.contains("start it again with `ovai serve`"),
        "{answer}"
    );
    assert_eq!(answer["id"], 0);
    assert!(!wait_exit(&mut bridge).success());
    signal(d.pid(), libc::SIGCONT);
}

/// `ovai status` before a daemon that takes the connection and says nothing says so in words, as the
/// bridge does; it once printed an errno ("Resource temporarily unavailable").
#[test]
fn status_before_a_daemon_that_says_nothing_says_so_in_words() {
    let inst = Instance::new();
    let d = inst.start();
    freeze(d.pid());
    let out = inst
        .cmd()
        .arg("status")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    signal(d.pid(), libc::SIGCONT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 2: the daemon was not reached, as operations.md says.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    // Named by its pid, which `kill` takes (a binary of another name would escape a pgrep for
    // 'ovai serve'), and what was asked is said to be done if it goes on.
    let pid = d.pid();
    assert!(
        stderr.contains(&format!(
            "(pid {pid}) took the connection and said nothing within 60 s: it is stopped or stuck, and what \
             was asked of it is done if it goes on"
        )) && stderr.contains(&format!("`kill {pid}`, then `kill -9 {pid}` if it stays")),
        "{stderr}"
    );
    // Said at once that it waits, and how long: a minute of nothing read as a hang (helper-92).
    assert!(
        stderr.starts_with(&format!(
            "ovai: the server for {} (pid {pid}) has not answered in 5 s; this waits up to 60 s for it.\n",
            inst.root.display()
        )),
        "{stderr}"
    );
}

/// A bridge that cannot connect answers the client's first request in words, even from a stdin that
/// does not block (it once read nothing there, and ended without an answer).
#[test]
fn a_refused_bridge_answers_its_first_request_from_a_stdin_that_does_not_block() {
    let inst = Instance::new();
    let _d = inst.start();
    let (mut bridge, mut write) = bridge_on_non_blocking_stdin(&inst, "not-a-seats-secret");
    let pid = bridge.id();
    wait_until(
        "the bridge to wait for its first request, or to end",
        || (blocked_in(pid, "poll", 0) || bridge.try_wait().ok().flatten().is_some()).then_some(()),
    );
    let _ = write.write_all(INITIALIZE);
    let answer = first_answer(&mut bridge, b"");
    assert_eq!(answer["id"], 0, "{answer}");
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    drop(write);
    assert!(!wait_exit(&mut bridge).success());
}

/// A client gone while the bridge waits for its daemon to come back is owed nothing: the bridge ends
/// then, as a client's bridge, rather than when it gives up on the daemon (30 s later, saying so).
#[test]
fn a_client_gone_while_the_bridge_waits_for_a_daemon_ends_it_at_once() {
    let inst = Instance::new();
    let d = inst.start();
    let (mut bridge, input, output) = slow_reader(&inst, "lead");
    let gone = d.pid();
    signal(gone, libc::SIGKILL);
    drop(d);
    wait_gone(gone);
    drop(output);
    assert!(wait_exit(&mut bridge).success());
    drop(input);
}

/// Makes one end of a pipe not block, as a client handing over a descriptor it shares may have it.
fn non_blocking(end: &impl std::os::fd::AsRawFd) {
    // SAFETY: F_GETFL and F_SETFL read and set the descriptor's flags, nothing in memory.
    unsafe {
        let flags = libc::fcntl(end.as_raw_fd(), libc::F_GETFL);
        assert!(libc::fcntl(end.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) == 0);
    }
}

/// A stdout that does not block fills up when the client is slow to read: the bridge waits for room,
/// rather than lose what it owes (a failed write once ended it, half a line written).
#[test]
fn a_stdout_that_does_not_block_gets_every_answer_once_the_client_reads() {
    let inst = Instance::new();
    let _d = inst.start();
    let (read, write) = std::io::pipe().unwrap();
    non_blocking(&write);
    let mut bridge = bridge_command(&inst.root, Some(&inst.secret("lead")))
        .stdin(std::process::Stdio::piped())
        .stdout(write)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut input = bridge.stdin.take().unwrap();
    let ids = 1..=2000u64;
    let pings: String = ids
        .clone()
        .map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n"))
        .collect();
    input
        .write_all(&[INITIALIZE, pings.as_bytes()].concat())
        .unwrap();
    // Its stdin still open, the bridge waits in poll(2) only for room on its stdout.
    let pid = bridge.id();
    wait_until(
        "the bridge to wait for room on its stdout, or to end",
        || (blocked_in(pid, "poll", 1) || bridge.try_wait().ok().flatten().is_some()).then_some(()),
    );
    drop(input);
    let lines = lines_to_the_end(std::io::BufReader::new(read));
    let mut answered: Vec<u64> = lines.iter().filter_map(|m| m["id"].as_u64()).collect();
    answered.sort_unstable();
    let all: Vec<u64> = std::iter::once(0).chain(ids).collect();
    assert_eq!(answered, all);
    assert!(
        lines.iter().all(|m| m.get("result").is_some()),
        "{:?}",
        lines.first()
    );
    assert!(wait_exit(&mut bridge).success());
}

/// A stdin that does not block has, now and then, nothing to read yet: the bridge waits for more,
/// rather than take it for the client's end (it once ended after the first request's answer).
#[test]
fn a_stdin_that_does_not_block_is_read_as_lines_come_not_taken_for_its_end() {
    use std::io::BufRead;
    let inst = Instance::new();
    let _d = inst.start();
    let (mut bridge, mut write) = bridge_on_non_blocking_stdin(&inst, &inst.secret("lead"));
    let mut output = std::io::BufReader::new(TimedReader::new(bridge.stdout.take().unwrap()));
    let mut line = String::new();
    write.write_all(INITIALIZE).unwrap();
    output.read_line(&mut line).unwrap();
    assert!(line.contains("serverInfo"), "{line}");
    for id in 1..=3 {
        write
            .write_all(
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").as_bytes(),
            )
            .unwrap();
        line.clear();
        output.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert_eq!(answer["id"], id);
        assert!(answer.get("result").is_some(), "{answer}");
    }
    drop(write);
    assert!(wait_exit(&mut bridge).success());
}

/// `ovai mcp` presenting `secret`, its stdin a pipe that does not block (the test writes into the
/// other end, given back), its stdout piped.
fn bridge_on_non_blocking_stdin(
    inst: &Instance,
    secret: &str,
) -> (std::process::Child, std::io::PipeWriter) {
    let (read, write) = std::io::pipe().unwrap();
    non_blocking(&read);
    let bridge = bridge_command(&inst.root, Some(secret))
        .stdin(read)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (bridge, write)
}

/// The read end of the pipe process `pid` reads the daemon from (its one pipe read past stdin),
/// opened anew.
fn daemons_pipe(pid: u32) -> std::fs::File {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    let fd = fds
        .flatten()
        .filter_map(|f| f.file_name().to_str()?.parse::<u32>().ok())
        .find(|&fd| {
            let to = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap_or_default();
            let info =
                std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                .unwrap_or(1);
            fd > 2 && to.to_string_lossy().starts_with("pipe:") && flags & 3 == 0
        })
        .expect("the bridge reads the daemon from a pipe");
    std::fs::File::open(format!("/proc/{pid}/fd/{fd}")).unwrap()
}

/// How many bytes this pipe holds at most.
fn pipe_size(pipe: &impl std::os::fd::AsRawFd) -> i32 {
    // SAFETY: F_GETPIPE_SZ reads nothing through memory.
    unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_GETPIPE_SZ) }
}

/// Whether a thread of process `pid` waits in read(2) or write(2) on `fd`, or in poll(2) or
/// recvmsg(2) on any, as /proc says.
fn blocked_in(pid: u32, call: &str, fd: u8) -> bool {
    let arm = cfg!(target_arch = "aarch64");
    let numbers: &[&str] = match (call, arm) {
        ("read", false) => &["0"],
        ("write", false) => &["1"],
        ("poll", false) => &["7", "271"],
        ("recvmsg", false) => &["47"],
        ("read", true) => &["63"],
        ("write", true) => &["64"],
        ("recvmsg", true) => &["212"],
        _ => &["73"],
    };
    let fd = format!("{fd:#x}");
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        let now = std::fs::read_to_string(t.path().join("syscall")).unwrap_or_default();
        let mut fields = now.split_whitespace();
        fields.next().is_some_and(|n| numbers.contains(&n))
            && (matches!(call, "poll" | "recvmsg") || fields.next() == Some(fd.as_str()))
    })
}

/// How many bytes written into this pipe wait to be read.
fn unread(pipe: &impl std::os::fd::AsRawFd) -> i32 {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer it is given.
    unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut n) };
    n
}

/// What a session sends that reaches the daemon's own log (rmcp's warning for a request it answers
/// with an error names the request's id) cannot forge a row there, nor reach the operator's terminal as
/// escapes: each event is one line, its controls written out.
#[test]
fn a_request_id_cannot_forge_a_row_of_the_daemons_log() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize_as("2025-06-18");
    let forged = "x\n2026-12-06T06:00:00.000000Z ERROR ovai::server: FORGED ROW\n\u{1b}[2J\u{1b}]0;title\u{7}";
    s.send(&json!({ "jsonrpc": "2.0", "id": forged, "method": "notifications/initialized" }));
    let answer = s.recv_where(|m| m["id"] == forged);
    assert!(answer["error"].is_object(), "{answer}");
    s.close_input();
    s.wait();
    let path = d.stderr.clone();
    drop(d);
    let log = std::fs::read_to_string(path).unwrap();
    assert!(
        !log.lines()
            .any(|l| l.starts_with("2026-12-06T06:00:00.000000Z ERROR")),
        "{log}"
    );
    assert!(!log.contains('\u{1b}') && !log.contains('\u{7}'), "{log:?}");
    assert!(
        log.contains("FORGED ROW"),
        "the id is still there, escaped: {log}"
    );
}

/// A `subscriptions/listen` stays open for the session's life, holding one of its 64 requests in flight:
/// 64 of them left no room for anything, unanswered, for good. Past 8 a listen is refused in words,
/// and the session goes on.
#[test]
fn listens_past_a_few_are_refused_and_the_session_goes_on() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} });
    s.request("tools/list", json!({ "_meta": meta }));
    let mut open = Vec::new();
    for _ in 0..8 {
        open.push(s.send_request(
            "subscriptions/listen",
            json!({ "_meta": meta, "notifications": { "toolsListChanged": true } }),
        ));
        s.recv_where(|m| m["method"] == "notifications/subscriptions/acknowledged");
    }
    let ninth = s.send_request(
        "subscriptions/listen",
        json!({ "_meta": meta, "notifications": { "toolsListChanged": true } }),
    );
    let refused = s.recv_where(|m| m["id"] == ninth && m.get("error").is_some());
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    // Refused without being acknowledged first (a stream acknowledged reads as live; helper-88).
    let acked = |m: &Value| {
        m["method"] == "notifications/subscriptions/acknowledged"
            && m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == ninth
    };
    assert!(!s.backlog.iter().any(acked), "{:?}", s.backlog);
    // One cancelled makes room for another at once.
    s.send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": open[0] } }));
    let tenth = s.send_request(
        "subscriptions/listen",
        json!({ "_meta": meta, "notifications": { "toolsListChanged": true } }),
    );
    s.recv_where(|m| {
        m["method"] == "notifications/subscriptions/acknowledged"
            && m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == tenth
    });
    let words = refused["error"]["message"].as_str().unwrap();
    assert!(
        words.contains("holds 8 subscriptions/listen streams"),
        "{words}"
    );
    let answer = s.request(
        "tools/call",
        json!({ "_meta": meta, "name": "echo", "arguments": { "text": "still here" } }),
    );
    assert!(text_of(&answer).0.contains("still here"), "{answer}");
}

/// A session is initialized once: a second `initialize` (asking another revision, say) is refused in
/// words, and the session goes on speaking the revision it began with. It was answered, and the
/// session went on half in one revision, half in the other (ping refused, lists in the other shape).
#[test]
fn a_second_initialize_is_refused_and_the_revision_stays() {
    let inst = Instance::new();
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize_as("2025-11-25");
    let again = s.send_request(
        "initialize",
        json!({ "protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": { "name": "x", "version": "1" } }),
    );
    let refused = s.response(again);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("initialized already"),
        "{refused}"
    );
    let listed = s.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    assert!(listed["result"].get("resultType").is_none(), "{listed}");
    let pong = s.request("ping", json!({}));
    assert!(pong["result"].is_object(), "{pong}");
}

/// A progress token of a kind MCP does not have (an object, a list, a boolean, a fraction) was taken as
/// none: the call ran and its progress never came, with no word why. It is `-32602`, named.
#[test]
fn a_progress_token_of_another_kind_is_invalid_params_in_words() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for (token, kind) in [
        (json!({}), "an object"),
        (json!([1]), "an array"),
        (json!(true), "a boolean"),
        (json!(1.5), "a number"),
    ] {
        let answer = s.request(
            "tools/call",
            json!({ "name": "echo", "arguments": {}, "_meta": { "progressToken": token } }),
        );
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let words = answer["error"]["message"].as_str().unwrap();
        assert!(
            words.contains(&format!(
                "params._meta.progressToken is {kind}; a progress token is a string or an integer"
            )),
            "{words}"
        );
    }
    // An integer past a signed 64-bit one is said to be one, and what to send instead.
    for (id, big) in [
        ("u63", "9223372036854775808"),
        ("u64", "18446744073709551616"),
    ] {
        s.send_raw(
            format!(
                r#"{{"jsonrpc":"2.0","id":"{id}","method":"tools/call","params":{{"name":"echo","arguments":{{}},"_meta":{{"progressToken":{big}}}}}}}
"#
            )
            .as_bytes(),
        );
        let answer = error_for(&mut s, json!(id));
        assert_eq!(answer["code"], -32602, "{answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(
                "params._meta.progressToken is an integer past what a signed 64-bit integer holds"
            ),
            "{answer}"
        );
    }
    // null is no token; a string or an integer is one.
    for token in [json!(null), json!("p"), json!(7)] {
        let answer = s.request(
            "tools/call",
            json!({ "name": "echo", "arguments": {}, "_meta": { "progressToken": token } }),
        );
        assert!(answer["result"].is_object(), "{answer}");
    }
}

/// Lines left unfinished on the socket hold their bytes against their seat's share (64 MiB): one
/// seat's many sessions, each holding a line of up to 16 MiB without its end, held the daemon at a
/// gigabyte (helper-64). The line that would go past the share is skipped as it comes and answered
/// under its id; the others are read as ever.
#[test]
fn a_seats_unfinished_lines_hold_no_more_than_its_share() {
    use std::io::Write;
    let inst = Instance::new();
    let _d = inst.start();
    let socket = inst.root.join(".ovai/ovai.sock");
    let hello = format!(
        "{}\n",
        json!({ "ovai": ovai::wire::VERSION, "seatSecret": inst.secret("lead") })
    );
    let body = "a".repeat(15 << 20);
    let mut conns: Vec<std::os::unix::net::UnixStream> = (1..=5)
        .map(|id| {
            let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            s.set_read_timeout(Some(PATIENCE)).unwrap();
            s.write_all(hello.as_bytes()).unwrap();
            let welcome = ovai::client::read_line_unbuffered(&mut s, 64 * 1024).unwrap();
            assert!(welcome.contains("\"ok\":true"), "{welcome}");
            let start = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"index","arguments":{{"x":"{body}"#
            );
            s.write_all(start.as_bytes()).unwrap();
            s
        })
        .collect();
    let answers: Vec<String> = conns
        .iter_mut()
        .map(|s| {
            s.write_all(b"\"}}}\n").unwrap();
            ovai::client::read_line_unbuffered(s, 1 << 20).unwrap()
        })
        .collect();
    let crowded: Vec<&String> = answers
        .iter()
        .filter(|a| a.contains("this seat's sessions held more than 64 MiB of lines not yet ended"))
        .collect();
    assert_eq!(crowded.len(), 1, "{answers:#?}");
    assert!(crowded[0].contains("\"id\":5"), "{}", crowded[0]);
    // The session goes on: its next line is read.
    let s = &mut conns[4];
    s.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n")
        .unwrap();
    let next = ovai::client::read_line_unbuffered(s, 1 << 20).unwrap();
    assert!(next.contains("\"id\":9"), "{next}");
}

/// A call the client cancels while no daemon runs (the bridge holding it for the next) never starts:
/// it ran, and was stopped at once, when the daemon came back.
#[test]
fn a_call_cancelled_while_the_daemon_is_away_never_starts() {
    const MARKS: &str = r#"
import { writeFileSync } from "node:fs";
export const description = "Marks that it ran.";
export const inputSchema = { type: "object" };
export function run(args, { root }) {
  writeFileSync(`${root}/work/ran-${args.n}`, "");
  return { text: `ran ${args.n}` };
}
"#;
    const HANGS: &str = r#"
export const description = "Never answers.";
export const inputSchema = { type: "object" };
export function run() { return new Promise(() => {}); }
"#;
    let inst = Instance::with_plugins(&[("marks.mjs", MARKS), ("hangs.mjs", HANGS)]);
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    // A call cut off by the daemon's end is answered once the bridge has seen it go: from then on it
    // keeps what the client sends for the next daemon. Killed once the call runs: killed before the
    // bridge passed it on, it would wait for the next daemon (seen once on a loaded machine).
    let cut = s.send_request("tools/call", json!({ "name": "hangs", "arguments": {} }));
    wait_until("the call to run", || {
        (d.status()?["callsRunningTotal"].as_u64()? >= 1).then_some(())
    });
    let pid = d.pid();
    signal(pid, libc::SIGKILL);
    wait_gone(pid);
    assert!(text_of(&s.response(cut)).0.contains("went away"));
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"marks\",\"arguments\":{\"n\":1}}}\n",
    );
    raw(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\n",
    );
    drop(d);
    let _back = inst.start();
    assert_eq!(
        s.call("marks", json!({ "n": 2 })),
        ("ran 2".to_string(), false)
    );
    assert!(
        !inst.root.join("work/ran-1").exists(),
        "the cancelled call ran"
    );
    assert!(
        s.backlog.iter().all(|m| m["id"] != json!(7)),
        "a cancelled call is not answered: {:?}",
        s.backlog
    );
}

/// A tools/list with a cursor this server never gave is refused `-32602`, as MCP asks, saying the list
/// comes whole: before, any cursor was passed over and the whole list sent.
#[test]
fn a_tools_list_cursor_never_given_is_invalid_params() {
    let inst = Instance::new();
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for cursor in [json!("bogus"), json!(5)] {
        let r = s.request("tools/list", json!({ "cursor": cursor }));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        if cursor.is_string() {
            assert!(
                r["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("send tools/list without a cursor"),
                "{r}"
            );
        }
    }
    let r = s.request("tools/list", json!({}));
    assert!(r["result"]["tools"].is_array(), "{r}");
}

/// Each request the server refuses had rmcp write a warning on the operator's stderr: a session sending
/// 20,000 of them wrote 82 MB there in 19 s (helper-100), which a journal's rate limit would have paid
/// for with the daemon's own words. rmcp's warnings are written ten a second at most, and how many were
/// left out is said.
#[test]
fn a_flood_of_refused_requests_writes_a_few_warnings_and_counts_the_rest() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let flood: String = (0..2000)
        .map(|i| format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"resources/list\"}}\n"))
        .collect();
    raw(&mut s, flood.as_bytes());
    error_for(&mut s, json!(1999));
    let mut next = 10_000;
    let said = wait_until("the count of the warnings left out", || {
        next += 1;
        raw(
            &mut s,
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{next},\"method\":\"resources/list\"}}\n")
                .as_bytes(),
        );
        error_for(&mut s, json!(next));
        let said = std::fs::read_to_string(&d.stderr).ok()?;
        said.contains("more warnings of rmcp (the MCP library) were left out")
            .then_some(said)
    });
    let warnings = said.lines().filter(|l| l.contains("WARN rmcp")).count();
    assert!(warnings < 100, "{warnings} warnings of rmcp written");
}

/// A method name holding a space was answered with the bare name rmcp gives, unclipped (a 900 KB name
/// came back whole), where any other gets words naming what the server serves (helper-100).
#[test]
fn a_method_with_a_space_in_its_name_is_told_in_words_and_clipped() {
    let inst = Instance::new();
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let long = format!("a {}", "x".repeat(900_000));
    let worded = format!("Method not found: {}", "x".repeat(900_000));
    for (id, method) in [
        (1, "ping "),
        (2, "resources/list "),
        (3, long.as_str()),
        (4, worded.as_str()),
    ] {
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        raw(&mut s, format!("{line}\n").as_bytes());
        let e = error_for(&mut s, json!(id));
        assert_eq!(e["code"], -32601, "{e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with("Method not found: this server does not serve "),
            "{message:.300}"
        );
        assert!(message.len() < 4096, "{}", message.len());
    }
}

/// A seat's sessions together hold only so much unread: each session's own bound (`sessionQueueBytes`,
/// and the calls it had in flight as it reached it) times the 64 sessions a seat may hold was gigabytes
/// (helper-100: 2.3 GB with 32 sessions). Another seat is answered meanwhile.
#[test]
fn a_seats_sessions_that_never_read_hold_only_so_much_together() {
    const BIG: &str = r#"
export const description = "Answers 512 KB.";
export const inputSchema = { type: "object" };
export function run() { return { text: "x".repeat(512 * 1024) }; }
"#;
    let inst = Instance::with_plugins(&[("big.mjs", BIG)]);
    inst.add_seat("w1");
    let d = inst.start();
    let before = rss_mb(d.pid());
    let mut socks = Vec::new();
    for _ in 0..24 {
        let mut sock = direct(&inst, "w1");
        sock.write_all(INITIALIZE).unwrap();
        let calls: String = (1..=100)
            .map(|id| {
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"big\",\"arguments\":{{}}}}}}\n"
                )
            })
            .collect();
        let calls = calls.into_bytes();
        sock.write_all(&calls).unwrap();
        socks.push(sock);
    }
    let mut most = 0.0f64;
    for _ in 0..200 {
        most = most.max(rss_mb(d.pid()));
        std::thread::sleep(std::time::Duration::from_millis(40));
    }
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("index", json!({})).1);
    assert!(
        most - before < 300.0,
        "the seat's 24 sessions took the daemon from {before:.0} to {most:.0} MB"
    );
    drop(socks);
}
