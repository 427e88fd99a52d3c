//! `Cairn::Postgres::Database`: a database. `Name` changes in place (a
//! rename, the physical id follows); `Owner` and `ConnectionLimit` too;
//! `Encoding`, `LcCollate`, `LcCtype` and `Template` are create-only (a
//! change makes a new database). A database others are connected to is
//! dropped only with `TerminateConnectionsOnDelete: true`.

use cairn_sdk::serde_json::{Map, Value};
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    ProviderError, ReadRequest, ReadResult, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde::Deserialize;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::connection::{
    attributes, catalog_row, comment_on, connect, db_text, failed, found, given_drift, ident,
    literal, made_by,
};

pub const TYPE: &str = "Cairn::Postgres::Database";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Database {
    name: String,
    owner: Option<String>,
    encoding: Option<String>,
    lc_collate: Option<String>,
    lc_ctype: Option<String>,
    template: Option<String>,
    connection_limit: Option<i64>,
    #[serde(default)]
    terminate_connections_on_delete: bool,
}

pub fn schema() -> ResourceSchema {
    ResourceSchema::new(TYPE)
        .describe("A PostgreSQL database")
        .property("Name", PropertySchema::string().required())
        .property("Owner", PropertySchema::string())
        .property("Encoding", PropertySchema::string().create_only())
        .property("LcCollate", PropertySchema::string().create_only())
        .property("LcCtype", PropertySchema::string().create_only())
        .property("Template", PropertySchema::string().create_only())
        .property("ConnectionLimit", PropertySchema::integer())
        .property(
            "TerminateConnectionsOnDelete",
            PropertySchema::boolean()
                .describe("end other sessions on the database before dropping it"),
        )
        .attribute("Name", "the database's name")
        .attribute("Oid", "the database's OID")
        .identified_by(&["Name"])
        .ref_returns("the database's name")
}

/// The database's catalog row as properties, or `None` when there is none.
async fn live(
    client: &Client,
    name: &str,
) -> Result<Option<(Map<String, Value>, u32)>, ProviderError> {
    catalog_row(
        client,
        "SELECT json_build_object('Name', d.datname, 'Owner', pg_get_userbyid(d.datdba),
                'Encoding', pg_encoding_to_char(d.encoding), 'LcCollate', d.datcollate,
                'LcCtype', d.datctype, 'ConnectionLimit', d.datconnlimit)::text, d.oid
         FROM pg_database d WHERE d.datname = $1",
        name,
        "database",
    )
    .await
}

pub async fn create(req: &CreateRequest) -> Result<CreateResult, ProviderError> {
    let d: Database = req.properties()?;
    let client = connect(&req.context).await?;
    let mut sql = format!("CREATE DATABASE {}", ident(&d.name));
    for (clause, value) in [
        ("OWNER", d.owner.as_deref().map(ident)),
        ("ENCODING", d.encoding.as_deref().map(literal)),
        ("LC_COLLATE", d.lc_collate.as_deref().map(literal)),
        ("LC_CTYPE", d.lc_ctype.as_deref().map(literal)),
        ("TEMPLATE", d.template.as_deref().map(ident)),
        (
            "CONNECTION LIMIT",
            d.connection_limit.map(|n| n.to_string()),
        ),
    ] {
        if let Some(v) = value {
            sql.push_str(&format!(" {clause} {v}"));
        }
    }
    let marker = made_by(&req.context.request_id);
    match client.batch_execute(&sql).await {
        Ok(()) => {}
        // Made by this request already (sent again): that database.
        Err(e) if e.code() == Some(&SqlState::DUPLICATE_DATABASE) => {
            if comment_on(&client, "pg_database", &d.name).await? == Some(Some(marker)) {
                return made(&client, &d.name).await;
            }
            return Err(failed(&format!("cannot create database {}", d.name), &e));
        }
        Err(e) => return Err(failed(&format!("cannot create database {}", d.name), &e)),
    }
    // CREATE DATABASE cannot share a transaction: the mark follows it.
    client
        .batch_execute(&format!(
            "COMMENT ON DATABASE {} IS {}",
            ident(&d.name),
            literal(&marker)
        ))
        .await
        .map_err(|e| failed(&format!("cannot mark database {}", d.name), &e))?;
    made(&client, &d.name).await
}

