//! The daemon's tracing on stderr, written by a thread of its own. A stderr nobody reads (a supervisor
//! that captured it and never looks, a terminal paused with Ctrl-S, `ovai serve 2>&1 | less`) fills its
//! pipe, and a write there would hold the daemon's one event-loop thread, and every session with it. Up
//! to HELD_BYTES wait here; past that lines are dropped and counted, and the next line that gets through
//! says how many. runtime.log is written apart, and loses nothing.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What waits for a stderr that is not being read: thousands of lines.
const HELD_BYTES: usize = 1024 * 1024;

/// Where the daemon's tracing goes: `tracing_subscriber::fmt().with_writer(log.clone())`.
#[derive(Clone)]
pub struct StderrLog {
    tx: Sender<Vec<u8>>,
    shared: Arc<Shared>,
}

/// What the thread and the loggers share (not the sender: the thread ends once every logger is gone).
struct Shared {
    /// The bytes sent and not yet written, at most `limit`.
    held: AtomicUsize,
    limit: usize,
    dropped: AtomicU64,
    sent: AtomicU64,
    /// How many lines the thread has written (or failed to), with its condition to wait on.
    written: Mutex<u64>,
    wrote: Condvar,
}

impl StderrLog {
    /// Starts the thread that writes to stderr.
    pub fn start() -> Self {
        Self::writing_to(std::io::stderr(), HELD_BYTES)
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
                let mut said = 0;
                for line in rx {
                    let dropped = mine.dropped.load(Ordering::Relaxed);
                    if dropped > said {
                        let n = dropped - said;
                        let (lines, were) = if n == 1 { ("line", "was") } else { ("lines", "were") };
                        let _ = writeln!(
                            out,
                            "ovai serve: {n} {lines} of this log {were} dropped while its stderr was not read."
                        );
                        said = dropped;
                    }
                    let _ = out.write_all(&line);
                    mine.held.fetch_sub(line.len(), Ordering::Relaxed);
                    *crate::sync::lock(&mine.written) += 1;
                    mine.wrote.notify_all();
                }
            });
        if let Err(e) = thread {
            // Without the thread nothing is written: said once, where it can still be read.
            eprintln!("ovai serve: its log's thread could not start ({e}); stderr stays empty.");
        }
        Self { tx, shared }
    }

    /// Waits until what was logged so far is written, for at most `patience`: a stderr nobody reads must
    /// not keep the daemon from ending.
    pub fn finish(&self, patience: Duration) {
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
        if self.text.is_empty() {
            return;
        }
        let shared = &self.log.shared;
        let len = self.text.len();
        if shared.held.fetch_add(len, Ordering::Relaxed) + len > shared.limit {
            shared.held.fetch_sub(len, Ordering::Relaxed);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.log.tx.send(std::mem::take(&mut self.text)).is_ok() {
            shared.sent.fetch_add(1, Ordering::Release);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn lines_past_what_is_held_are_dropped_counted_and_said_once_the_reader_is_back() {
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
        let dropped = log.shared.dropped.load(Ordering::Relaxed);
        assert_eq!(dropped, 16);
        // The reader comes back: what was held is written, and the next line says what was lost.
        let mut got = vec![0u8; full.len()];
        reader.read_exact(&mut got).unwrap();
        log.finish(Duration::from_secs(60));
        say("after\n");
        log.finish(Duration::from_secs(60));
        drop(log);
        // The thread holds the writing end until its channel closes, once every logger is gone.
        let mut rest = String::new();
        reader.read_to_string(&mut rest).unwrap();
        let kept = rest.lines().filter(|l| l.starts_with("line ")).count() as u64;
        assert_eq!(kept + dropped, 20, "{rest}");
        // Each notice counts what was dropped since the one before (more may go while one is written).
        let said: Vec<u64> = rest
            .lines()
            .filter_map(|l| l.strip_prefix("ovai serve: "))
            .filter_map(|l| l.split(' ').next()?.parse().ok())
            .collect();
        assert_eq!(said.iter().sum::<u64>(), dropped, "{rest}");
        assert!(rest.ends_with("after\n"), "{rest}");
    }
}
