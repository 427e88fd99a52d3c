//! What the engines, registries and servers of one process share, as one
//! value the binary makes and hands to each: the counters a server's
//! `/metrics` reads, and what the engine needs of the process's transports
//! (whose wait condition handle a URL is; https:// nested templates),
//! as values, so the engine depends on no transport. Nothing in the library
//! crates is process-global, so two engines in one test (the crash
//! simulator's "processes") are as apart as two processes when given two
//! values, and as together as one when given the same.

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::nested::HttpsGet;
use crate::signal::HandleUrls;

#[derive(Clone)]
pub struct Shared {
    pub metrics: Arc<Metrics>,
    /// The process's callback listener, asked whose handle a URL is.
    pub handles: Arc<dyn HandleUrls>,
    /// Fetches https:// nested templates.
    pub https: Arc<dyn HttpsGet>,
}

impl Shared {
    /// A process's shared value, with new counters.
    pub fn new(handles: Arc<dyn HandleUrls>, https: Arc<dyn HttpsGet>) -> Shared {
        Shared {
            metrics: Arc::new(Metrics::default()),
            handles,
            https,
        }
    }
}
