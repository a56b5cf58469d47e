//! Newline-delimited messages, both ways, for a session's MCP stream and the host's protocol channel.
//!
//! Reading: one item a line, with a length cap. Unlike tokio-util's `LinesCodec`, a line over the cap and
//! a line that is not UTF-8 are items rather than errors: `FramedRead` ends its stream after any error,
//! and one bad line must not silence a connection.
//!
//! Writing: an outbox that puts whatever is queued into one write (one wake-up of the reader for many
//! messages), and counts the bytes waiting, so a reader that never reads can be stopped being served
//! before it holds the daemon's memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};
use tokio_util::codec::Decoder;

use crate::skim::Skim;

#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// A line longer than the cap; its bytes were dropped as they came, skimmed for the members that
    /// say what it was (`skim`), where the reader skims.
    TooLong(Option<String>),
    /// A line whose bytes are not UTF-8.
    NotUtf8,
    /// A line dropped as it came because the lines not yet ended of its sender's seat held more than
    /// their share (`CappedLines::share`); skimmed as `TooLong`'s.
    Crowded(Option<String>),
}

/// A line not yet ended holds its bytes against its seat's share from this size on: the bytes of a line
/// that arrives in one piece are never counted.
const COUNTED_FROM: usize = 1 << 20;

/// What a session's buffer keeps once a long line's room went: what it reads at a time.
const ROOM_KEPT: usize = 8 * 1024;

/// The bytes of lines not yet ended that a seat's sessions may hold together, and this reader's part.
struct Share {
    seat: Arc<AtomicUsize>,
    limit: usize,
    mine: usize,
}

pub struct CappedLines {
    max: usize,
    /// Where the search for the next newline resumes in the buffer.
    searched: usize,
    /// Dropping the rest of a line that is over the cap.
    discarding: bool,
    /// Bytes that are not UTF-8 become U+FFFD instead of making the line `NotUtf8`.
    lossy: bool,
    /// Whether a line over the cap is skimmed (a session's are; the host's are its own, or junk).
    skims: bool,
    /// The line over the cap being skimmed.
    skim: Option<Skim>,
    /// The seat's share of lines not yet ended, once the reader knows its seat.
    share: Option<Share>,
    /// The line being dropped was over the seat's share, not the cap.
    crowded: bool,
    /// The buffer grew past `COUNTED_FROM` for the line being read: once it ends, the room goes with it.
    grown: bool,
}

impl CappedLines {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            searched: 0,
            discarding: false,
            lossy: false,
            skims: true,
            skim: None,
            share: None,
            crowded: false,
            grown: false,
        }
    }

    /// For a channel whose own writer only writes UTF-8, where other bytes are somebody else's (a plugin
    /// writing to the host's fd 4): the message after them is still read. Its writer ends every message
    /// with a newline, so bytes left without one at the end are a message its writer died writing, and
    /// are dropped rather than read as one that was damaged.
    pub fn lossy(max: usize) -> Self {
        let mut lines = Self::new(max);
        lines.lossy = true;
        lines.skims = false;
        lines
    }

    /// Counts a line not yet ended of `COUNTED_FROM` bytes or more against `seat`'s bytes, which its
    /// readers together keep within `limit`: past it, the line that would go over is dropped as it comes
    /// (`Line::Crowded` at its end). Many sessions of one seat could otherwise hold a line of up to the
    /// cap each, and the daemon's memory with them.
    pub fn share(&mut self, seat: Arc<AtomicUsize>, limit: usize) {
        self.hold(0);
        self.share = Some(Share {
            seat,
            limit,
            mine: 0,
        });
    }

    /// Holds `bytes` of a line not yet ended against the seat's share (none below `COUNTED_FROM`);
    /// whether the seat's lines now hold more than it.
    fn hold(&mut self, bytes: usize) -> bool {
        let Some(share) = &mut self.share else {
            return false;
        };
        let bytes = if bytes >= COUNTED_FROM { bytes } else { 0 };
        // Every line of a call passes here: one that holds nothing costs no atomic.
        if bytes == 0 && share.mine == 0 {
            return false;
        }
        if bytes >= share.mine {
            share.seat.fetch_add(bytes - share.mine, Ordering::Relaxed);
        } else {
            share.seat.fetch_sub(share.mine - bytes, Ordering::Relaxed);
        }
        share.mine = bytes;
        bytes > 0 && share.seat.load(Ordering::Relaxed) > share.limit
    }
}

