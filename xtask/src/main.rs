//! `cargo xtask test [ARGS]…`: the README's test command.
//! `cargo xtask layers`: checks that the crates depend one way (CI runs it).
//!
//! A fresh machine has the Rust toolchain and Python, nothing else the tests
//! need. This prepares it, then runs `cargo test --workspace [ARGS]…`:
//! - the `openssl` command (the HTTPS webhook test makes its certificate
//!   with it), installed with apt when missing and we are root;
//! - a Python virtual environment under `target/test-env` with the tests'
//!   packages (boto3 and the aws CLI for `cairn serve`, cfnresponse for the
//!   Python handler example), reinstalled only when a requirements file
//!   changes; its `bin/` goes first on the tests' PATH;
//! - Debian's `chromium` and `chromium-driver` (the console's browser tests
//!   drive it over WebDriver), installed with apt when missing;
//! - PostgreSQL answering on 127.0.0.1:5432 (the store tests make a database
//!   each): the machine's cluster is started with `pg_ctlcluster` when it is
//!   not running, and installed with apt when there is none. With
//!   `CAIRN_TEST_POSTGRES` set, that server is used as it is;
//! - Node.js and npm (Debian's `nodejs` and `npm` when missing), each Node
//!   project the tests run installed with `npm ci` from its lockfile
//!   (again only when the lockfile changes), and the TypeScript SDK and
//!   its example built (`npm run build`).
//!
//! Every step says what it does on stderr and stops with the reason when it
//! cannot be done.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod imports;
mod layers;

/// The requirement files whose packages the tests import, relative to the
/// workspace root.
const REQUIREMENTS: [&str; 2] = [
    "tests/e2e/requirements.txt",
    "examples/python-handler/requirements.txt",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("prepare") => prepare().map(|_| ExitCode::SUCCESS),
        Some("layers") => {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            layers::check(&cargo, &workspace_root()).map(|summary| {
                eprintln!("xtask: layers: {summary}");
                ExitCode::SUCCESS
            })
        }
        _ => Err(
            "usage: cargo xtask test [ARGS]…   prepare the test environment, then run cargo test --workspace [ARGS]…\n       cargo xtask prepare          only prepare it\n       cargo xtask layers           check that the crates depend one way"
                .to_string(),
        ),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    // xtask/ sits in the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The Node projects the tests run, relative to the workspace root: each
/// is installed from its lockfile, and built (`npm run build`) when it
/// says so, in this order (the SDK before what uses it).
const NODE_PROJECTS: [(&str, bool); 3] = [
    ("sdk-typescript", true),
    ("examples/typescript-provider", true),
    ("tests/e2e/node/notes-npm", false),
];

fn test(args: &[String]) -> Result<ExitCode, String> {
    let env = prepare()?;
    let root = workspace_root();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![env.bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(paths).map_err(|e| format!("cannot build PATH: {e}"))?;
    // Everything the tests run, built first in one pass with the tests'
    // features: the plugin libraries and examples the end-to-end tests load
    // exist before any test runs, nothing compiles while timing-sensitive
    // tests run, and `cargo test` then reuses it all.
    eprintln!("xtask: cargo {}", WORKSPACE_BUILD.join(" "));
    run(cargo(&root).args(WORKSPACE_BUILD))?;
    eprintln!(
        "xtask: cargo test --workspace {} (unit tests, then the e2e tests six at a time, then doc tests)",
        args.join(" ")
    );
    // The end-to-end tests mostly wait (on servers, handlers, leases):
    // four at a time on CI's two cores took the suite from 600 s to 325 s
    // (CPU 142 %); six, from 261 s to 224 s (206 s with the scaffolds'
    // dependencies built cold), and 239 s, all passing, with a busy loop
    // holding one of the two cores. The other tests run at two (the crash
    // simulator explores four scenarios at once on threads of its own).
    // Every run selects the whole workspace, so features unify as in the
    // build above and nothing is compiled again. A RUST_TEST_THREADS given
    // wins.
    let threads = std::env::var("RUST_TEST_THREADS").ok();
    let six = threads.clone().unwrap_or_else(|| "6".into());
    let two = threads.unwrap_or_else(|| "2".into());
    let runs: [(&[&str], &str); 3] = [
        (&["test", "--workspace", "--lib", "--bins"], &two),
        (&["test", "--workspace", "--test", "e2e"], &six),
        (&["test", "--workspace", "--doc"], &two),
    ];
    let mut passed = true;
    for (command, threads) in runs {
        let status = cargo(&root)
            .args(command)
            .args(args)
            .env("RUST_TEST_THREADS", threads)
            .env("PATH", &path)
            .env("CAIRN_TEST_PYTHON", env.bin.join("python3"))
            .env("VIRTUAL_ENV", &env.venv)
            .status()
            .map_err(|e| format!("cannot run cargo test: {e}"))?;
        passed &= status.success();
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The build the tests need, as `tests/e2e/support.rs` runs it too: the
/// same units with the same features, so neither rebuilds what the other
/// built.
const WORKSPACE_BUILD: [&str; 6] = [
    "build",
    "--workspace",
    "--lib",
    "--bins",
    "--tests",
    "--examples",
];

/// A `cargo` command in the workspace without the variables `cargo run`
/// set for this program (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, …): build
/// scripts (ring's) list them as inputs, so a nested cargo that sees them
/// rebuilds those crates and everything above them.
fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let per_package = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
        ]
        .iter()
        .any(|p| name.starts_with(p))
            || name == "CARGO_PRIMARY_PACKAGE"
            || name == "OUT_DIR";
        if per_package {
            cmd.env_remove(name.as_ref());
        }
    }
    cmd
}

/// What the tests are given.
struct TestEnv {
    venv: PathBuf,
    bin: PathBuf,
}

fn prepare() -> Result<TestEnv, String> {
    let root = workspace_root();
    ensure_command("openssl", "openssl")?;
    // The PostgreSQL tests make and drop their databases with psql.
    ensure_command("psql", "postgresql-client")?;
    // The web console's browser tests (tests/e2e/browser.rs).
    ensure_command("chromium", "chromium")?;
    ensure_command("chromedriver", "chromium-driver")?;
    if std::env::var_os("CAIRN_TEST_POSTGRES").is_none() {
        ensure_postgres()?;
    }
    prepare_node(&root)?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let venv = target.join("test-env");
    let bin = venv.join("bin");
    let python = bin.join("python3");
    if !python.exists() {
        eprintln!(
            "xtask: creating the tests' Python environment in {}",
            venv.display()
        );
        let made = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        if made.is_err() {
            // Debian's own python3 ships venv separately.
            apt_install("python3-venv")?;
            let _ = std::fs::remove_dir_all(&venv);
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        }
    }
    let mut wanted = String::new();
    for file in REQUIREMENTS {
        let text = std::fs::read_to_string(root.join(file))
            .map_err(|e| format!("cannot read {file}: {e}"))?;
        wanted.push_str(&format!("# {file}\n{text}\n"));
    }
    let stamp = venv.join("installed-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        eprintln!(
            "xtask: installing the tests' Python packages ({})",
            REQUIREMENTS.join(", ")
        );
        let mut pip = Command::new(&python);
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ]);
        for file in REQUIREMENTS {
            pip.arg("-r").arg(root.join(file));
        }
        run(&mut pip)?;
        std::fs::write(&stamp, &wanted)
            .map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    }
    Ok(TestEnv { venv, bin })
}

