//! Traces for the operator's tools, on when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is in
//! the daemon's environment: every request a session makes is a span named as the OpenTelemetry semantic
//! conventions for MCP name it (`tools/call ci-status`), with their attributes and the seat; a plugin
//! call has a child span for its host's part. A `traceparent` in the request's `_meta` (or its HTTP
//! header) makes the span its child. Spans are exported over OTLP/HTTP in batches from a thread of their
//! own, through a bounded queue: an exporter that is down or slow costs no call anything; what the queue
//! cannot hold is dropped, counted, and said once in runtime.log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    SdkTracerProvider, SpanData, SpanExporter as _, SpanProcessor, Tracer,
};

use crate::runtime_log::{RuntimeLog, Topic};

/// Spans the queue holds before it drops new ones.
const QUEUE: usize = 2048;
/// Spans sent in one export.
const BATCH: usize = 512;
/// The longest a span waits in the queue when fewer than a batch came.
const EVERY: Duration = Duration::from_secs(1);

static TRACER: OnceLock<Tracer> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The export thread's queue, for `flush`.
static QUEUE_TX: OnceLock<SyncSender<Queued>> = OnceLock::new();

/// Spans lost since the start: dropped because the queue was full, or in an export that failed.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Sends what the queue holds now, waiting at most `patience` for the export thread to have sent it
/// (or given up on it): the daemon's last calls are the ones an operator most wants to see after a stop.
/// False when it was not done in time, or traces are off.
pub fn flush(patience: Duration) -> bool {
    let Some(tx) = QUEUE_TX.get() else {
        return false;
    };
    let until = std::time::Instant::now() + patience;
    let (ack, acked) = std::sync::mpsc::channel();
    let mut flush = Queued::Flush(ack);
    // A full queue is being sent: room comes as it is.
    loop {
        match tx.try_send(flush) {
            Ok(()) => break,
            Err(TrySendError::Full(back)) if std::time::Instant::now() < until => {
                flush = back;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => return false,
        }
    }
    acked
        .recv_timeout(until.saturating_duration_since(std::time::Instant::now()))
        .is_ok()
}

/// The tracer, when traces are on.
pub fn tracer() -> Option<&'static Tracer> {
    TRACER.get()
}

/// An OpenTelemetry setting from the environment, where it is set and not blank.
fn env(key: &'static str) -> Option<(&'static str, String)> {
    std::env::var(key)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| (key, v.trim().to_string()))
}

