//! The resource-call protocol: how the engine calls a provider to make,
//! update or delete a resource, and what it sends. Which provider serves a
//! type (groups and nested stacks are served by the engine itself behind
//! [`served::EngineServed`]), the request's context (the stack's tags, the
//! deadline), a first call or one asked again (`recover_create`,
//! `recover_update`, `recover_delete`: an idempotent provider repeats it,
//! a custom-resource handler is never sent a request twice), the lease
//! checked right before the send, each call bounded by
//! `call_timeout_seconds` ([`Protocol::timed`]), the classification of a
//! failure whose outcome is unknown ([`outcome_unknown`]: a timeout naming
//! no physical id), and the retention policies ([`retained`]:
//! DeletionPolicy and UpdateReplacePolicy, intrinsics included).
//!
//! The durable steps around each call (the intent recorded, the outcome
//! recorded, an unknown outcome asked again, the rule that unknown never
//! forgets) are the choreography's, `engine::steps`: it is the only
//! caller of the calls that make, update or delete a resource here.

use std::time::Duration;

use cairn_sdk::{
    Cancellation, CreateRequest, CreateResult, DeleteRequest, ErrorKind, ProviderError,
    RequestContext, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};

use super::served;
use super::served::EngineServed;
use super::{Op, Protocol};
use crate::stack::ResourceRecord;
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

/// A provider call's span (an OpenTelemetry CLIENT span named `creation
/// AWS::S3::Bucket`, …, when traces are exported): the type, the
/// resource, its request id, the transport, whether the call is sent for
/// the first time or asked again, and ([`Protocol::timed`]) its outcome.
fn call_span(
    what: &str,
    context: &RequestContext,
    physical: Option<&str>,
    transport: crate::registry::Transport,
    attempt: Attempt,
) -> tracing::Span {
    let span = tracing::info_span!(
        "provider call",
        otel.name = %format!("{what} {}", context.resource_type),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        cairn.call = what,
        cairn.resource_type = %context.resource_type,
        cairn.logical_id = %context.logical_resource_id,
        cairn.physical_id = tracing::field::Empty,
        cairn.request_id = %context.request_id,
        cairn.transport = transport.as_str(),
        cairn.attempt = match attempt {
            Attempt::First => "first",
            Attempt::Again => "again",
        },
        cairn.outcome = tracing::field::Empty,
    );
    if let Some(id) = physical {
        span.record("cairn.physical_id", id);
    }
    span
}

