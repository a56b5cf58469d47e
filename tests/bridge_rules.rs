//! The bridge waits for an answer under an id exactly when the daemon sends one: the same generated lines
//! (ids of every kind and spelling, members given twice or missing, every order of the members, params of
//! every shape, nesting past any parser's limit, half surrogate pairs, bytes that are not UTF-8) go to a
//! real daemon's socket and through what `ovai mcp` notes (`stdio_bridge::answered_under`). A bridge that waits
//! for an answer the daemon never sends leaves its client waiting for ever when the daemon goes away; one
//! that does not wait for one the daemon sends answers nothing for it then.

mod common;
use common::*;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};

/// Every line the test sends, each with a number of its own (in its id, where it has one).
fn lines() -> Vec<(u64, Vec<u8>)> {
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut n = 1000u64;
    let mut next = |make: &dyn Fn(u64) -> Vec<u8>| {
        n += 1;
        out.push((n, make(n)));
    };
    let ids: Vec<Box<dyn Fn(u64) -> String>> = vec![
        Box::new(|n| n.to_string()),
        Box::new(|n| format!("{n}.0")),
        Box::new(|n| format!("{n}e0")),
        Box::new(|n| format!("{n}.5")),
        Box::new(|n| format!("\"s{n}\"")),
        Box::new(|n| format!("\"s\\u0041{n}\"")),
        Box::new(|n| format!("\"s{n}\\ud800\"")),
        Box::new(|n| format!("\"s{n}\\\"q\"")),
        Box::new(|n| format!("\"{n}{}\"", "x".repeat(1100))),
        Box::new(|n| format!("{n}99999999999999999999")),
        Box::new(|_| "null".into()),
        Box::new(|_| "true".into()),
        Box::new(|n| format!("[{n}]")),
        Box::new(|n| format!("{{\"n\":{n}}}")),
    ];
    let params = [
        r#"{"name":"index","arguments":{}}"#.to_string(),
        r#"{"name":"nosuch"}"#.to_string(),
        r#"{"name":"index","arguments":{"x":1e999}}"#.to_string(),
        r#"{"name":"index","arguments":[1]}"#.to_string(),
        r#"{"name":5}"#.to_string(),
        r#"{"name":"index","name":"room"}"#.to_string(),
        r#"{"name":"index","_meta":{"progressToken":"p"}}"#.to_string(),
        r#"{"name":"index","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#.to_string(),
        r#"{"name":"index","_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}"#.to_string(),
        r#"{"name":"index","_meta":5}"#.to_string(),
        format!(r#"{{"name":"index","arguments":{{"deep":{}1{}}}}}"#, "[".repeat(300), "]".repeat(300)),
        r#"{"name":"ind\ud83dex"}"#.to_string(),
        "5".into(),
        "[]".into(),
        "null".into(),
    ];
    let methods = [
        "tools/call",
        "tools/list",
        "ping",
        "x/y",
        "initialize",
        "notifications/cancelled",
    ];
    for id in &ids {
        for method in methods {
            let p = if method == "tools/call" {
                &params[0]
            } else {
                "{}"
            };
            next(&|n| {
                format!(
                    r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{p}}}"#,
                    id(n)
                )
                .into_bytes()
            });
        }
        for p in &params {
            next(&|n| {
                format!(
                    r#"{{"method":"tools/call","params":{p},"jsonrpc":"2.0","id":{}}}"#,
                    id(n)
                )
                .into_bytes()
            });
        }
    }
    // Every order of the members, and each given twice or left out.
    let members = |n: u64| {
        [
            ("jsonrpc", "\"2.0\"".to_string()),
            ("id", n.to_string()),
            ("method", "\"tools/call\"".to_string()),
            ("params", params[0].clone()),
        ]
    };
    for order in permutations(4) {
        next(&|n| {
            let m = members(n);
            let body: Vec<String> = order
                .iter()
                .map(|i| format!("\"{}\":{}", m[*i].0, m[*i].1))
                .collect();
            format!("{{{}}}", body.join(",")).into_bytes()
        });
    }
    for twice in 0..4 {
        next(&|n| {
            let m = members(n);
            let mut body: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            body.push(format!("\"{}\":{}", m[twice].0, m[twice].1));
            format!("{{{}}}", body.join(",")).into_bytes()
        });
        next(&|n| {
            let m = members(n);
            let body: Vec<String> = m
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != twice)
                .map(|(_, (k, v))| format!("\"{k}\":{v}"))
                .collect();
            format!("{{{}}}", body.join(",")).into_bytes()
        });
    }
    for odd in [
        r#"{"jsonrpc":"1.0","id":N,"method":"ping"}"#,
        r#"{"id":N,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":N,"method":5}"#,
        r#"{"jsonrpc":"2.0","id":N,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":N,"method":"ping","result":1}"#,
        r#"{"jsonrpc":"2.0","id":N,"method":"tools/call","params":{"name":"index"}"#,
        r#"[{"jsonrpc":"2.0","id":N,"method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":N,"method":"ping","x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"#,
        r#"{"jsonrpc":"2.0","id":N,"method":"tools/list","params":{"cursor":5}}"#,
        r#"{"jsonrpc":"2.0","id":N,"method":"ping","params":{"_meta":{"progressToken":1.5}}}"#,
    ] {
        next(&|n| odd.replace('N', &n.to_string()).into_bytes());
    }
    // Lines that are no request at all, answered (or not) under null.
    for odd in [
        &b"garbage"[..],
        b"",
        b"   ",
        b"\xff\xfe",
        b"{}",
        b"[]",
        b"{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ping\"}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":[}",
    ] {
        next(&|_| odd.to_vec());
    }
    next(&|n| {
        let mut line =
            format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping","params":{{"x":""#).into_bytes();
        line.extend_from_slice(b"\xff\"}}");
        line
    });
    // Lines over the cap, which the daemon skips unread but for the members that say what they were.
    let pad = "x".repeat(ovai::jsonrpc::MAX_LINE);
    for long in [
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"index","arguments":{"pad":"PAD"}},"id":N}"#,
        r#"{"jsonrpc":"2.0","id":"sN","method":"ping","params":{"pad":"PAD"}}"#,
        r#"{"jsonrpc":"2.0","id":N,"id":N,"method":"ping","params":{"pad":"PAD"}}"#,
        r#"{"jsonrpc":"2.0","method":"ping","params":{"pad":"PAD","id":N}}"#,
        r#"{"jsonrpc":"2.0","id":N,"result":{"pad":"PAD"}}"#,
        r#"{"jsonrpc":"1.0","\u0069d":N,"params":["PAD"],"method":5}"#,
        r#"{"jsonrpc":"2.0","id":N 1,"method":"ping","params":{"pad":"PAD"}}"#,
        r#"{"jsonrpc":"2.0","id":N,"method":"ping","params":{"pad":"PAD"}"#,
        r#"["PAD",{"jsonrpc":"2.0","id":N,"method":"ping"}]"#,
        r#"{"jsonrpc":"2.0","id":SPN,"method":SP"ping"SP,"params":{"pad":"PAD"}}"#,
        r#"{"jsonrpc":"2.0","id":N,"\u0072\u0065\u0073\u0075\u006c\u0074":{"pad":"PAD"}}"#,
        r#"{"x":1,"id":N,"x":2,"id":N,"method":"ping","params":{"pad":"PAD"}}"#,
        r#"{"id":N,"x":1,"id":N,"x":2,"method":"ping","params":{"pad":"PAD"}}"#,
        r#"{JSONRPC,"id":N,"method":"ping","params":{"pad":"PAD"}}"#,
        r#"{"x":1,"x":2,"jsonrpc":"2.0","id":N,"id":N,"method":"ping","params":{"pad":"PAD"}}"#,
        r#"{"x":1,"x":2,"jsonrpc":"2.0","id":N,"result":1,"result":{"pad":"PAD"}}"#,
        r#"{"jsonrpc":"2.0","params":1,"id":N,"params":{"pad":"PAD"},"id":N,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":N.ZEROS,"method":"ping","params":{"pad":"PAD"}}"#,
        r#"{"jsonrpc":"2.0","id":"sNESCAPED","method":"ping","params":{"pad":"PAD"}}"#,
    ] {
        next(&|n| {
            long.replace('N', &n.to_string())
                .replace("SP", &" ".repeat(5000))
                .replace("JSONRPC", &[r#""jsonrpc":"2.0""#; 300].join(","))
                .replace("ZEROS", &"0".repeat(5000))
                .replace("ESCAPED", &"\\u0061".repeat(1000))
                .replace("PAD", &pad)
                .into_bytes()
        });
    }
    // Exactly at the cap, and one byte over it with the `\r` a client may end it with.
    for end in [&b""[..], b"\r"] {
        next(&|n| {
            let head = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping","params":{{"pad":""#);
            let mut line = head.into_bytes();
            line.resize(ovai::jsonrpc::MAX_LINE - 3, b'x');
            line.extend_from_slice(b"\"}}");
            line.extend_from_slice(end);
            line
        });
    }
    out
}

fn permutations(k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![vec![]];
    }
    let mut all = Vec::new();
    for rest in permutations(k - 1) {
        for at in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(at, k - 1);
            all.push(p);
        }
    }
    all
}

