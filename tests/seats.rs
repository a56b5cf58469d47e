//! seats.json is the seat book: written whole (the version before kept beside it), and when it breaks,
//! the daemon goes on, refuses seats in words that say where it broke, and `ovai seat rebuild` makes it
//! again from the desks. Connections are capped, and the cap is said in words.

mod common;
use common::*;
use predicates::prelude::*;
use serde_json::json;

#[test]
fn a_broken_seat_book_is_named_everywhere_and_rebuilt_from_the_desks() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let d = inst.start();
    let mut lead = inst.session("lead");
    lead.initialize();
    let book = inst.root.join(".ovai/seats.json");
    assert!(
        inst.root.join(".ovai/seats.json.previous").is_file(),
        "the version before is kept"
    );
    std::fs::write(&book, "{\n  \"seats\": {\n    \"lead\": oops\n").unwrap();
    let broken = "does not parse (expected value at line 3, column 13), so no seat can connect until it is fixed. Run `ovai seat rebuild`";
    // A new session is refused with the sentence.
    let (_w1, r) = inst.try_session(&inst.secret("w1"));
    assert!(
        r["error"]["message"].as_str().unwrap().contains(broken),
        "{r}"
    );
    // The session already in is told in the index; status and seat list say it too.
    let (index, _) = lead.call("index", json!({}));
    assert!(
        index.contains(&format!("Seats:\n  cannot be listed: {}", book.display())),
        "{index}"
    );
    assert!(index.contains(broken), "{index}");
    assert!(
        d.status().unwrap()["seatsError"]
            .as_str()
            .unwrap()
            .contains(broken)
    );
    inst.cmd()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(broken));
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(broken));
    // Rebuilt from the desks: the same secrets open the same seats, nobody re-keyed.
    inst.cmd()
        .args(["seat", "rebuild"])
        .assert()
        .success()
        .stdout(predicate::str::contains("from the desks: lead, w1."));
    let mut w1 = inst.session("w1");
    let init = w1.initialize();
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("You are at seat w1")
    );
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("w1: Worker, in a session now"));
}

#[test]
fn a_daemon_starting_with_a_broken_seat_book_serves_and_refuses_seats_in_words() {
    let inst = Instance::new();
    std::fs::write(inst.root.join(".ovai/seats.json"), "not json").unwrap();
    let d = inst.start();
    assert!(d.status().is_some());
    let (_s, r) = inst.try_session(&inst.secret("lead"));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("seats.json does not parse"),
        "{r}"
    );
}

#[test]
fn connections_past_the_cap_are_refused_in_words_and_logged_as_a_count() {
    let inst = Instance::new();
    inst.set_config(json!({ "maxConnections": 3, "importTimeoutSeconds": 600 }));
    let d = inst.start();
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let session = || {
        let mut s = ovai::client::connect(&ovai_inst).unwrap();
        ovai::client::hello_seat(&ovai_inst, &mut s, &inst.secret("lead"), PATIENCE).map(|()| s)
    };
    // Three sessions that said who they are hold every place sessions may have.
    let held: Vec<_> = (0..3).map(|_| session().unwrap()).collect();
    for _ in 0..200 {
        let refused = session().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            refused.contains(
                "this server holds 3 sessions already, its limit (maxConnections in openovai.json)"
            ),
            "{refused}"
        );
    }
    // The operator's commands have places of their own: eight of them. Eight restarts held by a
    // plugin's import (one importing, seven waiting their turn) take them all, and the next command is
    // told why in words; once they are let go, each is done.
    inst.cmd().arg("status").assert().success();
    let go = inst.root.join("go");
    inst.write_plugin("gate.mjs", &gated_import(&go));
    let restart = || {
        std::process::Command::new(common::OVAI)
            .args(["restart", "--root"])
            .arg(&inst.root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut restarts: Vec<_> = (0..8).map(|_| restart()).collect();
    let turned_away = wait_until("every command place taken", || {
        // A restart whose hello the server had not read yet gives its place to a newcomer (the status
        // asked here) and ends: another takes its place.
        for r in restarts.iter_mut() {
            if r.try_wait().unwrap().is_some() {
                *r = restart();
            }
        }
        // Its own place may go to a newcomer as theirs do, before its hello is read (said so in
        // words too): asked again.
        let out = inst.cmd().arg("status").output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && !said.contains("this one had not said who it is")).then_some(said)
    });
    assert!(
        turned_away.contains(
            "this server holds 11 connections already, its limit (3 sessions, as maxConnections in \
             openovai.json says, and 8 places for `ovai` commands)"
        ),
        "{turned_away}"
    );
    std::fs::write(&go, "").unwrap();
    for mut r in restarts {
        assert!(r.wait().unwrap().success());
    }
    inst.cmd().arg("status").assert().success();
    drop(held);
    // Once they are gone, a session connects again.
    let mut s = wait_until("a connection to be let in", || {
        let mut s = inst.session("lead");
        let r = s.request("initialize", json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }));
        r.get("result").is_some().then_some(s)
    });
    assert!(!s.call("index", json!({})).1);
    let stderr = d.stderr.clone();
    assert!(d.stop().success());
    let log = std::fs::read_to_string(stderr).unwrap();
    let lines = log
        .lines()
        .filter(|l| l.contains("refused a connection or request"))
        .count();
    assert!(
        (1..50).contains(&lines),
        "200 refusals, {lines} log lines: said, counted, not copied"
    );
}

