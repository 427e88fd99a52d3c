//! Reaching the server: the provider's `[[providers]]` settings (`Url`,
//! and the admin password from `PasswordEnv` or `PasswordFile`, never from
//! a template), TLS as the state store has it (`cairn-pg-tls`), and the
//! quoting of names and literals in the statements the types write.

use std::str::FromStr;

use cairn_sdk::serde_json::{json, Map, Value};
use cairn_sdk::{
    serde_json, DeleteRequest, DriftRequest, DriftResult, PropertyDifference, ProviderError,
    ReadRequest, ReadResult, RequestContext,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// The settings this provider reads.
struct Settings {
    url: String,
    password_env: Option<String>,
    password_file: Option<String>,
}

fn settings(ctx: &RequestContext) -> Result<Settings, ProviderError> {
    let s = ctx.provider_settings.as_ref().ok_or_else(|| {
        ProviderError::invalid_request(
            "the PostgreSQL provider needs settings in its [[providers]] entry: settings = { Url = \"postgres://admin@db:5432/postgres\", PasswordEnv = \"PGPASSWORD\" }",
        )
    })?;
    let text = |k: &str| s.get(k).and_then(Value::as_str).map(str::to_string);
    let url = text("Url").ok_or_else(|| {
        ProviderError::invalid_request(
            "the PostgreSQL provider's settings have no Url (postgres://user@host:port/database)",
        )
    })?;
    Ok(Settings {
        url,
        password_env: text("PasswordEnv"),
        password_file: text("PasswordFile"),
    })
}

/// The admin password, from the environment variable or file the settings
/// name.
fn password(s: &Settings) -> Result<Option<String>, ProviderError> {
    if let Some(var) = &s.password_env {
        return std::env::var(var).map(Some).map_err(|_| {
            ProviderError::invalid_request(format!(
                "the PostgreSQL provider's PasswordEnv names {var}, which is not set"
            ))
        });
    }
    if let Some(path) = &s.password_file {
        return std::fs::read_to_string(path)
            .map(|p| Some(p.trim_end_matches(['\n', '\r']).to_string()))
            .map_err(|e| {
                ProviderError::invalid_request(format!(
                    "the PostgreSQL provider cannot read PasswordFile {path}: {e}"
                ))
            });
    }
    Ok(None)
}

/// A connection to the server and database the settings name.
pub async fn connect(ctx: &RequestContext) -> Result<Client, ProviderError> {
    connect_to(ctx, None).await
}

/// A connection to `database` (`None`: the one the settings name) on the
/// server the settings name: schemas and extensions live in a database.
pub async fn connect_to(
    ctx: &RequestContext,
    database: Option<&str>,
) -> Result<Client, ProviderError> {
    let s = settings(ctx)?;
    let env = |k: &str| std::env::var(k).ok();
    let (url, tls) =
        cairn_pg_tls::split(&s.url, env).map_err(|e| ProviderError::invalid_request(e.0))?;
    let mut config = tokio_postgres::Config::from_str(&url).map_err(|e| {
        ProviderError::invalid_request(format!("the PostgreSQL provider's Url is not valid: {e}"))
    })?;
    if let Some(p) = password(&s)? {
        config.password(p);
    }
    if let Some(db) = database {
        config.dbname(db);
    }
    config.ssl_mode(tls.mode.negotiation());
    config.connect_timeout(std::time::Duration::from_secs(10));
    let connector =
        cairn_pg_tls::connector(&tls).map_err(|e| ProviderError::invalid_request(e.0))?;
    let (client, connection) = config.connect(connector).await.map_err(|e| {
        let text = format!("cannot connect to PostgreSQL: {}", db_text(&e));
        match e.code() {
            Some(c) if *c == SqlState::INVALID_CATALOG_NAME => ProviderError::not_found(text),
            _ => ProviderError::internal(text),
        }
    })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The comment an object made by a create carries: a create sent again
/// with the same request id finds it and answers with that object.
pub fn made_by(request_id: &str) -> String {
    format!("made by Cairn request {request_id}")
}

/// The comment on the shared object (`catalog`: `pg_database` or
/// `pg_authid`) called `name`, and whether it exists.
pub async fn comment_on(
    client: &tokio_postgres::Client,
    catalog: &str,
    name: &str,
) -> Result<Option<Option<String>>, ProviderError> {
    let sql = match catalog {
        "pg_database" => {
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1"
        }
        _ => "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1",
    };
    let row = client
        .query_opt(sql, &[&name])
        .await
        .map_err(|e| failed(&format!("cannot read {name}"), &e))?;
    Ok(row.map(|r| r.get::<_, Option<String>>(0)))
}

/// `name` as a quoted identifier.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `text` as a quoted literal (standard_conforming_strings).
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The server's message and detail of `e`.
pub fn db_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => match d.detail() {
            Some(detail) => format!("{} ({detail})", d.message()),
            None => d.message().to_string(),
        },
        None => e.to_string(),
    }
}

/// The SQLSTATE of `e`, if the server sent one.
pub fn state(e: &tokio_postgres::Error) -> Option<&SqlState> {
    e.code()
}

/// A failed statement as a provider error: NotFound and AlreadyExists
/// where the server says so.
pub fn failed(what: &str, e: &tokio_postgres::Error) -> ProviderError {
    let text = format!("{what}: {}", db_text(e));
    match state(e) {
        Some(s) if *s == SqlState::UNDEFINED_DATABASE || *s == SqlState::UNDEFINED_OBJECT => {
            ProviderError::not_found(text)
        }
        Some(s) if *s == SqlState::DUPLICATE_DATABASE || *s == SqlState::DUPLICATE_OBJECT => {
            ProviderError::already_exists(text)
        }
        Some(s) if *s == SqlState::INVALID_PARAMETER_VALUE || *s == SqlState::SYNTAX_ERROR => {
            ProviderError::invalid_request(text)
        }
        _ => ProviderError::internal(text),
    }
}

