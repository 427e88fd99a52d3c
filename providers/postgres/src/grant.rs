//! `Cairn::Postgres::Grant`: the privileges a role (or `PUBLIC`) holds on
//! a database, a schema, or tables, sequences, functions or types of a
//! schema (`Objects`, or all of them in the schema when left out).
//! `Privileges`, `WithGrantOption` and `Objects` change in place by the
//! difference (what stays granted is never revoked in between, unlike a
//! revoke-then-grant replacement); `Role`, `Database`, `ObjectType` and
//! `Schema` are create-only. The live privileges come from `aclexplode` of
//! the catalogs' ACLs, an ACL never set read as its default.
//! The physical id is `ROLE|DATABASE|OBJECT_TYPE|SCHEMA` (one Grant per
//! role and schema and type of object: a read finds the objects by what
//! the role holds).

use cairn_sdk::serde_json::{json, Map, Value};
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    PropertyType, ProviderError, ReadRequest, ReadResult, ResourceSchema, UpdateRequest,
    UpdateResult,
};
use serde::Deserialize;
use tokio_postgres::Client;

use crate::connection::{connect_if_there, connect_to, drift, failed};
use crate::privileges::{
    apply, as_written, changes, expect, grantable, grantee_oid, granting_schema, has_maintain,
    id_parts, join_id, ordered, wanted, Held, ObjectKind,
};

pub const TYPE: &str = "Cairn::Postgres::Grant";

#[derive(Deserialize, Clone)]
#[serde(rename_all = "PascalCase")]
struct Grant {
    role: String,
    database: String,
    object_type: String,
    schema: Option<String>,
    #[serde(default)]
    objects: Vec<String>,
    #[serde(default)]
    privileges: Vec<String>,
    #[serde(default)]
    with_grant_option: bool,
}

pub fn schema() -> ResourceSchema {
    granting_schema(
        TYPE,
        "Privileges a PostgreSQL role holds on a database, a schema or objects in one",
        |s| {
            s.property(
                "ObjectType",
                PropertySchema::string()
                    .required()
                    .create_only()
                    .allowing(&[
                        "database", "schema", "table", "sequence", "function", "type",
                    ]),
            )
            .property(
                "Schema",
                PropertySchema::string()
                    .create_only()
                    .describe("the schema granted on, or that holds the objects"),
            )
            .property(
                "Objects",
                PropertySchema::list(PropertyType::String)
                    .describe("the objects by name; left out: every one of the type in the schema"),
            )
            .ref_returns("ROLE|DATABASE|OBJECT_TYPE|SCHEMA")
        },
    )
}

impl Grant {
    fn kind(&self) -> Result<ObjectKind, ProviderError> {
        let kind = ObjectKind::named(&self.object_type)?;
        let schema_named = self.schema.as_deref().is_some_and(|s| !s.is_empty());
        match kind {
            ObjectKind::Database if schema_named || !self.objects.is_empty() => {
                Err(ProviderError::invalid_request(
                    "a grant on a database takes neither Schema nor Objects: Database names it",
                ))
            }
            ObjectKind::Schema if !self.objects.is_empty() => Err(ProviderError::invalid_request(
                "a grant on a schema takes no Objects: Schema names it",
            )),
            ObjectKind::Database => Ok(kind),
            _ if !schema_named => Err(ProviderError::invalid_request(format!(
                "a grant on a {} needs Schema",
                kind.name()
            ))),
            _ => Ok(kind),
        }
    }

    fn id(&self) -> Result<String, ProviderError> {
        let schema = self.schema.as_deref().unwrap_or_default();
        join_id(&[&self.role, &self.database, &self.object_type, schema])
    }

    /// The grant a physical id names: every object of its type in its
    /// schema (its privileges left empty).
    fn of_id(id: &str) -> Result<Grant, ProviderError> {
        let [role, database, object_type, schema] =
            id_parts(id, "ROLE|DATABASE|OBJECT_TYPE|SCHEMA")?;
        Ok(Grant {
            role: role.into(),
            database: database.into(),
            object_type: object_type.into(),
            schema: (!schema.is_empty()).then(|| schema.to_string()),
            objects: Vec::new(),
            privileges: Vec::new(),
            with_grant_option: false,
        })
    }
}

