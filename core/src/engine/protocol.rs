//! The resource-call protocol: the one place where the engine calls a
//! provider to make or delete a resource, learns the outcome of a create
//! it recorded but never heard back from, and decides whether a policy
//! keeps a resource.
//!
//! The steps, for every kind of resource (template resources, update
//! victims, group members; groups and nested stacks are served by the
//! engine itself behind [`served::EngineServed`]):
//!
//! 1. **begin**: [`begin`] mints the call's request id, or
//!    [`begin_or_resume`] takes up the one a crash left recorded
//!    ([`recorded`]); the caller writes it (a `PendingCall`, with the
//!    resource's status and events) durably before the call;
//! 2. **call**: [`Protocol::call_create`] / [`Protocol::provider_create`], each
//!    bounded by `call_timeout_seconds` ([`Protocol::timed`]);
//! 3. **outcome**: made, failed (perhaps leaving a physical id), or unknown
//!    ([`outcome_unknown`]): an unknown outcome keeps the request id;
//! 4. **recover**: before anything deletes a resource whose create is
//!    unknown, [`Protocol::learn_created`] asks again (`recover_create`: an
//!    idempotent provider sends the create again, a custom-resource handler
//!    is never sent a Create twice) and classifies the answer with one rule
//!    ([`Learned`]);
//! 5. **delete**: [`Protocol::call_delete`] / [`Protocol::provider_delete`]
//!    (NotFound is gone);
//! 6. **retention**: [`retained`] evaluates DeletionPolicy and
//!    UpdateReplacePolicy, intrinsics included.
//!
//! The rule: **unknown never forgets**. Only a provider's answer that the
//! create failed ([`Learned::Nothing`]) lets a record go without a delete;
//! a timeout, a provider that cannot start, a dead plugin host or any
//! other failure to answer keeps the record, and the operation ends in
//! its `*_FAILED` status with a reason naming the resource.

use std::time::Duration;

use cairn_sdk::{
    Cancellation, CreateRequest, CreateResult, DeleteRequest, ErrorKind, ProviderError,
    RequestContext, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};

use super::served;
use super::served::EngineServed;
use super::{Op, Protocol};
use crate::stack::{CallKind, PendingCall, ResourceRecord};
use crate::template::eval::{Evaluated, Evaluator};
use crate::template::source::child;
use crate::template::Template;
use crate::validate;
use std::sync::Arc;

/// Whether a create call is sent for the first time, or its request id was
/// recorded by an earlier step (a crash, a cancellation, a timeout) and its
/// outcome must be learnt ([`cairn_sdk::ResourceProvider::recover_create`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    First,
    Again,
}

/// A new call of `kind` with its own request id. It is recorded before it
/// is sent: from then on a crash resumes it ([`begin_or_resume`]) instead
/// of sending another.
pub(crate) fn begin(kind: CallKind) -> PendingCall {
    PendingCall {
        action: kind,
        request_id: uuid::Uuid::new_v4().to_string(),
        since_ms: None,
    }
}

/// The call of `kind` a crash, a timeout or a cancellation left recorded
/// on a resource, if any.
pub(crate) fn recorded(pending: Option<&PendingCall>, kind: CallKind) -> Option<&PendingCall> {
    pending.filter(|p| p.action == kind)
}

/// The recorded call of `kind` taken up again (same request id; the
/// provider learns its outcome rather than being sent it twice), else a
/// new one.
pub(crate) fn begin_or_resume(
    pending: Option<&PendingCall>,
    kind: CallKind,
) -> (PendingCall, Attempt) {
    match recorded(pending, kind) {
        Some(p) => (p.clone(), Attempt::Again),
        None => (begin(kind), Attempt::First),
    }
}

/// A created resource now waits for its signals: the create's request id
/// stays (a crash resumes the wait, not the create), with the wait's start
/// so a resumed wait keeps its deadline.
pub(crate) fn wait_for_signals(created: Option<&PendingCall>, since_ms: i64) -> PendingCall {
    PendingCall {
        action: CallKind::Signals,
        request_id: created.map(|p| p.request_id.clone()).unwrap_or_default(),
        since_ms: Some(since_ms),
    }
}

