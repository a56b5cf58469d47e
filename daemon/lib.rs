//! ovai: the server behind an openovai workspace, and its command line.
//!
//! Follow one tool call through the code, top to bottom:
//!
//! 1. `stdio_bridge`: `ovai mcp`, in the session's own process. A seat's MCP client starts it from the
//!    seat's desk (`desk` wrote its `.mcp.json`); it connects to the daemon's Unix socket in `.ovai/` and
//!    sends a hello with the seat's secret (`wire`), then relays MCP lines both ways.
//! 2. `server`: the daemon (`ovai serve`). Its accept loop hands each connection to
//!    `server::connection`, which reads the hello and resolves the secret to a seat (`seats`); the
//!    sockets are `unix_io`'s, waited on for reading only. A seat on another machine comes in over
//!    `server::http` instead: its gate resolves the bearer token to a seat on every request.
//! 3. `server::transport` and `server::session`: one MCP session, which knows its seat from then on.
//!    Every line is read by `jsonrpc`; on the socket, every `tools/call` is taken from rmcp by the
//!    transport to `server::calls`: its params read (`server::params`), the tool found in the current
//!    `generation`'s table (`tools`), its arguments checked (`server::arguments`, `tools::schema`). Over
//!    HTTP, rmcp runs the session (`server::session`'s handler) and the call takes the same checks.
//! 4. Built-ins answer in Rust (`tools::index`, `tools::room`). A plugin call goes to the generation's
//!    host: `host::prepare` makes its line for the live host and `Ready::send` writes it, with no task of
//!    its own (`host::call`, a task that waits for a host, when none is up, and over HTTP) →
//!    `host::supervisor` (the live host process, in its box: `host::sandbox`, `host::userns`) →
//!    `host::link` (one NDJSON line on a pipe, the host's fd 3; the answer back on its fd 4) →
//!    `host-shim/host.mjs` in Node → the plugin's `run`; its progress goes back through `server::progress`.
//! 5. `answer`: every way the call can end, in the words the caller reads.
//!
//! Beside the route: `plugins` decides which files in plugins/ a generation serves (the checks before
//! import, `host::import`, and one runtime.log row per file in `plugins::plugin_rows`), and
//! `helper_modules` keeps what the modules in its folders held when they were read; `runtime_log` writes
//! the rows people read; `instance` finds the root and reads openovai.json; `cli` is the command line,
//! with `client`, the synchronous client of the socket; `stderr_log` writes the daemon's tracing from a thread
//! of its own; `names`, `files`, `digest`, `lines`, `skim`, `sync`, `memory`, `sched` and `process_start` are the
//! small shared pieces.

// The layers, top first: a module names only those below it (tests/layers.rs).
pub mod cli;
pub mod server;
pub mod generation;
pub mod answer;
pub mod plugins;
pub mod host;
pub mod helper_modules;
pub mod tools;
pub mod seats;
pub mod permissions;
pub mod desk;
pub mod stdio_bridge;
pub mod client;
pub mod jsonrpc;
pub mod instance;
pub mod runtime_log;
pub mod files;
pub mod wire;
pub mod unix_io;
pub mod process_start;
pub mod sched;
pub mod lines;
pub mod skim;
pub mod stderr_log;
pub mod memory;
pub mod sync;
pub mod maps;
pub mod names;
pub mod digest;
