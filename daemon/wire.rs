//! The first line on the daemon's socket, and the control replies: one binary is on both ends, so both
//! ends share these types.
//!
//! A seat presents its secret in the hello and the rest of the connection is MCP (over two pipes the
//! welcome hands over, when the hello asks for them); a control client
//! (every `ovai` command that asks the running server: restart, status, stop, seat, tools, web)
//! presents the control secret from `.ovai/` and one
//! operation, and reads one JSON reply.

use serde::{Deserialize, Serialize};

/// Bumped when the hello changes; a bridge and a daemon of different versions say so instead of guessing.
pub const VERSION: u32 = 1;
/// The longest hello line the daemon reads.
pub const MAX_HELLO: u64 = 8 * 1024;

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    pub ovai: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<ControlOp>,
    /// Who asks for the operation, for runtime.log (`ovai restart`, the service manager's reload, `ovai
    /// seat add w2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// A seat's session asks to carry its MCP lines over two pipes the daemon makes and hands over with
    /// its welcome, rather than over this socket: a pipe costs each message less of the kernel's time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pipes: bool,
    /// The instance's root as the client found it: where the socket it reached is. Another than the
    /// daemon's own means the instance was moved while the daemon ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

impl Hello {
    /// The hello, saying where the client found the instance.
    pub fn from_root(self, root: &std::path::Path) -> Self {
        Self {
            root: Some(root.display().to_string()),
            ..self
        }
    }

    pub fn seat(secret: &str) -> Self {
        Self {
            ovai: VERSION,
            seat_secret: Some(secret.trim().to_string()),
            ..Self::default()
        }
    }

    pub fn control(secret: &str, op: ControlOp, why: Option<&str>) -> Self {
        Self {
            ovai: VERSION,
            control_secret: Some(secret.trim().to_string()),
            op: Some(op),
            why: why.map(str::to_string),
            ..Self::default()
        }
    }
}

/// What a control client asks of the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ControlOp {
    /// Read plugins/ and openovai.json again into a new generation (`ovai restart`).
    Restart,
    /// What the daemon serves, and to whom (`ovai status`, `ovai seat list`).
    Status,
    /// The seats changed on disk: end the sessions of seats that are gone or re-keyed, and give the
    /// plugin host a box that hides the new secrets (`ovai seat …`).
    Seats,
    /// The seats are about to change on disk: end boxed plugin hosts and start none until `Seats` says
    /// they have changed, so no box sees a secret it was not made to hide.
    SeatsHold,
    /// Drain and exit, as on SIGTERM (`ovai stop`).
    Stop,
    /// The tools served now, each as `tools/list` sends it (`ovai tools`).
    Tools,
    /// A one-time link to the status page (`ovai web`).
    Web,
    /// End every session of the status page and every link not yet used (`ovai web --end`).
    WebEnd,
}

/// The daemon's answer to `WebEnd`: what it ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebEnded {
    pub sessions: usize,
    pub links: usize,
}

/// The daemon's answer to `Web`: the page's one-time URL.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebReply {
    pub url: String,
    /// How long the link is good for, in seconds.
    pub seconds: u64,
}

/// The daemon's answer to a seat's hello.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Welcome {
    pub ok: bool,
    /// Why the connection is refused, as a sentence for the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// This line carries the session's two pipes (SCM_RIGHTS: the end the client writes into, then the
    /// end it reads from), and the socket carries nothing more but a `Farewell`; the client keeps it
    /// open all the same, as the daemon takes its closing for the client's end. Absent (an older daemon, none asked for, or
    /// none could be made), the session goes on over the socket.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pipes: bool,
    /// The refusal holds for as long as the client runs: the seat's secret itself (no seat's, or
    /// several seats'), or another version of the binary. Any other may pass (the seat book mended, a
    /// place freed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub for_good: bool,
}

/// Said of a session whose seat was removed: its bridge then does not tell it to start again, which
/// would not help.
pub const SEAT_GONE: &str =
    "no session started at its desk reaches the server until the seat is added again";

