//! `ovai seat add|list|remove|rotate|rebuild|trust`. Every change is told to a running daemon, which ends the
//! sessions of seats that are gone or re-keyed and gives its plugin host a box that hides the new secrets.

use serde_json::json;

use super::{Failure, SeatAction, exit, fail, own_exe};
use crate::client::{self, ClientError};
use crate::instance::{Client, Instance};
use crate::seats::{self, SeatBook};
use crate::tools::index::sessions_and_starting;
use crate::wire::{ControlOp, SeatsReply, StatusReply};

pub fn run(inst: &Instance, action: SeatAction) -> Result<(), Failure> {
    // A command that writes the desks' secrets ends the boxed plugin hosts first; if it fails, they are
    // started again at once rather than after the hold's own limit.
    let writes = !matches!(action, SeatAction::List { .. } | SeatAction::Trust { .. });
    if writes {
        precheck(inst, &action)?;
        seats::check_writable(inst).map_err(|e| {
            let e = e.to_string();
            Failure::new(
                format!(
                    "{}. Nothing was changed, and a running server's plugin host and its calls go on.",
                    e.trim_end_matches('.')
                ),
                exit::FAILED,
            )
        })?;
        hold_hosts(inst)?;
    }
    let result = act(inst, action);
    if writes && result.is_err() {
        let _ = client::control_because::<SeatsReply>(inst, ControlOp::Seats, None);
    }
    result
}