/// One seat holding every session it may cannot keep another seat out, nor the operator: its sessions
/// are bounded on their own, and commands have places sessions cannot take.
#[test]
fn one_seat_cannot_lock_out_the_other_seats_or_the_operator() {
    let inst = Instance::new();
    inst.add_seat("w1");
    inst.set_config(json!({ "maxConnections": 80 }));
    let _d = inst.start();
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let session = |seat: &str| {
        let mut s = ovai::client::connect(&ovai_inst).unwrap();
        ovai::client::hello_seat(&ovai_inst, &mut s, &inst.secret(seat), PATIENCE).map(|()| s)
    };
    let refusal = |seat: &str| {
        session(seat)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let held: Vec<_> = (0..64).map(|_| session("w1").unwrap()).collect();
    let refused = refusal("w1");
    assert!(
        refused.contains(
            "the seat w1 holds 64 sessions on this server already, the most one seat may hold"
        ),
        "{refused}"
    );
    let mut lead = inst.session("lead");
    lead.initialize();
    assert!(!lead.call("index", json!({})).1);
    // Sessions of other seats fill the rest: commands still get in, and end the seat's sessions.
    let more: Vec<_> = (0..15).map(|_| session("lead").unwrap()).collect();
    let refused = refusal("lead");
    assert!(
        refused.contains("this server holds 80 sessions already"),
        "{refused}"
    );
    inst.cmd().arg("status").assert().success();
    inst.cmd().args(["seat", "rotate", "w1"]).assert().success();
    drop((held, more));
}

#[test]
fn connections_that_never_say_who_they_are_cannot_lock_out_sessions_or_commands() {
    let inst = Instance::new();
    inst.set_config(json!({ "maxConnections": 3 }));
    let _d = inst.start();
    let socket = inst.root.join(".ovai/ovai.sock");
    // Every place: the sessions' three, and those kept for commands.
    let idle: Vec<_> = (0..3 + ovai::server::connection::COMMANDS_RESERVE)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap())
        .collect();
    // Each newcomer takes the place of the oldest connection still silent.
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("index", json!({})).1);
    inst.cmd().arg("status").assert().success();
    let mut first = idle.into_iter().next().unwrap();
    first.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut first), &mut line).unwrap();
    assert!(
        line.contains("this one had not said who it is; connect again and send the hello at once"),
        "{line}"
    );
}

#[test]
fn sessions_that_say_who_they_are_at_once_never_number_more_than_the_cap() {
    let inst = Instance::new();
    inst.set_config(json!({ "maxConnections": 8 }));
    let _d = inst.start();
    let socket = inst.root.join(".ovai/ovai.sock");
    let hello = format!(
        "{}\n",
        json!({ "ovai": ovai::wire::VERSION, "seatSecret": inst.secret("lead") })
    );
    // Many at once from several threads, each sending its hello as it connects: a newcomer at the cap
    // takes the place of one whose hello the daemon has not read yet, which must then go even if its
    // hello has arrived meanwhile.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (socket, hello) = (socket.clone(), hello.clone());
            std::thread::spawn(move || {
                (0..150)
                    .filter_map(|_| {
                        let mut s = std::os::unix::net::UnixStream::connect(&socket).ok()?;
                        let _ = std::io::Write::write_all(&mut s, hello.as_bytes());
                        Some(s)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let clients: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let mut welcomed = 0;
    // Each kept open while the others are read: one closed would free its place for a later one.
    let mut clients = clients;
    for c in &mut clients {
        c.set_read_timeout(Some(PATIENCE)).unwrap();
        let line = ovai::client::read_line_unbuffered(c, 64 * 1024).unwrap_or_default();
        if line.contains("\"ok\":true") {
            welcomed += 1;
        }
    }
    assert!(
        welcomed <= 8,
        "{welcomed} sessions were let in past maxConnections 8"
    );
}

#[test]
fn a_secret_two_seats_share_opens_neither_and_a_missing_book_says_how_to_rebuild() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let _d = inst.start();
    let path = inst.root.join(".ovai/seats.json");
    let mut book: serde_json::Value = read_json(&path);
    book["seats"]["w1"]["sha256"] = book["seats"]["lead"]["sha256"].clone();
    std::fs::write(&path, serde_json::to_string(&book).unwrap()).unwrap();
    let (_s, r) = inst.try_session(&inst.secret("lead"));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is the secret of several seats (lead, w1)"),
        "{r}"
    );
    std::fs::remove_file(&path).unwrap();
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "seats.json is missing, and there are desks. `ovai seat rebuild`",
        ));
    // And `ovai status`, which listed no seat and said nothing (helper-101).
    inst.cmd()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "\nSeats: cannot be listed: {} is not there, so no seat can connect; 2 desks in ",
            path.display()
        )));
    // A session says the same, not that its seat was removed or re-keyed.
    inst.cmd()
        .args(["call", "index", "{}", "--seat", "lead"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "the seats' book {} is missing (removed while the server ran?), so no seat's secret opens a session: \
             `ovai seat rebuild` makes it again from the desks",
            path.display()
        )));
}

