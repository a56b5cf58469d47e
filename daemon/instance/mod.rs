//! Where an instance is and what its openovai.json says.
//!
//! The root is found in this order: `--root`, `OVAI_ROOT`, the nearest ancestor of the working directory
//! holding openovai.json, and the parent of the folder the binary sits in (so `~/workspace/bin/ovai`
//! works from anywhere; the command line says so on stderr when it acts on that one).

use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod http;

/// What `hostIsolation` in openovai.json asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationWanted {
    Auto,
    Bwrap,
    Userns,
    None,
}

impl IsolationWanted {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(IsolationWanted::Auto),
            "bwrap" => Ok(IsolationWanted::Bwrap),
            "userns" => Ok(IsolationWanted::Userns),
            "none" => Ok(IsolationWanted::None),
            other => Err(format!(
                "is {other:?}; it takes \"auto\", \"bwrap\", \"userns\" or \"none\""
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IsolationWanted::Auto => "auto",
            IsolationWanted::Bwrap => "bwrap",
            IsolationWanted::Userns => "userns",
            IsolationWanted::None => "none",
        }
    }
}

use serde_json::{Map, Value};

use crate::names;

pub const CONFIG_FILE: &str = "openovai.json";

/// What `ovai status` and runtime.log say of openovai.json edited since the server read it.
pub const CONFIG_CHANGED: &str = "openovai.json changed since the last read: the server goes on with \
                                  the settings it read, and `ovai restart` reads it (calls' \
                                  context.config included).";

/// Every path the server and the CLI use inside one instance, derived from its root.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The instance's root, absolute: handed to plugins as `context.root`.
    pub root: PathBuf,
}

impl Instance {
    pub fn at(root: PathBuf) -> Self {
        Self { root }
    }

    pub fn config_file(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }
    pub fn desks_dir(&self) -> PathBuf {
        self.root.join("desks")
    }
    pub fn desk(&self, seat: &str) -> PathBuf {
        self.desks_dir().join(seat)
    }
    pub fn runtime_log(&self) -> PathBuf {
        self.root.join("runtime.log")
    }
    /// The opt-in call log (`callLog: true`).
    pub fn call_log(&self) -> PathBuf {
        self.root.join("calls.jsonl")
    }
    pub fn room_file(&self) -> PathBuf {
        self.root.join("room.jsonl")
    }
    /// The private folder (mode 0700): socket, hashed seats, control secret, the host shim.
    pub fn private_dir(&self) -> PathBuf {
        self.root.join(".ovai")
    }
    pub fn socket(&self) -> PathBuf {
        self.private_dir().join("ovai.sock")
    }

    /// Why no server can serve the instance here, if its socket's path is longer than a Unix socket takes
    /// (sun_path holds 108 bytes with its terminating NUL); a link to the folder does not help, as the
    /// path is the folder's own.
    pub fn socket_too_long(&self) -> Option<String> {
        const MAX_SOCKET_PATH: usize = 107;
        let socket = self.socket();
        let len = socket.as_os_str().len();
        (len > MAX_SOCKET_PATH).then(|| {
            let over = len - MAX_SOCKET_PATH;
            format!(
                "its socket {} would be {len} bytes long, more than the {MAX_SOCKET_PATH} a Unix socket takes, so no \
                 server can serve it there: the instance needs a folder whose path is at least {over} {} shorter",
                socket.display(),
                if over == 1 { "byte" } else { "bytes" }
            )
        })
    }
    pub fn seats_file(&self) -> PathBuf {
        self.private_dir().join("seats.json")
    }
    /// seats.json as it was before its last change.
    pub fn seats_previous(&self) -> PathBuf {
        self.private_dir().join("seats.json.previous")
    }
    pub fn seats_lock(&self) -> PathBuf {
        self.private_dir().join("seats.lock")
    }
    pub fn serve_lock(&self) -> PathBuf {
        self.private_dir().join("serve.lock")
    }
    /// Written while a starting daemon reads plugins/, before it answers anybody: `ovai status` reads it.
    pub fn starting_marker(&self) -> PathBuf {
        self.private_dir().join("starting.json")
    }
    /// Written once a daemon is up and removed when it stops: found by the next start, it says the one
    /// before ended without stopping, however much it wrote to runtime.log meanwhile.
    pub fn serving_marker(&self) -> PathBuf {
        self.private_dir().join("serving.json")
    }
    /// Written while a stopping daemon finishes its calls, no longer taking any: every command reads it.
    pub fn stopping_marker(&self) -> PathBuf {
        self.private_dir().join("stopping.json")
    }
    pub fn control_secret(&self) -> PathBuf {
        self.private_dir().join("control.secret")
    }
    pub fn host_shim(&self) -> PathBuf {
        self.private_dir().join("host.mjs")
    }

    /// The private folder's own `.gitignore`: where the instance is a checkout, `git add -A` at its root
    /// stages none of its secrets.
    pub fn private_gitignore(&self) -> PathBuf {
        self.private_dir().join(".gitignore")
    }

    /// What is wrong with the private folder as it stands, in words ("a symbolic link", "another user's
    /// (uid 65534)"), or `None` when it is a folder of this user's alone, or not there.
    pub fn private_dir_unsound(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(self.private_dir()).ok()?;
        if m.file_type().is_symlink() {
            Some("a symbolic link".into())
        } else if !m.is_dir() {
            Some("no folder".into())
        } else if m.uid() != nix::unistd::geteuid().as_raw() {
            Some(format!("another user's (uid {})", m.uid()))
        } else if m.mode() & 0o077 != 0 {
            Some(format!(
                "open to other users (mode {:o})",
                m.mode() & 0o7777
            ))
        } else {
            // A file another user put there while it was open (a seats.json naming a secret of theirs).
            std::fs::read_dir(self.private_dir())
                .ok()?
                .flatten()
                .find_map(|e| {
                    let uid = e.metadata().ok()?.uid();
                    (uid != m.uid()).then(|| {
                        format!(
                            "holding {}, another user's (uid {uid})",
                            e.file_name().to_string_lossy()
                        )
                    })
                })
        }
    }

