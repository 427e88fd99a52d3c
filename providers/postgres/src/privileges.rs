//! Privileges as Grant and DefaultPrivileges hold them: the names each
//! kind of object takes (`ALL` spelled out, so drift compares like with
//! like), what a role holds now (from `aclexplode`, an ACL that was never
//! set read as its default), and the statements that take what is held to
//! what is wanted: only the difference is granted or revoked, so access
//! that stays is never taken away in between.

use std::collections::BTreeMap;

use cairn_sdk::serde_json;
use cairn_sdk::{PropertySchema, PropertyType, ProviderError, ResourceSchema};
use tokio_postgres::Client;

use crate::connection::{failed, ident};

/// The kinds of object privileges are granted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Database,
    Schema,
    Table,
    Sequence,
    Function,
    Type,
}

impl ObjectKind {
    /// The kind a template names (`table`, `sequence`, …).
    pub fn named(name: &str) -> Result<ObjectKind, ProviderError> {
        Ok(match name {
            "database" => ObjectKind::Database,
            "schema" => ObjectKind::Schema,
            "table" => ObjectKind::Table,
            "sequence" => ObjectKind::Sequence,
            "function" => ObjectKind::Function,
            "type" => ObjectKind::Type,
            other => {
                return Err(ProviderError::invalid_request(format!(
                    "ObjectType {other} is not one of database, schema, table, sequence, function, type"
                )))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Database => "database",
            ObjectKind::Schema => "schema",
            ObjectKind::Table => "table",
            ObjectKind::Sequence => "sequence",
            ObjectKind::Function => "function",
            ObjectKind::Type => "type",
        }
    }

    /// Every privilege the kind takes, in the order PostgreSQL lists them.
    /// `maintain`: the server has MAINTAIN on tables (17 and later), which
    /// `ALL` then includes.
    fn all(self, maintain: bool) -> Vec<&'static str> {
        match self {
            ObjectKind::Database => vec!["CREATE", "CONNECT", "TEMPORARY"],
            ObjectKind::Schema => vec!["USAGE", "CREATE"],
            ObjectKind::Table => {
                let mut all = vec![
                    "SELECT",
                    "INSERT",
                    "UPDATE",
                    "DELETE",
                    "TRUNCATE",
                    "REFERENCES",
                    "TRIGGER",
                ];
                if maintain {
                    all.push("MAINTAIN");
                }
                all
            }
            ObjectKind::Sequence => vec!["USAGE", "SELECT", "UPDATE"],
            ObjectKind::Function => vec!["EXECUTE"],
            ObjectKind::Type => vec!["USAGE"],
        }
    }
}

/// A grant-like type's schema: `Role` and `Database` (create-only) first,
/// then the type's own (`between`), then `Privileges` and
/// `WithGrantOption` (in place).
pub fn granting_schema(
    type_name: &str,
    description: &str,
    between: impl FnOnce(ResourceSchema) -> ResourceSchema,
) -> ResourceSchema {
    let start = ResourceSchema::new(type_name)
        .describe(description)
        .property(
            "Role",
            PropertySchema::string()
                .required()
                .create_only()
                .describe("the role granted to, or PUBLIC"),
        )
        .property(
            "Database",
            PropertySchema::string().required().create_only(),
        );
    between(start)
        .property(
            "Privileges",
            PropertySchema::list(PropertyType::String)
                .required()
                .describe("SELECT, INSERT, … or ALL; an empty list grants none"),
        )
        .property("WithGrantOption", PropertySchema::boolean())
}

/// A physical id of `parts` joined with `|`; a name holding `|` is
/// refused (the id could not be read back).
pub fn join_id(parts: &[&str]) -> Result<String, ProviderError> {
    if let Some(bad) = parts.iter().find(|p| p.contains('|')) {
        return Err(ProviderError::invalid_request(format!(
            "{bad}: a name in a grant or default privileges cannot hold |"
        )));
    }
    Ok(parts.join("|"))
}

/// The `N` parts of physical id `id`, shaped `shape`.
pub fn id_parts<'a, const N: usize>(
    id: &'a str,
    shape: &str,
) -> Result<[&'a str; N], ProviderError> {
    let parts: Vec<&str> = id.split('|').collect();
    parts
        .try_into()
        .map_err(|_| ProviderError::invalid_request(format!("{id} is not {shape}")))
}

