//! Looks into the call path instead of cases: CPU a call per process, a load to profile, an idle
//! instance's wake-ups, how cost grows.

use super::*;

/// How cost grows: sessions (calls/s, p99, the daemon's CPU per call), plugins (start-up), and calls in
/// flight at a restart (the switch's time, and that none is lost). Medians of `runs`.
pub(crate) fn scaling(setup: &Setup, one: &Instance) {
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
pub(crate) const SLOW: &str = r#"export const description = "Answers after half a second.";
export const inputSchema = { type: "object" };
export async function run() { await new Promise((r) => setTimeout(r, 500)); return { text: "slow" }; }
"#;

pub(crate) fn restart_with_calls_in_flight(setup: &Setup, inst: &Instance, m: usize) -> Figures {
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

/// What a process has used so far: CPU time (user + system, µs), read and write system calls, and the
/// times its threads went to sleep (each one a wake-up later: on a VM, the dearest part of a hand-off).
#[derive(Clone, Copy, Default)]
pub(crate) struct Used {
    pub(crate) cpu_us: f64,
    pub(crate) reads: f64,
    pub(crate) writes: f64,
    pub(crate) sleeps: f64,
}

impl Used {
    pub(crate) fn of(pid: u32) -> Self {
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
    pub(crate) fn per_call(self, before: Self, n: usize) -> String {
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
pub(crate) fn cpu_per_call(
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
pub(crate) fn calls_counting_cpu(
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

/// `--load`: `n` sessions calling for `for_how_long`, `k` in flight each if given, in rounds, the figures
/// of each round printed.
pub(crate) fn load(
    setup: &Setup,
    inst: &Instance,
    n: usize,
    k: Option<usize>,
    for_how_long: Duration,
) {
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
pub(crate) fn load_on_floor(n: usize, k: Option<usize>, for_how_long: Duration) {
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
pub(crate) fn load_shape(n: usize, k: Option<usize>) -> (usize, usize) {
    match (k, n) {
        (Some(k), n) => (k, ((20_000 * k).min(100_000) / n).max(1)),
        (None, 1) => (32, 100_000),
        (None, n) => (4, 80_000 / n),
    }
}

/// Rounds of calls from every session at once until `for_how_long` has passed, each round's figures
/// printed.
pub(crate) fn rounds(clients: &mut [Client], per: usize, k: usize, for_how_long: Duration) {
    let until = Instant::now() + for_how_long;
    while Instant::now() < until {
        let f = sessions(clients, per, k);
        eprintln!(
            "  {:.0} calls/s, p50 {:.0} µs, p99 {:.0} µs",
            f["calls_per_s"], f["p50_us"], f["p99_us"]
        );
    }
}

/// sessions16's CPU per call by kind of process, ovai's (the daemon, the host, the `n` bridges together,
/// the driver) beside the baseline's (its `n` processes together): where the throughput with many
/// sessions goes.
pub(crate) fn sessions_cpu_per_call(
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
pub(crate) fn sessions_counting_cpu(
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
pub(crate) fn floor_cpu_per_call(setup: &Setup, n: usize) {
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

/// Wake-ups a second of each process of an idle instance, over `for_how_long`: its context switches
/// (voluntary and not, every thread's), with no session, then with one session opened as Claude Code
/// opens it and left waiting on its `subscriptions/listen`.
pub(crate) fn idle(setup: &Setup, inst: &Instance, for_how_long: Duration) {
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