/// One object a grant covers: its name, how a statement names it
/// (`TABLE "s"."t"`), and what the role holds on it.
struct Object {
    name: String,
    on: String,
    held: Held,
}

/// The catalog query listing `kind`'s objects with what grantee `$3`
/// holds on each: `$1` is the database (for a database) or the schema,
/// `$2` the names (empty: all).
fn listing(kind: ObjectKind) -> String {
    let (from, name, on, acl, where_) = match kind {
        ObjectKind::Database => (
            "pg_database",
            "datname",
            "'DATABASE ' || quote_ident(o.datname)",
            "COALESCE(o.datacl, acldefault('d', o.datdba))",
            "o.datname = $1",
        ),
        ObjectKind::Schema => (
            "pg_namespace",
            "nspname",
            "'SCHEMA ' || quote_ident(o.nspname)",
            "COALESCE(o.nspacl, acldefault('n', o.nspowner))",
            "o.nspname = $1",
        ),
        ObjectKind::Table => (
            "pg_class",
            "relname",
            "'TABLE ' || o.oid::regclass::text",
            "COALESCE(o.relacl, acldefault('r', o.relowner))",
            "o.relnamespace = s.oid AND o.relkind IN ('r', 'p', 'v', 'm', 'f')",
        ),
        ObjectKind::Sequence => (
            "pg_class",
            "relname",
            "'SEQUENCE ' || o.oid::regclass::text",
            "COALESCE(o.relacl, acldefault('s', o.relowner))",
            "o.relnamespace = s.oid AND o.relkind = 'S'",
        ),
        ObjectKind::Function => (
            "pg_proc",
            "proname",
            "'ROUTINE ' || o.oid::regprocedure::text",
            "COALESCE(o.proacl, acldefault('f', o.proowner))",
            "o.pronamespace = s.oid",
        ),
        ObjectKind::Type => (
            "pg_type",
            "typname",
            "'TYPE ' || o.oid::regtype::text",
            "COALESCE(o.typacl, acldefault('T', o.typowner))",
            // Not the array types and row types PostgreSQL makes itself.
            "o.typnamespace = s.oid AND o.typtype IN ('b', 'c', 'd', 'e', 'r', 'm') AND NOT EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = o.oid) AND (o.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = o.typrelid) = 'c')",
        ),
    };
    let in_schema = match kind {
        ObjectKind::Database | ObjectKind::Schema => "",
        _ => " JOIN pg_namespace s ON s.nspname = $1",
    };
    format!(
        "SELECT o.{name}::text, {on}, a.privilege_type::text, a.is_grantable
         FROM {from} o{in_schema}
         LEFT JOIN LATERAL (SELECT * FROM aclexplode({acl}) x WHERE x.grantee = $3) a ON true
         WHERE {where_} AND (cardinality($2::text[]) = 0 OR o.{name} = ANY($2))
         ORDER BY 2"
    )
}

/// The objects `g` covers as they are now, with what its role holds.
async fn objects(client: &Client, g: &Grant) -> Result<Vec<Object>, ProviderError> {
    let kind = g.kind()?;
    let scope = match kind {
        ObjectKind::Database => g.database.clone(),
        _ => g.schema.clone().unwrap_or_default(),
    };
    let who = grantee_oid(client, &g.role).await?;
    let rows = client
        .query(&listing(kind), &[&scope, &g.objects, &who])
        .await
        .map_err(|e| failed(&format!("cannot read the privileges of {}", g.role), &e))?;
    let mut out: Vec<Object> = Vec::new();
    for r in rows {
        let on: String = r.get(1);
        if out.last().is_none_or(|o| o.on != on) {
            out.push(Object {
                name: r.get(0),
                on,
                held: Held::new(),
            });
        }
        if let (Some(p), Some(last)) = (r.get::<_, Option<String>>(2), out.last_mut()) {
            let grantable = r.get::<_, Option<bool>>(3).unwrap_or(false);
            last.held.insert(p, grantable);
        }
    }
    Ok(out)
}

