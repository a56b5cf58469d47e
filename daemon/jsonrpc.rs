//! What JSON-RPC 2.0 makes of one line, by the daemon's rules, in the one place both ends of the socket
//! read them: the daemon (`server`) answers a line that `read` finds a request under that request's id,
//! exactly once, whatever its params hold; the bridge (`stdio_bridge`) waits for an answer under that id
//! for exactly those lines. A line that is no message is answered at once, with `id: null` where no id
//! can be read, and a notification is never answered.
//!
//! The rules, in order: UTF-8 and the line's length are the codec's (`lines`); half a surrogate pair is
//! taken as U+FFFD (`mended`); the line must be JSON, and an object; a member given twice (`id`,
//! `method`, …) is refused; `jsonrpc` is "2.0"; an id is a string of at most 1,024 bytes or an integer
//! rmcp reads as one (`2.0` is 2; past 64-bit signed integers, or with a fraction, it is refused);
//! `method` is a string.

use std::borrow::Cow;

use rmcp::model::NumberOrString;
use serde::Deserializer;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// The generic server error, for what the transport refuses: the SDKs name -32001 RequestTimeout.
pub const SERVER_ERROR: i64 = -32000;

/// The longest line a session may send: generous for arguments, bounded for the daemon (each connection
/// may hold one partial line this long).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// The longest string id (and progress token) a request may carry, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// What a line is.
pub enum Read<'a> {
    /// Answered under its id, once.
    Request(Request<'a>),
    /// Never answered.
    Notification(Notification<'a>),
    /// An answer to a request (the client answering the server, which asks nothing; or, read by the
    /// bridge, the daemon answering the client), under its id when that can be read.
    Response(Option<NumberOrString>),
    /// No message: this answer (none when what could be read of it is a notification), under this id
    /// when it has one this server takes.
    Bad(Option<Vec<u8>>, Option<NumberOrString>),
}

pub struct Request<'a> {
    pub id: NumberOrString,
    pub method: Cow<'a, str>,
    pub params: Option<&'a RawValue>,
}

impl Request<'_> {
    /// The id as the answer writes it, for matching the two.
    pub fn key(&self) -> String {
        key_of(&self.id)
    }
}

/// The request a `notifications/cancelled`'s params name, as rmcp reads them.
pub fn cancelled_request(params: Option<&RawValue>) -> Option<NumberOrString> {
    let found = members(params?.get(), ["requestId"]).ok()?;
    serde_json::from_str(found.values[0]?.get()).ok()
}

/// An id as an answer writes it (an integer's digits, a string as JSON writes it).
pub fn key_of(id: &NumberOrString) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

pub struct Notification<'a> {
    pub method: Cow<'a, str>,
    pub params: Option<&'a RawValue>,
}

/// The line with each half of a surrogate pair written as an escape (`\ud83d` alone) replaced by U+FFFD,
/// as a well-formed string has it: what a client that cut a string mid-emoji sends is read, not refused.
pub fn mended(line: &str) -> Cow<'_, str> {
    if !line.contains("\\u") {
        return Cow::Borrowed(line);
    }
    let b = line.as_bytes();
    let escape_at = |at: usize| -> Option<u16> {
        let hex = line.get(at + 2..at + 6)?;
        (b.get(at) == Some(&b'\\') && b.get(at + 1) == Some(&b'u')).then_some(())?;
        u16::from_str_radix(hex, 16).ok()
    };
    let mut out = String::new();
    let (mut i, mut last) = (0, 0);
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        match escape_at(i) {
            Some(0xD800..=0xDBFF)
                if escape_at(i + 6).is_some_and(|lo| (0xDC00..=0xDFFF).contains(&lo)) =>
            {
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.push_str(&line[last..i]);
                out.push_str("\\ufffd");
                i += 6;
                last = i;
            }
            // Any other escape (a `\\` among them) is passed whole, so an escaped backslash is not read
            // as the start of another escape.
            Some(_) => i += 6,
            None => i += 2,
        }
    }
    if last == 0 {
        return Cow::Borrowed(line);
    }
    out.push_str(&line[last..]);
    Cow::Owned(out)
}

/// Reads one message (a `line` on the socket, a `body` over HTTP: `unit` says which, for the words of
/// an answer), already `mended`.
pub fn read<'a>(text: &'a str, unit: &str) -> Read<'a> {
    read_within(text, unit, None::<Leaf>).0
}

