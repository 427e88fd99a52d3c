//! The simulator's provider: a scripted "cloud" whose live resources
//! outlive any engine, so that what a crashed engine made is still there
//! for the checks.
//!
//! Two types. `Sim::Thing` is idempotent per request id (a repeated create
//! answers with what the first made), like every built-in. `Sim::Handler`
//! is a CloudFormation custom-resource handler written for AWS: every
//! Create it receives makes a new resource, so a Create sent twice with
//! one request id is a defect the cloud records; asked to recover, it
//! answers with the response it gave (Cairn keeps handlers' responses).
//!
//! Properties steer a resource: `Name` (create-only: a new one replaces),
//! `Value` (updated in place), `Fail` (`create`, `update` or `delete`: a
//! definite failure) and `Hang` (`create`: the work is done but no answer
//! ever comes, asking again included). The cloud can be `down` (every
//! call fails as a provider that cannot start) and `healed` (scripts no
//! longer apply: the final clean-up of every run).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ErrorKind,
    PropertySchema, ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};

pub const THING: &str = "Sim::Thing";
pub const HANDLER: &str = "Sim::Handler";
/// The words of a handler Create that Cairn stopped waiting for.
pub const NEVER_TWICE: &str = "a custom-resource Create is never sent twice";

/// One live resource of the cloud.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    pub type_name: String,
    pub logical_id: String,
    pub request_id: String,
    pub properties: Map<String, Value>,
}

#[derive(Default)]
struct State {
    live: BTreeMap<String, Live>,
    /// Request id → the physical id its create made.
    made_by: HashMap<String, String>,
    /// Handler requests received per request id.
    handler_requests: HashMap<String, u32>,
    /// Request ids whose (Handler) create was answered.
    answered: HashMap<String, String>,
    /// Request ids of Handler updates and deletes answered (the answer).
    answered_other: HashMap<String, Result<(), String>>,
    defects: Vec<String>,
    next: u64,
    down: bool,
    healed: bool,
}

impl State {
    /// Counts a request a Handler received; a second one with the same
    /// request id is a defect (a handler written for AWS acts on it again).
    fn received(&mut self, ctx: &cairn_sdk::RequestContext, kind: &str) {
        let n = self
            .handler_requests
            .entry(ctx.request_id.clone())
            .or_default();
        *n += 1;
        if *n > 1 {
            self.defects.push(format!(
                "{} {}: {kind} request {} sent {} times",
                ctx.resource_type, ctx.logical_resource_id, ctx.request_id, n
            ));
        }
    }

    /// What a Handler answered to an update or delete, if it did.
    fn answer_of(&self, ctx: &cairn_sdk::RequestContext, kind: &str) -> Result<(), ProviderError> {
        match self.answered_other.get(&ctx.request_id) {
            Some(Ok(())) => Ok(()),
            Some(Err(reason)) => Err(ProviderError::invalid_request(reason.clone())),
            None => Err(ProviderError::internal(format!(
                "Cairn stopped waiting for the handler's response to {kind} request {}; {NEVER_TWICE}",
                ctx.request_id
            ))),
        }
    }
}

#[derive(Default)]
pub struct Cloud {
    state: Mutex<State>,
}

impl Cloud {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// Every live resource by physical id.
    pub fn live(&self) -> BTreeMap<String, Live> {
        self.with(|s| s.live.clone())
    }

    /// The request id whose create made `physical`.
    pub fn defects(&self) -> Vec<String> {
        self.with(|s| s.defects.clone())
    }

    pub fn set_down(&self, down: bool) {
        self.with(|s| s.down = down);
    }

    pub fn heal(&self) {
        self.with(|s| s.healed = true);
    }

    fn script(props: &Map<String, Value>, key: &str, op: &str, healed: bool) -> bool {
        !healed && props.get(key).and_then(Value::as_str) == Some(op)
    }

    fn unavailable() -> ProviderError {
        ProviderError::internal("provider sim cannot start: the simulated cloud is down")
    }

