//! What a HOT template needs besides its text, gathered by the CLI: the
//! files its `get_file` calls read (beside the template) and the
//! environment files given with `-e` (merged in order, later ones winning).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use cairn_core::stack::TemplateContext;
use cairn_core::template::hot;
use cairn_core::template::Template;
use serde_json::Value;

/// The template context, and the environments' `parameters` (values for
/// the template; `-p` wins over them).
pub(crate) struct Gathered {
    pub context: TemplateContext,
    pub parameters: BTreeMap<String, String>,
}

pub(crate) fn gather(
    template: &Path,
    body: &str,
    environments: &[PathBuf],
) -> anyhow::Result<Gathered> {
    let mut context = TemplateContext::default();
    // A template that does not parse is reported by the operation itself.
    if let Ok(parsed) = Template::body_of(body) {
        let dir = template.parent().unwrap_or(Path::new("."));
        for name in hot::files_needed(&parsed) {
            let path = match name.strip_prefix("file://") {
                Some(absolute) => PathBuf::from(absolute),
                None => dir.join(&name),
            };
            let content = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "{}: get_file {name}: cannot read {}",
                    template.display(),
                    path.display()
                )
            })?;
            context.files.insert(name, content);
        }
    }
    let mut parameters = BTreeMap::new();
    if !environments.is_empty() {
        let mut envs = Vec::new();
        for path in environments {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read environment {}", path.display()))?;
            let env = Template::body_of(&text)
                .map_err(|e| anyhow!("environment {}: {e}", path.display()))?;
            // Provider templates: read beside the environment that names them.
            let dir = path.parent().unwrap_or(Path::new("."));
            for name in provider_templates(&env) {
                let file = dir.join(&name);
                let content = std::fs::read_to_string(&file).with_context(|| {
                    format!(
                        "environment {}: provider template {name}: cannot read {}",
                        path.display(),
                        file.display()
                    )
                })?;
                context.files.insert(name, content);
            }
            envs.push(env);
        }
        let merged = hot::merge_environments(&envs).map_err(|e| anyhow!("environment: {e}"))?;
        if let Some(Value::Object(p)) = merged.get("parameters") {
            for (k, v) in p {
                parameters.insert(
                    k.clone(),
                    cairn_core::template::parameters::parameter_text(v),
                );
            }
        }
        context.environment = Some(merged);
    }
    Ok(Gathered {
        context,
        parameters,
    })
}

/// The template files an environment's resource_registry maps types to
/// (top level and per resource).
fn provider_templates(env: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(Value::Object(registry)) = env.get("resource_registry") else {
        return out;
    };
    let mut note = |v: &Value| {
        if let Value::String(s) = v {
            if hot::is_template_file(s) && !out.contains(s) {
                out.push(s.clone());
            }
        }
    };
    for (k, v) in registry {
        if k == "resources" {
            for per in v.as_object().into_iter().flat_map(|m| m.values()) {
                per.as_object()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .for_each(&mut note);
            }
        } else {
            note(v);
        }
    }
    out
}
