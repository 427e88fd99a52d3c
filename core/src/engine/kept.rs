//! A failed update kept for inspection: CloudFormation's `DisableRollback`
//! on UpdateStack and ExecuteChangeSet (Heat's default). The update stops
//! in UPDATE_FAILED with what it did; then either
//! - the next update continues from there: it starts from the resources as
//!   they are (a failed resource is put back to what its provider last
//!   did successfully, so it is tried again), and the physical resources
//!   the failed update left that the stack no longer uses are deleted by
//!   that update's cleanup, or its rollback's (never forgotten); or
//! - RollbackStack (`cairn rollback`) goes back to the state the failed
//!   update started from (UPDATE_ROLLBACK_*). It also rolls back a stack
//!   whose create failed with rollback disabled (ROLLBACK_*).

use crate::operation::{OperationOptions, Superseded};

use super::kinds::Updates;
use super::{Core, EngineError, Op};
use crate::stack::{
    Journal, OperationKind, ResourceRecord, ResourceStatus, Snapshot, StackRecord, StackStatus,
};
use crate::store::OperationRecord;

/// Whether `stack` is a failed update kept for inspection (not one a
/// `cairn update` left, which only `cairn update` finishes).
pub(super) fn is_kept_update(stack: &StackRecord, operation: Option<&OperationRecord>) -> bool {
    stack.status == StackStatus::UpdateFailed
        && operation.is_some_and(|o| o.kind == OperationKind::Update)
}

/// One row of a kept failed update as the next update starts from it:
/// `None` when the row goes (a create that failed: nothing was made that
/// the stack may keep), and the physical resource it no longer uses.
/// - a resource the failed update created: kept as it is;
/// - one it changed: kept as it is now; the physical resource it had
///   before a replacement is superseded;
/// - one whose change failed: put back as it was before (its properties
///   are what its provider last did), and a replacement made for it is
///   superseded: the next update tries the change again.
pub(super) fn fold_row(mut r: ResourceRecord) -> (Option<ResourceRecord>, Option<Superseded>) {
    let Some(journal) = r.journal.take() else {
        return (Some(r), None);
    };
    let succeeded = matches!(
        r.status,
        ResourceStatus::CreateComplete | ResourceStatus::UpdateComplete
    );
    let superseded = |logical_id: &str, target: Snapshot| Superseded {
        logical_id: logical_id.to_string(),
        target,
    };
    match journal {
        Journal::Added if succeeded => (Some(r), None),
        Journal::Added => {
            let left = (r.physical_id.is_some() || r.pending.is_some())
                .then(|| superseded(&r.logical_id, r.snapshot()));
            (None, left)
        }
        Journal::Changed { before } if succeeded => {
            let old = (before.physical_id.is_some() && before.physical_id != r.physical_id)
                .then(|| superseded(&r.logical_id, *before));
            (Some(r), old)
        }
        Journal::Changed { before } => {
            let made = (r.physical_id.is_some() && r.physical_id != before.physical_id)
                .then(|| superseded(&r.logical_id, r.snapshot()));
            r.restore(&before);
            (Some(r), made)
        }
        Journal::Restored { discard } => {
            let left = discard.map(|d| superseded(&r.logical_id, *d));
            (Some(r), left)
        }
    }
}

/// [`fold_row`] over the stack's rows: the rows the next update plans
/// from, and what they no longer use.
pub(super) fn fold(rows: Vec<ResourceRecord>) -> (Vec<ResourceRecord>, Vec<Superseded>) {
    let mut kept = Vec::with_capacity(rows.len());
    let mut superseded = Vec::new();
    for r in rows {
        let (row, left) = fold_row(r);
        kept.extend(row);
        superseded.extend(left);
    }
    (kept, superseded)
}

