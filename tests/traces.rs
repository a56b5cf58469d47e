//! Traces: with `OTEL_EXPORTER_OTLP_ENDPOINT` in the daemon's environment, every request a session makes
//! is a span as the OpenTelemetry semantic conventions for MCP name it, exported over OTLP/HTTP; a call
//! has a child span for its host's part, whose context the plugin reads as `context.traceparent`; a
//! `traceparent` in `_meta` makes the call's span its child; a refusal sets the span's status in words.
//! A collector that does not answer costs no call anything: what the queue cannot hold is counted.

mod common;
use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

const TOOLS: &[(&str, &str)] = &[
    (
        "echo.mjs",
        r#"
export const description = "Says the trace context it was given.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run(args, context) { return { text: `traceparent ${context.traceparent}` }; }
"#,
    ),
    (
        "nope.mjs",
        r#"
export const description = "Refuses.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run() { return { refused: "not today" }; }
"#,
    ),
];

/// A small OTLP/HTTP receiver: every span posted to /v1/traces, decoded, with its resource's service
/// name. `answer`: false for one that reads requests and never answers (a collector that hangs).
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<(String, Span)>>>,
}

impl Receiver {
    fn start(answer: bool) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let into = spans.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let into = into.clone();
                std::thread::spawn(move || serve(conn, &into, answer));
            }
        });
        Self { port, spans }
    }

    fn spans(&self) -> Vec<(String, Span)> {
        self.spans.lock().unwrap().clone()
    }
}

fn serve(conn: std::net::TcpStream, into: &Mutex<Vec<(String, Span)>>, answer: bool) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if !answer {
            // Holds the connection, and never answers.
            std::thread::sleep(std::time::Duration::from_secs(3600));
            return;
        }
        if let Ok(request) = ExportTraceServiceRequest::decode(body.as_slice()) {
            let mut spans = into.lock().unwrap();
            for rs in request.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| attr(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        spans.push((service.clone(), span));
                    }
                }
            }
        }
        let _ = conn.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
        );
    }
}

/// `ovai_spans_dropped_total` as the daemon's metrics endpoint says it now, if it can be read.
fn spans_dropped(d: &Daemon) -> Option<u64> {
    let metrics = d.status()?["metrics"].as_str()?.to_string();
    let port: u16 = metrics
        .trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)?
        .parse()
        .ok()?;
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("ovai_spans_dropped_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
}

fn attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => Some(s.clone()),
            Some(any_value::Value::IntValue(i)) => Some(i.to_string()),
            _ => None,
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// With traces off a plugin gets the caller's traceparent, W3C's form only: any string a session sent
/// (a line break in it) reached a plugin told to pass it on as a header (helper-104).
#[test]
fn a_plugin_gets_only_a_well_formed_traceparent_from_its_caller() {
    let inst = Instance::with_plugins(TOOLS);
    let _d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (sent, got) in [
        (good, good),
        ("garbage", "null"),
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nx-evil: 1",
            "null",
        ),
    ] {
        for meta in [
            json!({ "traceparent": sent }),
            json!({ "progressToken": 1, "traceparent": sent }),
        ] {
            let r = s.request(
                "tools/call",
                json!({ "name": "echo", "arguments": {}, "_meta": meta }),
            );
            assert_eq!(
                text_of(&r),
                (format!("traceparent {got}"), false),
                "{sent:?}"
            );
        }
    }
}

