//! `Cairn::Postgres::DefaultPrivileges`: what a role (or `PUBLIC`) is
//! granted on the tables, sequences, functions, types or schemas `Owner`
//! makes from now on in a database (in one schema, or everywhere when
//! `Schema` is left out): `ALTER DEFAULT PRIVILEGES`. `Privileges` and
//! `WithGrantOption` change in place by the difference; the rest is
//! create-only. The live value is `aclexplode` of `pg_default_acl`, where
//! no row means PostgreSQL's defaults (everywhere) or nothing added (in a
//! schema). The physical id is `ROLE|DATABASE|OWNER|SCHEMA|OBJECT_TYPE`.

use cairn_sdk::serde_json::{json, Map, Value};
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    ProviderError, ReadRequest, ReadResult, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde::Deserialize;
use tokio_postgres::Client;

use crate::connection::{connect_if_there, connect_to, drift, failed, ident};
use crate::privileges::{
    apply, as_written, changes, expect, grantable, grantee_oid, granting_schema, has_maintain,
    id_parts, join_id, ordered, wanted, Held, ObjectKind,
};

pub const TYPE: &str = "Cairn::Postgres::DefaultPrivileges";

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Defaults {
    role: String,
    database: String,
    owner: String,
    schema: Option<String>,
    object_type: String,
    #[serde(default)]
    privileges: Vec<String>,
    #[serde(default)]
    with_grant_option: bool,
}

pub fn schema() -> ResourceSchema {
    granting_schema(
        TYPE,
        "Privileges a PostgreSQL role is granted on what another role makes from now on",
        |s| {
            s.property(
                "Owner",
                PropertySchema::string()
                    .required()
                    .create_only()
                    .describe("the role whose new objects these privileges are on"),
            )
            .property(
                "Schema",
                PropertySchema::string()
                    .create_only()
                    .describe("only objects made in this schema; left out: everywhere"),
            )
            .property(
                "ObjectType",
                PropertySchema::string()
                    .required()
                    .create_only()
                    .allowing(&["table", "sequence", "function", "type", "schema"]),
            )
            .ref_returns("ROLE|DATABASE|OWNER|SCHEMA|OBJECT_TYPE")
        },
    )
}

impl Defaults {
    /// The kind of object, and its codes in `pg_default_acl` and for
    /// `acldefault`, and the keyword `ALTER DEFAULT PRIVILEGES` takes.
    fn kind(&self) -> Result<(ObjectKind, char, char, &'static str), ProviderError> {
        let kind = ObjectKind::named(&self.object_type)?;
        let in_schema = self.schema.as_deref().is_some_and(|s| !s.is_empty());
        Ok(match kind {
            ObjectKind::Table => (kind, 'r', 'r', "TABLES"),
            ObjectKind::Sequence => (kind, 'S', 's', "SEQUENCES"),
            ObjectKind::Function => (kind, 'f', 'f', "FUNCTIONS"),
            ObjectKind::Type => (kind, 'T', 'T', "TYPES"),
            ObjectKind::Schema if !in_schema => (kind, 'n', 'n', "SCHEMAS"),
            ObjectKind::Schema => {
                return Err(ProviderError::invalid_request(
                    "default privileges on schemas take no Schema",
                ))
            }
            ObjectKind::Database => {
                return Err(ProviderError::invalid_request(
                    "ObjectType database has no default privileges: use Cairn::Postgres::Grant",
                ))
            }
        })
    }

    fn id(&self) -> Result<String, ProviderError> {
        let schema = self.schema.as_deref().unwrap_or_default();
        join_id(&[
            &self.role,
            &self.database,
            &self.owner,
            schema,
            &self.object_type,
        ])
    }

