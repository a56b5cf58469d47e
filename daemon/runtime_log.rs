//! runtime.log: the rows the server writes for the person running the instance.
//!
//! One row a line: an RFC 3339 UTC timestamp, a topic, a sentence. Appended, never rewritten; at a size
//! the file is rotated to runtime.log.1 (one old file kept) so it cannot fill a disk.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

/// The file is rotated when a write would take it past this size.
pub const ROTATE_AT_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Plugins,
    Host,
    Seats,
    Server,
}

impl Topic {
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Plugins => "plugins",
            Topic::Host => "host",
            Topic::Seats => "seats",
            Topic::Server => "server",
        }
    }
}

pub struct RuntimeLog {
    /// Serialises appends and rotation, so rows of one start stay together.
    file: Mutex<crate::files::Appender>,
}

impl RuntimeLog {
    pub fn new(path: PathBuf) -> Self {
        Self::rotating_at(path, ROTATE_AT_BYTES)
    }

    pub fn rotating_at(path: PathBuf, rotate_at: u64) -> Self {
        Self {
            file: Mutex::new(crate::files::Appender::new(&path, rotate_at)),
        }
    }

    /// While the last rows could not be written: why, and how many went to stderr instead.
    pub fn unwritable(&self) -> Option<String> {
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.lost().map(|(lost, why)| {
            format!(
                "runtime.log cannot be written ({}): the {} since went to the server's stderr \
                 instead (the terminal it runs in, or its service's journal).",
                crate::names::escape_controls(why, false),
                if *lost == 1 {
                    "row".to_string()
                } else {
                    format!("{lost} rows")
                }
            )
        })
    }

    pub fn row(&self, topic: Topic, sentence: &str) {
        self.rows(topic, std::slice::from_ref(&sentence.to_string()));
    }

    /// A row the operator's stderr shows as a warning (once: not as a row besides).
    pub fn warn_row(&self, topic: Topic, sentence: &str) {
        self.rows_at(topic, std::slice::from_ref(&sentence.to_string()), true);
    }

    /// Appends several rows in one write, so no other row lands between them.
    pub fn rows(&self, topic: Topic, sentences: &[String]) {
        self.rows_at(topic, sentences, false);
    }

    fn rows_at(&self, topic: Topic, sentences: &[String], warn: bool) {
        if sentences.is_empty() {
            return;
        }
        let stamp = timestamp(SystemTime::now());
        let mut text = String::new();
        for s in sentences {
            text.push_str(&stamp);
            text.push(' ');
            text.push_str(topic.as_str());
            text.push(' ');
            // A row is one line that nothing in it can rewrite: control characters (a newline in an
            // error message, ESC in a file name) are shown escaped.
            text.push_str(&crate::names::escape_controls(s, false));
            text.push('\n');
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((lost, why)) = file.append_or_say(text.as_bytes()) {
            // Said after the rows that made it through, so they keep their order in the file.
            let row = format!(
                "{stamp} server {} before these could not be written to runtime.log ({}); {} to the \
                 server's stderr (the terminal it runs in, or its service's journal).\n",
                crate::names::counted(lost, "row", "rows"),
                crate::names::escape_controls(&why, false),
                if lost == 1 { "it went" } else { "they went" }
            );
            file.append_or_say(row.as_bytes());
        }
        drop(file);
        for s in sentences {
            // The operator's copy is one line too.
            let s = crate::names::escape_controls(s, false);
            if warn {
                tracing::warn!(topic = topic.as_str(), "{s}");
            } else {
                tracing::info!(topic = topic.as_str(), "{s}");
            }
        }
    }
}

/// The last `n` rows of runtime.log at `path` that `keep`, read from its end: 64 KiB of it, and further
/// back, up to 1 MiB, while fewer than `n` rows were kept (rows left out can fill the last 64 KiB: one
/// per tool served after a restart of a thousand plugins).
pub fn latest(path: &std::path::Path, n: usize, keep: impl Fn(&str) -> bool) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = crate::files::open_regular(path, u64::MAX) else {
        return Vec::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    // All of the tail at once when all of it is wanted (a start's look), not three reads growing.
    let mut window = if n == usize::MAX {
        1024 * 1024
    } else {
        64 * 1024
    };
    loop {
        let from = len.saturating_sub(window);
        let mut bytes = Vec::new();
        if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut bytes).is_err() {
            return Vec::new();
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<&str> = text.lines().collect();
        if from > 0 && !lines.is_empty() {
            // The first line read may be the end of a row cut in two.
            lines.remove(0);
        }
        lines.retain(|l| keep(l));
        if lines.len() >= n || from == 0 || window >= 1024 * 1024 {
            return lines[lines.len().saturating_sub(n)..]
                .iter()
                .map(|l| crate::names::escape_controls(l, false).into_owned())
                .collect();
        }
        window *= 4;
    }
}

/// The row saying the server before this one ended without stopping: when its starting mark was left
/// (`starting`: it ended before it was up, most likely as it read plugins/), when runtime.log's tail shows it (its "is up" row is
/// the last of the rows a start and a stop write) and its up mark was left too (a stop removes it, even
/// one whose row the log could not take), or, when the tail holds neither a start nor a stop, from
/// `marked`: the pid and start of the server whose up mark was left, however much it wrote since its
/// start. A stop in the tail is believed over a mark (one carried along with a moved folder).
pub fn ended_without_stopping(
    path: &std::path::Path,
    marked: Option<(u32, String)>,
    starting: Option<(u32, String)>,
) -> Option<String> {
    if let Some((pid, since)) = starting {
        return Some(format!(
            "The server before this one (pid {pid}, starting since {since}) ended without stopping while it \
             started (killed, crashed, or its machine went down): it served nothing."
        ));
    }
    let rows = latest(path, usize::MAX, |_| true);
    let last = rows
        .last()
        .and_then(|r| parse_row(r))
        .map(|(stamp, _, _)| stamp.to_string());
    let said = |pid: &str, since: &str, last: Option<String>| {
        let last = last.map_or(String::new(), |at| {
            format!("; its last row was written at {at}")
        });
        format!(
            "The server before this one (pid {pid}, up since {since}) ended without stopping (killed, \
             crashed, or its machine went down){last}."
        )
    };
    for row in rows.iter().rev() {
        let Some((stamp, "server", sentence)) = parse_row(row) else {
            continue;
        };
        if sentence.starts_with("ovai serve stopped on ") {
            return None;
        }
        if sentence.starts_with("ovai serve is up for ") {
            marked.as_ref()?;
            let pid = sentence
                .rsplit_once("(pid ")
                .and_then(|(_, rest)| rest.split_once(')'))
                .map(|(pid, _)| pid)
                .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))?;
            return Some(said(pid, stamp, last));
        }
    }
    let (pid, since) = marked?;
    Some(said(&pid.to_string(), &since, last))
}

