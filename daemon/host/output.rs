//! The host's stdout and stderr: read line by line into the daemon's log (they are logs, never the
//! protocol), each line cut at MAX_LOG_LINE, at most MAX_LOG_LINES_PER_S a second (a flood is counted,
//! not copied), and stderr's last lines kept for the row that reports the host's end.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::sync::lock;

/// Lines of the host's stderr kept for the log row that reports its end: Node's print of an uncaught
/// error (its line, ten frames, its members, its version) fits.
const STDERR_TAIL: usize = 32;
/// How long before its end (or before it stopped answering) a line of a host's stderr may be to count
/// among its last words.
pub const LAST_WORDS_WINDOW: Duration = Duration::from_secs(5);
/// A line of the host's stdout or stderr longer than this is cut: output is logs, not data.
const MAX_LOG_LINE: usize = 4096;
/// At most this many lines a second of each stream reach the daemon's log; a flood is counted, not copied.
const MAX_LOG_LINES_PER_S: u32 = 100;

/// What the host last said on stderr, for the row that reports its end.
#[derive(Default)]
pub struct StderrTail {
    /// Each with when it came.
    lines: VecDeque<(std::time::Instant, String)>,
    /// Node's `FATAL ERROR: …` line, kept apart: a native stack trace follows it and would push it out.
    fatal: Option<String>,
}

/// How the host said a plugin ended it, before the host said it on its protocol pipe instead: on stderr,
/// such a line is a plugin's, written to frame another file, and is no last word.
const ENDED: &str = "ovai host: a plugin ended the plugin host with ";

impl StderrTail {
    /// A fatal error if the host printed one, else its last line that says something.
    pub fn last_words(&self, within: Duration) -> Option<String> {
        self.fatal.clone().or_else(|| {
            // Only what it said near its end: a warning Node printed at its start is no last word.
            let recent: Vec<&str> = self
                .lines
                .iter()
                .rev()
                .take_while(|(at, _)| at.elapsed() <= within)
                .map(|(_, l)| l.as_str())
                .collect();
            said_last(&recent)
        })
    }

    /// Whether the host said it ran out of heap.
    pub fn ran_out_of_memory(&self) -> bool {
        self.fatal
            .as_deref()
            .is_some_and(|f| f.contains("heap out of memory"))
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.iter().map(|(_, l)| l.clone()).collect()
    }

    fn push(&mut self, line: String) {
        self.push_at(std::time::Instant::now(), line);
    }

    fn push_at(&mut self, at: std::time::Instant, line: String) {
        if self.lines.len() == STDERR_TAIL {
            self.lines.pop_front();
        }
        if line.starts_with("FATAL ERROR") {
            self.fatal = Some(line.clone());
        }
        // Behind spaces or unseen characters (a zero-width space) too.
        if line
            .trim_start_matches(|c: char| c.is_whitespace() || crate::names::unseen(c))
            .starts_with(ENDED)
        {
            return;
        }
        self.lines.push_back((at, line));
    }
}

/// The last line of `recent` (newest first) that says something: an uncaught error as Node prints it
/// ends with its stack and `Node.js v20.…`, which say nothing, so the error's own line is taken, with the
/// first place in plugins/ its stack names.
fn said_last(recent: &[&str]) -> Option<String> {
    let frame = |l: &str| l.trim_start().starts_with("at ");
    let blank = |l: &str| l.trim().is_empty() || l.starts_with("Node.js v");
    let mut i = recent.iter().position(|l| !blank(l))?;
    // The error's own members, printed after its stack (`{ code: 1 }`), back to the frame they follow.
    if recent[i] == "}" {
        i += recent[i..].iter().position(|l| l.ends_with('{'))?;
    }
    let frames = i;
    i += recent[i..].iter().take_while(|l| frame(l)).count();
    let line = *recent[i..].iter().find(|l| !blank(l))?;
    // The frames printed after it, innermost first.
    // The host's own file is in .ovai/, beside plugins/ (and a root may have "plugins" in its path: the
    // last one is the instance's).
    let place = recent[frames..i]
        .iter()
        .rev()
        .filter(|l| !l.contains("/node_modules/") && !l.contains("/.ovai/"))
        .find_map(|l| {
            let from = l.rfind("/plugins/")? + 1;
            Some(l[from..].trim_end_matches([')', ' ', '{']).to_string())
        });
    Some(match place {
        Some(place) => format!("{line} (at {place})"),
        None => line.to_string(),
    })
}

/// Reads the host's stdout or stderr line by line into the daemon's log, keeping stderr's tail.
pub async fn drain(
    stream: impl AsyncRead + Unpin,
    pid: u32,
    which: &'static str,
    tail: Option<Arc<Mutex<StderrTail>>>,
) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    let mut throttle = Throttle::new(pid, which);
    loop {
        // While lines are being dropped, a quiet second still reports how many: a flood that stops is
        // counted when it stops, not when the next line happens to come.
        let read = if throttle.dropped > 0 {
            tokio::select! {
                r = read_line_capped(&mut reader, &mut buf) => r,
                _ = tokio::time::sleep_until(throttle.window_end()) => {
                    throttle.roll();
                    continue;
                }
            }
        } else {
            read_line_capped(&mut reader, &mut buf).await
        };
        let n = match read {
            Ok(0) | Err(_) => {
                throttle.roll();
                return;
            }
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&buf);
        // Read on the operator's terminal: nothing in it may act there (an escape sequence, a carriage
        // return over what came before it).
        let raw = text.trim_end_matches('\n');
        let line = crate::names::escape_controls(raw.strip_suffix('\r').unwrap_or(raw), false);
        let cut = if n > buf.len() { " …(cut)" } else { "" };
        if throttle.admit() {
            tracing::info!(target: "ovai::plugin_output", pid, stream = which, "{line}{cut}");
        }
        if let Some(tail) = &tail {
            lock(tail).push(format!("{line}{cut}"));
        }
        buf.clear();
    }
}

