//! `ovai plugin NAME`: a new plugins/NAME.mjs from the scaffold, never over somebody's file.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::names;
use crate::tools::builtin_like;

/// The scaffold, with `__TOOL__` where the name goes.
pub const TEMPLATE: &str = include_str!("../../plugins/scaffold.mjs.template");

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{name:?} cannot be a tool name: {why} ({rule}). Nothing was written.", rule = names::RULE)]
    BadName { name: String, why: String },
    #[error(
        "{0} is a name a tool can have, but this server already has a tool called {0}. Pick another name; nothing was written."
    )]
    Builtin(String),
    #[error(
        "this server already has a tool called {builtin}, and {name} differs from it only in case: a tool of that \
         name could pass itself off as it. Pick another name; nothing was written."
    )]
    BuiltinCase { name: String, builtin: String },
    #[error(
        "plugins/{other} is already there, and {name} differs from it only in case: neither would be served (one \
         could pass itself off as the other). Pick another name; nothing was written."
    )]
    CaseClash { name: String, other: String },
    #[error(
        "plugins/{0}.mjs is already there, and what is in it is somebody's work: nothing was written. Edit that file, or pick another name."
    )]
    Exists(String),
    /// In the way and no file: what it is, and what to do about it.
    #[error(
        "plugins/{name}.mjs is already there, {what}: nothing was written. {todo}, or pick another name."
    )]
    InTheWay {
        name: String,
        what: &'static str,
        todo: String,
    },
    #[error("{} cannot be written: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Somebody's file, or what else is at `path` (a link to nothing, a folder), named as the loader does.
fn in_the_way(name: &str, path: &Path) -> ScaffoldError {
    let remove = format!("Remove it (rm plugins/{name}.mjs)");
    let (what, todo) = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => return ScaffoldError::Exists(name.into()),
        Ok(m) if m.is_dir() && path.is_symlink() => ("a link to a folder", remove),
        Ok(m) if m.is_dir() => ("a folder", "Rename the folder".into()),
        Ok(m) => (
            crate::files::not_a_file(m.file_type()).unwrap_or("no file"),
            remove,
        ),
        Err(_) => ("a link that leads to no file", remove),
    };
    ScaffoldError::InTheWay {
        name: name.into(),
        what,
        todo,
    }
}

pub fn source_for(name: &str) -> String {
    TEMPLATE.replace("__TOOL__", name)
}

/// Writes `plugins_dir/NAME.mjs`; returns its path.
pub fn write(plugins_dir: &Path, name: &str) -> Result<PathBuf, ScaffoldError> {
    if let Some(why) = names::why_not(name) {
        return Err(ScaffoldError::BadName {
            name: name.into(),
            why,
        });
    }
    match builtin_like(name) {
        Some(builtin) if builtin == name => return Err(ScaffoldError::Builtin(name.into())),
        Some(builtin) => {
            return Err(ScaffoldError::BuiltinCase {
                name: name.into(),
                builtin: builtin.into(),
            });
        }
        None => {}
    }
    let path = plugins_dir.join(format!("{name}.mjs"));
    // The file itself first: beside one in another case, it is what is in the way.
    if path.symlink_metadata().is_ok() {
        return Err(in_the_way(name, &path));
    }
    // A tool of the same name in another case would not be served, and neither would this one.
    let same_but_case = std::fs::read_dir(plugins_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .find(|f| {
            f.strip_suffix(".mjs")
                .is_some_and(|stem| stem != name && stem.eq_ignore_ascii_case(name))
        });
    if let Some(other) = same_but_case {
        return Err(ScaffoldError::CaseClash {
            name: name.into(),
            other,
        });
    }
    let io = |source| ScaffoldError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(plugins_dir).map_err(io)?;
    // create_new: the check for somebody's file and the write are one step, so no race can overwrite it.
    let mut f = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(ScaffoldError::Exists(name.into()));
        }
        Err(e) => return Err(io(e)),
    };
    // Not written whole (a full disk): the file made here goes, or the next try would find it "somebody's".
    if let Err(e) = f
        .write_all(source_for(name).as_bytes())
        .and_then(|()| f.sync_all())
    {
        drop(f);
        let _ = std::fs::remove_file(&path);
        return Err(io(e));
    }
    Ok(path)
}
