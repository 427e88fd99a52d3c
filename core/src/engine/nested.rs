//! Nested stacks: an `AWS::CloudFormation::Stack` resource is a real stack
//! (its own operations, lease, events), made, updated and deleted by its
//! parent's operation, which runs the child's operation and waits for it.
//!
//! Across levels the update follows CloudFormation: a child whose update
//! phase succeeded stays UPDATE_COMPLETE_CLEANUP_IN_PROGRESS until its
//! ancestors decide: when they all succeed, it runs its cleanup (the
//! parent's cleanup waits for the children's); when one rolls back, it rolls
//! back with its own UPDATE_ROLLBACK_* sequence. Claims pass over a nested
//! stack while its parent is in progress: the parent's operation drives its
//! children (after a crash too: the resumed parent re-issues its calls,
//! which find the child by its name and run it from the store).

use crate::engine::kinds::NestedStacks;
use std::time::Duration;

use cairn_sdk::{CreateResult, ErrorKind, ProviderError, UpdateResult};
use serde_json::{json, Map, Value};

use super::update::{ParameterInput, UpdateStackInput};
use super::{CreateStackInput, Engine, EngineError, Op};
use crate::nested;
use crate::operation::OperationOptions;
use crate::plan;
use crate::stack::{OnFailure, ResourceRecord, StackRecord, StackStatus, Tag};
use crate::store::StoreError;

/// What a child waiting in UPDATE_COMPLETE_CLEANUP_IN_PROGRESS does next.
enum Decision {
    Wait,
    Cleanup,
    RollBack,
}

