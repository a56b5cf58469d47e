//! The operator's status page, in a real browser: Debian's Chromium (installed by scripts/test), headless,
//! driven over its DevTools protocol. `ovai web`'s one-time link opens the page; the seats and tools are
//! on it; a call the test makes appears without a reload; the link does not open it twice; the data
//! needs the page's cookie. A screenshot is left in the test's output folder for a person to look at.

mod common;
use common::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::PathBuf;

const ECHO: &str = r#"
export const description = "Echoes.";
export const inputSchema = { type: "object", properties: {}, additionalProperties: false };
export function run(args, { seat }) { return { text: `echo for ${seat}` }; }
"#;

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// A GET on loopback: (status line, body), with `cookie` if given.
fn get(url: &str, cookie: Option<&str>) -> (String, String) {
    try_get(url, cookie).unwrap_or_else(|| panic!("GET {url} found no server"))
}

fn try_get(url: &str, cookie: Option<&str>) -> Option<(String, String)> {
    use std::io::BufRead;
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = rest.split_at(rest.find('/')?);
    let mut s = std::net::TcpStream::connect(authority).ok()?;
    s.set_read_timeout(Some(PATIENCE)).ok()?;
    let cookie = cookie
        .map(|c| format!("Cookie: {c}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{cookie}\r\n"
    )
    .ok()?;
    // Chromium keeps the connection open whatever is asked: the body is as long as its header says.
    let mut reader = std::io::BufReader::new(s);
    let mut status = String::new();
    reader.read_line(&mut status).ok()?;
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = Vec::new();
    match length {
        Some(n) => {
            body.resize(n, 0);
            reader.read_exact(&mut body).ok()?;
        }
        None => {
            reader.read_to_end(&mut body).ok()?;
        }
    }
    Some((
        status.trim_end().to_string(),
        String::from_utf8_lossy(&body).into_owned(),
    ))
}

/// A headless Chromium and the WebSocket of its one page.
struct Browser {
    child: std::process::Child,
    _profile: tempfile::TempDir,
    socket: tungstenite::WebSocket<std::net::TcpStream>,
    next: u64,
}

impl Browser {
    fn open(url: &str) -> Self {
        let chromium = which("chromium").expect(
            "Chromium is not installed: scripts/test installs Debian's chromium with apt-get where it runs as root \
             (apt-get install chromium)",
        );
        let profile = tempfile::tempdir_in("/tmp").unwrap();
        let child = std::process::Command::new(chromium)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
                "--window-size=1280,1100",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromium starts");
        // Killed if anything below fails, before the browser is ours to drop.
        struct Guard(Option<std::process::Child>);
        impl Drop for Guard {
            fn drop(&mut self) {
                if let Some(mut c) = self.0.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
        let mut guard = Guard(Some(child));
        let port: u16 = wait_until("Chromium's DevTools port", || {
            let text = std::fs::read_to_string(profile.path().join("DevToolsActivePort")).ok()?;
            text.lines().next()?.trim().parse().ok()
        });
        let ws = wait_until("Chromium's page", || {
            let (status, body) = try_get(&format!("http://127.0.0.1:{port}/json/list"), None)?;
            if !status.contains("200") {
                return None;
            }
            let pages: Value = serde_json::from_str(&body).ok()?;
            pages.as_array()?.iter().find_map(|p| {
                (p["type"] == "page")
                    .then(|| p["webSocketDebuggerUrl"].as_str().map(str::to_string))
                    .flatten()
            })
        });
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let (socket, _) = tungstenite::client(ws.as_str(), stream).expect("the DevTools WebSocket");
        let child = guard.0.take().expect("the browser");
        Self {
            child,
            _profile: profile,
            socket,
            next: 1,
        }
    }

    /// Sends a DevTools command and returns its result.
    fn command(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.socket
            .send(tungstenite::Message::text(
                json!({ "id": id, "method": method, "params": params }).to_string(),
            ))
            .unwrap();
        loop {
            let msg = self.socket.read().expect("a DevTools message");
            let Ok(text) = msg.to_text() else { continue };
            let v: Value = serde_json::from_str(text).unwrap_or_default();
            if v["id"] == id {
                return v["result"].clone();
            }
        }
    }

    /// What a JavaScript expression evaluates to in the page, as a string.
    fn eval(&mut self, expression: &str) -> String {
        let r = self.command(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        r["result"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits: Vec<u8> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | (u32::from(*d) << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}

#[test]
fn the_status_page_shows_the_instance_live_in_a_real_browser() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    inst.add_seat("w1");
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    let out = inst.cmd().arg("web").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(url.contains("/web/login?t="), "{url}");
    let base = url.split("login?").next().unwrap().to_string();

    let mut browser = Browser::open(&url);
    let text = wait_until("the seats and tools on the page", || {
        let text = browser.eval("document.body.innerText");
        (text.contains("w1") && text.contains("echo") && text.contains("plugins/echo.mjs"))
            .then_some(text)
    });
    assert!(text.contains("lead") && text.contains("Leader"), "{text}");
    // The day's figures say what day, and since when (helper-61: read as the day's, they reset at a start).
    assert!(
        text.contains("calls today (UTC)") && text.contains("Counted since this server started"),
        "{text}"
    );
    // After the exchange the page's own URL carries no token: it is the page's path of its own, which
    // its cookie is scoped to.
    let href = browser.eval("location.href");
    let key = href
        .strip_prefix(&format!("{base}s/"))
        .and_then(|k| k.strip_suffix('/'))
        .unwrap_or_else(|| panic!("{href}"));
    assert!(
        key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit()),
        "{href}"
    );

    // A call made now appears without a reload.
    let mut s = inst.session("w1");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({})),
        ("echo for w1".to_string(), false)
    );
    let calls = wait_until("the call on the page", || {
        let calls = browser.eval("document.getElementById('calls').innerText");
        calls.contains("echo").then_some(calls)
    });
    assert!(calls.contains("w1") && calls.contains("text"), "{calls}");
    let seats = browser.eval("document.getElementById('seats').innerText");
    assert!(seats.contains("yes (socket)"), "{seats}");
    // The room's words, escaped as the room escapes them, never read as markup.
    let (said, refused) = s.call("room", json!({ "say": "<b>hi</b> \u{1b}[31m team" }));
    assert!(!refused, "{said}");
    let room = wait_until("the room on the page", || {
        let room = browser.eval("document.getElementById('room').innerText");
        room.contains("team").then_some(room)
    });
    // Who said it, and on a line of its own, what: a message's own lines cannot pass for another's.
    assert!(room.contains("w1:\n<b>hi</b> \\u{1b}[31m team"), "{room}");
    assert_eq!(
        browser.eval("String(document.querySelectorAll('#room b').length)"),
        "0"
    );

    // A screenshot, for a person to look at.
    let shot = browser.command("Page.captureScreenshot", json!({ "format": "png" }));
    let png = base64(shot["data"].as_str().unwrap_or_default());
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-status.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("the status page as Chromium drew it: {}", path.display());

    // The link opens the page once only; the data needs the page's cookie.
    let (status, body) = get(&url, None);
    assert!(status.contains("401"), "{status}");
    assert!(body.contains("used already"), "{body}");
    let (status, _) = get(&format!("{href}api/state"), None);
    assert!(status.contains("401"), "{status}");
    let (status, _) = get(&format!("{href}api/state"), Some("ovai_web_1=not-a-cookie"));
    assert!(status.contains("401"), "{status}");
    let (status, body) = get(&base, None);
    assert!(
        status.contains("401") && body.contains("run it there and open the link"),
        "{status}"
    );
}

#[test]
fn the_page_is_off_unless_asked_for() {
    use predicates::prelude::*;
    let inst = Instance::new();
    let _d = inst.start();
    inst.cmd()
        .arg("web")
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "the status page is off: add \"web\"",
        ));
    // Asked for after the start (a restart reads it, and says the page waits for the next start): the
    // words say only what is left to do.
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    inst.cmd().arg("restart").assert().success();
    inst.cmd().arg("web").assert().code(1).stderr(
        predicates::str::contains("was added after this server started")
            .and(predicates::str::contains("add \"web\"").not()),
    );
}

/// On an HTTP endpoint other machines reach in plain HTTP, the page's link and cookie would cross the
/// network in clear: the server does not start so, and says what to do instead.
#[test]
fn the_page_is_not_served_in_clear_to_the_network() {
    let inst = Instance::new();
    inst.set_config(json!({
        "http": { "listen": "0.0.0.0:0", "insecure": true },
        "web": { "onHttp": true },
    }));
    let out = inst.cmd().arg("serve").timeout(PATIENCE).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("would cross the network in clear") && said.contains("Give the endpoint TLS"),
        "{said}"
    );
}