impl Drop for CappedLines {
    fn drop(&mut self) {
        self.hold(0);
    }
}

impl Decoder for CappedLines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        self.grown |= buf.len() >= COUNTED_FROM;
        let line = self.next_line(buf);
        // A buffer keeps the size it grew to (and a line split from it, or dropped, its allocation): a
        // session that sent one long line would hold its room for ever. Not the host's channel, whose
        // long answers come often and whose one reader is the daemon's own.
        if self.grown
            && self.skims
            && buf.len() < COUNTED_FROM
            && (line.is_some() || buf.is_empty())
        {
            self.grown = false;
            let mut fresh = BytesMut::with_capacity(buf.len().max(ROOM_KEPT));
            fresh.extend_from_slice(buf);
            *buf = fresh;
        }
        Ok(line)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        self.searched = 0;
        if self.discarding {
            self.discarding = false;
            buf.clear();
            return Ok(Some(self.skimmed(&[])));
        }
        if buf.is_empty() || self.lossy {
            buf.clear();
            return Ok(None);
        }
        let line = buf.split_to(buf.len());
        Ok(Some(text(&line, self.lossy)))
    }
}

impl CappedLines {
    /// The next line in `buf`, if one ended there.
    fn next_line(&mut self, buf: &mut BytesMut) -> Option<Line> {
        let look_to = if self.discarding {
            buf.len()
        } else {
            buf.len().min(self.max + 1)
        };
        let found =
            memchr::memchr(b'\n', &buf[self.searched..look_to]).map(|at| self.searched + at);
        match found {
            Some(end) if self.discarding => {
                self.searched = 0;
                self.discarding = false;
                let line = self.skimmed(&buf[..end]);
                buf.advance(end + 1);
                Some(line)
            }
            Some(end) => {
                self.searched = 0;
                self.hold(0);
                let line = buf.split_to(end + 1);
                Some(text(&line[..end], self.lossy))
            }
            None if self.discarding => {
                self.skim_on(buf);
                buf.clear();
                None
            }
            None if buf.len() > self.max => {
                // Over the cap: drop it up to its end if that is here already, else as it comes, and
                // say so at its end.
                self.hold(0);
                self.searched = 0;
                self.skim = self.skims.then(Skim::default);
                match memchr::memchr(b'\n', &buf[look_to..]) {
                    Some(at) => {
                        let line = self.skimmed(&buf[..look_to + at]);
                        buf.advance(look_to + at + 1);
                        Some(line)
                    }
                    None => {
                        self.discarding = true;
                        self.skim_on(buf);
                        buf.clear();
                        None
                    }
                }
            }
            None if self.hold(buf.len()) => {
                // Over the seat's share: dropped as it comes, as a line over the cap is.
                self.hold(0);
                self.searched = 0;
                self.crowded = true;
                self.discarding = true;
                self.skim = self.skims.then(Skim::default);
                self.skim_on(buf);
                buf.clear();
                None
            }
            None => {
                self.searched = buf.len();
                None
            }
        }
    }

    fn skim_on(&mut self, bytes: &[u8]) {
        if let Some(skim) = &mut self.skim {
            skim.feed(bytes);
        }
    }

    /// The line over the cap (or the seat's share), ending with `last`.
    fn skimmed(&mut self, last: &[u8]) -> Line {
        self.skim_on(last);
        let skeleton = self.skim.take().and_then(Skim::finish);
        if std::mem::take(&mut self.crowded) {
            Line::Crowded(skeleton)
        } else {
            Line::TooLong(skeleton)
        }
    }
}

fn text(bytes: &[u8], lossy: bool) -> Line {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => Line::Text(s.to_string()),
        Err(_) if lossy => Line::Text(String::from_utf8_lossy(bytes).into_owned()),
        Err(_) => Line::NotUtf8,
    }
}

