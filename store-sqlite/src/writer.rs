//! The writer thread: owns the connection and group-commits whatever jobs
//! are queued, answering each caller only after the commit (state is
//! durable before anyone acts on it).
//!
//! Most jobs of a running operation are a resource's writes under its
//! stack's lease ([`Job::Fenced`]): they write nothing but their rows and
//! events, so a transaction made only of them checks each lease once (a
//! lease changes only by a job that is not fenced) and takes no savepoint
//! per job; should one of them fail, the transaction is rolled back and
//! run again as any other, with a savepoint around each job, so the failed
//! one alone is undone.

use std::cell::{RefCell, RefMut};
use std::ops::{Deref, DerefMut};
use std::sync::mpsc;

use rusqlite::{params, CachedStatement, Connection, OptionalExtension, Statement};
use tokio::sync::oneshot;

use cairn_store::{Lease, StoreError};

use crate::{backend, stack_key, INSERT_EVENT, REMOVE_RESOURCE, WRITE_RESOURCE};

/// What answers a job's caller once its transaction has committed (or
/// failed to: the commit's error).
pub(crate) type Reply = Box<dyn FnOnce(Option<String>) + Send>;

/// A resource's write under `lease`: what it writes, given the stack's key.
/// It may run twice (see the module's comment), so it is `Fn`.
pub(crate) type Write = Box<dyn Fn(&Tx<'_, '_>, i64) -> Result<(), StoreError> + Send>;

/// The statements of a resource's write.
#[derive(Clone, Copy)]
pub(crate) enum Hot {
    Row,
    Event,
    Remove,
}

impl Hot {
    fn sql(self) -> &'static str {
        match self {
            Hot::Row => WRITE_RESOURCE,
            Hot::Event => INSERT_EVENT,
            Hot::Remove => REMOVE_RESOURCE,
        }
    }
}

/// The [`Hot`] statements, prepared once for the writer's life: taken
/// from the connection's statement cache, each of them hashed its text
/// and moved in and out of the cache's list (a fifth of the writer's
/// instructions in a large create).
pub(crate) struct Kept<'c> {
    row: RefCell<Statement<'c>>,
    event: RefCell<Statement<'c>>,
    remove: RefCell<Statement<'c>>,
}

impl<'c> Kept<'c> {
    fn prepare(conn: &'c Connection) -> rusqlite::Result<Kept<'c>> {
        let prepared = |hot: Hot| conn.prepare(hot.sql()).map(RefCell::new);
        Ok(Kept {
            row: prepared(Hot::Row)?,
            event: prepared(Hot::Event)?,
            remove: prepared(Hot::Remove)?,
        })
    }
}

/// What a write runs on: the connection, with the writer's kept
/// statements (a fenced write) or without (any other job: its statements
/// come from the cache).
pub(crate) struct Tx<'a, 'c> {
    conn: &'c Connection,
    kept: Option<&'a Kept<'c>>,
}

impl<'c> Tx<'_, 'c> {
    pub(crate) fn cached(conn: &'c Connection) -> Tx<'c, 'c> {
        Tx { conn, kept: None }
    }

    pub(crate) fn statement(&self, hot: Hot) -> Result<Prepared<'_, 'c>, StoreError> {
        match self.kept {
            Some(kept) => {
                let cell = match hot {
                    Hot::Row => &kept.row,
                    Hot::Event => &kept.event,
                    Hot::Remove => &kept.remove,
                };
                // A write runs one statement at a time: never borrowed twice.
                cell.try_borrow_mut().map(Prepared::Kept).map_err(backend)
            }
            None => self
                .conn
                .prepare_cached(hot.sql())
                .map(Prepared::Cached)
                .map_err(backend),
        }
    }
}

impl Deref for Tx<'_, '_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

/// A [`Hot`] statement, kept or cached.
pub(crate) enum Prepared<'a, 'c> {
    Kept(RefMut<'a, Statement<'c>>),
    Cached(CachedStatement<'c>),
}

impl<'c> Deref for Prepared<'_, 'c> {
    type Target = Statement<'c>;
    fn deref(&self) -> &Statement<'c> {
        match self {
            Prepared::Kept(s) => s,
            Prepared::Cached(s) => s,
        }
    }
}

impl DerefMut for Prepared<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Prepared::Kept(s) => s,
            Prepared::Cached(s) => s,
        }
    }
}

/// Any statements, run once; says whether they held.
pub(crate) type Statements = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;

/// Where a fenced write's caller waits for its answer.
pub(crate) type Answer = oneshot::Sender<Answered>;

