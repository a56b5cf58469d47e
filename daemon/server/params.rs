//! A request's params, read as its method wants them, and what is wrong with them in words: `-32602`
//! under the request's id (`jsonrpc::read` found it; everything from here on answers under it). A
//! `tools/call`'s are read here, for the daemon's one call path; every other request is read by rmcp.

use std::borrow::Cow;

use rmcp::model::{ClientCapabilities, ClientJsonRpcMessage, ClientRequest, ProgressToken};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::jsonrpc::{
    self, Found, INVALID_PARAMS, Inner, Leaf, MAX_ID_BYTES, Members, Request, Within,
};

/// The answer to a second `initialize` in a session, on the socket and over HTTP: answered, it would leave
/// the session half in one revision, half in another.
pub const INITIALIZED_ALREADY: &str = "Invalid request: this session is initialized already, and a session is \
     initialized once (it goes on in the revision its first initialize agreed); to speak another, start a \
     new session";

/// Why a tools/list `cursor` (as `what` names it) is refused: this server gives none.
pub fn no_cursor(what: &str) -> String {
    format!(
        "{what} is none this server gave: its tool list comes whole, in one answer with no nextCursor; send \
         tools/list without a cursor"
    )
}

/// The answer to a request before the session began.
pub const NOT_BEGUN: &str = "Invalid request: this session has not begun: send \"initialize\" first (or, from MCP \
     2026-07-28 on, give each request the _meta keys io.modelcontextprotocol/protocolVersion (2026-07-28) and \
     io.modelcontextprotocol/clientCapabilities)";

/// The revision from which every request carries its own protocol version and client capabilities.
pub const INLINE: &str = "2026-07-28";

/// Whether rmcp serves protocol revision `version`.
pub fn known_version(version: &str) -> bool {
    rmcp::model::ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|v| v.as_str() == version)
}

/// Whether `version` is a revision rmcp serves in which every request carries what `initialize` said.
/// Revisions are dates and sort as text, but one that sorts after 2026-07-28 is not known by that.
pub fn inline_version(version: &str) -> bool {
    version >= INLINE && known_version(version)
}

/// A `tools/call`'s params, as the call path takes them.
pub struct CallParams<'a> {
    pub name: Cow<'a, str>,
    /// The arguments as the client wrote them (an object), or none.
    pub arguments: Option<&'a RawValue>,
    pub progress: Option<ProgressToken>,
    /// The protocol revision its `_meta` names.
    pub version: Option<Cow<'a, str>>,
    /// What 2026-07-28 asks of every request's `_meta` and it lacks (or carries in a shape rmcp cannot
    /// read), as rmcp names them.
    pub missing: Vec<&'static str>,
    /// W3C trace context, when the caller passes it on.
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

/// How a call's params are read: name and arguments as written, `_meta` for its own members, in one
/// pass (with the line's envelope, `jsonrpc::read_within`): on Claude Code's calls `_meta` is most of
/// the line.
pub const CALL: Within<'static, 3, Within<'static, 5, Leaf>> = Within {
    names: &["name", "arguments", "_meta"],
    inner: Some((
        2,
        Within {
            names: &[
                "progressToken",
                "io.modelcontextprotocol/protocolVersion",
                "io.modelcontextprotocol/clientCapabilities",
                "traceparent",
                "tracestate",
            ],
            inner: None,
        },
    )),
};

/// A call's params as `CALL` reads them.
pub type CallRead<'a> = Inner<(Found<'a, 3>, Inner<(Found<'a, 5>, Inner<()>)>)>;

/// Reads a `tools/call`'s params, as written; the words of `-32602` when they do not fit. `known` as for
/// `call_read`.
pub fn call<'a>(
    params: Option<&'a RawValue>,
    known: &mut Option<Box<str>>,
) -> Result<CallParams<'a>, String> {
    let read = match params.filter(|p| p.get() != "null") {
        None => Inner::None,
        Some(params) => match jsonrpc::object(params.get(), CALL) {
            Ok(found) => Inner::Object(found),
            Err(Members::NotAnObject(kind)) => Inner::Other(kind),
            // JSON all the same (it was read as written): a `_meta` that is a number past what a float
            // holds, which is no object to read members of. Named as any other number is.
            Err(Members::NotJson(why)) => {
                match jsonrpc::members(params.get(), ["name", "arguments", "_meta"]) {
                    Ok(mut found) => {
                        let meta = found.values[2]
                            .take()
                            .map_or(Inner::None, |m| Inner::Other(kind_of(m)));
                        Inner::Object((found, meta))
                    }
                    Err(_) => return Err(format!("the params of tools/call do not fit: {why}")),
                }
            }
        },
    };
    call_read(read, known)
}

