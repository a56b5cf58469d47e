//! The messages between the daemon and the plugin host, one JSON object a line on a pipe each
//! way (the host reads fd 3 and writes fd 4).
//!
//! The host reports facts; every sentence a person reads is made on this side (plugins/plugin_rows.rs and
//! host/host_rows.rs for the log, answer.rs for refusals), so the wording lives in one language and one place.

use std::io::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of this protocol; the host checks its environment for it and says it in `ready`.
pub const PROTOCOL: u32 = 2;

#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "camelCase")]
pub enum ToHost<'a> {
    /// Sent once, before any load: what every call's context shares.
    #[serde(rename_all = "camelCase")]
    Init {
        root: &'a str,
        plugins_dir: &'a str,
        config: &'a Value,
        max_answer_bytes: usize,
        /// Echoed in every `stray`: what a plugin writes to fd 4 by hand cannot pass for one.
        key: u64,
        /// Files no import may load (tool files changed since they were read), as paths.
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        unread: &'a [String],
        /// Start the second thread now rather than once the imports are done.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        rescuer_first: bool,
        /// The host runs in the box: an error it may have met there is reported as such (`Thrown::boxed`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        boxed: bool,
    },
    /// Import one file and report its three exports.
    Load {
        id: u64,
        name: &'a str,
        file: &'a str,
        /// Echoed in its `loaded`: a plugin writing to fd 4 cannot report another file for it.
        key: u64,
    },
    Call {
        id: u64,
        tool: &'a str,
        /// The arguments as the caller wrote them (one JSON object, checked against the tool's schema):
        /// the line carries the text as it is.
        #[serde(skip)]
        args: &'a str,
        seat: &'a str,
        role: &'a str,
        /// The caller asked for progress (its request carried a progress token).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        progress: bool,
        /// Echoed in the answer and progress of this call only: what a plugin writes to fd 4 by hand
        /// cannot pass for another call's answer.
        key: u64,
        /// The call's W3C trace context, for the plugin to pass on (`context.traceparent`).
        #[serde(skip_serializing_if = "Option::is_none")]
        traceparent: Option<&'a str>,
    },
    /// Fire the call's AbortSignal; the host sends no answer for it afterwards.
    Cancel {
        id: u64,
        why: &'a str,
        /// Past its deadline (the reason a plugin's signal gives is then a TimeoutError, not an
        /// AbortError, as Node's own are named).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        timeout: bool,
    },
    Ping {
        n: u64,
    },
}

impl ToHost<'_> {
    pub fn line(&self) -> Vec<u8> {
        if let ToHost::Call { .. } = self {
            return call_line(self);
        }
        // Serialising these types cannot fail: every field is a string, a number or a JSON value.
        let mut s = Vec::with_capacity(256);
        let _ = serde_json::to_writer(&mut s, self);
        s.push(b'\n');
        s
    }
}

/// A call's line, its arguments written as the caller wrote them (they were read whole to be checked:
/// they are one JSON value).
fn call_line(call: &ToHost<'_>) -> Vec<u8> {
    let ToHost::Call {
        id,
        tool,
        args,
        seat,
        role,
        progress,
        key,
        traceparent,
    } = *call
    else {
        return Vec::new();
    };
    let mut s = Vec::with_capacity(args.len() + 128);
    let string = |s: &mut Vec<u8>, text: &str| {
        let _ = serde_json::to_writer(&mut *s, text);
    };
    s.extend_from_slice(b"{\"t\":\"call\",\"id\":");
    let _ = write!(s, "{id}");
    s.extend_from_slice(b",\"tool\":");
    string(&mut s, tool);
    s.extend_from_slice(b",\"args\":");
    s.extend_from_slice(args.as_bytes());
    s.extend_from_slice(b",\"seat\":");
    string(&mut s, seat);
    s.extend_from_slice(b",\"role\":");
    string(&mut s, role);
    // Every field the host reads is written, null or false included: one left out would be looked up on
    // Object.prototype, where a plugin's getter would be handed the message, its key and arguments.
    s.extend_from_slice(if progress {
        b",\"progress\":true"
    } else {
        b",\"progress\":false"
    });
    s.extend_from_slice(b",\"key\":");
    let _ = write!(s, "{key}");
    s.extend_from_slice(b",\"traceparent\":");
    match traceparent {
        Some(tp) => string(&mut s, tp),
        None => s.extend_from_slice(b"null"),
    }
    s.extend_from_slice(b"}\n");
    s
}

#[derive(Debug, Deserialize)]
#[serde(tag = "t", rename_all = "camelCase")]
pub enum FromHost {
    Ready {
        v: u32,
        node: String,
        pid: u32,
    },
    Loaded(Box<Loaded>),
    Answer(Box<Answer>),
    Progress(Progress),
    /// With the host's key: a plugin's Worker that reads fd 3 sees the pings, never the key.
    Pong {
        n: u64,
        key: u64,
    },
    /// An error a plugin left behind outside a call (a timer that threw, a promise nobody awaited).
    Stray(Stray),
    /// A plugin is ending the host (`process.kill`, `abort`, `reallyExit`): where it asked, said just
    /// before the end.
    Ended(EndedReport),
    /// A line a plugin printed, or how many of its lines the host dropped in a second.
    Out(Printed),
}

