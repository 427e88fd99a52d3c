//! Stack-operation benchmark: prints figures, asserts nothing.
//!
//! `cargo bench --bench stack_ops` runs each scenario in a fresh child process
//! (so peak RSS is per scenario) on a temp SQLite state file:
//! - random DAGs of 1,000, 10,000, 40,000 and 100,000 `Cairn::Test::Resource`:
//!   create and delete wall time, the no-op update's refusal, `cairn
//!   describe/resources/events --output json` on the state, peak RSS, and how
//!   the larger ones scale against 10,000;
//! - 20 layers × 50 resources with `WaitSeconds: 0.05` (max_concurrency 64),
//!   and 20 × 500 (max_concurrency 1000): wall time against the 1.0 s
//!   critical path;
//! - the 1,000-resource DAG as `Custom::Bench` custom resources against a
//!   local webhook handler (the SDK's handler kit, answering with a PUT to
//!   the ResponseURL as a cfnresponse Lambda does): create and delete;
//! - provider-plugin call overhead: no-op creates through a plugin loaded in
//!   process and through a `cairn plugin-host` child, sequential and 64 at a
//!   time;
//! - `cairn deploy` of 10,000 resources showing its events on a terminal and
//!   on a pipe;
//! - `cli`: issue 53's figures through the real binary with the default
//!   configuration: 10,000 and 40,000 resources created, refused as a no-op
//!   update and deleted (each command a process of its own), and the
//!   20 × 50 layers.
//!
//! `cargo bench --bench stack_ops -- --only dag10000,follow` runs some.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

#[path = "support/settle.rs"]
mod settle;

use cairn_core::config::{Config, EndpointConfig};
use cairn_core::engine::{CreateStackInput, Engine, UpdateStackInput};
use cairn_core::stack::{OnFailure, StackStatus};
use cairn_core::store::Store;
use cairn_plugin::process::ProcessProvider;
use cairn_plugin::DylibProvider;
use cairn_sdk::webhook::WebhookHandler;
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, ProviderError, ResourceProvider, ResourceSchema,
    UpdateRequest, UpdateResult,
};
use cairn_store_sqlite::SqliteStore;

/// The same allocator as the `cairn` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A small deterministic generator (the bench must not need a rand crate).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

fn random_dag(n: usize) -> String {
    let mut rng = Lcg(42);
    let mut t = String::from("Resources:\n");
    for i in 0..n {
        if i == 0 {
            t.push_str("  R0: {Type: Cairn::Test::Resource, Properties: {Value: root}}\n");
            continue;
        }
        let a = rng.below(i);
        let b = rng.below(i);
        t.push_str(&format!("  R{i}: {{Type: Cairn::Test::Resource, DependsOn: [R{b}], Properties: {{Value: !Ref R{a}}}}}\n"));
    }
    t
}

fn layered(depth: usize, width: usize, wait: f64) -> String {
    let mut rng = Lcg(7);
    let mut t = String::from("Resources:\n");
    for d in 0..depth {
        for w in 0..width {
            let dep = if d == 0 {
                String::new()
            } else {
                format!(", DependsOn: L{}x{}", d - 1, rng.below(width))
            };
            t.push_str(&format!("  L{d}x{w}: {{Type: Cairn::Test::Resource{dep}, Properties: {{WaitSeconds: {wait}}}}}\n"));
        }
    }
    t
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// How many times the no-op update is tried (the median is reported).
const NOOP_ATTEMPTS: usize = 5;

/// The custom resource the webhook scenario's handler serves: it remembers
/// nothing and answers at once, so the figure is Cairn's and the protocol's.
struct Echo;

#[cairn_sdk::async_trait]
impl ResourceProvider for Echo {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new("Custom::Bench").allow_additional_properties()]
    }
    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let mut attributes = serde_json::Map::new();
        attributes.insert("Id".into(), req.context.request_id.clone().into());
        Ok(CreateResult {
            physical_resource_id: format!("bench-{}", req.context.logical_resource_id),
            attributes,
            no_echo: false,
        })
    }
    async fn update(&self, _req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Ok(UpdateResult::default())
    }
    async fn delete(&self, _req: &DeleteRequest) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// Starts the handler kit serving [`Echo`] on a loopback port and points
/// the config's endpoint `bench` at it.
async fn start_handler(config: &mut Config) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    tokio::spawn(
        WebhookHandler::new(Arc::new(Echo))
            .secret("bench")
            .serve(listener),
    );
    config.webhooks.endpoints.insert(
        "bench".into(),
        EndpointConfig {
            url,
            secret: Some("bench".into()),
            max_concurrency: Some(64),
            ..Default::default()
        },
    );
    Ok(())
}

