//! Resource import (`cairn import`, an IMPORT change set): resources made
//! elsewhere join a stack without being created. The rules are
//! `crate::import`'s (the template describes the stack plus the imports,
//! each with a DeletionPolicy, nothing else changes); here the world is
//! asked: each resource exists (its provider's `read`) and belongs to no
//! stack. Then IMPORT_IN_PROGRESS: each resource is read again and recorded
//! (IMPORT_IN_PROGRESS, IMPORT_COMPLETE) with the properties the template
//! gives it and the attributes the read returned, and the stack takes the
//! template (IMPORT_COMPLETE). A resource that cannot be read fails the
//! import (IMPORT_FAILED): IMPORT_ROLLBACK_IN_PROGRESS releases what was
//! adopted without a provider call (the resources stay as they are) and
//! puts the template back (IMPORT_ROLLBACK_COMPLETE). Drift afterwards
//! compares the template's properties with the live resource.

use std::collections::BTreeMap;

use cairn_sdk::ReadResult;
use serde_json::{json, Value};

use super::kinds::Imports;
use super::update::{ParameterInput, PreparedUpdate, UpdateStackInput};
use super::EngineError;
use crate::import::{Adoption, ResourceToImport};
use crate::operation::OperationOptions;
use crate::stack::{
    now, Journal, OperationKind, ResourceRecord, ResourceStatus, StackRecord, StackStatus,
};
use crate::store::StoreError;
use crate::template::parameters::ParameterValues;
use crate::template::Template;

/// What `cairn import` (or an IMPORT change set) asks for.
#[derive(Debug, Clone)]
pub struct ImportInput {
    pub stack_name: String,
    /// The stack's template with the imported resources added.
    pub template_body: String,
    pub parameters: BTreeMap<String, ParameterInput>,
    pub resources: Vec<ResourceToImport>,
    /// The capabilities acknowledged (`None`: not checked).
    pub capabilities: Option<Vec<String>>,
    pub origin: crate::nested::Origin,
}