/// The daemon's last line on a session's socket (a session over pipes) when it ended the session on
/// purpose, its seat re-keyed or removed: written once the session's last answer is out, after which it
/// read nothing more. What the client sent since is answered in these words, for good.
#[derive(Debug, Serialize, Deserialize)]
pub struct Farewell {
    /// Why, as a sentence's middle ("the seat w1 was removed …").
    pub ended: String,
}

/// A control reply: `{"ok": true, …the operation's fields}` or `{"ok": false, "error": "…"}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Reply<T> {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(flatten, default = "Option::default")]
    pub body: Option<T>,
}

impl<T> Reply<T> {
    pub fn done(body: T) -> Self {
        Self {
            ok: true,
            error: None,
            body: Some(body),
        }
    }

    pub fn refused(why: String) -> Self {
        Self {
            ok: false,
            error: Some(why),
            body: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestartReply {
    pub generation: u64,
    /// openovai.json's warnings (a key misspelt), then the plugins rows of the new reading.
    pub rows: Vec<String>,
    /// Whether the tool list differs from the one before (and list_changed was sent).
    pub changed: bool,
    /// The tools served before and now whose file changed: their new code runs now.
    #[serde(default)]
    pub new_code: Vec<String>,
    /// What the restart's runtime.log row says (what changed, and what the list costs), said to the one
    /// who asked.
    #[serde(default)]
    pub said: String,
    /// The sessions told the tool list changed.
    #[serde(default)]
    pub told: usize,
    /// `.mjs` files in plugins/ the new reading does not serve (its rows say why).
    #[serde(default)]
    pub not_served: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StopReply {
    /// The daemon's pid, for the client to wait on.
    pub pid: u32,
    /// The calls in flight when it was asked, which it lets finish first.
    #[serde(default)]
    pub calls: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolsReply {
    pub tools: Vec<ToolEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolEntry {
    pub name: String,
    /// The tool as `tools/list` sends it (name, description, inputSchema, annotations).
    pub entry: serde_json::Value,
    /// What it costs every session each turn: the UTF-8 bytes of `entry`.
    pub bytes: usize,
}

/// One tool's calls since the daemon started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolFigures {
    pub name: String,
    pub calls: u64,
    /// Calls answered with a refusal (`isError`), whoever refused.
    pub refusals: u64,
    /// Calls whose plugin host stopped under them.
    pub host_stops: u64,
    /// Calls refused for a fault of the tool's code: it threw, or answered wrongly.
    #[serde(default)]
    pub failures: u64,
    /// Calls given up at callTimeoutSeconds: the tool's own slowness, or a host another call held.
    #[serde(default)]
    pub timeouts: u64,
    /// Calls refused before they ran, for arguments that do not fit the tool's inputSchema.
    #[serde(default)]
    pub misfits: u64,
    /// Calls the server refused without running them: it was stopping, or a new host did not import the
    /// tool's file again (changed or removed since the read, or its import failed).
    #[serde(default)]
    pub unrun: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeatsReply {
    /// The seat of each session ended, sorted: a seat is there once for each of its sessions.
    pub ended: Vec<String>,
    /// Held: the files of the calls in flight that did not finish within the drain, and were stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<String>,
    /// Served files the host started for the change leaves out: changed since the read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// The daemon as `ovai status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReply {
    pub root: String,
    pub pid: u32,
    pub started_at: String,
    pub uptime_seconds: u64,
    pub generation: u64,
    pub loaded_at: String,
    pub node: String,
    pub host: HostStatus,
    pub seats: Vec<SeatStatus>,
    /// Why the seats cannot be listed (seats.json does not parse), when they cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seats_error: Option<String>,
    /// Sessions connected now.
    pub sessions: usize,
    pub tools: Vec<String>,
    /// The plugins rows of the generation served now.
    pub rows: Vec<String>,
    /// Each tool's calls since the daemon started, by name.
    #[serde(default)]
    pub figures: Vec<ToolFigures>,
    /// Files in plugins/ that changed since they were read (`plugins/x.mjs`).
    pub stale: Vec<String>,
    /// Files in plugins/ that appeared since the last read.
    #[serde(default)]
    pub new_files: Vec<String>,
    /// Served files gone from plugins/ since the last read.
    #[serde(default)]
    pub removed_files: Vec<String>,
    /// Files not served gone from plugins/ since the last read.
    #[serde(default)]
    pub removed_unserved: Vec<String>,
    /// Modules of plugins/' folders (and packages) read at the last read and gone since.
    #[serde(default)]
    pub removed_modules: Vec<String>,
    /// openovai.json reads otherwise now than when the generation served was read.
    #[serde(default)]
    pub config_changed: bool,
    /// The Streamable HTTP endpoint's URL, when the daemon listens for seats on other machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// Where Prometheus reads the figures, when `"metrics"` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    /// Where the status page is, when `"web"` is on (`ovai web` prints a link that opens it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web: Option<String>,
    /// Listeners openovai.json asks for that could not listen (the status page's, the metrics'), each
    /// as a sentence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unserved: Vec<String>,
    /// The hosts of earlier generations still finishing calls begun before a restart, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finishing: Vec<String>,
    /// runtime.log cannot be written now, in words (its rows go to the server's stderr).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_unwritable: Option<String>,
    /// calls.jsonl cannot be written now, in words (with `callLog` on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_unwritable: Option<String>,
    /// The version of ovai this server runs.
    #[serde(default)]
    pub version: String,
    /// The binary it was started from was replaced or removed since, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_replaced: Option<String>,
    /// The calls plugin hosts are running now, the longest-running first (at most MAX_RUNNING_SHOWN).
    #[serde(default)]
    pub calls_running: Vec<RunningCall>,
    /// How many calls to plugins are in flight now, those waiting for a host included.
    #[serde(default)]
    pub calls_running_total: usize,
}

/// How many running calls `ovai status` and the page are sent.
pub const MAX_RUNNING_SHOWN: usize = 50;

/// A call a plugin host is running now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunningCall {
    /// `plugins/x.mjs`.
    pub file: String,
    pub seat: String,
    /// How long it has run, in whole seconds.
    pub seconds: u64,
    /// When it was made, in milliseconds since the Unix epoch (a page counts the seconds itself).
    #[serde(default)]
    pub started_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStatus {
    /// The live host's pid; none while it is down or being respawned.
    pub pid: Option<u32>,
    /// How many times a new host was started after one stopped.
    pub respawns: u32,
    /// Why the host stays down, when it does.
    pub down: Option<String>,
    /// The box it runs in (or why none), in words.
    pub isolation: String,
    /// What its box may hold, and how that is held, in words.
    #[serde(default)]
    pub bounds: String,
    /// For each tool the live host does not answer (a file a new host did not import), the sentence
    /// its callers are refused with.
    #[serde(default)]
    pub not_answering: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeatStatus {
    pub name: String,
    pub role: String,
    /// Sessions holding this seat now.
    pub sessions: usize,
    /// HTTP sessions of it opened and never initialised (counted apart: they serve nothing yet).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub starting: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One value as one line of JSON.
pub fn line<T: Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_carry_their_fields_beside_ok() {
        let r = Reply::done(SeatsReply {
            ended: vec!["w1".into()],
            cut: Vec::new(),
            left_out: Vec::new(),
        });
        assert_eq!(line(&r), "{\"ok\":true,\"ended\":[\"w1\"]}\n");
        let back: Reply<SeatsReply> = serde_json::from_str(&line(&r)).unwrap();
        assert_eq!(back.body.unwrap().ended, ["w1"]);
        let refused: Reply<SeatsReply> =
            serde_json::from_str(&line(&Reply::<SeatsReply>::refused("no".into()))).unwrap();
        assert!(!refused.ok && refused.body.is_none());
        assert_eq!(refused.error.as_deref(), Some("no"));
        assert_eq!(
            serde_json::to_string(&Hello::control("s", ControlOp::Restart, None)).unwrap(),
            r#"{"ovai":1,"controlSecret":"s","op":"restart"}"#
        );
    }
}
