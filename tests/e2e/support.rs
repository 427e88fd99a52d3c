//! Helpers to run the real binary in a scratch directory.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The Python the tests run handlers and clients with: the one in the venv
/// `cargo xtask test` prepares (`CAIRN_TEST_PYTHON`), else `python3`.
pub fn python() -> Command {
    Command::new(std::env::var_os("CAIRN_TEST_PYTHON").unwrap_or_else(|| "python3".into()))
}

/// A `python()` that can import `module`, or a panic saying how to get one.
pub fn python_with(module: &str) -> Command {
    let check = python()
        .args(["-c", &format!("import {module}")])
        .output()
        .expect("python3 runs");
    assert!(
        check.status.success(),
        "this test needs the Python module {module}: run the tests with `cargo xtask test`, which installs the tests' packages in target/test-env"
    );
    python()
}

/// The backing files (`<physical id>.json`, sorted) of `Cairn::Test::Resource`
/// under a data directory: the provider keeps them in shard directories.
pub fn backing_files_in(data_dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir.join("test-resources"))
        .into_iter()
        .flatten()
        .filter_map(|shard| shard.ok())
        .flat_map(|shard| std::fs::read_dir(shard.path()).into_iter().flatten())
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// Where `Cairn::Test::Resource` keeps `physical`'s record under a data
/// directory.
pub fn backing_file(data_dir: &std::path::Path, physical: &str) -> PathBuf {
    data_dir
        .join("test-resources")
        .join(cairn_providers::test_resource::shard(physical))
        .join(format!("{physical}.json"))
}

pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write file");
        p
    }

    /// The backing files of `Cairn::Test::Resource` under the default state file,
    /// sorted: one per physical resource.
    pub fn resource_files(&self) -> Vec<String> {
        backing_files_in(&self.dir.path().join("cairn-state.db.resources"))
    }

    /// Edits the backing file of the `Cairn::Test::Resource` `physical` (a
    /// change made behind Cairn's back: drift, an unhealthy mark).
    pub fn edit_backing_file(&self, physical: &str, change: impl FnOnce(&mut serde_json::Value)) {
        let path = backing_file(&self.dir.path().join("cairn-state.db.resources"), physical);
        let mut record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("backing file"))
                .expect("JSON");
        change(&mut record);
        std::fs::write(&path, record.to_string()).expect("write backing file");
    }

    /// Runs `cairn` with `args` in the scratch directory, with no config from the
    /// environment leaking in.
    pub fn cairn(&self, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("CAIRN_CONFIG")
            .env_remove("CAIRN_STATE")
            .output()
            .expect("run cairn");
        Run(out)
    }
}

impl Scratch {
    /// Starts `cairn` with `args` in the background (output discarded), for
    /// tests that act while it runs (kill it, cancel it, sample files).
    /// Its stderr goes to `spawned-<n>.stderr` in the scratch dir
    /// ([`Scratch::spawned_stderr`] reads them back for a failure message).
    pub fn spawn_cairn(&self, args: &[&str]) -> std::process::Child {
        let n = std::fs::read_dir(self.dir.path())
            .map(|d| d.count())
            .unwrap_or(0);
        let stderr = std::fs::File::create(self.dir.path().join(format!("spawned-{n}.stderr")))
            .map(std::process::Stdio::from)
            .unwrap_or_else(|_| std::process::Stdio::null());
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("CAIRN_CONFIG")
            .env_remove("CAIRN_STATE")
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn cairn")
    }

    /// What the background `cairn` runs wrote to stderr, for a failure
    /// message.
    pub fn spawned_stderr(&self) -> String {
        let mut out = String::new();
        if let Ok(dir) = std::fs::read_dir(self.dir.path()) {
            for e in dir.filter_map(|e| e.ok()) {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("spawned-") && name.ends_with(".stderr") {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    out.push_str(&format!("--- {name}\n{text}"));
                }
            }
        }
        out
    }
}

