//! The modules in plugins/' folders (`plugins/lib/util.mjs`) and its packages (`plugins/node_modules/`), as
//! they were when the plugins were read. A tool imports them, so they are the tool's code too: a host
//! started later (after a crash, for a seat change) refuses one changed since to whatever imports it, as
//! it refuses a tool's own file, instead of running code nobody read while the log says it serves the
//! same files.

use crate::files::stamp;
use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Endings Node imports as code. Other files (words, settings) are read by the tool as it runs, and are
/// meant to be read as they are.
const CODE: &[&str] = &["mjs", "js", "cjs"];
/// And what a package's code loads beside it: `require("./data.json")`, a native addon.
const PACKAGED_CODE: &[&str] = &["json", "node"];
/// Past this many in plugins/' own folders, the rest is not looked at (a vendored tree belongs in
/// node_modules/).
const MOST: usize = 2_000;
/// Past this many in node_modules/ folders, the rest is not looked at.
const MOST_PACKAGED: usize = 20_000;
/// Folders deeper than this are not looked into (a link that leads back up would never end); packages
/// nest deeper.
const DEEPEST: usize = 8;
const DEEPEST_PACKAGED: usize = 32;
/// Folders looked into at most, all told: each once, however many links lead to it (three links to
/// their own folder made a walk of 3^32 folders that held the daemon), and a tree of empty folders
/// ends here.
const MOST_FOLDERS: usize = 50_000;
/// Bytes read for fingerprints at most in one reading: a file's hard links are read once, and 20,000
/// files of 64 MiB would take hours to read.
const MOST_BYTES: u64 = 2 << 30;

/// A file's size and modification time: a file whose stamp is as it was is not read again.
type Stamp = Option<(u64, Option<std::time::SystemTime>)>;

/// A file's device and inode: its hard links, and the paths links lead to it by, are one file.
type Inode = (u64, u64);

/// Reads the fingerprints of one look at plugins/: a file's hard links once, MOST_BYTES at most.
#[derive(Default)]
struct Reader {
    read: HashMap<Inode, (Stamp, Option<String>)>,
    bytes: u64,
}

impl Reader {
    /// `path`'s stamp, inode and SHA-256; `None` once the look has read MOST_BYTES.
    fn read(&mut self, path: &Path) -> Option<(Stamp, Option<Inode>, Option<String>)> {
        // Stamped first: an edit between the two is then seen as a change of stamp, and read.
        let m = std::fs::metadata(path).ok();
        let stamped = m.as_ref().map(|m| (m.len(), m.modified().ok()));
        let inode = m.as_ref().map(|m| (m.dev(), m.ino()));
        if let Some((was, hash)) = inode.and_then(|i| self.read.get(&i))
            && *was == stamped
        {
            return Some((stamped, inode, hash.clone()));
        }
        // Counted as read, not as the file says: one of /proc says it holds nothing.
        let left = MOST_BYTES.saturating_sub(self.bytes);
        let (hash, read) =
            crate::files::fingerprint_counted(path, left.min(crate::files::MAX_PLUGIN_BYTES));
        self.bytes += read;
        if self.bytes > MOST_BYTES {
            return None;
        }
        if let Some(i) = inode {
            self.read.insert(i, (stamped, hash.clone()));
        }
        Some((stamped, inode, hash))
    }
}

#[derive(Debug, Default)]
pub struct Helpers {
    /// Each module: its path, stamp and SHA-256 as read, and whether it is in a node_modules/ folder.
    files: Vec<(PathBuf, Stamp, Option<String>, bool)>,
    /// Their inodes: a file found later by another path (another link to its folder) is no new one.
    inodes: HashSet<Inode>,
    /// More than MOST were there: those past them are not guarded.
    pub capped: bool,
    /// More than MOST_PACKAGED were in node_modules/ folders.
    pub packaged_capped: bool,
    /// More than MOST_FOLDERS folders, or MOST_BYTES of modules, were there: the rest is not guarded.
    pub walk_capped: bool,
    /// How many were noted, outside node_modules/ folders and in them.
    counts: [usize; 2],
    /// What `changed` found of each file it read again, by the stamp it had then: a file touched once
    /// is not read again at every status.
    checked: std::sync::Mutex<HashMap<PathBuf, (Stamp, bool)>>,
    /// The plugins/ folder they were read in.
    dir: PathBuf,
}

