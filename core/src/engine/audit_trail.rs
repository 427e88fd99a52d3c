//! Keeping the audit trail: records older than `[audit] keep_days` are
//! pruned, and every record is exported to `[audit] export_file` (one
//! CloudTrail record per JSON line) and `[audit] export_url` (CloudTrail's
//! log file shape, `{"Records": [...]}`, POSTed signed as every webhook
//! Cairn sends).
//!
//! The records table is the export's outbox, as the events table is the
//! notifications': each target keeps in the state the `seq` it has
//! received, under a claim, so engines sharing a state export each record
//! once between them, and one that dies mid-export loses nothing. The one
//! batch that can arrive twice is the one whose delivery the dying engine
//! had finished but not recorded; every record carries its `eventID` for
//! that.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::{Engine, EngineError};

/// Records sent in one batch.
const BATCH: usize = 100;
/// The longest wait before a failing target is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Where records are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportTarget {
    File(PathBuf),
    Http(String),
}

impl ExportTarget {
    /// The target's name in the state (its place is kept under it).
    fn key(&self) -> String {
        match self {
            ExportTarget::File(p) => format!("file://{}", p.display()),
            ExportTarget::Http(url) => url.clone(),
        }
    }

    /// `file` or `http`, for the metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ExportTarget::File(_) => "file",
            ExportTarget::Http(_) => "http",
        }
    }
}

/// What one target's turn did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub kind: &'static str,
    pub sent: usize,
    /// The delivery failed (tried again after a back-off).
    pub failed: bool,
}

/// One process's keeper of the audit trail over an engine's state.
pub struct AuditKeeper {
    engine: Arc<Engine>,
    owner: String,
    targets: Vec<ExportTarget>,
    /// Per target: failures in a row, and when to try again.
    backoff: Mutex<Vec<(u32, Instant)>>,
}

impl AuditKeeper {
    pub fn new(engine: Arc<Engine>) -> AuditKeeper {
        let audit = &engine.config.audit;
        let mut targets = Vec::new();
        if let Some(path) = &audit.export_file {
            targets.push(ExportTarget::File(path.clone()));
        }
        if let Some(url) = &audit.export_url {
            targets.push(ExportTarget::Http(url.clone()));
        }
        let owner = format!("{}:audit-{}", engine.owner, uuid::Uuid::new_v4().simple());
        let now = Instant::now();
        AuditKeeper {
            backoff: Mutex::new(vec![(0, now); targets.len()]),
            engine,
            owner,
            targets,
        }
    }

    /// Forgets the records older than `[audit] keep_days`.
    pub async fn prune(&self) -> Result<u64, EngineError> {
        let keep_ms = i64::try_from(self.engine.config.audit.keep_days)
            .unwrap_or(i64::MAX / 86_400_000)
            .saturating_mul(86_400_000);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Ok(self
            .engine
            .store
            .prune_audit(now.saturating_sub(keep_ms))
            .await?)
    }

    /// Gives each target (not backing off, not claimed by another engine)
    /// the records it has not received.
    pub async fn export_round(&self) -> Vec<Exported> {
        let mut out = Vec::new();
        for (i, target) in self.targets.iter().enumerate() {
            let due = self
                .backoff
                .lock()
                .ok()
                .and_then(|b| b.get(i).map(|(_, at)| *at <= Instant::now()))
                .unwrap_or(true);
            if !due {
                continue;
            }
            let result = self.export(target).await;
            let failed = result.is_err();
            if let Err(e) = &result {
                tracing::warn!(target = %target.key(), "exporting the audit trail: {e}; trying again later");
            }
            if let Ok(mut b) = self.backoff.lock() {
                if let Some(slot) = b.get_mut(i) {
                    *slot = if failed {
                        let failures = slot.0 + 1;
                        let wait = Duration::from_millis(500)
                            .saturating_mul(1 << failures.min(7))
                            .min(MAX_BACKOFF);
                        (failures, Instant::now() + wait)
                    } else {
                        (0, Instant::now())
                    };
                }
            }
            out.push(Exported {
                kind: target.kind(),
                sent: result.as_ref().copied().unwrap_or(0),
                failed,
            });
        }
        out
    }

    /// Sends `target` its records in batches, recording each batch's last
    /// `seq` before the next; how many were sent.
    async fn export(&self, target: &ExportTarget) -> Result<usize, String> {
        let store = &self.engine.store;
        let ttl = self.engine.lease_ttl_ms();
        let key = target.key();
        let Some(mut delivered) = store
            .claim_audit_export(&self.owner, &key, ttl)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(0);
        };
        let mut sent = 0;
        loop {
            let records = store
                .audit_after(delivered, BATCH)
                .await
                .map_err(|e| e.to_string())?;
            let Some(last) = records.last().map(|r| r.seq) else {
                return Ok(sent);
            };
            let bodies: Vec<&serde_json::Value> = records.iter().map(|r| &r.body).collect();
            self.deliver(target, &bodies, ttl).await?;
            delivered = last;
            sent += records.len();
            let still_ours = store
                .audit_exported(&self.owner, &key, delivered, ttl)
                .await
                .map_err(|e| e.to_string())?;
            if !still_ours {
                return Ok(sent);
            }
        }
    }

    async fn deliver(
        &self,
        target: &ExportTarget,
        records: &[&serde_json::Value],
        ttl_ms: i64,
    ) -> Result<(), String> {
        match target {
            ExportTarget::File(path) => {
                let mut lines = String::new();
                for r in records {
                    lines.push_str(&r.to_string());
                    lines.push('\n');
                }
                let cannot = |e: std::io::Error| format!("{}: {e}", path.display());
                let mut file = tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .await
                    .map_err(cannot)?;
                file.write_all(lines.as_bytes()).await.map_err(cannot)?;
                // On disk before the place is moved past them.
                file.sync_data().await.map_err(cannot)
            }
            ExportTarget::Http(url) => {
                let body = serde_json::json!({ "Records": records }).to_string();
                // One attempt ends well before the claim would run out.
                let attempt =
                    Duration::from_millis(u64::try_from(ttl_ms / 2).unwrap_or(1000).max(100));
                self.engine
                    .shared
                    .webhooks
                    .post(
                        url,
                        self.engine.config.webhooks.secret.as_deref(),
                        body.into_bytes(),
                        attempt,
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    }
}
