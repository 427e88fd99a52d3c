//! `cairn --endpoint URL <command>`: the CLI as a client of a `cairn serve`
//! (or any CloudFormation endpoint). Requests are signed with SigV4 from the
//! usual AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
//! AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION); answers are turned
//! back into the records the local commands print, so the output is the same.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, Context};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use cairn_core::stack::{EventRecord, OnFailure, OutputRecord, StackRecord, StackStatus};
use quick_xml::events::Event;
use quick_xml::Reader;

use crate::progress::Progress;
use crate::stacks::{self, ResourceLine};
use crate::OutputFormat;

/// An element of a response: its name, text and children.
#[derive(Debug, Default, Clone)]
struct Node {
    name: String,
    text: String,
    children: Vec<Node>,
}

impl Node {
    fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    fn text_of(&self, name: &str) -> Option<String> {
        self.child(name).map(|c| c.text.clone())
    }

    fn text_or_empty(&self, name: &str) -> String {
        self.text_of(name).unwrap_or_default()
    }

    /// The `<member>`s of a list child.
    fn members(&self, name: &str) -> Vec<&Node> {
        self.child(name)
            .map(|l| l.children.iter().filter(|m| m.name == "member").collect())
            .unwrap_or_default()
    }
}

fn parse_xml(text: &str) -> anyhow::Result<Node> {
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Node> = vec![Node::default()];
    loop {
        match reader
            .read_event()
            .context("the server's answer is not XML")?
        {
            Event::Start(e) => stack.push(Node {
                name: String::from_utf8_lossy(e.local_name().as_ref()).into_owned(),
                ..Default::default()
            }),
            Event::Empty(e) => {
                let node = Node {
                    name: String::from_utf8_lossy(e.local_name().as_ref()).into_owned(),
                    ..Default::default()
                };
                if let Some(parent) = stack.last_mut() {
                    parent.children.push(node);
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    let decoded = t.decode().context("the server's answer is not UTF-8")?;
                    top.text
                        .push_str(&quick_xml::escape::unescape(&decoded).context("bad XML text")?);
                }
            }
            Event::GeneralRef(r) => {
                if let Some(top) = stack.last_mut() {
                    let name = String::from_utf8_lossy(&r).into_owned();
                    let entity = format!("&{name};");
                    top.text
                        .push_str(&quick_xml::escape::unescape(&entity).context("bad XML entity")?);
                }
            }
            Event::End(_) => {
                let done = stack.pop().unwrap_or_default();
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => return Ok(done),
                }
                if stack.len() == 1 {
                    // The document element is complete.
                    if let Some(root) = stack.pop() {
                        return Ok(root.children.into_iter().next().unwrap_or_default());
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    // The document element (the root node only holds it).
    Ok(stack
        .into_iter()
        .next()
        .and_then(|root| root.children.into_iter().next())
        .unwrap_or_default())
}

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
        let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => Some(Credentials::new(
                id,
                secret,
                env("AWS_SESSION_TOKEN"),
                None,
                "environment",
            )),
            _ => None,
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
                .unwrap_or_else(|| "us-east-1".into()),
        })
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
        let mut request = self
            .http
            .post(&url)
            .header("content-type", content_type)
            .body(body.clone());
        if let Some(creds) = &self.credentials {
            let identity = creds.clone().into();
            let params = v4::SigningParams::builder()
                .identity(&identity)
                .region(&self.region)
                .name("cloudformation")
                .time(SystemTime::now())
                .settings(SigningSettings::default())
                .build()?
                .into();
            let signable = SignableRequest::new(
                "POST",
                url.as_str(),
                [("content-type", content_type)].into_iter(),
                SignableBody::Bytes(body.as_bytes()),
            )?;
            let (instructions, _) = sign(signable, &params)?.into_parts();
            for (name, value) in instructions.headers() {
                request = request.header(name, value);
            }
        }
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
            .collect();
        events.reverse();
        Ok(events)
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
            for e in self.events(stack_id).await? {
                if seen.insert(e.event_id.clone()) {
                    progress
                        .get_or_insert_with(|| Progress::new(&e.stack_name))
                        .event(&e);
                    mine.push(e);
                }
            }
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
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

fn stack_record(m: &Node) -> anyhow::Result<StackRecord> {
    let status: StackStatus = m
        .text_or_empty("StackStatus")
        .parse()
        .map_err(|e: String| anyhow!(e))?;
    let parameters: BTreeMap<String, String> = m
        .members("Parameters")
        .iter()
        .map(|p| {
            (
                p.text_or_empty("ParameterKey"),
                p.text_or_empty("ParameterValue"),
            )
        })
        .collect();
    let outputs = m
        .members("Outputs")
        .iter()
        .map(|o| OutputRecord {
            output_key: o.text_or_empty("OutputKey"),
            output_value: o.text_or_empty("OutputValue"),
            description: o.text_of("Description"),
            export_name: o.text_of("ExportName"),
        })
        .collect();
    let created = m.text_or_empty("CreationTime");
    Ok(StackRecord {
        stack_id: m.text_or_empty("StackId"),
        stack_name: m.text_or_empty("StackName"),
        status,
        status_reason: m.text_of("StackStatusReason"),
        description: m.text_of("Description"),
        template_body: String::new(),
        parameters,
        no_echo: Vec::new(),
        outputs,
        on_failure: if m.text_of("DisableRollback").as_deref() == Some("true") {
            OnFailure::DoNothing
        } else {
            OnFailure::Rollback
        },
        updated_at: m
            .text_of("LastUpdatedTime")
            .unwrap_or_else(|| created.clone()),
        created_at: created,
        deleted_at: m.text_of("DeletionTime"),
    })
}

fn event_record(e: &Node) -> EventRecord {
    EventRecord {
        event_id: e.text_or_empty("EventId"),
        stack_id: e.text_or_empty("StackId"),
        stack_name: e.text_or_empty("StackName"),
        logical_id: e.text_or_empty("LogicalResourceId"),
        physical_id: e.text_or_empty("PhysicalResourceId"),
        resource_type: e.text_or_empty("ResourceType"),
        timestamp: e.text_or_empty("Timestamp"),
        status: e.text_or_empty("ResourceStatus"),
        status_reason: e.text_of("ResourceStatusReason"),
        properties: e.text_of("ResourceProperties"),
    }
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
    List(OutputFormat),
    Describe(&'a str, OutputFormat),
    Events(&'a str, OutputFormat),
    Resources(&'a str, OutputFormat),
    Outputs(&'a str, OutputFormat),
    Template(&'a str, OutputFormat),
}

pub async fn run(endpoint: &str, command: Command<'_>) -> anyhow::Result<()> {
    let r = Remote::new(endpoint)?;
    match command {
        Command::Deploy(args) => deploy(&r, args).await,
        Command::Delete { stack, retain } => {
            let existing = match r.stack(stack).await {
                Ok(s) => s,
                Err(_) => {
                    println!("stack {stack} does not exist; nothing to delete");
                    return Ok(());
                }
            };
            let seen = r
                .events(&existing.stack_id)
                .await?
                .into_iter()
                .map(|e| e.event_id)
                .collect();
            let mut p = vec![kv("StackName", stack.to_string())];
            for (i, name) in retain.iter().enumerate() {
                p.push(kv(
                    format!("RetainResources.member.{}", i + 1),
                    name.clone(),
                ));
            }
            r.call("DeleteStack", &p).await?;
            r.follow(&existing.stack_id, stack, seen, StackStatus::DeleteComplete)
                .await
        }
        Command::ContinueRollback { stack, skip } => {
            let existing = r.stack(stack).await?;
            let seen = r
                .events(&existing.stack_id)
                .await?
                .into_iter()
                .map(|e| e.event_id)
                .collect();
            let mut p = vec![kv("StackName", stack.to_string())];
            for (i, name) in skip.iter().enumerate() {
                p.push(kv(
                    format!("ResourcesToSkip.member.{}", i + 1),
                    name.clone(),
                ));
            }
            r.call("ContinueUpdateRollback", &p).await?;
            r.follow(
                &existing.stack_id,
                stack,
                seen,
                StackStatus::UpdateRollbackComplete,
            )
            .await
        }
        Command::CancelUpdate { stack } => {
            let existing = r.stack(stack).await?;
            let seen = r
                .events(&existing.stack_id)
                .await?
                .into_iter()
                .map(|e| e.event_id)
                .collect();
            r.call("CancelUpdateStack", &[kv("StackName", stack.to_string())])
                .await?;
            r.follow(
                &existing.stack_id,
                stack,
                seen,
                StackStatus::UpdateRollbackComplete,
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
        Command::Resources(stack, output) => {
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
                })
                .collect();
            stacks::show_resources(&s, &lines, output)
        }
        Command::Outputs(stack, output) => stacks::show_outputs(&r.stack(stack).await?, output),
        Command::Template(stack, output) => {
            let t = r
                .call("GetTemplate", &[kv("StackName", stack.to_string())])
                .await?;
            stacks::show_template(&t.text_or_empty("TemplateBody"), output)
        }
    }
}

async fn deploy(r: &Remote, args: stacks::DeployArgs<'_>) -> anyhow::Result<()> {
    let body = std::fs::read_to_string(args.template)
        .with_context(|| format!("cannot read template {}", args.template.display()))?;
    let named = |e: anyhow::Error| anyhow!("{}: {e}", Path::new(args.template).display());
    let mut params = vec![kv("StackName", args.stack), kv("TemplateBody", body)];
    params.extend(parameter_members(args.parameters, args.use_previous)?);
    match r.stack(args.stack).await {
        Ok(existing) if existing.status != StackStatus::ReviewInProgress => {
            if args.disable_rollback || args.on_failure.is_some() {
                return Err(anyhow!("--disable-rollback and --on-failure apply to creating a stack; stack {} exists and is updated (an update that fails rolls back)", args.stack));
            }
            let seen = r
                .events(&existing.stack_id)
                .await?
                .into_iter()
                .map(|e| e.event_id)
                .collect();
            r.call("UpdateStack", &params).await.map_err(named)?;
            r.follow(
                &existing.stack_id,
                args.stack,
                seen,
                StackStatus::UpdateComplete,
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
            if args.disable_rollback {
                params.push(kv("DisableRollback", "true"));
            }
            if let Some(o) = args.on_failure {
                params.push(kv("OnFailure", o));
            }
            let created = r.call("CreateStack", &params).await.map_err(named)?;
            let id = created.text_or_empty("StackId");
            r.follow(&id, args.stack, HashSet::new(), StackStatus::CreateComplete)
                .await
        }
    }
}
