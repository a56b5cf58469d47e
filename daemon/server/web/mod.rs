//! The operator's status page: read-only and live, at `/web/` on its own loopback address (`"web":
//! {"listen": …}`) or on the HTTP endpoint (`"web": {"onHttp": true}`), never on by default.
//!
//! Who may read it: whoever holds the control secret, through `ovai web`, which asks the daemon for a
//! link with a one-time token (a minute, one use). The page trades it for an HttpOnly, SameSite=Strict
//! cookie scoped to a path of its own (`/web/s/KEY/`: browsers send a cookie to every port of its host)
//! and forgets it; the page and its data need the cookie of their path. No token appears in the page, in a URL
//! after the exchange, or in a log. A strict Content-Security-Policy (scripts and styles from the page's
//! own files only, no framing), and a request from another Origin is refused.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::daemon::Daemon;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

use super::places::Place;
use super::web_keys::SESSION_FOR;
use crate::sync::lock;
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's routes, under `/web`.
/// `on_http`: the page is served on the HTTP endpoint (whose gate checks the Host), not on a listener of
/// its own; fixed with the listener, whatever a later openovai.json says.
pub fn router(daemon: Arc<Daemon>, on_http: bool) -> Router {
    let router = Router::new()
        .route(
            "/web/",
            axum::routing::get(|| async { words(StatusCode::UNAUTHORIZED, NO_COOKIE) }),
        )
        .route("/web/s/{key}/", axum::routing::get(index))
        // Typed or pasted without its slash: the cookie is sent only below the page's own path.
        .route(
            "/web/s/{key}",
            axum::routing::get(|Path(key): Path<String>| async move {
                if key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit()) {
                    redirect(&format!("/web/s/{key}/"), None)
                } else {
                    words(StatusCode::NOT_FOUND, NO_COOKIE)
                }
            }),
        )
        .route("/web/login", axum::routing::get(login))
        .route(
            "/web/app.js",
            axum::routing::get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/web/style.css",
            axum::routing::get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route("/web/s/{key}/api/state", axum::routing::get(state))
        .route("/web/s/{key}/api/events", axum::routing::get(events))
        .route(
            "/web",
            axum::routing::get(|| async { redirect("/web/", None) }),
        );
    // On a listener of its own, the bare address is the page's too, and what it does not serve is
    // answered in words; on the HTTP endpoint, the endpoint's own fallback answers.
    let router = if on_http {
        router
    } else {
        router
            .route(
                "/",
                axum::routing::get(|| async { redirect("/web/", None) }),
            )
            .fallback(|| async {
                words(
                    StatusCode::NOT_FOUND,
                    "This is ovai's status page, at /web/: `ovai web` prints its address with the key.",
                )
            })
            // Set on the routes made so far: last.
            .method_not_allowed_fallback(|| async {
                words(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "The status page is read with GET; it changes nothing.",
                )
            })
    };
    router
        .layer(axum::middleware::from_fn_with_state(on_http, guard))
        .with_state(daemon)
}

/// Every answer carries the policy. A request is refused that names a host the page does not answer to
/// (as a DNS-rebinding page's does: on its own listener, only loopback names; on the HTTP endpoint, the
/// endpoint's own rules, checked there), or comes from another origin.
async fn guard(State(on_http): State<bool>, request: Request, next: Next) -> Response {
    let hosts: Vec<&str> = request
        .headers()
        .get_all(header::HOST)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .collect();
    let line = request.uri().authority().map(|a| a.as_str());
    let ours = |host: &str| {
        (on_http || crate::names::is_loopback_authority(host))
            && !crate::names::line_names_another_host(line, host)
    };
    let mut origins = request.headers().get_all(header::ORIGIN).iter();
    // Two are one too many, whichever of them is the page's own.
    let origin = match (origins.next(), origins.next()) {
        (Some(o), None) => Some(o.to_str().unwrap_or("?").to_string()),
        (Some(_), Some(_)) => Some("?".to_string()),
        (None, _) => None,
    };
    let refused = match hosts[..] {
        [host] if ours(host) => origin
            .filter(|o| {
                let bare = o
                    .strip_prefix("http://")
                    .or_else(|| o.strip_prefix("https://"));
                bare.is_none_or(|b| !b.eq_ignore_ascii_case(host))
            })
            .map(|_| "This page answers only itself: a request from another origin is refused."),
        _ => Some(
            "This page answers only at the address `ovai web` links to: a request naming another host is \
             refused.",
        ),
    };
    let mut response = if let Some(why) = refused {
        words(StatusCode::FORBIDDEN, why)
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn words(status: StatusCode, sentence: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{sentence}\n"),
    )
        .into_response()
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn redirect(to: &str, cookie: Option<HeaderValue>) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(to) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, to);
    }
    if let Some(cookie) = cookie {
        r.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    r
}

