//! What a caller reads when a tool call ends: the tool's own text, its own refusal, or a sentence naming
//! the tool (or the plugin's file) and what went wrong. Every way a call can end is put into words here,
//! from the typed causes the host, the room and the server hand over.

use std::time::Duration;

use crate::host::Ended;
use crate::host::ending::{DownCause, HostEnd, Next, NoHost, RetireWhy};
use crate::host::host_rows as rows;
use crate::host::protocol::{Answer, Thrown};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Text(String),
    /// A text answer as the host wrote it: a JSON string, quotes and all, whose escapes are those
    /// serde_json writes (`host::link` reads it so): written into the answer line as it stands, where
    /// reading it into a String and escaping it again cost a tenth of the daemon's work on a call.
    Json(String),
    /// A refusal: words the calling session reads (`isError: true`), never a protocol error.
    Refused(String),
    /// The caller cancelled; MCP sends no answer for it.
    Cancelled,
    /// The caller cancelled before any plugin host was sent the call: answered as `Cancelled`, but a
    /// call stopped by a change of its seat then says it was not made.
    Unsent,
}

/// What the caller of a plugin reads, however its call ended.
pub fn plugin(file: &str, ended: Ended, max_answer_bytes: usize) -> Outcome {
    match ended {
        Ended::Answered(a) => from_host(file, *a, max_answer_bytes),
        Ended::HostEnded(end) => host_ended(file, &end.why, end.in_flight),
        Ended::NotRun(why) => not_run(file, &why),
        Ended::NotReimported(why) => Outcome::Refused(rows::not_reimported(file, &why)),
        Ended::Deadline { limit, silent } => deadline(file, limit, silent),
        Ended::Cancelled => Outcome::Cancelled,
        Ended::Unsent => Outcome::Unsent,
    }
}

pub fn from_host(file: &str, mut a: Answer, max_answer_bytes: usize) -> Outcome {
    let refusal = a.refusal;
    let too_big = |bytes: usize, sent: usize, refusal: bool| {
        let escaped = if sent > bytes {
            format!(
                ", which take {sent} as sent (JSON writes each control character, quote and backslash \
                 escaped)"
            )
        } else {
            String::new()
        };
        let answered = if refusal {
            format!("refused with {bytes} bytes of words")
        } else {
            format!("answered {bytes} bytes of text")
        };
        Outcome::Refused(format!(
            "{file} {answered}{escaped}, more than the {max_answer_bytes} this server passes on \
             (maxAnswerBytes in openovai.json sets the limit)."
        ))
    };
    if a.damaged {
        return Outcome::Refused(format!(
            "{file} ran, but its answer was damaged on its way from the plugin host: bytes written to the \
             host's protocol pipe (fd 4), most likely by a plugin, landed inside it, and the answer is lost."
        ));
    }
    // An answer that shows nothing would reach the caller as silence.
    let empty_text = |text: &str| {
        let shown = if text.is_empty() {
            "is empty".to_string()
        } else if text.trim().is_empty() {
            "is blank (spaces and line ends only)".to_string()
        } else {
            match text.chars().count() {
                1 => "shows nothing (1 character, a control, format or blank one)".to_string(),
                n => format!(
                    "shows nothing ({} characters, all control, format or blank ones)",
                    crate::names::thousands(n)
                ),
            }
        };
        Outcome::Refused(format!(
            "{file} answered a {{ text }} that {shown}: a tool answers {{ text }} with what to tell the \
             caller, or {{ refused }} with why not."
        ))
    };
    // An answer is measured as it is sent, escapes and all: what a session's answers in flight hold
    // is then what the cap says, whatever their characters.
    if let Some(json) = a.text_json.take() {
        let sent = json.len().saturating_sub(2);
        if sent <= max_answer_bytes {
            return if shows_nothing(&json) {
                empty_text(&crate::host::protocol::json_text(&json))
            } else {
                Outcome::Json(json)
            };
        }
        return too_big(crate::host::protocol::json_text(&json).len(), sent, false);
    }
    // The host checks the size; bytes a plugin wrote to fd 4 inside a string can still add to it.
    if let Some(text) = a.text {
        return if crate::jsonrpc::json_len(&text) > max_answer_bytes {
            too_big(text.len(), crate::jsonrpc::json_len(&text), false)
        } else if blank(&text) {
            empty_text(&text)
        } else {
            Outcome::Text(text)
        };
    }
    if let Some(refused) = a.refused {
        return if crate::jsonrpc::json_len(&refused) > max_answer_bytes {
            too_big(refused.len(), crate::jsonrpc::json_len(&refused), true)
        } else if blank(&refused) {
            // A refusal is words the caller acts on: an empty one would reach it as silence.
            Outcome::Refused(format!(
                "{file} refused without saying why (its {{ refused }} is empty)."
            ))
        } else {
            Outcome::Refused(refused)
        };
    }
    if let Some(bytes) = a.too_big {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        let sent = a
            .as_sent
            .map_or(bytes, |s| usize::try_from(s).unwrap_or(usize::MAX));
        return too_big(bytes, sent, refusal);
    }
    if let Some(t) = a.threw {
        return Outcome::Refused(threw(file, &t));
    }
    if let Some(code) = a.exited {
        return Outcome::Refused(format!(
            "{file} called process.exit({code}), which would end the plugin host for everybody; the host stayed up and this call was refused."
        ));
    }
    if a.unknown {
        return Outcome::Refused(format!(
            "{file} is not loaded in the plugin host; run `ovai restart` to load it again."
        ));
    }
    // The plugin's words (an error's message, in `{ refused: new Error(…) }`) are shown escaped.
    let what = a.bad.map_or_else(
        || "something unreadable".into(),
        |b| crate::names::escape_controls(&b, false).into_owned(),
    );
    Outcome::Refused(format!(
        "{file} answered {what}: a tool answers {{ text }} or {{ refused }}, with a string in it."
    ))
}

