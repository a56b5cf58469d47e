//! Permissions that let other users of the machine in: a folder or file that decides what this server
//! runs (plugins/, openovai.json, the desks) writable by others, or a file that holds a secret readable by
//! them. `ovai serve` (in runtime.log and on stderr), `ovai status` and `ovai check` say so, one sentence
//! each, with the command that mends it. A `umask 000` leaves every one of them so.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::instance::Instance;

/// One sentence per place that is too open, in a fixed order.
pub fn too_open(inst: &Instance) -> Vec<String> {
    let mut said = Vec::new();
    let root = &inst.root;
    let shown = |p: &Path| {
        p.strip_prefix(root)
            .ok()
            .filter(|r| !r.as_os_str().is_empty())
            .map_or_else(|| p.display().to_string(), |r| r.display().to_string())
    };
    let mut writable = |p: &Path, what: &str| {
        if let Some(mode) = mode_of(p)
            && mode & 0o002 != 0
        {
            let name = shown(p);
            said.push(format!(
                "{name} can be changed by every user of this machine (mode {:o}): {what}. Run `chmod o-w {}`.",
                mode & 0o7777,
                p.display()
            ));
        }
    };
    writable(root, "any of them could put files in the instance's root");
    writable(
        &inst.plugins_dir(),
        "any of them could add a tool that runs as this server's user",
    );
    for file in entries(&inst.plugins_dir()) {
        writable(&file, "any of them could change what the tool runs");
    }
    writable(
        &inst.config_file(),
        "any of them could change who the Leader is and how plugins are boxed",
    );
    writable(
        &inst.desks_dir(),
        "any of them could put a desk of their own in a seat's place",
    );
    for desk in entries(&inst.desks_dir()) {
        writable(
            &desk,
            "any of them could change what a session started there reads",
        );
    }
    // Says so when other users can read `p`, and whether they can.
    let mut secret = |p: &Path, what: &str| {
        let open = mode_of(p).filter(|mode| mode & 0o044 != 0);
        if let Some(mode) = open {
            said.push(format!(
                "{} can be read by users other than its owner (mode {:o}): it holds {what}. Run `chmod 600 {}`.",
                shown(p),
                mode & 0o7777,
                p.display()
            ));
        }
        open.is_some()
    };
    // The seats whose secret others could read: a mode put right does not take back what was read.
    let mut exposed = Vec::new();
    for desk in entries(&inst.desks_dir()) {
        // A client's file that holds no secret of ours (one that did not parse, left alone) is not one.
        for file in crate::desk::secret_files(&desk) {
            let holds = crate::files::read_regular(&file, crate::files::MAX_READ_BYTES)
                .is_ok_and(|t| t.contains("OVAI_SECRET") || t.contains("Bearer "));
            if holds
                && secret(&file, "a seat's secret")
                && let Some(seat) = desk.file_name().map(|n| n.to_string_lossy().into_owned())
                && !exposed.contains(&seat)
            {
                exposed.push(seat);
            }
        }
    }
    secret(&inst.control_secret(), "the control secret");
    secret(&inst.seats_file(), "the seats' hashed secrets");
    if !exposed.is_empty() {
        let rotate: Vec<String> = exposed
            .iter()
            .map(|seat| format!("`ovai seat rotate {seat}`"))
            .collect();
        said.push(format!(
            "Other users may have read those seats' secrets meanwhile: once the modes are put right, give each a \
             new one ({}).",
            rotate.join(", ")
        ));
    }
    if let Some(mode) = mode_of(&inst.private_dir())
        && mode & 0o077 != 0
    {
        said.push(format!(
            ".ovai/ can be entered by users other than its owner (mode {:o}): it holds the socket and the \
             secrets. Run `chmod 700 {}`.",
            mode & 0o7777,
            inst.private_dir().display()
        ));
    }
    said
}

fn mode_of(path: &Path) -> Option<u32> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| !m.file_type().is_symlink())
        .map(|m| m.permissions().mode())
}

/// What a folder holds, sorted by name (nothing when it cannot be read).
fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}
