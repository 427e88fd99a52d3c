//! Process-wide counters of the work the engine does, for a server's
//! `/metrics`: provider calls (by kind and outcome, with their time) and
//! custom-resource webhook deliveries. Recording is a short lock; nothing is
//! kept per stack.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// How many, and how long in all.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    pub count: u64,
    pub seconds: f64,
}

#[derive(Default)]
struct Counters {
    /// (call kind: creation, update, deletion, …; outcome) → tally.
    provider_calls: BTreeMap<(String, String), Tally>,
    /// outcome (delivered, retried, failed) → count.
    deliveries: BTreeMap<String, u64>,
}

static COUNTERS: Mutex<Option<Counters>> = Mutex::new(None);

fn with(f: impl FnOnce(&mut Counters)) {
    if let Ok(mut c) = COUNTERS.lock() {
        f(c.get_or_insert_with(Counters::default));
    }
}

/// One provider call of `kind` that ended with `outcome` (`ok` or the
/// error kind) after `took`.
pub fn provider_call(kind: &str, outcome: &str, took: Duration) {
    with(|c| {
        let t = c
            .provider_calls
            .entry((kind.to_string(), outcome.to_string()))
            .or_default();
        t.count += 1;
        t.seconds += took.as_secs_f64();
    });
}

/// One webhook delivery event: `delivered`, `retried` or `failed`.
pub fn delivery(outcome: &str) {
    with(|c| *c.deliveries.entry(outcome.to_string()).or_default() += 1);
}

/// The provider calls so far: ((kind, outcome), tally).
pub fn provider_calls() -> Vec<((String, String), Tally)> {
    let mut out = Vec::new();
    with(|c| {
        out = c
            .provider_calls
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    });
    out
}

/// The webhook deliveries so far: (outcome, count).
pub fn deliveries() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    with(|c| out = c.deliveries.iter().map(|(k, v)| (k.clone(), *v)).collect());
    out
}

static TAKEOVERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static DROPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One operation taken over from an engine whose lease ran out.
pub fn takeover() {
    TAKEOVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// One operation this engine dropped because another took its lease over
/// (its writes were refused on the fencing token).
pub fn dropped_operation() {
    DROPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// (takeovers done, operations dropped after losing their lease).
pub fn leases() -> (u64, u64) {
    (
        TAKEOVERS.load(std::sync::atomic::Ordering::Relaxed),
        DROPPED.load(std::sync::atomic::Ordering::Relaxed),
    )
}
