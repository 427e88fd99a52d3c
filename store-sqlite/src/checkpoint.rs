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
//! Durability is unchanged: a commit is durable in the log before it is
//! answered, checkpointed or not.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, MAIN_DB};

/// New WAL pages between two wake-ups of the checkpointer (SQLite's own
/// automatic checkpoint threshold).
const WAKE_EVERY_PAGES: i32 = 1_000;

/// A log this long is copied by the writer itself. The log starts again
/// from its beginning only at a commit that finds it wholly copied, which
/// a checkpointer running beside a steady stream of commits rarely
/// leaves it; the writer's own checkpoint (of the little the checkpointer
/// has not copied yet) lets it, so the file stays within ~64 MiB.
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
    let counted = runs.clone();
    let spawned = std::thread::Builder::new()
        .name("cairn-sqlite-ckpt".into())
        .spawn(move || {
            while woken.recv().is_ok() {
                if let Err(e) =
                    checkpointer.wal_checkpoint_v2(Some(MAIN_DB), CheckpointMode::PASSIVE)
                {
                    tracing::debug!(error = %e, "state file checkpoint");
                }
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "the state file's checkpoints stay in its commits: cannot start their thread");
        return runs;
    }
    let mut woken_at: i32 = 0;
    let hook = move |wal: &mut Wal, pages: i32| {
        if pages < woken_at {
            // The log started again from its beginning.
            woken_at = 0;
        }
        if pages >= WRITER_COPIES_AT_PAGES {
            // Busy while the checkpointer copies: the next commit tries.
            let _ = wal.checkpoint();
        } else if pages - woken_at >= WAKE_EVERY_PAGES {
            woken_at = pages;
            let _ = wake.try_send(());
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
        // Woken at 1,000 and 2,000 pages, the checkpointer copied the rows
        // into the database file while the writer's connection is open.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let file_pages = || {
            std::fs::metadata(&path)
                .map(|m| m.len() / 4096)
                .unwrap_or(0)
        };
        while runs.load(Ordering::Relaxed) < 2 || file_pages() < WAKE_EVERY_PAGES as u64 {
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
}
