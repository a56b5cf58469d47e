//! The files Gemini CLI, Codex and opencode read at a desk, each holding the seat's secret (mode 0600)
//! beside whatever a person put there: `.gemini/settings.json` (the server, `"trust": true` so its tools
//! are offered headless), `.codex/config.toml` (the server, approved by `default_tools_approval_mode`), and
//! `opencode.json`. Claude Code's are `.mcp.json` and its settings (the folder's mod.rs).
//!
//! Gemini CLI and Codex also read a desk's file only in a folder trusted in the person's home; that is
//! written only when asked (`ovai seat trust`), merged into what is there.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{DeskError, Doc, Reach, SERVER_NAME, read_doc, write_doc};
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

/// The entry a JSON client reads, `env` the bridge's environment (the person's own variables kept).
/// opencode gives up on a request quiet for its `timeout`, 60 s unless said: the same as ovai's own
/// `callTimeoutSeconds`, a tie opencode won, so a call that never settled got its "Request timed out"
/// and never ovai's words naming the file. ovai answers every call itself; ten minutes (Gemini CLI's
/// own) is opencode's backstop, and bounds its wait on a remote server that never answers.
const OPENCODE_TIMEOUT_MS: u64 = 10 * 60 * 1000;

fn json_entry(client: Client, reach: &Reach<'_>, env: Map<String, Value>, secret: &str) -> Value {
    let bearer = json!({ "Authorization": format!("Bearer {secret}") });
    match (client, reach) {
        (Client::GeminiCli, Reach::Bridge { exe }) => json!({
            "command": exe.display().to_string(), "args": ["mcp"], "env": env, "trust": true
        }),
        (Client::GeminiCli, Reach::Url { url }) => {
            json!({ "httpUrl": url, "headers": bearer, "trust": true })
        }
        (_, Reach::Bridge { exe }) => json!({
            "type": "local", "command": [exe.display().to_string(), "mcp"], "environment": env, "enabled": true,
            "timeout": OPENCODE_TIMEOUT_MS
        }),
        (_, Reach::Url { url }) => json!({
            "type": "remote", "url": url, "headers": bearer, "enabled": true, "timeout": OPENCODE_TIMEOUT_MS
        }),
    }
}

/// Writes the entries of the clients asked for (Claude Code's excepted: the folder's own), each merged
/// into its file. A file that cannot be merged is left as it is and said, in a sentence each.
pub fn write(
    inst: &Instance,
    desk: &Path,
    reach: &Reach<'_>,
    secret: &str,
    clients: &[Client],
) -> Vec<String> {
    let mut said = Vec::new();
    let bridge_env = |old: Option<&Value>| {
        let mut env = old.and_then(Value::as_object).cloned().unwrap_or_default();
        env.insert("OVAI_ROOT".into(), inst.root.display().to_string().into());
        env.insert("OVAI_SECRET".into(), secret.into());
        env
    };
    for (client, path, [outer, name]) in json_files(desk) {
        if !clients.contains(&client) {
            continue;
        }
        let mut doc = match read_doc(&path) {
            Ok(Doc::Absent) => Map::new(),
            Ok(Doc::Object(doc)) => doc,
            Ok(Doc::Unparsable {
                message,
                line,
                column,
            }) => {
                said.push(left_alone(
                    client,
                    &path,
                    &format!("it does not parse ({message} at line {line}, column {column})"),
                ));
                continue;
            }
            Ok(Doc::NotObject(what)) => {
                said.push(left_alone(
                    client,
                    &path,
                    &format!("it is {what}, not an object"),
                ));
                continue;
            }
            Err(e) => {
                said.push(not_written(client, &e.to_string()));
                continue;
            }
        };
        let servers = doc
            .entry(outer)
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(servers) = servers.as_object_mut() else {
            let what = crate::instance::json_kind(servers);
            said.push(left_alone(
                client,
                &path,
                &format!("its {outer} is {what}, not an object"),
            ));
            continue;
        };
        let env_key = if client == Client::GeminiCli {
            "env"
        } else {
            "environment"
        };
        let env = bridge_env(servers.get(name).and_then(|e| e.get(env_key)));
        servers.insert(name.into(), json_entry(client, reach, env, secret));
        if client == Client::Opencode {
            doc.entry("$schema")
                .or_insert_with(|| "https://opencode.ai/config.json".into());
        }
        if let Err(e) = write_doc(&path, &doc) {
            said.push(not_written(client, &e.to_string()));
        }
    }
    if clients.contains(&Client::Codex)
        && let Err(why) = write_codex(&codex_file(desk), reach, secret, &inst.root)
    {
        said.push(not_written(Client::Codex, &why));
    }
    said
}

