//! Where a call's time goes inside the daemon, for `scripts/bench --legs`.
//!
//! With `OVAI_LEGS=FILE` in its environment, `ovai serve` notes the moment of each step a call takes
//! through it (and each time its one thread goes to sleep and wakes) and writes them to FILE when it
//! stops, one `step nanoseconds` line each. A profiler samples; this counts every call, and nothing
//! outside the daemon (the kernel's wake-ups, the host's own work) is mistaken for the daemon's. Off, a
//! step costs one relaxed load; on, about a tenth of a µs, which the legs include.

use std::fs::File;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The steps, in the order a plugin call takes them: one waking for the request, one for the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The thread woke (something to read, a timer).
    Woke,
    /// A session's line was read whole.
    SessionLine,
    /// The line was a plain `tools/call`, taken by the session's own calls (`server::direct`).
    CallTaken,
    /// The call starts: at once for a plugin call whose host is up (it has no task of its own), else
    /// when its task runs.
    CallStarted,
    /// A line to the host is queued (a call's; also a ping, an import or a cancel, which the legs'
    /// shapes leave out).
    ToHost,
    /// A connection's writer starts its write (to the host, or to a session).
    Writing,
    /// The write returned.
    Written,
    /// The thread goes to sleep (nothing left to do).
    Sleeps,
    /// A line from the host was read whole and parsed.
    HostLine,
    /// The host's answer was handed to its call.
    Delivered,
    /// The call has its result.
    Answered,
    /// The answer is queued for the session.
    AnswerQueued,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Woke => "woke",
            Step::SessionLine => "session_line",
            Step::CallTaken => "call_taken",
            Step::CallStarted => "call_started",
            Step::ToHost => "to_host",
            Step::Writing => "writing",
            Step::Written => "written",
            Step::Sleeps => "sleeps",
            Step::HostLine => "host_line",
            Step::Delivered => "delivered",
            Step::Answered => "answered",
            Step::AnswerQueued => "answer_queued",
        }
    }

    /// Every step is in one of the two shapes a call's wakings take.
    pub fn named(name: &str) -> Option<Step> {
        FOR_REQUEST
            .into_iter()
            .chain(FOR_ANSWER)
            .find(|s| s.name() == name)
    }
}

/// At most this many steps are kept (16 bytes each): about 65,000 calls.
const MAX_STEPS: usize = 1 << 20;

static ON: AtomicBool = AtomicBool::new(false);
static START: OnceLock<Instant> = OnceLock::new();
static STEPS: Mutex<Vec<(Step, u64)>> = Mutex::new(Vec::new());

/// The file `OVAI_LEGS` named, open from the start, so a path that cannot be written is said at once.
pub struct Legs {
    path: PathBuf,
    file: File,
}

/// Starts noting steps when `OVAI_LEGS` names a file that can be written.
pub fn start_if_asked() -> Option<Legs> {
    let path = PathBuf::from(std::env::var_os("OVAI_LEGS").filter(|p| !p.is_empty())?);
    let file = match File::create(&path) {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "OVAI_LEGS names a file that cannot be written; the daemon runs without noting its calls' steps");
            return None;
        }
    };
    START.get_or_init(Instant::now);
    crate::sync::lock(&STEPS).reserve_exact(MAX_STEPS);
    ON.store(true, Ordering::Relaxed);
    Some(Legs { path, file })
}

impl Legs {
    /// Writes the steps noted, one `step nanoseconds` line each, and says so if some were not kept.
    pub fn finish(mut self) {
        use std::fmt::Write as _;
        ON.store(false, Ordering::Relaxed);
        let steps = std::mem::take(&mut *crate::sync::lock(&STEPS));
        let full = steps.len() >= MAX_STEPS;
        let mut text = String::with_capacity(steps.len() * 24);
        for (step, at) in steps {
            let _ = writeln!(text, "{} {at}", step.name());
        }
        if let Err(e) = self.file.write_all(text.as_bytes()) {
            tracing::warn!(path = %self.path.display(), error = %e, "the call steps OVAI_LEGS asked for could not be written");
        } else if full {
            tracing::warn!(path = %self.path.display(), kept = MAX_STEPS, "OVAI_LEGS: only the first steps were kept (about 65,000 calls); the later ones were not noted");
        }
    }
}

pub fn mark(step: Step) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let Some(start) = START.get() else { return };
    let at = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut steps = crate::sync::lock(&STEPS);
    if steps.len() < MAX_STEPS {
        steps.push((step, at));
    }
}

/// The steps read back from a file `Legs::finish` wrote; lines it cannot read are skipped.
pub fn read(text: &str) -> Vec<(Step, u64)> {
    text.lines()
        .filter_map(|line| {
            let (name, at) = line.split_once(' ')?;
            Some((Step::named(name)?, at.parse().ok()?))
        })
        .collect()
}

