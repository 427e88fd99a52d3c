//! The stack engine: runs create, delete and rollback operations with
//! CloudFormation's statuses and events, independent resources in parallel,
//! every transition committed before the next provider call, and crashed
//! operations resumed from what the store recorded.
//!
//! An operation is: a synchronous part (parse, evaluate, validate, record the
//! stack and take its lease) done by `start_*`, then [`Engine::run`], which
//! drives the stack to a terminal status. `run` is also how a crashed operation
//! is resumed: it reads where the stack is from the store.

pub mod audit_trail;
pub mod capabilities;
mod changeset;
mod claims;
mod create;
mod dag;
mod delete;
pub mod drift;
mod group;
mod hooks;
mod import;
mod kept;
mod kinds;
pub mod macros;
pub mod nested;
pub mod notifications;
mod parameter_values;
mod parsed;
mod protection;
mod protocol;
mod reconcile;
pub mod refactor;
mod resolve;
mod review;
mod rollback_triggers;
mod served;
pub mod signals;
#[cfg(test)]
pub(crate) mod sim;
pub mod stack_policy;
mod steps;
pub mod trace;
pub mod types;
mod unchanged;
mod update;

pub use changeset::{changes_json, ChangeSetType, CreateChangeSetInput, NO_CHANGES};
pub use import::ImportInput;
pub use kinds::{
    ChangeSets, Claims, Creates, Deletes, Drift, Groups, NestedStacks, Protocol, Reconciles,
    Signals, Updates,
};
pub(crate) use kinds::{Hooks, Steps};
pub use reconcile::{ReconcileFlags, ReconcileInput, ReconcilePlan};
pub use update::{ParameterInput, UpdateStackInput, UpgradeTypes};

use std::collections::{BTreeMap, HashMap};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::Config;
use crate::graph::Graph;
use crate::hooks::HookAction;
use crate::operation::OperationOptions;
use crate::registry::Registry;
use crate::shared::Shared;
use crate::stack::{
    now, EventRecord, HistoryRecord, OnFailure, OperationKind, ResourceRecord, ResourceStatus,
    StackRecord, StackStatus, STACK_TYPE,
};
use crate::store::{Lease, OperationRecord, Store, StoreError};
use crate::template::eval::{Evaluated, Evaluator, StackContext};
use crate::template::parameters::{ParameterValues, MASK};
use crate::template::source::child;
use crate::template::{Template, TemplateError};
use crate::validate;
use dag::Outcome;
pub(crate) use protocol::Attempt;
use resolve::Results;
use rollback_triggers::Monitored;

/// CloudFormation's stack status reason (the start of it) when a create
/// runs past its TimeoutInMinutes.
const TIMED_OUT: &str = "Stack creation time exceeded the specified timeout. ";

/// When an operation's TimeoutInMinutes (counted from its start) runs out.
fn operation_deadline(operation: Option<&OperationRecord>) -> Option<std::time::SystemTime> {
    let o = operation?;
    let minutes = OperationOptions::from_value(&o.options).timeout_in_minutes?;
    let started: jiff::Timestamp = o.started_at.parse().ok()?;
    let started = std::time::SystemTime::from(started);
    Some(started + Duration::from_secs(minutes * 60))
}

/// How often a running update looks for a cancel request.
const CANCEL_POLL: Duration = Duration::from_millis(200);

