//! The provider contract tests `cairn provider test` runs: a named checklist
//! played against one resource type through the same client the engine
//! uses (a built-in, a plugin in either isolation, a webhook handler), with
//! the engine's own schema check and planner deciding what it sends.
//!
//! Each test passes, fails (with what was sent, what came back and what was
//! expected) or is skipped (with why). Inputs come from the author (a
//! properties file: a create input, updates, an invalid input) or, where
//! the author gave none, are derived from the schema ([`derive`]).

pub mod derive;
mod hooks;
mod schema_check;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ErrorKind,
    ProviderError, ReadRequest, ReadResult, RequestContext, ResourceProvider, ResourceSchema,
    UpdateRequest,
};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::plan::{self, Decision};

/// What the author gives for one type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    /// Valid properties to create the resource with.
    pub create: Option<Map<String, Value>>,
    /// Properties to update it to, in order (each from the previous).
    pub updates: Vec<Map<String, Value>>,
    /// Properties the provider (or the schema) must refuse.
    pub invalid: Option<Map<String, Value>>,
}

/// A test's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Passed,
    Failed,
    Skipped,
}

/// One test's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TestReport {
    pub type_name: String,
    /// The test's name (stable: scripts and CI assert on it), with the
    /// changed properties for update tests: `update_in_place[Value]`.
    pub test: String,
    pub status: Status,
    /// Why it failed (what was expected) or why it was skipped; for a pass,
    /// what was checked.
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<Value>,
    pub millis: u64,
}

/// How the tests talk to the provider.
pub struct Target<'a> {
    pub type_name: &'a str,
    pub schema: &'a ResourceSchema,
    /// Every schema the provider declares (to check the type is declared
    /// once).
    pub declared: Vec<ResourceSchema>,
    pub provider: &'a dyn ResourceProvider,
    /// How long one call may take before the test fails it.
    pub call_timeout: Duration,
}

/// The stack the test requests claim to come from.
const STACK_NAME: &str = "cairn-provider-test";
const LOGICAL_ID: &str = "ContractTest";

/// Runs every test against `target`; resources it made are deleted before it
/// returns (a test that fails to delete says so).
pub async fn run(target: &Target<'_>, inputs: &Inputs) -> Vec<TestReport> {
    // A hook's library makes no resources: its own tests.
    if target.schema.description == cairn_sdk::HOOK_SCHEMA_DESCRIPTION {
        return hooks::run(target, inputs).await;
    }
    let mut run = Run {
        target,
        reports: Vec::new(),
        stack_id: format!(
            "arn:aws:cloudformation:us-east-1:123456789012:stack/{STACK_NAME}/{}",
            uuid::Uuid::new_v4()
        ),
        leftovers: Vec::new(),
        derived_updates: inputs.updates.is_empty(),
    };
    run.schema_well_formed(inputs);
    let create = match &inputs.create {
        Some(c) => Ok(c.clone()),
        None => derive::create_input(target.schema),
    };
    let create = match create.map(|c| (target.schema.validate(&c), c)) {
        Ok((Ok(coerced), _)) => coerced,
        Ok((Err(errors), given)) => {
            let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
            run.skip_all(&format!(
                "the create input does not pass the schema: {}",
                texts.join("; ")
            ));
            run.push(
                "create_input_valid",
                Status::Failed,
                "the create input must pass the type's schema".into(),
                Some(Value::Object(given)),
                Some(json!(texts)),
                Instant::now(),
            );
            return run.reports;
        }
        Err(why) => {
            run.skip_all(&why.to_string());
            return run.reports;
        }
    };
    run.lifecycle(create, inputs).await;
    run.expired_deadline_refused(inputs).await;
    run.clean_up().await;
    run.reports
}

/// The tests that call the provider, in order, for skipping them together.
const PROVIDER_TESTS: &[&str] = &[
    "create_returns_id_and_attributes",
    "create_repeated_request_id_same_resource",
    "drift_in_sync_after_create",
    "read_after_create_matches",
    "update_in_place",
    "update_create_only_replaces",
    "invalid_properties_refused",
    "delete_succeeds",
    "delete_again_not_found_or_success",
    "drift_deleted_after_delete",
    "read_missing_is_not_found",
    "expired_deadline_refused",
];