/// A request naming another host (a DNS-rebinding page's), two hosts, or an origin that is not the page's
/// own (another scheme included) is refused in words; the page's loopback aliases are its own.
#[test]
fn the_page_answers_only_at_its_own_address() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = nobody.local_addr().unwrap().port();
    drop(nobody);
    let inst = Instance::new();
    inst.set_config(json!({ "web": { "listen": format!("127.0.0.1:{port}") } }));
    let _d = inst.start();
    let ask_at = |path: &str, headers: &str| {
        exchange(
            ("127.0.0.1", port),
            &format!("GET {path} HTTP/1.1\r\n{headers}connection: close\r\n\r\n"),
        )
    };
    let ask = |headers: &str| ask_at("/web/s/00000000000000000000000000000000/api/state", headers);
    // What it does not serve, or a method it does not take, is answered in words, not a bare status.
    let elsewhere = ask_at("/nothing/here", &format!("Host: 127.0.0.1:{port}\r\n"));
    assert!(
        elsewhere.starts_with("HTTP/1.1 404") && elsewhere.contains("This is ovai's status page"),
        "{elsewhere}"
    );
    let posted = exchange(
        ("127.0.0.1", port),
        &format!(
            "POST /web/app.js HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
    );
    assert!(
        posted.starts_with("HTTP/1.1 405") && posted.contains("read with GET"),
        "{posted}"
    );
    // The page's own listener sends a bare address on to the page.
    let root = ask_at("/", &format!("Host: 127.0.0.1:{port}\r\n"));
    assert!(root.starts_with("HTTP/1.1 303"), "{root}");
    assert!(root.to_lowercase().contains("location: /web/"), "{root}");
    let own = ask(&format!("Host: 127.0.0.1:{port}\r\n"));
    assert!(own.starts_with("HTTP/1.1 401"), "{own}");
    let alias = ask(&format!("Host: localhost:{port}\r\n"));
    assert!(alias.starts_with("HTTP/1.1 401"), "{alias}");
    // Any loopback address the page may listen on is its own.
    let other = ask(&format!("Host: 127.0.0.2:{port}\r\n"));
    assert!(other.starts_with("HTTP/1.1 401"), "{other}");
    for headers in [
        format!("Host: evil.example:{port}\r\n"),
        format!("Host: 127.0.0.1:{port}\r\nHost: evil.example\r\n"),
    ] {
        let text = ask(&headers);
        assert!(
            text.starts_with("HTTP/1.1 403")
                && text.contains("a request naming another host is refused"),
            "{headers}: {text}"
        );
    }
    let text = ask(&format!(
        "Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example:{port}\r\n"
    ));
    assert!(
        text.starts_with("HTTP/1.1 403") && text.contains("another origin"),
        "{text}"
    );
    // A request line naming another host is for that host, whatever Host says (helper-96: answered);
    // two Origins are one too many, the page's own among them.
    let text = ask_at(
        "http://evil.example/web/s/00000000000000000000000000000000/api/state",
        &format!("Host: 127.0.0.1:{port}\r\n"),
    );
    assert!(
        text.starts_with("HTTP/1.1 403")
            && text.contains("a request naming another host is refused"),
        "{text}"
    );
    let text = ask(&format!(
        "Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n"
    ));
    assert!(
        text.starts_with("HTTP/1.1 403") && text.contains("another origin"),
        "{text}"
    );
    // The cookie is named for the page's port: two instances' pages on 127.0.0.1 keep theirs apart.
    let out = inst.cmd().arg("web").output().unwrap();
    let link = String::from_utf8_lossy(&out.stdout).to_string();
    let login = link[link.find("/web/login?t=").unwrap()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let answer = ask_at(&login, &format!("Host: 127.0.0.1:{port}\r\n"));
    let set = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .unwrap_or_else(|| panic!("{answer}"));
    let (name, value) = set.split(';').next().unwrap().split_once('=').unwrap();
    assert_eq!(name, format!("ovai_web_{port}"));
    // Scoped to the page's path of its own, where the login sends the browser.
    let path = set
        .split("; ")
        .find_map(|a| a.strip_prefix("Path="))
        .unwrap_or_else(|| panic!("{set}"));
    assert!(
        path.starts_with("/web/s/") && path.len() == "/web/s/".len() + 32,
        "{set}"
    );
    assert!(
        answer.lines().any(|l| l == format!("location: {path}/")),
        "{answer}"
    );
    let with = |at: &str, cookie: &str| {
        ask_at(
            &format!("{at}/api/state"),
            &format!("Host: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"),
        )
    };
    let read = with(path, &format!("ovai_web_1=x; {name}={value}"));
    assert!(read.starts_with("HTTP/1.1 200"), "{read}");
    let other = with(path, &format!("ovai_web_1={value}"));
    assert!(other.starts_with("HTTP/1.1 401"), "{other}");
    // The cookie is good for its own path only.
    let elsewhere = with(
        "/web/s/00000000000000000000000000000000",
        &format!("{name}={value}"),
    );
    assert!(elsewhere.starts_with("HTTP/1.1 401"), "{elsewhere}");
    // `ovai web --end` ends every page opened, and every link not yet used.
    let unused = inst.cmd().arg("web").output().unwrap();
    let unused = String::from_utf8_lossy(&unused.stdout).trim().to_string();
    let ended = inst.cmd().args(["web", "--end"]).output().unwrap();
    let said = String::from_utf8_lossy(&ended.stdout);
    assert!(ended.status.success(), "{said}");
    assert!(
        said.contains("Ended 1 page session and 1 unused link"),
        "{said}"
    );
    let read = with(path, &format!("{name}={value}"));
    assert!(read.starts_with("HTTP/1.1 401"), "{read}");
    let login = &unused[unused.find("/web/login?t=").unwrap()..];
    let answer = ask_at(login, &format!("Host: 127.0.0.1:{port}\r\n"));
    assert!(
        // An ended link is said to be one (helper-103: only "used already, or more than a minute old").
        answer.starts_with("HTTP/1.1 401")
            && answer.contains("used already, ended (`ovai web --end`)"),
        "{answer}"
    );
    inst.wait_for_row(
        "server",
        "The status page's sessions were ended (`ovai web --end`)",
    );
}

/// A page with a listener of its own is not served on the HTTP endpoint too (where it would be open to
/// whoever reaches that, in clear when the endpoint is `insecure`).
#[test]
fn a_page_with_its_own_address_is_not_on_the_http_endpoint() {
    let inst = Instance::new();
    inst.set_config(
        json!({ "http": { "listen": "127.0.0.1:0" }, "web": { "listen": "127.0.0.1:0" } }),
    );
    let d = inst.start();
    // `ovai status` says where the page is.
    let page = d.status().unwrap()["web"].as_str().unwrap().to_string();
    let status = inst.cmd().arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains(&format!(
            "Status page: {page} (`ovai web` prints a link that opens it)."
        )),
        "{status}"
    );
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    for path in [
        "/web/s/00000000000000000000000000000000/api/state",
        "/web/",
        "/web/login?t=x",
    ] {
        let mut s = std::net::TcpStream::connect(&authority).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        // The endpoint's own refusal of a request without a seat's secret, not the page's.
        assert!(
            text.starts_with("HTTP/1.1 401")
                && text.contains("the seat's secret as a bearer token"),
            "{path}: {text}"
        );
    }
}

