//! Lines a session sent while it had all it may have in flight. They are still read, so that a
//! cancellation reaches its call at once instead of waiting behind calls that may run to their deadline;
//! the rest are held, in order, until there is room, and a request cancelled while held never starts.
//! Bounded in count and bytes: past that, the session is not read until there is room.

use std::collections::VecDeque;

use rmcp::model::NumberOrString;

/// Reading stops once this many lines are held…
const MAX_LINES: usize = 64;
/// …or once they add up to this many bytes (the last line read may be up to the session's line cap).
const MAX_BYTES: usize = 1024 * 1024;

#[derive(Default)]
pub struct Backlog {
    /// Each line with its id, when it is a request (read once: a cancellation looks through them all).
    lines: VecDeque<(Option<NumberOrString>, String)>,
    bytes: usize,
}

impl Backlog {
    /// Whether another line may be read and held.
    pub fn has_room(&self) -> bool {
        self.lines.len() < MAX_LINES && self.bytes < MAX_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Holds `line`, a request under `id` (`request_id`) or anything else.
    pub fn push(&mut self, id: Option<NumberOrString>, line: String) {
        self.bytes += line.len();
        self.lines.push_back((id, line));
    }

    /// Whether a request under `id` is held.
    pub fn holds(&self, id: &NumberOrString) -> bool {
        self.lines.iter().any(|(held, _)| held.as_ref() == Some(id))
    }

    /// The oldest held line.
    pub fn pop(&mut self) -> Option<String> {
        let (_, line) = self.lines.pop_front()?;
        self.bytes -= line.len();
        Some(line)
    }

    /// Drops the held request with this id: it was cancelled before it started, and gets no answer.
    pub fn cancel(&mut self, id: &NumberOrString) {
        if let Some(at) = self
            .lines
            .iter()
            .position(|(held, _)| held.as_ref() == Some(id))
            && let Some((_, line)) = self.lines.remove(at)
        {
            self.bytes -= line.len();
        }
    }
}

/// The id of a request, as the daemon reads the line (`jsonrpc::read`); None for anything else, which is
/// answered as it stands however it is cancelled.
pub fn request_id(line: &str) -> Option<NumberOrString> {
    match crate::jsonrpc::read(&crate::jsonrpc::mended(line), "line") {
        crate::jsonrpc::Read::Request(r) => Some(r.id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Backlog {
        fn push_line(&mut self, line: String) {
            self.push(request_id(&line), line);
        }
    }

    #[test]
    fn a_cancelled_request_leaves_the_others_in_order() {
        let mut held = Backlog::default();
        held.push_line(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#.into());
        held.push_line(r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"id":2}}"#.into());
        held.push_line(r#"{"jsonrpc":"2.0","id":"2","method":"ping"}"#.into());
        held.push_line(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#.into());
        held.cancel(&NumberOrString::Number(2));
        held.cancel(&NumberOrString::Number(7));
        let left: Vec<String> = std::iter::from_fn(|| held.pop()).collect();
        assert_eq!(left.len(), 3);
        assert!(left[0].contains("\"id\":1"));
        assert!(left[1].contains("notifications/x"));
        assert!(left[2].contains("\"id\":\"2\""));
        assert_eq!(held.bytes, 0);
    }

    #[test]
    fn a_line_that_is_no_request_is_not_cancelled_but_answered() {
        let mut held = Backlog::default();
        // An array is no request: it gets its refusal, whatever is cancelled.
        held.push_line(r#"[71,"ping"]"#.into());
        held.push_line(r#"{"jsonrpc":"2.0","id":72,"method":"ping","result":1}"#.into());
        held.push_line(r#"{"jsonrpc":"2.0","id":72,"method":"ping"}"#.into());
        held.push_line(r#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#.into());
        held.cancel(&NumberOrString::Number(71));
        held.cancel(&NumberOrString::Number(72));
        held.cancel(&NumberOrString::String("\u{fffd}".into()));
        let left: Vec<String> = std::iter::from_fn(|| held.pop()).collect();
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left[0].starts_with("[71"));
        // A message with a method and a result is no request: it is refused, and the request 72 went.
        assert_eq!(
            left[1],
            r#"{"jsonrpc":"2.0","id":72,"method":"ping","result":1}"#
        );
    }
}