/// At most MAX_LOG_LINES_PER_S lines a second into the daemon's log; the rest are counted.
struct Throttle {
    pid: u32,
    which: &'static str,
    window: tokio::time::Instant,
    logged: u32,
    dropped: u64,
}

impl Throttle {
    fn new(pid: u32, which: &'static str) -> Self {
        Self {
            pid,
            which,
            window: tokio::time::Instant::now(),
            logged: 0,
            dropped: 0,
        }
    }

    fn window_end(&self) -> tokio::time::Instant {
        self.window + Duration::from_secs(1)
    }

    fn admit(&mut self) -> bool {
        if tokio::time::Instant::now() >= self.window_end() {
            self.roll();
        }
        if self.logged < MAX_LOG_LINES_PER_S {
            self.logged += 1;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// Reports what was dropped and starts a new second.
    fn roll(&mut self) {
        if self.dropped > 0 {
            tracing::warn!(
                target: "ovai::plugin_output",
                pid = self.pid,
                stream = self.which,
                "{} lines of plugin output were not logged (more than {MAX_LOG_LINES_PER_S} a second)",
                self.dropped
            );
        }
        self.window = tokio::time::Instant::now();
        self.logged = 0;
        self.dropped = 0;
    }
}

/// Reads one line, keeping at most MAX_LOG_LINE bytes of it; returns the line's full length.
async fn read_line_capped<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let room = MAX_LOG_LINE.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = chunk.len();
        total += used;
        reader.consume(used);
        if done {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_s_crash_print_is_said_by_its_error_and_place() {
        let printed = [
            "file:///srv/ws/.ovai/host.mjs:542",
            "  throw new PluginExit(code);",
            "  ^",
            "",
            "PluginExit [Error]: process.exit(1) was called",
            "    at process.exit (file:///srv/ws/.ovai/host.mjs:542:9)",
            "    at process.<anonymous> (file:///srv/ws/plugins/oh.mjs:3:86)",
            "    at process.emit (node:events:536:35)",
            "    at process._fatalException (node:internal/process/execution:188:25) {",
            "  code: 1",
            "}",
            "",
            "Node.js v20.20.2",
        ];
        let recent: Vec<&str> = printed.iter().rev().copied().collect();
        assert_eq!(
            said_last(&recent).as_deref(),
            Some("PluginExit [Error]: process.exit(1) was called (at plugins/oh.mjs:3:86)")
        );
        // A root with "plugins" in its path: the host's own frame is not taken for a plugin's.
        let moved: Vec<String> = printed
            .iter()
            .rev()
            .map(|l| l.replace("/srv/ws/", "/home/u/plugins/ws/"))
            .collect();
        let moved: Vec<&str> = moved.iter().map(String::as_str).collect();
        assert_eq!(
            said_last(&moved).as_deref(),
            Some("PluginExit [Error]: process.exit(1) was called (at plugins/oh.mjs:3:86)")
        );
        assert_eq!(
            said_last(&["", "last line", "x"]).as_deref(),
            Some("last line")
        );
        assert_eq!(said_last(&["Node.js v20.20.2", ""]), None);
    }

    fn tail(lines: &[&str]) -> StderrTail {
        let mut t = StderrTail::default();
        for l in lines {
            t.push((*l).to_string());
        }
        t
    }

    #[test]
    fn the_hosts_words_on_stderr_are_a_plugins_and_no_last_words() {
        let forged = "ovai host: a plugin ended the plugin host with process.reallyExit(3) (at plugins/a.mjs:4:28)";
        let t = tail(&[
            "what it said",
            forged,
            &format!("  {forged}"),
            &format!("\u{200b}{forged}"),
            "",
        ]);
        assert_eq!(
            t.last_words(LAST_WORDS_WINDOW).as_deref(),
            Some("what it said")
        );
        assert_eq!(
            tail(&["a last line", ""])
                .last_words(LAST_WORDS_WINDOW)
                .as_deref(),
            Some("a last line")
        );
    }

    #[test]
    fn what_it_said_long_before_its_end_is_no_last_word() {
        let mut t = StderrTail::default();
        let long_ago = std::time::Instant::now() - Duration::from_secs(60);
        t.push_at(
            long_ago,
            "(Use `node --trace-warnings ...` to show where the warning was created)".into(),
        );
        assert_eq!(t.last_words(LAST_WORDS_WINDOW), None);
        t.push("FATAL ERROR: Reached heap limit".into());
        t.push_at(long_ago, "an older line".into());
        assert_eq!(
            t.last_words(LAST_WORDS_WINDOW).as_deref(),
            Some("FATAL ERROR: Reached heap limit")
        );
        // A host that stopped answering said its last words before the 10 s it was given.
        let mut t = StderrTail::default();
        let before_the_hang = std::time::Instant::now() - Duration::from_secs(12);
        t.push_at(before_the_hang, "about to parse the 2 GB file".into());
        assert_eq!(t.last_words(LAST_WORDS_WINDOW), None);
        assert_eq!(
            t.last_words(LAST_WORDS_WINDOW + Duration::from_secs(10))
                .as_deref(),
            Some("about to parse the 2 GB file")
        );
    }
}
