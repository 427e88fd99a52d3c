//! A group member's calls, recorded in its group's state (`Run::save`:
//! the state document written with the member's events): a create
//! recorded before it is sent and resumed with its request id, an update
//! in place (its old properties kept with it until its outcome is
//! recorded), a replacement under the member's own name (the member it
//! replaces kept aside until the new one is made, then deleted, or put
//! back when it fails), and the one delete ([`Steps::delete`]).

use cairn_sdk::CreateResult;

use super::call;
use super::create::{Ends, CREATED, REPLACED};
use super::delete::{Ledger, Ready, Retries};
use super::Callee;
use crate::engine::group::Run;
use crate::engine::protocol::UpdateChange;
use crate::engine::{Attempt, Steps};
use crate::group::state::{GroupState, Member};
use crate::stack::{now, CallKind, PendingCall, ResourceStatus};

/// CloudFormation's reason on a resource an update replaces.
const REPLACING: &str =
    "Requested update requires the creation of a new physical resource; hence creating one.";

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
        self.member_create(run, m, Attempt::First, CREATED).await
    }

    /// Learns the outcome of a member's create a crash interrupted (a
    /// custom-resource handler is never sent a Create twice) and records it:
    /// a replacement's shows UPDATE_COMPLETE or UPDATE_FAILED.
    pub(in crate::engine) async fn resume_member_create(
        &self,
        run: &Run<'_>,
        m: Member,
    ) -> Result<(), String> {
        let replacing = run
            .snapshot()
            .await
            .replaced
            .iter()
            .any(|r| r.name == m.name);
        let ends = if replacing { REPLACED } else { CREATED };
        self.member_create(run, m, Attempt::Again, ends).await
    }

    /// Updates the member `old` in place to `new` (its properties and
    /// launch configuration): UPDATE_IN_PROGRESS with the call and the old
    /// properties recorded before it is sent, then its outcome. A member
    /// whose update a crash interrupted (`old` = `new`, its call recorded)
    /// is taken up with its request id.
    pub(in crate::engine) async fn update_member(
        &self,
        run: &Run<'_>,
        old: Member,
        new: Member,
    ) -> Result<(), String> {
        let (call, attempt) = call::begin_or_resume(old.pending.as_ref(), CallKind::Update);
        let mut m = new;
        if attempt == Attempt::First {
            m.previous_properties = Some(old.properties.clone());
            m.status = ResourceStatus::UpdateInProgress;
            m.status_reason = None;
            m.pending = Some(call.clone());
            m.updated_at = now();
            let event = run.event(&m);
            let stored = m.clone();
            // Durable before the call: a crash from here on resumes it.
            run.save(vec![event], |st| st.put(stored))
                .await
                .map_err(|e| e.message)?;
        }
        let previous = m
            .previous_properties
            .clone()
            .unwrap_or_else(|| old.properties.clone());
        let physical = m.physical_id.clone().unwrap_or_default();
        let outcome = self
            .protocol()
            .member_update(
                run.op,
                run.context(&m, &call.request_id),
                &physical,
                UpdateChange::between(&m.properties, &previous, attempt),
            )
            .await;
        m.pending = None;
        m.previous_properties = None;
        m.updated_at = now();
        let mut left = None;
        let reason = match outcome {
            Ok(out) => {
                // A provider that made a new resource while updating: the
                // one it left is deleted like a replaced member.
                if let Some(p) = out.physical_resource_id.filter(|p| *p != physical) {
                    let mut gone = m.clone();
                    gone.physical_id = Some(physical.clone());
                    gone.properties = previous;
                    left = Some(gone);
                    m.physical_id = Some(p);
                }
                m.attributes = out.attributes;
                m.status = ResourceStatus::UpdateComplete;
                m.status_reason = None;
                None
            }
            Err(e) => {
                // A failed update that names a new resource it left (a
                // handler that replaces, then fails): that one is deleted;
                // the member keeps the one it had.
                if let Some(p) = e.physical_resource_id.clone().filter(|p| *p != physical) {
                    let mut made = m.clone();
                    made.physical_id = Some(p);
                    left = Some(made);
                }
                m.status = ResourceStatus::UpdateFailed;
                m.status_reason = Some(e.message.clone());
                Some(format!("{}: {}", m.name, e.message))
            }
        };
        let event = run.event(&m);
        let kept = left.clone();
        run.save(vec![event], |st| {
            st.put(m);
            st.left.extend(kept);
        })
        .await
        .map_err(|e| e.message)?;
        if let Some(gone) = left {
            self.delete_left_member(run, gone).await?;
        }
        reason.map_or(Ok(()), Err)
    }

    /// Replaces the member `old` under its own name with `new` (a new
    /// physical resource from the new properties): `old` is kept aside and
    /// the new one's create recorded in one write, then sent; once it is
    /// made, `old` is deleted. A failed create is undone (the new one
    /// deleted) and `old` put back, so the member still serves as before.
    pub(in crate::engine) async fn replace_member(
        &self,
        run: &Run<'_>,
        old: Member,
        new: Member,
    ) -> Result<(), String> {
        let mut m = new;
        m.physical_id = None;
        m.attributes = Default::default();
        m.previous_properties = None;
        m.status = ResourceStatus::UpdateInProgress;
        m.status_reason = Some(REPLACING.into());
        m.pending = Some(call::begin(CallKind::Create));
        m.updated_at = now();
        let event = run.event(&m);
        let (stored, kept) = (m.clone(), old.clone());
        // Durable before the call: a crash from here on resumes the create
        // and still knows the member it replaces.
        run.save(vec![event], |st| {
            st.replaced.push(kept);
            st.put(stored);
        })
        .await
        .map_err(|e| e.message)?;
        let made = Box::pin(self.member_create(run, m, Attempt::First, REPLACED)).await;
        Box::pin(self.finish_replacement(run, old, made)).await
    }

    /// After a member's replacement was made or failed: the member it
    /// replaced is deleted, or (the replacement undone) put back.
    pub(in crate::engine) async fn finish_replacement(
        &self,
        run: &Run<'_>,
        old: Member,
        made: Result<(), String>,
    ) -> Result<(), String> {
        match made {
            Ok(()) => self.delete_replaced_member(run, old).await,
            Err(reason) => {
                run.delete_member(old.name.clone())
                    .await
                    .map_err(|e| format!("{reason}; undoing the replacement failed too: {e}"))?;
                let back = old.clone();
                run.save(Vec::new(), |st| {
                    take_replaced(st, &back);
                    st.put(back);
                })
                .await
                .map_err(|e| e.message)?;
                Err(reason)
            }
        }
    }

    /// Deletes a member kept aside by its replacement through the one
    /// delete; its events name the member with the old physical id.
    pub(in crate::engine) async fn delete_replaced_member(
        &self,
        run: &Run<'_>,
        m: Member,
    ) -> Result<(), String> {
        self.delete_in(run, m, Slot::Replaced).await
    }

    /// Deletes a physical resource a member's provider left while updating
    /// it (the member keeps another), through the one delete.
    pub(in crate::engine) async fn delete_left_member(
        &self,
        run: &Run<'_>,
        m: Member,
    ) -> Result<(), String> {
        self.delete_in(run, m, Slot::Left).await
    }

    async fn member_create(
        &self,
        run: &Run<'_>,
        mut m: Member,
        attempt: Attempt,
        ends: Ends,
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
                m.status = ends.done;
                m.status_reason = None;
                None
            }
            Err(e) => {
                m.status = ends.failed;
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
        self.delete_in(run, m, Slot::Live).await
    }

    async fn delete_in(&self, run: &Run<'_>, m: Member, slot: Slot) -> Result<(), String> {
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
            slot,
            outcome: Ok(()),
        };
        self.delete(run.op, &callee, &mut ledger, Retries::ONCE)
            .await;
        ledger.outcome
    }
}

