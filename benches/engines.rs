//! Several engines on PostgreSQL: prints figures, asserts nothing.
//!
//! `cargo bench --bench engines` (PostgreSQL at `CAIRN_TEST_POSTGRES`, else
//! postgres://postgres@127.0.0.1:5432/postgres; `cargo xtask prepare`
//! starts it; each scenario gets a database of its own, dropped after):
//! - `store`: a random DAG of 10,000 `Cairn::Test::Resource` created and
//!   deleted by one in-process engine on a SQLite file and on PostgreSQL,
//!   in the same run, and the ratio (target: PostgreSQL within 2×);
//! - `throughput`: 100 stacks of 50 resources whose provider waits 50 ms
//!   per call (`WaitSeconds: 0.05`), started round-robin through the Query
//!   API of 1 and then 3 `cairn serve` engines, each with `max_operations =
//!   4` and `max_concurrency = 16`; stacks per second and the ratio
//!   (target: 3 engines ≥ 2× one);
//! - `takeover`: an engine running an operation is killed with SIGKILL; the
//!   time until another engine has taken it over (its `/metrics`
//!   `cairn_takeovers_total`), against `lease_seconds` + 3 s.

use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_core::store::Store;
use cairn_store_postgres::PgStore;
use cairn_store_sqlite::SqliteStore;

mod support;
use support::Error;

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A database of its own on the benchmark's PostgreSQL, dropped after.
struct Database {
    url: String,
    name: String,
    server: String,
}

