//! Copying the write-ahead log back into the database file on a thread of
//! its own, so the writer's commits do not wait for it.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its
//! threshold (1,000 WAL pages): that commit, and every job in its group,
//! waits while the log's pages are copied into the file and both are
//! synced; in a 10,000-resource create that was a sixth of the writer's
//! time. Here the writer's WAL hook only wakes a checkpointer with its own
//! connection, which copies what has been committed (a PASSIVE checkpoint:
//! it never blocks the writer or a reader) while the writer goes on.
//! Once the log is long, the writer copies the little the checkpointer has
//! left, so the next commit writes the log from its beginning again.
//! Durability is unchanged: a commit is durable in the log before it is
//! answered, checkpointed or not.

use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, MAIN_DB};

/// New WAL pages between two wake-ups of the checkpointer (SQLite's own
/// automatic checkpoint threshold).
const WAKE_EVERY_PAGES: i32 = 1_000;

/// From this length on, the writer copies what the checkpointer has not
/// yet (when that is little) so the log starts again from its beginning.
/// SQLite restarts the log only at a commit that finds it wholly copied,
/// which a checkpointer running beside a steady stream of commits rarely
/// leaves it, and a log that keeps growing costs every commit more: its
/// pages are new to the file system (allocated and cached anew) instead of
/// overwriting the ones the last round wrote.
const RESTART_AT_PAGES: i32 = 4_000;

/// What the writer copies itself at [`RESTART_AT_PAGES`]: about what a
/// checkpoint's run leaves behind while commits go on.
const WRITER_COPIES_AT_MOST: i32 = 512;

/// A log this long is copied by the writer whatever is left (the
/// checkpointer fell behind), so the file stays within ~64 MiB.
const WRITER_COPIES_AT_PAGES: i32 = 16_000;

/// Hands the checkpoints of `writer`'s database (the file at `path`) to a
/// thread of their own, and returns how many it has run. If that thread's
/// connection cannot be opened, the writer keeps SQLite's automatic
/// checkpoint (nothing is lost, commits are only slower).
pub(crate) fn start(writer: &mut Connection, path: &Path) -> Arc<AtomicUsize> {
    let runs = Arc::new(AtomicUsize::new(0));
    let checkpointer = match open(path) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "the state file's checkpoints stay in its commits: cannot open a connection for them");
            return runs;
        }
    };
    // One pending wake-up is enough: a checkpoint copies everything
    // committed before it starts.
    let (wake, woken) = mpsc::sync_channel::<()>(1);
    // The log's pages the checkpointer has copied (of the log as it was
    // then: the writer clears it when the log starts again).
    let copied = Arc::new(AtomicI32::new(0));
    let (counted, copied_by_checkpointer) = (runs.clone(), copied.clone());
    let spawned = std::thread::Builder::new()
        .name("cairn-sqlite-ckpt".into())
        .spawn(move || {
            while woken.recv().is_ok() {
                match checkpointer.wal_checkpoint_v2(Some(MAIN_DB), CheckpointMode::PASSIVE) {
                    Ok((_, done)) => copied_by_checkpointer.store(done, Ordering::Relaxed),
                    Err(e) => tracing::debug!(error = %e, "state file checkpoint"),
                }
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "the state file's checkpoints stay in its commits: cannot start their thread");
        return runs;
    }
    let mut log = Log::default();
    let hook = move |wal: &mut Wal, pages: i32| {
        let copied_now = copied.load(Ordering::Relaxed);
        match log.after_commit(pages, copied_now) {
            After::CopyHere => {
                // Busy while the checkpointer copies: a later commit tries.
                if let Ok((_, done)) = wal.checkpoint_v2(CheckpointMode::PASSIVE) {
                    copied.store(done, Ordering::Relaxed);
                }
            }
            After::Wake => {
                let _ = wake.try_send(());
            }
            After::Restarted => copied.store(0, Ordering::Relaxed),
            After::Nothing => {}
        }
        // An error here would report the commit, which has happened, as
        // failed: the hook never returns one.
        Ok(())
    };
    if let Err(e) = writer.wal_hook(Some(hook)) {
        tracing::warn!(error = %e, "the state file's checkpoints stay in its commits: cannot watch its log");
    }
    runs
}

