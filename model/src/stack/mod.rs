//! The stack model: statuses exactly as CloudFormation names them, and the
//! records the store keeps (stacks, resources, events, outputs, operations).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An OnFailure that is none of CloudFormation's three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("OnFailure must be DO_NOTHING, ROLLBACK or DELETE, not {0}")]
pub struct InvalidOnFailure(pub String);

pub(crate) use crate::words::status_enum;
pub use crate::words::UnknownWord;

status_enum!(
    /// A stack's status (seed 004's state machine).
    StackStatus {
        ReviewInProgress => "REVIEW_IN_PROGRESS",
        CreateInProgress => "CREATE_IN_PROGRESS",
        CreateComplete => "CREATE_COMPLETE",
        CreateFailed => "CREATE_FAILED",
        RollbackInProgress => "ROLLBACK_IN_PROGRESS",
        RollbackComplete => "ROLLBACK_COMPLETE",
        RollbackFailed => "ROLLBACK_FAILED",
        DeleteInProgress => "DELETE_IN_PROGRESS",
        DeleteComplete => "DELETE_COMPLETE",
        DeleteFailed => "DELETE_FAILED",
        UpdateInProgress => "UPDATE_IN_PROGRESS",
        UpdateCompleteCleanupInProgress => "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
        UpdateComplete => "UPDATE_COMPLETE",
        UpdateFailed => "UPDATE_FAILED",
        UpdateRollbackInProgress => "UPDATE_ROLLBACK_IN_PROGRESS",
        UpdateRollbackFailed => "UPDATE_ROLLBACK_FAILED",
        UpdateRollbackCompleteCleanupInProgress => "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
        UpdateRollbackComplete => "UPDATE_ROLLBACK_COMPLETE",
        ImportInProgress => "IMPORT_IN_PROGRESS",
        ImportComplete => "IMPORT_COMPLETE",
        ImportRollbackInProgress => "IMPORT_ROLLBACK_IN_PROGRESS",
        ImportRollbackFailed => "IMPORT_ROLLBACK_FAILED",
        ImportRollbackComplete => "IMPORT_ROLLBACK_COMPLETE",
    }
);

impl StackStatus {
    pub fn is_in_progress(self) -> bool {
        self.as_str().ends_with("_IN_PROGRESS") && self != StackStatus::ReviewInProgress
    }

    /// Whether an update (or import) is being rolled back, or stopped
    /// rolling back: the stack then shows the template it goes back to.
    pub fn is_rollback_phase(self) -> bool {
        matches!(
            self,
            StackStatus::UpdateRollbackInProgress
                | StackStatus::UpdateRollbackCompleteCleanupInProgress
                | StackStatus::UpdateRollbackFailed
                | StackStatus::ImportRollbackInProgress
                | StackStatus::ImportRollbackFailed
        )
    }
}

status_enum!(
    /// A resource's status.
    ResourceStatus {
        CreateInProgress => "CREATE_IN_PROGRESS",
        CreateComplete => "CREATE_COMPLETE",
        CreateFailed => "CREATE_FAILED",
        DeleteInProgress => "DELETE_IN_PROGRESS",
        DeleteComplete => "DELETE_COMPLETE",
        DeleteFailed => "DELETE_FAILED",
        DeleteSkipped => "DELETE_SKIPPED",
        UpdateInProgress => "UPDATE_IN_PROGRESS",
        UpdateComplete => "UPDATE_COMPLETE",
        UpdateFailed => "UPDATE_FAILED",
        ImportInProgress => "IMPORT_IN_PROGRESS",
        ImportComplete => "IMPORT_COMPLETE",
        ImportFailed => "IMPORT_FAILED",
        ImportRollbackInProgress => "IMPORT_ROLLBACK_IN_PROGRESS",
        ImportRollbackComplete => "IMPORT_ROLLBACK_COMPLETE",
    }
);