/// The clients a desk is made for, in words.
fn client_names(clients: &[crate::instance::Client]) -> String {
    let names: Vec<&str> = clients.iter().map(|c| c.name()).collect();
    match names.split_last() {
        None => "an MCP client reading .mcp.json".into(),
        Some((last, [])) => (*last).into(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// What the operator does with a remote seat's desk.
fn remote_desk(inst: &Instance, name: &str, url: &str) {
    let desk = inst.desk(name);
    let clients =
        seats::desk_clients(inst).unwrap_or_else(|_| crate::instance::Client::ALL.to_vec());
    println!(
        "Its desk is {desk}: copy the folder to the seat's machine (it holds the secret: scp -r, never a chat). {} \
         started there reach{} {url} as {name}.",
        client_names(&clients),
        if clients.len() == 1 { "es" } else { "" },
        desk = desk.display()
    );
    let mut steps = Vec::new();
    if clients.contains(&crate::instance::Client::GeminiCli) {
        steps.push("for Gemini CLI (add it to ~/.gemini/trustedFolders.json as \"TRUST_FOLDER\")");
    }
    if clients.contains(&crate::instance::Client::Codex) {
        steps.push(
            "for Codex (`codex exec --trust --skip-git-repo-check` once there, outside a git work tree)",
        );
    }
    if !steps.is_empty() {
        println!(
            "On that machine, trust the folder {}, or run `ovai seat trust {name}` there if ovai and the \
             instance are there too.",
            steps.join(" and ")
        );
    }
}

fn act(inst: &Instance, action: SeatAction) -> Result<(), Failure> {
    match action {
        SeatAction::Add { name, url } => {
            let added = seats::add(inst, &name, &own_exe()?, url.as_deref()).map_err(refused)?;
            let role = inst
                .read_config()
                .map(|c| c.role_of(&name).to_string())
                .unwrap_or_else(|_| "Worker".into());
            println!("Added the seat {name} ({role}).");
            for w in &added.warnings {
                eprintln!("ovai: warning: {w}");
            }
            tell_daemon(inst, &format!("`ovai seat add {name}`"))?;
            match &url {
                None => {
                    let mut clients = seats::desk_clients(inst)
                        .unwrap_or_else(|_| crate::instance::Client::ALL.to_vec());
                    // A client whose file was left as it is does not act as the seat (helper-103).
                    clients.retain(|c| !added.clients_left.contains(c));
                    println!(
                        // Joined by "or": the verb agrees with each alone.
                        "Its desk is {}: {} started there acts as {name}.",
                        inst.desk(&name).display(),
                        client_names(&clients),
                    );
                    say_trust(inst, &name, &clients);
                }
                Some(url) => remote_desk(inst, &name, url),
            }
            left_behind(&added.left)
        }
        SeatAction::Trust { name } => {
            let book = SeatBook::load(inst).map_err(fail(exit::FAILED))?;
            if !book.names().any(|n| n == name) {
                return Err(Failure::new(book.unknown(&name).to_string(), exit::USAGE));
            }
            let home = super::home_var().map_err(|why| {
                Failure::new(
                    format!("{why}, so there is no home to write the trust into: set it to your home folder."),
                    exit::FAILED,
                )
            })?;
            // Gemini CLI and Codex read their trust from the user's own home: one that is not there is a
            // mistaken HOME, and folders made under it would be read by nobody.
            if !home.is_dir() {
                return Err(Failure::new(
                    format!(
                        "HOME is {}, which is not a folder, so no client reads a trust written there. Nothing was \
                         written; set HOME to your home folder and run it again.",
                        home.display()
                    ),
                    exit::FAILED,
                ));
            }
            let clients = seats::desk_clients(inst).map_err(fail(exit::FAILED))?;
            let (gemini, codex) = crate::desk::clients::homes(&home);
            let done = crate::desk::clients::trust(&inst.desk(&name), (&gemini, &codex), &clients)
                .map_err(fail(exit::FAILED))?;
            if done.said.is_empty() && done.left.is_empty() {
                println!(
                    "No client this instance makes desks for keeps its trust in your home (\"clients\" in openovai.json)."
                );
            }
            for line in &done.said {
                println!("{line}");
            }
            if done.left.is_empty() {
                Ok(())
            } else {
                Err(Failure::new(done.left.join("\n"), exit::FAILED))
            }
        }
        SeatAction::List { json } => list(inst, json),
        SeatAction::Rotate { name, url, local } => {
            let rotated = seats::rotate(inst, &name, &own_exe()?, url.as_deref(), local)
                .map_err(fail(exit::FAILED))?;
            if let Some(w) = &rotated.warning {
                eprintln!("ovai: warning: {w}");
            }
            let ended = tell_daemon(inst, &format!("`ovai seat rotate {name}`"))?;
            let url = crate::desk::url_in(&inst.desk(&name));
            // The bridge takes its secret from its environment: its client must start it again. A client
            // over HTTP reads it from the desk's files, on its own machine.
            let reads = |they: &str, start: &str, its: &str| match url {
                Some(_) => {
                    format!("the new secret from the desk's files, once they are on {its} machine")
                }
                None => format!(
                    "the new secret when {they} {start} `ovai mcp` again: a new session in the desk, or the \
                     client's own reconnect, /mcp in Claude Code"
                ),
            };
            println!(
                "Gave the seat {name} a new secret, written into its desk's file for each client ({}); the old \
                 one opens nothing{}.",
                rotated
                    .mcp_json
                    .parent()
                    .unwrap_or(&rotated.mcp_json)
                    .display(),
                match ended {
                    0 => String::new(),
                    1 => format!(
                        ", and the session holding it was ended (its client reads {})",
                        reads("it", "starts", "its")
                    ),
                    n => format!(
                        ", and the {n} sessions holding it were ended (their clients read {})",
                        reads("they", "start", "their")
                    ),
                }
            );
            if let Some(url) = url {
                println!(
                    "The desk reaches {url}: copy the folder {} to the seat's machine again (it holds the new \
                     secret: scp -r, never a chat).",
                    inst.desk(&name).display()
                );
            }
            left_behind(&rotated.left)
        }
        SeatAction::Rebuild => {
            let exe = own_exe()?;
            let rebuilt = seats::rebuild(inst, &exe).map_err(fail(exit::FAILED))?;
            for (seat, why) in &rebuilt.left_out {
                if !rebuilt.dropped.iter().any(|(d, _)| d == seat) {
                    eprintln!("ovai: warning: desks/{seat} was left out: {why}.");
                }
            }
            for (seat, why) in &rebuilt.dropped {
                eprintln!(
                    "ovai: warning: the seat {seat} is gone ({why}), and its sessions end; `ovai seat add {seat}` \
                     makes it again with a new secret."
                );
            }
            for w in &rebuilt.warnings {
                eprintln!("ovai: warning: {w}");
            }
            println!(
                "Rebuilt {} from the desks: {}.",
                inst.seats_file().display(),
                if rebuilt.seats.is_empty() {
                    "no seat".to_string()
                } else {
                    rebuilt.seats.join(", ")
                }
            );
            for (seat, stale) in &rebuilt.repointed {
                match stale {
                    crate::desk::Stale::Gone(gone) => println!(
                        "desks/{seat} started {gone}, which is not there: it starts {} now (its secret is the same).",
                        exe.display()
                    ),
                    crate::desk::Stale::OtherRoot(other) => println!(
                        "desks/{seat} named the instance at {other}: it names {} now (its secret is the same).",
                        inst.root.display()
                    ),
                }
            }
            for (seat, clients) in &rebuilt.completed {
                println!(
                    "desks/{seat} had no file for {}, which \"clients\" names: written, with the seat's secret.",
                    clients.join(" or ")
                );
                let written: Vec<Client> = Client::ALL
                    .into_iter()
                    .filter(|c| clients.contains(&c.name()))
                    .collect();
                say_trust(inst, seat, &written);
            }
            // Gemini CLI's and Codex's trust, in the person's home, names the desks where they were: an entry
            // naming a desk follows it; a desk still untrusted is told to be trusted again.
            let clients = seats::desk_clients(inst).unwrap_or_default();
            let (mut moved, mut asking) = (Vec::new(), Vec::new());
            for (seat, old_root) in &rebuilt.moved {
                let was = std::path::Path::new(old_root).join("desks").join(seat);
                carry_trust(inst, seat, &was, &clients);
                let untrusted = untrusting(inst, seat, &clients);
                if !untrusted.is_empty() {
                    moved.push(seat.as_str());
                    for c in untrusted {
                        if !asking.contains(&c) {
                            asking.push(c);
                        }
                    }
                }
            }
            if let Some(trusting) = crate::desk::clients::trusting(&asking) {
                let verb = if trusting.contains(" and ") {
                    "trust"
                } else {
                    "trusts"
                };
                println!(
                    "{trusting} {verb} a desk by its path, and these desks were made elsewhere (moved or copied): \
                     {} trusts each where it is now ({}).",
                    super::command_for(inst, "seat trust NAME"),
                    moved.join(", ")
                );
            }
            if let Ok(config) = inst.read_config()
                && !rebuilt.seats.contains(&config.leader)
            {
                eprintln!(
                    "ovai: warning: the Leader's seat {} has no desk with a secret; `ovai seat add {}` makes it.",
                    config.leader, config.leader
                );
            }
            tell_daemon(inst, "`ovai seat rebuild`").map(|_| ())
        }
        SeatAction::Remove { name } => {
            seats::remove(inst, &name).map_err(fail(exit::FAILED))?;
            let ended = match tell_daemon(inst, &format!("`ovai seat remove {name}`")) {
                Ok(n) => n,
                Err(f) => {
                    println!("Removed the seat {name}; {}", desk_stays(inst, &name));
                    untrust_removed(inst, &name);
                    return Err(f);
                }
            };
            println!(
                "Removed the seat {name}{}; {}",
                match ended {
                    0 => String::new(),
                    1 => ", and ended its session".into(),
                    n => format!(", and ended its {n} sessions"),
                },
                desk_stays(inst, &name)
            );
            untrust_removed(inst, &name);
            Ok(())
        }
    }
}

/// The line telling to trust a desk, for the clients given that leave it out until it is trusted (Gemini
/// CLI and Codex read a desk's settings only then), if any.
fn say_trust(inst: &Instance, seat: &str, clients: &[Client]) {
    if let Some(line) = crate::desk::clients::trust_line(seat, &untrusting(inst, seat, clients)) {
        let trust = super::command_for(inst, &format!("seat trust {seat}"));
        println!(
            "{}",
            line.replace(&format!("`ovai seat trust {seat}`"), &trust)
        );
    }
}

/// What `seat remove` left of the desk: the folder, and what is in it but ovai's entries.
fn desk_stays(inst: &Instance, seat: &str) -> String {
    format!(
        "its desk {} stays, without ovai's entries in its clients' files (they held the seat's secret).",
        inst.desk(seat).display()
    )
}

/// Gemini CLI's trusted-folders file and Codex's folder for the person, when HOME names a folder.
fn client_homes() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let home = super::home_var().ok().filter(|h| h.is_dir())?;
    Some(crate::desk::clients::homes(&home))
}

/// The clients named together ("Gemini CLI and Codex"), and the verb's ending for them.
fn named(clients: &[Client]) -> (String, &'static str) {
    let names: Vec<&str> = clients.iter().map(|c| c.name()).collect();
    (names.join(" and "), if names.len() == 1 { "s" } else { "" })
}

/// The trust entries naming a removed seat's desk, taken out of the home: they named a folder no seat has
/// now (helper-81). What cannot be read there is said, and left.
fn untrust_removed(inst: &Instance, seat: &str) {
    let (Some(homes), Ok(clients)) = (client_homes(), seats::desk_clients(inst)) else {
        return;
    };
    let desk = inst.desk(seat);
    let (had, failed) = crate::desk::clients::untrust(&desk, (&homes.0, &homes.1), &clients);
    if !had.is_empty() {
        println!(
            "{} for {} {} taken out of {}.",
            if had.len() == 1 {
                "The trust entry"
            } else {
                "The trust entries"
            },
            desk.display(),
            if had.len() == 1 { "was" } else { "were" },
            trust_files(&homes, &had)
        );
    }
    for why in failed {
        eprintln!("ovai: warning: {why}.");
    }
}

/// The home files these clients keep their trust in.
fn trust_files(homes: &(std::path::PathBuf, std::path::PathBuf), clients: &[Client]) -> String {
    let mut files = Vec::new();
    if clients.contains(&Client::GeminiCli) {
        files.push(homes.0.display().to_string());
    }
    if clients.contains(&Client::Codex) {
        files.push(homes.1.join("config.toml").display().to_string());
    }
    files.join(", ")
}

/// Moves the trust entries naming a seat's desk where it `was` to where it is now, when the instance
/// moved: not from a desk still there (a copy of the instance; the original keeps its trust). Each
/// client's entry is taken out only once the new one is written: a decision found against trusting the
/// new place keeps the old entry, and says so. Codex's is not carried into a git work tree (trusted, it
/// would be all of that tree: `seat trust` says so, and is left to the person); the old entry, naming a
/// desk that is gone, is taken out.
fn carry_trust(inst: &Instance, seat: &str, was: &std::path::Path, clients: &[Client]) {
    let desk = inst.desk(seat);
    let Some(homes) = client_homes() else {
        return;
    };
    if crate::desk::mcp_json(was).exists() {
        return;
    }
    let homes_ref = (homes.0.as_path(), homes.1.as_path());
    let mut carried = Vec::new();
    for client in crate::desk::clients::exact_trust(was, homes_ref, clients) {
        let into_tree = client == Client::Codex && !crate::desk::clients::trusted_alone(&desk);
        if !into_tree {
            match crate::desk::clients::trust(&desk, homes_ref, &[client]) {
                Ok(done) if done.left.is_empty() => carried.push(client),
                Ok(done) => {
                    for left in &done.left {
                        eprintln!("ovai: warning: {left}");
                    }
                    continue;
                }
                Err(why) => {
                    eprintln!("ovai: warning: {why}");
                    continue;
                }
            }
        }
        let (_, failed) = crate::desk::clients::untrust(was, homes_ref, &[client]);
        for why in failed {
            eprintln!("ovai: warning: {why}.");
        }
    }
    if !carried.is_empty() {
        let (names, s) = named(&carried);
        let they = if s.is_empty() { "they" } else { "it" };
        println!(
            "{names} trusted desks/{seat} where it was ({}): {they} trust{s} {} now ({}).",
            was.display(),
            desk.display(),
            trust_files(&homes, &carried)
        );
    }
}

/// A seat change fails for the clients' files it could not write, said after what it did.
fn left_behind(left: &[String]) -> Result<(), Failure> {
    if left.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(left.join("\novai: "), exit::FAILED))
    }
}

