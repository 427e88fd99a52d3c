//! A template's macros, run before an operation starts (the part that does
//! I/O; where each transform runs and what it is given is
//! `cairn_template::transform`). A template that names a macro is processed
//! whole, in CloudFormation's order, hosted transforms (`AWS::Include`,
//! `AWS::LanguageExtensions`) in their turn; the result is kept in the
//! stack's context (`TemplateContext::processed`) so the stack is read from
//! it, its rollback included, without running a macro again. A template
//! that names no macro is left to the template crate as before.
//!
//! A macro is found in a `[[macros]]` entry, else among the live
//! `AWS::CloudFormation::Macro` resources of the state's stacks; its
//! function is a webhook (the binary's [`WebhookPoster`]) or a provider's
//! `transform`.

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_sdk::{MacroRequest, MacroResponse};
use serde_json::Value;

use super::{Core, EngineError};
use crate::macros::{Function, MACRO_TYPE};
use crate::template::transform::{self, Site};
use crate::template::{Template, TemplateContext, TemplateError};

/// How long a macro may take when its entry does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most bytes a processed template may have (CloudFormation's limit
/// for a template read from S3).
const MAX_PROCESSED_BYTES: usize = 1024 * 1024;

pub use crate::shared::{NoWebhookPoster, WebhookPoster};

/// A macro found: where it runs and how long it may take.
struct Found {
    function: Function,
    timeout: Duration,
}

/// `Transform <id> failed with: <message>` at the transform's place.
fn failed(transform_id: &str, site: &Site, message: impl std::fmt::Display) -> TemplateError {
    TemplateError::new(format!("Transform {transform_id} failed with: {message}"))
        .at(&site.pointer())
}

pub use crate::template::transform::{names_a_macro, needs_reading};

impl Core {
    /// A template's macros run, as a change set would run them (no
    /// capability is asked for): what `cairn validate` reads.
    pub async fn process_template(
        &self,
        text: &str,
        context: TemplateContext,
        parameters: &BTreeMap<String, String>,
    ) -> Result<TemplateContext, EngineError> {
        self.run_transforms(text, context, parameters, None).await
    }

    /// `context` for `text` with its https:// snippets read into its files
    /// and its macros run (`processed` set), when it names any; as it is
    /// otherwise. `parameters` are the values given.
    /// `given`: the capabilities acknowledged when the template is run
    /// directly (`None`: a change set, or not checked), which must include
    /// CAPABILITY_AUTO_EXPAND before any macro is called.
    pub(crate) async fn run_transforms(
        &self,
        text: &str,
        mut context: TemplateContext,
        parameters: &BTreeMap<String, String>,
        given: Option<&[String]>,
    ) -> Result<TemplateContext, EngineError> {
        // Processed already: a change set's template, run as it was reviewed.
        if context.processed.is_some() {
            return Ok(context);
        }
        crate::nested::read_includes(
            &self.config.nested,
            self.shared.https.as_ref(),
            text,
            &mut context.files,
        )
        .await?;
        let macros = names_a_macro(text);
        // Modules expand without CAPABILITY_AUTO_EXPAND, as in CloudFormation.
        let may_use_modules = text.contains("::MODULE");
        if !macros && !may_use_modules {
            return Ok(context);
        }
        let mut body = Template::body_of(text)?;
        let used = crate::template::modules::module_types(&body);
        if !macros && used.is_empty() {
            return Ok(context);
        }
        if !macros {
            let fragments = self.module_fragments(&used).await?;
            crate::template::modules::expand(&mut body, &fragments)
                .map_err(|e| TemplateError::new(e.0))?;
            context.processed = Some(body);
            return Ok(context);
        }
        if let Some(given) = given {
            let auto = super::capabilities::AUTO_EXPAND;
            if !given.iter().any(|c| c == auto) {
                return Err(EngineError::InsufficientCapabilities(format!(
                    "Requires capabilities : [{auto}]"
                )));
            }
        }
        let sites = transform::sites(&body)?;
        let values = transform::parameter_values(&body, parameters);
        for site in &sites {
            if transform::is_hosted(&site.name) {
                transform::run_hosted(&mut body, site, &context.files, parameters)?;
                continue;
            }
            let answer = self.call_macro(&mut body, site, &values).await?;
            transform::replace(&mut body, site, answer)?;
        }
        transform::finish(&mut body);
        // Modules the macros' output uses (or the template's own).
        let used = crate::template::modules::module_types(&body);
        if !used.is_empty() {
            let fragments = self.module_fragments(&used).await?;
            crate::template::modules::expand(&mut body, &fragments)
                .map_err(|e| TemplateError::new(e.0))?;
        }
        let size = body.to_string().len();
        if size > MAX_PROCESSED_BYTES {
            return Err(TemplateError::new(format!(
                "Template format error: the processed template has {size} bytes; the limit is {MAX_PROCESSED_BYTES}"
            ))
            .into());
        }
        context.processed = Some(body);
        Ok(context)
    }

