//! The command line: init, seats, `ovai call`, and `ovai serve`'s refusals, each with its sentence and
//! exit code.

mod common;
use common::*;
use predicates::prelude::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_makes_an_instance_with_the_leaders_seat() {
    let inst = Instance::new();
    let config: Value = read_json(&inst.root.join("openovai.json"));
    assert_eq!(config, json!({ "user": "ann", "leader": "lead" }));
    assert!(inst.root.join("plugins").is_dir());
    assert_eq!(mode(&inst.root.join(".ovai")), 0o700);
    let mcp = inst.root.join("desks/lead/.mcp.json");
    assert_eq!(mode(&mcp), 0o600);
    let v: Value = read_json(&mcp);
    let entry = &v["mcpServers"]["openovai"];
    assert_eq!(entry["type"], "stdio");
    assert_eq!(
        entry["command"],
        std::fs::canonicalize(OVAI).unwrap().display().to_string()
    );
    assert_eq!(entry["args"], json!(["mcp"]));
    assert_eq!(entry["env"]["OVAI_ROOT"], inst.root.display().to_string());
    let secret = entry["env"]["OVAI_SECRET"].as_str().unwrap();
    assert_eq!(secret.len(), 64);
    assert!(secret.chars().all(|c| c.is_ascii_hexdigit()));
    let seats = std::fs::read_to_string(inst.root.join(".ovai/seats.json")).unwrap();
    assert!(
        !seats.contains(secret),
        "seats.json never holds a secret in clear"
    );
    assert_eq!(mode(&inst.root.join(".ovai/seats.json")), 0o600);
}

/// With no user given and $USER empty, the instance's user is "user", and init says so and how to name
/// another (it was taken silently; helper-81).
#[test]
fn init_with_no_user_to_be_found_says_what_it_named() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let root = dir.path().join("ws");
    ovai()
        .arg("init")
        .arg(&root)
        .env("USER", "")
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "ovai: $USER is empty, so the instance's user is \"user\": `ovai init --user NAME` names \
             another, or change \"user\" in openovai.json.",
        ));
    let config: Value = read_json(&root.join("openovai.json"));
    assert_eq!(config["user"], "user");
    // A Leader's name that cannot be is refused first: nothing said of $USER, no folder made
    // (helper-103).
    let other = dir.path().join("ws2");
    ovai()
        .args(["init", "--leader", "Boss_1"])
        .arg(&other)
        .env_remove("USER")
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("\"Boss_1\" cannot be the Leader's seat name: ")
                .and(predicates::str::contains("Nothing was made."))
                .and(predicates::str::contains("$USER").not()),
        );
    assert!(!other.exists());
}

#[test]
fn init_refuses_a_directory_that_holds_an_instance() {
    let inst = Instance::new();
    let before = std::fs::read_to_string(inst.root.join("openovai.json")).unwrap();
    ovai()
        .args(["init", "--user", "bob"])
        .arg(&inst.root)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "already holds an instance (openovai.json is there); nothing was changed",
        ));
    assert_eq!(
        std::fs::read_to_string(inst.root.join("openovai.json")).unwrap(),
        before
    );
}

/// An init that fails (a Leader's desk left there that does not parse) takes back what it made, so its
/// "run the command again" works; and the command it prints next pastes into a shell whatever the path.
#[test]
fn a_failed_init_leaves_nothing_and_its_next_command_is_quoted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("my work's \"ws\"");
    std::fs::create_dir_all(dir.join("desks/lead")).unwrap();
    std::fs::write(dir.join("desks/lead/.mcp.json"), "keep").unwrap();
    ovai()
        .args(["init", "--user", "ann"])
        .arg(&dir)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("run the command again"));
    for made in ["openovai.json", "plugins", ".ovai"] {
        assert!(!dir.join(made).exists(), "{made} was left behind");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("desks/lead/.mcp.json")).unwrap(),
        "keep"
    );
    std::fs::write(dir.join("desks/lead/.mcp.json"), "{}").unwrap();
    let out = ovai()
        .args(["init", "--user", "ann"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let quoted = format!(
        "serve --root '{}'",
        dir.display().to_string().replace('\'', r"'\''")
    );
    assert!(said.contains(&quoted), "{said}");
}

/// A folder inside an instance named as the root (`OVAI_ROOT=ws/desks`) is said to be the instance's,
/// not offered an `ovai init` that would be refused.
#[test]
fn a_folder_of_an_instance_named_as_the_root_points_to_the_instance() {
    let inst = Instance::new();
    let desks = inst.root.join("desks");
    let out = ovai()
        .env("OVAI_ROOT", &desks)
        .arg("status")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success());
    assert!(
        said.contains(&format!(
            "{} holds no openovai.json: it is a folder of the openovai instance at {} (named by OVAI_ROOT). Name the instance itself: --root {}.",
            desks.display(),
            inst.root.display(),
            inst.root.display()
        )),
        "{said}"
    );
    assert!(!said.contains("ovai init"), "{said}");
}

