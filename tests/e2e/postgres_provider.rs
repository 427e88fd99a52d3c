//! The PostgreSQL provider plugin (`providers/postgres`) against the
//! machine's PostgreSQL: databases and roles created, updated in place,
//! renamed, replaced, drifted by hand and healed, deleted (a role that owns
//! objects refused with what it owns), and the contract kit. Each test
//! names what it makes with a prefix of its own and drops it after.

use std::process::Command;

use serde_json::Value;

use crate::support::Scratch;
use crate::update::{cairn, deploy, physical, status};

/// The server: `CAIRN_TEST_POSTGRES`, else the machine's PostgreSQL that
/// `cargo xtask test` starts.
fn server() -> String {
    std::env::var("CAIRN_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn psql(sql: &str) -> String {
    psql_at(&server(), sql)
}

/// What a test made, dropped when it ends (passed or not).
struct Prefix(String);

impl Prefix {
    fn new() -> Prefix {
        Prefix(format!(
            "cairn_pgp_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        ))
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let p = &self.0;
        let _ = Command::new("psql")
            .args([
                server().as_str(),
                "-qAtc",
                &format!(
                    "DO $$ DECLARE n text; BEGIN
                       FOR n IN SELECT datname FROM pg_database WHERE datname LIKE '{p}%' LOOP EXECUTE format('DROP DATABASE %I WITH (FORCE)', n); END LOOP;
                       FOR n IN SELECT tablename FROM pg_tables WHERE tablename LIKE '{p}%' LOOP EXECUTE format('DROP TABLE %I', n); END LOOP;
                       FOR n IN SELECT rolname FROM pg_roles WHERE rolname LIKE '{p}%' LOOP EXECUTE format('DROP ROLE %I', n); END LOOP;
                     END $$"
                ),
            ])
            .output();
    }
}

fn scratch() -> Scratch {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[engine]\ncleanup_attempts = 1\ncleanup_backoff_seconds = 0.05\n\n[[providers]]\nkind = \"dylib\"\nname = \"postgres\"\npath = \"{}\"\nsettings = {{ Url = \"{}\" }}\n",
            crate::plugins::library("cairn_provider_postgres").display(),
            server()
        ),
    );
    s
}

/// An application's owner role, a reader in it, its database, a schema
/// and an extension in it.
struct App<'a> {
    p: &'a str,
    db: String,
    encoding: &'a str,
    owner_limit: i64,
    schema: &'a str,
    version: &'a str,
}

impl App<'_> {
    fn template(&self) -> String {
        let App {
            p,
            db,
            encoding,
            owner_limit,
            schema,
            version,
        } = self;
        format!(
            "Parameters:\n  OwnerPassword: {{Type: String, NoEcho: true}}\nResources:\n  Owner:\n    Type: Cairn::Postgres::Role\n    Properties: {{Name: {p}_owner, Login: true, Password: !Ref OwnerPassword, ConnectionLimit: {owner_limit}}}\n  Reader:\n    Type: Cairn::Postgres::Role\n    Properties: {{Name: {p}_reader, MemberOf: [!Ref Owner], DropOwnedOnDelete: true}}\n  App:\n    Type: Cairn::Postgres::Database\n    Properties: {{Name: {db}, Owner: !Ref Owner, ConnectionLimit: 7, Template: template0, Encoding: {encoding}, TerminateConnectionsOnDelete: true}}\n  Schema:\n    Type: Cairn::Postgres::Schema\n    Properties: {{Database: !Ref App, Name: {schema}, Owner: !Ref Owner, DropCascadeOnDelete: true}}\n  Hstore:\n    Type: Cairn::Postgres::Extension\n    Properties: {{Database: !Ref App, Name: hstore, Schema: !GetAtt Schema.Name, Version: '{version}'}}\nOutputs:\n  Oid: {{Value: !GetAtt App.Oid}}\n"
        )
    }
}

/// `sql` in database `db` of the test server.
fn psql_in(db: &str, sql: &str) -> String {
    let server = server();
    let prefix = server.rsplit_once('/').map(|(p, _)| p).unwrap_or(&server);
    psql_at(&format!("{prefix}/{db}"), sql)
}

