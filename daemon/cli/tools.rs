//! `ovai tools [NAME]`: the tools the running daemon serves now, each with its description, its schema,
//! and what it costs every session each turn (the UTF-8 bytes of its entry as `tools/list` sends it).

use super::{Failure, exit, unreached};
use crate::client;
use crate::instance::Instance;
use crate::names::thousands;
use crate::wire::{ControlOp, ToolsReply};

pub fn run(inst: &Instance, name: Option<&str>, json: bool) -> Result<(), Failure> {
    let reply: ToolsReply = client::control(inst, ControlOp::Tools).map_err(unreached)?;
    let tools: Vec<_> = match name {
        None => reply.tools,
        Some(n) => {
            let found: Vec<_> = reply
                .tools
                .iter()
                .filter(|t| t.name == n)
                .cloned()
                .collect();
            if found.is_empty() {
                let names: Vec<&str> = reply.tools.iter().map(|t| t.name.as_str()).collect();
                // In the words (and quoting) a session's call gets.
                let why = super::why_no_tool(inst, n)
                    .unwrap_or_else(|| crate::answer::unknown_tool(n, names.into_iter(), &[]));
                // As `ovai call` says it: asked for something that is not there.
                return Err(Failure::new(why, exit::USAGE));
            }
            found
        }
    };
    if json {
        super::print_json(&serde_json::json!({ "tools": tools }));
        return Ok(());
    }
    let total: usize = tools.iter().map(|t| t.bytes).sum();
    for t in &tools {
        println!("{} ({} bytes each turn)", t.name, thousands(t.bytes));
        if let Some(d) = t.entry["description"].as_str() {
            for line in crate::names::escape_controls(d, true).lines() {
                println!("  {line}");
            }
        }
        let schema = serde_json::to_string(&t.entry["inputSchema"]).unwrap_or_default();
        println!("  inputSchema: {}", crate::names::json_for_terminal(schema));
        println!();
    }
    if name.is_none() {
        println!(
            "{} tools; together they cost every session {} bytes each turn.",
            tools.len(),
            thousands(total)
        );
    }
    Ok(())
}
