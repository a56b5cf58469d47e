//! Every plugins row of runtime.log, word for word, from a real start with real files in plugins/.

mod common;
use common::*;
use predicates::prelude::*;
use serde_json::json;

const GOOD: &str = r#"
export const description = "Says hello.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run() { return { text: "hello" }; }
"#;

fn good(name: &str) -> String {
    GOOD.replace("hello", name)
}

/// A good plugin called `name`, with `code` run first at its import.
fn good_after(code: &str, name: &str) -> String {
    format!("{code}\n{}", good(name))
}

/// Started with `name`.mjs, served, and b-waits.mjs beside it, whose import never settles (the start's
/// first host is not kept): importTimeoutSeconds 1, and the rows checked.
fn beside_a_waiting_file(name: &str, source: &str) -> (Instance, Daemon) {
    let inst = Instance::with_plugins(&[
        (&format!("{name}.mjs"), source),
        (
            "b-waits.mjs",
            "await new Promise(() => {});\nexport const run = 1;",
        ),
    ]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 1 }));
    let d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            format!("This instance serves a tool of its own: {name}"),
            "plugins/b-waits.mjs is not served: importing it took longer than 1 s".to_string(),
        ]
    );
    (inst, d)
}

/// A tool file whose inputSchema is `schema` (JavaScript), answering its arguments as JSON.
fn with_schema(schema: &str) -> String {
    format!(
        "export const description = 'd';\nexport const inputSchema = {schema};\nexport function run(a) {{ return {{ text: JSON.stringify(a) }}; }}\n"
    )
}

/// Calls `tool` as the Leader, with no arguments, and checks it answers `text`.
fn assert_calls(inst: &Instance, tool: &str, text: &str) {
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call(tool, serde_json::json!({})),
        (text.to_string(), false)
    );
}

#[test]
fn each_candidate_gets_one_row_in_file_name_order() {
    let inst = Instance::with_plugins(&[
        ("zeta.mjs", &good("zeta")),
        ("Alpha.mjs", &good("Alpha")),
        ("beta.mjs", &good("beta")),
        ("notes.md", "just notes"),
        ("words.txt", "a words file"),
        ("old.js", "module.exports = {}"),
        ("typed.ts", "export const x = 1"),
        ("legacy.cjs", ""),
        ("modern.mts", ""),
        ("shared/client.mjs", "export const x = 1;"),
    ]);
    std::fs::create_dir(inst.root.join("plugins/dir.mjs")).unwrap();
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: Alpha",
            "This instance serves a tool of its own: beta",
            "plugins/dir.mjs is not served: it is a folder (or a link to one), not a file. A tool is a file of JavaScript; rename the folder (shared code may live in any folder not named as a tool's file), or make the tool a file of that name",
            "plugins/legacy.cjs is not served: only .mjs files are tools: a tool is an ES module, so write it as legacy.mjs, with export in place of module.exports",
            "plugins/modern.mts is not served: only .mjs files are tools: Node runs JavaScript, so write it as modern.mjs, or build it into one",
            "plugins/old.js is not served: only .mjs files are tools: rename it old.mjs if it is meant as a tool (an ES module: export, not module.exports); code the tools import goes in a folder of plugins/, such as lib/old.mjs",
            "plugins/typed.ts is not served: only .mjs files are tools: Node runs JavaScript, so write it as typed.mjs, or build it into one",
            "This instance serves a tool of its own: zeta",
        ]
    );
}

#[test]
fn names_are_checked_before_the_file_is_imported() {
    // Both files would kill the host if imported: the rows prove they never were.
    let deadly = "process.kill(process.pid, 'SIGKILL');";
    let long = format!("{}.mjs", "a".repeat(33));
    let inst = Instance::with_plugins(&[
        ("ci_status.mjs", deadly),
        ("room.mjs", deadly),
        ("index.mjs", deadly),
        ("Room.mjs", deadly),
        ("9lives.mjs", deadly),
        (&long, deadly),
        ("ok.mjs", &good("ok")),
    ]);
    let _d = inst.start();
    let rule = "a name is a letter, then letters, digits and hyphens, up to 32 of them";
    assert_eq!(
        inst.rows("plugins"),
        [
            format!("plugins/9lives.mjs is not served: 9lives is not a tool name: {rule}"),
            "plugins/Room.mjs is not served: this server already has a tool called room, and Room differs from it only in case"
                .to_string(),
            // How long it is, which a reader counting 33 letters would miss (helper-99).
            format!(
                "plugins/{long} is not served: {} is not a tool name: {rule} (it is 33 characters long: \
                 shorten it to 32 at most)",
                "a".repeat(33)
            ),
            format!("plugins/ci_status.mjs is not served: ci_status is not a tool name: {rule} (rename it ci-status.mjs)"),
            "plugins/index.mjs is not served: this server already has a tool called index"
                .to_string(),
            "This instance serves a tool of its own: ok".to_string(),
            "plugins/room.mjs is not served: this server already has a tool called room"
                .to_string(),
        ]
    );
    assert!(
        inst.rows("host").is_empty(),
        "no host stopped: {:?}",
        inst.rows("host")
    );
}

#[test]
fn import_failures_name_the_error_and_where() {
    let inst = Instance::with_plugins(&[
        (
            "syntax.mjs",
            "export const description = \"x\";\nexport const x = ;\n",
        ),
        (
            "throws.mjs",
            "const a = 1;\nthrow new Error(\"no config here\\nsecond line\");\n",
        ),
        ("missing-import.mjs", "import \"./nowhere.mjs\";\n"),
        ("shared-throws.mjs", "import \"./lib/bad.mjs\";\n"),
        ("lib/bad.mjs", "\n\nnull.x;\n"),
        ("good.mjs", &good("good")),
        // A syntax error in a module it imports, by a path over two lines, behind a good one: V8 names
        // no place for it.
        (
            "uses-broken.mjs",
            "import { ok } from './lib/fine.mjs';\nimport {\n  h,\n} from \"./lib/broken.mjs\";\nexport const x = 1;\n",
        ),
        ("lib/fine.mjs", "export const ok = 1;\n"),
        // A missing export is no file's syntax: a JSON module imported beside it is not blamed.
        (
            "missing-export.mjs",
            "import data from './lib/data.json' with { type: 'json' };\nimport { nope } from './lib/fine.mjs';\nexport const x = data;\n",
        ),
        ("lib/data.json", "{ \"a\": 1 }\n"),
        // TypeScript in a .mjs: Node reads no types, and its words do not say so.
        (
            "ts.mjs",
            "interface Args { branch: string }\nexport const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport function run(args: Args) { return args.branch; }\n",
        ),
        (
            "lib/broken.mjs",
            "// helper\nexport function h() {\n  return {;\n}\n",
        ),
    ]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert_eq!(rows[0], "This instance serves a tool of its own: good");
    assert_eq!(
        rows[1],
        "plugins/missing-export.mjs is not served: importing it failed: SyntaxError: The requested module './lib/fine.mjs' does not provide an export named 'nope'"
    );
    let rows = [&rows[..1], &rows[2..]].concat();
    assert!(
        rows[1].starts_with("plugins/missing-import.mjs is not served: importing it failed: Error [ERR_MODULE_NOT_FOUND]: Cannot find module"),
        "{}",
        rows[1]
    );
    assert_eq!(
        rows[2],
        "plugins/shared-throws.mjs is not served: importing it failed: TypeError: Cannot read properties of null (reading 'x') (at lib/bad.mjs:3:6)"
    );
    assert_eq!(
        rows[3],
        "plugins/syntax.mjs is not served: importing it failed: SyntaxError: Unexpected token ';' (at 2:18)"
    );
    assert_eq!(
        rows[4],
        "plugins/throws.mjs is not served: importing it failed: Error: no config here\\nsecond line (at 2:7)"
    );
    assert!(
        rows[5].starts_with("plugins/ts.mjs is not served: importing it failed: SyntaxError: ")
            && rows[5].contains(
                " (it looks like TypeScript: a plugin is JavaScript, run as it is written, so take the types out, or compile it to .mjs)"
            ),
        "{}",
        rows[5]
    );
    assert_eq!(
        rows[6],
        "plugins/uses-broken.mjs is not served: importing it failed: SyntaxError: Unexpected token ';' (at lib/broken.mjs:3:11)"
    );
    assert_eq!(rows.len(), 7);
}

#[test]
fn an_import_that_ends_the_host_is_not_served_and_the_others_are() {
    let inst = Instance::with_plugins(&[
        ("a-good.mjs", &good("a")),
        // process.exit is answered in words (the next test); reallyExit is what it would have called.
        ("b-exits.mjs", "process.reallyExit(7);"),
        ("c-good.mjs", &good("c")),
        ("d-kills.mjs", "process.kill(process.pid, 'SIGKILL');"),
        ("e-good.mjs", &good("e")),
    ]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: a-good",
            "plugins/b-exits.mjs is not served: importing it stopped the plugin host (exit code 7)",
            "This instance serves a tool of its own: c-good",
            "plugins/d-kills.mjs is not served: importing it stopped the plugin host (signal SIGKILL)",
            "This instance serves a tool of its own: e-good",
        ]
    );
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("a-good", serde_json::json!({})),
        ("a".to_string(), false)
    );
    assert_eq!(
        s.call("e-good", serde_json::json!({})),
        ("e".to_string(), false)
    );
}

