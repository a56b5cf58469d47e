//! Hyper's own answers to a request it could not read (a malformed head, too many headers, a target too
//! long) carry a status and nothing else, and hyper offers no hook to word them. They are the only
//! answers this server sends with an empty body and one of these statuses, so they are found in the bytes
//! on their way out and written with a body of words instead: a JSON-RPC error on the MCP endpoint, as
//! every other refusal there is, and plain text on the status page's and the metrics' listeners.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection's stream, with hyper's wordless answers given words.
pub struct Worded<I> {
    io: I,
    /// A worded answer not yet written whole: its bytes and how many are written.
    pending: Option<(Vec<u8>, usize)>,
    /// The words go in a JSON-RPC error (the MCP endpoint), else in plain text.
    json: bool,
}

impl<I> Worded<I> {
    pub fn new(io: I, json: bool) -> Self {
        Self {
            io,
            pending: None,
            json,
        }
    }
}

/// The words for hyper's automatic answer `head`, if it is one: the status line and the sentence.
fn words(head: &[u8]) -> Option<(&'static str, &'static str)> {
    let found = if head.starts_with(b"HTTP/1.1 400 ") {
        Some((
            "400 Bad Request",
            "The request could not be read as HTTP/1.1: its request line or a header is malformed (a header name with characters HTTP does not allow, or two Content-Length headers, for instance); send one well-formed request",
        ))
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        Some((
            "431 Request Header Fields Too Large",
            "The request's head is larger than this server reads (at most 100 headers, and about 400 KB); send fewer or shorter headers",
        ))
    } else if head.starts_with(b"HTTP/1.1 414 ") {
        Some((
            "414 URI Too Long",
            "The request's target is longer than this server reads; send it to the endpoint's path alone",
        ))
    } else {
        None
    };
    // An answer with a body of its own, or one of ours, is not hyper's: only a head with no body is.
    found.filter(|_| head.ends_with(b"\r\n\r\n") && contains(head, b"\r\ncontent-length: 0\r\n"))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// An answer of `status` with `sentence` as its body: a JSON-RPC error, or plain text.
pub fn worded(status: &str, sentence: &str, json: bool) -> Vec<u8> {
    let (kind, body) = if json {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": crate::jsonrpc::INVALID_REQUEST, "message": sentence },
        });
        ("application/json", body.to_string())
    } else {
        ("text/plain; charset=utf-8", format!("{sentence}.\n"))
    };
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl<I: AsyncWrite + Unpin> Worded<I> {
    /// Writes what is left of a worded answer; ready once it is all written.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while let Some((bytes, at)) = &mut self.pending {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &bytes[*at..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *at += n;
            if *at == bytes.len() {
                self.pending = None;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `head` (as written whole) when it is hyper's wordless answer, to write a worded one instead.
    fn take_over(&mut self, head: &[u8]) -> bool {
        match words(head) {
            Some((status, sentence)) => {
                self.pending = Some((worded(status, sentence, self.json), 0));
                true
            }
            None => false,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Worded<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Worded<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if self.take_over(buf) {
            // Hyper is told its bytes went out; the worded answer goes in their place.
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        let mut filled = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (filled.next(), filled.next())
            && self.take_over(only)
        {
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(only.len()));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_wordless_answers_are_taken_over() {
        let hyper = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 04:00:00 GMT\r\n\r\n";
        assert_eq!(words(hyper).map(|w| w.0), Some("400 Bad Request"));
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n";
        assert_eq!(words(ours), None);
        let ok = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(words(ok), None);
        let answer = String::from_utf8(worded(
            "431 Request Header Fields Too Large",
            "Too many",
            true,
        ))
        .unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{answer}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["message"], "Too many");
        let answer = String::from_utf8(worded("414 URI Too Long", "Too long", false)).unwrap();
        assert!(
            answer.contains("content-type: text/plain") && answer.ends_with("\r\n\r\nToo long.\n"),
            "{answer}"
        );
    }
}