/// A plugin call at one call at a time, as the daemon's steps show it: each leg's median, in µs.
#[derive(Debug)]
pub struct Summary {
    /// How many calls the medians are over.
    pub calls: usize,
    /// (what the leg is, its median in µs), in the order a call takes them.
    pub legs: Vec<(&'static str, f64)>,
}

/// How the daemon wakes for a call's request: one line from a session, written on to the host.
const FOR_REQUEST: [Step; 8] = [
    Step::Woke,
    Step::SessionLine,
    Step::CallTaken,
    Step::CallStarted,
    Step::ToHost,
    Step::Writing,
    Step::Written,
    Step::Sleeps,
];

/// How it wakes for the answer: one line from the host, written on to the session.
const FOR_ANSWER: [Step; 8] = [
    Step::Woke,
    Step::HostLine,
    Step::Delivered,
    Step::Answered,
    Step::AnswerQueued,
    Step::Writing,
    Step::Written,
    Step::Sleeps,
];

/// What each leg is: from each step of a waking to the next, then the sleep until the next waking.
const REQUEST_LEGS: [&str; 8] = [
    "woke → the session's line read",
    "→ taken as a call (the request parsed)",
    "→ the call starts",
    "→ the host's line queued",
    "→ its writer runs",
    "the write to the host",
    "→ asleep",
    "asleep while the host answers",
];
const ANSWER_LEGS: [&str; 8] = [
    "woke → the host's line read and parsed",
    "→ handed to its call",
    "→ the call has its result",
    "→ the answer made and queued",
    "→ its writer runs",
    "the write to the session",
    "→ asleep",
    "asleep until the next request",
];
const AWAKE: &str = "awake, both wakings";
const WHOLE: &str = "the call, request to request";

/// The legs of the calls whose request and answer each took one waking of their own, with the next
/// call's request right after (K=1), after the first `skip` such (a warm-up); `None` when there is
/// none such.
pub fn summarise(steps: &[(Step, u64)], skip: usize) -> Option<Summary> {
    // A waking is what the thread did from waking to sleeping; one with steps before its wake-up (the
    // daemon's start) keeps them, and so fits no shape.
    let wakings: Vec<&[(Step, u64)]> = steps.split_inclusive(|(s, _)| *s == Step::Sleeps).collect();
    let is = |w: &[(Step, u64)], shape: &[Step]| {
        w.len() == shape.len() && w.iter().zip(shape).all(|((s, _), want)| s == want)
    };
    let legs: Vec<&'static str> = REQUEST_LEGS
        .into_iter()
        .chain(ANSWER_LEGS)
        .chain([AWAKE, WHOLE])
        .collect();
    let mut ns: Vec<Vec<u64>> = vec![Vec::new(); legs.len()];
    let mut calls = 0;
    let since = |to: &(Step, u64), from: &(Step, u64)| to.1.saturating_sub(from.1);
    for three in wakings.windows(3) {
        let [request, answer, next] = three else {
            continue;
        };
        if !(is(request, &FOR_REQUEST) && is(answer, &FOR_ANSWER) && is(next, &FOR_REQUEST)) {
            continue;
        }
        calls += 1;
        if calls <= skip {
            continue;
        }
        let mut at = 0;
        for (waking, after) in [(request, answer), (answer, next)] {
            for pair in waking.windows(2) {
                ns[at].push(since(&pair[1], &pair[0]));
                at += 1;
            }
            ns[at].push(since(&after[0], &waking[waking.len() - 1]));
            at += 1;
        }
        ns[at].push(since(&request[7], &request[0]) + since(&answer[7], &answer[0]));
        ns[at + 1].push(since(&next[0], &request[0]));
    }
    let calls = calls.checked_sub(skip).filter(|n| *n > 0)?;
    let legs = legs
        .into_iter()
        .zip(ns)
        .map(|(leg, mut ns)| {
            ns.sort_unstable();
            (leg, ns[ns.len() / 2] as f64 / 1000.0)
        })
        .collect();
    Some(Summary { calls, legs })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waking(shape: &[Step], from: u64, step_ns: u64) -> Vec<(Step, u64)> {
        shape
            .iter()
            .enumerate()
            .map(|(i, s)| (*s, from + i as u64 * step_ns))
            .collect()
    }

    #[test]
    fn a_call_at_a_time_is_cut_into_its_legs() {
        let mut steps = vec![(Step::Woke, 0), (Step::Sleeps, 10)];
        let mut at = 1_000;
        for _ in 0..3 {
            steps.extend(waking(&FOR_REQUEST, at, 1_000));
            at += 7_000 + 20_000;
            steps.extend(waking(&FOR_ANSWER, at, 2_000));
            at += 14_000 + 50_000;
        }
        let summary = summarise(&steps, 0).expect("calls");
        assert_eq!(summary.calls, 2);
        assert_eq!(summarise(&steps, 1).expect("a call").calls, 1);
        assert!(summarise(&steps, 2).is_none());
        let leg = |name: &str| {
            summary
                .legs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, us)| *us)
        };
        assert_eq!(leg("woke → the session's line read"), Some(1.0));
        assert_eq!(leg("woke → the host's line read and parsed"), Some(2.0));
        assert_eq!(leg("the write to the session"), Some(2.0));
        assert_eq!(leg("asleep while the host answers"), Some(20.0));
        assert_eq!(leg("asleep until the next request"), Some(50.0));
        assert_eq!(leg("awake, both wakings"), Some(21.0));
        assert_eq!(leg("the call, request to request"), Some(91.0));
        assert_eq!(summary.legs.len(), 7 + 1 + 7 + 1 + 2);
    }

    #[test]
    fn wakings_of_another_shape_are_left_out() {
        let mut steps = waking(&FOR_REQUEST, 0, 1_000);
        steps.extend(waking(&[Step::Woke, Step::Sleeps], 10_000, 1_000));
        steps.extend(waking(&FOR_REQUEST, 20_000, 1_000));
        assert!(summarise(&steps, 0).is_none());
    }

    #[test]
    fn the_file_reads_back_as_written() {
        let text = "woke 5\nhost_line 9\nnonsense\nsleeps x\nsleeps 12\n";
        assert_eq!(
            read(text),
            vec![(Step::Woke, 5), (Step::HostLine, 9), (Step::Sleeps, 12)]
        );
    }
}
