//! The author's loop: `ovai plugin` (scaffold), `ovai check`, `ovai restart` (no session dropped, no call
//! lost or answered twice, list_changed exactly when the list changed), stale-file rows, `ovai status`.

mod common;
use common::*;
use predicates::prelude::*;
use serde_json::{Value, json};
use std::collections::HashMap;

#[test]
fn the_scaffold_refuses_each_bad_name_and_writes_nothing() {
    let inst = Instance::new();
    for (name, why) in [
        ("ci_status", "it holds an underscore"),
        (
            "9lives",
            "it starts with the digit 9, not a letter a-z or A-Z",
        ),
        (
            &"x".repeat(33) as &str,
            "it is 33 characters long, more than 32",
        ),
        ("-x", "it starts with \"-\", not a letter"),
        ("über", "it starts with \"ü\", not a letter a-z or A-Z"),
        (
            "naïve",
            "it holds \"ï\", which is not a letter a-z or A-Z, a digit or a hyphen",
        ),
    ] {
        inst.cmd()
            .args(["plugin", "--", name])
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains(format!("cannot be a tool name: {why}"))
                    .and(predicate::str::contains("Nothing was written.")),
            );
        assert!(
            !inst
                .root
                .join("plugins")
                .join(format!("{name}.mjs"))
                .exists()
        );
    }
    inst.cmd().args(["plugin", "room"]).assert().code(1).stderr(
        "ovai: room is a name a tool can have, but this server already has a tool called room. Pick another name; nothing was written.\n",
    );
    inst.cmd().args(["plugin", "ROOM"]).assert().code(1).stderr(
        "ovai: this server already has a tool called room, and ROOM differs from it only in case: a tool of that name could pass itself off as it. Pick another name; nothing was written.\n",
    );
    assert!(!inst.root.join("plugins/ROOM.mjs").exists());
    // Each client the desks are made for names the tool its own way, and is told so.
    inst.cmd().args(["plugin", "tracker"]).assert().success().stdout(
        predicates::str::contains(
            "serves it to every seat as mcp__openovai__tracker in Claude Code, mcp_openovai_tracker in Gemini CLI, \
             tracker (in mcp__openovai) in Codex, openovai_tracker in opencode.",
        ),
    );
    inst.cmd().args(["plugin", "Tracker"]).assert().code(1).stderr(
        "ovai: plugins/tracker.mjs is already there, and Tracker differs from it only in case: neither would be served (one could pass itself off as the other). Pick another name; nothing was written.\n",
    );
    assert!(!inst.root.join("plugins/Tracker.mjs").exists());
    assert!(!inst.root.join("plugins/room.mjs").exists());
    // Named as its file is: the tool's name is what is meant.
    inst.cmd()
        .args(["plugin", "plugins/deploy.mjs"])
        .assert()
        .success()
        .stdout(predicates::str::contains("Wrote plugins/deploy.mjs"));
    assert!(inst.root.join("plugins/deploy.mjs").exists());
    inst.write_plugin("mine.mjs", "// somebody's work\n");
    inst.cmd().args(["plugin", "mine"]).assert().code(1).stderr(
        "ovai: plugins/mine.mjs is already there, and what is in it is somebody's work: nothing was written. Edit that file, or pick another name.\n",
    );
    assert_eq!(
        std::fs::read_to_string(inst.root.join("plugins/mine.mjs")).unwrap(),
        "// somebody's work\n"
    );
}

/// What is in the way and is no file (a link to nothing, a folder) is named as what it is, with what to do:
/// "what is in it is somebody's work" said nothing of a link that leads nowhere.
#[test]
fn the_scaffold_names_what_is_in_the_way_when_it_is_no_file() {
    let inst = Instance::new();
    let plugins = inst.root.join("plugins");
    std::os::unix::fs::symlink("/nowhere", plugins.join("dang.mjs")).unwrap();
    std::fs::create_dir(plugins.join("dirtool.mjs")).unwrap();
    inst.cmd().args(["plugin", "dang"]).assert().code(1).stderr(
        "ovai: plugins/dang.mjs is already there, a link that leads to no file: nothing was written. Remove it (rm plugins/dang.mjs), or pick another name.\n",
    );
    inst.cmd().args(["plugin", "dirtool"]).assert().code(1).stderr(
        "ovai: plugins/dirtool.mjs is already there, a folder: nothing was written. Rename the folder, or pick another name.\n",
    );
    assert!(
        std::fs::symlink_metadata(plugins.join("dang.mjs"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(plugins.join("dirtool.mjs").is_dir());
}

/// Beside a file that differs from it only in case, the file of that very name is what is in the way.
#[test]
fn the_scaffold_names_the_file_of_that_name_before_one_in_another_case() {
    let inst = Instance::with_plugins(&[("Clash.mjs", TOOL), ("clash.mjs", TOOL)]);
    inst.cmd().args(["plugin", "clash"]).assert().code(1).stderr(
        "ovai: plugins/clash.mjs is already there, and what is in it is somebody's work: nothing was written. Edit that file, or pick another name.\n",
    );
    assert_eq!(
        std::fs::read_to_string(inst.root.join("plugins/clash.mjs")).unwrap(),
        TOOL
    );
}

#[test]
fn the_scaffold_passes_check_and_is_served_after_restart_to_the_leader_only() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let _d = inst.start();
    let mut w1 = inst.session("w1");
    w1.initialize();
    assert_eq!(w1.tool_names(), ["index", "room"]);
    // From a folder inside the instance, with no --root.
    ovai()
        .current_dir(inst.root.join("desks/w1"))
        .args(["plugin", "ci-status"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Wrote plugins/ci-status.mjs")
                .and(predicate::str::contains("ovai check plugins/ci-status.mjs")),
        );
    inst.cmd()
        .args(["check", "plugins/ci-status.mjs"])
        .assert()
        .success()
        .stdout("This instance would serve a tool of its own: ci-status\n");
    // It ends with what its runtime.log row says: what was added, and what the list costs now.
    let out = inst.cmd().arg("restart").output().unwrap();
    assert!(out.status.success());
    let out = String::from_utf8(out.stdout).unwrap();
    let row = inst
        .rows("server")
        .into_iter()
        .find(|r| r.starts_with("Restarted, asked by `ovai restart`: generation 2"))
        .unwrap();
    let said = row.replace("Restarted, asked by `ovai restart`: ", "Restarted: ");
    assert_eq!(
        out,
        format!(
            "This instance serves a tool of its own: ci-status\n{said} The one session connected was told.\n"
        )
    );
    assert!(said.contains("; added: ci-status ("), "{said}");
    w1.recv_where(|m| m["method"] == "notifications/tools/list_changed");
    assert_eq!(w1.tool_names(), ["ci-status", "index", "room"]);
    assert_eq!(
        w1.call("ci-status", json!({ "note": "hi" })),
        (
            "ci-status is for the Leader (lead); you are w1, a Worker".to_string(),
            true
        )
    );
    let mut lead = inst.session("lead");
    lead.initialize();
    assert_eq!(
        lead.call("ci-status", json!({ "note": "hi" })),
        ("lead called ci-status: hi".to_string(), false)
    );
    assert_eq!(
        lead.call("ci-status", json!({})),
        ("lead called ci-status".to_string(), false)
    );
    // Its schema is served as the scaffold wrote it.
    let (text, refused) = lead.call("ci-status", json!({ "other": 1 }));
    assert!(refused && text.contains("other"), "{text}");
}

#[test]
fn the_scaffold_works_from_root_bin_ovai() {
    let inst = Instance::new();
    std::fs::create_dir(inst.root.join("bin")).unwrap();
    copy_ovai(&inst.root.join("bin/ovai"));
    let elsewhere = tempfile::tempdir_in("/tmp").unwrap();
    assert_cmd::Command::new(inst.root.join("bin/ovai"))
        .env_remove("OVAI_ROOT")
        .current_dir(elsewhere.path())
        .args(["plugin", "tracker"])
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "ovai: this folder is in no instance, so this acts on {}, the one this binary sits in (--root DIR names another).",
            inst.root.canonicalize().unwrap().display()
        )));
    assert!(inst.root.join("plugins/tracker.mjs").is_file());
    // From inside the instance, nothing is said about which one it is.
    assert_cmd::Command::new(inst.root.join("bin/ovai"))
        .env_remove("OVAI_ROOT")
        .current_dir(inst.root.join("plugins"))
        .args(["plugin", "other"])
        .assert()
        .success()
        .stderr("");
}

