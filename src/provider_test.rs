//! `cairn provider test`: the contract tests (`cairn_core::contract`) against
//! a provider reached the way the engine reaches it: a type this
//! configuration serves, a plugin library, or a webhook handler. Prints a
//! table (or JSON) and writes JUnit XML for CI; exits non-zero when a test
//! failed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use cairn_core::config::{Config, Isolation, ProviderConfig, ProviderKind};
use cairn_core::contract::{self, Inputs, Status, TestReport};
use cairn_core::registry::{RegisteredType, Registry, Transport};
use cairn_core::template::Template;
use serde_json::{Map, Value};

use crate::OutputFormat;

/// What to test.
pub enum Under {
    Type(String),
    Plugin {
        path: PathBuf,
        isolation: Isolation,
        /// The entry's `settings`.
        settings: Option<Value>,
    },
    Webhook {
        url: String,
        secret: Option<String>,
        drift: bool,
        read: bool,
    },
}

pub struct Args<'a> {
    pub under: Under,
    pub properties: Option<&'a Path>,
    pub updates: &'a [PathBuf],
    pub timeout_seconds: u64,
    pub output: OutputFormat,
    pub junit: Option<&'a Path>,
    pub data_dir: PathBuf,
}

/// `--settings FILE`: a plugin's settings (JSON or YAML).
pub fn read_settings(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read settings {}: {e}", path.display()))?;
    Template::body_of(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The provider's name in the registry when the kit adds it.
const UNDER_TEST: &str = "under-test";

pub async fn run(mut config: Config, args: Args<'_>) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(args.timeout_seconds.max(1));
    let wanted_type = match &args.under {
        Under::Type(t) => Some(t.clone()),
        Under::Plugin {
            path,
            isolation,
            settings,
        } => {
            config
                .providers
                .push(entry(ProviderKind::Dylib, args.timeout_seconds, |p| {
                    p.path = Some(path.clone());
                    p.isolation = *isolation;
                    p.settings = settings.clone();
                }));
            None
        }
        Under::Webhook {
            url,
            secret,
            drift,
            read,
        } => {
            wait_until_listening(url, Duration::from_secs(10)).await;
            config
                .providers
                .push(entry(ProviderKind::Webhook, args.timeout_seconds, |p| {
                    p.url = Some(url.clone());
                    p.secret = secret.clone();
                    p.drift = *drift;
                    p.read = *read;
                }));
            None
        }
    };
    // The kit's own process: custom resources answer at a listener of its
    // own, with no state shared.
    let process = crate::wiring::Process::new(&config.webhooks, None);
    let registry =
        crate::wiring::assemble(&config, cairn_providers::builtins(&args.data_dir), &process)?;
    let targets = targets(&registry, wanted_type.as_deref())?;
    let mut inputs = read_inputs(args.properties, args.updates)?;
    let mut reports = Vec::new();
    for (type_name, t) in &targets {
        let given = inputs.remove(type_name).unwrap_or_default();
        if t.transport == Transport::Engine {
            reports.push(TestReport {
                type_name: type_name.clone(),
                test: "engine_served".into(),
                status: Status::Skipped,
                message: format!(
                    "{type_name} is run by the engine itself ({}), not by a provider: test it in a stack",
                    t.provider_name
                ),
                sent: None,
                received: None,
                millis: 0,
            });
            continue;
        }
        let target = contract::Target {
            type_name,
            schema: &t.schema,
            declared: t.provider.schema(),
            provider: t.provider.as_ref(),
            call_timeout: timeout,
        };
        reports.extend(contract::run(&target, &given).await);
    }
    if let Some((type_name, _)) = inputs.into_iter().next() {
        bail!(
            "the properties file gives inputs for {type_name}, which is not under test (tested: {})",
            targets
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(path) = args.junit {
        write_junit(path, &reports)?;
    }
    match args.output {
        OutputFormat::Json => crate::stacks::print_json(&serde_json::to_value(&reports)?)?,
        OutputFormat::Text => print_table(&reports),
    }
    let failed = reports
        .iter()
        .filter(|r| r.status == Status::Failed)
        .count();
    if failed > 0 {
        bail!("{failed} of {} contract tests failed", reports.len());
    }
    Ok(())
}

/// Waits (up to `limit`) until something listens at `url`'s address: a
/// handler started in the background just before (`handler & cairn
/// provider test …`) is given time to bind. If nothing does, starting the
/// provider reports the connection error.
async fn wait_until_listening(url: &str, limit: Duration) {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return;
    };
    let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
        return;
    };
    let address = format!(
        "{}:{port}",
        host.trim_start_matches('[').trim_end_matches(']')
    );
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        let attempt = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(&address),
        )
        .await;
        if matches!(attempt, Ok(Ok(_))) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn entry(
    kind: ProviderKind,
    timeout: u64,
    set: impl FnOnce(&mut ProviderConfig),
) -> ProviderConfig {
    let mut p = ProviderConfig {
        kind,
        path: None,
        url: None,
        secret: None,
        ca_bundle: None,
        name: Some(UNDER_TEST.into()),
        types: None,
        isolation: Isolation::default(),
        sha256: None,
        timeout_seconds: Some(timeout),
        drift: false,
        read: false,
        settings: None,
    };
    set(&mut p);
    p
}

/// The types under test: the one asked for, or every type the added
/// provider serves.
fn targets(
    registry: &Registry,
    wanted: Option<&str>,
) -> anyhow::Result<Vec<(String, std::sync::Arc<RegisteredType>)>> {
    if let Some(t) = wanted {
        let Some(found) = registry.get(t) else {
            if let Some(reason) = registry.unavailable_reason(t) {
                bail!("{reason}");
            }
            bail!("no provider serves {t}; `cairn providers` lists the types this configuration serves");
        };
        return Ok(vec![(t.to_string(), found)]);
    }
    // Starting the added provider reads its types (a library's declaration,
    // a handler's /schema); a failure to start is the answer.
    for status in registry.start_all() {
        if status.name == UNDER_TEST {
            if let Some(e) = status.cause {
                bail!("the provider under test cannot start: {e}");
            }
        }
    }
    let list: Vec<_> = registry
        .types()
        .into_iter()
        .filter(|(_, t)| t.provider_name == UNDER_TEST)
        .collect();
    if list.is_empty() {
        bail!("the provider under test declares no resource types");
    }
    Ok(list)
}

/// The properties file (type -> `{Create, Updates, Invalid}`, or type ->
/// the create properties) and the update files (type -> properties), JSON
/// or YAML.
fn read_inputs(
    properties: Option<&Path>,
    updates: &[PathBuf],
) -> anyhow::Result<BTreeMap<String, Inputs>> {
    let mut out: BTreeMap<String, Inputs> = BTreeMap::new();
    if let Some(path) = properties {
        for (type_name, v) in read_map(path)? {
            let Value::Object(m) = v else {
                bail!("{}: {type_name} must map to an object", path.display());
            };
            let structured = m.contains_key("Create")
                && m.keys()
                    .all(|k| matches!(k.as_str(), "Create" | "Updates" | "Invalid"));
            let inputs = if structured {
                Inputs {
                    create: Some(object(&m["Create"], path, &type_name, "Create")?),
                    updates: match m.get("Updates") {
                        None => Vec::new(),
                        Some(Value::Array(a)) => a
                            .iter()
                            .map(|u| object(u, path, &type_name, "Updates"))
                            .collect::<anyhow::Result<_>>()?,
                        Some(_) => bail!(
                            "{}: {type_name}.Updates must be a list of property objects",
                            path.display()
                        ),
                    },
                    invalid: m
                        .get("Invalid")
                        .map(|i| object(i, path, &type_name, "Invalid"))
                        .transpose()?,
                }
            } else {
                Inputs {
                    create: Some(m),
                    ..Default::default()
                }
            };
            out.insert(type_name, inputs);
        }
    }
    for path in updates {
        for (type_name, v) in read_map(path)? {
            let props = object(&v, path, &type_name, "its update")?;
            out.entry(type_name).or_default().updates.push(props);
        }
    }
    Ok(out)
}

fn read_map(path: &Path) -> anyhow::Result<Map<String, Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    match Template::body_of(&text).map_err(|e| anyhow!("{}: {e}", path.display()))? {
        Value::Object(m) => Ok(m),
        _ => bail!(
            "{}: must map each resource type to its properties",
            path.display()
        ),
    }
}

fn object(
    v: &Value,
    path: &Path,
    type_name: &str,
    what: &str,
) -> anyhow::Result<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m.clone()),
        _ => bail!(
            "{}: {type_name} {what} must be an object of properties",
            path.display()
        ),
    }
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Passed => "PASS",
        Status::Failed => "FAIL",
        Status::Skipped => "SKIP",
    }
}

