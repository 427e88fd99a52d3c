//! `Cairn::Postgres::Role`: a role. Every property changes in place:
//! `Name` by a rename (the physical id follows), the flags and limits by
//! `ALTER ROLE`, `MemberOf` by granting and revoking the difference.
//! `Password` is sent, never read back or compared (give it from a NoEcho
//! parameter). A role that owns objects is dropped only when told what to
//! do with them, in every database (ownership is per database):
//! `ReassignOwnedTo: ROLE` gives them to that role (`REASSIGN OWNED`),
//! `DropOwnedOnDelete: true` drops them (`DROP OWNED`); either way its
//! privileges go too. Otherwise the delete fails naming what it owns.

use cairn_sdk::serde_json::{json, Map, Value};
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    PropertyType, ProviderError, ReadRequest, ReadResult, RequestContext, ResourceSchema,
    UpdateRequest, UpdateResult,
};
use serde::Deserialize;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::connection::{
    attributes, catalog_row, comment_on, connect, connect_if_there, db_text, drift, failed, found,
    ident, literal, made_by,
};

pub const TYPE: &str = "Cairn::Postgres::Role";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Role {
    name: String,
    #[serde(default)]
    login: bool,
    password: Option<String>,
    #[serde(default = "yes")]
    inherit: bool,
    #[serde(default)]
    create_db: bool,
    #[serde(default)]
    create_role: bool,
    connection_limit: Option<i64>,
    valid_until: Option<String>,
    #[serde(default)]
    member_of: Vec<String>,
    #[serde(default)]
    drop_owned_on_delete: bool,
    reassign_owned_to: Option<String>,
}

fn yes() -> bool {
    true
}

impl Role {
    /// The role's options, as CREATE ROLE and ALTER ROLE take them.
    fn options(&self) -> String {
        let flag = |on: bool, name: &str| {
            if on {
                name.to_string()
            } else {
                format!("NO{name}")
            }
        };
        let mut o = vec![
            flag(self.login, "LOGIN"),
            flag(self.inherit, "INHERIT"),
            flag(self.create_db, "CREATEDB"),
            flag(self.create_role, "CREATEROLE"),
            format!("CONNECTION LIMIT {}", self.connection_limit.unwrap_or(-1)),
            format!(
                "VALID UNTIL {}",
                literal(self.valid_until.as_deref().unwrap_or("infinity"))
            ),
        ];
        if let Some(p) = &self.password {
            o.push(format!("PASSWORD {}", literal(p)));
        }
        o.join(" ")
    }
}

pub fn schema() -> ResourceSchema {
    ResourceSchema::new(TYPE)
        .describe("A PostgreSQL role")
        .property("Name", PropertySchema::string().required())
        .property("Login", PropertySchema::boolean())
        .property(
            "Password",
            PropertySchema::string()
                .describe("sent to the server, never read back (use a NoEcho parameter)"),
        )
        .property("Inherit", PropertySchema::boolean())
        .property("CreateDb", PropertySchema::boolean())
        .property("CreateRole", PropertySchema::boolean())
        .property("ConnectionLimit", PropertySchema::integer())
        .property("ValidUntil", PropertySchema::string())
        .property("MemberOf", PropertySchema::list(PropertyType::String))
        .property(
            "DropOwnedOnDelete",
            PropertySchema::boolean()
                .describe("drop what the role owns, in every database (DROP OWNED), before the role"),
        )
        .property(
            "ReassignOwnedTo",
            PropertySchema::string().describe(
                "give what the role owns, in every database, to this role (REASSIGN OWNED) before dropping it",
            ),
        )
        .attribute("Name", "the role's name")
        .attribute("Oid", "the role's OID")
        .identified_by(&["Name"])
        .ref_returns("the role's name")
}

/// The role's catalog row as properties, or `None` when there is none.
async fn live(
    client: &Client,
    name: &str,
) -> Result<Option<(Map<String, Value>, u32)>, ProviderError> {
    catalog_row(
        client,
        "SELECT json_build_object('Name', r.rolname, 'Login', r.rolcanlogin, 'Inherit', r.rolinherit,
                'CreateDb', r.rolcreatedb, 'CreateRole', r.rolcreaterole, 'ConnectionLimit', r.rolconnlimit,
                'ValidUntil', COALESCE(to_char(r.rolvaliduntil AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), 'infinity'),
                'MemberOf', ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                                  WHERE m.member = r.oid ORDER BY g.rolname))::text, r.oid
         FROM pg_roles r WHERE r.rolname = $1",
        name,
        "role",
    )
    .await
}