/// The objects `g` names that do not exist, as an error naming them.
fn all_there(g: &Grant, found: &[Object]) -> Result<(), ProviderError> {
    let kind = g.kind()?;
    let missing: Vec<&String> = g
        .objects
        .iter()
        .filter(|n| !found.iter().any(|o| &o.name == *n))
        .collect();
    let whole = match kind {
        ObjectKind::Database | ObjectKind::Schema => found.is_empty(),
        _ => false,
    };
    if whole {
        let name = match kind {
            ObjectKind::Database => &g.database,
            _ => g.schema.as_ref().unwrap_or(&g.database),
        };
        return Err(ProviderError::not_found(format!(
            "{} {name} does not exist",
            kind.name()
        )));
    }
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        return Err(ProviderError::invalid_request(format!(
            "no {} {} in schema {} of database {}",
            kind.name(),
            names.join(", "),
            g.schema.as_deref().unwrap_or_default(),
            g.database
        )));
    }
    Ok(())
}

/// Takes what `g`'s role holds to `g`, on its objects, and to nothing on
/// the objects `before` covered that `g` no longer does: one transaction.
async fn converge(client: &Client, g: &Grant, before: Option<&Grant>) -> Result<(), ProviderError> {
    let kind = g.kind()?;
    let maintain = has_maintain(client).await?;
    let want = wanted(kind, &g.privileges, maintain)?;
    let now = objects(client, g).await?;
    all_there(g, &now)?;
    let mut statements = Vec::new();
    for o in &now {
        statements.extend(changes(&want, g.with_grant_option, &o.held, |c, p| {
            c.statement(p, &o.on, &g.role)
        }));
    }
    if let Some(before) = before {
        for o in objects(client, before).await? {
            if !now.iter().any(|n| n.on == o.on) {
                statements.extend(changes(&[], false, &o.held, |c, p| {
                    c.statement(p, &o.on, &before.role)
                }));
            }
        }
    }
    apply(
        client,
        &statements,
        &format!(
            "cannot grant to {} on {} {}",
            g.role,
            kind.name(),
            g.database
        ),
    )
    .await
}

pub async fn create(req: &CreateRequest) -> Result<CreateResult, ProviderError> {
    let g: Grant = req.properties()?;
    let id = g.id()?;
    let client = connect_to(&req.context, Some(&g.database)).await?;
    converge(&client, &g, None).await?;
    Ok(CreateResult {
        physical_resource_id: id,
        attributes: Map::new(),
        no_echo: false,
    })
}

pub async fn update(req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
    let g: Grant = req.properties()?;
    let before: Grant = req.old_properties()?;
    let id = g.id()?;
    let client = connect_to(&req.context, Some(&g.database)).await?;
    converge(&client, &g, Some(&before)).await?;
    Ok(UpdateResult {
        physical_resource_id: (id != req.physical_resource_id).then_some(id),
        attributes: Map::new(),
        no_echo: false,
    })
}

pub async fn delete(req: &DeleteRequest) -> Result<(), ProviderError> {
    let g: Grant = req.properties()?;
    // No database: what was granted in it went with it.
    let Some(client) = connect_if_there(&req.context, &g.database).await? else {
        return Ok(());
    };
    let kind = g.kind()?;
    let now = objects(&client, &g).await?;
    let mut statements = Vec::new();
    for o in &now {
        statements.extend(changes(&[], false, &o.held, |c, p| {
            c.statement(p, &o.on, &g.role)
        }));
    }
    apply(
        &client,
        &statements,
        &format!(
            "cannot revoke from {} on {} {}",
            g.role,
            kind.name(),
            g.database
        ),
    )
    .await
}

/// What the role holds, as a template would write it: one list when every
/// object has the same, else each object's.
fn held_as_written(kind: ObjectKind, now: &[Object], maintain: bool) -> Value {
    let lists: Vec<Vec<String>> = now
        .iter()
        .map(|o| as_written(kind, &ordered(kind, &o.held, maintain), maintain))
        .collect();
    match lists.first() {
        Some(first) if lists.iter().any(|l| l != first) => Value::Object(
            now.iter()
                .zip(lists)
                .map(|(o, l)| (o.name.clone(), json!(l)))
                .collect(),
        ),
        Some(first) => json!(first),
        None => json!([]),
    }
}