/// What a drift check expects of `Privileges` and `WithGrantOption`
/// (the option only when something is to be held), added to `expected`.
pub fn expect(
    expected: &mut serde_json::Map<String, serde_json::Value>,
    kind: ObjectKind,
    want: &[&str],
    maintain: bool,
    with_grant_option: bool,
) {
    expected.insert(
        "Privileges".into(),
        serde_json::json!(as_written(kind, want, maintain)),
    );
    if !want.is_empty() {
        expected.insert("WithGrantOption".into(), with_grant_option.into());
    }
}

/// Whether the server knows MAINTAIN (PostgreSQL 17 and later).
pub async fn has_maintain(client: &Client) -> Result<bool, ProviderError> {
    let row = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map_err(|e| failed("cannot read the server's version", &e))?;
    Ok(row.get::<_, i32>(0) >= 170000)
}

/// The privileges `given` names for `kind`, upper-cased, `ALL` and `TEMP`
/// spelled out, in PostgreSQL's order; a privilege the kind does not take
/// is refused naming those it does.
pub fn wanted(
    kind: ObjectKind,
    given: &[String],
    maintain: bool,
) -> Result<Vec<&'static str>, ProviderError> {
    let all = kind.all(maintain);
    let mut names: Vec<String> = Vec::new();
    for g in given {
        let g = g.trim().to_uppercase();
        match g.as_str() {
            "ALL" | "ALL PRIVILEGES" => names.extend(all.iter().map(|p| p.to_string())),
            "TEMP" => names.push("TEMPORARY".into()),
            _ => names.push(g),
        }
    }
    if let Some(bad) = names.iter().find(|n| !all.contains(&n.as_str())) {
        return Err(ProviderError::invalid_request(format!(
            "{bad} is not a privilege on a {}: it takes {} (or ALL)",
            kind.name(),
            all.join(", ")
        )));
    }
    Ok(all
        .into_iter()
        .filter(|p| names.iter().any(|n| n == p))
        .collect())
}

/// `wanted` as a template would write it back: `ALL` when it is all of
/// several (a kind with one privilege, such as a function's EXECUTE, keeps
/// its name).
pub fn as_written(kind: ObjectKind, held: &[&str], maintain: bool) -> Vec<String> {
    let all = kind.all(maintain).len();
    if all > 1 && held.len() == all {
        return vec!["ALL".into()];
    }
    held.iter().map(|p| p.to_string()).collect()
}

/// What a role holds on one object: each privilege and whether it may
/// grant it on.
pub type Held = BTreeMap<String, bool>;

/// The role a grant is to: a role's name, or `PUBLIC` (everyone).
pub fn grantee(role: &str) -> String {
    if role.eq_ignore_ascii_case("public") {
        "PUBLIC".into()
    } else {
        ident(role)
    }
}

/// The OID `aclexplode` names `role` by (0 for PUBLIC), or `None` when
/// there is no such role (it holds nothing).
pub async fn grantee_oid(client: &Client, role: &str) -> Result<Option<u32>, ProviderError> {
    if role.eq_ignore_ascii_case("public") {
        return Ok(Some(0));
    }
    let row = client
        .query_opt("SELECT oid FROM pg_roles WHERE rolname = $1", &[&role])
        .await
        .map_err(|e| failed(&format!("cannot read role {role}"), &e))?;
    Ok(row.map(|r| r.get(0)))
}

/// The statements that take `held` to `wanted`, with or without the
/// grant option, each written by `render` (which knows the object):
/// revokes first, then grants.
pub fn changes(
    wanted: &[&str],
    with_grant_option: bool,
    held: &Held,
    render: impl Fn(Change, &[&str]) -> String,
) -> Vec<String> {
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|p| match held.get(*p) {
            None => true,
            Some(grantable) => with_grant_option && !grantable,
        })
        .collect();
    let extra: Vec<&str> = held
        .keys()
        .map(String::as_str)
        .filter(|p| !wanted.contains(p))
        .collect();
    let option_only: Vec<&str> = if with_grant_option {
        Vec::new()
    } else {
        wanted
            .iter()
            .copied()
            .filter(|p| held.get(*p) == Some(&true))
            .collect()
    };
    let mut out = Vec::new();
    if !extra.is_empty() {
        out.push(render(Change::Revoke, &extra));
    }
    if !option_only.is_empty() {
        out.push(render(Change::RevokeGrantOption, &option_only));
    }
    if !missing.is_empty() {
        out.push(render(
            if with_grant_option {
                Change::GrantWithOption
            } else {
                Change::Grant
            },
            &missing,
        ));
    }
    out
}

