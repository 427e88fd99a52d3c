//! The Query API's actions: each reads its members from the form, calls the
//! engine (the same calls the CLI makes) and writes its result element in
//! the shapes of botocore's CloudFormation service model.

use cairn_core::shown::ShownTypes;
use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_core::engine::drift::{ResourceDrift, StackDriftDetection};
use cairn_core::engine::refactor::RefactorInput;
use cairn_core::engine::{
    ChangeSetType, CreateChangeSetInput, CreateStackInput, ParameterInput, UpdateStackInput,
    UpgradeTypes,
};
use cairn_core::refactor::{ResourceLocation, ResourceMapping};
use cairn_core::rollback_triggers::{RollbackConfiguration, RollbackTrigger};
use cairn_core::stack::{
    ChangeSetRecord, EventRecord, OnFailure, ResourceRecord, StackRecord, StackStatus, Tag,
    TemplateContext, STACK_TYPE,
};
use cairn_core::template::parameters::MASK;
use cairn_core::template::Template;
use serde_json::Value;

use super::form::Form;
use super::xml::Xml;
use super::{ApiError, App};

/// Items per page where the model paginates (CloudFormation's own sizes).
const PAGE: usize = 100;

type Outcome = Result<Option<Xml>, ApiError>;

pub async fn dispatch(app: &Arc<App>, f: &Form, action: &str) -> Outcome {
    match action {
        "CreateStack" => create_stack(app, f).await,
        "UpdateStack" => update_stack(app, f).await,
        "DeleteStack" => delete_stack(app, f).await,
        "DescribeStacks" => describe_stacks(app, f).await,
        "ListStacks" => list_stacks(app, f).await,
        "DescribeStackEvents" => describe_stack_events(app, f).await,
        "DescribeStackResource" => describe_stack_resource(app, f).await,
        "DescribeStackResources" => describe_stack_resources(app, f).await,
        "ListStackResources" => list_stack_resources(app, f).await,
        "GetTemplate" => get_template(app, f).await,
        "GetTemplateSummary" => get_template_summary(app, f).await,
        "ValidateTemplate" => validate_template(app, f).await,
        "CreateChangeSet" => create_change_set(app, f).await,
        "DescribeChangeSet" => describe_change_set(app, f).await,
        "ListHookResults" => list_hook_results(app, f).await,
        "ExecuteChangeSet" => execute_change_set(app, f).await,
        "DeleteChangeSet" => delete_change_set(app, f).await,
        "ListChangeSets" => list_change_sets(app, f).await,
        "ContinueUpdateRollback" => continue_update_rollback(app, f).await,
        "CancelUpdateStack" => cancel_update_stack(app, f).await,
        "RollbackStack" => rollback_stack(app, f).await,
        "UpdateTerminationProtection" => update_termination_protection(app, f).await,
        "SetStackPolicy" => set_stack_policy(app, f).await,
        "GetStackPolicy" => get_stack_policy(app, f).await,
        "CreateStackRefactor" => create_stack_refactor(app, f).await,
        "DescribeStackRefactor" => describe_stack_refactor(app, f).await,
        "ExecuteStackRefactor" => execute_stack_refactor(app, f).await,
        "ListStackRefactorActions" => list_stack_refactor_actions(app, f).await,
        "ListStackRefactors" => list_stack_refactors(app, f).await,
        "SignalResource" => signal_resource(app, f).await,
        "ListExports" => list_exports(app, f).await,
        "ListImports" => list_imports(app, f).await,
        "DetectStackDrift" => detect_stack_drift(app, f).await,
        "DescribeStackDriftDetectionStatus" => describe_drift_status(app, f).await,
        "DescribeStackResourceDrifts" => describe_resource_drifts(app, f).await,
        "DetectStackResourceDrift" => detect_resource_drift(app, f).await,
        "RegisterType" => super::types::register_type(app, f).await,
        "DescribeTypeRegistration" => super::types::describe_type_registration(app, f).await,
        "ListTypeRegistrations" => super::types::list_type_registrations(app, f).await,
        "ListTypes" => super::types::list_types(app, f).await,
        "DescribeType" => super::types::describe_type(app, f).await,
        "ListTypeVersions" => super::types::list_type_versions(app, f).await,
        "SetTypeDefaultVersion" => super::types::set_type_default_version(app, f).await,
        "DeregisterType" => super::types::deregister_type(app, f).await,
        "SetTypeConfiguration" => super::types::set_type_configuration(app, f).await,
        "BatchDescribeTypeConfigurations" => {
            super::types::batch_describe_type_configurations(app, f).await
        }
        // Cairn's own actions (no CloudFormation equivalent), for `cairn
        // --endpoint history` and `cairn --endpoint update`.
        "CairnDescribeStackHistory" => stack_history(app, f).await,
        "CairnWaitForStackEvents" => wait_for_stack_events(app, f).await,
        "CairnReconcileStack" => reconcile_stack(app, f).await,
        "" => Err(ApiError::new(400, "MissingAction", "The request must contain the parameter Action.")),
        other => Err(ApiError::new(
            400,
            "InvalidAction",
            format!("The action {other} is not valid for this web service (Cairn serves the CloudFormation actions listed in its README)."),
        )),
    }
}

fn result(build: impl FnOnce(&mut Xml)) -> Outcome {
    let mut x = Xml::default();
    build(&mut x);
    Ok(Some(x))
}

/// The page of `items` that `NextToken` (an offset this server handed out)
/// asks for, and the token of the next one.
fn page<'a, T>(
    items: &'a [T],
    f: &Form,
    size: usize,
) -> Result<(&'a [T], Option<String>), ApiError> {
    let (range, next) = window(items.len(), f, size)?;
    Ok((&items[range], next))
}

/// Which of `len` items the request's `NextToken` (an offset) asks for,
/// `size` at most, and the token of the page after it.
fn window(
    len: usize,
    f: &Form,
    size: usize,
) -> Result<(std::ops::Range<usize>, Option<String>), ApiError> {
    let start = match f.get("NextToken") {
        None | Some("") => 0,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|s| *s <= len)
            .ok_or_else(|| ApiError::validation("Invalid NextToken"))?,
    };
    let end = (start + size).min(len);
    Ok((start..end, (end < len).then(|| end.to_string())))
}

fn max_results(f: &Form) -> Result<usize, ApiError> {
    match f.get("MaxResults") {
        None => Ok(PAGE),
        Some(m) => m
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| ApiError::validation(format!("1 validation error detected: Value '{m}' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100"))),
    }
}

async fn stack(app: &App, name: &str) -> Result<StackRecord, ApiError> {
    app.engine
        .store()
        .find_stack(name)
        .await?
        .ok_or_else(|| ApiError::validation(format!("Stack with id {name} does not exist")))
}

/// TemplateBody (size-checked); TemplateURL is refused with a reason.
fn template_body(app: &App, f: &Form) -> Result<Option<String>, ApiError> {
    let limit = app.config.server.max_template_bytes;
    if let Some(url) = f.get("TemplateURL") {
        return template_file(app, ("TemplateURL", "TemplateBody"), url, limit).map(Some);
    }
    let Some(body) = f.get("TemplateBody") else {
        return Ok(None);
    };
    if body.len() > limit {
        return Err(ApiError::validation(format!(
            "1 validation error detected: Value at 'templateBody' failed to satisfy constraint: Member must have length less than or equal to {limit} (it has {} bytes; [server] max_template_bytes)",
            body.len()
        )));
    }
    Ok(Some(body.to_string()))
}

/// Where a request's template came from, for its nested stacks'
/// TemplateURLs: beside a `file:///` TemplateURL, else in the first of
/// `[server] template_dirs`; every nested template file stays under those
/// directories.
fn origin(app: &App, f: &Form) -> cairn_core::nested::Origin {
    let dirs = &app.config.server.template_dirs;
    let beside = f
        .get("TemplateURL")
        .and_then(|u| u.strip_prefix("file://"))
        .and_then(|p| std::path::Path::new(p).parent().map(|d| d.to_path_buf()));
    cairn_core::nested::Origin {
        base: beside
            .or_else(|| dirs.first().cloned())
            .map(cairn_core::nested::Base::Dir),
        confined_to: Some(dirs.clone()),
        context: Default::default(),
    }
}