#[test]
fn init_with_examples_writes_them() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    ovai()
        .args(["init", "--examples"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Wrote the example plugins: freeze.mjs, last-build.mjs, whoami.mjs.",
        ));
    for f in ["last-build.mjs", "freeze.mjs", "whoami.mjs"] {
        assert!(dir.path().join("plugins").join(f).is_file());
    }
    // The seed's own walk-through comes next, and the examples leave its name free.
    ovai()
        .args(["plugin", "ci-status", "--root"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("Wrote plugins/ci-status.mjs"));
}

#[test]
fn seat_names_follow_the_tool_name_rule() {
    let inst = Instance::new();
    for (name, why) in [
        ("w_1", "an underscore"),
        ("1w", "the digit 1"),
        (&"w".repeat(33) as &str, "33 characters"),
    ] {
        inst.cmd()
            .args(["seat", "add", name])
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("cannot be a seat name: it".to_string())
                    .and(predicate::str::contains(why)),
            );
    }
    inst.cmd()
        .args(["seat", "add", "lead"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "There is already a seat called lead.",
        ));
    // A seat that is not there is a usage problem for every command that names one, as for `ovai call
    // --seat`: exit 2.
    for command in ["remove", "rotate", "trust"] {
        inst.cmd()
            .args(["seat", command, "ghost"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "There is no seat called ghost. The seats are: lead.",
            ));
    }
}

#[test]
fn seat_list_and_remove_keep_the_desk() {
    let inst = Instance::new();
    inst.add_seat("w1");
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout("lead: Leader\nw1: Worker\n(No server is running, so nobody is connected.)\n");
    let d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout("lead: Leader, no session now\nw1: Worker, in a session now\n");
    drop(s);
    drop(d);
    inst.cmd().args(["seat", "remove", "w1"]).assert().success();
    assert!(inst.root.join("desks/w1").is_dir(), "the desk stays");
    assert!(
        !inst.root.join("desks/w1/.mcp.json").exists(),
        "the seat's server entry is gone"
    );
    // A rebuild says why the removed seat's desk is left out as it is: it has no .mcp.json at all.
    inst.cmd()
        .args(["seat", "rebuild"])
        .assert()
        .success()
        .stderr(predicates::str::contains(
            "desks/w1 was left out: it has no .mcp.json (a removed seat's desk has none; `ovai seat add w1` \
             makes it a seat again).",
        ));
}

