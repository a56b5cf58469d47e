//! Which files in plugins/ are candidates, in the order their rows are written, with the checks made
//! before anything is read: the name, a clash with a built-in tool, and that it is a file of a sane size.

use std::path::Path;

use crate::{files, names};

/// The endings that look like a tool but are not one, in any case but `.mjs`'s own: they get a row
/// saying only .mjs files are tools.
const NOT_MODULES: &[&str] = &["mjs", "js", "cjs", "mts", "ts"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// Passes the checks made before import; the host imports it next.
    Module {
        file: String,
        name: String,
    },
    BadName {
        file: String,
        name: String,
    },
    Builtin {
        file: String,
        name: String,
    },
    NotModule {
        file: String,
    },
    /// Not a regular file (followed through links): `what` it is, "a FIFO".
    NotAFile {
        file: String,
        what: &'static str,
    },
    /// Past `files::MAX_PLUGIN_BYTES`.
    TooLarge {
        file: String,
        bytes: u64,
    },
    /// Its name differs from another file's only in case.
    CaseClash {
        file: String,
        name: String,
        other: String,
    },
}

impl Candidate {
    pub fn file(&self) -> &str {
        match self {
            Candidate::Module { file, .. }
            | Candidate::BadName { file, .. }
            | Candidate::Builtin { file, .. }
            | Candidate::CaseClash { file, .. }
            | Candidate::NotAFile { file, .. }
            | Candidate::TooLarge { file, .. }
            | Candidate::NotModule { file } => file,
        }
    }
}

/// What an entry of plugins/ is, as far as its metadata (through links) says.
enum Found {
    Meta(std::fs::Metadata),
    /// A link to nothing, or one of a loop of links.
    LinkToNothing,
    /// Its metadata cannot be read (its permissions): the import says why.
    Unknown,
    /// A folder (or a link to one) named as a tool's file: shared code is kept in folders, but one
    /// named `x.mjs` was most likely meant to be the tool x.
    Folder,
}

fn leads_nowhere(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
        || matches!(
            e.raw_os_error(),
            Some(libc::ELOOP | libc::ENOTDIR | libc::ENAMETOOLONG)
        )
}

/// The candidates directly in `dir`, sorted by file name bytes so two machines write the same rows.
/// Directories (shared code, unless named as a tool's file), notes and hidden files are never candidates. A missing folder is an
/// error, as an unreadable one is: read as holding none, it would stop every tool without a word.
pub fn scan(dir: &Path, builtins: &[&str]) -> std::io::Result<Vec<Candidate>> {
    let entries = std::fs::read_dir(dir)?;
    let mut seen = Vec::new();
    for entry in entries {
        let entry = entry?;
        // Follows a symlink: a link to a directory is a directory, and a link that leads nowhere (to
        // nothing, or round in a loop) is named as one rather than imported.
        let meta = match std::fs::metadata(entry.path()) {
            Ok(m) if m.is_dir() && entry.file_name().as_encoded_bytes().ends_with(b".mjs") => {
                Found::Folder
            }
            Ok(m) if m.is_dir() => continue,
            Ok(m) => Found::Meta(m),
            Err(e) if leads_nowhere(&e) && entry.file_type().is_ok_and(|t| t.is_symlink()) => {
                Found::LinkToNothing
            }
            Err(_) => Found::Unknown,
        };
        seen.push((entry.file_name().to_string_lossy().into_owned(), meta));
    }
    seen.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let found: Vec<Candidate> = seen
        .into_iter()
        .filter_map(|(f, meta)| {
            let found = classify(f, builtins)?;
            // What is not a file is never read nor imported: a FIFO would wait for a writer for ever.
            Some(match meta {
                Found::LinkToNothing => Candidate::NotAFile {
                    file: found.file().to_string(),
                    what: "a link that leads to no file",
                },
                Found::Folder => Candidate::NotAFile {
                    file: found.file().to_string(),
                    what: "a folder (or a link to one)",
                },
                Found::Meta(m) if let Some(what) = files::not_a_file(m.file_type()) => {
                    Candidate::NotAFile {
                        file: found.file().to_string(),
                        what,
                    }
                }
                Found::Meta(m) if m.len() > files::MAX_PLUGIN_BYTES => Candidate::TooLarge {
                    file: found.file().to_string(),
                    bytes: m.len(),
                },
                _ => found,
            })
        })
        .collect();
    Ok(apart_in_case(found))
}

/// Files looked at in plugins/' folders for a tool written there, at most, and bytes of each.
const FOLDER_FILES: usize = 200;
const FOLDER_FILE_BYTES: u64 = 256 << 10;