impl Helpers {
    /// The code files in `dir`'s folders and theirs, and those beside the tools that are no tool (a
    /// `.js` or `.cjs` file), with the SHA-256 of each; node_modules/ folders' too. Not hidden folders.
    pub fn take(dir: &Path) -> Self {
        let mut helpers = Self {
            dir: dir.to_path_buf(),
            ..Self::default()
        };
        let mut reader = Reader::default();
        let mut over = false;
        helpers.walk_capped = walk(dir, |path, packaged| {
            let most = if packaged { MOST_PACKAGED } else { MOST };
            if helpers.counts[usize::from(packaged)] >= most {
                if packaged {
                    helpers.packaged_capped = true;
                } else {
                    helpers.capped = true;
                }
                return false;
            }
            let Some((stamped, inode, hash)) = reader.read(&path) else {
                over = true;
                return false;
            };
            helpers.inodes.extend(inode);
            helpers.counts[usize::from(packaged)] += 1;
            helpers.files.push((path, stamped, hash, packaged));
            true
        }) || over;
        helpers
    }

    /// The code files there now that were not when they were read (an install's new files, a package
    /// whose `main` now names one): a new host imports no more of them than of a changed one. Looked
    /// for as `take` looks, within its caps.
    pub fn appeared(&self) -> Vec<PathBuf> {
        let read: HashSet<&Path> = self.files.iter().map(|f| f.0.as_path()).collect();
        let mut counts = [0usize; 2];
        let mut new = Vec::new();
        walk(&self.dir, |path, packaged| {
            counts[usize::from(packaged)] += 1;
            if counts[usize::from(packaged)] > if packaged { MOST_PACKAGED } else { MOST } {
                return false;
            }
            let known = read.contains(path.as_path())
                || std::fs::metadata(&path)
                    .is_ok_and(|m| self.inodes.contains(&(m.dev(), m.ino())));
            if !known {
                new.push(path);
            }
            true
        });
        new
    }

    /// Those whose bytes are not what was read (read again only when their size or time moved), and
    /// those past what one look reads (as changed: not imported unread). One gone is not among them:
    /// importing it fails in Node's own words.
    pub fn changed(&self) -> Vec<PathBuf> {
        self.changed_and_gone().0
    }

    /// `changed`, and those read that are gone since or can no longer be read (a new host fails to
    /// import the tools that import them, in Node's own words): each module looked at once.
    pub fn changed_and_gone(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut reader = Reader::default();
        let mut checked = crate::sync::lock(&self.checked);
        let (mut changed, mut gone) = (Vec::new(), Vec::new());
        for (path, was_stamped, was, _) in &self.files {
            let now = stamp(path);
            // Gone: read then (stamped), not there now; one unread then is said gone too.
            if now.is_none() {
                if was_stamped.is_some() {
                    gone.push(path.clone());
                }
                continue;
            }
            if was.is_none() || now == *was_stamped {
                continue;
            }
            let is_changed = match checked.get(path) {
                Some((then, changed)) if *then == now => *changed,
                _ => match reader.read(path) {
                    Some((_, _, hash)) => {
                        let is_changed = hash != *was;
                        checked.insert(path.clone(), (now, is_changed));
                        is_changed
                    }
                    // Past what one look reads: not imported unread.
                    None => true,
                },
            };
            if is_changed {
                changed.push(path.clone());
            }
        }
        (changed, gone)
    }

    /// The folders holding the modules guarded (not plugins/ itself, nor node_modules/, whose folders
    /// are many): watched, so a save there is said.
    pub fn folders(&self) -> Vec<PathBuf> {
        let mut folders: Vec<PathBuf> = self
            .files
            .iter()
            .filter(|f| !f.3)
            .filter_map(|(path, _, _, _)| path.parent())
            .filter(|f| *f != self.dir)
            .map(Path::to_path_buf)
            .collect();
        folders.sort_unstable();
        folders.dedup();
        folders
    }
}

