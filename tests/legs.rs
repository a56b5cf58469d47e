//! `OVAI_LEGS=FILE`: the daemon notes each step a call takes through it and writes them to FILE when it
//! stops (`scripts/bench --legs` reads them).

mod common;
use common::*;
use serde_json::json;

use ovai::legs::Step;

const ECHO: &str = r#"
export const description = "Echoes its arguments.";
export const inputSchema = { type: "object", properties: { i: { type: "integer" } } };
export function run(args) { return { text: JSON.stringify(args) }; }
"#;

/// Whether `want` occurs in `steps` in order (other steps may come between).
fn in_order(steps: &[Step], want: &[Step]) -> bool {
    let mut it = steps.iter();
    want.iter().all(|w| it.any(|s| s == w))
}

#[test]
fn the_daemon_writes_every_step_of_its_calls_when_it_stops() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let file = inst.root.join("legs.txt");
    let d = Daemon::start_with_env(
        &inst,
        &[("OVAI_LEGS", file.to_str().expect("a UTF-8 path"))],
    );
    let mut s = inst.session("lead");
    s.initialize();
    for i in 0..20 {
        assert_eq!(
            s.call("echo", json!({ "i": i })),
            (format!("{{\"i\":{i}}}"), false)
        );
    }
    assert_eq!(
        std::fs::read_to_string(&file).expect("the file is made at the start"),
        "",
        "the steps are written when the daemon stops, not before"
    );
    assert!(d.stop().success());
    let noted = ovai::legs::read(&std::fs::read_to_string(&file).expect("the steps file"));
    assert!(
        noted.windows(2).all(|w| w[0].1 <= w[1].1),
        "the moments go forward"
    );
    let summary = ovai::legs::summarise(&noted, 0).expect("calls cut into legs");
    assert!(summary.calls >= 1, "{summary:?}");
    assert!(summary.legs.iter().all(|(_, us)| *us >= 0.0 && *us < 60e6));
    let steps: Vec<Step> = noted.into_iter().map(|(step, _)| step).collect();
    let one_call = [
        Step::SessionLine,
        Step::CallTaken,
        Step::CallStarted,
        Step::ToHost,
        Step::Writing,
        Step::Written,
        Step::HostLine,
        Step::Delivered,
        Step::Answered,
        Step::AnswerQueued,
        Step::Writing,
        Step::Written,
    ];
    let twenty: Vec<Step> = one_call
        .iter()
        .copied()
        .cycle()
        .take(one_call.len() * 20)
        .collect();
    assert!(in_order(&steps, &twenty), "{steps:?}");
    assert_eq!(steps.iter().filter(|s| **s == Step::CallTaken).count(), 20);
    assert!(steps.contains(&Step::Woke) && steps.contains(&Step::Sleeps));
}

#[test]
fn a_file_that_cannot_be_written_is_said_at_the_start_and_the_daemon_serves_on() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let file = inst.root.join("no-such-folder").join("legs.txt");
    let d = Daemon::start_with_env(
        &inst,
        &[("OVAI_LEGS", file.to_str().expect("a UTF-8 path"))],
    );
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({ "i": 1 })),
        ("{\"i\":1}".to_string(), false)
    );
    let stderr = std::fs::read_to_string(&d.stderr).expect("the daemon's stderr");
    assert!(
        stderr.contains("OVAI_LEGS names a file that cannot be written"),
        "{stderr}"
    );
    assert!(d.stop().success());
    assert!(!file.exists());
}
