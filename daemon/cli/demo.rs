//! `ovai demo`: the whole path once, on the example plugins. A temporary instance, a real `ovai serve`, a
//! seat connected through a real `ovai mcp` bridge, `tools/list` and calls; then everything is stopped
//! and removed.

use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Failure, exit, fail, own_exe};
use crate::client::{self, McpClient};
use crate::instance::Instance;
use crate::runtime_log::parse_row;
use crate::wire::{ControlOp, StatusReply};
use crate::{plugins, seats};

pub fn run() -> Result<(), Failure> {
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("ovai-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut daemon: Option<Child> = None;
    let result = steps(&dir, &mut daemon);
    if let Some(mut d) = daemon {
        stop(&mut d);
    }
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    println!(
        "\nDone in {:.1} s: the daemon was stopped and {} removed.",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}

fn steps(dir: &Path, daemon: &mut Option<Child>) -> Result<(), Failure> {
    let exe = own_exe()?;
    say(&format!(
        "A temporary instance at {}, with the example plugins",
        dir.display()
    ));
    let out = Command::new(&exe)
        .args(["init", "--user", "you", "--leader", "lead", "--examples"])
        .arg(dir)
        .output()
        .map_err(|e| Failure::new(format!("ovai init could not run: {e}"), 1))?;
    if !out.status.success() {
        return Err(Failure::new(
            format!(
                "ovai init failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            1,
        ));
    }
    let inst = Instance::at(dir.to_path_buf());
    seats::add(&inst, "w1", &exe, None).map_err(fail(exit::FAILED))?;
    println!(
        "  seats: lead (Leader), w1 (Worker); plugins/: {}",
        example_names()
    );

    say("Starting the daemon: ovai serve");
    let log = std::fs::File::create(dir.join("serve.stderr")).map_err(fail(exit::FAILED))?;
    *daemon = Some(
        Command::new(&exe)
            .args(["serve", "--root"])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| Failure::new(format!("ovai serve could not start: {e}"), 1))?,
    );
    wait_until_up(&inst, daemon)?;

    for row in plugins_rows(&inst) {
        println!("  runtime.log: plugins {row}");
    }

    say(
        "Connecting seat w1 the way an MCP client does: ovai mcp, started from desks/w1 with its .mcp.json",
    );
    let desk = inst.desk("w1");
    let secret = crate::desk::secret_in(&inst.desk("w1"))
        .ok_or_else(|| Failure::new("desks/w1/.mcp.json holds no secret", 1))?;
    let mut bridge = Command::new(&exe)
        .arg("mcp")
        .current_dir(&desk)
        .env("OVAI_ROOT", dir)
        .env("OVAI_SECRET", secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Failure::new(format!("ovai mcp could not start: {e}"), 1))?;
    let (Some(stdin), Some(stdout)) = (bridge.stdin.take(), bridge.stdout.take()) else {
        return Err(Failure::new("the bridge's pipes were not made", 1));
    };
    let mut mcp = McpClient::new(BufReader::new(stdout), stdin);
    let init = mcp.initialize("ovai-demo").map_err(fail(exit::FAILED))?;
    println!(
        "  server: {} — {}",
        init["serverInfo"]["name"].as_str().unwrap_or("?"),
        init["instructions"].as_str().unwrap_or("")
    );

    say("tools/list");
    let list = rpc(&mut mcp, "tools/list", json!({}))?;
    for t in list["tools"].as_array().into_iter().flatten() {
        let first = t["description"]
            .as_str()
            .unwrap_or("")
            .split(". ")
            .next()
            .unwrap_or("");
        println!("  {}: {first}.", t["name"].as_str().unwrap_or("?"));
    }

    for (tool, args) in [
        ("whoami", json!({})),
        ("freeze", json!({ "reason": "release 1.0 is being cut" })),
        (
            "room",
            json!({ "say": "hello from w1, through the bridge" }),
        ),
    ] {
        say(&format!("tools/call {tool} {args}"));
        let result = rpc(
            &mut mcp,
            "tools/call",
            json!({ "name": tool, "arguments": args }),
        )?;
        let (text, refused) = client::call_text(&result);
        let kind = if refused { "refused" } else { "text" };
        for (i, line) in text.lines().enumerate() {
            println!(
                "  {} {line}",
                if i == 0 {
                    format!("{kind}:")
                } else {
                    " ".repeat(kind.len() + 1)
                }
            );
        }
    }

    drop(mcp);
    let _ = bridge.wait();
    say("Stopping the daemon (SIGTERM)");
    if let Some(mut d) = daemon.take() {
        stop(&mut d);
    }
    Ok(())
}

fn rpc<R: std::io::BufRead, W: std::io::Write>(
    mcp: &mut McpClient<R, W>,
    method: &str,
    params: Value,
) -> Result<Value, Failure> {
    mcp.request(method, params)
        .map_err(fail(exit::FAILED))?
        .map_err(|e| {
            Failure::new(
                format!("{method} was answered with an error: {}", e.message),
                1,
            )
        })
}

fn say(step: &str) {
    println!("\n== {step}");
}

fn example_names() -> String {
    plugins::examples::EXAMPLES
        .iter()
        .map(|(f, _)| *f)
        .collect::<Vec<_>>()
        .join(", ")
}

fn wait_until_up(inst: &Instance, daemon: &mut Option<Child>) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if client::control::<StatusReply>(inst, ControlOp::Status).is_ok() {
            return Ok(());
        }
        if let Some(d) = daemon.as_mut()
            && let Ok(Some(status)) = d.try_wait()
        {
            let err = std::fs::read_to_string(inst.root.join("serve.stderr")).unwrap_or_default();
            return Err(Failure::new(
                format!("ovai serve exited ({status}): {}", err.trim()),
                1,
            ));
        }
        if Instant::now() > deadline {
            return Err(Failure::new("ovai serve did not answer within 30 s", 1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn plugins_rows(inst: &Instance) -> Vec<String> {
    std::fs::read_to_string(inst.runtime_log())
        .unwrap_or_default()
        .lines()
        .filter_map(parse_row)
        .filter(|(_, topic, _)| *topic == "plugins")
        .map(|(_, _, s)| s.to_string())
        .collect()
}

fn stop(child: &mut Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
