//! Hooks in the engine: the hooks in force (every HOOK type's default
//! version in the registry, read when an operation is loaded), their
//! verdict on a resource before its create, update or delete is recorded
//! and sent (`Hooks::judge`, asked by the steps), and the hooks defined in
//! templates (`AWS::CloudFormation::GuardHook`), which the engine keeps in
//! the registry itself.
//!
//! Which actions are judged: a stack's creates, its updates (in place and
//! replacements) and a DeleteStack's deletes. A rollback's and a cleanup's
//! actions are not: they take the stack back to where it was, which no hook
//! may keep it from (CloudFormation runs hooks before provisioning, and
//! Cairn never leaves a stack stuck).

use std::time::Instant;

use cairn_sdk::{CreateResult, ErrorKind, ProviderError, UpdateResult};
use serde_json::{json, Map, Value};

use super::{Core, Hooks, Op};
use crate::guard::{self, GuardVerdict};
use crate::hooks::{
    guard_hook_of, FailureMode, HookAction, HookDefinition, HookEvent, HookHandler, HookStatus,
    HookTarget, PRE_PROVISION,
};
use crate::stack::{EventRecord, ResourceRecord, ResourceStatus};
use crate::store::StoreError;
use crate::type_registry::{
    NewTypeVersion, RegistrationRecord, RegistrationStatus, RegistryTypeKind,
};

/// What the hooks said of one action: their events, and why it may not go
/// on (a FAILED verdict, or no verdict, of a hook whose failure mode is
/// FAIL).
pub(in crate::engine) struct Verdict {
    pub events: Vec<EventRecord>,
    pub refusal: Option<String>,
}

impl Core {
    /// The hooks in force: each HOOK type's default version.
    pub(super) async fn active_hooks(&self) -> Result<Vec<HookDefinition>, StoreError> {
        Ok(self
            .store
            .type_versions()
            .await?
            .into_iter()
            .filter(|v| v.kind == RegistryTypeKind::Hook && v.is_default && !v.deprecated)
            .filter_map(|v| match serde_json::from_str(&v.handler) {
                Ok(h) => Some(h),
                Err(e) => {
                    tracing::warn!(hook = %v.type_name, "a hook the state keeps cannot be read, so it judges nothing: {e}");
                    None
                }
            })
            .collect())
    }
}

/// The resource status a hook's event shows for `action`.
fn in_progress(action: HookAction) -> ResourceStatus {
    match action {
        HookAction::Create => ResourceStatus::CreateInProgress,
        HookAction::Update => ResourceStatus::UpdateInProgress,
        HookAction::Delete => ResourceStatus::DeleteInProgress,
    }
}

/// A hook's type ARN (`HookArn`).
fn hook_arn(core: &Core, alias: &str) -> String {
    let id = &core.config.identity;
    format!(
        "arn:{}:cloudformation:{}:{}:type/hook/{}",
        id.partition,
        id.region,
        id.account_id,
        alias.replace("::", "-")
    )
}

