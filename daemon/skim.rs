//! What is kept of a line too long to read: its top-level members that say whether it is a request and
//! under which id (`jsonrpc`, `id`, `method`, `result`, `error`), as its bytes go by, in a small
//! object of their own (the skeleton). A session's reader (`lines`) and `ovai mcp` skim the same
//! bytes, and `jsonrpc::overlong` judges the skeleton by the rules of every other line: a client whose
//! request is over the cap gets its refusal under its id, wherever in the line the id is, rather than
//! waiting. As for any line, a member's first value counts, and the first of the envelope's members
//! given twice decides. The rest of the line is only followed (strings, nesting), not checked: a line
//! with a request's shape is answered as one.

/// The envelope's members, as `jsonrpc::read` reads them (from here); all but `params` are kept as
/// written.
pub const ENVELOPE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
const PARAMS: usize = 3;
/// A kept value longer than this is kept as a placeholder of its meaning: an id of 1 KiB, every
/// character of it escaped, fits.
const MAX_VALUE: usize = 16 * 1024;
/// A member's name longer than this (`jsonrpc` with every letter escaped is 42) is none of them.
const MAX_NAME: usize = 48;

#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum At {
    /// Before the object opens.
    #[default]
    Start,
    /// Where a member's name opens; `first` where the object may also close, empty.
    Name { first: bool },
    /// In a member's name (a string).
    InName,
    /// After a name, before its colon.
    Colon,
    /// In a member's value; `depth` counts the arrays and objects open in it.
    Value { depth: u64 },
    /// After the object closed: only whitespace may follow.
    Done,
    /// Not an object this can follow: no skeleton.
    Lost,
}

#[derive(Default)]
pub struct Skim {
    at: At,
    in_string: bool,
    escaped: bool,
    name: Vec<u8>,
    /// The envelope's member whose value is being read, if this one is, and whether for the first time.
    keeping: Option<(usize, bool)>,
    value: Vec<u8>,
    /// Whitespace came after the value's last byte (kept as one space if more of the value follows).
    spaced: bool,
    /// The kept members, written out: each one's first value.
    skeleton: Vec<u8>,
    /// The envelope's members read so far, and the first given twice.
    seen: [bool; ENVELOPE.len()],
    twice: Option<usize>,
}

/// The skeleton of a whole line (`ovai mcp`, which holds its lines whole).
pub fn skeleton(line: &[u8]) -> Option<String> {
    let mut skim = Skim::default();
    skim.feed(line);
    skim.finish()
}

