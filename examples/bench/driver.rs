//! A client of either server over its stdio, writing its requests as a real client writes them
//! (`Shape`: Claude Code's lines, the TS SDK's, or bare ones) and timing each answer.

use super::*;

/// A client of one MCP server: ovai's own MCP client over a stdio server's pipes (or the daemon's socket).
pub(crate) struct Client {
    /// The server process, for a stdio server (none for a direct socket connection).
    pub(crate) child: Option<Child>,
    pub(crate) mcp: McpClient<BufReader<Box<dyn Read + Send>>, Box<dyn Write + Send>>,
    /// How its calls are written.
    pub(crate) shape: Shape,
}

/// How a client writes its calls: as Claude Code 2.1.328 does (2026-07-28, `_meta` on every call, the id
/// last), as the TypeScript SDK's `callTool` with `onprogress` does (2025-11-25, a progress token), or
/// bare (no `_meta`, the id first: what no client sends, kept beside them for comparison).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Shape {
    ClaudeCode,
    TsSdk,
    Bare,
}

pub(crate) const CLAUDE_CODE_LINES: &str = include_str!("lines/claude-code-2.1.328.jsonl");

pub(crate) const TS_SDK_LINES: &str = include_str!("lines/ts-sdk-1.32.2.jsonl");

/// A call line of a fixture, cut where what changes from call to call goes: the tool, its arguments, the
/// tool-use id (Claude Code's), the progress token and the id.
pub(crate) struct Template {
    pub(crate) pieces: Vec<(String, Slot)>,
    pub(crate) end: String,
}

#[derive(Clone, Copy)]
pub(crate) enum Slot {
    Tool,
    Arguments,
    ToolUse,
    Id,
}

