//! `cairn provider new`: writes a provider project that builds, passes
//! `cairn provider test` and deploys its sample template with no edit: a
//! Rust plugin, a Rust webhook handler, or a Python or TypeScript webhook
//! handler on the Python SDK (`sdk-python/`) or the TypeScript SDK
//! (`sdk-typescript/`). The files are templates embedded in the binary
//! (`src/scaffold/`) with `{{name}}` placeholders; a TypeScript project's
//! `package.json` and `package-lock.json` are written from the SDK's own
//! (the same build tools, pinned the same), so `npm ci` works at once. By
//! default the project holds the SDK the binary was built with (`sdks`),
//! so it depends on no checkout.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

mod sdks;

/// The language and transport asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RustDylib,
    RustWebhook,
    Python,
    TypeScript,
    /// A hook (CloudFormation's HOOK type) in a Rust plugin library.
    RustHook,
}

pub struct Args<'a> {
    pub name: &'a str,
    pub kind: Kind,
    /// The directory to create (default: NAME).
    pub dir: Option<&'a Path>,
    /// The resource type (default `Example::<Name>::Note`).
    pub type_name: Option<&'a str>,
    /// `cairn-sdk` by path instead of by version (Rust).
    pub sdk_path: Option<&'a Path>,
    /// The Python SDK to install from (a path; default: from the index).
    pub python_sdk: Option<&'a Path>,
    /// The TypeScript SDK to depend on (a path; default: the checkout's).
    pub typescript_sdk: Option<&'a Path>,
    /// The port a webhook handler listens on.
    pub port: u16,
}

const PROVIDER_RS: &str = include_str!("scaffold/rust/provider.rs.tmpl");
const PLUGIN_LIB_RS: &str = include_str!("scaffold/rust/plugin_lib.rs.tmpl");
const WEBHOOK_MAIN_RS: &str = include_str!("scaffold/rust/webhook_main.rs.tmpl");
const PLUGIN_CARGO: &str = include_str!("scaffold/rust/plugin_Cargo.toml.tmpl");
const WEBHOOK_CARGO: &str = include_str!("scaffold/rust/webhook_Cargo.toml.tmpl");
const TEMPLATE_YAML: &str = include_str!("scaffold/template.yaml.tmpl");
const INPUTS_YAML: &str = include_str!("scaffold/inputs.yaml.tmpl");
const GITIGNORE: &str = include_str!("scaffold/gitignore.tmpl");
const README: &str = include_str!("scaffold/README.md.tmpl");
const PY_PROVIDER: &str = include_str!("scaffold/python/provider.py.tmpl");
const PY_PROJECT: &str = include_str!("scaffold/python/pyproject.toml.tmpl");
const TS_PROVIDER: &str = include_str!("scaffold/typescript/provider.ts.tmpl");
const TS_CONFIG: &str = include_str!("scaffold/typescript/tsconfig.json.tmpl");
const HOOK_LIB_RS: &str = include_str!("scaffold/rust/hook_lib.rs.tmpl");
const HOOK_README: &str = include_str!("scaffold/hook/README.md.tmpl");
const HOOK_TEMPLATE_YAML: &str = include_str!("scaffold/hook/template.yaml.tmpl");
const HOOK_OPEN_YAML: &str = include_str!("scaffold/hook/open.yaml.tmpl");
const HOOK_CONFIGURATION: &str = include_str!("scaffold/hook/configuration.json.tmpl");

/// `my-notes` -> `MyNotes`.
fn camel(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn fill(template: &str, values: &[(&str, String)]) -> String {
    values.iter().fold(template.to_string(), |t, (k, v)| {
        t.replace(&format!("{{{{{k}}}}}"), v)
    })
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!("provider name {name:?} must start with a lowercase letter and hold only lowercase letters, digits, '-' and '_' (it names the crate or package)");
    }
    Ok(())
}

fn check_type(type_name: &str) -> anyhow::Result<()> {
    let parts: Vec<&str> = type_name.split("::").collect();
    if parts.len() < 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric()))
    {
        bail!("--type-name {type_name} must be Organization::Service::Resource");
    }
    Ok(())
}

/// The steps the README gives, and the `cairn.toml` entry, per kind.
struct Recipe {
    build: String,
    start: Option<String>,
    test: String,
    entry: String,
    /// What `cairn provider package` is given besides the project.
    package: String,
}

