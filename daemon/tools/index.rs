//! `index`: the instance at a glance, for a session deciding what to do and whom to ask.

use serde_json::{Value, json};

use super::ToolTable;

pub const DESCRIPTION: &str = "The instance at a glance: where it lives, the User and the Leader, every seat with its \
role and whether a session holds it now, every tool with the first line of its description, and what the last \
start said about each file in plugins/. Read-only; takes no arguments.";

pub fn schema() -> Value {
    json!({ "type": "object", "properties": {}, "additionalProperties": false })
}

/// What the index shows, gathered by the caller from the daemon's state.
pub struct Facts<'a> {
    pub root: &'a str,
    pub user: &'a str,
    pub leader: &'a str,
    /// (name, role, sessions connected now), sorted by name; or why they cannot be read.
    pub seats: Result<Vec<(String, &'static str, usize)>, String>,
    pub caller: &'a str,
    pub tools: &'a ToolTable,
    pub generation: u64,
    pub loaded_at: &'a str,
    /// How many files of plugins/ are served: their tools are listed.
    pub served: usize,
    /// The plugins rows but the served files'.
    pub rows: &'a [&'a String],
    /// The plugin host's box, in words.
    pub isolation: String,
    /// maxAnswerBytes: the index is held to it, as sent.
    pub max_bytes: usize,
}

pub fn render(f: &Facts<'_>) -> String {
    use std::fmt::Write;
    // One string, written in place (a `format!` for each line cost an allocation and a copy apiece).
    let mut s = String::with_capacity(2048);
    let _ = writeln!(
        s,
        "This openovai instance lives at {}. The User is {}; the Leader's seat is {}. You are at seat {}.",
        f.root, f.user, f.leader, f.caller
    );
    s.push_str("\nSeats:\n");
    match &f.seats {
        Err(why) => {
            let _ = writeln!(s, "  cannot be listed: {why}");
        }
        Ok(seats) if seats.is_empty() => {
            s.push_str("  none yet (`ovai seat add NAME` makes one)\n")
        }
        Ok(seats) => {
            for (name, role, sessions) in seats {
                let _ = writeln!(s, "  {name}: {role}, {}", sessions_now(*sessions));
            }
        }
    }
    s.push_str("\nTools:\n");
    for e in f.tools.entries() {
        for part in ["  ", &e.name, ": ", &e.summary, "\n"] {
            s.push_str(part);
        }
    }
    let _ = write!(
        s,
        "\n{}\n\nplugins/ as read at {} (generation {}):\n",
        f.isolation, f.loaded_at, f.generation
    );
    match f.served {
        0 if f.rows.is_empty() => s.push_str("  no candidate files\n"),
        0 => {}
        1 => s.push_str("  1 file served, its tool listed above\n"),
        n => {
            let _ = writeln!(s, "  {n} files served, their tools listed above");
        }
    }
    for r in f.rows {
        for part in ["  ", r, "\n"] {
            s.push_str(part);
        }
    }
    held_to(s, f.max_bytes)
}

/// The index as much of it as `max` bytes hold as sent (JSON escapes counted), cut at a line, with how
/// many lines are not shown.
fn held_to(s: String, max: usize) -> String {
    if crate::jsonrpc::json_len(&s) <= max {
        return s;
    }
    // Room for the note, whose numbers are at most 20 digits each.
    let room = max.saturating_sub(200);
    let mut kept = 0;
    let mut used = 0;
    for line in s.split_inclusive('\n') {
        let n = crate::jsonrpc::json_len(line);
        if used + n > room {
            break;
        }
        used += n;
        kept += line.len();
    }
    let left = s[kept..].lines().count();
    format!(
        "{}({left} more lines are not shown: an answer holds at most {} bytes (maxAnswerBytes); `ovai status` in \
         the instance shows them all.)",
        &s[..kept],
        crate::names::thousands(max)
    )
}

/// `sessions_now`, and the seat's HTTP sessions that were opened and never initialised: nothing else
/// shows them, and they hold places of the seat's limit.
pub fn sessions_and_starting(n: usize, starting: usize) -> String {
    match starting {
        0 => sessions_now(n).into_owned(),
        1 => format!(
            "{}; 1 HTTP session opened and never initialized (no notifications/initialized): it ends \
             once idle for http.sessionIdleSeconds in openovai.json",
            sessions_now(n)
        ),
        s => format!(
            "{}; {s} HTTP sessions opened and never initialized (no notifications/initialized): each \
             ends once idle for http.sessionIdleSeconds in openovai.json",
            sessions_now(n)
        ),
    }
}

/// "no session now", "in a session now", "in 3 sessions now".
fn sessions_now(n: usize) -> std::borrow::Cow<'static, str> {
    match n {
        0 => "no session now".into(),
        1 => "in a session now".into(),
        n => format!("in {n} sessions now").into(),
    }
}