#[test]
fn an_import_that_calls_process_exit_is_refused_in_words() {
    let inst = Instance::with_plugins(&[
        (
            "quits.mjs",
            "const ready = false;\nif (!ready) process.exit(2);\n",
        ),
        ("ok.mjs", &good("ok")),
    ]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: ok",
            "plugins/quits.mjs is not served: importing it failed: it called process.exit(2), and a plugin cannot end the plugin host (at 2:21)",
        ]
    );
    assert!(
        inst.rows("host").is_empty(),
        "the host never stopped: {:?}",
        inst.rows("host")
    );
}

#[test]
fn an_import_that_hangs_is_not_served() {
    let inst = Instance::with_plugins(&[
        (
            "awaits-forever.mjs",
            "await new Promise(() => {});\nexport const run = 1;",
        ),
        ("loops-forever.mjs", "for (;;) {}"),
        ("ok.mjs", &good("ok")),
    ]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 1 }));
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "plugins/awaits-forever.mjs is not served: importing it took longer than 1 s",
            "plugins/loops-forever.mjs is not served: its code held the plugin host's event loop for more than 1 s while plugins were imported (at plugins/loops-forever.mjs:1:1)",
            "This instance serves a tool of its own: ok",
        ]
    );
    assert_calls(&inst, "ok", "ok");
}

#[test]
fn a_file_missing_or_mistyping_an_export_is_refused_whole() {
    let schema = "export const inputSchema = { type: 'object' };";
    let inst = Instance::with_plugins(&[
        ("empty.mjs", ""),
        (
            "no-run.mjs",
            &format!("export const description = 'd';\n{schema}"),
        ),
        ("two-missing.mjs", "export function run() {}"),
        (
            "desc-number.mjs",
            &format!("export const description = 42;\n{schema}\nexport function run() {{}}"),
        ),
        (
            "run-string.mjs",
            &format!("export const description = 'd';\n{schema}\nexport const run = 'go';"),
        ),
        (
            "schema-array.mjs",
            "export const description = 'd';\nexport const inputSchema = [];\nexport function run() {}",
        ),
        (
            "schema-null.mjs",
            "export const description = 'd';\nexport const inputSchema = null;\nexport function run() {}",
        ),
        (
            "mixed.mjs",
            "export const description = 7;\nexport const inputSchema = { type: 'object' };",
        ),
        (
            "blank.mjs",
            &format!("export const description = '  ';\n{schema}\nexport function run() {{}}"),
        ),
        (
            "default.mjs",
            "export default { description: 'd', inputSchema: { type: 'object' }, run() {} };",
        ),
        // The two others named, run the default: the form shown is run's (helper-81).
        (
            "default-run.mjs",
            "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport default async function run() {}",
        ),
        (
            "generator-run.mjs",
            &format!(
                "export const description = 'd';\n{schema}\nexport async function* run() {{ yield 'x'; }}"
            ),
        ),
        (
            "class-run.mjs",
            &format!("export const description = 'd';\n{schema}\nexport class run {{ }}"),
        ),
        (
            // What zod 4's z.object() makes: its own schema object, with a `type` of "object".
            "zod-object.mjs",
            "class ZodObject { constructor() { this.def = { type: 'object', shape: {} }; this.type = 'object'; } }\n\
             export const description = 'd';\nexport const inputSchema = new ZodObject();\nexport function run() {}",
        ),
        (
            "typo.mjs",
            "export const descripton = 'd';\nexport const inputschema = { type: 'object' };\nexport function runn() {}\nexport const helper = 1;",
        ),
        (
            // Named as another host names them: meant as a tool.
            "other-names.mjs",
            "export const desc = 'd';\nexport const schema = { type: 'object' };\nexport function handler() {}",
        ),
        (
            "helpers.mjs",
            "export const slugify = (s) => s;\nexport const clamp = (n) => n;",
        ),
    ]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "plugins/blank.mjs is not served: its description is empty (or only spaces): write what the tool does, and when to call it",
            "plugins/class-run.mjs is not served: its run is a class, not a function",
            "plugins/default-run.mjs is not served: it does not export run (it has a default export, and the three must be named exports: `export async function run(args, context) { ... }`)",
            "plugins/default.mjs is not served: it does not export description, inputSchema or run (it has a default export, and the three must be named exports: `export const description = ...`)",
            "plugins/desc-number.mjs is not served: its description is a number, not a string",
            "plugins/empty.mjs is not served: it does not export description, inputSchema or run (add `export const description = ...`, `export const inputSchema = ...` and `export async function run(args, context) { ... }`)",
            "plugins/generator-run.mjs is not served: its run is a generator function, not a function that returns its answer (an async one may await)",
            "plugins/helpers.mjs is not served: it does not export description, inputSchema or run (it exports \"clamp\", \"slugify\"; a module other tools import goes in a subfolder, such as plugins/lib/, where it is never taken for a tool)",
            "plugins/mixed.mjs is not served: it does not export run (add `export async function run(args, context) { ... }`); its description is a number, not a string",
            "plugins/no-run.mjs is not served: it does not export run (add `export async function run(args, context) { ... }`)",
            "plugins/other-names.mjs is not served: it does not export description, inputSchema or run (it exports \"desc\", \"handler\" and \"schema\", as other hosts name them: here the three are named description, inputSchema and run)",
            "plugins/run-string.mjs is not served: its run is a string, not a function",
            "plugins/schema-array.mjs is not served: its inputSchema is an array, not an object",
            "plugins/schema-null.mjs is not served: its inputSchema is null, not an object",
            "plugins/two-missing.mjs is not served: it does not export description or inputSchema (add `export const description = ...` and `export const inputSchema = ...`)",
            "plugins/typo.mjs is not served: it does not export description, inputSchema or run (it exports \"descripton\", \"inputschema\" and \"runn\": misspelt?)",
            "plugins/zod-object.mjs is not served: its inputSchema is a ZodObject, not a JSON schema written as a plain object (a zod schema is written as one by z.toJSONSchema(schema, { io: \"input\" }) in zod 4, zodToJsonSchema(schema) before)",
        ]
    );
}

#[test]
fn a_schema_that_is_not_an_object_schema_says_so() {
    let inst = Instance::with_plugins(&[
        ("a-string.mjs", &with_schema("{ type: 'string' }")),
        ("b-untyped.mjs", &with_schema("{ properties: {} }")),
        (
            "c-invalid.mjs",
            &with_schema("{ type: 'object', properties: { n: { type: 12 } } }"),
        ),
        (
            "d-remote.mjs",
            &with_schema(
                "{ type: 'object', properties: { n: { $ref: 'https://example.com/n.json' } } }",
            ),
        ),
        (
            "e-cycle.mjs",
            "const s = { type: 'object' }; s.self = s;\nexport const description = 'd';\nexport const inputSchema = s;\nexport function run() {}",
        ),
        (
            "g-uncallable.mjs",
            &with_schema(
                "{ type: 'object', properties: { a: { type: 'string' } }, required: ['a', 'b'], additionalProperties: false }",
            ),
        ),
        (
            "f-local-ref.mjs",
            &with_schema(
                "{ type: 'object', $defs: { b: { type: 'string' } }, properties: { n: { $ref: '#/$defs/b' } } }",
            ),
        ),
    ]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert_eq!(
        rows[0],
        "plugins/a-string.mjs is not served: its inputSchema is not an object schema: its type is \"string\", not \"object\""
    );
    assert_eq!(
        rows[1],
        "plugins/b-untyped.mjs is not served: its inputSchema is not an object schema: it has no \"type\": \"object\" at its root"
    );
    assert!(
        rows[2].starts_with(
            "plugins/c-invalid.mjs is not served: its inputSchema is not a valid JSON schema (at /properties/"
        ),
        "{}",
        rows[2]
    );
    assert_eq!(
        rows[3],
        "plugins/d-remote.mjs is not served: its inputSchema refers to \"https://example.com/n.json\" outside itself; a tool's schema must stand on its own (a $ref starts with #, or names an $id of the schema)"
    );
    assert!(rows[4].starts_with("plugins/e-cycle.mjs is not served: its inputSchema cannot be written as JSON: it holds itself (its property 'self' closes the circle)"), "{}", rows[4]);
    assert_eq!(
        rows[5],
        "This instance serves a tool of its own: f-local-ref"
    );
    // Where its $ref points there is no description either.
    assert_eq!(
        rows[6],
        "plugins/f-local-ref.mjs: its input \"n\" has no description, so a session is told nothing about what to put there; add a description to it in inputSchema."
    );
    assert_eq!(
        rows[7],
        "plugins/g-uncallable.mjs is not served: its inputSchema requires \"b\", which is not among its properties, and its additionalProperties is false, so no call could pass it"
    );
    assert_eq!(rows.len(), 8);
}

#[test]
fn a_schema_nested_deeper_than_the_daemon_reads_says_so_at_once() {
    // 63 levels of properties nest 127 deep as JSON: past what a protocol line may nest, it was taken
    // for an import that never finished, and said so after importTimeoutSeconds.
    let nested = |levels: usize| {
        let mut s = "{ type: 'object', description: 'leaf' }".to_string();
        for _ in 0..levels {
            s = format!("{{ type: 'object', description: 'level', properties: {{ a: {s} }} }}");
        }
        s
    };
    let plugin = |levels: usize| {
        format!(
            "export const description = 'd';\nexport const inputSchema = {};\nexport function run() {{ return {{ text: 'ran' }}; }}",
            nested(levels)
        )
    };
    let inst = Instance::with_plugins(&[("deep.mjs", &plugin(63)), ("fine.mjs", &plugin(40))]);
    inst.set_config(json!({ "importTimeoutSeconds": 600 }));
    inst.cmd()
        .args(["check", "plugins/deep.mjs"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "plugins/deep.mjs would not be served: its inputSchema nests 127 levels deep, more than the 100 this server reads; flatten it",
        ));
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(
        rows.contains(&"plugins/deep.mjs is not served: its inputSchema nests 127 levels deep, more than the 100 this server reads; flatten it".to_string()),
        "{rows:?}"
    );
    assert!(
        rows.contains(&"This instance serves a tool of its own: fine".to_string()),
        "{rows:?}"
    );
}

#[test]
fn an_empty_or_missing_plugins_folder_serves_the_builtins() {
    let inst = Instance::new();
    std::fs::remove_dir(inst.root.join("plugins")).unwrap();
    let _d = inst.start();
    assert!(inst.rows("plugins").is_empty());
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.tool_names(), ["index", "room"]);
}

