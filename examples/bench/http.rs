//! The HTTP cases: calls over MCP's Streamable HTTP (2025-11-25, one session), to ovai's endpoint and to
//! the TypeScript SDK's own HTTP server serving the same plugin. Keep-alive HTTP/1.1 connections, one per
//! call in flight, all in the same session.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Ids of calls: never reused within a session, warm-up and measured calls alike (MCP asks it).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
    token: Option<String>,
    pub session: Option<String>,
}

impl Conn {
    pub fn open(addr: SocketAddr, token: Option<&str>, session: Option<String>) -> Self {
        let stream = TcpStream::connect(addr).expect("the HTTP endpoint takes connections");
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Self {
            reader: BufReader::with_capacity(1 << 16, stream.try_clone().unwrap()),
            writer: stream,
            host: addr.to_string(),
            token: token.map(str::to_string),
            session,
        }
    }

    /// POSTs one JSON-RPC message; the response's session header (if any) and its JSON-RPC messages.
    pub fn post(&mut self, body: &Value) -> (Option<String>, Vec<Value>) {
        let body = body.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nmcp-protocol-version: 2025-11-25\r\n",
            self.host,
            body.len()
        );
        if let Some(t) = &self.token {
            head.push_str(&format!("authorization: Bearer {t}\r\n"));
        }
        if let Some(s) = &self.session {
            head.push_str(&format!("mcp-session-id: {s}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.writer
            .write_all(head.as_bytes())
            .expect("a request is sent");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("a status line");
        let mut session = None;
        let mut length = None;
        let mut chunked = false;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("a header");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            match k.trim().to_ascii_lowercase().as_str() {
                "mcp-session-id" => session = Some(v.trim().to_string()),
                "content-length" => length = v.trim().parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.contains("chunked"),
                _ => {}
            }
        }
        let mut raw = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).expect("a chunk size");
                let n = usize::from_str_radix(line.trim(), 16).expect("a chunk size in hex");
                let mut chunk = vec![0; n + 2];
                self.reader.read_exact(&mut chunk).expect("a chunk");
                if n == 0 {
                    break;
                }
                raw.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = length {
            raw.resize(n, 0);
            self.reader.read_exact(&mut raw).expect("a body");
        }
        let text = String::from_utf8_lossy(&raw);
        let messages = if text.trim_start().starts_with('{') {
            serde_json::from_str(&text).into_iter().collect()
        } else {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect()
        };
        (session, messages)
    }
}

/// Opens a session: initialize, then the initialized notification. Returns the session id.
pub fn open_session(addr: SocketAddr, token: Option<&str>) -> String {
    let mut c = Conn::open(addr, token, None);
    let (session, _) = c.post(&json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "bench", "version": "1" } } }));
    let session = session.expect("a session id");
    let mut c = Conn::open(addr, token, Some(session.clone()));
    c.post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    session
}

/// `total` calls of `tool`, `k` at a time (one connection each); latencies, wall time, failures.
pub fn calls(
    addr: SocketAddr,
    token: Option<&str>,
    session: &str,
    tool: &str,
    total: usize,
    k: usize,
) -> (Vec<Duration>, Duration, usize) {
    let per = total.div_ceil(k);
    let started = Instant::now();
    let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..k)
            .map(|_| {
                scope.spawn(move || {
                    let mut c = Conn::open(addr, token, Some(session.to_string()));
                    let mut lat = Vec::with_capacity(per);
                    let mut failed = 0;
                    for i in 0..per {
                        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                        let sent = Instant::now();
                        let (_, messages) = c
                            .post(&json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                            "params": { "name": tool, "arguments": { "i": i } } }));
                        lat.push(sent.elapsed());
                        let answer = messages.iter().find(|m| m["id"] == json!(id));
                        if answer.is_none_or(|m| {
                            m.get("error").is_some() || m["result"]["isError"] == json!(true)
                        }) {
                            failed += 1;
                        }
                    }
                    (lat, failed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a calling thread"))
            .collect()
    });
    let wall = started.elapsed();
    let failed = results.iter().map(|r| r.1).sum();
    (
        results.into_iter().flat_map(|r| r.0).collect(),
        wall,
        failed,
    )
}
