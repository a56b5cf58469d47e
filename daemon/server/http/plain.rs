//! rmcp turns some requests away at the HTTP layer (a header missing or wrong) with a line of plain text
//! of its own: "Bad Request: Session ID is required". Such an answer is said instead as the gate says its
//! refusals: a JSON-RPC error body holding a sentence that names what to send.

use axum::http::{HeaderMap, header};
use axum::response::Response;
use rmcp::model::ProtocolVersion;

use crate::server::daemon::Daemon;

/// rmcp's plain-text answers are a line; more than this is not one of them.
const MAX_PLAIN_BYTES: usize = 4096;

/// The response as it is, unless it is a refusal of rmcp's in plain text.
pub async fn reworded(daemon: &Daemon, response: Response) -> Response {
    if !response.status().is_client_error() || is_json(response.headers()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_PLAIN_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let allow = parts.headers.get(header::ALLOW).cloned();
    // A 405 says which methods are allowed, in its words as in its header: a 2026-07-28 request has
    // no session, so no stream to GET nor session to DELETE.
    let words = match allow.as_ref().and_then(|a| a.to_str().ok()) {
        Some("POST") => "this endpoint takes only POST from a client of MCP 2026-07-28, which has no session: \
                         each request is a POST, and subscriptions/listen opens a stream of list changes"
            .to_string(),
        _ => sentence(&text),
    };
    let mut said = super::refusal::refuse(daemon, parts.status, words, None);
    if let Some(allow) = allow {
        said.headers_mut().insert(header::ALLOW, allow);
    }
    said
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// rmcp's line, said as a sentence that names what to send.
fn sentence(text: &str) -> String {
    if text == "Bad Request: Session ID is required" {
        return "this request carries no Mcp-Session-Id header, and only initialize may come without one: send \
                initialize first, then the Mcp-Session-Id header its answer carries on every request"
            .into();
    }
    // The text comes trimmed: an empty header's version is no version at all.
    if text == "Bad Request: Unsupported MCP-Protocol-Version:" {
        return format!(
            "the MCP-Protocol-Version header is empty: send the revision initialize agreed (this server speaks \
             {})",
            known_versions()
        );
    }
    if let Some(version) = text.strip_prefix("Bad Request: Unsupported MCP-Protocol-Version: ") {
        return format!(
            "the MCP-Protocol-Version header says {}, a revision this server does not speak: send the one \
             initialize agreed (this server speaks {})",
            clip(version),
            known_versions()
        );
    }
    if text == "Bad Request: Invalid MCP-Protocol-Version header encoding" {
        return format!(
            "the MCP-Protocol-Version header is not plain text: send the revision initialize agreed (this server \
             speaks {})",
            known_versions()
        );
    }
    if text.starts_with("Not Acceptable: Client must accept both") {
        return "the Accept header must name both application/json and text/event-stream, as MCP's Streamable \
                HTTP asks of every POST"
            .into();
    }
    if text.starts_with("Not Acceptable: Client must accept text/event-stream") {
        return "the Accept header must name text/event-stream: a GET opens the session's stream of messages"
            .into();
    }
    if text.starts_with("Unsupported Media Type") {
        return "the body must be sent with Content-Type: application/json".into();
    }
    if text == "Not Found: Session not found" {
        return super::refusal::NO_SUCH_SESSION.into();
    }
    if text == "Method Not Allowed" {
        return "this endpoint takes POST (a message), GET (a session's stream) and DELETE (the end of a session)"
            .into();
    }
    if text.is_empty() {
        return "the request was turned away, with no reason given".into();
    }
    clip(text)
}

fn clip(text: &str) -> String {
    crate::names::escape_controls(&text.chars().take(200).collect::<String>(), false).into_owned()
}

/// "2024-11-05, 2025-03-26, … and 2026-07-28".
pub fn known_versions() -> String {
    let all: Vec<&str> = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(|v| v.as_str())
        .collect();
    match all.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, init)) => format!("{} and {last}", init.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_is_a_sentence_and_an_unknown_one_is_kept() {
        assert!(
            sentence("Bad Request: Unsupported MCP-Protocol-Version: x\u{1b}y")
                .contains("says x\\u{1b}y,")
        );
        assert!(
            sentence("Bad Request: Unsupported MCP-Protocol-Version:")
                .starts_with("the MCP-Protocol-Version header is empty: send the revision")
        );
        assert!(
            known_versions().ends_with(" and 2026-07-28"),
            "{}",
            known_versions()
        );
        assert_eq!(sentence("Gone: something new"), "Gone: something new");
        assert_eq!(
            sentence(""),
            "the request was turned away, with no reason given"
        );
    }
}