/// On the HTTP endpoint, the page keeps the endpoint's own Host rules: a name made to point at it (DNS
/// rebinding) is refused there as it is at /mcp, and two Host headers are too.
#[test]
fn on_the_http_endpoint_the_page_keeps_its_host_rules() {
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" }, "web": { "onHttp": true } }));
    let d = inst.start();
    let url = d.status().unwrap()["http"].as_str().unwrap().to_string();
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let ask = |headers: &str| {
        let mut s = std::net::TcpStream::connect(&authority).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        write!(
            s,
            "GET /web/s/00000000000000000000000000000000/api/state HTTP/1.1\r\n{headers}connection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text
    };
    // The page's own refusal (no cookie), not the endpoint's.
    let own = ask(&format!("Host: {authority}\r\n"));
    assert!(
        own.starts_with("HTTP/1.1 401") && own.contains("It opens from a link `ovai web` prints"),
        "{own}"
    );
    let evil = ask("Host: evil.example\r\n");
    assert!(
        evil.starts_with("HTTP/1.1 403") && evil.contains("does not answer to the host name"),
        "{evil}"
    );
    let two = ask(&format!("Host: {authority}\r\nHost: evil.example\r\n"));
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
    // None at all is told to send one, not that the name "" is refused.
    let none = ask("");
    assert!(
        none.starts_with("HTTP/1.1 400")
            && none.contains("this request has no Host header: send one naming this server"),
        "{none}"
    );
}

/// Browsers keep cookies by host, not by port: a page another local user serves on another port of
/// 127.0.0.1, opened in the operator's browser, must not be sent the status page's cookie. It is
/// scoped to a path of the page's own, which nobody else knows.
#[test]
fn another_port_on_the_same_host_is_not_sent_the_pages_cookie() {
    let inst = Instance::new();
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    let out = inst.cmd().arg("web").output().unwrap();
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let mut browser = Browser::open(&url);
    wait_until("the page to draw", || {
        browser
            .eval("document.getElementById('where').innerText")
            .contains(inst.root.to_str().unwrap())
            .then_some(())
    });
    // Another user's server on another port: a page that loads an image from under /web/.
    let thief = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = thief.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let heard = seen.clone();
    std::thread::spawn(move || {
        for conn in thief.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let body = "<img src=\"/web/pixel.png\"><img src=\"/web/api/state\">";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            heard.lock().unwrap().push(head);
        }
    });
    browser.command(
        "Page.navigate",
        json!({ "url": format!("http://127.0.0.1:{port}/") }),
    );
    let asked = wait_until("the other page's images to be asked for", || {
        let seen = seen.lock().unwrap();
        (seen.iter().filter(|h| h.starts_with("GET /web/")).count() == 2).then(|| seen.clone())
    });
    for head in asked {
        assert!(!head.to_lowercase().contains("ovai_web"), "{head}");
    }
}

