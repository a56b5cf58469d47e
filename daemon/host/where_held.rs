//! Where a host that stopped answering is held: asked of its watcher thread on fd 5, which pauses the
//! main thread through node:inspector and names the files and places on its stack. A plugin's loop that
//! never ends is then named by its place, and the file it is in is the one left out, rather than the file
//! that happened to be importing, or no file at all.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// How long the watcher is given to answer: connecting to the main thread and pausing it takes tens of
/// milliseconds; a main thread held in native code (a synchronous child process) never pauses.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The longest line read as an answer: 32 frames of long paths.
const MAX_ANSWER: usize = 64 * 1024;

/// One frame of the held main thread's stack: a file (absolute) and a place in it, from 1.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Frame {
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// Its script is an ES module loaded as a file (not code evaluated under a name of its choosing):
    /// only such a frame can blame a file.
    #[serde(default)]
    pub module: bool,
}

#[derive(Deserialize)]
struct WhereAnswer {
    #[serde(rename = "where")]
    key: u64,
    frames: Vec<Frame>,
}

pub struct Watch(Option<UnixStream>);

impl Watch {
    pub fn new(stream: std::os::unix::net::UnixStream) -> Self {
        let stream = stream
            .set_nonblocking(true)
            .and_then(|()| UnixStream::from_std(stream));
        match stream {
            Ok(s) => Self(Some(s)),
            Err(e) => {
                tracing::warn!("the plugin host's watcher socket could not be used: {e}");
                Self(None)
            }
        }
    }

    /// The held main thread's stack, innermost first (only frames in files), or empty when the watcher
    /// does not say within ANSWER_WITHIN. Asked only of a host that is killed next.
    pub async fn stack(&mut self) -> Vec<Frame> {
        let Some(stream) = self.0.as_mut() else {
            return Vec::new();
        };
        let key = fresh_key();
        match tokio::time::timeout(ANSWER_WITHIN, ask(stream, key)).await {
            Ok(Ok(frames)) => frames,
            Ok(Err(e)) => {
                tracing::debug!("the plugin host's watcher did not say where it is held: {e}");
                Vec::new()
            }
            Err(_) => Vec::new(),
        }
    }
}

async fn ask(stream: &mut UnixStream, key: u64) -> std::io::Result<Vec<Frame>> {
    drain(stream);
    stream
        .write_all(format!("{{\"where\":{key}}}\n").as_bytes())
        .await?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    while next_line(&mut reader, &mut line).await? {
        // Anything else on the socket (a plugin can write to fd 5 too) is not the answer.
        if let Ok(a) = serde_json::from_slice::<WhereAnswer>(&line)
            && a.key == key
        {
            return Ok(a.frames);
        }
    }
    Ok(Vec::new())
}

/// Reads away what waits on the socket: written before the question, it is not the answer (a plugin can
/// write to fd 5 too).
fn drain(stream: &UnixStream) {
    use std::os::fd::AsFd;
    let mut buf = [0u8; 4096];
    // The socket is non-blocking: this ends at the first EAGAIN (or the end, or an error).
    while matches!(nix::unistd::read(stream.as_fd(), &mut buf), Ok(n) if n > 0) {}
}

/// The next line into `line`, at most MAX_ANSWER bytes (a longer one is skipped whole, as are bytes
/// that are not UTF-8 for the caller to refuse); false at the end.
async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    line.clear();
    let mut over = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(false);
        }
        let (taken, ends) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !over && line.len() + taken <= MAX_ANSWER {
            line.extend_from_slice(&buf[..taken]);
        } else {
            over = true;
            line.clear();
        }
        reader.consume(taken);
        if ends {
            if !over {
                return Ok(true);
            }
            over = false;
        }
    }
}

fn fresh_key() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        bytes = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            std::time::Instant::now(),
        )
        .to_le_bytes();
    }
    // 53 bits: the watcher reads it as a JavaScript number and writes it back exactly.
    u64::from_le_bytes(bytes) & ((1 << 53) - 1)
}

/// The first frame in plugins/, as rows show it: `plugins/lib/x.mjs:3:5`.
pub fn shown(frames: &[Frame], plugins_dir: &Path) -> Option<String> {
    frames.iter().find_map(|f| {
        let rel = Path::new(&f.file).strip_prefix(plugins_dir).ok()?;
        Some(format!("plugins/{}:{}:{}", rel.display(), f.line, f.column))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_that_are_too_long_or_not_utf8_are_skipped_whole() {
        let mut text = b"\xff\xfe\n".to_vec();
        text.extend(std::iter::repeat_n(b'a', MAX_ANSWER + 10));
        text.extend(b"\n{\"where\":1}\n");
        let mut reader = BufReader::new(&text[..]);
        let mut line = Vec::new();
        assert!(next_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, b"\xff\xfe\n");
        assert!(next_line(&mut reader, &mut line).await.unwrap());
        assert_eq!(line, b"{\"where\":1}\n");
        assert!(!next_line(&mut reader, &mut line).await.unwrap());
    }

    #[test]
    fn the_place_shown_is_the_first_frame_in_plugins() {
        let f = |file: &str, line| Frame {
            file: file.into(),
            line,
            column: 5,
            module: true,
        };
        let frames = [
            f("/srv/ws/.ovai/host.mjs", 900),
            f("/srv/ws/plugins/lib/spin.mjs", 3),
            f("/srv/ws/plugins/a.mjs", 7),
        ];
        assert_eq!(
            shown(&frames, Path::new("/srv/ws/plugins")).as_deref(),
            Some("plugins/lib/spin.mjs:3:5")
        );
        assert_eq!(shown(&frames[..1], Path::new("/srv/ws/plugins")), None);
    }
}
