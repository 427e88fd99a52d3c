//! `cairn provider package` and `cairn provider keygen`: a provider project
//! made by `cairn provider new` (a Rust plugin, or a webhook handler in any
//! language) becomes a package `cairn type register` takes; a minisign key
//! pair signs packages (`[registry] trusted_keys` names the public key).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use cairn_core::config::{Config, ProviderConfig, ProviderKind};
use cairn_package::{schema, Builder, Handler, TypeKind};

#[derive(clap::Args)]
pub struct PackageArgs {
    /// The provider project's directory.
    dir: PathBuf,
    /// The package file to write (default: <type name with - for ::>.tar.gz
    /// in the working directory).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// A webhook handler's URL, as engines will reach it: its types are read
    /// from its /schema (unless the project has a schema.json).
    #[arg(long)]
    url: Option<String>,
    /// A Rust plugin's built library (default: the project's
    /// target/release, then target/debug).
    #[arg(long)]
    library: Option<PathBuf>,
    /// The type to package, when the provider serves several.
    #[arg(long = "type")]
    type_name: Option<String>,
    /// Sign the package with this minisign secret key (`cairn provider
    /// keygen` writes one).
    #[arg(long)]
    sign_key: Option<PathBuf>,
    /// The type's configuration schema (JSON: `properties`, `required`,
    /// `additionalProperties`), written as the schema's typeConfiguration:
    /// what `cairn type configure` takes.
    #[arg(long)]
    configuration_schema: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct KeygenArgs {
    /// Where to write NAME.key (the secret key, readable by you only) and
    /// NAME.pub.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    #[arg(long, default_value = "cairn")]
    name: String,
}

/// The Rust target this binary was built for, as a package names it: the
/// architecture and the operating system (`x86_64-unknown-linux-gnu`).
fn this_target() -> String {
    let (arch, os) = (std::env::consts::ARCH, std::env::consts::OS);
    match os {
        "linux" => format!("{arch}-unknown-linux-gnu"),
        "macos" => format!("{arch}-apple-darwin"),
        other => format!("{arch}-unknown-{other}"),
    }
}

/// A Rust project's library name when it builds a plugin (`cdylib`).
fn plugin_crate(dir: &Path) -> anyhow::Result<Option<String>> {
    let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return Ok(None);
    };
    let manifest: toml::Table = text.parse().with_context(|| {
        format!(
            "{} is not a Cargo manifest",
            dir.join("Cargo.toml").display()
        )
    })?;
    let lib = manifest.get("lib").and_then(|l| l.as_table());
    let cdylib = lib
        .and_then(|l| l.get("crate-type"))
        .and_then(|t| t.as_array())
        .is_some_and(|types| types.iter().any(|t| t.as_str() == Some("cdylib")));
    if !cdylib {
        return Ok(None);
    }
    let name = lib
        .and_then(|l| l.get("name"))
        .or_else(|| manifest.get("package").and_then(|p| p.get("name")))
        .and_then(|n| n.as_str())
        .ok_or_else(|| anyhow!("{} names no package", dir.join("Cargo.toml").display()))?;
    Ok(Some(name.replace('-', "_")))
}

/// Where the plugin's built library is.
fn built_library(dir: &Path, crate_name: &str, given: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.clone());
    }
    let file = format!(
        "{}{crate_name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    for profile in ["release", "debug"] {
        let path = dir.join("target").join(profile).join(&file);
        if path.exists() {
            return Ok(path);
        }
    }
    bail!(
        "{} has no built library {file}: build it first (cargo build --release in {}) or name it with --library",
        dir.display(),
        dir.display()
    )
}

/// The types a provider serves, read by starting it once as an engine
/// would (a plugin in a host process, a handler's /schema).
fn served_schemas(
    config: &Config,
    entry: ProviderConfig,
) -> anyhow::Result<Vec<cairn_sdk::ResourceSchema>> {
    let process = crate::wiring::Process::new(&config.webhooks, None);
    let name = entry.name.clone().unwrap_or_else(|| "the provider".into());
    let types = crate::wiring::registry::start(config, &entry, &name, &process)
        .map_err(|e| anyhow!("cannot read the provider's types: {e}"))?;
    Ok(types.into_iter().map(|t| t.schema).collect())
}