#[test]
fn a_description_longer_than_claude_code_shows_is_served_with_a_second_row() {
    let long = format!(
        r#"export const description = "{}";
export const inputSchema = {{ type: "object" }};
export function run() {{ return {{ text: "ok" }}; }}
"#,
        "word ".repeat(600)
    );
    let edge = format!(
        r#"export const description = "{}";
export const inputSchema = {{ type: "object" }};
export function run() {{ return {{ text: "ok" }}; }}
"#,
        "é".repeat(2048)
    );
    // Counted as a JavaScript string's length, as the client counts: an emoji is two.
    let emoji = format!(
        r#"export const description = "{}";
export const inputSchema = {{ type: "object" }};
export function run() {{ return {{ text: "ok" }}; }}
"#,
        "😀".repeat(1100)
    );
    let inst = Instance::with_plugins(&[
        ("long.mjs", &long),
        ("edge.mjs", &edge),
        ("emoji.mjs", &emoji),
    ]);
    let want = [
        "This instance serves a tool of its own: edge",
        "This instance serves a tool of its own: emoji",
        "plugins/emoji.mjs: its description is 2,200 characters; Claude Code shows a session only the first 2,048.",
        "This instance serves a tool of its own: long",
        "plugins/long.mjs: its description is 3,000 characters; Claude Code shows a session only the first 2,048.",
    ];
    inst.cmd()
        .args(["check"])
        .assert()
        .success()
        .stdout(format!(
            "{}\n",
            want.join("\n")
                .replace("This instance serves", "This instance would serve")
        ));
    let _d = inst.start();
    assert_eq!(inst.rows("plugins"), want);
    let mut s = inst.session("lead");
    s.initialize();
    let (text, refused) = s.call("long", serde_json::json!({}));
    assert_eq!((text.as_str(), refused), ("ok", false), "still served");
}

#[test]
fn file_names_with_control_characters_are_shown_escaped_everywhere() {
    let inst = Instance::with_plugins(&[
        ("red\u{1b}[31m.mjs", &good("x")),
        ("two\nlines.mjs", &good("y")),
    ]);
    let d = inst.start();
    let want = [
        "plugins/red\\u{1b}[31m.mjs is not served: red\\u{1b}[31m is not a tool name: a name is a letter, then letters, digits and hyphens, up to 32 of them",
        "plugins/two\\nlines.mjs is not served: two\\nlines is not a tool name: a name is a letter, then letters, digits and hyphens, up to 32 of them",
    ];
    assert_eq!(inst.rows("plugins"), want);
    let out = inst
        .cmd()
        .arg("restart")
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(!out.contains('\u{1b}'), "{out:?}");
    assert!(
        out.starts_with(&format!("{}\n{}\n", want[0], want[1])),
        "{out}"
    );
    let mut s = inst.session("lead");
    s.initialize();
    let (index, _) = s.call("index", serde_json::json!({}));
    assert!(
        !index.contains('\u{1b}') && index.contains(want[1]),
        "{index}"
    );
    drop(d);
}

/// The index names each tool once, and holds to what an answer may be (helper-94: a tool listed under
/// Tools and again as its plugins row; 45 KB with 300 plugins under a maxAnswerBytes of 600).
#[test]
fn the_index_names_each_tool_once_and_holds_to_an_answers_size() {
    let inst = Instance::with_plugins(&[("whoami.mjs", &good("whoami")), ("old.js", "")]);
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let (index, _) = s.call("index", serde_json::json!({}));
    assert!(!index.contains("serves a tool of its own"), "{index}");
    assert!(index.contains("  whoami: "), "{index}");
    assert!(
        index.contains("1 file served, its tool listed above"),
        "{index}"
    );
    assert!(index.contains("  plugins/old.js is not served"), "{index}");
    drop(s);
    drop(d);
    for i in 0..40 {
        inst.write_plugin(&format!("t{i}.mjs"), &good(&format!("t{i}")));
    }
    inst.set_config(serde_json::json!({ "maxAnswerBytes": 1024 }));
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let (index, refused) = s.call("index", serde_json::json!({}));
    assert!(!refused, "{index}");
    let sent = serde_json::to_string(&index).unwrap().len() - 2;
    assert!(sent <= 1024, "{sent} bytes as sent: {index}");
    assert!(
        index.ends_with("more lines are not shown: an answer holds at most 1,024 bytes (maxAnswerBytes); `ovai status` in the instance shows them all.)"),
        "{index}"
    );
}

#[test]
fn tools_whose_names_differ_only_in_case_are_served_neither() {
    let inst = Instance::with_plugins(&[
        ("whoami.mjs", &good("whoami")),
        ("WHOAMI.mjs", &good("WHOAMI")),
        ("other.mjs", &good("other")),
    ]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "plugins/WHOAMI.mjs is not served: WHOAMI differs from plugins/whoami.mjs only in case: one tool could pass itself off as the other, and on a disk that ignores case the two are one file. Rename one, then `ovai restart`",
            "This instance serves a tool of its own: other",
            "plugins/whoami.mjs is not served: whoami differs from plugins/WHOAMI.mjs only in case: one tool could pass itself off as the other, and on a disk that ignores case the two are one file. Rename one, then `ovai restart`",
        ]
    );
}

#[test]
fn a_property_without_a_description_is_served_with_a_row_naming_it() {
    // The specification: every property wants a description of its own, the only place a session is
    // told what to put there. A file that leaves one out is still served, and told which.
    let inst = Instance::with_plugins(&[
        (
            "bare.mjs",
            &with_schema("{ type: 'object', properties: { branch: { type: 'string' } } }"),
        ),
        (
            "deep.mjs",
            &with_schema(
                "{ type: 'object', properties: { \
                 filter: { type: 'object', description: 'What to look at.', properties: { path: { type: 'string' }, depth: { type: 'integer', description: 'How deep.' } } }, \
                 files: { type: 'array', description: 'Files.', items: { type: 'object', properties: { name: { type: 'string', description: '   ' } } } }, \
                 any: true } }",
            ),
        ),
        (
            "fine.mjs",
            &with_schema(
                "{ type: 'object', $defs: { b: { type: 'string', description: 'A branch.' } }, properties: { \
                 branch: { $ref: '#/$defs/b' }, n: { type: 'integer', description: 'How many.' } } }",
            ),
        ),
        (
            // Looked for through references (a cycle is followed once), the branches of anyOf and
            // oneOf, additionalProperties and prefixItems.
            "nested.mjs",
            &with_schema(
                "{ type: 'object', \
                 $defs: { node: { type: 'object', properties: { next: { $ref: '#/$defs/node', description: 'The next.' }, label: { type: 'string' } } }, plain: { type: 'string' } }, \
                 properties: { \
                 head: { $ref: '#/$defs/node', description: 'The first.' }, \
                 kind: { $ref: '#/$defs/plain' }, \
                 pick: { description: 'One of.', anyOf: [ { type: 'object', properties: { a: { type: 'string' } } }, { type: 'null' } ] }, \
                 tags: { type: 'object', description: 'Tags.', additionalProperties: { type: 'object', properties: { v: { type: 'string' } } } }, \
                 pair: { type: 'array', description: 'A pair.', prefixItems: [ { type: 'object', properties: { x: { type: 'number' } } } ] }, \
                 either: { oneOf: [ { type: 'string', description: 'A name.' }, { type: 'integer', description: 'An id.' } ] } } }",
            ),
        ),
    ]);
    let want = [
        "This instance serves a tool of its own: bare",
        "plugins/bare.mjs: its input \"branch\" has no description, so a session is told nothing about what to put there; add a description to it in inputSchema.",
        "This instance serves a tool of its own: deep",
        "plugins/deep.mjs: its inputs \"filter.path\", \"files[].name\" and \"any\" have no description, so a session is told nothing about what to put there; add a description to each in inputSchema.",
        "This instance serves a tool of its own: fine",
        "This instance serves a tool of its own: nested",
        "plugins/nested.mjs: its inputs \"head.label\", \"kind\", \"pick.a\", \"tags.*.v\" and \"pair[0].x\" have no description, so a session is told nothing about what to put there; add a description to each in inputSchema.",
    ];
    inst.cmd()
        .args(["check"])
        .assert()
        .success()
        .stdout(format!(
            "{}\n",
            want.join("\n")
                .replace("This instance serves", "This instance would serve")
        ));
    let _d = inst.start();
    assert_eq!(inst.rows("plugins"), want);
}

