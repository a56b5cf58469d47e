//! Each tool's calls since the daemon started (for `ovai status`), and the opt-in call log
//! (`callLog: true`): one JSON line per call in calls.jsonl beside runtime.log (0600, rotated like it),
//! with the time, seat, tool, milliseconds and outcome, and never the arguments or the answer.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::sync::lock;
use crate::wire::ToolFigures;

/// The latest calls per tool that the percentiles are taken over.
const KEPT: usize = 1024;
/// calls.jsonl is rotated (one old file kept) when a line would take it past this.
const ROTATE_AT_BYTES: u64 = crate::runtime_log::ROTATE_AT_BYTES;

/// How a call ended, as every record names it: the figures, the call log, the page and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    Text,
    Refused,
    /// Refused because its plugin host stopped under it.
    HostStopped,
    /// Refused because its deadline came.
    TimedOut,
    Cancelled,
}

impl Tally {
    /// As the call log and the page write it.
    fn as_str(self) -> &'static str {
        match self {
            Tally::Text => "text",
            Tally::Refused => "refused",
            Tally::HostStopped => "host stopped",
            Tally::TimedOut => "timed out",
            Tally::Cancelled => "cancelled",
        }
    }

    /// As a metric's label writes it.
    pub fn label(self) -> &'static str {
        match self {
            Tally::Text => "text",
            Tally::Refused => "refused",
            Tally::HostStopped => "host_stopped",
            Tally::TimedOut => "timed_out",
            Tally::Cancelled => "cancelled",
        }
    }

    /// Whether the caller was refused.
    fn refused(self) -> bool {
        matches!(self, Tally::Refused | Tally::HostStopped | Tally::TimedOut)
    }
}

/// How a call ended besides its outcome, which tells whose doing a refusal was: run to its end (its own
/// words), its host ended under it, its deadline came or its code failed, its arguments did not fit, or
/// it was not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Ran,
    HostStopped,
    TimedOut,
    /// Its code failed: it threw, or answered something other than `{ text }` or `{ refused }`.
    Failed,
    /// Refused before it ran: its arguments do not fit its inputSchema.
    Misfit,
    /// Refused before it ran: the server was stopping, or a new host did not import its file again.
    NotRun,
}

impl How {
    pub fn of(ended: &crate::host::Ended) -> How {
        match ended {
            crate::host::Ended::HostEnded(_) => How::HostStopped,
            crate::host::Ended::Deadline { .. } => How::TimedOut,
            crate::host::Ended::Answered(a) if !crate::answer::own_words(a) => How::Failed,
            crate::host::Ended::NotReimported(_) => How::NotRun,
            _ => How::Ran,
        }
    }
}

#[derive(Default)]
struct Tool {
    /// The name, shared with the latest calls: a call copies no string.
    name: Arc<str>,
    calls: u64,
    refusals: u64,
    host_stops: u64,
    failures: u64,
    timeouts: u64,
    misfits: u64,
    unrun: u64,
    /// The latest durations, in ms.
    recent: VecDeque<f64>,
}

/// One of the latest calls, for the status page: never its arguments or its answer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RecentCall {
    /// When it ended, written as runtime.log writes times (only when the page asks: not on the call's
    /// path).
    #[serde(serialize_with = "as_timestamp")]
    pub at: SystemTime,
    #[serde(serialize_with = "as_str")]
    pub seat: Arc<str>,
    #[serde(serialize_with = "as_str")]
    pub tool: Arc<str>,
    pub ms: f64,
    pub outcome: &'static str,
}

fn as_str<S: serde::Serializer>(text: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(text)
}

fn as_timestamp<S: serde::Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::runtime_log::timestamp(*at))
}

/// The latest calls kept for the status page.
const RECENT: usize = 50;

#[derive(Default)]
pub struct Figures {
    tools: Mutex<crate::maps::Map<String, Tool>>,
    log: Mutex<Option<CallLog>>,
    /// The latest calls, newest last.
    recent: Mutex<VecDeque<RecentCall>>,
    /// Each seat's calls and refusals today (UTC), and its name shared with the latest calls.
    today: Mutex<crate::maps::Map<String, Today>>,
}

#[derive(Default)]
struct Today {
    seat: Arc<str>,
    day: u64,
    calls: u64,
    refusals: u64,
}

struct CallLog {
    path: PathBuf,
    tx: std::sync::mpsc::Sender<String>,
    /// While the last lines could not be written: how many, and why the first could not.
    lost: Arc<Mutex<Option<(usize, String)>>>,
}

impl Figures {
    /// Turns the call log on (writing to `path`) or off, as openovai.json says now.
    pub fn set_call_log(&self, path: Option<PathBuf>) {
        let mut log = lock(&self.log);
        match (path, log.as_ref()) {
            (None, _) => *log = None,
            (Some(p), Some(l)) if l.path == p => {}
            (Some(p), _) => *log = Some(CallLog::start(p)),
        }
    }

    /// While calls.jsonl cannot be written: why, and how many calls since are not in it.
    pub fn call_log_unwritable(&self) -> Option<String> {
        let log = lock(&self.log);
        let (n, why) = lock(&log.as_ref()?.lost).clone()?;
        let calls = if n == 1 {
            "call since is".to_string()
        } else {
            format!("{} calls since are", crate::names::thousands(n))
        };
        Some(format!(
            "calls.jsonl cannot be written ({}): the {calls} not in it (callLog).",
            crate::names::escape_controls(&why, false)
        ))
    }

