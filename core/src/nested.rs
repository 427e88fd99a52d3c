//! Nested stacks (`AWS::CloudFormation::Stack`), the part before the
//! engine that does I/O: reading the nested templates of a whole tree
//! before an operation starts (so errors, depth, size and `GetAtt
//! Child.Outputs.Name` are checked up front). The model (schema, digests,
//! the child stack's name and parameters) is `cairn_model::nested`,
//! re-exported here; the engine runs the children (`engine::nested`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::catalog::TypeCatalog;
use crate::config::NestedConfig;
use crate::graph::Graph;
use crate::template::source::child;
use crate::template::TemplateContext;
use crate::template::{Template, TemplateError};
pub use cairn_model::nested::*;

/// The most bytes a nested template may have (CloudFormation's limit for a
/// template read from a URL).
const MAX_TEMPLATE_BYTES: usize = 1024 * 1024;

/// How long an `https://` TemplateURL may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Fetches an `https://` TemplateURL: the binary hands in its TLS client
/// (the webhooks' rustls with ring and the platform's roots), so the engine
/// links no HTTP client.
#[async_trait::async_trait]
pub trait HttpsGet: Send + Sync {
    /// The body, or why not: a failed request or a status that is not a
    /// success.
    async fn get(&self, url: &str, timeout: Duration) -> Result<Vec<u8>, crate::http::HttpError>;
}

/// Where relative TemplateURLs of a template are read from.
#[derive(Debug, Clone)]
pub enum Base {
    Dir(PathBuf),
    Url(url::Url),
}

/// Where a submitted template came from, and what its nested templates may
/// read.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// The submitted template's directory (or URL); `None`: a body with no
    /// place (relative TemplateURLs are refused).
    pub base: Option<Base>,
    /// A server confines every nested template file to these directories;
    /// the CLI reads relative paths anywhere.
    pub confined_to: Option<Vec<PathBuf>>,
    /// What the stack's nested templates are read with (HOT's child
    /// environment): its files hold the templates handed in with the
    /// stack (provider templates, read as `cairn-file:<name>`).
    pub context: crate::stack::TemplateContext,
}

pub use crate::template::types::{CONTEXT_FILE, INLINE};

impl Origin {
    /// A template read from the file `path` by the CLI.
    pub fn file(path: &Path) -> Origin {
        let dir = path
            .parent()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .unwrap_or(Path::new("."));
        Origin {
            base: Some(Base::Dir(
                std::fs::canonicalize(dir).unwrap_or(dir.to_path_buf()),
            )),
            confined_to: None,
            context: Default::default(),
        }
    }
}

/// What the root template's parameters, pseudo parameters, mappings and
/// conditions decide before anything is made.
#[derive(Debug, Clone, Default)]
pub struct RootValues {
    /// TemplateURLs that are not literals, computed (logical id → URL).
    pub urls: BTreeMap<String, String>,
    /// The resources whose condition is false.
    pub off: std::collections::BTreeSet<String>,
}

/// A template still to walk: its logical path prefix, the template, the
/// base of its relative TemplateURLs, its depth, and the context its own
/// children are read with.
type Pending<'a> = (
    String,
    std::borrow::Cow<'a, Template>,
    Option<Base>,
    usize,
    TemplateContext,
);