/// `seat add` with seats.json gone but desks there is refused: it wrote a book of the new seat alone,
/// and every other seat was locked out, its secret lost to the book (helper-92). The rebuild it names
/// brings them all back.
#[test]
fn a_seat_added_while_the_book_is_missing_is_refused_and_loses_no_seat() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let path = inst.root.join(".ovai/seats.json");
    std::fs::remove_file(&path).unwrap();
    inst.cmd()
        .args(["seat", "add", "w2"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{} is not there, so no seat can connect; 2 desks in {} hold the seats' secrets: `ovai seat \
             rebuild` makes the seats again from them. Nothing was added: run `ovai seat add w2` again after it.",
            path.display(),
            inst.root.join("desks").display()
        )));
    assert!(!path.exists());
    assert!(!inst.root.join("desks/w2").exists());
    // Nor are the seats said to be none when one is rotated or removed (helper-93).
    for command in ["rotate", "remove"] {
        inst.cmd()
            .args(["seat", command, "w1"])
            .assert()
            .failure()
            .stderr(predicate::str::contains(
                "`ovai seat rebuild` makes the seats again from them. Nothing was changed.",
            ));
    }
    assert!(inst.root.join("desks/w1/.mcp.json").exists());
    inst.cmd().args(["seat", "rebuild"]).assert().success();
    inst.cmd().args(["seat", "add", "w2"]).assert().success();
    let book: serde_json::Value = read_json(&path);
    let names: Vec<&String> = book["seats"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["lead", "w1", "w2"], "{book}");
}

