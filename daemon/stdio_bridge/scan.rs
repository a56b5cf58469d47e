//! The plain `tools/call` lines a session sends most, read in one pass over their bytes.
//!
//! The bridge notes every request's id, and for a plain call (the daemon's fast path) serde_json's parse
//! of the line was most of the bridge's own work: sixteen bridges, each woken for a few lines at a time
//! with its caches cold, spent about 5 % of all the CPU sixteen sessions took on it. This reads the lines
//! whose every part is of the plainest kind (no `\u` escape, no number with an exponent, not deeply
//! nested); anything else, valid or not, is left to serde's parse, which decides as before. So it only
//! ever says what that parse would say.

use crate::server::transport::MAX_ID_BYTES;

/// The id of a plain `tools/call` line, as its text stands in the line (and in the daemon's answer), when
/// the line is of the plainest kind; `None` sends it to the full parse.
pub(super) fn plain_call_key(line: &str) -> Option<&str> {
    let mut s = Scan {
        b: line.as_bytes(),
        at: 0,
    };
    // Each field as read (`None` until it is): a field twice is an error to serde.
    let (mut jsonrpc, mut id, mut method, mut params) = (None, None, None, None);
    s.object(|s, key| {
        let twice = match key {
            b"jsonrpc" => jsonrpc.replace(s.string()? == b"2.0").is_some(),
            b"method" => method.replace(s.string()? == b"tools/call").is_some(),
            b"id" => id.replace(s.id()?).is_some(),
            b"params" => params.replace(s.params()?).is_some(),
            _ => return None,
        };
        (!twice).then_some(())
    })?;
    s.blank();
    let (from, to) = id?;
    let whole = s.at == s.b.len() && jsonrpc? && method? && params?;
    whole.then(|| &line[from..to])
}

/// An integer id as rmcp writes it back in its answer: an i64's own digits.
pub(super) fn integer_as_written_back(id: &str) -> bool {
    id.parse::<i64>().is_ok_and(|n| n.to_string() == id)
}

/// Deeper than this is left to serde (whose limit is 128).
const DEPTH: u32 = 64;
/// A number longer than this is left to serde: a shorter one without an exponent is within f64's range.
const NUMBER: usize = 64;

