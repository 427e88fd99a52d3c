//! `Cairn::Local::File`: a file on the machine running Cairn. The physical id is
//! the file's absolute path. Drift: the content or mode changed, or the file is
//! gone.

use std::path::{Path, PathBuf};

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DifferenceType, DriftRequest, DriftResult,
    PropertyDifference, PropertySchema, ProviderError, ReadRequest, ReadResult, ResourceProvider,
    ResourceSchema, UpdateRequest, UpdateResult,
};
use serde::Deserialize;
use serde_json::{Map, Value};

pub const TYPE_NAME: &str = "Cairn::Local::File";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Props {
    path: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    mode: Option<String>,
}

fn parse_mode(mode: &str) -> Result<u32, ProviderError> {
    u32::from_str_radix(mode.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| {
            ProviderError::invalid_request(format!(
                "Mode '{mode}' is not an octal file mode such as 0644"
            ))
        })
}

fn absolute(path: &str) -> Result<PathBuf, ProviderError> {
    let p = Path::new(path);
    if path.is_empty() {
        return Err(ProviderError::invalid_request("Path must not be empty"));
    }
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    std::env::current_dir()
        .map(|d| d.join(p))
        .map_err(|e| ProviderError::internal(format!("cannot resolve relative Path {path}: {e}")))
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> ProviderError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ProviderError::not_found(format!("file {} does not exist", path.display()))
    } else {
        ProviderError::internal(format!("cannot {what} {}: {e}", path.display()))
    }
}

#[cfg(unix)]
async fn set_mode(path: &Path, mode: u32) -> Result<(), ProviderError> {
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .await
        .map_err(|e| io_error(path, "set the mode of", e))
}

#[cfg(not(unix))]
async fn set_mode(_: &Path, _: u32) -> Result<(), ProviderError> {
    Ok(())
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(_: &std::fs::Metadata) -> u32 {
    0o644
}

async fn write(path: &Path, p: &Props) -> Result<(), ProviderError> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| io_error(dir, "create", e))?;
    }
    tokio::fs::write(path, p.content.as_bytes())
        .await
        .map_err(|e| io_error(path, "write", e))?;
    if let Some(m) = &p.mode {
        set_mode(path, parse_mode(m)?).await?;
    }
    Ok(())
}

fn attributes(path: &Path) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("Path".into(), Value::String(path.display().to_string()));
    m
}

#[derive(Default)]
pub struct LocalFileProvider;

