//! Hostile templates: alias bombs, nesting deep enough to overflow a stack,
//! intrinsics whose output would be gigabytes. Each is refused with a clear
//! `Template format error` or `Template error`, in bounded time and memory,
//! by the CLI and by `cairn serve` (which stays up).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::Scratch;

/// What a finished child used: exit code (or -signal) and peak RSS in KiB.
struct Finished {
    code: i32,
    peak_kib: i64,
    stderr: String,
}

#[allow(clippy::zombie_processes)]
/// Runs `cairn args` in `s`, killing it after `limit`, and reads its peak
/// memory from wait4 (its own rusage, not other tests' children).
fn run_measured(s: &Scratch, args: &[&str], limit: Duration) -> Finished {
    let err_path = s.dir.path().join("stderr.txt");
    let err_file = std::fs::File::create(&err_path).expect("stderr file");
    let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .current_dir(s.dir.path())
        .env_remove("CAIRN_CONFIG")
        .env_remove("CAIRN_STATE")
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .expect("cairn starts");
    // Reaped below with wait4, which also reports its peak memory.
    let pid = child.id() as libc::pid_t;
    std::mem::forget(child);
    let started = Instant::now();
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: plain wait4 on our own child with valid out-pointers.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if done == pid {
            break (status, usage);
        }
        if started.elapsed() > limit {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    };
    Finished {
        code,
        peak_kib: usage.ru_maxrss,
        stderr: std::fs::read_to_string(err_path).unwrap_or_default(),
    }
}

/// Nine levels of ten aliases each: 10^9 nodes if expanded.
fn alias_bomb() -> String {
    let mut t = String::from("AWSTemplateFormatVersion: '2010-09-09'\nMetadata:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=9 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 10].join(", ");
        t.push_str(&format!("  a{level}: &a{level} [{items}]\n"));
    }
    t.push_str("Resources:\n  A: {Type: Cairn::Test::Resource}\n");
    t
}

#[test]
fn an_alias_bomb_is_refused_in_bounded_memory() {
    let s = Scratch::new();
    let bomb = alias_bomb();
    assert!(bomb.len() < 1500, "{}", bomb.len());
    s.write("bomb.yaml", &bomb);
    for command in ["validate", "deploy"] {
        let args: Vec<&str> = match command {
            "validate" => vec!["validate", "bomb.yaml"],
            _ => vec!["deploy", "b", "bomb.yaml"],
        };
        let f = run_measured(&s, &args, Duration::from_secs(20));
        assert_eq!(f.code, 1, "{}", f.stderr);
        assert!(
            f.stderr.contains("Template format error: YAML aliases expand to more than 1000000 nodes and characters"),
            "{}",
            f.stderr
        );
        assert!(f.peak_kib < 200 * 1024, "peak RSS {} KiB", f.peak_kib);
    }
    // Its cousins: an alias of a huge scalar repeated, and aliases inside an
    // intrinsic.
    let big = "x".repeat(200_000);
    s.write(
        "scalar.yaml",
        &format!(
            "Metadata:\n  s: &s \"{big}\"\n  l: [{}]\nResources:\n  A: {{Type: Cairn::Test::Resource}}\n",
            vec!["*s"; 20].join(", ")
        ),
    );
    let f = run_measured(&s, &["validate", "scalar.yaml"], Duration::from_secs(20));
    assert_eq!(f.code, 1, "{}", f.stderr);
    assert!(
        f.stderr.contains("YAML aliases expand to more than 20"),
        "{}",
        f.stderr
    );
    let mut t = alias_bomb().replace("Resources:\n  A: {Type: Cairn::Test::Resource}\n", "");
    t.push_str("Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value: !Join [',', *a9]\n");
    s.write("intrinsic.yaml", &t);
    let f = run_measured(&s, &["validate", "intrinsic.yaml"], Duration::from_secs(20));
    assert_eq!(f.code, 1, "{}", f.stderr);
    assert!(f.stderr.contains("YAML aliases expand"), "{}", f.stderr);
    assert!(f.peak_kib < 200 * 1024, "peak RSS {} KiB", f.peak_kib);
}

#[test]
fn block_yaml_nested_past_the_limit_is_refused_without_a_crash() {
    let s = Scratch::new();
    let deep = format!(
        "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value:\n        {}x\n",
        "- ".repeat(30_000)
    );
    s.write("deep.yaml", &deep);
    for args in [
        &["validate", "deep.yaml"][..],
        &["deploy", "d", "deep.yaml"],
    ] {
        let f = run_measured(&s, args, Duration::from_secs(20));
        assert_eq!(f.code, 1, "cairn {args:?}: {}", f.stderr);
        assert!(
            f.stderr.contains("Template format error: the template nests collections more than 128 levels deep; flatten it"),
            "{}",
            f.stderr
        );
    }
    // Nesting through an alias counts too.
    let t = format!(
        "Metadata:\n  d: &d\n    {}x\n  e:\n    {}*d\nResources:\n  A: {{Type: Cairn::Test::Resource}}\n",
        "- ".repeat(100),
        "- ".repeat(100)
    );
    s.write("aliased.yaml", &t);
    let f = run_measured(&s, &["validate", "aliased.yaml"], Duration::from_secs(20));
    assert_eq!(f.code, 1, "{}", f.stderr);
    assert!(
        f.stderr.contains("more than 128 levels deep"),
        "{}",
        f.stderr
    );
    // 128 levels are fine.
    let t = format!(
        "Metadata:\n  d:\n    {}x\nResources:\n  A: {{Type: Cairn::Test::Resource}}\n",
        "- ".repeat(126)
    );
    s.write("ok.yaml", &t);
    let f = run_measured(&s, &["validate", "ok.yaml"], Duration::from_secs(20));
    assert_eq!(f.code, 0, "{}", f.stderr);
}

#[test]
fn an_intrinsic_whose_value_would_be_gigabytes_is_refused_before_anything_runs() {
    let s = Scratch::new();
    let items = vec!["a"; 2000].join(", ");
    let t = format!(
        "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value: !Join ['{}', [{items}]]\n",
        "A".repeat(1_000_000)
    );
    s.write("join.yaml", &t);
    let f = run_measured(&s, &["deploy", "j", "join.yaml"], Duration::from_secs(30));
    assert_eq!(f.code, 1, "{}", f.stderr);
    assert!(
        f.stderr.contains("Template error: Fn::Join would produce a value of 1999002000 bytes; the limit is 1048576 bytes (1 MiB)"),
        "{}",
        f.stderr
    );
    assert!(f.peak_kib < 300 * 1024, "peak RSS {} KiB", f.peak_kib);
    // Refused before anything was recorded: no stack exists, and every
    // command works on the state file.
    let r = s.cairn(&["list", "--output", "json"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.json()["StackSummaries"], serde_json::json!([]));
    let r = s.cairn(&["describe", "j"]);
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr().contains("Stack with id j does not exist"),
        "{}",
        r.stderr()
    );
    let r = s.cairn(&["delete", "j"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    // A long unterminated Fn::Sub is quoted in part.
    let long = "x".repeat(100_000);
    s.write(
        "sub.yaml",
        &format!(
            "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value: !Sub '${{{long}'\n"
        ),
    );
    let r = s.cairn(&["deploy", "sub", "sub.yaml"]);
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr().contains("… (100002 characters)"),
        "{}",
        r.stderr()
    );
    assert!(r.stderr().len() < 2000, "{}", r.stderr().len());
}
