//! A row's create (a new resource, a replacement, a reinstall): the call
//! recorded before it is sent, or taken up again after a crash, and its
//! outcome recorded (made, failed leaving a physical id, or unknown: the
//! request id stays for whoever deletes it to ask again), or, for a made
//! resource with a CreationPolicy or a wait condition, the wait for its
//! signals begun.

use cairn_sdk::{CreateResult, ErrorKind, ProviderError};

use super::call;
use super::judged::Gate;
use crate::engine::signals::now_ms;
use crate::engine::{Attempt, Op, Steps};
use crate::hooks::HookAction;
use crate::signal::Wait;
use crate::stack::{now, CallKind, EventRecord, Journal, ResourceRecord, ResourceStatus};

/// The statuses a create's outcome shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) struct Ends {
    pub done: ResourceStatus,
    pub failed: ResourceStatus,
}

/// A resource's own create: CREATE_COMPLETE or CREATE_FAILED.
pub(in crate::engine) const CREATED: Ends = Ends {
    done: ResourceStatus::CreateComplete,
    failed: ResourceStatus::CreateFailed,
};

/// The create of a replacement (or a reinstall): UPDATE_COMPLETE or
/// UPDATE_FAILED.
pub(in crate::engine) const REPLACED: Ends = Ends {
    done: ResourceStatus::UpdateComplete,
    failed: ResourceStatus::UpdateFailed,
};

/// What a made resource does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::engine) enum Then {
    /// Its outcome is recorded.
    Record(Ends),
    /// It waits for its signals when its template says so (a resource's
    /// own create, or a replacement: Heat's UpdateWaitConditionHandle makes
    /// a new wait on each update), then shows these statuses.
    Signals(Ends),
}

