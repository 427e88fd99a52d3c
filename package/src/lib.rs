//! Cairn's type packages: what a platform team registers to add a resource
//! type to every engine sharing a state.
//!
//! A package is a gzip-compressed tar holding:
//! - `manifest.json`: the format, the type's kind and name, its handler (a
//!   dynamic library in the package, for one target; or a webhook URL) and
//!   the SHA-256 of every other file;
//! - `schema.json`: the type's CloudFormation-style schema ([`schema`]);
//! - the handler's files (`handler/<library>`);
//! - optionally `manifest.json.minisig`: a minisign (Ed25519) signature of
//!   the manifest, which by its checksums covers every file.
//!
//! [`open`] refuses a package whose files do not match its manifest, one
//! with a file the manifest does not list, and, when trusted keys are
//! given, one no trusted key signed. Pure: it reads bytes it is given.

use std::collections::BTreeMap;
use std::io::Read;

use cairn_sdk::ResourceSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub mod schema;

/// The format this Cairn writes and reads.
pub const FORMAT: &str = "cairn-package/1";
pub const MANIFEST: &str = "manifest.json";
pub const SIGNATURE: &str = "manifest.json.minisig";
pub const SCHEMA: &str = "schema.json";

/// At most this many bytes once unpacked: a package bigger than that is
/// refused before it fills memory.
pub const MAX_UNPACKED_BYTES: u64 = 512 * 1024 * 1024;
/// At most this many files in a package.
const MAX_FILES: usize = 1000;

/// What a registered type is (CloudFormation's `Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TypeKind {
    Resource,
    Module,
    /// A hook: a library made with `cairn_sdk::export_hook!`, or a webhook
    /// answering CloudFormation's hook requests.
    Hook,
}

impl TypeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TypeKind::Resource => "RESOURCE",
            TypeKind::Module => "MODULE",
            TypeKind::Hook => "HOOK",
        }
    }
}

/// How the type's resources are served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Handler {
    /// A provider plugin library in the package, built for `target` (a Rust
    /// target triple such as `x86_64-unknown-linux-gnu`).
    Dylib { file: String, target: String },
    /// A webhook handler at `url`; its signing secret is named at
    /// registration, never kept in the package.
    Webhook { url: String },
}

/// The package's `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: String,
    pub kind: TypeKind,
    pub type_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `None` for a module (its fragment is expanded, nothing serves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<Handler>,
    /// Every file of the package but the manifest and its signature: its
    /// path → the SHA-256 of its bytes, in hex.
    pub files: BTreeMap<String, String>,
}

/// Why a package is refused. Each says what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageError {
    #[error("the package is not a gzip-compressed tar ({0}); make it with cairn provider package")]
    NotAnArchive(String),
    #[error("the package unpacks to more than {MAX_UNPACKED_BYTES} bytes or more than {MAX_FILES} files; it is refused")]
    TooBig,
    #[error("the package holds {0}, a path that is not a plain relative file name; make it with cairn provider package")]
    BadPath(String),
    #[error("the package has no {MANIFEST}; make it with cairn provider package")]
    NoManifest,
    #[error("the package's {MANIFEST} cannot be read: {0}")]
    BadManifest(String),
    #[error("the package's format is {0}; this Cairn reads {FORMAT}")]
    UnknownFormat(String),
    #[error("{file} does not match its SHA-256 in the package's manifest (the manifest says {expected}, the file's is {actual}): the package was changed after it was made; make it again")]
    ChecksumMismatch {
        file: String,
        expected: String,
        actual: String,
    },
    #[error("the package's manifest lists {0}, which the package does not hold")]
    MissingFile(String),
    #[error("the package holds {0}, which its manifest does not list: the package was changed after it was made; make it again")]
    UnlistedFile(String),
    #[error("the package is not signed, and [registry] trusted_keys requires a signature by one of its keys; sign it with cairn provider package --sign-key")]
    Unsigned,
    #[error("the package's signature is not by any key of [registry] trusted_keys (or the manifest was changed after it was signed): {0}")]
    UntrustedSignature(String),
    #[error("[registry] trusted_keys holds {key:?}, which is not a minisign public key: {reason}")]
    BadTrustedKey { key: String, reason: String },
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    #[error("the manifest names type {manifest}, but schema.json names {schema}")]
    TypeNameMismatch { manifest: String, schema: String },
    #[error("the manifest's handler {0} is not a file of the package")]
    MissingHandler(String),
}

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A package being made: the manifest is written from the files given.
pub struct Builder {
    kind: TypeKind,
    type_name: String,
    description: String,
    handler: Option<Handler>,
    files: BTreeMap<String, Vec<u8>>,
}

