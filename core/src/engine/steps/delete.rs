//! The one delete of a physical resource ([`Steps::delete`]) and the
//! ledgers it is recorded in.
//!
//! Whatever is deleted (a stack's row, the other physical resource a
//! journal keeps, an update's cleanup victim, the resource a provider
//! replaced while updating in place, a reinstall's old resource, a group
//! member), the steps are the same: a create whose outcome is unknown is
//! asked again first (unknown never forgets: when that cannot be learnt
//! the record stays); the delete's request id is minted, or the one
//! recorded before a crash is taken up (a handler never gets it twice);
//! the intent is durable before the call; NotFound is gone; a failure is
//! retried as the ledger's retries say, then recorded for good. Only the
//! ledger differs: where the call and its outcome are written.

use std::time::Duration;

use cairn_sdk::CreateResult;

use super::call::{self, Learned};
use super::judged::Gate;
use super::Callee;
use crate::engine::{Attempt, Op, Steps};
use crate::hooks::HookAction;
use crate::stack::{now, CallKind, Journal, PendingCall, ResourceRecord, ResourceStatus, Snapshot};

/// Whether the delete goes on after the ledger looked at where it stands.
pub(in crate::engine) enum Ready {
    Go,
    /// Nothing more to do; the delete's result.
    Done(bool),
}

/// Where one delete is recorded (see the module's documentation).
#[async_trait::async_trait]
pub(in crate::engine) trait Ledger: Send {
    /// The physical resource to delete, as far as it is known.
    fn physical(&self) -> Option<String>;
    /// The call recorded where the delete is kept: a create whose outcome
    /// is unknown, or a delete recorded before a crash.
    fn recorded(&self) -> Option<&PendingCall>;
    /// A delete call recorded by the step this delete is part of, with
    /// whether it was sent before: taken as it is.
    fn given(&self) -> Option<(PendingCall, Attempt)> {
        None
    }
    /// What asking again about the recorded create learned: what it made,
    /// or (`None`) that it made nothing.
    fn learnt(&mut self, _made: Option<CreateResult>) {}
    /// Where the delete stands before it is sent (after the learning).
    async fn ready(&mut self) -> Ready {
        Ready::Go
    }
    /// Attempt `n` is about to be sent (`resumed`: its request was
    /// recorded before a crash). False when the write did not hold.
    async fn sending(&mut self, call: &PendingCall, n: u32, resumed: bool) -> bool;
    /// Attempt failed and another follows. False when the write did not
    /// hold.
    async fn retrying(&mut self, _reason: &str) -> bool {
        true
    }
    /// Deleted (or nothing was made). The result of the delete.
    async fn deleted(&mut self) -> bool;
    /// The delete failed for good.
    async fn failed(&mut self, reason: String);
    /// What the recorded create made cannot be learnt: the record stays.
    async fn unknown(&mut self, reason: String);
}

/// How often a delete is tried and how long it waits in between (an
/// update's cleanup; every other delete is tried once).
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct Retries {
    pub attempts: u32,
    pub backoff_seconds: f64,
}

impl Retries {
    pub(in crate::engine) const ONCE: Retries = Retries {
        attempts: 1,
        backoff_seconds: 0.0,
    };
}