/// Whether a JSON string (quotes and all) shows nothing: decided by its first character where that is
/// a letter, digit or mark (any real answer), else read whole.
fn shows_nothing(json: &str) -> bool {
    match json.as_bytes().get(1) {
        Some(b) if b.is_ascii_graphic() && *b != b'\\' && *b != b'"' => false,
        _ => blank(&crate::host::protocol::json_text(json)),
    }
}

/// Whether a text shows nothing: only spaces, controls, format characters and fillers (`names::unseen`),
/// and the blank Braille pattern.
fn blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || c.is_control() || crate::names::unseen(c) || c == '\u{2800}')
}

/// Whether the host's answer is the tool's own words, a text or a refusal with something in it:
/// anything else is a fault of the tool's code (`ovai status` counts it so).
pub fn own_words(a: &Answer) -> bool {
    match (&a.text_json, &a.text, &a.refused) {
        (Some(json), _, _) => !shows_nothing(json),
        (None, Some(text), _) => !blank(text),
        (None, None, Some(refused)) => !blank(refused),
        (None, None, None) => false,
    }
}

pub fn threw(file: &str, t: &Thrown) -> String {
    // A message's lines stay lines, as a refusal's do (a failed command's output reads as it was
    // printed); runtime.log and a terminal escape them where they show it.
    let message = crate::names::escape_controls(&t.message, true);
    let box_said = rows::thrown_notes(t, false);
    match &t.at {
        Some(at) => format!("{file} threw at {at}: {message}{box_said}"),
        None => format!("{file} threw: {message}{box_said}"),
    }
}

