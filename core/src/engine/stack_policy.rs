//! Stack policies: which update actions a stack's resources may undergo
//! (the grammar and the decision are `crate::stack_policy`'s).
//!
//! - A stack's policy is set by CreateStack's `StackPolicyBody`,
//!   `SetStackPolicy`, or UpdateStack's `StackPolicyBody` (which takes
//!   effect once the update has started: that update is still checked
//!   against the policy it started with). It is stored beside the stack, not
//!   written by `save_stack`, like termination protection.
//! - An update records in its operation's options the policy it is checked
//!   against (`StackPolicyDuringUpdateBody` when given, else the stack's),
//!   so a resumed update checks the same one.
//! - The executor asks before it touches a resource: an in-place update or
//!   a metadata change is `Update:Modify`, a replacement `Update:Replace`
//!   (also an implicit one, decided when a changed reference is resolved),
//!   a removal `Update:Delete` (checked before any resource is touched, since
//!   removals happen in the cleanup). A denied action fails the resource (or
//!   the update) with the denial, and the update rolls back. Rollbacks are
//!   not checked, as CloudFormation's are not.
//! - A change set's preview marks each change the policy would deny
//!   (`DeniedByStackPolicy`).
//! - `cairn update` (a reconcile, with no rollback) is checked up front on
//!   what its template changes ([`denials`]), and at the resource on what
//!   drift or health decides during the run.

use super::{Core, EngineError, Op};
use crate::stack::StackStatus;
use crate::stack_policy::{StackPolicy, UpdateAction};
use serde_json::Value;

/// The change-set field naming a change the stack's policy would deny.
pub const DENIED: &str = "DeniedByStackPolicy";

/// The denials, by the policy an operation is checked against (none: no
/// denial), of each (action, logical id, type as the template writes it).
pub(super) fn denials(
    policy: Option<&str>,
    actions: &[(UpdateAction, String, String)],
) -> Result<Vec<String>, EngineError> {
    let Some(body) = policy else {
        return Ok(Vec::new());
    };
    let policy = parse(body, "The stack policy")?;
    Ok(actions
        .iter()
        .filter_map(|(action, name, ty)| policy.check(*action, name, ty).err().map(|d| d.0))
        .collect())
}

/// Parses a policy given by a caller; the error is the API's text.
pub(super) fn parse(body: &str, what: &str) -> Result<StackPolicy, EngineError> {
    StackPolicy::parse(body)
        .map_err(|e| EngineError::Validation(format!("{what} is not a valid stack policy: {e}")))
}

impl Core {
    /// `SetStackPolicy`: replaces the policy of `name_or_id`; its stack id.
    pub async fn set_stack_policy(
        &self,
        name_or_id: &str,
        body: &str,
    ) -> Result<String, EngineError> {
        parse(body, "StackPolicyBody")?;
        let stack = self.policy_stack(name_or_id).await?;
        if stack.status == StackStatus::DeleteInProgress {
            return Err(EngineError::Validation(format!(
                "Stack [{}] is in DELETE_IN_PROGRESS state: its stack policy cannot be changed",
                stack.stack_name
            )));
        }
        self.store.set_stack_policy(&stack.stack_id, body).await?;
        Ok(stack.stack_id)
    }

    /// `GetStackPolicy`: the policy of `name_or_id` as it was given, if any.
    pub async fn stack_policy(&self, name_or_id: &str) -> Result<Option<String>, EngineError> {
        Ok(self.policy_stack(name_or_id).await?.stack_policy)
    }

    async fn policy_stack(
        &self,
        name_or_id: &str,
    ) -> Result<crate::stack::StackRecord, EngineError> {
        match self.store.find_stack(name_or_id).await? {
            Some(s) if s.status != StackStatus::DeleteComplete => Ok(s),
            _ => Err(EngineError::Validation(format!(
                "Stack with id {name_or_id} does not exist"
            ))),
        }
    }
}

/// The policy an update operation is checked against, from its options.
pub(super) fn of_operation(policy: Option<&str>) -> Result<Option<StackPolicy>, EngineError> {
    match policy {
        None => Ok(None),
        Some(body) => StackPolicy::parse(body).map(Some).map_err(|e| {
            EngineError::Validation(format!(
                "the update's stack policy in the state cannot be read: {e}"
            ))
        }),
    }
}

impl Op {
    /// Whether the running update may do `action` to `logical_id`: the
    /// denial text when it may not. Rollbacks are never checked.
    pub(super) fn policy_denies(
        &self,
        action: UpdateAction,
        logical_id: &str,
        row_type: &str,
    ) -> Option<String> {
        let policy = self.update.as_ref()?.policy.as_ref()?;
        if self.stack.status.is_rollback_phase() {
            return None;
        }
        // Conditions name the type as the template writes it.
        let written = self
            .template
            .resource(logical_id)
            .map(|r| r.type_name.as_str())
            .unwrap_or(row_type);
        policy.check(action, logical_id, written).err().map(|d| d.0)
    }
}

/// Marks the changes of a change set that `policy` would deny (the preview
/// of what the execution would refuse). A conditional replacement is
/// checked both ways.
pub(super) fn mark_denied(changes: &mut Value, policy: Option<&str>) {
    let Some(policy) = policy.and_then(|p| StackPolicy::parse(p).ok()) else {
        return;
    };
    for change in changes.as_array_mut().into_iter().flatten() {
        let rc = &mut change["ResourceChange"];
        let text = |k: &str| rc[k].as_str().unwrap_or_default().to_string();
        let (logical, resource_type) = (text("LogicalResourceId"), text("ResourceType"));
        let actions: &[UpdateAction] = match (text("Action").as_str(), text("Replacement").as_str())
        {
            ("Remove", _) => &[UpdateAction::Delete],
            ("Modify", "True") => &[UpdateAction::Replace],
            ("Modify", "Conditional") => &[UpdateAction::Modify, UpdateAction::Replace],
            ("Modify", _) => &[UpdateAction::Modify],
            _ => &[],
        };
        let denial = actions
            .iter()
            .find_map(|a| policy.check(*a, &logical, &resource_type).err());
        if let (Some(d), Some(rc)) = (denial, rc.as_object_mut()) {
            rc.insert(DENIED.into(), Value::String(d.0));
        }
    }
}

/// A change set's stored changes without the preview's marks (what the plan
/// is compared on: the policy may change between preview and execution).
pub(super) fn unmarked(changes: &mut Value) {
    for c in changes.as_array_mut().into_iter().flatten() {
        if let Some(rc) = c["ResourceChange"].as_object_mut() {
            rc.remove(DENIED);
        }
    }
}
