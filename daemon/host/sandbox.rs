//! The box the plugin host lives in, on Linux with bubblewrap: its own PID namespace (it cannot signal the
//! daemon, the bridge or anything else outside, and every process it starts, detached or not, ends when
//! it ends) and its own view of the files, in which the seat secrets are not readable (`.ovai/` is an
//! empty folder but for the host's own script; each desk's `.mcp.json` cannot be opened), and what runs
//! outside the box later (the ovai binary, Claude Code's settings, the user's units) is read-only. The rest
//! stays: the network, the instance's other files, temporary files. As root, every capability is dropped
//! in the box, or it could unmount a mask.
//!
//! `hostIsolation` chooses: `"auto"` takes bubblewrap's box where it works, else ovai's own (`userns`, from
//! Linux namespaces, where the kernel allows them), and says plainly when there is none; `"bwrap"` and
//! `"userns"` insist on one; `"none"` runs the host in a process group of its own, as on macOS.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What `hostIsolation` in openovai.json asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    Auto,
    Bwrap,
    Userns,
    None,
}

impl Wanted {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Wanted::Auto),
            "bwrap" => Ok(Wanted::Bwrap),
            "userns" => Ok(Wanted::Userns),
            "none" => Ok(Wanted::None),
            other => Err(format!(
                "is {other:?}; it takes \"auto\", \"bwrap\", \"userns\" or \"none\""
            )),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Wanted::Auto => "auto",
            Wanted::Bwrap => "bwrap",
            Wanted::Userns => "userns",
            Wanted::None => "none",
        }
    }
}

/// The isolation a host gets, decided once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// A bubblewrap box.
    Bwrap { bwrap: PathBuf, unshare_user: bool },
    /// ovai's own box (`ovai host-box`), from Linux namespaces.
    Userns { exe: PathBuf },
    /// A process group of its own, and no more: why there is no box.
    None { why: String },
}

#[derive(Debug, thiserror::Error)]
#[error(
    "hostIsolation is \"{wanted}\" in openovai.json, and {why}. {what_to_do}",
    wanted = .wanted.as_str(),
    what_to_do = match .wanted {
        Wanted::Bwrap => "Install bubblewrap (apt-get install bubblewrap), or set hostIsolation to \"auto\", \"userns\" or \"none\".",
        _ => "Set hostIsolation to \"auto\" (bubblewrap where installed, else this box where the kernel allows it) or \"none\".",
    }
)]
pub struct NoBox {
    wanted: Wanted,
    why: String,
}

/// The isolation `wanted` gives on this machine.
pub fn decide(wanted: Wanted) -> Result<Isolation, NoBox> {
    let no_box = |why: &String| NoBox {
        wanted,
        why: why.clone(),
    };
    match wanted {
        Wanted::None => Ok(Isolation::None {
            why: "hostIsolation is \"none\" in openovai.json".into(),
        }),
        // ovai's own box is tried only where bubblewrap's cannot be made.
        Wanted::Auto => Ok(match probe() {
            Ok(bwrap) => bwrap.clone(),
            Err(no_bwrap) => match probe_userns() {
                Ok(own) => own.clone(),
                Err(no_userns) => Isolation::None {
                    why: format!("{no_bwrap}, and {no_userns}"),
                },
            },
        }),
        Wanted::Bwrap => probe().clone().map_err(|why| no_box(&why)),
        Wanted::Userns => probe_userns().clone().map_err(|why| no_box(&why)),
    }
}

