//! `cairn-store-postgres`: the PostgreSQL store: the same [`Store`] as SQLite, for several engines
//! sharing one database. tokio-postgres with a deadpool pool (see
//! ARCHITECTURE.md for the choice). Every write of an operation runs in one
//! transaction that first locks and checks the stack's lease row (the
//! fencing token); lease expiry is computed from the database's clock, so
//! engines on machines whose clocks differ agree on it. The schema is
//! versioned and applied at start under an advisory lock.

#![forbid(unsafe_code)]

use std::str::FromStr;

use deadpool_postgres::{GenericClient, Transaction};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use cairn_model::audit::{AuditQuery, AuditRecord, STACK_RESOURCE};
use cairn_model::registry::{
    self as registry, NewTypeVersion, RegistrationRecord, RegistrationStatus,
    TypeConfigurationRecord, TypeVersionRecord,
};
use cairn_model::stack::{
    ChangeSetRecord, EventRecord, HistoryRecord, OnFailure, ResourceRecord, SignalRecord,
    StackRecord, StackStatus,
};
use cairn_store::{
    Cell, ChangeSets, Claim, DriftDetections, Events, Exports, Inbox, Lease, Leases,
    OperationRecord, OperationStart, Operations, Resources, Stacks, Store, StoreError, TableDump,
};

/// TLS to the PostgreSQL state database that cannot be set up.
fn tls_error(e: cairn_pg_tls::TlsError) -> StoreError {
    StoreError::Database(e.0)
}

/// The schema version this Cairn writes; a database with a newer one is
/// refused.
const SCHEMA_VERSION: i32 = 11;

/// Taken while the schema is applied, so engines starting together do not
/// race (an arbitrary constant: "cairn" in ASCII).
const MIGRATION_LOCK: i64 = 0x63_61_69_72_6e;

/// How long PostgreSQL lets a session sit in an open transaction before it
/// ends it (its locks released): part of the time a takeover may take.
const IDLE_IN_TRANSACTION_MS: u32 = 2_000;

/// Milliseconds since the epoch by the database's clock.
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// The schema, one step per version: a database at version `v` gets the
/// steps after `v`, in order, in one transaction each.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, SCHEMA_1),
    (2, SCHEMA_2),
    (3, SCHEMA_3),
    (4, SCHEMA_4),
    (5, SCHEMA_5),
    (6, SCHEMA_6),
    (7, SCHEMA_7),
    (8, SCHEMA_8),
    (9, SCHEMA_9),
    (10, SCHEMA_10),
    (11, SCHEMA_11),
];

