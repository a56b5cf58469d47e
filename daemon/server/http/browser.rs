//! What a browser brings: its `Origin` (only pages of listed origins, or of the server's own, are let
//! in), the `Host` it reached the server by (DNS rebinding: a name made to point at a loopback server),
//! and CORS, so a page of a listed origin can actually make its calls.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};

use crate::instance::http::HttpSettings;

pub struct Browsers {
    origins: Vec<String>,
    /// Host names the endpoint answers to besides the loopback ones (`http.hosts`).
    hosts: Vec<String>,
    /// Any Host is let in: a non-loopback endpoint with no `http.hosts` (the token decides).
    any_host: bool,
}

impl Browsers {
    pub fn new(settings: &HttpSettings) -> Self {
        Self {
            origins: settings
                .origins
                .iter()
                .map(|o| normalise_origin(o))
                .collect(),
            hosts: settings.hosts.clone(),
            any_host: !settings.listen.ip().is_loopback() && settings.hosts.is_empty(),
        }
    }

    /// Why the request's `Host` is not one this server answers to, if it is not: 400 when it has none,
    /// 403 when it names another.
    pub fn host_refused(&self, headers: &HeaderMap) -> Option<(StatusCode, String)> {
        if self.any_host {
            return None;
        }
        let Some(host) = headers.get(header::HOST) else {
            return Some((
                StatusCode::BAD_REQUEST,
                "this request has no Host header: send one naming this server (the address it listens on, \
                 localhost:PORT say), as HTTP/1.1 asks of every request"
                    .into(),
            ));
        };
        // Bytes that are not text are shown as such, not as an empty name.
        let host = String::from_utf8_lossy(host.as_bytes());
        if self.answers_to(&host.to_ascii_lowercase()) {
            return None;
        }
        Some((
            StatusCode::FORBIDDEN,
            format!(
                "this server does not answer to the host name {:?}: it answers to localhost and loopback addresses{}. A \
             name made to point at it (DNS rebinding) is refused; list the names clients use in openovai.json's \
             \"http\".\"hosts\"",
                crate::names::escape_controls(&host.chars().take(200).collect::<String>(), false),
                if self.hosts.is_empty() {
                    String::new()
                } else {
                    format!(" and {}", self.hosts.join(", "))
                }
            ),
        ))
    }

    /// A loopback name or address (no name a rebinding page points elsewhere is one: `127.0.0.2`, the
    /// address an endpoint may listen on, is), or a listed one.
    fn answers_to(&self, host: &str) -> bool {
        let name = crate::names::host_name(host);
        crate::names::is_loopback_authority(host)
            || self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }

    /// Whether a request from a page of `origin` is let in: a listed origin, or the server's own (a page
    /// it served itself, at a host it answers to).
    pub fn origin_allowed(&self, origin: &str, headers: &HeaderMap) -> bool {
        let origin = normalise_origin(origin);
        if self.origins.contains(&origin) {
            return true;
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        authority == Some(host.as_str()) && self.answers_to(&host)
    }

    /// The answer to a CORS preflight from an allowed origin: the methods and headers MCP uses.
    pub fn preflight(method: &Method) -> bool {
        method == Method::OPTIONS
    }

    /// Adds what lets a page of `origin` read the answer (and the headers MCP needs it to see).
    pub fn allow(headers: &mut HeaderMap, origin: &HeaderValue, preflight: bool) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id, www-authenticate, retry-after"),
        );
        if preflight {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, DELETE"),
            );
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(
                    "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, mcp-method, \
                     mcp-name, last-event-id, traceparent, tracestate",
                ),
            );
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
        }
    }
}

/// `HTTPS://Example.com:443/` and `https://example.com` are the same origin.
pub fn normalise_origin(origin: &str) -> String {
    let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    o.strip_suffix(":443")
        .filter(|_| o.starts_with("https://"))
        .or_else(|| o.strip_suffix(":80").filter(|_| o.starts_with("http://")))
        .map(str::to_string)
        .unwrap_or(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        h
    }

    fn loopback() -> Browsers {
        let mut s = HttpSettings::listening_on("127.0.0.1:7777".parse().unwrap());
        s.origins = vec!["https://app.example.com".into()];
        Browsers::new(&s)
    }

    #[test]
    fn origins_compare_as_browsers_send_them() {
        assert_eq!(
            normalise_origin("HTTPS://App.example.com:443/"),
            "https://app.example.com"
        );
        assert_eq!(normalise_origin("http://localhost:80"), "http://localhost");
        assert_eq!(
            normalise_origin("http://localhost:8080"),
            "http://localhost:8080"
        );
    }

    #[test]
    fn a_page_of_the_servers_own_origin_passes_and_a_rebound_name_does_not() {
        let b = loopback();
        let h = headers("localhost:7777");
        assert!(b.origin_allowed("http://localhost:7777", &h));
        assert!(b.origin_allowed("https://app.example.com", &h));
        assert!(!b.origin_allowed("http://localhost:9999", &h));
        let evil = headers("evil.example.com:7777");
        assert!(!b.origin_allowed("http://evil.example.com:7777", &evil));
        assert!(b.host_refused(&evil).unwrap().1.contains("\"hosts\""));
        assert!(b.host_refused(&h).is_none());
    }

    #[test]
    fn a_reachable_endpoint_answers_to_its_listed_names_and_loopback_ones() {
        let mut s = HttpSettings::listening_on("0.0.0.0:7777".parse().unwrap());
        s.insecure = true;
        assert!(
            Browsers::new(&s)
                .host_refused(&headers("anything:7777"))
                .is_none()
        );
        s.hosts = vec!["buildbox.example".into()];
        let b = Browsers::new(&s);
        assert!(b.host_refused(&headers("buildbox.example:7777")).is_none());
        assert!(b.host_refused(&headers("127.0.0.1:7777")).is_none());
        assert!(b.host_refused(&headers("other.example:7777")).is_some());
    }
}