/// The 1,000-resource DAG as custom resources served by endpoint `bench`.
fn custom_dag(n: usize) -> String {
    random_dag(n)
        .replace("Type: Cairn::Test::Resource", "Type: Custom::Bench")
        .replace("Properties: {", "Properties: {ServiceToken: bench, ")
}

/// The test plugin `cairn-test-unruly` (its `Behavior: ok` create returns
/// at once), built in release mode next to this bench.
fn unruly_plugin() -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "cairn-test-unruly"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()?;
    if !status.success() {
        return Err("cannot build the test plugin".into());
    }
    let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_cairn"));
    Ok(exe
        .parent()
        .map(|d| d.join("libcairn_test_unruly.so"))
        .unwrap_or_default())
}

/// Calls per second of no-op creates through `provider`: one at a time,
/// and 64 in flight.
async fn calls_per_second(provider: Arc<dyn ResourceProvider>) -> (f64, f64) {
    let request = |i: usize| {
        let mut properties = serde_json::Map::new();
        properties.insert("Behavior".into(), "ok".into());
        CreateRequest {
            context: cairn_sdk::RequestContext {
                stack_id: "bench".into(),
                stack_name: "bench".into(),
                logical_resource_id: format!("R{i}"),
                resource_type: "Test::Unruly::Thing".into(),
                request_id: format!("req-{i}"),
                deadline_unix_ms: u64::MAX,
                tags: Default::default(),
                provider_settings: None,
            },
            properties,
        }
    };
    let n = 5_000;
    let start = Instant::now();
    for i in 0..n {
        let _ = provider.create(&request(i)).await;
    }
    let sequential = n as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..64 {
        let (provider, next) = (provider.clone(), next.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n * 4 {
                    break;
                }
                let _ = provider.create(&request(i)).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let concurrent = (n * 4) as f64 / start.elapsed().as_secs_f64();
    (sequential, concurrent)
}

fn plugin_overhead() -> Result<(), Box<dyn std::error::Error>> {
    let lib = unruly_plugin()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let in_process: Arc<dyn ResourceProvider> = Arc::new(DylibProvider::load(&lib, None)?);
        let (seq_in, conc_in) = calls_per_second(in_process).await;
        let exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_cairn"));
        let hosted: Arc<dyn ResourceProvider> = Arc::new(ProcessProvider::start(&exe, &lib, None)?);
        let (seq_out, conc_out) = calls_per_second(hosted).await;
        println!(
            "plugin no-op create: in process {seq_in:.0} calls/s one at a time ({:.1} us/call), {conc_in:.0} calls/s 64 in flight; plugin-host process {seq_out:.0} calls/s one at a time ({:.1} us/call), {conc_out:.0} calls/s 64 in flight",
            1e6 / seq_in,
            1e6 / seq_out
        );
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

/// `cairn describe/resources/events --output json` on the scenario's state
/// file (output discarded): seconds each, as a person would wait.
fn read_commands(
    dir: &std::path::Path,
) -> Result<Vec<(&'static str, f64)>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for command in ["describe", "resources", "events"] {
        let start = Instant::now();
        let status = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg("--state")
            .arg(dir.join("state.db"))
            .args([command, "bench", "--output", "json"])
            .env_remove("CAIRN_CONFIG")
            .stdout(std::process::Stdio::null())
            .status()?;
        if !status.success() {
            return Err(format!("cairn {command} failed: {status}").into());
        }
        out.push((command, start.elapsed().as_secs_f64()));
    }
    Ok(out)
}

/// `cairn deploy` of the 10,000-resource DAG printing its events to a
/// terminal (a pseudo-terminal from `script`) and to a pipe: what following
/// the events costs the operation.
fn follow() -> Result<(), Box<dyn std::error::Error>> {
    let exe = env!("CARGO_BIN_EXE_cairn");
    let mut times = Vec::new();
    for tty in [false, true, false, true] {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("t.yaml"), random_dag(10_000))?;
        let command = format!("{exe} --state state.db deploy bench t.yaml");
        let start = Instant::now();
        let status = if tty {
            Command::new("script")
                .args(["-qfec", &command, "/dev/null"])
                .current_dir(dir.path())
                .env("COLUMNS", "160")
                .stdout(std::process::Stdio::null())
                .status()?
        } else {
            Command::new(exe)
                .args(["--state", "state.db", "deploy", "bench", "t.yaml"])
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()?
        };
        if !status.success() {
            return Err(format!("cairn deploy failed: {status}").into());
        }
        times.push((tty, start.elapsed().as_secs_f64()));
    }
    let best = |tty: bool| {
        times
            .iter()
            .filter(|(t, _)| *t == tty)
            .map(|(_, s)| *s)
            .fold(f64::INFINITY, f64::min)
    };
    let (piped, terminal) = (best(false), best(true));
    println!(
        "cairn deploy of 10,000 resources following its events: to a pipe {piped:.3} s, to a terminal {terminal:.3} s ({:+.1} %; best of two each)",
        (terminal / piped - 1.0) * 100.0
    );
    Ok(())
}

/// Seconds `cairn ARGS` takes in `dir` (the state file `state.db` there,
/// the default configuration), and whether it succeeded, with its stderr.
fn timed_cli(dir: &std::path::Path, args: &[&str]) -> Result<(f64, bool, String), std::io::Error> {
    settle::settle();
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--state", "state.db"])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .output()?;
    let took = start.elapsed().as_secs_f64();
    Ok((
        took,
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `cairn deploy` then `cairn delete` of `body` in a fresh directory
/// (create s, delete s), with the no-op deploy's refusal timed `noops`
/// times in between.
fn cli_round(body: &str, noops: usize) -> Result<(f64, Vec<f64>, f64), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("t.yaml"), body)?;
    let (create, ok, err) = timed_cli(dir.path(), &["deploy", "bench", "t.yaml"])?;
    if !ok {
        return Err(format!("cairn deploy failed: {err}").into());
    }
    let mut refused = Vec::new();
    for _ in 0..noops {
        let (took, ok, err) = timed_cli(dir.path(), &["deploy", "bench", "t.yaml"])?;
        if ok || !err.contains("No updates are to be performed.") {
            return Err(format!("the no-op deploy was not refused: {err}").into());
        }
        refused.push(took);
    }
    let (delete, ok, err) = timed_cli(dir.path(), &["delete", "bench"])?;
    if !ok {
        return Err(format!("cairn delete failed: {err}").into());
    }
    Ok((create, refused, delete))
}

/// The figures issue 53 measured through the CLI, with the defaults a user
/// gets: the 10,000- and 40,000-resource random DAGs created, refused as a
/// no-op update and deleted by `cairn deploy`/`cairn delete` (each a
/// process of its own), and 20 layers × 50 resources of 50 ms.
fn cli() -> Result<(), Box<dyn std::error::Error>> {
    let (create10, mut noops, delete10) = cli_round(&random_dag(10_000), NOOP_ATTEMPTS)?;
    noops.sort_by(f64::total_cmp);
    let noop = noops[noops.len() / 2];
    let (create40, _, delete40) = cli_round(&random_dag(40_000), 0)?;
    let (layered, split) = cli_layered()?;
    println!(
        "cairn CLI, default configuration: 10,000 resources create {create10:.3} s, no-op update refused in {:.0} ms (median of {NOOP_ATTEMPTS}, {:.0}-{:.0} ms) [goal <= 100 ms], delete {delete10:.3} s; 40,000 create {create40:.3} s, delete {delete40:.3} s: {:.2}x / {:.2}x the 10,000 [goal <= 4.4x]; 20 x 50 layers of 50 ms: create {layered:.3} s = {:.3}x the 1.0 s critical path [goal <= 1.05x]",
        noop * 1000.0,
        noops[0] * 1000.0,
        noops[noops.len() - 1] * 1000.0,
        create40 / create10,
        delete40 / delete10,
        layered / 1.0
    );
    println!("cairn CLI, 20 x 50 layers: {split}");
    Ok(())
}

/// The 20 × 50 layers deployed through the CLI, and where the time over
/// the 1.0 s of waits went: before the stack's first event (the process,
/// the state file, the template's read and checks), the events' span
/// over the 20 waits of 50 ms (per layer: the intent's and the outcome's
/// commits, wake-ups), and after the last event (the lease's release,
/// the follower, the process's end). Event timestamps are milliseconds.
fn cli_layered() -> Result<(f64, String), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("t.yaml"), layered(20, 50, 0.05))?;
    // Settled before the clock starts (`timed_cli` settles again: nothing
    // is left to write by then).
    settle::settle();
    let started = jiff::Timestamp::now();
    let (took, ok, err) = timed_cli(dir.path(), &["deploy", "bench", "t.yaml"])?;
    let ended = jiff::Timestamp::now();
    if !ok {
        return Err(format!("cairn deploy failed: {err}").into());
    }
    let stamps: Vec<String> = {
        let db = rusqlite::Connection::open(dir.path().join("state.db"))?;
        let mut q = db.prepare("SELECT timestamp FROM events ORDER BY seq")?;
        let read = q.query_map([], |r| r.get(0))?;
        read.collect::<Result<_, _>>()?
    };
    let (Some(first), Some(last)) = (stamps.first(), stamps.last()) else {
        return Err("the layered stack has no events".into());
    };
    let (first, last): (jiff::Timestamp, jiff::Timestamp) = (first.parse()?, last.parse()?);
    let ms =
        |from: jiff::Timestamp, to: jiff::Timestamp| to.duration_since(from).as_secs_f64() * 1e3;
    let span = ms(first, last);
    let (_, ok, err) = timed_cli(dir.path(), &["delete", "bench"])?;
    if !ok {
        return Err(format!("cairn delete failed: {err}").into());
    }
    Ok((
        took,
        format!(
            "{:.0} ms before the stack's first event, its events span {:.3} s ({:.2} ms a layer over the 50 ms wait), {:.0} ms after its last",
            ms(started, first),
            span / 1e3,
            (span - 1000.0) / 20.0,
            ms(last, ended)
        ),
    ))
}