/// Version 11: the audit trail, where each audit export stands, and the
/// console sessions ended by logging out.
const SCHEMA_11: &str = r#"
CREATE TABLE IF NOT EXISTS audit_records (
    seq BIGSERIAL PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    event_time BIGINT NOT NULL,
    event_name TEXT NOT NULL,
    access_key TEXT,
    username TEXT,
    resource_type TEXT,
    resource_name TEXT,
    stack_id TEXT,
    request_id TEXT NOT NULL,
    error_code TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_records_by_time ON audit_records (event_time);
CREATE INDEX IF NOT EXISTS audit_records_by_resource ON audit_records (resource_name);
CREATE TABLE IF NOT EXISTS audit_exports (
    target TEXT PRIMARY KEY,
    delivered BIGINT NOT NULL DEFAULT 0,
    claim_owner TEXT,
    claim_expires BIGINT
);
CREATE TABLE IF NOT EXISTS console_revocations (
    session TEXT PRIMARY KEY,
    until_ms BIGINT NOT NULL
);
"#;

/// Version 10: a hook's verdict on an event (JSON).
const SCHEMA_10: &str = "ALTER TABLE events ADD COLUMN IF NOT EXISTS hook TEXT;";

/// Version 9: the registered type's version each resource was made or
/// moved with.
const SCHEMA_9: &str = "ALTER TABLE resources ADD COLUMN IF NOT EXISTS type_version TEXT;";

/// Version 8: the type registry (registrations, each type's versions with
/// their packages, and how many times it changed).
const SCHEMA_8: &str = r#"
CREATE TABLE IF NOT EXISTS type_registrations (
    seq BIGSERIAL,
    token TEXT PRIMARY KEY,
    type_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    description TEXT NOT NULL,
    version_id TEXT,
    client_token TEXT UNIQUE,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS type_versions (
    type_name TEXT NOT NULL,
    version_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    is_default BOOLEAN NOT NULL,
    deprecated BOOLEAN NOT NULL,
    schema TEXT NOT NULL,
    description TEXT NOT NULL,
    handler TEXT NOT NULL,
    secret TEXT,
    package_sha256 TEXT NOT NULL,
    signed_by TEXT,
    package BYTEA NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (type_name, version_id)
);
CREATE TABLE IF NOT EXISTS type_registry_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS type_configurations (
    type_name TEXT NOT NULL,
    alias TEXT NOT NULL,
    configuration TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (type_name, alias)
);
"#;

/// Taken by every write to the type registry, so two registrations of one
/// type never choose the same version id ("types" in ASCII).
const REGISTRY_LOCK: i64 = 0x74_79_70_65_73;

/// Version 7: a stack's rollback configuration and notification targets
/// (JSON), where each target stands with the stack's events, and stack
/// refactors.
const SCHEMA_7: &str = r#"
ALTER TABLE stacks ADD COLUMN IF NOT EXISTS rollback_configuration TEXT;
ALTER TABLE stacks ADD COLUMN IF NOT EXISTS notification_arns TEXT;
CREATE TABLE IF NOT EXISTS notification_targets (
    stack_id TEXT NOT NULL,
    target TEXT NOT NULL,
    delivered BIGINT NOT NULL DEFAULT 0,
    claim_owner TEXT,
    claim_expires BIGINT,
    PRIMARY KEY (stack_id, target)
);
CREATE TABLE IF NOT EXISTS stack_refactors (
    seq BIGSERIAL,
    refactor_id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
"#;

/// Version 6: a stack's policy (SetStackPolicy), as given.
const SCHEMA_6: &str = "ALTER TABLE stacks ADD COLUMN IF NOT EXISTS stack_policy TEXT;";

/// Version 5: a stack's termination protection.
const SCHEMA_5: &str =
    "ALTER TABLE stacks ADD COLUMN IF NOT EXISTS termination_protection BOOLEAN NOT NULL DEFAULT FALSE;";

/// Version 4: the capabilities a stack's last create or update was given
/// (JSON).
const SCHEMA_4: &str = "ALTER TABLE stacks ADD COLUMN IF NOT EXISTS capabilities TEXT;";

/// Version 3: signals to wait condition handles and to resources with a
/// CreationPolicy; a nested stack's parent and root.
const SCHEMA_3: &str = r#"
ALTER TABLE stacks ADD COLUMN IF NOT EXISTS parent_id TEXT;
ALTER TABLE stacks ADD COLUMN IF NOT EXISTS root_id TEXT;
ALTER TABLE change_sets ADD COLUMN IF NOT EXISTS nested TEXT;
ALTER TABLE stacks ADD COLUMN IF NOT EXISTS template_context TEXT;
CREATE TABLE IF NOT EXISTS signals (
    seq BIGSERIAL PRIMARY KEY,
    stack_id TEXT NOT NULL,
    logical_id TEXT NOT NULL,
    unique_id TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    data TEXT,
    received_at TEXT NOT NULL,
    UNIQUE (stack_id, logical_id, unique_id)
);
"#;

/// Version 2: what lets any engine take a custom-resource response for
/// another (the shared URL-signing secret, the kept responses).
const SCHEMA_2: &str = r#"
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS callback_responses (
    request_id TEXT PRIMARY KEY,
    body BYTEA NOT NULL,
    received_at BIGINT NOT NULL
);
"#;

const SCHEMA_1: &str = r#"
CREATE TABLE IF NOT EXISTS stacks (
    seq BIGSERIAL,
    stack_id TEXT PRIMARY KEY,
    stack_name TEXT NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    description TEXT,
    template_body TEXT NOT NULL,
    parameters TEXT NOT NULL,
    no_echo TEXT NOT NULL,
    outputs TEXT NOT NULL,
    on_failure TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT,
    tags TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS stacks_live_name ON stacks (stack_name) WHERE status <> 'DELETE_COMPLETE';
CREATE TABLE IF NOT EXISTS leases (
    stack_id TEXT PRIMARY KEY,
    owner TEXT,
    expires BIGINT NOT NULL,
    token BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS resources (
    seq BIGSERIAL,
    stack_id TEXT NOT NULL,
    logical_id TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    physical_id TEXT,
    status TEXT NOT NULL,
    status_reason TEXT,
    properties TEXT NOT NULL,
    attributes TEXT NOT NULL,
    pending TEXT,
    updated_at TEXT NOT NULL,
    metadata TEXT,
    journal TEXT,
    no_echo BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (stack_id, logical_id)
);
CREATE TABLE IF NOT EXISTS events (
    seq BIGSERIAL PRIMARY KEY,
    event_id TEXT NOT NULL,
    stack_id TEXT NOT NULL,
    stack_name TEXT NOT NULL,
    logical_id TEXT NOT NULL,
    physical_id TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    properties TEXT
);
CREATE INDEX IF NOT EXISTS events_by_stack ON events (stack_id, seq);
CREATE TABLE IF NOT EXISTS operations (
    stack_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    options TEXT NOT NULL,
    started_at TEXT NOT NULL,
    cancel BOOLEAN NOT NULL DEFAULT FALSE,
    resume_attempts BIGINT NOT NULL DEFAULT 0,
    resume_events BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS history (
    seq BIGSERIAL PRIMARY KEY,
    stack_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    change_set TEXT,
    template_body TEXT NOT NULL,
    parameters TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    status TEXT,
    status_reason TEXT,
    details TEXT
);
CREATE INDEX IF NOT EXISTS history_by_stack ON history (stack_id, seq);
CREATE TABLE IF NOT EXISTS drift_detections (
    seq BIGSERIAL PRIMARY KEY,
    detection_id TEXT NOT NULL UNIQUE,
    stack_id TEXT NOT NULL,
    detected_at TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS change_sets (
    seq BIGSERIAL,
    change_set_id TEXT PRIMARY KEY,
    change_set_name TEXT NOT NULL,
    stack_id TEXT NOT NULL,
    stack_name TEXT NOT NULL,
    change_set_type TEXT NOT NULL,
    status TEXT NOT NULL,
    execution_status TEXT NOT NULL,
    status_reason TEXT,
    description TEXT,
    template_body TEXT NOT NULL,
    parameters TEXT NOT NULL,
    no_echo TEXT NOT NULL,
    changes TEXT NOT NULL,
    created_at TEXT NOT NULL,
    base_version BIGINT NOT NULL,
    tags TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS change_sets_by_name ON change_sets (stack_id, change_set_name);
CREATE TABLE IF NOT EXISTS groups (
    stack_id TEXT NOT NULL,
    physical_id TEXT NOT NULL,
    logical_id TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (stack_id, physical_id)
);
CREATE TABLE IF NOT EXISTS exports (
    name TEXT PRIMARY KEY,
    stack_id TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS imports (
    stack_id TEXT NOT NULL,
    export_name TEXT NOT NULL,
    PRIMARY KEY (stack_id, export_name)
);
"#;

/// Why nothing can be recorded in a read-only database: the one message
/// `/healthz`, the API and the CLI give (a write refused with SQLSTATE
/// 25006, or `ping`'s check).
const READ_ONLY: &str = "the PostgreSQL state database is read-only (transaction_read_only is on: default_transaction_read_only, or a standby); nothing can be recorded until it accepts writes";

/// A PostgreSQL failure with its whole chain of causes: tokio-postgres
/// says only "db error", PostgreSQL's own reason is the source. A write a
/// read-only session refused is told as [`READ_ONLY`], whatever statement
/// it was.
fn backend(e: impl std::error::Error + 'static) -> StoreError {
    if refused_as_read_only(&e) {
        return StoreError::Database(READ_ONLY.into());
    }
    StoreError::Database(with_causes(&e))
}

/// Whether `e` (or one of its causes) is PostgreSQL refusing a write in a
/// read-only transaction.
fn refused_as_read_only(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<tokio_postgres::Error>()
            .is_some_and(|pg| pg.code() == Some(&SqlState::READ_ONLY_SQL_TRANSACTION))
        {
            return true;
        }
        cause = c.source();
    }
    false
}

fn json_text<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(backend)
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i).map_err(backend)
}

fn json<T: serde::de::DeserializeOwned>(r: &Row, i: usize) -> Result<T, StoreError> {
    let text: &str = get(r, i)?;
    serde_json::from_str(text).map_err(backend)
}

fn opt_json<T: serde::de::DeserializeOwned>(r: &Row, i: usize) -> Result<Option<T>, StoreError> {
    let text: Option<&str> = get(r, i)?;
    text.map(|t| serde_json::from_str(t).map_err(backend))
        .transpose()
}

fn parsed<T: FromStr>(r: &Row, i: usize) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    let text: &str = get(r, i)?;
    text.parse()
        .map_err(|e: T::Err| StoreError::Database(e.to_string()))
}

const STACK_COLUMNS: &str = "stack_id, stack_name, status, status_reason, description, template_body, parameters, no_echo, outputs, on_failure, created_at, updated_at, deleted_at, tags, parent_id, root_id, template_context, capabilities, termination_protection, stack_policy, rollback_configuration, notification_arns";

/// A stack's template context as stored (`NULL` when empty).
fn context_text(c: &cairn_model::stack::TemplateContext) -> Result<Option<String>, StoreError> {
    if c.is_empty() {
        return Ok(None);
    }
    json_text(c).map(Some)
}

fn stack_row(r: &Row) -> Result<StackRecord, StoreError> {
    Ok(StackRecord {
        stack_id: get(r, 0)?,
        stack_name: get(r, 1)?,
        status: parsed(r, 2)?,
        status_reason: get(r, 3)?,
        description: get(r, 4)?,
        template_body: get(r, 5)?,
        parameters: json(r, 6)?,
        no_echo: json(r, 7)?,
        outputs: json(r, 8)?,
        on_failure: parsed::<OnFailure>(r, 9)?,
        created_at: get(r, 10)?,
        updated_at: get(r, 11)?,
        deleted_at: get(r, 12)?,
        tags: opt_json(r, 13)?.unwrap_or_default(),
        parent_id: get(r, 14)?,
        root_id: get(r, 15)?,
        context: opt_json(r, 16)?.unwrap_or_default(),
        capabilities: opt_json(r, 17)?.unwrap_or_default(),
        termination_protection: get(r, 18)?,
        stack_policy: get(r, 19)?,
        rollback_configuration: opt_json(r, 20)?,
        notification_arns: opt_json(r, 21)?.unwrap_or_default(),
    })
}

const RESOURCE_COLUMNS: &str = "stack_id, logical_id, resource_type, physical_id, status, status_reason, properties, attributes, pending, updated_at, metadata, journal, no_echo, type_version";

fn resource_row(r: &Row) -> Result<ResourceRecord, StoreError> {
    Ok(ResourceRecord {
        stack_id: get(r, 0)?,
        logical_id: get(r, 1)?,
        resource_type: get(r, 2)?,
        physical_id: get(r, 3)?,
        status: parsed(r, 4)?,
        status_reason: get(r, 5)?,
        properties: json(r, 6)?,
        attributes: json(r, 7)?,
        pending: opt_json(r, 8)?,
        updated_at: get(r, 9)?,
        metadata: opt_json(r, 10)?,
        journal: opt_json(r, 11)?,
        no_echo: get(r, 12)?,
        type_version: get(r, 13)?,
    })
}

const EVENT_COLUMNS: &str = "event_id, stack_id, stack_name, logical_id, physical_id, resource_type, timestamp, status, status_reason, properties, hook";

fn event_row(r: &Row) -> Result<EventRecord, StoreError> {
    Ok(EventRecord {
        event_id: get(r, 0)?,
        stack_id: get(r, 1)?,
        stack_name: get(r, 2)?,
        logical_id: get(r, 3)?,
        physical_id: get(r, 4)?,
        resource_type: get(r, 5)?,
        timestamp: get(r, 6)?,
        status: parsed(r, 7)?,
        status_reason: get(r, 8)?,
        properties: get(r, 9)?,
        hook: opt_json(r, 10)?,
    })
}

const HISTORY_COLUMNS: &str = "stack_id, kind, change_set, template_body, parameters, started_at, ended_at, status, status_reason, details";

fn history_row(r: &Row) -> Result<HistoryRecord, StoreError> {
    Ok(HistoryRecord {
        stack_id: get(r, 0)?,
        kind: parsed(r, 1)?,
        change_set: get(r, 2)?,
        template_body: get(r, 3)?,
        parameters: json(r, 4)?,
        started_at: get(r, 5)?,
        ended_at: get(r, 6)?,
        status: get(r, 7)?,
        status_reason: get(r, 8)?,
        details: opt_json(r, 9)?,
    })
}

const CHANGE_SET_COLUMNS: &str = "change_set_id, change_set_name, stack_id, stack_name, change_set_type, status, execution_status, status_reason, description, template_body, parameters, no_echo, changes, created_at, base_version, tags, nested";

fn change_set_row(r: &Row) -> Result<ChangeSetRecord, StoreError> {
    Ok(ChangeSetRecord {
        change_set_id: get(r, 0)?,
        change_set_name: get(r, 1)?,
        stack_id: get(r, 2)?,
        stack_name: get(r, 3)?,
        change_set_type: parsed(r, 4)?,
        status: parsed(r, 5)?,
        execution_status: parsed(r, 6)?,
        status_reason: get(r, 7)?,
        description: get(r, 8)?,
        template_body: get(r, 9)?,
        parameters: json(r, 10)?,
        no_echo: json(r, 11)?,
        changes: json(r, 12)?,
        created_at: get(r, 13)?,
        base_version: get(r, 14)?,
        tags: opt_json(r, 15)?,
        nested: opt_json(r, 16)?.unwrap_or_default(),
    })
}

fn rows<T>(rows: Vec<Row>, f: fn(&Row) -> Result<T, StoreError>) -> Result<Vec<T>, StoreError> {
    rows.iter().map(f).collect()
}

// Statements go through each connection's cache of prepared statements: a
// statement is parsed once per connection, and each use is one round trip.

async fn run<C: GenericClient + Sync>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.execute(&statement, params).await
}

async fn fetch<C: GenericClient + Sync>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query(&statement, params).await
}

async fn fetch_opt<C: GenericClient + Sync>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query_opt(&statement, params).await
}

async fn fetch_one<C: GenericClient + Sync>(
    c: &C,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Row, tokio_postgres::Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query_one(&statement, params).await
}

/// The fence's statement (see [`fence`]).
const FENCE: &str = "SELECT token, owner FROM leases WHERE stack_id = $1 FOR UPDATE";

/// Fails unless `lease` is still the stack's current lease; holds the lease
/// row locked until the transaction ends, so no takeover (an update of the
/// row) lands in between. The lock is exclusive, so the stack's writes
/// commit one after another: an event's `seq` is drawn when it is
/// inserted, and two of the stack's transactions committing out of that
/// order let a follower that reads by count (`events_from`, a page of
/// DescribeStackEvents) see an event twice and miss another (shared, the
/// conformance check `a_follower_sees_every_event_once` saw 5–31 of 481
/// events missed). Writes of other stacks still commit in parallel.
async fn fence(
    tx: &Transaction<'_>,
    lease: &Lease,
    read_only: &ReadOnlyWatch,
) -> Result<(), StoreError> {
    let row = fetch_opt(tx, FENCE, &[&lease.stack_id])
        .await
        .map_err(|e| {
            // A row lock is the first write-like statement of every fenced
            // write: where a read-only session shows.
            if e.code() == Some(&SqlState::READ_ONLY_SQL_TRANSACTION) {
                read_only.seen();
            }
            backend(e)
        })?;
    let current = match &row {
        Some(r) => Some((get::<i64>(r, 0)?, get::<Option<String>>(r, 1)?)),
        None => None,
    };
    match current {
        Some((t, Some(o))) if t == lease.token && o == lease.owner => Ok(()),
        _ => Err(StoreError::LeaseLost(lease.stack_id.clone())),
    }
}

async fn insert_event(tx: &Transaction<'_>, e: &EventRecord) -> Result<(), StoreError> {
    let status = e.status.as_str();
    let hook = e.hook.as_ref().map(json_text).transpose()?;
    run(
        tx,
        &format!(
            "INSERT INTO events ({EVENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ),
        &[
            &e.event_id,
            &e.stack_id,
            &e.stack_name,
            &e.logical_id,
            &e.physical_id,
            &e.resource_type,
            &e.timestamp,
            &status,
            &e.status_reason,
            &e.properties,
            &hook,
        ],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

/// Inserts the events in order: the statements are pipelined (sent
/// together, answered in order), not one round trip each.
/// Every engine listening hears of them at the commit (one notification per
/// stack on `cairn_events`, its payload the stack id).
async fn insert_events(tx: &Transaction<'_>, events: &[EventRecord]) -> Result<(), StoreError> {
    let stacks: Vec<&String> = events.iter().map(|e| &e.stack_id).collect();
    let (inserted, notified) =
        tokio::join!(insert_events_quietly(tx, events), announce(tx, stacks));
    inserted?;
    notified
}

/// The events, without announcing them (the caller does, once per stack).
async fn insert_events_quietly(
    tx: &Transaction<'_>,
    events: &[EventRecord],
) -> Result<(), StoreError> {
    let inserts: Vec<_> = events.iter().map(|e| insert_event(tx, e)).collect();
    for done in futures::future::join_all(inserts).await {
        done?;
    }
    Ok(())
}

/// Announces new events of `stacks` (each once) at the commit.
async fn announce(tx: &Transaction<'_>, mut stacks: Vec<&String>) -> Result<(), StoreError> {
    stacks.sort();
    stacks.dedup();
    let params: Vec<[&(dyn ToSql + Sync); 1]> = stacks
        .iter()
        .map(|id| [*id as &(dyn ToSql + Sync)])
        .collect();
    let notices: Vec<_> = params.iter().map(|p| run(tx, NOTIFY_EVENTS, p)).collect();
    for done in futures::future::join_all(notices).await {
        done.map_err(backend)?;
    }
    Ok(())
}

/// New events are announced on channel `cairn_events` (LISTEN/NOTIFY).
const NOTIFY_EVENTS: &str = "SELECT pg_notify('cairn_events', $1)";
const LISTEN_EVENTS: &str = "LISTEN cairn_events";

fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// Fills what the URL leaves out from the standard `PG*` variables, as libpq
/// does: PGUSER, PGPASSWORD, PGHOST, PGPORT, PGDATABASE.
fn with_environment(config: &mut tokio_postgres::Config, var: impl Fn(&str) -> Option<String>) {
    if config.get_user().is_none() {
        if let Some(user) = var("PGUSER") {
            config.user(&user);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = var("PGPASSWORD") {
            config.password(password);
        }
    }
    if config.get_hosts().is_empty() {
        if let Some(host) = var("PGHOST") {
            config.host(&host);
        }
    }
    if config.get_ports().is_empty() {
        if let Some(port) = var("PGPORT").and_then(|p| p.parse().ok()) {
            config.port(port);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(db) = var("PGDATABASE") {
            config.dbname(&db);
        }
    }
}

/// An error and its causes, one after the other (a TLS failure is the cause
/// of the connection's error, and the part that says what to fix).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// A session the pool could not hand out, with every cause (a restart's
/// `db error` names what the server said: `FATAL: the database system is
/// shutting down`).
fn unreachable(e: &deadpool_postgres::PoolError) -> StoreError {
    StoreError::Database(format!(
        "cannot reach the PostgreSQL state database: {}",
        with_causes(e)
    ))
}

/// The PostgreSQL store.
pub struct PgStore {
    pool: Pool,
    /// The resource writes waiting for the next group commit.
    writes: tokio::sync::mpsc::UnboundedSender<ResourceWrite>,
    /// For the listening connection.
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    /// Started on the first [`Store::event_bell`].
    bell: std::sync::OnceLock<tokio::sync::broadcast::Sender<String>>,
    /// When a session was last found read-only.
    read_only: std::sync::Arc<ReadOnlyWatch>,
}

/// When a pooled session was last found read-only (a write refused with
/// SQLSTATE 25006, or `/healthz`). `default_transaction_read_only` is read
/// when a session starts, so once it is lifted the pooled sessions would
/// stay read-only until ended by hand: for a while after one was seen,
/// every session taken from the pool is checked first and a read-only one
/// is dropped (a new session reads the current setting).
#[derive(Default)]
struct ReadOnlyWatch {
    at: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long after the last read-only session the pool's are checked.
const READ_ONLY_WATCH: std::time::Duration = std::time::Duration::from_secs(600);

impl ReadOnlyWatch {
    fn seen(&self) {
        if let Ok(mut at) = self.at.lock() {
            *at = Some(std::time::Instant::now());
        }
    }

    fn suspect(&self) -> bool {
        self.at
            .lock()
            .ok()
            .and_then(|at| *at)
            .is_some_and(|at| at.elapsed() < READ_ONLY_WATCH)
    }
}

/// The pool's check of a session it hands out again, while read-only
/// sessions are suspected: a read-only one is dropped.
fn drop_read_only_sessions(watch: std::sync::Arc<ReadOnlyWatch>) -> deadpool_postgres::Hook {
    deadpool_postgres::Hook::async_fn(move |client, _| {
        let watch = watch.clone();
        Box::pin(async move {
            if !watch.suspect() {
                return Ok(());
            }
            let row = client
                .query_one("SELECT current_setting('transaction_read_only')", &[])
                .await
                .map_err(deadpool_postgres::HookError::Backend)?;
            match row.try_get::<_, String>(0).as_deref() {
                Ok("off") => Ok(()),
                _ => Err(deadpool_postgres::HookError::message(
                    "a read-only session (made while the database was read-only)",
                )),
            }
        })
    })
}

/// Listens on `cairn_events` on a connection of its own and rings `bell`
/// with each notification's stack id, reconnecting after a second when the
/// connection ends (followers poll now and then, so a gap loses nothing).
async fn listen_for_events(
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    bell: tokio::sync::broadcast::Sender<String>,
) {
    use futures::StreamExt;
    loop {
        match config.connect(tls.clone()).await {
            Ok((client, mut connection)) => {
                let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                let listen = client.batch_execute(LISTEN_EVENTS);
                tokio::pin!(listen);
                let mut listening = false;
                loop {
                    tokio::select! {
                        done = &mut listen, if !listening => {
                            if let Err(e) = done {
                                tracing::warn!("cannot listen for new events: {e}");
                                break;
                            }
                            listening = true;
                            tracing::debug!("listening for new events");
                        }
                        message = messages.next() => match message {
                            Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                                tracing::debug!(stack = n.payload(), "new events");
                                let _ = bell.send(n.payload().to_string());
                            }
                            Some(Ok(_)) => {}
                            _ => break,
                        },
                    }
                }
            }
            Err(e) => tracing::warn!(
                "cannot connect to listen for new events: {}",
                with_causes(&e)
            ),
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// One [`Store::put_resource`] or [`Store::remove_resource`] waiting for a
/// group commit.
struct ResourceWrite {
    lease: Lease,
    change: RowChange,
    events: Vec<EventRecord>,
    done: tokio::sync::oneshot::Sender<Result<(), StoreError>>,
}

enum RowChange {
    Put(Box<ResourceRecord>),
    /// The logical id of the row removed.
    Remove(String),
}

/// How many resource writes one group commit takes at most.
const GROUP_COMMIT_MAX: usize = 128;

type WriteQueue = tokio::sync::mpsc::UnboundedReceiver<ResourceWrite>;

/// How many group commits may be in flight at once.
const GROUP_COMMITTERS: usize = 2;

/// Writes the rows (and events) of the resources waiting, many per
/// transaction: each batch is one BEGIN, every write's fence check, row and
/// events pipelined, one COMMIT: three round trips and one WAL flush for
/// the batch instead of per write. Should any fence check or statement of a
/// batch fail, the batch is rolled back and each of its writes is made on
/// its own, so one lost lease fails only its own write.
///
/// [`GROUP_COMMITTERS`] of these share the queue, so one batch is being
/// collected and sent while another waits for its commit. A batch locks
/// its stacks' lease rows (in one order: no deadlock), so of two batches
/// of one stack the second runs once the first has committed (its
/// events' order is the commit order, see [`fence`]); batches of other
/// stacks do not wait for each other.
async fn group_commits(
    pool: Pool,
    queue: std::sync::Arc<tokio::sync::Mutex<WriteQueue>>,
    read_only: std::sync::Arc<ReadOnlyWatch>,
) {
    loop {
        let mut batch = Vec::new();
        {
            let mut writes = queue.lock().await;
            let Some(first) = writes.recv().await else {
                return;
            };
            batch.push(first);
            while batch.len() < GROUP_COMMIT_MAX {
                match writes.try_recv() {
                    Ok(w) => batch.push(w),
                    Err(_) => break,
                }
            }
        }
        let together = match pool.get().await {
            Ok(mut client) => write_together(&mut client, &batch, &read_only).await,
            Err(e) => Err(unreachable(&e)),
        };
        match together {
            Ok(()) => {
                for w in batch {
                    let _ = w.done.send(Ok(()));
                }
            }
            Err(_) => {
                for w in batch {
                    let alone = match pool.get().await {
                        Ok(mut client) => {
                            write_together(&mut client, std::slice::from_ref(&w), &read_only).await
                        }
                        Err(e) => Err(unreachable(&e)),
                    };
                    let _ = w.done.send(alone);
                }
            }
        }
    }
}

/// The writes of `batch` in one transaction, committed only if every fence
/// check and statement succeeded.
async fn write_together(
    client: &mut deadpool_postgres::Object,
    batch: &[ResourceWrite],
    read_only: &ReadOnlyWatch,
) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(backend)?;
    // The fence's statement prepared before anything is pipelined: were it
    // prepared in the pipeline (a new connection's first batch), the
    // inserts, already prepared, would run before the lease row is locked
    // and draw their events' seq ahead of another batch still committing.
    tx.prepare_cached(FENCE).await.map_err(backend)?;
    // One fence check per lease and one announcement per stack, however
    // many of the batch's writes are the same operation's.
    let mut leases: Vec<&Lease> = batch.iter().map(|w| &w.lease).collect();
    leases.sort_by(|a, b| (&a.stack_id, a.token, &a.owner).cmp(&(&b.stack_id, b.token, &b.owner)));
    leases.dedup();
    let fences = futures::future::join_all(leases.iter().map(|l| fence(&tx, l, read_only)));
    let rows = futures::future::join_all(
        batch
            .iter()
            .map(|w| write_row(&tx, &w.lease, &w.change, &w.events)),
    );
    let stacks: Vec<&String> = batch.iter().map(|w| &w.lease.stack_id).collect();
    let (fenced, written, announced) = tokio::join!(fences, rows, announce(&tx, stacks));
    for done in fenced.into_iter().chain(written) {
        done?;
    }
    announced?;
    tx.commit().await.map_err(backend)
}

/// One resource row written or removed and its events (the fence check
/// and the announcement are the batch's), pipelined: should anything of the
/// batch fail, the transaction is dropped and nothing lands.
async fn write_row(
    tx: &Transaction<'_>,
    lease: &Lease,
    change: &RowChange,
    events: &[EventRecord],
) -> Result<(), StoreError> {
    let r = match change {
        RowChange::Put(r) => r,
        RowChange::Remove(logical_id) => {
            let params: [&(dyn ToSql + Sync); 2] = [&lease.stack_id, logical_id];
            let (removed, inserted) = tokio::join!(
                run(
                    tx,
                    "DELETE FROM resources WHERE stack_id = $1 AND logical_id = $2",
                    &params,
                ),
                insert_events_quietly(tx, events)
            );
            removed.map_err(backend)?;
            return inserted;
        }
    };
    let pending = r.pending.as_ref().map(json_text).transpose()?;
    let metadata = r.metadata.as_ref().map(json_text).transpose()?;
    let journal = r.journal.as_ref().map(json_text).transpose()?;
    let (properties, attributes) = (json_text(&r.properties)?, json_text(&r.attributes)?);
    let status = r.status.as_str();
    let sql = format!(
        "INSERT INTO resources ({RESOURCE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
         ON CONFLICT (stack_id, logical_id) DO UPDATE SET resource_type = excluded.resource_type, physical_id = excluded.physical_id,
           status = excluded.status, status_reason = excluded.status_reason, properties = excluded.properties,
           attributes = excluded.attributes, pending = excluded.pending, updated_at = excluded.updated_at,
           metadata = excluded.metadata, journal = excluded.journal, no_echo = excluded.no_echo,
           type_version = excluded.type_version"
    );
    let params: [&(dyn ToSql + Sync); 14] = [
        &r.stack_id,
        &r.logical_id,
        &r.resource_type,
        &r.physical_id,
        &status,
        &r.status_reason,
        &properties,
        &attributes,
        &pending,
        &r.updated_at,
        &metadata,
        &journal,
        &r.no_echo,
        &r.type_version,
    ];
    let (upserted, inserted) =
        tokio::join!(run(tx, &sql, &params), insert_events_quietly(tx, events));
    upserted.map_err(backend)?;
    inserted
}

impl PgStore {
    /// A database error, noting a read-only session (see [`ReadOnlyWatch`]).
    fn noted(&self, e: tokio_postgres::Error) -> StoreError {
        if e.code() == Some(&SqlState::READ_ONLY_SQL_TRANSACTION) {
            self.read_only.seen();
        }
        backend(e)
    }

    /// Connects to the database `url` (`postgres://` or `postgresql://`)
    /// and applies the schema.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        let env = |k: &str| std::env::var(k).ok();
        let (url, tls) = cairn_pg_tls::split(url, env).map_err(tls_error)?;
        let mut config = tokio_postgres::Config::from_str(&url)
            .map_err(|e| StoreError::Database(format!("the PostgreSQL URL is not valid: {e}")))?;
        with_environment(&mut config, env);
        config.ssl_mode(tls.mode.negotiation());
        // A transaction of Cairn's is a few statements sent back to back.
        // One left open (an engine paused with SIGSTOP or cut off mid-write)
        // would hold its lease row locked and keep every other engine from
        // taking the operation over: the server ends such a session.
        let options = config.get_options().unwrap_or("").to_string();
        config.options(
            format!("{options} -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}")
                .trim(),
        );
        let connector = cairn_pg_tls::connector(&tls).map_err(tls_error)?;
        let manager = Manager::from_config(
            config.clone(),
            connector.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let read_only = std::sync::Arc::new(ReadOnlyWatch::default());
        let pool = Pool::builder(manager)
            .max_size(16)
            .post_recycle(drop_read_only_sessions(read_only.clone()))
            .build()
            .map_err(backend)?;
        let (writes, queued) = tokio::sync::mpsc::unbounded_channel();
        let queue = std::sync::Arc::new(tokio::sync::Mutex::new(queued));
        for _ in 0..GROUP_COMMITTERS {
            tokio::spawn(group_commits(
                pool.clone(),
                queue.clone(),
                read_only.clone(),
            ));
        }
        let store = PgStore {
            pool,
            writes,
            config,
            tls: connector,
            bell: std::sync::OnceLock::new(),
            read_only,
        };
        store.migrate().await?;
        Ok(store)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| unreachable(&e))
    }

    /// Applies the schema steps this database lacks under an advisory lock
    /// (engines starting together do not race); refuses a database whose
    /// schema is newer than this Cairn.
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        run(&client, "SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(backend)?;
        let result = async {
            client
                .batch_execute("CREATE TABLE IF NOT EXISTS cairn_schema (version INTEGER NOT NULL)")
                .await
                .map_err(backend)?;
            let found = fetch_opt(&client, "SELECT max(version) FROM cairn_schema", &[])
                .await
                .map_err(backend)?
                .map(|r| get::<Option<i32>>(&r, 0))
                .transpose()?
                .flatten()
                .unwrap_or(0);
            if found > SCHEMA_VERSION {
                return Err(StoreError::Database(format!(
                    "the PostgreSQL state database has schema version {found}, newer than this Cairn's {SCHEMA_VERSION}: upgrade Cairn"
                )));
            }
            for (version, step) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
                let tx = client.transaction().await.map_err(backend)?;
                tx.batch_execute(step).await.map_err(backend)?;
                run(&tx, "DELETE FROM cairn_schema", &[]).await.map_err(backend)?;
                run(&tx, "INSERT INTO cairn_schema (version) VALUES ($1)", &[version])
                    .await
                    .map_err(backend)?;
                tx.commit().await.map_err(backend)?;
            }
            Ok(())
        }
        .await;
        let _ = run(&client, "SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await;
        result
    }

    /// Hands a resource row's change to the group commit and waits for it.
    async fn group_commit(
        &self,
        lease: &Lease,
        change: RowChange,
        events: Vec<EventRecord>,
    ) -> Result<(), StoreError> {
        let stopped = || StoreError::Database("the PostgreSQL writer stopped".into());
        let (done, written) = tokio::sync::oneshot::channel();
        self.writes
            .send(ResourceWrite {
                lease: lease.clone(),
                change,
                events,
                done,
            })
            .map_err(|_| stopped())?;
        written.await.map_err(|_| stopped())?
    }

    /// Sets `assignments` on the lease row if `lease` still holds it (one
    /// conditional update: it waits for the operation's writes in flight,
    /// and cannot interleave with a takeover); `ttl_ms` is `$4`.
    async fn update_own_lease(
        &self,
        lease: &Lease,
        assignments: &str,
        ttl_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "UPDATE leases SET {assignments} WHERE stack_id = $1 AND token = $2 AND owner = $3"
        );
        let updated = match ttl_ms {
            Some(ttl) => {
                run(
                    &client,
                    &sql,
                    &[&lease.stack_id, &lease.token, &lease.owner, &ttl],
                )
                .await
            }
            None => {
                run(
                    &client,
                    &sql,
                    &[&lease.stack_id, &lease.token, &lease.owner],
                )
                .await
            }
        }
        .map_err(backend)?;
        if updated == 1 {
            Ok(())
        } else {
            Err(StoreError::LeaseLost(lease.stack_id.clone()))
        }
    }

    /// Runs statements whose only parameter ($1) is the lease's stack id,
    /// after the fence check, in one transaction.
    async fn fenced(&self, lease: &Lease, statements: &[&str]) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        for sql in statements {
            run(&tx, sql, &[&lease.stack_id]).await.map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }
}

impl PgStore {
    /// Copies `tables` (a `cairn_store_sqlite::SqliteStore::dump`) into this
    /// database, which must hold no stack, in one transaction; returns each
    /// table's row count as read back after the copy (refused unless equal
    /// to what was given).
    pub async fn load(&self, tables: &[TableDump]) -> Result<Vec<(String, u64)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let held: i64 = get(
            &fetch_one(&tx, "SELECT count(*) FROM stacks", &[])
                .await
                .map_err(backend)?,
            0,
        )?;
        if held > 0 {
            return Err(StoreError::Database(format!(
                "the target database already holds {held} stacks: migrate-state copies into an empty database only (drop it, or name a new one)"
            )));
        }
        let mut counts = Vec::with_capacity(tables.len());
        for table in tables {
            let types = fetch(&tx,
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1",
                    &[&table.name],
                )
                .await
                .map_err(backend)?;
            let type_of = |column: &str| -> Option<String> {
                types
                    .iter()
                    .find(|r| r.try_get::<_, &str>(0).ok() == Some(column))
                    .and_then(|r| r.try_get::<_, String>(1).ok())
            };
            // Every value goes as text and is cast to the column's type
            // (a blob as hex), so one statement serves any table.
            let mut casts = Vec::with_capacity(table.columns.len());
            for (i, column) in table.columns.iter().enumerate() {
                let Some(kind) = type_of(column) else {
                    return Err(StoreError::Database(format!(
                        "the PostgreSQL state has no column {}.{column}: is this Cairn older than the state file?",
                        table.name
                    )));
                };
                casts.push(match kind.as_str() {
                    "bytea" => format!("decode(${}::text, 'hex')", i + 1),
                    _ => format!("CAST(${}::text AS {kind})", i + 1),
                });
            }
            let insert = tx
                .prepare(&format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    table.name,
                    table.columns.join(", "),
                    casts.join(", ")
                ))
                .await
                .map_err(backend)?;
            for row in &table.rows {
                let values: Vec<Option<String>> = row
                    .iter()
                    .map(|cell| match cell {
                        Cell::Null => None,
                        Cell::Int(n) => Some(n.to_string()),
                        Cell::Real(x) => Some(x.to_string()),
                        Cell::Text(t) => Some(t.clone()),
                        Cell::Blob(b) => Some(b.iter().map(|x| format!("{x:02x}")).collect()),
                    })
                    .collect();
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = values
                    .iter()
                    .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                tx.execute(&insert, &params).await.map_err(backend)?;
            }
            // Sequences continue after the copied rows.
            if type_of("seq").is_some() {
                run(&tx,
                    &format!(
                        "SELECT setval(pg_get_serial_sequence('{0}', 'seq'), COALESCE((SELECT max(seq) FROM {0}), 0) + 1, false)",
                        table.name
                    ),
                    &[],
                )
                .await
                .map_err(backend)?;
            }
            let copied: i64 = get(
                &fetch_one(&tx, &format!("SELECT count(*) FROM {}", table.name), &[])
                    .await
                    .map_err(backend)?,
                0,
            )?;
            if copied as usize != table.rows.len() {
                return Err(StoreError::Database(format!(
                    "table {}: {} rows given, {copied} read back; nothing was copied",
                    table.name,
                    table.rows.len()
                )));
            }
            counts.push((table.name.clone(), copied as u64));
        }
        tx.commit().await.map_err(backend)?;
        Ok(counts)
    }
}

/// A stack's new status, its event, and what the status ends.
async fn write_status(
    tx: &Transaction<'_>,
    stack_id: &str,
    status: StackStatus,
    reason: Option<&str>,
    event: &EventRecord,
) -> Result<(), StoreError> {
    let deleted_at = (status == StackStatus::DeleteComplete).then(|| event.timestamp.clone());
    run(tx,
        "UPDATE stacks SET status = $1, status_reason = $2, updated_at = $3, deleted_at = COALESCE($4, deleted_at) WHERE stack_id = $5",
        &[&status.as_str(), &reason, &event.timestamp, &deleted_at, &stack_id],
    )
    .await
    .map_err(backend)?;
    if let Some(r) = reason.filter(|r| *r != "User Initiated") {
        // The operation's reason is the latest one it was given (why it
        // rolled back), unless its terminal status has its own.
        run(
            tx,
            "UPDATE history SET status_reason = $1 WHERE stack_id = $2 AND ended_at IS NULL",
            &[&r, &stack_id],
        )
        .await
        .map_err(backend)?;
    }
    if !status.is_in_progress() && status != StackStatus::ReviewInProgress {
        run(tx,
            "UPDATE history SET ended_at = $1, status = $2 WHERE stack_id = $3 AND ended_at IS NULL",
            &[&event.timestamp, &status.as_str(), &stack_id],
        )
        .await
        .map_err(backend)?;
        // CloudFormation removes a stack's change sets once one is executed.
        run(tx,
            "DELETE FROM change_sets WHERE stack_id = $1 AND execution_status = 'EXECUTE_IN_PROGRESS'",
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
    }
    insert_events(tx, std::slice::from_ref(event)).await
}

/// The stack's stored fields (not its status).
async fn write_stack_fields(tx: &Transaction<'_>, s: &StackRecord) -> Result<(), StoreError> {
    run(tx,
        "UPDATE stacks SET description = $1, template_body = $2, parameters = $3, no_echo = $4, outputs = $5, on_failure = $6, updated_at = $7, tags = $9, template_context = $10, capabilities = $11, rollback_configuration = $12 WHERE stack_id = $8",
        &[
            &s.description,
            &s.template_body,
            &json_text(&s.parameters)?,
            &json_text(&s.no_echo)?,
            &json_text(&s.outputs)?,
            &s.on_failure.as_str(),
            &s.updated_at,
            &s.stack_id,
            &json_text(&s.tags)?,
            &context_text(&s.context)?,
            &json_text(&s.capabilities)?,
            &s.rollback_configuration.as_ref().map(json_text).transpose()?,
        ],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

async fn write_history(tx: &Transaction<'_>, h: &HistoryRecord) -> Result<(), StoreError> {
    run(tx,
        &format!("INSERT INTO history ({HISTORY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"),
        &[
            &h.stack_id,
            &h.kind.as_str(),
            &h.change_set,
            &h.template_body,
            &json_text(&h.parameters)?,
            &h.started_at,
            &h.ended_at,
            &h.status,
            &h.status_reason,
            &h.details.as_ref().map(json_text).transpose()?,
        ],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

/// A change set starts executing: the stack's others go.
async fn write_change_set_execution(
    tx: &Transaction<'_>,
    stack_id: &str,
    id: &str,
) -> Result<(), StoreError> {
    run(
        tx,
        "DELETE FROM change_sets WHERE stack_id = $1 AND change_set_id <> $2",
        &[&stack_id, &id],
    )
    .await
    .map_err(backend)?;
    run(
        tx,
        "UPDATE change_sets SET execution_status = 'EXECUTE_IN_PROGRESS' WHERE change_set_id = $1",
        &[&id],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

/// Starts an operation's record: a new operation starts afresh (cancel
/// flag and resume counts too).
async fn write_operation(tx: &Transaction<'_>, op: &OperationRecord) -> Result<(), StoreError> {
    run(tx,
        "INSERT INTO operations (stack_id, kind, options, started_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (stack_id) DO UPDATE SET kind = excluded.kind, options = excluded.options,
           started_at = excluded.started_at, cancel = FALSE, resume_attempts = 0, resume_events = 0",
        &[&op.stack_id, &op.kind.as_str(), &json_text(&op.options)?, &op.started_at],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

#[async_trait::async_trait]
impl Stacks for PgStore {
    async fn insert_stack(
        &self,
        s: &StackRecord,
        first_event: &EventRecord,
        operation: Option<&OperationRecord>,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let inserted = run(&tx,
                &format!("INSERT INTO stacks ({STACK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)"),
                &[
                    &s.stack_id,
                    &s.stack_name,
                    &s.status.as_str(),
                    &s.status_reason,
                    &s.description,
                    &s.template_body,
                    &json_text(&s.parameters)?,
                    &json_text(&s.no_echo)?,
                    &json_text(&s.outputs)?,
                    &s.on_failure.as_str(),
                    &s.created_at,
                    &s.updated_at,
                    &s.deleted_at,
                    &json_text(&s.tags)?,
                    &s.parent_id,
                    &s.root_id,
                    &context_text(&s.context)?,
                    &json_text(&s.capabilities)?,
                    &s.termination_protection,
                    &s.stack_policy,
                    &s.rollback_configuration.as_ref().map(json_text).transpose()?,
                    &json_text(&s.notification_arns)?,
                ],
            )
            .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::StackExists(s.stack_name.clone()))
            }
            other => other.map_err(|e| self.noted(e))?,
        };
        run(&tx,
            &format!("INSERT INTO leases (stack_id, owner, expires, token) VALUES ($1, $2, {NOW_MS} + $3, 1)"),
            &[&s.stack_id, &owner, &ttl_ms],
        )
        .await
        .map_err(backend)?;
        insert_events(&tx, std::slice::from_ref(first_event)).await?;
        if let Some(op) = operation {
            write_operation(&tx, op).await?;
        }
        for target in &s.notification_arns {
            run(
                &tx,
                "INSERT INTO notification_targets (stack_id, target, delivered) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING",
                &[&s.stack_id, target],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)?;
        Ok(Lease {
            stack_id: s.stack_id.clone(),
            owner: owner.to_string(),
            token: 1,
        })
    }

    async fn find_stack(&self, name_or_id: &str) -> Result<Option<StackRecord>, StoreError> {
        let client = self.client().await?;
        let by_id = fetch_opt(
            &client,
            &format!("SELECT {STACK_COLUMNS} FROM stacks WHERE stack_id = $1"),
            &[&name_or_id],
        )
        .await
        .map_err(backend)?;
        let row = match by_id {
            Some(r) => Some(r),
            None => fetch_opt(&client,
                    &format!("SELECT {STACK_COLUMNS} FROM stacks WHERE stack_name = $1 AND status <> 'DELETE_COMPLETE' ORDER BY created_at DESC LIMIT 1"),
                    &[&name_or_id],
                )
                .await
                .map_err(backend)?,
        };
        row.as_ref().map(stack_row).transpose()
    }

    async fn list_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        let client = self.client().await?;
        let found = fetch(
            &client,
            &format!("SELECT {STACK_COLUMNS} FROM stacks ORDER BY created_at, seq"),
            &[],
        )
        .await
        .map_err(backend)?;
        rows(found, stack_row)
    }

    async fn in_progress_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        let client = self.client().await?;
        let found = fetch(&client,
                &format!("SELECT {STACK_COLUMNS} FROM stacks WHERE status LIKE '%\\_IN\\_PROGRESS' AND status <> 'REVIEW_IN_PROGRESS' ORDER BY created_at, seq"),
                &[],
            )
            .await
            .map_err(backend)?;
        Ok(rows(found, stack_row)?
            .into_iter()
            .filter(|s| s.status.is_in_progress())
            .collect())
    }

    async fn set_stack_status(
        &self,
        lease: &Lease,
        status: StackStatus,
        reason: Option<&str>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        write_status(&tx, &lease.stack_id, status, reason, event).await?;
        tx.commit().await.map_err(backend)
    }

    async fn set_termination_protection(
        &self,
        stack_id: &str,
        enabled: bool,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = run(
            &client,
            "UPDATE stacks SET termination_protection = $2 WHERE stack_id = $1",
            &[&stack_id, &enabled],
        )
        .await
        .map_err(backend)?;
        Ok(n > 0)
    }

    async fn set_stack_policy(&self, stack_id: &str, policy: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = run(
            &client,
            "UPDATE stacks SET stack_policy = $2 WHERE stack_id = $1",
            &[&stack_id, &policy],
        )
        .await
        .map_err(backend)?;
        Ok(n > 0)
    }

    async fn save_stack(&self, lease: &Lease, s: &StackRecord) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        write_stack_fields(&tx, s).await?;
        tx.commit().await.map_err(backend)
    }
}

#[async_trait::async_trait]
impl Leases for PgStore {
    async fn acquire_lease(
        &self,
        stack_id: &str,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let row = fetch_opt(
            &tx,
            &format!(
                "SELECT owner, expires, token, {NOW_MS} FROM leases WHERE stack_id = $1 FOR UPDATE"
            ),
            &[&stack_id],
        )
        .await
        .map_err(|e| self.noted(e))?;
        let Some(row) = row else {
            return Err(StoreError::NoSuchStack(stack_id.to_string()));
        };
        let holder: Option<String> = get(&row, 0)?;
        let (expires, token, now): (i64, i64, i64) = (get(&row, 1)?, get(&row, 2)?, get(&row, 3)?);
        if let Some(h) = holder {
            if expires > now && h != owner {
                return Err(StoreError::Busy {
                    stack: stack_id.to_string(),
                    owner: h,
                });
            }
        }
        let token = token + 1;
        run(
            &tx,
            "UPDATE leases SET owner = $1, expires = $2, token = $3 WHERE stack_id = $4",
            &[&owner, &(now + ttl_ms), &token, &stack_id],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(Lease {
            stack_id: stack_id.to_string(),
            owner: owner.to_string(),
            token,
        })
    }

    async fn renew_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        self.update_own_lease(lease, &format!("expires = {NOW_MS} + $4"), Some(ttl_ms))
            .await
    }

    async fn lease_owner(&self, stack_id: &str) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            &format!("SELECT owner FROM leases WHERE stack_id = $1 AND expires > {NOW_MS}"),
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        Ok(match row {
            Some(r) => get::<Option<String>>(&r, 0)?,
            None => None,
        })
    }

    async fn break_lease(&self, stack_id: &str, owner: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "UPDATE leases SET expires = 0 WHERE stack_id = $1 AND owner = $2",
            &[&stack_id, &owner],
        )
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        self.update_own_lease(lease, "owner = NULL, expires = 0", None)
            .await
    }

    async fn hand_off_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        self.update_own_lease(
            lease,
            &format!("owner = NULL, expires = {NOW_MS} + $4"),
            Some(ttl_ms),
        )
        .await
    }

    async fn claim_operations(
        &self,
        owners: &[String],
        ttl_ms: i64,
        handed_off: bool,
    ) -> Result<Vec<Claim>, StoreError> {
        if owners.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // SKIP LOCKED: a lease row another engine is claiming (or writing
        // under) right now is passed over, never handed out twice.
        let free = fetch(&tx,
                &format!(
                    "SELECT l.stack_id, l.owner, l.token FROM leases l JOIN stacks s ON s.stack_id = l.stack_id \
                     WHERE s.status LIKE '%\\_IN\\_PROGRESS' AND s.status <> 'REVIEW_IN_PROGRESS' \
                     AND NOT EXISTS (SELECT 1 FROM stacks p WHERE p.stack_id = s.parent_id AND p.status LIKE '%\\_IN\\_PROGRESS') \
                     AND ((l.owner IS NULL AND $2) OR l.expires <= {NOW_MS}) \
                     ORDER BY s.seq LIMIT $1 FOR UPDATE OF l SKIP LOCKED"
                ),
                &[&(owners.len() as i64), &handed_off],
            )
            .await
            .map_err(|e| self.noted(e))?;
        let mut claims = Vec::with_capacity(free.len());
        for (row, owner) in free.iter().zip(owners) {
            let stack_id: String = get(row, 0)?;
            let taken_from: Option<String> = get(row, 1)?;
            let token = get::<i64>(row, 2)? + 1;
            run(&tx,
                &format!("UPDATE leases SET owner = $1, expires = {NOW_MS} + $2, token = $3 WHERE stack_id = $4"),
                &[owner, &ttl_ms, &token, &stack_id],
            )
            .await
            .map_err(backend)?;
            claims.push(Claim {
                lease: Lease {
                    stack_id,
                    owner: owner.clone(),
                    token,
                },
                taken_from,
            });
        }
        tx.commit().await.map_err(backend)?;
        Ok(claims)
    }
}

#[async_trait::async_trait]
impl Operations for PgStore {
    async fn begin_operation(
        &self,
        lease: &Lease,
        start: &OperationStart,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        write_operation(&tx, &start.operation).await?;
        if let Some(id) = &start.change_set_id {
            write_change_set_execution(&tx, &lease.stack_id, id).await?;
        }
        write_stack_fields(&tx, &start.stack).await?;
        for row in &start.rows {
            write_row(&tx, lease, &RowChange::Put(Box::new(row.clone())), &[]).await?;
        }
        for logical_id in &start.removed_rows {
            write_row(&tx, lease, &RowChange::Remove(logical_id.clone()), &[]).await?;
        }
        write_history(&tx, &start.history).await?;
        write_status(
            &tx,
            &lease.stack_id,
            start.stack.status,
            start.stack.status_reason.as_deref(),
            &start.event,
        )
        .await?;
        tx.commit().await.map_err(backend)
    }

    async fn operation(&self, stack_id: &str) -> Result<Option<OperationRecord>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT stack_id, kind, options, started_at FROM operations WHERE stack_id = $1",
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        row.map(|r| {
            Ok(OperationRecord {
                stack_id: get(&r, 0)?,
                kind: parsed(&r, 1)?,
                options: json(&r, 2)?,
                started_at: get(&r, 3)?,
            })
        })
        .transpose()
    }

    async fn clear_operation(&self, lease: &Lease) -> Result<(), StoreError> {
        self.fenced(lease, &["DELETE FROM operations WHERE stack_id = $1"])
            .await
    }

    async fn set_operation_options(
        &self,
        lease: &Lease,
        options: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        run(
            &tx,
            "UPDATE operations SET options = $1 WHERE stack_id = $2",
            &[&json_text(options)?, &lease.stack_id],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn note_resume(&self, stack_id: &str) -> Result<u32, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let events: i64 = get(
            &fetch_one(
                &tx,
                "SELECT COUNT(*) FROM events WHERE stack_id = $1",
                &[&stack_id],
            )
            .await
            .map_err(backend)?,
            0,
        )?;
        let last = fetch_opt(
            &tx,
            "SELECT resume_attempts, resume_events FROM operations WHERE stack_id = $1 FOR UPDATE",
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        let Some(last) = last else {
            return Ok(1);
        };
        let (attempts, at_events): (i64, i64) = (get(&last, 0)?, get(&last, 1)?);
        let attempts = if events > at_events { 1 } else { attempts + 1 };
        run(
            &tx,
            "UPDATE operations SET resume_attempts = $1, resume_events = $2 WHERE stack_id = $3",
            &[&attempts, &events, &stack_id],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(u32::try_from(attempts).unwrap_or(u32::MAX))
    }

    async fn request_cancel(&self, stack_id: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = run(
            &client,
            "UPDATE operations SET cancel = TRUE WHERE stack_id = $1 AND kind = 'UPDATE'",
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        Ok(n > 0)
    }

    async fn cancel_requested(&self, stack_id: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT cancel FROM operations WHERE stack_id = $1",
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        Ok(match row {
            Some(r) => get(&r, 0)?,
            None => false,
        })
    }

    async fn open_history(&self, lease: &Lease, h: &HistoryRecord) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        write_history(&tx, h).await?;
        tx.commit().await.map_err(backend)
    }

    async fn set_history_details(
        &self,
        lease: &Lease,
        details: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        run(
            &tx,
            "UPDATE history SET details = $1 WHERE stack_id = $2 AND ended_at IS NULL",
            &[&json_text(details)?, &lease.stack_id],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn history(&self, stack_id: &str) -> Result<Vec<HistoryRecord>, StoreError> {
        let client = self.client().await?;
        let found = fetch(
            &client,
            &format!("SELECT {HISTORY_COLUMNS} FROM history WHERE stack_id = $1 ORDER BY seq"),
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        rows(found, history_row)
    }
}

#[async_trait::async_trait]
impl Resources for PgStore {
    async fn put_resource(
        &self,
        lease: &Lease,
        r: &ResourceRecord,
        events: Vec<EventRecord>,
    ) -> Result<(), StoreError> {
        self.group_commit(lease, RowChange::Put(Box::new(r.clone())), events)
            .await
    }

    async fn remove_resource(
        &self,
        lease: &Lease,
        logical_id: &str,
        events: &[EventRecord],
    ) -> Result<(), StoreError> {
        self.group_commit(
            lease,
            RowChange::Remove(logical_id.to_string()),
            events.to_vec(),
        )
        .await
    }

    async fn clear_journals(&self, lease: &Lease) -> Result<(), StoreError> {
        self.fenced(
            lease,
            &["UPDATE resources SET journal = NULL WHERE stack_id = $1 AND journal IS NOT NULL"],
        )
        .await
    }

    async fn resources(&self, stack_id: &str) -> Result<Vec<ResourceRecord>, StoreError> {
        let client = self.client().await?;
        let found = fetch(
            &client,
            &format!("SELECT {RESOURCE_COLUMNS} FROM resources WHERE stack_id = $1 ORDER BY seq"),
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        rows(found, resource_row)
    }

    async fn put_group(
        &self,
        lease: &Lease,
        logical_id: &str,
        physical_id: &str,
        state: Option<&serde_json::Value>,
        events: &[EventRecord],
    ) -> Result<(), StoreError> {
        let state = state.map(json_text).transpose()?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        match state {
            Some(state) => run(&tx,
                    "INSERT INTO groups (stack_id, physical_id, logical_id, state) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (stack_id, physical_id) DO UPDATE SET state = excluded.state",
                    &[&lease.stack_id, &physical_id, &logical_id, &state],
                )
                .await,
            None => run(&tx,
                    "DELETE FROM groups WHERE stack_id = $1 AND physical_id = $2",
                    &[&lease.stack_id, &physical_id],
                )
                .await,
        }
        .map_err(backend)?;
        insert_events(&tx, events).await?;
        tx.commit().await.map_err(backend)
    }

    async fn group(
        &self,
        stack_id: &str,
        physical_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT state FROM groups WHERE stack_id = $1 AND physical_id = $2",
            &[&stack_id, &physical_id],
        )
        .await
        .map_err(backend)?;
        row.map(|r| json(&r, 0)).transpose()
    }

    async fn groups(
        &self,
        stack_id: &str,
    ) -> Result<Vec<(String, String, serde_json::Value)>, StoreError> {
        let client = self.client().await?;
        let found = fetch(&client,
                "SELECT logical_id, physical_id, state FROM groups WHERE stack_id = $1 ORDER BY logical_id, physical_id",
                &[&stack_id],
            )
            .await
            .map_err(backend)?;
        found
            .iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?, json(r, 2)?)))
            .collect()
    }
}

#[async_trait::async_trait]
impl Events for PgStore {
    fn event_bell(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        let bell = self.bell.get_or_init(|| {
            let (bell, _) = tokio::sync::broadcast::channel(4096);
            tokio::spawn(listen_for_events(
                self.config.clone(),
                self.tls.clone(),
                bell.clone(),
            ));
            bell
        });
        Some(bell.subscribe())
    }

    async fn put_events(&self, lease: &Lease, events: &[EventRecord]) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        insert_events(&tx, events).await?;
        tx.commit().await.map_err(backend)
    }

    async fn events_from(
        &self,
        stack_id: &str,
        skip: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let found = fetch(
            &client,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE stack_id = $1 ORDER BY seq OFFSET $2"
            ),
            &[&stack_id, &skip],
        )
        .await
        .map_err(backend)?;
        rows(found, event_row)
    }

    async fn events_page(
        &self,
        stack_id: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let found = fetch(
            &client,
            &format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE stack_id = $1 ORDER BY seq OFFSET $2 LIMIT $3"
            ),
            &[&stack_id, &skip, &limit],
        )
        .await
        .map_err(backend)?;
        rows(found, event_row)
    }

    async fn event_count(&self, stack_id: &str) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let row = fetch_one(
            &client,
            "SELECT COUNT(*) FROM events WHERE stack_id = $1",
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        Ok(usize::try_from(get::<i64>(&row, 0)?).unwrap_or(0))
    }
}

#[async_trait::async_trait]
impl Inbox for PgStore {
    async fn callback_secret(&self) -> Result<Vec<u8>, StoreError> {
        let client = self.client().await?;
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh).map_err(|e| StoreError::Database(e.to_string()))?;
        // The first engine's secret wins; the others read it.
        run(&client,
                "INSERT INTO settings (name, value) VALUES ('callback_secret', $1) ON CONFLICT (name) DO NOTHING",
                &[&fresh.as_slice()],
            )
            .await
            .map_err(backend)?;
        let row = fetch_one(
            &client,
            "SELECT value FROM settings WHERE name = 'callback_secret'",
            &[],
        )
        .await
        .map_err(backend)?;
        get(&row, 0)
    }

    async fn put_callback_response(
        &self,
        request_id: &str,
        body: &[u8],
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        run(
            &client,
            &format!("DELETE FROM callback_responses WHERE received_at < {NOW_MS} - $1"),
            &[&cairn_store::CALLBACK_RESPONSE_TTL_MS],
        )
        .await
        .map_err(backend)?;
        let inserted = run(&client,
                &format!("INSERT INTO callback_responses (request_id, body, received_at) VALUES ($1, $2, {NOW_MS}) ON CONFLICT (request_id) DO NOTHING"),
                &[&request_id, &body],
            )
            .await
            .map_err(backend)?;
        Ok(inserted == 1)
    }

    async fn callback_responses(
        &self,
        request_ids: &[String],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        if request_ids.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let found = fetch(
            &client,
            "SELECT request_id, body FROM callback_responses WHERE request_id = ANY($1)",
            &[&request_ids],
        )
        .await
        .map_err(backend)?;
        found.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
    }

    async fn put_signal(&self, signal: &SignalRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "INSERT INTO signals (stack_id, logical_id, unique_id, status, reason, data, received_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (stack_id, logical_id, unique_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, data = excluded.data, received_at = excluded.received_at",
            &[&signal.stack_id, &signal.logical_id, &signal.unique_id, &signal.status.as_str(), &signal.reason, &signal.data, &signal.received_at],
        )
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn add_signal(&self, signal: &SignalRecord) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let added = client
            .execute(
                "INSERT INTO signals (stack_id, logical_id, unique_id, status, reason, data, received_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (stack_id, logical_id, unique_id) DO NOTHING",
                &[&signal.stack_id, &signal.logical_id, &signal.unique_id, &signal.status.as_str(), &signal.reason, &signal.data, &signal.received_at],
            )
            .await
            .map_err(backend)?;
        Ok(added == 1)
    }

    async fn signals(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<Vec<SignalRecord>, StoreError> {
        let client = self.client().await?;
        let rows = fetch(
            &client,
            "SELECT stack_id, logical_id, unique_id, status, reason, data, received_at FROM signals WHERE stack_id = $1 AND logical_id = $2 ORDER BY seq",
            &[&stack_id, &logical_id],
        )
        .await
        .map_err(backend)?;
        rows.iter()
            .map(|r| {
                Ok(SignalRecord {
                    stack_id: get(r, 0)?,
                    logical_id: get(r, 1)?,
                    unique_id: get(r, 2)?,
                    status: parsed(r, 3)?,
                    reason: get(r, 4)?,
                    data: get(r, 5)?,
                    received_at: get(r, 6)?,
                })
            })
            .collect()
    }

    async fn clear_signals(&self, stack_id: &str, logical_id: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "DELETE FROM signals WHERE stack_id = $1 AND logical_id = $2",
            &[&stack_id, &logical_id],
        )
        .await
        .map_err(backend)?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl ChangeSets for PgStore {
    async fn put_change_set(&self, cs: &ChangeSetRecord) -> Result<(), StoreError> {
        let client = self.client().await?;
        let inserted = run(&client,
                &format!("INSERT INTO change_sets ({CHANGE_SET_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"),
                &[
                    &cs.change_set_id,
                    &cs.change_set_name,
                    &cs.stack_id,
                    &cs.stack_name,
                    &cs.change_set_type.as_str(),
                    &cs.status.as_str(),
                    &cs.execution_status.as_str(),
                    &cs.status_reason,
                    &cs.description,
                    &cs.template_body,
                    &json_text(&cs.parameters)?,
                    &json_text(&cs.no_echo)?,
                    &json_text(&cs.changes)?,
                    &cs.created_at,
                    &cs.base_version,
                    &cs.tags.as_ref().map(json_text).transpose()?,
                    &(!cs.nested.is_empty()).then(|| json_text(&cs.nested)).transpose()?,
                ],
            )
            .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => {
                Err(StoreError::ChangeSetExists(cs.change_set_name.clone()))
            }
            other => other.map(|_| ()).map_err(backend),
        }
    }

    async fn find_change_set(
        &self,
        stack_id: &str,
        name_or_id: &str,
    ) -> Result<Option<ChangeSetRecord>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(&client,
                &format!("SELECT {CHANGE_SET_COLUMNS} FROM change_sets WHERE change_set_id = $2 OR (stack_id = $1 AND change_set_name = $2) LIMIT 1"),
                &[&stack_id, &name_or_id],
            )
            .await
            .map_err(backend)?;
        row.as_ref().map(change_set_row).transpose()
    }

    async fn change_sets(&self, stack_id: &str) -> Result<Vec<ChangeSetRecord>, StoreError> {
        let client = self.client().await?;
        let found = fetch(&client,
                &format!("SELECT {CHANGE_SET_COLUMNS} FROM change_sets WHERE stack_id = $1 ORDER BY created_at, seq"),
                &[&stack_id],
            )
            .await
            .map_err(backend)?;
        rows(found, change_set_row)
    }

    async fn delete_change_set(&self, change_set_id: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "DELETE FROM change_sets WHERE change_set_id = $1",
            &[&change_set_id],
        )
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn obsolete_change_set(
        &self,
        change_set_id: &str,
        reason: &str,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(&client,
                "UPDATE change_sets SET execution_status = 'OBSOLETE', status_reason = $2 WHERE change_set_id = $1 AND execution_status = 'AVAILABLE'",
                &[&change_set_id, &reason],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Exports for PgStore {
    async fn put_exports(
        &self,
        lease: &Lease,
        exports: &[(String, String)],
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        for (name, _) in exports {
            let other = fetch_opt(&tx,
                    "SELECT s.stack_name FROM exports e JOIN stacks s ON s.stack_id = e.stack_id WHERE e.name = $1 AND e.stack_id <> $2",
                    &[name, &lease.stack_id],
                )
                .await
                .map_err(backend)?;
            if let Some(r) = other {
                return Err(StoreError::ExportExists {
                    name: name.clone(),
                    stack: get(&r, 0)?,
                });
            }
        }
        run(
            &tx,
            "DELETE FROM exports WHERE stack_id = $1",
            &[&lease.stack_id],
        )
        .await
        .map_err(backend)?;
        for (name, value) in exports {
            run(
                &tx,
                "INSERT INTO exports (name, stack_id, value) VALUES ($1, $2, $3)",
                &[name, &lease.stack_id, value],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn delete_exports(&self, lease: &Lease) -> Result<(), StoreError> {
        self.fenced(
            lease,
            &[
                "DELETE FROM exports WHERE stack_id = $1",
                "DELETE FROM imports WHERE stack_id = $1",
            ],
        )
        .await
    }

    async fn export(&self, name: &str) -> Result<Option<(String, String)>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT value, stack_id FROM exports WHERE name = $1",
            &[&name],
        )
        .await
        .map_err(backend)?;
        row.map(|r| Ok((get(&r, 0)?, get(&r, 1)?))).transpose()
    }

    async fn exports(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let client = self.client().await?;
        let found = fetch(
            &client,
            "SELECT name, value, stack_id FROM exports ORDER BY name",
            &[],
        )
        .await
        .map_err(backend)?;
        found
            .iter()
            .map(|r| Ok((get(r, 0)?, get(r, 1)?, get(r, 2)?)))
            .collect()
    }

    async fn put_imports(&self, lease: &Lease, names: &[String]) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        fence(&tx, lease, &self.read_only).await?;
        run(
            &tx,
            "DELETE FROM imports WHERE stack_id = $1",
            &[&lease.stack_id],
        )
        .await
        .map_err(backend)?;
        for n in names {
            run(&tx,
                "INSERT INTO imports (stack_id, export_name) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&lease.stack_id, n],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn importers(&self, export_name: &str) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let found = fetch(&client,
                "SELECT s.stack_name FROM imports i JOIN stacks s ON s.stack_id = i.stack_id WHERE i.export_name = $1 AND s.status <> 'DELETE_COMPLETE' ORDER BY s.stack_name",
                &[&export_name],
            )
            .await
            .map_err(backend)?;
        found.iter().map(|r| get(r, 0)).collect()
    }
}

#[async_trait::async_trait]
impl DriftDetections for PgStore {
    async fn put_drift_detection(
        &self,
        stack_id: &str,
        detection_id: &str,
        at: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(&client,
                "INSERT INTO drift_detections (detection_id, stack_id, detected_at, body) VALUES ($1, $2, $3, $4)",
                &[&detection_id, &stack_id, &at, &json_text(body)?],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn drift_detection(
        &self,
        detection_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT body FROM drift_detections WHERE detection_id = $1",
            &[&detection_id],
        )
        .await
        .map_err(backend)?;
        row.map(|r| json(&r, 0)).transpose()
    }

    async fn last_drift_detection(
        &self,
        stack_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT body FROM drift_detections WHERE stack_id = $1 ORDER BY seq DESC LIMIT 1",
            &[&stack_id],
        )
        .await
        .map_err(backend)?;
        row.map(|r| json(&r, 0)).transpose()
    }
}

#[async_trait::async_trait]
impl cairn_store::Notifications for PgStore {
    async fn set_notification_targets(
        &self,
        stack_id: &str,
        targets: &[String],
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let listed = json_text(&targets)?;
        run(
            &tx,
            "UPDATE stacks SET notification_arns = $2 WHERE stack_id = $1",
            &[&stack_id, &listed],
        )
        .await
        .map_err(backend)?;
        run(
            &tx,
            "DELETE FROM notification_targets WHERE stack_id = $1 AND NOT (target = ANY($2))",
            &[&stack_id, &targets],
        )
        .await
        .map_err(backend)?;
        for target in targets {
            run(
                &tx,
                "INSERT INTO notification_targets (stack_id, target, delivered) VALUES ($1, $2, (SELECT COUNT(*) FROM events WHERE stack_id = $1)) ON CONFLICT DO NOTHING",
                &[&stack_id, target],
            )
            .await
            .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)
    }

    async fn claim_notifications(
        &self,
        owner: &str,
        dead: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<cairn_store::NotificationCursor>, StoreError> {
        let client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Rows another engine claims meanwhile are skipped, not waited for.
        let rows = fetch(
            &client,
            &format!(
                "UPDATE notification_targets SET claim_owner = $1, claim_expires = {NOW_MS} + $3
                 WHERE (stack_id, target) IN (
                   SELECT t.stack_id, t.target FROM notification_targets t
                   WHERE (t.claim_owner IS NULL OR t.claim_owner = $1 OR t.claim_expires < {NOW_MS}
                          OR t.claim_owner = ANY($2))
                     AND t.delivered < (SELECT COUNT(*) FROM events e WHERE e.stack_id = t.stack_id)
                   ORDER BY t.stack_id, t.target LIMIT $4
                   FOR UPDATE SKIP LOCKED)
                 RETURNING stack_id, target, delivered"
            ),
            &[&owner, &dead, &ttl_ms, &limit],
        )
        .await
        .map_err(backend)?;
        rows.iter()
            .map(|r| {
                Ok(cairn_store::NotificationCursor {
                    stack_id: get(r, 0)?,
                    target: get(r, 1)?,
                    delivered: usize::try_from(get::<i64>(r, 2)?).unwrap_or(0),
                })
            })
            .collect()
    }

    async fn notification_claimants(&self) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = fetch(
            &client,
            "SELECT DISTINCT claim_owner FROM notification_targets WHERE claim_owner IS NOT NULL",
            &[],
        )
        .await
        .map_err(backend)?;
        rows.iter().map(|r| get(r, 0)).collect()
    }

    async fn notified(
        &self,
        owner: &str,
        cursor: &cairn_store::NotificationCursor,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let delivered = i64::try_from(cursor.delivered).unwrap_or(i64::MAX);
        let n = run(
            &client,
            &format!("UPDATE notification_targets SET delivered = $3, claim_expires = {NOW_MS} + $5 WHERE stack_id = $1 AND target = $2 AND claim_owner = $4"),
            &[&cursor.stack_id, &cursor.target, &delivered, &owner, &ttl_ms],
        )
        .await
        .map_err(backend)?;
        Ok(n > 0)
    }

    async fn release_notification(
        &self,
        owner: &str,
        cursor: &cairn_store::NotificationCursor,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "UPDATE notification_targets SET claim_owner = NULL, claim_expires = NULL WHERE stack_id = $1 AND target = $2 AND claim_owner = $3",
            &[&cursor.stack_id, &cursor.target, &owner],
        )
        .await
        .map_err(backend)?;
        Ok(())
    }
}

const AUDIT_COLUMNS: &str = "seq, event_id, event_time, event_name, access_key, username, resource_type, resource_name, stack_id, request_id, error_code, body";

fn audit_row(r: &Row) -> Result<AuditRecord, StoreError> {
    Ok(AuditRecord {
        seq: get(r, 0)?,
        event_id: get(r, 1)?,
        event_time_ms: get(r, 2)?,
        event_name: get(r, 3)?,
        access_key: get(r, 4)?,
        username: get(r, 5)?,
        resource_type: get(r, 6)?,
        resource_name: get(r, 7)?,
        stack_id: get(r, 8)?,
        request_id: get(r, 9)?,
        error_code: get(r, 10)?,
        body: json(r, 11)?,
    })
}

#[async_trait::async_trait]
impl cairn_store::Audit for PgStore {
    async fn add_audit(&self, r: &AuditRecord) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let row = fetch_one(
            &client,
            "INSERT INTO audit_records (event_id, event_time, event_name, access_key, username, resource_type, resource_name, stack_id, request_id, error_code, body) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING seq",
            &[&r.event_id, &r.event_time_ms, &r.event_name, &r.access_key, &r.username, &r.resource_type, &r.resource_name, &r.stack_id, &r.request_id, &r.error_code, &json_text(&r.body)?],
        )
        .await
        .map_err(backend)?;
        get(&row, 0)
    }

    async fn audit_records(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let client = self.client().await?;
        let limit = (q.limit > 0).then_some(q.limit as i64);
        let rows = fetch(
            &client,
            &format!(
                "SELECT {AUDIT_COLUMNS} FROM audit_records WHERE \
                 ($1::text IS NULL OR (resource_type = $12 AND (resource_name = $1 OR stack_id = $1))) \
                 AND ($2::text IS NULL OR access_key = $2) AND ($3::text IS NULL OR username = $3) \
                 AND ($4::text IS NULL OR event_name = $4) AND ($5::text IS NULL OR event_id = $5) \
                 AND ($6::text IS NULL OR resource_type = $6) \
                 AND ($7::text IS NULL OR resource_name = $7 OR stack_id = $7) \
                 AND ($8::bigint IS NULL OR event_time >= $8) AND ($9::bigint IS NULL OR event_time <= $9) \
                 AND ($10::text[] IS NULL OR (resource_type = $12 AND resource_name = ANY($10))) \
                 AND ($11::bigint IS NULL OR seq < $11) \
                 ORDER BY seq DESC LIMIT $13"
            ),
            &[
                &q.stack,
                &q.access_key,
                &q.username,
                &q.event_name,
                &q.event_id,
                &q.resource_type,
                &q.resource_name,
                &q.since_ms,
                &q.until_ms,
                &q.only_stacks,
                &q.before_seq,
                &STACK_RESOURCE,
                &limit,
            ],
        )
        .await
        .map_err(backend)?;
        rows.iter().map(audit_row).collect()
    }

    async fn prune_audit(&self, before_ms: i64) -> Result<u64, StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "DELETE FROM audit_records WHERE event_time < $1",
            &[&before_ms],
        )
        .await
        .map_err(backend)
    }

    async fn audit_after(
        &self,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let client = self.client().await?;
        let rows = fetch(
            &client,
            &format!(
                "SELECT {AUDIT_COLUMNS} FROM audit_records WHERE seq > $1 ORDER BY seq LIMIT $2"
            ),
            &[&after_seq, &(limit as i64)],
        )
        .await
        .map_err(backend)?;
        rows.iter().map(audit_row).collect()
    }

    async fn claim_audit_export(
        &self,
        owner: &str,
        target: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "INSERT INTO audit_exports (target, delivered) VALUES ($1, 0) ON CONFLICT (target) DO NOTHING",
            &[&target],
        )
        .await
        .map_err(backend)?;
        let row = fetch_opt(
            &client,
            "UPDATE audit_exports SET claim_owner = $2, \
             claim_expires = (extract(epoch from clock_timestamp()) * 1000)::bigint + $3 \
             WHERE target = $1 AND (claim_owner IS NULL OR claim_owner = $2 \
             OR claim_expires < (extract(epoch from clock_timestamp()) * 1000)::bigint) \
             RETURNING delivered",
            &[&target, &owner, &ttl_ms],
        )
        .await
        .map_err(backend)?;
        row.map(|r| get(&r, 0)).transpose()
    }

    async fn audit_exported(
        &self,
        owner: &str,
        target: &str,
        delivered: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = run(
            &client,
            "UPDATE audit_exports SET delivered = $3, \
             claim_expires = (extract(epoch from clock_timestamp()) * 1000)::bigint + $4 \
             WHERE target = $1 AND claim_owner = $2",
            &[&target, &owner, &delivered, &ttl_ms],
        )
        .await
        .map_err(backend)?;
        Ok(n == 1)
    }

    async fn revoke_session(&self, session: &str, until_ms: i64) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "DELETE FROM console_revocations WHERE until_ms < (extract(epoch from clock_timestamp()) * 1000)::bigint",
            &[],
        )
        .await
        .map_err(backend)?;
        run(
            &client,
            "INSERT INTO console_revocations (session, until_ms) VALUES ($1, $2) ON CONFLICT (session) DO UPDATE SET until_ms = $2",
            &[&session, &until_ms],
        )
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn session_revoked(&self, session: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT 1 FROM console_revocations WHERE session = $1",
            &[&session],
        )
        .await
        .map_err(backend)?;
        Ok(row.is_some())
    }
}