/// Turns traces on if the environment names an OTLP endpoint; the sentence for runtime.log. The SDK's
/// own settings that would change what is sent are honoured or refused in words, never passed over.
pub fn start(log: &Arc<RuntimeLog>) -> Option<String> {
    let (var, raw) =
        env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))?;
    let endpoint = without_userinfo(&raw, &raw);
    if env("OTEL_SDK_DISABLED").is_some_and(|(_, v)| v.eq_ignore_ascii_case("true")) {
        return Some("Traces are not exported: OTEL_SDK_DISABLED is true.".into());
    }
    if let Some((key, v)) = env("OTEL_TRACES_EXPORTER") {
        // A list, as the SDKs read it ("otlp,console"): ovai does its otlp part.
        let listed = |name: &str| v.split(',').any(|e| e.trim().eq_ignore_ascii_case(name));
        if listed("none") {
            return Some(format!("Traces are not exported: {key} is none."));
        }
        if !listed("otlp") {
            return Some(format!(
                "Traces are not exported: {key} is {v:?}, and ovai exports over OTLP only: set it to otlp, or \
                 leave it out."
            ));
        }
    }
    if let Some((key, v)) =
        env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        && v != "http/protobuf"
    {
        return Some(format!(
            "Traces are not exported: {key} is {v:?}, and ovai sends http/protobuf only: set it so, or leave it \
             out, with {var} naming the collector's OTLP/HTTP port (4318 by default)."
        ));
    }
    let lower = endpoint.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return Some(format!(
            "Traces are not exported: {var} is {endpoint}, and ovai exports over plain HTTP only; point it at a \
             collector on this machine (http://127.0.0.1:4318), which may forward over TLS."
        ));
    }
    let is_url = raw
        .parse::<axum::http::Uri>()
        .is_ok_and(|u| u.scheme_str() == Some("http") && u.host().is_some_and(|h| !h.is_empty()));
    if !is_url {
        return Some(format!(
            "Traces are not exported: {var} is {endpoint:?}, which is not an http:// address: name the \
             collector as http://HOST:PORT (http://127.0.0.1:4318, say)."
        ));
    }
    // The exporter sends no credentials from the address, and appends /v1/traces to a base one after its
    // query: either way nothing would arrive where the row says traces go (helper-96).
    let authority = raw.split_once("://").map_or("", |(_, rest)| rest);
    if authority
        .split(['/', '?', '#'])
        .next()
        .is_some_and(|a| a.contains('@'))
    {
        return Some(format!(
            "Traces are not exported: {var} is {endpoint}, whose user and password the exporter would not \
             send: name the collector without them, and give them in OTEL_EXPORTER_OTLP_HEADERS \
             (Authorization=Basic …)."
        ));
    }
    if var == "OTEL_EXPORTER_OTLP_ENDPOINT" && raw.contains('?') {
        return Some(format!(
            "Traces are not exported: {var} is {endpoint}, whose query the exporter would write into the \
             path (before /v1/traces): leave it out, and give a key in OTEL_EXPORTER_OTLP_HEADERS, or name \
             the whole address in OTEL_EXPORTER_OTLP_TRACES_ENDPOINT."
        ));
    }
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "ovai".into());
    let (tx, rx) = std::sync::mpsc::sync_channel::<Queued>(QUEUE);
    let _ = QUEUE_TX.set(tx.clone());
    let said = Arc::new(AtomicBool::new(false));
    let processor = Bounded {
        tx,
        log: log.clone(),
        said: said.clone(),
    };
    let thread_log = log.clone();
    let spawned = std::thread::Builder::new()
        .name("ovai-traces".into())
        .spawn(move || export_loop(&rx, &thread_log, &raw));
    if let Err(e) = spawned {
        return Some(format!(
            "Traces are not exported: their thread could not start ({e})."
        ));
    }
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            Resource::builder()
                .with_service_name(service.clone())
                .build(),
        )
        .build();
    let _ = TRACER.set(provider.tracer("ovai"));
    // The provider is kept for the daemon's life: dropping it would shut its processor down.
    std::mem::forget(provider);
    Some(format!(
        "Traces go to {endpoint} over OTLP/HTTP, as the service {service}."
    ))
}

enum Queued {
    Span(Box<SpanData>),
    Resource(Resource),
    /// Send the batch now, and say so once it is sent (or given up on).
    Flush(std::sync::mpsc::Sender<()>),
}

/// The processor: hands each ended span to the export thread, or drops it when the queue is full.
struct Bounded {
    tx: SyncSender<Queued>,
    log: Arc<RuntimeLog>,
    said: Arc<AtomicBool>,
}

impl std::fmt::Debug for Bounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bounded")
    }
}

impl SpanProcessor for Bounded {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Queued::Span(Box::new(span))) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            if !self.said.swap(true, Ordering::Relaxed) {
                self.log.row(
                    Topic::Server,
                    &format!(
                        "Trace spans are being dropped: the exporter has not kept up with {QUEUE} of them (its \
                         collector is down or slow). Calls go on; ovai_spans_dropped_total counts what is lost."
                    ),
                );
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        let _ = self.tx.try_send(Queued::Resource(resource.clone()));
    }
}

/// How long one batch's request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a batch was not sent, in words: the exporter says "network error" alike for a collector that is
/// not there and one that never answers, and the operator's next step differs.
fn unsent(said: String, took: Duration, endpoint: &str) -> String {
    if !said.contains("network error") {
        return said;
    }
    if took + Duration::from_millis(500) >= EXPORT_TIMEOUT {
        return format!(
            "it took the connection and answered nothing in {} s",
            EXPORT_TIMEOUT.as_secs()
        );
    }
    let authority = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let place = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let with_port = if place
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        place.to_string()
    } else {
        format!("{place}:80")
    };
    use std::net::ToSocketAddrs as _;
    match with_port.to_socket_addrs().map(|mut a| a.next()) {
        Err(_) | Ok(None) => format!("{place} is not a name this machine finds"),
        Ok(Some(addr)) => match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))
        {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                format!("nothing listens at {place}: is the collector running?")
            }
            _ => said,
        },
    }
}

