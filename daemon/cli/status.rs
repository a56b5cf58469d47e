//! `ovai status`: what the running daemon serves, to whom, and how each tool's calls went. Exit 3 when no
//! daemon runs, as `systemctl is-active` does.

use serde_json::json;

use super::{Failure, exit};
use crate::client::{self, ClientError};
use crate::instance::Instance;
use crate::names::thousands;
use crate::tools::index::sessions_and_starting;
use crate::wire::{ControlOp, StatusReply};

fn starting(inst: &Instance, as_json: bool, pid: u64, since: &str) {
    let root = inst.root.display().to_string();
    if as_json {
        let doc =
            json!({ "running": true, "starting": true, "root": root, "pid": pid, "since": since });
        super::print_json(&doc);
    } else {
        println!(
            "ovai serve for {root} (pid {pid}) is starting: it has been reading plugins/ since {since}, and \
             answers once it has (a file whose import waits holds a start for importTimeoutSeconds or more)."
        );
    }
}

pub fn run(inst: &Instance, as_json: bool) -> Result<(), Failure> {
    // A daemon still reading plugins/ at its start answers nobody yet.
    if let Some(client::Marked { pid, since }) = client::marked(inst, &inst.starting_marker()) {
        starting(inst, as_json, pid, &since);
        return Ok(());
    }
    let v: StatusReply = match client::control(inst, ControlOp::Status) {
        Ok(v) => v,
        Err(ClientError::Starting { pid, since, .. }) => {
            starting(inst, as_json, pid, &since);
            return Ok(());
        }
        Err(ClientError::Stopping { root, pid }) => {
            let since =
                client::marked(inst, &inst.stopping_marker()).map_or(String::new(), |m| m.since);
            if as_json {
                let doc = json!({ "running": true, "stopping": true, "root": root, "pid": pid, "since": since });
                super::print_json(&doc);
            } else {
                println!(
                    "ovai serve for {root} (pid {pid}) is stopping since {since}: it takes no more calls, finishes \
                     those in flight (within shutdownGraceSeconds), then ends."
                );
            }
            return Ok(());
        }
        Err(ClientError::NoServer { root }) => {
            if as_json {
                super::print_json(&json!({ "running": false, "root": root }));
            }
            return Err(Failure::new(
                format!("No ovai server is running for {root}: start one there with `ovai serve`."),
                exit::NOT_RUNNING,
            ));
        }
        Err(e) => return Err(super::unreached(e)),
    };
    let found = inst.root.display().to_string();
    let moved = crate::instance::moved(std::path::Path::new(&v.root), Some(&found));
    if let Some(why) = &moved {
        eprintln!("ovai: warning: {why}.");
    }
    // A settings file removed or broken since the start is met at the next restart: said now.
    if let Err(e) = inst.read_config() {
        eprintln!(
            "ovai: warning: {e} The server goes on with the settings it read; `ovai restart` is refused until the \
             file is right."
        );
    }
    let too_open = crate::permissions::too_open(inst);
    if as_json {
        let mut doc = serde_json::to_value(&v).unwrap_or_default();
        if let Some(o) = doc.as_object_mut() {
            o.insert("running".into(), json!(true));
            o.insert("tooOpen".into(), json!(too_open));
        }
        super::print_json(&doc);
        return Ok(());
    }
    let runs = match v.version.as_str() {
        "" => String::new(),
        version => format!(", ovai {version}"),
    };
    println!(
        "ovai serve for {} (pid {}{runs}), up {} s since {}.",
        v.root, v.pid, v.uptime_seconds, v.started_at
    );
    if let Some(said) = &v.binary_replaced {
        println!("{said}");
    }
    // An older server names no version, nor a binary replaced under it.
    let mine = env!("CARGO_PKG_VERSION");
    if v.version != mine {
        let theirs = match v.version.as_str() {
            "" => "an older one, which does not name its version".to_string(),
            version => format!("ovai {version}"),
        };
        println!(
            "This command is ovai {mine}, and the server runs {theirs}: `ovai stop`, then `ovai serve`, runs this one."
        );
    }
    let host = match (&v.host.down, v.host.pid) {
        (Some(why), _) => format!("down: {why}"),
        (None, Some(pid)) => format!("pid {pid}"),
        (None, None) => "none now: a new one is being started".into(),
    };
    println!(
        "Generation {} (read at {}), Node {}; plugin host {host}, {}.",
        v.generation,
        v.loaded_at,
        v.node,
        started_again(v.host.respawns)
    );
    for said in &v.finishing {
        println!("{said}");
    }
    println!("{}", v.host.isolation);
    println!("{}", v.host.bounds);
    for said in &too_open {
        println!("{said}");
    }
    if let Some(url) = &v.http {
        println!("Seats on other machines: {url} (the seat's secret as a bearer token).");
    }
    if let Some(url) = &v.metrics {
        println!("Metrics: {url} (Prometheus's text).");
    }
    if let Some(url) = &v.web {
        println!("Status page: {url} (`ovai web` prints a link that opens it).");
    }
    for said in [&v.log_unwritable, &v.calls_unwritable]
        .into_iter()
        .flatten()
    {
        println!("{said}");
    }
    for said in &v.unserved {
        println!("{said}");
    }
    println!("Tools: {}.", v.tools.join(", "));
    let not_served: Vec<&String> = v
        .rows
        .iter()
        .filter(|r| r.starts_with("plugins/") && r.contains(" is not served: "))
        .collect();
    for row in &not_served {
        println!("{row}");
    }
    for row in &v.host.not_answering {
        println!("{row}");
    }
    if let Some(line) = running_line(&v) {
        println!("{line}");
    }
    // Moved, the server looks for plugins/ and openovai.json where they were: what it finds there is
    // no news, and `ovai restart` is refused (the warning above says what to do).
    if moved.is_none() {
        files_since_the_read(&v);
    }
    if let Some(why) = &v.seats_error {
        println!("Seats: cannot be listed: {why}");
    }
    for seat in &v.seats {
        println!(
            "Seat {}: {}, {}.",
            seat.name,
            seat.role,
            sessions_and_starting(seat.sessions, seat.starting)
        );
    }
    for line in crate::desk::moved_binaries(inst, v.seats.iter().map(|s| s.name.as_str())) {
        println!("{line}");
    }
    for f in &v.figures {
        println!(
            "Calls to {}: {} ({}); p50 {} ms, p99 {} ms.",
            f.name,
            thousands(f.calls as usize),
            refused_words(f),
            f.p50_ms,
            f.p99_ms
        );
    }
    Ok(())
}