/// The call's host ended while it ran, with `in_flight` calls on it, this one included.
pub fn host_ended(file: &str, end: &HostEnd, in_flight: usize) -> Outcome {
    // Whose code ended the host, where it is known; else the caller is told how many others ran, since
    // "the host stopped while it ran" alone reads as its own tool's fault. Not which files: other
    // seats' calls are theirs.
    let (what, next, known) = match end {
        HostEnd::Stopped {
            exit,
            out_of_memory,
            by,
            next,
        } => {
            let what = rows::what_happened(exit, *out_of_memory);
            // A call of another file ended by a plugin is told which, as the host said.
            let what = match by {
                Some(at) => format!("{what}, ended by a plugin at {at},"),
                None => what,
            };
            (what, *next, by.is_some())
        }
        HostEnd::Hung {
            exit,
            after,
            at,
            next,
        } => (
            rows::hung(after.as_secs(), exit, at.as_deref()),
            *next,
            at.is_some(),
        ),
        HostEnd::Deaf { exit, next } => (rows::deaf(exit), *next, false),
        HostEnd::OverBound {
            exit,
            exceeded,
            next,
        } => (rows::over_bound(exceeded, exit), *next, false),
        HostEnd::Replaced => {
            return Outcome::Refused(format!(
                "{file} did not answer: the seats changed while it ran, and it had not finished {} s later, \
                 when its plugin host, which could have read the new secrets, was replaced. Nothing was \
                 retried. It may have run in part: look before calling it again.",
                crate::host::supervisor::SEAT_DRAIN.as_secs()
            ));
        }
        HostEnd::Retired(r) => {
            let why = match r.why {
                RetireWhy::Restarted => crate::host::ending::OUTLIVED.to_string(),
                RetireWhy::ShuttingDown(signal) => format!(
                    "the server is shutting down ({signal}) and the call did not finish within {} s (shutdownGraceSeconds in openovai.json)",
                    r.grace.as_secs()
                ),
                RetireWhy::StoppedAtOnce(signal) => {
                    format!("the server, stopping, was asked again ({signal}) and ended it at once")
                }
            };
            return Outcome::Refused(format!("{file} did not answer: {why}."));
        }
    };
    let also = match (known, in_flight.saturating_sub(1)) {
        (true, _) | (_, 0) => String::new(),
        (false, 1) => {
            ", with one other call in flight (which of the two stopped it, if either, is not known)"
                .to_string()
        }
        (false, n) => format!(
            ", with {n} other calls in flight (which of them stopped it, if any, is not known)"
        ),
    };
    let then = match next {
        Next::Respawn => {
            "A new plugin host is being started for the next call; nothing was retried.".to_string()
        }
        Next::StaysDown { stops, window } => format!(
            "It stopped {stops} times within {} s, so it stays down until `ovai restart`: every plugin is refused until then.",
            window.as_secs()
        ),
    };
    Outcome::Refused(format!(
        "{file} did not answer: the plugin host {what} while it ran{also}. {then}"
    ))
}

/// Why the host stays down, as `ovai status` and refusals say it.
pub fn down(cause: &DownCause) -> String {
    match cause {
        DownCause::CrashLoop {
            stops,
            window,
            last_at,
            last_called,
        } => format!(
            "the plugin host stopped {stops} times within {} s{}{}, so it stays down until `ovai restart`",
            window.as_secs(),
            last_at
                .as_ref()
                .map(|at| format!(" (the last time from {at})"))
                .unwrap_or_default(),
            rows::last_called_said(last_at.as_deref(), last_called)
        ),
        DownCause::CannotRespawn(e) => format!(
            "a new plugin host could not be started ({e}), so it stays down until `ovai restart`"
        ),
    }
}

/// No host could take the call.
pub fn not_run(file: &str, why: &NoHost) -> Outcome {
    let why = match why {
        NoHost::Down(cause) => down(cause),
        NoHost::Ended => "the plugin host has been ended".to_string(),
        NoHost::NotBack(waited) => format!(
            "a new plugin host is being started and was not ready within {} s",
            waited.as_secs().max(1)
        ),
    };
    Outcome::Refused(format!("{file} was not run: {why}."))
}