/// How many modules get a row each; more in one burst (a checkout) get one row together.
const MAX_ROWS: usize = 8;

/// The rows for modules of plugins/' folders that changed since the read and were not said yet, those
/// `gone` among them, and those said that are as they were read again; each as plugins/ names it
/// (`lib/util.mjs`).
pub fn rows(changed: &[String], gone: &HashSet<String>, back: &[String]) -> Vec<String> {
    let name =
        |f: &String| crate::names::escape_controls(&format!("plugins/{f}"), false).into_owned();
    let (gone, changed): (Vec<String>, Vec<String>) =
        changed.iter().cloned().partition(|f| gone.contains(f));
    if changed.len() + gone.len() + back.len() <= MAX_ROWS {
        let back = back.iter().map(|f| {
            format!(
                "{}, a module tools import, is as it was at the last read again: a plugin host started from \
                 now on imports it",
                name(f)
            )
        });
        let changed = changed.iter().map(|f| {
            format!(
                "{}, a module tools import, changed after the last read: the tools that import it run it as \
                 it was read; a plugin host started from now on (after a crash, or when the seats change) \
                 refuses them, naming it; `ovai restart` serves it as it is now",
                name(f)
            )
        });
        let gone = gone.iter().map(|f| {
            format!(
                "{}, a module tools import, was removed (or cannot be read) after the last read: the tools \
                 that import it run it as it was read; a plugin host started from now on (after a crash, or \
                 when the seats change) cannot import them; `ovai restart` says which tools it leaves out",
                name(f)
            )
        });
        return back.chain(changed).chain(gone).collect();
    }
    let some = |files: &[String]| {
        let mut shown: Vec<String> = files.iter().take(5).map(name).collect();
        if files.len() > 5 {
            shown.push(format!("and {} more", files.len() - 5));
        }
        shown.join(", ")
    };
    let mut parts = Vec::new();
    if !changed.is_empty() {
        parts.push(format!(
            "{} tools import changed after the last read ({}): the tools that import them run them as they \
             were read; a plugin host started from now on refuses those tools, naming the module; `ovai \
             restart` serves them as they are now",
            modules(changed.len()),
            some(&changed)
        ));
    }
    if !gone.is_empty() {
        parts.push(format!(
            "{} tools import {} removed (or cannot be read) after the last read ({}): the tools that import \
             them run them as they were read; a plugin host started from now on cannot import those tools; \
             `ovai restart` says which it leaves out",
            modules(gone.len()),
            if gone.len() == 1 { "was" } else { "were" },
            some(&gone)
        ));
    }
    if !back.is_empty() {
        parts.push(format!(
            "{} tools import {} at the last read again ({}): a plugin host started from now on imports them",
            modules(back.len()),
            if back.len() == 1 {
                "is as it was"
            } else {
                "are as they were"
            },
            some(back)
        ));
    }
    vec![parts.join("; ")]
}

fn modules(n: usize) -> String {
    if n == 1 {
        "1 module".into()
    } else {
        format!("{n} modules")
    }
}

/// Visits the code files of `dir`'s folders (and those beside its tools that are no tool), and whether
/// each is a package's; a folder's walk ends where `visit` says false. True when it ended at
/// MOST_FOLDERS.
fn walk(dir: &Path, mut visit: impl FnMut(PathBuf, bool) -> bool) -> bool {
    // Breadth first: a folder is walked from the nearest path to it, whose depth the bounds count.
    let mut folders: VecDeque<(PathBuf, usize, bool)> = VecDeque::new();
    let mut ended = [false; 2];
    let mut seen: HashSet<Inode> = std::fs::metadata(dir)
        .map(|m| (m.dev(), m.ino()))
        .into_iter()
        .collect();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if let Some(packaged) = looked_into(&entry, false) {
            folders.push_back((path, 1, packaged));
        } else if path.extension().is_none_or(|e| e != "mjs")
            && is_code(&path, false)
            && path.is_file()
            && !ended[0]
        {
            ended[0] = !visit(path, false);
        }
    }
    while let Some((folder, depth, packaged)) = folders.pop_front() {
        // Through whichever link it is reached, a folder is looked into once.
        match std::fs::metadata(&folder) {
            Ok(m) if seen.insert((m.dev(), m.ino())) => {}
            _ => continue,
        }
        if seen.len() > MOST_FOLDERS {
            return true;
        }
        let deepest = if packaged { DEEPEST_PACKAGED } else { DEEPEST };
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            if ended[usize::from(packaged)] {
                break;
            }
            let path = entry.path();
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() && is_code(&path, packaged) => {
                    ended[usize::from(packaged)] = !visit(path, packaged);
                }
                Ok(m) if m.is_dir() && depth < deepest => {
                    if let Some(inner) = looked_into(&entry, packaged) {
                        folders.push_back((path, depth + 1, inner));
                    }
                }
                _ => {}
            }
        }
    }
    false
}