status_enum!(
    /// What an event says: the stack's status (its own events) or a
    /// resource's (a template resource, a group member, an update's
    /// cleanup victim). Every word either can be, once.
    EventStatus {
        ReviewInProgress => "REVIEW_IN_PROGRESS",
        CreateInProgress => "CREATE_IN_PROGRESS",
        CreateComplete => "CREATE_COMPLETE",
        CreateFailed => "CREATE_FAILED",
        RollbackInProgress => "ROLLBACK_IN_PROGRESS",
        RollbackComplete => "ROLLBACK_COMPLETE",
        RollbackFailed => "ROLLBACK_FAILED",
        DeleteInProgress => "DELETE_IN_PROGRESS",
        DeleteComplete => "DELETE_COMPLETE",
        DeleteFailed => "DELETE_FAILED",
        DeleteSkipped => "DELETE_SKIPPED",
        UpdateInProgress => "UPDATE_IN_PROGRESS",
        UpdateCompleteCleanupInProgress => "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
        UpdateComplete => "UPDATE_COMPLETE",
        UpdateFailed => "UPDATE_FAILED",
        UpdateRollbackInProgress => "UPDATE_ROLLBACK_IN_PROGRESS",
        UpdateRollbackFailed => "UPDATE_ROLLBACK_FAILED",
        UpdateRollbackCompleteCleanupInProgress => "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
        UpdateRollbackComplete => "UPDATE_ROLLBACK_COMPLETE",
        ImportInProgress => "IMPORT_IN_PROGRESS",
        ImportComplete => "IMPORT_COMPLETE",
        ImportFailed => "IMPORT_FAILED",
        ImportRollbackInProgress => "IMPORT_ROLLBACK_IN_PROGRESS",
        ImportRollbackFailed => "IMPORT_ROLLBACK_FAILED",
        ImportRollbackComplete => "IMPORT_ROLLBACK_COMPLETE",
    }
);

impl EventStatus {
    /// A step under way (`*_IN_PROGRESS`).
    pub fn is_in_progress(self) -> bool {
        self.as_str().ends_with("_IN_PROGRESS")
    }

    /// A step that failed (`*_FAILED`).
    pub fn is_failed(self) -> bool {
        self.as_str().ends_with("_FAILED")
    }

    /// The resource status this is, when a resource can have it.
    pub fn as_resource(self) -> Option<ResourceStatus> {
        self.as_str().parse().ok()
    }
}

impl From<StackStatus> for EventStatus {
    fn from(s: StackStatus) -> EventStatus {
        match s {
            StackStatus::ReviewInProgress => EventStatus::ReviewInProgress,
            StackStatus::CreateInProgress => EventStatus::CreateInProgress,
            StackStatus::CreateComplete => EventStatus::CreateComplete,
            StackStatus::CreateFailed => EventStatus::CreateFailed,
            StackStatus::RollbackInProgress => EventStatus::RollbackInProgress,
            StackStatus::RollbackComplete => EventStatus::RollbackComplete,
            StackStatus::RollbackFailed => EventStatus::RollbackFailed,
            StackStatus::DeleteInProgress => EventStatus::DeleteInProgress,
            StackStatus::DeleteComplete => EventStatus::DeleteComplete,
            StackStatus::DeleteFailed => EventStatus::DeleteFailed,
            StackStatus::UpdateInProgress => EventStatus::UpdateInProgress,
            StackStatus::UpdateCompleteCleanupInProgress => {
                EventStatus::UpdateCompleteCleanupInProgress
            }
            StackStatus::UpdateComplete => EventStatus::UpdateComplete,
            StackStatus::UpdateFailed => EventStatus::UpdateFailed,
            StackStatus::UpdateRollbackInProgress => EventStatus::UpdateRollbackInProgress,
            StackStatus::UpdateRollbackFailed => EventStatus::UpdateRollbackFailed,
            StackStatus::UpdateRollbackCompleteCleanupInProgress => {
                EventStatus::UpdateRollbackCompleteCleanupInProgress
            }
            StackStatus::UpdateRollbackComplete => EventStatus::UpdateRollbackComplete,
            StackStatus::ImportInProgress => EventStatus::ImportInProgress,
            StackStatus::ImportComplete => EventStatus::ImportComplete,
            StackStatus::ImportRollbackInProgress => EventStatus::ImportRollbackInProgress,
            StackStatus::ImportRollbackFailed => EventStatus::ImportRollbackFailed,
            StackStatus::ImportRollbackComplete => EventStatus::ImportRollbackComplete,
        }
    }
}