/// `text` with the user and password `endpoint` carries (`http://user:pass@host`), and its query, hidden: runtime.log,
/// and the status page that shows it, are read by more people than the collector's credentials are for.
fn without_userinfo(text: &str, endpoint: &str) -> String {
    // The last `@` ends the credentials, whatever they hold (a `/` in a password included); one in the
    // path only hides more.
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let text = match rest.rsplit_once('@') {
        Some((userinfo, _)) if !userinfo.is_empty() => text.replace(&format!("{userinfo}@"), "…@"),
        _ => text.to_string(),
    };
    // And its query, where a collector's key may be passed (`?key=…`).
    match endpoint.split_once('?') {
        Some((_, query)) => {
            let query = query.split('#').next().unwrap_or_default();
            if query.is_empty() {
                text
            } else {
                text.replace(&format!("?{query}"), "?…")
            }
        }
        None => text,
    }
}

/// The export thread: batches what the queue brings and sends it, saying the first failure in a row
/// once, and the recovery. `raw` is the endpoint as given (what is said hides its credentials).
fn export_loop(rx: &Receiver<Queued>, log: &RuntimeLog, raw: &str) {
    use opentelemetry_otlp::WithExportConfig;
    let endpoint = without_userinfo(raw, raw);
    let hide = |e: String| without_userinfo(&e, raw);
    let built = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT)
        .build();
    let mut exporter = match built {
        Ok(e) => e,
        Err(e) => {
            log.row(
                Topic::Server,
                &format!(
                    "Traces are not exported: the OTLP exporter for {endpoint} could not be made ({}).",
                    hide(e.to_string())
                ),
            );
            // Drained and dropped, so that nothing waits on a queue nobody reads.
            while rx.recv().is_ok() {}
            return;
        }
    };
    let mut failing = false;
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH);
    loop {
        let first = match rx.recv() {
            Ok(q) => q,
            Err(_) => return,
        };
        // Who asked for this batch to go now, to be told once it went.
        let mut flushed = None;
        let mut take = |q: Queued, batch: &mut Vec<SpanData>, flushed: &mut Option<_>| match q {
            Queued::Span(s) => batch.push(*s),
            Queued::Resource(r) => exporter.set_resource(&r),
            Queued::Flush(ack) => *flushed = Some(ack),
        };
        take(first, &mut batch, &mut flushed);
        let until = std::time::Instant::now() + EVERY;
        while batch.len() < BATCH && flushed.is_none() {
            match rx.recv_timeout(until.saturating_duration_since(std::time::Instant::now())) {
                Ok(q) => take(q, &mut batch, &mut flushed),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        if batch.is_empty() {
            if let Some(ack) = flushed {
                let _ = ack.send(());
            }
            continue;
        }
        let began = std::time::Instant::now();
        let spans = batch.len() as u64;
        let sent = futures::executor::block_on(exporter.export(std::mem::take(&mut batch)));
        if sent.is_err() {
            DROPPED.fetch_add(spans, Ordering::Relaxed);
        }
        match (sent, failing) {
            (Err(e), false) => {
                failing = true;
                log.row(
                    Topic::Server,
                    &format!(
                        "Traces could not be exported to {endpoint} ({}); calls go on, and the spans of this batch are lost.",
                        unsent(hide(e.to_string()), began.elapsed(), raw)
                    ),
                );
            }
            (Ok(()), true) => {
                failing = false;
                log.row(Topic::Server, &format!("Traces reach {endpoint} again."));
            }
            _ => {}
        }
        if let Some(ack) = flushed {
            let _ = ack.send(());
        }
    }
}

/// A request's span, ended (with its status) when dropped.
pub struct RequestSpan {
    span: opentelemetry_sdk::trace::Span,
    cx: Context,
}

impl std::fmt::Debug for RequestSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestSpan")
    }
}

/// What a request's span is made of.
pub struct Request<'a> {
    pub method: &'a str,
    /// The method is one this server serves: the span is named for it. Another is named
    /// "unknown method" (its name in `mcp.method.name`), so a session's made-up names make no span names.
    pub served: bool,
    /// The tool, for a `tools/call`.
    pub tool: Option<&'a str>,
    pub id: Option<&'a rmcp::model::NumberOrString>,
    pub seat: &'a str,
    pub session: Option<String>,
    pub version: Option<&'a str>,
    pub transport: &'static str,
    /// W3C trace context the caller passed on.
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
}

/// The parent context a `traceparent` (and `tracestate`) name, if they are well formed.
fn parent_of(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    use opentelemetry::propagation::TextMapPropagator;
    let Some(tp) = traceparent else {
        return Context::new();
    };
    let mut carrier = std::collections::HashMap::new();
    carrier.insert("traceparent".to_string(), tp.to_string());
    if let Some(ts) = tracestate {
        carrier.insert("tracestate".to_string(), ts.to_string());
    }
    opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier)
}

