//! Loading plugins/ into a new host process: the checks before import, then the imports (all at once;
//! `host::import`), then the export and schema checks, giving each candidate exactly one row.
//!
//! A file whose import ends the host (or hangs it) is not served (`host::import` starts a new host
//! without it).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::candidates::{self, Candidate};
use super::plugin_rows as rows;
use super::stale::Snapshot;
use crate::host::child::Launch;
use crate::host::ending::StartError;
use crate::host::import::{Imported, import_all};
use crate::host::process::{HostInit, HostProcess};
use crate::host::protocol::Loaded;
use crate::host::protocol::ToImport;
use crate::host::supervisor::ServedFile;
use crate::tools::{BUILTINS, PluginTool, schema};

/// A candidate's verdict; the rows are written in candidate order.
pub enum Verdict {
    Served(PluginTool),
    NotServed(String),
}

impl Verdict {
    /// The candidate's row, and for a served file whose description a client cuts, a second row saying so.
    pub fn rows(&self, file: &str) -> Vec<String> {
        match self {
            Verdict::Served(p) => {
                let mut rows = vec![rows::served(&p.name)];
                // Counted as the client counts them: a JavaScript string's length, in UTF-16 units
                // (an emoji is two).
                let chars = p.description.encode_utf16().count();
                if chars > rows::CLIENT_DESCRIPTION_CHARS {
                    rows.push(rows::description_cut(file, chars));
                }
                let bytes = p.description.len()
                    + serde_json::to_string(&p.schema).map_or(0, |text| text.len());
                if bytes > rows::LARGE_ENTRY_BYTES {
                    rows.push(rows::large_entry(file, bytes));
                }
                let unlisted = schema::required_unlisted(&p.schema);
                if !unlisted.is_empty() {
                    let listed = schema::listed_properties(&p.schema);
                    rows.push(rows::required_unlisted(file, &unlisted, &listed));
                }
                let undescribed = schema::undescribed(&p.schema);
                if !undescribed.is_empty() {
                    rows.push(rows::undescribed(file, &undescribed));
                }
                let defaulted = schema::required_with_default(&p.schema);
                if !defaulted.is_empty() {
                    rows.push(rows::required_with_default(file, &defaulted));
                }
                let slips = schema::keyword_slips(&p.schema);
                if !slips.is_empty() {
                    rows.push(rows::keyword_slips(file, &slips));
                }
                if let Some(uri) = schema::unknown_dialect(&p.schema) {
                    rows.push(rows::unknown_dialect(file, uri));
                }
                let (foreign, draft) = schema::foreign_keywords(&p.schema);
                if !foreign.is_empty() {
                    rows.push(rows::foreign_keywords(file, draft, &foreign));
                }
                rows
            }
            Verdict::NotServed(row) => vec![row.clone()],
        }
    }
}

pub struct LoadedPlugins {
    /// The host that imported every served file, ready to serve calls.
    pub process: HostProcess,
    /// One verdict per candidate, sorted by file name.
    pub verdicts: Vec<(Candidate, Verdict)>,
    /// Said before the files' rows: a plugins/ the box has read-only.
    pub notes: Vec<String>,
}

impl LoadedPlugins {
    pub fn rows(&self) -> Vec<String> {
        self.notes
            .iter()
            .cloned()
            .chain(self.verdicts.iter().flat_map(|(c, v)| v.rows(c.file())))
            .collect()
    }

    /// A served file whose bytes are not those of `snapshot` (taken before the imports) was saved while it
    /// was being read: which version its host imported is not known, so it is not served.
    pub fn refuse_changed(&mut self, plugins_dir: &Path, snapshot: &Snapshot) {
        for (c, v) in &mut self.verdicts {
            if !matches!(v, Verdict::Served(_)) {
                continue;
            }
            match snapshot.digest_now(plugins_dir, c.file()) {
                None => *v = Verdict::NotServed(rows::removed_while_read(c.file())),
                now if now != snapshot.digest(c.file()) => {
                    *v = Verdict::NotServed(rows::changed_while_read(c.file()));
                }
                _ => {}
            }
        }
    }

