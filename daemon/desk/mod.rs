//! A seat's desk: the folder its session works in, and the files ovai writes there for the session's
//! client: Claude Code's here, Gemini CLI's, Codex's and opencode's in `clients` (which of them is
//! `"clients"` in openovai.json), and the lines that keep the secret out of git in `git`.
//!
//! - `.mcp.json` says how to reach this server, with the seat's secret (mode 0600). Other servers a person
//!   configured there are kept.
//! - `.claude/settings.local.json` (Claude Code's per-folder, never-committed settings) approves that
//!   server (`enabledMcpjsonServers`) and holds the one permission rule for all of its tools
//!   (`permissions.allow: ["mcp__openovai"]`), so a session at the desk calls every tool of the instance
//!   with no approval prompt and no permission popup. It is merged, never replaced.
//!
//! A file a person broke is never overwritten: it is named, with its line and column, and left as it is.

pub mod clients;
pub mod jsonc;
pub mod git;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::files::write_private;
use crate::instance::Instance;

/// The MCP server's name in a client's configuration: tools then show as `mcp__openovai__NAME`.
pub const SERVER_NAME: &str = "openovai";
/// The permission rule that allows every tool of the server.
pub const ALLOW_RULE: &str = "mcp__openovai";

pub fn mcp_json(desk: &Path) -> PathBuf {
    desk.join(".mcp.json")
}

pub fn settings_file(desk: &Path) -> PathBuf {
    desk.join(".claude").join("settings.local.json")
}

/// The files of a desk that hold its seat's secret, where they are.
pub fn secret_files(desk: &Path) -> Vec<PathBuf> {
    std::iter::once(mcp_json(desk))
        .chain(clients::secret_files(desk))
        .filter(|p| p.is_file())
        .collect()
}

/// The desk's files (relative to it) that hold the secret for these clients (`.mcp.json` always: `ovai
/// call --seat` reads it).
fn secret_paths(clients: &[crate::instance::Client]) -> Vec<&'static str> {
    let theirs = clients::SECRET_FILES
        .iter()
        .filter(|(c, _)| clients.contains(c))
        .map(|(_, f)| *f);
    std::iter::once(".mcp.json").chain(theirs).collect()
}

/// Refuses, before anything is written, a desk where a seat's secret would leave it or reach git: a
/// client's folder that is a symbolic link (the secret would be written wherever it points, and the
/// plugin host's box could not hide it), or what `git::why_not_for_secret` finds.
pub fn check_for_secret(desk: &Path, clients: &[crate::instance::Client]) -> Result<(), DeskError> {
    let rel = secret_paths(clients);
    for r in &rel {
        if let Some((folder, _)) = r.split_once('/')
            && desk.join(folder).is_symlink()
        {
            return Err(DeskError::Unsafe(format!(
                "{} is a symbolic link: a seat's secret is written only into the desk itself, never through a \
                 link. Make it a folder of the desk's own (or take that client out of openovai.json's \
                 \"clients\") and run the command again; nothing was changed.",
                desk.join(folder).display()
            )));
        }
        // Written, a link would be replaced by a file of ours, its target left with the old secret.
        if desk.join(r).is_symlink() {
            let or = if *r == ".mcp.json" {
                ""
            } else {
                " (or take that client out of openovai.json's \"clients\")"
            };
            return Err(DeskError::Unsafe(format!(
                "{} is a symbolic link: a seat's secret is written only into the desk itself, never through a \
                 link. Make it a file of the desk's own{or} and run the command again; nothing was changed.",
                desk.join(r).display()
            )));
        }
    }
    match git::why_not_for_secret(desk, &rel) {
        Some(why) => Err(DeskError::Unsafe(why)),
        None => Ok(()),
    }
}

/// Whether `path` in `desk` is a symbolic link, or reached through a folder that is one: such a file is
/// not the desk's, and is neither written nor removed.
pub fn through_link(desk: &Path, path: &Path) -> bool {
    path.is_symlink()
        || path
            .parent()
            .filter(|p| *p != desk)
            .is_some_and(Path::is_symlink)
}

