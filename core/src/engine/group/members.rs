//! One member at a time: its calls (recorded before they are made), its
//! events, its health; the group state written with every transition.

use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_sdk::{Health, ProviderError, StatusRequest};
use serde_json::{Map, Value};

use super::{bounded, failed, Run, HEALTH_POLL};
use crate::engine::{Groups, Op};
use crate::group::naming;
use crate::group::state::{GroupState, Member};
use crate::group::types::MemberDefinition;
use crate::plan::Decision;
use crate::stack::{now, CallKind, EventRecord, ResourceStatus, StackStatus};

impl<'a> Run<'a> {
    pub(super) async fn load(
        groups: Groups<'a>,
        op: &'a Op,
        logical_id: &str,
        physical_id: &str,
    ) -> Result<Run<'a>, ProviderError> {
        let stored = groups
            .store
            .group(&op.stack.stack_id, physical_id)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let state = match stored {
            Some(v) => serde_json::from_value(v).map_err(|e| {
                failed(format!(
                    "the stored state of group {logical_id} is unreadable: {e}"
                ))
            })?,
            None => GroupState::default(),
        };
        Ok(Run {
            groups,
            op,
            logical_id: logical_id.to_string(),
            physical_id: physical_id.to_string(),
            state: tokio::sync::Mutex::new(state),
        })
    }

    pub(in crate::engine) async fn snapshot(&self) -> GroupState {
        self.state.lock().await.clone()
    }

    /// A write that did not hold: the operation stops (as for any resource).
    pub(super) fn lost(&self, e: crate::store::StoreError) -> ProviderError {
        tracing::error!(stack = %self.op.stack.stack_name, group = %self.logical_id, "cannot record group state: {e}");
        let reason = format!("cannot record the state of group {}: {e}", self.logical_id);
        self.op.note_store_failure(e);
        self.op.aborted.store(true, Ordering::SeqCst);
        failed(reason)
    }

    /// Applies `change` to the state and stores it with `events`.
    pub(in crate::engine) async fn save(
        &self,
        events: Vec<EventRecord>,
        change: impl FnOnce(&mut GroupState),
    ) -> Result<(), ProviderError> {
        if self.op.aborted.load(Ordering::SeqCst) {
            return Err(failed("the operation lost its lease"));
        }
        let mut st = self.state.lock().await;
        change(&mut st);
        let doc = serde_json::to_value(&*st).map_err(|e| failed(e.to_string()))?;
        self.groups
            .store
            .put_group(
                &self.op.lease,
                &self.logical_id,
                &self.physical_id,
                Some(&doc),
                &events,
            )
            .await
            .map_err(|e| self.lost(e))
    }

    /// A member's event, as a template resource's (its name as logical id).
    pub(in crate::engine) fn event(&self, m: &Member) -> EventRecord {
        EventRecord {
            hook: None,
            event_id: uuid::Uuid::new_v4().to_string(),
            stack_id: self.op.stack.stack_id.clone(),
            stack_name: self.op.stack.stack_name.clone(),
            logical_id: m.name.clone(),
            physical_id: m.physical_id.clone().unwrap_or_default(),
            // As written (a HOT group of `server.yaml` members).
            resource_type: crate::shown::member_type(&self.op.template, &m.name, &m.resource_type)
                .unwrap_or(&m.resource_type)
                .to_string(),
            timestamp: m.updated_at.clone(),
            status: m.status.into(),
            status_reason: m.status_reason.clone(),
            properties: Some(
                self.op
                    .mask(Value::Object(m.properties.clone()).to_string()),
            ),
        }
    }

    /// A progress event of the group itself (e.g. a batch starting).
    pub(super) fn progress(&self, reason: String) -> EventRecord {
        let status = match self.op.stack.status {
            StackStatus::CreateInProgress => ResourceStatus::CreateInProgress,
            StackStatus::DeleteInProgress | StackStatus::RollbackInProgress => {
                ResourceStatus::DeleteInProgress
            }
            _ => ResourceStatus::UpdateInProgress,
        };
        let type_name = self
            .op
            .template
            .resource(&self.logical_id)
            .map(|r| r.shown_type().to_string())
            .unwrap_or_default();
        EventRecord {
            hook: None,
            event_id: uuid::Uuid::new_v4().to_string(),
            stack_id: self.op.stack.stack_id.clone(),
            stack_name: self.op.stack.stack_name.clone(),
            logical_id: self.logical_id.clone(),
            physical_id: self.physical_id.clone(),
            resource_type: type_name,
            timestamp: now(),
            status: status.into(),
            status_reason: Some(reason),
            properties: None,
        }
    }

    /// The logical id of the group's launch configuration (its
    /// `LaunchConfigurationName` is a `Ref` of it in the template): the
    /// templates of members that are nested stacks were read under it.
    pub(in crate::engine) fn launch_logical_id(&self) -> String {
        self.op
            .template
            .resource(&self.logical_id)
            .and_then(|g| g.properties.get("LaunchConfigurationName"))
            .and_then(|l| l.get("Ref"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    pub(in crate::engine) fn context(
        &self,
        m: &Member,
        request_id: &str,
    ) -> cairn_sdk::RequestContext {
        self.groups
            .protocol()
            .context(self.op, &m.name, &m.resource_type, request_id)
    }

    pub(super) async fn bounded<T>(
        &self,
        work: Vec<impl std::future::Future<Output = T>>,
    ) -> Vec<T> {
        bounded(self.groups.config.engine.max_concurrency, work).await
    }

    /// Finishes what a crash interrupted and clears failures: members with
    /// a call in flight get it again (same request id); a member replaced
    /// under its name is deleted once its replacement is made, or put back
    /// when that failed; failed members are deleted (a failed update in
    /// place stays, for the rollback to update back).
    pub(super) async fn settle(&self) -> Result<(), ProviderError> {
        let st = self.snapshot().await;
        let in_flight = |kind: CallKind| -> Vec<Member> {
            st.members
                .iter()
                .filter(|m| m.pending.as_ref().is_some_and(|p| p.action == kind))
                .cloned()
                .collect()
        };
        let work: Vec<_> = in_flight(CallKind::Create)
            .into_iter()
            .map(|m| self.finish_create(m))
            .collect();
        // A failed one is deleted just below.
        self.bounded(work).await;
        let steps = self.groups.steps();
        let steps = &steps;
        let work: Vec<_> = in_flight(CallKind::Update)
            .into_iter()
            .map(|m| steps.update_member(self, m.clone(), m))
            .collect();
        // A failed one stays UPDATE_FAILED.
        self.bounded(work).await;
        let st = self.snapshot().await;
        let work: Vec<_> = st
            .replaced
            .iter()
            .map(|old| {
                let made = match st.member(&old.name) {
                    Some(m) if m.is_in_service() => Ok(()),
                    Some(m) => Err(format!(
                        "{}: {}",
                        m.name,
                        m.status_reason.clone().unwrap_or_default()
                    )),
                    None => Err(format!("{}: its replacement was not made", old.name)),
                };
                steps.finish_replacement(self, old.clone(), made)
            })
            .collect();
        // What could not be put back or deleted stays kept aside, asked
        // again by the next operation.
        self.bounded(work).await;
        let left = self.snapshot().await.left;
        let work: Vec<_> = left
            .into_iter()
            .map(|m| steps.delete_left_member(self, m))
            .collect();
        self.bounded(work).await;
        let doomed: Vec<String> = self
            .snapshot()
            .await
            .members
            .iter()
            .filter(|m| {
                m.pending
                    .as_ref()
                    .is_some_and(|p| p.action == CallKind::Delete)
                    || matches!(
                        m.status,
                        ResourceStatus::CreateFailed | ResourceStatus::DeleteFailed
                    )
            })
            .map(|m| m.name.clone())
            .collect();
        self.delete_members(&doomed).await
    }

    /// Creates the members `indices` from `definition` in parallel; the
    /// first failure's reason, if any (the others are still awaited).
    pub(super) async fn create_members(
        &self,
        prefix: &str,
        indices: &[u64],
        launch_configuration: &str,
        definition: &MemberDefinition,
    ) -> Result<(), String> {
        let work: Vec<_> = indices
            .iter()
            .map(|i| self.create_member(prefix, *i, launch_configuration, definition))
            .collect();
        self.bounded(work).await.into_iter().collect()
    }

    pub(super) async fn create_member(
        &self,
        prefix: &str,
        index: u64,
        launch_configuration: &str,
        definition: &MemberDefinition,
    ) -> Result<(), String> {
        let name = naming::member_name(prefix, index);
        if let Some(existing) = self.state.lock().await.member(&name).cloned() {
            if existing.pending.is_some() {
                return self.finish_create(existing).await;
            }
            return match existing.status {
                ResourceStatus::CreateFailed => Err(format!(
                    "{name}: {}",
                    existing.status_reason.unwrap_or_default()
                )),
                _ => Ok(()),
            };
        }
        let m = Member {
            name: name.clone(),
            index,
            resource_type: definition.member_type.clone(),
            launch_configuration: launch_configuration.to_string(),
            physical_id: None,
            status: ResourceStatus::CreateInProgress,
            status_reason: None,
            properties: definition.properties_of(index),
            attributes: Map::new(),
            pending: None,
            previous_properties: None,
            updated_at: now(),
        };
        self.groups.steps().create_member(self, m).await
    }

    /// Moves the members `indices` to `definition` under their names (a
    /// group whose members keep their names), in parallel; the first
    /// failure's reason, if any (the others are still awaited).
    pub(super) async fn update_members(
        &self,
        indices: &[u64],
        prefix: &str,
        launch_configuration: &str,
        definition: &MemberDefinition,
    ) -> Result<(), String> {
        // Boxed: a member's update may make a whole nested stack, too
        // large a future for a worker's stack.
        let work: Vec<_> = indices
            .iter()
            .map(|i| Box::pin(self.update_member(prefix, *i, launch_configuration, definition)))
            .collect();
        self.bounded(work).await.into_iter().collect()
    }

    /// One member to the new definition: updated in place when its type's
    /// schema allows the change, else replaced under its name (also when
    /// its type changes, and always for a member that is a nested stack:
    /// its child's update would wait on the group's own outcome, so a new
    /// child is made instead); a property that cannot change fails it with
    /// the text a template resource gets.
    async fn update_member(
        &self,
        prefix: &str,
        index: u64,
        launch_configuration: &str,
        definition: &MemberDefinition,
    ) -> Result<(), String> {
        let name = naming::member_name(prefix, index);
        let Some(old) = self.state.lock().await.member(&name).cloned() else {
            return Err(format!("{name} is not a member"));
        };
        let new = Member {
            resource_type: definition.member_type.clone(),
            launch_configuration: launch_configuration.to_string(),
            properties: definition.properties_of(index),
            ..old.clone()
        };
        let steps = self.groups.steps();
        let nested = self.groups.protocol().served_by_engine(&new.resource_type)
            == Some(crate::engine::served::EngineServed::NestedStack);
        if old.resource_type != new.resource_type || nested {
            return steps.replace_member(self, old, new).await;
        }
        let schema = self.groups.registry.schema(&new.resource_type);
        let decision = crate::plan::decide(
            schema.as_deref(),
            &old.properties,
            &new.properties,
            None,
            None,
        );
        match decision {
            // A failed update is sent again.
            Decision::NoChange | Decision::MetadataOnly
                if old.status != ResourceStatus::UpdateFailed =>
            {
                self.save(Vec::new(), |st| st.put(new))
                    .await
                    .map_err(|e| e.message)
            }
            Decision::Replace { .. } => steps.replace_member(self, old, new).await,
            Decision::Unsupported { property } => {
                let reason = format!(
                    "Update of property {property} of type {} is not supported",
                    new.resource_type
                );
                let mut m = old;
                m.status = ResourceStatus::UpdateFailed;
                m.status_reason = Some(reason.clone());
                m.updated_at = now();
                let event = self.event(&m);
                self.save(vec![event], |st| st.put(m))
                    .await
                    .map_err(|e| e.message)?;
                Err(format!("{name}: {reason}"))
            }
            _ => steps.update_member(self, old, new).await,
        }
    }

    /// Learns the outcome of the member's create a crash interrupted (a
    /// custom-resource handler is never sent a Create twice) and records it.
    pub(super) async fn finish_create(&self, m: Member) -> Result<(), String> {
        self.groups.steps().resume_member_create(self, m).await
    }

    /// Deletes the named members in parallel; all are tried, the first
    /// failure is returned.
    pub(super) async fn delete_members(&self, names: &[String]) -> Result<(), ProviderError> {
        let work: Vec<_> = names
            .iter()
            .map(|n| self.delete_member(n.clone()))
            .collect();
        self.bounded(work)
            .await
            .into_iter()
            .collect::<Result<(), String>>()
            .map_err(failed)
    }

    pub(in crate::engine) async fn delete_member(&self, name: String) -> Result<(), String> {
        let Some(m) = self.state.lock().await.member(&name).cloned() else {
            return Ok(());
        };
        self.groups.steps().delete_member(self, m).await
    }

    /// Asks the member's provider until it reports healthy, or fails after
    /// the health timeout with the last reason.
    pub(super) async fn wait_healthy(&self, name: &str) -> Result<(), String> {
        let limit = Duration::from_secs(self.groups.config.engine.health_timeout_seconds);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let reason = match self.health(name).await {
                Ok(()) => return Ok(()),
                Err(reason) => reason,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "{name} did not report healthy within {} seconds: {reason}",
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(HEALTH_POLL).await;
        }
    }

    /// One health check of a member: Ok when healthy, else the reason.
    pub(super) async fn health(&self, name: &str) -> Result<(), String> {
        let Some(m) = self.state.lock().await.member(name).cloned() else {
            return Err(format!("{name} is not a member"));
        };
        let Some(physical) = m.physical_id.clone().filter(|_| m.is_in_service()) else {
            return Err(format!("{name} is {}", m.status));
        };
        let t = self
            .groups
            .protocol()
            .provider_for(&m.resource_type, None)
            .map_err(|e| e.message)?;
        let req = StatusRequest {
            context: self.context(&m, &uuid::Uuid::new_v4().to_string()),
            physical_resource_id: physical,
            properties: m.properties.clone(),
        };
        match self
            .groups
            .protocol()
            .timed("status check", t.provider.check_status(&req))
            .await
        {
            Ok(Health::Healthy) => Ok(()),
            Ok(Health::Unhealthy { reason }) => Err(reason),
            Err(e) => Err(e.message),
        }
    }
}