    /// Splits into what the supervisor re-imports after a crash and what the tool table serves.
    pub fn into_parts(
        self,
        plugins_dir: &Path,
        snapshot: &Snapshot,
    ) -> (HostProcess, Vec<String>, Vec<ServedFile>, Vec<PluginTool>) {
        let rows = self.rows();
        let mut files = Vec::new();
        let mut tools = Vec::new();
        for (c, v) in self.verdicts {
            if let Verdict::Served(p) = v {
                files.push(ServedFile {
                    import: ToImport {
                        name: p.name.clone(),
                        path: plugins_dir.join(c.file()).display().to_string(),
                    },
                    shown: p.file.clone(),
                    read_as: snapshot.digest(c.file()),
                });
                tools.push(p);
            }
        }
        (self.process, rows, files, tools)
    }
}

/// Every candidate in `plugins_dir`, sorted, with the checks made before import.
pub fn scan(plugins_dir: &Path) -> Result<Vec<Candidate>, LoadError> {
    candidates::scan(plugins_dir, BUILTINS).map_err(|source| LoadError::Scan {
        dir: plugins_dir.display().to_string(),
        source,
    })
}

/// Imports `found` (from [`scan`], or a chosen few) into a new host and gives each its verdict.
pub async fn load(
    first: Option<HostProcess>,
    plugins_dir: &Path,
    found: Vec<Candidate>,
    launch: &Launch,
    init: &HostInit,
    ids: &AtomicU64,
    import_timeout: Duration,
) -> Result<LoadedPlugins, LoadError> {
    // A file that is a link into /tmp is not in the box (its /tmp is its own): said, not imported.
    let modules = found.iter().filter_map(|c| match c {
        Candidate::Module { file, .. } => Some(file.as_str()),
        _ => None,
    });
    let left_out = if launch.isolation.is_boxed() {
        launch.secrets.links_out_of_the_box(plugins_dir, modules)
    } else {
        std::collections::HashMap::new()
    };
    let imports: Vec<ToImport> = found
        .iter()
        .filter_map(|c| match c {
            Candidate::Module { file, .. } if left_out.contains_key(file) => None,
            Candidate::Module { file, name } => Some(ToImport {
                name: name.clone(),
                path: plugins_dir.join(file).display().to_string(),
            }),
            _ => None,
        })
        .collect();
    let done = import_all(first, launch, init, &imports, ids, import_timeout).await?;
    let mut outcomes = done.outcomes.into_iter();
    let verdicts = found
        .into_iter()
        .map(|c| {
            let v = match &c {
                Candidate::BadName { file, name } => Verdict::NotServed(rows::bad_name(file, name)),
                Candidate::Builtin { file, name } => Verdict::NotServed(rows::builtin(file, name)),
                Candidate::NotModule { file } => Verdict::NotServed(rows::not_module(file)),
                Candidate::NotAFile { file, what } => {
                    Verdict::NotServed(rows::not_a_file(file, what))
                }
                Candidate::TooLarge { file, bytes } => {
                    Verdict::NotServed(rows::too_large(file, *bytes))
                }
                Candidate::CaseClash { file, name, other } => {
                    Verdict::NotServed(rows::case_clash(file, name, other))
                }
                Candidate::Module { file, .. } if let Some(target) = left_out.get(file) => {
                    Verdict::NotServed(rows::linked_into_tmp(file, target))
                }
                Candidate::Module { file, name } => match outcomes.next() {
                    Some(Imported::Reported(l)) => judge(file, name, *l, init.max_answer_bytes),
                    Some(Imported::StoppedHost(exit, over)) => {
                        Verdict::NotServed(rows::import_stopped_host(
                            file,
                            &exit.to_string(),
                            over.map(|o| o.to_string()).as_deref(),
                        ))
                    }
                    Some(Imported::Held(at)) => {
                        Verdict::NotServed(rows::import_held(file, import_timeout.as_secs(), &at))
                    }
                    Some(Imported::Hung) | None => {
                        Verdict::NotServed(rows::import_hung(file, import_timeout.as_secs()))
                    }
                },
            };
            (c, v)
        })
        .collect();
    let notes = launch
        .secrets
        .plugins_brought_read_only()
        .filter(|_| launch.isolation.is_boxed())
        .map(|target| rows::plugins_read_only(&target))
        .into_iter()
        .collect();
    Ok(LoadedPlugins {
        process: done.process,
        verdicts: within_the_list(verdicts),
        notes,
    })
}

