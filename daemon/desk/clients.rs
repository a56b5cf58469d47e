//! The files Gemini CLI, Codex and opencode read at a desk, each holding the seat's secret (mode 0600)
//! beside whatever a person put there: `.gemini/settings.json` (the server, `"trust": true` so its tools
//! are offered headless), `.codex/config.toml` (the server, approved by `default_tools_approval_mode`), and
//! `opencode.json`. Claude Code's are `.mcp.json` and its settings (the folder's mod.rs).
//!
//! Gemini CLI and Codex also read a desk's file only in a folder trusted in the person's home; that is
//! written only when asked (`ovai seat trust`), merged into what is there.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use jsonc_parser::cst::CstObject;

use super::{DeskError, Reach, SERVER_NAME, jsonc};
use crate::instance::{Client, Instance};

/// Where each of these clients keeps the file that holds the seat's secret, relative to the desk.
pub const SECRET_FILES: [(Client, &str); 3] = [
    (Client::GeminiCli, ".gemini/settings.json"),
    (Client::Codex, ".codex/config.toml"),
    (Client::Opencode, "opencode.json"),
];

pub fn gemini_file(desk: &Path) -> PathBuf {
    desk.join(SECRET_FILES[0].1)
}

pub fn codex_file(desk: &Path) -> PathBuf {
    desk.join(SECRET_FILES[1].1)
}

pub fn opencode_file(desk: &Path) -> PathBuf {
    desk.join(SECRET_FILES[2].1)
}

/// The JSON clients' files, and where in each the server's entry sits.
fn json_files(desk: &Path) -> [(Client, PathBuf, [&'static str; 2]); 2] {
    [
        (
            Client::GeminiCli,
            gemini_file(desk),
            ["mcpServers", SERVER_NAME],
        ),
        (Client::Opencode, opencode_file(desk), ["mcp", SERVER_NAME]),
    ]
}

/// opencode gives up on a request quiet for its `timeout`, 60 s unless said: the same as ovai's own
/// `callTimeoutSeconds`, a tie opencode won, so a call that never settled got its "Request timed out"
/// and never ovai's words naming the file. Given the clients' backstop (`super::CLIENT_TIMEOUT_MS`).
const OPENCODE_TIMEOUT_MS: u64 = super::CLIENT_TIMEOUT_MS;

/// The entry a JSON client reads, `env` the bridge's environment (the person's own variables kept).
/// Sets the server's entry in `entry` for `client`: what reaches the server (and the other way's keys
/// taken out), and the defaults where nothing is said. The rest of it is the person's.
fn fill_json_entry(
    entry: &CstObject,
    client: Client,
    reach: &Reach<'_>,
    root: &Path,
    secret: &str,
) {
    let gemini = client == Client::GeminiCli;
    match reach {
        Reach::Bridge { exe } => {
            let exe = exe.display().to_string();
            let (gone, vars): (&[&str], _) = if gemini {
                jsonc::set(entry, "command", &json!(exe));
                jsonc::set(entry, "args", &json!(["mcp"]));
                (&["httpUrl", "url", "headers"], "env")
            } else {
                jsonc::set(entry, "type", &json!("local"));
                jsonc::set(entry, "command", &json!([exe, "mcp"]));
                (&["url", "headers"], "environment")
            };
            for key in gone {
                jsonc::remove(entry, key);
            }
            let env = jsonc::object_in(entry, vars);
            jsonc::set(&env, "OVAI_ROOT", &json!(root.display().to_string()));
            jsonc::set(&env, "OVAI_SECRET", &json!(secret));
        }
        Reach::Url { url } => {
            let gone: &[&str] = if gemini {
                jsonc::set(entry, "httpUrl", &json!(url));
                &["command", "args", "env", "cwd", "url"]
            } else {
                jsonc::set(entry, "type", &json!("remote"));
                jsonc::set(entry, "url", &json!(url));
                &["command", "environment"]
            };
            for key in gone {
                jsonc::remove(entry, key);
            }
            let headers = jsonc::object_in(entry, "headers");
            jsonc::set(
                &headers,
                "Authorization",
                &json!(format!("Bearer {secret}")),
            );
        }
    }
    if gemini {
        jsonc::default(entry, "trust", &json!(true));
    } else {
        jsonc::default(entry, "enabled", &json!(true));
        jsonc::default(entry, "timeout", &json!(OPENCODE_TIMEOUT_MS));
    }
}

/// Writes the entries of the clients asked for (Claude Code's excepted: the folder's own), each merged
/// into its file. A file that cannot be merged is left as it is and said, in a sentence each, with its
/// client.
pub fn write(
    inst: &Instance,
    desk: &Path,
    reach: &Reach<'_>,
    secret: &str,
    clients: &[Client],
) -> Vec<(Client, String)> {
    let mut said = Vec::new();
    for (client, path, [outer, name]) in json_files(desk) {
        if !clients.contains(&client) {
            continue;
        }
        // Gemini CLI strips comments and `JSON.parse`s: a trailing comma breaks its file.
        let (root, doc) = match jsonc::read(&path, client == Client::Opencode) {
            Ok(jsonc::Read::Object(root, doc)) => (root, doc),
            Ok(jsonc::Read::Unparsable {
                message,
                line,
                column,
            }) => {
                said.push((
                    client,
                    left_alone(
                        desk,
                        client,
                        &path,
                        &format!("it does not parse ({message} at line {line}, column {column})"),
                    ),
                ));
                continue;
            }
            Ok(jsonc::Read::NotObject(what)) => {
                said.push((
                    client,
                    left_alone(desk, client, &path, &format!("it is {what}, not an object")),
                ));
                continue;
            }
            Err(e) => {
                said.push((client, not_written(desk, client, &e.to_string())));
                continue;
            }
        };
        if let Some(what) = jsonc::not_object(&doc, outer) {
            said.push((
                client,
                left_alone(
                    desk,
                    client,
                    &path,
                    &format!("its {outer} is {what}, not an object"),
                ),
            ));
            continue;
        }
        let servers = jsonc::object_in(&doc, outer);
        let entry = jsonc::object_in(&servers, name);
        fill_json_entry(&entry, client, reach, &inst.root, secret);
        if client == Client::Opencode {
            jsonc::default(&doc, "$schema", &json!("https://opencode.ai/config.json"));
        }
        if let Err(e) = jsonc::write(&path, &root) {
            said.push((client, not_written(desk, client, &e.to_string())));
        }
    }
    if clients.contains(&Client::Codex)
        && let Err(why) = write_codex(&codex_file(desk), reach, secret, &inst.root)
    {
        said.push((Client::Codex, not_written(desk, Client::Codex, &why)));
    }
    said
}

/// A client's file that could not be written, for what it means to the seat.
fn not_written(desk: &Path, client: Client, why: &str) -> String {
    format!(
        "{}: {} at that desk does not have the seat's secret (a session it starts there cannot reach ovai); fix \
         that and run `ovai seat rotate {}`.",
        why.trim_end_matches('.'),
        client.name(),
        seat_of(desk)
    )
}

fn left_alone(desk: &Path, client: Client, path: &Path, why: &str) -> String {
    format!(
        "{} was left as it is: {why}. Until it names the {SERVER_NAME} server, {} at that desk does not find it; fix \
         the file and run `ovai seat rotate {}`.",
        path.display(),
        client.name(),
        seat_of(desk)
    )
}

/// A desk's seat, as a command names it (a desk is named for its seat).
fn seat_of(desk: &Path) -> String {
    desk.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "NAME".into())
}

/// Reads a TOML file into a document to edit: absent is empty; one that does not parse is said.
fn read_toml(path: &Path) -> Result<Option<toml_edit::DocumentMut>, String> {
    match crate::files::read_regular(path, crate::files::MAX_READ_BYTES) {
        Ok(text) => text
            .parse::<toml_edit::DocumentMut>()
            .map(Some)
            .map_err(|e| {
                format!(
                    "{} does not parse ({})",
                    path.display(),
                    e.to_string().trim().replace('\n', " ")
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{} cannot be read: {e}", path.display())),
    }
}

fn write_toml(path: &Path, doc: &toml_edit::DocumentMut) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{} cannot be made: {e}", dir.display()))?;
    }
    let text = crate::files::keep_line_ends(path, doc.to_string());
    crate::files::write_private(path, text.as_bytes()).map_err(|e| e.to_string())
}

fn write_codex(path: &Path, reach: &Reach<'_>, secret: &str, root: &Path) -> Result<(), String> {
    use toml_edit::{Item, Table, value};
    let mut doc = read_toml(path)
        .map_err(|why| format!("{why}, and was left as it is"))?
        .unwrap_or_default();
    // A table, inline (`mcp_servers = { … }`) or not.
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or_else(|| {
            format!(
                "{} was left as it is: its mcp_servers is not a table",
                path.display()
            )
        })?;
    // Edited in place: what a person put in the entry (a `tool_timeout_sec` for slow tools, comments)
    // stays; ovai writes how to reach the server, and its defaults only where nothing is said.
    let entry = servers
        .entry(SERVER_NAME)
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| {
            format!(
                "{} was left as it is: its mcp_servers.{SERVER_NAME} is not a table",
                path.display()
            )
        })?;
    let strings = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    };
    match reach {
        Reach::Bridge { exe } => {
            // What Codex takes only for a server over HTTP: left, it refuses the whole file.
            for gone in [
                "url",
                "http_headers",
                "env_http_headers",
                "bearer_token_env_var",
            ] {
                entry.remove(gone);
            }
            set_toml(entry, "command", value(exe.display().to_string()));
            set_toml(entry, "args", value(toml_edit::Array::from_iter(["mcp"])));
            let root = root.display().to_string();
            set_in_toml_table(
                entry,
                "env",
                strings(&[("OVAI_ROOT", &root), ("OVAI_SECRET", secret)]),
            )?;
        }
        Reach::Url { url } => {
            // And only for one it starts.
            for gone in ["command", "args", "env", "env_vars", "cwd"] {
                entry.remove(gone);
            }
            set_toml(entry, "url", value(*url));
            let bearer = format!("Bearer {secret}");
            set_in_toml_table(
                entry,
                "http_headers",
                strings(&[("Authorization", &bearer)]),
            )?;
        }
    }
    // Without it every call is refused: "MCP tool call requires approval, but approval policy is never".
    if !entry.contains_key("default_tools_approval_mode") {
        entry.insert("default_tools_approval_mode", value("approve"));
    }
    write_toml(path, &doc)
}