fn recipe(kind: Kind, crate_name: &str, port: u16) -> Recipe {
    let url = format!("http://127.0.0.1:{port}/");
    let webhook_entry = format!(
        "[[providers]]\nkind = \"webhook\"\nname = \"{crate_name}\"\nurl = \"{url}\"\nsecret = \"change-me\"\ndrift = true\nread = true\n"
    );
    let webhook_test = format!(
        "cairn provider test --webhook {url} --secret change-me --drift --read --properties inputs.yaml"
    );
    match kind {
        Kind::RustHook => {
            let lib = format!("target/debug/lib{}.so", crate_name.replace('-', "_"));
            Recipe {
                build: "cargo build".into(),
                start: None,
                test: format!("cairn provider test --plugin {lib}"),
                entry: String::new(),
                package: format!("--library {lib}"),
            }
        }
        Kind::RustDylib => {
            let lib = format!("target/debug/lib{}.so", crate_name.replace('-', "_"));
            Recipe {
                build: "cargo build".into(),
                start: None,
                test: format!("cairn provider test --plugin {lib} --properties inputs.yaml"),
                entry: format!(
                    "[[providers]]\nkind = \"dylib\"\nname = \"{crate_name}\"\npath = \"{lib}\"\n"
                ),
                package: format!("--library {lib}"),
            }
        }
        Kind::RustWebhook => Recipe {
            build: "cargo build".into(),
            start: Some(format!(
                "target/debug/{crate_name} --listen 127.0.0.1:{port} --secret change-me &"
            )),
            test: webhook_test,
            entry: webhook_entry,
            package: format!("--url {url}"),
        },
        Kind::Python => Recipe {
            build: "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt".into(),
            start: Some(format!(
                ".venv/bin/python provider.py --listen 127.0.0.1:{port} --secret change-me &"
            )),
            test: webhook_test,
            entry: webhook_entry,
            package: format!("--url {url}"),
        },
        Kind::TypeScript => Recipe {
            build: "npm ci && npm run build".into(),
            start: Some(format!(
                "node dist/provider.js --listen 127.0.0.1:{port} --secret change-me &"
            )),
            test: webhook_test,
            entry: webhook_entry,
            package: format!("--url {url}"),
        },
    }
}

/// `p` made absolute, once it holds `marker` (an SDK directory of a Cairn
/// checkout, given with `flag`).
fn checkout_dir(p: &Path, flag: &str, marker: &str, which: &str) -> anyhow::Result<String> {
    let abs = std::path::absolute(p).with_context(|| format!("{flag} {}", p.display()))?;
    if !abs.join(marker).is_file() {
        bail!(
            "{flag} {} holds no {marker}: give the {which} directory of a Cairn checkout",
            abs.display()
        );
    }
    Ok(abs.display().to_string())
}