/// The bytes queued in an outbox and not yet written.
#[derive(Default)]
struct Queued {
    bytes: AtomicUsize,
    written: Notify,
    /// Once a write failed: every line whose end was not written, in order (none of them reached the
    /// peer as a line); kept only where its owner looks at them (`Outbox::keeping_unwritten`).
    unwritten: std::sync::Mutex<Vec<u8>>,
    keeps_unwritten: bool,
    /// The bytes queued in all the outboxes of the seat this one's session is of, counted here too.
    seat: std::sync::OnceLock<Arc<AtomicUsize>>,
}

impl Queued {
    fn add(&self, bytes: usize) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(seat) = self.seat.get() {
            seat.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn sub(&self, bytes: usize) {
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        if let Some(seat) = self.seat.get() {
            seat.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

/// The sending side of a connection: lines queued here are written by a task of their own.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    waiting: Arc<Queued>,
}

/// The connection's writer is gone (its peer closed, or it was closed here).
#[derive(Debug)]
pub struct Closed;

impl Outbox {
    /// An outbox writing to `write`, and the task that writes (it ends once every sender is gone and
    /// what was queued is written, or the peer is gone).
    /// What was queued and not written when a write failed is dropped: a session's peer is gone.
    pub fn start<W: AsyncWrite + Unpin + Send + 'static>(
        write: W,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        Self::started(write, false)
    }

    /// An outbox that keeps, once a write failed, what was not written, for `unwritten`.
    pub fn keeping_unwritten<W: AsyncWrite + Unpin + Send + 'static>(
        write: W,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        Self::started(write, true)
    }

    fn started<W: AsyncWrite + Unpin + Send + 'static>(
        write: W,
        keeps_unwritten: bool,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let waiting = Arc::new(Queued {
            keeps_unwritten,
            ..Queued::default()
        });
        let writer = tokio::spawn(write_batched(write, rx, waiting.clone()));
        (Self { tx, waiting }, writer)
    }

    /// Counts what is queued here in `seat` too, from now on (set before anything is queued).
    pub fn count_in(&self, seat: Arc<AtomicUsize>) {
        if self.queued() == 0 {
            let _ = self.waiting.seat.set(seat);
        }
    }

    pub fn send(&self, line: Vec<u8>) -> Result<(), Closed> {
        let len = line.len();
        self.waiting.add(len);
        self.tx.send(line).map_err(|_| {
            self.waiting.sub(len);
            Closed
        })
    }

    /// Whether the writer stopped (the peer is gone): nothing sent now will be written.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Resolves once the writer stopped because a write failed (or every sender is gone).
    pub async fn closed(&self) {
        self.tx.closed().await
    }

    /// After a failed write, the lines that never reached the peer whole.
    pub fn unwritten(&self) -> Vec<u8> {
        crate::sync::lock(&self.waiting.unwritten).clone()
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self) -> usize {
        self.waiting.bytes.load(Ordering::Relaxed)
    }

    /// Resolves once at most `limit` bytes are waiting (at once if that is so already).
    pub async fn drained_to(&self, limit: usize) {
        loop {
            let written = self.waiting.written.notified();
            if self.queued() <= limit || self.tx.is_closed() {
                return;
            }
            written.await;
        }
    }
}