#[derive(Debug, thiserror::Error)]
pub enum DeskError {
    #[error("{0}")]
    Unsafe(String),
    #[error(
        "{} does not parse ({message} at line {line}, column {column}), and it holds the MCP servers of that desk: it was left as it is. Fix it (or move it away) and run the command again.",
        path.display()
    )]
    Unparsable {
        path: PathBuf,
        message: String,
        line: usize,
        column: usize,
    },
    #[error(
        "{} is {what}, not an object of MCP servers: it was left as it is. Fix it (or move it away) and run the command again.",
        path.display()
    )]
    NotObject { path: PathBuf, what: &'static str },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] crate::files::FileError),
    #[error(
        "--url {0:?} is not the URL of an ovai HTTP endpoint: it takes http:// or https:// and the endpoint's path, such as https://buildbox.example:7777/mcp (ovai status on the server shows it)"
    )]
    BadUrl(String),
    #[error("--url {url:?} is not a URL a client can reach: {why}")]
    Unreachable { url: String, why: String },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> DeskError + 'a {
    move |source| DeskError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// A JSON file as it is on disk: absent, an object, or something a person has to look at.
enum Doc {
    Absent,
    Object(Map<String, Value>),
    Unparsable {
        message: String,
        line: usize,
        column: usize,
    },
    NotObject(&'static str),
}

fn read_doc(path: &Path) -> Result<Doc, DeskError> {
    let text = match crate::files::read_regular(path, crate::files::MAX_READ_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Doc::Absent),
        Err(e) => return Err(io_err("reading", path)(e)),
    };
    Ok(match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Doc::Object(map),
        Ok(other) => Doc::NotObject(crate::instance::json_kind(&other)),
        Err(e) => Doc::Unparsable {
            message: crate::instance::syntax_message(&e),
            line: e.line(),
            column: e.column(),
        },
    })
}

fn write_doc(path: &Path, doc: &Map<String, Value>) -> Result<(), DeskError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err("making", dir))?;
    }
    let text = serde_json::to_string_pretty(doc).unwrap_or_default() + "\n";
    let text = crate::files::keep_line_ends(path, text);
    Ok(write_private(path, text.as_bytes())?)
}

/// How a seat's client reaches the server: the local bridge, or (a remote seat) the server's URL.
pub enum Reach<'a> {
    /// `ovai mcp`, started from this binary.
    Bridge { exe: &'a Path },
    /// The server's Streamable HTTP endpoint, with the secret as a bearer token (a seat on another machine).
    Url { url: &'a str },
}

/// Checks a remote seat's URL; `Ok(Some(warning))` when it is plain HTTP to another machine.
pub fn check_url(url: &str) -> Result<Option<String>, DeskError> {
    // The scheme is the one part of a URL that may be written in any case.
    let scheme = |s: &str| {
        url.get(..s.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(s))
    };
    let (rest, tls) = if scheme("https://") {
        (&url["https://".len()..], true)
    } else if scheme("http://") {
        (&url["http://".len()..], false)
    } else {
        return Err(DeskError::BadUrl(url.into()));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(DeskError::BadUrl(url.into()));
    }
    if let Some(why) = unreachable(url, host) {
        return Err(DeskError::Unreachable {
            url: url.into(),
            why,
        });
    }
    let local = crate::names::is_loopback_name(crate::names::host_name(host));
    let mut warnings = Vec::new();
    if !tls && !local {
        warnings.push(format!(
            "{url} is plain HTTP to another machine: the seat's secret would cross the network in the clear. Use https:// (the daemon's \"http\".\"tls\", or a TLS proxy in front) unless the network itself is private"
        ));
    }
    // The endpoint answers at /mcp only; a proxy in front may map another path to it.
    let path = &rest[host.len()..];
    if path.is_empty() || path == "/" {
        warnings.push(format!(
            "{url} names no path, and ovai's endpoint is at /mcp: its clients would be answered 404 unless a proxy in front maps it (the URL `ovai serve` prints ends in /mcp)"
        ));
    }
    Ok((!warnings.is_empty()).then(|| warnings.join(". ")))
}

/// What makes a URL's `host[:port]` one no client can reach, in words.
fn unreachable(url: &str, authority: &str) -> Option<String> {
    if let Some(c) = url
        .chars()
        .find(|c| matches!(c, '"' | '\\' | '<' | '>' | '{' | '}' | '|' | '^' | '`'))
    {
        return Some(format!("it holds {c:?}, which a URL does not"));
    }
    if authority.contains('@') {
        return Some(
            "it names a user (and a password) before the host; the seat's secret goes in a header, so leave \
             them out"
                .into(),
        );
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let Some((addr, after)) = v6.split_once(']') else {
                return Some("its IPv6 address has no closing \"]\"".into());
            };
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return Some(format!("[{addr}] is not an IPv6 address"));
            }
            match after {
                "" => (addr, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (addr, Some(port)),
                    None => return Some(format!("{after:?} follows its IPv6 address")),
                },
            }
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Some("it names no host".into());
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Some(format!("{port:?} is not a port (1 to 65535)"));
    }
    None
}

