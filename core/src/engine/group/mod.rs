//! Instance groups, run by the engine: members are resources of any
//! provider's type, created, rolled and deleted here through the same
//! provider calls as template resources, each with its own events.
//!
//! A group's create, update and delete all converge the stored group state
//! (`group::state`) to what the properties ask for, so a call re-issued
//! after a crash (same request id) continues from the stored state: member
//! calls are recorded before they are made (re-issued with their request
//! id), and a rolling replacement's plan and cursor are stored before its
//! first batch. A rollback is the same convergence towards the old launch
//! configuration.
//!
//! Here: the entry points and the convergence; `members` (one member's
//! calls, events and health), `rollout` (the rolling replacement and
//! resizing), `health` (members checked by their providers: drift, health,
//! healing).

use crate::engine::kinds::Groups;
use std::time::Duration;

use cairn_sdk::{CreateResult, ProviderError, UpdateResult};
use serde_json::{Map, Value};

use super::Op;
use crate::group::naming;
use crate::group::policy::{self, RollingUpdate};
use crate::group::state::GroupState;
use crate::group::types::{self, GroupSpec, MemberDefinition, LAUNCH_CONFIGURATION};
use crate::stack::{Journal, ResourceRecord, StackStatus};
use crate::template::eval::Evaluated;
use crate::template::hot;
use crate::template::source::child;
use crate::validate;

mod health;
mod members;
mod rollout;

/// How often a new member's health is asked while it is not healthy yet.
const HEALTH_POLL: Duration = Duration::from_millis(250);

/// One group call: the group and its state, shared by the member tasks.
pub(in crate::engine) struct Run<'a> {
    pub(in crate::engine) groups: Groups<'a>,
    pub(in crate::engine) op: &'a Op,
    logical_id: String,
    physical_id: String,
    pub(in crate::engine) state: tokio::sync::Mutex<GroupState>,
}

fn failed(message: impl Into<String>) -> ProviderError {
    ProviderError::internal(message)
}

/// Runs `work` concurrently, at most `limit` at once.
pub(in crate::engine) async fn bounded<T>(
    limit: usize,
    work: Vec<impl std::future::Future<Output = T>>,
) -> Vec<T> {
    let permits = tokio::sync::Semaphore::new(limit.max(1));
    let permits = &permits;
    futures::future::join_all(work.into_iter().map(|w| async move {
        let _permit = permits.acquire().await;
        w.await
    }))
    .await
}