#[test]
fn check_prints_the_rows_a_restart_would_write_and_touches_no_daemon() {
    let inst = Instance::with_plugins(&[
        (
            "good.mjs",
            "export const description = 'g';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'g' }; }",
        ),
        ("broken.mjs", "export const description = 'b';"),
        ("notes.txt", "not a candidate"),
    ]);
    let mut d = inst.start();
    let host = d.host_pid();
    inst.cmd()
        .arg("check")
        .assert()
        .code(1)
        .stdout("plugins/broken.mjs would not be served: it does not export inputSchema or run (add `export const inputSchema = ...` and `export async function run(args, context) { ... }`)\nThis instance would serve a tool of its own: good\n")
        .stderr("ovai: 1 of the 2 files checked would not be served.\n");
    inst.cmd()
        .args(["check", "good"])
        .assert()
        .success()
        .stdout("This instance would serve a tool of its own: good\n");
    inst.cmd()
        .args(["check", "good.mjs", "plugins/broken.mjs"])
        .assert()
        .code(1);
    inst.cmd()
        .args(["check", "nope.mjs"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("plugins/nope.mjs does not exist"));
    std::fs::create_dir(inst.root.join("plugins/lib")).unwrap();
    inst.cmd()
        .args(["check", "plugins/lib"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "plugins/lib is a folder, not a plugin's file: a tool is one .mjs file in plugins/.",
        ));
    inst.cmd()
        .args(["check", "/etc/hostname"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a file in plugins/"));
    // A module in a subfolder is in plugins/, and never a tool: said so, with what to check instead.
    inst.cmd()
        .args(["check", "plugins/lib/helper.mjs"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "plugins/lib/helper.mjs is in a subfolder of plugins/, where a file is code tools import, never a tool: check a tool that imports it (what it imports is checked with it).",
        ));
    inst.cmd()
        .args(["check", "plugins/../rootfile.mjs"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a file in plugins/"));
    // The daemon saw nothing: same host, same generation, one set of plugins rows in the log.
    assert!(d.is_running());
    let s = d.status().unwrap();
    assert_eq!(s["generation"], 1);
    assert_eq!(s["host"]["pid"], host);
    assert_eq!(inst.rows("plugins").len(), 2);
    // A restart serves what it can, and fails as check does for the file it leaves out (a script that
    // restarts after an edit learns of it; helper-81). A `.js` beside them gets a row and is no tool; a
    // `.MJS` is one (helper-104: counted as neither, the count fell short of the rows).
    inst.write_plugin("helper.js", "export const x = 1;\n");
    inst.write_plugin("Shout.MJS", "export const x = 1;\n");
    inst.cmd()
        .arg("restart")
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "plugins/broken.mjs is not served: it does not export inputSchema or run (add `export const inputSchema = ...` and `export async function run(args, context) { ... }`)",
        ).and(predicate::str::contains("plugins/helper.js")).and(predicate::str::contains("plugins/Shout.MJS")))
        .stderr(
            "ovai: 2 .mjs files in plugins/ are not served (the rows above say why); the other tools are \
             served as read. Fix them, then `ovai restart` again (`ovai check` says which without a restart).\n",
        );
    assert_eq!(d.status().unwrap()["generation"], 2);
    // No check shim is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(inst.root.join(".ovai"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("host-check"))
        .collect();
    assert!(leftovers.is_empty());
}

const SLOW_ECHO: &str = r#"
export const description = "Echoes after a moment.";
export const inputSchema = { type: "object", properties: { i: { type: "integer" } } };
export async function run({ i }) { await new Promise((r) => setTimeout(r, 5)); return { text: `echo ${i}` }; }
"#;

#[test]
fn a_session_calling_continuously_survives_three_restarts_with_every_call_answered_once() {
    let inst = Instance::with_plugins(&[("echo.mjs", SLOW_ECHO)]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let mut sent: HashMap<u64, i64> = HashMap::new();
    let mut answered: HashMap<u64, usize> = HashMap::new();
    let mut next = 0i64;
    for round in 0..3 {
        // Each restart changes the description, so each is a real new generation.
        inst.write_plugin(
            "echo.mjs",
            &SLOW_ECHO.replace("after a moment", &format!("after a moment ({round})")),
        );
        let mut restart = std::process::Command::new(OVAI)
            .args(["restart", "--root"])
            .arg(&inst.root)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Four calls in flight at all times until the restart has finished, then a few more.
        let mut after = 0;
        while after < 8 {
            while sent.len() - answered.len() < 4 {
                let id = s.send_request(
                    "tools/call",
                    json!({ "name": "echo", "arguments": { "i": next } }),
                );
                sent.insert(id, next);
                next += 1;
            }
            let m = s.recv_where(|m| m.get("id").is_some());
            let id = m["id"].as_u64().unwrap();
            *answered.entry(id).or_insert(0) += 1;
            assert_eq!(
                text_of(&m),
                (format!("echo {}", sent[&id]), false),
                "call {id}"
            );
            if let Ok(Some(_)) = restart.try_wait() {
                after += 1;
            }
        }
        assert!(restart.wait().unwrap().success());
    }
    while answered.len() < sent.len() {
        let m = s.recv_where(|m| m.get("id").is_some());
        *answered.entry(m["id"].as_u64().unwrap()).or_insert(0) += 1;
    }
    // A last request, answered after everything before it: no late duplicate is still on its way.
    s.request("tools/list", json!({}));
    for m in s.backlog.iter().filter(|m| m.get("id").is_some()) {
        *answered.entry(m["id"].as_u64().unwrap()).or_insert(0) += 1;
    }
    assert!(
        sent.keys().all(|id| answered.get(id) == Some(&1)),
        "every call answered exactly once"
    );
    let out = inst.cmd().args(["status", "--json"]).output().unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["generation"],
        4
    );
}

fn list_changed(m: &Value) -> bool {
    m["method"] == "notifications/tools/list_changed"
}

#[test]
fn list_changed_is_sent_exactly_when_the_list_changed() {
    let tool = |d: &str| {
        format!(
            "export const description = '{d}';\nexport const inputSchema = {{ type: 'object' }};\nexport function run() {{ return {{ text: 'x' }}; }}"
        )
    };
    let inst = Instance::with_plugins(&[("a.mjs", &tool("first"))]);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    // 2026-07-28: no initialize; list changes come on a subscriptions/listen stream.
    let mut new = inst.session("lead");
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} });
    new.request("tools/list", json!({ "_meta": meta }));
    let listen = new.send_request(
        "subscriptions/listen",
        json!({ "_meta": meta, "notifications": { "toolsListChanged": true } }),
    );
    new.recv_where(|m| {
        m["method"] == "notifications/subscriptions/acknowledged"
            || m.get("id") == Some(&json!(listen))
    });

    let restart = |want: &str| {
        inst.cmd()
            .arg("restart")
            .assert()
            .success()
            .stdout(predicate::str::contains(want));
    };
    restart("the tool list is the same");
    inst.write_plugin("b.mjs", &tool("second"));
    restart("The 2 sessions connected were told.");
    s.recv_where(list_changed);
    let n = new.recv_where(list_changed);
    assert!(
        n["params"]["_meta"].is_object(),
        "sent on the listen stream: {n}"
    );
    let names = s.tool_names();
    assert_eq!(names, ["a", "b", "index", "room"]);
    // A changed description is a changed list.
    inst.write_plugin("a.mjs", &tool("first, reworded"));
    restart("The 2 sessions connected were told.");
    s.recv_where(list_changed);
    restart("the tool list is the same");
    std::fs::remove_file(inst.root.join("plugins/b.mjs")).unwrap();
    restart("The 2 sessions connected were told.");
    s.recv_where(list_changed);
    assert_eq!(s.tool_names(), ["a", "index", "room"]);
    // Three changes, three notifications: the two restarts that changed nothing sent none.
    let later = s.backlog.iter().filter(|m| list_changed(m)).count();
    assert_eq!(later, 0, "no notification is left over: {:?}", s.backlog);
}