/// Reads every nested template of `template`'s tree (depth first), checks
/// each (structure, types, attributes), the depth and the tree's size, and
/// every `GetAtt Child.Outputs.Name` against the child's outputs.
///
/// `root`: what the root template's parameters already decide (its
/// computed TemplateURLs, its resources whose condition is false); a
/// nested template's own TemplateURLs must be literal.
pub async fn collect(
    config: &NestedConfig,
    https: &dyn HttpsGet,
    registry: &dyn TypeCatalog,
    template: &Template,
    origin: &Origin,
    root: &RootValues,
) -> Result<NestedTemplates, TemplateError> {
    let mut found = NestedTemplates::default();
    let mut total = template.resources.len();
    // The root is borrowed: cloning a large template would cost more than
    // this whole walk when it has no nested stacks. Its children are read
    // with the origin's context.
    let mut todo: Vec<Pending<'_>> = vec![(
        String::new(),
        std::borrow::Cow::Borrowed(template),
        origin.base.clone(),
        0,
        origin.context.clone(),
    )];
    while let Some((prefix, t, base, depth, context)) = todo.pop() {
        let mut children = BTreeMap::new();
        for r in &t.resources {
            // A resource whose condition is false is never made: as in
            // CloudFormation, its template is neither fetched nor checked.
            if prefix.is_empty() && root.off.contains(&r.logical_id) {
                continue;
            }
            let Some((url_value, at)) = template_url_of(r, registry) else {
                continue;
            };
            let path = format!("{prefix}{}", r.logical_id);
            let in_parent = |e: TemplateError| nested_error(&prefix, e.locate(&t.source_map));
            if depth + 1 > config.max_depth {
                return Err(in_parent(TemplateError::new(format!(
                    "Template error: nested stack {path} is more than {} levels deep; the limit is [nested] max_depth = {}",
                    config.max_depth, config.max_depth
                )).at(&at)));
            }
            let computed_url = prefix
                .is_empty()
                .then(|| root.urls.get(&r.logical_id))
                .flatten();
            let url = match (url_value, computed_url) {
                (Some(Value::String(u)), _) => u.clone(),
                (Some(_), Some(u)) => u.clone(),
                (Some(_), None) => {
                    return Err(in_parent(TemplateError::new(format!(
                        "Template error: TemplateURL of {} must be a literal path or URL, or be built from parameters, mappings and pseudo parameters: Cairn reads nested templates before the operation starts",
                        r.logical_id
                    )).at(&at)))
                }
                (None, _) => continue, // the schema check names the missing property
            };
            let (location, body, child_base) = read(config, https, origin, base.as_ref(), &url)
                .await
                .map_err(|why| {
                    in_parent(
                        TemplateError::new(format!(
                            "Template error: TemplateURL {url} of {} cannot be read: {why}",
                            r.logical_id
                        ))
                        .at(&at),
                    )
                })?;
            let child_context = context.for_nested(&url);
            // A template whose macros (or remote snippets) must run first is
            // read and checked when its stack is made or updated, with the
            // child's parameter values: nothing of it can be known now.
            if crate::template::transform::needs_reading(&body) {
                found
                    .0
                    .insert(path.clone(), NestedTemplate { location, body });
                continue;
            }
            let parsed = Template::parse_with(&body, &child_context)
                .map_err(|e| nested_error(&format!("{path}/"), prefixed(&location, e)))?;
            crate::validate::validate_template(&parsed, registry)
                .map_err(|e| nested_error(&format!("{path}/"), prefixed(&location, e)))?;
            total += parsed.resources.len();
            if total > config.max_resources {
                return Err(TemplateError::new(format!(
                    "Template error: the stack and its nested stacks have more than {} resources; the limit is [nested] max_resources = {}",
                    config.max_resources, config.max_resources
                )));
            }
            children.insert(r.logical_id.clone(), parsed.clone());
            found
                .0
                .insert(path.clone(), NestedTemplate { location, body });
            todo.push((
                format!("{path}/"),
                std::borrow::Cow::Owned(parsed),
                child_base,
                depth + 1,
                child_context,
            ));
        }
        // Only a nested stack's GetAtt is checked here: a template with none
        // is not walked again (its graph is large when the template is).
        if t.resources
            .iter()
            .any(|r| is_stack(registry.canonical(&r.type_name)))
        {
            check_outputs(&t, registry, &children).map_err(|e| nested_error(&prefix, e))?;
        }
    }
    Ok(found)
}

/// Where a resource names a nested template: a nested stack's
/// TemplateURL, or a launch configuration's whose members are nested
/// stacks (HOT groups of provider templates: each member is a child stack
/// of the template read here, under the launch configuration's logical
/// id). The value, and its JSON pointer for messages.
fn template_url_of<'r>(
    r: &'r crate::template::model::Resource,
    registry: &dyn TypeCatalog,
) -> Option<(Option<&'r Value>, String)> {
    let properties = child(&child("/Resources", &r.logical_id), "Properties");
    let canonical = registry.canonical(&r.type_name);
    if is_stack(canonical) {
        return Some((
            r.properties.get("TemplateURL"),
            child(&properties, "TemplateURL"),
        ));
    }
    let member_type = r.properties.get("MemberType").and_then(Value::as_str);
    if canonical != crate::group::types::LAUNCH_CONFIGURATION
        || !member_type.is_some_and(|m| is_stack(registry.canonical(m)))
    {
        return None;
    }
    Some((
        r.properties
            .get("MemberProperties")
            .and_then(|m| m.get("TemplateURL")),
        child(&child(&properties, "MemberProperties"), "TemplateURL"),
    ))
}

/// A nested template's error, naming where it was read from.
fn prefixed(location: &str, e: TemplateError) -> TemplateError {
    let message = format!("{location}: {}", e.message());
    TemplateError::format_at(message, e.path().to_string(), e.location())
}

