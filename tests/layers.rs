//! The daemon's layers, held: `daemon/lib.rs` declares its modules top first, and each folder's `mod.rs`
//! its own; a module names (with `crate::` or `super::`) only modules declared below it in the same
//! folder, or its own children. So no two modules name each other, and nothing slips upward unseen.
//! Test code is not held to it (a test may reach anything it checks).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each module's path (`["server", "http", "gate"]`) and its file.
fn modules(root: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("daemon/ is readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(root).expect("under daemon/");
            let mut segments: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if segments.last().is_some_and(|s| s == "mod" || s == "lib") {
                segments.pop();
            }
            if segments == ["main"] {
                continue;
            }
            out.push((segments, path));
        }
    }
    out.sort();
    out
}

/// The modules a file declares, in order (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared(source: &str) -> Vec<String> {
    code_lines(source)
        .into_iter()
        .filter_map(|(_, line)| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// The source with what is not code blanked: comments, and the insides of string and character
/// literals (so a brace or a path in them counts for nothing). Line breaks stay where they were.
fn blanked(source: &str) -> String {
    let c: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let keep = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        if ch(&c, i) == '/' && ch(&c, i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                keep(&mut out, c[i]);
                i += 1;
            }
        } else if ch(&c, i) == '/' && ch(&c, i + 1) == '*' {
            while i < c.len() && !(c[i] == '*' && ch(&c, i + 1) == '/') {
                keep(&mut out, c[i]);
                i += 1;
            }
            out.push_str("  ");
            i += 2;
        } else if ch(&c, i) == 'r'
            && (ch(&c, i + 1) == '"'
                || (ch(&c, i + 1) == '#' && (ch(&c, i + 2) == '"' || ch(&c, i + 2) == '#')))
            && (i == 0 || !is_ident(c[i - 1] as u8))
        {
            let hashes = c[i + 1..].iter().take_while(|h| **h == '#').count();
            out.push('r');
            out.extend(std::iter::repeat_n('#', hashes));
            out.push('"');
            i += 2 + hashes;
            let closes = |i: usize| {
                c.get(i) == Some(&'"') && (1..=hashes).all(|k| c.get(i + k) == Some(&'#'))
            };
            while i < c.len() && !closes(i) {
                keep(&mut out, c[i]);
                i += 1;
            }
            out.push('"');
            out.extend(std::iter::repeat_n('#', hashes));
            i += 1 + hashes;
        } else if ch(&c, i) == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    keep(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    keep(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if ch(&c, i) == '\'' && (ch(&c, i + 1) == '\\' || ch(&c, i + 2) == '\'') {
            // A character literal (a lifetime has no closing quote two along).
            out.push('\'');
            i += 1;
            while i < c.len() && c[i] != '\'' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(ch(&c, i));
            i += 1;
        }
    }
    out
}

/// The lines of non-test code, numbered from 1: comments, literals and `#[cfg(test)]` items blanked.
fn code_lines(source: &str) -> Vec<(usize, String)> {
    let mut kept = Vec::new();
    let mut skipping = false;
    let mut depth: i64 = 0;
    let mut opened = false;
    for (i, line) in blanked(source).lines().enumerate() {
        let trimmed = line.trim();
        if !skipping && trimmed.starts_with("#[cfg(test)]") {
            (skipping, depth, opened) = (true, 0, false);
            continue;
        }
        if skipping {
            for ch in line.chars() {
                match ch {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth <= 0) || (!opened && trimmed.ends_with(';')) {
                skipping = false;
            }
            continue;
        }
        if !trimmed.is_empty() {
            kept.push((i + 1, line.trim_end().to_string()));
        }
    }
    kept
}

/// Every module path a line names, resolved from `me`, the module path of its file.
fn named(line: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes = line.as_bytes();
    let mut at = 0;
    while at < line.len() {
        let rest = &line[at..];
        let (mut base, mut after) =
            if rest.starts_with("crate::") && (at == 0 || !is_ident(bytes[at - 1])) {
                (Vec::new(), at + "crate::".len())
            } else if rest.starts_with("super::") && (at == 0 || !is_ident(bytes[at - 1])) {
                let mut base: Vec<String> = me.to_vec();
                base.pop();
                let mut after = at + "super::".len();
                while line[after..].starts_with("super::") {
                    base.pop();
                    after += "super::".len();
                }
                (base, after)
            } else {
                at += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
        if line[after..].starts_with('{') {
            // A group: each name at its top level.
            let close = line[after..].find('}').map_or(line.len(), |c| after + c);
            for part in line[after + 1..close].split(',') {
                let first = part.trim().split("::").next().unwrap_or("").trim();
                if !first.is_empty() && first != "self" && first != "*" {
                    let mut path = base.clone();
                    path.push(first.to_string());
                    found.push(path);
                }
            }
            at = close;
            continue;
        }
        loop {
            let end = line[after..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(line.len(), |e| after + e);
            if end == after {
                break;
            }
            base.push(line[after..end].to_string());
            if line[end..].starts_with("::")
                && line[end + 2..].starts_with(|c: char| c.is_ascii_lowercase())
            {
                after = end + 2;
            } else {
                after = end;
                break;
            }
        }
        found.push(base);
        at = after.max(at + 1);
    }
    found
}

fn ch(c: &[char], i: usize) -> char {
    c.get(i).copied().unwrap_or('\0')
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[test]
fn no_module_names_one_above_it_and_no_two_name_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("daemon");
    let modules = modules(&root);
    // Each folder's declared order, top first (the crate's own under the empty path).
    let mut order: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for (path, file) in &modules {
        let source = std::fs::read_to_string(file).expect("a source file");
        let is_folder = file.ends_with("mod.rs") || file.ends_with("lib.rs");
        if is_folder {
            order.insert(path.clone(), declared(&source));
        }
    }
    let mut broken = Vec::new();
    for (me, file) in &modules {
        let source = std::fs::read_to_string(file).expect("a source file");
        let shown = file.strip_prefix(root.parent().unwrap()).unwrap().display();
        for (n, line) in code_lines(&source) {
            for target in named(&line, me) {
                // Where `me` and `target` part: siblings in the folder they share.
                let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
                let (Some(mine), Some(theirs)) = (me.get(common), target.get(common)) else {
                    // One is inside the other: a module naming its own children, or its folder's own items.
                    continue;
                };
                let folder = &me[..common];
                let Some(declared) = order.get(folder) else {
                    continue;
                };
                let (Some(a), Some(b)) = (
                    declared.iter().position(|d| d == mine),
                    declared.iter().position(|d| d == theirs),
                ) else {
                    // An item of the folder itself (a type in its mod.rs), not a module.
                    continue;
                };
                if b <= a {
                    let where_declared = if folder.is_empty() {
                        "daemon/lib.rs".to_string()
                    } else {
                        format!("daemon/{}/mod.rs", folder.join("/"))
                    };
                    broken.push(format!(
                        "{shown}:{n}: `{mine}` names `{theirs}`, which {where_declared} declares above it"
                    ));
                }
            }
        }
    }
    let layers: Vec<String> = order
        .iter()
        .map(|(folder, mods)| {
            let at = if folder.is_empty() {
                "daemon/lib.rs".into()
            } else {
                format!("daemon/{}/mod.rs", folder.join("/"))
            };
            format!("  {at}: {}", mods.join(" > "))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "{} import(s) against the layers (a module names only those declared below it; move what both \
         need below both):\n{}\nthe layers, top first:\n{}",
        broken.len(),
        broken.join("\n"),
        layers.join("\n")
    );
}

#[test]
fn the_reader_of_imports_reads_what_the_code_writes() {
    let me = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
    assert_eq!(
        named(
            "use crate::host::protocol::{Answer, Thrown};",
            &me("answer")
        ),
        vec![me("host/protocol")]
    );
    assert_eq!(
        named(
            "use super::{daemon::Daemon, transport};",
            &me("server/session")
        ),
        vec![me("server/daemon"), me("server/transport")]
    );
    assert_eq!(
        named(
            "    let x = super::super::jsonrpc::read(t);",
            &me("server/http/body")
        ),
        vec![me("server/jsonrpc/read")]
    );
    assert_eq!(
        named("use super::Host;", &me("host/link")),
        vec![me("host/Host")]
    );
    assert_eq!(
        named("pub use self::x; let a = my_crate::y;", &me("a")),
        Vec::<Vec<String>>::new()
    );
    let source = "use crate::a;\n// use crate::b;\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\nuse crate::d; // crate::e\n";
    let kept: Vec<String> = code_lines(source).into_iter().map(|(_, l)| l).collect();
    assert_eq!(kept, vec!["use crate::a;", "use crate::d;"]);
    let tricky = "#[cfg(test)]\nmod tests {\n    let s = \"{{\";\n    let c = '{';\n    let r = r#\"}\"#;\n}\nuse crate::after;\nfn f<'a>(x: &'a str) { let _ = \"crate::no\"; }\n";
    let kept: Vec<String> = code_lines(tricky).into_iter().map(|(_, l)| l).collect();
    assert_eq!(
        kept,
        vec![
            "use crate::after;",
            "fn f<'a>(x: &'a str) { let _ = \"         \"; }"
        ]
    );
    assert_eq!(
        declared("pub mod a;\nmod b;\n#[cfg(test)]\nmod t;\npub(crate) mod c;\n"),
        vec!["a", "b", "c"]
    );
}
