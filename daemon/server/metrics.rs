//! Prometheus's text at `/metrics`, on the address `"metrics": {"listen": …}` names (off unless it is
//! given): calls by tool, seat and outcome; their duration as the OpenTelemetry semantic conventions for
//! MCP name it (`mcp.server.operation.duration`, in seconds); sessions open by seat and transport; plugin
//! hosts ended by cause and started again; plugins served and not; the generation; spans dropped; and the
//! daemon's own process figures. No label holds a secret: seats and tools are names.

use std::collections::HashMap;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::figures::Tally;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    seat: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    mcp_method_name: &'static str,
    gen_ai_tool_name: String,
    /// Empty for a call answered with text; else how it failed (the conventions' `error.type`).
    error_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    seat: String,
    transport: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

pub struct Metrics {
    /// Held through a scrape: two at once would both raise a counter by what was counted since.
    scraping: std::sync::Mutex<()>,
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    duration: Family<OperationLabels, Histogram>,
    sessions: Family<SessionLabels, Gauge>,
    host_ends: Family<CauseLabels, Counter>,
    host_respawns: Counter,
    plugins: Family<StateLabels, Gauge>,
    generation: Gauge,
    running: Gauge,
    spans_dropped: Counter,
    resident: Gauge,
    cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    open_fds: Gauge,
    start_time: Gauge,
}

/// What the daemon holds now, read at each scrape.
pub struct Now {
    /// Sessions open by (seat, transport).
    pub sessions: HashMap<(String, &'static str), usize>,
    pub generation: u64,
    /// Files served; not served; and served but not answered by the live host (left out when it
    /// started).
    pub plugins: (usize, usize, usize),
    /// Calls to plugins in flight.
    pub running: usize,
}

/// The conventions' `error.type` for a call that failed; empty for a success.
fn error_type(outcome: Tally) -> &'static str {
    match outcome {
        Tally::Text => "",
        Tally::Refused => "tool_error",
        Tally::HostStopped => "host_stopped",
        Tally::TimedOut => "timeout",
        Tally::Cancelled => "cancelled",
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "ovai_calls",
            "tools/call requests answered (or cancelled), by tool, seat and outcome; those refused before \
             they ran (no such tool, params not taken) under tool=\"\" where no tool has the name",
            calls.clone(),
        );
        // From 1 ms to about 65 s, doubling: a built-in answers in well under a millisecond, a plugin
        // call may run to its deadline.
        let duration = Family::<OperationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.001, 2.0, 17,
            ))
        });
        registry.register_with_unit(
            "mcp_server_operation_duration",
            "MCP request duration as the server sees it (OpenTelemetry's mcp.server.operation.duration)",
            Unit::Seconds,
            duration.clone(),
        );
        let sessions = Family::<SessionLabels, Gauge>::default();
        registry.register(
            "ovai_sessions_open",
            "Sessions open now, by seat and transport (socket or http)",
            sessions.clone(),
        );
        let host_ends = Family::<CauseLabels, Counter>::default();
        registry.register(
            "ovai_host_ends",
            "Plugin hosts ended since the daemon started, by cause (stopped, hung, deaf, over_bound, \
             replaced)",
            host_ends.clone(),
        );
        let host_respawns = Counter::default();
        registry.register(
            "ovai_host_respawns",
            "Plugin hosts started in place of one that ended or was replaced, since the daemon started",
            host_respawns.clone(),
        );
        let plugins = Family::<StateLabels, Gauge>::default();
        registry.register(
            "ovai_plugins",
            "Files in plugins/ the current generation serves, those it does not, and those served whose calls \
             the live plugin host refuses (left out when it started, after a crash or a seat change)",
            plugins.clone(),
        );
        let running = Gauge::default();
        registry.register(
            "ovai_calls_running",
            "Calls to plugins in flight now, those waiting for a plugin host included",
            running.clone(),
        );
        let generation = Gauge::default();
        registry.register(
            "ovai_generation",
            "The generation served: 1 at the start, one more each restart",
            generation.clone(),
        );
        let spans_dropped = Counter::default();
        registry.register(
            "ovai_spans_dropped",
            "Trace spans lost: dropped because the exporter's queue was full, or in an export that failed",
            spans_dropped.clone(),
        );
        let resident = Gauge::default();
        registry.register_with_unit(
            "process_resident_memory",
            "The daemon's resident memory",
            Unit::Bytes,
            resident.clone(),
        );
        let cpu_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "process_cpu_seconds",
            "CPU time the daemon has used, user and system, in seconds",
            cpu_seconds.clone(),
        );
        let open_fds = Gauge::default();
        registry.register(
            "process_open_fds",
            "Descriptors the daemon holds open",
            open_fds.clone(),
        );
        let start_time = Gauge::default();
        registry.register_with_unit(
            "process_start_time",
            "When the daemon started, in seconds since the Unix epoch",
            Unit::Seconds,
            start_time.clone(),
        );
        Self {
            scraping: std::sync::Mutex::new(()),
            registry,
            calls,
            duration,
            sessions,
            host_ends,
            host_respawns,
            plugins,
            generation,
            running,
            spans_dropped,
            resident,
            cpu_seconds,
            open_fds,
            start_time,
        }
    }
}