fn psql_at(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-qAtc", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The hstore extension's schema and version in `db`.
fn hstore_in(db: &str) -> String {
    psql_in(db, "SELECT n.nspname || '|' || e.extversion FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'hstore'")
}

fn oid(s: &Scratch) -> String {
    let out = cairn(s, &["outputs", "st", "--output", "json"]).json();
    out["Outputs"][0]["OutputValue"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The property paths and live values `cairn drift` reports for `logical`.
fn drifted(s: &Scratch, stack: &str, logical: &str) -> Vec<String> {
    let drift = cairn(s, &["drift", stack, "--output", "json"]).json();
    let mut paths: Vec<String> = drift["StackResourceDrifts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["LogicalResourceId"] == logical)
        .flat_map(|d| {
            d["PropertyDifferences"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|d| {
            format!(
                "{}={}",
                d["PropertyPath"].as_str().unwrap_or_default(),
                d["ActualValue"].as_str().unwrap_or_default()
            )
        })
        .collect();
    paths.sort();
    paths
}

#[test]
fn databases_and_roles_are_made_changed_healed_and_dropped() {
    let p = Prefix::new();
    let p = p.0.as_str();
    let s = scratch();
    let pw = ["-p", "OwnerPassword=s3cret-Pw"];
    let mut app = App {
        p,
        db: format!("{p}_app"),
        encoding: "UTF8",
        owner_limit: 5,
        schema: "app",
        version: "1.7",
    };
    let run = deploy(&s, "st", &app.template(), &pw);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        psql(&format!("SELECT pg_get_userbyid(datdba), datconnlimit, pg_encoding_to_char(encoding) FROM pg_database WHERE datname = '{p}_app'")),
        format!("{p}_owner|7|UTF8")
    );
    assert_eq!(
        psql(&format!(
            "SELECT rolcanlogin, rolconnlimit FROM pg_roles WHERE rolname = '{p}_owner'"
        )),
        "t|5"
    );
    assert_eq!(
        psql(&format!("SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = '{p}_reader'")),
        format!("{p}_owner")
    );
    assert_eq!(hstore_in(&app.db), "app|1.7");
    assert_eq!(physical(&s, "st", "Hstore"), format!("{p}_app|hstore"));
    let first_oid = oid(&s);
    assert!(!first_oid.is_empty());

    // In place: the role's limit, the extension's version, the schema's
    // name.
    app.owner_limit = 9;
    app.version = "1.8";
    app.schema = "core";
    let run = deploy(&s, "st", &app.template(), &pw);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(physical(&s, "st", "Schema"), format!("{p}_app|core"));
    assert_eq!(oid(&s), first_oid);
    assert_eq!(hstore_in(&app.db), "core|1.8");
    assert_eq!(
        psql(&format!(
            "SELECT rolconnlimit FROM pg_roles WHERE rolname = '{p}_owner'"
        )),
        "9"
    );

    // A database alone is renamed in place: the same database (same OID).
    let solo = |name: &str| {
        format!("Resources:\n  Solo:\n    Type: Cairn::Postgres::Database\n    Properties: {{Name: {p}_{name}}}\nOutputs:\n  Oid: {{Value: !GetAtt Solo.Oid}}\n")
    };
    let solo_oid = |s: &Scratch| {
        cairn(s, &["outputs", "solo", "--output", "json"]).json()["Outputs"][0]["OutputValue"]
            .clone()
    };
    assert_eq!(deploy(&s, "solo", &solo("one"), &[]).code(), 0);
    let before = solo_oid(&s);
    let run = deploy(&s, "solo", &solo("two"), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(physical(&s, "solo", "Solo"), format!("{p}_two"));
    assert_eq!(solo_oid(&s), before);
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_database WHERE datname = '{p}_one'"
        )),
        "0"
    );
    assert_eq!(cairn(&s, &["delete", "solo"]).code(), 0);

    // A create-only change (the encoding) makes a new database, and what
    // lives in it is made again there; the old one goes in the cleanup.
    app.encoding = "SQL_ASCII";
    app.db = format!("{p}_ascii");
    let run = deploy(&s, "st", &app.template(), &pw);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_ne!(oid(&s), first_oid);
    assert_eq!(
        psql(&format!("SELECT datname, pg_encoding_to_char(encoding) FROM pg_database WHERE datname LIKE '{p}%'")),
        format!("{p}_ascii|SQL_ASCII")
    );
    assert_eq!(hstore_in(&app.db), "core|1.8");

    // Drift made by hand, reported per property, healed by `cairn update`.
    psql(&format!("ALTER ROLE {p}_owner CONNECTION LIMIT 99 NOLOGIN"));
    psql_in(&app.db, &format!("ALTER SCHEMA core OWNER TO {p}_reader"));
    assert_eq!(
        drifted(&s, "st", "Owner"),
        vec!["/ConnectionLimit=99", "/Login=false"]
    );
    assert_eq!(
        drifted(&s, "st", "Schema"),
        vec![format!("/Owner={p}_reader")]
    );
    let heal = cairn(&s, &["update", "st", "-p", "OwnerPassword=s3cret-Pw"]);
    assert_eq!(heal.code(), 0, "{}{}", heal.stdout(), heal.stderr());
    assert_eq!(
        psql(&format!(
            "SELECT rolcanlogin, rolconnlimit FROM pg_roles WHERE rolname = '{p}_owner'"
        )),
        "t|9"
    );
    assert_eq!(
        psql_in(
            &app.db,
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'core'"
        ),
        format!("{p}_owner")
    );

    // The owner owns a table elsewhere: its delete fails naming it; the
    // reader (DropOwnedOnDelete) has its table dropped with it.
    psql(&format!("CREATE TABLE {p}_owned (); ALTER TABLE {p}_owned OWNER TO {p}_owner; CREATE TABLE {p}_read (); ALTER TABLE {p}_read OWNER TO {p}_reader"));
    let run = cairn(&s, &["delete", "st"]);
    assert_ne!(run.code(), 0);
    assert_eq!(status(&s, "st"), "DELETE_FAILED");
    assert!(
        run.stderr().contains(&format!("cannot drop role {p}_owner: role \"{p}_owner\" cannot be dropped because some objects depend on it (owner of table {p}_owned); set ReassignOwnedTo: ROLE or DropOwnedOnDelete: true")),
        "{}",
        run.stderr()
    );
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_tables WHERE tablename = '{p}_read'"
        )),
        "0"
    );
    psql(&format!("DROP TABLE {p}_owned"));
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_roles WHERE rolname LIKE '{p}%'"
        )),
        "0"
    );
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_database WHERE datname LIKE '{p}%'"
        )),
        "0"
    );
}