async fn made(client: &Client, name: &str) -> Result<Map<String, Value>, ProviderError> {
    let (_, oid) = live(client, name).await?.ok_or_else(|| {
        ProviderError::internal(format!("role {name} is gone right after it was made"))
    })?;
    Ok(attributes(name, oid))
}

pub async fn create(req: &CreateRequest) -> Result<CreateResult, ProviderError> {
    let r: Role = req.properties()?;
    let client = connect(&req.context).await?;
    let mut sql = format!("CREATE ROLE {} WITH {}", ident(&r.name), r.options());
    if !r.member_of.is_empty() {
        let groups: Vec<String> = r.member_of.iter().map(|g| ident(g)).collect();
        sql.push_str(&format!(" IN ROLE {}", groups.join(", ")));
    }
    // The role and its mark in one transaction.
    let marker = made_by(&req.context.request_id);
    let marked = format!(
        "BEGIN; {sql}; COMMENT ON ROLE {} IS {}; COMMIT",
        ident(&r.name),
        literal(&marker)
    );
    if let Err(e) = client.batch_execute(&marked).await {
        let _ = client.batch_execute("ROLLBACK").await;
        // Made by this request already (sent again): that role.
        let again = e.code() == Some(&SqlState::DUPLICATE_OBJECT)
            && comment_on(&client, "pg_authid", &r.name).await? == Some(Some(marker));
        if !again {
            return Err(failed(&format!("cannot create role {}", r.name), &e));
        }
    }
    Ok(CreateResult {
        physical_resource_id: r.name.clone(),
        attributes: made(&client, &r.name).await?,
        no_echo: false,
    })
}

/// Brings role `name` (already called `r.name`) to `r`'s options and
/// memberships.
async fn converge(client: &Client, r: &Role, name: &str) -> Result<(), ProviderError> {
    client
        .batch_execute(&format!("ALTER ROLE {} WITH {}", ident(name), r.options()))
        .await
        .map_err(|e| failed(&format!("cannot change role {name}"), &e))?;
    let (current, _) = live(client, name)
        .await?
        .ok_or_else(|| ProviderError::not_found(format!("role {name} does not exist")))?;
    let now: Vec<String> = current["MemberOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(str::to_string))
        .collect();
    for g in r.member_of.iter().filter(|g| !now.contains(g)) {
        client
            .batch_execute(&format!("GRANT {} TO {}", ident(g), ident(name)))
            .await
            .map_err(|e| failed(&format!("cannot make role {name} a member of {g}"), &e))?;
    }
    for g in now.iter().filter(|g| !r.member_of.contains(g)) {
        client
            .batch_execute(&format!("REVOKE {} FROM {}", ident(g), ident(name)))
            .await
            .map_err(|e| failed(&format!("cannot take role {name} out of {g}"), &e))?;
    }
    Ok(())
}

pub async fn update(req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
    let r: Role = req.properties()?;
    let client = connect(&req.context).await?;
    let old = &req.physical_resource_id;
    if &r.name != old {
        client
            .batch_execute(&format!(
                "ALTER ROLE {} RENAME TO {}",
                ident(old),
                ident(&r.name)
            ))
            .await
            .map_err(|e| failed(&format!("cannot rename role {old} to {}", r.name), &e))?;
    }
    converge(&client, &r, &r.name).await?;
    Ok(UpdateResult {
        physical_resource_id: (&r.name != old).then(|| r.name.clone()),
        attributes: made(&client, &r.name).await?,
        no_echo: false,
    })
}

pub async fn delete(req: &DeleteRequest) -> Result<(), ProviderError> {
    let r: Role = req.properties()?;
    let name = &req.physical_resource_id;
    let client = connect(&req.context).await?;
    if live(&client, name).await?.is_none() {
        return Ok(());
    }
    if r.drop_owned_on_delete || r.reassign_owned_to.is_some() {
        clear_out(&req.context, &client, name, r.reassign_owned_to.as_deref()).await?;
    }
    match client
        .batch_execute(&format!("DROP ROLE {}", ident(name)))
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_OBJECT) => Ok(()),
        Err(e) if e.code() == Some(&SqlState::DEPENDENT_OBJECTS_STILL_EXIST) => {
            Err(ProviderError::internal(format!(
                "cannot drop role {name}: {}; set ReassignOwnedTo: ROLE or DropOwnedOnDelete: true",
                db_text(&e)
            )))
        }
        Err(e) => Err(failed(&format!("cannot drop role {name}"), &e)),
    }
}