#[test]
fn a_file_saved_after_the_last_read_gets_one_row_and_shows_in_status() {
    let tool = "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'as read' }; }";
    let inst = Instance::with_plugins(&[
        ("saved.mjs", tool),
        ("gone.mjs", tool),
        ("broken.mjs", "export const description = 'd';"),
    ]);
    let d = inst.start();
    std::fs::remove_file(inst.root.join("plugins/gone.mjs")).unwrap();
    let edited = tool.replace("as read", "as edited");
    for _ in 0..5 {
        inst.write_plugin("saved.mjs", &edited);
    }
    let row = "plugins/saved.mjs changed after the last read: it is served, if at all, as it was read, and a plugin host started from now on (after a crash, or when the seats change) refuses its calls; `ovai restart` serves it as it is now";
    wait_for_row(&inst, row);
    inst.write_plugin("zz-new.mjs", tool);
    wait_for_row(
        &inst,
        "plugins/zz-new.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
    assert_eq!(
        inst.rows("plugins").iter().filter(|r| *r == row).count(),
        1,
        "one row for a burst of saves"
    );
    let status = d.status().unwrap();
    assert_eq!(status["stale"], json!(["plugins/saved.mjs"]));
    assert_eq!(status["newFiles"], json!(["plugins/zz-new.mjs"]));
    assert_eq!(status["removedFiles"], json!(["plugins/gone.mjs"]));
    inst.cmd().arg("status").assert().success().stdout(
        predicate::str::contains("Changed since the last read (`ovai restart` serves them as they are now): plugins/saved.mjs.")
            .and(predicate::str::contains("New since the last read (`ovai restart` reads them): plugins/zz-new.mjs."))
            .and(predicate::str::contains("Removed since the last read (`ovai restart` stops serving them): plugins/gone.mjs.")),
    );
    // Calling or asking for a tool whose file is not served says why, and what to do: the likeliest
    // slip is a new file before `ovai restart`.
    let new = "There is no tool called zz-new here: plugins/zz-new.mjs appeared after the last read and is not served yet: `ovai restart` serves it.";
    inst.cmd()
        .args(["call", "zz-new", "--seat", "lead"])
        .assert()
        .code(2)
        .stderr(format!("ovai: {new}\n"));
    inst.cmd()
        .args(["tools", "zz-new"])
        .assert()
        .code(2)
        .stderr(format!("ovai: {new}\n"));
    for args in [
        &["call", "broken", "--seat", "lead"][..],
        &["tools", "broken"],
    ] {
        inst.cmd().args(args).assert().stderr(
            predicate::str::starts_with(
                "ovai: There is no tool called broken here: plugins/broken.mjs is not served: ",
            )
            .and(predicate::str::ends_with(
                "Fix the file, then `ovai check plugins/broken.mjs` and `ovai restart`.\n",
            )),
        );
    }
    // Nothing was re-read by itself.
    assert_eq!(
        inst.cmd()
            .args(["call", "saved", "--seat", "lead"])
            .output()
            .unwrap()
            .stdout,
        b"as read\n"
    );
    // broken.mjs is still left out: the restart says so in its exit.
    inst.cmd().arg("restart").assert().code(1);
    assert_eq!(
        inst.cmd()
            .args(["call", "saved", "--seat", "lead"])
            .output()
            .unwrap()
            .stdout,
        b"as edited\n"
    );
    assert_eq!(d.status().unwrap()["stale"], json!([]));
}

fn wait_for_row(inst: &Instance, row: &str) {
    wait_until(&format!("the row {row:?}"), || {
        inst.rows("plugins").iter().any(|r| r == row).then_some(())
    });
}

/// A module in a folder of plugins/ saved after the read gets its row, as a tool's file does (it got
/// none: the first word of it came when a new host refused the tools importing it), and so does one
/// in a folder that came with a restart.
/// The row of a module of plugins/' folders saved after the read.
fn module_changed(file: &str) -> String {
    format!(
        "plugins/{file}, a module tools import, changed after the last read: the tools that import it run it \
         as it was read; a plugin host started from now on (after a crash, or when the seats change) refuses \
         them, naming it; `ovai restart` serves it as it is now"
    )
}

#[test]
fn a_module_of_a_folder_saved_after_the_read_gets_its_row() {
    const USES: &str = "import { word } from './lib/util.mjs';\nexport const description = 'd';\n\
                        export const inputSchema = { type: 'object' };\nexport function run() { return { text: word }; }";
    let inst = Instance::with_plugins(&[("uses.mjs", USES)]);
    std::fs::create_dir_all(inst.root.join("plugins/lib")).unwrap();
    inst.write_plugin("lib/util.mjs", "export const word = 'v1';");
    let d = inst.start();
    inst.write_plugin("lib/util.mjs", "export const word = 'v2';");
    wait_for_row(&inst, &module_changed("lib/util.mjs"));
    inst.write_plugin("lib/util.mjs", "export const word = 'v1';");
    wait_for_row(
        &inst,
        "plugins/lib/util.mjs, a module tools import, is as it was at the last read again: a plugin host \
         started from now on imports it",
    );
    // Removed (an `npm install` prunes a hand-made package so), it is said at once, and by `ovai
    // status`, not first when a new host cannot import what imports it (helper-99).
    std::fs::remove_file(inst.root.join("plugins/lib/util.mjs")).unwrap();
    wait_for_row(
        &inst,
        "plugins/lib/util.mjs, a module tools import, was removed (or cannot be read) after the last read: \
         the tools that import it run it as it was read; a plugin host started from now on (after a crash, \
         or when the seats change) cannot import them; `ovai restart` says which tools it leaves out",
    );
    let status = d.status().unwrap();
    assert_eq!(
        status["removedModules"],
        json!(["plugins/lib/util.mjs"]),
        "{status}"
    );
    inst.cmd().arg("status").assert().stdout(predicate::str::contains(
        "\nModules removed since the last read (a plugin host started from now on cannot import the tools \
         that import them; `ovai restart` says which it leaves out): plugins/lib/util.mjs.\n",
    ));
    inst.write_plugin("lib/util.mjs", "export const word = 'v1';");
    wait_until("the module back", || {
        let rows = inst.rows("plugins");
        (rows
            .iter()
            .filter(|r| r.starts_with("plugins/lib/util.mjs, a module tools import, is as it was"))
            .count()
            == 2)
            .then_some(())
    });
    // A folder that came with a restart is watched from then on.
    std::fs::create_dir_all(inst.root.join("plugins/more")).unwrap();
    inst.write_plugin("more/h.mjs", "export const word = 'h1';");
    inst.write_plugin(
        "usesmore.mjs",
        &USES.replace("./lib/util.mjs", "./more/h.mjs"),
    );
    inst.cmd().arg("restart").assert().success();
    inst.write_plugin("more/h.mjs", "export const word = 'h2';");
    wait_for_row(&inst, &module_changed("more/h.mjs"));
}

#[test]
fn sighup_restarts_like_ovai_restart() {
    let inst = Instance::new();
    let d = inst.start();
    inst.write_plugin("late.mjs", "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'late' }; }");
    signal(d.pid(), libc::SIGHUP);
    wait_until("generation 2", || {
        (d.status().unwrap()["generation"] == 2).then_some(())
    });
    assert_eq!(
        inst.cmd()
            .args(["call", "late", "--seat", "lead"])
            .output()
            .unwrap()
            .stdout,
        b"late\n"
    );
}

#[test]
fn status_json_says_what_the_daemon_serves_and_to_whom() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let mut d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    let v = d.status().unwrap();
    assert_eq!(v["pid"], d.pid());
    assert!(v["uptimeSeconds"].is_u64());
    assert_eq!(v["generation"], 1);
    assert_eq!(v["host"]["pid"], d.host_pid());
    assert_eq!(v["host"]["respawns"], 0);
    assert_eq!(v["root"], inst.root.display().to_string());
    assert_eq!(v["tools"], json!(["index", "room"]));
    assert_eq!(
        v["seats"],
        json!([{ "name": "lead", "role": "Leader", "sessions": 0 }, { "name": "w1", "role": "Worker", "sessions": 1 }])
    );
    assert_eq!(v["stale"], json!([]));
    assert!(d.is_running());
    inst.cmd()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Seat w1: Worker, in a session now.",
        ));
}

#[test]
fn restart_without_a_daemon_says_how_to_start_one() {
    let inst = Instance::new();
    // A connection problem, as operations.md says: exit 2, for every command that needs the daemon.
    for command in ["restart", "tools", "web"] {
        inst.cmd().arg(command).assert().code(2).stderr(format!(
            "ovai: No ovai server is running for {}: start one there with `ovai serve`.\n",
            inst.root.display()
        ));
    }
}

#[test]
fn a_failed_restart_keeps_the_old_generation_serving() {
    let inst = Instance::with_plugins(&[("hello.mjs", &good("hello"))]);
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let config = std::fs::read_to_string(inst.root.join("openovai.json")).unwrap();
    std::fs::write(inst.root.join("openovai.json"), "{ \"user\": ").unwrap();
    inst.write_plugin("new.mjs", &good("new"));
    inst.cmd()
        .arg("restart")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("openovai.json does not parse"));
    let status = d.status().unwrap();
    assert_eq!(status["generation"], 1, "{status}");
    assert_eq!(status["tools"], json!(["hello", "index", "room"]));
    assert_eq!(s.call("hello", json!({})), ("hello".to_string(), false));
    std::fs::write(inst.root.join("openovai.json"), config).unwrap();
    inst.cmd().arg("restart").assert().success();
    assert_eq!(d.status().unwrap()["generation"], 2);
    assert_eq!(s.call("new", json!({})), ("new".to_string(), false));
}

fn good(name: &str) -> String {
    format!(
        "export const description = \"Says {name}.\";\nexport const inputSchema = {{ type: \"object\" }};\nexport function run() {{ return {{ text: \"{name}\" }}; }}\n"
    )
}

