//! The engine's own cost against the durable-write floor: prints figures,
//! asserts nothing.
//!
//! `cargo bench --bench engine_only`: a random DAG of 10,000
//! `OS::Heat::Value` resources (held in memory: no file per resource, so
//! what is measured is the engine and its store) created and deleted by one
//! in-process engine on the real SQLite store (a file in a temp directory,
//! `max_concurrency` 64), and, in the same run and directory, the floor:
//! the row writes such an operation must make durable at least, written
//! with the store's pragmas (WAL, `synchronous = NORMAL`) in transactions
//! of 128 writes. A create records each resource's call before it is sent
//! and its outcome after (its row twice) with three events (IN_PROGRESS,
//! "Resource creation Initiated", COMPLETE): five writes per resource. A
//! delete writes the row and an event before the call and removes the row
//! with an event after: four. Each engine figure is printed as a ratio to
//! its floor (issue 53's target: at most 2×).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cairn_core::config::Config;
use cairn_core::engine::{CreateStackInput, Engine};
use cairn_core::stack::{OnFailure, StackStatus};
use cairn_core::store::Store;
use cairn_store_sqlite::SqliteStore;

/// The same allocator as the `cairn` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Error = Box<dyn std::error::Error>;

const RESOURCES: usize = 10_000;
/// Writes per transaction in the floor (the store's group commit batches
/// as many writes as are waiting; 128 is what a busy engine reaches).
const BATCH: usize = 128;

/// The random DAG of `stack_ops` (same generator, same seed), of a type
/// that keeps nothing outside the store.
fn random_dag(n: usize) -> String {
    let mut state: u64 = 42;
    let mut below = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % n.max(1)
    };
    let mut t = String::from("Resources:\n");
    t.push_str("  R0: {Type: OS::Heat::Value, Properties: {value: root}}\n");
    for i in 1..n {
        let (a, b) = (below(i), below(i));
        t.push_str(&format!(
            "  R{i}: {{Type: OS::Heat::Value, DependsOn: [R{b}], Properties: {{value: !Ref R{a}}}}}\n"
        ));
    }
    t
}

/// The engine: (create s, delete s).
async fn engine(state: &Path, data: &Path) -> Result<(f64, f64), Error> {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(state)?);
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
        template_body: random_dag(RESOURCES),
        parameters: BTreeMap::new(),
        on_failure: OnFailure::Rollback,
        tags: Vec::new(),
        timeout_minutes: None,
        origin: Default::default(),
        context: Default::default(),
        capabilities: None,
        termination_protection: false,
    };
    let start = Instant::now();
    let id = engine.creates().start_create(&input).await?;
    let status = engine.run(&id).await?;
    let create = start.elapsed().as_secs_f64();
    if status != StackStatus::CreateComplete {
        return Err(format!("create ended {status}").into());
    }
    let start = Instant::now();
    engine.deletes().start_delete("bench", &[]).await?;
    let status = engine.run(&id).await?;
    let delete = start.elapsed().as_secs_f64();
    if status != StackStatus::DeleteComplete {
        return Err(format!("delete ended {status}").into());
    }
    Ok((create, delete))
}

/// A resource row and an event about the size the store writes for one
/// of these resources (a few hundred bytes of JSON each).
fn row(i: usize, status: &str) -> String {
    format!(
        r#"{{"LogicalResourceId":"R{i}","ResourceType":"OS::Heat::Value","PhysicalResourceId":"bench-R{i}-0123456789ab","ResourceStatus":"{status}","Properties":{{"value":"bench-R{}-0123456789ab"}},"Attributes":{{"value":"bench-R{}-0123456789ab"}},"Pending":{{"Action":"CREATE","RequestId":"00000000-0000-4000-8000-{i:012}"}},"UpdatedAt":"2026-11-28T00:00:00.000Z"}}"#,
        i / 2,
        i / 2
    )
}

fn event(i: usize, status: &str) -> String {
    format!(
        r#"{{"EventId":"00000000-0000-4000-8000-{i:012}","StackName":"bench","LogicalResourceId":"R{i}","PhysicalResourceId":"bench-R{i}-0123456789ab","ResourceType":"OS::Heat::Value","Timestamp":"2026-11-28T00:00:00.000Z","ResourceStatus":"{status}","ResourceProperties":"{{\"value\":\"bench\"}}"}}"#
    )
}

/// The floor: the create's and the delete's row writes, batched (s, s).
fn floor(path: &Path) -> Result<(f64, f64), Error> {
    let mut db = rusqlite::Connection::open(path)?;
    db.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE resources (stack_id TEXT NOT NULL, logical_id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (stack_id, logical_id));
         CREATE TABLE events (seq INTEGER PRIMARY KEY, stack_id TEXT NOT NULL, doc TEXT NOT NULL);",
    )?;
    enum W {
        Put(usize, &'static str),
        Event(usize, &'static str),
        Remove(usize),
    }
    let create: Vec<W> = (0..RESOURCES)
        .flat_map(|i| {
            [
                W::Put(i, "CREATE_IN_PROGRESS"),
                W::Event(i, "CREATE_IN_PROGRESS"),
                W::Event(i, "CREATE_IN_PROGRESS"),
                W::Put(i, "CREATE_COMPLETE"),
                W::Event(i, "CREATE_COMPLETE"),
            ]
        })
        .collect();
    let delete: Vec<W> = (0..RESOURCES)
        .flat_map(|i| {
            [
                W::Put(i, "DELETE_IN_PROGRESS"),
                W::Event(i, "DELETE_IN_PROGRESS"),
                W::Remove(i),
                W::Event(i, "DELETE_COMPLETE"),
            ]
        })
        .collect();
    let mut run = |writes: &[W]| -> Result<f64, Error> {
        let start = Instant::now();
        for chunk in writes.chunks(BATCH) {
            let tx = db.transaction()?;
            for w in chunk {
                match w {
                    W::Put(i, s) => {
                        tx.prepare_cached("INSERT INTO resources (stack_id, logical_id, doc) VALUES ('bench', ?1, ?2) ON CONFLICT (stack_id, logical_id) DO UPDATE SET doc = excluded.doc")?
                            .execute(rusqlite::params![format!("R{i}"), row(*i, s)])?;
                    }
                    W::Event(i, s) => {
                        tx.prepare_cached(
                            "INSERT INTO events (stack_id, doc) VALUES ('bench', ?1)",
                        )?
                        .execute(rusqlite::params![event(*i, s)])?;
                    }
                    W::Remove(i) => {
                        tx.prepare_cached(
                            "DELETE FROM resources WHERE stack_id = 'bench' AND logical_id = ?1",
                        )?
                        .execute(rusqlite::params![format!("R{i}")])?;
                    }
                }
            }
            tx.commit()?;
        }
        Ok(start.elapsed().as_secs_f64())
    };
    Ok((run(&create)?, run(&delete)?))
}

fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    // The floor first, on the same file system, then the engine.
    let (floor_create, floor_delete) = floor(&dir.path().join("floor.db"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (create, delete) = rt.block_on(engine(
        &dir.path().join("state.db"),
        &dir.path().join("data"),
    ))?;
    println!(
        "engine only, {RESOURCES} resources (OS::Heat::Value, SQLite on {}): create {create:.2} s against a floor of {floor_create:.2} s ({:.2}x), delete {delete:.2} s against {floor_delete:.2} s ({:.2}x) [target <= 2x]",
        dir.path().display(),
        create / floor_create,
        delete / floor_delete
    );
    Ok(())
}
