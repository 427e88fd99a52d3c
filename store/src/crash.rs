//! A store that "crashes": every durable write is counted, and from the
//! k-th one on every write is refused, as if the process had died just
//! before it. Reads still answer (a dying process reads nothing that
//! matters: whatever it does next is refused or lost).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::{
    ChangeSets, Claim, DriftDetections, Events, Exports, Inbox, Lease, Leases, OperationRecord,
    Operations, Resources, Stacks, Store, StoreError,
};
use cairn_model::registry::{
    NewTypeVersion, RegistrationRecord, TypeConfigurationRecord, TypeVersionRecord,
};
use cairn_model::stack::{
    ChangeSetRecord, EventRecord, HistoryRecord, ResourceRecord, SignalRecord, StackRecord,
    StackStatus,
};

pub struct CrashStore {
    inner: Arc<dyn Store>,
    /// Writes allowed before the crash; `None`: never crashes.
    allowed: Option<u64>,
    writes: AtomicU64,
    crashed: AtomicBool,
    /// Unreachable for now (a database outage): writes fail, uncounted.
    down: AtomicBool,
    /// Writes before the pause: from then on every write (and lease
    /// renewal) waits until [`CrashStore::release`], as in a process
    /// stalled past its lease while another engine takes over.
    pause_at: Option<u64>,
    crash_seen: tokio::sync::watch::Sender<bool>,
    /// Writes counted before the crash and still on their way to the
    /// inner store: the process died after they landed, so the crash is
    /// seen only once they have (a write counted before the crash that
    /// landed after a new engine took over would be one the dead process
    /// made from beyond the grave).
    landing: tokio::sync::watch::Sender<u64>,
    paused: tokio::sync::watch::Sender<bool>,
    released: tokio::sync::watch::Sender<bool>,
}

impl CrashStore {
    pub fn new(inner: Arc<dyn Store>, allowed: Option<u64>) -> Arc<CrashStore> {
        Self::build(inner, allowed, None)
    }

    /// A store that stalls before its write `at + 1` until released.
    pub fn pausing(inner: Arc<dyn Store>, at: u64) -> Arc<CrashStore> {
        Self::build(inner, None, Some(at))
    }

    fn build(
        inner: Arc<dyn Store>,
        allowed: Option<u64>,
        pause_at: Option<u64>,
    ) -> Arc<CrashStore> {
        Arc::new(CrashStore {
            inner,
            allowed,
            writes: AtomicU64::new(0),
            crashed: AtomicBool::new(false),
            down: AtomicBool::new(false),
            pause_at,
            crash_seen: tokio::sync::watch::channel(false).0,
            landing: tokio::sync::watch::channel(0).0,
            paused: tokio::sync::watch::channel(false).0,
            released: tokio::sync::watch::channel(false).0,
        })
    }

    /// Waits until the store stalls at its pause point.
    pub async fn until_paused(&self) {
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|p| *p).await;
    }

    /// Lets the stalled writes through (to the real store, which fences
    /// them with the lease).
    pub fn release(&self) {
        self.released.send_replace(true);
    }

    /// Once paused, waits for the release.
    async fn stall(&self) {
        if *self.paused.borrow() {
            let mut rx = self.released.subscribe();
            let _ = rx.wait_for(|r| *r).await;
        }
    }

    /// Whether the crash happened (a write was refused).
    pub fn crashed(&self) -> bool {
        self.crashed.load(Ordering::SeqCst)
    }

    /// Waits until the crash happened and every write counted before it
    /// landed.
    pub async fn until_crashed(&self) {
        let mut rx = self.crash_seen.subscribe();
        let _ = rx.wait_for(|c| *c).await;
        let mut rx = self.landing.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Durable writes that landed.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Makes the store unreachable (every write fails) or reachable again.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Counts one write; refused once the budget is spent, stalled from
    /// the pause point on. The write is on its way to the inner store
    /// until the returned [`Landing`] is dropped.
    async fn write(&self) -> Result<Landing<'_>, StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::Backend(
                "simulated outage: the database cannot be reached".into(),
            ));
        }
        if self.crashed() {
            return Err(crashed());
        }
        // On its way before it is counted: whoever sees the crash (counted
        // after this) sees this write in flight too.
        let landing = Landing::new(&self.landing);
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.allowed.is_some_and(|allowed| n >= allowed) {
            self.writes.fetch_sub(1, Ordering::SeqCst);
            self.crashed.store(true, Ordering::SeqCst);
            drop(landing);
            self.crash_seen.send_replace(true);
            return Err(crashed());
        }
        if self.pause_at.is_some_and(|at| n >= at) {
            self.paused.send_replace(true);
        }
        self.stall().await;
        Ok(landing)
    }
}

