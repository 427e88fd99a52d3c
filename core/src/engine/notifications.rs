//! Delivering stack notifications (`NotificationARNs`). The events table is
//! the outbox: every event is recorded before it is reported, and each
//! (stack, target) keeps in the state how many of the stack's events the
//! target accepted. A [`Notifier`] claims targets with events left, POSTs
//! each event in order (signed with `[webhooks] secret`, as every request
//! Cairn sends a webhook; retried with backoff within an attempt), and
//! records each acceptance before it sends the next. It runs beside the
//! operations and never holds them up: a target that is down only delays
//! its own deliveries, which resume later (a back-off between rounds).
//!
//! An engine that dies mid-delivery loses nothing: the next one (a server,
//! or the next command) claims the target once the dead engine's claim is
//! broken or runs out, and sends from the first event not accepted. The
//! one event that can reach a target twice is the one whose acceptance the
//! dying engine had received but not yet recorded: every message carries
//! its `EventId` for that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::{owner_is_dead, owner_process, Core, Engine, EngineError};
use crate::notifications::{check_targets, message};
use crate::store::NotificationCursor;

/// Targets claimed in one round.
const ROUND: usize = 64;
/// Between two rounds when nothing rings the event bell.
const IDLE_POLL: Duration = Duration::from_millis(500);
/// The first and the longest wait before a failing target is tried again.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

impl Core {
    /// Sets a stack's notification targets when an operation is given
    /// them (`NotificationARNs`), before its first event: a new target
    /// gets every event of the operation.
    pub(super) async fn notify_to(
        &self,
        stack_id: &str,
        targets: Option<&[String]>,
    ) -> Result<(), EngineError> {
        let Some(targets) = targets else {
            return Ok(());
        };
        check_targets(targets)?;
        self.store
            .set_notification_targets(stack_id, targets)
            .await?;
        Ok(())
    }
}

/// One process's notification sender over an engine's state.
pub struct Notifier {
    engine: Arc<Engine>,
    /// The claim owner: this process (`host:pid`, so that a dead one's
    /// claims are broken at once) and a sender of its own.
    owner: String,
    /// Failing targets: failures in a row, and when to try again.
    backoff: Mutex<HashMap<(String, String), (u32, Instant)>>,
}

impl Notifier {
    pub fn new(engine: Arc<Engine>) -> Notifier {
        let owner = format!("{}:notify-{}", engine.owner, uuid::Uuid::new_v4().simple());
        Notifier {
            engine,
            owner,
            backoff: Mutex::new(HashMap::new()),
        }
    }

    fn claim_ttl_ms(&self) -> i64 {
        self.engine.lease_ttl_ms()
    }

    /// Sends what is pending until `stop` turns true.
    pub async fn run(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut bell = self.engine.store.event_bell();
        loop {
            if *stop.borrow() {
                return;
            }
            if let Err(e) = self.round().await {
                tracing::warn!("delivering stack notifications: {e}");
            }
            let rung = async {
                match bell.as_mut() {
                    Some(b) => {
                        let _ = b.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(IDLE_POLL) => {}
                _ = rung => {}
                changed = stop.changed() => {
                    // The sender is gone: so is whoever wanted this run.
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// Sends what is pending now, for at most `within` (what a command does
    /// before it exits). `true` when nothing is left to send.
    pub async fn flush(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            match self.round().await {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) => tracing::warn!("delivering stack notifications: {e}"),
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(FIRST_BACKOFF.min(deadline - Instant::now())).await;
        }
    }

    /// One round: claims the targets with events left (taking a dead
    /// engine's claims at once) and sends each one's in order, the targets
    /// at the same time. Returns how many targets still have events left.
    pub async fn round(&self) -> Result<usize, EngineError> {
        let store = &self.engine.store;
        let dead: Vec<String> = store
            .notification_claimants()
            .await?
            .into_iter()
            .filter(|o| owner_process(o) != self.engine.owner && owner_is_dead(o))
            .collect();
        let claimed = store
            .claim_notifications(&self.owner, &dead, self.claim_ttl_ms(), ROUND)
            .await?;
        let sends = claimed.into_iter().map(|c| self.send(c));
        let results = futures::future::join_all(sends).await;
        let mut left = 0;
        for r in results {
            if !r? {
                left += 1;
            }
        }
        Ok(left)
    }

    /// Sends `c`'s target the stack's events from the first not accepted,
    /// in order; `true` when every one was. The claim is let go after.
    async fn send(&self, mut c: NotificationCursor) -> Result<bool, EngineError> {
        let key = (c.stack_id.clone(), c.target.clone());
        let waiting = self
            .backoff
            .lock()
            .ok()
            .and_then(|b| b.get(&key).map(|(_, at)| *at))
            .is_some_and(|at| at > Instant::now());
        let store = &self.engine.store;
        if waiting {
            store.release_notification(&self.owner, &c).await?;
            return Ok(false);
        }
        let events = store.events_from(&c.stack_id, c.delivered).await?;
        let ttl = self.claim_ttl_ms();
        // One attempt (its retries included) ends well before the claim
        // would run out, so no other engine sends the same event meanwhile.
        let attempt = Duration::from_millis(u64::try_from(ttl / 2).unwrap_or(1000).max(100));
        let config = &self.engine.config;
        let secret = config.webhooks.secret.as_deref();
        for e in events {
            // The claim is renewed before each send.
            if !store.notified(&self.owner, &c, ttl).await? {
                return Ok(false);
            }
            let body = message(&e, &config.identity.account_id).to_string();
            let sent = self
                .engine
                .shared
                .webhooks
                .post(&c.target, secret, body.into_bytes(), attempt)
                .await;
            match sent {
                Ok(_) => {
                    c.delivered += 1;
                    if !store.notified(&self.owner, &c, ttl).await? {
                        return Ok(false);
                    }
                }
                Err(why) => {
                    let wait = self.failed(&key);
                    tracing::warn!(stack = %e.stack_name, target = %c.target, event = %e.event_id, "a stack notification was not accepted, trying again in {wait:?}: {why}");
                    store.release_notification(&self.owner, &c).await?;
                    return Ok(false);
                }
            }
        }
        if let Ok(mut b) = self.backoff.lock() {
            b.remove(&key);
        }
        store.release_notification(&self.owner, &c).await?;
        Ok(true)
    }

    /// Notes a failure of `key`'s target: the wait before its next try,
    /// doubled with each failure in a row.
    fn failed(&self, key: &(String, String)) -> Duration {
        let Ok(mut b) = self.backoff.lock() else {
            return FIRST_BACKOFF;
        };
        let failures = b.get(key).map(|(n, _)| n + 1).unwrap_or(1);
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << failures.min(16))
            .min(MAX_BACKOFF);
        b.insert(key.clone(), (failures, Instant::now() + wait));
        wait
    }
}