impl NestedStacks<'_> {
    /// Refuses a direct change to a nested stack: its root is the stack to
    /// change.
    pub(super) async fn refuse_nested(
        &self,
        stack: &StackRecord,
        what: &str,
    ) -> Result<(), EngineError> {
        let Some(parent) = &stack.parent_id else {
            return Ok(());
        };
        let name = |id: &str| {
            let id = id.to_string();
            async move {
                self.store
                    .find_stack(&id)
                    .await
                    .ok()
                    .flatten()
                    .map(|s| s.stack_name)
                    .unwrap_or(id)
            }
        };
        let root = name(stack.root_id.as_deref().unwrap_or(parent)).await;
        let parent = name(parent).await;
        Err(EngineError::Validation(format!(
            "Stack [{}] is a nested stack of [{parent}] in the stack tree of [{root}]: Cairn does not {what} a nested stack on its own; {what} the root stack [{root}] instead",
            stack.stack_name
        )))
    }

    /// [`NestedStacks::refuse_nested`] for the stack named `name_or_id`, if any.
    pub(super) async fn refuse_nested_named(
        &self,
        name_or_id: &str,
        what: &str,
    ) -> Result<(), EngineError> {
        match self.store.find_stack(name_or_id).await? {
            Some(stack) => self.refuse_nested(&stack, what).await,
            None => Ok(()),
        }
    }

    fn engine(&self) -> Result<std::sync::Arc<Engine>, ProviderError> {
        self.me
            .upgrade()
            .ok_or_else(|| internal("the engine is shutting down"))
    }

    /// Creates the child stack of a nested stack resource (or finds the one
    /// an earlier attempt of the same request made) and runs it to its end.
    pub(super) async fn nested_create(
        &self,
        op: &Op,
        r: &ResourceRecord,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        self.nested_create_of(op, r, &r.logical_id, request_id)
            .await
    }

    /// [`Self::nested_create`] of a child whose template was read for the
    /// resource `template_of`: the resource itself, or for a group's
    /// member, its launch configuration.
    pub(super) async fn nested_create_of(
        &self,
        op: &Op,
        r: &ResourceRecord,
        template_of: &str,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        let name = nested::child_stack_name(&op.stack.stack_name, &r.logical_id, request_id);
        let child_id = match self.store.find_stack(&name).await.map_err(store_error)? {
            Some(c) if c.parent_id.as_deref() == Some(op.stack.stack_id.as_str()) => c.stack_id,
            _ => {
                // Read when the operation started; or, for a group member
                // whose type was computed (known only now), a file given
                // with the stack.
                let given = template_url(&r.properties)
                    .strip_prefix(crate::template::types::CONTEXT_FILE)
                    .and_then(|file| op.state.context.files.get(file));
                let body = match (op.nested.child(template_of), given) {
                    (Some(template), _) => template.body.clone(),
                    (None, Some(text)) => text.clone(),
                    (None, None) => {
                        return Err(invalid(format!(
                            "the nested template of {} was not read when the operation started; run the operation again from its template file",
                            r.logical_id
                        )))
                    }
                };
                let input = CreateStackInput {
                    stack_policy: None,
                    rollback_configuration: None,
                    notification_arns: op.stack.notification_arns.clone(),
                    stack_name: name.clone(),
                    template_body: body,
                    parameters: nested::child_parameters(&r.logical_id, &r.properties)
                        .map_err(|e| invalid(e.0))?,
                    on_failure: OnFailure::Rollback,
                    tags: child_tags(&r.properties).unwrap_or_else(|| op.stack.tags.clone()),
                    timeout_minutes: nested::timeout_minutes(&r.properties),
                    origin: Default::default(),
                    // A HOT child reads its files and its parent's
                    // environment (Heat's child environment).
                    context: child_context(op, template_of, &r.properties),
                    capabilities: None,
                    termination_protection: false,
                };
                self.creates()
                    .create_stack(&input, Some((&op.stack, op.nested.below(template_of))))
                    .await
                    .map_err(|e| {
                        invalid(format!(
                            "Embedded stack {name} was not successfully created: {e}"
                        ))
                    })?
            }
        };
        let child = self
            .drive_child(op, &child_id, |s| !s.is_in_progress())
            .await?;
        if child.status == StackStatus::CreateComplete {
            return Ok(CreateResult {
                attributes: self.child_attributes(op, &r.logical_id, &child).await?,
                physical_resource_id: child_id,
                no_echo: false,
            });
        }
        let reason = self.failure_reason(&child_id).await;
        let mut e = ProviderError::new(
            ErrorKind::InternalFailure,
            format!("Embedded stack {child_id} was not successfully created: {reason}"),
        );
        // Made, then rolled back: the parent's rollback deletes it.
        e.physical_resource_id = Some(child_id);
        Err(e)
    }

    /// How often a parent looks at a child it waits for (`[nested]
    /// poll_ms`).
    fn child_poll(&self) -> Duration {
        Duration::from_millis(self.config.nested.poll_ms.max(1))
    }

    /// How long a parent lets a child's operation alone before it tries to
    /// run it again (another task or engine holds it meanwhile): ten polls.
    fn restart_after(&self) -> Duration {
        self.child_poll() * 10
    }

    /// Updates a child stack in place. Rolling forward, it returns once the
    /// child's update phase is done (the child then waits for its
    /// ancestors' decision); in the parent's rollback, once the child is
    /// back (its own rollback, or an update to the old inputs).
    pub(super) async fn nested_update(
        &self,
        op: &Op,
        rec: &ResourceRecord,
        child_id: &str,
        properties: &Map<String, Value>,
        request_id: &str,
    ) -> Result<UpdateResult, ProviderError> {
        let rolling_back = op.stack.status.is_rollback_phase();
        let current = self
            .store
            .find_stack(child_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| {
                internal(format!(
                    "the nested stack {child_id} of {} does not exist",
                    rec.logical_id
                ))
            })?;
        let started_here = match self.store.operation(child_id).await.map_err(store_error)? {
            Some(o) => {
                OperationOptions::from_value(&o.options)
                    .parent_request
                    .as_deref()
                    == Some(request_id)
            }
            None => false,
        };
        let paused = current.status == StackStatus::UpdateCompleteCleanupInProgress;
        let mid_rollback = matches!(
            current.status,
            StackStatus::UpdateRollbackInProgress
                | StackStatus::UpdateRollbackCompleteCleanupInProgress
        );
        // A child whose own rollback failed continues it (the parent's
        // continue-rollback; skips of `Child.R` started it already).
        if rolling_back && current.status == StackStatus::UpdateRollbackFailed {
            self.updates()
                .continue_rollback(child_id, &[])
                .await
                .map_err(|e| {
                    internal(format!(
                        "Embedded stack {child_id} was not successfully updated: {e}"
                    ))
                })?;
        }
        let mid_rollback =
            mid_rollback || (rolling_back && current.status == StackStatus::UpdateRollbackFailed);
        // Rolling back a child that went forward in this update: it rolls
        // itself back once it sees its ancestor's rollback.
        if rolling_back && (paused || mid_rollback) {
            let child = self
                .drive_child(op, child_id, |s| !s.is_in_progress())
                .await?;
            return self.updated_child(op, &rec.logical_id, child, true).await;
        }
        if !started_here && !current.status.is_in_progress() {
            let input = UpdateStackInput {
                stack_policy: None,
                rollback_configuration: None,
                notification_arns: None,
                stack_policy_during_update: None,
                stack_name: child_id.to_string(),
                template_body: if rolling_back {
                    None
                } else {
                    op.nested.child(&rec.logical_id).map(|t| t.body.clone())
                },
                parameters: nested::child_parameters(&rec.logical_id, properties)
                    .map_err(|e| invalid(e.0))?
                    .into_iter()
                    .map(|(k, v)| (k, ParameterInput::Value(v)))
                    .collect(),
                tags: child_tags(properties),
                origin: Default::default(),
                context: (!rolling_back).then(|| child_context(op, &rec.logical_id, properties)),
                disable_rollback: false,
                capabilities: None,
                // The parent's moves reach its children.
                upgrade_types: match op.update.as_ref().filter(|_| !rolling_back) {
                    Some(u) if !u.upgrade_types.is_empty() => {
                        super::update::UpgradeTypes::To(u.upgrade_types.clone())
                    }
                    _ => super::update::UpgradeTypes::Keep,
                },
            };
            match self
                .update_child(
                    &input,
                    op.nested.below(&rec.logical_id),
                    request_id,
                    nested::timeout_minutes(properties),
                )
                .await
            {
                Ok(_) => {}
                // Nothing differs for the child (the parent's change was in
                // how it names the same inputs): done.
                Err(EngineError::Validation(m)) if m == "No updates are to be performed." => {
                    return Ok(UpdateResult {
                        physical_resource_id: None,
                        attributes: self.child_attributes(op, &rec.logical_id, &current).await?,
                        no_echo: false,
                    });
                }
                Err(e) => {
                    return Err(invalid(format!(
                        "Embedded stack {child_id} was not successfully updated: {e}"
                    )))
                }
            }
        }
        let child = self
            .drive_child(op, child_id, |s| {
                !s.is_in_progress()
                    || matches!(
                        s,
                        StackStatus::UpdateCompleteCleanupInProgress
                            | StackStatus::UpdateRollbackInProgress
                    )
            })
            .await?;
        self.updated_child(op, &rec.logical_id, child, rolling_back)
            .await
    }

    /// The parent resource's attributes for its child: the child's
    /// outputs, and when the parent's template reads them (HOT's
    /// `get_attr: [r, resource.<name>.<attr>]` of a template resource,
    /// heat/engine/resources/template_resource.py), the child's resources:
    /// `Resources`, each live one's physical id and attributes (a NoEcho
    /// one's are not passed up). Read only when asked for: a large child
    /// does not copy its rows into its parent's.
    async fn child_attributes(
        &self,
        op: &Op,
        logical_id: &str,
        child: &StackRecord,
    ) -> Result<Map<String, Value>, ProviderError> {
        let mut attributes = outputs_as_attributes(child);
        if !reads_attribute(&op.template, logical_id, nested::RESOURCES_ATTRIBUTE) {
            return Ok(attributes);
        }
        let rows = self
            .store
            .resources(&child.stack_id)
            .await
            .map_err(store_error)?;
        let resources: Map<String, Value> = rows
            .iter()
            .filter(|r| plan::is_live(r))
            .map(|r| {
                let shown = if r.no_echo {
                    Map::new()
                } else {
                    r.attributes.clone()
                };
                (
                    r.logical_id.clone(),
                    serde_json::json!({
                        "PhysicalId": r.physical_id.clone().unwrap_or_default(),
                        "Attributes": shown,
                    }),
                )
            })
            .collect();
        attributes.insert(nested::RESOURCES_ATTRIBUTE.into(), Value::Object(resources));
        Ok(attributes)
    }

    /// The result of a child's update as the parent resource records it:
    /// rolling forward, its update phase done; rolling back, back where it
    /// was.
    async fn updated_child(
        &self,
        op: &Op,
        logical_id: &str,
        child: StackRecord,
        rolling_back: bool,
    ) -> Result<UpdateResult, ProviderError> {
        let fine = if rolling_back {
            matches!(
                child.status,
                StackStatus::UpdateRollbackComplete | StackStatus::UpdateComplete
            )
        } else {
            matches!(
                child.status,
                StackStatus::UpdateCompleteCleanupInProgress | StackStatus::UpdateComplete
            )
        };
        if fine {
            return Ok(UpdateResult {
                physical_resource_id: None,
                attributes: self.child_attributes(op, logical_id, &child).await?,
                no_echo: false,
            });
        }
        let reason = self.failure_reason(&child.stack_id).await;
        Err(internal(format!(
            "Embedded stack {} was not successfully updated. Currently in {} with reason: {reason}",
            child.stack_id, child.status
        )))
    }

    /// Deletes a child stack and waits until it is gone.
    pub(super) async fn nested_delete(&self, op: &Op, child_id: &str) -> Result<(), ProviderError> {
        let Some(current) = self.store.find_stack(child_id).await.map_err(store_error)? else {
            return Ok(());
        };
        if current.status == StackStatus::DeleteComplete {
            return Ok(());
        }
        // Another operation of the child (its create's rollback, an update
        // waiting for this parent) ends first.
        if current.status.is_in_progress() && current.status != StackStatus::DeleteInProgress {
            self.drive_child(op, child_id, |s| !s.is_in_progress())
                .await?;
        }
        let status = self
            .store
            .find_stack(child_id)
            .await
            .map_err(store_error)?
            .map(|s| s.status);
        if status != Some(StackStatus::DeleteInProgress) {
            self.deletes()
                .delete_stack(child_id, &[])
                .await
                .map_err(|e| {
                    internal(format!(
                        "Embedded stack {child_id} was not successfully deleted: {e}"
                    ))
                })?;
        }
        let child = self
            .drive_child(op, child_id, |s| !s.is_in_progress())
            .await?;
        if child.status == StackStatus::DeleteComplete {
            return Ok(());
        }
        let reason = self.failure_reason(child_id).await;
        Err(internal(format!(
            "Embedded stack {child_id} was not successfully deleted: {reason}"
        )))
    }

    /// Starts an update of a child stack, recording the parent's request
    /// it is for.
    async fn update_child(
        &self,
        input: &UpdateStackInput,
        nested: nested::NestedTemplates,
        request_id: &str,
        timeout_minutes: Option<u32>,
    ) -> Result<String, EngineError> {
        let mut prepared = self
            .updates()
            .prepare_update_nested(input, Some(nested))
            .await?;
        if prepared.changes_nothing() {
            return Err(EngineError::Validation(
                "No updates are to be performed.".into(),
            ));
        }
        prepared.options.parent_request = Some(request_id.to_string());
        prepared.options.timeout_in_minutes = timeout_minutes.map(u64::from);
        self.updates().begin_update(prepared, None).await
    }

    /// Runs the child's operation (in a task of its own, so that a child
    /// waiting for its ancestors' decision keeps waiting after this returns)
    /// until its status satisfies `done`; returns it then.
    async fn drive_child(
        &self,
        op: &Op,
        child_id: &str,
        done: impl Fn(StackStatus) -> bool,
    ) -> Result<StackRecord, ProviderError> {
        let engine = self.engine()?;
        let mut task: Option<(tokio::task::JoinHandle<()>, std::time::Instant)> = None;
        loop {
            if op.aborted.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(internal(
                    "the parent's operation stopped: its lease was taken over",
                ));
            }
            let child = self
                .store
                .find_stack(child_id)
                .await
                .map_err(store_error)?
                .ok_or_else(|| internal(format!("the nested stack {child_id} does not exist")))?;
            if done(child.status) {
                return Ok(child);
            }
            let idle = task
                .as_ref()
                .is_none_or(|(t, at)| t.is_finished() && at.elapsed() >= self.restart_after());
            if idle && child.status.is_in_progress() {
                task = Some((
                    tokio::spawn(run_child(engine.clone(), child_id.to_string())),
                    std::time::Instant::now(),
                ));
            }
            tokio::time::sleep(self.child_poll()).await;
        }
    }

    /// Waits until every child of the stack that is still in progress has
    /// ended (a parent's cleanup waits for its children's).
    pub(super) async fn settle_children(&self, op: &Op) -> Result<(), EngineError> {
        let children: Vec<String> = self
            .store
            .list_stacks()
            .await?
            .into_iter()
            .filter(|s| {
                s.parent_id.as_deref() == Some(op.stack.stack_id.as_str())
                    && s.status.is_in_progress()
            })
            .map(|s| s.stack_id)
            .collect();
        for id in children {
            self.drive_child(op, &id, |s| !s.is_in_progress())
                .await
                .map_err(|e| EngineError::Validation(e.message))?;
        }
        Ok(())
    }

    /// For a nested stack whose update phase is done: waits until its
    /// ancestors decide between cleanup and rollback. True: roll back.
    pub(super) async fn ancestors_roll_back(&self, op: &Op) -> Result<bool, EngineError> {
        if op.stack.parent_id.is_none() {
            return Ok(false);
        }
        loop {
            if op.aborted.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(StoreError::LeaseLost(op.stack.stack_id.clone()).into());
            }
            match self.decision(&op.stack).await? {
                Decision::Wait => tokio::time::sleep(self.child_poll()).await,
                Decision::Cleanup => return Ok(false),
                Decision::RollBack => return Ok(true),
            }
        }
    }

    /// Any ancestor rolling back: roll back; else any still rolling
    /// forward: wait; else clean up.
    async fn decision(&self, stack: &StackRecord) -> Result<Decision, EngineError> {
        let mut waiting = false;
        let mut next = stack.parent_id.clone();
        while let Some(id) = next {
            let Some(s) = self.store.find_stack(&id).await? else {
                break;
            };
            match s.status {
                StackStatus::UpdateRollbackInProgress
                | StackStatus::UpdateRollbackCompleteCleanupInProgress
                | StackStatus::UpdateRollbackComplete
                | StackStatus::UpdateRollbackFailed => return Ok(Decision::RollBack),
                StackStatus::UpdateInProgress => waiting = true,
                _ => {}
            }
            next = s.parent_id;
        }
        Ok(if waiting {
            Decision::Wait
        } else {
            Decision::Cleanup
        })
    }

    /// The reason a child failed: the reason its stack gave when it left
    /// its operation's forward phase (CloudFormation's "The following
    /// resource(s) failed to …").
    async fn failure_reason(&self, child_id: &str) -> String {
        let Ok(events) = self.store.events(child_id).await else {
            return String::new();
        };
        events
            .iter()
            .rev()
            .filter(|e| e.logical_id == e.stack_name)
            .find(|e| {
                matches!(
                    e.status.as_str(),
                    "ROLLBACK_IN_PROGRESS"
                        | "CREATE_FAILED"
                        | "UPDATE_ROLLBACK_IN_PROGRESS"
                        | "UPDATE_ROLLBACK_FAILED"
                        | "DELETE_FAILED"
                        | "ROLLBACK_FAILED"
                        | "DELETE_IN_PROGRESS"
                ) && e
                    .status_reason
                    .as_deref()
                    .is_some_and(|r| r != "User Initiated")
            })
            .and_then(|e| e.status_reason.clone())
            .map(|r| {
                r.trim_end_matches("Rollback requested by user.")
                    .trim_end_matches("Delete requested by user.")
                    .to_string()
            })
            .unwrap_or_default()
    }
}