struct Scan<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn blank(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after blanks, taken if it is `c`.
    fn take(&mut self, c: u8) -> bool {
        self.blank();
        let is = self.b.get(self.at) == Some(&c);
        self.at += usize::from(is);
        is
    }

    /// An object, each of its keys handed to `field`, which reads the value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        if !self.take(b'{') {
            return None;
        }
        if self.take(b'}') {
            return Some(());
        }
        loop {
            let key = self.string()?;
            if !self.take(b':') {
                return None;
            }
            field(self, key)?;
            if self.take(b'}') {
                return Some(());
            }
            if !self.take(b',') {
                return None;
            }
        }
    }

    /// A string's contents, when it has no `\u` escape (serde checks those for halves of pairs) and no
    /// control character (an error to serde).
    fn string(&mut self) -> Option<&'a [u8]> {
        if !self.take(b'"') {
            return None;
        }
        let from = self.at;
        loop {
            match *self.b.get(self.at)? {
                b'"' => break,
                b'\\' => match self.b.get(self.at + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                    _ => return None,
                },
                0..0x20 => return None,
                _ => {}
            }
            self.at += 1;
        }
        self.at += 1;
        Some(&self.b[from..self.at - 1])
    }

    /// A number without an exponent, as JSON writes one.
    fn number(&mut self) -> Option<&'a [u8]> {
        self.blank();
        let from = self.at;
        let digits = |s: &mut Self| {
            let start = s.at;
            while s.b.get(s.at).is_some_and(u8::is_ascii_digit) {
                s.at += 1;
            }
            s.at - start
        };
        self.at += usize::from(self.b.get(self.at) == Some(&b'-'));
        let leading_zero = self.b.get(self.at) == Some(&b'0');
        match digits(self) {
            0 => return None,
            n if n > 1 && leading_zero => return None,
            _ => {}
        }
        if self.b.get(self.at) == Some(&b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return None;
            }
        }
        let number = &self.b[from..self.at];
        let exponent = matches!(self.b.get(self.at), Some(b'e' | b'E'));
        (!exponent && number.len() <= NUMBER).then_some(number)
    }

    /// Any value, nested no deeper than `DEPTH` in all.
    fn value(&mut self, depth: u32) -> Option<()> {
        if depth > DEPTH {
            return None;
        }
        self.blank();
        match *self.b.get(self.at)? {
            b'{' => self.object(|s, _| s.value(depth + 1)),
            b'[' => {
                self.at += 1;
                if self.take(b']') {
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    if self.take(b']') {
                        return Some(());
                    }
                    if !self.take(b',') {
                        return None;
                    }
                }
            }
            b'"' => self.string().map(drop),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => self.number().map(drop),
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        let is = self.b[self.at..].starts_with(w);
        self.at += if is { w.len() } else { 0 };
        is.then_some(())
    }

    /// An id the daemon answers under as it stands: a string without escapes, or an integer as i64
    /// writes it. Its place in the line.
    fn id(&mut self) -> Option<(usize, usize)> {
        self.blank();
        let from = self.at;
        if self.b.get(from) == Some(&b'"') {
            let text = self.string()?;
            return (text.len() <= MAX_ID_BYTES && !text.contains(&b'\\'))
                .then_some((from, self.at));
        }
        let digits = std::str::from_utf8(self.number()?).ok()?;
        integer_as_written_back(digits).then_some((from, self.at))
    }

    /// `params` with a `name` (any value) and maybe `arguments` (any value), and nothing else.
    fn params(&mut self) -> Option<bool> {
        let (mut name, mut arguments) = (false, false);
        self.object(|s, key| {
            let twice = match key {
                b"name" => std::mem::replace(&mut name, true),
                b"arguments" => std::mem::replace(&mut arguments, true),
                _ => return None,
            };
            s.value(2)?;
            (!twice).then_some(())
        })?;
        Some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::plain_call_key;
    use crate::stdio_bridge::PlainCall;

    /// Plain calls as clients write them: the bench's template, fields in another order, blanks, string
    /// ids, arguments of every kind of value.
    const PLAIN: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"p0000","arguments":{}}}"#,
        r#"{"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}},"jsonrpc":"2.0","id":12}"#,
        " { \"jsonrpc\" : \"2.0\" ,\t\"id\" : \"a-b c\" , \"method\" : \"tools/call\" , \"params\" : { \"name\" : \"x\" } }\r\n",
        r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"tools/call","params":{"name":"x","arguments":null}}"#,
        r#"{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"arguments":{"a":[1,-2.5,0,0.125,true,false,null,[],{}],"b":{"c":{"d":"é😀 \" \\ \/ \b\f\n\r\t"}}},"name":1}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{"a":1,"a":2,"n":123456789012345678901234567890}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":1,"arguments":[]}}"#,
    ];

    #[test]
    fn plain_calls_are_read_in_one_pass_as_serde_reads_them() {
        for line in PLAIN {
            let key = plain_call_key(line).unwrap_or_else(|| panic!("read in one pass: {line}"));
            assert_eq!(
                Some(key.to_string()),
                PlainCall::read(line).map(|c| c.key),
                "{line}"
            );
        }
    }

    #[test]
    fn anything_else_is_left_to_serde() {
        for line in [
            // Not a plain call, or not one the daemon's fast path takes.
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":7,"id":8,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","name":"y"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["x",{}]}"#,
            r#"["2.0",7,"tools/call",{"name":"x"}]"#,
            // Ids answered other than as they stand.
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            // What serde checks itself: escapes of halves of pairs, exponents, control characters.
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"\ud800"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"a":1e400}}}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"a\tb\"}}",
            // Not JSON.
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x",}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}} x"#,
            r#"{"jsonrpc":"2.0","id":07,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":-}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":1.}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":tru}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}"#,
        ] {
            assert_eq!(plain_call_key(line), None, "{line}");
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"x","arguments":{}1{}}}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        assert_eq!(plain_call_key(&deep), None);
    }

    /// Every line one edit away from a plain call: whatever the one pass reads, serde reads the same.
    #[test]
    fn one_edit_away_the_one_pass_never_disagrees_with_serde() {
        let bytes: &[&str] = &[
            "\"", "\\", "{", "}", "[", "]", ",", ":", "0", "1", "-", ".", "e", " ", "a", "\u{1}",
            "é", "n", "u", "t", "/",
        ];
        let mut taken = 0;
        for base in PLAIN {
            let chars: Vec<(usize, char)> = base.char_indices().collect();
            let mut lines = Vec::new();
            for &(at, c) in &chars {
                let (before, after) = (&base[..at], &base[at + c.len_utf8()..]);
                lines.push(format!("{before}{after}"));
                lines.push(format!("{before}{c}{c}{after}"));
                for b in bytes {
                    lines.push(format!("{before}{b}{after}"));
                    lines.push(format!("{before}{b}{c}{after}"));
                }
            }
            for line in &lines {
                if let Some(key) = plain_call_key(line) {
                    taken += 1;
                    assert_eq!(
                        Some(key.to_string()),
                        PlainCall::read(line).map(|c| c.key),
                        "{line}"
                    );
                }
            }
        }
        // The edits that leave a plain call (a blank added, a digit changed) are read in one pass too.
        assert!(taken > 1000, "{taken}");
    }
}
