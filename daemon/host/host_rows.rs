//! The `host` rows of runtime.log, word for word: a host that stopped, its respawn, and a host that
//! stays down. Like the plugins rows, these sentences are read by people and tests.

use std::sync::Arc;

use super::ending::Exit;
use super::ending::{DownCause, Next, NotReimported};
use super::protocol::Thrown;

/// A host that ended with calls in flight (or none), and what comes next.
pub fn stopped(
    pid: u32,
    what: &str,
    files: &[Arc<str>],
    next: Next,
    ended_by: Option<String>,
    last_words: Option<String>,
    last_called: Option<&str>,
) -> String {
    let mut row = format!("The plugin host (pid {pid}) {what}");
    if files.is_empty() {
        row.push_str(" with no call in flight");
    } else {
        let names: Vec<&str> = files.iter().map(|f| &**f).collect();
        row.push_str(&format!(
            "; the calls in flight to {} were answered with a refusal",
            names.join(", ")
        ));
    }
    row.push_str(match next {
        Next::Respawn => ". A new plugin host is being started.",
        Next::StaysDown { .. } => ".",
    });
    // Said by the host under its key; after it, stderr holds at most an abort's native trace.
    if let Some(how) = ended_by {
        row.push_str(&format!(" A plugin ended it with {how}."));
    } else if let Some(last) = last_words {
        row.push_str(&format!(" Its last words on stderr: {last}"));
    }
    // Ended with no call in flight, by a plugin's timer or processes: the last call it ran is where to
    // look first.
    if let (true, Some(file)) = (files.is_empty(), last_called) {
        let sep = if row.ends_with(['.', '!', '?']) {
            ""
        } else {
            "."
        };
        row.push_str(&format!("{sep} The last call it was sent was to {file}."));
    }
    row
}

/// What happened to a host, as the rows and refusals say it after "The plugin host".
pub fn what_happened(exit: &Exit, out_of_memory: Option<u64>) -> String {
    match out_of_memory {
        Some(mb) => format!(
            "ran out of memory (its heap is capped at {mb} MB by hostMaxMemoryMB in openovai.json) and stopped ({exit})"
        ),
        None => format!("stopped ({exit})"),
    }
}

/// A host whose box went past a bound.
pub fn over_bound(exceeded: &super::bounds::Exceeded, exit: &Exit) -> String {
    format!("{exceeded} and was ended ({exit})")
}

pub fn deaf(exit: &Exit) -> String {
    format!(
        "stopped reading what the daemon sends it (a plugin closed its protocol pipe, fd 3) and was killed ({exit})"
    )
}

pub fn hung(after_s: u64, exit: &Exit, at: Option<&str>) -> String {
    let at = at.map(|at| format!(", at {at}")).unwrap_or_default();
    format!(
        "stopped answering for {after_s} s (a plugin blocking its event loop{at}; synchronous work such as \
         execSync or a long loop does that: run commands with the async exec, execFile or spawn, or raise \
         hostHangSeconds in openovai.json) and was killed ({exit})"
    )
}

pub fn replaced(pid: u32, files: &[Arc<str>]) -> String {
    let mut row = format!(
        "The plugin host (pid {pid}) was replaced for a seat change (its own row says what changed, or its command why it failed): its box hid the seats' secrets as they were when it started"
    );
    if !files.is_empty() {
        let names: Vec<&str> = files.iter().map(|f| &**f).collect();
        row.push_str(&format!(
            "; the calls in flight to {} were answered with a refusal",
            names.join(", ")
        ));
    }
    row.push('.');
    row
}

/// An error a plugin left behind outside a call: `how` is "threw" or "rejected", `at` its place in plugins/.
pub fn stray(how: &str, message: &str, at: Option<&str>) -> String {
    let what = match how {
        "rejected" => "A plugin left a promise rejected",
        _ => "A plugin threw outside a call",
    };
    let (place, same) = match at {
        Some(at) => (format!(" (at {at})"), "errors from the same place"),
        None => (
            ", and its stack names no place in plugins/".to_string(),
            "errors with these words that name no place",
        ),
    };
    let end = if message.ends_with(['.', '!', '?']) {
        ""
    } else {
        "."
    };
    format!(
        "{what}{place}: {message}{end} The plugin host goes on; {same} are not written here again until it is started again."
    )
}