/// Runs one scenario in this process and prints one line of figures.
fn scenario(name: &str) -> Result<(), Box<dyn std::error::Error>> {
    if name == "cli" {
        return cli();
    }
    if name == "plugins" {
        return plugin_overhead();
    }
    if name == "follow" {
        return follow();
    }
    let dir = tempfile::tempdir()?;
    let mut config = Config::default();
    config.engine.max_concurrency = if name == "layered_wide" { 1000 } else { 64 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        if name == "webhooks" {
            start_handler(&mut config).await?;
        }
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("state.db"))?);
        let process = cairn::wiring::Process::new(&config.webhooks, None);
        let registry = Arc::new(cairn::wiring::assemble(&config, cairn_providers::builtins(&dir.path().join("res")), &process)?);
        let engine = Engine::new(store, registry, config.clone(), process.shared);
        let (body, n) = match name {
            "webhooks" => (custom_dag(1_000), 1_000),
            "layered" => (layered(20, 50, 0.05), 1_000),
            "layered_wide" => (layered(20, 500, 0.05), 10_000),
            dag => {
                let n: usize = dag.trim_start_matches("dag").parse()?;
                (random_dag(n), n)
            }
        };
        let input = CreateStackInput { stack_name: "bench".into(), template_body: body, parameters: BTreeMap::new(), on_failure: OnFailure::Rollback, tags: Vec::new(), timeout_minutes: None, origin: Default::default(), context: Default::default(), capabilities: None, termination_protection: false, stack_policy: None, rollback_configuration: None, notification_arns: Vec::new(), };
        let start = Instant::now();
        let id = engine.creates().start_create(&input).await?;
        let synchronous = start.elapsed().as_secs_f64();
        let status = engine.run(&id).await?;
        let create = start.elapsed().as_secs_f64();
        assert_eq!(status, StackStatus::CreateComplete);
        // A no-op update is refused synchronously: full evaluation of every
        // resource against what is recorded, nothing changes. The machine is
        // noisy, so the median of several attempts is reported.
        let mut noops = Vec::new();
        for _ in 0..NOOP_ATTEMPTS {
            let start = Instant::now();
            let refused = engine
                .updates().start_update(&UpdateStackInput {
                    stack_policy: None,
                    rollback_configuration: None,
                    notification_arns: None,
                    stack_policy_during_update: None,
                    stack_name: "bench".into(),
                    template_body: Some(input.template_body.clone()),
                    parameters: BTreeMap::new(),
                        disable_rollback: false,
                        capabilities: None,
                    tags: None, origin: Default::default(), context: None, upgrade_types: Default::default(), })
                .await;
            noops.push(start.elapsed().as_secs_f64());
            match refused {
                Err(e) if e.to_string() == "No updates are to be performed." => {}
                other => return Err(format!("no-op update was not refused: {other:?}").into()),
            }
        }
        let first = noops[0];
        noops.sort_by(f64::total_cmp);
        let noop = noops[noops.len() / 2];
        let (fastest, slowest) = (noops[0], noops[noops.len() - 1]);
        // What a person reads afterwards: the real binary on the same state.
        let reads = if name.starts_with("dag") {
            read_commands(dir.path())?
        } else {
            Vec::new()
        };
        let start = Instant::now();
        engine.deletes().start_delete("bench", &[]).await?;
        let status = engine.run(&id).await?;
        let delete = start.elapsed().as_secs_f64();
        assert_eq!(status, StackStatus::DeleteComplete);
        if name == "webhooks" {
            println!(
                "{n:>6} custom resources (webhook handler, async PUT): create {create:.3} s, delete {delete:.3} s, no-op update refused in {:.0} ms",
                noop * 1000.0
            );
        } else if name.starts_with("layered") {
            let width = n / 20;
            println!(
                "depth 20 x width {width}, WaitSeconds 0.05, max_concurrency {}: create {create:.3} s = {:.3} x the 1.0 s critical path (delete {delete:.3} s = {:.3} x)",
                config.engine.max_concurrency,
                create / 1.0,
                delete / 1.0
            );
        } else {
            let shown: Vec<String> = reads
                .iter()
                .map(|(c, t)| format!("{c} {:.0} ms", t * 1000.0))
                .collect();
            println!("{n:>6} resources: create {create:.3} s (of which validation {synchronous:.3} s), no-op update refused in {:.0} ms (median of {NOOP_ATTEMPTS}; first {:.0} ms, {:.0}-{:.0} ms), delete {delete:.3} s, peak RSS {:.1} MB; cairn {}", noop * 1000.0, first * 1000.0, fastest * 1000.0, slowest * 1000.0, peak_rss_mb(), shown.join(", "));
            let mut fig = serde_json::json!({"create": create, "delete": delete, "noop": noop, "rss_mb": peak_rss_mb()});
            for (c, t) in &reads {
                fig[*c] = serde_json::json!(t);
            }
            println!("#fig {name} {fig}");
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

/// Every scenario, in the order they run (`only`: those named).
fn scenarios(only: &[String]) -> Vec<&'static str> {
    [
        "dag1000",
        "dag10000",
        "dag40000",
        "dag100000",
        "layered",
        "layered_wide",
        "webhooks",
        "plugins",
        "follow",
        "cli",
    ]
    .into_iter()
    .filter(|s| only.is_empty() || only.iter().any(|o| o == s))
    .collect()
}

