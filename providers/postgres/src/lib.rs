//! Cairn's PostgreSQL provider, a plugin (`[[providers]] kind = "dylib"`)
//! that manages what a platform team keeps beside its cloud:
//! `Cairn::Postgres::Database`, `Role`, `Schema`, `Extension`, `Grant` and
//! `DefaultPrivileges`. It reaches the
//! server its entry's settings name (`Url`; the password from
//! `PasswordEnv` or `PasswordFile`; TLS modes as the state store's), reads
//! the catalogs for drift and import, and recognises a create sent again.

use cairn_sdk::{
    async_trait, export_provider, CreateRequest, CreateResult, DeleteRequest, DriftRequest,
    DriftResult, ProviderError, ReadRequest, ReadResult, ResourceProvider, ResourceSchema,
    UpdateRequest, UpdateResult,
};

mod connection;
mod database;
mod default_privileges;
mod extension;
mod grant;
mod privileges;
mod role;
mod schema;

#[derive(Default)]
pub struct PostgresProvider;

/// The type a request is for, or why this provider does not serve it.
enum Kind {
    Database,
    Role,
    Schema,
    Extension,
    Grant,
    DefaultPrivileges,
}

fn kind(type_name: &str) -> Result<Kind, ProviderError> {
    match type_name {
        database::TYPE => Ok(Kind::Database),
        role::TYPE => Ok(Kind::Role),
        schema::TYPE => Ok(Kind::Schema),
        extension::TYPE => Ok(Kind::Extension),
        grant::TYPE => Ok(Kind::Grant),
        default_privileges::TYPE => Ok(Kind::DefaultPrivileges),
        other => Err(ProviderError::invalid_request(format!(
            "the PostgreSQL provider does not serve {other}"
        ))),
    }
}

#[async_trait]
impl ResourceProvider for PostgresProvider {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![
            database::schema(),
            role::schema(),
            schema::schema(),
            extension::schema(),
            grant::schema(),
            default_privileges::schema(),
        ]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        match kind(&req.context.resource_type)? {
            Kind::Database => database::create(req).await,
            Kind::Role => role::create(req).await,
            Kind::Schema => schema::create(req).await,
            Kind::Extension => extension::create(req).await,
            Kind::Grant => grant::create(req).await,
            Kind::DefaultPrivileges => default_privileges::create(req).await,
        }
    }

    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        match kind(&req.context.resource_type)? {
            Kind::Database => database::recover_create(req).await,
            Kind::Role => role::create(req).await,
            Kind::Schema => schema::create(req).await,
            Kind::Extension => extension::create(req).await,
            Kind::Grant => grant::create(req).await,
            Kind::DefaultPrivileges => default_privileges::create(req).await,
        }
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        match kind(&req.context.resource_type)? {
            Kind::Database => database::update(req).await,
            Kind::Role => role::update(req).await,
            Kind::Schema => schema::update(req).await,
            Kind::Extension => extension::update(req).await,
            Kind::Grant => grant::update(req).await,
            Kind::DefaultPrivileges => default_privileges::update(req).await,
        }
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        match kind(&req.context.resource_type)? {
            Kind::Database => database::delete(req).await,
            Kind::Role => role::delete(req).await,
            Kind::Schema => schema::delete(req).await,
            Kind::Extension => extension::delete(req).await,
            Kind::Grant => grant::delete(req).await,
            Kind::DefaultPrivileges => default_privileges::delete(req).await,
        }
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        match kind(&req.context.resource_type)? {
            Kind::Database => database::check_drift(req).await,
            Kind::Role => role::check_drift(req).await,
            Kind::Schema => schema::check_drift(req).await,
            Kind::Extension => extension::check_drift(req).await,
            Kind::Grant => grant::check_drift(req).await,
            Kind::DefaultPrivileges => default_privileges::check_drift(req).await,
        }
    }

    async fn read(&self, req: &ReadRequest) -> Result<ReadResult, ProviderError> {
        match kind(&req.context.resource_type)? {
            Kind::Database => database::read(req).await,
            Kind::Role => role::read(req).await,
            Kind::Schema => schema::read(req).await,
            Kind::Extension => extension::read(req).await,
            Kind::Grant => grant::read(req).await,
            Kind::DefaultPrivileges => default_privileges::read(req).await,
        }
    }
}

export_provider!(PostgresProvider::default);
