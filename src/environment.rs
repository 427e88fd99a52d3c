//! What a HOT template needs besides its text, gathered by the CLI: the
//! files its `get_file` calls read (beside the template) and the
//! environment files given with `-e` (merged in order, later ones winning).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use cairn_core::stack::TemplateContext;
use cairn_core::template::hot;
use cairn_core::template::Template;

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
    read_needed(template, body, &mut context)?;
    let mut envs = Vec::new();
    for path in environments {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read environment {}", path.display()))?;
        let env =
            Template::body_of(&text).map_err(|e| anyhow!("environment {}: {e}", path.display()))?;
        // Provider templates: read beside the environment that names them,
        // with the files their own get_file calls read beside them.
        let dir = path.parent().unwrap_or(Path::new("."));
        for name in hot::provider_templates(&env) {
            let file = dir.join(&name);
            let content = std::fs::read_to_string(&file).with_context(|| {
                format!(
                    "environment {}: provider template {name}: cannot read {}",
                    path.display(),
                    file.display()
                )
            })?;
            read_needed(&file, &content, &mut context)?;
            context.files.insert(name, content);
        }
        envs.push(env);
    }
    let parameters =
        hot::apply_environments(&mut context, &envs).map_err(|e| anyhow!("environment: {e}"))?;
    Ok(Gathered {
        context,
        parameters,
    })
}

/// Reads the files a template's `get_file` calls name and the template
/// files its resources name as their type (`type: child.yaml`, Heat's
/// template resources; each read with its own files, beside it), relative
/// to the template's directory (or `file://` absolute), into the context.
fn read_needed(template: &Path, body: &str, context: &mut TemplateContext) -> anyhow::Result<()> {
    // Only a HOT template, or one with AWS::Include, reads files: another
    // is not parsed twice.
    let includes = body.contains(cairn_core::template::include::INCLUDE);
    if !body.contains("heat_template_version") && !includes {
        return Ok(());
    }
    // A template that does not parse is reported by the operation itself.
    let Ok(parsed) = Template::body_of(body) else {
        return Ok(());
    };
    let dir = template.parent().unwrap_or(Path::new("."));
    let read = |name: &str, what: &str| -> anyhow::Result<(PathBuf, String)> {
        let path = match name.strip_prefix("file://") {
            Some(absolute) => PathBuf::from(absolute),
            None => dir.join(name),
        };
        let content = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{}: {what} {name}: cannot read {}",
                template.display(),
                path.display()
            )
        })?;
        Ok((path, content))
    };
    // AWS::Include's snippets, by their Location as written (a snippet
    // may include others, beside it).
    if includes {
        for location in cairn_core::template::include::locations(&parsed) {
            // Remote snippets are the engine's to read (and to refuse).
            if location.starts_with("https://") || location.starts_with("s3://") {
                continue;
            }
            if let std::collections::btree_map::Entry::Vacant(slot) = context.files.entry(location)
            {
                let (path, content) = read(slot.key(), "AWS::Include Location")?;
                slot.insert(content.clone());
                read_needed(&path, &content, context)?;
            }
        }
    }
    for name in hot::files_needed(&parsed) {
        if let std::collections::btree_map::Entry::Vacant(slot) = context.files.entry(name) {
            let (path, content) = read(slot.key(), "get_file")?;
            slot.insert(content.clone());
            // A HOT template read with get_file (an OS::Heat::Stack's
            // `template: {get_file: child.yaml}`) reads its own files
            // beside it, handed in with the parent's as Heat sends them.
            if content.contains("heat_template_version") {
                read_needed(&path, &content, context)?;
            }
        }
    }
    for name in hot::template_types(&parsed) {
        if let std::collections::btree_map::Entry::Vacant(slot) = context.files.entry(name) {
            let (path, content) = read(slot.key(), "type")?;
            slot.insert(content.clone());
            read_needed(&path, &content, context)?;
        }
    }
    // A computed member type's possible files: read when they exist (the
    // engine names a missing one once the parameter's value is known).
    for name in hot::computed_template_types(&parsed) {
        if context.files.contains_key(&name) {
            continue;
        }
        if let Ok((path, content)) = read(&name, "type") {
            context.files.insert(name, content.clone());
            read_needed(&path, &content, context)?;
        }
    }
    Ok(())
}
