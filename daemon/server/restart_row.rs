//! The runtime.log row of a restart: who asked, which generation serves now, and what changed in the tool
//! list, with what the list costs every session each turn before and after.

use rmcp::model::Tool;

use crate::names::thousands;

/// What one tool's entry costs a session each turn: the UTF-8 bytes of it as `tools/list` sends it.
pub fn bytes(tool: &Tool) -> usize {
    serde_json::to_vec(tool).map_or(0, |v| v.len())
}

/// `new_code`: the tools whose file changed, served before and now (their new code runs now);
/// `settings`: the keys of openovai.json that changed. `by`: who asked, for runtime.log; `None` for the
/// one who asked (`ovai restart`'s own last line).
pub fn row(
    by: Option<&str>,
    generation: u64,
    (before, after): (&[Tool], &[Tool]),
    new_code: &[String],
    settings: &[String],
) -> String {
    let mut row = list_row(by, generation, before, after);
    if !new_code.is_empty() {
        row.push_str(&format!(" New code runs for: {}.", new_code.join(", ")));
    }
    if !settings.is_empty() {
        row.push_str(&format!(" openovai.json changed: {}.", settings.join(", ")));
    }
    if settings.iter().any(|k| k == "clients") {
        row.push_str(
            " A desk made before has the files of the clients it was made for: `ovai seat rebuild` writes those \
             of clients added, keeping each seat's secret.",
        );
    }
    row
}

/// The top-level keys of openovai.json whose values differ between two readings, sorted, but for
/// `apart` (said in rows of their own).
pub fn changed_keys(
    before: &serde_json::Value,
    after: &serde_json::Value,
    apart: &[&str],
) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (b, a) = (
        before.as_object().unwrap_or(&empty),
        after.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<String> = b
        .keys()
        .chain(a.keys())
        .filter(|k| !apart.contains(&k.as_str()) && b.get(*k) != a.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

fn list_row(by: Option<&str>, generation: u64, before: &[Tool], after: &[Tool]) -> String {
    let find = |list: &[Tool], name: &str| list.iter().find(|t| t.name == name).cloned();
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for t in after {
        match find(before, &t.name) {
            None => added.push(format!(
                "{} ({} bytes each turn)",
                t.name,
                thousands(bytes(t))
            )),
            Some(old) if old != *t => {
                let mut what = Vec::new();
                if old.description != t.description {
                    what.push("its description");
                }
                if old.input_schema != t.input_schema {
                    what.push("its inputSchema");
                }
                if what.is_empty() {
                    what.push("its annotations");
                }
                changed.push(format!(
                    "{} ({}; {} → {} bytes each turn)",
                    t.name,
                    what.join(" and "),
                    thousands(bytes(&old)),
                    thousands(bytes(t))
                ));
            }
            Some(_) => {}
        }
    }
    let removed: Vec<String> = before
        .iter()
        .filter(|t| find(after, &t.name).is_none())
        .map(|t| t.name.to_string())
        .collect();
    let total = |list: &[Tool]| list.iter().map(bytes).sum::<usize>();
    let mut row = match by {
        Some(by) => format!("Restarted, asked by {by}: generation {generation} serves now"),
        None => format!("Restarted: generation {generation} serves now"),
    };
    if added.is_empty() && removed.is_empty() && changed.is_empty() {
        row.push_str(&format!(
            "; the tool list is the same ({} bytes each turn for every session).",
            thousands(total(after))
        ));
        return row;
    }
    // A file taken away and one that no longer imports both leave the list: the rows above say which.
    for (label, items) in [
        ("added", added),
        ("no longer served", removed),
        ("changed", changed),
    ] {
        if !items.is_empty() {
            row.push_str(&format!("; {label}: {}", items.join(", ")));
        }
    }
    row.push_str(&format!(
        ". The tool list costs every session {} bytes each turn (it was {}).",
        thousands(total(after)),
        thousands(total(before))
    ));
    row
}
