//! What a session's line is answered with when rmcp cannot take it, as JSON-RPC 2.0 says: `-32700` for a
//! line that is not JSON (with `id: null`), `-32600` for JSON that is not a request, `-32602` for a request
//! whose params do not fit its method, each with a sentence naming what is wrong. A notification is
//! never answered, whatever is wrong with it. Ids are echoed exactly as sent.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;
pub const METHOD_NOT_FOUND: i64 = -32601;

/// A session's message, as rmcp takes it, or what it is answered instead.
pub enum Taken {
    Message(Box<ClientJsonRpcMessage>),
    /// rmcp cannot take it, or would answer it wrongly: this answer (none for a notification).
    Answered(Option<Vec<u8>>),
}

/// Reads one message (a line on the socket, a body over HTTP; `unit` says which, for the answer's
/// words). rmcp takes a known method whose params do not fit as a custom request and answers that it
/// knows no such method: such a request is answered here, saying what is wrong with its params.
pub fn take(text: &str, unit: &str) -> Taken {
    let parsed = serde_json::from_str::<ClientJsonRpcMessage>(text).or_else(|e| {
        match well_formed(text) {
            // Half a surrogate pair, as a client that cut a string mid-emoji sends: U+FFFD.
            Some(fixed) => serde_json::from_str::<ClientJsonRpcMessage>(&fixed),
            None => Err(e),
        }
    });
    let msg = match parsed {
        Ok(msg) => msg,
        Err(e) => {
            tracing::debug!(error = %e, "a message rmcp cannot take");
            return Taken::Answered(answer_to_bad(text, unit));
        }
    };
    if let ClientJsonRpcMessage::Request(r) = &msg
        && let ClientRequest::CustomRequest(c) = &r.request
        && is_known_method(&c.method)
        && let Some(answer) = answer_to_bad(text, unit)
    {
        return Taken::Answered(Some(answer));
    }
    Taken::Message(Box::new(msg))
}

/// The error answer (one line of JSON, without its newline) to a line or a body (`unit`) rmcp could not
/// parse; `None` when it is a notification, which gets no answer.
pub fn answer_to_bad(line: &str, unit: &str) -> Option<Vec<u8>> {
    // Read as rmcp's parse was tried: half surrogate pairs mended (a line without them is read as sent).
    let mended = well_formed(line);
    let text = mended.as_deref().unwrap_or(line);
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Some(error(&Value::Null, PARSE_ERROR, &not_json(&e, unit))),
    };
    let Value::Object(msg) = v else {
        return Some(error(
            &Value::Null,
            INVALID_REQUEST,
            &format!(
                "Invalid request: a JSON-RPC message is an object, and this {unit} is {}",
                crate::instance::json_kind(&v)
            ),
        ));
    };
    // An integer in float form (2.0, 1e2, -0) is the integer, as rmcp reads it on a line it takes.
    let as_integer = msg.get("id").and_then(integer_in_float_form);
    let id = as_integer.as_ref().or(msg.get("id"));
    let repeated = repeated_key(text);
    if let Some((false, key)) = &repeated {
        // Which of two ids would be the one answered cannot be said: neither is.
        let id = if key == "id" { None } else { id };
        let message = format!(
            "Invalid request: the message gives \"{key}\" more than once; a JSON-RPC message gives each of its members once"
        );
        return match id {
            Some(id) => reply(Some(id), INVALID_REQUEST, message),
            None if msg.contains_key("method") && key != "id" => None,
            None => Some(error(&Value::Null, INVALID_REQUEST, &message)),
        };
    }
    let echo = id.cloned().unwrap_or(Value::Null);
    if id.is_none() && !msg.contains_key("method") {
        return Some(error(
            &Value::Null,
            INVALID_REQUEST,
            "Invalid request: it has neither a \"method\" nor an \"id\"",
        ));
    }
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return reply(
            id,
            INVALID_REQUEST,
            "Invalid request: \"jsonrpc\" must be \"2.0\"".into(),
        );
    }
    if let Some(id) = id
        && !is_id(id)
    {
        // Echoed as written: parsed, a number past 64 bits would come back as another (1e+20).
        let raw = raw_id(text).unwrap_or_else(|| id.to_string());
        let why = if id.is_u64() || id.is_f64() && id.as_f64().is_some_and(|f| f.fract() == 0.0) {
            format!(
                "Invalid request: the id {raw} is outside the 64-bit signed integers this server takes; send it as a string"
            )
        } else {
            format!("Invalid request: the id {raw} is not a string or an integer")
        };
        return Some(error_raw_id(&raw, INVALID_REQUEST, &why));
    }
    let method = match msg.get("method") {
        Some(Value::String(m)) => m.as_str(),
        Some(other) => {
            return reply(
                id,
                INVALID_REQUEST,
                format!("Invalid request: \"method\" is {other}, not a string"),
            );
        }
        None if msg.contains_key("result") || msg.contains_key("error") => {
            // A response from the client to a request of the server's; the server sends none, so it
            // answers nothing and there is nobody to tell.
            return None;
        }
        None => {
            return Some(error(
                &echo,
                INVALID_REQUEST,
                "Invalid request: it has no \"method\"",
            ));
        }
    };
    // The method is a string and the envelope is sound, so it is the params that did not fit.
    if let Some((true, key)) = repeated {
        return reply(
            id,
            INVALID_PARAMS,
            format!(
                "Invalid params: the params of {method} give \"{key}\" more than once; give it once"
            ),
        );
    }
    let why = params_problem(method, msg.get("params"))
        .or_else(|| typed_problem(method, msg.get("params")?))
        .unwrap_or_else(|| format!("the params of {method} do not fit what it takes"));
    reply(id, INVALID_PARAMS, format!("Invalid params: {why}"))
}

