//! Stack refactoring (CloudFormation's CreateStackRefactor,
//! DescribeStackRefactor, ExecuteStackRefactor, ListStackRefactorActions):
//! resources renamed or moved between stacks by rewriting the state, with
//! no provider call. `create_refactor` reads the stacks and their new
//! templates, resolves the moves (`cairn_model::refactor::resolve`), and
//! checks that nothing would be created, deleted or changed: each new
//! template is planned over the rows it would hold (moved rows under their
//! new ids) and must plan no change; the sections and resource attributes
//! a refactor may not touch must be the same; exports must keep their
//! values. The record (CREATE_COMPLETE and AVAILABLE, or CREATE_FAILED with
//! the reason) is kept. `execute_refactor` takes every stack's lease,
//! checks again that the stacks did not change since, and applies the
//! moves, templates and events in one write.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use super::kinds::Refactors;
use super::{stack_context, EngineError};
use crate::graph::Graph;
use crate::refactor::{
    changed_attribute, changed_section, resolve, Move, ResourceMapping, StackSides, MAX_STACKS,
};
use crate::stack::{now, EventRecord, ResourceRecord, StackRecord, StackStatus};
use crate::store::{Lease, RefactorWrite, RowMove, StoreError};
use crate::template::eval::Evaluator;
use crate::template::parameters::ParameterValues;
use crate::template::Template;

/// `CreateStackRefactor`'s input.
#[derive(Debug, Clone, Default)]
pub struct RefactorInput {
    /// `StackDefinitions`: each stack's name and its template after.
    pub stacks: Vec<(String, String)>,
    /// `ResourceMappings`.
    pub mappings: Vec<ResourceMapping>,
    /// `EnableStackCreation` (a stack that does not exist yet).
    pub enable_stack_creation: bool,
    pub description: Option<String>,
}

/// One stack read for a refactor.
struct Side {
    /// A stack the refactor creates (`EnableStackCreation`).
    created: bool,
    stack: StackRecord,
    rows: Vec<ResourceRecord>,
    old: Value,
    new: Value,
    template: Template,
    body: String,
}

/// Statuses a stack may be refactored in (stable, updatable).
fn refactorable(s: StackStatus) -> bool {
    matches!(
        s,
        StackStatus::CreateComplete
            | StackStatus::UpdateComplete
            | StackStatus::UpdateRollbackComplete
            | StackStatus::ImportComplete
            | StackStatus::ImportRollbackComplete
    )
}