impl RequestSpan {
    /// A request's span, when traces are on.
    pub fn start(r: &Request<'_>) -> Option<Self> {
        let tracer = tracer()?;
        // A method or tool name is the session's, as long as it likes: a span carries its start.
        let method = crate::jsonrpc::clip(r.method);
        let tool = r.tool.map(crate::jsonrpc::clip);
        let name = match &tool {
            _ if !r.served => "unknown method".to_string(),
            Some(tool) => format!("{method} {tool}"),
            None => method.clone(),
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", method),
            KeyValue::new("ovai.seat", r.seat.to_string()),
            KeyValue::new("network.transport", r.transport),
        ];
        if let Some(tool) = tool {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool));
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        if let Some(id) = r.id {
            // As the semantic conventions write it: a string id without its quotes.
            let id = match id {
                rmcp::model::NumberOrString::Number(n) => n.to_string(),
                rmcp::model::NumberOrString::String(s) => s.to_string(),
            };
            attributes.push(KeyValue::new("jsonrpc.request.id", id));
        }
        if let Some(session) = &r.session {
            attributes.push(KeyValue::new("mcp.session.id", session.clone()));
        }
        if let Some(version) = r.version {
            attributes.push(KeyValue::new("mcp.protocol.version", version.to_string()));
        }
        let parent = parent_of(r.traceparent, r.tracestate);
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        let cx = parent.with_remote_span_context(span.span_context().clone());
        Some(Self { span, cx })
    }

    /// The failure a refusal or an error is, in words.
    pub fn failed(&mut self, why: &str) {
        self.span.set_status(Status::error(why.to_string()));
    }

    /// Marks how a call that did not answer with text failed.
    pub fn outcome(&mut self, outcome: &crate::answer::Outcome) {
        use crate::answer::Outcome;
        match outcome {
            Outcome::Refused(why) => self.failed(why),
            Outcome::Cancelled | Outcome::Unsent => self.failed("cancelled"),
            Outcome::Text(_) | Outcome::Json(_) => {}
        }
    }

    /// The child span for a plugin call's host part.
    pub fn host_part(&self, tool: &str) -> Option<HostSpan> {
        let tracer = tracer()?;
        let span = tracer
            .span_builder(format!("host {tool}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(vec![KeyValue::new("gen_ai.tool.name", tool.to_string())])
            .start_with_context(tracer, &self.cx);
        Some(HostSpan { span })
    }
}

impl Drop for RequestSpan {
    fn drop(&mut self) {
        self.span.end();
    }
}

/// A plugin call's host part: from the line sent to the host to its answer.
pub struct HostSpan {
    span: opentelemetry_sdk::trace::Span,
}

impl HostSpan {
    /// The W3C trace context a plugin passes on: this span's.
    pub fn traceparent(&self) -> String {
        let c = self.span.span_context();
        format!(
            "00-{}-{}-{:02x}",
            c.trace_id(),
            c.span_id(),
            c.trace_flags().to_u8()
        )
    }

    /// Marks how a call that did not answer with text ended: refused, or cancelled (a call that waited
    /// for a host and was not made read as done).
    pub fn outcome(&mut self, outcome: &crate::answer::Outcome) {
        use crate::answer::Outcome;
        match outcome {
            Outcome::Refused(why) => self.span.set_status(Status::error(why.to_string())),
            Outcome::Cancelled | Outcome::Unsent => {
                self.span.set_status(Status::error("cancelled"))
            }
            Outcome::Text(_) | Outcome::Json(_) => {}
        }
    }
}

impl Drop for HostSpan {
    fn drop(&mut self) {
        self.span.end();
    }
}

#[cfg(test)]
mod tests {
    use super::without_userinfo;

    #[test]
    fn credentials_are_hidden_whatever_they_hold() {
        let e = "http://ann:pa/ss@127.0.0.1:4318";
        assert_eq!(without_userinfo(e, e), "http://…@127.0.0.1:4318");
        let said = format!("error sending request for url ({e}/v1/traces)");
        assert!(!without_userinfo(&said, e).contains("pa/ss"));
        let plain = "http://127.0.0.1:4318";
        assert_eq!(without_userinfo(plain, plain), plain);
        let keyed = "http://127.0.0.1:4318/?key=QSECRET";
        assert_eq!(without_userinfo(keyed, keyed), "http://127.0.0.1:4318/?…");
    }
}
