//! `Cairn::Test::Resource`, like Heat's `OS::Heat::TestResource`: a resource whose
//! whole state is one JSON file, `<dir>/<physical id>.json`. Tests (and users)
//! edit or delete the file to simulate drift and out-of-band damage.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_sdk::{
    Cancellation, CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, Health,
    PropertyDifference, PropertySchema, PropertyType, ProviderError, ReadRequest, ReadResult,
    RequestContext, ResourceProvider, ResourceSchema, StatusRequest, UpdateRequest, UpdateResult,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub const TYPE_NAME: &str = "Cairn::Test::Resource";

/// What the backing file holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct Record {
    pub physical_resource_id: String,
    pub stack_id: String,
    pub logical_resource_id: String,
    /// The request that created the resource, so a repeated create is recognised.
    pub request_id: String,
    pub properties: Map<String, Value>,
    /// The stack's tags as the last create or update applied them, and the
    /// system tags (the type is `taggable`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_tags: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Behaviour {
    #[serde(default)]
    fail: Option<Value>,
    #[serde(default)]
    fail_message: Option<String>,
    #[serde(default)]
    wait_seconds: Option<f64>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    fail_for: Option<Vec<String>>,
    #[serde(default)]
    unhealthy: Option<Value>,
}

impl Behaviour {
    fn of(props: &Map<String, Value>) -> Result<Self, ProviderError> {
        serde_json::from_value(Value::Object(props.clone())).map_err(ProviderError::from)
    }

    /// Whether `Fail` applies to this resource: to every one, or with
    /// `FailFor` only to the logical ids listed (a group's member names).
    fn fails_here(&self, op: &str, logical_id: &str) -> bool {
        self.fail_for
            .as_ref()
            .is_none_or(|only| only.iter().any(|l| l == logical_id))
            && self.fails(op)
    }

    /// `Unhealthy`: true, or the logical ids that report unhealthy.
    fn unhealthy(&self, logical_id: &str) -> bool {
        match &self.unhealthy {
            Some(Value::Bool(b)) => *b,
            Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(logical_id)),
            _ => false,
        }
    }

    fn fails(&self, op: &str) -> bool {
        match &self.fail {
            Some(Value::String(s)) => s == op,
            Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(op)),
            _ => false,
        }
    }

    /// Runs `work`, then waits so the whole operation, from the call's
    /// start at `called` (the record's read before `work` included), takes
    /// `WaitSeconds`; when `Fail` names `op`, waits and fails instead. As in
    /// Heat's `OS::Heat::TestResource`, the effect happens when the
    /// operation starts and the wait is for it to "complete". Counted from
    /// `work`'s start, a call took its wait plus a file read (a blocking
    /// hop, 0.2-0.5 ms with 50 calls at once), which benchmarks of the
    /// engine's critical path counted as the engine's.
    async fn run<T>(
        &self,
        op: &str,
        ctx: &RequestContext,
        called: tokio::time::Instant,
        work: impl std::future::Future<Output = Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let wait = self.wait_seconds.filter(|w| *w > 0.0).unwrap_or(0.0);
        let until = called + Duration::from_secs_f64(wait.min(86_400.0));
        if self.fails_here(op, &ctx.logical_resource_id) {
            wait_until(until).await;
            let msg = self.fail_message.clone().unwrap_or_else(|| {
                format!(
                    "{TYPE_NAME} {} was told to fail on {op}",
                    ctx.logical_resource_id
                )
            });
            return Err(ProviderError::internal(msg));
        }
        let out = work.await;
        wait_until(until).await;
        out
    }
}