#[test]
fn imports_run_together_so_files_that_wait_cost_one_timeout_and_do_not_run_on() {
    // a-waits settles only once b-sets has been imported: one at a time, it would wait for a file
    // that is imported only after it.
    let waits = good_after(
        "await new Promise((resolve) => { const t = setInterval(() => { if (globalThis.bSet) { clearInterval(t); resolve(); } }, 5); });",
        "a-waits",
    );
    let sets = format!("globalThis.bSet = true;\n{}", good("b-sets"));
    // c-counts says on disk each time it is imported: a host started again imports it again.
    let counts = good_after(
        "import { appendFileSync } from 'node:fs';\nappendFileSync('work/imports.txt', 'c-counts\\n');",
        "c-counts",
    );
    let forever = "await new Promise(() => {});\nexport const run = 1;";
    let inst = Instance::with_plugins(&[
        ("a-waits.mjs", &waits),
        ("b-sets.mjs", &sets),
        ("c-counts.mjs", &counts),
        ("d-forever.mjs", forever),
        ("e-forever.mjs", forever),
    ]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 2 }));
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: a-waits",
            "This instance serves a tool of its own: b-sets",
            "This instance serves a tool of its own: c-counts",
            "plugins/d-forever.mjs is not served: importing it took longer than 2 s",
            "plugins/e-forever.mjs is not served: importing it took longer than 2 s",
        ]
    );
    // Imported with everything by the first host, then with the files that finished by a second one,
    // which does not run the two that hung (one at a time, a host would be started after each).
    assert_eq!(
        std::fs::read_to_string(inst.root.join("work/imports.txt")).unwrap(),
        "c-counts\nc-counts\n",
    );
    assert_calls(&inst, "a-waits", "a-waits");
}

#[test]
fn a_file_saved_while_it_was_being_read_is_not_served_and_says_so() {
    // It changes itself as it is imported: which of its versions the host runs is not known.
    let edits = good_after(
        "import { appendFileSync } from 'node:fs';\nappendFileSync(new URL(import.meta.url), '\\n// changed as it was read\\n');",
        "edits",
    );
    let inst = Instance::with_plugins(&[("edits.mjs", &edits), ("ok.mjs", &good("ok"))]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "plugins/edits.mjs is not served: it changed while plugins/ was being read, so which of its versions would run is not known; run `ovai restart` to serve it as it is now",
            "This instance serves a tool of its own: ok",
        ]
    );
    assert_calls(&inst, "ok", "ok");
}

#[test]
fn a_file_left_out_for_waiting_does_not_go_on_running_in_the_host_that_serves() {
    // late.mjs waits at import until go.txt appears, then marks that it ran; the probe looks for go.txt
    // the same way, and says so a moment after it saw it.
    let late = "import { existsSync } from 'node:fs';\n\
        await new Promise((r) => { const t = setInterval(() => { if (existsSync('go.txt')) { clearInterval(t); r(); } }, 5); });\n\
        globalThis.lateRan = true;\nexport const run = 1;";
    let probe = "import { existsSync } from 'node:fs';\n\
         const t = setInterval(() => { if (existsSync('go.txt')) { clearInterval(t); setTimeout(() => { globalThis.sawGo = true; }, 100); } }, 5);\n\
         export const description = 'Says what it saw.';\nexport const inputSchema = { type: 'object' };\n\
         export function run() { return { text: `${globalThis.sawGo === true} ${globalThis.lateRan === true}` }; }\n";
    let inst = Instance::with_plugins(&[("late.mjs", late), ("probe.mjs", probe)]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 1 }));
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "plugins/late.mjs is not served: importing it took longer than 1 s",
            "This instance serves a tool of its own: probe",
        ]
    );
    std::fs::write(inst.root.join("go.txt"), "go").unwrap();
    let mut s = inst.session("lead");
    s.initialize();
    let seen = wait_until("the probe to see go.txt", || {
        let (text, _) = s.call("probe", serde_json::json!({}));
        text.starts_with("true").then_some(text)
    });
    assert_eq!(
        seen, "true false",
        "the file left out ran on in the host that serves"
    );
}

#[test]
fn a_plugin_writing_to_fd_4_cannot_report_another_file_or_write_a_row() {
    // At import, the forger reports every load id it can guess as a served tool and writes an error
    // row blaming another file.
    let forger = format!(
        "import {{ writeSync }} from 'node:fs';\n\
         for (let id = 1; id < 64; id++) writeSync(4, JSON.stringify({{ t: 'loaded', id, ok: true, description: 'forged', inputSchema: {{ type: 'object' }} }}) + '\\n');\n\
         writeSync(4, JSON.stringify({{ t: 'stray', how: 'threw', message: 'forged', at: 'plugins/b-waits.mjs:1:1' }}) + '\\n');\n{}",
        good("a-forger")
    );
    let (inst, _d) = beside_a_waiting_file("a-forger", &forger);
    let rows = inst.rows("host");
    assert!(!rows.iter().any(|r| r.contains("forged")), "{rows:#?}");
}

#[test]
fn a_file_that_ends_the_host_from_a_timer_while_others_import_is_the_one_left_out() {
    // a-killer imports cleanly and ends the host a moment later, while b-slow is still importing: the
    // host says which file ended it, and that file, not b-slow, is left out.
    let killer = good_after("setTimeout(() => process.reallyExit(3), 100);", "a-killer");
    let slow = good_after("await new Promise((r) => setTimeout(r, 2000));", "b-slow");
    let inst = Instance::with_plugins(&[
        ("a-killer.mjs", &killer),
        ("b-slow.mjs", &slow),
        ("c-good.mjs", &good("c-good")),
    ]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "plugins/a-killer.mjs is not served: importing it stopped the plugin host (exit code 3)",
            "This instance serves a tool of its own: b-slow",
            "This instance serves a tool of its own: c-good",
        ]
    );
    assert_calls(&inst, "b-slow", "b-slow");
}

#[test]
fn a_file_whose_timer_holds_the_event_loop_while_others_import_is_the_one_left_out() {
    // a-spins imports cleanly, and a moment later its timer holds the event loop for good while b-slow
    // is still importing: the host's stack names a-spins, which is left out, not b-slow.
    let spins = good_after("setTimeout(() => { for (;;) {} }, 100);", "a-spins");
    let slow = good_after("await new Promise((r) => setTimeout(r, 1000));", "b-slow");
    let inst = Instance::with_plugins(&[
        ("a-spins.mjs", &spins),
        ("b-slow.mjs", &slow),
        ("c-good.mjs", &good("c-good")),
    ]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 2 }));
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "plugins/a-spins.mjs is not served: its code held the plugin host's event loop for more than 2 s while plugins were imported (at plugins/a-spins.mjs:1:20)",
            "This instance serves a tool of its own: b-slow",
            "This instance serves a tool of its own: c-good",
        ]
    );
    assert_calls(&inst, "b-slow", "b-slow");
}

#[test]
fn junk_a_plugin_writes_to_the_watchers_socket_does_not_hide_where_it_holds_the_host() {
    // Bytes that are not UTF-8, and a line longer than any answer, written to fd 5 before the loop.
    let evil = good_after(
        "import fs from 'node:fs';\n\
         fs.writeSync(5, Buffer.from([0xff, 0x0a]));\n\
         fs.writeSync(5, 'a'.repeat(70000));\n\
         setTimeout(() => { for (;;) {} }, 100);",
        "a-evil",
    );
    let slow = good_after("await new Promise((r) => setTimeout(r, 1000));", "b-slow");
    let inst = Instance::with_plugins(&[("a-evil.mjs", &evil), ("b-slow.mjs", &slow)]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 2 }));
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(
        rows[0].starts_with("plugins/a-evil.mjs is not served: its code held the plugin host's event loop for more than 2 s while plugins were imported (at plugins/a-evil.mjs:4:"),
        "{rows:#?}"
    );
    assert_eq!(rows[1], "This instance serves a tool of its own: b-slow");
}