/// Writes the project; returns its directory.
pub fn run(args: &Args<'_>) -> anyhow::Result<PathBuf> {
    check_name(args.name)?;
    let hook = args.kind == Kind::RustHook;
    let type_name = args
        .type_name
        .map(str::to_string)
        .unwrap_or_else(|| match hook {
            true => format!("Example::{}::Hook", camel(args.name)),
            false => format!("Example::{}::Note", camel(args.name)),
        });
    check_type(&type_name)?;
    let dir = args
        .dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(args.name));
    if dir.exists() {
        bail!(
            "{} already exists; give another NAME or --dir",
            dir.display()
        );
    }
    let upper = args.name.to_ascii_uppercase().replace('-', "_");
    // Without a path, the project gets the SDK this binary was built with
    // (`sdks`): neither SDK is on a package index yet, and a path into the
    // checkout the binary was built in would not outlive it.
    let python = args.kind == Kind::Python;
    let typescript = args.kind == Kind::TypeScript;
    let rust = !python && !typescript;
    let sdk_dep = match args.sdk_path {
        Some(p) => format!(
            "path = {:?}",
            checkout_dir(p, "--sdk-path", "Cargo.toml", "sdk/")?
        ),
        None if rust => format!("path = {:?}", sdks::RUST_DIR),
        None => String::new(),
    };
    let python_sdk = match args.python_sdk {
        Some(p) => checkout_dir(p, "--python-sdk", "pyproject.toml", "sdk-python/")?,
        None if python => format!("./{}", sdks::PYTHON_DIR),
        None => String::new(),
    };
    let typescript_sdk = match args.typescript_sdk {
        Some(p) => Some(checkout_dir(
            p,
            "--typescript-sdk",
            "package.json",
            "sdk-typescript/",
        )?),
        None => None,
    };
    let r = recipe(args.kind, args.name, args.port);
    let language = match args.kind {
        Kind::RustDylib => "A Rust provider plugin (a dynamic library Cairn loads)",
        Kind::RustWebhook => "A Rust webhook handler (Cairn calls it over HTTP)",
        Kind::Python => "A Python webhook handler on Cairn's Python SDK",
        Kind::TypeScript => "A TypeScript webhook handler on Cairn's TypeScript SDK",
        Kind::RustHook => "A Rust hook plugin (a dynamic library Cairn loads)",
    };
    // The SDK is not on npm: a checkout's is built once before the project
    // (the project's own copy is built by the project's build).
    let sdk_build = typescript_sdk
        .as_ref()
        .filter(|_| typescript)
        .filter(|sdk| !Path::new(sdk).join("dist/index.js").is_file())
        .map(|sdk| format!("(cd {sdk} && npm ci && npm run build)   # the SDK, once"));
    let steps = [
        sdk_build,
        Some(format!("{}                       # build", r.build)),
        r.start
            .as_ref()
            .map(|s| format!("{s}    # start the handler")),
        Some(format!("{}   # the contract tests", r.test)),
        (!hook).then(|| {
            "cairn --config cairn.toml deploy demo template.yaml   # a stack with one note".into()
        }),
        (!hook).then(|| "cairn --config cairn.toml delete demo".into()),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n");
    // A webhook's engines read its signing secret from where the
    // registration names (never from the package).
    let webhook = !matches!(args.kind, Kind::RustDylib | Kind::RustHook);
    let package = format!("{}.tar.gz", args.name);
    let hook_steps = [
        format!("cairn provider package . {} -o {package}", r.package),
        format!("cairn --state registry.db type register {package} --test"),
        format!("cairn --state registry.db type configure {type_name} @configuration.json"),
        "cairn --state registry.db deploy demo template.yaml".into(),
        "cairn --state registry.db deploy open open.yaml || echo \"open: refused by the hook\""
            .into(),
        "cairn --state registry.db delete open".into(),
        "cairn --state registry.db delete demo".into(),
    ]
    .join("\n");
    let register_steps = [
        Some(format!(
            "cairn provider package . {} -o {package}",
            r.package
        )),
        webhook.then(|| format!("export {upper}_SECRET=change-me")),
        Some(format!(
            "cairn --state registry.db type register {package}{}",
            if webhook {
                format!(" --secret-env {upper}_SECRET")
            } else {
                String::new()
            }
        )),
        Some("cairn --state registry.db deploy demo template.yaml".into()),
        Some("cairn --state registry.db delete demo".into()),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n");
    let register_steps = match hook {
        true => hook_steps,
        false => register_steps,
    };
    let values = [
        ("crate", args.name.to_string()),
        ("type", type_name.clone()),
        ("sdk_dep", sdk_dep),
        ("python_sdk", python_sdk),
        ("dir_env", format!("{upper}_DIR")),
        ("secret_env", format!("{upper}_SECRET")),
        ("default_dir", "notes".to_string()),
        ("language", language.to_string()),
        ("steps", steps),
        ("register_steps", register_steps),
        (
            "handler",
            match webhook {
                true => "handler's URL".to_string(),
                false => "library".to_string(),
            },
        ),
        ("entry", r.entry.clone()),
        ("port", args.port.to_string()),
    ];
    let mut files: Vec<(&str, &str)> = match hook {
        true => vec![
            ("template.yaml", HOOK_TEMPLATE_YAML),
            ("open.yaml", HOOK_OPEN_YAML),
            ("configuration.json", HOOK_CONFIGURATION),
            (".gitignore", GITIGNORE),
            ("README.md", HOOK_README),
        ],
        false => vec![
            ("template.yaml", TEMPLATE_YAML),
            ("inputs.yaml", INPUTS_YAML),
            (".gitignore", GITIGNORE),
            ("README.md", README),
        ],
    };
    match args.kind {
        Kind::RustHook => files.extend([("Cargo.toml", PLUGIN_CARGO), ("src/lib.rs", HOOK_LIB_RS)]),
        Kind::RustDylib => files.extend([
            ("Cargo.toml", PLUGIN_CARGO),
            ("src/lib.rs", PLUGIN_LIB_RS),
            ("src/provider.rs", PROVIDER_RS),
        ]),
        Kind::RustWebhook => files.extend([
            ("Cargo.toml", WEBHOOK_CARGO),
            ("src/main.rs", WEBHOOK_MAIN_RS),
            ("src/provider.rs", PROVIDER_RS),
        ]),
        Kind::Python => files.extend([
            ("provider.py", PY_PROVIDER),
            ("pyproject.toml", PY_PROJECT),
            ("requirements.txt", "{{python_sdk}}\n"),
        ]),
        Kind::TypeScript => {
            files.extend([("provider.ts", TS_PROVIDER), ("tsconfig.json", TS_CONFIG)])
        }
    }
    for (name, template) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, fill(template, &values))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if !hook {
        std::fs::write(dir.join("cairn.toml"), &r.entry)
            .with_context(|| format!("cannot write {}", dir.join("cairn.toml").display()))?;
    }
    match args.kind {
        Kind::RustDylib | Kind::RustWebhook | Kind::RustHook if args.sdk_path.is_none() => {
            sdks::write_rust(&dir.join(sdks::RUST_DIR))?
        }
        Kind::Python if args.python_sdk.is_none() => {
            sdks::write_python(&dir.join(sdks::PYTHON_DIR))?
        }
        Kind::TypeScript => {
            let (sdk, own) = match typescript_sdk {
                Some(sdk) => (PathBuf::from(sdk), false),
                None => {
                    let own = std::path::absolute(dir.join(sdks::TYPESCRIPT_DIR))
                        .with_context(|| format!("{}", dir.display()))?;
                    sdks::write_typescript(&own)?;
                    (own, true)
                }
            };
            npm_project(&dir, args.name, &type_name, &sdk, own)?;
        }
        _ => {}
    }
    Ok(dir)
}