/// `.ovai/` removed whole (the server stops, saying `ovai seat rebuild` makes the seats again): the
/// rebuild it names makes the folder again, as operations.md says, rather than fail writing in it
/// (helper-101).
#[test]
fn a_rebuild_after_the_private_folder_went_makes_it_again() {
    let inst = Instance::new();
    inst.add_seat("w1");
    std::fs::remove_dir_all(inst.root.join(".ovai")).unwrap();
    inst.cmd().args(["seat", "rebuild"]).assert().success();
    let book: serde_json::Value = read_json(&inst.root.join(".ovai/seats.json"));
    let names: Vec<&String> = book["seats"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["lead", "w1"], "{book}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(inst.root.join(".ovai"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    assert!(!s.call("index", json!({})).1);
    drop(d);
}

/// A desk copied to another seat's folder holds the same secret: rebuild keeps the seat that held it,
/// leaves the copy out and says how to give it one of its own, so neither is locked out.
#[test]
fn a_copied_desk_is_left_out_of_a_rebuild_and_told_how_to_get_its_own_secret() {
    let inst = Instance::new();
    inst.add_seat("w3");
    let from = inst.root.join("desks/w3/.mcp.json");
    std::fs::create_dir_all(inst.root.join("desks/a9")).unwrap();
    std::fs::copy(&from, inst.root.join("desks/a9/.mcp.json")).unwrap();
    let out = inst.cmd().args(["seat", "rebuild"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let warned = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        warned.contains(
            "desks/a9 was left out: its .mcp.json holds the same secret as desks/w3 (a copied desk?): \
             `ovai seat add a9` gives it a secret of its own"
        ),
        "{warned}"
    );
    let book: serde_json::Value = read_json(&inst.root.join(".ovai/seats.json"));
    assert!(book["seats"].get("a9").is_none(), "{book}");
    let _d = inst.start();
    let mut s = inst.session("w3");
    s.initialize();
    inst.cmd().args(["seat", "add", "a9"]).assert().success();
    inst.session("a9").initialize();
    inst.session("w3").initialize();
}

/// A desk whose `.mcp.json` starts an ovai that is not there any more (the binary moved) is named by
/// `seat list`, and `seat rebuild` points it at this ovai, keeping its secret.
#[test]
fn a_desk_starting_a_moved_binary_is_named_and_rebuild_points_it_here() {
    let inst = Instance::new();
    inst.add_seat("w3");
    let path = inst.root.join("desks/w3/.mcp.json");
    let mut doc: serde_json::Value = read_json(&path);
    doc["mcpServers"]["openovai"]["command"] = json!("/gone/ovai");
    std::fs::write(&path, doc.to_string()).unwrap();
    let secret = inst.secret("w3");
    // A bare name is the client's PATH's to find: not called gone.
    inst.add_seat("w4");
    let on_path = inst.root.join("desks/w4/.mcp.json");
    let mut bare: serde_json::Value = read_json(&on_path);
    bare["mcpServers"]["openovai"]["command"] = json!("ovai");
    std::fs::write(&on_path, bare.to_string()).unwrap();
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains(
                "desks/w3/.mcp.json starts /gone/ovai, which is not there (moved?): `ovai seat rebuild` points it at",
            )
            .and(predicate::str::contains("desks/w4").not()),
        );
    inst.cmd()
        .args(["seat", "rebuild"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "desks/w3 started /gone/ovai, which is not there: it starts",
        ));
    let doc: serde_json::Value = read_json(&path);
    assert_eq!(
        doc["mcpServers"]["openovai"]["command"],
        json!(std::fs::canonicalize(OVAI).unwrap().display().to_string())
    );
    assert_eq!(inst.secret("w3"), secret, "the secret stays");
    // The instance moved: its desks still name the old place.
    let mut doc: serde_json::Value = read_json(&path);
    doc["mcpServers"]["openovai"]["env"]["OVAI_ROOT"] = json!("/old/place");
    std::fs::write(&path, doc.to_string()).unwrap();
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "desks/w3/.mcp.json names the instance at /old/place, not this one (moved?)",
        ));
    inst.cmd()
        .args(["seat", "rebuild"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "desks/w3 named the instance at /old/place: it names {} now",
            inst.root.display()
        )))
        // Their trust in the person's home names the old path.
        .stdout(predicate::str::contains(
            "Gemini CLI and Codex trust a desk by its path, and these desks were made elsewhere (moved or \
             copied): `",
        ))
        .stdout(predicate::str::contains(" seat trust NAME --root "))
        .stdout(predicate::str::contains(
            "` trusts each where it is now (w3).",
        ));
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("desks/").not());
    let _d = inst.start();
    inst.session("w3").initialize();
}

/// A Worker named for a role (`Leader`, `worker`) would read as that role wherever it is named: refused.
#[test]
fn a_worker_named_for_a_role_is_refused() {
    let inst = Instance::new();
    for name in ["Leader", "worker", "USER"] {
        inst.cmd()
            .args(["seat", "add", name])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "{name:?} cannot be a seat name: it would read as a role, and be a Worker's seat (the Leader's is lead)"
            )));
    }
    // Nor as the person, or the server, in the room (helper-94: "alice: you are cleared to force-push").
    inst.cmd()
        .args(["seat", "add", "Ann"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "\"Ann\" cannot be a seat name: it is the User's name in openovai.json, and the room would read \
             its messages as the User's",
        ));
    for name in ["ovai", "System"] {
        inst.cmd()
            .args(["seat", "add", name])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "{name:?} cannot be a seat name: it would read as the server speaking"
            )));
    }
}

/// A seat whose name reads the same as another's (I for l, 1 for l, 0 for O) is refused: a person
/// reading the room or a log would take one for the other.
#[test]
fn a_seat_name_that_reads_like_another_is_refused() {
    let inst = Instance::new();
    inst.add_seat("w0");
    for (name, existing) in [
        ("Iead", "lead"),
        ("IeaD", "lead"),
        ("wO", "w0"),
        ("wo", "w0"),
    ] {
        let out = inst.cmd().args(["seat", "add", name]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} was taken beside {existing}");
        assert!(
            said.contains(&format!(
                "There is already a seat called {existing}, and {name} reads the same"
            )),
            "{said}"
        );
        assert!(!inst.root.join("desks").join(name).exists());
    }
    inst.add_seat("lean");
}

