//! `ovai call TOOL [JSON]`: try a tool from a terminal, as a seat, through the socket a session uses.
//! Exit 0 for a text answer (on stdout), 1 for a refusal (on stderr), 2 for a usage or connection problem.

use std::io::BufReader;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{self, McpClient};
use crate::instance;

const USAGE: i32 = 2;

pub fn run(root: Option<&Path>, tool: &str, args: Option<&str>, seat: Option<&str>) -> i32 {
    match call(root, tool, args, seat) {
        Ok((text, false)) => {
            println!("{text}");
            0
        }
        Ok((text, true)) => {
            eprintln!("{text}");
            1
        }
        Err(sentence) => {
            eprintln!("ovai: {sentence}");
            USAGE
        }
    }
}

fn call(
    root: Option<&Path>,
    tool: &str,
    args: Option<&str>,
    seat: Option<&str>,
) -> Result<(String, bool), String> {
    let inst = instance::find_root(root).map_err(|e| e.to_string())?;
    let args: Value = match args {
        None => json!({}),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            format!("the arguments are not JSON ({e}); give an object, as in ovai call {tool} '{{\"branch\": \"main\"}}'")
        })?,
    };
    if !args.is_object() {
        return Err(format!(
            "the arguments are {}, and a tool takes an object, as in '{{}}'",
            instance::json_kind(&args)
        ));
    }
    let secret = match seat {
        Some(name) => crate::desk::secret_in(&inst.desk(name)).ok_or_else(|| {
            format!(
                "desks/{name}/.mcp.json holds no secret for the seat {name}; `ovai seat list` shows the seats, `ovai seat add {name}` makes it"
            )
        })?,
        None => std::env::var("OVAI_SECRET").ok().filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            "ovai call needs a seat to call as: pass --seat NAME, or set OVAI_SECRET to a seat's secret".to_string()
        })?,
    };
    let mut stream = client::connect(&inst).map_err(|e| e.to_string())?;
    client::hello_seat(&inst, &mut stream, &secret, Duration::from_secs(60))
        .map_err(|e| e.to_string())?;
    let reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut mcp = McpClient::new(reader, stream);
    mcp.initialize("ovai-call").map_err(|e| e.to_string())?;
    let result = mcp
        .request("tools/call", json!({ "name": tool, "arguments": args }))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.message)?;
    Ok(client::call_text(&result))
}