#[test]
fn the_example_stack_deploys_drifts_heals_and_deletes() {
    let p = Prefix::new();
    let p = p.0.as_str();
    let s = scratch();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/postgres/app.yaml");
    let app = format!("App={p}_shop");
    let params = ["-p", app.as_str(), "-p", "OwnerPassword=example-Pw"];
    let run = cairn(
        &s,
        &[&["deploy", "shop", example][..], &params[..]].concat(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        psql_in(
            &format!("{p}_shop"),
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"
        ),
        "orders"
    );
    // An ALTER ROLE by hand: drift, then `cairn update` heals it.
    psql(&format!("ALTER ROLE {p}_shop_owner CONNECTION LIMIT 1"));
    assert_eq!(drifted(&s, "shop", "Owner"), vec!["/ConnectionLimit=1"]);
    let heal = cairn(&s, &[&["update", "shop"][..], &params[..]].concat());
    assert_eq!(heal.code(), 0, "{}{}", heal.stdout(), heal.stderr());
    assert_eq!(
        psql(&format!(
            "SELECT rolconnlimit FROM pg_roles WHERE rolname = '{p}_shop_owner'"
        )),
        "20"
    );
    let run = cairn(&s, &["delete", "shop"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        psql(&format!("SELECT (SELECT count(*) FROM pg_roles WHERE rolname LIKE '{p}%') + (SELECT count(*) FROM pg_database WHERE datname LIKE '{p}%')")),
        "0"
    );
}

#[test]
fn an_existing_database_and_role_are_imported() {
    let p = Prefix::new();
    let p = p.0.as_str();
    let s = scratch();
    psql(&format!(
        "CREATE ROLE {p}_ext_owner LOGIN CONNECTION LIMIT 3"
    ));
    psql(&format!("CREATE DATABASE {p}_ext OWNER {p}_ext_owner"));
    let template = s.write(
        "import.yaml",
        &format!("Resources:\n  Owner:\n    Type: Cairn::Postgres::Role\n    DeletionPolicy: Retain\n    Properties: {{Name: {p}_ext_owner, Login: true, ConnectionLimit: 3}}\n  Db:\n    Type: Cairn::Postgres::Database\n    DeletionPolicy: Retain\n    Properties: {{Name: {p}_ext, Owner: !Ref Owner}}\n"),
    );
    let resources = s.write(
        "resources.yaml",
        &format!("- {{ResourceType: Cairn::Postgres::Role, LogicalResourceId: Owner, ResourceIdentifier: {{Name: {p}_ext_owner}}}}\n- {{ResourceType: Cairn::Postgres::Database, LogicalResourceId: Db, ResourceIdentifier: {{Name: {p}_ext}}}}\n"),
    );
    let run = cairn(
        &s,
        &[
            "import",
            "adopted",
            template.to_str().unwrap_or_default(),
            "--resources",
            resources.to_str().unwrap_or_default(),
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "adopted"), "IMPORT_COMPLETE");
    assert_eq!(physical(&s, "adopted", "Db"), format!("{p}_ext"));
    assert!(drifted(&s, "adopted", "Owner").is_empty());
    // One that does not exist is refused before anything is recorded.
    let nobody = s.write(
        "nobody.yaml",
        &format!("Resources:\n  Owner:\n    Type: Cairn::Postgres::Role\n    DeletionPolicy: Retain\n    Properties: {{Name: {p}_nobody}}\n"),
    );
    let missing = s.write(
        "missing.yaml",
        &format!("- {{ResourceType: Cairn::Postgres::Role, LogicalResourceId: Owner, ResourceIdentifier: {{Name: {p}_nobody}}}}\n"),
    );
    let run = cairn(
        &s,
        &[
            "import",
            "again",
            nobody.to_str().unwrap_or_default(),
            "--resources",
            missing.to_str().unwrap_or_default(),
        ],
    );
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr()
            .contains(&format!("role {p}_nobody does not exist")),
        "{}",
        run.stderr()
    );
    assert_eq!(cairn(&s, &["describe", "again"]).code(), 1);
    // Retained on delete: still there.
    assert_eq!(cairn(&s, &["delete", "adopted"]).code(), 0);
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_database WHERE datname = '{p}_ext'"
        )),
        "1"
    );
}

