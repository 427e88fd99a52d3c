//! The stack commands of the embedded CLI: deploy, delete, and the read
//! commands (list, describe, events, resources, outputs, template).

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use cairn_core::config::Config;
use cairn_core::engine::{CreateStackInput, Engine, EngineError, ParameterInput, UpdateStackInput};
use cairn_core::group::state::GroupState;
use cairn_core::stack::{EventRecord, OnFailure, StackRecord, StackStatus};
use cairn_core::store::{Store, StoreError};
use cairn_core::template::parameters::MASK;
use cairn_store_sqlite::SqliteStore;
use serde_json::{json, Value};

use crate::progress::{event_line, Progress};
use crate::OutputFormat;

/// Where the state file is: `--state`, then `CAIRN_STATE` (both via clap), then
/// config, then `cairn-state.db` in the working directory.
pub fn state_path(flag: Option<&PathBuf>, config: &Config) -> PathBuf {
    flag.cloned()
        .or_else(|| config.engine.state.clone())
        .unwrap_or_else(|| PathBuf::from("cairn-state.db"))
}

/// Where file-backed built-in providers keep their resources: `[engine]
/// data_dir` (or `--data-dir`, `CAIRN_DATA_DIR`), else beside the state file.
pub fn data_dir(config: &Config, state: &Path) -> PathBuf {
    if let Some(dir) = &config.engine.data_dir {
        return dir.clone();
    }
    if postgres_url(state).is_some() {
        return PathBuf::from("cairn-data");
    }
    let mut name = state
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".resources");
    state.with_file_name(name)
}

/// Where registered types' libraries are written, each under its SHA-256:
/// `[registry] cache_dir`, else `types/` in the data directory.
pub fn types_cache(config: &Config, state: &Path) -> PathBuf {
    config
        .registry
        .cache_dir
        .clone()
        .unwrap_or_else(|| data_dir(config, state).join("types"))
}

/// Opens the store and the engine (the registry of providers included).
/// The state as a PostgreSQL URL, when it is one (`postgres://…` or
/// `postgresql://…`); anything else is a SQLite file's path.
pub fn postgres_url(state: &Path) -> Option<&str> {
    state
        .to_str()
        .filter(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// `config` with what the CLI derives from the state's place: the callback
/// listener's local CA in the data directory.
pub fn with_local_ca(config: &Config, state: &Path) -> Config {
    let mut config = config.clone();
    if config.webhooks.local_ca_dir.is_none() {
        config.webhooks.local_ca_dir = Some(data_dir(&config, state).join("callback-ca"));
    }
    config
}

pub async fn open_without_resume(config: &Config, state: &Path) -> anyhow::Result<Arc<Engine>> {
    Ok(open_with_transports(config, state).await?.0)
}

/// [`open_without_resume`], with the process's transports (`cairn serve`
/// hosts the callback listener on its own port).
pub async fn open_with_transports(
    config: &Config,
    state: &Path,
) -> anyhow::Result<(Arc<Engine>, crate::wiring::Process)> {
    let config = &with_local_ca(config, state);
    let store: Arc<dyn Store> = match postgres_url(state) {
        Some(url) => Arc::new(cairn_store_postgres::PgStore::connect(url).await?),
        None => Arc::new(SqliteStore::open(state)?),
    };
    // Custom-resource responses go through the state, so that any engine
    // on it can take one for another.
    let process = crate::wiring::Process::new(&config.webhooks, Some(store.clone()));
    let registry = Arc::new(crate::wiring::assemble(
        config,
        cairn_providers::builtins(&data_dir(config, state)),
        &process,
    )?);
    // The types registered in the state, as they are now; `cairn serve`
    // reads them again as they change.
    let loader = crate::wiring::registered::loader(config, types_cache(config, state), &process);
    registry.refresh_registered(&store, loader.as_ref()).await?;
    // Registrations start a package's provider once, as engines will.
    let mut process = process;
    process.shared = process
        .shared
        .with_handler_probe(Arc::new(crate::wiring::registered::Probe(loader)));
    let engine = Engine::new(store, registry, config.clone(), process.shared.clone());
    Ok((engine, process))
}

/// Opens the store and engine, and first resumes any operation a crashed
/// process left in progress.
/// Returns the engine and whether an operation was resumed.
pub async fn open(config: &Config, state: &Path) -> anyhow::Result<(Arc<Engine>, bool)> {
    let engine = open_without_resume(config, state).await?;
    let resumed = engine.resume_abandoned().await?;
    for id in &resumed {
        eprintln!("resumed the interrupted operation of {id}");
    }
    Ok((engine, !resumed.is_empty()))
}

/// `--tag KEY=VALUE` items.
pub(crate) fn parse_tags(items: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|t| {
            t.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow!("tag {t} is not KEY=VALUE"))
        })
        .collect()
}

