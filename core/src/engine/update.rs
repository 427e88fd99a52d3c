//! Stack update (seed 000): roll forward in dependency order, then clean up;
//! on failure roll back, then clean up what the update made. Each resource's
//! part is journaled on its row ([`Journal`]) so every phase can resume after
//! a crash and the rollback knows what to restore and what to delete.

use crate::engine::kinds::Updates;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::dag::Outcome;
use super::kept;
use super::protocol;
use super::resolve::Results;
use super::rollback_triggers::Monitored;
use super::steps::create::{Then, REPLACED};
use super::steps::victim::{Victim, VictimOf};
use super::{stack_context, EngineError, Op};
use crate::graph::Graph;
use crate::hooks::HookAction;
pub use crate::operation::{OperationOptions, StackState};
use crate::plan::{self, Decision};
use crate::rollback_triggers::RollbackConfiguration;
use crate::stack::{
    now, CallKind, ChangeSetRecord, Journal, OperationKind, ResourceRecord, ResourceStatus,
    StackRecord, StackStatus, Tag,
};
use crate::stack_policy::UpdateAction;
use crate::store::{OperationRecord, StoreError};
use crate::template::eval::{Evaluator, StackContext};
use crate::template::parameters::ParameterValues;
use crate::template::source::child;
use crate::template::Template;

/// A parameter of an update: a new value, or the stack's current one.
#[derive(Debug, Clone, PartialEq)]
pub enum ParameterInput {
    Value(String),
    UsePreviousValue,
}

/// What `cairn deploy` asks for when the stack exists.
#[derive(Debug, Clone)]
pub struct UpdateStackInput {
    pub stack_name: String,
    /// `None`: reuse the stack's current template.
    pub template_body: Option<String>,
    pub parameters: BTreeMap<String, ParameterInput>,
    /// `None`: keep the stack's tags; `Some(empty)`: remove them all.
    pub tags: Option<Vec<Tag>>,
    /// Where the template came from (its nested stacks' TemplateURLs).
    pub origin: crate::nested::Origin,
    /// HOT's files and environment (`None`: the stack's).
    pub context: Option<crate::stack::TemplateContext>,
    /// CloudFormation's `DisableRollback`: a failure stops the update in
    /// UPDATE_FAILED, keeping what it did; the next update continues from
    /// there, or RollbackStack goes back.
    pub disable_rollback: bool,
    /// The capabilities acknowledged (`None`: not checked, for an update
    /// the engine makes itself, such as a nested stack's).
    pub capabilities: Option<Vec<String>>,
    /// `StackPolicyBody`: the stack's new policy, in effect once the update
    /// has started (`None`: kept).
    pub stack_policy: Option<String>,
    /// `StackPolicyDuringUpdateBody`: the policy this update alone is
    /// checked against, instead of the stack's.
    pub stack_policy_during_update: Option<String>,
    /// `RollbackConfiguration`: each field given replaces the stack's,
    /// each left out (or `None`: all) keeps it.
    pub rollback_configuration: Option<RollbackConfiguration>,
    /// `NotificationARNs`: the stack's targets from this update on
    /// (`None`: kept; empty: none).
    pub notification_arns: Option<Vec<String>>,
    /// Which resources move to another version of their registered type.
    pub upgrade_types: UpgradeTypes,
}

/// Which resources an update moves to another version of their registered
/// type. A resource keeps the version it was made with unless asked: a new
/// default version is something a platform team publishes, moving a stack
/// onto it is the stack owner's choice.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum UpgradeTypes {
    /// Each keeps its version.
    #[default]
    Keep,
    /// Every registered type's resources to its default version, as it is
    /// when the update is planned (`--upgrade-types`).
    ToDefaults,
    /// To these versions, by type (a change set's execution runs the moves
    /// it showed; a nested stack's update, its parent's).
    To(BTreeMap<String, String>),
}

/// What only an update (a template update, `cairn update`, an import)
/// carries through its operation.
pub struct UpdateState {
    /// Its other template: the one it left, or during rollback the one it
    /// abandoned.
    pub other: Other,
    /// The stack policy it is checked against (see `stack_policy`).
    pub policy: Option<crate::stack_policy::StackPolicy>,
    /// The type versions its resources move to (see [`UpgradeTypes`]).
    pub upgrade_types: BTreeMap<String, String>,
}

/// The update's other template, evaluated as far as cleanup needs it.
pub struct Other {
    pub state: StackState,
    pub template: Arc<Template>,
    pub params: ParameterValues,
    pub conditions: HashMap<String, bool>,
    pub graph: Graph,
}

impl Other {
    /// `parsed`: the templates the update's start parsed.
    pub(super) fn load(
        state: StackState,
        sctx: &StackContext,
        results: &Results,
        parsed: &super::parsed::Parsed,
    ) -> Result<Other, EngineError> {
        let template = parsed.parse(&state.template_body, &state.context)?;
        let params = ParameterValues::resolve(&template.parameters, &state.parameters)?;
        let conditions = Evaluator::new(&template, &params, sctx, results)?
            .conditions()
            .clone();
        let graph = Graph::build(&template, &|c| conditions.get(c).copied())?;
        Ok(Other {
            state,
            template,
            params,
            conditions,
            graph,
        })
    }
}

/// The stack's reason for a rollback that `cairn cancel-update` started.
const CANCELLED: &str = "User Initiated";

/// The values an operation's parameters take: given ones, and for
/// `UsePreviousValue` the value in `previous` (the stack's current ones).
/// Heat's `immutable` parameters: a parameter the stack already has may not
/// change its value when the new template declares it immutable.
fn immutable_unchanged(
    template: &Template,
    old: &ParameterValues,
    new: &ParameterValues,
) -> Result<(), EngineError> {
    let changed: Vec<&str> = template
        .parameters
        .iter()
        .filter(|d| d.immutable)
        .filter(
            |d| matches!(old.values.get(&d.name), Some(v) if new.values.get(&d.name) != Some(v)),
        )
        .map(|d| d.name.as_str())
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    Err(EngineError::Validation(format!(
        "The following parameters are immutable and may not be updated: {}",
        changed.join(", ")
    )))
}

pub(super) fn supplied_values(
    inputs: &BTreeMap<String, ParameterInput>,
    previous: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, EngineError> {
    let mut supplied = BTreeMap::new();
    for (name, value) in inputs {
        let v = match value {
            ParameterInput::Value(v) => v,
            ParameterInput::UsePreviousValue => previous.get(name).ok_or_else(|| {
                EngineError::Validation(format!(
                    "Invalid input for parameter key {name}. Cannot specify usePreviousValue as true for a parameter key not in the previous template"
                ))
            })?,
        };
        supplied.insert(name.clone(), v.clone());
    }
    Ok(supplied)
}

/// An update decided but not started: the stack as read, where it goes,
/// and the plan.
pub(super) struct PreparedUpdate {
    pub stack: StackRecord,
    pub target: StackState,
    pub changes: Vec<plan::ResourceChange>,
    /// The nested templates the target template's stack resources use.
    pub nested: crate::nested::NestedTemplates,
    /// The operation's options besides its journal and nested templates
    /// (its stack policy, DisableRollback, a continued update's, a nested
    /// stack's parent request and timeout, an import's, a plan).
    pub options: OperationOptions,
    /// The properties of the nested stacks the update modifies, as far as
    /// they are known before it runs (for their own change sets).
    pub nested_properties: BTreeMap<String, serde_json::Map<String, Value>>,
    /// What a `cairn update` that failed left to finish: a resource's
    /// physical resource that its provider replaced and that could not be
    /// deleted (`Resources.X` and that id). Only `cairn update` finishes
    /// it; a template update would lose track of it.
    pub unfinished: Vec<String>,
    /// The templates it parsed (the target's, then the stack's), handed
    /// to the operation's load when it starts.
    pub parsed: ParsedTemplates,
}

/// A prepared update's two parsed templates; freed on a blocking thread
/// when nothing takes them (a refused no-op, a change set only planned):
/// freeing a large template takes tens of milliseconds the caller need
/// not wait for.
pub(super) struct ParsedTemplates(Option<(Arc<Template>, Arc<Template>)>);

impl ParsedTemplates {
    fn take(&mut self) -> Option<(Arc<Template>, Arc<Template>)> {
        self.0.take()
    }
}

impl Drop for ParsedTemplates {
    fn drop(&mut self) {
        if let Some(templates) = self.0.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn_blocking(move || drop(templates));
                }
                Err(_) => drop(templates),
            }
        }
    }
}

