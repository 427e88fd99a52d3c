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

/// Creates, then deletes, `template` as stack `bench` with one in-process
/// engine (`max_concurrency` 64, the built-in providers keeping their data
/// under `data`) on `store`: (create s, delete s).
pub async fn create_and_delete(
    store: Arc<dyn Store>,
    data: &Path,
    template: String,
) -> Result<(f64, f64), Error> {
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
    settle();
    let start = Instant::now();
    let id = engine.creates().start_create(&input).await?;
    let status = engine.run(&id).await?;
    let create = start.elapsed().as_secs_f64();
    if status != StackStatus::CreateComplete {
        return Err(format!("create ended {status}").into());
    }
    settle();
    let start = Instant::now();
    engine.deletes().start_delete("bench", &[]).await?;
    let status = engine.run(&id).await?;
    let delete = start.elapsed().as_secs_f64();
    if status != StackStatus::DeleteComplete {
        return Err(format!("delete ended {status}").into());
    }
    Ok((create, delete))
}
