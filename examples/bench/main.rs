//! The benchmark driver behind `scripts/bench`: ovai against a single-process Node MCP server written with
//! the official TypeScript SDK (scripts/bench-baseline/server.mjs), serving the same plugin file.
//!
//! It speaks raw newline-delimited JSON-RPC over each server's stdio (for ovai, over `ovai mcp`: the
//! path a real session takes), alternates ovai and baseline runs, and reports medians of p50/p99 latency,
//! calls per second and the other figures, with the ratio ovai/baseline. Timings are taken here and
//! nowhere else: the tests never assert on time.
//!
//! Usage (scripts/bench passes the paths): bench OVAI NODE BASELINE_SCRIPT WORK_DIR [--runs N] [--json FILE]
//! [--quick] [a mode]; `--help` says what each mode does. The modules: `cases` (the table's cases),
//! `floors` and `floor_roles` (the same chains of minimal processes, and those processes), `look` (CPU,
//! load, idle, scaling), `driver` (a client writing what real clients write), `instance`, `report`,
//! `http`, `host_alone`.

use std::collections::{BTreeMap, HashMap};

use std::io::{BufRead, BufReader, Read, Write};

use std::os::unix::net::UnixDatagram;

use std::path::PathBuf;

use std::process::{Child, Command, Stdio};

use std::time::{Duration, Instant};

use clap::Parser;

use nix::sys::signal::Signal;

use ovai::client::{self, McpClient};

use serde_json::{Value, json};

type Figures = BTreeMap<&'static str, f64>;