/// What asking again about a recorded create learned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Learned {
    /// It made this physical resource (or failed leaving it): delete it.
    Made(CreateResult),
    /// The provider answered that the create failed and made nothing.
    Nothing,
    /// No answer: whether something exists cannot be told. The record stays.
    Unknown(String),
}

/// Whether a failed create call's outcome is unknown: it may have made its
/// resource, so its request id stays recorded for whoever deletes it.
pub(crate) fn outcome_unknown(e: &ProviderError) -> bool {
    e.kind == ErrorKind::Timeout && e.physical_resource_id.is_none()
}

/// The one rule for a re-asked create: an answer is the provider's word
/// (success, or a failure that names what it left behind, or one of the
/// kinds only a provider that looked at the request gives); anything else
/// (timeout, throttling, an internal failure: a provider that cannot
/// start, a dead plugin host, a handler that never answered) is unknown.
pub(crate) fn learned(result: Result<CreateResult, ProviderError>) -> Learned {
    match result {
        Ok(made) => Learned::Made(made),
        Err(e) => match e.physical_resource_id {
            Some(id) => Learned::Made(CreateResult {
                physical_resource_id: id,
                attributes: Map::new(),
                no_echo: false,
            }),
            None => match e.kind {
                ErrorKind::InvalidRequest
                | ErrorKind::AlreadyExists
                | ErrorKind::NotUpdatable
                | ErrorKind::NotFound => Learned::Nothing,
                ErrorKind::Timeout | ErrorKind::Throttling | ErrorKind::InternalFailure => {
                    Learned::Unknown(e.message)
                }
            },
        },
    }
}

/// The reason a resource keeps its record when its create's outcome is
/// unknown (the same words for every kind of resource).
pub(crate) fn cannot_tell(request_id: &str, why: &str) -> String {
    format!(
        "Cannot tell whether the create that did not finish made a resource: asking the provider again (request {request_id}) failed: {why}. Delete again when the provider answers."
    )
}

/// What an update call changes: the properties to reach, the ones left,
/// the changed top-level names and, for `cairn update`, the drift.
pub(in crate::engine) struct UpdateChange<'a> {
    pub properties: &'a Map<String, Value>,
    pub old_properties: &'a Map<String, Value>,
    pub changed: Vec<String>,
    pub drift: Option<Vec<cairn_sdk::PropertyDifference>>,
    /// Sent for the first time, or recorded before a crash and resumed.
    pub attempt: Attempt,
}

impl<'a> UpdateChange<'a> {
    /// A template update: from `old_properties` to `properties`.
    pub(in crate::engine) fn between(
        properties: &'a Map<String, Value>,
        old_properties: &'a Map<String, Value>,
        attempt: Attempt,
    ) -> Self {
        UpdateChange {
            properties,
            old_properties,
            changed: crate::plan::changed_properties(old_properties, properties),
            drift: None,
            attempt,
        }
    }
}

/// Which policy attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    Deletion,
    UpdateReplace,
}

/// Whether the resource is being deleted because its own creation is
/// rolled back (`RetainExceptOnCreate` then deletes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    Delete,
    RollbackOfCreate,
}

/// Whether `logical_id`'s `policy` in `template` keeps its physical
/// resource, evaluated with `ev` (a policy may be written with
/// intrinsics). `Retain` always keeps; `RetainExceptOnCreate` (deletion
/// only) keeps except when the resource's own creation is rolled back;
/// `Delete`, `Snapshot` and no policy delete.
pub(crate) fn retained(
    ev: &Evaluator,
    template: &Template,
    logical_id: &str,
    policy: Policy,
    removal: Removal,
) -> bool {
    let Some(r) = template.resource(logical_id) else {
        return false;
    };
    let (value, attribute) = match policy {
        Policy::Deletion => (r.deletion_policy.as_ref(), "DeletionPolicy"),
        Policy::UpdateReplace => (r.update_replace_policy.as_ref(), "UpdateReplacePolicy"),
    };
    let Some(value) = value else {
        return false;
    };
    let path = child(&child("/Resources", logical_id), attribute);
    let Ok(Evaluated::Value(Value::String(p))) = ev.eval(value, &path) else {
        return false;
    };
    match p.as_str() {
        "Retain" => true,
        "RetainExceptOnCreate" => {
            policy == Policy::Deletion && removal != Removal::RollbackOfCreate
        }
        _ => false,
    }
}

