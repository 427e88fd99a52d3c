//! `cairn provider new` for each path (Rust plugin, Rust webhook, Python
//! webhook, TypeScript webhook): the README it writes is run step by step, exactly, in a shell
//! whose `cairn` is the binary under test: build, `cairn provider test`
//! (every test passes), deploy of the sample template, delete; then its
//! registry steps: package, register, deploy and delete again.

use std::path::Path;
use std::process::Command;

use crate::support::Scratch;

/// The commands of the project README's `n`th `sh` block (from 1).
fn readme_steps(project: &Path, n: usize) -> Vec<String> {
    let readme = std::fs::read_to_string(project.join("README.md")).expect("README.md");
    readme
        .split("```sh\n")
        .nth(n)
        .and_then(|rest| rest.split("```").next())
        .map(|block| block.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Writes the project with `args`, runs its README's steps, and checks
/// every step held. The SDKs are the checkout's, given by path.
fn new_build_test_deploy(name: &str, args: &[&str], expected_steps: usize) {
    let repo = env!("CARGO_MANIFEST_DIR");
    let sdk = format!("{repo}/sdk");
    let python_sdk = format!("{repo}/sdk-python");
    let typescript_sdk = format!("{repo}/sdk-typescript");
    let mut all = args.to_vec();
    all.extend_from_slice(&[
        "--sdk-path",
        &sdk,
        "--python-sdk",
        &python_sdk,
        "--typescript-sdk",
        &typescript_sdk,
    ]);
    new_project_runs(name, &all, expected_steps);
}

/// [`new_build_test_deploy`] with no SDK path: the project holds the SDK
/// the binary was built with (written into it), and names no path of the
/// checkout the binary was built in.
fn new_with_its_own_sdk(name: &str, args: &[&str], sdk_dir: &str) {
    let steps = if args.contains(&"dylib") { 4 } else { 5 };
    let (_scratch, project) = new_project_runs(name, args, steps);
    assert!(
        project.join(sdk_dir).is_dir(),
        "no {sdk_dir} in the project"
    );
    let repo = env!("CARGO_MANIFEST_DIR");
    for file in [
        "Cargo.toml",
        "requirements.txt",
        "package.json",
        "package-lock.json",
        "README.md",
    ] {
        let text = std::fs::read_to_string(project.join(file)).unwrap_or_default();
        assert!(
            !text.contains(repo),
            "{file} names the checkout {repo}:\n{text}"
        );
    }
}

/// Writes the project with `args`, runs its README's steps, checks every
/// step held, and returns the project's directory with the scratch
/// directory that holds it.
fn new_project_runs(
    name: &str,
    args: &[&str],
    expected_steps: usize,
) -> (Scratch, std::path::PathBuf) {
    let s = Scratch::new();
    let port = free_port().to_string();
    let mut all = vec!["provider", "new", name];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--port", &port]);
    let run = s.cairn(&all);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        run.stdout().trim_end(),
        format!("wrote {name}: see its README.md for the commands that build, test and deploy it")
    );
    let project = s.dir.path().join(name);
    let steps = readme_steps(&project, 1);
    assert_eq!(steps.len(), expected_steps, "{steps:?}");
    let registry_steps = readme_steps(&project, 2);
    assert!(
        registry_steps
            .iter()
            .any(|l| l.starts_with("cairn --state registry.db type register ")),
        "{registry_steps:?}"
    );
    assert!(
        steps.iter().any(|l| l.starts_with("cairn provider test ")),
        "{steps:?}"
    );
    let (stdout, stderr) = run_steps(&project, &[steps, registry_steps].concat());
    for (line, times) in [
        ("13 passed, 0 failed, 0 skipped", 1),
        // Loaded from cairn.toml, then registered.
        ("stack demo is CREATE_COMPLETE", 2),
        ("stack demo is DELETE_COMPLETE", 2),
    ] {
        assert_eq!(
            stdout.lines().filter(|l| *l == line).count(),
            times,
            "{line:?} in:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("registration ") && l.ends_with(" version 00000001")),
        "no registration in:\n{stdout}\n{stderr}"
    );
    // The note the stack made is gone with it, and the tests left nothing.
    let left: Vec<_> = std::fs::read_dir(project.join("notes"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    (s, project)
}

/// Runs `steps` in `project` as a person would, in a shell whose `cairn`
/// is the binary under test (a handler started with `&` is stopped at the
/// end); panics when one fails. What they printed.
fn run_steps(project: &Path, steps: &[String]) -> (String, String) {
    // The Rust projects build into one shared directory (their `target`
    // is a link to it): the second one reuses the first one's compiled
    // dependencies instead of building serde, tokio and the SDK again on
    // CI's two cores. Cargo's lock on that directory orders the builds.
    if project.join("Cargo.toml").exists() {
        let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target");
        std::fs::create_dir_all(&shared).expect("the shared target directory");
        std::os::unix::fs::symlink(&shared, project.join("target")).expect("link target");
    }
    let cairn_dir = Path::new(env!("CARGO_BIN_EXE_cairn"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        cairn_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The steps as a person runs them; a handler started with `&` is
    // stopped at the end.
    let script = format!(
        "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{}\n",
        steps.join("\n")
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(project)
        .env("PATH", path)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CAIRN_CONFIG")
        .env_remove("CAIRN_STATE")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn a_new_rust_plugin_with_the_sdk_it_carries_builds_passes_the_kit_and_deploys() {
    new_with_its_own_sdk(
        "own-rust-notes",
        &["--lang", "rust", "--transport", "dylib"],
        "cairn-sdk",
    );
}

#[test]
fn a_new_python_webhook_with_the_sdk_it_carries_installs_passes_the_kit_and_deploys() {
    new_with_its_own_sdk("own-py-notes", &["--lang", "python"], "cairn-provider");
}

#[test]
fn a_new_typescript_webhook_with_the_sdk_it_carries_builds_passes_the_kit_and_deploys() {
    new_with_its_own_sdk("own-ts-notes", &["--lang", "typescript"], "cairn-provider");
}

#[test]
fn a_new_rust_plugin_builds_passes_the_kit_and_deploys() {
    new_build_test_deploy("rust-notes", &["--lang", "rust", "--transport", "dylib"], 4);
}

#[test]
fn a_new_rust_webhook_builds_passes_the_kit_and_deploys() {
    new_build_test_deploy(
        "hook-notes",
        &["--lang", "rust", "--transport", "webhook"],
        5,
    );
}

#[test]
fn a_new_python_webhook_installs_passes_the_kit_and_deploys() {
    new_build_test_deploy("py-notes", &["--lang", "python"], 5);
}

/// The TypeScript SDK is built by `cargo xtask test` (not on npm yet):
/// the project's steps are its own five.
#[test]
fn a_new_typescript_webhook_builds_passes_the_kit_and_deploys() {
    new_build_test_deploy("ts-notes", &["--lang", "typescript"], 5);
}

#[test]
fn provider_new_refuses_what_it_cannot_make() {
    let s = Scratch::new();
    let run = s.cairn(&["provider", "new", "Bad Name", "--lang", "python"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        "error: provider name \"Bad Name\" must start with a lowercase letter and hold only lowercase letters, digits, '-' and '_' (it names the crate or package)"
    );
    let run = s.cairn(&["provider", "new", "x", "--lang", "rust"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        "error: a Rust provider is a plugin or a webhook handler: give --transport dylib or --transport webhook"
    );
    let run = s.cairn(&[
        "provider",
        "new",
        "x",
        "--lang",
        "python",
        "--transport",
        "dylib",
    ]);
    assert_eq!(run.code(), 1);
    let run = s.cairn(&["provider", "new", "x", "--kind", "hook", "--lang", "python"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .starts_with("error: a Python or TypeScript hook is a Lambda hook function"),
        "{}",
        run.stderr()
    );
    std::fs::create_dir(s.dir.path().join("x")).expect("mkdir x");
    let run = s.cairn(&["provider", "new", "x", "--lang", "python"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        "error: x already exists; give another NAME or --dir"
    );
}

/// A hook project: its README builds it, runs the kit's hook tests, then
/// packages, registers, turns on the hook and deploys a stack it lets
/// through and one it refuses.
#[test]
fn a_new_rust_hook_builds_passes_the_kit_and_judges_once_registered() {
    let s = Scratch::new();
    let sdk = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk");
    let run = s.cairn(&[
        "provider",
        "new",
        "file-rules",
        "--kind",
        "hook",
        "--lang",
        "rust",
        "--sdk-path",
        sdk,
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let project = s.dir.path().join("file-rules");
    let steps = readme_steps(&project, 1);
    assert_eq!(
        steps,
        [
            "cargo build                       # build",
            "cairn provider test --plugin target/debug/libfile_rules.so   # the contract tests",
        ]
    );
    let registry_steps = readme_steps(&project, 2);
    let (stdout, stderr) = run_steps(&project, &[steps, registry_steps].concat());
    for (line, times) in [
        ("6 passed, 0 failed, 0 skipped", 1),
        ("stack demo is CREATE_COMPLETE", 1),
        ("open: refused by the hook", 1),
        ("stack demo is DELETE_COMPLETE", 1),
    ] {
        assert_eq!(
            stdout.lines().filter(|l| *l == line).count(),
            times,
            "{line:?} in:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        stderr.contains("every Cairn::Local::File must have Mode 0600, not 0644"),
        "{stderr}"
    );
    assert!(!project.join("open.txt").exists());
    assert!(!project.join("kept.txt").exists());
}