impl Steps<'_> {
    /// A row's create: `rec` as the call's step shows it (status, reason,
    /// properties), `earlier` the events written with it. A create recorded
    /// on `rec` before (a crash, a cancellation) is taken up with its
    /// request id and its outcome learnt; else a new call is recorded, then
    /// sent. True when the resource exists and is recorded.
    pub(in crate::engine) async fn create(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        mut earlier: Vec<EventRecord>,
        then: Then,
    ) -> bool {
        let (call, attempt) = call::begin_or_resume(rec.pending.as_ref(), CallKind::Create);
        if attempt == Attempt::First {
            // The hooks judge it before anything is recorded or sent: a
            // replacement is its resource's update.
            let ends = match then {
                Then::Record(ends) | Then::Signals(ends) => ends,
            };
            let (action, previous) = match (&rec.journal, ends == REPLACED) {
                (Some(Journal::Changed { before }), true) => {
                    (HookAction::Update, Some(before.properties.clone()))
                }
                _ => (HookAction::Create, None),
            };
            let gate = self
                .judged(
                    op,
                    &mut rec,
                    (action, CallKind::Create),
                    previous.as_ref(),
                    &mut earlier,
                )
                .await;
            match gate {
                Gate::Go => {}
                Gate::Refused(refusal) => {
                    rec.status = ends.failed;
                    rec.status_reason = Some(refusal);
                    rec.pending = None;
                    rec.updated_at = now();
                    self.record(op, &rec, earlier).await;
                    return false;
                }
                Gate::Stopped => return false,
            }
            rec.pending = Some(call.clone());
            // Durable before the call: a crash from here on re-issues it.
            if !self.record(op, &rec, earlier).await {
                return false;
            }
        }
        let result = self
            .protocol()
            .call_create(op, &rec, &call.request_id, attempt)
            .await;
        match then {
            Then::Record(ends) => self.record_created(op, rec, result, ends).await,
            Then::Signals(ends) => {
                let logical_id = rec.logical_id.clone();
                self.created_or_waiting(op, &logical_id, rec, result, ends)
                    .await
            }
        }
    }

    /// A create call's outcome: recorded, or (made, with a CreationPolicy
    /// or wait condition) the wait for its signals begins.
    async fn created_or_waiting(
        &self,
        op: &Op,
        logical_id: &str,
        rec: ResourceRecord,
        result: Result<CreateResult, ProviderError>,
        ends: Ends,
    ) -> bool {
        if let Ok(created) = &result {
            match self
                .signals()
                .signal_wait(op, logical_id, &rec.properties)
                .await
            {
                Ok(Some((wait, source))) => {
                    // On the heap: few resources wait for signals, and the
                    // wait's future would make every create's larger.
                    return Box::pin(self.start_waiting(
                        op,
                        rec,
                        created.clone(),
                        (wait, source),
                        ends,
                    ))
                    .await;
                }
                Ok(None) => {}
                Err(reason) => {
                    let mut e = ProviderError::new(ErrorKind::InvalidRequest, reason);
                    e.physical_resource_id = Some(created.physical_resource_id.clone());
                    return self.record_created(op, rec, Err(e), ends).await;
                }
            }
        }
        self.record_created(op, rec, result, ends).await
    }

    /// Records the outcome of a create call (of a new resource or of a
    /// replacement): the physical id, attributes and NoEcho learned, or the
    /// failure with any physical resource it left behind (rollback deletes
    /// it). True when the resource exists and is recorded.
    pub(in crate::engine) async fn record_created(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        result: Result<CreateResult, ProviderError>,
        Ends { done, failed }: Ends,
    ) -> bool {
        // A call that timed out may still have made its resource: its record
        // stays, so whoever deletes this resource asks again first.
        let unknown_outcome =
            matches!(&result, Err(e) if crate::engine::protocol::outcome_unknown(e));
        if !unknown_outcome {
            rec.pending = None;
        }
        rec.updated_at = now();
        match result {
            Ok(created) => {
                rec.physical_id = Some(created.physical_resource_id.clone());
                rec.attributes = created.attributes;
                rec.no_echo = created.no_echo;
                rec.status = done;
                rec.status_reason = None;
                if !self.record(op, &rec, Vec::new()).await {
                    return false;
                }
                op.results.record(
                    &rec.logical_id,
                    &created.physical_resource_id,
                    &rec.attributes,
                );
                true
            }
            Err(e) => {
                rec.status = failed;
                rec.status_reason = Some(e.message);
                if e.physical_resource_id.is_some() {
                    rec.physical_id = e.physical_resource_id;
                }
                self.record(op, &rec, Vec::new()).await;
                false
            }
        }
    }

    /// Records that the resource (made by its provider) now waits, then
    /// waits. True when enough signals came.
    async fn start_waiting(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        created: CreateResult,
        (wait, source): (Wait, (String, String)),
        ends: Ends,
    ) -> bool {
        rec.physical_id = Some(created.physical_resource_id);
        rec.attributes = created.attributes;
        rec.no_echo = created.no_echo;
        rec.pending = Some(self.waiting_for_signals(rec.pending.as_ref(), now_ms()));
        rec.updated_at = now();
        // No event: CloudFormation shows nothing between "Resource creation
        // Initiated" and the signals.
        let written = self.store.put_resource(&op.lease, &rec, Vec::new()).await;
        if !self.held(op, &rec.logical_id, written) {
            return false;
        }
        self.await_and_record(op, rec, (wait, source), ends).await
    }

    /// Waits for a resource's signals and records the create's outcome.
    async fn await_and_record(
        &self,
        op: &Op,
        rec: ResourceRecord,
        (wait, source): (Wait, (String, String)),
        ends: Ends,
    ) -> bool {
        match self.signals().await_signals(op, &rec, wait, source).await {
            Some(result) => self.record_created(op, rec, result, ends).await,
            None => false,
        }
    }

    /// A create resumed while its resource waited for signals: the wait
    /// goes on (its deadline kept), or ends with what the template says now.
    pub(in crate::engine) async fn resume_signal_wait(
        &self,
        op: &Op,
        logical_id: &str,
        r: ResourceRecord,
        ends: Ends,
    ) -> bool {
        match self
            .signals()
            .signal_wait(op, logical_id, &r.properties)
            .await
        {
            Ok(Some(waiting)) => self.await_and_record(op, r, waiting, ends).await,
            outcome => {
                let result = match outcome {
                    Err(reason) => Err(ProviderError::new(ErrorKind::InvalidRequest, reason)),
                    _ => Ok(CreateResult {
                        physical_resource_id: r.physical_id.clone().unwrap_or_default(),
                        attributes: r.attributes.clone(),
                        no_echo: r.no_echo,
                    }),
                };
                self.record_created(op, r, result, ends).await
            }
        }
    }
}