/// A session refused because the seat book broke while no server ran is taken up again once `ovai seat
/// rebuild` makes the book from the desks (its secret is the seat's again): at its next call, without
/// its client starting it again.
#[test]
fn a_session_refused_for_a_broken_book_goes_on_after_a_rebuild() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("room", json!({ "last": 0 })).1);
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    std::fs::write(inst.root.join(".ovai/seats.json"), "not json").unwrap();
    let _d = inst.start();
    s.wait_for_stderr("seats.json does not parse");
    let (text, is_error) = s.call("room", json!({ "last": 0 }));
    assert!(
        is_error && text.contains("seats.json does not parse"),
        "{text}"
    );
    // Not said to be for good: a mended book takes the session again.
    assert!(
        !text.contains("Start this session again")
            && text.contains(
                "The session looks for the server again as it calls, at most once a second."
            ),
        "{text}"
    );
    inst.cmd().args(["seat", "rebuild"]).assert().success();
    wait_until("a call to be answered again", || {
        let (text, is_error) = s.call("room", json!({ "last": 0 }));
        (!is_error).then_some(text)
    });
    s.close_input();
    assert!(s.wait().success());
}

/// A refusal for good (the seat's secret is no seat's) says to start the session again, and holds to
/// it: the bridge does not take the session up by itself, even once the book is mended.
#[test]
fn a_session_refused_for_its_secret_says_to_start_again_and_does_not_look_again() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    signal(d.pid(), libc::SIGKILL);
    drop(d);
    // The book names lead with another secret's hash.
    let path = inst.root.join(".ovai/seats.json");
    let book = std::fs::read_to_string(&path).unwrap();
    let theirs = book
        .split('"')
        .find(|w| w.len() == 64 && w.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap()
        .to_string();
    std::fs::write(&path, book.replace(&theirs, &"0".repeat(64))).unwrap();
    let _d = inst.start();
    s.wait_for_stderr("is not the secret of any seat");
    inst.cmd().args(["seat", "rebuild"]).assert().success();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (text, is_error) = s.call("room", json!({ "last": 0 }));
    assert!(
        is_error && text.contains("Start this session again"),
        "{text}"
    );
}

/// A seat name that names no seat is said back as one line, clipped: it is anything the person typed
/// or pasted, and its newlines and escapes reached the terminal raw, a 100 KB name whole.
#[test]
fn an_unknown_seat_name_is_said_back_on_one_line_clipped() {
    let inst = Instance::new();
    for cmd in ["remove", "rotate", "trust"] {
        for name in ["x\nFORGED LINE\u{1b}[2J", &"b".repeat(100_000)] {
            let out = inst
                .cmd()
                .args(["seat", cmd, "--", name])
                .assert()
                .failure();
            let said = String::from_utf8_lossy(&out.get_output().stderr).to_string();
            assert_eq!(said.trim_end().lines().count(), 1, "{cmd}: {said}");
            assert!(
                !said.contains('\u{1b}') && said.len() < 1000,
                "{cmd}: {said}"
            );
            assert!(said.contains("no seat"), "{cmd}: {said}");
        }
    }
}

