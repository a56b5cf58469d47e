//! Figures and how they are reported: medians of runs, the table, the floors' lines, the machine.

use super::*;

/// Runs a case with no baseline `runs` times and keeps the median of each figure.
pub(crate) fn repeat(
    name: &'static str,
    runs: usize,
    mut case: impl FnMut() -> Figures,
) -> Figures {
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
pub(crate) fn floor_of<'a>(
    case: &str,
    floors: &'a [(&'static str, Figures)],
) -> Option<&'a Figures> {
    let floor = match case {
        "k1" => "floor_chain_k1",
        "builtin_k1" => "floor_builtin_k1",
        "k32" => "floor_chain_k32",
        "sessions16" => "floor_sessions16",
        _ => return None,
    };
    floors.iter().find(|(n, _)| *n == floor).map(|(_, f)| f)
}

pub(crate) fn print_floors(
    cases: &[(&'static str, Figures, Figures)],
    floors: &[(&'static str, Figures)],
) {
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
pub(crate) fn alternate(
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

pub(crate) fn medians(runs: &[Figures]) -> Figures {
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

pub(crate) fn figures_json(f: &Figures) -> Value {
    Value::Object(
        f.iter()
            .map(|(k, v)| (k.to_string(), json!(round(*v, 1))))
            .collect(),
    )
}

pub(crate) fn round(v: f64, places: i32) -> f64 {
    let p = 10f64.powi(places);
    (v * p).round() / p
}

// ---------------------------------------------------------------------------------------------------
// Instances and servers

pub(crate) fn latency_figures(mut lat: Vec<Duration>, wall: Duration, failed: usize) -> Figures {
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

pub(crate) fn ms(f: Duration) -> Figures {
    let mut out = Figures::new();
    out.insert("ms", f.as_secs_f64() * 1e3);
    out
}

pub(crate) fn machine() -> String {
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
pub(crate) fn halt_poll() -> String {
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

pub(crate) fn date() -> String {
    Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

pub(crate) fn print_table(machine: &str, cases: &[(&'static str, Figures, Figures)]) {
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