/// One counted write on its way to the inner store.
struct Landing<'a>(&'a tokio::sync::watch::Sender<u64>);

impl<'a> Landing<'a> {
    fn new(count: &'a tokio::sync::watch::Sender<u64>) -> Landing<'a> {
        count.send_modify(|n| *n += 1);
        Landing(count)
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

fn crashed() -> StoreError {
    StoreError::Backend("simulated crash: this process is gone".into())
}

#[async_trait::async_trait]
impl Stacks for CrashStore {
    async fn insert_stack(
        &self,
        stack: &StackRecord,
        first_event: &EventRecord,
        operation: Option<&OperationRecord>,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        let _landing = self.write().await?;
        self.inner
            .insert_stack(stack, first_event, operation, owner, ttl_ms)
            .await
    }

    async fn find_stack(&self, name_or_id: &str) -> Result<Option<StackRecord>, StoreError> {
        self.inner.find_stack(name_or_id).await
    }

    async fn list_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        self.inner.list_stacks().await
    }

    async fn in_progress_stacks(&self) -> Result<Vec<StackRecord>, StoreError> {
        self.inner.in_progress_stacks().await
    }

    async fn set_stack_status(
        &self,
        lease: &Lease,
        status: StackStatus,
        reason: Option<&str>,
        event: &EventRecord,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner
            .set_stack_status(lease, status, reason, event)
            .await
    }

    async fn set_termination_protection(
        &self,
        stack_id: &str,
        enabled: bool,
    ) -> Result<bool, StoreError> {
        self.inner
            .set_termination_protection(stack_id, enabled)
            .await
    }

    async fn set_stack_policy(&self, stack_id: &str, policy: &str) -> Result<bool, StoreError> {
        self.inner.set_stack_policy(stack_id, policy).await
    }

    async fn save_stack(&self, lease: &Lease, stack: &StackRecord) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.save_stack(lease, stack).await
    }
}

#[async_trait::async_trait]
impl Leases for CrashStore {
    async fn acquire_lease(
        &self,
        stack_id: &str,
        owner: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        let _landing = self.write().await?;
        self.inner.acquire_lease(stack_id, owner, ttl_ms).await
    }

    async fn renew_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        // Renewals come by the clock, not by the operation's steps: not a
        // crash point, but a dead process renews nothing.
        if self.crashed() {
            return Err(crashed());
        }
        self.stall().await;
        self.inner.renew_lease(lease, ttl_ms).await
    }

    async fn lease_owner(&self, stack_id: &str) -> Result<Option<String>, StoreError> {
        self.inner.lease_owner(stack_id).await
    }

    async fn break_lease(&self, stack_id: &str, owner: &str) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.break_lease(stack_id, owner).await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.release_lease(lease).await
    }

    async fn hand_off_lease(&self, lease: &Lease, ttl_ms: i64) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.hand_off_lease(lease, ttl_ms).await
    }

    async fn claim_operations(
        &self,
        owners: &[String],
        ttl_ms: i64,
        handed_off: bool,
    ) -> Result<Vec<Claim>, StoreError> {
        let _landing = self.write().await?;
        self.inner
            .claim_operations(owners, ttl_ms, handed_off)
            .await
    }
}

#[async_trait::async_trait]
impl Operations for CrashStore {
    async fn begin_operation(
        &self,
        lease: &Lease,
        start: &crate::OperationStart,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.begin_operation(lease, start).await
    }

