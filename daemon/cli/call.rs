//! `ovai call TOOL [JSON]`: try a tool from a terminal, as a seat, through the socket a session uses.
//! Exit 0 for a text answer (on stdout), 1 for a refusal (on stderr), 2 for a usage or connection problem.

use std::io::{BufReader, IsTerminal};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::exit;
use crate::client::{self, McpClient};
use crate::instance;
use crate::wire::{ControlOp, ToolsReply};

pub fn run(root: Option<&Path>, tool: &str, args: Option<&str>, seat: Option<&str>) -> i32 {
    match call(root, tool, args, seat) {
        Ok((text, false)) => {
            println!("{}", shown(&text, std::io::stdout().is_terminal()));
            0
        }
        Ok((text, true)) => {
            eprintln!("{}", shown(&text, std::io::stderr().is_terminal()));
            exit::FAILED
        }
        Err(sentence) => {
            eprintln!("ovai: {sentence}");
            exit::USAGE
        }
    }
}

/// A plugin's words as printed: escaped on a terminal (no plugin rewrites the screen or its title),
/// as written when a program reads them.
fn shown(text: &str, terminal: bool) -> std::borrow::Cow<'_, str> {
    if terminal {
        crate::names::escape_controls(text, true)
    } else {
        text.into()
    }
}

fn call(
    root: Option<&Path>,
    tool: &str,
    args: Option<&str>,
    seat: Option<&str>,
) -> Result<(String, bool), String> {
    let inst = super::found(root)?;
    let stdin_text;
    let args = match args {
        Some("-") => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| format!("the arguments could not be read from standard input: {e}"))?;
            stdin_text = text;
            Some(stdin_text.as_str())
        }
        other => other,
    };
    let args: Value = match args {
        None => json!({}),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            // `ovai call whoami w1`: the seat given where the arguments go (helper-103).
            let seat_named = crate::seats::SeatBook::load(&inst)
                .is_ok_and(|book| book.seats.contains_key(text.trim()));
            if seat_named && seat.is_none() {
                return format!(
                    "the arguments are not JSON, and {0} is a seat: name it with --seat, as in {1} call {tool} \
                     --seat {0}",
                    text.trim(),
                    super::invoked_as()
                );
            }
            format!(
                "the arguments are not JSON ({e}); give an object, as in {} call {tool} '{}'",
                super::invoked_as(),
                example(&inst, tool)
            )
        })?,
    };
    if !args.is_object() {
        return Err(format!(
            "the arguments are {}, and a tool takes an object, as in '{}'",
            instance::json_kind(&args),
            example(&inst, tool)
        ));
    }
    let secret = match seat {
        Some(name) => seat_secret(&inst, name)?,
        None => std::env::var("OVAI_SECRET").ok().filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            "ovai call needs a seat to call as: pass --seat NAME, or set OVAI_SECRET to a seat's secret".to_string()
        })?,
    };
    let mut stream = client::connect(&inst).map_err(|e| e.to_string())?;
    // Connected first, as `client::control` does: a server starting marks so before it binds.
    if let Some(m) = client::marked(&inst, &inst.starting_marker()) {
        client::say_starting(&inst, &m);
    }
    client::hello_seat(&inst, &mut stream, &secret, Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    let reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut mcp = McpClient::new(reader, stream);
    mcp.initialize("ovai-call").map_err(|e| e.to_string())?;
    let result = mcp
        .request("tools/call", json!({ "name": tool, "arguments": args }))
        .map_err(|e| e.to_string())?
        .map_err(|e| super::why_no_tool(&inst, tool).unwrap_or(e.message))?;
    // A file edited and not read again ran as it was read: said, as the author tries their edit.
    if !crate::tools::BUILTINS.contains(&tool)
        && let Ok(status) = client::control::<crate::wire::StatusReply>(&inst, ControlOp::Status)
    {
        let file = format!("plugins/{tool}.mjs");
        // A host that left the file out ran nothing: its refusal says so.
        let left_out = status
            .host
            .not_answering
            .iter()
            .any(|s| s.starts_with(&format!("{file} ")));
        if status.stale.contains(&file) && !left_out {
            eprintln!(
                "ovai: {file} changed since the last read, and the call ran it as it was read: `ovai restart` \
                 serves it as it is now."
            );
        } else if status.removed_files.contains(&file) && !left_out {
            eprintln!(
                "ovai: {file} was removed since the last read, and the call ran it as it was read: `ovai \
                 restart` stops serving it."
            );
        }
    }
    Ok(client::call_text(&result))
}

/// The secret in seat NAME's desk, or why there is none in words that say which command gives one.
fn seat_secret(inst: &instance::Instance, name: &str) -> Result<String, String> {
    crate::seats::check_name(name).map_err(|e| e.to_string())?;
    if let Some(secret) = crate::desk::secret_in(&inst.desk(name)) {
        return Ok(secret);
    }
    let book = crate::seats::SeatBook::load(inst).map_err(|e| e.to_string())?;
    let file = format!("desks/{name}/.mcp.json");
    if book.seats.contains_key(name) {
        // A file broken by hand is said as it is: `seat rotate` would refuse it too.
        crate::desk::check_writable(&inst.desk(name)).map_err(|e| e.to_string())?;
        let what = if inst.desk(name).join(".mcp.json").exists() {
            "holds no secret"
        } else {
            "is missing"
        };
        return Err(format!(
            "{file} {what}, so there is no secret to call as {name} with; `ovai seat rotate {name}` writes a new \
             one (with --url URL for a seat on another machine)"
        ));
    }
    // A seat of another case is named in the refusal; otherwise the seat can be made.
    let unknown = book.unknown(name);
    let can_be_made =
        matches!(&unknown, crate::seats::SeatError::Unknown { near, .. } if near.is_empty());
    Err(if can_be_made {
        format!("{unknown} `ovai seat add {name}` makes it.")
    } else {
        unknown.to_string()
    })
}

/// Arguments that fit the tool's own schema, as an example: what it requires, or all it takes.
fn example(inst: &instance::Instance, tool: &str) -> String {
    let Ok(tools) = client::control::<ToolsReply>(inst, ControlOp::Tools) else {
        return "{}".into();
    };
    let Some(t) = tools.tools.iter().find(|t| t.name == tool) else {
        return "{}".into();
    };
    let schema = &t.entry["inputSchema"];
    let props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = serde_json::Map::new();
    for (name, p) in &props {
        if !required.is_empty() && !required.contains(&name.as_str()) {
            continue;
        }
        let v = match p["type"].as_str() {
            Some("integer") => json!(1),
            Some("number") => json!(1.5),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("…"),
        };
        out.insert(name.clone(), v);
    }
    Value::Object(out).to_string()
}