    fn update_in(s: &mut State, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        if Self::script(&req.properties, "Fail", "update", s.healed) {
            return Err(ProviderError::invalid_request(format!(
                "{} was told to fail on update",
                req.context.logical_resource_id
            )));
        }
        let Some(live) = s.live.get_mut(&req.physical_resource_id) else {
            return Err(ProviderError::not_found(format!(
                "{} does not exist",
                req.physical_resource_id
            )));
        };
        live.properties = req.properties.clone();
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes: result(&req.physical_resource_id).attributes,
            no_echo: false,
        })
    }

    fn delete_in(s: &mut State, req: &DeleteRequest) -> Result<(), ProviderError> {
        if Self::script(&req.properties, "Fail", "delete", s.healed) {
            return Err(ProviderError::new(
                ErrorKind::InternalFailure,
                format!(
                    "{} was told to fail on delete",
                    req.context.logical_resource_id
                ),
            ));
        }
        match s.live.remove(&req.physical_resource_id) {
            Some(_) => Ok(()),
            None => Err(ProviderError::not_found(format!(
                "{} does not exist",
                req.physical_resource_id
            ))),
        }
    }

    fn create_in(
        &self,
        req: &CreateRequest,
        recovering: bool,
    ) -> Result<CreateResult, ProviderError> {
        let ctx = &req.context;
        self.with(|s| {
            if s.down {
                return Err(Self::unavailable());
            }
            let handler = ctx.resource_type == HANDLER;
            if handler && recovering {
                // What Cairn kept of the handler's response, if it came.
                // As Cairn's webhook provider: the kept response, else (the
                // engine that sent it stopped before the answer came) the
                // physical id generated for it, to delete.
                return match s.answered.get(&ctx.request_id) {
                    Some(id) => Ok(result(id)),
                    None => Err(ProviderError::internal(format!(
                        "Cairn stopped waiting for the handler's response to Create request {}; {NEVER_TWICE}",
                        ctx.request_id
                    ))
                    .leaving(format!("gen-{}", ctx.request_id))),
                };
            }
            let healed = s.healed;
            let physical = match s.made_by.get(&ctx.request_id) {
                Some(id) if !handler => id.clone(),
                _ => {
                    if handler {
                        s.received(ctx, "Create");
                    }
                    if Self::script(&req.properties, "Fail", "create", healed) {
                        return Err(ProviderError::invalid_request(format!(
                            "{} was told to fail on create",
                            ctx.logical_resource_id
                        )));
                    }
                    s.next += 1;
                    let id = format!("{}-{}", ctx.logical_resource_id, s.next);
                    s.live.insert(
                        id.clone(),
                        Live {
                            type_name: ctx.resource_type.clone(),
                            logical_id: ctx.logical_resource_id.clone(),
                            request_id: ctx.request_id.clone(),
                            properties: req.properties.clone(),
                        },
                    );
                    s.made_by.insert(ctx.request_id.clone(), id.clone());
                    id
                }
            };
            if Self::script(&req.properties, "Hang", "create", healed) {
                return Err(ProviderError::timeout(format!(
                    "Resource creation timed out after 1 seconds ({})",
                    ctx.logical_resource_id
                )));
            }
            if handler {
                s.answered.insert(ctx.request_id.clone(), physical.clone());
            }
            Ok(result(&physical))
        })
    }
}

fn result(physical: &str) -> CreateResult {
    let mut attributes = Map::new();
    attributes.insert("Arn".into(), Value::String(format!("sim:{physical}")));
    CreateResult {
        physical_resource_id: physical.to_string(),
        attributes,
        no_echo: false,
    }
}

fn schema(type_name: &str) -> ResourceSchema {
    ResourceSchema::new(type_name)
        .property("Name", PropertySchema::string().create_only())
        .property("Value", PropertySchema::string())
        .property("Fail", PropertySchema::string())
        .property("Hang", PropertySchema::string())
        .attribute("Arn", "sim:<physical id>")
}

#[async_trait::async_trait]
impl ResourceProvider for Cloud {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![schema(THING), schema(HANDLER)]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.create_in(req, false)
    }

    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.create_in(req, true)
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        self.with(|s| {
            if s.down {
                return Err(Self::unavailable());
            }
            let handler = req.context.resource_type == HANDLER;
            if handler {
                s.received(&req.context, "Update");
            }
            let outcome = Self::update_in(s, req);
            if handler {
                let answer = outcome.as_ref().map(|_| ()).map_err(|e| e.message.clone());
                s.answered_other
                    .insert(req.context.request_id.clone(), answer);
            }
            outcome
        })
    }

    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        if req.context.resource_type != HANDLER {
            return self.update(req).await;
        }
        self.with(|s| {
            s.answer_of(&req.context, "Update")?;
            Ok(UpdateResult {
                physical_resource_id: None,
                attributes: result(&req.physical_resource_id).attributes,
                no_echo: false,
            })
        })
    }

    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        if req.context.resource_type != HANDLER {
            return self.delete(req).await;
        }
        self.with(|s| s.answer_of(&req.context, "Delete"))
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        self.with(|s| {
            if s.down {
                return Err(Self::unavailable());
            }
            let handler = req.context.resource_type == HANDLER;
            if handler {
                s.received(&req.context, "Delete");
            }
            let outcome = Self::delete_in(s, req);
            if handler {
                let answer = match &outcome {
                    Ok(()) => Ok(()),
                    Err(e) if e.is_not_found() => Ok(()),
                    Err(e) => Err(e.message.clone()),
                };
                s.answered_other
                    .insert(req.context.request_id.clone(), answer);
            }
            outcome
        })
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(match self.live().get(&req.physical_resource_id) {
            Some(_) => DriftResult::InSync,
            None => DriftResult::Deleted,
        })
    }
}