/// Node and npm, the Node projects' packages (`npm ci` when a lockfile
/// differs from the one last installed), and the TypeScript SDK built.
fn prepare_node(root: &Path) -> Result<(), String> {
    ensure_command("node", "nodejs")?;
    ensure_command("npm", "npm")?;
    for (project, build) in NODE_PROJECTS {
        let dir = root.join(project);
        let lock = std::fs::read_to_string(dir.join("package-lock.json"))
            .map_err(|e| format!("cannot read {project}/package-lock.json: {e}"))?;
        // Inside node_modules: `npm ci` removes it with what it installed.
        let stamp = dir.join("node_modules/.cairn-installed-lock.json");
        if std::fs::read_to_string(&stamp).ok().as_deref() != Some(lock.as_str()) {
            eprintln!("xtask: npm ci in {project}");
            run(Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&dir))?;
            std::fs::write(&stamp, &lock)
                .map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
        }
        if build {
            eprintln!("xtask: npm run build in {project}");
            run(Command::new("npm")
                .args(["run", "build", "--silent"])
                .current_dir(&dir))?;
        }
    }
    Ok(())
}

fn postgres_answers() -> bool {
    Command::new("pg_isready")
        .args(["-q", "-h", "127.0.0.1", "-p", "5432"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Starts the machine's PostgreSQL cluster when it does not answer (and
/// installs PostgreSQL when the machine has none), then waits for it.
fn ensure_postgres() -> Result<(), String> {
    ensure_command("pg_isready", "postgresql-client")?;
    if postgres_answers() {
        return Ok(());
    }
    let versions = || -> Vec<String> {
        std::fs::read_dir("/etc/postgresql")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    if versions().is_empty() {
        apt_install("postgresql")?;
    }
    let Some(version) = versions().into_iter().max() else {
        return Err("PostgreSQL is needed by the store tests and no cluster is configured under /etc/postgresql".into());
    };
    eprintln!("xtask: starting PostgreSQL {version}");
    run(Command::new("pg_ctlcluster").args([
        "--skip-systemctl-redirect",
        &version,
        "main",
        "start",
    ]))?;
    for _ in 0..60 {
        if postgres_answers() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    Err("PostgreSQL was started but does not answer on 127.0.0.1:5432 after 30 s".into())
}

/// Installs `package` with apt when `command` is not on the PATH.
fn ensure_command(command: &str, package: &str) -> Result<(), String> {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {command}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if found {
        return Ok(());
    }
    apt_install(package)
}

fn apt_install(package: &str) -> Result<(), String> {
    eprintln!("xtask: installing {package} with apt-get");
    run(Command::new("apt-get").args(["update", "-qq"]))
        .and_then(|_| {
            run(Command::new("apt-get")
                .args(["install", "-y", "-qq", package])
                .env("DEBIAN_FRONTEND", "noninteractive"))
        })
        .map_err(|e| format!("{package} is needed by the tests and could not be installed ({e}); install it and run again"))
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}
