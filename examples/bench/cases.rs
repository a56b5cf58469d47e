//! The cases of the table: ovai and the baseline fed the same lines, one call at a time, many in
//! flight, many sessions, at an agent's pace, and what a session's start, a crash, a restart and memory cost.

use super::*;

/// The cases the throughput targets name: 32 calls in flight on one session, and 16 sessions.
pub(crate) fn throughput_cases(
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
pub(crate) fn k1_case(
    name: &'static str,
    setup: &Setup,
    inst: &Instance,
    tool: &str,
    direct: bool,
) -> Case {
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
pub(crate) fn k1_shaped(name: &'static str, setup: &Setup, inst: &Instance, shape: Shape) -> Case {
    alternate(
        name,
        setup.runs,
        || ovai_calls_shaped(setup, inst, 5000, 1, "p0000", shape),
        || baseline_calls_shaped(setup, inst, 5000, 1, shape),
    )
}

pub(crate) fn ovai_calls(
    setup: &Setup,
    inst: &Instance,
    n: usize,
    k: usize,
    tool: &str,
) -> Figures {
    ovai_calls_shaped(setup, inst, n, k, tool, Shape::ClaudeCode)
}

pub(crate) fn ovai_calls_shaped(
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

/// Over MCP's Streamable HTTP: ovai's endpoint against the SDK's own HTTP server.
pub(crate) fn http_cases(setup: &Setup, cases: &mut Vec<(&'static str, Figures, Figures)>) {
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

pub(crate) fn ovai_http_calls(setup: &Setup, inst: &Instance, n: usize, k: usize) -> Figures {
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

pub(crate) fn baseline_http_calls(setup: &Setup, inst: &Instance, n: usize, k: usize) -> Figures {
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

pub(crate) fn direct_calls(
    setup: &Setup,
    inst: &Instance,
    n: usize,
    k: usize,
    tool: &str,
) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut c = Client::direct(inst);
    c.initialize();
    c.calls(tool, setup.warm_up(n), k);
    let (lat, wall, failed) = c.calls(tool, setup.calls(n), k);
    latency_figures(lat, wall, failed)
}

pub(crate) fn baseline_calls(setup: &Setup, inst: &Instance, n: usize, k: usize) -> Figures {
    baseline_calls_shaped(setup, inst, n, k, Shape::ClaudeCode)
}

pub(crate) fn baseline_calls_shaped(
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

pub(crate) fn sessions(clients: &mut [Client], per_session: usize, k: usize) -> Figures {
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

pub(crate) fn ovai_sessions(
    setup: &Setup,
    inst: &Instance,
    n: usize,
    k: usize,
    per: usize,
) -> Figures {
    let (_d, _) = Daemon::start(setup, inst);
    let mut clients = ovai_clients(setup, inst, n);
    sessions_settled(&mut clients, setup.calls(per), k)
}

/// Calls from every session at once, `per` each: as many again first, to warm the server (each of the
/// baseline's sessions is a Node process of its own, which V8 warms by itself), then the `per` measured.
pub(crate) fn sessions_settled(clients: &mut [Client], per: usize, k: usize) -> Figures {
    sessions(clients, per, k);
    sessions(clients, per, k)
}

/// `n` sessions of `ovai mcp`, opened as Claude Code opens them.
pub(crate) fn ovai_clients(setup: &Setup, inst: &Instance, n: usize) -> Vec<Client> {
    (0..n)
        .map(|_| {
            let mut c = Client::ovai(setup, inst);
            c.open(Shape::ClaudeCode, true);
            c
        })
        .collect()
}

pub(crate) fn baseline_sessions(
    setup: &Setup,
    inst: &Instance,
    n: usize,
    k: usize,
    per: usize,
) -> Figures {
    let mut clients: Vec<Client> = (0..n)
        .map(|_| {
            let mut c = Client::baseline(setup, inst);
            c.open(Shape::ClaudeCode, false);
            c
        })
        .collect();
    sessions_settled(&mut clients, setup.calls(per), k)
}

/// One session calling at an agent's pace: a call, then a pause drawn from 0.2 to 2 s (the same pauses
/// each run), as Claude Code writes its calls; ovai's, or the baseline's fed the same lines.
pub(crate) fn paced_calls(setup: &Setup, inst: &Instance, ovai: bool) -> Figures {
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

/// From spawning `ovai mcp` to `tools/list` answered: what a session's start costs.
pub(crate) fn ovai_attach(setup: &Setup, inst: &Instance) -> Figures {
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

pub(crate) fn baseline_attach(setup: &Setup, inst: &Instance) -> Figures {
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

pub(crate) fn ovai_startup(setup: &Setup, inst: &Instance) -> Figures {
    let (_d, took) = Daemon::start(setup, inst);
    ms(took)
}

pub(crate) fn baseline_startup(setup: &Setup, inst: &Instance) -> Figures {
    let started = Instant::now();
    let mut c = Client::baseline(setup, inst);
    c.initialize();
    ms(started.elapsed())
}

pub(crate) fn ovai_recovery(setup: &Setup, inst: &Instance) -> Figures {
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

pub(crate) fn baseline_recovery(setup: &Setup, inst: &Instance) -> Figures {
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
pub(crate) fn ovai_restart(setup: &Setup, inst: &Instance) -> Figures {
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

pub(crate) fn baseline_restart(setup: &Setup, inst: &Instance) -> Figures {
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

pub(crate) fn ovai_rss(setup: &Setup, inst: &Instance) -> Figures {
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

pub(crate) fn baseline_rss(setup: &Setup, inst: &Instance) -> Figures {
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
