//! The HOT corpus: every directory under `tests/e2e/hot_corpus/` is a stack
//! written in HOT (with its environments and files) and a `case.json` that
//! says what each step must give. Each case deploys, updates (as many
//! steps as it lists) and deletes through the real binary, and every step
//! is checked exactly: the exit code, the stack's status, its outputs, its
//! resources (logical id → "Type STATUS", group members included) and,
//! for a refused or failed step, an exact line of the error output. After
//! the delete no backing file of a test resource may remain (unless the
//! case retains some).
//!
//! `case.json`:
//! ```json
//! {"covers": "…", "steps": [{"template": "template.yaml", "args": ["-p", "n=1"],
//!   "exit": 0, "status": "CREATE_COMPLETE", "outputs": {"k": "v"},
//!   "resources": {"r": "Cairn::Test::Resource CREATE_COMPLETE"},
//!   "error": "a whole line of stderr"}], "retained": 0}
//! ```
//! In expected outputs and statuses `*` matches any text and `?` any one
//! character (physical ids and random strings). An output Heat reports
//! with an `output_error` is expected as `"output_error: <the error>"`, one
//! with no value (its condition is false) as `"(null)"`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::support::Scratch;

const STACK: &str = "corpus";

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/hot_corpus")
}

/// `*` any text, `?` one character, everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Positions of the last `*` and the text index it was tried at.
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn text_map(list: &Value, key: &str, value: impl Fn(&Value) -> String) -> Map<String, Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e[key].as_str().unwrap_or_default().to_string(),
                Value::String(value(e)),
            )
        })
        .collect()
}

/// Compares an expected map (values may be globs) with the actual one.
fn same_map(what: &str, expected: &Value, actual: &Map<String, Value>) -> Result<(), String> {
    let Some(expected) = expected.as_object() else {
        return Err(format!("{what}: the case's expectation must be a map"));
    };
    let keys = |m: &Map<String, Value>| {
        let mut k = m.keys().cloned().collect::<Vec<_>>();
        k.sort();
        k
    };
    if keys(expected) != keys(actual) {
        return Err(format!(
            "{what}: expected keys {:?}, got {}",
            keys(expected),
            Value::Object(actual.clone())
        ));
    }
    for (k, want) in expected {
        let got = actual[k].as_str().unwrap_or_default();
        if !glob(want.as_str().unwrap_or_default(), got) {
            return Err(format!("{what} {k}: expected {want}, got {got:?}"));
        }
    }
    Ok(())
}

fn run_step(s: &Scratch, n: usize, step: &Value) -> Result<(), String> {
    let template = step["template"].as_str().unwrap_or("template.yaml");
    let mut args = vec!["deploy", STACK, template];
    let extra: Vec<&str> = step["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    args.extend(extra);
    let run = s.cairn(&args);
    let at = format!("step {n} (cairn {})", args.join(" "));
    let want_exit = step["exit"].as_i64().unwrap_or(0) as i32;
    if run.code() != want_exit {
        return Err(format!(
            "{at}: exit {} instead of {want_exit}: {}",
            run.code(),
            run.stderr()
        ));
    }
    if let Some(line) = step["error"].as_str() {
        let stderr = run.stderr();
        if !stderr.lines().any(|l| glob(line, l.trim_end())) {
            return Err(format!("{at}: no line {line:?} in:\n{stderr}"));
        }
    }
    if let Some(status) = step["status"].as_str() {
        let d = s.cairn(&["describe", STACK, "--output", "json"]).json();
        let got = d["Stacks"][0]["StackStatus"].as_str().unwrap_or_default();
        if !glob(status, got) {
            return Err(format!("{at}: stack status {got}, expected {status}"));
        }
    }
    if !step["outputs"].is_null() {
        let o = s.cairn(&["outputs", STACK, "--output", "json"]).json();
        let actual = text_map(&o["Outputs"], "OutputKey", |e| {
            match e["OutputError"].as_str() {
                Some(error) => format!("output_error: {error}"),
                // Heat shows an output with no value as None (JSON null).
                None if e["OutputValue"].is_null() => "(null)".to_string(),
                None => e["OutputValue"].as_str().unwrap_or_default().to_string(),
            }
        });
        same_map(&format!("{at}: output"), &step["outputs"], &actual)?;
    }
    if !step["resources"].is_null() {
        let r = s.cairn(&["resources", STACK, "--output", "json"]).json();
        let actual = text_map(&r["StackResources"], "LogicalResourceId", |e| {
            format!(
                "{} {}",
                e["ResourceType"].as_str().unwrap_or_default(),
                e["ResourceStatus"].as_str().unwrap_or_default()
            )
        });
        same_map(&format!("{at}: resource"), &step["resources"], &actual)?;
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn run_case(dir: &Path) -> Result<(), String> {
    let s = Scratch::new();
    copy_tree(dir, s.dir.path()).map_err(|e| format!("copying the case: {e}"))?;
    let case: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("case.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("case.json: {e}"))?;
    let steps = case["steps"].as_array().cloned().unwrap_or_default();
    if steps.is_empty() {
        return Err("case.json has no steps".into());
    }
    for (i, step) in steps.iter().enumerate() {
        run_step(&s, i + 1, step)?;
    }
    let exists = s.cairn(&["describe", STACK, "--output", "json"]).code() == 0;
    if exists {
        let run = s.cairn(&["delete", STACK]);
        if run.code() != 0 {
            return Err(format!("delete: exit {}: {}", run.code(), run.stderr()));
        }
        let list = s.cairn(&["list", "--output", "json"]).json();
        let status = &list["StackSummaries"][0]["StackStatus"];
        if status != "DELETE_COMPLETE" {
            return Err(format!("delete: the stack is {status}"));
        }
    }
    let retained = case["retained"].as_u64().unwrap_or(0) as usize;
    let left = s.resource_files();
    if left.len() != retained {
        return Err(format!(
            "after the delete {} backing files remain ({left:?}); the case retains {retained}",
            left.len()
        ));
    }
    Ok(())
}

#[test]
fn glob_matches_as_documented() {
    assert!(glob("corpus-a-*", "corpus-a-x1y2"));
    assert!(glob("???", "abc"));
    assert!(!glob("???", "abcd"));
    assert!(glob("*-*-z", "a-b-c-z"));
    assert!(!glob("a*b", "a-c"));
    assert!(glob("exact", "exact"));
}

#[test]
fn the_hot_corpus_deploys_updates_and_deletes() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/e2e/hot_corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("case.json").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 30, "the corpus has {} cases", cases.len());
    // Cases are independent (a scratch directory each): four at a time.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<PathBuf>> = (0..4)
            .map(|k| cases.iter().skip(k).step_by(4).cloned().collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|dir| {
                            let name = dir.file_name()?.to_string_lossy().into_owned();
                            run_case(dir).err().map(|e| format!("{name}: {e}"))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| vec!["a case panicked".into()]))
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