/// The page opened without a browser: its address, its cookie (`name=value`) and its own path.
fn opened(inst: &Instance) -> (String, String, String) {
    let out = inst.cmd().arg("web").output().unwrap();
    let link = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let rest = link.strip_prefix("http://").unwrap();
    let (authority, login) = rest.split_at(rest.find('/').unwrap());
    let mut answer = String::new();
    let _ = ask(
        authority,
        &format!("GET {login} HTTP/1.1\r\nHost: {authority}\r\nconnection: close\r\n\r\n"),
    )
    .read_to_string(&mut answer);
    let header = |name: &str| {
        answer
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {answer}"))
            .to_string()
    };
    let cookie = header("set-cookie: ")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    (authority.to_string(), cookie, header("location: "))
}

/// A connection to `authority` that has sent `request`.
fn ask(authority: &str, request: &str) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(authority).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(s, "{request}").unwrap();
    s
}

/// The page's live stream, read as far as its next event: false once it ended.
struct Live(std::io::BufReader<std::net::TcpStream>);

impl Live {
    fn open(authority: &str, cookie: &str, page: &str) -> Self {
        Self(std::io::BufReader::new(ask(
            authority,
            &format!(
                "GET {page}api/events HTTP/1.1\r\nHost: {authority}\r\nCookie: {cookie}\r\n\r\n"
            ),
        )))
    }

