//! Who runs which operation: each operation's lease owner, the lease a new
//! operation starts under, claiming operations nobody holds (leases run
//! out, or handed off by a full engine), breaking the leases of this
//! host's dead processes, and giving up an operation its resumes could
//! not move.

use std::time::Duration;

use super::{
    owner_is_dead, owner_process, stack_event, Claims, Core, EngineError, RESUMES_WITHOUT_PROGRESS,
};
use crate::stack::{now, CallKind, OperationKind, StackRecord, StackStatus};
use crate::store::{Lease, StoreError};

impl Core {
    /// A lease owner for one new operation of this process.
    pub(super) fn operation_owner(&self) -> String {
        format!("{}:{}", self.owner, uuid::Uuid::new_v4().simple())
    }

    /// Remembers that this process started the operation on `stack_id`
    /// under `lease`, so that [`Engine::run`] continues it under the same
    /// owner instead of waiting for it.
    pub(super) fn started_under(&self, lease: &Lease) {
        if let Ok(mut started) = self.started.lock() {
            started.insert(lease.stack_id.clone(), lease.clone());
        }
    }

    /// Takes the lease of `stack_id` for a new operation of this process
    /// (a new owner), waiting while another holds it.
    pub(super) async fn lease_for_operation(&self, stack_id: &str) -> Result<Lease, StoreError> {
        self.store
            .acquire_lease(stack_id, &self.operation_owner(), self.lease_ttl_ms())
            .await
    }

    /// How long a lease lasts unless renewed (`[engine] lease_seconds`).
    pub(super) fn lease_ttl_ms(&self) -> i64 {
        (self.config.engine.lease_seconds.max(1) as i64).saturating_mul(1000)
    }

