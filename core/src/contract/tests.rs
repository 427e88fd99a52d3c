//! The checklist against two in-memory providers: one that keeps the
//! contract (every test passes) and one that breaks it in known ways
//! (exactly those tests fail).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertyDifference,
    PropertySchema, ProviderError, ReadRequest, ReadResult, ResourceProvider, ResourceSchema,
    UpdateRequest, UpdateResult,
};
use serde_json::{json, Map, Value};

use super::*;

/// How the fake breaks the contract.
#[derive(Default, Clone, Copy)]
struct Breaks {
    new_id_per_create: bool,
    new_id_on_update: bool,
    second_delete_fails: bool,
    ignores_deadline: bool,
    accepts_anything: bool,
    no_attribute: bool,
    /// Refuses every update as invalid.
    picky: bool,
    /// Reads a Size it was not given, and a deleted thing as found.
    misreads: bool,
    /// Cannot read (the trait's default).
    unreadable: bool,
}

#[derive(Default)]
struct Fake {
    breaks: Breaks,
    /// physical id -> properties
    live: Mutex<HashMap<String, Map<String, Value>>>,
    by_request: Mutex<HashMap<String, String>>,
    counter: Mutex<u32>,
}

impl Fake {
    fn next_id(&self, name: &Value) -> String {
        let mut c = self.counter.lock().unwrap();
        *c += 1;
        format!("{}-{}", name.as_str().unwrap_or("x"), *c)
    }
}

fn schema() -> ResourceSchema {
    ResourceSchema::new("Test::Contract::Thing")
        .property("Name", PropertySchema::string().required().create_only())
        .property("Size", PropertySchema::integer())
        .attribute("Arn", "the thing's ARN")
}

#[async_trait::async_trait]
impl ResourceProvider for Fake {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![schema()]
    }
    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        if !self.breaks.ignores_deadline {
            req.context.check_deadline("Create")?;
        }
        if !self.breaks.accepts_anything {
            if let Some(s) = req.properties.get("Size") {
                if s.as_i64().is_some_and(|n| n > 100) {
                    return Err(ProviderError::invalid_request("Size must be at most 100"));
                }
            }
        }
        let known = self
            .by_request
            .lock()
            .unwrap()
            .get(&req.context.request_id)
            .cloned();
        let id = match known {
            Some(id) if !self.breaks.new_id_per_create => id,
            _ => self.next_id(&req.properties["Name"]),
        };
        self.by_request
            .lock()
            .unwrap()
            .insert(req.context.request_id.clone(), id.clone());
        self.live
            .lock()
            .unwrap()
            .insert(id.clone(), req.properties.clone());
        let mut attributes = Map::new();
        if !self.breaks.no_attribute {
            attributes.insert("Arn".into(), json!(format!("arn:test:{id}")));
        }
        Ok(CreateResult {
            physical_resource_id: id,
            attributes,
            no_echo: false,
        })
    }
    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        if self.breaks.picky {
            return Err(ProviderError::invalid_request("Size cannot be that"));
        }
        let mut live = self.live.lock().unwrap();
        if !live.contains_key(&req.physical_resource_id) {
            return Err(ProviderError::not_found("gone"));
        }
        let id = if self.breaks.new_id_on_update {
            format!("{}-moved", req.physical_resource_id)
        } else {
            req.physical_resource_id.clone()
        };
        live.remove(&req.physical_resource_id);
        live.insert(id.clone(), req.properties.clone());
        Ok(UpdateResult {
            physical_resource_id: Some(id),
            ..Default::default()
        })
    }
    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        match self.live.lock().unwrap().remove(&req.physical_resource_id) {
            Some(_) => Ok(()),
            None if self.breaks.second_delete_fails => {
                Err(ProviderError::internal("cannot delete what is not there"))
            }
            None => Err(ProviderError::not_found("no such thing")),
        }
    }
    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        if self.breaks.unreadable {
            return Ok(ReadResult::NotSupported);
        }
        let live = self
            .live
            .lock()
            .unwrap()
            .get(&req.physical_resource_id)
            .cloned();
        let properties = match (live, self.breaks.misreads) {
            (Some(mut p), true) => {
                p.insert("Size".into(), json!(99));
                p
            }
            (Some(p), false) => p,
            (None, true) => obj(json!({"Name": "ghost"})),
            (None, false) => return Err(ProviderError::not_found("no such thing")),
        };
        Ok(ReadResult::Found {
            properties,
            attributes: obj(json!({"Arn": format!("arn:test:{}", req.physical_resource_id)})),
        })
    }
    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(
            match self.live.lock().unwrap().get(&req.physical_resource_id) {
                None => DriftResult::Deleted,
                Some(actual) => DriftResult::from_differences(PropertyDifference::compare(
                    &req.properties,
                    actual,
                )),
            },
        )
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