/// The modules in plugins/' folders (one deep; not node_modules/ nor hidden ones) that export
/// `description` and `run` as a tool does, each with the tool file it would be (`None` when its name is
/// no tool's): `plugins/deploy/index.mjs`, as other hosts lay plugins out, was served by nothing and said
/// by nothing. Not one whose tool file is there already, nor one a tool names (`export { run } from
/// './lib/x.mjs'`, helper-98): those are the tools' code.
pub fn tools_in_folders(dir: &Path) -> Vec<(String, Option<String>)> {
    let listed = |folder: &Path, dirs: bool| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(folder) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.') && n != "node_modules" && n.ends_with(".mjs") != dirs)
            .filter(|n| std::fs::metadata(folder.join(n)).is_ok_and(|m| m.is_dir() == dirs))
            .collect();
        names.sort_unstable();
        names
    };
    let read = |path: &Path| files::read_regular(path, FOLDER_FILE_BYTES).ok();
    let mut found = Vec::new();
    let mut looked = 0;
    // The tools' own text, read once the first module that looks like a tool is met.
    let mut tools_text: Option<Vec<String>> = None;
    for folder in listed(dir, true) {
        for file in listed(&dir.join(&folder), false) {
            looked += 1;
            if looked > FOLDER_FILES {
                return found;
            }
            let stem = file.trim_end_matches(".mjs");
            let name = if stem.eq_ignore_ascii_case("index") {
                folder.as_str()
            } else {
                stem
            };
            if std::fs::symlink_metadata(dir.join(format!("{name}.mjs"))).is_ok() {
                continue;
            }
            let Some(text) = read(&dir.join(&folder).join(&file)) else {
                continue;
            };
            let names = exported(&text);
            if !(names.contains(&"run") && names.contains(&"description")) {
                continue;
            }
            let module = format!("{folder}/{file}");
            let tools = tools_text.get_or_insert_with(|| {
                listed(dir, false)
                    .iter()
                    .take(FOLDER_FILES)
                    .filter_map(|f| read(&dir.join(f)))
                    .collect()
            });
            if tools.iter().any(|t| t.contains(&module)) {
                continue;
            }
            let tool = names::is_valid(name).then(|| format!("{name}.mjs"));
            found.push((module, tool));
        }
    }
    found
}

/// The names a module's text exports (`export const x`, `export async function x`, `export { a, b as x }`),
/// read as words: enough to tell a tool's file, not a parser.
fn exported(text: &str) -> Vec<&str> {
    let word = |s: &str| -> usize {
        s.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(s.len())
    };
    let mut names = Vec::new();
    for (at, _) in text.match_indices("export") {
        // At the start of a statement (its line's, or after `;` or `}` on it: a module written on one line,
        // helper-104): one in a comment (`// export const run`) or a string is none.
        let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        let before = text[line_start..at].trim_end();
        if !(before.is_empty() || before.ends_with(';') || before.ends_with('}')) {
            continue;
        }
        let after = &text[at + "export".len()..];
        if !after.starts_with(|c: char| c.is_whitespace() || c == '{') {
            continue;
        }
        let mut rest = after.trim_start();
        if let Some(list) = rest.strip_prefix('{') {
            let list = &list[..list.find('}').unwrap_or(list.len())];
            names.extend(
                list.split(',')
                    .filter_map(|item| item.split_whitespace().last()),
            );
            continue;
        }
        for keyword in ["async", "function", "*", "const", "let", "var"] {
            rest = rest.strip_prefix(keyword).map_or(rest, |r| r.trim_start());
        }
        let n = word(rest);
        if n > 0 {
            names.push(&rest[..n]);
        }
    }
    names
}

