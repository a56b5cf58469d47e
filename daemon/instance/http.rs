//! `"http"` in openovai.json: where the Streamable HTTP endpoint listens and what it lets in.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde_json::Value;

/// How many streams (requests being answered, listen streams, GET streams) one seat may hold open at once.
pub const DEFAULT_STREAMS_PER_SEAT: usize = 32;
/// How long a session (2025-11-25 and before) may go without a request while it holds no stream.
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 300;

/// The TLS key the endpoint serves with, once bound: hidden from every plugin host's box, whatever a
/// later openovai.json says.
static SERVED_KEY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Notes the key the endpoint now serves with (the first one stays: it is the one bound).
pub fn serving_key(key: PathBuf) {
    let _ = SERVED_KEY.set(key);
}

pub fn served_key() -> Option<PathBuf> {
    SERVED_KEY.get().cloned()
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// The address the endpoint listens on (`http.listen`, or `ovai serve --http`).
    pub listen: SocketAddr,
    /// `http.listen` was given; without it the settings wait for `ovai serve --http ADDR` (and `listen`
    /// means nothing until then).
    pub listen_named: bool,
    /// Browser origins let in (`http.origins`); a request with any other `Origin` is refused with 403.
    pub origins: Vec<String>,
    /// Host names clients use to reach a non-loopback address (`http.hosts`); empty lets any in.
    pub hosts: Vec<String>,
    /// Where TLS's certificate chain and key are (`http.tls`), for the daemon to terminate TLS itself.
    pub tls: Option<TlsFiles>,
    /// Plain HTTP on an address other machines can reach, said on purpose (`http.insecure`).
    pub insecure: bool,
    /// Streams one seat may hold open at once (`http.maxStreamsPerSeat`).
    pub streams_per_seat: usize,
    /// A session with no request and no stream open for this long is closed (`http.sessionIdleSeconds`).
    pub session_idle_secs: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl HttpSettings {
    /// The settings for `--http ADDR` when openovai.json names none.
    pub fn listening_on(listen: SocketAddr) -> Self {
        Self {
            listen,
            listen_named: true,
            origins: Vec::new(),
            hosts: Vec::new(),
            tls: None,
            insecure: false,
            streams_per_seat: DEFAULT_STREAMS_PER_SEAT,
            session_idle_secs: DEFAULT_SESSION_IDLE_SECS,
        }
    }

    /// Refuses settings that name no address when nothing else does (`ovai serve` without `--http`).
    pub fn require_listen(&self) -> Result<(), String> {
        if self.listen_named {
            return Ok(());
        }
        Err("has no \"listen\": name the address, such as \"127.0.0.1:7777\", or pass --http ADDR to ovai serve".into())
    }

    /// Refuses plain HTTP where other machines can listen in, unless the operator said so.
    pub fn check_exposure(&self) -> Result<(), String> {
        if self.listen.ip().is_loopback() || self.tls.is_some() || self.insecure {
            return Ok(());
        }
        Err(format!(
            "listens on {}, an address other machines can reach, without TLS: every request carries a seat's \
             secret, and it would cross the network in the clear. Set \"tls\": {{\"cert\": …, \"key\": …}} in \
             openovai.json's \"http\", or listen on 127.0.0.1 behind a TLS proxy, or set \"insecure\": true \
             there if the network itself is private",
            self.listen
        ))
    }

    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }
}

/// The keys `"http"` takes.
const KEYS: &[&str] = &[
    "listen",
    "origins",
    "hosts",
    "tls",
    "insecure",
    "maxStreamsPerSeat",
    "sessionIdleSeconds",
];