#[test]
fn a_check_stopped_from_outside_says_so_and_leaves_no_shim_behind() {
    let inst = Instance::with_plugins(&[(
        "waits.mjs",
        "await new Promise(() => {});\nexport const run = 1;",
    )]);
    // A check killed outright two hours ago left its shim: the next check takes it away.
    let dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    let mut dead = dead;
    dead.wait().unwrap();
    std::fs::create_dir_all(inst.root.join(".ovai")).unwrap();
    let left = inst.root.join(format!(".ovai/host-check-{dead_pid}.mjs"));
    std::fs::write(&left, "// left by a check killed outright\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&left)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(7200))
        .unwrap();
    let mut check = std::process::Command::new(OVAI)
        .arg("--root")
        .arg(&inst.root)
        .arg("check")
        .env_remove("OVAI_ROOT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let own = inst
        .root
        .join(format!(".ovai/host-check-{}.mjs", check.id()));
    wait_until("the check's own shim", || own.exists().then_some(()));
    assert!(!left.exists(), "the dead check's shim is still there");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(check.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = check.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(check.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(
        stderr
            .contains("ovai check was stopped by SIGTERM before it finished; nothing was changed."),
        "{stderr}"
    );
    assert!(!own.exists(), "the check's shim was left behind");
}

const TOOL: &str = "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'ok' }; }";

/// `ovai check FILE` says of a file what a restart would: the checks that look at plugins/ as a whole
/// (a name that differs from another only in case) and at what the file is (a FIFO, a link to nothing,
/// its size) are made as for a check of everything.
/// What a plugin prints while it is imported shows in `ovai check`, named by its file: an author
/// debugging an import with console.log sees it there.
#[test]
fn check_shows_what_a_plugin_printed_at_its_import() {
    let inst = Instance::with_plugins(&[(
        "noisy.mjs",
        "console.log('reading the token file');\nthrow new Error('no token');",
    )]);
    let out = inst.cmd().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    let line = said
        .lines()
        .find(|l| l.contains("reading the token file"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(line.contains(r#"plugin="plugins/noisy.mjs""#), "{line}");
}

/// A check that waits on an import says why while it waits, before the import's timeout names the file.
#[test]
fn check_says_why_it_waits_on_a_slow_import() {
    let inst = Instance::with_plugins(&[(
        "waits.mjs",
        "await new Promise(() => {});\nexport const run = 1;",
    )]);
    inst.set_config(json!({ "importTimeoutSeconds": 8 }));
    let out = inst.cmd().args(["check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("ovai: the imports are taking a while; a file whose import has not finished within 8 s (importTimeoutSeconds) is named then, and would not be served.\n"),
        "{said}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("plugins/waits.mjs would not be served: importing it took longer than 8 s"),
        "{out:?}"
    );
}

/// A restart that waits on an import says why while it waits, as check does, and the tools served go on
/// being served meanwhile (helper-62: it printed nothing for the whole wait).
#[test]
fn restart_says_why_it_waits_on_a_slow_import() {
    let inst = Instance::with_plugins(&[(
        "slow.mjs",
        "export const description = 'x';\nexport const inputSchema = { type: 'object' };\nexport function run() { return 'x'; }\n",
    )]);
    inst.fixture("echo.mjs");
    let _d = inst.start();
    inst.write_plugin(
        "slow.mjs",
        "await new Promise((r) => setTimeout(r, 7000));\nexport const description = 'x';\n\
         export const inputSchema = { type: 'object' };\nexport function run() { return 'x'; }\n",
    );
    let mut restart = std::process::Command::new(OVAI)
        .arg("--root")
        .arg(&inst.root)
        .arg("restart")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(restart.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(
        line.starts_with(
            "ovai: the restart is taking a while: the new plugin host is still importing plugins/, and the tools \
             served now go on being served until it is done. A file whose import has not finished within 10 s \
             (importTimeoutSeconds) is named then, and not served."
        ),
        "{line}"
    );
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("echo", json!({})).1);
    assert!(restart.wait().unwrap().success());
}

/// What a flood at import left out of check's stderr is counted there, though check ends before the
/// second in which it was dropped does.
#[test]
fn check_counts_what_a_flood_at_import_left_out() {
    let said = check_printing("for (let i = 0; i < 5000; i++) console.log('noise ' + i);");
    let shown = said.lines().filter(|l| l.contains(" noise ")).count();
    // One count for each second the flood lasted.
    let counted: usize =
        said.lines()
            .filter_map(|l| {
                let (n, _) = l.split_once("ovai::plugin_output: ")?.1.split_once(
                    " lines of plugin output were not logged (more than 100 a second)",
                )?;
                n.parse::<usize>().ok()
            })
            .sum();
    assert_eq!(shown + counted, 5000, "{shown} shown, {counted} counted");
}

#[test]
fn check_of_one_file_says_what_a_restart_would_of_it() {
    let inst = Instance::with_plugins(&[("deploy.mjs", TOOL), ("Deploy.mjs", TOOL)]);
    let dir = inst.root.join("plugins");
    nix::unistd::mkfifo(&dir.join("fifo.mjs"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling.mjs")).unwrap();
    std::fs::File::create(dir.join("huge.mjs"))
        .unwrap()
        .set_len(70 << 20)
        .unwrap();
    for (file, words) in [
        (
            "plugins/Deploy.mjs",
            "differs from plugins/deploy.mjs only in case",
        ),
        ("fifo.mjs", "it is a FIFO, not a file"),
        ("dangling", "it is a link that leads to no file"),
        (
            "huge.mjs",
            "it is 73,400,320 bytes, more than the 67,108,864",
        ),
    ] {
        let out = inst.cmd().args(["check", file]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{file}: {stdout}");
        assert!(stdout.contains(words), "{file}: {stdout}");
    }
    // Named twice, checked once; the folder itself is all of it; a name of no file is said.
    inst.cmd()
        .args(["check", "fifo.mjs", "plugins/fifo.mjs"])
        .assert()
        .code(1)
        .stderr("ovai: 1 of the 1 files checked would not be served.\n");
    let out = inst.cmd().args(["check", "plugins/"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("5 of the 5 files checked"),
        "{out:?}"
    );
    inst.cmd()
        .args(["check", ".."])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("\"..\" is not a file in plugins/"));
    // A name that is no file to check is said, and the others are checked all the same.
    std::fs::create_dir(dir.join("dir.mjs")).unwrap();
    let out = inst
        .cmd()
        .args(["check", "plugins/dir.mjs", "fifo.mjs", "nothing-here"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("it is a FIFO, not a file"),
        "{out:?}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "ovai: plugins/dir.mjs is a folder, not a plugin's file: a tool is one .mjs file in plugins/.\n\
         ovai: plugins/nothing-here.mjs does not exist; `ovai plugin NAME` makes a new one.\n\
         ovai: 2 of the names given were not checked (said above); 1 of the 1 checked would not be served.\n"
    );
    std::fs::remove_dir(dir.join("dir.mjs")).unwrap();
    // Called, it is refused with the row's own advice, once.
    let _d = inst.start();
    let out = inst
        .cmd()
        .args(["call", "deploy", "--seat", "lead"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("Rename one, then `ovai restart`."), "{said}");
    assert!(!said.contains("Fix the file"), "{said}");
}

/// Hidden files (an editor's lock, `.#x.mjs`, and its temporary copies) are nobody's tool: no row, no
/// complaint from check. An ending in another case is said, as `.js` is.
#[test]
fn hidden_files_are_no_tools_and_an_ending_in_capitals_is_said() {
    // Nothing to check is said, not printed as nothing.
    Instance::with_plugins(&[(".only-hidden.mjs", TOOL), ("notes.txt", "")])
        .cmd()
        .arg("check")
        .assert()
        .success()
        .stdout("plugins/ holds no tool files yet; `ovai plugin NAME` writes one.\n");
    let inst =
        Instance::with_plugins(&[("a.mjs", TOOL), (".a.tmp.mjs", TOOL), ("Upper.MJS", TOOL)]);
    let dir = inst.root.join("plugins");
    std::os::unix::fs::symlink("root@box.1234:1700000000", dir.join(".#a.mjs")).unwrap();
    let out = inst.cmd().arg("check").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "plugins/Upper.MJS would not be served: only .mjs files are tools: rename it Upper.mjs, in lower case\nThis instance would serve a tool of its own: a\n"
    );
    assert_eq!(out.status.code(), Some(1));
    let d = inst.start();
    std::fs::write(dir.join(".b.tmp.mjs"), TOOL).unwrap();
    std::fs::write(dir.join("b.mjs"), TOOL).unwrap();
    wait_for_row(
        &inst,
        "plugins/b.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
    assert_eq!(d.status().unwrap()["newFiles"], json!(["plugins/b.mjs"]));
    assert!(
        !inst.rows("plugins").iter().any(|r| r.contains("plugins/.")),
        "{:?}",
        inst.rows("plugins")
    );
}

/// plugins/ moved away (or removed) is said, and so is refused by a restart and a check; made again,
/// it is watched again.
#[test]
fn plugins_gone_is_said_and_made_again_is_watched_again() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let d = inst.start();
    let dir = inst.root.join("plugins");
    std::fs::rename(&dir, inst.root.join("plugins-away")).unwrap();
    wait_for_row(
        &inst,
        "plugins/ is gone (removed, or moved away); the plugins read last are still served. Put it back, or make it again (mkdir plugins), then `ovai restart`.",
    );
    let out = inst.cmd().arg("restart").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("plugins is gone (removed, or moved away)"),
        "{said}"
    );
    assert!(
        said.contains("goes on serving what it read before"),
        "{said}"
    );
    // The host the restart started while it looked for the files is not left running.
    let shim = inst.root.join(".ovai/host.mjs");
    let hosts = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                    c.split(|b| *b == 0)
                        .any(|a| a == shim.as_os_str().as_encoded_bytes())
                        && c.split(|b| *b == 0)
                            .next()
                            .is_some_and(|a| a.ends_with(b"node"))
                })
            })
            .count()
    };
    wait_until("one host left", || (hosts() == 1).then_some(()));
    let out = inst.cmd().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("plugins is gone (removed, or moved away)")
    );
    assert_eq!(d.status().unwrap()["generation"], 1);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("fresh.mjs"), TOOL).unwrap();
    wait_for_row(&inst, "plugins/ is there again, and can be read.");
    wait_for_row(
        &inst,
        "plugins/fresh.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
    inst.cmd().arg("restart").assert().success();
    std::fs::write(dir.join("fresh2.mjs"), TOOL).unwrap();
    wait_for_row(
        &inst,
        "plugins/fresh2.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
}

/// A restart that serves a file's new code with the same description and schema says so: "the tool
/// list is the same" alone read as if nothing had been taken up.
#[test]
fn a_restart_names_the_tools_whose_new_code_runs_now() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL), ("b.mjs", TOOL)]);
    let _d = inst.start();
    inst.write_plugin("a.mjs", &TOOL.replace("'ok'", "'new'"));
    inst.cmd().arg("restart").assert().success().stdout(
        predicate::str::contains("Restarted: generation 2 serves now; the tool list is the same (")
            .and(predicate::str::ends_with(
                "for every session). New code runs for: a.\n",
            )),
    );
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("a", json!({})), ("new".to_string(), false));
    let row = inst
        .rows("server")
        .into_iter()
        .find(|r| r.starts_with("Restarted, asked by `ovai restart`: generation 2"))
        .unwrap();
    assert!(
        row.ends_with("for every session). New code runs for: a."),
        "{row}"
    );
    // Nothing new: nothing said.
    inst.cmd().arg("restart").assert().success().stdout(
        predicate::str::contains("Restarted: generation 3 serves now; the tool list is the same (")
            .and(predicate::str::ends_with("for every session).\n")),
    );
    // The settings changed are named; a file that no longer imports is no longer served (its row says
    // why), and nobody connected is told nothing.
    drop(s);
    wait_until("the session to end", || {
        (inst.status_json()["sessions"] == 0).then_some(())
    });
    inst.set_config(json!({ "callTimeoutSeconds": 5, "callLog": true }));
    inst.write_plugin("b.mjs", "export const oops = ;");
    let out = inst.cmd().arg("restart").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("plugins/b.mjs is not served: importing it failed: SyntaxError")
            && said.contains("Restarted: generation 4 serves now; no longer served: b. ")
            && said.ends_with(" openovai.json changed: callLog, callTimeoutSeconds.\n"),
        "{said}"
    );
}

/// The row for plugins/a.mjs saved after the last read.
const A_CHANGED: &str = "plugins/a.mjs changed after the last read: it is served, if at all, as it was read, and a plugin host started from now on (after a crash, or when the seats change) refuses its calls; `ovai restart` serves it as it is now";

/// An edit undone (`git stash`, an editor's undo) is said, as the edit was: its row would otherwise stand.
#[test]
fn an_edit_undone_is_said_as_the_edit_was() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let d = inst.start();
    inst.write_plugin("a.mjs", &TOOL.replace("'ok'", "'edited'"));
    wait_for_row(&inst, A_CHANGED);
    inst.write_plugin("a.mjs", TOOL);
    wait_for_row(
        &inst,
        "plugins/a.mjs is as it was at the last read again: nothing of it waits for `ovai restart`",
    );
    assert_eq!(d.status().unwrap()["stale"], json!([]));
    // And a file that came and went.
    inst.write_plugin("b.mjs", TOOL);
    wait_for_row(
        &inst,
        "plugins/b.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
    std::fs::remove_file(inst.root.join("plugins/b.mjs")).unwrap();
    wait_for_row(
        &inst,
        "plugins/b.mjs is as it was at the last read again: nothing of it waits for `ovai restart`",
    );
}

/// An edit undone after a new host left the file out does not say nothing waits: the host running now
/// refuses its calls until the next host, or `ovai restart`, imports it again.
#[test]
fn an_edit_undone_after_a_new_host_left_the_file_out_says_it_is_refused_until_then() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let d = inst.start();
    inst.write_plugin("a.mjs", &TOOL.replace("'ok'", "'edited'"));
    wait_for_row(&inst, A_CHANGED);
    // The seats change: a new host, which leaves the changed file out.
    let host = d.host_pid();
    inst.add_seat("w2");
    wait_until("a new host", || (d.host_pid() != host).then_some(()));
    let refused = |inst: &Instance| {
        let out = inst
            .cmd()
            .args(["call", "a", "--seat", "lead"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr)
            .contains("is not answering calls since a new plugin host was started")
    };
    wait_until("a refused as left out", || refused(&inst).then_some(()));
    inst.write_plugin("a.mjs", TOOL);
    wait_for_row(
        &inst,
        "plugins/a.mjs is as it was at the last read again, but the plugin host running now started while it was not and left it out: its calls are refused until the next host (after a crash, or when the seats change) or `ovai restart` imports it",
    );
    assert!(refused(&inst), "still refused by the host that left it out");
    assert!(
        !inst
            .rows("plugins")
            .iter()
            .any(|r| r.contains("nothing of it waits")),
        "{:?}",
        inst.rows("plugins")
    );
    inst.cmd().arg("restart").assert().success();
    assert_eq!(
        inst.cmd()
            .args(["call", "a", "--seat", "lead"])
            .output()
            .unwrap()
            .stdout,
        b"ok\n"
    );
}

/// Saves in bursts of their own say the file changed once, not once a save: the row says nothing new.
#[test]
fn a_file_saved_again_and_again_gets_one_row() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let _d = inst.start();
    let row = A_CHANGED;
    for i in 0..3 {
        inst.write_plugin("a.mjs", &format!("{TOOL}\n// save {i}\n"));
        // Each save waits for its row's burst to end: 300 ms of quiet, and the file read.
        std::thread::sleep(std::time::Duration::from_millis(1200));
    }
    // Rows are written in order: once this one is there, the saves before it were looked at.
    inst.write_plugin("z.mjs", TOOL);
    wait_for_row(
        &inst,
        "plugins/z.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
    inst.write_plugin("z.mjs", &format!("{TOOL}\n// edited\n"));
    std::thread::sleep(std::time::Duration::from_millis(1200));
    std::fs::remove_file(inst.root.join("plugins/z.mjs")).unwrap();
    wait_for_row(
        &inst,
        "plugins/z.mjs is as it was at the last read again: nothing of it waits for `ovai restart`",
    );
    let rows = inst.rows("plugins");
    assert_eq!(rows.iter().filter(|r| *r == row).count(), 1, "{rows:?}");
    assert_eq!(
        rows.iter()
            .filter(|r| r.starts_with("plugins/z.mjs appeared"))
            .count(),
        1,
        "{rows:?}"
    );
}

/// A checkout that changes many files at once is one row, not one for each.
#[test]
fn a_checkout_of_many_files_is_one_row() {
    let files: Vec<(String, &str)> = (0..10).map(|i| (format!("t{i:02}.mjs"), TOOL)).collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(f, t)| (f.as_str(), *t)).collect();
    let inst = Instance::with_plugins(&refs);
    let _d = inst.start();
    let dir = inst.root.join("plugins");
    for i in 0..10 {
        std::fs::remove_file(dir.join(format!("t{i:02}.mjs"))).unwrap();
        std::fs::write(dir.join(format!("n{i:02}.mjs")), TOOL).unwrap();
    }
    // Written at once, as a checkout does, they are one burst and one row; a machine that stalled the
    // test between writes for longer than a burst's quiet may split them, never into a row a file.
    let whole = "20 files in plugins/ changed at once: 10 appeared (plugins/n00.mjs, plugins/n01.mjs, plugins/n02.mjs, plugins/n03.mjs, plugins/n04.mjs and 5 more), 10 were removed (plugins/t00.mjs, plugins/t01.mjs, plugins/t02.mjs, plugins/t03.mjs, plugins/t04.mjs and 5 more); until `ovai restart` what was read is served (a plugin host started from now on refuses the changed and removed ones); `ovai status` lists each.";
    wait_until("the checkout's row", || {
        inst.rows("plugins")
            .iter()
            .any(|r| r.contains(" files in plugins/ changed at once: "))
            .then_some(())
    });
    let rows = inst.rows("plugins");
    let about = &rows[10..];
    assert!(
        about.iter().any(|r| r == whole) || about.len() < 20,
        "{rows:#?}"
    );
}