/// Sets `key` to `item` unless it holds that already, keeping the comment around the old value.
fn set_toml(table: &mut dyn toml_edit::TableLike, key: &str, item: toml_edit::Item) {
    let same = table
        .get(key)
        .and_then(toml_edit::Item::as_value)
        .map(|v| v.to_string().trim().to_string())
        == item.as_value().map(|v| v.to_string().trim().to_string());
    if same && table.contains_key(key) {
        return;
    }
    let decor = table
        .get(key)
        .and_then(toml_edit::Item::as_value)
        .map(|v| v.decor().clone());
    let mut item = item;
    if let (Some(decor), Some(v)) = (decor, item.as_value_mut()) {
        *v.decor_mut() = decor;
    }
    table.insert(key, item);
}

/// Sets these string keys in the table `key` of `entry` (made if absent), keeping the rest of it.
fn set_in_toml_table(
    entry: &mut dyn toml_edit::TableLike,
    key: &str,
    pairs: Vec<(String, String)>,
) -> Result<(), String> {
    if !entry.get(key).is_some_and(toml_edit::Item::is_table_like) {
        entry.insert(key, toml_edit::Item::Table(toml_edit::Table::new()));
    }
    let Some(table) = entry
        .get_mut(key)
        .and_then(toml_edit::Item::as_table_like_mut)
    else {
        return Err(format!(
            "its mcp_servers.{SERVER_NAME}.{key} could not be made a table"
        ));
    };
    for (k, v) in pairs {
        set_toml(table, &k, toml_edit::value(v));
    }
    Ok(())
}

