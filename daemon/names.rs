//! The one naming rule, shared by tools and seats: a letter, then letters, digits and hyphens, up to 32.
//!
//! No underscore: a permission rule for one tool is spelled `mcp__<server>__<tool>`, and a name holding
//! `__` would make a rule that named a different tool than the one meant.
//!
//! Beside it, how names are shown and compared: control characters escaped, the edit distance the
//! near-miss hints use (a misspelt key in openovai.json, a misspelt export), a word quoted for a shell,
//! a count with thousands separators, and whether a host name or address is this machine's own.

/// The sentence that states the rule, as runtime.log and the CLI say it.
pub const RULE: &str = "a name is a letter, then letters, digits and hyphens, up to 32 of them";

/// The longest name the rule allows.
pub const MAX_LEN: usize = 32;

/// Why a name breaks the rule, most useful reason first; `None` when it is a good name.
pub fn why_not(name: &str) -> Option<String> {
    let first = name.chars().next();
    match first {
        None => return Some("it is empty".into()),
        Some(c) if !c.is_ascii_alphabetic() => {
            return Some(format!(
                "it starts with {}, not a letter a-z or A-Z",
                show_char(c)
            ));
        }
        _ => {}
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
    {
        let what = if c == '_' {
            "an underscore".to_string()
        } else {
            show_char(c)
        };
        return Some(format!(
            "it holds {what}, which is not a letter a-z or A-Z, a digit or a hyphen"
        ));
    }
    if name.len() > MAX_LEN {
        return Some(format!(
            "it is {} characters long, more than {MAX_LEN}",
            name.len()
        ));
    }
    None
}

/// The host part of `host[:port]` (`[::1]:7777` → `[::1]`).
pub fn host_name(authority: &str) -> &str {
    match authority.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => authority,
    }
}

