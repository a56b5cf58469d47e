//! Every way `run` can answer, and what the caller reads for each: text, its own refusal, and a refusal
//! naming the file for every third shape and every throw.

mod common;
use common::*;
use serde_json::json;

fn plugin(body: &str) -> String {
    format!(
        "export const description = 'A test tool.';\n\
         export const inputSchema = {{ type: 'object', properties: {{ n: {{ type: 'integer' }} }} }};\n\
         {body}\n"
    )
}

fn answering(expr: &str) -> String {
    plugin(&format!("export function run() {{ return {expr}; }}"))
}

static LONG_KEY_WORDS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

#[test]
fn each_answer_shape_reaches_the_caller_in_words() {
    let cases: Vec<(&str, String, &str, bool)> = vec![
        ("text", answering("{ text: 'all good' }"), "all good", false),
        // Silence never reaches the model: an empty text is said in words, as an empty refusal is.
        (
            "empty-text",
            answering("{ text: ' \\n' }"),
            "plugins/empty-text.mjs answered a { text } that is blank (spaces and line ends only): a tool answers { text } with what to tell the caller, or { refused } with why not.",
            true,
        ),
        // Characters that show nothing (NULs, a zero-width space) are said as such, not called empty.
        (
            "invisible-text",
            answering("{ text: '\\0\\0\\u200b' }"),
            "plugins/invisible-text.mjs answered a { text } that shows nothing (3 characters, all control, format or blank ones): a tool answers { text } with what to tell the caller, or { refused } with why not.",
            true,
        ),
        (
            "refused",
            answering("{ refused: 'not on a Sunday' }"),
            "not on a Sunday",
            true,
        ),
        (
            "async-text",
            plugin("export async function run() { await null; return { text: 'later' }; }"),
            "later",
            false,
        ),
        (
            "forgets",
            plugin("export function run() { }"),
            "plugins/forgets.mjs answered undefined: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "null",
            answering("null"),
            "plugins/null.mjs answered null: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "bare-string",
            answering("'done'"),
            "plugins/bare-string.mjs answered the string \"done\": a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "both",
            answering("{ text: 'a', refused: 'b' }"),
            "plugins/both.mjs answered an object with both text and refused: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "text-number",
            answering("{ text: 42 }"),
            "plugins/text-number.mjs answered { text } holding a number, not a string: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        // What it holds is named for what it is: an await left out, bytes, a Date.
        (
            "text-promise",
            answering("{ text: Promise.resolve('x') }"),
            "plugins/text-promise.mjs answered { text } holding a Promise (an await left out?), not a string: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "text-buffer",
            answering("{ text: Buffer.from('hi') }"),
            "plugins/text-buffer.mjs answered { text } holding a Buffer of 2 bytes (bytes are no text: decode them, as buffer.toString() does), not a string: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        // A helper's answer wrapped in another: one level is said, never the same words again.
        (
            "text-nested",
            answering("{ text: { text: 'x' } }"),
            "plugins/text-nested.mjs answered { text } holding an object, not a string: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "text-date",
            answering("{ text: new Date(0) }"),
            "plugins/text-date.mjs answered { text } holding a Date, not a string: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "other-keys",
            answering("{ ok: true, result: 'x' }"),
            "plugins/other-keys.mjs answered an object with the keys ok, result: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        // An MCP server's own answer, as the SDK's examples write it (helper-91: named only by its key).
        (
            "mcp-content",
            answering("{ content: [{ type: 'text', text: 'hi' }] }"),
            "plugins/mcp-content.mjs answered MCP's { content: [...] }, which ovai makes itself from { text } (text only): a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "mcp-content-error",
            answering("{ content: [{ type: 'text', text: 'no' }], isError: true }"),
            "plugins/mcp-content-error.mjs answered MCP's { content: [...] }, which ovai makes itself from { text } (text only): a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "extra-key",
            answering("{ text: 'x', meta: 1 }"),
            "plugins/extra-key.mjs answered { text } with meta beside it, which an answer does not have: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        // A key holding undefined is no key, as in JSON: `{ text, refused: cond ? why : undefined }`.
        (
            "undefined-beside",
            answering("{ text: 'fine', refused: undefined }"),
            "fine",
            false,
        ),
        (
            "undefined-extra",
            answering("{ text: 'hi', note: undefined }"),
            "hi",
            false,
        ),
        (
            "all-undefined",
            answering("{ text: undefined, refused: undefined }"),
            "plugins/all-undefined.mjs answered an object whose keys all hold undefined: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "undefined-text",
            answering("{ text: undefined, refused: 'no' }"),
            "no",
            true,
        ),
        (
            "a-map",
            answering("new Map([['text', 'x']])"),
            "plugins/a-map.mjs answered a Map: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "a-buffer",
            answering("Buffer.from('hello')"),
            "plugins/a-buffer.mjs answered a Buffer of 5 bytes (bytes are no text: decode them, as buffer.toString() does): a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "one-character",
            answering("{ text: '\\0' }"),
            "plugins/one-character.mjs answered a { text } that shows nothing (1 character, a control, format or blank one): a tool answers { text } with what to tell the caller, or { refused } with why not.",
            true,
        ),
        (
            "array",
            answering("[{ text: 'x' }]"),
            "plugins/array.mjs answered an array: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "bigint",
            answering("{ text: 10n }"),
            "plugins/bigint.mjs answered { text } holding a bigint, not a string: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        (
            "throws",
            plugin("export function run() {\n  throw new TypeError('bad input');\n}"),
            "plugins/throws.mjs threw at 4:9: TypeError: bad input",
            true,
        ),
        (
            "rejects",
            plugin(
                "export async function run() {\n  await null;\n  throw new Error('CI is down');\n}",
            ),
            "plugins/rejects.mjs threw at 5:9: Error: CI is down",
            true,
        ),
        // context.config is frozen: the TypeError names no setting, so the refusal says what it may be.
        (
            "config-write",
            plugin("export function run(args, { config }) {\n  config.ci = { token: 'x' };\n  return 'x';\n}"),
            "plugins/config-write.mjs threw at 4:13: TypeError: Cannot add property ci, object is not extensible. If that object is context.config: it is openovai.json's settings, frozen for every call; copy what you change ({ ...context.config.ci }).",
            true,
        ),
        // A failed command's output follows the first line of its message: all of it is shown, its
        // lines as lines (not `\n`, which a model reads as two characters).
        (
            "throws-lines",
            plugin(
                "export function run() {\n  throw new Error(\"Command failed: ls /x\\nls: cannot access '/x': No such file or directory\\n\");\n}",
            ),
            "plugins/throws-lines.mjs threw at 4:9: Error: Command failed: ls /x\nls: cannot access '/x': No such file or directory",
            true,
        ),
        // Promise.any's error holds the reasons in its own `errors`.
        (
            "throws-many",
            plugin(
                "export function run() {\n  throw new AggregateError([new Error('mirror one down', { cause: new Error('connect ECONNREFUSED') }), new TypeError('mirror two bad')], 'both mirrors failed');\n}",
            ),
            "plugins/throws-many.mjs threw at 4:9: AggregateError: both mirrors failed (errors: Error: mirror one down (cause: Error: connect ECONNREFUSED); TypeError: mirror two bad)",
            true,
        ),
        // A getter on `stack` is the plugin's: not run, and the words are still shown.
        (
            "stack-getter",
            plugin(
                "export function run() {\n  const e = new Error('real words');\n  Object.defineProperty(e, 'stack', { get() { throw new Error('x'); } });\n  throw e;\n}",
            ),
            "plugins/stack-getter.mjs threw: Error: real words",
            true,
        ),
        // An error where its words were meant: still a refusal in words, and they are in it.
        (
            "refuses-error",
            answering("{ refused: new Error('no access\\nto \\u001b[31mmain') }"),
            "plugins/refuses-error.mjs answered { refused } holding an error (Error: no access\\nto \\u{1b}[31mmain), not a string: a tool answers { text } or { refused }, with a string in it.",
            true,
        ),
        // An error whose errors hold it again is described a bounded way down, and at once.
        (
            "cyclic",
            plugin(
                "export function run() {\n  const w = { refused: null };\n  const e = new AggregateError([w, w], 'x');\n  w.refused = e;\n  throw e;\n}",
            ),
            "plugins/cyclic.mjs threw at 5:13: AggregateError: x (errors: { refused } holding an error (AggregateError: x (errors: { refused } holding an error (…), not a string; { refused } holding an error (…), not a string)), not a string; { refused } holding an error (AggregateError: x (errors: { refused } holding an error (…), not a string; { refused } holding an error (…), not a string)), not a string)",
            true,
        ),
        // A validation library's error (zod's, valibot's) writes its issues as JSON in its message: it
        // is said by its issues, one line each.
        (
            "throws-issues",
            plugin(
                "class ZodError extends Error { constructor(issues) { super(JSON.stringify(issues, null, 2)); this.name = 'ZodError'; this.issues = issues; } }\n\
                 export function run() {\n  throw new ZodError([{ code: 'invalid_type', expected: 'string', path: ['branch'], message: 'Invalid input: expected string, received undefined' }, { code: 'too_small', path: ['files', 0, 'name'], message: 'Too small' }]);\n}",
            ),
            "plugins/throws-issues.mjs threw at 5:9: ZodError: branch: Invalid input: expected string, received undefined; files.0.name: Too small",
            true,
        ),
        // A plain object thrown is shown with what it holds.
        (
            "throws-object",
            plugin("export function run() { throw { code: 42, msg: 'quota' }; }"),
            "plugins/throws-object.mjs threw: an object with the keys code, msg: {\"code\":42,\"msg\":\"quota\"}",
            true,
        ),
        // What it holds is written by a bounded walk: a structure that shares itself (2^40 values
        // written out), a bigint and a cycle are shown, and the host goes on (helper-49).
        (
            "throws-shared",
            plugin("export function run() { let d = [1]; for (let i = 0; i < 40; i++) d = [d, d]; throw { code: 7, data: d }; }"),
            "plugins/throws-shared.mjs threw: an object with the keys code, data: {\"code\":7,\"data\":[[[[[[[[…,…],[…,…]],[[…,…],[…,…]]],[[[…,…],[…,…]],[[…,…],[…,…]]]],[[[[…,…],[…,…]],[[…,…],[…,…]]],[[[…,…],[…,…]],[[…,…],[…,…]]]]],[[[[[…,…],[…,…]],[[…,…],[…,…]]],[[[…,…],[…,…]],[[…,…],[…,…]]]],[[[[…,…],[…,…]],[[…,…],[…,…]]],[[[…,…],[…,…]],[[…,…],[…,…]]]]]],[[[[[[…,…],[…,…]],[[…,…],[…",
            true,
        ),
        (
            "throws-bigint",
            plugin("export function run() { const o = { code: 'E_QUOTA', used: 5n }; o.self = o; throw o; }"),
            "plugins/throws-bigint.mjs threw: an object with the keys code, used, self: {\"code\":\"E_QUOTA\",\"used\":5n,\"self\":…}",
            true,
        ),
        // Key names are clipped however long: a megabyte key once made a line past the host's cap.
        (
            "long-key",
            answering("{ text: 'ok', ['k'.repeat(1500000)]: 1 }"),
            LONG_KEY_WORDS.get_or_init(|| format!("plugins/long-key.mjs answered {{ text }} with {}… beside it, which an answer does not have: a tool answers {{ text }} or {{ refused }}, with a string in it.", "k".repeat(63))),
            true,
        ),
        (
            "throws-string",
            plugin("export function run() { throw 'oops'; }"),
            "plugins/throws-string.mjs threw: the string \"oops\"",
            true,
        ),
        (
            "frozen-config",
            plugin(
                "export function run(a, { config }) {\n  config.user = 'mallory';\n  return { text: 'x' };\n}",
            ),
            "plugins/frozen-config.mjs threw at 4:15: TypeError: Cannot assign to read only property 'user' of object '#<Object>'. If that object is context.config: it is openovai.json's settings, frozen for every call; copy what you change ({ ...context.config.ci }).",
            true,
        ),
    ];
    let files: Vec<(String, String)> = cases
        .iter()
        .map(|(n, src, _, _)| (format!("{n}.mjs"), src.clone()))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(f, s)| (f.as_str(), s.as_str()))
        .collect();
    let inst = Instance::with_plugins(&refs);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    for (name, _, want, refused) in &cases {
        let (text, is_error) = s.call(name, json!({}));
        assert_eq!((text.as_str(), is_error), (*want, *refused), "tool {name}");
    }
}

#[test]
fn an_answer_over_the_cap_is_refused() {
    let inst = Instance::with_plugins(&[
        ("big.mjs", &answering("{ text: 'x'.repeat(2000) }")),
        ("small.mjs", &answering("{ text: 'x'.repeat(1000) }")),
        (
            "big-refusal.mjs",
            &answering("{ refused: 'x'.repeat(2000) }"),
        ),
    ]);
    inst.set_config(json!({ "maxAnswerBytes": 1000 }));
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("big", json!({})),
        (
            "plugins/big.mjs answered 2000 bytes of text, more than the 1000 this server passes on (maxAnswerBytes in openovai.json sets the limit).".to_string(),
            true
        )
    );
    assert_eq!(s.call("small", json!({})).0.len(), 1000);
    // A refusal past the cap is said to be one.
    assert_eq!(
        s.call("big-refusal", json!({})),
        (
            "plugins/big-refusal.mjs refused with 2000 bytes of words, more than the 1000 this server passes on (maxAnswerBytes in openovai.json sets the limit).".to_string(),
            true
        )
    );
}

#[test]
fn a_slow_async_call_does_not_hold_up_another() {
    // `slow` answers only once `fast` has run: if calls were served one at a time, it never would.
    let inst = Instance::with_plugins(&[
        (
            "slow.mjs",
            &plugin(
                "export async function run() {\n\
                 while (!globalThis.fastRan) await new Promise((r) => setTimeout(r, 5));\n\
                 return { text: 'slow done after fast' };\n}",
            ),
        ),
        (
            "fast.mjs",
            &plugin(
                "export function run() { globalThis.fastRan = true; return { text: 'fast' }; }",
            ),
        ),
    ]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let slow = s.send_request("tools/call", json!({ "name": "slow", "arguments": {} }));
    let fast = s.send_request("tools/call", json!({ "name": "fast", "arguments": {} }));
    let fast_answer = s.response(fast);
    let slow_answer = s.response(slow);
    assert_eq!(text_of(&fast_answer), ("fast".to_string(), false));
    assert_eq!(
        text_of(&slow_answer),
        ("slow done after fast".to_string(), false)
    );
}

#[test]
fn context_carries_seat_role_root_and_config() {
    let inst = Instance::with_plugins(&[(
        "ctx.mjs",
        &plugin(
            "export function run(args, ctx) { return { text: JSON.stringify({ args, seat: ctx.seat, role: ctx.role, root: ctx.root, config: ctx.config, signal: ctx.signal instanceof AbortSignal }) }; }",
        ),
    )]);
    inst.set_config(json!({ "team": { "name": "blue" } }));
    inst.add_seat("w1");
    let _d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    let (text, refused) = s.call("ctx", json!({ "n": 3 }));
    assert!(!refused, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["args"], json!({ "n": 3 }));
    assert_eq!(v["seat"], "w1");
    assert_eq!(v["role"], "Worker");
    assert_eq!(v["root"], inst.root.display().to_string());
    assert_eq!(v["config"]["user"], "ann");
    assert_eq!(v["config"]["leader"], "lead");
    assert_eq!(v["config"]["team"]["name"], "blue");
    assert_eq!(v["signal"], true);
}

#[test]
fn answers_larger_than_the_pipe_takes_at_once_arrive_whole_and_in_order() {
    // 600 KB of UTF-8 each (a two-byte and a four-byte character, so a partial write may end inside
    // one), more than a Unix socket takes in one write: the host writes the rest later, in order.
    let inst = Instance::with_plugins(&[(
        "wide.mjs",
        &plugin(
            "export function run(args) { return { text: `${args.n}:` + 'é😀'.repeat(100000) }; }",
        ),
    )]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let ids: Vec<u64> = (0..4)
        .map(|n| {
            s.send_request(
                "tools/call",
                json!({ "name": "wide", "arguments": { "n": n } }),
            )
        })
        .collect();
    let expected = "é😀".repeat(100_000);
    for (n, id) in ids.into_iter().enumerate() {
        let (text, refused) = text_of(&s.response(id));
        assert!(!refused);
        assert_eq!(text.len(), expected.len() + 2);
        assert!(
            text == format!("{n}:{expected}"),
            "answer {n} arrived changed"
        );
    }
}

#[test]
fn a_text_of_every_kind_of_character_reaches_the_caller_exactly() {
    // Every ASCII character (controls, quotes, backslash, DEL), line and paragraph separators, astral
    // characters, and half a surrogate pair, which reaches the caller as U+FFFD.
    let inst = Instance::with_plugins(&[
        (
            "chars.mjs",
            &answering(
                "{ text: Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join('') + '\\u2028\\u2029 é 😀 \\ud800 end' }",
            ),
        ),
        // An answer is measured as it is sent: 499 newlines and a dot are 999 bytes as JSON, within a
        // cap of 1,000; a letter and 500 newlines are 1,001, and 200 NULs 1,200 (six bytes each as `\u0000`).
        (
            "escapes.mjs",
            &answering("{ text: '\\n'.repeat(499) + '.' }"),
        ),
        ("over.mjs", &answering("{ text: 'a' + '\\n'.repeat(500) }")),
        ("nuls.mjs", &answering("{ text: 'a' + '\\0'.repeat(200) }")),
        (
            "refusing.mjs",
            &answering("{ refused: 'a' + '\\u001b'.repeat(200) }"),
        ),
    ]);
    inst.set_config(json!({ "maxAnswerBytes": 1000 }));
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let ascii: String = (0u8..128).map(char::from).collect();
    assert_eq!(
        s.call("chars", json!({})),
        (format!("{ascii}\u{2028}\u{2029} é 😀 \u{fffd} end"), false)
    );
    assert_eq!(
        s.call("escapes", json!({})),
        ("\n".repeat(499) + ".", false)
    );
    // Escapes count: a session's answers in flight take what the cap says, whatever the characters.
    assert_eq!(
        s.call("over", json!({})),
        (
            "plugins/over.mjs answered 501 bytes of text, which take 1001 as sent (JSON writes each control character, quote and backslash escaped), more than the 1000 this server passes on (maxAnswerBytes in openovai.json sets the limit).".to_string(),
            true
        )
    );
    assert_eq!(
        s.call("nuls", json!({})),
        (
            "plugins/nuls.mjs answered 201 bytes of text, which take 1201 as sent (JSON writes each control character, quote and backslash escaped), more than the 1000 this server passes on (maxAnswerBytes in openovai.json sets the limit).".to_string(),
            true
        )
    );
    assert_eq!(
        s.call("refusing", json!({})),
        (
            "plugins/refusing.mjs refused with 201 bytes of words, which take 1201 as sent (JSON writes each control character, quote and backslash escaped), more than the 1000 this server passes on (maxAnswerBytes in openovai.json sets the limit).".to_string(),
            true
        )
    );
}

/// A throw inside a module the tool imports names the tool's own line and, after it, the place in that
/// module where it was thrown: the tool's line alone left its author looking in the wrong file
/// (helper-48).
#[test]
fn a_throw_in_a_shared_module_names_both_places() {
    let inst = Instance::with_plugins(&[
        (
            "lib/util.mjs",
            "export function parse(s) {\n  return JSON.parse(s).value.trim();\n}\n",
        ),
        (
            "uses-lib.mjs",
            "import { parse } from './lib/util.mjs';\nexport const description = 'x';\nexport const inputSchema = { type: 'object' };\nexport function run() {\n  return { text: parse('{}') };\n}\n",
        ),
    ]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("uses-lib", json!({})),
        (
            "plugins/uses-lib.mjs threw at 5:18, in lib/util.mjs:2:29: TypeError: Cannot read properties of undefined (reading 'trim')".to_string(),
            true
        )
    );
}