#[async_trait::async_trait]
impl ResourceProvider for LocalFileProvider {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new(TYPE_NAME)
            .describe("A file on the machine running Cairn")
            .property(
                "Path",
                PropertySchema::string()
                    .required()
                    .create_only()
                    .describe("absolute, or relative to the working directory"),
            )
            .property("Content", PropertySchema::string())
            .property(
                "Mode",
                PropertySchema::string().describe("octal, e.g. 0644"),
            )
            .attribute("Path", "the absolute path")
            .identified_by(&["Path"])
            .ref_returns("the absolute path")]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let p: Props = req.properties()?;
        if let Some(m) = &p.mode {
            parse_mode(m)?;
        }
        let path = absolute(&p.path)?;
        if let Ok(existing) = tokio::fs::read(&path).await {
            // A retried create finds its own file; anything else is not ours.
            if existing != p.content.as_bytes() {
                return Err(ProviderError::already_exists(format!(
                    "file {} already exists",
                    path.display()
                )));
            }
        }
        write(&path, &p).await?;
        Ok(CreateResult {
            physical_resource_id: path.display().to_string(),
            attributes: attributes(&path),
            no_echo: false,
        })
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let p: Props = req.properties()?;
        let path = PathBuf::from(&req.physical_resource_id);
        tokio::fs::metadata(&path)
            .await
            .map_err(|e| io_error(&path, "read", e))?;
        write(&path, &p).await?;
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes: attributes(&path),
            no_echo: false,
        })
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let path = PathBuf::from(&req.physical_resource_id);
        tokio::fs::remove_file(&path)
            .await
            .map_err(|e| io_error(&path, "delete", e))
    }

    /// The file as it is: its absolute Path, Content and Mode (octal, four
    /// digits); NotFound when it is gone.
    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        let path = PathBuf::from(&req.physical_resource_id);
        if !path.is_absolute() {
            return Err(ProviderError::invalid_request(format!(
                "{TYPE_NAME} is identified by its absolute Path, not {}",
                req.physical_resource_id
            )));
        }
        let meta = tokio::fs::metadata(&path)
            .await
            .map_err(|e| io_error(&path, "read", e))?;
        let content = tokio::fs::read(&path)
            .await
            .map_err(|e| io_error(&path, "read", e))?;
        let mut properties = Map::new();
        properties.insert("Path".into(), Value::String(path.display().to_string()));
        properties.insert(
            "Content".into(),
            Value::String(String::from_utf8_lossy(&content).into_owned()),
        );
        properties.insert(
            "Mode".into(),
            Value::String(format!("{:04o}", mode_of(&meta))),
        );
        Ok(ReadResult::Found {
            properties,
            attributes: attributes(&path),
        })
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        let path = PathBuf::from(&req.physical_resource_id);
        let meta = match tokio::fs::metadata(&path).await {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DriftResult::Deleted),
            Err(e) => return Err(io_error(&path, "read", e)),
        };
        let content = tokio::fs::read(&path)
            .await
            .map_err(|e| io_error(&path, "read", e))?;
        let mut diffs = Vec::new();
        if let Some(Value::String(expected)) = req.properties.get("Content") {
            let actual = String::from_utf8_lossy(&content).into_owned();
            if *expected != actual {
                diffs.push(PropertyDifference {
                    property_path: "/Content".into(),
                    expected_value: expected.clone(),
                    actual_value: actual,
                    difference_type: DifferenceType::NotEqual,
                });
            }
        }
        if let Some(Value::String(expected)) = req.properties.get("Mode") {
            let actual = mode_of(&meta);
            if parse_mode(expected)? != actual {
                diffs.push(PropertyDifference {
                    property_path: "/Mode".into(),
                    expected_value: expected.clone(),
                    actual_value: format!("{actual:04o}"),
                    difference_type: DifferenceType::NotEqual,
                });
            }
        }
        Ok(DriftResult::from_differences(diffs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_sdk::RequestContext;
    use serde_json::json;

    fn ctx() -> RequestContext {
        RequestContext {
            stack_id: "s".into(),
            stack_name: "s".into(),
            logical_resource_id: "F".into(),
            resource_type: TYPE_NAME.into(),
            request_id: "r".into(),
            deadline_unix_ms: u64::MAX,
            tags: Default::default(),
            provider_settings: None,
        }
    }

    #[tokio::test]
    async fn create_drift_update_delete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/f.txt");
        let props = json!({"Path": path.to_str().unwrap(), "Content": "hello", "Mode": "0600"})
            .as_object()
            .cloned()
            .unwrap();
        let p = LocalFileProvider;
        let made = p
            .create(&CreateRequest {
                context: ctx(),
                properties: props.clone(),
            })
            .await
            .unwrap();
        assert_eq!(made.physical_resource_id, path.display().to_string());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
        let drift = DriftRequest {
            context: ctx(),
            physical_resource_id: made.physical_resource_id.clone(),
            properties: props.clone(),
        };
        assert_eq!(p.check_drift(&drift).await.unwrap(), DriftResult::InSync);
        std::fs::write(&path, "edited").unwrap();
        assert_eq!(
            p.check_drift(&drift).await.unwrap(),
            DriftResult::Modified {
                differences: vec![PropertyDifference {
                    property_path: "/Content".into(),
                    expected_value: "hello".into(),
                    actual_value: "edited".into(),
                    difference_type: DifferenceType::NotEqual
                }]
            }
        );
        let up = UpdateRequest {
            context: ctx(),
            physical_resource_id: made.physical_resource_id.clone(),
            properties: props.clone(),
            old_properties: props.clone(),
            changed: vec![],
            drift: None,
        };
        p.update(&up).await.unwrap();
        assert_eq!(p.check_drift(&drift).await.unwrap(), DriftResult::InSync);
        let del = DeleteRequest {
            context: ctx(),
            physical_resource_id: made.physical_resource_id.clone(),
            properties: props,
        };
        p.delete(&del).await.unwrap();
        assert!(p.delete(&del).await.unwrap_err().is_not_found());
        assert_eq!(p.check_drift(&drift).await.unwrap(), DriftResult::Deleted);
    }

    #[tokio::test]
    async fn refuses_foreign_files_and_bad_modes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("taken");
        std::fs::write(&path, "someone else's").unwrap();
        let props = json!({"Path": path.to_str().unwrap(), "Content": "mine"})
            .as_object()
            .cloned()
            .unwrap();
        let e = LocalFileProvider
            .create(&CreateRequest {
                context: ctx(),
                properties: props,
            })
            .await
            .unwrap_err();
        assert_eq!(e.message, format!("file {} already exists", path.display()));
        let props = json!({"Path": dir.path().join("x").to_str().unwrap(), "Mode": "999"})
            .as_object()
            .cloned()
            .unwrap();
        let e = LocalFileProvider
            .create(&CreateRequest {
                context: ctx(),
                properties: props,
            })
            .await
            .unwrap_err();
        assert_eq!(
            e.message,
            "Mode '999' is not an octal file mode such as 0644"
        );
    }
}