    async fn operation(&self, stack_id: &str) -> Result<Option<OperationRecord>, StoreError> {
        self.inner.operation(stack_id).await
    }

    async fn clear_operation(&self, lease: &Lease) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.clear_operation(lease).await
    }

    async fn set_operation_options(
        &self,
        lease: &Lease,
        options: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.set_operation_options(lease, options).await
    }

    async fn note_resume(&self, stack_id: &str) -> Result<u32, StoreError> {
        let _landing = self.write().await?;
        self.inner.note_resume(stack_id).await
    }

    async fn request_cancel(&self, stack_id: &str) -> Result<bool, StoreError> {
        let _landing = self.write().await?;
        self.inner.request_cancel(stack_id).await
    }

    async fn cancel_requested(&self, stack_id: &str) -> Result<bool, StoreError> {
        self.inner.cancel_requested(stack_id).await
    }

    async fn open_history(&self, lease: &Lease, entry: &HistoryRecord) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.open_history(lease, entry).await
    }

    async fn set_history_details(
        &self,
        lease: &Lease,
        details: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.set_history_details(lease, details).await
    }

    async fn history(&self, stack_id: &str) -> Result<Vec<HistoryRecord>, StoreError> {
        self.inner.history(stack_id).await
    }
}

#[async_trait::async_trait]
impl Resources for CrashStore {
    async fn put_resource(
        &self,
        lease: &Lease,
        resource: &ResourceRecord,
        events: Vec<EventRecord>,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.put_resource(lease, resource, events).await
    }

    async fn remove_resource(
        &self,
        lease: &Lease,
        logical_id: &str,
        events: &[EventRecord],
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.remove_resource(lease, logical_id, events).await
    }

    async fn clear_journals(&self, lease: &Lease) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.clear_journals(lease).await
    }

    async fn resources(&self, stack_id: &str) -> Result<Vec<ResourceRecord>, StoreError> {
        self.inner.resources(stack_id).await
    }

    async fn put_group(
        &self,
        lease: &Lease,
        logical_id: &str,
        physical_id: &str,
        state: Option<&serde_json::Value>,
        events: &[EventRecord],
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner
            .put_group(lease, logical_id, physical_id, state, events)
            .await
    }

    async fn group(
        &self,
        stack_id: &str,
        physical_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.inner.group(stack_id, physical_id).await
    }

    async fn groups(
        &self,
        stack_id: &str,
    ) -> Result<Vec<(String, String, serde_json::Value)>, StoreError> {
        self.inner.groups(stack_id).await
    }
}

#[async_trait::async_trait]
impl Events for CrashStore {
    async fn put_events(&self, lease: &Lease, events: &[EventRecord]) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.put_events(lease, events).await
    }

    async fn events_from(
        &self,
        stack_id: &str,
        skip: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.inner.events_from(stack_id, skip).await
    }

    async fn events_page(
        &self,
        stack_id: &str,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.inner.events_page(stack_id, skip, limit).await
    }

    async fn event_count(&self, stack_id: &str) -> Result<usize, StoreError> {
        self.inner.event_count(stack_id).await
    }
}

#[async_trait::async_trait]
impl Inbox for CrashStore {
    async fn callback_secret(&self) -> Result<Vec<u8>, StoreError> {
        self.inner.callback_secret().await
    }

    async fn put_callback_response(
        &self,
        request_id: &str,
        body: &[u8],
    ) -> Result<bool, StoreError> {
        let _landing = self.write().await?;
        self.inner.put_callback_response(request_id, body).await
    }

    async fn callback_responses(
        &self,
        request_ids: &[String],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.callback_responses(request_ids).await
    }

    async fn put_signal(&self, signal: &SignalRecord) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.put_signal(signal).await
    }

    async fn add_signal(&self, signal: &SignalRecord) -> Result<bool, StoreError> {
        let _landing = self.write().await?;
        self.inner.add_signal(signal).await
    }

    async fn signals(
        &self,
        stack_id: &str,
        logical_id: &str,
    ) -> Result<Vec<SignalRecord>, StoreError> {
        self.inner.signals(stack_id, logical_id).await
    }

    async fn clear_signals(&self, stack_id: &str, logical_id: &str) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.clear_signals(stack_id, logical_id).await
    }
}

