//! Rollback triggers at run time (CloudFormation's `RollbackConfiguration`;
//! the rules are `crate::rollback_triggers`'s). While a create or an
//! update rolls forward, a watcher reads every trigger each
//! `[engine] rollback_trigger_poll_ms`; one in ALARM, or one that cannot be
//! read (CloudFormation's missing alarm), stops the work in flight and the
//! operation rolls back with a reason naming the trigger. After the last
//! resource, the operation looks once more and then waits the monitoring
//! period, watching, before its outputs and cleanup (an update's old
//! resources are deleted only after it). Triggers are not watched while
//! the stack rolls back.
//!
//! An engine restarted during a monitoring period waits the whole period
//! again: the period's start is not recorded.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Core, Op};
use crate::rollback_triggers::{
    alert_reading, health_reading, Probe, Reading, RollbackConfiguration, RollbackTrigger,
};

/// How long one look at one trigger may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a monitoring period ended.
pub(super) enum Monitored {
    /// No trigger fired: the operation goes on.
    Quiet,
    /// A trigger fired (the rollback's reason).
    Alarm(String),
    /// `cairn cancel-update` asked the update to stop.
    Cancelled,
}

impl Core {
    fn trigger_poll(&self) -> Duration {
        Duration::from_millis(self.config.engine.rollback_trigger_poll_ms.max(1))
    }

    /// The configuration `op` watches, when it has triggers or a period.
    fn watched(op: &Op) -> Option<&RollbackConfiguration> {
        op.state
            .rollback_configuration
            .as_ref()
            .filter(|c| !c.is_empty())
    }

    /// Reads every trigger of `op` until one fires (setting `op`'s alarm)
    /// or the operation stops watching; run beside a create or update that
    /// rolls forward.
    pub(super) async fn watch_triggers(&self, op: &Op) {
        let Some(config) = Self::watched(op).filter(|c| !c.triggers().is_empty()) else {
            return;
        };
        loop {
            if op.stops.triggers_done.load(Ordering::SeqCst) {
                return;
            }
            if let Some(reason) = self.look(config).await {
                tracing::warn!(stack = %op.stack.stack_name, "{reason}");
                op.stops.alarm.send_replace(Some(reason));
                return;
            }
            tokio::time::sleep(self.trigger_poll()).await;
        }
    }

    /// The reason of a trigger that fired while the resources rolled
    /// forward, taken: from here on the operation rolls back unwatched.
    pub(super) fn take_alarm(&self, op: &Op) -> Option<String> {
        let reason = op.stops.alarm.borrow().clone()?;
        op.stops.triggers_done.store(true, Ordering::SeqCst);
        Some(reason)
    }

    /// After the last resource: one more look, then the monitoring period,
    /// watched. The operation stops watching when this returns.
    pub(super) async fn monitor(&self, op: &Op, cancellable: bool) -> Monitored {
        let ended = |m: Monitored| {
            op.stops.triggers_done.store(true, Ordering::SeqCst);
            m
        };
        let Some(config) = Self::watched(op) else {
            return ended(Monitored::Quiet);
        };
        if let Some(reason) = self.take_alarm(op) {
            return ended(Monitored::Alarm(reason));
        }
        if let Some(reason) = self.look(config).await {
            return ended(Monitored::Alarm(reason));
        }
        let minutes = config.monitoring_minutes();
        if minutes == 0 {
            return ended(Monitored::Quiet);
        }
        tracing::info!(stack = %op.stack.stack_name, minutes, "every resource is done; watching the rollback triggers for the monitoring period");
        let mut alarm = op.stops.alarm.subscribe();
        let mut cancel = op.stops.cancel.subscribe();
        let cancelled = async {
            if !cancellable || cancel.wait_for(|c| *c).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(u64::from(minutes) * 60)) => ended(Monitored::Quiet),
            fired = alarm.wait_for(Option::is_some) => {
                let reason = fired.map(|r| r.clone().unwrap_or_default()).unwrap_or_default();
                ended(Monitored::Alarm(reason))
            }
            _ = cancelled => ended(Monitored::Cancelled),
        }
    }

    /// One look at every trigger, at once: the reason to roll back for the
    /// first (in the configuration's order) in ALARM or unreadable.
    async fn look(&self, config: &RollbackConfiguration) -> Option<String> {
        let looks = config.triggers().iter().map(|t| self.look_at(t));
        futures::future::join_all(looks)
            .await
            .into_iter()
            .flatten()
            .next()
    }

    async fn look_at(&self, t: &RollbackTrigger) -> Option<String> {
        let unreadable = |cause: String| {
            Some(format!(
                "Rollback trigger {t} cannot be read: {cause}. A trigger that cannot be read fails the operation. "
            ))
        };
        let alarm = |why: String| Some(format!("Rollback trigger {t} is in ALARM: {why}. "));
        let probes = &self.shared.probes;
        match t.probe() {
            Err(e) => unreadable(e.to_string()),
            Ok(Probe::Health { url }) => match probes.get(&url, PROBE_TIMEOUT).await {
                Ok((status, _)) => match health_reading(status) {
                    Reading::Ok => None,
                    Reading::Alarm(why) => alarm(why),
                },
                Err(e) => unreadable(e.to_string()),
            },
            Ok(Probe::Alert { query, alert }) => match probes.get(&query, PROBE_TIMEOUT).await {
                Ok((200..=299, body)) => match alert_reading(&body, &alert) {
                    Ok(Reading::Ok) => None,
                    Ok(Reading::Alarm(why)) => alarm(why),
                    Err(e) => unreadable(e.to_string()),
                },
                Ok((status, _)) => unreadable(format!("Alertmanager answered HTTP {status}")),
                Err(e) => unreadable(e.to_string()),
            },
        }
    }
}