    /// Whether the stream goes on: a state, or its word that nothing changed.
    fn next_event(&mut self) -> bool {
        self.next().is_some()
    }

    /// The next state sent (`Some(Some(json))`), or the stream's word that nothing changed
    /// (`Some(None)`); None once it ended.
    fn next(&mut self) -> Option<Option<String>> {
        use std::io::BufRead;
        loop {
            let mut line = String::new();
            match self.0.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) if line.starts_with("data: {") => {
                    return Some(Some(line["data: ".len()..].trim_end().to_string()));
                }
                Ok(_) if line.starts_with(": ") => return Some(None),
                Ok(_) => {}
            }
        }
    }
}

/// The page's stream sends the state when it changed, not every second: an idle page left open all day
/// was sent its whole state (room messages and log rows) each second, 330 KB a second with a busy room.
#[test]
fn the_live_stream_sends_the_state_when_it_changed() {
    let inst = Instance::new();
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    let (authority, cookie, page) = opened(&inst);
    let mut live = Live::open(&authority, &cookie, &page);
    let mut last = live.next().flatten().expect("the first state");
    // Until the stream says nothing changed, every state it sends is a new one.
    while let Some(state) = live.next().expect("the stream went on") {
        assert_ne!(state, last, "the same state was sent twice");
        last = state;
    }
    inst.cmd()
        .args([
            "call",
            "room",
            r#"{"say":"the build is green"}"#,
            "--seat",
            "lead",
        ])
        .assert()
        .success();
    let state = live
        .next()
        .flatten()
        .expect("a state once the room changed");
    assert!(state.contains("the build is green"), "{state}");
}