impl Scratch {
    /// Starts `cairn serve` on a free loopback port with `cairn.toml` of the
    /// scratch dir; returns the child and the endpoint it printed.
    pub fn serve(&self) -> (std::process::Child, String) {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--config", "cairn.toml", "serve", "--listen", "127.0.0.1:0"])
            .current_dir(self.dir.path())
            .env_remove("CAIRN_CONFIG")
            .env_remove("CAIRN_STATE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("cairn serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the server prints its address");
        let endpoint = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_string();
        (child, endpoint)
    }
}

/// A `cairn serve` child stopped when the test ends, passed or failed (a
/// panicking test would otherwise leave it running, holding the test
/// harness's output open).
pub struct Served(pub std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cairn --endpoint ENDPOINT ARGS…` in `s`, signed with the access key
/// `key` (id, secret).
pub fn remote_as(s: &Scratch, endpoint: &str, key: (&str, &str), args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(["--endpoint", endpoint])
        .args(args)
        .current_dir(s.dir.path())
        .env_remove("CAIRN_CONFIG")
        .env_remove("CAIRN_STATE")
        .env("AWS_ACCESS_KEY_ID", key.0)
        .env("AWS_SECRET_ACCESS_KEY", key.1)
        .env("AWS_REGION", "us-east-1");
    cmd
}

/// Runs a `cfn_client.py` scenario (boto3 and the aws CLI) against the
/// server at `endpoint` as `key` (id, secret), trusting `ca` if given; it
/// must pass.
pub fn cfn_client(s: &Scratch, endpoint: &str, name: &str, key: (&str, &str), ca: Option<&str>) {
    let mut cmd = python_with("boto3");
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/cfn_client.py"
    ))
    .args([name, endpoint])
    .args(ca)
    .current_dir(s.dir.path())
    .env("AWS_ACCESS_KEY_ID", key.0)
    .env("AWS_SECRET_ACCESS_KEY", key.1)
    .env("AWS_DEFAULT_REGION", "us-east-1")
    .env_remove("AWS_PROFILE")
    .env_remove("AWS_SESSION_TOKEN")
    .env("AWS_CONFIG_FILE", s.dir.path().join("no-aws-config"))
    .env(
        "AWS_SHARED_CREDENTIALS_FILE",
        s.dir.path().join("no-aws-credentials"),
    );
    let out = cmd.output().expect("python3 runs the client");
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cairn --endpoint ENDPOINT ARGS…` signed with `key`, which must succeed.
pub fn remote_ok_as(s: &Scratch, endpoint: &str, key: (&str, &str), args: &[&str]) {
    let out = remote_as(s, endpoint, key, args)
        .output()
        .expect("cairn runs");
    assert!(
        out.status.success(),
        "cairn {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A header of an HTTP answer ([`http`]'s), by name in any case.
pub fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
}

/// `GET path` from a server at `endpoint` (`http://host:port`): the whole
/// HTTP answer, status line and headers included.
pub fn http_get(endpoint: &str, path: &str) -> String {
    http(endpoint, "GET", path, &[], "")
}

/// One HTTP/1.1 request to `endpoint` (`http://host:port`) with `headers`
/// and `body`: the whole answer, status line and headers included.
pub fn http(
    endpoint: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    use std::io::{Read, Write};
    let addr = endpoint.trim_start_matches("http://").to_string();
    let mut c = std::net::TcpStream::connect(addr).expect("connect to the server");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let _ = write!(c, "{head}\r\n{body}");
    let mut answer = String::new();
    let _ = c.read_to_string(&mut answer);
    answer
}

pub struct Run(pub Output);

impl Run {
    pub fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout()))
    }
}

/// Makes sure the workspace's plugin libraries and examples are built, with
/// the cargo and target directory of the test itself, once per test
/// process. It is `cargo xtask test`'s own first build (xtask's
/// `WORKSPACE_BUILD`): the same units with the same features, so after
/// xtask it builds nothing, and alone it builds what `cargo test` had not.
pub fn workspace_built() {
    static BUILT: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if *built {
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "--workspace",
        "--lib",
        "--bins",
        "--tests",
        "--examples",
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    // `cargo test` gave this process its package's variables; ring's build
    // script lists them as inputs, so a cargo that sees them rebuilds ring
    // and everything above it.
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
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build --workspace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    *built = true;
}

/// An HTTP/1.1 server on a free loopback port that answers every request
/// 200 (connections kept alive) and keeps each request's body, in order:
/// what a collector or an export endpoint is to the tests.
pub fn http_sink() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the sink");
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = bodies.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let Ok(mut out) = conn.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(conn);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = l.split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if let Ok(mut k) = kept.lock() {
                        k.push(body);
                    }
                    let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                }
            });
        }
    });
    (port, bodies)
}