/// A fenced write's outcome, with what the job was made of handed back to
/// its caller to free: its row and events were allocated by the caller's
/// thread, and freed by the writer each of their blocks went back to that
/// thread's allocator through an atomic list (mimalloc's cross-thread
/// free was an eighth of the writer's time in a large delete, on the one
/// thread every write of the process waits for).
pub(crate) struct Answered {
    pub(crate) result: Result<(), StoreError>,
    pub(crate) spent: (Lease, Write),
}

/// Answers a fenced write: `result`, unless its transaction's commit
/// failed (`error`), with the job handed back.
fn answer_fenced(
    answer: Answer,
    result: Result<(), StoreError>,
    error: Option<String>,
    spent: (Lease, Write),
) {
    let result = match error {
        Some(e) => Err(StoreError::Backend(e)),
        None => result,
    };
    let _ = answer.send(Answered { result, spent });
}

pub(crate) enum Job {
    /// Any statements; runs once, inside its own savepoint; says whether
    /// it held.
    Once(Statements),
    /// A resource's rows and events under the stack's lease.
    Fenced {
        lease: Lease,
        write: Write,
        answer: Answer,
    },
}

/// Fails unless `lease` is still the stack's current lease; returns the
/// stack's key (read in the same statement: most fenced writes need it).
pub(crate) fn fence(c: &Connection, lease: &Lease) -> Result<i64, StoreError> {
    let token: Option<(i64, Option<String>, Option<i64>)> = c
        .prepare_cached(
            // Not a join: SQLite propagates `l.stack_id = ?1` into the join's
            // condition, and a statement with a propagated parameter is
            // prepared again for every new value.
            "SELECT token, owner, (SELECT stack_key FROM stack_keys WHERE stack_id = ?1) FROM leases WHERE stack_id = ?1",
        )
        .map_err(backend)?
        .query_row(params![lease.stack_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
        .map_err(backend)?;
    match token {
        Some((t, Some(o), key)) if t == lease.token && o == lease.owner => match key {
            Some(key) => Ok(key),
            None => stack_key(c, &lease.stack_id),
        },
        _ => Err(StoreError::LeaseLost(lease.stack_id.clone())),
    }
}

/// The leases found current in this transaction, with their stack's key.
/// Only fenced writes run while it is kept: none of them changes a lease.
#[derive(Default)]
struct Fences(Vec<(Lease, i64)>);

impl Fences {
    fn check(&mut self, c: &Connection, lease: &Lease) -> Result<i64, StoreError> {
        if let Some((_, key)) = self.0.iter().find(|(l, _)| l == lease) {
            return Ok(*key);
        }
        let key = fence(c, lease)?;
        self.0.push((lease.clone(), key));
        Ok(key)
    }
}

/// Runs one of the writer's transaction statements, prepared once: they
/// run around every job (parsed each time, they cost as much as the job's
/// own row write).
fn step(conn: &Connection, sql: &'static str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Whether the writer's statements can be prepared on `conn` (checked
/// when the store opens: the writer cannot say why it stopped).
pub(crate) fn ready(conn: &Connection) -> rusqlite::Result<()> {
    Kept::prepare(conn).map(drop)
}

/// The writer thread's loop: one transaction per batch of queued jobs.
pub(crate) fn run(conn: Connection, rx: mpsc::Receiver<Job>) {
    // Checked by `ready` when the store opened; should it fail now, the
    // callers are told the writer has stopped.
    let Ok(kept) = Kept::prepare(&conn) else {
        return;
    };
    let tx = Tx {
        conn: &conn,
        kept: Some(&kept),
    };
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < 1024 {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        match batch.iter().all(|j| matches!(j, Job::Fenced { .. })) {
            true => fenced(&tx, batch),
            false => mixed(&tx, batch),
        }
    }
}

/// The commit's error, as every job of the transaction is told it.
fn commit(conn: &Connection, begin: rusqlite::Result<()>) -> Option<String> {
    match begin.and_then(|_| step(conn, "COMMIT")) {
        Ok(()) => None,
        Err(e) => {
            let _ = step(conn, "ROLLBACK");
            Some(format!("cannot commit to the state file: {e}"))
        }
    }
}

/// A transaction of fenced writes only; should one fail, it is rolled back
/// and the batch runs again as [`mixed`] does (a savepoint and a fence
/// check per job), so the failed write alone is undone.
fn fenced(conn: &Tx<'_, '_>, batch: Vec<Job>) {
    if let Err(e) = step(conn, "BEGIN IMMEDIATE") {
        // Run outside a transaction, each statement would commit alone.
        let error = format!("cannot begin a transaction on the state file: {e}");
        return answer(batch, Some(error));
    }
    let mut fences = Fences::default();
    let held = batch.iter().all(|job| match job {
        Job::Fenced { lease, write, .. } => fences
            .check(conn, lease)
            .and_then(|key| write(conn, key))
            .is_ok(),
        Job::Once(_) => false,
    });
    if !held {
        let _ = step(conn, "ROLLBACK");
        return mixed(conn, batch);
    }
    let error = commit(conn, Ok(()));
    answer(batch, error)
}

/// Tells each fenced write of a transaction that held its outcome: done,
/// or the transaction's error.
fn answer(batch: Vec<Job>, error: Option<String>) {
    for job in batch {
        if let Job::Fenced {
            lease,
            write,
            answer,
        } = job
        {
            answer_fenced(answer, Ok(()), error.clone(), (lease, write));
        }
    }
}

/// Whether a job's statements held, and how its caller is answered once
/// the transaction has committed (the commit's error, if it failed).
pub(crate) fn held<T: Send + 'static>(
    result: Result<T, StoreError>,
    answer: oneshot::Sender<Result<T, StoreError>>,
) -> (bool, Reply) {
    let ok = result.is_ok();
    let reply: Reply = Box::new(move |error| {
        let _ = answer.send(match error {
            Some(e) => Err(StoreError::Backend(e)),
            None => result,
        });
    });
    (ok, reply)
}

/// A transaction with at least one job that is not a fenced write: each
/// job in its own savepoint, each lease checked by the write itself.
fn mixed(conn: &Tx<'_, '_>, batch: Vec<Job>) {
    let begin = step(conn, "BEGIN IMMEDIATE");
    let mut replies: Vec<Reply> = Vec::with_capacity(batch.len());
    for job in batch {
        let _ = step(conn, "SAVEPOINT job");
        let (ok, reply) = match job {
            Job::Once(job) => job(conn.conn),
            Job::Fenced {
                lease,
                write,
                answer,
            } => {
                let result = fence(conn, &lease).and_then(|key| write(conn, key));
                let ok = result.is_ok();
                let reply: Reply =
                    Box::new(move |error| answer_fenced(answer, result, error, (lease, write)));
                (ok, reply)
            }
        };
        if !ok {
            let _ = step(conn, "ROLLBACK TO job");
        }
        let _ = step(conn, "RELEASE job");
        replies.push(reply);
    }
    let error = commit(conn, begin);
    for reply in replies {
        reply(error.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(token: i64) -> Lease {
        Lease {
            stack_id: "stack-1".into(),
            owner: "engine-a".into(),
            token,
        }
    }

    /// A writer over a file with the store's tables, a lease (token 1) on
    /// `stack-1` and a scratch table `t`; the jobs are queued before it
    /// starts, so they make one transaction.
    fn one_transaction(jobs: Vec<Job>) -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.db");
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch(crate::SCHEMA).expect("schema");
        conn.execute_batch(
            "INSERT INTO leases (stack_id, owner, expires, token) VALUES ('stack-1', 'engine-a', 0, 1);
             CREATE TABLE t (x TEXT NOT NULL);",
        )
        .expect("fixture");
        let (tx, rx) = mpsc::channel();
        for job in jobs {
            tx.send(job).expect("queued");
        }
        drop(tx);
        run(conn, rx);
        let reader = Connection::open(&path).expect("open again");
        (dir, reader)
    }

    fn fenced(
        lease: Lease,
        write: impl Fn(&Tx, i64) -> Result<(), StoreError> + Send + 'static,
    ) -> (Job, oneshot::Receiver<Answered>) {
        let (answer, rx) = oneshot::channel();
        let job = Job::Fenced {
            lease,
            write: Box::new(write),
            answer,
        };
        (job, rx)
    }

    fn insert(c: &Connection, x: &str) -> Result<(), StoreError> {
        c.execute("INSERT INTO t (x) VALUES (?1)", params![x])
            .map(|_| ())
            .map_err(backend)
    }

    /// The answer a job's caller got, as its debug text.
    fn said(rx: oneshot::Receiver<Answered>) -> String {
        format!("{:?}", rx.blocking_recv().expect("answered").result)
    }

    /// Any other job's answer, as its debug text.
    fn said_once(rx: oneshot::Receiver<Result<(), StoreError>>) -> String {
        format!("{:?}", rx.blocking_recv().expect("answered"))
    }

    fn rows(c: &Connection) -> Vec<String> {
        let mut st = c.prepare("SELECT x FROM t ORDER BY rowid").expect("select");
        let rows = st.query_map([], |r| r.get(0)).expect("rows");
        rows.collect::<Result<_, _>>().expect("text")
    }

    #[test]
    fn a_fenced_write_that_fails_after_writing_is_undone_alone() {
        let (a, a_rx) = fenced(lease(1), |c, key| insert(c, &format!("a{key}")));
        let (b, b_rx) = fenced(lease(1), |c, _| {
            insert(c, "b")?;
            Err(StoreError::Backend("b failed after its first row".into()))
        });
        let (c, c_rx) = fenced(lease(1), |c, _| insert(c, "c"));
        let (_dir, reader) = one_transaction(vec![a, b, c]);
        assert_eq!(said(a_rx), "Ok(())");
        assert_eq!(
            said(b_rx),
            r#"Err(Backend("b failed after its first row"))"#
        );
        assert_eq!(said(c_rx), "Ok(())");
        // The stack got its key from the fence; b's row went with b.
        assert_eq!(rows(&reader), ["a1", "c"]);
    }

    /// The lease a fenced job's answer hands back (its write comes with
    /// it), and the answer's result.
    fn handed_back(rx: oneshot::Receiver<Answered>) -> (i64, String) {
        let answered = rx.blocking_recv().expect("answered");
        (answered.spent.0.token, format!("{:?}", answered.result))
    }

    #[test]
    fn every_fenced_job_goes_back_to_its_caller_with_its_answer() {
        // All fenced (one transaction, one fence check per lease)...
        let (a, a_rx) = fenced(lease(1), |c, _| insert(c, "a"));
        let (b, b_rx) = fenced(lease(2), |c, _| insert(c, "b"));
        let (_dir, _reader) = one_transaction(vec![a, b]);
        assert_eq!(handed_back(a_rx), (1, "Ok(())".to_string()));
        assert_eq!(
            handed_back(b_rx),
            (2, r#"Err(LeaseLost("stack-1"))"#.to_string())
        );
        // ...and mixed with another job (a savepoint each).
        let (c, c_rx) = fenced(lease(1), |c, _| insert(c, "c"));
        let (answer, once_rx) = oneshot::channel();
        let once = Job::Once(Box::new(move |c: &Connection| {
            held(insert(c, "once"), answer)
        }));
        let (_dir, reader) = one_transaction(vec![c, once]);
        assert_eq!(handed_back(c_rx), (1, "Ok(())".to_string()));
        assert_eq!(said_once(once_rx), "Ok(())");
        assert_eq!(rows(&reader), ["c", "once"]);
    }

    #[test]
    fn a_stack_key_made_by_a_failed_write_is_made_again_for_the_next() {
        // The fixture's stack has no key yet: the first fence makes it,
        // inside the write that then fails.
        let (a, a_rx) = fenced(lease(1), |c, _| {
            insert(c, "a")?;
            Err(StoreError::Backend("a failed".into()))
        });
        let (b, b_rx) = fenced(lease(1), |c, key| insert(c, &format!("b{key}")));
        let (_dir, reader) = one_transaction(vec![a, b]);
        assert_eq!(said(a_rx), r#"Err(Backend("a failed"))"#);
        assert_eq!(said(b_rx), "Ok(())");
        assert_eq!(rows(&reader), ["b1"]);
        let key: i64 = reader
            .query_row(
                "SELECT stack_key FROM stack_keys WHERE stack_id = 'stack-1'",
                [],
                |r| r.get(0),
            )
            .expect("the key b was written with");
        assert_eq!(key, 1);
    }

    #[test]
    fn a_lost_lease_fails_its_write_and_no_other() {
        let (a, a_rx) = fenced(lease(1), |c, _| insert(c, "a"));
        let (b, b_rx) = fenced(lease(2), |c, _| insert(c, "b"));
        let (c, c_rx) = fenced(lease(1), |c, _| insert(c, "c"));
        let (_dir, reader) = one_transaction(vec![a, b, c]);
        assert_eq!(said(a_rx), "Ok(())");
        assert_eq!(said(b_rx), r#"Err(LeaseLost("stack-1"))"#);
        assert_eq!(said(c_rx), "Ok(())");
        assert_eq!(rows(&reader), ["a", "c"]);
    }

    #[test]
    fn a_lease_changed_earlier_in_the_transaction_fences_the_writes_after_it() {
        let (a, a_rx) = fenced(lease(1), |c, _| insert(c, "a"));
        let (answer, taken_rx) = oneshot::channel();
        let take_over = Job::Once(Box::new(move |c: &Connection| {
            let taken = c
                .execute("UPDATE leases SET owner = 'engine-b', token = 2", [])
                .map(|_| ())
                .map_err(backend);
            let reply: Reply = Box::new(move |_| {
                let _ = answer.send(taken);
            });
            (true, reply)
        }));
        let (c, c_rx) = fenced(lease(1), |c, _| insert(c, "c"));
        let (_dir, reader) = one_transaction(vec![a, take_over, c]);
        assert_eq!(said(a_rx), "Ok(())");
        assert_eq!(said_once(taken_rx), "Ok(())");
        assert_eq!(said(c_rx), r#"Err(LeaseLost("stack-1"))"#);
        assert_eq!(rows(&reader), ["a"]);
    }
}
