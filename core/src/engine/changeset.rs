//! Change sets: an update (or a create) planned and stored without touching
//! any resource, executed later exactly as planned. The plan comes from the
//! same [`Updates::prepare_update`] an update runs, and executing re-plans and
//! refuses if the result differs, so a change set never disagrees with what
//! its execution does.

use crate::engine::kinds::ChangeSets;
use crate::stack::{ChangeSetStatus, ExecutionStatus, OperationKind};
use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{check_stack_name, stack_context, valid_stack_name, EngineError};
use crate::hooks::{HookAction, StackTarget, TargetOperation};
use crate::operation::OperationOptions;
use crate::plan;
use crate::stack::{now, ChangeSetRecord, OnFailure, StackRecord, StackStatus};
use crate::store::{OperationRecord, StoreError};
use crate::template::eval::{Evaluator, StackContext};
use crate::template::parameters::ParameterValues;
use crate::template::Template;

use super::update::supplied_values;
use super::{ParameterInput, UpdateStackInput};

/// CloudFormation's text for a change set that changes nothing.
pub const NO_CHANGES: &str = "The submitted information didn't contain changes. Submit different information to create a change set.";

pub use crate::stack::ChangeSetType;

/// What `cairn plan` (CreateChangeSet) asks for.
#[derive(Debug, Clone)]
pub struct CreateChangeSetInput {
    pub stack_name: String,
    pub change_set_name: String,
    /// `None`: CREATE when the stack does not exist (or is only in review),
    /// UPDATE otherwise.
    pub change_set_type: Option<ChangeSetType>,
    /// `None`: the stack's current template (UPDATE only).
    pub template_body: Option<String>,
    pub parameters: BTreeMap<String, ParameterInput>,
    pub description: Option<String>,
    /// The stack's tags once executed (`None`: keep the stack's; for a new
    /// stack, none).
    pub tags: Option<Vec<crate::stack::Tag>>,
    /// Where the template came from (its nested stacks' TemplateURLs).
    pub origin: crate::nested::Origin,
    /// `IncludeNestedStacks`: a change set of its own for each nested
    /// stack the update modifies.
    pub include_nested_stacks: bool,
    /// HOT's files and environment.
    pub context: crate::stack::TemplateContext,
    /// The capabilities acknowledged (`None`: not checked). A change set
    /// never needs CAPABILITY_AUTO_EXPAND: its changes are reviewed.
    pub capabilities: Option<Vec<String>>,
    /// `ResourcesToImport` of an IMPORT set.
    pub resources_to_import: Vec<crate::import::ResourceToImport>,
    /// `RollbackConfiguration`: what the execution runs with (see
    /// `UpdateStackInput::rollback_configuration`).
    pub rollback_configuration: Option<crate::rollback_triggers::RollbackConfiguration>,
    /// `NotificationARNs` once executed (`None`: keep the stack's).
    pub notification_arns: Option<Vec<String>>,
    /// Cairn's own: move resources to their types' default versions
    /// (`--upgrade-types`); the set shows each move.
    pub upgrade_types: bool,
}

/// `given` with CAPABILITY_AUTO_EXPAND, which a change set does not need.
fn reviewed(given: &Option<Vec<String>>) -> Option<Vec<String>> {
    given.as_ref().map(|g| {
        let mut all = g.clone();
        all.push(super::capabilities::AUTO_EXPAND.to_string());
        all
    })
}