#[test]
fn a_file_holding_the_event_loop_in_native_code_is_found_one_at_a_time() {
    // A synchronous child process holds the main thread where no pause reaches it, so the host cannot
    // say where: the files go one at a time, and the one importing when the host stops answering is
    // the one left out.
    let sleeps = "import { execSync } from 'node:child_process';\nexecSync('sleep 30');\n";
    let inst = Instance::with_plugins(&[
        ("a-good.mjs", &good("a-good")),
        ("b-sleeps.mjs", sleeps),
        ("c-good.mjs", &good("c-good")),
    ]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 1 }));
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: a-good",
            "plugins/b-sleeps.mjs is not served: importing it took longer than 1 s",
            "This instance serves a tool of its own: c-good",
        ]
    );
    assert_calls(&inst, "c-good", "c-good");
}

#[test]
fn an_error_left_behind_at_import_is_written_once_though_a_start_imports_it_twice() {
    // b-waits never settles, so the start's first host is not kept, and a second imports a-throws
    // again: its error, left behind in both, is one row.
    let throws = good_after(
        "setTimeout(() => { throw new Error('left behind'); }, 0);",
        "a-throws",
    );
    let (inst, _d) = beside_a_waiting_file("a-throws", &throws);
    // The second host's error may still be on its way: a call answered after it comes after it.
    assert_calls(&inst, "a-throws", "a-throws");
    let strays: Vec<String> = inst
        .rows("host")
        .into_iter()
        .filter(|r| r.starts_with("A plugin threw outside a call"))
        .collect();
    assert_eq!(
        strays,
        [
            "A plugin threw outside a call (at plugins/a-throws.mjs:1:26): Error: left behind. The plugin host goes on; errors from the same place are not written here again until it is started again."
        ]
    );
}

#[test]
fn a_plugin_cannot_get_another_file_left_out_by_writing_the_hosts_words_on_stderr() {
    // a-forger writes the line the host writes when a plugin ends it, naming c-good, and then has the
    // host killed from outside (no place of its own said): the host's own word is not on stderr.
    let forger = "import { execSync } from 'node:child_process';\n\
         process.stderr.write('ovai host: a plugin ended the plugin host with process.reallyExit(1) (at plugins/c-good.mjs:1:1)\\n');\n\
         execSync('kill -9 ' + process.pid);\n";
    let inst = Instance::with_plugins(&[
        ("a-forger.mjs", forger),
        ("b-good.mjs", &good("b-good")),
        ("c-good.mjs", &good("c-good")),
    ]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert_eq!(rows.len(), 3, "{rows:#?}");
    assert!(
        rows[0].starts_with(
            "plugins/a-forger.mjs is not served: importing it stopped the plugin host ("
        ),
        "{rows:#?}"
    );
    assert_eq!(
        rows[1..],
        [
            "This instance serves a tool of its own: b-good",
            "This instance serves a tool of its own: c-good",
        ]
    );
}

#[test]
fn files_that_import_each_other_in_a_cycle_are_refused_naming_the_error() {
    // Each reads the other's export while it is being evaluated: one of them meets it uninitialised.
    let a = "import { description as other } from './b-cycle.mjs';\nexport const description = 'a ' + other;\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'a' }; }\n";
    let b = "import { description as other } from './a-cycle.mjs';\nexport const description = 'b ' + other;\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'b' }; }\n";
    let inst = Instance::with_plugins(&[
        ("a-cycle.mjs", a),
        ("b-cycle.mjs", b),
        ("ok.mjs", &good("ok")),
    ]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 2 }));
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert_eq!(rows.len(), 3, "{rows:#?}");
    for (row, file) in rows.iter().zip(["a-cycle", "b-cycle"]) {
        assert!(
            row.starts_with(&format!(
                "plugins/{file}.mjs is not served: importing it failed: ReferenceError: "
            )),
            "{rows:#?}"
        );
    }
    assert_eq!(rows[2], "This instance serves a tool of its own: ok");
}

#[test]
fn time_another_file_holds_the_event_loop_does_not_count_against_a_file_still_importing() {
    // a-busy holds the host's event loop for 1.5 s, a second after it was imported; b-waits finishes
    // importing at 1.8 s, but can only say so once the loop is free again, at 2.5 s: past the timeout
    // of 2 s if the held time counted.
    let busy = good_after(
        "setTimeout(() => { const t = Date.now(); while (Date.now() - t < 1500) {} }, 1000);",
        "a-busy",
    );
    let waits = good_after("await new Promise((r) => setTimeout(r, 1800));", "b-waits");
    let inst = Instance::with_plugins(&[("a-busy.mjs", &busy), ("b-waits.mjs", &waits)]);
    inst.set_config(serde_json::json!({ "importTimeoutSeconds": 2 }));
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: a-busy",
            "This instance serves a tool of its own: b-waits",
        ]
    );
}

#[test]
fn a_file_removed_while_it_was_being_read_is_not_served_and_says_so() {
    let removes = good_after(
        "import { rmSync } from 'node:fs';\nrmSync(new URL(import.meta.url));",
        "removes",
    );
    let inst = Instance::with_plugins(&[("removes.mjs", &removes), ("ok.mjs", &good("ok"))]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: ok",
            "plugins/removes.mjs is not served: it was removed (or cannot be read) while plugins/ was being read",
        ]
    );
}

