//! Who may read the status page: the one-time links `ovai web` gets (through the control socket, so
//! from whoever holds the control secret) and the cookies they are traded for.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};

use crate::sync::lock;

/// How long a link `ovai web` prints is good for.
pub const LINK_FOR: Duration = Duration::from_secs(60);
/// How long the page's cookie lasts.
pub const SESSION_FOR: Duration = Duration::from_secs(12 * 3600);
/// The cookie's name begins so, and ends with the page's port: browsers keep cookies by host, not by
/// port, and two instances' pages on 127.0.0.1 would otherwise replace each other's.
const COOKIE: &str = "ovai_web";

/// The page's tokens and cookies, and where it is served.
#[derive(Default)]
pub struct Web {
    /// One-time tokens from `ovai web`, until when each is good.
    links: Mutex<HashMap<String, Instant>>,
    /// Cookies given for a token: the page path each is scoped to, and until when it is good.
    sessions: Mutex<HashMap<String, (String, Instant)>>,
    /// The page's base URL (`http://127.0.0.1:PORT/web/`).
    pub base: Mutex<Option<String>>,
    /// Why the page is not served though asked for (its listener could not listen).
    pub unbound: Mutex<Option<String>>,
    /// The state last read for a page, and when: every open page shares one reading a second.
    pub state: tokio::sync::Mutex<Option<(Instant, std::sync::Arc<String>)>>,
}

impl Web {
    /// A new one-time link to the page, if it is served.
    pub fn link(&self) -> Option<String> {
        let base = lock(&self.base).clone()?;
        let token = random_hex();
        if token.is_empty() {
            return None;
        }
        let mut links = lock(&self.links);
        let now = Instant::now();
        links.retain(|_, until| *until > now);
        links.insert(token.clone(), now + LINK_FOR);
        Some(format!("{base}login?t={token}"))
    }

    /// A cookie for a good token, and the key of the page's path it is scoped to (`/web/s/KEY/`).
    /// Browsers send a cookie to every port of its host: scoped to a path nobody else knows, the
    /// cookie reaches no page another user serves on 127.0.0.1.
    pub fn redeem(&self, token: &str) -> Option<(String, String)> {
        let until = lock(&self.links).remove(token)?;
        if until < Instant::now() {
            return None;
        }
        let (cookie, key) = (random_hex(), random_hex());
        if cookie.is_empty() || key.is_empty() {
            return None;
        }
        let key = key[..32].to_string();
        let mut sessions = lock(&self.sessions);
        let now = Instant::now();
        sessions.retain(|_, (_, until)| *until > now);
        sessions.insert(cookie.clone(), (key.clone(), now + SESSION_FOR));
        Some((cookie, key))
    }

    /// Ends every cookie and every link not yet used; how many of each were good.
    pub fn end_all(&self) -> (usize, usize) {
        let now = Instant::now();
        let sessions = std::mem::take(&mut *lock(&self.sessions));
        let links = std::mem::take(&mut *lock(&self.links));
        (
            sessions.values().filter(|(_, until)| *until > now).count(),
            links.values().filter(|until| **until > now).count(),
        )
    }

    /// The name of this page's cookie (`ovai_web_7780`).
    pub fn cookie_name(&self) -> String {
        let base = lock(&self.base).clone().unwrap_or_default();
        let port = base
            .split_once("://")
            .and_then(|(_, rest)| rest.split('/').next())
            .and_then(|a| a.rsplit_once(':'))
            .map_or("", |(_, p)| p)
            .to_string();
        format!("{COOKIE}_{port}")
    }

    /// Whether the request carries a good cookie of the page path `key`.
    pub fn admits(&self, headers: &HeaderMap, key: &str) -> bool {
        let name = self.cookie_name();
        let sessions = lock(&self.sessions);
        let now = Instant::now();
        cookies(headers).filter(|(k, _)| *k == name).any(|(_, v)| {
            sessions
                .get(&v)
                .is_some_and(|(scoped, until)| scoped == key && *until > now)
        })
    }
}

fn random_hex() -> String {
    // Without the OS's randomness no token is made that could be guessed: the link is refused below.
    crate::seats::new_secret().unwrap_or_default()
}

fn cookies(headers: &HeaderMap) -> impl Iterator<Item = (String, String)> + '_ {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
}