pub(crate) fn tag_list(items: &[String]) -> anyhow::Result<Vec<cairn_core::stack::Tag>> {
    Ok(parse_tags(items)?
        .into_iter()
        .map(|(key, value)| cairn_core::stack::Tag { key, value })
        .collect())
}

pub(crate) fn parse_parameters(items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| anyhow!("--parameter {item}: write it as KEY=VALUE"))?;
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// `-p K=V` values and `--use-previous-value K` names as update parameters.
pub(crate) fn parameter_inputs(
    items: &[String],
    use_previous: &[String],
) -> anyhow::Result<BTreeMap<String, ParameterInput>> {
    let mut parameters: BTreeMap<String, ParameterInput> = parse_parameters(items)?
        .into_iter()
        .map(|(k, v)| (k, ParameterInput::Value(v)))
        .collect();
    for name in use_previous {
        parameters.insert(name.clone(), ParameterInput::UsePreviousValue);
    }
    Ok(parameters)
}

/// How many resources an operation on the stack concerns, for the `N/T` of
/// the progress line: those of its template or those it holds, whichever
/// is more (a delete, or an update that removes some).
async fn operation_total(engine: &Arc<Engine>, stack_id: &str) -> usize {
    let held = engine
        .store()
        .resources(stack_id)
        .await
        .map(|r| r.len())
        .unwrap_or(0);
    let in_template = match engine.store().find_stack(stack_id).await {
        Ok(Some(s)) => cairn_core::template::Template::parse_with(&s.template_body, &s.context)
            .map(|t| t.resources.len())
            .unwrap_or(0),
        _ => 0,
    };
    held.max(in_template)
}

/// Runs the stack's operation while printing each new event, one line each.
/// `shown`: how many of the stack's events predate this operation.
async fn follow(
    engine: &Arc<Engine>,
    stack_id: &str,
    mut shown: usize,
) -> anyhow::Result<StackStatus> {
    // Nested stacks' events are shown too, under their paths: those of
    // this operation (counted before it runs).
    let top = engine.store().find_stack(stack_id).await?;
    let mut nested_shown: HashMap<String, usize> = HashMap::new();
    if let Some(top) = &top {
        for (child, _) in crate::tree::descendants(engine, top).await? {
            let count = engine.store().event_count(&child.stack_id).await?;
            nested_shown.insert(child.stack_id, count);
        }
    }
    let mut runner = {
        let engine = engine.clone();
        let id = stack_id.to_string();
        tokio::spawn(async move {
            loop {
                // Another live process runs it (e.g. `cancel-update` follows
                // the `deploy` it cancelled): watch until it is done, and take
                // over if that process dies and its lease expires.
                match engine.run(&id).await {
                    Err(EngineError::Store(StoreError::Busy { .. })) => {
                        tokio::time::sleep(Duration::from_millis(200)).await
                    }
                    other => return other,
                }
            }
        })
    };
    let mut progress: Option<Progress> = None;
    // The total is for the progress line, drawn only on a terminal: no one
    // else pays for re-reading the template.
    let total = if console::Term::stderr().is_term() {
        operation_total(engine, stack_id).await
    } else {
        0
    };
    // With a state that announces new events (PostgreSQL: another engine
    // may run the operation), wait for the announcement; else poll.
    let mut bell = engine.store().event_bell();
    // The run's result once the wait below saw it end: the loop then shows
    // the last events at once instead of after its next poll (a tenth of a
    // second every command paid).
    let mut ended = None;
    loop {
        let done = ended.is_some() || runner.is_finished();
        let events = engine.store().events_from(stack_id, shown).await?;
        if let Some(first) = events.first() {
            progress
                .get_or_insert_with(|| Progress::new(&first.stack_name).with_total(total))
                .events(&events);
        }
        shown += events.len();
        if let Some(top) = &top {
            for (child, path) in crate::tree::descendants(engine, top).await? {
                let seen = nested_shown.entry(child.stack_id.clone()).or_insert(0);
                let events = engine.store().events_from(&child.stack_id, *seen).await?;
                *seen += events.len();
                if !events.is_empty() {
                    let shown: Vec<EventRecord> = events
                        .iter()
                        .map(|e| crate::tree::in_tree(e, &path))
                        .collect();
                    progress
                        .get_or_insert_with(|| Progress::new(&top.stack_name).with_total(total))
                        .events(&shown);
                }
            }
        }
        if done {
            break;
        }
        let news = async {
            match bell.as_mut() {
                Some(bell) => {
                    let news = async {
                        loop {
                            match bell.recv().await {
                                Ok(id) if id != stack_id => continue,
                                _ => return,
                            }
                        }
                    };
                    // Bounded: a lost connection loses announcements.
                    let _ = tokio::time::timeout(Duration::from_millis(250), news).await;
                }
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        tokio::select! {
            result = &mut runner => ended = Some(result),
            () = news => {}
        }
    }
    if let Some(p) = &progress {
        p.finish();
    }
    let result = match ended {
        Some(result) => result,
        None => runner.await,
    };
    Ok(result.context("the operation task failed")??)
}

/// The terminal status with the reason the operation failed (for a rollback,
/// the reason that started it) and each failed resource's reason.
/// `from`: how many of the stack's events predate this operation (earlier
/// operations' failures are not this one's).
async fn failure_detail(
    engine: &Arc<Engine>,
    stack: &StackRecord,
    from: usize,
) -> anyhow::Result<String> {
    let events = engine.store().events_from(&stack.stack_id, from).await?;
    Ok(describe_failure(stack, &events))
}

/// The terminal status with its reason and each failed resource's reason,
/// from the operation's events.
pub(crate) fn describe_failure(stack: &StackRecord, events: &[EventRecord]) -> String {
    let reason = stack.status_reason.clone().or_else(|| {
        events
            .iter()
            .rev()
            .filter(|e| e.resource_type == cairn_core::stack::STACK_TYPE)
            .filter_map(|e| e.status_reason.clone())
            .find(|r| r != "User Initiated")
    });
    let mut lines = vec![format!(
        "stack {} is {}{}",
        stack.stack_name,
        stack.status,
        reason
            .map(|r| format!(": {}", r.trim_end()))
            .unwrap_or_default()
    )];
    for e in events {
        if e.status.is_failed() && e.resource_type != cairn_core::stack::STACK_TYPE {
            if let Some(r) = &e.status_reason {
                lines.push(format!("  {} {}: {r}", e.logical_id, e.status));
            }
        }
    }
    lines.join("\n")
}

pub struct DeployArgs<'a> {
    pub stack: &'a str,
    /// `KEY=VALUE` stack tags (an update without any keeps the stack's).
    pub tags: &'a [String],
    pub template: &'a Path,
    pub parameters: &'a [String],
    pub disable_rollback: bool,
    pub on_failure: Option<&'a str>,
    pub use_previous: &'a [String],
    pub timeout_minutes: Option<u32>,
    /// HOT environment files (`-e`).
    pub environments: &'a [std::path::PathBuf],
    /// The capabilities acknowledged (`--capabilities`).
    pub capabilities: &'a [String],
    /// `--enable-termination-protection` (a create's).
    pub termination_protection: bool,
    /// `--stack-policy FILE`: the stack's policy (on an update, its new one).
    pub stack_policy: Option<&'a Path>,
    /// `--stack-policy-during-update FILE`: this update's policy only.
    pub stack_policy_during_update: Option<&'a Path>,
    /// `--rollback-configuration JSON|FILE`.
    pub rollback_configuration: Option<&'a str>,
    /// `--notify URL`s: the stack's notification targets.
    pub notify: &'a [String],
    /// `--no-notify`: an update removes them.
    pub no_notify: bool,
    /// `--upgrade-types`: an update moves resources to their types'
    /// default versions.
    pub upgrade_types: bool,
}

impl DeployArgs<'_> {
    /// The targets an update sets (`None`: the stack's are kept).
    pub(crate) fn notification_arns(&self) -> Option<Vec<String>> {
        if self.no_notify {
            return Some(Vec::new());
        }
        (!self.notify.is_empty()).then(|| self.notify.to_vec())
    }
}