/// In every database where `name` owns something or holds a privilege
/// (`pg_shdepend` says which), and in the provider's own (for what is
/// shared, such as databases): what it owns given to `to` (`REASSIGN
/// OWNED`), then what it still owns and its privileges dropped (`DROP
/// OWNED`), one transaction per database. Only those databases: a
/// connection to every one would hold off a `DROP DATABASE` elsewhere.
async fn clear_out(
    ctx: &RequestContext,
    client: &Client,
    name: &str,
    to: Option<&str>,
) -> Result<(), ProviderError> {
    let rows = client
        .query(
            "SELECT d.datname::text FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid
             WHERE s.refclassid = 'pg_authid'::regclass AND d.datallowconn
               AND s.refobjid = (SELECT oid FROM pg_roles WHERE rolname = $1)
             UNION SELECT current_database()::text ORDER BY 1",
            &[&name],
        )
        .await
        .map_err(|e| failed("cannot list the databases", &e))?;
    let reassign = match to {
        Some(to) => format!("REASSIGN OWNED BY {} TO {}; ", ident(name), ident(to)),
        None => String::new(),
    };
    let sql = format!("BEGIN; {reassign}DROP OWNED BY {}; COMMIT", ident(name));
    for row in rows {
        let database: String = row.get(0);
        let mut attempt = 1;
        loop {
            // Dropped meanwhile: nothing of the role's is left there.
            let Some(there) = connect_if_there(ctx, &database).await? else {
                break;
            };
            match there.batch_execute(&sql).await {
                Ok(()) => break,
                // Its sessions were ended (a database being dropped at the
                // same time, as a stack's delete does with a database and a
                // role that do not depend on each other): connect again, to
                // find it gone or to clear it out.
                Err(e) if ended_by_the_server(&e) && attempt < CLEAR_OUT_ATTEMPTS => {
                    attempt += 1;
                }
                Err(e) => {
                    let _ = there.batch_execute("ROLLBACK").await;
                    return Err(failed(
                        &format!("cannot clear out what role {name} owns in database {database}"),
                        &e,
                    ));
                }
            }
        }
    }
    Ok(())
}

/// How often a database is connected to again when the server ends the
/// session clearing it out.
const CLEAR_OUT_ATTEMPTS: u32 = 3;

/// Whether the server ended the session (`pg_terminate_backend`, a
/// shutdown): the statement may be sent again on a new connection.
fn ended_by_the_server(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.code() == Some(&SqlState::ADMIN_SHUTDOWN)
        || e.code() == Some(&SqlState::CRASH_SHUTDOWN)
}

pub async fn check_drift(req: &DriftRequest) -> Result<DriftResult, ProviderError> {
    let client = connect(&req.context).await?;
    let Some((actual, _)) = live(&client, &req.physical_resource_id).await? else {
        return Ok(DriftResult::Deleted);
    };
    // What the template sets, as the catalog shows it (defaults included:
    // a flag the template leaves out is still the role's).
    let r: Role = serde_json::from_value(Value::Object(req.properties.clone()))
        .map_err(|e| ProviderError::invalid_request(format!("the role's properties: {e}")))?;
    let mut expected = Map::new();
    expected.insert("Name".into(), json!(r.name));
    expected.insert("Login".into(), json!(r.login));
    expected.insert("Inherit".into(), json!(r.inherit));
    expected.insert("CreateDb".into(), json!(r.create_db));
    expected.insert("CreateRole".into(), json!(r.create_role));
    expected.insert(
        "ConnectionLimit".into(),
        json!(r.connection_limit.unwrap_or(-1)),
    );
    if let Some(v) = &r.valid_until {
        expected.insert("ValidUntil".into(), json!(v));
    }
    let mut groups = r.member_of.clone();
    groups.sort();
    expected.insert("MemberOf".into(), json!(groups));
    Ok(drift(&expected, actual))
}

pub async fn read(req: &ReadRequest) -> Result<ReadResult, ProviderError> {
    let client = connect(&req.context).await?;
    let name = &req.physical_resource_id;
    found("role", name, live(&client, name).await?)
}