/// Writes (or replaces) the `openovai` entry of the desk's `.mcp.json`, keeping every other server.
/// How long a client waits on a call, where its desk's entry can say so: ovai answers every call itself
/// (at `callTimeoutSeconds`, 60 s by default), so the client's own limit must come later or its words
/// win the tie. Ten minutes, Gemini CLI's own, also bounds a wait on a remote server that never answers.
pub const CLIENT_TIMEOUT_MS: u64 = 10 * 60 * 1000;

pub fn write_server_entry(
    inst: &Instance,
    desk: &Path,
    reach: &Reach<'_>,
    secret: &str,
) -> Result<PathBuf, DeskError> {
    let path = mcp_json(desk);
    let mut doc = writable_doc(&path)?;
    let entry = match reach {
        Reach::Bridge { exe } => {
            // Settings the person added to the bridge's environment (OVAI_CONNECT_SECONDS,
            // OVAI_BRIDGE_BATCH, …) stay through a rotate; the root and the secret are ours.
            let mut env = doc
                .get("mcpServers")
                .and_then(|s| s.get(SERVER_NAME))
                .and_then(|e| e.get("env"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            env.insert("OVAI_ROOT".into(), inst.root.display().to_string().into());
            env.insert("OVAI_SECRET".into(), secret.into());
            json!({
                "type": "stdio",
                "command": exe.display().to_string(),
                "args": ["mcp"],
                "env": env
            })
        }
        // Over HTTP, Claude Code gives up on a call at 60 s unless its entry says otherwise, and its model
        // read "The operation timed out." rather than ovai's words naming the file (helper-95).
        Reach::Url { url } => json!({
            "type": "http",
            "url": url,
            "headers": { "Authorization": format!("Bearer {secret}") },
            "timeout": CLIENT_TIMEOUT_MS
        }),
    };
    if let Some(s) = doc
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
    {
        s.insert(SERVER_NAME.into(), entry);
    }
    write_doc(&path, &doc)?;
    Ok(path)
}

/// Takes the `openovai` entry out of the desk's `.mcp.json`; the file goes when nothing else is left.
pub fn remove_server_entry(desk: &Path) -> Result<(), DeskError> {
    let path = mcp_json(desk);
    if through_link(desk, &path) {
        return Ok(());
    }
    let Doc::Object(mut doc) = read_doc(&path)? else {
        return Ok(());
    };
    let Some(servers) = doc.get_mut("mcpServers").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if servers.remove(SERVER_NAME).is_none() {
        return Ok(());
    }
    if servers.is_empty() && doc.len() == 1 {
        return std::fs::remove_file(&path).map_err(io_err("removing", &path));
    }
    write_doc(&path, &doc)
}

/// The program a desk's `.mcp.json` starts for this server (a stdio entry), when it names one.
pub fn command_in(desk: &Path) -> Option<String> {
    let Ok(Doc::Object(doc)) = read_doc(&mcp_json(desk)) else {
        return None;
    };
    let entry = doc.get("mcpServers")?.get(SERVER_NAME)?;
    entry.get("command")?.as_str().map(str::to_string)
}

/// A desk whose `.mcp.json` starts a program that is not there (the ovai binary moved): that program.
pub fn command_gone(desk: &Path) -> Option<String> {
    // A bare name (`ovai`) is found on the client's PATH: only a path written out can be gone.
    command_in(desk).filter(|c| Path::new(c).is_absolute() && !Path::new(c).exists())
}

/// What is out of date in a desk written before the binary or the instance moved.
pub enum Stale {
    /// It starts this program, which is not there.
    Gone(String),
    /// It names the instance at this other place.
    OtherRoot(String),
}

/// Whether a desk's `.mcp.json` starts an ovai that is not there, or names another instance's root:
/// either way its client's bridge cannot reach this instance, and says little about why.
pub fn stale(inst: &Instance, desk: &Path) -> Option<Stale> {
    if let Some(gone) = command_gone(desk) {
        return Some(Stale::Gone(gone));
    }
    other_root(inst, desk).map(Stale::OtherRoot)
}

/// The instance a desk's `.mcp.json` names, when it is not this one (the instance moved).
pub fn other_root(inst: &Instance, desk: &Path) -> Option<String> {
    let Ok(Doc::Object(doc)) = read_doc(&mcp_json(desk)) else {
        return None;
    };
    let named = doc
        .get("mcpServers")?
        .get(SERVER_NAME)?
        .pointer("/env/OVAI_ROOT")?
        .as_str()?
        .to_string();
    let same = match (
        std::fs::canonicalize(&named),
        std::fs::canonicalize(&inst.root),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => Path::new(&named) == inst.root,
    };
    (!same).then_some(named)
}

/// For each such desk, what to do.
pub fn moved_binaries<'a>(inst: &Instance, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    names
        .filter_map(|name| {
            Some(match stale(inst, &inst.desk(name))? {
                Stale::Gone(gone) => format!(
                    "desks/{name}/.mcp.json starts {gone}, which is not there (moved?): `ovai seat rebuild` \
                     points it at this ovai, keeping its secret."
                ),
                Stale::OtherRoot(other) => format!(
                    "desks/{name}/.mcp.json names the instance at {other}, not this one (moved?): `ovai seat \
                     rebuild` points it here, keeping its secret."
                ),
            })
        })
        .collect()
}

/// The secret written in a desk's `.mcp.json`, for `ovai call --seat NAME` from a terminal.
pub fn secret_in(desk: &Path) -> Option<String> {
    let Ok(Doc::Object(doc)) = read_doc(&mcp_json(desk)) else {
        return None;
    };
    let entry = doc.get("mcpServers")?.get(SERVER_NAME)?;
    if let Some(secret) = entry.pointer("/env/OVAI_SECRET").and_then(Value::as_str) {
        return Some(secret.to_string());
    }
    let auth = entry
        .pointer("/headers/Authorization")
        .and_then(Value::as_str)?;
    let (scheme, token) = auth.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

/// Whether `write_server_entry` can write into this desk's `.mcp.json`: asked before a seat change ends
/// anything, so a desk file broken by hand refuses the change first.
pub fn check_writable(desk: &Path) -> Result<(), DeskError> {
    check_folder(desk)?;
    writable_doc(&mcp_json(desk)).map(|_| ())
}

/// Refuses what is in the way of a desk (a folder, or a link to one, or nothing yet), naming it: the
/// system's "File exists" says neither what nor what to do.
fn check_folder(desk: &Path) -> Result<(), DeskError> {
    let Ok(meta) = std::fs::symlink_metadata(desk) else {
        return Ok(());
    };
    if desk.is_dir() {
        return Ok(());
    }
    let (what, fix) = match std::fs::read_link(desk) {
        Ok(to) if !desk.exists() => (
            format!(
                "a link to {}, which is not there",
                crate::names::escape_controls(&to.display().to_string(), false)
            ),
            "make that folder or remove the link, and run",
        ),
        Ok(to) => (
            format!(
                "a link to {}, which is not a folder",
                crate::names::escape_controls(&to.display().to_string(), false)
            ),
            "move it away and run",
        ),
        Err(_) if meta.is_file() => ("a file".to_string(), "move it away and run"),
        Err(_) => (
            "neither a file nor a folder".to_string(),
            "move it away and run",
        ),
    };
    Err(DeskError::Unsafe(format!(
        "{} is {what}, where the seat's desk goes (a folder of that name): {fix} the command again; nothing was \
         changed.",
        desk.display()
    )))
}

/// A `.mcp.json` an entry can be written into: absent (an empty one), or an object whose `mcpServers`, if
/// any, is an object too.
fn writable_doc(path: &Path) -> Result<Map<String, Value>, DeskError> {
    let path = path.to_path_buf();
    match read_doc(&path)? {
        Doc::Absent => Ok(Map::new()),
        Doc::Object(doc) if doc.get("mcpServers").is_some_and(|s| !s.is_object()) => {
            Err(DeskError::NotObject {
                path,
                what: "holding an mcpServers that is not an object",
            })
        }
        Doc::Object(doc) => Ok(doc),
        Doc::Unparsable {
            message,
            line,
            column,
        } => Err(DeskError::Unparsable {
            path,
            message,
            line,
            column,
        }),
        Doc::NotObject(what) => Err(DeskError::NotObject { path, what }),
    }
}

/// The URL a remote seat's desk reaches the server at, if it is one.
pub fn url_in(desk: &Path) -> Option<String> {
    let Ok(Doc::Object(doc)) = read_doc(&mcp_json(desk)) else {
        return None;
    };
    let entry = doc.get("mcpServers")?.get(SERVER_NAME)?;
    (entry.get("type").and_then(Value::as_str) == Some("http"))
        .then(|| entry.get("url").and_then(Value::as_str).map(str::to_string))
        .flatten()
}

/// The two entries Claude Code reads, each as (path of its array in the settings, the value).
const APPROVAL: [(&[&str], &str); 2] = [
    (&["enabledMcpjsonServers"], SERVER_NAME),
    (&["permissions", "allow"], ALLOW_RULE),
];

/// Adds the approval and the permission rule to the desk's `.claude/settings.local.json`, keeping
/// everything else in it and adding nothing twice. `Ok(Some(warning))` when the file could not be
/// merged and was left as it is.
pub fn approve(desk: &Path) -> Result<Option<String>, DeskError> {
    let path = settings_file(desk);
    let mut doc = match read_doc(&path)? {
        Doc::Absent => Map::new(),
        Doc::Object(map) => map,
        Doc::Unparsable {
            message,
            line,
            column,
        } => {
            return Ok(Some(left_alone(
                &path,
                &format!("it does not parse ({message} at line {line}, column {column})"),
            )));
        }
        Doc::NotObject(what) => {
            return Ok(Some(left_alone(
                &path,
                &format!("it is {what}, not an object"),
            )));
        }
    };
    let mut changed = false;
    for (keys, value) in APPROVAL {
        match array_at(&mut doc, keys) {
            Ok(items) => {
                if !items.iter().any(|v| v.as_str() == Some(value)) {
                    items.push(Value::String(value.into()));
                    changed = true;
                }
            }
            Err(what) => {
                return Ok(Some(left_alone(
                    &path,
                    &format!("its {} is {what}, not a list", keys.join(".")),
                )));
            }
        }
    }
    if changed {
        write_doc(&path, &doc)?;
    }
    // Claude Code lets a denial or a disabled server win over the approval: say so, it is somebody's.
    let denies = |keys: &[&str], what: &str| {
        let mut v = Some(&Value::Object(doc.clone()));
        for k in keys {
            v = v.and_then(|x| x.get(*k));
        }
        v.and_then(Value::as_array).is_some_and(|items| {
            items.iter().any(|i| {
                i.as_str()
                    .is_some_and(|s| s == what || s.starts_with(&format!("{what}__")))
            })
        })
    };
    if denies(&["disabledMcpjsonServers"], SERVER_NAME)
        || denies(&["permissions", "deny"], ALLOW_RULE)
    {
        return Ok(Some(format!(
            "{} also disables the server or denies its tools (disabledMcpjsonServers or permissions.deny), and Claude \
             Code lets that win: take those entries out for the desk to work without a prompt.",
            path.display()
        )));
    }
    Ok(None)
}

/// Takes out only the two entries [`approve`] adds; everything else in the file stays as it was. A list
/// or an object left empty by that goes too, and so does the file if nothing is left in it.
pub fn unapprove(desk: &Path) -> Result<(), DeskError> {
    let path = settings_file(desk);
    let Doc::Object(mut doc) = read_doc(&path)? else {
        return Ok(());
    };
    let mut changed = false;
    for (keys, value) in APPROVAL {
        changed |= remove_from(&mut doc, keys, value);
    }
    if !changed {
        return Ok(());
    }
    if doc.is_empty() {
        return std::fs::remove_file(&path).map_err(io_err("removing", &path));
    }
    write_doc(&path, &doc)
}

fn left_alone(path: &Path, why: &str) -> String {
    format!(
        "{} was left as it is: {why}. Until it names the server, Claude Code at that desk asks before it uses openovai: \
         add \"{SERVER_NAME}\" to enabledMcpjsonServers and \"{ALLOW_RULE}\" to permissions.allow by hand.",
        path.display()
    )
}

/// The array at `keys`, made (with the objects above it) where absent; `Err` names what stands there instead.
fn array_at<'a>(
    doc: &'a mut Map<String, Value>,
    keys: &[&str],
) -> Result<&'a mut Vec<Value>, &'static str> {
    let (last, parents) = keys.split_last().ok_or("nothing")?;
    let mut map = doc;
    for key in parents {
        let inner = map.entry(*key).or_insert_with(|| Value::Object(Map::new()));
        let kind = crate::instance::json_kind(inner);
        map = inner.as_object_mut().ok_or(kind)?;
    }
    let slot = map.entry(*last).or_insert_with(|| Value::Array(Vec::new()));
    let kind = crate::instance::json_kind(slot);
    slot.as_array_mut().ok_or(kind)
}

/// Removes `value` from the array at `keys`, and containers it leaves empty; true when it was there.
fn remove_from(map: &mut Map<String, Value>, keys: &[&str], value: &str) -> bool {
    let Some((first, rest)) = keys.split_first() else {
        return false;
    };
    let removed = match map.get_mut(*first) {
        Some(Value::Array(items)) if rest.is_empty() => {
            let before = items.len();
            items.retain(|v| v.as_str() != Some(value));
            items.len() != before
        }
        Some(Value::Object(inner)) if !rest.is_empty() => remove_from(inner, rest, value),
        _ => false,
    };
    let emptied = match map.get(*first) {
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        _ => false,
    };
    if removed && emptied {
        map.remove(*first);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desk_with(settings: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = settings {
            std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
            std::fs::write(settings_file(dir.path()), text).unwrap();
        }
        dir
    }

    fn read(dir: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(settings_file(dir)).unwrap()).unwrap()
    }

    #[test]
    fn approval_is_merged_once_and_taken_out_alone() {
        let d = desk_with(Some(
            r#"{"model":"x","permissions":{"allow":["Bash(ls)"],"deny":["Read(.env)"]},"enabledMcpjsonServers":["other"]}"#,
        ));
        assert_eq!(approve(d.path()).unwrap(), None);
        assert_eq!(approve(d.path()).unwrap(), None);
        assert_eq!(
            read(d.path()),
            json!({"model":"x","permissions":{"allow":["Bash(ls)", ALLOW_RULE],"deny":["Read(.env)"]},
                   "enabledMcpjsonServers":["other", SERVER_NAME]})
        );
        unapprove(d.path()).unwrap();
        assert_eq!(
            read(d.path()),
            json!({"model":"x","permissions":{"allow":["Bash(ls)"],"deny":["Read(.env)"]},"enabledMcpjsonServers":["other"]})
        );
    }

    #[test]
    fn a_file_of_ours_alone_goes_with_the_seat() {
        let d = desk_with(None);
        assert_eq!(approve(d.path()).unwrap(), None);
        assert_eq!(
            read(d.path()),
            json!({"enabledMcpjsonServers":[SERVER_NAME],"permissions":{"allow":[ALLOW_RULE]}})
        );
        unapprove(d.path()).unwrap();
        assert!(!settings_file(d.path()).exists());
    }

    #[test]
    fn a_broken_file_is_named_and_left_alone() {
        let text = "{\n  \"model\": \"x\",\n  oops\n}";
        let d = desk_with(Some(text));
        let warning = approve(d.path()).unwrap().unwrap();
        assert!(warning.contains("line 3, column 3"), "{warning}");
        assert_eq!(
            std::fs::read_to_string(settings_file(d.path())).unwrap(),
            text
        );
        let d = desk_with(Some(r#"{"permissions":{"allow":"mcp__openovai"}}"#));
        let warning = approve(d.path()).unwrap().unwrap();
        assert!(
            warning.contains("its permissions.allow is a string, not a list"),
            "{warning}"
        );
    }
}