#[async_trait::async_trait]
impl cairn_store::Refactors for PgStore {
    async fn put_refactor(
        &self,
        refactor_id: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        run(
            &client,
            "INSERT INTO stack_refactors (refactor_id, body) VALUES ($1, $2) ON CONFLICT (refactor_id) DO UPDATE SET body = $2",
            &[&refactor_id, &json_text(body)?],
        )
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn refactor(&self, refactor_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let row = fetch_opt(
            &client,
            "SELECT body FROM stack_refactors WHERE refactor_id = $1",
            &[&refactor_id],
        )
        .await
        .map_err(backend)?;
        row.map(|r| json(&r, 0)).transpose()
    }

    async fn refactors(&self) -> Result<Vec<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let rows = fetch(
            &client,
            "SELECT body FROM stack_refactors ORDER BY seq",
            &[],
        )
        .await
        .map_err(backend)?;
        rows.iter().map(|r| json(r, 0)).collect()
    }

    async fn apply_refactor(
        &self,
        leases: &[Lease],
        write: &cairn_store::RefactorWrite,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Lease rows are locked in one order everywhere (as a group
        // commit does): two transactions never wait for each other's.
        let mut ordered: Vec<&Lease> = leases.iter().collect();
        ordered.sort_by(|a, b| a.stack_id.cmp(&b.stack_id));
        for lease in ordered {
            fence(&tx, lease, &self.read_only).await?;
        }
        // Every moved row steps aside first, so renames may swap.
        for (i, m) in write.moves.iter().enumerate() {
            run(
                &tx,
                "UPDATE resources SET logical_id = $3 WHERE stack_id = $1 AND logical_id = $2",
                &[
                    &m.from_stack,
                    &m.from_logical,
                    &format!("\u{1}refactor-{i}"),
                ],
            )
            .await
            .map_err(backend)?;
        }
        for (i, m) in write.moves.iter().enumerate() {
            run(
                &tx,
                "UPDATE resources SET stack_id = $3, logical_id = $4 WHERE stack_id = $1 AND logical_id = $2",
                &[&m.from_stack, &format!("\u{1}refactor-{i}"), &m.to_stack, &m.to_logical],
            )
            .await
            .map_err(backend)?;
        }
        insert_events(&tx, &write.events).await?;
        for (s, e) in &write.stacks {
            write_stack_fields(&tx, s).await?;
            write_status(&tx, &s.stack_id, s.status, s.status_reason.as_deref(), e).await?;
        }
        run(
            &tx,
            "UPDATE stack_refactors SET body = $2 WHERE refactor_id = $1",
            &[&write.refactor_id, &json_text(&write.body)?],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }
}

const REGISTRATION_COLUMNS: &str =
    "token, type_name, kind, status, description, version_id, client_token, created_at, updated_at";

fn registration_row(r: &Row) -> Result<RegistrationRecord, StoreError> {
    Ok(RegistrationRecord {
        token: get(r, 0)?,
        type_name: get(r, 1)?,
        kind: parsed(r, 2)?,
        status: parsed(r, 3)?,
        description: get(r, 4)?,
        version_id: get(r, 5)?,
        client_token: get(r, 6)?,
        created_at: get(r, 7)?,
        updated_at: get(r, 8)?,
    })
}

const TYPE_VERSION_COLUMNS: &str = "type_name, version_id, kind, is_default, deprecated, schema, description, handler, secret, package_sha256, signed_by, created_at";

fn type_version_row(r: &Row) -> Result<TypeVersionRecord, StoreError> {
    Ok(TypeVersionRecord {
        type_name: get(r, 0)?,
        version_id: get(r, 1)?,
        kind: parsed(r, 2)?,
        is_default: get(r, 3)?,
        deprecated: get(r, 4)?,
        schema: get(r, 5)?,
        description: get(r, 6)?,
        handler: get(r, 7)?,
        secret: get(r, 8)?,
        package_sha256: get(r, 9)?,
        signed_by: get(r, 10)?,
        created_at: get(r, 11)?,
    })
}

/// Takes the registry's lock for the transaction and counts one more
/// change.
async fn registry_write<C: GenericClient + Sync>(tx: &C) -> Result<(), StoreError> {
    run(tx, "SELECT pg_advisory_xact_lock($1)", &[&REGISTRY_LOCK])
        .await
        .map_err(backend)?;
    run(
        tx,
        "INSERT INTO type_registry_state (id, generation) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET generation = type_registry_state.generation + 1",
        &[],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

/// Whether `version_id` is a live version of `type_name`, whether it is the
/// default, and how many other live versions the type has.
async fn live_version<C: GenericClient + Sync>(
    tx: &C,
    type_name: &str,
    version_id: &str,
) -> Result<(bool, bool, i64), StoreError> {
    let this = fetch_opt(
        tx,
        "SELECT is_default FROM type_versions WHERE type_name = $1 AND version_id = $2 AND NOT deprecated",
        &[&type_name, &version_id],
    )
    .await
    .map_err(backend)?
    .map(|r| get::<bool>(&r, 0))
    .transpose()?;
    let others = fetch_one(
        tx,
        "SELECT COUNT(*) FROM type_versions WHERE type_name = $1 AND version_id <> $2 AND NOT deprecated",
        &[&type_name, &version_id],
    )
    .await
    .map_err(backend)?;
    Ok((this.is_some(), this.unwrap_or(false), get(&others, 0)?))
}

#[async_trait::async_trait]
impl cairn_store::TypeRegistry for PgStore {
    async fn begin_registration(
        &self,
        r: &RegistrationRecord,
    ) -> Result<RegistrationRecord, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        registry_write(&tx).await?;
        if let Some(client_token) = &r.client_token {
            let earlier = fetch_opt(
                &tx,
                &format!(
                    "SELECT {REGISTRATION_COLUMNS} FROM type_registrations WHERE client_token = $1"
                ),
                &[client_token],
            )
            .await
            .map_err(backend)?;
            if let Some(earlier) = earlier {
                return registration_row(&earlier);
            }
        }
        run(
            &tx,
            &format!("INSERT INTO type_registrations ({REGISTRATION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"),
            &[
                &r.token,
                &r.type_name,
                &r.kind.as_str(),
                &r.status.as_str(),
                &r.description,
                &r.version_id,
                &r.client_token,
                &r.created_at,
                &r.updated_at,
            ],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(r.clone())
    }

    async fn complete_registration(
        &self,
        token: &str,
        version: &NewTypeVersion,
        package: &[u8],
    ) -> Result<String, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        registry_write(&tx).await?;
        let status = fetch_opt(
            &tx,
            "SELECT status FROM type_registrations WHERE token = $1",
            &[&token],
        )
        .await
        .map_err(backend)?
        .map(|r| get::<String>(&r, 0))
        .transpose()?;
        match status.as_deref() {
            None => return Err(StoreError::NoSuchRegistration(token.into())),
            Some(s) if s != RegistrationStatus::InProgress.as_str() => {
                return Err(StoreError::RegistrationEnded(token.into()))
            }
            Some(_) => {}
        }
        let rows = fetch(
            &tx,
            "SELECT version_id, deprecated FROM type_versions WHERE type_name = $1",
            &[&version.type_name],
        )
        .await
        .map_err(backend)?;
        let mut next = 1;
        let mut live = false;
        for r in &rows {
            let id: String = get(r, 0)?;
            if let Some(n) = registry::version_number(&id) {
                next = next.max(n + 1);
            }
            live |= !get::<bool>(r, 1)?;
        }
        let version_id = registry::version_id(next);
        let ts = cairn_model::stack::now();
        run(
            &tx,
            &format!("INSERT INTO type_versions ({TYPE_VERSION_COLUMNS}, package) VALUES ($1, $2, $3, $4, FALSE, $5, $6, $7, $8, $9, $10, $11, $12)"),
            &[
                &version.type_name,
                &version_id,
                &version.kind.as_str(),
                &!live,
                &version.schema,
                &version.description,
                &version.handler,
                &version.secret,
                &version.package_sha256,
                &version.signed_by,
                &ts,
                &package,
            ],
        )
        .await
        .map_err(backend)?;
        run(
            &tx,
            "UPDATE type_registrations SET status = $2, version_id = $3, updated_at = $4, description = $5 WHERE token = $1",
            &[
                &token,
                &RegistrationStatus::Complete.as_str(),
                &version_id,
                &ts,
                &cairn_store::registered_as(&version_id),
            ],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(version_id)
    }

    async fn fail_registration(&self, token: &str, reason: &str) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        registry_write(&tx).await?;
        let changed = run(
            &tx,
            "UPDATE type_registrations SET status = $2, description = $3, updated_at = $4 WHERE token = $1 AND status = $5",
            &[
                &token,
                &RegistrationStatus::Failed.as_str(),
                &reason,
                &cairn_model::stack::now(),
                &RegistrationStatus::InProgress.as_str(),
            ],
        )
        .await
        .map_err(backend)?;
        if changed == 0 {
            let known = fetch_opt(
                &tx,
                "SELECT 1 FROM type_registrations WHERE token = $1",
                &[&token],
            )
            .await
            .map_err(backend)?
            .is_some();
            return Err(if known {
                StoreError::RegistrationEnded(token.into())
            } else {
                StoreError::NoSuchRegistration(token.into())
            });
        }
        tx.commit().await.map_err(backend)
    }

    async fn registration(&self, token: &str) -> Result<Option<RegistrationRecord>, StoreError> {
        let client = self.client().await?;
        fetch_opt(
            &client,
            &format!("SELECT {REGISTRATION_COLUMNS} FROM type_registrations WHERE token = $1"),
            &[&token],
        )
        .await
        .map_err(backend)?
        .map(|r| registration_row(&r))
        .transpose()
    }

    async fn registrations(&self) -> Result<Vec<RegistrationRecord>, StoreError> {
        let client = self.client().await?;
        fetch(
            &client,
            &format!("SELECT {REGISTRATION_COLUMNS} FROM type_registrations ORDER BY seq"),
            &[],
        )
        .await
        .map_err(backend)?
        .iter()
        .map(registration_row)
        .collect()
    }

    async fn type_versions(&self) -> Result<Vec<TypeVersionRecord>, StoreError> {
        let client = self.client().await?;
        fetch(
            &client,
            &format!(
                "SELECT {TYPE_VERSION_COLUMNS} FROM type_versions ORDER BY type_name, version_id"
            ),
            &[],
        )
        .await
        .map_err(backend)?
        .iter()
        .map(type_version_row)
        .collect()
    }

    async fn type_package(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let client = self.client().await?;
        fetch_opt(
            &client,
            "SELECT package FROM type_versions WHERE type_name = $1 AND version_id = $2",
            &[&type_name, &version_id],
        )
        .await
        .map_err(backend)?
        .map(|r| get::<Vec<u8>>(&r, 0))
        .transpose()
    }

    async fn set_default_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        registry_write(&tx).await?;
        if !live_version(&tx, type_name, version_id).await?.0 {
            return Err(StoreError::type_not_found(type_name, version_id));
        }
        run(
            &tx,
            "UPDATE type_versions SET is_default = (version_id = $2) WHERE type_name = $1 AND NOT deprecated",
            &[&type_name, &version_id],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn deregister_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        registry_write(&tx).await?;
        let (live, is_default, others) = live_version(&tx, type_name, version_id).await?;
        if !live {
            return Err(StoreError::type_not_found(type_name, version_id));
        }
        if is_default && others > 0 {
            return Err(StoreError::DefaultTypeVersion {
                type_name: type_name.into(),
                version_id: version_id.into(),
            });
        }
        run(
            &tx,
            "UPDATE type_versions SET deprecated = TRUE, is_default = FALSE WHERE type_name = $1 AND version_id = $2",
            &[&type_name, &version_id],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn registry_generation(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        Ok(fetch_opt(
            &client,
            "SELECT generation FROM type_registry_state WHERE id = 1",
            &[],
        )
        .await
        .map_err(backend)?
        .map(|r| get::<i64>(&r, 0))
        .transpose()?
        .unwrap_or(0))
    }

    async fn set_type_configuration(&self, c: &TypeConfigurationRecord) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        registry_write(&tx).await?;
        run(
            &tx,
            "INSERT INTO type_configurations (type_name, alias, configuration, updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (type_name, alias) DO UPDATE SET configuration = $3, updated_at = $4",
            &[&c.type_name, &c.alias, &c.configuration, &c.updated_at],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)
    }

    async fn type_configurations(&self) -> Result<Vec<TypeConfigurationRecord>, StoreError> {
        let client = self.client().await?;
        fetch(
            &client,
            "SELECT type_name, alias, configuration, updated_at FROM type_configurations ORDER BY type_name, alias",
            &[],
        )
        .await
        .map_err(backend)?
        .iter()
        .map(|r| {
            Ok(TypeConfigurationRecord {
                type_name: get(r, 0)?,
                alias: get(r, 1)?,
                configuration: get(r, 2)?,
                updated_at: get(r, 3)?,
            })
        })
        .collect()
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
    /// Reachable and writable: a read-only session (the database's
    /// `default_transaction_read_only`, or a standby) can record nothing.
    /// Such a session is dropped from the pool, so that once the setting is
    /// lifted the next one is a fresh, writable session.
    async fn ping(&self) -> Result<(), StoreError> {
        let client = self.client().await?;
        let row = fetch_one(
            &client,
            "SELECT current_setting('transaction_read_only')",
            &[],
        )
        .await
        .map_err(backend)?;
        let read_only: String = get(&row, 0)?;
        if read_only == "on" {
            self.read_only.seen();
            drop(deadpool_postgres::Object::take(client));
            return Err(StoreError::Database(READ_ONLY.into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio_postgres::NoTls;

    /// TLS to the database: sslmode=require encrypts; verify-full checks the
    /// server's certificate against sslrootcert and its name against the
    /// host; verify-ca checks only the chain. Against the test server's own
    /// certificate (Debian's PostgreSQL serves a self-signed one for
    /// `localhost`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_to_the_database() {
        let admin = admin().await;
        let ssl: String = admin.query_one("SHOW ssl", &[]).await.unwrap().get(0);
        assert_eq!(
            ssl, "on",
            "the test PostgreSQL serves no TLS (ssl = off in postgresql.conf)"
        );
        let cert: String = admin
            .query_one("SHOW ssl_cert_file", &[])
            .await
            .unwrap()
            .get(0);
        let url = fresh_database(&admin).await;
        let encrypted = |store: PgStore| async move {
            let client = store.client().await.unwrap();
            let row = fetch_one(
                &client,
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap();
            row.get::<_, bool>(0)
        };
        let store = PgStore::connect(&format!("{url}?sslmode=require"))
            .await
            .unwrap();
        assert!(encrypted(store).await);
        let store = PgStore::connect(&format!("{url}?sslmode=disable"))
            .await
            .unwrap();
        assert!(!encrypted(store).await);
        // The certificate names localhost: verified at that name.
        let by_name = url.replacen("@127.0.0.1:", "@localhost:", 1);
        let store = PgStore::connect(&format!("{by_name}?sslmode=verify-full&sslrootcert={cert}"))
            .await
            .unwrap();
        assert!(encrypted(store).await);
        // At an address the certificate does not name, verify-full refuses
        // and verify-ca accepts.
        let refused = PgStore::connect(&format!("{url}?sslmode=verify-full&sslrootcert={cert}"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refused.contains("cannot reach the PostgreSQL state database")
                && refused.contains("certificate"),
            "{refused}"
        );
        let store = PgStore::connect(&format!("{url}?sslmode=verify-ca&sslrootcert={cert}"))
            .await
            .unwrap();
        assert!(encrypted(store).await);
        let name = url.rsplit('/').next().unwrap_or_default().to_string();
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }

    /// The server the tests use: `CAIRN_TEST_POSTGRES`, else the machine's
    /// PostgreSQL on 127.0.0.1:5432 as `postgres` (what `cargo xtask test`
    /// starts).
    fn server_url() -> String {
        std::env::var("CAIRN_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
    }

    /// A new, empty database of its own (random name): its URL.
    async fn fresh_database(admin: &tokio_postgres::Client) -> String {
        let name = format!("cairn_test_{}", uuid::Uuid::new_v4().simple());
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
        let base = server_url();
        let prefix = base
            .rsplit_once('/')
            .map(|(p, _)| p)
            .unwrap_or(&base)
            .to_string();
        format!("{prefix}/{name}")
    }

    async fn admin() -> tokio_postgres::Client {
        let url = server_url();
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap_or_else(|e| {
            panic!(
                "no PostgreSQL answers at {url} ({e}): run the tests with `cargo xtask test`, which starts it (pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start), or set CAIRN_TEST_POSTGRES"
            )
        });
        tokio::spawn(connection);
        client
    }

    #[test]
    fn what_the_url_leaves_out_comes_from_the_pg_variables() {
        let env = |k: &str| match k {
            "PGUSER" => Some("envuser".to_string()),
            "PGPASSWORD" => Some("envpw".to_string()),
            "PGHOST" => Some("db.internal".to_string()),
            "PGPORT" => Some("6543".to_string()),
            "PGDATABASE" => Some("envdb".to_string()),
            _ => None,
        };
        let mut bare = tokio_postgres::Config::from_str("postgres://").unwrap();
        with_environment(&mut bare, env);
        assert_eq!(bare.get_user(), Some("envuser"));
        assert_eq!(bare.get_password(), Some(&b"envpw"[..]));
        assert_eq!(bare.get_ports(), &[6543]);
        assert_eq!(bare.get_dbname(), Some("envdb"));
        let mut full = tokio_postgres::Config::from_str("postgres://u:p@h:5432/d").unwrap();
        with_environment(&mut full, env);
        assert_eq!(full.get_user(), Some("u"));
        assert_eq!(full.get_dbname(), Some("d"));
        assert_eq!(full.get_ports(), &[5432]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_conformance_suite_passes_on_postgres() {
        let admin = Arc::new(admin().await);
        let made = Arc::new(std::sync::Mutex::new(Vec::new()));
        {
            let admin = admin.clone();
            let made = made.clone();
            cairn_store::conformance::all(move || {
                let admin = admin.clone();
                let made = made.clone();
                async move {
                    let url = fresh_database(&admin).await;
                    if let Ok(mut m) = made.lock() {
                        m.push(url.rsplit('/').next().unwrap_or_default().to_string());
                    }
                    Arc::new(PgStore::connect(&url).await.unwrap()) as Arc<dyn Store>
                }
            })
            .await;
        }
        let names = made.lock().map(|m| m.clone()).unwrap_or_default();
        for name in names {
            let _ = admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
    }

    /// Events written through one store ring the bell of another on the
    /// same database (LISTEN/NOTIFY), with the stack id.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn events_are_announced_to_every_engine() {
        use cairn_store::conformance::{event, stack};
        let admin = admin().await;
        let url = fresh_database(&admin).await;
        let writer = PgStore::connect(&url).await.unwrap();
        let listener = PgStore::connect(&url).await.unwrap();
        let mut bell = listener.event_bell().unwrap();
        // The listening connection is up once a first announcement comes
        // through; write until one does.
        let stack = stack("announced");
        let event = |_: usize| event(&stack, "A", "CREATE_IN_PROGRESS");
        let lease = writer
            .insert_stack(&stack, &event(0), None, "h:1:a", 60_000)
            .await
            .unwrap();
        let mut n = 1;
        let heard = loop {
            writer.put_events(&lease, &[event(n)]).await.unwrap();
            n += 1;
            match tokio::time::timeout(std::time::Duration::from_millis(200), bell.recv()).await {
                Ok(Ok(id)) => break id,
                _ => assert!(n < 50, "no announcement came"),
            }
        };
        assert_eq!(heard, stack.stack_id);
        // Once listening, every write is heard at once.
        let started = std::time::Instant::now();
        writer.put_events(&lease, &[event(n + 1)]).await.unwrap();
        let id = tokio::time::timeout(std::time::Duration::from_secs(5), bell.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id, stack.stack_id);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        drop((writer, listener));
        let name = url.rsplit('/').next().unwrap_or_default().to_string();
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }

    /// A database of schema version 1 gets the later steps at the next start.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_older_schema_is_brought_up_to_date() {
        let admin = admin().await;
        let url = fresh_database(&admin).await;
        {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(connection);
            client
                .batch_execute(&format!(
                    "CREATE TABLE cairn_schema (version INTEGER NOT NULL); {SCHEMA_1} INSERT INTO cairn_schema VALUES (1);"
                ))
                .await
                .unwrap();
        }
        let store = PgStore::connect(&url).await.unwrap();
        assert!(store.put_callback_response("r", b"x").await.unwrap());
        let client = store.client().await.unwrap();
        let rows = fetch(&client, "SELECT version FROM cairn_schema", &[])
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get::<_, i32>(0), SCHEMA_VERSION);
        drop(client);
        drop(store);
        let name = url.rsplit('/').next().unwrap_or_default().to_string();
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn engines_starting_together_apply_the_schema_once_and_a_newer_one_is_refused() {
        let admin = admin().await;
        let url = fresh_database(&admin).await;
        let starts: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { PgStore::connect(&url).await.map(|_| ()) })
            })
            .collect();
        for s in starts {
            s.await.unwrap().unwrap();
        }
        let store = PgStore::connect(&url).await.unwrap();
        let client = store.client().await.unwrap();
        let rows = fetch(&client, "SELECT version FROM cairn_schema", &[])
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get::<_, i32>(0), SCHEMA_VERSION);
        run(&client, "UPDATE cairn_schema SET version = 99", &[])
            .await
            .unwrap();
        drop(client);
        let refused = PgStore::connect(&url).await.err().map(|e| e.to_string());
        assert_eq!(
            refused,
            Some(format!("state database error: the PostgreSQL state database has schema version 99, newer than this Cairn's {SCHEMA_VERSION}: upgrade Cairn"))
        );
        drop(store);
        let name = url.rsplit('/').next().unwrap_or_default().to_string();
        let _ = admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}
