//! The daemon's tracing on stderr, written by a thread of its own. A stderr nobody reads (a supervisor
//! that captured it and never looks, a terminal paused with Ctrl-S, `ovai serve 2>&1 | less`) fills its
//! pipe, and a write there would hold the daemon's one event-loop thread, and every session with it. Up
//! to HELD_BYTES wait here; past that lines are dropped and counted, and the next line that gets through
//! says how many. runtime.log is written apart, and loses nothing.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What waits for a stderr that is not being read: thousands of lines.
const HELD_BYTES: usize = 1024 * 1024;

/// The daemon's log once `start` made it: what `say` writes through.
static STARTED: OnceLock<StderrLog> = OnceLock::new();

/// Where the daemon's tracing goes: `tracing_subscriber::fmt().with_writer(log.clone())`.
#[derive(Clone)]
pub struct StderrLog {
    /// `None` when the thread could not start: lines are then written at once, as before there was one.
    tx: Option<Sender<Vec<u8>>>,
    shared: Arc<Shared>,
    /// The formatter colours its lines (a terminal): its own SGR escapes are kept.
    ansi: bool,
}

/// What the thread and the loggers share (not the sender: the thread ends once every logger is gone).
struct Shared {
    /// The bytes sent and not yet written, at most `limit`.
    held: AtomicUsize,
    limit: usize,
    /// Lines dropped since the last one that got through, which then says so.
    dropped: AtomicU64,
    sent: AtomicU64,
    /// How many lines the thread has written (or failed to), with its condition to wait on.
    written: Mutex<u64>,
    wrote: Condvar,
}

impl StderrLog {
    /// Starts the thread that writes to stderr; `say` writes through it from then on. `ansi`: the
    /// formatter colours its lines.
    pub fn start(ansi: bool) -> Self {
        let log = Self {
            ansi,
            ..Self::writing_to(std::io::stderr(), HELD_BYTES)
        };
        let _ = STARTED.set(log.clone());
        log
    }

