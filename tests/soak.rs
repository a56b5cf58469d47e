//! Soak: several seats at once, each with calls in flight, calling a mix of healthy and faulty plugins for
//! a bounded number of calls. The daemon's pid never changes, every call gets exactly one answer, and the
//! healthy calls all succeed.
//!
//! The faults mixed in are those a host survives (throws, rejections, process.exit, unreadable answers,
//! errors left in timers, calls past their deadline). A fault that ends the host process (SIGKILL, running
//! out of memory, a blocked event loop) also costs the other calls in flight on it at that moment a
//! refusal, whoever made them: nothing retries a call, since it may already have had its effect. The
//! second test mixes a few of those in and holds every call to exactly one answer.

mod common;
use common::*;
use serde_json::{Value, json};
use std::collections::HashMap;

const SEATS: &[&str] = &["lead", "w1", "w2", "w3"];
const CALLS_PER_SEAT: usize = 80;
const IN_FLIGHT: usize = 4;

/// One answer: the call's index among its seat's calls, its text, and whether it is a refusal.
type Answer = (usize, String, bool);
/// A seat's name and its answers in arrival order.
type SeatAnswers = (String, Vec<Answer>);

/// The tool and arguments of call `i` of seat number `seat`.
type Plan = fn(usize, usize) -> (&'static str, Value);

fn survivable(_seat: usize, i: usize) -> (&'static str, Value) {
    match i % 8 {
        0 => ("fault-throw", json!({})),
        1 => ("fault-reject", json!({})),
        2 => ("fault-exit", json!({})),
        3 => (
            "fault-unserializable",
            json!({ "kind": if i % 16 == 3 { "cycle" } else { "bigint" } }),
        ),
        4 => ("fault-late-errors", json!({})),
        5 if i % 40 == 5 => ("fault-never", json!({})),
        _ => ("echo", json!({ "i": i })),
    }
}

fn with_crashes(seat: usize, i: usize) -> (&'static str, Value) {
    // Three host kills in all, by the first seat, spread over the run: fewer than a crash loop.
    if seat == 0 && i % 25 == 7 {
        return ("fault-sigkill", json!({}));
    }
    survivable(seat, i)
}

fn instance() -> Instance {
    let inst = Instance::new();
    for f in [
        "echo",
        "fault-throw",
        "fault-reject",
        "fault-exit",
        "fault-unserializable",
        "fault-late-errors",
        "fault-never",
        "fault-sigkill",
    ] {
        inst.fixture(&format!("{f}.mjs"));
    }
    inst.set_config(json!({ "callTimeoutSeconds": 1 }));
    for s in &SEATS[1..] {
        inst.add_seat(s);
    }
    inst
}

/// Runs one seat's calls; returns (call index, answer text, isError) for each answer, in arrival order.
fn seat_run(mut s: Session, seat: usize, plan: Plan, calls: usize) -> Vec<Answer> {
    s.initialize();
    let mut waiting: HashMap<u64, usize> = HashMap::new();
    let mut answers = Vec::new();
    let mut next = 0;
    while answers.len() < calls {
        while next < calls && waiting.len() < IN_FLIGHT {
            let (tool, args) = plan(seat, next);
            let id = s.send_request("tools/call", json!({ "name": tool, "arguments": args }));
            waiting.insert(id, next);
            // Garbage between the calls: answered with id null, never mistaken for a call's answer.
            if next % 7 == 3 {
                use std::io::Write;
                let w = s.writer();
                let _ = w.write_all(b"{not json at all\n\xff\xfe\n{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\"}\n");
                let _ = w.flush();
            }
            next += 1;
        }
        let m = s.recv_where(|m| m.get("id").is_some_and(|id| !id.is_null()));
        let id = m["id"].as_u64().unwrap();
        let i = waiting
            .remove(&id)
            .unwrap_or_else(|| panic!("an answer to no call in flight, or a second answer: {m}"));
        let (text, err) = text_of(&m);
        answers.push((i, text, err));
    }
    // Everything sent has its answer; a last request flushes anything still on its way.
    s.request("tools/list", json!({}));
    assert!(
        !s.backlog
            .iter()
            .any(|m| m.get("id").is_some_and(|id| !id.is_null())),
        "a late second answer: {:?}",
        s.backlog
    );
    let garbage = s.backlog.iter().filter(|m| m["id"].is_null()).count();
    let sent = (0..calls).filter(|n| n % 7 == 3).count();
    assert_eq!(garbage, 2 * sent, "each bad line answered once");
    answers
}

fn soak(plan: Plan) -> (Instance, Vec<SeatAnswers>, u32, u32) {
    let inst = instance();
    let mut d = inst.start();
    let pid = d.pid();
    let results: Vec<SeatAnswers> = std::thread::scope(|scope| {
        let handles: Vec<_> = SEATS
            .iter()
            .enumerate()
            .map(|(n, seat)| {
                let s = inst.session(seat);
                scope.spawn(move || (seat.to_string(), seat_run(s, n, plan, CALLS_PER_SEAT)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(d.is_running());
    assert_eq!(d.pid(), pid, "the daemon never changed");
    let restarts = d.status().unwrap()["host"]["respawns"].as_u64().unwrap() as u32;
    drop(d);
    (inst, results, pid, restarts)
}

fn check_exactly_once(results: &[SeatAnswers]) {
    for (seat, answers) in results {
        let mut seen: Vec<usize> = answers.iter().map(|a| a.0).collect();
        seen.sort();
        assert_eq!(
            seen,
            (0..CALLS_PER_SEAT).collect::<Vec<_>>(),
            "{seat}: every call answered exactly once"
        );
    }
}

#[test]
fn many_seats_calling_healthy_and_faulty_plugins_all_get_their_answers() {
    let (_inst, results, _pid, restarts) = soak(survivable);
    check_exactly_once(&results);
    for (n, (seat, answers)) in results.iter().enumerate() {
        for (i, text, refused) in answers {
            let (tool, _) = survivable(n, *i);
            if tool == "echo" {
                assert_eq!(
                    (text.as_str(), *refused),
                    (format!("{seat}: {{\"i\":{i}}}").as_str(), false),
                    "healthy call {i} of {seat}"
                );
            } else if tool == "fault-late-errors" {
                assert_eq!(text, "answered before the mess");
            } else {
                assert!(*refused, "{tool} is refused");
                assert!(
                    text.starts_with(&format!("plugins/{tool}.mjs ")),
                    "the refusal names the file: {text}"
                );
            }
        }
    }
    assert_eq!(restarts, 0, "no fault in this mix ends the host");
}

#[test]
fn with_host_crashes_mixed_in_every_call_still_gets_exactly_one_answer() {
    let (inst, results, _pid, restarts) = soak(with_crashes);
    check_exactly_once(&results);
    let mut healthy_ok = 0;
    for (n, (seat, answers)) in results.iter().enumerate() {
        for (i, text, refused) in answers {
            let (tool, _) = with_crashes(n, *i);
            if tool == "echo" && !refused {
                assert_eq!(text, &format!("{seat}: {{\"i\":{i}}}"));
                healthy_ok += 1;
            } else if tool == "echo" {
                // The only way a healthy call fails: it was in flight on a host another plugin ended.
                assert!(
                    text.starts_with("plugins/echo.mjs did not answer: the plugin host stopped"),
                    "{text}"
                );
            }
        }
    }
    assert!(healthy_ok > 0);
    assert!(restarts >= 1, "the kills restarted the host");
    assert!(
        !inst.rows("host").iter().any(|r| r.contains("stays down")),
        "three kills are not a crash loop"
    );
}