/// How the 40,000- and 100,000-resource figures compare with the 10,000
/// ones (linear: 4 and 10).
fn print_scaling(figures: &BTreeMap<String, serde_json::Value>) {
    let Some(base) = figures.get("dag10000") else {
        return;
    };
    for (name, factor) in [("dag40000", 4.0), ("dag100000", 10.0)] {
        let Some(f) = figures.get(name) else {
            continue;
        };
        let ratios: Vec<String> = [
            "create",
            "delete",
            "noop",
            "describe",
            "resources",
            "events",
        ]
        .iter()
        .filter_map(|k| {
            let r = f[*k].as_f64()? / base[*k].as_f64()?;
            Some(format!("{k} {r:.1}x"))
        })
        .collect();
        println!(
            "{name} against dag10000 ({factor}x the resources): {}",
            ratios.join(", ")
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--scenario") {
        return scenario(args.get(i + 1).map(String::as_str).unwrap_or("dag1000"));
    }
    // `cargo test` runs benches with harness = false only when asked; do nothing then.
    if !args.iter().any(|a| a == "--bench") {
        return Ok(());
    }
    // `cargo bench --bench stack_ops -- --only dag10000,dag40000` runs some.
    let only: Vec<String> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|l| l.split(',').map(String::from).collect())
        .unwrap_or_default();
    let exe = std::env::current_exe()?;
    // The state file and Cairn::Test::Resource's files go to the temp dir; on
    // a disk file system creating and removing 10,000 files in one directory
    // costs more than the engine, so the figures are given for both.
    let mut places = vec![("disk", std::env::temp_dir())];
    let shm = std::path::PathBuf::from("/dev/shm");
    if shm.is_dir() {
        places.push(("memory (tmpfs)", shm));
    }
    for (label, dir) in places {
        println!(
            "state file and resource files on {label}: {}",
            dir.display()
        );
        let mut figures: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        for s in scenarios(&only) {
            settle::settle();
            let out = Command::new(&exe)
                .args(["--scenario", s])
                .env("TMPDIR", &dir)
                .stderr(std::process::Stdio::inherit())
                .output()?;
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                match line.strip_prefix("#fig ") {
                    Some(fig) => {
                        if let Some((name, json)) = fig.split_once(' ') {
                            figures.insert(name.into(), serde_json::from_str(json)?);
                        }
                    }
                    None => println!("{line}"),
                }
            }
            if !out.status.success() {
                eprintln!("scenario {s} failed: {}", out.status);
            }
        }
        print_scaling(&figures);
    }
    Ok(())
}