impl Protocol<'_> {
    /// Bounds a provider call by `call_timeout_seconds`; `what` names it in the
    /// timeout message ("creation", "update", "deletion").
    pub(super) async fn timed<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let limit = Duration::from_secs(self.config.engine.call_timeout_seconds);
        let started = std::time::Instant::now();
        let result = match tokio::time::timeout(limit, call).await {
            Ok(r) => r,
            Err(_) => Err(ProviderError::timeout(format!(
                "Resource {what} timed out after {} seconds",
                limit.as_secs()
            ))),
        };
        let outcome = match &result {
            Ok(_) => "ok".to_string(),
            Err(e) => e.kind.as_str().to_string(),
        };
        self.shared
            .metrics
            .provider_call(what, &outcome, started.elapsed());
        result
    }

    /// Checked right before every provider call: whether this engine still
    /// holds the operation's lease. An engine that stalled past its lease
    /// (a paused machine, a long pause between recording a request and
    /// sending it) wakes up here after another engine took the operation
    /// over and resumed the same request: it must not send it as well. The
    /// window left is between this read and the send. A store that cannot
    /// be read does not stop the call: the write just before it held, and
    /// the write of its outcome is fenced.
    async fn still_owner(&self, op: &Op) -> Result<(), ProviderError> {
        let lost = || {
            op.aborted.store(true, std::sync::atomic::Ordering::SeqCst);
            ProviderError::internal(format!(
                "this engine no longer holds the lease of stack {} (another engine took the operation over); it sent nothing",
                op.stack.stack_name
            ))
        };
        if op.aborted.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(lost());
        }
        let cannot_check = |e: crate::store::StoreError| {
            tracing::warn!(stack = %op.stack.stack_name, "cannot check the lease before a provider call: {e}");
            Ok(())
        };
        match self.store.lease_owner(&op.stack.stack_id).await {
            Ok(Some(owner)) if owner == op.lease.owner => Ok(()),
            Ok(Some(_)) => Err(lost()),
            // Run out, broken or released: still this engine's only if
            // nobody took it since (the renewal is fenced on the token).
            Ok(None) => match self
                .store
                .renew_lease(&op.lease, self.claims().lease_ttl_ms())
                .await
            {
                Ok(()) => Ok(()),
                Err(crate::store::StoreError::LeaseLost(_)) => Err(lost()),
                Err(e) => cannot_check(e),
            },
            Err(e) => cannot_check(e),
        }
    }

    /// A create sent to the provider serving `context.resource_type` (not
    /// a group or nested stack): the first time, or asked again.
    pub(super) async fn provider_create(
        &self,
        op: &Op,
        context: RequestContext,
        properties: Map<String, Value>,
        attempt: Attempt,
    ) -> Result<CreateResult, ProviderError> {
        let t = self.provider_for(&context.resource_type)?;
        self.still_owner(op).await?;
        let req = CreateRequest {
            context,
            properties,
        };
        match attempt {
            Attempt::First => self.timed("creation", t.provider.create(&req)).await,
            // The provider decides how to learn the outcome: an idempotent
            // one is asked again, a custom-resource handler never is.
            Attempt::Again => {
                self.timed("creation", t.provider.recover_create(&req))
                    .await
            }
        }
    }

    /// A group member's create, by the provider serving its type; or, when
    /// the members are nested stacks (a HOT group of provider templates),
    /// by the engine, from the template read for the launch configuration
    /// `launch` (a child stack is found again by its request id, so a
    /// resumed create is simply run again).
    pub(super) async fn member_create(
        &self,
        op: &Op,
        context: RequestContext,
        properties: Map<String, Value>,
        attempt: Attempt,
        launch: &str,
    ) -> Result<CreateResult, ProviderError> {
        if self.served_by_engine(&context.resource_type) != Some(EngineServed::NestedStack) {
            return self.provider_create(op, context, properties, attempt).await;
        }
        self.still_owner(op).await?;
        let member = ResourceRecord {
            stack_id: op.stack.stack_id.clone(),
            logical_id: context.logical_resource_id.clone(),
            resource_type: context.resource_type.clone(),
            physical_id: None,
            status: crate::stack::ResourceStatus::CreateInProgress,
            status_reason: None,
            properties,
            attributes: Map::new(),
            pending: None,
            updated_at: crate::stack::now(),
            metadata: None,
            journal: None,
            no_echo: false,
        };
        self.nested_stacks()
            .nested_create_of(op, &member, launch, &context.request_id)
            .await
    }

    /// A group member's delete: by its provider, or a nested stack member's
    /// child stack by the engine.
    pub(super) async fn member_delete(
        &self,
        op: &Op,
        context: RequestContext,
        physical: &str,
        properties: Map<String, Value>,
        attempt: Attempt,
    ) -> Result<(), ProviderError> {
        if self.served_by_engine(&context.resource_type) != Some(EngineServed::NestedStack) {
            return self
                .provider_delete(op, context, physical, properties, attempt)
                .await;
        }
        self.still_owner(op).await?;
        self.nested_stacks().nested_delete(op, physical).await
    }

    /// A delete sent to the provider serving `context.resource_type`;
    /// NotFound counts as deleted.
    pub(super) async fn provider_delete(
        &self,
        op: &Op,
        context: RequestContext,
        physical: &str,
        properties: Map<String, Value>,
        attempt: Attempt,
    ) -> Result<(), ProviderError> {
        let t = self.provider_for(&context.resource_type)?;
        self.still_owner(op).await?;
        let req = DeleteRequest {
            context,
            physical_resource_id: physical.to_string(),
            properties,
        };
        let sent = match attempt {
            Attempt::First => self.timed("deletion", t.provider.delete(&req)).await,
            Attempt::Again => {
                self.timed("deletion", t.provider.recover_delete(&req))
                    .await
            }
        };
        match sent {
            Err(e) if e.is_not_found() => Ok(()),
            other => other,
        }
    }

    /// Creates a template resource: a group or nested stack by the engine,
    /// a HOT `external_id` by adoption, anything else by its provider.
    pub(super) async fn call_create(
        &self,
        op: &Op,
        r: &ResourceRecord,
        request_id: &str,
        attempt: Attempt,
    ) -> Result<CreateResult, ProviderError> {
        // A group's or nested stack's create is idempotent (found again by
        // the name its request id gives): first or again, the same.
        if let Some(served) = self.served_by_engine(&r.resource_type) {
            return served.create(self, op, r, request_id).await;
        }
        if let Some(id) = self.external_id_for(op, &r.logical_id)? {
            let t = self.provider_for(&r.resource_type)?;
            return self
                .creates()
                .adopt_external(op, r, &t, id, request_id)
                .await;
        }
        let context = self.context(op, &r.logical_id, &r.resource_type, request_id);
        self.provider_create(op, context, r.properties.clone(), attempt)
            .await
    }

    /// An update call with the changed property names and, for `cairn
    /// update`, the drift the provider reported (`UpdateRequest.drift`).
    pub(super) async fn call_update_with(
        &self,
        op: &Op,
        rec: &ResourceRecord,
        physical_id: &str,
        request_id: &str,
        change: UpdateChange<'_>,
    ) -> Result<UpdateResult, ProviderError> {
        let UpdateChange {
            properties,
            old_properties,
            changed,
            drift,
            attempt,
        } = change;
        if let Some(served) = self.served_by_engine(&rec.resource_type) {
            let call = served::Update {
                rec,
                physical_id,
                request_id,
                properties,
                old_properties,
            };
            return served.update(self, op, call).await;
        }
        let t = self.provider_for(&rec.resource_type)?;
        let req = UpdateRequest {
            context: self.context(op, &rec.logical_id, &rec.resource_type, request_id),
            physical_resource_id: physical_id.to_string(),
            properties: properties.clone(),
            old_properties: old_properties.clone(),
            changed,
            drift,
        };
        self.still_owner(op).await?;
        match attempt {
            Attempt::First => self.timed("update", t.provider.update(&req)).await,
            // Recorded before a crash: the provider learns or repeats it (a
            // custom-resource handler is never sent it twice).
            Attempt::Again => self.timed("update", t.provider.recover_update(&req)).await,
        }
    }

    /// Deletes a template resource's physical resource; NotFound counts as
    /// deleted.
    pub(super) async fn call_delete(
        &self,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
        request_id: &str,
        attempt: Attempt,
    ) -> Result<(), ProviderError> {
        if let Some(served) = self.served_by_engine(&r.resource_type) {
            return served.delete(self, op, r, physical).await;
        }
        let context = self.context(op, &r.logical_id, &r.resource_type, request_id);
        self.provider_delete(op, context, physical, r.properties.clone(), attempt)
            .await
    }

    /// Tells the provider that the engine stopped waiting for the create
    /// recorded with `request_id` (its call was dropped). True when the
    /// provider confirms the request made nothing: the call then ends as
    /// not made, and no one needs to ask again. Groups and nested stacks
    /// are never confirmed (the engine learns them from the state).
    pub(super) async fn cancel_create(
        &self,
        op: &Op,
        r: &ResourceRecord,
        request_id: &str,
    ) -> bool {
        if self.served_by_engine(&r.resource_type).is_some() {
            return false;
        }
        let Ok(t) = self.provider_for(&r.resource_type) else {
            return false;
        };
        if self.still_owner(op).await.is_err() {
            return false;
        }
        let req = CreateRequest {
            context: self.context(op, &r.logical_id, &r.resource_type, request_id),
            properties: r.properties.clone(),
        };
        matches!(
            self.timed("cancellation", t.provider.cancel_create(&req))
                .await,
            Ok(Cancellation::NothingMade)
        )
    }

    /// What the create recorded with `request_id` made, asked again before
    /// `r` is deleted ([`learned`]'s rule).
    pub(super) async fn learn_created(
        &self,
        op: &Op,
        r: &ResourceRecord,
        request_id: &str,
    ) -> Learned {
        learned(self.call_create(op, r, request_id, Attempt::Again).await)
    }

    pub(super) fn context(
        &self,
        op: &Op,
        logical_id: &str,
        type_name: &str,
        request_id: &str,
    ) -> RequestContext {
        let mut ctx = self.request_context(
            &op.stack.stack_id,
            &op.stack.stack_name,
            logical_id,
            type_name,
            request_id,
        );
        // The stack's tags as this operation shows them (an update's
        // target, or in its rollback the tags it goes back to), and the
        // other side's.
        let map = |tags: &[crate::stack::Tag]| {
            tags.iter()
                .map(|t| (t.key.clone(), t.value.clone()))
                .collect()
        };
        if ctx.tags.is_empty() {
            return ctx;
        }
        ctx.tags.desired = map(&op.stack.tags);
        if let Some(other) = &op.other {
            ctx.tags.previous = map(&other.state.tags);
        }
        ctx
    }

    /// A provider request's context, its deadline `call_timeout_seconds` away.
    pub(super) fn request_context(
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
            tags: system_tags(stack_id, stack_name, logical_id, type_name),
            provider_settings: None,
        }
    }

    /// A read of the live resource `physical_id` (an import's check and
    /// adoption, HOT's `external_id`): asks, never changes anything.
    pub(super) async fn read(
        &self,
        context: RequestContext,
        type_name: &str,
        physical_id: &str,
    ) -> Result<cairn_sdk::ReadResult, ProviderError> {
        let t = self.provider_for(type_name)?;
        let req = cairn_sdk::ReadRequest {
            context,
            physical_resource_id: physical_id.to_string(),
        };
        self.timed("read", t.provider.read(&req)).await
    }

    /// The provider serving `type_name`.
    pub(super) fn provider_for(
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
    pub(super) fn properties_for(
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
        // A nested stack changes with its template's text too, and so
        // does a launch configuration of nested stack members.
        let recorded = op.recorded_digests.get(logical_id).map(|d| {
            let mut m = Map::new();
            m.insert(crate::nested::DIGEST.into(), d.clone());
            m
        });
        let props = if crate::nested::is_stack(&canonical) {
            crate::nested::with_digest(logical_id, props, &op.nested, recorded.as_ref())
        } else if canonical == crate::group::types::LAUNCH_CONFIGURATION {
            crate::nested::with_member_digest(
                logical_id,
                props,
                &self.registry,
                &op.nested,
                recorded.as_ref(),
            )
        } else {
            props
        };
        Ok((canonical, props))
    }

    /// The resource's Metadata evaluated with what providers returned so far.
    pub(super) fn metadata_for(&self, op: &Op, logical_id: &str) -> Result<Option<Value>, String> {
        let r = op
            .template
            .resource(logical_id)
            .ok_or_else(|| format!("resource {logical_id} is not in the template"))?;
        crate::plan::evaluate_metadata(&op.evaluator(), r.metadata.as_ref(), logical_id)
            .map_err(|e| e.to_string())
    }

    /// A resource's HOT `external_id`, evaluated.
    pub(super) fn external_id_for(
        &self,
        op: &Op,
        logical_id: &str,
    ) -> Result<Option<String>, ProviderError> {
        let Some(r) = op.template.resource(logical_id) else {
            return Ok(None);
        };
        crate::plan::external_id(&op.evaluator(), r)
            .map_err(|e| ProviderError::invalid_request(e.to_string()))
    }

    /// The engine's own server of `resource_type` (an alias resolved), if
    /// it has one; `None` for every type a provider serves.
    pub(super) fn served_by_engine(&self, resource_type: &str) -> Option<EngineServed> {
        let canonical = self.registry.canonical(resource_type);
        if crate::group::is_group(canonical) {
            Some(EngineServed::Group)
        } else if crate::nested::is_stack(canonical) {
            Some(EngineServed::NestedStack)
        } else {
            None
        }
    }
}

