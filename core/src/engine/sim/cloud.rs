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
//! definite failure), `Hang` (`create`: the work is done but no answer
//! ever comes, asking again included) and `Slow` (`create` or `update`:
//! the first call does the work and then never returns, until the engine
//! gives up on it; asked again, it answers; a slow create that is
//! cancelled undoes its work and says so), `Renew` (`update`: the update
//! makes a new resource and answers with its id, as a custom-resource
//! handler that replaces on update does), `Leave` (`update`: the update
//! makes a new resource and fails naming it). The cloud can be `down` (every
//! call fails as a provider that cannot start) and `healed` (scripts no
//! longer apply: the final clean-up of every run).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use cairn_sdk::{
    Cancellation, CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ErrorKind,
    PropertyDifference, PropertySchema, ProviderError, ResourceProvider, ResourceSchema,
    UpdateRequest, UpdateResult,
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
    /// Request ids of Handler updates and deletes answered (the answer:
    /// the new physical id of an update that replaced its resource).
    answered_other: HashMap<String, Result<Option<String>, String>>,
    defects: Vec<String>,
    next: u64,
    down: bool,
    healed: bool,
    /// Physical ids deleted behind the stack's back.
    vanished: std::collections::HashSet<String>,
    /// Physical ids made outside any stack (by a person, for an import).
    outside: std::collections::HashSet<String>,
    /// How many times the macro ran.
    macro_runs: u32,
    /// Request ids whose first call was slow (asked again, they answer).
    slowed: std::collections::HashSet<String>,
    /// Physical id → the registered type version whose provider last made
    /// or changed it (see `versioned`).
    served_by: HashMap<String, String>,
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

    /// A new live resource, made by the request `ctx`: its physical id.
    fn make(&mut self, ctx: &cairn_sdk::RequestContext, properties: &Map<String, Value>) -> String {
        self.next += 1;
        let id = format!("{}-{}", ctx.logical_resource_id, self.next);
        self.live.insert(
            id.clone(),
            Live {
                type_name: ctx.resource_type.clone(),
                logical_id: ctx.logical_resource_id.clone(),
                request_id: ctx.request_id.clone(),
                properties: properties.clone(),
            },
        );
        self.made_by.insert(ctx.request_id.clone(), id.clone());
        id
    }

    /// What a Handler answered to an update or delete, if it did.
    fn answer_of(
        &self,
        ctx: &cairn_sdk::RequestContext,
        kind: &str,
    ) -> Result<Option<String>, ProviderError> {
        match self.answered_other.get(&ctx.request_id) {
            Some(Ok(renewed)) => Ok(renewed.clone()),
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
    /// How many slow calls were made.
    slow_calls: tokio::sync::watch::Sender<u32>,
    /// How many slow calls are waiting now (dropped ones no longer count).
    blocked: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

/// Counts a slow call while it waits.
struct Blocked(std::sync::Arc<std::sync::atomic::AtomicU32>);

impl Drop for Blocked {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
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

    /// Changes a live resource behind the stack's back (drift).
    pub fn tamper(&self, logical_id: &str, key: &str, value: &str) {
        self.with(|s| {
            for l in s.live.values_mut().filter(|l| l.logical_id == logical_id) {
                l.properties.insert(key.into(), Value::String(value.into()));
            }
        });
    }

    /// Deletes a live resource behind the stack's back.
    pub fn vanish(&self, logical_id: &str) {
        self.with(|s| {
            let gone: Vec<String> = s
                .live
                .iter()
                .filter(|(_, l)| l.logical_id == logical_id)
                .map(|(id, _)| id.clone())
                .collect();
            for id in gone {
                s.live.remove(&id);
                s.vanished.insert(id);
            }
        });
    }

    /// Whether `physical` was deleted behind the stack's back (the stack
    /// may still record it: that is the drift a scenario sets up).
    pub fn vanished(&self, physical: &str) -> bool {
        self.with(|s| s.vanished.contains(physical))
    }

    pub fn heal(&self) {
        self.with(|s| s.healed = true);
    }

    /// A resource a person made outside any stack (to be imported).
    pub fn make_outside(&self, physical: &str, logical_id: &str, properties: Map<String, Value>) {
        self.with(|s| {
            s.live.insert(
                physical.to_string(),
                Live {
                    type_name: THING.into(),
                    logical_id: logical_id.to_string(),
                    request_id: format!("outside:{physical}"),
                    properties,
                },
            );
            s.outside.insert(physical.to_string());
        });
    }

    /// Whether `physical` was made outside any stack.
    /// Records that `version`'s provider made or changed `physical`.
    pub fn served(&self, physical: &str, version: &str) {
        self.with(|s| {
            s.served_by
                .insert(physical.to_string(), version.to_string())
        });
    }

    /// The version whose provider last made or changed `physical`.
    pub fn served_by(&self, physical: &str) -> Option<String> {
        self.with(|s| s.served_by.get(physical).cloned())
    }

    pub fn is_outside(&self, physical: &str) -> bool {
        self.with(|s| s.outside.contains(physical))
    }

    /// Deletes what a person made outside the stacks, except `adopted`
    /// (what a stack recorded before its delete, and so had to delete or
    /// retain by its policy): their own clean-up once every stack is
    /// deleted. An adopted one still live is then reported as a leak.
    pub fn clear_outside_except(&self, adopted: &std::collections::HashSet<String>) {
        self.with(|s| {
            let outside: Vec<String> = s.outside.drain().collect();
            for id in outside.into_iter().filter(|id| !adopted.contains(id)) {
                s.live.remove(&id);
            }
        });
    }

    /// Whether a slow call is waiting now.
    pub fn blocked(&self) -> bool {
        self.blocked.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// Waits until a slow call is in flight.
    pub async fn until_slow(&self) {
        let mut rx = self.slow_calls.subscribe();
        let _ = rx.wait_for(|n| *n > 0).await;
    }

    /// Whether this call is the slow first call of its request: it then
    /// never returns (the engine drops it when it gives up).
    fn slow(&self, s: &mut State, props: &Map<String, Value>, op: &str, request_id: &str) -> bool {
        if !Self::script(props, "Slow", op, s.healed) || !s.slowed.insert(request_id.to_string()) {
            return false;
        }
        self.slow_calls.send_modify(|n| *n += 1);
        true
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
        if !s.live.contains_key(&req.physical_resource_id) {
            return Err(ProviderError::not_found(format!(
                "{} does not exist",
                req.physical_resource_id
            )));
        }
        if Self::script(&req.properties, "Leave", "update", s.healed) {
            // An update that made a new resource, then failed naming it
            // (one per request id): the resource it had is unchanged.
            let ctx = &req.context;
            let id = match s.made_by.get(&ctx.request_id) {
                Some(id) => id.clone(),
                None => s.make(ctx, &req.properties),
            };
            return Err(ProviderError::invalid_request(format!(
                "{} was told to fail on update, leaving {id}",
                ctx.logical_resource_id
            ))
            .leaving(id));
        }
        if Self::script(&req.properties, "Renew", "update", s.healed) {
            // A resource replaced on every update: a new one (one per
            // request id), the old one left for the engine to delete.
            let ctx = &req.context;
            let id = match s.made_by.get(&ctx.request_id) {
                Some(id) => id.clone(),
                None => s.make(ctx, &req.properties),
            };
            return Ok(UpdateResult {
                physical_resource_id: Some(id.clone()),
                attributes: result(&id).attributes,
                no_echo: false,
            });
        }
        if let Some(live) = s.live.get_mut(&req.physical_resource_id) {
            live.properties = req.properties.clone();
        }
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

    /// `None`: a slow first call, which never answers.
    fn create_in(
        &self,
        req: &CreateRequest,
        recovering: bool,
    ) -> Result<Option<CreateResult>, ProviderError> {
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
                    Some(id) => Ok(Some(result(id))),
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
                    s.make(ctx, &req.properties)
                }
            };
            if !recovering && self.slow(s, &req.properties, "create", &ctx.request_id) {
                return Ok(None);
            }
            if Self::script(&req.properties, "Hang", "create", healed) {
                return Err(ProviderError::timeout(format!(
                    "Resource creation timed out after 1 seconds ({})",
                    ctx.logical_resource_id
                )));
            }
            if handler {
                s.answered.insert(ctx.request_id.clone(), physical.clone());
            }
            Ok(Some(result(&physical)))
        })
    }

    /// A create or update: answers, or (a slow first call) never returns.
    async fn answer<T>(
        &self,
        outcome: Result<Option<T>, ProviderError>,
    ) -> Result<T, ProviderError> {
        match outcome? {
            Some(t) => Ok(t),
            None => {
                self.blocked
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _waiting = Blocked(self.blocked.clone());
                std::future::pending().await
            }
        }
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

pub(super) fn schema(type_name: &str) -> ResourceSchema {
    ResourceSchema::new(type_name)
        .identified_by(&["Id"])
        .property("Name", PropertySchema::string().create_only())
        .property("Value", PropertySchema::string())
        .property("Fail", PropertySchema::string())
        .property("Hang", PropertySchema::string())
        .property("Slow", PropertySchema::string())
        .property("Renew", PropertySchema::string())
        .property("Leave", PropertySchema::string())
        .attribute("Arn", "sim:<physical id>")
        .attribute("Id", "<physical id>")
}

#[async_trait::async_trait]
impl ResourceProvider for Cloud {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![schema(THING), schema(HANDLER)]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.answer(self.create_in(req, false)).await
    }

    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.answer(self.create_in(req, true)).await
    }

    /// A slow create the engine gave up on is undone and said so; any
    /// other create cannot be told apart from one that finished.
    async fn cancel_create(&self, req: &CreateRequest) -> Result<Cancellation, ProviderError> {
        self.with(|s| {
            let id = &req.context.request_id;
            if !s.slowed.contains(id) || s.answered.contains_key(id) {
                return Ok(Cancellation::Unknown);
            }
            if let Some(physical) = s.made_by.remove(id) {
                s.live.remove(&physical);
            }
            Ok(Cancellation::NothingMade)
        })
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        let outcome = self.with(|s| {
            if s.down {
                return Err(Self::unavailable());
            }
            let handler = req.context.resource_type == HANDLER;
            if handler {
                s.received(&req.context, "Update");
            }
            let outcome = Self::update_in(s, req);
            if outcome.is_ok() && self.slow(s, &req.properties, "update", &req.context.request_id) {
                return Ok(None);
            }
            if handler {
                let answer = outcome
                    .as_ref()
                    .map(|u| u.physical_resource_id.clone())
                    .map_err(|e| e.message.clone());
                s.answered_other
                    .insert(req.context.request_id.clone(), answer);
            }
            outcome.map(Some)
        });
        self.answer(outcome).await
    }

    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        if req.context.resource_type != HANDLER {
            return self.update(req).await;
        }
        self.with(|s| {
            let renewed = s.answer_of(&req.context, "Update")?;
            let physical = renewed.as_deref().unwrap_or(&req.physical_resource_id);
            Ok(UpdateResult {
                attributes: result(physical).attributes,
                physical_resource_id: renewed,
                no_echo: false,
            })
        })
    }

    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        if req.context.resource_type != HANDLER {
            return self.delete(req).await;
        }
        self.with(|s| s.answer_of(&req.context, "Delete").map(|_| ()))
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
                    Ok(()) => Ok(None),
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e.message.clone()),
                };
                s.answered_other
                    .insert(req.context.request_id.clone(), answer);
            }
            outcome
        })
    }

    /// A Thing as it lives (what an import adopts); a handler reads
    /// nothing, as a custom-resource handler written for AWS.
    async fn read(
        &self,
        req: &cairn_sdk::ReadRequest,
    ) -> Result<cairn_sdk::ReadResult, ProviderError> {
        if req.context.resource_type != THING {
            return Ok(cairn_sdk::ReadResult::NotSupported);
        }
        self.with(|s| {
            if s.down {
                return Err(Self::unavailable());
            }
            match s.live.get(&req.physical_resource_id) {
                Some(l) => Ok(cairn_sdk::ReadResult::Found {
                    properties: l.properties.clone(),
                    attributes: result(&req.physical_resource_id).attributes,
                }),
                None => Err(ProviderError::not_found(format!(
                    "{} does not exist",
                    req.physical_resource_id
                ))),
            }
        })
    }

    /// The macro `SimAddThing`: adds the resource `Added` to the template,
    /// its `Value` the macro's run count in this cloud. An operation runs
    /// its macros once, when it starts, and keeps the processed template:
    /// a resumed one that ran them again would end with another `Value`
    /// than the run without a crash.
    async fn transform(
        &self,
        req: &cairn_sdk::MacroRequest,
    ) -> Result<cairn_sdk::MacroResponse, ProviderError> {
        let runs = self.with(|s| {
            s.macro_runs += 1;
            s.macro_runs
        });
        let mut fragment = req.fragment.clone();
        if let Some(resources) = fragment.get_mut("Resources").and_then(Value::as_object_mut) {
            resources.insert(
                "Added".into(),
                serde_json::json!({
                    "Type": THING,
                    "Properties": {"Name": "added", "Value": format!("run-{runs}")}
                }),
            );
        }
        Ok(cairn_sdk::MacroResponse::success(req, fragment))
    }

    /// The template's properties against the live ones.
    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        Ok(match self.live().get(&req.physical_resource_id) {
            Some(live) => DriftResult::from_differences(PropertyDifference::compare(
                &req.properties,
                &live.properties,
            )),
            None => DriftResult::Deleted,
        })
    }
}