/// Methods this server serves: a request for one of them that rmcp could not read had params that did
/// not fit.
pub fn is_known_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "tools/list"
            | "tools/call"
            | "server/discover"
            | "subscriptions/listen"
    )
}

/// `-32601`'s message: the method, and what this server serves instead.
pub fn method_not_found_words(method: &str) -> String {
    if is_known_method(method) {
        format!(
            "Method not found: {method} is not served under the protocol revision this session speaks"
        )
    } else {
        format!(
            "Method not found: this server does not serve {method}; it serves initialize, ping, tools/list and \
             tools/call (and from 2026-07-28 on, server/discover and subscriptions/listen)"
        )
    }
}

/// An error answer to a request; nothing for a notification.
fn reply(id: Option<&Value>, code: i64, message: String) -> Option<Vec<u8>> {
    id.map(|id| error(id, code, &message))
}

fn is_id(id: &Value) -> bool {
    id.is_string() || id.is_i64()
}

/// The integer a number in float form stands for, when rmcp reads it as one (below 2^53, which an f64
/// holds exactly).
pub fn integer_in_float_form(id: &Value) -> Option<Value> {
    match id {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            match serde_json::from_value::<rmcp::model::NumberOrString>(id.clone()) {
                Ok(rmcp::model::NumberOrString::Number(i)) => Some(Value::from(i)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The line with each half of a surrogate pair written as an escape (`\\ud83d` alone) replaced by
/// U+FFFD, as a well-formed string has it; `None` when there is none.
pub fn well_formed(line: &str) -> Option<String> {
    if !line.contains("\\u") {
        return None;
    }
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    let mut changed = false;
    let escape_at = |at: usize| -> Option<u16> {
        let hex = line.get(at + 2..at + 6)?;
        (b[at] == b'\\' && b.get(at + 1) == Some(&b'u')).then_some(())?;
        u16::from_str_radix(hex, 16).ok()
    };
    let mut last = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        match escape_at(i) {
            Some(hi @ 0xD800..=0xDBFF) => {
                if escape_at(i + 6).is_some_and(|lo| (0xDC00..=0xDFFF).contains(&lo)) {
                    i += 12;
                } else {
                    out.push_str(&line[last..i]);
                    out.push_str("\\ufffd");
                    let _ = hi;
                    i += 6;
                    last = i;
                    changed = true;
                }
            }
            Some(0xDC00..=0xDFFF) => {
                out.push_str(&line[last..i]);
                out.push_str("\\ufffd");
                i += 6;
                last = i;
                changed = true;
            }
            // Any other escape (a `\\` among them) is passed whole, so an escaped backslash is not read
            // as the start of another escape.
            Some(_) => i += 6,
            None => i += 2,
        }
    }
    if !changed {
        return None;
    }
    out.push_str(&line[last..]);
    Some(out)
}

/// What is wrong with the params of a `tools/call` that rmcp would not take.
/// Which field of a known method's params does not fit, as far as this server can tell.
fn params_problem(method: &str, params: Option<&Value>) -> Option<String> {
    if method == "tools/call"
        && let Some(why) = tools_call_problem(params)
    {
        return Some(why);
    }
    let p = match params {
        None | Some(Value::Null) if method == "initialize" => {
            return Some(
                "initialize has no params; it takes protocolVersion, capabilities and clientInfo"
                    .into(),
            );
        }
        None | Some(Value::Null) => return None,
        Some(Value::Object(p)) => p,
        Some(other) => {
            return Some(format!(
                "the params of {method} are {}, not an object",
                kind(other)
            ));
        }
    };
    if let Some(meta) = p.get("_meta")
        && !meta.is_object()
        && !meta.is_null()
    {
        return Some(format!("params._meta is {}, not an object", kind(meta)));
    }
    match method {
        "initialize" => field(p, "params", "protocolVersion", Value::is_string, "a string")
            .or_else(|| field(p, "params", "capabilities", Value::is_object, "an object"))
            .or_else(|| field(p, "params", "clientInfo", Value::is_object, "an object"))
            .or_else(|| {
                let info = p.get("clientInfo").and_then(Value::as_object)?;
                field(
                    info,
                    "params.clientInfo",
                    "name",
                    Value::is_string,
                    "a string",
                )
                .or_else(|| {
                    field(
                        info,
                        "params.clientInfo",
                        "version",
                        Value::is_string,
                        "a string",
                    )
                })
            }),
        _ => None,
    }
}

/// Where reading the params as rmcp reads them stops, for what the checks above do not name (a nested
/// field: `params.capabilities.roots.listChanged`), with serde's words for what it found there.
fn typed_problem(method: &str, params: &Value) -> Option<String> {
    fn read_as<T: serde::de::DeserializeOwned>(params: &Value) -> Option<String> {
        let e = serde_path_to_error::deserialize::<_, T>(params).err()?;
        // serde quotes what it found whole, and a path holds the keys of maps a client names: neither
        // is sent back whole.
        let clipped = |mut text: String| {
            if let Some((cut, _)) = text.char_indices().nth(MAX_WORDS) {
                text.truncate(cut);
                text.push('…');
            }
            text
        };
        let path = clipped(e.path().to_string());
        let words = clipped(e.into_inner().to_string());
        Some(match path.as_str() {
            "." => format!("the params do not fit: {words}"),
            _ => format!("params.{path} does not fit: {words}"),
        })
    }
    const MAX_WORDS: usize = 200;
    match method {
        "initialize" => read_as::<rmcp::model::InitializeRequestParams>(params),
        "tools/call" => read_as::<rmcp::model::CallToolRequestParams>(params),
        "tools/list" => read_as::<rmcp::model::PaginatedRequestParams>(params),
        _ => None,
    }
}

/// A required field that is missing or not what `fits` takes (`wanted`, in words).
fn field(
    object: &serde_json::Map<String, Value>,
    at: &str,
    name: &str,
    fits: fn(&Value) -> bool,
    wanted: &str,
) -> Option<String> {
    match object.get(name) {
        None => Some(format!("{at}.{name} is missing")),
        Some(v) if fits(v) => None,
        Some(v) => Some(format!("{at}.{name} is {}, not {wanted}", kind(v))),
    }
}

fn kind(v: &Value) -> &'static str {
    crate::instance::json_kind(v)
}

fn tools_call_problem(params: Option<&Value>) -> Option<String> {
    let Some(params) = params else {
        return Some(
            "tools/call has no params; it takes {\"name\": TOOL, \"arguments\": {…}}".into(),
        );
    };
    let Value::Object(p) = params else {
        return Some(format!(
            "the params of tools/call are {}, not an object with \"name\" and \"arguments\"",
            crate::instance::json_kind(params)
        ));
    };
    match p.get("name") {
        None => return Some("params.name is missing; it names the tool to call".into()),
        Some(Value::String(_)) => {}
        Some(other) => {
            return Some(format!(
                "params.name is {}, not a string naming the tool",
                crate::instance::json_kind(other)
            ));
        }
    }
    match p.get("arguments") {
        None | Some(Value::Object(_)) | Some(Value::Null) => None,
        Some(other) => Some(format!(
            "params.arguments is {}, not an object",
            crate::instance::json_kind(other)
        )),
    }
}

fn not_json(e: &serde_json::Error, unit: &str) -> String {
    let text = e.to_string();
    if text.contains("recursion limit") {
        return format!("Parse error: the {unit} is nested more than 128 levels deep");
    }
    format!("Parse error: the {unit} is not JSON ({text})")
}

/// A member the message (false) or its params (true) give twice, which serde_json's `Value` reads as the
/// last of them and rmcp refuses.
fn repeated_key(line: &str) -> Option<(bool, String)> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    use std::borrow::Cow;
    /// The keys of an object, and of its `params` when `outer`.
    struct Keys {
        outer: bool,
    }
    impl<'de> Visitor<'de> for Keys {
        type Value = Option<(bool, String)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            // A set: a hostile line may give a hundred thousand keys.
            let mut seen: std::collections::HashSet<Cow<'de, str>> = Default::default();
            let (mut twice, mut inner) = (None, None);
            // Read to the end: the parse fails unless the object is read whole.
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if self.outer && key == "params" {
                    inner = inner.or(map.next_value::<Inner>()?.0);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
                if twice.is_none() && seen.contains(&key) {
                    twice = Some((!self.outer, key.to_string()));
                }
                seen.insert(key);
            }
            Ok(twice.or(inner.map(|k| (true, k))))
        }
    }
    /// The key `params` gives twice, if it is an object that does.
    struct Inner(Option<String>);
    impl<'de> serde::Deserialize<'de> for Inner {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Any;
            impl<'de> Visitor<'de> for Any {
                type Value = Option<String>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a value")
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                    Ok(Keys { outer: false }.visit_map(map)?.map(|(_, k)| k))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Self::Value, A::Error> {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    Ok(None)
                }
                fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                    Ok(None)
                }
                fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                    Ok(None)
                }
                fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                    Ok(None)
                }
                fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                    Ok(None)
                }
                fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                    Ok(None)
                }
                fn visit_unit<E>(self) -> Result<Self::Value, E> {
                    Ok(None)
                }
            }
            d.deserialize_any(Any).map(Inner)
        }
    }
    let mut de = serde_json::Deserializer::from_str(line);
    de.deserialize_map(Keys { outer: true }).ok().flatten()
}