/// The page's cookie: `name=value`, sent only to the page's own path; `secure`: the page is served
/// over TLS, and the cookie is never sent without it.
fn cookie(name: &str, value: &str, path: &str, secure: bool) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!(
        "{name}={value}; HttpOnly; SameSite=Strict; Path={path}; Max-Age={}{}",
        SESSION_FOR.as_secs(),
        if secure { "; Secure" } else { "" }
    ))
    .ok()
}

const NO_COOKIE: &str = "This is ovai's status page. It opens from a link `ovai web` prints on the server's \
                         machine (good for a minute, and for one use): run it there and open the link.";

async fn login(State(daemon): State<Arc<Daemon>>, uri: Uri) -> Response {
    let Some(web) = daemon.web.get() else {
        return words(StatusCode::NOT_FOUND, "The status page is off.");
    };
    let token = uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("t="));
    match token.filter(|t| t.len() == 64).and_then(|t| web.redeem(t)) {
        Some((value, key)) => {
            let secure = lock(&web.base)
                .as_deref()
                .is_some_and(|b| b.starts_with("https:"));
            let path = format!("/web/s/{key}");
            let cookie = cookie(&web.cookie_name(), &value, &path, secure);
            redirect(&format!("{path}/"), cookie)
        }
        None => words(
            StatusCode::UNAUTHORIZED,
            "This link was used already, ended (`ovai web --end`), or is more than a minute old: run `ovai web` again \
             for a new one.",
        ),
    }
}

async fn index(
    State(daemon): State<Arc<Daemon>>,
    Path(key): Path<String>,
    place: Option<Extension<Arc<Place>>>,
    headers: HeaderMap,
) -> Response {
    if !admitted(&daemon, &headers, &key, place) {
        return words(StatusCode::UNAUTHORIZED, NO_COOKIE);
    }
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

/// Whether the request holds a good cookie of the page path `key`; its connection then keeps its place
/// on the page's listener (`http::serve::accept_operator`), whoever else connects.
fn admitted(
    daemon: &Daemon,
    headers: &HeaderMap,
    key: &str,
    place: Option<Extension<Arc<Place>>>,
) -> bool {
    let admitted = daemon.web.get().is_some_and(|w| w.admits(headers, key));
    if admitted && let Some(Extension(place)) = place {
        place.seat_seen();
    }
    admitted
}

async fn state(
    State(daemon): State<Arc<Daemon>>,
    Path(key): Path<String>,
    place: Option<Extension<Arc<Place>>>,
    headers: HeaderMap,
) -> Response {
    if !admitted(&daemon, &headers, &key, place) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "application/json")],
            json!({ "error": NO_COOKIE }).to_string(),
        )
            .into_response();
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        shared_state(&daemon).await.to_string(),
    )
        .into_response()
}

/// How many quiet seconds pass before the stream says it is still there (an SSE comment, which the page
/// does not see): a proxy or a browser closes a stream silent for long.
const QUIET_SECONDS: u32 = 5;

