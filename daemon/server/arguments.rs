//! A call's arguments checked against its tool's schema before the plugin runs, read from the text the
//! client wrote (that text goes on to the host as it is: the daemon reads arguments only to check them).
//!
//! What reading a request costs is bounded by what it takes once read, not by its text: about 80 bytes a
//! value (4 MiB of `[[]],` take hundreds of megabytes once read). A request may take at most MAX_READ, a
//! seat at most that at once, and all seats ALL_READ: past the first it is refused in words, and one that
//! finds its seat's share or everybody's taken waits its turn. A small check (little text, a small schema)
//! runs at once on the daemon's thread; any other on a thread of its own, a few at a time, so that no
//! seat's arguments hold another's calls; the memory is given back after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::Semaphore;

use crate::generation::Generation;
use crate::sync::lock;

/// The most one request may take once read.
pub const MAX_READ: usize = 64 << 20;
/// The most all requests being read or checked may take at once.
const ALL_READ: usize = 256 << 20;
/// Text up to this long is checked on the daemon's thread…
const SMALL_TEXT: usize = 64 << 10;
/// …when its length times its schema's weight stays below this.
const SMALL_WORK: usize = 16 << 20;
/// Past this (text length times schema weight), a check is refused rather than run: it would hold a
/// thread for minutes.
const MOST_WORK: u128 = 1 << 40;
/// Checks off the daemon's thread at once.
const CHECKERS: usize = 2;

/// Why a call's arguments were not taken.
pub enum Refusal {
    /// The request itself does not fit (`-32602`): the arguments are not readable, or too large.
    Params(String),
    /// The tool refuses them (an `isError` answer): they break its schema.
    Tool(String),
}

/// What requests hold once read, per seat and in all, and the threads that check large arguments.
pub struct Budget {
    /// In KiB.
    all: Arc<Semaphore>,
    seats: Arc<Mutex<HashMap<String, usize>>>,
    checkers: Arc<Semaphore>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            all: Arc::new(Semaphore::new(ALL_READ >> 10)),
            seats: Arc::default(),
            checkers: Arc::new(Semaphore::new(CHECKERS)),
        }
    }
}

/// A request's share of the budget, given back when dropped.
pub struct Share {
    _all: tokio::sync::OwnedSemaphorePermit,
    seats: Arc<Mutex<HashMap<String, usize>>>,
    seat: String,
    bytes: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut seats = lock(&self.seats);
        if let Some(held) = seats.get_mut(&self.seat) {
            *held = held.saturating_sub(self.bytes);
            if *held == 0 {
                seats.remove(&self.seat);
            }
        }
        drop(seats);
        crate::memory::give_back();
    }
}

/// About what `text` takes once read as JSON: each value (counted by the brackets, commas and colons
/// around them) a `Value` and its place in a map or a list.
pub fn cost(text: &str) -> usize {
    let b = text.as_bytes();
    let values =
        memchr::memchr3_iter(b'[', b'{', b',', b).count() + memchr::memchr_iter(b':', b).count();
    values.saturating_mul(80).saturating_add(text.len())
}

/// Whether a request of this text needs a share of the budget: a short one costs little whatever it holds.
pub fn needs_share(text: &str) -> bool {
    text.len() > SMALL_TEXT
}

/// The words for a request past MAX_READ.
pub fn too_large(what: &str, cost: usize) -> String {
    format!(
        "{what} would take about {} MB once read, more than the {} MB this server reads for one request; \
         send less",
        cost >> 20,
        MAX_READ >> 20
    )
}

impl Budget {
    /// A share of `cost` for `seat`, waiting for everybody's to have room; `None` when the seat holds its
    /// share already (it waits on nothing it could free itself).
    pub async fn share(&self, seat: &str, cost: usize) -> Result<Share, String> {
        let cost = cost.min(MAX_READ);
        {
            let mut seats = lock(&self.seats);
            let held = seats.entry(seat.to_string()).or_insert(0);
            if *held + cost > MAX_READ {
                return Err(format!(
                    "the seat {seat} has requests being read that take about {} MB already, and this one would \
                     take {} MB more: a seat's requests take at most {} MB at once; wait for its calls to \
                     answer, or send less",
                    *held >> 20,
                    cost >> 20,
                    MAX_READ >> 20
                ));
            }
            *held += cost;
        }
        let permits = u32::try_from((cost >> 10).max(1)).unwrap_or(u32::MAX);
        let all = match self.all.clone().acquire_many_owned(permits).await {
            Ok(all) => all,
            Err(_) => {
                let mut seats = lock(&self.seats);
                if let Some(held) = seats.get_mut(seat) {
                    *held = held.saturating_sub(cost);
                }
                return Err("the server is shutting down".into());
            }
        };
        Ok(Share {
            _all: all,
            seats: self.seats.clone(),
            seat: seat.to_string(),
            bytes: cost,
        })
    }
}