/// A `tools/call`'s params as `CALL` read them; the words of `-32602` when they do not fit. `known` is
/// the text of the last client capabilities the session's calls carried that rmcp reads: a client sends
/// the same ones with every call, and reading them is most of a call's reading (issue 41).
pub fn call_read<'a>(
    read: CallRead<'a>,
    known: &mut Option<Box<str>>,
) -> Result<CallParams<'a>, String> {
    let (found, meta) = match read {
        Inner::None => {
            return Err(
                "tools/call has no params; it takes {\"name\": TOOL, \"arguments\": {…}}".into(),
            );
        }
        Inner::Other(kind) => {
            return Err(format!(
                "the params of tools/call are {kind}, not an object with \"name\" and \"arguments\""
            ));
        }
        Inner::Object(found) => found,
    };
    if let Some(key) = found.twice {
        return Err(format!(
            "the params of tools/call give \"{}\" more than once; give it once",
            jsonrpc::clip(&key)
        ));
    }
    let [name, arguments, _] = found.values;
    let name = match name {
        None => return Err("params.name is missing; it names the tool to call".into()),
        Some(raw) => match jsonrpc::as_string(raw) {
            Some(name) => name,
            None => {
                return Err(format!(
                    "params.name is {}, not a string naming the tool",
                    kind_of(raw)
                ));
            }
        },
    };
    let arguments = match arguments {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) if raw.get().starts_with('{') => Some(raw),
        Some(raw) => {
            return Err(format!(
                "params.arguments is {}, not an object",
                kind_of(raw)
            ));
        }
    };
    let mut read = CallParams {
        name,
        arguments,
        progress: None,
        version: None,
        missing: Vec::new(),
        traceparent: None,
        tracestate: None,
    };
    let found = match meta {
        Inner::None => {
            read.missing = MISSING.to_vec();
            return Ok(read);
        }
        Inner::Other(kind) => return Err(format!("params._meta is {kind}, not an object")),
        Inner::Object((found, _)) => found,
    };
    let [progress, version, capabilities, traceparent, tracestate] = found.values;
    read.progress = match progress.filter(|p| p.get() != "null") {
        None => None,
        Some(p) => match serde_json::from_str::<ProgressToken>(p.get()) {
            Ok(token) => Some(token),
            // Ignored, its progress would never come, and nothing would say why.
            Err(_) => return Err(progress_token_kind(p)),
        },
    };
    if let Some(why) = read.progress.as_ref().and_then(progress_token_too_long) {
        return Err(why);
    }
    read.version = version.and_then(jsonrpc::as_string);
    if read.version.is_none() {
        read.missing.push(MISSING[0]);
    }
    match capabilities.map(RawValue::get) {
        Some(c) if known.as_deref() == Some(c) => {}
        Some(c) if serde_json::from_str::<ClientCapabilities>(c).is_ok() => *known = Some(c.into()),
        _ => read.missing.push(MISSING[1]),
    }
    let context = |v: Option<&RawValue>| {
        v.and_then(|v| serde_json::from_str::<String>(v.get()).ok())
            .filter(|v| v.len() <= 512)
    };
    read.traceparent = context(traceparent).filter(|t| w3c_traceparent(t));
    read.tracestate = context(tracestate);
    Ok(read)
}

