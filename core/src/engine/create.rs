//! Creating a stack: the synchronous start (parse, evaluate, validate,
//! record the stack, take its lease), each resource's create over the
//! resource-call protocol (adopted when it names an existing one, waiting
//! for its signals when it has a CreationPolicy), the outputs, and the
//! rollback of a failed create.

use super::dag::Outcome;
use super::steps::create::{Then, CREATED};
use super::{
    check_stack_name, stack_context, stack_event, CreateStackInput, Creates, EngineError, Op,
    TIMED_OUT,
};
use crate::operation::OperationOptions;
use crate::stack::{
    now, CallKind, Journal, OnFailure, OperationKind, OutputRecord, ResourceRecord, ResourceStatus,
    StackRecord, StackStatus,
};
use crate::store::{OperationRecord, StoreError};
use crate::template::eval::{Evaluated, Evaluator};
use crate::template::parameters::ParameterValues;
use crate::template::source::child;
use crate::template::Template;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Creates<'_> {
    /// The synchronous part of a create: validates everything, records the stack
    /// in CREATE_IN_PROGRESS and takes its lease. Returns the stack id; then call
    /// [`Engine::run`].
    pub async fn start_create(&self, input: &CreateStackInput) -> Result<String, EngineError> {
        self.create_stack(input, None).await
    }

    /// [`Creates::start_create`], for a root stack (`child: None`: its nested
    /// templates are read now) or a nested one (its parent, and the nested
    /// templates its own children use).
    pub(super) async fn create_stack(
        &self,
        input: &CreateStackInput,
        child: Option<(&StackRecord, crate::nested::NestedTemplates)>,
    ) -> Result<String, EngineError> {
        check_stack_name(&input.stack_name, Some(&input.template_body))?;
        if let Some(p) = &input.stack_policy {
            super::stack_policy::parse(p, "StackPolicyBody")?;
        }
        if let Some(c) = &input.rollback_configuration {
            c.check()?;
        }
        crate::notifications::check_targets(&input.notification_arns)?;
        if self.store.find_stack(&input.stack_name).await?.is_some() {
            return Err(StoreError::StackExists(input.stack_name.clone()).into());
        }
        let context = input
            .context
            .clone()
            .for_template(&input.template_body, &input.parameters);
        // The macros run now, a nested stack's with its own parameter
        // values (its parent acknowledged CAPABILITY_AUTO_EXPAND for it).
        let context = self
            .run_transforms(
                &input.template_body,
                context,
                &input.parameters,
                input.capabilities.as_deref(),
            )
            .await?;
        let template = Arc::new(Template::parse_with(&input.template_body, &context)?);
        self.check_macro_names(&template, &input.stack_name).await?;
        let params = ParameterValues::resolve(&template.parameters, &input.parameters)?;
        let stack_id = self.new_stack_id(&input.stack_name);
        let sctx = stack_context(&self.config, &input.stack_name, &stack_id);
        let reads = super::resolve::reads_stack_outputs(&input.template_body, &context);
        self.prepare(&template, &params, &sctx, self.exports_map(reads).await?)?;
        let (parent, nested) = match child {
            Some((parent, nested)) => (Some(parent), nested),
            None => (
                None,
                self.read_nested(&template, &context, &input.origin, (&params, &sctx))
                    .await?,
            ),
        };
        self.check_capabilities(
            &template,
            &input.template_body,
            &nested,
            input.capabilities.as_deref(),
        )?;

        let ts = now();
        let stack = StackRecord {
            stack_id: stack_id.clone(),
            stack_name: input.stack_name.clone(),
            status: StackStatus::CreateInProgress,
            status_reason: Some("User Initiated".into()),
            description: template.description.clone(),
            template_body: input.template_body.clone(),
            parameters: params.raw.clone(),
            no_echo: params.no_echo.clone(),
            outputs: Vec::new(),
            on_failure: input.on_failure,
            created_at: ts.clone(),
            updated_at: ts.clone(),
            deleted_at: None,
            tags: input.tags.clone(),
            parent_id: parent.map(|p| p.stack_id.clone()),
            root_id: parent.map(|p| p.root_id.clone().unwrap_or_else(|| p.stack_id.clone())),
            context,
            capabilities: input.capabilities.clone().unwrap_or_default(),
            // Only a root stack's counts; its nested stacks share it.
            termination_protection: input.termination_protection && parent.is_none(),
            stack_policy: input.stack_policy.clone(),
            rollback_configuration: input
                .rollback_configuration
                .as_ref()
                .map(|c| c.applied_to(None))
                .filter(|c| !c.is_empty()),
            notification_arns: input.notification_arns.clone(),
        };
        let first = stack_event(
            &stack,
            StackStatus::CreateInProgress,
            Some("User Initiated"),
            &ts,
        );
        let operation = OperationRecord {
            stack_id: stack_id.clone(),
            kind: OperationKind::Create,
            options: OperationOptions {
                timeout_in_minutes: input.timeout_minutes.map(u64::from),
                nested_templates: nested.clone(),
                ..Default::default()
            }
            .to_value(),
            started_at: ts,
        };
        // The operation's record is written with the stack: a crash right
        // after cannot lose its timeout or its nested templates.
        self.insert_operating(&stack, &first, &operation).await?;
        // The operation's load reads the same text with the same context.
        self.parsed
            .keep(&stack.template_body, &stack.context, template);
        Ok(stack_id)
    }

    pub(super) async fn fail_create(
        &self,
        op: &Op,
        reason: &str,
    ) -> Result<StackStatus, EngineError> {
        op.stops.triggers_done.store(true, Ordering::SeqCst);
        match op.stack.on_failure {
            OnFailure::DoNothing => {
                self.set_status(op, StackStatus::CreateFailed, Some(reason))
                    .await
            }
            OnFailure::Rollback => {
                let reason = format!("{reason}Rollback requested by user.");
                self.set_status(op, StackStatus::RollbackInProgress, Some(&reason))
                    .await?;
                self.rollback(op).await
            }
            OnFailure::Delete => {
                let reason = if reason == TIMED_OUT {
                    format!("{reason}Delete requested by user.")
                } else {
                    reason.to_string()
                };
                self.set_status(op, StackStatus::DeleteInProgress, Some(&reason))
                    .await?;
                self.deletes().delete_phase(op, &[], true, None).await
            }
        }
    }

    pub(super) async fn rollback(&self, op: &Op) -> Result<StackStatus, EngineError> {
        let failed = self.deletes().delete_resources(op, &[], None).await?;
        if failed.is_empty() {
            self.set_status(op, StackStatus::RollbackComplete, None)
                .await
        } else {
            let reason = format!(
                "The following resource(s) failed to delete: [{}]. ",
                failed.join(", ")
            );
            self.set_status(op, StackStatus::RollbackFailed, Some(&reason))
                .await
        }
    }

    /// Creates every resource not yet created, in dependency order. Returns the
    /// logical ids that failed.
    /// `rows`: the stack's resources as stored when the phase starts.
    pub(super) async fn create_all(
        &self,
        op: &Op,
        rows: Vec<ResourceRecord>,
    ) -> Result<Vec<String>, EngineError> {
        let stored: HashMap<String, ResourceRecord> = rows
            .into_iter()
            .map(|r| (r.logical_id.clone(), r))
            .collect();
        let n = op.graph.len();
        let preds: Vec<Vec<usize>> = (0..n).map(|i| op.graph.depends_on(i).to_vec()).collect();
        let mut initial = vec![Outcome::NotRun; n];
        let mut already_failed = Vec::new();
        for (i, slot) in initial.iter_mut().enumerate() {
            match stored.get(op.graph.name(i)).map(|r| r.status) {
                Some(ResourceStatus::CreateComplete) => *slot = Outcome::Done,
                Some(ResourceStatus::CreateFailed) => {
                    already_failed.push(op.graph.name(i).to_string())
                }
                _ => {}
            }
        }
        if !already_failed.is_empty() {
            // Crashed after a failure was recorded: go straight to the failure path.
            return Ok(already_failed);
        }
        let stored = &stored;
        let outcomes = self
            .schedule(
                op,
                &preds,
                initial,
                (true, false),
                ("create", &|i| op.graph.name(i).to_string()),
                |i| async move {
                    let name = op.graph.name(i);
                    let ok = self
                        .create_one(op, name, stored.get(name).cloned(), None)
                        .await;
                    (i, ok)
                },
            )
            .await?;
        let cancelled: Vec<&str> = (0..n)
            .filter(|&i| outcomes[i] == Outcome::Cancelled)
            .map(|i| op.graph.name(i))
            .collect();
        let mut failed: Vec<String> = (0..n)
            .filter(|&i| outcomes[i] == Outcome::Failed)
            .map(|i| op.graph.name(i).to_string())
            .collect();
        failed.extend(self.steps().mark_cancelled(op, &cancelled).await?);
        Ok(failed)
    }

    /// Creates one resource (CREATE_IN_PROGRESS, "Resource creation
    /// Initiated", CREATE_COMPLETE), or finishes a create a crash interrupted.
    /// `journal`: how an update records it (`Added`), `None` in a create.
    pub(super) async fn create_one(
        &self,
        op: &Op,
        logical_id: &str,
        existing: Option<ResourceRecord>,
        journal: Option<Journal>,
    ) -> bool {
        if op.aborted.load(Ordering::SeqCst) {
            return false;
        }
        // Made already, and waiting for signals when the operation stopped:
        // the wait goes on with the signals that came meanwhile.
        if let Some(r) = existing.as_ref().filter(|r| {
            r.pending
                .as_ref()
                .is_some_and(|p| p.action == CallKind::Signals)
        }) {
            // On the heap, as the wait itself (see `created_or_waiting`).
            return Box::pin(
                self.steps()
                    .resume_signal_wait(op, logical_id, r.clone(), CREATED),
            )
            .await;
        }
        // A create recorded before (a crash, a cancellation) is taken up:
        // its outcome is learnt, it is not sent again.
        if let Some(r) = existing.filter(|r| self.steps().create_in_flight(r)) {
            return self
                .steps()
                .create(op, r, Vec::new(), Then::Signals(CREATED))
                .await;
        }
        match self.begin_create(op, logical_id, journal).await {
            Some((rec, started)) => {
                self.steps()
                    .create(op, rec, started, Then::Signals(CREATED))
                    .await
            }
            None => false,
        }
    }

    /// What a new resource's create starts from: its properties evaluated,
    /// what it will wait for checked, its old signals cleared, the row as
    /// the call shows it (CREATE_IN_PROGRESS, "Resource creation
    /// Initiated") and the events recorded with it (CREATE_IN_PROGRESS).
    /// `None` when it failed before anything was sent (the failure is
    /// recorded).
    async fn begin_create(
        &self,
        op: &Op,
        logical_id: &str,
        journal: Option<Journal>,
    ) -> Option<(ResourceRecord, Vec<crate::stack::EventRecord>)> {
        let type_name = op
            .template
            .resource(logical_id)
            .map(|r| r.type_name.clone())
            .unwrap_or_default();
        // A new resource is made with the type's default version, named
        // in the row the create's request is recorded with.
        let type_version = op.new_type_version(&self.registry, &type_name);
        let mut rec = ResourceRecord {
            stack_id: op.stack.stack_id.clone(),
            logical_id: logical_id.to_string(),
            resource_type: type_name,
            physical_id: None,
            status: ResourceStatus::CreateInProgress,
            status_reason: None,
            properties: Map::new(),
            attributes: Map::new(),
            pending: None,
            updated_at: now(),
            metadata: None,
            journal,
            no_echo: false,
            type_version,
        };
        // CREATE_IN_PROGRESS is committed together with the next
        // transition: one write per step instead of two.
        let started = vec![op.resource_event(&rec)];
        let prepared = async {
            let (_, props) = self.protocol().properties_for(op, logical_id)?;
            rec.metadata = self.protocol().metadata_for(op, logical_id)?;
            rec.properties = props;
            // What it will wait for is checked before anything is made.
            self.signals()
                .signal_wait(op, logical_id, &rec.properties)
                .await?;
            self.signals().new_life(op, logical_id).await
        }
        .await;
        if let Err(reason) = prepared {
            rec.status = ResourceStatus::CreateFailed;
            rec.status_reason = Some(reason);
            rec.updated_at = now();
            self.record(op, &rec, started).await;
            return None;
        }
        rec.status_reason = Some("Resource creation Initiated".into());
        rec.updated_at = now();
        Some((rec, started))
    }

    /// Outputs and exports, once every resource exists. An error is the reason
    /// the create fails.
    pub(super) async fn finish_create(&self, op: &Op) -> Result<(), String> {
        let outputs = self.evaluate_outputs(op)?;
        self.publish_outputs(op, outputs).await
    }

    /// The template's outputs (those whose condition holds), evaluated.
    pub(super) fn evaluate_outputs(&self, op: &Op) -> Result<Vec<OutputRecord>, String> {
        outputs_of(&op.template, &op.evaluator())
    }

    /// Records outputs on the stack and publishes its exports and imports.
    pub(super) async fn publish_outputs(
        &self,
        op: &Op,
        outputs: Vec<OutputRecord>,
    ) -> Result<(), String> {
        let exports: Vec<(String, String)> = outputs
            .iter()
            .filter_map(|o| Some((o.export_name.clone()?, o.output_value.clone()?)))
            .collect();
        self.store
            .put_exports(&op.lease, &exports)
            .await
            .map_err(|e| e.to_string())?;
        self.store
            .put_imports(&op.lease, &op.results.imported())
            .await
            .map_err(|e| e.to_string())?;
        let mut stack = op.stack.clone();
        op.state.apply_template(&mut stack);
        stack.outputs = outputs;
        stack.updated_at = now();
        self.store
            .save_stack(&op.lease, &stack)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// How the HOT front end wraps an output's value: shown as text (JSON for
/// maps and lists).
const HOT_OUTPUT_TEXT: &str = "Fn::Heat::OutputText";

/// A HOT output listed without a value: its condition is false, or
/// (`error`) it could not be resolved.
fn without_value(o: &crate::template::model::Output, error: Option<String>) -> OutputRecord {
    OutputRecord {
        output_key: o.name.clone(),
        output_value: None,
        description: o.description.clone(),
        export_name: None,
        output_error: error,
        typed_value: None,
    }
}

/// `template`'s outputs (those whose condition holds), evaluated with `ev`.
pub(super) fn outputs_of(
    template: &Template,
    ev: &Evaluator<'_>,
) -> Result<Vec<OutputRecord>, String> {
    let mut outputs = Vec::new();
    for o in &template.outputs {
        if o.condition.as_deref().is_some_and(|c| !ev.condition(c)) {
            // Heat lists an output whose condition is false, without a
            // value (heat/engine/output.py); CloudFormation omits it.
            if template.heat {
                outputs.push(without_value(o, None));
            }
            continue;
        }
        let base = child("/Outputs", &o.name);
        // A HOT output's value is evaluated as written (its type kept for
        // a parent's get_attr), then shown as text.
        let (value_expr, typed) = match o.value.get(HOT_OUTPUT_TEXT) {
            Some(inner) if template.heat => (inner, true),
            _ => (&o.value, false),
        };
        let failure = match ev.eval(value_expr, &child(&base, "Value")) {
            Ok(Evaluated::Value(v)) => Ok(v),
            Ok(_) => Err(format!("Output {} did not resolve to a value", o.name)),
            // Heat's text: without CloudFormation's "Template error: ".
            Err(e) => Err(if template.heat {
                let m = e.message();
                m.strip_prefix("Template error: ").unwrap_or(m).to_string()
            } else {
                e.to_string()
            }),
        };
        let value = match failure {
            Ok(v) => v,
            // Heat completes the stack and reports the error on this
            // output alone (heat/engine/api.py, format_stack_output).
            Err(e) if template.heat => {
                outputs.push(without_value(o, Some(e)));
                continue;
            }
            Err(e) => return Err(e),
        };
        let typed_value = typed.then(|| value.clone());
        let text = match &value {
            Value::String(s) => s.clone(),
            Value::Null if typed => String::new(),
            Value::Array(_) if typed => value.to_string(),
            Value::Array(items) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| i.to_string())
                })
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        };
        let export_name = match &o.export_name {
            None => None,
            Some(e) => match ev.eval(e, &child(&base, "Export")) {
                Ok(Evaluated::Value(Value::String(s))) => Some(s),
                Ok(_) => return Err(format!("Export name of output {} must be a string", o.name)),
                Err(e) => return Err(e.to_string()),
            },
        };
        outputs.push(OutputRecord {
            output_key: o.name.clone(),
            output_value: Some(text),
            description: o.description.clone(),
            export_name,
            output_error: None,
            typed_value,
        });
    }
    Ok(outputs)
}