/// Anybody on the machine may open connections to the page's listener, which holds 32: those make room
/// by closing the oldest that showed no cookie, never the operator's live stream.
#[test]
fn connections_showing_no_cookie_cannot_cut_the_pages_live_stream() {
    let inst = Instance::new();
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    let (authority, cookie, page) = opened(&inst);
    let mut live = Live::open(&authority, &cookie, &page);
    assert!(live.next_event(), "the first event");
    // Forty connections that send nothing, held open.
    let flood: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(&authority).unwrap())
        .collect();
    for _ in 0..3 {
        assert!(live.next_event(), "the live stream was cut");
    }
    drop(flood);
}

/// When every one of the listener's 32 places holds the page (its cookie shown), a newcomer is told so
/// in words, and the page's streams go on.
#[test]
fn a_listener_full_of_the_pages_own_connections_turns_a_newcomer_away_in_words() {
    let inst = Instance::new();
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    let (authority, cookie, page) = opened(&inst);
    let mut streams: Vec<Live> = (0..32)
        .map(|_| Live::open(&authority, &cookie, &page))
        .collect();
    for live in &mut streams {
        assert!(live.next_event(), "each stream's first event");
    }
    let mut answer = String::new();
    let _ = ask(
        &authority,
        &format!("GET {page} HTTP/1.1\r\nHost: {authority}\r\nCookie: {cookie}\r\n\r\n"),
    )
    .read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 503")
            && answer.contains("holds 32 connections of the status page already"),
        "{answer}"
    );
    assert!(streams[0].next_event() && streams[31].next_event());
}

/// Another user who takes the page's or the metrics' port first keeps the operator from those only, not
/// every seat from the server: it starts without them, and says so where the operator looks.
#[test]
fn a_taken_page_or_metrics_port_does_not_keep_the_server_from_starting() {
    let taken_page = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let page = taken_page.local_addr().unwrap();
    let metrics = taken_metrics.local_addr().unwrap();
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    inst.set_config(json!({
        "web": { "listen": page.to_string() },
        "metrics": { "listen": metrics.to_string() },
    }));
    let _d = inst.start();
    let rows = inst.rows("server");
    assert!(
        rows.iter().any(
            |r| r.starts_with(&format!("The status page cannot listen on {page}"))
                && r.contains("the server goes on without it")
        ),
        "{rows:?}"
    );
    assert!(
        rows.iter().any(|r| r
            .starts_with(&format!("The metrics endpoint cannot listen on {metrics}"))
            && r.contains("the server goes on without it")),
        "{rows:?}"
    );
    for args in [&["web"][..], &["web", "--end"]] {
        let out = inst.cmd().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!("the status page cannot listen on {page}")),
            "{args:?}: {err}"
        );
    }
    // `ovai status` says it too, where the page's address would be.
    let status = inst.cmd().arg("status").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains(&format!("The status page cannot listen on {page}"))
            && status.contains(&format!("The metrics endpoint cannot listen on {metrics}")),
        "{status}"
    );
    let mut s = inst.session("lead");
    s.initialize();
    assert_eq!(
        s.call("echo", json!({})),
        ("echo for lead".to_string(), false)
    );
    drop((taken_page, taken_metrics));
}