impl Groups<'_> {
    pub(super) async fn group_create(
        &self,
        op: &Op,
        r: &ResourceRecord,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        let physical = types::physical_name(&op.stack.stack_name, &r.logical_id, request_id);
        match self.converge(op, r, &physical, &r.properties, None).await {
            Ok(attributes) => Ok(CreateResult {
                physical_resource_id: physical,
                attributes,
                no_echo: false,
            }),
            // Members may exist: the group's physical id lets a rollback or
            // a delete find and delete them.
            Err(e) => Err(e.leaving(physical)),
        }
    }

    pub(super) async fn group_update(
        &self,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
        properties: &Map<String, Value>,
        old_properties: &Map<String, Value>,
    ) -> Result<UpdateResult, ProviderError> {
        let attributes = self
            .converge(op, r, physical, properties, Some(old_properties))
            .await?;
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes,
            no_echo: false,
        })
    }

    /// Deletes every member (in parallel, bounded), then the group's state.
    pub(super) async fn group_delete(
        &self,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
    ) -> Result<(), ProviderError> {
        let run = Run::load(*self, op, &r.logical_id, physical).await?;
        let st = run.snapshot().await;
        let names: Vec<String> = st.members.iter().map(|m| m.name.clone()).collect();
        run.delete_members(&names).await?;
        // And what a crash left kept aside: members replaced under their
        // names, resources providers left while updating.
        let steps = self.steps();
        let (steps, kept) = (&steps, &run);
        let aside: Vec<_> = st
            .replaced
            .into_iter()
            .map(|m| (m, false))
            .chain(st.left.into_iter().map(|m| (m, true)))
            .map(|(m, left)| {
                Box::pin(async move {
                    match left {
                        true => steps.delete_left_member(kept, m).await,
                        false => steps.delete_replaced_member(kept, m).await,
                    }
                })
            })
            .collect();
        run.bounded(aside)
            .await
            .into_iter()
            .collect::<Result<(), String>>()
            .map_err(failed)?;
        run.groups
            .store
            .put_group(&op.lease, &r.logical_id, physical, None, &[])
            .await
            .map_err(|e| run.lost(e))
    }

    /// Moves the group's members to what `properties` ask for; returns the
    /// group's attributes.
    async fn converge(
        &self,
        op: &Op,
        r: &ResourceRecord,
        physical: &str,
        properties: &Map<String, Value>,
        old_properties: Option<&Map<String, Value>>,
    ) -> Result<Map<String, Value>, ProviderError> {
        let canonical = self.registry.canonical(&r.resource_type).to_string();
        let spec = types::spec(&canonical, &r.logical_id, properties)
            .map_err(|e| ProviderError::invalid_request(e.to_string()))?;
        let definition = self.launch_configuration(op, &r.logical_id, &spec).await?;
        let policy = self
            .rolling_policy(op, &r.logical_id)
            .map_err(ProviderError::invalid_request)?;
        let run = Run::load(*self, op, &r.logical_id, physical).await?;
        run.settle().await?;
        // Not while a stored rollout resumes: its batches name indices.
        if run.snapshot().await.rollout.is_none() {
            run.apply_removal_policies(&spec, old_properties.is_none())
                .await?;
        }
        let launch_changed = old_properties.is_some_and(|old| {
            old.get("LaunchConfigurationName") != properties.get("LaunchConfigurationName")
        });
        run.roll(&spec, &definition, policy, launch_changed).await?;
        // HOT's batch_create: only a new group's members come in batches.
        let batches = match old_properties {
            None => self
                .batch_create_policy(op, &r.logical_id)
                .map_err(ProviderError::invalid_request)?,
            Some(_) => None,
        };
        run.resize(&spec, &definition, batches).await?;
        Ok(run.snapshot().await.attributes())
    }

    /// The group's RollingUpdate policy. During an update rollback the policy
    /// of the update being rolled back counts too (the members go back under
    /// the policy that moved them).
    fn rolling_policy(&self, op: &Op, logical_id: &str) -> Result<Option<RollingUpdate>, String> {
        let evaluated = own_update_policy(op, logical_id)?;
        let found =
            policy::rolling_update(evaluated.as_ref(), logical_id).map_err(|e| e.to_string())?;
        if found.is_some() || op.stack.status != StackStatus::UpdateRollbackInProgress {
            return Ok(found);
        }
        let forward = op
            .other()
            .and_then(|o| o.template.resource(logical_id))
            .and_then(|r| r.update_policy.clone());
        // The abandoned template's policy is read as written: an intrinsic in
        // it cannot be evaluated here, and then Heat's defaults apply.
        Ok(forward.map(|p| {
            policy::rolling_update(Some(&p), logical_id)
                .ok()
                .flatten()
                .unwrap_or_default()
        }))
    }

    /// The group's BatchCreate (HOT's `batch_create`), if it has one.
    fn batch_create_policy(
        &self,
        op: &Op,
        logical_id: &str,
    ) -> Result<Option<policy::BatchCreate>, String> {
        let evaluated = own_update_policy(op, logical_id)?;
        policy::batch_create(evaluated.as_ref(), logical_id).map_err(|e| e.to_string())
    }

    /// The member definition of the launch configuration `spec` names: a
    /// `Cairn::Group::LaunchConfiguration` of this stack (its current
    /// physical resource, or the one an update replaced, which a rollback
    /// returns to).
    async fn launch_configuration(
        &self,
        op: &Op,
        logical_id: &str,
        spec: &GroupSpec,
    ) -> Result<MemberDefinition, ProviderError> {
        let rows = self
            .store
            .resources(&op.stack.stack_id)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let is_lc = |t: &str| self.registry.canonical(t) == LAUNCH_CONFIGURATION;
        let found = rows.iter().find_map(|r| {
            let mut candidates = vec![(&r.resource_type, &r.physical_id, &r.properties)];
            match &r.journal {
                Some(Journal::Changed { before }) => candidates.push((
                    &before.resource_type,
                    &before.physical_id,
                    &before.properties,
                )),
                Some(Journal::Restored { discard: Some(d) }) => {
                    candidates.push((&d.resource_type, &d.physical_id, &d.properties))
                }
                _ => {}
            }
            candidates
                .into_iter()
                .find(|(t, p, _)| {
                    is_lc(t) && p.as_deref() == Some(spec.launch_configuration.as_str())
                })
                .map(|(_, _, props)| props.clone())
        });
        let props = found.ok_or_else(|| {
            ProviderError::invalid_request(format!(
                "LaunchConfigurationName {} of {logical_id} names no {LAUNCH_CONFIGURATION} of stack {}; use {{\"Ref\": \"<its logical id>\"}}",
                spec.launch_configuration, op.stack.stack_name
            ))
        })?;
        let definition = MemberDefinition::of(&props).ok_or_else(|| {
            ProviderError::invalid_request(format!(
                "launch configuration {} has no MemberType",
                spec.launch_configuration
            ))
        })?;
        let definition = self.computed_member(op, logical_id, spec, definition)?;
        let member_type = self.registry.canonical(&definition.member_type);
        if types::is_group(member_type) || member_type == LAUNCH_CONFIGURATION {
            return Err(ProviderError::invalid_request(format!(
                "MemberType {} of launch configuration {} cannot be a group type",
                definition.member_type, spec.launch_configuration
            )));
        }
        if self.registry.get(member_type).is_none() {
            return Err(ProviderError::invalid_request(format!(
                "MemberType {} of launch configuration {}: no provider serves it",
                definition.member_type, spec.launch_configuration
            )));
        }
        let properties = validate::check_properties(
            &naming::member_name(&spec.prefix, 0),
            &definition.member_type,
            &definition.properties,
            &self.registry,
        )
        .map_err(|e| {
            ProviderError::invalid_request(format!(
                "MemberProperties of launch configuration {}: {}",
                spec.launch_configuration,
                e.message()
            ))
        })?;
        Ok(MemberDefinition {
            member_type: member_type.to_string(),
            properties,
            index_var: definition.index_var.clone(),
        })
    }
}

