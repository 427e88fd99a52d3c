//! The choreography of a resource call, written once: **record the
//! intent** (a call's request id, minted or taken up again, durable
//! before the call), **call** through the resource-call protocol
//! ([`super::protocol`]: which provider, what it is sent, the time limit),
//! **record the outcome**, **ask again** when the outcome is not known,
//! and **decide by policy** (unknown never forgets: only a provider's
//! answer lets a record go).
//!
//! The operation kinds say *what* to do (which resource, which statuses
//! and reasons it shows); where the call is recorded is a ledger of this
//! module: a stack's row ([`delete::Row`]), an update's cleanup victim (events
//! only, the call on its row's journal: [`delete::Victim`]), a group member in
//! its group's state ([`delete::Member`]), a reconcile's in-row journal. No
//! kind mints, resumes or re-asks a call itself (`call`, private here).
//!
//! `delete` is the one function that deletes a physical resource: a
//! stack's row, the other physical resource a journal keeps, an update's
//! cleanup victim (retried, then disassociated), the resource a provider
//! replaced while updating in place, a reinstall's delete, a group member.

mod call;
pub(super) mod create;
pub(super) mod delete;
mod judged;
mod member;
mod reconcile;
mod update;
pub(super) mod victim;

use cairn_sdk::{ProviderError, RequestContext};
use serde_json::{Map, Value};

use super::{Attempt, EngineError, Op, Steps};
use crate::stack::{now, CallKind, PendingCall, ResourceRecord, ResourceStatus};
use crate::store::StoreError;

use call::Learned;

/// Whom a call goes to.
pub(super) enum Callee<'a> {
    /// A resource of the stack (a template resource, an update's victim):
    /// its provider, or the engine for the types it serves.
    Resource(&'a ResourceRecord),
    /// A group member: its provider, or a nested stack member's child
    /// stack; `context` makes its request context for a request id.
    Member {
        context: &'a (dyn Fn(&str) -> RequestContext + Sync),
        properties: &'a Map<String, Value>,
        launch: &'a str,
    },
}

impl Steps<'_> {
    /// Records resources whose create or update was cancelled because a
    /// sibling failed: CREATE_FAILED "Resource creation cancelled" or
    /// UPDATE_FAILED "Resource update cancelled". Their pending call stays
    /// recorded, so the rollback learns (and deletes) what a create that had
    /// already reached the provider made. Those that completed before the
    /// cancellation landed keep their status. Returns the logical ids marked.
    pub(super) async fn mark_cancelled(
        &self,
        op: &Op,
        names: &[&str],
    ) -> Result<Vec<String>, EngineError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        // Read after the cancelled work's last write: the store is FIFO.
        let stored = self.store.resources(&op.stack.stack_id).await?;
        let mut marked = Vec::new();
        for mut rec in stored {
            if !names.contains(&rec.logical_id.as_str()) {
                continue;
            }
            let (status, reason) = match rec.status {
                ResourceStatus::CreateInProgress => {
                    (ResourceStatus::CreateFailed, "Resource creation cancelled")
                }
                ResourceStatus::UpdateInProgress => {
                    (ResourceStatus::UpdateFailed, "Resource update cancelled")
                }
                _ => continue,
            };
            self.cancel_unknown_create(op, &mut rec).await;
            rec.status = status;
            rec.status_reason = Some(reason.into());
            rec.updated_at = now();
            if !self.record(op, &rec, Vec::new()).await {
                return Err(StoreError::LeaseLost(op.stack.stack_id.clone()).into());
            }
            marked.push(rec.logical_id);
        }
        Ok(marked)
    }

    /// What the create recorded with `request_id` made, asked again before
    /// what it made is deleted (one rule: [`call::learned`]).
    async fn learn(&self, op: &Op, callee: &Callee<'_>, request_id: &str) -> Learned {
        let asked = match callee {
            Callee::Resource(r) => {
                self.protocol()
                    .call_create(op, r, request_id, Attempt::Again)
                    .await
            }
            Callee::Member {
                context,
                properties,
                launch,
            } => {
                self.protocol()
                    .member_create(
                        op,
                        context(request_id),
                        (*properties).clone(),
                        Attempt::Again,
                        launch,
                    )
                    .await
            }
        };
        call::learned(asked)
    }

    /// The delete call through the protocol; NotFound counts as deleted.
    async fn send_delete(
        &self,
        op: &Op,
        callee: &Callee<'_>,
        physical: &str,
        request_id: &str,
        attempt: Attempt,
    ) -> Result<(), ProviderError> {
        match callee {
            Callee::Resource(r) => {
                self.protocol()
                    .call_delete(op, r, physical, request_id, attempt)
                    .await
            }
            Callee::Member {
                context,
                properties,
                ..
            } => {
                self.protocol()
                    .member_delete(
                        op,
                        context(request_id),
                        physical,
                        (*properties).clone(),
                        attempt,
                    )
                    .await
            }
        }
    }

    /// Whether a create recorded on `rec` (a crash, a cancellation, a
    /// timeout) waits for its outcome to be learnt.
    pub(super) fn create_in_flight(&self, rec: &ResourceRecord) -> bool {
        rec.pending
            .as_ref()
            .is_some_and(|p| p.call() == CallKind::Create)
    }

    /// The create a crash, a cancellation or a timeout left recorded on
    /// `rec` and that made no physical resource it knows of, if any: the
    /// one to tell the provider the engine stopped waiting for.
    pub(super) async fn cancel_unknown_create(&self, op: &Op, rec: &mut ResourceRecord) {
        if rec.physical_id.is_some() {
            return;
        }
        let Some(p) = call::recorded(rec.pending.as_ref(), CallKind::Create).cloned() else {
            return;
        };
        // A create the provider confirms it stopped and undid ends as not
        // made: the rollback has nothing to ask or delete.
        if self.protocol().cancel_create(op, rec, &p.request_id).await {
            rec.pending = None;
        }
    }

    /// A created resource now waits for its signals: the create's request
    /// id stays (a crash resumes the wait, not the create), with the
    /// wait's start so a resumed wait keeps its deadline.
    pub(super) fn waiting_for_signals(
        &self,
        created: Option<&PendingCall>,
        since_ms: i64,
    ) -> PendingCall {
        call::wait_for_signals(created, since_ms)
    }
}
