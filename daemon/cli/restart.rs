//! `ovai restart` and `ovai status`: control requests to the running daemon.

use serde_json::Value;

use super::Failure;
use crate::client;
use crate::instance::Instance;

pub fn restart(inst: &Instance) -> Result<(), Failure> {
    let v = client::control(inst, "restart")?;
    for row in v["rows"].as_array().into_iter().flatten() {
        println!("{}", row.as_str().unwrap_or_default());
    }
    let generation = v["generation"].as_u64().unwrap_or(0);
    let changed = if v["changed"].as_bool().unwrap_or(false) {
        "the tool list changed, and connected sessions were told"
    } else {
        "the tool list is the same"
    };
    println!("Restarted: generation {generation} serves now; {changed}.");
    Ok(())
}

pub fn status(inst: &Instance, json: bool) -> Result<(), Failure> {
    let v = client::control(inst, "status")?;
    if json {
        let mut v = v;
        if let Some(o) = v.as_object_mut() {
            o.remove("ok");
        }
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    println!(
        "ovai serve for {} (pid {}), up {} s since {}.",
        s("root"),
        n("pid"),
        n("uptimeSeconds"),
        s("startedAt")
    );
    let host = &v["host"];
    let host_line = match (host["pid"].as_u64(), host["down"].as_str()) {
        (_, Some(why)) => format!("down: {why}"),
        (Some(pid), None) => format!("pid {pid}"),
        (None, None) => "restarting".into(),
    };
    println!(
        "Generation {} (read at {}), Node {}; plugin host {host_line}, restarted {} times.",
        n("generation"),
        s("loadedAt"),
        s("node"),
        host["restarts"].as_u64().unwrap_or(0)
    );
    let tools = strings(&v["tools"]);
    println!("Tools: {}.", tools.join(", "));
    let stale = strings(&v["stale"]);
    if stale.is_empty() {
        println!("plugins/ is as it was read.");
    } else {
        println!(
            "Changed since the last read (`ovai restart` serves them as they are now): {}.",
            stale.join(", ")
        );
    }
    for seat in v["seats"].as_array().into_iter().flatten() {
        println!(
            "Seat {}: {}, {}.",
            seat["name"].as_str().unwrap_or_default(),
            seat["role"].as_str().unwrap_or_default(),
            crate::tools::index::sessions_now(seat["sessions"].as_u64().unwrap_or(0) as usize)
        );
    }
    Ok(())
}

/// The strings of a JSON array (none for anything else).
fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}