impl From<ResourceStatus> for EventStatus {
    fn from(s: ResourceStatus) -> EventStatus {
        match s {
            ResourceStatus::CreateInProgress => EventStatus::CreateInProgress,
            ResourceStatus::CreateComplete => EventStatus::CreateComplete,
            ResourceStatus::CreateFailed => EventStatus::CreateFailed,
            ResourceStatus::DeleteInProgress => EventStatus::DeleteInProgress,
            ResourceStatus::DeleteComplete => EventStatus::DeleteComplete,
            ResourceStatus::DeleteFailed => EventStatus::DeleteFailed,
            ResourceStatus::DeleteSkipped => EventStatus::DeleteSkipped,
            ResourceStatus::UpdateInProgress => EventStatus::UpdateInProgress,
            ResourceStatus::UpdateComplete => EventStatus::UpdateComplete,
            ResourceStatus::UpdateFailed => EventStatus::UpdateFailed,
            ResourceStatus::ImportInProgress => EventStatus::ImportInProgress,
            ResourceStatus::ImportComplete => EventStatus::ImportComplete,
            ResourceStatus::ImportFailed => EventStatus::ImportFailed,
            ResourceStatus::ImportRollbackInProgress => EventStatus::ImportRollbackInProgress,
            ResourceStatus::ImportRollbackComplete => EventStatus::ImportRollbackComplete,
        }
    }
}

status_enum!(
    /// A signal's status (`cfn-signal`'s, SignalResource's, Heat's).
    SignalStatus {
        Success => "SUCCESS",
        Failure => "FAILURE",
    }
);

status_enum!(
    /// A resource's drift (CloudFormation's `StackResourceDriftStatus`).
    ResourceDriftStatus {
        InSync => "IN_SYNC",
        Modified => "MODIFIED",
        Deleted => "DELETED",
        NotChecked => "NOT_CHECKED",
        Unknown => "UNKNOWN",
    }
);

impl ResourceDriftStatus {
    /// Drifted: modified or deleted.
    pub fn drifted(self) -> bool {
        matches!(
            self,
            ResourceDriftStatus::Modified | ResourceDriftStatus::Deleted
        )
    }
}

status_enum!(
    /// A stack's drift (CloudFormation's `StackDriftStatus`).
    StackDriftStatus {
        Drifted => "DRIFTED",
        InSync => "IN_SYNC",
        Unknown => "UNKNOWN",
    }
);

status_enum!(
    /// How a drift detection ended (CloudFormation's `DetectionStatus`).
    DetectionStatus {
        DetectionComplete => "DETECTION_COMPLETE",
        DetectionFailed => "DETECTION_FAILED",
    }
);

/// What `--on-failure` asks for when a create fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OnFailure {
    DoNothing,
    #[default]
    Rollback,
    Delete,
}

impl OnFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::DoNothing => "DO_NOTHING",
            OnFailure::Rollback => "ROLLBACK",
            OnFailure::Delete => "DELETE",
        }
    }
}

