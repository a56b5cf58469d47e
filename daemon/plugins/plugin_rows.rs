//! The plugins rows of runtime.log, word for word. These sentences are the interface: people and tests
//! read them, so they change only on purpose.

use crate::host::protocol::{ExportsReport, Thrown};
use crate::names;
use crate::names::listed;

/// How a served file's row begins, its tool's name after it.
pub const SERVED: &str = "This instance serves a tool of its own: ";

pub fn served(name: &str) -> String {
    format!("{SERVED}{name}")
}

/// A row as `ovai check` prints it: what a restart would do, since the check serves nothing itself.
pub fn as_checked(row: &str) -> String {
    if let Some(name) = row.strip_prefix(SERVED) {
        return format!("This instance would serve a tool of its own: {name}");
    }
    row.replacen(" is not served: ", " would not be served: ", 1)
}

/// Claude Code shows a session at most this many characters of a tool's description (and of the
/// server's instructions).
pub const CLIENT_DESCRIPTION_CHARS: usize = 2048;

/// The row that follows a served file's row when its description is longer than a client shows.
pub fn description_cut(file: &str, chars: usize) -> String {
    let file = names::escape_controls(file, false);
    format!(
        "plugins/{file}: its description is {} characters; Claude Code shows a session only the first {}.",
        thousands(chars),
        thousands(CLIENT_DESCRIPTION_CHARS)
    )
}

use crate::names::thousands;

/// A tool's entry in `tools/list` past which a row says what it costs: a typical tool's is a few KB.
pub const LARGE_ENTRY_BYTES: usize = 64 * 1024;

/// plugins/ is a link to a folder below /tmp: the box brings it in, read-only.
pub fn plugins_read_only(target: &std::path::Path) -> String {
    let target = names::escape_controls(&target.to_string_lossy(), false).into_owned();
    format!(
        "plugins/ is a link to {target}, below /tmp: the plugin host's box has a /tmp of its own and brings \
         plugins/ in read-only, so no plugin can write beside itself (as plugins/freeze.mjs keeps its state in \
         plugins/freeze/). Move the folder out of /tmp, and link to it there."
    )
}

/// A file that is a link to one below /tmp, which the plugin host's box has its own of.
pub fn linked_into_tmp(file: &str, target: &std::path::Path) -> String {
    let file = names::escape_controls(file, false);
    let target = names::escape_controls(&target.to_string_lossy(), false).into_owned();
    format!(
        "plugins/{file} is not served: it is a link to {target}, below /tmp, and the plugin host's box has a \
         /tmp of its own (so that no plugin reaches what other programs keep there). Put the file in plugins/, \
         or link to one outside /tmp."
    )
}

/// A file left out so that the tools listed fit what every session reads (`load::MAX_LIST_BYTES`).
pub fn list_too_large(file: &str, bytes: usize, total: usize, max: usize) -> String {
    let file = names::escape_controls(file, false);
    format!(
        "plugins/{file} is not served: its entry in tools/list (name, description and inputSchema) takes {} \
         bytes, the most of any, and with it the tools would take {} bytes, more than the {} every session may \
         be given to read whole; make its description or schema shorter (let the tool refuse what it cannot \
         take, in words, rather than list it all).",
        thousands(bytes),
        thousands(total),
        thousands(max)
    )
}

/// The row that follows a served file's row when its entry in `tools/list` is large (an enum of
/// thousands): every session reads the whole list, each turn of its model.
pub fn large_entry(file: &str, bytes: usize) -> String {
    let file = names::escape_controls(file, false);
    format!(
        "plugins/{file}: its description and inputSchema take {} bytes in tools/list, which every session \
         reads whole, into each turn of its model; a long enum or many examples are most often the bulk \
         (let the tool refuse what it cannot take, in words, instead).",
        thousands(bytes)
    )
}