/// An error found below the root, naming the nested stack path.
fn nested_error(prefix: &str, e: TemplateError) -> TemplateError {
    if prefix.is_empty() {
        return e;
    }
    let message = format!(
        "nested stack {}: {}",
        prefix.trim_end_matches('/'),
        e.message()
    );
    TemplateError::format_at(message, e.path().to_string(), e.location())
}

/// Every `GetAtt Child.Outputs.Name` of `template` names an output the
/// child's template declares.
fn check_outputs(
    template: &Template,
    registry: &dyn TypeCatalog,
    children: &BTreeMap<String, Template>,
) -> Result<(), TemplateError> {
    let graph = Graph::build(template, &|_| None).map_err(|e| e.locate(&template.source_map))?;
    let check = |res: &str, attr: &str, at: &str| -> Result<(), TemplateError> {
        let Some(r) = template.resource(res) else {
            return Ok(());
        };
        if !is_stack(registry.canonical(&r.type_name))
            || attr == OUTPUTS_ATTRIBUTE
            || attr == RESOURCES_ATTRIBUTE
        {
            return Ok(());
        }
        let Some(name) = attr.strip_prefix("Outputs.") else {
            return Err(TemplateError::new(format!(
                "Template error: resource {res} does not support attribute type {attr} in Fn::GetAtt (a nested stack has Outputs.<Name>)"
            ))
            .at(at)
            .locate(&template.source_map));
        };
        let Some(c) = children.get(res) else {
            return Ok(());
        };
        if c.outputs.iter().any(|o| o.name == name) {
            return Ok(());
        }
        let names: Vec<&str> = c.outputs.iter().map(|o| o.name.as_str()).collect();
        Err(TemplateError::new(format!(
            "Template error: resource {res} does not support attribute type {attr} in Fn::GetAtt (its nested template has outputs: {})",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ))
        .at(at)
        .locate(&template.source_map))
    };
    crate::validate::each_get_att(template, &graph, check)
}

/// Reads one TemplateURL: its location, text and the base of its own
/// relative TemplateURLs.
async fn read(
    config: &NestedConfig,
    https: &dyn HttpsGet,
    origin: &Origin,
    base: Option<&Base>,
    url: &str,
) -> Result<(String, String, Option<Base>), String> {
    if let Some(body) = url.strip_prefix(INLINE) {
        return Ok((
            "an inline template".to_string(),
            body.to_string(),
            base.cloned(),
        ));
    }
    if let Some(name) = url.strip_prefix(CONTEXT_FILE) {
        return match origin.context.files.get(name) {
            Some(body) => Ok((name.to_string(), body.clone(), base.cloned())),
            None => Err(format!(
                "the template {name} was not handed in with the stack"
            )),
        };
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
        return fetch(config, https, parsed).await;
    }
    if let Some(path) = url.strip_prefix("file://") {
        let allowed = allowed_dirs(config, origin);
        return read_file(Path::new(path), Some(&allowed)).await;
    }
    match base {
        Some(Base::Dir(dir)) => {
            read_file(&dir.join(url), origin.confined_to.as_deref()).await
        }
        Some(Base::Url(u)) => {
            let joined = u.join(url).map_err(|e| e.to_string())?;
            fetch(config, https, joined).await
        }
        None => Err("it is a relative path, and the parent template was not read from a file: use a file:/// URL under [nested] template_dirs".into()),
    }
}

fn allowed_dirs(config: &NestedConfig, origin: &Origin) -> Vec<PathBuf> {
    let mut dirs = config.template_dirs.clone();
    if let Some(c) = &origin.confined_to {
        dirs.extend(c.iter().cloned());
    }
    dirs
}

/// Whether the (canonical) path `real` is under one of `dirs`.
pub(crate) async fn under_any(real: &Path, dirs: &[PathBuf]) -> bool {
    for d in dirs {
        if let Ok(d) = tokio::fs::canonicalize(d).await {
            if real.starts_with(&d) {
                return true;
            }
        }
    }
    false
}