    /// The refusal of a private folder that is `why` (`private_dir_unsound`).
    pub fn private_dir_refusal(&self, why: &str) -> String {
        use std::os::unix::fs::MetadataExt;
        let dir = self.private_dir();
        // The whole instance another user's, its private folder too: ovai is run as the wrong user, and
        // removing the folder would lose the seats.
        let owner = |p: &Path| std::fs::symlink_metadata(p).ok().map(|m| m.uid());
        let me = nix::unistd::geteuid().as_raw();
        if let (Some(theirs), Some(root)) = (owner(&dir), owner(&self.root))
            && theirs == root
            && theirs != me
            && std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir())
        {
            return format!(
                "the instance at {} is another user's (uid {theirs}; this command runs as uid {me}), and so is its \
                 private folder {}, which holds the seats' and the server's secrets: run ovai as that user (`sudo \
                 -u '#{theirs}' ovai …`). Nothing was changed.",
                self.root.display(),
                dir.display()
            );
        }
        format!(
            "{} is {why}: ovai keeps the seats' and the server's secrets there, and uses no folder another user \
             controls or can change, nor one a link leads to. Look at what is in it (`ls -la {}`): remove it, or \
             make it a folder of your own with mode 0700, and run the command again.",
            dir.display(),
            dir.display()
        )
    }

    /// Reads openovai.json as it is now.
    pub fn read_config(&self) -> Result<Config, ConfigError> {
        let path = self.config_file();
        let text =
            crate::files::read_regular(&path, crate::files::MAX_READ_BYTES).map_err(|source| {
                match source.kind() {
                    std::io::ErrorKind::NotFound => ConfigError::Gone { path: path.clone() },
                    _ => ConfigError::Read {
                        path: path.clone(),
                        source,
                    },
                }
            })?;
        Config::parse(&text)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error(
        "No openovai instance was found: there is no {CONFIG_FILE} in {cwd} or any folder above it. \
         Run `ovai init` to make one, or name it with --root DIR or OVAI_ROOT."
    )]
    NotFound { cwd: String },
    #[error(
        "The instance's path, {shown}, holds a character a terminal does not show as it is (a control, a line \
         break, a direction mark, or bytes that are not UTF-8), so what ovai prints, and the desks and service \
         unit it writes, would not name the folder. Nothing was done; move the instance to a folder whose path \
         has none (then `ovai seat rebuild` there points its desks at it). A server already running there \
         stops with `kill PID`, its pid in .ovai/serve.lock."
    )]
    Unshown { shown: String },
    #[error(
        "{path} holds no {CONFIG_FILE}, so it is not an openovai instance (named by {by}). Run `ovai init {path}` \
         to make one there; if the instance was moved, `ovai seat rebuild` where it is now points its desks at it."
    )]
    NotAnInstance { path: String, by: &'static str },
    #[error(
        "{path} (named by {by}) {what}: name the instance's folder, the one holding {CONFIG_FILE}. If the \
         instance was moved, `ovai seat rebuild` where it is now points its desks at it; `ovai init` makes a \
         new one."
    )]
    NoFolder {
        path: String,
        by: &'static str,
        /// "does not exist", "is a file, not a folder".
        what: &'static str,
    },
    #[error(
        "{path} holds no {CONFIG_FILE}: it is a folder of the openovai instance at {root} (named by {by}). Name \
         the instance itself: --root {quoted}.",
        quoted = crate::names::shell_quote(root)
    )]
    InsideAnInstance {
        path: String,
        root: String,
        by: &'static str,
    },
    #[error("The working directory cannot be read: {0}")]
    Cwd(std::io::Error),
}

/// Finds the instance this command is about.
pub fn find_root(explicit: Option<&Path>) -> Result<Instance, RootError> {
    find_root_how(explicit).map(|(inst, _)| inst)
}

/// How the instance was found: its last way, beside the binary, is one a person may not expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundBy {
    /// `--root` or `OVAI_ROOT`.
    Named,
    /// The working directory or a folder above it.
    WorkingDirectory,
    /// The parent of the binary's folder; the working directory is in no instance.
    Binary,
}

/// `find_root`, and which of its ways found the instance.
pub fn find_root_how(explicit: Option<&Path>) -> Result<(Instance, FoundBy), RootError> {
    let (inst, how) = find_any_root(explicit)?;
    shown_as_is(&inst.root)?;
    Ok((inst, how))
}

/// Refuses a path that holds what a terminal acts on or does not show, or bytes that are not UTF-8: printed,
/// it would rewrite a person's terminal, and written into a desk's JSON or a service unit, name another
/// folder or break the file.
pub fn shown_as_is(path: &Path) -> Result<(), RootError> {
    let fine = path
        .to_str()
        .is_some_and(|p| !p.chars().any(|c| c.is_control() || crate::names::unseen(c)));
    if fine {
        return Ok(());
    }
    Err(RootError::Unshown { shown: shown(path) })
}

/// A path for a sentence, what a terminal would act on escaped (tabs too).
pub fn shown(path: &Path) -> String {
    crate::names::escape_controls(&path.to_string_lossy(), false).replace('\t', "\\t")
}

fn find_any_root(explicit: Option<&Path>) -> Result<(Instance, FoundBy), RootError> {
    if let Some(p) = explicit {
        return named(p, "--root").map(|i| (i, FoundBy::Named));
    }
    if let Some(p) = std::env::var_os("OVAI_ROOT").filter(|v| !v.is_empty()) {
        return named(Path::new(&p), "OVAI_ROOT").map(|i| (i, FoundBy::Named));
    }
    let cwd = std::env::current_dir().map_err(RootError::Cwd)?;
    for dir in cwd.ancestors() {
        if is_instance(dir) {
            return Ok((Instance::at(dir.to_path_buf()), FoundBy::WorkingDirectory));
        }
    }
    if let Some(root) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(Path::parent).map(Path::to_path_buf))
        .filter(|root| root.join(CONFIG_FILE).is_file())
    {
        return Ok((Instance::at(root), FoundBy::Binary));
    }
    Err(RootError::NotFound { cwd: shown(&cwd) })
}

/// Why nothing but `ovai stop` and `ovai status` is done for a client that found the instance at `found`,
/// when that is not `root`, the daemon's own, which is no longer there (the folder was moved).
pub fn moved(root: &std::path::Path, found: Option<&str>) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let found = std::path::Path::new(found?);
    if found == root {
        return None;
    }
    let identity = |p: &std::path::Path| {
        std::fs::metadata(p.join(".ovai"))
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    // Two names of one folder (a bind mount) are the same instance.
    if identity(root).is_some() && identity(root) == identity(found) {
        return None;
    }
    let new = crate::names::shell_quote(&found.to_string_lossy());
    Some(format!(
        "this server serves {}, where the instance was when it started, and was reached at {}: the folder was \
         moved while the server ran, and it reads every file by its old path. Stop it (`ovai stop --root {new}`), \
         start it where the instance is now (`ovai serve --root {new}`), then `ovai seat rebuild --root {new}` \
         points the desks there",
        root.display(),
        found.display()
    ))
}

