//! Waiting for signals: a resource with a `CreationPolicy` (any type,
//! groups included) and an `AWS::CloudFormation::WaitCondition` stay
//! CREATE_IN_PROGRESS after their provider finished, until enough success
//! signals are kept in the store, a failure signal comes, or the wait's
//! time runs out. The wait's start is recorded in the row (`PendingCall`
//! `SIGNALS` with `since_ms`), so a resumed wait keeps its deadline and
//! counts the signals that arrived while no engine ran it. Signals come in
//! three ways, all stored before they are acknowledged: a PUT to a
//! handle's URL (the callback listener), `SignalResource`, `cairn signal`.

use crate::engine::kinds::Signals;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_sdk::{CreateResult, ErrorKind, ProviderError};
use serde_json::{Map, Value};

use super::{EngineError, Op};
use crate::signal::{self, Progress, SignalStatus, Wait, WAIT_CONDITION_HANDLE};
use crate::stack::{now, ResourceRecord, ResourceStatus, SignalRecord};
use crate::store::StoreError;

impl Signals<'_> {
    /// `SignalResource` and `cairn signal`: keeps a signal for a resource
    /// that is being created or updated.
    pub async fn signal_resource(
        &self,
        stack_name: &str,
        logical_id: &str,
        unique_id: &str,
        status: &str,
        reason: Option<String>,
    ) -> Result<(), EngineError> {
        let status = SignalStatus::parse(status)?;
        signal::check_unique_id(unique_id)?;
        let Some(stack) = self.store.find_stack(stack_name).await? else {
            return Err(StoreError::NoSuchStack(stack_name.to_string()).into());
        };
        let rows = self.store.resources(&stack.stack_id).await?;
        let Some(row) = rows.iter().find(|r| r.logical_id == logical_id) else {
            return Err(EngineError::Validation(format!(
                "Resource {logical_id} does not exist for stack {}",
                stack.stack_name
            )));
        };
        if !matches!(
            row.status,
            ResourceStatus::CreateInProgress | ResourceStatus::UpdateInProgress
        ) {
            return Err(EngineError::Validation(format!(
                "Resource {logical_id} is in {} state and cannot be signaled",
                row.status
            )));
        }
        self.store
            .put_signal(&SignalRecord {
                stack_id: stack.stack_id.clone(),
                logical_id: logical_id.to_string(),
                unique_id: unique_id.to_string(),
                status,
                reason,
                data: None,
                received_at: now(),
            })
            .await?;
        Ok(())
    }

    /// What the resource waits for once its provider has made it, and the
    /// resource whose signals count: its own (a CreationPolicy), or its
    /// handle's (a WaitCondition). `None`: it does not wait.
    pub(super) async fn signal_wait(
        &self,
        op: &Op,
        logical_id: &str,
        properties: &Map<String, Value>,
    ) -> Result<Option<(Wait, (String, String))>, String> {
        let Some(r) = op.template.resource(logical_id) else {
            return Ok(None);
        };
        if let Some(wait) = signal::creation_policy(r.creation_policy.as_ref(), logical_id)
            .map_err(|e| e.to_string())?
        {
            return Ok(Some((
                wait,
                (op.stack.stack_id.clone(), logical_id.to_string()),
            )));
        }
        if !signal::is_wait_condition(self.registry.canonical(&r.type_name)) {
            return Ok(None);
        }
        let wait = signal::wait_condition(properties).map_err(|e| e.to_string())?;
        let url = properties
            .get("Handle")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let handle = self
            .shared
            .handles
            .handle_target(url)
            .await
            .map_err(|e| e.to_string())?;
        let handle = handle.ok_or_else(|| {
            format!(
                "Handle of {logical_id} is not the URL of a wait condition handle of this Cairn state: {}; use !Ref of an AWS::CloudFormation::WaitConditionHandle",
                crate::template::quoted(url)
            )
        })?;
        Ok(Some((wait, handle)))
    }

    /// Before a new create of the resource (its own, or a replacement's):
    /// the signals kept for it are forgotten when it has them (a handle,
    /// or a resource with a CreationPolicy: its new life waits for new
    /// signals). Why not, when they cannot be.
    pub(super) async fn new_life(&self, op: &Op, logical_id: &str) -> Result<(), String> {
        let clears = op.template.resource(logical_id).is_some_and(|r| {
            r.creation_policy.is_some()
                || self.registry.canonical(&r.type_name) == WAIT_CONDITION_HANDLE
        });
        if !clears {
            return Ok(());
        }
        self.store
            .clear_signals(&op.stack.stack_id, logical_id)
            .await
            .map_err(|e| format!("cannot clear the signals kept for {logical_id}: {e}"))
    }

    /// Waits (again, after a resume) for the signals of a resource recorded
    /// as waiting, showing each signal as an event: the create's outcome,
    /// or `None` when the operation must stop (its lease lost, a write not
    /// held). The caller records the outcome.
    pub(super) async fn await_signals(
        &self,
        op: &Op,
        rec: &ResourceRecord,
        wait: Wait,
        (stack_id, logical_id): (String, String),
    ) -> Option<Result<CreateResult, ProviderError>> {
        let since = rec
            .pending
            .as_ref()
            .and_then(|p| p.since_ms)
            .unwrap_or_else(now_ms);
        let deadline = since.saturating_add(wait.timeout.as_millis() as i64);
        // Signals already shown (a resumed wait): their events are not
        // recorded twice.
        let mut shown: HashSet<String> = HashSet::new();
        let events_for_signals = wait.kind != signal::WaitKind::WaitCondition;
        if events_for_signals {
            if let Ok(events) = self.store.events(&op.stack.stack_id).await {
                shown.extend(
                    events
                        .into_iter()
                        .filter(|e| e.logical_id == rec.logical_id)
                        .filter_map(|e| e.status_reason),
                );
            }
        }
        loop {
            if op.aborted.load(Ordering::SeqCst) {
                return None;
            }
            let signals = match self.store.signals(&stack_id, &logical_id).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(stack = %op.stack.stack_name, resource = %rec.logical_id, "cannot read signals: {e}");
                    Vec::new()
                }
            };
            if events_for_signals {
                let mut events = Vec::new();
                for s in &signals {
                    let reason = signal::event_reason(s);
                    if shown.insert(reason.clone()) {
                        let mut shown_rec = rec.clone();
                        shown_rec.status_reason = Some(reason);
                        shown_rec.updated_at = now();
                        events.push(op.resource_event(&shown_rec));
                    }
                }
                if !events.is_empty() {
                    let written = self.store.put_events(&op.lease, &events).await;
                    if !self.held(op, &rec.logical_id, written) {
                        return None;
                    }
                }
            }
            let physical = rec.physical_id.clone().unwrap_or_default();
            let outcome = match wait.progress(&signals) {
                Progress::Waiting if now_ms() >= deadline => Err(wait.timed_out(&signals)),
                Progress::Waiting => {
                    let left = Duration::from_millis((deadline - now_ms()).max(1) as u64);
                    tokio::time::sleep(left.min(self.signal_poll())).await;
                    continue;
                }
                Progress::Done => Ok(()),
                Progress::Failed(reason) => Err(reason),
            };
            let result = match outcome {
                Ok(()) => {
                    let mut attributes = rec.attributes.clone();
                    if signal::is_wait_condition(self.registry.canonical(&rec.resource_type)) {
                        attributes.insert(
                            "Data".into(),
                            Value::String(signal::data_attribute(&signals)),
                        );
                    }
                    Ok(CreateResult {
                        physical_resource_id: physical,
                        attributes,
                        no_echo: rec.no_echo,
                    })
                }
                Err(reason) => {
                    let mut e = ProviderError::new(ErrorKind::InternalFailure, reason);
                    // Made, then failed: the rollback deletes it.
                    e.physical_resource_id = Some(physical);
                    Err(e)
                }
            };
            return Some(result);
        }
    }
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