impl Hooks<'_> {
    /// The hooks' verdict on `action` of `rec` (its properties as the call
    /// will send them; `previous`: an update's before).
    pub(in crate::engine) async fn judge(
        &self,
        op: &Op,
        rec: &ResourceRecord,
        action: HookAction,
        previous: Option<&Map<String, Value>>,
    ) -> Verdict {
        let type_name = self.registry.canonical(&rec.resource_type).to_string();
        let target = HookTarget {
            stack_name: &op.stack.stack_name,
            stack_id: &op.stack.stack_id,
            logical_id: &rec.logical_id,
            type_name: &type_name,
            action,
            properties: &rec.properties,
            previous,
        };
        let mut events = Vec::new();
        let mut refused: Vec<(String, String)> = Vec::new();
        for hook in op.hooks.iter().filter(|h| h.applies_to(&target)) {
            let mode = hook.configuration.failure_mode;
            events.push(hook_event(
                op,
                rec,
                action,
                hook,
                HookStatus::InProgress,
                None,
            ));
            let started = Instant::now();
            let (status, why) = self.invoke(hook, &target).await;
            self.shared
                .metrics
                .hook_call(&hook.type_name, status.as_str(), started.elapsed());
            let shown = match (&why, mode) {
                (Some(why), FailureMode::Warn) => Some(format!(
                    "{why} (failure mode WARN: the {} goes on)",
                    action.as_str().to_ascii_lowercase()
                )),
                (why, _) => why.clone(),
            };
            events.push(hook_event(op, rec, action, hook, status, shown));
            if let (Some(why), FailureMode::Fail) = (why, mode) {
                refused.push((hook.type_name.clone(), why));
            }
        }
        let refusal = (!refused.is_empty()).then(|| {
            let names: Vec<&str> = refused.iter().map(|(n, _)| n.as_str()).collect();
            let reasons: Vec<String> = refused.iter().map(|(n, w)| format!("{n}: {w}")).collect();
            format!(
                "The following hook(s) failed: [{}]. {}",
                names.join(", "),
                reasons.join(". ")
            )
        });
        Verdict { events, refusal }
    }

    /// One hook on one target: its status, and why it did not succeed.
    async fn invoke(
        &self,
        hook: &HookDefinition,
        target: &HookTarget<'_>,
    ) -> (HookStatus, Option<String>) {
        match &hook.handler {
            HookHandler::Guard { rules, location } => {
                let doc = hook.guard_input(target, &self.config.identity.account_id);
                let (rules, location) = (rules.clone(), location.clone());
                // Guard's evaluator is synchronous: off the runtime.
                let judged =
                    tokio::task::spawn_blocking(move || guard::evaluate(&rules, &location, &doc))
                        .await;
                match judged {
                    Ok(Ok(GuardVerdict::Compliant)) => (HookStatus::Succeeded, None),
                    Ok(Ok(GuardVerdict::NonCompliant(failed))) => {
                        let why: Vec<String> = failed
                            .iter()
                            .map(|(rule, message)| format!("rule {rule}: {message}"))
                            .collect();
                        (HookStatus::Failed, Some(why.join("; ")))
                    }
                    Ok(Err(e)) => (HookStatus::Error, Some(e.to_string())),
                    Err(e) => (
                        HookStatus::Error,
                        Some(format!("the Guard evaluation did not finish: {e}")),
                    ),
                }
            }
        }
    }

    /// Makes a hook defined in a template: its rules read and checked, then
    /// kept in the registry as a HOOK type (its physical id the alias). A
    /// create asked again (a crash) finds its registration by its request
    /// id.
    pub(super) async fn hook_create(
        &self,
        r: &ResourceRecord,
        request_id: &str,
    ) -> Result<CreateResult, ProviderError> {
        let (alias, definition, rules) = self.definition(&r.properties).await?;
        // Another stack's hook of that alias (or a registered HOOK type):
        // refused, nothing changed. A create asked again finds its own.
        let mine = self
            .store
            .registrations()
            .await
            .map_err(|e| ProviderError::internal(e.to_string()))?
            .into_iter()
            .any(|g| g.type_name == alias && g.client_token.as_deref() == Some(request_id));
        if !mine && !self.live_versions(&alias).await?.is_empty() {
            return Err(ProviderError::new(
                ErrorKind::AlreadyExists,
                format!("Hook {alias} already exists in this state (another stack's hook, or a registered HOOK type); give this one another Alias"),
            ));
        }
        self.register(&alias, &definition, &rules, request_id)
            .await?;
        let mut attributes = Map::new();
        attributes.insert("HookArn".into(), json!(hook_arn(self, &alias)));
        Ok(CreateResult {
            physical_resource_id: alias,
            attributes,
            no_echo: false,
        })
    }

    /// A template's hook changed (its alias stays: a new alias is a new
    /// hook): a new version, made the default, the older ones
    /// deregistered.
    pub(super) async fn hook_update(
        &self,
        physical_id: &str,
        properties: &Map<String, Value>,
        request_id: &str,
    ) -> Result<UpdateResult, ProviderError> {
        let (alias, definition, rules) = self.definition(properties).await?;
        if alias != physical_id {
            return Err(ProviderError::invalid_request(format!(
                "the hook {physical_id} cannot become {alias}: a new Alias replaces the hook"
            )));
        }
        let version = self
            .register(&alias, &definition, &rules, request_id)
            .await?;
        let store_error = |e: StoreError| ProviderError::internal(e.to_string());
        self.store
            .set_default_type_version(&alias, &version)
            .await
            .map_err(store_error)?;
        for old in self
            .live_versions(&alias)
            .await?
            .into_iter()
            .filter(|v| *v != version)
        {
            self.store
                .deregister_type_version(&alias, &old)
                .await
                .map_err(store_error)?;
        }
        let mut attributes = Map::new();
        attributes.insert("HookArn".into(), json!(hook_arn(self, &alias)));
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes,
            no_echo: false,
        })
    }

    /// A template's hook deleted: every version deregistered (gone
    /// already: deleted).
    pub(super) async fn hook_delete(&self, physical_id: &str) -> Result<(), ProviderError> {
        let mut live: Vec<(bool, String)> = self
            .store
            .type_versions()
            .await
            .map_err(|e| ProviderError::internal(e.to_string()))?
            .into_iter()
            .filter(|v| v.type_name == physical_id && !v.deprecated)
            .map(|v| (v.is_default, v.version_id))
            .collect();
        // The others first: the default goes last.
        live.sort();
        for (_, v) in &live {
            match self.store.deregister_type_version(physical_id, v).await {
                Ok(()) | Err(StoreError::TypeNotFound { .. }) => {}
                Err(e) => return Err(ProviderError::internal(e.to_string())),
            }
        }
        Ok(())
    }

    /// The hook's definition from its properties, with its rules read
    /// (`[hooks] rule_dirs`, or https) and checked.
    async fn definition(
        &self,
        properties: &Map<String, Value>,
    ) -> Result<(String, HookDefinition, String), ProviderError> {
        let (alias, location, configuration) =
            guard_hook_of(properties).map_err(ProviderError::invalid_request)?;
        let bytes = self
            .read_allowed(
                &location,
                &self.config.hooks.rule_dirs,
                "RuleLocation",
                "[hooks] rule_dirs",
            )
            .await
            .map_err(ProviderError::invalid_request)?;
        let rules = String::from_utf8(bytes).map_err(|_| {
            ProviderError::invalid_request(format!(
                "the Guard rules at {location} are not UTF-8 text"
            ))
        })?;
        let checked = {
            let (rules, location) = (rules.clone(), location.clone());
            tokio::task::spawn_blocking(move || guard::check_rules(&rules, &location)).await
        };
        match checked {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(ProviderError::invalid_request(e.to_string())),
            Err(e) => return Err(ProviderError::internal(e.to_string())),
        }
        let definition = HookDefinition {
            type_name: alias.clone(),
            handler: HookHandler::Guard {
                rules: rules.clone(),
                location,
            },
            configuration,
        };
        Ok((alias, definition, rules))
    }

    /// The live versions of `alias`.
    async fn live_versions(&self, alias: &str) -> Result<Vec<String>, ProviderError> {
        Ok(self
            .store
            .type_versions()
            .await
            .map_err(|e| ProviderError::internal(e.to_string()))?
            .into_iter()
            .filter(|v| v.type_name == alias && !v.deprecated)
            .map(|v| v.version_id)
            .collect())
    }

    /// Records `definition` as a new version of `alias`, once per request
    /// id: a request asked again finds the version it made. Its version.
    async fn register(
        &self,
        alias: &str,
        definition: &HookDefinition,
        rules: &str,
        request_id: &str,
    ) -> Result<String, ProviderError> {
        let store_error = |e: StoreError| ProviderError::internal(e.to_string());
        let at = crate::stack::now();
        let begun = self
            .store
            .begin_registration(&RegistrationRecord {
                token: uuid::Uuid::new_v4().to_string(),
                type_name: alias.to_string(),
                kind: RegistryTypeKind::Hook,
                status: RegistrationStatus::InProgress,
                description: "a template's hook".into(),
                version_id: None,
                client_token: Some(request_id.to_string()),
                created_at: at.clone(),
                updated_at: at,
            })
            .await
            .map_err(store_error)?;
        if let (RegistrationStatus::Complete, Some(v)) = (begun.status, &begun.version_id) {
            return Ok(v.clone());
        }
        let handler = serde_json::to_string(definition)
            .map_err(|e| ProviderError::internal(e.to_string()))?;
        let version = NewTypeVersion {
            type_name: alias.to_string(),
            kind: RegistryTypeKind::Hook,
            schema: "{}".into(),
            description: format!("Guard hook ({PRE_PROVISION})"),
            handler,
            secret: None,
            package_sha256: cairn_package::sha256_hex(rules.as_bytes()),
            signed_by: None,
        };
        self.store
            .complete_registration(&begun.token, &version, rules.as_bytes())
            .await
            .map_err(store_error)
    }
}

/// One hook event of `rec` (DescribeStackEvents' hook fields).
fn hook_event(
    op: &Op,
    rec: &ResourceRecord,
    action: HookAction,
    hook: &HookDefinition,
    status: HookStatus,
    reason: Option<String>,
) -> EventRecord {
    let mut shown = rec.clone();
    shown.status = in_progress(action);
    shown.status_reason = None;
    shown.updated_at = crate::stack::now();
    let mut e = op.resource_event(&shown);
    e.hook = Some(HookEvent {
        hook_type: hook.type_name.clone(),
        hook_status: status,
        hook_status_reason: reason,
        hook_invocation_point: PRE_PROVISION.into(),
        hook_failure_mode: hook.configuration.failure_mode,
    });
    e
}