struct Run<'a, 't> {
    target: &'a Target<'t>,
    reports: Vec<TestReport>,
    stack_id: String,
    /// Physical ids made and not yet deleted (with the properties they were
    /// made with), deleted at the end.
    leftovers: Vec<(String, Map<String, Value>)>,
    /// The updates were derived from the schema, not given by the author:
    /// one the provider refuses as invalid says nothing about the contract.
    derived_updates: bool,
}

/// Why the read tests are skipped.
const NO_READ: &str =
    "the provider does not read this type (read answers NOT_SUPPORTED), so it cannot be imported";

/// A provider answer or the kit's own failure to get one.
type Answer<T> = Result<T, ProviderError>;

fn error_json(e: &ProviderError) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl<'a, 't> Run<'a, 't> {
    fn push(
        &mut self,
        test: &str,
        status: Status,
        message: String,
        sent: Option<Value>,
        received: Option<Value>,
        started: Instant,
    ) {
        self.reports.push(TestReport {
            type_name: self.target.type_name.to_string(),
            test: test.to_string(),
            status,
            message,
            sent,
            received,
            millis: started.elapsed().as_millis() as u64,
        });
    }

    fn skip(&mut self, test: &str, why: &str) {
        self.push(
            test,
            Status::Skipped,
            why.to_string(),
            None,
            None,
            Instant::now(),
        );
    }

    /// An update derived from the schema that the provider refuses as
    /// invalid: the schema cannot say what a valid value is.
    fn refused_derived(&self, e: &ProviderError) -> bool {
        self.derived_updates && e.kind == ErrorKind::InvalidRequest
    }

    fn skip_refused(&mut self, test: &str, e: &ProviderError) {
        self.skip(
            test,
            &format!("the provider refused the update derived from the schema as invalid ({e}); give valid updates with --properties or --update"),
        );
    }

    fn skip_all(&mut self, why: &str) {
        for t in PROVIDER_TESTS {
            self.skip(t, why);
        }
    }

    fn context(&self, request_id: &str, deadline_unix_ms: u64) -> RequestContext {
        RequestContext {
            stack_id: self.stack_id.clone(),
            stack_name: STACK_NAME.to_string(),
            logical_resource_id: LOGICAL_ID.to_string(),
            resource_type: self.target.type_name.to_string(),
            request_id: request_id.to_string(),
            deadline_unix_ms,
            tags: Default::default(),
            provider_settings: None,
        }
    }

    fn fresh_context(&self) -> RequestContext {
        let deadline = now_ms().saturating_add(self.target.call_timeout.as_millis() as u64);
        self.context(&uuid::Uuid::new_v4().to_string(), deadline)
    }

    /// A provider call, failed as Timeout when it does not answer in time.
    async fn call<T>(&self, f: impl std::future::Future<Output = Answer<T>>) -> Answer<T> {
        let limit = self.target.call_timeout + Duration::from_secs(5);
        tokio::time::timeout(limit, f).await.unwrap_or_else(|_| {
            Err(ProviderError::timeout(format!(
                "the provider did not answer within {} seconds",
                limit.as_secs()
            )))
        })
    }

    fn schema_well_formed(&mut self, inputs: &Inputs) {
        let started = Instant::now();
        let problems = schema_check::problems(
            self.target.type_name,
            self.target.schema,
            &self.target.declared,
            inputs,
        );
        let schema = serde_json::to_value(self.target.schema).ok();
        if problems.is_empty() {
            self.push(
                "schema_well_formed",
                Status::Passed,
                "the schema is declared once; every property's type, update behaviour, allowed values and refusal agree; the inputs name declared properties".into(),
                None,
                schema,
                started,
            );
        } else {
            self.push(
                "schema_well_formed",
                Status::Failed,
                problems.join("; "),
                None,
                schema,
                started,
            );
        }
    }

    async fn lifecycle(&mut self, create: Map<String, Value>, inputs: &Inputs) {
        let req = CreateRequest {
            context: self.fresh_context(),
            properties: create.clone(),
        };
        let Some(made) = self.create_returns_id_and_attributes(&req).await else {
            return;
        };
        self.create_repeated_request_id_same_resource(&req, &made)
            .await;
        let physical_id = made.physical_resource_id.clone();
        let drifts = self
            .drift_in_sync("drift_in_sync_after_create", &physical_id, &create)
            .await;
        let reads = self.read_after_create_matches(&physical_id, &create).await;
        let (physical_id, current) = self.updates(physical_id, &create, inputs, drifts).await;
        self.invalid_properties_refused(&create, inputs).await;
        if self.delete_twice(&physical_id, &current, drifts).await {
            self.read_missing_is_not_found(&physical_id, reads).await;
        }
    }

    /// A read of what was just made: every property the create was given,
    /// with the value it was given (a property whose value the provider
    /// turned into the physical id, such as a relative path made absolute,
    /// may read as that id), and no null. False when the provider cannot
    /// read the type.
    async fn read_after_create_matches(
        &mut self,
        physical_id: &str,
        given: &Map<String, Value>,
    ) -> bool {
        const TEST: &str = "read_after_create_matches";
        let started = Instant::now();
        let req = ReadRequest {
            context: self.fresh_context(),
            physical_resource_id: physical_id.to_string(),
        };
        let sent = serde_json::to_value(&req).ok();
        let properties = match self.call(self.target.provider.read(&req)).await {
            Ok(ReadResult::Found { properties, .. }) => properties,
            Ok(ReadResult::NotSupported) => {
                self.skip(TEST, NO_READ);
                return false;
            }
            Err(e) => {
                self.push(
                    TEST,
                    Status::Failed,
                    format!("read of the resource just made must find it; it failed: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
                return true;
            }
        };
        let received = Some(json!({"Outcome": "FOUND", "Properties": properties}));
        let mut faults: Vec<String> = properties
            .iter()
            .filter(|(_, v)| v.is_null())
            .map(|(k, _)| format!("{k} is null (a property without a value is left out)"))
            .collect();
        for (name, want) in given {
            match properties.get(name) {
                Some(got) if got == want => {}
                Some(Value::String(got)) if got == physical_id => {}
                Some(got) => faults.push(format!("{name} reads {got}, the create gave {want}")),
                None => faults.push(format!("{name} is missing (the create gave {want})")),
            }
        }
        if faults.is_empty() {
            let names: Vec<&str> = given.keys().map(String::as_str).collect();
            self.push(
                TEST,
                Status::Passed,
                format!("read {physical_id}: {} as created", names.join(", ")),
                sent,
                received,
                started,
            );
        } else {
            self.push(
                TEST,
                Status::Failed,
                format!(
                    "read must return every property the create set, as set: {}",
                    faults.join("; ")
                ),
                sent,
                received,
                started,
            );
        }
        true
    }

    /// A read of the deleted resource must answer NotFound.
    async fn read_missing_is_not_found(&mut self, physical_id: &str, reads: bool) {
        const TEST: &str = "read_missing_is_not_found";
        if !reads {
            self.skip(TEST, NO_READ);
            return;
        }
        let started = Instant::now();
        let req = ReadRequest {
            context: self.fresh_context(),
            physical_resource_id: physical_id.to_string(),
        };
        let sent = serde_json::to_value(&req).ok();
        match self.call(self.target.provider.read(&req)).await {
            Err(e) if e.is_not_found() => self.push(
                TEST,
                Status::Passed,
                format!("NotFound: {e}"),
                sent,
                Some(error_json(&e)),
                started,
            ),
            Err(e) => self.push(
                TEST,
                Status::Failed,
                format!(
                    "a read of a deleted resource must fail with NotFound; it failed with {}: {e}",
                    e.kind
                ),
                sent,
                Some(error_json(&e)),
                started,
            ),
            Ok(found) => self.push(
                TEST,
                Status::Failed,
                "a read of a deleted resource must fail with NotFound; it answered".into(),
                sent,
                serde_json::to_value(&found).ok(),
                started,
            ),
        }
    }

    /// The first create: a physical id and every declared attribute. `None`
    /// when the rest of the lifecycle cannot run (skipped, with the reason).
    async fn create_returns_id_and_attributes(
        &mut self,
        req: &CreateRequest,
    ) -> Option<CreateResult> {
        let started = Instant::now();
        let create = req.properties.clone();
        let sent = serde_json::to_value(req).ok();
        let made = self.call(self.target.provider.create(req)).await;
        let made = match made {
            Ok(m) => m,
            Err(e) => {
                self.push(
                    "create_returns_id_and_attributes",
                    Status::Failed,
                    format!("create must succeed with valid properties; it failed: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
                for t in &PROVIDER_TESTS[1..PROVIDER_TESTS.len() - 1] {
                    self.skip(t, "create failed");
                }
                if let Some(id) = e.physical_resource_id {
                    self.leftovers.push((id, create));
                }
                return None;
            }
        };
        let received = serde_json::to_value(&made).ok();
        let physical_id = made.physical_resource_id.clone();
        if !physical_id.is_empty() {
            self.leftovers.push((physical_id.clone(), create.clone()));
        }
        let missing: Vec<&String> = self
            .target
            .schema
            .attributes
            .keys()
            .filter(|a| !made.attributes.contains_key(*a))
            .collect();
        if physical_id.is_empty() {
            self.push(
                "create_returns_id_and_attributes",
                Status::Failed,
                "create must return a non-empty PhysicalResourceId (what Ref returns)".into(),
                sent.clone(),
                received.clone(),
                started,
            );
        } else if !missing.is_empty() {
            let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
            self.push(
                "create_returns_id_and_attributes",
                Status::Failed,
                format!(
                    "create must return every attribute the schema declares (Fn::GetAtt reads them); missing: {}",
                    names.join(", ")
                ),
                sent.clone(),
                received.clone(),
                started,
            );
        } else {
            self.push(
                "create_returns_id_and_attributes",
                Status::Passed,
                format!(
                    "physical id {physical_id}, attributes {}",
                    made.attributes
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                sent.clone(),
                received.clone(),
                started,
            );
        }
        if physical_id.is_empty() {
            for t in &PROVIDER_TESTS[1..PROVIDER_TESTS.len() - 1] {
                self.skip(t, "create returned no physical id");
            }
            return None;
        }
        Some(made)
    }

    /// The engine re-sends a create with the same request id after a crash:
    /// it must answer with the same resource, the same Ref and GetAtt
    /// values.
    async fn create_repeated_request_id_same_resource(
        &mut self,
        req: &CreateRequest,
        made: &CreateResult,
    ) {
        let create = &req.properties;
        let physical_id = &made.physical_resource_id;
        let sent = serde_json::to_value(req).ok();
        let started = Instant::now();
        let again = self.call(self.target.provider.create(req)).await;
        match again {
            Ok(a) if a.physical_resource_id == made.physical_resource_id
                && a.attributes == made.attributes =>
            {
                self.push(
                    "create_repeated_request_id_same_resource",
                    Status::Passed,
                    "the same request id answered with the same physical id and attributes".into(),
                    sent.clone(),
                    serde_json::to_value(&a).ok(),
                    started,
                );
            }
            Ok(a) => {
                if a.physical_resource_id != made.physical_resource_id
                    && !a.physical_resource_id.is_empty()
                {
                    self.leftovers.push((a.physical_resource_id.clone(), create.clone()));
                }
                self.push(
                    "create_repeated_request_id_same_resource",
                    Status::Failed,
                    format!(
                        "a create repeated with the same request id must answer with the first one's resource (physical id {physical_id} and the same attributes): the engine repeats a create it never learnt the outcome of"
                    ),
                    sent.clone(),
                    serde_json::to_value(&a).ok(),
                    started,
                );
            }
            Err(e) => self.push(
                "create_repeated_request_id_same_resource",
                Status::Failed,
                format!("a create repeated with the same request id must answer with the first one's resource; it failed: {e}"),
                sent.clone(),
                Some(error_json(&e)),
                started,
            ),
        }
    }

    /// The updates (given, or derived from the schema), each in place or by
    /// replacement as the schema decides; the physical id and properties
    /// they end with.
    async fn updates(
        &mut self,
        mut physical_id: String,
        create: &Map<String, Value>,
        inputs: &Inputs,
        drifts: bool,
    ) -> (String, Map<String, Value>) {
        let mut current = create.clone();
        let steps = match inputs.updates.is_empty() {
            false => inputs.updates.clone(),
            true => derive::updates(self.target.schema, &current),
        };
        let mut in_place = 0;
        let mut replaced = 0;
        for step in steps {
            let next = match self.target.schema.validate(&step) {
                Ok(n) => n,
                Err(errors) => {
                    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    self.skip(
                        "update_in_place",
                        &format!(
                            "an update input does not pass the schema: {}",
                            texts.join("; ")
                        ),
                    );
                    continue;
                }
            };
            match plan::decide(Some(self.target.schema), &current, &next, None, None) {
                Decision::NoChange | Decision::MetadataOnly => {
                    self.skip("update_in_place", "an update input changes nothing");
                }
                Decision::Unsupported { property } => self.skip(
                    &format!("update_in_place[{property}]"),
                    &format!("{property} is Immutable: the engine refuses to update it"),
                ),
                Decision::InPlace { changed } => {
                    in_place += 1;
                    if let Some(id) = self
                        .update_in_place(&physical_id, &current, &next, &changed, drifts)
                        .await
                    {
                        physical_id = id;
                        current = next;
                    }
                }
                Decision::Replace { changed } => {
                    replaced += 1;
                    if let Some(new_id) = self
                        .replace(&physical_id, &current, &next, &changed, drifts)
                        .await
                    {
                        physical_id = new_id;
                        current = next;
                    }
                }
            }
        }
        if in_place == 0 {
            self.skip(
                "update_in_place",
                "no update changes only Mutable properties (give one with --update)",
            );
        }
        if replaced == 0 {
            self.skip(
                "update_create_only_replaces",
                "no update changes a CreateOnly property (give one with --update)",
            );
        }
        (physical_id, current)
    }

    /// Checks drift is IN_SYNC; false when the provider does not check drift.
    async fn drift_in_sync(
        &mut self,
        test: &str,
        physical_id: &str,
        properties: &Map<String, Value>,
    ) -> bool {
        let started = Instant::now();
        let req = DriftRequest {
            context: self.fresh_context(),
            physical_resource_id: physical_id.to_string(),
            properties: properties.clone(),
        };
        let sent = serde_json::to_value(&req).ok();
        match self.call(self.target.provider.check_drift(&req)).await {
            Ok(DriftResult::InSync) => {
                self.push(
                    test,
                    Status::Passed,
                    "IN_SYNC".into(),
                    sent,
                    Some(json!({"Status": "IN_SYNC"})),
                    started,
                );
                true
            }
            Ok(DriftResult::NotChecked) => {
                self.skip(
                    test,
                    "the provider does not detect drift (check_drift answers NOT_CHECKED)",
                );
                false
            }
            Ok(other) => {
                self.push(
                    test,
                    Status::Failed,
                    "check_drift with the properties the resource has must answer IN_SYNC".into(),
                    sent,
                    serde_json::to_value(&other).ok(),
                    started,
                );
                true
            }
            Err(e) => {
                self.push(
                    test,
                    Status::Failed,
                    format!("check_drift must answer IN_SYNC; it failed: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
                true
            }
        }
    }

    /// Runs the drift check as `test`'s verdict: its report gets `passed`
    /// as message, or `failed` before the drift check's own.
    async fn drift_verdict(
        &mut self,
        test: &str,
        physical_id: &str,
        properties: &Map<String, Value>,
        started: Instant,
        passed: String,
        failed: &str,
    ) {
        let before = self.reports.len();
        self.drift_in_sync(test, physical_id, properties).await;
        if let Some(r) = self.reports.get_mut(before) {
            r.message = match r.status {
                Status::Passed => passed,
                _ => format!("{failed}: {}", r.message),
            };
            r.millis = started.elapsed().as_millis() as u64;
        }
    }

    async fn update_in_place(
        &mut self,
        physical_id: &str,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        changed: &[String],
        drifts: bool,
    ) -> Option<String> {
        let test = format!("update_in_place[{}]", changed.join(","));
        let started = Instant::now();
        let req = UpdateRequest {
            context: self.fresh_context(),
            physical_resource_id: physical_id.to_string(),
            properties: new.clone(),
            old_properties: old.clone(),
            changed: changed.to_vec(),
            drift: None,
        };
        let sent = serde_json::to_value(&req).ok();
        match self.call(self.target.provider.update(&req)).await {
            Ok(u)
                if u.physical_resource_id
                    .as_deref()
                    .is_none_or(|id| id == physical_id) =>
            {
                let received = serde_json::to_value(&u).ok();
                if !drifts {
                    self.push(
                        &test,
                        Status::Passed,
                        format!("updated in place; physical id {physical_id} kept"),
                        sent,
                        received,
                        started,
                    );
                    return Some(physical_id.to_string());
                }
                // One report for the test: the drift check's, which says
                // whether the new values are live.
                self.drift_verdict(
                    &test,
                    physical_id,
                    new,
                    started,
                    format!("updated in place; physical id {physical_id} kept; drift IN_SYNC with the new values"),
                    "after an in-place update check_drift with the new values must answer IN_SYNC",
                )
                .await;
                Some(physical_id.to_string())
            }
            Ok(u) => {
                self.push(
                    &test,
                    Status::Failed,
                    format!(
                        "an update of Mutable properties ({}) must keep the physical id {physical_id}; a provider that must replace the resource declares the property CreateOnly",
                        changed.join(", ")
                    ),
                    sent,
                    serde_json::to_value(&u).ok(),
                    started,
                );
                // The engine records the id an update answers with: the
                // tests go on with it.
                let moved = u.physical_resource_id.unwrap_or_default();
                for (id, props) in self
                    .leftovers
                    .iter_mut()
                    .filter(|(id, _)| id == physical_id)
                {
                    *id = moved.clone();
                    *props = new.clone();
                }
                Some(moved)
            }
            Err(e) if self.refused_derived(&e) => {
                self.skip_refused(&test, &e);
                None
            }
            Err(e) => {
                self.push(
                    &test,
                    Status::Failed,
                    format!("an update of Mutable properties must succeed; it failed: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
                None
            }
        }
    }

    /// The engine's replacement: create the new resource while the old one
    /// still exists, then delete the old one. The new physical id.
    async fn replace(
        &mut self,
        physical_id: &str,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        changed: &[String],
        drifts: bool,
    ) -> Option<String> {
        let test = format!("update_create_only_replaces[{}]", changed.join(","));
        let started = Instant::now();
        let req = CreateRequest {
            context: self.fresh_context(),
            properties: new.clone(),
        };
        let sent = serde_json::to_value(&req).ok();
        let made = match self.call(self.target.provider.create(&req)).await {
            Ok(m) => m,
            Err(e) if self.refused_derived(&e) => {
                self.skip_refused(&test, &e);
                return None;
            }
            Err(e) => {
                self.push(
                    &test,
                    Status::Failed,
                    format!("the planner replaces the resource (a CreateOnly property changed): creating the new one while the old one {physical_id} exists must succeed; it failed: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
                return None;
            }
        };
        let received = serde_json::to_value(&made).ok();
        let new_id = made.physical_resource_id.clone();
        if new_id.is_empty() || new_id == physical_id {
            self.push(
                &test,
                Status::Failed,
                format!("the replacement must be a new physical resource, not {physical_id}"),
                sent,
                received,
                started,
            );
            return None;
        }
        self.leftovers.push((new_id.clone(), new.clone()));
        let delete = DeleteRequest {
            context: self.fresh_context(),
            physical_resource_id: physical_id.to_string(),
            properties: old.clone(),
        };
        match self.call(self.target.provider.delete(&delete)).await {
            Ok(()) => {
                self.leftovers.retain(|(id, _)| id != physical_id);
            }
            Err(e) => {
                self.push(
                    &test,
                    Status::Failed,
                    format!("after the replacement was created, deleting the old resource {physical_id} must succeed; it failed: {e}"),
                    serde_json::to_value(&delete).ok(),
                    Some(error_json(&e)),
                    started,
                );
                return Some(new_id);
            }
        }
        if drifts {
            self.drift_verdict(
                &test,
                &new_id,
                new,
                started,
                format!("replaced: {physical_id} -> {new_id}, the old one deleted; drift IN_SYNC"),
                &format!("the replacement {new_id} must be IN_SYNC with its properties"),
            )
            .await;
        } else {
            self.push(
                &test,
                Status::Passed,
                format!("replaced: {physical_id} -> {new_id}, the old one deleted"),
                sent,
                received,
                started,
            );
        }
        Some(new_id)
    }

    async fn invalid_properties_refused(&mut self, valid: &Map<String, Value>, inputs: &Inputs) {
        const TEST: &str = "invalid_properties_refused";
        let started = Instant::now();
        let invalid = match &inputs.invalid {
            Some(i) => i.clone(),
            None => match derive::invalid_input(self.target.schema, valid) {
                Some(i) => i,
                None => {
                    self.skip(TEST, "no invalid input given (Invalid in the properties file) and none can be derived from the schema");
                    return;
                }
            },
        };
        // The engine checks the schema first: what it refuses never reaches
        // the provider, and the refusal names the property.
        let properties = match self.target.schema.validate(&invalid) {
            Err(errors) => {
                let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
                self.push(
                    TEST,
                    Status::Passed,
                    format!(
                        "refused by the schema before the provider is called: {}",
                        texts.join("; ")
                    ),
                    Some(Value::Object(invalid)),
                    None,
                    started,
                );
                return;
            }
            Ok(p) => p,
        };
        let req = CreateRequest {
            context: self.fresh_context(),
            properties: properties.clone(),
        };
        let sent = serde_json::to_value(&req).ok();
        // The properties that make it invalid: those that differ from the
        // valid input.
        let suspects: Vec<&String> = properties
            .keys()
            .filter(|k| valid.get(*k) != properties.get(*k))
            .chain(valid.keys().filter(|k| !properties.contains_key(*k)))
            .collect();
        match self.call(self.target.provider.create(&req)).await {
            Err(e)
                if e.kind == ErrorKind::InvalidRequest
                    && (suspects.is_empty()
                        || suspects.iter().any(|s| e.message.contains(s.as_str()))) =>
            {
                self.push(
                    TEST,
                    Status::Passed,
                    format!("refused: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
            }
            Err(e) => {
                let names: Vec<&str> = suspects.iter().map(|s| s.as_str()).collect();
                self.push(
                    TEST,
                    Status::Failed,
                    format!(
                        "invalid properties must be refused with InvalidRequest and a message naming the property ({}); the provider answered {}",
                        names.join(" or "),
                        e.kind
                    ),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
            }
            Ok(made) => {
                if !made.physical_resource_id.is_empty() {
                    self.leftovers
                        .push((made.physical_resource_id.clone(), properties));
                }
                self.push(
                    TEST,
                    Status::Failed,
                    "invalid properties must be refused with InvalidRequest; the provider created a resource".into(),
                    sent,
                    serde_json::to_value(&made).ok(),
                    started,
                );
            }
        }
    }

    /// False when the delete failed (the tests after it are skipped).
    async fn delete_twice(
        &mut self,
        physical_id: &str,
        properties: &Map<String, Value>,
        drifts: bool,
    ) -> bool {
        let started = Instant::now();
        let req = DeleteRequest {
            context: self.fresh_context(),
            physical_resource_id: physical_id.to_string(),
            properties: properties.clone(),
        };
        let sent = serde_json::to_value(&req).ok();
        match self.call(self.target.provider.delete(&req)).await {
            Ok(()) => {
                self.leftovers.retain(|(id, _)| id != physical_id);
                self.push(
                    "delete_succeeds",
                    Status::Passed,
                    format!("{physical_id} deleted"),
                    sent.clone(),
                    None,
                    started,
                );
            }
            Err(e) => {
                self.push(
                    "delete_succeeds",
                    Status::Failed,
                    format!("delete must succeed; it failed: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
                self.skip("delete_again_not_found_or_success", "delete failed");
                self.skip("drift_deleted_after_delete", "delete failed");
                self.skip("read_missing_is_not_found", "delete failed");
                return false;
            }
        }
        let started = Instant::now();
        let again = DeleteRequest {
            context: self.fresh_context(),
            ..req
        };
        let sent = serde_json::to_value(&again).ok();
        match self.call(self.target.provider.delete(&again)).await {
            Ok(()) => self.push(
                "delete_again_not_found_or_success",
                Status::Passed,
                "a second delete succeeded".into(),
                sent,
                None,
                started,
            ),
            Err(e) if e.is_not_found() => self.push(
                "delete_again_not_found_or_success",
                Status::Passed,
                format!("a second delete answered NotFound: {e}"),
                sent,
                Some(error_json(&e)),
                started,
            ),
            Err(e) => self.push(
                "delete_again_not_found_or_success",
                Status::Failed,
                format!("deleting a deleted resource must succeed or answer NotFound (the engine counts both as deleted); it answered {}", e.kind),
                sent,
                Some(error_json(&e)),
                started,
            ),
        }
        if !drifts {
            self.skip(
                "drift_deleted_after_delete",
                "the provider does not detect drift (check_drift answers NOT_CHECKED)",
            );
            return true;
        }
        let started = Instant::now();
        let req = DriftRequest {
            context: self.fresh_context(),
            physical_resource_id: physical_id.to_string(),
            properties: properties.clone(),
        };
        let sent = serde_json::to_value(&req).ok();
        match self.call(self.target.provider.check_drift(&req)).await {
            Ok(DriftResult::Deleted) => self.push(
                "drift_deleted_after_delete",
                Status::Passed,
                "DELETED".into(),
                sent,
                Some(json!({"Status": "DELETED"})),
                started,
            ),
            Ok(other) => self.push(
                "drift_deleted_after_delete",
                Status::Failed,
                "check_drift of a deleted resource must answer DELETED".into(),
                sent,
                serde_json::to_value(&other).ok(),
                started,
            ),
            Err(e) => self.push(
                "drift_deleted_after_delete",
                Status::Failed,
                format!("check_drift of a deleted resource must answer DELETED; it failed: {e}"),
                sent,
                Some(error_json(&e)),
                started,
            ),
        }
        true
    }

    /// A create whose deadline has passed: the engine has stopped waiting,
    /// so the provider must not make anything.
    async fn expired_deadline_refused(&mut self, inputs: &Inputs) {
        const TEST: &str = "expired_deadline_refused";
        let properties = match inputs
            .create
            .clone()
            .map(Ok)
            .unwrap_or_else(|| derive::create_input(self.target.schema))
            .map(|c| self.target.schema.validate(&c))
        {
            Ok(Ok(p)) => p,
            _ => {
                self.skip(TEST, "no valid create input");
                return;
            }
        };
        let started = Instant::now();
        let req = CreateRequest {
            context: self.context(
                &uuid::Uuid::new_v4().to_string(),
                now_ms().saturating_sub(1000),
            ),
            properties: properties.clone(),
        };
        let sent = serde_json::to_value(&req).ok();
        match self.call(self.target.provider.create(&req)).await {
            Err(e) if e.kind == ErrorKind::Timeout => {
                if let Some(id) = e.physical_resource_id.clone() {
                    self.leftovers.push((id, properties));
                }
                self.push(
                    TEST,
                    Status::Passed,
                    format!("refused: {e}"),
                    sent,
                    Some(error_json(&e)),
                    started,
                );
            }
            Err(e) => self.push(
                TEST,
                Status::Failed,
                format!("a call whose deadline has passed must be abandoned with Timeout; the provider answered {}", e.kind),
                sent,
                Some(error_json(&e)),
                started,
            ),
            Ok(made) => {
                if !made.physical_resource_id.is_empty() {
                    self.leftovers
                        .push((made.physical_resource_id.clone(), properties));
                }
                self.push(
                    TEST,
                    Status::Failed,
                    "a call whose deadline has passed must be abandoned with Timeout (RequestContext::check_deadline); the provider created a resource nobody waits for".into(),
                    sent,
                    serde_json::to_value(&made).ok(),
                    started,
                );
            }
        }
    }

    /// Deletes what the tests left; a failure is reported as its own test.
    async fn clean_up(&mut self) {
        let leftovers = std::mem::take(&mut self.leftovers);
        for (id, properties) in leftovers {
            let started = Instant::now();
            let req = DeleteRequest {
                context: self.fresh_context(),
                physical_resource_id: id.clone(),
                properties,
            };
            match self.call(self.target.provider.delete(&req)).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => self.push(
                    "clean_up",
                    Status::Failed,
                    format!(
                        "the kit could not delete {id}, which a test made; delete it by hand: {e}"
                    ),
                    serde_json::to_value(&req).ok(),
                    Some(error_json(&e)),
                    started,
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests;
