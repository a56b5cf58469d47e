//! The benchmark driver behind `scripts/bench`: ovai against a single-process Node MCP server written with
//! the official TypeScript SDK (scripts/bench-baseline/server.mjs), serving the same plugin file.
//!
//! It speaks raw newline-delimited JSON-RPC over each server's stdio (for ovai, over `ovai mcp`: the
//! path a real session takes), alternates ovai and baseline runs, and reports medians of p50/p99 latency,
//! calls per second and the other figures, with the ratio ovai/baseline. Timings are taken here and
//! nowhere else: the tests never assert on time.
//!
//! Usage (scripts/bench passes these): bench OVAI NODE BASELINE_SCRIPT WORK_DIR [--runs N] [--json FILE]
//! [--quick] [--hops | --cpu | --growth | --k1 | --throughput | --floor | --http-only | --scaling |
//! --host-alone]; `--help` says what each does.

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

const ECHO: &str = r#"export const description = "Echoes its arguments.";
export const inputSchema = { type: "object", properties: { i: { type: "integer", description: "A number." } } };
export function run(args) { return { text: JSON.stringify(args) }; }
"#;

type Figures = BTreeMap<&'static str, f64>;
/// A case's name, ovai's figures and the baseline's.
type Case = (&'static str, Figures, Figures);

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
    // The floor's own processes are this binary too: a minimal responder, and a relay in front of it.
    let argv: Vec<String> = std::env::args().collect();
    match argv.get(1).map(String::as_str) {
        Some("--floor-responder") => return floor::responder(),
        Some("--floor-relay") => return floor::relay(&argv[2..], false, floor::copy_both_ways),
        Some("--floor-relay-socket") => {
            return floor::relay(&argv[2..], true, floor::copy_both_ways);
        }
        Some("--floor-relay-threads") => {
            return floor::relay(&argv[2..], false, floor::copy_on_threads);
        }
        Some("--floor-relay-batch") => {
            return floor::relay(&argv[2..], false, floor::copy_on_threads_batched);
        }
        Some("--floor-relay-fds") => return floor::relay_to_fds(&argv[2..]),
        Some("--floor-hub") => return floor::hub(&argv[2..]),
        _ => {}
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
    cases.push(k1_case("k1", &setup, &one, "p0000", false));
    cases.push(k1_shaped("k1_ts", &setup, &one, Shape::TsSdk));
    cases.push(k1_shaped("k1_bare", &setup, &one, Shape::Bare));
    let mut floors = floor_cases(&setup, runs);
    cases.push(alternate(
        "attach",
        runs,
        || ovai_attach(&setup, &one),
        || baseline_attach(&setup, &one),
    ));
    throughput_cases(&setup, &one, &mut cases);
    floors.extend(throughput_floor_cases(&setup, runs));
    cases.push(k1_case("builtin_k1", &setup, &one, "index", false));
    http_cases(&setup, &mut cases);
    let thousand = Instance::new(&setup, "thousand", 1000);
    cases.push(alternate(
        "startup_1000",
        runs.min(3),
        || ovai_startup(&setup, &thousand),
        || baseline_startup(&setup, &thousand),
    ));
    cases.push(alternate(
        "recovery",
        runs.min(3),
        || ovai_recovery(&setup, &one),
        || baseline_recovery(&setup, &one),
    ));
    let hundred = Instance::new(&setup, "hundred", 100);
    cases.push(alternate(
        "restart_100",
        runs.min(3),
        || ovai_restart(&setup, &hundred),
        || baseline_restart(&setup, &hundred),
    ));
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

/// The cases the throughput targets name: 32 calls in flight on one session, and 16 sessions.
fn throughput_cases(
    setup: &Setup,
    one: &Instance,
    cases: &mut Vec<(&'static str, Figures, Figures)>,
) {
    cases.push(alternate(
        "k32",
        setup.runs,
        || ovai_calls(setup, one, 200_000, 32, "p0000"),
        || baseline_calls(setup, one, 200_000, 32),
    ));
    cases.push(alternate(
        "sessions16",
        setup.runs,
        || ovai_sessions(setup, one, 16, 4, 5_000),
        || baseline_sessions(setup, one, 16, 4, 5_000),
    ));
}

/// One call at a time to `tool` through `ovai mcp` (or, `direct`, straight onto the daemon's socket),
/// against the baseline's plugin call.
fn k1_case(name: &'static str, setup: &Setup, inst: &Instance, tool: &str, direct: bool) -> Case {
    let calls = if direct { direct_calls } else { ovai_calls };
    alternate(
        name,
        setup.runs,
        || calls(setup, inst, 5000, 1, tool),
        || baseline_calls(setup, inst, 5000, 1),
    )
}

/// One call at a time through `ovai mcp`, written as a client of `shape` writes it, against the baseline
/// fed the same lines.
fn k1_shaped(name: &'static str, setup: &Setup, inst: &Instance, shape: Shape) -> Case {
    alternate(
        name,
        setup.runs,
        || ovai_calls_shaped(setup, inst, 5000, 1, "p0000", shape),
        || baseline_calls_shaped(setup, inst, 5000, 1, shape),
    )
}

/// What the same process shapes serve at the throughput cases' concurrency with nothing of ovai's in them:
/// a chain of two relays with 32 calls in flight, and sixteen sessions each through a relay into one hub in
/// the daemon's shape (one poll loop), in front of one responder. The relay nearest the client is the
/// bridge's shape: a thread each way, scheduled as `SCHED_BATCH`.
fn throughput_floor_cases(setup: &Setup, runs: usize) -> Vec<(&'static str, Figures)> {
    vec![
        (
            "floor_chain_k32",
            repeat("floor_chain_k32", runs, || {
                floor_calls_k(
                    setup,
                    &["--floor-relay-batch", "--floor-relay"],
                    200_000,
                    32,
                )
            }),
        ),
        (
            "floor_sessions16",
            repeat("floor_sessions16", runs, || {
                floor_sessions_calls(setup, 16, 4, 5_000, false)
            }),
        ),
        // Not a floor any ratio is taken against: floor_sessions16 with a minimal Node process answering
        // in the host's place, what a Node host costs the shape by itself.
        (
            "floor_sessions16_node",
            repeat("floor_sessions16_node", runs, || {
                floor_sessions_calls(setup, 16, 4, 5_000, true)
            }),
        ),
    ]
}

/// What the same process chains cost with nothing of ovai's in them: the floor.
fn floor_cases(setup: &Setup, runs: usize) -> Vec<(&'static str, Figures)> {
    vec![
        (
            "floor_k1",
            repeat("floor_k1", runs, || floor_calls(setup, 0, 5000)),
        ),
        (
            "floor_chain_k1",
            repeat("floor_chain_k1", runs, || floor_calls(setup, 2, 5000)),
        ),
        (
            "floor_builtin_k1",
            repeat("floor_builtin_k1", runs, || floor_calls(setup, 1, 5000)),
        ),
        // Not a floor any ratio is taken against: the chain of floor_chain_k1 with a minimal Node process
        // answering in the host's place (what a Node host costs by itself, behind relays that cost nothing).
        (
            "floor_chain_node_k1",
            repeat("floor_chain_node_k1", runs, || {
                floor_node_calls(setup, 5000)
            }),
        ),
        // Not a floor any ratio is taken against: the chain of floor_chain_k1 with its first hop a Unix
        // socket, as the bridge → daemon hop is when the daemon hands over no pipes (and was until it did).
        (
            "floor_chain_socket_k1",
            repeat("floor_chain_socket_k1", runs, || {
                floor_calls_over(setup, &["--floor-relay-socket", "--floor-relay"], 5000)
            }),
        ),
        // Not a floor any ratio is taken against: the chain of floor_chain_k1 with the first relay in the
        // bridge's shape (`ovai mcp`: a thread for each direction, each in a blocking read on a pipe)
        // rather than one poll loop.
        (
            "floor_chain_threads_k1",
            repeat("floor_chain_threads_k1", runs, || {
                floor_calls_over(setup, &["--floor-relay-threads", "--floor-relay"], 5000)
            }),
        ),
    ]
}

/// Runs a case with no baseline `runs` times and keeps the median of each figure.
fn repeat(name: &'static str, runs: usize, mut case: impl FnMut() -> Figures) -> Figures {
    eprint!("{name}: ");
    let mut all = Vec::new();
    for _ in 0..runs {
        all.push(case());
        eprint!(".");
    }
    eprintln!();
    medians(&all)
}

/// The floor a case is held against: the chain of minimal processes with its process count.
fn floor_of<'a>(case: &str, floors: &'a [(&'static str, Figures)]) -> Option<&'a Figures> {
    let floor = match case {
        "k1" => "floor_chain_k1",
        "builtin_k1" => "floor_builtin_k1",
        "k32" => "floor_chain_k32",
        "sessions16" => "floor_sessions16",
        _ => return None,
    };
    floors.iter().find(|(n, _)| *n == floor).map(|(_, f)| f)
}

fn print_floors(cases: &[(&'static str, Figures, Figures)], floors: &[(&'static str, Figures)]) {
    println!(
        "\nthe floor: minimal Rust processes (std and one poll loop) with ovai's process counts\n\
         (floor_chain_node_k1: the chain with a minimal Node process answering in the host's place;\n\
         floor_chain_socket_k1: with a Unix socket for the first hop, as the bridge's fallback;\n\
         floor_chain_threads_k1: floor_chain_k1 with the first relay a thread each way, as ovai's bridge)\n"
    );
    for (name, f) in floors {
        println!(
            "{:<22} p50_us {:>8.1}   p99_us {:>8.1}   calls_per_s {:>9.0}",
            name,
            f.get("p50_us").copied().unwrap_or(0.0),
            f.get("p99_us").copied().unwrap_or(0.0),
            f.get("calls_per_s").copied().unwrap_or(0.0)
        );
    }
    println!();
    for (name, o, b) in cases {
        let per_s = |f: Option<&Figures>| f.and_then(|f| f.get("calls_per_s").copied());
        if let ("k32" | "sessions16", Some(v), Some(f), Some(bv)) = (
            *name,
            o.get("calls_per_s"),
            per_s(floor_of(name, floors)),
            b.get("calls_per_s"),
        ) {
            println!(
                "{name}: {v:.0} calls/s = {:.2} × its floor ({f:.0} calls/s), {:.2} × the baseline \
                 ({bv:.0} calls/s); the floor is {:.2} × the baseline",
                v / f,
                v / bv,
                f / bv
            );
            continue;
        }
        let p50 = |f: Option<&Figures>| f.and_then(|f| f.get("p50_us").copied());
        let (Some(v), Some(f), Some(bv)) = (
            o.get("p50_us"),
            p50(floor_of(name, floors)),
            b.get("p50_us"),
        ) else {
            continue;
        };
        println!(
            "{name}: p50 {v:.1} µs = {:.2} × its floor ({f:.1} µs), {:.2} × the baseline ({bv:.1} µs)",
            v / f,
            v / bv
        );
    }
}

/// Runs a case `runs` times, ovai and baseline alternating, and keeps the median of each figure.
fn alternate(
    name: &'static str,
    runs: usize,
    mut ovai: impl FnMut() -> Figures,
    mut baseline: impl FnMut() -> Figures,
) -> Case {
    eprint!("{name}: ");
    let mut o = Vec::new();
    let mut b = Vec::new();
    for _ in 0..runs {
        o.push(ovai());
        b.push(baseline());
        eprint!(".");
    }
    eprintln!();
    (name, medians(&o), medians(&b))
}

fn medians(runs: &[Figures]) -> Figures {
    let mut out = Figures::new();
    if let Some(first) = runs.first() {
        for k in first.keys() {
            let mut v: Vec<f64> = runs.iter().filter_map(|r| r.get(k).copied()).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            out.insert(k, v[v.len() / 2]);
        }
    }
    out
}

fn figures_json(f: &Figures) -> Value {
    Value::Object(
        f.iter()
            .map(|(k, v)| (k.to_string(), json!(round(*v, 1))))
            .collect(),
    )
}

fn round(v: f64, places: i32) -> f64 {
    let p = 10f64.powi(places);
    (v * p).round() / p
}

// ---------------------------------------------------------------------------------------------------
// Instances and servers

/// A temporary openovai instance with `n` echo plugins (p0000…), a seat, and the baseline's view of it.
struct Instance {
    root: PathBuf,
    secret: String,
}

impl Instance {
    fn ovai(&self) -> ovai::instance::Instance {
        ovai::instance::Instance::at(self.root.clone())
    }
}

impl Instance {
    fn new(setup: &Setup, name: &str, n: usize) -> Self {
        let root = setup.work.join(name);
        let _ = std::fs::remove_dir_all(&root);
        run_ok(
            Command::new(&setup.ovai)
                .args(["init", "--user", "bench", "--leader", "bench"])
                .arg(&root),
        );
        for i in 0..n {
            std::fs::write(root.join("plugins").join(format!("p{i:04}.mjs")), ECHO)
                .expect("a plugin file");
        }
        let secret = ovai::desk::secret_in(&root.join("desks/bench")).expect("the desk's secret");
        Self { root, secret }
    }
}

impl Instance {
    /// Adds an HTTP endpoint on a free loopback port to openovai.json.
    fn listen_http(&self) {
        let path = self.root.join("openovai.json");
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("openovai.json"))
                .expect("openovai.json parses");
        config["http"] = json!({ "listen": "127.0.0.1:0" });
        std::fs::write(&path, config.to_string()).expect("openovai.json is written");
    }
}

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `ovai serve`, stopped when dropped.
struct Daemon {
    child: Child,
}

impl Daemon {
    /// Starts the daemon and waits for READY=1 on a notify socket; returns it and the time that took.
    fn start(setup: &Setup, inst: &Instance) -> (Self, Duration) {
        Self::start_with_env(setup, inst, &[])
    }

    fn start_with_env(
        setup: &Setup,
        inst: &Instance,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> (Self, Duration) {
        let sock_path = inst
            .root
            .join(".ovai")
            .join(format!("bench-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&sock_path);
        let sock = UnixDatagram::bind(&sock_path).expect("a notify socket");
        sock.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let started = Instant::now();
        let child = Command::new(&setup.ovai)
            .args(["serve", "--root"])
            .arg(&inst.root)
            .env("NOTIFY_SOCKET", &sock_path)
            .env("OVAI_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ovai serve starts");
        let mut buf = [0u8; 512];
        loop {
            let n = sock.recv(&mut buf).expect("READY=1 arrives");
            if String::from_utf8_lossy(&buf[..n])
                .lines()
                .any(|l| l == "READY=1")
            {
                break;
            }
        }
        let took = started.elapsed();
        let _ = std::fs::remove_file(&sock_path);
        (Self { child }, took)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        kill(self.child.id(), Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

fn kill(pid: u32, signal: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
}

fn status(setup: &Setup, inst: &Instance) -> Value {
    let out = Command::new(&setup.ovai)
        .args(["status", "--json", "--root"])
        .arg(&inst.root)
        .output()
        .expect("status");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// A client of one MCP server: ovai's own MCP client over a stdio server's pipes (or the daemon's socket).
struct Client {
    /// The server process, for a stdio server (none for a direct socket connection).
    child: Option<Child>,
    mcp: McpClient<BufReader<Box<dyn Read + Send>>, Box<dyn Write + Send>>,
    /// How its calls are written.
    shape: Shape,
}

/// How a client writes its calls: as Claude Code 2.1.328 does (2026-07-28, `_meta` on every call, the id
/// last), as the TypeScript SDK's `callTool` with `onprogress` does (2025-11-25, a progress token), or
/// bare (no `_meta`, the id first: what no client sends, kept beside them for comparison).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    ClaudeCode,
    TsSdk,
    Bare,
}

const CLAUDE_CODE_LINES: &str = include_str!("bench/lines/claude-code-2.1.328.jsonl");
const TS_SDK_LINES: &str = include_str!("bench/lines/ts-sdk-1.32.2.jsonl");

/// A call line of a fixture, cut where what changes from call to call goes: the tool, its arguments, the
/// tool-use id (Claude Code's), the progress token and the id.
struct Template {
    pieces: Vec<(String, Slot)>,
    end: String,
}

#[derive(Clone, Copy)]
enum Slot {
    Tool,
    Arguments,
    ToolUse,
    Id,
}

impl Template {
    fn of(shape: Shape) -> Self {
        let fixture = match shape {
            Shape::ClaudeCode => CLAUDE_CODE_LINES,
            Shape::TsSdk => TS_SDK_LINES,
            Shape::Bare => {
                r#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"","arguments":{}}}"#
            }
        };
        let call = fixture
            .lines()
            .find(|l| l.contains(r#""method":"tools/call""#))
            .expect("a call in the fixture");
        let mut v: Value = serde_json::from_str(call).expect("a fixture line");
        v["id"] = json!("\u{1}I");
        v["params"]["name"] = json!("\u{1}T");
        v["params"]["arguments"] = json!("\u{1}A");
        if let Some(meta) = v["params"].get_mut("_meta") {
            if meta.get("claudecode/toolUseId").is_some() {
                meta["claudecode/toolUseId"] = json!("\u{1}U");
            }
            if meta.get("progressToken").is_some() {
                meta["progressToken"] = json!("\u{1}I");
            }
        }
        let text = v.to_string();
        let mut pieces = Vec::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("\"\\u0001") {
            let slot = match &rest[at + 7..at + 8] {
                "T" => Slot::Tool,
                "A" => Slot::Arguments,
                "U" => Slot::ToolUse,
                _ => Slot::Id,
            };
            pieces.push((rest[..at].to_string(), slot));
            rest = &rest[at + 9..];
        }
        Self {
            pieces,
            end: format!("{rest}\n"),
        }
    }

    /// The call line with `id`, to `tool`, with `arguments` (JSON text).
    fn write(&self, out: &mut Vec<u8>, id: u64, tool: &str, arguments: &str) {
        for (text, slot) in &self.pieces {
            out.extend_from_slice(text.as_bytes());
            match slot {
                Slot::Tool => {
                    out.push(b'"');
                    out.extend_from_slice(tool.as_bytes());
                    out.push(b'"');
                }
                Slot::Arguments => out.extend_from_slice(arguments.as_bytes()),
                Slot::ToolUse => {
                    let _ = write!(out, "\"toolu_{id}\"");
                }
                Slot::Id => {
                    let _ = write!(out, "{id}");
                }
            }
        }
        out.extend_from_slice(self.end.as_bytes());
    }
}

impl Client {
    fn ovai(setup: &Setup, inst: &Instance) -> Self {
        let mut cmd = Command::new(&setup.ovai);
        cmd.arg("mcp")
            .env("OVAI_ROOT", &inst.root)
            .env("OVAI_SECRET", &inst.secret);
        Self::spawn(cmd)
    }

    fn baseline(setup: &Setup, inst: &Instance) -> Self {
        let mut cmd = Command::new(&setup.node);
        cmd.arg(&setup.baseline).env("BASELINE_ROOT", &inst.root);
        Self::spawn(cmd)
    }

    /// Straight onto the daemon's socket, without `ovai mcp`: what the bridge's hop costs, by difference.
    fn direct(inst: &Instance) -> Self {
        let ovai = inst.ovai();
        let mut sock = client::connect(&ovai).expect("the socket");
        client::hello_seat(&ovai, &mut sock, &inst.secret, Duration::from_secs(60))
            .expect("a welcome");
        let reader: Box<dyn Read + Send> = Box::new(sock.try_clone().unwrap());
        Self {
            child: None,
            mcp: McpClient::new(BufReader::with_capacity(1 << 16, reader), Box::new(sock)),
            shape: Shape::Bare,
        }
    }

    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("a server");
        let stdin: Box<dyn Write + Send> = Box::new(child.stdin.take().unwrap());
        let stdout: Box<dyn Read + Send> = Box::new(child.stdout.take().unwrap());
        Self {
            child: Some(child),
            mcp: McpClient::new(BufReader::with_capacity(1 << 16, stdout), stdin),
            shape: Shape::Bare,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn kill(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.mcp
            .send_request(method, params)
            .expect("the server takes input")
    }

    /// The next response: (id, whether it is a failure). None when the server closed.
    fn recv(&mut self) -> Option<(u64, bool)> {
        loop {
            let v = self.mcp.next_message().ok()?;
            let Some(id) = v.get("id").and_then(Value::as_u64) else {
                continue;
            };
            let failed = v.get("error").is_some() || v["result"]["isError"] == json!(true);
            return Some((id, failed));
        }
    }

    fn request(&mut self, method: &str, params: Value) -> bool {
        let id = self.send(method, params);
        loop {
            match self.recv() {
                Some((got, failed)) if got == id => return !failed,
                Some(_) => continue,
                None => return false,
            }
        }
    }

    fn initialize(&mut self) {
        self.mcp
            .initialize("bench")
            .expect("initialize is answered");
    }

    /// Opens the session as a client of `shape` does, and writes its calls so from then on. Claude Code
    /// opens ovai's sessions at 2026-07-28 with its own lines (no `initialize`; its `subscriptions/listen`
    /// stays open); a server that speaks no 2026-07-28 (the baseline) is initialised as the TypeScript SDK
    /// does, and then sent the same calls.
    fn open(&mut self, shape: Shape, speaks_2026: bool) {
        self.shape = shape;
        if shape != Shape::ClaudeCode || !speaks_2026 {
            self.initialize();
            return;
        }
        let (reader, writer, _) = self.mcp.raw();
        let opening: Vec<&str> = CLAUDE_CODE_LINES
            .lines()
            .filter(|l| !l.contains(r#""method":"tools/call""#))
            .collect();
        for line in &opening {
            writer
                .write_all(line.as_bytes())
                .expect("the server takes input");
            writer.write_all(b"\n").expect("the server takes input");
        }
        writer.flush().expect("the server takes input");
        // Every opening request is answered but the listen, which stays open.
        let mut answered = 0;
        let mut line = Vec::new();
        while answered < opening.len() - 1 {
            line.clear();
            if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                panic!("the server closed as the session opened");
            }
            if reply_of(&line).is_some() || line.windows(7).any(|w| w == b"\"id\":\"s") {
                answered += 1;
            }
        }
    }

    /// `total` calls with `k` in flight; returns each call's latency and the wall time, and the failures.
    ///
    /// The driver shares the machine with the server it measures, and ovai's three processes use both
    /// vCPUs where the baseline's one leaves the second to the driver: every microsecond the driver spends
    /// is taken from ovai alone. So it writes each request from a template (one write each, as a client
    /// sends each message) and reads each answer only as far as its id and whether it failed, building
    /// no JSON tree (it cost 5.5 µs a call at K=32, about a fifth of all the CPU a call took).
    fn calls(&mut self, tool: &str, total: usize, k: usize) -> (Vec<Duration>, Duration, usize) {
        let (reader, writer, next_id) = self.mcp.raw();
        let mut sent_at: HashMap<u64, Instant> = HashMap::with_capacity(k * 2);
        let mut latencies = Vec::with_capacity(total);
        let mut failed = 0;
        let mut sent = 0;
        let mut request: Vec<u8> = Vec::with_capacity(1024);
        let mut answer: Vec<u8> = Vec::with_capacity(4096);
        let template = Template::of(self.shape);
        let mut arguments = String::new();
        let started = Instant::now();
        while latencies.len() < total {
            while sent < total && sent_at.len() < k {
                let id = *next_id;
                *next_id += 1;
                request.clear();
                arguments.clear();
                // The built-in index takes no arguments; the echo plugins take a number.
                if tool == "index" {
                    arguments.push_str("{}");
                } else {
                    let _ = std::fmt::Write::write_fmt(
                        &mut arguments,
                        format_args!("{{\"i\":{sent}}}"),
                    );
                }
                template.write(&mut request, id, tool, &arguments);
                writer
                    .write_all(&request)
                    .and_then(|()| writer.flush())
                    .expect("the server takes input");
                sent_at.insert(id, Instant::now());
                sent += 1;
            }
            answer.clear();
            match reader.read_until(b'\n', &mut answer) {
                Ok(0) | Err(_) => panic!("the server closed during calls"),
                Ok(_) => {}
            }
            let Some((id, bad)) = reply_of(&answer) else {
                continue;
            };
            if let Some(t) = sent_at.remove(&id) {
                latencies.push(t.elapsed());
                failed += usize::from(bad);
            }
        }
        (latencies, started.elapsed(), failed)
    }
}

/// The id of a response line and whether it is a failure (a JSON-RPC error or a result with `isError`);
/// None for anything else (a notification). Its result is passed over as raw text, never built.
fn reply_of(line: &[u8]) -> Option<(u64, bool)> {
    #[derive(serde::Deserialize)]
    struct Reply<'a> {
        #[serde(default)]
        id: Option<u64>,
        #[serde(default, borrow)]
        result: Option<&'a serde_json::value::RawValue>,
        #[serde(default)]
        error: Option<serde::de::IgnoredAny>,
    }
    let reply: Reply<'_> = serde_json::from_slice(line).ok()?;
    let id = reply.id?;
    // In a result's raw text a quote inside a string is escaped, so this key and value can only be the
    // result's own (content blocks carry no isError).
    let is_error = reply
        .result
        .is_some_and(|r| r.get().contains("\"isError\":true"));
    (reply.result.is_some() || reply.error.is_some())
        .then_some((id, reply.error.is_some() || is_error))
}

impl Drop for Client {
    fn drop(&mut self) {
        self.kill();
    }
}

fn latency_figures(mut lat: Vec<Duration>, wall: Duration, failed: usize) -> Figures {
    lat.sort();
    let pick =
        |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6;
    let mut f = Figures::new();
    f.insert("p50_us", pick(0.50));
    f.insert("p99_us", pick(0.99));
    f.insert("calls_per_s", lat.len() as f64 / wall.as_secs_f64());
    f.insert("failed_calls", failed as f64);
    f
}

// ---------------------------------------------------------------------------------------------------
// Cases

fn ovai_calls(setup: &Setup, inst: &Instance, n: usize, k: usize, tool: &str) -> Figures {
    ovai_calls_shaped(setup, inst, n, k, tool, Shape::ClaudeCode)
}

fn ovai_calls_shaped(
    setup: &Setup,
    inst: &Instance,
    n: usize,
    k: usize,
    tool: &str,
    shape: Shape,
) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut c = Client::ovai(setup, inst);
    c.open(shape, true);
    c.calls(tool, setup.warm_up(n), k);
    let (lat, wall, failed) = c.calls(tool, setup.calls(n), k);
    latency_figures(lat, wall, failed)
}

/// How cost grows: sessions (calls/s, p99, the daemon's CPU per call), plugins (start-up), and calls in
/// flight at a restart (the switch's time, and that none is lost). Medians of `runs`.
fn scaling(setup: &Setup, one: &Instance) {
    println!("sessions  calls_per_s  p99_us  daemon_cpu_us_per_call");
    for n in [1usize, 16, 64, 256] {
        let mut rows: Vec<Figures> = Vec::new();
        for _ in 0..setup.runs {
            let (d, _) = Daemon::start(setup, one);
            let mut clients = ovai_clients(setup, one, n);
            // Warmed as sessions16 is, every session calling at once as many times as it will be measured.
            let per = (setup.calls(64_000) / n).max(20);
            sessions(&mut clients, per, 4);
            let before = Used::of(d.pid()).cpu_us;
            let mut f = sessions(&mut clients, per, 4);
            let calls = (per * n) as f64;
            f.insert("cpu", (Used::of(d.pid()).cpu_us - before) / calls);
            rows.push(f);
        }
        let m = medians(&rows);
        println!(
            "{n:>8}  {:>11.0}  {:>6.0}  {:>22.1}",
            m["calls_per_s"], m["p99_us"], m["cpu"]
        );
    }
    println!("\nplugins  startup_ms");
    for n in [100usize, 1000, 5000] {
        let inst = Instance::new(setup, &format!("plugins{n}"), n);
        let rows: Vec<Figures> = (0..setup.runs.min(3))
            .map(|_| ovai_startup(setup, &inst))
            .collect();
        println!("{n:>7}  {:>10.0}", medians(&rows)["ms"]);
    }
    println!("\nin_flight  restart_ms  failed_calls");
    let inst = Instance::new(setup, "inflight", 1);
    std::fs::write(inst.root.join("plugins/slow.mjs"), SLOW).expect("a plugin file");
    for m in [0usize, 100, 1000] {
        let rows: Vec<Figures> = (0..setup.runs.min(3))
            .map(|_| restart_with_calls_in_flight(setup, &inst, m))
            .collect();
        let f = medians(&rows);
        println!("{m:>9}  {:>10.0}  {:>12.0}", f["ms"], f["failed_calls"]);
    }
}

/// A plugin that answers after 500 ms: calls to it are still in flight when the restart is asked for.
const SLOW: &str = r#"export const description = "Answers after half a second.";
export const inputSchema = { type: "object" };
export async function run() { await new Promise((r) => setTimeout(r, 500)); return { text: "slow" }; }
"#;

fn restart_with_calls_in_flight(setup: &Setup, inst: &Instance, m: usize) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    // A session holds at most 64 requests in flight: 50 each.
    let mut clients: Vec<(Client, Vec<u64>)> = (0..m.div_ceil(50))
        .map(|_| {
            let mut c = Client::ovai(setup, inst);
            c.initialize();
            (c, Vec::new())
        })
        .collect();
    for i in 0..m {
        let (c, ids) = &mut clients[i / 50];
        ids.push(c.send("tools/call", json!({ "name": "slow", "arguments": {} })));
    }
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    run_ok(
        Command::new(&setup.ovai)
            .args(["restart", "--root"])
            .arg(&inst.root),
    );
    let took = started.elapsed();
    let mut failed = 0;
    for (c, ids) in &mut clients {
        let mut left: std::collections::HashSet<u64> = ids.iter().copied().collect();
        while !left.is_empty() {
            match c.recv() {
                Some((id, bad)) => {
                    if left.remove(&id) {
                        failed += usize::from(bad);
                    }
                }
                None => {
                    failed += left.len();
                    break;
                }
            }
        }
    }
    let mut f = ms(took);
    f.insert("failed_calls", failed as f64);
    f
}

/// Over MCP's Streamable HTTP: ovai's endpoint against the SDK's own HTTP server.
fn http_cases(setup: &Setup, cases: &mut Vec<(&'static str, Figures, Figures)>) {
    let over_http = Instance::new(setup, "http", 1);
    over_http.listen_http();
    cases.push(alternate(
        "http_k1",
        setup.runs,
        || ovai_http_calls(setup, &over_http, 3000, 1),
        || baseline_http_calls(setup, &over_http, 3000, 1),
    ));
    cases.push(alternate(
        "http_k32",
        setup.runs,
        || ovai_http_calls(setup, &over_http, 20_000, 32),
        || baseline_http_calls(setup, &over_http, 20_000, 32),
    ));
}

fn ovai_http_calls(setup: &Setup, inst: &Instance, n: usize, k: usize) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let url = status(setup, inst)["http"]
        .as_str()
        .expect("the daemon listens for HTTP")
        .to_string();
    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("an address");
    let token = Some(inst.secret.as_str());
    let session = http::open_session(addr, token);
    http::calls(addr, token, &session, "p0000", setup.warm_up(n), k);
    let (lat, wall, failed) = http::calls(addr, token, &session, "p0000", setup.calls(n), k);
    latency_figures(lat, wall, failed)
}

fn baseline_http_calls(setup: &Setup, inst: &Instance, n: usize, k: usize) -> Figures {
    let mut child = Command::new(&setup.node)
        .arg(setup.baseline.with_file_name("http-server.mjs"))
        .env("BASELINE_ROOT", &inst.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the baseline HTTP server starts");
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut BufReader::new(child.stdout.take().expect("its stdout")),
        &mut port,
    )
    .expect("the baseline says its port");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port.trim().parse().expect("a port")));
    let session = http::open_session(addr, None);
    http::calls(addr, None, &session, "p0000", setup.warm_up(n), k);
    let (lat, wall, failed) = http::calls(addr, None, &session, "p0000", setup.calls(n), k);
    let _ = child.kill();
    let _ = child.wait();
    latency_figures(lat, wall, failed)
}

/// `pid` itself if it is Node, else the first Node process below it (the host inside its box).
fn node_in(pid: u32) -> u32 {
    let comm = |p: u32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        if comm(p).trim() == "node" {
            return p;
        }
        let children =
            std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
        todo.extend(
            children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    pid
}

/// What a process has used so far: CPU time (user + system, µs), read and write system calls, and the
/// times its threads went to sleep (each one a wake-up later: on a VM, the dearest part of a hand-off).
#[derive(Clone, Copy, Default)]
struct Used {
    cpu_us: f64,
    reads: f64,
    writes: f64,
    sleeps: f64,
}

impl Used {
    fn of(pid: u32) -> Self {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        // /proc/PID/io counts the whole process; a thread's sleeps are in its own status.
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        let field = |text: &str, name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        let sleeps = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|t| {
                let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
                field(&status, "voluntary_ctxt_switches:")
            })
            .sum();
        Self {
            cpu_us: ticks * 1e6 / 100.0,
            reads: field(&io, "syscr:"),
            writes: field(&io, "syscw:"),
            sleeps,
        }
    }

    /// Per call since `before`, as the --cpu lines print it.
    fn per_call(self, before: Self, n: usize) -> String {
        let n = n as f64;
        format!(
            "{:.1} µs ({:.2} reads, {:.2} writes, {:.2} sleeps)",
            (self.cpu_us - before.cpu_us) / n,
            (self.reads - before.reads) / n,
            (self.writes - before.writes) / n,
            (self.sleeps - before.sleeps) / n
        )
    }
}

/// Calls, and what each of ovai's processes used per call (printed), for `--cpu`.
fn cpu_per_call(
    setup: &Setup,
    inst: &Instance,
    d: &Daemon,
    c: &mut Client,
    tool: &str,
    n: usize,
    k: usize,
) -> Figures {
    // In a bubblewrap box the host's pid is the box's; the CPU is Node's, a few processes down.
    let host = node_in(status(setup, inst)["host"]["pid"].as_u64().unwrap_or(0) as u32);
    let pids = [("daemon", d.pid()), ("host", host), ("bridge", c.pid())];
    let (lat, wall, failed) = calls_counting_cpu(&format!("{tool} k={k}"), &pids, c, tool, n, k);
    latency_figures(lat, wall, failed)
}

/// `n` calls, and what each of `pids` (and this driver) used per call meanwhile, printed.
fn calls_counting_cpu(
    label: &str,
    pids: &[(&str, u32)],
    c: &mut Client,
    tool: &str,
    n: usize,
    k: usize,
) -> (Vec<Duration>, Duration, usize) {
    let me = std::process::id();
    let before: Vec<Used> = pids.iter().map(|(_, p)| Used::of(*p)).collect();
    let driver = Used::of(me);
    let out = c.calls(tool, n, k);
    let per: Vec<String> = pids
        .iter()
        .zip(before)
        .map(|((name, p), b)| format!("{name} {}", Used::of(*p).per_call(b, n)))
        .collect();
    eprintln!(
        "  {label}, per call: {}, driver {}",
        per.join(", "),
        Used::of(me).per_call(driver, n)
    );
    out
}

fn direct_calls(setup: &Setup, inst: &Instance, n: usize, k: usize, tool: &str) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut c = Client::direct(inst);
    c.initialize();
    c.calls(tool, setup.warm_up(n), k);
    let (lat, wall, failed) = c.calls(tool, setup.calls(n), k);
    latency_figures(lat, wall, failed)
}

fn baseline_calls(setup: &Setup, inst: &Instance, n: usize, k: usize) -> Figures {
    baseline_calls_shaped(setup, inst, n, k, Shape::ClaudeCode)
}

fn baseline_calls_shaped(
    setup: &Setup,
    inst: &Instance,
    n: usize,
    k: usize,
    shape: Shape,
) -> Figures {
    let mut c = Client::baseline(setup, inst);
    c.open(shape, false);
    c.calls("p0000", setup.warm_up(n), k);
    let (lat, wall, failed) = c.calls("p0000", setup.calls(n), k);
    latency_figures(lat, wall, failed)
}

/// `--load`: `n` sessions calling for `for_how_long`, `k` in flight each if given, in rounds, the figures
/// of each round printed.
fn load(setup: &Setup, inst: &Instance, n: usize, k: Option<usize>, for_how_long: Duration) {
    let (d, _) = Daemon::start(setup, inst);
    let mut clients = ovai_clients(setup, inst, n);
    let host = node_in(status(setup, inst)["host"]["pid"].as_u64().unwrap_or(0) as u32);
    let bridges: Vec<u32> = clients.iter().map(Client::pid).collect();
    let (k, per) = load_shape(n, k);
    eprintln!(
        "--load: {n} session(s), {k} in flight each; daemon {}, host {host}, bridges {bridges:?}, driver {}",
        d.pid(),
        std::process::id()
    );
    rounds(&mut clients, per, k, for_how_long);
}

/// `--load N --on-floor`: `load`'s rounds, through the floor's processes.
fn load_on_floor(n: usize, k: Option<usize>, for_how_long: Duration) {
    let (mut clients, mut hub) = floor_sessions(n, &[]);
    let (k, per) = load_shape(n, k);
    clients[0].calls("p0000", 1, 1);
    let relays: Vec<u32> = clients.iter().map(Client::pid).collect();
    eprintln!(
        "--load --on-floor: {n} session(s), {k} in flight each; hub {}, responder {}, relays {relays:?}, driver {}",
        hub.id(),
        child_of(hub.id()).unwrap_or(0),
        std::process::id()
    );
    rounds(&mut clients, per, k, for_how_long);
    drop(clients);
    let _ = hub.kill();
    let _ = hub.wait();
}

/// `--load`'s calls in flight a session and calls a session a round, for `n` sessions.
fn load_shape(n: usize, k: Option<usize>) -> (usize, usize) {
    match (k, n) {
        (Some(k), n) => (k, ((20_000 * k).min(100_000) / n).max(1)),
        (None, 1) => (32, 100_000),
        (None, n) => (4, 80_000 / n),
    }
}

/// Rounds of calls from every session at once until `for_how_long` has passed, each round's figures
/// printed.
fn rounds(clients: &mut [Client], per: usize, k: usize, for_how_long: Duration) {
    let until = Instant::now() + for_how_long;
    while Instant::now() < until {
        let f = sessions(clients, per, k);
        eprintln!(
            "  {:.0} calls/s, p50 {:.0} µs, p99 {:.0} µs",
            f["calls_per_s"], f["p50_us"], f["p99_us"]
        );
    }
}

fn sessions(clients: &mut [Client], per_session: usize, k: usize) -> Figures {
    let started = Instant::now();
    let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter_mut()
            .map(|c| {
                scope.spawn(move || {
                    let (lat, _, failed) = c.calls("p0000", per_session, k);
                    (lat, failed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a session thread"))
            .collect()
    });
    let wall = started.elapsed();
    let failed = results.iter().map(|r| r.1).sum();
    latency_figures(
        results.into_iter().flat_map(|r| r.0).collect(),
        wall,
        failed,
    )
}

fn ovai_sessions(setup: &Setup, inst: &Instance, n: usize, k: usize, per: usize) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut clients = ovai_clients(setup, inst, n);
    sessions_settled(&mut clients, setup.calls(per), k)
}

/// Calls from every session at once, `per` each: as many again first, to warm the server (each of the
/// baseline's sessions is a Node process of its own, which V8 warms by itself), then the `per` measured.
fn sessions_settled(clients: &mut [Client], per: usize, k: usize) -> Figures {
    sessions(clients, per, k);
    sessions(clients, per, k)
}

/// `n` sessions of `ovai mcp`, opened as Claude Code opens them.
fn ovai_clients(setup: &Setup, inst: &Instance, n: usize) -> Vec<Client> {
    (0..n)
        .map(|_| {
            let mut c = Client::ovai(setup, inst);
            c.open(Shape::ClaudeCode, true);
            c
        })
        .collect()
}

fn baseline_sessions(setup: &Setup, inst: &Instance, n: usize, k: usize, per: usize) -> Figures {
    let mut clients: Vec<Client> = (0..n)
        .map(|_| {
            let mut c = Client::baseline(setup, inst);
            c.open(Shape::ClaudeCode, false);
            c
        })
        .collect();
    sessions_settled(&mut clients, setup.calls(per), k)
}

/// `n` calls at K=1 through `relays` minimal relays in front of a minimal responder.
fn floor_calls(setup: &Setup, relays: usize, n: usize) -> Figures {
    floor_calls_over(setup, &vec!["--floor-relay"; relays], n)
}

/// The same through relays started as `relays` say (`--floor-relay`, `--floor-relay-socket` or
/// `--floor-relay-threads`), the first nearest the client.
fn floor_calls_over(setup: &Setup, relays: &[&str], n: usize) -> Figures {
    let mut c = floor_client_over(relays);
    c.calls("p0000", 200.min(n), 1);
    let (lat, wall, failed) = c.calls("p0000", setup.calls(n), 1);
    latency_figures(lat, wall, failed)
}

/// `n` calls with `k` in flight through relays started as `relays` say, warmed as ovai's are.
fn floor_calls_k(setup: &Setup, relays: &[&str], n: usize, k: usize) -> Figures {
    let mut c = floor_client_over(relays);
    c.calls("p0000", setup.warm_up(n), k);
    let (lat, wall, failed) = c.calls("p0000", setup.calls(n), k);
    latency_figures(lat, wall, failed)
}

/// sessions16's CPU per call by kind of process, ovai's (the daemon, the host, the `n` bridges together,
/// the driver) beside the baseline's (its `n` processes together): where the throughput with many
/// sessions goes.
fn sessions_cpu_per_call(
    setup: &Setup,
    inst: &Instance,
    d: &Daemon,
    n: usize,
    k: usize,
    per: usize,
) {
    let host = node_in(status(setup, inst)["host"]["pid"].as_u64().unwrap_or(0) as u32);
    let mut ovai = ovai_clients(setup, inst, n);
    let bridges: Vec<u32> = ovai.iter().map(Client::pid).collect();
    let groups = [
        ("daemon", vec![d.pid()]),
        ("host", vec![host]),
        ("bridges", bridges),
    ];
    sessions_counting_cpu(&format!("sessions{n} k={k}"), &groups, &mut ovai, per, k);
    drop(ovai);
    let mut baseline: Vec<Client> = (0..n)
        .map(|_| {
            let mut c = Client::baseline(setup, inst);
            c.initialize();
            c
        })
        .collect();
    let servers = [("baseline", baseline.iter().map(Client::pid).collect())];
    sessions_counting_cpu(
        &format!("baseline sessions{n} k={k}"),
        &servers,
        &mut baseline,
        per,
        k,
    );
    drop(baseline);
    let (mut floor, mut hub) = floor_sessions(n, &[]);
    // A call answered means the hub has started its responder.
    floor[0].calls("p0000", 1, 1);
    let responder = child_of(hub.id()).expect("the floor hub's responder");
    let groups = [
        ("hub", vec![hub.id()]),
        ("responder", vec![responder]),
        ("relays", floor.iter().map(Client::pid).collect()),
    ];
    sessions_counting_cpu(
        &format!("floor sessions{n} k={k}"),
        &groups,
        &mut floor,
        per,
        k,
    );
    drop(floor);
    let _ = hub.kill();
    let _ = hub.wait();
}

/// Calls from every session at once, warmed as `sessions_settled` warms them, and what each group of
/// processes (and this driver) used per call meanwhile, printed.
fn sessions_counting_cpu(
    label: &str,
    groups: &[(&str, Vec<u32>)],
    clients: &mut [Client],
    per: usize,
    k: usize,
) {
    let sum = |pids: &[u32]| {
        pids.iter()
            .map(|p| Used::of(*p))
            .fold(Used::default(), |a, b| Used {
                cpu_us: a.cpu_us + b.cpu_us,
                reads: a.reads + b.reads,
                writes: a.writes + b.writes,
                sleeps: a.sleeps + b.sleeps,
            })
    };
    sessions(clients, per, k);
    let me = std::process::id();
    let before: Vec<Used> = groups.iter().map(|(_, p)| sum(p)).collect();
    let driver = Used::of(me);
    let f = sessions(clients, per, k);
    let n = per * clients.len();
    let per_group: Vec<String> = groups
        .iter()
        .zip(before)
        .map(|((name, p), b)| format!("{name} {}", sum(p).per_call(b, n)))
        .collect();
    eprintln!(
        "  {label}, {:.0} calls/s, per call: {}, driver {}",
        f.get("calls_per_s").copied().unwrap_or(0.0),
        per_group.join(", "),
        Used::of(me).per_call(driver, n)
    );
}

/// What each process of the floor's chain uses per call at K=1, beside ovai's (`--cpu`): with the Rust
/// responder, and with the minimal Node one.
fn floor_cpu_per_call(setup: &Setup, n: usize) {
    for (label, mut c) in [
        ("floor chain k=1", floor_client(2)),
        ("floor chain, Node responder, k=1", floor_node_client(setup)),
    ] {
        c.calls("p0000", setup.warm_up(n), 1);
        let mut pids = vec![("relay", c.pid())];
        while let Some(next) = child_of(pids[pids.len() - 1].1) {
            pids.push((if pids.len() < 2 { "relay" } else { "responder" }, next));
        }
        let _ = calls_counting_cpu(label, &pids, &mut c, "p0000", n, 1);
    }
}

fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn floor_client(relays: usize) -> Client {
    floor_client_over(&vec!["--floor-relay"; relays])
}

/// A minimal Node process answering each request as the echo plugin would, in one `fs.writeSync`.
const FLOOR_NODE: &str = r#"import net from "node:net"; import fs from "node:fs";
new net.Socket({ fd: 0, readable: true, writable: false, onread: { buffer: Buffer.allocUnsafe(65536), callback(n, b) {
  let s = 0;
  for (;;) {
    const e = b.indexOf(10, s);
    if (e < 0 || e >= n) break;
    const m = JSON.parse(b.utf8Slice(s, e));
    s = e + 1;
    if (m.id === undefined) continue;
    const text = JSON.stringify(m.params?.arguments ?? {});
    fs.writeSync(1, `{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":{"content":[{"type":"text","text":${JSON.stringify(text)}}],"isError":false}}\n`);
  }
} } });
"#;

/// `n` calls at K=1 through two relays in front of a minimal Node responder, warmed as the baseline is.
fn floor_node_calls(setup: &Setup, n: usize) -> Figures {
    let mut c = floor_node_client(setup);
    c.calls("p0000", setup.warm_up(n), 1);
    let (lat, wall, failed) = c.calls("p0000", setup.calls(n), 1);
    latency_figures(lat, wall, failed)
}

/// The floor's chain with the minimal Node responder (FLOOR_NODE) at its end.
fn floor_node_client(setup: &Setup) -> Client {
    let script = setup.work.join("floor-node.mjs");
    std::fs::write(&script, FLOOR_NODE).expect("the Node responder's script");
    let me = std::env::current_exe().expect("the bench's own path");
    let mut cmd = Command::new(&me);
    cmd.arg("--floor-relay")
        .arg(&me)
        .arg("--floor-relay")
        .arg(&setup.node)
        .arg(&script);
    Client::spawn(cmd)
}

/// The floor's chain, each relay started as `relays` says (`--floor-relay`, `--floor-relay-socket` or
/// `--floor-relay-threads`).
fn floor_client_over(relays: &[&str]) -> Client {
    let me = std::env::current_exe().expect("the bench's own path");
    let mut cmd = Command::new(&me);
    for relay in relays {
        cmd.arg(relay).arg(&me);
    }
    cmd.arg("--floor-responder");
    // The first argument names what this process is; the rest is the chain behind it.
    let mut args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let first = args.remove(0);
    let mut cmd = Command::new(&me);
    cmd.arg(first).args(args);
    Client::spawn(cmd)
}

/// `n` sessions, each through a relay in the bridge's shape, into one hub in the daemon's (one poll loop
/// over every session's pipes) in front of one minimal responder: sessions16's process shape with
/// nothing of ovai's in it. The hub is kept alive by the clients' relays; it ends when they do.
fn floor_sessions(n: usize, responder: &[&std::ffi::OsStr]) -> (Vec<Client>, Child) {
    use std::os::fd::{AsRawFd, OwnedFd};
    let me = std::env::current_exe().expect("the bench's own path");
    // Per session: (the relay's write end, the hub's read end), (the hub's write end, the relay's read end).
    let pipes: Vec<((OwnedFd, OwnedFd), (OwnedFd, OwnedFd))> = (0..n)
        .map(|_| {
            let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
            let (up_r, up_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
            let (down_r, down_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
            ((up_w, up_r), (down_w, down_r))
        })
        .collect();
    let hub_fds: Vec<i32> = pipes
        .iter()
        .flat_map(|((_, up_r), (down_w, _))| [up_r.as_raw_fd(), down_w.as_raw_fd()])
        .collect();
    let mut hub = Command::new(&me);
    hub.arg("--floor-hub")
        .args(hub_fds.iter().map(i32::to_string));
    if !responder.is_empty() {
        hub.arg("--").args(responder);
    }
    hub.stdin(Stdio::null()).stdout(Stdio::null());
    kept_open_across_exec(&mut hub, hub_fds);
    let hub = hub.spawn().expect("the hub");
    let clients = pipes
        .into_iter()
        .map(|((up_w, up_r), (down_w, down_r))| {
            drop((up_r, down_w));
            let fds = vec![up_w.as_raw_fd(), down_r.as_raw_fd()];
            let mut cmd = Command::new(&me);
            cmd.arg("--floor-relay-fds")
                .args(fds.iter().map(i32::to_string));
            kept_open_across_exec(&mut cmd, fds);
            let c = Client::spawn(cmd);
            drop((up_w, down_r));
            c
        })
        .collect();
    (clients, hub)
}

/// `fds`, opened close-on-exec, are kept open in the process `cmd` starts (which is told their numbers).
fn kept_open_across_exec(cmd: &mut Command, fds: Vec<i32>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only fcntl, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::fcntl(*fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// sessions16 with the floor's processes: `n` sessions, `k` in flight each, warmed as ovai's are.
fn floor_sessions_calls(setup: &Setup, n: usize, k: usize, per: usize, node: bool) -> Figures {
    let script = setup.work.join("floor-node.mjs");
    let responder: Vec<&std::ffi::OsStr> = if node {
        std::fs::write(&script, FLOOR_NODE).expect("the Node responder's script");
        vec![setup.node.as_os_str(), script.as_os_str()]
    } else {
        Vec::new()
    };
    let (mut clients, mut hub) = floor_sessions(n, &responder);
    let f = sessions_settled(&mut clients, setup.calls(per), k);
    drop(clients);
    let _ = hub.kill();
    let _ = hub.wait();
    f
}

/// One session calling at an agent's pace: a call, then a pause drawn from 0.2 to 2 s (the same pauses
/// each run), as Claude Code writes its calls; ovai's, or the baseline's fed the same lines.
fn paced_calls(setup: &Setup, inst: &Instance, ovai: bool) -> Figures {
    let _d = ovai.then(|| Daemon::start(setup, inst));
    let mut c = if ovai {
        Client::ovai(setup, inst)
    } else {
        Client::baseline(setup, inst)
    };
    c.open(Shape::ClaudeCode, ovai);
    c.calls("p0000", setup.warm_up(5000), 1);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut lat = Vec::new();
    let started = Instant::now();
    for _ in 0..setup.calls(50).min(50) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(200 + seed % 1800));
        let (one, _, failed) = c.calls("p0000", 1, 1);
        assert_eq!(failed, 0, "a paced call failed");
        lat.extend(one);
    }
    latency_figures(lat, started.elapsed(), 0)
}

/// Wake-ups a second of each process of an idle instance, over `for_how_long`: its context switches
/// (voluntary and not, every thread's), with no session, then with one session opened as Claude Code
/// opens it and left waiting on its `subscriptions/listen`.
fn idle(setup: &Setup, inst: &Instance, for_how_long: Duration) {
    let (d, _) = Daemon::start(setup, inst);
    let host = node_in(status(setup, inst)["host"]["pid"].as_u64().unwrap_or(0) as u32);
    // Node's own threads settle first: V8 collects and compiles in the background for some seconds
    // after a start (about 70 wake-ups between 5 and 10 s after it, then none).
    std::thread::sleep(Duration::from_secs(15));
    let count = |pid: u32| -> u64 {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| {
                        l.strip_prefix("voluntary_ctxt_switches:")
                            .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
                            .and_then(|n| n.trim().parse::<u64>().ok())
                    })
                    .collect::<Vec<_>>()
            })
            .sum()
    };
    let measure = |what: &str| {
        let (d0, h0) = (count(d.pid()), count(host));
        std::thread::sleep(for_how_long);
        let (d1, h1) = (count(d.pid()), count(host));
        let secs = for_how_long.as_secs_f64();
        let (dw, hw) = ((d1 - d0) as f64 / secs, (h1 - h0) as f64 / secs);
        println!(
            "idle, {what}: daemon {dw:.2} wake-ups/s, plugin host {hw:.2}/s, together {:.2}/s (over {secs:.0} s)",
            dw + hw
        );
    };
    measure("no session");
    let mut c = Client::ovai(setup, inst);
    c.open(Shape::ClaudeCode, true);
    measure("one session as Claude Code leaves it (its listen stream open)");
}

/// From spawning `ovai mcp` to `tools/list` answered: what a session's start costs.
fn ovai_attach(setup: &Setup, inst: &Instance) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut all = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let mut c = Client::ovai(setup, inst);
        // Claude Code's opening ends with its tools/list.
        c.open(Shape::ClaudeCode, true);
        all.push(ms(started.elapsed()));
    }
    medians(&all)
}

fn baseline_attach(setup: &Setup, inst: &Instance) -> Figures {
    let mut all = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let mut c = Client::baseline(setup, inst);
        c.initialize();
        assert!(c.request("tools/list", json!({})));
        all.push(ms(started.elapsed()));
    }
    medians(&all)
}

fn ms(f: Duration) -> Figures {
    let mut out = Figures::new();
    out.insert("ms", f.as_secs_f64() * 1e3);
    out
}

fn ovai_startup(setup: &Setup, inst: &Instance) -> Figures {
    let (_d, took) = Daemon::start(setup, inst);
    ms(took)
}

fn baseline_startup(setup: &Setup, inst: &Instance) -> Figures {
    let started = Instant::now();
    let mut c = Client::baseline(setup, inst);
    c.initialize();
    ms(started.elapsed())
}

fn ovai_recovery(setup: &Setup, inst: &Instance) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut c = Client::ovai(setup, inst);
    c.initialize();
    c.calls("p0000", 50, 1);
    let host = status(setup, inst)["host"]["pid"]
        .as_u64()
        .expect("a host pid") as i32;
    let respawns = |s: &Value| s["host"]["respawns"].as_u64().unwrap_or(0);
    let before = respawns(&status(setup, inst));
    let killed = Instant::now();
    kill(host as u32, Signal::SIGKILL);
    // In a box the pid is the box's, and Node ends a moment after it: a call the old Node still answered
    // is not a recovery. The time is that of the first answer after which the daemon had started a new host.
    loop {
        if c.request("tools/call", json!({ "name": "p0000", "arguments": {} })) {
            let answered = killed.elapsed();
            if respawns(&status(setup, inst)) > before {
                return ms(answered);
            }
        }
    }
}

fn baseline_recovery(setup: &Setup, inst: &Instance) -> Figures {
    // A single-process server that dies is gone: recovering is a new process, initialized, answering.
    let mut c = Client::baseline(setup, inst);
    c.initialize();
    c.calls("p0000", 50, 1);
    let killed = Instant::now();
    drop(c);
    let mut c = Client::baseline(setup, inst);
    c.initialize();
    assert!(c.request("tools/call", json!({ "name": "p0000", "arguments": {} })));
    ms(killed.elapsed())
}

/// One session calls at K=1 throughout; returns (time from the restart's start to the first call
/// answered by the new generation or process, calls that failed).
fn ovai_restart(setup: &Setup, inst: &Instance) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut c = Client::ovai(setup, inst);
    c.initialize();
    c.calls("p0000", 100, 1);
    let before = status(setup, inst)["generation"].as_u64();
    let started = Instant::now();
    let mut restart = Command::new(&setup.ovai)
        .args(["restart", "--root"])
        .arg(&inst.root)
        .stdout(Stdio::null())
        .spawn()
        .expect("restart");
    let mut failed = 0;
    let mut switched = None;
    loop {
        failed +=
            usize::from(!c.request("tools/call", json!({ "name": "p0000", "arguments": {} })));
        if switched.is_none() && restart.try_wait().ok().flatten().is_some() {
            switched = Some(started.elapsed());
        }
        if switched.is_some() {
            break;
        }
    }
    // Calls go on across the old generation's retirement.
    let (_, _, after) = c.calls("p0000", 200, 4);
    assert_ne!(status(setup, inst)["generation"].as_u64(), before);
    let mut f = ms(switched.unwrap_or_default());
    f.insert("failed_calls", (failed + after) as f64);
    f
}

fn baseline_restart(setup: &Setup, inst: &Instance) -> Figures {
    let mut c = Client::baseline(setup, inst);
    c.initialize();
    c.calls("p0000", 100, 1);
    // A restart of a stdio server: the call in flight dies with the process.
    let id = c.send("tools/call", json!({ "name": "p0000", "arguments": {} }));
    let started = Instant::now();
    c.kill();
    let lost = match c.recv() {
        Some((got, false)) if got == id => 0,
        _ => 1,
    };
    drop(c);
    let mut c = Client::baseline(setup, inst);
    c.initialize();
    assert!(c.request("tools/call", json!({ "name": "p0000", "arguments": {} })));
    let mut f = ms(started.elapsed());
    f.insert("failed_calls", lost as f64);
    f
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn ovai_rss(setup: &Setup, inst: &Instance) -> Figures {
    let (d, _) = Daemon::start(setup, inst);
    let mut clients: Vec<Client> = (0..64)
        .map(|_| {
            let mut c = Client::ovai(setup, inst);
            c.initialize();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let idle = rss_mb(d.pid());
    clients[0].calls("p0000", setup.calls(100_000), 32);
    std::thread::sleep(Duration::from_millis(300));
    let mut f = Figures::new();
    f.insert("rss_mb", idle);
    f.insert("rss_after_mb", rss_mb(d.pid()));
    f
}

fn baseline_rss(setup: &Setup, inst: &Instance) -> Figures {
    // 64 sessions of a stdio server are 64 server processes: their resident memory together.
    let mut clients: Vec<Client> = (0..64)
        .map(|_| {
            let mut c = Client::baseline(setup, inst);
            c.initialize();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let total = |cs: &[Client]| cs.iter().map(|c| rss_mb(c.pid())).sum::<f64>();
    let idle = total(&clients);
    clients[0].calls("p0000", setup.calls(100_000), 32);
    std::thread::sleep(Duration::from_millis(300));
    let mut f = Figures::new();
    f.insert("rss_mb", idle);
    f.insert("rss_after_mb", total(&clients));
    f
}

// ---------------------------------------------------------------------------------------------------
// Report

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut kernel = String::new();
    if let Ok(mut f) = std::fs::File::open("/proc/sys/kernel/osrelease") {
        let _ = f.read_to_string(&mut kernel);
    }
    let node = Command::new("node")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!(
        "{cpu}, {cores} cores, Linux {}, Node {node}{}",
        kernel.trim(),
        halt_poll()
    )
}

/// A guest whose idle vCPUs halt at once makes every wake-up of a process on the other vCPU pay for
/// waking it (tens of µs), and that is most of every K=1 figure, the floor's too: said beside the machine.
fn halt_poll() -> String {
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver");
    if driver.map_or(true, |d| d.trim() != "haltpoll") {
        return String::new();
    }
    match std::fs::read_to_string("/sys/module/haltpoll/parameters/guest_halt_poll_ns") {
        Ok(ns) if ns.trim() == "0" => {
            "; idle vCPUs halt at once (haltpoll guest_halt_poll_ns 0), so each wake-up across vCPUs pays for waking one".into()
        }
        Ok(ns) => format!(
            "; idle vCPUs poll up to {} µs before they halt",
            ns.trim().parse::<u64>().unwrap_or(0) / 1000
        ),
        Err(_) => String::new(),
    }
}

fn date() -> String {
    Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn print_table(machine: &str, cases: &[(&'static str, Figures, Figures)]) {
    println!(
        "\novai vs. a single-process TypeScript-SDK server ({machine}, {})",
        date()
    );
    println!(
        "medians; ratio = ovai / baseline (below 1 is better for time and memory, above 1 for calls/s)\n"
    );
    println!(
        "{:<13} {:<13} {:>12} {:>12} {:>8}",
        "case", "figure", "ovai", "baseline", "ratio"
    );
    for (name, o, b) in cases {
        for (k, v) in o {
            let bv = b.get(k).copied();
            let ratio = match bv {
                Some(bv) if bv != 0.0 => format!("{:.2}", v / bv),
                _ => "-".into(),
            };
            println!(
                "{:<13} {:<13} {:>12} {:>12} {:>8}",
                name,
                k,
                format!("{v:.1}"),
                bv.map_or("-".into(), |b| format!("{b:.1}")),
                ratio
            );
        }
    }
}

#[path = "bench/http.rs"]
mod http;

/// The floor's processes: what a chain of processes costs with no work of ovai's in it.
mod floor {
    use std::fs::File;
    use std::io::{BufRead, Read, Write};
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::process::{Command, Stdio};

    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

    /// Answers each request line with a canned tools/call result carrying its id.
    pub fn responder() {
        let stdin = std::io::stdin();
        let mut out = std::io::stdout().lock();
        let mut line = String::new();
        let mut input = stdin.lock();
        loop {
            line.clear();
            if input.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let Some(id) = id_of(&line) else { continue };
            let _ = writeln!(
                out,
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"ok\"}}],\"isError\":false}}}}"
            );
            let _ = out.flush();
        }
    }

    /// The id of a request line, as it stands in the JSON.
    fn id_of(line: &str) -> Option<&str> {
        let rest = &line[line.find("\"id\":")? + 5..];
        let end = rest.find([',', '}'])?;
        Some(rest[..end].trim())
    }

    /// Starts `chain` (the next process) and copies bytes both ways with `copy` (one poll loop, or a
    /// thread each way); over pipes, or over one Unix socket pair when `socket`.
    pub fn relay(chain: &[String], socket: bool, copy: fn(File, File)) {
        let mut cmd = Command::new(&chain[0]);
        cmd.args(&chain[1..]);
        let ours: Option<UnixStream> = if socket {
            let (ours, theirs) = UnixStream::pair().expect("a socket pair");
            let theirs: OwnedFd = theirs.into();
            let both = theirs.try_clone().expect("the socket's second descriptor");
            cmd.stdin(Stdio::from(theirs)).stdout(Stdio::from(both));
            Some(ours)
        } else {
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
            None
        };
        let mut child = cmd.spawn().expect("the next process in the chain");
        // Our copies of the child's ends close here, so the child's end is seen.
        drop(cmd);
        let ends: Option<(OwnedFd, OwnedFd)> = match ours {
            Some(ours) => ours.try_clone().ok().map(|to| (to.into(), ours.into())),
            None => child
                .stdin
                .take()
                .zip(child.stdout.take())
                .map(|(to, from)| (to.into(), from.into())),
        };
        if let Some((to_child, from_child)) = ends {
            copy(File::from(to_child), File::from(from_child));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// `ovai mcp`'s shape of relay: a thread for each direction, each sleeping in a blocking read.
    pub fn copy_on_threads(mut to_child: File, mut from_child: File) {
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin();
            let mut buf = vec![0u8; 64 * 1024];
            // At the end of the input the thread ends, and with it our end of the next process's input.
            while let Ok(n @ 1..) = stdin.read(&mut buf) {
                if to_child.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        let mut stdout = std::io::stdout();
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_child.read(&mut buf) {
            if stdout.write_all(&buf[..n]).is_err() || stdout.flush().is_err() {
                break;
            }
        }
    }

    /// `copy_on_threads` scheduled as `ovai mcp` is (`SCHED_BATCH`): the throughput floors' first relay is
    /// the bridge's shape, its scheduling included. Set once the next process is started, which keeps
    /// the ordinary policy, as the host does. (The relays and the hub in the daemon's place keep the
    /// ordinary policy, where the daemon runs batched: at K=1 and K=32 that was not told apart.)
    pub fn copy_on_threads_batched(to_child: File, from_child: File) {
        ovai::sched::schedule_as_batch();
        copy_on_threads(to_child, from_child);
    }

    /// `files`, which this process was handed open across exec, closed on exec again: whatever it starts
    /// holds none of them, so a peer sees their end when this process ends.
    fn close_on_exec<'a>(files: impl IntoIterator<Item = &'a File>) {
        for f in files {
            let _ = nix::fcntl::fcntl(
                f,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            );
        }
    }

    /// The bridge's shape of relay in front of the hub: a thread each way between its stdio and the two
    /// pipes whose descriptors `args` gives (to the hub, from it), as `ovai mcp` holds the daemon's pipes.
    pub fn relay_to_fds(args: &[String]) {
        let fds: Vec<i32> = args.iter().filter_map(|a| a.parse().ok()).collect();
        let [to, from] = fds[..] else {
            eprintln!("--floor-relay-fds takes two descriptors, to the hub and from it");
            return;
        };
        // SAFETY: the driver left these two descriptors open for this process alone.
        let (to_hub, from_hub) = unsafe { (File::from_raw_fd(to), File::from_raw_fd(from)) };
        close_on_exec([&to_hub, &from_hub]);
        copy_on_threads_batched(to_hub, from_hub);
    }

    /// The daemon's shape of relay for many sessions: one poll loop over every session's pipe (the pairs
    /// of fds in `args`: from the session's relay, to it) and one responder behind it, which answers in
    /// order, so each answer goes back to the session of the oldest line not yet answered. That holds while
    /// every line the sessions send is a request with an id, each answered once: the driver sends only
    /// `tools/call`s, and a line without one would send every later answer to the wrong session. What comes
    /// in together goes on in one write, as the daemon's writers batch.
    pub fn hub(args: &[String]) {
        // After `--`, the responder's command (a minimal Node process); otherwise this binary's own.
        let (fds, responder) = match args.iter().position(|a| a == "--") {
            Some(at) => (&args[..at], &args[at + 1..]),
            None => (args, &[][..]),
        };
        let fds: Vec<i32> = fds.iter().filter_map(|a| a.parse().ok()).collect();
        // SAFETY: the driver left these fds open for this process; closed on exec again, so the responder
        // holds none of them and a relay sees the hub's end when the hub ends.
        let sessions: Vec<(File, File)> = fds
            .chunks_exact(2)
            .map(|p| unsafe { (File::from_raw_fd(p[0]), File::from_raw_fd(p[1])) })
            .collect();
        close_on_exec(sessions.iter().flat_map(|(a, b)| [a, b]));
        let mut child = match responder.split_first() {
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest);
                cmd
            }
            None => {
                let mut cmd = Command::new(std::env::current_exe().expect("the bench's own path"));
                cmd.arg("--floor-responder");
                cmd
            }
        };
        let mut child = child
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the responder");
        if let (Some(to_resp), Some(from_resp)) = (child.stdin.take(), child.stdout.take()) {
            hub_loop(&sessions, to_resp, from_resp);
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The hub's poll loop, until a session or the responder ends.
    fn hub_loop(
        sessions: &[(File, File)],
        mut to_resp: std::process::ChildStdin,
        mut from_resp: std::process::ChildStdout,
    ) {
        let mut partial: Vec<Vec<u8>> = vec![Vec::new(); sessions.len()];
        let mut out: Vec<Vec<u8>> = vec![Vec::new(); sessions.len()];
        let mut answers_partial = Vec::new();
        let mut order = std::collections::VecDeque::new();
        let mut to_send = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let mut polled: Vec<PollFd> = sessions
                .iter()
                .map(|(from, _)| PollFd::new(from.as_fd(), PollFlags::POLLIN))
                .collect();
            polled.push(PollFd::new(from_resp.as_fd(), PollFlags::POLLIN));
            if poll(&mut polled, PollTimeout::NONE).is_err() {
                break;
            }
            let ready: Vec<bool> = polled
                .iter()
                .map(|f| {
                    // An error or a bad descriptor counts too: its read fails and the hub ends.
                    f.revents().is_some_and(|r| {
                        r.intersects(
                            PollFlags::POLLIN
                                | PollFlags::POLLHUP
                                | PollFlags::POLLERR
                                | PollFlags::POLLNVAL,
                        )
                    })
                })
                .collect();
            drop(polled);
            for (i, (from, _)) in sessions.iter().enumerate() {
                if !ready[i] {
                    continue;
                }
                let n = match (&*from).read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                partial[i].extend_from_slice(&buf[..n]);
                if let Some(end) = partial[i].iter().rposition(|b| *b == b'\n') {
                    let whole: Vec<u8> = partial[i].drain(..=end).collect();
                    order.extend(std::iter::repeat_n(
                        i,
                        whole.iter().filter(|b| **b == b'\n').count(),
                    ));
                    to_send.extend_from_slice(&whole);
                }
            }
            // Blocking writes hold up nothing here: at most sessions × calls in flight lines (a few KB) are
            // ever outstanding, well within a pipe's 64 KiB.
            if !to_send.is_empty() {
                if to_resp.write_all(&to_send).is_err() {
                    break;
                }
                to_send.clear();
            }
            if ready[sessions.len()] {
                let n = match from_resp.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                answers_partial.extend_from_slice(&buf[..n]);
                let mut start = 0;
                while let Some(len) = answers_partial[start..].iter().position(|b| *b == b'\n') {
                    let line = &answers_partial[start..=start + len];
                    if let Some(i) = order.pop_front() {
                        out[i].extend_from_slice(line);
                    }
                    start += len + 1;
                }
                answers_partial.drain(..start);
                for (i, (_, to)) in sessions.iter().enumerate() {
                    if !out[i].is_empty() {
                        let _ = (&*to).write_all(&out[i]);
                        out[i].clear();
                    }
                }
            }
        }
    }

    pub fn copy_both_ways(mut to_child: File, mut from_child: File) {
        let mut stdin = std::io::stdin();
        let mut stdout = std::io::stdout();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let mut fds = [
                PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
                PollFd::new(from_child.as_fd(), PollFlags::POLLIN),
            ];
            if poll(&mut fds, PollTimeout::NONE).is_err() {
                return;
            }
            let ready = |f: &PollFd| {
                f.revents()
                    .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP))
            };
            let (up, down) = (ready(&fds[0]), ready(&fds[1]));
            if up {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if to_child.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                }
            }
            if down {
                match from_child.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if stdout.write_all(&buf[..n]).is_err() || stdout.flush().is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// host.mjs with nothing of the daemon around it: a driver on its fds 3 and 4 (the protocol's init, one
/// load, then calls), beside a minimal Node process that answers the same lines. The difference is what
/// the host's own code costs; the rest of its cost in the chain is the chain's.
mod host_alone {
    use std::fs::File;
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};
    use std::time::Instant;

    use super::{ECHO, Used};

    /// Answers `load` as loaded and `call` as the echo plugin would, each read's answers in one write.
    const MINIMAL: &str = r#"import net from "node:net"; import fs from "node:fs";
fs.writeSync(4, '{"t":"ready","v":1}\n');
new net.Socket({ fd: 3, readable: true, writable: false, onread: { buffer: Buffer.allocUnsafe(65536), callback(n, b) {
  let s = 0; let out = "";
  for (;;) {
    const e = b.indexOf(10, s);
    if (e < 0 || e >= n) break;
    const m = JSON.parse(b.utf8Slice(s, e));
    s = e + 1;
    if (m.t === "load") out += `{"t":"loaded","id":${m.id},"key":${m.key},"ok":true}\n`;
    if (m.t !== "call") continue;
    const text = JSON.stringify(m.args ?? {});
    out += `{"t":"answer","id":${m.id},"key":${m.key},"text":${JSON.stringify(text)}}\n`;
  }
  if (out) fs.writeSync(4, out);
} } });
"#;

    struct Host {
        child: Child,
        /// The other end of the host's fd 5, open while it runs.
        _watch: UnixStream,
        to: File,
        from: BufReader<File>,
    }

    impl Host {
        fn start(node: &Path, script: &Path, plugins: &Path) -> Self {
            // Close-on-exec: Node gets fds 3, 4 and 5 only. Fd 5 is a socket, as the daemon gives it (the
            // host's watcher answers on it; left closed, Node's own first descriptor would land there).
            let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
            let (down_r, down_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
            let (up_r, up_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
            let (watch, theirs) = UnixStream::pair().expect("a socket pair");
            let (r, w, x) = (down_r.as_raw_fd(), up_w.as_raw_fd(), theirs.as_raw_fd());
            let mut cmd = Command::new(node);
            cmd.arg(script)
                .env("OVAI_HOST", ovai::host::protocol::PROTOCOL.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            // SAFETY: the daemon's own placement of fds 3, 4 and 5, which runs only fcntl and dup2
            // (async-signal-safe) between fork and exec.
            unsafe {
                cmd.pre_exec(move || ovai::host::child::put_on_fds(&[r, w, x]));
            }
            let child = cmd.spawn().expect("node starts");
            drop((down_r, up_w, theirs));
            let mut host = Self {
                child,
                _watch: watch,
                to: File::from(down_w),
                from: BufReader::with_capacity(1 << 16, File::from(up_r)),
            };
            let ready = host.line();
            assert!(ready.contains("\"ready\""), "the host said {ready}");
            let dir = plugins.display().to_string();
            let init = serde_json::json!({ "t": "init", "root": dir, "pluginsDir": dir, "config": {},
                "maxAnswerBytes": 1 << 20, "key": 7 });
            let load = serde_json::json!({ "t": "load", "id": 1, "name": "p0000",
                "file": plugins.join("p0000.mjs"), "key": 9 });
            host.to
                .write_all(format!("{init}\n{load}\n").as_bytes())
                .expect("the host reads");
            let loaded = host.line();
            assert!(loaded.contains("\"ok\":true"), "the host said {loaded}");
            host
        }

        fn line(&mut self) -> String {
            let mut line = String::new();
            let n = self.from.read_line(&mut line).expect("the host writes");
            assert!(n > 0, "the host ended");
            line
        }

        /// `n` calls, `k` in flight; the seconds they took.
        fn calls(&mut self, first: u64, n: u64, k: u64) -> f64 {
            let request = |id: u64| {
                format!(
                    "{{\"t\":\"call\",\"id\":{id},\"tool\":\"p0000\",\"args\":{{\"i\":{id}}},\"seat\":\"bench\",\"role\":\"Leader\",\"key\":{}}}\n",
                    2_479_161_134_786_620u64 + id
                )
            };
            let started = Instant::now();
            let mut out = String::new();
            let mut sent = 0;
            while sent < k.min(n) {
                out.push_str(&request(first + sent));
                sent += 1;
            }
            let mut line = String::new();
            let mut got = 0;
            while got < n {
                if !out.is_empty() {
                    self.to.write_all(out.as_bytes()).expect("the host reads");
                    out.clear();
                }
                // Every answer already read is taken, and their requests go out together.
                loop {
                    line.clear();
                    let read = self.from.read_line(&mut line).expect("the host writes");
                    assert!(read > 0, "the host ended");
                    assert!(line.contains("\"text\""), "the host answered {line}");
                    got += 1;
                    if sent < n {
                        out.push_str(&request(first + sent));
                        sent += 1;
                    }
                    if got == n || !self.from.buffer().contains(&b'\n') {
                        break;
                    }
                }
            }
            started.elapsed().as_secs_f64()
        }
    }

    impl Drop for Host {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    pub fn compare(node: &Path, work: &Path, n: usize) {
        let plugins = work.join("host-alone");
        std::fs::create_dir_all(&plugins).expect("a plugins folder");
        std::fs::write(plugins.join("p0000.mjs"), ECHO).expect("the plugin");
        let minimal = work.join("minimal-host.mjs");
        std::fs::write(&minimal, MINIMAL).expect("the minimal host");
        let shim = Path::new("host-shim/host.mjs")
            .canonicalize()
            .expect("host-shim/host.mjs");
        let n = n as u64;
        // Alternated rounds: the machine's load moves from minute to minute.
        for (k, round) in [1, 32]
            .into_iter()
            .flat_map(|k| (1..=3).map(move |r| (k, r)))
        {
            eprintln!("k={k}, round {round}:");
            for (label, script) in [
                ("host.mjs", shim.as_path()),
                ("minimal host", minimal.as_path()),
            ] {
                let mut host = Host::start(node, script, &plugins);
                host.calls(10, n / 2, k);
                let before = Used::of(host.child.id());
                let took = host.calls(10 + n, n, k);
                eprintln!(
                    "  {label}: {:.0} calls/s, per call: node {}",
                    n as f64 / took,
                    Used::of(host.child.id()).per_call(before, n as usize)
                );
            }
        }
    }
}