/// Whether `dir` is an instance: it holds openovai.json, or held it and was served (its `.ovai/serve.lock`
/// is there), so that a server whose openovai.json was removed can still be stopped and asked, and each
/// command says the file is missing rather than that there is no instance.
fn is_instance(dir: &Path) -> bool {
    dir.join(CONFIG_FILE).is_file() || Instance::at(dir.to_path_buf()).serve_lock().is_file()
}

fn named(p: &Path, by: &'static str) -> Result<Instance, RootError> {
    let abs = absolute(p);
    if is_instance(&abs) {
        return Ok(Instance::at(abs));
    }
    // `init` refuses a folder inside an instance: that is not the advice to give for one.
    if let Some(root) = abs
        .ancestors()
        .skip(1)
        .find(|a| a.join(CONFIG_FILE).is_file())
    {
        return Err(RootError::InsideAnInstance {
            path: shown(&abs),
            root: shown(root),
            by,
        });
    }
    let what = match std::fs::metadata(&abs) {
        Err(_) => Some("does not exist"),
        Ok(m) if !m.is_dir() => Some("is a file, not a folder"),
        Ok(_) => None,
    };
    if let Some(what) = what {
        return Err(RootError::NoFolder {
            path: shown(&abs),
            by,
            what,
        });
    }
    Err(RootError::NotAnInstance {
        path: shown(&abs),
        by,
    })
}

/// What the private folder's `.gitignore` holds.
pub const PRIVATE_GITIGNORE: &[u8] =
    b"# ovai's private folder: secrets, never to be committed.\n*\n";

/// An absolute, symlink-free path where the file system allows, so `context.root` is the same string for
/// every seat.
pub fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.into()))
}

/// openovai.json: the settings the server reads, and the whole object as plugins receive it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The parsed file, unchanged: `context.config`. It never holds a secret.
    pub raw: Value,
    /// The person working in the instance.
    pub user: String,
    /// The seat whose sessions have the role Leader.
    pub leader: String,
    /// How long a plugin call may take before its caller is answered and its signal fires.
    pub call_timeout: Duration,
    /// How long importing one plugin file may take at a start or restart.
    pub import_timeout: Duration,
    /// The largest `{ text }` (in bytes) passed on to a caller.
    pub max_answer_bytes: usize,
    /// What the plugin host's whole box may hold, in MB (and V8's heap limit, `--max-old-space-size`).
    pub host_max_memory_mb: u64,
    /// How many processes and threads the plugin host's box may hold at once (`hostMaxProcesses`).
    pub host_max_processes: u64,
    /// How long the host may leave a heartbeat unanswered (a plugin blocking its event loop) before it is
    /// killed and restarted.
    pub host_hang: Duration,
    /// How long calls in flight may go on after SIGTERM before they are answered for.
    pub shutdown_grace: Duration,
    /// Names of environment variables the plugin host receives from the daemon's environment.
    pub plugin_env: Vec<String>,
    /// Bytes of answers a session may leave unread before its requests wait (`sessionQueueBytes`).
    pub session_queue_bytes: usize,
    /// Sessions the socket holds at once (commands have places of their own), and HTTP connections
    /// (`maxConnections`).
    pub max_connections: usize,
    /// The box the plugin host runs in (`hostIsolation`: "auto", "bwrap", "userns" or "none").
    pub host_isolation: IsolationWanted,
    /// Whether each call gets a line in calls.jsonl (`callLog`).
    pub call_log: bool,
    /// The Streamable HTTP endpoint for seats on other machines (`http`), if any.
    pub http: Option<http::HttpSettings>,
    /// The coding agents a desk is made for (`clients`): each gets its own file there.
    pub clients: Vec<Client>,
    /// Where Prometheus's text is served (`metrics.listen`), if anywhere.
    pub metrics: Option<std::net::SocketAddr>,
    /// The operator's status page (`web`), if on: its own loopback address, or none for the HTTP
    /// endpoint's listener.
    pub web: Option<Option<std::net::SocketAddr>>,
    /// Keys that look like a misspelt setting, each as a sentence (runtime.log and `ovai check` say them).
    pub warnings: Vec<String>,
    /// Names `pluginEnv` lists that are not set in this process, whose plugins see none of them.
    pub plugin_env_unset: Vec<String>,
}

impl Config {
    /// The warnings a server says (runtime.log, `ovai restart`): plugins see what it started with.
    pub fn serve_warnings(&self) -> Vec<String> {
        self.warnings_with(
            "which is not set where ovai started, so plugins see none. Plugins see what `ovai serve` started \
             with: set it there (the shell or the service that runs it) and start it again; `ovai restart` \
             does not pass on its own environment.",
        )
    }

    /// The warnings `ovai check` says: it imports with its own environment, not the server's.
    pub fn check_warnings(&self) -> Vec<String> {
        self.warnings_with(
            "which is not set where `ovai check` runs, so the plugins it imports see none; a server passes \
             what `ovai serve` started with, so its verdict may differ. Set it here as the server has it to \
             check as the server would.",
        )
    }

    /// The warnings, then a row for each name of `pluginEnv` not set here, saying `unset` of it.
    fn warnings_with(&self, unset: &str) -> Vec<String> {
        let unset = self.plugin_env_unset.iter().map(|name| {
            format!(
                "{CONFIG_FILE}'s \"pluginEnv\" names {}, {unset}",
                crate::names::clipped(name, 64)
            )
        });
        self.warnings.iter().cloned().chain(unset).collect()
    }
}

/// The keys ovai reads in openovai.json; any other key is the authors' own, for their plugins.
pub const SETTINGS: &[&str] = &[
    "user",
    "leader",
    "callTimeoutSeconds",
    "importTimeoutSeconds",
    "maxAnswerBytes",
    "hostMaxMemoryMB",
    "hostMaxProcesses",
    "hostHangSeconds",
    "shutdownGraceSeconds",
    "sessionQueueBytes",
    "maxConnections",
    "hostIsolation",
    "callLog",
    "pluginEnv",
    "http",
    "clients",
    "metrics",
    "web",
];