/// How many times one run carries an operation on after the state
/// database failed a write (then it stops, and the lease runs out as
/// after a crash).
const MAX_CARRY_ON: u32 = 3;

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
    /// A capability the template requires was not acknowledged (the API's
    /// `InsufficientCapabilitiesException`).
    #[error("{0}")]
    InsufficientCapabilities(String),
    /// Notification targets that cannot be taken.
    #[error(transparent)]
    NotificationTargets(#[from] crate::notifications::TargetError),
    /// A rollback configuration that cannot be taken.
    #[error(transparent)]
    RollbackTriggers(#[from] crate::rollback_triggers::TriggerError),
    /// Resources to import that cannot be imported.
    #[error(transparent)]
    Import(#[from] crate::import::ImportError),
    /// A signal that cannot be taken.
    #[error(transparent)]
    Signal(#[from] crate::signal::SignalError),
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
    /// The capabilities acknowledged (`None`: not checked, for a stack
    /// the engine makes itself, such as a nested one).
    pub capabilities: Option<Vec<String>>,
    /// `EnableTerminationProtection` (a root stack's).
    pub termination_protection: bool,
    /// `StackPolicyBody`: the stack's policy.
    pub stack_policy: Option<String>,
    /// `RollbackConfiguration`: the triggers and monitoring period.
    pub rollback_configuration: Option<crate::rollback_triggers::RollbackConfiguration>,
    /// `NotificationARNs`: webhook URLs that receive every event.
    pub notification_arns: Vec<String>,
}

/// How CloudFormation shows a value read from a NoEcho custom resource.
const NO_ECHO_ATTRIBUTE_MASK: &str = "*****";

/// One operation in progress, everything derived from the stored stack.
struct Op {
    stack: StackRecord,
    template: Arc<Template>,
    params: ParameterValues,
    sctx: StackContext,
    conditions: HashMap<String, bool>,
    graph: Graph,
    results: Results,
    lease: Lease,
    /// Set when the lease is lost: stop touching anything.
    aborted: AtomicBool,
    /// When (wall-clock ms, read before asking) the store last granted or
    /// renewed the lease; 0 when not known. See [`Op::lease_surely_held`].
    lease_granted_ms: AtomicI64,
    /// The first write of the operation the state database did not take
    /// (not a lost lease): the engine carries on once the database
    /// answers, rather than taking it for a takeover.
    store_failure: std::sync::Mutex<Option<StoreError>>,
    /// What may end the operation's work early besides a lost lease.
    stops: Stops,
    /// The nested templates this operation's stack resources use.
    nested: crate::nested::NestedTemplates,
    /// The template digests recorded for its nested stack resources.
    recorded_digests: HashMap<String, Value>,
    /// The stack fields this operation shows (for an update: the template it
    /// rolls forward to, or back to).
    state: update::StackState,
    /// An update's own state (an update, `cairn update`, an import): its
    /// other template and its stack policy. `None` for other operations.
    update: Option<update::UpdateState>,
    /// The hooks in force when the operation was loaded.
    hooks: Vec<crate::hooks::HookDefinition>,
    /// The last step each resource reported (status, reason, physical id),
    /// from its row when the operation was loaded: an operation resumed
    /// after a crash or a takeover does not report a step in progress a
    /// second time, as CloudFormation never shows one twice.
    reported: std::sync::Mutex<HashMap<String, Reported>>,
    /// The stack's rows as the load read them, taken by `drive` for the
    /// operation's first phase ([`Core::rows_or_read`]): nothing of the
    /// operation has written a row yet then, so a read would give the same.
    loaded_rows: std::sync::Mutex<Option<Vec<ResourceRecord>>>,
    /// The operation's record as the load read it, taken by `drive`: only
    /// its trace context (`trace_operation`) may have been written since,
    /// which `drive` does not read.
    loaded_operation: std::sync::Mutex<Option<Option<OperationRecord>>>,
}

/// What may end an operation's work early besides a lost lease: a
/// cancel-update, a create's TimeoutInMinutes, a rollback trigger. The
/// scheduler listens to all of them; those an operation does not have stay
/// quiet.
struct Stops {
    /// Set when `cairn cancel-update` asked the running update to stop.
    cancel: tokio::sync::watch::Sender<bool>,
    /// When a create's TimeoutInMinutes runs out, if it has one.
    deadline: Option<std::time::SystemTime>,
    /// Set when the deadline stopped the work.
    timed_out: AtomicBool,
    /// Set to the reason when a rollback trigger fires while the operation
    /// rolls forward (see `rollback_triggers`).
    alarm: tokio::sync::watch::Sender<Option<String>>,
    /// Set when the operation stops watching its triggers (it rolls back,
    /// or its monitoring period is over).
    triggers_done: AtomicBool,
}

impl Stops {
    fn new(deadline: Option<std::time::SystemTime>) -> Stops {
        Stops {
            cancel: tokio::sync::watch::Sender::new(false),
            deadline,
            timed_out: AtomicBool::new(false),
            alarm: tokio::sync::watch::Sender::new(None),
            triggers_done: AtomicBool::new(false),
        }
    }
}

/// The rows an operation rewrites and removes in the write that starts it
/// (a kept failed update's rows, folded for the update that continues it).
#[derive(Default)]
struct RowRewrite {
    put: Vec<ResourceRecord>,
    removed: Vec<String>,
}

/// A resource's last reported step: status, reason, physical id.
type Reported = (ResourceStatus, Option<String>, Option<String>);

impl Op {
    /// Keeps the first write of the operation that failed for another
    /// reason than a lost lease.
    fn note_store_failure(&self, e: StoreError) {
        if matches!(e, StoreError::LeaseLost(_)) {
            return;
        }
        if let Ok(mut kept) = self.store_failure.lock() {
            kept.get_or_insert(e);
        }
    }

    /// The failed write [`Op::note_store_failure`] kept, if any.
    fn take_store_failure(&self) -> Option<StoreError> {
        self.store_failure
            .lock()
            .ok()
            .and_then(|mut kept| kept.take())
    }

    /// An update's other template (the one it left, or during rollback the
    /// one it abandoned).
    fn other(&self) -> Option<&update::Other> {
        self.update.as_ref().map(|u| &u.other)
    }

    /// The registered version a resource of `type_name` that this
    /// operation makes gets: the version its update moves the type to,
    /// else the type's default (`None`: not a registered type).
    fn new_type_version(&self, registry: &Registry, type_name: &str) -> Option<String> {
        let canonical = registry.canonical(type_name);
        self.update
            .as_ref()
            .and_then(|u| u.upgrade_types.get(canonical).cloned())
            .or_else(|| registry.default_version(canonical))
    }

    /// The versions an update runs its resources on.
    fn type_versions(&self) -> crate::plan::TypeVersions<'_> {
        match &self.update {
            Some(u) => crate::plan::TypeVersions {
                upgrade: &u.upgrade_types,
            },
            None => crate::plan::TypeVersions::kept(),
        }
    }

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

    /// Notes that the store granted or renewed the lease to a request sent
    /// at `asked_ms` (wall clock): it runs until at least `asked_ms` plus
    /// its time to live.
    fn lease_granted(&self, asked_ms: i64) {
        self.lease_granted_ms.fetch_max(asked_ms, Ordering::SeqCst);
    }

    /// Whether no other engine can have taken the lease yet, without
    /// asking the store: it was granted or renewed less than half its
    /// time to live ago. Another engine takes a lease only once it has run
    /// out (or its owner's process is gone), so within the first half
    /// nobody can have, even with the other engine's (or the database's)
    /// clock that much ahead. An engine that stalled (a paused process or
    /// machine) finds its wall clock past that and asks the store.
    fn lease_surely_held(&self, ttl_ms: i64) -> bool {
        surely_held(
            self.lease_granted_ms.load(Ordering::SeqCst),
            signals::now_ms(),
            ttl_ms,
        )
    }

    /// The type events show for `r`: a HOT resource's as written (see
    /// [`crate::shown`]), while the row is of the type serving it.
    fn shown_type<'a>(&'a self, r: &'a ResourceRecord) -> &'a str {
        match self.template.resource(&r.logical_id) {
            Some(t) if t.type_name == r.resource_type => t.shown_type(),
            Some(_) => &r.resource_type,
            None => crate::shown::member_type(&self.template, &r.logical_id, &r.resource_type)
                .unwrap_or(&r.resource_type),
        }
    }

    fn resource_event(&self, r: &ResourceRecord) -> EventRecord {
        EventRecord {
            hook: None,
            event_id: uuid::Uuid::new_v4().to_string(),
            stack_id: r.stack_id.clone(),
            stack_name: self.stack.stack_name.clone(),
            logical_id: r.logical_id.clone(),
            physical_id: r.physical_id.clone().unwrap_or_default(),
            resource_type: self.shown_type(r).to_string(),
            timestamp: r.updated_at.clone(),
            status: r.status.into(),
            status_reason: r.status_reason.clone(),
            // Written from the row's map as it is, not a copy of it (a map
            // of JSON values always serialises).
            properties: Some(self.mask(serde_json::to_string(&r.properties).unwrap_or_default())),
        }
    }
}

/// Whether a lease granted (or renewed) to a request sent at `granted_ms`
/// with `ttl_ms` to live is certainly still held at `now_ms`: less than
/// half its time to live has passed (0: never granted, unknown).
fn surely_held(granted_ms: i64, now_ms: i64, ttl_ms: i64) -> bool {
    granted_ms > 0 && now_ms >= granted_ms && now_ms < granted_ms.saturating_add(ttl_ms / 2)
}

/// The stack's own event for a status change.
fn stack_event(
    stack: &StackRecord,
    status: StackStatus,
    reason: Option<&str>,
    at: &str,
) -> EventRecord {
    EventRecord {
        hook: None,
        event_id: uuid::Uuid::new_v4().to_string(),
        stack_id: stack.stack_id.clone(),
        stack_name: stack.stack_name.clone(),
        logical_id: stack.stack_name.clone(),
        physical_id: stack.stack_id.clone(),
        resource_type: STACK_TYPE.into(),
        timestamp: at.to_string(),
        status: status.into(),
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

/// Refuses a new stack's name as its template's language does:
/// CloudFormation's rule and text, or for a HOT template Heat's
/// (`[a-zA-Z][a-zA-Z0-9_.-]{0,254}`: Heat's stack name check), so a HOT
/// stack named as Heat allows (`cu_nochange`) is created. The template is
/// read only when CloudFormation's rule refuses the name.
fn check_stack_name(name: &str, template_body: Option<&str>) -> Result<(), EngineError> {
    if valid_stack_name(name) {
        return Ok(());
    }
    let hot = template_body
        .and_then(|t| Template::body_of(t).ok())
        .is_some_and(|b| crate::template::hot::is_hot(&b));
    if !hot {
        return Err(EngineError::Validation(format!(
            "1 validation error detected: Value '{name}' at 'stackName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z][-a-zA-Z0-9]* and have length less than or equal to 128"
        )));
    }
    let mut chars = name.chars();
    let heat = name.len() <= 255
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if heat {
        Ok(())
    } else {
        Err(EngineError::Validation(format!(
            "Invalid stack name {name} must contain only alphanumeric or \"_-.\" characters, must start with alpha and must be 255 characters or less."
        )))
    }
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

/// The stack engine: the front door every operation starts from. It owns
/// the [`Core`] its operation kinds share and makes the kinds
/// (`engine.creates()`, `engine.updates()`, … in `kinds`); the kinds reach
/// the core, never the engine.
pub struct Engine {
    core: Core,
}

/// What every operation shares: the store, the registry, the
/// configuration, this process's leases, scheduling and one operation's
/// records. It makes no operation kind: a kind reaches another only
/// through the uses `kinds` declares for it.
pub struct Core {
    store: Arc<dyn Store>,
    registry: Arc<Registry>,
    config: Config,
    /// `host:pid` of this process; each operation's lease owner is this
    /// plus an id of its own ([`Core::operation_owner`]), so two requests
    /// served by one process can never both hold a stack.
    owner: String,
    /// Operations this process started and has not run yet: stack id →
    /// the lease [`Engine::run`] continues under.
    started: std::sync::Mutex<HashMap<String, Lease>>,
    /// The engine, for the tasks that run a nested stack's child operation
    /// through its front door ([`Engine::run`]).
    me: std::sync::Weak<Engine>,
    /// What this process's engines share: counters, the callback listener.
    shared: Shared,
    /// Templates an operation's start parsed, for its load.
    parsed: parsed::Parsed,
}

impl Deref for Engine {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
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
            core: Core {
                store,
                registry,
                config,
                shared,
                owner: this_owner(),
                started: std::sync::Mutex::new(HashMap::new()),
                me: me.clone(),
                parsed: parsed::Parsed::default(),
            },
        })
    }
}

impl Core {
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

    /// The exports and other stacks' outputs an operation may read
    /// ([`resolve::shared_values`]).
    async fn exports_map(&self, with_outputs: bool) -> Result<HashMap<String, String>, StoreError> {
        resolve::shared_values(self.store.as_ref(), with_outputs).await
    }

    /// The nested templates of `template`'s tree, read as it is submitted:
    /// relative to `origin`, its children with `context`'s child context,
    /// https:// through the process's client.
    async fn read_nested(
        &self,
        template: &Template,
        context: &crate::stack::TemplateContext,
        origin: &crate::nested::Origin,
        values: (&ParameterValues, &StackContext),
    ) -> Result<crate::nested::NestedTemplates, TemplateError> {
        let root = root_values(&self.registry, template, values.0, values.1);
        crate::nested::collect(
            &self.config.nested,
            self.shared.https.as_ref(),
            &self.registry,
            template,
            &crate::nested::Origin {
                context: context.for_child(),
                ..origin.clone()
            },
            &root,
        )
        .await
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

    /// Refuses a template (and its nested templates) that requires a
    /// capability `given` lacks; `None`: not checked.
    fn check_capabilities(
        &self,
        template: &Template,
        body: &str,
        nested: &crate::nested::NestedTemplates,
        given: Option<&[String]>,
    ) -> Result<(), EngineError> {
        let Some(given) = given else {
            return Ok(());
        };
        let mut required = capabilities::Required::default();
        required.add(template, body, &self.registry, true);
        for child in nested.0.values() {
            match Template::parse(&child.body) {
                Ok(t) => required.add(&t, &child.body, &self.registry, true),
                // Its macros run when it is made: what they make is checked
                // then; that it has them, now.
                Err(_) => required.add_transforms(&child.body, true),
            }
        }
        match required.missing(given) {
            Some(text) => Err(EngineError::InsufficientCapabilities(text)),
            None => Ok(()),
        }
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

    /// Rebuilds an operation's working state from the stored stack.
    /// For an update, the template is the one being rolled forward to (or, in
    /// the rollback phases, back to), from the operation's journal; `other` is
    /// the update's other template.
    async fn load(&self, stack: &StackRecord, lease: Lease) -> Result<Op, EngineError> {
        let sctx = stack_context(&self.config, &stack.stack_name, &stack.stack_id);
        // The rows are read and decoded on the store's side while this
        // thread parses: a large stack's delete waits for the longer of the
        // two, not their sum.
        let rows = {
            let (store, stack_id) = (self.store.clone(), stack.stack_id.clone());
            tokio::spawn(async move { store.resources(&stack_id).await })
        };
        // The other reads an operation starts with, asked at once: the
        // store answers them together (one transaction of SQLite's writer,
        // not one after another).
        let (operation, exports, hooks) = tokio::try_join!(
            self.store.operation(&stack.stack_id),
            self.store.exports(),
            self.active_hooks(),
        )?;
        let (this, other) = match &operation {
            Some(o)
                if matches!(
                    o.kind,
                    OperationKind::Update | OperationKind::Reconcile | OperationKind::Import
                ) =>
            {
                let (previous, target) = OperationOptions::from_value(&o.options)
                    .journal()
                    .map_err(|e| EngineError::Validation(e.to_string()))?;
                if stack.status.is_rollback_phase() {
                    (previous, Some(target))
                } else {
                    (target, Some(previous))
                }
            }
            _ => (update::StackState::of(stack), None),
        };
        let reads = [Some(&this), other.as_ref()]
            .into_iter()
            .flatten()
            .any(|s| resolve::reads_stack_outputs(&s.template_body, &s.context));
        let mut shared = resolve::exported(exports);
        if reads {
            resolve::add_stack_outputs(self.store.as_ref(), &mut shared).await?;
        }
        let results = Results::new(shared);
        let template = self.parsed.parse(&this.template_body, &this.context)?;
        let params = ParameterValues::resolve(&template.parameters, &this.parameters)?;
        let conditions = Evaluator::new(&template, &params, &sctx, &results)?
            .conditions()
            .clone();
        let graph = Graph::build(&template, &|c| conditions.get(c).copied())?;
        results.reserve(template.resources.len());
        let other = match other {
            Some(state) => Some(update::Other::load(state, &sctx, &results, &self.parsed)?),
            None => None,
        };
        let rows = rows.await.map_err(update::background_read)??;
        results.record_live(&rows);
        let reported = rows
            .iter()
            .map(|r| {
                let step = (r.status, r.status_reason.clone(), r.physical_id.clone());
                (r.logical_id.clone(), step)
            })
            .collect();
        // A nested stack's digest, or a launch configuration's of its
        // members' template.
        let recorded_digests = rows
            .iter()
            .filter_map(|r| {
                let members = r.properties.get("MemberProperties");
                let digest = r
                    .properties
                    .get(crate::nested::DIGEST)
                    .or_else(|| members.and_then(|m| m.get(crate::nested::DIGEST)))?;
                Some((r.logical_id.clone(), digest.clone()))
            })
            .collect();
        let options = operation
            .as_ref()
            .map(|o| OperationOptions::from_value(&o.options))
            .unwrap_or_default();
        let nested = options.nested_templates.clone();
        let update = match other {
            Some(other) => Some(update::UpdateState {
                other,
                policy: match &operation {
                    Some(o)
                        if matches!(o.kind, OperationKind::Update | OperationKind::Reconcile) =>
                    {
                        stack_policy::of_operation(options.stack_policy.as_deref())?
                    }
                    _ => None,
                },
                upgrade_types: options.upgrade_types.clone(),
            }),
            None => None,
        };
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
            lease_granted_ms: AtomicI64::new(0),
            store_failure: std::sync::Mutex::new(None),
            stops: Stops::new(deadline),
            nested,
            recorded_digests,
            state: this,
            update,
            hooks,
            reported: std::sync::Mutex::new(reported),
            loaded_rows: std::sync::Mutex::new(Some(rows)),
            loaded_operation: std::sync::Mutex::new(Some(operation)),
        })
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

    /// Writes a new stack with its operation's record in one write, under
    /// the operation's lease, and opens its history entry.
    async fn insert_operating(
        &self,
        stack: &StackRecord,
        first: &EventRecord,
        operation: &OperationRecord,
    ) -> Result<(), EngineError> {
        let lease = self
            .store
            .insert_stack(
                stack,
                first,
                Some(operation),
                &self.operation_owner(),
                self.lease_ttl_ms(),
            )
            .await?;
        self.started_under(&lease);
        self.open_history(&lease, stack, operation.kind, None).await
    }

    /// Takes the stack's lease to go on with the operation its record
    /// keeps (continue-rollback, RollbackStack): refused when the stack
    /// moved on since `stack` was read (`while`: what was being done);
    /// then a history entry of `kind`, and the operation loaded.
    async fn resume_kept_operation(
        &self,
        stack: &StackRecord,
        kind: OperationKind,
        while_: &str,
    ) -> Result<Op, EngineError> {
        let lease = self.lease_for_operation(&stack.stack_id).await?;
        if self.current_status(stack).await? != stack.status {
            let _ = self.store.release_lease(&lease).await;
            return Err(EngineError::Validation(format!(
                "Stack:{} changed while {while_}; try again",
                stack.stack_id
            )));
        }
        self.started_under(&lease);
        self.open_history(&lease, stack, kind, None).await?;
        self.load(stack, lease).await
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
    /// status event, its history entry (of the operation's kind, with
    /// `details`), the change set it executes, and the rows it rewrites.
    async fn begin_operation(
        &self,
        lease: &Lease,
        operation: OperationRecord,
        mut stack: StackRecord,
        status: StackStatus,
        change_set: Option<&crate::stack::ChangeSetRecord>,
        (details, rows): (Option<Value>, RowRewrite),
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
                    rows: rows.put,
                    removed_rows: rows.removed,
                },
            )
            .await?;
        Ok(())
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
        let written = self.store.put_resource(&op.lease, r, events).await;
        self.held(op, &r.logical_id, written)
    }

    /// Whether a write of the operation held; a failed one (lost lease, state
    /// file error) aborts the operation.
    fn held(&self, op: &Op, logical_id: &str, written: Result<(), StoreError>) -> bool {
        match written {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(stack = %op.stack.stack_name, resource = %logical_id, "cannot record resource state: {e}");
                op.note_store_failure(e);
                op.aborted.store(true, Ordering::SeqCst);
                false
            }
        }
    }

    /// Runs `work` over the graph `preds` (see [`dag::run`]); a lost lease
    /// during it is an error.
    ///
    /// Each node's work runs in a `resource` span (`step` names the phase,
    /// `name_of` the node's logical id): the operation's trace has one span
    /// per resource step, its provider calls inside it.
    #[allow(clippy::too_many_arguments)]
    async fn schedule<F, Fut>(
        &self,
        op: &Op,
        preds: &[Vec<usize>],
        initial: Vec<Outcome>,
        (stop_on_failure, cancellable): (bool, bool),
        (step, name_of): (&'static str, &(dyn Fn(usize) -> String + Sync)),
        work: F,
    ) -> Result<Vec<Outcome>, EngineError>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = (usize, bool)>,
    {
        let work = |i: usize| {
            use tracing::Instrument;
            // The fields are evaluated only when the span is recorded: no
            // work per resource otherwise.
            let span = tracing::info_span!(
                "resource",
                otel.name = %format!("{step} {}", name_of(i)),
                cairn.step = step,
                cairn.logical_id = %name_of(i),
                cairn.stack = %op.stack.stack_name,
                cairn.succeeded = tracing::field::Empty,
            );
            // On the heap: a node's work (a nested stack's whole operation)
            // is large, and the span's wrapper must not add to the stack.
            let running = Box::pin(work(i));
            async move {
                let (i, ok) = running.await;
                tracing::Span::current().record("cairn.succeeded", ok);
                (i, ok)
            }
            .instrument(span)
        };
        let outcomes = dag::run(
            preds,
            initial,
            self.config.engine.max_concurrency,
            stop_on_failure,
            async {
                let cancelled = async {
                    let mut cancel = op.stops.cancel.subscribe();
                    if !cancellable || cancel.wait_for(|c| *c).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                // TimeoutInMinutes: the work in flight is cancelled.
                let timed_out = async {
                    // Only the create phase is bounded: the rollback that
                    // follows a timeout runs to its end.
                    let Some(deadline) = op
                        .stops
                        .deadline
                        .filter(|_| !op.stops.timed_out.load(Ordering::SeqCst))
                    else {
                        return std::future::pending::<()>().await;
                    };
                    let left = deadline
                        .duration_since(std::time::SystemTime::now())
                        .unwrap_or(Duration::ZERO);
                    tokio::time::sleep(left).await;
                    op.stops.timed_out.store(true, Ordering::SeqCst);
                };
                // A rollback trigger fired: the work in flight is cancelled.
                let alarmed = async {
                    let mut alarm = op.stops.alarm.subscribe();
                    if op.stops.triggers_done.load(Ordering::SeqCst)
                        || alarm.wait_for(Option::is_some).await.is_err()
                    {
                        std::future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    _ = cancelled => {}
                    _ = timed_out => {}
                    _ = alarmed => {}
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

    /// The stack's rows as stored now: `read` when the caller has them (the
    /// load's, for the first phase before any write of the operation),
    /// else read now.
    async fn rows_or_read(
        &self,
        op: &Op,
        read: Option<Vec<ResourceRecord>>,
    ) -> Result<Vec<ResourceRecord>, EngineError> {
        match read {
            Some(rows) => Ok(rows),
            None => Ok(self.store.resources(&op.stack.stack_id).await?),
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
}

impl Engine {
    /// Resumes every in-progress operation whose owner is gone (crashed),
    /// one after the other, and drives each to a terminal status. Returns
    /// the stack ids resumed.
    pub async fn resume_abandoned(self: &Arc<Self>) -> Result<Vec<String>, EngineError> {
        self.claims().break_dead_leases().await?;
        let mut resumed = Vec::new();
        loop {
            let Some(stack_id) = self.claims().claim(1, false).await?.pop() else {
                break;
            };
            // Driven already in this loop and still in progress: its
            // operation stopped here (lost lease); leave it to the others.
            if resumed.contains(&stack_id) {
                self.claims().hand_off(&stack_id).await?;
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

    /// Traces exported: the operation's first run records its trace
    /// context; a run that resumes it (after a crash, on another engine)
    /// links to that trace. The operation's kind is named on the span.
    /// Nothing is read or written when no trace is exported.
    async fn trace_operation(&self, op: &Op) {
        let Some(ours) = trace::current_traceparent() else {
            return;
        };
        let Ok(Some(operation)) = self.store.operation(&op.stack.stack_id).await else {
            return;
        };
        let span = tracing::Span::current();
        span.record("cairn.kind", operation.kind.as_str());
        let mut options = OperationOptions::from_value(&operation.options);
        match &options.trace {
            Some(first) if first[..36.min(first.len())] != ours[..36.min(ours.len())] => {
                trace::link(&span, first);
            }
            Some(_) => {}
            None => {
                options.trace = Some(ours);
                let value = options.to_value();
                if let Err(e) = self.store.set_operation_options(&op.lease, &value).await {
                    tracing::warn!("cannot record the operation's trace context: {e}");
                }
            }
        }
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
        let mut asked_ms = signals::now_ms();
        let lease = self
            .store
            .acquire_lease(&stack.stack_id, &owner, self.lease_ttl_ms())
            .await?;
        // How often the operation carried on after the state database
        // failed a write while the lease stayed this engine's.
        let mut carried_on = 0u32;
        loop {
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
            op.lease_granted(asked_ms);
            let heartbeat = {
                let store = self.store.clone();
                let lease = lease.clone();
                let op = op.clone();
                let ttl = self.lease_ttl_ms();
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis((ttl / 3) as u64)).await;
                        let asked_ms = signals::now_ms();
                        match store.renew_lease(&lease, ttl).await {
                            Ok(()) => op.lease_granted(asked_ms),
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
                            op.stops.cancel.send_replace(true);
                            return;
                        }
                    }
                })
            });
            // Rollback triggers are read while the operation rolls forward.
            let trigger_watch = matches!(
                stack.status,
                StackStatus::CreateInProgress | StackStatus::UpdateInProgress
            )
            .then(|| {
                let (engine, op) = (self.clone(), op.clone());
                tokio::spawn(async move { engine.watch_triggers(&op).await })
            });
            // Every log line of the operation carries which stack and engine
            // it belongs to (JSON logs show the span's fields).
            // The span is the operation's in the trace too (its kind, the
            // stack, the change set, the outcome).
            let span = tracing::info_span!(
                "operation",
                otel.name = %format!("{} {}", op.stack.status, op.stack.stack_name),
                otel.status_code = tracing::field::Empty,
                stack = %op.stack.stack_name,
                stack_id = %op.stack.stack_id,
                status = %op.stack.status,
                engine = %lease.owner,
                cairn.kind = tracing::field::Empty,
                cairn.outcome = tracing::field::Empty,
                trace_id = tracing::field::Empty,
            );
            trace::record_trace_id(&span);
            let result = {
                use tracing::Instrument;
                async {
                    tracing::info!("operation driven");
                    self.trace_operation(&op).await;
                    let result = self.drive(&op).await;
                    let span = tracing::Span::current();
                    match &result {
                        Ok(status) => {
                            span.record("cairn.outcome", status.as_str());
                            let s = status.as_str();
                            if s.ends_with("FAILED") || s.contains("ROLLBACK") {
                                span.record("otel.status_code", "ERROR");
                            }
                            tracing::info!(ended = %status, "operation stopped")
                        }
                        Err(e) => {
                            span.record("otel.status_code", "ERROR");
                            tracing::warn!("operation stopped: {e}")
                        }
                    }
                    result
                }
                .instrument(span)
                .await
            };
            heartbeat.abort();
            for w in [cancel_watch, trigger_watch].into_iter().flatten() {
                w.abort();
            }
            if op.aborted.load(Ordering::SeqCst)
                || matches!(
                    result,
                    Err(EngineError::Store(
                        StoreError::LeaseLost(_) | StoreError::Database(_)
                    ))
                )
            {
                // The PostgreSQL state failed a write (a lost connection, a
                // restart) while the lease stays this engine's: not a takeover.
                // Once the database answers again, the operation carries on
                // from what it recorded, under the same lease (no wait for the
                // lease to run out).
                let failure = match &result {
                    Err(EngineError::Store(StoreError::Database(why))) => Some(why.clone()),
                    _ => op.take_store_failure().and_then(|e| match e {
                        StoreError::Database(why) => Some(why),
                        _ => None,
                    }),
                };
                if let Some(why) = failure {
                    let asked = signals::now_ms();
                    if carried_on < MAX_CARRY_ON && self.database_back(&lease).await {
                        // database_back renewed it.
                        asked_ms = asked;
                        carried_on += 1;
                        tracing::warn!(stack = %lease.stack_id, owner = %lease.owner, "the state database did not take a write ({why}); it answers again and the lease is still this engine's: the operation carries on from what it recorded");
                        continue;
                    }
                    tracing::warn!(stack = %lease.stack_id, owner = %lease.owner, "stopped the operation: the state database did not take a write ({why}) and did not come back in time; the operation resumes from what it recorded once an engine reaches the database");
                    return Err(StoreError::Database(why).into());
                }
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
                // resumes from it. So does an update kept in UPDATE_FAILED
                // (`kept`): the next update or RollbackStack starts from it.
                let kept = status == StackStatus::UpdateFailed
                    && self
                        .store
                        .operation(&lease.stack_id)
                        .await?
                        .is_some_and(|o| o.kind == OperationKind::Update);
                if status != StackStatus::UpdateRollbackFailed && !kept {
                    self.store.clear_operation(&lease).await?;
                }
                self.store.release_lease(&lease).await?;
            }
            return Ok(status);
        }
    }

    /// Whether the state database answers again within the lease's time
    /// and the lease is still `lease` (renewed): then the operation may
    /// carry on under it.
    async fn database_back(&self, lease: &Lease) -> bool {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(self.lease_ttl_ms() as u64);
        let mut pause = Duration::from_millis(100);
        loop {
            if self.store.ping().await.is_ok() {
                return matches!(
                    self.store.lease_owner(&lease.stack_id).await,
                    Ok(Some(owner)) if owner == lease.owner
                ) && self
                    .store
                    .renew_lease(lease, self.lease_ttl_ms())
                    .await
                    .is_ok();
            }
            if tokio::time::Instant::now() + pause > deadline {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    async fn drive(&self, op: &Op) -> Result<StackStatus, EngineError> {
        // The rows the load read serve a create's or a delete's first
        // phase; nothing else keeps them.
        let loaded_rows = op.loaded_rows.lock().ok().and_then(|mut rows| rows.take());
        let loaded = op.loaded_operation.lock().ok().and_then(|mut o| o.take());
        let operation = match loaded {
            Some(operation) => operation,
            None => self.store.operation(&op.stack.stack_id).await?,
        };
        let options = operation
            .as_ref()
            .map(|o| OperationOptions::from_value(&o.options))
            .unwrap_or_default();
        if operation.is_some_and(|o| o.kind == OperationKind::Reconcile)
            && op.stack.status == StackStatus::UpdateInProgress
        {
            let plan = options.plan.unwrap_or_default();
            return self.reconciles().drive_reconcile(op, plan).await;
        }
        let retain = options.retain;
        match op.stack.status {
            StackStatus::CreateInProgress => {
                let rows = self.rows_or_read(op, loaded_rows).await?;
                if rows.is_empty() {
                    if let Some(refusal) =
                        self.hooks().stack_verdict(op, HookAction::Create).await?
                    {
                        return self
                            .creates()
                            .fail_create(op, &format!("{refusal}. "))
                            .await;
                    }
                    match self.protocol().check_parameter_values(op).await {
                        Err(reason) => {
                            return self.creates().fail_create(op, &format!("{reason}. ")).await
                        }
                        Ok(warnings) => {
                            for w in warnings {
                                self.set_status(op, StackStatus::CreateInProgress, Some(&w))
                                    .await?;
                            }
                        }
                    }
                }
                let failed = self.creates().create_all(op, rows).await?;
                if op.stops.timed_out.load(Ordering::SeqCst) {
                    return self.creates().fail_create(op, TIMED_OUT).await;
                }
                if let Some(reason) = self.take_alarm(op) {
                    return self.creates().fail_create(op, &reason).await;
                }
                if failed.is_empty() {
                    if let Monitored::Alarm(reason) = self.monitor(op, false).await {
                        return self.creates().fail_create(op, &reason).await;
                    }
                    match self.creates().finish_create(op).await {
                        Ok(()) => {
                            return self.set_status(op, StackStatus::CreateComplete, None).await
                        }
                        Err(reason) => return self.creates().fail_create(op, &reason).await,
                    }
                }
                let reason = format!(
                    "The following resource(s) failed to create: [{}]. ",
                    failed.join(", ")
                );
                self.creates().fail_create(op, &reason).await
            }
            StackStatus::RollbackInProgress => self.creates().rollback(op).await,
            StackStatus::UpdateInProgress
            | StackStatus::UpdateCompleteCleanupInProgress
            | StackStatus::UpdateRollbackInProgress
            | StackStatus::UpdateRollbackCompleteCleanupInProgress => {
                self.updates().drive_update(op).await
            }
            StackStatus::DeleteInProgress => {
                // Judged before anything of the stack is deleted.
                let rows = self.rows_or_read(op, loaded_rows).await?;
                let untouched = rows.iter().all(|r| {
                    !matches!(
                        r.status,
                        ResourceStatus::DeleteInProgress
                            | ResourceStatus::DeleteComplete
                            | ResourceStatus::DeleteFailed
                            | ResourceStatus::DeleteSkipped
                    )
                });
                // A stack with nothing to delete (its create rolled back)
                // is never kept by a hook.
                if untouched && rows.iter().any(crate::plan::is_live) {
                    if let Some(refusal) =
                        self.hooks().stack_verdict(op, HookAction::Delete).await?
                    {
                        return self
                            .set_status(op, StackStatus::DeleteFailed, Some(&refusal))
                            .await;
                    }
                }
                self.deletes()
                    .delete_phase(op, &retain, true, Some(rows))
                    .await
            }
            StackStatus::ImportInProgress => self.imports().drive_import(op).await,
            StackStatus::ImportRollbackInProgress => self.imports().rollback_import(op).await,
            other => Err(EngineError::Validation(format!(
                "Stack [{}] is in {other} state, which this version of Cairn cannot resume",
                op.stack.stack_name
            ))),
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

/// What `template`'s parameters decide about its nested stacks before
/// anything runs: the resources whose condition is false, and the
/// TemplateURLs that are not literals, computed from the parameters,
/// pseudo parameters, mappings and conditions (one that depends on a
/// resource is refused by the static pass).
fn root_values(
    registry: &Registry,
    template: &Template,
    params: &ParameterValues,
    sctx: &StackContext,
) -> crate::nested::RootValues {
    let results = Results::static_pass(HashMap::new());
    let Ok(ev) = Evaluator::new(template, params, sctx, &results) else {
        return Default::default();
    };
    let off = template
        .resources
        .iter()
        .filter(|r| r.condition.as_deref().is_some_and(|c| !ev.condition(c)))
        .map(|r| r.logical_id.clone())
        .collect();
    let urls = template
        .resources
        .iter()
        .filter(|r| crate::nested::is_stack(registry.canonical(&r.type_name)))
        .filter_map(|r| {
            let url = r.properties.get("TemplateURL")?;
            if url.is_string() {
                return None;
            }
            let at = child(
                &child(&child("/Resources", &r.logical_id), "Properties"),
                "TemplateURL",
            );
            match ev.eval(url, &at) {
                Ok(Evaluated::Value(Value::String(u))) => Some((r.logical_id.clone(), u)),
                _ => None,
            }
        })
        .collect();
    crate::nested::RootValues { urls, off }
}

/// A nested stack's TemplateURL is read before the operation starts: it
/// may not depend on a resource.
fn check_template_url(
    template: &Template,
    ev: &Evaluator<'_>,
    logical_id: &str,
) -> Result<(), TemplateError> {
    let Some(url) = template
        .resource(logical_id)
        .and_then(|r| r.properties.get("TemplateURL"))
    else {
        return Ok(());
    };
    let at = child(
        &child(&child("/Resources", logical_id), "Properties"),
        "TemplateURL",
    );
    match ev.eval(url, &at)? {
        Evaluated::Value(_) => Ok(()),
        _ => Err(TemplateError::new(format!(
            "Template error: TemplateURL of {logical_id} depends on a resource: Cairn reads nested templates before the operation starts; build it from parameters, mappings and pseudo parameters"
        ))
        .at(&at)
        .locate(&template.source_map)),
    }
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
    // The Rules' assertions on the parameter values, before anything runs.
    crate::template::rules::check(&template.rules, &ev)
        .map_err(|e| one(e.locate(&template.source_map)))?;
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
            if crate::nested::is_stack(registry.canonical(&r.type_name)) {
                check_template_url(template, &ev, name)?;
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
    // Heat does not validate outputs by resolving them: one that cannot be
    // resolved is that output's `output_error` once the stack is done.
    let outputs = if template.heat {
        &[][..]
    } else {
        &template.outputs[..]
    };
    for o in outputs {
        if o.condition.as_deref().is_some_and(|c| !ev.condition(c)) {
            continue;
        }
        let at = child("/Outputs", &o.name);
        if let Err(e) = ev.eval(&o.value, &child(&at, "Value")) {
            errors.push(e);
            if !all {
                return Err(errors);
            }
        }
        // Export names are known before any resource is made: they may not
        // read one (CloudFormation's cross-stack reference rules).
        if let Some(name) = &o.export_name {
            let path = child(&child(&at, "Export"), "Name");
            let checked = match ev.eval(name, &path) {
                Ok(Evaluated::Pending) => Err(crate::template::template_error(format!(
                    "The Export Name of output {} cannot use Ref or Fn::GetAtt of a resource",
                    o.name
                ))
                .at(&path)
                .locate(&template.source_map)),
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = checked {
                errors.push(e);
                if !all {
                    return Err(errors);
                }
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

#[cfg(test)]
mod lease_tests {
    use super::surely_held;

    #[test]
    fn a_lease_is_surely_held_only_in_the_first_half_of_its_time() {
        let ttl = 15_000;
        assert!(surely_held(1_000, 1_000, ttl));
        assert!(surely_held(1_000, 8_499, ttl));
        // Half its time gone: the store is asked.
        assert!(!surely_held(1_000, 8_500, ttl));
        assert!(!surely_held(1_000, 60_000, ttl));
        // Never granted, or a clock that went back: asked.
        assert!(!surely_held(0, 1_000, ttl));
        assert!(!surely_held(5_000, 4_000, ttl));
    }
}