/// The row that follows a served file's row when some of its inputs have no description: the
/// specification's "every property wants a description of its own".
pub fn undescribed(file: &str, paths: &[String]) -> String {
    let file = names::escape_controls(file, false);
    let quoted = quoted_some(paths);
    let row = match paths {
        [_] => format!(
            "plugins/{file}: its input {} has no description, so a session is told nothing about what to put \
             there; add a description to it in inputSchema.",
            quoted[0]
        ),
        _ => format!(
            "plugins/{file}: its inputs {} have no description, so a session is told nothing about what to put \
             there; add a description to each in inputSchema.",
            listed(&quoted, "and")
        ),
    };
    names::escape_controls(&row, false).into_owned()
}

/// The first eight names quoted (each clipped to 64 characters), and how many more there are.
fn quoted_some<S: AsRef<str>>(all: &[S]) -> Vec<String> {
    const SHOWN: usize = 8;
    let mut quoted: Vec<String> = all
        .iter()
        .take(SHOWN)
        .map(|n| {
            let n = n.as_ref();
            let clipped: String = n.chars().take(64).collect();
            if clipped.len() < n.len() {
                format!("{:?}", clipped + "…")
            } else {
                format!("{clipped:?}")
            }
        })
        .collect();
    if all.len() > SHOWN {
        quoted.push(format!("{} more", all.len() - SHOWN));
    }
    quoted
}

/// A row for names a schema requires that its properties lack: a slip, most likely.
pub fn required_unlisted(file: &str, names: &[String], properties: &[&str]) -> String {
    let quoted = quoted_some(names);
    let shown = quoted_some(properties);
    let (requires, is, it, them) = match names {
        [_] => (quoted[0].clone(), "is", "it", "the name"),
        _ => (listed(&quoted, "and"), "are", "them", "the names"),
    };
    let row = format!(
        "plugins/{file}: its inputSchema requires {requires}, which {is} not among its properties ({}), so \
         a session is told nothing about {it}: add {it} there with a description, or correct {them} in \
         required.",
        shown.join(", ")
    );
    names::escape_controls(&row, false).into_owned()
}

/// A row for inputs a schema requires and gives a default, which no call may leave out.
pub fn required_with_default(file: &str, names: &[String]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .map(|n| format!("{:?}", n.chars().take(64).collect::<String>()))
        .collect();
    let (its, them) = match quoted.len() {
        1 => (
            format!("its input {} has a default and is", quoted[0]),
            "it",
        ),
        _ => (
            format!(
                "its inputs {} have a default and are",
                listed(&quoted, "and")
            ),
            "them",
        ),
    };
    let row = format!(
        "plugins/{file}: {its} required: defaults are not filled in, so every call must give \
         {them}; take {them} out of required (zod 4 writes a .default() field required unless asked for the input \
         side: z.toJSONSchema(schema, {{ io: \"input\" }}))."
    );
    names::escape_controls(&row, false).into_owned()
}

/// A tool's module in a folder of plugins/ (`candidates::tools_in_folders`), and the file to move it to
/// (`None`: its name is no tool's).
pub fn in_a_folder(file: &str, tool: Option<&str>) -> String {
    let to = match tool {
        Some(tool) => format!("plugins/{tool}"),
        None => {
            "plugins/NAME.mjs, NAME a tool's name (a letter, then letters, digits and hyphens),"
                .into()
        }
    };
    not_served(
        file,
        format!(
            "only files directly in plugins/ are tools, and it exports description and run as a tool \
             does: move it to {to} to serve it (a folder's modules are code the tools import)"
        ),
    )
}

/// Every not-served row: the file named, and why. Control characters (a file name holding ESC or a
/// newline, an error message) are shown escaped, so a row is one line that nothing can rewrite.
fn not_served(file: &str, why: impl std::fmt::Display) -> String {
    names::escape_controls(&format!("plugins/{file} is not served: {why}"), false).into_owned()
}

/// Said where a file in plugins/ looks like code for other tools to import rather than a tool.
const SHARED_CODE: &str = "a module other tools import goes in a subfolder, such as plugins/lib/, where it is never taken for a tool";