/// Whether a host name is this machine's loopback, as a URL or a Host header writes it.
pub fn is_loopback_name(name: &str) -> bool {
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

/// A request line that names a host (`GET http://name/path`) is for that host, whatever the Host header
/// says (RFC 9112): true when it names one other than `host`.
pub fn line_names_another_host(line: Option<&str>, host: &str) -> bool {
    line.is_some_and(|named| !named.eq_ignore_ascii_case(host))
}

/// Whether a Host header's authority names this machine's loopback: `localhost`, or any loopback
/// address (`127.0.0.2`, `[::1]`), with or without a port. What a page a DNS-rebinding site loads in the
/// browser names is its own host instead.
pub fn is_loopback_authority(authority: &str) -> bool {
    let authority = authority.to_ascii_lowercase();
    let name = host_name(&authority);
    is_loopback_name(name)
        || name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What someone typed or sent, to be said back: its first `max` characters, "…" where it was cut, its
/// controls written out (one line, nothing a terminal acts on).
pub fn clipped(text: &str, max: usize) -> String {
    let mut shown: String = text.chars().take(max).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    escape_controls(&shown, false).into_owned()
}

/// `s` with its control characters shown escaped (`\r`, `\u{1b}`), so that what a person reads in a
/// terminal or a log cannot be rewritten by it: a file name, a description, a room message. Newlines stay
/// when `keep_newlines` (the caller sets the lines off itself); tabs always stay.
pub fn escape_controls(s: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    let needs =
        |c: char| (c.is_control() || unseen(c)) && c != '\t' && !(keep_newlines && c == '\n');
    // Most text is printable ASCII, told by its bytes alone: what needs escaping is an ASCII control
    // character or a character of more than one byte. (`index` shows every tool's first line with this on
    // each call, and the walk over chars cost it a quarter of its work.)
    let plain_byte = |b: &u8| matches!(b, b' '..=b'~' | b'\t') || (keep_newlines && *b == b'\n');
    if s.as_bytes().iter().all(plain_byte) || !s.chars().any(needs) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    let mut before = None;
    while let Some(c) = chars.next() {
        // The zero-width joiner between two pictographs is part of one emoji (👩‍💻), and shown.
        let in_emoji = c == '\u{200d}'
            && before.is_some_and(pictograph)
            && chars.peek().copied().is_some_and(pictograph);
        if needs(c) && !in_emoji {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        before = Some(c);
    }
    std::borrow::Cow::Owned(out)
}

/// A character an emoji's joiner may join: a pictograph, a skin tone, or the selector that makes one
/// show as an emoji.
fn pictograph(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF | 0x2300..=0x23FF | 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0xFE0F)
}

/// JSON text with every control and unseen character written as a `\u` escape: the same JSON once read,
/// and nothing in it a terminal acts on (C1 controls, bidirectional overrides). serde_json escapes only
/// U+0000 to U+001F; the newlines left are pretty-printing's, outside any string.
pub fn json_for_terminal(json: String) -> String {
    if json.bytes().all(|b| matches!(b, b' '..=b'~' | b'\n')) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if (c.is_control() && c != '\n') || unseen(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Beside the control characters, what a reader does not see but a model reads, or a renderer takes
/// for something else: a line break (U+2028, U+2029), every format character (general category Cf:
/// bidirectional overrides, zero-width characters, the BOM, the soft hyphen, the invisible operators,
/// the tag characters U+E0000 to U+E007F), and the fillers and joiners that show as nothing.
pub fn unseen(c: char) -> bool {
    matches!(c as u32,
        0x2028 | 0x2029
        // Cf, as Unicode 16 has it.
        | 0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0000..=0xE007F
        // Shown as nothing though not Cf: the combining grapheme joiner, the Hangul fillers, the
        // supplementary variation selectors (which carry bytes past any reader).
        | 0x034F | 0x115F | 0x1160 | 0x3164 | 0xFFA0 | 0xE0100..=0xE01EF)
}

/// A path as a shell reads it back: as it is when it holds nothing a shell treats specially, else in
/// single quotes. Advice such as `rm plugins/x;y.mjs` must not run `y.mjs` when pasted.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+@%:,=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// 2048 as "2,048": how a count is written for people.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count and its noun as people write them: "1 session", "3 sessions" (`many` for any other count).
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// How a name reads to a person: in lower case, with the letters and digits that look alike in many
/// fonts taken as one (l, I and 1; O and 0). Two names that read the same are one name to whoever reads
/// them.
pub fn look(name: &str) -> String {
    name.chars()
        .map(|c| match c.to_ascii_lowercase() {
            'i' | '1' => 'l',
            '0' => 'o',
            c => c,
        })
        .collect()
}

pub fn is_valid(name: &str) -> bool {
    why_not(name).is_none()
}

fn show_char(c: char) -> String {
    if c.is_ascii_digit() {
        format!("the digit {c}")
    } else if c == ' ' {
        "a space".into()
    } else if c.is_control() {
        format!("the control character {}", c.escape_default())
    } else {
        format!("\"{c}\"")
    }
}

/// Edit distance (Levenshtein) between two short strings.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// "a", "a or b", "a, b or c" (with `word` "or").
pub fn listed(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {word} {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_for_a_terminal_reads_back_the_same_and_holds_no_control() {
        let doc = serde_json::json!({ "a": "x\u{9b}2J\u{202e}y\u{e0001}é\u{7f}", "b": [1, "ok"] });
        let text = json_for_terminal(serde_json::to_string_pretty(&doc).unwrap());
        assert!(
            text.contains(r"x\u009b2J\u202ey\udb40\udc01é\u007f"),
            "{text}"
        );
        assert!(
            !text
                .chars()
                .any(|c| (c.is_control() && c != '\n') || unseen(c))
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            doc
        );
    }

    #[test]
    fn a_path_is_quoted_where_a_shell_would_read_it_otherwise() {
        assert_eq!(shell_quote("plugins/pipe.mjs"), "plugins/pipe.mjs");
        assert_eq!(shell_quote("plugins/x;y.mjs"), "'plugins/x;y.mjs'");
        assert_eq!(
            shell_quote("plugins/old tool.mjs"),
            "'plugins/old tool.mjs'"
        );
        assert_eq!(shell_quote("plugins/it's.mjs"), r"'plugins/it'\''s.mjs'");
        assert_eq!(shell_quote("plugins/$(id).mjs"), "'plugins/$(id).mjs'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn good_names() {
        for n in ["a", "ci-status", "A1-b2", &"x".repeat(32)] {
            assert!(is_valid(n), "{n} should be valid");
        }
    }

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(
            escape_controls("a\u{1b}[31mb\rc\nd\te", false),
            "a\\u{1b}[31mb\\rc\\nd\te"
        );
        assert_eq!(escape_controls("a\nb", true), "a\nb");
        assert!(matches!(
            escape_controls("plain", false),
            std::borrow::Cow::Borrowed(_)
        ));
        // The joiner inside an emoji is part of it (helper-94: 👩‍💻 showed as 👩\u{200d}💻); anywhere
        // else it is a character nobody sees.
        assert_eq!(
            escape_controls("ok 👩\u{200d}💻 🏳\u{fe0f}\u{200d}🌈", false),
            "ok 👩\u{200d}💻 🏳\u{fe0f}\u{200d}🌈"
        );
        assert_eq!(
            escape_controls("a\u{200d}b 👩\u{200d} x", false),
            "a\\u{200d}b 👩\\u{200d} x"
        );
    }

    #[test]
    fn every_ascii_character_is_escaped_exactly_when_the_walk_over_chars_would() {
        for b in 0u8..=127 {
            let c = char::from(b);
            for keep in [false, true] {
                let text = format!("a{c}b");
                let escaped = escape_controls(&text, keep);
                let by_chars: String = text
                    .chars()
                    .flat_map(|c| {
                        let shown = c.is_control() && c != '\t' && !(keep && c == '\n');
                        if shown {
                            c.escape_default().collect::<Vec<_>>()
                        } else {
                            vec![c]
                        }
                    })
                    .collect();
                assert_eq!(escaped, by_chars, "byte {b}, newlines kept: {keep}");
            }
        }
        // Past ASCII the walk decides: a C1 control, a line separator, a bidirectional override.
        assert_eq!(
            escape_controls("x\u{85}y\u{2028}z\u{202e}é", false),
            "x\\u{85}y\\u{2028}z\\u{202e}é"
        );
        // Every format character and the tags: a word joiner, an Arabic letter mark, a soft hyphen, a
        // tag letter, an interlinear annotation.
        for c in [
            '\u{2060}',
            '\u{2064}',
            '\u{61c}',
            '\u{180e}',
            '\u{ad}',
            '\u{34f}',
            '\u{fff9}',
            '\u{206a}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{e0100}',
        ] {
            let text = format!("a{c}b");
            let shown = escape_controls(&text, false);
            assert_eq!(shown, format!("a{}b", c.escape_default()), "{:x}", c as u32);
        }
        assert_eq!(escape_controls("ünï 😀 日本", false), "ünï 😀 日本");
    }

    #[test]
    fn bad_names_say_why() {
        assert_eq!(why_not(""), Some("it is empty".into()));
        assert!(why_not("1abc").unwrap().contains("the digit 1"));
        assert!(why_not("-abc").unwrap().contains("\"-\""));
        assert!(why_not("ci_status").unwrap().contains("an underscore"));
        assert!(why_not("ci status").unwrap().contains("a space"));
        assert!(why_not(&"x".repeat(33)).unwrap().contains("33 characters"));
        assert!(why_not("café").unwrap().contains("\"é\""));
    }
}