/// The object a listener's setting (`key`) holds, with no keys but `takes`; `None` when it is absent.
fn listener_object<'a>(
    key: &'static str,
    value: Option<&'a Value>,
    takes: &[&str],
    example: &str,
) -> Result<Option<&'a serde_json::Map<String, Value>>, ConfigError> {
    let bad = |problem: String| ConfigError::Bad { key, problem };
    let map = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(bad(format!(
                "is {}, not an object such as {example}",
                json_kind(other)
            )));
        }
    };
    if let Some(k) = map.keys().find(|k| !takes.contains(&k.as_str())) {
        let takes: Vec<String> = takes.iter().map(|t| format!("\"{t}\"")).collect();
        return Err(bad(format!(
            "has \"{k}\", which ovai does not read there; it takes {}",
            takes.join(" and ")
        )));
    }
    Ok(Some(map))
}

/// `"web": {"listen": ADDR}` (its own loopback address) or `"web": {"onHttp": true}` (at /web on the HTTP
/// endpoint, whose TLS then covers it).
fn web(value: Option<&Value>) -> Result<Option<Option<std::net::SocketAddr>>, ConfigError> {
    let bad = |problem: String| ConfigError::Bad {
        key: "web",
        problem,
    };
    let example = "{\"listen\": \"127.0.0.1:7780\"} or {\"onHttp\": true}";
    let Some(map) = listener_object("web", value, &["listen", "onHttp"], example)? else {
        return Ok(None);
    };
    match (map.get("listen"), map.get("onHttp")) {
        (Some(Value::String(listen)), None | Some(Value::Bool(false))) => {
            let addr = http::parse_listen(listen).map_err(|e| bad(format!("has \"listen\": {e}")))?;
            if !addr.ip().is_loopback() {
                return Err(bad(format!(
                    "listens on {addr}, which other machines reach, and the page's own address has no TLS: use a \
                     loopback address, or \"onHttp\": true to serve it on the HTTP endpoint with its TLS"
                )));
            }
            Ok(Some(Some(addr)))
        }
        (None, Some(Value::Bool(true))) => Ok(Some(None)),
        _ => Err(bad(
            "takes either \"listen\": \"127.0.0.1:PORT\" (an address of its own) or \"onHttp\": true (on the HTTP \
             endpoint), one of them"
                .into(),
        )),
    }
}

/// `"metrics": {"listen": ADDR, "insecure": true}`: the address Prometheus scrapes, loopback unless
/// `insecure` says another on purpose (its labels name seats and tools).
fn metrics_listen(value: Option<&Value>) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    let bad = |problem: String| ConfigError::Bad {
        key: "metrics",
        problem,
    };
    let example = "{\"listen\": \"127.0.0.1:9464\"}";
    let Some(map) = listener_object("metrics", value, &["listen", "insecure"], example)? else {
        return Ok(None);
    };
    let listen = match map.get("listen") {
        Some(Value::String(listen)) => listen,
        None | Some(Value::Null) => {
            return Err(bad(
                "has no \"listen\": name the address, such as \"127.0.0.1:9464\"".into(),
            ));
        }
        Some(other) => {
            return Err(bad(format!(
                "has \"listen\": {other}, and it takes an address as a string, such as \"127.0.0.1:9464\""
            )));
        }
    };
    let addr = http::parse_listen(listen).map_err(|e| bad(format!("has \"listen\": {e}")))?;
    let insecure = match map.get("insecure") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(bad(format!(
                "has \"insecure\": {other}, and it takes true or false"
            )));
        }
    };
    if !addr.ip().is_loopback() && !insecure {
        return Err(bad(format!(
            "listens on {addr}, which other machines reach, and its figures name seats and tools: use a loopback \
             address, or say \"insecure\": true to mean it"
        )));
    }
    Ok(Some(addr))
}

/// A coding agent a seat's session may run, whose files a desk gets (`"clients"` in openovai.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeCode,
    GeminiCli,
    Codex,
    Opencode,
}

impl Client {
    pub const ALL: [Client; 4] = [
        Client::ClaudeCode,
        Client::GeminiCli,
        Client::Codex,
        Client::Opencode,
    ];

    /// The name openovai.json gives it.
    pub fn key(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::GeminiCli => "gemini-cli",
            Client::Codex => "codex",
            Client::Opencode => "opencode",
        }
    }

    /// What a session of this client calls the tool `tool` of ovai's server (`openovai`).
    pub fn tool_name(self, tool: &str) -> String {
        match self {
            Client::ClaudeCode => format!("mcp__openovai__{tool}"),
            Client::GeminiCli => format!("mcp_openovai_{tool}"),
            Client::Codex => format!("{} (in mcp__openovai)", tool.replace('-', "_")),
            Client::Opencode => format!("openovai_{tool}"),
        }
    }

    /// The name people know it by.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "Claude Code",
            Client::GeminiCli => "Gemini CLI",
            Client::Codex => "Codex",
            Client::Opencode => "opencode",
        }
    }
}

/// `"clients"`'s value read, or what is wrong with it.
pub fn clients(value: Option<&Value>) -> Result<Vec<Client>, ConfigError> {
    let takes = || {
        Client::ALL
            .iter()
            .map(|c| format!("\"{}\"", c.key()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match value {
        None | Some(Value::Null) => Ok(Client::ALL.to_vec()),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                let found = item
                    .as_str()
                    .and_then(|s| Client::ALL.into_iter().find(|c| c.key() == s));
                match found {
                    Some(c) if !out.contains(&c) => out.push(c),
                    Some(_) => {}
                    None => {
                        return Err(ConfigError::Bad {
                            key: "clients",
                            problem: format!(
                                "lists {item}, which is not a client ovai makes desks for; it takes {}",
                                takes()
                            ),
                        });
                    }
                }
            }
            Ok(out)
        }
        Some(other) => Err(ConfigError::Bad {
            key: "clients",
            problem: format!("is {}, not a list such as [{}]", json_kind(other), takes()),
        }),
    }
}

/// The setting `key` is a near miss of, if any: the same but for case, or a few letters apart.
fn near_miss(key: &str) -> Option<&'static str> {
    if SETTINGS.contains(&key) {
        return None;
    }
    let lower = key.to_ascii_lowercase();
    SETTINGS.iter().copied().find(|s| {
        let s_lower = s.to_ascii_lowercase();
        s_lower == lower
            || (lower.len() >= 6 && crate::names::distance(&lower, &s_lower) <= 3)
            || (lower.len() >= 8 && (s_lower.starts_with(&lower) || lower.starts_with(&s_lower)))
    })
}

