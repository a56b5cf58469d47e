//! Keeps the desk files that hold a seat's secret out of git. A desk is often a work tree (a Worker's
//! checkout), one `git add -A` away from publishing its seat: there the repository's own `info/exclude`
//! gets the lines (nothing of the person's repository changes); any other desk gets a `.gitignore`, which
//! also holds should the folder, or one above it, become a repository later. Lines are added, never
//! replaced, and never twice.

use std::path::{Path, PathBuf};

/// What is said above ovai's lines, so a person reading the file knows whose they are.
const MARK: &str = "# ovai: these files hold this desk's seat secret; keep them out of git";

/// The files (relative to the desk) that hold the secret, as ignore patterns anchored at the desk.
const PATTERNS: [&str; 4] = [
    "/.mcp.json",
    "/.gemini/settings.json",
    "/.codex/config.toml",
    "/opencode.json",
];

/// Where the desk's ignore lines go: the exclude file of the repository whose work tree the desk is,
/// else the desk's `.gitignore`.
fn ignore_file(desk: &Path) -> PathBuf {
    let dot_git = desk.join(".git");
    if dot_git.is_dir() {
        return dot_git.join("info").join("exclude");
    }
    // A linked work tree or a submodule: `.git` is a file naming the repository's folder.
    if let Ok(text) = std::fs::read_to_string(&dot_git)
        && let Some(dir) = text.trim().strip_prefix("gitdir:")
    {
        let dir = desk.join(dir.trim());
        // A linked work tree shares the exclude file of the repository it belongs to.
        let common = std::fs::read_to_string(dir.join("commondir"))
            .map(|c| dir.join(c.trim()))
            .unwrap_or(dir);
        return common.join("info").join("exclude");
    }
    desk.join(".gitignore")
}

/// Why a seat's secret may not be written into the desk's files `rel` (relative to the desk) as git is
/// there: the file that keeps them out of git is a link (its lines would be written elsewhere), or the
/// repository tracks one of them (ignore lines do nothing for a tracked file: the secret would go out
/// with the next commit). `None` where it may, or where git is not installed to be asked.
pub fn why_not_for_secret(desk: &Path, rel: &[&str]) -> Option<String> {
    let file = ignore_file(desk);
    if file.is_symlink() {
        return Some(format!(
            "{} is a symbolic link: ovai adds the lines that keep the desk's secret files out of git only to a \
             file of the desk's own. Replace the link with a regular file and run the command again; nothing \
             was changed.",
            file.display()
        ));
    }
    // Every path, on disk or not: a tracked file deleted from the work tree is written back by `seat add`.
    // The operator's GIT_* variables (set inside a hook or an alias) would point git elsewhere; no hook
    // and no fsmonitor: asking git must not run anything of the repository's.
    let mut git = std::process::Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            git.env_remove(key);
        }
    }
    let out = match git
        .args(["-c", "core.fsmonitor=false", "ls-files", "-z", "--"])
        .args(rel)
        .current_dir(desk)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) => out,
        // No git here: nobody commits with it.
        Err(_) => return None,
    };
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        if said.contains("not a git repository") {
            return None;
        }
        let said = said.lines().next().unwrap_or("").trim();
        return Some(format!(
            "git could not say whether {} in {} is tracked ({}): a seat's secret is written only where git \
             keeps it out. Make `git ls-files` work there and run the command again; nothing was changed.",
            rel.join(", "),
            desk.display(),
            crate::names::escape_controls(&said.chars().take(300).collect::<String>(), false)
        ));
    }
    let tracked: Vec<String> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    if tracked.is_empty() {
        return None;
    }
    let (verb, them) = if tracked.len() == 1 {
        ("is", "it")
    } else {
        ("are", "them")
    };
    Some(format!(
        "{} in {} {verb} tracked by git: a seat's secret written there would go out with the next commit. \
         Untrack {them} with `git rm --cached {}` there (the file stays), commit that, and run the command \
         again; nothing was changed.",
        tracked.join(", "),
        desk.display(),
        tracked.join(" ")
    ))
}

/// Adds the patterns that are missing. `Ok(None)` when all are there already.
pub fn keep_out(desk: &Path) -> Result<Option<PathBuf>, String> {
    let file = ignore_file(desk);
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{} cannot be read: {e}", file.display())),
    };
    let have: Vec<&str> = text.lines().map(str::trim).collect();
    let missing: Vec<&str> = PATTERNS.into_iter().filter(|p| !have.contains(p)).collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let mut out = text.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !have.contains(&MARK) {
        out.push_str(MARK);
        out.push('\n');
    }
    for p in missing {
        out.push_str(p);
        out.push('\n');
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{} cannot be made: {e}", dir.display()))?;
    }
    std::fs::write(&file, out).map_err(|e| format!("{} cannot be written: {e}", file.display()))?;
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_added_once_beside_the_persons_own() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target/").unwrap();
        assert_eq!(
            keep_out(dir.path()).unwrap(),
            Some(dir.path().join(".gitignore"))
        );
        assert_eq!(keep_out(dir.path()).unwrap(), None);
        let text = std::fs::read_to_string(dir.path().join(".gitignore")).unwrap();
        assert!(text.starts_with("target/\n# ovai:"), "{text}");
        assert_eq!(text.matches("/.mcp.json").count(), 1);
    }

    #[test]
    fn a_work_tree_gets_them_in_its_repositorys_exclude_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        assert_eq!(
            keep_out(dir.path()).unwrap(),
            Some(dir.path().join(".git/info/exclude"))
        );
        assert!(!dir.path().join(".gitignore").exists());
        // A linked work tree: .git names its folder in the repository, which names the common one.
        let linked = dir.path().join("linked");
        let wt = dir.path().join(".git/worktrees/linked");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(&linked).unwrap();
        std::fs::write(wt.join("commondir"), "../..\n").unwrap();
        std::fs::write(linked.join(".git"), format!("gitdir: {}\n", wt.display())).unwrap();
        assert_eq!(ignore_file(&linked), wt.join("../..").join("info/exclude"));
    }
}