/// `read`, with the params read by `params` in the same pass rather than as written (`params` of the
/// message is then `None`): a call's, whose `_meta` is most of a line.
pub fn read_within<'a, S: Visitor<'a> + Copy>(
    text: &'a str,
    unit: &str,
    params: Option<S>,
) -> (Read<'a>, Inner<S::Value>) {
    let envelope = Within {
        names: &crate::skim::ENVELOPE,
        inner: params.map(|within| (3, within)),
    };
    match object(text, envelope) {
        Ok((found, params)) => (judged(found), params),
        Err(Members::NotJson(why)) => (
            Read::Bad(
                Some(error(
                    &Value::Null,
                    PARSE_ERROR,
                    &if text.starts_with('\u{feff}') {
                        // Invisible where the client's author looks.
                        format!(
                            "Parse error: the {unit} begins with a byte order mark (U+FEFF), which JSON does \
                             not take: send UTF-8 without it"
                        )
                    } else {
                        not_json(&why, unit)
                    },
                )),
                None,
            ),
            Inner::None,
        ),
        Err(Members::NotAnObject(kind)) => (
            Read::Bad(
                Some(error(
                    &Value::Null,
                    INVALID_REQUEST,
                    &format!(
                        "Invalid request: a JSON-RPC message is an object, and this {unit} is {kind}{}",
                        if kind == "an array" {
                            format!(
                                ": send one message a {unit} (this server takes no batches, which MCP \
                                 dropped in 2025-06-18)"
                            )
                        } else {
                            String::new()
                        }
                    ),
                )),
                None,
            ),
            Inner::None,
        ),
    }
}

/// How a line over the cap is answered, judged from its skeleton (`skim`) by the rules of every other
/// line: under the id of a request (or of one refused for another reason, where this server takes it);
/// with the id echoed as written (`null` when it has none, or is no JSON object) where it cannot be
/// taken; not at all when it is a notification, a response or blank.
pub enum Overlong {
    Under(NumberOrString),
    Echoed(String),
    Unanswered,
}

pub fn overlong(skeleton: Option<&str>) -> Overlong {
    let Some(skeleton) = skeleton else {
        return Overlong::Echoed("null".into());
    };
    if skeleton.is_empty() {
        return Overlong::Unanswered;
    }
    match read(&mended(skeleton), "line") {
        Read::Request(r) => Overlong::Under(r.id),
        Read::Bad(_, Some(id)) => Overlong::Under(id),
        Read::Bad(Some(answer), None) => {
            #[derive(serde::Deserialize)]
            struct Answered<'a> {
                #[serde(borrow)]
                id: &'a RawValue,
            }
            let raw = serde_json::from_slice::<Answered>(&answer).map(|a| a.id.get().to_string());
            Overlong::Echoed(raw.unwrap_or_else(|_| "null".into()))
        }
        Read::Bad(None, None) | Read::Notification(_) | Read::Response(_) => Overlong::Unanswered,
    }
}

/// The answer to a line over the cap (none for a notification or a response), as the daemon and
/// `ovai mcp` both give it.
pub fn overlong_answer(skeleton: Option<&str>) -> Option<Vec<u8>> {
    let words = format!(
        "Invalid request: a line longer than {} MiB was skipped; send less in one request",
        MAX_LINE >> 20
    );
    skipped_answer(skeleton, &words)
}

/// The answer to a line skipped as it came, under the id its skeleton names, saying `words`; none for
/// a notification or a response.
pub fn skipped_answer(skeleton: Option<&str>, words: &str) -> Option<Vec<u8>> {
    match overlong(skeleton) {
        Overlong::Under(id) => Some(error_under(&id, INVALID_REQUEST, words)),
        Overlong::Echoed(raw) => Some(error_raw_id(&raw, INVALID_REQUEST, words)),
        Overlong::Unanswered => None,
    }
}