/// Waits until `until`, to within a fraction of a millisecond. tokio's
/// timer rounds a deadline up to its next millisecond tick and wakes on
/// the tick after: a wait of 50 ms took 51.3 ms on average, and a chain
/// of 20 such resources 27 ms more than its 1.0 s, which is the
/// provider's lateness, not the engine's. The last stretch is slept on a
/// blocking thread, which the kernel wakes on time; a thread is held for
/// at most that stretch, and a cancelled wait drops it at the stretch's
/// start.
async fn wait_until(until: tokio::time::Instant) {
    const LAST_STRETCH: Duration = Duration::from_millis(2);
    let now = tokio::time::Instant::now();
    if until <= now {
        return;
    }
    if until - now > LAST_STRETCH {
        tokio::time::sleep_until(until - LAST_STRETCH).await;
    }
    let left = until.saturating_duration_since(tokio::time::Instant::now());
    if !left.is_zero() {
        // A JoinError is a panicked sleep: nothing to wait for then.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}

pub struct TestResourceProvider {
    dir: PathBuf,
}

/// 12 alphanumerics derived from the request id: a retried create (same request
/// id) gets the same name, a new create a fresh one.
fn suffix(request_id: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    Sha256::digest(request_id.as_bytes())
        .iter()
        .take(12)
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// The physical id a create makes: its `Name`, else one derived from the
/// request id (the same for a repeated request).
fn physical_id_of(b: &Behaviour, ctx: &RequestContext) -> String {
    match &b.name {
        Some(n) => n.clone(),
        None => format!(
            "{}-{}-{}",
            ctx.stack_name,
            ctx.logical_resource_id,
            suffix(&ctx.request_id)
        ),
    }
}

/// The shard directory of a physical id: FNV-1a's low byte, in hex (stable
/// across versions and platforms, unlike std's hasher).
pub fn shard(physical_id: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in physical_id.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("{:02x}", h & 0xff)
}

fn check_name(name: &str) -> Result<(), ProviderError> {
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0']) {
        return Err(ProviderError::invalid_request(format!(
            "Name '{name}' cannot be used as a {TYPE_NAME} name: it must be non-empty, not start with '.', and contain no '/'"
        )));
    }
    Ok(())
}

impl TestResourceProvider {
    pub fn new(dir: PathBuf) -> Self {
        TestResourceProvider { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<dir>/<shard>/<physical id>.json`: 256 shard directories (two hex
    /// digits of a hash of the id), so that tens of thousands of resources
    /// do not make one directory every create and delete contends on.
    fn path(&self, physical_id: &str) -> Result<PathBuf, ProviderError> {
        check_name(physical_id)?;
        Ok(self
            .dir
            .join(shard(physical_id))
            .join(format!("{physical_id}.json")))
    }

    async fn load(&self, physical_id: &str) -> Result<Record, ProviderError> {
        let path = self.path(physical_id)?;
        match tokio::fs::read(&path).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                ProviderError::internal(format!(
                    "backing file {} is not a valid record: {e}",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(ProviderError::not_found(format!(
                    "{TYPE_NAME} {physical_id} does not exist (its file {} is gone)",
                    path.display()
                )))
            }
            Err(e) => Err(ProviderError::internal(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    /// Writes atomically (temp file + rename) so a crash never leaves half a
    /// record; the three file-system steps share one blocking-pool hop.
    async fn write(&self, record: &Record) -> Result<(), ProviderError> {
        let path = self.path(&record.physical_resource_id)?;
        let bytes = serde_json::to_vec_pretty(record)
            .map_err(|e| ProviderError::internal(e.to_string()))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir).map_err(|e| {
                ProviderError::internal(format!("cannot create {}: {e}", dir.display()))
            })?;
            let tmp = path.with_extension("json.tmp");
            std::fs::write(&tmp, bytes).map_err(|e| {
                ProviderError::internal(format!("cannot write {}: {e}", tmp.display()))
            })?;
            std::fs::rename(&tmp, &path).map_err(|e| {
                ProviderError::internal(format!("cannot write {}: {e}", path.display()))
            })
        })
        .await
        .map_err(|e| ProviderError::internal(format!("file writer task failed: {e}")))?
    }

    fn attributes(record: &Record) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(
            "Value".into(),
            record
                .properties
                .get("Value")
                .cloned()
                .unwrap_or(Value::String(String::new())),
        );
        m.insert(
            "Name".into(),
            Value::String(record.physical_resource_id.clone()),
        );
        m.insert(
            "Arn".into(),
            Value::String(format!(
                "arn:cairn:test::resource/{}",
                record.physical_resource_id
            )),
        );
        m
    }
}

#[async_trait::async_trait]
impl ResourceProvider for TestResourceProvider {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new(TYPE_NAME)
            .describe("A test resource backed by one JSON file per physical resource")
            .property(
                "Name",
                PropertySchema::string()
                    .create_only()
                    .describe("Physical id; generated when absent"),
            )
            .property("Value", PropertySchema::json())
            .property("Description", PropertySchema::string())
            .property("Tags", PropertySchema::json())
            .property("Restart", PropertySchema::json().with_interruption())
            .property("Fixed", PropertySchema::json().immutable())
            .property(
                "Fail",
                PropertySchema::json()
                    .allowing(&["create", "update", "delete"])
                    .describe("create, update, delete, or a list of them"),
            )
            .property("FailMessage", PropertySchema::string())
            .property(
                "FailFor",
                PropertySchema::list(PropertyType::String)
                    .describe("Fail applies only to these logical ids (e.g. group member names)"),
            )
            .property(
                "Unhealthy",
                PropertySchema::json()
                    .describe("true, or the logical ids whose status check reports unhealthy"),
            )
            .property("WaitSeconds", PropertySchema::number())
            .taggable()
            .attribute("Value", "the Value property")
            .attribute("Name", "the physical id")
            .attribute("Arn", "arn:cairn:test::resource/<physical id>")
            .identified_by(&["Name"])
            .ref_returns("the physical id")]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        let called = tokio::time::Instant::now();
        let b = Behaviour::of(&req.properties)?;
        let ctx = &req.context;
        let physical_id = physical_id_of(&b, ctx);
        match self.load(&physical_id).await {
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
            Ok(existing) if existing.request_id != ctx.request_id => {
                return Err(ProviderError::already_exists(format!(
                    "{TYPE_NAME} {physical_id} already exists (owned by {} in {})",
                    existing.logical_resource_id, existing.stack_id
                )));
            }
            Ok(_) => {} // the same request again: write the same record
        }
        b.run("create", ctx, called, async {
            let record = Record {
                physical_resource_id: physical_id.clone(),
                stack_id: ctx.stack_id.clone(),
                logical_resource_id: ctx.logical_resource_id.clone(),
                request_id: ctx.request_id.clone(),
                properties: req.properties.clone(),
                tags: ctx.tags.desired.clone(),
                system_tags: ctx.tags.system.clone(),
            };
            self.write(&record).await?;
            Ok(CreateResult {
                physical_resource_id: physical_id.clone(),
                attributes: Self::attributes(&record),
                no_echo: false,
            })
        })
        .await
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let called = tokio::time::Instant::now();
        let b = Behaviour::of(&req.properties)?;
        let mut record = self.load(&req.physical_resource_id).await?;
        b.run("update", &req.context, called, async {
            record.properties = req.properties.clone();
            record.tags = req.context.tags.desired.clone();
            self.write(&record).await?;
            Ok(UpdateResult {
                physical_resource_id: None,
                attributes: Self::attributes(&record),
                no_echo: false,
            })
        })
        .await
    }

    /// The engine stopped waiting for a create: the file it wrote is
    /// removed, and the cancellation confirmed (nothing made). When no file
    /// of this request is there (not written yet, or another's), it cannot
    /// tell.
    async fn cancel_create(&self, req: &CreateRequest) -> Result<Cancellation, ProviderError> {
        let b = Behaviour::of(&req.properties)?;
        let physical_id = physical_id_of(&b, &req.context);
        match self.load(&physical_id).await {
            Ok(existing) if existing.request_id == req.context.request_id => {
                let path = self.path(&physical_id)?;
                tokio::fs::remove_file(&path).await.map_err(|e| {
                    ProviderError::internal(format!("cannot delete {}: {e}", path.display()))
                })?;
                Ok(Cancellation::NothingMade)
            }
            _ => Ok(Cancellation::Unknown),
        }
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        let called = tokio::time::Instant::now();
        let b = Behaviour::of(&req.properties)?;
        // A resource already gone is NotFound, which the engine counts as deleted.
        self.load(&req.physical_resource_id).await?;
        let path = self.path(&req.physical_resource_id)?;
        b.run("delete", &req.context, called, async {
            match tokio::fs::remove_file(&path).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(ProviderError::internal(format!(
                    "cannot delete {}: {e}",
                    path.display()
                ))),
            }
        })
        .await
    }

    async fn check_status(&self, req: &StatusRequest) -> Result<Health, ProviderError> {
        let record = self.load(&req.physical_resource_id).await?;
        let b = Behaviour::of(&record.properties)?;
        if b.unhealthy(&record.logical_resource_id) {
            return Ok(Health::Unhealthy {
                reason: format!(
                    "{TYPE_NAME} {} is marked Unhealthy",
                    req.physical_resource_id
                ),
            });
        }
        Ok(Health::Healthy)
    }

    /// The record's properties (its Name, the physical id, included) and
    /// attributes; NotFound when its file is gone.
    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        let record = self.load(&req.physical_resource_id).await?;
        let mut properties = record.properties.clone();
        properties.insert(
            "Name".into(),
            Value::String(record.physical_resource_id.clone()),
        );
        properties.retain(|_, v| !v.is_null());
        Ok(ReadResult::Found {
            properties,
            attributes: Self::attributes(&record),
        })
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        match self.load(&req.physical_resource_id).await {
            Ok(record) => Ok(DriftResult::from_differences(PropertyDifference::compare(
                &req.properties,
                &record.properties,
            ))),
            Err(e) if e.is_not_found() => Ok(DriftResult::Deleted),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_fnv1a_low_bytes_and_stable() {
        // The e2e tests' Python helper computes the same (cfn_client.py).
        assert_eq!(shard("t1"), "d6");
        assert_eq!(shard("stack-R0-abc"), "a5");
    }
    use serde_json::json;

    /// The wait never ends before its deadline, whether it is in the
    /// last stretch already or far from it, and a deadline passed returns
    /// at once (how close to the deadline it wakes is the bench's figure).
    #[tokio::test]
    async fn a_wait_never_ends_before_its_deadline() {
        for ms in [0u64, 1, 3, 25] {
            let until = tokio::time::Instant::now() + Duration::from_millis(ms);
            wait_until(until).await;
            assert!(tokio::time::Instant::now() >= until, "{ms} ms");
        }
        let past = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(2)).await;
        let start = std::time::Instant::now();
        wait_until(past).await;
        assert!(start.elapsed() < Duration::from_millis(100));
    }

    fn ctx(logical: &str, request: &str) -> RequestContext {
        RequestContext {
            stack_id: "arn:stack/s/1".into(),
            stack_name: "s".into(),
            logical_resource_id: logical.into(),
            resource_type: TYPE_NAME.into(),
            request_id: request.into(),
            deadline_unix_ms: u64::MAX,
            tags: Default::default(),
            provider_settings: None,
        }
    }

    fn props(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test]
    async fn lifecycle_idempotency_and_drift() {
        let dir = tempfile::tempdir().unwrap();
        let p = TestResourceProvider::new(dir.path().to_path_buf());
        let req = CreateRequest {
            context: ctx("A", "r1"),
            properties: props(json!({"Value": "v1"})),
        };
        let made = p.create(&req).await.unwrap();
        assert!(made.physical_resource_id.starts_with("s-A-"));
        assert_eq!(made.physical_resource_id.len(), "s-A-".len() + 12);
        // The same request again yields the same resource.
        assert_eq!(
            p.create(&req).await.unwrap().physical_resource_id,
            made.physical_resource_id
        );
        assert_eq!(made.attributes["Value"], json!("v1"));

        let id = made.physical_resource_id.clone();
        let drift = DriftRequest {
            context: ctx("A", "d"),
            physical_resource_id: id.clone(),
            properties: props(json!({"Value": "v2"})),
        };
        match p.check_drift(&drift).await.unwrap() {
            DriftResult::Modified { differences } => {
                assert_eq!(differences[0].property_path, "/Value")
            }
            other => panic!("{other:?}"),
        }
        let up = UpdateRequest {
            context: ctx("A", "u"),
            physical_resource_id: id.clone(),
            properties: props(json!({"Value": "v2"})),
            old_properties: props(json!({"Value": "v1"})),
            changed: vec!["Value".into()],
            drift: None,
        };
        p.update(&up).await.unwrap();
        assert_eq!(p.check_drift(&drift).await.unwrap(), DriftResult::InSync);
        let del = DeleteRequest {
            context: ctx("A", "x"),
            physical_resource_id: id.clone(),
            properties: Map::new(),
        };
        p.delete(&del).await.unwrap();
        assert!(p.delete(&del).await.unwrap_err().is_not_found());
        assert_eq!(p.check_drift(&drift).await.unwrap(), DriftResult::Deleted);
    }

    #[tokio::test]
    async fn named_resources_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let p = TestResourceProvider::new(dir.path().to_path_buf());
        let req = CreateRequest {
            context: ctx("A", "r1"),
            properties: props(json!({"Name": "fixed"})),
        };
        assert_eq!(p.create(&req).await.unwrap().physical_resource_id, "fixed");
        let other = CreateRequest {
            context: ctx("B", "r2"),
            properties: props(json!({"Name": "fixed"})),
        };
        assert_eq!(
            p.create(&other).await.unwrap_err().kind,
            cairn_sdk::ErrorKind::AlreadyExists
        );
        let failing = CreateRequest {
            context: ctx("C", "r3"),
            properties: props(json!({"Fail": ["create"], "FailMessage": "boom"})),
        };
        assert_eq!(p.create(&failing).await.unwrap_err().message, "boom");
        let failing = CreateRequest {
            context: ctx("C", "r3"),
            properties: props(json!({"Fail": "create"})),
        };
        assert_eq!(
            p.create(&failing).await.unwrap_err().message,
            "Cairn::Test::Resource C was told to fail on create"
        );
    }
}