/// RFC 3339 in UTC with milliseconds: `2026-11-29T12:00:00.123Z`.
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// Splits a row into (timestamp, topic, sentence); for readers of the log (index, tests, `ovai restart`).
pub fn parse_row(line: &str) -> Option<(&str, &str, &str)> {
    let (stamp, rest) = line.split_once(' ')?;
    let (topic, sentence) = rest.split_once(' ')?;
    Some((stamp, topic, sentence))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past about 800 tools in one restart, a row per tool served filled the 64 KiB read, and the page's
    /// log panel, which leaves those out, was empty (helper-98).
    #[test]
    fn latest_reads_further_back_for_rows_it_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.log");
        let log = RuntimeLog::rotating_at(path.clone(), u64::MAX);
        log.row(Topic::Server, "Restarted.");
        for i in 0..3000 {
            log.row(
                Topic::Plugins,
                &format!("serves a tool of its own: tool-{i:04}"),
            );
        }
        let kept = latest(&path, 30, |row| !row.contains("serves a tool"));
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(kept[0].ends_with("Restarted."), "{kept:?}");
        assert_eq!(latest(&path, 5, |_| true).len(), 5);
    }

    #[test]
    fn rotates_at_its_size_keeping_one_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.log");
        let log = RuntimeLog::rotating_at(path.clone(), 1000);
        for i in 0..100 {
            log.row(Topic::Server, &format!("row {i} {}", "x".repeat(40)));
        }
        let now = std::fs::metadata(&path).unwrap().len();
        let old = std::fs::metadata(dir.path().join("runtime.log.1"))
            .unwrap()
            .len();
        assert!(now <= 1000 && old <= 1000, "{now} {old}");
        let entries = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(entries, 2, "one old file is kept");
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(last.lines().last().unwrap().contains("row 99 "));
    }

    #[test]
    fn rows_are_one_line_each_and_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = RuntimeLog::new(dir.path().join("runtime.log"));
        log.rows(Topic::Plugins, &["one".into(), "two\nlines".into()]);
        let text = std::fs::read_to_string(dir.path().join("runtime.log")).unwrap();
        let rows: Vec<_> = text.lines().map(|l| parse_row(l).unwrap()).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].1, "plugins");
        assert_eq!(rows[1].2, "two\\nlines");
        assert!(rows[0].0.ends_with('Z'));
    }

    /// Rows that could not be written (a full disk, a folder at the name) are counted and said once the
    /// file takes rows again, and a line a failed write cut off is taken away, not glued to the next row.
    #[test]
    fn rows_lost_while_the_file_cannot_be_written_are_said_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.log");
        let log = RuntimeLog::new(path.clone());
        log.row(Topic::Server, "before");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        log.row(Topic::Server, "lost one");
        log.rows(Topic::Plugins, &["lost two".into(), "lost three".into()]);
        std::fs::remove_dir(&path).unwrap();
        // What a write cut off by a full disk leaves.
        std::fs::write(&path, "2026-12-06T1").unwrap();
        log.row(Topic::Server, "after");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with(" server after"), "{text}");
        let said = parse_row(lines[1]).unwrap();
        assert_eq!(said.1, "server");
        assert!(
            said.2
                .starts_with("3 rows before these could not be written to runtime.log ("),
            "{text}"
        );
        assert_eq!(lines.len(), 2, "{text}");
    }
}