/// `--rollback-configuration`: JSON given inline (it starts with `{`), or
/// a JSON or YAML file; checked against CloudFormation's limits here so
/// the CLI and a server refuse alike.
pub(crate) fn read_rollback_configuration(
    given: Option<&str>,
) -> anyhow::Result<Option<cairn_core::rollback_triggers::RollbackConfiguration>> {
    let Some(given) = given else {
        return Ok(None);
    };
    let (text, from) = if given.trim_start().starts_with('{') {
        (given.to_string(), "--rollback-configuration".to_string())
    } else {
        let text = std::fs::read_to_string(given)
            .with_context(|| format!("cannot read rollback configuration {given}"))?;
        (text, given.to_string())
    };
    let v = cairn_core::template::Template::body_of(&text).map_err(|e| anyhow!("{from}: {e}"))?;
    let c = cairn_core::rollback_triggers::RollbackConfiguration::from_value(v)
        .map_err(|e| anyhow!("{from}: {e}"))?;
    c.check().map_err(|e| anyhow!("{from}: {e}"))?;
    Ok(Some(c))
}

/// A stack policy file's text, when one is named.
pub(crate) fn read_policy(path: Option<&Path>) -> anyhow::Result<Option<String>> {
    path.map(|p| {
        std::fs::read_to_string(p)
            .with_context(|| format!("cannot read stack policy {}", p.display()))
    })
    .transpose()
}

/// What `--stack-policy-during-update` on a new stack is told.
pub(crate) fn policy_during_create(stack: &str) -> anyhow::Error {
    anyhow!("--stack-policy-during-update applies to updating a stack; stack {stack} does not exist (its policy is --stack-policy)")
}