/// A plugin that is a link to a file elsewhere (a team's shared checkout) is watched where it leads.
#[test]
fn an_edit_where_a_linked_plugin_leads_is_said() {
    let inst = Instance::new();
    // Outside /tmp: the plugin host's box has a /tmp of its own (below).
    let elsewhere = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let remote = elsewhere.path().join("remote.mjs");
    std::fs::write(&remote, TOOL).unwrap();
    std::os::unix::fs::symlink(&remote, inst.root.join("plugins/linked.mjs")).unwrap();
    let _d = inst.start();
    std::fs::write(&remote, TOOL.replace("'ok'", "'edited'")).unwrap();
    wait_for_row(
        &inst,
        "plugins/linked.mjs changed after the last read: it is served, if at all, as it was read, and a plugin host started from now on (after a crash, or when the seats change) refuses its calls; `ovai restart` serves it as it is now",
    );
}

/// `rm -rf plugins && mkdir plugins`: the folder made again may have the removed one's inode number (ext4
/// gives it back at once), and is watched all the same.
#[test]
fn plugins_removed_and_made_again_at_once_is_watched_again() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let _d = inst.start();
    let dir = inst.root.join("plugins");
    for round in 0..3 {
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.mjs"), TOOL).unwrap();
        let file = format!("new{round}.mjs");
        std::fs::write(dir.join(&file), TOOL).unwrap();
        wait_for_row(
            &inst,
            &format!(
                "plugins/{file} appeared after the last read and is not served yet; `ovai restart` reads it"
            ),
        );
    }
}