/// A fresh folder under the temporary directory, for the box's trial.
fn tempfile_dir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("ovai-box-trial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Whether ovai's own box can be made here: tried once, the way the host gets it.
fn probe_userns() -> &'static Result<Isolation, String> {
    static PROBE: OnceLock<Result<Isolation, String>> = OnceLock::new();
    PROBE.get_or_init(|| {
        if !cfg!(target_os = "linux") {
            return Err("user namespaces exist on Linux only".into());
        }
        let exe = std::env::current_exe()
            .map_err(|e| format!("ovai could not find its own binary for its box ({e})"))?;
        // Tried with every kind of mount the host's box makes: a hidden folder with a file kept, a
        // masked file, a read-only path.
        let trial = tempfile_dir().map_err(|e| format!("ovai could not try its own box ({e})"))?;
        let hidden = trial.join("hidden");
        let kept = hidden.join("kept");
        let masked = trial.join("masked");
        let made = std::fs::create_dir_all(&hidden)
            .and_then(|()| std::fs::write(&kept, "kept"))
            .and_then(|()| std::fs::write(&masked, "masked"));
        if let Err(e) = made {
            return Err(format!("ovai could not try its own box ({e})"));
        }
        let tried = std::process::Command::new(&exe)
            .arg("host-box")
            .arg("--writable")
            .arg(&trial)
            .arg("--hide")
            .arg(&hidden)
            .arg("--keep")
            .arg(&kept)
            .arg("--mask")
            .arg(&masked)
            .arg("--read-only")
            .arg(&exe)
            .arg("--")
            .arg(&exe)
            .arg("version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output();
        let _ = std::fs::remove_dir_all(&trial);
        match tried {
            Ok(out) if out.status.success() => Ok(Isolation::Userns { exe }),
            Ok(out) => Err(format!(
                "ovai's own box cannot be made here ({})",
                String::from_utf8_lossy(&out.stderr)
                    .trim()
                    .trim_start_matches("ovai host-box: ")
            )),
            Err(e) => Err(format!("ovai's own box could not be tried ({e})")),
        }
    })
}

/// Whether bubblewrap can make the box here: tried once, with the flags the host gets.
fn probe() -> &'static Result<Isolation, String> {
    static PROBE: OnceLock<Result<Isolation, String>> = OnceLock::new();
    PROBE.get_or_init(|| {
        if !cfg!(target_os = "linux") {
            return Err("bubblewrap boxes exist on Linux only".into());
        }
        let Some(bwrap) = find_on_path("bwrap") else {
            return Err("bubblewrap (bwrap) is not installed".into());
        };
        let unshare_user = !nix::unistd::geteuid().is_root();
        let mut cmd = std::process::Command::new(&bwrap);
        cmd.args(base_args(unshare_user)).arg("true");
        match cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
        {
            Ok(out) if out.status.success() => Ok(Isolation::Bwrap {
                bwrap,
                unshare_user,
            }),
            Ok(out) => Err(format!(
                "bubblewrap is installed but cannot make a box here ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!("bubblewrap could not be run ({e})")),
        }
    })
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn base_args(unshare_user: bool) -> Vec<&'static str> {
    // --new-session: no controlling terminal in the box, so no keystrokes pushed into the operator's shell.
    let mut args = vec!["--unshare-pid", "--die-with-parent", "--new-session"];
    if unshare_user {
        args.push("--unshare-user");
    }
    args.extend([
        "--cap-drop",
        "ALL",
        // Everything read-only; the instance and the temporary folders are bound back writable below.
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        // The kernel's settings are not the plugins' (uid 0 without capabilities could still write them).
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--dev",
        "/dev",
    ]);
    args
}

/// What ovai's own box hides and keeps: `ovai host-box`'s arguments, which `host::userns` carries out
/// (on Linux; declared here so the command line is the same everywhere).
#[derive(Debug, Default, clap::Args)]
pub struct BoxPlan {
    /// Where the box may write (the instance, the temporary folders); everything else is read-only.
    /// Each is bound onto itself, so none can be renamed from inside.
    #[arg(long)]
    pub writable: Vec<PathBuf>,
    /// A folder seen empty and read-only (`.ovai/`)…
    #[arg(long)]
    pub hide: Option<PathBuf>,
    /// …but for these files in it, read-only (the host's script).
    #[arg(long)]
    pub keep: Vec<PathBuf>,
    /// Files that cannot be opened (`desks/*/.mcp.json`).
    #[arg(long)]
    pub mask: Vec<PathBuf>,
    /// Paths that stay readable but cannot be changed.
    #[arg(long = "read-only")]
    pub read_only: Vec<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Where the secrets are, so the box can hide them.
#[derive(Debug, Clone)]
pub struct Secrets {
    /// `.ovai/`: the control secret, the seat hashes, the socket. Hidden whole but for the host's script.
    pub private_dir: PathBuf,
    /// `desks/`: each desk's `.mcp.json` holds a seat's secret.
    pub desks_dir: PathBuf,
    /// Other files no plugin may read: the HTTP endpoint's TLS key.
    pub files: Vec<PathBuf>,
    /// The instance's root: writable in the box, with the temporary folders; the rest is read-only.
    pub root: PathBuf,
}

impl Secrets {
    /// Where plugins may write: the instance (but its desks, below) and the temporary folders.
    fn writable(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.root.clone(), PathBuf::from("/tmp")];
        if let Some(tmp) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
            paths.push(PathBuf::from(tmp));
        }
        paths.retain(|p| p.is_dir());
        paths.dedup();
        paths
    }

    /// Every secret file there is now: each desk's `.mcp.json` and the others named; and the service
    /// managers' sockets (systemd's and D-Bus's), through which a process could start another outside
    /// the box.
    fn masked(&self) -> Vec<PathBuf> {
        let mut files = desk_secrets(&self.desks_dir);
        files.extend(self.files.iter().filter(|f| f.is_file()).cloned());
        let uid = nix::unistd::getuid();
        files.extend(
            [
                "/run/dbus/system_bus_socket".to_string(),
                "/run/systemd/private".to_string(),
                "/run/systemd/io.systemd.ManagedOOM".to_string(),
                format!("/run/user/{uid}/bus"),
                format!("/run/user/{uid}/systemd/private"),
            ]
            .into_iter()
            .map(PathBuf::from)
            .filter(|p| p.exists()),
        );
        files
    }
}

impl Isolation {
    /// The program and arguments that start `node ARGS…` in this isolation, hiding `secrets` as they are
    /// now (a seat added later is hidden from the next host: the daemon replaces the host when seats
    /// change).
    pub fn command(
        &self,
        node: &Path,
        node_args: &[String],
        shim: &Path,
        secrets: &Secrets,
    ) -> (PathBuf, Vec<String>) {
        match self {
            Isolation::None { .. } => (node.to_path_buf(), node_args.to_vec()),
            Isolation::Userns { exe } => {
                let mut args: Vec<String> = vec!["host-box".into()];
                let path = |flag: &str, p: &Path| [flag.to_string(), p.display().to_string()];
                for p in secrets.writable() {
                    args.extend(path("--writable", &p));
                }
                if secrets.desks_dir.is_dir() {
                    args.extend(path("--read-only", &secrets.desks_dir));
                }
                args.extend(path("--hide", &secrets.private_dir));
                args.extend(path("--keep", shim));
                for file in secrets.masked() {
                    args.extend(path("--mask", &file));
                }
                for p in read_only(secrets) {
                    args.extend(path("--read-only", &p));
                }
                args.push("--".into());
                args.push(node.display().to_string());
                args.extend(node_args.iter().cloned());
                (exe.clone(), args)
            }
            Isolation::Bwrap {
                bwrap,
                unshare_user,
            } => {
                let mut args: Vec<String> = base_args(*unshare_user)
                    .into_iter()
                    .map(String::from)
                    .collect();
                for p in secrets.writable() {
                    let p = p.display().to_string();
                    args.extend(["--bind".into(), p.clone(), p]);
                }
                // The desks, whole, before the masks inside them (bubblewrap binds from the outside view):
                // sessions run there outside the box, and read what is in them as settings, instructions
                // (CLAUDE.md) or hooks (`.git/`), existing yet or not. A mount point, `desks/` cannot be
                // renamed to put another in its place either.
                if secrets.desks_dir.is_dir() {
                    let d = secrets.desks_dir.display().to_string();
                    args.extend(["--ro-bind".into(), d.clone(), d]);
                }
                let private = secrets.private_dir.display().to_string();
                args.extend(["--tmpfs".into(), private]);
                let shim = shim.display().to_string();
                args.extend(["--ro-bind".into(), shim.clone(), shim]);
                for file in secrets.masked() {
                    args.extend([
                        "--ro-bind".into(),
                        "/dev/null".into(),
                        file.display().to_string(),
                    ]);
                }
                // What runs outside the box later must not be rewritten from inside it: the ovai binary
                // (a session's bridge, the service), the desks' Claude Code settings (their hooks run in
                // the sessions), Claude Code's own settings, and the user's service units.
                for path in read_only(secrets) {
                    let p = path.display().to_string();
                    args.extend(["--ro-bind".into(), p.clone(), p]);
                }
                args.push("--".into());
                args.push(node.display().to_string());
                args.extend(node_args.iter().cloned());
                (bwrap.clone(), args)
            }
        }
    }

    /// In words, for runtime.log, `ovai status` and `index`.
    pub fn describe(&self) -> String {
        match self {
            Isolation::Bwrap { .. } => "The plugin host runs in a bubblewrap box: its own process namespace (it cannot \
                signal the daemon or anything outside, and everything it starts ends with it) and a view of the \
                files without the seats' secrets (.ovai/ and desks/*/.mcp.json), in which the ovai binary and \
                the Claude Code and service settings cannot be changed. Plugins keep the network and the \
                instance's other files."
                .into(),
            Isolation::Userns { .. } => "The plugin host runs in a box of ovai's own, made from Linux namespaces \
                (bubblewrap is not used): its own process namespace (it cannot signal the daemon or anything \
                outside, and everything it starts ends with it) and a view of the files without the seats' \
                secrets (.ovai/ and desks/*/.mcp.json), in which the ovai binary and the Claude Code and service \
                settings cannot be changed; no capabilities. Plugins keep the network and the instance's other \
                files."
                .into(),
            Isolation::None { why } => format!(
                "The plugin host runs without a box ({why}): only a process group of its own, so a plugin can \
                 signal the daemon, leave processes behind in a session of their own, and read the seats' \
                 secrets (desks/*/.mcp.json) and the control secret. Install bubblewrap (apt-get install \
                 bubblewrap) and set hostIsolation to \"auto\" to box it."
            ),
        }
    }

    pub fn is_boxed(&self) -> bool {
        !matches!(self, Isolation::None { .. })
    }
}

/// What a plugin may read but never change, where it exists now: the ovai binary's folder (a file bound
/// alone is undone by renaming the folder around it), openovai.json (its box setting), the desks, the
/// instance's `.git/` (hooks), and the user's Claude Code and service settings.
fn read_only(secrets: &Secrets) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        match exe.parent() {
            // Its own folder, unless that is the instance itself (or holds it): then the file.
            Some(dir) if !secrets.root.starts_with(dir) && dir != Path::new("/") => {
                paths.push(dir.to_path_buf())
            }
            _ => paths.push(exe.clone()),
        }
    }
    paths.push(secrets.root.join(crate::instance::CONFIG_FILE));
    // Git runs what a repository's hooks and config name, outside the box, at the next commit.
    paths.push(secrets.root.join(".git"));

    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        paths.extend([
            home.join(".claude"),
            home.join(".claude.json"),
            home.join(".config/systemd"),
        ]);
    }
    paths.retain(|p| p.exists());
    paths.sort();
    paths
}

/// Every `desks/*/.mcp.json` there is now.
fn desk_secrets(desks: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(desks)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(".mcp.json"))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}
