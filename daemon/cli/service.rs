//! `ovai service install` and `uninstall`: a systemd user unit or a launchd agent for this instance, from the templates in
//! scripts/ (embedded), with the binary's and the root's absolute paths filled in.

use std::path::{Path, PathBuf};

use super::{Failure, exit, own_exe};
use crate::host::child::{check_node, node_program};
use crate::instance::Instance;

const SYSTEMD_TEMPLATE: &str = include_str!("../../scripts/ovai.service.in");
const LAUNCHD_TEMPLATE: &str = include_str!("../../scripts/ovai.plist.in");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
}

impl Manager {
    fn native() -> Self {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }
}

/// What a service of this instance is for one manager: its text, where it goes, and the commands that
/// start and stop it.
struct Unit {
    text: String,
    path: PathBuf,
    enable: String,
    disable: String,
}

fn unit(inst: &Instance, manager: Manager) -> Result<Unit, Failure> {
    let ovai = own_exe()?;
    // The service starts with the manager's environment, not this shell's: name the Node found here.
    let node = which_node();
    let name = service_name(&inst.root);
    Ok(match manager {
        Manager::Systemd => {
            let file = format!("{name}.service");
            Unit {
                text: systemd_unit(inst, &ovai, node.as_deref()),
                path: config_home()?.join("systemd/user").join(&file),
                enable: format!(
                    "systemctl --user daemon-reload && systemctl --user enable --now {file}"
                ),
                disable: format!("systemctl --user disable --now {file}"),
            }
        }
        Manager::Launchd => {
            let label = format!("dev.openovai.{}", name.trim_start_matches("ovai-"));
            let path = home()?
                .join("Library/LaunchAgents")
                .join(format!("{label}.plist"));
            let quoted = crate::names::shell_quote(&path.display().to_string());
            Unit {
                text: launchd_plist(inst, &ovai, node.as_deref(), &label),
                enable: format!("launchctl bootstrap gui/$(id -u) {quoted}"),
                disable: format!("launchctl bootout gui/$(id -u) {quoted}"),
                path,
            }
        }
    })
}

pub fn install(inst: &Instance, manager: Option<Manager>, print: bool) -> Result<(), Failure> {
    let manager = manager.unwrap_or_else(Manager::native);
    let u = unit(inst, manager)?;
    if print {
        // The text alone on stdout (it can be piped to the file); where it goes, and how, on stderr.
        print!("{}", u.text);
        // Not "ovai: …", which reads as an error on a terminal (helper-103).
        eprintln!(
            "The file above goes to {} (`ovai service install` writes it there); then: {}",
            u.path.display(),
            u.enable
        );
        return Ok(());
    }
    if let Some(dir) = u.path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::new(format!("{} cannot be made: {e}.", dir.display()), 1))?;
    }
    let existed = u.path.exists();
    std::fs::write(&u.path, &u.text)
        .map_err(|e| Failure::new(format!("{} cannot be written: {e}.", u.path.display()), 1))?;
    println!(
        "{} {}.",
        if existed { "Updated" } else { "Wrote" },
        u.path.display()
    );
    if which_node().is_none() {
        println!(
            "Node.js was not found on this PATH; the service will look for `node` on its own PATH (set OVAI_NODE in the file to name one)."
        );
    }
    println!("Enable and start it with:\n  {}", u.enable);
    if manager == Manager::Systemd
        && let Err(why) = user_manager()
    {
        let user = std::env::var("USER").unwrap_or_else(|_| "$USER".into());
        println!(
            "But {why}, so that command cannot run yet: log in through a session that starts one, or run \
             `loginctl enable-linger {user}` once (a manager then runs for {user} from boot), then run it."
        );
    }
    Ok(())
}

/// Whether a systemd user manager answers `systemctl --user`; if not, why, in words.
fn user_manager() -> Result<(), String> {
    let out = std::process::Command::new("systemctl")
        .args(["--user", "show-environment"])
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            let said = String::from_utf8_lossy(&o.stderr);
            let said = said.lines().next().unwrap_or("").trim();
            Err(format!(
                "no systemd user manager answers here (`systemctl --user`: {})",
                if said.is_empty() { "it failed" } else { said }
            ))
        }
        Err(_) => Err("systemctl is not on this PATH (does this machine run systemd?)".into()),
    }
}

