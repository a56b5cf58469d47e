//! `ovai init`: a new instance.

use std::path::PathBuf;

use serde_json::json;

use super::{Failure, exit, fail, own_exe};
use crate::instance::{self, CONFIG_FILE, Config, Instance};
use crate::{names, plugins, seats};

pub const DEFAULT_LEADER: &str = "lead";

pub fn run(
    dir: Option<PathBuf>,
    root: Option<PathBuf>,
    user: Option<String>,
    leader: Option<String>,
    examples: bool,
) -> Result<(), Failure> {
    let dir = match (dir, root) {
        (Some(d), Some(r)) if instance::absolute(&d) != instance::absolute(&r) => {
            return Err(Failure::new(
                format!(
                    "ovai init was given two places, {} and --root {}; name one. Nothing was made.",
                    d.display(),
                    r.display()
                ),
                exit::USAGE,
            ));
        }
        (Some(d), _) | (None, Some(d)) => d,
        (None, None) => PathBuf::from("."),
    };
    if let Some(u) = &user
        && u.trim().is_empty()
    {
        return Err(Failure::new(
            "--user is empty; it names the person working in the instance (default: $USER). Nothing was made.",
            exit::USAGE,
        ));
    }
    // Before anything is made or said (helper-103: the $USER warning came first, and the folder was made).
    let leader = leader.unwrap_or_else(|| DEFAULT_LEADER.into());
    if let Some(why) = names::why_not(&leader) {
        return Err(Failure::new(
            format!(
                "{leader:?} cannot be the Leader's seat name: {why} ({}). Nothing was made.",
                names::RULE
            ),
            2,
        ));
    }
    let target = instance::absolute(&dir);
    if instance::shown_as_is(&target).is_err() {
        return Err(Failure::new(
            format!(
                "{} holds a character a terminal does not show as it is (a control, a line break, a direction \
                 mark, or bytes that are not UTF-8), so what ovai prints, and the desks and service unit it \
                 writes, would not name the folder. Nothing was made; make the instance in a folder whose path \
                 has none.",
                instance::shown(&target)
            ),
            exit::FAILED,
        ));
    }
    if let Some(outer) = target
        .ancestors()
        .skip(1)
        .find(|a| a.join(CONFIG_FILE).is_file())
    {
        return Err(Failure::new(
            format!(
                "{} is inside the openovai instance at {}: a second instance there would take over every command run in \
                 it. Nothing was made; make it elsewhere, or work in the instance that is there.",
                target.display(),
                outer.display()
            ),
            exit::FAILED,
        ));
    }
    if let Some(inner) = instance_below(&target) {
        return Err(Failure::new(
            format!(
                "{} holds the openovai instance at {}: an instance around it would run plugins that read that \
                 one's seats' secrets (its box hides only its own). Nothing was made; make it elsewhere.",
                target.display(),
                inner.display()
            ),
            exit::FAILED,
        ));
    }
    if let Some(why) = Instance::at(target.clone()).socket_too_long() {
        return Err(Failure::new(
            format!(
                "{} cannot be an instance: {why}. Nothing was made.",
                target.display()
            ),
            exit::FAILED,
        ));
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::new(format!("{} cannot be made: {e}.", dir.display()), 1))?;
    let inst = Instance::at(instance::absolute(&dir));
    if inst.config_file().exists() {
        return Err(Failure::new(
            format!(
                "{} already holds an instance ({CONFIG_FILE} is there); nothing was changed. Its seats are managed with `ovai seat`.",
                inst.root.display()
            ),
            1,
        ));
    }
    let given = user.is_some();
    let user = match user
        .or_else(|| std::env::var("USER").ok())
        .filter(|u| !u.trim().is_empty())
    {
        Some(user) => user,
        None => {
            let what = match (given, std::env::var_os("USER")) {
                (true, _) => "--user is empty",
                (false, Some(_)) => "$USER is empty",
                (false, None) => "$USER is not set",
            };
            eprintln!(
                "ovai: {what}, so the instance's user is \"user\": `ovai init --user NAME` names another, or \
                 change \"user\" in openovai.json."
            );
            "user".into()
        }
    };

    let text = serde_json::to_string_pretty(&json!({ "user": user, "leader": leader }))
        .unwrap_or_default()
        + "\n";
    // Checked by the same parser the server uses, so init never writes a file serve would refuse.
    Config::parse(&text).map_err(fail(exit::FAILED))?;
    // What this init makes is taken back if it fails, so that running it again (as its words say) works.
    let made: Vec<std::path::PathBuf> = [inst.plugins_dir(), inst.desks_dir(), inst.private_dir()]
        .into_iter()
        .filter(|d| !d.exists())
        .collect();
    let undo = |failure: Failure| {
        let _ = std::fs::remove_file(inst.config_file());
        for d in &made {
            let _ = std::fs::remove_dir_all(d);
        }
        failure
    };
    for d in [inst.plugins_dir(), inst.desks_dir()] {
        std::fs::create_dir_all(&d)
            .map_err(|e| Failure::new(format!("{} cannot be made: {e}.", d.display()), 1))?;
    }
    seats::ensure_private_dir(&inst)
        .map_err(fail(exit::FAILED))
        .map_err(undo)?;
    std::fs::write(inst.config_file(), text)
        .map_err(|e| {
            Failure::new(
                format!("{} cannot be written: {e}.", inst.config_file().display()),
                1,
            )
        })
        .map_err(undo)?;
    let added = seats::add(&inst, &leader, &own_exe().map_err(undo)?, None)
        .map_err(fail(exit::FAILED))
        .map_err(undo)?;
    for w in added.warnings.iter().chain(&added.left) {
        eprintln!("ovai: warning: {w}");
    }
    println!(
        "Made an openovai instance at {} (User {user}, Leader {leader}).",
        inst.root.display()
    );
    println!(
        "The Leader's desk is {} (its .mcp.json connects a session as {leader}).",
        added
            .mcp_json
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    if examples {
        let written = plugins::examples::write_into(&inst.plugins_dir())
            .map_err(|e| Failure::new(format!("The example plugins cannot be written: {e}."), 1))?;
        println!("Wrote the example plugins: {}.", written.join(", "));
    }
    // As `seat add` says it: Gemini CLI and Codex leave an untrusted desk's server out.
    let clients =
        seats::desk_clients(&inst).unwrap_or_else(|_| crate::instance::Client::ALL.to_vec());
    // Said with the root: `init --root DIR` is often run from elsewhere, where a bare command finds
    // no instance.
    let me = super::invoked_as();
    let root = names::shell_quote(&inst.root.display().to_string());
    let untrusting = super::seat::untrusting(&inst, &leader, &clients);
    if let Some(line) = crate::desk::clients::trust_line(&leader, &untrusting) {
        let bare = format!("`ovai seat trust {leader}`");
        println!(
            "{}",
            line.replace(&bare, &format!("`{me} seat trust {leader} --root {root}`"))
        );
    }
    println!(
        "Next: `{me} serve --root {root}` runs the server; `{me} seat add NAME --root {root}` adds a Worker."
    );
    Ok(())
}

/// An instance in a folder below `dir` (three levels down at most, a few thousand folders looked at),
/// if there is one.
fn instance_below(dir: &std::path::Path) -> Option<PathBuf> {
    let mut level = vec![dir.to_path_buf()];
    let mut looked = 0;
    for _ in 0..3 {
        let mut next = Vec::new();
        for folder in level {
            for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                if !entry.file_type().is_ok_and(|t| t.is_dir())
                    || entry.file_name() == "node_modules"
                {
                    continue;
                }
                let path = entry.path();
                if path.join(CONFIG_FILE).is_file() {
                    return Some(path);
                }
                looked += 1;
                if looked > 4096 {
                    return None;
                }
                next.push(path);
            }
        }
        level = next;
    }
    None
}
