//! A headless Chromium driven over WebDriver, for the console's browser
//! tests and its benchmark (`benches/console_graph.rs` includes this file):
//! Debian's `chromium` and `chromium-driver`, which `cargo xtask test`
//! installs, a chromedriver on a free loopback port (plain HTTP, so no TLS
//! stack), every step bounded so a stuck browser fails the test instead of
//! hanging it.

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// One browser at a time: Chromium takes most of a core while it draws,
/// and the other end-to-end tests run beside these.
static ONE_BROWSER: Mutex<()> = Mutex::new(());

/// The longest any one WebDriver step may take before the test fails
/// (instead of hanging the suite).
pub const STEP: Duration = Duration::from_secs(30);

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Runs `scenario` with a fresh Chromium session, one scenario at a time.
pub fn with_browser<F, Fut>(shots: &str, scenario: F)
where
    F: FnOnce(Browser) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for program in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            std::path::Path::new(program).exists(),
            "{program} is missing: the console's browser tests need Debian's chromium and chromium-driver; `cargo xtask test` installs them"
        );
    }
    let _one = ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let browser = Browser::start(shots).await;
        scenario(browser).await;
    });
}

/// A chromedriver on a free loopback port and one session of Chromium.
pub struct Browser {
    pub client: Client,
    driver: Child,
    shots: PathBuf,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Chromium outlives a killed chromedriver: end the driver's whole
        // process group (it leads its own), browser included, even when the
        // test failed before closing its session.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Browser {
    async fn start(shots: &str) -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().expect("profile dir");
        let caps: serde_json::Map<String, Value> = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--window-size=1400,1000",
                    "--no-first-run", "--disable-extensions",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        })
        .as_object()
        .cloned()
        .unwrap_or_default();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no WebDriver session from chromedriver on {url}: {e}"),
            }
        };
        let shots_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join("console-screenshots")
            .join(shots);
        let _ = std::fs::create_dir_all(&shots_dir);
        Browser {
            client,
            driver,
            shots: shots_dir,
            _profile: profile,
        }
    }

    pub async fn goto(&self, url: &str) {
        step(&format!("open {url}"), self.client.goto(url)).await;
    }

    /// Runs `script` in the page (its `return` is the result).
    pub async fn js(&self, script: &str) -> Value {
        step(script, self.client.execute(script, vec![])).await
    }

    /// The page's visible text.
    pub async fn text(&self) -> String {
        self.js("return document.body ? document.body.innerText : ''")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits (bounded) until `script` returns `true`; panics with `what`
    /// and the page's text when it does not.
    pub async fn until(&self, what: &str, within: Duration, script: &str) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.js(script).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.shot("timed-out").await;
        panic!(
            "{what}: not so after {within:?}; the page says:\n{}",
            self.text().await
        );
    }

    pub async fn click(&self, css: &str) {
        let e = step(css, self.client.find(Locator::Css(css))).await;
        step(&format!("click {css}"), e.click()).await;
    }

    /// Clicks `css`, whose form asks for a confirmation, and returns the
    /// question once the browser shows it. A click while the page still
    /// moves (the graph, a refresh) can land beside the button: then no
    /// dialog opens, and the click is tried again.
    pub async fn click_for_confirmation(&self, css: &str) -> String {
        for _ in 0..5 {
            self.click(css).await;
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                if let Ok(Ok(text)) = tokio::time::timeout(STEP, self.client.get_alert_text()).await
                {
                    return text;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        self.shot("no-confirmation").await;
        panic!("clicking {css} opened no confirmation");
    }

    pub async fn fill(&self, css: &str, text: &str) {
        let e = step(css, self.client.find(Locator::Css(css))).await;
        step(&format!("type into {css}"), e.send_keys(text)).await;
    }

    pub async fn shot(&self, name: &str) {
        if let Ok(Ok(png)) = tokio::time::timeout(STEP, self.client.screenshot()).await {
            let _ = std::fs::write(self.shots.join(format!("{name}.png")), png);
        }
    }

    pub async fn log_in(&self, endpoint: &str, key: &str, secret: &str) {
        self.goto(&format!("{endpoint}/console/login")).await;
        self.fill("input[name=access_key_id]", key).await;
        self.fill("input[name=secret_access_key]", secret).await;
        self.click("form button").await;
    }

    /// The status of `fetch(path)` from the page (its cookies included).
    pub async fn fetch_status(&self, path: &str) -> Value {
        let script = format!(
            "const done = arguments[arguments.length - 1]; fetch({}).then(r => done(r.status), e => done(String(e)));",
            json!(path)
        );
        step(
            &format!("fetch {path}"),
            self.client.execute_async(&script, vec![]),
        )
        .await
    }
}

/// `fut`, which must finish within [`STEP`] and succeed.
pub async fn step<T, E: std::fmt::Display>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> T {
    match tokio::time::timeout(STEP, fut).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("WebDriver: {what}: {e}"),
        Err(_) => panic!("WebDriver: {what}: no answer within {STEP:?}"),
    }
}