/// A `traceparent` as W3C Trace Context writes one (`00-` 32 hex `-` 16 hex `-` 2 hex): anything else
/// (a line break, a word) would reach a plugin that passes it on as a header, and break its request.
pub fn w3c_traceparent(v: &str) -> bool {
    let lower_hex = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let not_zero = |part: &str| part.bytes().any(|b| b != b'0');
    let Some(head) = v.get(..55) else {
        return false;
    };
    let mut parts = head.split('-');
    let (Some(version), Some(trace), Some(parent), Some(flags), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    // A later version may add fields after a dash; version 00 adds none, and ff is forbidden.
    let rest_ok = v.len() == 55 || (version != "00" && v.as_bytes()[55] == b'-');
    lower_hex(version, 2)
        && version != "ff"
        && lower_hex(trace, 32)
        && not_zero(trace)
        && lower_hex(parent, 16)
        && not_zero(parent)
        && lower_hex(flags, 2)
        && rest_ok
}

/// The `_meta` keys 2026-07-28 asks of every request, as rmcp names them.
const MISSING: [&str; 2] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
];

/// rmcp's words for a request whose `_meta` lacks what 2026-07-28 asks of it.
pub fn missing_words(missing: &[&str]) -> String {
    format!(
        "request _meta is missing or has malformed required fields: {}",
        missing.join(", ")
    )
}

fn kind_of(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// Any request but a `tools/call`, as rmcp reads it (`text` is the whole line, mended); the answer under
/// its id when its params do not fit.
pub fn for_rmcp(text: &str, request: &Request<'_>) -> Result<ClientJsonRpcMessage, Vec<u8>> {
    let refused = |why: String| {
        jsonrpc::error_under(
            &request.id,
            INVALID_PARAMS,
            &format!("Invalid params: {why}"),
        )
    };
    // rmcp reads tools/list params that do not fit (a cursor that is a number) as none, and would send
    // the whole list.
    if request.method == "tools/list"
        && let Some(params) = request.params
        && let Ok(Value::Object(p)) = serde_json::from_str::<Value>(params.get())
        && let Some(cursor) = p.get("cursor").filter(|c| !c.is_string() && !c.is_null())
    {
        return Err(refused(no_cursor(&format!(
            "params.cursor, {},",
            kind(cursor)
        ))));
    }
    match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Ok(ClientJsonRpcMessage::Request(r)) if matches!(&r.request, ClientRequest::CustomRequest(c) if is_known_method(&c.method)) =>
        {
            // rmcp takes a known method whose params do not fit for one it does not know.
            Err(refused(problem(&request.method, request.params)))
        }
        Ok(msg) => Ok(msg),
        Err(e) => {
            let text = e.to_string();
            if text.contains("recursion limit") {
                return Err(refused(format!(
                    "the params of {} nest too deep: a message nests at most 127 levels, the params among them",
                    jsonrpc::clip(&request.method)
                )));
            }
            if let Some(key) = text
                .strip_prefix("duplicate field `")
                .and_then(|t| t.split('`').next())
            {
                return Err(refused(format!(
                    "the params of {} give \"{key}\" more than once; give it once",
                    jsonrpc::clip(&request.method)
                )));
            }
            Err(refused(problem(&request.method, request.params)))
        }
    }
}

/// What is wrong with the params of a known method, as far as this server can tell.
fn problem(method: &str, params: Option<&RawValue>) -> String {
    let Some(params) = params.map(|p| serde_json::from_str::<Value>(p.get())) else {
        return params_problem(method, None).unwrap_or_else(|| {
            format!(
                "the params of {} do not fit what it takes",
                jsonrpc::clip(method)
            )
        });
    };
    match params {
        Err(e) => format!(
            "the params of {} are not readable: {e}",
            jsonrpc::clip(method)
        ),
        Ok(params) => params_problem(method, Some(&params))
            .or_else(|| typed_problem(method, &params))
            .unwrap_or_else(|| {
                format!(
                    "the params of {} do not fit what it takes",
                    jsonrpc::clip(method)
                )
            }),
    }
}