/// A `file:///path` URL inside one of `[server] template_dirs`; `fields`:
/// the URL's parameter and the one a body goes in instead.
fn template_file(
    app: &App,
    (url_field, body_field): (&str, &str),
    url: &str,
    limit: usize,
) -> Result<String, ApiError> {
    let refused = |why: &str| {
        ApiError::validation(format!(
            "{url_field} {url} cannot be read: {why}; send it as {body_field}, or put it under a directory of [server] template_dirs and use a file:/// URL"
        ))
    };
    let path = url
        .strip_prefix("file://")
        .ok_or_else(|| refused("only file:/// URLs are supported"))?;
    let path = std::fs::canonicalize(path).map_err(|e| refused(&e.to_string()))?;
    let allowed = app
        .config
        .server
        .template_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .any(|d| path.starts_with(d));
    if !allowed {
        return Err(refused(
            "it is not under a directory of [server] template_dirs",
        ));
    }
    let size = std::fs::metadata(&path)
        .map_err(|e| refused(&e.to_string()))?
        .len();
    if size > limit as u64 {
        return Err(ApiError::validation(format!(
            "The template at {url} has {size} bytes, more than the {limit} of [server] max_template_bytes"
        )));
    }
    std::fs::read_to_string(&path).map_err(|e| refused(&e.to_string()))
}

/// CloudFormation's limit on a stack policy's length.
const POLICY_BYTES: usize = 16_384;

/// A stack policy given as `body_field` or as a file:/// `url_field`.
fn policy_body(
    app: &App,
    f: &Form,
    (body_field, url_field): (&str, &str),
) -> Result<Option<String>, ApiError> {
    let body = match (f.get(body_field), f.get(url_field)) {
        (Some(_), Some(_)) => {
            return Err(ApiError::validation(format!(
                "You cannot specify both {body_field} and {url_field}"
            )))
        }
        (Some(b), None) => b.to_string(),
        (None, Some(url)) => template_file(app, (url_field, body_field), url, POLICY_BYTES)?,
        (None, None) => return Ok(None),
    };
    if body.len() > POLICY_BYTES {
        return Err(ApiError::validation(format!(
            "1 validation error detected: Value at '{body_field}' failed to satisfy constraint: Member must have length less than or equal to {POLICY_BYTES}"
        )));
    }
    Ok(Some(body))
}

/// `Parameters.member.N.{ParameterKey, ParameterValue, UsePreviousValue}`.
fn parameters(f: &Form) -> Result<BTreeMap<String, ParameterInput>, ApiError> {
    let mut out = BTreeMap::new();
    for p in f.structs("Parameters") {
        let key = p
            .get("ParameterKey")
            .ok_or_else(|| ApiError::validation("Parameters: a member has no ParameterKey"))?;
        let previous = p.get("UsePreviousValue").map(String::as_str) == Some("true");
        let input = match (p.get("ParameterValue"), previous) {
            (Some(_), true) => {
                return Err(ApiError::validation(format!(
                    "Invalid input for parameter key {key}. Cannot specify usePreviousValue as true and non empty value for a parameter"
                )))
            }
            (Some(v), false) => ParameterInput::Value(v.clone()),
            (None, true) => ParameterInput::UsePreviousValue,
            (None, false) => ParameterInput::Value(String::new()),
        };
        out.insert(key.clone(), input);
    }
    Ok(out)
}

/// A HOT template's context and its environments' parameter values.
type Supplied = (TemplateContext, BTreeMap<String, String>);

/// Cairn's extension for HOT templates: `Environments.member.N` (HOT
/// environment documents, merged in order, later ones winning) and
/// `Files.member.N.{Path,Content}` (what `get_file` and the registry's
/// provider templates read). Returns the context and the environments'
/// parameter values (explicit `Parameters` win over them); `None` when the
/// request has neither.
fn template_context(f: &Form) -> Result<Option<Supplied>, ApiError> {
    let envs = f.list("Environments");
    let files = f.structs("Files");
    if envs.is_empty() && files.is_empty() {
        return Ok(None);
    }
    let mut context = TemplateContext::default();
    for (i, file) in files.iter().enumerate() {
        let (Some(path), Some(content)) = (file.get("Path"), file.get("Content")) else {
            return Err(ApiError::validation(format!(
                "Files.member.{}: a file needs a Path and a Content",
                i + 1
            )));
        };
        context.files.insert(path.clone(), content.clone());
    }
    let mut parsed = Vec::new();
    for (i, text) in envs.iter().enumerate() {
        let env = Template::body_of(text)
            .map_err(|e| ApiError::validation(format!("Environments.member.{}: {e}", i + 1)))?;
        parsed.push(env);
    }
    let parameters = cairn_core::template::hot::apply_environments(&mut context, &parsed)
        .map_err(|e| ApiError::validation(format!("Environments: {e}")))?;
    Ok(Some((context, parameters)))
}

/// The environments' values under the explicit ones.
fn with_environment_values<V>(
    explicit: BTreeMap<String, V>,
    from_environment: BTreeMap<String, String>,
    wrap: impl Fn(String) -> V,
) -> BTreeMap<String, V> {
    let mut out: BTreeMap<String, V> = from_environment
        .into_iter()
        .map(|(k, v)| (k, wrap(v)))
        .collect();
    out.extend(explicit);
    out
}

fn plain_parameters(f: &Form) -> Result<BTreeMap<String, String>, ApiError> {
    parameters(f)?
        .into_iter()
        .map(|(k, v)| match v {
            ParameterInput::Value(v) => Ok((k, v)),
            ParameterInput::UsePreviousValue => Err(ApiError::validation(format!(
                "Invalid input for parameter key {k}. Cannot specify usePreviousValue as true for a parameter key not in the previous template"
            ))),
        })
        .collect()
}