impl Steps<'_> {
    /// The one delete of a physical resource: learn what an unknown create
    /// made, record the intent, call, record the outcome (see the module's
    /// documentation). True when it is gone (or nothing was made).
    pub(in crate::engine) async fn delete(
        &self,
        op: &Op,
        callee: &Callee<'_>,
        ledger: &mut dyn Ledger,
        retries: Retries,
    ) -> bool {
        if ledger.physical().is_none() {
            if let Some(p) = call::recorded(ledger.recorded(), CallKind::Create).cloned() {
                // On the heap: asking again is rare, and its future (a
                // create's call) would make every delete's larger.
                match Box::pin(self.learn(op, callee, &p.request_id)).await {
                    Learned::Made(made) => ledger.learnt(Some(made)),
                    Learned::Nothing => ledger.learnt(None),
                    Learned::Unknown(why) => {
                        ledger.unknown(call::cannot_tell(&p.request_id, &why)).await;
                        return false;
                    }
                }
            }
        }
        if let Ready::Done(result) = ledger.ready().await {
            return result;
        }
        // One request id for all attempts: a retry is the same request. A
        // delete recorded before a crash is resumed first, not sent again.
        let (call, mut attempt) = ledger
            .given()
            .unwrap_or_else(|| call::begin_or_resume(ledger.recorded(), CallKind::Delete));
        let attempts = retries.attempts.max(1);
        for n in 1..=attempts {
            if !ledger.sending(&call, n, attempt == Attempt::Again).await {
                return false;
            }
            let result = match ledger.physical() {
                None => Ok(()),
                Some(physical) => {
                    self.send_delete(op, callee, &physical, &call.request_id, attempt)
                        .await
                }
            };
            attempt = Attempt::First;
            match result {
                Ok(()) => return ledger.deleted().await,
                Err(e) if n == attempts => {
                    ledger.failed(e.message).await;
                    return false;
                }
                Err(e) => {
                    if !ledger.retrying(&e.message).await {
                        return false;
                    }
                    let wait =
                        retries.backoff_seconds.max(0.0) * f64::from(2u32.saturating_pow(n - 1));
                    tokio::time::sleep(Duration::from_secs_f64(wait.min(3600.0))).await;
                }
            }
        }
        false
    }

    /// Deletes a stack's row's physical resource (DELETE_IN_PROGRESS,
    /// DELETE_COMPLETE or DELETE_FAILED on the row), then the other one
    /// its update journal keeps; `retain` (or the DeletionPolicy) keeps it:
    /// DELETE_SKIPPED.
    pub(in crate::engine) async fn delete_row(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        retain: bool,
    ) -> bool {
        if op.aborted.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        if retain || crate::engine::delete::retained_by_policy(op, &rec.logical_id) {
            rec.status = ResourceStatus::DeleteSkipped;
            rec.status_reason = None;
            rec.pending = None;
            rec.updated_at = now();
            return self.record(op, &rec, Vec::new()).await;
        }
        // A DeleteStack's delete is judged by the hooks first (not a
        // rollback's, nor a delete taken up after a crash; the hooks'
        // judging taken up after one is).
        let judged = op.stack.status == crate::stack::StackStatus::DeleteInProgress
            && rec.physical_id.is_some()
            && rec
                .pending
                .as_ref()
                .is_none_or(|p| p.action == CallKind::Hook);
        if judged {
            let mut events = Vec::new();
            let gate = self
                .judged(
                    op,
                    &mut rec,
                    (HookAction::Delete, CallKind::Delete),
                    None,
                    &mut events,
                )
                .await;
            let was_waiting = rec.pending.take().is_some();
            match gate {
                Gate::Go => {}
                Gate::Refused(refusal) => {
                    rec.status = ResourceStatus::DeleteFailed;
                    rec.status_reason = Some(refusal);
                    rec.updated_at = now();
                    self.record(op, &rec, events).await;
                    return false;
                }
                Gate::Stopped => return false,
            }
            if (!events.is_empty() || was_waiting) && !self.record(op, &rec, events).await {
                return false;
            }
        }
        let callee_rec = rec.clone();
        let mut row = Row {
            steps: *self,
            op,
            rec,
        };
        self.delete(op, &Callee::Resource(&callee_rec), &mut row, Retries::ONCE)
            .await
    }

    /// The other physical resource a row's update journal keeps (the
    /// original of a replacement not rolled back, or the replacement a
    /// rollback abandoned), deleted with the row so nothing the update made
    /// is leaked. Its call is not recorded (the journal's snapshot is, and
    /// a delete sent again after a crash finds it gone): `Err` with why it
    /// could not be deleted.
    async fn delete_journaled_leftover(&self, op: &Op, rec: &ResourceRecord) -> Result<(), String> {
        let other = match &rec.journal {
            Some(Journal::Changed { before }) => Some(before),
            Some(Journal::Restored {
                discard: Some(discard),
            }) => Some(discard),
            _ => None,
        };
        let Some(snapshot) = other.filter(|o| o.physical_id != rec.physical_id) else {
            return Ok(());
        };
        let mut leftover = rec.clone();
        leftover.restore(snapshot);
        let mut ledger = Leftover {
            snapshot: (**snapshot).clone(),
            outcome: Ok(()),
        };
        // Boxed: a delete's whole call is a large future, and inline it made
        // every row's `deleted` as large (copied in full each time it was
        // made, though few rows have a journal): a fifth of a delete's
        // engine instructions.
        Box::pin(self.delete(op, &Callee::Resource(&leftover), &mut ledger, Retries::ONCE)).await;
        ledger.outcome
    }
}