/// A plugins/ that is a link, pointed at another folder: what that folder holds is said.
#[test]
fn a_plugins_link_pointed_elsewhere_is_followed() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let dir = inst.root.join("plugins");
    let first = inst.root.join("plugins-1");
    std::fs::rename(&dir, &first).unwrap();
    std::os::unix::fs::symlink("plugins-1", &dir).unwrap();
    let _d = inst.start();
    let second = inst.root.join("plugins-2");
    std::fs::create_dir(&second).unwrap();
    std::fs::write(second.join("a.mjs"), TOOL).unwrap();
    std::fs::write(second.join("b.mjs"), TOOL).unwrap();
    let swap = inst.root.join("plugins.new");
    std::os::unix::fs::symlink("plugins-2", &swap).unwrap();
    std::fs::rename(&swap, &dir).unwrap();
    wait_for_row(
        &inst,
        "plugins/b.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
    // And edits in the folder it leads to now are heard.
    std::fs::write(second.join("c.mjs"), TOOL).unwrap();
    wait_for_row(
        &inst,
        "plugins/c.mjs appeared after the last read and is not served yet; `ovai restart` reads it",
    );
}

/// `ovai plugin` refuses a name the server serves, as the specification says, even where its file is
/// gone since the server read it: a new file of that name would be served as a change of that tool.
#[test]
fn ovai_plugin_refuses_a_name_the_server_still_serves() {
    let inst = Instance::with_plugins(&[("renamed.mjs", TOOL)]);
    let _d = inst.start();
    std::fs::remove_file(inst.root.join("plugins/renamed.mjs")).unwrap();
    inst.cmd()
        .args(["plugin", "renamed"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "The server serves a tool called renamed already",
        ));
    // Nor in another case (helper-104: `Renamed` was written).
    inst.cmd()
        .args(["plugin", "Renamed"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "The server serves a tool called renamed already (Renamed differs from it only in case, and \
             would be taken for it)",
        ));
    assert!(!inst.root.join("plugins/renamed.mjs").exists());
    assert!(!inst.root.join("plugins/Renamed.mjs").exists());
    // A built-in's name in another case is the scaffold's to say, not a file gone since (helper-107).
    inst.cmd()
        .args(["plugin", "Room"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "this server already has a tool called room, and Room differs from it only in case",
        ));
    inst.cmd().arg("restart").assert().success();
    inst.cmd().args(["plugin", "renamed"]).assert().success();
    assert!(inst.root.join("plugins/renamed.mjs").exists());
    // A built-in's name is never a file's: said as with no server running, not sent to `ovai restart`.
    for name in ["room", "index"] {
        inst.cmd().args(["plugin", name]).assert().code(1).stderr(format!(
            "ovai: {name} is a name a tool can have, but this server already has a tool called {name}. Pick another name; nothing was written.\n"
        ));
    }
}

/// A line a plugin's import printed without its end shows in `ovai check` too: check ends as the import
/// is reported, before the second a line without its end waits for one.
#[test]
fn check_shows_a_line_printed_at_import_without_its_end() {
    let said = check_printing("process.stderr.write('partial line no newline');");
    assert!(said.contains("partial line no newline"), "{said}");
}

/// `ovai check` of a tool whose import runs `printing` first: what it said on stderr (it passes).
fn check_printing(printing: &str) -> String {
    let inst = Instance::with_plugins(&[("printing.mjs", &format!("{printing}\n{TOOL}"))]);
    let out = inst
        .cmd()
        .args(["check", "plugins/printing.mjs"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A line longer than the log takes says how much of it was not written: it said the few bytes the
/// daemon cut from what the host had cut already (helper-78: "108 bytes more" of 10 MB).
#[test]
fn a_long_printed_line_counts_all_it_left_out() {
    // One line printed whole, one in two writes (the host holds a line until its end), in characters
    // of two and one bytes.
    let said = check_printing(
        "process.stdout.write('y'.repeat(1000000) + '\\n');\n\
         process.stdout.write('\\u00e9'.repeat(300000)); process.stdout.write('z'.repeat(5000) + '\\n');",
    );
    for (mark, bytes) in [('y', 1_000_000), ('\u{e9}', 605_000)] {
        let line = said
            .lines()
            .find(|l| l.contains(&mark.to_string().repeat(20)))
            .unwrap_or_else(|| panic!("no line of {mark}: {said}"));
        let kept: usize = line
            .split_once("… (")
            .map_or(line, |(kept, _)| kept)
            .chars()
            .filter(|c| *c == mark || *c == 'z')
            .map(char::len_utf8)
            .sum();
        let more: usize = line
            .split_once("… (")
            .and_then(|(_, r)| r.split_once(" bytes more, not written)"))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("no count: {line}"));
        assert_eq!(kept + more, bytes, "{kept} kept, {more} counted");
    }
}

/// A plugin that is a link to a kernel's file which waits to be read (/proc/kmsg, readable by root) holds
/// no restart and no stop: it is refused as a file that cannot be read, and the server goes on.
#[test]
fn a_plugin_linked_to_a_file_that_waits_holds_no_restart_and_no_stop() {
    if std::fs::File::open("/proc/kmsg").is_err() {
        eprintln!("/proc/kmsg cannot be opened here (not root): nothing to try");
        return;
    }
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let d = inst.start();
    std::os::unix::fs::symlink("/proc/kmsg", inst.root.join("plugins/kmsg.mjs")).unwrap();
    // Answered (exit 1: the link is left out), not held.
    let out = inst.cmd().arg("restart").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(said.contains("kmsg.mjs"), "{said}");
    inst.cmd().arg("restart").assert().code(1);
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("a", json!({})).1);
    assert!(d.stop().success());
}

/// A file changed while something makes and removes files in plugins/ without end (a plugin, a build)
/// is said while that goes on: the burst is cut, and what was heard is let go as it comes (held, it once
/// took the daemon hundreds of megabytes).
#[test]
fn a_change_amid_endless_churn_is_said_while_it_goes_on() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let _d = inst.start();
    let dir = inst.root.join("plugins");
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let path = dir.join(format!("churn-{}.txt", i % 64));
                let _ = std::fs::write(&path, "x");
                let _ = std::fs::remove_file(&path);
                i += 1;
            }
        })
    };
    std::fs::write(
        inst.root.join("plugins/a.mjs"),
        TOOL.replace("'ok'", "'edited'"),
    )
    .unwrap();
    // The churn runs until the row comes: before the burst was cut, it never came.
    wait_for_row(&inst, A_CHANGED);
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
}

/// A plugin that is a link to a file below /tmp is not served in a box, whose /tmp is its own: said so,
/// with what to do, rather than as a module Node cannot find.
#[test]
fn a_plugin_linked_into_tmp_is_said_to_be_out_of_the_box() {
    let inst = Instance::new();
    let elsewhere = tempfile::Builder::new()
        .prefix("ovai-linked")
        .tempdir_in("/tmp")
        .unwrap();
    let remote = std::fs::canonicalize(elsewhere.path())
        .unwrap()
        .join("remote.mjs");
    std::fs::write(&remote, TOOL).unwrap();
    std::os::unix::fs::symlink(&remote, inst.root.join("plugins/linked.mjs")).unwrap();
    let _d = inst.start();
    assert!(
        inst.rows("plugins").contains(&format!(
            "plugins/linked.mjs is not served: it is a link to {}, below /tmp, and the plugin host's box has a \
             /tmp of its own (so that no plugin reaches what other programs keep there). Put the file in \
             plugins/, or link to one outside /tmp.",
            remote.display()
        )),
        "{:?}",
        inst.rows("plugins")
    );
}