/// The rows of a reading whose folders hold more code files than are guarded, if it does.
pub fn capped_row(helpers: &Helpers) -> Vec<String> {
    let mut rows = Vec::new();
    if helpers.capped {
        rows.push(format!(
            "plugins/' folders hold more than {} code files: a new plugin host (after a crash, or for a seat \
             change) refuses only the first {} when they changed since this reading, and imports the others as \
             they are. Keep packages in plugins/node_modules/.",
            crate::names::thousands(MOST),
            crate::names::thousands(MOST)
        ));
    }
    if helpers.walk_capped {
        rows.push(format!(
            "plugins/' folders hold more than {} folders, or more than {} GiB of modules: a new plugin host \
             (after a crash, or for a seat change) imports those not looked at as they are, changed or not. \
             Keep large files and deep trees out of plugins/.",
            crate::names::thousands(MOST_FOLDERS),
            MOST_BYTES >> 30
        ));
    }
    if helpers.packaged_capped {
        rows.push(format!(
            "plugins/' node_modules/ folders hold more than {} code files: a new plugin host (after a \
             crash, or for a seat change) refuses only the first {} when they changed since this \
             reading, and imports the others as they are.",
            crate::names::thousands(MOST_PACKAGED),
            crate::names::thousands(MOST_PACKAGED)
        ));
    }
    rows
}

/// Whether to look into a folder (or a link to one), and then whether what is in it is a package's:
/// not a hidden one; a node_modules/ one, and any in it, is.
fn looked_into(entry: &std::fs::DirEntry, packaged: bool) -> Option<bool> {
    let name = entry.file_name();
    let name = name.to_string_lossy();
    // The entry's own type first: a folder of 1,000 tools is not looked at file by file.
    let folder = match entry.file_type() {
        Ok(t) if t.is_symlink() => entry.path().is_dir(),
        Ok(t) => t.is_dir(),
        Err(_) => false,
    };
    (folder && !name.starts_with('.')).then(|| packaged || name == "node_modules")
}