impl Builder {
    pub fn new(kind: TypeKind, type_name: impl Into<String>) -> Builder {
        Builder {
            kind,
            type_name: type_name.into(),
            description: String::new(),
            handler: None,
            files: BTreeMap::new(),
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Builder {
        self.description = description.into();
        self
    }

    pub fn handler(mut self, handler: Handler) -> Builder {
        self.handler = Some(handler);
        self
    }

    /// Adds the file `path` (relative, `/`-separated).
    pub fn file(mut self, path: impl Into<String>, bytes: Vec<u8>) -> Builder {
        self.files.insert(path.into(), bytes);
        self
    }

    /// The manifest these files make.
    pub fn manifest(&self) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            kind: self.kind,
            type_name: self.type_name.clone(),
            description: self.description.clone(),
            handler: self.handler.clone(),
            files: self
                .files
                .iter()
                .map(|(p, b)| (p.clone(), sha256_hex(b)))
                .collect(),
        }
    }

    /// The manifest's bytes, as the package holds them (what a signature
    /// signs).
    pub fn manifest_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(&self.manifest()).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// The package's bytes, with `signature` (a minisign signature of
    /// [`Builder::manifest_bytes`], as minisign writes it) when given.
    pub fn build(self, signature: Option<&str>) -> std::io::Result<Vec<u8>> {
        let manifest = self.manifest_bytes();
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        let mut add = |path: &str, bytes: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(if path.starts_with("handler/") {
                0o755
            } else {
                0o644
            });
            // A fixed time: the same inputs make the same package.
            header.set_mtime(0);
            header.set_cksum();
            tar.append_data(&mut header, path, bytes)
        };
        add(MANIFEST, &manifest)?;
        if let Some(sig) = signature {
            add(SIGNATURE, sig.as_bytes())?;
        }
        for (path, bytes) in &self.files {
            add(path, bytes)?;
        }
        tar.into_inner()?.finish()
    }
}

/// A package whose files match its manifest (and whose signature, when
/// keys were given, is trusted).
#[derive(Debug, Clone)]
pub struct Package {
    pub manifest: Manifest,
    /// Its files but the manifest and its signature.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The trusted key (as configured) that signed it, if any verified.
    pub signed_by: Option<String>,
    /// `schema.json`, as written, and as the engine reads it.
    pub cloudformation_schema: Value,
    pub schema: ResourceSchema,
    /// The SHA-256 of the whole package.
    pub sha256: String,
}

impl Package {
    /// The handler library's bytes, for a dylib package.
    pub fn library(&self) -> Option<(&str, &[u8])> {
        match &self.manifest.handler {
            Some(Handler::Dylib { file, .. }) => {
                self.files.get(file).map(|b| (file.as_str(), b.as_slice()))
            }
            _ => None,
        }
    }
}

