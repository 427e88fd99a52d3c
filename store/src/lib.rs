//! `cairn-store`: durable state behind one trait: stacks, resources,
//! events, operations, exports and leases. The engine speaks only this
//! trait; the backends are crates of their own (`cairn-store-sqlite`, the
//! embedded default; `cairn-store-postgres`, several engines on one
//! database), so the engine links no database driver.
//!
//! Here: the traits and what they exchange, `crash` (feature `testing`: a
//! store that dies at its k-th write) and `conformance` (feature
//! `conformance`: what every backend must do, run by each backend's tests).
//! It knows the stack model (`cairn_model::stack`) and nothing of the
//! engine, the transports or the template language.

#![forbid(unsafe_code)]

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "testing")]
pub mod crash;
#[cfg(feature = "testing")]
pub mod memory;

use cairn_model::audit::{AuditQuery, AuditRecord};
use cairn_model::registry::{
    NewTypeVersion, RegistrationRecord, TypeConfigurationRecord, TypeVersionRecord,
};
use cairn_model::stack::{
    ChangeSetRecord, EventRecord, HistoryRecord, ResourceRecord, SignalRecord, StackRecord,
    StackStatus,
};

/// Every table of a state, in the order `cairn migrate-state` copies them.
pub const TABLES: &[&str] = &[
    "stacks",
    "leases",
    "resources",
    "events",
    "operations",
    "history",
    "change_sets",
    "groups",
    "exports",
    "imports",
    "drift_detections",
    "settings",
    "callback_responses",
    "signals",
    "type_registrations",
    "type_versions",
    "type_registry_state",
    "type_configurations",
    "notification_targets",
    "stack_refactors",
    "audit_records",
    "audit_exports",
    "console_revocations",
];

/// One value of a copied row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// One table's rows, oldest first (`cairn migrate-state`).
#[derive(Debug, Clone, PartialEq)]
pub struct TableDump {
    pub name: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// How long a kept custom-resource response is kept (a request waits at most
/// an hour, its ServiceTimeout's bound).
pub const CALLBACK_RESPONSE_TTL_MS: i64 = 24 * 3600 * 1000;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("Stack [{0}] already exists")]
    StackExists(String),
    #[error("Stack with id {0} does not exist")]
    NoSuchStack(String),
    #[error("stack {stack} is being operated on by {owner}; try again when it finishes")]
    Busy { stack: String, owner: String },
    #[error("the lease on stack {0} was taken over by another process; this operation stopped")]
    LeaseLost(String),
    #[error("Export with name {name} is already exported by stack {stack}")]
    ExportExists { name: String, stack: String },
    #[error("ChangeSet [{0}] already exists")]
    ChangeSetExists(String),
    #[error("state file error: {0}")]
    Backend(String),
    /// A failure of the PostgreSQL state (with PostgreSQL's own reason).
    #[error("state database error: {0}")]
    Database(String),
    /// No live version `version_id` of `type_name` (or no such type).
    #[error("Type {type_name}{} not found", version_id.as_ref().map(|v| format!(" version {v}")).unwrap_or_default())]
    TypeNotFound {
        type_name: String,
        version_id: Option<String>,
    },
    /// The default version while other live versions remain.
    #[error("Version '{version_id}' is the default version of {type_name} and cannot be deregistered while other versions exist; make another version the default first (cairn type set-default)")]
    DefaultTypeVersion {
        type_name: String,
        version_id: String,
    },
    #[error("Registration {0} not found")]
    NoSuchRegistration(String),
    /// The registration is no longer IN_PROGRESS (it ended, or was settled
    /// FAILED because its engine stopped): nothing more is recorded of it.
    #[error("Registration {0} has already ended")]
    RegistrationEnded(String),
}

impl StoreError {
    /// No live version `version_id` of `type_name`.
    pub fn type_not_found(type_name: &str, version_id: &str) -> StoreError {
        StoreError::TypeNotFound {
            type_name: type_name.into(),
            version_id: Some(version_id.into()),
        }
    }
}

/// The right to run an operation on one stack. `token` is a fencing token: every
/// write made under the lease checks it, so a process that lost its lease cannot
/// overwrite the new owner's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub stack_id: String,
    pub owner: String,
    pub token: i64,
}

/// An operation claimed by [`Store::claim_operations`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub lease: Lease,
    /// The owner whose lease had run out (a takeover from a dead or stalled
    /// engine); `None` when the operation had been handed off (released).
    pub taken_from: Option<String>,
}