/// Removes a client's file left with nothing in it, and its folder in the desk (`.gemini`, `.codex`)
/// if that holds nothing else now.
fn remove_ours(desk: &Path, path: &Path) -> Result<(), DeskError> {
    std::fs::remove_file(path).map_err(|source| DeskError::Io {
        what: "removing",
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(folder) = path.parent().filter(|f| *f != desk) {
        // Not empty (a person's own files there) is no fault: the folder stays.
        let _ = std::fs::remove_dir(folder);
    }
    Ok(())
}

/// Takes the server's entry out of every client's file (whichever clients the instance names now); a
/// file left with nothing in it goes.
pub fn remove(desk: &Path) -> Result<(), DeskError> {
    for (client, path, [outer, name]) in json_files(desk) {
        if super::through_link(desk, &path) || !path.is_file() {
            continue;
        }
        let jsonc::Read::Object(root, doc) = jsonc::read(&path, client == Client::Opencode)? else {
            continue;
        };
        let Some(servers) = jsonc::object_of(&doc, outer) else {
            continue;
        };
        if jsonc::value_of(&servers, name).is_none() {
            continue;
        }
        jsonc::remove(&servers, name);
        if servers.properties().is_empty() {
            jsonc::remove(&doc, outer);
        }
        let ours_only = !jsonc::has_comments(&root)
            && doc
                .properties()
                .iter()
                .all(|p| p.decoded_name().as_deref() == Some("$schema"));
        if ours_only {
            remove_ours(desk, &path)?;
        } else {
            jsonc::write(&path, &root)?;
        }
    }
    let path = codex_file(desk);
    if !super::through_link(desk, &path)
        && let Ok(Some(mut doc)) = read_toml(&path)
        && let Some(servers) = doc
            .get_mut("mcp_servers")
            .and_then(|s| s.as_table_like_mut())
        && let Some(removed) = servers.remove(SERVER_NAME)
    {
        if servers.is_empty() {
            doc.remove("mcp_servers");
        }
        // The comments written above ovai's table went with it: kept, at the file's end.
        let above = removed
            .as_table()
            .and_then(|t| t.decor().prefix())
            .and_then(|p| p.as_str())
            .filter(|p| p.contains('#'))
            .map(str::to_string);
        if let Some(above) = above {
            let trailing = doc.trailing().as_str().unwrap_or("").to_string();
            doc.set_trailing(format!("{trailing}{above}"));
        }
        // A file left with a person's comment in it is theirs, and stays.
        let commented = doc
            .to_string()
            .lines()
            .any(|l| l.trim_start().starts_with('#'));
        if doc.is_empty() && !commented {
            remove_ours(desk, &path)?;
        } else {
            write_toml(&path, &doc).map_err(|why| DeskError::Io {
                what: "writing",
                path: path.clone(),
                source: std::io::Error::other(why),
            })?;
        }
    }
    Ok(())
}

/// The clients among these (Claude Code's file is always there) whose file the desk has none of, named.
pub fn missing(desk: &Path, clients: &[Client]) -> Vec<&'static str> {
    SECRET_FILES
        .iter()
        .filter(|(c, f)| clients.contains(c) && !desk.join(f).exists())
        .map(|(c, _)| c.name())
        .collect()
}

/// The files of these clients in a desk that hold the seat's secret.
pub fn secret_files(desk: &Path) -> Vec<PathBuf> {
    SECRET_FILES.iter().map(|(_, f)| desk.join(f)).collect()
}

/// Where Gemini CLI keeps its trusted folders and Codex its settings, for the person whose home is
/// `home`: `$GEMINI_CLI_TRUSTED_FOLDERS_PATH`, else `.gemini/trustedFolders.json` in `$GEMINI_CLI_HOME`
/// or the home (as Gemini CLI reads them); and `$CODEX_HOME` (else `~/.codex`).
pub fn homes(home: &Path) -> (PathBuf, PathBuf) {
    let set = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let codex_home = set("CODEX_HOME").unwrap_or_else(|| home.join(".codex"));
    let gemini = set("GEMINI_CLI_TRUSTED_FOLDERS_PATH").unwrap_or_else(|| {
        set("GEMINI_CLI_HOME")
            .unwrap_or_else(|| home.to_path_buf())
            .join(".gemini/trustedFolders.json")
    });
    (gemini, codex_home)
}

/// The folder Codex takes for a desk's project: the git work tree it is in, else the desk itself.
fn codex_project(desk: &Path) -> PathBuf {
    desk.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(desk)
        .to_path_buf()
}

/// What `ovai seat trust` did: sentences of what is trusted, and of a decision found against it, which
/// is left as it is.
#[derive(Debug, Default)]
pub struct Trusted {
    pub said: Vec<String>,
    pub left: Vec<String>,
}

/// Trusts the desk where Gemini CLI and Codex look (the clients asked for), in the person's home: entries
/// merged into what is there. An entry that says not to trust it is somebody's decision, and is kept.
pub fn trust(
    desk: &Path,
    (gemini_file, codex_home): (&Path, &Path),
    clients: &[Client],
) -> Result<Trusted, String> {
    // A file that is a link (into a dotfiles checkout) is written where it leads: replaced by a file of
    // ours, its target would keep the old trust, and the link would be gone.
    let (gemini, codex) = (
        where_it_leads(gemini_file.to_path_buf()),
        where_it_leads(codex_home.join("config.toml")),
    );
    let mut done = Trusted::default();
    if clients.contains(&Client::GeminiCli) {
        let (root, doc) = trusted_folders(&gemini).map_err(|why| {
            format!("{why}: it was left as it is. Fix it and run the command again.")
        })?;
        let key = desk.display().to_string();
        let now = jsonc::value_of(&doc, &key);
        match now.as_ref().and_then(Value::as_str) {
            // TRUST_PARENT trusts the folder above, and so this one.
            Some("TRUST_FOLDER" | "TRUST_PARENT") => {}
            Some(other) => done
                .left
                .push(decided(&gemini, other, desk, Client::GeminiCli)),
            None => {
                jsonc::set(&doc, &key, &json!("TRUST_FOLDER"));
                jsonc::write(&gemini, &root).map_err(|e| e.to_string())?;
            }
        }
        if done.left.is_empty() {
            done.said.push(format!(
                "Gemini CLI trusts {} ({}).",
                desk.display(),
                gemini.display()
            ));
        }
    }
    if clients.contains(&Client::Codex)
        && let Err(why) = trust_codex(desk, &codex, &mut done)
    {
        done.left.push(why);
    }
    Ok(done)
}

/// Where `path` leads, when it is a symbolic link to a file that is there; else `path`.
fn where_it_leads(path: PathBuf) -> PathBuf {
    if path.is_symlink()
        && let Ok(target) = std::fs::canonicalize(&path)
    {
        return target;
    }
    path
}

/// The sentence for an entry that says not to trust `folder`: somebody's decision, kept.
fn decided(file: &Path, said: &str, folder: &Path, client: Client) -> String {
    format!(
        "{} says {said} for {}: somebody decided so, and it is left as it is. Until that entry is changed by \
         hand, {} at that desk does not read its settings, and offers no {SERVER_NAME} tool.",
        file.display(),
        folder.display(),
        client.name()
    )
}

/// Codex's part of `trust`: the desk's project trusted in `codex` (its config.toml), unless it says not to.
fn trust_codex(desk: &Path, codex: &Path, done: &mut Trusted) -> Result<(), String> {
    let project = codex_project(desk);
    let mut doc = read_toml(codex)
        .map_err(|why| format!("{why}: it was left as it is. Fix it and run the command again."))?
        .unwrap_or_default();
    let projects = doc
        .entry("projects")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_like_mut()
        .ok_or_else(|| {
            format!(
                "{}'s projects is not a table: it was left as it is.",
                codex.display()
            )
        })?;
    let key = project.display().to_string();
    let entry = projects
        .entry(&key)
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| {
            format!(
                "{}'s projects.\"{key}\" is not a table: it was left as it is.",
                codex.display()
            )
        })?;
    let trusted = match entry.get("trust_level").and_then(|v| v.as_str()) {
        Some("trusted") => true,
        Some(other) => {
            let other = format!("trust_level = \"{other}\"");
            done.left
                .push(decided(codex, &other, &project, Client::Codex));
            false
        }
        None => {
            entry.insert("trust_level", toml_edit::value("trusted"));
            write_toml(codex, &doc)?;
            true
        }
    };
    if trusted {
        // Codex trusts a project: the git work tree the desk is in, all of it.
        let whole = if project == desk {
            // helper-85: "trusted" by ovai, then "Not inside a trusted directory" from codex exec.
            " (outside a git work tree, `codex exec` also wants --skip-git-repo-check)".to_string()
        } else {
            " (the git work tree the desk is in: Codex trusts a project, all of it)".to_string()
        };
        done.said.push(format!(
            "Codex trusts {}{whole} ({}).",
            project.display(),
            codex.display()
        ));
    }
    Ok(())
}