/// CloudFormation's system tags of a resource; none for a custom resource,
/// whose handler gets exactly CloudFormation's fields (and no stack tags).
fn system_tags(
    stack_id: &str,
    stack_name: &str,
    logical_id: &str,
    type_name: &str,
) -> cairn_sdk::ResourceTags {
    if crate::template::eval::is_custom_resource(type_name) {
        return cairn_sdk::ResourceTags::default();
    }
    cairn_sdk::ResourceTags {
        system: [
            ("aws:cloudformation:stack-name", stack_name),
            ("aws:cloudformation:stack-id", stack_id),
            ("aws:cloudformation:logical-id", logical_id),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: ErrorKind) -> Result<CreateResult, ProviderError> {
        Err(ProviderError::new(kind, "no"))
    }

    #[test]
    fn a_recorded_call_is_resumed_with_its_request_id_and_a_new_one_is_minted() {
        let stored: PendingCall =
            serde_json::from_str(r#"{"action":"DELETE","request_id":"r-1"}"#).unwrap();
        assert_eq!(stored.action, CallKind::Delete);
        let (again, attempt) = begin_or_resume(Some(&stored), CallKind::Delete);
        assert_eq!(
            (again.request_id.as_str(), attempt),
            ("r-1", Attempt::Again)
        );
        // A call of another kind is not this one: a new request.
        let (fresh, attempt) = begin_or_resume(Some(&stored), CallKind::Create);
        assert_eq!((fresh.action, attempt), (CallKind::Create, Attempt::First));
        assert_ne!(fresh.request_id, "r-1");
        assert_ne!(begin(CallKind::Create).request_id, fresh.request_id);
        // Stored with the words Cairn has always written.
        for (kind, word) in [
            (CallKind::Create, "CREATE"),
            (CallKind::Update, "UPDATE"),
            (CallKind::Delete, "DELETE"),
            (CallKind::RollbackUpdate, "ROLLBACK_UPDATE"),
            (CallKind::Signals, "SIGNALS"),
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), Value::from(word));
        }
        let waiting = wait_for_signals(Some(&stored), 7);
        assert_eq!(
            serde_json::to_string(&waiting).unwrap(),
            r#"{"action":"SIGNALS","request_id":"r-1","since_ms":7}"#
        );
    }

    #[test]
    fn only_a_providers_answer_lets_a_record_go() {
        assert_eq!(learned(err(ErrorKind::InvalidRequest)), Learned::Nothing);
        assert_eq!(learned(err(ErrorKind::NotFound)), Learned::Nothing);
        for kind in [
            ErrorKind::Timeout,
            ErrorKind::InternalFailure,
            ErrorKind::Throttling,
        ] {
            assert_eq!(learned(err(kind)), Learned::Unknown("no".into()));
        }
        let left = Err(ProviderError::internal("stopped waiting").leaving("gen-1"));
        assert!(matches!(learned(left), Learned::Made(c) if c.physical_resource_id == "gen-1"));
    }
}