/// The operation a stack is running, kept so that a crashed one is resumed.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationRecord {
    pub stack_id: String,
    pub kind: cairn_model::stack::OperationKind,
    /// Operation options (JSON), e.g. retained resources.
    pub options: serde_json::Value,
    pub started_at: String,
}

/// What starting an operation on an existing stack writes, at once (see
/// [`Store::begin_operation`]).
#[derive(Debug, Clone)]
pub struct OperationStart {
    /// The operation's record.
    pub operation: OperationRecord,
    /// The change set being executed: marked so, the stack's others go.
    pub change_set_id: Option<String>,
    /// The stack's new fields, its status and status reason included.
    pub stack: StackRecord,
    /// The event of that status.
    pub event: EventRecord,
    /// The operation's history entry.
    pub history: HistoryRecord,
    /// Rows rewritten in the same write: a kept failed update's rows as
    /// the update that continues it starts from them (folded once, with
    /// the start, so a resume never folds this operation's own work).
    pub rows: Vec<ResourceRecord>,
    /// Rows removed in the same write (logical ids).
    pub removed_rows: Vec<String>,
}

/// The stacks themselves: their records and statuses.
#[async_trait::async_trait]
pub trait Stacks: Send + Sync {
    /// Records a new stack with its lease held by `owner` and the operation
    /// it starts with, atomically (no other process may see it in progress
    /// without an owner, and a crash cannot keep the stack and lose what
    /// the operation needs to resume: its timeout, its nested templates).
    /// A live stack with the same name is an error.
    async fn insert_stack(
        &self,
        stack: &StackRecord,
        first_event: &EventRecord,
        operation: Option<&OperationRecord>,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError>;

    /// A live stack by name, or any stack (also deleted ones) by id.
    async fn find_stack(&self, name_or_id: &str) -> Result<Option<StackRecord>, StoreError>;

    /// All stacks, deleted ones included, oldest first.
    async fn list_stacks(&self) -> Result<Vec<StackRecord>, StoreError>;

    /// Stacks whose status is an `*_IN_PROGRESS` one.
    async fn in_progress_stacks(&self) -> Result<Vec<StackRecord>, StoreError>;

    /// Sets the stack's status and records the stack event, atomically. A
    /// terminal status also ends the stack's open history entry and removes
    /// the change set being executed (CloudFormation lists none after an
    /// execution; the history entry names it).
    async fn set_stack_status(
        &self,
        lease: &Lease,
        status: StackStatus,
        reason: Option<&str>,
        event: &EventRecord,
    ) -> Result<(), StoreError>;

    /// Replaces the stack's stored fields (outputs, template, parameters).
    async fn save_stack(&self, lease: &Lease, stack: &StackRecord) -> Result<(), StoreError>;

    /// Sets the stack's termination protection (no lease: it may change
    /// while an operation runs, which does not write it back). False when
    /// there is no such stack.
    async fn set_termination_protection(
        &self,
        stack_id: &str,
        enabled: bool,
    ) -> Result<bool, StoreError>;

    /// Replaces the stack's policy (the document as given; no lease, like
    /// termination protection, and `save_stack` never writes it). False
    /// when there is no such stack.
    async fn set_stack_policy(&self, stack_id: &str, policy: &str) -> Result<bool, StoreError>;
}

/// Which engine runs a stack's operation: leases, their fencing tokens,
/// claims.
#[async_trait::async_trait]
pub trait Leases: Send + Sync {
    /// Takes the stack's lease (taking over a stale one). `Busy` while a live
    /// owner holds it.
    async fn acquire_lease(
        &self,
        stack_id: &str,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError>;

    async fn renew_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError>;

    /// The current lease holder of a stack, if any lease is unexpired.
    async fn lease_owner(&self, stack_id: &str) -> Result<Option<String>, StoreError>;

    /// Expires the lease if `owner` still holds it (the owner is known dead).
    async fn break_lease(&self, stack_id: &str, owner: &str) -> Result<(), StoreError>;

    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Gives up the lease of an operation not started yet so that any
    /// engine with room claims it at once ([`Store::claim_operations`] with
    /// `handed_off`), and anything else once `ttl_ms` has passed.
    async fn hand_off_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError>;

    /// Claims up to `owners.len()` in-progress operations that no engine
    /// holds (lease run out, or handed off when `handed_off`), oldest first,
    /// the i-th under `owners[i]`, atomically: two engines claiming at once
    /// never get the same operation (PostgreSQL: `FOR UPDATE SKIP LOCKED`).
    async fn claim_operations(
        &self,
        owners: &[String],
        ttl_ms: i64,
        handed_off: bool,
    ) -> Result<Vec<Claim>, StoreError>;
}

/// The operation a stack is running (to resume it) and the stack's
/// history of operations.
#[async_trait::async_trait]
pub trait Operations: Send + Sync {
    /// Starts an operation on an existing stack in one write: its record,
    /// the change set it executes, the stack's new fields and status with
    /// the status event, its history entry, and the rows it rewrites or
    /// removes as it starts. A crash leaves the stack
    /// either untouched or with the whole operation recorded (never, say,
    /// showing the new template with nothing in progress).
    async fn begin_operation(
        &self,
        lease: &Lease,
        start: &OperationStart,
    ) -> Result<(), StoreError>;