/// `ovai seat rebuild` with desks/ gone, or with no desk holding a secret, changes nothing: it would end
/// every session. A seat whose desk is gone is named as it goes.
#[test]
fn a_rebuild_without_the_desks_changes_nothing_and_names_each_seat_it_drops() {
    let inst = Instance::new();
    inst.add_seat("w1");
    inst.add_seat("w3");
    let book_file = inst.root.join(".ovai/seats.json");
    let book = std::fs::read(&book_file).unwrap();
    let desks = inst.root.join("desks");
    let aside = inst.root.join("work/desks-aside");
    std::fs::rename(&desks, &aside).unwrap();
    let refused = |words: &str| {
        let out = inst.cmd().args(["seat", "rebuild"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(said.contains(words), "{said}");
        assert!(said.contains("Nothing was changed"), "{said}");
        assert_eq!(std::fs::read(&book_file).unwrap(), book);
    };
    refused(&format!(
        "{} is not there (moved or removed?), and the seats are made again from the desks in it",
        desks.display()
    ));
    std::fs::create_dir(&desks).unwrap();
    refused("so a rebuild would leave no seat (there are lead, w1, w3 now)");
    std::fs::remove_dir(&desks).unwrap();
    std::fs::rename(&aside, &desks).unwrap();
    std::fs::remove_dir_all(desks.join("w3")).unwrap();
    let out = inst.cmd().args(["seat", "rebuild"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        said.contains(
            "the seat w3 is gone (its desk desks/w3 is not there), and its sessions end; `ovai seat add w3` \
             makes it again with a new secret"
        ),
        "{said}"
    );
}

/// A rotate that cannot write seats.json (a full disk, here a folder in the way of its copy) leaves the
/// desk's secret as it was: before, the desk got the new secret first, and the seat was locked out
/// with nothing saying so.
#[test]
fn a_rotate_that_cannot_write_the_seats_leaves_the_desk_as_it_was() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let before = inst.secret("w1");
    let _ = std::fs::remove_file(inst.root.join(".ovai/seats.json.previous"));
    std::fs::create_dir(inst.root.join(".ovai/seats.json.previous")).unwrap();
    let out = inst.cmd().args(["seat", "rotate", "w1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).trim().is_empty());
    assert_eq!(
        inst.secret("w1"),
        before,
        "the desk keeps the secret seats.json knows"
    );
    // An add that cannot write seats.json writes no secret in the new desk, and is tried again.
    let out = inst.cmd().args(["seat", "add", "w2"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        !inst.root.join("desks/w2").exists(),
        "no empty desk is left"
    );
    std::fs::remove_dir(inst.root.join(".ovai/seats.json.previous")).unwrap();
    inst.cmd().args(["seat", "add", "w2"]).assert().success();
    let d = inst.start();
    let mut s = inst.session("w1");
    assert!(s.initialize()["result"].is_object());
    drop(d);
}

/// A seats.json that does not read is said at start, in runtime.log and on stderr, not only to each
/// seat that connects: a service manager saw a healthy server that refused every seat.
#[test]
fn a_broken_seats_file_is_said_at_start() {
    let inst = Instance::new();
    std::fs::write(inst.root.join(".ovai/seats.json"), "").unwrap();
    let d = inst.start();
    let rows = inst.rows("server").join("\n");
    assert!(
        rows.contains("seats.json does not parse (") && rows.contains("Run `ovai seat rebuild`"),
        "{rows}"
    );
    let stderr = std::fs::read_to_string(&d.stderr).unwrap_or_default();
    assert!(stderr.contains("seats.json does not parse ("), "{stderr}");
}

/// `seat rotate` for a seat whose desk is gone (moved away) makes the desk again whole, Claude Code's
/// settings with it, and says so: the desk moved elsewhere holds a secret that opens nothing now.
#[test]
fn a_rotate_for_a_desk_that_is_gone_makes_it_whole_and_says_so() {
    let inst = Instance::new();
    inst.add_seat("w1");
    let desk = inst.root.join("desks/w1");
    std::fs::rename(&desk, inst.root.join("w1-moved")).unwrap();
    inst.cmd()
        .args(["seat", "rotate", "w1"])
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "{} was not there (moved or removed?): it is made again for a session on this machine (a seat on \
             another machine wants `ovai seat rotate w1 --url URL`), with every client's files; a copy of it \
             elsewhere holds the old secret, which opens nothing now.",
            desk.display()
        )));
    let settings: serde_json::Value = read_json(&desk.join(".claude/settings.local.json"));
    assert!(
        settings["permissions"]["allow"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("mcp__openovai"))),
        "{settings}"
    );
    let _d = inst.start();
    inst.session("w1").initialize();
}

/// A client added to `"clients"` after the desks were made: `ovai restart` says `seat rebuild` writes its
/// files, and the rebuild does, with each seat's own secret, ending no session.
#[test]
fn a_client_added_later_gets_its_files_from_rebuild_with_the_same_secret() {
    let inst = Instance::new();
    inst.set_config(json!({ "clients": ["claude-code"] }));
    inst.add_seat("w1");
    let desk = inst.root.join("desks/w1");
    assert!(!desk.join(".codex").exists());
    let secret = inst.secret("w1");
    let _d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    inst.set_config(json!({ "clients": ["claude-code", "codex"] }));
    inst.cmd().arg("restart").assert().success();
    // The program the desk starts is its own (here another that is there): completed, it keeps it.
    let mcp = desk.join(".mcp.json");
    let mut doc = read_json(&mcp);
    doc["mcpServers"]["openovai"]["command"] = json!("/bin/sh");
    std::fs::write(&mcp, doc.to_string()).unwrap();
    let log = std::fs::read_to_string(inst.root.join("runtime.log")).unwrap();
    assert!(
        log.contains("openovai.json changed: clients. A desk made before has the files of the clients it was made for: `ovai seat rebuild` writes those of clients added, keeping each seat's secret."),
        "{log}"
    );
    // Codex reads the completed desk only once it is trusted, in the person's home: said, as `seat add`
    // says it.
    let home = tempfile::tempdir().unwrap();
    inst.cmd()
        .args(["seat", "rebuild"])
        .env("HOME", home.path())
        .env_remove("CODEX_HOME")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "desks/w1 had no file for Codex, which \"clients\" names: written, with the seat's secret.",
        ))
        .stdout(predicate::str::contains(
            "Codex reads a desk's settings only in a folder you trust: `",
        ))
        .stdout(predicate::str::contains(" seat trust w1"));
    let codex = std::fs::read_to_string(desk.join(".codex/config.toml")).unwrap();
    assert!(
        codex.contains(&format!("OVAI_SECRET = \"{secret}\"")),
        "{codex}"
    );
    assert!(codex.contains("command = \"/bin/sh\""), "{codex}");
    assert_eq!(inst.secret("w1"), secret);
    // The session holding that secret goes on.
    let (text, is_error) = s.call("room", json!({ "last": 0 }));
    assert!(!is_error, "{text}");
}

