//! Deleting a stack: the synchronous start, then its resources in reverse
//! dependency order over the resource-call protocol, deletion policies
//! honoured (Retain, Snapshot), a resource left behind by a journaled
//! update deleted with them.

use super::dag::Outcome;
use super::{protocol, stack_event, Deletes, EngineError, Op};
use crate::operation::OperationOptions;
use crate::stack::{now, OperationKind, ResourceRecord, ResourceStatus, StackRecord, StackStatus};
use crate::store::OperationRecord;
use std::collections::HashMap;

impl Deletes<'_> {
    /// The synchronous part of a delete. `Ok(None)`: nothing to delete (the
    /// stack does not exist or is already deleted), which is not an error.
    pub async fn start_delete(
        &self,
        name_or_id: &str,
        retain: &[String],
    ) -> Result<Option<String>, EngineError> {
        if let Some(stack) = self.store.find_stack(name_or_id).await? {
            if stack.status != StackStatus::DeleteComplete {
                self.refuse_protected_delete(&stack).await?;
                self.nested_stacks().refuse_nested(&stack, "delete").await?;
            }
        }
        self.delete_stack(name_or_id, retain).await
    }

    /// [`Deletes::start_delete`] without the refusal of nested stacks (their
    /// parent deletes them).
    pub(super) async fn delete_stack(
        &self,
        name_or_id: &str,
        retain: &[String],
    ) -> Result<Option<String>, EngineError> {
        let Some(stack) = self.store.find_stack(name_or_id).await? else {
            return Ok(None);
        };
        if stack.status == StackStatus::DeleteComplete {
            return Ok(None);
        }
        if stack.status == StackStatus::ReviewInProgress {
            self.delete_review_stack(&stack).await?;
            return Ok(Some(stack.stack_id));
        }
        if !retain.is_empty() && stack.status != StackStatus::DeleteFailed {
            return Err(EngineError::Validation(format!(
                "Invalid operation on stack [{}]: RetainResources can only be specified when stack is in DELETE_FAILED state",
                stack.stack_id
            )));
        }
        for o in &stack.outputs {
            if let Some(export) = &o.export_name {
                let users = self.store.importers(export).await?;
                let users: Vec<String> = users
                    .into_iter()
                    .filter(|u| *u != stack.stack_name)
                    .collect();
                if !users.is_empty() {
                    return Err(EngineError::Validation(format!(
                        "Export {export} cannot be deleted as it is in use by {}",
                        users.join(", ")
                    )));
                }
            }
        }
        let busy = |status: StackStatus| {
            // A second delete of a stack being deleted is a no-op, as in
            // CloudFormation: its caller follows the one under way.
            if status == StackStatus::DeleteInProgress {
                return Ok(Some(stack.stack_id.clone()));
            }
            Err(EngineError::Validation(format!(
                "Stack [{}] is in {} state and can not be deleted until the operation finishes",
                stack.stack_name, status
            )))
        };
        let lease = match self.lease_for_new_operation(&stack).await? {
            Ok(lease) => lease,
            Err(status) => return busy(status),
        };
        // Checked under the lease: another operation may have started since
        // the stack was read.
        let status = self.current_status(&stack).await?;
        if status.is_in_progress() {
            let _ = self.store.release_lease(&lease).await;
            return busy(status);
        }
        self.started_under(&lease);
        let operation = OperationRecord {
            stack_id: stack.stack_id.clone(),
            kind: OperationKind::Delete,
            options: OperationOptions {
                retain: retain.to_vec(),
                ..Default::default()
            }
            .to_value(),
            started_at: now(),
        };
        let stack_id = stack.stack_id.clone();
        self.begin_operation(
            &lease,
            operation,
            stack,
            StackStatus::DeleteInProgress,
            None,
            (None, Default::default()),
        )
        .await?;
        Ok(Some(stack_id))
    }

    /// `rows`: the stack's rows as stored now, if the caller read them.
    pub(super) async fn delete_phase(
        &self,
        op: &Op,
        retain: &[String],
        whole_stack: bool,
        rows: Option<Vec<ResourceRecord>>,
    ) -> Result<StackStatus, EngineError> {
        let failed = self.delete_resources(op, retain, rows).await?;
        if !failed.is_empty() {
            let reason = format!(
                "The following resource(s) failed to delete: [{}]. ",
                failed.join(", ")
            );
            return self
                .set_status(op, StackStatus::DeleteFailed, Some(&reason))
                .await;
        }
        if whole_stack {
            self.store.delete_exports(&op.lease).await?;
        }
        self.set_status(op, StackStatus::DeleteComplete, None).await
    }

    /// Deletes the stack's resources in reverse dependency order. `retain` and
    /// `DeletionPolicy: Retain` resources are skipped. Returns those that failed.
    /// `rows`: the stack's rows as stored now, if the caller read them.
    pub(super) async fn delete_resources(
        &self,
        op: &Op,
        retain: &[String],
        rows: Option<Vec<ResourceRecord>>,
    ) -> Result<Vec<String>, EngineError> {
        let stored = self.rows_or_read(op, rows).await?;
        let index: HashMap<&str, usize> = stored
            .iter()
            .enumerate()
            .map(|(i, r)| (r.logical_id.as_str(), i))
            .collect();
        // A resource is deleted once everything that depends on it is gone.
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); stored.len()];
        for (i, r) in stored.iter().enumerate() {
            if let Some(g) = op.graph.index_of(&r.logical_id) {
                for &d in op.graph.dependents(g) {
                    if let Some(&j) = index.get(op.graph.name(d)) {
                        preds[i].push(j);
                    }
                }
            }
        }
        let initial: Vec<Outcome> = stored
            .iter()
            .map(|r| match r.status {
                ResourceStatus::DeleteComplete | ResourceStatus::DeleteSkipped => Outcome::Done,
                _ => Outcome::NotRun,
            })
            .collect();
        let ids: Vec<String> = stored.iter().map(|r| r.logical_id.clone()).collect();
        // Each row is handed to its step, not copied: a node runs once.
        // Collected in place (an `Option` of a row is laid out as the row):
        // moving ten thousand rows into new memory took tens of milliseconds.
        let rows: std::sync::Mutex<Vec<Option<ResourceRecord>>> =
            std::sync::Mutex::new(stored.into_iter().map(Some).collect());
        let (ids_ref, rows_ref) = (&ids, &rows);
        let outcomes = self
            .schedule(
                op,
                &preds,
                initial,
                (false, false),
                ("delete", &|i| ids_ref[i].clone()),
                |i| async move {
                    let row = rows_ref
                        .lock()
                        .ok()
                        .and_then(|mut rows| rows.get_mut(i).and_then(Option::take));
                    let Some(r) = row else {
                        // The scheduler runs a node once; say so if it did not.
                        tracing::error!(stack = %op.stack.stack_name, resource = %ids_ref[i], "the delete of this resource was scheduled twice; its second run is refused");
                        return (i, false);
                    };
                    let keep = retain.contains(&r.logical_id);
                    (i, self.steps().delete_row(op, r, keep).await)
                },
            )
            .await?;
        Ok(ids
            .into_iter()
            .zip(outcomes)
            .filter(|(_, o)| *o == Outcome::Failed)
            .map(|(id, _)| id)
            .collect())
    }

    /// Deletes a stack that only ever held change sets (REVIEW_IN_PROGRESS):
    /// nothing to run, so both transitions are recorded here.
    pub(super) async fn delete_review_stack(&self, stack: &StackRecord) -> Result<(), EngineError> {
        let lease = self.lease_for_operation(&stack.stack_id).await?;
        for cs in self.store.change_sets(&stack.stack_id).await? {
            self.store.delete_change_set(&cs.change_set_id).await?;
        }
        self.open_history(&lease, stack, OperationKind::Delete, None)
            .await?;
        for status in [StackStatus::DeleteInProgress, StackStatus::DeleteComplete] {
            let reason = (status == StackStatus::DeleteInProgress).then_some("User Initiated");
            let event = stack_event(stack, status, reason, &now());
            self.store
                .set_stack_status(&lease, status, reason, &event)
                .await?;
        }
        self.store.release_lease(&lease).await?;
        Ok(())
    }
}

/// Whether `logical_id`'s DeletionPolicy keeps it when `op` removes it.
pub(super) fn retained_by_policy(op: &Op, logical_id: &str) -> bool {
    let removal = if op.stack.status == StackStatus::RollbackInProgress {
        protocol::Removal::RollbackOfCreate
    } else {
        protocol::Removal::Delete
    };
    protocol::retained(
        &op.evaluator(),
        &op.template,
        logical_id,
        protocol::Policy::Deletion,
        removal,
    )
}