/// Writes the lines sent on `rx`, whatever is queued at once in one write, until the senders are gone or
/// the peer is; then shuts the write side.
async fn write_batched<W: AsyncWrite + Unpin>(
    mut write: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    waiting: Arc<Queued>,
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
        let written = write_counted(&mut write, &batch).await;
        waiting.sub(batch.len());
        waiting.written.notify_waiters();
        if written < batch.len() {
            // Nothing queued will be written any more: forget it, so nobody waits on it, and keep what
            // never arrived whole (from the line the failure cut) for the owner to look at.
            rx.close();
            let cut = batch[..written]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |at| at + 1);
            // Copied only where it is looked at: 32 sessions torn down at once, each with 70 MB unread,
            // took the daemon to 3.6 GB for a moment (helper-100).
            let mut unwritten = crate::sync::lock(&waiting.unwritten);
            if waiting.keeps_unwritten {
                unwritten.extend_from_slice(&batch[cut..]);
            }
            while let Ok(rest) = rx.try_recv() {
                waiting.sub(rest.len());
                if waiting.keeps_unwritten {
                    unwritten.extend_from_slice(&rest);
                }
            }
            drop(unwritten);
            waiting.written.notify_waiters();
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// Writes `bytes` until done or a write fails; how many were written.
async fn write_counted<W: AsyncWrite + Unpin>(write: &mut W, bytes: &[u8]) -> usize {
    let mut done = 0;
    while done < bytes.len() {
        match write.write(&bytes[done..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a failed write left queued is let go, counted out of the seat's bytes too, and kept only by
    /// an outbox made to keep it (a session's was copied whole as its peer went: helper-100).
    #[tokio::test(flavor = "current_thread")]
    async fn what_a_failed_write_left_is_let_go_and_kept_only_where_asked() {
        for keeps in [false, true] {
            let (near, far) = tokio::io::duplex(64);
            drop(far);
            let (out, writer) = if keeps {
                Outbox::keeping_unwritten(near)
            } else {
                Outbox::start(near)
            };
            let seat = Arc::new(AtomicUsize::new(0));
            out.count_in(seat.clone());
            for _ in 0..10 {
                let _ = out.send(vec![b'x'; 100_000]);
            }
            writer.await.unwrap();
            assert_eq!((out.queued(), seat.load(Ordering::Relaxed)), (0, 0));
            assert_eq!(out.unwritten().is_empty(), !keeps);
        }
    }

    /// A session's buffer grew to its longest line and kept that size for the session's life: 64 idle
    /// sessions of one seat that each sent a 15 MiB line once held 1.1 GB (helper-100). And one over the
    /// cap that never ends (helper-102); not the host's channel.
    #[test]
    fn a_long_lines_room_is_given_back_once_it_ended() {
        let mut lines = CappedLines::new(1 << 20);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&vec![b'x'; 4 << 20]);
        assert_eq!(lines.decode(&mut buf).unwrap(), None);
        assert!(buf.capacity() < COUNTED_FROM, "{}", buf.capacity());
        let mut host = CappedLines::lossy(16 << 20);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&vec![b'x'; 4 << 20]);
        buf.extend_from_slice(b"\n");
        assert!(host.decode(&mut buf).unwrap().is_some());
        assert!(buf.capacity() >= COUNTED_FROM);
        for over_the_cap in [false, true] {
            let mut lines = CappedLines::new(if over_the_cap { 1 << 20 } else { 16 << 20 });
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&vec![b'x'; 4 << 20]);
            buf.extend_from_slice(b"\n{}\n");
            assert!(lines.decode(&mut buf).unwrap().is_some());
            assert!(buf.capacity() < COUNTED_FROM, "{}", buf.capacity());
            assert_eq!(
                lines.decode(&mut buf).unwrap(),
                Some(Line::Text("{}".into()))
            );
        }
    }

    #[test]
    fn lines_not_yet_ended_hold_their_seats_share_until_they_end() {
        let seat = Arc::new(AtomicUsize::new(0));
        let mb = COUNTED_FROM;
        let (mut a, mut b) = (CappedLines::new(16 * mb), CappedLines::new(16 * mb));
        a.share(seat.clone(), 3 * mb);
        b.share(seat.clone(), 3 * mb);
        let (mut in_a, mut in_b) = (BytesMut::new(), BytesMut::new());
        // Below a megabyte nothing is held; past it, the line's bytes are.
        in_a.extend_from_slice(&vec![b'x'; mb / 2]);
        assert_eq!(a.decode(&mut in_a).unwrap(), None);
        assert_eq!(seat.load(Ordering::Relaxed), 0);
        in_a.extend_from_slice(&vec![b'x'; 2 * mb]);
        assert_eq!(a.decode(&mut in_a).unwrap(), None);
        assert_eq!(seat.load(Ordering::Relaxed), 2 * mb + mb / 2);
        // The other reader's line would go past the share: dropped as it comes, said at its end.
        in_b.extend_from_slice(b"{\"id\":7,\"method\":\"x\",\"params\":\"");
        in_b.extend_from_slice(&vec![b'y'; 2 * mb]);
        assert_eq!(b.decode(&mut in_b).unwrap(), None);
        assert!(in_b.is_empty());
        assert_eq!(seat.load(Ordering::Relaxed), 2 * mb + mb / 2);
        in_b.extend_from_slice(b"\"}\nnext\n");
        assert!(matches!(
            b.decode(&mut in_b).unwrap(),
            Some(Line::Crowded(Some(_)))
        ));
        assert_eq!(
            b.decode(&mut in_b).unwrap(),
            Some(Line::Text("next".into()))
        );
        // Ended, a line holds nothing; a reader gone gives back what it held.
        in_a.extend_from_slice(b"\n");
        assert!(matches!(a.decode(&mut in_a).unwrap(), Some(Line::Text(_))));
        assert_eq!(seat.load(Ordering::Relaxed), 0);
        in_b.extend_from_slice(&vec![b'z'; 2 * mb]);
        assert_eq!(b.decode(&mut in_b).unwrap(), None);
        assert_eq!(seat.load(Ordering::Relaxed), 2 * mb);
        drop(b);
        assert_eq!(seat.load(Ordering::Relaxed), 0);
    }

    fn lines(max: usize, input: &[u8]) -> Vec<Line> {
        let mut codec = CappedLines::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        // Fed a byte at a time, the way the worst network delivers it.
        for b in input {
            buf.extend_from_slice(&[*b]);
            while let Some(l) = codec.decode(&mut buf).unwrap() {
                out.push(l);
            }
        }
        while let Some(l) = codec.decode_eof(&mut buf).unwrap() {
            out.push(l);
        }
        out
    }

    #[test]
    fn long_and_broken_lines_are_items_and_the_next_line_is_whole() {
        let mut input = b"ok\r\n".to_vec();
        input.extend_from_slice(&[b'x'; 40]);
        input.extend_from_slice(b"\n\xff\xfe\nafter\nlast");
        assert_eq!(
            lines(10, &input),
            [
                Line::Text("ok".into()),
                Line::TooLong(None),
                Line::NotUtf8,
                Line::Text("after".into()),
                Line::Text("last".into()),
            ]
        );
        assert_eq!(lines(10, &[b'y'; 30]), [Line::TooLong(None)]);
        assert_eq!(
            lines(10, b"0123456789\n"),
            [Line::Text("0123456789".into())]
        );
        // Arriving at once, the end of a long line and the next line are both in the buffer.
        let mut codec = CappedLines::new(10);
        let mut buf = BytesMut::from(&b"xxxxxxxxxxxxxxxxxxxxxxxxx\nnext\n"[..]);
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(Line::TooLong(None)));
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(Line::Text("next".into()))
        );
    }

    #[test]
    fn a_long_line_is_skimmed_for_its_id_however_it_comes() {
        let line =
            br#"{"method":"tools/call","params":{"s":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},"id":7}"#;
        let skeleton = Some(r#"{"method":"tools/call","id":7}"#.to_string());
        let mut input = line.to_vec();
        input.extend_from_slice(b"\r\nnext\n");
        let want = [Line::TooLong(skeleton.clone()), Line::Text("next".into())];
        assert_eq!(lines(20, &input), want);
        let mut codec = CappedLines::new(20);
        let mut buf = BytesMut::from(&input[..]);
        let got = [
            codec.decode(&mut buf).unwrap(),
            codec.decode(&mut buf).unwrap(),
        ];
        assert_eq!(got.map(Option::unwrap), want);
        // Unended at the end of input, and never on the host's channel.
        assert_eq!(lines(20, line), [Line::TooLong(skeleton)]);
        let mut codec = CappedLines::lossy(20);
        let mut buf = BytesMut::from(&input[..]);
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(Line::TooLong(None)));
    }
}