/// Reads and checks a package. With `trusted_keys` (minisign public keys,
/// base64, as `[registry] trusted_keys` holds them) a signature by one of
/// them is required; without, a signature is not checked.
pub fn open(bytes: &[u8], trusted_keys: &[String]) -> Result<Package, PackageError> {
    let mut entries = unpack(bytes)?;
    let manifest_bytes = entries.remove(MANIFEST).ok_or(PackageError::NoManifest)?;
    let signature = entries.remove(SIGNATURE);
    let manifest: Manifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| PackageError::BadManifest(e.to_string()))?;
    if manifest.format != FORMAT {
        return Err(PackageError::UnknownFormat(manifest.format));
    }
    // The signature first: a package signed by nobody trusted is refused
    // whatever else it holds.
    let signed_by = check_signature(&manifest_bytes, signature.as_deref(), trusted_keys)?;
    for (path, expected) in &manifest.files {
        let Some(file) = entries.get(path) else {
            return Err(PackageError::MissingFile(path.clone()));
        };
        let actual = sha256_hex(file);
        if &actual != expected {
            return Err(PackageError::ChecksumMismatch {
                file: path.clone(),
                expected: expected.clone(),
                actual,
            });
        }
    }
    if let Some(extra) = entries.keys().find(|p| !manifest.files.contains_key(*p)) {
        return Err(PackageError::UnlistedFile(extra.clone()));
    }
    let schema_bytes = entries
        .get(SCHEMA)
        .ok_or_else(|| PackageError::MissingFile(SCHEMA.into()))?;
    let cloudformation_schema: Value = serde_json::from_slice(schema_bytes)
        .map_err(|e| schema::SchemaError(format!("not JSON: {e}")))?;
    let schema = schema::from_cloudformation(&cloudformation_schema)?;
    if schema.type_name != manifest.type_name {
        return Err(PackageError::TypeNameMismatch {
            manifest: manifest.type_name.clone(),
            schema: schema.type_name.clone(),
        });
    }
    if let Some(Handler::Dylib { file, .. }) = &manifest.handler {
        if !entries.contains_key(file) {
            return Err(PackageError::MissingHandler(file.clone()));
        }
    }
    Ok(Package {
        manifest,
        files: entries,
        signed_by,
        cloudformation_schema,
        schema,
        sha256: sha256_hex(bytes),
    })
}

fn check_signature(
    manifest: &[u8],
    signature: Option<&[u8]>,
    trusted_keys: &[String],
) -> Result<Option<String>, PackageError> {
    if trusted_keys.is_empty() {
        return Ok(None);
    }
    let Some(signature) = signature else {
        return Err(PackageError::Unsigned);
    };
    let text = String::from_utf8_lossy(signature);
    let signature = minisign_verify::Signature::decode(&text).map_err(|e| {
        PackageError::UntrustedSignature(format!("{SIGNATURE} is not a minisign signature ({e})"))
    })?;
    let mut why = Vec::new();
    for key in trusted_keys {
        let public = minisign_verify::PublicKey::from_base64(key.trim()).map_err(|e| {
            PackageError::BadTrustedKey {
                key: key.clone(),
                reason: e.to_string(),
            }
        })?;
        match public.verify(manifest, &signature, false) {
            Ok(()) => return Ok(Some(key.clone())),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(PackageError::UntrustedSignature(why.join("; ")))
}

/// The files of a package, by path.
fn unpack(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, PackageError> {
    let gz = flate2::read::GzDecoder::new(bytes);
    let mut archive = tar::Archive::new(gz.take(MAX_UNPACKED_BYTES + 1));
    let mut files = BTreeMap::new();
    let mut total: u64 = 0;
    let not_archive = |e: std::io::Error| PackageError::NotAnArchive(e.to_string());
    for entry in archive.entries().map_err(not_archive)? {
        let mut entry = entry.map_err(not_archive)?;
        if entry.header().entry_type().is_dir() {
            continue;
        }
        let raw = entry
            .path()
            .map_err(not_archive)?
            .to_string_lossy()
            .into_owned();
        // `tar -C dir .` writes `./name`: the same file.
        let mut path = raw.as_str();
        while let Some(rest) = path.strip_prefix("./") {
            path = rest;
        }
        let path = path.to_string();
        if !entry.header().entry_type().is_file()
            || path.starts_with('/')
            || path
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(PackageError::BadPath(path));
        }
        total = total.saturating_add(entry.size());
        if total > MAX_UNPACKED_BYTES || files.len() >= MAX_FILES {
            return Err(PackageError::TooBig);
        }
        let mut content = Vec::with_capacity(entry.size() as usize);
        entry.read_to_end(&mut content).map_err(not_archive)?;
        files.insert(path, content);
    }
    Ok(files)
}

#[cfg(test)]
mod tests;