/// The id of a message as its sender wrote it (valid JSON), when the line (mended as `well_formed`
/// mends it) is a JSON object with one.
fn raw_id(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        id: Option<&'a serde_json::value::RawValue>,
    }
    serde_json::from_str::<Envelope>(text)
        .ok()?
        .id
        .map(|id| id.get().to_string())
}

/// `error` with the id as written: `raw` is one JSON value, as `raw_id` gives it.
fn error_raw_id(raw: &str, code: i64, message: &str) -> Vec<u8> {
    let message = serde_json::to_string(message).unwrap_or_default();
    format!(r#"{{"jsonrpc":"2.0","id":{raw},"error":{{"code":{code},"message":{message}}}}}"#)
        .into_bytes()
}

/// One JSON-RPC error message, as a line without its newline.
pub fn error(id: &Value, code: i64, message: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }),
    )
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Option<Value> {
        answer_to_bad(line, "line").map(|b| serde_json::from_slice(&b).unwrap())
    }

    #[test]
    fn each_kind_of_bad_line_gets_its_code_and_its_id() {
        let a = answer("not json").unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (Value::Null, json!(-32700))
        );
        let a = answer(&format!("{}1{}", "[".repeat(200), "]".repeat(200))).unwrap();
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("128 levels"),
            "{a}"
        );
        assert_eq!(answer("[1,2]").unwrap()["error"]["code"], -32600);
        let a = answer(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(1.5), json!(-32600))
        );
        let a = answer(r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":5}}"#)
            .unwrap();
        assert_eq!(a["id"], "x");
        assert_eq!(a["error"]["code"], -32602);
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("params.name is a number")
        );
        let a = answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"e","arguments":[1]}}"#).unwrap();
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("params.arguments is an array")
        );
        let a = answer(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#).unwrap();
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("has no params"),
            "{a}"
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","method":"tools/call","params":5}"#),
            None
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#).unwrap()["id"],
            4
        );
    }

    #[test]
    fn an_id_in_float_form_is_answered_as_the_integer_rmcp_reads() {
        for (line, id) in [
            (
                r#"{"jsonrpc":"2.0","id":2.0,"method":"tools/call","params":{"name":5}}"#,
                json!(2),
            ),
            (r#"{"jsonrpc":"1.0","id":3.0,"method":"ping"}"#, json!(3)),
            (
                r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":-0,"method":"ping"}"#,
                json!(0),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"e","arguments":[1]}}"#,
                json!(100),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping","params":5}"#,
                json!(1.5),
            ),
        ] {
            assert_eq!(answer(line).unwrap()["id"], id, "{line}");
        }
    }

    #[test]
    fn a_member_given_twice_is_named() {
        let a = answer(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#).unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (Value::Null, json!(-32600))
        );
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains(r#"gives "id" more than once"#),
            "{a}"
        );
        let a = answer(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","method":"tools/list","params":{}}"#,
        )
        .unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(3), json!(-32600))
        );
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains(r#""method" more than once"#),
            "{a}"
        );
        let a = answer(r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{},"name":"b"}}"#).unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!("x"), json!(-32602))
        );
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains(r#"give "name" more than once"#),
            "{a}"
        );
        // Inside the arguments a key given twice is the plugin's business: the last one counts.
        assert_eq!(
            repeated_key(r#"{"id":1,"params":{"arguments":{"a":1,"a":2}}}"#),
            None
        );
        // A notification is never answered.
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","method":"ping","method":"ping"}"#),
            None
        );
    }

    #[test]
    fn a_long_string_where_it_does_not_fit_is_not_sent_back_whole() {
        let long = "x".repeat(10_000);
        let params = json!({ "protocolVersion": "2025-11-25", "capabilities": { "roots": { "listChanged": long } }, "clientInfo": { "name": "t", "version": "1" } });
        let why = typed_problem("initialize", &params).unwrap();
        assert!(
            why.starts_with(
                "params.capabilities.roots.listChanged does not fit: invalid type: string \"xxx"
            ),
            "{why}"
        );
        assert!(why.ends_with('…') && why.len() < 400, "{why}");
        // A key of the client's naming, in a map of capabilities, is clipped in the path too.
        let key = "k".repeat(10_000);
        let params = json!({ "protocolVersion": "2025-11-25", "capabilities": { "experimental": { key: 5 } }, "clientInfo": { "name": "t", "version": "1" } });
        let why = typed_problem("initialize", &params).unwrap();
        assert!(why.len() < 800, "{why}");
    }

    #[test]
    fn odd_ids_and_empty_objects_are_answered() {
        assert_eq!(answer("{}").unwrap()["error"]["code"], -32600);
        let a = answer(r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#).unwrap();
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("outside the 64-bit signed integers"),
            "{a}"
        );
    }

    #[test]
    fn an_id_this_server_cannot_take_is_echoed_as_it_was_written() {
        for raw in [
            "99999999999999999999",
            "1.50",
            // Integers in float form at 2^53 and past it, which an f64 cannot tell from their neighbours.
            "9007199254740992.0",
            "1e300",
            "18446744073709551616",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"ping"}}"#);
            let a = String::from_utf8(answer_to_bad(&line, "line").unwrap()).unwrap();
            assert!(
                a.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{raw},"error":"#)),
                "{a}"
            );
            let v: Value = serde_json::from_str(&a).unwrap();
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("the id {raw} ")),
                "{a}"
            );
        }
    }

    #[test]
    fn half_surrogate_pairs_become_replacement_characters() {
        assert_eq!(
            well_formed(r#"{"s":"hi \ud83d","t":"\ud83d\ude00","u":"\\ud800","v":"\udc00"}"#)
                .unwrap(),
            r#"{"s":"hi \ufffd","t":"\ud83d\ude00","u":"\\ud800","v":"\ufffd"}"#
        );
        assert_eq!(well_formed(r#"{"s":"\ud83d\ude00"}"#), None);
    }
}