    async fn operation(&self, stack_id: &str) -> Result<Option<OperationRecord>, StoreError>;

    async fn clear_operation(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Replaces the options of the stack's operation (fenced by `lease`):
    /// what the operation learnt that a resume must know (a stack hook's
    /// IN_PROGRESS).
    async fn set_operation_options(
        &self,
        lease: &Lease,
        options: &serde_json::Value,
    ) -> Result<(), StoreError>;

    /// Counts one more attempt to resume the stack's abandoned operation and
    /// returns how many attempts in a row found no progress since the one
    /// before (no event recorded between them); 1 after progress.
    async fn note_resume(&self, stack_id: &str) -> Result<u32, StoreError>;

    /// Asks the process running the stack's update to cancel it (no lease:
    /// the requester is not the owner). False when no update is recorded.
    async fn request_cancel(&self, stack_id: &str) -> Result<bool, StoreError>;

    /// Whether a cancel of the stack's running operation was requested.
    async fn cancel_requested(&self, stack_id: &str) -> Result<bool, StoreError>;

    /// Starts a history entry (ended by the operation's terminal status).
    async fn open_history(&self, lease: &Lease, entry: &HistoryRecord) -> Result<(), StoreError>;

    /// Sets the details of the stack's open history entry.
    async fn set_history_details(
        &self,
        lease: &Lease,
        details: &serde_json::Value,
    ) -> Result<(), StoreError>;

    /// The stack's operations, oldest first.
    async fn history(&self, stack_id: &str) -> Result<Vec<HistoryRecord>, StoreError>;
}

/// A stack's resource rows and its instance groups' states.
#[async_trait::async_trait]
pub trait Resources: Send + Sync {
    /// Writes one resource row and its events (oldest first), atomically.
    /// The events are handed over: a store that queues the write keeps
    /// them instead of copying each of their strings (one to three events
    /// with every step of every resource).
    async fn put_resource(
        &self,
        lease: &Lease,
        resource: &ResourceRecord,
        events: Vec<EventRecord>,
    ) -> Result<(), StoreError>;

    /// Removes a resource from the stack (it is gone, or disassociated) and
    /// records its events, atomically.
    async fn remove_resource(
        &self,
        lease: &Lease,
        logical_id: &str,
        events: &[EventRecord],
    ) -> Result<(), StoreError>;

    /// Forgets every resource's update journal (the update or its rollback is over).
    async fn clear_journals(&self, lease: &Lease) -> Result<(), StoreError>;

    async fn resources(&self, stack_id: &str) -> Result<Vec<ResourceRecord>, StoreError>;

    /// Writes an instance group's state (members, rollout cursor) with
    /// `events`, in one transaction; `None` removes the group. Keyed by the
    /// group's physical id, so a replaced group and its replacement coexist.
    async fn put_group(
        &self,
        lease: &Lease,
        logical_id: &str,
        physical_id: &str,
        state: Option<&serde_json::Value>,
        events: &[EventRecord],
    ) -> Result<(), StoreError>;

    /// One group's state.
    async fn group(
        &self,
        stack_id: &str,
        physical_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError>;

    /// Every group of the stack: (logical id, physical id, state).
    async fn groups(
        &self,
        stack_id: &str,
    ) -> Result<Vec<(String, String, serde_json::Value)>, StoreError>;
}

/// A stack's events.
#[async_trait::async_trait]
pub trait Events: Send + Sync {
    /// Records events that change no row (an update's cleanup reports on
    /// physical resources that are no longer a row's current one).
    async fn put_events(&self, lease: &Lease, events: &[EventRecord]) -> Result<(), StoreError>;

