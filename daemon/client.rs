//! The client side of the daemon's socket, synchronous: control requests (`ovai restart`, `ovai status`,
//! `ovai seat`), and a small MCP client over any pipe pair for `ovai call` and `ovai demo`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::instance::Instance;
use crate::wire::{self, Hello, Welcome};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("No ovai server is running for {root}: start one there with `ovai serve`.")]
    NoServer { root: String },
    #[error("The ovai server for {root} refused the connection: {why}.")]
    Refused { root: String, why: String },
    #[error("Talking to the ovai server failed: {0}.")]
    Io(#[from] std::io::Error),
    #[error("The ovai server answered something this client cannot read: {0}.")]
    Protocol(String),
}

/// Connects to the instance's daemon; a missing socket or a refused connect means none runs.
pub fn connect(inst: &Instance) -> Result<UnixStream, ClientError> {
    UnixStream::connect(inst.socket()).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            ClientError::NoServer {
                root: inst.root.display().to_string(),
            }
        }
        _ => ClientError::Io(e),
    })
}

/// Reads one line byte by byte, so nothing after it is taken from the stream (the bridge relays the rest).
pub fn read_line_unbuffered(stream: &mut impl Read, max: usize) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte)? {
            0 => break,
            _ if byte[0] == b'\n' => break,
            _ => line.push(byte[0]),
        }
        if line.len() > max {
            return Err(std::io::Error::other("the answer line is too long"));
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Presents a seat's secret; on success the stream is the seat's MCP session.
pub fn hello_seat(
    inst: &Instance,
    stream: &mut UnixStream,
    secret: &str,
    patience: Duration,
) -> Result<Welcome, ClientError> {
    let hello = Hello {
        ovai: wire::VERSION,
        seat_secret: Some(secret.trim().to_string()),
        ..Hello::default()
    };
    stream.write_all(wire::line(&hello).as_bytes())?;
    stream.set_read_timeout(Some(patience))?;
    let line = read_line_unbuffered(stream, 64 * 1024)?;
    stream.set_read_timeout(None)?;
    if line.is_empty() {
        return Err(ClientError::Protocol(
            "the connection closed before the server said who this is".into(),
        ));
    }
    let welcome: Welcome =
        serde_json::from_str(&line).map_err(|e| ClientError::Protocol(e.to_string()))?;
    if !welcome.ok {
        return Err(ClientError::Refused {
            root: inst.root.display().to_string(),
            why: welcome.error.unwrap_or_else(|| "no reason given".into()),
        });
    }
    Ok(welcome)
}

/// One control operation; `Ok` holds the daemon's answer (which has `"ok": true`).
pub fn control(inst: &Instance, op: &str) -> Result<Value, ClientError> {
    let secret = std::fs::read_to_string(inst.control_secret()).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ClientError::NoServer {
            root: inst.root.display().to_string(),
        },
        _ => ClientError::Io(e),
    })?;
    let mut stream = connect(inst)?;
    let hello = Hello {
        ovai: wire::VERSION,
        control_secret: Some(secret.trim().to_string()),
        op: Some(op.to_string()),
        ..Hello::default()
    };
    stream.write_all(wire::line(&hello).as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    let v: Value = serde_json::from_str(line.trim())
        .map_err(|e| ClientError::Protocol(format!("{e} in {line:?}")))?;
    if v.get("ok") == Some(&Value::Bool(true)) {
        Ok(v)
    } else {
        Err(ClientError::Refused {
            root: inst.root.display().to_string(),
            why: v
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .to_string(),
        })
    }
}

/// A JSON-RPC error answer, as the server sent it.
#[derive(Debug)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

/// A minimal MCP client: newline-delimited JSON-RPC, one request at a time.
pub struct McpClient<R: BufRead, W: Write> {
    reader: R,
    writer: W,
    next_id: u64,
}

pub const PROTOCOL_VERSION: &str = "2025-06-18";

impl<R: BufRead, W: Write> McpClient<R, W> {
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader,
            writer,
            next_id: 1,
        }
    }

    /// `initialize` then `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self, client: &str) -> Result<Value, ClientError> {
        let result = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": { "name": client, "version": env!("CARGO_PKG_VERSION") }
                }),
            )?
            .map_err(|e| ClientError::Protocol(format!("initialize was refused: {}", e.message)))?;
        self.notify("notifications/initialized", json!({}))?;
        Ok(result)
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), ClientError> {
        let msg = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        writeln!(self.writer, "{msg}")?;
        self.writer.flush()?;
        Ok(())
    }

    /// Sends a request and reads until its answer, passing over notifications.
    pub fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Result<Value, RpcError>, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.writer, "{msg}")?;
        self.writer.flush()?;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(ClientError::Protocol(format!(
                    "the connection closed before {method} was answered"
                )));
            }
            let v: Value = match serde_json::from_str(line.trim()) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if v.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(err) = v.get("error") {
                return Ok(Err(RpcError {
                    code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                }));
            }
            return Ok(Ok(v.get("result").cloned().unwrap_or(Value::Null)));
        }
    }
}

/// The text of a tools/call result and whether it is a refusal (`isError`).
pub fn call_text(result: &Value) -> (String, bool) {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let refused = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (text, refused)
}