fn read_json(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// `to` relative to `from` (both absolute), as npm records a linked
/// directory.
fn relative(from: &Path, to: &Path) -> String {
    let (f, t): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); f.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// The project's `package.json` and `package-lock.json`: `cairn-provider`
/// linked from the SDK's directory, and the SDK's build tools (its
/// devDependencies) at the versions its own lockfile pins.
/// `own`: the SDK is the project's copy, built by the project's build.
fn npm_project(
    dir: &Path,
    name: &str,
    type_name: &str,
    sdk: &Path,
    own: bool,
) -> anyhow::Result<()> {
    use serde_json::{json, Value};
    let sdk_package = read_json(&sdk.join("package.json"))?;
    let sdk_lock = read_json(&sdk.join("package-lock.json"))?;
    let tools = sdk_package["devDependencies"].clone();
    let project = std::path::absolute(dir).with_context(|| format!("{}", dir.display()))?;
    let rel = relative(&project, sdk);
    let (link, build) = if own {
        (format!("file:{rel}"), format!("tsc -p {rel} && tsc -p ."))
    } else {
        (format!("file:{}", sdk.display()), "tsc -p .".to_string())
    };
    let package = json!({
        "name": name,
        "version": "0.1.0",
        "private": true,
        "description": format!("{type_name}: a Cairn resource provider served as a webhook"),
        "main": "dist/provider.js",
        "scripts": {"build": build, "start": "node dist/provider.js"},
        "dependencies": {"cairn-provider": link},
        "devDependencies": tools,
    });
    let mut packages = serde_json::Map::new();
    packages.insert(
        String::new(),
        json!({
            "name": name,
            "version": "0.1.0",
            "dependencies": {"cairn-provider": link},
            "devDependencies": tools,
        }),
    );
    let sdk_packages = sdk_lock["packages"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(root) = sdk_packages.get("") {
        packages.insert(rel.clone(), root.clone());
    }
    packages.insert(
        "node_modules/cairn-provider".into(),
        json!({"resolved": rel, "link": true}),
    );
    for (k, v) in sdk_packages.into_iter().filter(|(k, _)| !k.is_empty()) {
        packages.insert(k, v);
    }
    let lock = json!({
        "name": name,
        "version": "0.1.0",
        "lockfileVersion": 3,
        "requires": true,
        "packages": Value::Object(packages),
    });
    for (file, value) in [("package.json", package), ("package-lock.json", lock)] {
        let text = serde_json::to_string_pretty(&value)? + "\n";
        std::fs::write(dir.join(file), text)
            .with_context(|| format!("cannot write {}", dir.join(file).display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_types_and_placeholders_are_filled() {
        assert_eq!(camel("my-notes_v2"), "MyNotesV2");
        assert_eq!(
            fill(
                "{{a}} and {{b}} and {{a}}",
                &[("a", "1".into()), ("b", "2".into())]
            ),
            "1 and 2 and 1"
        );
        assert!(check_name("Bad Name").is_err());
        assert!(check_type("Only::Two").is_err());
        for t in [
            PROVIDER_RS,
            WEBHOOK_MAIN_RS,
            PLUGIN_LIB_RS,
            README,
            PY_PROVIDER,
            TS_PROVIDER,
            HOOK_LIB_RS,
            HOOK_README,
        ] {
            let keys = [
                "crate",
                "type",
                "sdk_dep",
                "python_sdk",
                "dir_env",
                "secret_env",
                "default_dir",
                "language",
                "steps",
                "register_steps",
                "handler",
                "entry",
                "port",
            ];
            let filled = fill(t, &keys.map(|k| (k, "x".to_string())));
            assert!(!filled.contains("{{"), "an unknown placeholder in {t}");
        }
    }
}