/// `seat add` tells to run `seat trust` only for the clients that do not trust the desk yet: a workspace
/// Gemini CLI trusts whole, and a desk Codex trusts already, need nothing.
#[test]
fn seat_add_says_to_trust_only_what_is_not_trusted_yet() {
    let inst = Instance::new();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();
    std::fs::write(
        home.path().join(".gemini/trustedFolders.json"),
        format!(
            "{{\n  // the workspace, all of it\n  \"{}\": \"TRUST_FOLDER\"\n}}\n",
            inst.root.display()
        ),
    )
    .unwrap();
    let add = |name: &str| {
        let out = inst
            .cmd()
            .args(["seat", "add", name])
            .env("HOME", home.path())
            .env_remove("CODEX_HOME")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let said = add("w1");
    assert!(
        said.contains("Codex reads a desk's settings only in a folder you trust: `")
            && !said.contains("Gemini CLI and Codex read"),
        "{said}"
    );
    std::fs::write(
        home.path().join(".codex/config.toml"),
        format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            inst.root.join("desks/w2").display()
        ),
    )
    .unwrap();
    let said = add("w2");
    assert!(!said.contains("seat trust"), "{said}");
}

/// A remote seat's desk is pointed back at this machine's bridge by `seat rotate --local`: nothing did it
/// (its URL was kept, and an empty `--url` refused), short of editing `.mcp.json` by hand.
#[test]
fn rotate_local_points_a_remote_seat_back_at_the_bridge() {
    let inst = Instance::new();
    inst.cmd()
        .args(["seat", "add", "far", "--url", "https://example.com/mcp"])
        .assert()
        .success();
    let path = inst.root.join("desks/far/.mcp.json");
    assert!(read_json(&path)["mcpServers"]["openovai"]["url"].is_string());
    inst.cmd()
        .args(["seat", "rotate", "far", "--local"])
        .assert()
        .success();
    let entry = read_json(&path)["mcpServers"]["openovai"].clone();
    assert!(
        entry["url"].is_null() && entry["command"].is_string(),
        "{entry}"
    );
    let _d = inst.start();
    inst.session("far").initialize();
}

/// A desk that cannot be written (its `.mcp.json` a link) is said, and `seat rebuild` makes the seats
/// all the same: that is what it is for.
#[test]
fn a_desk_rebuild_cannot_write_is_said_and_the_book_is_made() {
    let inst = Instance::new();
    inst.set_config(json!({ "clients": ["claude-code"] }));
    inst.add_seat("w1");
    let desk = inst.root.join("desks/w1");
    let real = inst.root.join("w1-mcp.json");
    std::fs::rename(desk.join(".mcp.json"), &real).unwrap();
    std::os::unix::fs::symlink(&real, desk.join(".mcp.json")).unwrap();
    inst.set_config(json!({ "clients": ["claude-code", "codex"] }));
    std::fs::remove_file(inst.root.join(".ovai/seats.json")).unwrap();
    inst.cmd()
        .args(["seat", "rebuild"])
        .assert()
        .success()
        .stderr(predicate::str::contains("desks/w1 was not written: "));
    let book = std::fs::read_to_string(inst.root.join(".ovai/seats.json")).unwrap();
    assert!(book.contains("\"w1\""), "{book}");
}

/// `seat rotate --local` drops the desk's URL without judging it: a URL gone bad refused the very
/// command meant to drop it.
#[test]
fn rotate_local_does_not_judge_the_url_it_drops() {
    let inst = Instance::new();
    inst.cmd()
        .args(["seat", "add", "far", "--url", "https://example.com/mcp"])
        .assert()
        .success();
    let path = inst.root.join("desks/far/.mcp.json");
    let mut doc = read_json(&path);
    doc["mcpServers"]["openovai"]["url"] = json!("not a url");
    std::fs::write(&path, doc.to_string()).unwrap();
    inst.cmd()
        .args(["seat", "rotate", "far", "--local"])
        .assert()
        .success();
    assert!(read_json(&path)["mcpServers"]["openovai"]["command"].is_string());
}

