//! The hooks' judging of a row's next call, durable: while a hook answers
//! IN_PROGRESS, where the hooks stand (the waiting hook's
//! `clientRequestToken`, its invocations and `callbackContext`, the
//! verdicts given) is recorded on the row as its pending HOOK call before
//! the hook is asked again, so a crash resumes the hook rather than
//! starting it from scratch; the events so far are written with it.

use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use crate::engine::hooks::Judgement;
use crate::engine::{Op, Steps};
use crate::hooks::HookAction;
use crate::stack::{now, CallKind, EventRecord, ResourceRecord};

/// What the hooks decided of a row's next call.
pub(in crate::engine) enum Gate {
    /// It may be sent.
    Go,
    /// A hook whose failure mode is FAIL refused it: why.
    Refused(String),
    /// The operation stopped meanwhile (a lost lease, a cancellation).
    Stopped,
}

impl Steps<'_> {
    /// The hooks' verdict on the call `then` of `rec` (`action` as the
    /// hooks see it; `previous`: an update's before). Their events are
    /// added to `earlier`, for the caller's next write; the row's pending
    /// HOOK call, if any, is left for the caller to replace.
    pub(in crate::engine) async fn judged(
        &self,
        op: &Op,
        rec: &mut ResourceRecord,
        (action, then): (HookAction, CallKind),
        previous: Option<&Map<String, Value>>,
        earlier: &mut Vec<EventRecord>,
    ) -> Gate {
        loop {
            match self.hooks().judge(op, rec, (action, then), previous).await {
                Judgement::Done(verdict) => {
                    earlier.extend(verdict.events);
                    return match verdict.refusal {
                        Some(why) => Gate::Refused(why),
                        None => Gate::Go,
                    };
                }
                Judgement::Later {
                    pending,
                    events,
                    delay,
                } => {
                    earlier.extend(events);
                    rec.pending = Some(pending);
                    rec.updated_at = now();
                    // Durable before the hook is asked again; the row's
                    // own event waits for the hooks' verdict (its call).
                    op.results.note_secrets(rec);
                    let events = std::mem::take(earlier);
                    let written = self.store.put_resource(&op.lease, rec, events).await;
                    if !self.held(op, &rec.logical_id, written) {
                        return Gate::Stopped;
                    }
                    tokio::time::sleep(delay).await;
                    if op.aborted.load(Ordering::SeqCst) {
                        return Gate::Stopped;
                    }
                }
            }
        }
    }
}
