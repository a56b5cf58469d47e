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

use crate::instance::IsolationWanted;

/// Where bubblewrap reads the box's seccomp filter (`host::seccomp`), beside the protocol's fds 3 to 5.
pub const SECCOMP_FD: i32 = 6;

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
        IsolationWanted::Bwrap => "Install bubblewrap (apt-get install bubblewrap), or set hostIsolation to \"auto\", \"userns\" or \"none\".",
        _ => "Set hostIsolation to \"auto\" (bubblewrap where installed, else this box where the kernel allows it) or \"none\".",
    }
)]
pub struct NoBox {
    wanted: IsolationWanted,
    why: String,
}

/// The isolation `wanted` gives on this machine.
pub fn decide(wanted: IsolationWanted) -> Result<Isolation, NoBox> {
    let no_box = |why: &String| NoBox {
        wanted,
        why: why.clone(),
    };
    match wanted {
        IsolationWanted::None => Ok(Isolation::None {
            why: "hostIsolation is \"none\" in openovai.json".into(),
        }),
        // ovai's own box is tried only where bubblewrap's cannot be made.
        IsolationWanted::Auto => Ok(match probe() {
            Ok(bwrap) => bwrap.clone(),
            Err(no_bwrap) => match probe_userns() {
                Ok(own) => own.clone(),
                Err(no_userns) => Isolation::None {
                    why: format!("{no_bwrap}, and {no_userns}"),
                },
            },
        }),
        IsolationWanted::Bwrap => probe().clone().map_err(|why| no_box(&why)),
        IsolationWanted::Userns => probe_userns().clone().map_err(|why| no_box(&why)),
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
        // Tried with every kind of mount the host's box makes: a temporary folder of its own with a root
        // below it brought back, a hidden folder with a file kept, a masked file, a read-only path.
        let trial = tempfile_dir().map_err(|e| format!("ovai could not try its own box ({e})"))?;
        let root = trial.join("root");
        let hidden = root.join("hidden");
        let kept = hidden.join("kept");
        let masked = root.join("masked");
        let made = std::fs::create_dir_all(&hidden)
            .and_then(|()| std::fs::write(&kept, "kept"))
            .and_then(|()| std::fs::write(&masked, "masked"));
        if let Err(e) = made {
            return Err(format!("ovai could not try its own box ({e})"));
        }
        let tried = std::process::Command::new(&exe)
            .arg("host-box")
            .arg("--private")
            .arg(&trial)
            .arg("--frozen")
            .arg(&root)
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
    // --unshare-ipc: System V shared memory made in the box outlived the host, past its memory bound,
    // and reached other programs' queues and segments.
    let mut args = vec![
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
    ];
    if unshare_user {
        args.push("--unshare-user");
    }
    args.extend([
        "--cap-drop",
        "ALL",
        // Everything read-only; the instance's folders are bound back writable below, and the temporary
        // folders are the box's own.
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
    /// The temporary folders, each the box's own: an empty folder in its memory over each, where it may
    /// write; everything else is read-only. What is below one and in the box is bound back into it.
    #[arg(long)]
    pub private: Vec<PathBuf>,
    /// What is brought into the box read-only below a private folder (Node, a plugins/ that is a link
    /// there): each `--bring` at its place, from the `--bring-from` of the same rank.
    #[arg(long)]
    pub bring: Vec<PathBuf>,
    #[arg(long = "bring-from")]
    pub bring_from: Vec<PathBuf>,
    /// A folder bound read-only onto itself after those (the instance's root: nothing can be added,
    /// renamed or removed right in it)…
    #[arg(long)]
    pub frozen: Option<PathBuf>,
    /// …and the folders in it where the box may write all the same (the instance's own folders).
    #[arg(long = "writable-inside")]
    pub writable_inside: Vec<PathBuf>,
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
    /// Folders a plugin may read but never change: the TLS files' (a key swapped there would be served
    /// at the next start).
    pub fixed: Vec<PathBuf>,
    /// The instance's root: its own entries are read-only in the box, its folders writable (but those
    /// above), with the temporary folders; the rest of the machine is read-only.
    pub root: PathBuf,
}

/// What coding agents read, as settings, instructions or hooks, in every folder above the one they start
/// in (a desk): at the instance's root these stay read-only in the box, there or not. The root's own
/// entries are read-only there, so none of them can be made; of those that are folders, none is bound
/// writable.
pub const READ_BY_CLIENTS: &[&str] = &[
    ".git",
    ".claude",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "AGENTS.md",
    "AGENTS.override.md",
    "GEMINI.md",
    ".gemini",
    ".codex",
    "opencode.json",
    "opencode.jsonc",
    ".opencode",
    ".mcp.json",
];

impl Secrets {
    /// Where plugins/ leads, when it is a link to a folder below a temporary folder: the box brings it in
    /// read-only (its /tmp is its own).
    pub fn plugins_brought_read_only(&self) -> Option<PathBuf> {
        let plugins = self.root.join("plugins");
        if !plugins.is_symlink() {
            return None;
        }
        let real = plugins.canonicalize().ok()?;
        (self.temp_dirs().iter().any(|t| real.starts_with(t)) && !real.starts_with(&self.root))
            .then_some(real)
    }

    /// Of `files` in `dir`, those a box made for these secrets leaves out, with where each leads: links
    /// to a file below a temporary folder, which the box has its own of, in neither the instance nor a
    /// plugins/ that is a link there (which is brought in). Only links are followed: a file that is none
    /// is where its folder is.
    pub fn links_out_of_the_box<'a>(
        &self,
        dir: &Path,
        files: impl Iterator<Item = &'a str>,
    ) -> std::collections::HashMap<String, PathBuf> {
        let temp = self.temp_dirs();
        let plugins = self.root.join("plugins").canonicalize().ok();
        files
            .filter(|file| {
                std::fs::symlink_metadata(dir.join(file)).is_ok_and(|m| m.file_type().is_symlink())
            })
            .filter_map(|file| Some((file.to_string(), dir.join(file).canonicalize().ok()?)))
            .filter(|(_, real)| {
                temp.iter().any(|t| real.starts_with(t))
                    && !real.starts_with(&self.root)
                    && !plugins.as_ref().is_some_and(|p| real.starts_with(p))
            })
            .collect()
    }

    /// The temporary folders, each the box's own (one inside the instance is its folders' to say). Shared,
    /// they would hold other programs' sockets and files, and with the instance below one, the folders
    /// above the root: a plugin could rename one and put a root of its own there, or write a CLAUDE.md
    /// above the desks.
    fn temp_dirs(&self) -> Vec<PathBuf> {
        let mut paths = vec![PathBuf::from("/tmp")];
        if let Some(tmp) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
            paths.push(PathBuf::from(tmp));
        }
        paths.retain(|p| p.is_dir() && !p.starts_with(&self.root));
        paths.dedup();
        paths
    }

    /// The instance's folders a plugin may write in: each folder right in the root as the host starts
    /// (not a link, which is followed where it leads), but `.ovai/`, `desks/`, those coding agents read,
    /// and those `kept` read-only (the binary's, the TLS files').
    fn writable_in_root(&self, kept: &[PathBuf]) -> Vec<PathBuf> {
        let private = self.private_dir.file_name();
        let desks = self.desks_dir.file_name();
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| {
                let name = e.file_name();
                Some(name.as_os_str()) != private
                    && Some(name.as_os_str()) != desks
                    && !READ_BY_CLIENTS.iter().any(|n| name == *n)
            })
            .map(|e| e.path())
            .filter(|p| !kept.iter().any(|k| k == p || p.starts_with(k)))
            .collect();
        dirs.sort();
        dirs
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
        let private = secrets.temp_dirs();
        // What is below a private folder and not in the instance is not in the box: nothing to keep there.
        let in_box =
            |p: &PathBuf| p.starts_with(&secrets.root) || !private.iter().any(|t| p.starts_with(t));
        let kept: Vec<PathBuf> = read_only(secrets).into_iter().filter(in_box).collect();
        let masked = secrets.masked();
        let bring = brought(node, secrets, &private);
        match self {
            Isolation::None { .. } => (node.to_path_buf(), node_args.to_vec()),
            Isolation::Userns { exe } => {
                let mut args: Vec<String> = vec!["host-box".into()];
                let path = |flag: &str, p: &Path| [flag.to_string(), p.display().to_string()];
                for p in &private {
                    args.extend(path("--private", p));
                }
                for (from, to) in &bring {
                    args.extend(path("--bring", to));
                    args.extend(path("--bring-from", from));
                }
                args.extend(path("--frozen", &secrets.root));
                for p in secrets.writable_in_root(&kept) {
                    args.extend(path("--writable-inside", &p));
                }
                if secrets.desks_dir.is_dir() {
                    args.extend(path("--read-only", &secrets.desks_dir));
                }
                args.extend(path("--hide", &secrets.private_dir));
                args.extend(path("--keep", shim));
                for file in &masked {
                    args.extend(path("--mask", file));
                }
                for p in &kept {
                    args.extend(path("--read-only", p));
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
                let bind = |args: &mut Vec<String>, how: &str, p: &Path| {
                    let p = p.display().to_string();
                    args.extend([how.to_string(), p.clone(), p]);
                };
                for p in &private {
                    args.extend(["--tmpfs".into(), p.display().to_string()]);
                }
                for (from, to) in &bring {
                    args.extend([
                        "--ro-bind".into(),
                        from.display().to_string(),
                        to.display().to_string(),
                    ]);
                }
                // The root's own entries read-only, so that nothing can be added there (what coding
                // agents read in every folder above a desk among it), its own folders writable again.
                bind(&mut args, "--ro-bind", &secrets.root);
                for p in secrets.writable_in_root(&kept) {
                    bind(&mut args, "--bind", &p);
                }
                // The desks, whole, before the masks inside them (bubblewrap binds from the outside view):
                // sessions run there outside the box, and read what is in them as settings, instructions
                // (CLAUDE.md) or hooks (`.git/`), existing yet or not. A mount point, `desks/` cannot be
                // renamed to put another in its place either.
                if secrets.desks_dir.is_dir() {
                    bind(&mut args, "--ro-bind", &secrets.desks_dir);
                }
                // What runs outside the box later must not be rewritten from inside it: the ovai binary
                // (a session's bridge, the service), Claude Code's own settings, the user's service units,
                // the TLS files. Bound before the masks: a bind from the outside view would undo one.
                for p in &kept {
                    bind(&mut args, "--ro-bind", p);
                }
                args.extend(["--tmpfs".into(), secrets.private_dir.display().to_string()]);
                bind(&mut args, "--ro-bind", shim);
                for file in &masked {
                    args.extend([
                        "--ro-bind".into(),
                        "/dev/null".into(),
                        file.display().to_string(),
                    ]);
                }
                // Node starts in the root as the box sees it (a working directory from before the binds
                // would reach past them with a relative path).
                args.extend(["--chdir".into(), secrets.root.display().to_string()]);
                if super::seccomp::program().is_some() {
                    args.extend(["--seccomp".into(), SECCOMP_FD.to_string()]);
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
                files without the seats' secrets (.ovai/ and each desk's files that hold one), in which the ovai binary and \
                the Claude Code and service settings cannot be changed, and a /tmp of its own. Plugins keep the \
                network (not Unix sockets) and the instance's other files."
                .into(),
            Isolation::Userns { .. } => "The plugin host runs in a box of ovai's own, made from Linux namespaces \
                (bubblewrap is not used): its own process namespace (it cannot signal the daemon or anything \
                outside, and everything it starts ends with it) and a view of the files without the seats' \
                secrets (.ovai/ and each desk's files that hold one), in which the ovai binary and the Claude Code and service \
                settings cannot be changed, and a /tmp of its own; no capabilities. Plugins keep the network (not \
                Unix sockets) and the instance's other files."
                .into(),
            Isolation::None { why } => format!(
                "The plugin host runs without a box ({why}): only a process group of its own, so a plugin can \
                 signal the daemon, leave processes behind in a session of their own, and read the seats' \
                 secrets (each desk's .mcp.json and other client files) and the control secret. Install bubblewrap (apt-get install \
                 bubblewrap) and set hostIsolation to \"auto\" to box it."
            ),
        }
    }

    pub fn is_boxed(&self) -> bool {
        !matches!(self, Isolation::None { .. })
    }
}

/// What is brought into the box below its private temporary folders, read-only, as (from, at): Node
/// (found on PATH as the box finds it) where it lives there, the file alone; a plugins/ that is a link to
/// a folder there. Never a private folder itself nor one above the root, nor where a plugin's own link
/// leads: a plugin could make one to any file of the user's there.
fn brought(node: &Path, secrets: &Secrets, private: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    let fits = |at: &Path| {
        private
            .iter()
            .any(|t| at.starts_with(t) && at != t.as_path())
            && !secrets.root.starts_with(at)
            && !at.starts_with(&secrets.root)
    };
    let node = if node.components().count() == 1 {
        find_on_path(&node.to_string_lossy()).unwrap_or_else(|| node.to_path_buf())
    } else {
        node.to_path_buf()
    };
    let mut bring = Vec::new();
    if let Ok(real) = node.canonicalize()
        && fits(&node)
    {
        bring.push((real, node));
    }
    if let Ok(real) = secrets.root.join("plugins").canonicalize()
        && fits(&real)
    {
        bring.push((real.clone(), real));
    }
    bring
}

/// What a plugin may read but never change, where it exists now: the ovai binary's folder (a file bound
/// alone is undone by renaming the folder around it), openovai.json (its box setting), the instance's
/// `.git/` (hooks), the TLS files' folders, and the user's Claude Code and service settings.
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
    paths.extend(secrets.fixed.iter().cloned());

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

/// Every file in `desks/*/` that holds a seat's secret there is now: each client's (`.mcp.json`,
/// `.gemini/settings.json`, `.codex/config.toml`, `opencode.json`).
fn desk_secrets(desks: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(desks)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|e| crate::desk::secret_files(&e.path()))
        // Where a desk's file is reached through a link, the box hides the file it leads to.
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    files.sort();
    files.dedup();
    files
}