    /// Events, oldest first.
    async fn events(&self, stack_id: &str) -> Result<Vec<EventRecord>, StoreError> {
        self.events_from(stack_id, 0).await
    }

    /// Events after the first `skip` ones, oldest first (for following an
    /// operation without re-reading its history).
    async fn events_from(
        &self,
        stack_id: &str,
        skip: usize,
    ) -> Result<Vec<EventRecord>, StoreError>;

    /// At most `limit` events after the first `skip`, oldest first (a page
    /// of a long history: the console's).
    async fn events_page(
        &self,
        stack_id: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let mut events = self.events_from(stack_id, skip).await?;
        events.truncate(limit);
        Ok(events)
    }

    /// How many events the stack has (a version: every operation adds some).
    async fn event_count(&self, stack_id: &str) -> Result<usize, StoreError>;

    /// Rings (with the stack id) when any process sharing this state
    /// records events, so a follower waits for news instead of polling.
    /// `None`: this store cannot tell; poll.
    fn event_bell(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }
}

/// What reaches a stack from outside, without a lease: custom-resource
/// handlers' responses (and the secret that signs their URLs) and resource
/// signals.
#[async_trait::async_trait]
pub trait Inbox: Send + Sync {
    /// The secret that signs custom-resource ResponseURLs, made on first use
    /// and shared by every engine on this state, so that any of them can
    /// check a response sent to another's URL.
    async fn callback_secret(&self) -> Result<Vec<u8>, StoreError>;

    /// Keeps a handler's response (its raw body) to `request_id` for the
    /// engine that waits for it. False when one is already kept (only the
    /// first counts).
    async fn put_callback_response(
        &self,
        request_id: &str,
        body: &[u8],
    ) -> Result<bool, StoreError>;

