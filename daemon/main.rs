use clap::Parser;
use std::io::IsTerminal;

fn main() {
    // `COMPLETE=bash ovai …`: the shell asking for completions (`ovai completions`); answered, then exit.
    clap_complete::CompleteEnv::with_factory(<ovai::cli::Cli as clap::CommandFactory>::command)
        .complete();
    let cli = ovai::cli::Cli::parse();
    // A command whose output is cut short (`ovai status | head`) ends quietly, as command-line tools do:
    // by SIGPIPE, once a print meets a stdout nobody reads. Only then: SIGPIPE stays ignored, as Rust
    // leaves it, so a daemon that closes the socket or a plugin host that ends mid-check is an error the
    // command says in words, not a silent death (`ovai check` died so, exit 141, when its host did).
    if !matches!(
        cli.command,
        ovai::cli::Command::Serve { .. } | ovai::cli::Command::Mcp | ovai::cli::Command::Demo
    ) {
        end_when_unread();
    }
    // Operators read the daemon's tracing on stderr; other commands only warn there. stdout of `ovai mcp`
    // belongs to the protocol, so nothing is ever logged to it.
    // rmcp wraps every request in info-level spans; filtered out, they cost nothing per call.
    let default = match cli.command {
        ovai::cli::Command::Serve { .. } => "info,rmcp=warn",
        // What a plugin prints at its import is what its author debugs a failed import with.
        ovai::cli::Command::Check { .. } => "warn,ovai::plugin_output=info",
        _ => "warn",
    };
    let filter = log_filter(default);
    let ansi = std::io::stderr().is_terminal();
    let log = tracing_subscriber::fmt()
        .with_ansi(ansi)
        .with_env_filter(filter);
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // The daemon's tracing is written by a thread of its own: a stderr nobody reads must not stop it.
    let held = matches!(cli.command, ovai::cli::Command::Serve { .. })
        .then(|| ovai::stderr_log::StderrLog::start(ansi));
    match &held {
        Some(held) => {
            log.with_writer(held.clone())
                .finish()
                .with(ovai::stderr_log::RmcpWords::default())
                .init();
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

/// A print to a stdout nobody reads (`println!` panics on it, SIGPIPE being ignored) ends the command by
/// SIGPIPE, as it would have ended had SIGPIPE not been ignored.
fn end_when_unread() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let said = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if said.starts_with("failed printing to stdout") && said.contains("Broken pipe") {
            use nix::sys::signal::{SigHandler, Signal, raise, signal};
            // SAFETY: the default disposition, set just before the signal it is for.
            let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
            let _ = raise(Signal::SIGPIPE);
        }
        previous(info);
    }));
}

/// OVAI_LOG's filter, or the command's own with a sentence on stderr when a word of it is a level
/// misspelt: a bare word is a target to EnvFilter (`debgu` logs nothing at all), which hid even the
/// server's warnings. A target alone (`ovai`, `rmcp`), a number or a span filter is taken as it is.
fn log_filter(default: &str) -> tracing_subscriber::EnvFilter {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let Ok(value) = std::env::var("OVAI_LOG") else {
        return tracing_subscriber::EnvFilter::new(default);
    };
    let misspelt = |word: &str| {
        let word = word.to_ascii_lowercase();
        !LEVELS.contains(&word.as_str())
            && LEVELS.iter().any(|level| {
                ovai::names::distance(&word, level) <= 2
                    || (word.len() >= 3 && level.starts_with(&word))
                    || word.starts_with(level)
            })
    };
    let bare_word = value
        .split(',')
        .map(str::trim)
        .find(|d| !d.contains(['=', ':', '[']) && misspelt(d));
    let what = match (bare_word, tracing_subscriber::EnvFilter::try_new(&value)) {
        (None, Ok(filter)) => return filter,
        (Some(word), _) => format!(
            "names \"{}\", which is no level",
            ovai::names::clipped(word, 40)
        ),
        (None, Err(e)) => format!("cannot be read ({e})"),
    };
    eprintln!(
        "ovai: OVAI_LOG {what}: give one of trace, debug, info, warn, error or off, or TARGET=LEVEL (as in \
         ovai=debug); it is left aside, and the log is {default:?}."
    );
    tracing_subscriber::EnvFilter::new(default)
}
