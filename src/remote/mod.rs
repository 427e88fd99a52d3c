//! `cairn --endpoint URL <command>`: the CLI as a client of a `cairn serve`
//! (or any CloudFormation endpoint). Requests are signed with SigV4 from the
//! usual AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
//! AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION); answers are turned
//! back into the records the local commands print, so the output is the same.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, Context};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use cairn_core::stack::{
    ChangeSetRecord, ChangeSetType, EventRecord, ExecutionStatus, HistoryRecord, StackRecord,
    StackStatus,
};

mod credentials;
mod records;
mod types;
mod xml;

use credentials::SharedConfig;
use records::{change_set_record, drift_detection, event_record, history_record, stack_record};
use xml::{parse_xml, Node};

use crate::progress::Progress;
use crate::stacks::{self, ResourceLine};
use crate::OutputFormat;

pub struct Remote {
    endpoint: String,
    http: reqwest::Client,
    credentials: Option<Credentials>,
    region: String,
}

impl Remote {
    pub fn new(endpoint: &str) -> anyhow::Result<Remote> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let shared = SharedConfig::load()?;
        let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => Some(Credentials::new(
                id,
                secret,
                env("AWS_SESSION_TOKEN"),
                None,
                "environment",
            )),
            _ => match (
                shared.get("aws_access_key_id"),
                shared.get("aws_secret_access_key"),
            ) {
                (Some(id), Some(secret)) => Some(Credentials::new(
                    id,
                    secret,
                    shared.get("aws_session_token"),
                    None,
                    "shared config",
                )),
                _ => None,
            },
        };
        let mut http = reqwest::Client::builder().timeout(Duration::from_secs(120));
        if let Some(bundle) = env("AWS_CA_BUNDLE") {
            let pem = std::fs::read(&bundle)
                .with_context(|| format!("cannot read AWS_CA_BUNDLE {bundle}"))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)? {
                http = http.add_root_certificate(cert);
            }
        }
        Ok(Remote {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            http: http.build()?,
            credentials,
            region: env("AWS_REGION")
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .or_else(|| shared.get("region"))
                .unwrap_or_else(|| "us-east-1".into()),
        })
    }

    /// Signs `request` for `service` (when there are credentials).
    fn signed(
        &self,
        mut request: reqwest::RequestBuilder,
        service: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> anyhow::Result<reqwest::RequestBuilder> {
        let Some(creds) = &self.credentials else {
            return Ok(request);
        };
        let identity = creds.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()?
            .into();
        let signable = SignableRequest::new(
            "POST",
            url,
            headers.iter().copied(),
            SignableBody::Bytes(body),
        )?;
        let (instructions, _) = sign(signable, &params)?.into_parts();
        for (name, value) in instructions.headers() {
            request = request.header(name, value);
        }
        Ok(request)
    }

    /// Calls CloudTrail's JSON 1.1 `action` (LookupEvents) with `body`.
    async fn call_trail(
        &self,
        action: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<serde_json::Value> {
        let url = format!("{}/", self.endpoint);
        let target = format!("com.amazonaws.cloudtrail.v20131101.CloudTrail_20131101.{action}");
        let text = body.to_string();
        let headers = [
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", target.as_str()),
        ];
        let mut request = self.http.post(&url).body(text.clone());
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let request = self.signed(request, "cloudtrail", &url, &headers, text.as_bytes())?;
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.endpoint))?;
        let status = response.status();
        let answer: serde_json::Value = serde_json::from_slice(&response.bytes().await?)
            .with_context(|| format!("{} did not answer LookupEvents with JSON", self.endpoint))?;
        if !status.is_success() {
            return Err(anyhow!(
                "{}: {}",
                answer["__type"].as_str().unwrap_or("error"),
                answer["message"].as_str().unwrap_or_default()
            ));
        }
        Ok(answer)
    }

    /// Calls `action`; the `<{Action}Result>` element, or the server's error
    /// message as the error.
    async fn call(&self, action: &str, params: &[(String, String)]) -> anyhow::Result<Node> {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("Action", action)
            .append_pair("Version", "2010-05-15");
        for (k, v) in params {
            form.append_pair(k, v);
        }
        let body = form.finish();
        let url = format!("{}/", self.endpoint);
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let request = self
            .http
            .post(&url)
            .header("content-type", content_type)
            .body(body.clone());
        let request = self.signed(
            request,
            "cloudformation",
            &url,
            &[("content-type", content_type)],
            body.as_bytes(),
        )?;
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.endpoint))?;
        let status = response.status();
        let text = response.text().await?;
        let root = parse_xml(&text)?;
        if !status.is_success() {
            let error = root.child("Error").cloned().unwrap_or_default();
            let message = error.text_of("Message").unwrap_or_else(|| text.clone());
            return Err(anyhow!("{message}"));
        }
        Ok(root
            .child(&format!("{action}Result"))
            .cloned()
            .unwrap_or_default())
    }

    /// Every page of a paginated action, joined: the members of `list`.
    async fn all(
        &self,
        action: &str,
        params: &[(String, String)],
        list: &str,
    ) -> anyhow::Result<Vec<Node>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut p = params.to_vec();
            if let Some(t) = &token {
                p.push(kv("NextToken", t.clone()));
            }
            let page = self.call(action, &p).await?;
            out.extend(page.members(list).into_iter().cloned());
            token = page.text_of("NextToken").filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    async fn stack(&self, name: &str) -> anyhow::Result<StackRecord> {
        let r = self
            .call("DescribeStacks", &[kv("StackName", name.to_string())])
            .await?;
        let member = r.members("Stacks").into_iter().next().cloned();
        member
            .map(|m| stack_record(&m))
            .ok_or_else(|| anyhow!("Stack with id {name} does not exist"))?
    }

    /// The stack's events, oldest first.
    async fn events(&self, stack: &str) -> anyhow::Result<Vec<EventRecord>> {
        let mut events: Vec<EventRecord> = self
            .all(
                "DescribeStackEvents",
                &[kv("StackName", stack.to_string())],
                "StackEvents",
            )
            .await?
            .iter()
            .map(event_record)
            .collect::<anyhow::Result<Vec<_>>>()?;
        events.reverse();
        Ok(events)
    }

    /// The ids of the stack's events so far (a follow shows only newer ones).
    async fn event_ids(&self, stack_id: &str) -> anyhow::Result<HashSet<String>> {
        Ok(self
            .events(stack_id)
            .await?
            .into_iter()
            .map(|e| e.event_id)
            .collect())
    }

    /// Calls `action`, which starts an operation on the stack, and follows
    /// the operation's events to its end (`Ok` when it ends in `success`).
    /// `named` dresses the call's own error (e.g. with the template's path).
    async fn operate(
        &self,
        stack_id: &str,
        name: &str,
        action: &str,
        params: &[(String, String)],
        success: StackStatus,
        named: impl FnOnce(anyhow::Error) -> anyhow::Error,
    ) -> anyhow::Result<()> {
        let seen = self.event_ids(stack_id).await?;
        self.call(action, params).await.map_err(named)?;
        self.follow(stack_id, name, seen, success).await
    }

    /// Shows the stack's new events as they come until its operation ends;
    /// `Ok` when it ends in `success`, else the failure's description.
    async fn follow(
        &self,
        stack_id: &str,
        name: &str,
        seen: HashSet<String>,
        success: StackStatus,
    ) -> anyhow::Result<()> {
        let mut seen = seen;
        let mut progress: Option<Progress> = None;
        let mut mine = Vec::new();
        loop {
            let s = self.stack(stack_id).await?;
            let new: Vec<EventRecord> = self
                .events(stack_id)
                .await?
                .into_iter()
                .filter(|e| seen.insert(e.event_id.clone()))
                .collect();
            if let Some(first) = new.first() {
                progress
                    .get_or_insert_with(|| Progress::new(&first.stack_name))
                    .events(&new);
            }
            mine.extend(new);
            if !s.status.is_in_progress() && s.status != StackStatus::ReviewInProgress {
                if let Some(p) = &progress {
                    p.finish();
                }
                if s.status == success {
                    println!("stack {name} is {success}");
                    return Ok(());
                }
                return Err(anyhow!(stacks::describe_failure(&s, &mine)));
            }
            self.wait_for_events(stack_id, seen.len()).await;
        }
    }

    /// Waits until the stack has more than `known` events (the server's
    /// long poll, `CairnWaitForStackEvents`, up to 2 s so the status is
    /// looked at too), or half a second against a server without it.
    async fn wait_for_events(&self, stack_id: &str, known: usize) {
        let waited = self
            .call(
                "CairnWaitForStackEvents",
                &[
                    kv("StackName", stack_id),
                    kv("KnownEvents", known.to_string()),
                    kv("WaitSeconds", "2"),
                ],
            )
            .await;
        if waited.is_err() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Remote {
    async fn change_set(&self, stack: &str, name: &str) -> anyhow::Result<ChangeSetRecord> {
        let mut p = vec![kv("ChangeSetName", name)];
        if !stack.is_empty() {
            p.push(kv("StackName", stack));
        }
        let first = self.call("DescribeChangeSet", &p).await?;
        let mut cs = change_set_record(&first)?;
        // Changes are paginated; the rest of the members are on the first page.
        let mut changes: Vec<serde_json::Value> = first
            .members("Changes")
            .iter()
            .map(|c| c.to_json())
            .collect();
        let mut token = first.text_of("NextToken");
        while let Some(t) = token.filter(|t| !t.is_empty()) {
            let mut q = p.clone();
            q.push(kv("NextToken", t));
            let page = self.call("DescribeChangeSet", &q).await?;
            changes.extend(page.members("Changes").iter().map(|c| c.to_json()));
            token = page.text_of("NextToken");
        }
        cs.changes = serde_json::Value::Array(changes);
        Ok(cs)
    }
}

async fn plan(r: &Remote, args: crate::changesets::PlanArgs<'_>) -> anyhow::Result<()> {
    let name = match args.name {
        Some(n) => n.to_string(),
        None => format!("plan-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
    };
    let mut p = vec![
        kv("StackName", args.stack),
        kv("ChangeSetName", name.clone()),
    ];
    match args.template {
        Some(path) => {
            let body = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read template {}", path.display()))?;
            p.extend(context_members(path, &body, args.environments)?);
            p.push(kv("TemplateBody", body));
        }
        None if !args.environments.is_empty() => {
            return Err(anyhow!(
                "-e applies with a template: name the template the environments are for"
            ))
        }
        None => p.push(kv("UsePreviousTemplate", "true")),
    }
    // As the embedded engine decides: CREATE when the stack does not exist
    // (or is only in review), UPDATE otherwise.
    let kind = match r.stack(args.stack).await {
        Ok(s) if s.status != StackStatus::ReviewInProgress => "UPDATE",
        _ => "CREATE",
    };
    p.push(kv("ChangeSetType", kind));
    if let Some(d) = args.description {
        p.push(kv("Description", d));
    }
    if args.include_nested {
        p.push(kv("IncludeNestedStacks", "true"));
    }
    if args.upgrade_types {
        p.push(kv("CairnUpgradeTypes", "true"));
    }
    p.extend(tag_members(args.tags)?);
    if !args.capabilities.is_empty() {
        p.extend(list_members("Capabilities", args.capabilities));
    }
    p.extend(parameter_members(args.parameters, args.use_previous)?);
    r.call("CreateChangeSet", &p)
        .await
        .map_err(|e| match args.template {
            Some(path) => anyhow!("{}: {e}", path.display()),
            None => e,
        })?;
    let cs = r.change_set(args.stack, &name).await?;
    crate::changesets::print_change_set(&cs, args.output)?;
    if cs.execution_status == ExecutionStatus::Available && args.output == OutputFormat::Text {
        println!(
            "execute it with: cairn execute {} {}",
            cs.stack_name, cs.change_set_name
        );
    }
    Ok(())
}

/// `cairn update` against a server (Cairn's `CairnReconcileStack` action).
async fn update(r: &Remote, args: crate::reconcile::Args<'_>) -> anyhow::Result<()> {
    let mut p = vec![kv("StackName", args.stack)];
    if let Some(path) = args.template {
        p.push(kv(
            "TemplateBody",
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read template {}", path.display()))?,
        ));
    }
    p.extend(parameter_members(args.parameters, args.use_previous)?);
    if let Some(policy) = crate::stacks::read_policy(args.stack_policy_during_update)? {
        p.push(kv("StackPolicyDuringUpdateBody", policy));
    }
    let f = &args.flags;
    for (name, on) in [
        ("DriftOnly", f.drift_only),
        ("SkipInstall", f.skip_install),
        ("SkipUninstall", f.skip_uninstall),
        ("SkipReinstall", f.skip_reinstall),
        ("SkipHeal", f.skip_heal),
        ("SkipDriftCheck", f.skip_drift_check),
        ("IgnoreFailure", f.ignore_failure),
        ("Preview", args.preview),
        ("UpgradeTypes", args.upgrade_types),
    ] {
        if on {
            p.push(kv(name, "true"));
        }
    }
    let named = |e: anyhow::Error| match args.template {
        Some(path) => anyhow!("{}: {e}", path.display()),
        None => e,
    };
    if args.preview {
        let answer = r.call("CairnReconcileStack", &p).await.map_err(named)?;
        let plan: cairn_core::engine::ReconcilePlan =
            serde_json::from_str(&answer.text_or_empty("Plan"))?;
        return match args.output {
            OutputFormat::Json => stacks::print_json(&serde_json::to_value(&plan)?),
            OutputFormat::Text => {
                crate::reconcile::print_plan(&plan);
                Ok(())
            }
        };
    }
    let existing = r.stack(args.stack).await?;
    let outcome = r
        .operate(
            &existing.stack_id,
            args.stack,
            "CairnReconcileStack",
            &p,
            StackStatus::UpdateComplete,
            named,
        )
        .await;
    let h = r
        .call("CairnDescribeStackHistory", &[kv("StackName", args.stack)])
        .await?;
    if let Some(details) = h
        .members("Operations")
        .last()
        .map(|m| history_record(m))
        .transpose()?
        .and_then(|h| h.details)
    {
        crate::reconcile::print_report(&details);
    }
    outcome
}

fn parameter_members(
    params: &[String],
    use_previous: &[String],
) -> anyhow::Result<Vec<(String, String)>> {
    let _ = stacks::parameter_inputs(params, use_previous)?; // same checks and messages
    let mut out = Vec::new();
    let mut n = 0;
    for item in params {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| anyhow!("parameter {item} is not KEY=VALUE"))?;
        n += 1;
        out.push(kv(format!("Parameters.member.{n}.ParameterKey"), k));
        out.push(kv(format!("Parameters.member.{n}.ParameterValue"), v));
    }
    for k in use_previous {
        n += 1;
        out.push(kv(format!("Parameters.member.{n}.ParameterKey"), k.clone()));
        out.push(kv(
            format!("Parameters.member.{n}.UsePreviousValue"),
            "true",
        ));
    }
    Ok(out)
}

/// A list member of the form: `<prefix>.member.1 … N`.
fn list_members(prefix: &str, items: &[String]) -> Vec<(String, String)> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| kv(format!("{prefix}.member.{}", i + 1), v.clone()))
        .collect()
}