/// The rows of a kept failed update rewritten (folded: [`fold_row`]) or
/// removed by the write that starts the update continuing it. Only rows
/// with a journal change; what they no longer use is in the operation's
/// options already (the planner folded the same rows).
pub(super) fn rewrite(rows: Vec<ResourceRecord>) -> super::RowRewrite {
    let mut out = super::RowRewrite::default();
    for r in rows.into_iter().filter(|r| r.journal.is_some()) {
        let logical_id = r.logical_id.clone();
        match fold_row(r).0 {
            Some(row) => out.put.push(row),
            None => out.removed.push(logical_id),
        }
    }
    out
}

impl Updates<'_> {
    /// The superseded physical resources of the running operation.
    pub(super) async fn superseded(&self, op: &Op) -> Result<Vec<Superseded>, EngineError> {
        Ok(self
            .store
            .operation(&op.stack.stack_id)
            .await?
            .map(|o| OperationOptions::from_value(&o.options).superseded)
            .unwrap_or_default())
    }

    /// Ends a failed update: kept in UPDATE_FAILED when it was asked to
    /// (`DisableRollback`), else rolled back.
    pub(super) async fn fail_update(
        &self,
        op: &Op,
        reason: &str,
    ) -> Result<StackStatus, EngineError> {
        let keep = self
            .store
            .operation(&op.stack.stack_id)
            .await?
            .is_some_and(|o| OperationOptions::from_value(&o.options).disable_rollback);
        if keep {
            return self
                .set_status(op, StackStatus::UpdateFailed, Some(reason))
                .await;
        }
        self.start_update_rollback(op, reason).await
    }

    /// RollbackStack (`cairn rollback`): a stack whose create or update
    /// failed with rollback disabled goes back to its last stable state
    /// (ROLLBACK_* after a create, UPDATE_ROLLBACK_* after an update).
    /// Then call [`Engine::run`](super::Engine::run).
    pub async fn start_rollback(&self, stack_name: &str) -> Result<String, EngineError> {
        self.nested_stacks()
            .refuse_nested_named(stack_name, "roll back")
            .await?;
        let Some(stack) = self.store.find_stack(stack_name).await? else {
            return Err(EngineError::Validation(format!(
                "Stack with id {stack_name} does not exist"
            )));
        };
        let operation = self.store.operation(&stack.stack_id).await?;
        let next = match stack.status {
            StackStatus::CreateFailed => StackStatus::RollbackInProgress,
            _ if is_kept_update(&stack, operation.as_ref()) => StackStatus::UpdateRollbackInProgress,
            StackStatus::UpdateFailed => {
                return Err(EngineError::Validation(format!(
                    "Stack:{} was left UPDATE_FAILED by cairn update, which keeps no earlier state to roll back to; run cairn update {} again once the cause is fixed",
                    stack.stack_id, stack.stack_name
                )))
            }
            other => {
                return Err(EngineError::Validation(format!(
                    "Stack:{} is in {other} state and can not be rolled back; only a stack in CREATE_FAILED or UPDATE_FAILED can",
                    stack.stack_id
                )))
            }
        };
        let op = self
            .resume_kept_operation(
                &stack,
                OperationKind::Rollback,
                "the rollback was being started",
            )
            .await?;
        // From here on the stack shows the template it goes back to.
        if let Some(other) = op.other() {
            let mut shown = op.stack.clone();
            other.state.apply_template(&mut shown);
            shown.outputs = other.state.outputs.clone();
            shown.updated_at = crate::stack::now();
            self.store.save_stack(&op.lease, &shown).await?;
        }
        self.set_status(&op, next, Some("User Initiated")).await?;
        Ok(stack.stack_id)
    }
}