/// The row that follows a served file's row when its inputSchema's `$schema` names no draft this
/// server reads: its arguments are checked as 2020-12's, which may not be what its author meant.
pub fn unknown_dialect(file: &str, uri: &str) -> String {
    format!(
        "plugins/{file}: its inputSchema names $schema {}, which is none of the JSON Schema drafts this \
         server reads (draft-04, -06, -07, 2019-09, 2020-12): its arguments are checked by JSON Schema \
         2020-12.",
        names::clipped(&serde_json::Value::String(uri.into()).to_string(), 200)
    )
}

/// Where in an inputSchema a key was found, for a row: "at its top", or "in" the input it belongs to.
fn where_in(at: &str) -> String {
    if at.is_empty() {
        "at its top".to_string()
    } else {
        format!("in {}", names::escape_controls(at, false))
    }
}

/// The row that follows a served file's row when its inputSchema has keywords the draft it is read in
/// does not know (a later draft's, OpenAPI's `nullable`): ignored, they check nothing.
pub fn foreign_keywords(file: &str, draft: &str, found: &[(String, String, &str)]) -> String {
    let said: Vec<String> = found
        .iter()
        .take(8)
        .map(|(at, keyword, whose)| format!("{keyword} {} ({whose})", where_in(at)))
        .collect();
    format!(
        "plugins/{file}: its inputSchema is read as JSON Schema {draft}, which does not know {}; a keyword its \
         draft does not know is ignored, so nothing is checked by it (name the draft it was written for in \
         $schema).",
        listed(&said, "or")
    )
}

/// Keys that look like slips for JSON Schema's keywords, each with where it is and what it meant.
fn slips_said(slips: &[(String, String, &str)]) -> Vec<String> {
    slips
        .iter()
        .take(8)
        .map(|(at, found, meant)| {
            format!(
                "{} {} (meant {meant}?)",
                names::escape_controls(found, false),
                where_in(at)
            )
        })
        .collect()
}

/// What a schema refused for another fault also has that looks like slips, as the rest of its row.
pub fn slips_too(slips: &[(String, String, &str)]) -> String {
    if slips.is_empty() {
        return String::new();
    }
    format!(
        "; it also has {}, which JSON Schema does not know.",
        listed(&slips_said(slips), "and")
    )
}

/// The row that follows a served file's row when its inputSchema has keys that look like slips for
/// JSON Schema's keywords: ignored, they check nothing.
pub fn keyword_slips(file: &str, slips: &[(String, String, &str)]) -> String {
    let said = slips_said(slips);
    format!(
        "plugins/{file}: its inputSchema has {}, which JSON Schema does not know; a keyword it does not know \
         is ignored, so nothing is checked by it.",
        listed(&said, "and")
    )
}

pub fn bad_name(file: &str, name: &str) -> String {
    // `_util.mjs`: "private" by a common convention, so most likely shared code.
    let hyphens = name.replace(['_', ' ', '.'], "-");
    let hint = if name.starts_with('_') {
        format!("; {SHARED_CODE}")
    } else if hyphens != name && names::why_not(&hyphens).is_none() {
        // `my_tool.mjs`: the name meant, written as names are.
        format!(" (rename it {hyphens}.mjs)")
    } else if name.len() > names::MAX_LEN
        && name
            .get(..names::MAX_LEN)
            .is_some_and(|head| names::why_not(head).is_none())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        // Only its length is wrong.
        format!(
            " (it is {} characters long: shorten it to {} at most)",
            name.chars().count(),
            names::MAX_LEN
        )
    } else {
        String::new()
    };
    not_served(
        file,
        format!("{name} is not a tool name: {}{hint}", names::RULE),
    )
}

pub fn builtin(file: &str, name: &str) -> String {
    match crate::tools::builtin_like(name).filter(|b| *b != name) {
        Some(builtin) => not_served(
            file,
            format!(
                "this server already has a tool called {builtin}, and {name} differs from it only in case"
            ),
        ),
        None => not_served(
            file,
            format!("this server already has a tool called {name}"),
        ),
    }
}