/// One form member.
fn kv(key: impl Into<String>, value: impl Into<String>) -> (String, String) {
    (key.into(), value.into())
}

/// The remote versions of the commands the API has actions for.
pub enum Command<'a> {
    Deploy(stacks::DeployArgs<'a>),
    Delete {
        stack: &'a str,
        retain: &'a [String],
    },
    ContinueRollback {
        stack: &'a str,
        skip: &'a [String],
    },
    CancelUpdate {
        stack: &'a str,
    },
    Rollback {
        stack: &'a str,
    },
    Protect {
        stack: &'a str,
        on: bool,
    },
    StackPolicy {
        stack: &'a str,
        set: Option<&'a Path>,
        output: OutputFormat,
    },
    Import(stacks::ImportArgs<'a>),
    Refactor(crate::refactor::RefactorArgs<'a>),
    Signal {
        stack: &'a str,
        resource: &'a str,
        unique_id: &'a str,
        status: &'a str,
        reason: Option<&'a str>,
    },
    List(OutputFormat),
    Describe(&'a str, OutputFormat),
    Events(&'a str, OutputFormat),
    Resources(&'a str, OutputFormat),
    Outputs(&'a str, OutputFormat),
    /// The stack, whether processed (TemplateStage), the output.
    Template(&'a str, bool, OutputFormat),
    Plan(crate::changesets::PlanArgs<'a>),
    Execute {
        stack: &'a str,
        change_set: &'a str,
        disable_rollback: bool,
    },
    ChangeSets(&'a str, OutputFormat),
    ChangeSet(&'a str, &'a str, OutputFormat),
    DeleteChangeSet(&'a str, &'a str),
    Drift {
        stack: &'a str,
        only: &'a [String],
        output: OutputFormat,
    },
    Validate(&'a Path, OutputFormat),
    History(&'a str, OutputFormat),
    Audit(&'a crate::audit::AuditArgs),
    Update(crate::reconcile::Args<'a>),
    Type(&'a crate::types::TypeCommand),
}

pub async fn run(endpoint: &str, command: Command<'_>) -> anyhow::Result<()> {
    let r = Remote::new(endpoint)?;
    match command {
        Command::Deploy(args) => deploy(&r, args).await,
        Command::Type(command) => types::run(&r, command).await,
        Command::Delete { stack, retain } => delete(&r, stack, retain).await,
        Command::ContinueRollback { stack, skip } => {
            let existing = r.stack(stack).await?;
            let mut p = vec![kv("StackName", stack)];
            p.extend(list_members("ResourcesToSkip", skip));
            r.operate(
                &existing.stack_id,
                stack,
                "ContinueUpdateRollback",
                &p,
                StackStatus::UpdateRollbackComplete,
                |e| e,
            )
            .await
        }
        Command::Rollback { stack } => {
            let existing = r.stack(stack).await?;
            r.operate(
                &existing.stack_id,
                stack,
                "RollbackStack",
                &[kv("StackName", stack)],
                stacks::rolled_back(Some(existing.status)),
                |e| e,
            )
            .await
        }
        Command::CancelUpdate { stack } => {
            let existing = r.stack(stack).await?;
            r.operate(
                &existing.stack_id,
                stack,
                "CancelUpdateStack",
                &[kv("StackName", stack)],
                StackStatus::UpdateRollbackComplete,
                |e| e,
            )
            .await
        }
        Command::List(output) => {
            let summaries = r.all("ListStacks", &[], "StackSummaries").await?;
            let mut stacks: Vec<StackRecord> = summaries
                .iter()
                .map(stack_record)
                .collect::<Result<_, _>>()?;
            stacks.reverse(); // oldest first, as the local list
            stacks::show_list(&stacks, output)
        }
        Command::Describe(stack, output) => stacks::show_stack(&r.stack(stack).await?, output),
        Command::Events(stack, output) => stacks::show_events(&r.events(stack).await?, output),
        Command::Resources(stack, output) => resources(&r, stack, output).await,
        Command::Outputs(stack, output) => stacks::show_outputs(&r.stack(stack).await?, output),
        Command::Plan(args) => plan(&r, args).await,
        Command::Execute {
            stack,
            change_set,
            disable_rollback,
        } => execute(&r, stack, change_set, disable_rollback).await,
        Command::ChangeSets(stack, output) => {
            let summaries = r
                .all("ListChangeSets", &[kv("StackName", stack)], "Summaries")
                .await?;
            let sets: Vec<ChangeSetRecord> = summaries
                .iter()
                .map(change_set_record)
                .collect::<anyhow::Result<_>>()?;
            crate::changesets::show_list(&sets, output)
        }
        Command::ChangeSet(stack, change_set, output) => {
            crate::changesets::print_change_set(&r.change_set(stack, change_set).await?, output)
        }
        Command::Signal {
            stack,
            resource,
            unique_id,
            status,
            reason,
        } => {
            let mut p = vec![
                kv("StackName", stack),
                kv("LogicalResourceId", resource),
                kv("UniqueId", unique_id),
                kv("Status", status),
            ];
            if let Some(reason) = reason {
                p.push(kv("CairnReason", reason));
            }
            r.call("SignalResource", &p).await?;
            println!("{status} signal {unique_id} kept for {resource} of stack {stack}");
            Ok(())
        }
        Command::Import(args) => import(&r, args).await,
        Command::Refactor(args) => refactor(&r, args).await,
        Command::StackPolicy { stack, set, output } => {
            if let Some(body) = crate::stacks::read_policy(set)? {
                r.call(
                    "SetStackPolicy",
                    &[kv("StackName", stack), kv("StackPolicyBody", body)],
                )
                .await?;
                println!("stack policy of stack {stack} is set");
                return Ok(());
            }
            let got = r.call("GetStackPolicy", &[kv("StackName", stack)]).await?;
            crate::stacks::print_policy(stack, got.text_of("StackPolicyBody").as_deref(), output)
        }
        Command::Protect { stack, on } => {
            r.call(
                "UpdateTerminationProtection",
                &[
                    kv("StackName", stack),
                    kv(
                        "EnableTerminationProtection",
                        if on { "true" } else { "false" },
                    ),
                ],
            )
            .await?;
            println!(
                "termination protection of stack {stack} is {}",
                if on { "on" } else { "off" }
            );
            Ok(())
        }
        Command::DeleteChangeSet(stack, change_set) => {
            r.call(
                "DeleteChangeSet",
                &[kv("StackName", stack), kv("ChangeSetName", change_set)],
            )
            .await?;
            println!("change set {change_set} of stack {stack} deleted");
            Ok(())
        }
        Command::Drift {
            stack,
            only,
            output,
        } => drift(&r, stack, only, output).await,
        Command::Validate(path, output) => validate(&r, path, output).await,
        Command::History(stack, output) => {
            let h = r
                .call("CairnDescribeStackHistory", &[kv("StackName", stack)])
                .await?;
            let entries: Vec<HistoryRecord> = h
                .members("Operations")
                .iter()
                .map(|m| history_record(m))
                .collect::<anyhow::Result<_>>()?;
            crate::changesets::show_history(&h.text_or_empty("StackId"), &entries, output)
        }
        Command::Audit(args) => audit(&r, args).await,
        Command::Update(args) => update(&r, args).await,
        Command::Template(stack, processed, output) => {
            let mut p = vec![kv("StackName", stack.to_string())];
            if processed {
                p.push(kv("TemplateStage", "Processed"));
            }
            let t = r.call("GetTemplate", &p).await?;
            let body = t.text_or_empty("TemplateBody");
            if processed {
                let json: serde_json::Value = serde_json::from_str(&body)
                    .with_context(|| "the server's processed template is not JSON")?;
                return stacks::print_json(&json);
            }
            stacks::show_template(&body, output)
        }
    }
}

/// `cairn delete` against a server: DeleteStack, followed to its end.
/// `cairn --endpoint … audit`: LookupEvents pages (it filters by one
/// attribute; the other filters are applied to what it returns).
async fn audit(r: &Remote, args: &crate::audit::AuditArgs) -> anyhow::Result<()> {
    let mut request = serde_json::json!({ "MaxResults": 50 });
    let attribute = match (&args.stack, &args.key, &args.event) {
        (Some(s), _, _) => Some(("ResourceName", s)),
        (None, Some(k), _) => Some(("AccessKeyId", k)),
        (None, None, Some(e)) => Some(("EventName", e)),
        _ => None,
    };
    if let Some((key, value)) = attribute {
        request["LookupAttributes"] =
            serde_json::json!([{ "AttributeKey": key, "AttributeValue": value }]);
    }
    if let Some(since) = &args.since {
        let now = jiff::Timestamp::now().as_millisecond();
        request["StartTime"] = serde_json::json!(crate::audit::since_ms(since, now)? / 1000);
    }
    let mut records = Vec::new();
    loop {
        let page = r.call_trail("LookupEvents", &request).await?;
        for e in page["Events"].as_array().into_iter().flatten() {
            let body: serde_json::Value =
                serde_json::from_str(e["CloudTrailEvent"].as_str().unwrap_or("{}"))?;
            if crate::audit::remote_matches(&body, args) && records.len() < args.limit {
                records.push(body);
            }
        }
        match page["NextToken"].as_str() {
            Some(token) if records.len() < args.limit => request["NextToken"] = token.into(),
            _ => break,
        }
    }
    crate::audit::show(&records, args.output)
}

async fn delete(r: &Remote, stack: &str, retain: &[String]) -> anyhow::Result<()> {
    let existing = match r.stack(stack).await {
        Ok(s) => s,
        Err(_) => {
            println!("stack {stack} does not exist; nothing to delete");
            return Ok(());
        }
    };
    let mut p = vec![kv("StackName", stack)];
    p.extend(list_members("RetainResources", retain));
    r.operate(
        &existing.stack_id,
        stack,
        "DeleteStack",
        &p,
        StackStatus::DeleteComplete,
        |e| e,
    )
    .await
}

/// `cairn resources`: ListStackResources as the local command shows it.
async fn resources(r: &Remote, stack: &str, output: OutputFormat) -> anyhow::Result<()> {
    let s = r.stack(stack).await?;
    let lines: Vec<ResourceLine> = r
        .all(
            "ListStackResources",
            &[kv("StackName", stack.to_string())],
            "StackResourceSummaries",
        )
        .await?
        .iter()
        .map(|m| ResourceLine {
            logical_id: m.text_or_empty("LogicalResourceId"),
            group: None,
            resource_type: m.text_or_empty("ResourceType"),
            physical_id: m.text_of("PhysicalResourceId"),
            status: m.text_or_empty("ResourceStatus"),
            reason: m.text_of("ResourceStatusReason"),
            updated_at: m.text_or_empty("LastUpdatedTimestamp"),
            type_version: m.text_of("TypeVersionId"),
        })
        .collect();
    stacks::show_resources(&s, &lines, output)
}

/// `cairn execute`: ExecuteChangeSet, followed to its end.
async fn execute(
    r: &Remote,
    stack: &str,
    change_set: &str,
    disable_rollback: bool,
) -> anyhow::Result<()> {
    let cs = r.change_set(stack, change_set).await?;
    let mut p = vec![kv("StackName", stack), kv("ChangeSetName", change_set)];
    if disable_rollback {
        p.push(kv("DisableRollback", "true"));
    }
    let success = if cs.change_set_type == ChangeSetType::Create {
        StackStatus::CreateComplete
    } else {
        StackStatus::UpdateComplete
    };
    r.operate(&cs.stack_id, stack, "ExecuteChangeSet", &p, success, |e| e)
        .await
}

/// `cairn drift`: DetectStackDrift, then the detection and each
/// resource's drift.
async fn drift(
    r: &Remote,
    stack: &str,
    only: &[String],
    output: OutputFormat,
) -> anyhow::Result<()> {
    let mut p = vec![kv("StackName", stack)];
    p.extend(list_members("LogicalResourceIds", only));
    let id = r
        .call("DetectStackDrift", &p)
        .await?
        .text_or_empty("StackDriftDetectionId");
    let status = r
        .call(
            "DescribeStackDriftDetectionStatus",
            &[kv("StackDriftDetectionId", id)],
        )
        .await?;
    let drifts = r
        .all(
            "DescribeStackResourceDrifts",
            &[kv("StackName", stack)],
            "StackResourceDrifts",
        )
        .await?;
    let s = r.stack(stack).await?;
    crate::drift::show(&drift_detection(&s, &status, &drifts)?, output)
}

/// `cairn validate` against the server's providers: ValidateTemplate,
/// and GetTemplateSummary for the parameter types.
async fn validate(r: &Remote, path: &Path, output: OutputFormat) -> anyhow::Result<()> {
    let body = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read template {}", path.display()))?;
    let named = |e: anyhow::Error| anyhow!("{}: {e}", path.display());
    // ValidateTemplate checks it against the server's providers;
    // GetTemplateSummary adds the parameter types.
    let checked = r
        .call("ValidateTemplate", &[kv("TemplateBody", body.clone())])
        .await
        .map_err(named)?;
    let summary = r
        .call("GetTemplateSummary", &[kv("TemplateBody", body)])
        .await
        .map_err(named)?;
    let parameters: Vec<crate::validate::ParameterLine> = summary
        .members("Parameters")
        .iter()
        .map(|p| crate::validate::ParameterLine {
            name: p.text_or_empty("ParameterKey"),
            type_name: p.text_or_empty("ParameterType"),
            default: p.text_of("DefaultValue"),
            no_echo: p.text_of("NoEcho").as_deref() == Some("true"),
            description: p.text_of("Description"),
        })
        .collect();
    let capabilities = crate::validate::Capabilities {
        list: checked
            .members("Capabilities")
            .iter()
            .map(|m| m.text.clone())
            .collect(),
        reason: checked.text_of("CapabilitiesReason"),
    };
    crate::validate::show(
        path,
        checked.text_of("Description").as_deref(),
        &parameters,
        &capabilities,
        output,
    )
}

/// `KEY=VALUE` stack tags as `Tags.member.N.{Key,Value}`.
fn tag_members(tags: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (i, (k, v)) in stacks::parse_tags(tags)?.into_iter().enumerate() {
        out.push(kv(format!("Tags.member.{}.Key", i + 1), k));
        out.push(kv(format!("Tags.member.{}.Value", i + 1), v));
    }
    Ok(out)
}

/// What a HOT template needs besides its text, as Cairn's API extension
/// carries it: the merged environment (`Environments.member.1`, whose
/// parameters the server applies under `-p`) and the files `get_file` and
/// provider templates read (`Files.member.N.{Path,Content}`).
fn context_members(
    template: &Path,
    body: &str,
    environments: &[std::path::PathBuf],
) -> anyhow::Result<Vec<(String, String)>> {
    let gathered = crate::environment::gather(template, body, environments)?;
    let mut out = Vec::new();
    if let Some(env) = &gathered.context.environment {
        out.push(kv("Environments.member.1", env.to_string()));
    }
    for (i, (path, content)) in gathered.context.files.iter().enumerate() {
        out.push(kv(format!("Files.member.{}.Path", i + 1), path.clone()));
        out.push(kv(
            format!("Files.member.{}.Content", i + 1),
            content.clone(),
        ));
    }
    Ok(out)
}

/// `cairn import` through a server: an IMPORT change set, executed and
/// followed.
async fn import(r: &Remote, args: stacks::ImportArgs<'_>) -> anyhow::Result<()> {
    let body = std::fs::read_to_string(args.template)
        .with_context(|| format!("cannot read template {}", args.template.display()))?;
    let resources = stacks::read_imports(args.resources)?;
    let named = |e: anyhow::Error| anyhow!("{}: {e}", args.template.display());
    let name = format!("import-{}", uuid::Uuid::new_v4().simple());
    let mut params = vec![
        kv("StackName", args.stack),
        kv("ChangeSetName", &name),
        kv("ChangeSetType", "IMPORT"),
        kv("TemplateBody", body),
    ];
    params.extend(parameter_members(args.parameters, args.use_previous)?);
    params.extend(list_members("Capabilities", args.capabilities));
    for (i, res) in resources.iter().enumerate() {
        let base = format!("ResourcesToImport.member.{}", i + 1);
        params.push(kv(format!("{base}.ResourceType"), &res.resource_type));
        params.push(kv(format!("{base}.LogicalResourceId"), &res.logical_id));
        for (j, (key, value)) in res.identifier.iter().enumerate() {
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let entry = format!("{base}.ResourceIdentifier.entry.{}", j + 1);
            params.push(kv(format!("{entry}.key"), key));
            params.push(kv(format!("{entry}.value"), text));
        }
    }
    // A stack that does not exist yet is made by the set (in review).
    let made = r.call("CreateChangeSet", &params).await.map_err(named)?;
    let stack_id = made.text_or_empty("StackId");
    r.operate(
        &stack_id,
        args.stack,
        "ExecuteChangeSet",
        &[kv("StackName", args.stack), kv("ChangeSetName", &name)],
        StackStatus::ImportComplete,
        named,
    )
    .await
}

/// `cairn refactor` through a server: CreateStackRefactor, then (with
/// `--execute`, when it could be made) ExecuteStackRefactor; shows the
/// refactor as DescribeStackRefactor and ListStackRefactorActions give it.
async fn refactor(r: &Remote, args: crate::refactor::RefactorArgs<'_>) -> anyhow::Result<()> {
    let input = crate::refactor::input(&args)?;
    let mut p = Vec::new();
    for (i, (name, body)) in input.stacks.iter().enumerate() {
        let at = format!("StackDefinitions.member.{}", i + 1);
        p.push(kv(format!("{at}.StackName"), name));
        p.push(kv(format!("{at}.TemplateBody"), body));
    }
    for (i, m) in input.mappings.iter().enumerate() {
        let at = format!("ResourceMappings.member.{}", i + 1);
        for (side, place) in [("Source", &m.source), ("Destination", &m.destination)] {
            p.push(kv(format!("{at}.{side}.StackName"), &place.stack_name));
            p.push(kv(
                format!("{at}.{side}.LogicalResourceId"),
                &place.logical_resource_id,
            ));
        }
    }
    if input.enable_stack_creation {
        p.push(kv("EnableStackCreation", "true"));
    }
    if let Some(d) = &input.description {
        p.push(kv("Description", d));
    }
    let made = r.call("CreateStackRefactor", &p).await?;
    let id = made.text_of("StackRefactorId").unwrap_or_default();
    let by_id = [kv("StackRefactorId", &id)];
    let status = r
        .call("DescribeStackRefactor", &by_id)
        .await?
        .text_of("Status");
    if args.execute && status.as_deref() == Some("CREATE_COMPLETE") {
        r.call("ExecuteStackRefactor", &by_id).await?;
    }
    let described = r.call("DescribeStackRefactor", &by_id).await?;
    let listed = r.call("ListStackRefactorActions", &by_id).await?;
    let place = |n: Option<&Node>| {
        serde_json::json!({
            "StackName": n.and_then(|n| n.text_of("StackName")),
            "LogicalResourceId": n.and_then(|n| n.text_of("LogicalResourceId")),
        })
    };
    let actions: Vec<serde_json::Value> = listed
        .members("StackRefactorActions")
        .iter()
        .map(|a| {
            let mapping = a.child("ResourceMapping");
            serde_json::json!({
                "Action": a.text_of("Action"),
                "Entity": a.text_of("Entity"),
                "PhysicalResourceId": a.text_of("PhysicalResourceId"),
                "Description": a.text_of("Description"),
                "Detection": a.text_of("Detection"),
                "DetectionReason": a.text_of("DetectionReason"),
                "ResourceMapping": {
                    "Source": place(mapping.and_then(|m| m.child("Source"))),
                    "Destination": place(mapping.and_then(|m| m.child("Destination"))),
                },
            })
        })
        .collect();
    let mut record = serde_json::json!({ "StackRefactorId": id, "Actions": actions });
    for k in [
        "Description",
        "Status",
        "StatusReason",
        "ExecutionStatus",
        "ExecutionStatusReason",
    ] {
        if let Some(v) = described.text_of(k) {
            record[k] = serde_json::json!(v);
        }
    }
    crate::refactor::show(&record, args.output)
}

/// `RollbackConfiguration` as the Query API's members: a field left out
/// is not sent (the stack's is kept); an empty trigger list is sent empty.
fn rollback_members(
    c: &cairn_core::rollback_triggers::RollbackConfiguration,
) -> Vec<(String, String)> {
    const TRIGGERS: &str = "RollbackConfiguration.RollbackTriggers";
    let mut members = Vec::new();
    match c.rollback_triggers.as_deref() {
        Some([]) => members.push(kv(TRIGGERS, "")),
        Some(triggers) => {
            for (i, t) in triggers.iter().enumerate() {
                let at = format!("{TRIGGERS}.member.{}", i + 1);
                members.push(kv(format!("{at}.Arn"), &t.arn));
                members.push(kv(format!("{at}.Type"), &t.kind));
            }
        }
        None => {}
    }
    if let Some(m) = c.monitoring_time_in_minutes {
        members.push(kv(
            "RollbackConfiguration.MonitoringTimeInMinutes",
            m.to_string(),
        ));
    }
    members
}

async fn deploy(r: &Remote, args: stacks::DeployArgs<'_>) -> anyhow::Result<()> {
    let body = std::fs::read_to_string(args.template)
        .with_context(|| format!("cannot read template {}", args.template.display()))?;
    let named = |e: anyhow::Error| anyhow!("{}: {e}", Path::new(args.template).display());
    let context = context_members(args.template, &body, args.environments)?;
    let mut params = vec![kv("StackName", args.stack), kv("TemplateBody", body)];
    params.extend(context);
    params.extend(parameter_members(args.parameters, args.use_previous)?);
    params.extend(list_members("Capabilities", args.capabilities));
    params.extend(tag_members(args.tags)?);
    if let Some(p) = crate::stacks::read_policy(args.stack_policy)? {
        params.push(kv("StackPolicyBody", p));
    }
    let during = crate::stacks::read_policy(args.stack_policy_during_update)?;
    if let Some(c) = crate::stacks::read_rollback_configuration(args.rollback_configuration)? {
        params.extend(rollback_members(&c));
    }
    match args.notification_arns() {
        Some(t) if t.is_empty() => params.push(kv("NotificationARNs", "")),
        Some(t) => params.extend(list_members("NotificationARNs", &t)),
        None => {}
    }
    match r.stack(args.stack).await {
        Ok(existing) if existing.status != StackStatus::ReviewInProgress => {
            if args.on_failure.is_some() {
                return Err(anyhow!("--on-failure applies to creating a stack; stack {} exists and is updated (with --disable-rollback a failed update stops in UPDATE_FAILED)", args.stack));
            }
            if args.disable_rollback {
                params.push(kv("DisableRollback", "true"));
            }
            if args.termination_protection {
                return Err(crate::stacks::protection_on_update(args.stack));
            }
            if let Some(p) = during {
                params.push(kv("StackPolicyDuringUpdateBody", p));
            }
            if args.upgrade_types {
                params.push(kv("CairnUpgradeTypes", "true"));
            }
            r.operate(
                &existing.stack_id,
                args.stack,
                "UpdateStack",
                &params,
                StackStatus::UpdateComplete,
                named,
            )
            .await
        }
        _ => {
            if !args.use_previous.is_empty() {
                return Err(anyhow!(
                    "--use-previous-value applies to updating a stack; stack {} does not exist",
                    args.stack
                ));
            }
            if during.is_some() {
                return Err(crate::stacks::policy_during_create(args.stack));
            }
            if args.disable_rollback {
                params.push(kv("DisableRollback", "true"));
            }
            if let Some(o) = args.on_failure {
                params.push(kv("OnFailure", o));
            }
            if let Some(t) = args.timeout_minutes {
                params.push(kv("TimeoutInMinutes", t.to_string()));
            }
            if args.termination_protection {
                params.push(kv("EnableTerminationProtection", "true"));
            }
            let created = r.call("CreateStack", &params).await.map_err(named)?;
            let id = created.text_or_empty("StackId");
            r.follow(&id, args.stack, HashSet::new(), StackStatus::CreateComplete)
                .await
        }
    }
}