pub const DEFAULT_CALL_TIMEOUT_S: u64 = 60;
pub const DEFAULT_IMPORT_TIMEOUT_S: u64 = 10;
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 1024 * 1024;
pub const DEFAULT_HOST_MAX_MEMORY_MB: u64 = 1024;
/// Node holds about a dozen threads by itself; a plugin that starts a few processes of its own stays far
/// below this, and a fork bomb reaches it at once.
pub const DEFAULT_HOST_MAX_PROCESSES: u64 = 512;
pub const DEFAULT_HOST_HANG_S: u64 = 10;
pub const DEFAULT_SHUTDOWN_GRACE_S: u64 = 10;
pub const DEFAULT_SESSION_QUEUE_BYTES: usize = 8 * 1024 * 1024;
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "{} is missing (removed while the instance was in use?): put it back. It holds at least {{\"user\": \
         \"…\", \"leader\": \"…\"}}, the leader being one of the seats in desks/.",
        path.display()
    )]
    Gone { path: PathBuf },
    #[error("In {CONFIG_FILE}, {0} is given twice, and only one of them would count: keep one.")]
    Twice(String),
    #[error("{} cannot be read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{CONFIG_FILE} does not parse: {message} at line {line}, column {column}.")]
    Syntax {
        message: String,
        line: usize,
        column: usize,
    },
    #[error(
        "{CONFIG_FILE} is {0}, not an object like {{\"user\": \"you\", \"leader\": \"lead\"}}."
    )]
    NotObject(&'static str),
    #[error(
        "{CONFIG_FILE} has no \"{0}\": it names the User and the Leader, as in {{\"user\": \"you\", \"leader\": \"lead\"}}."
    )]
    Missing(&'static str),
    #[error("In {CONFIG_FILE}, \"{key}\" {problem}.")]
    Bad { key: &'static str, problem: String },
    /// More than one of the above, each said.
    #[error(
        "{CONFIG_FILE} has {} mistakes: {}",
        .0.len(),
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
    )]
    Several(Vec<ConfigError>),
}

