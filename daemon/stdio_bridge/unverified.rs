//! Tool calls of the commonest shapes, noted before they are read.
//!
//! A request the daemon answers is waited for; one it cannot read (not JSON, an id it refuses) is answered
//! with `id: null` and must not be, or a daemon that goes away would have the bridge answer it twice. So
//! each request's line was read through in full as it passed, in sixteen processes each woken for a few
//! lines: about 4 % of sixteen sessions' calls per second, measured (docs/performance-log.md,
//! 2026-12-04, night). A `tools/call` whose line begins or ends the way the common clients write it is now
//! kept here as it came, under the id it carries, and read only if that is ever needed. Its answer,
//! arriving under that id, simply lets it go: most are never read at all.
//!
//! What the bridge would have noted is unchanged: `Session::verify` reads what is kept here through the
//! full reading, in order, before anything else is noted (a cancellation, a request of another shape),
//! before the daemon's absence is acted on, whenever more is kept than `MOST_KEPT`, and when an answer's
//! id could belong to more than one request. An answer under an id only one line here carries is that
//! line's answer: a line the daemon cannot read is answered with `id: null`, never under an id.

use std::collections::VecDeque;
use std::ops::Range;

/// Lines longer than this are read as they pass, as before: one kept here costs its bytes until answered.
const MOST_LINE: usize = 64 * 1024;
/// Past this many lines, or this many bytes, what is kept is read and noted in full.
const MOST_KEPT: usize = 256;
const MOST_KEPT_BYTES: usize = 256 * 1024;
/// Answered lines' bytes before the first waiting one are let go of past this.
const COMPACT_FROM: usize = 64 * 1024;
/// The longest string id taken here (the daemon takes up to `MAX_ID_BYTES`; a longer one is read).
const MOST_STRING_ID: usize = 64;

const ID_FIRST: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
const METHOD_AFTER_ID: &[u8] = br#","method":"tools/call","params":"#;
const METHOD_FIRST: &[u8] = br#"{"method":"tools/call","params":"#;
const ID_LAST: &[u8] = br#","jsonrpc":"2.0","id":"#;

#[derive(Default)]
pub struct Unverified {
    /// The kept lines, one after another; cleared whenever none is kept.
    bytes: Vec<u8>,
    entries: VecDeque<Entry>,
}

struct Entry {
    line: Range<usize>,
    key: Range<usize>,
    answered: bool,
}

/// Where a request's id stands in its line, when the line is a `tools/call` of one of the two shapes
/// clients write (`{"jsonrpc":"2.0","id":…,"method":"tools/call","params":…}`, the TypeScript SDK's
/// `{"method":"tools/call","params":…,"jsonrpc":"2.0","id":…}`), its id is one the daemon writes back
/// exactly as it stands (an integer without a leading zero, a short string of printable ASCII with no
/// escape), and nothing else in it could be read as a second `method` (another `"method"`, or a `\u`
/// escape that could spell one). Anything else is read as it passes.
pub fn key_of(line: &[u8]) -> Option<Range<usize>> {
    if line.len() > MOST_LINE {
        return None;
    }
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    let key = if let Some(rest) = body.strip_prefix(ID_FIRST) {
        let len = id_len(rest)?;
        if !rest[len..].starts_with(METHOD_AFTER_ID) {
            return None;
        }
        ID_FIRST.len()..ID_FIRST.len() + len
    } else if body.starts_with(METHOD_FIRST) {
        let before_brace = body.strip_suffix(b"}")?;
        let start = id_start_from_end(before_brace)?;
        if !before_brace[..start].ends_with(ID_LAST) || start < METHOD_FIRST.len() + ID_LAST.len() {
            return None;
        }
        start..before_brace.len()
    } else {
        return None;
    };
    let finder = memchr::memmem::find_iter(body, b"\"method\"");
    if finder.take(2).count() != 1 || memchr::memmem::find(body, b"\\u").is_some() {
        return None;
    }
    Some(key)
}

/// The length of the id at the start of `rest`, when it is of the kinds `key_of` takes.
fn id_len(rest: &[u8]) -> Option<usize> {
    if rest.first() == Some(&b'"') {
        let close = rest[1..].iter().position(|b| *b == b'"')? + 1;
        return plain_string(&rest[..=close]).then_some(close + 1);
    }
    let len = rest
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'-'))
        .unwrap_or(rest.len());
    plain_integer(&rest[..len]).then_some(len)
}

/// Where the id that ends `body` starts, when it is of the kinds `key_of` takes.
fn id_start_from_end(body: &[u8]) -> Option<usize> {
    if body.last() == Some(&b'"') {
        let open = body[..body.len() - 1].iter().rposition(|b| *b == b'"')?;
        return plain_string(&body[open..]).then_some(open);
    }
    let start = body
        .iter()
        .rposition(|b| !(b.is_ascii_digit() || *b == b'-'))
        .map_or(0, |at| at + 1);
    plain_integer(&body[start..]).then_some(start)
}

/// `"…"` of printable ASCII, without a quote or a backslash inside: serde_json writes it back as it is.
fn plain_string(quoted: &[u8]) -> bool {
    let Some(inner) = quoted.get(1..quoted.len().saturating_sub(1)) else {
        return false;
    };
    inner.len() <= MOST_STRING_ID
        && inner
            .iter()
            .all(|b| (0x20..0x7f).contains(b) && *b != b'"' && *b != b'\\')
}

/// An integer as rmcp writes one back: `0`, or digits not starting with 0 after an optional `-`, short
/// enough to be an i64 whatever they are.
fn plain_integer(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    match digits {
        [] => false,
        [b'0'] => text.len() == 1,
        [b'0', ..] => false,
        _ => digits.len() <= 18 && digits.iter().all(u8::is_ascii_digit),
    }
}