/// A plugins/ that is a link to a folder below /tmp is brought into the box read-only: the start and
/// `ovai check` say so, with what to do, before plugins find they cannot write beside themselves.
#[test]
fn a_plugins_link_into_tmp_is_said_to_be_read_only_in_the_box() {
    let inst = Instance::with_plugins(&[("a.mjs", TOOL)]);
    let elsewhere = tempfile::Builder::new()
        .prefix("ovai-plugins")
        .tempdir_in("/tmp")
        .unwrap();
    let target = std::fs::canonicalize(elsewhere.path())
        .unwrap()
        .join("plugins");
    std::fs::rename(inst.root.join("plugins"), &target).unwrap();
    std::os::unix::fs::symlink(&target, inst.root.join("plugins")).unwrap();
    let note = format!(
        "plugins/ is a link to {}, below /tmp: the plugin host's box has a /tmp of its own and brings plugins/ \
         in read-only, so no plugin can write beside itself",
        target.display()
    );
    let out = inst.cmd().arg("check").output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&note),
        "{out:?}"
    );
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(rows.iter().any(|r| r.contains(&note)), "{rows:?}");
    // Served all the same, from where the link leads.
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("a", json!({})), ("ok".to_string(), false));
}

/// An error that names a variable ovai has but does not pass (only `pluginEnv`'s are) is said so in
/// runtime.log: "set GITHUB_TOKEN first", with the variable set in the shell that started ovai, sent its
/// author looking at the shell. Only the names the error itself speaks of are said, never another
/// file's; and never to the caller, whose arguments the error may echo (helper-66: any seat could ask
/// which names ovai's environment holds).
#[test]
fn a_variable_ovai_has_but_does_not_pass_is_named_where_a_plugin_fails() {
    let inst = Instance::with_plugins(&[
        (
            "needs-token.mjs",
            "export const description = 'Needs a token.';\nexport const inputSchema = { type: 'object' };\n\
             export function run() {\n  if (!process.env.ACME_TEST_TOKEN) throw new Error('set ACME_TEST_TOKEN first');\n\
             return { text: 'token ' + process.env.ACME_TEST_TOKEN.length };\n}\n",
        ),
        (
            "boots.mjs",
            "if (!('ACME_TEST_BOOT' in process.env)) throw new Error('no ACME_TEST_BOOT here');\n\
             export const description = 'x';\nexport const inputSchema = { type: 'object' };\nexport function run() { return 'x'; }\n",
        ),
        // Names an error speaks of that ovai has not either are not said; nor is anything to a caller
        // whose own words the error echoes.
        (
            "nowhere.mjs",
            "export const description = 'x';\nexport const inputSchema = { type: 'object' };\n\
             export function run({ name }) { throw new Error(`no ${name ?? 'ACME_TEST_NOWHERE'} here`); }\n",
        ),
        // Writing to the environment works as in any Node program, a name set before included.
        (
            "writes-env.mjs",
            "export const description = 'x';\nexport const inputSchema = { type: 'object' };\n\
             export function run() {\n  process.env.TZ = 'UTC';\n  process.env.ACME_MINE = '1';\n  process.env.ACME_MINE = '2';\n\
             Object.assign(process.env, { ACME_MINE: '3' });\n  delete process.env.ACME_MINE;\n  return { text: 'wrote' };\n}\n",
        ),
    ]);
    let env = [
        ("ACME_TEST_TOKEN", "abc"),
        ("ACME_TEST_BOOT", "1"),
        ("ACME_OTHER", "x"),
    ];
    let d = Daemon::start_with_env(&inst, &env);
    let mut s = inst.session("lead");
    s.initialize();
    let (text, refused) = s.call("needs-token", json!({}));
    assert!(
        refused && text.ends_with("Error: set ACME_TEST_TOKEN first"),
        "{text}"
    );
    inst.wait_for_row(
        "host",
        "A call to plugins/needs-token.mjs failed: ACME_TEST_TOKEN is set in ovai's own environment but not \
         passed to plugins: name it in \"pluginEnv\" in openovai.json, then `ovai restart`.",
    );
    let (text, refused) = s.call("nowhere", json!({}));
    assert!(
        refused && text.ends_with("Error: no ACME_TEST_NOWHERE here"),
        "{text}"
    );
    let (text, refused) = s.call("nowhere", json!({ "name": "ACME_OTHER" }));
    assert!(
        refused && text.ends_with("Error: no ACME_OTHER here"),
        "{text}"
    );
    let rows = inst.rows("host").join("\n");
    assert!(!rows.contains("ACME_TEST_NOWHERE"), "{rows}");
    assert_eq!(s.call("writes-env", json!({})), ("wrote".into(), false));
    let rows = inst.rows("plugins").join("\n");
    assert!(
        rows.contains(
            "plugins/boots.mjs is not served: importing it failed: Error: no ACME_TEST_BOOT here"
        ) && rows
            .contains("ACME_TEST_BOOT is set in ovai's own environment but not passed to plugins")
            && !rows.contains("ACME_TEST_TOKEN"),
        "{rows}"
    );
    drop(d);
    // Passed, they are there.
    inst.set_config(json!({ "pluginEnv": ["ACME_TEST_TOKEN", "ACME_TEST_BOOT"] }));
    let _d = Daemon::start_with_env(&inst, &env);
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(s.call("needs-token", json!({})), ("token 3".into(), false));
    assert!(s.tool_names().contains(&"boots".to_string()));
}

