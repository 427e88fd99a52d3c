//! Counters of the work one process's engines do, for a server's
//! `/metrics`: provider calls (by kind and outcome, with their time),
//! custom-resource webhook deliveries and lease takeovers. One [`Metrics`]
//! per process, made by the binary ([`crate::shared::Shared`]) and handed to
//! the engine and the webhook transport: no process-global state, so two
//! engines of one test count apart. Recording is a short lock or an atomic
//! add; nothing is kept per stack.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// (hook type, its status: HOOK_COMPLETE_SUCCEEDED, …) → tally.
    hook_calls: BTreeMap<(String, String), Tally>,
}

/// The counters themselves.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<Counters>,
    takeovers: AtomicU64,
    dropped: AtomicU64,
}

impl Metrics {
    fn with(&self, f: impl FnOnce(&mut Counters)) {
        if let Ok(mut c) = self.counters.lock() {
            f(&mut c);
        }
    }

    /// One provider call of `kind` that ended with `outcome` (`ok` or the
    /// error kind) after `took`.
    pub fn provider_call(&self, kind: &str, outcome: &str, took: Duration) {
        self.with(|c| {
            let t = c
                .provider_calls
                .entry((kind.to_string(), outcome.to_string()))
                .or_default();
            t.count += 1;
            t.seconds += took.as_secs_f64();
        });
    }

    /// One invocation of the hook `hook_type` that ended `status` after
    /// `took`.
    pub fn hook_call(&self, hook_type: &str, status: &str, took: Duration) {
        self.with(|c| {
            let t = c
                .hook_calls
                .entry((hook_type.to_string(), status.to_string()))
                .or_default();
            t.count += 1;
            t.seconds += took.as_secs_f64();
        });
    }

    /// The hook invocations so far: ((hook type, status), tally).
    pub fn hook_calls(&self) -> Vec<((String, String), Tally)> {
        let mut out = Vec::new();
        self.with(|c| out = c.hook_calls.iter().map(|(k, v)| (k.clone(), *v)).collect());
        out
    }

    /// The provider calls so far: ((kind, outcome), tally).
    pub fn provider_calls(&self) -> Vec<((String, String), Tally)> {
        let mut out = Vec::new();
        self.with(|c| {
            out = c
                .provider_calls
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        });
        out
    }

    /// The webhook deliveries so far: (outcome, count).
    pub fn deliveries(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        self.with(|c| out = c.deliveries.iter().map(|(k, v)| (k.clone(), *v)).collect());
        out
    }

    /// One operation taken over from an engine whose lease ran out.
    pub fn takeover(&self) {
        self.takeovers.fetch_add(1, Ordering::Relaxed);
    }

    /// One operation this engine dropped because another took its lease
    /// over (its writes were refused on the fencing token).
    pub fn dropped_operation(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// One webhook delivery event: `delivered`, `retried` or `failed` (the
    /// binary hands the webhook transport a counter that lands here).
    pub fn delivery(&self, outcome: &str) {
        self.with(|c| *c.deliveries.entry(outcome.to_string()).or_default() += 1);
    }

    /// (takeovers done, operations dropped after losing their lease).
    pub fn leases(&self) -> (u64, u64) {
        (
            self.takeovers.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_values_count_apart() {
        let (a, b) = (Metrics::default(), Metrics::default());
        a.provider_call("creation", "ok", Duration::from_millis(500));
        a.provider_call("creation", "ok", Duration::from_millis(250));
        a.delivery("retried");
        a.takeover();
        b.dropped_operation();
        assert_eq!(
            a.provider_calls(),
            vec![(
                ("creation".to_string(), "ok".to_string()),
                Tally {
                    count: 2,
                    seconds: 0.75
                }
            )]
        );
        assert_eq!(a.deliveries(), vec![("retried".to_string(), 1)]);
        assert_eq!((a.leases(), b.leases()), ((1, 0), (0, 1)));
        assert!(b.provider_calls().is_empty() && b.deliveries().is_empty());
    }
}