impl Skim {
    /// The next bytes of the line. Linear in them: a string's bytes are passed over with `memchr`.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while let Some(&b) = bytes.first() {
            match self.at {
                At::Lost => return,
                At::Done => {
                    if !bytes.iter().all(|b| json_space(*b)) {
                        self.at = At::Lost;
                    }
                    return;
                }
                _ => {}
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    self.take(&bytes[..1]);
                    bytes = &bytes[1..];
                    continue;
                }
                match memchr::memchr2(b'"', b'\\', bytes) {
                    None => {
                        self.take(bytes);
                        return;
                    }
                    Some(i) => {
                        self.take(&bytes[..i]);
                        if bytes[i] == b'\\' {
                            self.escaped = true;
                            self.take(b"\\");
                        } else {
                            self.in_string = false;
                            self.string_closed();
                        }
                        bytes = &bytes[i + 1..];
                    }
                }
                continue;
            }
            bytes = &bytes[1..];
            self.step(b);
        }
    }

    /// The skeleton: the kept members as a JSON object; empty for a line of whitespace (no message, as
    /// any blank line); `None` for a line that is not one object.
    pub fn finish(self) -> Option<String> {
        match self.at {
            At::Done => {}
            At::Start => return Some(String::new()),
            _ => return None,
        }
        let mut skeleton = b"{".to_vec();
        // The first member given twice is given twice here too, first: it decides.
        if let Some(which) = self.twice {
            skeleton.extend_from_slice(format!("\"{0}\":0,\"{0}\":0", ENVELOPE[which]).as_bytes());
            if !self.skeleton.is_empty() {
                skeleton.push(b',');
            }
        }
        skeleton.extend_from_slice(&self.skeleton);
        skeleton.push(b'}');
        String::from_utf8(skeleton).ok()
    }

    /// One byte outside any string.
    fn step(&mut self, b: u8) {
        self.at = match (self.at, b) {
            (At::Value { depth }, _) => self.in_value(depth, b),
            (at, _) if json_space(b) => at,
            (At::Start, b'{') => At::Name { first: true },
            (At::Name { .. }, b'"') => {
                self.in_string = true;
                self.name.clear();
                At::InName
            }
            (At::Name { first: true }, b'}') => At::Done,
            (At::Colon, b':') => {
                self.keeping = self.name_read();
                self.value.clear();
                self.spaced = false;
                At::Value { depth: 0 }
            }
            _ => At::Lost,
        };
    }

    /// One byte of a member's value, outside any string in it.
    fn in_value(&mut self, depth: u64, b: u8) -> At {
        match b {
            b',' | b'}' if depth == 0 => match (self.member_read(), b) {
                (false, _) => At::Lost,
                (true, b',') => At::Name { first: false },
                (true, _) => At::Done,
            },
            b']' if depth == 0 => At::Lost,
            // Around the value: not part of it, but kept as one space between two of its tokens, so
            // that `1 2` stays what it is.
            _ if depth == 0 && json_space(b) => {
                self.spaced = true;
                At::Value { depth }
            }
            _ => {
                if self.spaced && !self.value.is_empty() {
                    self.take(b" ");
                }
                self.spaced = false;
                self.take(&[b]);
                match b {
                    b'"' => {
                        self.in_string = true;
                        At::Value { depth }
                    }
                    b'{' | b'[' => At::Value { depth: depth + 1 },
                    b'}' | b']' => At::Value { depth: depth - 1 },
                    _ => At::Value { depth },
                }
            }
        }
    }

    /// A string's closing quote.
    fn string_closed(&mut self) {
        match self.at {
            At::InName => self.at = At::Colon,
            _ => self.take(b"\""),
        }
    }

    /// String bytes, or any byte of a value: kept where they are the name or a kept value, up to one
    /// byte past its bound (which then says it was longer).
    fn take(&mut self, bytes: &[u8]) {
        let (kept, bound) = match (self.at, self.keeping) {
            (At::InName, _) => (&mut self.name, MAX_NAME),
            (At::Value { .. }, Some((which, _))) if which != PARAMS => (&mut self.value, MAX_VALUE),
            _ => return,
        };
        let room = (bound + 1).saturating_sub(kept.len());
        kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// A member's name was read: which of the envelope's it is, if any (escapes read as a JSON reader
    /// reads them), and whether it comes for the first time.
    fn name_read(&mut self) -> Option<(usize, bool)> {
        if self.name.len() > MAX_NAME {
            return None;
        }
        let name: std::borrow::Cow<str> = if self.name.contains(&b'\\') {
            let mut quoted = Vec::with_capacity(self.name.len() + 2);
            quoted.push(b'"');
            quoted.extend_from_slice(&self.name);
            quoted.push(b'"');
            serde_json::from_slice::<String>(&quoted).ok()?.into()
        } else {
            std::str::from_utf8(&self.name).ok()?.into()
        };
        let which = ENVELOPE.iter().position(|n| *n == name)?;
        let first = !std::mem::replace(&mut self.seen[which], true);
        if !first {
            self.twice.get_or_insert(which);
        }
        Some((which, first))
    }

    /// A member's value ended: a kept one goes into the skeleton the first time. False where the line
    /// is lost.
    fn member_read(&mut self) -> bool {
        let Some((which, first)) = self.keeping.take() else {
            return true;
        };
        if which == PARAMS {
            return true;
        }
        // Nothing between the colon and what ends the value: no JSON. (An unkept value's emptiness is
        // not seen: the line is answered as if it had one.)
        if self.value.is_empty() {
            return false;
        }
        if !first {
            return true;
        }
        if !self.skeleton.is_empty() {
            self.skeleton.push(b',');
        }
        self.skeleton.push(b'"');
        self.skeleton.extend_from_slice(ENVELOPE[which].as_bytes());
        self.skeleton.extend_from_slice(b"\":");
        if self.value.len() > MAX_VALUE {
            // Too long to be an id this server takes; any value at all for the others, which only
            // decide whether there is an id to answer under.
            let placeholder: &[u8] = if ENVELOPE[which] == "id" {
                b"null"
            } else {
                b"0"
            };
            self.skeleton.extend_from_slice(placeholder);
        } else {
            self.skeleton.extend_from_slice(&self.value);
        }
        true
    }
}