#[test]
fn every_request_is_a_span_and_a_call_follows_its_callers_trace_into_the_plugin() {
    let receiver = Receiver::start(true);
    let inst = Instance::with_plugins(TOOLS);
    inst.add_seat("w1");
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let _d = Daemon::start_with_env(
        &inst,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "ovai-test"),
        ],
    );
    let mut s = inst.session("w1");
    s.initialize();
    s.tool_names();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let r = s.request(
        "tools/call",
        json!({ "name": "echo", "arguments": {}, "_meta": { "traceparent": format!("00-{trace}-{parent}-01") } }),
    );
    let (text, refused) = text_of(&r);
    assert!(!refused);
    // A string id, to see it written as the conventions write one: without its quotes.
    s.send(
        &json!({ "jsonrpc": "2.0", "id": "call-7", "method": "tools/call",
                    "params": { "name": "nope", "arguments": {} } }),
    );
    let (refusal, refused) = text_of(&s.recv_where(|m| m["id"] == "call-7"));
    assert!(refused && refusal.contains("not today"), "{refusal}");
    let spans = wait_until("the spans to reach the collector", || {
        let spans = receiver.spans();
        let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
        ([
            "tools/list",
            "tools/call echo",
            "host echo",
            "tools/call nope",
        ]
        .iter()
        .all(|n| names.contains(n)))
        .then_some(spans)
    });
    let find = |name: &str| {
        spans
            .iter()
            .find(|(_, s)| s.name == name)
            .map(|(service, s)| (service.clone(), s.clone()))
            .unwrap()
    };
    let (service, call) = find("tools/call echo");
    assert_eq!(service, "ovai-test");
    // The caller's trace: the same trace, the caller's span its parent.
    assert_eq!(hex(&call.trace_id), trace);
    assert_eq!(hex(&call.parent_span_id), parent);
    for (key, want) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "echo"),
        ("ovai.seat", "w1"),
    ] {
        assert_eq!(
            attr(&call.attributes, key).as_deref(),
            Some(want),
            "{key}: {call:?}"
        );
    }
    let id = attr(&call.attributes, "jsonrpc.request.id");
    assert!(id.is_some_and(|id| id.parse::<u64>().is_ok()), "{call:?}");
    // The host's part is its child, and the plugin was given that part's context.
    let (_, host) = find("host echo");
    assert_eq!(host.trace_id, call.trace_id);
    assert_eq!(host.parent_span_id, call.span_id);
    assert_eq!(
        text,
        format!("traceparent 00-{trace}-{}-01", hex(&host.span_id))
    );
    // A refusal is an error, in words.
    let (_, nope) = find("tools/call nope");
    let status = nope.status.clone().unwrap();
    assert_eq!(status.code, 2, "{status:?}");
    assert!(status.message.contains("not today"), "{status:?}");
    assert_eq!(
        attr(&nope.attributes, "jsonrpc.request.id").as_deref(),
        Some("call-7")
    );
    // A call without a traceparent starts its own trace.
    assert_ne!(hex(&nope.trace_id), trace);
    let (_, list) = find("tools/list");
    assert_eq!(attr(&list.attributes, "ovai.seat").as_deref(), Some("w1"));
    // The revision the session's initialize agreed, on requests that carry none of their own.
    for span in [&call, &nope, &list] {
        assert!(
            attr(&span.attributes, "mcp.protocol.version").is_some_and(|v| v.starts_with("20")),
            "{span:?}"
        );
    }
}

