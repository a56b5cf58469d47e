//! The hash maps on a call's path: keyed by call ids, session ids and tool names, many lookups a call.
//! std's SipHash cost a tenth of the daemon's own work on a call; foldhash (hashbrown's own default, a
//! random seed per process) is several times faster on keys this small. Every map of these holds what one
//! session may have in flight, one host's calls, or the daemon's own names, so a client that picks keys
//! to collide gains a slower lookup among at most a few hundred.

pub type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