/// `cairn import`'s arguments.
pub struct ImportArgs<'a> {
    pub stack: &'a str,
    pub template: &'a Path,
    pub resources: &'a Path,
    pub parameters: &'a [String],
    pub use_previous: &'a [String],
    pub capabilities: &'a [String],
}

/// The resources file of `cairn import` (JSON or YAML).
pub(crate) fn read_imports(
    path: &Path,
) -> anyhow::Result<Vec<cairn_core::import::ResourceToImport>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let v = cairn_core::template::Template::body_of(&text)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    cairn_core::import::parse_resources(&v).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// `cairn import STACK TEMPLATE --resources FILE`.
pub async fn import(engine: &Arc<Engine>, args: ImportArgs<'_>) -> anyhow::Result<()> {
    let body = std::fs::read_to_string(args.template)
        .with_context(|| format!("cannot read template {}", args.template.display()))?;
    let resources = read_imports(args.resources)?;
    // A new stack is made of the imported resources alone.
    let before = match engine.store().find_stack(args.stack).await? {
        Some(existing) => engine.store().event_count(&existing.stack_id).await?,
        None => 0,
    };
    let input = cairn_core::engine::ImportInput {
        stack_name: args.stack.to_string(),
        template_body: body,
        parameters: parameter_inputs(args.parameters, args.use_previous)?,
        resources,
        capabilities: Some(args.capabilities.to_vec()),
        origin: cairn_core::nested::Origin::file(args.template),
    };
    let stack_id = engine
        .imports()
        .start_import(&input)
        .await
        .map_err(|e| anyhow!("{}: {e}", args.template.display()))?;
    wait_for(
        engine,
        args.stack,
        &stack_id,
        before,
        StackStatus::ImportComplete,
    )
    .await
}

/// `cairn stack-policy STACK [--set FILE]`: sets the policy, or shows it.
pub async fn stack_policy(
    engine: &Arc<Engine>,
    stack: &str,
    set: Option<&Path>,
    output: OutputFormat,
) -> anyhow::Result<()> {
    if let Some(body) = read_policy(set)? {
        engine.set_stack_policy(stack, &body).await?;
        println!("stack policy of stack {stack} is set");
        return Ok(());
    }
    print_policy(stack, engine.stack_policy(stack).await?.as_deref(), output)
}

/// Shows a stack's policy: as given, or `{"StackPolicyBody": …}` as JSON.
pub(crate) fn print_policy(
    stack: &str,
    policy: Option<&str>,
    output: OutputFormat,
) -> anyhow::Result<()> {
    if output == OutputFormat::Json {
        return print_json(&json!({ "StackPolicyBody": policy }));
    }
    match policy {
        Some(p) => println!("{p}"),
        None => println!("stack {stack} has no stack policy: every update is allowed"),
    }
    Ok(())
}

/// What `--enable-termination-protection` on an existing stack is told.
pub(crate) fn protection_on_update(stack: &str) -> anyhow::Error {
    anyhow!("--enable-termination-protection applies to creating a stack; stack {stack} exists: use cairn protect {stack} --on")
}

/// `cairn protect STACK --on|--off`.
pub async fn protect(engine: &Arc<Engine>, stack: &str, on: bool) -> anyhow::Result<()> {
    engine.update_termination_protection(stack, on).await?;
    println!(
        "termination protection of stack {stack} is {}",
        if on { "on" } else { "off" }
    );
    Ok(())
}

pub async fn deploy(engine: &Arc<Engine>, args: DeployArgs<'_>) -> anyhow::Result<()> {
    let body = std::fs::read_to_string(args.template)
        .with_context(|| format!("cannot read template {}", args.template.display()))?;
    if let Some(existing) = engine.store().find_stack(args.stack).await? {
        return update(engine, &args, body, &existing).await;
    }
    if !args.use_previous.is_empty() {
        return Err(anyhow!(
            "--use-previous-value applies to updating a stack; stack {} does not exist",
            args.stack
        ));
    }
    let on_failure = match (args.disable_rollback, args.on_failure) {
        (true, Some(_)) => {
            return Err(anyhow!(
                "--disable-rollback and --on-failure cannot be used together"
            ))
        }
        (true, None) => OnFailure::DoNothing,
        (false, Some(o)) => o.parse()?,
        (false, None) => OnFailure::Rollback,
    };
    if args.stack_policy_during_update.is_some() {
        return Err(policy_during_create(args.stack));
    }
    let gathered = crate::environment::gather(args.template, &body, args.environments)?;
    let input = CreateStackInput {
        stack_policy: read_policy(args.stack_policy)?,
        stack_name: args.stack.to_string(),
        template_body: body,
        parameters: {
            // The environments' values, then -p over them.
            let mut p = gathered.parameters;
            p.extend(parse_parameters(args.parameters)?);
            p
        },
        on_failure,
        tags: tag_list(args.tags)?,
        timeout_minutes: args.timeout_minutes,
        origin: cairn_core::nested::Origin::file(args.template),
        context: gathered.context,
        capabilities: Some(args.capabilities.to_vec()),
        termination_protection: args.termination_protection,
        rollback_configuration: read_rollback_configuration(args.rollback_configuration)?,
        notification_arns: args.notify.to_vec(),
    };
    let stack_id = engine
        .creates()
        .start_create(&input)
        .await
        .map_err(|e| anyhow!("{}: {e}", args.template.display()))?;
    wait_for(
        engine,
        args.stack,
        &stack_id,
        0,
        StackStatus::CreateComplete,
    )
    .await
}