#[derive(Debug, Deserialize)]
pub struct Printed {
    /// The host's key, as `init` gave it: a plugin writing to fd 4 cannot print as another file.
    #[serde(default)]
    pub key: u64,
    /// `plugins/REL`: the file whose code printed it.
    pub file: String,
    /// "stdout" or "stderr".
    pub stream: String,
    #[serde(default)]
    pub text: Option<String>,
    /// Bytes of the line the host cut off before it sent the rest.
    #[serde(default)]
    pub cut: u64,
    #[serde(default)]
    pub dropped: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct EndedReport {
    /// The host's key, as `init` gave it: a plugin writing to fd 4 cannot say this for another file.
    #[serde(default)]
    pub key: u64,
    /// How: `process.reallyExit(7)`, `process.abort()`, `process.kill(PID, SIGNAL)`.
    #[serde(default)]
    pub how: String,
    /// Every place in plugins/ on the stack (`plugins/REL:LINE:COLUMN`), innermost first.
    #[serde(default)]
    pub places: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct Stray {
    /// The host's key, as `init` gave it.
    #[serde(default)]
    pub key: u64,
    /// "threw" or "rejected".
    pub how: String,
    pub message: String,
    /// `plugins/REL:LINE:COLUMN`, when its stack names a place there.
    #[serde(default)]
    pub at: Option<String>,
}

/// A call's `context.progress(message, { progress, total })`, as the host reports it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Progress {
    pub id: u64,
    #[serde(default)]
    pub key: u64,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub progress: Option<f64>,
    #[serde(default)]
    pub total: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Loaded {
    pub id: u64,
    /// The load's key, as the daemon sent it.
    #[serde(default)]
    pub key: u64,
    pub ok: bool,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub input_schema: Option<Value>,
    /// Importing the module threw.
    #[serde(default)]
    pub import: Option<Thrown>,
    /// The module loaded, but its exports are not the three the contract asks for.
    #[serde(default)]
    pub exports: Option<ExportsReport>,
    /// The inputSchema cannot be turned into JSON (a cycle, a BigInt).
    #[serde(default)]
    pub schema_json: Option<String>,
    /// The description and inputSchema together are this many bytes, more than maxAnswerBytes.
    #[serde(default)]
    pub too_big: Option<u64>,
    /// The inputSchema nests this many levels deep as JSON, more than a line the daemon reads may.
    #[serde(default)]
    pub too_deep: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct Thrown {
    /// The error's first line, as `String(err)` gives it.
    pub message: String,
    /// `LINE:COLUMN` in the plugin's file, or `REL:LINE:COLUMN` in a module it imports.
    #[serde(default)]
    pub at: Option<String>,
    /// What of the box the error may have met: "tmp" (a file not found in a temporary folder, which is
    /// the box's own), "socket" (a Unix socket, which the box refuses), "readonly", "late:FOLDER" (a
    /// folder of the root made after the host started) or "git" (a program meeting the read-only .git/).
    #[serde(default, rename = "box")]
    pub boxed: Option<String>,
    /// Environment variables the error's words name that the host did not start with (eight at most).
    #[serde(default, rename = "envUnset")]
    pub env_unset: Vec<String>,
    /// A TypeError of a frozen object's: context.config is one.
    #[serde(default)]
    pub frozen: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportsReport {
    pub missing: Vec<String>,
    pub wrong: Vec<WrongExport>,
    pub empty_description: bool,
    pub has_default: bool,
    /// Some of the module's other named exports, where a misspelt one may be.
    #[serde(default)]
    pub others: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct WrongExport {
    pub name: String,
    /// "a number", "an array", "null".
    pub is: String,
    /// "a string", "an object", "a function".
    pub want: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub id: u64,
    /// The call's key, as the daemon sent it.
    #[serde(default)]
    pub key: u64,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub refused: Option<String>,
    /// What `run` answered instead of `{ text }` or `{ refused }`, in words.
    #[serde(default)]
    pub bad: Option<String>,
    #[serde(default)]
    pub threw: Option<Thrown>,
    /// The text was larger than maxAnswerBytes as sent: its size in bytes.
    #[serde(default)]
    pub too_big: Option<u64>,
    /// And its size as sent, JSON escapes and all.
    #[serde(default)]
    pub as_sent: Option<u64>,
    /// What was too big was a `{ refused }`.
    #[serde(default)]
    pub refusal: bool,
    /// The host has no such tool (it failed to import again after a restart).
    #[serde(default)]
    pub unknown: bool,
    /// `run` called process.exit (with this code, maybe empty); the host stayed up.
    #[serde(default)]
    pub exited: Option<String>,
    /// Set by the daemon's reader (`host::link`) in place of `text` for the common answer: the text as a
    /// JSON string, as the host wrote it, when its escapes are the ones serde_json writes.
    #[serde(skip)]
    pub text_json: Option<String>,
    /// Set by the daemon, never read off the wire: the answer's line arrived broken (bytes a plugin wrote
    /// to fd 4 landed inside it).
    #[serde(skip)]
    pub damaged: bool,
}

impl Answer {
    /// Its text, however it was read.
    pub fn text(&self) -> Option<String> {
        self.text_json
            .as_deref()
            .map(json_text)
            .or_else(|| self.text.clone())
    }
}

/// The text of a JSON string as written (`text_json`), read back.
pub fn json_text(json: &str) -> String {
    serde_json::from_str(json).unwrap_or_default()
}

/// A file to import: the tool's name, and the module's absolute path.
#[derive(Debug, Clone)]
pub struct ToImport {
    pub name: String,
    pub path: String,
}