impl Unverified {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether this much is kept that what is kept should be read now.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= MOST_KEPT || self.bytes.len() >= MOST_KEPT_BYTES
    }

    /// Keeps `line`, whose id stands at `key` (`key_of`).
    pub fn keep(&mut self, line: &[u8], key: Range<usize>) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(line);
        self.entries.push_back(Entry {
            line: at..at + line.len(),
            key: at + key.start..at + key.end,
            answered: false,
        });
    }

    /// How many kept lines not yet answered carry the id `key`, counting to two.
    pub fn carrying(&self, key: &[u8]) -> usize {
        self.waiting()
            .filter(|e| &self.bytes[e.key.clone()] == key)
            .take(2)
            .count()
    }

    /// The first kept line carrying `key` is answered: it goes, with any answered before it.
    pub fn answer(&mut self, key: &[u8]) {
        let bytes = &self.bytes;
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| !e.answered && bytes[e.key.clone()] == *key)
        {
            e.answered = true;
        }
        while self.entries.front().is_some_and(|e| e.answered) {
            self.entries.pop_front();
        }
        match self.entries.front() {
            None => self.bytes.clear(),
            // Calls always in flight: the answered lines' bytes go once they are most of what is kept.
            Some(first) if first.line.start >= COMPACT_FROM => {
                let gone = first.line.start;
                self.bytes.drain(..gone);
                for e in &mut self.entries {
                    e.line = e.line.start - gone..e.line.end - gone;
                    e.key = e.key.start - gone..e.key.end - gone;
                }
            }
            Some(_) => {}
        }
    }

    /// The lines not yet answered, in the order they came; none is kept after.
    pub fn take_waiting(&mut self) -> Vec<Vec<u8>> {
        let lines = self
            .waiting()
            .map(|e| self.bytes[e.line.clone()].to_vec())
            .collect();
        self.entries.clear();
        self.bytes.clear();
        lines
    }

    fn waiting(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| !e.answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(line: &str) -> Option<&str> {
        key_of(line.as_bytes()).map(|r| &line[r])
    }

    #[test]
    fn the_two_common_shapes_are_kept_under_their_ids() {
        let args = r#"{"name":"echo","arguments":{"text":"a \"quoted\" word\n"}}"#;
        for (id, expect) in [
            ("7", "7"),
            ("0", "0"),
            ("-12", "-12"),
            (r#""abc-1""#, r#""abc-1""#),
        ] {
            let first =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{args}}}"#);
            let last =
                format!(r#"{{"method":"tools/call","params":{args},"jsonrpc":"2.0","id":{id}}}"#);
            assert_eq!(key(&first), Some(expect), "{first}");
            assert_eq!(key(&format!("{last}\n")), Some(expect), "{last}");
            assert_eq!(key(&format!("{last}\r\n")), Some(expect), "{last}");
        }
    }

    #[test]
    fn anything_else_is_left_to_the_full_reading() {
        for line in [
            // Ids the daemon writes back otherwise, or refuses.
            r#"{"jsonrpc":"2.0","id":07,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":5.0,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":5e0,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1234567890123456789,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a\\b","method":"tools/call","params":{}}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":\"a\u{7f}\",\"method\":\"tools/call\",\"params\":{}}",
            "{\"jsonrpc\":\"2.0\",\"id\":\"é\",\"method\":\"tools/call\",\"params\":{}}",
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{}}"#,
            r#"{"method":"tools/call","params":{},"jsonrpc":"2.0","id":"a"b"}"#,
            r#"{"method":"tools/call","params":{},"jsonrpc":"2.0","id":1 }"#,
            r#"{"method":"tools/call","params":{},"jsonrpc":"2.0","id":--1}"#,
            r#"{"method":"tools/call","jsonrpc":"2.0","id":1}"#,
            // Another method, a second one, or one an escape could spell.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{},"method":"initialize"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{},"meth\u006fd":"initialize"}"#,
            r#"{"method":"tools/call","params":{"arguments":{"method":"GET"}},"jsonrpc":"2.0","id":1}"#,
            // Not the shapes: spaces, another order, no id.
            r#"{ "jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{}}"#,
            r#"{"method":"tools/call","params":{},"jsonrpc":"2.0"}"#,
            r#"{"method":"tools/call","params":{"jsonrpc":"2.0","id":1}}"#,
        ] {
            assert_eq!(key(line), None, "{line}");
        }
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{}"}}}}"#,
            "x".repeat(MOST_LINE)
        );
        assert_eq!(key(&long), None);
        let long_id = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","method":"tools/call","params":{{}}}}"#,
            "x".repeat(MOST_STRING_ID + 1)
        );
        assert_eq!(key(&long_id), None);
    }

    #[test]
    fn an_answer_lets_the_first_line_under_its_id_go_and_the_rest_wait_in_order() {
        let mut kept = Unverified::default();
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":1}}"#,
        ];
        for line in lines {
            kept.keep(line.as_bytes(), key_of(line.as_bytes()).unwrap());
        }
        assert_eq!(kept.carrying(b"1"), 2);
        assert_eq!(kept.carrying(b"2"), 1);
        assert_eq!(kept.carrying(b"3"), 0);
        kept.answer(b"2");
        kept.answer(b"1");
        assert_eq!(kept.carrying(b"1"), 1);
        assert_eq!(kept.take_waiting(), vec![lines[2].as_bytes().to_vec()]);
        assert!(kept.is_empty() && kept.bytes.is_empty());
        kept.keep(lines[0].as_bytes(), key_of(lines[0].as_bytes()).unwrap());
        kept.answer(b"1");
        assert!(kept.is_empty() && kept.bytes.is_empty());
    }
}