/// Parses `"http"`. Problems are sentences for ConfigError. Relative certificate paths stay relative: they
/// are read from the instance's root.
pub fn parse(value: &Value) -> Result<Option<HttpSettings>, String> {
    let map = match value {
        Value::Null => return Ok(None),
        Value::Object(map) => map,
        other => {
            return Err(format!(
                "is {}; it takes an object such as {{\"listen\": \"127.0.0.1:7777\"}}",
                crate::instance::json_kind(other)
            ));
        }
    };
    for key in map.keys() {
        if !KEYS.contains(&key.as_str()) {
            return Err(format!(
                "has \"{key}\", which ovai does not read there; it reads listen, origins, hosts, tls, insecure, \
                 maxStreamsPerSeat and sessionIdleSeconds"
            ));
        }
    }
    let listen = match map.get("listen") {
        Some(Value::String(s)) => {
            Some(parse_listen(s).map_err(|why| format!("has \"listen\": {why}"))?)
        }
        // `ovai serve --http ADDR` may name it; `ovai serve` alone refuses (`require_listen`).
        None | Some(Value::Null) => None,
        Some(other) => {
            return Err(format!(
                "has \"listen\": {other}, and it takes an address such as \"127.0.0.1:7777\""
            ));
        }
    };
    let strings = |key: &str| -> Result<Vec<String>, String> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) if !s.is_empty() => Ok(s.clone()),
                    other => Err(format!(
                        "has \"{key}\" holding {other}, and it lists strings"
                    )),
                })
                .collect(),
            Some(other) => Err(format!(
                "has \"{key}\": {other}, and it takes a list of strings"
            )),
        }
    };
    let origins = strings("origins")?;
    for o in &origins {
        if o != "null" && !o.contains("://") {
            return Err(format!(
                "has the origin {o:?}, which names no scheme: write it as a browser sends it, such as \
                 \"https://app.example.com\""
            ));
        }
    }
    // Names, as a Host header gives them after its port: a port written here ("buildbox.example:7777",
    // as a URL has it) is no part of the name and is let go; a pattern or a URL would never match.
    let hosts = strings("hosts")?
        .into_iter()
        .map(|h| {
            if h.contains("://") || h.contains(['/', '*', '?', ' ', ',']) {
                return Err(format!(
                    "has the host {h:?}, which is not a host name: \"hosts\" lists the names clients reach the \
                     server by, each alone, such as \"buildbox.example\" (to let any name in, leave \"hosts\" \
                     out on an address other than loopback: the token decides)"
                ));
            }
            // An IPv6 address's colons are no port's: one is written in brackets, as a Host header has it.
            if h.matches(':').count() > 1 && !h.starts_with('[') {
                return Err(format!(
                    "has the host {h:?}, an IPv6 address written without brackets: write it as a Host header \
                     has it, such as \"[2001:db8::10]\""
                ));
            }
            Ok(crate::names::host_name(&h).to_ascii_lowercase())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tls = match map.get("tls") {
        None | Some(Value::Null) => None,
        Some(Value::Object(t)) => {
            let file = |key: &str| match t.get(key) {
                Some(Value::String(s)) if !s.is_empty() => Ok(PathBuf::from(s)),
                _ => Err(format!(
                    "has \"tls\" without \"{key}\": it takes {{\"cert\": \"PATH\", \"key\": \"PATH\"}} (PEM files)"
                )),
            };
            Some(TlsFiles {
                cert: file("cert")?,
                key: file("key")?,
            })
        }
        Some(other) => {
            return Err(format!(
                "has \"tls\": {other}, and it takes {{\"cert\": \"PATH\", \"key\": \"PATH\"}}"
            ));
        }
    };
    let insecure = match map.get("insecure") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(format!(
                "has \"insecure\": {other}, and it takes true or false"
            ));
        }
    };
    let streams_per_seat = match map.get("maxStreamsPerSeat") {
        None | Some(Value::Null) => DEFAULT_STREAMS_PER_SEAT,
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => n as usize,
            _ => {
                return Err(format!(
                    "has \"maxStreamsPerSeat\": {v}, and it takes a whole number above 0"
                ));
            }
        },
    };
    let session_idle_secs = match map.get("sessionIdleSeconds") {
        None | Some(Value::Null) => DEFAULT_SESSION_IDLE_SECS,
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "has \"sessionIdleSeconds\": {v}, and it takes a whole number of seconds above 0"
                ));
            }
        },
    };
    let settings = HttpSettings {
        listen: listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
        listen_named: listen.is_some(),
        origins,
        hosts,
        tls,
        insecure,
        streams_per_seat,
        session_idle_secs,
    };
    if settings.listen_named {
        settings.check_exposure()?;
    }
    Ok(Some(settings))
}

/// `127.0.0.1:7777`, `[::1]:7777`, or `localhost:7777`.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(Ok(port)) = text.strip_prefix("localhost:").map(str::parse::<u16>) {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "{text:?}, which is not an address and port such as \"127.0.0.1:7777\" or \"[::1]:7777\""
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> Result<Option<HttpSettings>, String> {
        parse(&v)
    }

    #[test]
    fn loopback_needs_nothing_more_and_other_addresses_need_tls_or_insecure() {
        let s = p(json!({ "listen": "127.0.0.1:7777" })).unwrap().unwrap();
        assert_eq!(s.listen.port(), 7777);
        let e = p(json!({ "listen": "0.0.0.0:7777" })).unwrap_err();
        assert!(e.contains("in the clear"), "{e}");
        assert!(p(json!({ "listen": "0.0.0.0:7777", "insecure": true })).is_ok());
        let s = p(json!({ "listen": "0.0.0.0:7777", "tls": { "cert": "c.pem", "key": "k.pem" } }))
            .unwrap()
            .unwrap();
        assert_eq!(s.tls.unwrap().key, std::path::Path::new("k.pem"));
    }

    #[test]
    fn mistakes_are_named() {
        assert!(
            p(json!({ "listen": "7777" }))
                .unwrap_err()
                .contains("not an address")
        );
        assert!(
            p(json!({ "listne": "x" }))
                .unwrap_err()
                .contains("\"listne\"")
        );
        assert!(
            p(json!({ "listen": "127.0.0.1:1", "origins": ["app.example.com"] }))
                .unwrap_err()
                .contains("no scheme")
        );
        assert!(
            p(json!({ "listen": "127.0.0.1:1", "tls": { "cert": "c" } }))
                .unwrap_err()
                .contains("without \"key\"")
        );
        assert!(p(json!("127.0.0.1:1")).unwrap_err().contains("an object"));
        let e = p(json!({ "listen": "127.0.0.1:1", "hosts": ["2001:db8::10"] })).unwrap_err();
        assert!(e.contains("without brackets"), "{e}");
        for bad in [
            "*",
            "https://buildbox.example",
            "*.example",
            "a.example/mcp",
        ] {
            let e = p(json!({ "listen": "127.0.0.1:1", "hosts": [bad] })).unwrap_err();
            assert!(e.contains("which is not a host name"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_hosts_port_is_no_part_of_its_name() {
        let s = p(json!({ "listen": "127.0.0.1:1", "hosts": ["Box.Example", "buildbox.example:7777", "[::2]:80"] }))
            .unwrap()
            .unwrap();
        assert_eq!(s.hosts, ["box.example", "buildbox.example", "[::2]"]);
    }
}