/// Runs a child's operation. Boxed with its type spelled out: the child's
/// operation may run its own children, and an inferred future type would
/// contain itself.
fn run_child(
    engine: std::sync::Arc<Engine>,
    id: String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        match engine.run(&id).await {
            Ok(_) | Err(EngineError::Store(StoreError::Busy { .. })) => {}
            Err(e) => tracing::warn!(stack = %id, "nested stack operation stopped: {e}"),
        }
    })
}

/// A child's outputs as the parent's attributes: `Outputs.<Name>` each,
/// and `Outputs`, the map of them all (HOT's `get_attr: [stack, outputs]`).
/// A HOT output with an `output_error` has no value to read.
fn outputs_as_attributes(child: &StackRecord) -> Map<String, Value> {
    let each: Map<String, Value> = child
        .outputs
        .iter()
        // An output with an error has no value to read; one whose
        // condition is false reads as null (Heat's None).
        .filter(|o| o.output_error.is_none())
        .map(|o| (o.output_key.clone(), o.read_value()))
        .collect();
    let mut attributes: Map<String, Value> = each
        .iter()
        .map(|(k, v)| (format!("Outputs.{k}"), v.clone()))
        .collect();
    attributes.insert(nested::OUTPUTS_ATTRIBUTE.into(), Value::Object(each));
    let errors: Map<String, Value> = child
        .outputs
        .iter()
        .filter_map(|o| Some((o.output_key.clone(), json!(o.output_error.clone()?))))
        .collect();
    if !errors.is_empty() {
        attributes.insert(
            crate::template::types::NESTED_OUTPUT_ERRORS_ATTRIBUTE.into(),
            Value::Object(errors),
        );
    }
    attributes
}

