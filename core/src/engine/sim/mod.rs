//! The crash simulator: the real engine in process between a scripted
//! provider ([`cloud::Cloud`]) and a store that "crashes" at its k-th
//! durable write ([`cairn_store::crash::CrashStore`]). For one operation it runs
//! once without a crash (the reference), then once per write point k:
//! crash before write k, drop the engine, break its lease, resume with a
//! new engine on the same state, and check:
//!
//! - the stack reached a terminal status (or none exists: the command
//!   failed before it recorded anything);
//! - every live resource of the cloud is one the stack records (no leak),
//!   and every resource the stack records as complete exists;
//! - no Create reached a custom-resource handler twice;
//! - the stack's last event is its status;
//! - the outcome is the reference's (or the one from before the operation,
//!   when the crash came before it was recorded);
//! - and, with the cloud healed, deleting the stack leaves the cloud empty.
//!
//! Then the same at every write point with a second engine taking the
//! operation over: the first engine's store stalls before write k (a
//! database connection that hangs past the lease) while the rest of it
//! keeps running, the second breaks the lease and resumes the operation
//! to its end, then the first engine's writes go through, and everything
//! it still writes must be refused on the fencing token. (Not modelled: a
//! whole process frozen between its last lease check and a provider call;
//! see the protocol's `still_owner`.)

mod cloud;
mod registration;
mod scenarios;
mod versioned;
mod webhook_hook;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_sdk::ResourceProvider;

use super::update::UpdateStackInput;
use super::{CreateStackInput, Engine};
use crate::config::Config;
use crate::registry::Registry;
use crate::shared::Shared;
use crate::signal::HandleUrls;
use crate::stack::{OnFailure, StackStatus, STACK_TYPE};
use crate::store::crash::CrashStore;
use crate::store::memory::MemoryStore;
use crate::store::Store;
use cloud::Cloud;

pub const STACK: &str = "sim";

/// One step of a scenario.
#[derive(Debug, Clone)]
pub enum Step {
    Create {
        template: String,
        on_failure: OnFailure,
    },
    Update {
        template: String,
    },
    /// An update with DisableRollback: a failure stops it in UPDATE_FAILED.
    UpdateKeepingFailures {
        template: String,
    },
    /// RollbackStack of a stack whose create or update failed with
    /// rollback disabled.
    Rollback,
    /// An update cancelled (`cairn cancel-update`) once a slow call of it
    /// is in flight.
    CancelledUpdate {
        template: String,
    },
    /// A create whose resources wait for signals, sent (`cairn signal`) as
    /// soon as each resource may be signalled: (logical id, unique id,
    /// SUCCESS or FAILURE).
    SignalledCreate {
        template: String,
        signals: &'static [(&'static str, &'static str, &'static str)],
    },
    /// An update to `template` that waits for signals (a replaced
    /// resource with a CreationPolicy waits anew), sent as for
    /// [`Step::SignalledCreate`].
    SignalledUpdate {
        template: String,
        signals: &'static [(&'static str, &'static str, &'static str)],
    },
    /// `cairn update` to a template, or (`None`) `--drift-only`.
    Reconcile {
        template: Option<String>,
    },
    /// A live resource's property changed behind the stack's back.
    Tamper {
        logical_id: &'static str,
        key: &'static str,
        value: &'static str,
    },
    /// A live resource deleted behind the stack's back.
    Vanish {
        logical_id: &'static str,
    },
    Delete,
    ContinueRollback,
    /// SetStackPolicy: the stack's policy from now on.
    StackPolicy(&'static str),
    /// Lifts every script: hanging creates answer, failures stop.
    Heal,
    /// Switches the cloud down (every call fails as a provider that cannot
    /// start) or up.
    CloudDown(bool),
    /// A person makes a Thing outside any stack, with this physical id
    /// (for an import to adopt).
    Outside {
        physical: &'static str,
        logical_id: &'static str,
        name: &'static str,
    },
    /// `cairn import` of the stack's template with these (logical id,
    /// physical id) Things added.
    Import {
        template: String,
        resources: &'static [(&'static str, &'static str)],
    },
    /// A stack refactor within the stack to `template`, executed:
    /// (from, to) logical ids renamed.
    Refactor {
        template: String,
        renames: &'static [(&'static str, &'static str)],
    },
    /// Writes a template file beside the state (nested stacks name it as
    /// `file:///{DIR}/name`).
    File {
        name: &'static str,
        text: &'static str,
    },
    /// A new version of `Sim::Versioned::Thing` registered and made the
    /// default.
    RegisterVersion,
    /// An update that moves resources to their types' default versions
    /// (`--upgrade-types`).
    Upgrade {
        template: String,
    },
}

