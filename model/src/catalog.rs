//! What the model asks of the resource types on offer: the registry (in the
//! core, with its providers and transports) answers, so planning and
//! validation need no transport.

use std::sync::Arc;

use cairn_sdk::ResourceSchema;

/// Something that holds a resource type's schema (a registered type).
pub trait HasSchema: Send + Sync {
    fn schema(&self) -> &ResourceSchema;
}

/// A served type's schema, shared with whoever holds it (no copy).
#[derive(Clone)]
pub struct TypeSchema(Arc<dyn HasSchema>);

impl TypeSchema {
    pub fn new(holder: Arc<dyn HasSchema>) -> TypeSchema {
        TypeSchema(holder)
    }
}

impl std::ops::Deref for TypeSchema {
    type Target = ResourceSchema;
    fn deref(&self) -> &ResourceSchema {
        self.0.schema()
    }
}

/// The resource types a template may use.
pub trait TypeCatalog: Sync {
    /// The type that serves `type_name` (itself, or what an alias names).
    fn canonical<'a>(&'a self, type_name: &'a str) -> &'a str;
    /// Its schema, when a provider serves it.
    fn schema(&self, type_name: &str) -> Option<TypeSchema>;
    /// The schema of one registered version of it (`None`: as
    /// [`TypeCatalog::schema`]).
    fn version_schema(&self, type_name: &str, version: Option<&str>) -> Option<TypeSchema> {
        let _ = version;
        self.schema(type_name)
    }
    /// The name of the provider that serves it, for messages.
    fn provider_name(&self, type_name: &str) -> Option<String>;
    /// Why a type nobody serves now is unavailable (its provider could not
    /// start), when that is the reason.
    fn unavailable_reason(&self, type_name: &str) -> Option<String>;
}

/// A shared catalog is a catalog (the engine holds its registry in an `Arc`).
impl<T: TypeCatalog + Send + Sync + ?Sized> TypeCatalog for Arc<T> {
    fn canonical<'a>(&'a self, type_name: &'a str) -> &'a str {
        (**self).canonical(type_name)
    }
    fn schema(&self, type_name: &str) -> Option<TypeSchema> {
        (**self).schema(type_name)
    }
    fn version_schema(&self, type_name: &str, version: Option<&str>) -> Option<TypeSchema> {
        (**self).version_schema(type_name, version)
    }
    fn provider_name(&self, type_name: &str) -> Option<String> {
        (**self).provider_name(type_name)
    }
    fn unavailable_reason(&self, type_name: &str) -> Option<String> {
        (**self).unavailable_reason(type_name)
    }
}