#[test]
fn the_contract_kit_passes_for_every_postgres_type() {
    let p = Prefix::new();
    let p = p.0.as_str();
    // Schemas and extensions are tested in a database of their own.
    psql(&format!("CREATE DATABASE {p}_kitdb"));
    psql(&format!("CREATE ROLE {p}_kitr; CREATE ROLE {p}_kito"));
    psql_in(
        &format!("{p}_kitdb"),
        "CREATE SCHEMA app; CREATE TABLE app.a (); CREATE TABLE app.b (); CREATE SEQUENCE app.s;
         CREATE FUNCTION app.f(int) RETURNS int LANGUAGE sql AS 'select 1';
         CREATE FUNCTION app.f(text) RETURNS int LANGUAGE sql AS 'select 2';
         CREATE PROCEDURE app.p() LANGUAGE sql AS 'select 1';
         CREATE TYPE app.mood AS ENUM ('a', 'b'); CREATE DOMAIN app.pos AS int CHECK (VALUE > 0)",
    );
    let s = Scratch::new();
    let settings = s.write("settings.yaml", &format!("Url: '{}'\n", server()));
    let props = s.write(
        "props.yaml",
        &format!(
            "Cairn::Postgres::Database:\n  Create: {{Name: {p}_kit, ConnectionLimit: 3}}\n  Updates: [{{Name: {p}_kit, ConnectionLimit: 4}}, {{Name: {p}_kit2, ConnectionLimit: 4, Template: template0, Encoding: SQL_ASCII}}]\nCairn::Postgres::Role:\n  Create: {{Name: {p}_kitrole, Login: true}}\n  Updates: [{{Name: {p}_kitrole, Login: false, CreateDb: true}}]\nCairn::Postgres::Schema:\n  Create: {{Database: {p}_kitdb, Name: kit}}\n  Updates: [{{Database: {p}_kitdb, Name: kit, Owner: postgres}}]\nCairn::Postgres::Extension:\n  Create: {{Database: {p}_kitdb, Name: hstore, Version: '1.7'}}\n  Updates: [{{Database: {p}_kitdb, Name: hstore, Version: '1.8'}}, {{Database: {p}_kitdb, Name: pg_trgm}}]\nCairn::Postgres::Grant:\n  Create: {{Role: {p}_kitr, Database: {p}_kitdb, ObjectType: table, Schema: app, Objects: [a, b], Privileges: [SELECT, INSERT]}}\n  Updates: [{{Role: {p}_kitr, Database: {p}_kitdb, ObjectType: table, Schema: app, Objects: [a], Privileges: [SELECT, UPDATE], WithGrantOption: true}}, {{Role: {p}_kitr, Database: {p}_kitdb, ObjectType: sequence, Schema: app, Privileges: [ALL]}}, {{Role: {p}_kitr, Database: {p}_kitdb, ObjectType: function, Schema: app, Objects: [f], Privileges: [EXECUTE]}}, {{Role: {p}_kitr, Database: {p}_kitdb, ObjectType: function, Schema: app, Privileges: [EXECUTE], WithGrantOption: true}}, {{Role: {p}_kitr, Database: {p}_kitdb, ObjectType: type, Schema: app, Privileges: [USAGE]}}]\nCairn::Postgres::DefaultPrivileges:\n  Create: {{Role: {p}_kitr, Database: {p}_kitdb, Owner: {p}_kito, Schema: app, ObjectType: table, Privileges: [SELECT]}}\n  Updates: [{{Role: {p}_kitr, Database: {p}_kitdb, Owner: {p}_kito, Schema: app, ObjectType: table, Privileges: [SELECT, DELETE], WithGrantOption: true}}, {{Role: {p}_kitr, Database: {p}_kitdb, Owner: {p}_kito, ObjectType: function, Privileges: [EXECUTE]}}]\n"
        ),
    );
    let lib = crate::plugins::library("cairn_provider_postgres");
    let run = s.cairn(&[
        "provider",
        "test",
        "--plugin",
        lib.to_str().unwrap_or_default(),
        "--settings",
        settings.to_str().unwrap_or_default(),
        "--properties",
        props.to_str().unwrap_or_default(),
        "--output",
        "json",
    ]);
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    let report = run.json();
    let failed: Vec<&Value> = report
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            t["Status"] != "PASSED"
                && !(t["Status"] == "SKIPPED"
                    && ["Cairn::Postgres::Role", "Cairn::Postgres::Schema"]
                        .contains(&t["TypeName"].as_str().unwrap_or_default())
                    && t["Test"] == "update_create_only_replaces")
        })
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    let passed = report
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["Status"] == "PASSED")
        .count();
    assert!(passed >= 70, "{passed} passed: {report}");
    // Every grant and default taken back.
    assert_eq!(
        psql_in(
            &format!("{p}_kitdb"),
            &format!("SELECT (SELECT count(*) FROM pg_class c, aclexplode(c.relacl) a WHERE a.grantee = '{p}_kitr'::regrole) + (SELECT count(*) FROM pg_proc f, aclexplode(f.proacl) a WHERE a.grantee = '{p}_kitr'::regrole) + (SELECT count(*) FROM pg_type t, aclexplode(t.typacl) a WHERE a.grantee = '{p}_kitr'::regrole) + (SELECT count(*) FROM pg_default_acl)")
        ),
        "0"
    );
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_database WHERE datname IN ('{p}_kit', '{p}_kit2')"
        )),
        "0"
    );
    assert_eq!(
        psql_in(
            &format!("{p}_kitdb"),
            "SELECT count(*) FROM pg_extension WHERE extname IN ('hstore', 'pg_trgm')"
        ),
        "0"
    );
}

