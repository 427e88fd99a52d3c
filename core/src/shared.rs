//! What the engines, registries and servers of one process share, as one
//! value the binary makes and hands to each: the counters a server's
//! `/metrics` reads, and the custom-resource callback listener. Nothing in
//! the library crates is process-global, so two engines in one test (the
//! crash simulator's "processes") are as apart as two processes when given
//! two values, and as together as one when given the same.

use std::sync::Arc;

use crate::config::WebhookConfig;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::webhook::callback::Callbacks;

#[derive(Clone)]
pub struct Shared {
    pub metrics: Arc<Metrics>,
    pub callbacks: Arc<Callbacks>,
}

impl Shared {
    /// A process configured with `webhooks`; custom-resource responses go
    /// through `state` (the state it opened), so that any engine on it can
    /// take one for another, when given.
    pub fn new(webhooks: &WebhookConfig, state: Option<Arc<dyn Store>>) -> Shared {
        Shared {
            metrics: Arc::new(Metrics::default()),
            callbacks: Arc::new(Callbacks::new(webhooks, state)),
        }
    }
}