/// Takes out of the person's home the trust `trust` writes for `desk` (a `TRUST_FOLDER` entry naming it,
/// a Codex project that is the desk itself, trusted), for a desk no seat has there any more: which of
/// these clients had it, and what could not be read or written, in words (each client on its own). A
/// trust of a folder around the desk, or any other decision, stays; so does a Codex project that is a
/// git work tree the desk is in (other work is there).
pub fn untrust(
    desk: &Path,
    (gemini_file, codex_home): (&Path, &Path),
    clients: &[Client],
) -> (Vec<Client>, Vec<String>) {
    let (mut had, mut failed) = (Vec::new(), Vec::new());
    let gemini = where_it_leads(gemini_file.to_path_buf());
    if clients.contains(&Client::GeminiCli) && gemini.is_file() {
        match untrust_gemini(desk, &gemini) {
            Ok(true) => had.push(Client::GeminiCli),
            Ok(false) => {}
            Err(why) => failed.push(why),
        }
    }
    let codex = where_it_leads(codex_home.join("config.toml"));
    if clients.contains(&Client::Codex) && trusted_alone(desk) {
        match untrust_codex(desk, &codex) {
            Ok(true) => had.push(Client::Codex),
            Ok(false) => {}
            Err(why) => failed.push(why),
        }
    }
    (had, failed)
}

/// Those of these clients whose home files trust `desk` by an entry naming it exactly (what `trust`
/// writes), read only: a file that cannot be read has none.
pub fn exact_trust(
    desk: &Path,
    (gemini_file, codex_home): (&Path, &Path),
    clients: &[Client],
) -> Vec<Client> {
    let key = desk.display().to_string();
    let gemini = || {
        let Ok(jsonc::Read::Object(_, doc)) =
            jsonc::read(&where_it_leads(gemini_file.to_path_buf()), false)
        else {
            return false;
        };
        jsonc::value_of(&doc, &key).as_ref().and_then(Value::as_str) == Some("TRUST_FOLDER")
    };
    let codex = || codex_trusts(codex_home, &key);
    clients
        .iter()
        .copied()
        .filter(|c| match c {
            Client::GeminiCli => gemini(),
            Client::Codex => trusted_alone(desk) && codex(),
            _ => false,
        })
        .collect()
}

/// Whether Codex's config.toml in `codex_home` (or where a link there leads) trusts the project `key`.
fn codex_trusts(codex_home: &Path, key: &str) -> bool {
    read_toml(&where_it_leads(codex_home.join("config.toml")))
        .ok()
        .flatten()
        .and_then(|doc| {
            doc.get("projects")?
                .get(key)?
                .get("trust_level")?
                .as_str()
                .map(|l| l == "trusted")
        })
        .unwrap_or(false)
}

/// Whether Codex's trust of `desk` is of the desk alone (not of a git work tree it is in).
pub fn trusted_alone(desk: &Path) -> bool {
    codex_project(desk) == desk
}

/// Gemini CLI's trusted folders, read as it reads them: its object, or why not (a file that does not
/// parse, or holds no object, is left as it is).
fn trusted_folders(gemini: &Path) -> Result<(jsonc_parser::cst::CstRootNode, CstObject), String> {
    match jsonc::read(gemini, false).map_err(|e| e.to_string())? {
        jsonc::Read::Object(root, doc) => Ok((root, doc)),
        jsonc::Read::Unparsable {
            message,
            line,
            column,
        } => Err(format!(
            "{} does not parse ({message} at line {line}, column {column})",
            gemini.display()
        )),
        jsonc::Read::NotObject(what) => {
            Err(format!("{} is {what}, not an object", gemini.display()))
        }
    }
}