impl FromStr for OnFailure {
    type Err = InvalidOnFailure;
    fn from_str(s: &str) -> Result<Self, InvalidOnFailure> {
        match s {
            "DO_NOTHING" => Ok(OnFailure::DoNothing),
            "ROLLBACK" => Ok(OnFailure::Rollback),
            "DELETE" => Ok(OnFailure::Delete),
            other => Err(InvalidOnFailure(other.to_string())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct OutputRecord {
    pub output_key: String,
    /// `None`: a HOT output with no value (its condition is false, or it
    /// has an `output_error`), shown as `null` as Heat shows None.
    pub output_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export_name: Option<String>,
    /// Why a HOT stack's output has no value: Heat completes the stack and
    /// reports the error on that output alone (heat/engine/api.py,
    /// `format_stack_output`'s `output_error`). Never set for CloudFormation
    /// templates, whose unresolvable outputs fail the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_error: Option<String>,
    /// A HOT output's value as its template computed it (a number, a
    /// list, a map): what a parent's `get_attr` of a nested stack's
    /// outputs reads, typed as in Heat. `None` for CloudFormation
    /// templates, whose outputs are text. Kept with the stack; not shown.
    #[serde(
        default,
        rename = "Cairn::Value",
        skip_serializing_if = "Option::is_none"
    )]
    pub typed_value: Option<serde_json::Value>,
}

impl OutputRecord {
    /// What a parent reads of it: the typed value of a HOT output, the
    /// text of any other, null for one without a value.
    pub fn read_value(&self) -> serde_json::Value {
        match (&self.typed_value, &self.output_value) {
            (Some(v), _) => v.clone(),
            (None, Some(text)) => serde_json::Value::String(text.clone()),
            (None, None) => serde_json::Value::Null,
        }
    }
}

/// A stack tag (CloudFormation's `Tag`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Tag {
    pub key: String,
    pub value: String,
}

/// One stack as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StackRecord {
    pub stack_id: String,
    pub stack_name: String,
    pub status: StackStatus,
    pub status_reason: Option<String>,
    pub description: Option<String>,
    /// The template text as submitted.
    pub template_body: String,
    /// Parameter name → raw value (unmasked; masking happens on display).
    pub parameters: BTreeMap<String, String>,
    pub no_echo: Vec<String>,
    pub outputs: Vec<OutputRecord>,
    pub on_failure: OnFailure,
    pub created_at: String,
    pub updated_at: String,
    pub deleted_at: Option<String>,
    pub tags: Vec<Tag>,
    /// A nested stack's parent (`ParentId`) and the top of its tree
    /// (`RootId`); `None` for a root stack.
    pub parent_id: Option<String>,
    pub root_id: Option<String>,
    /// What the template needs besides its text (HOT's files and
    /// environment).
    pub context: TemplateContext,
    /// The capabilities the last create or update was given
    /// (DescribeStacks' `Capabilities`).
    pub capabilities: Vec<String>,
    /// Termination protection (`EnableTerminationProtection`): a delete is
    /// refused. Set on root stacks only; their nested stacks share it.
    /// Written at the stack's insert and by
    /// `Stacks::set_termination_protection`, never by `save_stack`.
    pub termination_protection: bool,
    /// The stack policy (`StackPolicyBody`, `SetStackPolicy`) as given;
    /// `None`: every update is allowed. Written at the stack's insert and
    /// by `Stacks::set_stack_policy`, never by `save_stack`.
    pub stack_policy: Option<String>,
    /// The rollback triggers and monitoring period its operations run
    /// with (`RollbackConfiguration`, both fields set); `None`: none.
    /// Saved with the template (an update's is journaled both ways).
    pub rollback_configuration: Option<crate::rollback_triggers::RollbackConfiguration>,
    /// Where its events are sent (`NotificationARNs`: webhook URLs).
    /// Written at the stack's insert and by
    /// `Notifications::set_notification_targets`, never by `save_stack`.
    pub notification_arns: Vec<String>,
}

pub use crate::template::{Facade, TemplateContext};

status_enum!(
    /// What a recorded call asks of the resource's provider (or, for
    /// `Signals`, what the resource is waiting for). Stored as the words
    /// Cairn has always written.
    CallKind {
        Create => "CREATE",
        Update => "UPDATE",
        Delete => "DELETE",
        // An update that puts a resource back as it was, in an update's rollback.
        RollbackUpdate => "ROLLBACK_UPDATE",
        // Not a call: a created resource waits for its signals
        // (`CreationPolicy`, a wait condition); `since_ms` says since when.
        Signals => "SIGNALS",
        // Not a call: the hooks judging the call the row makes next, one
        // of which answered IN_PROGRESS (`hook` says where they stand).
        Hook => "HOOK",
    }
);

