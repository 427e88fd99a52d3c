//! Stacks in review (REVIEW_IN_PROGRESS): the record a CREATE change set
//! or a refactor makes for a stack that does not exist yet (no template,
//! no resources, not updatable; deletable).

use std::collections::BTreeMap;

use super::{stack_event, Core, EngineError};
use crate::stack::{now, OnFailure, StackRecord, StackStatus};

/// The record of a stack in review: no template, no resources (a CREATE
/// change set's, or a stack a refactor creates, until it is executed).
pub(super) fn review_stack(stack_name: &str, stack_id: &str) -> StackRecord {
    let ts = now();
    StackRecord {
        stack_id: stack_id.to_string(),
        stack_name: stack_name.to_string(),
        status: StackStatus::ReviewInProgress,
        status_reason: Some("User Initiated".into()),
        description: None,
        template_body: String::new(),
        parameters: BTreeMap::new(),
        no_echo: Vec::new(),
        outputs: Vec::new(),
        on_failure: OnFailure::Rollback,
        created_at: ts.clone(),
        updated_at: ts.clone(),
        deleted_at: None,
        tags: Vec::new(),
        parent_id: None,
        root_id: None,
        context: Default::default(),
        capabilities: Vec::new(),
        notification_arns: Vec::new(),
        termination_protection: false,
        stack_policy: None,
        rollback_configuration: None,
    }
}

impl Core {
    /// A stack that exists only to hold CREATE change sets (REVIEW_IN_PROGRESS:
    /// no template, no resources, not updatable; deletable).
    pub(super) async fn insert_review_stack(
        &self,
        stack_name: &str,
        stack_id: &str,
    ) -> Result<StackRecord, EngineError> {
        let stack = review_stack(stack_name, stack_id);
        let first = stack_event(
            &stack,
            StackStatus::ReviewInProgress,
            Some("User Initiated"),
            &stack.created_at,
        );
        let lease = self
            .store
            .insert_stack(
                &stack,
                &first,
                None,
                &self.operation_owner(),
                self.lease_ttl_ms(),
            )
            .await?;
        self.store.release_lease(&lease).await?;
        Ok(stack)
    }
}