pub fn case_clash(file: &str, name: &str, other: &str) -> String {
    not_served(
        file,
        format!(
            "{name} differs from plugins/{} only in case: one tool could pass itself off as the other, and on a \
             disk that ignores case the two are one file. Rename one, then `ovai restart`",
            names::escape_controls(other, false)
        ),
    )
}

pub fn changed_while_read(file: &str) -> String {
    not_served(
        file,
        "it changed while plugins/ was being read, so which of its versions would run is not known; run \
         `ovai restart` to serve it as it is now",
    )
}

pub fn removed_while_read(file: &str) -> String {
    not_served(
        file,
        "it was removed (or cannot be read) while plugins/ was being read",
    )
}

pub fn not_a_file(file: &str, what: &str) -> String {
    let path = names::shell_quote(&format!("plugins/{file}"));
    let then = if what.starts_with("a folder") {
        "rename the folder (shared code may live in any folder not named as a tool's file), or make the \
         tool a file of that name"
            .to_string()
    } else {
        format!("remove it (rm {path})")
    };
    not_served(
        file,
        format!("it is {what}, not a file. A tool is a file of JavaScript; {then}"),
    )
}

pub fn too_large(file: &str, bytes: u64) -> String {
    let shown = |n: u64| names::thousands(usize::try_from(n).unwrap_or(usize::MAX));
    not_served(
        file,
        format!(
            "it is {} bytes, more than the {} a plugin file may be; put the bulk in a module it imports \
             from a folder in plugins/",
            shown(bytes),
            shown(crate::files::MAX_PLUGIN_BYTES)
        ),
    )
}

/// A file whose ending looks like a tool's (`candidates::NOT_MODULES`), with the way to make it one.
pub fn not_module(file: &str) -> String {
    let (stem, ending) = file.rsplit_once('.').unwrap_or((file, ""));
    let way = match ending.to_ascii_lowercase().as_str() {
        "mjs" => format!("rename it {stem}.mjs, in lower case"),
        // It may be code the tools import, not a tool: renamed, it would be a tool that fails.
        "js" => format!(
            "rename it {stem}.mjs if it is meant as a tool (an ES module: export, not module.exports); code \
             the tools import goes in a folder of plugins/, such as lib/{stem}.mjs"
        ),
        "cjs" => format!(
            "a tool is an ES module, so write it as {stem}.mjs, with export in place of module.exports"
        ),
        "ts" | "mts" => {
            format!("Node runs JavaScript, so write it as {stem}.mjs, or build it into one")
        }
        _ => return not_served(file, "only .mjs files are tools"),
    };
    not_served(file, format!("only .mjs files are tools: {way}"))
}

pub fn import_failed(file: &str, t: &Thrown) -> String {
    let box_said = crate::host::host_rows::thrown_notes(t, true);
    match &t.at {
        Some(at) => not_served(
            file,
            format!("importing it failed: {} (at {at}){box_said}", t.message),
        ),
        None => not_served(
            file,
            format!("importing it failed: {}{box_said}", t.message),
        ),
    }
}

/// `over`: the bound of its box the host went past, said as `Exceeded` says it ("used more memory than
/// its box may hold (…)").
pub fn import_stopped_host(file: &str, exit: &str, over: Option<&str>) -> String {
    let why = match over {
        Some(over) => {
            format!("importing it stopped the plugin host, which {over} and was ended ({exit})")
        }
        None => format!("importing it stopped the plugin host ({exit})"),
    };
    not_served(file, why)
}

pub fn import_held(file: &str, seconds: u64, at: &str) -> String {
    not_served(
        file,
        format!(
            "its code held the plugin host's event loop for more than {seconds} s while plugins were imported (at {at})"
        ),
    )
}

pub fn import_hung(file: &str, seconds: u64) -> String {
    not_served(file, format!("importing it took longer than {seconds} s"))
}

pub fn schema(file: &str, problem: &str) -> String {
    not_served(file, problem)
}

/// The three exports a plugin's module must have.
const EXPORTS: [&str; 3] = ["description", "inputSchema", "run"];