/// `--upgrade-types` as the engine takes it.
pub(crate) fn upgrade_types(asked: bool) -> cairn_core::engine::UpgradeTypes {
    match asked {
        true => cairn_core::engine::UpgradeTypes::ToDefaults,
        false => cairn_core::engine::UpgradeTypes::Keep,
    }
}

/// `deploy` on an existing stack: an update.
async fn update(
    engine: &Arc<Engine>,
    args: &DeployArgs<'_>,
    body: String,
    existing: &StackRecord,
) -> anyhow::Result<()> {
    if args.on_failure.is_some() {
        return Err(anyhow!(
            "--on-failure applies to creating a stack; stack {} exists and is updated (with --disable-rollback a failed update stops in UPDATE_FAILED)",
            args.stack
        ));
    }
    if args.termination_protection {
        return Err(protection_on_update(args.stack));
    }
    let before = engine.store().event_count(&existing.stack_id).await?;
    let gathered = crate::environment::gather(args.template, &body, args.environments)?;
    let mut parameters: BTreeMap<String, ParameterInput> = gathered
        .parameters
        .into_iter()
        .map(|(k, v)| (k, ParameterInput::Value(v)))
        .collect();
    parameters.extend(parameter_inputs(args.parameters, args.use_previous)?);
    let input = UpdateStackInput {
        stack_policy: read_policy(args.stack_policy)?,
        stack_policy_during_update: read_policy(args.stack_policy_during_update)?,
        stack_name: args.stack.to_string(),
        template_body: Some(body),
        parameters,
        tags: (!args.tags.is_empty())
            .then(|| tag_list(args.tags))
            .transpose()?,
        origin: cairn_core::nested::Origin::file(args.template),
        context: Some(gathered.context),
        disable_rollback: args.disable_rollback,
        capabilities: Some(args.capabilities.to_vec()),
        rollback_configuration: read_rollback_configuration(args.rollback_configuration)?,
        notification_arns: args.notification_arns(),
        upgrade_types: upgrade_types(args.upgrade_types),
    };
    let stack_id = engine
        .updates()
        .start_update(&input)
        .await
        .map_err(|e| anyhow!("{}: {e}", args.template.display()))?;
    wait_for(
        engine,
        args.stack,
        &stack_id,
        before,
        StackStatus::UpdateComplete,
    )
    .await
}

/// Follows the operation to its end: `Ok` when it ends in `success`, else the
/// reasons as the error. `before`: how many events predate this operation.
pub(crate) async fn wait_for(
    engine: &Arc<Engine>,
    name: &str,
    stack_id: &str,
    before: usize,
    success: StackStatus,
) -> anyhow::Result<()> {
    let status = follow(engine, stack_id, before).await?;
    if status == success {
        println!("stack {name} is {success}");
        return Ok(());
    }
    let record = engine
        .store()
        .find_stack(stack_id)
        .await?
        .ok_or_else(|| anyhow!("stack {stack_id} vanished"))?;
    Err(anyhow!(failure_detail(engine, &record, before).await?))
}

/// How many events the stack has so far (0 when it does not exist).
pub(crate) async fn event_count(engine: &Arc<Engine>, stack: &str) -> anyhow::Result<usize> {
    Ok(match engine.store().find_stack(stack).await? {
        Some(s) => engine.store().event_count(&s.stack_id).await?,
        None => 0,
    })
}

pub async fn continue_rollback(
    engine: &Arc<Engine>,
    stack: &str,
    skip: &[String],
) -> anyhow::Result<()> {
    let before = event_count(engine, stack).await?;
    let stack_id = engine
        .updates()
        .start_continue_rollback(stack, skip)
        .await?;
    wait_for(
        engine,
        stack,
        &stack_id,
        before,
        StackStatus::UpdateRollbackComplete,
    )
    .await
}

/// `cairn rollback`: RollbackStack, followed to its end.
pub async fn rollback(engine: &Arc<Engine>, stack: &str) -> anyhow::Result<()> {
    let before = event_count(engine, stack).await?;
    let from = engine.store().find_stack(stack).await?.map(|s| s.status);
    let stack_id = engine.updates().start_rollback(stack).await?;
    wait_for(engine, stack, &stack_id, before, rolled_back(from)).await
}