pub fn create(template: &str) -> Step {
    Step::Create {
        template: template.to_string(),
        on_failure: OnFailure::Rollback,
    }
}

/// `cairn update` to `template` (every phase).
pub fn reconcile(template: &str) -> Step {
    Step::Reconcile {
        template: Some(template.to_string()),
    }
}

pub fn create_keeping_failures(template: &str) -> Step {
    Step::Create {
        template: template.to_string(),
        on_failure: OnFailure::DoNothing,
    }
}

pub fn update(template: &str) -> Step {
    Step::Update {
        template: template.to_string(),
    }
}

pub fn update_keeping_failures(template: &str) -> Step {
    Step::UpdateKeepingFailures {
        template: template.to_string(),
    }
}

pub fn cancelled_update(template: &str) -> Step {
    Step::CancelledUpdate {
        template: template.to_string(),
    }
}

/// Runs `work` to its end on a thread and runtime of their own.
///
/// The simulator drives whole operations (nested stacks, groups,
/// recursion through templates) inline on the thread that runs it, where
/// the engine runs them on its runtime's workers: in a debug build their
/// frames outgrow a test thread's 2 MiB.
fn deep<F, Fut>(work: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let ran = std::thread::Builder::new()
        .name("crash simulator".into())
        .stack_size(64 << 20)
        .spawn(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(16 << 20)
                .enable_all()
                .build()
                .map(|rt| rt.block_on(work()))
        });
    match ran.map(std::thread::JoinHandle::join) {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => panic!("the simulator's runtime did not start: {e}"),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => panic!("the simulator's thread did not start: {e}"),
    }
}

/// What a run ends with: the stack's status and the cloud's resources by
/// (type, logical id, properties), physical ids left out (they differ
/// between runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub status: Option<StackStatus>,
    pub live: Vec<String>,
}

/// One state file, one cloud: a run of a scenario.
struct World {
    dir: std::path::PathBuf,
    base: Arc<dyn Store>,
    cloud: Arc<Cloud>,
    registry: Arc<Registry>,
    config: Config,
    shared: Shared,
    /// The signals of a [`Step::SignalledCreate`]: whoever sends them
    /// (cfn-signal on an instance) sends them again until they are taken.
    signals: std::sync::Mutex<&'static [(&'static str, &'static str, &'static str)]>,
    /// The Lambda hook's webhook.
    hook: Arc<webhook_hook::SimHook>,
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config(dir: &std::path::Path) -> Config {
    let mut c = Config::default();
    c.nested.template_dirs = vec![dir.to_path_buf()];
    c.hooks.rule_dirs = vec![dir.to_path_buf()];
    // Parents look at their children often: the nested scenarios' time is
    // mostly these waits.
    c.nested.poll_ms = 10;
    c.engine.cleanup_attempts = 2;
    c.engine.cleanup_backoff_seconds = 0.0;
    c.engine.max_concurrency = 4;
    c.engine.health_timeout_seconds = 5;
    // A stalled engine notices the takeover at its next renewal (a third
    // of the lease): short leases keep the simulator fast.
    c.engine.lease_seconds = 3;
    c.engine.signal_poll_ms = 20;
    // The cloud's macro (its provider's `transform`).
    c.macros = vec![crate::config::MacroConfig {
        name: "SimAddThing".into(),
        url: None,
        secret: None,
        provider: Some("builtin:sim".into()),
        timeout_seconds: None,
    }];
    c
}

/// The simulated templates are read from files only.
struct NoHttps;

/// Handle URLs as a listener would sign them (the scenarios signal
/// resources with CreationPolicies, not handles).
struct SimHandles;

#[async_trait::async_trait]
impl HandleUrls for SimHandles {
    async fn handle_target(
        &self,
        url: &str,
    ) -> Result<Option<(String, String)>, crate::signal::ListenerUnavailable> {
        let target = url
            .strip_prefix("sim://handle/")
            .and_then(|r| r.rsplit_once('/'));
        Ok(target.map(|(stack, logical)| (stack.to_string(), logical.to_string())))
    }