#[async_trait::async_trait]
impl ChangeSets for CrashStore {
    async fn put_change_set(&self, cs: &ChangeSetRecord) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.put_change_set(cs).await
    }

    async fn find_change_set(
        &self,
        stack_id: &str,
        name_or_id: &str,
    ) -> Result<Option<ChangeSetRecord>, StoreError> {
        self.inner.find_change_set(stack_id, name_or_id).await
    }

    async fn change_sets(&self, stack_id: &str) -> Result<Vec<ChangeSetRecord>, StoreError> {
        self.inner.change_sets(stack_id).await
    }

    async fn delete_change_set(&self, change_set_id: &str) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.delete_change_set(change_set_id).await
    }

    async fn obsolete_change_set(
        &self,
        change_set_id: &str,
        reason: &str,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.obsolete_change_set(change_set_id, reason).await
    }
}

#[async_trait::async_trait]
impl Exports for CrashStore {
    async fn put_exports(
        &self,
        lease: &Lease,
        exports: &[(String, String)],
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.put_exports(lease, exports).await
    }

    async fn delete_exports(&self, lease: &Lease) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.delete_exports(lease).await
    }

    async fn export(&self, name: &str) -> Result<Option<(String, String)>, StoreError> {
        self.inner.export(name).await
    }

    async fn exports(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        self.inner.exports().await
    }

    async fn put_imports(&self, lease: &Lease, names: &[String]) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.put_imports(lease, names).await
    }

    async fn importers(&self, export_name: &str) -> Result<Vec<String>, StoreError> {
        self.inner.importers(export_name).await
    }
}

#[async_trait::async_trait]
impl DriftDetections for CrashStore {
    async fn put_drift_detection(
        &self,
        stack_id: &str,
        detection_id: &str,
        at: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner
            .put_drift_detection(stack_id, detection_id, at, body)
            .await
    }

    async fn drift_detection(
        &self,
        detection_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.inner.drift_detection(detection_id).await
    }

    async fn last_drift_detection(
        &self,
        stack_id: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.inner.last_drift_detection(stack_id).await
    }
}

#[async_trait::async_trait]
impl crate::Notifications for CrashStore {
    async fn set_notification_targets(
        &self,
        stack_id: &str,
        targets: &[String],
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.set_notification_targets(stack_id, targets).await
    }

    async fn claim_notifications(
        &self,
        owner: &str,
        dead: &[String],
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<crate::NotificationCursor>, StoreError> {
        let _landing = self.write().await?;
        self.inner
            .claim_notifications(owner, dead, ttl_ms, limit)
            .await
    }

    async fn notification_claimants(&self) -> Result<Vec<String>, StoreError> {
        self.inner.notification_claimants().await
    }

    async fn notified(
        &self,
        owner: &str,
        cursor: &crate::NotificationCursor,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let _landing = self.write().await?;
        self.inner.notified(owner, cursor, ttl_ms).await
    }

    async fn release_notification(
        &self,
        owner: &str,
        cursor: &crate::NotificationCursor,
    ) -> Result<(), StoreError> {
        self.inner.release_notification(owner, cursor).await
    }
}

#[async_trait::async_trait]
impl crate::Refactors for CrashStore {
    async fn put_refactor(
        &self,
        refactor_id: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.put_refactor(refactor_id, body).await
    }

    async fn refactor(&self, refactor_id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.inner.refactor(refactor_id).await
    }

    async fn refactors(&self) -> Result<Vec<serde_json::Value>, StoreError> {
        self.inner.refactors().await
    }

    async fn apply_refactor(
        &self,
        leases: &[Lease],
        write: &crate::RefactorWrite,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.apply_refactor(leases, write).await
    }
}

#[async_trait::async_trait]
impl crate::TypeRegistry for CrashStore {
    async fn begin_registration(
        &self,
        r: &RegistrationRecord,
    ) -> Result<RegistrationRecord, StoreError> {
        let _landing = self.write().await?;
        self.inner.begin_registration(r).await
    }

