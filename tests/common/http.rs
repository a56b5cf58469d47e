//! A small HTTP/1.1 client for the Streamable HTTP tests, over a real TCP connection (and TLS, with a
//! certificate the test made): one request per connection, chunked bodies, and server-sent events read as
//! they come. Every read has a deadline, so a server that stops answering fails the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use serde_json::{Value, json};

use super::PATIENCE;

pub trait Io: Read + Write + Send {}
impl<T: Read + Write + Send> Io for T {}

#[derive(Clone)]
pub struct Http {
    pub addr: SocketAddr,
    /// The host name sent (and, over TLS, checked against the certificate).
    pub host: String,
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    body: BufReader<Body>,
}

impl Http {
    /// The endpoint's URL as `ovai status` gives it (`http://127.0.0.1:PORT/mcp`).
    pub fn at(url: &str) -> Self {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .expect("an http(s) URL");
        let authority = rest.split('/').next().unwrap();
        Self {
            addr: authority.parse().expect("an address and port"),
            host: authority.to_string(),
            tls: None,
        }
    }

    pub fn request(&self, method: &str, headers: &[(&str, &str)], body: &str) -> Response {
        self.request_at("/mcp", method, headers, body)
    }

    /// A 2026-07-28 `tools/call` as written (`body`), with the headers that revision asks for: the
    /// bearer token, and `mcp_name` as its Mcp-Name (none when `None`).
    pub fn call_2026(&self, secret: &str, mcp_name: Option<&str>, body: &Value) -> Response {
        let bearer = format!("Bearer {secret}");
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("authorization", bearer.as_str()),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ];
        headers.extend(mcp_name.map(|n| ("mcp-name", n)));
        self.request("POST", &headers, &body.to_string())
    }

    /// A request for another path of the same server (the status page's, `/web/…`).
    pub fn request_at(
        &self,
        path: &str,
        method: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Response {
        let tcp = TcpStream::connect(self.addr).expect("the HTTP endpoint takes connections");
        tcp.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut io: Box<dyn Io> = match &self.tls {
            None => Box::new(tcp),
            Some(config) => {
                let name = self.host.split(':').next().unwrap().to_string();
                let conn = tokio_rustls::rustls::ClientConnection::new(
                    config.clone(),
                    name.try_into().expect("a server name"),
                )
                .unwrap();
                Box::new(tokio_rustls::rustls::StreamOwned::new(conn, tcp))
            }
        };
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.host,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        // The server may answer (and close) before taking all of the body, as it does a body too large.
        let _ = io
            .write_all(head.as_bytes())
            .and_then(|()| io.write_all(body.as_bytes()))
            .and_then(|()| io.flush());
        let mut reader = BufReader::new(io);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).unwrap();
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP status line: {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let length = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok());
        let body = Body {
            inner: reader,
            chunked,
            left: if chunked { Some(0) } else { length },
            done: false,
        };
        Response {
            status,
            headers,
            body: BufReader::new(body),
        }
    }
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(mut self) -> String {
        let mut s = String::new();
        self.body.read_to_string(&mut s).unwrap();
        s
    }

    pub fn json(self) -> Value {
        let text = self.text();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// The next JSON-RPC message: the body itself (application/json) or the next SSE `data:` event that
    /// holds one. None when the stream ended.
    pub fn next_message(&mut self) -> Option<Value> {
        self.next_event().map(|(_, m)| m)
    }

    /// The next JSON-RPC message and the SSE event id it came with, if any.
    pub fn next_event(&mut self) -> Option<(Option<String>, Value)> {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json"))
        {
            let mut s = String::new();
            self.body.read_to_string(&mut s).ok()?;
            return (!s.is_empty()).then(|| (None, serde_json::from_str(&s).unwrap()));
        }
        let mut data = String::new();
        let mut id = None;
        loop {
            let mut line = String::new();
            match self.body.read_line(&mut line) {
                Ok(0) => return None,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    panic!("no message came within {} s", PATIENCE.as_secs())
                }
                Err(_) => return None,
                Ok(_) => {}
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            } else if let Some(i) = line.strip_prefix("id:") {
                id = Some(i.trim_start().to_string());
            } else if line.is_empty() && !data.trim().is_empty() {
                if let Ok(v) = serde_json::from_str(&data) {
                    return Some((id, v));
                }
                data.clear();
                id = None;
            } else if line.is_empty() {
                data.clear();
                id = None;
            }
        }
    }

    /// The id of the stream's next event, whatever it holds (a priming event's, which holds no message).
    pub fn next_event_id(&mut self) -> Option<String> {
        loop {
            let mut line = String::new();
            if self.body.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if let Some(id) = line.trim_end().strip_prefix("id:") {
                return Some(id.trim().to_string());
            }
        }
    }

    /// Reads the stream to its end, which must come (a listen stream's own answer may come first), with no
    /// list change or other notification on the way.
    pub fn ends(&mut self) {
        while let Some(m) = self.next_message() {
            assert!(m.get("method").is_none(), "a message after the end: {m}");
        }
    }

    /// The message answering `id`, skipping notifications and progress before it.
    pub fn answer(&mut self, id: u64) -> Value {
        loop {
            let m = self
                .next_message()
                .unwrap_or_else(|| panic!("the stream ended before the answer to {id}"));
            if m["id"] == json!(id) {
                return m;
            }
        }
    }
}

