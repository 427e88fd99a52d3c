//! `Example::KV::Record`: a key-value record kept as a file `<Store>/<Key>`,
//! served by a provider plugin (a `cdylib` Cairn loads at run time).
//!
//! Properties: `Store` (directory, CreateOnly), `Key` (CreateOnly), `Value`
//! (Mutable), `Ttl` (Integer seconds, Mutable). Attributes: `Path`, `Size`.
//! Ref returns the file's path. Drift: the file's content against `Value`.
//! It also serves a macro, `KvRecords`, that writes records for a template.
//! Settings (its `[[providers]]` entry's `settings`): `Root`, the directory
//! a relative `Store` is under (default: the working directory).

use std::path::PathBuf;

use cairn_sdk::serde_json::{json, Map, Value};
use cairn_sdk::{
    async_trait, export_provider, CreateRequest, CreateResult, DeleteRequest, DriftRequest,
    DriftResult, MacroRequest, MacroResponse, PropertyDifference, PropertySchema, ProviderError,
    ReadRequest, ReadResult, RequestContext, ResourceProvider, ResourceSchema, UpdateRequest,
    UpdateResult,
};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Record {
    store: PathBuf,
    key: String,
    #[serde(default)]
    value: String,
    #[serde(default)]
    ttl: Option<i64>,
}

/// The directory a relative `Store` is under: the `Root` setting of the
/// provider's `[[providers]]` entry, else the working directory.
fn root(ctx: &RequestContext) -> PathBuf {
    ctx.provider_settings
        .as_ref()
        .and_then(|s| s.get("Root"))
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .unwrap_or_default()
}

impl Record {
    /// The record's file, its Store under `root` when relative.
    fn path(&mut self, root: &std::path::Path) -> Result<PathBuf, ProviderError> {
        self.store = root.join(&self.store);
        if self.key.is_empty() || self.key.contains(['/', '\\']) || self.key.starts_with('.') {
            return Err(ProviderError::invalid_request(format!(
                "Key {:?} must be a plain file name (no slashes, not starting with a dot)",
                self.key
            )));
        }
        let path = self.store.join(&self.key);
        std::path::absolute(&path).map_err(|e| {
            ProviderError::invalid_request(format!("Store {}: {e}", self.store.display()))
        })
    }

    fn contents(&self) -> String {
        match self.ttl {
            Some(t) => format!("{}\nttl={t}\n", self.value),
            None => format!("{}\n", self.value),
        }
    }
}

fn attributes(path: &std::path::Path, contents: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("Path".into(), json!(path.display().to_string()));
    m.insert("Size".into(), json!(contents.len()));
    m
}

fn io(what: &str, path: &std::path::Path, e: std::io::Error) -> ProviderError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ProviderError::not_found(format!("{what} {}: {e}", path.display()))
    } else {
        ProviderError::internal(format!("{what} {}: {e}", path.display()))
    }
}

#[derive(Default)]
pub struct KvProvider;

#[async_trait]
impl ResourceProvider for KvProvider {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new("Example::KV::Record")
            .describe("A key-value record kept as a file")
            .property("Store", PropertySchema::string().required().create_only())
            .property("Key", PropertySchema::string().required().create_only())
            .property("Value", PropertySchema::string())
            .property("Ttl", PropertySchema::integer())
            .attribute("Path", "the record's file")
            .attribute("Size", "bytes in the file")
            .identified_by(&["Path"])
            .ref_returns("the record's file path")]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let mut r: Record = req.properties()?;
        let path = r.path(&root(&req.context))?;
        let contents = r.contents();
        // Idempotent per request: the same record written again is the same.
        if let Ok(existing) = std::fs::read_to_string(&path) {
            if existing != contents {
                return Err(ProviderError::already_exists(format!(
                    "record {} already exists with other content",
                    path.display()
                )));
            }
        }
        std::fs::create_dir_all(&r.store).map_err(|e| io("cannot create store", &r.store, e))?;
        std::fs::write(&path, &contents).map_err(|e| io("cannot write record", &path, e))?;
        Ok(CreateResult {
            physical_resource_id: path.display().to_string(),
            attributes: attributes(&path, &contents),
            no_echo: false,
        })
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let r: Record = req.properties()?;
        let path = PathBuf::from(&req.physical_resource_id);
        let contents = r.contents();
        std::fs::write(&path, &contents).map_err(|e| io("cannot write record", &path, e))?;
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes: attributes(&path, &contents),
            no_echo: false,
        })
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let path = PathBuf::from(&req.physical_resource_id);
        std::fs::remove_file(&path).map_err(|e| io("cannot delete record", &path, e))
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        let r: Record = req.properties()?;
        let path = PathBuf::from(&req.physical_resource_id);
        let Ok(actual) = std::fs::read_to_string(&path) else {
            return Ok(DriftResult::Deleted);
        };
        let value = actual.lines().next().unwrap_or_default();
        let mut expected = Map::new();
        expected.insert("Value".into(), json!(r.value));
        let mut live = Map::new();
        live.insert("Value".into(), json!(value));
        Ok(DriftResult::from_differences(PropertyDifference::compare(
            &expected, &live,
        )))
    }

    /// The record as its file has it: Store (absolute) and Key from the
    /// path, Value and Ttl from the content; NotFound when it is gone.
    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        let path = PathBuf::from(&req.physical_resource_id);
        let (Some(store), Some(key)) = (path.parent(), path.file_name()) else {
            return Err(ProviderError::invalid_request(format!(
                "{} is not a record's path (<Store>/<Key>)",
                req.physical_resource_id
            )));
        };
        let contents =
            std::fs::read_to_string(&path).map_err(|e| io("cannot read record", &path, e))?;
        let mut lines = contents.lines();
        let mut properties = Map::new();
        properties.insert("Store".into(), json!(store.display().to_string()));
        properties.insert("Key".into(), json!(key.to_string_lossy()));
        properties.insert("Value".into(), json!(lines.next().unwrap_or_default()));
        if let Some(ttl) = lines.find_map(|l| l.strip_prefix("ttl=")?.parse::<i64>().ok()) {
            properties.insert("Ttl".into(), json!(ttl));
        }
        Ok(ReadResult::Found {
            properties,
            attributes: attributes(&path, &contents),
        })
    }

    /// The macro `KvRecords` (a `[[macros]]` entry with `provider = "kv"`):
    /// used as `Fn::Transform` in a template's Resources, it adds one
    /// record per entry of its `Entries` parameter, in its `Store`.
    async fn transform(&self, req: &MacroRequest) -> Result<MacroResponse, ProviderError> {
        if !req.transform_id.ends_with("::KvRecords") {
            return Ok(MacroResponse::failure(
                req,
                format!("kv serves the macro KvRecords, not {}", req.transform_id),
            ));
        }
        let (Some(store), Some(entries)) = (
            req.params.get("Store"),
            req.params.get("Entries").and_then(Value::as_object),
        ) else {
            return Ok(MacroResponse::failure(
                req,
                "KvRecords needs Parameters: {Store: a directory, Entries: {key: value, ...}}",
            ));
        };
        let mut fragment = req.fragment.as_object().cloned().unwrap_or_default();
        for (key, value) in entries {
            let name: String = key.chars().filter(char::is_ascii_alphanumeric).collect();
            fragment.insert(
                format!("Record{name}"),
                json!({"Type": "Example::KV::Record", "Properties": {"Store": store, "Key": key, "Value": value}}),
            );
        }
        Ok(MacroResponse::success(req, Value::Object(fragment)))
    }
}

export_provider!(KvProvider::default);