    fn of_id(id: &str) -> Result<Defaults, ProviderError> {
        let [role, database, owner, schema, object_type] =
            id_parts(id, "ROLE|DATABASE|OWNER|SCHEMA|OBJECT_TYPE")?;
        Ok(Defaults {
            role: role.into(),
            database: database.into(),
            owner: owner.into(),
            schema: (!schema.is_empty()).then(|| schema.to_string()),
            object_type: object_type.into(),
            privileges: Vec::new(),
            with_grant_option: false,
        })
    }

    /// The statement's start: `ALTER DEFAULT PRIVILEGES FOR ROLE o [IN
    /// SCHEMA s]`.
    fn alter(&self) -> String {
        match &self.schema {
            Some(s) => format!(
                "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA {} ",
                ident(&self.owner),
                ident(s)
            ),
            None => format!("ALTER DEFAULT PRIVILEGES FOR ROLE {} ", ident(&self.owner)),
        }
    }
}

/// What the role is granted by default now, and what PostgreSQL would
/// grant it with no `ALTER DEFAULT PRIVILEGES` at all (something only
/// everywhere, for the owner itself or PUBLIC); `None` when the owner, the
/// role or the schema is gone.
async fn held(client: &Client, d: &Defaults) -> Result<Option<(Held, Held)>, ProviderError> {
    let (_, objtype, default_code, _) = d.kind()?;
    let Some(owner) = grantee_oid(client, &d.owner).await? else {
        return Ok(None);
    };
    let Some(who) = grantee_oid(client, &d.role).await? else {
        return Ok(None);
    };
    let namespace: u32 = match &d.schema {
        None => 0,
        Some(s) => {
            let row = client
                .query_opt("SELECT oid FROM pg_namespace WHERE nspname = $1", &[s])
                .await
                .map_err(|e| failed(&format!("cannot read schema {s}"), &e))?;
            match row {
                Some(r) => r.get(0),
                None => return Ok(None),
            }
        }
    };
    let builtin = format!("CASE WHEN $2 = 0 THEN acldefault('{default_code}', $1) ELSE NULL END");
    // No row: the built-in defaults.
    let sql = format!(
        "SELECT a.privilege_type::text, a.is_grantable, false FROM aclexplode(COALESCE(
            (SELECT defaclacl FROM pg_default_acl
             WHERE defaclrole = $1 AND defaclnamespace = $2 AND defaclobjtype = '{objtype}'),
            {builtin})) a WHERE a.grantee = $3
         UNION ALL
         SELECT a.privilege_type::text, a.is_grantable, true FROM aclexplode({builtin}) a
         WHERE a.grantee = $3"
    );
    let rows = client
        .query(&sql, &[&owner, &namespace, &who])
        .await
        .map_err(|e| {
            failed(
                &format!("cannot read the default privileges of {}", d.owner),
                &e,
            )
        })?;
    let (mut now, mut builtin) = (Held::new(), Held::new());
    for r in rows {
        let into = if r.get::<_, bool>(2) {
            &mut builtin
        } else {
            &mut now
        };
        into.insert(r.get(0), r.get(1));
    }
    Ok(Some((now, builtin)))
}

/// Takes the defaults to `d`'s privileges (`None`: back to PostgreSQL's
/// own).
async fn converge(
    client: &Client,
    d: &Defaults,
    to: Option<&Defaults>,
) -> Result<(), ProviderError> {
    let (kind, _, _, keyword) = d.kind()?;
    let maintain = has_maintain(client).await?;
    let Some((now, builtin)) = held(client, d).await? else {
        if to.is_none() {
            return Ok(());
        }
        return Err(ProviderError::not_found(format!(
            "role {} or {}, or schema {}, does not exist in database {}",
            d.owner,
            d.role,
            d.schema.as_deref().unwrap_or("-"),
            d.database
        )));
    };
    let (want, option) = match to {
        Some(t) => (wanted(kind, &t.privileges, maintain)?, t.with_grant_option),
        None => (ordered(kind, &builtin, maintain), false),
    };
    let alter = d.alter();
    let statements: Vec<String> = changes(&want, option, &now, |c, p| {
        format!("{alter}{}", c.statement(p, keyword, &d.role))
    });
    apply(
        client,
        &statements,
        &format!(
            "cannot change the default privileges of {} for {}",
            d.owner, d.role
        ),
    )
    .await
}

