//! The operator's metrics: `"metrics": {"listen": …}` serves Prometheus's text, a real Prometheus
//! (Debian's, installed by scripts/test) scrapes it, and a query through its HTTP API reads back a call
//! the test made. Without the setting there is no listener.

mod common;
use common::*;
use serde_json::{Value, json};

const ECHO: &str = r#"
export const description = "Echoes.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run(args, { seat }) { return { text: `echo for ${seat}` }; }
"#;

/// A free loopback port (taken and given back: Prometheus binds it itself).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A GET on loopback, the body.
fn get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(PATIENCE)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_string()))
}

/// An instance serving its metrics on a loopback port of its own: the daemon and the address it listens on.
fn serving_metrics() -> (Instance, Daemon, String) {
    let inst = Instance::new();
    inst.set_config(json!({ "metrics": { "listen": "127.0.0.1:0" } }));
    let d = inst.start();
    let url = d.status().unwrap()["metrics"].as_str().unwrap().to_string();
    let authority = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/metrics"))
        .unwrap()
        .to_string();
    (inst, d, authority)
}

#[test]
fn a_real_prometheus_scrapes_the_calls_made() {
    let prometheus = which("prometheus").expect(
        "Prometheus is not installed: scripts/test installs Debian's prometheus with apt-get where it runs as \
         root (apt-get install prometheus)",
    );
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    inst.add_seat("w1");
    inst.set_config(json!({ "metrics": { "listen": "127.0.0.1:0" } }));
    let d = inst.start();
    let url = d.status().unwrap()["metrics"]
        .as_str()
        .expect("ovai status names the metrics endpoint")
        .to_string();
    let target = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/metrics"))
        .unwrap()
        .to_string();
    let mut s = inst.session("w1");
    s.initialize();
    for _ in 0..3 {
        assert_eq!(
            s.call("echo", json!({})),
            ("echo for w1".to_string(), false)
        );
    }
    // The text itself: calls by tool, seat and outcome, the conventions' histogram, the session open.
    let port: u16 = target.rsplit(':').next().unwrap().parse().unwrap();
    let text = get(port, "/metrics").expect("/metrics answers");
    assert!(
        text.contains(r#"ovai_calls_total{tool="echo",seat="w1",outcome="text"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="echo",error_type=""} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"ovai_sessions_open{seat="w1",transport="socket"} 1"#),
        "{text}"
    );
    // A seat with no session open reads 0, not no data.
    assert!(
        text.contains(r#"ovai_sessions_open{seat="lead",transport="socket"} 0"#),
        "{text}"
    );
    assert!(text.contains(r#"ovai_plugins{state="served"} 1"#), "{text}");
    assert!(!text.contains(&inst.secret("w1")));
    // What only grows is a counter, named _total (helper-45: process_cpu_seconds_total and the host's
    // ends were gauges, which Prometheus's linter flags). It reads the text as Prometheus's own format,
    // where a counter's HELP names its _total series; OpenMetrics names the family, so those notes are
    // not ours.
    let promtool = which("promtool").expect("promtool comes with Debian's prometheus");
    let lint = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .output_with_stdin(text.as_bytes());
    let notes: Vec<&str> = lint
        .said
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.ends_with("_total no help text"))
        .collect();
    assert!(notes.is_empty(), "{notes:?}\n{text}");
    for family in [
        "process_cpu_seconds",
        "ovai_host_ends",
        "ovai_host_respawns",
    ] {
        assert!(text.contains(&format!("# TYPE {family} counter")), "{text}");
    }
    // A seat added replaces a boxed host (its box hides the new desk's secret): an end of its own kind,
    // not a host that stopped, and counted with the hosts started in place of one.
    inst.add_seat("w2");
    let text = wait_until("the replacement counted", || {
        let text = get(port, "/metrics")?;
        text.contains(r#"ovai_host_respawns_total 1"#)
            .then_some(text)
    });
    assert!(
        text.contains(r#"ovai_host_ends_total{cause="replaced"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"ovai_host_ends_total{cause="stopped"} 0"#),
        "{text}"
    );

    let work = tempfile::tempdir_in("/tmp").unwrap();
    let config = work.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ovai\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let web = free_port();
    let mut prom = std::process::Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            work.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{web}"))
        .stdout(std::process::Stdio::null())
        .stderr(
            std::fs::File::create(work.path().join("prometheus.log"))
                .map(std::process::Stdio::from)
                .unwrap(),
        )
        .spawn()
        .expect("prometheus starts");
    let query = "/api/v1/query?query=ovai_calls_total%7Btool%3D%22echo%22%2Cseat%3D%22w1%22%7D";
    let value = wait_until("Prometheus to have scraped the calls", || {
        let body = get(web, query)?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let result = v["data"]["result"].as_array()?.first()?.clone();
        result["value"][1].as_str().map(str::to_string)
    });
    let _ = prom.kill();
    let _ = prom.wait();
    assert_eq!(value, "3");
}

/// A page the operator's browser loads may point a name of its own at 127.0.0.1 (DNS rebinding): the
/// seats' and tools' names are not read through it.
#[test]
fn a_request_naming_another_host_is_refused() {
    let (_inst, _d, authority) = serving_metrics();
    let ask = |headers: &str| {
        exchange(
            authority.as_str(),
            &format!("GET /metrics HTTP/1.1\r\n{headers}connection: close\r\n\r\n"),
        )
    };
    let port = authority.rsplit_once(':').unwrap().1;
    for own in [
        format!("Host: {authority}\r\n"),
        format!("Host: localhost:{port}\r\n"),
    ] {
        let text = ask(&own);
        assert!(text.starts_with("HTTP/1.1 200"), "{own}: {text}");
    }
    // Another method is answered in words, not a bare status.
    let posted = exchange(
        authority.as_str(),
        &format!(
            "POST /metrics HTTP/1.1\r\nHost: {authority}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
    );
    assert!(
        posted.starts_with("HTTP/1.1 405") && posted.contains("read with GET"),
        "{posted}"
    );
    // A request line naming another host is for that host, whatever Host says (helper-96: answered).
    let absolute = exchange(
        authority.as_str(),
        &format!(
            "GET http://evil.example/metrics HTTP/1.1\r\nHost: {authority}\r\nconnection: close\r\n\r\n"
        ),
    );
    for (other, text) in [
        format!("Host: rebind.evil.example:{port}\r\nOrigin: https://evil.example\r\n"),
        format!("Host: {authority}\r\nHost: evil.example\r\n"),
    ]
    .map(|other| {
        let text = ask(&other);
        (other, text)
    })
    .into_iter()
    .chain([("GET http://evil.example/metrics".to_string(), absolute)])
    {
        assert!(
            text.starts_with("HTTP/1.1 403") && text.contains("refuses one naming another host"),
            "{other}: {text}"
        );
        assert!(!text.contains("ovai_"), "{text}");
    }
}

/// The endpoints are set at the start: a restart that changes one says so to whoever asked for it.
#[test]
fn a_restart_says_the_endpoints_wait_for_the_next_start() {
    let inst = Instance::new();
    inst.set_config(json!({ "metrics": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    inst.set_config(json!({
        "metrics": { "listen": "127.0.0.1:19464" },
        "web": { "listen": "127.0.0.1:0" }
    }));
    let status = inst.cmd().arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("Metrics: http://127.0.0.1:"), "{status}");
    assert!(!status.contains("Status page:"), "{status}");
    let out = inst.cmd().arg("restart").output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    for (name, what) in [
        ("metrics", "the metrics endpoint"),
        ("web", "the status page"),
    ] {
        let row = format!(
            "openovai.json's \"{name}\" changed; {what} keeps its settings until ovai serve starts again."
        );
        assert!(said.contains(&row), "{said}");
        assert!(inst.rows("server").iter().any(|r| r.contains(&row)));
    }
}

#[test]
fn without_the_setting_nothing_listens() {
    let inst = Instance::new();
    let d = inst.start();
    let status = d.status().unwrap();
    assert!(status.get("metrics").is_none(), "{status}");
    inst.set_config(json!({ "metrics": { "listen": "0.0.0.0:9464" } }));
    inst.cmd()
        .arg("check")
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "\"metrics\" listens on 0.0.0.0:9464, which other machines reach",
        ));
}

/// Connections left open with half a request, by anybody on this machine, on the metrics' and the
/// status page's own listeners: the daemon holds a bounded number of them (it once held every one, until
/// it ran out of descriptors and stopped answering its seats), and both still answer a new request.
#[test]
fn half_open_connections_cannot_take_the_daemons_descriptors() {
    use std::io::Write;
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    let web = free_port();
    inst.set_config(json!({
        "metrics": { "listen": "127.0.0.1:0" },
        "web": { "listen": format!("127.0.0.1:{web}") },
    }));
    let d = inst.start();
    let metrics = metrics_port(&d);
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
            .unwrap()
            .count()
    };
    let before = fds();
    let mut held = Vec::new();
    for port in [metrics, web] {
        for _ in 0..250 {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
            held.push(c);
        }
        // Accepted in order: once this one is answered, every connection before it was taken.
        assert!(answers(port), "port {port} answers a request beside them");
    }
    let during = fds();
    assert!(
        during < before + 100,
        "the daemon held {during} descriptors with 500 half-open connections (it had {before})"
    );
    assert!(answers(metrics) && answers(web));
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({})),
        ("echo for lead".to_string(), false)
    );
    drop(held);
}

/// Whether a request on loopback `port` gets an answer (of any status).
fn answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(PATIENCE));
    let _ = write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let mut head = [0u8; 9];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}

struct Linted {
    said: String,
}

trait WithStdin {
    fn output_with_stdin(&mut self, input: &[u8]) -> Linted;
}

impl WithStdin for std::process::Command {
    /// Runs the command with `input` on its stdin: its stdout and stderr together.
    fn output_with_stdin(&mut self, input: &[u8]) -> Linted {
        use std::io::Write;
        let mut child = self
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = child.wait_with_output().unwrap();
        Linted {
            said: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

/// The port of the metrics endpoint `ovai status` names.
fn metrics_port(d: &Daemon) -> u16 {
    let url = d.status().unwrap()["metrics"].as_str().unwrap().to_string();
    url.trim_end_matches("/metrics")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// A call is named the same way in every record an operator reads (helper-45): one that reached its
/// deadline was `timed_out` in the metrics and "refused" in calls.jsonl and on the page; one whose host
/// ended was `error` in the metrics and "host stopped" in the others.
#[test]
fn a_calls_outcome_is_named_alike_in_the_metrics_and_the_call_log() {
    let inst = Instance::new();
    inst.fixture("fault-never.mjs");
    inst.fixture("fault-sigkill.mjs");
    inst.set_config(json!({
        "metrics": { "listen": "127.0.0.1:0" },
        "callLog": true,
        "callTimeoutSeconds": 1
    }));
    let d = inst.start();
    let port = metrics_port(&d);
    let mut s = inst.session("lead");
    s.initialize();
    assert!(s.call("fault-never", json!({})).1);
    assert!(s.call("fault-sigkill", json!({})).1);
    let log = wait_until("both calls in the call log", || {
        let text = std::fs::read_to_string(inst.root.join("calls.jsonl")).ok()?;
        (text.lines().count() >= 2).then_some(text)
    });
    let outcomes: Vec<(String, String)> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["tool"].as_str().unwrap().to_string(),
                v["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("fault-never".to_string(), "timed out".to_string()),
            ("fault-sigkill".to_string(), "host stopped".to_string()),
        ]
    );
    let text = get(port, "/metrics").unwrap();
    assert!(
        text.contains(r#"ovai_calls_total{tool="fault-never",seat="lead",outcome="timed_out"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"ovai_calls_total{tool="fault-sigkill",seat="lead",outcome="host_stopped"} 1"#
        ),
        "{text}"
    );
}

/// A request hyper cannot read, on the metrics' listener, is answered in plain words, not with the MCP
/// endpoint's JSON-RPC error (helper-61).
#[test]
fn an_unreadable_request_to_the_metrics_is_answered_in_plain_words() {
    use std::io::{Read, Write};
    let (_inst, _d, authority) = serving_metrics();
    let mut s = std::net::TcpStream::connect(&authority).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut head = format!("GET /metrics HTTP/1.1\r\nHost: {authority}\r\n");
    for i in 0..120 {
        head.push_str(&format!("x-h{i}: 1\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert!(
        answer.contains("content-type: text/plain")
            && answer.contains("The request's head is larger than this server reads")
            && !answer.contains("jsonrpc"),
        "{answer}"
    );
}

/// Calls refused before they ran (no such tool, arguments that do not fit) are counted too, over the
/// socket and over HTTP: a session calling a tool renamed away shows in the metrics. A name no tool has
/// is counted under `tool=""`, so a session cannot make a series per name it sends (helper-77).
#[test]
fn calls_refused_before_they_ran_are_counted_without_the_names_sent() {
    const STRICT: &str = r#"
export const description = "Wants a number.";
export const inputSchema = { type: "object", properties: { n: { type: "number", description: "a number" } }, required: ["n"] };
export function run({ n }) { return { text: `n=${n}` }; }
"#;
    let inst = Instance::with_plugins(&[("strict.mjs", STRICT)]);
    inst.add_seat("w1");
    inst.set_config(json!({
        "metrics": { "listen": "127.0.0.1:0" },
        "http": { "listen": "127.0.0.1:0" }
    }));
    let d = inst.start();
    let port = metrics_port(&d);
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    let mut s = inst.session("lead");
    s.initialize();
    let mut h = common::http::HttpSeat::new(
        &common::http::Http::at(&url),
        &inst.secret("w1"),
        "2025-11-25",
    );
    h.initialize();
    for i in 0..2 {
        let name = format!("no-such-tool-{i}");
        let a = s.request("tools/call", json!({ "name": name, "arguments": {} }));
        assert_eq!(a["error"]["code"], -32602, "{a}");
        let a = h.request("tools/call", json!({ "name": name, "arguments": {} }));
        assert_eq!(a["error"]["code"], -32602, "{a}");
    }
    // Arguments nested past what the server reads are refused as bad params (not the tool's refusal).
    let deep = (0..140).fold(json!([]), |inner, _| json!([inner]));
    let a = s.request(
        "tools/call",
        json!({ "name": "strict", "arguments": { "n": deep } }),
    );
    assert_eq!(a["error"]["code"], -32602, "{a}");
    let a = h.request(
        "tools/call",
        json!({ "name": "strict", "arguments": { "n": deep } }),
    );
    assert_eq!(a["error"]["code"], -32602, "{a}");
    // A 2026-07-28 call whose Mcp-Name does not match its body, turned away by rmcp before the service:
    // counted as another JSON-RPC error, and a span (helper-96: neither).
    let call = json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "strict", "arguments": { "n": 1 }, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": "p", "version": "1" } } } });
    for name in ["other", "zzz-<b>"] {
        let r = common::http::Http::at(&url).call_2026(&inst.secret("w1"), Some(name), &call);
        let status = r.status;
        let v = r.json();
        assert_eq!((status, &v["error"]["code"]), (400, &json!(-32020)), "{v}");
    }
    // rmcp's refusal echoes a long name: it reaches the client whole (helper-98: sent on empty).
    let mut long = call.clone();
    long["params"]["name"] = json!("x".repeat(100_000));
    let r = common::http::Http::at(&url).call_2026(&inst.secret("w1"), Some("open"), &long);
    let status = r.status;
    let v = r.json();
    assert_eq!((status, &v["error"]["code"]), (400, &json!(-32020)), "{v}");
    let text = get(port, "/metrics").unwrap();
    assert!(
        text.contains(r#"ovai_calls_total{tool="strict",seat="w1",outcome="error"} 2"#),
        "{text}"
    );
    assert!(!text.contains("zzz"), "{text}");
    for seat in ["lead", "w1"] {
        for want in [
            format!(r#"ovai_calls_total{{tool="",seat="{seat}",outcome="unknown_tool"}} 2"#),
            format!(
                r#"ovai_calls_total{{tool="strict",seat="{seat}",outcome="invalid_params"}} 1"#
            ),
        ] {
            assert!(text.contains(&want), "{want}\n{text}");
        }
    }
    // The conventions' error.type for a JSON-RPC error is its code.
    for want in [
        r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="",error_type="-32602"} 4"#,
        r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="strict",error_type="-32602"} 2"#,
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    assert!(!text.contains("no-such-tool"), "{text}");
}