fn untrust_gemini(desk: &Path, gemini: &Path) -> Result<bool, String> {
    let left = |why: String| {
        format!(
            "{why}: an entry for {}, if it has one, stays",
            desk.display()
        )
    };
    let (root, doc) = trusted_folders(gemini).map_err(left)?;
    let key = desk.display().to_string();
    if jsonc::value_of(&doc, &key).as_ref().and_then(Value::as_str) != Some("TRUST_FOLDER") {
        return Ok(false);
    }
    jsonc::remove(&doc, &key);
    jsonc::write(gemini, &root).map_err(|e| left(e.to_string()))?;
    Ok(true)
}

fn untrust_codex(desk: &Path, codex: &Path) -> Result<bool, String> {
    let left = |why: String| {
        format!(
            "{why}: a trust of the project {}, if it has one, stays",
            desk.display()
        )
    };
    let Some(mut doc) = read_toml(codex).map_err(left)? else {
        return Ok(false);
    };
    let Some(projects) = doc.get_mut("projects").and_then(|p| p.as_table_like_mut()) else {
        return Ok(false);
    };
    let key = desk.display().to_string();
    let trusted = projects
        .get(&key)
        .and_then(|e| e.get("trust_level"))
        .and_then(|v| v.as_str())
        == Some("trusted");
    if !trusted {
        return Ok(false);
    }
    let mut above = None;
    if let Some(entry) = projects.get_mut(&key).and_then(|e| e.as_table_like_mut()) {
        entry.remove("trust_level");
        if entry.is_empty() {
            // The comments written above the project's table go with it: kept, at the file's end.
            above = projects
                .remove(&key)
                .and_then(|t| {
                    t.as_table()
                        .and_then(|t| t.decor().prefix()?.as_str().map(str::to_string))
                })
                .filter(|p| p.contains('#'));
        }
    }
    if projects.is_empty() {
        doc.remove("projects");
    }
    if let Some(above) = above {
        let trailing = doc.trailing().as_str().unwrap_or("").to_string();
        doc.set_trailing(format!("{trailing}{above}"));
    }
    write_toml(codex, &doc).map_err(left)?;
    Ok(true)
}

/// Those of these clients that keep their trust in the person's home and do not trust `desk` there yet:
/// `seat add` says to trust it only for them.
pub fn not_trusting(
    desk: &Path,
    (gemini_file, codex_home): (&Path, &Path),
    clients: &[Client],
) -> Vec<Client> {
    let gemini_trusts = || {
        let Ok(jsonc::Read::Object(_, doc)) = jsonc::read(gemini_file, false) else {
            return false;
        };
        let entries = jsonc::entries(&doc);
        let said = |path: &Path| {
            entries
                .iter()
                .find(|(k, _)| Path::new(k) == path)
                .and_then(|(_, v)| v.as_str().map(str::to_string))
        };
        // A folder trusted trusts what is in it; TRUST_PARENT trusts the folder above the one named.
        said(desk).as_deref() != Some("DO_NOT_TRUST")
            && entries.iter().any(|(k, v)| {
                let k = Path::new(k);
                match v.as_str() {
                    Some("TRUST_FOLDER") => desk.starts_with(k),
                    Some("TRUST_PARENT") => k.parent().is_some_and(|p| desk.starts_with(p)),
                    _ => false,
                }
            })
    };

    clients
        .iter()
        .copied()
        .filter(|c| match c {
            Client::GeminiCli => !gemini_trusts(),
            Client::Codex => !codex_trusts(codex_home, &codex_project(desk).display().to_string()),
            _ => false,
        })
        .collect()
}

/// The clients among these that keep their trust in the person's home, named ("Gemini CLI and Codex").
pub fn trusting(clients: &[Client]) -> Option<String> {
    let names: Vec<&str> = [Client::GeminiCli, Client::Codex]
        .into_iter()
        .filter(|c| clients.contains(c))
        .map(Client::name)
        .collect();
    (!names.is_empty()).then(|| names.join(" and "))
}

