//! ovai: the server behind an openovai workspace, and its command line.
//!
//! Follow one tool call through the code:
//!
//! 1. A seat's MCP client starts `ovai mcp` (`bridge`) from the seat's desk. It connects to the daemon's
//!    Unix socket in `.ovai/` and sends a hello line with the seat's secret (`wire`).
//! 2. The daemon (`server`, started by `ovai serve`) accepts the connection (`server::connection`),
//!    resolves the secret to a seat (`seats`), and serves MCP on it with one rmcp service per connection
//!    (`mcp::SeatService`), which knows its seat from then on.
//! 3. `tools/call` finds the tool in the current generation's table (`generation`, `tools`) and validates
//!    the arguments against its inputSchema (`tools::schema`). Built-ins (`tools::index`, `tools::room`)
//!    answer in Rust.
//! 4. A plugin call goes to the generation's host (`host::call`): one NDJSON line on fd 3 to a supervised
//!    Node child (`host::supervisor`, `host::link`), which runs the plugin's `run` (`host-shim/host.mjs`)
//!    and answers with a line; `host::answer` turns every ending into the text or refusal the caller reads.
//!
//! At start and at `ovai restart`, `plugins` decides which files in plugins/ are served: the checks before
//! import, one import at a time in a fresh host, and one runtime.log row per file (`runtime_log`).
//! `instance` finds the root and reads openovai.json; `cli` is the command line; `client` is the small
//! synchronous client `ovai call`, `ovai restart` and the demo use.

pub mod bridge;
pub mod cli;
pub mod client;
pub mod desk;
pub mod files;
pub mod generation;
pub mod host;
pub mod instance;
pub mod lines;
pub mod mcp;
pub mod names;
pub mod plugins;
pub mod progress;
pub mod runtime_log;
pub mod seats;
pub mod server;
pub mod tools;
pub mod wire;