/// A body as its framing says: chunked, a length, or until the connection closes.
struct Body {
    inner: BufReader<Box<dyn Io>>,
    chunked: bool,
    /// Bytes left in this chunk (or the whole body); None: until close.
    left: Option<usize>,
    done: bool,
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.chunked && self.left == Some(0) {
            let mut size = String::new();
            loop {
                size.clear();
                if self.inner.read_line(&mut size)? == 0 {
                    self.done = true;
                    return Ok(0);
                }
                if !size.trim().is_empty() {
                    break;
                }
            }
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .map_err(|e| std::io::Error::other(format!("bad chunk size {size:?}: {e}")))?;
            if n == 0 {
                self.done = true;
                return Ok(0);
            }
            self.left = Some(n);
        }
        let want = match self.left {
            Some(0) => {
                self.done = true;
                return Ok(0);
            }
            Some(left) => buf.len().min(left),
            None => buf.len(),
        };
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            self.done = true;
        }
        if let Some(left) = self.left.as_mut() {
            *left -= n;
        }
        Ok(n)
    }
}

/// A seat's MCP client over HTTP, speaking one protocol version.
pub struct HttpSeat {
    pub http: Http,
    pub token: Option<String>,
    pub version: &'static str,
    pub session: Option<String>,
    next_id: u64,
}

pub const VERSIONS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

impl HttpSeat {
    pub fn new(http: &Http, token: &str, version: &'static str) -> Self {
        Self {
            http: http.clone(),
            token: Some(token.to_string()),
            version,
            session: None,
            next_id: 1,
        }
    }

    fn stateless(&self) -> bool {
        self.version >= "2026-07-28"
    }

    /// The headers every request carries: accept, type, token, version, session; and for 2026-07-28
    /// the method (and the tool's name).
    pub fn headers(&self, method: &str, name: Option<&str>) -> Vec<(String, String)> {
        let mut h = vec![
            ("content-type".to_string(), "application/json".to_string()),
            (
                "accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
        ];
        if let Some(t) = &self.token {
            h.push(("authorization".into(), format!("Bearer {t}")));
        }
        if method != "initialize" {
            h.push(("mcp-protocol-version".into(), self.version.into()));
        }
        if let Some(s) = &self.session {
            h.push(("mcp-session-id".into(), s.clone()));
        }
        if self.stateless() {
            h.push(("mcp-method".into(), method.into()));
            if let Some(n) = name {
                h.push(("mcp-name".into(), n.into()));
            }
        }
        h
    }

    pub fn post(&self, method: &str, name: Option<&str>, body: &Value) -> Response {
        let h = self.headers(method, name);
        let refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.http.request("POST", &refs, &body.to_string())
    }

    /// Sends a request and returns its HTTP response, unread.
    pub fn send(&mut self, method: &str, mut params: Value) -> (u64, Response) {
        let id = self.next_id;
        self.next_id += 1;
        if self.stateless() {
            let meta = json!({
                "io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": { "name": "ovai-test", "version": "1" },
            });
            if !params.is_object() {
                params = json!({});
            }
            params["_meta"] = meta;
        }
        let name = params["name"].as_str().map(str::to_string);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        (id, self.post(method, name.as_deref(), &body))
    }

    /// Sends a request and reads its answer; panics on any HTTP status but 200.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let (id, mut r) = self.send(method, params);
        if r.status != 200 {
            let status = r.status;
            panic!("{method}: HTTP {status}: {}", r.text());
        }
        r.answer(id)
    }