/// How one of the three is written.
fn written(name: &str) -> &'static str {
    match name {
        "description" => "`export const description = ...`",
        "inputSchema" => "`export const inputSchema = ...`",
        _ => "`export async function run(args, context) { ... }`",
    }
}

/// What other hosts' tools call the three (the MCP SDKs', LangChain's, function calling's): a module
/// exporting these meant to be a tool, not code for other tools.
fn named_otherwise(meant: &str, found: &str) -> bool {
    let names: &[&str] = match meant {
        "description" => &["desc", "summary", "about", "help"],
        "inputSchema" => &[
            "schema",
            "parameters",
            "params",
            "input",
            "inputs",
            "args",
            "argsSchema",
            "paramsSchema",
        ],
        "run" => &[
            "execute", "handler", "handle", "call", "invoke", "main", "fn", "func", "action",
            "callback",
        ],
        _ => &[],
    };
    names.iter().any(|n| n.eq_ignore_ascii_case(found))
}

/// Missing exports named together, then each mis-typed one: "it does not export description or run;
/// its inputSchema is an array, not an object".
pub fn exports(file: &str, r: &ExportsReport) -> String {
    // What the host reports is bounded here too (a plugin can write to fd 4): only the contract's three
    // names are taken, and a few of the module's others, clipped.
    let contract = |name: &str| EXPORTS.contains(&name);
    let missing: Vec<String> = r.missing.iter().filter(|m| contract(m)).cloned().collect();
    let mut parts = Vec::new();
    let mut pointed = false;
    let quoted = |o: &String| format!("{:?}", o.chars().take(64).collect::<String>());
    if !missing.is_empty() {
        let mut part = format!("it does not export {}", listed(&missing, "or"));
        let others = || r.others.iter().take(32);
        let near: Vec<String> = others()
            .filter(|o| missing.iter().any(|m| misspelt(m, o)))
            .map(quoted)
            .collect();
        // Where none of the three is there, two named so at least: one export called `call` or `main` is
        // shared code's too. Where the others are there (or misspelt), a `handler` beside them is the one
        // meant.
        let roles = missing
            .iter()
            .filter(|m| others().any(|o| named_otherwise(m, o)))
            .count();
        let enough = roles >= 2 || missing.len() < EXPORTS.len() || !near.is_empty();
        let otherwise: Vec<String> = others()
            .filter(|o| enough && missing.iter().any(|m| named_otherwise(m, o)))
            .map(quoted)
            .collect();
        pointed = !near.is_empty() || !otherwise.is_empty();
        if !near.is_empty() {
            part.push_str(&format!(
                " (it exports {}: misspelt?)",
                listed(&near, "and")
            ));
        }
        if !otherwise.is_empty() {
            part.push_str(&format!(
                " (it exports {}, as other hosts name them: here the three are named description, \
                 inputSchema and run)",
                listed(&otherwise, "and")
            ));
        }
        // Nothing pointed at, and not shared code (some of the three there, or no export at all): how
        // each missing one is written (helper-81: "it does not export description" said no more).
        if !pointed && !r.has_default && (missing.len() < EXPORTS.len() || r.others.is_empty()) {
            let forms: Vec<String> = missing.iter().map(|m| written(m).to_string()).collect();
            part.push_str(&format!(" (add {})", listed(&forms, "and")));
        }
        parts.push(part);
    }
    let clip = |s: &str| s.chars().take(64).collect::<String>();
    for w in r
        .wrong
        .iter()
        .filter(|w| contract(&w.name))
        .take(EXPORTS.len())
    {
        let zod = if w.name == "inputSchema" && w.is.contains("Zod") {
            " (a zod schema is written as one by z.toJSONSchema(schema, { io: \"input\" }) in zod 4, \
             zodToJsonSchema(schema) before)"
        } else {
            ""
        };
        parts.push(format!(
            "its {} is {}, not {}{zod}",
            w.name,
            clip(&w.is),
            clip(&w.want)
        ));
    }
    if r.empty_description {
        parts.push(
            "its description is empty (or only spaces): write what the tool does, and when to call it"
                .into(),
        );
    }
    let mut why = parts.join("; ");
    if r.has_default && !missing.is_empty() {
        why.push_str(&format!(
            " (it has a default export, and the three must be named exports: {})",
            written(&missing[0])
        ));
    } else if missing.len() == EXPORTS.len() && !r.others.is_empty() && !pointed {
        // None of the three, and exports of its own: shared code, most likely; what it exports is said,
        // for a tool whose names are another host's after all.
        let some: Vec<String> = r.others.iter().take(5).map(quoted).collect();
        let more = if r.others.len() > 5 { ", …" } else { "" };
        why.push_str(&format!(
            " (it exports {}{more}; {SHARED_CODE})",
            some.join(", ")
        ));
    }
    not_served(file, why)
}