/// How a tool's calls were refused, by whom: "none refused", "3 refused: 2 in the tool's own words, 1
/// for a fault in the tool's code". Kinds with none are left out.
fn refused_words(f: &crate::wire::ToolFigures) -> String {
    if f.refusals == 0 {
        return "none refused".into();
    }
    let own = [f.host_stops, f.failures, f.timeouts, f.misfits, f.unrun]
        .iter()
        .fold(f.refusals, |left, n| left.saturating_sub(*n));
    let kinds: Vec<String> = [
        (own, "in the tool's own words"),
        (f.failures, "for a fault in the tool's code"),
        (
            f.timeouts,
            "given up at callTimeoutSeconds (the tool was slow, or waited for a host another call held)",
        ),
        (f.misfits, "for arguments that did not fit its inputSchema"),
        (f.host_stops, "when its plugin host stopped"),
        (
            f.unrun,
            "not run or stopped (its file was not imported again, the server was stopping, or its seat \
             changed)",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{} {what}", thousands(n as usize)))
    .collect();
    format!(
        "{} refused: {}",
        thousands(f.refusals as usize),
        kinds.join(", ")
    )
}

/// What changed in plugins/ and openovai.json since the reading served, each with what `ovai restart`
/// makes of it.
fn files_since_the_read(v: &StatusReply) {
    if v.stale.is_empty()
        && v.new_files.is_empty()
        && v.removed_files.is_empty()
        && v.removed_unserved.is_empty()
        && v.removed_modules.is_empty()
    {
        println!("plugins/ is as it was read.");
    }
    // An `npm install` changes thousands of a package's files: a few are named.
    let some = |files: &[String]| {
        const SHOWN: usize = 10;
        let more = match files.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more (`ovai status --json` lists them all)"),
        };
        format!("{}{more}", files[..files.len().min(SHOWN)].join(", "))
    };
    if !v.stale.is_empty() {
        println!(
            "Changed since the last read (`ovai restart` serves them as they are now): {}.",
            some(&v.stale)
        );
    }
    if !v.removed_modules.is_empty() {
        println!(
            "Modules removed since the last read (a plugin host started from now on cannot import the tools \
             that import them; `ovai restart` says which it leaves out): {}.",
            some(&v.removed_modules)
        );
    }
    if !v.new_files.is_empty() {
        println!(
            "New since the last read (`ovai restart` reads them): {}.",
            v.new_files.join(", ")
        );
    }
    if !v.removed_files.is_empty() {
        println!(
            "Removed since the last read (`ovai restart` stops serving them): {}.",
            v.removed_files.join(", ")
        );
    }
    if !v.removed_unserved.is_empty() {
        println!(
            "Removed since the last read, not served: {} (`ovai restart` reads plugins/ without them).",
            v.removed_unserved.join(", ")
        );
    }
    if v.config_changed {
        println!("{}", crate::instance::CONFIG_CHANGED);
    }
}

/// The calls plugins are running now, the longest-running first, if any.
fn running_line(v: &StatusReply) -> Option<String> {
    if v.calls_running.is_empty() && v.calls_running_total == 0 {
        return None;
    }
    let mut shown: Vec<String> = v
        .calls_running
        .iter()
        .take(10)
        .map(|c| format!("{} for {} ({} s)", c.file, c.seat, c.seconds))
        .collect();
    let more = v
        .calls_running_total
        .max(v.calls_running.len())
        .saturating_sub(shown.len());
    if more > 0 {
        shown.push(format!("{more} more"));
    }
    Some(format!("Running now: {}.", shown.join(", ")))
}

/// "none started again", "one started again", "3 started again", as the host's rows say it ("a new plugin
/// host was started"). Counted for the generation served: a restart starts its host afresh (the page and
/// the metrics count since the server started).
fn started_again(n: u32) -> String {
    match n {
        0 => "no new one started since the last read".into(),
        1 => "a new one started once since the last read".into(),
        n => format!("a new one started {n} times since the last read"),
    }
}
