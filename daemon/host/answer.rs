//! What a caller reads when a plugin call ends: the plugin's own text, its own refusal, or a sentence
//! naming the file and what went wrong. Every way a call can end is here, in words.

use std::time::Duration;

use super::protocol::{Answer, Thrown};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Text(String),
    /// A refusal: words the calling session reads (`isError: true`), never a protocol error.
    Refused(String),
    /// The caller cancelled; MCP sends no answer for it.
    Cancelled,
}

pub fn from_host(file: &str, a: Answer, max_answer_bytes: usize) -> Outcome {
    if let Some(text) = a.text {
        return Outcome::Text(text);
    }
    if let Some(refused) = a.refused {
        return Outcome::Refused(refused);
    }
    if let Some(bytes) = a.too_big {
        return Outcome::Refused(format!(
            "{file} answered {bytes} bytes of text, more than the {max_answer_bytes} this server passes on \
             (maxAnswerBytes in openovai.json sets the limit)."
        ));
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
    let what = a.bad.unwrap_or_else(|| "something unreadable".into());
    Outcome::Refused(format!(
        "{file} answered {what}: a tool answers {{ text }} or {{ refused }}, with a string in it."
    ))
}

pub fn threw(file: &str, t: &Thrown) -> String {
    match &t.at {
        Some(at) => format!("{file} threw at {at}: {}", t.message),
        None => format!("{file} threw: {}", t.message),
    }
}

pub fn host_stopped(file: &str, why: &str) -> Outcome {
    Outcome::Refused(format!(
        "{file} did not answer: {why}. The host is being started again; other tools are unaffected."
    ))
}

pub fn not_run(file: &str, why: &str) -> Outcome {
    Outcome::Refused(format!("{file} was not run: {why}."))
}

pub fn deadline(file: &str, limit: Duration) -> Outcome {
    Outcome::Refused(format!(
        "{file} did not answer in time: the call was given up after {} s and its signal fired \
         (callTimeoutSeconds in openovai.json sets the limit).",
        limit.as_secs()
    ))
}
