//! `cairn-store-sqlite`: the embedded store: one SQLite file in WAL mode.
//!
//! All statements run on one dedicated thread that owns the connection (SQLite
//! has a single writer anyway, and the async runtime must not block on file
//! I/O). Jobs arriving while a transaction runs are group-committed in the next
//! one (see [`writer`]: each job's writes held or undone alone), and each
//! caller is answered only after the commit: state is durable before anyone
//! acts on it.

#![forbid(unsafe_code)]

mod checkpoint;
mod writer;

use std::path::Path;
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension, Row};
use tokio::sync::oneshot;

use writer::{fence, Hot, Job, Tx};

use cairn_model::audit::{AuditQuery, AuditRecord, STACK_RESOURCE};
use cairn_model::registry::{
    self as registry, NewTypeVersion, RegistrationRecord, RegistrationStatus,
    TypeConfigurationRecord, TypeVersionRecord,
};
use cairn_model::stack::{
    ChangeSetRecord, EventRecord, HistoryRecord, Journal, OnFailure, PendingCall, ResourceRecord,
    SignalRecord, StackRecord, StackStatus,
};
use cairn_store::{
    Cell, ChangeSets, Claim, DriftDetections, Events, Exports, Inbox, Lease, Leases,
    OperationRecord, OperationStart, Operations, Resources, Stacks, Store, StoreError, TableDump,
};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS stacks (
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
    tags TEXT,
    parent_id TEXT,
    root_id TEXT,
    template_context TEXT,
    -- JSON: the capabilities the last create or update was given.
    capabilities TEXT,
    termination_protection INTEGER NOT NULL DEFAULT 0,
    -- The stack policy (SetStackPolicy) as given, NULL when it has none.
    stack_policy TEXT,
    -- JSON: RollbackConfiguration (triggers, monitoring minutes), NULL when none.
    rollback_configuration TEXT,
    -- JSON: NotificationARNs, the webhook URLs its events go to.
    notification_arns TEXT
);
-- Leases live apart from the stack row: the fence check on every write must
-- not read past a large template body.
CREATE TABLE IF NOT EXISTS leases (
    stack_id TEXT PRIMARY KEY,
    owner TEXT,
    expires INTEGER NOT NULL DEFAULT 0,
    token INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS stacks_by_name ON stacks(stack_name);
-- Each stack's integer key: the resources and events name their stack by it
-- (an ARN is ~100 bytes; in a primary key and an index it doubled the file
-- and the pages every commit writes).
CREATE TABLE IF NOT EXISTS stack_keys (
    stack_key INTEGER PRIMARY KEY,
    stack_id TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS resources (
    stack_key INTEGER NOT NULL,
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
    no_echo INTEGER NOT NULL DEFAULT 0,
    -- The registered type's version it was made or moved with.
    type_version TEXT,
    PRIMARY KEY (stack_key, logical_id)
);
CREATE TABLE IF NOT EXISTS events (
    -- Not AUTOINCREMENT (which reads and writes sqlite_sequence with each
    -- event: a sixth of an event's insert): events are never deleted, so
    -- the largest seq + 1 is as new as it would be.
    seq INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL,
    stack_key INTEGER NOT NULL,
    stack_name TEXT NOT NULL,
    logical_id TEXT NOT NULL,
    physical_id TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    properties TEXT,
    -- JSON: a hook's verdict (HookType, HookStatus, …), NULL for others.
    hook TEXT
);
CREATE INDEX IF NOT EXISTS events_by_stack ON events(stack_key, seq);
CREATE TABLE IF NOT EXISTS operations (
    stack_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    options TEXT NOT NULL,
    started_at TEXT NOT NULL,
    -- Set by `cairn cancel-update` from another process; polled by the owner.
    cancel INTEGER NOT NULL DEFAULT 0,
    -- Resumes in a row that recorded nothing (a process that dies on the same
    -- step), and the stack's event count at the last one.
    resume_attempts INTEGER NOT NULL DEFAULT 0,
    resume_events INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    stack_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    change_set TEXT,
    template_body TEXT NOT NULL,
    parameters TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    status TEXT,
    status_reason TEXT,
    -- JSON: what a `cairn update` planned and did (steps, phases).
    details TEXT
);
CREATE INDEX IF NOT EXISTS history_by_stack ON history(stack_id, seq);
CREATE TABLE IF NOT EXISTS drift_detections (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    detection_id TEXT NOT NULL UNIQUE,
    stack_id TEXT NOT NULL,
    detected_at TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS drift_by_stack ON drift_detections(stack_id, seq);
CREATE TABLE IF NOT EXISTS change_sets (
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
    base_version INTEGER NOT NULL,
    tags TEXT,
    nested TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS change_sets_by_name ON change_sets(stack_id, change_set_name);
-- Instance groups: members and the rolling-update cursor, one JSON document
-- per group, written with the member events.
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
-- Custom-resource responses kept for whichever process waits for them.
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS callback_responses (
    request_id TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    received_at INTEGER NOT NULL
);
-- Signals to wait condition handles and resources with a CreationPolicy.
CREATE TABLE IF NOT EXISTS signals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    stack_id TEXT NOT NULL,
    logical_id TEXT NOT NULL,
    unique_id TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    data TEXT,
    received_at TEXT NOT NULL,
    UNIQUE (stack_id, logical_id, unique_id)
);
-- Stack notifications: how many of a stack's events each target accepted,
-- and which engine sends to it now (its claim runs out at claim_expires).
CREATE TABLE IF NOT EXISTS notification_targets (
    stack_id TEXT NOT NULL,
    target TEXT NOT NULL,
    delivered INTEGER NOT NULL DEFAULT 0,
    claim_owner TEXT,
    claim_expires INTEGER,
    PRIMARY KEY (stack_id, target)
);
-- Stack refactors: each one's record (JSON, as the API shows it).
CREATE TABLE IF NOT EXISTS stack_refactors (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    refactor_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL
);
-- The type registry: registrations (RegisterType's tokens), each type's
-- versions with their packages, and how many times it changed.
CREATE TABLE IF NOT EXISTS type_registrations (
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
    is_default INTEGER NOT NULL,
    deprecated INTEGER NOT NULL,
    schema TEXT NOT NULL,
    description TEXT NOT NULL,
    handler TEXT NOT NULL,
    secret TEXT,
    package_sha256 TEXT NOT NULL,
    signed_by TEXT,
    package BLOB NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (type_name, version_id)
);
CREATE TABLE IF NOT EXISTS type_registry_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS type_configurations (
    type_name TEXT NOT NULL,
    alias TEXT NOT NULL,
    configuration TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (type_name, alias)
);
-- The audit trail: one row per API call or console action that changed
-- something; body is CloudTrail's record, the columns what queries filter on.
CREATE TABLE IF NOT EXISTS audit_records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    event_time INTEGER NOT NULL,
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
-- Where each audit export target stands (the records are its outbox).
CREATE TABLE IF NOT EXISTS audit_exports (
    target TEXT PRIMARY KEY,
    delivered INTEGER NOT NULL DEFAULT 0,
    claim_owner TEXT,
    claim_expires INTEGER
);
-- Console sessions ended by logging out, until they would have expired.
CREATE TABLE IF NOT EXISTS console_revocations (
    session TEXT PRIMARY KEY,
    until_ms INTEGER NOT NULL
);
"#;

/// The layout version written into `PRAGMA user_version`; bump it with any
/// change to `SCHEMA` that an older file would not have.
const SCHEMA_VERSION: i64 = 21;

/// The columns each layout added, by the layout that added them (layouts
/// 10, 16 and 19 added only tables).
const COLUMN_STEPS: &[(i64, &str)] = &[
    (7, "ALTER TABLE history ADD COLUMN details TEXT;"),
    (8, "ALTER TABLE stacks ADD COLUMN tags TEXT;"),
    (9, "ALTER TABLE change_sets ADD COLUMN tags TEXT; ALTER TABLE operations ADD COLUMN resume_attempts INTEGER NOT NULL DEFAULT 0; ALTER TABLE operations ADD COLUMN resume_events INTEGER NOT NULL DEFAULT 0;"),
    // A nested stack's parent and root, its change sets' nesting, and the
    // HOT files and environment.
    (11, "ALTER TABLE stacks ADD COLUMN parent_id TEXT; ALTER TABLE stacks ADD COLUMN root_id TEXT; ALTER TABLE change_sets ADD COLUMN nested TEXT; ALTER TABLE stacks ADD COLUMN template_context TEXT;"),
    (12, "ALTER TABLE stacks ADD COLUMN capabilities TEXT;"),
    (13, "ALTER TABLE stacks ADD COLUMN termination_protection INTEGER NOT NULL DEFAULT 0;"),
    (14, "ALTER TABLE stacks ADD COLUMN stack_policy TEXT;"),
    (15, "ALTER TABLE stacks ADD COLUMN rollback_configuration TEXT; ALTER TABLE stacks ADD COLUMN notification_arns TEXT;"),
    (17, "ALTER TABLE resources ADD COLUMN type_version TEXT;"),
    (18, "ALTER TABLE events ADD COLUMN hook TEXT;"),
];

/// Layout 20: the resources and events name their stack by its integer
/// key; the tables are rebuilt with every row (events keep their order).
const STACK_KEYS_STEP: &str = "
CREATE TABLE stack_keys (stack_key INTEGER PRIMARY KEY, stack_id TEXT NOT NULL UNIQUE);
INSERT INTO stack_keys (stack_id) SELECT stack_id FROM stacks ORDER BY rowid;
INSERT OR IGNORE INTO stack_keys (stack_id) SELECT stack_id FROM resources;
INSERT OR IGNORE INTO stack_keys (stack_id) SELECT stack_id FROM events;
CREATE TABLE resources_keyed (
    stack_key INTEGER NOT NULL, logical_id TEXT NOT NULL, resource_type TEXT NOT NULL,
    physical_id TEXT, status TEXT NOT NULL, status_reason TEXT, properties TEXT NOT NULL,
    attributes TEXT NOT NULL, pending TEXT, updated_at TEXT NOT NULL, metadata TEXT,
    journal TEXT, no_echo INTEGER NOT NULL DEFAULT 0, type_version TEXT,
    PRIMARY KEY (stack_key, logical_id)
);
INSERT INTO resources_keyed SELECT k.stack_key, r.logical_id, r.resource_type, r.physical_id,
    r.status, r.status_reason, r.properties, r.attributes, r.pending, r.updated_at, r.metadata,
    r.journal, r.no_echo, r.type_version
    FROM resources r JOIN stack_keys k ON k.stack_id = r.stack_id ORDER BY r.rowid;
DROP TABLE resources;
ALTER TABLE resources_keyed RENAME TO resources;
CREATE TABLE events_keyed (
    seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, stack_key INTEGER NOT NULL,
    stack_name TEXT NOT NULL, logical_id TEXT NOT NULL, physical_id TEXT NOT NULL,
    resource_type TEXT NOT NULL, timestamp TEXT NOT NULL, status TEXT NOT NULL,
    status_reason TEXT, properties TEXT, hook TEXT
);
INSERT INTO events_keyed SELECT e.seq, e.event_id, k.stack_key, e.stack_name, e.logical_id,
    e.physical_id, e.resource_type, e.timestamp, e.status, e.status_reason, e.properties, e.hook
    FROM events e JOIN stack_keys k ON k.stack_id = e.stack_id ORDER BY e.seq;
DROP TABLE events;
ALTER TABLE events_keyed RENAME TO events;
";

/// Layout 21: `events.seq` is a plain rowid, not AUTOINCREMENT (see
/// SCHEMA); layout 20's table is rebuilt with every row, seq kept.
const EVENTS_SEQ_STEP: &str = "
CREATE TABLE events_plain (
    seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, stack_key INTEGER NOT NULL,
    stack_name TEXT NOT NULL, logical_id TEXT NOT NULL, physical_id TEXT NOT NULL,
    resource_type TEXT NOT NULL, timestamp TEXT NOT NULL, status TEXT NOT NULL,
    status_reason TEXT, properties TEXT, hook TEXT
);
INSERT INTO events_plain SELECT seq, event_id, stack_key, stack_name, logical_id, physical_id,
    resource_type, timestamp, status, status_reason, properties, hook FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_plain RENAME TO events;
";

/// How many `stacks` tables the file has: 0 for a new file.
const STACKS_TABLES: &str =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'stacks'";

/// A file with another version than this build's is upgraded or refused
/// with a message instead of failing later on a missing column; a new file
/// gets its tables and version from [`create_tables`].
fn check_schema_version(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    // One statement, one snapshot: read apart, a file another process was
    // making could show its tables with the version it had before them.
    let (version, tables): (i64, i64) = conn
        .query_row_cached(
            &format!("SELECT (SELECT user_version FROM pragma_user_version), ({STACKS_TABLES})"),
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(backend)?;
    if tables == 0 {
        return Ok(());
    }
    // Older layouts that only lack new tables (SCHEMA adds them) and
    // columns with defaults are upgraded in place: a file of layout `v`
    // gets every step added after `v`.
    if (6..SCHEMA_VERSION).contains(&version) {
        let added_columns: String = COLUMN_STEPS
            .iter()
            .filter(|(added_in, _)| *added_in > version)
            .map(|(_, step)| *step)
            .collect();
        // Layout 20's step makes the events table as layout 21 has it.
        let keyed = match version {
            ..20 => STACK_KEYS_STEP,
            20 => EVENTS_SEQ_STEP,
            _ => "",
        };
        // Under the write lock, and only if no other process (a command
        // and its follower opening the same old file) upgraded it first.
        conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
        let now: i64 = conn
            .query_row_cached("PRAGMA user_version", [], |r| r.get(0))
            .map_err(backend)?;
        let steps = if now == version {
            format!("{added_columns} {keyed} PRAGMA user_version = {SCHEMA_VERSION};")
        } else {
            String::new()
        };
        return match conn.execute_batch(&format!("{steps} COMMIT;")) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(StoreError::Backend(format!(
                    "state file {} could not be upgraded from layout {version} to {SCHEMA_VERSION}: {e}",
                    path.display()
                )))
            }
        };
    }
    if version != SCHEMA_VERSION {
        return Err(StoreError::Backend(format!(
            "state file {} has layout version {version}, this Cairn uses {SCHEMA_VERSION}; it was written by a different development build: use another --state file",
            path.display()
        )));
    }
    Ok(())
}

/// Creates what a new file lacks in one transaction, with the layout's
/// version: one commit, where the 31 statements run alone made one each (a
/// new state file's open took 1-2 ms more), and another process opening
/// the file sees the tables and their version together or neither. An
/// existing file's statements change nothing and take no write lock; two
/// processes making one new file at once are told BUSY and retried
/// (`retry_busy`), the transaction undone first.
fn create_tables(conn: &Connection) -> rusqlite::Result<()> {
    let made = conn.execute_batch("BEGIN").and_then(|()| {
        let stacks: i64 = conn.query_row_cached(STACKS_TABLES, [], |r| r.get(0))?;
        let version = match stacks == 0 {
            true => format!("PRAGMA user_version = {SCHEMA_VERSION};"),
            false => String::new(),
        };
        conn.execute_batch(&format!("{SCHEMA} {version} COMMIT;"))
    });
    if made.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    made
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn json_text<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(backend)
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn parse_enum<T: std::str::FromStr>(s: &str) -> rusqlite::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    s.parse().map_err(|e: T::Err| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

const STACK_COLUMNS: &str = "stack_id, stack_name, status, status_reason, description, template_body, parameters, no_echo, outputs, on_failure, created_at, updated_at, deleted_at, tags, parent_id, root_id, template_context, capabilities, termination_protection, stack_policy, rollback_configuration, notification_arns";

/// A stack's template context as stored (`NULL` when empty).
fn context_text(c: &cairn_model::stack::TemplateContext) -> Result<Option<String>, StoreError> {
    if c.is_empty() {
        return Ok(None);
    }
    json_text(c).map(Some)
}

fn stack_row(r: &Row<'_>) -> rusqlite::Result<StackRecord> {
    let on_failure: String = r.get(9)?;
    Ok(StackRecord {
        stack_id: r.get(0)?,
        stack_name: r.get(1)?,
        status: enum_col(r, 2)?,
        status_reason: r.get(3)?,
        description: r.get(4)?,
        template_body: r.get(5)?,
        parameters: json_col(r, 6)?,
        no_echo: json_col(r, 7)?,
        outputs: json_col(r, 8)?,
        on_failure: parse_enum::<OnFailure>(&on_failure)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
        deleted_at: r.get(12)?,
        tags: r
            .get::<_, Option<String>>(13)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        parent_id: r.get(14)?,
        root_id: r.get(15)?,
        context: r
            .get::<_, Option<String>>(16)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        capabilities: r
            .get::<_, Option<String>>(17)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        termination_protection: r.get::<_, i64>(18)? != 0,
        stack_policy: r.get(19)?,
        rollback_configuration: r
            .get::<_, Option<String>>(20)?
            .map(|t| from_json(&t))
            .transpose()?,
        notification_arns: r
            .get::<_, Option<String>>(21)?
            .map(|t| from_json(&t))
            .transpose()?
            .unwrap_or_default(),
    })
}

/// Read by the stack's id in ?1 (which is also the first column).
const RESOURCE_COLUMNS: &str = "?1, logical_id, resource_type, physical_id, status, status_reason, properties, attributes, pending, updated_at, metadata, journal, no_echo, type_version";

/// A JSON column decoded from SQLite's own buffer (no copy into a `String`
/// first: reading a large stack decodes tens of thousands of them).
fn json_col<T: serde::de::DeserializeOwned>(r: &Row<'_>, i: usize) -> rusqlite::Result<T> {
    from_json(r.get_ref(i)?.as_str()?)
}

fn opt_json_col<T: serde::de::DeserializeOwned>(
    r: &Row<'_>,
    i: usize,
) -> rusqlite::Result<Option<T>> {
    r.get_ref(i)?.as_str_or_null()?.map(from_json).transpose()
}

fn enum_col<T: std::str::FromStr>(r: &Row<'_>, i: usize) -> rusqlite::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    parse_enum(r.get_ref(i)?.as_str()?)
}

fn resource_row(r: &Row<'_>) -> rusqlite::Result<ResourceRecord> {
    Ok(ResourceRecord {
        stack_id: r.get(0)?,
        logical_id: r.get(1)?,
        resource_type: r.get(2)?,
        physical_id: r.get(3)?,
        status: enum_col(r, 4)?,
        status_reason: r.get(5)?,
        properties: json_col(r, 6)?,
        attributes: json_col(r, 7)?,
        pending: opt_json_col::<PendingCall>(r, 8)?,
        updated_at: r.get(9)?,
        metadata: opt_json_col(r, 10)?,
        journal: opt_json_col::<Journal>(r, 11)?,
        no_echo: r.get(12)?,
        type_version: r.get(13)?,
    })
}

fn event_row(r: &Row<'_>) -> rusqlite::Result<EventRecord> {
    Ok(EventRecord {
        event_id: r.get(0)?,
        stack_id: r.get(1)?,
        stack_name: r.get(2)?,
        logical_id: r.get(3)?,
        physical_id: r.get(4)?,
        resource_type: r.get(5)?,
        timestamp: r.get(6)?,
        status: parse_enum(&r.get::<_, String>(7)?)?,
        status_reason: r.get(8)?,
        properties: r.get(9)?,
        hook: opt_json_col(r, 10)?,
    })
}

/// `execute` and `query_row` through the connection's statement cache.
/// `Connection::execute` and `query_row` parse and plan their text again
/// on every call: a stack read names ~30 columns, and in `cairn serve` the
/// writer spent a twentieth of its time preparing the same few statements
/// for each DescribeStacks poll and each operation's reads and status
/// writes.
trait Cached {
    fn execute_cached<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    fn query_row_cached<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn execute_cached<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn query_row_cached<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

/// The stack's integer key in `resources` and `events`: made with the
/// stack, or here for a stack whose rows come first.
fn stack_key(c: &Connection, stack_id: &str) -> Result<i64, StoreError> {
    let known: Option<i64> = c
        .prepare_cached("SELECT stack_key FROM stack_keys WHERE stack_id = ?1")
        .map_err(backend)?
        .query_row(params![stack_id], |r| r.get(0))
        .optional()
        .map_err(backend)?;
    match known {
        Some(key) => Ok(key),
        None => {
            c.prepare_cached("INSERT INTO stack_keys (stack_id) VALUES (?1)")
                .map_err(backend)?
                .execute(params![stack_id])
                .map_err(backend)?;
            Ok(c.last_insert_rowid())
        }
    }
}

/// `(SELECT stack_key …)` of the stack id in parameter `$p`, for reads.
macro_rules! key_of {
    ($p:literal) => {
        concat!(
            "(SELECT stack_key FROM stack_keys WHERE stack_id = ",
            $p,
            ")"
        )
    };
}

/// Events of a job whose stack (`stack`, `key`) is known: another
/// stack's key is looked up.
fn insert_events(
    c: &Tx,
    (stack, key): (&str, i64),
    events: &[EventRecord],
) -> Result<(), StoreError> {
    for e in events {
        let key = match e.stack_id == stack {
            true => key,
            false => stack_key(c, &e.stack_id)?,
        };
        insert_event(c, key, e)?;
    }
    Ok(())
}

const INSERT_EVENT: &str = "INSERT INTO events (event_id, stack_key, stack_name, logical_id, physical_id, resource_type, timestamp, status, status_reason, properties, hook) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

const REMOVE_RESOURCE: &str = "DELETE FROM resources WHERE stack_key = ?1 AND logical_id = ?2";

fn insert_event(c: &Tx, key: i64, e: &EventRecord) -> Result<(), StoreError> {
    c.statement(Hot::Event)?
        .execute(params![
            e.event_id,
            key,
            e.stack_name,
            e.logical_id,
            e.physical_id,
            e.resource_type,
            e.timestamp,
            e.status.as_str(),
            e.status_reason,
            e.properties,
            e.hook.as_ref().map(json_text).transpose()?
        ])
        .map_err(backend)?;
    Ok(())
}

/// A terminal status ends the stack's open history entry and removes the
/// change set it executed (in the same transaction as the status).
fn end_operation(
    c: &Connection,
    stack_id: &str,
    status: StackStatus,
    at: &str,
) -> Result<(), StoreError> {
    c.execute_cached(
        "UPDATE history SET ended_at = ?1, status = ?2 WHERE stack_id = ?3 AND ended_at IS NULL",
        params![at, status.as_str(), stack_id],
    )
    .map_err(backend)?;
    // CloudFormation removes a stack's change sets once one is executed, the
    // executed one included (the others went when it started): it stays
    // listed while it runs, then only the history entry names it.
    c.execute_cached(
        "DELETE FROM change_sets WHERE stack_id = ?1 AND execution_status = 'EXECUTE_IN_PROGRESS'",
        params![stack_id],
    )
    .map_err(backend)?;
    Ok(())
}

const HISTORY_COLUMNS: &str = "stack_id, kind, change_set, template_body, parameters, started_at, ended_at, status, status_reason, details";

fn history_row(r: &Row<'_>) -> rusqlite::Result<HistoryRecord> {
    Ok(HistoryRecord {
        stack_id: r.get(0)?,
        kind: parse_enum(&r.get::<_, String>(1)?)?,
        change_set: r.get(2)?,
        template_body: r.get(3)?,
        parameters: json_col(r, 4)?,
        started_at: r.get(5)?,
        ended_at: r.get(6)?,
        status: r.get(7)?,
        status_reason: r.get(8)?,
        details: r
            .get::<_, Option<String>>(9)?
            .and_then(|t| serde_json::from_str(&t).ok()),
    })
}

const CHANGE_SET_COLUMNS: &str = "change_set_id, change_set_name, stack_id, stack_name, change_set_type, status, execution_status, status_reason, description, template_body, parameters, no_echo, changes, created_at, base_version, tags, nested";

fn change_set_row(r: &Row<'_>) -> rusqlite::Result<ChangeSetRecord> {
    Ok(ChangeSetRecord {
        change_set_id: r.get(0)?,
        change_set_name: r.get(1)?,
        stack_id: r.get(2)?,
        stack_name: r.get(3)?,
        change_set_type: parse_enum(&r.get::<_, String>(4)?)?,
        status: parse_enum(&r.get::<_, String>(5)?)?,
        execution_status: parse_enum(&r.get::<_, String>(6)?)?,
        status_reason: r.get(7)?,
        description: r.get(8)?,
        template_body: r.get(9)?,
        parameters: json_col(r, 10)?,
        no_echo: json_col(r, 11)?,
        changes: json_col(r, 12)?,
        created_at: r.get(13)?,
        base_version: r.get(14)?,
        tags: r
            .get::<_, Option<String>>(15)?
            .and_then(|t| serde_json::from_str(&t).ok()),
        nested: r
            .get::<_, Option<String>>(16)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
    })
}

/// The embedded SQLite store.
pub struct SqliteStore {
    jobs: mpsc::Sender<Job>,
}

/// Runs `f` again while SQLite answers busy, for up to ten seconds: two
/// processes opening the same new file at once (a command and its
/// follower) both hold a read lock and want a write lock to switch it to
/// WAL or create the tables; SQLite refuses one of them at once instead of
/// waiting (that wait could deadlock), so the refused one waits here.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let started = std::time::Instant::now();
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < std::time::Duration::from_secs(10) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(25))
            }
            other => return other,
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the state file at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let mut conn = Connection::open(path).map_err(|e| {
            StoreError::Backend(format!("cannot open state file {}: {e}", path.display()))
        })?;
        // The busy timeout first: switching a new file to WAL takes a lock,
        // and two processes opening the same new file at once (a command
        // and its follower) must wait for each other, not fail.
        // The page cache (16 MiB, as used; SQLite's default is 2): a large
        // stack's operation touches its rows, their key index and the
        // events' right edge in every commit; with 2 MiB a 10,000-resource
        // create and delete read ~14,000 pages back from the file.
        retry_busy(|| conn.execute_batch("PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -16384;"))
            .map_err(|e| StoreError::Backend(format!("state file {} is not usable: {e}", path.display())))?;
        check_schema_version(&conn, path)?;
        retry_busy(|| create_tables(&conn)).map_err(|e| {
            StoreError::Backend(format!(
                "state file {} is not a Cairn state file: {e}",
                path.display()
            ))
        })?;
        // Every statement the store runs stays prepared (rusqlite keeps 16
        // by default; the writer's own and a resource step's are ten).
        conn.set_prepared_statement_cache_capacity(128);
        writer::ready(&conn).map_err(|e| {
            StoreError::Backend(format!(
                "state file {} is not a Cairn state file: {e}",
                path.display()
            ))
        })?;
        checkpoint::start(&mut conn, path);
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("cairn-sqlite".into())
            .spawn(move || writer::run(conn, rx))
            .map_err(backend)?;
        Ok(SqliteStore { jobs: tx })
    }

    /// Runs statements whose only parameter (?1) is the lease's stack id, after
    /// the fence check, in one job.
    async fn fenced(&self, lease: &Lease, statements: &[&'static str]) -> Result<(), StoreError> {
        let (lease, statements) = (lease.clone(), statements.to_vec());
        self.run(move |c| {
            fence(c, &lease)?;
            for sql in statements {
                c.execute_cached(sql, params![lease.stack_id])
                    .map_err(backend)?;
            }
            Ok(())
        })
        .await
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        let job = Job::Once(Box::new(move |conn| writer::held(f(conn), tx)));
        self.jobs
            .send(job)
            .map_err(|_| StoreError::Backend("the state file writer has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Backend("the state file writer has stopped".into()))?
    }

    /// Runs `write` under `lease`, after the fence check, in one job (see
    /// [`writer`]: it may run twice in one transaction, the first attempt
    /// rolled back).
    async fn run_fenced(
        &self,
        lease: &Lease,
        write: impl Fn(&Tx, i64) -> Result<(), StoreError> + Send + 'static,
    ) -> Result<(), StoreError> {
        let (answer, rx) = oneshot::channel();
        let job = Job::Fenced {
            lease: lease.clone(),
            write: Box::new(write),
            answer,
        };
        self.jobs
            .send(job)
            .map_err(|_| StoreError::Backend("the state file writer has stopped".into()))?;
        let answered = rx
            .await
            .map_err(|_| StoreError::Backend("the state file writer has stopped".into()))?;
        // Freed here, on the thread that made it (see `Answered`).
        drop(answered.spent);
        answered.result
    }
}

impl SqliteStore {
    /// Every table's rows, oldest first, for copying the state elsewhere
    /// (`cairn migrate-state`).
    pub async fn dump(&self) -> Result<Vec<TableDump>, StoreError> {
        self.run(|c| {
            let mut tables = Vec::with_capacity(cairn_store::TABLES.len());
            for name in cairn_store::TABLES {
                // Rows that name their stack by its key name it by its id,
                // as every other store does.
                let keyed = c
                    .prepare(&format!("SELECT * FROM {name} LIMIT 0"))
                    .map_err(backend)?
                    .column_names()
                    .any(|c| c == "stack_key");
                let query = match keyed {
                    true => format!("SELECT (SELECT k.stack_id FROM stack_keys k WHERE k.stack_key = t.stack_key) AS stack_id, t.* FROM {name} t ORDER BY t.rowid"),
                    false => format!("SELECT * FROM {name} ORDER BY rowid"),
                };
                let mut st = c.prepare(&query).map_err(backend)?;
                let all: Vec<String> = st.column_names().map(String::from).collect();
                let width = all.len();
                let shown = |i: &usize| all[*i] != "stack_key";
                let columns: Vec<String> = (0..width).filter(shown).map(|i| all[i].clone()).collect();
                let rows = st
                    .query_map([], |r| {
                        (0..width)
                            .filter(shown)
                            .map(|i| {
                                Ok(match r.get_ref(i)? {
                                    rusqlite::types::ValueRef::Null => Cell::Null,
                                    rusqlite::types::ValueRef::Integer(n) => Cell::Int(n),
                                    rusqlite::types::ValueRef::Real(x) => Cell::Real(x),
                                    rusqlite::types::ValueRef::Text(t) => {
                                        Cell::Text(String::from_utf8_lossy(t).into_owned())
                                    }
                                    rusqlite::types::ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
                                })
                            })
                            .collect::<Result<Vec<Cell>, rusqlite::Error>>()
                    })
                    .map_err(backend)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(backend)?;
                tables.push(TableDump {
                    name: name.to_string(),
                    columns,
                    rows,
                });
            }
            Ok(tables)
        })
        .await
    }
}

/// A stack's new status, its event, and what the status ends.
fn write_status(
    c: &Connection,
    stack_id: &str,
    status: StackStatus,
    reason: Option<&str>,
    event: &EventRecord,
) -> Result<(), StoreError> {
    let deleted_at = (status == StackStatus::DeleteComplete).then(|| event.timestamp.clone());
    c.execute_cached(
        "UPDATE stacks SET status = ?1, status_reason = ?2, updated_at = ?3, deleted_at = COALESCE(?4, deleted_at) WHERE stack_id = ?5",
        params![status.as_str(), reason, event.timestamp, deleted_at, stack_id],
    )
    .map_err(backend)?;
    if let Some(r) = reason.filter(|r| *r != "User Initiated") {
        // The operation's reason is the latest one it was given (why
        // it rolled back), unless its terminal status has its own.
        c.execute_cached(
            "UPDATE history SET status_reason = ?1 WHERE stack_id = ?2 AND ended_at IS NULL",
            params![r, stack_id],
        )
        .map_err(backend)?;
    }
    if !status.is_in_progress() && status != StackStatus::ReviewInProgress {
        end_operation(c, stack_id, status, &event.timestamp)?;
    }
    insert_event(&Tx::cached(c), stack_key(c, &event.stack_id)?, event)
}

/// The stack's stored fields (not its status).
fn write_stack_fields(c: &Connection, s: &StackRecord) -> Result<(), StoreError> {
    c.execute_cached(
        "UPDATE stacks SET description = ?1, template_body = ?2, parameters = ?3, no_echo = ?4, outputs = ?5, on_failure = ?6, updated_at = ?7, tags = ?9, template_context = ?10, capabilities = ?11, rollback_configuration = ?12 WHERE stack_id = ?8",
        params![
            s.description,
            s.template_body,
            json_text(&s.parameters)?,
            json_text(&s.no_echo)?,
            json_text(&s.outputs)?,
            s.on_failure.as_str(),
            s.updated_at,
            s.stack_id,
            json_text(&s.tags)?,
            context_text(&s.context)?,
            json_text(&s.capabilities)?,
            s.rollback_configuration.as_ref().map(json_text).transpose()?
        ],
    )
    .map_err(backend)?;
    Ok(())
}

fn write_history(c: &Connection, h: &HistoryRecord) -> Result<(), StoreError> {
    c.execute_cached(
        &format!("INSERT INTO history ({HISTORY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
        params![
            h.stack_id,
            h.kind.as_str(),
            h.change_set,
            h.template_body,
            json_text(&h.parameters)?,
            h.started_at,
            h.ended_at,
            h.status,
            h.status_reason,
            h.details.as_ref().map(json_text).transpose()?
        ],
    )
    .map_err(backend)?;
    Ok(())
}

/// A change set starts executing: the stack's others go.
fn write_change_set_execution(c: &Connection, stack_id: &str, id: &str) -> Result<(), StoreError> {
    c.execute_cached(
        "DELETE FROM change_sets WHERE stack_id = ?1 AND change_set_id != ?2",
        params![stack_id, id],
    )
    .map_err(backend)?;
    c.execute_cached(
        "UPDATE change_sets SET execution_status = 'EXECUTE_IN_PROGRESS' WHERE change_set_id = ?1",
        params![id],
    )
    .map_err(backend)?;
    Ok(())
}

/// Starts an operation's record (a new one starts afresh: cancel flag and
/// resume counts too).
fn write_operation(c: &Connection, op: &OperationRecord) -> Result<(), StoreError> {
    c.execute_cached(
        "INSERT OR REPLACE INTO operations (stack_id, kind, options, started_at) VALUES (?1, ?2, ?3, ?4)",
        params![op.stack_id, op.kind.as_str(), json_text(&op.options)?, op.started_at],
    )
    .map_err(backend)?;
    Ok(())
}

/// The statement that writes one resource row (inserted, or replacing the
/// row of its logical id).
const WRITE_RESOURCE: &str = "INSERT INTO resources (stack_key, logical_id, resource_type, physical_id, status, status_reason, properties, attributes, pending, updated_at, metadata, journal, no_echo, type_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
         ON CONFLICT(stack_key, logical_id) DO UPDATE SET resource_type = excluded.resource_type, physical_id = excluded.physical_id,
           status = excluded.status, status_reason = excluded.status_reason, properties = excluded.properties,
           attributes = excluded.attributes, pending = excluded.pending, updated_at = excluded.updated_at,
           metadata = excluded.metadata, journal = excluded.journal, no_echo = excluded.no_echo,
           type_version = excluded.type_version";

/// A resource row as it is written: its JSON columns encoded by the
/// caller, so the one writer thread (every write of the process waits
/// for it) only binds and steps.
struct ResourceRow {
    stack_id: String,
    logical_id: String,
    resource_type: String,
    physical_id: Option<String>,
    status: &'static str,
    status_reason: Option<String>,
    properties: String,
    attributes: String,
    pending: Option<String>,
    updated_at: String,
    metadata: Option<String>,
    journal: Option<String>,
    no_echo: bool,
    type_version: Option<String>,
}

impl ResourceRow {
    fn of(r: &ResourceRecord) -> Result<ResourceRow, StoreError> {
        Ok(ResourceRow {
            stack_id: r.stack_id.clone(),
            logical_id: r.logical_id.clone(),
            resource_type: r.resource_type.clone(),
            physical_id: r.physical_id.clone(),
            status: r.status.as_str(),
            status_reason: r.status_reason.clone(),
            properties: json_text(&r.properties)?,
            attributes: json_text(&r.attributes)?,
            pending: r.pending.as_ref().map(json_text).transpose()?,
            updated_at: r.updated_at.clone(),
            metadata: r.metadata.as_ref().map(json_text).transpose()?,
            journal: r.journal.as_ref().map(json_text).transpose()?,
            no_echo: r.no_echo,
            type_version: r.type_version.clone(),
        })
    }

    /// Writes the row; (`stack`, `key`) is the job's stack and its key
    /// (the fence's): a row of another stack has its key looked up.
    fn write(&self, c: &Tx, (stack, key): (&str, i64)) -> Result<(), StoreError> {
        let key = match stack == self.stack_id {
            true => key,
            false => stack_key(c, &self.stack_id)?,
        };
        c.statement(Hot::Row)?
            .execute(params![
                key,
                self.logical_id,
                self.resource_type,
                self.physical_id,
                self.status,
                self.status_reason,
                self.properties,
                self.attributes,
                self.pending,
                self.updated_at,
                self.metadata,
                self.journal,
                self.no_echo,
                self.type_version
            ])
            .map_err(backend)?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Stacks for SqliteStore {
    async fn insert_stack(
        &self,
        s: &StackRecord,
        first_event: &EventRecord,
        operation: Option<&OperationRecord>,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        let s = s.clone();
        let e = first_event.clone();
        let operation = operation.cloned();
        let owner = owner.to_string();
        self.run(move |c| {
            let live: i64 = c
                .query_row_cached("SELECT COUNT(*) FROM stacks WHERE stack_name = ?1 AND status != 'DELETE_COMPLETE'", params![s.stack_name], |r| r.get(0))
                .map_err(backend)?;
            if live > 0 {
                return Err(StoreError::StackExists(s.stack_name.clone()));
            }
            c.execute_cached(
                &format!("INSERT INTO stacks ({STACK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"),
                params![
                    s.stack_id,
                    s.stack_name,
                    s.status.as_str(),
                    s.status_reason,
                    s.description,
                    s.template_body,
                    json_text(&s.parameters)?,
                    json_text(&s.no_echo)?,
                    json_text(&s.outputs)?,
                    s.on_failure.as_str(),
                    s.created_at,
                    s.updated_at,
                    s.deleted_at,
                    json_text(&s.tags)?,
                    s.parent_id,
                    s.root_id,
                    context_text(&s.context)?,
                    json_text(&s.capabilities)?,
                    s.termination_protection,
                    s.stack_policy,
                    s.rollback_configuration.as_ref().map(json_text).transpose()?,
                    json_text(&s.notification_arns)?
                ],
            )
            .map_err(backend)?;
            for target in &s.notification_arns {
                c.execute_cached(
                    "INSERT OR IGNORE INTO notification_targets (stack_id, target, delivered) VALUES (?1, ?2, 0)",
                    params![s.stack_id, target],
                )
                .map_err(backend)?;
            }
            c.execute_cached(
                "INSERT INTO leases (stack_id, owner, expires, token) VALUES (?3, ?1, ?2, 1) ON CONFLICT(stack_id) DO UPDATE SET owner = ?1, expires = ?2, token = token + 1",
                params![owner, now_ms() + ttl_ms, s.stack_id],
            )
            .map_err(backend)?;
            insert_event(&Tx::cached(c), stack_key(c, &s.stack_id)?, &e)?;
            if let Some(op) = &operation {
                write_operation(c, op)?;
            }
            Ok(Lease { stack_id: s.stack_id.clone(), owner, token: 1 })
        })
        .await
    }

    async fn find_stack(&self, name_or_id: &str) -> Result<Option<StackRecord>, StoreError> {
        let key = name_or_id.to_string();
        self.run(move |c| {
            let by_id = c
                .query_row_cached(&format!("SELECT {STACK_COLUMNS} FROM stacks WHERE stack_id = ?1"), params![key], stack_row)
                .optional()
                .map_err(backend)?;
            if by_id.is_some() {
                return Ok(by_id);
            }
            c.query_row_cached(
                &format!("SELECT {STACK_COLUMNS} FROM stacks WHERE stack_name = ?1 AND status != 'DELETE_COMPLETE' ORDER BY created_at DESC LIMIT 1"),
                params![key],
                stack_row,
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn list_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        self.run(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {STACK_COLUMNS} FROM stacks ORDER BY created_at, rowid"
                ))
                .map_err(backend)?;
            let rows = st.query_map([], stack_row).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn in_progress_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        // Every command asks this at start-up: filter in SQL, not over all stacks.
        self.run(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {STACK_COLUMNS} FROM stacks WHERE status LIKE '%\\_IN\\_PROGRESS' ESCAPE '\\' AND status != 'REVIEW_IN_PROGRESS' ORDER BY created_at, rowid"
                ))
                .map_err(backend)?;
            let rows = st.query_map([], stack_row).map_err(backend)?;
            let stacks = rows.collect::<Result<Vec<_>, _>>().map_err(backend)?;
            Ok(stacks.into_iter().filter(|s| s.status.is_in_progress()).collect())
        })
        .await
    }

    async fn set_stack_status(
        &self,
        lease: &Lease,
        status: StackStatus,
        reason: Option<&str>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let (lease, reason, event) = (lease.clone(), reason.map(str::to_string), event.clone());
        self.run(move |c| {
            fence(c, &lease)?;
            write_status(c, &lease.stack_id, status, reason.as_deref(), &event)
        })
        .await
    }

    async fn set_termination_protection(
        &self,
        stack_id: &str,
        enabled: bool,
    ) -> Result<bool, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            c.execute_cached(
                "UPDATE stacks SET termination_protection = ?2 WHERE stack_id = ?1",
                params![id, enabled],
            )
            .map(|n| n > 0)
            .map_err(backend)
        })
        .await
    }

    async fn set_stack_policy(&self, stack_id: &str, policy: &str) -> Result<bool, StoreError> {
        let (id, policy) = (stack_id.to_string(), policy.to_string());
        self.run(move |c| {
            c.execute_cached(
                "UPDATE stacks SET stack_policy = ?2 WHERE stack_id = ?1",
                params![id, policy],
            )
            .map(|n| n > 0)
            .map_err(backend)
        })
        .await
    }

    async fn save_stack(&self, lease: &Lease, s: &StackRecord) -> Result<(), StoreError> {
        let (lease, s) = (lease.clone(), s.clone());
        self.run(move |c| {
            fence(c, &lease)?;
            write_stack_fields(c, &s)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Leases for SqliteStore {
    async fn acquire_lease(
        &self,
        stack_id: &str,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        let (id, owner) = (stack_id.to_string(), owner.to_string());
        self.run(move |c| {
            let now = now_ms();
            let current: Option<(Option<String>, i64, i64)> = c
                .query_row_cached(
                    "SELECT owner, expires, token FROM leases WHERE stack_id = ?1",
                    params![id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(backend)?;
            let Some((holder, expires, token)) = current else {
                return Err(StoreError::NoSuchStack(id));
            };
            if let Some(h) = holder {
                if expires > now && h != owner {
                    return Err(StoreError::Busy {
                        stack: id,
                        owner: h,
                    });
                }
            }
            let token = token + 1;
            c.execute_cached(
                "UPDATE leases SET owner = ?1, expires = ?2, token = ?3 WHERE stack_id = ?4",
                params![owner, now + ttl_ms, token, id],
            )
            .map_err(backend)?;
            Ok(Lease {
                stack_id: id,
                owner,
                token,
            })
        })
        .await
    }

    async fn renew_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        let lease = lease.clone();
        self.run(move |c| {
            fence(c, &lease)?;
            c.execute_cached(
                "UPDATE leases SET expires = ?1 WHERE stack_id = ?2",
                params![now_ms() + ttl_ms, lease.stack_id],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn lease_owner(&self, stack_id: &str) -> Result<Option<String>, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            let row: Option<(Option<String>, i64)> = c
                .query_row_cached(
                    "SELECT owner, expires FROM leases WHERE stack_id = ?1",
                    params![id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(backend)?;
            Ok(match row {
                Some((Some(o), exp)) if exp > now_ms() => Some(o),
                _ => None,
            })
        })
        .await
    }

    async fn break_lease(&self, stack_id: &str, owner: &str) -> Result<(), StoreError> {
        let (id, owner) = (stack_id.to_string(), owner.to_string());
        self.run(move |c| {
            c.execute_cached(
                "UPDATE leases SET expires = 0 WHERE stack_id = ?1 AND owner = ?2",
                params![id, owner],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        self.fenced(
            lease,
            &["UPDATE leases SET owner = NULL, expires = 0 WHERE stack_id = ?1"],
        )
        .await
    }

    async fn hand_off_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        let lease = lease.clone();
        self.run(move |c| {
            fence(c, &lease)?;
            c.execute_cached(
                "UPDATE leases SET owner = NULL, expires = ?1 WHERE stack_id = ?2",
                params![now_ms() + ttl_ms, lease.stack_id],
            )
            .map_err(backend)?;
            Ok(())
        })
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
        let owners = owners.to_vec();
        // One writer thread: the select and the updates cannot interleave
        // with another claim.
        self.run(move |c| {
            let now = now_ms();
            let free = {
                let mut st = c
                    .prepare_cached(
                        "SELECT l.stack_id, l.owner, l.token FROM leases l JOIN stacks s ON s.stack_id = l.stack_id \
                         WHERE s.status LIKE '%\\_IN\\_PROGRESS' ESCAPE '\\' AND s.status != 'REVIEW_IN_PROGRESS' \
                         AND NOT EXISTS (SELECT 1 FROM stacks p WHERE p.stack_id = s.parent_id AND p.status LIKE '%\\_IN\\_PROGRESS' ESCAPE '\\') \
                         AND ((l.owner IS NULL AND ?3) OR l.expires <= ?1) ORDER BY s.created_at, s.rowid LIMIT ?2",
                    )
                    .map_err(backend)?;
                let rows = st
                    .query_map(params![now, owners.len() as i64, handed_off], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, i64>(2)?))
                    })
                    .map_err(backend)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(backend)?
            };
            let mut claims = Vec::with_capacity(free.len());
            for ((stack_id, taken_from, token), owner) in free.into_iter().zip(owners) {
                let token = token + 1;
                c.execute_cached(
                    "UPDATE leases SET owner = ?1, expires = ?2, token = ?3 WHERE stack_id = ?4",
                    params![owner, now + ttl_ms, token, stack_id],
                )
                .map_err(backend)?;
                claims.push(Claim {
                    lease: Lease {
                        stack_id,
                        owner,
                        token,
                    },
                    taken_from,
                });
            }
            Ok(claims)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Operations for SqliteStore {
    async fn begin_operation(
        &self,
        lease: &Lease,
        start: &OperationStart,
    ) -> Result<(), StoreError> {
        let (lease, start) = (lease.clone(), start.clone());
        let rows = start
            .rows
            .iter()
            .map(ResourceRow::of)
            .collect::<Result<Vec<_>, _>>()?;
        self.run(move |c| {
            let key = fence(c, &lease)?;
            write_operation(c, &start.operation)?;
            if let Some(id) = &start.change_set_id {
                write_change_set_execution(c, &lease.stack_id, id)?;
            }
            write_stack_fields(c, &start.stack)?;
            for row in &rows {
                row.write(&Tx::cached(c), (&lease.stack_id, key))?;
            }
            for logical_id in &start.removed_rows {
                c.execute_cached(
                    "DELETE FROM resources WHERE stack_key = ?1 AND logical_id = ?2",
                    params![key, logical_id],
                )
                .map_err(backend)?;
            }
            write_history(c, &start.history)?;
            write_status(
                c,
                &lease.stack_id,
                start.stack.status,
                start.stack.status_reason.as_deref(),
                &start.event,
            )
        })
        .await
    }

    async fn operation(&self, stack_id: &str) -> Result<Option<OperationRecord>, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            c.query_row_cached(
                "SELECT stack_id, kind, options, started_at FROM operations WHERE stack_id = ?1",
                params![id],
                |r| {
                    Ok(OperationRecord {
                        stack_id: r.get(0)?,
                        kind: parse_enum(&r.get::<_, String>(1)?)?,
                        options: json_col(r, 2)?,
                        started_at: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn note_resume(&self, stack_id: &str) -> Result<u32, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            let events: i64 = c
                .query_row_cached(
                    concat!("SELECT COUNT(*) FROM events WHERE stack_key = ", key_of!("?1")),
                    params![id],
                    |r| r.get(0),
                )
                .map_err(backend)?;
            let last: Option<(i64, i64)> = c
                .query_row_cached(
                    "SELECT resume_attempts, resume_events FROM operations WHERE stack_id = ?1",
                    params![id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(backend)?;
            let Some((attempts, at_events)) = last else {
                return Ok(1);
            };
            let attempts = if events > at_events { 1 } else { attempts + 1 };
            c.execute_cached(
                "UPDATE operations SET resume_attempts = ?1, resume_events = ?2 WHERE stack_id = ?3",
                params![attempts, events, id],
            )
            .map_err(backend)?;
            Ok(u32::try_from(attempts).unwrap_or(u32::MAX))
        })
        .await
    }

    async fn clear_operation(&self, lease: &Lease) -> Result<(), StoreError> {
        self.fenced(lease, &["DELETE FROM operations WHERE stack_id = ?1"])
            .await
    }

    async fn set_operation_options(
        &self,
        lease: &Lease,
        options: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let (lease, options) = (lease.clone(), json_text(options)?);
        self.run(move |c| {
            fence(c, &lease)?;
            c.execute_cached(
                "UPDATE operations SET options = ?1 WHERE stack_id = ?2",
                params![options, lease.stack_id],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn request_cancel(&self, stack_id: &str) -> Result<bool, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            c.execute_cached(
                "UPDATE operations SET cancel = 1 WHERE stack_id = ?1 AND kind = 'UPDATE'",
                params![id],
            )
            .map(|n| n > 0)
            .map_err(backend)
        })
        .await
    }

    async fn cancel_requested(&self, stack_id: &str) -> Result<bool, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            c.query_row_cached(
                "SELECT cancel FROM operations WHERE stack_id = ?1",
                params![id],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map(|v| v.unwrap_or(0) != 0)
            .map_err(backend)
        })
        .await
    }

    async fn open_history(&self, lease: &Lease, h: &HistoryRecord) -> Result<(), StoreError> {
        let (lease, h) = (lease.clone(), h.clone());
        self.run(move |c| {
            fence(c, &lease)?;
            write_history(c, &h)
        })
        .await
    }

    async fn set_history_details(
        &self,
        lease: &Lease,
        details: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let (lease, details) = (lease.clone(), json_text(details)?);
        self.run(move |c| {
            fence(c, &lease)?;
            c.execute_cached(
                "UPDATE history SET details = ?1 WHERE stack_id = ?2 AND ended_at IS NULL",
                params![details, lease.stack_id],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn history(&self, stack_id: &str) -> Result<Vec<HistoryRecord>, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {HISTORY_COLUMNS} FROM history WHERE stack_id = ?1 ORDER BY seq"
                ))
                .map_err(backend)?;
            let rows = st.query_map(params![id], history_row).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Resources for SqliteStore {
    async fn put_resource(
        &self,
        lease: &Lease,
        r: &ResourceRecord,
        events: Vec<EventRecord>,
    ) -> Result<(), StoreError> {
        let (stack, row) = (lease.stack_id.clone(), ResourceRow::of(r)?);
        self.run_fenced(lease, move |c, key| {
            row.write(c, (&stack, key))?;
            insert_events(c, (&stack, key), &events)
        })
        .await
    }

    async fn remove_resource(
        &self,
        lease: &Lease,
        logical_id: &str,
        events: &[EventRecord],
    ) -> Result<(), StoreError> {
        let (stack, logical_id, events) = (
            lease.stack_id.clone(),
            logical_id.to_string(),
            events.to_vec(),
        );
        self.run_fenced(lease, move |c, key| {
            c.statement(Hot::Remove)?
                .execute(params![key, logical_id])
                .map_err(backend)?;
            insert_events(c, (&stack, key), &events)
        })
        .await
    }

    async fn clear_journals(&self, lease: &Lease) -> Result<(), StoreError> {
        self.fenced(
            lease,
            &[concat!(
                "UPDATE resources SET journal = NULL WHERE stack_key = ",
                key_of!("?1"),
                " AND journal IS NOT NULL"
            )],
        )
        .await
    }

    async fn resources(&self, stack_id: &str) -> Result<Vec<ResourceRecord>, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            // By logical id, as the primary key's index hands them over (an
            // ORDER BY would make SQLite sort every column of every row,
            // spilling a large stack to a temporary file).
            // Sized first: a large stack's rows are big, and growing the
            // list as they come copied it a dozen times (a fifth of the
            // read).
            let count: i64 = c
                .prepare_cached(concat!(
                    "SELECT COUNT(*) FROM resources WHERE stack_key = ",
                    key_of!("?1")
                ))
                .map_err(backend)?
                .query_row(params![id], |r| r.get(0))
                .map_err(backend)?;
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {RESOURCE_COLUMNS} FROM resources WHERE stack_key = {}",
                    key_of!("?1")
                ))
                .map_err(backend)?;
            let mut rows = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
            for row in st.query_map(params![id], resource_row).map_err(backend)? {
                rows.push(row.map_err(backend)?);
            }
            // The index's order is byte order; made sure of here.
            rows.sort_unstable_by(|a, b| a.logical_id.cmp(&b.logical_id));
            Ok(rows)
        })
        .await
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
        let (lease, logical_id, physical_id, events) = (
            lease.clone(),
            logical_id.to_string(),
            physical_id.to_string(),
            events.to_vec(),
        );
        self.run(move |c| {
            let key = fence(c, &lease)?;
            match state {
                Some(state) => c
                    .prepare_cached(
                        "INSERT INTO groups (stack_id, physical_id, logical_id, state) VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT(stack_id, physical_id) DO UPDATE SET state = excluded.state",
                    )
                    .map_err(backend)?
                    .execute(params![lease.stack_id, physical_id, logical_id, state]),
                None => c.execute_cached(
                    "DELETE FROM groups WHERE stack_id = ?1 AND physical_id = ?2",
                    params![lease.stack_id, physical_id],
                ),
            }
            .map_err(backend)?;
            insert_events(&Tx::cached(c), (&lease.stack_id, key), &events)
        })
        .await
    }

    async fn group(
        &self,
        stack_id: &str,
        physical_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let (stack_id, physical_id) = (stack_id.to_string(), physical_id.to_string());
        self.run(move |c| {
            c.query_row_cached(
                "SELECT state FROM groups WHERE stack_id = ?1 AND physical_id = ?2",
                params![stack_id, physical_id],
                |r| json_col(r, 0),
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn groups(
        &self,
        stack_id: &str,
    ) -> Result<Vec<(String, String, serde_json::Value)>, StoreError> {
        let stack_id = stack_id.to_string();
        self.run(move |c| {
            let mut st = c
                .prepare_cached("SELECT logical_id, physical_id, state FROM groups WHERE stack_id = ?1 ORDER BY logical_id, physical_id")
                .map_err(backend)?;
            let rows = st
                .query_map(params![stack_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, json_col(r, 2)?))
                })
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Events for SqliteStore {
    async fn put_events(&self, lease: &Lease, events: &[EventRecord]) -> Result<(), StoreError> {
        let (stack, events) = (lease.stack_id.clone(), events.to_vec());
        self.run_fenced(lease, move |c, key| {
            insert_events(c, (&stack, key), &events)
        })
        .await
    }

    async fn events_from(
        &self,
        stack_id: &str,
        skip: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let id = stack_id.to_string();
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        self.run(move |c| {
            let mut st = c
                .prepare_cached(concat!("SELECT event_id, ?1, stack_name, logical_id, physical_id, resource_type, timestamp, status, status_reason, properties, hook FROM events WHERE stack_key = ", key_of!("?1"), " ORDER BY seq LIMIT -1 OFFSET ?2"))
                .map_err(backend)?;
            let rows = st.query_map(params![id, skip], event_row).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn events_page(
        &self,
        stack_id: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let id = stack_id.to_string();
        let skip = i64::try_from(skip).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |c| {
            let mut st = c
                .prepare_cached(concat!("SELECT event_id, ?1, stack_name, logical_id, physical_id, resource_type, timestamp, status, status_reason, properties, hook FROM events WHERE stack_key = ", key_of!("?1"), " ORDER BY seq LIMIT ?3 OFFSET ?2"))
                .map_err(backend)?;
            let rows = st.query_map(params![id, skip, limit], event_row).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn event_count(&self, stack_id: &str) -> Result<usize, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            c.query_row_cached(
                concat!(
                    "SELECT COUNT(*) FROM events WHERE stack_key = ",
                    key_of!("?1")
                ),
                params![id],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(backend)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Inbox for SqliteStore {
    async fn callback_secret(&self) -> Result<Vec<u8>, StoreError> {
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh).map_err(backend)?;
        self.run(move |c| {
            c.execute_cached(
                "INSERT OR IGNORE INTO settings (name, value) VALUES ('callback_secret', ?1)",
                params![fresh.as_slice()],
            )
            .map_err(backend)?;
            c.query_row_cached(
                "SELECT value FROM settings WHERE name = 'callback_secret'",
                [],
                |r| r.get(0),
            )
            .map_err(backend)
        })
        .await
    }

    async fn put_callback_response(
        &self,
        request_id: &str,
        body: &[u8],
    ) -> Result<bool, StoreError> {
        let (id, body) = (request_id.to_string(), body.to_vec());
        self.run(move |c| {
            let now = now_ms();
            c.execute_cached(
                "DELETE FROM callback_responses WHERE received_at < ?1",
                params![now - cairn_store::CALLBACK_RESPONSE_TTL_MS],
            )
            .map_err(backend)?;
            let inserted = c
                .execute_cached(
                    "INSERT OR IGNORE INTO callback_responses (request_id, body, received_at) VALUES (?1, ?2, ?3)",
                    params![id, body, now],
                )
                .map_err(backend)?;
            Ok(inserted == 1)
        })
        .await
    }

    async fn callback_responses(
        &self,
        request_ids: &[String],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let ids = request_ids.to_vec();
        self.run(move |c| {
            let mut st = c
                .prepare_cached(
                    "SELECT request_id, body FROM callback_responses WHERE request_id = ?1",
                )
                .map_err(backend)?;
            let mut found = Vec::new();
            for id in ids {
                if let Some(body) = st
                    .query_row(params![id], |r| r.get::<_, Vec<u8>>(1))
                    .optional()
                    .map_err(backend)?
                {
                    found.push((id, body));
                }
            }
            Ok(found)
        })
        .await
    }

    async fn put_signal(&self, signal: &SignalRecord) -> Result<(), StoreError> {
        let s = signal.clone();
        self.run(move |c| {
            c.execute_cached(
                "INSERT INTO signals (stack_id, logical_id, unique_id, status, reason, data, received_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (stack_id, logical_id, unique_id) DO UPDATE SET status = excluded.status, reason = excluded.reason, data = excluded.data, received_at = excluded.received_at",
                params![s.stack_id, s.logical_id, s.unique_id, s.status.as_str(), s.reason, s.data, s.received_at],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn add_signal(&self, signal: &SignalRecord) -> Result<bool, StoreError> {
        let s = signal.clone();
        self.run(move |c| {
            let added = c
                .execute_cached(
                    "INSERT INTO signals (stack_id, logical_id, unique_id, status, reason, data, received_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (stack_id, logical_id, unique_id) DO NOTHING",
                    params![s.stack_id, s.logical_id, s.unique_id, s.status.as_str(), s.reason, s.data, s.received_at],
                )
                .map_err(backend)?;
            Ok(added == 1)
        })
        .await
    }

    async fn signals(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<Vec<SignalRecord>, StoreError> {
        let (stack_id, logical_id) = (stack_id.to_string(), logical_id.to_string());
        self.run(move |c| {
            let mut st = c
                .prepare_cached("SELECT stack_id, logical_id, unique_id, status, reason, data, received_at FROM signals WHERE stack_id = ?1 AND logical_id = ?2 ORDER BY seq")
                .map_err(backend)?;
            let rows = st
                .query_map(params![stack_id, logical_id], |r| {
                    Ok(SignalRecord {
                        stack_id: r.get(0)?,
                        logical_id: r.get(1)?,
                        unique_id: r.get(2)?,
                        status: parse_enum(&r.get::<_, String>(3)?)?,
                        reason: r.get(4)?,
                        data: r.get(5)?,
                        received_at: r.get(6)?,
                    })
                })
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn clear_signals(&self, stack_id: &str, logical_id: &str) -> Result<(), StoreError> {
        let (stack_id, logical_id) = (stack_id.to_string(), logical_id.to_string());
        self.run(move |c| {
            c.execute_cached(
                "DELETE FROM signals WHERE stack_id = ?1 AND logical_id = ?2",
                params![stack_id, logical_id],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }
}

#[async_trait::async_trait]
impl ChangeSets for SqliteStore {
    async fn put_change_set(&self, cs: &ChangeSetRecord) -> Result<(), StoreError> {
        let cs = cs.clone();
        self.run(move |c| {
            let taken: i64 = c
                .query_row_cached(
                    "SELECT COUNT(*) FROM change_sets WHERE stack_id = ?1 AND change_set_name = ?2",
                    params![cs.stack_id, cs.change_set_name],
                    |r| r.get(0),
                )
                .map_err(backend)?;
            if taken > 0 {
                return Err(StoreError::ChangeSetExists(cs.change_set_name.clone()));
            }
            c.execute_cached(
                &format!("INSERT INTO change_sets ({CHANGE_SET_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"),
                params![
                    cs.change_set_id,
                    cs.change_set_name,
                    cs.stack_id,
                    cs.stack_name,
                    cs.change_set_type.as_str(),
                    cs.status.as_str(),
                    cs.execution_status.as_str(),
                    cs.status_reason,
                    cs.description,
                    cs.template_body,
                    json_text(&cs.parameters)?,
                    json_text(&cs.no_echo)?,
                    json_text(&cs.changes)?,
                    cs.created_at,
                    cs.base_version,
                    cs.tags.as_ref().map(json_text).transpose()?,
                    (!cs.nested.is_empty()).then(|| json_text(&cs.nested)).transpose()?
                ],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn find_change_set(
        &self,
        stack_id: &str,
        name_or_id: &str,
    ) -> Result<Option<ChangeSetRecord>, StoreError> {
        let (id, key) = (stack_id.to_string(), name_or_id.to_string());
        self.run(move |c| {
            c.query_row_cached(
                &format!("SELECT {CHANGE_SET_COLUMNS} FROM change_sets WHERE change_set_id = ?2 OR (stack_id = ?1 AND change_set_name = ?2)"),
                params![id, key],
                change_set_row,
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn change_sets(&self, stack_id: &str) -> Result<Vec<ChangeSetRecord>, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {CHANGE_SET_COLUMNS} FROM change_sets WHERE stack_id = ?1 ORDER BY created_at, rowid"
                ))
                .map_err(backend)?;
            let rows = st.query_map(params![id], change_set_row).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn delete_change_set(&self, change_set_id: &str) -> Result<(), StoreError> {
        let id = change_set_id.to_string();
        self.run(move |c| {
            c.execute_cached(
                "DELETE FROM change_sets WHERE change_set_id = ?1",
                params![id],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn obsolete_change_set(
        &self,
        change_set_id: &str,
        reason: &str,
    ) -> Result<(), StoreError> {
        let (id, reason) = (change_set_id.to_string(), reason.to_string());
        self.run(move |c| {
            c.execute_cached(
                "UPDATE change_sets SET execution_status = 'OBSOLETE', status_reason = ?2 WHERE change_set_id = ?1 AND execution_status = 'AVAILABLE'",
                params![id, reason],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }
}

#[async_trait::async_trait]
impl Exports for SqliteStore {
    async fn put_exports(
        &self,
        lease: &Lease,
        exports: &[(String, String)],
    ) -> Result<(), StoreError> {
        let (lease, exports) = (lease.clone(), exports.to_vec());
        self.run(move |c| {
            fence(c, &lease)?;
            for (name, _) in &exports {
                let other: Option<String> = c
                    .query_row_cached(
                        "SELECT s.stack_name FROM exports e JOIN stacks s ON s.stack_id = e.stack_id WHERE e.name = ?1 AND e.stack_id != ?2",
                        params![name, lease.stack_id],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(backend)?;
                if let Some(stack) = other {
                    return Err(StoreError::ExportExists { name: name.clone(), stack });
                }
            }
            c.execute_cached("DELETE FROM exports WHERE stack_id = ?1", params![lease.stack_id]).map_err(backend)?;
            for (name, value) in &exports {
                c.execute_cached("INSERT INTO exports (name, stack_id, value) VALUES (?1, ?2, ?3)", params![name, lease.stack_id, value])
                    .map_err(backend)?;
            }
            Ok(())
        })
        .await
    }

    async fn delete_exports(&self, lease: &Lease) -> Result<(), StoreError> {
        self.fenced(
            lease,
            &[
                "DELETE FROM exports WHERE stack_id = ?1",
                "DELETE FROM imports WHERE stack_id = ?1",
            ],
        )
        .await
    }

    async fn export(&self, name: &str) -> Result<Option<(String, String)>, StoreError> {
        let name = name.to_string();
        self.run(move |c| {
            c.query_row_cached(
                "SELECT value, stack_id FROM exports WHERE name = ?1",
                params![name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn exports(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        self.run(|c| {
            let mut st = c
                .prepare_cached("SELECT name, value, stack_id FROM exports ORDER BY name")
                .map_err(backend)?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }

    async fn put_imports(&self, lease: &Lease, names: &[String]) -> Result<(), StoreError> {
        let (lease, names) = (lease.clone(), names.to_vec());
        self.run(move |c| {
            fence(c, &lease)?;
            c.execute_cached(
                "DELETE FROM imports WHERE stack_id = ?1",
                params![lease.stack_id],
            )
            .map_err(backend)?;
            for n in &names {
                c.execute_cached(
                    "INSERT OR IGNORE INTO imports (stack_id, export_name) VALUES (?1, ?2)",
                    params![lease.stack_id, n],
                )
                .map_err(backend)?;
            }
            Ok(())
        })
        .await
    }

    async fn importers(&self, export_name: &str) -> Result<Vec<String>, StoreError> {
        let name = export_name.to_string();
        self.run(move |c| {
            let mut st = c
                .prepare_cached("SELECT s.stack_name FROM imports i JOIN stacks s ON s.stack_id = i.stack_id WHERE i.export_name = ?1 AND s.status != 'DELETE_COMPLETE' ORDER BY s.stack_name")
                .map_err(backend)?;
            let rows = st.query_map(params![name], |r| r.get(0)).map_err(backend)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(backend)
        })
        .await
    }
}

#[async_trait::async_trait]
impl cairn_store::Notifications for SqliteStore {
    async fn set_notification_targets(
        &self,
        stack_id: &str,
        targets: &[String],
    ) -> Result<(), StoreError> {
        let (id, targets) = (stack_id.to_string(), targets.to_vec());
        self.run(move |c| {
            let listed = json_text(&targets)?;
            c.execute_cached(
                "UPDATE stacks SET notification_arns = ?2 WHERE stack_id = ?1",
                params![id, listed],
            )
            .map_err(backend)?;
            c.execute_cached(
                "DELETE FROM notification_targets WHERE stack_id = ?1 AND target NOT IN (SELECT value FROM json_each(?2))",
                params![id, listed],
            )
            .map_err(backend)?;
            for target in &targets {
                c.execute_cached(
                    concat!("INSERT OR IGNORE INTO notification_targets (stack_id, target, delivered) VALUES (?1, ?2, (SELECT COUNT(*) FROM events WHERE stack_key = ", key_of!("?1"), "))"),
                    params![id, target],
                )
                .map_err(backend)?;
            }
            Ok(())
        })
        .await
    }

    async fn claim_notifications(
        &self,
        owner: &str,
        dead: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<cairn_store::NotificationCursor>, StoreError> {
        let (owner, dead) = (owner.to_string(), json_text(&dead)?);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |c| {
            let now = now_ms();
            let mut st = c
                .prepare_cached(
                    "SELECT t.stack_id, t.target, t.delivered FROM notification_targets t
                     WHERE (t.claim_owner IS NULL OR t.claim_owner = ?1 OR t.claim_expires < ?2
                            OR t.claim_owner IN (SELECT value FROM json_each(?3)))
                       AND t.delivered < (SELECT COUNT(*) FROM events e WHERE e.stack_key = (SELECT k.stack_key FROM stack_keys k WHERE k.stack_id = t.stack_id))
                     ORDER BY t.stack_id, t.target LIMIT ?4",
                )
                .map_err(backend)?;
            let rows = st
                .query_map(params![owner, now, dead, limit], |r| {
                    Ok(cairn_store::NotificationCursor {
                        stack_id: r.get(0)?,
                        target: r.get(1)?,
                        delivered: usize::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                    })
                })
                .map_err(backend)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(backend)?;
            for t in &rows {
                c.execute_cached(
                    "UPDATE notification_targets SET claim_owner = ?3, claim_expires = ?4 WHERE stack_id = ?1 AND target = ?2",
                    params![t.stack_id, t.target, owner, now + ttl_ms],
                )
                .map_err(backend)?;
            }
            Ok(rows)
        })
        .await
    }

    async fn notification_claimants(&self) -> Result<Vec<String>, StoreError> {
        self.run(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT DISTINCT claim_owner FROM notification_targets WHERE claim_owner IS NOT NULL",
                )
                .map_err(backend)?;
            let rows = st.query_map([], |r| r.get(0)).map_err(backend)?;
            rows.collect::<Result<Vec<String>, _>>().map_err(backend)
        })
        .await
    }

    async fn notified(
        &self,
        owner: &str,
        cursor: &cairn_store::NotificationCursor,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let (owner, t) = (owner.to_string(), cursor.clone());
        let delivered = i64::try_from(t.delivered).unwrap_or(i64::MAX);
        self.run(move |c| {
            c.execute_cached(
                "UPDATE notification_targets SET delivered = ?3, claim_expires = ?5 WHERE stack_id = ?1 AND target = ?2 AND claim_owner = ?4",
                params![t.stack_id, t.target, delivered, owner, now_ms() + ttl_ms],
            )
            .map(|n| n > 0)
            .map_err(backend)
        })
        .await
    }

    async fn release_notification(
        &self,
        owner: &str,
        cursor: &cairn_store::NotificationCursor,
    ) -> Result<(), StoreError> {
        let (owner, t) = (owner.to_string(), cursor.clone());
        self.run(move |c| {
            c.execute_cached(
                "UPDATE notification_targets SET claim_owner = NULL, claim_expires = NULL WHERE stack_id = ?1 AND target = ?2 AND claim_owner = ?3",
                params![t.stack_id, t.target, owner],
            )
            .map(|_| ())
            .map_err(backend)
        })
        .await
    }
}

const AUDIT_COLUMNS: &str = "seq, event_id, event_time, event_name, access_key, username, resource_type, resource_name, stack_id, request_id, error_code, body";

fn audit_row(r: &Row) -> rusqlite::Result<AuditRecord> {
    Ok(AuditRecord {
        seq: r.get(0)?,
        event_id: r.get(1)?,
        event_time_ms: r.get(2)?,
        event_name: r.get(3)?,
        access_key: r.get(4)?,
        username: r.get(5)?,
        resource_type: r.get(6)?,
        resource_name: r.get(7)?,
        stack_id: r.get(8)?,
        request_id: r.get(9)?,
        error_code: r.get(10)?,
        body: from_json(&r.get::<_, String>(11)?)?,
    })
}

#[async_trait::async_trait]
impl cairn_store::Audit for SqliteStore {
    async fn add_audit(&self, record: &AuditRecord) -> Result<i64, StoreError> {
        let r = record.clone();
        let body = json_text(&r.body)?;
        self.run(move |c| {
            c.execute_cached(
                "INSERT INTO audit_records (event_id, event_time, event_name, access_key, username, resource_type, resource_name, stack_id, request_id, error_code, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![r.event_id, r.event_time_ms, r.event_name, r.access_key, r.username, r.resource_type, r.resource_name, r.stack_id, r.request_id, r.error_code, body],
            )
            .map_err(backend)?;
            Ok(c.last_insert_rowid())
        })
        .await
    }

    async fn audit_records(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let q = q.clone();
        let only = q.only_stacks.as_ref().map(json_text).transpose()?;
        self.run(move |c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_records WHERE \
                     (?1 IS NULL OR (resource_type = ?12 AND (resource_name = ?1 OR stack_id = ?1))) \
                     AND (?2 IS NULL OR access_key = ?2) AND (?3 IS NULL OR username = ?3) \
                     AND (?4 IS NULL OR event_name = ?4) AND (?5 IS NULL OR event_id = ?5) \
                     AND (?6 IS NULL OR resource_type = ?6) \
                     AND (?7 IS NULL OR resource_name = ?7 OR stack_id = ?7) \
                     AND (?8 IS NULL OR event_time >= ?8) AND (?9 IS NULL OR event_time <= ?9) \
                     AND (?10 IS NULL OR (resource_type = ?12 AND resource_name IN (SELECT value FROM json_each(?10)))) \
                     AND (?11 IS NULL OR seq < ?11) \
                     ORDER BY seq DESC LIMIT ?13"
                ))
                .map_err(backend)?;
            let limit = if q.limit == 0 { -1 } else { q.limit as i64 };
            let rows = st.query_map(
                params![
                    q.stack,
                    q.access_key,
                    q.username,
                    q.event_name,
                    q.event_id,
                    q.resource_type,
                    q.resource_name,
                    q.since_ms,
                    q.until_ms,
                    only,
                    q.before_seq,
                    STACK_RESOURCE,
                    limit
                ],
                audit_row,
            )
            .map_err(backend)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(backend);
            rows
        })
        .await
    }

    async fn prune_audit(&self, before_ms: i64) -> Result<u64, StoreError> {
        self.run(move |c| {
            c.execute_cached(
                "DELETE FROM audit_records WHERE event_time < ?1",
                params![before_ms],
            )
            .map(|n| n as u64)
            .map_err(backend)
        })
        .await
    }

    async fn audit_after(
        &self,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        self.run(move |c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_records WHERE seq > ?1 ORDER BY seq LIMIT ?2"
                ))
                .map_err(backend)?;
            let rows = st
                .query_map(params![after_seq, limit as i64], audit_row)
                .map_err(backend)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(backend);
            rows
        })
        .await
    }

    async fn claim_audit_export(
        &self,
        owner: &str,
        target: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let (owner, target) = (owner.to_string(), target.to_string());
        self.run(move |c| {
            let now = now_ms();
            c.execute_cached(
                "INSERT OR IGNORE INTO audit_exports (target, delivered) VALUES (?1, 0)",
                params![target],
            )
            .map_err(backend)?;
            c.query_row_cached(
                "UPDATE audit_exports SET claim_owner = ?2, claim_expires = ?3 WHERE target = ?1 AND (claim_owner IS NULL OR claim_owner = ?2 OR claim_expires < ?4) RETURNING delivered",
                params![target, owner, now + ttl_ms, now],
                |r| r.get(0),
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn audit_exported(
        &self,
        owner: &str,
        target: &str,
        delivered: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let (owner, target) = (owner.to_string(), target.to_string());
        self.run(move |c| {
            c.execute_cached(
                "UPDATE audit_exports SET delivered = ?3, claim_expires = ?4 WHERE target = ?1 AND claim_owner = ?2",
                params![target, owner, delivered, now_ms() + ttl_ms],
            )
            .map(|n| n == 1)
            .map_err(backend)
        })
        .await
    }

    async fn revoke_session(&self, session: &str, until_ms: i64) -> Result<(), StoreError> {
        let session = session.to_string();
        self.run(move |c| {
            c.execute_cached(
                "DELETE FROM console_revocations WHERE until_ms < ?1",
                params![now_ms()],
            )
            .map_err(backend)?;
            c.execute_cached(
                "INSERT INTO console_revocations (session, until_ms) VALUES (?1, ?2) ON CONFLICT(session) DO UPDATE SET until_ms = ?2",
                params![session, until_ms],
            )
            .map(|_| ())
            .map_err(backend)
        })
        .await
    }

    async fn session_revoked(&self, session: &str) -> Result<bool, StoreError> {
        let session = session.to_string();
        self.run(move |c| {
            c.query_row_cached(
                "SELECT 1 FROM console_revocations WHERE session = ?1",
                params![session],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(backend)
        })
        .await
    }
}

#[async_trait::async_trait]
impl cairn_store::Refactors for SqliteStore {
    async fn put_refactor(
        &self,
        refactor_id: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let (id, body) = (refactor_id.to_string(), json_text(body)?);
        self.run(move |c| {
            c.execute_cached(
                "INSERT INTO stack_refactors (refactor_id, body) VALUES (?1, ?2) ON CONFLICT(refactor_id) DO UPDATE SET body = ?2",
                params![id, body],
            )
            .map(|_| ())
            .map_err(backend)
        })
        .await
    }

    async fn refactor(&self, refactor_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let id = refactor_id.to_string();
        self.run(move |c| {
            let body: Option<String> = c
                .query_row_cached(
                    "SELECT body FROM stack_refactors WHERE refactor_id = ?1",
                    params![id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            body.map(|b| serde_json::from_str(&b).map_err(backend))
                .transpose()
        })
        .await
    }

    async fn refactors(&self) -> Result<Vec<serde_json::Value>, StoreError> {
        self.run(|c| {
            let mut st = c
                .prepare_cached("SELECT body FROM stack_refactors ORDER BY seq")
                .map_err(backend)?;
            let rows = st
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(backend)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(backend)?;
            rows.iter()
                .map(|b| serde_json::from_str(b).map_err(backend))
                .collect()
        })
        .await
    }

    async fn apply_refactor(
        &self,
        leases: &[Lease],
        write: &cairn_store::RefactorWrite,
    ) -> Result<(), StoreError> {
        let (leases, w) = (leases.to_vec(), write.clone());
        self.run(move |c| {
            for lease in &leases {
                fence(c, lease)?;
            }
            // Every moved row steps aside first, so renames may swap.
            for (i, m) in w.moves.iter().enumerate() {
                c.execute_cached(
                    "UPDATE resources SET logical_id = ?3 WHERE stack_key = ?1 AND logical_id = ?2",
                    params![stack_key(c, &m.from_stack)?, m.from_logical, format!("\u{1}refactor-{i}")],
                )
                .map_err(backend)?;
            }
            for (i, m) in w.moves.iter().enumerate() {
                c.execute_cached(
                    "UPDATE resources SET stack_key = ?3, logical_id = ?4 WHERE stack_key = ?1 AND logical_id = ?2",
                    params![stack_key(c, &m.from_stack)?, format!("\u{1}refactor-{i}"), stack_key(c, &m.to_stack)?, m.to_logical],
                )
                .map_err(backend)?;
            }
            for e in &w.events {
                insert_event(&Tx::cached(c), stack_key(c, &e.stack_id)?, e)?;
            }
            for (s, e) in &w.stacks {
                write_stack_fields(c, s)?;
                write_status(c, &s.stack_id, s.status, s.status_reason.as_deref(), e)?;
            }
            c.execute_cached(
                "UPDATE stack_refactors SET body = ?2 WHERE refactor_id = ?1",
                params![w.refactor_id, json_text(&w.body)?],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }
}

#[async_trait::async_trait]
impl DriftDetections for SqliteStore {
    async fn put_drift_detection(
        &self,
        stack_id: &str,
        detection_id: &str,
        at: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let (stack_id, id, at, body) = (
            stack_id.to_string(),
            detection_id.to_string(),
            at.to_string(),
            json_text(body)?,
        );
        self.run(move |c| {
            c.execute_cached(
                "INSERT INTO drift_detections (detection_id, stack_id, detected_at, body) VALUES (?1, ?2, ?3, ?4)",
                params![id, stack_id, at, body],
            )
            .map_err(backend)?;
            Ok(())
        })
        .await
    }

    async fn drift_detection(
        &self,
        detection_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let id = detection_id.to_string();
        self.run(move |c| {
            c.query_row_cached(
                "SELECT body FROM drift_detections WHERE detection_id = ?1",
                params![id],
                |r| json_col(r, 0),
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn last_drift_detection(
        &self,
        stack_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let id = stack_id.to_string();
        self.run(move |c| {
            c.query_row_cached(
                "SELECT body FROM drift_detections WHERE stack_id = ?1 ORDER BY seq DESC LIMIT 1",
                params![id],
                |r| json_col(r, 0),
            )
            .optional()
            .map_err(backend)
        })
        .await
    }
}

const REGISTRATION_COLUMNS: &str =
    "token, type_name, kind, status, description, version_id, client_token, created_at, updated_at";

/// Every row `sql` (no parameters) gives, each made by `row`.
fn all_rows<T>(
    c: &Connection,
    sql: &str,
    row: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut st = c.prepare_cached(sql).map_err(backend)?;
    let rows = st
        .query_map([], row)
        .map_err(backend)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(backend);
    rows
}

fn registration_row(r: &Row<'_>) -> rusqlite::Result<RegistrationRecord> {
    Ok(RegistrationRecord {
        token: r.get(0)?,
        type_name: r.get(1)?,
        kind: enum_col(r, 2)?,
        status: enum_col(r, 3)?,
        description: r.get(4)?,
        version_id: r.get(5)?,
        client_token: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

const TYPE_VERSION_COLUMNS: &str = "type_name, version_id, kind, is_default, deprecated, schema, description, handler, secret, package_sha256, signed_by, created_at";

fn type_version_row(r: &Row<'_>) -> rusqlite::Result<TypeVersionRecord> {
    Ok(TypeVersionRecord {
        type_name: r.get(0)?,
        version_id: r.get(1)?,
        kind: enum_col(r, 2)?,
        is_default: r.get(3)?,
        deprecated: r.get(4)?,
        schema: r.get(5)?,
        description: r.get(6)?,
        handler: r.get(7)?,
        secret: r.get(8)?,
        package_sha256: r.get(9)?,
        signed_by: r.get(10)?,
        created_at: r.get(11)?,
    })
}

/// Counts one more change of the registry.
fn bump_registry(c: &Connection) -> Result<(), StoreError> {
    c.execute_cached(
        "INSERT INTO type_registry_state (id, generation) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET generation = generation + 1",
        [],
    )
    .map(|_| ())
    .map_err(backend)
}

/// Whether `version_id` is a live version of `type_name`, whether it is the
/// default, and how many other live versions the type has.
fn live_version(
    c: &Connection,
    type_name: &str,
    version_id: &str,
) -> Result<(bool, bool, i64), StoreError> {
    let this: Option<bool> = c
        .query_row_cached(
            "SELECT is_default FROM type_versions WHERE type_name = ?1 AND version_id = ?2 AND deprecated = 0",
            params![type_name, version_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(backend)?;
    let others: i64 = c
        .query_row_cached(
            "SELECT COUNT(*) FROM type_versions WHERE type_name = ?1 AND version_id <> ?2 AND deprecated = 0",
            params![type_name, version_id],
            |r| r.get(0),
        )
        .map_err(backend)?;
    Ok((this.is_some(), this.unwrap_or(false), others))
}

#[async_trait::async_trait]
impl cairn_store::TypeRegistry for SqliteStore {
    async fn begin_registration(
        &self,
        r: &RegistrationRecord,
    ) -> Result<RegistrationRecord, StoreError> {
        let r = r.clone();
        self.run(move |c| {
            if let Some(client) = &r.client_token {
                let earlier = c
                    .query_row_cached(
                        &format!("SELECT {REGISTRATION_COLUMNS} FROM type_registrations WHERE client_token = ?1"),
                        params![client],
                        registration_row,
                    )
                    .optional()
                    .map_err(backend)?;
                if let Some(earlier) = earlier {
                    return Ok(earlier);
                }
            }
            c.execute_cached(
                &format!("INSERT INTO type_registrations ({REGISTRATION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
                params![
                    r.token,
                    r.type_name,
                    r.kind.as_str(),
                    r.status.as_str(),
                    r.description,
                    r.version_id,
                    r.client_token,
                    r.created_at,
                    r.updated_at
                ],
            )
            .map_err(backend)?;
            bump_registry(c)?;
            Ok(r)
        })
        .await
    }

    async fn complete_registration(
        &self,
        token: &str,
        version: &NewTypeVersion,
        package: &[u8],
    ) -> Result<String, StoreError> {
        let (token, v, package) = (token.to_string(), version.clone(), package.to_vec());
        self.run(move |c| {
            let status: Option<String> = c
                .query_row_cached(
                    "SELECT status FROM type_registrations WHERE token = ?1",
                    params![token],
                    |r| r.get(0),
                )
                .optional()
                .map_err(backend)?;
            match status.as_deref() {
                None => return Err(StoreError::NoSuchRegistration(token)),
                Some(s) if s != RegistrationStatus::InProgress.as_str() => {
                    return Err(StoreError::RegistrationEnded(token))
                }
                Some(_) => {}
            }
            let ids: Vec<String> = c
                .prepare_cached("SELECT version_id FROM type_versions WHERE type_name = ?1")
                .and_then(|mut st| {
                    st.query_map(params![v.type_name], |r| r.get(0))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(backend)?;
            let next = ids
                .iter()
                .filter_map(|id| registry::version_number(id))
                .max()
                .unwrap_or(0)
                + 1;
            let live: i64 = c
                .query_row_cached(
                    "SELECT COUNT(*) FROM type_versions WHERE type_name = ?1 AND deprecated = 0",
                    params![v.type_name],
                    |r| r.get(0),
                )
                .map_err(backend)?;
            let version_id = registry::version_id(next);
            let ts = cairn_model::stack::now();
            c.execute_cached(
                &format!("INSERT INTO type_versions ({TYPE_VERSION_COLUMNS}, package) VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
                params![
                    v.type_name,
                    version_id,
                    v.kind.as_str(),
                    live == 0,
                    v.schema,
                    v.description,
                    v.handler,
                    v.secret,
                    v.package_sha256,
                    v.signed_by,
                    ts,
                    package
                ],
            )
            .map_err(backend)?;
            c.execute_cached(
                "UPDATE type_registrations SET status = ?2, version_id = ?3, updated_at = ?4, description = ?5 WHERE token = ?1",
                params![
                    token,
                    RegistrationStatus::Complete.as_str(),
                    version_id,
                    ts,
                    cairn_store::registered_as(&version_id)
                ],
            )
            .map_err(backend)?;
            bump_registry(c)?;
            Ok(version_id)
        })
        .await
    }

    async fn fail_registration(&self, token: &str, reason: &str) -> Result<(), StoreError> {
        let (token, reason) = (token.to_string(), reason.to_string());
        self.run(move |c| {
            let changed = c
                .execute_cached(
                    "UPDATE type_registrations SET status = ?2, description = ?3, updated_at = ?4 WHERE token = ?1 AND status = ?5",
                    params![
                        token,
                        RegistrationStatus::Failed.as_str(),
                        reason,
                        cairn_model::stack::now(),
                        RegistrationStatus::InProgress.as_str()
                    ],
                )
                .map_err(backend)?;
            if changed == 0 {
                let known: i64 = c
                    .query_row_cached(
                        "SELECT COUNT(*) FROM type_registrations WHERE token = ?1",
                        params![token],
                        |r| r.get(0),
                    )
                    .map_err(backend)?;
                return Err(if known == 0 {
                    StoreError::NoSuchRegistration(token)
                } else {
                    StoreError::RegistrationEnded(token)
                });
            }
            bump_registry(c)
        })
        .await
    }

    async fn registration(&self, token: &str) -> Result<Option<RegistrationRecord>, StoreError> {
        let token = token.to_string();
        self.run(move |c| {
            c.query_row_cached(
                &format!("SELECT {REGISTRATION_COLUMNS} FROM type_registrations WHERE token = ?1"),
                params![token],
                registration_row,
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn registrations(&self) -> Result<Vec<RegistrationRecord>, StoreError> {
        self.run(|c| {
            all_rows(
                c,
                &format!("SELECT {REGISTRATION_COLUMNS} FROM type_registrations ORDER BY rowid"),
                registration_row,
            )
        })
        .await
    }

    async fn type_versions(&self) -> Result<Vec<TypeVersionRecord>, StoreError> {
        self.run(|c| {
            all_rows(
                c,
                &format!(
                    "SELECT {TYPE_VERSION_COLUMNS} FROM type_versions ORDER BY type_name, version_id"
                ),
                type_version_row,
            )
        })
        .await
    }

    async fn type_package(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (t, v) = (type_name.to_string(), version_id.to_string());
        self.run(move |c| {
            c.query_row_cached(
                "SELECT package FROM type_versions WHERE type_name = ?1 AND version_id = ?2",
                params![t, v],
                |r| r.get(0),
            )
            .optional()
            .map_err(backend)
        })
        .await
    }

    async fn set_default_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let (t, v) = (type_name.to_string(), version_id.to_string());
        self.run(move |c| {
            if !live_version(c, &t, &v)?.0 {
                return Err(StoreError::type_not_found(&t, &v));
            }
            c.execute_cached(
                "UPDATE type_versions SET is_default = (version_id = ?2) WHERE type_name = ?1 AND deprecated = 0",
                params![t, v],
            )
            .map_err(backend)?;
            bump_registry(c)
        })
        .await
    }

    async fn deregister_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let (t, v) = (type_name.to_string(), version_id.to_string());
        self.run(move |c| {
            let (live, is_default, others) = live_version(c, &t, &v)?;
            if !live {
                return Err(StoreError::type_not_found(&t, &v));
            }
            if is_default && others > 0 {
                return Err(StoreError::DefaultTypeVersion {
                    type_name: t,
                    version_id: v,
                });
            }
            c.execute_cached(
                "UPDATE type_versions SET deprecated = 1, is_default = 0 WHERE type_name = ?1 AND version_id = ?2",
                params![t, v],
            )
            .map_err(backend)?;
            bump_registry(c)
        })
        .await
    }

    async fn registry_generation(&self) -> Result<i64, StoreError> {
        self.run(|c| {
            c.query_row_cached(
                "SELECT generation FROM type_registry_state WHERE id = 1",
                [],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map(|g| g.unwrap_or(0))
            .map_err(backend)
        })
        .await
    }

    async fn set_type_configuration(&self, c: &TypeConfigurationRecord) -> Result<(), StoreError> {
        let c = c.clone();
        self.run(move |conn| {
            conn.execute_cached(
                "INSERT INTO type_configurations (type_name, alias, configuration, updated_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT(type_name, alias) DO UPDATE SET configuration = ?3, updated_at = ?4",
                params![c.type_name, c.alias, c.configuration, c.updated_at],
            )
            .map_err(backend)?;
            bump_registry(conn)
        })
        .await
    }

    async fn type_configurations(&self) -> Result<Vec<TypeConfigurationRecord>, StoreError> {
        self.run(|c| {
            all_rows(
                c,
                "SELECT type_name, alias, configuration, updated_at FROM type_configurations ORDER BY type_name, alias",
                |r| {
                    Ok(TypeConfigurationRecord {
                        type_name: r.get(0)?,
                        alias: r.get(1)?,
                        configuration: r.get(2)?,
                        updated_at: r.get(3)?,
                    })
                },
            )
        })
        .await
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<(), StoreError> {
        self.run(|c| {
            c.query_row_cached("SELECT 1", [], |r| r.get::<_, i64>(0))
                .map(|_| ())
                .map_err(backend)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store conformance suite on SQLite files (one per check).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_conformance_suite_passes_on_sqlite() {
        let dir = std::env::temp_dir().join(format!("cairn-conf-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let n = std::sync::atomic::AtomicUsize::new(0);
        cairn_store::conformance::all(|| {
            let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let store =
                std::sync::Arc::new(SqliteStore::open(&dir.join(format!("s{i}.db"))).unwrap())
                    as std::sync::Arc<dyn Store>;
            std::future::ready(store)
        })
        .await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Processes opening one new file at once (a command and its follower)
    /// all open it: the one that makes the tables first commits them, the
    /// others are told BUSY, undo their transaction and find them made.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn openers_of_one_new_file_at_once_all_open_it() {
        let dir = std::env::temp_dir().join(format!("cairn-new-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        // What one opener alone makes.
        let alone = dir.join("alone.db");
        drop(SqliteStore::open(&alone).unwrap());
        let schema_of = |path: &Path| -> Vec<(String, String)> {
            let c = Connection::open(path).unwrap();
            let mut q = c
                .prepare("SELECT type, name FROM sqlite_master ORDER BY type, name")
                .unwrap();
            let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)));
            rows.unwrap().map(Result::unwrap).collect()
        };
        assert!(schema_of(&alone).len() > 30);
        for round in 0..20 {
            let path = dir.join(format!("new{round}.db"));
            let start = std::sync::Arc::new(std::sync::Barrier::new(4));
            let openers: Vec<_> = (0..4)
                .map(|_| {
                    let (path, start) = (path.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        SqliteStore::open(&path).map(|_| ())
                    })
                })
                .collect();
            for o in openers {
                o.join().unwrap().unwrap();
            }
            let store = SqliteStore::open(&path).unwrap();
            assert!(store.list_stacks().await.unwrap().is_empty());
            assert_eq!(schema_of(&path), schema_of(&alone));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A new file's tables are made in one transaction; told BUSY (another
    /// process is making them), it is undone, so trying again begins anew.
    #[test]
    fn a_busy_table_making_is_undone_and_made_on_a_retry() {
        let dir = std::env::temp_dir().join(format!("cairn-busy-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("new.db");
        let other = Connection::open(&path).unwrap();
        other.execute_batch("PRAGMA journal_mode = WAL").unwrap();
        let this = Connection::open(&path).unwrap();
        this.busy_timeout(std::time::Duration::ZERO).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let busy = create_tables(&this).unwrap_err();
        assert_eq!(
            busy.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy)
        );
        assert!(this.is_autocommit(), "the failed transaction is undone");
        other.execute_batch("COMMIT").unwrap();
        create_tables(&this).unwrap();
        let version: i64 = this
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION, "made with its version");
        let tables: i64 = this
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables as usize, SCHEMA.matches("CREATE TABLE").count());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file of layout 6 (no groups table, no history.details, no
    /// stacks.tags) with one stack opens, is upgraded, and reads back.
    #[tokio::test]
    async fn older_layouts_are_upgraded_in_place() {
        let dir = std::env::temp_dir().join(format!("cairn-layout-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        {
            let c = Connection::open(&path).unwrap();
            let old = SCHEMA
                .replace(
                    ",\n    tags TEXT,\n    parent_id TEXT,\n    root_id TEXT,\n    template_context TEXT,\n    -- JSON: the capabilities the last create or update was given.\n    capabilities TEXT,\n    termination_protection INTEGER NOT NULL DEFAULT 0,\n    -- The stack policy (SetStackPolicy) as given, NULL when it has none.\n    stack_policy TEXT,\n    -- JSON: RollbackConfiguration (triggers, monitoring minutes), NULL when none.\n    rollback_configuration TEXT,\n    -- JSON: NotificationARNs, the webhook URLs its events go to.\n    notification_arns TEXT\n);",
                    "\n);",
                )
                .replace(",\n    tags TEXT,\n    nested TEXT\n);", "\n);")
                .replace(
                    ",\n    -- The registered type's version it was made or moved with.\n    type_version TEXT,\n",
                    ",\n",
                )
                .replace(
                    ",\n    -- JSON: a hook's verdict (HookType, HookStatus, …), NULL for others.\n    hook TEXT\n",
                    "\n",
                )
                .replace(",\n    -- Resumes in a row that recorded nothing (a process that dies on the same\n    -- step), and the stack's event count at the last one.\n    resume_attempts INTEGER NOT NULL DEFAULT 0,\n    resume_events INTEGER NOT NULL DEFAULT 0\n", "\n")
                .replace(",\n    -- JSON: what a `cairn update` planned and did (steps, phases).\n    details TEXT\n", "\n")
                // Before layout 20 the resources and events named their
                // stack by its id.
                .replace("CREATE TABLE IF NOT EXISTS stack_keys (\n    stack_key INTEGER PRIMARY KEY,\n    stack_id TEXT NOT NULL UNIQUE\n);", "")
                .replace("stack_key INTEGER NOT NULL,", "stack_id TEXT NOT NULL,")
                .replace("PRIMARY KEY (stack_key, logical_id)", "PRIMARY KEY (stack_id, logical_id)")
                .replace("events(stack_key, seq)", "events(stack_id, seq)");
            let old = old.split("-- Instance groups").next().unwrap().to_string()
                + old
                    .split("CREATE TABLE IF NOT EXISTS exports")
                    .nth(1)
                    .map(|r| format!("CREATE TABLE IF NOT EXISTS exports{r}"))
                    .unwrap()
                    .as_str();
            c.execute_batch(&old).unwrap();
            assert!(
                c.prepare("SELECT tags FROM stacks").is_err(),
                "the old layout has no tags"
            );
            assert!(c.prepare("SELECT stack_key FROM resources").is_err());
            c.execute_batch("PRAGMA user_version = 6; INSERT INTO stacks (stack_id, stack_name, status, template_body, parameters, no_echo, outputs, on_failure, created_at, updated_at) VALUES ('id-1', 's', 'CREATE_COMPLETE', 'Resources: {}', '{}', '[]', '[]', 'ROLLBACK', 't', 't');
                INSERT INTO resources (stack_id, logical_id, resource_type, physical_id, status, properties, attributes, updated_at) VALUES ('id-1', 'B', 'T', 'b-1', 'CREATE_COMPLETE', '{}', '{}', 't'), ('id-1', 'A', 'T', 'a-1', 'CREATE_COMPLETE', '{\"P\":1}', '{}', 't');
                INSERT INTO events (event_id, stack_id, stack_name, logical_id, physical_id, resource_type, timestamp, status) VALUES ('e1', 'id-1', 's', 's', 'id-1', 'AWS::CloudFormation::Stack', 't1', 'CREATE_IN_PROGRESS'), ('e2', 'id-1', 's', 'A', 'a-1', 'T', 't2', 'CREATE_COMPLETE'), ('e3', 'id-1', 's', 's', 'id-1', 'AWS::CloudFormation::Stack', 't3', 'CREATE_COMPLETE');").unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let stacks = store.list_stacks().await.unwrap();
        assert_eq!(stacks.len(), 1);
        assert_eq!(stacks[0].tags, Vec::new());
        assert_eq!(stacks[0].parent_id, None);
        assert!(store.groups("id-1").await.unwrap().is_empty());
        assert!(store.history("id-1").await.unwrap().is_empty());
        // The columns added since are there.
        assert_eq!(store.note_resume("id-1").await.unwrap(), 1);
        assert!(store.change_sets("id-1").await.unwrap().is_empty());
        // The rows are kept, now under the stack's key, events in order.
        let rows = store.resources("id-1").await.unwrap();
        let rows: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.stack_id.as_str(),
                    r.logical_id.as_str(),
                    r.physical_id.as_deref(),
                    serde_json::Value::Object(r.properties.clone()),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("id-1", "A", Some("a-1"), serde_json::json!({"P": 1})),
                ("id-1", "B", Some("b-1"), serde_json::json!({}))
            ]
        );
        let events = store.events("id-1").await.unwrap();
        let events: Vec<_> = events
            .iter()
            .map(|e| {
                (
                    e.event_id.as_str(),
                    e.stack_id.as_str(),
                    e.logical_id.as_str(),
                )
            })
            .collect();
        assert_eq!(
            events,
            [
                ("e1", "id-1", "s"),
                ("e2", "id-1", "A"),
                ("e3", "id-1", "s")
            ]
        );
        assert_eq!(store.event_count("id-1").await.unwrap(), 3);
        // migrate-state copies them by stack id, as PostgreSQL keeps them.
        let dump = store.dump().await.unwrap();
        let resources = dump.iter().find(|t| t.name == "resources").unwrap();
        assert_eq!(resources.columns[0], "stack_id");
        assert!(!resources.columns.iter().any(|c| c == "stack_key"));
        assert_eq!(resources.rows[0][0], Cell::Text("id-1".into()));
        assert_eq!(resources.rows[0][1], Cell::Text("B".into()));
        let events = dump.iter().find(|t| t.name == "events").unwrap();
        let at = events.columns.iter().position(|c| c == "event_id").unwrap();
        assert_eq!(events.rows.len(), 3);
        assert_eq!(events.rows[2][at], Cell::Text("e3".into()));
        assert_eq!(events.rows[2][0], Cell::Text("id-1".into()));
        drop(store);
        let c = Connection::open(&path).unwrap();
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        assert_eq!(events_table(&c), SCHEMA_EVENTS);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// How the file declares its events table, spaces folded.
    fn events_table(c: &Connection) -> String {
        let sql: String = c
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        sql.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The events table of the current layout, spaces folded.
    const SCHEMA_EVENTS: &str = "CREATE TABLE \"events\" ( seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, stack_key INTEGER NOT NULL, stack_name TEXT NOT NULL, logical_id TEXT NOT NULL, physical_id TEXT NOT NULL, resource_type TEXT NOT NULL, timestamp TEXT NOT NULL, status TEXT NOT NULL, status_reason TEXT, properties TEXT, hook TEXT )";

    #[tokio::test]
    async fn layout_20_events_lose_autoincrement_and_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("layout20.db");
        {
            let c = Connection::open(&path).unwrap();
            let old = SCHEMA.replace(
                "    seq INTEGER PRIMARY KEY,\n    event_id",
                "    seq INTEGER PRIMARY KEY AUTOINCREMENT,\n    event_id",
            );
            assert_ne!(old, SCHEMA);
            c.execute_batch(&old).unwrap();
            c.execute_batch("PRAGMA user_version = 20; INSERT INTO stacks (stack_id, stack_name, status, template_body, parameters, no_echo, outputs, on_failure, created_at, updated_at) VALUES ('id-1', 's', 'CREATE_COMPLETE', 'Resources: {}', '{}', '[]', '[]', 'ROLLBACK', 't', 't');
                INSERT INTO stack_keys (stack_id) VALUES ('id-1'); INSERT INTO leases (stack_id) VALUES ('id-1');
                INSERT INTO events (seq, event_id, stack_key, stack_name, logical_id, physical_id, resource_type, timestamp, status) VALUES (7, 'e1', 1, 's', 's', 'id-1', 'AWS::CloudFormation::Stack', 't1', 'CREATE_IN_PROGRESS'), (9, 'e2', 1, 's', 'A', 'a-1', 'T', 't2', 'CREATE_COMPLETE');").unwrap();
            assert!(events_table(&c).contains("AUTOINCREMENT"));
        }
        let store = SqliteStore::open(&path).unwrap();
        let event = |id: &str| EventRecord {
            event_id: id.into(),
            stack_id: "id-1".into(),
            stack_name: "s".into(),
            logical_id: "s".into(),
            physical_id: "id-1".into(),
            resource_type: "AWS::CloudFormation::Stack".into(),
            timestamp: "t3".into(),
            status: StackStatus::CreateComplete.into(),
            status_reason: None,
            properties: None,
            hook: None,
        };
        let lease = store
            .acquire_lease("id-1", "engine-a", 60_000)
            .await
            .unwrap();
        store.put_events(&lease, &[event("e3")]).await.unwrap();
        let ids: Vec<String> = store
            .events("id-1")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event_id)
            .collect();
        assert_eq!(ids, ["e1", "e2", "e3"]);
        drop(store);
        let c = Connection::open(&path).unwrap();
        assert_eq!(events_table(&c), SCHEMA_EVENTS);
        let seqs: Vec<i64> = c
            .prepare("SELECT seq FROM events ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(seqs, [7, 9, 10]);
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }
}