async fn full_reports(fake: &Fake, inputs: &Inputs) -> Vec<TestReport> {
    let s = schema();
    let target = Target {
        type_name: "Test::Contract::Thing",
        schema: &s,
        declared: fake.schema(),
        provider: fake,
        call_timeout: Duration::from_secs(5),
    };
    run(&target, inputs).await
}

async fn reports(fake: &Fake, inputs: &Inputs) -> Vec<(String, Status)> {
    full_reports(fake, inputs)
        .await
        .into_iter()
        .map(|r| (r.test, r.status))
        .collect()
}

fn inputs() -> Inputs {
    Inputs {
        create: Some(obj(json!({"Name": "a", "Size": 1}))),
        updates: vec![
            obj(json!({"Name": "a", "Size": 2})),
            obj(json!({"Name": "b", "Size": 2})),
        ],
        invalid: Some(obj(json!({"Name": "a", "Size": 1000}))),
    }
}

fn named(list: &[(&str, Status)]) -> Vec<(String, Status)> {
    list.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[tokio::test]
async fn a_provider_that_keeps_the_contract_passes_every_test_and_is_left_empty() {
    let fake = Fake::default();
    let got = reports(&fake, &inputs()).await;
    assert_eq!(
        got,
        named(&[
            ("schema_well_formed", Status::Passed),
            ("create_returns_id_and_attributes", Status::Passed),
            ("create_repeated_request_id_same_resource", Status::Passed),
            ("drift_in_sync_after_create", Status::Passed),
            ("read_after_create_matches", Status::Passed),
            ("update_in_place[Size]", Status::Passed),
            ("update_create_only_replaces[Name]", Status::Passed),
            ("invalid_properties_refused", Status::Passed),
            ("delete_succeeds", Status::Passed),
            ("delete_again_not_found_or_success", Status::Passed),
            ("drift_deleted_after_delete", Status::Passed),
            ("read_missing_is_not_found", Status::Passed),
            ("expired_deadline_refused", Status::Passed),
        ])
    );
    assert!(fake.live.lock().unwrap().is_empty());
}

#[tokio::test]
async fn each_broken_promise_fails_its_own_test() {
    let fake = Fake {
        breaks: Breaks {
            new_id_per_create: true,
            new_id_on_update: true,
            second_delete_fails: true,
            ignores_deadline: true,
            accepts_anything: true,
            no_attribute: true,
            picky: false,
            misreads: true,
            unreadable: false,
        },
        ..Default::default()
    };
    let got = reports(&fake, &inputs()).await;
    assert_eq!(
        got,
        named(&[
            ("schema_well_formed", Status::Passed),
            ("create_returns_id_and_attributes", Status::Failed),
            ("create_repeated_request_id_same_resource", Status::Failed),
            ("drift_in_sync_after_create", Status::Passed),
            ("read_after_create_matches", Status::Failed),
            ("update_in_place[Size]", Status::Failed),
            ("update_create_only_replaces[Name]", Status::Passed),
            ("invalid_properties_refused", Status::Failed),
            ("delete_succeeds", Status::Passed),
            ("delete_again_not_found_or_success", Status::Failed),
            ("drift_deleted_after_delete", Status::Passed),
            ("read_missing_is_not_found", Status::Failed),
            ("expired_deadline_refused", Status::Failed),
        ])
    );
    // What a broken provider made is deleted too.
    assert!(
        fake.live.lock().unwrap().is_empty(),
        "{:?}",
        fake.live.lock().unwrap()
    );
}

#[tokio::test]
async fn without_inputs_they_are_derived_from_the_schema() {
    let fake = Fake::default();
    let got = reports(&fake, &Inputs::default()).await;
    assert_eq!(
        got,
        named(&[
            ("schema_well_formed", Status::Passed),
            ("create_returns_id_and_attributes", Status::Passed),
            ("create_repeated_request_id_same_resource", Status::Passed),
            ("drift_in_sync_after_create", Status::Passed),
            ("read_after_create_matches", Status::Passed),
            ("update_in_place[Size]", Status::Passed),
            ("update_create_only_replaces[Name]", Status::Passed),
            ("invalid_properties_refused", Status::Passed),
            ("delete_succeeds", Status::Passed),
            ("delete_again_not_found_or_success", Status::Passed),
            ("drift_deleted_after_delete", Status::Passed),
            ("read_missing_is_not_found", Status::Passed),
            ("expired_deadline_refused", Status::Passed),
        ])
    );
}

#[test]
fn schema_problems_name_the_property() {
    let mut kept = PropertySchema::string();
    kept.refusal = Some("never".into());
    let s = ResourceSchema::new("Bad")
        .property("Mode", PropertySchema::integer().allowing(&["a"]))
        .property("Kept", kept);
    let p = schema_check::problems("Bad", &s, &[s.clone(), s.clone()], &Inputs::default());
    assert_eq!(
        p,
        vec![
            "type name Bad must be Organization::Service::Resource (alphanumeric segments) or Custom::Name".to_string(),
            "the provider's schema() must declare Bad once; it declares it 2 times".to_string(),
            "property Kept has a refusal reason but is Mutable: only an Immutable property refuses updates".to_string(),
            "property Mode lists allowed values but is of type Integer: allowed values are strings".to_string(),
        ]
    );
}

#[tokio::test]
async fn a_derived_update_the_provider_refuses_as_invalid_is_skipped_a_given_one_fails() {
    let picky = || Fake {
        breaks: Breaks {
            picky: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let status =
        |got: &[(String, Status)], test: &str| got.iter().find(|(t, _)| t == test).map(|(_, s)| *s);
    let derived = reports(&picky(), &Inputs::default()).await;
    assert_eq!(
        status(&derived, "update_in_place[Size]"),
        Some(Status::Skipped)
    );
    let given = reports(&picky(), &inputs()).await;
    assert_eq!(
        status(&given, "update_in_place[Size]"),
        Some(Status::Failed)
    );
}

#[tokio::test]
async fn a_provider_that_cannot_read_skips_the_read_tests_saying_why() {
    let fake = Fake {
        breaks: Breaks {
            unreadable: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let skipped: Vec<(String, String)> = full_reports(&fake, &inputs())
        .await
        .into_iter()
        .filter(|r| r.status == Status::Skipped)
        .map(|r| (r.test, r.message))
        .collect();
    let why = "the provider does not read this type (read answers NOT_SUPPORTED), so it cannot be imported";
    assert_eq!(
        skipped,
        vec![
            ("read_after_create_matches".to_string(), why.to_string()),
            ("read_missing_is_not_found".to_string(), why.to_string()),
        ]
    );
}

#[tokio::test]
async fn a_misread_names_the_property_and_both_values() {
    let fake = Fake {
        breaks: Breaks {
            misreads: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let reports = full_reports(&fake, &inputs()).await;
    let message = |test: &str| {
        reports
            .iter()
            .find(|r| r.test == test)
            .map(|r| r.message.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        message("read_after_create_matches"),
        "read must return every property the create set, as set: Size reads 99, the create gave 1"
    );
    assert_eq!(
        message("read_missing_is_not_found"),
        "a read of a deleted resource must fail with NotFound; it answered"
    );
}