/// What a message whose members were read is, by the rules above.
fn judged(found: Found<'_, 6>) -> Read<'_> {
    let [jsonrpc, id, method, params, result, fault] = found.values;
    let id = id.map(|raw| (raw, read_id(raw)));
    let has_method = method.is_some();
    if let Some(key) = found.twice {
        let message = format!(
            "Invalid request: the message gives \"{}\" more than once; a JSON-RPC message gives each of its \
             members once",
            clip(&key)
        );
        // Which of two ids would be the one answered cannot be said: neither is.
        if key == "id" {
            return Read::Bad(Some(error(&Value::Null, INVALID_REQUEST, &message)), None);
        }
        return reply(&id, has_method, INVALID_REQUEST, &message);
    }
    if id.is_none() && !has_method {
        return Read::Bad(
            Some(error(
                &Value::Null,
                INVALID_REQUEST,
                "Invalid request: it has neither a \"method\" nor an \"id\"",
            )),
            None,
        );
    }
    if jsonrpc.is_none_or(|v| v.get() != "\"2.0\"" && as_string(v).as_deref() != Some("2.0")) {
        return reply(
            &id,
            has_method,
            INVALID_REQUEST,
            "Invalid request: \"jsonrpc\" must be \"2.0\"",
        );
    }
    let id = match id {
        None => None,
        Some((_, Ok(id))) => Some(id),
        Some((raw, Err(why))) => {
            // Echoed as written: a number past 64 bits, read, would come back as another (1e+20); a
            // string past the bound is not sent back.
            let echoed = match why {
                IdProblem::TooLong(_) => "null",
                _ => echoable(raw),
            };
            return Read::Bad(
                Some(error_raw_id(
                    echoed,
                    INVALID_REQUEST,
                    &why.words(&clip(raw.get())),
                )),
                None,
            );
        }
    };
    let answer = |message: &str| match &id {
        Some(id) => Read::Bad(
            Some(error_under(id, INVALID_REQUEST, message)),
            Some(id.clone()),
        ),
        None => Read::Bad(None, None),
    };
    let method = match method {
        Some(m) => match as_string(m) {
            Some(m) => m,
            None => {
                let what =
                    crate::instance::json_kind(&serde_json::from_str(m.get()).unwrap_or_default());
                return answer(&format!(
                    "Invalid request: \"method\" is {what}, not a string"
                ));
            }
        },
        None if result.is_some() || fault.is_some() => return Read::Response(id),
        None => return answer("Invalid request: it has no \"method\""),
    };
    if result.is_some() || fault.is_some() {
        let other = if result.is_some() { "result" } else { "error" };
        return answer(&format!(
            "Invalid request: the message has a \"method\" and a \"{other}\"; a request or a notification \
             has no result or error, and an answer no method"
        ));
    }
    match id {
        Some(id) => Read::Request(Request { id, method, params }),
        None => Read::Notification(Notification { method, params }),
    }
}

/// An answer under the id, where one can be read (as written, where it is not one this server takes); a
/// message with none is a notification if it has a method, and gets no answer.
fn reply<'a>(
    id: &Option<(&RawValue, Result<NumberOrString, IdProblem>)>,
    has_method: bool,
    code: i64,
    message: &str,
) -> Read<'a> {
    match id {
        Some((_, Ok(id))) => Read::Bad(Some(error_under(id, code, message)), Some(id.clone())),
        Some((raw, Err(_))) => Read::Bad(Some(error_raw_id(echoable(raw), code, message)), None),
        None if has_method => Read::Bad(None, None),
        None => Read::Bad(Some(error(&Value::Null, code, message)), None),
    }
}

/// An id this server does not take, as its answer echoes it: as written, unless no JSON reader would
/// take it back (`1e400`, past any float) or it is longer than an id may be (an object of megabytes),
/// which is `null`.
fn echoable(raw: &RawValue) -> &str {
    if raw.get().len() <= MAX_ID_BYTES && serde_json::from_str::<Value>(raw.get()).is_ok() {
        raw.get()
    } else {
        "null"
    }
}

/// Why an id cannot be taken.
enum IdProblem {
    TooLong(usize),
    PastI64,
    /// An integer in float form at or past 2^53 (`1e18`): no float holds every such integer exactly.
    FloatPast53,
    NotAnId,
}