/// One statement of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Grant,
    GrantWithOption,
    Revoke,
    RevokeGrantOption,
}

impl Change {
    /// `GRANT privs ON what TO role …` or `REVOKE … FROM role CASCADE`
    /// (CASCADE: what the role granted on with the option goes too).
    pub fn statement(self, privileges: &[&str], on: &str, role: &str) -> String {
        let p = privileges.join(", ");
        let role = grantee(role);
        match self {
            Change::Grant => format!("GRANT {p} ON {on} TO {role}"),
            Change::GrantWithOption => format!("GRANT {p} ON {on} TO {role} WITH GRANT OPTION"),
            Change::Revoke => format!("REVOKE {p} ON {on} FROM {role} CASCADE"),
            Change::RevokeGrantOption => {
                format!("REVOKE GRANT OPTION FOR {p} ON {on} FROM {role} CASCADE")
            }
        }
    }
}

/// Runs `statements` in one transaction: all of a change or none of it.
pub async fn apply(
    client: &Client,
    statements: &[String],
    what: &str,
) -> Result<(), ProviderError> {
    if statements.is_empty() {
        return Ok(());
    }
    let batch = format!("BEGIN; {}; COMMIT", statements.join("; "));
    if let Err(e) = client.batch_execute(&batch).await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(failed(what, &e));
    }
    Ok(())
}

/// The live value of WithGrantOption: every held privilege grantable.
pub fn grantable(held: &Held) -> bool {
    !held.is_empty() && held.values().all(|g| *g)
}

/// The held privileges in `kind`'s order.
pub fn ordered(kind: ObjectKind, held: &Held, maintain: bool) -> Vec<&'static str> {
    kind.all(maintain)
        .into_iter()
        .filter(|p| held.contains_key(*p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(pairs: &[(&str, bool)]) -> Held {
        pairs.iter().map(|(p, g)| (p.to_string(), *g)).collect()
    }

    fn render(c: Change, p: &[&str]) -> String {
        c.statement(p, "TABLE t", "r")
    }

    #[test]
    fn all_and_temp_are_spelled_out_in_postgres_order() {
        let w = wanted(
            ObjectKind::Table,
            &["insert".into(), "select".into()],
            false,
        );
        assert_eq!(w.ok(), Some(vec!["SELECT", "INSERT"]));
        let db = wanted(
            ObjectKind::Database,
            &["TEMP".into(), "connect".into()],
            false,
        );
        assert_eq!(db.ok(), Some(vec!["CONNECT", "TEMPORARY"]));
        let all = wanted(ObjectKind::Table, &["ALL".into()], true).unwrap_or_default();
        assert_eq!(all.len(), 8);
        assert_eq!(as_written(ObjectKind::Table, &all, true), vec!["ALL"]);
        assert_eq!(
            as_written(ObjectKind::Function, &["EXECUTE"], false),
            vec!["EXECUTE"]
        );
        let bad = wanted(ObjectKind::Schema, &["SELECT".into()], false).err();
        assert_eq!(
            bad.map(|e| e.message),
            Some("SELECT is not a privilege on a schema: it takes USAGE, CREATE (or ALL)".into())
        );
    }

    #[test]
    fn only_the_difference_is_granted_and_revoked() {
        let now = held(&[("SELECT", false), ("DELETE", false), ("INSERT", true)]);
        assert_eq!(
            changes(&["SELECT", "INSERT", "UPDATE"], false, &now, render),
            vec![
                "REVOKE DELETE ON TABLE t FROM \"r\" CASCADE",
                "REVOKE GRANT OPTION FOR INSERT ON TABLE t FROM \"r\" CASCADE",
                "GRANT UPDATE ON TABLE t TO \"r\"",
            ]
        );
        assert_eq!(
            changes(&["SELECT", "INSERT"], true, &now, render),
            vec![
                "REVOKE DELETE ON TABLE t FROM \"r\" CASCADE",
                "GRANT SELECT ON TABLE t TO \"r\" WITH GRANT OPTION",
            ]
        );
        assert!(changes(&["SELECT"], false, &held(&[("SELECT", false)]), render).is_empty());
        assert_eq!(
            changes(&[], false, &now, |c, p| c
                .statement(p, "SCHEMA s", "public")),
            vec!["REVOKE DELETE, INSERT, SELECT ON SCHEMA s FROM PUBLIC CASCADE"]
        );
    }
}