impl Refactors<'_> {
    /// Checks a refactor and keeps its record: CREATE_COMPLETE with its
    /// actions, or CREATE_FAILED with why (what it would create, delete or
    /// change). A malformed request (a stack that does not exist, a
    /// template that does not parse) is an error instead.
    pub async fn create_refactor(&self, input: &RefactorInput) -> Result<Value, EngineError> {
        let id = format!(
            "arn:aws:cloudformation:{}:{}:stackRefactor/{}",
            self.config.identity.region,
            self.config.identity.account_id,
            uuid::Uuid::new_v4()
        );
        let sides = self.read_sides(input, &BTreeMap::new()).await?;
        let stack_ids: Vec<String> = sides.iter().map(|s| s.stack.stack_id.clone()).collect();
        let versions = self.versions(&sides).await?;
        let created: BTreeMap<&str, &str> = sides
            .iter()
            .filter(|s| s.created)
            .map(|s| (s.stack.stack_name.as_str(), s.stack.stack_id.as_str()))
            .collect();
        let mut record = json!({
            "StackRefactorId": id,
            "StackIds": stack_ids,
            "Status": "CREATE_COMPLETE",
            "ExecutionStatus": "AVAILABLE",
            "CreatedAt": now(),
            "Versions": versions,
            "Definitions": sides.iter().map(|s| json!({"StackName": s.stack.stack_name, "TemplateBody": s.body})).collect::<Vec<_>>(),
            "Mappings": input.mappings,
            "EnableStackCreation": input.enable_stack_creation,
            "CreatedStacks": created,
        });
        if let Some(d) = &input.description {
            record["Description"] = json!(d);
        }
        match self.check(&sides, &input.mappings).await {
            Ok(moves) => {
                let mut all: Vec<Value> = sides
                    .iter()
                    .filter(|s| s.created)
                    .map(|s| {
                        json!({
                            "Action": "CREATE",
                            "Entity": "STACK",
                            "Description": format!("Create stack {} for what moves into it", s.stack.stack_name),
                            "Detection": "MANUAL",
                            "DetectionReason": "EnableStackCreation",
                        })
                    })
                    .collect();
                all.extend(actions(&sides, &moves));
                record["Actions"] = json!(all);
            }
            Err(reason) => {
                record["Status"] = json!("CREATE_FAILED");
                record["StatusReason"] = json!(reason);
                record["ExecutionStatus"] = json!("UNAVAILABLE");
                record["Actions"] = json!([]);
            }
        }
        self.store.put_refactor(&id, &record).await?;
        Ok(record)
    }

    /// A refactor's record, its execution status brought up to date (an
    /// AVAILABLE refactor whose stacks changed since is OBSOLETE).
    pub async fn describe_refactor(&self, id: &str) -> Result<Value, EngineError> {
        let Some(mut record) = self.store.refactor(id).await? else {
            return Err(EngineError::Validation(format!(
                "Stack refactor [{id}] does not exist"
            )));
        };
        if record["ExecutionStatus"] == "AVAILABLE" && !self.unchanged(&record).await? {
            record["ExecutionStatus"] = json!("OBSOLETE");
            record["ExecutionStatusReason"] =
                json!("A stack of the refactor changed since it was created");
            self.store.put_refactor(id, &record).await?;
        }
        Ok(record)
    }

    /// Every refactor, oldest first.
    pub async fn list_refactors(&self) -> Result<Vec<Value>, EngineError> {
        Ok(self.store.refactors().await?)
    }

    /// Executes an AVAILABLE refactor: the rows move, the templates are
    /// the new ones, and each stack records it, in one write under all the
    /// stacks' leases. No provider is called.
    pub async fn execute_refactor(&self, id: &str) -> Result<Value, EngineError> {
        let mut record = self.describe_refactor(id).await?;
        if record["Status"] != "CREATE_COMPLETE" || record["ExecutionStatus"] != "AVAILABLE" {
            return Err(EngineError::Validation(format!(
                "Stack refactor [{id}] is in {} state ({}) and can not be executed",
                record["ExecutionStatus"].as_str().unwrap_or_default(),
                record["StatusReason"]
                    .as_str()
                    .or(record["ExecutionStatusReason"].as_str())
                    .unwrap_or("not created")
            )));
        }
        // A stack the refactor creates exists (in review, empty) before
        // it is leased; the refactor's write fills it.
        let created: BTreeMap<String, String> =
            serde_json::from_value(record["CreatedStacks"].clone()).unwrap_or_default();
        for (name, stack_id) in &created {
            match self.store.find_stack(name).await? {
                Some(s) if &s.stack_id == stack_id => {}
                Some(_) => {
                    return Err(EngineError::Validation(format!(
                        "Stack [{name}] exists already: the refactor that creates it is obsolete; create it again"
                    )))
                }
                None => {
                    self.insert_review_stack(name, stack_id).await?;
                }
            }
        }
        let leases = self.lease_all(&record).await?;
        let applied = self.apply(&mut record, &leases).await;
        for lease in &leases {
            let _ = self.store.release_lease(lease).await;
        }
        applied?;
        Ok(record)
    }

    async fn apply(&self, record: &mut Value, leases: &[Lease]) -> Result<(), EngineError> {
        let id = record["StackRefactorId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !self.unchanged(record).await? {
            record["ExecutionStatus"] = json!("OBSOLETE");
            self.store.put_refactor(&id, record).await?;
            return Err(EngineError::Validation(format!(
                "Stack refactor [{id}] is obsolete: a stack of the refactor changed since it was created; create it again"
            )));
        }
        let input = RefactorInput {
            stacks: record["Definitions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    let text = |k: &str| d[k].as_str().unwrap_or_default().to_string();
                    (text("StackName"), text("TemplateBody"))
                })
                .collect(),
            mappings: serde_json::from_value(record["Mappings"].clone()).unwrap_or_default(),
            enable_stack_creation: record["EnableStackCreation"] == true,
            description: None,
        };
        let created: BTreeMap<String, String> =
            serde_json::from_value(record["CreatedStacks"].clone()).unwrap_or_default();
        let sides = self.read_sides(&input, &created).await?;
        let moves = self
            .check(&sides, &input.mappings)
            .await
            .map_err(EngineError::Validation)?;
        let at = now();
        let mut write = RefactorWrite {
            stacks: Vec::new(),
            moves: Vec::new(),
            events: Vec::new(),
            refactor_id: id.clone(),
            body: Value::Null,
        };
        let by_name: HashMap<&str, &Side> = sides
            .iter()
            .map(|s| (s.stack.stack_name.as_str(), s))
            .collect();
        for m in &moves {
            let (from, to) = (
                by_name[m.mapping.source.stack_name.as_str()],
                by_name[m.mapping.destination.stack_name.as_str()],
            );
            let Some(row) = from
                .rows
                .iter()
                .find(|r| r.logical_id == m.mapping.source.logical_resource_id)
            else {
                continue;
            };
            let physical = row.physical_id.clone().unwrap_or_default();
            let properties = Some(Value::Object(row.properties.clone()).to_string());
            write.events.push(EventRecord {
                hook: None,
                event_id: uuid::Uuid::new_v4().to_string(),
                stack_id: from.stack.stack_id.clone(),
                stack_name: from.stack.stack_name.clone(),
                logical_id: row.logical_id.clone(),
                physical_id: physical.clone(),
                resource_type: row.resource_type.clone(),
                timestamp: at.clone(),
                status: crate::stack::EventStatus::DeleteSkipped,
                status_reason: Some(format!(
                    "Moved to {} by stack refactor {id}",
                    m.mapping.destination
                )),
                properties: properties.clone(),
            });
            write.events.push(EventRecord {
                hook: None,
                event_id: uuid::Uuid::new_v4().to_string(),
                stack_id: to.stack.stack_id.clone(),
                stack_name: to.stack.stack_name.clone(),
                logical_id: m.mapping.destination.logical_resource_id.clone(),
                physical_id: physical,
                resource_type: row.resource_type.clone(),
                timestamp: at.clone(),
                status: crate::stack::EventStatus::ImportComplete,
                status_reason: Some(format!(
                    "Moved from {} by stack refactor {id}",
                    m.mapping.source
                )),
                properties,
            });
            write.moves.push(RowMove {
                from_stack: from.stack.stack_id.clone(),
                from_logical: m.mapping.source.logical_resource_id.clone(),
                to_stack: to.stack.stack_id.clone(),
                to_logical: m.mapping.destination.logical_resource_id.clone(),
            });
        }
        for s in &sides {
            let rows = rows_after(s, &sides, &moves);
            let outputs = self.outputs_after(s, &rows).await?;
            let mut stack = s.stack.clone();
            stack.template_body = s.body.clone();
            stack.description = s.template.description.clone();
            stack.outputs = outputs;
            stack.updated_at = at.clone();
            stack.status = if s.created {
                StackStatus::CreateComplete
            } else {
                StackStatus::UpdateComplete
            };
            let reason = format!("Stack refactor {id}");
            stack.status_reason = Some(reason.clone());
            let event = super::stack_event(&stack, stack.status, Some(&reason), &at);
            write.stacks.push((stack, event));
        }
        record["ExecutionStatus"] = json!("EXECUTE_COMPLETE");
        record["ExecutedAt"] = json!(at);
        write.body = record.clone();
        self.store.apply_refactor(leases, &write).await?;
        Ok(())
    }

    /// Every stack's lease, in the order of their ids (two refactors of
    /// the same stacks never wait for each other); none when one is busy.
    async fn lease_all(&self, record: &Value) -> Result<Vec<Lease>, EngineError> {
        let mut ids: Vec<String> =
            serde_json::from_value(record["StackIds"].clone()).unwrap_or_default();
        ids.sort();
        let owner = self.operation_owner();
        let ttl = self.lease_ttl_ms();
        let mut leases = Vec::new();
        for id in ids {
            match self.store.acquire_lease(&id, &owner, ttl).await {
                Ok(l) => leases.push(l),
                Err(e) => {
                    for l in &leases {
                        let _ = self.store.release_lease(l).await;
                    }
                    return Err(match e {
                        StoreError::Busy { stack, .. } => EngineError::Validation(format!(
                            "Stack [{stack}] has an operation in progress: execute the refactor once it ends"
                        )),
                        other => other.into(),
                    });
                }
            }
        }
        Ok(leases)
    }

    /// Each stack's event count now: a refactor holds while they stay.
    async fn versions(&self, sides: &[Side]) -> Result<BTreeMap<String, usize>, EngineError> {
        let mut v = BTreeMap::new();
        for s in sides.iter().filter(|s| !s.created) {
            v.insert(
                s.stack.stack_id.clone(),
                self.store.event_count(&s.stack.stack_id).await?,
            );
        }
        Ok(v)
    }

    async fn unchanged(&self, record: &Value) -> Result<bool, EngineError> {
        let versions: BTreeMap<String, usize> =
            serde_json::from_value(record["Versions"].clone()).unwrap_or_default();
        for (id, count) in versions {
            if self.store.event_count(&id).await? != count {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The stacks and their new templates, or why the request is malformed.
    /// `created`: the ids of the stacks the refactor creates, once chosen.
    async fn read_sides(
        &self,
        input: &RefactorInput,
        created: &BTreeMap<String, String>,
    ) -> Result<Vec<Side>, EngineError> {
        if input.stacks.is_empty() || input.stacks.len() > MAX_STACKS {
            return Err(EngineError::Validation(format!(
                "StackDefinitions: a refactor names 1 to {MAX_STACKS} stacks, not {}",
                input.stacks.len()
            )));
        }
        let mut sides: Vec<Side> = Vec::new();
        for (name, body) in &input.stacks {
            if sides.iter().any(|s| &s.stack.stack_name == name) {
                return Err(EngineError::Validation(format!(
                    "StackDefinitions: stack {name} is listed twice"
                )));
            }
            let found = self.store.find_stack(name).await?;
            // A stack in review the refactor made (its execution stopped
            // between the two writes) is still one it creates.
            let made_here = found.as_ref().is_some_and(|s| {
                s.status == StackStatus::ReviewInProgress && created.get(name) == Some(&s.stack_id)
            });
            if found.is_none() || made_here {
                if !input.enable_stack_creation {
                    return Err(EngineError::Validation(format!(
                        "Stack [{name}] does not exist (EnableStackCreation lets the refactor create it)"
                    )));
                }
                let stack_id = created
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| self.new_stack_id(name));
                sides.push(self.new_side(name, &stack_id, body)?);
                continue;
            }
            let Some(stack) = found else { continue };
            if !refactorable(stack.status) {
                return Err(EngineError::Validation(format!(
                    "Stack [{name}] is in {} state and can not be refactored",
                    stack.status
                )));
            }
            if stack.parent_id.is_some() {
                return Err(EngineError::Validation(format!(
                    "Stack [{name}] is a nested stack: refactor its root stack's resources instead"
                )));
            }
            let template = Template::parse_with(body, &stack.context).map_err(|e| {
                EngineError::Validation(format!("StackDefinitions: stack {name}: {e}"))
            })?;
            if template.heat {
                return Err(EngineError::Validation(format!(
                    "Stack [{name}]: refactoring a HOT template is not supported; refactor CloudFormation templates"
                )));
            }
            let old = Template::body_of(&stack.template_body)?;
            let new = Template::body_of(body)?;
            let rows = self
                .store
                .resources(&stack.stack_id)
                .await?
                .into_iter()
                .filter(crate::plan::is_live)
                .collect();
            sides.push(Side {
                created: false,
                stack,
                rows,
                old,
                new,
                template,
                body: body.clone(),
            });
        }
        Ok(sides)
    }

    /// A stack the refactor creates: its template is all that moves in.
    fn new_side(&self, name: &str, stack_id: &str, body: &str) -> Result<Side, EngineError> {
        let stack = super::review::review_stack(name, stack_id);
        let template = Template::parse_with(body, &stack.context)
            .map_err(|e| EngineError::Validation(format!("StackDefinitions: stack {name}: {e}")))?;
        let new = Template::body_of(body)?;
        if let Some(section) = changed_section(&json!({}), &new) {
            return Err(EngineError::Validation(format!(
                "Stack [{name}], which the refactor creates, can't have {section}: its template holds only what moves into it"
            )));
        }
        Ok(Side {
            created: true,
            stack,
            rows: Vec::new(),
            old: json!({}),
            new,
            template,
            body: body.to_string(),
        })
    }

    /// The moves, or why the refactor would create, delete or change
    /// something (CloudFormation refuses those).
    async fn check(
        &self,
        sides: &[Side],
        mappings: &[ResourceMapping],
    ) -> Result<Vec<Move>, String> {
        for s in sides {
            if let Some(section) = changed_section(&s.old, &s.new) {
                return Err(format!(
                    "The template of stack {} changes its {section}: a refactor can't change or add Parameters, Conditions or Mappings; update the stack first",
                    s.stack.stack_name
                ));
            }
        }
        let stacks: Vec<StackSides> = sides
            .iter()
            .map(|s| StackSides {
                stack_name: s.stack.stack_name.clone(),
                live: s
                    .rows
                    .iter()
                    .map(|r| (r.logical_id.clone(), r.resource_type.clone()))
                    .collect(),
                wanted: s
                    .template
                    .resources
                    .iter()
                    .map(|r| {
                        (
                            r.logical_id.clone(),
                            self.registry.canonical(&r.type_name).to_string(),
                        )
                    })
                    .collect(),
            })
            .collect();
        let moves = resolve(&stacks, mappings).map_err(|e| e.0)?;
        // Each resource keeps its attributes where it goes.
        for s in sides {
            for r in &s.template.resources {
                let (from, old_id) = match moves.iter().find(|m| {
                    m.mapping.destination.stack_name == s.stack.stack_name
                        && m.mapping.destination.logical_resource_id == r.logical_id
                }) {
                    Some(m) => (
                        sides
                            .iter()
                            .find(|o| o.stack.stack_name == m.mapping.source.stack_name),
                        m.mapping.source.logical_resource_id.as_str(),
                    ),
                    None => (Some(s), r.logical_id.as_str()),
                };
                let Some(from) = from else { continue };
                let old = &from.old["Resources"][old_id];
                let new = &s.new["Resources"][r.logical_id.as_str()];
                if let Some(attribute) = changed_attribute(old, new) {
                    return Err(format!(
                        "Resource {} of stack {} changes its {attribute}: a refactor can't change a resource's configuration; update the stack first",
                        r.logical_id, s.stack.stack_name
                    ));
                }
            }
        }
        // Each template planned over the rows it would hold changes nothing.
        for s in sides {
            let rows = rows_after(s, sides, &moves);
            let changes = self
                .plan_over(s, &rows)
                .await
                .map_err(|e| format!("The template of stack {}: {e}", s.stack.stack_name))?;
            if let Some(c) = changes.first() {
                let what = c
                    .details
                    .iter()
                    .filter_map(|d| d.target.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(format!(
                    "Resource {} of stack {} would change ({} {}): a refactor can't change a resource's configuration (a property that names its stack, such as AWS::StackName, differs between stacks); update the stack first",
                    c.logical_resource_id,
                    s.stack.stack_name,
                    c.action,
                    if what.is_empty() { c.scope.join(", ") } else { what }
                ));
            }
            let before: BTreeMap<String, String> = s
                .stack
                .outputs
                .iter()
                .filter_map(|o| Some((o.export_name.clone()?, o.output_value.clone()?)))
                .collect();
            let after: BTreeMap<String, String> = self
                .outputs_after(s, &rows)
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .filter_map(|o| Some((o.export_name.clone()?, o.output_value.clone()?)))
                .collect();
            for (name, value) in &before {
                if after.get(name) == Some(value) {
                    continue;
                }
                let users = self
                    .store
                    .importers(name)
                    .await
                    .map_err(|e| e.to_string())?;
                if !users.is_empty() {
                    let verb = if after.contains_key(name) {
                        "update"
                    } else {
                        "delete"
                    };
                    return Err(format!(
                        "Cannot {verb} export {name} as it is in use by {}",
                        users.join(", ")
                    ));
                }
            }
            if before != after {
                return Err(format!(
                    "Stack {} would change its exports: a refactor keeps every export as it is; move the outputs that export them with an update first",
                    s.stack.stack_name
                ));
            }
        }
        Ok(moves)
    }

    /// `f` of an evaluator of `s`'s new template over `rows` (their
    /// physical ids and attributes) and its parameter values.
    async fn evaluated<T>(
        &self,
        s: &Side,
        rows: &[ResourceRecord],
        f: impl FnOnce(&Evaluator<'_>, &ParameterValues) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let params = ParameterValues::resolve(&s.template.parameters, &s.stack.parameters)?;
        let sctx = stack_context(&self.config, &s.stack.stack_name, &s.stack.stack_id);
        let reads = super::resolve::reads_stack_outputs(&s.body, &s.stack.context);
        let results = super::resolve::Results::new(self.exports_map(reads).await?);
        results.record_live(rows);
        let ev = Evaluator::new(&s.template, &params, &sctx, &results)?;
        f(&ev, &params)
    }

    /// The plan of `s`'s new template over `rows`.
    async fn plan_over(
        &self,
        s: &Side,
        rows: &[ResourceRecord],
    ) -> Result<Vec<crate::plan::ResourceChange>, EngineError> {
        self.evaluated(s, rows, |ev, params| {
            let conditions = ev.conditions().clone();
            let graph = Graph::build(&s.template, &|c| conditions.get(c).copied())?;
            let previous = crate::plan::Previous {
                template: &s.template,
                params,
            };
            let nested = Default::default();
            let registry = &*self.registry;
            Ok(crate::plan::plan(
                &s.template,
                ev,
                &graph,
                registry,
                rows,
                &previous,
                params,
                &nested,
                crate::plan::TypeVersions::kept(),
            )?)
        })
        .await
    }

    /// `s`'s outputs once its template is the new one over `rows`.
    async fn outputs_after(
        &self,
        s: &Side,
        rows: &[ResourceRecord],
    ) -> Result<Vec<crate::stack::OutputRecord>, EngineError> {
        self.evaluated(s, rows, |ev, _| {
            super::create::outputs_of(&s.template, ev).map_err(EngineError::Validation)
        })
        .await
    }
}

/// The rows `s` holds after `moves`: its own that stay, and those moved
/// in under their new ids.
fn rows_after(s: &Side, sides: &[Side], moves: &[Move]) -> Vec<ResourceRecord> {
    let name = &s.stack.stack_name;
    let mut rows: Vec<ResourceRecord> = s
        .rows
        .iter()
        .filter(|r| {
            !moves.iter().any(|m| {
                &m.mapping.source.stack_name == name
                    && m.mapping.source.logical_resource_id == r.logical_id
            })
        })
        .cloned()
        .collect();
    for m in moves
        .iter()
        .filter(|m| &m.mapping.destination.stack_name == name)
    {
        let row = sides
            .iter()
            .find(|o| o.stack.stack_name == m.mapping.source.stack_name)
            .and_then(|o| {
                o.rows
                    .iter()
                    .find(|r| r.logical_id == m.mapping.source.logical_resource_id)
            });
        if let Some(row) = row {
            let mut moved = row.clone();
            moved.stack_id = s.stack.stack_id.clone();
            moved.logical_id = m.mapping.destination.logical_resource_id.clone();
            rows.push(moved);
        }
    }
    rows
}

/// ListStackRefactorActions' entries: one MOVE of a RESOURCE per move.
fn actions(sides: &[Side], moves: &[Move]) -> Vec<Value> {
    moves
        .iter()
        .map(|m| {
            let physical = sides
                .iter()
                .find(|s| s.stack.stack_name == m.mapping.source.stack_name)
                .and_then(|s| {
                    s.rows
                        .iter()
                        .find(|r| r.logical_id == m.mapping.source.logical_resource_id)
                })
                .and_then(|r| r.physical_id.clone())
                .unwrap_or_default();
            let (what, reason) = match m.detection {
                crate::refactor::Detection::Manual => ("MANUAL", "Given in ResourceMappings"),
                crate::refactor::Detection::Auto => (
                    "AUTO",
                    "The logical id leaves the source stack's template and appears in the destination's",
                ),
            };
            let verb = if m.mapping.source.stack_name == m.mapping.destination.stack_name {
                "Rename"
            } else {
                "Move"
            };
            json!({
                "Action": "MOVE",
                "Entity": "RESOURCE",
                "PhysicalResourceId": physical,
                "ResourceIdentifier": m.resource_type.clone() + "|" + &physical,
                "Description": format!("{verb} {} ({}) to {}", m.mapping.source, m.resource_type, m.mapping.destination),
                "Detection": what,
                "DetectionReason": reason,
                "ResourceMapping": m.mapping,
            })
        })
        .collect()
}
