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

use std::time::{Duration, Instant};

use cairn_sdk::{CreateResult, ErrorKind, ProviderError, UpdateResult};
use serde_json::{json, Map, Value};

use super::{Core, Hooks, Op};
use crate::guard::{self, GuardVerdict};
use crate::hooks::{
    hook_of, read_hook_answer, FailureMode, HookAction, HookAnswer, HookDefinition, HookEvent,
    HookHandler, HookInvocation, HookResult, HookSource, HookStatus, HookTarget, Judged,
    StackTarget, TargetOperation, PRE_PROVISION,
};
use crate::stack::{
    CallKind, EventRecord, HookWait, PendingCall, ResourceRecord, ResourceStatus, StackStatus,
};
use crate::store::StoreError;
use crate::template::source::child;
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

/// Where the hooks judging one resource's call stand.
pub(in crate::engine) enum Judgement {
    /// Every hook gave its verdict.
    Done(Verdict),
    /// A hook answered IN_PROGRESS: `pending` (the row's HOOK call) is
    /// recorded with `events`, then the hooks are asked again after
    /// `delay`.
    Later {
        pending: PendingCall,
        events: Vec<EventRecord>,
        delay: Duration,
    },
}

impl Core {
    /// The hooks in force: each HOOK type's default version, configured
    /// by its `default` type configuration when one is set (SetTypeConfiguration's
    /// HookConfiguration wins over the hook's own properties).
    pub(super) async fn active_hooks(&self) -> Result<Vec<HookDefinition>, StoreError> {
        // Asked at once: the store answers both together.
        let (configurations, versions) =
            tokio::try_join!(self.store.type_configurations(), self.store.type_versions())?;
        let configured: std::collections::BTreeMap<String, String> = configurations
            .into_iter()
            .filter(|c| c.alias == crate::type_registry::DEFAULT_ALIAS)
            .map(|c| (c.type_name, c.configuration))
            .collect();
        Ok(versions
            .into_iter()
            .filter(|v| v.kind == RegistryTypeKind::Hook && v.is_default && !v.deprecated)
            .filter_map(|v| {
                let mut hook: HookDefinition = match serde_json::from_str(&v.handler) {
                    Ok(h) => h,
                    // A registered HOOK package judges once its
                    // configuration enables it (CloudFormation's hooks are
                    // off until SetTypeConfiguration turns them on).
                    Err(_) if serde_json::from_str::<cairn_package::Handler>(&v.handler).is_ok() => {
                        HookDefinition {
                            type_name: v.type_name.clone(),
                            handler: HookHandler::Registered {
                                version: v.version_id.clone(),
                            },
                            configuration: crate::hooks::HookConfiguration {
                                hook_invocation_status:
                                    crate::hooks::HookInvocationStatus::Disabled,
                                ..Default::default()
                            },
                        }
                    }
                    Err(e) => {
                        tracing::warn!(hook = %v.type_name, "a hook the state keeps cannot be read, so it judges nothing: {e}");
                        return None;
                    }
                };
                let set = configured
                    .get(&v.type_name)
                    .and_then(|c| serde_json::from_str::<Value>(c).ok());
                if let Some(c) = set.and_then(|c| crate::hooks::parse_configuration(&c).ok()) {
                    hook.configuration = c;
                }
                Some(hook)
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

/// One hook's verdict in a dry run (`cairn hooks check`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HookCheck {
    pub hook_type: String,
    /// `STACK` or `RESOURCE`.
    pub target_type: String,
    /// The stack's name, or the resource's logical id.
    pub target: String,
    pub action: HookAction,
    pub hook_status: HookStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_status_reason: Option<String>,
    pub hook_failure_mode: FailureMode,
}

impl super::Engine {
    /// Every hook in force against `body` as the template of the stack
    /// `stack_name` (an update if the stack exists, else a create), with
    /// `parameters`, and nothing run or recorded: the STACK targets'
    /// verdicts, then each resource's (its properties as far as they are
    /// known before a deploy: what depends on other resources' attributes
    /// is shown as written).
    pub async fn check_hooks(
        &self,
        stack_name: &str,
        body: &str,
        parameters: &std::collections::BTreeMap<String, String>,
    ) -> Result<Vec<HookCheck>, super::EngineError> {
        let hooks = self.active_hooks().await?;
        let template = crate::template::Template::parse_with(body, &Default::default())?;
        let params = crate::template::parameters::ParameterValues::resolve(
            &template.parameters,
            parameters,
        )?;
        let existing = self
            .store
            .find_stack(stack_name)
            .await?
            .filter(|s| s.status != StackStatus::ReviewInProgress);
        let (stack_id, rows) = match &existing {
            Some(s) => (s.stack_id.clone(), self.store.resources(&s.stack_id).await?),
            None => (self.new_stack_id(stack_name), Vec::new()),
        };
        let reads = super::resolve::reads_stack_outputs(body, &Default::default());
        let results = super::resolve::Results::new(self.exports_map(reads).await?);
        results.record_live(&rows);
        let sctx = super::stack_context(&self.config, stack_name, &stack_id);
        let ev = crate::template::eval::Evaluator::new(&template, &params, &sctx, &results)?;
        let stack_action = match existing {
            Some(_) => HookAction::Update,
            None => HookAction::Create,
        };
        let mut checks = Vec::new();
        let secrets = secret_values(&params.raw, &params.no_echo);
        let check = |hook: &HookDefinition,
                     target_type: &str,
                     target: &str,
                     action,
                     (status, why): (HookStatus, Option<String>)| {
            HookCheck {
                hook_type: hook.type_name.clone(),
                target_type: target_type.into(),
                target: target.into(),
                action,
                hook_status: status,
                hook_status_reason: shown(&why.map(|w| masked(w, &secrets)), hook, action),
                hook_failure_mode: hook.configuration.failure_mode,
            }
        };
        let doc = crate::template::Template::body_of(body)?;
        let previous = existing
            .as_ref()
            .and_then(|s| crate::template::Template::body_of(&s.template_body).ok());
        let shown_params = shown_parameters(&params.raw, &params.no_echo);
        let target = StackTarget {
            operation: TargetOperation::Stack,
            stack_name,
            stack_id: &stack_id,
            change_set_id: None,
            action: stack_action,
            template: &doc,
            parameters: &shown_params,
            previous: previous.as_ref(),
            changes: None,
        };
        for hook in hooks
            .iter()
            .filter(|h| h.applies_to_stack(TargetOperation::Stack, stack_name, stack_action))
        {
            let answer = self
                .hooks()
                .run_to_verdict(hook, &Judged::Stack(&target))
                .await;
            checks.push(check(hook, "STACK", stack_name, stack_action, answer));
        }
        for r in &template.resources {
            let holds = r
                .condition
                .as_ref()
                .is_none_or(|c| ev.conditions().get(c).copied().unwrap_or(false));
            if !holds {
                continue;
            }
            let path = child(&child("/Resources", &r.logical_id), "Properties");
            let (properties, _) = ev.eval_object(&r.properties, &path)?;
            let row = rows
                .iter()
                .find(|row| row.logical_id == r.logical_id && crate::plan::is_live(row));
            let action = match row {
                Some(_) => HookAction::Update,
                None => HookAction::Create,
            };
            let type_name = self.registry.canonical(&r.type_name).to_string();
            let target = HookTarget {
                stack_name,
                stack_id: &stack_id,
                logical_id: &r.logical_id,
                type_name: &type_name,
                action,
                properties: &properties,
                previous: row.map(|row| &row.properties),
            };
            for hook in hooks.iter().filter(|h| h.applies_to(&target)) {
                let answer = self
                    .hooks()
                    .run_to_verdict(hook, &Judged::Resource(&target))
                    .await;
                checks.push(check(hook, "RESOURCE", &r.logical_id, action, answer));
            }
        }
        Ok(checks)
    }
}

impl Hooks<'_> {
    /// The hooks' verdict on `action` of `rec` (its properties as the call
    /// will send them; `previous`: an update's before), the call `then`
    /// it precedes: taken up where `rec`'s pending HOOK call says they
    /// stood (a crash while a hook answered IN_PROGRESS), else from the
    /// first hook. A hook that answers IN_PROGRESS stops the judging
    /// there: [`Judgement::Later`] says what to record before it is asked
    /// again.
    pub(in crate::engine) async fn judge(
        &self,
        op: &Op,
        rec: &ResourceRecord,
        (action, then): (HookAction, CallKind),
        previous: Option<&Map<String, Value>>,
    ) -> Judgement {
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
        let waited = rec
            .pending
            .as_ref()
            .filter(|p| p.action == CallKind::Hook)
            .and_then(|p| p.hook.as_ref().map(|w| (p.request_id.clone(), w)))
            .filter(|(_, w)| w.then == then);
        let (mut judged, mut refused) = waited
            .as_ref()
            .map(|(_, w)| (w.judged.clone(), w.refused.clone()))
            .unwrap_or_default();
        let mut events = Vec::new();
        let todo: Vec<&HookDefinition> = op
            .hooks
            .iter()
            .filter(|h| h.applies_to(&target) && !judged.contains(&h.type_name))
            .collect();
        for hook in todo {
            // The hook that answered IN_PROGRESS is asked again with its
            // token and callbackContext; any other starts afresh.
            let (token, invocation, context) = match resumption(waited.as_ref(), hook) {
                Some(resumed) => resumed,
                None => {
                    events.push(hook_event(
                        op,
                        rec,
                        action,
                        hook,
                        HookStatus::InProgress,
                        None,
                    ));
                    (uuid::Uuid::new_v4().to_string(), 1, None)
                }
            };
            let call = HookInvocation {
                token: &token,
                invocation,
                callback_context: context,
            };
            let (status, why) = match self.run(hook, &Judged::Resource(&target), &call).await {
                HookAnswer::InProgress {
                    callback_context,
                    delay_seconds,
                } => {
                    let asked = (token, invocation, callback_context);
                    return later(then, (judged, refused), hook, asked, events, delay_seconds);
                }
                HookAnswer::Verdict(status, why) => (status, why),
            };
            // Guard's own messages quote values: NoEcho ones are masked.
            let why = why.map(|w| op.mask(w));
            events.push(hook_event(
                op,
                rec,
                action,
                hook,
                status,
                shown(&why, hook, action),
            ));
            refuse(&mut refused, hook, why);
            judged.push(hook.type_name.clone());
        }
        Judgement::Done(Verdict {
            events,
            refusal: refusal(&refused),
        })
    }

    /// The STACK-target hooks' verdict on the operation `op` is about to
    /// run (`action` of the whole stack), as events of the stack: taken up
    /// where `waited` (the operation's recorded HOOK call) says they stood,
    /// else from the first hook. A hook that answers IN_PROGRESS stops the
    /// judging there ([`Judgement::Later`]: the call to record in the
    /// operation's options before it is asked again).
    pub(in crate::engine) async fn judge_stack(
        &self,
        op: &Op,
        action: HookAction,
        waited: Option<&PendingCall>,
    ) -> Judgement {
        let hooks: Vec<&HookDefinition> = op
            .hooks
            .iter()
            .filter(|h| h.applies_to_stack(TargetOperation::Stack, &op.stack.stack_name, action))
            .collect();
        let waited = waited
            .filter(|p| p.action == CallKind::Hook)
            .and_then(|p| p.hook.as_ref().map(|w| (p.request_id.clone(), w)));
        let (mut judged, mut refused) = waited
            .as_ref()
            .map(|(_, w)| (w.judged.clone(), w.refused.clone()))
            .unwrap_or_default();
        let mut events = Vec::new();
        if hooks.is_empty() {
            return Judgement::Done(Verdict {
                events,
                refusal: None,
            });
        }
        let template = crate::template::Template::body_of(&op.state.template_body)
            .unwrap_or_else(|_| json!({}));
        let previous = op
            .other()
            .and_then(|o| crate::template::Template::body_of(&o.state.template_body).ok());
        let parameters = shown_parameters(&op.params.raw, &op.params.no_echo);
        let target = StackTarget {
            operation: TargetOperation::Stack,
            stack_name: &op.stack.stack_name,
            stack_id: &op.stack.stack_id,
            change_set_id: None,
            action,
            template: &template,
            parameters: &parameters,
            previous: previous.as_ref(),
            changes: None,
        };
        let status = match action {
            HookAction::Create => StackStatus::CreateInProgress,
            HookAction::Update => StackStatus::UpdateInProgress,
            HookAction::Delete => StackStatus::DeleteInProgress,
        };
        let event = |hook: &HookDefinition, hook_status, reason| {
            let mut e = op.stack_event(status, None);
            e.hook = Some(HookEvent {
                hook_type: hook.type_name.clone(),
                hook_status,
                hook_status_reason: reason,
                hook_invocation_point: PRE_PROVISION.into(),
                hook_failure_mode: hook.configuration.failure_mode,
            });
            e
        };
        let todo: Vec<&HookDefinition> = hooks
            .into_iter()
            .filter(|h| !judged.contains(&h.type_name))
            .collect();
        for hook in todo {
            let (token, invocation, context) = match resumption(waited.as_ref(), hook) {
                Some(resumed) => resumed,
                None => {
                    events.push(event(hook, HookStatus::InProgress, None));
                    (uuid::Uuid::new_v4().to_string(), 1, None)
                }
            };
            let call = HookInvocation {
                token: &token,
                invocation,
                callback_context: context,
            };
            let (verdict, why) = match self.run(hook, &Judged::Stack(&target), &call).await {
                HookAnswer::InProgress {
                    callback_context,
                    delay_seconds,
                } => {
                    let then = match action {
                        HookAction::Create => CallKind::Create,
                        HookAction::Update => CallKind::Update,
                        HookAction::Delete => CallKind::Delete,
                    };
                    let asked = (token, invocation, callback_context);
                    return later(then, (judged, refused), hook, asked, events, delay_seconds);
                }
                HookAnswer::Verdict(status, why) => (status, why),
            };
            let why = why.map(|w| op.mask(w));
            events.push(event(hook, verdict, shown(&why, hook, action)));
            refuse(&mut refused, hook, why);
            judged.push(hook.type_name.clone());
        }
        Judgement::Done(Verdict {
            events,
            refusal: refusal(&refused),
        })
    }

    /// The STACK-target hooks' verdict on `action` of the whole stack, its
    /// events recorded: the refusal, if the operation may not go on. While
    /// a hook answers IN_PROGRESS, where the hooks stand is recorded in the
    /// operation's options (with the events so far) before it is asked
    /// again, so a crash resumes that hook with its token and context.
    pub(in crate::engine) async fn stack_verdict(
        &self,
        op: &Op,
        action: HookAction,
    ) -> Result<Option<String>, super::EngineError> {
        let mut options = self
            .store
            .operation(&op.stack.stack_id)
            .await?
            .map(|o| crate::operation::OperationOptions::from_value(&o.options));
        loop {
            let waited = options.as_ref().and_then(|o| o.stack_hooks.clone());
            match self.judge_stack(op, action, waited.as_ref()).await {
                Judgement::Done(verdict) => {
                    if !verdict.events.is_empty() {
                        self.store.put_events(&op.lease, &verdict.events).await?;
                    }
                    // Judged: a later resume that judges again starts afresh.
                    if let Some(mut done) = options.filter(|o| o.stack_hooks.is_some()) {
                        done.stack_hooks = None;
                        self.store
                            .set_operation_options(&op.lease, &done.to_value())
                            .await?;
                    }
                    return Ok(verdict.refusal);
                }
                Judgement::Later {
                    pending,
                    events,
                    delay,
                } => {
                    if !events.is_empty() {
                        self.store.put_events(&op.lease, &events).await?;
                    }
                    let mut kept = options.take().unwrap_or_default();
                    kept.stack_hooks = Some(pending);
                    self.store
                        .set_operation_options(&op.lease, &kept.to_value())
                        .await?;
                    options = Some(kept);
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// The CHANGE_SET-target hooks' verdicts on a change set being made
    /// (`target`), kept with it; the refusal of those whose failure mode is
    /// FAIL.
    /// `secrets`: the NoEcho parameter values, masked in the verdicts.
    pub(in crate::engine) async fn judge_change_set(
        &self,
        target: &StackTarget<'_>,
        secrets: &[&str],
    ) -> Result<(Vec<HookResult>, Option<String>), StoreError> {
        let mut results = Vec::new();
        let mut refused = Vec::new();
        for hook in self.active_hooks().await?.iter().filter(|h| {
            h.applies_to_stack(TargetOperation::ChangeSet, target.stack_name, target.action)
        }) {
            let (status, why) = self.run_to_verdict(hook, &Judged::Stack(target)).await;
            let why = why.map(|w| masked(w, secrets));
            results.push(HookResult {
                type_name: hook.type_name.clone(),
                status,
                hook_status_reason: shown(&why, hook, target.action),
                invocation_point: PRE_PROVISION.into(),
                failure_mode: hook.configuration.failure_mode,
                invoked_at: crate::stack::now(),
            });
            refuse(&mut refused, hook, why);
        }
        Ok((results, refusal(&refused)))
    }

    /// One hook's verdict on `judged`, a webhook hook invoked again (in
    /// this process) while it answers IN_PROGRESS: for the targets whose
    /// judging is not recorded on a resource's row (a whole stack, a
    /// change set, the dry run).
    pub(in crate::engine) async fn run_to_verdict(
        &self,
        hook: &HookDefinition,
        judged: &Judged<'_>,
    ) -> (HookStatus, Option<String>) {
        let token = uuid::Uuid::new_v4().to_string();
        let mut context = None;
        for invocation in 1.. {
            let call = HookInvocation {
                token: &token,
                invocation,
                callback_context: context.as_ref(),
            };
            match self.run(hook, judged, &call).await {
                HookAnswer::Verdict(status, why) => return (status, why),
                HookAnswer::InProgress {
                    callback_context,
                    delay_seconds,
                } => {
                    context = Some(callback_context);
                    tokio::time::sleep(Duration::from_secs(delay_seconds)).await;
                }
            }
        }
        unreachable!("the invocations end with a verdict (read_hook_answer: the last is one)")
    }

    /// One invocation of a hook on `judged`: a Guard hook's rules checked
    /// in process, a webhook hook POSTed its request. Counted in the
    /// metrics.
    pub(in crate::engine) async fn run(
        &self,
        hook: &HookDefinition,
        judged: &Judged<'_>,
        call: &HookInvocation<'_>,
    ) -> HookAnswer {
        // The invocation's span in the operation's trace.
        let span = tracing::info_span!(
            "hook call",
            otel.name = %format!("hook {}", hook.type_name),
            cairn.hook = %hook.type_name,
            cairn.token = %call.token,
            cairn.invocation = call.invocation,
        );
        tracing::Instrument::instrument(self.invoke(hook, judged, call), span).await
    }

    async fn invoke(
        &self,
        hook: &HookDefinition,
        judged: &Judged<'_>,
        call: &HookInvocation<'_>,
    ) -> HookAnswer {
        let started = Instant::now();
        let account = &self.config.identity.account_id;
        let answer = match &hook.handler {
            HookHandler::Guard { rules, location } => {
                let (rules, location) = (rules.clone(), location.clone());
                let doc = hook.guard_document(judged, account);
                // Guard's evaluator is synchronous: off the runtime.
                let judged =
                    tokio::task::spawn_blocking(move || guard::evaluate(&rules, &location, &doc))
                        .await;
                let (status, why) = match judged {
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
                };
                HookAnswer::Verdict(status, why)
            }
            HookHandler::Webhook { url } => {
                let request = hook.webhook_request(judged, account, call);
                let timeout = Duration::from_secs(self.config.hooks.timeout_seconds.max(1));
                let secret = self.config.webhooks.secret.as_deref();
                match serde_json::to_vec(&request) {
                    Err(e) => HookAnswer::Verdict(HookStatus::Error, Some(e.to_string())),
                    Ok(body) => match self.shared.webhooks.post(url, secret, body, timeout).await {
                        Ok(answer) => read_hook_answer(&answer, call.invocation),
                        Err(e) => HookAnswer::Verdict(
                            HookStatus::Error,
                            Some(format!(
                                "the hook's webhook gave no answer within {} seconds ({e})",
                                timeout.as_secs()
                            )),
                        ),
                    },
                }
            }
            HookHandler::Registered { version } => {
                self.run_registered(hook, version, judged, call).await
            }
        };
        let status = match &answer {
            HookAnswer::Verdict(status, _) => *status,
            HookAnswer::InProgress { .. } => HookStatus::InProgress,
        };
        self.shared
            .metrics
            .hook_call(&hook.type_name, status.as_str(), started.elapsed());
        answer
    }

    /// One invocation of a registered HOOK package's `version`, through
    /// its provider (a library's `Hook`, or a webhook), bounded by
    /// `[hooks] timeout_seconds`.
    async fn run_registered(
        &self,
        hook: &HookDefinition,
        version: &str,
        judged: &Judged<'_>,
        call: &HookInvocation<'_>,
    ) -> HookAnswer {
        let failed = |why: String| HookAnswer::Verdict(HookStatus::Error, Some(why));
        let provider = match self.registry.hook_provider(&hook.type_name, version) {
            Ok(p) => p,
            Err(why) => return failed(why),
        };
        let account = &self.config.identity.account_id;
        let request = hook.webhook_request(judged, account, call);
        let request: cairn_sdk::HookRequest = match serde_json::from_value(request) {
            Ok(r) => r,
            Err(e) => return failed(format!("the hook request cannot be made: {e}")),
        };
        let limit = Duration::from_secs(self.config.hooks.timeout_seconds.max(1));
        match tokio::time::timeout(limit, provider.hook(&request)).await {
            Err(_) => failed(format!(
                "the hook gave no answer within {} seconds",
                limit.as_secs()
            )),
            Ok(Err(e)) => failed(e.message),
            Ok(Ok(progress)) => match serde_json::to_vec(&progress) {
                Ok(bytes) => read_hook_answer(&bytes, call.invocation),
                Err(e) => failed(e.to_string()),
            },
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
        let (alias, definition, rules) = self.definition(&r.resource_type, &r.properties).await?;
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
        r: &ResourceRecord,
        physical_id: &str,
        properties: &Map<String, Value>,
        request_id: &str,
    ) -> Result<UpdateResult, ProviderError> {
        let (alias, definition, rules) = self.definition(&r.resource_type, properties).await?;
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

    /// The hook's definition from its properties (a `type_name` hook):
    /// a Guard hook's rules read (`[hooks] rule_dirs`, or https) and
    /// checked, a webhook hook's URL. With what identifies its version
    /// (the rules' text, the URL).
    async fn definition(
        &self,
        type_name: &str,
        properties: &Map<String, Value>,
    ) -> Result<(String, HookDefinition, String), ProviderError> {
        let (alias, source, configuration) =
            hook_of(self.registry.canonical(type_name), properties)
                .map_err(ProviderError::invalid_request)?;
        let (handler, content) = match source {
            HookSource::Webhook(url) => (HookHandler::Webhook { url: url.clone() }, url),
            HookSource::Rules(location) => {
                let rules = self.guard_rules(&location).await?;
                let handler = HookHandler::Guard {
                    rules: rules.clone(),
                    location,
                };
                (handler, rules)
            }
        };
        let definition = HookDefinition {
            type_name: alias.clone(),
            handler,
            configuration,
        };
        Ok((alias, definition, content))
    }

    /// Guard rules read from `location` (`[hooks] rule_dirs`, or https)
    /// and checked.
    async fn guard_rules(&self, location: &str) -> Result<String, ProviderError> {
        let bytes = self
            .read_allowed(
                location,
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
            let (rules, location) = (rules.clone(), location.to_string());
            tokio::task::spawn_blocking(move || guard::check_rules(&rules, &location)).await
        };
        match checked {
            Ok(Ok(())) => Ok(rules),
            Ok(Err(e)) => Err(ProviderError::invalid_request(e.to_string())),
            Err(e) => Err(ProviderError::internal(e.to_string())),
        }
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
            description: match definition.handler {
                HookHandler::Guard { .. } => format!("Guard hook ({PRE_PROVISION})"),
                HookHandler::Webhook { .. } | HookHandler::Registered { .. } => {
                    format!("Lambda hook, a webhook ({PRE_PROVISION})")
                }
            },
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

/// Where `hook` is taken up when it is the one `waited` for (it answered
/// IN_PROGRESS): its token, its next invocation and the callbackContext it
/// gave. `None` for any other hook: it starts afresh.
fn resumption<'w>(
    waited: Option<&'w (String, &'w HookWait)>,
    hook: &HookDefinition,
) -> Option<(String, u32, Option<&'w Value>)> {
    waited
        .filter(|(_, w)| w.hook_type == hook.type_name)
        .map(|(token, w)| (token.clone(), w.invocation + 1, Some(&w.callback_context)))
}

/// The judging stopped at `hook`'s IN_PROGRESS (`asked`: its token, the
/// invocation that answered, the callbackContext it gave), the hooks before
/// it `judged` with their refusals: the HOOK call to record (its request id
/// the hook's token, before the call `then`) with `events`, then ask again
/// after `delay_seconds`.
fn later(
    then: CallKind,
    (judged, refused): (Vec<String>, Vec<(String, String)>),
    hook: &HookDefinition,
    (token, invocation, callback_context): (String, u32, Value),
    events: Vec<EventRecord>,
    delay_seconds: u64,
) -> Judgement {
    let wait = HookWait {
        then,
        judged,
        refused,
        hook_type: hook.type_name.clone(),
        invocation,
        callback_context,
    };
    Judgement::Later {
        pending: PendingCall {
            action: CallKind::Hook,
            request_id: token,
            since_ms: None,
            hook: Some(wait),
        },
        events,
        delay: Duration::from_secs(delay_seconds),
    }
}

/// A verdict's reason as its event shows it: under WARN, that the action
/// goes on.
fn shown(why: &Option<String>, hook: &HookDefinition, action: HookAction) -> Option<String> {
    match (why, hook.configuration.failure_mode) {
        (Some(why), FailureMode::Warn) => Some(format!(
            "{why} (failure mode WARN: the {} goes on)",
            action.as_str().to_ascii_lowercase()
        )),
        (why, _) => why.clone(),
    }
}

/// Keeps why `hook` did not succeed when its failure mode is FAIL.
fn refuse(refused: &mut Vec<(String, String)>, hook: &HookDefinition, why: Option<String>) {
    if let (Some(why), FailureMode::Fail) = (why, hook.configuration.failure_mode) {
        refused.push((hook.type_name.clone(), why));
    }
}

/// The refusal of the hooks that failed under FAIL, if any.
fn refusal(refused: &[(String, String)]) -> Option<String> {
    if refused.is_empty() {
        return None;
    }
    let names: Vec<&str> = refused.iter().map(|(n, _)| n.as_str()).collect();
    let reasons: Vec<String> = refused.iter().map(|(n, w)| format!("{n}: {w}")).collect();
    Some(format!(
        "The following hook(s) failed: [{}]. {}",
        names.join(", "),
        reasons.join(". ")
    ))
}

/// The NoEcho parameters' values (to mask in what a hook says).
pub(in crate::engine) fn secret_values<'a>(
    raw: &'a std::collections::BTreeMap<String, String>,
    no_echo: &[String],
) -> Vec<&'a str> {
    no_echo
        .iter()
        .filter_map(|n| raw.get(n))
        .filter(|v| !v.is_empty())
        .map(String::as_str)
        .collect()
}

/// `text` with each of `secrets` masked.
fn masked(text: String, secrets: &[&str]) -> String {
    secrets.iter().fold(text, |t, s| t.replace(s, super::MASK))
}

/// Parameter values as a hook sees them: NoEcho ones masked.
pub(in crate::engine) fn shown_parameters(
    raw: &std::collections::BTreeMap<String, String>,
    no_echo: &[String],
) -> Map<String, Value> {
    raw.iter()
        .map(|(k, v)| {
            let shown = match no_echo.contains(k) {
                true => super::MASK.to_string(),
                false => v.clone(),
            };
            (k.clone(), Value::String(shown))
        })
        .collect()
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