/// `args` without Gemini CLI's `wait_for_previous` (a boolean it adds to every tool it offers its model,
/// and sends on), when the tool's schema does not name it: a closed schema refused every such call
/// (helper-95), and an open one was handed a value it never asked for. `None`: as they are. The other
/// members are kept as written and in their order; arguments past MAX_REWRITTEN are left as they are
/// (reading them again here would hold the daemon's thread).
pub fn without_clients_own(generation: &Generation, tool: &str, args: &str) -> Option<Arc<str>> {
    use crate::tools::GEMINIS_OWN;
    use serde_json::value::RawValue;
    if args.len() > MAX_REWRITTEN || !args.contains(GEMINIS_OWN) {
        return None;
    }
    if generation.tools.get(tool)?.names_wait_for_previous {
        return None;
    }
    let members: InOrder<'_> = serde_json::from_str(args).ok()?;
    let is_geminis =
        |(k, v): &(String, &RawValue)| k == GEMINIS_OWN && matches!(v.get(), "true" | "false");
    if !members.0.iter().any(is_geminis) {
        return None;
    }
    let mut out = String::with_capacity(args.len());
    out.push('{');
    for (k, v) in members.0.iter().filter(|m| !is_geminis(m)) {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(k).ok()?);
        out.push(':');
        out.push_str(v.get());
    }
    out.push('}');
    Some(Arc::from(out))
}

/// The most arguments `without_clients_own` reads again on the daemon's thread (about a millisecond).
const MAX_REWRITTEN: usize = 1 << 20;

/// An object's members in the order written, duplicates kept, values as written.
struct InOrder<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for InOrder<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Members<'a> {
            type Value = InOrder<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut map: M,
            ) -> Result<Self::Value, M::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(InOrder(members))
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

/// Checks `text` against the tool's schema now, if that is small work: `None` when it is not, and the
/// check must go off the daemon's thread (`check_apart`).
pub fn check_here(generation: &Generation, tool: &str, text: &str) -> Option<Result<(), Refusal>> {
    let entry = generation.tools.get(tool)?;
    let small = text.len() <= SMALL_TEXT && text.len().saturating_mul(entry.weight) <= SMALL_WORK;
    small.then(|| check(generation, tool, text))
}

/// Checks `text` against the tool's schema on a thread of its own (a few such at a time).
pub async fn check_apart(
    budget: &Budget,
    generation: Arc<Generation>,
    tool: &str,
    text: Arc<str>,
) -> Result<(), Refusal> {
    let weight = generation.tools.get(tool).map_or(0, |e| e.weight);
    let work = text.len() as u128 * weight as u128;
    if work > MOST_WORK {
        return Err(Refusal::Tool(format!(
            "The arguments ({} KB) are too large for the inputSchema of {tool} ({} KB) to be checked in \
             reasonable time, so it was not run: send less, or give the tool a simpler schema.",
            text.len() >> 10,
            weight >> 10
        )));
    }
    let turn = budget
        .checkers
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| Refusal::Params("the server is shutting down".into()))?;
    let tool = tool.to_string();
    // A thread of its own rather than the runtime's blocking pool: a check runs to its end even when its
    // caller has gone (nothing can stop it midway), and the daemon's end must not wait for it. Its turn
    // goes with it, so checks nobody waits for any more cannot pile up.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let started = std::thread::Builder::new()
        .name("ovai-check".into())
        .spawn(move || {
            let _turn = turn;
            let _ = tx.send(check(&generation, &tool, &text));
        });
    if let Err(e) = started {
        return Err(Refusal::Params(format!(
            "the arguments could not be checked: {e}"
        )));
    }
    rx.await
        .unwrap_or_else(|_| Err(Refusal::Params("the arguments could not be checked".into())))
}

fn check(generation: &Generation, tool: &str, text: &str) -> Result<(), Refusal> {
    let Some(entry) = generation.tools.get(tool) else {
        return Ok(());
    };
    let args: Value = serde_json::from_str(text).map_err(|e| {
        let why = e.to_string();
        Refusal::Params(if why.contains("recursion limit") {
            "params.arguments are nested deeper than 127 levels, the most this server reads"
                .to_string()
        } else {
            format!("params.arguments are not readable: {why}")
        })
    })?;
    let checked = crate::tools::schema::check(&entry.validator, tool, &args, text.len())
        .map_err(Refusal::Tool);
    if text.len() > SMALL_TEXT {
        drop(args);
        crate::memory::give_back();
    }
    checked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_text_costs_read_is_counted_by_its_values() {
        let nested = "[[]],".repeat(1000);
        let plain = "x".repeat(5000);
        assert!(cost(&nested) > 40 * nested.len(), "{}", cost(&nested));
        assert_eq!(cost(&format!("\"{plain}\"")), plain.len() + 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_seat_holds_its_share_and_no_more() {
        let budget = Budget::default();
        let first = budget.share("w1", MAX_READ - 1024).await.ok().unwrap();
        assert!(budget.share("w1", 1 << 20).await.is_err());
        let other = budget.share("w2", 1 << 20).await;
        assert!(other.is_ok(), "another seat is not held up");
        drop(first);
        assert!(budget.share("w1", 1 << 20).await.is_ok());
    }
}
