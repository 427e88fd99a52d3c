//! `Cairn::Postgres::Extension`: an extension installed in a database.
//! `Database` and `Name` are create-only; `Version` updates in place
//! (`ALTER EXTENSION … UPDATE TO`) and `Schema` moves it (`SET SCHEMA`).
//! The physical id is `DATABASE|NAME`. An extension others depend on is
//! dropped only with `DropCascadeOnDelete: true`.

use cairn_sdk::serde_json::{json, Map, Value};
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    ProviderError, ReadRequest, ReadResult, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde::Deserialize;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::connection::{
    attributes, catalog_row, connect_to, drift_in_database, drop_in_database, failed, ident,
    literal, read_in_database, split_id,
};

pub const TYPE: &str = "Cairn::Postgres::Extension";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Extension {
    database: String,
    name: String,
    schema: Option<String>,
    version: Option<String>,
    #[serde(default)]
    drop_cascade_on_delete: bool,
}

pub fn schema() -> ResourceSchema {
    ResourceSchema::new(TYPE)
        .describe("An extension installed in a PostgreSQL database")
        .property(
            "Database",
            PropertySchema::string().required().create_only(),
        )
        .property("Name", PropertySchema::string().required().create_only())
        .property("Schema", PropertySchema::string())
        .property("Version", PropertySchema::string())
        .property(
            "DropCascadeOnDelete",
            PropertySchema::boolean().describe("drop what depends on the extension with it"),
        )
        .attribute("Name", "the extension's name")
        .attribute("Oid", "the extension's OID")
        .attribute("Version", "the installed version")
        .identified_by(&["Database", "Name"])
        .ref_returns("DATABASE|NAME (GetAtt Name for the name alone)")
}

/// The extension's catalog row (in the database connected to).
const LIVE: &str = "SELECT json_build_object('Database', current_database(), 'Name', e.extname, 'Schema', n.nspname, 'Version', e.extversion)::text, e.oid FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = $1";

async fn live(
    client: &Client,
    name: &str,
) -> Result<Option<(Map<String, Value>, u32)>, ProviderError> {
    catalog_row(client, LIVE, name, "extension").await
}

/// The physical id and attributes of the installed extension.
async fn installed(
    client: &Client,
    database: &str,
    name: &str,
) -> Result<(String, Map<String, Value>), ProviderError> {
    let (m, oid) = live(client, name).await?.ok_or_else(|| {
        ProviderError::not_found(format!("extension {name} is not installed in {database}"))
    })?;
    let mut a = attributes(name, oid);
    a.insert("Version".into(), m["Version"].clone());
    Ok((format!("{database}|{name}"), a))
}

pub async fn create(req: &CreateRequest) -> Result<CreateResult, ProviderError> {
    let x: Extension = req.properties()?;
    let client = connect_to(&req.context, Some(&x.database)).await?;
    let mut sql = format!("CREATE EXTENSION {}", ident(&x.name));
    if let Some(s) = &x.schema {
        sql.push_str(&format!(" SCHEMA {}", ident(s)));
    }
    if let Some(v) = &x.version {
        sql.push_str(&format!(" VERSION {}", literal(v)));
    }
    // A create sent again finds the extension installed as asked.
    if let Err(e) = client.batch_execute(&sql).await {
        if e.code() != Some(&SqlState::DUPLICATE_OBJECT) {
            return Err(failed(&format!("cannot install extension {}", x.name), &e));
        }
        let as_asked = live(&client, &x.name).await?.is_some_and(|(m, _)| {
            x.version.as_ref().is_none_or(|v| m["Version"] == json!(v))
                && x.schema.as_ref().is_none_or(|s| m["Schema"] == json!(s))
        });
        if !as_asked {
            return Err(failed(&format!("cannot install extension {}", x.name), &e));
        }
    }
    let (id, attributes) = installed(&client, &x.database, &x.name).await?;
    Ok(CreateResult {
        physical_resource_id: id,
        attributes,
        no_echo: false,
    })
}

pub async fn update(req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
    let x: Extension = req.properties()?;
    let (database, name) = split_id(&req.physical_resource_id)?;
    let client = connect_to(&req.context, Some(database)).await?;
    let update_to = match &x.version {
        Some(v) => format!(" TO {}", literal(v)),
        None => String::new(),
    };
    client
        .batch_execute(&format!(
            "ALTER EXTENSION {} UPDATE{update_to}",
            ident(name)
        ))
        .await
        .map_err(|e| failed(&format!("cannot update extension {name}"), &e))?;
    if let Some(s) = &x.schema {
        let (now, _) = live(&client, name).await?.ok_or_else(|| {
            ProviderError::not_found(format!("extension {name} is not installed in {database}"))
        })?;
        if now["Schema"] != json!(s) {
            client
                .batch_execute(&format!(
                    "ALTER EXTENSION {} SET SCHEMA {}",
                    ident(name),
                    ident(s)
                ))
                .await
                .map_err(|e| failed(&format!("cannot move extension {name} to schema {s}"), &e))?;
        }
    }
    let (id, attributes) = installed(&client, database, name).await?;
    Ok(UpdateResult {
        physical_resource_id: (id != req.physical_resource_id).then_some(id),
        attributes,
        no_echo: false,
    })
}

pub async fn delete(req: &DeleteRequest) -> Result<(), ProviderError> {
    let x: Extension = req.properties()?;
    drop_in_database(
        req,
        "EXTENSION",
        x.drop_cascade_on_delete,
        "drop what uses it, or set DropCascadeOnDelete: true",
    )
    .await
}

pub async fn check_drift(req: &DriftRequest) -> Result<DriftResult, ProviderError> {
    drift_in_database(req, LIVE, "extension").await
}

pub async fn read(req: &ReadRequest) -> Result<ReadResult, ProviderError> {
    read_in_database(req, LIVE, "extension").await
}