/// Where a member being deleted is kept in its group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// A member of the group.
    Live,
    /// A member replaced under its name, kept aside until deleted.
    Replaced,
    /// A resource a member's provider left while updating it.
    Left,
}

impl Slot {
    fn list(self, st: &mut GroupState) -> Option<&mut Vec<Member>> {
        match self {
            Slot::Live => None,
            Slot::Replaced => Some(&mut st.replaced),
            Slot::Left => Some(&mut st.left),
        }
    }
}

/// Takes `m` (by name and physical id) out of `list`.
fn take(list: &mut Vec<Member>, m: &Member) {
    list.retain(|r| !(r.name == m.name && r.physical_id == m.physical_id));
}

/// Takes `m` out of the members kept aside.
fn take_replaced(st: &mut GroupState, m: &Member) {
    take(&mut st.replaced, m);
}

/// A member being deleted, in its group's state: DELETE_IN_PROGRESS with
/// the call, then gone from the state, or DELETE_FAILED.
struct MemberLedger<'a, 'r> {
    run: &'a Run<'r>,
    m: Member,
    slot: Slot,
    outcome: Result<(), String>,
}

impl MemberLedger<'_, '_> {
    async fn put(&mut self) -> bool {
        let event = self.run.event(&self.m);
        let (m, slot) = (self.m.clone(), self.slot);
        let saved = self
            .run
            .save(vec![event], |st| match slot.list(st) {
                None => st.put(m),
                Some(list) => {
                    take(list, &m);
                    list.push(m);
                }
            })
            .await;
        self.keep(saved)
    }

    async fn remove(&mut self) -> bool {
        let event = self.run.event(&self.m);
        let (m, slot) = (self.m.clone(), self.slot);
        let saved = self
            .run
            .save(vec![event], |st| match slot.list(st) {
                None => st.remove(&m.name),
                Some(list) => take(list, &m),
            })
            .await;
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