fn print_table(reports: &[TestReport]) {
    let width = reports.iter().map(|r| r.test.len()).max().unwrap_or(0);
    let mut current = "";
    for r in reports {
        if r.type_name != current {
            println!("{}", r.type_name);
            current = &r.type_name;
        }
        println!(
            "  {}  {:<width$}  {:>6} ms  {}",
            status_word(r.status),
            r.test,
            r.millis,
            r.message
        );
        if r.status == Status::Failed {
            if let Some(s) = &r.sent {
                println!("        sent:     {s}");
            }
            if let Some(g) = &r.received {
                println!("        received: {g}");
            }
        }
    }
    let count = |s: Status| reports.iter().filter(|r| r.status == s).count();
    println!(
        "{} passed, {} failed, {} skipped",
        count(Status::Passed),
        count(Status::Failed),
        count(Status::Skipped)
    );
}

fn write_junit(path: &Path, reports: &[TestReport]) -> anyhow::Result<()> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("cairn provider test");
    let mut suites: BTreeMap<&str, TestSuite> = BTreeMap::new();
    for r in reports {
        let mut status = match r.status {
            Status::Passed => TestCaseStatus::success(),
            Status::Failed => TestCaseStatus::non_success(NonSuccessKind::Failure),
            Status::Skipped => TestCaseStatus::skipped(),
        };
        if r.status != Status::Passed {
            status.set_message(r.message.clone());
        }
        if r.status == Status::Failed {
            status.set_description(format!(
                "sent: {}\nreceived: {}",
                r.sent.clone().unwrap_or(Value::Null),
                r.received.clone().unwrap_or(Value::Null)
            ));
        }
        let mut case = TestCase::new(r.test.clone(), status);
        case.set_classname(r.type_name.clone());
        case.set_time(Duration::from_millis(r.millis));
        suites
            .entry(&r.type_name)
            .or_insert_with(|| TestSuite::new(r.type_name.clone()))
            .add_test_case(case);
    }
    report.add_test_suites(suites.into_values());
    let xml = report
        .to_string()
        .map_err(|e| anyhow!("cannot write JUnit XML: {e}"))?;
    std::fs::write(path, xml).with_context(|| format!("cannot write {}", path.display()))
}