pub fn package(config: &Config, a: &PackageArgs) -> anyhow::Result<()> {
    let dir = &a.dir;
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: name a provider project (cairn provider new makes one)",
            dir.display()
        );
    }
    let plugin = plugin_crate(dir)?;
    let (handler, library, schemas) = match (&plugin, &a.url) {
        (Some(_), Some(_)) => bail!("{} is a Rust plugin: it is packaged with its library, not a --url", dir.display()),
        (Some(crate_name), None) => {
            let path = built_library(dir, crate_name, a.library.as_ref())?;
            let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let mut e = ProviderConfig::named(ProviderKind::Dylib, crate_name);
            e.path = Some(path.clone());
            let schemas = served_schemas(config, e)?;
            let file = format!(
                "handler/{}",
                path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
            );
            (
                Handler::Dylib {
                    file: file.clone(),
                    target: this_target(),
                },
                Some((file, bytes)),
                schemas,
            )
        }
        (None, Some(url)) => {
            let schemas = match read_schema_file(dir)? {
                Some(s) => vec![s],
                None => {
                    let mut e = ProviderConfig::named(ProviderKind::Webhook, "the handler");
                    e.url = Some(url.clone());
                    served_schemas(config, e)?
                }
            };
            (Handler::Webhook { url: url.clone() }, None, schemas)
        }
        (None, None) => bail!(
            "{} is not a Rust plugin (a cdylib crate): a webhook handler is packaged with the --url engines reach it at",
            dir.display()
        ),
    };
    let chosen = match (&a.type_name, schemas.len()) {
        (Some(t), _) => schemas.iter().find(|s| &s.type_name == t).ok_or_else(|| {
            anyhow!(
                "the provider does not serve {t}; it serves {}",
                names(&schemas)
            )
        })?,
        (None, 1) => &schemas[0],
        (None, 0) => bail!("the provider serves no resource type"),
        (None, _) => bail!(
            "the provider serves {}: a package holds one type; choose it with --type",
            names(&schemas)
        ),
    };
    if !schema::valid_type_name(&chosen.type_name) {
        bail!(
            "{} cannot be registered: a registered type's name is three parts of 2 to 64 letters and digits (Organization::Service::Resource)",
            chosen.type_name
        );
    }
    let mut cfn = schema::to_cloudformation(chosen);
    if let Some(path) = &a.configuration_schema {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let wanted: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        if !wanted.is_object() {
            bail!(
                "{} must be a JSON object (a configuration schema)",
                path.display()
            );
        }
        cfn["typeConfiguration"] = wanted;
    }
    // A library made with export_hook! serves a hook, not a resource.
    let kind = match chosen.description == cairn_sdk::HOOK_SCHEMA_DESCRIPTION {
        true => TypeKind::Hook,
        false => TypeKind::Resource,
    };
    let mut builder = Builder::new(kind, &chosen.type_name)
        .description(&chosen.description)
        .handler(handler)
        .file(cairn_package::SCHEMA, serde_json::to_vec_pretty(&cfn)?);
    if let Some((file, bytes)) = library {
        builder = builder.file(file, bytes);
    }
    let signature = match &a.sign_key {
        Some(key) => Some(sign(key, &builder.manifest_bytes())?),
        None => None,
    };
    let out = a.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!("{}.tar.gz", chosen.type_name.replace("::", "-")))
    });
    let bytes = builder.build(signature.as_deref())?;
    std::fs::write(&out, &bytes).with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "{}: {} ({} bytes, SHA-256 {}){}",
        out.display(),
        chosen.type_name,
        bytes.len(),
        cairn_package::sha256_hex(&bytes),
        if signature.is_some() { ", signed" } else { "" }
    );
    Ok(())
}

fn names(schemas: &[cairn_sdk::ResourceSchema]) -> String {
    schemas
        .iter()
        .map(|s| s.type_name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A project's own `schema.json` (CloudFormation's form), when it has one.
fn read_schema_file(dir: &Path) -> anyhow::Result<Option<cairn_sdk::ResourceSchema>> {
    let path = dir.join("schema.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    Ok(Some(
        schema::from_cloudformation(&value).with_context(|| format!("{}", path.display()))?,
    ))
}

/// A minisign signature of `bytes` with the secret key in `key`.
fn sign(key: &Path, bytes: &[u8]) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(key)
        .with_context(|| format!("cannot read the key {}", key.display()))?;
    let secret = minisign::SecretKeyBox::from_string(&text)
        .and_then(|b| b.into_unencrypted_secret_key())
        .map_err(|e| {
            anyhow!(
                "{} is not an unencrypted minisign secret key: {e}",
                key.display()
            )
        })?;
    let signature = minisign::sign(None, &secret, std::io::Cursor::new(bytes), None, None)
        .map_err(|e| anyhow!("cannot sign with {}: {e}", key.display()))?;
    Ok(signature.into_string())
}

pub fn keygen(a: &KeygenArgs) -> anyhow::Result<()> {
    let pair = minisign::KeyPair::generate_unencrypted_keypair()
        .map_err(|e| anyhow!("cannot make a key pair: {e}"))?;
    let public = pair.pk.to_base64();
    let secret_box = pair
        .sk
        .to_box(Some("cairn package signing key"))
        .map_err(|e| anyhow!("cannot write the secret key: {e}"))?;
    let public_box = pair
        .pk
        .to_box()
        .map_err(|e| anyhow!("cannot write the public key: {e}"))?;
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("cannot create {}", a.dir.display()))?;
    let (sk_path, pk_path) = (
        a.dir.join(format!("{}.key", a.name)),
        a.dir.join(format!("{}.pub", a.name)),
    );
    if sk_path.exists() {
        bail!(
            "{} exists: keygen never overwrites a key",
            sk_path.display()
        );
    }
    write_private(&sk_path, secret_box.into_string().as_bytes())?;
    std::fs::write(&pk_path, public_box.into_string())
        .with_context(|| format!("cannot write {}", pk_path.display()))?;
    println!(
        "secret key: {} (sign with cairn provider package --sign-key)",
        sk_path.display()
    );
    println!("public key: {}", pk_path.display());
    println!("trust it with, in cairn.toml:\n[registry]\ntrusted_keys = [\"{public}\"]");
    Ok(())
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}
