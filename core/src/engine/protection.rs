//! Termination protection (`EnableTerminationProtection`,
//! `UpdateTerminationProtection`): a protected stack, and every nested
//! stack of a protected root, is not deleted; the refusal leaves the stack
//! and its status as they were. It is set on root stacks only, in any
//! status but DELETE_IN_PROGRESS and DELETE_COMPLETE, without the stack's
//! lease (an operation may be running). A parent's update that removes a
//! nested stack still deletes it: that is not a delete of the stack.

use super::{Core, EngineError};
use crate::stack::{StackRecord, StackStatus};

impl Core {
    /// Turns the termination protection of the root stack `name_or_id` on
    /// or off; its stack id.
    pub async fn update_termination_protection(
        &self,
        name_or_id: &str,
        enabled: bool,
    ) -> Result<String, EngineError> {
        let Some(stack) = self.store.find_stack(name_or_id).await? else {
            return Err(EngineError::Validation(format!(
                "Stack [{name_or_id}] does not exist"
            )));
        };
        if let Some(root) = &stack.root_id {
            return Err(EngineError::Validation(format!(
                "Stack [{}] is a nested stack: termination protection is set on its root stack ({root}), and applies to the nested stacks under it",
                stack.stack_name
            )));
        }
        if matches!(
            stack.status,
            StackStatus::DeleteInProgress | StackStatus::DeleteComplete
        ) {
            return Err(EngineError::Validation(format!(
                "Stack [{}] is in {} state: its termination protection cannot be changed",
                stack.stack_name, stack.status
            )));
        }
        self.store
            .set_termination_protection(&stack.stack_id, enabled)
            .await?;
        Ok(stack.stack_id)
    }

    /// Refuses the delete of `stack` when it, or the root of its tree, is
    /// protected (CloudFormation's text).
    pub(super) async fn refuse_protected_delete(
        &self,
        stack: &StackRecord,
    ) -> Result<(), EngineError> {
        let protected = match &stack.root_id {
            None => stack.termination_protection,
            Some(root) => self
                .store
                .find_stack(root)
                .await?
                .is_some_and(|r| r.termination_protection),
        };
        if protected {
            return Err(EngineError::Validation(format!(
                "Stack [{}] cannot be deleted while TerminationProtection is enabled",
                stack.stack_name
            )));
        }
        Ok(())
    }
}