/// The one line `seat add` prints for the trust that lives in the person's home, if any client asks it.
pub fn trust_line(seat: &str, clients: &[Client]) -> Option<String> {
    let asking: Vec<(&str, &str)> = [
        (Client::GeminiCli, "~/.gemini/trustedFolders.json"),
        (Client::Codex, "~/.codex/config.toml"),
    ]
    .into_iter()
    .filter(|(c, _)| clients.contains(c))
    .map(|(c, file)| (c.name(), file))
    .collect();
    (!asking.is_empty()).then(|| {
        let names: Vec<&str> = asking.iter().map(|(n, _)| *n).collect();
        let files: Vec<&str> = asking.iter().map(|(_, f)| *f).collect();
        format!(
            "{} {} a desk's settings only in a folder you trust: `ovai seat trust {seat}` writes that into your \
             home ({}).",
            names.join(" and "),
            if names.len() == 1 { "reads" } else { "read" },
            files.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jsonc_value(text: &str) -> Value {
        jsonc_parser::cst::CstRootNode::parse(text, &Default::default())
            .unwrap()
            .value()
            .and_then(|v| v.to_serde_value())
            .unwrap()
    }

    fn inst() -> (tempfile::TempDir, Instance) {
        let dir = tempfile::tempdir().unwrap();
        let inst = Instance::at(dir.path().to_path_buf());
        (dir, inst)
    }

    #[test]
    fn each_clients_entry_is_merged_kept_apart_and_taken_out_alone() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        std::fs::create_dir_all(desk.join(".codex")).unwrap();
        std::fs::write(
            desk.join(".codex/config.toml"),
            "model = \"o9\"\n\n[mcp_servers.other]\ncommand = \"x\"\n",
        )
        .unwrap();
        std::fs::write(
            opencode_file(&desk),
            r#"{"theme":"dark","mcp":{"other":{"type":"local"}}}"#,
        )
        .unwrap();
        let exe = Path::new("/opt/ovai");
        let said = write(&inst, &desk, &Reach::Bridge { exe }, "s3cret", &Client::ALL);
        assert!(said.is_empty(), "{said:?}");
        let gemini: Value =
            serde_json::from_str(&std::fs::read_to_string(gemini_file(&desk)).unwrap()).unwrap();
        assert_eq!(gemini["mcpServers"]["openovai"]["trust"], true);
        assert_eq!(
            gemini["mcpServers"]["openovai"]["env"]["OVAI_SECRET"],
            "s3cret"
        );
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap();
        assert!(codex.starts_with("model = \"o9\""), "{codex}");
        assert!(
            codex.contains("[mcp_servers.other]")
                && codex.contains("default_tools_approval_mode = \"approve\""),
            "{codex}"
        );
        assert!(codex.contains("OVAI_SECRET = \"s3cret\""), "{codex}");
        let open: Value =
            serde_json::from_str(&std::fs::read_to_string(opencode_file(&desk)).unwrap()).unwrap();
        assert_eq!(open["theme"], "dark");
        assert_eq!(
            open["mcp"]["openovai"]["command"],
            json!(["/opt/ovai", "mcp"])
        );
        assert!(open["mcp"]["other"].is_object());
        for f in secret_files(&desk) {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
                0o600,
                "{f:?}"
            );
        }
        remove(&desk).unwrap();
        assert!(!gemini_file(&desk).exists());
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap();
        assert!(
            !codex.contains("openovai") && codex.contains("[mcp_servers.other]"),
            "{codex}"
        );
        let open: Value =
            serde_json::from_str(&std::fs::read_to_string(opencode_file(&desk)).unwrap()).unwrap();
        assert!(open["mcp"].get("openovai").is_none() && open["theme"] == "dark");
    }

    /// A person's own keys in the server's entry (a longer timeout for slow tools, a trust they took
    /// back) and their comments stay through a new secret; ovai's defaults are written only where
    /// nothing is said.
    #[test]
    fn a_persons_own_keys_and_comments_in_the_entry_are_kept() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        let exe = Path::new("/opt/ovai");
        let bridge = Reach::Bridge { exe };
        assert!(write(&inst, &desk, &bridge, "old", &Client::ALL).is_empty());
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap().replace(
            "[mcp_servers.openovai]\n",
            "[mcp_servers.openovai]\ntool_timeout_sec = 600  # slow CI tools\nstartup_timeout_sec = 30\n",
        ).replace("default_tools_approval_mode = \"approve\"", "default_tools_approval_mode = \"prompt\"");
        std::fs::write(codex_file(&desk), &codex).unwrap();
        std::fs::write(
            gemini_file(&desk),
            "{\n  // pinned for the team\n  \"mcpServers\": {\n    \"openovai\": {\"command\": \"/opt/ovai\", \"args\": [\"mcp\"], \"env\": {\"OVAI_SECRET\": \"old\", \"MINE\": \"1\"}, \"timeout\": 900000, \"trust\": false}\n  }\n}\n",
        )
        .unwrap();
        std::fs::write(
            opencode_file(&desk),
            "{\n  /* ours */\n  \"mcp\": {\"openovai\": {\"type\": \"local\", \"timeout\": 1200000, \"enabled\": false}}\n}\n",
        )
        .unwrap();
        let said = write(&inst, &desk, &bridge, "new", &Client::ALL);
        assert!(said.is_empty(), "{said:?}");
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap();
        for kept in [
            "tool_timeout_sec = 600  # slow CI tools",
            "startup_timeout_sec = 30",
            "default_tools_approval_mode = \"prompt\"",
            "OVAI_SECRET = \"new\"",
        ] {
            assert!(codex.contains(kept), "{kept}: {codex}");
        }
        assert!(!codex.contains("\"old\""), "{codex}");
        let gemini = std::fs::read_to_string(gemini_file(&desk)).unwrap();
        assert!(gemini.contains("// pinned for the team"), "{gemini}");
        let g = jsonc_value(&gemini);
        let entry = &g["mcpServers"]["openovai"];
        assert_eq!(entry["timeout"], 900000, "{gemini}");
        assert_eq!(entry["trust"], false, "{gemini}");
        assert_eq!(entry["env"]["MINE"], "1", "{gemini}");
        assert_eq!(entry["env"]["OVAI_SECRET"], "new", "{gemini}");
        let open = std::fs::read_to_string(opencode_file(&desk)).unwrap();
        assert!(open.contains("/* ours */"), "{open}");
        let o = jsonc_value(&open);
        let entry = &o["mcp"]["openovai"];
        assert_eq!(entry["timeout"], 1200000, "{open}");
        assert_eq!(entry["enabled"], false, "{open}");
        assert_eq!(entry["environment"]["OVAI_SECRET"], "new", "{open}");
        assert_eq!(entry["command"], json!(["/opt/ovai", "mcp"]), "{open}");
    }

    /// Gemini CLI reads no trailing comma (it strips comments and `JSON.parse`s), opencode does: each
    /// file is read as its client reads it. Of a server given twice, the last is the one edited, as
    /// the clients read the last.
    #[test]
    fn each_json_file_is_read_as_its_client_reads_it() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        std::fs::create_dir_all(desk.join(".gemini")).unwrap();
        let gemini = "{\"mcpServers\": {},}\n";
        std::fs::write(gemini_file(&desk), gemini).unwrap();
        std::fs::write(
            opencode_file(&desk),
            "{\"mcp\": {\"openovai\": {\"timeout\": 1}, \"openovai\": {\"timeout\": 2},},}\n",
        )
        .unwrap();
        let exe = Path::new("/opt/ovai");
        let said = write(&inst, &desk, &Reach::Bridge { exe }, "s", &Client::ALL);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0]
                .1
                .contains("settings.json was left as it is: it does not parse"),
            "{said:?}"
        );
        assert_eq!(std::fs::read_to_string(gemini_file(&desk)).unwrap(), gemini);
        let open = std::fs::read_to_string(opencode_file(&desk)).unwrap();
        let o = jsonc_value(&open);
        // serde keeps the last of a key given twice, as JSON.parse does.
        assert_eq!(o["mcp"]["openovai"]["timeout"], 2, "{open}");
        assert_eq!(
            o["mcp"]["openovai"]["environment"]["OVAI_SECRET"], "s",
            "{open}"
        );
    }

    /// Keys Codex takes only for one way of reaching a server go when the seat changes way: left, Codex
    /// refuses the whole file ("env_vars is not supported for streamable_http"). Inline tables, which
    /// Codex reads, are edited like the others.
    #[test]
    fn codex_keys_of_the_other_way_go_and_inline_tables_are_edited() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        std::fs::create_dir_all(desk.join(".codex")).unwrap();
        std::fs::write(
            codex_file(&desk),
            "mcp_servers = { mine = { command = \"echo\" }, openovai = { command = \"x\", env_vars = [\"FOO\"] } }\n",
        )
        .unwrap();
        let url = Reach::Url {
            url: "https://h/mcp",
        };
        let said = write(&inst, &desk, &url, "s1", &[Client::Codex]);
        assert!(said.is_empty(), "{said:?}");
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap();
        let doc: toml_edit::DocumentMut = codex.parse().unwrap();
        let entry = &doc["mcp_servers"]["openovai"];
        assert!(
            entry.get("env_vars").is_none() && entry.get("command").is_none(),
            "{codex}"
        );
        assert_eq!(entry["url"].as_str(), Some("https://h/mcp"), "{codex}");
        assert_eq!(
            doc["mcp_servers"]["mine"]["command"].as_str(),
            Some("echo"),
            "{codex}"
        );
        let codex = codex.replace("url = ", "env_http_headers = { X = \"Y\" }, url = ");
        std::fs::write(codex_file(&desk), &codex).unwrap();
        let exe = Path::new("/opt/ovai");
        let said = write(&inst, &desk, &Reach::Bridge { exe }, "s2", &[Client::Codex]);
        assert!(said.is_empty(), "{said:?}");
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap();
        let doc: toml_edit::DocumentMut = codex.parse().unwrap();
        let entry = &doc["mcp_servers"]["openovai"];
        assert!(
            entry.get("env_http_headers").is_none() && entry.get("url").is_none(),
            "{codex}"
        );
        assert_eq!(entry["env"]["OVAI_SECRET"].as_str(), Some("s2"), "{codex}");
    }

    /// `seat remove` leaves a file that holds a person's comment (it is theirs), and never touches one
    /// that is a link; `seat trust` writes through a link (a dotfiles checkout) instead of replacing it;
    /// a seat change refuses a desk file that is a link.
    #[test]
    fn comments_keep_a_file_and_links_are_never_replaced() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        let exe = Path::new("/opt/ovai");
        let bridge = Reach::Bridge { exe };
        assert!(write(&inst, &desk, &bridge, "s", &Client::ALL).is_empty());
        let gemini = std::fs::read_to_string(gemini_file(&desk)).unwrap();
        std::fs::write(
            gemini_file(&desk),
            gemini.replacen("{", "{\n  // keep me", 1),
        )
        .unwrap();
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap();
        std::fs::write(codex_file(&desk), format!("# my codex note\n{codex}")).unwrap();
        let elsewhere = dir.path().join("opencode-elsewhere.json");
        std::fs::rename(opencode_file(&desk), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, opencode_file(&desk)).unwrap();
        let refused = super::super::check_for_secret(&desk, &Client::ALL).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("opencode.json is a symbolic link"),
            "{refused}"
        );
        remove(&desk).unwrap();
        let gemini = std::fs::read_to_string(gemini_file(&desk)).unwrap();
        assert!(
            gemini.contains("// keep me") && !gemini.contains("openovai"),
            "{gemini}"
        );
        let codex = std::fs::read_to_string(codex_file(&desk)).unwrap();
        assert!(
            codex.contains("# my codex note") && !codex.contains("openovai"),
            "{codex}"
        );
        assert!(opencode_file(&desk).is_symlink());
        // Trust, through a link into a dotfiles checkout.
        let home = dir.path().join("home");
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::create_dir_all(&dotfiles).unwrap();
        std::fs::write(dotfiles.join("trusted.json"), "{}\n").unwrap();
        std::os::unix::fs::symlink(
            dotfiles.join("trusted.json"),
            home.join(".gemini/trustedFolders.json"),
        )
        .unwrap();
        let homes = (
            home.join(".gemini/trustedFolders.json"),
            home.join(".codex"),
        );
        trust(&desk, (&homes.0, &homes.1), &[Client::GeminiCli]).unwrap();
        assert!(home.join(".gemini/trustedFolders.json").is_symlink());
        let trusted = std::fs::read_to_string(dotfiles.join("trusted.json")).unwrap();
        assert_eq!(
            jsonc_value(&trusted)[desk.display().to_string()],
            "TRUST_FOLDER",
            "{trusted}"
        );
    }

    /// opencode reads a file that begins with a byte-order mark; Gemini CLI does not.
    #[test]
    fn a_byte_order_mark_is_read_as_each_client_reads_it() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        std::fs::create_dir_all(desk.join(".gemini")).unwrap();
        std::fs::write(
            opencode_file(&desk),
            "\u{feff}{\"mcp\": {\"mine\": {\"type\": \"local\"}}}\n",
        )
        .unwrap();
        std::fs::write(gemini_file(&desk), "\u{feff}{}\n").unwrap();
        let exe = Path::new("/opt/ovai");
        let said = write(&inst, &desk, &Reach::Bridge { exe }, "s", &Client::ALL);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].1.contains("settings.json was left as it is"),
            "{said:?}"
        );
        let o = jsonc_value(&std::fs::read_to_string(opencode_file(&desk)).unwrap());
        assert_eq!(o["mcp"]["mine"]["type"], "local");
        assert_eq!(o["mcp"]["openovai"]["environment"]["OVAI_SECRET"], "s");
    }

    /// A file written with Windows line ends (a checkout with `core.autocrlf`, an editor's setting) keeps
    /// them: a diff of every line for a new secret is not ours to make.
    #[test]
    fn line_ends_are_kept() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        std::fs::create_dir_all(desk.join(".codex")).unwrap();
        std::fs::write(
            codex_file(&desk),
            "model = \"o9\"\r\n\r\n[mcp_servers.other]\r\ncommand = \"x\"\r\n",
        )
        .unwrap();
        std::fs::write(opencode_file(&desk), "{\r\n  \"theme\": \"dark\"\r\n}\r\n").unwrap();
        // One stray CRLF among Unix lines does not turn the file over.
        std::fs::create_dir_all(gemini_file(&desk).parent().unwrap()).unwrap();
        std::fs::write(
            gemini_file(&desk),
            "{\n  \"theme\": \"dark\",\r\n  \"ui\": {}\n}\n",
        )
        .unwrap();
        let exe = Path::new("/opt/ovai");
        let said = write(&inst, &desk, &Reach::Bridge { exe }, "s3cret", &Client::ALL);
        assert!(said.is_empty(), "{said:?}");
        for (path, crlf) in [
            (codex_file(&desk), true),
            (opencode_file(&desk), true),
            (gemini_file(&desk), false),
        ] {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains("s3cret"), "{text}");
            let bare = text.replace("\r\n", "").matches('\n').count();
            if crlf {
                assert_eq!(bare, 0, "{path:?}: {text:?}");
            } else {
                assert_eq!(text.matches("\r\n").count(), 1, "{path:?}: {text:?}");
            }
        }
    }

    /// A project in Codex's config that is no table is named and left as it is, not a panic.
    #[test]
    fn a_codex_project_that_is_no_table_is_left_alone() {
        let (dir, _) = inst();
        let home = dir.path().join("home");
        let desk = dir.path().join("desks/w1");
        std::fs::create_dir_all(&desk).unwrap();
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        let codex = format!("[projects]\n\"{}\" = \"trusted\"\n", desk.display());
        std::fs::write(home.join(".codex/config.toml"), &codex).unwrap();
        let homes = (
            home.join(".gemini/trustedFolders.json"),
            home.join(".codex"),
        );
        let done = trust(&desk, (&homes.0, &homes.1), &[Client::Codex]).unwrap();
        assert!(
            done.left.len() == 1 && done.left[0].contains("is not a table: it was left as it is"),
            "{done:?}"
        );
        assert_eq!(
            std::fs::read_to_string(home.join(".codex/config.toml")).unwrap(),
            codex
        );
    }

    #[test]
    fn a_file_that_does_not_parse_is_named_and_left_alone() {
        let (dir, inst) = inst();
        let desk = dir.path().join("desk");
        std::fs::create_dir_all(desk.join(".codex")).unwrap();
        std::fs::write(codex_file(&desk), "model = \n").unwrap();
        std::fs::write(opencode_file(&desk), "{ nope").unwrap();
        let said = write(
            &inst,
            &desk,
            &Reach::Url {
                url: "https://x/mcp",
            },
            "s",
            &Client::ALL,
        );
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said.iter()
                .any(|s| s.1.contains("opencode.json was left as it is") && s.1.contains("line 1")),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|s| s.1.contains("config.toml does not parse")
                    && s.1.contains("was left as it is")),
            "{said:?}"
        );
        assert_eq!(
            std::fs::read_to_string(codex_file(&desk)).unwrap(),
            "model = \n"
        );
    }

    #[test]
    fn trust_is_merged_into_the_home_files() {
        let (dir, _) = inst();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::write(
            home.join(".gemini/trustedFolders.json"),
            r#"{"/elsewhere":"TRUST_PARENT"}"#,
        )
        .unwrap();
        let desk = dir.path().join("desks/w1");
        std::fs::create_dir_all(&desk).unwrap();
        let homes = (
            home.join(".gemini/trustedFolders.json"),
            home.join(".codex"),
        );
        let done = trust(&desk, (&homes.0, &homes.1), &Client::ALL).unwrap();
        assert_eq!(done.said.len(), 2, "{done:?}");
        assert!(done.left.is_empty(), "{done:?}");
        let g: Value = serde_json::from_str(
            &std::fs::read_to_string(home.join(".gemini/trustedFolders.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(g["/elsewhere"], "TRUST_PARENT");
        assert_eq!(g[desk.display().to_string()], "TRUST_FOLDER");
        let c = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap();
        assert!(
            c.contains(&format!("[projects.\"{}\"]", desk.display()))
                && c.contains("trust_level = \"trusted\""),
            "{c}"
        );
        // Again: nothing twice.
        trust(&desk, (&homes.0, &homes.1), &Client::ALL).unwrap();
        let again = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap();
        assert_eq!(c, again);
    }

    /// An entry that says not to trust the desk is somebody's decision: kept, and said; a comment in
    /// Gemini CLI's file (which it reads) is no reason to refuse it.
    #[test]
    fn trust_keeps_a_decision_not_to_trust_and_comments() {
        let (dir, _) = inst();
        let home = dir.path().join("home");
        let desk = dir.path().join("desks/w9");
        std::fs::create_dir_all(&desk).unwrap();
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        let gemini = format!(
            "{{\n  // the team's list\n  \"{}\": \"DO_NOT_TRUST\"\n}}\n",
            desk.display()
        );
        std::fs::write(home.join(".gemini/trustedFolders.json"), &gemini).unwrap();
        let codex = format!(
            "[projects.\"{}\"]\ntrust_level = \"untrusted\"  # decided by security\n",
            desk.display()
        );
        std::fs::write(home.join(".codex/config.toml"), &codex).unwrap();
        let homes = (
            home.join(".gemini/trustedFolders.json"),
            home.join(".codex"),
        );
        let done = trust(&desk, (&homes.0, &homes.1), &Client::ALL).unwrap();
        assert!(done.said.is_empty(), "{done:?}");
        assert_eq!(done.left.len(), 2, "{done:?}");
        assert!(
            done.left[0].contains("says DO_NOT_TRUST for ")
                && done.left[0].contains("somebody decided so, and it is left as it is"),
            "{done:?}"
        );
        assert!(
            done.left[1].contains("says trust_level = \"untrusted\" for "),
            "{done:?}"
        );
        assert_eq!(
            std::fs::read_to_string(home.join(".gemini/trustedFolders.json")).unwrap(),
            gemini
        );
        assert_eq!(
            std::fs::read_to_string(home.join(".codex/config.toml")).unwrap(),
            codex
        );
        // Without the decision, the comment stays beside the new entry.
        std::fs::write(
            home.join(".gemini/trustedFolders.json"),
            "{\n  // the team's list\n  \"/elsewhere\": \"TRUST_FOLDER\"\n}\n",
        )
        .unwrap();
        std::fs::remove_file(home.join(".codex/config.toml")).unwrap();
        let done = trust(&desk, (&homes.0, &homes.1), &Client::ALL).unwrap();
        assert_eq!(done.said.len(), 2, "{done:?}");
        let g = std::fs::read_to_string(home.join(".gemini/trustedFolders.json")).unwrap();
        assert!(g.contains("// the team's list"), "{g}");
        assert_eq!(
            jsonc_value(&g)[desk.display().to_string()],
            "TRUST_FOLDER",
            "{g}"
        );
        assert_eq!(jsonc_value(&g)["/elsewhere"], "TRUST_FOLDER", "{g}");
    }
}