status_enum!(
    /// What an operation on a stack does (its record and history entry).
    OperationKind {
        Create => "CREATE",
        Update => "UPDATE",
        Delete => "DELETE",
        // `cairn update`: reinstall, heal and converge to the template.
        Reconcile => "RECONCILE",
        // A history entry only: the operation stays the update's.
        ContinueUpdateRollback => "CONTINUE_UPDATE_ROLLBACK",
        // A history entry only (RollbackStack of a stack whose create or
        // update failed with rollback disabled): the operation stays the
        // failed one's.
        Rollback => "ROLLBACK",
        // Adopting resources made elsewhere (an IMPORT change set, `cairn
        // import`): read, never created.
        Import => "IMPORT",
    }
);

/// A call made to a provider whose outcome is not recorded yet. Recorded before
/// the call, cleared with its result: after a crash it is re-issued with the same
/// request id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub action: CallKind,
    pub request_id: String,
    /// For a resource waiting for signals (`action` = `SIGNALS`): when the
    /// wait began, in milliseconds since the epoch, so a resumed wait keeps
    /// its original deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<i64>,
    /// For hooks judging the row's next call (`action` = `HOOK`; the
    /// request id is the waiting hook's `clientRequestToken`): where they
    /// stand, so a crash resumes the hook rather than starting it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookWait>,
}

impl PendingCall {
    /// The provider call this record is, or (hooks judging it) precedes.
    pub fn call(&self) -> CallKind {
        match &self.hook {
            Some(w) if self.action == CallKind::Hook => w.then,
            _ => self.action,
        }
    }
}

/// Hooks judging a row's next call while one of them answered IN_PROGRESS
/// (a webhook hook re-invoked with its `callbackContext`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookWait {
    /// The call they judge: CREATE (a new resource, or a replacement),
    /// UPDATE (in place) or DELETE.
    pub then: CallKind,
    /// The hooks that gave their verdict already (their events are
    /// written), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judged: Vec<String>,
    /// Why those of them whose failure mode is FAIL refused: (hook, why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<(String, String)>,
    /// The hook that answered IN_PROGRESS, its invocations so far and the
    /// `callbackContext` it answered last.
    pub hook_type: String,
    pub invocation: u32,
    pub callback_context: serde_json::Value,
}

/// A success or failure signal sent to a resource (a wait condition handle,
/// or a resource with a `CreationPolicy`), kept until the resource's next
/// create. A repeated `unique_id` replaces the earlier signal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalRecord {
    pub stack_id: String,
    pub logical_id: String,
    pub unique_id: String,
    pub status: SignalStatus,
    pub reason: Option<String>,
    pub data: Option<String>,
    pub received_at: String,
}

/// One resource of a stack as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRecord {
    pub stack_id: String,
    pub logical_id: String,
    pub resource_type: String,
    pub physical_id: Option<String>,
    pub status: ResourceStatus,
    pub status_reason: Option<String>,
    /// The properties as evaluated and sent to the provider.
    pub properties: Map<String, Value>,
    /// Attributes the provider returned (what `Fn::GetAtt` reads).
    pub attributes: Map<String, Value>,
    pub pending: Option<PendingCall>,
    pub updated_at: String,
    /// The resource's Metadata as evaluated (an update compares it).
    pub metadata: Option<serde_json::Value>,
    /// What the running update did to this resource, so that cleanup and
    /// rollback know what to delete or restore. `None` outside updates.
    pub journal: Option<Journal>,
    /// The provider marked the attributes secret (a custom resource's
    /// `NoEcho`): their values are masked wherever Cairn shows them.
    pub no_echo: bool,
    /// The version of a registered type the resource was made (or last
    /// moved) with: every call about it goes to that version's provider
    /// until an update asks to move it (`--upgrade-types`). `None` for a
    /// type the registry does not version (built-in or configured).
    pub type_version: Option<String>,
}