impl Config {
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let raw: Value = serde_json::from_str(text).map_err(|e| {
            let (line, column) = trailing_comma_at(text, &e).unwrap_or((e.line(), e.column()));
            ConfigError::Syntax {
                message: config_slip(text, &e).unwrap_or_else(|| syntax_message(&e)),
                line,
                column,
            }
        })?;
        let Value::Object(map) = &raw else {
            return Err(ConfigError::NotObject(json_kind(&raw)));
        };
        // serde keeps the last: the one the person changed may be the first.
        if let Some(key) = key_given_twice(text) {
            return Err(ConfigError::Twice(key));
        }
        // Every mistake is said at once, each with its default meanwhile: a person fixing the first one
        // met the next only at the next start (helper-92).
        let mut faults: Vec<ConfigError> = Vec::new();
        let f = &mut faults;
        let user = kept(f, required_string(map, "user"), String::new());
        let leader = kept(f, required_string(map, "leader"), String::new());
        if let Some(why) = names::why_not(&leader).filter(|_| !leader.is_empty()) {
            f.push(ConfigError::Bad {
                key: "leader",
                problem: format!(
                    "is a seat name, and {leader:?} is not one: {why} ({})",
                    names::RULE
                ),
            });
        }
        let call_timeout = kept_seconds(f, map, "callTimeoutSeconds", DEFAULT_CALL_TIMEOUT_S);
        let import_timeout = kept_seconds(f, map, "importTimeoutSeconds", DEFAULT_IMPORT_TIMEOUT_S);
        let max_answer_bytes = kept_bounded(
            f,
            map,
            "maxAnswerBytes",
            DEFAULT_MAX_ANSWER_BYTES as u64,
            (512, "a tool's description and schema must fit"),
            1 << 30,
        ) as usize;
        let host_max_memory_mb = kept_bounded(
            f,
            map,
            "hostMaxMemoryMB",
            DEFAULT_HOST_MAX_MEMORY_MB,
            (16, "Node needs that much to start"),
            1 << 20,
        );
        let host_max_processes = kept_bounded(
            f,
            map,
            "hostMaxProcesses",
            DEFAULT_HOST_MAX_PROCESSES,
            (32, "Node's own threads take about 16"),
            1 << 20,
        );
        let host_hang = kept_seconds(f, map, "hostHangSeconds", DEFAULT_HOST_HANG_S);
        let shutdown_grace = kept_seconds(f, map, "shutdownGraceSeconds", DEFAULT_SHUTDOWN_GRACE_S);
        let session_queue_bytes = kept_bounded(
            f,
            map,
            "sessionQueueBytes",
            DEFAULT_SESSION_QUEUE_BYTES as u64,
            (1, ""),
            1 << 40,
        ) as usize;
        let max_connections = kept_bounded(
            f,
            map,
            "maxConnections",
            DEFAULT_MAX_CONNECTIONS as u64,
            (1, ""),
            1_000_000,
        ) as usize;
        let host_isolation = match map.get("hostIsolation") {
            None | Some(Value::Null) => Ok(IsolationWanted::Auto),
            Some(Value::String(s)) => {
                IsolationWanted::parse(s).map_err(|problem| ConfigError::Bad {
                    key: "hostIsolation",
                    problem,
                })
            }
            Some(other) => Err(ConfigError::Bad {
                key: "hostIsolation",
                problem: format!(
                    "is {}; it takes \"auto\", \"bwrap\", \"userns\" or \"none\"",
                    json_kind(other)
                ),
            }),
        };
        let host_isolation = kept(f, host_isolation, IsolationWanted::Auto);
        let http = http::parse(map.get("http").unwrap_or(&Value::Null)).map_err(|problem| {
            ConfigError::Bad {
                key: "http",
                problem,
            }
        });
        let http = kept(f, http, None);
        let mut warnings: Vec<String> = map
            .keys()
            .filter_map(|k| {
                // One of "http"'s own written at the top (as the docs' prose names them) was read by nobody.
                // Only names no plugin's own setting would have: `hosts` or `tls` may well be one.
                if matches!(k.as_str(), "maxStreamsPerSeat" | "sessionIdleSeconds") {
                    return Some(format!(
                        "{CONFIG_FILE} has \"{k}\" at its top, which ovai reads only inside \"http\": move it \
                         there, as in \"http\": {{\"{k}\": …}}. (Keys of your own are fine: plugins read them \
                         in context.config.)"
                    ));
                }
                near_miss(k).map(|s| {
                    format!(
                        "{CONFIG_FILE} has \"{k}\", which ovai does not read: did you mean \"{s}\"? (Keys of your own are \
                         fine: plugins read them in context.config.)"
                    )
                })
            })
            .collect();
        let clients = kept(f, clients(map.get("clients")), Vec::new());
        let metrics = kept(f, metrics_listen(map.get("metrics")), None);
        let web = kept(f, web(map.get("web")), None);
        // Two listeners of ours on one address: the second would be refused it at the start, in words
        // that blame another program.
        let mut listens: Vec<(&'static str, std::net::SocketAddr)> = Vec::new();
        if let Some(h) = http.as_ref().filter(|h| h.listen_named) {
            listens.push(("http", h.listen));
        }
        listens.extend(metrics.map(|m| ("metrics", m)));
        listens.extend(web.flatten().map(|w| ("web", w)));
        for (i, (key, addr)) in listens.iter().enumerate() {
            if let Some((other, _)) = listens[..i]
                .iter()
                .find(|(_, a)| a == addr && addr.port() != 0)
            {
                f.push(ConfigError::Bad {
                    key,
                    problem: format!(
                        "listens on {addr}, where \"{other}\" listens too: give each an address of its own"
                    ),
                });
            }
        }
        let call_log = match map.get("callLog") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                f.push(ConfigError::Bad {
                    key: "callLog",
                    problem: format!("is {other}, and it takes true or false"),
                });
                false
            }
        };
        let plugin_env = match map.get("pluginEnv") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) if !s.is_empty() && !s.contains('=') => Ok(s.clone()),
                    other => Err(ConfigError::Bad {
                        key: "pluginEnv",
                        problem: format!(
                            "lists names of environment variables, and {other} is not one"
                        ),
                    }),
                })
                .collect::<Result<_, _>>(),
            Some(other) => Err(ConfigError::Bad {
                key: "pluginEnv",
                problem: format!("is {}, not a list of variable names", json_kind(other)),
            }),
        };
        let plugin_env: Vec<String> = kept(f, plugin_env, Vec::new());
        // ovai's own names are never passed: OVAI_SECRET in the server's environment would be a seat's
        // secret, handed to every plugin.
        let (own, plugin_env): (Vec<String>, Vec<String>) = plugin_env
            .into_iter()
            .partition(|name| name.starts_with("OVAI_"));
        warnings.extend(own.iter().map(|name| {
            format!(
                "{CONFIG_FILE}'s \"pluginEnv\" names {}, one of ovai's own variables, which plugins are never \
                 passed (OVAI_SECRET would hand them a seat's secret); take it out of the list.",
                crate::names::clipped(name, 64)
            )
        }));
        // Read in the process that starts the host (the daemon, or `ovai check`'s own): a name missing
        // there reaches no plugin, and `VAR=x ovai restart` does not change that.
        let plugin_env_unset = plugin_env
            .iter()
            .filter(|name| std::env::var_os(name).is_none())
            .cloned()
            .collect();
        match faults.len() {
            0 => {}
            1 => return Err(faults.remove(0)),
            _ => return Err(ConfigError::Several(faults)),
        }
        Ok(Self {
            user,
            leader,
            clients,
            metrics,
            web,
            call_timeout,
            import_timeout,
            max_answer_bytes,
            host_max_memory_mb,
            host_max_processes,
            host_hang,
            shutdown_grace,
            plugin_env,
            session_queue_bytes,
            max_connections,
            host_isolation,
            call_log,
            http,
            warnings,
            plugin_env_unset,
            raw,
        })
    }

    /// `Leader` or `Worker`: derived from the name, never from anything a session says.
    pub fn role_of(&self, seat: &str) -> Role {
        if seat == self.leader {
            Role::Leader
        } else {
            Role::Worker
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "Leader",
            Role::Worker => "Worker",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a person most often gets wrong in a JSON file edited by hand, said as such where serde's words
/// would not say it: a byte order mark an editor saved, a comment (JSONC is not JSON).
/// Where a trailing comma is: serde places the error at the token after it (the closing brace, often a
/// line further down), and the person looks for the comma.
fn trailing_comma_at(text: &str, e: &serde_json::Error) -> Option<(usize, usize)> {
    if !e.to_string().starts_with("trailing comma") {
        return None;
    }
    let line_start: usize = text
        .split_inclusive('\n')
        .take(e.line().checked_sub(1)?)
        .map(str::len)
        .sum();
    let at = (line_start + e.column().saturating_sub(1)).min(text.len());
    let comma = text.get(..at)?.trim_end().strip_suffix(',')?.len();
    let line = text[..comma].matches('\n').count() + 1;
    let column = comma - text[..comma].rfind('\n').map_or(0, |n| n + 1) + 1;
    Some((line, column))
}

fn config_slip(text: &str, e: &serde_json::Error) -> Option<String> {
    if text.starts_with('\u{feff}') {
        return Some(
            "it starts with a byte order mark (BOM), which JSON does not take: save it as UTF-8 without one"
                .into(),
        );
    }
    let line = text.lines().nth(e.line().checked_sub(1)?)?;
    let from = line.get(e.column().saturating_sub(1)..)?.trim_start();
    (from.starts_with("//") || from.starts_with("/*")).then(|| {
        "a comment, which JSON does not take (openovai.json is plain JSON, not JSONC): remove it".into()
    })
}

/// The first key `text` (JSON that parses) gives twice in one object, if any, with the keys of the objects
/// it is in: `"port" (in "http")`. serde keeps the last of two, in the settings and in a plugin's block.
fn key_given_twice(text: &str) -> Option<String> {
    let mut json = serde_json::Deserializer::from_str(text);
    let mut path = serde::Deserializer::deserialize_any(&mut json, Twice)
        .ok()
        .flatten()?;
    let key = path.remove(0);
    if path.is_empty() {
        return Some(key);
    }
    path.reverse();
    Some(format!("{key} (in {})", path.join(" → ")))
}

/// Walks a JSON value for the first key given twice in one object: the key, then the keys (or array
/// items) it is in, innermost first.
struct Twice;

impl<'de> serde::de::DeserializeSeed<'de> for Twice {
    type Value = Option<Vec<String>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Twice {
    type Value = Option<Vec<String>>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        let mut item = 0;
        while let Some(inner) = seq.next_element_seed(Twice)? {
            item += 1;
            if let (None, Some(mut path)) = (&found, inner) {
                path.push(format!("item {item}"));
                found = Some(path);
            }
        }
        Ok(found)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            let inner = map.next_value_seed(Twice)?;
            let key = format!("{key:?}");
            if found.is_some() {
                continue;
            }
            if let Some(mut path) = inner {
                path.push(key);
                found = Some(path);
            } else if !seen.insert(key.clone()) {
                found = Some(vec![key]);
            }
        }
        Ok(found)
    }
}

pub fn syntax_message(e: &serde_json::Error) -> String {
    // serde_json's Display appends " at line L column C"; the sentence states those itself.
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// What `read` gave, or `fallback` with its fault kept for the one refusal that names them all.
fn kept<T>(faults: &mut Vec<ConfigError>, read: Result<T, ConfigError>, fallback: T) -> T {
    read.unwrap_or_else(|fault| {
        faults.push(fault);
        fallback
    })
}

fn kept_seconds(
    faults: &mut Vec<ConfigError>,
    map: &Map<String, Value>,
    key: &'static str,
    default: u64,
) -> Duration {
    kept(
        faults,
        seconds(map, key, default),
        Duration::from_secs(default),
    )
}

fn kept_bounded(
    faults: &mut Vec<ConfigError>,
    map: &Map<String, Value>,
    key: &'static str,
    default: u64,
    least: (u64, &str),
    most: u64,
) -> u64 {
    kept(faults, bounded(map, key, default, least, most), default)
}

fn required_string(map: &Map<String, Value>, key: &'static str) -> Result<String, ConfigError> {
    match map.get(key) {
        None | Some(Value::Null) => Err(ConfigError::Missing(key)),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(ConfigError::Bad {
            key,
            problem: "is empty".into(),
        }),
        Some(other) => Err(ConfigError::Bad {
            key,
            problem: format!("is {}, not a string", json_kind(other)),
        }),
    }
}

fn positive_int(
    map: &Map<String, Value>,
    key: &'static str,
    default: u64,
) -> Result<u64, ConfigError> {
    bounded(map, key, default, (1, ""), u64::MAX)
}

/// A whole-number setting from `least` (with why, where it is more than 1) to `most`: a value that
/// cannot work is refused at the read, naming the bound, not met later as a host that cannot start.
fn bounded(
    map: &Map<String, Value>,
    key: &'static str,
    default: u64,
    (least, why): (u64, &str),
    most: u64,
) -> Result<u64, ConfigError> {
    let bad = |problem: String| Err(ConfigError::Bad { key, problem });
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if n < least && why.is_empty() => {
                bad(format!("is {v}, and it wants a whole number above 0"))
            }
            Some(n) if n < least => bad(format!(
                "is {n}, less than {least}, the least it takes ({why})"
            )),
            Some(n) if n > most => bad(format!("is {n}, more than {most}, the most it takes")),
            Some(n) => Ok(n),
            // Past what any setting could take (and what a u64 holds): serde keeps it as a float only.
            None if v
                .as_f64()
                .is_some_and(|f| f >= 18_446_744_073_709_551_615.0) =>
            {
                bad("is a number larger than any setting here takes".into())
            }
            None if v.as_f64().is_some_and(|f| f.fract() == 0.0 && f > 0.0) => bad(format!(
                "is {v}: write it as a whole number, without a decimal point or an exponent"
            )),
            None => bad(format!("is {v}, and it wants a whole number above 0")),
        },
    }
}