impl PreparedUpdate {
    /// Whether the update changes nothing (CloudFormation's "No updates
    /// are to be performed."): no resource and no tag changes. A HOT
    /// template whose text, parameters or files changed is an update even
    /// when no resource does, as Heat completes it: its outputs (an
    /// output-only change of a provider template) and template are taken.
    pub(super) fn changes_nothing(&self) -> bool {
        // Continuing a kept failed update always does something: it ends
        // the failed state and deletes what that update left.
        if self.options.continues {
            return false;
        }
        if !self.changes.is_empty() || self.target.tags != self.stack.tags {
            return false;
        }
        let (old, new) = (&self.stack, &self.target);
        let differs = new.template_body != old.template_body
            || new.parameters != old.parameters
            || new.context != old.context;
        !(differs
            && Template::body_of(&new.template_body)
                .is_ok_and(|b| crate::template::hot::is_hot(&b)))
    }
}

/// Why a nested stack whose own update succeeded rolls back.
const ANCESTOR_ROLLED_BACK: &str =
    "The update of a parent stack failed; rolling back this nested stack with it.";

const REPLACING: &str =
    "Requested update requires the creation of a new physical resource; hence creating one.";

fn failure_reason(created: &[String], updated: &[String]) -> String {
    let mut parts = Vec::new();
    if !created.is_empty() {
        parts.push(format!(
            "The following resource(s) failed to create: [{}].",
            created.join(", ")
        ));
    }
    if !updated.is_empty() {
        parts.push(format!(
            "The following resource(s) failed to update: [{}].",
            updated.join(", ")
        ));
    }
    parts.join(" ")
}

/// The statuses whose stack is what its template and parameters say (an
/// `UPDATE_FAILED` stack is not: updating it continues the failed update).
pub(super) fn settled(status: StackStatus) -> bool {
    matches!(
        status,
        StackStatus::CreateComplete
            | StackStatus::UpdateComplete
            | StackStatus::UpdateRollbackComplete
            | StackStatus::ImportComplete
            | StackStatus::ImportRollbackComplete
    )
}

/// The statuses an update may start from: the settled ones, and where a
/// `cairn update` that failed stops (it does not roll back: running it
/// again, or with the old template, recovers).
fn updatable(status: StackStatus) -> bool {
    settled(status) || status == StackStatus::UpdateFailed
}

type FoundStack = Result<(Option<StackRecord>, HashMap<String, String>), StoreError>;
type LiveState = Result<Option<(Vec<ResourceRecord>, Results)>, StoreError>;

/// Reads, in the background, the stack named `name` and the exports (sent as
/// soon as they are known), then, if the stack may be updated, its rows
/// decoded and indexed for the evaluator.
fn read_live_state(
    store: std::sync::Arc<dyn crate::store::Store>,
    name: String,
    supplied_reads: bool,
) -> (
    tokio::sync::oneshot::Receiver<FoundStack>,
    tokio::task::JoinHandle<LiveState>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let found = async {
            let stack = store.find_stack(&name).await?;
            // The other stacks' outputs when the supplied template or the
            // stack's own (its rollback's) may read them.
            let reads = supplied_reads
                || stack.as_ref().is_some_and(|s| {
                    super::resolve::reads_stack_outputs(&s.template_body, &s.context)
                });
            let exports = super::resolve::shared_values(store.as_ref(), reads).await?;
            Ok::<_, StoreError>((stack, exports))
        }
        .await;
        let stack_id = found.as_ref().ok().and_then(|(stack, _)| {
            stack
                .as_ref()
                .filter(|s| updatable(s.status))
                .map(|s| s.stack_id.clone())
        });
        let exports = found.as_ref().map(|(_, e)| e.clone()).unwrap_or_default();
        let _ = tx.send(found);
        let Some(stack_id) = stack_id else {
            return Ok(None);
        };
        let rows = store.resources(&stack_id).await?;
        let results = Results::new(exports);
        results.record_live(&rows);
        Ok(Some((rows, results)))
    });
    (rx, task)
}

/// The update's arguments that are checked before the stack is read: its
/// stack policy bodies and its rollback configuration.
fn check_arguments(input: &UpdateStackInput) -> Result<(), EngineError> {
    for (body, what) in [
        (&input.stack_policy, "StackPolicyBody"),
        (
            &input.stack_policy_during_update,
            "StackPolicyDuringUpdateBody",
        ),
    ] {
        if let Some(b) = body {
            super::stack_policy::parse(b, what)?;
        }
    }
    if let Some(c) = &input.rollback_configuration {
        c.check()?;
    }
    Ok(())
}

/// A background read (on the store's thread) that did not finish: a panic
/// or a runtime shutting down.
pub(super) fn background_read(e: tokio::task::JoinError) -> EngineError {
    EngineError::Store(StoreError::Backend(format!(
        "reading the stack's state failed: {e}"
    )))
}