/// What refuses the change before anything is written or any plugin host is ended (`act` and `seats`
/// check again as they write).
fn precheck(inst: &Instance, action: &SeatAction) -> Result<(), Failure> {
    if let SeatAction::Remove { name } = action
        && let Ok(config) = inst.read_config()
        && config.leader == *name
    {
        return Err(Failure::new(
            format!(
                "{name} is the Leader's seat (openovai.json's \"leader\"), and an instance needs a Leader. Hand \
                 over first: name another seat as \"leader\" in openovai.json, run `ovai restart`, then remove \
                 {name}. Nothing was changed."
            ),
            exit::FAILED,
        ));
    }
    // The running server's Leader too: openovai.json may name another that no restart has served yet.
    if let SeatAction::Remove { name } = action
        && let Ok(status) = client::control::<StatusReply>(inst, ControlOp::Status)
        && status
            .seats
            .iter()
            .any(|s| s.name == *name && s.role == "Leader")
    {
        return Err(Failure::new(
            format!(
                "{name} is the Leader's seat the running server serves (openovai.json names another, and no \
                 `ovai restart` has served it yet): run `ovai restart` first, then remove {name}. Nothing was \
                 changed."
            ),
            exit::FAILED,
        ));
    }
    match action {
        SeatAction::Add { name, url } => seats::precheck_add(inst, name, url.as_deref()),
        SeatAction::Rotate { name, url, local } => {
            seats::precheck_existing(inst, name, Some((url.as_deref(), *local)))
        }
        SeatAction::Remove { name } => seats::precheck_existing(inst, name, None),
        SeatAction::List { .. } | SeatAction::Rebuild | SeatAction::Trust { .. } => Ok(()),
    }
    .map_err(refused)
}