pub fn strays_capped(rows: usize) -> String {
    format!(
        "Plugins left errors behind outside a call in more than {rows} places; the others go only to the daemon's stderr until the plugin host is started again."
    )
}

/// `not_served`: how many of the files the rows just before it say it does not serve.
pub fn respawned(pid: u32, not_served: usize) -> String {
    match not_served {
        0 => format!("A new plugin host (pid {pid}) was started, serving the same files."),
        1 => format!(
            "A new plugin host (pid {pid}) was started, serving the same files but the one named above."
        ),
        n => format!(
            "A new plugin host (pid {pid}) was started, serving the same files but the {n} named above."
        ),
    }
}

pub fn respawn_delayed(e: &super::ending::StartError) -> String {
    format!(
        "A new plugin host could not be started for now ({e}); it is tried again until it starts. Calls wait for it within their deadline."
    )
}

pub fn stays_down(cause: &DownCause) -> String {
    match cause {
        DownCause::CrashLoop {
            stops,
            window,
            last_at,
            last_called,
        } => format!(
            "The plugin host stays down: it stopped {stops} times within {} s{}. Fix the plugin that ends it{}, then run `ovai restart`.",
            window.as_secs(),
            last_at
                .as_ref()
                .map(|at| format!(", the last time from {at}"))
                .unwrap_or_default(),
            last_called_said(last_at.as_deref(), last_called)
        ),
        DownCause::CannotRespawn(e) => format!(
            "The plugin host stays down: a new one could not be started: {e}. Run `ovai restart` once that is fixed."
        ),
    }
}

/// Where to look for a crash loop's cause when no place was said: the files the ended hosts were last
/// sent calls of.
pub fn last_called_said(last_at: Option<&str>, last_called: &[Arc<str>]) -> String {
    if last_at.is_some() || last_called.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = last_called.iter().map(|f| &**f).collect();
    format!(
        " (no place was said; the last calls the ended hosts were sent were to {})",
        names.join(", ")
    )
}

/// A served file the respawned host could not import again: the row, and the refusal its callers read.
pub fn not_reimported(shown: &str, why: &NotReimported) -> String {
    // What it left running (a timer its import set) ends or holds a host later: `ovai check` imports it
    // and stops before that, and passes it.
    let later = matches!(
        why,
        NotReimported::HeldHost(_)
            | NotReimported::EndedHost(..)
            | NotReimported::Repeatedly { .. }
    );
    let why = match why {
        NotReimported::Failed(Some(t)) => match &t.at {
            Some(at) => format!("importing it again failed: {} (at {at})", t.message),
            None => format!("importing it again failed: {}", t.message),
        },
        NotReimported::Failed(None) => "it no longer imports cleanly".to_string(),
        NotReimported::StoppedHost(exit) => {
            format!("importing it again stopped the plugin host ({exit})")
        }
        NotReimported::Hung(limit) => {
            format!("importing it again took longer than {} s", limit.as_secs())
        }
        NotReimported::Held(limit, at) => format!(
            "its code held the new plugin host's event loop for more than {} s while the files were imported again (at {at})",
            limit.as_secs()
        ),
        NotReimported::HeldHost(at) => format!(
            "its code held a plugin host's event loop before any call of its own ran there (at {at}): code its import runs, which would hold every new host's"
        ),
        NotReimported::EndedHost(exit, at) => format!(
            "it ended a plugin host ({exit}) before any call of its own ran there (at {at}): code its import runs, which would end every new host"
        ),
        NotReimported::Repeatedly { times, window, at } => format!(
            "it ended or held the plugin host {times} times within {} s, the last at {at}; its calls would go on taking every tool down with them",
            window.as_secs()
        ),
        NotReimported::Changed => {
            "it changed after it was read, and a new host imports only what was read".to_string()
        }
        NotReimported::Removed => {
            "it was removed (or cannot be read) since it was read, so a new host could not import it"
                .to_string()
        }
    };
    let then = if later {
        "Fix it, then run `ovai restart`, which serves it again. `ovai check` may pass it as it is: it only \
         imports the file, and runs no call and waits for no timer"
    } else {
        "Run `ovai check` and `ovai restart` to see and serve it as it is now"
    };
    format!("{shown} is not answering calls since a new plugin host was started: {why}. {then}.")
}