/// What an operator watching all day met (helper-45): a long unbroken word in the room or a row ran
/// over the next panel, the log panel opened on its oldest rows, a selection was cleared by each
/// redraw, a narrow window cut columns off, and a room message's lines ran together.
#[test]
fn the_status_page_stays_readable_long_words_newest_rows_selections_narrow_windows() {
    let inst = Instance::with_plugins(&[("echo.mjs", ECHO)]);
    inst.add_seat("w1");
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let d = inst.start();
    // Rows enough to fill the log panel past its height.
    for _ in 0..8 {
        inst.cmd().arg("restart").assert().success();
    }
    let out = inst.cmd().arg("web").output().unwrap();
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let mut browser = Browser::open(&url);
    let mut s = inst.session("w1");
    s.initialize();
    let word = "W".repeat(600);
    assert!(!s.call("room", json!({ "say": word })).1);
    assert!(!s.call("room", json!({ "say": "line one\nline two" })).1);
    wait_until("the room on the page", || {
        let room = browser.eval("document.getElementById('room').innerText");
        room.contains("line two").then_some(())
    });
    let fits = "String(document.documentElement.scrollWidth <= window.innerWidth)";
    assert_eq!(browser.eval(fits), "true", "a long word widens the page");
    assert!(
        browser
            .eval("document.getElementById('room').innerText")
            .contains("line one\nline two")
    );
    // The newest rows are in view.
    let log = "(() => { const p = document.getElementById('log'); \
               return String(p.scrollHeight > p.clientHeight && p.scrollTop + p.clientHeight >= p.scrollHeight - 2); })()";
    assert_eq!(browser.eval(log), "true");
    // A selection outlives the redraws that change nothing it holds.
    browser.eval("getSelection().selectAllChildren(document.getElementById('tools')); String(getSelection().toString().length)");
    for n in 0..2 {
        // The page is sent a state only when it changed: a room message changes it, not the tools.
        let said = format!("redraw {n}");
        assert!(!s.call("room", json!({ "say": said })).1);
        wait_until("the page drawn again", || {
            let room = browser.eval("document.getElementById('room').innerText");
            room.contains(&said).then_some(())
        });
    }
    let selected = browser.eval("String(getSelection().toString().length)");
    assert!(
        selected.parse::<usize>().unwrap_or(0) > 10,
        "the selection went: {selected}"
    );
    // A phone's width: nothing is cut off at the right.
    browser.command(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 390, "height": 800, "deviceScaleFactor": 1, "mobile": false }),
    );
    wait_until("the narrow layout", || {
        (browser.eval("String(window.innerWidth)") == "390").then_some(())
    });
    assert_eq!(browser.eval(fits), "true", "a narrow window cuts the page");
    // A server gone: the page says its data is no longer live, all of it greyed out.
    d.stop();
    wait_until("the page to say it is not live", || {
        (browser.eval("String(document.body.classList.contains('stale'))") == "true").then_some(())
    });
    assert!(
        browser
            .eval("document.getElementById('live').textContent")
            .contains("not live")
    );
}

/// An instance of many tools keeps its troubles in view (helper-96: with 200 plugins the host and the
/// calls running started 10,796 px down, below the tools; the log panel showed only the rows of the
/// tools served, which the tools table lists; a narrow window split numbers and words in cells).
#[test]
fn a_busy_instances_troubles_stay_in_view_and_narrow_cells_keep_their_words() {
    let mut plugins: Vec<(String, String)> = (0..120)
        .map(|i| (format!("tool-{i:03}.mjs"), ECHO.to_string()))
        .collect();
    plugins.push((
        "broken.mjs".into(),
        "export const description = 'b';".into(),
    ));
    let plugins: Vec<(&str, &str)> = plugins
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    let inst = Instance::with_plugins(&plugins);
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    inst.cmd().arg("restart").assert().code(1);
    let out = inst.cmd().arg("web").output().unwrap();
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let mut browser = Browser::open(&url);
    let mut s = inst.session("lead");
    s.initialize();
    assert!(!s.call("tool-001", json!({})).1);
    wait_until("the call on the page", || {
        let calls = browser.eval("document.getElementById('calls').innerText");
        calls.contains("tool-001").then_some(())
    });
    // The host, the calls running and the files not served are on the first screen.
    for part in ["host-section", "running-section", "not-served"] {
        let top = format!(
            "String(document.getElementById('{part}').getBoundingClientRect().top < window.innerHeight)"
        );
        assert_eq!(browser.eval(&top), "true", "{part} is out of view");
    }
    assert!(
        browser
            .eval("document.getElementById('not-served').innerText")
            .contains("plugins/broken.mjs")
    );
    // The log panel shows what happened, not a row per tool served.
    let log = browser.eval("document.getElementById('log').textContent");
    assert!(
        log.contains("Restarted") || log.contains("restart"),
        "{log}"
    );
    assert!(!log.contains("serves a tool of its own"), "{log}");
    // A phone's width: a number, a role or a word is not split across lines (a name may break after a
    // hyphen or a slash, as a browser breaks one).
    browser.command(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 360, "height": 800, "deviceScaleFactor": 1, "mobile": false }),
    );
    wait_until("the narrow layout", || {
        (browser.eval("String(window.innerWidth)") == "360").then_some(())
    });
    let split = "JSON.stringify([...document.querySelectorAll('td')]\
                 .filter(td => /^[^\\s/-]{1,30}$/.test(td.textContent))\
                 .filter(td => { const r = document.createRange(); r.selectNodeContents(td); \
                                 return new Set([...r.getClientRects()].map(c => Math.round(c.top))).size > 1; })\
                 .map(td => td.textContent))";
    assert_eq!(browser.eval(split), "[]", "words split across lines");
    let fits = "String(document.documentElement.scrollWidth <= window.innerWidth)";
    assert_eq!(
        browser.eval(fits),
        "true",
        "a narrow window widens the page"
    );
}