/// The grant as it is, in the template's terms; `None` when its database,
/// schema or role is gone. `maintain`: [`has_maintain`], asked once per call.
async fn live(
    client: &Client,
    g: &Grant,
    maintain: bool,
) -> Result<Option<(Map<String, Value>, Vec<Object>)>, ProviderError> {
    let kind = g.kind()?;
    if grantee_oid(client, &g.role).await?.is_none() {
        return Ok(None);
    }
    let now = objects(client, g).await?;
    if matches!(kind, ObjectKind::Database | ObjectKind::Schema) && now.is_empty() {
        return Ok(None);
    }
    let mut m = Map::new();
    m.insert("Role".into(), json!(g.role));
    m.insert("Database".into(), json!(g.database));
    m.insert("ObjectType".into(), json!(g.object_type));
    if let Some(s) = &g.schema {
        m.insert("Schema".into(), json!(s));
    }
    if !g.objects.is_empty() {
        let there: Vec<&str> = g
            .objects
            .iter()
            .filter(|n| now.iter().any(|o| &o.name == *n))
            .map(String::as_str)
            .collect();
        m.insert("Objects".into(), json!(there));
    }
    m.insert("Privileges".into(), held_as_written(kind, &now, maintain));
    let all_grantable = !now.is_empty() && now.iter().all(|o| grantable(&o.held));
    m.insert("WithGrantOption".into(), json!(all_grantable));
    Ok(Some((m, now)))
}

pub async fn check_drift(req: &DriftRequest) -> Result<DriftResult, ProviderError> {
    let g: Grant = req.properties()?;
    let Some(client) = connect_if_there(&req.context, &g.database).await? else {
        return Ok(DriftResult::Deleted);
    };
    let maintain = has_maintain(&client).await?;
    let Some((actual, now)) = live(&client, &g, maintain).await? else {
        return Ok(DriftResult::Deleted);
    };
    let kind = g.kind()?;
    let want = wanted(kind, &g.privileges, maintain)?;
    // Nothing held anywhere (revoked by hand, or deleted): the grant is gone.
    if !want.is_empty() && !now.is_empty() && now.iter().all(|o| o.held.is_empty()) {
        return Ok(DriftResult::Deleted);
    }
    let mut expected = Map::new();
    if !g.objects.is_empty() {
        expected.insert("Objects".into(), json!(g.objects));
    }
    // Objects of the schema with nothing to hold: nothing to compare.
    if !now.is_empty() {
        expect(&mut expected, kind, &want, maintain, g.with_grant_option);
    }
    Ok(drift(&expected, actual))
}

pub async fn read(req: &ReadRequest) -> Result<ReadResult, ProviderError> {
    let g = Grant::of_id(&req.physical_resource_id)?;
    let gone =
        || ProviderError::not_found(format!("grant {} does not exist", req.physical_resource_id));
    let Some(client) = connect_if_there(&req.context, &g.database).await? else {
        return Err(gone());
    };
    let maintain = has_maintain(&client).await?;
    let Some((mut properties, now)) = live(&client, &g, maintain).await? else {
        return Err(gone());
    };
    if now.iter().all(|o| o.held.is_empty()) {
        return Err(gone());
    }
    // The objects are what the role holds something on, and the
    // privileges what it holds on them.
    let kind = g.kind()?;
    if !matches!(kind, ObjectKind::Database | ObjectKind::Schema) {
        let holding: Vec<Object> = now.into_iter().filter(|o| !o.held.is_empty()).collect();
        let mut names: Vec<&str> = holding.iter().map(|o| o.name.as_str()).collect();
        names.sort();
        names.dedup();
        properties.insert("Objects".into(), json!(names));
        properties.insert(
            "Privileges".into(),
            held_as_written(kind, &holding, maintain),
        );
    }
    Ok(ReadResult::Found {
        properties,
        attributes: Map::new(),
    })
}