impl Database {
    fn new() -> Result<Database, Error> {
        let server = std::env::var("CAIRN_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let name = format!(
            "cairn_bench_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        psql(
            &server,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        )?;
        psql(&server, &format!("CREATE DATABASE {name}"))?;
        let prefix = server.rsplit_once('/').map(|(p, _)| p).unwrap_or(&server);
        Ok(Database {
            url: format!("{prefix}/{name}"),
            name,
            server,
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = psql(
            &self.server,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

fn psql(server: &str, sql: &str) -> Result<(), Error> {
    let out = Command::new("psql").args([server, "-qAtc", sql]).output()?;
    if !out.status.success() {
        return Err(format!(
            "psql {sql}: {} (run `cargo xtask prepare` to start PostgreSQL)",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

/// Creates and deletes the 10,000-resource DAG on `store`: (create s,
/// delete s); prints this process's CPU time by thread under `label` (a
/// PostgreSQL server's own is in its processes, not counted).
async fn create_delete(
    label: &str,
    store: Arc<dyn Store>,
    data: &std::path::Path,
) -> Result<(f64, f64), Error> {
    let template = support::random_dag(10_000, "Cairn::Test::Resource", "Value");
    let (create, delete) = support::create_and_delete(store, data, template).await?;
    println!(
        "10,000 resources on {label}, CPU ms by thread: create {}; delete {}",
        create.cpu_line(),
        delete.cpu_line()
    );
    Ok((create.secs, delete.secs))
}

fn store_scenario() -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // The SQLite file on disk, as PostgreSQL's data; the test
        // resources' files in memory when /dev/shm exists, since creating
        // and removing 10,000 files in a directory of a disk file system
        // costs more than either store, and after one run the next pays for
        // the kernel's scan of recently deleted inodes.
        let dir = tempfile::tempdir()?;
        let shm = std::path::Path::new("/dev/shm");
        let files = if shm.is_dir() {
            tempfile::tempdir_in(shm)?
        } else {
            tempfile::tempdir()?
        };
        let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("state.db"))?);
        let (sc, sd) = create_delete("SQLite", sqlite, &files.path().join("sqlite-res")).await?;
        let db = Database::new()?;
        let plain = format!("{}?sslmode=disable", db.url);
        let pg: Arc<dyn Store> = Arc::new(PgStore::connect(&plain).await?);
        let (pc, pd) = create_delete("PostgreSQL", pg, &files.path().join("pg-res")).await?;
        let db = Database::new()?;
        let tls = format!("{}?sslmode=require", db.url);
        let pg: Arc<dyn Store> = Arc::new(PgStore::connect(&tls).await?);
        let (tc, td) = create_delete("PostgreSQL over TLS", pg, &files.path().join("pg-tls-res")).await?;
        println!(
            "10,000 resources: SQLite create {sc:.2} s, delete {sd:.2} s; PostgreSQL create {pc:.2} s ({:.2}x), delete {pd:.2} s ({:.2}x) [target <= 2x]; PostgreSQL over TLS create {tc:.2} s ({:.2}x), delete {td:.2} s ({:.2}x)",
            pc / sc,
            pd / sd,
            tc / sc,
            td / sd
        );
        Ok(())
    })
}

/// A `cairn serve` engine of the release build.
struct Served {
    child: Child,
    addr: String,
}

impl Served {
    fn start(dir: &std::path::Path) -> Result<Served, Error> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--config", "cairn.toml", "serve", "--listen", "127.0.0.1:0"])
            .current_dir(dir)
            .env_remove("CAIRN_CONFIG")
            .env_remove("CAIRN_STATE")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let mut reader = std::io::BufReader::new(out);
            reader.read_line(&mut line)?;
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        }
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .ok_or_else(|| format!("the engine did not start: {line:?}"))?
            .to_string();
        Ok(Served { child, addr })
    }

    fn post(&self, form: &str) -> Result<String, Error> {
        let mut conn = std::net::TcpStream::connect(&self.addr)?;
        conn.set_read_timeout(Some(Duration::from_secs(60)))?;
        write!(
            conn,
            "POST / HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
            self.addr,
            form.len()
        )?;
        let mut out = String::new();
        conn.read_to_string(&mut out)?;
        Ok(out)
    }

    fn get(&self, path: &str) -> Result<String, Error> {
        let mut conn = std::net::TcpStream::connect(&self.addr)?;
        write!(
            conn,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )?;
        let mut out = String::new();
        conn.read_to_string(&mut out)?;
        Ok(out)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A scratch directory whose cairn.toml puts the state in `db` (and the
/// test resources' files in memory when /dev/shm exists, as in `store`).
fn served_dir(db: &Database, extra: &str) -> Result<tempfile::TempDir, Error> {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)?
    } else {
        tempfile::tempdir()?
    };
    std::fs::write(
        dir.path().join("cairn.toml"),
        format!(
            "[engine]\nstate = \"{}\"\ndata_dir = \"data\"\n{extra}\n[server]\nauth = \"none\"\n",
            db.url
        ),
    )?;
    Ok(dir)
}

/// Seconds to run 100 stacks of 50 slow resources on `engines` engines.
fn throughput(engines: usize) -> Result<f64, Error> {
    let db = Database::new()?;
    // Each engine bounded by its provider's waits, as the scenario means
    // (16 calls at once per operation: the default before it became 64,
    // with which one engine's four operations keep all 200 calls in
    // flight and the two cores, not the waits, bound it).
    let dir = served_dir(&db, "max_operations = 4\nmax_concurrency = 16")?;
    let served: Vec<Served> = (0..engines)
        .map(|_| Served::start(dir.path()))
        .collect::<Result<_, _>>()?;
    let mut t = String::from("Resources:\n");
    for i in 0..50 {
        t.push_str(&format!(
            "  R{i}: {{Type: Cairn::Test::Resource, Properties: {{WaitSeconds: 0.05}}}}\n"
        ));
    }
    let body = urlencode(&t);
    let start = Instant::now();
    std::thread::scope(|scope| -> Result<(), Error> {
        let mut sent = Vec::new();
        for i in 0..100 {
            let engine = &served[i % engines];
            let body = &body;
            sent.push(scope.spawn(move || {
                engine
                    .post(&format!(
                        "Action=CreateStack&StackName=s{i}&TemplateBody={body}"
                    ))
                    .map_err(|e| e.to_string())
            }));
        }
        for s in sent {
            let answer = s.join().map_err(|_| "a request thread panicked")??;
            if !answer.contains("<StackId>") {
                return Err(format!("CreateStack refused: {answer}").into());
            }
        }
        Ok(())
    })?;
    loop {
        let page = served[0].post("Action=ListStacks")?;
        let done = page
            .matches("<StackStatus>CREATE_COMPLETE</StackStatus>")
            .count();
        if done == 100 {
            break;
        }
        if page.contains("FAILED") || page.contains("ROLLBACK") {
            return Err(format!("a stack failed: {page}").into());
        }
        if start.elapsed() > Duration::from_secs(600) {
            return Err("not done after 10 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(start.elapsed().as_secs_f64())
}

fn throughput_scenario() -> Result<(), Error> {
    let one = throughput(1)?;
    let three = throughput(3)?;
    println!(
        "100 stacks x 50 resources (50 ms per provider call, max_operations = 4 and max_concurrency = 16 per engine): 1 engine {one:.1} s ({:.1} stacks/s), 3 engines {three:.1} s ({:.1} stacks/s): {:.2}x [target >= 2x]",
        100.0 / one,
        100.0 / three,
        one / three
    );
    Ok(())
}

fn takeover_scenario() -> Result<(), Error> {
    let db = Database::new()?;
    let lease = 15;
    let dir = served_dir(&db, &format!("lease_seconds = {lease}"))?;
    let mut first = Served::start(dir.path())?;
    let second = Served::start(dir.path())?;
    let t = "Resources:\n  Slow: {Type: Cairn::Test::Resource, Properties: {WaitSeconds: 60}}\n";
    let answer = first.post(&format!(
        "Action=CreateStack&StackName=taken&TemplateBody={}",
        urlencode(t)
    ))?;
    if !answer.contains("<StackId>") {
        return Err(format!("CreateStack refused: {answer}").into());
    }
    // Its one resource's create is in flight on the first engine.
    while !first
        .post("Action=DescribeStackEvents&StackName=taken")?
        .contains("Resource creation Initiated")
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    first.child.kill()?;
    let killed = Instant::now();
    let _ = first.child.wait();
    loop {
        let metrics = second.get("/metrics")?;
        if metrics.contains("\ncairn_takeovers_total 1\n") {
            break;
        }
        if killed.elapsed() > Duration::from_secs(lease + 60) {
            return Err("no takeover within lease_seconds + 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = killed.elapsed().as_secs_f64();
    println!(
        "takeover after SIGKILL: {took:.2} s with lease_seconds = {lease} [target <= {} s]",
        lease + 3
    );
    Ok(())
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test` runs benches with harness = false only when asked; do nothing then.
    if !args.iter().any(|a| a == "--bench") {
        return Ok(());
    }
    let only = args
        .iter()
        .position(|a| a == "--scenario")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if run("store") {
        store_scenario()?;
    }
    if run("throughput") {
        throughput_scenario()?;
    }
    if run("takeover") {
        takeover_scenario()?;
    }
    Ok(())
}