/// Whether a failed create call's outcome is unknown: it may have made its
/// resource, so its request id stays recorded for whoever deletes it.
pub(crate) fn outcome_unknown(e: &ProviderError) -> bool {
    e.kind == ErrorKind::Timeout && e.physical_resource_id.is_none()
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
    /// timeout message ("creation", "update", "deletion"). Made by a node of
    /// a stack operation, the call holds one of its `max_concurrency` slots
    /// ([`super::dag::calling`]); the time limit starts once it has one.
    pub(super) async fn timed<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let limit = Duration::from_secs(self.config.engine.call_timeout_seconds);
        let (result, took) = super::dag::calling(async {
            let started = std::time::Instant::now();
            let result = match tokio::time::timeout(limit, call).await {
                Ok(r) => r,
                Err(_) => Err(ProviderError::timeout(format!(
                    "Resource {what} timed out after {} seconds",
                    limit.as_secs()
                ))),
            };
            (result, started.elapsed())
        })
        .await;
        let outcome = match &result {
            Ok(_) => "ok".to_string(),
            Err(e) => e.kind.as_str().to_string(),
        };
        // On the provider call's span (see [`call_span`]), when it has one.
        let span = tracing::Span::current();
        span.record("cairn.outcome", outcome.as_str());
        if result.is_err() {
            span.record("otel.status_code", "ERROR");
        }
        self.shared.metrics.provider_call(what, &outcome, took);
        result
    }

    /// Checked right before every provider call: whether this engine still
    /// holds the operation's lease. An engine that stalled past its lease
    /// (a paused machine, a long pause between recording a request and
    /// sending it) wakes up here after another engine took the operation
    /// over and resumed the same request: it must not send it as well.
    /// Within the first half of the lease's time since it was last granted
    /// nobody can have taken it ([`Op::lease_surely_held`]), so the store
    /// is asked only after that (a stalled engine's clock has moved on):
    /// one round trip less per call on a busy stack. The window left is
    /// between the store's answer and the send. A store that cannot be
    /// read does not stop the call: the write just before it held, and the
    /// write of its outcome is fenced.
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
        if op.lease_surely_held(self.lease_ttl_ms()) {
            return Ok(());
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
            Ok(None) => match self.store.renew_lease(&op.lease, self.lease_ttl_ms()).await {
                Ok(()) => Ok(()),
                Err(crate::store::StoreError::LeaseLost(_)) => Err(lost()),
                Err(e) => cannot_check(e),
            },
            Err(e) => cannot_check(e),
        }
    }

    /// A create sent to the provider serving `version` of
    /// `context.resource_type` (not a group or nested stack): the first
    /// time, or asked again.
    pub(super) async fn provider_create(
        &self,
        op: &Op,
        context: RequestContext,
        (properties, version): (Map<String, Value>, Option<&str>),
        attempt: Attempt,
    ) -> Result<CreateResult, ProviderError> {
        let t = self.provider_for(&context.resource_type, version)?;
        self.still_owner(op).await?;
        let span = call_span("creation", &context, None, t.transport, attempt);
        let req = CreateRequest {
            context,
            properties,
        };
        let call = async {
            match attempt {
                Attempt::First => self.timed("creation", t.provider.create(&req)).await,
                // The provider decides how to learn the outcome: an idempotent
                // one is asked again, a custom-resource handler never is.
                Attempt::Again => {
                    self.timed("creation", t.provider.recover_create(&req))
                        .await
                }
            }
        };
        let made = tracing::Instrument::instrument(call, span.clone()).await;
        if let Ok(m) = &made {
            span.record("cairn.physical_id", m.physical_resource_id.as_str());
        }
        made
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
            return self
                .provider_create(op, context, (properties, None), attempt)
                .await;
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
            type_version: None,
        };
        Box::pin(
            self.nested_stacks()
                .nested_create_of(op, &member, launch, &context.request_id),
        )
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
                .provider_delete(op, context, physical, (properties, None), attempt)
                .await;
        }
        self.still_owner(op).await?;
        Box::pin(self.nested_stacks().nested_delete(op, physical)).await
    }

    /// A delete sent to the provider serving `version` of
    /// `context.resource_type`; NotFound counts as deleted.
    pub(super) async fn provider_delete(
        &self,
        op: &Op,
        context: RequestContext,
        physical: &str,
        (properties, version): (Map<String, Value>, Option<&str>),
        attempt: Attempt,
    ) -> Result<(), ProviderError> {
        let t = self.provider_for(&context.resource_type, version)?;
        self.still_owner(op).await?;
        let span = call_span("deletion", &context, Some(physical), t.transport, attempt);
        let req = DeleteRequest {
            context,
            physical_resource_id: physical.to_string(),
            properties,
        };
        let call = async {
            match attempt {
                Attempt::First => self.timed("deletion", t.provider.delete(&req)).await,
                Attempt::Again => {
                    self.timed("deletion", t.provider.recover_delete(&req))
                        .await
                }
            }
        };
        let sent = tracing::Instrument::instrument(call, span).await;
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
        // the name its request id gives): first or again, the same. Its
        // calls are on the heap (as are the update's and delete's): a nested
        // stack's whole operation is a future of kilobytes that every
        // resource's step would otherwise carry, and move, in flight.
        if let Some(served) = self.served_by_engine(&r.resource_type) {
            return Box::pin(served.create(self, op, r, request_id)).await;
        }
        if let Some(id) = self.external_id_for(op, &r.logical_id)? {
            let t = self.provider_for(&r.resource_type, r.type_version.as_deref())?;
            return self.adopt_external(op, r, &t, id, request_id).await;
        }
        let context = self.context(op, &r.logical_id, &r.resource_type, request_id);
        let call = (r.properties.clone(), r.type_version.as_deref());
        self.provider_create(op, context, call, attempt).await
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
        if let Some(served) = self.served_by_engine(&rec.resource_type) {
            let call = served::Update {
                rec,
                physical_id,
                request_id,
                properties: change.properties,
                old_properties: change.old_properties,
            };
            return Box::pin(served.update(self, op, call)).await;
        }
        let context = self.context(op, &rec.logical_id, &rec.resource_type, request_id);
        self.provider_update(
            op,
            context,
            physical_id,
            change,
            rec.type_version.as_deref(),
        )
        .await
    }

    /// A group member's update in place, by the provider serving its type
    /// (a member that is a nested stack is replaced, never updated: see
    /// `engine::group`).
    pub(super) async fn member_update(
        &self,
        op: &Op,
        context: RequestContext,
        physical_id: &str,
        change: UpdateChange<'_>,
    ) -> Result<UpdateResult, ProviderError> {
        self.provider_update(op, context, physical_id, change, None)
            .await
    }

    /// An update sent to the provider serving `version` of
    /// `context.resource_type`: the first time, or asked again.
    async fn provider_update(
        &self,
        op: &Op,
        context: RequestContext,
        physical_id: &str,
        change: UpdateChange<'_>,
        version: Option<&str>,
    ) -> Result<UpdateResult, ProviderError> {
        let UpdateChange {
            properties,
            old_properties,
            changed,
            drift,
            attempt,
        } = change;
        let t = self.provider_for(&context.resource_type, version)?;
        let req = UpdateRequest {
            context,
            physical_resource_id: physical_id.to_string(),
            properties: properties.clone(),
            old_properties: old_properties.clone(),
            changed,
            drift,
        };
        self.still_owner(op).await?;
        let span = call_span(
            "update",
            &req.context,
            Some(physical_id),
            t.transport,
            attempt,
        );
        let call = async {
            match attempt {
                Attempt::First => self.timed("update", t.provider.update(&req)).await,
                // Recorded before a crash: the provider learns or repeats it (a
                // custom-resource handler is never sent it twice).
                Attempt::Again => self.timed("update", t.provider.recover_update(&req)).await,
            }
        };
        tracing::Instrument::instrument(call, span).await
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
            return Box::pin(served.delete(self, op, r, physical)).await;
        }
        let context = self.context(op, &r.logical_id, &r.resource_type, request_id);
        let call = (r.properties.clone(), r.type_version.as_deref());
        self.provider_delete(op, context, physical, call, attempt)
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
        let Ok(t) = self.provider_for(&r.resource_type, r.type_version.as_deref()) else {
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
        if let Some(other) = op.other() {
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
        let t = self.provider_for(type_name, None)?;
        let span = call_span(
            "read",
            &context,
            Some(physical_id),
            t.transport,
            Attempt::First,
        );
        let req = cairn_sdk::ReadRequest {
            context,
            physical_resource_id: physical_id.to_string(),
        };
        tracing::Instrument::instrument(self.timed("read", t.provider.read(&req)), span).await
    }

    /// The provider serving `version` of `type_name` (`None`: whatever
    /// serves the type now; a resource's calls name the registered
    /// version it was made with).
    pub(super) fn provider_for(
        &self,
        type_name: &str,
        version: Option<&str>,
    ) -> Result<Arc<crate::registry::RegisteredType>, ProviderError> {
        self.registry
            .get_version(type_name, version)
            .ok_or_else(|| {
                // A provider that cannot start fails only the resources of its
                // own types, with its name and the cause.
                let message = self
                    .registry
                    .version_unavailable_reason(type_name, version)
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

    /// `cairn update`'s healing of an instance group whose members drifted
    /// (served by the engine, like the group's other calls): the group's
    /// attributes after.
    pub(super) async fn heal_group(
        &self,
        op: &Op,
        rec: &ResourceRecord,
    ) -> Result<Map<String, Value>, ProviderError> {
        self.groups().group_heal(op, rec).await
    }

    /// The engine's own server of `resource_type` (an alias resolved), if
    /// it has one; `None` for every type a provider serves.
    pub(super) fn served_by_engine(&self, resource_type: &str) -> Option<EngineServed> {
        let canonical = self.registry.canonical(resource_type);
        if crate::group::is_group(canonical) {
            Some(EngineServed::Group)
        } else if crate::nested::is_stack(canonical) {
            Some(EngineServed::NestedStack)
        } else if crate::hooks::is_hook_type(canonical) {
            Some(EngineServed::Hook)
        } else {
            None
        }
    }

    /// HOT's `external_id`: instead of a create, the existing resource is
    /// adopted once its provider confirms it exists (Heat's ADOPT and
    /// check): read, with its attributes, by a provider that reads; else
    /// checked for drift; one the provider cannot check is taken as given.
    pub(super) async fn adopt_external(
        &self,
        op: &Op,
        r: &ResourceRecord,
        t: &crate::registry::RegisteredType,
        id: String,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        let missing = || {
            ProviderError::invalid_request(format!(
                "Invalid external resource: Resource {id} ({}) can not be found.",
                r.resource_type
            ))
        };
        // A provider that reads gives the resource's attributes too
        // (`get_attr` of the adopted resource works).
        let context = self.context(op, &r.logical_id, &r.resource_type, request_id);
        match self.read(context, &r.resource_type, &id).await {
            Ok(cairn_sdk::ReadResult::Found { attributes, .. }) => {
                return Ok(CreateResult {
                    physical_resource_id: id,
                    attributes,
                    no_echo: false,
                })
            }
            Ok(cairn_sdk::ReadResult::NotSupported) => {}
            Err(e) if e.is_not_found() => return Err(missing()),
            Err(e) => return Err(e),
        }
        let req = cairn_sdk::DriftRequest {
            context: self.context(op, &r.logical_id, &r.resource_type, request_id),
            physical_resource_id: id.clone(),
            properties: r.properties.clone(),
        };
        let gone = match self.timed("adoption", t.provider.check_drift(&req)).await {
            Ok(cairn_sdk::DriftResult::Deleted) => true,
            Ok(_) => false,
            Err(e) if e.is_not_found() => true,
            Err(e) => return Err(e),
        };
        if gone {
            return Err(missing());
        }
        Ok(CreateResult {
            physical_resource_id: id,
            attributes: Map::new(),
            no_echo: false,
        })
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