/// The grants test's stack: an owner, a reader, their database and
/// schema, the reader's grants on them, and (`tables`) a grant on tables.
fn grants_template(p: &str, tables: Option<(&str, &str)>) -> String {
    let mut t = format!(
        "Resources:\n  Owner:\n    Type: Cairn::Postgres::Role\n    Properties: {{Name: {p}_owner, ReassignOwnedTo: postgres}}\n  Reader:\n    Type: Cairn::Postgres::Role\n    Properties: {{Name: {p}_reader, DropOwnedOnDelete: true}}\n  Db:\n    Type: Cairn::Postgres::Database\n    Properties: {{Name: {p}_db, Owner: !Ref Owner, TerminateConnectionsOnDelete: true}}\n  Schema:\n    Type: Cairn::Postgres::Schema\n    Properties: {{Database: !Ref Db, Name: app, Owner: !Ref Owner, DropCascadeOnDelete: true}}\n  Connect:\n    Type: Cairn::Postgres::Grant\n    Properties: {{Role: !Ref Reader, Database: !Ref Db, ObjectType: database, Privileges: [CONNECT, TEMP]}}\n  Usage:\n    Type: Cairn::Postgres::Grant\n    Properties: {{Role: !Ref Reader, Database: !Ref Db, ObjectType: schema, Schema: !GetAtt Schema.Name, Privileges: [USAGE]}}\n  Future:\n    Type: Cairn::Postgres::DefaultPrivileges\n    Properties: {{Role: !Ref Reader, Database: !Ref Db, Owner: !Ref Owner, Schema: !GetAtt Schema.Name, ObjectType: table, Privileges: [SELECT]}}\n"
    );
    if let Some((objects, privileges)) = tables {
        t.push_str(&format!("  Tables:\n    Type: Cairn::Postgres::Grant\n    Properties: {{Role: !Ref Reader, Database: !Ref Db, ObjectType: table, Schema: !GetAtt Schema.Name, Objects: {objects}, Privileges: {privileges}}}\n"));
    }
    t
}