/// Whether Node would load the file as code: in a package, JSON (a `main` may name it) and native
/// addons too. A hidden file is not (npm's `node_modules/.package-lock.json`).
fn is_code(path: &Path, packaged: bool) -> bool {
    let hidden = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'));
    !hidden
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| CODE.contains(&e) || (packaged && PACKAGED_CODE.contains(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_were_not_there_at_the_read_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("lib")).unwrap();
        std::fs::create_dir_all(p.join("node_modules/x")).unwrap();
        std::fs::write(p.join("lib/util.mjs"), "a").unwrap();
        let helpers = Helpers::take(p);
        assert!(helpers.appeared().is_empty());
        std::fs::write(p.join("lib/new.mjs"), "a").unwrap();
        std::fs::write(p.join("lib/words.txt"), "a").unwrap();
        std::fs::write(p.join("node_modules/x/data.json"), "{}").unwrap();
        // npm's own record of what it installed is no module (helper-86: it was named as one).
        std::fs::write(p.join("node_modules/.package-lock.json"), "{}").unwrap();
        let mut appeared = helpers.appeared();
        appeared.sort();
        assert_eq!(
            appeared,
            vec![p.join("lib/new.mjs"), p.join("node_modules/x/data.json")]
        );
    }

    /// Three links to their own folder made a walk of 3^32 folders, which held the daemon's reading,
    /// `ovai status` and `ovai stop` (helper-87): each folder is looked into once.
    #[test]
    fn links_that_lead_back_are_walked_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let packages = p.join("node_modules");
        std::fs::create_dir_all(packages.join("x")).unwrap();
        std::fs::write(packages.join("x/index.js"), "a").unwrap();
        for name in ["a", "b", "c"] {
            std::os::unix::fs::symlink(".", packages.join(name)).unwrap();
        }
        // And one back to plugins/ itself.
        std::fs::create_dir_all(p.join("lib")).unwrap();
        std::os::unix::fs::symlink("..", p.join("lib/up")).unwrap();
        let helpers = Helpers::take(p);
        assert_eq!(helpers.files.len(), 1);
        assert!(!helpers.walk_capped && helpers.appeared().is_empty());
        // A link made since to a folder read is no new module, whichever path the walk takes first.
        std::os::unix::fs::symlink("x", packages.join("also-x")).unwrap();
        assert!(helpers.appeared().is_empty());
    }

    /// A file of /proc says it holds nothing, and holds megabytes (helper-89: links to every pid's
    /// pagemap read 6 GiB past the 2 GiB bound): it counts as what was read.
    #[test]
    fn a_file_of_proc_counts_as_the_bytes_read() {
        let mut reader = Reader::default();
        let (stamped, _, hash) = reader.read(Path::new("/proc/self/status")).unwrap();
        assert_eq!(stamped.map(|s| s.0), Some(0));
        assert!(hash.is_some() && reader.bytes > 0, "{}", reader.bytes);
    }

    #[test]
    fn many_modules_at_once_are_one_row() {
        let files: Vec<String> = (0..9).map(|n| format!("lib/m{n}.mjs")).collect();
        let rows = rows(&files, &HashSet::new(), &files[..1]);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!(
            rows[0].starts_with(
                "9 modules tools import changed after the last read (plugins/lib/m0.mjs, plugins/lib/m1.mjs, \
                 plugins/lib/m2.mjs, plugins/lib/m3.mjs, plugins/lib/m4.mjs, and 4 more)"
            ) && rows[0].contains("; 1 module tools import is as it was at the last read again (plugins/lib/m0.mjs)"),
            "{rows:?}"
        );
        assert_eq!(super::rows(&files[..2], &HashSet::new(), &[]).len(), 2);
        let gone: HashSet<String> = files[..3].iter().cloned().collect();
        let rows = super::rows(&files, &gone, &[]);
        assert!(
            rows[0].contains(
                "; 3 modules tools import were removed (or cannot be read) after the last read"
            ),
            "{rows:?}"
        );
    }

    #[test]
    fn a_changed_module_in_a_folder_is_named_and_others_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("lib/deep")).unwrap();
        std::fs::create_dir_all(p.join("node_modules/x")).unwrap();
        std::fs::write(p.join("tool.mjs"), "a").unwrap();
        std::fs::write(p.join("lib/util.mjs"), "a").unwrap();
        std::fs::write(p.join("lib/deep/more.cjs"), "a").unwrap();
        std::fs::write(p.join("lib/words.txt"), "a").unwrap();
        std::fs::write(p.join("node_modules/x/index.js"), "a").unwrap();
        std::fs::write(p.join("beside.js"), "a").unwrap();
        let helpers = Helpers::take(p);
        assert_eq!(helpers.files.len(), 4, "{helpers:?}");
        assert!(!helpers.capped);
        for f in [
            "tool.mjs",
            "lib/words.txt",
            "node_modules/x/index.js",
            "lib/deep/more.cjs",
            "beside.js",
        ] {
            std::fs::write(p.join(f), "bb").unwrap();
        }
        std::fs::remove_file(p.join("lib/util.mjs")).unwrap();
        let mut changed = helpers.changed();
        changed.sort();
        assert_eq!(
            changed,
            vec![
                p.join("beside.js"),
                p.join("lib/deep/more.cjs"),
                p.join("node_modules/x/index.js")
            ]
        );
        assert_eq!(helpers.folders(), vec![p.join("lib"), p.join("lib/deep")]);
    }
}