/// `Tags.member.N.{Key, Value}`; `None` when absent (`Tags=` is an empty list).
fn tags(f: &Form) -> Result<Option<Vec<Tag>>, ApiError> {
    let list = f.structs("Tags");
    if list.is_empty() && f.get("Tags").is_none() {
        return Ok(None);
    }
    list.into_iter()
        .map(|t| match (t.get("Key"), t.get("Value")) {
            (Some(k), Some(v)) => Ok(Tag {
                key: k.clone(),
                value: v.clone(),
            }),
            _ => Err(ApiError::validation(
                "Tags: each member needs a Key and a Value",
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `RollbackConfiguration.{RollbackTriggers.member.N.{Arn, Type},
/// MonitoringTimeInMinutes}`; `None` when absent (`RollbackTriggers=` is
/// an empty list: it removes the stack's triggers).
fn rollback_configuration(f: &Form) -> Result<Option<RollbackConfiguration>, ApiError> {
    const TRIGGERS: &str = "RollbackConfiguration.RollbackTriggers";
    const MINUTES: &str = "RollbackConfiguration.MonitoringTimeInMinutes";
    let listed = f.structs(TRIGGERS);
    let triggers = if listed.is_empty() && f.get(TRIGGERS).is_none() {
        None
    } else {
        let each =
            listed
                .into_iter()
                .enumerate()
                .map(|(i, t)| match (t.get("Arn"), t.get("Type")) {
                    (Some(arn), Some(kind)) => Ok(RollbackTrigger {
                        arn: arn.clone(),
                        kind: kind.clone(),
                    }),
                    _ => Err(ApiError::validation(format!(
                        "{TRIGGERS}.member.{}: a rollback trigger needs an Arn and a Type",
                        i + 1
                    ))),
                });
        Some(each.collect::<Result<Vec<_>, _>>()?)
    };
    let minutes = match f.get(MINUTES) {
        None => None,
        Some(m) => Some(m.parse::<u32>().map_err(|_| {
            ApiError::validation(format!(
                "1 validation error detected: Value '{m}' at 'rollbackConfiguration.monitoringTimeInMinutes' failed to satisfy constraint: Member must have value greater than or equal to 0"
            ))
        })?),
    };
    if triggers.is_none() && minutes.is_none() {
        return Ok(None);
    }
    Ok(Some(RollbackConfiguration {
        rollback_triggers: triggers,
        monitoring_time_in_minutes: minutes,
    }))
}

/// `NotificationARNs.member.N` (webhook URLs); `None` when absent
/// (`NotificationARNs=` is an empty list: it removes the stack's).
fn notification_arns(f: &Form) -> Option<Vec<String>> {
    let listed = f.list("NotificationARNs");
    (!listed.is_empty() || f.get("NotificationARNs").is_some()).then_some(listed)
}

/// `CreateStackRefactor`: `StackDefinitions.member.N.{StackName,
/// TemplateBody|TemplateURL}`, `ResourceMappings.member.N.{Source,
/// Destination}.{StackName, LogicalResourceId}`, `EnableStackCreation`,
/// `Description`.
async fn create_stack_refactor(app: &Arc<App>, f: &Form) -> Outcome {
    let mut stacks = Vec::new();
    for (i, d) in f.structs("StackDefinitions").into_iter().enumerate() {
        let at = format!("StackDefinitions.member.{}", i + 1);
        let name = d
            .get("StackName")
            .ok_or_else(|| ApiError::validation(format!("{at}: StackName is required")))?;
        let body = match (d.get("TemplateBody"), d.get("TemplateURL")) {
            (Some(b), None) => b.clone(),
            (None, Some(url)) => template_file(
                app,
                ("TemplateURL", "TemplateBody"),
                url,
                app.config.server.max_template_bytes,
            )?,
            _ => {
                return Err(ApiError::validation(format!(
                    "{at}: give exactly one of TemplateBody or TemplateURL"
                )))
            }
        };
        stacks.push((name.clone(), body));
    }
    let location = |m: &BTreeMap<String, String>, side: &str, i: usize| match (
        m.get(&format!("{side}.StackName")),
        m.get(&format!("{side}.LogicalResourceId")),
    ) {
        (Some(s), Some(l)) => Ok(ResourceLocation {
            stack_name: s.clone(),
            logical_resource_id: l.clone(),
        }),
        _ => Err(ApiError::validation(format!(
            "ResourceMappings.member.{}: {side} needs a StackName and a LogicalResourceId",
            i + 1
        ))),
    };
    let mut mappings = Vec::new();
    for (i, m) in f.structs("ResourceMappings").iter().enumerate() {
        mappings.push(ResourceMapping {
            source: location(m, "Source", i)?,
            destination: location(m, "Destination", i)?,
        });
    }
    let input = RefactorInput {
        stacks,
        mappings,
        enable_stack_creation: f.flag("EnableStackCreation")? == Some(true),
        description: f.get("Description").map(String::from),
    };
    let record = app.engine.refactors().create_refactor(&input).await?;
    result(|x| {
        x.leaf(
            "StackRefactorId",
            record["StackRefactorId"].as_str().unwrap_or_default(),
        );
    })
}

/// The summary fields of a refactor's record.
fn refactor_xml(x: &mut Xml, r: &Value) {
    let text = |k: &str| r[k].as_str().map(str::to_string);
    x.opt("Description", text("Description").as_deref())
        .leaf(
            "StackRefactorId",
            &text("StackRefactorId").unwrap_or_default(),
        )
        .leaf(
            "ExecutionStatus",
            &text("ExecutionStatus").unwrap_or_default(),
        )
        .opt(
            "ExecutionStatusReason",
            text("ExecutionStatusReason").as_deref(),
        )
        .leaf("Status", &text("Status").unwrap_or_default())
        .opt("StatusReason", text("StatusReason").as_deref());
}

async fn describe_stack_refactor(app: &Arc<App>, f: &Form) -> Outcome {
    let id = f.required("StackRefactorId")?;
    let r = app.engine.refactors().describe_refactor(id).await?;
    let ids: Vec<String> = serde_json::from_value(r["StackIds"].clone()).unwrap_or_default();
    result(|x| {
        refactor_xml(x, &r);
        x.list("StackIds", &ids, |x, id| {
            x.out_text(id);
        });
    })
}

async fn execute_stack_refactor(app: &Arc<App>, f: &Form) -> Outcome {
    let id = f.required("StackRefactorId")?;
    app.engine.refactors().execute_refactor(id).await?;
    result(|_| {})
}

async fn list_stack_refactor_actions(app: &Arc<App>, f: &Form) -> Outcome {
    let id = f.required("StackRefactorId")?;
    let r = app.engine.refactors().describe_refactor(id).await?;
    let actions = r["Actions"].as_array().cloned().unwrap_or_default();
    let (items, next) = page(&actions, f, max_results(f)?)?;
    result(|x| {
        x.list("StackRefactorActions", items, |x, a| {
            let text = |k: &str| a[k].as_str().unwrap_or_default().to_string();
            for k in [
                "Action",
                "Entity",
                "PhysicalResourceId",
                "Description",
                "Detection",
                "DetectionReason",
            ] {
                x.leaf(k, &text(k));
            }
            x.open("ResourceMapping");
            for side in ["Source", "Destination"] {
                let at = &a["ResourceMapping"][side];
                x.open(side)
                    .leaf("StackName", at["StackName"].as_str().unwrap_or_default())
                    .leaf(
                        "LogicalResourceId",
                        at["LogicalResourceId"].as_str().unwrap_or_default(),
                    )
                    .close(side);
            }
            x.close("ResourceMapping");
        });
        x.opt("NextToken", next.as_deref());
    })
}

async fn list_stack_refactors(app: &Arc<App>, f: &Form) -> Outcome {
    let filter = f.list("ExecutionStatusFilter");
    let all: Vec<Value> = app
        .engine
        .refactors()
        .list_refactors()
        .await?
        .into_iter()
        .filter(|r| {
            filter.is_empty()
                || filter
                    .iter()
                    .any(|s| r["ExecutionStatus"].as_str() == Some(s.as_str()))
        })
        .collect();
    let (items, next) = page(&all, f, max_results(f)?)?;
    result(|x| {
        x.list("StackRefactorSummaries", items, refactor_xml);
        x.opt("NextToken", next.as_deref());
    })
}

fn on_failure(f: &Form) -> Result<OnFailure, ApiError> {
    match (f.flag("DisableRollback")?, f.get("OnFailure")) {
        (Some(true), Some(_)) => Err(ApiError::validation(
            "You cannot specify both DisableRollback and OnFailure.",
        )),
        (Some(true), None) => Ok(OnFailure::DoNothing),
        (_, Some(o)) => o
            .parse()
            .map_err(|e: cairn_core::stack::InvalidOnFailure| ApiError::validation(e.to_string())),
        _ => Ok(OnFailure::Rollback),
    }
}

/// `TimeoutInMinutes`: a positive integer.
fn timeout_minutes(f: &Form) -> Result<Option<u32>, ApiError> {
    match f.get("TimeoutInMinutes") {
        None => Ok(None),
        Some(t) => match t.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(ApiError::validation(format!(
                "1 validation error detected: Value '{t}' at 'timeoutInMinutes' failed to satisfy constraint: Member must have value greater than or equal to 1"
            ))),
        },
    }
}

async fn create_stack(app: &Arc<App>, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let body = template_body(app, f)?.ok_or_else(|| {
        ApiError::validation("Either Template URL or Template Body must be specified.")
    })?;
    let (context, env_values) = template_context(f)?.unwrap_or_default();
    let input = CreateStackInput {
        stack_policy: policy_body(app, f, ("StackPolicyBody", "StackPolicyURL"))?,
        stack_name: name.to_string(),
        template_body: body,
        parameters: with_environment_values(plain_parameters(f)?, env_values, |v| v),
        on_failure: on_failure(f)?,
        tags: tags(f)?.unwrap_or_default(),
        timeout_minutes: timeout_minutes(f)?,
        origin: origin(app, f),
        context,
        capabilities: Some(f.list("Capabilities")),
        termination_protection: f.get("EnableTerminationProtection") == Some("true"),
        rollback_configuration: rollback_configuration(f)?,
        notification_arns: notification_arns(f).unwrap_or_default(),
    };
    let id = app.engine.creates().start_create(&input).await?;
    app.drive(id.clone(), "CREATE").await;
    result(|x| {
        x.leaf("StackId", &id);
    })
}

async fn update_stack(app: &Arc<App>, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let previous = f.flag("UsePreviousTemplate")? == Some(true);
    let body = template_body(app, f)?;
    if previous == body.is_some() {
        return Err(ApiError::validation(
            "Exactly one of TemplateBody, TemplateURL or UsePreviousTemplate must be given.",
        ));
    }
    let (context, env_values) = match template_context(f)? {
        Some((c, v)) => (Some(c), v),
        None => (None, BTreeMap::new()),
    };
    let input = UpdateStackInput {
        stack_policy: policy_body(app, f, ("StackPolicyBody", "StackPolicyURL"))?,
        stack_policy_during_update: policy_body(
            app,
            f,
            ("StackPolicyDuringUpdateBody", "StackPolicyDuringUpdateURL"),
        )?,
        stack_name: name.to_string(),
        template_body: body,
        parameters: with_environment_values(parameters(f)?, env_values, ParameterInput::Value),
        tags: tags(f)?,
        origin: origin(app, f),
        context,
        disable_rollback: f.flag("DisableRollback")? == Some(true),
        capabilities: Some(f.list("Capabilities")),
        rollback_configuration: rollback_configuration(f)?,
        notification_arns: notification_arns(f),
        upgrade_types: upgrade_types(f, "CairnUpgradeTypes")?,
    };
    let id = app.engine.updates().start_update(&input).await?;
    app.drive(id.clone(), "UPDATE").await;
    result(|x| {
        x.leaf("StackId", &id);
    })
}

/// Cairn's own flag `key`: move resources to their registered types'
/// default versions (they keep their own otherwise).
fn upgrade_types(f: &Form, key: &str) -> Result<UpgradeTypes, ApiError> {
    Ok(match f.flag(key)? {
        Some(true) => UpgradeTypes::ToDefaults,
        _ => UpgradeTypes::Keep,
    })
}

async fn delete_stack(app: &Arc<App>, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let retain = f.list("RetainResources");
    // A stack that does not exist (or is gone) is not an error.
    if let Some(id) = app.engine.deletes().start_delete(name, &retain).await? {
        app.drive(id, "DELETE").await;
    }
    Ok(None)
}

fn masked(s: &StackRecord, key: &str, value: &str) -> String {
    if s.no_echo.iter().any(|k| k == key) {
        MASK.to_string()
    } else {
        value.to_string()
    }
}

fn stack_xml(x: &mut Xml, s: &StackRecord) {
    x.leaf("StackId", &s.stack_id)
        .leaf("StackName", &s.stack_name)
        .opt("Description", s.description.as_deref());
    let params: Vec<(&String, &String)> = s.parameters.iter().collect();
    x.list("Parameters", &params, |x, (k, v)| {
        x.leaf("ParameterKey", k)
            .leaf("ParameterValue", &masked(s, k, v));
    });
    x.leaf("CreationTime", &s.created_at);
    if s.updated_at != s.created_at {
        x.leaf("LastUpdatedTime", &s.updated_at);
    }
    x.opt("DeletionTime", s.deleted_at.as_deref())
        .leaf("StackStatus", s.status.as_str())
        .opt("StackStatusReason", s.status_reason.as_deref())
        .leaf(
            "DisableRollback",
            if s.on_failure == OnFailure::DoNothing {
                "true"
            } else {
                "false"
            },
        );
    x.list("NotificationARNs", &s.notification_arns, |x, t| {
        x.out_text(t);
    });
    x.open("RollbackConfiguration");
    if let Some(c) = &s.rollback_configuration {
        x.list("RollbackTriggers", c.triggers(), |x, t| {
            x.leaf("Arn", &t.arn).leaf("Type", &t.kind);
        });
        x.leaf(
            "MonitoringTimeInMinutes",
            &c.monitoring_minutes().to_string(),
        );
    }
    x.close("RollbackConfiguration");
    x.list("Capabilities", &s.capabilities, |x, c| {
        x.out_text(c);
    });
    x.list("Outputs", &s.outputs, |x, o| {
        x.leaf("OutputKey", &o.output_key)
            .opt("OutputValue", o.output_value.as_deref())
            .opt("Description", o.description.as_deref())
            .opt("ExportName", o.export_name.as_deref());
    });
    x.list("Tags", &s.tags, |x, t| {
        x.leaf("Key", &t.key).leaf("Value", &t.value);
    });
    x.opt("ParentId", s.parent_id.as_deref())
        .opt("RootId", s.root_id.as_deref());
    x.leaf(
        "EnableTerminationProtection",
        if s.termination_protection {
            "true"
        } else {
            "false"
        },
    );
    x.open("DriftInformation")
        .leaf("StackDriftStatus", "NOT_CHECKED")
        .close("DriftInformation");
}

async fn describe_stacks(app: &App, f: &Form) -> Outcome {
    let stacks = match f.get("StackName") {
        Some(name) => vec![stack(app, name).await?],
        None => app
            .engine
            .store()
            .list_stacks()
            .await?
            .into_iter()
            .filter(|s| s.status != StackStatus::DeleteComplete)
            .collect(),
    };
    let (items, next) = page(&stacks, f, PAGE)?;
    result(|x| {
        x.list("Stacks", items, stack_xml);
        x.opt("NextToken", next.as_deref());
    })
}

async fn list_stacks(app: &App, f: &Form) -> Outcome {
    let filter = f.list("StackStatusFilter");
    let mut stacks: Vec<StackRecord> = app
        .engine
        .store()
        .list_stacks()
        .await?
        .into_iter()
        .filter(|s| filter.is_empty() || filter.iter().any(|w| w == s.status.as_str()))
        .collect();
    stacks.reverse(); // newest first, as CloudFormation lists them
    let (items, next) = page(&stacks, f, PAGE)?;
    result(|x| {
        x.list("StackSummaries", items, |x, s| {
            x.leaf("StackId", &s.stack_id)
                .leaf("StackName", &s.stack_name)
                .opt("TemplateDescription", s.description.as_deref())
                .leaf("CreationTime", &s.created_at);
            if s.updated_at != s.created_at {
                x.leaf("LastUpdatedTime", &s.updated_at);
            }
            x.opt("DeletionTime", s.deleted_at.as_deref())
                .leaf("StackStatus", s.status.as_str())
                .opt("StackStatusReason", s.status_reason.as_deref())
                .opt("ParentId", s.parent_id.as_deref())
                .opt("RootId", s.root_id.as_deref());
        });
        x.opt("NextToken", next.as_deref());
    })
}

fn event_xml(x: &mut Xml, e: &EventRecord) {
    x.leaf("StackId", &e.stack_id)
        .leaf("EventId", &e.event_id)
        .leaf("StackName", &e.stack_name)
        .leaf("LogicalResourceId", &e.logical_id)
        .leaf(
            "PhysicalResourceId",
            if e.resource_type == STACK_TYPE {
                &e.stack_id
            } else {
                &e.physical_id
            },
        )
        .leaf("ResourceType", &e.resource_type)
        .leaf("Timestamp", &e.timestamp)
        .leaf("ResourceStatus", e.status.as_str())
        .opt("ResourceStatusReason", e.status_reason.as_deref())
        .opt("ResourceProperties", e.properties.as_deref());
    if let Some(h) = &e.hook {
        x.leaf("HookType", &h.hook_type)
            .leaf("HookStatus", h.hook_status.as_str())
            .opt("HookStatusReason", h.hook_status_reason.as_deref())
            .leaf("HookInvocationPoint", &h.hook_invocation_point)
            .leaf("HookFailureMode", h.hook_failure_mode.as_str());
    }
}

async fn describe_stack_events(app: &App, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let s = app
        .engine
        .store()
        .find_stack(name)
        .await?
        .ok_or_else(|| ApiError::validation(format!("Stack [{name}] does not exist")))?;
    // Newest first, a page at a time: only the page's events are read (a
    // waiter polling a stack of thousands of resources must not read
    // every event each time). The token is the offset from the newest.
    let store = app.engine.store();
    let count = store.event_count(&s.stack_id).await?;
    let (newest_first, next) = window(count, f, PAGE)?;
    // The same events ascending: those from count - end up to count - start.
    let mut items = store
        .events_page(&s.stack_id, count - newest_first.end, newest_first.len())
        .await?;
    items.reverse();
    result(|x| {
        x.list("StackEvents", &items, event_xml);
        x.opt("NextToken", next.as_deref());
    })
}

/// `CairnWaitForStackEvents` (StackName, KnownEvents, WaitSeconds ≤ 20,
/// default 10): answers as soon as the stack has more than KnownEvents
/// events, or when WaitSeconds pass, with its EventCount. Followers
/// (`cairn --endpoint … deploy`) long-poll with it instead of re-reading
/// every event: the engine answering hears of events written by any engine
/// at once (PostgreSQL LISTEN/NOTIFY).
async fn wait_for_stack_events(app: &App, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let known: usize = match f.get("KnownEvents") {
        Some(n) => n
            .parse()
            .map_err(|_| ApiError::validation("KnownEvents must be a number of events"))?,
        None => 0,
    };
    let wait = match f.get("WaitSeconds") {
        Some(n) => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n <= 20)
            .ok_or_else(|| ApiError::validation("WaitSeconds must be a number from 0 to 20"))?,
        None => 10,
    };
    let store = app.engine.store();
    let s = store
        .find_stack(name)
        .await?
        .ok_or_else(|| ApiError::validation(format!("Stack [{name}] does not exist")))?;
    let mut bell = store.event_bell();
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(wait);
    loop {
        let count = store.event_count(&s.stack_id).await?;
        if count > known || tokio::time::Instant::now() >= until {
            return result(|x| {
                x.leaf("EventCount", &count.to_string());
            });
        }
        // Woken by news of this stack; checked again at least every second
        // (a lost announcement costs a second, not the whole wait).
        let step = until.min(tokio::time::Instant::now() + std::time::Duration::from_secs(1));
        match bell.as_mut() {
            Some(bell) => {
                let news = async {
                    loop {
                        match bell.recv().await {
                            Ok(id) if id != s.stack_id => continue,
                            _ => return,
                        }
                    }
                };
                let _ = tokio::time::timeout_at(step, news).await;
            }
            None => {
                tokio::time::sleep_until(
                    step.min(tokio::time::Instant::now() + std::time::Duration::from_millis(100)),
                )
                .await
            }
        }
    }
}

fn live(rows: Vec<ResourceRecord>) -> Vec<ResourceRecord> {
    rows.into_iter()
        .filter(|r| {
            !matches!(
                r.status,
                cairn_core::stack::ResourceStatus::DeleteComplete
                    | cairn_core::stack::ResourceStatus::DeleteSkipped
            ) || r.journal.is_some()
        })
        .collect()
}

fn resource_xml(
    x: &mut Xml,
    s: &StackRecord,
    shown: &ShownTypes,
    r: &ResourceRecord,
    detail: bool,
) {
    x.leaf("StackName", &s.stack_name)
        .leaf("StackId", &s.stack_id);
    x.leaf("LogicalResourceId", &r.logical_id)
        .opt("PhysicalResourceId", r.physical_id.as_deref())
        .leaf(
            "ResourceType",
            shown.type_of(&r.logical_id, &r.resource_type),
        )
        .leaf(
            if detail {
                "LastUpdatedTimestamp"
            } else {
                "Timestamp"
            },
            &r.updated_at,
        )
        .leaf("ResourceStatus", r.status.as_str())
        .opt("ResourceStatusReason", r.status_reason.as_deref())
        // Cairn's own: the registered type version it uses.
        .opt("TypeVersionId", r.type_version.as_deref());
    if detail {
        if let Some(m) = &r.metadata {
            x.leaf("Metadata", &m.to_string());
        }
    }
    x.open("DriftInformation")
        .leaf("StackResourceDriftStatus", "NOT_CHECKED")
        .close("DriftInformation");
}

async fn describe_stack_resource(app: &App, f: &Form) -> Outcome {
    let s = stack(app, f.required("StackName")?).await?;
    let logical = f.required("LogicalResourceId")?;
    let rows = live(app.engine.store().resources(&s.stack_id).await?);
    let r = rows
        .iter()
        .find(|r| r.logical_id == logical)
        .ok_or_else(|| {
            ApiError::validation(format!(
                "Resource {logical} does not exist for stack {}",
                s.stack_name
            ))
        })?;
    result(|x| {
        x.open("StackResourceDetail");
        resource_xml(x, &s, &ShownTypes::of(&s), r, true);
        x.close("StackResourceDetail");
    })
}

async fn describe_stack_resources(app: &App, f: &Form) -> Outcome {
    let s = match (f.get("StackName"), f.get("PhysicalResourceId")) {
        (Some(name), _) => stack(app, name).await?,
        (None, Some(physical)) => {
            let mut found = None;
            for s in app.engine.store().list_stacks().await? {
                if s.status == StackStatus::DeleteComplete {
                    continue;
                }
                let rows = app.engine.store().resources(&s.stack_id).await?;
                if rows
                    .iter()
                    .any(|r| r.physical_id.as_deref() == Some(physical))
                {
                    found = Some(s);
                    break;
                }
            }
            found.ok_or_else(|| {
                ApiError::validation(format!("Stack for {physical} does not exist"))
            })?
        }
        (None, None) => {
            return Err(ApiError::validation(
                "Either StackName or PhysicalResourceId must be specified.",
            ))
        }
    };
    let mut rows = live(app.engine.store().resources(&s.stack_id).await?);
    if let Some(l) = f.get("LogicalResourceId") {
        rows.retain(|r| r.logical_id == l);
    }
    rows.truncate(PAGE);
    let shown = ShownTypes::of(&s);
    result(|x| {
        x.list("StackResources", &rows, |x, r| {
            resource_xml(x, &s, &shown, r, false)
        });
    })
}

async fn list_stack_resources(app: &App, f: &Form) -> Outcome {
    let s = stack(app, f.required("StackName")?).await?;
    let rows = live(app.engine.store().resources(&s.stack_id).await?);
    let (items, next) = page(&rows, f, PAGE)?;
    let shown = ShownTypes::of(&s);
    result(|x| {
        x.list("StackResourceSummaries", items, |x, r| {
            x.leaf("LogicalResourceId", &r.logical_id)
                .opt("PhysicalResourceId", r.physical_id.as_deref())
                .leaf(
                    "ResourceType",
                    shown.type_of(&r.logical_id, &r.resource_type),
                )
                .leaf("LastUpdatedTimestamp", &r.updated_at)
                .leaf("ResourceStatus", r.status.as_str())
                .opt("ResourceStatusReason", r.status_reason.as_deref())
                .opt("TypeVersionId", r.type_version.as_deref());
            x.open("DriftInformation")
                .leaf("StackResourceDriftStatus", "NOT_CHECKED")
                .close("DriftInformation");
        });
        x.opt("NextToken", next.as_deref());
    })
}

async fn get_template(app: &App, f: &Form) -> Outcome {
    let (body, context) = match f.get("ChangeSetName") {
        Some(cs) => {
            let stack = f.get("StackName").unwrap_or("");
            let cs = app
                .engine
                .change_sets()
                .describe_change_set(stack, cs)
                .await?;
            (cs.template_body, cs.nested.context)
        }
        None => {
            let s = stack(app, f.required("StackName")?).await?;
            (s.template_body, s.context)
        }
    };
    // Processed: as Cairn reads it (AWS::Include, the language extensions,
    // HOT lowered), as JSON.
    let body = match f.get("TemplateStage") {
        None | Some("Original") => body,
        Some("Processed") => {
            let processed = cairn_core::template::expanded(&body, &context)
                .map_err(|e| ApiError::validation(e.to_string()))?;
            processed.to_string()
        }
        Some(other) => {
            return Err(ApiError::validation(format!(
                "1 validation error detected: Value '{other}' at 'templateStage' failed to satisfy constraint: Member must satisfy enum value set: [Original, Processed]"
            )))
        }
    };
    result(|x| {
        x.leaf("TemplateBody", &body);
        x.list("StagesAvailable", &["Original", "Processed"], |x, s| {
            x.out_text(s);
        });
    })
}

async fn validate_template(app: &App, f: &Form) -> Outcome {
    let body = template_body(app, f)?.ok_or_else(|| {
        ApiError::validation("Either Template URL or Template Body must be specified.")
    })?;
    let context = template_context(f)?.unwrap_or_default().0;
    // Macros run as a deploy runs them, so validation agrees with it (with
    // the parameters' defaults: ValidateTemplate takes no values).
    let context = app
        .engine
        .process_template(&body, context, &BTreeMap::new())
        .await?;
    let declared = declared_transforms(&body);
    let t =
        Template::parse_with(&body, &context).map_err(|e| ApiError::validation(e.to_string()))?;
    cairn_core::validate::validate_template(&t, app.engine.registry())
        .map_err(|e| ApiError::validation(e.to_string()))?;
    let required = required_capabilities(app, &t, &body);
    result(|x| {
        x.list("Parameters", &t.parameters, |x, p| {
            x.leaf("ParameterKey", &p.name);
            if let Some(d) = &p.default {
                x.leaf("DefaultValue", if p.no_echo { MASK } else { d });
            }
            x.leaf("NoEcho", if p.no_echo { "true" } else { "false" })
                .opt("Description", p.description.as_deref());
        });
        x.opt("Description", t.description.as_deref());
        capabilities_xml(x, &required);
        x.list("DeclaredTransforms", &declared, |x, t| {
            x.out_text(t);
        });
    })
}

/// The transforms a template names (ValidateTemplate's and
/// GetTemplateSummary's `DeclaredTransforms`), each once, in the order
/// they run.
fn declared_transforms(body: &str) -> Vec<String> {
    if !body.contains("Transform") {
        return Vec::new();
    }
    let Ok(v) = Template::body_of(body) else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    for site in cairn_core::template::transform::sites(&v).unwrap_or_default() {
        if !names.contains(&site.name) {
            names.push(site.name);
        }
    }
    names
}

/// What `template` (text `body`) requires to be acknowledged, run as it is.
fn required_capabilities(
    app: &App,
    template: &Template,
    body: &str,
) -> cairn_core::engine::capabilities::Required {
    let mut required = cairn_core::engine::capabilities::Required::default();
    required.add(template, body, app.engine.registry(), true);
    required
}

/// `Capabilities` and `CapabilitiesReason` of ValidateTemplate and
/// GetTemplateSummary.
fn capabilities_xml(x: &mut Xml, required: &cairn_core::engine::capabilities::Required) {
    x.list("Capabilities", &required.list(), |x, c| {
        x.out_text(c);
    });
    x.opt("CapabilitiesReason", required.reason().as_deref());
}

async fn get_template_summary(app: &App, f: &Form) -> Outcome {
    let (body, context) = match template_body(app, f)? {
        Some(b) => {
            let context = app
                .engine
                .process_template(&b, TemplateContext::default(), &BTreeMap::new())
                .await?;
            (b, context)
        }
        None => match f.get("StackName") {
            Some(name) => {
                let s = stack(app, name).await?;
                (s.template_body, s.context)
            }
            None => {
                return Err(ApiError::validation(
                    "Either Template URL or Template Body or StackName must be specified.",
                ))
            }
        },
    };
    let t =
        Template::parse_with(&body, &context).map_err(|e| ApiError::validation(e.to_string()))?;
    let declared = declared_transforms(&body);
    let mut types: Vec<&str> = t.resources.iter().map(|r| r.type_name.as_str()).collect();
    types.sort_unstable();
    types.dedup();
    let required = required_capabilities(app, &t, &body);
    // The types an import can adopt, by their schema's primary identifier.
    let identifiers: Vec<(&str, Vec<&str>, Vec<String>)> = types
        .iter()
        .filter_map(|ty| {
            let schema = app.engine.registry().schema(ty)?;
            if schema.primary_identifier.is_empty() {
                return None;
            }
            let ids = t
                .resources
                .iter()
                .filter(|r| r.type_name == *ty)
                .map(|r| r.logical_id.as_str())
                .collect();
            Some((*ty, ids, schema.primary_identifier.clone()))
        })
        .collect();
    result(|x| {
        x.list("Parameters", &t.parameters, |x, p| {
            x.leaf("ParameterKey", &p.name);
            if let Some(d) = &p.default {
                x.leaf("DefaultValue", if p.no_echo { MASK } else { d });
            }
            x.leaf("ParameterType", p.ty.name())
                .leaf("NoEcho", if p.no_echo { "true" } else { "false" })
                .opt("Description", p.description.as_deref());
            x.open("ParameterConstraints");
            x.list("AllowedValues", &p.allowed_values, |x, v| {
                x.out_text(v);
            });
            x.close("ParameterConstraints");
        });
        x.opt("Description", t.description.as_deref());
        capabilities_xml(x, &required);
        x.list("ResourceTypes", &types, |x, ty| {
            x.out_text(ty);
        });
        x.leaf(
            "Version",
            t.format_version.as_deref().unwrap_or("2010-09-09"),
        );
        if let Some(m) = &t.metadata {
            x.leaf("Metadata", &m.to_string());
        }
        x.list("DeclaredTransforms", &declared, |x, t| {
            x.out_text(t);
        });
        x.list(
            "ResourceIdentifierSummaries",
            &identifiers,
            |x, (ty, ids, identifiers)| {
                x.leaf("ResourceType", ty);
                x.list("LogicalResourceIds", ids, |x, id| {
                    x.out_text(id);
                });
                x.list("ResourceIdentifiers", identifiers, |x, p| {
                    x.out_text(p);
                });
            },
        );
    })
}

async fn create_change_set(app: &App, f: &Form) -> Outcome {
    let stack_name = f.required("StackName")?;
    let name = f.required("ChangeSetName")?;
    let kind = match f.get("ChangeSetType") {
        None => None,
        Some("CREATE") => Some(ChangeSetType::Create),
        Some("UPDATE") => Some(ChangeSetType::Update),
        Some("IMPORT") => Some(ChangeSetType::Import),
        Some(other) => {
            return Err(ApiError::validation(format!(
                "ChangeSetType {other} is not supported by Cairn (CREATE, UPDATE or IMPORT)"
            )))
        }
    };
    let resources_to_import = match kind {
        Some(ChangeSetType::Import) => resources_to_import(f)?,
        _ => Vec::new(),
    };
    let previous = f.flag("UsePreviousTemplate")? == Some(true);
    let body = template_body(app, f)?;
    if previous && body.is_some() {
        return Err(ApiError::validation(
            "Exactly one of TemplateBody, TemplateURL or UsePreviousTemplate must be given.",
        ));
    }
    let (context, env_values) = template_context(f)?.unwrap_or_default();
    let input = CreateChangeSetInput {
        resources_to_import,
        stack_name: stack_name.to_string(),
        change_set_name: name.to_string(),
        // CloudFormation's default is UPDATE; the engine decides from the
        // stack when it is not given, which is the same for a live stack.
        change_set_type: kind.or(Some(ChangeSetType::Update)),
        template_body: body,
        parameters: with_environment_values(parameters(f)?, env_values, ParameterInput::Value),
        description: f.get("Description").map(String::from),
        // `aws cloudformation deploy` without --tags sends an empty list:
        // a change set keeps the stack's tags unless it names some.
        tags: tags(f)?.filter(|t| !t.is_empty()),
        origin: origin(app, f),
        include_nested_stacks: f.flag("IncludeNestedStacks")? == Some(true),
        context,
        capabilities: Some(f.list("Capabilities")),
        rollback_configuration: rollback_configuration(f)?,
        notification_arns: notification_arns(f),
        // Cairn's own: the set moves resources to their types' default
        // versions, and shows each move.
        upgrade_types: f.flag("CairnUpgradeTypes")? == Some(true),
    };
    let cs = app.engine.change_sets().create_change_set(&input).await?;
    result(|x| {
        x.leaf("Id", &cs.change_set_id)
            .leaf("StackId", &cs.stack_id);
    })
}

/// `ResourcesToImport.member.N.{ResourceType, LogicalResourceId,
/// ResourceIdentifier.entry.M.{key, value}}`.
fn resources_to_import(f: &Form) -> Result<Vec<cairn_core::import::ResourceToImport>, ApiError> {
    let items: Vec<Value> = f
        .structs("ResourcesToImport")
        .into_iter()
        .map(|m| {
            let mut identifier = serde_json::Map::new();
            for (k, key) in &m {
                let Some(n) = k
                    .strip_prefix("ResourceIdentifier.entry.")
                    .and_then(|r| r.strip_suffix(".key"))
                else {
                    continue;
                };
                let value = m
                    .get(&format!("ResourceIdentifier.entry.{n}.value"))
                    .cloned()
                    .unwrap_or_default();
                identifier.insert(key.clone(), Value::String(value));
            }
            serde_json::json!({
                "ResourceType": m.get("ResourceType"),
                "LogicalResourceId": m.get("LogicalResourceId"),
                "ResourceIdentifier": identifier,
            })
        })
        .collect();
    cairn_core::import::parse_resources(&Value::Array(items))
        .map_err(|e| ApiError::validation(e.to_string()))
}

/// A JSON object's members as XML elements (arrays as `<member>` lists).
fn json_members(x: &mut Xml, v: &Value) {
    let Value::Object(map) = v else { return };
    for (k, v) in map {
        match v {
            Value::Null => {}
            Value::Object(_) => {
                x.open(k);
                json_members(x, v);
                x.close(k);
            }
            Value::Array(items) => {
                x.list(k, items, |x, item| match item {
                    Value::Object(_) => json_members(x, item),
                    Value::String(s) => {
                        x.out_text(s);
                    }
                    other => {
                        x.out_text(&other.to_string());
                    }
                });
            }
            Value::String(s) => {
                x.leaf(k, s);
            }
            other => {
                x.leaf(k, &other.to_string());
            }
        }
    }
}

async fn describe_change_set(app: &App, f: &Form) -> Outcome {
    let name = f.required("ChangeSetName")?;
    let cs = app
        .engine
        .change_sets()
        .describe_change_set(f.get("StackName").unwrap_or(""), name)
        .await?;
    let changes = cs.changes.as_array().cloned().unwrap_or_default();
    let (items, next) = page(&changes, f, PAGE)?;
    result(|x| {
        x.leaf("ChangeSetName", &cs.change_set_name)
            .leaf("ChangeSetId", &cs.change_set_id)
            .leaf("StackId", &cs.stack_id)
            .leaf("StackName", &cs.stack_name)
            // Not in CloudFormation's output (SDKs ignore it); `cairn
            // --endpoint` shows it as the embedded engine does.
            .leaf("ChangeSetType", cs.change_set_type.as_str())
            .opt("Description", cs.description.as_deref());
        let params: Vec<(&String, &String)> = cs.parameters.iter().collect();
        x.list("Parameters", &params, |x, (k, v)| {
            let shown = if cs.no_echo.iter().any(|n| n == *k) {
                MASK
            } else {
                v.as_str()
            };
            x.leaf("ParameterKey", k).leaf("ParameterValue", shown);
        });
        x.leaf("CreationTime", &cs.created_at)
            .leaf("ExecutionStatus", cs.execution_status.as_str())
            .leaf("Status", cs.status.as_str())
            .opt("StatusReason", cs.status_reason.as_deref());
        let targets = cs.nested.notification_arns.as_deref().unwrap_or_default();
        x.list("NotificationARNs", targets, |x, t| {
            x.out_text(t);
        });
        x.list("Capabilities", &[] as &[&str], |_, _| {});
        x.list("Tags", cs.tags.as_deref().unwrap_or_default(), |x, t| {
            x.leaf("Key", &t.key).leaf("Value", &t.value);
        });
        x.list("Changes", items, json_members);
        x.opt("NextToken", next.as_deref());
        nesting_xml(x, &cs);
        // Cairn's own: the CHANGE_SET-target hooks' verdicts (also
        // ListHookResults').
        x.list("HookResults", &cs.nested.hook_results, |x, h| {
            hook_result_xml(x, h)
        });
    })
}

/// One hook's verdict on a change set, as ListHookResults shows it.
fn hook_result_xml(x: &mut Xml, h: &cairn_core::hooks::HookResult) {
    x.leaf("InvocationPoint", &h.invocation_point)
        .leaf("FailureMode", h.failure_mode.as_str())
        .leaf("TypeName", &h.type_name)
        .leaf("TypeVersionId", "00000001")
        .leaf("Status", h.status.as_str())
        .opt("HookStatusReason", h.hook_status_reason.as_deref())
        .leaf("InvokedAt", &h.invoked_at)
        .leaf("TargetType", "CHANGE_SET");
}

/// ListHookResults for a change set (TargetType CHANGE_SET, TargetId its
/// ARN or name with StackName... its ARN): the hooks' verdicts kept with it.
async fn list_hook_results(app: &App, f: &Form) -> Outcome {
    let target_type = f.required("TargetType")?;
    if target_type != "CHANGE_SET" {
        return Err(ApiError::validation(format!(
            "TargetType {target_type} is not kept by this Cairn: it keeps the results of CHANGE_SET targets (a resource's and a stack's verdicts are in DescribeStackEvents)"
        )));
    }
    let id = f.required("TargetId")?;
    let cs = app.engine.change_sets().describe_change_set("", id).await?;
    result(|x| {
        x.list("HookResults", &cs.nested.hook_results, |x, h| {
            hook_result_xml(x, h);
            x.leaf("TargetId", &cs.change_set_id);
        });
        x.leaf("TargetType", "CHANGE_SET")
            .leaf("TargetId", &cs.change_set_id);
    })
}

async fn execute_change_set(app: &Arc<App>, f: &Form) -> Outcome {
    let name = f.required("ChangeSetName")?;
    let on_failure = if f.flag("DisableRollback")? == Some(true) {
        OnFailure::DoNothing
    } else {
        OnFailure::Rollback
    };
    let id = app
        .engine
        .change_sets()
        .execute_change_set(f.get("StackName").unwrap_or(""), name, on_failure)
        .await?;
    app.drive(id, "EXECUTE_CHANGE_SET").await;
    result(|_| {})
}

async fn delete_change_set(app: &App, f: &Form) -> Outcome {
    let name = f.required("ChangeSetName")?;
    app.engine
        .change_sets()
        .delete_change_set(f.get("StackName").unwrap_or(""), name)
        .await?;
    result(|_| {})
}

fn change_set_summary(x: &mut Xml, cs: &ChangeSetRecord) {
    x.leaf("StackId", &cs.stack_id)
        .leaf("StackName", &cs.stack_name)
        .leaf("ChangeSetId", &cs.change_set_id)
        .leaf("ChangeSetName", &cs.change_set_name)
        .leaf("ExecutionStatus", cs.execution_status.as_str())
        .leaf("Status", cs.status.as_str())
        .opt("StatusReason", cs.status_reason.as_deref())
        .leaf("CreationTime", &cs.created_at)
        .opt("Description", cs.description.as_deref());
    nesting_xml(x, cs);
}

/// A change set's place in a tree of nested change sets.
fn nesting_xml(x: &mut Xml, cs: &ChangeSetRecord) {
    let include = if cs.nested.include_nested_stacks {
        "true"
    } else {
        "false"
    };
    x.leaf("IncludeNestedStacks", include)
        .opt(
            "ParentChangeSetId",
            cs.nested.parent_change_set_id.as_deref(),
        )
        .opt("RootChangeSetId", cs.nested.root_change_set_id.as_deref());
}

async fn list_change_sets(app: &App, f: &Form) -> Outcome {
    let sets = app
        .engine
        .change_sets()
        .list_change_sets(f.required("StackName")?)
        .await?;
    let (items, next) = page(&sets, f, PAGE)?;
    result(|x| {
        x.list("Summaries", items, change_set_summary);
        x.opt("NextToken", next.as_deref());
    })
}

async fn continue_update_rollback(app: &Arc<App>, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let skip = f.list("ResourcesToSkip");
    let id = app
        .engine
        .updates()
        .start_continue_rollback(name, &skip)
        .await?;
    app.drive(id, "CONTINUE_UPDATE_ROLLBACK").await;
    result(|_| {})
}

async fn rollback_stack(app: &Arc<App>, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let id = app.engine.updates().start_rollback(name).await?;
    app.drive(id.clone(), "ROLLBACK").await;
    result(|x| {
        x.leaf("StackId", &id);
    })
}

/// `UpdateTerminationProtection`: `EnableTerminationProtection` is
/// required (`true` or `false`).
async fn update_termination_protection(app: &App, f: &Form) -> Outcome {
    let enabled = match f.required("EnableTerminationProtection")? {
        "true" => true,
        "false" => false,
        other => {
            return Err(ApiError::validation(format!(
                "EnableTerminationProtection must be true or false, not {other}"
            )))
        }
    };
    let id = app
        .engine
        .update_termination_protection(f.required("StackName")?, enabled)
        .await?;
    result(|x| {
        x.leaf("StackId", &id);
    })
}

/// `SetStackPolicy`: `StackPolicyBody` or `StackPolicyURL`.
async fn set_stack_policy(app: &App, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let Some(body) = policy_body(app, f, ("StackPolicyBody", "StackPolicyURL"))? else {
        return Err(ApiError::validation(
            "Either StackPolicyBody or StackPolicyURL must be specified.",
        ));
    };
    app.engine.set_stack_policy(name, &body).await?;
    result(|_| {})
}

/// `GetStackPolicy`: the policy as it was set; none when the stack has none.
async fn get_stack_policy(app: &App, f: &Form) -> Outcome {
    let policy = app.engine.stack_policy(f.required("StackName")?).await?;
    result(|x| {
        x.opt("StackPolicyBody", policy.as_deref());
    })
}

async fn cancel_update_stack(app: &App, f: &Form) -> Outcome {
    app.engine
        .updates()
        .cancel_update(f.required("StackName")?)
        .await?;
    Ok(None)
}

/// `SignalResource`: kept before it is answered. `CairnReason` (not in
/// CloudFormation's model, which has no reason) carries `cairn signal
/// --reason`.
async fn signal_resource(app: &App, f: &Form) -> Outcome {
    app.engine
        .signals()
        .signal_resource(
            f.required("StackName")?,
            f.required("LogicalResourceId")?,
            f.required("UniqueId")?,
            f.required("Status")?,
            f.get("CairnReason").map(str::to_string),
        )
        .await?;
    Ok(None)
}

async fn list_exports(app: &App, f: &Form) -> Outcome {
    let exports = app.engine.store().exports().await?;
    let (items, next) = page(&exports, f, PAGE)?;
    result(|x| {
        x.list("Exports", items, |x, (name, value, stack_id)| {
            x.leaf("ExportingStackId", stack_id)
                .leaf("Name", name)
                .leaf("Value", value);
        });
        x.opt("NextToken", next.as_deref());
    })
}

async fn list_imports(app: &App, f: &Form) -> Outcome {
    let name = f.required("ExportName")?;
    if app.engine.store().export(name).await?.is_none() {
        return Err(ApiError::validation(format!(
            "Export '{name}' does not exist."
        )));
    }
    let importers = app.engine.store().importers(name).await?;
    if importers.is_empty() {
        return Err(ApiError::validation(format!(
            "Export '{name}' is not imported by any stack."
        )));
    }
    let (items, next) = page(&importers, f, PAGE)?;
    result(|x| {
        x.list("Imports", items, |x, s| {
            x.out_text(s);
        });
        x.opt("NextToken", next.as_deref());
    })
}

async fn detect_stack_drift(app: &App, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let only = f.list("LogicalResourceIds");
    let d = app.engine.drift().detect_drift(name, &only).await?;
    result(|x| {
        x.leaf("StackDriftDetectionId", &d.stack_drift_detection_id);
    })
}

/// A detection by its id.
async fn detection(app: &App, id: &str) -> Result<StackDriftDetection, ApiError> {
    app.engine
        .drift()
        .drift_detection(id)
        .await?
        .ok_or_else(|| ApiError::validation(format!("The drift detection {id} does not exist")))
}

async fn describe_drift_status(app: &App, f: &Form) -> Outcome {
    let d = detection(app, f.required("StackDriftDetectionId")?).await?;
    result(|x| {
        x.leaf("StackId", &d.stack_id)
            .leaf("StackDriftDetectionId", &d.stack_drift_detection_id)
            .leaf("StackDriftStatus", d.stack_drift_status.as_str())
            .leaf("DetectionStatus", d.detection_status.as_str())
            .opt(
                "DetectionStatusReason",
                d.detection_status_reason.as_deref(),
            )
            .leaf(
                "DriftedStackResourceCount",
                &d.drifted_stack_resource_count.to_string(),
            )
            .leaf("Timestamp", &d.timestamp);
    })
}

fn drift_xml(x: &mut Xml, r: &ResourceDrift) {
    x.leaf("StackId", &r.stack_id)
        .leaf("LogicalResourceId", &r.logical_resource_id)
        .leaf("PhysicalResourceId", &r.physical_resource_id)
        .leaf("ResourceType", &r.resource_type)
        .leaf("ExpectedProperties", &r.expected_properties);
    let diffs = serde_json::to_value(&r.property_differences).unwrap_or(Value::Null);
    let diffs = diffs.as_array().cloned().unwrap_or_default();
    x.list("PropertyDifferences", &diffs, json_members);
    x.leaf(
        "StackResourceDriftStatus",
        r.stack_resource_drift_status.as_str(),
    )
    .leaf("Timestamp", &r.timestamp)
    // Cairn's: why a resource is NOT_CHECKED or UNKNOWN.
    .opt("DriftStatusReason", r.drift_status_reason.as_deref());
}

async fn describe_resource_drifts(app: &App, f: &Form) -> Outcome {
    let s = stack(app, f.required("StackName")?).await?;
    let d = app
        .engine
        .drift()
        .last_drift_detection(&s.stack_id)
        .await?
        .ok_or_else(|| {
            ApiError::validation(format!(
                "No drift detection has been run on stack {}; call DetectStackDrift first",
                s.stack_name
            ))
        })?;
    let filter = f.list("StackResourceDriftStatusFilters");
    let drifts: Vec<ResourceDrift> = d
        .stack_resource_drifts
        .into_iter()
        .filter(|r| {
            filter.is_empty()
                || filter
                    .iter()
                    .any(|f| f == r.stack_resource_drift_status.as_str())
        })
        .collect();
    let (items, next) = page(&drifts, f, max_results(f)?)?;
    result(|x| {
        x.list("StackResourceDrifts", items, drift_xml);
        x.opt("NextToken", next.as_deref());
    })
}

async fn detect_resource_drift(app: &App, f: &Form) -> Outcome {
    let name = f.required("StackName")?;
    let logical = f.required("LogicalResourceId")?.to_string();
    let d = app
        .engine
        .drift()
        .detect_drift(name, std::slice::from_ref(&logical))
        .await?;
    let r = d
        .stack_resource_drifts
        .iter()
        .find(|r| r.logical_resource_id == logical)
        .ok_or_else(|| {
            ApiError::validation(format!(
                "Resource {logical} does not exist for stack {name}"
            ))
        })?;
    result(|x| {
        x.open("StackResourceDrift");
        drift_xml(x, r);
        x.close("StackResourceDrift");
    })
}

async fn stack_history(app: &App, f: &Form) -> Outcome {
    let s = stack(app, f.required("StackName")?).await?;
    let entries = app.engine.store().history(&s.stack_id).await?;
    result(|x| {
        x.leaf("StackId", &s.stack_id);
        x.list("Operations", &entries, |x, h| {
            x.leaf("Operation", h.kind.as_str())
                .opt("ChangeSetName", h.change_set.as_deref())
                .leaf("StartTime", &h.started_at)
                .opt("EndTime", h.ended_at.as_deref())
                .opt("Status", h.status.as_deref())
                .opt("StatusReason", h.status_reason.as_deref());
            let params: Vec<(&String, &String)> = h.parameters.iter().collect();
            x.list("Parameters", &params, |x, (k, v)| {
                x.leaf("ParameterKey", k).leaf("ParameterValue", v);
            });
            x.leaf("TemplateBody", &h.template_body);
            if let Some(d) = &h.details {
                x.leaf("Details", &d.to_string());
            }
        });
    })
}

async fn reconcile_stack(app: &Arc<App>, f: &Form) -> Outcome {
    let flag = |k: &str| f.flag(k).map(|v| v == Some(true));
    let input = cairn_core::engine::ReconcileInput {
        update: UpdateStackInput {
            stack_policy: None,
            rollback_configuration: None,
            notification_arns: None,
            stack_policy_during_update: policy_body(
                app,
                f,
                ("StackPolicyDuringUpdateBody", "StackPolicyDuringUpdateURL"),
            )?,
            stack_name: f.required("StackName")?.to_string(),
            template_body: template_body(app, f)?,
            parameters: parameters(f)?,
            tags: None,
            origin: Default::default(),
            context: None,
            disable_rollback: false,
            capabilities: Some(f.list("Capabilities")),
            upgrade_types: upgrade_types(f, "UpgradeTypes")?,
        },
        flags: cairn_core::engine::ReconcileFlags {
            drift_only: flag("DriftOnly")?,
            skip_install: flag("SkipInstall")?,
            skip_uninstall: flag("SkipUninstall")?,
            skip_reinstall: flag("SkipReinstall")?,
            skip_heal: flag("SkipHeal")?,
            skip_drift_check: flag("SkipDriftCheck")?,
            ignore_failure: flag("IgnoreFailure")?,
        },
    };
    if flag("Preview")? {
        let plan = app.engine.reconciles().plan_reconcile(&input).await?;
        let text = serde_json::to_string(&plan)
            .map_err(|e| ApiError::new(500, "InternalFailure", e.to_string()))?;
        return result(|x| {
            x.leaf("Plan", &text);
        });
    }
    let id = app.engine.reconciles().start_reconcile(&input).await?;
    app.drive(id.clone(), "RECONCILE").await;
    result(|x| {
        x.leaf("StackId", &id);
    })
}
