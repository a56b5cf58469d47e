//! The tool table of one generation: the built-ins (Rust) and the plugins it loaded, sorted by name, with
//! the validator each call's arguments pass through first.

pub mod index;
pub mod room;
pub mod schema;

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

/// The server's own tools; a plugin cannot take these names.
pub const BUILTINS: &[&str] = &["index", "room"];

/// The built-in a tool name is, or differs from only in case (`Room` could pass itself off as `room`).
pub fn builtin_like(name: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .copied()
        .find(|b| b.eq_ignore_ascii_case(name))
}

pub enum Kind {
    Index,
    Room,
    /// `plugins/NAME.mjs`, as every sentence about it names it.
    Plugin {
        file: Arc<str>,
    },
}

pub struct TableEntry {
    pub name: String,
    pub description: String,
    /// The description's first line with its control characters shown escaped, as `index` shows it on
    /// every call.
    pub summary: String,
    pub kind: Kind,
    pub validator: crate::tools::schema::Checker,
    /// How much a check against its schema costs for each byte of arguments, roughly: the schema's
    /// length as JSON text (a schema of two thousand patterns checks each value two thousand times).
    pub weight: usize,
    /// Its schema names `wait_for_previous` among its properties: Gemini CLI's own argument is then the
    /// tool's (`server::arguments::without_clients_own`).
    pub names_wait_for_previous: bool,
}

/// The argument Gemini CLI adds to every tool it offers its model, for its own scheduling, and sends on.
pub const GEMINIS_OWN: &str = "wait_for_previous";

/// How much of a description's first line `index` shows: with every tool's, its answer stays well within
/// maxAnswerBytes (a first line of 600 KB took it past).
const SUMMARY_CHARS: usize = 200;

/// A description's first line, cut at SUMMARY_CHARS, its control characters shown escaped.
fn summary_of(description: &str) -> String {
    crate::names::clipped(description.lines().next().unwrap_or(""), SUMMARY_CHARS)
}

/// A plugin the host loaded, with its schema already known to compile.
pub struct PluginTool {
    pub name: String,
    pub description: String,
    pub schema: JsonObject,
    pub validator: crate::tools::schema::Checker,
    pub file: Arc<str>,
}

pub struct ToolTable {
    entries: Vec<TableEntry>,
    by_name: crate::maps::Map<String, usize>,
    /// The `tools/list` answer, built once per generation rather than per request.
    listed: Vec<Tool>,
}

impl ToolTable {
    pub fn new(plugins: Vec<PluginTool>) -> Self {
        let mut pairs: Vec<(TableEntry, Tool)> = builtins();
        for p in plugins {
            let weight = serde_json::to_string(&p.schema).map_or(0, |s| s.len());
            let names_wait_for_previous = p
                .schema
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.contains_key(GEMINIS_OWN));
            // A model reads the description to choose its tool: a direction override or a control in it
            // (a plugin's own, unchecked text) reaches it escaped, as people read it in `index`.
            let shown = crate::names::escape_controls(&p.description, true).into_owned();
            let tool = Tool::new(p.name.clone(), shown, p.schema);
            pairs.push((
                TableEntry {
                    name: p.name,
                    summary: summary_of(&p.description),
                    description: p.description,
                    kind: Kind::Plugin { file: p.file },
                    validator: p.validator,
                    weight,
                    names_wait_for_previous,
                },
                tool,
            ));
        }
        pairs.sort_by(|a, b| a.0.name.as_bytes().cmp(b.0.name.as_bytes()));
        let (entries, listed): (Vec<TableEntry>, Vec<Tool>) = pairs.into_iter().unzip();
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Self {
            entries,
            by_name,
            listed,
        }
    }

    pub fn get(&self, name: &str) -> Option<&TableEntry> {
        self.by_name.get(name).map(|i| &self.entries[*i])
    }

    pub fn entries(&self) -> &[TableEntry] {
        &self.entries
    }

    pub fn listed(&self) -> &[Tool] {
        &self.listed
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }
}

fn builtins() -> Vec<(TableEntry, Tool)> {
    vec![
        builtin(
            "index",
            Kind::Index,
            index::DESCRIPTION,
            index::schema(),
            true,
        ),
        builtin("room", Kind::Room, room::DESCRIPTION, room::schema(), false),
    ]
}

fn builtin(
    name: &str,
    kind: Kind,
    description: &str,
    schema: Value,
    read_only: bool,
) -> (TableEntry, Tool) {
    // The built-in schemas are constants of this file; they compile, and a test says so.
    let validator = schema::Checker::builtin(&schema);
    let weight = schema.to_string().len();
    let object = match schema {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    // The room only ever adds a message: MCP takes an unmarked tool that writes as destructive.
    let annotations = if read_only {
        ToolAnnotations::new().read_only(true)
    } else {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
    };
    let tool = Tool::new(name.to_string(), description.to_string(), object)
        .with_annotations(annotations.open_world(false));
    (
        TableEntry {
            name: name.into(),
            summary: summary_of(description),
            description: description.into(),
            kind,
            validator,
            weight,
            names_wait_for_previous: false,
        },
        tool,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_schemas_compile_and_list_sorted() {
        assert!(jsonschema::validator_for(&index::schema()).is_ok());
        assert!(jsonschema::validator_for(&room::schema()).is_ok());
        let t = ToolTable::new(vec![]);
        let names: Vec<&str> = t.names().collect();
        assert_eq!(names, BUILTINS);
    }

    #[test]
    fn a_summary_is_the_first_line_cut_and_escaped() {
        assert_eq!(summary_of("Says hello.\nMore."), "Says hello.");
        let long = "d".repeat(600_000);
        let cut = summary_of(&long);
        assert_eq!(cut.chars().count(), SUMMARY_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(summary_of("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
    }
}