    async fn complete_registration(
        &self,
        token: &str,
        version: &NewTypeVersion,
        package: &[u8],
    ) -> Result<String, StoreError> {
        let _landing = self.write().await?;
        self.inner
            .complete_registration(token, version, package)
            .await
    }

    async fn fail_registration(&self, token: &str, reason: &str) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.fail_registration(token, reason).await
    }

    async fn registration(&self, token: &str) -> Result<Option<RegistrationRecord>, StoreError> {
        self.inner.registration(token).await
    }

    async fn registrations(&self) -> Result<Vec<RegistrationRecord>, StoreError> {
        self.inner.registrations().await
    }

    async fn type_versions(&self) -> Result<Vec<TypeVersionRecord>, StoreError> {
        self.inner.type_versions().await
    }

    async fn type_package(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.type_package(type_name, version_id).await
    }

    async fn set_default_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner
            .set_default_type_version(type_name, version_id)
            .await
    }

    async fn deregister_type_version(
        &self,
        type_name: &str,
        version_id: &str,
    ) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner
            .deregister_type_version(type_name, version_id)
            .await
    }

    async fn registry_generation(&self) -> Result<i64, StoreError> {
        self.inner.registry_generation().await
    }

    async fn set_type_configuration(&self, c: &TypeConfigurationRecord) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.set_type_configuration(c).await
    }

    async fn type_configurations(&self) -> Result<Vec<TypeConfigurationRecord>, StoreError> {
        self.inner.type_configurations().await
    }
}

#[async_trait::async_trait]
impl crate::Audit for CrashStore {
    async fn add_audit(&self, record: &cairn_model::audit::AuditRecord) -> Result<i64, StoreError> {
        let _landing = self.write().await?;
        self.inner.add_audit(record).await
    }

    async fn audit_records(
        &self,
        q: &cairn_model::audit::AuditQuery,
    ) -> Result<Vec<cairn_model::audit::AuditRecord>, StoreError> {
        self.inner.audit_records(q).await
    }

    async fn prune_audit(&self, before_ms: i64) -> Result<u64, StoreError> {
        let _landing = self.write().await?;
        self.inner.prune_audit(before_ms).await
    }

    async fn audit_after(
        &self,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<cairn_model::audit::AuditRecord>, StoreError> {
        self.inner.audit_after(after_seq, limit).await
    }

    async fn claim_audit_export(
        &self,
        owner: &str,
        target: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let _landing = self.write().await?;
        self.inner.claim_audit_export(owner, target, ttl_ms).await
    }

    async fn audit_exported(
        &self,
        owner: &str,
        target: &str,
        delivered: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let _landing = self.write().await?;
        self.inner
            .audit_exported(owner, target, delivered, ttl_ms)
            .await
    }

    async fn revoke_session(&self, session: &str, until_ms: i64) -> Result<(), StoreError> {
        let _landing = self.write().await?;
        self.inner.revoke_session(session, until_ms).await
    }

    async fn session_revoked(&self, session: &str) -> Result<bool, StoreError> {
        self.inner.session_revoked(session).await
    }
}

#[async_trait::async_trait]
impl Store for CrashStore {
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStore;
    use std::time::Duration;

    /// A write counted before the crash lands before the crash is seen: a
    /// new engine that resumes once it is seen finds nothing of the dead
    /// one arriving after it.
    #[tokio::test]
    async fn the_crash_is_seen_once_every_write_counted_before_it_has_landed() {
        let store = CrashStore::new(Arc::new(MemoryStore::new()), Some(1));
        let on_its_way = store.write().await.expect("the first write is allowed");
        assert!(
            store.write().await.is_err(),
            "the second write is the crash"
        );
        assert!(store.crashed());
        let seen = tokio::time::timeout(Duration::from_millis(50), store.until_crashed()).await;
        assert!(
            seen.is_err(),
            "seen while a write counted before it is on its way"
        );
        drop(on_its_way);
        tokio::time::timeout(Duration::from_secs(5), store.until_crashed())
            .await
            .expect("seen once the write landed");
        assert_eq!(store.writes(), 1);
    }
}