    async fn handle_url(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<String, crate::signal::ListenerUnavailable> {
        Ok(format!("sim://handle/{stack_id}/{logical_id}"))
    }
}

#[async_trait::async_trait]
impl crate::nested::HttpsGet for NoHttps {
    async fn get(&self, url: &str, _timeout: Duration) -> Result<Vec<u8>, crate::http::HttpError> {
        Err(crate::http::HttpError::new(
            url,
            "the simulator fetches no https:// template",
        ))
    }
}

impl World {
    fn new() -> World {
        let dir = std::env::temp_dir().join(format!("cairn-sim-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let cloud = Arc::new(Cloud::default());
        let config = config(&dir);
        let provider: Arc<dyn ResourceProvider> = cloud.clone();
        // The simulated processes share one callback listener and one set
        // of counters, as the engines of one process do.
        let handles: Arc<dyn HandleUrls> = Arc::new(SimHandles);
        let hook = Arc::new(webhook_hook::SimHook::default());
        let shared =
            Shared::new(handles.clone(), Arc::new(NoHttps)).with_webhook_poster(hook.clone());
        // As the binary wires it, without transports: the sim cloud plays
        // the providers, handlers included.
        let mut registry =
            crate::registry::assemble::with_builtins(&config, vec![("builtin:sim", provider)])
                .expect("registry");
        registry
            .register_engine_types(handles)
            .expect("engine types");
        registry.alias_configured(&config).expect("aliases");
        World {
            dir,
            base,
            cloud,
            registry: Arc::new(registry),
            config,
            shared,
            signals: std::sync::Mutex::new(&[]),
            hook,
        }
    }

    /// [`Step::SignalledCreate`] (and, `update`, [`Step::SignalledUpdate`]):
    /// the operation runs while its signals are sent, each as soon as its
    /// resource may be signalled.
    async fn signalled(
        &self,
        engine: &Arc<Engine>,
        (template, update): (&str, bool),
        signals: &'static [(&'static str, &'static str, &'static str)],
    ) -> Result<(), String> {
        let e = |e: super::EngineError| e.to_string();
        *self.signals.lock().unwrap_or_else(|p| p.into_inner()) = signals;
        let id = match update {
            false => {
                let input = self.create_input(template, OnFailure::Rollback);
                engine.creates().start_create(&input).await.map_err(e)?
            }
            true => engine
                .updates()
                .start_update(&self.update_input(template))
                .await
                .map_err(e)?,
        };
        let run = engine.run(&id);
        tokio::pin!(run);
        let mut sent = false;
        loop {
            tokio::select! {
                done = &mut run => return done.map(|_| ()).map_err(e),
                _ = tokio::time::sleep(Duration::from_millis(20)), if !sent => {
                    sent = self.send_signals(engine).await;
                }
            }
        }
    }

    /// Sends every signal of the scenario once; true when each was taken
    /// (or can no longer be: its resource is past waiting).
    async fn send_signals(&self, engine: &Arc<Engine>) -> bool {
        let signals = *self.signals.lock().unwrap_or_else(|p| p.into_inner());
        let mut all = true;
        for (logical_id, unique_id, status) in signals {
            let reason = Some(format!("{unique_id} says {status}"));
            match engine
                .signals()
                .signal_resource(STACK, logical_id, unique_id, status, reason)
                .await
            {
                Ok(()) => {}
                Err(e) if e.to_string().contains("cannot be signaled") => {}
                Err(_) => all = false,
            }
        }
        all
    }

    fn engine(&self, store: Arc<dyn Store>) -> Arc<Engine> {
        Engine::new(
            store,
            self.registry.clone(),
            self.config.clone(),
            self.shared.clone(),
        )
    }

    /// A template with `{DIR}` standing for the state's directory.
    fn template(&self, text: &str) -> String {
        text.replace("{DIR}", &self.dir.to_string_lossy())
    }

    fn create_input(&self, template: &str, on_failure: OnFailure) -> CreateStackInput {
        CreateStackInput {
            stack_policy: None,
            rollback_configuration: None,
            notification_arns: Vec::new(),
            stack_name: STACK.into(),
            template_body: self.template(template),
            parameters: BTreeMap::new(),
            on_failure,
            tags: Vec::new(),
            timeout_minutes: None,
            origin: Default::default(),
            context: Default::default(),
            capabilities: None,
            termination_protection: false,
        }
    }

    fn update_input(&self, template: &str) -> UpdateStackInput {
        UpdateStackInput {
            stack_policy: None,
            rollback_configuration: None,
            notification_arns: None,
            stack_policy_during_update: None,
            stack_name: STACK.into(),
            template_body: Some(self.template(template)),
            parameters: BTreeMap::new(),
            tags: None,
            origin: Default::default(),
            context: None,
            disable_rollback: false,
            capabilities: None,
            upgrade_types: Default::default(),
        }
    }