async fn read_file(
    path: &Path,
    confined_to: Option<&[PathBuf]>,
) -> Result<(String, String, Option<Base>), String> {
    let real = tokio::fs::canonicalize(path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(dirs) = confined_to {
        if !under_any(&real, dirs).await {
            return Err(format!(
                "{} is not under a directory of [nested] template_dirs (or [server] template_dirs)",
                real.display()
            ));
        }
    }
    let size = tokio::fs::metadata(&real)
        .await
        .map_err(|e| format!("{}: {e}", real.display()))?
        .len();
    if size as usize > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "{} has {size} bytes; a nested template may have at most {MAX_TEMPLATE_BYTES}",
            real.display()
        ));
    }
    let body = tokio::fs::read_to_string(&real)
        .await
        .map_err(|e| format!("{}: {e}", real.display()))?;
    let dir = real.parent().map(Path::to_path_buf).map(Base::Dir);
    Ok((real.display().to_string(), body, dir))
}

/// The `AWS::Include` snippets of `text` at `https://` locations that
/// `files` lacks, fetched into it as nested templates are (with `[nested]
/// allow_https`, the same size limit). Snippets beside the template or at
/// `file:///` are read by the CLI (or sent as the request's files); an
/// `s3://` one is refused, as Cairn reads no S3.
pub async fn read_includes(
    config: &NestedConfig,
    https: &dyn HttpsGet,
    text: &str,
    files: &mut BTreeMap<String, String>,
) -> Result<(), TemplateError> {
    use crate::template::include::{locations, INCLUDE};
    if !text.contains(INCLUDE) {
        return Ok(());
    }
    let Ok(body) = Template::body_of(text) else {
        return Ok(()); // parsing reports it
    };
    for location in locations(&body) {
        if files.contains_key(&location) {
            continue;
        }
        let refused = |why: String| {
            TemplateError::new(format!(
                "Template format error: {INCLUDE}: the snippet at {location} cannot be read: {why}"
            ))
        };
        if location.starts_with("s3://") {
            return Err(refused(
                "Cairn reads no S3; give it as a path beside the template, a file:/// path or an https:// URL".into(),
            ));
        }
        if !location.starts_with("https://") {
            continue; // named by the template crate when it is missing
        }
        let url = url::Url::parse(&location).map_err(|e| refused(e.to_string()))?;
        let (_, snippet, _) = fetch(config, https, url).await.map_err(refused)?;
        files.insert(location, snippet);
    }
    Ok(())
}

