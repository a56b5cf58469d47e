//! The first line on the daemon's socket: who is connecting. A seat presents its secret and the rest of
//! the connection is MCP; a control client (`ovai restart`, `ovai status`, `ovai seat`) presents the
//! control secret from `.ovai/` and one operation, and reads one JSON answer.

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
    pub op: Option<String>,
}

/// The daemon's answer to a seat's hello.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Welcome {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Why the connection is refused, as a sentence for the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub fn line<T: Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}