impl IdProblem {
    fn words(&self, raw: &str) -> String {
        match self {
            IdProblem::TooLong(n) => {
                format!("Invalid request: an id of {n} bytes; ids are at most {MAX_ID_BYTES} bytes")
            }
            IdProblem::PastI64 => format!(
                "Invalid request: the id {raw} is outside the 64-bit signed integers this server takes; send it as a string"
            ),
            IdProblem::FloatPast53 => format!(
                "Invalid request: the id {raw} is an integer written in float form, at or past 2^53, which \
                 a float does not hold exactly; send it as an integer (without a fraction or exponent) or as \
                 a string"
            ),
            IdProblem::NotAnId => {
                format!("Invalid request: the id {raw} is not a string or an integer")
            }
        }
    }
}

/// An id as rmcp reads it (an integer in float form below 2^53, `2.0` or `1e2`, is that integer).
fn read_id(raw: &RawValue) -> Result<NumberOrString, IdProblem> {
    match serde_json::from_str::<NumberOrString>(raw.get()) {
        Ok(NumberOrString::String(s)) if s.len() > MAX_ID_BYTES => Err(IdProblem::TooLong(s.len())),
        Ok(id) => Ok(id),
        Err(_) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(Value::Number(n)) if n.is_u64() => Err(IdProblem::PastI64),
            Ok(Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                Err(if n.as_f64().is_some_and(|f| f.abs() < 2f64.powi(63)) {
                    IdProblem::FloatPast53
                } else {
                    IdProblem::PastI64
                })
            }
            _ => Err(IdProblem::NotAnId),
        },
    }
}

/// A JSON string's text, borrowed from the line unless it has escapes; `None` for any other value.
pub fn as_string(raw: &RawValue) -> Option<Cow<'_, str>> {
    if !raw.get().starts_with('"') {
        return None;
    }
    serde::de::DeserializeSeed::deserialize(Key, &mut serde_json::Deserializer::from_str(raw.get()))
        .ok()
}

/// What `members` found: each named member's value as written, and the first member given twice.
pub struct Found<'a, const N: usize> {
    pub values: [Option<&'a RawValue>; N],
    pub twice: Option<Cow<'a, str>>,
}

/// Why `members` found none.
pub enum Members {
    /// Not JSON: serde's words.
    NotJson(String),
    /// JSON, but not an object: what it is ("an array").
    NotAnObject(&'static str),
}

/// The members `names` of the JSON object `text`, each as it is written, in one pass over the text that
/// reads every other member only as far as to pass it (JSON however deep, however long): the one reader
/// of a message's envelope, a call's params and their `_meta`.
pub fn members<'a, const N: usize>(
    text: &'a str,
    names: [&str; N],
) -> Result<Found<'a, N>, Members> {
    let flat = Within {
        names: &names,
        inner: None::<(usize, Leaf)>,
    };
    object(text, flat).map(|(found, _)| found)
}

/// How an object is read: its members `names` as written, but for the one at `inner`'s index, which is
/// read for its own members in the same pass (by `inner`'s own `Within`).
#[derive(Clone, Copy)]
pub struct Within<'n, const N: usize, S> {
    pub names: &'n [&'n str; N],
    pub inner: Option<(usize, S)>,
}

/// A `Within` with no member read for its own.
#[derive(Clone, Copy)]
pub struct Leaf;

/// A member read for its own members (`Within`).
pub enum Inner<V> {
    /// Not given (or given as `null`).
    None,
    Object(V),
    /// Another kind of value: what it is ("an array").
    Other(&'static str),
}

/// The object `text`, read as `within` says.
pub fn object<'a, V: Visitor<'a>>(text: &'a str, within: V) -> Result<V::Value, Members> {
    let first = text.trim_start().as_bytes().first().copied();
    if first != Some(b'{') {
        // Read whole before it is called anything: what is not JSON is a parse error.
        if let Err(e) = serde_json::from_str::<IgnoredAny>(text) {
            return Err(Members::NotJson(e.to_string()));
        }
        return Err(Members::NotAnObject(match first {
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        }));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(within)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|e| Members::NotJson(e.to_string()))
}

impl<'de, const N: usize, S: Visitor<'de> + Copy> Visitor<'de> for Within<'_, N, S> {
    type Value = (Found<'de, N>, Inner<S::Value>);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = Found {
            values: [None; N],
            twice: None,
        };
        let (mut inner, mut inner_seen) = (Inner::None, false);
        while let Some(key) = map.next_key_seed(Key)? {
            match (self.names.iter().position(|n| *n == key), self.inner) {
                (Some(at), Some((of, within))) if at == of => {
                    let value = map.next_value_seed(InnerSeed(within))?;
                    if inner_seen {
                        found.twice.get_or_insert(key);
                    } else {
                        (inner, inner_seen) = (value, true);
                    }
                }
                (Some(at), _) => {
                    let value: &'de RawValue = map.next_value()?;
                    if found.values[at].is_some() {
                        found.twice.get_or_insert(key);
                    } else {
                        found.values[at] = Some(value);
                    }
                }
                (None, _) => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((found, inner))
    }
}

/// A member's name or a string, borrowed from the line unless it has escapes: serde's own `Cow<str>`
/// always copies, an allocation per member of every request.
struct Key;

impl<'de> serde::de::DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a member's name")
    }
    fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(name))
    }
    fn visit_str<E>(self, name: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(name.to_owned()))
    }
}