/// How the plugins folder is not there, when listing it failed for that: gone, or a file in its place.
/// `None` when it is there and cannot be read (its permissions).
pub fn folder_missing(e: &std::io::Error) -> Option<FolderMissing> {
    if e.kind() == std::io::ErrorKind::NotFound {
        Some(FolderMissing::Gone)
    } else if e.raw_os_error() == Some(libc::ENOTDIR) {
        Some(FolderMissing::FileInItsPlace)
    } else {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderMissing {
    Gone,
    FileInItsPlace,
}

impl FolderMissing {
    /// What it is, after the folder's name.
    pub fn state(self) -> &'static str {
        match self {
            FolderMissing::Gone => "is gone (removed, or moved away)",
            FolderMissing::FileInItsPlace => "is not a folder (a file took its place)",
        }
    }
}

/// What is wrong with the plugins folder `dir` when it cannot be listed, after its name.
pub fn folder_trouble(e: &std::io::Error, dir: &str) -> String {
    let mkdir = format!("mkdir {}", crate::names::shell_quote(dir));
    match folder_missing(e) {
        Some(m @ FolderMissing::Gone) => {
            format!("{}: put it back, or make it again ({mkdir})", m.state())
        }
        Some(m @ FolderMissing::FileInItsPlace) => {
            format!(
                "{}: move the file away and make it again ({mkdir})",
                m.state()
            )
        }
        None => format!("cannot be read: {e}"),
    }
}

/// Tools whose names differ only in case are served neither: one could pass itself off as the other,
/// and on a disk that ignores case the two are one file.
fn apart_in_case(found: Vec<Candidate>) -> Vec<Candidate> {
    // By name in lower case, each name's files in the order found: a lookup each, not a pass over all
    // (a plugin writing thousands of files made every scan quadratic).
    let mut by_lower: crate::maps::Map<String, Vec<String>> = crate::maps::Map::default();
    for c in &found {
        if let Candidate::Module { file, name } = c {
            by_lower
                .entry(name.to_ascii_lowercase())
                .or_default()
                .push(file.clone());
        }
    }
    found
        .into_iter()
        .map(|c| match c {
            Candidate::Module { file, name } => {
                let lower = name.to_ascii_lowercase();
                let other = by_lower
                    .get(&lower)
                    .and_then(|files| files.iter().find(|f| **f != file));
                match other {
                    Some(other) => Candidate::CaseClash {
                        file,
                        name,
                        other: other.clone(),
                    },
                    None => Candidate::Module { file, name },
                }
            }
            other => other,
        })
        .collect()
}

/// The candidate a file name makes, or `None` for a note or a hidden file (an editor's lock, `.#x.mjs`,
/// or its copy being saved: nobody's tool, and no row for them).
pub fn classify(file: String, builtins: &[&str]) -> Option<Candidate> {
    if file.starts_with('.') {
        return None;
    }
    let (stem, ext) = file.rsplit_once('.')?;
    // `.MJS` is not `.mjs` to the module loader's rules, and would otherwise go without a word.
    if ext != "mjs" && NOT_MODULES.iter().any(|m| m.eq_ignore_ascii_case(ext)) {
        return Some(Candidate::NotModule { file });
    }
    if ext != "mjs" {
        return None;
    }
    let name = stem.to_string();
    Some(if !names::is_valid(&name) {
        Candidate::BadName { file, name }
    } else if builtins.iter().any(|b| b.eq_ignore_ascii_case(&name)) {
        // Another case is refused too: `Room` beside `room` could pass itself off as it.
        Candidate::Builtin { file, name }
    } else {
        Candidate::Module { file, name }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exported_names_are_read_as_a_tool_writes_them() {
        let text = "export const description = 'd';\nexport async function* run() {}\nexport { a, b as inputSchema };\n\
                    exportName = 1;\nconst reexport = 2;\nexport default {};\nexport let x = 1\n\
                    // export const y = 1;\nconst s = 'export const z';";
        assert_eq!(
            exported(text),
            ["description", "run", "a", "inputSchema", "default", "x"]
        );
        assert!(exported("module.exports = { run }").is_empty());
        assert_eq!(
            exported(
                "export const description = 'd'; export async function run() {} export const x = 1;"
            ),
            ["description", "run", "x"]
        );
    }

    #[test]
    fn classifies_by_ending_and_name() {
        let b = ["index", "room"];
        let c = |f: &str| classify(f.to_string(), &b);
        assert!(
            matches!(c("ci-status.mjs"), Some(Candidate::Module { name, .. }) if name == "ci-status")
        );
        assert!(matches!(c("room.mjs"), Some(Candidate::Builtin { .. })));
        assert!(matches!(c("Room.mjs"), Some(Candidate::Builtin { .. })));
        assert!(matches!(
            c("ci_status.mjs"),
            Some(Candidate::BadName { .. })
        ));
        assert!(matches!(c("x.ts"), Some(Candidate::NotModule { .. })));
        assert!(matches!(c("x.cjs"), Some(Candidate::NotModule { .. })));
        assert_eq!(c("README.md"), None);
        assert_eq!(c("notes"), None);
        assert_eq!(c(".mjs"), None);
        assert_eq!(c(".hidden.mjs"), None);
        assert_eq!(c(".#x.mjs"), None);
        assert!(matches!(c("X.MJS"), Some(Candidate::NotModule { .. })));
        assert!(matches!(c("x.Ts"), Some(Candidate::NotModule { .. })));
    }

    #[test]
    fn scan_sorts_by_bytes_and_skips_folders_of_shared_code() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.mjs", "B.mjs", "a.mjs", "notes.txt"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("shared")).unwrap();
        // Named as a tool's file, a folder is a candidate: named, never imported.
        std::fs::create_dir(dir.path().join("meant.mjs")).unwrap();
        let found = scan(dir.path(), &[]).unwrap();
        let files: Vec<&str> = found.iter().map(Candidate::file).collect();
        assert_eq!(files, ["B.mjs", "a.mjs", "b.mjs", "meant.mjs"]);
        assert!(matches!(found[3], Candidate::NotAFile { .. }));
    }
}