/// The `Tags` property as stack tags (`None`: not set, the parent's apply).
fn child_tags(properties: &Map<String, Value>) -> Option<Vec<Tag>> {
    let list = properties.get("Tags")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|t| {
                Some(Tag {
                    key: t.get("Key")?.as_str()?.to_string(),
                    value: match t.get("Value")? {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    },
                })
            })
            .collect(),
    )
}

fn invalid(message: impl Into<String>) -> ProviderError {
    ProviderError::new(ErrorKind::InvalidRequest, message)
}

fn internal(message: impl Into<String>) -> ProviderError {
    ProviderError::new(ErrorKind::InternalFailure, message)
}

fn store_error(e: StoreError) -> ProviderError {
    internal(e.to_string())
}

/// What the child of the nested stack resource `logical_id` reads besides
/// its template: its parent's context for it and, when it is a HOT
/// provider template that reads `resource_facade`, the facade of the
/// resource it implements (its metadata resolved now, as Heat resolves it
/// when the child reads it).
fn child_context(
    op: &Op,
    logical_id: &str,
    properties: &Map<String, Value>,
) -> crate::stack::TemplateContext {
    let mut context = op.state.context.for_nested(template_url(properties));
    let reads_facade = op.nested.child(logical_id).is_some_and(|t| {
        t.body.contains("resource_facade") || t.body.contains("Fn::ResourceFacade")
    });
    let Some(r) = op.template.resource(logical_id).filter(|_| reads_facade) else {
        return context;
    };
    let ev = op.evaluator();
    let at = crate::template::source::child("/Resources", logical_id);
    let resolved = |v: &Option<Value>, section: &str| match v {
        Some(v) => match ev.eval(v, &crate::template::source::child(&at, section)) {
            Ok(crate::template::eval::Evaluated::Value(v)) => v,
            _ => Value::Null,
        },
        None => Value::Null,
    };
    context.facade = Some(crate::stack::Facade {
        metadata: resolved(&r.metadata, "Metadata"),
        deletion_policy: r
            .deletion_policy
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        update_policy: resolved(&r.update_policy, "UpdatePolicy"),
    });
    context
}