/// What follows a thrown error's words, where the host saw more of why: its box's part, what a frozen
/// object may be, and (`env`, for the operator's rows only) names the words speak of that ovai has and
/// does not pass. Empty, or sentences after ". ".
pub fn thrown_notes(t: &Thrown, env: bool) -> String {
    let frozen = t.frozen.then(|| {
        "If that object is context.config: it is openovai.json's settings, frozen for every call; copy \
         what you change ({ ...context.config.ci })."
            .to_string()
    });
    let env = if env { env_unpassed(t) } else { None };
    let notes: Vec<String> = [box_met(t), env, frozen].into_iter().flatten().collect();
    if notes.is_empty() {
        String::new()
    } else {
        format!(". {}", notes.join(" "))
    }
}

/// Which of the environment variables an error names (and the host did not have) ovai's own environment
/// has: those are not passed (only `pluginEnv`'s are), and "set GITHUB_TOKEN first", with the token set
/// in the shell that started ovai, sends its author looking at the shell. As a sentence to follow the
/// error's words, in the operator's rows only: a call's error may name what its caller gave, and the
/// caller would learn which names ovai's environment holds.
pub fn env_unpassed(t: &Thrown) -> Option<String> {
    let names: Vec<&str> = t
        .env_unset
        .iter()
        .take(8)
        .map(String::as_str)
        .filter(|n| {
            // ovai's own names are never passed (OVAI_SECRET would hand a plugin a seat).
            n.len() <= 64
                && !n.starts_with("OVAI_")
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && std::env::var_os(n).is_some_and(|v| !v.is_empty())
        })
        .collect();
    let (last, rest) = names.split_last()?;
    let (named, are, them) = if rest.is_empty() {
        (last.to_string(), "is", "it")
    } else {
        (format!("{} and {last}", rest.join(", ")), "are", "them")
    };
    Some(format!(
        "{named} {are} set in ovai's own environment but not passed to plugins: name {them} in \"pluginEnv\" \
         in openovai.json, then `ovai restart`."
    ))
}

/// What of the plugin host's box an error met, where the host saw it may have, as a sentence to follow
/// the error's words: alone, ENOENT for a file that is there, or EACCES for a socket, sends an author
/// looking elsewhere.
fn box_met(t: &Thrown) -> Option<String> {
    let said = t.boxed.as_deref()?;
    // One of those the box keeps read-only however made (what agents read) is no late folder.
    let said = match said.strip_prefix("late:") {
        Some(f) if super::sandbox::READ_BY_CLIENTS.contains(&f) => "readonly",
        _ => said,
    };
    if let Some(folder) = said.strip_prefix("late:") {
        return Some(format!(
            "In the plugin host's box a plugin writes only in the instance's folders that were there when the \
             host started: {}/ was made since, and is read-only there until `ovai restart` starts a new host.",
            crate::names::clipped(folder, 64)
        ));
    }
    let sentence = match said {
        "tmp" => Some(
            "In the plugin host's box, /tmp and $TMPDIR are folders of its own, empty at each start: what \
             other programs put in the machine's /tmp is not there, so keep such files in the instance's \
             folder (docs/security.md says why).",
        ),
        "socket" => Some(
            "The plugin host's box refuses Unix sockets, through which a program outside it would act for a \
             plugin: reach a local service over TCP (docs/security.md says why).",
        ),
        "readonly" => Some(
            "In the plugin host's box the instance's root and its own files are read-only: a plugin writes in \
             a folder of the instance, its own such as plugins/NAME/ (docs/plugins.md says which).",
        ),
        "git" => Some(
            "In the plugin host's box the instance's .git/ is read-only (git would run what a plugin wrote \
             into its hooks or config outside the box): a plugin reads the repository, and cannot commit to \
             it.",
        ),
        _ => None,
    };
    sentence.map(str::to_string)
}