impl Visitor<'_> for Leaf {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("nothing: no member is read for its own")
    }
}

/// Reads a member for its own members, or names the kind of value it is instead.
struct InnerSeed<S>(S);

impl<'de, S: Visitor<'de>> serde::de::DeserializeSeed<'de> for InnerSeed<S> {
    type Value = Inner<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de, S: Visitor<'de>> Visitor<'de> for InnerSeed<S> {
    type Value = Inner<S::Value>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map).map(Inner::Object)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Inner::Other("an array"))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Inner::None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Inner::Other("a string"))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Inner::Other("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Inner::Other("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Inner::Other("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Inner::Other("a number"))
    }
}

/// How deep `text` (JSON) nests its arrays and objects, counted as serde counts toward its recursion
/// limit: a value serde reads whole (rmcp's messages) is at most `MAX_DEPTH` deep.
pub fn depth(text: &str) -> usize {
    let (mut now, mut most, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                now += 1;
                most = most.max(now);
            }
            b']' | b'}' => now = now.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// The deepest a message serde reads whole may nest (its recursion limit is 128).
pub const MAX_DEPTH: usize = 127;

fn not_json(why: &str, unit: &str) -> String {
    if why.contains("recursion limit") {
        return format!(
            "Parse error: the {unit} is nested deeper than 127 levels, the most this server reads"
        );
    }
    format!("Parse error: the {unit} is not JSON ({why})")
}

/// A string's length as JSON writes it, less its quotes (as serde_json and JSON.stringify escape).
pub fn json_len(s: &str) -> usize {
    s.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum()
}

/// At most 100 characters of what a client named, escaped, for an answer's words.
pub fn clip(text: &str) -> String {
    crate::names::escape_controls(&text.chars().take(100).collect::<String>(), false).into_owned()
}

/// One JSON-RPC error answer, as a line without its newline.
pub fn error(id: &Value, code: i64, message: &str) -> Vec<u8> {
    error_raw_id(&id.to_string(), code, message)
}

/// An error answer under a request's id.
pub fn error_under(id: &NumberOrString, code: i64, message: &str) -> Vec<u8> {
    error_raw_id(&key_of(id), code, message)
}

/// `error` with the id as written: `raw` is one JSON value.
fn error_raw_id(raw: &str, code: i64, message: &str) -> Vec<u8> {
    let message = serde_json::to_string(message).unwrap_or_default();
    format!(r#"{{"jsonrpc":"2.0","id":{raw},"error":{{"code":{code},"message":{message}}}}}"#)
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_length_serde_json_writes() {
        let every: String = (0u8..128).map(char::from).collect::<String>() + "é😀\u{2028}";
        for s in ["", "plain", "\"\\", every.as_str()] {
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json_len(s), json.len() - 2, "{json}");
        }
    }

    #[test]
    fn depth_is_what_serde_reads_whole() {
        for n in [0, 1, 5, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 300] {
            let arrays = format!("{}1{}", "[".repeat(n), "]".repeat(n));
            let objects = format!(r#"{}"[{{\"]"{}"#, r#"{"a":"#.repeat(n), "}".repeat(n));
            for text in [&arrays, &objects] {
                let deep = depth(text);
                assert_eq!(deep, n, "{text}");
                assert_eq!(
                    serde_json::from_str::<Value>(text).is_ok(),
                    deep <= MAX_DEPTH,
                    "{n}"
                );
            }
        }
    }

    fn answer(line: &str) -> Option<Value> {
        match read(&mended(line), "line") {
            Read::Bad(Some(b), _) => Some(serde_json::from_slice(&b).unwrap()),
            _ => None,
        }
    }

    fn key(line: &str) -> Option<String> {
        match read(&mended(line), "line") {
            Read::Request(r) => Some(r.key()),
            _ => None,
        }
    }

    #[test]
    fn a_line_over_the_cap_is_answered_as_its_skeleton_reads() {
        let answered = |skeleton: Option<&str>| {
            overlong_answer(skeleton)
                .map(|a| serde_json::from_slice::<Value>(&a).unwrap()["id"].clone())
        };
        assert_eq!(
            answered(Some(r#"{"jsonrpc":"2.0","method":"ping","id":7}"#)),
            Some(json(7))
        );
        assert_eq!(
            answered(Some(r#"{"id":0,"id":0,"id":7,"method":"ping"}"#)),
            Some(Value::Null)
        );
        // An id this server cannot take comes back as written, as it does for any line.
        let raw =
            |skeleton: &str| String::from_utf8(overlong_answer(Some(skeleton)).unwrap()).unwrap();
        assert!(raw(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).contains(r#""id":1.5,"#));
        assert!(
            raw(r#"{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}"#)
                .contains(r#""id":99999999999999999999,"#)
        );
        // No object at all: null; a notification, a response or a blank line: no answer.
        assert_eq!(answered(None), Some(Value::Null));
        assert_eq!(answered(Some(r#"{"jsonrpc":"2.0","method":"x/y"}"#)), None);
        assert_eq!(
            answered(Some(r#"{"jsonrpc":"2.0","id":7,"result":0}"#)),
            None
        );
        assert_eq!(answered(Some("")), None);
    }

    #[test]
    fn a_line_over_the_cap_is_answered_under_the_id_it_would_be_under_the_cap() {
        // The id an answer carries, as written; `None` for no answer.
        let id_of = |answer: Option<Vec<u8>>| {
            answer.map(|a| {
                let v: std::collections::HashMap<String, Box<RawValue>> =
                    serde_json::from_slice(&a).unwrap();
                v["id"].get().to_string()
            })
        };
        let under = |line: &str| match read(&mended(line), "line") {
            Read::Request(r) => Some(r.key()),
            Read::Bad(answer, _) => id_of(answer),
            Read::Notification(_) | Read::Response(_) => None,
        };
        let members: Vec<String> = (0..300).map(|n| format!(r#""m{n}":0"#)).collect();
        let shapes = [
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"a":["PAD"]},"id":7}"#.to_string(),
            r#"{"x":1,"x":2,"jsonrpc":"2.0","id":7,"id":8,"method":"ping","params":"PAD"}"#.into(),
            r#"{"x":1,"x":2,"jsonrpc":"2.0","id":7,"result":1,"result":"PAD"}"#.into(),
            r#"{"params":1,"jsonrpc":"2.0","id":7,"params":"PAD","method":"ping"}"#.into(),
            format!(
                r#"{{{},"jsonrpc":"2.0","id":7,"id":8,"method":"ping","p":"PAD"}}"#,
                members.join(",")
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":"{}","method":"ping","p":"PAD"}}"#,
                "\\u0061".repeat(700)
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":7.{},"method":"ping","p":"PAD"}}"#,
                "0".repeat(5000)
            ),
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping","p":"PAD"}"#.into(),
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping","p":"PAD"}"#.into(),
            r#"{"jsonrpc":"1.0","\u0069d":7,"method":5,"p":"PAD"}"#.into(),
            r#"{"jsonrpc":"2.0","method":"x/y","params":"PAD"}"#.into(),
            r#"{"jsonrpc":"2.0","id":7,"\u0072\u0065\u0073\u0075\u006c\u0074":"PAD"}"#.into(),
            r#"["PAD"]"#.into(),
        ];
        for shape in shapes {
            let line = shape.replace("PAD", "x");
            let skeleton = crate::skim::skeleton(line.as_bytes());
            assert_eq!(
                id_of(overlong_answer(skeleton.as_deref())),
                under(&line),
                "{}",
                clip(&line)
            );
        }
    }

    #[test]
    fn each_kind_of_line_that_is_no_request_gets_its_code_and_its_id() {
        let a = answer("not json").unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (Value::Null, json(-32700))
        );
        assert_eq!(answer("[1,2]").unwrap()["error"]["code"], -32600);
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            answer(&deep).unwrap()["error"]["code"],
            -32600,
            "JSON, if deep, and an array"
        );
        let a = answer(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json(1.5), json(-32600))
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#).unwrap()["id"],
            4
        );
        assert_eq!(answer("{}").unwrap()["error"]["code"], -32600);
        assert!(answer(r#"{"jsonrpc":"2.0","method":"ping","method":"ping"}"#).is_none());
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#, "line"),
            Read::Response(_)
        ));
    }

    #[test]
    fn an_id_is_answered_as_rmcp_reads_it() {
        for (line, id) in [
            (
                r#"{"jsonrpc":"2.0","id":2.0,"method":"tools/call","params":{"name":5}}"#,
                "2",
            ),
            (r#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#, "0"),
            (r#"{"jsonrpc":"2.0","id":1e2,"method":"ping"}"#, "100"),
            (
                r#"{"method":"tools/call","params":{},"jsonrpc":"2.0","id":"a\u0041"}"#,
                r#""aA""#,
            ),
            // Whatever the params hold, even past what a parser reads, the request is answered under its id.
            (
                &format!(
                    r#"{{"jsonrpc":"2.0","id":7,"method":"x","params":{}1{}}}"#,
                    "[".repeat(300),
                    "]".repeat(300)
                ),
                "7",
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"x","params":{"n":1e999}}"#,
                "8",
            ),
        ] {
            assert_eq!(key(line).as_deref(), Some(id), "{line}");
        }
    }

    #[test]
    fn names_and_strings_with_escapes_are_read_as_their_text() {
        let line = r#"{"json\u0072pc":"2.0","\u0069d":4,"method":"tools\/list","para\u006ds":{}}"#;
        let Read::Request(r) = read(line, "line") else {
            panic!("{line}");
        };
        assert_eq!((r.key(), &*r.method), ("4".to_string(), "tools/list"));
        assert!(matches!(r.method, Cow::Owned(_)) && r.params.is_some());
        let Read::Request(r) = read(r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#, "line") else {
            panic!("a ping");
        };
        assert!(matches!(r.method, Cow::Borrowed("ping")));
    }

    #[test]
    fn a_member_given_twice_is_named_and_the_id_kept_unless_it_is_the_one() {
        let a = answer(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#).unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (Value::Null, json(-32600))
        );
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains(r#"gives "id" more than once"#)
        );
        let a = answer(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{},"params":{}}"#)
            .unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json(3), json(-32600))
        );
        let a = answer(r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":-0,"method":"ping"}"#).unwrap();
        assert_eq!(a["id"], 0);
    }

    #[test]
    fn an_id_this_server_cannot_take_is_echoed_as_it_was_written() {
        for raw in [
            "99999999999999999999",
            "1.50",
            "9007199254740992.0",
            "1e300",
            "18446744073709551616",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"ping"}}"#);
            let Read::Bad(Some(a), _) = read(&line, "line") else {
                panic!("{line}");
            };
            let a = String::from_utf8(a).unwrap();
            assert!(
                a.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{raw},"error":"#)),
                "{a}"
            );
            assert!(a.contains(&format!("the id {raw} ")), "{a}");
        }
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","method":"ping"}}"#,
            "x".repeat(2000)
        );
        let a = answer(&long).unwrap();
        assert_eq!(a["id"], Value::Null);
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("an id of 2000 bytes")
        );
    }

    #[test]
    fn half_surrogate_pairs_become_replacement_characters() {
        assert_eq!(
            mended(r#"{"s":"hi \ud83d","t":"\ud83d\ude00","u":"\\ud800","v":"\udc00"}"#),
            r#"{"s":"hi \ufffd","t":"\ud83d\ude00","u":"\\ud800","v":"\ufffd"}"#
        );
        assert!(matches!(
            mended(r#"{"s":"\ud83d\ude00"}"#),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            key(&mended(
                r#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#
            ))
            .as_deref(),
            Some("\"\u{fffd}\"")
        );
    }

    fn json(v: impl Into<Value>) -> Value {
        v.into()
    }
}