impl ChangeSets<'_> {
    /// Plans an update (or a create) and stores it as a change set; nothing
    /// else changes, except that a CREATE set makes the stack exist in
    /// REVIEW_IN_PROGRESS. A set without changes is stored FAILED with
    /// CloudFormation's reason.
    pub async fn create_change_set(
        &self,
        input: &CreateChangeSetInput,
    ) -> Result<ChangeSetRecord, EngineError> {
        if !valid_stack_name(&input.change_set_name) {
            return Err(EngineError::Validation(format!(
                "1 validation error detected: Value '{}' at 'changeSetName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z][-a-zA-Z0-9]* and have length less than or equal to 128",
                input.change_set_name
            )));
        }
        if let Some(c) = &input.rollback_configuration {
            c.check()?;
        }
        if let Some(t) = &input.notification_arns {
            crate::notifications::check_targets(t)?;
        }
        let existing = self.store.find_stack(&input.stack_name).await?;
        let in_review = existing
            .as_ref()
            .is_some_and(|s| s.status == StackStatus::ReviewInProgress);
        let kind = input.change_set_type.unwrap_or(match &existing {
            Some(_) if !in_review => ChangeSetType::Update,
            _ => ChangeSetType::Create,
        });
        match kind {
            ChangeSetType::Create => self.create_set_for_new_stack(input, existing).await,
            ChangeSetType::Update => self.create_set_for_update(input, in_review).await,
            ChangeSetType::Import => self.create_set_for_import(input, in_review).await,
        }
    }

    /// An IMPORT set: checked as `cairn import` is (the rules, each
    /// resource read), its changes CloudFormation's `Import` actions with
    /// the physical id each identifier makes.
    async fn create_set_for_import(
        &self,
        input: &CreateChangeSetInput,
        in_review: bool,
    ) -> Result<ChangeSetRecord, EngineError> {
        let Some(body) = input.template_body.clone() else {
            return Err(EngineError::Validation(
                "An IMPORT change set needs the template with the resources to import".into(),
            ));
        };
        let import = super::import::ImportInput {
            stack_name: input.stack_name.clone(),
            template_body: body,
            parameters: input.parameters.clone(),
            resources: input.resources_to_import.clone(),
            capabilities: reviewed(&input.capabilities),
            origin: input.origin.clone(),
        };
        let existing = self.store.find_stack(&input.stack_name).await?;
        // A stack that does not exist yet is made of the imports alone: it
        // waits in REVIEW_IN_PROGRESS, as a CREATE set's does.
        let (stack, target, adoptions) = match existing {
            Some(_) if !in_review => {
                let (prepared, adoptions) = self.imports().prepare_import(&import).await?;
                (prepared.stack, prepared.target, adoptions)
            }
            existing => {
                let stack_id = match &existing {
                    Some(s) => s.stack_id.clone(),
                    None => self.new_stack_id(&input.stack_name),
                };
                let (made, adoptions) = self.imports().check_new_import(&import, &stack_id).await?;
                let review = match existing {
                    Some(s) => s,
                    None => {
                        self.insert_review_stack(&input.stack_name, &stack_id)
                            .await?
                    }
                };
                (review, super::update::StackState::of(&made), adoptions)
            }
        };
        let base_version = self.store.event_count(&stack.stack_id).await? as i64;
        let mut record = self.change_set_record(
            input,
            ChangeSetType::Import,
            &stack,
            &target.template_body,
            &target.parameters,
            &target.no_echo,
            &[],
            base_version,
        );
        record.changes = Value::Array(
            adoptions
                .iter()
                .map(|a| {
                    let identifier = input
                        .resources_to_import
                        .iter()
                        .find(|r| r.logical_id == a.logical_id)
                        .map(|r| Value::Object(r.identifier.clone()))
                        .unwrap_or(Value::Null);
                    json!({"Type": "Resource", "ResourceChange": {
                        "Action": "Import",
                        "LogicalResourceId": a.logical_id,
                        "PhysicalResourceId": a.physical_id,
                        "ResourceType": a.resource_type,
                        "ResourceIdentifier": identifier,
                        "Scope": [],
                        "Details": [],
                    }})
                })
                .collect(),
        );
        self.store.put_change_set(&record).await?;
        Ok(record)
    }

    /// Executes an IMPORT set: checked again, then IMPORT_IN_PROGRESS.
    async fn execute_import(&self, cs: &ChangeSetRecord) -> Result<String, EngineError> {
        let resources = cs
            .changes
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let rc = &c["ResourceChange"];
                crate::import::ResourceToImport {
                    resource_type: rc["ResourceType"].as_str().unwrap_or_default().into(),
                    logical_id: rc["LogicalResourceId"].as_str().unwrap_or_default().into(),
                    identifier: rc["ResourceIdentifier"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                }
            })
            .collect();
        let import = super::import::ImportInput {
            stack_name: cs.stack_id.clone(),
            template_body: cs.template_body.clone(),
            parameters: cs
                .parameters
                .iter()
                .map(|(k, v)| (k.clone(), ParameterInput::Value(v.clone())))
                .collect(),
            resources,
            capabilities: None,
            origin: Default::default(),
        };
        let Some(stack) = self.store.find_stack(&cs.stack_id).await? else {
            return Err(StoreError::NoSuchStack(cs.stack_id.clone()).into());
        };
        if stack.status != StackStatus::ReviewInProgress {
            let (mut prepared, adoptions) = self.imports().prepare_import(&import).await?;
            let details = json!(adoptions);
            prepared.options.imports = Some(adoptions);
            return self
                .updates()
                .begin_moving(
                    prepared,
                    Some(cs),
                    (OperationKind::Import, StackStatus::ImportInProgress),
                    Some(details),
                )
                .await;
        }
        // A new stack: checked again, then out of review.
        let import = super::import::ImportInput {
            stack_name: stack.stack_name.clone(),
            ..import
        };
        let (made, adoptions) = self
            .imports()
            .check_new_import(&import, &stack.stack_id)
            .await?;
        let lease = self.lease_in_review(&stack, cs).await?;
        let operation = self.imports().import_operation(&made, &adoptions);
        let made = StackRecord {
            created_at: stack.created_at.clone(),
            ..made
        };
        let stack_id = made.stack_id.clone();
        self.begin_operation(
            &lease,
            operation,
            made,
            StackStatus::ImportInProgress,
            Some(cs),
            (None, Default::default()),
        )
        .await?;
        Ok(stack_id)
    }

    async fn create_set_for_update(
        &self,
        input: &CreateChangeSetInput,
        in_review: bool,
    ) -> Result<ChangeSetRecord, EngineError> {
        self.nested_stacks()
            .refuse_nested_named(&input.stack_name, "make a change set for")
            .await?;
        if in_review || self.store.find_stack(&input.stack_name).await?.is_none() {
            return Err(EngineError::Validation(format!(
                "Stack [{}] does not exist",
                input.stack_name
            )));
        }
        let prepared = self
            .updates()
            .prepare_update(&UpdateStackInput {
                stack_policy: None,
                rollback_configuration: input.rollback_configuration.clone(),
                notification_arns: None,
                stack_policy_during_update: None,
                stack_name: input.stack_name.clone(),
                template_body: input.template_body.clone(),
                parameters: input.parameters.clone(),
                tags: input.tags.clone(),
                origin: input.origin.clone(),
                // Without a template, the stack's own context.
                context: input.template_body.as_ref().map(|_| input.context.clone()),
                disable_rollback: false,
                capabilities: reviewed(&input.capabilities),
                upgrade_types: match input.upgrade_types {
                    true => super::update::UpgradeTypes::ToDefaults,
                    false => super::update::UpgradeTypes::Keep,
                },
            })
            .await?;
        let base_version = self.store.event_count(&prepared.stack.stack_id).await? as i64;
        // New tags alone are a change, as for UpdateStack.
        let empty = prepared.changes_nothing();
        let record = self.change_set_record(
            input,
            ChangeSetType::Update,
            &prepared.stack,
            &prepared.target.template_body,
            &prepared.target.parameters,
            &prepared.target.no_echo,
            &prepared.changes,
            base_version,
        );
        let record = ChangeSetRecord {
            nested: crate::stack::ChangeSetNesting {
                templates: prepared.nested.clone(),
                include_nested_stacks: input.include_nested_stacks,
                context: prepared.target.context.clone(),
                upgrade_types: prepared.options.upgrade_types.clone(),
                ..record.nested
            },
            ..record
        };
        let mut record = if empty {
            ChangeSetRecord {
                status: ChangeSetStatus::Failed,
                execution_status: ExecutionStatus::Unavailable,
                status_reason: Some(NO_CHANGES.into()),
                ..record
            }
        } else {
            let previous = prepared.stack.template_body.clone();
            self.judged(record, Some(&previous), HookAction::Update)
                .await?
        };
        if input.include_nested_stacks && !empty {
            self.nested_change_sets(&mut record, &prepared.nested_properties)
                .await?;
        }
        self.store.put_change_set(&record).await?;
        Ok(record)
    }

    /// IncludeNestedStacks: a change set for each nested stack `parent`
    /// modifies (and theirs, down the tree), each change naming its set
    /// (`ChangeSetId`). A parameter value known only once the update runs
    /// shows as CloudFormation's `{{changeSet:KNOWN_AFTER_APPLY}}`.
    async fn nested_change_sets(
        &self,
        parent: &mut ChangeSetRecord,
        nested_properties: &BTreeMap<String, serde_json::Map<String, Value>>,
    ) -> Result<(), EngineError> {
        let Some(changes) = parent.changes.as_array_mut() else {
            return Ok(());
        };
        for change in changes.iter_mut() {
            let rc = &mut change["ResourceChange"];
            let logical = rc["LogicalResourceId"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let (Some(props), Some(child_id)) = (
                nested_properties.get(&logical),
                rc["PhysicalResourceId"].as_str().map(str::to_string),
            ) else {
                continue;
            };
            let parameters = props
                .get("Parameters")
                .and_then(Value::as_object)
                .map(|p| {
                    p.iter()
                        .map(|(k, v)| {
                            let known = match v {
                                Value::String(s) => Some(s.clone()),
                                Value::Number(n) => Some(n.to_string()),
                                Value::Bool(b) => Some(b.to_string()),
                                Value::Array(items) if items.iter().all(Value::is_string) => Some(
                                    items
                                        .iter()
                                        .filter_map(Value::as_str)
                                        .collect::<Vec<_>>()
                                        .join(","),
                                ),
                                _ => None,
                            };
                            let value = known.unwrap_or_else(|| KNOWN_AFTER_APPLY.to_string());
                            (k.clone(), ParameterInput::Value(value))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let templates = parent.nested.templates.below(&logical);
            let input = UpdateStackInput {
                stack_policy: None,
                rollback_configuration: None,
                notification_arns: None,
                stack_policy_during_update: None,
                stack_name: child_id.clone(),
                template_body: parent
                    .nested
                    .templates
                    .child(&logical)
                    .map(|t| t.body.clone()),
                parameters,
                tags: None,
                origin: Default::default(),
                context: None,
                disable_rollback: false,
                capabilities: None,
                upgrade_types: super::update::UpgradeTypes::To(parent.nested.upgrade_types.clone()),
            };
            let prepared = Box::pin(
                self.updates()
                    .prepare_update_nested(&input, Some(templates)),
            )
            .await?;
            let base_version = self.store.event_count(&prepared.stack.stack_id).await? as i64;
            let child_input = CreateChangeSetInput {
                resources_to_import: Vec::new(),
                stack_name: prepared.stack.stack_name.clone(),
                change_set_name: nested_set_name(&parent.change_set_name, &logical),
                change_set_type: Some(ChangeSetType::Update),
                template_body: None,
                parameters: BTreeMap::new(),
                description: parent.description.clone(),
                tags: None,
                origin: Default::default(),
                include_nested_stacks: true,
                context: Default::default(),
                capabilities: None,
                rollback_configuration: None,
                notification_arns: None,
                upgrade_types: false,
            };
            let mut child = self.change_set_record(
                &child_input,
                ChangeSetType::Update,
                &prepared.stack,
                &prepared.target.template_body,
                &prepared.target.parameters,
                &prepared.target.no_echo,
                &prepared.changes,
                base_version,
            );
            child.nested = crate::stack::ChangeSetNesting {
                templates: prepared.nested.clone(),
                include_nested_stacks: true,
                parent_change_set_id: Some(parent.change_set_id.clone()),
                root_change_set_id: Some(
                    parent
                        .nested
                        .root_change_set_id
                        .clone()
                        .unwrap_or_else(|| parent.change_set_id.clone()),
                ),
                context: prepared.target.context.clone(),
                rollback_configuration: None,
                notification_arns: None,
                upgrade_types: parent.nested.upgrade_types.clone(),
                hook_results: Vec::new(),
            };
            Box::pin(self.nested_change_sets(&mut child, &prepared.nested_properties)).await?;
            self.store.put_change_set(&child).await?;
            rc["ChangeSetId"] = Value::String(child.change_set_id.clone());
        }
        Ok(())
    }

    async fn create_set_for_new_stack(
        &self,
        input: &CreateChangeSetInput,
        existing: Option<StackRecord>,
    ) -> Result<ChangeSetRecord, EngineError> {
        if let Some(s) = existing
            .as_ref()
            .filter(|s| s.status != StackStatus::ReviewInProgress)
        {
            return Err(EngineError::Validation(format!(
                "Stack [{}] already exists and cannot be created again with the changeSet [{}].",
                s.stack_name, input.change_set_name
            )));
        }
        check_stack_name(&input.stack_name, input.template_body.as_deref())?;
        let Some(body) = input.template_body.clone() else {
            return Err(EngineError::Validation(format!(
                "Stack [{}] does not exist; a change set that creates it needs a template (cairn plan {} TEMPLATE)",
                input.stack_name, input.stack_name
            )));
        };
        let supplied = supplied_values(&input.parameters, &BTreeMap::new())?;
        let context = input.context.clone().for_template(&body, &supplied);
        let context = self
            .run_transforms(
                &body,
                context,
                &supplied,
                reviewed(&input.capabilities).as_deref(),
            )
            .await?;
        let template = Template::parse_with(&body, &context)?;
        self.check_macro_names(&template, &input.stack_name).await?;
        let params = ParameterValues::resolve(&template.parameters, &supplied)?;
        let stack_id = match &existing {
            Some(s) => s.stack_id.clone(),
            None => self.new_stack_id(&input.stack_name),
        };
        let sctx = stack_context(&self.config, &input.stack_name, &stack_id);
        let reads = super::resolve::reads_stack_outputs(&body, &context);
        let changes = self.plan_create(&template, &params, &sctx, reads).await?;
        let nested = self
            .read_nested(&template, &context, &input.origin, (&params, &sctx))
            .await?;
        self.check_capabilities(
            &template,
            &body,
            &nested,
            reviewed(&input.capabilities).as_deref(),
        )?;
        let stack = match existing {
            Some(s) => s,
            None => {
                self.insert_review_stack(&input.stack_name, &stack_id)
                    .await?
            }
        };
        let base_version = self.store.event_count(&stack.stack_id).await? as i64;
        let record = self.change_set_record(
            input,
            ChangeSetType::Create,
            &stack,
            &body,
            &params.raw,
            &params.no_echo,
            &changes,
            base_version,
        );
        let record = ChangeSetRecord {
            nested: crate::stack::ChangeSetNesting {
                templates: nested,
                include_nested_stacks: input.include_nested_stacks,
                context,
                ..record.nested
            },
            ..record
        };
        let record = self.judged(record, None, HookAction::Create).await?;
        self.store.put_change_set(&record).await?;
        Ok(record)
    }

    /// Validates a new stack's template as `start_create` does and plans it
    /// (every resource an Add).
    async fn plan_create(
        &self,
        template: &Template,
        params: &ParameterValues,
        sctx: &StackContext,
        reads_stack_outputs: bool,
    ) -> Result<Vec<plan::ResourceChange>, EngineError> {
        let exports = self.exports_map(reads_stack_outputs).await?;
        let (conditions, graph) = self.prepare(template, params, sctx, exports.clone())?;
        let results = super::resolve::Results::new(exports);
        let ev = Evaluator::with_conditions(template, params, sctx, &results, conditions);
        Ok(plan::plan(
            template,
            &ev,
            &graph,
            &self.registry,
            &[],
            &plan::Previous { template, params },
            params,
            &Default::default(),
            plan::TypeVersions::kept(),
        )?)
    }

    /// `record` with the CHANGE_SET-target hooks' verdicts (`previous`:
    /// the stack's template before it); FAILED with their refusal when a
    /// hook whose failure mode is FAIL did not succeed.
    async fn judged(
        &self,
        record: ChangeSetRecord,
        previous: Option<&str>,
        action: HookAction,
    ) -> Result<ChangeSetRecord, EngineError> {
        let template = Template::body_of(&record.template_body)?;
        let previous = previous.map(Template::body_of).transpose()?;
        let parameters = super::hooks::shown_parameters(&record.parameters, &record.no_echo);
        let target = StackTarget {
            operation: TargetOperation::ChangeSet,
            stack_name: &record.stack_name,
            stack_id: &record.stack_id,
            change_set_id: Some(&record.change_set_id),
            action,
            template: &template,
            parameters: &parameters,
            previous: previous.as_ref(),
            changes: Some(&record.changes),
        };
        let secrets = super::hooks::secret_values(&record.parameters, &record.no_echo);
        let (results, refusal) = self.hooks().judge_change_set(&target, &secrets).await?;
        let mut record = record;
        record.nested.hook_results = results;
        if let Some(refusal) = refusal {
            record.status = ChangeSetStatus::Failed;
            record.execution_status = ExecutionStatus::Unavailable;
            record.status_reason = Some(refusal);
        }
        Ok(record)
    }

    #[allow(clippy::too_many_arguments)]
    fn change_set_record(
        &self,
        input: &CreateChangeSetInput,
        kind: ChangeSetType,
        stack: &StackRecord,
        template_body: &str,
        parameters: &BTreeMap<String, String>,
        no_echo: &[String],
        changes: &[plan::ResourceChange],
        base_version: i64,
    ) -> ChangeSetRecord {
        let change_set_id = format!(
            "arn:aws:cloudformation:{}:{}:changeSet/{}/{}",
            self.config.identity.region,
            self.config.identity.account_id,
            input.change_set_name,
            uuid::Uuid::new_v4()
        );
        let mut marked = changes_json(changes);
        if kind == ChangeSetType::Update {
            super::stack_policy::mark_denied(&mut marked, stack.stack_policy.as_deref());
        }
        ChangeSetRecord {
            change_set_id,
            change_set_name: input.change_set_name.clone(),
            stack_id: stack.stack_id.clone(),
            stack_name: stack.stack_name.clone(),
            change_set_type: kind,
            status: ChangeSetStatus::CreateComplete,
            execution_status: ExecutionStatus::Available,
            status_reason: None,
            description: input.description.clone(),
            template_body: template_body.to_string(),
            parameters: parameters.clone(),
            no_echo: no_echo.to_vec(),
            changes: marked,
            created_at: now(),
            base_version,
            tags: input.tags.clone(),
            nested: crate::stack::ChangeSetNesting {
                rollback_configuration: input.rollback_configuration.clone(),
                notification_arns: input.notification_arns.clone(),
                ..Default::default()
            },
        }
    }

    /// A change set of a stack, with its execution status brought up to date
    /// (an AVAILABLE set of a stack that changed since is OBSOLETE).
    pub async fn describe_change_set(
        &self,
        stack_name: &str,
        change_set: &str,
    ) -> Result<ChangeSetRecord, EngineError> {
        let stack_id = match self.store.find_stack(stack_name).await? {
            Some(s) => s.stack_id,
            None => String::new(),
        };
        let Some(cs) = self.store.find_change_set(&stack_id, change_set).await? else {
            return Err(EngineError::ChangeSetNotFound(format!(
                "ChangeSet [{change_set}] does not exist"
            )));
        };
        self.refresh(cs).await
    }

    /// The stack's change sets, oldest first, statuses brought up to date.
    pub async fn list_change_sets(
        &self,
        stack_name: &str,
    ) -> Result<Vec<ChangeSetRecord>, EngineError> {
        let Some(stack) = self.store.find_stack(stack_name).await? else {
            return Err(EngineError::Validation(format!(
                "Stack [{stack_name}] does not exist"
            )));
        };
        let mut out = Vec::new();
        for cs in self.store.change_sets(&stack.stack_id).await? {
            out.push(self.refresh(cs).await?);
        }
        Ok(out)
    }

    pub async fn delete_change_set(
        &self,
        stack_name: &str,
        change_set: &str,
    ) -> Result<(), EngineError> {
        let cs = self.describe_change_set(stack_name, change_set).await?;
        if cs.execution_status == ExecutionStatus::ExecuteInProgress {
            return Err(EngineError::InvalidChangeSetStatus(format!(
                "ChangeSet [{}] cannot be deleted while it is being executed",
                cs.change_set_name
            )));
        }
        self.store.delete_change_set(&cs.change_set_id).await?;
        Ok(())
    }

    async fn refresh(&self, cs: ChangeSetRecord) -> Result<ChangeSetRecord, EngineError> {
        if cs.execution_status != ExecutionStatus::Available {
            return Ok(cs);
        }
        let version = self.store.event_count(&cs.stack_id).await? as i64;
        if version == cs.base_version {
            return Ok(cs);
        }
        let reason = "The stack changed after this change set was created";
        self.store
            .obsolete_change_set(&cs.change_set_id, reason)
            .await?;
        Ok(ChangeSetRecord {
            execution_status: ExecutionStatus::Obsolete,
            status_reason: Some(reason.into()),
            ..cs
        })
    }

    /// Runs a change set: the update (or create) it planned, re-planned and
    /// refused if the plan no longer holds. Returns the stack id; then call
    /// [`Engine::run`]. `on_failure` applies to a CREATE set.
    pub async fn execute_change_set(
        &self,
        stack_name: &str,
        change_set: &str,
        on_failure: OnFailure,
    ) -> Result<String, EngineError> {
        let cs = self.describe_change_set(stack_name, change_set).await?;
        if let Some(root) = &cs.nested.root_change_set_id {
            return Err(EngineError::Validation(format!(
                "ChangeSet [{}] is a nested change set; execute its root change set [{root}], which runs it",
                cs.change_set_id
            )));
        }
        if cs.execution_status != ExecutionStatus::Available {
            return Err(EngineError::InvalidChangeSetStatus(format!(
                "ChangeSet [{}] cannot be executed in its current execution status of [{}]",
                cs.change_set_id, cs.execution_status
            )));
        }
        let parameters = cs
            .parameters
            .iter()
            .map(|(k, v)| (k.clone(), ParameterInput::Value(v.clone())))
            .collect();
        if cs.change_set_type == ChangeSetType::Create {
            return self.execute_create(&cs, on_failure).await;
        }
        if cs.change_set_type == ChangeSetType::Import {
            return self.execute_import(&cs).await;
        }
        // The nested templates as read when the set was made: what it
        // planned is what runs.
        let prepared = self
            .updates()
            .prepare_update_nested(
                &UpdateStackInput {
                    stack_policy: None,
                    rollback_configuration: cs.nested.rollback_configuration.clone(),
                    notification_arns: None,
                    stack_policy_during_update: None,
                    stack_name: cs.stack_id.clone(),
                    template_body: Some(cs.template_body.clone()),
                    parameters,
                    tags: cs.tags.clone(),
                    origin: Default::default(),
                    context: Some(cs.nested.context.clone()),
                    disable_rollback: on_failure == OnFailure::DoNothing,
                    capabilities: None,
                    // The moves it showed, to the versions it showed.
                    upgrade_types: super::update::UpgradeTypes::To(cs.nested.upgrade_types.clone()),
                },
                Some(cs.nested.templates.clone()),
            )
            .await?;
        self.check_plan_holds(&cs, &prepared.changes).await?;
        self.notify_to(&cs.stack_id, cs.nested.notification_arns.as_deref())
            .await?;
        self.updates().begin_update(prepared, Some(&cs)).await
    }

    /// The plan made now must be the one stored: what a provider's schema
    /// says may have changed (a plugin upgraded) even when the stack did not.
    async fn check_plan_holds(
        &self,
        cs: &ChangeSetRecord,
        changes: &[plan::ResourceChange],
    ) -> Result<(), EngineError> {
        // Nested change sets' ids are added to the stored changes.
        let mut stored = cs.changes.clone();
        for c in stored.as_array_mut().into_iter().flatten() {
            if let Some(rc) = c["ResourceChange"].as_object_mut() {
                rc.remove("ChangeSetId");
            }
        }
        super::stack_policy::unmarked(&mut stored);
        if changes_json(changes) == stored {
            return Ok(());
        }
        let reason =
            "The plan no longer holds (a resource type's schema changed); create a new change set";
        self.store
            .obsolete_change_set(&cs.change_set_id, reason)
            .await?;
        Err(EngineError::InvalidChangeSetStatus(format!(
            "ChangeSet [{}] cannot be executed: {reason}",
            cs.change_set_id
        )))
    }

    /// Creates the stack a CREATE set planned: REVIEW_IN_PROGRESS →
    /// CREATE_IN_PROGRESS, then [`Engine::run`] as for `start_create`.
    async fn execute_create(
        &self,
        cs: &ChangeSetRecord,
        on_failure: OnFailure,
    ) -> Result<String, EngineError> {
        let Some(stack) = self.store.find_stack(&cs.stack_id).await? else {
            return Err(StoreError::NoSuchStack(cs.stack_id.clone()).into());
        };
        let template = Template::parse_with(&cs.template_body, &cs.nested.context)?;
        let params = ParameterValues::resolve(&template.parameters, &cs.parameters)?;
        let sctx = stack_context(&self.config, &stack.stack_name, &stack.stack_id);
        let reads = super::resolve::reads_stack_outputs(&cs.template_body, &cs.nested.context);
        let changes = self.plan_create(&template, &params, &sctx, reads).await?;
        self.check_plan_holds(cs, &changes).await?;
        let lease = self.lease_in_review(&stack, cs).await?;
        let ts = now();
        let created = StackRecord {
            description: template.description.clone(),
            template_body: cs.template_body.clone(),
            parameters: params.raw.clone(),
            no_echo: params.no_echo.clone(),
            on_failure,
            updated_at: ts.clone(),
            tags: cs.tags.clone().unwrap_or_default(),
            context: cs.nested.context.clone(),
            rollback_configuration: cs
                .nested
                .rollback_configuration
                .as_ref()
                .map(|c| c.applied_to(None))
                .filter(|c| !c.is_empty()),
            ..stack
        };
        let operation = OperationRecord {
            stack_id: created.stack_id.clone(),
            kind: OperationKind::Create,
            options: OperationOptions {
                nested_templates: cs.nested.templates.clone(),
                ..Default::default()
            }
            .to_value(),
            started_at: ts.clone(),
        };
        let stack_id = created.stack_id.clone();
        self.notify_to(&stack_id, cs.nested.notification_arns.as_deref())
            .await?;
        self.begin_operation(
            &lease,
            operation,
            created,
            StackStatus::CreateInProgress,
            Some(cs),
            (None, Default::default()),
        )
        .await?;
        Ok(stack_id)
    }

    /// The lease of a stack in review whose set is executed: refused when
    /// anything happened to the stack since the set was made.
    async fn lease_in_review(
        &self,
        stack: &StackRecord,
        cs: &ChangeSetRecord,
    ) -> Result<crate::store::Lease, EngineError> {
        let lease = self.lease_for_operation(&stack.stack_id).await?;
        let version = self.store.event_count(&stack.stack_id).await? as i64;
        let current = self.store.find_stack(&stack.stack_id).await?;
        if version != cs.base_version
            || current.map(|s| s.status) != Some(StackStatus::ReviewInProgress)
        {
            let _ = self.store.release_lease(&lease).await;
            return Err(EngineError::Validation(format!(
                "Stack:{} changed while the change set was being executed; try again",
                stack.stack_id
            )));
        }
        self.started_under(&lease);
        Ok(lease)
    }
}

/// A parameter value a nested change set cannot know before the update.
const KNOWN_AFTER_APPLY: &str = "{{changeSet:KNOWN_AFTER_APPLY}}";

/// A nested change set's name: its parent's and the nested stack's logical
/// id, cut to CloudFormation's 128 characters.
fn nested_set_name(parent: &str, logical: &str) -> String {
    let mut name = format!("{parent}-{logical}");
    name.truncate(128);
    name
}

/// `Changes` as CloudFormation lists them: `{Type: Resource, ResourceChange}`.
pub fn changes_json(changes: &[plan::ResourceChange]) -> Value {
    Value::Array(
        changes
            .iter()
            .map(|c| json!({"Type": "Resource", "ResourceChange": c}))
            .collect(),
    )
}