/// A case's name, ovai's figures and the baseline's.
type Case = (&'static str, Figures, Figures);

/// The floor's processes, which are this binary started by itself: each takes the command line of the
/// process it starts in front of (the rest of the chain).
#[derive(Parser)]
#[command(multicall = false)]
enum FloorRole {
    /// Answers each request line with a canned tools/call result.
    #[command(long_flag = "floor-responder")]
    Responder,
    /// Relays both ways in one poll loop to the process it starts.
    #[command(long_flag = "floor-relay")]
    Relay(Chain),
    /// The same over one Unix socket pair, as the bridge's fallback.
    #[command(long_flag = "floor-relay-socket")]
    RelaySocket(Chain),
    /// A thread each way, as `ovai mcp`.
    #[command(long_flag = "floor-relay-threads")]
    RelayThreads(Chain),
    /// A thread each way under SCHED_BATCH, as `ovai mcp`.
    #[command(long_flag = "floor-relay-batch")]
    RelayBatch(Chain),
    /// The bridge's shape in front of the hub, on two descriptors left open for it.
    #[command(long_flag = "floor-relay-fds")]
    RelayFds(Chain),
    /// One poll loop over many sessions' pipes in front of one responder, as the daemon.
    #[command(long_flag = "floor-hub")]
    Hub(Chain),
}

#[derive(clap::Args)]
struct Chain {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

impl FloorRole {
    fn run(self) {
        match self {
            FloorRole::Responder => floor::responder(),
            FloorRole::Relay(c) => floor::relay(&c.rest, false, floor::copy_both_ways),
            FloorRole::RelaySocket(c) => floor::relay(&c.rest, true, floor::copy_both_ways),
            FloorRole::RelayThreads(c) => floor::relay(&c.rest, false, floor::copy_on_threads),
            FloorRole::RelayBatch(c) => {
                floor::relay(&c.rest, false, floor::copy_on_threads_batched)
            }
            FloorRole::RelayFds(c) => floor::relay_to_fds(&c.rest),
            FloorRole::Hub(c) => floor::hub(&c.rest),
        }
    }
}

/// The benchmark's command line (scripts/bench passes the four paths).
#[derive(Parser)]
#[command(about = "ovai against a single-process TypeScript-SDK server, serving the same plugin.")]
struct Args {
    /// The ovai binary.
    ovai: PathBuf,
    /// The Node that runs the baseline.
    node: PathBuf,
    /// The baseline server's script.
    baseline: PathBuf,
    /// A short folder for the temporary instances (the daemon's socket lives under it).
    work: PathBuf,
    /// Runs per case; each figure is their median.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// A tenth of the calls per case, for a quick look.
    #[arg(long)]
    quick: bool,
    /// Instead of the cases: one call through the bridge beside one straight onto the daemon's socket.
    #[arg(long, group = "mode")]
    hops: bool,
    /// Instead of the cases: the CPU, read and write calls and sleeps each process spends per call, ovai's
    /// beside the baseline's and the floor chain's.
    #[arg(long, group = "mode")]
    cpu: bool,
    /// Instead of the cases: the daemon's memory after each 100,000 calls.
    #[arg(long, group = "mode")]
    growth: bool,
    /// Only the one-call-at-a-time cases (k1, builtin_k1) and their floors: a quick look at latency.
    #[arg(long, group = "mode")]
    k1: bool,
    /// Only the throughput cases (k32, sessions16).
    #[arg(long, group = "mode")]
    throughput: bool,
    /// Only the floors: what the process chains cost on this machine now.
    #[arg(long, group = "mode")]
    floor: bool,
    /// Only the cases of starting: attach, startup_1000, recovery and restart_100.
    #[arg(long, group = "mode")]
    starts: bool,
    /// Only the HTTP cases (http_k1, http_k32).
    #[arg(long = "http-only", group = "mode")]
    http_only: bool,
    /// Instead of the cases: how cost grows with sessions, plugins and calls in flight at a restart.
    #[arg(long, group = "mode")]
    scaling: bool,
    /// Instead of the cases: N sessions of `ovai mcp` calling the echo plugin (4 in flight each; 32 for
    /// one session) in rounds of 80,000 calls (100,000 for one session), the figures of each round
    /// printed, for `--seconds`: a load to profile (`perf record -p`, `perf sched record`) with the pids
    /// it prints. Every session's thread ends with its round, so rounds have short gaps between them.
    #[arg(long, value_name = "N", group = "mode", value_parser = clap::value_parser!(u64).range(1..=1024))]
    load: Option<u64>,
    /// How long `--load` runs, or `--idle` counts, in seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// How many calls each `--load` session keeps in flight, in place of 4 (32 for one session); rounds
    /// are then 20,000 × K calls (at most 100,000) over all sessions: `--load 1 --in-flight 1` is k1's load.
    #[arg(long = "in-flight", value_name = "K", requires = "load",
          value_parser = clap::value_parser!(u64).range(1..=256))]
    in_flight: Option<u64>,
    /// With `--load`: the sessions are the floor's (relays in the bridge's shape into one hub in the
    /// daemon's, in front of a minimal responder) in place of ovai's, to profile beside them.
    #[arg(long = "on-floor", requires = "load")]
    on_floor: bool,
    /// Only the case of calls made at an agent's pace: one call, then a pause of 0.2 to 2 s (a model's turn),
    /// 50 calls, as Claude Code writes them.
    #[arg(long, group = "mode")]
    paced: bool,
    /// Only the idle case: how often the daemon and its plugin host wake up a second with no call in
    /// flight, over `--seconds` (30): with no session, and with a session as Claude Code leaves it open.
    #[arg(long, group = "mode")]
    idle: bool,
    /// Instead of the cases: host.mjs alone, driven over its fds 3 and 4 as the daemon drives it, beside a
    /// minimal Node process speaking the same protocol: what the host's own code costs a call.
    #[arg(long = "host-alone", group = "mode")]
    host_alone: bool,
}

struct Setup {
    ovai: PathBuf,
    node: PathBuf,
    baseline: PathBuf,
    work: PathBuf,
    runs: usize,
    quick: bool,
}

impl Setup {
    fn calls(&self, n: usize) -> usize {
        if self.quick { (n / 10).max(100) } else { n }
    }

    /// The calls each run makes, at its own concurrency, before the `n` it measures. The baseline is
    /// JavaScript: V8 compiles its hot paths over the first thousands of calls, and a run of 5,000
    /// after 200 measured mostly that (its k32 was half what it settles at, from 20,000 calls on);
    /// ovai's plugin host, also Node, needs it too. A server of a workspace runs for hours: what is
    /// measured is the settled figure. `--quick` shortens both, so its figures are not settled.
    fn warm_up(&self, n: usize) -> usize {
        self.calls((n * 2 / 5).max(2_000))
    }
}

