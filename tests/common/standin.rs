//! The HTTP under the stand-in model APIs (gemini_api.rs, responses_api.rs): a listener on loopback that
//! reads each request whole (a body with a length or in chunks) and answers it with one response, then
//! closes the connection. Every request a stand-in keeps can also be written to OVAI_TEST_API_DUMP=DIR,
//! to see what a failing test was sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use serde_json::Value;

use super::PATIENCE;

/// One request: its method and target (`POST`, `/v1/responses`) and its body as JSON (Null if it is none).
pub struct Request {
    pub method: String,
    pub target: String,
    pub body: Value,
}

/// An answer: its status, content type and body.
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Answer {
    pub fn json(body: &Value) -> Self {
        Self {
            status: 200,
            content_type: "application/json",
            body: body.to_string(),
        }
    }

    /// Server-sent events, each `(event name, data)`; a nameless event has only its data line.
    pub fn events(events: &[(Option<&str>, Value)]) -> Self {
        let mut body = String::new();
        for (name, data) in events {
            if let Some(name) = name {
                body.push_str(&format!("event: {name}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Self {
            status: 200,
            content_type: "text/event-stream",
            body,
        }
    }

    pub fn not_found() -> Self {
        Self {
            status: 404,
            content_type: "application/json",
            body: "{}".into(),
        }
    }
}

/// Listens on a loopback port, answering every request with `answer` on a thread of its own; the base
/// URL (`http://127.0.0.1:PORT`).
pub fn serve(answer: impl Fn(Request) -> Answer + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || {
                if let Some(request) = read_request(&stream) {
                    write_answer(stream, &answer(request));
                }
            });
        }
    });
    url
}

/// Writes a kept request to OVAI_TEST_API_DUMP, if set.
pub fn dump(api: &str, body: &Value) {
    if let Some(dir) = std::env::var_os("OVAI_TEST_API_DUMP") {
        static SEEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SEEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = std::fs::write(
            std::path::Path::new(&dir).join(format!("{}-{api}-{n:03}.json", std::process::id())),
            serde_json::to_string_pretty(body).unwrap_or_default(),
        );
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    stream.set_read_timeout(Some(PATIENCE)).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    Some(Request {
        method,
        target,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn write_answer(mut stream: TcpStream, answer: &Answer) {
    let reason = if answer.status == 200 {
        "OK"
    } else {
        "Not Found"
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\ncache-control: no-cache\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        answer.status,
        answer.content_type,
        answer.body.len(),
        answer.body
    );
    let _ = stream.flush();
}
