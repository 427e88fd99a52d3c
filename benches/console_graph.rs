//! The console's graph for a 1,000-resource stack in headless Chromium:
//! prints figures, asserts nothing.
//!
//! `cargo bench --bench console_graph` starts `cairn serve` (auth none) in a
//! temp dir, creates a stack of 1,000 `Cairn::Test::Resource`s in 20 layers
//! of 50 (each depending on two of the layer before: 1,900 edges), then
//! opens the stack's page in Debian's headless Chromium over WebDriver
//! (`cargo xtask prepare` installs it) several times and prints, per load:
//! - `drawn`: milliseconds from navigation start until the graph is laid
//!   out and painted (the page's `window.cairnGraphDrawn`, set on the frame
//!   after drawing; the target is under 1,000 ms);
//! - `draw`: the drawing itself (SVG built and inserted, then that frame);
//! - `events`: until all 3,002 events (three per resource, two of the stack) of the create are on the timeline;
//! - `click`: from a click on a node of the last layer to its detail shown.

#[allow(dead_code)]
#[path = "../tests/e2e/webdriver.rs"]
mod webdriver;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const LAYERS: usize = 20;
const WIDTH: usize = 50;
const LOADS: usize = 7;

fn template() -> String {
    let mut t = String::from("Resources:\n");
    for l in 0..LAYERS {
        for i in 0..WIDTH {
            let depends = if l == 0 {
                String::new()
            } else {
                format!(
                    ", DependsOn: [R{p}x{i}, R{p}x{j}]",
                    p = l - 1,
                    j = (i + 7) % WIDTH
                )
            };
            t.push_str(&format!(
                "  R{l}x{i}: {{Type: Cairn::Test::Resource{depends}, Properties: {{Value: v{l}x{i}}}}}\n"
            ));
        }
    }
    t
}

fn summary(name: &str, mut xs: Vec<f64>) {
    xs.sort_by(|a, b| a.total_cmp(b));
    let median = xs[xs.len() / 2];
    println!(
        "{name:>8}: min {:7.1} ms  median {:7.1} ms  max {:7.1} ms  ({} loads)",
        xs[0],
        median,
        xs[xs.len() - 1],
        xs.len()
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("cairn.toml"), "[server]\nauth = \"none\"\n").expect("config");
    std::fs::write(dir.path().join("big.yaml"), template()).expect("template");
    let exe = env!("CARGO_BIN_EXE_cairn");
    let server = Command::new(exe)
        .args(["--config", "cairn.toml", "serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cairn serve starts");
    // Stopped even when the benchmark panics.
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server = Stop(server);
    let mut line = String::new();
    if let Some(out) = server.0.stdout.take() {
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    let endpoint = line
        .trim()
        .strip_prefix("listening on ")
        .expect("cairn serve prints its address")
        .to_string();
    let started = Instant::now();
    let deployed = Command::new(exe)
        .args(["--endpoint", &endpoint, "deploy", "big", "big.yaml"])
        .current_dir(dir.path())
        .env("AWS_ACCESS_KEY_ID", "AKIDBENCH")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        .env("AWS_REGION", "us-east-1")
        .stdout(Stdio::null())
        .status()
        .expect("deploy runs");
    assert!(deployed.success(), "the 1,000-resource create failed");
    println!(
        "created {} resources in {:.2} s; loading the stack's page {LOADS} times",
        LAYERS * WIDTH,
        started.elapsed().as_secs_f64()
    );
    let url = format!("{endpoint}/console/stacks/big");
    webdriver::with_browser("bench", |b| async move {
        let (mut drawn, mut draw, mut events, mut click) = (vec![], vec![], vec![], vec![]);
        for load in 0..LOADS {
            b.goto(&url).await;
            b.until(
                "the graph is drawn",
                Duration::from_secs(30),
                "return !!window.cairnGraphDrawn",
            )
            .await;
            let figures = b.js("return window.cairnGraphDrawn").await;
            assert_eq!(figures["nodes"], Value::from(LAYERS * WIDTH));
            drawn.push(figures["since_navigation_ms"].as_f64().unwrap_or(f64::NAN));
            draw.push(figures["draw_ms"].as_f64().unwrap_or(f64::NAN));
            b.until(
                "all events on the timeline",
                Duration::from_secs(30),
                "return document.querySelectorAll('#events li').length === 3002",
            )
            .await;
            events.push(
                b.js("return performance.now()")
                    .await
                    .as_f64()
                    .unwrap_or(f64::NAN),
            );
            let t = Instant::now();
            b.click(&format!("#graph g.node[data-id=R{}x{}]", LAYERS - 1, load))
                .await;
            b.until(
                "the node's detail",
                Duration::from_secs(30),
                &format!(
                    "return document.getElementById('detail').dataset.id === 'R{}x{}'",
                    LAYERS - 1,
                    load
                ),
            )
            .await;
            click.push(t.elapsed().as_secs_f64() * 1000.0);
            if load == 0 {
                b.shot("graph-1000").await;
            }
        }
        println!("graph of {} resources, headless Chromium:", LAYERS * WIDTH);
        summary("drawn", drawn);
        summary("draw", draw);
        summary("events", events);
        summary("click", click);
    });
}