/// openovai.json edited while the server runs is said by `ovai status` until a restart reads it: the
/// calls went on with the old settings, and nothing told the person why (helper-65).
#[test]
fn status_says_openovai_json_changed_until_a_restart_reads_it() {
    let inst = Instance::new();
    let _d = inst.start();
    let said = || {
        let out = inst.cmd().arg("status").output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    const CHANGED: &str = "openovai.json changed since the last read";
    assert!(!said().contains(CHANGED));
    inst.set_config(json!({ "greet": { "lang": "fr" } }));
    let now = said();
    assert!(
        now.contains(
            "openovai.json changed since the last read: the server goes on with the settings it read, and \
             `ovai restart` reads it (calls' context.config included)."
        ),
        "{now}"
    );
    inst.cmd().arg("restart").assert().success();
    assert!(!said().contains(CHANGED));
}

/// openovai.json saved while the server runs is said in runtime.log at once, as a plugin's file is:
/// `ovai logs -f` said nothing until a status or a restart (helper-82). One row a change of state, however
/// often it is saved.
#[test]
fn openovai_json_saved_while_serving_is_said_in_the_log() {
    let inst = Instance::new();
    let _d = inst.start();
    let file = inst.root.join("openovai.json");
    let read = std::fs::read_to_string(&file).unwrap();
    const CHANGED: &str = "openovai.json changed since the last read: the server goes on with the settings it \
                           read, and `ovai restart` reads it (calls' context.config included).";
    inst.set_config(json!({ "greet": { "lang": "fr" } }));
    inst.wait_for_row("server", CHANGED);
    inst.set_config(json!({ "greet": { "lang": "de" } }));
    std::fs::write(&file, "{ \"user\": ").unwrap();
    inst.wait_for_row(
        "server",
        "openovai.json changed since the last read and cannot be used as it is: openovai.json does not \
         parse: EOF while parsing a value at line 1, column 10. The server goes on with the settings it \
         read; fix it, then `ovai restart`.",
    );
    let changed = inst
        .rows("server")
        .iter()
        .filter(|r| r.as_str() == CHANGED)
        .count();
    assert_eq!(changed, 1, "{:?}", inst.rows("server"));
    std::fs::write(&file, &read).unwrap();
    inst.wait_for_row("server", "openovai.json is as the server read it again.");
}

/// `ovai call` of a tool whose file was edited and not read again says it ran the file as it was read:
/// the author trying an edit saw the old code run, with nothing on the screen saying why (helper-65).
#[test]
fn a_call_of_an_edited_file_says_it_ran_it_as_it_was_read() {
    let tool = |text: &str| {
        format!(
            "export const description = 'x';\nexport const inputSchema = {{ type: 'object' }};\n\
             export function run() {{ return {{ text: '{text}' }}; }}\n"
        )
    };
    let inst = Instance::with_plugins(&[("greet.mjs", &tool("old"))]);
    let d = inst.start();
    inst.write_plugin("greet.mjs", &tool("new"));
    inst.cmd()
        .args(["call", "greet", "--seat", "lead"])
        .assert()
        .success()
        .stdout("old\n")
        .stderr(predicates::str::contains(
            "ovai: plugins/greet.mjs changed since the last read, and the call ran it as it was read: \
             `ovai restart` serves it as it is now.",
        ));
    // A new host (here for a seat change) leaves the file out: the call is refused, and ran nothing. The
    // seat change says so (helper-91: the author's tool was refused, unsaid).
    let host = d.host_pid();
    inst.cmd()
        .args(["seat", "add", "w2"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "ovai: plugins/greet.mjs changed since the last read, so the plugin host started for this change \
             leaves it out, and its calls are refused until `ovai restart` serves it as it is now.",
        ));
    wait_until("a new host", || (d.host_pid() != host).then_some(()));
    let out = inst
        .cmd()
        .args(["call", "greet", "--seat", "lead"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("is not answering calls since a new plugin host was started")
            && !said.contains("ran it as it was read"),
        "{said}"
    );
    inst.cmd().arg("restart").assert().success();
    inst.cmd()
        .args(["call", "greet", "--seat", "lead"])
        .assert()
        .success()
        .stdout("new\n")
        .stderr("");
}

/// `ovai call` of a tool whose file was removed and not read again says it ran the file as it was read
/// (helper-99): the author who removed it saw it answer, with nothing saying why.
#[test]
fn a_call_of_a_removed_file_says_it_ran_it_as_it_was_read() {
    let inst = Instance::with_plugins(&[(
        "greet.mjs",
        "export const description = 'x';\nexport const inputSchema = { type: 'object' };\n\
         export function run() { return { text: 'still here' }; }\n",
    )]);
    let _d = inst.start();
    std::fs::remove_file(inst.root.join("plugins/greet.mjs")).unwrap();
    inst.cmd()
        .args(["call", "greet", "--seat", "lead"])
        .assert()
        .success()
        .stdout("still here\n")
        .stderr(predicates::str::contains(
            "ovai: plugins/greet.mjs was removed since the last read, and the call ran it as it was read: \
             `ovai restart` stops serving it.",
        ));
}

/// A scaffold that cannot be written whole (a full disk; here a file size limit) leaves no file: an
/// empty plugins/NAME.mjs was left, and the next `ovai plugin NAME` refused it as somebody's work.
#[test]
fn a_scaffold_not_written_whole_leaves_no_file() {
    use std::os::unix::process::CommandExt;
    let inst = Instance::new();
    let mut cmd = std::process::Command::new(OVAI);
    cmd.args(["plugin", "tracker", "--root"]).arg(&inst.root);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 100,
                rlim_max: 100,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!said.trim().is_empty(), "said in words");
    assert!(
        !inst.root.join("plugins/tracker.mjs").exists(),
        "no part of a scaffold is left: {said}"
    );
    inst.cmd().args(["plugin", "tracker"]).assert().success();
}

/// A file that was not served, removed after the read, gets a row and shows in status as such: its
/// removal may be the fix its own row asked for (two files whose names differ only in case), and nothing
/// said so (helper-82).
#[test]
fn a_file_not_served_removed_after_the_read_gets_a_row() {
    let tool = "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'ok' }; }";
    let inst = Instance::with_plugins(&[("whoami.mjs", tool), ("WHOAMI.mjs", tool)]);
    let d = inst.start();
    let rows = inst.rows("plugins");
    assert_eq!(
        rows.iter()
            .filter(|r| r.contains(" is not served: "))
            .count(),
        2,
        "{rows:?}"
    );
    std::fs::remove_file(inst.root.join("plugins/WHOAMI.mjs")).unwrap();
    wait_for_row(
        &inst,
        "plugins/WHOAMI.mjs, which was not served, was removed after the last read; `ovai restart` reads plugins/ without it",
    );
    let status = d.status().unwrap();
    assert_eq!(status["removedUnserved"], json!(["plugins/WHOAMI.mjs"]));
    assert_eq!(status["removedFiles"], json!([]));
    inst.cmd().arg("status").assert().success().stdout(predicate::str::contains(
        "Removed since the last read, not served: plugins/WHOAMI.mjs (`ovai restart` reads plugins/ without them).",
    ));
    inst.cmd().arg("restart").assert().success();
    assert_eq!(
        inst.cmd()
            .args(["call", "whoami", "--seat", "lead"])
            .output()
            .unwrap()
            .stdout,
        b"ok\n"
    );
}

/// A restart's exit counts the tools left out: a `.ts` beside them (told it is no tool) fails no
/// restart, and the service manager's reload (MAINPID set) never fails for a file (helper-83).
#[test]
fn a_restart_fails_only_for_a_tool_left_out_and_never_a_reload() {
    let tool = "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport function run() { return { text: 'ok' }; }";
    let inst = Instance::with_plugins(&[("good.mjs", tool), ("good.ts", "export {};")]);
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(
        rows.iter()
            .any(|r| r.starts_with("plugins/good.ts is not served")),
        "{rows:?}"
    );
    inst.cmd().arg("restart").assert().success();
    inst.write_plugin("broken.mjs", "export const description = 'd';");
    inst.cmd().arg("restart").assert().code(1);
    inst.cmd()
        .arg("restart")
        .env("MAINPID", "1")
        .assert()
        .success()
        .stdout(predicate::str::contains("plugins/broken.mjs is not served"));
}

/// A tool written in a folder of plugins/ (`plugins/deploy/index.mjs`, as other hosts lay plugins out)
/// was served by nothing and said by nothing: it is named, with where to move it. A module the tools
/// import says nothing, nor does one a tool of the same name beside the folder may import.
#[test]
fn a_tool_written_in_a_folder_is_named_with_where_to_move_it() {
    const TOOL: &str = "export const description = 'd';\nexport const inputSchema = { type: 'object' };\nexport async function run() { return { text: 'x' }; }\n";
    let inst = Instance::with_plugins(&[
        (
            "uses.mjs",
            &format!("import {{ helper }} from './lib/util.mjs';\n{TOOL}"),
        ),
        // A tool whose code is in a folder, as plugins.md advises (helper-98: the module was named).
        (
            "shipit.mjs",
            "export { description, inputSchema, run } from './lib/shipit-impl.mjs';\n",
        ),
    ]);
    for (file, text) in [
        ("deploy/index.mjs", TOOL),
        (
            "tools/ci-status.mjs",
            "const description = 'd', inputSchema = {};\nfunction run() {}\nexport { description, inputSchema, run as run };\n",
        ),
        (
            "lib/util.mjs",
            "export function helper() {}\nexport const run = 1;\n",
        ),
        ("uses/index.mjs", TOOL),
        ("lib/shipit-impl.mjs", TOOL),
        // Exports written only in comments are none.
        (
            "notes/draft.mjs",
            "// export const description = 'd';\n// export function run() {}\n",
        ),
        // A folder whose name is no tool's, its Index in another case.
        ("my_tool/Index.mjs", TOOL),
    ] {
        let path = inst.root.join("plugins").join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let deploy = "plugins/deploy/index.mjs is not served: only files directly in plugins/ are tools, and it \
                  exports description and run as a tool does: move it to plugins/deploy.mjs to serve it (a \
                  folder's modules are code the tools import)";
    let ci = deploy
        .replace("deploy/index.mjs", "tools/ci-status.mjs")
        .replace("plugins/deploy.mjs", "plugins/ci-status.mjs");
    let _d = inst.start();
    let rows = inst.rows("plugins");
    assert!(rows.contains(&deploy.to_string()), "{rows:?}");
    assert!(
        !rows
            .iter()
            .any(|r| r.contains("shipit-impl") || r.contains("draft")),
        "{rows:?}"
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("plugins/my_tool/Index.mjs is not served")
                && r.contains("move it to plugins/NAME.mjs, NAME a tool's name")),
        "{rows:?}"
    );
    assert!(rows.contains(&ci), "{rows:?}");
    assert!(
        !rows
            .iter()
            .any(|r| r.contains("lib/") || r.contains("uses/")),
        "{rows:?}"
    );
    let out = inst.cmd().arg("check").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains(&deploy.replace("is not served", "would not be served")),
        "{out}"
    );
    assert_eq!(err, "ovai: 3 of the 5 files checked would not be served.\n");
    // With only the folder's tool, a check says it, not that plugins/ holds no tool files.
    std::fs::remove_file(inst.root.join("plugins/uses.mjs")).unwrap();
    std::fs::remove_file(inst.root.join("plugins/shipit.mjs")).unwrap();
    for folder in ["tools", "uses", "lib", "my_tool"] {
        std::fs::remove_dir_all(inst.root.join("plugins").join(folder)).unwrap();
    }
    inst.cmd()
        .arg("check")
        .assert()
        .code(1)
        .stdout(format!(
            "{}\n",
            deploy.replace("is not served", "would not be served")
        ))
        .stderr("ovai: 1 of the 1 files checked would not be served.\n");
}
