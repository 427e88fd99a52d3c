//! The stack engine: runs create, delete and rollback operations with
//! CloudFormation's statuses and events, independent resources in parallel,
//! every transition committed before the next provider call, and crashed
//! operations resumed from what the store recorded.
//!
//! An operation is: a synchronous part (parse, evaluate, validate, record the
//! stack and take its lease) done by `start_*`, then [`Engine::run`], which
//! drives the stack to a terminal status. `run` is also how a crashed operation
//! is resumed: it reads where the stack is from the store.

mod changeset;
mod dag;
pub mod drift;
mod group;
pub mod nested;
mod parameter_values;
mod protocol;
mod reconcile;
mod resolve;
mod served;
pub mod signals;
#[cfg(test)]
pub(crate) mod sim;
mod update;

pub use changeset::{changes_json, ChangeSetType, CreateChangeSetInput, NO_CHANGES};
pub use reconcile::{ReconcileFlags, ReconcileInput, ReconcilePlan};
pub use update::{ParameterInput, UpdateStackInput};

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cairn_sdk::{CreateResult, ErrorKind, ProviderError, RequestContext};
use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::graph::Graph;
use crate::registry::Registry;
use crate::shared::Shared;
use crate::stack::{
    now, CallKind, EventRecord, HistoryRecord, Journal, OnFailure, OperationKind, OutputRecord,
    ResourceRecord, ResourceStatus, StackRecord, StackStatus, STACK_TYPE,
};
use crate::store::{Lease, OperationRecord, Store, StoreError};
use crate::template::eval::{Evaluated, Evaluator, StackContext};
use crate::template::parameters::{ParameterValues, MASK};
use crate::template::source::child;
use crate::template::{Template, TemplateError};
use crate::validate;
use dag::Outcome;
pub(crate) use protocol::Attempt;
use protocol::Learned;
use resolve::Results;

/// CloudFormation's stack status reason (the start of it) when a create
/// runs past its TimeoutInMinutes.
const TIMED_OUT: &str = "Stack creation time exceeded the specified timeout. ";

/// When an operation's TimeoutInMinutes (counted from its start) runs out.
fn operation_deadline(operation: Option<&OperationRecord>) -> Option<std::time::SystemTime> {
    let o = operation?;
    let minutes = o.options.get(TIMEOUT_OPTION)?.as_u64()?;
    let started: jiff::Timestamp = o.started_at.parse().ok()?;
    let started = std::time::SystemTime::from(started);
    Some(started + Duration::from_secs(minutes * 60))
}

/// The operation option that holds a create's `TimeoutInMinutes`.
const TIMEOUT_OPTION: &str = "TimeoutInMinutes";

/// How often a running update looks for a cancel request.
const CANCEL_POLL: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    Template(#[from] TemplateError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Validation(String),
    /// The change set named does not exist (the API's `ChangeSetNotFound`).
    #[error("{0}")]
    ChangeSetNotFound(String),
    /// The change set cannot do that in its status (the API's
    /// `InvalidChangeSetStatus`).
    #[error("{0}")]
    InvalidChangeSetStatus(String),
}

/// What `cairn deploy` asks for when the stack does not exist.
#[derive(Debug, Clone)]
pub struct CreateStackInput {
    pub stack_name: String,
    pub template_body: String,
    pub parameters: BTreeMap<String, String>,
    pub on_failure: OnFailure,
    pub tags: Vec<crate::stack::Tag>,
    /// `TimeoutInMinutes`: the create fails when it has not finished by then.
    pub timeout_minutes: Option<u32>,
    /// Where the template came from: its nested stacks' TemplateURLs are
    /// read from there.
    pub origin: crate::nested::Origin,
    /// HOT's files and environment.
    pub context: crate::stack::TemplateContext,
}

/// How CloudFormation shows a value read from a NoEcho custom resource.
const NO_ECHO_ATTRIBUTE_MASK: &str = "*****";

/// One operation in progress, everything derived from the stored stack.
struct Op {
    stack: StackRecord,
    template: Template,
    params: ParameterValues,
    sctx: StackContext,
    conditions: HashMap<String, bool>,
    graph: Graph,
    results: Results,
    lease: Lease,
    /// Set when the lease is lost: stop touching anything.
    aborted: AtomicBool,
    /// Set when `cairn cancel-update` asked the running update to stop.
    cancel: tokio::sync::watch::Sender<bool>,
    /// When the operation's TimeoutInMinutes runs out, if it has one.
    deadline: Option<std::time::SystemTime>,
    /// Set when the deadline stopped the work.
    timed_out: AtomicBool,
    /// The nested templates this operation's stack resources use.
    nested: crate::nested::NestedTemplates,
    /// The template digests recorded for its nested stack resources.
    recorded_digests: HashMap<String, Value>,
    /// The stack fields this operation shows (for an update: the template it
    /// rolls forward to, or back to).
    state: update::StackState,
    /// An update's other template (the one it left, or during rollback the
    /// one it abandoned).
    other: Option<update::Other>,
    /// The last step each resource reported (status, reason, physical id),
    /// from its row when the operation was loaded: an operation resumed
    /// after a crash or a takeover does not report a step in progress a
    /// second time, as CloudFormation never shows one twice.
    reported: std::sync::Mutex<HashMap<String, Reported>>,
}

/// A resource's last reported step: status, reason, physical id.
type Reported = (ResourceStatus, Option<String>, Option<String>);

impl Op {
    fn evaluator(&self) -> Evaluator<'_> {
        Evaluator::with_conditions(
            &self.template,
            &self.params,
            &self.sctx,
            &self.results,
            self.conditions.clone(),
        )
    }

    /// Replaces NoEcho parameter values in text shown to people.
    fn mask(&self, text: String) -> String {
        let mut t = text;
        for name in &self.params.no_echo {
            if let Some(v) = self.params.raw.get(name).filter(|v| !v.is_empty()) {
                t = t.replace(v.as_str(), MASK);
            }
        }
        // A NoEcho custom resource's Data: CloudFormation shows it as *****.
        self.results.mask_secrets(t, NO_ECHO_ATTRIBUTE_MASK)
    }

    fn stack_event(&self, status: StackStatus, reason: Option<&str>) -> EventRecord {
        stack_event(&self.stack, status, reason, &now())
    }

    fn resource_event(&self, r: &ResourceRecord) -> EventRecord {
        EventRecord {
            event_id: uuid::Uuid::new_v4().to_string(),
            stack_id: r.stack_id.clone(),
            stack_name: self.stack.stack_name.clone(),
            logical_id: r.logical_id.clone(),
            physical_id: r.physical_id.clone().unwrap_or_default(),
            resource_type: r.resource_type.clone(),
            timestamp: r.updated_at.clone(),
            status: r.status.as_str().into(),
            status_reason: r.status_reason.clone(),
            properties: Some(self.mask(Value::Object(r.properties.clone()).to_string())),
        }
    }
}

/// The stack's own event for a status change.
fn stack_event(
    stack: &StackRecord,
    status: StackStatus,
    reason: Option<&str>,
    at: &str,
) -> EventRecord {
    EventRecord {
        event_id: uuid::Uuid::new_v4().to_string(),
        stack_id: stack.stack_id.clone(),
        stack_name: stack.stack_name.clone(),
        logical_id: stack.stack_name.clone(),
        physical_id: stack.stack_id.clone(),
        resource_type: STACK_TYPE.into(),
        timestamp: at.to_string(),
        status: status.as_str().into(),
        status_reason: reason.map(str::to_string),
        properties: None,
    }
}

fn stack_context(config: &Config, stack_name: &str, stack_id: &str) -> StackContext {
    let uuid = stack_id.rsplit('/').next().unwrap_or_default();
    let id = &config.identity;
    let mut c = StackContext::new(stack_name, uuid, &id.region, &id.account_id);
    c.stack_id = stack_id.to_string();
    c.partition = id.partition.clone();
    c.url_suffix = id.url_suffix.clone();
    c.availability_zones = id.availability_zones.clone();
    c
}