/// What a catalog row gives every type: its name and OID as attributes.
pub fn attributes(name: &str, oid: u32) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("Name".into(), json!(name));
    m.insert("Oid".into(), json!(oid.to_string()));
    m
}

/// A drift check's verdict: the `expected` properties against the live
/// ones of the same names.
pub fn drift(expected: &Map<String, Value>, live: Map<String, Value>) -> DriftResult {
    let live: Map<String, Value> = live
        .into_iter()
        .filter(|(k, _)| expected.contains_key(k))
        .collect();
    DriftResult::from_differences(PropertyDifference::compare(expected, &live))
}

/// The database and name a physical id `database|name` joins.
pub fn split_id(id: &str) -> Result<(&str, &str), ProviderError> {
    id.split_once('|')
        .ok_or_else(|| ProviderError::invalid_request(format!("{id} is not DATABASE|NAME")))
}

/// A connection to `database`, or `None` when there is no such database
/// (what was in it went with it).
pub async fn connect_if_there(
    ctx: &RequestContext,
    database: &str,
) -> Result<Option<Client>, ProviderError> {
    match connect_to(ctx, Some(database)).await {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Drift of the template's `properties` that the live row shows (what
/// the template leaves out is not drift).
pub fn given_drift(properties: &Map<String, Value>, live: Map<String, Value>) -> DriftResult {
    let expected: Map<String, Value> = properties
        .iter()
        .filter(|(k, _)| live.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    drift(&expected, live)
}

/// A read's answer: the live row of `what` `name`, or NotFound.
pub fn found(
    what: &str,
    name: &str,
    live: Option<(Map<String, Value>, u32)>,
) -> Result<ReadResult, ProviderError> {
    let (properties, oid) =
        live.ok_or_else(|| ProviderError::not_found(format!("{what} {name} does not exist")))?;
    Ok(ReadResult::Found {
        properties,
        attributes: attributes(name, oid),
    })
}

/// The catalog row `sql` finds for `name` (its `$1`) as properties:
/// `sql` answers one JSON object of them (`json_build_object`) and the
/// OID. `None` when there is none.
pub async fn catalog_row(
    client: &Client,
    sql: &str,
    name: &str,
    what: &str,
) -> Result<Option<(Map<String, Value>, u32)>, ProviderError> {
    let row = client
        .query_opt(sql, &[&name])
        .await
        .map_err(|e| failed(&format!("cannot read {what} {name}"), &e))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text: String = row.get(0);
    let properties = serde_json::from_str(&text).map_err(|e| {
        ProviderError::internal(format!(
            "the catalog row of {what} {name} is not an object: {e}"
        ))
    })?;
    Ok(Some((properties, row.get(1))))
}

/// The drift of an object in a database (physical id `DATABASE|NAME`)
/// whose catalog row `sql` reads: DELETED when it or its database is gone.
pub async fn drift_in_database(
    req: &DriftRequest,
    sql: &str,
    what: &str,
) -> Result<DriftResult, ProviderError> {
    let (database, name) = split_id(&req.physical_resource_id)?;
    let Some(client) = connect_if_there(&req.context, database).await? else {
        return Ok(DriftResult::Deleted);
    };
    let Some((actual, _)) = catalog_row(&client, sql, name, what).await? else {
        return Ok(DriftResult::Deleted);
    };
    Ok(given_drift(&req.properties, actual))
}

/// A read of an object in a database (physical id `DATABASE|NAME`) whose
/// catalog row `sql` reads.
pub async fn read_in_database(
    req: &ReadRequest,
    sql: &str,
    what: &str,
) -> Result<ReadResult, ProviderError> {
    let (database, name) = split_id(&req.physical_resource_id)?;
    let client = connect_to(&req.context, Some(database)).await?;
    found(what, name, catalog_row(&client, sql, name, what).await?)
}

/// Drops the object of `kind` (`SCHEMA`, `EXTENSION`) a `DATABASE|NAME`
/// physical id names, with what depends on it when `cascade`; gone
/// already (or its database) is done. Refused for what depends on it, the
/// error ending with `hint`.
pub async fn drop_in_database(
    req: &DeleteRequest,
    kind: &str,
    cascade: bool,
    hint: &str,
) -> Result<(), ProviderError> {
    let (database, name) = split_id(&req.physical_resource_id)?;
    // No database: what was in it went with it.
    let Some(client) = connect_if_there(&req.context, database).await? else {
        return Ok(());
    };
    let cascade = if cascade { " CASCADE" } else { "" };
    let what = format!("{} {name}", kind.to_lowercase());
    match client
        .batch_execute(&format!("DROP {kind} IF EXISTS {}{cascade}", ident(name)))
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if e.code() == Some(&SqlState::DEPENDENT_OBJECTS_STILL_EXIST) => Err(
            ProviderError::internal(format!("cannot drop {what}: {}; {hint}", db_text(&e))),
        ),
        Err(e) => Err(failed(&format!("cannot drop {what}"), &e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_literals_are_quoted() {
        assert_eq!(ident("app\"db"), "\"app\"\"db\"");
        assert_eq!(literal("it's"), "'it''s'");
    }
}
