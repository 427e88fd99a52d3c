//! Reading a template's text: JSON or YAML into the long form, then the
//! front ends in CloudFormation's order (`AWS::Include`'s snippets,
//! `AWS::LanguageExtensions`' loops, HOT lowered), then the model's
//! structural checks (`model`). The front ends build on the model; the
//! model knows none of them.

use serde_json::Value;

use crate::model::Template;
use crate::source::SourceMap;
use crate::{format_error, yaml, TemplateError};

impl Template {
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        Self::parse_with(text, &crate::TemplateContext::default())
    }

    /// [`Template::parse`] with what the template needs besides its text
    /// (HOT's files and environment).
    pub fn parse_with(
        text: &str,
        context: &crate::TemplateContext,
    ) -> Result<Template, TemplateError> {
        // A template whose macros ran is read as they left it.
        if let Some(processed) = &context.processed {
            return Self::from_value(processed.clone(), SourceMap::default());
        }
        let (body, source_map) = if text.trim_start().starts_with('{') {
            let v: Value = serde_json::from_str(text).map_err(|e| {
                format_error(format!(
                    "JSON not well-formed. {e} (line {}, column {})",
                    e.line(),
                    e.column()
                ))
            })?;
            (v, SourceMap::default())
        } else {
            yaml::parse(text)?
        };
        // AWS::Include: the snippets inserted first (the context's files).
        let body = if crate::include::requested(&body) {
            crate::include::expand(body, &context.files).map_err(|e| e.locate(&source_map))?
        } else {
            body
        };
        // AWS::LanguageExtensions: loops expanded next; without it, what
        // it brings is refused (HOT has its own functions).
        let body = if crate::language_extensions::requested(&body) {
            crate::language_extensions::expand(body, &context.parameters)
                .map_err(|e| e.locate(&source_map))?
        } else {
            if !crate::hot::is_hot(&body) {
                crate::language_extensions::refuse_without(&body)
                    .map_err(|e| e.locate(&source_map))?;
            }
            body
        };
        // HOT is read by lowering it into this long form; its names are
        // Heat's (any non-empty text), not CloudFormation's alphanumerics.
        if crate::hot::is_hot(&body) {
            let (body, source_map) = crate::hot::lower(body, source_map, context)?;
            return match Self::build(body, true) {
                Ok(mut t) => {
                    t.source_map = source_map;
                    Ok(t)
                }
                Err(e) => Err(e.locate(&source_map)),
            };
        }
        Self::from_value(body, source_map)
    }
}