pub fn deadline(file: &str, limit: Duration, silent: bool) -> Outcome {
    // The host not answering even its heartbeat: the event loop is held, and this call may not have
    // started at all, which "it may still finish" would hide.
    if silent {
        return Outcome::Refused(format!(
            "{file} did not answer in time: the call was given up after {} s, in which the plugin host \
             answered nothing, not even the server's heartbeat. Its event loop is held, by this call's \
             code or another call's, so this call may not have started; the host is ended and started \
             again if it stays so for hostHangSeconds, and a call after that runs (callTimeoutSeconds in \
             openovai.json sets the limit).",
            limit.as_secs()
        ));
    }
    Outcome::Refused(format!(
        "{file} did not answer in time: the call was given up after {} s and its signal fired, but \
         what it started may still finish: look before calling it again (callTimeoutSeconds in \
         openovai.json sets the limit).",
        limit.as_secs()
    ))
}

pub fn shutting_down(tool: &str) -> Outcome {
    Outcome::Refused(format!(
        "{tool} was not run: the server is shutting down. Call it again once it is back."
    ))
}

/// The text of the `isError` result a cancelled call gets, where the protocol sends one.
pub fn cancelled(tool: &str, at: &str) -> String {
    format!("The call to {tool} was cancelled at {at}.")
}

/// The text of a call stopped because a change of its seat ended its session: `removed`, the seat went
/// (`ovai seat remove`); else it was given a new secret (`ovai seat rotate`), which a session over HTTP
/// gets with the desk, one over the socket when its client starts `ovai mcp` again.
/// `sent`: a plugin host had the call (it may have run in part); else it waited for one, and was not made.
pub fn seat_changed(tool: &str, seat: &str, removed: bool, over_http: bool, sent: bool) -> String {
    let stopped = if sent {
        format!("The call to {tool} was stopped: the seat {seat}")
    } else {
        format!("The call to {tool} was not made (it waited for the plugin host): the seat {seat}")
    };
    if removed {
        let part = if sent {
            " It may have run in part."
        } else {
            ""
        };
        return format!(
            "{stopped} was removed (`ovai seat remove`), which ends its sessions.{part}"
        );
    }
    let again = if over_http {
        "with the seat's new secret (ask the operator for its desk again: `ovai seat rotate` wrote it)"
    } else {
        "in a session started again (its client reads the new secret when it starts `ovai mcp` again)"
    };
    let then = if sent {
        format!("It may have run in part: look before calling it again, {again}.")
    } else {
        format!("Call it again {again}.")
    };
    format!(
        "{stopped} was given a new secret (`ovai seat rotate`), which ends the sessions holding the old one. \
         {then}"
    )
}

/// The JSON-RPC error message for a call to a tool this server does not have.
/// `rows`: the plugins rows of the reading served, where the file a tool of this name would come from
/// may be said to be not served, and why.
pub fn unknown_tool<'a>(
    name: &str,
    names: impl Iterator<Item = &'a str>,
    rows: &[String],
) -> String {
    let names: Vec<&str> = names.collect();
    // A name that is not a plain word (empty, spaces, controls) is shown quoted and escaped, and a long
    // one clipped: the message is no echo chamber for what a session sends.
    let clipped: String = name.chars().take(100).collect();
    let plain = !name.is_empty()
        && clipped.len() == name.len()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let shown = if plain {
        name.to_string()
    } else {
        let more = if clipped.len() < name.len() {
            "…"
        } else {
            ""
        };
        crate::names::escape_controls(&format!("{clipped:?}{more}"), false).into_owned()
    };
    if plain && let Some(why) = not_served_why(name, rows) {
        return format!(
            "There is no tool called {shown} on this server: {why}. The tools are {}.",
            names.join(", ")
        );
    }
    let meant = if plain { near_name(name, &names) } else { None };
    let meant = meant.map_or(String::new(), |m| format!(" (meant {m}?)"));
    format!(
        "There is no tool called {shown} on this server{meant}; the tools are {}.",
        names.join(", ")
    )
}