/// A client's file that could not be written, for what it means to the seat.
fn not_written(client: Client, why: &str) -> String {
    format!(
        "{}: {} at that desk does not have the seat's new secret (a session it starts is refused once the old \
         one opens nothing); fix that and run `ovai seat rotate` for the seat.",
        why.trim_end_matches('.'),
        client.name()
    )
}

fn left_alone(client: Client, path: &Path, why: &str) -> String {
    format!(
        "{} was left as it is: {why}. Until it names the {SERVER_NAME} server, {} at that desk does not find it; fix \
         the file and run `ovai seat rotate` for the seat.",
        path.display(),
        client.name()
    )
}

/// Reads a TOML file into a document to edit: absent is empty; one that does not parse is said.
fn read_toml(path: &Path) -> Result<Option<toml_edit::DocumentMut>, String> {
    match crate::files::read_regular(path, crate::files::MAX_READ_BYTES) {
        Ok(text) => text.parse::<toml_edit::DocumentMut>().map(Some).map_err(|e| {
            format!(
                "{} was left as it is: it does not parse ({}). Fix it and run the command again.",
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
    crate::files::write_private(path, doc.to_string().as_bytes()).map_err(|e| e.to_string())
}

fn write_codex(path: &Path, reach: &Reach<'_>, secret: &str, root: &Path) -> Result<(), String> {
    use toml_edit::{Item, Table, value};
    let mut doc = read_toml(path)
        .map_err(|why| {
            format!("{why} Until then Codex at that desk does not find the {SERVER_NAME} server.")
        })?
        .unwrap_or_default();
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| {
            format!(
                "{} was left as it is: its mcp_servers is not a table. Until it is, Codex at that desk does not find \
                 the {SERVER_NAME} server.",
                path.display()
            )
        })?;
    // The person's own variables for the bridge stay; the root and the secret are ours.
    let mut env = servers
        .get(SERVER_NAME)
        .and_then(|e| e.get("env"))
        .and_then(Item::as_table_like)
        .map(|t| {
            t.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.to_string(), v.to_string())))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    env.retain(|(k, _)| k != "OVAI_ROOT" && k != "OVAI_SECRET");
    let mut entry = Table::new();
    match reach {
        Reach::Bridge { exe } => {
            entry["command"] = value(exe.display().to_string());
            entry["args"] = value(toml_edit::Array::from_iter(["mcp"]));
            let mut vars = Table::new();
            for (k, v) in env {
                vars[k.as_str()] = value(v);
            }
            vars["OVAI_ROOT"] = value(root.display().to_string());
            vars["OVAI_SECRET"] = value(secret);
            entry["env"] = Item::Table(vars);
        }
        Reach::Url { url } => {
            entry["url"] = value(*url);
            let mut headers = toml_edit::InlineTable::new();
            headers.insert("Authorization", format!("Bearer {secret}").into());
            entry["http_headers"] = value(headers);
        }
    }
    // Without it every call is refused: "MCP tool call requires approval, but approval policy is never".
    entry["default_tools_approval_mode"] = value("approve");
    servers.insert(SERVER_NAME, Item::Table(entry));
    write_toml(path, &doc)
}

/// Takes the server's entry out of every client's file (whichever clients the instance names now); a
/// file left with nothing in it goes.
pub fn remove(desk: &Path) -> Result<(), DeskError> {
    for (_, path, [outer, name]) in json_files(desk) {
        if super::through_link(desk, &path) {
            continue;
        }
        let Doc::Object(mut doc) = read_doc(&path)? else {
            continue;
        };
        let Some(servers) = doc.get_mut(outer).and_then(Value::as_object_mut) else {
            continue;
        };
        if servers.remove(name).is_none() {
            continue;
        }
        if servers.is_empty() {
            doc.remove(outer);
        }
        let ours_only = doc.keys().all(|k| k == "$schema");
        if ours_only {
            std::fs::remove_file(&path).map_err(|source| DeskError::Io {
                what: "removing",
                path: path.clone(),
                source,
            })?;
        } else {
            write_doc(&path, &doc)?;
        }
    }
    let path = codex_file(desk);
    if !super::through_link(desk, &path)
        && let Ok(Some(mut doc)) = read_toml(&path)
        && let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_mut())
        && servers.remove(SERVER_NAME).is_some()
    {
        if servers.is_empty() {
            doc.remove("mcp_servers");
        }
        if doc.is_empty() {
            std::fs::remove_file(&path).map_err(|source| DeskError::Io {
                what: "removing",
                path: path.clone(),
                source,
            })?;
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

/// The files of these clients in a desk that hold the seat's secret.
pub fn secret_files(desk: &Path) -> Vec<PathBuf> {
    SECRET_FILES.iter().map(|(_, f)| desk.join(f)).collect()
}

/// Where Gemini CLI and Codex keep their settings for the person whose home is `home`: `~/.gemini`, and
/// `$CODEX_HOME` (else `~/.codex`).
pub fn homes(home: &Path) -> (PathBuf, PathBuf) {
    let codex_home = std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"));
    (home.join(".gemini"), codex_home)
}

/// The folder Codex takes for a desk's project: the git work tree it is in, else the desk itself.
fn codex_project(desk: &Path) -> PathBuf {
    desk.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(desk)
        .to_path_buf()
}

/// Trusts the desk where Gemini CLI and Codex look (the clients asked for), in the person's home: entries
/// merged into what is there. What was written, in sentences.
pub fn trust(
    desk: &Path,
    (gemini_home, codex_home): (&Path, &Path),
    clients: &[Client],
) -> Result<Vec<String>, String> {
    let (gemini, codex) = (
        gemini_home.join("trustedFolders.json"),
        codex_home.join("config.toml"),
    );
    let mut said = Vec::new();
    if clients.contains(&Client::GeminiCli) {
        let mut doc = match read_doc(&gemini).map_err(|e| e.to_string())? {
            Doc::Absent => Map::new(),
            Doc::Object(doc) => doc,
            Doc::Unparsable {
                message,
                line,
                column,
            } => {
                return Err(format!(
                    "{} does not parse ({message} at line {line}, column {column}): it was left as it is. Fix it and \
                     run the command again.",
                    gemini.display()
                ));
            }
            Doc::NotObject(what) => {
                return Err(format!(
                    "{} is {what}, not an object: it was left as it is.",
                    gemini.display()
                ));
            }
        };
        let key = desk.display().to_string();
        if doc.get(&key).and_then(Value::as_str) != Some("TRUST_FOLDER") {
            doc.insert(key, "TRUST_FOLDER".into());
            write_doc(&gemini, &doc).map_err(|e| e.to_string())?;
        }
        said.push(format!(
            "Gemini CLI trusts {} ({}).",
            desk.display(),
            gemini.display()
        ));
    }
    if clients.contains(&Client::Codex) {
        let project = codex_project(desk);
        let mut doc = read_toml(&codex)?.unwrap_or_default();
        let projects = doc
            .entry("projects")
            .or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            })
            .as_table_mut()
            .ok_or_else(|| {
                format!(
                    "{}'s projects is not a table: it was left as it is.",
                    codex.display()
                )
            })?;
        let key = project.display().to_string();
        let entry = projects
            .entry(&key)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
        if entry.get("trust_level").and_then(|v| v.as_str()) != Some("trusted") {
            entry["trust_level"] = toml_edit::value("trusted");
            write_toml(&codex, &doc)?;
        }
        said.push(format!(
            "Codex trusts {} ({}).",
            project.display(),
            codex.display()
        ));
    }
    Ok(said)
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
                .any(|s| s.contains("opencode.json was left as it is") && s.contains("line 1")),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|s| s.contains("config.toml was left as it is")),
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
        let homes = (home.join(".gemini"), home.join(".codex"));
        let said = trust(&desk, (&homes.0, &homes.1), &Client::ALL).unwrap();
        assert_eq!(said.len(), 2, "{said:?}");
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
}
