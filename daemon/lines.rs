//! Newline-delimited messages with a length cap: tokio-util's `LinesCodec`, except that a line over the
//! cap is an item rather than an error. `FramedRead` ends its stream after any error, and one bad line
//! must not silence a connection (the host's protocol channel, a session's MCP stream).

use bytes::BytesMut;
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
