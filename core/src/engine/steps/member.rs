//! A group member's calls, recorded in its group's state (`Run::save`:
//! the state document written with the member's events): a create
//! recorded before it is sent and resumed with its request id, and the one
//! delete ([`Steps::delete`]).

use cairn_sdk::CreateResult;

use super::call;
use super::delete::{Ledger, Ready, Retries};
use super::Callee;
use crate::engine::group::Run;
use crate::engine::{Attempt, Steps};
use crate::group::state::Member;
use crate::stack::{now, CallKind, PendingCall, ResourceStatus};

impl Steps<'_> {
    /// Creates a new member (`m` as it starts: CREATE_IN_PROGRESS): its
    /// call recorded with "Resource creation Initiated" before it is sent,
    /// then its outcome. `Err`: why it failed, named.
    pub(in crate::engine) async fn create_member(
        &self,
        run: &Run<'_>,
        mut m: Member,
    ) -> Result<(), String> {
        let started = run.event(&m);
        m.status_reason = Some("Resource creation Initiated".into());
        m.pending = Some(call::begin(CallKind::Create));
        m.updated_at = now();
        let initiated = run.event(&m);
        let stored = m.clone();
        // Durable before the call: a crash from here on re-issues it.
        run.save(vec![started, initiated], |st| st.put(stored))
            .await
            .map_err(|e| e.message)?;
        self.member_create(run, m, Attempt::First).await
    }

    /// Learns the outcome of a member's create a crash interrupted (a
    /// custom-resource handler is never sent a Create twice) and records it.
    pub(in crate::engine) async fn resume_member_create(
        &self,
        run: &Run<'_>,
        m: Member,
    ) -> Result<(), String> {
        self.member_create(run, m, Attempt::Again).await
    }

    async fn member_create(
        &self,
        run: &Run<'_>,
        mut m: Member,
        attempt: Attempt,
    ) -> Result<(), String> {
        let request_id = m
            .pending
            .as_ref()
            .map(|p| p.request_id.clone())
            .unwrap_or_else(|| call::begin(CallKind::Create).request_id);
        let outcome = self
            .protocol()
            .member_create(
                run.op,
                run.context(&m, &request_id),
                m.properties.clone(),
                attempt,
                &run.launch_logical_id(),
            )
            .await;
        // As for template resources: a timed-out call may have made the
        // member, so its record stays for the delete to ask again.
        let unknown = matches!(&outcome, Err(e) if crate::engine::protocol::outcome_unknown(e));
        if !unknown {
            m.pending = None;
        }
        m.updated_at = now();
        let reason = match outcome {
            Ok(made) => {
                m.physical_id = Some(made.physical_resource_id);
                m.attributes = made.attributes;
                m.status = ResourceStatus::CreateComplete;
                m.status_reason = None;
                None
            }
            Err(e) => {
                m.status = ResourceStatus::CreateFailed;
                m.status_reason = Some(e.message.clone());
                if e.physical_resource_id.is_some() {
                    m.physical_id = e.physical_resource_id;
                }
                Some(format!("{}: {}", m.name, e.message))
            }
        };
        let event = run.event(&m);
        run.save(vec![event], |st| st.put(m))
            .await
            .map_err(|e| e.message)?;
        reason.map_or(Ok(()), Err)
    }

    /// Deletes a member through the one delete; `Err`: why not, named.
    pub(in crate::engine) async fn delete_member(
        &self,
        run: &Run<'_>,
        m: Member,
    ) -> Result<(), String> {
        let context = |request_id: &str| run.context(&m, request_id);
        let properties = m.properties.clone();
        let launch = run.launch_logical_id();
        let callee = Callee::Member {
            context: &context,
            properties: &properties,
            launch: &launch,
        };
        let mut ledger = MemberLedger {
            run,
            m: m.clone(),
            outcome: Ok(()),
        };
        self.delete(run.op, &callee, &mut ledger, Retries::ONCE)
            .await;
        ledger.outcome
    }
}

/// A member being deleted, in its group's state: DELETE_IN_PROGRESS with
/// the call, then gone from the state, or DELETE_FAILED.
struct MemberLedger<'a, 'r> {
    run: &'a Run<'r>,
    m: Member,
    outcome: Result<(), String>,
}

impl MemberLedger<'_, '_> {
    async fn put(&mut self) -> bool {
        let event = self.run.event(&self.m);
        let m = self.m.clone();
        let saved = self.run.save(vec![event], |st| st.put(m)).await;
        self.keep(saved)
    }

    async fn remove(&mut self) -> bool {
        let event = self.run.event(&self.m);
        let name = self.m.name.clone();
        let saved = self.run.save(vec![event], |st| st.remove(&name)).await;
        self.keep(saved)
    }

    fn keep(&mut self, saved: Result<(), cairn_sdk::ProviderError>) -> bool {
        match saved {
            Ok(()) => true,
            Err(e) => {
                self.outcome = Err(e.message);
                false
            }
        }
    }
}

#[async_trait::async_trait]
impl Ledger for MemberLedger<'_, '_> {
    fn physical(&self) -> Option<String> {
        self.m.physical_id.clone()
    }

    fn recorded(&self) -> Option<&PendingCall> {
        self.m.pending.as_ref()
    }

    fn learnt(&mut self, made: Option<CreateResult>) {
        self.m.physical_id = made.map(|m| m.physical_resource_id);
    }

    /// Nothing was made: the member only leaves the state.
    async fn ready(&mut self) -> Ready {
        if self.m.physical_id.is_some() {
            return Ready::Go;
        }
        self.m.status = ResourceStatus::DeleteComplete;
        self.m.status_reason = None;
        self.m.updated_at = now();
        Ready::Done(self.remove().await)
    }

    async fn sending(&mut self, call: &PendingCall, _n: u32, resumed: bool) -> bool {
        // A delete recorded before a crash is resumed, not announced again.
        if resumed {
            return true;
        }
        self.m.pending = Some(call.clone());
        self.m.status = ResourceStatus::DeleteInProgress;
        self.m.status_reason = None;
        self.m.updated_at = now();
        self.put().await
    }

    async fn deleted(&mut self) -> bool {
        self.m.pending = None;
        self.m.updated_at = now();
        self.m.status = ResourceStatus::DeleteComplete;
        self.m.status_reason = None;
        self.remove().await
    }

    async fn failed(&mut self, reason: String) {
        self.m.pending = None;
        self.m.updated_at = now();
        self.m.status = ResourceStatus::DeleteFailed;
        self.m.status_reason = Some(reason.clone());
        if self.put().await {
            self.outcome = Err(format!("{}: {reason}", self.m.name));
        }
    }

    async fn unknown(&mut self, reason: String) {
        self.m.status = ResourceStatus::DeleteFailed;
        self.m.status_reason = Some(reason.clone());
        self.m.updated_at = now();
        if self.put().await {
            self.outcome = Err(format!("{}: {reason}", self.m.name));
        }
    }
}