/// The tool a slip of `name` may have meant: the same with `_` for `-` or another case, or a letter or two
/// off (one for a short name).
fn near_name<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    // The name as a client shows it to its model, the server's name before it (`mcp__openovai__room` in
    // Claude Code, `openovai_room`, `openovai.room`).
    let bare = name.strip_prefix("mcp__").unwrap_or(name);
    if let Some(rest) = bare.strip_prefix("openovai")
        && let Some(tool) = ["__", "_", "-", ".", ":", "/"]
            .iter()
            .find_map(|sep| rest.strip_prefix(sep))
        && let Some(found) = names.iter().copied().find(|n| *n == tool)
    {
        return Some(found);
    }
    let same = |n: &str| {
        n.replace('_', "-")
            .eq_ignore_ascii_case(&name.replace('_', "-"))
    };
    let slips = if name.len() < 5 { 1 } else { 2 };
    let lower = name.to_ascii_lowercase();
    names.iter().copied().find(|n| same(n)).or_else(|| {
        names
            .iter()
            .copied()
            .filter(|n| n.len().abs_diff(name.len()) <= slips)
            .find(|n| crate::names::distance(&n.to_ascii_lowercase(), &lower) <= slips)
    })
}

/// Why the file a tool of this name would come from is not served, with what to do, where `rows` (the
/// plugins rows of a reading) say.
pub fn not_served_why(tool: &str, rows: &[String]) -> Option<String> {
    let file = format!("plugins/{tool}.mjs");
    let row = rows.iter().find(|r| {
        r.strip_prefix(&file)
            .is_some_and(|r| r.starts_with(" is not served: "))
    })?;
    let row = row.trim_end_matches('.');
    // A row that says what to do already (rename one, then `ovai restart`) is not told twice.
    Some(if row.contains("`ovai restart`") {
        row.to_string()
    } else {
        format!("{row}. Fix the file, then `ovai check {file}` and `ovai restart`")
    })
}