    fn writing_to(mut out: impl Write + Send + 'static, limit: usize) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let shared = Arc::new(Shared {
            held: AtomicUsize::new(0),
            limit,
            dropped: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            written: Mutex::new(0),
            wrote: Condvar::new(),
        });
        let mine = shared.clone();
        let thread = std::thread::Builder::new()
            .name("stderr".into())
            .spawn(move || {
                // Lines a write refused (a full disk under a redirected stderr), said with the next
                // that goes: runtime.log tells the operator its lost rows went here.
                let mut failed = 0usize;
                for line in rx {
                    // The notice first; not written, this line is not either, and is counted.
                    let mut said = true;
                    if failed > 0 {
                        let notice = format!(
                            "ovai serve: {} of this log before this one could not be written.\n",
                            crate::names::counted(failed, "line", "lines")
                        );
                        said = out.write_all(notice.as_bytes()).is_ok();
                        failed = if said { 0 } else { failed + 1 };
                    }
                    if said && out.write_all(&line).is_err() {
                        failed += 1;
                    }
                    mine.held.fetch_sub(line.len(), Ordering::Relaxed);
                    *crate::sync::lock(&mine.written) += 1;
                    mine.wrote.notify_all();
                }
            });
        Self {
            tx: thread.is_ok().then_some(tx),
            shared,
            ansi: false,
        }
    }

    /// Waits until what was logged so far is written, for at most `patience`: a stderr nobody reads must
    /// not keep the daemon from ending. Lines dropped since the last written one are said first.
    pub fn finish(&self, patience: Duration) {
        let rmcp_left_out = RMCP_LEFT_OUT.swap(0, Ordering::Relaxed);
        if rmcp_left_out > 0 {
            self.send(rmcp_left_out_words(rmcp_left_out).into_bytes());
        }
        if self.shared.dropped.load(Ordering::Relaxed) > 0 {
            self.send(Vec::new());
        }
        let target = self.shared.sent.load(Ordering::Acquire);
        let until = Instant::now() + patience;
        let mut written = crate::sync::lock(&self.shared.written);
        while *written < target {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            written = match self.shared.wrote.wait_timeout(written, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Sends one line (or, empty, only the notice of what was dropped before it), or drops it.
    fn send(&self, mut text: Vec<u8>) {
        let Some(tx) = &self.tx else {
            let _ = std::io::stderr().write_all(&text);
            return;
        };
        let shared = &self.shared;
        let len = text.len();
        // An empty line is only the notice, which always goes.
        if len > 0 && shared.held.fetch_add(len, Ordering::Relaxed) + len > shared.limit {
            shared.held.fetch_sub(len, Ordering::Relaxed);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The gap is said where it is: before the first line that got through after it.
        let lost = shared.dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let (lines, were) = if lost == 1 {
                ("line", "was")
            } else {
                ("lines", "were")
            };
            let notice = format!(
                "ovai serve: {lost} {lines} of this log {were} dropped here: its stderr was not read fast enough.\n"
            );
            shared.held.fetch_add(notice.len(), Ordering::Relaxed);
            text.splice(0..0, notice.into_bytes());
        }
        if text.is_empty() {
            return;
        }
        shared.sent.fetch_add(1, Ordering::Release);
        if tx.send(text).is_err() {
            shared.sent.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Writes `text` to stderr: through the daemon's log once it started (`ovai serve`), else at once.
pub fn say(text: &str) {
    match STARTED.get() {
        Some(log) => log.send(text.as_bytes().to_vec()),
        None => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
}

/// One event's text, sent whole when the formatter is done with it.
pub struct Line<'a> {
    log: &'a StderrLog,
    text: Vec<u8>,
}

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line<'_> {
    fn drop(&mut self) {
        if !self.text.is_empty() {
            let text = one_line(std::mem::take(&mut self.text), self.log.ansi);
            self.log.send(text);
        }
    }
}

/// How much of one event's text is written: a session's megabyte method name, named in rmcp's warning,
/// would otherwise fill the operator's log at the pace the session sends.
const MAX_LINE_BYTES: usize = 4096;

/// An event's text as one line that nothing in it can rewrite: what a session or a plugin sends reaches
/// fields (an id rmcp names in its warning), and a newline there would forge a row, an escape would
/// reach the operator's terminal, a direction mark would turn what follows it around. Controls and
/// unseen characters are written out, but for the line's own end, tabs, and the formatter's colours
/// (`ESC [ digits ; m`) when it colours. Past MAX_LINE_BYTES the line is cut, saying by how much.
fn one_line(text: Vec<u8>, ansi: bool) -> Vec<u8> {
    let clean = |c: char| (!c.is_control() || c == '\t') && !crate::names::unseen(c);
    let body = text.strip_suffix(b"\n").unwrap_or(&text);
    let cut = body.len().saturating_sub(MAX_LINE_BYTES);
    let body = String::from_utf8_lossy(&body[..body.len() - cut]);
    if cut == 0 && body.chars().all(clean) {
        return text;
    }
    let mut out = String::with_capacity(body.len() + 16);
    let mut rest = body.as_ref();
    while let Some(c) = rest.chars().next() {
        let sgr = ansi
            .then(|| rest.strip_prefix("\x1b["))
            .flatten()
            .and_then(|after| {
                let end = after.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
                after[end..].starts_with('m').then_some(2 + end + 1)
            });
        if let Some(len) = sgr {
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if !clean(c) => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    if cut > 0 {
        if ansi {
            // The line's own reset was in the part cut off.
            out.push_str("\x1b[0m");
        }
        out.push_str(&format!("… ({cut} bytes more, not written)"));
    }
    out.push('\n');
    out.into_bytes()
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for StderrLog {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line {
            log: self,
            text: Vec::new(),
        }
    }
}

/// What of rmcp's own warnings reaches the operator. rmcp warns of every request it refuses, so a
/// session sending 20,000 bad lines wrote 82 MB of them (helper-100): at most `RMCP_A_SECOND` a second
/// are written, and the next one written after those left out counts them (or the daemon's end does);
/// its errors are all written. And it leaves out the one
/// ERROR rmcp says for nothing wrong: a Claude Code session at a URL desk ends by closing its
/// `subscriptions/listen` stream, and rmcp then fails to send that listen's final result ("channel
/// closed"), at every session's end (helper-95).
#[derive(Default)]
pub struct RmcpWords {
    /// The second (since the first warning) being counted, and the warnings written in it.
    window: Mutex<(u64, u32)>,
    since: OnceLock<Instant>,
}

const RMCP_A_SECOND: u32 = 10;

/// rmcp's warnings left out since the last one written.
static RMCP_LEFT_OUT: AtomicU64 = AtomicU64::new(0);

fn rmcp_left_out_words(n: u64) -> String {
    format!(
        "ovai serve: {n} more warnings of rmcp (the MCP library) were left out, past {RMCP_A_SECOND} a second \
         (a session sending what the server refuses, most likely).\n"
    )
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RmcpWords {
    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        let meta = event.metadata();
        if *meta.level() > tracing::Level::WARN || !meta.target().starts_with("rmcp") {
            return true;
        }
        if *meta.level() == tracing::Level::ERROR && meta.target() == "rmcp::service" {
            let mut fields = Fields::default();
            event.record(&mut fields);
            if fields.message == "failed to send pending response during drain"
                && fields.error == "channel closed"
            {
                return false;
            }
        }
        if *meta.level() == tracing::Level::ERROR {
            return true;
        }
        let second = self.since.get_or_init(Instant::now).elapsed().as_secs();
        let mut window = crate::sync::lock(&self.window);
        let (at, written) = &mut *window;
        if *at != second {
            (*at, *written) = (second, 0);
        }
        if *written >= RMCP_A_SECOND {
            RMCP_LEFT_OUT.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        *written += 1;
        let left_out = RMCP_LEFT_OUT.swap(0, Ordering::Relaxed);
        if left_out > 0 {
            say(&rmcp_left_out_words(left_out));
        }
        true
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    error: String,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "error" => self.error = format!("{value:?}"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn an_event_is_one_line_its_controls_written_out() {
        let said = |text: &str, ansi| String::from_utf8(one_line(text.into(), ansi)).unwrap();
        assert_eq!(said("plain\ttext\n", false), "plain\ttext\n");
        assert_eq!(
            said("id=x\nFORGED\u{1b}[2J\u{7}\n", false),
            "id=x\\nFORGED\\u{1b}[2J\\u{7}\n"
        );
        // Colouring, the formatter's SGR escapes stay; any other escape is written out.
        assert_eq!(
            said("\u{1b}[2mwhen\u{1b}[0m id=\u{1b}]0;t\u{7}\n", true),
            "\u{1b}[2mwhen\u{1b}[0m id=\\u{1b}]0;t\\u{7}\n"
        );
        // A direction mark, a line separator, a zero-width space: written out too.
        assert_eq!(
            said("id=a\u{2028}b\u{200b}c\u{202e}d\n", false),
            "id=a\\u{2028}b\\u{200b}c\\u{202e}d\n"
        );
        // A megabyte of a session's method name is cut.
        let long = said(&format!("method={}\n", "M".repeat(1 << 20)), false);
        assert!(
            long.len() < 5000
                && long.ends_with(&format!(
                    "… ({} bytes more, not written)\n",
                    (1 << 20) + 7 - 4096
                )),
            "{}",
            &long[long.len() - 80..]
        );
        // Cut while coloured, the colours end with the line, not in the operator's next prompt.
        let long = said(&format!("\u{1b}[1mmethod={}\n", "M".repeat(5000)), true);
        assert!(
            long.ends_with("\u{1b}[0m… (915 bytes more, not written)\n"),
            "{long}"
        );
    }

    /// Lines a write refused (a full disk) are counted and said with the next that goes.
    #[test]
    fn lines_a_write_refused_are_said_with_the_next() {
        struct Refusing(u32, Arc<Mutex<Vec<u8>>>);
        impl Write for Refusing {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0 > 0 {
                    self.0 -= 1;
                    return Err(std::io::Error::other("No space left on device"));
                }
                crate::sync::lock(&self.1).extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let got = Arc::new(Mutex::new(Vec::new()));
        let log = StderrLog::writing_to(Refusing(2, got.clone()), 1 << 20);
        for n in 1..=3 {
            let mut line = tracing_subscriber::fmt::MakeWriter::make_writer(&log);
            line.write_all(format!("line {n}\n").as_bytes()).unwrap();
        }
        log.finish(Duration::from_secs(60));
        assert_eq!(
            String::from_utf8_lossy(&crate::sync::lock(&got)),
            "ovai serve: 2 lines of this log before this one could not be written.\nline 3\n"
        );
    }

    #[test]
    fn lines_past_what_is_held_are_dropped_and_the_gap_is_said_where_it_is() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        // A full pipe nobody reads yet: the thread waits on its first write.
        let size = nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_GETPIPE_SZ).unwrap();
        let full = vec![b'x'; usize::try_from(size).unwrap()];
        writer.try_clone().unwrap().write_all(&full).unwrap();
        // Room for four of the lines below.
        let log = StderrLog::writing_to(writer, 4 * "line 10\n".len());
        let say = |text: &str| {
            let mut line = tracing_subscriber::fmt::MakeWriter::make_writer(&log);
            line.write_all(text.as_bytes()).unwrap();
        };
        // A line is held until it is written, whether or not the thread has taken it: four fit.
        for n in 0..20 {
            say(&format!("line {n}\n"));
        }
        assert_eq!(log.shared.dropped.load(Ordering::Relaxed), 16);
        // The reader comes back and the four are written; the next line says what was lost before it.
        let mut got = vec![0u8; full.len()];
        reader.read_exact(&mut got).unwrap();
        while log.shared.held.load(Ordering::Relaxed) > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        say("after\n");
        // A line dropped after the last that got through (longer than all the room) is said at the end.
        say(&format!("{}\n", "y".repeat(40)));
        log.finish(Duration::from_secs(60));
        drop(log);
        // The thread holds the writing end until its channel closes, once every logger is gone.
        let mut rest = String::new();
        reader.read_to_string(&mut rest).unwrap();
        assert_eq!(
            rest,
            "line 0\nline 1\nline 2\nline 3\n\
             ovai serve: 16 lines of this log were dropped here: its stderr was not read fast enough.\n\
             after\n\
             ovai serve: 1 line of this log was dropped here: its stderr was not read fast enough.\n"
        );
    }
}
