//! The MCP transport of a seat's connection: newline-delimited JSON-RPC, as rmcp's own async read/write
//! transport does it, with two differences measured on the call path (`scripts/bench`):
//!
//! - The common `tools/call` line (no `_meta`, a plain id) is read into a small struct and built into
//!   rmcp's message directly. rmcp's generic parse goes through serde's untagged and flattened enums,
//!   which buffer the message and build an error for each variant tried: about a quarter of the
//!   daemon's CPU per call. Every other line takes rmcp's own parse.
//! - Answers are queued to a writer task that puts whatever is waiting into one write.
//!
//! Like rmcp's transport it ignores a line that is not JSON, answers well-formed JSON of the wrong shape
//! with Invalid Request, skips a line over the length cap, and its `receive` is cancel-safe (the partial
//! line lives in the codec, not in the future).

use std::future::Future;

use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorData, JsonObject,
    JsonRpcRequest, NumberOrString, Request, ServerJsonRpcMessage,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

use crate::lines::{CappedLines, Line, write_batched};

/// The longest line a session may send: generous for arguments, bounded for the daemon.
const MAX_LINE: usize = 64 * 1024 * 1024;

pub struct SessionTransport<R> {
    lines: FramedRead<R, CappedLines>,
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// The task writing what is queued; `close` waits for it, so the last answers reach the wire.
    writer: Option<tokio::task::JoinHandle<()>>,
}

impl<R: AsyncRead + Unpin + Send + 'static> SessionTransport<R> {
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(read: R, write: W) -> Self {
        let (out, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_batched(write, rx));
        Self {
            lines: FramedRead::new(read, CappedLines::new(MAX_LINE)),
            out,
            writer: Some(writer),
        }
    }

    fn queue(&self, msg: &ServerJsonRpcMessage) -> Result<(), std::io::Error> {
        let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.out.send(line).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the session's connection is closed",
            )
        })
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for SessionTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.queue(&item))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let line = match self.lines.next().await? {
                Ok(Line::Text(line)) => line,
                Ok(Line::TooLong) => {
                    tracing::warn!(
                        max = MAX_LINE,
                        "a session sent a line over the length cap; it was skipped"
                    );
                    continue;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reading a session failed");
                    return None;
                }
            };
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.trim().is_empty() {
                continue;
            }
            if let Some(msg) = fast_call(line) {
                return Some(msg);
            }
            match serde_json::from_str::<ClientJsonRpcMessage>(line) {
                Ok(msg) => return Some(msg),
                Err(e) if e.is_syntax() || e.is_eof() => {
                    // Not JSON: there is no id to answer, and answering garbage invites an echo storm.
                    tracing::debug!(error = %e, "ignored a line that is not JSON");
                }
                Err(e) => {
                    tracing::debug!(error = %e, "a line is JSON but not a JSON-RPC message");
                    let answer = ServerJsonRpcMessage::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    if self.queue(&answer).is_err() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Replacing the sender ends the writer task once it has written what was queued.
        let (closed, _) = mpsc::unbounded_channel();
        self.out = closed;
        if let Some(writer) = self.writer.take() {
            let _ = writer.await;
        }
        Ok(())
    }
}

/// The shape of almost every call a session makes, read without rmcp's generic machinery.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastCall<'a> {
    jsonrpc: &'a str,
    id: FastId<'a>,
    method: &'a str,
    params: FastParams,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FastId<'a> {
    Number(i64),
    String(&'a str),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

/// rmcp's message for a plain `tools/call` line; `None` for anything else (rmcp parses those).
fn fast_call(line: &str) -> Option<ClientJsonRpcMessage> {
    if !line.contains("\"tools/call\"") {
        return None;
    }
    let call: FastCall<'_> = serde_json::from_str(line).ok()?;
    if call.jsonrpc != "2.0" || call.method != "tools/call" {
        return None;
    }
    let id = match call.id {
        FastId::Number(n) => NumberOrString::Number(n),
        FastId::String(s) => NumberOrString::String(s.into()),
    };
    let mut params = CallToolRequestParams::new(call.params.name);
    params.arguments = call.params.arguments;
    let request = ClientRequest::CallToolRequest(Request::new(params));
    Some(ClientJsonRpcMessage::Request(JsonRpcRequest::new(
        id, request,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path builds exactly what rmcp's own parse builds.
    #[test]
    fn fast_calls_equal_rmcp_parse() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"i":1,"s":"x\"y"}}}"#,
            r#"{"method":"tools/call","params":{"name":"echo"},"id":"abc","jsonrpc":"2.0"}"#,
        ] {
            let fast = fast_call(line).expect("the fast path takes it");
            let slow: ClientJsonRpcMessage = serde_json::from_str(line).unwrap();
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&slow).unwrap(),
                "{line}"
            );
        }
    }

    #[test]
    fn anything_unusual_takes_rmcps_parse() {
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#,
        ] {
            assert!(fast_call(line).is_none(), "{line}");
        }
    }
}
