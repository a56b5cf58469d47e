//! A desk works in Claude Code as `ovai seat add` leaves it: the server approved and its one permission
//! rule granted in the desk's `.claude/settings.local.json`, merged into what a person keeps there.

mod common;
use common::*;
use predicates::prelude::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

fn settings(inst: &Instance, seat: &str) -> std::path::PathBuf {
    inst.root
        .join("desks")
        .join(seat)
        .join(".claude/settings.local.json")
}

#[test]
fn init_and_seat_add_approve_the_server_and_its_tools() {
    let inst = Instance::new();
    inst.add_seat("w1");
    for seat in ["lead", "w1"] {
        let path = settings(&inst, seat);
        assert_eq!(
            read_json(&path),
            json!({ "enabledMcpjsonServers": ["openovai"], "permissions": { "allow": ["mcp__openovai"] } })
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{seat}");
    }
}

#[test]
fn a_persons_settings_are_merged_and_only_ours_are_taken_out() {
    let inst = Instance::new();
    let path = settings(&inst, "w2");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let theirs = json!({
        "model": "opus",
        "enabledMcpjsonServers": ["github"],
        "permissions": { "allow": ["Bash(git status)"], "deny": ["Read(./.env)"] }
    });
    std::fs::write(&path, theirs.to_string()).unwrap();
    inst.add_seat("w2");
    let merged = read_json(&path);
    assert_eq!(
        merged,
        json!({
            "model": "opus",
            "enabledMcpjsonServers": ["github", "openovai"],
            "permissions": { "allow": ["Bash(git status)", "mcp__openovai"], "deny": ["Read(./.env)"] }
        })
    );
    // Removing and adding again adds nothing twice.
    inst.cmd().args(["seat", "remove", "w2"]).assert().success();
    assert_eq!(read_json(&path), theirs, "only our two entries went");
    inst.add_seat("w2");
    inst.cmd().args(["seat", "remove", "w2"]).assert().success();
    inst.add_seat("w2");
    assert_eq!(read_json(&path), merged);
    // Without anything of theirs, the file goes with the seat.
    inst.add_seat("w3");
    inst.cmd().args(["seat", "remove", "w3"]).assert().success();
    assert!(!settings(&inst, "w3").exists());
}

#[test]
fn a_settings_file_that_does_not_parse_is_named_and_left_alone() {
    let inst = Instance::new();
    let path = settings(&inst, "w4");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let broken = "{\n  \"model\": \"opus\",\n  \"permissions\": { allow: [] }\n}\n";
    std::fs::write(&path, broken).unwrap();
    inst.cmd()
        .args(["seat", "add", "w4"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Added the seat w4 (Worker)."))
        .stderr(
            predicate::str::contains(format!("ovai: warning: {} was left as it is: it does not parse", path.display()))
                .and(predicate::str::contains("(key must be a string at line 3, column 20)"))
                .and(predicate::str::contains(
                    "add \"openovai\" to enabledMcpjsonServers and \"mcp__openovai\" to permissions.allow",
                )),
        );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
    assert!(
        inst.root.join("desks/w4/.mcp.json").is_file(),
        "the seat is added all the same"
    );
    inst.cmd().args(["seat", "remove", "w4"]).assert().success();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
}

#[test]
fn an_mcp_json_that_does_not_parse_is_never_overwritten() {
    let inst = Instance::new();
    let desk = inst.root.join("desks/w5");
    std::fs::create_dir_all(&desk).unwrap();
    let broken = "{ \"mcpServers\": { \"github\": { \"command\": \"gh\" } }\n";
    std::fs::write(desk.join(".mcp.json"), broken).unwrap();
    inst.cmd()
        .args(["seat", "add", "w5"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains(".mcp.json does not parse")
                .and(predicate::str::contains("it was left as it is")),
        );
    assert_eq!(
        std::fs::read_to_string(desk.join(".mcp.json")).unwrap(),
        broken
    );
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("w5").not());
}

/// The files that hold a seat's secret at a desk, for every client ovai makes desks for.
const SECRET_FILES: [&str; 4] = [
    ".mcp.json",
    ".gemini/settings.json",
    ".codex/config.toml",
    "opencode.json",
];

#[test]
fn a_desk_is_made_for_each_client_and_rotate_and_remove_keep_them_right() {
    let inst = Instance::new();
    let out = inst.cmd().args(["seat", "add", "w1"]).output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("Claude Code, Gemini CLI, Codex or opencode started there acts as w1"),
        "{said}"
    );
    // Run from elsewhere, the command it names says which instance: a bare one would act on another.
    let root = inst.root.display().to_string();
    assert!(
        said.contains(&format!(" seat trust w1 --root {root}`")),
        "{said}"
    );
    let here = ovai()
        .current_dir(&inst.root)
        .args(["seat", "add", "w9"])
        .output()
        .unwrap();
    let said_here = String::from_utf8_lossy(&here.stdout);
    assert!(
        said_here.contains("/ovai seat trust w9`") && !said_here.contains("seat trust w9 --root"),
        "{here:?}"
    );
    inst.cmd().args(["seat", "remove", "w9"]).assert().success();
    let desk = inst.root.join("desks/w1");
    let secret = inst.secret("w1");
    for f in SECRET_FILES {
        let path = desk.join(f);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(text.contains(&secret), "{f}: {text}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600,
            "{f}"
        );
    }
    let gemini = read_json(&desk.join(".gemini/settings.json"));
    assert_eq!(gemini["mcpServers"]["openovai"]["trust"], true);
    assert_eq!(gemini["mcpServers"]["openovai"]["args"], json!(["mcp"]));
    let opencode = read_json(&desk.join("opencode.json"));
    assert_eq!(opencode["mcp"]["openovai"]["type"], "local");
    assert_eq!(opencode["mcp"]["openovai"]["command"][1], "mcp");
    assert!(
        std::fs::read_to_string(desk.join(".codex/config.toml"))
            .unwrap()
            .contains("default_tools_approval_mode = \"approve\"")
    );
    // A new secret reaches every file; the old one is in none.
    inst.cmd().args(["seat", "rotate", "w1"]).assert().success();
    let rotated = inst.secret("w1");
    assert_ne!(rotated, secret);
    for f in SECRET_FILES {
        let text = std::fs::read_to_string(desk.join(f)).unwrap();
        assert!(
            text.contains(&rotated) && !text.contains(&secret),
            "{f}: {text}"
        );
    }
    // A person's own file in a client's folder keeps that folder.
    std::fs::write(desk.join(".codex/AGENTS.md"), "mine").unwrap();
    inst.cmd().args(["seat", "remove", "w1"]).assert().success();
    for f in SECRET_FILES {
        assert!(
            !desk.join(f).exists(),
            "{f} stays after the seat is removed"
        );
    }
    // The clients' folders ovai made, left empty, go with them (helper-85).
    assert!(!desk.join(".gemini").exists());
    assert!(desk.join(".codex/AGENTS.md").is_file());
}

#[test]
fn clients_in_openovai_json_choose_which_files_a_desk_gets() {
    let inst = Instance::new();
    inst.set_config(json!({ "clients": ["claude-code", "opencode"] }));
    let out = inst.cmd().args(["seat", "add", "w1"]).output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("seat trust"), "{said}");
    let desk = inst.root.join("desks/w1");
    assert!(desk.join("opencode.json").is_file() && desk.join(".mcp.json").is_file());
    assert!(!desk.join(".gemini").exists() && !desk.join(".codex").exists());
    inst.set_config(json!({ "clients": ["claude", "cursor"] }));
    inst.cmd()
        .args(["seat", "add", "w2"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "In openovai.json, \"clients\" lists \"claude\", which is not a client ovai makes desks for; it takes \"claude-code\", \"gemini-cli\", \"codex\", \"opencode\"",
        ));
    // Codex alone: the trust step names Codex and its file only, here and for a remote desk.
    inst.set_config(json!({ "clients": ["codex"] }));
    for (seat, url) in [("w3", None), ("w4", Some("https://ovai.example/mcp"))] {
        let mut cmd = inst.cmd();
        cmd.args(["seat", "add", seat]);
        if let Some(url) = url {
            cmd.args(["--url", url]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(!said.contains("Gemini") && said.contains("Codex"), "{said}");
        if url.is_none() {
            assert!(
                said.contains("Codex started there acts as w3.")
                    && said.contains("Codex reads a desk's settings only in a folder you trust")
                    && said.contains("(~/.codex/config.toml)"),
                "{said}"
            );
        }
    }
}

/// `git add -A` in a desk, as a Worker whose desk is a checkout would, and what it staged.
fn staged(desk: &std::path::Path) -> Vec<String> {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(desk)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs (apt-get install git)");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["add", "-A"]);
    git(&["diff", "--cached", "--name-only"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn git_init(dir: &std::path::Path) {
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs (apt-get install git)");
    assert!(out.status.success());
}

#[test]
fn no_file_holding_the_secret_is_staged_by_git_add_all() {
    let inst = Instance::new();
    // A desk that becomes a repository after the seat is made.
    inst.add_seat("w1");
    let desk = inst.root.join("desks/w1");
    std::fs::write(desk.join("notes.md"), "work\n").unwrap();
    git_init(&desk);
    let files = staged(&desk);
    assert!(files.contains(&"notes.md".to_string()), "{files:?}");
    for f in SECRET_FILES {
        assert!(!files.contains(&f.to_string()), "{f} staged: {files:?}");
    }
    // A desk that is a checkout already: its repository's exclude file takes the lines, and nothing of the
    // person's own changes.
    let desk = inst.root.join("desks/w2");
    std::fs::create_dir_all(&desk).unwrap();
    git_init(&desk);
    inst.add_seat("w2");
    assert!(!desk.join(".gitignore").exists());
    let files = staged(&desk);
    for f in SECRET_FILES {
        assert!(!files.iter().any(|s| s == f), "{f} staged: {files:?}");
    }
    assert!(files.iter().all(|f| f.starts_with(".claude/")), "{files:?}");
}

/// An instance that is itself a checkout (`git add -A` at its root) stages nothing of its private folder:
/// the control secret, the seats' hashes, the lock.
#[test]
fn the_private_folder_is_never_staged_by_git_add_all_at_the_root() {
    let inst = Instance::new();
    git_init(&inst.root);
    let files = staged(&inst.root);
    assert!(files.contains(&"openovai.json".to_string()), "{files:?}");
    assert!(!files.iter().any(|f| f.starts_with(".ovai/")), "{files:?}");
}

/// Where a seat's secret would leave the desk or reach git, `seat add` and `seat rotate` write nothing
/// and say why: a client file the desk's repository tracks (ignore lines do nothing for it), a client's
/// folder that is a link out of the desk, a `.gitignore` that is a link. `seat remove` touches nothing
/// behind a link, and the plugin host's box starts beside such a desk.
#[test]
fn a_secret_is_never_written_where_it_would_leave_the_desk_or_reach_git() {
    let inst = Instance::new();
    let outside = tempfile::tempdir_in("/tmp").unwrap();
    let git = |dir: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git runs (apt-get install git)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let secret_in = |path: &std::path::Path| {
        std::fs::read_to_string(path)
            .is_ok_and(|t| t.contains("OVAI_SECRET") || t.contains("Bearer"))
    };

    // The repository tracks .mcp.json (its own servers, committed).
    let desk = inst.root.join("desks/w3");
    std::fs::create_dir_all(&desk).unwrap();
    git_init(&desk);
    let mine = "{\"mcpServers\":{\"github\":{\"command\":\"gh\"}}}\n";
    std::fs::write(desk.join(".mcp.json"), mine).unwrap();
    git(&desk, &["add", "-A"]);
    git(&desk, &["commit", "-qm", "mine"]);
    // The operator's shell may point git elsewhere (inside a hook): the desk's own repository decides.
    inst.cmd()
        .args(["seat", "add", "w3"])
        .env("GIT_INDEX_FILE", "/nonexistent/index")
        .assert()
        .failure()
        .stderr(predicates::str::contains(".mcp.json in "))
        .stderr(predicates::str::contains(
            "is tracked by git: a seat's secret written there would go out with the next commit. \
             Untrack it with `git rm --cached .mcp.json` there",
        ));
    assert_eq!(
        std::fs::read_to_string(desk.join(".mcp.json")).unwrap(),
        mine
    );
    assert!(
        !std::fs::read_to_string(inst.root.join(".ovai/seats.json"))
            .unwrap_or_default()
            .contains("\"w3\"")
    );
    // Untracked, as the sentence says: the seat is made, and nothing of it is staged.
    git(&desk, &["rm", "-q", "--cached", ".mcp.json"]);
    git(&desk, &["commit", "-qm", "untrack"]);
    inst.cmd().args(["seat", "add", "w3"]).assert().success();
    assert!(staged(&desk).iter().all(|f| f.starts_with(".claude/")));

    // Tracked, and deleted from the work tree: writing it would bring it back, secret and all.
    let desk = inst.root.join("desks/w5");
    std::fs::create_dir_all(&desk).unwrap();
    git_init(&desk);
    std::fs::write(desk.join("opencode.json"), "{}\n").unwrap();
    git(&desk, &["add", "-A"]);
    git(&desk, &["commit", "-qm", "mine"]);
    std::fs::remove_file(desk.join("opencode.json")).unwrap();
    inst.cmd()
        .args(["seat", "add", "w5"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("opencode.json in "));
    assert!(!desk.join("opencode.json").exists());
    // A repository git cannot read says so, and nothing is written.
    let desk = inst.root.join("desks/w8");
    std::fs::create_dir_all(&desk).unwrap();
    git_init(&desk);
    std::fs::write(desk.join(".git/index"), "garbage").unwrap();
    inst.cmd()
        .args(["seat", "add", "w8"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("git could not say whether"));
    assert!(!desk.join(".mcp.json").exists());

    // Codex's folder is a link out of the desk.
    let desk = inst.root.join("desks/w6");
    std::fs::create_dir_all(&desk).unwrap();
    std::os::unix::fs::symlink(outside.path(), desk.join(".codex")).unwrap();
    inst.cmd()
        .args(["seat", "add", "w6"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            ".codex is a symbolic link: a seat's secret is written only into the desk itself",
        ));
    assert!(!outside.path().join("config.toml").exists());

    // The .gitignore is a link.
    let desk = inst.root.join("desks/w9");
    std::fs::create_dir_all(&desk).unwrap();
    let theirs = outside.path().join("ignore");
    std::fs::write(&theirs, "target/\n").unwrap();
    std::os::unix::fs::symlink(&theirs, desk.join(".gitignore")).unwrap();
    inst.cmd()
        .args(["seat", "add", "w9"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(".gitignore is a symbolic link"));
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "target/\n");

    // A seat whose Gemini folder became a link later: rotate refuses, remove leaves what is behind it,
    // and the box still starts, hiding the file the link leads to.
    inst.add_seat("w7");
    let desk = inst.root.join("desks/w7");
    let moved = outside.path().join("gemini");
    std::fs::rename(desk.join(".gemini"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, desk.join(".gemini")).unwrap();
    let d = inst.start();
    assert!(
        d.status().unwrap()["host"]["pid"].as_u64().is_some(),
        "the plugin host runs beside a desk with a linked folder"
    );
    inst.cmd()
        .args(["seat", "rotate", "w7"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(".gemini is a symbolic link"));
    inst.cmd().args(["seat", "remove", "w7"]).assert().success();
    assert!(
        secret_in(&moved.join("settings.json")),
        "what is behind the link is left as it was"
    );
    assert!(!secret_in(&desk.join(".mcp.json")));
}

#[test]
fn seat_trust_writes_gemini_and_codex_trust_into_the_home_merged() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let home = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();
    std::fs::write(home.path().join(".codex/config.toml"), "model = \"o9\"\n").unwrap();
    let desk = inst.root.join("desks/w1");
    let out = inst
        .cmd()
        .args(["seat", "trust", "w1"])
        .env("HOME", home.path())
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("Gemini CLI trusts") && said.contains("Codex trusts"),
        "{said}"
    );
    // A desk outside a git work tree: what else `codex exec` wants there is said (helper-85).
    assert!(
        said.contains("(outside a git work tree, `codex exec` also wants --skip-git-repo-check)"),
        "{said}"
    );
    let folders = read_json(&home.path().join(".gemini/trustedFolders.json"));
    assert_eq!(folders[desk.display().to_string()], "TRUST_FOLDER");
    let codex = std::fs::read_to_string(home.path().join(".codex/config.toml")).unwrap();
    assert!(codex.starts_with("model = \"o9\""), "{codex}");
    assert!(
        codex.contains(&format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"",
            desk.display()
        )),
        "{codex}"
    );
    // Where Gemini CLI is told to keep its trusted folders, it is written there (helper-84).
    let elsewhere = home.path().join("gemini-elsewhere/tf.json");
    inst.cmd()
        .args(["seat", "trust", "w1"])
        .env("HOME", home.path())
        .env("GEMINI_CLI_TRUSTED_FOLDERS_PATH", &elsewhere)
        .assert()
        .success()
        .stdout(predicates::str::contains(format!(
            "({})",
            elsewhere.display()
        )));
    assert_eq!(
        read_json(&elsewhere)[desk.display().to_string()],
        "TRUST_FOLDER"
    );
    let gemini_home = home.path().join("gemini-home");
    inst.cmd()
        .args(["seat", "trust", "w1"])
        .env("HOME", home.path())
        .env("GEMINI_CLI_HOME", &gemini_home)
        .assert()
        .success();
    assert_eq!(
        read_json(&gemini_home.join(".gemini/trustedFolders.json"))[desk.display().to_string()],
        "TRUST_FOLDER"
    );
    inst.cmd()
        .args(["seat", "trust", "nobody"])
        .env("HOME", home.path())
        .assert()
        .code(2);
    // A HOME that is not there makes no folders no client would read.
    let nowhere = home.path().join("nowhere");
    inst.cmd()
        .args(["seat", "trust", "w1"])
        .env("HOME", &nowhere)
        .assert()
        .code(1)
        .stderr(predicates::str::contains(format!(
            "HOME is {}, which is not a folder, so no client reads a trust written there. Nothing was written",
            nowhere.display()
        )));
    assert!(!nowhere.exists());
    // An empty HOME is said as such, not as one that is not set.
    inst.cmd()
        .args(["seat", "trust", "w1"])
        .env("HOME", "")
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "HOME is set but empty, so there is no home to write the trust into",
        ));
    inst.cmd()
        .args(["seat", "trust", "w1"])
        .env_remove("HOME")
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "HOME is not set, so there is no home to write the trust into",
        ));
}

/// A desk runs ovai by the path it was called by when that leads to it: a link on PATH pointed at a new
/// build moves every desk with it. Desks named the link's target, and kept running the old build.
#[test]
fn a_desk_runs_ovai_by_the_link_it_was_called_by() {
    let inst = Instance::new();
    let bin = tempfile::tempdir().unwrap();
    let link = bin.path().join("ovai");
    std::os::unix::fs::symlink(OVAI, &link).unwrap();
    for (seat, how) in [("w1", "by its path"), ("w2", "by its name on PATH")] {
        let mut cmd = match how {
            "by its path" => std::process::Command::new(&link),
            _ => {
                let mut c = std::process::Command::new("ovai");
                let path = std::env::var_os("PATH").unwrap_or_default();
                let mut dirs = vec![bin.path().to_path_buf()];
                dirs.extend(std::env::split_paths(&path));
                c.env("PATH", std::env::join_paths(dirs).unwrap());
                c
            }
        };
        let out = cmd
            .args(["seat", "add", seat, "--root"])
            .arg(&inst.root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{how}: {out:?}");
        let desk: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(inst.root.join("desks").join(seat).join(".mcp.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            desk["mcpServers"]["openovai"]["command"],
            json!(link.display().to_string()),
            "{how}: {desk}"
        );
    }
}

/// stderr of a seat change that left Gemini CLI at the seat's desk without its secret: an error, with
/// the command that fixes it, not a warning.
fn left_without_secret(seat: &str) -> impl predicates::Predicate<str> {
    predicate::str::contains(format!(
        "Gemini CLI at that desk does not have the seat's secret (a session it starts there cannot reach \
         ovai); fix that and run `ovai seat rotate {seat}`."
    ))
    .and(predicate::str::contains("warning").not())
}

/// A client's file a seat change cannot write (here a file where its folder goes) is said for what it
/// means: that client at the desk has no new secret, and is locked out once the old one opens nothing.
#[test]
fn a_client_file_not_written_says_the_client_is_left_without_the_secret() {
    let inst = Instance::new();
    inst.add_seat("w2");
    let gemini = inst.root.join("desks/w2/.gemini");
    assert!(gemini.is_dir(), "a desk is made for Gemini CLI too");
    std::fs::remove_dir_all(&gemini).unwrap();
    std::fs::write(&gemini, "").unwrap();
    // The seat has its new secret (Claude Code's file has it), and the command fails for what it left.
    inst.cmd()
        .args(["seat", "rotate", "w2"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "Gave the seat w2 a new secret, written into its desk's file for each client ({}); the old one \
             opens nothing",
            inst.root.join("desks/w2").display()
        )))
        .stderr(left_without_secret("w2"));
    // A seat added where a client's file cannot be written is added, and the command fails saying so.
    let desk = inst.root.join("desks/w3");
    std::fs::create_dir_all(&desk).unwrap();
    std::fs::write(desk.join(".gemini"), "").unwrap();
    inst.cmd()
        .args(["seat", "add", "w3"])
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("Added the seat w3")
                // Gemini CLI does not act as w3 there: the line leaves it out (helper-103).
                .and(predicate::str::contains(
                    ": Claude Code, Codex or opencode started there acts as w3.",
                )),
        )
        .stderr(left_without_secret("w3"));
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("w3"));
}

/// The trust `seat trust` wrote into the home goes with the seat (`seat remove`) and follows a moved
/// instance's desks (`seat rebuild`): it named paths where no desk of a seat is any more (helper-81).
#[test]
fn trust_in_the_home_goes_with_a_removed_seat_and_follows_a_moved_desk() {
    let inst = Instance::new();
    inst.add_seat("w1");
    inst.add_seat("w2");
    let home = tempfile::tempdir_in("/tmp").unwrap();
    // A seat command with this home, which must succeed: its output.
    let run = |args: &[&str]| {
        let out = inst
            .cmd()
            .args(args)
            .env("HOME", home.path())
            .env_remove("CODEX_HOME")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        out
    };
    run(&["seat", "trust", "w1"]);
    run(&["seat", "trust", "w2"]);
    let folders = || read_json(&home.path().join(".gemini/trustedFolders.json"));
    let codex = || std::fs::read_to_string(home.path().join(".codex/config.toml")).unwrap();
    let (w1, w2) = (inst.root.join("desks/w1"), inst.root.join("desks/w2"));
    // A comment of the person's above the project's table stays when the table goes (helper-84).
    let table = format!("[projects.\"{}\"]", w2.display());
    let noted = codex().replace(&table, &format!("# my note on w2\n{table}"));
    std::fs::write(home.path().join(".codex/config.toml"), noted).unwrap();
    let out = run(&["seat", "remove", "w2"]);
    let said = String::from_utf8_lossy(&out.stdout);
    // The desk stays, but not as it was: what the clients' files held of ovai went with the secret.
    assert!(
        said.contains(&format!(
            "Removed the seat w2; its desk {} stays, without ovai's entries in its clients' files (they \
             held the seat's secret).",
            w2.display()
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "The trust entries for {} were taken out of ",
            w2.display()
        )),
        "{said}"
    );
    assert!(
        folders().get(w2.display().to_string()).is_none(),
        "{}",
        folders()
    );
    assert_eq!(folders()[w1.display().to_string()], "TRUST_FOLDER");
    assert!(!codex().contains(&w2.display().to_string()), "{}", codex());
    assert!(codex().contains("# my note on w2"), "{}", codex());
    assert!(codex().contains(&w1.display().to_string()), "{}", codex());

    // The instance moved (its binary with it): w1's desk names the old place, trusted there.
    let old = "/old/place/desks/w1";
    let path = w1.join(".mcp.json");
    let mut doc: serde_json::Value = read_json(&path);
    doc["mcpServers"]["openovai"]["env"]["OVAI_ROOT"] = serde_json::json!("/old/place");
    doc["mcpServers"]["openovai"]["command"] = serde_json::json!("/old/place/bin/ovai");
    std::fs::write(&path, doc.to_string()).unwrap();
    let gemini = home.path().join(".gemini/trustedFolders.json");
    std::fs::write(&gemini, format!("{{\"{old}\": \"TRUST_FOLDER\"}}")).unwrap();
    std::fs::write(
        home.path().join(".codex/config.toml"),
        format!("model = \"o9\"\n\n[projects.\"{old}\"]\ntrust_level = \"trusted\"\n"),
    )
    .unwrap();
    let out = run(&["seat", "rebuild"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "Gemini CLI and Codex trusted desks/w1 where it was ({old}): they trust {} now",
            w1.display()
        )),
        "{said}"
    );
    assert!(!said.contains("these desks moved"), "{said}");
    assert_eq!(folders()[w1.display().to_string()], "TRUST_FOLDER");
    assert!(folders().get(old).is_none(), "{}", folders());
    let codex = codex();
    assert!(codex.starts_with("model = \"o9\""), "{codex}");
    assert!(!codex.contains(old), "{codex}");
    assert!(
        codex.contains(&format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"",
            w1.display()
        )),
        "{codex}"
    ); // A copy of an instance, not a move: the desk it names is still there, and keeps its trust.
    let original = tempfile::tempdir_in("/tmp").unwrap();
    let there = original.path().join("desks/w1");
    std::fs::create_dir_all(&there).unwrap();
    std::fs::write(there.join(".mcp.json"), "{}").unwrap();
    let mut doc: serde_json::Value = read_json(&path);
    doc["mcpServers"]["openovai"]["env"]["OVAI_ROOT"] =
        serde_json::json!(original.path().display().to_string());
    std::fs::write(&path, doc.to_string()).unwrap();
    std::fs::write(
        &gemini,
        format!("{{\"{}\": \"TRUST_FOLDER\"}}", there.display()),
    )
    .unwrap();
    let out = run(&["seat", "rebuild"]);
    assert_eq!(folders()[there.display().to_string()], "TRUST_FOLDER");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("trusted desks/w1 where it was"));
    // Moved where somebody decided not to trust it: the old entry stays, and nothing says it moved.
    let mut doc: serde_json::Value = read_json(&path);
    doc["mcpServers"]["openovai"]["env"]["OVAI_ROOT"] = serde_json::json!("/old/other");
    std::fs::write(&path, doc.to_string()).unwrap();
    std::fs::write(
        &gemini,
        format!(
            "{{\"/old/other/desks/w1\": \"TRUST_FOLDER\", \"{}\": \"DO_NOT_TRUST\"}}",
            w1.display()
        ),
    )
    .unwrap();
    let out = run(&["seat", "rebuild"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("where it was"),
        "{out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DO_NOT_TRUST"),
        "{out:?}"
    );
    assert_eq!(folders()["/old/other/desks/w1"], "TRUST_FOLDER");
}