impl Groups<'_> {
    /// A member type no provider serves as named, known only now (HOT's
    /// `resource_def: {type: {get_param: …}}`): what the stack's
    /// environment maps it to, as Heat's registry would have; a template
    /// file (named, or mapped to) makes each member a nested stack of it,
    /// read from the files given with the stack.
    fn computed_member(
        &self,
        op: &Op,
        logical_id: &str,
        spec: &GroupSpec,
        definition: MemberDefinition,
    ) -> Result<MemberDefinition, ProviderError> {
        if self.registry.get(&definition.member_type).is_some() {
            return Ok(definition);
        }
        let context = &op.state.context;
        let member = format!("{logical_id}.member");
        let mapped = hot::registered(
            context.environment.as_ref(),
            &member,
            &definition.member_type,
        )
        .map_err(ProviderError::invalid_request)?;
        match mapped {
            hot::Registered::Type(t) => Ok(MemberDefinition {
                member_type: t,
                ..definition
            }),
            hot::Registered::Template(file) if context.files.contains_key(&file) => {
                let mut properties = Map::new();
                properties.insert(
                    "TemplateURL".into(),
                    Value::String(format!("{}{file}", crate::template::types::CONTEXT_FILE)),
                );
                properties.insert("Parameters".into(), Value::Object(definition.properties));
                Ok(MemberDefinition {
                    member_type: crate::template::types::STACK_TYPE.to_string(),
                    properties,
                    index_var: definition.index_var,
                })
            }
            hot::Registered::Template(file) => Err(ProviderError::invalid_request(format!(
                "MemberType {} of launch configuration {} names the template file {file}, which was not given with the stack: Cairn reads the files a computed type may name from its parameter's default and allowed_values, so list {file} there",
                definition.member_type, spec.launch_configuration
            ))),
        }
    }
}

/// The group's `UpdatePolicy` in the operation's template, evaluated.
fn own_update_policy(op: &Op, logical_id: &str) -> Result<Option<Value>, String> {
    let Some(p) = op
        .template
        .resource(logical_id)
        .and_then(|r| r.update_policy.clone())
    else {
        return Ok(None);
    };
    let path = child(&child("/Resources", logical_id), "UpdatePolicy");
    Ok(
        match op.evaluator().eval(&p, &path).map_err(|e| e.to_string())? {
            Evaluated::Value(v) => Some(v),
            _ => None,
        },
    )
}