#[test]
fn junk_before_a_loaded_line_whose_schema_holds_t_members_loses_nothing() {
    // The junk a plugin writes to fd 4 at import stands before the host's `loaded` line, whose schema
    // holds objects that open as messages do (`{"t":"v0"}`): they are not taken for the message.
    let plugin = r#"import { writeSync } from "node:fs";
writeSync(4, "junk");
export const description = "Tagged examples.";
export const inputSchema = { type: "object", properties: { p: { type: "object", description: "p",
  examples: [{ t: "v0" }, { t: "v1" }, { t: "v2" }, { t: "v3" }, { t: "v4" }] } } };
export function run() { return { text: "ran" }; }
"#;
    let inst = Instance::with_plugins(&[("tagged.mjs", plugin)]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(
        rows.contains(&"This instance serves a tool of its own: tagged".to_string()),
        "{rows:?}"
    );
}

#[test]
fn a_link_that_leads_to_no_file_is_named_as_one() {
    let inst = Instance::with_plugins(&[("echo.mjs", &good("echo"))]);
    let plugins = inst.root.join("plugins");
    std::os::unix::fs::symlink(plugins.join("gone.js"), plugins.join("dangling.mjs")).unwrap();
    std::os::unix::fs::symlink(plugins.join("loop.mjs"), plugins.join("loop.mjs")).unwrap();
    // Through a file, as if it were a folder.
    std::os::unix::fs::symlink(plugins.join("echo.mjs/x"), plugins.join("through.mjs")).unwrap();
    // Before, the host's import said it: "Cannot find module … imported from …/.ovai/host.mjs".
    inst.cmd()
        .args(["check"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("plugins/dangling.mjs would not be served: it is a link that leads to no file, not a file."));
    let _d = inst.start();
    let rows = inst.rows("plugins");
    for file in ["dangling", "loop", "through"] {
        let row = format!(
            "plugins/{file}.mjs is not served: it is a link that leads to no file, not a file. A tool is a file of JavaScript; remove it (rm plugins/{file}.mjs)"
        );
        assert!(rows.contains(&row), "{rows:?}");
    }
    assert_calls(&inst, "echo", "echo");
}

/// Anyone who can write in plugins/ (a seat's agent, a plugin: the box keeps the folder writable) can
/// leave there something that is not a file. A FIFO waits for a writer for ever and /dev/zero never ends:
/// neither is read, and each gets a row. A file past what a plugin file may be is not read either.
#[test]
fn a_fifo_a_device_or_a_huge_file_in_plugins_is_named_and_stops_nothing() {
    let inst = Instance::with_plugins(&[("echo.mjs", &good("echo"))]);
    let plugins = inst.root.join("plugins");
    nix::unistd::mkfifo(&plugins.join("pipe.mjs"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink("/dev/zero", plugins.join("zero.mjs")).unwrap();
    // Sparse: 65 MiB on no disk at all.
    std::fs::File::create(plugins.join("vast.mjs"))
        .unwrap()
        .set_len(65 * 1024 * 1024)
        .unwrap();
    let d = inst.start();
    let expected = [
        "This instance serves a tool of its own: echo",
        "plugins/pipe.mjs is not served: it is a FIFO, not a file. A tool is a file of JavaScript; remove it (rm plugins/pipe.mjs)",
        "plugins/vast.mjs is not served: it is 68,157,440 bytes, more than the 67,108,864 a plugin file may be; put the bulk in a module it imports from a folder in plugins/",
        "plugins/zero.mjs is not served: it is a device, not a file. A tool is a file of JavaScript; remove it (rm plugins/zero.mjs)",
    ];
    assert_eq!(inst.rows("plugins"), expected);
    assert_calls(&inst, "echo", "echo");
    // One more, while it runs: the watcher and a restart read around it too. Its name holds what a
    // shell would act on: the advice, pasted, removes the file and runs nothing.
    nix::unistd::mkfifo(&plugins.join("later;id.mjs"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    inst.cmd().arg("restart").assert().code(1);
    let rows = inst.rows("plugins");
    assert!(
        rows.contains(&"plugins/later;id.mjs is not served: it is a FIFO, not a file. A tool is a file of JavaScript; remove it (rm 'plugins/later;id.mjs')".to_string()),
        "{rows:#?}"
    );
    assert_calls(&inst, "echo", "echo");
    assert!(d.status().is_some());
}

/// A folder named as a tool's file (or a link to one) is most likely a tool meant to be there: it gets a
/// row, where it was passed over in silence; folders of shared code with other names stay unsaid.
#[test]
fn a_folder_named_as_a_tools_file_is_named() {
    let inst = Instance::with_plugins(&[("echo.mjs", &good("echo"))]);
    let plugins = inst.root.join("plugins");
    std::fs::create_dir(plugins.join("dir.mjs")).unwrap();
    std::fs::create_dir(plugins.join("lib")).unwrap();
    std::os::unix::fs::symlink("lib", plugins.join("linked.mjs")).unwrap();
    let _d = inst.start();
    let then = "not a file. A tool is a file of JavaScript; rename the folder (shared code may live in any folder not named as a tool's file), or make the tool a file of that name";
    assert_eq!(
        inst.rows("plugins"),
        [
            format!("plugins/dir.mjs is not served: it is a folder (or a link to one), {then}"),
            "This instance serves a tool of its own: echo".to_string(),
            format!("plugins/linked.mjs is not served: it is a folder (or a link to one), {then}"),
        ]
    );
    assert_calls(&inst, "echo", "echo");
}

/// A key of an inputSchema that looks like a slip for a JSON Schema keyword (`requried`) is ignored by
/// every validator, so what it meant to check is not: the file is served, and a row says so. A keyword
/// of its own (`x-units`), a value (`default`), OpenAPI's `example` and property names are not slips.
#[test]
fn a_schema_keyword_misspelt_is_named() {
    let schema = r#"{ type: "object", requried: ["n"], properties: { n: { type: "number", description: "A number.", minimun: 1, "x-units": "m", default: { requried: 1 }, example: 3 }, requried: { type: "string", description: "Named so." } } }"#;
    let inst = Instance::with_plugins(&[(
        "slips.mjs",
        &format!(
            "export const description = 'd';\nexport const inputSchema = {schema};\nexport function run(a) {{ return {{ text: String(a.n) }}; }}\n"
        ),
    )]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: slips",
            "plugins/slips.mjs: its inputSchema has requried at its top (meant required?) and minimun in n (meant minimum?), which JSON Schema does not know; a keyword it does not know is ignored, so nothing is checked by it.",
        ]
    );
}

/// A schema that names its dialect is read in it, as MCP says (2020-12 only when no `$schema` is
/// given): zod-to-json-schema writes draft-07, whose tuple (`items` as an array) 2020-12 refuses and
/// whose `dependencies` it ignores. A `$schema` naming no draft ovai knows is read as 2020-12, in a row.
#[test]
fn a_schema_is_read_in_the_dialect_its_schema_names() {
    let draft7 = r#"{ $schema: "http://json-schema.org/draft-07/schema#", type: "object", properties: { pair: { type: "array", description: "A pair.", items: [{ type: "string" }, { type: "object", properties: { x: { type: "number" } } }], minItems: 2, maxItems: 2 }, a: { type: "number", description: "A." }, b: { type: "number", description: "B." } }, dependencies: { a: ["b"] } }"#;
    let odd = r#"{ $schema: "https://example.com/my-dialect", type: "object", properties: { n: { type: "number", description: "A number." } } }"#;
    let file = |schema: &str| {
        format!(
            "export const description = 'd';\nexport const inputSchema = {schema};\nexport function run(a) {{ return {{ text: JSON.stringify(a) }}; }}\n"
        )
    };
    let inst = Instance::with_plugins(&[("seven.mjs", &file(draft7)), ("odd.mjs", &file(odd))]);
    let _d = inst.start();
    assert_eq!(
        inst.rows("plugins"),
        [
            "This instance serves a tool of its own: odd",
            "plugins/odd.mjs: its inputSchema names $schema \"https://example.com/my-dialect\", which is none of the JSON Schema drafts this server reads (draft-04, -06, -07, 2019-09, 2020-12): its arguments are checked by JSON Schema 2020-12.",
            "This instance serves a tool of its own: seven",
            "plugins/seven.mjs: its input \"pair[1].x\" has no description, so a session is told nothing about what to put there; add a description to it in inputSchema.",
        ]
    );
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("seven", serde_json::json!({ "pair": ["x", { "x": 1 }] })),
        (r#"{"pair":["x",{"x":1}]}"#.to_string(), false)
    );
    let (text, refused) = s.call("seven", serde_json::json!({ "pair": [1, "x"] }));
    assert!(refused, "{text}");
    let (text, refused) = s.call("seven", serde_json::json!({ "a": 1 }));
    assert!(refused && text.contains("\"b\""), "{text}");
    assert_eq!(
        s.call("odd", serde_json::json!({ "n": 1 })),
        (r#"{"n":1}"#.to_string(), false)
    );
}

/// What a schema's rows say (helper-44): a schema refused says which draft judged it, and why that one
/// (an unknown `$schema` was hidden behind the error it led to); a tuple written as draft-07's under
/// 2020-12 is told the way out; a keyword its draft does not know (a later draft's, OpenAPI's
/// `nullable`) gets a row, where it was ignored in silence; an `$id` of the schema's own is no outside
/// reference (typebox's `Type.Recursive`); and `format` is a note in every draft, as the docs say.
#[test]
fn a_schemas_rows_name_its_draft_and_what_it_ignores() {
    let file = |schema: &str| {
        format!(
            "export const description = 'd';\nexport const inputSchema = {schema};\nexport function run(a) {{ return {{ text: JSON.stringify(a) }}; }}\n"
        )
    };
    let tuple = r#"{ type: "object", properties: { pair: { type: "array", description: "A pair.", items: [{ type: "string" }, { type: "number" }] } } }"#;
    let typo_draft = r#"{ $schema: "json-schema.org/draft-07/schema#", type: "object", properties: { pair: { type: "array", description: "A pair.", items: [{ type: "string" }] } } }"#;
    let mixed = r#"{ $schema: "http://json-schema.org/draft-07/schema#", type: "object", properties: { pair: { type: "array", description: "A pair.", prefixItems: [{ type: "string" }] }, note: { type: "string", nullable: true, description: "A note." }, mail: { type: "string", format: "email", description: "A mail." } } }"#;
    let recursive = r#"{ $id: "T0", type: "object", properties: { next: { $ref: "T0", description: "The next." } } }"#;
    let deps = r#"{ $schema: "http://json-schema.org/draft-07/schema#", type: "object", properties: { card: { type: "string", description: "A card." }, list: { type: "array", description: "A list.", items: [{ type: "string" }], additionalItems: { type: "object", properties: { x: { type: "number" } } } } }, dependencies: { card: { properties: { billing: { type: "string" } } } } }"#;
    let optional = r#"{ type: "object", properties: { tag: { type: "string", optional: true, errorMessage: "a tag", description: "A tag." } } }"#;
    let inst = Instance::with_plugins(&[
        ("deps.mjs", &file(deps)),
        ("optional.mjs", &file(optional)),
        ("tuple.mjs", &file(tuple)),
        ("typo.mjs", &file(typo_draft)),
        ("mixed.mjs", &file(mixed)),
        ("recursive.mjs", &file(recursive)),
    ]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    let has = |words: &str| {
        assert!(rows.iter().any(|r| r.contains(words)), "{words}: {rows:#?}");
    };
    has(
        "plugins/tuple.mjs is not served: its inputSchema is not a valid JSON schema (at /properties/pair/items, read as 2020-12: it names no $schema)",
    );
    has("items as an array is draft-07's tuple: write prefixItems, or name draft-07 in $schema");
    has(
        "plugins/typo.mjs is not served: its inputSchema is not a valid JSON schema (at /properties/pair/items, read as 2020-12: its $schema \"json-schema.org/draft-07/schema#\" names no draft this server reads)",
    );
    has(
        "plugins/mixed.mjs: its inputSchema is read as JSON Schema draft-07, which does not know prefixItems in pair (2020-12's) or nullable in note (OpenAPI's, not JSON Schema's: write type [\"string\", \"null\"])",
    );
    has("This instance serves a tool of its own: recursive");
    // Keywords of no draft that other hosts' schemas use: said, since they check nothing.
    has(
        "optional in tag (no draft's: a property is optional unless its object's required lists it) or errorMessage in tag (ajv-errors', not JSON Schema's: a refusal says what the schema wanted)",
    );
    // Inputs a draft-07 schema adds past its tuple, or when a property is given, want descriptions too.
    has("plugins/deps.mjs: its inputs \"list[].x\" and \"billing\" have no description");
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("mixed", serde_json::json!({ "mail": "not a mail" })),
        (r#"{"mail":"not a mail"}"#.to_string(), false)
    );
}

/// A tool whose entry in tools/list is large (an enum of thousands) was served without a word, though
/// every session reads it each turn: a row says what it takes.
#[test]
fn a_tool_whose_list_entry_is_large_gets_a_row() {
    let big = "export const description = 'Picks one.';\nexport const inputSchema = { type: 'object', properties: { v: { type: 'string', description: 'The value.', enum: Array.from({ length: 20000 }, (_, i) => 'value-' + i) } } };\nexport function run(a) { return { text: a.v }; }\n";
    let inst = Instance::with_plugins(&[("big.mjs", big), ("echo.mjs", &good("echo"))]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    let row = rows
        .iter()
        .find(|r| r.starts_with("plugins/big.mjs: its description and inputSchema take "))
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert!(
        row.contains(" bytes in tools/list, which every session reads whole"),
        "{row}"
    );
    assert!(
        !rows
            .iter()
            .any(|r| r.starts_with("plugins/echo.mjs: its description and inputSchema take"))
    );
}

/// What a hurried author writes (helper-46): short names for keywords, a type that is none, bounds no
/// value meets, a required input no schema describes, a bound of Infinity and a schema that holds
/// itself. Each is named, with the way out; a schema no call could pass is not served.
#[test]
fn hurried_schemas_are_named_with_the_way_out() {
    let inst = Instance::with_plugins(&[
        (
            "a-short.mjs",
            &with_schema(
                r#"{ type: "object", properties: { b: { type: "integer", min: 1, max: 5, maxLen: 3, desc: "b" }, s: { type: "string", min: 1, description: "s" } } }"#,
            ),
        ),
        (
            "b-int.mjs",
            &with_schema(
                r#"{ type: "object", properties: { n: { type: "int", description: "n" } } }"#,
            ),
        ),
        (
            "c-sting.mjs",
            &with_schema(
                r#"{ type: "object", properties: { a: { type: "sting", description: "a", minLenght: 1 } }, requried: ["a"] }"#,
            ),
        ),
        (
            "d-enum.mjs",
            &with_schema(
                r#"{ type: "object", properties: { k: { enum: [], description: "k" } }, required: ["k"] }"#,
            ),
        ),
        (
            "e-false.mjs",
            &with_schema(r#"{ type: "object", properties: { k: false }, required: ["k"] }"#),
        ),
        (
            "f-bounds.mjs",
            &with_schema(
                r#"{ type: "object", properties: { k: { type: "number", minimum: 5, maximum: 1, description: "k" } }, required: ["k"] }"#,
            ),
        ),
        ("g-not.mjs", &with_schema(r#"{ type: "object", not: {} }"#)),
        (
            "h-required.mjs",
            &with_schema(
                r#"{ type: "object", properties: { a: { type: "string", description: "a" } }, required: ["a", "b"] }"#,
            ),
        ),
        (
            "i-infinity.mjs",
            &with_schema(
                r#"{ type: "object", properties: { n: { type: "number", maximum: Infinity, description: "n" } } }"#,
            ),
        ),
        (
            "j-circle.mjs",
            &with_schema(
                r#"(() => { const s = { type: "object", properties: {} }; s.properties.self = s; return s; })()"#,
            ),
        ),
        // A property called type, whose schema is a string: not a type that is none.
        (
            "k-typeprop.mjs",
            &with_schema(r#"{ type: "object", properties: { type: "string" } }"#),
        ),
        // Bounds that hold only for their own type: other types pass, so calls can.
        (
            "l-multi.mjs",
            &with_schema(
                r#"{ type: "object", properties: { k: { type: ["string", "number"], minimum: 5, maximum: 1, description: "k" } }, required: ["k"] }"#,
            ),
        ),
        (
            "m-untyped.mjs",
            &with_schema(
                r#"{ type: "object", properties: { k: { minLength: 5, maxLength: 1, description: "k" } }, required: ["k"] }"#,
            ),
        ),
        (
            "n-any.mjs",
            &with_schema(
                r#"{ type: "object", properties: { v: { type: "any", description: "v" } } }"#,
            ),
        ),
        (
            "o-required-true.mjs",
            &with_schema(
                r#"{ type: "object", properties: { a: { type: "string", required: true, description: "a" } } }"#,
            ),
        ),
        // What zod 4's z.toJSONSchema writes for a .default() field, on its output side.
        (
            "q-default.mjs",
            &with_schema(
                r#"{ type: "object", properties: { priority: { type: "integer", default: 3, description: "p" } }, required: ["priority"] }"#,
            ),
        ),
        // A method called class is a function, and an object that writes itself as JSON is what it writes.
        (
            "r-method-class.mjs",
            "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport const run = ({ class() { return { text: 'x' }; } }).class;\n",
        ),
        (
            "s-tojson.mjs",
            "class Schema { toJSON() { return { type: 'object' }; } }\nexport const description = 'd';\nexport const inputSchema = new Schema();\nexport function run() { return { text: 'x' }; }\n",
        ),
        // Several faults: one check names every place, so one edit fixes them all.
        (
            "t-many.mjs",
            &with_schema(
                r#"{ type: "object", properties: { a: { type: "String", description: "a" }, b: { type: "float", description: "b" }, c: { type: "string", required: true, description: "c" } } }"#,
            ),
        ),
        // The MCP SDK's raw shape of zod schemas (zod 4's own `_zod`), and a zod 3 schema (`_def`) in
        // properties: their internals would go out as the schema, descriptions and bounds lost.
        (
            "u-zod-shape.mjs",
            "class ZodString { constructor() { this._zod = { def: { type: 'string' } }; this.def = { type: 'string' }; this.type = 'string'; } }\n\
             export const description = 'd';\nexport const inputSchema = { name: new ZodString() };\nexport function run() {}\n",
        ),
        (
            "v-zod-prop.mjs",
            "class ZodString { constructor() { this._def = { typeName: 'ZodString', description: 'who' }; } }\n\
             export const description = 'd';\nexport const inputSchema = { type: 'object', properties: { who: new ZodString() } };\nexport function run() {}\n",
        ),
        // A pattern written as a RegExp, which JSON writes as {}.
        (
            "w-regexp.mjs",
            "export const description = 'd';\nexport const inputSchema = { type: 'object', properties: { id: { type: 'string', pattern: /^[a-z]+$/, description: 'id' } } };\nexport function run() {}\n",
        ),
        // `type: String`, as Vue's props and mongoose write it: JSON leaves the function out, and the
        // check with it (helper-91: served, taking any value).
        (
            "x-type-fn.mjs",
            "export const description = 'd';\nexport const inputSchema = { type: 'object', properties: { a: { type: String, description: 'a' }, b: { type: 'string', description: 'b', transform: (v) => v } } };\nexport function run() {}\n",
        ),
        // Vue's shorthand, a property written as its type alone: the way out is a schema, not a string.
        (
            "y-vue.mjs",
            "export const description = 'd';\nexport const inputSchema = { type: 'object', properties: { a: String } };\nexport function run() {}\n",
        ),
        // A name holding undefined (a misspelt import, say): JSON leaves it out, or sends null in an array
        // (helper-91: `a` went unsaid, and the enum took null).
        (
            "z-undefined.mjs",
            "const shapes = {};\nexport const description = 'd';\nexport const inputSchema = { type: 'object', properties: { a: shapes.a, b: { type: 'string', description: 'b' } } };\nexport function run() {}\n",
        ),
        // A BigInt (`maximum: 10n`): JSON cannot write one, and V8's words named no place (helper-99).
        (
            "w-bigint.mjs",
            "export const description = 'd';\nexport const inputSchema = { type: 'object', properties: { n: { type: 'integer', description: 'n', maximum: 10n } } };\nexport function run() {}\n",
        ),
        // Left undefined where leaving it out changes nothing: served as before (helper-98).
        (
            "z-default-undefined.mjs",
            "const opts = {};\nexport const description = 'd';\nexport const inputSchema = { type: 'object', properties: { a: { type: 'string', description: 'a', default: opts.def } } };\nexport function run() { return { text: 'x' }; }\n",
        ),
        (
            "z-enum-undefined.mjs",
            "export const description = 'd';\nexport const inputSchema = { type: 'object', properties: { k: { enum: ['x', undefined], description: 'k' } } };\nexport function run() {}\n",
        ),
        // Described where the root's allOf gives it.
        (
            "p-allof.mjs",
            &with_schema(
                r#"{ type: "object", required: ["a"], allOf: [{ properties: { a: { type: "string", description: "a" } } }] }"#,
            ),
        ),
    ]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    let row = |file: &str| {
        rows.iter()
            .filter(|r| r.starts_with(&format!("plugins/{file}")))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(row("a-short.mjs").contains("min in b (meant minimum?), max in b (meant maximum?), maxLen in b (meant maxLength?), desc in b (meant description?) and min in s (meant minLength?)"), "{rows:?}");
    assert!(row("b-int.mjs").contains("is not served: its inputSchema has the type \"int\" at /properties/n/type, which is no JSON Schema type (array, boolean, integer, null, number, object, string): meant \"integer\"?"), "{rows:?}");
    assert!(row("c-sting.mjs").contains("the type \"sting\" at /properties/a/type, which is no JSON Schema type (array, boolean, integer, null, number, object, string): meant \"string\"?"), "{rows:?}");
    // Its slips are said with it, so one check names all there is to fix.
    assert!(row("c-sting.mjs").ends_with("meant \"string\"?; it also has minLenght in a (meant minLength?) and requried at its top (meant required?), which JSON Schema does not know."), "{rows:?}");
    assert!(row("d-enum.mjs").contains("is not served: its inputSchema requires \"k\", which no value could be (its enum lists none), so no call could pass it"), "{rows:?}");
    assert!(row("e-false.mjs").contains("is not served: its inputSchema requires \"k\", which no value could be (its schema is false), so no call could pass it"), "{rows:?}");
    assert!(row("f-bounds.mjs").contains("is not served: its inputSchema requires \"k\", which no value could be (its minimum 5 is above its maximum 1), so no call could pass it"), "{rows:?}");
    assert!(row("g-not.mjs").contains("is not served: its inputSchema's not holds a schema every value fits, so no call could pass it"), "{rows:?}");
    // A required name its properties lack is most likely a slip of one of them (helper-91: it was said
    // to have no description).
    assert_eq!(
        row("h-required.mjs"),
        "plugins/h-required.mjs: its inputSchema requires \"b\", which is not among its properties \
         (\"a\"), so a session is told nothing about it: add it there with a description, or correct the \
         name in required.",
        "{rows:?}"
    );
    assert!(row("w-regexp.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds a RegExp (as pattern), which JSON would send as {}: write the pattern as a string, such as \"^[a-z]+$\""), "{rows:?}");
    assert!(row("w-bigint.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds the BigInt 10n (as maximum), which JSON cannot write: give a number, such as 10"), "{rows:?}");
    assert!(row("x-type-fn.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds a function (String, as type), which JSON would leave out: write the type as a string, such as \"string\""), "{rows:?}");
    assert!(row("y-vue.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds a function (String, as a), which JSON would leave out: write its schema, such as { type: \"string\" }"), "{rows:?}");
    assert!(row("z-undefined.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds undefined (as a), which JSON would leave out: give it a value (a name it comes from may be misspelt), or leave it out"), "{rows:?}");
    assert!(
        rows.contains(&"This instance serves a tool of its own: z-default-undefined".to_string()),
        "{rows:?}"
    );
    assert!(row("z-enum-undefined.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds undefined (as item 1 of an array), which JSON would send as null: give it a value (a name it comes from may be misspelt), or leave it out"), "{rows:?}");
    for (file, at) in [("u-zod-shape.mjs", "name"), ("v-zod-prop.mjs", "who")] {
        assert!(
            row(file).contains(&format!(
                "is not served: its inputSchema cannot be written as JSON: it holds a zod schema (as {at}), not JSON \
                 Schema: write the whole schema as JSON Schema, z.toJSONSchema(z.object({{ ... }}), {{ io: \"input\" }}) \
                 in zod 4 (zodToJsonSchema before)"
            )),
            "{rows:?}"
        );
    }
    assert!(row("i-infinity.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds Infinity (as maximum), which JSON would send as null: leave it out, or give a number"), "{rows:?}");
    assert!(
        !row("k-typeprop.mjs").contains("no JSON Schema type"),
        "{rows:?}"
    );
    assert!(
        row("k-typeprop.mjs").contains(
            "is not served: its inputSchema is not a valid JSON schema (at /properties/type"
        ),
        "{rows:?}"
    );
    assert!(
        rows.contains(&"This instance serves a tool of its own: l-multi".to_string()),
        "{rows:?}"
    );
    assert!(
        rows.contains(&"This instance serves a tool of its own: m-untyped".to_string()),
        "{rows:?}"
    );
    assert!(row("n-any.mjs").contains("the type \"any\" at /properties/v/type, which is no JSON Schema type (array, boolean, integer, null, number, object, string): leave type out to take any value"), "{rows:?}");
    assert!(row("o-required-true.mjs").contains("is not served: its inputSchema has required: true at /properties/a/required: required is a list of names, on the object schema that holds the properties (\"required\": [\"name\"]), not a mark on one"), "{rows:?}");
    assert_eq!(row("p-allof.mjs"), "", "{rows:?}");
    assert!(
        row("t-many.mjs").contains("at /properties/a/type, which is no JSON Schema type"),
        "{rows:?}"
    );
    assert!(
        row("t-many.mjs").ends_with(
            // A second type slip is named with the type meant, as the first is (helper-104).
            "; its draft's rules are broken at /properties/b/type (the type \"float\", which is no JSON Schema type: meant \
             \"number\"?) \
             and /properties/c/required too"
        ),
        "{rows:?}"
    );
    for served in ["r-method-class", "s-tojson"] {
        assert!(
            rows.contains(&format!("This instance serves a tool of its own: {served}")),
            "{rows:?}"
        );
    }
    assert_eq!(
        row("q-default.mjs"),
        "plugins/q-default.mjs: its input \"priority\" has a default and is required: defaults are not filled in, so every call must give it; take it out of required (zod 4 writes a .default() field required unless asked for the input side: z.toJSONSchema(schema, { io: \"input\" })).",
        "{rows:?}"
    );
    assert!(row("j-circle.mjs").contains("is not served: its inputSchema cannot be written as JSON: it holds itself (its property 'self' closes the circle): put the part that repeats in $defs and point to it with {\"$ref\": \"#/$defs/...\"}"), "{rows:?}");
}

/// The tools listed fit what every session reads whole: past 4 MiB together, the largest entry is left
/// out (each entry under the one-tool bound), with a row saying so, and the rest are served.
#[test]
fn the_largest_entries_are_left_out_until_the_list_fits() {
    let plugin = |kb: usize| {
        format!(
            "export const description = 'd'.repeat({kb} * 1000);\nexport const inputSchema = {{ type: 'object' }};\nexport function run() {{ return {{ text: 'ok' }}; }}\n"
        )
    };
    let files: Vec<(String, String)> = (0..5)
        .map(|i| {
            (
                format!("{}.mjs", ["a", "b", "c", "e", "d"][i]),
                plugin(900 + 10 * i),
            )
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(f, s)| (f.as_str(), s.as_str()))
        .collect();
    let inst = Instance::with_plugins(&files);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(
        rows.contains(
            &"plugins/d.mjs is not served: its entry in tools/list (name, description and inputSchema) takes \
              940,018 bytes, the most of any, and with it the tools would take 4,600,090 bytes, more than the \
              4,194,304 every session may be given to read whole; make its description or schema shorter (let \
              the tool refuse what it cannot take, in words, rather than list it all)."
                .to_string()
        ),
        "{rows:?}"
    );
    let mut s = inst.session("lead");
    s.initialize();
    let mut names = s.tool_names();
    names.retain(|n| n != "index" && n != "room");
    assert_eq!(names, ["a", "b", "c", "e"]);
}

/// An import failing for what newcomers write most (a package not installed, CommonJS in a .mjs) says
/// what to do, not Node's words alone (helper-78).
#[test]
fn import_failures_newcomers_meet_say_what_to_do() {
    let inst = Instance::with_plugins(&[
        (
            "needs-pkg.mjs",
            "import leftPad from \"left-pad\";\nexport const x = leftPad;\n",
        ),
        ("common.mjs", "module.exports = { description: \"d\" };\n"),
        ("good.mjs", &good("good")),
    ]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    let row = |file: &str| {
        rows.iter()
            .find(|r| r.starts_with(&format!("plugins/{file} is not served")))
            .unwrap_or_else(|| panic!("no row for {file}: {rows:?}"))
            .clone()
    };
    let needs = row("needs-pkg.mjs");
    assert!(
        needs.contains("Cannot find package 'left-pad'")
            && needs.contains(
                " (install it into plugins/node_modules: `cd plugins && npm install --ignore-scripts left-pad`)"
            ),
        "{needs}"
    );
    let common = row("common.mjs");
    assert!(
        common.contains("module is not defined in ES module scope")
            && common.contains(" (a plugin is an ES module: it names its parts with export"),
        "{common}"
    );
}

/// A CommonJS module that throws as an ES module imports it is that import's failure alone: Node 20 also
/// reports it as a promise left rejected, and the host said so in a row that no plugin earned, and
/// that kept a later true rejection in the same words out of runtime.log (helper-99).
#[test]
fn a_commonjs_module_that_throws_at_import_is_no_promise_left_rejected() {
    let inst = Instance::with_plugins(&[
        ("q-local.mjs", &good_after("import './shared/c.cjs';", "q")),
        ("whoami.mjs", &good("whoami")),
    ]);
    std::fs::create_dir_all(inst.root.join("plugins/shared")).unwrap();
    inst.write_plugin(
        "shared/c.cjs",
        "module.exports = 1; throw new Error('cjs boom');\n",
    );
    let out = inst.cmd().arg("check").output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(
            "plugins/q-local.mjs would not be served: importing it failed: Error: cjs boom"
        ),
        "{said}"
    );
    assert!(!said.contains("left a promise rejected"), "{said}");
    // And where it threw is named, as for an ES module (it was not: its stack names a path, no URL).
    assert!(
        said.contains("importing it failed: Error: cjs boom (at shared/c.cjs:1:"),
        "{said}"
    );
    let _d = inst.start();
    // A call through the host: what it sent before its answer has been read.
    inst.cmd()
        .args(["call", "whoami", "--seat", "lead"])
        .assert()
        .success();
    let rows = inst.rows("host");
    assert!(
        !rows.iter().any(|r| r.contains("left a promise rejected")),
        "{rows:?}"
    );
}