impl Core {
    /// The last step this operation reported for deleting the superseded
    /// physical resource `physical_id` of `logical_id` (it has no row that
    /// would say): `None` when its delete has not started.
    pub(super) async fn superseded_step(
        &self,
        op: &Op,
        logical_id: &str,
        physical_id: Option<&str>,
    ) -> Result<Option<ResourceStatus>, EngineError> {
        let Some(operation) = self.store.operation(&op.stack.stack_id).await? else {
            return Ok(None);
        };
        let physical = physical_id.unwrap_or_default();
        // This operation's events: those after the count it started with
        // (an operation recorded by an older Cairn has none: its events are
        // told by their time, to the millisecond).
        let before = OperationOptions::from_value(&operation.options)
            .events_before
            .and_then(|n| usize::try_from(n).ok());
        let events = match before {
            Some(n) => self.store.events_from(&op.stack.stack_id, n).await?,
            None => self
                .store
                .events(&op.stack.stack_id)
                .await?
                .into_iter()
                .filter(|e| e.timestamp >= operation.started_at)
                .collect(),
        };
        Ok(events
            .into_iter()
            .rev()
            .find(|e| e.logical_id == logical_id && e.physical_id == physical)
            .and_then(|e| e.status.as_resource()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    fn row(
        status: ResourceStatus,
        physical: Option<&str>,
        journal: Option<Journal>,
    ) -> ResourceRecord {
        ResourceRecord {
            stack_id: "s".into(),
            logical_id: "R".into(),
            resource_type: "T".into(),
            physical_id: physical.map(str::to_string),
            status,
            status_reason: None,
            properties: Map::new(),
            attributes: Map::new(),
            pending: None,
            updated_at: crate::stack::now(),
            metadata: None,
            journal,
            no_echo: false,
            type_version: None,
        }
    }

    fn before(physical: &str) -> Snapshot {
        let mut b = row(ResourceStatus::CreateComplete, Some(physical), None).snapshot();
        b.properties.insert("V".into(), "old".into());
        b
    }

    #[test]
    fn a_replacement_that_succeeded_supersedes_the_old_physical_resource() {
        let r = row(
            ResourceStatus::UpdateComplete,
            Some("new"),
            Some(Journal::Changed {
                before: Box::new(before("old")),
            }),
        );
        let (row, left) = fold_row(r);
        let row = row.expect("kept");
        assert_eq!(row.physical_id.as_deref(), Some("new"));
        assert_eq!(row.journal, None);
        assert_eq!(left.map(|s| s.target.physical_id), Some(Some("old".into())));
    }

    #[test]
    fn a_change_that_failed_is_put_back_and_its_replacement_superseded() {
        let r = row(
            ResourceStatus::UpdateFailed,
            Some("half"),
            Some(Journal::Changed {
                before: Box::new(before("old")),
            }),
        );
        let (row, left) = fold_row(r);
        let row = row.expect("kept");
        assert_eq!(row.physical_id.as_deref(), Some("old"));
        assert_eq!(row.status, ResourceStatus::CreateComplete);
        assert_eq!(row.properties.get("V"), Some(&Value::from("old")));
        assert_eq!(
            left.map(|s| s.target.physical_id),
            Some(Some("half".into()))
        );
        // An in-place change that failed leaves nothing to delete.
        let r = row_failed_in_place();
        let (row, left) = fold_row(r);
        assert_eq!(row.map(|r| r.physical_id), Some(Some("old".into())));
        assert_eq!(left, None);
    }

    fn row_failed_in_place() -> ResourceRecord {
        row(
            ResourceStatus::UpdateFailed,
            Some("old"),
            Some(Journal::Changed {
                before: Box::new(before("old")),
            }),
        )
    }

    #[test]
    fn a_create_that_failed_goes_and_what_it_left_is_superseded() {
        let (row_left, left) = fold_row(row(
            ResourceStatus::CreateFailed,
            Some("partial"),
            Some(Journal::Added),
        ));
        assert!(row_left.is_none());
        assert_eq!(
            left.map(|s| s.target.physical_id),
            Some(Some("partial".into()))
        );
        let (row_left, left) = fold_row(row(
            ResourceStatus::CreateFailed,
            None,
            Some(Journal::Added),
        ));
        assert!(row_left.is_none());
        assert!(left.is_none());
        let (kept, left) = fold_row(row(
            ResourceStatus::CreateComplete,
            Some("made"),
            Some(Journal::Added),
        ));
        assert_eq!(kept.map(|r| r.journal), Some(None));
        assert!(left.is_none());
    }
}