pub async fn create(req: &CreateRequest) -> Result<CreateResult, ProviderError> {
    let d: Defaults = req.properties()?;
    let id = d.id()?;
    let client = connect_to(&req.context, Some(&d.database)).await?;
    converge(&client, &d, Some(&d)).await?;
    Ok(CreateResult {
        physical_resource_id: id,
        attributes: Map::new(),
        no_echo: false,
    })
}

pub async fn update(req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
    let d: Defaults = req.properties()?;
    let client = connect_to(&req.context, Some(&d.database)).await?;
    converge(&client, &d, Some(&d)).await?;
    Ok(UpdateResult {
        physical_resource_id: None,
        attributes: Map::new(),
        no_echo: false,
    })
}

pub async fn delete(req: &DeleteRequest) -> Result<(), ProviderError> {
    let d: Defaults = req.properties()?;
    let Some(client) = connect_if_there(&req.context, &d.database).await? else {
        return Ok(());
    };
    converge(&client, &d, None).await
}

/// The defaults as they are, in the template's terms.
async fn live(
    client: &Client,
    d: &Defaults,
    maintain: bool,
) -> Result<Option<(Map<String, Value>, (Held, Held))>, ProviderError> {
    let (kind, ..) = d.kind()?;
    let Some((now, builtin)) = held(client, d).await? else {
        return Ok(None);
    };
    let mut m = Map::new();
    m.insert("Role".into(), json!(d.role));
    m.insert("Database".into(), json!(d.database));
    m.insert("Owner".into(), json!(d.owner));
    if let Some(s) = &d.schema {
        m.insert("Schema".into(), json!(s));
    }
    m.insert("ObjectType".into(), json!(d.object_type));
    m.insert(
        "Privileges".into(),
        json!(as_written(kind, &ordered(kind, &now, maintain), maintain)),
    );
    m.insert("WithGrantOption".into(), json!(grantable(&now)));
    Ok(Some((m, (now, builtin))))
}

pub async fn check_drift(req: &DriftRequest) -> Result<DriftResult, ProviderError> {
    let d: Defaults = req.properties()?;
    let Some(client) = connect_if_there(&req.context, &d.database).await? else {
        return Ok(DriftResult::Deleted);
    };
    let maintain = has_maintain(&client).await?;
    let Some((actual, (now, builtin))) = live(&client, &d, maintain).await? else {
        return Ok(DriftResult::Deleted);
    };
    let (kind, ..) = d.kind()?;
    let want = wanted(kind, &d.privileges, maintain)?;
    // Back to PostgreSQL's own (deleted, or undone by hand): gone.
    if now == builtin && want != ordered(kind, &builtin, maintain) {
        return Ok(DriftResult::Deleted);
    }
    let mut expected = Map::new();
    expect(&mut expected, kind, &want, maintain, d.with_grant_option);
    Ok(drift(&expected, actual))
}

pub async fn read(req: &ReadRequest) -> Result<ReadResult, ProviderError> {
    let d = Defaults::of_id(&req.physical_resource_id)?;
    let gone = || {
        ProviderError::not_found(format!(
            "default privileges {} do not exist",
            req.physical_resource_id
        ))
    };
    let Some(client) = connect_if_there(&req.context, &d.database).await? else {
        return Err(gone());
    };
    let maintain = has_maintain(&client).await?;
    match live(&client, &d, maintain).await? {
        Some((properties, (now, builtin))) if now != builtin => Ok(ReadResult::Found {
            properties,
            attributes: Map::new(),
        }),
        _ => Err(gone()),
    }
}