/// A resource as it was at one point: enough to restore it or delete it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Snapshot {
    pub resource_type: String,
    pub physical_id: Option<String>,
    pub status: ResourceStatus,
    pub status_reason: Option<String>,
    pub properties: serde_json::Map<String, serde_json::Value>,
    pub attributes: serde_json::Map<String, serde_json::Value>,
    pub metadata: Option<serde_json::Value>,
    /// A create or delete call for this physical resource whose outcome is not
    /// recorded yet.
    pub pending: Option<PendingCall>,
    /// The attributes are secret (see [`ResourceRecord::no_echo`]).
    #[serde(default)]
    pub no_echo: bool,
    /// See [`ResourceRecord::type_version`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_version: Option<String>,
}

/// One resource's part in an update (the update's journal, per resource).
/// Its snapshots are boxed: every row carries an `Option<Journal>`, and a
/// row is moved through each step of an operation (inline, the two
/// snapshots doubled a row's size for the rows that have none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "State")]
pub enum Journal {
    /// Created by this update: a rollback deletes it.
    Added,
    /// Changed by this update (in place or replaced); `before` is what it was.
    /// When the physical id differs from `before`'s, the update's cleanup
    /// deletes `before`'s physical resource.
    Changed { before: Box<Snapshot> },
    /// Put back by the rollback; `discard` is the physical resource the update
    /// had made in its place, deleted by the rollback's cleanup.
    Restored { discard: Option<Box<Snapshot>> },
}

impl ResourceRecord {
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            resource_type: self.resource_type.clone(),
            physical_id: self.physical_id.clone(),
            status: self.status,
            status_reason: self.status_reason.clone(),
            properties: self.properties.clone(),
            attributes: self.attributes.clone(),
            metadata: self.metadata.clone(),
            pending: self.pending.clone(),
            no_echo: self.no_echo,
            type_version: self.type_version.clone(),
        }
    }

    /// Puts `s` back as this resource's state.
    pub fn restore(&mut self, s: &Snapshot) {
        self.resource_type = s.resource_type.clone();
        self.physical_id = s.physical_id.clone();
        self.status = s.status;
        self.status_reason = s.status_reason.clone();
        self.properties = s.properties.clone();
        self.attributes = s.attributes.clone();
        self.metadata = s.metadata.clone();
        self.pending = s.pending.clone();
        self.no_echo = s.no_echo;
        self.type_version = s.type_version.clone();
    }
}

/// One transition, as CloudFormation's StackEvent.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub event_id: String,
    pub stack_id: String,
    pub stack_name: String,
    pub logical_id: String,
    pub physical_id: String,
    pub resource_type: String,
    pub timestamp: String,
    pub status: EventStatus,
    pub status_reason: Option<String>,
    pub properties: Option<String>,
    /// A hook's verdict on the resource, when the event is a hook's.
    pub hook: Option<crate::hooks::HookEvent>,
}

/// The type CloudFormation records the stack's own events under.
pub use crate::template::types::STACK_TYPE;

/// Now, as an RFC 3339 timestamp with milliseconds (UTC).
pub fn now() -> String {
    let ts = jiff::Timestamp::now();
    format!("{ts:.3}")
}

status_enum!(
    /// What a change set does: `Create` makes a new stack (in
    /// REVIEW_IN_PROGRESS until it runs), `Update` changes one.
    ChangeSetType {
        Create => "CREATE",
        Update => "UPDATE",
        Import => "IMPORT",
    }
);

status_enum!(
    /// A change set's own status, as CloudFormation names them (Cairn makes
    /// a set in one step: `CREATE_COMPLETE` or `FAILED`).
    ChangeSetStatus {
        CreatePending => "CREATE_PENDING",
        CreateInProgress => "CREATE_IN_PROGRESS",
        CreateComplete => "CREATE_COMPLETE",
        DeletePending => "DELETE_PENDING",
        DeleteInProgress => "DELETE_IN_PROGRESS",
        DeleteComplete => "DELETE_COMPLETE",
        DeleteFailed => "DELETE_FAILED",
        Failed => "FAILED",
    }
);

status_enum!(
    /// Whether a change set can run (CloudFormation's `ExecutionStatus`).
    ExecutionStatus {
        Unavailable => "UNAVAILABLE",
        Available => "AVAILABLE",
        ExecuteInProgress => "EXECUTE_IN_PROGRESS",
        ExecuteComplete => "EXECUTE_COMPLETE",
        ExecuteFailed => "EXECUTE_FAILED",
        Obsolete => "OBSOLETE",
    }
);

