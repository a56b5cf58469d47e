//! Control requests from the CLI of the same instance (`ovai restart`, `ovai status`, `ovai seat`): the
//! control secret proves the caller can read `.ovai/`, which is its owner's alone.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

use super::state::Daemon;
use crate::seats::SeatBook;

pub async fn handle(daemon: &Arc<Daemon>, secret: &str, op: &str, write: &mut OwnedWriteHalf) {
    let answer = if !crate::seats::same(&daemon.control_secret, secret) {
        refusal(
            "the control secret does not match this server's: .ovai/control.secret is rewritten at every start, so this command may belong to another instance",
        )
    } else {
        match op {
            "restart" => match daemon.restart().await {
                Ok(r) => {
                    json!({ "ok": true, "generation": r.generation, "rows": r.rows, "changed": r.changed })
                }
                Err(e) => refusal(&e.to_string()),
            },
            "status" => status(daemon),
            "seats" => match daemon.seats_changed() {
                Ok(ended) => json!({ "ok": true, "ended": ended }),
                Err(e) => refusal(&e.to_string()),
            },
            other => refusal(&format!("{other:?} is not an operation this server knows")),
        }
    };
    let _ = write.write_all(crate::wire::line(&answer).as_bytes()).await;
    let _ = write.shutdown().await;
}

fn refusal(why: &str) -> Value {
    json!({ "ok": false, "error": why })
}

/// The daemon as `ovai status` shows it.
pub fn status(daemon: &Daemon) -> Value {
    let generation = daemon.current();
    let counts = daemon.sessions.count_by_seat();
    let seats: Vec<Value> = SeatBook::load(&daemon.inst)
        .map(|b| {
            b.names()
                .map(|s| {
                    json!({
                        "name": s,
                        "role": generation.config.role_of(s).as_str(),
                        "sessions": counts.get(s).copied().unwrap_or(0),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "ok": true,
        "root": daemon.inst.root.display().to_string(),
        "pid": std::process::id(),
        "startedAt": daemon.started_at,
        "uptimeSeconds": daemon.started.elapsed().as_secs(),
        "generation": generation.number,
        "loadedAt": generation.loaded_at,
        "node": generation.node,
        "host": {
            "pid": generation.host.pid(),
            "restarts": generation.host.restarts(),
            "down": generation.host.down_reason().map(|s| s.to_string()),
        },
        "seats": seats,
        "sessions": daemon.sessions.len(),
        "tools": generation.tools.names().collect::<Vec<_>>(),
        "rows": generation.rows,
        "stale": generation.stale(&daemon.inst).iter().map(|c| format!("plugins/{}", c.file())).collect::<Vec<_>>(),
    })
}