/// Requests answered with an error on the way, over the socket and over HTTP, are spans failed in the
/// caller's words; an HTTP initialize's span names the revision it asks for (helper-45).
#[test]
fn requests_refused_on_the_way_are_failed_spans_over_both_transports() {
    let receiver = Receiver::start(true);
    let inst = Instance::with_plugins(TOOLS);
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    s.send(&json!({ "jsonrpc": "2.0", "id": "u1", "method": "tools/call", "params": { "name": "zzz", "arguments": {} } }));
    let unknown = s.recv_where(|m| m["id"] == "u1");
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // A method as long as the session likes: its span carries its start.
    s.send(&json!({ "jsonrpc": "2.0", "id": "m1", "method": "m".repeat(5000) }));
    let long = s.recv_where(|m| m["id"] == "m1");
    assert_eq!(long["error"]["code"], -32601, "{long}");
    // Refused before its tool is known: params that are no object.
    s.send(
        &json!({ "jsonrpc": "2.0", "id": "u2", "method": "tools/call", "params": { "name": 5 } }),
    );
    let bad = s.recv_where(|m| m["id"] == "u2");
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let status = d.status().unwrap();
    let http = common::http::Http::at(status["http"].as_str().unwrap());
    let mut h = common::http::HttpSeat::new(&http, &inst.secret("lead"), "2025-11-25");
    h.initialize();
    let answer = h.request("nope/method", json!({}));
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let answer = h.request("tools/call", json!({ "name": "qqq", "arguments": {} }));
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let (text, refused) = h.call("echo", json!({ "extra": 1 }));
    assert!(refused && text.contains("do not fit"), "{text}");
    // Turned away by rmcp before the service: its Mcp-Name is not its body's tool (helper-96: no span).
    let mismatch = json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "echo", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": "p", "version": "1" } } } });
    let r = http.call_2026(&inst.secret("lead"), Some("other"), &mismatch);
    assert_eq!(r.status, 400);
    let spans = wait_until("the spans to reach the collector", || {
        let spans = receiver.spans();
        let has = |name: &str, transport: &str| {
            spans.iter().any(|(_, s)| {
                s.name == name
                    && attr(&s.attributes, "network.transport").as_deref() == Some(transport)
            })
        };
        (spans.iter().filter(|(_, s)| s.name == "tools/call").count() >= 3
            && has("unknown method", "unix")
            && has("unknown method", "tcp")
            && has("tools/call echo", "tcp")
            && spans.iter().any(|(_, s)| {
                s.name == "tools/call echo"
                    && s.status
                        .clone()
                        .unwrap_or_default()
                        .message
                        .contains("does not match")
            })
            && has("initialize", "tcp"))
        .then_some(spans)
    });
    // A name no tool has names no span: a session could make as many span names as it likes (helper-96).
    let nameless: Vec<&Span> = spans
        .iter()
        .filter(|(_, s)| s.name == "tools/call")
        .map(|(_, s)| s)
        .collect();
    assert!(
        !spans
            .iter()
            .any(|(_, s)| s.name.contains("zzz") || s.name.contains("qqq")),
        "{spans:?}"
    );
    for (words, transport) in [
        ("There is no tool called zzz", "unix"),
        ("Invalid params", "unix"),
        ("There is no tool called qqq", "tcp"),
    ] {
        let span = nameless
            .iter()
            .find(|s| {
                s.status.clone().unwrap_or_default().message.contains(words)
                    && attr(&s.attributes, "network.transport").as_deref() == Some(transport)
            })
            .unwrap_or_else(|| panic!("{words}: {nameless:?}"));
        assert_eq!(span.status.clone().unwrap_or_default().code, 2);
        assert_eq!(attr(&span.attributes, "gen_ai.tool.name"), None, "{span:?}");
    }
    // A method this server does not serve names no span either; its name, cut, is in mcp.method.name.
    assert!(
        !spans
            .iter()
            .any(|(_, s)| s.name.contains("mmm") || s.name.contains("nope"))
    );
    let method_of = |transport: &str| {
        let (_, s) = spans
            .iter()
            .find(|(_, s)| {
                s.name == "unknown method"
                    && attr(&s.attributes, "network.transport").as_deref() == Some(transport)
            })
            .unwrap();
        assert_eq!(s.status.clone().unwrap_or_default().code, 2, "{s:?}");
        attr(&s.attributes, "mcp.method.name").unwrap()
    };
    assert_eq!(method_of("unix").chars().count(), 100);
    assert_eq!(method_of("tcp"), "nope/method");
    assert!(spans.iter().any(|(_, s)| {
        s.name == "tools/call echo"
            && s.status
                .clone()
                .unwrap_or_default()
                .message
                .contains("do not fit")
    }));
    let (_, init) = spans
        .iter()
        .find(|(_, s)| {
            s.name == "initialize"
                && attr(&s.attributes, "network.transport").as_deref() == Some("tcp")
        })
        .unwrap();
    assert_eq!(
        attr(&init.attributes, "mcp.protocol.version").as_deref(),
        Some("2025-11-25"),
        "{init:?}"
    );
}

