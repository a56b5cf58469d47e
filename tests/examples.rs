//! The example plugins that ship in plugins/, served by a real daemon: last-build against a real HTTP
//! server on loopback, whoami, and freeze (the Leader's alone).

mod common;
use common::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

fn with_examples() -> Instance {
    let inst = Instance::new();
    for f in ["last-build.mjs", "freeze.mjs", "whoami.mjs"] {
        let src = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("plugins")
                .join(f),
        )
        .unwrap();
        inst.write_plugin(f, &src);
    }
    inst.add_seat("w1");
    inst
}

/// A CI on loopback that answers each request with the next (status, body), and records the paths asked.
fn fake_ci(answers: Vec<(u16, &'static str)>) -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (status, body) in answers {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header == "\r\n" || header.is_empty() {
                    break;
                }
            }
            let _ = tx.send(
                request_line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("")
                    .to_string(),
            );
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(reply.as_bytes()).unwrap();
        }
    });
    (url, rx)
}

#[test]
fn last_build_answers_from_ci_and_refuses_in_words() {
    let inst = with_examples();
    let (url, asked) = fake_ci(vec![
        (
            200,
            r#"[{"state":"passed","number":41,"url":"https://ci/41"}]"#,
        ),
        (200, "[]"),
        (503, "down"),
    ]);
    inst.set_config(json!({ "ci": { "url": url } }));
    let _d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    assert_eq!(
        s.call("last-build", json!({ "branch": "feature/login" })),
        (
            "feature/login: passed, build #41, log at https://ci/41 (asked by w1)".to_string(),
            false
        )
    );
    assert_eq!(
        asked.recv().unwrap(),
        "/api/builds?branch=feature%2Flogin&limit=1"
    );
    assert_eq!(
        s.call("last-build", json!({ "branch": "main" })),
        ("no build of main on CI yet".to_string(), false)
    );
    assert_eq!(
        s.call("last-build", json!({ "branch": "main" })),
        ("CI answered 503 for main".to_string(), true)
    );
    // Refused before anything leaves the machine.
    assert_eq!(
        s.call("last-build", json!({ "branch": "-rf; x" })),
        (
            "-rf; x is not a branch name this tool asks CI about".to_string(),
            true
        )
    );
    let (text, refused) = s.call("last-build", json!({}));
    assert!(
        refused && text.contains("\"branch\" is a required property"),
        "{text}"
    );
}

#[test]
fn last_build_refuses_without_a_ci_or_when_it_cannot_be_reached() {
    let inst = with_examples();
    let d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    let (text, refused) = s.call("last-build", json!({ "branch": "main" }));
    assert!(refused);
    assert_eq!(
        text,
        r#"no CI is set for this instance: add "ci": {"url": "https://ci.example.com"} to openovai.json and run ovai restart"#
    );
    drop(s);
    drop(d);
    // A port nobody listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    inst.set_config(json!({ "ci": { "url": format!("http://127.0.0.1:{port}") } }));
    let _d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    assert_eq!(
        s.call("last-build", json!({ "branch": "main" })),
        (
            format!("CI at http://127.0.0.1:{port} could not be reached: ECONNREFUSED"),
            true
        )
    );
}

#[test]
fn whoami_shows_the_seat_and_role() {
    let inst = with_examples();
    let _d = inst.start();
    let root = inst.root.display().to_string();
    for (seat, role) in [("lead", "Leader"), ("w1", "Worker")] {
        let mut s = inst.session(seat);
        s.initialize();
        assert_eq!(
            s.call("whoami", json!({})),
            (
                format!(
                    "You are {seat}, a {role}, in the instance at {root}. The User is ann and the Leader is lead."
                ),
                false
            )
        );
    }
}

#[test]
fn freeze_is_the_leaders_alone() {
    let inst = with_examples();
    let _d = inst.start();
    let mut w1 = inst.session("w1");
    let mut lead = inst.session("lead");
    w1.initialize();
    lead.initialize();
    assert_eq!(
        w1.call("freeze", json!({ "reason": "mine" })),
        (
            "only the Leader (lead) declares or lifts a freeze; you are w1, a Worker".to_string(),
            true
        )
    );
    assert!(!inst.root.join("plugins/freeze/FREEZE").exists());
    assert_eq!(
        lead.call("freeze", json!({ "reason": "cutting 1.0" })),
        ("the code is frozen: cutting 1.0".to_string(), false)
    );
    let frozen = std::fs::read_to_string(inst.root.join("plugins/freeze/FREEZE")).unwrap();
    assert!(
        frozen.starts_with("cutting 1.0 (declared by lead, "),
        "{frozen}"
    );
    // Anybody reads the current freeze by calling it without arguments.
    assert!(
        w1.call("freeze", json!({}))
            .0
            .starts_with("the code is frozen: cutting 1.0 (declared by lead, ")
    );
    assert!(w1.call("freeze", json!({ "lift": true })).1);
    assert_eq!(
        lead.call("freeze", json!({ "lift": true })),
        ("the freeze is lifted".to_string(), false)
    );
    assert!(!inst.root.join("plugins/freeze/FREEZE").exists());
    assert_eq!(
        w1.call("freeze", json!({})),
        ("the code is not frozen".to_string(), false)
    );
}

#[test]
fn the_demo_runs_the_whole_path_and_cleans_up() {
    let out = ovai()
        .arg("demo")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    for want in [
        "runtime.log: plugins This instance serves a tool of its own: last-build",
        "runtime.log: plugins This instance serves a tool of its own: whoami",
        "== tools/list",
        "  whoami: Who is calling",
        "text: You are w1, a Worker, in the instance at ",
        "refused: only the Leader (lead) declares or lifts a freeze; you are w1, a Worker",
        "] w1: hello from w1, through the bridge",
        "the daemon was stopped and",
    ] {
        assert!(out.contains(want), "the demo prints {want:?}:\n{out}");
    }
    let dir = out
        .lines()
        .find_map(|l| l.strip_prefix("== A temporary instance at "))
        .unwrap();
    let dir = dir.split(',').next().unwrap();
    assert!(!std::path::Path::new(dir).exists(), "{dir} was removed");
}