impl Metrics {
    pub fn call(&self, seat: &str, tool: &str, took: Duration, outcome: Tally) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_string(),
                seat: seat.to_string(),
                outcome: outcome.label(),
            })
            .inc();
        self.duration
            .get_or_create(&OperationLabels {
                mcp_method_name: "tools/call",
                gen_ai_tool_name: tool.to_string(),
                error_type: error_type(outcome),
            })
            .observe(took.as_secs_f64());
    }

    /// A call answered with a JSON-RPC error `code`, not run (`Daemon::count_call_error`): its
    /// `error.type` is the code, as the conventions say.
    pub fn error(&self, seat: &str, tool: &str, took: Duration, outcome: &'static str, code: i64) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_string(),
                seat: seat.to_string(),
                outcome,
            })
            .inc();
        let error_type = match code {
            crate::jsonrpc::INVALID_PARAMS => "-32602",
            crate::jsonrpc::INVALID_REQUEST => "-32600",
            crate::jsonrpc::METHOD_NOT_FOUND => "-32601",
            _ => "_OTHER",
        };
        self.duration
            .get_or_create(&OperationLabels {
                mcp_method_name: "tools/call",
                gen_ai_tool_name: tool.to_string(),
                error_type,
            })
            .observe(took.as_secs_f64());
    }

    /// The text a scrape reads, with the figures read now (one scrape at a time: a counter is raised
    /// to what is counted elsewhere).
    pub fn scraped(&self, now: Now) -> String {
        let _one_at_a_time = crate::sync::lock(&self.scraping);
        self.sessions.clear();
        for ((seat, transport), n) in now.sessions {
            self.sessions
                .get_or_create(&SessionLabels { seat, transport })
                .set(n as i64);
        }
        let (ends, respawns) = crate::host::ending::counts();
        for (cause, n) in ends {
            raise_to(&self.host_ends.get_or_create(&CauseLabels { cause }), n);
        }
        raise_to(&self.host_respawns, respawns);
        raise_to(&self.spans_dropped, super::traces::dropped());
        self.generation.set(now.generation as i64);
        let (served, not_served, not_answering) = now.plugins;
        self.running.set(now.running as i64);
        self.plugins
            .get_or_create(&StateLabels {
                state: "not_answering",
            })
            .set(not_answering as i64);
        self.plugins
            .get_or_create(&StateLabels { state: "served" })
            .set(served as i64);
        self.plugins
            .get_or_create(&StateLabels {
                state: "not_served",
            })
            .set(not_served as i64);
        let own = process_figures();
        self.resident.set(own.resident_bytes as i64);
        if own.cpu_seconds > self.cpu_seconds.get() {
            self.cpu_seconds
                .inc_by(own.cpu_seconds - self.cpu_seconds.get());
        }
        self.open_fds.set(own.open_fds as i64);
        self.start_time.set(own.start_time as i64);
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!("the metrics could not be written out: {e}");
        }
        text
    }
}

/// The daemon's own figures, from /proc.
struct Own {
    resident_bytes: u64,
    cpu_seconds: f64,
    open_fds: usize,
    start_time: u64,
}

fn process_figures() -> Own {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis: state is the 3rd field of the line.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| -> u64 { fields.get(n - 3).and_then(|f| f.parse().ok()).unwrap_or(0) };
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100)
        .max(1) as f64;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096) as u64;
    let boot = std::fs::read_to_string("/proc/stat")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("btime ")
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    Own {
        resident_bytes: field(24) * page,
        cpu_seconds: (field(14) + field(15)) as f64 / ticks,
        open_fds: std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count),
        start_time: boot + (field(22) as f64 / ticks) as u64,
    }
}

/// A counter raised to `value`, counted elsewhere (a counter only grows: it has no `set`).
fn raise_to(counter: &Counter, value: u64) {
    if let Some(more) = value.checked_sub(counter.get())
        && more > 0
    {
        counter.inc_by(more);
    }
}