fn valid_stack_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 128
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// How many resumes in a row may record nothing before the operation is
/// marked failed (see [`Engine::resume_abandoned`]).
const RESUMES_WITHOUT_PROGRESS: u32 = 2;

/// `host:pid` of this process, the owner written into leases.
fn this_owner() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// The `host:pid` process part of a lease owner (`host:pid:operation`, or
/// the `host:pid` of older state files).
fn owner_process(owner: &str) -> &str {
    match owner.match_indices(':').nth(1) {
        Some((i, _)) => &owner[..i],
        None => owner,
    }
}

/// Whether the owner of a lease is a process on this host that no longer runs.
fn owner_is_dead(owner: &str) -> bool {
    let here = this_owner();
    let (Some((host, pid)), Some((my_host, _))) =
        (owner_process(owner).split_once(':'), here.split_once(':'))
    else {
        return false;
    };
    host == my_host && cfg!(target_os = "linux") && !process_alive(pid)
}

/// Whether process `pid` of this host runs. A zombie (killed, not yet
/// reaped by its parent) does not: it holds nothing and never writes again.
fn process_alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) state …`: comm may hold spaces, the state follows
        // the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_none_or(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

pub struct Engine {
    store: Arc<dyn Store>,
    registry: Arc<Registry>,
    config: Config,
    /// `host:pid` of this process; each operation's lease owner is this
    /// plus an id of its own ([`Engine::operation_owner`]), so two requests
    /// served by one process can never both hold a stack.
    owner: String,
    /// Operations this process started and has not run yet: stack id →
    /// the lease [`Engine::run`] continues under.
    started: std::sync::Mutex<HashMap<String, Lease>>,
    /// This engine, for the tasks that run nested stacks.
    me: std::sync::Weak<Engine>,
    /// What this process's engines share: counters, the callback listener.
    shared: Shared,
}

impl Engine {
    /// An engine over `store` with the types of `registry`; `shared` is
    /// the process's (the one its registry was assembled with).
    pub fn new(
        store: Arc<dyn Store>,
        registry: Arc<Registry>,
        config: Config,
        shared: Shared,
    ) -> Arc<Engine> {
        Arc::new_cyclic(|me| Engine {
            store,
            registry,
            config,
            shared,
            owner: this_owner(),
            started: std::sync::Mutex::new(HashMap::new()),
            me: me.clone(),
        })
    }

    /// A lease owner for one new operation of this process.
    fn operation_owner(&self) -> String {
        format!("{}:{}", self.owner, uuid::Uuid::new_v4().simple())
    }

    /// Remembers that this process started the operation on `stack_id`
    /// under `lease`, so that [`Engine::run`] continues it under the same
    /// owner instead of waiting for it.
    fn started_under(&self, lease: &Lease) {
        if let Ok(mut started) = self.started.lock() {
            started.insert(lease.stack_id.clone(), lease.clone());
        }
    }

    /// Hands an operation this process started but will not run (a server
    /// at its `max_operations`) to whichever engine sharing the state has
    /// room: its lease is released, so the next claim takes it.
    pub async fn hand_off(&self, stack_id: &str) -> Result<(), EngineError> {
        let lease = self
            .started
            .lock()
            .ok()
            .and_then(|mut s| s.remove(stack_id));
        if let Some(lease) = lease {
            self.store
                .hand_off_lease(&lease, self.lease_ttl_ms())
                .await?;
        }
        Ok(())
    }

    /// How long a lease lasts unless renewed (`[engine] lease_seconds`).
    fn lease_ttl_ms(&self) -> i64 {
        (self.config.engine.lease_seconds.max(1) as i64).saturating_mul(1000)
    }

    /// Between two looks at the kept signals (`[engine] signal_poll_ms`).
    fn signal_poll(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.config.engine.signal_poll_ms.max(1))
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// This engine's id (`host:pid`), the process part of its lease owners.
    pub fn id(&self) -> &str {
        &self.owner
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// What this engine shares with the process: its counters (a server's
    /// `/metrics`) and its callback listener (a server hosts it).
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    async fn exports_map(&self) -> Result<HashMap<String, String>, StoreError> {
        Ok(self
            .store
            .exports()
            .await?
            .into_iter()
            .map(|(n, v, _)| (n, v))
            .collect())
    }

    /// Everything that needs no provider output, checked before the stack is
    /// recorded: template, parameters, conditions, graph, types, attributes,
    /// and the properties and outputs that are already known.
    fn prepare(
        &self,
        template: &Template,
        params: &ParameterValues,
        sctx: &StackContext,
        exports: HashMap<String, String>,
    ) -> Result<(HashMap<String, bool>, Graph), TemplateError> {
        static_pass(&self.registry, template, params, sctx, exports, false)
            .map_err(|mut errors| errors.swap_remove(0))
    }

    fn new_stack_id(&self, stack_name: &str) -> String {
        format!(
            "arn:aws:cloudformation:{}:{}:stack/{}/{}",
            self.config.identity.region,
            self.config.identity.account_id,
            stack_name,
            uuid::Uuid::new_v4()
        )
    }

    /// The synchronous part of a create: validates everything, records the stack
    /// in CREATE_IN_PROGRESS and takes its lease. Returns the stack id; then call
    /// [`Engine::run`].
    pub async fn start_create(&self, input: &CreateStackInput) -> Result<String, EngineError> {
        self.create_stack(input, None).await
    }

    /// [`Engine::start_create`], for a root stack (`child: None`: its nested
    /// templates are read now) or a nested one (its parent, and the nested
    /// templates its own children use).
    pub(super) async fn create_stack(
        &self,
        input: &CreateStackInput,
        child: Option<(&StackRecord, crate::nested::NestedTemplates)>,
    ) -> Result<String, EngineError> {
        if !valid_stack_name(&input.stack_name) {
            return Err(EngineError::Validation(format!(
                "1 validation error detected: Value '{}' at 'stackName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z][-a-zA-Z0-9]* and have length less than or equal to 128",
                input.stack_name
            )));
        }
        if self.store.find_stack(&input.stack_name).await?.is_some() {
            return Err(StoreError::StackExists(input.stack_name.clone()).into());
        }
        let context = input
            .context
            .clone()
            .for_template(&input.template_body, &input.parameters);
        let template = Template::parse_with(&input.template_body, &context)?;
        let params = ParameterValues::resolve(&template.parameters, &input.parameters)?;
        let stack_id = self.new_stack_id(&input.stack_name);
        let sctx = stack_context(&self.config, &input.stack_name, &stack_id);
        self.prepare(&template, &params, &sctx, self.exports_map().await?)?;
        let (parent, nested) = match child {
            Some((parent, nested)) => (Some(parent), nested),
            None => (
                None,
                crate::nested::collect(
                    &self.config.nested,
                    self.shared.https.as_ref(),
                    &self.registry,
                    &template,
                    &crate::nested::Origin {
                        context: context.for_child(),
                        ..input.origin.clone()
                    },
                )
                .await?,
            ),
        };

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
            options: {
                let mut o = Map::new();
                if let Some(t) = input.timeout_minutes {
                    o.insert(TIMEOUT_OPTION.into(), json!(t));
                }
                if !nested.is_empty() {
                    o.insert(crate::nested::OPTION.into(), json!(nested));
                }
                Value::Object(o)
            },
            started_at: ts,
        };
        // The operation's record is written with the stack: a crash right
        // after cannot lose its timeout or its nested templates.
        let lease = self
            .store
            .insert_stack(
                &stack,
                &first,
                Some(&operation),
                &self.operation_owner(),
                self.lease_ttl_ms(),
            )
            .await?;
        self.started_under(&lease);
        self.open_history(&lease, &stack, OperationKind::Create, None)
            .await?;
        Ok(stack_id)
    }

    /// The synchronous part of a delete. `Ok(None)`: nothing to delete (the
    /// stack does not exist or is already deleted), which is not an error.
    pub async fn start_delete(
        &self,
        name_or_id: &str,
        retain: &[String],
    ) -> Result<Option<String>, EngineError> {
        if let Some(stack) = self.store.find_stack(name_or_id).await? {
            if stack.status != StackStatus::DeleteComplete {
                self.refuse_nested(&stack, "delete").await?;
            }
        }
        self.delete_stack(name_or_id, retain).await
    }

    /// [`Engine::start_delete`] without the refusal of nested stacks (their
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
            options: json!({"Retain": retain}),
            started_at: now(),
        };
        let stack_id = stack.stack_id.clone();
        self.begin_operation(
            &lease,
            operation,
            stack,
            StackStatus::DeleteInProgress,
            None,
            None,
        )
        .await?;
        Ok(Some(stack_id))
    }

    /// Rebuilds an operation's working state from the stored stack.
    /// For an update, the template is the one being rolled forward to (or, in
    /// the rollback phases, back to), from the operation's journal; `other` is
    /// the update's other template.
    async fn load(&self, stack: &StackRecord, lease: Lease) -> Result<Op, EngineError> {
        let sctx = stack_context(&self.config, &stack.stack_name, &stack.stack_id);
        let results = Results::new(self.exports_map().await?);
        let operation = self.store.operation(&stack.stack_id).await?;
        let (this, other) = match &operation {
            Some(o) if matches!(o.kind, OperationKind::Update | OperationKind::Reconcile) => {
                let (previous, target) = update::UpdateJournal::from_options(&o.options)?;
                if update::is_rollback_phase(stack.status) {
                    (previous, Some(target))
                } else {
                    (target, Some(previous))
                }
            }
            _ => (update::StackState::of(stack), None),
        };
        let template = Template::parse_with(&this.template_body, &this.context)?;
        let params = ParameterValues::resolve(&template.parameters, &this.parameters)?;
        let conditions = Evaluator::new(&template, &params, &sctx, &results)?
            .conditions()
            .clone();
        let graph = Graph::build(&template, &|c| conditions.get(c).copied())?;
        let other = match other {
            Some(state) => Some(update::Other::load(state, &sctx, &results)?),
            None => None,
        };
        let rows = self.store.resources(&stack.stack_id).await?;
        results.record_live(&rows);
        let reported = rows
            .iter()
            .map(|r| {
                let step = (r.status, r.status_reason.clone(), r.physical_id.clone());
                (r.logical_id.clone(), step)
            })
            .collect();
        let recorded_digests = rows
            .iter()
            .filter_map(|r| {
                Some((
                    r.logical_id.clone(),
                    r.properties.get(crate::nested::DIGEST)?.clone(),
                ))
            })
            .collect();
        let nested = operation
            .as_ref()
            .map(|o| crate::nested::NestedTemplates::from_options(&o.options))
            .unwrap_or_default();
        let deadline = (stack.status == StackStatus::CreateInProgress)
            .then(|| operation_deadline(operation.as_ref()))
            .flatten();
        Ok(Op {
            stack: stack.clone(),
            template,
            params,
            sctx,
            conditions,
            graph,
            results,
            lease,
            aborted: AtomicBool::new(false),
            cancel: tokio::sync::watch::Sender::new(false),
            deadline,
            timed_out: AtomicBool::new(false),
            nested,
            recorded_digests,
            state: this,
            other,
            reported: std::sync::Mutex::new(reported),
        })
    }

    /// Resumes every in-progress operation whose owner is gone (crashed),
    /// one after the other, and drives each to a terminal status. Returns
    /// the stack ids resumed.
    pub async fn resume_abandoned(self: &Arc<Self>) -> Result<Vec<String>, EngineError> {
        self.break_dead_leases().await?;
        let mut resumed = Vec::new();
        loop {
            let Some(stack_id) = self.claim(1, false).await?.pop() else {
                break;
            };
            // Driven already in this loop and still in progress: its
            // operation stopped here (lost lease); leave it to the others.
            if resumed.contains(&stack_id) {
                self.hand_off(&stack_id).await?;
                break;
            }
            match self.run(&stack_id).await {
                Ok(_) | Err(EngineError::Store(StoreError::Busy { .. })) => {}
                Err(e) => return Err(e),
            }
            resumed.push(stack_id);
        }
        Ok(resumed)
    }

    /// Expires the leases of operations whose owner was a process on this
    /// host that no longer runs, so they are claimed at once instead of
    /// when their lease runs out.
    pub async fn break_dead_leases(&self) -> Result<(), EngineError> {
        for s in self.store.in_progress_stacks().await? {
            if let Some(owner) = self.store.lease_owner(&s.stack_id).await? {
                if owner_process(&owner) != self.owner && owner_is_dead(&owner) {
                    self.store.break_lease(&s.stack_id, &owner).await?;
                }
            }
        }
        Ok(())
    }

    /// Claims up to `room` operations that no engine holds (handed off, or
    /// whose owner's lease ran out: a crashed or stalled engine) and returns
    /// their stack ids, to be driven with [`Engine::run`], which continues
    /// each under its claim. An operation taken over from an engine that
    /// died is a resume: after two in a row that recorded nothing it is
    /// marked failed instead (see [`Engine::give_up`]).
    /// `handed_off`: also operations a full engine handed off (a serving
    /// engine takes those at once; a command only once their lease time
    /// passed without any engine taking them).
    pub async fn claim(&self, room: usize, handed_off: bool) -> Result<Vec<String>, EngineError> {
        if room == 0 {
            return Ok(Vec::new());
        }
        let owners: Vec<String> = (0..room).map(|_| self.operation_owner()).collect();
        let claims = self
            .store
            .claim_operations(&owners, self.lease_ttl_ms(), handed_off)
            .await?;
        let mut ids = Vec::with_capacity(claims.len());
        for claim in claims {
            let stack_id = claim.lease.stack_id.clone();
            if let Some(from) = &claim.taken_from {
                tracing::warn!(stack = %stack_id, from = %from, token = claim.lease.token, "took over an operation whose engine stopped renewing its lease");
                self.shared.metrics.takeover();
                // A process that dies on the same step every time (a
                // provider that aborts, an input that exhausts memory)
                // would take every engine down in turn: after two resumes
                // in a row that recorded nothing, the operation is marked
                // failed instead.
                let attempts = self.store.note_resume(&stack_id).await?;
                if attempts > RESUMES_WITHOUT_PROGRESS && !self.only_waiting(&stack_id).await? {
                    if let Some(stack) = self.store.find_stack(&stack_id).await? {
                        self.give_up(&stack, attempts - 1, claim.lease).await?;
                    }
                    continue;
                }
            }
            self.started_under(&claim.lease);
            ids.push(stack_id);
        }
        Ok(ids)
    }

    /// Whether the operation is only waiting for answers from outside the
    /// process: a custom-resource handler's response, or signals. Such a
    /// resume records nothing until the answer comes, yet cannot be what
    /// takes engines down (waiting is progress), so repeated takeovers of
    /// it never mark it failed.
    async fn only_waiting(&self, stack_id: &str) -> Result<bool, EngineError> {
        let rows = self.store.resources(stack_id).await?;
        let mut in_flight = rows
            .iter()
            .filter(|r| r.pending.is_some() && r.status.as_str().ends_with("_IN_PROGRESS"))
            .peekable();
        if in_flight.peek().is_none() {
            return Ok(false);
        }
        Ok(in_flight.all(|r| {
            r.pending
                .as_ref()
                .is_some_and(|p| p.action == CallKind::Signals)
                || self
                    .registry
                    .get(&r.resource_type)
                    .is_some_and(|t| t.transport == crate::registry::Transport::Webhook)
        }))
    }

    /// Ends an operation that its resumes could not move: the stack goes to
    /// the failed status its operation can be recovered from (delete,
    /// continue-rollback, a new update), with the reason.
    async fn give_up(
        &self,
        stack: &StackRecord,
        crashed: u32,
        lease: Lease,
    ) -> Result<(), EngineError> {
        let kind = self.store.operation(&stack.stack_id).await?.map(|o| o.kind);
        let (status, hint) = match stack.status {
            StackStatus::CreateInProgress => (
                StackStatus::CreateFailed,
                "delete the stack to remove what it made",
            ),
            StackStatus::RollbackInProgress => (
                StackStatus::RollbackFailed,
                "delete the stack (with --retain for a resource that cannot be deleted)",
            ),
            StackStatus::DeleteInProgress => (
                StackStatus::DeleteFailed,
                "delete again, with --retain for a resource that cannot be deleted",
            ),
            StackStatus::UpdateInProgress if kind == Some(OperationKind::Reconcile) => (
                StackStatus::UpdateFailed,
                "run cairn update again once the cause is fixed",
            ),
            StackStatus::UpdateInProgress | StackStatus::UpdateRollbackInProgress => (
                StackStatus::UpdateRollbackFailed,
                "continue the rollback, with --skip for a resource that cannot be rolled back",
            ),
            StackStatus::UpdateCompleteCleanupInProgress => (
                StackStatus::UpdateComplete,
                "the old resources the cleanup did not reach are still there",
            ),
            StackStatus::UpdateRollbackCompleteCleanupInProgress => (
                StackStatus::UpdateRollbackComplete,
                "the resources the cleanup did not reach are still there",
            ),
            _ => {
                self.store.release_lease(&lease).await?;
                return Ok(());
            }
        };
        let reason = format!(
            "Cairn stopped {crashed} times in a row while resuming this operation, recording nothing each time; it is marked {status} so that other commands can run: {hint}. The stack's last events name the resource it was working on."
        );
        tracing::error!(stack = %stack.stack_id, "{reason}");
        let event = stack_event(stack, status, Some(&reason), &now());
        self.store
            .set_stack_status(&lease, status, Some(&reason), &event)
            .await?;
        if status != StackStatus::UpdateRollbackFailed {
            self.store.clear_operation(&lease).await?;
        }
        self.store.release_lease(&lease).await?;
        Ok(())
    }

    /// Drives a stack's current operation to a terminal status (also after a
    /// crash) and returns that status.
    pub async fn run(self: &Arc<Self>, stack_id: &str) -> Result<StackStatus, EngineError> {
        let Some(stack) = self.store.find_stack(stack_id).await? else {
            return Err(StoreError::NoSuchStack(stack_id.to_string()).into());
        };
        if !stack.status.is_in_progress() {
            return Ok(stack.status);
        }
        // The operation this process started continues under its owner;
        // anything else is a new owner, refused while another operation
        // (of any process) holds the stack.
        let owner = self
            .started
            .lock()
            .ok()
            .and_then(|mut s| s.remove(&stack.stack_id))
            .map(|lease| lease.owner)
            .unwrap_or_else(|| self.operation_owner());
        let lease = self
            .store
            .acquire_lease(&stack.stack_id, &owner, self.lease_ttl_ms())
            .await?;
        // Read again under the lease: another engine may have run the
        // operation to its end between the read above and the lease (this
        // one stalled); there is nothing left to drive then.
        let stack = match self.store.find_stack(&stack.stack_id).await? {
            Some(s) if s.status.is_in_progress() => s,
            Some(s) => {
                let _ = self.store.release_lease(&lease).await;
                return Ok(s.status);
            }
            None => return Err(StoreError::NoSuchStack(stack_id.to_string()).into()),
        };
        let op = Arc::new(self.load(&stack, lease.clone()).await?);
        let heartbeat = {
            let store = self.store.clone();
            let lease = lease.clone();
            let op = op.clone();
            let ttl = self.lease_ttl_ms();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis((ttl / 3) as u64)).await;
                    match store.renew_lease(&lease, ttl).await {
                        Ok(()) => {}
                        Err(StoreError::LeaseLost(_)) => {
                            op.aborted.store(true, Ordering::SeqCst);
                            return;
                        }
                        // The database is unreachable for now: the lease
                        // may run out, and then the writes say so.
                        Err(e) => {
                            tracing::warn!(stack = %lease.stack_id, "cannot renew the lease: {e}")
                        }
                    }
                }
            })
        };
        // A cancel is asked for by another process through the store: poll
        // for it while the update rolls forward.
        let cancel_watch = (stack.status == StackStatus::UpdateInProgress).then(|| {
            let store = self.store.clone();
            let op = op.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(CANCEL_POLL).await;
                    if let Ok(true) = store.cancel_requested(&op.stack.stack_id).await {
                        op.cancel.send_replace(true);
                        return;
                    }
                }
            })
        });
        let result = self.drive(&op).await;
        heartbeat.abort();
        if let Some(w) = cancel_watch {
            w.abort();
        }
        if op.aborted.load(Ordering::SeqCst)
            || matches!(result, Err(EngineError::Store(StoreError::LeaseLost(_))))
        {
            // Another engine took the operation over (this one stalled past
            // its lease): everything this one would still write is refused
            // on the fencing token, so it lets go.
            self.shared.metrics.dropped_operation();
            tracing::warn!(stack = %lease.stack_id, owner = %lease.owner, token = lease.token, "dropped the operation: another engine took its lease over, and this engine's writes for it are refused (fencing token {} is no longer current)", lease.token);
            return Err(StoreError::LeaseLost(lease.stack_id.clone()).into());
        }
        let status = result?;
        if !status.is_in_progress() {
            // A failed update rollback keeps its journal: continue-rollback
            // resumes from it.
            if status != StackStatus::UpdateRollbackFailed {
                self.store.clear_operation(&lease).await?;
            }
            self.store.release_lease(&lease).await?;
        }
        Ok(status)
    }

    async fn drive(&self, op: &Op) -> Result<StackStatus, EngineError> {
        let operation = self.store.operation(&op.stack.stack_id).await?;
        let retain: Vec<String> = match &operation {
            Some(o) => o
                .options
                .get("Retain")
                .and_then(|r| serde_json::from_value(r.clone()).ok())
                .unwrap_or_default(),
            None => Vec::new(),
        };
        if let Some(o) = operation.filter(|o| o.kind == OperationKind::Reconcile) {
            if op.stack.status == StackStatus::UpdateInProgress {
                return self.drive_reconcile(op, &o.options).await;
            }
        }
        match op.stack.status {
            StackStatus::CreateInProgress => {
                let rows = self.store.resources(&op.stack.stack_id).await?;
                if rows.is_empty() {
                    match self.check_parameter_values(op).await {
                        Err(reason) => return self.fail_create(op, &format!("{reason}. ")).await,
                        Ok(warnings) => {
                            for w in warnings {
                                self.set_status(op, StackStatus::CreateInProgress, Some(&w))
                                    .await?;
                            }
                        }
                    }
                }
                let failed = self.create_all(op, rows).await?;
                if op.timed_out.load(Ordering::SeqCst) {
                    return self.fail_create(op, TIMED_OUT).await;
                }
                if failed.is_empty() {
                    match self.finish_create(op).await {
                        Ok(()) => {
                            return self.set_status(op, StackStatus::CreateComplete, None).await
                        }
                        Err(reason) => return self.fail_create(op, &reason).await,
                    }
                }
                let reason = format!(
                    "The following resource(s) failed to create: [{}]. ",
                    failed.join(", ")
                );
                self.fail_create(op, &reason).await
            }
            StackStatus::RollbackInProgress => self.rollback(op).await,
            StackStatus::UpdateInProgress
            | StackStatus::UpdateCompleteCleanupInProgress
            | StackStatus::UpdateRollbackInProgress
            | StackStatus::UpdateRollbackCompleteCleanupInProgress => self.drive_update(op).await,
            StackStatus::DeleteInProgress => self.delete_phase(op, &retain, true).await,
            other => Err(EngineError::Validation(format!(
                "Stack [{}] is in {other} state, which this version of Cairn cannot resume",
                op.stack.stack_name
            ))),
        }
    }

    async fn set_status(
        &self,
        op: &Op,
        status: StackStatus,
        reason: Option<&str>,
    ) -> Result<StackStatus, EngineError> {
        let event = op.stack_event(status, reason);
        self.store
            .set_stack_status(&op.lease, status, reason, &event)
            .await?;
        Ok(status)
    }

    /// Starts the stack's history entry for an operation.
    async fn open_history(
        &self,
        lease: &Lease,
        stack: &StackRecord,
        kind: OperationKind,
        change_set: Option<String>,
    ) -> Result<(), EngineError> {
        self.store
            .open_history(lease, &history_entry(stack, kind, change_set))
            .await?;
        Ok(())
    }

    /// Starts an operation on an existing stack in one durable write: its
    /// record, `stack` (new fields, `status` with "User Initiated"), the
    /// status event, its history entry (of the operation's kind), and the
    /// change set it executes.
    async fn begin_operation(
        &self,
        lease: &Lease,
        operation: OperationRecord,
        mut stack: StackRecord,
        status: StackStatus,
        change_set: Option<&crate::stack::ChangeSetRecord>,
        details: Option<Value>,
    ) -> Result<(), EngineError> {
        stack.status = status;
        stack.status_reason = Some("User Initiated".into());
        let mut history = history_entry(
            &stack,
            operation.kind,
            change_set.map(|c| c.change_set_name.clone()),
        );
        history.details = details;
        let event = stack_event(&stack, status, Some("User Initiated"), &history.started_at);
        self.store
            .begin_operation(
                lease,
                &crate::store::OperationStart {
                    operation,
                    change_set_id: change_set.map(|c| c.change_set_id.clone()),
                    stack,
                    event,
                    history,
                },
            )
            .await?;
        Ok(())
    }

    async fn fail_create(&self, op: &Op, reason: &str) -> Result<StackStatus, EngineError> {
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
                self.delete_phase(op, &[], true).await
            }
        }
    }

    async fn rollback(&self, op: &Op) -> Result<StackStatus, EngineError> {
        let failed = self.delete_resources(op, &[]).await?;
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

    async fn delete_phase(
        &self,
        op: &Op,
        retain: &[String],
        whole_stack: bool,
    ) -> Result<StackStatus, EngineError> {
        let failed = self.delete_resources(op, retain).await?;
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

    /// Creates every resource not yet created, in dependency order. Returns the
    /// logical ids that failed.
    /// `rows`: the stack's resources as stored when the phase starts.
    async fn create_all(
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
            .schedule(op, &preds, initial, true, false, |i| async move {
                let name = op.graph.name(i);
                let ok = self
                    .create_one(op, name, stored.get(name).cloned(), None)
                    .await;
                (i, ok)
            })
            .await?;
        let cancelled: Vec<&str> = (0..n)
            .filter(|&i| outcomes[i] == Outcome::Cancelled)
            .map(|i| op.graph.name(i))
            .collect();
        let mut failed: Vec<String> = (0..n)
            .filter(|&i| outcomes[i] == Outcome::Failed)
            .map(|i| op.graph.name(i).to_string())
            .collect();
        failed.extend(self.mark_cancelled(op, &cancelled).await?);
        Ok(failed)
    }

    /// Records resources whose create or update was cancelled because a
    /// sibling failed: CREATE_FAILED "Resource creation cancelled" or
    /// UPDATE_FAILED "Resource update cancelled". Their pending call stays
    /// recorded, so the rollback learns (and deletes) what a create that had
    /// already reached the provider made. Those that completed before the
    /// cancellation landed keep their status. Returns the logical ids marked.
    async fn mark_cancelled(&self, op: &Op, names: &[&str]) -> Result<Vec<String>, EngineError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        // Read after the cancelled work's last write: the store is FIFO.
        let stored = self.store.resources(&op.stack.stack_id).await?;
        let mut marked = Vec::new();
        for mut rec in stored {
            if !names.contains(&rec.logical_id.as_str()) {
                continue;
            }
            let (status, reason) = match rec.status {
                ResourceStatus::CreateInProgress => {
                    (ResourceStatus::CreateFailed, "Resource creation cancelled")
                }
                ResourceStatus::UpdateInProgress => {
                    (ResourceStatus::UpdateFailed, "Resource update cancelled")
                }
                _ => continue,
            };
            // A create the provider confirms it stopped and undid ends as
            // not made: the rollback has nothing to ask or delete.
            if let Some(p) = protocol::recorded(rec.pending.as_ref(), CallKind::Create).cloned() {
                if rec.physical_id.is_none() && self.cancel_create(op, &rec, &p.request_id).await {
                    rec.pending = None;
                }
            }
            rec.status = status;
            rec.status_reason = Some(reason.into());
            rec.updated_at = now();
            if !self.record(op, &rec, Vec::new()).await {
                return Err(StoreError::LeaseLost(op.stack.stack_id.clone()).into());
            }
            marked.push(rec.logical_id);
        }
        Ok(marked)
    }

    fn context(
        &self,
        op: &Op,
        logical_id: &str,
        type_name: &str,
        request_id: &str,
    ) -> RequestContext {
        self.request_context(
            &op.stack.stack_id,
            &op.stack.stack_name,
            logical_id,
            type_name,
            request_id,
        )
    }

    /// A provider request's context, its deadline `call_timeout_seconds` away.
    fn request_context(
        &self,
        stack_id: &str,
        stack_name: &str,
        logical_id: &str,
        type_name: &str,
        request_id: &str,
    ) -> RequestContext {
        let deadline = std::time::SystemTime::now()
            + Duration::from_secs(self.config.engine.call_timeout_seconds);
        RequestContext {
            stack_id: stack_id.to_string(),
            stack_name: stack_name.to_string(),
            logical_resource_id: logical_id.to_string(),
            resource_type: type_name.to_string(),
            request_id: request_id.to_string(),
            deadline_unix_ms: deadline
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(u64::MAX),
        }
    }

    /// Records `r` with its event (after `earlier`, events of transitions not
    /// yet committed) and reports whether the write held; a lost lease aborts
    /// the operation.
    async fn record(&self, op: &Op, r: &ResourceRecord, earlier: Vec<EventRecord>) -> bool {
        op.results.note_secrets(r);
        let mut events = earlier;
        let step = (r.status, r.status_reason.clone(), r.physical_id.clone());
        let repeated = match op.reported.lock() {
            Ok(mut reported) => {
                let last = reported.insert(r.logical_id.clone(), step.clone());
                events.is_empty()
                    && r.status.as_str().ends_with("_IN_PROGRESS")
                    && last == Some(step)
            }
            Err(_) => false,
        };
        if !repeated {
            events.push(op.resource_event(r));
        }
        let written = self.store.put_resource(&op.lease, r, &events).await;
        self.held(op, &r.logical_id, written)
    }

    /// Whether a write of the operation held; a failed one (lost lease, state
    /// file error) aborts the operation.
    fn held(&self, op: &Op, logical_id: &str, written: Result<(), StoreError>) -> bool {
        match written {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(stack = %op.stack.stack_name, resource = %logical_id, "cannot record resource state: {e}");
                op.aborted.store(true, Ordering::SeqCst);
                false
            }
        }
    }

    /// Runs `work` over the graph `preds` (see [`dag::run`]); a lost lease
    /// during it is an error.
    async fn schedule<F, Fut>(
        &self,
        op: &Op,
        preds: &[Vec<usize>],
        initial: Vec<Outcome>,
        stop_on_failure: bool,
        cancellable: bool,
        work: F,
    ) -> Result<Vec<Outcome>, EngineError>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = (usize, bool)>,
    {
        let outcomes = dag::run(
            preds,
            initial,
            self.config.engine.max_concurrency,
            stop_on_failure,
            async {
                let cancelled = async {
                    let mut cancel = op.cancel.subscribe();
                    if !cancellable || cancel.wait_for(|c| *c).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                // TimeoutInMinutes: the work in flight is cancelled.
                let timed_out = async {
                    // Only the create phase is bounded: the rollback that
                    // follows a timeout runs to its end.
                    let Some(deadline) =
                        op.deadline.filter(|_| !op.timed_out.load(Ordering::SeqCst))
                    else {
                        return std::future::pending::<()>().await;
                    };
                    let left = deadline
                        .duration_since(std::time::SystemTime::now())
                        .unwrap_or(Duration::ZERO);
                    tokio::time::sleep(left).await;
                    op.timed_out.store(true, Ordering::SeqCst);
                };
                tokio::select! {
                    _ = cancelled => {}
                    _ = timed_out => {}
                }
            },
            work,
        )
        .await;
        if op.aborted.load(Ordering::SeqCst) {
            return Err(StoreError::LeaseLost(op.stack.stack_id.clone()).into());
        }
        Ok(outcomes)
    }

    /// Takes the stack's lease for a new operation. While another operation
    /// holds it, its status (once it has recorded one) is returned as the
    /// refusal's: an operation that is only starting is waited for briefly,
    /// so the loser of a race learns what the winner is doing, and gets the
    /// stack if the winner gave up.
    async fn lease_for_new_operation(
        &self,
        stack: &StackRecord,
    ) -> Result<Result<Lease, StackStatus>, EngineError> {
        let owner = self.operation_owner();
        let started = std::time::Instant::now();
        loop {
            match self
                .store
                .acquire_lease(&stack.stack_id, &owner, self.lease_ttl_ms())
                .await
            {
                Ok(lease) => return Ok(Ok(lease)),
                Err(StoreError::Busy { .. }) => {
                    let status = self.current_status(stack).await?;
                    if status.is_in_progress() || started.elapsed() > Duration::from_secs(2) {
                        return Ok(Err(status));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The stack's status as stored now.
    async fn current_status(&self, stack: &StackRecord) -> Result<StackStatus, EngineError> {
        Ok(self
            .store
            .find_stack(&stack.stack_id)
            .await?
            .map(|s| s.status)
            .unwrap_or(stack.status))
    }

    /// The provider serving `type_name`.
    fn provider_for(
        &self,
        type_name: &str,
    ) -> Result<Arc<crate::registry::RegisteredType>, ProviderError> {
        self.registry.get(type_name).ok_or_else(|| {
            // A provider that cannot start fails only the resources of its
            // own types, with its name and the cause.
            let message = self
                .registry
                .unavailable_reason(type_name)
                .unwrap_or_else(|| format!("no provider serves {type_name}"));
            ProviderError::new(cairn_sdk::ErrorKind::InternalFailure, message)
        })
    }

    /// Evaluates a resource's properties with what providers returned so far and
    /// checks them against the schema.
    fn properties_for(
        &self,
        op: &Op,
        logical_id: &str,
    ) -> Result<(String, Map<String, Value>), String> {
        let r = op
            .template
            .resource(logical_id)
            .ok_or_else(|| format!("resource {logical_id} is not in the template"))?;
        let path = child(&child("/Resources", logical_id), "Properties");
        let (props, pending) = op
            .evaluator()
            .eval_object(&r.properties, &path)
            .map_err(|e| e.to_string())?;
        if pending {
            return Err(format!(
                "properties of {logical_id} still depend on resources that are not created"
            ));
        }
        let props = validate::check_properties(logical_id, &r.type_name, &props, &self.registry)
            .map_err(|e| e.message().to_string())?;
        let canonical = self.registry.canonical(&r.type_name).to_string();
        // A nested stack changes with its template's text too.
        let props = if crate::nested::is_stack(&canonical) {
            let recorded = op.recorded_digests.get(logical_id).map(|d| {
                let mut m = Map::new();
                m.insert(crate::nested::DIGEST.into(), d.clone());
                m
            });
            crate::nested::with_digest(logical_id, props, &op.nested, recorded.as_ref())
        } else {
            props
        };
        Ok((canonical, props))
    }

    /// The resource's Metadata evaluated with what providers returned so far.
    fn metadata_for(&self, op: &Op, logical_id: &str) -> Result<Option<Value>, String> {
        let r = op
            .template
            .resource(logical_id)
            .ok_or_else(|| format!("resource {logical_id} is not in the template"))?;
        crate::plan::evaluate_metadata(&op.evaluator(), r.metadata.as_ref(), logical_id)
            .map_err(|e| e.to_string())
    }

    /// A resource's HOT `external_id`, evaluated.
    fn external_id_for(&self, op: &Op, logical_id: &str) -> Result<Option<String>, ProviderError> {
        let Some(r) = op.template.resource(logical_id) else {
            return Ok(None);
        };
        crate::plan::external_id(&op.evaluator(), r)
            .map_err(|e| ProviderError::invalid_request(e.to_string()))
    }

    /// HOT's `external_id`: instead of a create, the existing resource is
    /// adopted once its provider confirms it exists (Heat's ADOPT and
    /// check); one the provider cannot check is taken as given.
    async fn adopt_external(
        &self,
        op: &Op,
        r: &ResourceRecord,
        t: &crate::registry::RegisteredType,
        id: String,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        let req = cairn_sdk::DriftRequest {
            context: self.context(op, &r.logical_id, &r.resource_type, request_id),
            physical_resource_id: id.clone(),
            properties: r.properties.clone(),
        };
        let missing = match self.timed("adoption", t.provider.check_drift(&req)).await {
            Ok(cairn_sdk::DriftResult::Deleted) => true,
            Ok(_) => false,
            Err(e) if e.is_not_found() => true,
            Err(e) => return Err(e),
        };
        if missing {
            return Err(ProviderError::invalid_request(format!(
                "Invalid external resource: Resource {id} ({}) can not be found.",
                r.resource_type
            )));
        }
        Ok(CreateResult {
            physical_resource_id: id,
            attributes: Map::new(),
            no_echo: false,
        })
    }

    /// Creates one resource (CREATE_IN_PROGRESS, "Resource creation
    /// Initiated", CREATE_COMPLETE), or finishes a create a crash interrupted.
    /// `journal`: how an update records it (`Added`), `None` in a create.
    async fn create_one(
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
            return self.resume_signal_wait(op, logical_id, r.clone()).await;
        }
        let resumed_call = existing
            .as_ref()
            .and_then(|r| protocol::recorded(r.pending.as_ref(), CallKind::Create).cloned());
        let (rec, request_id, attempt) = match (existing, resumed_call) {
            (Some(r), Some(p)) => (r, p.request_id, Attempt::Again),
            _ => match self.begin_create(op, logical_id, journal).await {
                Some((rec, request_id)) => (rec, request_id, Attempt::First),
                None => return false,
            },
        };
        let result = self.call_create(op, &rec, &request_id, attempt).await;
        self.created_or_waiting(op, logical_id, rec, result).await
    }

    /// A create resumed while its resource waited for signals: the wait
    /// goes on (its deadline kept), or ends with what the template says now.
    async fn resume_signal_wait(&self, op: &Op, logical_id: &str, r: ResourceRecord) -> bool {
        match self.signal_wait(op, logical_id, &r.properties).await {
            Ok(Some((wait, source))) => self.await_signals(op, r, wait, source).await,
            outcome => {
                let result = match outcome {
                    Err(reason) => Err(ProviderError::new(ErrorKind::InvalidRequest, reason)),
                    _ => Ok(CreateResult {
                        physical_resource_id: r.physical_id.clone().unwrap_or_default(),
                        attributes: r.attributes.clone(),
                        no_echo: r.no_echo,
                    }),
                };
                self.record_created(
                    op,
                    r,
                    result,
                    ResourceStatus::CreateComplete,
                    ResourceStatus::CreateFailed,
                )
                .await
            }
        }
    }

    /// The begin step of a new resource's create: its properties evaluated,
    /// what it will wait for checked, its old signals cleared, and the call
    /// recorded (CREATE_IN_PROGRESS, "Resource creation Initiated") with its
    /// request id. `None` when it failed before anything was sent (the
    /// failure is recorded).
    async fn begin_create(
        &self,
        op: &Op,
        logical_id: &str,
        journal: Option<Journal>,
    ) -> Option<(ResourceRecord, String)> {
        let type_name = op
            .template
            .resource(logical_id)
            .map(|r| r.type_name.clone())
            .unwrap_or_default();
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
        };
        // CREATE_IN_PROGRESS is committed together with the next
        // transition: one write per step instead of two.
        let started = vec![op.resource_event(&rec)];
        let prepared = async {
            let (_, props) = self.properties_for(op, logical_id)?;
            rec.metadata = self.metadata_for(op, logical_id)?;
            rec.properties = props;
            // What it will wait for is checked before anything is made.
            self.signal_wait(op, logical_id, &rec.properties).await?;
            // A new life waits for new signals.
            if self.clears_signals(op, logical_id) {
                self.store
                    .clear_signals(&op.stack.stack_id, logical_id)
                    .await
                    .map_err(|e| format!("cannot clear the signals kept for {logical_id}: {e}"))?;
            }
            Ok::<(), String>(())
        }
        .await;
        if let Err(reason) = prepared {
            rec.status = ResourceStatus::CreateFailed;
            rec.status_reason = Some(reason);
            rec.updated_at = now();
            self.record(op, &rec, started).await;
            return None;
        }
        let call = protocol::begin(CallKind::Create);
        let request_id = call.request_id.clone();
        rec.pending = Some(call);
        rec.status_reason = Some("Resource creation Initiated".into());
        rec.updated_at = now();
        // Durable before the call: a crash from here on re-issues it.
        if !self.record(op, &rec, started).await {
            return None;
        }
        Some((rec, request_id))
    }

    /// A create call's outcome: recorded, or (made, with a CreationPolicy
    /// or wait condition) the wait for its signals begins.
    async fn created_or_waiting(
        &self,
        op: &Op,
        logical_id: &str,
        rec: ResourceRecord,
        result: Result<CreateResult, ProviderError>,
    ) -> bool {
        if let Ok(created) = &result {
            match self.signal_wait(op, logical_id, &rec.properties).await {
                Ok(Some((wait, source))) => {
                    return self
                        .start_waiting(op, rec, created.clone(), wait, source)
                        .await
                }
                Ok(None) => {}
                Err(reason) => {
                    let mut e = ProviderError::new(ErrorKind::InvalidRequest, reason);
                    e.physical_resource_id = Some(created.physical_resource_id.clone());
                    return self
                        .record_created(
                            op,
                            rec,
                            Err(e),
                            ResourceStatus::CreateComplete,
                            ResourceStatus::CreateFailed,
                        )
                        .await;
                }
            }
        }
        self.record_created(
            op,
            rec,
            result,
            ResourceStatus::CreateComplete,
            ResourceStatus::CreateFailed,
        )
        .await
    }

    /// Records the outcome of a create call (of a new resource or of a
    /// replacement): the physical id, attributes and NoEcho learned, or the
    /// failure with any physical resource it left behind (rollback deletes
    /// it). True when the resource exists and is recorded.
    async fn record_created(
        &self,
        op: &Op,
        mut rec: ResourceRecord,
        result: Result<CreateResult, ProviderError>,
        done: ResourceStatus,
        failed: ResourceStatus,
    ) -> bool {
        // A call that timed out may still have made its resource: its record
        // stays, so whoever deletes this resource asks again first.
        let unknown_outcome = matches!(&result, Err(e) if protocol::outcome_unknown(e));
        if !unknown_outcome {
            rec.pending = None;
        }
        rec.updated_at = now();
        match result {
            Ok(created) => {
                rec.physical_id = Some(created.physical_resource_id.clone());
                rec.attributes = created.attributes;
                rec.no_echo = created.no_echo;
                rec.status = done;
                rec.status_reason = None;
                if !self.record(op, &rec, Vec::new()).await {
                    return false;
                }
                op.results.record(
                    &rec.logical_id,
                    &created.physical_resource_id,
                    &rec.attributes,
                );
                true
            }
            Err(e) => {
                rec.status = failed;
                rec.status_reason = Some(e.message);
                if e.physical_resource_id.is_some() {
                    rec.physical_id = e.physical_resource_id;
                }
                self.record(op, &rec, Vec::new()).await;
                false
            }
        }
    }

    /// Outputs and exports, once every resource exists. An error is the reason
    /// the create fails.
    async fn finish_create(&self, op: &Op) -> Result<(), String> {
        let outputs = self.evaluate_outputs(op)?;
        self.publish_outputs(op, outputs).await
    }

    /// The template's outputs (those whose condition holds), evaluated.
    fn evaluate_outputs(&self, op: &Op) -> Result<Vec<OutputRecord>, String> {
        let ev = op.evaluator();
        let mut outputs = Vec::new();
        for o in &op.template.outputs {
            if o.condition.as_deref().is_some_and(|c| !ev.condition(c)) {
                continue;
            }
            let base = child("/Outputs", &o.name);
            let value = match ev.eval(&o.value, &child(&base, "Value")) {
                Ok(Evaluated::Value(v)) => v,
                Ok(_) => return Err(format!("Output {} did not resolve to a value", o.name)),
                Err(e) => return Err(e.to_string()),
            };
            let text = match &value {
                Value::String(s) => s.clone(),
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
                    Ok(_) => {
                        return Err(format!("Export name of output {} must be a string", o.name))
                    }
                    Err(e) => return Err(e.to_string()),
                },
            };
            outputs.push(OutputRecord {
                output_key: o.name.clone(),
                output_value: text,
                description: o.description.clone(),
                export_name,
            });
        }
        Ok(outputs)
    }

    /// Records outputs on the stack and publishes its exports and imports.
    async fn publish_outputs(&self, op: &Op, outputs: Vec<OutputRecord>) -> Result<(), String> {
        let exports: Vec<(String, String)> = outputs
            .iter()
            .filter_map(|o| Some((o.export_name.clone()?, o.output_value.clone())))
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

    /// Deletes the stack's resources in reverse dependency order. `retain` and
    /// `DeletionPolicy: Retain` resources are skipped. Returns those that failed.
    async fn delete_resources(
        &self,
        op: &Op,
        retain: &[String],
    ) -> Result<Vec<String>, EngineError> {
        let stored = self.store.resources(&op.stack.stack_id).await?;
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
        let stored_ref = &stored;
        let outcomes = self
            .schedule(op, &preds, initial, false, false, |i| async move {
                let r = stored_ref[i].clone();
                let keep = retain.contains(&r.logical_id);
                (i, self.delete_one(op, r, keep).await)
            })
            .await?;
        Ok(stored
            .iter()
            .zip(outcomes)
            .filter(|(_, o)| *o == Outcome::Failed)
            .map(|(r, _)| r.logical_id.clone())
            .collect())
    }

    fn retained_by_policy(&self, op: &Op, logical_id: &str) -> bool {
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

    /// A stack deleted in UPDATE_ROLLBACK_FAILED still has resources whose
    /// update journal names a second physical resource (the original of a
    /// replacement not rolled back, or the replacement a rollback abandoned):
    /// it is deleted with the row, so nothing the update made is leaked.
    async fn delete_journaled_leftover(
        &self,
        op: &Op,
        rec: &ResourceRecord,
    ) -> Result<(), ProviderError> {
        let other = match &rec.journal {
            Some(Journal::Changed { before }) => Some(before),
            Some(Journal::Restored {
                discard: Some(discard),
            }) => Some(discard),
            _ => None,
        };
        let Some(snapshot) = other.filter(|o| o.physical_id != rec.physical_id) else {
            return Ok(());
        };
        let mut leftover = rec.clone();
        leftover.restore(snapshot);
        // A replacement whose create's outcome is unknown: learn it first.
        let physical = match (&snapshot.physical_id, &snapshot.pending) {
            (Some(physical), _) => physical.clone(),
            (None, Some(p)) if p.action == CallKind::Create => {
                match self.learn_created(op, &leftover, &p.request_id).await {
                    Learned::Made(created) => created.physical_resource_id,
                    Learned::Nothing => return Ok(()),
                    Learned::Unknown(why) => {
                        return Err(ProviderError::new(
                            ErrorKind::Timeout,
                            protocol::cannot_tell(&p.request_id, &why),
                        ))
                    }
                }
            }
            (None, _) => return Ok(()),
        };
        // Not recorded: the journal's discard is, and a delete sent again
        // after a crash finds the resource gone (NotFound counts as deleted).
        let request_id = protocol::begin(CallKind::Delete).request_id;
        self.call_delete(op, &leftover, &physical, &request_id, Attempt::First)
            .await
            .map_err(|e| {
                ProviderError::new(
                    e.kind,
                    format!(
                        "the update's other physical resource {physical}: {}",
                        e.message
                    ),
                )
            })
    }

    async fn delete_one(&self, op: &Op, mut rec: ResourceRecord, retain: bool) -> bool {
        if op.aborted.load(Ordering::SeqCst) {
            return false;
        }
        if retain || self.retained_by_policy(op, &rec.logical_id) {
            rec.status = ResourceStatus::DeleteSkipped;
            rec.status_reason = None;
            rec.pending = None;
            rec.updated_at = now();
            return self.record(op, &rec, Vec::new()).await;
        }
        // A create whose outcome was never recorded (crash, cancellation,
        // timeout): ask again with the same request id, so a resource it made
        // is not leaked. When that cannot be learnt, the delete fails (and
        // keeps the record) rather than forget it.
        if rec.physical_id.is_none() {
            if let Some(p) = protocol::recorded(rec.pending.as_ref(), CallKind::Create).cloned() {
                match self.learn_created(op, &rec, &p.request_id).await {
                    Learned::Made(created) => {
                        rec.physical_id = Some(created.physical_resource_id);
                        rec.attributes = created.attributes;
                        rec.no_echo = created.no_echo;
                    }
                    Learned::Unknown(why) => {
                        rec.status = ResourceStatus::DeleteFailed;
                        rec.status_reason = Some(protocol::cannot_tell(&p.request_id, &why));
                        rec.updated_at = now();
                        self.record(op, &rec, Vec::new()).await;
                        return false;
                    }
                    Learned::Nothing => {}
                }
            }
        }
        // A delete recorded before a crash is resumed, not sent again.
        let (call, attempt) = protocol::begin_or_resume(rec.pending.as_ref(), CallKind::Delete);
        let request_id = call.request_id.clone();
        let needs_call = rec.physical_id.is_some();
        rec.status = ResourceStatus::DeleteInProgress;
        rec.status_reason = None;
        rec.pending = needs_call.then_some(call);
        rec.updated_at = now();
        if !self.record(op, &rec, Vec::new()).await {
            return false;
        }
        let mut result = match rec.physical_id.clone() {
            None => Ok(()),
            Some(physical) => {
                self.call_delete(op, &rec, &physical, &request_id, attempt)
                    .await
            }
        };
        if result.is_ok() {
            result = self.delete_journaled_leftover(op, &rec).await;
        }
        rec.pending = None;
        rec.updated_at = now();
        match result {
            Ok(()) => {
                rec.status = ResourceStatus::DeleteComplete;
                rec.journal = None;
                op.results.forget(&rec.logical_id);
                self.record(op, &rec, Vec::new()).await
            }
            Err(e) => {
                rec.status = ResourceStatus::DeleteFailed;
                rec.status_reason = Some(e.message);
                self.record(op, &rec, Vec::new()).await;
                false
            }
        }
    }
}

/// An operation's history entry, with the template and parameters it
/// works towards (NoEcho values masked).
fn history_entry(
    stack: &StackRecord,
    kind: OperationKind,
    change_set: Option<String>,
) -> HistoryRecord {
    let parameters = stack
        .parameters
        .iter()
        .map(|(k, v)| {
            let shown = if stack.no_echo.contains(k) {
                MASK.to_string()
            } else {
                v.clone()
            };
            (k.clone(), shown)
        })
        .collect();
    HistoryRecord {
        stack_id: stack.stack_id.clone(),
        kind,
        change_set,
        template_body: stack.template_body.clone(),
        parameters,
        started_at: now(),
        ended_at: None,
        status: None,
        status_reason: None,
        details: None,
    }
}

/// `cairn validate`'s static pass: everything a create checks before it
/// runs (parameters, conditions, the graph, types, attributes, every
/// property and output that needs no provider output), every error found
/// rather than the first.
pub fn check_statically(
    registry: &Registry,
    config: &Config,
    template: &Template,
    params: &ParameterValues,
    stack_name: &str,
) -> Result<(), Vec<TemplateError>> {
    let stack_id = format!(
        "arn:aws:cloudformation:{}:{}:stack/{stack_name}/00000000-0000-0000-0000-000000000000",
        config.identity.region, config.identity.account_id
    );
    let sctx = stack_context(config, stack_name, &stack_id);
    static_pass(registry, template, params, &sctx, HashMap::new(), true).map(|_| ())
}

/// The static pass: types, conditions, the graph, attributes, every
/// resource's properties and every output, as far as they are known
/// without provider output. `all`: go on past a resource's or an
/// output's error to collect the others (structural errors still stop
/// it). Never empty on error.
fn static_pass(
    registry: &Registry,
    template: &Template,
    params: &ParameterValues,
    sctx: &StackContext,
    exports: HashMap<String, String>,
    all: bool,
) -> Result<(HashMap<String, bool>, Graph), Vec<TemplateError>> {
    let one = |e: TemplateError| vec![e];
    validate::check_types(template, registry).map_err(one)?;
    let results = Results::static_pass(exports);
    let ev = Evaluator::new(template, params, sctx, &results).map_err(one)?;
    let conditions = ev.conditions().clone();
    let graph = Graph::build(template, &|c| conditions.get(c).copied())
        .map_err(|e| one(e.locate(&template.source_map)))?;
    validate::check_attributes(template, &graph, registry)
        .map_err(|e| one(e.locate(&template.source_map)))?;
    let mut errors = Vec::new();
    for name in graph.names() {
        let Some(r) = template.resource(name) else {
            continue;
        };
        let path = child(&child("/Resources", name), "Properties");
        let checked = ev.eval_object(&r.properties, &path).and_then(|(props, _)| {
            validate::check_properties(name, &r.type_name, &props, registry)
                .map_err(|e| e.locate(&template.source_map))?;
            if crate::group::is_group(registry.canonical(&r.type_name)) {
                check_update_policy(template, &ev, name)?;
            }
            Ok(())
        });
        if let Err(e) = checked {
            errors.push(e);
            if !all {
                return Err(errors);
            }
        }
    }
    for o in &template.outputs {
        if o.condition.as_deref().is_some_and(|c| !ev.condition(c)) {
            continue;
        }
        if let Err(e) = ev.eval(&o.value, &child(&child("/Outputs", &o.name), "Value")) {
            errors.push(e);
            if !all {
                return Err(errors);
            }
        }
    }
    if errors.is_empty() {
        Ok((conditions, graph))
    } else {
        Err(errors)
    }
}

/// A group's UpdatePolicy, checked before anything runs (a bad PauseTime
/// would otherwise fail only the rolling update that reads it).
fn check_update_policy(
    template: &Template,
    ev: &Evaluator<'_>,
    logical_id: &str,
) -> Result<(), TemplateError> {
    let Some(policy) = template
        .resource(logical_id)
        .and_then(|r| r.update_policy.as_ref())
    else {
        return Ok(());
    };
    let path = child(&child("/Resources", logical_id), "UpdatePolicy");
    if let Evaluated::Value(v) = ev.eval(policy, &path)? {
        crate::group::policy::rolling_update(Some(&v), logical_id).map_err(|m| {
            crate::template::template_error(m)
                .at(&path)
                .locate(&template.source_map)
        })?;
    }
    Ok(())
}