/// `-32602`'s words for a progress token longer than an id may be, over either transport.
pub fn progress_token_too_long(token: &ProgressToken) -> Option<String> {
    match token {
        ProgressToken(rmcp::model::NumberOrString::String(s)) if s.len() > MAX_ID_BYTES => {
            Some(format!(
                "params._meta.progressToken is {} bytes long; a progress token is at most {MAX_ID_BYTES} bytes",
                s.len()
            ))
        }
        _ => None,
    }
}

/// `-32602`'s words for a progress token of a kind MCP does not have.
pub fn progress_token_kind(token: &RawValue) -> String {
    let text = token.get();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return "params._meta.progressToken is an integer past what a signed 64-bit integer holds \
                (-9223372036854775808 to 9223372036854775807); send a larger one as a string"
            .into();
    }
    let kind =
        serde_json::from_str::<Value>(text).map_or("not JSON", |v| crate::instance::json_kind(&v));
    format!(
        "params._meta.progressToken is {kind}; a progress token is a string or an integer (or leave it out)"
    )
}

/// The methods 2026-07-28 added: a session begun with `initialize` has none of them.
pub fn is_2026_method(method: &str) -> bool {
    matches!(method, "server/discover" | "subscriptions/listen")
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

/// A string member of a request's `_meta`, if it has one (at most 512 bytes).
pub fn meta_string(params: Option<&RawValue>, key: &str) -> Option<String> {
    params
        .and_then(|p| jsonrpc::members(p.get(), ["_meta"]).ok())
        .and_then(|found| found.values[0])
        .and_then(|meta| jsonrpc::members(meta.get(), [key]).ok())
        .and_then(|found| found.values[0])
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
        .filter(|v| v.len() <= 512)
}

/// The revision an `initialize`'s params ask for (at most 512 bytes).
pub fn asked_version(params: Option<&RawValue>) -> Option<String> {
    params
        .and_then(|p| jsonrpc::members(p.get(), ["protocolVersion"]).ok())
        .and_then(|found| found.values[0])
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
        .filter(|v| v.len() <= 512)
}

/// Whether a request is made under 2026-07-28 or later by its own `_meta` (revisions are dates).
pub fn modern_meta(params: Option<&RawValue>) -> bool {
    meta_string(params, "io.modelcontextprotocol/protocolVersion")
        .is_some_and(|v| inline_version(&v))
}

/// `-32601` for a method gone from the revision a request is made under: `initialize` and `ping` from
/// 2026-07-28 on, where every request carries what `initialize` said.
pub fn removed_words(method: &str) -> Option<String> {
    match method {
        "initialize" => Some(
            "Method not found: initialize is gone from MCP 2026-07-28 on; each request carries the protocol \
             version and client capabilities in its _meta instead (or send initialize without them, as a \
             2025-11-25 client)"
                .to_string(),
        ),
        "ping" => Some(
            "Method not found: ping is gone from MCP 2026-07-28 on; any request shows the server is there \
             (server/discover is the lightest)"
                .to_string(),
        ),
        _ => None,
    }
}

/// `-32601`'s message for `initialize` or `ping` on a connection begun as 2026-07-28 (over the socket;
/// HTTP's 2026-07-28 requests share none), whatever the request's `_meta` says: it keeps its revision.
pub fn removed_in_session_words(method: &str) -> String {
    format!(
        "Method not found: {} is gone from MCP 2026-07-28 on, and this connection began as 2026-07-28 and \
         keeps that revision; to speak 2025-11-25, start `ovai mcp` again and begin with initialize",
        jsonrpc::clip(method)
    )
}

/// `-32601`'s message: the method, and what this server serves instead.
pub fn method_not_found_words(method: &str) -> String {
    let method = jsonrpc::clip(method);
    if method.starts_with("notifications/") {
        return format!(
            "Method not found: {method} is a notification, which is sent without an id; with one it is a \
             request, and this server serves no request of that name"
        );
    }
    if is_known_method(&method) {
        format!(
            "Method not found: {method} is not served under the protocol revision this session speaks"
        )
    } else {
        format!(
            "Method not found: this server does not serve {method}; it serves tools/list and tools/call, \
             initialize and ping up to 2025-11-25, and server/discover and subscriptions/listen from \
             2026-07-28 on"
        )
    }
}

/// Which field of a known method's params does not fit, as far as this server can tell.
fn params_problem(method: &str, params: Option<&Value>) -> Option<String> {
    let p = match params {
        None | Some(Value::Null) if method == "initialize" => {
            return Some(
                "initialize has no params; it takes protocolVersion, capabilities and clientInfo"
                    .into(),
            );
        }
        None | Some(Value::Null) if is_2026_method(method) => {
            return Some(format!(
                "{method} has no params; from 2026-07-28 on a request's params carry its _meta \
                 (io.modelcontextprotocol/protocolVersion and clientCapabilities){}",
                if method == "subscriptions/listen" {
                    ", and subscriptions/listen's its notifications ({\"toolsListChanged\": true})"
                } else {
                    ""
                }
            ));
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
        "subscriptions/listen" => {
            field(p, "params", "notifications", Value::is_object, "an object").map(|why| {
                format!(
                    "{why}; subscriptions/listen takes {{\"notifications\": {{\"toolsListChanged\": true}}}}"
                )
            })
        }
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
        "tools/list" => read_as::<rmcp::model::PaginatedRequestParams>(params),
        "subscriptions/listen" => read_as::<rmcp::model::SubscriptionsListenRequestParams>(params),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call_of(params: &str) -> Result<String, String> {
        let raw: Box<RawValue> = serde_json::from_str(params).unwrap();
        call(Some(&raw), &mut None).map(|c| {
            format!(
                "{} {} {:?} {:?} {:?}",
                c.name,
                c.arguments.map_or("-", |a| a.get()),
                c.progress,
                c.version,
                c.missing
            )
        })
    }

    /// Only W3C's form reaches a plugin's `context.traceparent` (helper-104: "garbage" did).
    #[test]
    fn only_a_w3c_traceparent_is_taken() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(w3c_traceparent(good));
        assert!(w3c_traceparent(&format!("01{}-later", &good[2..])));
        for bad in [
            "garbage",
            "00-x",
            &format!("{good}\r\nx: y"),
            &format!("{good}-x"),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert!(!w3c_traceparent(bad), "{bad}");
        }
    }

    #[test]
    fn a_calls_params_are_read_as_claude_code_writes_them() {
        let line = include_str!("../../examples/bench/lines/claude-code-2.1.328.jsonl")
            .lines()
            .last()
            .unwrap();
        let v: Value = serde_json::from_str(line).unwrap();
        let read = call_of(&v["params"].to_string()).unwrap();
        assert_eq!(
            read,
            r#"stamp {} Some(ProgressToken(Number(2))) Some("2026-07-28") []"#
        );
        assert_eq!(
            call_of(r#"{"name":"echo","arguments":{"a":1},"_meta":{"progressToken":"p"}}"#)
                .unwrap(),
            r#"echo {"a":1} Some(ProgressToken(String("p"))) None ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]"#
        );
        // A `_meta` of null is none; a member of `_meta` given twice is read as given first.
        assert_eq!(
            call_of(r#"{"_meta":null,"name":"echo"}"#).unwrap(),
            r#"echo - None None ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]"#
        );
        assert_eq!(
            call_of(r#"{"name":"e","_meta":{"progressToken":"a","x":[{}],"progressToken":"b"}}"#)
                .unwrap(),
            r#"e - Some(ProgressToken(String("a"))) None ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]"#
        );
    }

    #[test]
    fn a_call_read_with_its_envelope_is_read_as_its_params_alone_are() {
        let cc = include_str!("../../examples/bench/lines/claude-code-2.1.328.jsonl")
            .lines()
            .last()
            .unwrap();
        let shown = |c: Result<CallParams<'_>, String>| match c {
            Ok(c) => format!(
                "{} {} {:?} {:?} {:?} {:?}",
                c.name,
                c.arguments.map_or("-", |a| a.get()),
                c.progress,
                c.version,
                c.missing,
                c.traceparent
            ),
            Err(why) => why,
        };
        let mut lines = vec![cc.to_string()];
        for params in [
            "",
            r#","params":null"#,
            r#","params":[1,{"name":"e"}]"#,
            r#","params":"e""#,
            r#","params":{"name":"e","arguments":{"a":[1]},"_meta":{"progressToken":"p","traceparent":"00-x"}}"#,
            r#","params":{"_meta":{"x":{"y":[{}]},"progressToken":7},"arguments":null,"name":"e"}"#,
            r#","params":{"name":"e","_meta":[1]}"#,
            r#","params":{"name":"e","_meta":null}"#,
            r#","params":{"name":"e","_meta":{},"_meta":{}}"#,
            r#","params":{"name":5}"#,
        ] {
            lines.push(format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call"{params}}}"#
            ));
        }
        for line in &lines {
            let (jsonrpc::Read::Request(r), read) = jsonrpc::read_within(line, "line", Some(CALL))
            else {
                panic!("{line}");
            };
            let jsonrpc::Read::Request(alone) = jsonrpc::read(line, "line") else {
                panic!("{line}");
            };
            assert_eq!(r.key(), alone.key());
            assert_eq!(
                shown(call_read(read, &mut None)),
                shown(call(alone.params, &mut None)),
                "{line}"
            );
        }
    }

    #[test]
    fn params_that_do_not_fit_are_named() {
        for (params, words) in [
            (
                r#"{"name":5}"#,
                "params.name is a number, not a string naming the tool",
            ),
            (
                r#"{"name":"e","arguments":[1]}"#,
                "params.arguments is an array, not an object",
            ),
            (r#"{"arguments":{}}"#, "params.name is missing"),
            (
                r#"{"name":"a","arguments":{},"name":"b"}"#,
                r#"give "name" more than once"#,
            ),
            (r#"[1]"#, "the params of tools/call are an array"),
            (
                r#"{"name":"e","_meta":5}"#,
                "params._meta is a number, not an object",
            ),
            (
                r#"{"name":"e","_meta":[{"progressToken":1},[2]]}"#,
                "params._meta is an array, not an object",
            ),
            (
                r#"{"name":"e","_meta":"x\"y"}"#,
                "params._meta is a string, not an object",
            ),
            (
                r#"{"name":"e","_meta":false}"#,
                "params._meta is a boolean, not an object",
            ),
            (
                r#"{"name":"e","_meta":-1e400}"#,
                "params._meta is a number, not an object",
            ),
            (r#"{"_meta":1e999}"#, "params.name is missing"),
            (
                r#"{"name":"e","_meta":{},"_meta":{}}"#,
                r#"give "_meta" more than once"#,
            ),
        ] {
            let why = call_of(params).unwrap_err();
            assert!(why.contains(words), "{params}: {why}");
        }
        let long = json!({ "name": "e", "_meta": { "progressToken": "p".repeat(2000) } });
        assert!(
            call_of(&long.to_string())
                .unwrap_err()
                .contains("progressToken is 2000 bytes long")
        );
        // Inside the arguments a key given twice is the plugin's business: the last one counts.
        assert!(call_of(r#"{"name":"e","arguments":{"a":1,"a":2}}"#).is_ok());
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
    }

    #[test]
    fn a_method_not_served_is_named_for_what_it_is() {
        assert_eq!(
            method_not_found_words("ping"),
            "Method not found: ping is not served under the protocol revision this session speaks"
        );
        assert!(method_not_found_words("resources/list").starts_with(
            "Method not found: this server does not serve resources/list; it serves tools/list and \
             tools/call, initialize and ping up to 2025-11-25"
        ));
        assert!(
            method_not_found_words("notifications/cancelled")
                .contains("is a notification, which is sent without an id")
        );
        assert!(removed_words("ping").is_some_and(|w| w.contains("ping is gone")));
    }

    #[test]
    fn a_listen_without_what_it_listens_for_is_told_what_it_takes() {
        let params = serde_json::value::RawValue::from_string("{}".into()).unwrap();
        assert_eq!(
            problem("subscriptions/listen", Some(&params)),
            "params.notifications is missing; subscriptions/listen takes {\"notifications\": \
             {\"toolsListChanged\": true}}"
        );
    }
}