    /// The kept responses to any of `request_ids`.
    async fn callback_responses(
        &self,
        request_ids: &[String],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Keeps a signal sent to a resource, durably, before it is
    /// acknowledged; one with the `unique_id` of a kept one replaces it.
    /// Anyone may signal: no lease.
    async fn put_signal(&self, signal: &SignalRecord) -> Result<(), StoreError>;

    /// Keeps a signal unless one with its `unique_id` is kept already;
    /// whether it was kept. Signals that carry no id are numbered by the
    /// receiver, which tries the next number when two arrive at once.
    async fn add_signal(&self, signal: &SignalRecord) -> Result<bool, StoreError>;

    /// The signals kept for a resource, in the order they first arrived.
    async fn signals(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<Vec<SignalRecord>, StoreError>;

    /// Forgets a resource's signals (its new create waits for new ones).
    async fn clear_signals(&self, stack_id: &str, logical_id: &str) -> Result<(), StoreError>;
}

/// Change sets.
#[async_trait::async_trait]
pub trait ChangeSets: Send + Sync {
    /// Records a new change set; a set of the same name on the stack is an error.
    async fn put_change_set(&self, cs: &ChangeSetRecord) -> Result<(), StoreError>;

    /// A change set by id, or by name within a stack.
    async fn find_change_set(
        &self,
        stack_id: &str,
        name_or_id: &str,
    ) -> Result<Option<ChangeSetRecord>, StoreError>;

    /// The stack's change sets, oldest first.
    async fn change_sets(&self, stack_id: &str) -> Result<Vec<ChangeSetRecord>, StoreError>;

    async fn delete_change_set(&self, change_set_id: &str) -> Result<(), StoreError>;

    /// Marks an AVAILABLE set OBSOLETE, with a reason.
    async fn obsolete_change_set(
        &self,
        change_set_id: &str,
        reason: &str,
    ) -> Result<(), StoreError>;
}

/// Cross-stack exports and who imports them.
#[async_trait::async_trait]
pub trait Exports: Send + Sync {
    /// Publishes the stack's exports (replacing its earlier ones). A name another
    /// stack exports is an error naming that stack.
    async fn put_exports(
        &self,
        lease: &Lease,
        exports: &[(String, String)],
    ) -> Result<(), StoreError>;

    async fn delete_exports(&self, lease: &Lease) -> Result<(), StoreError>;

    /// An export's value and the id of the stack exporting it.
    async fn export(&self, name: &str) -> Result<Option<(String, String)>, StoreError>;

    /// All exports: (name, value, exporting stack id).
    async fn exports(&self) -> Result<Vec<(String, String, String)>, StoreError>;

    /// Records which exports the stack imports (replacing earlier ones).
    async fn put_imports(&self, lease: &Lease, names: &[String]) -> Result<(), StoreError>;

    /// Names of live stacks importing `export_name`.
    async fn importers(&self, export_name: &str) -> Result<Vec<String>, StoreError>;
}

/// Drift detection results.
#[async_trait::async_trait]
pub trait DriftDetections: Send + Sync {
    /// Keeps a drift detection's results (a JSON document).
    async fn put_drift_detection(
        &self,
        stack_id: &str,
        detection_id: &str,
        at: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError>;

    /// A drift detection by its id.
    async fn drift_detection(
        &self,
        detection_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError>;

    /// The stack's latest drift detection, if any.
    async fn last_drift_detection(
        &self,
        stack_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError>;
}

/// The whole state: every concern above, as one value (`Arc<dyn Store>`).
/// A part of Cairn that needs only one concern takes that trait.
/// A row moved by a stack refactor: from one stack and logical id to
/// another (the same stack for a rename).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMove {
    pub from_stack: String,
    pub from_logical: String,
    pub to_stack: String,
    pub to_logical: String,
}

/// What executing a stack refactor writes, at once.
#[derive(Debug, Clone)]
pub struct RefactorWrite {
    /// Each stack's new fields (its template, outputs, status and reason)
    /// and the event of that status.
    pub stacks: Vec<(StackRecord, EventRecord)>,
    /// The rows moved or renamed.
    pub moves: Vec<RowMove>,
    /// The resources' events (before the stacks' own).
    pub events: Vec<EventRecord>,
    /// The refactor's record as it is once executed.
    pub refactor_id: String,
    pub body: serde_json::Value,
}

/// Stack refactors (CreateStackRefactor): their records (JSON, as the API
/// shows them) and the one write that executes one.
#[async_trait::async_trait]
pub trait Refactors: Send + Sync {
    /// Keeps (or replaces) a refactor's record.
    async fn put_refactor(
        &self,
        refactor_id: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError>;

    async fn refactor(&self, refactor_id: &str) -> Result<Option<serde_json::Value>, StoreError>;

    /// Every refactor's record, oldest first.
    async fn refactors(&self) -> Result<Vec<serde_json::Value>, StoreError>;

    /// Executes a refactor under the leases of all its stacks, atomically:
    /// the rows move (renames included, in any order: a swap works), each
    /// stack gets its new fields, status and event, the resources' events
    /// are recorded, and the refactor's record becomes `write.body`.
    async fn apply_refactor(
        &self,
        leases: &[Lease],
        write: &RefactorWrite,
    ) -> Result<(), StoreError>;
}

/// Where a stack's events stand with one notification target: the
/// first `delivered` of them (oldest first) were accepted by `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationCursor {
    pub stack_id: String,
    pub target: String,
    pub delivered: usize,
}

/// Stack notifications: the events table is the outbox, and each
/// (stack, target) keeps how many of the stack's events it accepted, so an
/// engine that dies mid-delivery loses nothing and the next one sends on
/// from there. A claim (owner, expiry) keeps two engines from sending the
/// same target's events at once.
#[async_trait::async_trait]
pub trait Notifications: Send + Sync {
    /// Replaces the stack's targets (and its `notification_arns`): a new
    /// target gets the events recorded from now on; a kept one keeps its
    /// place; a removed one is forgotten.
    async fn set_notification_targets(
        &self,
        stack_id: &str,
        targets: &[String],
    ) -> Result<(), StoreError>;

    /// Claims, for `ttl_ms`, up to `limit` targets that have events not yet
    /// delivered and no live claim by another owner (`dead`: owners known
    /// to be gone, whose claims are taken at once).
    async fn claim_notifications(
        &self,
        owner: &str,
        dead: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<NotificationCursor>, StoreError>;

    /// The owners holding claims now.
    async fn notification_claimants(&self) -> Result<Vec<String>, StoreError>;

    /// Records `cursor.delivered` and renews `owner`'s claim for `ttl_ms`;
    /// `false` when the claim is no longer `owner`'s (nothing written).
    async fn notified(
        &self,
        owner: &str,
        cursor: &NotificationCursor,
        ttl_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Lets go of `owner`'s claim on the target.
    async fn release_notification(
        &self,
        owner: &str,
        cursor: &NotificationCursor,
    ) -> Result<(), StoreError>;
}

/// A COMPLETE registration's description.
pub fn registered_as(version_id: &str) -> String {
    format!("Registered as version {version_id}")
}

/// The type registry: registrations and the versions of each registered
/// type, with each version's package.
#[async_trait::async_trait]
pub trait TypeRegistry: Send + Sync {
    /// Records `r` (IN_PROGRESS). With a client token an earlier
    /// registration used, nothing is written and that one is returned.
    async fn begin_registration(
        &self,
        r: &RegistrationRecord,
    ) -> Result<RegistrationRecord, StoreError>;
    /// Records the new version with its package and completes the
    /// registration, in one write; returns the version's id (the next of
    /// the type's, deregistered ones counted). A type's first live version
    /// becomes its default. A registration no longer IN_PROGRESS is
    /// `RegistrationEnded`, and nothing is written.
    async fn complete_registration(
        &self,
        token: &str,
        version: &NewTypeVersion,
        package: &[u8],
    ) -> Result<String, StoreError>;
    /// Ends the registration FAILED with `reason` (`RegistrationEnded` if
    /// it is no longer IN_PROGRESS).
    async fn fail_registration(&self, token: &str, reason: &str) -> Result<(), StoreError>;
    async fn registration(&self, token: &str) -> Result<Option<RegistrationRecord>, StoreError>;
    /// Every registration, oldest first.
    async fn registrations(&self) -> Result<Vec<RegistrationRecord>, StoreError>;
    /// Every version of every type, deregistered ones too, by type name
    /// then version.
    async fn type_versions(&self) -> Result<Vec<TypeVersionRecord>, StoreError>;
    /// A version's package, as registered.
    async fn type_package(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError>;
    /// Makes a live version the type's default.
    async fn set_default_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError>;
    /// Deregisters a live version: refused for the default while other live
    /// versions remain; the last live version's deregistration is the
    /// type's.
    async fn deregister_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError>;
    /// How many times the registry changed: an engine reads the types again
    /// when it moved.
    async fn registry_generation(&self) -> Result<i64, StoreError>;
    /// Sets a type's configuration under its alias (replacing one there).
    async fn set_type_configuration(&self, c: &TypeConfigurationRecord) -> Result<(), StoreError>;
    /// Every configuration of every type, by type name then alias.
    async fn type_configurations(&self) -> Result<Vec<TypeConfigurationRecord>, StoreError>;
}

/// The audit trail (the records are the export's outbox: each export
/// target keeps the `seq` it has delivered, under a claim as a
/// notification target is) and the console's ended sessions.
#[async_trait::async_trait]
pub trait Audit: Send + Sync {
    /// Keeps `record` durably; returns its `seq` (larger than every
    /// earlier record's).
    async fn add_audit(&self, record: &AuditRecord) -> Result<i64, StoreError>;
    /// The records `q` asks for, newest first (at most `q.limit`).
    async fn audit_records(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError>;
    /// Forgets the records older than `before_ms`; how many went.
    async fn prune_audit(&self, before_ms: i64) -> Result<u64, StoreError>;
    /// Up to `limit` records after `after_seq`, oldest first.
    async fn audit_after(
        &self,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError>;
    /// Claims export `target` for `ttl_ms` (a new target starts at the
    /// first record): the `seq` delivered so far, or `None` while another
    /// owner's claim is live.
    async fn claim_audit_export(
        &self,
        owner: &str,
        target: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError>;
    /// Records that `target` has every record up to `delivered` and renews
    /// `owner`'s claim; `false` (nothing written) when the claim is not
    /// `owner`'s any more.
    async fn audit_exported(
        &self,
        owner: &str,
        target: &str,
        delivered: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Ends a console session (its signature) on every engine, until it
    /// would have expired anyway (`until_ms`; older entries are dropped).
    async fn revoke_session(&self, session: &str, until_ms: i64) -> Result<(), StoreError>;
    async fn session_revoked(&self, session: &str) -> Result<bool, StoreError>;
}

#[async_trait::async_trait]
pub trait Store:
    Stacks
    + Leases
    + Operations
    + Resources
    + Events
    + Inbox
    + ChangeSets
    + Exports
    + DriftDetections
    + Notifications
    + Refactors
    + TypeRegistry
    + Audit
    + Send
    + Sync
{
    /// Whether the store answers (`/healthz`).
    async fn ping(&self) -> Result<(), StoreError>;
}
