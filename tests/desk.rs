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