/// The most the served tools' entries (name, description, inputSchema) may take in `tools/list`
/// together: every session reads the list whole, and each one the daemon makes is held until it is
/// written. Thousands of tools of a few kilobytes fit; 200 descriptions of a megabyte each took gigabytes
/// of the daemon's memory as eight sessions listed them.
pub const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;

/// The verdicts with the list within MAX_LIST_BYTES: past it, the largest entries are not served, each
/// with a row saying why, until the rest fit.
fn within_the_list(mut verdicts: Vec<(Candidate, Verdict)>) -> Vec<(Candidate, Verdict)> {
    // As sent: a description's escapes count (a control character takes six bytes).
    let bytes = |v: &Verdict| match v {
        Verdict::Served(p) => {
            p.name.len()
                + serde_json::to_string(&p.description).map_or(0, |text| text.len() - 2)
                + serde_json::to_string(&p.schema).map_or(0, |text| text.len())
        }
        Verdict::NotServed(_) => 0,
    };
    let mut total: usize = verdicts.iter().map(|(_, v)| bytes(v)).sum();
    while total > MAX_LIST_BYTES {
        let Some((largest, entry)) = verdicts
            .iter()
            .enumerate()
            .map(|(at, (_, v))| (at, bytes(v)))
            .max_by_key(|&(at, entry)| (entry, std::cmp::Reverse(at)))
        else {
            break;
        };
        let (c, v) = &mut verdicts[largest];
        *v = Verdict::NotServed(rows::list_too_large(c.file(), entry, total, MAX_LIST_BYTES));
        total -= entry;
    }
    verdicts
}

/// The verdict on a file the host imported.
fn judge(file: &str, name: &str, l: Loaded, max_answer_bytes: usize) -> Verdict {
    if let Some(t) = &l.import {
        return Verdict::NotServed(rows::import_failed(file, t));
    }
    if let Some(r) = &l.exports {
        return Verdict::NotServed(rows::exports(file, r));
    }
    if let Some(bytes) = l.too_big {
        return Verdict::NotServed(rows::schema(
            file,
            &format!(
                "its description and inputSchema are {} bytes, more than the {} a tool's entry may be (maxAnswerBytes in openovai.json)",
                crate::names::thousands(bytes as usize),
                crate::names::thousands(max_answer_bytes)
            ),
        ));
    }
    if let Some(depth) = l.too_deep {
        return Verdict::NotServed(rows::schema(
            file,
            &format!(
                "its inputSchema nests {depth} levels deep, more than the {MAX_SCHEMA_DEPTH} this server reads; flatten it"
            ),
        ));
    }
    if let Some(why) = &l.schema_json {
        return Verdict::NotServed(rows::schema(
            file,
            &format!("its inputSchema cannot be written as JSON: {why}"),
        ));
    }
    let (Some(description), Some(input_schema), true) = (l.description, l.input_schema, l.ok)
    else {
        return Verdict::NotServed(rows::schema(
            file,
            "the plugin host reported it without its exports",
        ));
    };
    let validator = match schema::compile(&input_schema) {
        Ok(v) => v,
        Err(problem) => {
            // Its slips said with it, so one check names all there is to fix.
            let slips = input_schema
                .as_object()
                .map(schema::keyword_slips)
                .unwrap_or_default();
            let problem = format!("{problem}{}", rows::slips_too(&slips));
            return Verdict::NotServed(rows::schema(file, &problem));
        }
    };
    let serde_json::Value::Object(schema) = input_schema else {
        return Verdict::NotServed(rows::schema(
            file,
            "its inputSchema is not an object schema: it is not an object",
        ));
    };
    Verdict::Served(PluginTool {
        name: name.to_string(),
        description,
        schema,
        validator,
        file: Arc::from(format!("plugins/{file}")),
    })
}

/// How deep an inputSchema may nest as JSON: the host refuses deeper ones (its MAX_SCHEMA_DEPTH), since
/// the line that carries one nests at most 128 levels (serde_json's limit).
const MAX_SCHEMA_DEPTH: u64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    NoBox(#[from] crate::host::sandbox::NoBox),
    #[error("{dir} {}", candidates::folder_trouble(source, dir))]
    Scan { dir: String, source: std::io::Error },
    #[error(transparent)]
    Start(#[from] StartError),
}