#[test]
fn a_collector_that_never_answers_costs_no_call_and_what_is_dropped_is_counted() {
    let receiver = Receiver::start(false);
    let inst = Instance::with_plugins(TOOLS);
    inst.set_config(json!({ "metrics": { "listen": "127.0.0.1:0" } }));
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    // More spans than the queue holds, while the exporter waits on its first batch.
    let ids: Vec<u64> = (0..3000)
        .map(|_| s.send_request("tools/call", json!({ "name": "nope", "arguments": {} })))
        .collect();
    for id in ids {
        let (text, refused) = text_of(&s.response(id));
        assert!(refused && text.contains("not today"), "{text}");
    }
    let dropped = wait_until("the dropped spans to be counted", || {
        spans_dropped(&d).filter(|n| *n > 0)
    });
    assert!(dropped > 0);
    let rows = inst.rows("server").join("\n");
    assert!(rows.contains("Trace spans are being dropped"), "{rows}");
    assert_eq!(
        rows.matches("Trace spans are being dropped").count(),
        1,
        "said once: {rows}"
    );
}

/// `ovai stop` before a collector that never answers waits for the last spans (at most 3 s), and said it
/// waited for calls in flight, while none ran (helper-92). It says what it waits for.
#[test]
fn a_stop_that_waits_on_the_collector_does_not_say_calls_are_in_flight() {
    let receiver = Receiver::start(false);
    let inst = Instance::with_plugins(TOOLS);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    assert!(s.call("nope", json!({})).1);
    let out = inst.cmd().arg("stop").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("calls in flight"), "{said}");
    // The spans' wait (3 s before a collector that never answers) is past the second after which the
    // stop says what it waits for.
    assert!(
        said.contains(&format!(
                "ovai: waiting for the server (pid {}) to stop: no call is in flight; it ends its sessions, its \
                 plugin host and its exports",
                d.pid()
            )),
        "{said}"
    );
}

/// A call made while its plugin host is being started again has one host span, the part that ran: a
/// second one, of no length and "OK", was made for the host that was not there (helper-96).
#[test]
fn a_call_that_waits_for_a_new_host_has_one_host_span() {
    let receiver = Receiver::start(true);
    let inst = Instance::with_plugins(TOOLS);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    signal(d.host_pid(), libc::SIGKILL);
    wait_until("the daemon to see its host stop", || {
        inst.rows("host")
            .iter()
            .any(|r| r.contains("stopped (signal SIGKILL)"))
            .then_some(())
    });
    s.send(&json!({ "jsonrpc": "2.0", "id": "after", "method": "tools/call", "params": { "name": "echo", "arguments": {} } }));
    let (text, refused) = text_of(&s.recv_where(|m| m["id"] == "after"));
    assert!(!refused, "{text}");
    let call = wait_until("the call's spans", || {
        let spans = receiver.spans();
        let call = spans.iter().find(|(_, s)| {
            s.name == "tools/call echo"
                && attr(&s.attributes, "jsonrpc.request.id").as_deref() == Some("after")
        })?;
        Some(call.1.clone())
    });
    // The host span ends before the call's: once the call's is there, so is every host span of it.
    let hosts: Vec<Span> = receiver
        .spans()
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "host echo" && s.parent_span_id == call.span_id)
        .collect();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
}