async fn fetch(
    config: &NestedConfig,
    https: &dyn HttpsGet,
    url: url::Url,
) -> Result<(String, String, Option<Base>), String> {
    if url.scheme() != "https" || !config.allow_https {
        return Err(format!(
            "{url}: only https:// URLs are fetched, and only with [nested] allow_https = true"
        ));
    }
    let bytes = https
        .get(url.as_str(), FETCH_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if bytes.len() > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "{url} has {} bytes; a nested template may have at most {MAX_TEMPLATE_BYTES}",
            bytes.len()
        ));
    }
    let body = String::from_utf8(bytes).map_err(|_| format!("{url} is not UTF-8 text"))?;
    Ok((url.to_string(), body, Some(Base::Url(url))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    /// An https client that answers every URL with one body.
    struct Serves(Vec<u8>);

    #[async_trait::async_trait]
    impl HttpsGet for Serves {
        async fn get(
            &self,
            _url: &str,
            _timeout: Duration,
        ) -> Result<Vec<u8>, crate::http::HttpError> {
            Ok(self.0.clone())
        }
    }

    #[tokio::test]
    async fn an_https_url_is_read_through_the_client_handed_in_and_checked() {
        let allowed = NestedConfig {
            allow_https: true,
            ..NestedConfig::default()
        };
        let origin = Origin::default();
        let url = "https://templates.example/a/child.yaml";
        let body = Serves(b"Resources: {}".to_vec());
        let (location, text, base) = read(&allowed, &body, &origin, None, url).await.unwrap();
        assert_eq!((location.as_str(), text.as_str()), (url, "Resources: {}"));
        // Its relative TemplateURLs are read from beside it.
        let Some(Base::Url(base)) = base else {
            panic!("an https template's base is its URL")
        };
        let joined = read(&allowed, &body, &origin, Some(&Base::Url(base)), "b.yaml")
            .await
            .unwrap();
        assert_eq!(joined.0, "https://templates.example/a/b.yaml");
        let big = Serves(vec![b'#'; MAX_TEMPLATE_BYTES + 1]);
        assert_eq!(
            read(&allowed, &big, &origin, None, url).await.unwrap_err(),
            format!("{url} has 1048577 bytes; a nested template may have at most 1048576")
        );
        let binary = Serves(vec![0xff, 0xfe]);
        assert_eq!(
            read(&allowed, &binary, &origin, None, url)
                .await
                .unwrap_err(),
            format!("{url} is not UTF-8 text")
        );
    }

    #[tokio::test]
    async fn https_include_snippets_are_fetched_when_allowed_and_s3_is_refused() {
        let allowed = NestedConfig {
            allow_https: true,
            ..NestedConfig::default()
        };
        let text = "Resources:\n  Fn::Transform: {Name: AWS::Include, Parameters: {Location: 'https://snippets.example/r.yaml'}}\n  Local:\n    Fn::Transform: {Name: AWS::Include, Parameters: {Location: here.yaml}}\n";
        let mut files = BTreeMap::new();
        let snippet = Serves(b"B: {Type: T}".to_vec());
        read_includes(&allowed, &snippet, text, &mut files)
            .await
            .unwrap();
        assert_eq!(
            files,
            BTreeMap::from([(
                "https://snippets.example/r.yaml".to_string(),
                "B: {Type: T}".to_string()
            )])
        );
        let mut none = BTreeMap::new();
        let refused = read_includes(&NestedConfig::default(), &snippet, text, &mut none)
            .await
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "Template format error: AWS::Include: the snippet at https://snippets.example/r.yaml cannot be read: https://snippets.example/r.yaml: only https:// URLs are fetched, and only with [nested] allow_https = true"
        );
        let s3 = text.replace("https://snippets.example", "s3://bucket");
        let refused = read_includes(&allowed, &snippet, &s3, &mut none)
            .await
            .unwrap_err();
        assert!(
            refused.to_string().ends_with("cannot be read: Cairn reads no S3; give it as a path beside the template, a file:/// path or an https:// URL"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn urls_are_fetched_only_over_https_when_allowed() {
        let config = NestedConfig::default();
        let origin = Origin::default();
        let refused = read(
            &config,
            &Serves(Vec::new()),
            &origin,
            None,
            "https://example.invalid/t.yaml",
        )
        .await
        .unwrap_err();
        assert!(
            refused.contains("only with [nested] allow_https = true"),
            "{refused}"
        );
        let allowed = NestedConfig {
            allow_https: true,
            ..NestedConfig::default()
        };
        let plain = read(
            &allowed,
            &Serves(Vec::new()),
            &origin,
            None,
            "http://127.0.0.1:1/t.yaml",
        )
        .await
        .unwrap_err();
        assert!(plain.contains("only https:// URLs are fetched"), "{plain}");
        let relative = read(&config, &Serves(Vec::new()), &origin, None, "t.yaml")
            .await
            .unwrap_err();
        assert!(
            relative.contains("the parent template was not read from a file"),
            "{relative}"
        );
        let manifest = format!("file://{}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
        let outside = read(&config, &Serves(Vec::new()), &origin, None, &manifest)
            .await
            .unwrap_err();
        assert!(
            outside.contains("is not under a directory of [nested] template_dirs"),
            "{outside}"
        );
    }

    #[test]
    fn child_names_are_stable_per_request_and_bounded() {
        let a = child_stack_name("web", "Network", "req-1");
        assert_eq!(a, child_stack_name("web", "Network", "req-1"));
        assert_ne!(a, child_stack_name("web", "Network", "req-2"));
        let suffix = a.strip_prefix("web-Network-").unwrap();
        assert_eq!(suffix.len(), 13);
        assert!(suffix
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()));
        let long = child_stack_name(&"p".repeat(120), "Logical", "r");
        assert_eq!(long.len(), 128);
    }

    #[test]
    fn parameters_are_text_and_lists_are_joined() {
        let props: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "Parameters": {"A": "x", "N": 3, "L": ["a", "b"], "B": true}
        }))
        .unwrap();
        let p = child_parameters("C", &props).unwrap();
        assert_eq!(p["A"], "x");
        assert_eq!(p["N"], "3");
        assert_eq!(p["L"], "a,b");
        assert_eq!(p["B"], "true");
    }

    #[test]
    fn templates_below_a_child_lose_its_prefix() {
        let t = |b: &str| NestedTemplate {
            location: b.into(),
            body: b.into(),
        };
        let all = NestedTemplates(BTreeMap::from([
            ("A".to_string(), t("a")),
            ("A/B".to_string(), t("b")),
            ("A/B/C".to_string(), t("c")),
            ("AB".to_string(), t("ab")),
        ]));
        let below = all.below("A");
        assert_eq!(below.0.keys().collect::<Vec<_>>(), vec!["B", "B/C"]);
        let props = with_digest("A", Map::new(), &all, None);
        assert_eq!(props[DIGEST], Value::String(digest("a")));
    }
}
