//! The SDKs this binary was built with, as the files a project holds:
//! `cairn provider new` writes the one a project needs into it (neither is
//! on a package index yet), so the project depends on no checkout and
//! builds wherever the binary runs. A test keeps the lists whole.

use std::path::Path;

use anyhow::Context;

/// `cairn-sdk`: its manifest (made standalone by [`rust_manifest`]) and
/// sources.
const RUST: &[(&str, &str)] = &[
    ("src/lib.rs", include_str!("../../sdk/src/lib.rs")),
    (
        "src/custom_resource.rs",
        include_str!("../../sdk/src/custom_resource.rs"),
    ),
    ("src/error.rs", include_str!("../../sdk/src/error.rs")),
    ("src/hook.rs", include_str!("../../sdk/src/hook.rs")),
    (
        "src/hook_server.rs",
        include_str!("../../sdk/src/hook_server.rs"),
    ),
    ("src/macros.rs", include_str!("../../sdk/src/macros.rs")),
    ("src/plugin.rs", include_str!("../../sdk/src/plugin.rs")),
    ("src/provider.rs", include_str!("../../sdk/src/provider.rs")),
    ("src/schema.rs", include_str!("../../sdk/src/schema.rs")),
    ("src/webhook.rs", include_str!("../../sdk/src/webhook.rs")),
];
const RUST_MANIFEST: &str = include_str!("../../sdk/Cargo.toml");
/// The workspace's manifest: what the SDK's `workspace = true` keys name.
const WORKSPACE_MANIFEST: &str = include_str!("../../Cargo.toml");

/// The Python SDK (`cairn-provider`): standard library only.
const PYTHON: &[(&str, &str)] = &[
    (
        "pyproject.toml",
        include_str!("../../sdk-python/pyproject.toml"),
    ),
    (
        "cairn_provider/__init__.py",
        include_str!("../../sdk-python/cairn_provider/__init__.py"),
    ),
    (
        "cairn_provider/errors.py",
        include_str!("../../sdk-python/cairn_provider/errors.py"),
    ),
    (
        "cairn_provider/hook.py",
        include_str!("../../sdk-python/cairn_provider/hook.py"),
    ),
    (
        "cairn_provider/lambda_adapter.py",
        include_str!("../../sdk-python/cairn_provider/lambda_adapter.py"),
    ),
    (
        "cairn_provider/macro.py",
        include_str!("../../sdk-python/cairn_provider/macro.py"),
    ),
    (
        "cairn_provider/provider.py",
        include_str!("../../sdk-python/cairn_provider/provider.py"),
    ),
    (
        "cairn_provider/schema.py",
        include_str!("../../sdk-python/cairn_provider/schema.py"),
    ),
    (
        "cairn_provider/tracing.py",
        include_str!("../../sdk-python/cairn_provider/tracing.py"),
    ),
    (
        "cairn_provider/webhook.py",
        include_str!("../../sdk-python/cairn_provider/webhook.py"),
    ),
];

/// The TypeScript SDK (`cairn-provider`), built by the project's build.
const TYPESCRIPT: &[(&str, &str)] = &[
    (
        "package.json",
        include_str!("../../sdk-typescript/package.json"),
    ),
    (
        "package-lock.json",
        include_str!("../../sdk-typescript/package-lock.json"),
    ),
    (
        "tsconfig.json",
        include_str!("../../sdk-typescript/tsconfig.json"),
    ),
    (
        "src/hook.ts",
        include_str!("../../sdk-typescript/src/hook.ts"),
    ),
    (
        "src/cdk.ts",
        include_str!("../../sdk-typescript/src/cdk.ts"),
    ),
    (
        "src/cfn-response.ts",
        include_str!("../../sdk-typescript/src/cfn-response.ts"),
    ),
    (
        "src/errors.ts",
        include_str!("../../sdk-typescript/src/errors.ts"),
    ),
    (
        "src/index.ts",
        include_str!("../../sdk-typescript/src/index.ts"),
    ),
    (
        "src/lambda-adapter.ts",
        include_str!("../../sdk-typescript/src/lambda-adapter.ts"),
    ),
    (
        "src/lambda.ts",
        include_str!("../../sdk-typescript/src/lambda.ts"),
    ),
    (
        "src/listen.ts",
        include_str!("../../sdk-typescript/src/listen.ts"),
    ),
    (
        "src/provider.ts",
        include_str!("../../sdk-typescript/src/provider.ts"),
    ),
    (
        "src/respond.ts",
        include_str!("../../sdk-typescript/src/respond.ts"),
    ),
    (
        "src/schema.ts",
        include_str!("../../sdk-typescript/src/schema.ts"),
    ),
    (
        "src/serve.ts",
        include_str!("../../sdk-typescript/src/serve.ts"),
    ),
    (
        "src/signing.ts",
        include_str!("../../sdk-typescript/src/signing.ts"),
    ),
    (
        "src/tracing.ts",
        include_str!("../../sdk-typescript/src/tracing.ts"),
    ),
];

/// Where a project keeps the SDK it was written with.
pub(super) const RUST_DIR: &str = "cairn-sdk";
pub(super) const PYTHON_DIR: &str = "cairn-provider";
pub(super) const TYPESCRIPT_DIR: &str = "cairn-provider";