    /// Takes the stack's lease for a new operation. While another operation
    /// holds it, its status (once it has recorded one) is returned as the
    /// refusal's: an operation that is only starting is waited for briefly,
    /// so the loser of a race learns what the winner is doing, and gets the
    /// stack if the winner gave up.
    pub(super) async fn lease_for_new_operation(
        &self,
        stack: &StackRecord,
    ) -> Result<Result<Lease, StackStatus>, EngineError> {
        let owner = self.operation_owner();
        let started = std::time::Instant::now();
        loop {
            match self
                .store
                .acquire_lease(&stack.stack_id, &owner, self.lease_ttl_ms())
                .await
            {
                Ok(lease) => return Ok(Ok(lease)),
                Err(StoreError::Busy { .. }) => {
                    let status = self.current_status(stack).await?;
                    if status.is_in_progress() || started.elapsed() > Duration::from_secs(2) {
                        return Ok(Err(status));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Claims<'_> {
    /// Hands an operation this process started but will not run (a server
    /// at its `max_operations`) to whichever engine sharing the state has
    /// room: its lease is released, so the next claim takes it.
    pub async fn hand_off(&self, stack_id: &str) -> Result<(), EngineError> {
        let lease = self
            .started
            .lock()
            .ok()
            .and_then(|mut s| s.remove(stack_id));
        if let Some(lease) = lease {
            self.store
                .hand_off_lease(&lease, self.lease_ttl_ms())
                .await?;
        }
        Ok(())
    }

    /// Expires the leases of operations whose owner was a process on this
    /// host that no longer runs, so they are claimed at once instead of
    /// when their lease runs out.
    pub async fn break_dead_leases(&self) -> Result<(), EngineError> {
        for s in self.store.in_progress_stacks().await? {
            if let Some(owner) = self.store.lease_owner(&s.stack_id).await? {
                if owner_process(&owner) != self.owner && owner_is_dead(&owner) {
                    self.store.break_lease(&s.stack_id, &owner).await?;
                }
            }
        }
        Ok(())
    }

    /// Claims up to `room` operations that no engine holds (handed off, or
    /// whose owner's lease ran out: a crashed or stalled engine) and returns
    /// their stack ids, to be driven with [`Engine::run`], which continues
    /// each under its claim. An operation taken over from an engine that
    /// died is a resume: after two in a row that recorded nothing it is
    /// marked failed instead (see [`Claims::give_up`]).
    /// `handed_off`: also operations a full engine handed off (a serving
    /// engine takes those at once; a command only once their lease time
    /// passed without any engine taking them).
    pub async fn claim(&self, room: usize, handed_off: bool) -> Result<Vec<String>, EngineError> {
        if room == 0 {
            return Ok(Vec::new());
        }
        let owners: Vec<String> = (0..room).map(|_| self.operation_owner()).collect();
        let claims = self
            .store
            .claim_operations(&owners, self.lease_ttl_ms(), handed_off)
            .await?;
        let mut ids = Vec::with_capacity(claims.len());
        for claim in claims {
            let stack_id = claim.lease.stack_id.clone();
            if let Some(from) = &claim.taken_from {
                tracing::warn!(stack = %stack_id, from = %from, token = claim.lease.token, "took over an operation whose engine stopped renewing its lease");
                self.shared.metrics.takeover();
                // A process that dies on the same step every time (a
                // provider that aborts, an input that exhausts memory)
                // would take every engine down in turn: after two resumes
                // in a row that recorded nothing, the operation is marked
                // failed instead.
                let attempts = self.store.note_resume(&stack_id).await?;
                if attempts > RESUMES_WITHOUT_PROGRESS && !self.only_waiting(&stack_id).await? {
                    if let Some(stack) = self.store.find_stack(&stack_id).await? {
                        self.give_up(&stack, attempts - 1, claim.lease).await?;
                    }
                    continue;
                }
            }
            self.started_under(&claim.lease);
            ids.push(stack_id);
        }
        Ok(ids)
    }

    /// Whether the operation is only waiting for answers from outside the
    /// process: a custom-resource handler's response, signals, or a hook
    /// that answered IN_PROGRESS. Such a
    /// resume records nothing until the answer comes, yet cannot be what
    /// takes engines down (waiting is progress), so repeated takeovers of
    /// it never mark it failed.
    pub(super) async fn only_waiting(&self, stack_id: &str) -> Result<bool, EngineError> {
        let rows = self.store.resources(stack_id).await?;
        let mut in_flight = rows
            .iter()
            .filter(|r| r.pending.is_some() && r.status.as_str().ends_with("_IN_PROGRESS"))
            .peekable();
        if in_flight.peek().is_none() {
            return Ok(false);
        }
        Ok(in_flight.all(|r| {
            r.pending
                .as_ref()
                .is_some_and(|p| matches!(p.action, CallKind::Signals | CallKind::Hook))
                || self
                    .registry
                    .get(&r.resource_type)
                    .is_some_and(|t| t.transport == crate::registry::Transport::Webhook)
        }))
    }

    /// Ends an operation that its resumes could not move: the stack goes to
    /// the failed status its operation can be recovered from (delete,
    /// continue-rollback, a new update), with the reason.
    pub(super) async fn give_up(
        &self,
        stack: &StackRecord,
        crashed: u32,
        lease: Lease,
    ) -> Result<(), EngineError> {
        let kind = self.store.operation(&stack.stack_id).await?.map(|o| o.kind);
        let (status, hint) = match stack.status {
            StackStatus::CreateInProgress => (
                StackStatus::CreateFailed,
                "delete the stack to remove what it made",
            ),
            StackStatus::RollbackInProgress => (
                StackStatus::RollbackFailed,
                "delete the stack (with --retain for a resource that cannot be deleted)",
            ),
            StackStatus::DeleteInProgress => (
                StackStatus::DeleteFailed,
                "delete again, with --retain for a resource that cannot be deleted",
            ),
            StackStatus::UpdateInProgress if kind == Some(OperationKind::Reconcile) => (
                StackStatus::UpdateFailed,
                "run cairn update again once the cause is fixed",
            ),
            StackStatus::UpdateInProgress | StackStatus::UpdateRollbackInProgress => (
                StackStatus::UpdateRollbackFailed,
                "continue the rollback, with --skip for a resource that cannot be rolled back",
            ),
            StackStatus::UpdateCompleteCleanupInProgress => (
                StackStatus::UpdateComplete,
                "the old resources the cleanup did not reach are still there",
            ),
            StackStatus::UpdateRollbackCompleteCleanupInProgress => (
                StackStatus::UpdateRollbackComplete,
                "the resources the cleanup did not reach are still there",
            ),
            _ => {
                self.store.release_lease(&lease).await?;
                return Ok(());
            }
        };
        let reason = format!(
            "Cairn stopped {crashed} times in a row while resuming this operation, recording nothing each time; it is marked {status} so that other commands can run: {hint}. The stack's last events name the resource it was working on."
        );
        tracing::error!(stack = %stack.stack_id, "{reason}");
        let event = stack_event(stack, status, Some(&reason), &now());
        self.store
            .set_stack_status(&lease, status, Some(&reason), &event)
            .await?;
        if status != StackStatus::UpdateRollbackFailed {
            self.store.clear_operation(&lease).await?;
        }
        self.store.release_lease(&lease).await?;
        Ok(())
    }
}