/// A room call that could not be done. A message that could not be written was not said.
pub fn room_failed(e: &crate::tools::room::RoomError) -> Outcome {
    use crate::tools::room::RoomError;
    Outcome::Refused(match e {
        RoomError::Write(err) => {
            format!("The room could not be written (room.jsonl: {err}). Your message was not said.")
        }
        RoomError::Read(err) => format!("The room could not be read (room.jsonl: {err})."),
        RoomError::Gone => "The caller went away before the room was read.".to_string(),
        RoomError::TooFast(wait) => format!(
            "The room takes at most 1 MiB of messages a minute from a seat, and this seat has said that \
             much: your message was not said. Say it again in {wait} s."
        ),
        RoomError::Blank => "Your message holds only spaces and line breaks, which would read as an empty \
                             message under your seat: it was not said. Say something, or leave `say` out to \
                             read the room."
            .to_string(),
        RoomError::TooLong(bytes) => format!(
            "Your message is {} bytes, and the room takes at most {} bytes a message: it was not said. Say it in parts.",
            crate::names::thousands(*bytes),
            crate::names::thousands(crate::tools::room::MAX_SAY_BYTES)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_that_is_not_a_plain_word_is_shown_quoted() {
        let tools = || ["index", "room"].into_iter();
        assert_eq!(
            unknown_tool("nope", tools(), &[]),
            "There is no tool called nope on this server; the tools are index, room."
        );
        assert_eq!(
            unknown_tool("", tools(), &[]),
            "There is no tool called \"\" on this server; the tools are index, room."
        );
        assert!(
            unknown_tool("a\nb c", tools(), &[])
                .starts_with("There is no tool called \"a\\nb c\" on")
        );
    }

    #[test]
    fn a_slip_of_a_tools_name_is_pointed_at() {
        let tools = || ["ci-status", "index", "room"].into_iter();
        assert_eq!(
            unknown_tool("ci_status", tools(), &[]),
            "There is no tool called ci_status on this server (meant ci-status?); the tools are ci-status, index, room."
        );
        assert!(unknown_tool("indx", tools(), &[]).contains("(meant index?)"));
        assert!(unknown_tool("CI-Statsu", tools(), &[]).contains("(meant ci-status?)"));
        assert!(!unknown_tool("deploy", tools(), &[]).contains("meant"));
        // The name as a client shows it to its model (helper-94: no hint).
        for shown in [
            "mcp__openovai__room",
            "openovai_room",
            "openovai.room",
            "openovai__room",
        ] {
            assert!(
                unknown_tool(shown, tools(), &[]).contains("(meant room?)"),
                "{shown}"
            );
        }
    }

    #[test]
    fn an_empty_text_is_said_in_words_as_silence_never_reaches_the_model() {
        let empty = "plugins/x.mjs answered a { text } that is empty: a tool answers { text } with what to tell the caller, or { refused } with why not.";
        for said in [
            "",
            "  \n",
            "\u{200B}",
            "\u{FEFF} \t",
            "\u{0}",
            "\u{3164}",
            "\u{AD}\u{202E}",
            "\u{2800}",
            "\u{E0020}",
        ] {
            let as_text = Answer {
                text: Some(said.into()),
                ..Answer::default()
            };
            let as_json = Answer {
                text_json: Some(serde_json::to_string(said).unwrap()),
                ..Answer::default()
            };
            for a in [as_text, as_json] {
                let said_so = match from_host("plugins/x.mjs", a, 100) {
                    Outcome::Refused(m) if said.is_empty() => m == empty,
                    Outcome::Refused(m) if said.trim().is_empty() => {
                        m.starts_with("plugins/x.mjs answered a { text } that is blank (")
                    }
                    Outcome::Refused(m) => {
                        m.starts_with("plugins/x.mjs answered a { text } that shows nothing (")
                    }
                    _ => false,
                };
                assert!(said_so, "{said:?}");
            }
        }
        for said in [
            "0", " ok", "\u{2705}", "\n.", "\u{5B57}", "\u{A0}x", "\u{301}",
        ] {
            let a = Answer {
                text_json: Some(serde_json::to_string(said).unwrap()),
                ..Answer::default()
            };
            assert!(
                matches!(from_host("plugins/x.mjs", a, 100), Outcome::Json(_)),
                "{said:?}"
            );
        }
    }

    #[test]
    fn an_empty_refusal_is_said_in_words() {
        for said in ["", "  \n", "\u{200B}", "\u{FEFF}", "\u{0}"] {
            let a = Answer {
                refused: Some(said.into()),
                ..Answer::default()
            };
            assert!(matches!(
                from_host("plugins/x.mjs", a, 100),
                Outcome::Refused(why) if why == "plugins/x.mjs refused without saying why (its { refused } is empty)."
            ));
        }
    }

    #[test]
    fn an_answer_grown_or_broken_on_its_way_is_refused_in_words() {
        let text = |t: &str| Answer {
            text: Some(t.into()),
            ..Answer::default()
        };
        assert_eq!(
            from_host("plugins/a.mjs", text("four"), 4),
            Outcome::Text("four".into())
        );
        let Outcome::Refused(grown) = from_host("plugins/a.mjs", text("fives"), 4) else {
            panic!("a text over the cap is refused");
        };
        assert!(grown.starts_with("plugins/a.mjs answered 5 bytes of text, more than the 4"));
        let damaged = Answer {
            damaged: true,
            ..Answer::default()
        };
        let Outcome::Refused(why) = from_host("plugins/a.mjs", damaged, 4) else {
            panic!("a damaged answer is refused");
        };
        assert!(
            why.starts_with("plugins/a.mjs ran, but its answer was damaged"),
            "{why}"
        );
    }
}