/// A query in a full traces endpoint (a collector's key) is never written in runtime.log (which the
/// status page shows), nor in its failures.
#[test]
fn an_endpoints_query_is_never_written_in_runtime_log() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = nobody.local_addr().unwrap().port();
    drop(nobody);
    let inst = Instance::with_plugins(TOOLS);
    let endpoint = format!("http://127.0.0.1:{port}/v1/traces?key=QSECRET");
    let _d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    let (text, refused) =
        text_of(&s.request("tools/call", json!({ "name": "nope", "arguments": {} })));
    assert!(refused, "{text}");
    let rows = wait_until("the failed export to be said", || {
        let rows = inst.rows("server").join("\n");
        rows.contains("Traces could not be exported")
            .then_some(rows)
    });
    let shown = format!("http://127.0.0.1:{port}/v1/traces?…");
    assert!(rows.contains(&format!("Traces go to {shown}")), "{rows}");
    assert!(
        rows.contains(&format!(
            "Traces could not be exported to {shown} (nothing listens at 127.0.0.1:{port}: is the collector running?)"
        )),
        "{rows}"
    );
    assert!(!rows.contains("QSECRET"), "{rows}");
}

/// An endpoint with a user and password, or a base endpoint with a query, is refused in words that name
/// the way, never showing them: the exporter sent no credentials, and wrote the query into the path
/// (`/?key=…/v1/traces`), while runtime.log said traces went there (helper-96).
#[test]
fn an_endpoint_with_credentials_or_a_query_is_refused_without_showing_them() {
    for (var, endpoint, said) in [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://ann:s3cret-pass@127.0.0.1:4318",
            "Traces are not exported: OTEL_EXPORTER_OTLP_ENDPOINT is http://…@127.0.0.1:4318, whose user and \
             password the exporter would not send: name the collector without them, and give them in \
             OTEL_EXPORTER_OTLP_HEADERS (Authorization=Basic …).",
        ),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://ann:s3cret-pass@127.0.0.1:4318/v1/traces",
            "Traces are not exported: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is http://…@127.0.0.1:4318/v1/traces, \
             whose user and password",
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318/?key=s3cret-pass",
            "Traces are not exported: OTEL_EXPORTER_OTLP_ENDPOINT is http://127.0.0.1:4318/?…, whose query the \
             exporter would write into the path (before /v1/traces): leave it out, and give a key in \
             OTEL_EXPORTER_OTLP_HEADERS, or name the whole address in OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.",
        ),
    ] {
        let inst = Instance::with_plugins(TOOLS);
        let d = Daemon::start_with_env(&inst, &[(var, endpoint)]);
        let rows = inst.rows("server").join("\n");
        drop(d);
        assert!(rows.contains(said), "{endpoint}: {rows}");
        assert!(!rows.contains("Traces go to"), "{endpoint}: {rows}");
        assert!(!rows.contains("s3cret-pass"), "{endpoint}: {rows}");
    }
}

/// A collector that takes the connection and never answers is said to be silent, with how long it was
/// given, not a "network error" that reads like a refused connection.
#[test]
fn a_collector_that_never_answers_is_said_to_be_silent() {
    // Bound and never read: the kernel takes the connection, and the request waits for ever.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let inst = Instance::with_plugins(TOOLS);
    let endpoint = format!("http://127.0.0.1:{port}");
    let _d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    let (_, refused) =
        text_of(&s.request("tools/call", json!({ "name": "nope", "arguments": {} })));
    assert!(refused);
    let rows = wait_until("the failed export to be said", || {
        let rows = inst.rows("server").join("\n");
        rows.contains("Traces could not be exported")
            .then_some(rows)
    });
    assert!(
        rows.contains(&format!(
            "Traces could not be exported to {endpoint} (it took the connection and answered nothing in 5 s)"
        )),
        "{rows}"
    );
    drop(silent);
}