/// What the writer does after a commit.
#[derive(Debug, PartialEq, Eq)]
enum After {
    /// Copy what is left of the log itself.
    CopyHere,
    /// Wake the checkpointer.
    Wake,
    /// The log started again: what the checkpointer copied was of the old.
    Restarted,
    Nothing,
}

/// The writer's view of the log between its commits.
#[derive(Default)]
struct Log {
    /// Its length at the last wake-up of the checkpointer.
    woken_at: i32,
    /// Its length after the last commit.
    last: i32,
}

impl Log {
    /// After a commit that left the log `pages` long, of which the
    /// checkpointer has copied `copied`.
    fn after_commit(&mut self, pages: i32, copied: i32) -> After {
        if pages < self.last {
            self.woken_at = 0;
            self.last = pages;
            return After::Restarted;
        }
        self.last = pages;
        let left = pages - copied.min(pages);
        if pages >= WRITER_COPIES_AT_PAGES
            || (pages >= RESTART_AT_PAGES && left <= WRITER_COPIES_AT_MOST)
        {
            After::CopyHere
        } else if pages - self.woken_at >= WAKE_EVERY_PAGES {
            self.woken_at = pages;
            After::Wake
        } else {
            After::Nothing
        }
    }
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let c = Connection::open(path)?;
    // The same syncs as the writer: the log before it is copied, the file
    // after.
    c.execute_batch("PRAGMA busy_timeout = 10000; PRAGMA synchronous = NORMAL;")?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_copied_into_the_file_by_the_checkpointer_while_the_writer_commits() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.db");
        let mut writer = Connection::open(&path).expect("opens");
        writer
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; CREATE TABLE t (v TEXT);",
            )
            .expect("set up");
        let runs = start(&mut writer, &path);
        // ~2,500 pages of rows, 50 rows a commit.
        let row = "x".repeat(2000);
        for _ in 0..100 {
            let tx = writer.unchecked_transaction().expect("begin");
            for _ in 0..50 {
                tx.execute("INSERT INTO t (v) VALUES (?1)", [&row])
                    .expect("insert");
            }
            tx.commit().expect("commit");
        }
        // Woken at 1,000 pages (and at 2,000 unless still copying), the
        // checkpointer copied rows into the database file while the
        // writer's connection is open.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let file_pages = || {
            std::fs::metadata(&path)
                .map(|m| m.len() / 4096)
                .unwrap_or(0)
        };
        while runs.load(Ordering::Relaxed) < 1 || file_pages() < WAKE_EVERY_PAGES as u64 / 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{} checkpoints, {} pages in the file",
                runs.load(Ordering::Relaxed),
                file_pages()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let count: i64 = writer
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .expect("count");
        assert_eq!(count, 5000);
    }

    #[test]
    fn the_checkpointer_is_woken_every_thousand_pages_and_the_writer_copies_only_a_little() {
        let mut log = Log::default();
        assert_eq!(log.after_commit(999, 0), After::Nothing);
        assert_eq!(log.after_commit(1_000, 0), After::Wake);
        assert_eq!(log.after_commit(1_500, 0), After::Nothing);
        assert_eq!(log.after_commit(2_010, 1_000), After::Wake);
        assert_eq!(log.after_commit(2_900, 1_000), After::Nothing);
        assert_eq!(log.after_commit(3_010, 2_010), After::Wake);
        // Past 4,000 pages with much left: the checkpointer's.
        assert_eq!(log.after_commit(4_100, 2_010), After::Wake);
        assert_eq!(log.after_commit(4_200, 3_600), After::Nothing);
        // Little left: the writer copies it, and the log starts again.
        assert_eq!(log.after_commit(4_300, 4_100), After::CopyHere);
        assert_eq!(log.after_commit(20, 4_300), After::Restarted);
        assert_eq!(log.after_commit(900, 0), After::Nothing);
        assert_eq!(log.after_commit(1_000, 0), After::Wake);
    }

    #[test]
    fn a_checkpointer_that_falls_behind_leaves_the_writer_to_copy_at_sixteen_thousand_pages() {
        let mut log = Log::default();
        assert_eq!(log.after_commit(15_000, 0), After::Wake);
        assert_eq!(log.after_commit(15_999, 0), After::Nothing);
        assert_eq!(log.after_commit(16_000, 0), After::CopyHere);
        // Busy (the checkpointer was copying): the next commit tries again.
        assert_eq!(log.after_commit(16_040, 0), After::CopyHere);
    }
}