fn main() {
    // The floor's own processes are this binary too: a minimal responder, relays, a hub.
    if std::env::args()
        .nth(1)
        .is_some_and(|a| a.starts_with("--floor-"))
    {
        return FloorRole::parse().run();
    }
    let args = Args::parse();
    let setup = Setup {
        ovai: args.ovai,
        node: args.node,
        baseline: args.baseline,
        work: args.work,
        runs: args.runs,
        quick: args.quick,
    };
    let json_out = args.json;
    let mode = if args.hops {
        Some("--hops")
    } else if args.cpu {
        Some("--cpu")
    } else if args.growth {
        Some("--growth")
    } else if args.http_only {
        Some("--http-only")
    } else if args.scaling {
        Some("--scaling")
    } else if args.k1 {
        Some("--k1")
    } else if args.throughput {
        Some("--throughput")
    } else if args.floor {
        Some("--floor")
    } else if args.host_alone {
        Some("--host-alone")
    } else if args.starts {
        Some("--starts")
    } else {
        None
    };
    // Given no baseline (`-`, as `--load` takes), a run that measures it says so before it starts anything,
    // rather than Node waiting for a script on its stdin.
    let alone = matches!(
        mode,
        Some("--growth" | "--scaling" | "--host-alone" | "--floor")
    );
    if args.load.is_none() && !alone && !setup.baseline.is_file() {
        eprintln!(
            "bench: this run measures the baseline, and {} is not its script; give the path of \
             scripts/bench-baseline/server.mjs with the SDK installed beside it (scripts/bench does).",
            setup.baseline.display()
        );
        std::process::exit(2);
    }
    let mut cases: Vec<(&'static str, Figures, Figures)> = Vec::new();
    let one = Instance::new(&setup, "one", 1);
    let runs = setup.runs;
    if let Some(n) = args.load {
        let k = args.in_flight.map(|k| k as usize);
        if args.on_floor {
            load_on_floor(n as usize, k, Duration::from_secs(args.seconds));
            return;
        }
        load(
            &setup,
            &one,
            n as usize,
            k,
            Duration::from_secs(args.seconds),
        );
        return;
    }
    if mode == Some("--growth") {
        // Resident memory of the daemon after each further 100,000 calls: growth, or a plateau?
        let (d, _) = Daemon::start(&setup, &one);
        let mut c = Client::ovai(&setup, &one);
        c.initialize();
        for round in 1..=5 {
            c.calls("p0000", 100_000, 32);
            std::thread::sleep(Duration::from_millis(200));
            eprintln!("after {}00k calls: daemon {:.2} MB", round, rss_mb(d.pid()));
        }
        return;
    }
    if mode == Some("--cpu") {
        let (d, _) = Daemon::start(&setup, &one);
        for (tool, k, shape) in [
            ("p0000", 1, Shape::ClaudeCode),
            ("p0000", 32, Shape::ClaudeCode),
            ("p0000", 32, Shape::Bare),
            ("index", 1, Shape::ClaudeCode),
        ] {
            eprintln!("{shape:?}:");
            let mut c = Client::ovai(&setup, &one);
            c.open(shape, true);
            c.calls(tool, setup.warm_up(20000), k);
            cpu_per_call(&setup, &one, &d, &mut c, tool, 20000, k);
        }
        for k in [1, 32] {
            let mut c = Client::baseline(&setup, &one);
            c.open(Shape::ClaudeCode, false);
            c.calls("p0000", setup.warm_up(20000), k);
            let pids = [("baseline", c.pid())];
            let _ =
                calls_counting_cpu(&format!("baseline k={k}"), &pids, &mut c, "p0000", 20000, k);
        }
        sessions_cpu_per_call(&setup, &one, &d, 16, 4, 5000);
        floor_cpu_per_call(&setup, 20000);
        return;
    }
    if args.paced {
        cases.push(alternate(
            "k1_paced",
            runs.min(3),
            || paced_calls(&setup, &one, true),
            || paced_calls(&setup, &one, false),
        ));
        print_table(&machine(), &cases);
        return;
    }
    if args.idle {
        idle(&setup, &one, Duration::from_secs(args.seconds));
        return;
    }
    if mode == Some("--scaling") {
        scaling(&setup, &one);
        return;
    }
    if mode == Some("--host-alone") {
        host_alone::compare(&setup.node, &setup.work, setup.calls(100_000));
        return;
    }
    if mode == Some("--http-only") {
        http_cases(&setup, &mut cases);
        print_table(&machine(), &cases);
        return;
    }
    if mode == Some("--hops") {
        // Where one call's time goes: through the bridge, and straight onto the socket.
        cases.push(k1_case("k1", &setup, &one, "p0000", false));
        cases.push(k1_case("k1_direct", &setup, &one, "p0000", true));
        cases.push(k1_case("builtin_k1", &setup, &one, "index", false));
        cases.push(k1_case("builtin_direct", &setup, &one, "index", true));
        print_table(&machine(), &cases);
        return;
    }
    if mode == Some("--floor") {
        let mut floors = floor_cases(&setup, runs);
        floors.extend(throughput_floor_cases(&setup, runs));
        print_floors(&[], &floors);
        return;
    }
    if mode == Some("--throughput") {
        throughput_cases(&setup, &one, &mut cases);
        let floors = throughput_floor_cases(&setup, runs);
        print_table(&machine(), &cases);
        print_floors(&cases, &floors);
        return;
    }
    if mode == Some("--k1") {
        cases.push(k1_case("k1", &setup, &one, "p0000", false));
        cases.push(k1_shaped("k1_ts", &setup, &one, Shape::TsSdk));
        cases.push(k1_shaped("k1_bare", &setup, &one, Shape::Bare));
        cases.push(k1_case("builtin_k1", &setup, &one, "index", false));
        let floors = floor_cases(&setup, runs);
        print_table(&machine(), &cases);
        print_floors(&cases, &floors);
        return;
    }
    if mode == Some("--starts") {
        starts_cases(&setup, &one, &mut cases);
        print_table(&machine(), &cases);
        return;
    }
    cases.push(k1_case("k1", &setup, &one, "p0000", false));
    cases.push(k1_shaped("k1_ts", &setup, &one, Shape::TsSdk));
    cases.push(k1_shaped("k1_bare", &setup, &one, Shape::Bare));
    let mut floors = floor_cases(&setup, runs);
    throughput_cases(&setup, &one, &mut cases);
    floors.extend(throughput_floor_cases(&setup, runs));
    cases.push(k1_case("builtin_k1", &setup, &one, "index", false));
    http_cases(&setup, &mut cases);
    starts_cases(&setup, &one, &mut cases);
    cases.push(alternate(
        "rss_64",
        1,
        || ovai_rss(&setup, &one),
        || baseline_rss(&setup, &one),
    ));

    let machine = machine();
    print_table(&machine, &cases);
    print_floors(&cases, &floors);
    if let Some(path) = json_out {
        let mut out = serde_json::Map::new();
        for (name, f) in &floors {
            out.insert(name.to_string(), json!({ "floor": figures_json(f) }));
        }
        for (name, o, b) in &cases {
            let mut ratio = serde_json::Map::new();
            for (k, v) in o {
                if let Some(bv) = b.get(k).filter(|bv| **bv != 0.0) {
                    ratio.insert(k.to_string(), json!(round(v / bv, 3)));
                }
            }
            let mut case =
                json!({ "ovai": figures_json(o), "baseline": figures_json(b), "ratio": ratio });
            let figure = if o.contains_key("p50_us") && !matches!(*name, "k32" | "sessions16") {
                "p50_us"
            } else {
                "calls_per_s"
            };
            if let Some(floor) = floor_of(name, &floors)
                && let (Some(v), Some(f)) = (o.get(figure), floor.get(figure))
            {
                case["ratio_to_floor"] = json!({ figure: round(v / f, 3) });
            }
            out.insert(name.to_string(), case);
        }
        let doc = json!({ "machine": machine, "date": date(), "cases": out });
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n")
            .expect("the JSON file is written");
        println!("\nFigures written to {}", path.display());
    }
}

mod cases;
mod driver;
mod floor_roles;
mod floors;
/// Attach, start-up, recovery and restart: what starting a session, the server and its host cost.
fn starts_cases(setup: &Setup, one: &Instance, cases: &mut Vec<Case>) {
    let runs = setup.runs;
    cases.push(alternate(
        "attach",
        runs,
        || ovai_attach(setup, one),
        || baseline_attach(setup, one),
    ));
    let thousand = Instance::new(setup, "thousand", 1000);
    cases.push(alternate(
        "startup_1000",
        runs.min(3),
        || ovai_startup(setup, &thousand),
        || baseline_startup(setup, &thousand),
    ));
    cases.push(alternate(
        "recovery",
        runs.min(3),
        || ovai_recovery(setup, one),
        || baseline_recovery(setup, one),
    ));
    let hundred = Instance::new(setup, "hundred", 100);
    cases.push(alternate(
        "restart_100",
        runs.min(3),
        || ovai_restart(setup, &hundred),
        || baseline_restart(setup, &hundred),
    ));
}

mod host_alone;
mod http;
mod instance;
mod look;
mod report;

use cases::*;
use driver::*;
use floor_roles as floor;
use floors::*;
use instance::*;
use look::*;
use report::*;