#[test]
fn seat_add_keeps_other_servers_in_a_desks_mcp_json() {
    let inst = Instance::new();
    std::fs::create_dir_all(inst.root.join("desks/w2")).unwrap();
    std::fs::write(
        inst.root.join("desks/w2/.mcp.json"),
        r#"{"mcpServers":{"other":{"command":"x"}}}"#,
    )
    .unwrap();
    inst.add_seat("w2");
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(inst.root.join("desks/w2/.mcp.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(v["mcpServers"]["other"]["command"], "x");
    assert!(v["mcpServers"]["openovai"]["env"]["OVAI_SECRET"].is_string());
    inst.cmd().args(["seat", "remove", "w2"]).assert().success();
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(inst.root.join("desks/w2/.mcp.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(v, json!({ "mcpServers": { "other": { "command": "x" } } }));
}

const TOOL: &str = r#"
export const description = "Answers or refuses.";
export const inputSchema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] };
export function run({ ok }, { seat }) { return ok ? { text: `yes, ${seat}` } : { refused: `no, ${seat}` }; }
"#;

#[test]
fn call_exit_codes_say_text_refusal_or_problem() {
    let inst = Instance::with_plugins(&[("yesno.mjs", TOOL)]);
    inst.add_seat("w1");
    inst.cmd()
        .args(["call", "yesno", r#"{"ok":true}"#, "--seat", "w1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("No ovai server is running for"));
    let _d = inst.start();
    inst.cmd()
        .args(["call", "yesno", r#"{"ok":true}"#, "--seat", "w1"])
        .assert()
        .code(0)
        .stdout("yes, w1\n");
    inst.cmd()
        .args(["call", "yesno", r#"{"ok":false}"#, "--seat", "w1"])
        .assert()
        .code(1)
        .stderr("no, w1\n");
    // OVAI_SECRET works the same as --seat.
    inst.cmd()
        .env("OVAI_SECRET", inst.secret("lead"))
        .args(["call", "yesno", r#"{"ok":true}"#])
        .assert()
        .code(0)
        .stdout("yes, lead\n");
    inst.cmd()
        .args(["call", "yesno", "{not json", "--seat", "w1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the arguments are not JSON"));
    inst.cmd()
        .args(["call", "yesno", "[1]", "--seat", "w1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "the arguments are an array, and a tool takes an object, as in '{\"ok\":true}'",
        ));
    // The seat given where the arguments go (helper-103: told to give an object).
    inst.cmd()
        .args(["call", "yesno", "w1"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(
                "the arguments are not JSON, and w1 is a seat: name it with --seat, as in ",
            )
            .and(predicate::str::contains("ovai call yesno --seat w1\n")),
        );
    inst.cmd()
        .args(["call", "nope", "--seat", "w1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "There is no tool called nope on this server",
        ));
    inst.cmd()
        .args(["call", "yesno"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "pass --seat NAME, or set OVAI_SECRET",
        ));
    // A seat that is not there: the hint is a command that works.
    inst.cmd()
        .args(["call", "yesno", "--seat", "ghost"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "There is no seat called ghost. The seats are: lead, w1. `ovai seat add ghost` makes it.",
        ));
    inst.cmd()
        .args(["call", "yesno", "--seat", "W1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "There is no seat called W1 (there is w1). The seats are: lead, w1.",
        ))
        .stderr(predicate::str::contains("seat add").not());
    inst.cmd()
        .args(["call", "yesno", "--seat", "w1;rm"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("\"w1;rm\" cannot be a seat name"))
        .stderr(predicate::str::contains("seat add").not());
    std::fs::remove_file(inst.root.join("desks/w1/.mcp.json")).unwrap();
    inst.cmd()
        .args(["call", "yesno", "--seat", "w1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "desks/w1/.mcp.json is missing, so there is no secret to call as w1 with; `ovai seat rotate w1` writes a new one (with --url URL for a seat on another machine)",
        ));
    // Broken by hand: said as it is, since a rotate would refuse it too.
    std::fs::write(inst.root.join("desks/w1/.mcp.json"), "{").unwrap();
    inst.cmd()
        .args(["call", "yesno", "--seat", "w1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not parse"))
        .stderr(predicate::str::contains("seat rotate").not());
    std::fs::remove_file(inst.root.join("desks/w1/.mcp.json")).unwrap();
    inst.cmd().args(["seat", "rotate", "w1"]).assert().success();
    inst.cmd().args(["call", "yesno", "{}", "--seat", "w1"]).assert().code(1).stderr(predicate::str::contains(
        "The arguments do not fit the inputSchema of yesno, so it was not run: \"ok\" is a required property",
    ));
}

#[test]
fn a_second_serve_refuses_and_the_first_keeps_serving() {
    let inst = Instance::new();
    let mut d = inst.start();
    inst.cmd()
        .arg("serve")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "Another ovai serve is already serving {} (pid {}). Stop it first, or run `ovai restart` to read plugins/ again.",
            inst.root.display(),
            d.pid()
        )));
    assert!(d.is_running());
    inst.cmd()
        .args(["call", "room", "--seat", "lead"])
        .assert()
        .code(0);
}

#[test]
fn serve_refuses_a_config_that_does_not_parse() {
    let inst = Instance::new();
    std::fs::write(
        inst.root.join("openovai.json"),
        "{\n  \"user\": \"ann\",\n  \"leader\": \"lead\",\n}\n",
    )
    .unwrap();
    inst.cmd()
        .arg("serve")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "openovai.json does not parse: trailing comma at line 3, column 19. Fix it and start the server \
             again.",
        ));
    // Several mistakes are "them" (helper-103: "Fix it" after "has 2 mistakes").
    std::fs::write(
        inst.root.join("openovai.json"),
        r#"{"user": "ann", "leader": "lead", "callTimeoutSeconds": 0, "maxAnswerBytes": -1}"#,
    )
    .unwrap();
    inst.cmd().arg("serve").assert().code(1).stderr(
        predicate::str::contains("openovai.json has 2 mistakes: ").and(predicate::str::ends_with(
            "Fix them and start the server again.\n",
        )),
    );
}

#[test]
fn commands_outside_an_instance_say_how_to_make_one() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    // One exit code for one mistake, whichever command made it: a usage problem, as `ovai call` says.
    for args in [
        &["seat", "list"][..],
        &["status"],
        &["stop"],
        &["logs"],
        &["tools"],
        &["call", "whoami", "{}"],
    ] {
        ovai()
            .current_dir(dir.path())
            .args(args)
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("No openovai instance was found")
                    .and(predicate::str::contains("Run `ovai init`")),
            );
    }
}

#[test]
fn the_root_is_found_from_any_folder_inside_it() {
    let inst = Instance::new();
    ovai()
        .current_dir(inst.root.join("desks/lead"))
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("lead: Leader"));
}

#[test]
fn serve_keeps_its_socket_and_private_folder_to_the_owner() {
    let inst = Instance::new();
    let _d = inst.start();
    assert_eq!(mode(&inst.root.join(".ovai")), 0o700);
    assert_eq!(mode(&inst.root.join(".ovai/ovai.sock")), 0o600);
    assert_eq!(mode(&inst.root.join(".ovai/control.secret")), 0o600);
    assert!(inst.rows("server")[0].starts_with(&format!(
        "ovai serve is up for {} (pid ",
        inst.root.display()
    )));
    // Served as root, it says what that gives a plugin; as anybody else, nothing.
    let as_root = inst
        .rows("server")
        .iter()
        .any(|r| r.starts_with("ovai serve runs as root"));
    assert_eq!(as_root, nix::unistd::geteuid().is_root());
}

#[test]
fn output_cut_short_ends_quietly() {
    let inst = Instance::new();
    let mut fds = [0i32; 2];
    // SAFETY: pipe fills the two descriptors it is given; the read end is closed at once, so the
    // command's first write meets a pipe nobody reads (as with `ovai seat list | head -0`).
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
    }
    use std::os::fd::FromRawFd;
    // SAFETY: fds[1] is a fresh descriptor owned by nothing else.
    let write_end = unsafe { std::fs::File::from_raw_fd(fds[1]) };
    // The completion script too (helper-65: `ovai completions bash | head` said "Broken pipe").
    for args in [&["seat", "list"][..], &["completions", "bash"][..]] {
        let out = std::process::Command::new(OVAI)
            .args(args)
            .arg("--root")
            .arg(&inst.root)
            .stdout(write_end.try_clone().unwrap())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}");
    }
}

#[test]
fn a_plugin_host_that_stops_reading_mid_check_is_said_in_words() {
    let inst = Instance::with_plugins(&[(
        "echo.mjs",
        "export const description = \"Echoes.\";\nexport const inputSchema = { type: \"object\" };\nexport function run() { return { text: \"x\" }; }\n",
    )]);
    // A "Node" that says it is ready, then closes its protocol input: `ovai check`'s next line meets a
    // pipe nobody reads.
    let protocol =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/host-shim/host.mjs"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("const PROTOCOL = "))
            .map(|v| v.trim_end_matches(';').to_string())
            .unwrap();
    let node = inst.root.join("deaf-node");
    std::fs::write(
        &node,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo v20.11.0; exit 0; fi\nexec 3<&-\n\
             printf '{{\"t\":\"ready\",\"v\":{protocol},\"node\":\"v20.11.0\",\"pid\":%s}}\\n' $$ >&4\nsleep 2\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = inst
        .cmd()
        .arg("check")
        .env("OVAI_NODE", &node)
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), None, "ovai check died by a signal");
    assert_eq!(out.status.code(), Some(1));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("plugins/echo.mjs would not be served: importing it stopped the plugin host"),
        "{said}"
    );
}

