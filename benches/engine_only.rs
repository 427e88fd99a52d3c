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
//! of about 128 writes. A create records each resource's call before it is
//! sent and its outcome after (its row twice) with three events
//! (IN_PROGRESS, "Resource creation Initiated", COMPLETE): five writes per
//! resource. A delete writes the row and an event before the call and
//! removes the row with an event after: four. The two halves of a
//! resource's writes cannot share a transaction (the call is made between
//! them, once the first is durable), so the floor commits them as a
//! pipelined engine at best could: each transaction holds one wave's
//! intents and the previous wave's outcomes. Each engine figure is printed
//! as a ratio to
//! its floor (issue 53's target: at most 2×), and with each thread's CPU
//! time in it (the engine's thread, the SQLite writer's, its
//! checkpointer's): those move by a few percent from run to run where the
//! wall clock on a shared VM moves by tens.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cairn_core::store::Store;
use cairn_store_sqlite::SqliteStore;

mod support;
use support::Error;

/// The same allocator as the `cairn` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RESOURCES: usize = 10_000;
/// Writes per transaction in the floor (the store's group commit batches
/// as many writes as are waiting; 128 is what a busy engine reaches).
const BATCH: usize = 128;

/// One write of the floor.
enum W {
    Put(usize, &'static str),
    Event(usize, &'static str),
    Remove(usize),
}

/// The floor's transactions: the resources in waves, each transaction one
/// wave's `intent` writes and the previous wave's `outcome` writes (a
/// resource's outcome never commits with its intent: the engine makes the
/// call between the two, once the intent is durable). A wave is as many
/// resources as make [`BATCH`] writes with both halves.
fn transactions(
    intent: impl Fn(usize) -> Vec<W>,
    outcome: impl Fn(usize) -> Vec<W>,
) -> Vec<Vec<W>> {
    let wave = BATCH / (intent(0).len() + outcome(0).len());
    let waves: Vec<std::ops::Range<usize>> = (0..RESOURCES)
        .step_by(wave)
        .map(|s| s..(s + wave).min(RESOURCES))
        .collect();
    let mut txs = Vec::with_capacity(waves.len() + 1);
    for (k, this) in waves.iter().enumerate() {
        let mut tx: Vec<W> = this.clone().flat_map(&intent).collect();
        if let Some(before) = k.checked_sub(1).map(|k| waves[k].clone()) {
            tx.extend(before.flat_map(&outcome));
        }
        txs.push(tx);
    }
    if let Some(last) = waves.last() {
        txs.push(last.clone().flat_map(&outcome).collect());
    }
    txs
}

/// The engine's create and delete, of resources that keep nothing
/// outside the store.
async fn engine(state: &Path, data: &Path) -> Result<(support::Timed, support::Timed), Error> {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(state)?);
    let template = support::random_dag(RESOURCES, "OS::Heat::Value", "value");
    support::create_and_delete(store, data, template).await
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
    let create = transactions(
        |i| {
            vec![
                W::Put(i, "CREATE_IN_PROGRESS"),
                W::Event(i, "CREATE_IN_PROGRESS"),
                W::Event(i, "CREATE_IN_PROGRESS"),
            ]
        },
        |i| vec![W::Put(i, "CREATE_COMPLETE"), W::Event(i, "CREATE_COMPLETE")],
    );
    let delete = transactions(
        |i| {
            vec![
                W::Put(i, "DELETE_IN_PROGRESS"),
                W::Event(i, "DELETE_IN_PROGRESS"),
            ]
        },
        |i| vec![W::Remove(i), W::Event(i, "DELETE_COMPLETE")],
    );
    let mut run = |txs: &[Vec<W>]| -> Result<f64, Error> {
        let start = Instant::now();
        for writes in txs {
            let tx = db.transaction()?;
            for w in writes {
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
    let create = run(&create)?;
    support::settle();
    Ok((create, run(&delete)?))
}

fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    // The floor first, on the same file system, then the engine; each
    // create and delete after the disk has settled (the engine's in
    // `create_and_delete`).
    support::settle();
    let (floor_create, floor_delete) = floor(&dir.path().join("floor.db"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (create, delete) = rt.block_on(engine(
        &dir.path().join("state.db"),
        &dir.path().join("data"),
    ))?;
    println!(
        "engine only, {RESOURCES} resources (OS::Heat::Value, SQLite on {}): create {:.2} s against a floor of {floor_create:.2} s ({:.2}x), delete {:.2} s against {floor_delete:.2} s ({:.2}x) [target <= 2x]",
        dir.path().display(),
        create.secs,
        create.secs / floor_create,
        delete.secs,
        delete.secs / floor_delete
    );
    // The threads' CPU: the engine's is the bench's main thread (its
    // runtime's `block_on`), the store's writer and checkpointer their own.
    println!(
        "engine only, CPU ms by thread: create {}; delete {}",
        create.cpu_line(),
        delete.cpu_line()
    );
    Ok(())
}
