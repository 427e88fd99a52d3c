//! What the in-process benches share: the random DAG of `stack_ops` (same
//! generator, same seed) and one create and delete of it, timed after
//! the disk has settled ([`settle`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cairn_core::config::Config;
use cairn_core::engine::{CreateStackInput, Engine};
use cairn_core::stack::{OnFailure, StackStatus};
use cairn_core::store::Store;

mod settle;
pub use settle::settle;

pub type Error = Box<dyn std::error::Error>;

/// `n` resources of `type_name`, each with a `DependsOn` and a `Ref` of
/// earlier ones in `property`.
pub fn random_dag(n: usize, type_name: &str, property: &str) -> String {
    let mut state: u64 = 42;
    let mut below = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % n.max(1)
    };
    let mut t = String::from("Resources:\n");
    t.push_str(&format!(
        "  R0: {{Type: {type_name}, Properties: {{{property}: root}}}}\n"
    ));
    for i in 1..n {
        let (a, b) = (below(i), below(i));
        t.push_str(&format!(
            "  R{i}: {{Type: {type_name}, DependsOn: [R{b}], Properties: {{{property}: !Ref R{a}}}}}\n"
        ));
    }
    t
}

/// Spans as the `cairn` binary has them without `RUST_LOG` or
/// `[telemetry]`: a subscriber that takes none. The binary always installs
/// one; with none, tracing's `log` feature (on through axum's `tower-log`)
/// evaluates every span's fields for the `log` crate, a `format!` or two
/// per resource step that only a process without a subscriber pays (6 %
/// of the engine thread's CPU time in the 10,000-resource create).
fn quiet_spans() {
    // Set once per process; a later call finds it set.
    let _ = tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default());
}

/// One timed phase: its wall-clock seconds and the CPU milliseconds each
/// of the process's threads (by name) spent in it. The CPU times are
/// what the wall clock is not on a noisy VM: repeatable within a few
/// percent from run to run, so a change's effect on the engine's thread
/// or the store's writer shows where the wall clock is lost in noise.
pub struct Timed {
    pub secs: f64,
    pub cpu_ms: BTreeMap<String, f64>,
}

impl Timed {
    /// The CPU milliseconds by thread name, for a bench's line.
    pub fn cpu_line(&self) -> String {
        let parts: Vec<String> = self
            .cpu_ms
            .iter()
            .filter(|(_, ms)| **ms >= 0.5)
            .map(|(name, ms)| format!("{name} {ms:.0}"))
            .collect();
        parts.join(", ")
    }
}

/// CPU time so far of each of the process's threads, summed by name (ms),
/// from Linux's `/proc/self/task/*/schedstat` (nanoseconds on a CPU);
/// empty where there is none.
fn cpu_by_thread() -> BTreeMap<String, f64> {
    let mut by_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let read = |file: &str| std::fs::read_to_string(task.path().join(file)).ok();
        let (Some(name), Some(stat)) = (read("comm"), read("schedstat")) else {
            continue;
        };
        let ns: f64 = stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *by_name.entry(name.trim().to_string()).or_insert(0.0) += ns / 1e6;
    }
    by_name
}

/// Times `phase` (after the disk has settled): its wall clock and each
/// thread's CPU time in it.
async fn timed<F: std::future::Future<Output = Result<StackStatus, Error>>>(
    phase: F,
) -> Result<(Timed, StackStatus), Error> {
    settle();
    let before = cpu_by_thread();
    let start = Instant::now();
    let status = phase.await?;
    let secs = start.elapsed().as_secs_f64();
    let cpu_ms = cpu_by_thread()
        .into_iter()
        .map(|(name, ms)| {
            let was = before.get(&name).copied().unwrap_or(0.0);
            (name, ms - was)
        })
        .collect();
    Ok((Timed { secs, cpu_ms }, status))
}

/// Creates, then deletes, `template` as stack `bench` with one in-process
/// engine (`max_concurrency` 64, the built-in providers keeping their data
/// under `data`) on `store`: the create's and the delete's times.
pub async fn create_and_delete(
    store: Arc<dyn Store>,
    data: &Path,
    template: String,
) -> Result<(Timed, Timed), Error> {
    quiet_spans();
    let mut config = Config::default();
    config.engine.max_concurrency = 64;
    let process = cairn::wiring::Process::new(&config.webhooks, None);
    let registry = Arc::new(cairn::wiring::assemble(
        &config,
        cairn_providers::builtins(data),
        &process,
    )?);
    let engine = Engine::new(store, registry, config, process.shared);
    let input = CreateStackInput {
        stack_policy: None,
        rollback_configuration: None,
        notification_arns: Vec::new(),
        stack_name: "bench".into(),
        template_body: template,
        parameters: BTreeMap::new(),
        on_failure: OnFailure::Rollback,
        tags: Vec::new(),
        timeout_minutes: None,
        origin: Default::default(),
        context: Default::default(),
        capabilities: None,
        termination_protection: false,
    };
    let mut id = String::new();
    let (create, status) = timed(async {
        id = engine.creates().start_create(&input).await?;
        Ok(engine.run(&id).await?)
    })
    .await?;
    if status != StackStatus::CreateComplete {
        return Err(format!("create ended {status}").into());
    }
    let (delete, status) = timed(async {
        engine.deletes().start_delete("bench", &[]).await?;
        Ok(engine.run(&id).await?)
    })
    .await?;
    if status != StackStatus::DeleteComplete {
        return Err(format!("delete ended {status}").into());
    }
    Ok((create, delete))
}