#[test]
fn the_help_of_every_command_reads_as_plain_text() {
    let top = assert_cmd::Command::new(OVAI)
        .arg("--help")
        .output()
        .unwrap();
    let top = String::from_utf8(top.stdout).unwrap();
    // Each command named in the top help, with its own help.
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        commands.contains(&"web") && commands.contains(&"call"),
        "{top}"
    );
    for command in commands {
        let out = assert_cmd::Command::new(OVAI)
            .args([command, "--help"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for help in [&top, &*text] {
            assert!(!help.contains("\\\""), "a backslash before a quote: {help}");
        }
    }
}

#[test]
fn call_shows_a_plugins_control_characters_escaped_on_a_terminal_only() {
    let inst = Instance::with_plugins(&[(
        "esc.mjs",
        r#"
export const description = "Answers with terminal escapes.";
export const inputSchema = { type: "object", properties: { refuse: { type: "boolean", description: "Refuse." } } };
export function run({ refuse }) {
  const said = "\x1b]0;owned\x07\x1b[2Jline one\nline two";
  return refuse ? { refused: said } : { text: said };
}
"#,
    )]);
    let _d = inst.start();
    // Piped, as a script reads it: the text as the plugin wrote it.
    let out = inst
        .cmd()
        .args(["call", "esc", "--seat", "lead"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\x1b]0;owned\x07\x1b[2Jline one\nline two\n"
    );
    // On a terminal (script(1) gives it one), no plugin rewrites the screen: shown escaped.
    for (args, code) in [("'{}'", 0), ("'{\"refuse\":true}'", 1)] {
        let command = format!(
            "{} --root {} call esc {args} --seat lead",
            std::fs::canonicalize(OVAI).unwrap().display(),
            inst.root.display()
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env_remove("OVAI_ROOT")
            .output()
            .expect("script(1), from util-linux, runs");
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{shown}");
        assert!(!shown.contains('\x1b'), "{shown:?}");
        assert!(
            shown.contains("\\u{1b}]0;owned\\u{7}\\u{1b}[2Jline one"),
            "{shown:?}"
        );
        assert!(shown.contains("line two"), "{shown:?}");
    }
}

/// A folder whose path holds what a terminal acts on or does not show (an escape, a line break, a
/// direction mark) is no instance's: `init` makes nothing there, and an instance moved there is refused
/// by every command, in words that show the path escaped. Printed raw, the path rewrote the operator's
/// terminal, and a line break in it broke the service unit `ovai service install` wrote.
#[test]
fn a_path_a_terminal_would_not_show_as_it_is_is_refused() {
    let base = tempfile::tempdir().unwrap();
    for name in [
        "ws\u{1b}]0;TITLE\u{7}",
        "ws\nExecStartPre=/bin/true",
        "ws\u{202e}txt",
        "ws\tx",
    ] {
        let dir = base.path().join(name);
        let out = ovai().arg("init").arg(&dir).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("holds a character a terminal does not show as it is"),
            "{err}"
        );
        assert!(!err.contains(name), "the path is shown escaped: {err:?}");
        assert!(err.contains("Nothing was made"), "{err}");
        assert!(!dir.exists(), "nothing was made at {dir:?}");
    }
    // An instance made elsewhere and moved there.
    let made = base.path().join("ws");
    ovai().arg("init").arg(&made).assert().success();
    let moved = base.path().join("ws\u{1b}[2J");
    std::fs::rename(&made, &moved).unwrap();
    for args in [&["status"][..], &["seat", "list"], &["serve"]] {
        let out = ovai()
            .args(args)
            .arg("--root")
            .arg(&moved)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            err.contains("holds a character a terminal does not show as it is"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains('\u{1b}') && err.contains(r"\u{1b}[2J"),
            "{args:?}: {err:?}"
        );
    }
}

/// Every command's `--help` ends with an example, as docs/operations.md promises: the commands with
/// subcommands (`seat`, `service`) and each of those too, read off the help itself.
#[test]
fn every_commands_help_has_an_example() {
    let commands_in = |args: &[&str]| -> Vec<String> {
        let out = ovai().args(args).arg("--help").output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        text.split("Commands:")
            .nth(1)
            .map(|rest| {
                rest.lines()
                    .skip(1)
                    .take_while(|l| l.starts_with("  "))
                    .filter_map(|l| l.split_whitespace().next())
                    .filter(|c| *c != "help")
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let top = commands_in(&[]);
    assert!(top.contains(&"seat".to_string()), "{top:?}");
    let mut missing = Vec::new();
    for command in &top {
        let mut paths = vec![vec![command.clone()]];
        for sub in commands_in(&[command.as_str()]) {
            paths.push(vec![command.clone(), sub]);
        }
        for path in paths {
            let out = ovai().args(&path).arg("--help").output().unwrap();
            if !String::from_utf8_lossy(&out.stdout).contains("\nExample: ") {
                missing.push(path.join(" "));
            }
        }
    }
    assert!(missing.is_empty(), "no example in the help of: {missing:?}");
}

/// A --root or OVAI_ROOT that is no folder says so, rather than that the folder holds no openovai.json.
#[test]
fn a_root_that_is_no_folder_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "").unwrap();
    let gone = dir.path().join("gone");
    for (path, what) in [
        (&gone, "does not exist"),
        (&file, "is a file, not a folder"),
    ] {
        ovai()
            .arg("status")
            .arg("--root")
            .arg(path)
            .assert()
            .failure()
            .stderr(predicates::str::contains(format!(
                "{} (named by --root) {what}: name the instance's folder, the one holding openovai.json",
                path.display()
            )));
    }
    ovai()
        .arg("status")
        .env("OVAI_ROOT", &gone)
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "(named by OVAI_ROOT) does not exist",
        ))
        // A desk's OVAI_ROOT that names nothing most likely names where a moved instance was.
        .stderr(predicates::str::contains(
            "If the instance was moved, `ovai seat rebuild` where it is now points its desks at it",
        ));
}

/// An instance that is all another user's (run as root on a user's instance, say) is said to be theirs,
/// with the command to run as them: not "remove it", which would lose its seats.
#[test]
fn another_users_instance_says_whose_it_is_and_how_to_run_as_them() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not root here: no instance can be given to another user");
        return;
    }
    let inst = Instance::new();
    fn give(path: &std::path::Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
        if path.is_dir() && !path.is_symlink() {
            for e in std::fs::read_dir(path).unwrap() {
                give(&e.unwrap().path(), uid);
            }
        }
    }
    give(&inst.root, 65534);
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(format!(
            "the instance at {} is another user's (uid 65534; this command runs as uid 0), and so is its private \
             folder {}/.ovai, which holds the seats' and the server's secrets: run ovai as that user (`sudo -u \
             '#65534' ovai …`). Nothing was changed.",
            inst.root.display(),
            inst.root.display()
        )));
}