/// The state as server-sent events, while the cookie is good and the page reads: looked at once a second
/// and sent when it changed (a page left open all day sent its whole state every second, room messages
/// and log rows included: 330 KB a second), with a comment after QUIET_SECONDS of no change.
async fn events(
    State(daemon): State<Arc<Daemon>>,
    Path(key): Path<String>,
    place: Option<Extension<Arc<Place>>>,
    headers: HeaderMap,
) -> Response {
    if !admitted(&daemon, &headers, &key, place) {
        return words(StatusCode::UNAUTHORIZED, NO_COOKIE);
    }
    let closing = daemon.closing.clone();
    let (headers, key) = (Arc::new(headers), Arc::new(key));
    let stream = futures::stream::unfold((daemon, None::<Arc<String>>), move |(daemon, last)| {
        let closing = closing.clone();
        let (headers, key) = (headers.clone(), key.clone());
        async move {
            let mut quiet = 0;
            loop {
                if last.is_some() {
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = closing.cancelled() => return None,
                    }
                }
                if !daemon.web.get().is_some_and(|w| w.admits(&headers, &key)) {
                    return None;
                }
                let now = shared_state(&daemon).await;
                if last.as_deref() != Some(&*now) {
                    let event = bytes::Bytes::from(format!("data: {now}\n\n"));
                    return Some((Ok::<_, std::io::Error>(event), (daemon, Some(now))));
                }
                quiet += 1;
                if quiet == QUIET_SECONDS {
                    let still = bytes::Bytes::from_static(b": nothing changed\n\n");
                    return Some((Ok(still), (daemon, last)));
                }
            }
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// How long a reading of the state serves every page that asks: each open page (or stream) read it
/// afresh each second, and twenty of them took a third of a core.
const STATE_FOR: Duration = Duration::from_millis(900);

/// The state as the page is sent it, read at most once in STATE_FOR whatever the number of pages.
async fn shared_state(daemon: &Arc<Daemon>) -> Arc<String> {
    let Some(web) = daemon.web.get() else {
        return Arc::new(snapshot(daemon).await.to_string());
    };
    // Held while it is read: pages asking meanwhile wait for this reading instead of making their own.
    let mut last = web.state.lock().await;
    if let Some((at, text)) = last.as_ref()
        && at.elapsed() < STATE_FOR
    {
        return text.clone();
    }
    let text = Arc::new(snapshot(daemon).await.to_string());
    *last = Some((std::time::Instant::now(), text.clone()));
    text
}

/// What the page shows, read now: seats, tools, the host, the latest calls, the room and the log.
async fn snapshot(daemon: &Arc<Daemon>) -> Value {
    // The latest calls first: a call shown is then in its seat's figures and sessions too, read after it.
    let calls = daemon.figures.recent();
    let status = super::control::status(daemon, false).await;
    let generation = daemon.current();
    let by_transport = daemon.sessions.count_by_seat_and_transport();
    let seats: Vec<Value> = status
        .seats
        .iter()
        .map(|s| {
            let (calls, refusals) = daemon.figures.today(&s.name);
            let transports: Vec<&str> = by_transport
                .iter()
                .filter(|((seat, _), n)| seat == &s.name && **n > 0)
                .map(|((_, t), _)| *t)
                .collect();
            json!({
                "name": s.name, "role": s.role, "sessions": s.sessions,
                "over": transports, "calls": calls, "refusals": refusals,
            })
        })
        .collect();
    let tools: Vec<Value> = generation
        .tools
        .listed()
        .iter()
        .map(|t| {
            let kind = match generation.tools.get(&t.name).map(|e| &e.kind) {
                Some(crate::tools::Kind::Plugin { file }) => file.to_string(),
                _ => "built-in".to_string(),
            };
            json!({ "name": t.name, "kind": kind, "bytes": super::restart_row::bytes(t) })
        })
        .collect();
    // And those served whose calls the live host refuses (it left them out when it started).
    let not_served: Vec<&String> = generation
        .rows
        .iter()
        .filter(|r| r.contains(" is not served"))
        .chain(&status.host.not_answering)
        .collect();
    let (ends, respawns) = crate::host::ending::counts();
    // In tenths of a MB, as the page shows it: a change below that is no change to send.
    let memory = status.host.pid.map(|pid| {
        let tenth = (1u64 << 20) / 10;
        crate::host::bounds::box_usage(pid).0 / tenth * tenth
    });
    let inst = daemon.inst.clone();
    let (room, log) = tokio::task::spawn_blocking(move || {
        let room: Vec<Value> = crate::tools::room::Room::recent(&inst.room_file(), 20)
            .into_iter()
            .map(|m| {
                json!({
                    "at": m.at,
                    "seat": crate::names::escape_controls(&m.seat, false),
                    "text": crate::names::escape_controls(&m.text, true),
                })
            })
            .collect();
        // A row per tool served, which the tools table lists, would push every other row out after a
        // restart of many plugins (helper-96).
        let log = crate::runtime_log::latest(&inst.runtime_log(), 30, |row| {
            crate::runtime_log::parse_row(row)
                .is_none_or(|(_, _, said)| !said.starts_with(crate::plugins::plugin_rows::SERVED))
        });
        (room, log)
    })
    .await
    .unwrap_or_default();
    json!({
        "root": daemon.inst.root.display().to_string(),
        "generation": generation.number,
        "since": daemon.started_at,
        "seats": seats,
        "tools": tools,
        "notServed": not_served,
        "host": {
            "pid": status.host.pid, "box": status.host.isolation, "bounds": status.host.bounds,
            "memoryBytes": memory, "respawns": respawns,
            "ends": ends.iter().map(|(c, n)| json!({ "cause": c, "count": n })).collect::<Vec<_>>(),
            "down": status.host.down,
        },
        "calls": calls,
        // When each began, not for how long: the state then changes when a call does, not every second.
        "running": status.calls_running.iter().map(|c| json!({
            "seat": c.seat, "file": c.file, "startedMs": c.started_ms,
        })).collect::<Vec<_>>(),
        "runningTotal": status.calls_running_total,
        "room": room,
        "log": log,
    })
}