impl Updates<'_> {
    /// The synchronous part of an update: every precondition of seed 000 (the
    /// stack exists and is updatable, the template and parameters are valid, at
    /// least one resource changes), then UPDATE_IN_PROGRESS. Then call
    /// [`Engine::run`].
    pub async fn start_update(&self, input: &UpdateStackInput) -> Result<String, EngineError> {
        let stack = self.store.find_stack(&input.stack_name).await?;
        if let Some(s) = &stack {
            self.nested_stacks().refuse_nested(s, "update").await?;
        }
        if let Some(t) = &input.notification_arns {
            crate::notifications::check_targets(t)?;
        }
        check_arguments(input)?;
        // The stack's own template, values and tags again: known to change
        // nothing without parsing and planning it (see `unchanged`).
        if stack
            .as_ref()
            .is_some_and(|s| self.changes_nothing_known(input, s))
        {
            return Err(EngineError::Validation(
                "No updates are to be performed.".into(),
            ));
        }
        let prepared = self.prepare_update(input).await?;
        // New tags alone are an update (CloudFormation's too).
        if prepared.changes_nothing() {
            return Err(EngineError::Validation(
                "No updates are to be performed.".into(),
            ));
        }
        self.notify_to(&prepared.stack.stack_id, input.notification_arns.as_deref())
            .await?;
        let id = self.begin_update(prepared, None).await?;
        // The new policy governs the next updates; this one is checked
        // against the policy it started with (in its options).
        if let Some(p) = &input.stack_policy {
            self.store.set_stack_policy(&id, p).await?;
        }
        Ok(id)
    }

    /// Everything an update decides before it changes anything: the
    /// preconditions, the evaluated template and the plan. A change set is
    /// this, stored; executing it runs [`Updates::begin_update`] on it.
    pub(super) async fn prepare_update(
        &self,
        input: &UpdateStackInput,
    ) -> Result<PreparedUpdate, EngineError> {
        self.prepare_update_nested(input, None).await
    }

    /// [`Updates::prepare_update`]; `nested`: the nested templates a parent
    /// hands its child (`None`: read them from the template's origin).
    pub(super) async fn prepare_update_nested(
        &self,
        input: &UpdateStackInput,
        nested: Option<crate::nested::NestedTemplates>,
    ) -> Result<PreparedUpdate, EngineError> {
        // A refused no-op update of a large stack is parse + read + evaluate;
        // the reads run on the store's thread while this one parses, so the
        // work is pipelined over two cores. Errors keep their order: the
        // stack's existence and status are reported before template errors.
        check_arguments(input)?;
        let supplied_reads = input.template_body.as_deref().is_some_and(|b| {
            let none = crate::stack::TemplateContext::default();
            super::resolve::reads_stack_outputs(b, input.context.as_ref().unwrap_or(&none))
        });
        let (stack_rx, live) =
            read_live_state(self.store.clone(), input.stack_name.clone(), supplied_reads);
        let empty = crate::stack::TemplateContext::default();
        let supplied_context = input.context.as_ref().unwrap_or(&empty);
        // A template with AWS::LanguageExtensions is expanded with the
        // values the update gives: read once the stack's are known.
        let supplied_template = input
            .template_body
            .as_deref()
            .filter(|b| !b.contains(crate::template::language_extensions::TRANSFORM))
            .filter(|b| {
                input
                    .context
                    .as_ref()
                    .is_some_and(|c| c.processed.is_some())
                    || !super::macros::needs_reading(b)
            })
            .map(|b| Template::parse_with(b, supplied_context));
        let (stack, exports) = stack_rx.await.map_err(|_| {
            EngineError::Store(StoreError::Backend(
                "reading the stack's state stopped".into(),
            ))
        })??;
        let Some(stack) = stack else {
            return Err(EngineError::Validation(format!(
                "Stack with id {} does not exist",
                input.stack_name
            )));
        };
        if !updatable(stack.status) {
            return Err(EngineError::Validation(format!(
                "Stack:{} is in {} state and can not be updated.",
                stack.stack_id, stack.status
            )));
        }
        let body = input
            .template_body
            .clone()
            .unwrap_or_else(|| stack.template_body.clone());
        let supplied = supplied_values(&input.parameters, &stack.parameters)?;
        let target_context = match (&input.template_body, &input.context) {
            (_, Some(c)) => c.clone(),
            (Some(_), None) => Default::default(),
            // The stack's template again: its macros run again too, with
            // this update's parameter values.
            (None, None) => crate::stack::TemplateContext {
                processed: None,
                ..stack.context.clone()
            },
        }
        .for_template(&body, &supplied);
        let target_context = self
            .run_transforms(
                &body,
                target_context,
                &supplied,
                input.capabilities.as_deref(),
            )
            .await?;
        let template = Arc::new(match supplied_template {
            Some(parsed) => parsed?,
            None => Template::parse_with(&body, &target_context)?,
        });
        let params = ParameterValues::resolve(&template.parameters, &supplied)?;
        let sctx = stack_context(&self.config, &stack.stack_name, &stack.stack_id);
        let (conditions, graph) = self.prepare(&template, &params, &sctx, exports)?;
        let nested = match nested {
            Some(n) => n,
            None if input.template_body.is_some() => {
                self.read_nested(&template, &target_context, &input.origin, (&params, &sctx))
                    .await?
            }
            None => Default::default(),
        };
        let Some((rows, results)) = live.await.map_err(background_read)?? else {
            return Err(EngineError::Store(StoreError::Backend(
                "reading the stack's state stopped".into(),
            )));
        };
        // A failed update kept for inspection: this one continues from the
        // resources as they are (see `kept`).
        let operation = match stack.status {
            StackStatus::UpdateFailed => self.store.operation(&stack.stack_id).await?,
            _ => None,
        };
        let continues = kept::is_kept_update(&stack, operation.as_ref());
        let (rows, superseded) = match &operation {
            Some(o) if continues => {
                let (rows, mut superseded) = kept::fold(rows);
                superseded.extend(OperationOptions::from_value(&o.options).superseded);
                results.record_live(&rows);
                (rows, superseded)
            }
            _ => (rows, Vec::new()),
        };
        self.check_capabilities(&template, &body, &nested, input.capabilities.as_deref())?;
        self.check_macro_names(&template, &stack.stack_name).await?;
        self.refuse_type_changes(&rows, &template, &graph)?;
        if input.disable_rollback {
            self.refuse_kept_nested(&rows, &template)?;
        }
        // The same text (a parameter-only update, or none): parse it once.
        let old_template =
            if body == stack.template_body && target_context.processed == stack.context.processed {
                template.clone()
            } else {
                Arc::new(Template::parse_with(&stack.template_body, &stack.context)?)
            };
        let old_params = ParameterValues::resolve(&old_template.parameters, &stack.parameters)?;
        immutable_unchanged(&template, &old_params, &params)?;
        let ev = Evaluator::with_conditions(&template, &params, &sctx, &results, conditions);
        let upgrade_types = match &input.upgrade_types {
            UpgradeTypes::Keep => BTreeMap::new(),
            UpgradeTypes::ToDefaults => self.registry.default_versions(),
            UpgradeTypes::To(versions) => versions.clone(),
        };
        let mut changes = plan::plan(
            &template,
            &ev,
            &graph,
            &self.registry,
            &rows,
            &plan::Previous {
                template: &old_template,
                params: &old_params,
            },
            &params,
            &nested,
            plan::TypeVersions {
                upgrade: &upgrade_types,
            },
        )?;
        if input.tags.as_ref().is_some_and(|t| *t != stack.tags) {
            changes.extend(self.retagged(&rows, &graph, &changes));
        }
        let unfinished = rows
            .iter()
            .filter_map(|r| match &r.journal {
                // Replaced while updated in place, or left by an in-place
                // update that failed (its discard).
                Some(Journal::Changed { before: left })
                | Some(Journal::Restored {
                    discard: Some(left),
                }) => Some(format!(
                    "{} ({})",
                    r.logical_id,
                    left.physical_id.as_deref().unwrap_or_default()
                )),
                _ => None,
            })
            .collect();
        let description = template.description.clone();
        let mut nested_properties = BTreeMap::new();
        for c in changes
            .iter()
            .filter(|c| c.action == "Modify" && crate::nested::is_stack(&c.resource_type))
        {
            if let Some(r) = template.resource(&c.logical_resource_id) {
                let path = child(&child("/Resources", &r.logical_id), "Properties");
                if let Ok((props, _)) = ev.eval_object(&r.properties, &path) {
                    nested_properties.insert(r.logical_id.clone(), props);
                }
            }
        }
        drop(ev);
        // Freeing a large stack's rows and parsed template takes tens of
        // milliseconds that the caller need not wait for.
        tokio::task::spawn_blocking(move || drop((rows, results)));
        let parsed = ParsedTemplates(Some((template, old_template)));
        let options = OperationOptions {
            stack_policy: input
                .stack_policy_during_update
                .clone()
                .or_else(|| stack.stack_policy.clone()),
            disable_rollback: input.disable_rollback,
            continues,
            superseded,
            upgrade_types,
            ..Default::default()
        };
        Ok(PreparedUpdate {
            target: StackState {
                template_body: body,
                parameters: params.raw.clone(),
                no_echo: params.no_echo.clone(),
                description,
                outputs: stack.outputs.clone(),
                tags: input.tags.clone().unwrap_or_else(|| stack.tags.clone()),
                context: target_context,
                // A change set's execution and a nested stack's update
                // (given none) keep the stack's.
                capabilities: input
                    .capabilities
                    .clone()
                    .unwrap_or_else(|| stack.capabilities.clone()),
                rollback_configuration: match &input.rollback_configuration {
                    Some(c) => Some(c.applied_to(stack.rollback_configuration.as_ref()))
                        .filter(|c| !c.is_empty()),
                    None => stack.rollback_configuration.clone(),
                },
            },
            stack,
            changes,
            nested,
            options,
            nested_properties,
            unfinished,
            parsed,
        })
    }

    /// A failed update of a stack with nested stacks cannot be kept yet:
    /// its nested stacks finish their own updates (their cleanups delete
    /// what the parent's last stable state needs) when the parent stops.
    fn refuse_kept_nested(
        &self,
        rows: &[ResourceRecord],
        template: &Template,
    ) -> Result<(), EngineError> {
        let nested = |t: &str| crate::nested::is_stack(self.registry.canonical(t));
        let mut names: Vec<&str> = rows
            .iter()
            .filter(|r| nested(&r.resource_type))
            .map(|r| r.logical_id.as_str())
            .chain(
                template
                    .resources
                    .iter()
                    .filter(|r| nested(&r.type_name))
                    .map(|r| r.logical_id.as_str()),
            )
            .collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            return Ok(());
        }
        Err(EngineError::Validation(format!(
            "DisableRollback is not supported for an update of a stack with nested stacks ({}): its nested stacks would finish their own updates; update without it",
            names.join(", ")
        )))
    }

    /// CloudFormation refuses an update that changes a live resource's type;
    /// Heat replaces the resource (heat/engine/update.py,
    /// `_process_new_resource_update`: a different class is a new resource).
    fn refuse_type_changes(
        &self,
        rows: &[ResourceRecord],
        template: &Template,
        graph: &Graph,
    ) -> Result<(), EngineError> {
        if template.heat {
            return Ok(());
        }
        let changed_type: Vec<&str> = rows
            .iter()
            .filter(|r| plan::is_live(r))
            .filter(|r| {
                template.resource(&r.logical_id).is_some_and(|t| {
                    graph.index_of(&r.logical_id).is_some()
                        && self.registry.canonical(&t.type_name)
                            != self.registry.canonical(&r.resource_type)
                })
            })
            .map(|r| r.logical_id.as_str())
            .collect();
        if changed_type.is_empty() {
            return Ok(());
        }
        Err(EngineError::Validation(format!(
            "Update of resource type is not permitted. The new template modifies resource type of the following resources: [{}]",
            changed_type.join(", ")
        )))
    }

    /// Takes the stack's lease and starts a prepared update (UPDATE_IN_PROGRESS).
    /// `change_set`: the change set it executes, whose plan must still hold.
    pub(super) async fn begin_update(
        &self,
        prepared: PreparedUpdate,
        change_set: Option<&ChangeSetRecord>,
    ) -> Result<String, EngineError> {
        if !prepared.unfinished.is_empty() {
            // The rows are read apart from the stack: another update may have
            // started replacing a resource since. Then the stack is busy (or
            // changed), which is the answer, not its journal.
            let current = self.current_status(&prepared.stack).await?;
            if current != prepared.stack.status {
                return Err(moved_on(&prepared.stack, current));
            }
            return Err(EngineError::Validation(format!(
                "Stack:{} has physical resources that a cairn update replaced and could not delete: {}. Run cairn update {} again to delete them (or delete the stack) before updating it with a template.",
                prepared.stack.stack_id,
                prepared.unfinished.join(", "),
                prepared.stack.stack_name
            )));
        }
        self.begin_updating(prepared, change_set, OperationKind::Update, None)
            .await
    }

    /// Starts an operation that moves the stack to `prepared`'s target:
    /// `kind` is the operation (`UPDATE`, or `RECONCILE` for `cairn
    /// update`); `details`, what the history entry records from the start
    /// (`cairn update`'s plan, an import's resources).
    pub(super) async fn begin_updating(
        &self,
        prepared: PreparedUpdate,
        change_set: Option<&ChangeSetRecord>,
        kind: OperationKind,
        details: Option<Value>,
    ) -> Result<String, EngineError> {
        self.begin_moving(
            prepared,
            change_set,
            (kind, StackStatus::UpdateInProgress),
            details,
        )
        .await
    }

    /// [`Updates::begin_updating`], starting in `status` (an import's
    /// IMPORT_IN_PROGRESS).
    pub(super) async fn begin_moving(
        &self,
        prepared: PreparedUpdate,
        change_set: Option<&ChangeSetRecord>,
        (kind, status): (OperationKind, StackStatus),
        details: Option<Value>,
    ) -> Result<String, EngineError> {
        let PreparedUpdate {
            stack,
            target,
            nested,
            mut options,
            mut parsed,
            ..
        } = prepared;
        let lease = match self.lease_for_new_operation(&stack).await? {
            Ok(lease) => lease,
            Err(status) => return Err(busy(&stack, status)),
        };
        // Re-check under the lease: another operation may have started and
        // even ended since the stack was read.
        let current = self.current_status(&stack).await?;
        if current != stack.status {
            let _ = self.store.release_lease(&lease).await;
            return Err(moved_on(&stack, current));
        }
        if let Some(cs) = change_set {
            if self.store.event_count(&stack.stack_id).await? as i64 != cs.base_version {
                let _ = self.store.release_lease(&lease).await;
                return Err(EngineError::Validation(format!(
                    "Stack:{} changed while the update was being prepared; try again",
                    stack.stack_id
                )));
            }
        }
        // Continuing a kept failed update: its rows are folded in the
        // write that starts this one (read under the lease: no operation
        // changed them since the stack's status was checked).
        let rows = if options.continues {
            let read = async {
                let rows = self.store.resources(&stack.stack_id).await?;
                let events = self.store.event_count(&stack.stack_id).await?;
                Ok::<_, StoreError>((rows, events))
            };
            match read.await {
                Ok((rows, events)) => {
                    options.events_before = Some(events as u64);
                    kept::rewrite(rows)
                }
                Err(e) => {
                    let _ = self.store.release_lease(&lease).await;
                    return Err(e.into());
                }
            }
        } else {
            Default::default()
        };
        self.started_under(&lease);
        let previous = StackState::of(&stack);
        let operation = OperationRecord {
            stack_id: stack.stack_id.clone(),
            kind,
            options: OperationOptions {
                previous: Some(previous),
                target: Some(target.clone()),
                nested_templates: nested,
                ..options
            }
            .to_value(),
            started_at: now(),
        };
        let mut shown = stack.clone();
        target.apply(&mut shown);
        shown.updated_at = now();
        self.begin_operation(
            &lease,
            operation,
            shown,
            status,
            change_set,
            (details, rows),
        )
        .await?;
        // The operation's load reads the target (and the stack's template
        // it may roll back to) with the same texts and contexts.
        if let Some((target_template, stack_template)) = parsed.take() {
            self.parsed
                .keep(&target.template_body, &target.context, target_template);
            self.parsed
                .keep(&stack.template_body, &stack.context, stack_template);
        }
        Ok(stack.stack_id)
    }

    /// `cairn cancel-update`: asks the update in progress to stop and roll
    /// back. The process running it notices within a poll interval, cancels
    /// the resources in flight ("Resource update cancelled") and rolls back;
    /// if that process is gone, whoever resumes the stack does. Then follow
    /// the stack with [`Engine::run`].
    pub async fn cancel_update(&self, stack_name: &str) -> Result<String, EngineError> {
        self.nested_stacks()
            .refuse_nested_named(stack_name, "cancel the update of")
            .await?;
        let Some(stack) = self.store.find_stack(stack_name).await? else {
            return Err(EngineError::Validation(format!(
                "Stack with id {stack_name} does not exist"
            )));
        };
        let refused = || {
            EngineError::Validation(format!(
                "CancelUpdateStack cannot be called from current stack status: stack {} is {}",
                stack.stack_name, stack.status
            ))
        };
        if stack.status != StackStatus::UpdateInProgress {
            return Err(refused());
        }
        if !self.store.request_cancel(&stack.stack_id).await? {
            return Err(refused());
        }
        Ok(stack.stack_id)
    }

    /// After a crash, the resources an update left in progress are marked
    /// cancelled (their pending calls stay recorded for the rollback).
    async fn mark_interrupted(&self, op: &Op) -> Result<(), EngineError> {
        let rows = self.store.resources(&op.stack.stack_id).await?;
        let names: Vec<&str> = rows
            .iter()
            .filter(|r| r.journal.is_some())
            .filter(|r| {
                matches!(
                    r.status,
                    ResourceStatus::CreateInProgress | ResourceStatus::UpdateInProgress
                )
            })
            .map(|r| r.logical_id.as_str())
            .collect();
        self.steps().mark_cancelled(op, &names).await?;
        Ok(())
    }

    /// `cairn continue-rollback`: resumes an UPDATE_ROLLBACK_FAILED stack.
    /// Resources in `skip` are marked rolled back without a provider call
    /// (their physical resources are left as they are). Then call [`Engine::run`].
    pub async fn start_continue_rollback(
        &self,
        stack_name: &str,
        skip: &[String],
    ) -> Result<String, EngineError> {
        self.nested_stacks()
            .refuse_nested_named(stack_name, "continue the update rollback of")
            .await?;
        self.continue_rollback(stack_name, skip).await
    }

    /// [`Updates::start_continue_rollback`] of any stack, nested ones too.
    /// A skipped `Child.Resource` is skipped by the continued rollback of
    /// the nested stack `Child`, which starts first.
    pub(super) async fn continue_rollback(
        &self,
        stack_name: &str,
        skip: &[String],
    ) -> Result<String, EngineError> {
        let Some(stack) = self.store.find_stack(stack_name).await? else {
            return Err(EngineError::Validation(format!(
                "Stack with id {stack_name} does not exist"
            )));
        };
        if stack.status != StackStatus::UpdateRollbackFailed {
            return Err(EngineError::Validation(format!(
                "Stack:{} is in {} state and can not continue update rollback; only UPDATE_ROLLBACK_FAILED can",
                stack.stack_id, stack.status
            )));
        }
        let rows = self.store.resources(&stack.stack_id).await?;
        // `Child.R`: for the nested stack Child.
        let mut below: Vec<(String, Vec<String>)> = Vec::new();
        for name in skip.iter().filter(|n| n.contains('.')) {
            let (child, rest) = name.split_once('.').unwrap_or((name, ""));
            let nested_row = rows.iter().find(|r| {
                r.logical_id == child
                    && crate::nested::is_stack(self.registry.canonical(&r.resource_type))
                    && matches!(r.journal, Some(Journal::Changed { .. }))
            });
            let Some(row) = nested_row else {
                return Err(EngineError::Validation(format!(
                    "Resource {name} cannot be skipped: {child} is not a nested stack the rollback still has to restore"
                )));
            };
            let child_id = row.physical_id.clone().unwrap_or_default();
            match below.iter_mut().find(|(id, _)| *id == child_id) {
                Some((_, names)) => names.push(rest.to_string()),
                None => below.push((child_id, vec![rest.to_string()])),
            }
        }
        for (child_id, names) in &below {
            Box::pin(self.continue_rollback(child_id, names)).await?;
        }
        let skip: Vec<String> = skip.iter().filter(|n| !n.contains('.')).cloned().collect();
        for name in &skip {
            let ok = rows.iter().any(|r| {
                &r.logical_id == name && matches!(r.journal, Some(Journal::Changed { .. }))
            });
            if !ok {
                return Err(EngineError::Validation(format!(
                    "Resource {name} cannot be skipped: it is not one the rollback still has to restore"
                )));
            }
        }
        let op = self
            .resume_kept_operation(
                &stack,
                OperationKind::ContinueUpdateRollback,
                "the rollback was being continued",
            )
            .await?;
        for mut r in rows.into_iter().filter(|r| skip.contains(&r.logical_id)) {
            let Some(Journal::Changed { before }) = r.journal.clone() else {
                continue;
            };
            let made = r.snapshot();
            let discard = (made.physical_id.is_some() && made.physical_id != before.physical_id)
                .then_some(made);
            r.restore(&before);
            r.status = ResourceStatus::UpdateComplete;
            r.status_reason = Some("Skipped by continue-rollback".into());
            r.journal = Some(Journal::Restored {
                discard: discard.map(Box::new),
            });
            r.updated_at = now();
            if !self.record(&op, &r, Vec::new()).await {
                return Err(StoreError::LeaseLost(stack.stack_id.clone()).into());
            }
        }
        self.set_status(
            &op,
            StackStatus::UpdateRollbackInProgress,
            Some("User Initiated"),
        )
        .await?;
        Ok(stack.stack_id)
    }

    /// Runs an update from whichever phase the stack is in.
    pub(super) async fn drive_update(&self, op: &Op) -> Result<StackStatus, EngineError> {
        match op.stack.status {
            StackStatus::UpdateInProgress => {
                let id = &op.stack.stack_id;
                if self.store.cancel_requested(id).await? {
                    // Cancelled, then crashed before the rollback started.
                    self.mark_interrupted(op).await?;
                    return self.start_update_rollback(op, CANCELLED).await;
                }
                let rows = self.store.resources(id).await?;
                if rows.iter().all(|r| r.journal.is_none()) {
                    let verdict = self.hooks().stack_verdict(op, HookAction::Update).await?;
                    if let Some(refusal) = verdict {
                        return self.fail_update(op, &refusal).await;
                    }
                    if let Some(denial) = self.denied_removal(op, &rows) {
                        return self.fail_update(op, &denial).await;
                    }
                    match self.protocol().check_parameter_values(op).await {
                        Err(reason) => return self.fail_update(op, &reason).await,
                        Ok(warnings) => {
                            for w in warnings {
                                self.set_status(op, StackStatus::UpdateInProgress, Some(&w))
                                    .await?;
                            }
                        }
                    }
                }
                let (created, updated) = self.update_all(op, rows).await?;
                if *op.stops.cancel.borrow() || self.store.cancel_requested(id).await? {
                    return self.start_update_rollback(op, CANCELLED).await;
                }
                if let Some(reason) = self.take_alarm(op) {
                    return self.fail_update(op, &reason).await;
                }
                if created.is_empty() && updated.is_empty() {
                    match self.monitor(op, true).await {
                        Monitored::Quiet => {}
                        Monitored::Alarm(reason) => return self.fail_update(op, &reason).await,
                        Monitored::Cancelled => {
                            return self.start_update_rollback(op, CANCELLED).await
                        }
                    }
                    match self.finish_update(op).await {
                        Ok(()) => {}
                        Err(reason) => return self.fail_update(op, &reason).await,
                    }
                    self.set_status(op, StackStatus::UpdateCompleteCleanupInProgress, None)
                        .await?;
                    self.cleanup_forward(op).await
                } else {
                    self.fail_update(op, &failure_reason(&created, &updated))
                        .await
                }
            }
            StackStatus::UpdateCompleteCleanupInProgress => self.cleanup_forward(op).await,
            StackStatus::UpdateRollbackInProgress => self.rollback_updates(op).await,
            StackStatus::UpdateRollbackCompleteCleanupInProgress => self.cleanup_rollback(op).await,
            other => Err(EngineError::Validation(format!(
                "Stack [{}] is in {other} state, which is not an update phase",
                op.stack.stack_name
            ))),
        }
    }

    /// The stack policy's denial of a resource this update removes, if any
    /// (checked before anything is touched: removals happen in the cleanup,
    /// after which nothing rolls back).
    fn denied_removal(&self, op: &Op, rows: &[ResourceRecord]) -> Option<String> {
        rows.iter()
            .filter(|r| plan::is_live(r) && op.graph.index_of(&r.logical_id).is_none())
            .find_map(|r| op.policy_denies(UpdateAction::Delete, &r.logical_id, &r.resource_type))
    }

    /// Rolls every resource of the new template forward in dependency order.
    /// Returns the logical ids that failed to create and to update.
    /// `rows`: the stack's resources as stored when the phase starts.
    async fn update_all(
        &self,
        op: &Op,
        rows: Vec<ResourceRecord>,
    ) -> Result<(Vec<String>, Vec<String>), EngineError> {
        let stored: HashMap<String, ResourceRecord> = rows
            .into_iter()
            .filter(plan::is_live)
            .map(|r| (r.logical_id.clone(), r))
            .collect();
        let n = op.graph.len();
        let preds: Vec<Vec<usize>> = (0..n).map(|i| op.graph.depends_on(i).to_vec()).collect();
        let mut initial = vec![Outcome::NotRun; n];
        let (mut created, mut updated) = (Vec::new(), Vec::new());
        for (i, slot) in initial.iter_mut().enumerate() {
            let Some(r) = stored.get(op.graph.name(i)) else {
                continue;
            };
            match (r.status, &r.journal) {
                (ResourceStatus::CreateFailed, Some(_)) => created.push(r.logical_id.clone()),
                (ResourceStatus::UpdateFailed, Some(_)) => updated.push(r.logical_id.clone()),
                (ResourceStatus::CreateComplete | ResourceStatus::UpdateComplete, Some(_)) => {
                    *slot = Outcome::Done
                }
                _ => {}
            }
        }
        if !created.is_empty() || !updated.is_empty() {
            // Crashed after a failure was recorded: go straight to rollback.
            return Ok((created, updated));
        }
        let stored = &stored;
        let outcomes = self
            .schedule(
                op,
                &preds,
                initial,
                (true, true),
                ("update", &|i| op.graph.name(i).to_string()),
                |i| async move {
                    let name = op.graph.name(i);
                    let ok = match stored.get(name).cloned() {
                        None => {
                            self.creates()
                                .create_one(op, name, None, Some(Journal::Added))
                                .await
                        }
                        Some(r) if r.journal == Some(Journal::Added) => {
                            self.creates()
                                .create_one(op, name, Some(r), Some(Journal::Added))
                                .await
                        }
                        Some(r) => self.update_one(op, r).await,
                    };
                    (i, ok)
                },
            )
            .await?;
        let cancelled: Vec<&str> = (0..n)
            .filter(|&i| outcomes[i] == Outcome::Cancelled)
            .map(|i| op.graph.name(i))
            .collect();
        self.steps().mark_cancelled(op, &cancelled).await?;
        for r in self.store.resources(&op.stack.stack_id).await? {
            if r.journal.is_none() || op.graph.index_of(&r.logical_id).is_none() {
                continue;
            }
            match r.status {
                ResourceStatus::CreateFailed => created.push(r.logical_id),
                ResourceStatus::UpdateFailed => updated.push(r.logical_id),
                _ => {}
            }
        }
        Ok((created, updated))
    }

    /// Updates one existing resource as its schema decides: nothing, metadata
    /// only, in place, or by replacement.
    async fn update_one(&self, op: &Op, mut rec: ResourceRecord) -> bool {
        if op.aborted.load(Ordering::SeqCst) {
            return false;
        }
        // A call a crash interrupted: re-issue it with the same request id.
        if let (Some(Journal::Changed { before }), Some(p)) =
            (rec.journal.clone(), rec.pending.clone())
        {
            let logical_id = rec.logical_id.clone();
            return match p.call() {
                CallKind::Update => self.steps().update_in_place(op, rec, &before).await,
                // A replacement made and waiting for its signals: the wait
                // goes on.
                CallKind::Signals => {
                    self.steps()
                        .resume_signal_wait(op, &logical_id, rec, REPLACED)
                        .await
                }
                _ => {
                    self.steps()
                        .create(op, rec, Vec::new(), Then::Signals(REPLACED))
                        .await
                }
            };
        }
        // An adopted resource (HOT's external_id) keeps its id and is
        // never updated (the planner refused a new id).
        if op
            .template
            .resource(&rec.logical_id)
            .is_some_and(|r| r.external_id.is_some())
        {
            return true;
        }
        let evaluated = self
            .protocol()
            .properties_for(op, &rec.logical_id)
            .and_then(|(_, p)| Ok((p, self.protocol().metadata_for(op, &rec.logical_id)?)));
        let (props, metadata) = match evaluated {
            Ok(v) => v,
            Err(reason) => {
                rec.journal = Some(Journal::Changed {
                    before: Box::new(rec.snapshot()),
                });
                rec.status = ResourceStatus::UpdateFailed;
                rec.status_reason = Some(reason);
                rec.updated_at = now();
                self.record(op, &rec, Vec::new()).await;
                return false;
            }
        };
        // A HOT resource whose type changed is replaced by one of the new
        // type (the old one is deleted by its own type's provider in the
        // cleanup: the journal's `before` keeps its type).
        let new_type = op
            .template
            .resource(&rec.logical_id)
            .map(|r| r.type_name.clone())
            .filter(|t| self.registry.canonical(t) != self.registry.canonical(&rec.resource_type));
        // The registered version it is updated with: its own, or the one
        // the update moves its type to (decided with that version's
        // schema, as the plan was).
        let canonical = self.registry.canonical(&rec.resource_type).to_string();
        let versions = op.type_versions();
        let target_version = match &new_type {
            Some(t) => op.new_type_version(&self.registry, t),
            None => versions.target(&canonical, &rec).map(String::from),
        };
        let moves = new_type.is_none() && versions.moves(&canonical, &rec).is_some();
        let found = self
            .registry
            .schema_of_version(&rec.resource_type, target_version.as_deref());
        let schema = found.as_deref();
        let replaced_on_update = op
            .template
            .resource(&rec.logical_id)
            .is_some_and(|r| r.replace_on_update);
        // A new type, or one replaced on every update (Heat's
        // UpdateWaitConditionHandle), as the plan decided.
        let decision = if new_type.is_some() || replaced_on_update {
            Decision::Replace {
                changed: plan::changed_properties(&rec.properties, &props),
            }
        } else {
            plan::decide(
                schema,
                &rec.properties,
                &props,
                rec.metadata.as_ref(),
                metadata.as_ref(),
            )
        };
        let before = rec.snapshot();
        // An UpdatePolicy change alone is recorded like a Metadata change.
        let decision = match decision {
            // A move to another version of its type is an update by the
            // version it moves to, its properties unchanged.
            Decision::NoChange | Decision::MetadataOnly if moves => Decision::InPlace {
                changed: Vec::new(),
            },
            Decision::NoChange if self.update_policy_changed(op, &rec.logical_id) => {
                Decision::MetadataOnly
            }
            // New stack tags reach a provider that applies them.
            Decision::NoChange if self.tags_change(op) && self.taggable(&rec.resource_type) => {
                Decision::InPlace {
                    changed: Vec::new(),
                }
            }
            d => d,
        };
        let action = match &decision {
            Decision::MetadataOnly | Decision::InPlace { .. } => Some(UpdateAction::Modify),
            Decision::Replace { .. } => Some(UpdateAction::Replace),
            Decision::NoChange | Decision::Unsupported { .. } => None,
        };
        if let Some(denial) =
            action.and_then(|a| op.policy_denies(a, &rec.logical_id, &rec.resource_type))
        {
            // Refused before the resource is touched: nothing to undo.
            rec.journal = Some(Journal::Changed {
                before: Box::new(before),
            });
            rec.status = ResourceStatus::UpdateFailed;
            rec.status_reason = Some(denial);
            rec.updated_at = now();
            self.record(op, &rec, Vec::new()).await;
            return false;
        }
        match decision {
            Decision::NoChange => true,
            Decision::MetadataOnly => {
                rec.journal = Some(Journal::Changed {
                    before: Box::new(before),
                });
                rec.metadata = metadata;
                rec.status = ResourceStatus::UpdateComplete;
                rec.status_reason = None;
                rec.updated_at = now();
                self.record(op, &rec, Vec::new()).await
            }
            Decision::Unsupported { property } => {
                rec.journal = Some(Journal::Changed {
                    before: Box::new(before),
                });
                rec.status = ResourceStatus::UpdateFailed;
                let refusal = schema
                    .and_then(|s| s.properties.get(&property).and_then(|p| p.refusal.clone()));
                rec.status_reason = Some(refusal.unwrap_or_else(|| {
                    format!(
                        "Update of property {property} of type {} is not supported",
                        rec.resource_type
                    )
                }));
                rec.updated_at = now();
                self.record(op, &rec, Vec::new()).await;
                false
            }
            Decision::InPlace { .. } => {
                rec.journal = Some(Journal::Changed {
                    before: Box::new(before.clone()),
                });
                rec.properties = props;
                rec.metadata = metadata;
                rec.type_version = target_version;
                rec.status = ResourceStatus::UpdateInProgress;
                rec.status_reason = None;
                rec.pending = None;
                self.steps().update_in_place(op, rec, &before).await
            }
            Decision::Replace { .. } => {
                rec.journal = Some(Journal::Changed {
                    before: Box::new(before),
                });
                if let Some(t) = new_type {
                    rec.resource_type = t;
                }
                rec.type_version = target_version;
                rec.properties = props;
                rec.metadata = metadata;
                rec.physical_id = None;
                rec.attributes = Map::new();
                rec.status = ResourceStatus::UpdateInProgress;
                rec.status_reason = Some(REPLACING.into());
                rec.updated_at = now();
                let first = vec![op.resource_event(&rec)];
                rec.status_reason = Some("Resource creation Initiated".into());
                rec.pending = None;
                // A new handle forgets the signals of the old one (Heat's
                // UpdateWaitConditionHandle); a replaced wait waits anew.
                if let Err(reason) = self.signals().new_life(op, &rec.logical_id).await {
                    rec.status = ResourceStatus::UpdateFailed;
                    rec.status_reason = Some(reason);
                    self.record(op, &rec, first).await;
                    return false;
                }
                self.steps()
                    .create(op, rec, first, Then::Signals(REPLACED))
                    .await
            }
        }
    }

    /// The changes of an update that changes the stack's tags: every live
    /// resource whose provider applies them (`taggable`) and that nothing
    /// else changes is modified in place, its tags only (CloudFormation's
    /// Scope `Tags`).
    fn retagged(
        &self,
        rows: &[ResourceRecord],
        graph: &Graph,
        changes: &[plan::ResourceChange],
    ) -> Vec<plan::ResourceChange> {
        rows.iter()
            .filter(|r| plan::is_live(r) && graph.index_of(&r.logical_id).is_some())
            .filter(|r| {
                !changes
                    .iter()
                    .any(|c| c.logical_resource_id == r.logical_id)
            })
            .filter(|r| self.taggable(&r.resource_type))
            .map(|r| plan::ResourceChange {
                action: "Modify".into(),
                logical_resource_id: r.logical_id.clone(),
                physical_resource_id: r.physical_id.clone(),
                resource_type: r.resource_type.clone(),
                replacement: Some("False".into()),
                scope: vec!["Tags".into()],
                details: vec![plan::ChangeDetail {
                    target: plan::ChangeTarget {
                        values: None,
                        attribute: "Tags".into(),
                        name: None,
                        requires_recreation: "Never".into(),
                    },
                    evaluation: "Static".into(),
                    change_source: "DirectModification".into(),
                    causing_entity: None,
                }],
            })
            .collect()
    }

    /// Whether `type_name`'s provider applies the stack's tags.
    fn taggable(&self, type_name: &str) -> bool {
        self.registry.schema(type_name).is_some_and(|s| s.taggable)
    }

    /// Whether the running update changes the stack's tags.
    fn tags_change(&self, op: &Op) -> bool {
        op.other().is_some_and(|o| o.state.tags != op.stack.tags)
    }

    /// Whether the resource's UpdatePolicy differs from the other template's
    /// (compared as written, like the preview does).
    fn update_policy_changed(&self, op: &Op, logical_id: &str) -> bool {
        let Some(other) = op.other() else {
            return false;
        };
        let policy = |t: &crate::template::Template| {
            t.resource(logical_id).and_then(|r| r.update_policy.clone())
        };
        other.template.resource(logical_id).is_some()
            && policy(&op.template) != policy(&other.template)
    }

    /// Outputs and exports of the new template. An export other stacks import
    /// may not change or disappear.
    async fn finish_update(&self, op: &Op) -> Result<(), String> {
        let before: HashMap<String, String> = op
            .other()
            .map(|o| {
                o.state
                    .outputs
                    .iter()
                    .filter_map(|x| Some((x.export_name.clone()?, x.output_value.clone()?)))
                    .collect()
            })
            .unwrap_or_default();
        let outputs = self.creates().evaluate_outputs(op)?;
        for (name, value) in &before {
            let now_value = outputs
                .iter()
                .find(|o| o.export_name.as_deref() == Some(name.as_str()))
                .and_then(|o| o.output_value.as_ref());
            if now_value == Some(value) {
                continue;
            }
            let users: Vec<String> = self
                .store
                .importers(name)
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|u| *u != op.stack.stack_name)
                .collect();
            if !users.is_empty() {
                return Err(format!(
                    "Cannot update export {name} as it is in use by {}",
                    users.join(", ")
                ));
            }
        }
        self.creates().publish_outputs(op, outputs).await
    }

    pub(super) async fn start_update_rollback(
        &self,
        op: &Op,
        reason: &str,
    ) -> Result<StackStatus, EngineError> {
        op.stops.triggers_done.store(true, Ordering::SeqCst);
        // From here on the stack shows the template being restored (seed 004).
        if let Some(other) = op.other() {
            let mut stack = op.stack.clone();
            other.state.apply(&mut stack);
            stack.updated_at = now();
            self.store.save_stack(&op.lease, &stack).await?;
        }
        self.set_status(op, StackStatus::UpdateRollbackInProgress, Some(reason))
            .await?;
        // The rollback phases work on the restored template: reload.
        let stack = self
            .store
            .find_stack(&op.stack.stack_id)
            .await?
            .ok_or_else(|| StoreError::NoSuchStack(op.stack.stack_id.clone()))?;
        let rolled = self.load(&stack, op.lease.clone()).await?;
        self.rollback_updates(&rolled).await
    }

    /// UPDATE_ROLLBACK_IN_PROGRESS: every resource the update changed goes
    /// back, in reverse dependency order of the abandoned template.
    async fn rollback_updates(&self, op: &Op) -> Result<StackStatus, EngineError> {
        let rows: Vec<ResourceRecord> = self
            .store
            .resources(&op.stack.stack_id)
            .await?
            .into_iter()
            .filter(|r| matches!(r.journal, Some(Journal::Changed { .. })))
            .collect();
        let names: Vec<&str> = rows.iter().map(|r| r.logical_id.as_str()).collect();
        let order = self.reverse_order(op, &names);
        let rows_ref = &rows;
        let outcomes = self
            .schedule(
                op,
                &order,
                vec![Outcome::NotRun; rows.len()],
                (false, false),
                ("roll back", &|i| rows_ref[i].logical_id.clone()),
                |i| async move { (i, self.rollback_one(op, rows_ref[i].clone()).await) },
            )
            .await?;
        // The ones whose rollback failed are named; those it never reached
        // (they waited on a failed one) are counted.
        let failed: Vec<String> = rows
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| **o == Outcome::Failed)
            .map(|(r, _)| r.logical_id.clone())
            .collect();
        let not_reached = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::NotRun | Outcome::Cancelled))
            .count();
        if !failed.is_empty() || not_reached > 0 {
            let mut reason = failure_reason(&[], &failed);
            if not_reached > 0 {
                if !reason.is_empty() {
                    reason.push(' ');
                }
                reason.push_str(&format!(
                    "{not_reached} other resource(s) were not rolled back."
                ));
            }
            return self
                .set_status(op, StackStatus::UpdateRollbackFailed, Some(&reason))
                .await;
        }
        self.set_status(
            op,
            StackStatus::UpdateRollbackCompleteCleanupInProgress,
            None,
        )
        .await?;
        self.cleanup_rollback(op).await
    }

    /// Puts one resource back: a replaced one gets its original physical
    /// resource back (the new one is deleted in cleanup); one updated in place
    /// is updated back, the provider receiving properties = OLD and old
    /// properties = NEW.
    async fn rollback_one(&self, op: &Op, mut rec: ResourceRecord) -> bool {
        let Some(Journal::Changed { before }) = rec.journal.clone() else {
            return true;
        };
        let replaced = rec.physical_id != before.physical_id;
        if replaced {
            let made = rec.snapshot();
            let discard = (made.physical_id.is_some()
                || made
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.action == CallKind::Create))
            .then_some(made);
            rec.restore(&before);
            rec.status = ResourceStatus::UpdateComplete;
            rec.status_reason = None;
            rec.journal = Some(Journal::Restored {
                discard: discard.map(Box::new),
            });
            rec.updated_at = now();
            return self.record(op, &rec, Vec::new()).await;
        }
        self.steps().roll_back_in_place(op, rec, &before).await
    }

    /// UPDATE_COMPLETE_CLEANUP_IN_PROGRESS: removed resources and the old
    /// physical resources of replacements are deleted, in reverse dependency
    /// order of the template they were made from.
    async fn cleanup_forward(&self, op: &Op) -> Result<StackStatus, EngineError> {
        // A nested stack cleans up only once its ancestors succeeded; when
        // one of them rolls back, it rolls back too.
        if self.nested_stacks().ancestors_roll_back(op).await? {
            return self.start_update_rollback(op, ANCESTOR_ROLLED_BACK).await;
        }
        // The children's cleanups run before this stack's own.
        self.nested_stacks().settle_children(op).await?;
        let rows = self.store.resources(&op.stack.stack_id).await?;
        let mut victims = Vec::new();
        for r in &rows {
            if op.graph.index_of(&r.logical_id).is_none() {
                let retain = op.other().is_some_and(|o| {
                    self.policy_retains(
                        op,
                        o,
                        &r.logical_id,
                        protocol::Policy::Deletion,
                        protocol::Removal::Delete,
                    )
                });
                victims.push(Victim {
                    logical_id: r.logical_id.clone(),
                    target: r.snapshot(),
                    owner: VictimOf::Row(Box::new(r.clone())),
                    retain,
                });
            } else if let Some(Journal::Changed { before }) = &r.journal {
                if before.physical_id.is_some() && before.physical_id != r.physical_id {
                    victims.push(Victim {
                        logical_id: r.logical_id.clone(),
                        target: (**before).clone(),
                        owner: VictimOf::Kept(Box::new(r.clone())),
                        retain: retains_on_replace(op, &r.logical_id),
                    });
                }
            }
        }
        victims.extend(self.superseded_victims(op).await?);
        let lost = self.delete_victims(op, victims).await?;
        self.store.clear_journals(&op.lease).await?;
        let reason = (!lost.is_empty())
            .then_some("Update successful. One or more resources could not be deleted.");
        self.set_status(op, StackStatus::UpdateComplete, reason)
            .await
    }

    /// UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS: what the update created
    /// (added resources, new physical resources of replacements) is deleted;
    /// the previous outputs and exports come back.
    async fn cleanup_rollback(&self, op: &Op) -> Result<StackStatus, EngineError> {
        self.nested_stacks().settle_children(op).await?;
        let rows = self.store.resources(&op.stack.stack_id).await?;
        let mut victims = Vec::new();
        for r in &rows {
            match &r.journal {
                // The update made it: its DeletionPolicy in the update's
                // template decides (RetainExceptOnCreate deletes it).
                Some(Journal::Added) => victims.push(Victim {
                    logical_id: r.logical_id.clone(),
                    target: r.snapshot(),
                    owner: VictimOf::Row(Box::new(r.clone())),
                    retain: op.other().is_some_and(|o| {
                        self.policy_retains(
                            op,
                            o,
                            &r.logical_id,
                            protocol::Policy::Deletion,
                            protocol::Removal::RollbackOfCreate,
                        )
                    }),
                }),
                Some(Journal::Restored { discard: Some(d) }) => victims.push(Victim {
                    logical_id: r.logical_id.clone(),
                    target: (**d).clone(),
                    owner: VictimOf::Kept(Box::new(r.clone())),
                    retain: false,
                }),
                _ => {}
            }
        }
        victims.extend(self.superseded_victims(op).await?);
        let lost = self.delete_victims(op, victims).await?;
        let exports: Vec<(String, String)> = op
            .state
            .outputs
            .iter()
            .filter_map(|o| Some((o.export_name.clone()?, o.output_value.clone()?)))
            .collect();
        self.store.put_exports(&op.lease, &exports).await?;
        // A victim whose create's outcome could not be learnt is still
        // journaled: the rollback fails and keeps it, so continue-rollback
        // or a delete asks again (unknown never forgets).
        let unknown: Vec<String> = self
            .store
            .resources(&op.stack.stack_id)
            .await?
            .into_iter()
            .filter(|r| {
                matches!(
                    r.journal,
                    Some(Journal::Added) | Some(Journal::Restored { discard: Some(_) })
                )
            })
            .map(|r| r.logical_id)
            .collect();
        if !unknown.is_empty() {
            let reason = format!(
                "The following resource(s) failed to delete: [{}]. ",
                unknown.join(", ")
            );
            return self
                .set_status(op, StackStatus::UpdateRollbackFailed, Some(&reason))
                .await;
        }
        self.store.clear_journals(&op.lease).await?;
        let reason = (!lost.is_empty())
            .then_some("Update successful. One or more resources could not be deleted.");
        self.set_status(op, StackStatus::UpdateRollbackComplete, reason)
            .await
    }

    /// Whether `logical_id`'s `policy` in the update's other template
    /// keeps its physical resource.
    pub(super) fn policy_retains(
        &self,
        op: &Op,
        other: &Other,
        logical_id: &str,
        policy: protocol::Policy,
        removal: protocol::Removal,
    ) -> bool {
        let ev = Evaluator::with_conditions(
            &other.template,
            &other.params,
            &op.sctx,
            &op.results,
            other.conditions.clone(),
        );
        protocol::retained(&ev, &other.template, logical_id, policy, removal)
    }

    /// For each name, the indices that must finish first: a resource goes
    /// after everything that depends on it in the graph of the template that
    /// made its physical resource. Cleanup and rollback always undo the work of
    /// the update's other template: the previous one (forward cleanup) or the
    /// abandoned one (rollback).
    fn reverse_order(&self, op: &Op, names: &[&str]) -> Vec<Vec<usize>> {
        let graph = op.other().map(|o| &o.graph);
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut preds = vec![Vec::new(); names.len()];
        let Some(g) = graph else {
            return preds;
        };
        for (i, n) in names.iter().enumerate() {
            if let Some(gi) = g.index_of(n) {
                for &d in g.dependents(gi) {
                    if let Some(&j) = index.get(g.name(d)) {
                        if j != i {
                            preds[i].push(j);
                        }
                    }
                }
            }
        }
        preds
    }

    /// Deletes victims in reverse dependency order, each with retries.
    /// Returns the logical ids that could not be deleted and were disassociated.
    async fn delete_victims(
        &self,
        op: &Op,
        victims: Vec<Victim>,
    ) -> Result<Vec<String>, EngineError> {
        let names: Vec<&str> = victims.iter().map(|v| v.logical_id.as_str()).collect();
        let preds = self.reverse_order(op, &names);
        let victims_ref = &victims;
        let outcomes = self
            .schedule(
                op,
                &preds,
                vec![Outcome::NotRun; victims.len()],
                (false, false),
                ("clean up", &|i| victims_ref[i].logical_id.clone()),
                |i| async move {
                    let v = victims_ref[i].clone();
                    (i, self.steps().delete_victim(op, v).await)
                },
            )
            .await?;
        Ok(victims
            .iter()
            .zip(outcomes)
            .filter(|(_, o)| *o != Outcome::Done)
            .map(|(v, _)| v.logical_id.clone())
            .collect())
    }

    /// The physical resources a kept failed update left that this
    /// operation deletes in its cleanup (whichever way it ends).
    async fn superseded_victims(&self, op: &Op) -> Result<Vec<Victim>, EngineError> {
        Ok(self
            .superseded(op)
            .await?
            .into_iter()
            .map(|s| Victim {
                logical_id: s.logical_id,
                target: s.target,
                owner: VictimOf::Superseded,
                retain: false,
            })
            .collect())
    }
}

/// CloudFormation's answer to a second update of a busy stack.
fn busy(stack: &StackRecord, status: StackStatus) -> EngineError {
    EngineError::Validation(format!(
        "Stack:{} is in {} state and can not be updated.",
        stack.stack_id, status
    ))
}

/// The answer when `stack` is no longer in the status the update was
/// prepared against: busy while another operation runs, else stale.
fn moved_on(stack: &StackRecord, current: StackStatus) -> EngineError {
    if current.is_in_progress() {
        busy(stack, current)
    } else {
        EngineError::Validation(format!(
            "Stack:{} changed while the update was being prepared (it is {current} now); try again",
            stack.stack_id
        ))
    }
}

/// Whether the template's UpdateReplacePolicy keeps the physical
/// resource a replacement leaves behind.
pub(super) fn retains_on_replace(op: &Op, logical_id: &str) -> bool {
    protocol::retained(
        &op.evaluator(),
        &op.template,
        logical_id,
        protocol::Policy::UpdateReplace,
        protocol::Removal::Delete,
    )
}