    /// Runs a step to its end (errors are the step's outcome, not the test's).
    async fn run(&self, engine: &Arc<Engine>, step: &Step) -> Result<(), String> {
        let e = |e: super::EngineError| e.to_string();
        match step {
            Step::Create {
                template,
                on_failure,
            } => {
                let input = self.create_input(template, *on_failure);
                let id = engine.creates().start_create(&input).await.map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            // Boxed: its waits would make every step's future larger.
            Step::SignalledCreate { template, signals } => {
                Box::pin(self.signalled(engine, (template, false), signals)).await?;
            }
            Step::SignalledUpdate { template, signals } => {
                Box::pin(self.signalled(engine, (template, true), signals)).await?;
            }
            Step::Update { template } => {
                let id = engine
                    .updates()
                    .start_update(&self.update_input(template))
                    .await
                    .map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::Upgrade { template } => {
                let input = UpdateStackInput {
                    upgrade_types: super::update::UpgradeTypes::ToDefaults,
                    ..self.update_input(template)
                };
                let id = engine.updates().start_update(&input).await.map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::RegisterVersion => {
                versioned::register_version(engine, &self.base, &self.registry, &self.cloud)
                    .await?;
            }
            Step::UpdateKeepingFailures { template } => {
                let input = UpdateStackInput {
                    disable_rollback: true,
                    ..self.update_input(template)
                };
                let id = engine.updates().start_update(&input).await.map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::Rollback => {
                let id = engine.updates().start_rollback(STACK).await.map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::CancelledUpdate { template } => {
                let id = engine
                    .updates()
                    .start_update(&self.update_input(template))
                    .await
                    .map_err(e)?;
                let run = engine.run(&id);
                tokio::pin!(run);
                tokio::select! {
                    done = &mut run => {
                        done.map_err(e)?;
                        return Ok(());
                    }
                    _ = self.cloud.until_slow() => {}
                }
                // A failed cancel (the process died) drops the run with it.
                engine.updates().cancel_update(STACK).await.map_err(e)?;
                run.await.map_err(e)?;
            }
            Step::File { name, text } => {
                std::fs::write(self.dir.join(name), self.template(text))
                    .map_err(|e| e.to_string())?;
            }
            Step::Delete => {
                if let Some(id) = engine.deletes().start_delete(STACK, &[]).await.map_err(e)? {
                    engine.run(&id).await.map_err(e)?;
                }
            }
            Step::ContinueRollback => {
                let id = engine
                    .updates()
                    .start_continue_rollback(STACK, &[])
                    .await
                    .map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::Reconcile { template } => {
                let input = super::ReconcileInput {
                    update: match template {
                        Some(t) => self.update_input(t),
                        None => UpdateStackInput {
                            template_body: None,
                            ..self.update_input("")
                        },
                    },
                    flags: super::ReconcileFlags {
                        drift_only: template.is_none(),
                        ..Default::default()
                    },
                };
                let id = engine
                    .reconciles()
                    .start_reconcile(&input)
                    .await
                    .map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::Outside {
                physical,
                logical_id,
                name,
            } => {
                let mut properties = serde_json::Map::new();
                properties.insert("Name".into(), serde_json::Value::String(name.to_string()));
                self.cloud.make_outside(physical, logical_id, properties);
            }
            Step::Import {
                template,
                resources,
            } => {
                let input = super::ImportInput {
                    stack_name: STACK.into(),
                    template_body: self.template(template),
                    parameters: BTreeMap::new(),
                    resources: resources
                        .iter()
                        .map(|(logical_id, physical)| {
                            let mut identifier = serde_json::Map::new();
                            identifier.insert("Id".into(), serde_json::Value::from(*physical));
                            crate::import::ResourceToImport {
                                resource_type: cloud::THING.into(),
                                logical_id: logical_id.to_string(),
                                identifier,
                            }
                        })
                        .collect(),
                    capabilities: None,
                    origin: Default::default(),
                };
                let id = engine.imports().start_import(&input).await.map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::Refactor { template, renames } => {
                let at = |logical_id: &str| crate::refactor::ResourceLocation {
                    stack_name: STACK.into(),
                    logical_resource_id: logical_id.into(),
                };
                let input = super::refactor::RefactorInput {
                    stacks: vec![(STACK.into(), self.template(template))],
                    mappings: renames
                        .iter()
                        .map(|(from, to)| crate::refactor::ResourceMapping {
                            source: at(from),
                            destination: at(to),
                        })
                        .collect(),
                    ..Default::default()
                };
                let made = engine
                    .refactors()
                    .create_refactor(&input)
                    .await
                    .map_err(e)?;
                let id = made
                    .get("StackRefactorId")
                    .and_then(serde_json::Value::as_str)
                    .ok_or_else(|| format!("the refactor was not made: {made}"))?;
                engine.refactors().execute_refactor(id).await.map_err(e)?;
            }
            Step::Tamper {
                logical_id,
                key,
                value,
            } => self.cloud.tamper(logical_id, key, value),
            Step::Vanish { logical_id } => self.cloud.vanish(logical_id),
            Step::CloudDown(down) => self.cloud.set_down(*down),
            Step::Heal => self.cloud.heal(),
            Step::StackPolicy(body) => {
                engine.set_stack_policy(STACK, body).await.map_err(e)?;
            }
        }
        Ok(())
    }

    /// Runs `step` on an engine whose store crashes before its write
    /// `allowed + 1`. True when it crashed.
    async fn run_crashing(&self, step: &Step, allowed: u64) -> bool {
        let store = CrashStore::new(self.base.clone(), Some(allowed));
        let engine = self.engine(store.clone());
        // A dead process does nothing more: the run is dropped at the
        // crash (what its spawned tasks still do is refused by the store).
        tokio::select! {
            _ = self.run(&engine, step) => {}
            _ = store.until_crashed() => {}
            _ = tokio::time::sleep(Duration::from_secs(30)) => {}
        }
        drop(engine);
        store.crashed()
    }

    /// Runs `step` on an engine whose store stalls before its write
    /// `at + 1`; meanwhile a second engine takes the operation over and
    /// runs it to its end; then the first engine's writes go through (to
    /// be refused on the fencing token). True when the first reached the
    /// pause point.
    async fn run_taken_over(&self, step: &Step, at: u64) -> Result<bool, String> {
        let store = CrashStore::pausing(self.base.clone(), at);
        let engine = self.engine(store.clone());
        let first = self.run(&engine, step);
        tokio::pin!(first);
        tokio::select! {
            _ = &mut first => return Ok(false),
            _ = store.until_paused() => {}
        }
        // The first engine keeps running meanwhile: only its store writes
        // stall (a database connection that hangs, a partition). Whatever
        // it still does must be refused or be harmless; it ends (lease
        // lost) or is given up on.
        let (taken_over, _) = tokio::join!(
            async {
                let r = self.resume().await;
                store.release();
                r
            },
            tokio::time::timeout(Duration::from_secs(60), &mut first)
        );
        taken_over.map(|()| true)
    }

    /// What a new process does once the dead one's leases ran out (they
    /// are broken here rather than waited for): every abandoned operation
    /// is resumed.
    async fn resume(&self) -> Result<(), String> {
        for s in self.base.list_stacks().await.map_err(|e| e.to_string())? {
            if let Some(owner) = self
                .base
                .lease_owner(&s.stack_id)
                .await
                .map_err(|e| e.to_string())?
            {
                self.base
                    .break_lease(&s.stack_id, &owner)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        let engine = self.engine(self.base.clone());
        let resumed = engine.resume_abandoned();
        tokio::pin!(resumed);
        let deadline = tokio::time::sleep(Duration::from_secs(60));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                done = &mut resumed => return done.map(|_| ()).map_err(|e| e.to_string()),
                _ = &mut deadline => return Err("the resume did not finish within 60 s".into()),
                // A cancel-update the crash kept from being recorded: the
                // person asks again while the update still waits.
                _ = tokio::time::sleep(Duration::from_millis(50)) => {
                    if self.cloud.blocked() {
                        let _ = engine.updates().cancel_update(STACK).await;
                    }
                    // Signals the crash kept from being stored are sent
                    // again (a stored one is not counted twice).
                    self.send_signals(&engine).await;
                }
            }
        }
    }

    /// The live stack of the scenario, if any.
    async fn stack(&self) -> Option<crate::stack::StackRecord> {
        self.base.find_stack(STACK).await.ok().flatten()
    }

    async fn outcome(&self) -> Outcome {
        let status = self.stack().await.map(|s| s.status);
        let mut live: Vec<String> = self
            .cloud
            .live()
            .into_iter()
            .map(|(id, l)| {
                // With the registered version that last served it, if any.
                let version = self.cloud.served_by(&id).unwrap_or_default();
                format!(
                    "{} {} {} {version}",
                    l.type_name,
                    l.logical_id,
                    serde_json::Value::Object(l.properties.clone())
                )
            })
            .collect();
        live.sort();
        Outcome { status, live }
    }

    /// Every hook kept in the registry is a stack's hook resource (by its
    /// alias, or the request its create was made with): none is left
    /// behind by a delete or a rollback.
    async fn leaked_hooks(&self) -> Vec<String> {
        let mut rows = Vec::new();
        for s in self.base.list_stacks().await.unwrap_or_default() {
            rows.extend(self.base.resources(&s.stack_id).await.unwrap_or_default());
        }
        let kept: Vec<&crate::stack::ResourceRecord> = rows
            .iter()
            .filter(|r| r.status != crate::stack::ResourceStatus::DeleteComplete)
            .collect();
        let kept = format!("{kept:?}");
        let registrations = self.base.registrations().await.unwrap_or_default();
        let mut leaked = Vec::new();
        for v in self.base.type_versions().await.unwrap_or_default() {
            if v.kind != crate::type_registry::RegistryTypeKind::Hook || v.deprecated {
                continue;
            }
            let made_by = registrations
                .iter()
                .filter(|g| {
                    g.type_name == v.type_name && g.version_id.as_ref() == Some(&v.version_id)
                })
                .filter_map(|g| g.client_token.clone())
                .collect::<Vec<_>>();
            let owned = kept.contains(&format!("\"{}\"", v.type_name))
                || made_by.iter().any(|t| kept.contains(t.as_str()));
            if !owned {
                leaked.push(format!(
                    "hook {} version {} is in force but no stack's resource records it: leaked",
                    v.type_name, v.version_id
                ));
            }
        }
        leaked
    }

    /// The invariants that hold after any run, crashed and resumed or not.
    async fn check(&self, what: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let mut fail = |p: String| problems.push(format!("{what}: {p}"));
        for d in self.cloud.defects().into_iter().chain(self.hook.defects()) {
            fail(d);
        }
        for l in self.leaked_hooks().await {
            fail(l);
        }
        let Some(stack) = self.stack().await else {
            // No stack: nothing may exist but a person's own resources.
            for (id, l) in self
                .cloud
                .live()
                .into_iter()
                .filter(|(id, _)| !self.cloud.is_outside(id))
            {
                fail(format!(
                    "{id} ({}) exists but no stack was recorded",
                    l.logical_id
                ));
            }
            return problems;
        };
        for s in self.base.list_stacks().await.unwrap_or_default() {
            if s.status.is_in_progress() {
                fail(format!("stack {} is still {}", s.stack_name, s.status));
            }
        }
        // Every stack of the tree (nested stacks record their own rows).
        let mut rows = Vec::new();
        let mut groups = Vec::new();
        for s in self.base.list_stacks().await.unwrap_or_default() {
            rows.extend(self.base.resources(&s.stack_id).await.unwrap_or_default());
            groups.extend(self.base.groups(&s.stack_id).await.unwrap_or_default());
        }
        // Debug quotes every string: a physical id or request id named
        // anywhere in a row (journal snapshots, pending calls) or a group's
        // state counts as recorded.
        let recorded = format!("{rows:?}{groups:?}");
        for (id, l) in self.cloud.live() {
            // A person's own resource that no stack adopted is theirs.
            let outside = self.cloud.is_outside(&id);
            if !outside
                && !recorded.contains(&format!("\"{id}\""))
                && !recorded.contains(&l.request_id)
            {
                fail(format!(
                    "{id} ({} {}) exists but the stack ({}) records neither it nor its request {}: leaked",
                    l.type_name, l.logical_id, stack.status, l.request_id
                ));
            }
        }
        let live = self.cloud.live();
        for r in &rows {
            let complete = matches!(
                r.status,
                crate::stack::ResourceStatus::CreateComplete
                    | crate::stack::ResourceStatus::UpdateComplete
            );
            // A resource of a registered type names the version whose
            // provider made or last changed it.
            if let (true, Some(id)) = (r.resource_type == versioned::VERSIONED, &r.physical_id) {
                let served = self.cloud.served_by(id);
                if complete && served.is_some() && served != r.type_version {
                    fail(format!(
                        "{} is {} on version {:?}, but version {served:?} made or last changed {id}",
                        r.logical_id, r.status, r.type_version
                    ));
                }
            }
            if let Some(id) = r.physical_id.as_ref().filter(|_| complete) {
                if r.resource_type.starts_with("Sim::")
                    && !live.contains_key(id)
                    && !self.cloud.vanished(id)
                {
                    fail(format!(
                        "{} is {} with physical id {id}, which does not exist",
                        r.logical_id, r.status
                    ));
                }
            }
        }
        // Well-formed event sequences: no resource (or stack) reports the
        // same step twice in a row (a takeover that repeats
        // `*_IN_PROGRESS`, as CloudFormation never does).
        for s in self.base.list_stacks().await.unwrap_or_default() {
            let events = self.base.events(&s.stack_id).await.unwrap_or_default();
            let mut last: std::collections::HashMap<&str, &crate::stack::EventRecord> =
                std::collections::HashMap::new();
            // A hook's events carry their verdict, not a step.
            for e in events.iter().filter(|e| e.hook.is_none()) {
                if let Some(before) = last.insert(e.logical_id.as_str(), e) {
                    if before.status == e.status
                        && before.status_reason == e.status_reason
                        && before.physical_id == e.physical_id
                        && e.status.is_in_progress()
                    {
                        fail(format!(
                            "{} of stack {} reports {} {:?} twice in a row",
                            e.logical_id, s.stack_name, e.status, e.status_reason
                        ));
                    }
                }
            }
        }
        let events = self.base.events(&stack.stack_id).await.unwrap_or_default();
        let last = events
            .iter()
            .rev()
            .find(|e| e.resource_type == STACK_TYPE && e.logical_id == stack.stack_name);
        if last.map(|e| e.status.as_str()) != Some(stack.status.as_str()) {
            fail(format!(
                "the stack is {} but its last stack event is {:?}",
                stack.status,
                last.map(|e| &e.status)
            ));
        }
        problems
    }

    /// Whether any event of the stack says `text`.
    async fn events_mention(&self, text: &str) -> bool {
        let Some(stack) = self.stack().await else {
            return false;
        };
        self.base
            .events(&stack.stack_id)
            .await
            .unwrap_or_default()
            .iter()
            .any(|e| e.status_reason.as_deref().is_some_and(|r| r.contains(text)))
    }

    /// Prints the stack's events (`CAIRN_SIM_TRACE=1`), to see a defect.
    async fn trace(&self, what: &str) {
        let Some(stack) = self.stack().await else {
            return;
        };
        println!("--- {what}");
        for e in self.base.events(&stack.stack_id).await.unwrap_or_default() {
            println!(
                "  {} {} {} {}",
                e.logical_id,
                e.status,
                e.physical_id,
                e.status_reason.unwrap_or_default()
            );
        }
    }

    /// The stack deleted with the cloud healed: nothing may remain.
    async fn clean_up(&self, what: &str) -> Vec<String> {
        self.cloud.set_down(false);
        self.cloud.heal();
        let engine = self.engine(self.base.clone());
        let mut problems = Vec::new();
        // What a stack recorded (adopted by an import) is the stack's to
        // delete: only what no row names stays the person's.
        let mut recorded = String::new();
        for s in self.base.list_stacks().await.unwrap_or_default() {
            let rows = self.base.resources(&s.stack_id).await.unwrap_or_default();
            recorded.push_str(&format!("{rows:?}"));
        }
        let adopted: std::collections::HashSet<String> = self
            .cloud
            .live()
            .into_keys()
            .filter(|id| self.cloud.is_outside(id) && recorded.contains(&format!("\"{id}\"")))
            .collect();
        if self.stack().await.is_some() {
            if let Err(e) = self.run(&engine, &Step::Delete).await {
                problems.push(format!("{what}: deleting the stack at the end failed: {e}"));
            }
            let status = self.stack().await.map(|s| s.status);
            if status != Some(StackStatus::DeleteComplete) && status.is_some() {
                problems.push(format!(
                    "{what}: deleting the stack with the cloud healed ended {status:?}"
                ));
            }
        }
        for l in self.leaked_hooks().await {
            problems.push(format!("{what}, the stack deleted: {l}"));
        }
        // What a person made and no stack adopted is theirs to delete.
        self.cloud.clear_outside_except(&adopted);
        for (id, l) in self.cloud.live() {
            problems.push(format!(
                "{what}: {id} ({} {}) is left after the stack was deleted: leaked",
                l.type_name, l.logical_id
            ));
        }
        problems
    }
}

/// A scenario: steps run to their end, then the step under test.
pub struct Scenario {
    pub name: &'static str,
    pub setup: Vec<Step>,
    pub step: Step,
    /// How the step ends without a crash (`None`: the stack is deleted).
    pub expect: Option<StackStatus>,
    /// Other statuses it may end in after a crash (a cancel the crash
    /// kept from being recorded lets the update finish).
    pub also: &'static [StackStatus],
    pub points: Points,
}

/// What exploring one scenario found.
pub struct Report {
    /// Write points crashed at (and resumed from).
    pub crash_points: u64,
    /// Write points a second engine took the operation over at.
    pub takeover_points: u64,
    /// Durable writes of the step without a crash.
    pub writes: u64,
    pub problems: Vec<String>,
}

/// Which write points a scenario explores.
pub enum Points {
    /// Every one (small stacks).
    Every,
    /// `n` drawn from a fixed seed (larger stacks): the same points on
    /// every run, so a failure reproduces.
    Sample { n: usize, seed: u64 },
}

impl Points {
    /// Write indexes to stall or crash before; past the last write too
    /// (writes after the step, and a step whose count varies a little).
    fn pick(&self, writes: u64) -> Vec<u64> {
        match self {
            Points::Every => (0..=writes + 2).collect(),
            Points::Sample { n, seed } => {
                // xorshift64*: deterministic, no dependency.
                let mut x = (*seed).max(1);
                let mut picked = std::collections::BTreeSet::new();
                while picked.len() < (*n).min(writes as usize) {
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    picked.insert(x.wrapping_mul(0x2545_F491_4F6C_DD1D) % writes);
                }
                picked.into_iter().collect()
            }
        }
    }
}

impl Scenario {
    /// The reference run, then one run per write point of `step`.
    pub async fn explore(&self) -> Report {
        let mut problems = Vec::new();
        // Reference: no crash.
        let world = World::new();
        for s in &self.setup {
            if let Err(e) = world.run(&world.engine(world.base.clone()), s).await {
                problems.push(format!("{}: setup step {s:?} failed: {e}", self.name));
                return Report {
                    crash_points: 0,
                    takeover_points: 0,
                    writes: 0,
                    problems,
                };
            }
        }
        let before = world.outcome().await;
        let counting = CrashStore::new(world.base.clone(), None);
        let _ = world.run(&world.engine(counting.clone()), &self.step).await;
        let writes = counting.writes();
        let reference = world.outcome().await;
        if reference.status != self.expect {
            problems.push(format!(
                "{}: without a crash it ends {:?}, expected {:?}",
                self.name, reference.status, self.expect
            ));
        }
        problems.extend(world.check(&format!("{} without a crash", self.name)).await);
        problems.extend(
            world
                .clean_up(&format!("{} without a crash", self.name))
                .await,
        );
        drop(world);

        let mut points = 0;
        let mut takeovers = 0;
        for k in self.points.pick(writes) {
            for takeover in [false, true] {
                let world = World::new();
                for s in &self.setup {
                    let _ = world.run(&world.engine(world.base.clone()), s).await;
                }
                let what = if takeover {
                    format!("{}, taken over before write {}", self.name, k + 1)
                } else {
                    format!("{}, crash before write {}", self.name, k + 1)
                };
                let reached = if takeover {
                    world.run_taken_over(&self.step, k).await
                } else {
                    let crashed = world.run_crashing(&self.step, k).await;
                    if crashed {
                        world.resume().await.map(|()| true)
                    } else {
                        Ok(false)
                    }
                };
                match reached {
                    // The step finished with fewer writes: nothing to explore here.
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(e) => problems.push(format!("{what}: resume failed: {e}")),
                }
                if takeover {
                    takeovers += 1;
                } else {
                    points += 1;
                }
                problems.extend(world.check(&what).await);
                let got = world.outcome().await;
                // A handler's Create the dead engine may or may not have sent
                // is never sent again: that resource fails, which may change
                // the outcome (as in CloudFormation).
                let handler_lost = world.events_mention(cloud::NEVER_TWICE).await;
                let also = got.status.is_some_and(|s| self.also.contains(&s));
                if got != reference && got != before && !handler_lost && !also {
                    problems.push(format!(
                        "{what}: ended {:?} with {:?}; without a crash it ends {:?} with {:?}",
                        got.status, got.live, reference.status, reference.live
                    ));
                }
                if std::env::var_os("CAIRN_SIM_TRACE").is_some() {
                    world.trace(&what).await;
                }
                problems.extend(world.clean_up(&what).await);
            }
        }
        Report {
            crash_points: points,
            takeover_points: takeovers,
            writes,
            problems,
        }
    }
}

/// An operation's load takes the templates its start parsed (a create's
/// one, an update's target and the stack's) instead of parsing them again:
/// the keys the start keeps them under are the ones the load asks with.
#[test]
fn an_operations_load_takes_the_templates_its_start_parsed() {
    deep(|| async {
        let world = World::new();
        let engine = world.engine(world.base.clone());
        let base = "Resources:\n  A: {Type: Sim::Thing, Properties: {Name: a-one, Value: \"1\"}}\n";
        world.run(&engine, &create(base)).await.expect("create");
        assert_eq!(engine.parsed.handed_over(), 1);
        let changed = base.replace("\"1\"", "\"2\"");
        world.run(&engine, &update(&changed)).await.expect("update");
        assert_eq!(engine.parsed.handed_over(), 3);
        assert_eq!(
            world.stack().await.map(|s| s.status),
            Some(StackStatus::UpdateComplete)
        );
        // The stack's next operation on this engine takes the template
        // its last one kept.
        world.run(&engine, &Step::Delete).await.expect("delete");
        assert_eq!(engine.parsed.handed_over(), 4);
        assert_eq!(world.stack().await.map(|s| s.status), None);
    });
}