/// The number a key carries (its line's), when it carries one.
fn number_in(key: &str) -> Option<u64> {
    let digits: String = key
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .take(4)
        .collect();
    digits.parse().ok()
}

#[test]
fn the_bridge_waits_for_an_answer_exactly_when_the_daemon_sends_one() {
    let inst = Instance::new();
    let _d = inst.start();
    let ovai = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai).unwrap();
    ovai::client::hello_seat(&ovai, &mut sock, &inst.secret("lead"), PATIENCE).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut reader = BufReader::new(sock.try_clone().unwrap());
    let mut send = |line: &[u8]| {
        sock.write_all(line).unwrap();
        sock.write_all(b"\n").unwrap();
    };
    send(br#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(br#"{"jsonrpc":"2.0","id":"init-sync","method":"ping"}"#);
    let lines = lines();
    // The number each line carries, and the key the bridge waits for after it.
    let waits: HashMap<u64, Option<String>> = lines
        .iter()
        .map(|(n, l)| (*n, ovai::stdio_bridge::answered_under(l)))
        .collect();
    let mut answered: HashMap<u64, Vec<String>> = HashMap::new();
    // An answer under an id no request can have (null, 1.5, `[1]`: a line refused as it was read) comes
    // before the answer of the ping sent after its line, and is that line's.
    let mut read_until = |answered: &mut HashMap<u64, Vec<String>>,
                          sync: &str,
                          want: Option<&str>,
                          from: u64| {
        let mut synced = false;
        let mut got = want.is_none();
        while !(synced && got) {
            let mut line = String::new();
            let n = reader
                    .read_line(&mut line)
                    .unwrap_or_else(|e| panic!("an answer to line {from} (the daemon left one unsent; the bridge waits under {want:?}): {e}"));
            assert!(n > 0, "the daemon closed the session");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let Ok(id) = serde_json::from_value::<rmcp::model::NumberOrString>(v["id"].clone())
            else {
                // As written: a number past 64 bits, read, would be another.
                let raw = ovai::jsonrpc::members(line.trim_end(), ["id"])
                    .ok()
                    .and_then(|found| found.values[0])
                    .map_or("null".to_string(), |id| id.get().to_string());
                got |= want == Some(raw.as_str());
                answered.entry(from).or_default().push(raw);
                continue;
            };
            let key = serde_json::to_string(&id).unwrap();
            if key == format!("\"{sync}\"") {
                synced = true;
                continue;
            }
            if want == Some(key.as_str()) {
                got = true;
            }
            if let Some(n) = number_in(&key) {
                answered.entry(n).or_default().push(key);
            }
        }
    };
    read_until(&mut answered, "init-sync", Some("\"init\""), 0);
    for (n, line) in &lines {
        send(line);
        let sync = format!("sync-{n}");
        send(format!(r#"{{"jsonrpc":"2.0","id":"{sync}","method":"ping"}}"#).as_bytes());
        read_until(&mut answered, &sync, waits[n].as_deref(), *n);
    }
    for last in 0..20 {
        let sync = format!("last-{last}");
        send(format!(r#"{{"jsonrpc":"2.0","id":"{sync}","method":"ping"}}"#).as_bytes());
        read_until(&mut answered, &sync, None, 0);
    }
    let mut wrong = Vec::new();
    for (n, line) in &lines {
        let daemon: Vec<String> = answered.remove(n).unwrap_or_default();
        let bridge: Vec<String> = waits[n].iter().cloned().collect();
        if daemon != bridge {
            wrong.push(format!(
                "{}: the daemon answered under {daemon:?}, the bridge waits under {bridge:?}",
                String::from_utf8_lossy(&line[..line.len().min(300)])
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} lines:\n{}",
        wrong.len(),
        lines.len(),
        wrong.join("\n")
    );
}