    /// The registered fragments of the module types `used` (each type's
    /// default version); one not registered is left out (the expansion
    /// names it).
    async fn module_fragments(
        &self,
        used: &[String],
    ) -> Result<BTreeMap<String, serde_json::Value>, EngineError> {
        let mut fragments = BTreeMap::new();
        for v in self.store.type_versions().await? {
            if !(v.is_default && !v.deprecated && used.contains(&v.type_name)) {
                continue;
            }
            let Some(bytes) = self.store.type_package(&v.type_name, &v.version_id).await? else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            fragments.insert(v.type_name.clone(), Template::body_of(&text)?);
        }
        Ok(fragments)
    }

    /// Runs the macro at `site`: the fragment it answers (in a span of its
    /// own in the trace).
    async fn call_macro(
        &self,
        body: &mut Value,
        site: &Site,
        values: &Value,
    ) -> Result<Value, EngineError> {
        let span = tracing::info_span!(
            "macro call",
            otel.name = %format!("macro {}", site.name),
            cairn.transform = %site.name,
        );
        tracing::Instrument::instrument(Box::pin(self.run_macro(body, site, values)), span).await
    }

    async fn run_macro(
        &self,
        body: &mut Value,
        site: &Site,
        values: &Value,
    ) -> Result<Value, EngineError> {
        let identity = &self.config.identity;
        let transform_id = format!("{}::{}", identity.account_id, site.name);
        let found = self.find_macro(&site.name, &transform_id, site).await?;
        let request = MacroRequest {
            region: identity.region.clone(),
            account_id: identity.account_id.clone(),
            fragment: transform::fragment(body, site),
            transform_id: transform_id.clone(),
            params: site.params.clone(),
            request_id: uuid::Uuid::new_v4().to_string(),
            template_parameter_values: values.clone(),
        };
        tracing::info!(transform = %transform_id, "running a macro");
        let answer = match &found.function {
            Function::Webhook { url, secret } => {
                let body =
                    serde_json::to_vec(&request).map_err(|e| failed(&transform_id, site, e))?;
                let bytes = self
                    .shared
                    .webhooks
                    .post(url, secret.as_deref(), body, found.timeout)
                    .await
                    .map_err(|e| failed(&transform_id, site, e))?;
                serde_json::from_slice::<MacroResponse>(&bytes).map_err(|e| {
                    failed(
                        &transform_id,
                        site,
                        format!(
                            "its answer is not a macro response ({e}): {}",
                            crate::template::quoted(&String::from_utf8_lossy(&bytes))
                        ),
                    )
                })?
            }
            Function::Provider(name) => {
                let provider = self
                    .registry()
                    .provider_named(name)
                    .map_err(|e| failed(&transform_id, site, e))?;
                tokio::time::timeout(found.timeout, provider.transform(&request))
                    .await
                    .map_err(|_| {
                        failed(
                            &transform_id,
                            site,
                            format!(
                                "provider {name} did not answer within {} seconds",
                                found.timeout.as_secs()
                            ),
                        )
                    })?
                    .map_err(|e| failed(&transform_id, site, e.message))?
            }
        };
        if answer.request_id != request.request_id {
            return Err(failed(
                &transform_id,
                site,
                format!(
                    "the answer's requestId {:?} is not the request's {:?}",
                    answer.request_id, request.request_id
                ),
            )
            .into());
        }
        if !answer.succeeded() {
            let message = answer
                .error_message
                .unwrap_or_else(|| format!("status {:?} and no errorMessage", answer.status));
            return Err(failed(&transform_id, site, message).into());
        }
        if answer.fragment.is_null() {
            return Err(failed(&transform_id, site, "the answer has no fragment").into());
        }
        Ok(answer.fragment)
    }

