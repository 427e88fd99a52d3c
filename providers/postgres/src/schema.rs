//! `Cairn::Postgres::Schema`: a schema in a database. `Database` is
//! create-only (a new database gets a new schema; renaming a database that
//! holds managed schemas is refused by their create: the schema exists
//! there already); `Name` changes by a rename and `Owner` in place. The
//! physical id is `DATABASE|NAME` (its primary identifier, for import).
//! A schema with objects in it is dropped only with
//! `DropCascadeOnDelete: true`.

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
    read_in_database, split_id,
};

pub const TYPE: &str = "Cairn::Postgres::Schema";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Schema {
    database: String,
    name: String,
    owner: Option<String>,
    #[serde(default)]
    drop_cascade_on_delete: bool,
}

pub fn schema() -> ResourceSchema {
    ResourceSchema::new(TYPE)
        .describe("A schema in a PostgreSQL database")
        .property(
            "Database",
            PropertySchema::string().required().create_only(),
        )
        .property("Name", PropertySchema::string().required())
        .property("Owner", PropertySchema::string())
        .property(
            "DropCascadeOnDelete",
            PropertySchema::boolean().describe("drop what the schema holds with it"),
        )
        .attribute("Name", "the schema's name")
        .attribute("Oid", "the schema's OID")
        .identified_by(&["Database", "Name"])
        .ref_returns("DATABASE|NAME (GetAtt Name for the name alone)")
}

/// The schema's catalog row (in the database connected to).
const LIVE: &str = "SELECT json_build_object('Database', current_database(), 'Name', nspname, 'Owner', pg_get_userbyid(nspowner))::text, oid FROM pg_namespace WHERE nspname = $1";

async fn live(
    client: &Client,
    name: &str,
) -> Result<Option<(Map<String, Value>, u32)>, ProviderError> {
    catalog_row(client, LIVE, name, "schema").await
}

fn made(database: &str, name: &str, oid: u32) -> (String, Map<String, Value>) {
    (format!("{database}|{name}"), attributes(name, oid))
}

pub async fn create(req: &CreateRequest) -> Result<CreateResult, ProviderError> {
    let s: Schema = req.properties()?;
    let client = connect_to(&req.context, Some(&s.database)).await?;
    let mut sql = format!("CREATE SCHEMA {}", ident(&s.name));
    if let Some(o) = &s.owner {
        sql.push_str(&format!(" AUTHORIZATION {}", ident(o)));
    }
    // A create sent again finds the schema it made: same name, same owner,
    // nothing in it yet is what a first create leaves.
    if let Err(e) = client.batch_execute(&sql).await {
        if e.code() != Some(&SqlState::DUPLICATE_SCHEMA) {
            return Err(failed(&format!("cannot create schema {}", s.name), &e));
        }
        let same = live(&client, &s.name)
            .await?
            .filter(|(m, _)| s.owner.as_ref().is_none_or(|o| m["Owner"] == json!(o)));
        if same.is_none() {
            return Err(failed(&format!("cannot create schema {}", s.name), &e));
        }
    }
    let (_, oid) = live(&client, &s.name).await?.ok_or_else(|| {
        ProviderError::internal(format!("schema {} is gone right after it was made", s.name))
    })?;
    let (id, attributes) = made(&s.database, &s.name, oid);
    Ok(CreateResult {
        physical_resource_id: id,
        attributes,
        no_echo: false,
    })
}

pub async fn update(req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
    let s: Schema = req.properties()?;
    let (database, old) = split_id(&req.physical_resource_id)?;
    let client = connect_to(&req.context, Some(database)).await?;
    if s.name != old {
        client
            .batch_execute(&format!(
                "ALTER SCHEMA {} RENAME TO {}",
                ident(old),
                ident(&s.name)
            ))
            .await
            .map_err(|e| failed(&format!("cannot rename schema {old} to {}", s.name), &e))?;
    }
    if let Some(o) = &s.owner {
        client
            .batch_execute(&format!(
                "ALTER SCHEMA {} OWNER TO {}",
                ident(&s.name),
                ident(o)
            ))
            .await
            .map_err(|e| failed(&format!("cannot change the owner of schema {}", s.name), &e))?;
    }
    let (_, oid) = live(&client, &s.name)
        .await?
        .ok_or_else(|| ProviderError::not_found(format!("schema {} does not exist", s.name)))?;
    let (id, attributes) = made(database, &s.name, oid);
    Ok(UpdateResult {
        physical_resource_id: (id != req.physical_resource_id).then_some(id),
        attributes,
        no_echo: false,
    })
}

pub async fn delete(req: &DeleteRequest) -> Result<(), ProviderError> {
    let s: Schema = req.properties()?;
    drop_in_database(
        req,
        "SCHEMA",
        s.drop_cascade_on_delete,
        "move or drop what it holds, or set DropCascadeOnDelete: true",
    )
    .await
}

pub async fn check_drift(req: &DriftRequest) -> Result<DriftResult, ProviderError> {
    drift_in_database(req, LIVE, "schema").await
}

pub async fn read(req: &ReadRequest) -> Result<ReadResult, ProviderError> {
    read_in_database(req, LIVE, "schema").await
}
