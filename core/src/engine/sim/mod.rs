//! The crash simulator: the real engine in process between a scripted
//! provider ([`cloud::Cloud`]) and a store that "crashes" at its k-th
//! durable write ([`crash_store::CrashStore`]). For one operation it runs
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

mod cloud;
pub(crate) mod crash_store;
mod scenarios;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_sdk::ResourceProvider;

use super::update::UpdateStackInput;
use super::{CreateStackInput, Engine};
use crate::config::Config;
use crate::registry::Registry;
use crate::stack::{OnFailure, StackStatus, STACK_TYPE};
use crate::store::sqlite::SqliteStore;
use crate::store::Store;
use cloud::Cloud;
use crash_store::CrashStore;

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
    Delete,
    ContinueRollback,
    /// Lifts every script: hanging creates answer, failures stop.
    Heal,
    /// Switches the cloud down (every call fails as a provider that cannot
    /// start) or up.
    CloudDown(bool),
}

pub fn create(template: &str) -> Step {
    Step::Create {
        template: template.to_string(),
        on_failure: OnFailure::Rollback,
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
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config() -> Config {
    let mut c = Config::default();
    c.engine.cleanup_attempts = 2;
    c.engine.cleanup_backoff_seconds = 0.0;
    c.engine.max_concurrency = 4;
    c.engine.health_timeout_seconds = 5;
    c
}

impl World {
    fn new() -> World {
        let dir = std::env::temp_dir().join(format!("cairn-sim-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let base: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.join("state.db")).expect("state file"));
        let cloud = Arc::new(Cloud::default());
        let config = config();
        let provider: Arc<dyn ResourceProvider> = cloud.clone();
        let registry =
            crate::registry::assemble::assemble(&config, vec![("builtin:sim", provider)])
                .expect("registry");
        World {
            dir,
            base,
            cloud,
            registry: Arc::new(registry),
            config,
        }
    }

    fn engine(&self, store: Arc<dyn Store>) -> Arc<Engine> {
        Engine::new(store, self.registry.clone(), self.config.clone())
    }

    /// Runs a step to its end (errors are the step's outcome, not the test's).
    async fn run(&self, engine: &Arc<Engine>, step: &Step) -> Result<(), String> {
        let e = |e: super::EngineError| e.to_string();
        match step {
            Step::Create {
                template,
                on_failure,
            } => {
                let input = CreateStackInput {
                    stack_name: STACK.into(),
                    template_body: template.clone(),
                    parameters: BTreeMap::new(),
                    on_failure: *on_failure,
                    tags: Vec::new(),
                    timeout_minutes: None,
                    origin: Default::default(),
                    context: Default::default(),
                };
                let id = engine.start_create(&input).await.map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::Update { template } => {
                let input = UpdateStackInput {
                    stack_name: STACK.into(),
                    template_body: Some(template.clone()),
                    parameters: BTreeMap::new(),
                    tags: None,
                    origin: Default::default(),
                    context: None,
                };
                let id = engine.start_update(&input).await.map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::Delete => {
                if let Some(id) = engine.start_delete(STACK, &[]).await.map_err(e)? {
                    engine.run(&id).await.map_err(e)?;
                }
            }
            Step::ContinueRollback => {
                let id = engine
                    .start_continue_rollback(STACK, &[])
                    .await
                    .map_err(e)?;
                engine.run(&id).await.map_err(e)?;
            }
            Step::CloudDown(down) => self.cloud.set_down(*down),
            Step::Heal => self.cloud.heal(),
        }
        Ok(())
    }

    /// Runs `step` on an engine whose store crashes before its write
    /// `allowed + 1`. True when it crashed.
    async fn run_crashing(&self, step: &Step, allowed: u64) -> bool {
        let store = CrashStore::new(self.base.clone(), Some(allowed));
        let engine = self.engine(store.clone());
        // A dead process does nothing more: whatever the engine still
        // does after the crash is refused by the store, and it is dropped.
        let _ = tokio::time::timeout(Duration::from_secs(30), self.run(&engine, step)).await;
        drop(engine);
        store.crashed()
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
        tokio::time::timeout(Duration::from_secs(60), engine.resume_abandoned())
            .await
            .map_err(|_| "the resume did not finish within 60 s".to_string())?
            .map_err(|e| e.to_string())?;
        Ok(())
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
            .values()
            .map(|l| {
                format!(
                    "{} {} {}",
                    l.type_name,
                    l.logical_id,
                    serde_json::Value::Object(l.properties.clone())
                )
            })
            .collect();
        live.sort();
        Outcome { status, live }
    }

    /// The invariants that hold after any run, crashed and resumed or not.
    async fn check(&self, what: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let mut fail = |p: String| problems.push(format!("{what}: {p}"));
        for d in self.cloud.defects() {
            fail(d);
        }
        let Some(stack) = self.stack().await else {
            // No stack: nothing may exist.
            for (id, l) in self.cloud.live() {
                fail(format!(
                    "{id} ({}) exists but no stack was recorded",
                    l.logical_id
                ));
            }
            return problems;
        };
        if stack.status.is_in_progress() {
            fail(format!("the stack is still {}", stack.status));
        }
        let rows = self
            .base
            .resources(&stack.stack_id)
            .await
            .unwrap_or_default();
        let groups = self.base.groups(&stack.stack_id).await.unwrap_or_default();
        // Debug quotes every string: a physical id or request id named
        // anywhere in a row (journal snapshots, pending calls) or a group's
        // state counts as recorded.
        let recorded = format!("{rows:?}{groups:?}");
        for (id, l) in self.cloud.live() {
            if !recorded.contains(&format!("\"{id}\"")) && !recorded.contains(&l.request_id) {
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
            if let Some(id) = r.physical_id.as_ref().filter(|_| complete) {
                if r.resource_type.starts_with("Sim::") && !live.contains_key(id) {
                    fail(format!(
                        "{} is {} with physical id {id}, which does not exist",
                        r.logical_id, r.status
                    ));
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
}

/// What exploring one scenario found.
pub struct Report {
    pub crash_points: u64,
    pub problems: Vec<String>,
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
        for k in 0..=writes + 2 {
            let world = World::new();
            for s in &self.setup {
                let _ = world.run(&world.engine(world.base.clone()), s).await;
            }
            let what = format!("{}, crash before write {}", self.name, k + 1);
            if !world.run_crashing(&self.step, k).await {
                // The step finished with fewer writes: every point is explored.
                break;
            }
            points += 1;
            if let Err(e) = world.resume().await {
                problems.push(format!("{what}: resume failed: {e}"));
            }
            problems.extend(world.check(&what).await);
            let got = world.outcome().await;
            // A handler's Create the dead engine may or may not have sent
            // is never sent again: that resource fails, which may change
            // the outcome (as in CloudFormation).
            let handler_lost = world.events_mention(cloud::NEVER_TWICE).await;
            if got != reference && got != before && !handler_lost {
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
        Report {
            crash_points: points,
            problems,
        }
    }
}