/// Where RollbackStack of a stack in `from` ends when it succeeds.
pub(crate) fn rolled_back(from: Option<StackStatus>) -> StackStatus {
    if from == Some(StackStatus::CreateFailed) {
        StackStatus::RollbackComplete
    } else {
        StackStatus::UpdateRollbackComplete
    }
}

pub async fn delete(engine: &Arc<Engine>, stack: &str, retain: &[String]) -> anyhow::Result<()> {
    let before = event_count(engine, stack).await?;
    let Some(stack_id) = engine.deletes().start_delete(stack, retain).await? else {
        println!("stack {stack} does not exist; nothing to delete");
        return Ok(());
    };
    wait_for(
        engine,
        stack,
        &stack_id,
        before,
        StackStatus::DeleteComplete,
    )
    .await
}

pub(crate) async fn find(engine: &Arc<Engine>, stack: &str) -> anyhow::Result<StackRecord> {
    engine
        .store()
        .find_stack(stack)
        .await?
        .ok_or_else(|| anyhow!("Stack with id {stack} does not exist"))
}

fn parameters_json(s: &StackRecord) -> Vec<Value> {
    s.parameters
        .iter()
        .map(|(k, v)| {
            let shown = if s.no_echo.contains(k) {
                MASK
            } else {
                v.as_str()
            };
            json!({"ParameterKey": k, "ParameterValue": shown})
        })
        .collect()
}

/// Outputs as `--output json` shows them: CloudFormation's fields (and
/// Heat's `OutputError`), not the typed value kept for parents.
fn outputs_json(outputs: &[cairn_core::stack::OutputRecord]) -> Value {
    Value::Array(
        outputs
            .iter()
            .map(|o| {
                let mut v = json!(o);
                if let Value::Object(m) = &mut v {
                    m.remove("Cairn::Value");
                }
                v
            })
            .collect(),
    )
}

fn stack_json(s: &StackRecord) -> Value {
    let mut v = json!({
        "StackName": s.stack_name,
        "StackId": s.stack_id,
        "StackStatus": s.status.as_str(),
        "CreationTime": s.created_at,
        "LastUpdatedTime": s.updated_at,
        "Parameters": parameters_json(s),
        "Outputs": outputs_json(&s.outputs),
        "DisableRollback": s.on_failure == OnFailure::DoNothing,
        "Capabilities": s.capabilities,
        "Tags": s.tags,
        "EnableTerminationProtection": s.termination_protection,
        "NotificationARNs": s.notification_arns,
    });
    if let Some(r) = &s.status_reason {
        v["StackStatusReason"] = json!(r);
    }
    if let Some(d) = &s.description {
        v["Description"] = json!(d);
    }
    if let Some(d) = &s.deleted_at {
        v["DeletionTime"] = json!(d);
    }
    if let Some(p) = &s.parent_id {
        v["ParentId"] = json!(p);
    }
    if let Some(c) = &s.rollback_configuration {
        v["RollbackConfiguration"] = json!(c);
    }
    if let Some(r) = &s.root_id {
        v["RootId"] = json!(r);
    }
    v
}

pub(crate) fn print_json(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Prints `{key: [items…]}` exactly as [`print_json`] would, but writes each
/// item as it is made: a stack of 100,000 resources has 300,000 events,
/// and one tree of JSON values of them all would take gigabytes.
pub(crate) fn print_json_list(key: &str, items: impl Iterator<Item = Value>) -> anyhow::Result<()> {
    use serde::ser::{SerializeMap, Serializer as _};
    use std::io::Write as _;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    {
        let mut ser = serde_json::Serializer::pretty(&mut out);
        let mut map = ser.serialize_map(Some(1))?;
        map.serialize_entry(key, &Streamed(std::cell::RefCell::new(Some(items))))?;
        map.end()?;
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// A list serialized from an iterator, one element at a time.
struct Streamed<I>(std::cell::RefCell<Option<I>>);

impl<I: Iterator<Item = Value>> serde::Serialize for Streamed<I> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let items = self.0.borrow_mut().take();
        let mut seq = s.serialize_seq(None)?;
        for item in items.into_iter().flatten() {
            seq.serialize_element(&item)?;
        }
        seq.end()
    }
}

pub async fn list(engine: &Arc<Engine>, output: OutputFormat) -> anyhow::Result<()> {
    show_list(&engine.store().list_stacks().await?, output)
}

/// `cairn list`'s output (also of `--endpoint`).
pub(crate) fn show_list(stacks: &[StackRecord], output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            let summaries: Vec<Value> = stacks
                .iter()
                .map(|s| {
                    let mut v = json!({"StackName": s.stack_name, "StackId": s.stack_id, "StackStatus": s.status.as_str(), "CreationTime": s.created_at});
                    if let Some(r) = &s.status_reason {
                        v["StackStatusReason"] = json!(r);
                    }
                    if let Some(d) = &s.deleted_at {
                        v["DeletionTime"] = json!(d);
                    }
                    if let Some(p) = &s.parent_id {
                        v["ParentId"] = json!(p);
                    }
                    if let Some(r) = &s.root_id {
                        v["RootId"] = json!(r);
                    }
                    v
                })
                .collect();
            print_json(&json!({"StackSummaries": summaries}))
        }
        OutputFormat::Text => {
            for s in stacks {
                println!(
                    "{:<30} {:<45} {}",
                    s.stack_name,
                    s.status.as_str(),
                    s.created_at
                );
            }
            Ok(())
        }
    }
}