/// The reader's privileges on each table of schema `app`, as `aclexplode`
/// lists them: `table:PRIV,PRIV` sorted.
fn table_privileges(db: &str, role: &str) -> String {
    psql_in(db, &format!("SELECT string_agg(c.relname || ':' || (SELECT string_agg(a.privilege_type, ',' ORDER BY a.privilege_type) FROM aclexplode(c.relacl) a WHERE a.grantee = '{role}'::regrole), ' ' ORDER BY c.relname) FROM pg_class c WHERE c.relnamespace = 'app'::regnamespace AND c.relkind = 'r'"))
}

#[test]
fn grants_change_by_difference_drift_heal_and_a_role_is_cleared_out_in_every_database() {
    let p = Prefix::new();
    let p = p.0.as_str();
    let s = scratch();
    let db = format!("{p}_db");
    let reader = format!("{p}_reader");
    let run = deploy(&s, "st", &grants_template(p, None), &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        physical(&s, "st", "Connect"),
        format!("{p}_reader|{p}_db|database|")
    );
    assert_eq!(
        psql(&format!("SELECT has_database_privilege('{reader}', '{db}', 'CONNECT'), has_database_privilege('{reader}', '{db}', 'TEMPORARY'), has_database_privilege('{reader}', '{db}', 'CREATE')")),
        "t|t|f"
    );
    assert_eq!(
        psql_in(
            &db,
            &format!("SELECT has_schema_privilege('{reader}', 'app', 'USAGE')")
        ),
        "t"
    );
    // Tables the owner makes from now on: the reader reads them.
    psql_in(
        &db,
        &format!("SET ROLE {p}_owner; CREATE TABLE app.orders (); CREATE TABLE app.items ()"),
    );
    assert_eq!(table_privileges(&db, &reader), "items:SELECT orders:SELECT");

    // A grant on a table, then changed in place by the difference: the
    // same physical id, INSERT revoked, UPDATE granted, SELECT kept.
    let run = deploy(
        &s,
        "st",
        &grants_template(p, Some(("[orders]", "[SELECT, INSERT]"))),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        table_privileges(&db, &reader),
        "items:SELECT orders:INSERT,SELECT"
    );
    let id = physical(&s, "st", "Tables");
    assert_eq!(id, format!("{p}_reader|{p}_db|table|app"));
    let skip = crate::update::events(&s, "st").len();
    let run = deploy(
        &s,
        "st",
        &grants_template(p, Some(("[orders, items]", "[select, update]"))),
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        table_privileges(&db, &reader),
        "items:SELECT,UPDATE orders:SELECT,UPDATE"
    );
    let tables: Vec<(String, String)> = crate::update::sequence_after(&s, "st", skip)
        .into_iter()
        .filter(|e| e.0 == "Tables")
        .map(|e| (e.1, e.3))
        .collect();
    assert_eq!(
        tables,
        vec![
            ("UPDATE_IN_PROGRESS".to_string(), id.clone()),
            ("UPDATE_COMPLETE".to_string(), id.clone())
        ]
    );

    // Undone by hand: a privilege revoked, the database grant revoked, the
    // default privileges taken back. Drift says so; `cairn update` heals.
    psql_in(&db, &format!("REVOKE UPDATE ON app.items FROM {reader}; REVOKE ALL ON DATABASE {db} FROM {reader}; ALTER DEFAULT PRIVILEGES FOR ROLE {p}_owner IN SCHEMA app REVOKE SELECT ON TABLES FROM {reader}"));
    let drift = cairn(&s, &["drift", "st", "--output", "json"]).json();
    let status_of = |logical: &str| {
        drift["StackResourceDrifts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["LogicalResourceId"] == logical)
            .map(|d| {
                d["StackResourceDriftStatus"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default()
    };
    assert_eq!(status_of("Connect"), "DELETED");
    assert_eq!(status_of("Future"), "DELETED");
    assert_eq!(status_of("Usage"), "IN_SYNC");
    assert_eq!(status_of("Tables"), "MODIFIED");
    assert_eq!(
        drifted(&s, "st", "Tables"),
        vec![r#"/Privileges={"items":["SELECT"],"orders":["SELECT","UPDATE"]}"#]
    );
    let heal = cairn(&s, &["update", "st", "--drift-only"]);
    assert_eq!(heal.code(), 0, "{}{}", heal.stdout(), heal.stderr());
    assert_eq!(
        table_privileges(&db, &reader),
        "items:SELECT,UPDATE orders:SELECT,UPDATE"
    );
    assert_eq!(
        psql(&format!(
            "SELECT has_database_privilege('{reader}', '{db}', 'TEMPORARY')"
        )),
        "t"
    );
    psql_in(
        &db,
        &format!("SET ROLE {p}_owner; CREATE TABLE app.later ()"),
    );
    assert_eq!(
        psql_in(
            &db,
            &format!("SELECT has_table_privilege('{reader}', 'app.later', 'SELECT')")
        ),
        "t"
    );
    let drift = cairn(&s, &["drift", "st", "--output", "json"]).json();
    assert_eq!(drift["StackDriftStatus"], "IN_SYNC", "{drift}");

    // The owner owns tables outside the stack, in two databases: the
    // delete gives them to postgres (ReassignOwnedTo) database by database.
    psql(&format!("CREATE DATABASE {p}_other"));
    psql(&format!(
        "CREATE TABLE {p}_kept (); ALTER TABLE {p}_kept OWNER TO {p}_owner"
    ));
    psql_in(
        &format!("{p}_other"),
        &format!("CREATE TABLE kept (); ALTER TABLE kept OWNER TO {p}_owner"),
    );
    let run = cairn(&s, &["delete", "st"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_roles WHERE rolname LIKE '{p}%'"
        )),
        "0"
    );
    assert_eq!(
        psql(&format!(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = '{p}_kept'"
        )),
        "postgres"
    );
    assert_eq!(
        psql_in(
            &format!("{p}_other"),
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'kept'"
        ),
        "postgres"
    );
}

/// Waits (up to a minute) for `sql` to answer `want`.
fn wait_for(sql: &str, want: &str, s: &Scratch) {
    let started = std::time::Instant::now();
    while psql(sql) != want {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "timed out waiting for {sql} to be {want}: {}",
            s.spawned_stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_deploy_killed_with_the_example_half_made_resumes_making_nothing_twice() {
    use std::io::Write;
    let p = Prefix::new();
    let p = p.0.as_str();
    let s = scratch();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/postgres/app.yaml");
    let db = format!("{p}_shop");
    let reporting = format!("{p}_shop_reporting");
    // A session of the test's holds the reporting role's name in an open
    // transaction: the deploy's CREATE ROLE waits on it, in flight.
    let mut blocker = Command::new("psql")
        .args([server().as_str(), "-qAt"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("psql runs");
    let mut hold = blocker.stdin.take().expect("psql's stdin");
    writeln!(hold, "BEGIN; CREATE ROLE {reporting};").expect("psql takes input");
    wait_for(
        &format!("SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE 'CREATE ROLE {reporting}%'"),
        "1",
        &s,
    );
    let app = format!("App={db}");
    let mut deploy = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "shop",
        example,
        "-p",
        &app,
        "-p",
        "OwnerPassword=example-Pw",
    ]);
    // Half made: the database, its schema and extension done, the
    // reporting role's create waiting, its member and grants not begun.
    let waiting = format!("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%CREATE ROLE \"{reporting}\"%'");
    wait_for(&waiting, "1", &s);
    wait_for(
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{db}'"),
        "1",
        &s,
    );
    let trigrams = || {
        psql_in(
            &db,
            "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'",
        )
    };
    let started = std::time::Instant::now();
    while trigrams() != "1" {
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    deploy.kill().expect("SIGKILL");
    let _ = deploy.wait();
    let db_oid = psql(&format!(
        "SELECT oid FROM pg_database WHERE datname = '{db}'"
    ));

    // Released, the dead engine's statement still runs on the server: the
    // role is made, marked with the request that made it.
    writeln!(hold, "ROLLBACK;").expect("psql takes input");
    drop(hold);
    let _ = blocker.wait();
    wait_for(&waiting, "0", &s);
    assert!(psql(&format!(
        "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = '{reporting}'"
    ))
    .starts_with("made by Cairn request "),);
    let role_oid = psql(&format!(
        "SELECT oid FROM pg_roles WHERE rolname = '{reporting}'"
    ));

    // The next command resumes the create: the provider is asked again
    // with the same request and answers with that role.
    let run = cairn(&s, &["list"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr().contains("resumed the interrupted operation"),
        "{}",
        run.stderr()
    );
    assert_eq!(status(&s, "shop"), "CREATE_COMPLETE");
    assert_eq!(
        psql(&format!(
            "SELECT oid FROM pg_roles WHERE rolname = '{reporting}'"
        )),
        role_oid
    );
    let out = cairn(&s, &["outputs", "shop", "--output", "json"]).json();
    let outputs = out["Outputs"].as_array().cloned().unwrap_or_default();
    let oid_output = outputs
        .iter()
        .find(|o| o["OutputKey"] == "DatabaseOid")
        .map(|o| o["OutputValue"].clone());
    assert_eq!(oid_output, Some(Value::String(db_oid)));
    // Nothing made twice: one create per resource, each completed once.
    let events = crate::update::events(&s, "shop");
    let mut completed: Vec<String> = events
        .iter()
        .filter(|e| {
            e["ResourceStatus"] == "CREATE_COMPLETE"
                && e["ResourceType"] != "AWS::CloudFormation::Stack"
        })
        .map(|e| {
            e["LogicalResourceId"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    completed.sort();
    assert_eq!(
        completed,
        vec![
            "Database",
            "Owner",
            "Reader",
            "Reporting",
            "ReportingConnects",
            "ReportingReadsNewTables",
            "ReportingReadsTables",
            "ReportingUsesSchema",
            "Schema",
            "Trigrams"
        ]
    );
    assert_eq!(
        psql(&format!(
            "SELECT count(*) FROM pg_roles WHERE rolname LIKE '{p}%'"
        )),
        "3"
    );
    assert_eq!(
        psql(&format!(
            "SELECT has_database_privilege('{reporting}', '{db}', 'CONNECT')"
        )),
        "t"
    );
    assert!(drifted(&s, "shop", "Reporting").is_empty());

    // Nothing left after delete.
    let run = cairn(&s, &["delete", "shop"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        psql(&format!("SELECT (SELECT count(*) FROM pg_roles WHERE rolname LIKE '{p}%') + (SELECT count(*) FROM pg_database WHERE datname LIKE '{p}%')")),
        "0"
    );
}