fn write_file(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn write_all(dir: &Path, files: &[(&str, &str)]) -> anyhow::Result<()> {
    files
        .iter()
        .try_for_each(|(name, text)| write_file(dir, name, text))
}

/// Writes `cairn-sdk` into `dir` (its manifest standalone).
pub(super) fn write_rust(dir: &Path) -> anyhow::Result<()> {
    write_all(dir, RUST)?;
    write_file(dir, "Cargo.toml", &rust_manifest()?)
}

/// Writes the Python SDK into `dir`.
pub(super) fn write_python(dir: &Path) -> anyhow::Result<()> {
    write_all(dir, PYTHON)
}

/// Writes the TypeScript SDK into `dir`.
pub(super) fn write_typescript(dir: &Path) -> anyhow::Result<()> {
    write_all(dir, TYPESCRIPT)
}

/// The SDK's manifest with what it takes from the workspace written out
/// (`version.workspace = true`, `serde.workspace = true`, …), so it builds
/// as a crate of its own.
fn rust_manifest() -> anyhow::Result<String> {
    let sdk: toml::Table = RUST_MANIFEST
        .parse()
        .context("the embedded SDK manifest is not TOML")?;
    let workspace: toml::Table = WORKSPACE_MANIFEST
        .parse()
        .context("the embedded workspace manifest is not TOML")?;
    let inherited = |section: &str| -> toml::Table {
        workspace
            .get("workspace")
            .and_then(|w| w.get(section))
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let (package_values, dependency_values) = (inherited("package"), inherited("dependencies"));
    let from_workspace =
        |v: &toml::Value| v.get("workspace").and_then(toml::Value::as_bool) == Some(true);
    let mut out = sdk.clone();
    if let Some(package) = out.get_mut("package").and_then(toml::Value::as_table_mut) {
        for (key, value) in package.iter_mut() {
            if from_workspace(value) {
                if let Some(v) = package_values.get(key) {
                    *value = v.clone();
                }
            }
        }
    }
    if let Some(deps) = out
        .get_mut("dependencies")
        .and_then(toml::Value::as_table_mut)
    {
        for (name, value) in deps.iter_mut() {
            if !from_workspace(value) {
                continue;
            }
            let mut written = match dependency_values.get(name) {
                Some(toml::Value::String(version)) => {
                    let mut t = toml::Table::new();
                    t.insert("version".into(), toml::Value::String(version.clone()));
                    t
                }
                Some(toml::Value::Table(t)) => t.clone(),
                _ => anyhow::bail!("the workspace manifest has no dependency {name}"),
            };
            // The SDK's own keys (optional, features) stay.
            if let Some(own) = value.as_table() {
                for (k, v) in own.iter().filter(|(k, _)| *k != "workspace") {
                    if k == "features" {
                        let mut all: Vec<toml::Value> = written
                            .get("features")
                            .and_then(toml::Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        all.extend(v.as_array().cloned().unwrap_or_default());
                        written.insert("features".into(), toml::Value::Array(all));
                    } else {
                        written.insert(k.clone(), v.clone());
                    }
                }
            }
            *value = toml::Value::Table(written);
        }
    }
    Ok(format!(
        "# cairn-sdk, as this cairn was built with it (written by `cairn provider new`).\n{}",
        toml::to_string(&out).context("cannot write the SDK's manifest")?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every source file of each SDK is in its list (a file added to an
    /// SDK and not here would be missing from every project).
    #[test]
    fn the_lists_hold_every_source_file_of_each_sdk() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let listed = |files: &[(&str, &str)]| -> Vec<String> {
            let mut names: Vec<String> = files.iter().map(|(n, _)| n.to_string()).collect();
            names.sort();
            names
        };
        let on_disk = |dir: &str, sub: &str, ext: &str| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(root.join(dir).join(sub))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(ext))
                .map(|n| format!("{sub}/{n}"))
                .collect();
            names.sort();
            names
        };
        assert_eq!(listed(RUST), on_disk("sdk", "src", ".rs"));
        let mut python = on_disk("sdk-python", "cairn_provider", ".py");
        python.push("pyproject.toml".into());
        python.sort();
        assert_eq!(listed(PYTHON), python);
        let mut typescript = on_disk("sdk-typescript", "src", ".ts");
        typescript.extend(["package.json", "package-lock.json", "tsconfig.json"].map(String::from));
        typescript.sort();
        assert_eq!(listed(TYPESCRIPT), typescript);
    }

    /// The standalone manifest names no workspace and keeps the SDK's
    /// features and optional dependencies.
    #[test]
    fn the_rust_manifest_stands_alone() {
        let text = rust_manifest().unwrap();
        let t: toml::Table = text.parse().unwrap();
        assert!(!text.contains("workspace"), "{text}");
        assert_eq!(t["package"]["name"].as_str(), Some("cairn-sdk"));
        assert_eq!(t["package"]["edition"].as_str(), Some("2021"));
        assert_eq!(t["dependencies"]["serde"]["version"].as_str(), Some("1"));
        assert_eq!(t["dependencies"]["tokio"]["optional"].as_bool(), Some(true));
        assert!(t["features"]["plugin"].as_array().is_some());
    }
}
