//! The CloudFormation template language: parsing (JSON and YAML), the template
//! model with its structural validation, parameters, and evaluation of intrinsic
//! functions and conditions.
//!
//! Nothing here does I/O or knows about providers beyond the schema lookup it is
//! handed; evaluation of resource references goes through [`eval::Resolver`].

#![forbid(unsafe_code)]

pub mod cidr;
mod context;
pub mod eval;
pub mod hot;
pub mod include;
pub mod language_extensions;
pub mod model;
pub mod modules;
pub mod parameters;
pub mod pattern;
mod read;
pub mod rules;
pub mod source;
pub mod transform;
pub mod types;
pub mod yaml;

#[cfg(test)]
mod eval_tests;

use std::fmt;

pub use context::{Facade, TemplateContext};
pub use eval::{Evaluated, Evaluator, Resolver, StackContext};
pub use model::{Output, Resource, Template};
pub use parameters::{ParameterDecl, ParameterType, ParameterValues};
pub use source::{Location, SourceMap};

/// A template that cannot be parsed, validated or evaluated. `message` uses
/// CloudFormation's text where it has one; `path` is the JSON pointer of the node
/// concerned and `location` its line/column in a YAML source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    message: String,
    path: String,
    location: Option<Location>,
}

impl TemplateError {
    pub fn new(message: impl Into<String>) -> Self {
        TemplateError {
            message: message.into(),
            path: String::new(),
            location: None,
        }
    }

    pub fn format_at(message: String, path: String, location: Option<Location>) -> Self {
        TemplateError {
            message,
            path,
            location,
        }
    }

    /// Attaches the JSON pointer of the node concerned (if none is set yet).
    pub fn at(mut self, path: &str) -> Self {
        if self.path.is_empty() {
            self.path = path.to_string();
        }
        self
    }

    /// Fills in the line/column from a source map (YAML templates).
    pub fn locate(mut self, map: &SourceMap) -> Self {
        if self.location.is_none() && !self.path.is_empty() {
            self.location = map.get(&self.path);
            if let Some(original) = map.original(&self.path) {
                self.path = original;
            }
        }
        self
    }

    pub fn message(&self) -> &str {
        &self.message
    }
    pub fn path(&self) -> &str {
        &self.path
    }
    pub fn location(&self) -> Option<Location> {
        self.location
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match (self.path.is_empty(), self.location) {
            (true, None) => Ok(()),
            (true, Some(l)) => write!(f, " (at {l})"),
            (false, None) => write!(f, " (at {})", self.path),
            (false, Some(l)) => write!(f, " (at {}, {l})", self.path),
        }
    }
}

impl std::error::Error for TemplateError {}

/// A template as Cairn reads it (the long form after AWS::LanguageExtensions'
/// expansion and HOT's lowering), for `cairn template --expanded`.
pub fn expanded(
    text: &str,
    context: &crate::TemplateContext,
) -> Result<serde_json::Value, TemplateError> {
    if let Some(processed) = &context.processed {
        return Ok(processed.clone());
    }
    let mut body = Template::body_of(text)?;
    if include::requested(&body) {
        body = include::expand(body, &context.files)?;
    }
    if language_extensions::requested(&body) {
        body = language_extensions::expand(body, &context.parameters)?;
    }
    if hot::is_hot(&body) {
        body = hot::lower(body, SourceMap::default(), context)?.0;
    }
    Ok(body)
}

/// `Template format error: …`
pub fn format_error(msg: impl fmt::Display) -> TemplateError {
    TemplateError::new(format!("Template format error: {msg}"))
}

/// Why a template that still names a macro cannot be read: macros run
/// before an operation, on the template it is given.
pub fn unprocessed_transform(name: &str) -> TemplateError {
    format_error(format!(
        "Transform {name} names a macro, and macros run only when a stack's template is deployed, planned, updated or validated, not where a template is only read (as here)"
    ))
    .at("/Transform")
}

/// The most characters an error quotes of a template's or a user's input:
/// a longer value is cut, with its length said.
pub const QUOTED_CHARS: usize = 200;

/// `text` as an error quotes it: whole when short, else its first
/// [`QUOTED_CHARS`] characters and how long it is.
pub fn quoted(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(QUOTED_CHARS) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => std::borrow::Cow::Owned(format!(
            "{}… ({} characters)",
            &text[..cut],
            text.chars().count()
        )),
    }
}

/// `Template error: …` (CloudFormation's prefix for intrinsic-function misuse).
pub fn template_error(msg: impl fmt::Display) -> TemplateError {
    TemplateError::new(format!("Template error: {msg}"))
}