/// The longest any of the `…Seconds` settings may be: time is added to them (a deadline, a grace), and
/// a number of seconds near 2^64 overflowed every clock the daemon keeps.
const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// A `…Seconds` setting: a whole number from 1 to a year.
fn seconds(
    map: &Map<String, Value>,
    key: &'static str,
    default: u64,
) -> Result<Duration, ConfigError> {
    let n = positive_int(map, key, default)?;
    if n > MAX_SECONDS {
        return Err(ConfigError::Bad {
            key,
            problem: format!("is {n}, more than a year ({MAX_SECONDS} s), the most it takes"),
        });
    }
    Ok(Duration::from_secs(n))
}

/// "a number", "an array"...: how a JSON value is named in a sentence.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "at least 1 bytes shorter" (helper-101).
    #[test]
    fn a_socket_one_byte_too_long_says_one_byte() {
        let socket_part = "/.ovai/ovai.sock".len();
        // A root whose socket is 107 bytes, the most a Unix socket takes.
        let root = format!("/{}", "r".repeat(107 - socket_part - 1));
        assert!(
            Instance::at(root.clone().into())
                .socket_too_long()
                .is_none()
        );
        let said = Instance::at(format!("{root}x").into())
            .socket_too_long()
            .unwrap();
        assert!(said.ends_with("at least 1 byte shorter"), "{said}");
        let said = Instance::at(format!("{root}xy").into())
            .socket_too_long()
            .unwrap();
        assert!(said.ends_with("at least 2 bytes shorter"), "{said}");
    }

    #[test]
    fn parses_defaults() {
        let c = Config::parse(r#"{"user":"Ann","leader":"lead"}"#).unwrap();
        assert_eq!(c.user, "Ann");
        assert_eq!(c.role_of("lead"), Role::Leader);
        assert_eq!(c.role_of("w1"), Role::Worker);
        assert_eq!(c.call_timeout, Duration::from_secs(60));
        assert_eq!(c.max_answer_bytes, 1 << 20);
    }

    /// Every mistake is named in one refusal: fixed one at a time, the next was met only at the next
    /// start (helper-92).
    #[test]
    fn every_mistake_is_named_at_once() {
        let e = Config::parse(
            r#"{"user":"Ann","leader":"lead","callTimeoutSeconds":0,"callLog":"yes","hostIsolation":7}"#,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "openovai.json has 3 mistakes: In openovai.json, \"callTimeoutSeconds\" is 0, and it wants a whole \
             number above 0. In openovai.json, \"hostIsolation\" is a number; it takes \"auto\", \"bwrap\", \
             \"userns\" or \"none\". In openovai.json, \"callLog\" is \"yes\", and it takes true or false."
        );
        // One alone is said as before.
        let e = Config::parse(r#"{"user":"Ann","leader":"lead","callLog":1}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "In openovai.json, \"callLog\" is 1, and it takes true or false."
        );
    }

    #[test]
    fn syntax_error_names_line_and_column() {
        let e = Config::parse("{\n  \"user\": \"a\"\n  \"leader\": \"b\"}").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("line 3, column 3"), "{s}");
        assert!(!s.contains("column 3 at line"), "{s}");
    }

    /// What hand-edited JSON most often gets wrong is said as such: a BOM, a comment, a number past
    /// every setting (which serde reads as a float, and was called one with an exponent).
    #[test]
    fn a_bom_a_comment_and_a_huge_number_are_named() {
        let said = |text: &str| Config::parse(text).unwrap_err().to_string();
        assert!(
            said("\u{feff}{\"user\":\"a\",\"leader\":\"b\"}")
                .contains("it starts with a byte order mark (BOM), which JSON does not take"),
        );
        for comment in ["// who", "/* who */"] {
            let s = said(&format!(
                "{{\n  \"user\": \"a\", {comment}\n  \"leader\": \"b\"\n}}"
            ));
            assert!(
                s.contains(
                    "a comment, which JSON does not take (openovai.json is plain JSON, not JSONC)"
                ),
                "{s}"
            );
        }
        assert!(said(r#"{"user":"a","leader":"b","leader":"c"}"#).contains(
            "In openovai.json, \"leader\" is given twice, and only one of them would count: keep one."
        ));
        let s = said(r#"{"user":"a","leader":"b","http":{"port":1,"bind":"x","port":2}}"#);
        assert!(s.contains("\"port\" (in \"http\") is given twice"), "{s}");
        let s = said(
            r#"{"user":"a","leader":"b","plugins":{"freeze":{"lists":[{"a":1},{"b":1,"b":2}]}}}"#,
        );
        assert!(
            s.contains("\"b\" (in \"plugins\" → \"freeze\" → \"lists\" → item 2) is given twice"),
            "{s}"
        );
        let s = said(r#"{"user":"a","leader":"b","callTimeoutSeconds":99999999999999999999}"#);
        assert!(
            s.contains("\"callTimeoutSeconds\" is a number larger than any setting here takes"),
            "{s}"
        );
    }

    #[test]
    fn leader_must_be_a_seat_name() {
        let e = Config::parse(r#"{"user":"Ann","leader":"the_lead"}"#).unwrap_err();
        assert!(e.to_string().contains("underscore"), "{e}");
    }

    /// `sessionIdleSeconds` at the top was read by nobody, with no word said (helper-103).
    #[test]
    fn an_http_key_at_the_top_is_said_to_belong_inside() {
        let c = Config::parse(r#"{"user":"a","leader":"b","sessionIdleSeconds":60}"#).unwrap();
        assert_eq!(
            c.warnings,
            vec![
                "openovai.json has \"sessionIdleSeconds\" at its top, which ovai reads only inside \"http\": \
                 move it there, as in \"http\": {\"sessionIdleSeconds\": …}. (Keys of your own are fine: \
                 plugins read them in context.config.)"
            ]
        );
        // A plugin's own `hosts` or `tls` is its own (helper-107).
        let c = Config::parse(r#"{"user":"a","leader":"b","hosts":["x"],"tls":true}"#).unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn near_misses_of_settings_are_named_and_own_keys_are_not() {
        let c = Config::parse(
            r#"{"user":"a","leader":"b","callTimeoutSecs":5,"CallTimeoutSeconds":5,"ciUrl":"x","team":"y"}"#,
        )
        .unwrap();
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(c.warnings[0].contains(
            "\"callTimeoutSecs\", which ovai does not read: did you mean \"callTimeoutSeconds\""
        ));
        assert!(c.warnings[1].contains("\"CallTimeoutSeconds\""));
    }

    #[test]
    fn sizes_past_what_works_are_refused_naming_the_bound() {
        let said = |key: &str, v: &str| {
            Config::parse(&format!(r#"{{"user":"a","leader":"b","{key}":{v}}}"#))
                .map_or_else(|e| e.to_string(), |_| "taken".into())
        };
        // A host of 1 MB ended at its start with SIGTRAP and no word naming the setting.
        assert!(
            said("hostMaxMemoryMB", "1").contains(
                "\"hostMaxMemoryMB\" is 1, less than 16, the least it takes (Node needs that much to start)"
            ),
            "{}",
            said("hostMaxMemoryMB", "1")
        );
        assert!(said("hostMaxProcesses", "12").contains("less than 32, the least it takes"));
        assert!(said("maxAnswerBytes", "10").contains("less than 512, the least it takes"));
        assert!(
            said("maxConnections", "100000000000")
                .contains("is 100000000000, more than 1000000, the most it takes")
        );
        // A whole number written as a decimal or an exponent is said so, not called "not above 0".
        assert!(
            said("maxConnections", "1e12")
                .contains("is 1000000000000.0: write it as a whole number"),
            "{}",
            said("maxConnections", "1e12")
        );
        assert_eq!(said("maxAnswerBytes", "512"), "taken");
        assert_eq!(said("hostMaxMemoryMB", "16"), "taken");
    }

    #[test]
    fn a_trailing_comma_is_placed_where_it_is() {
        let e = Config::parse("{\n  \"user\": \"a\",\n  \"leader\": \"b\",\n}\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("trailing comma at line 3, column 16."),
            "{e}"
        );
    }

    #[test]
    fn bad_numbers_are_named() {
        let e = Config::parse(r#"{"user":"a","leader":"b","callTimeoutSeconds":-1}"#).unwrap_err();
        assert!(e.to_string().contains("callTimeoutSeconds"), "{e}");
    }

    #[test]
    fn the_page_and_the_metrics_listen_where_they_can() {
        for (settings, said) in [
            (
                r#""metrics":{"listen":19464}"#,
                "\"metrics\" has \"listen\": 19464, and it takes an address as a string",
            ),
            (
                r#""metrics":{"listen":"127.0.0.1:9464"},"web":{"listen":"127.0.0.1:9464"}"#,
                "\"web\" listens on 127.0.0.1:9464, where \"metrics\" listens too",
            ),
            (
                r#""http":{"listen":"127.0.0.1:7777"},"metrics":{"listen":"127.0.0.1:7777"}"#,
                "\"metrics\" listens on 127.0.0.1:7777, where \"http\" listens too",
            ),
        ] {
            let e =
                Config::parse(&format!(r#"{{"user":"a","leader":"b",{settings}}}"#)).unwrap_err();
            assert!(e.to_string().contains(said), "{settings}: {e}");
        }
    }

    #[test]
    fn a_number_of_seconds_past_a_year_is_refused_in_words() {
        for key in [
            "callTimeoutSeconds",
            "importTimeoutSeconds",
            "hostHangSeconds",
            "shutdownGraceSeconds",
        ] {
            let at_most =
                Config::parse(&format!(r#"{{"user":"a","leader":"b","{key}":31536000}}"#));
            assert!(at_most.is_ok(), "{key}: a year is taken");
            // Near 2^64 seconds, every deadline made from it overflowed (a session's first call panicked).
            let e = Config::parse(&format!(
                r#"{{"user":"a","leader":"b","{key}":18446744073709551615}}"#
            ))
            .unwrap_err();
            assert!(
                e.to_string().contains(&format!(
                    "\"{key}\" is 18446744073709551615, more than a year (31536000 s), the most it takes"
                )),
                "{e}"
            );
        }
    }
}