/// `ovai init` around an instance (a folder above one) makes nothing: the outer instance's plugins would
/// read the inner one's seats' secrets, which only its own box hides.
#[test]
fn init_around_an_instance_makes_nothing() {
    let base = tempfile::tempdir().unwrap();
    let base_path = std::fs::canonicalize(base.path()).unwrap();
    let inner = base_path.join("projects/inner");
    ovai().arg("init").arg(&inner).assert().success();
    ovai()
        .arg("init")
        .arg(&base_path)
        .assert()
        .code(1)
        .stderr(predicates::str::contains(format!(
            "{} holds the openovai instance at {}: an instance around it would run plugins that read that one's \
             seats' secrets (its box hides only its own). Nothing was made; make it elsewhere.",
            base_path.display(),
            inner.display()
        )));
    assert!(!base_path.join("openovai.json").exists());
}

/// A mistyped OVAI_LOG (a bare word is a target to tracing) silenced the daemon's stderr whole, even
/// its warnings (helper-103): it is said, and the default log is kept.
#[test]
fn a_mistyped_ovai_log_is_said_and_the_log_kept() {
    let inst = Instance::new();
    let d = Daemon::start_with_env(&inst, &[("OVAI_LOG", "debgu")]);
    let stderr = d.stderr.clone();
    assert!(d.stop().success());
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        said.contains(
            "ovai: OVAI_LOG names \"debgu\", which is no level: give one of trace, debug, info, warn, error or \
             off, or TARGET=LEVEL (as in ovai=debug); it is left aside, and the log is \"info,rmcp=warn\"."
        ),
        "{said}"
    );
    assert!(said.contains("INFO"), "the default log is written: {said}");
    // A target alone is EnvFilter's, and taken as it is (helper-107: `ovai` was refused).
    for taken in ["ovai", "DEBUG", "rmcp=warn,ovai=debug", "5"] {
        inst.cmd()
            .env("OVAI_LOG", taken)
            .arg("version")
            .assert()
            .success()
            .stderr(predicate::str::contains("OVAI_LOG").not());
    }
    inst.cmd()
        .env("OVAI_LOG", "warning")
        .arg("version")
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "OVAI_LOG names \"warning\", which is no level",
        ));
}
