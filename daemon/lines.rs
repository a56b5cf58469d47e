//! Newline-delimited messages with a length cap: tokio-util's `LinesCodec`, except that a line over the
//! cap is an item rather than an error. `FramedRead` ends its stream after any error, and one bad line
//! must not silence a connection (the host's protocol channel, a session's MCP stream).

use bytes::BytesMut;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

pub enum Line {
    Text(String),
    /// A line longer than the cap; the codec skipped it.
    TooLong,
}

pub struct CappedLines(LinesCodec);

impl CappedLines {
    pub fn new(max_len: usize) -> Self {
        Self(LinesCodec::new_with_max_length(max_len))
    }
}

impl Decoder for CappedLines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        wrap(self.0.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        wrap(self.0.decode_eof(buf))
    }
}

fn wrap(r: Result<Option<String>, LinesCodecError>) -> Result<Option<Line>, std::io::Error> {
    match r {
        Ok(line) => Ok(line.map(Line::Text)),
        Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
        Err(LinesCodecError::Io(e)) => Err(e),
    }
}

/// Writes the lines sent on `rx`, whatever is queued at once in one write (one wake-up of the reader for
/// many messages), until the senders are gone or the peer is; then shuts the write side.
pub async fn write_batched<W: AsyncWrite + Unpin>(
    mut write: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let mut batch: Vec<u8> = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.clear();
        batch.extend_from_slice(&first);
        while batch.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok(more) => batch.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if write.write_all(&batch).await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}