    /// The macro named `name`: a `[[macros]]` entry, else a live
    /// `AWS::CloudFormation::Macro` of a stack of this state.
    async fn find_macro(
        &self,
        name: &str,
        transform_id: &str,
        site: &Site,
    ) -> Result<Found, EngineError> {
        if let Some(m) = self.config.macros.iter().find(|m| m.name == name) {
            let function = match (&m.url, &m.provider) {
                (Some(url), _) => Function::Webhook {
                    url: url.clone(),
                    secret: m
                        .secret
                        .clone()
                        .or_else(|| self.config.webhooks.secret.clone()),
                },
                (None, Some(p)) => Function::Provider(p.clone()),
                (None, None) => Function::Provider(String::new()),
            };
            return Ok(Found {
                function,
                timeout: m
                    .timeout_seconds
                    .map(Duration::from_secs)
                    .unwrap_or(DEFAULT_TIMEOUT),
            });
        }
        if let Some((_, function_name)) = self.defined_macro(name).await? {
            let function = match Function::named(&function_name) {
                Function::Webhook { url, .. } => Function::Webhook {
                    url,
                    secret: self.config.webhooks.secret.clone(),
                },
                other => other,
            };
            return Ok(Found {
                function,
                timeout: DEFAULT_TIMEOUT,
            });
        }
        Err(TemplateError::new(format!(
            "No transform named {transform_id} found. Define it with a [[macros]] entry of the configuration or an {MACRO_TYPE} resource of a stack."
        ))
        .at(&site.pointer())
        .into())
    }

    /// The stack and `FunctionName` of the live `AWS::CloudFormation::Macro`
    /// named `name`, if a stack of this state defines one.
    pub(crate) async fn defined_macro(
        &self,
        name: &str,
    ) -> Result<Option<(String, String)>, EngineError> {
        for stack in self.store.list_stacks().await? {
            if stack.deleted_at.is_some() {
                continue;
            }
            let rows = self.store.resources(&stack.stack_id).await?;
            let found = rows.iter().find(|r| {
                r.resource_type == MACRO_TYPE
                    && crate::plan::is_live(r)
                    && r.physical_id.as_deref() == Some(name)
            });
            if let Some(r) = found {
                let function = r
                    .properties
                    .get("FunctionName")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                return Ok(Some((stack.stack_name.clone(), function)));
            }
        }
        Ok(None)
    }

    /// Refuses a template whose `AWS::CloudFormation::Macro` resources name
    /// a macro that a `[[macros]]` entry or another stack already defines
    /// (names are the state's, as an account's are).
    pub(crate) async fn check_macro_names(
        &self,
        template: &Template,
        stack_name: &str,
    ) -> Result<(), EngineError> {
        for r in template
            .resources
            .iter()
            .filter(|r| r.type_name == MACRO_TYPE)
        {
            let Some(name) = r.properties.get("Name").and_then(Value::as_str) else {
                continue;
            };
            let at = crate::template::source::child(
                &crate::template::source::child("/Resources", &r.logical_id),
                "Properties",
            );
            let taken = if self.config.macros.iter().any(|m| m.name == name) {
                Some("a [[macros]] entry of the configuration".to_string())
            } else {
                self.defined_macro(name)
                    .await?
                    .filter(|(stack, _)| stack != stack_name)
                    .map(|(stack, _)| format!("stack {stack}"))
            };
            if let Some(owner) = taken {
                return Err(TemplateError::new(format!(
                    "Macro {name} of {} already exists: {owner} defines it. Macro names are unique in a Cairn state; choose another Name",
                    r.logical_id
                ))
                .at(&child_name(&at))
                .into());
            }
        }
        Ok(())
    }
}

fn child_name(properties: &str) -> String {
    crate::template::source::child(properties, "Name")
}