pub async fn describe(
    engine: &Arc<Engine>,
    stack: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    show_stack(&find(engine, stack).await?, output)
}

/// `cairn describe`'s output.
pub(crate) fn show_stack(s: &StackRecord, output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => print_json(&json!({"Stacks": [stack_json(s)]})),
        OutputFormat::Text => {
            println!("StackName:   {}", s.stack_name);
            println!("StackId:     {}", s.stack_id);
            println!("StackStatus: {}", s.status);
            if let Some(r) = &s.status_reason {
                println!("Reason:      {r}");
            }
            if let Some(d) = &s.description {
                println!("Description: {d}");
            }
            println!("Created:     {}", s.created_at);
            if let Some(p) = &s.parent_id {
                println!("ParentId:    {p}");
            }
            if let Some(r) = &s.root_id {
                println!("RootId:      {r}");
            }
            for p in parameters_json(s) {
                println!(
                    "Parameter:   {} = {}",
                    p["ParameterKey"].as_str().unwrap_or_default(),
                    p["ParameterValue"].as_str().unwrap_or_default()
                );
            }
            for o in &s.outputs {
                println!(
                    "Output:      {} = {}",
                    o.output_key,
                    o.output_value.as_deref().unwrap_or("(no value)")
                );
            }
            Ok(())
        }
    }
}

pub async fn events(
    engine: &Arc<Engine>,
    stack: &str,
    nested: bool,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let s = find(engine, stack).await?;
    if nested {
        return show_events(&crate::tree::events(engine, &s).await?, output);
    }
    show_events(&engine.store().events(&s.stack_id).await?, output)
}

/// `cairn events`'s output: `events` oldest first.
pub(crate) fn show_events(events: &[EventRecord], output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            // Newest first, as DescribeStackEvents returns them.
            let list = events.iter().rev().map(|e| {
                    let mut v = json!({
                        "EventId": e.event_id, "StackId": e.stack_id, "StackName": e.stack_name,
                        "LogicalResourceId": e.logical_id, "PhysicalResourceId": e.physical_id,
                        "ResourceType": e.resource_type, "Timestamp": e.timestamp, "ResourceStatus": e.status,
                    });
                    if let Some(r) = &e.status_reason {
                        v["ResourceStatusReason"] = json!(r);
                    }
                    if let Some(p) = &e.properties {
                        v["ResourceProperties"] = json!(p);
                    }
                    // A hook's verdict: DescribeStackEvents' Hook* fields.
                    if let Some(Value::Object(hook)) = e.hook.as_ref().map(|h| json!(h)) {
                        for (k, h) in hook {
                            v[k] = h;
                        }
                    }
                    v
                });
            print_json_list("StackEvents", list)
        }
        OutputFormat::Text => {
            for e in events {
                println!("{}", event_line(e));
            }
            Ok(())
        }
    }
}

/// One line of `cairn resources`: a template resource, or a group member
/// (listed right after its group, `group` naming it).
pub(crate) struct ResourceLine {
    pub logical_id: String,
    pub group: Option<String>,
    pub resource_type: String,
    pub physical_id: Option<String>,
    pub status: String,
    pub reason: Option<String>,
    pub updated_at: String,
    /// The registered type version it uses.
    pub type_version: Option<String>,
}

/// The stack's resources, each group followed by its members in order.
async fn resource_lines(
    engine: &Arc<Engine>,
    stack: &StackRecord,
) -> anyhow::Result<Vec<ResourceLine>> {
    let stack_id = &stack.stack_id;
    let shown = cairn_core::shown::ShownTypes::of(stack);
    let rows = engine.store().resources(stack_id).await?;
    let mut groups = engine.store().groups(stack_id).await?;
    let members = |state: serde_json::Value, group: &str| -> anyhow::Result<Vec<ResourceLine>> {
        let state: GroupState = serde_json::from_value(state)
            .map_err(|e| anyhow!("the stored state of group {group} is unreadable: {e}"))?;
        Ok(state
            .members
            .into_iter()
            .map(|m| ResourceLine {
                resource_type: shown.type_of(&m.name, &m.resource_type).to_string(),
                logical_id: m.name,
                group: Some(group.to_string()),
                physical_id: m.physical_id,
                status: m.status.as_str().to_string(),
                reason: m.status_reason,
                updated_at: m.updated_at,
                type_version: None,
            })
            .collect())
    };
    let mut lines = Vec::new();
    for r in rows {
        let own = groups
            .iter()
            .position(|(_, physical, _)| Some(physical) == r.physical_id.as_ref());
        lines.push(ResourceLine {
            logical_id: r.logical_id.clone(),
            group: None,
            resource_type: shown.type_of(&r.logical_id, &r.resource_type).to_string(),
            physical_id: r.physical_id,
            status: r.status.as_str().to_string(),
            reason: r.status_reason,
            updated_at: r.updated_at,
            type_version: r.type_version,
        });
        if let Some(i) = own {
            let (_, _, state) = groups.remove(i);
            lines.extend(members(state, &r.logical_id)?);
        }
    }
    // Members of a group whose resource moved on (a replaced group being
    // cleaned up): still listed, under the group's logical id.
    for (logical, _, state) in groups {
        lines.extend(members(state, &logical)?);
    }
    Ok(lines)
}