    /// `how`: how it ended, which tells whose doing a refusal was (what `ovai status` shows its author).
    pub fn record(&self, seat: &str, tool: &str, took: Duration, outcome: Tally, how: How) {
        let ms = took.as_secs_f64() * 1e3;
        let tool_name = {
            let mut tools = lock(&self.tools);
            // The name is copied once, the first time the tool is called.
            let t = match tools.get_mut(tool) {
                Some(t) => t,
                None => tools.entry(tool.to_string()).or_insert_with(|| Tool {
                    name: tool.into(),
                    ..Tool::default()
                }),
            };
            t.calls += 1;
            t.refusals += u64::from(outcome.refused());
            t.host_stops += u64::from(outcome == Tally::HostStopped);
            if outcome.refused() && outcome != Tally::HostStopped {
                let counter = match how {
                    How::Ran | How::HostStopped => None,
                    How::Failed => Some(&mut t.failures),
                    // Not the tool's fault alone: another call may have held the host (helper-104).
                    How::TimedOut => Some(&mut t.timeouts),
                    How::Misfit => Some(&mut t.misfits),
                    How::NotRun => Some(&mut t.unrun),
                };
                if let Some(n) = counter {
                    *n += 1;
                }
            }
            if t.recent.len() == KEPT {
                t.recent.pop_front();
            }
            t.recent.push_back(ms);
            t.name.clone()
        };
        let now = SystemTime::now();
        let day = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400);
        let seat_name = {
            let mut today = lock(&self.today);
            let t = match today.get_mut(seat) {
                Some(t) => t,
                None => today.entry(seat.to_string()).or_insert_with(|| Today {
                    seat: seat.into(),
                    ..Today::default()
                }),
            };
            if t.day != day {
                (t.day, t.calls, t.refusals) = (day, 0, 0);
            }
            t.calls += 1;
            t.refusals += u64::from(outcome.refused());
            t.seat.clone()
        };
        {
            let mut recent = lock(&self.recent);
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(RecentCall {
                at: now,
                seat: seat_name,
                tool: tool_name,
                ms: (ms * 10.0).round() / 10.0,
                outcome: outcome.as_str(),
            });
        }
        if let Some(log) = lock(&self.log).as_ref() {
            let line = json!({
                "at": crate::runtime_log::timestamp(now),
                "seat": seat,
                "tool": tool,
                "ms": (ms * 1000.0).round() / 1000.0,
                "outcome": outcome.as_str(),
            });
            let _ = log.tx.send(line.to_string());
        }
    }

    /// The latest calls, newest first.
    pub fn recent(&self) -> Vec<RecentCall> {
        lock(&self.recent).iter().rev().cloned().collect()
    }

    /// A seat's calls and refusals today (UTC).
    pub fn today(&self, seat: &str) -> (u64, u64) {
        let day = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400);
        match lock(&self.today).get(seat) {
            Some(t) if t.day == day => (t.calls, t.refusals),
            _ => (0, 0),
        }
    }

    /// Every tool called so far, by name.
    pub fn snapshot(&self) -> Vec<ToolFigures> {
        let tools = lock(&self.tools);
        let mut out: Vec<ToolFigures> = tools
            .iter()
            .map(|(name, t)| {
                let mut sorted: Vec<f64> = t.recent.iter().copied().collect();
                sorted.sort_by(f64::total_cmp);
                let pick = |q: f64| {
                    sorted
                        .get(
                            ((sorted.len() as f64 * q) as usize)
                                .min(sorted.len().saturating_sub(1)),
                        )
                        .map_or(0.0, |v| (v * 10.0).round() / 10.0)
                };
                ToolFigures {
                    name: name.clone(),
                    calls: t.calls,
                    refusals: t.refusals,
                    host_stops: t.host_stops,
                    failures: t.failures,
                    timeouts: t.timeouts,
                    misfits: t.misfits,
                    unrun: t.unrun,
                    p50_ms: pick(0.5),
                    p99_ms: pick(0.99),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

impl CallLog {
    /// Lines are written by a thread of their own: no file work on the daemon's thread.
    fn start(path: PathBuf) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let writing = path.clone();
        let lost = Arc::new(Mutex::new(None));
        let said_lost = lost.clone();
        std::thread::spawn(move || {
            let mut file = crate::files::Appender::new(&writing, ROTATE_AT_BYTES);
            for mut line in rx {
                line.push('\n');
                // Lines lost (a full disk) are counted in a line of their own, after those that made it.
                if let Some((lost, why)) = file.append_or_say(line.as_bytes()) {
                    let said = serde_json::json!({
                        "at": crate::runtime_log::timestamp(std::time::SystemTime::now()),
                        "lost": lost,
                        "why": why,
                    });
                    file.append_or_say(format!("{said}\n").as_bytes());
                }
                // For `ovai status`: an ERROR line on stderr was all.
                *lock(&said_lost) = file.lost().cloned();
            }
        });
        Self { path, tx, lost }
    }
}
