//! `room`: the instance's shared conversation, in room.jsonl at the root.
//!
//! A message is signed with the caller's seat (resolved from its secret, never from a name it gives), is
//! synced to disk before the answer says it was said, and is never rewritten.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub const DESCRIPTION: &str = "The instance's shared conversation, with every seat. With `say`, adds your message, \
signed with your seat, and answers once it is safely on disk; without it, only reads. Answers with the last \
messages (20 unless `last` says otherwise). Nothing said is ever edited or removed.";

pub const DEFAULT_LAST: usize = 20;
pub const MAX_LAST: u64 = 500;
pub const MAX_SAY_CHARS: u64 = 16_000;

pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "say": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_SAY_CHARS,
                "description": "A message for everybody in the room; it is signed with your seat."
            },
            "last": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_LAST,
                "description": "How many of the latest messages to answer with (default 20; 0 for none)."
            }
        },
        "additionalProperties": false
    })
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Message {
    pub at: String,
    pub seat: String,
    pub text: String,
}

pub struct Room {
    path: PathBuf,
    /// One writer at a time, so lines never interleave and each is synced before the next.
    write: tokio::sync::Mutex<()>,
}

impl Room {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            write: tokio::sync::Mutex::new(()),
        }
    }

    /// Runs one call: says (if asked), then reads the tail; the text the caller reads.
    pub async fn answer(&self, seat: &str, args: &Value) -> Result<String, RoomError> {
        let last = args
            .get("last")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_LAST, |n| n as usize);
        let said = args.get("say").and_then(Value::as_str);
        if let Some(text) = said {
            let msg = Message {
                at: crate::runtime_log::timestamp(SystemTime::now()),
                seat: seat.to_string(),
                text: text.to_string(),
            };
            let _one_writer = self.write.lock().await;
            let path = self.path.clone();
            tokio::task::spawn_blocking(move || append(&path, &msg))
                .await
                .map_err(|e| RoomError::Write(std::io::Error::other(e.to_string())))?
                .map_err(RoomError::Write)?;
        }
        let path = self.path.clone();
        let messages = tokio::task::spawn_blocking(move || tail(&path, last))
            .await
            .map_err(|e| RoomError::Read(std::io::Error::other(e.to_string())))?
            .map_err(RoomError::Read)?;
        let mut s = String::new();
        if said.is_some() {
            s.push_str(&format!("Said in the room as {seat}.\n"));
        }
        if last == 0 {
            return Ok(s.trim_end().to_string());
        }
        if messages.is_empty() {
            s.push_str("Nobody has said anything in the room yet.");
            return Ok(s);
        }
        if said.is_some() {
            s.push('\n');
        }
        s.push_str(&format!(
            "The last {} in the room:\n",
            if messages.len() == 1 {
                "message".to_string()
            } else {
                format!("{} messages", messages.len())
            }
        ));
        for m in &messages {
            s.push_str(&format!("[{}] {}: {}\n", m.at, m.seat, m.text));
        }
        Ok(s.trim_end().to_string())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Why a room call could not be done.
#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    #[error("writing the room failed: {0}")]
    Write(std::io::Error),
    #[error("reading the room failed: {0}")]
    Read(std::io::Error),
}

fn append(path: &Path, msg: &Message) -> std::io::Result<()> {
    let mut line = serde_json::to_string(msg).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(line.as_bytes())?;
    f.sync_data()
}

/// The last `n` messages, reading the file from its end so a long history costs no more than a short one.
fn tail(path: &Path, n: usize) -> std::io::Result<Vec<Message>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    const BLOCK: u64 = 64 * 1024;
    let len = f.metadata()?.len();
    let mut start = len;
    let mut buf: Vec<u8> = Vec::new();
    // One more newline than messages wanted, so the first kept line is whole.
    while start > 0 && buf.iter().filter(|b| **b == b'\n').count() <= n {
        let from = start.saturating_sub(BLOCK);
        let mut block = vec![0u8; (start - from) as usize];
        f.seek(SeekFrom::Start(from))?;
        f.read_exact(&mut block)?;
        block.extend_from_slice(&buf);
        buf = block;
        start = from;
    }
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let mut messages: Vec<Message> = lines
        .iter()
        .rev()
        .filter_map(|l| serde_json::from_str(l).ok())
        .take(n)
        .collect();
    messages.reverse();
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_reads_the_end_of_a_long_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("room.jsonl");
        for i in 0..3000 {
            append(
                &path,
                &Message {
                    at: "t".into(),
                    seat: "s".into(),
                    text: format!("message {i} {}", "x".repeat(50)),
                },
            )
            .unwrap();
        }
        let last = tail(&path, 3).unwrap();
        assert_eq!(last.len(), 3);
        assert!(last[0].text.starts_with("message 2997 "));
        assert!(last[2].text.starts_with("message 2999 "));
        assert_eq!(tail(&path, 5000).unwrap().len(), 3000);
        assert!(tail(&dir.path().join("none"), 3).unwrap().is_empty());
    }
}