/// The page's address typed or pasted without its last slash leads to the page: its cookie is sent only
/// below that path, and a 404 there read as the page being gone.
#[test]
fn the_pages_address_without_its_slash_leads_to_it() {
    let inst = Instance::new();
    inst.set_config(json!({ "web": { "listen": "127.0.0.1:0" } }));
    let _d = inst.start();
    let (authority, cookie, page) = opened(&inst);
    let bare = page.trim_end_matches('/');
    let mut answer = String::new();
    let _ = ask(
        &authority,
        &format!("GET {bare} HTTP/1.1\r\nHost: {authority}\r\nCookie: {cookie}\r\nconnection: close\r\n\r\n"),
    )
    .read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    assert!(
        answer
            .to_lowercase()
            .contains(&format!("location: {page}\r\n")),
        "{answer}"
    );
}

const HANGS: &str = r#"
export const description = "Waits until it is cancelled.";
export const inputSchema = { type: "object" };
export function run(args, { signal }) {
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve({ text: "stopped" })));
}
"#;

/// A call running now is shown on the page, by `ovai status` and in the metrics, with its seat and how
/// long it has run: only finished calls were, and a host held by a plugin looked idle (helper-77). A
/// tool the live host does not answer is listed as not answering, not as served.
#[test]
fn calls_running_now_and_tools_not_answering_are_shown() {
    let inst = Instance::with_plugins(&[("hangs.mjs", HANGS), ("echo.mjs", ECHO)]);
    inst.set_config(json!({
        "web": { "listen": "127.0.0.1:0" },
        "metrics": { "listen": "127.0.0.1:0" },
    }));
    inst.add_seat("w1");
    let d = inst.start();
    let mut s = inst.session("w1");
    s.initialize();
    s.send(&json!({ "jsonrpc": "2.0", "id": 90, "method": "tools/call",
                    "params": { "name": "hangs", "arguments": {} } }));
    let running = wait_until("the call to run", || {
        let status = d.status()?;
        let running = status["callsRunning"].as_array()?.clone();
        (!running.is_empty()).then_some(running)
    });
    assert_eq!(running[0]["file"], "plugins/hangs.mjs", "{running:?}");
    assert_eq!(running[0]["seat"], "w1", "{running:?}");
    inst.cmd()
        .arg("status")
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "Running now: plugins/hangs.mjs for w1 (",
        ));
    let metrics = d.status().unwrap()["metrics"].as_str().unwrap().to_string();
    let (_, scraped) = get(&metrics, None);
    assert!(scraped.contains("\novai_calls_running 1\n"), "{scraped}");
    let (authority, cookie, page) = opened(&inst);
    let (_, state) = get(&format!("http://{authority}{page}api/state"), Some(&cookie));
    let state: Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["running"][0]["file"], "plugins/hangs.mjs", "{state}");
    assert_eq!(state["running"][0]["seat"], "w1", "{state}");
    assert!(
        state["running"][0]["startedMs"]
            .as_u64()
            .is_some_and(|ms| ms > 0),
        "{state}"
    );
    // A call running on is no change each second: the stream falls quiet (the page counts its seconds).
    let mut live = Live::open(&authority, &cookie, &page);
    while live.next().expect("the stream went on").is_some() {}
    // A file edited, and a new host that leaves it out: not answering, on the page and in the metrics.
    inst.write_plugin("echo.mjs", &ECHO.replace("echo for", "edited for"));
    let host = d.host_pid();
    signal(host, libc::SIGKILL);
    wait_gone(host);
    let state = wait_until("echo not answering on the page", || {
        let (_, state) = get(&format!("http://{authority}{page}api/state"), Some(&cookie));
        let state: Value = serde_json::from_str(&state).ok()?;
        state["notServed"]
            .as_array()?
            .iter()
            .any(|r| {
                r.as_str()
                    .is_some_and(|r| r.starts_with("plugins/echo.mjs is not answering calls"))
            })
            .then_some(state)
    });
    assert!(
        state["running"].as_array().is_some_and(Vec::is_empty),
        "{state}"
    );
    let (_, scraped) = get(&metrics, None);
    assert!(
        scraped.contains("ovai_plugins{state=\"not_answering\"} 1"),
        "{scraped}"
    );
    assert!(scraped.contains("\novai_calls_running 0\n"), "{scraped}");
}