/// A seat command's refusal: a name no seat can have, or that no seat has, is a usage problem (exit 2, as
/// `ovai call --seat` says one), the rest exit 1.
fn refused(e: seats::SeatError) -> Failure {
    let code = match e {
        seats::SeatError::BadName { .. } | seats::SeatError::Unknown { .. } => exit::USAGE,
        _ => exit::FAILED,
    };
    Failure::new(e, code)
}

/// Asks a running daemon to end its boxed plugin hosts before the desks' secrets are written (a box hides
/// files as they were when it was made); `tell_daemon` afterwards starts them again. A daemon that could
/// not end them refuses, and the command stops there; no daemon, or one too old to know the request, has
/// nothing to hold.
fn hold_hosts(inst: &Instance) -> Result<(), Failure> {
    // The host's calls in flight finish first (within SEAT_DRAIN), and a restart under way (its new
    // host imports the plugins in a box made before the change): said when that takes a while.
    let (done, waited) = std::sync::mpsc::channel::<()>();
    let saying = std::thread::spawn(move || {
        if waited.recv_timeout(std::time::Duration::from_secs(1))
            == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        {
            eprintln!(
                "ovai: waiting for the plugin calls in flight to finish before the seats change (at most {} s for \
                 the calls), and for a restart under way (as long as its imports take)…",
                crate::host::supervisor::SEAT_DRAIN.as_secs()
            );
        }
    });
    let held = client::control::<SeatsReply>(inst, ControlOp::SeatsHold);
    let _ = done.send(());
    let _ = saying.join();
    // A stopping server's host may still run calls in a box that would see a new secret: the change
    // waits for it to end.
    if let Err(ClientError::Stopping { root, pid }) = &held {
        let pid = u32::try_from(*pid).unwrap_or(u32::MAX);
        eprintln!(
            "ovai: the server for {root} (pid {pid}) is stopping; the seats change once it has ended…"
        );
        if !client::wait_for_end(inst, pid, || {}) {
            return Err(Failure::new(
                format!(
                    "The seats were not changed: the server for {root} (pid {pid}) is still stopping, and its \
                     plugin host could read a new secret. Run the command again once it has ended (`kill \
                     {pid}` ends it)."
                ),
                exit::FAILED,
            ));
        }
        // A server started meanwhile (a service manager's restart) is held in its turn.
        return hold_hosts(inst);
    }
    match held {
        Err(ClientError::NotDone(why)) => Err(Failure::new(
            format!("The seats were not changed: {why}"),
            exit::FAILED,
        )),
        Ok(SeatsReply { cut, .. }) if !cut.is_empty() => {
            let mut files = cut;
            files.sort();
            files.dedup();
            eprintln!(
                "ovai: the calls in flight to {} had not finished within {} s, and were stopped: their callers \
                 were told they may have run in part.",
                crate::names::listed(&files, "and"),
                crate::host::supervisor::SEAT_DRAIN.as_secs()
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Those of `clients` that do not trust the seat's desk in the person's home yet (all that keep trust
/// there, when there is no home to read).
pub fn untrusting(inst: &Instance, seat: &str, clients: &[Client]) -> Vec<Client> {
    match super::home_var() {
        Ok(home) => {
            let (gemini, codex) = crate::desk::clients::homes(&home);
            crate::desk::clients::not_trusting(&inst.desk(seat), (&gemini, &codex), clients)
        }
        Err(_) => clients.to_vec(),
    }
}

/// Tells a running daemon the seats changed; how many sessions it ended. No daemon: nothing to tell.
fn tell_daemon(inst: &Instance, why: &str) -> Result<usize, Failure> {
    // The row the server writes when it is told; with none to tell, written here (helper-82: a seat
    // re-keyed while the server was down, or stopping, was in no row).
    let row = |note: &str| {
        crate::runtime_log::RuntimeLog::new(inst.runtime_log()).row(
            crate::runtime_log::Topic::Seats,
            &format!("The seats changed: {why} ({note})."),
        );
    };
    match client::control_because::<SeatsReply>(inst, ControlOp::Seats, Some(why)) {
        Ok(v) => {
            // An author who saved a tool and then added a seat saw its calls refused, unsaid (helper-91).
            for file in &v.left_out {
                eprintln!(
                    "ovai: {file} changed since the last read, so the plugin host started for this change \
                     leaves it out, and its calls are refused until `ovai restart` serves it as it is now."
                );
            }
            Ok(v.ended.len())
        }
        Err(ClientError::NoServer { .. }) => {
            row("no server was running to tell");
            Ok(0)
        }
        Err(ClientError::Stopping { .. }) => {
            row("the server was stopping, and was not told");
            Ok(0)
        }
        Err(e) => Err(Failure::new(
            format!(
                "The seats were changed, and the running server could not be told, so a session of an old secret \
                 may still be connected and its plugin host may see the new one until `ovai restart`: {e}"
            ),
            exit::FAILED,
        )),
    }
}

fn list(inst: &Instance, as_json: bool) -> Result<(), Failure> {
    let book = SeatBook::load(inst).map_err(fail(exit::FAILED))?;
    let config = inst.read_config().map_err(super::config_failure)?;
    let sessions = match client::control::<StatusReply>(inst, ControlOp::Status) {
        Ok(v) => {
            let here = inst.root.display().to_string();
            if let Some(why) = crate::instance::moved(std::path::Path::new(&v.root), Some(&here)) {
                eprintln!("ovai: warning: {why}.");
            }
            Some(v)
        }
        Err(ClientError::NoServer { .. } | ClientError::Stopping { .. }) => None,
        Err(e) => return Err(super::unreached(e)),
    };
    // Sessions holding the seat, and its HTTP sessions never initialised.
    let now = |name: &str| {
        sessions.as_ref().map(|v| {
            v.seats
                .iter()
                .find(|s| s.name == name)
                .map_or((0, 0), |s| (s.sessions, s.starting))
        })
    };
    if as_json {
        let seats: Vec<_> = book
            .seats
            .iter()
            .map(|(name, rec)| {
                json!({
                    "name": name,
                    "role": config.role_of(name).as_str(),
                    "added": rec.added,
                    "desk": inst.desk(name).display().to_string(),
                    "sessions": now(name).map(|n| n.0),
                    "starting": now(name).map(|n| n.1),
                })
            })
            .collect();
        let doc = json!({ "running": sessions.is_some(), "seats": seats });
        super::print_json(&doc);
        return Ok(());
    }
    if book.seats.is_empty() {
        if !inst.seats_file().exists()
            && std::fs::read_dir(inst.desks_dir()).is_ok_and(|mut d| d.next().is_some())
        {
            println!(
                "No seats: {} is missing, and there are desks. `ovai seat rebuild` makes it again from their .mcp.json files.",
                inst.seats_file().display()
            );
            return Ok(());
        }
        println!("No seats yet: `ovai seat add NAME` makes one.");
    }
    for name in book.names() {
        let role = config.role_of(name);
        let now = now(name).map_or(String::new(), |(n, starting)| {
            format!(", {}", sessions_and_starting(n, starting))
        });
        println!("{name}: {role}{now}");
    }
    if sessions.is_none() && !book.seats.is_empty() {
        println!("(No server is running, so nobody is connected.)");
    }
    for line in crate::desk::moved_binaries(inst, book.names()) {
        println!("{line}");
    }
    Ok(())
}