pub async fn resources(
    engine: &Arc<Engine>,
    stack: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let s = find(engine, stack).await?;
    let mut lines = resource_lines(engine, &s).await?;
    // The text shows the tree: each nested stack's resources after it,
    // under its path.
    if output == OutputFormat::Text {
        for (child, path) in crate::tree::descendants(engine, &s).await? {
            let below = resource_lines(engine, &child).await?;
            let at = lines
                .iter()
                .rposition(|l| {
                    l.logical_id == path || l.logical_id.starts_with(&format!("{path}/"))
                })
                .map(|i| i + 1)
                .unwrap_or(lines.len());
            let shown = below.into_iter().map(|mut l| {
                l.logical_id = format!("{path}/{}", l.logical_id);
                l
            });
            lines.splice(at..at, shown);
        }
    }
    show_resources(&s, &lines, output)
}

/// `cairn resources`'s output.
pub(crate) fn show_resources(
    s: &StackRecord,
    lines: &[ResourceLine],
    output: OutputFormat,
) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => {
            let list = lines.iter().map(|r| {
                    let mut v = json!({
                        "StackName": s.stack_name, "StackId": s.stack_id, "LogicalResourceId": r.logical_id,
                        "PhysicalResourceId": r.physical_id.clone().unwrap_or_default(), "ResourceType": r.resource_type,
                        "ResourceStatus": r.status, "Timestamp": r.updated_at,
                    });
                    if let Some(reason) = &r.reason {
                        v["ResourceStatusReason"] = json!(reason);
                    }
                    if let Some(group) = &r.group {
                        v["GroupResourceId"] = json!(group);
                    }
                    if let Some(version) = &r.type_version {
                        v["TypeVersionId"] = json!(version);
                    }
                    v
                });
            print_json_list("StackResources", list)
        }
        OutputFormat::Text => {
            for r in lines {
                let name = match &r.group {
                    Some(_) => format!("  {}", r.logical_id),
                    None => r.logical_id.clone(),
                };
                let shown_type = match &r.type_version {
                    Some(v) => format!("{} ({v})", r.resource_type),
                    None => r.resource_type.clone(),
                };
                println!(
                    "{:<30} {:<30} {:<20} {}",
                    name,
                    shown_type,
                    r.status,
                    r.physical_id.as_deref().unwrap_or("-")
                );
            }
            Ok(())
        }
    }
}

pub async fn outputs(
    engine: &Arc<Engine>,
    stack: &str,
    output: OutputFormat,
) -> anyhow::Result<()> {
    show_outputs(&find(engine, stack).await?, output)
}

/// `cairn outputs`'s output.
pub(crate) fn show_outputs(s: &StackRecord, output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => print_json(&json!({"Outputs": outputs_json(&s.outputs)})),
        OutputFormat::Text => {
            for o in &s.outputs {
                let export = o
                    .export_name
                    .as_deref()
                    .map(|e| format!("  (export {e})"))
                    .unwrap_or_default();
                match &o.output_error {
                    // As `openstack stack output show` reports it.
                    Some(e) => println!("{} has no value: output_error: {e}", o.output_key),
                    None => match &o.output_value {
                        Some(v) => println!("{} = {v}{export}", o.output_key),
                        // A HOT output whose condition is false.
                        None => println!("{} has no value", o.output_key),
                    },
                }
            }
            Ok(())
        }
    }
}

pub async fn template(
    engine: &Arc<Engine>,
    stack: &str,
    expanded: bool,
    output: OutputFormat,
) -> anyhow::Result<()> {
    let s = find(engine, stack).await?;
    if expanded {
        let body = cairn_core::template::expanded(&s.template_body, &s.context)?;
        return print_json(&body);
    }
    show_template(&s.template_body, output)
}

/// `cairn template`'s output.
pub(crate) fn show_template(body: &str, output: OutputFormat) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => print_json(&json!({"TemplateBody": body})),
        OutputFormat::Text => {
            print!("{body}");
            Ok(())
        }
    }
}
