use clap::Parser;
use std::io::IsTerminal;

fn main() {
    // `COMPLETE=bash ovai …`: the shell asking for completions (`ovai completions`); answered, then exit.
    clap_complete::CompleteEnv::with_factory(<ovai::cli::Cli as clap::CommandFactory>::command)
        .complete();
    let cli = ovai::cli::Cli::parse();
    // A command whose output is cut short (`ovai status | head`) ends quietly, as command-line tools do.
    // The daemon and the bridge keep Rust's default of ignoring SIGPIPE: a peer that goes away is an
    // error they answer, not a reason to die.
    if !matches!(
        cli.command,
        ovai::cli::Command::Serve { .. } | ovai::cli::Command::Mcp | ovai::cli::Command::Demo
    ) {
        use nix::sys::signal::{SigHandler, Signal, signal};
        // SAFETY: setting a signal's disposition to its default before any thread is started.
        let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
    }
    // Operators read the daemon's tracing on stderr; other commands only warn there. stdout of `ovai mcp`
    // belongs to the protocol, so nothing is ever logged to it.
    // rmcp wraps every request in info-level spans; filtered out, they cost nothing per call.
    let default = match cli.command {
        ovai::cli::Command::Serve { .. } => "info,rmcp=warn",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("OVAI_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let log = tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter);
    // The daemon's tracing is written by a thread of its own: a stderr nobody reads must not stop it.
    let held = matches!(cli.command, ovai::cli::Command::Serve { .. })
        .then(ovai::stderr_log::StderrLog::start);
    match &held {
        Some(held) => {
            log.with_writer(held.clone()).init();
            // A panic's words too: the default hook writes to stderr where it is.
            std::panic::set_hook(Box::new(|info| {
                let thread = std::thread::current();
                let name = thread.name().unwrap_or("<unnamed>");
                ovai::stderr_log::say(&format!("thread '{name}' {info}\n"));
            }));
        }
        None => log.with_writer(std::io::stderr).init(),
    }
    ovai::tools::schema::quiet_when_spent();
    let code = ovai::cli::run(cli);
    if let Some(held) = held {
        held.finish(std::time::Duration::from_secs(1));
    }
    std::process::exit(code);
}