/// Whether `found` looks like a slip for `meant`: another case, or a letter or two (one, for a short
/// name like `run`) changed, missing or added.
fn misspelt(meant: &str, found: &str) -> bool {
    if meant.eq_ignore_ascii_case(found) {
        return true;
    }
    let (a, b) = (meant.chars().count(), found.chars().count());
    let slips = if a < 5 { 1 } else { 2 };
    // Lengths first: a long name is not compared letter by letter.
    a.abs_diff(b) <= slips && names::distance(meant, found) <= slips
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::protocol::WrongExport;

    #[test]
    fn exports_rows_name_everything_missing_together() {
        let r = ExportsReport {
            missing: vec!["description".into(), "inputSchema".into(), "run".into()],
            wrong: vec![],
            empty_description: false,
            has_default: false,
            others: vec![],
        };
        assert_eq!(
            exports("x.mjs", &r),
            "plugins/x.mjs is not served: it does not export description, inputSchema or run (add `export const description = ...`, `export const inputSchema = ...` and `export async function run(args, context) { ... }`)"
        );
        // Exports of its own and none of the three: code for other tools, in the wrong place.
        let r = ExportsReport {
            others: vec!["slugify".into()],
            ..r
        };
        assert_eq!(
            exports("x.mjs", &r),
            "plugins/x.mjs is not served: it does not export description, inputSchema or run (it exports \"slugify\"; a module other tools import goes in a subfolder, such as plugins/lib/, where it is never taken for a tool)"
        );
        // One export named as another host names one of the three: shared code still.
        let r = ExportsReport {
            others: vec!["main".into(), "slugify".into()],
            ..r
        };
        assert!(
            exports("x.mjs", &r).ends_with(&format!(
                "(it exports \"main\", \"slugify\"; {SHARED_CODE})"
            )),
            "{}",
            exports("x.mjs", &r)
        );
        // Beside the other two, one named as another host names it is the one meant.
        let one = ExportsReport {
            missing: vec!["run".into()],
            others: vec!["handler".into()],
            ..ExportsReport {
                missing: vec![],
                wrong: vec![],
                empty_description: false,
                has_default: false,
                others: vec![],
            }
        };
        assert!(
            exports("x.mjs", &one).contains("(it exports \"handler\", as other hosts name them"),
            "{}",
            exports("x.mjs", &one)
        );
        // Named as another host names them: a tool, not shared code.
        let r = ExportsReport {
            others: vec!["desc".into(), "schema".into(), "handler".into()],
            ..r
        };
        assert_eq!(
            exports("x.mjs", &r),
            "plugins/x.mjs is not served: it does not export description, inputSchema or run (it exports \"desc\", \"schema\" and \"handler\", as other hosts name them: here the three are named description, inputSchema and run)"
        );
        let r = ExportsReport {
            missing: vec!["run".into()],
            wrong: vec![WrongExport {
                name: "description".into(),
                is: "a number".into(),
                want: "a string".into(),
            }],
            empty_description: false,
            has_default: false,
            others: vec![],
        };
        assert_eq!(
            exports("x.mjs", &r),
            "plugins/x.mjs is not served: it does not export run (add `export async function run(args, context) { ... }`); its description is a number, not a string"
        );
    }

    #[test]
    fn another_hosts_name_is_pointed_at_beside_misspellings() {
        // Two slips and one other host's name: a tool all the same, and each one is told.
        let r = ExportsReport {
            missing: vec!["description".into(), "inputSchema".into(), "run".into()],
            wrong: vec![],
            empty_description: false,
            has_default: false,
            others: vec!["desc".into(), "inputSchem".into(), "runn".into()],
        };
        assert_eq!(
            exports("x.mjs", &r),
            "plugins/x.mjs is not served: it does not export description, inputSchema or run (it exports \"inputSchem\" and \"runn\": misspelt?) (it exports \"desc\", as other hosts name them: here the three are named description, inputSchema and run)"
        );
    }

    #[test]
    fn a_forged_report_names_only_the_contracts_exports() {
        let r = ExportsReport {
            missing: vec!["run".into(), "x".repeat(100_000), "descriptio".into()],
            wrong: (0..1000)
                .map(|i| WrongExport {
                    name: if i == 0 {
                        "description".into()
                    } else {
                        format!("e{i}")
                    },
                    is: "a number".repeat(100),
                    want: "a string".into(),
                })
                .collect(),
            empty_description: false,
            has_default: false,
            others: vec!["runn".into(); 100_000],
        };
        let row = exports("x.mjs", &r);
        assert!(row.len() < 1000, "{row}");
        assert!(
            row.starts_with(
                "plugins/x.mjs is not served: it does not export run (it exports \"runn\""
            ),
            "{row}"
        );
    }

    #[test]
    fn a_misspelt_export_is_pointed_at() {
        assert!(misspelt("description", "descripton"));
        assert!(misspelt("inputSchema", "inputschema"));
        assert!(misspelt("inputSchema", "input_schema"));
        assert!(misspelt("run", "runn"));
        assert!(!misspelt("run", "sum"));
        assert!(!misspelt("description", "helper"));
    }

    #[test]
    fn fixed_rows() {
        assert_eq!(
            served("ci-status"),
            "This instance serves a tool of its own: ci-status"
        );
        assert_eq!(
            bad_name("ci_status.mjs", "ci_status"),
            "plugins/ci_status.mjs is not served: ci_status is not a tool name: a name is a letter, then letters, digits and hyphens, up to 32 of them (rename it ci-status.mjs)"
        );
        assert_eq!(
            bad_name("_util.mjs", "_util"),
            "plugins/_util.mjs is not served: _util is not a tool name: a name is a letter, then letters, digits and hyphens, up to 32 of them; a module other tools import goes in a subfolder, such as plugins/lib/, where it is never taken for a tool"
        );
        assert_eq!(
            builtin("room.mjs", "room"),
            "plugins/room.mjs is not served: this server already has a tool called room"
        );
        // Past eight, how many more (helper-93: they were left out unsaid).
        let ten: Vec<String> = ('a'..='j').map(String::from).collect();
        assert_eq!(
            required_unlisted("x.mjs", &ten, &["k"]),
            "plugins/x.mjs: its inputSchema requires \"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\" \
             and 2 more, which are not among its properties (\"k\"), so a session is told nothing about them: \
             add them there with a description, or correct the names in required."
        );
        assert_eq!(
            not_module("x.ts"),
            "plugins/x.ts is not served: only .mjs files are tools: Node runs JavaScript, so write it as \
             x.mjs, or build it into one"
        );
        assert_eq!(
            import_stopped_host("x.mjs", "exit code 3", None),
            "plugins/x.mjs is not served: importing it stopped the plugin host (exit code 3)"
        );
        assert_eq!(
            description_cut("x.mjs", 12345),
            "plugins/x.mjs: its description is 12,345 characters; Claude Code shows a session only the first 2,048."
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(
            import_hung("x.mjs", 10),
            "plugins/x.mjs is not served: importing it took longer than 10 s"
        );
    }
}