    /// `initialize` alone (2025-*): a client that never sends `notifications/initialized`.
    pub fn initialize_only(&mut self) -> Value {
        let (id, mut r) = self.send(
            "initialize",
            json!({
                "protocolVersion": self.version,
                "capabilities": {},
                "clientInfo": { "name": "ovai-test", "version": "1" },
            }),
        );
        assert_eq!(r.status, 200);
        self.session = r.header("mcp-session-id").map(str::to_string);
        assert!(self.session.is_some(), "a 2025 session gets an id");
        r.answer(id)
    }

    /// `initialize` and `notifications/initialized` (2025-*); nothing to do for 2026-07-28.
    pub fn initialize(&mut self) -> Value {
        if self.stateless() {
            return self.request("server/discover", json!({}));
        }
        let answer = self.initialize_only();
        let n = self.post(
            "notifications/initialized",
            None,
            &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        );
        assert_eq!(n.status, 202);
        answer
    }

    pub fn call(&mut self, tool: &str, args: Value) -> (String, bool) {
        let answer = self.request("tools/call", json!({ "name": tool, "arguments": args }));
        super::text_of(&answer)
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let answer = self.request("tools/list", json!({}));
        answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// The GET stream (2025-*) resumed after the event `last`.
    pub fn resume_changes(&mut self, last: &str) -> Response {
        let h = self.headers("GET", None);
        let mut refs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        refs.retain(|(k, v)| *k != "content-type" && !(*k == "accept" && v.contains("json")));
        refs.push(("accept", "text/event-stream"));
        refs.push(("last-event-id", last));
        self.http.request("GET", &refs, "")
    }

    /// Where list changes arrive: the GET stream (2025-*) or a `subscriptions/listen` stream (2026-07-28).
    pub fn open_changes(&mut self) -> Response {
        if self.stateless() {
            let (_, mut r) = self.send(
                "subscriptions/listen",
                json!({ "notifications": { "toolsListChanged": true } }),
            );
            assert_eq!(r.status, 200);
            let ack = r.next_message().expect("the listen stream is acknowledged");
            assert_eq!(
                ack["method"], "notifications/subscriptions/acknowledged",
                "{ack}"
            );
            r
        } else {
            let h = self.headers("GET", None);
            let mut refs: Vec<(&str, &str)> =
                h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            refs.retain(|(k, _)| *k != "content-type");
            refs.push(("accept", "text/event-stream"));
            refs.retain(|(k, v)| !(*k == "accept" && v.contains("json")));
            let r = self.http.request("GET", &refs, "");
            assert_eq!(r.status, 200, "the GET stream opens");
            r
        }
    }
}

/// A local proxy that adds `Authorization: Bearer TOKEN` to every request, for clients that cannot send a
/// header (the conformance suite). One request per connection: it asks the server to close after
/// answering, so the client never sends a second request down a connection the proxy has finished with.
pub struct BearerProxy {
    pub addr: SocketAddr,
}

impl BearerProxy {
    pub fn start(upstream: SocketAddr, token: &str) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let token = token.to_string();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let token = token.clone();
                std::thread::spawn(move || {
                    let _ = Self::relay(client, upstream, &token);
                });
            }
        });
        Self { addr }
    }

    fn relay(client: TcpStream, upstream: SocketAddr, token: &str) -> std::io::Result<()> {
        let mut reader = BufReader::new(client.try_clone()?);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("connection:") || lower.starts_with("authorization:") {
                continue;
            }
            head.push_str(&line);
        }
        head.push_str(&format!(
            "authorization: Bearer {token}\r\nconnection: close\r\n\r\n"
        ));
        let mut server = TcpStream::connect(upstream)?;
        server.write_all(head.as_bytes())?;
        // What the reader buffered past the head is the body's start.
        let buffered = reader.buffer().to_vec();
        server.write_all(&buffered)?;
        let mut to_server = server.try_clone()?;
        let mut from_client = client.try_clone()?;
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from_client, &mut to_server);
        });
        let mut to_client = client;
        std::io::copy(&mut server, &mut to_client)?;
        to_client.shutdown(std::net::Shutdown::Both)
    }
}