impl Imports<'_> {
    /// Checks an import into a stack, existing or new, and starts it
    /// (IMPORT_IN_PROGRESS); then follow it with [`super::Engine::run`].
    pub async fn start_import(&self, input: &ImportInput) -> Result<String, EngineError> {
        match self.store.find_stack(&input.stack_name).await? {
            None => return self.start_new_import(input).await,
            Some(s) if s.status == StackStatus::ReviewInProgress => {
                return Err(EngineError::Validation(format!(
                    "Stack [{}] is in REVIEW_IN_PROGRESS: execute or delete its change set first",
                    input.stack_name
                )))
            }
            Some(_) => {}
        }
        let (mut prepared, adoptions) = self.prepare_import(input).await?;
        let details = json!(adoptions);
        prepared.options.imports = Some(adoptions);
        self.updates()
            .begin_moving(
                prepared,
                None,
                (OperationKind::Import, StackStatus::ImportInProgress),
                Some(details),
            )
            .await
    }

    /// Everything an import decides before it changes anything: the
    /// template as an update would plan it, CloudFormation's rules, and
    /// each resource read and found in no stack.
    pub(super) async fn prepare_import(
        &self,
        input: &ImportInput,
    ) -> Result<(PreparedUpdate, Vec<Adoption>), EngineError> {
        self.nested_stacks()
            .refuse_nested_named(&input.stack_name, "import into")
            .await?;
        let prepared = self
            .updates()
            .prepare_update(&UpdateStackInput {
                stack_name: input.stack_name.clone(),
                template_body: Some(input.template_body.clone()),
                parameters: input.parameters.clone(),
                tags: None,
                origin: input.origin.clone(),
                context: None,
                disable_rollback: false,
                capabilities: input.capabilities.clone(),
                stack_policy: None,
                rollback_configuration: None,
                notification_arns: None,
                stack_policy_during_update: None,
                upgrade_types: Default::default(),
            })
            .await?;
        let template =
            Template::parse_with(&prepared.target.template_body, &prepared.target.context)?;
        let current = Template::parse_with(&prepared.stack.template_body, &prepared.stack.context)?;
        let adoptions = crate::import::check(
            &template,
            &input.resources,
            &prepared.changes,
            Some(&current.outputs),
            &*self.registry,
        )?;
        self.refuse_owned(&adoptions).await?;
        self.read_each(&prepared.stack, &adoptions).await?;
        Ok((prepared, adoptions))
    }

    /// A new stack made of imported resources only: checked as an import
    /// into an existing stack is (every resource of the template is
    /// imported: any other would be created), then recorded with its
    /// operation in one write, IMPORT_IN_PROGRESS.
    async fn start_new_import(&self, input: &ImportInput) -> Result<String, EngineError> {
        let stack_id = self.new_stack_id(&input.stack_name);
        let (stack, adoptions) = self.check_new_import(input, &stack_id).await?;
        let operation = self.import_operation(&stack, &adoptions);
        let first = super::stack_event(
            &stack,
            StackStatus::ImportInProgress,
            Some("User Initiated"),
            &stack.created_at,
        );
        self.insert_operating(&stack, &first, &operation).await?;
        Ok(stack_id)
    }

    /// The operation of a new stack's import. A rolled-back import leaves
    /// the stack with its template and no resources: both sides of the
    /// journal are the new stack.
    pub(super) fn import_operation(
        &self,
        stack: &StackRecord,
        adoptions: &[Adoption],
    ) -> crate::store::OperationRecord {
        let state = super::update::StackState::of(stack);
        let options = OperationOptions {
            previous: Some(state.clone()),
            target: Some(state),
            imports: Some(adoptions.to_vec()),
            ..Default::default()
        };
        crate::store::OperationRecord {
            stack_id: stack.stack_id.clone(),
            kind: OperationKind::Import,
            options: options.to_value(),
            started_at: now(),
        }
    }

    /// The checks of a new stack's import: the stack (`stack_id`) as it
    /// would be in IMPORT_IN_PROGRESS, and what it adopts.
    pub(super) async fn check_new_import(
        &self,
        input: &ImportInput,
        stack_id: &str,
    ) -> Result<(StackRecord, Vec<Adoption>), EngineError> {
        super::check_stack_name(&input.stack_name, Some(&input.template_body))?;
        let template = Template::parse(&input.template_body)?;
        let supplied = super::update::supplied_values(&input.parameters, &BTreeMap::new())?;
        let params = ParameterValues::resolve(&template.parameters, &supplied)?;
        let sctx = super::stack_context(&self.config, &input.stack_name, stack_id);
        let reads = super::resolve::reads_stack_outputs(&input.template_body, &Default::default());
        let (_, graph) = self.prepare(&template, &params, &sctx, self.exports_map(reads).await?)?;
        self.check_capabilities(
            &template,
            &input.template_body,
            &Default::default(),
            input.capabilities.as_deref(),
        )?;
        let changes: Vec<crate::plan::ResourceChange> = template
            .resources
            .iter()
            .filter(|r| graph.index_of(&r.logical_id).is_some())
            .map(|r| crate::plan::ResourceChange {
                action: "Add".into(),
                logical_resource_id: r.logical_id.clone(),
                physical_resource_id: None,
                resource_type: r.type_name.clone(),
                replacement: None,
                scope: Vec::new(),
                details: Vec::new(),
            })
            .collect();
        let adoptions =
            crate::import::check(&template, &input.resources, &changes, None, &*self.registry)?;
        // A new stack's record, as a review stack's but importing its
        // template (on_failure is ROLLBACK either way).
        let stack = StackRecord {
            status: StackStatus::ImportInProgress,
            description: template.description.clone(),
            template_body: input.template_body.clone(),
            parameters: params.raw.clone(),
            no_echo: params.no_echo.clone(),
            capabilities: input.capabilities.clone().unwrap_or_default(),
            ..super::review::review_stack(&input.stack_name, stack_id)
        };
        self.refuse_owned(&adoptions).await?;
        self.read_each(&stack, &adoptions).await?;
        Ok((stack, adoptions))
    }

    /// Each resource read by its provider: refused, naming it, when it
    /// cannot be.
    async fn read_each(
        &self,
        stack: &StackRecord,
        adoptions: &[Adoption],
    ) -> Result<(), EngineError> {
        for a in adoptions {
            let found =
                read_attributes(self, stack, &a.logical_id, &a.resource_type, &a.physical_id).await;
            if let Err(why) = found {
                return Err(EngineError::Validation(format!(
                    "Resource {} cannot be imported: {why}",
                    a.logical_id
                )));
            }
        }
        Ok(())
    }

    /// A resource belongs to one stack: one a stack already has (this one
    /// included) is refused, naming it.
    async fn refuse_owned(&self, adoptions: &[Adoption]) -> Result<(), EngineError> {
        for s in self.store.list_stacks().await? {
            if s.status == StackStatus::DeleteComplete {
                continue;
            }
            for r in self.store.resources(&s.stack_id).await? {
                let owner = adoptions.iter().find(|a| {
                    crate::plan::is_live(&r)
                        && r.physical_id.as_deref() == Some(a.physical_id.as_str())
                        && self.registry.canonical(&r.resource_type)
                            == self.registry.canonical(&a.resource_type)
                });
                if let Some(a) = owner {
                    return Err(EngineError::Validation(format!(
                        "Resource {} cannot be imported: {} {} already belongs to stack {} (as {})",
                        a.logical_id, a.resource_type, a.physical_id, s.stack_name, r.logical_id
                    )));
                }
            }
        }
        Ok(())
    }

    /// IMPORT_IN_PROGRESS: each resource read and recorded, then
    /// IMPORT_COMPLETE; a resource that cannot be read rolls it back.
    pub(super) async fn drive_import(&self, op: &super::Op) -> Result<StackStatus, EngineError> {
        let adoptions = self.adoptions(op).await?;
        // Their ids are known: properties that name another imported
        // resource resolve whatever the order.
        for a in &adoptions {
            op.results
                .record(&a.logical_id, &a.physical_id, &Default::default());
        }
        let rows = self.store.resources(&op.stack.stack_id).await?;
        op.results.record_live(&rows);
        let mut failed = Vec::new();
        for a in &adoptions {
            let done = rows.iter().any(|r| {
                r.logical_id == a.logical_id && r.status == ResourceStatus::ImportComplete
            });
            if done {
                continue;
            }
            if !self.adopt(op, a).await? {
                failed.push(a.logical_id.clone());
            }
        }
        let reason = if failed.is_empty() {
            // The outputs (a new stack's; an existing stack's are
            // unchanged, the rules say) once every resource is known.
            match self.creates().finish_create(op).await {
                Ok(()) => {
                    self.store.clear_journals(&op.lease).await?;
                    return self.set_status(op, StackStatus::ImportComplete, None).await;
                }
                Err(reason) => reason,
            }
        } else {
            format!(
                "The following resource(s) failed to import: [{}]. ",
                failed.join(", ")
            )
        };
        self.set_status(op, StackStatus::ImportRollbackInProgress, Some(&reason))
            .await?;
        self.rollback_import(op).await
    }

    /// Reads one resource and records it: false when it failed.
    async fn adopt(&self, op: &super::Op, a: &Adoption) -> Result<bool, EngineError> {
        let lost = || EngineError::from(StoreError::LeaseLost(op.stack.stack_id.clone()));
        let mut rec = ResourceRecord {
            stack_id: op.stack.stack_id.clone(),
            logical_id: a.logical_id.clone(),
            resource_type: a.resource_type.clone(),
            physical_id: Some(a.physical_id.clone()),
            status: ResourceStatus::ImportInProgress,
            status_reason: None,
            properties: Default::default(),
            attributes: Default::default(),
            pending: None,
            updated_at: now(),
            metadata: None,
            journal: Some(Journal::Added),
            no_echo: false,
            type_version: self.registry.default_version(&a.resource_type),
        };
        let properties = self.protocol().properties_for(op, &a.logical_id);
        let metadata = self.protocol().metadata_for(op, &a.logical_id);
        let outcome = match (properties, metadata) {
            (Ok((_, p)), Ok(m)) => {
                rec.properties = p;
                rec.metadata = m;
                if !self.record(op, &rec, Vec::new()).await {
                    return Err(lost());
                }
                read_attributes(
                    self,
                    &op.stack,
                    &a.logical_id,
                    &a.resource_type,
                    &a.physical_id,
                )
                .await
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        rec.updated_at = now();
        let ok = match outcome {
            Ok(attributes) => {
                op.results
                    .record(&a.logical_id, &a.physical_id, &attributes);
                rec.attributes = attributes;
                rec.status = ResourceStatus::ImportComplete;
                true
            }
            Err(reason) => {
                rec.status = ResourceStatus::ImportFailed;
                rec.status_reason = Some(reason);
                false
            }
        };
        if !self.record(op, &rec, Vec::new()).await {
            return Err(lost());
        }
        Ok(ok)
    }

    /// IMPORT_ROLLBACK_IN_PROGRESS: the adopted rows go without a provider
    /// call (the resources stay as they are, as a DeletionPolicy of Retain
    /// would leave them), the template goes back; IMPORT_ROLLBACK_COMPLETE.
    pub(super) async fn rollback_import(&self, op: &super::Op) -> Result<StackStatus, EngineError> {
        let adoptions = self.adoptions(op).await?;
        for r in self.store.resources(&op.stack.stack_id).await? {
            if r.journal != Some(Journal::Added)
                || !adoptions.iter().any(|a| a.logical_id == r.logical_id)
            {
                continue;
            }
            let mut released = r.clone();
            released.updated_at = now();
            released.status = ResourceStatus::ImportRollbackInProgress;
            released.status_reason = None;
            let first = op.resource_event(&released);
            released.status = ResourceStatus::ImportRollbackComplete;
            let second = op.resource_event(&released);
            self.store
                .remove_resource(&op.lease, &r.logical_id, &[first, second])
                .await?;
        }
        // The template the import started from (the operation keeps both
        // sides; this op may have been loaded going forward).
        let (previous, _) = self
            .options(op)
            .await?
            .journal()
            .map_err(|e| EngineError::Validation(e.to_string()))?;
        let mut restored: StackRecord = op.stack.clone();
        previous.apply(&mut restored);
        restored.updated_at = now();
        self.store.save_stack(&op.lease, &restored).await?;
        self.store.clear_journals(&op.lease).await?;
        self.set_status(op, StackStatus::ImportRollbackComplete, None)
            .await
    }

    /// What the running import adopts, from its operation's options.
    async fn adoptions(&self, op: &super::Op) -> Result<Vec<Adoption>, EngineError> {
        self.options(op).await?.imports.ok_or_else(|| {
            EngineError::Validation(
                "the import's record in the state cannot be read: its operation names no resources to import".into(),
            )
        })
    }
}

impl Imports<'_> {
    /// The running import's operation options.
    async fn options(&self, op: &super::Op) -> Result<OperationOptions, EngineError> {
        Ok(self
            .store
            .operation(&op.stack.stack_id)
            .await?
            .map(|o| OperationOptions::from_value(&o.options))
            .unwrap_or_default())
    }
}

/// The attributes of the live resource `physical_id`, read by its
/// provider through the protocol; why it cannot be imported otherwise (it
/// does not exist, the provider cannot read its type, the call failed).
async fn read_attributes(
    imports: &Imports<'_>,
    stack: &StackRecord,
    logical_id: &str,
    type_name: &str,
    physical_id: &str,
) -> Result<serde_json::Map<String, Value>, String> {
    let context = imports.protocol().request_context(
        &stack.stack_id,
        &stack.stack_name,
        logical_id,
        type_name,
        &uuid::Uuid::new_v4().to_string(),
    );
    match imports
        .protocol()
        .read(context, type_name, physical_id)
        .await
    {
        Ok(ReadResult::Found { attributes, .. }) => Ok(attributes),
        Ok(ReadResult::NotSupported) => Err(format!(
            "the provider of {type_name} cannot read it, so it cannot be imported"
        )),
        Err(e) if e.is_not_found() => Err(format!(
            "{type_name} {physical_id} does not exist ({})",
            e.message
        )),
        Err(e) => Err(format!(
            "reading {type_name} {physical_id} failed: {}",
            e.message
        )),
    }
}
