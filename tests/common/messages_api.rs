//! A stand-in for the Anthropic Messages API, so a real Claude Code runs offline in the tests.
//!
//! Claude Code POSTs `/v1/messages?beta=true` with `"stream": true`; each answer is the script's next
//! step, chosen by how many assistant turns the conversation already holds: a `tool_use` of one tool, or
//! closing text. Every request body is kept for the test to read (the tools offered, the tool results);
//! with OVAI_TEST_API_DUMP=DIR each is also written there, to see what a failing test was sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

#[derive(Clone)]
pub enum Step {
    /// Ask Claude Code to call this tool with this input.
    Tool(&'static str, Value),
    /// End the turn with this text.
    Text(&'static str),
}

pub struct MessagesApi {
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl MessagesApi {
    pub fn start(script: Vec<Step>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                let script = script.clone();
                std::thread::spawn(move || answer(stream, &script, &kept));
            }
        });
        Self { url, requests }
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The `tool_result` blocks Claude Code sent back, in order, each once. Every request carries the
    /// whole conversation, and a result need not be its last message: in one CI run of 2026-12-02 the
    /// plugin ran and Claude Code went on to its next turn, yet no request ended with the result (it
    /// sends `system` messages of its own among the others; not seen again in 16 runs since, 4 of them
    /// with both vCPUs loaded).
    pub fn tool_results(&self) -> Vec<Value> {
        let mut seen = std::collections::HashSet::new();
        self.requests()
            .iter()
            .flat_map(|body| body["messages"].as_array().cloned().unwrap_or_default())
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .filter(|b| seen.insert(b["tool_use_id"].to_string()))
            .collect()
    }

    /// The names of the tools offered in each request.
    pub fn tools_offered(&self) -> Vec<Vec<String>> {
        self.requests()
            .iter()
            .map(|body| {
                body["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t["name"].as_str().map(str::to_string))
                    .collect()
            })
            .collect()
    }
}

/// The text of a tool_result block, whether Claude Code sent it as a string or as text blocks.
pub fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn answer(stream: TcpStream, script: &[Step], kept: &Mutex<Vec<Value>>) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut out = stream;
    if !request_line.starts_with("POST /v1/messages") || request_line.contains("count_tokens") {
        let _ = write!(
            out,
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        );
        return;
    }
    if let Some(dir) = std::env::var_os("OVAI_TEST_API_DUMP") {
        static SEEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = std::fs::write(
            std::path::Path::new(&dir).join(format!("{}-{n:03}.json", std::process::id())),
            serde_json::to_string_pretty(&body).unwrap_or_default(),
        );
    }
    kept.lock().unwrap().push(body.clone());
    let turns = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    let step = script
        .get(turns)
        .cloned()
        .unwrap_or(Step::Text("Nothing more to do."));
    let model = body["model"].as_str().unwrap_or("claude").to_string();
    let mut events = vec![json!({ "type": "message_start", "message": {
        "id": format!("msg_{turns}"), "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": { "input_tokens": 10, "output_tokens": 1 } } })];
    let stop = match step {
        Step::Tool(name, input) => {
            events.push(
                json!({ "type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": format!("toolu_{turns}"), "name": name, "input": {} } }),
            );
            events.push(
                json!({ "type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": input.to_string() } }),
            );
            "tool_use"
        }
        Step::Text(text) => {
            events.push(json!({ "type": "content_block_start", "index": 0,
                "content_block": { "type": "text", "text": "" } }));
            events.push(json!({ "type": "content_block_delta", "index": 0,
                "delta": { "type": "text_delta", "text": text } }));
            "end_turn"
        }
    };
    events.push(json!({ "type": "content_block_stop", "index": 0 }));
    events.push(
        json!({ "type": "message_delta", "delta": { "stop_reason": stop, "stop_sequence": null },
        "usage": { "output_tokens": 5 } }),
    );
    events.push(json!({ "type": "message_stop" }));
    let mut sse = String::new();
    for e in events {
        sse.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap()
        ));
    }
    let _ = write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{sse}",
        sse.len()
    );
}