/// A change set (CloudFormation's preview of an update or create), as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeSetRecord {
    pub change_set_id: String,
    pub change_set_name: String,
    pub stack_id: String,
    pub stack_name: String,
    pub change_set_type: ChangeSetType,
    pub status: ChangeSetStatus,
    pub execution_status: ExecutionStatus,
    pub status_reason: Option<String>,
    pub description: Option<String>,
    pub template_body: String,
    /// Parameter name → raw value (unmasked; masking happens on display).
    pub parameters: BTreeMap<String, String>,
    pub no_echo: Vec<String>,
    /// The planner's `Changes`, as CloudFormation's `ResourceChange` objects.
    pub changes: Value,
    pub created_at: String,
    /// How many events the stack had when the set was made: any later
    /// operation adds events, which makes the set obsolete.
    pub base_version: i64,
    /// The stack's tags once executed; `None` keeps the stack's.
    pub tags: Option<Vec<Tag>>,
    /// Its nested stacks: the templates read when it was made (its
    /// execution uses these) and, with IncludeNestedStacks, where it sits
    /// in a tree of change sets.
    pub nested: ChangeSetNesting,
}

/// A change set's nested stacks (one JSON document in the store).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeSetNesting {
    #[serde(
        default,
        skip_serializing_if = "crate::nested::NestedTemplates::is_empty"
    )]
    pub templates: crate::nested::NestedTemplates,
    #[serde(default)]
    pub include_nested_stacks: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_change_set_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_change_set_id: Option<String>,
    /// HOT's files and environment the set's template was read with.
    #[serde(default, skip_serializing_if = "TemplateContext::is_empty")]
    pub context: TemplateContext,
    /// The `RollbackConfiguration` its execution runs with, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_configuration: Option<crate::rollback_triggers::RollbackConfiguration>,
    /// The `NotificationARNs` its execution sets (`None`: the stack's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification_arns: Option<Vec<String>>,
    /// The registered type versions its resources move to when executed
    /// (`--upgrade-types`, as the defaults were when it was made).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upgrade_types: BTreeMap<String, String>,
    /// The CHANGE_SET-target hooks' verdicts when it was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook_results: Vec<crate::hooks::HookResult>,
}

impl ChangeSetNesting {
    pub fn is_empty(&self) -> bool {
        *self == ChangeSetNesting::default()
    }
}

/// One operation on a stack, kept after it ends (`cairn history`).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRecord {
    pub stack_id: String,
    pub kind: OperationKind,
    /// The change set this operation executed, if any.
    pub change_set: Option<String>,
    pub template_body: String,
    /// Parameters as shown (NoEcho values masked).
    pub parameters: BTreeMap<String, String>,
    pub started_at: String,
    /// Set with the terminal status that ends the operation.
    pub ended_at: Option<String>,
    pub status: Option<String>,
    pub status_reason: Option<String>,
    /// What a `cairn update` planned and did (steps, phases), as JSON.
    pub details: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_show_as_their_words_and_pad_like_text() {
        assert_eq!(
            format!("{:<20}|", EventStatus::CreateComplete),
            "CREATE_COMPLETE     |"
        );
        for s in [
            StackStatus::UpdateRollbackComplete,
            StackStatus::ReviewInProgress,
        ] {
            assert_eq!(EventStatus::from(s).as_str(), s.as_str());
        }
        for r in [ResourceStatus::DeleteSkipped, ResourceStatus::ImportFailed] {
            assert_eq!(EventStatus::from(r).as_str(), r.as_str());
            assert_eq!(EventStatus::from(r).as_resource(), Some(r));
        }
        assert_eq!(EventStatus::ReviewInProgress.as_resource(), None);
        assert!(EventStatus::UpdateRollbackFailed.is_failed());
        assert!(EventStatus::UpdateCompleteCleanupInProgress.is_in_progress());
        assert!("NO_SUCH_STATUS".parse::<EventStatus>().is_err());
    }
}