impl Template {
    pub(crate) fn of(shape: Shape) -> Self {
        let fixture = match shape {
            Shape::ClaudeCode => CLAUDE_CODE_LINES,
            Shape::TsSdk => TS_SDK_LINES,
            Shape::Bare => {
                r#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"","arguments":{}}}"#
            }
        };
        let call = fixture
            .lines()
            .find(|l| l.contains(r#""method":"tools/call""#))
            .expect("a call in the fixture");
        let mut v: Value = serde_json::from_str(call).expect("a fixture line");
        v["id"] = json!("\u{1}I");
        v["params"]["name"] = json!("\u{1}T");
        v["params"]["arguments"] = json!("\u{1}A");
        if let Some(meta) = v["params"].get_mut("_meta") {
            if meta.get("claudecode/toolUseId").is_some() {
                meta["claudecode/toolUseId"] = json!("\u{1}U");
            }
            if meta.get("progressToken").is_some() {
                meta["progressToken"] = json!("\u{1}I");
            }
        }
        let text = v.to_string();
        let mut pieces = Vec::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("\"\\u0001") {
            let slot = match &rest[at + 7..at + 8] {
                "T" => Slot::Tool,
                "A" => Slot::Arguments,
                "U" => Slot::ToolUse,
                _ => Slot::Id,
            };
            pieces.push((rest[..at].to_string(), slot));
            rest = &rest[at + 9..];
        }
        Self {
            pieces,
            end: format!("{rest}\n"),
        }
    }

    /// The call line with `id`, to `tool`, with `arguments` (JSON text).
    pub(crate) fn write(&self, out: &mut Vec<u8>, id: u64, tool: &str, arguments: &str) {
        for (text, slot) in &self.pieces {
            out.extend_from_slice(text.as_bytes());
            match slot {
                Slot::Tool => {
                    out.push(b'"');
                    out.extend_from_slice(tool.as_bytes());
                    out.push(b'"');
                }
                Slot::Arguments => out.extend_from_slice(arguments.as_bytes()),
                Slot::ToolUse => {
                    let _ = write!(out, "\"toolu_{id}\"");
                }
                Slot::Id => {
                    let _ = write!(out, "{id}");
                }
            }
        }
        out.extend_from_slice(self.end.as_bytes());
    }
}

impl Client {
    pub(crate) fn ovai(setup: &Setup, inst: &Instance) -> Self {
        let mut cmd = Command::new(&setup.ovai);
        cmd.arg("mcp")
            .env("OVAI_ROOT", &inst.root)
            .env("OVAI_SECRET", inst.next_secret());
        Self::spawn(cmd)
    }

    pub(crate) fn baseline(setup: &Setup, inst: &Instance) -> Self {
        let mut cmd = Command::new(&setup.node);
        cmd.arg(&setup.baseline).env("BASELINE_ROOT", &inst.root);
        Self::spawn(cmd)
    }

    /// Straight onto the daemon's socket, without `ovai mcp`: what the bridge's hop costs, by difference.
    pub(crate) fn direct(inst: &Instance) -> Self {
        let ovai = inst.ovai();
        let mut sock = client::connect(&ovai).expect("the socket");
        client::hello_seat(&ovai, &mut sock, &inst.secret, Duration::from_secs(60))
            .expect("a welcome");
        let reader: Box<dyn Read + Send> = Box::new(sock.try_clone().unwrap());
        Self {
            child: None,
            mcp: McpClient::new(BufReader::with_capacity(1 << 16, reader), Box::new(sock)),
            shape: Shape::Bare,
        }
    }

    pub(crate) fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("a server");
        let stdin: Box<dyn Write + Send> = Box::new(child.stdin.take().unwrap());
        let stdout: Box<dyn Read + Send> = Box::new(child.stdout.take().unwrap());
        Self {
            child: Some(child),
            mcp: McpClient::new(BufReader::with_capacity(1 << 16, stdout), stdin),
            shape: Shape::Bare,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub(crate) fn kill(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn send(&mut self, method: &str, params: Value) -> u64 {
        self.mcp
            .send_request(method, params)
            .expect("the server takes input")
    }

    /// The next response: (id, whether it is a failure). None when the server closed.
    pub(crate) fn recv(&mut self) -> Option<(u64, bool)> {
        loop {
            let v = self.mcp.next_message().ok()?;
            let Some(id) = v.get("id").and_then(Value::as_u64) else {
                continue;
            };
            let failed = v.get("error").is_some() || v["result"]["isError"] == json!(true);
            return Some((id, failed));
        }
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> bool {
        let id = self.send(method, params);
        loop {
            match self.recv() {
                Some((got, failed)) if got == id => return !failed,
                Some(_) => continue,
                None => return false,
            }
        }
    }

    pub(crate) fn initialize(&mut self) {
        self.mcp
            .initialize("bench")
            .expect("initialize is answered");
    }

    /// Opens the session as a client of `shape` does, and writes its calls so from then on. Claude Code
    /// opens ovai's sessions at 2026-07-28 with its own lines (no `initialize`; its `subscriptions/listen`
    /// stays open); a server that speaks no 2026-07-28 (the baseline) is initialised as the TypeScript SDK
    /// does, and then sent the same calls.
    pub(crate) fn open(&mut self, shape: Shape, speaks_2026: bool) {
        self.shape = shape;
        if shape != Shape::ClaudeCode || !speaks_2026 {
            self.initialize();
            return;
        }
        let (reader, writer, _) = self.mcp.raw();
        let opening: Vec<&str> = CLAUDE_CODE_LINES
            .lines()
            .filter(|l| !l.contains(r#""method":"tools/call""#))
            .collect();
        for line in &opening {
            writer
                .write_all(line.as_bytes())
                .expect("the server takes input");
            writer.write_all(b"\n").expect("the server takes input");
        }
        writer.flush().expect("the server takes input");
        // Every opening request is answered but the listen, which stays open.
        let mut answered = 0;
        let mut line = Vec::new();
        while answered < opening.len() - 1 {
            line.clear();
            if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                panic!("the server closed as the session opened");
            }
            if reply_of(&line).is_some() || line.windows(7).any(|w| w == b"\"id\":\"s") {
                answered += 1;
            }
        }
    }

    /// `total` calls with `k` in flight; returns each call's latency and the wall time, and the failures.
    ///
    /// The driver shares the machine with the server it measures, and ovai's three processes use both
    /// vCPUs where the baseline's one leaves the second to the driver: every microsecond the driver spends
    /// is taken from ovai alone. So it writes each request from a template (one write each, as a client
    /// sends each message) and reads each answer only as far as its id and whether it failed, building
    /// no JSON tree (it cost 5.5 µs a call at K=32, about a fifth of all the CPU a call took).
    pub(crate) fn calls(
        &mut self,
        tool: &str,
        total: usize,
        k: usize,
    ) -> (Vec<Duration>, Duration, usize) {
        let (reader, writer, next_id) = self.mcp.raw();
        let mut sent_at: HashMap<u64, Instant> = HashMap::with_capacity(k * 2);
        let mut latencies = Vec::with_capacity(total);
        let mut failed = 0;
        let mut sent = 0;
        let mut request: Vec<u8> = Vec::with_capacity(1024);
        let mut answer: Vec<u8> = Vec::with_capacity(4096);
        let template = Template::of(self.shape);
        let mut arguments = String::new();
        let started = Instant::now();
        while latencies.len() < total {
            while sent < total && sent_at.len() < k {
                let id = *next_id;
                *next_id += 1;
                request.clear();
                arguments.clear();
                // The built-in index takes no arguments; the echo plugins take a number.
                if tool == "index" {
                    arguments.push_str("{}");
                } else {
                    let _ = std::fmt::Write::write_fmt(
                        &mut arguments,
                        format_args!("{{\"i\":{sent}}}"),
                    );
                }
                template.write(&mut request, id, tool, &arguments);
                writer
                    .write_all(&request)
                    .and_then(|()| writer.flush())
                    .expect("the server takes input");
                sent_at.insert(id, Instant::now());
                sent += 1;
            }
            answer.clear();
            match reader.read_until(b'\n', &mut answer) {
                Ok(0) | Err(_) => panic!("the server closed during calls"),
                Ok(_) => {}
            }
            let Some((id, bad)) = reply_of(&answer) else {
                continue;
            };
            if let Some(t) = sent_at.remove(&id) {
                latencies.push(t.elapsed());
                failed += usize::from(bad);
            }
        }
        (latencies, started.elapsed(), failed)
    }
}

/// The id of a response line and whether it is a failure (a JSON-RPC error or a result with `isError`);
/// None for anything else (a notification). Its result is passed over as raw text, never built.
pub(crate) fn reply_of(line: &[u8]) -> Option<(u64, bool)> {
    #[derive(serde::Deserialize)]
    struct Reply<'a> {
        #[serde(default)]
        id: Option<u64>,
        #[serde(default, borrow)]
        result: Option<&'a serde_json::value::RawValue>,
        #[serde(default)]
        error: Option<serde::de::IgnoredAny>,
    }
    let reply: Reply<'_> = serde_json::from_slice(line).ok()?;
    let id = reply.id?;
    // In a result's raw text a quote inside a string is escaped, so this key and value can only be the
    // result's own (content blocks carry no isError).
    let is_error = reply
        .result
        .is_some_and(|r| r.get().contains("\"isError\":true"));
    (reply.result.is_some() || reply.error.is_some())
        .then_some((id, reply.error.is_some() || is_error))
}

impl Drop for Client {
    fn drop(&mut self) {
        self.kill();
    }
}