async fn made(client: &Client, name: &str) -> Result<CreateResult, ProviderError> {
    let (_, oid) = live(client, name).await?.ok_or_else(|| {
        ProviderError::internal(format!("database {name} is gone right after it was made"))
    })?;
    Ok(CreateResult {
        physical_resource_id: name.to_string(),
        attributes: attributes(name, oid),
        no_echo: false,
    })
}

/// A create sent again after the engine lost its outcome: a database of
/// that name marked by this request, or not marked at all (the engine
/// stopped between the create and its mark), is the one it made.
pub async fn recover_create(req: &CreateRequest) -> Result<CreateResult, ProviderError> {
    match create(req).await {
        Err(e) if e.kind == cairn_sdk::ErrorKind::AlreadyExists => {
            let d: Database = req.properties()?;
            let client = connect(&req.context).await?;
            if comment_on(&client, "pg_database", &d.name).await? != Some(None) {
                return Err(e);
            }
            client
                .batch_execute(&format!(
                    "COMMENT ON DATABASE {} IS {}",
                    ident(&d.name),
                    literal(&made_by(&req.context.request_id))
                ))
                .await
                .map_err(|e| failed(&format!("cannot mark database {}", d.name), &e))?;
            made(&client, &d.name).await
        }
        other => other,
    }
}

pub async fn update(req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
    let d: Database = req.properties()?;
    let client = connect(&req.context).await?;
    let mut name = req.physical_resource_id.clone();
    if d.name != name {
        client
            .batch_execute(&format!(
                "ALTER DATABASE {} RENAME TO {}",
                ident(&name),
                ident(&d.name)
            ))
            .await
            .map_err(|e| failed(&format!("cannot rename database {name} to {}", d.name), &e))?;
        name = d.name.clone();
    }
    if let Some(owner) = &d.owner {
        client
            .batch_execute(&format!(
                "ALTER DATABASE {} OWNER TO {}",
                ident(&name),
                ident(owner)
            ))
            .await
            .map_err(|e| failed(&format!("cannot change the owner of database {name}"), &e))?;
    }
    let limit = d.connection_limit.unwrap_or(-1);
    client
        .batch_execute(&format!(
            "ALTER DATABASE {} CONNECTION LIMIT {limit}",
            ident(&name)
        ))
        .await
        .map_err(|e| {
            failed(
                &format!("cannot change the connection limit of database {name}"),
                &e,
            )
        })?;
    let made = made(&client, &name).await?;
    Ok(UpdateResult {
        physical_resource_id: (name != req.physical_resource_id).then_some(name),
        attributes: made.attributes,
        no_echo: false,
    })
}

pub async fn delete(req: &DeleteRequest) -> Result<(), ProviderError> {
    let d: Database = req.properties()?;
    let name = &req.physical_resource_id;
    let client = connect(&req.context).await?;
    if d.terminate_connections_on_delete {
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[name],
            )
            .await
            .map_err(|e| failed(&format!("cannot end the sessions on database {name}"), &e))?;
    }
    match client.batch_execute(&format!("DROP DATABASE {}", ident(name))).await {
        Ok(()) => Ok(()),
        // Gone already: what a delete wants.
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_DATABASE) => Ok(()),
        Err(e) if e.code() == Some(&SqlState::OBJECT_IN_USE) => Err(ProviderError::internal(format!(
            "cannot drop database {name}: {}; close those sessions, or set TerminateConnectionsOnDelete: true to end them",
            db_text(&e)
        ))),
        Err(e) => Err(failed(&format!("cannot drop database {name}"), &e)),
    }
}

pub async fn check_drift(req: &DriftRequest) -> Result<DriftResult, ProviderError> {
    let client = connect(&req.context).await?;
    let Some((actual, _)) = live(&client, &req.physical_resource_id).await? else {
        return Ok(DriftResult::Deleted);
    };
    // The template database is not kept: not compared.
    Ok(given_drift(&req.properties, actual))
}

pub async fn read(req: &ReadRequest) -> Result<ReadResult, ProviderError> {
    let client = connect(&req.context).await?;
    let name = &req.physical_resource_id;
    found("database", name, live(&client, name).await?)
}