/// A stack's row being deleted: DELETE_IN_PROGRESS with the call (when
/// there is a physical resource to delete), then DELETE_COMPLETE (the
/// journal's other resource deleted too) or DELETE_FAILED.
struct Row<'a> {
    steps: Steps<'a>,
    op: &'a Op,
    rec: ResourceRecord,
}

#[async_trait::async_trait]
impl Ledger for Row<'_> {
    fn physical(&self) -> Option<String> {
        self.rec.physical_id.clone()
    }

    fn recorded(&self) -> Option<&PendingCall> {
        self.rec.pending.as_ref()
    }

    fn learnt(&mut self, made: Option<CreateResult>) {
        if let Some(created) = made {
            self.rec.physical_id = Some(created.physical_resource_id);
            self.rec.attributes = created.attributes;
            self.rec.no_echo = created.no_echo;
        }
    }

    async fn sending(&mut self, call: &PendingCall, _n: u32, _resumed: bool) -> bool {
        let needs_call = self.rec.physical_id.is_some();
        self.rec.status = ResourceStatus::DeleteInProgress;
        self.rec.status_reason = None;
        self.rec.pending = needs_call.then(|| call.clone());
        self.rec.updated_at = now();
        self.steps.record(self.op, &self.rec, Vec::new()).await
    }

    async fn deleted(&mut self) -> bool {
        let leftover = self
            .steps
            .delete_journaled_leftover(self.op, &self.rec)
            .await;
        self.rec.pending = None;
        self.rec.updated_at = now();
        match leftover {
            Ok(()) => {
                self.rec.status = ResourceStatus::DeleteComplete;
                self.rec.journal = None;
                self.op.results.forget(&self.rec.logical_id);
                self.steps.record(self.op, &self.rec, Vec::new()).await
            }
            Err(reason) => {
                self.rec.status = ResourceStatus::DeleteFailed;
                self.rec.status_reason = Some(reason);
                self.steps.record(self.op, &self.rec, Vec::new()).await;
                false
            }
        }
    }

    async fn failed(&mut self, reason: String) {
        self.rec.pending = None;
        self.rec.updated_at = now();
        self.rec.status = ResourceStatus::DeleteFailed;
        self.rec.status_reason = Some(reason);
        self.steps.record(self.op, &self.rec, Vec::new()).await;
    }

    async fn unknown(&mut self, reason: String) {
        self.rec.status = ResourceStatus::DeleteFailed;
        self.rec.status_reason = Some(reason);
        self.rec.updated_at = now();
        self.steps.record(self.op, &self.rec, Vec::new()).await;
    }
}

/// A journal's other physical resource: nothing recorded, the outcome
/// kept for the row's.
struct Leftover {
    snapshot: Snapshot,
    outcome: Result<(), String>,
}

#[async_trait::async_trait]
impl Ledger for Leftover {
    fn physical(&self) -> Option<String> {
        self.snapshot.physical_id.clone()
    }

    fn recorded(&self) -> Option<&PendingCall> {
        self.snapshot.pending.as_ref()
    }

    /// A new request each time: the journal's snapshot is what is kept.
    fn given(&self) -> Option<(PendingCall, Attempt)> {
        Some((call::begin(CallKind::Delete), Attempt::First))
    }

    fn learnt(&mut self, made: Option<CreateResult>) {
        self.snapshot.physical_id = made.map(|m| m.physical_resource_id);
    }

    async fn sending(&mut self, _call: &PendingCall, _n: u32, _resumed: bool) -> bool {
        true
    }

    async fn deleted(&mut self) -> bool {
        self.outcome = Ok(());
        true
    }

    async fn failed(&mut self, reason: String) {
        let physical = self.snapshot.physical_id.clone().unwrap_or_default();
        self.outcome = Err(format!(
            "the update's other physical resource {physical}: {reason}"
        ));
    }

    async fn unknown(&mut self, reason: String) {
        self.outcome = Err(reason);
    }
}