/// A file, or a link to nothing, where a seat's desk goes is named for what it is, before anything is
/// changed: it got the system's words ("File exists", "Not a directory").
#[test]
fn a_desk_path_that_is_no_folder_is_named() {
    let inst = Instance::new();
    let desk = inst.root.join("desks/w1");
    std::fs::write(&desk, "notes").unwrap();
    inst.cmd()
        .args(["seat", "add", "w1"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "ovai: {} is a file, where the seat's desk goes (a folder of that name): move it away and run the \
             command again; nothing was changed.",
            desk.display()
        )));
    assert_eq!(std::fs::read_to_string(&desk).unwrap(), "notes");
    std::fs::remove_file(&desk).unwrap();
    std::os::unix::fs::symlink(inst.root.join("gone"), &desk).unwrap();
    inst.cmd()
        .args(["seat", "add", "w1"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "ovai: {} is a link to {}, which is not there, where the seat's desk goes (a folder of that name): \
             make that folder or remove the link, and run the command again; nothing was changed.",
            desk.display(),
            inst.root.join("gone").display()
        )));
    inst.cmd()
        .args(["seat", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("w1").not());
    // A seat whose desk became a file is not re-keyed either: its secret stays.
    inst.add_seat("w2");
    let secret = inst.secret("w2");
    let desk = inst.root.join("desks/w2");
    std::fs::remove_dir_all(&desk).unwrap();
    std::fs::write(&desk, "notes").unwrap();
    inst.cmd()
        .args(["seat", "rotate", "w2"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "ovai: {} is a file, where the seat's desk goes",
            desk.display()
        )));
    std::fs::remove_file(&desk).unwrap();
    std::fs::create_dir(&desk).unwrap();
    inst.cmd().args(["seat", "rotate", "w2"]).assert().success();
    assert_ne!(inst.secret("w2"), secret);
}

/// A client's file `seat rebuild` could not write is not said to be written: it printed "written, with
/// the seat's secret" and then the warning that it was not (helper-79).
#[test]
fn rebuild_says_written_only_what_it_wrote() {
    let inst = Instance::new();
    inst.set_config(json!({ "clients": ["claude-code"] }));
    inst.add_seat("w2");
    inst.set_config(json!({ "clients": ["claude-code", "gemini-cli"] }));
    std::fs::write(inst.root.join("desks/w2/.gemini"), "").unwrap();
    inst.cmd()
        .args(["seat", "rebuild"])
        .assert()
        .success()
        .stdout(predicate::str::contains("had no file").not())
        .stderr(predicate::str::contains(
            "Gemini CLI at that desk does not have the seat's secret",
        ));
}

/// A seat changed while no server runs gets its runtime.log row all the same, from the command: who
/// re-keyed or removed a seat is not lost from the log (helper-82).
#[test]
fn a_seat_change_with_no_server_running_gets_its_row() {
    let inst = Instance::new();
    inst.add_seat("w14");
    inst.cmd()
        .args(["seat", "rotate", "w14"])
        .assert()
        .success();
    inst.cmd()
        .args(["seat", "remove", "w14"])
        .assert()
        .success();
    let rows = inst.rows("seats");
    for cmd in ["add", "rotate", "remove"] {
        let want =
            format!("The seats changed: `ovai seat {cmd} w14` (no server was running to tell).");
        assert!(rows.contains(&want), "{want}\n{rows:?}");
    }
}

/// seats.json that cannot be replaced as a seat is added (made immutable: the check before the change
/// passed, the rename failed) left the new seat's desk behind with its secret, and said nothing of it
/// (helper-101). The desk goes, and the words say so.
#[test]
fn a_seat_seats_json_could_not_take_leaves_no_desk_behind() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: only root can make seats.json immutable here");
        return;
    }
    let inst = Instance::new();
    let book = inst.root.join(".ovai/seats.json");
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(&book)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !chattr("+i") {
        eprintln!("skipped: chattr +i does not work on this file system");
        return;
    }
    let out = inst.cmd().args(["seat", "add", "w2"]).output().unwrap();
    assert!(chattr("-i"));
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(
            "The seat w2 was not added, and its desk was taken away again: run `ovai seat add w2` again once \
             seats.json can be written."
        ),
        "{said}"
    );
    assert!(!inst.root.join("desks/w2").exists());
    inst.cmd().args(["seat", "add", "w2"]).assert().success();
}