/// JSON's whitespace (not the form feed `u8::is_ascii_whitespace` also takes).
fn json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sk(line: &str) -> Option<String> {
        skeleton(line.as_bytes())
    }

    #[test]
    fn the_kept_members_are_kept_wherever_they_are() {
        let pad = "x".repeat(10_000);
        assert_eq!(
            sk(&format!(
                r#"{{"params":{{"a":["{pad}",{{"id":1}}]}},"jsonrpc":"2.0","method":"tools/call","id":7}}"#
            ))
            .as_deref(),
            Some(r#"{"jsonrpc":"2.0","method":"tools/call","id":7}"#)
        );
        assert_eq!(
            sk(r#" { "id" : "a\"b" , "\u0069d" : [1, 2] , "x":null } "#).as_deref(),
            Some(r#"{"id":0,"id":0,"id":"a\"b"}"#)
        );
        // Whitespace around a value is none of it, however much of it there is.
        let spaces = " ".repeat(MAX_VALUE * 2);
        assert_eq!(
            sk(&format!(
                r#"{{"id":{spaces}7{spaces},"method":{spaces}"m"{spaces}}}"#
            ))
            .as_deref(),
            Some(r#"{"id":7,"method":"m"}"#)
        );
        // Names with every letter escaped.
        assert_eq!(
            sk(r#"{"\u006a\u0073\u006f\u006e\u0072\u0070\u0063":"2.0"}"#).as_deref(),
            Some(r#"{"jsonrpc":"2.0"}"#)
        );
        assert_eq!(sk("{}").as_deref(), Some("{}"));
    }

    #[test]
    fn fed_in_pieces_it_reads_the_same() {
        let line = br#"{"method":"ping","params":{"s":"a\\\"}{["},"id":"k\"1"}"#;
        let whole = skeleton(line);
        assert_eq!(whole.as_deref(), Some(r#"{"method":"ping","id":"k\"1"}"#));
        for cut in 1..line.len() {
            let mut skim = Skim::default();
            skim.feed(&line[..cut]);
            skim.feed(&line[cut..]);
            assert_eq!(skim.finish(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_long_kept_value_becomes_a_placeholder() {
        let long = "i".repeat(MAX_VALUE + 1);
        assert_eq!(
            sk(&format!(r#"{{"id":"{long}","method":"{long}"}}"#)).as_deref(),
            Some(r#"{"id":null,"method":0}"#)
        );
        let fits = format!("\"{}\"", "i".repeat(MAX_VALUE - 2));
        assert_eq!(
            sk(&format!(r#"{{"id":{fits}}}"#)),
            Some(format!(r#"{{"id":{fits}}}"#))
        );
        assert_eq!(
            sk(&format!(r#"{{"id":{fits}9}}"#)).as_deref(),
            Some(r#"{"id":null}"#)
        );
        // Kept as written, for `jsonrpc` to judge: this is no JSON.
        assert_eq!(sk(r#"{"id":1 2}"#).as_deref(), Some(r#"{"id":1 2}"#));
        assert_eq!(sk(r#"{"id":[1, 2]}"#).as_deref(), Some(r#"{"id":[1, 2]}"#));
    }

    #[test]
    fn what_is_not_one_object_has_no_skeleton() {
        for line in [
            "[1]",
            r#"{"id":1"#,
            r#"{"id":1,}"#,
            r#"{"id":}"#,
            r#"{"id" 1}"#,
            r#"{"id":1]"#,
            r#"{"id":1} x"#,
            r#"{"id":1}{"#,
            r#"{"a":"unclosed}"#,
        ] {
            assert_eq!(sk(line), None, "{line}");
        }
    }

    #[test]
    fn the_first_member_of_the_envelope_given_twice_is_given_twice_first() {
        assert_eq!(
            sk(r#"{"x":1,"x":2,"id":1,"params":{},"id":2,"params":[]}"#).as_deref(),
            Some(r#"{"id":0,"id":0,"id":1}"#)
        );
        assert_eq!(
            sk(r#"{"params":1,"id":1,"params":2,"id":2}"#).as_deref(),
            Some(r#"{"params":0,"params":0,"id":1}"#)
        );
        let many: Vec<&str> = (0..300).map(|_| r#""jsonrpc":"2.0""#).collect();
        assert_eq!(
            sk(&format!(r#"{{{},"id":7,"method":"ping"}}"#, many.join(","))).as_deref(),
            Some(r#"{"jsonrpc":0,"jsonrpc":0,"jsonrpc":"2.0","id":7,"method":"ping"}"#)
        );
        // A line of whitespace is no message.
        assert_eq!(sk(" \r\t ").as_deref(), Some(""));
    }
}