/// A nested stack resource's TemplateURL (its context depends on it).
fn template_url(properties: &serde_json::Map<String, serde_json::Value>) -> &str {
    properties
        .get("TemplateURL")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
}

/// Whether `template` reads `GetAtt [logical_id, attribute]` anywhere (a
/// resource's properties or metadata, an output).
fn reads_attribute(
    template: &crate::template::Template,
    logical_id: &str,
    attribute: &str,
) -> bool {
    fn walk(v: &Value, logical_id: &str, attribute: &str) -> bool {
        match v {
            Value::Object(m) => {
                let here = m
                    .get("Fn::GetAtt")
                    .and_then(Value::as_array)
                    .is_some_and(|a| {
                        a.first().and_then(Value::as_str) == Some(logical_id)
                            && a.get(1).and_then(Value::as_str) == Some(attribute)
                    });
                here || m.values().any(|x| walk(x, logical_id, attribute))
            }
            Value::Array(a) => a.iter().any(|x| walk(x, logical_id, attribute)),
            _ => false,
        }
    }
    template.resources.iter().any(|r| {
        r.properties
            .values()
            .any(|v| walk(v, logical_id, attribute))
            || r.metadata
                .as_ref()
                .is_some_and(|m| walk(m, logical_id, attribute))
    }) || template
        .outputs
        .iter()
        .any(|o| walk(&o.value, logical_id, attribute))
}