/// The SDK's own settings that change what would be sent are honoured or refused in words: before, they
/// were passed over (spans went out with OTEL_SDK_DISABLED=true, and over HTTP when gRPC was asked for),
/// and an endpoint that is no address was said to be where traces go, then that they could not be.
#[test]
fn opentelemetrys_own_settings_are_honoured_or_refused_in_words() {
    let at = "http://127.0.0.1:9";
    for (env, said) in [
        (
            vec![("OTEL_SDK_DISABLED", "true")],
            "Traces are not exported: OTEL_SDK_DISABLED is true.".to_string(),
        ),
        (
            vec![("OTEL_TRACES_EXPORTER", "none")],
            "Traces are not exported: OTEL_TRACES_EXPORTER is none.".to_string(),
        ),
        (
            vec![("OTEL_TRACES_EXPORTER", "zipkin")],
            "Traces are not exported: OTEL_TRACES_EXPORTER is \"zipkin\", and ovai exports over OTLP only"
                .to_string(),
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            "Traces are not exported: OTEL_EXPORTER_OTLP_PROTOCOL is \"grpc\", and ovai sends http/protobuf only"
                .to_string(),
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "garbage")],
            "Traces are not exported: OTEL_EXPORTER_OTLP_ENDPOINT is \"garbage\", which is not an http:// address"
                .to_string(),
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://127.0.0.1/")],
            "which is not an http:// address".to_string(),
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://127.0.0.1:4318")],
            "Traces are not exported: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is https://127.0.0.1:4318, and ovai exports over plain HTTP only"
                .to_string(),
        ),
    ] {
        let inst = Instance::with_plugins(TOOLS);
        let mut all = vec![("OTEL_EXPORTER_OTLP_ENDPOINT", at)];
        all.retain(|(k, _)| !env.iter().any(|(e, _)| e == k));
        all.extend(env.iter().copied());
        let d = Daemon::start_with_env(&inst, &all);
        let rows = inst.rows("server").join("\n");
        drop(d);
        assert!(rows.contains(&said), "{env:?}: {rows}");
        assert!(!rows.contains("Traces go to"), "{env:?}: {rows}");
    }
    // A list of exporters, as the SDKs read it, is done for its otlp.
    let inst = Instance::with_plugins(TOOLS);
    let d = Daemon::start_with_env(
        &inst,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", at),
            ("OTEL_TRACES_EXPORTER", "otlp,console"),
        ],
    );
    let rows = inst.rows("server").join("\n");
    drop(d);
    assert!(rows.contains(&format!("Traces go to {at}")), "{rows}");
}

/// The spans of the last calls before `ovai stop` reach the collector before the daemon ends: the
/// queue was left unsent, and the calls an operator most wants to see after a restart were lost
/// (helper-77).
#[test]
fn the_last_spans_are_sent_before_the_daemon_stops() {
    let receiver = Receiver::start(true);
    let inst = Instance::with_plugins(TOOLS);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let mut d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    let (text, refused) = s.call("echo", json!({}));
    assert!(!refused, "{text}");
    inst.cmd().arg("stop").assert().success();
    wait_until("the daemon to end", || (!d.is_running()).then_some(()));
    let names: Vec<String> = receiver.spans().into_iter().map(|(_, s)| s.name).collect();
    assert!(
        names.iter().any(|n| n == "tools/call echo") && names.iter().any(|n| n == "host echo"),
        "{names:?}"
    );
}

/// Spans lost in an export that failed are counted with those the full queue dropped: with the
/// collector down, ovai_spans_dropped_total stayed 0 while every span was lost (helper-77).
#[test]
fn spans_lost_in_a_failed_export_are_counted() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = nobody.local_addr().unwrap().port();
    drop(nobody);
    let inst = Instance::with_plugins(TOOLS);
    inst.set_config(json!({ "metrics": { "listen": "127.0.0.1:0" } }));
    let endpoint = format!("http://127.0.0.1:{port}");
    let d = Daemon::start_with_env(&inst, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]);
    let mut s = inst.session("lead");
    s.initialize();
    for _ in 0..3 {
        let (text, refused) = s.call("nope", json!({}));
        assert!(refused, "{text}");
    }
    let lost = wait_until("the lost spans to be counted", || {
        spans_dropped(&d).filter(|n| *n >= 3)
    });
    assert!(lost >= 3, "{lost}");
}