pub fn uninstall(inst: &Instance, manager: Option<Manager>, print: bool) -> Result<(), Failure> {
    let manager = manager.unwrap_or_else(Manager::native);
    let u = unit(inst, manager)?;
    if !u.path.exists() {
        println!(
            "There is no service file for this instance at {}; nothing to remove.",
            u.path.display()
        );
        return Ok(());
    }
    if print {
        println!(
            "Would remove {}. Stop and disable it first with:\n  {}",
            u.path.display(),
            u.disable
        );
        return Ok(());
    }
    let name = u
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_use = |state: &str| {
        Failure::new(
            format!(
                "{name} is {state}: stop and disable it first with\n  {}\nthen run `ovai service uninstall` again.",
                u.disable
            ),
            exit::FAILED,
        )
    };
    // Enabled, its link in a `*.wants/` folder says so whether or not a user manager answers here (a `su`
    // or ssh shell of a lingering user has none): removed, the file would leave the link dangling.
    if manager == Manager::Systemd
        && let Some(link) = enabled_by(&u.path, &name)
    {
        return Err(in_use(&format!("enabled ({} links to it)", link.display())));
    }
    // Removed while enabled or running, its unit could no longer be disabled by name: stopped first.
    if manager == Manager::Systemd && user_manager().is_ok() {
        let state = |verb: &str| {
            std::process::Command::new("systemctl")
                .args(["--user", verb, &name])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default()
        };
        let (enabled, active) = (state("is-enabled"), state("is-active"));
        if enabled == "enabled" || active == "active" || active == "activating" {
            return Err(in_use(if active == "inactive" {
                &enabled
            } else {
                &active
            }));
        }
    }
    std::fs::remove_file(&u.path)
        .map_err(|e| Failure::new(format!("{} cannot be removed: {e}.", u.path.display()), 1))?;
    println!(
        "Removed {}. If it was running, stop it with:\n  {}",
        u.path.display(),
        u.disable
    );
    Ok(())
}

/// `ovai-<folder>-<6 hex of the root's path>`: readable, and distinct for two instances in same-named folders.
pub fn service_name(root: &Path) -> String {
    let folder: String = root
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let hash = crate::digest::hex(&crate::digest::sha256(root.as_os_str().as_encoded_bytes())[..3]);
    let folder = folder.trim_matches('-');
    if folder.is_empty() {
        format!("ovai-{hash}")
    } else {
        format!("ovai-{folder}-{hash}")
    }
}

fn systemd_unit(inst: &Instance, ovai: &Path, node: Option<&Path>) -> String {
    let root = inst.root.display().to_string();
    let exe = ovai.display().to_string();
    let env = match node {
        Some(n) => format!(
            "Environment={}\n\n",
            systemd_quote(&format!("OVAI_NODE={}", n.display()))
        ),
        None => "\n".to_string(),
    };
    SYSTEMD_TEMPLATE
        .replace(
            "@EXEC_START@",
            &[&exe, "serve", "--root", &root]
                .map(systemd_exec_word)
                .join(" "),
        )
        .replace(
            "@EXEC_RELOAD@",
            &[&exe, "restart", "--root", &root]
                .map(systemd_exec_word)
                .join(" "),
        )
        .replace("@ENVIRONMENT@\n", &env)
        .replace("@ROOT@", &root.replace('%', "%%"))
}

fn launchd_plist(inst: &Instance, ovai: &Path, node: Option<&Path>, label: &str) -> String {
    let env = match node {
        Some(n) => format!(
            "    <key>OVAI_NODE</key>\n    <string>{}</string>\n",
            xml(&n.display().to_string())
        ),
        None => String::new(),
    };
    LAUNCHD_TEMPLATE
        .replace("@ENVIRONMENT@", &env)
        .replace("@LABEL@", &xml(label))
        .replace("@OVAI@", &xml(&ovai.display().to_string()))
        .replace("@LOG_DIR@", &xml(&inst.private_dir().display().to_string()))
        .replace("@ROOT@", &xml(&inst.root.display().to_string()))
}

/// A link to the unit in a `*.wants/`, `*.requires/` or `*.upholds/` folder beside it: what enabling it
/// made.
fn enabled_by(unit: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(unit.parent()?)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|dir| {
            dir.extension()
                .is_some_and(|x| x == "wants" || x == "requires" || x == "upholds")
        })
        .map(|dir| dir.join(name))
        .find(|link| link.symlink_metadata().is_ok())
}

/// One word of a systemd setting: quoted, with `%` (a specifier), `\` and `"` escaped.
fn systemd_quote(arg: &str) -> String {
    let escaped = arg
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

/// One argument of a command line (`ExecStart=`), where `$` also names an environment variable, even
/// within quotes: written `$$`. (`Environment=` expands none.)
fn systemd_exec_word(arg: &str) -> String {
    systemd_quote(&arg.replace('$', "$$"))
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn which_node() -> Option<PathBuf> {
    let node = node_program();
    check_node(&node).ok()?;
    if node.is_absolute() {
        return Some(node);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(&node))
        .find(|p| p.is_file())
}

fn home() -> Result<PathBuf, Failure> {
    super::home_var().map_err(|why| Failure::new(format!("{why}, so there is no user folder the service's file goes in (with --print too, which names it): set HOME (or XDG_CONFIG_HOME, for systemd) and run it again."), 1))
}

fn config_home() -> Result<PathBuf, Failure> {
    match std::env::var_os("XDG_CONFIG_HOME").filter(|h| !h.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(home()?.join(".config")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_readable_and_distinct() {
        let a = service_name(Path::new("/home/ann/workspace"));
        let b = service_name(Path::new("/srv/workspace"));
        assert!(a.starts_with("ovai-workspace-"), "{a}");
        assert_ne!(a, b);
        assert!(service_name(Path::new("/x/My Work!")).starts_with("ovai-my-work-"));
    }

    #[test]
    fn systemd_arguments_are_quoted_and_escaped() {
        assert_eq!(systemd_quote("/a b/100%\"x\""), "\"/a b/100%%\\\"x\\\"\"");
    }
}
