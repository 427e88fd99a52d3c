//! The store conformance suite: what every [`Store`] backend must do, as
//! test functions that take the backend. Each backend's tests call [`all`]
//! with a fresh, empty store (SQLite today; the PostgreSQL backend of the
//! several-engines work runs the same functions).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Map};

use super::{Lease, OperationRecord, Store, StoreError};
use cairn_model::audit::{AuditCall, AuditQuery, AuditRecord, Caller, STACK_RESOURCE};
use cairn_model::stack::{
    now, ChangeSetRecord, ChangeSetStatus, ChangeSetType, EventRecord, ExecutionStatus,
    HistoryRecord, OnFailure, OperationKind, PendingCall, ResourceRecord, ResourceStatus,
    StackRecord, StackStatus, Tag, STACK_TYPE,
};

/// A new stack record named `name`, CREATE_IN_PROGRESS (the checks' and
/// the backends' own tests' fixture).
pub fn stack(name: &str) -> StackRecord {
    StackRecord {
        stack_id: format!(
            "arn:aws:cloudformation:us-east-1:1:stack/{name}/{}",
            uuid::Uuid::new_v4()
        ),
        stack_name: name.to_string(),
        status: StackStatus::CreateInProgress,
        status_reason: Some("User Initiated".into()),
        description: Some("d".into()),
        template_body: "Resources: {}".into(),
        parameters: BTreeMap::from([("P".to_string(), "v".to_string())]),
        no_echo: vec!["P".into()],
        outputs: Vec::new(),
        on_failure: OnFailure::Rollback,
        created_at: now(),
        updated_at: now(),
        deleted_at: None,
        tags: vec![Tag {
            key: "team".into(),
            value: "a".into(),
        }],
        parent_id: Some("arn:aws:cloudformation:us-east-1:1:stack/parent/1".into()),
        root_id: Some("arn:aws:cloudformation:us-east-1:1:stack/root/1".into()),
        context: cairn_model::stack::TemplateContext {
            files: BTreeMap::from([("a.sh".to_string(), "echo a".to_string())]),
            environment: Some(serde_json::json!({"parameter_defaults": {"p": "v"}})),
            parameters: BTreeMap::from([("P".to_string(), "v".to_string())]),
            facade: Some(cairn_model::stack::Facade {
                metadata: serde_json::json!({"role": "web"}),
                deletion_policy: "Retain".into(),
                update_policy: serde_json::json!({}),
            }),
            processed: Some(serde_json::json!({"Resources": {"B1": {"Type": "T"}}})),
        },
        capabilities: vec!["CAPABILITY_AUTO_EXPAND".into()],
        termination_protection: true,
        stack_policy: Some(r#"{"Statement":[]}"#.into()),
        rollback_configuration: Some(cairn_model::rollback_triggers::RollbackConfiguration {
            rollback_triggers: Some(vec![cairn_model::rollback_triggers::RollbackTrigger {
                arn: "http://127.0.0.1:9/health".into(),
                kind: cairn_model::rollback_triggers::HEALTH_CHECK.into(),
            }]),
            monitoring_time_in_minutes: Some(3),
        }),
        notification_arns: vec!["http://127.0.0.1:9/first".into()],
    }
}

/// An event of `s` about `logical` in `status`.
pub fn event(s: &StackRecord, logical: &str, status: &str) -> EventRecord {
    EventRecord {
        hook: None,
        event_id: uuid::Uuid::new_v4().to_string(),
        stack_id: s.stack_id.clone(),
        stack_name: s.stack_name.clone(),
        logical_id: logical.to_string(),
        physical_id: String::new(),
        resource_type: if logical == s.stack_name {
            STACK_TYPE.into()
        } else {
            "T::X".into()
        },
        timestamp: now(),
        status: status
            .parse()
            .unwrap_or_else(|e| panic!("a conformance check names {e}")),
        status_reason: None,
        properties: None,
    }
}

fn resource(s: &StackRecord, logical: &str) -> ResourceRecord {
    ResourceRecord {
        stack_id: s.stack_id.clone(),
        logical_id: logical.to_string(),
        resource_type: "T::X".into(),
        physical_id: Some(format!("{logical}-1")),
        status: ResourceStatus::CreateComplete,
        status_reason: None,
        properties: Map::from_iter([("K".to_string(), json!("v"))]),
        attributes: Map::new(),
        pending: Some(PendingCall {
            action: cairn_model::stack::CallKind::Create,
            request_id: "r-1".into(),
            since_ms: None,
            hook: None,
        }),
        updated_at: now(),
        metadata: None,
        journal: None,
        no_echo: false,
        type_version: Some("00000003".into()),
    }
}

/// Runs every check against stores made by `fresh` (one each).
pub async fn all<F, Fut>(fresh: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Arc<dyn Store>>,
{
    stacks_and_events(fresh().await.as_ref()).await;
    leases_and_fencing(fresh().await.as_ref()).await;
    resources_operations_and_history(fresh().await.as_ref()).await;
    change_sets(fresh().await.as_ref()).await;
    exports_groups_and_drift(fresh().await.as_ref()).await;
    concurrent_writers(fresh().await).await;
    a_follower_sees_every_event_once(fresh().await).await;
    claims(fresh().await).await;
    nested_claims(fresh().await.as_ref()).await;
    callback_responses(fresh().await.as_ref()).await;
    signals(fresh().await.as_ref()).await;
    notifications(fresh().await.as_ref()).await;
    refactors(fresh().await.as_ref()).await;
    type_registry(fresh().await.as_ref()).await;
    audit(fresh().await.as_ref()).await;
}

fn audit_record(name: &str, stack: Option<&str>, key: Option<&str>, at: i64) -> AuditRecord {
    AuditRecord::new(
        &Caller {
            access_key: key.map(str::to_string),
            username: key.map(|k| format!("{k}-name")),
            source_ip: "127.0.0.1".into(),
            user_agent: "conformance".into(),
            console: false,
        },
        AuditCall {
            event_name: name.into(),
            event_time_ms: at,
            request_id: uuid::Uuid::new_v4().to_string(),
            event_id: uuid::Uuid::new_v4().to_string(),
            request_parameters: json!({ "stackName": stack }),
            resource_type: stack.map(|_| STACK_RESOURCE.to_string()),
            resource_name: stack.map(str::to_string),
            stack_id: stack.map(|s| format!("arn:aws:cloudformation:us-east-1:1:stack/{s}/id")),
            error: (name == "DeleteStack").then(|| ("ValidationError".into(), "no".into())),
            region: "us-east-1".into(),
            account_id: "1".into(),
            ..AuditCall::default()
        },
    )
}

/// The audit trail: records kept whole and in order, read newest first
/// with every filter, paged, pruned by age; export targets claimed and
/// advanced by one owner at a time; console sessions revoked.
async fn audit(store: &dyn Store) {
    let t = 1_795_000_000_000;
    let records = [
        audit_record("CreateStack", Some("web"), Some("AKID1"), t),
        audit_record("UpdateStack", Some("web"), Some("AKID2"), t + 1000),
        audit_record("CreateStack", Some("db"), Some("AKID1"), t + 2000),
        audit_record("RegisterType", None, None, t + 3000),
        audit_record("DeleteStack", Some("web"), Some("AKID1"), t + 4000),
    ];
    let mut seqs = Vec::new();
    for r in &records {
        seqs.push(store.add_audit(r).await.unwrap());
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let all = store.audit_records(&AuditQuery::default()).await.unwrap();
    let names: Vec<&str> = all.iter().map(|r| r.event_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "DeleteStack",
            "RegisterType",
            "CreateStack",
            "UpdateStack",
            "CreateStack"
        ]
    );
    let mut newest = records[4].clone();
    newest.seq = seqs[4];
    assert_eq!(all[0], newest, "a record comes back as it was kept");
    let ask = |f: fn(&mut AuditQuery)| {
        let mut q = AuditQuery::default();
        f(&mut q);
        async move {
            store
                .audit_records(&q)
                .await
                .unwrap()
                .iter()
                .map(|r| r.seq)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ask(|q| q.stack = Some("web".into())).await,
        [seqs[4], seqs[1], seqs[0]]
    );
    assert_eq!(
        ask(|q| q.stack = Some("arn:aws:cloudformation:us-east-1:1:stack/db/id".into())).await,
        [seqs[2]]
    );
    assert_eq!(
        ask(|q| q.access_key = Some("AKID2".into())).await,
        [seqs[1]]
    );
    assert_eq!(
        ask(|q| q.username = Some("AKID2-name".into())).await,
        [seqs[1]]
    );
    assert_eq!(
        ask(|q| q.event_name = Some("CreateStack".into())).await,
        [seqs[2], seqs[0]]
    );
    assert_eq!(
        ask(|q| q.resource_type = Some(STACK_RESOURCE.into()))
            .await
            .len(),
        4
    );
    assert_eq!(
        ask(|q| {
            q.since_ms = Some(1_795_000_001_000);
            q.until_ms = Some(1_795_000_003_000);
        })
        .await,
        [seqs[3], seqs[2], seqs[1]]
    );
    assert_eq!(
        ask(|q| q.only_stacks = Some(vec!["db".into()])).await,
        [seqs[2]]
    );
    assert_eq!(ask(|q| q.limit = 2).await, [seqs[4], seqs[3]]);
    let mut next = AuditQuery {
        limit: 2,
        before_seq: Some(seqs[3]),
        ..AuditQuery::default()
    };
    let page: Vec<i64> = store
        .audit_records(&next)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(page, [seqs[2], seqs[1]]);
    next.event_id = Some(records[0].event_id.clone());
    next.before_seq = None;
    assert_eq!(store.audit_records(&next).await.unwrap().len(), 1);
    let after: Vec<i64> = store
        .audit_after(seqs[1], 2)
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(after, [seqs[2], seqs[3]]);

    // Export targets: one owner at a time, delivered kept across claims.
    assert_eq!(
        store
            .claim_audit_export("e1", "file:/a", 60_000)
            .await
            .unwrap(),
        Some(0)
    );
    assert_eq!(
        store
            .claim_audit_export("e2", "file:/a", 60_000)
            .await
            .unwrap(),
        None
    );
    assert!(store
        .audit_exported("e1", "file:/a", seqs[2], 60_000)
        .await
        .unwrap());
    assert!(!store
        .audit_exported("e2", "file:/a", seqs[4], 60_000)
        .await
        .unwrap());
    assert_eq!(
        store
            .claim_audit_export("e2", "http://b", 60_000)
            .await
            .unwrap(),
        Some(0),
        "each target has its own place"
    );
    // A claim that ran out is taken over where it stood.
    assert!(store
        .audit_exported("e1", "file:/a", seqs[2], -1)
        .await
        .unwrap());
    assert_eq!(
        store
            .claim_audit_export("e2", "file:/a", 60_000)
            .await
            .unwrap(),
        Some(seqs[2])
    );
    assert!(!store
        .audit_exported("e1", "file:/a", seqs[4], 60_000)
        .await
        .unwrap());

    // Pruning goes by age.
    assert_eq!(store.prune_audit(t + 2000).await.unwrap(), 2);
    assert_eq!(
        store
            .audit_records(&AuditQuery::default())
            .await
            .unwrap()
            .len(),
        3
    );

    // Console sessions.
    assert!(!store.session_revoked("s1").await.unwrap());
    store.revoke_session("s1", t * 2).await.unwrap();
    store.revoke_session("s1", t * 2).await.unwrap();
    assert!(store.session_revoked("s1").await.unwrap());
    assert!(!store.session_revoked("s2").await.unwrap());
}

/// Registrations and type versions: ids in order, the first live version
/// the default, a client token registering once, the default kept while
/// other versions live, the generation moving with each change.
async fn type_registry(store: &dyn Store) {
    use cairn_model::registry::{
        NewTypeVersion, RegistrationRecord, RegistrationStatus, RegistryTypeKind,
    };
    const T: &str = "Example::Notes::Note";
    let registration = |token: &str, client: Option<&str>| RegistrationRecord {
        token: token.into(),
        type_name: T.into(),
        kind: RegistryTypeKind::Resource,
        status: RegistrationStatus::InProgress,
        description: "Registration in progress".into(),
        version_id: None,
        client_token: client.map(String::from),
        created_at: "2026-11-27T00:00:00Z".into(),
        updated_at: "2026-11-27T00:00:00Z".into(),
    };
    let version = |sha: &str| NewTypeVersion {
        type_name: T.into(),
        kind: RegistryTypeKind::Resource,
        schema: "{}".into(),
        description: "Notes".into(),
        handler: r#"{"webhook":{"url":"http://127.0.0.1:1"}}"#.into(),
        secret: Some(r#"{"Env":"NOTES_SECRET"}"#.into()),
        package_sha256: sha.into(),
        signed_by: None,
    };
    let g0 = store.registry_generation().await.unwrap();
    let r1 = store
        .begin_registration(&registration("t1", Some("client-1")))
        .await
        .unwrap();
    assert_eq!(r1.token, "t1");
    // The same client token: the first registration, nothing new.
    let again = store
        .begin_registration(&registration("t1b", Some("client-1")))
        .await
        .unwrap();
    assert_eq!(again.token, "t1");
    assert_eq!(store.registrations().await.unwrap().len(), 1);
    let v1 = store
        .complete_registration("t1", &version("aa"), b"package one")
        .await
        .unwrap();
    assert_eq!(v1, "00000001");
    let done = store.registration("t1").await.unwrap().unwrap();
    assert_eq!(done.status, RegistrationStatus::Complete);
    assert_eq!(done.version_id.as_deref(), Some("00000001"));
    assert_eq!(done.description, "Registered as version 00000001");
    store
        .begin_registration(&registration("t2", None))
        .await
        .unwrap();
    let v2 = store
        .complete_registration("t2", &version("bb"), b"package two")
        .await
        .unwrap();
    assert_eq!(v2, "00000002");
    store
        .begin_registration(&registration("t3", None))
        .await
        .unwrap();
    store.fail_registration("t3", "bad schema").await.unwrap();
    let failed = store.registration("t3").await.unwrap().unwrap();
    assert_eq!(failed.status, RegistrationStatus::Failed);
    assert_eq!(failed.description, "bad schema");
    assert_eq!(failed.version_id, None);
    // An ended registration records nothing more: not a version after it
    // failed, not a failure after it completed.
    assert!(matches!(
        store
            .complete_registration("t3", &version("zz"), b"late")
            .await,
        Err(StoreError::RegistrationEnded(_))
    ));
    assert!(matches!(
        store.fail_registration("t1", "too late").await,
        Err(StoreError::RegistrationEnded(_))
    ));
    assert!(matches!(
        store.fail_registration("nope", "x").await,
        Err(StoreError::NoSuchRegistration(_))
    ));
    let versions = store.type_versions().await.unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.version_id.as_str(), v.is_default, v.deprecated))
            .collect::<Vec<_>>(),
        [("00000001", true, false), ("00000002", false, false)]
    );
    assert_eq!(
        versions[0].secret.as_deref(),
        Some(r#"{"Env":"NOTES_SECRET"}"#)
    );
    assert_eq!(versions[1].package_sha256, "bb");
    assert_eq!(
        store.type_package(T, "00000002").await.unwrap().as_deref(),
        Some(&b"package two"[..])
    );
    assert_eq!(store.type_package(T, "00000009").await.unwrap(), None);
    // The default stays while another version lives.
    assert!(matches!(
        store.deregister_type_version(T, "00000001").await,
        Err(StoreError::DefaultTypeVersion { .. })
    ));
    assert!(matches!(
        store.set_default_type_version(T, "00000007").await,
        Err(StoreError::TypeNotFound { .. })
    ));
    store.set_default_type_version(T, "00000002").await.unwrap();
    store.deregister_type_version(T, "00000001").await.unwrap();
    assert!(matches!(
        store.set_default_type_version(T, "00000001").await,
        Err(StoreError::TypeNotFound { .. })
    ));
    let versions = store.type_versions().await.unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.version_id.as_str(), v.is_default, v.deprecated))
            .collect::<Vec<_>>(),
        [("00000001", false, true), ("00000002", true, false)]
    );
    // The last live version goes with the type; a new registration
    // counts on from the deregistered ones and is the default.
    store.deregister_type_version(T, "00000002").await.unwrap();
    store
        .begin_registration(&registration("t4", None))
        .await
        .unwrap();
    let v3 = store
        .complete_registration("t4", &version("cc"), b"package three")
        .await
        .unwrap();
    assert_eq!(v3, "00000003");
    let live: Vec<_> = store
        .type_versions()
        .await
        .unwrap()
        .into_iter()
        .filter(|v| !v.deprecated)
        .map(|v| (v.version_id, v.is_default))
        .collect();
    assert_eq!(live, [("00000003".to_string(), true)]);
    assert!(matches!(
        store
            .complete_registration("nope", &version("dd"), b"x")
            .await,
        Err(StoreError::NoSuchRegistration(_))
    ));
    assert!(store.registry_generation().await.unwrap() > g0);
    // Configurations: one per (type, alias), replaced in place, each a
    // registry change.
    let config = |alias: &str, json: &str| cairn_model::registry::TypeConfigurationRecord {
        type_name: T.into(),
        alias: alias.into(),
        configuration: json.into(),
        updated_at: "2026-11-27T00:00:00Z".into(),
    };
    let g1 = store.registry_generation().await.unwrap();
    store
        .set_type_configuration(&config("default", r#"{"Root":"/a"}"#))
        .await
        .unwrap();
    store
        .set_type_configuration(&config("other", r#"{"Root":"/b"}"#))
        .await
        .unwrap();
    store
        .set_type_configuration(&config("default", r#"{"Root":"/c"}"#))
        .await
        .unwrap();
    let configs = store.type_configurations().await.unwrap();
    assert_eq!(
        configs
            .iter()
            .map(|c| (c.alias.as_str(), c.configuration.as_str()))
            .collect::<Vec<_>>(),
        [
            ("default", r#"{"Root":"/c"}"#),
            ("other", r#"{"Root":"/b"}"#)
        ]
    );
    assert!(store.registry_generation().await.unwrap() >= g1 + 3);
}

/// A refactor's write: rows renamed (a swap included) and moved between
/// stacks, each stack's fields, status and event, and the record, at once
/// and only under every stack's lease.
async fn refactors(store: &dyn Store) {
    use crate::{RefactorWrite, RowMove};
    let (a, b) = (stack("ra"), stack("rb"));
    let mut leases = Vec::new();
    for s in [&a, &b] {
        let name = s.stack_name.clone();
        leases.push(
            store
                .insert_stack(
                    s,
                    &event(s, &name, "CREATE_IN_PROGRESS"),
                    None,
                    "o:1:x",
                    60_000,
                )
                .await
                .unwrap(),
        );
    }
    for (s, lease, logical) in [
        (&a, &leases[0], "X"),
        (&a, &leases[0], "Y"),
        (&b, &leases[1], "B"),
    ] {
        let mut r = resource(s, logical);
        r.physical_id = Some(format!("{logical}-id"));
        store.put_resource(lease, &r, Vec::new()).await.unwrap();
    }
    store
        .put_refactor("r1", &serde_json::json!({"ExecutionStatus": "AVAILABLE"}))
        .await
        .unwrap();
    let moved = |from: &StackRecord, fl: &str, to: &StackRecord, tl: &str| RowMove {
        from_stack: from.stack_id.clone(),
        from_logical: fl.into(),
        to_stack: to.stack_id.clone(),
        to_logical: tl.into(),
    };
    let after = |s: &StackRecord| {
        let mut s = s.clone();
        s.template_body = "refactored".into();
        s.status = StackStatus::UpdateComplete;
        let e = event(&s, &s.stack_name.clone(), "UPDATE_COMPLETE");
        (s, e)
    };
    let write = RefactorWrite {
        stacks: vec![after(&a), after(&b)],
        // X and Y swap their ids; then Y (once X) moves to b as Z.
        moves: vec![moved(&a, "X", &a, "Y"), moved(&a, "Y", &b, "Z")],
        events: vec![event(&a, "X", "DELETE_SKIPPED")],
        refactor_id: "r1".into(),
        body: serde_json::json!({"ExecutionStatus": "EXECUTE_COMPLETE"}),
    };
    // A lease that is not current: nothing is written.
    let stale = Lease {
        token: 99,
        ..leases[0].clone()
    };
    assert!(store
        .apply_refactor(&[stale, leases[1].clone()], &write)
        .await
        .is_err());
    assert_eq!(store.resources(&b.stack_id).await.unwrap().len(), 1);
    store.apply_refactor(&leases, &write).await.unwrap();
    let ids = |rows: Vec<ResourceRecord>| {
        let mut v: Vec<(String, String)> = rows
            .into_iter()
            .map(|r| (r.logical_id, r.physical_id.unwrap_or_default()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        ids(store.resources(&a.stack_id).await.unwrap()),
        vec![("Y".to_string(), "X-id".to_string())]
    );
    assert_eq!(
        ids(store.resources(&b.stack_id).await.unwrap()),
        vec![
            ("B".to_string(), "B-id".to_string()),
            ("Z".to_string(), "Y-id".to_string())
        ]
    );
    let ra = store.find_stack("ra").await.unwrap().unwrap();
    assert_eq!(
        (ra.status, ra.template_body.as_str()),
        (StackStatus::UpdateComplete, "refactored")
    );
    let statuses: Vec<String> = store
        .events(&a.stack_id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.status.to_string())
        .collect();
    assert_eq!(
        statuses,
        ["CREATE_IN_PROGRESS", "DELETE_SKIPPED", "UPDATE_COMPLETE"]
    );
    assert_eq!(
        store.refactor("r1").await.unwrap().unwrap()["ExecutionStatus"],
        "EXECUTE_COMPLETE"
    );
    assert_eq!(store.refactors().await.unwrap().len(), 1);
    assert_eq!(store.refactor("nope").await.unwrap(), None);
}

/// Notification targets: the insert's targets start at the first event, a
/// target set later at the events recorded from then on; one owner's
/// claim keeps others off until it runs out, is let go, or its owner is
/// dead; only the claim's owner records progress.
async fn notifications(store: &dyn Store) {
    use crate::NotificationCursor;
    let s = stack("told");
    let first = "http://127.0.0.1:9/first".to_string();
    let lease = store
        .insert_stack(
            &s,
            &event(&s, "told", "CREATE_IN_PROGRESS"),
            None,
            "a:1:x",
            60_000,
        )
        .await
        .unwrap();
    let claimed = store
        .claim_notifications("n1", &[], 60_000, 10)
        .await
        .unwrap();
    let at_start = NotificationCursor {
        stack_id: s.stack_id.clone(),
        target: first.clone(),
        delivered: 0,
    };
    assert_eq!(claimed, vec![at_start.clone()]);
    // Claimed: another owner gets nothing, unless the first is dead.
    assert!(store
        .claim_notifications("n2", &[], 60_000, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.notification_claimants().await.unwrap(),
        vec!["n1".to_string()]
    );
    let done = NotificationCursor {
        delivered: 1,
        ..at_start.clone()
    };
    assert!(!store.notified("n2", &done, 60_000).await.unwrap());
    assert!(store.notified("n1", &done, 60_000).await.unwrap());
    // Everything delivered: nothing to claim, even for the owner.
    assert!(store
        .claim_notifications("n1", &[], 60_000, 10)
        .await
        .unwrap()
        .is_empty());
    store
        .set_stack_status(
            &lease,
            StackStatus::CreateComplete,
            None,
            &event(&s, "told", "CREATE_COMPLETE"),
        )
        .await
        .unwrap();
    let taken = store
        .claim_notifications("n2", &["n1".to_string()], 60_000, 10)
        .await
        .unwrap();
    assert_eq!(taken, vec![done.clone()]);
    store.release_notification("n2", &done).await.unwrap();
    assert!(store.notification_claimants().await.unwrap().is_empty());
    // A target added now starts after the two events; the one left out
    // is forgotten.
    let second = "http://127.0.0.1:9/second".to_string();
    store
        .set_notification_targets(&s.stack_id, std::slice::from_ref(&second))
        .await
        .unwrap();
    assert_eq!(
        store
            .find_stack("told")
            .await
            .unwrap()
            .unwrap()
            .notification_arns,
        vec![second.clone()]
    );
    assert!(store
        .claim_notifications("n3", &[], 60_000, 10)
        .await
        .unwrap()
        .is_empty());
    store
        .put_events(&lease, &[event(&s, "told", "UPDATE_IN_PROGRESS")])
        .await
        .unwrap();
    let claimed = store
        .claim_notifications("n3", &[], 60_000, 10)
        .await
        .unwrap();
    assert_eq!(
        claimed,
        vec![NotificationCursor {
            stack_id: s.stack_id.clone(),
            target: second,
            delivered: 2
        }]
    );
    // A claim that ran out is anyone's.
    assert!(store
        .claim_notifications("n4", &[], 60_000, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .claim_notifications("n3", &[], -1, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .claim_notifications("n4", &[], 60_000, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn stacks_and_events(store: &dyn Store) {
    let s = stack("one");
    let lease = store
        .insert_stack(
            &s,
            &event(&s, "one", "CREATE_IN_PROGRESS"),
            None,
            "a:1:x",
            60_000,
        )
        .await
        .unwrap();
    assert_eq!(lease.owner, "a:1:x");
    // A live stack's name is taken.
    let again = stack("one");
    assert!(matches!(
        store
            .insert_stack(
                &again,
                &event(&again, "one", "CREATE_IN_PROGRESS"),
                None,
                "b",
                60_000
            )
            .await,
        Err(StoreError::StackExists(_))
    ));
    let found = store.find_stack("one").await.unwrap().unwrap();
    assert_eq!(found, s);
    assert_eq!(store.find_stack(&s.stack_id).await.unwrap().unwrap(), s);
    assert_eq!(store.in_progress_stacks().await.unwrap().len(), 1);
    // An event may carry a hook's verdict.
    let mut last = event(&s, "one", "CREATE_COMPLETE");
    last.hook = Some(cairn_model::hooks::HookEvent {
        hook_type: "Private::Guard::Mode".into(),
        hook_status: cairn_model::hooks::HookStatus::Failed,
        hook_status_reason: Some("rule R: no".into()),
        hook_invocation_point: "PRE_PROVISION".into(),
        hook_failure_mode: cairn_model::hooks::FailureMode::Warn,
    });
    store
        .set_stack_status(&lease, StackStatus::CreateComplete, None, &last)
        .await
        .unwrap();
    assert!(store.in_progress_stacks().await.unwrap().is_empty());
    assert_eq!(store.event_count(&s.stack_id).await.unwrap(), 2);
    let events = store.events(&s.stack_id).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.status.as_str()).collect::<Vec<_>>(),
        ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    );
    assert_eq!(events[1], last);
    assert_eq!(events[0].hook, None);
    assert_eq!(store.events_from(&s.stack_id, 1).await.unwrap().len(), 1);
    // A page: `limit` events after the first `skip`.
    assert_eq!(
        store.events_page(&s.stack_id, 0, 1).await.unwrap(),
        events[..1]
    );
    assert_eq!(
        store.events_page(&s.stack_id, 1, 5).await.unwrap(),
        events[1..]
    );
    assert!(store
        .events_page(&s.stack_id, 2, 5)
        .await
        .unwrap()
        .is_empty());
    let mut saved = store.find_stack("one").await.unwrap().unwrap();
    saved.description = Some("changed".into());
    saved.tags.clear();
    store.save_stack(&lease, &saved).await.unwrap();
    let read = store.find_stack("one").await.unwrap().unwrap();
    assert_eq!(read.description.as_deref(), Some("changed"));
    assert!(read.tags.is_empty());
    let listed = store.list_stacks().await.unwrap();
    assert_eq!(listed.len(), 1);
    // Termination protection is set without the lease, and a save of a
    // record read before does not undo it.
    assert!(read.termination_protection);
    assert!(store
        .set_termination_protection(&s.stack_id, false)
        .await
        .unwrap());
    store.save_stack(&lease, &read).await.unwrap();
    assert!(
        !store
            .find_stack("one")
            .await
            .unwrap()
            .unwrap()
            .termination_protection
    );
    assert!(!store
        .set_termination_protection("arn:no-such-stack", true)
        .await
        .unwrap());
    // The stack policy likewise.
    assert_eq!(read.stack_policy.as_deref(), Some(r#"{"Statement":[]}"#));
    let policy =
        r#"{"Statement":[{"Effect":"Allow","Action":"Update:*","Principal":"*","Resource":"*"}]}"#;
    assert!(store.set_stack_policy(&s.stack_id, policy).await.unwrap());
    store.save_stack(&lease, &read).await.unwrap();
    let again = store.find_stack("one").await.unwrap().unwrap();
    assert_eq!(again.stack_policy.as_deref(), Some(policy));
    assert!(!store
        .set_stack_policy("arn:no-such-stack", policy)
        .await
        .unwrap());
}

async fn leases_and_fencing(store: &dyn Store) {
    let s = stack("leased");
    let first = store
        .insert_stack(
            &s,
            &event(&s, "leased", "CREATE_IN_PROGRESS"),
            None,
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    // Another owner is refused while the lease lives.
    assert!(matches!(
        store.acquire_lease(&s.stack_id, "h:1:b", 60_000).await,
        Err(StoreError::Busy { .. })
    ));
    assert_eq!(
        store.lease_owner(&s.stack_id).await.unwrap().as_deref(),
        Some("h:1:a")
    );
    store.renew_lease(&first, 60_000).await.unwrap();
    // Broken (its owner is known dead): the next owner takes over, and the
    // token grows, so the old owner's writes are refused.
    store.break_lease(&s.stack_id, "h:1:a").await.unwrap();
    let second = store
        .acquire_lease(&s.stack_id, "h:1:b", 60_000)
        .await
        .unwrap();
    assert!(second.token > first.token);
    let stale = store
        .put_resource(
            &first,
            &resource(&s, "A"),
            vec![event(&s, "A", "CREATE_COMPLETE")],
        )
        .await;
    assert!(matches!(stale, Err(StoreError::LeaseLost(_))), "{stale:?}");
    assert!(store.resources(&s.stack_id).await.unwrap().is_empty());
    assert!(matches!(
        store.renew_lease(&first, 60_000).await,
        Err(StoreError::LeaseLost(_))
    ));
    // An expired lease is taken over too.
    store.release_lease(&second).await.unwrap();
    assert_eq!(store.lease_owner(&s.stack_id).await.unwrap(), None);
    let short = store.acquire_lease(&s.stack_id, "h:1:c", 1).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let taken = store
        .acquire_lease(&s.stack_id, "h:1:d", 60_000)
        .await
        .unwrap();
    assert!(taken.token > short.token);
    assert!(matches!(
        store.acquire_lease("no-such-stack", "h:1:e", 60_000).await,
        Err(StoreError::NoSuchStack(_))
    ));
}

async fn resources_operations_and_history(store: &dyn Store) {
    let s = stack("rows");
    let lease = store
        .insert_stack(
            &s,
            &event(&s, "rows", "CREATE_IN_PROGRESS"),
            None,
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    let a = resource(&s, "A");
    store
        .put_resource(&lease, &a, vec![event(&s, "A", "CREATE_COMPLETE")])
        .await
        .unwrap();
    store
        .put_resource(&lease, &resource(&s, "B"), Vec::new())
        .await
        .unwrap();
    let rows = store.resources(&s.stack_id).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows.iter().find(|r| r.logical_id == "A"), Some(&a));
    store
        .remove_resource(&lease, "B", &[event(&s, "B", "DELETE_COMPLETE")])
        .await
        .unwrap();
    assert_eq!(store.resources(&s.stack_id).await.unwrap().len(), 1);
    store
        .put_events(&lease, &[event(&s, "C", "DELETE_COMPLETE")])
        .await
        .unwrap();
    assert_eq!(store.event_count(&s.stack_id).await.unwrap(), 4);
    store.clear_journals(&lease).await.unwrap();
    // Operations: begun in one write (record, stack fields and status,
    // event, history entry), cancel requested from anywhere, resumes counted.
    let o = stack("operations");
    let o_lease = store
        .insert_stack(
            &o,
            &event(&o, "operations", "CREATE_COMPLETE"),
            None,
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    let start = started(
        &o,
        OperationKind::Update,
        StackStatus::UpdateInProgress,
        None,
    );
    let op = start.operation.clone();
    assert!(!store.request_cancel(&o.stack_id).await.unwrap());
    // The rows the operation rewrites and removes as it starts land with
    // it: `Kept` is rewritten, `Gone` removed, `Other` untouched.
    for name in ["Kept", "Gone", "Other"] {
        store
            .put_resource(&o_lease, &resource(&o, name), Vec::new())
            .await
            .unwrap();
    }
    let mut start = start;
    let mut kept = resource(&o, "Kept");
    kept.status_reason = Some("folded".into());
    start.rows = vec![kept.clone()];
    start.removed_rows = vec!["Gone".into()];
    store.begin_operation(&o_lease, &start).await.unwrap();
    let rows = store.resources(&o.stack_id).await.unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r.logical_id.as_str()).collect();
    assert_eq!(names, ["Kept", "Other"]);
    assert_eq!(rows[0], kept);
    assert_eq!(
        store.operation(&o.stack_id).await.unwrap(),
        Some(op.clone())
    );
    let begun = store.find_stack(&o.stack_id).await.unwrap().unwrap();
    assert_eq!(begun.status, StackStatus::UpdateInProgress);
    assert_eq!(begun.template_body, start.stack.template_body);
    let opened = store.history(&o.stack_id).await.unwrap();
    assert_eq!(opened.len(), 1);
    assert_eq!(
        (opened[0].kind.as_str(), opened[0].ended_at.as_deref()),
        ("UPDATE", None)
    );
    assert!(!store.cancel_requested(&o.stack_id).await.unwrap());
    assert!(store.request_cancel(&o.stack_id).await.unwrap());
    assert!(store.cancel_requested(&o.stack_id).await.unwrap());
    assert_eq!(store.note_resume(&o.stack_id).await.unwrap(), 1);
    assert_eq!(store.note_resume(&o.stack_id).await.unwrap(), 2);
    store
        .put_events(&o_lease, &[event(&o, "A", "UPDATE_IN_PROGRESS")])
        .await
        .unwrap();
    assert_eq!(store.note_resume(&o.stack_id).await.unwrap(), 1);
    // What the operation learnt is kept in its options (a stack hook's
    // IN_PROGRESS), the rest of its record unchanged; fenced.
    let learnt = json!({"StackHooks": {"action": "HOOK", "request_id": "tok"}});
    store
        .set_operation_options(&o_lease, &learnt)
        .await
        .unwrap();
    let mut with_options = op.clone();
    with_options.options = learnt.clone();
    assert_eq!(
        store.operation(&o.stack_id).await.unwrap(),
        Some(with_options)
    );
    let mut stale = o_lease.clone();
    stale.token -= 1;
    assert!(store
        .set_operation_options(&stale, &json!({}))
        .await
        .is_err());
    store.clear_operation(&o_lease).await.unwrap();
    assert_eq!(store.operation(&o.stack_id).await.unwrap(), None);
    // A stack inserted with its operation has both at once.
    let t = stack("with-operation");
    let first = OperationRecord {
        stack_id: t.stack_id.clone(),
        kind: OperationKind::Create,
        options: json!({"TimeoutInMinutes": 5}),
        started_at: now(),
    };
    store
        .insert_stack(
            &t,
            &event(&t, "with-operation", "CREATE_IN_PROGRESS"),
            Some(&first),
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    assert_eq!(store.operation(&t.stack_id).await.unwrap(), Some(first));
    // History: opened, detailed, ended by the terminal status.
    let entry = HistoryRecord {
        stack_id: s.stack_id.clone(),
        kind: OperationKind::Create,
        change_set: None,
        template_body: s.template_body.clone(),
        parameters: BTreeMap::new(),
        started_at: now(),
        ended_at: None,
        status: None,
        status_reason: None,
        details: None,
    };
    store.open_history(&lease, &entry).await.unwrap();
    store
        .set_history_details(&lease, &json!({"steps": []}))
        .await
        .unwrap();
    store
        .set_stack_status(
            &lease,
            StackStatus::CreateComplete,
            None,
            &event(&s, "rows", "CREATE_COMPLETE"),
        )
        .await
        .unwrap();
    let history = store.history(&s.stack_id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].status.as_deref(), Some("CREATE_COMPLETE"));
    assert!(history[0].ended_at.is_some());
    assert_eq!(history[0].details, Some(json!({"steps": []})));
}

/// What starting a `kind` operation of `s` writes: a new template, `status`,
/// its event and history entry, and the change set it executes.
fn started(
    s: &StackRecord,
    kind: OperationKind,
    status: StackStatus,
    change_set_id: Option<String>,
) -> super::OperationStart {
    let mut stack = s.clone();
    stack.status = status;
    stack.template_body = "Resources: {Started: {Type: T}}".into();
    super::OperationStart {
        operation: OperationRecord {
            stack_id: s.stack_id.clone(),
            kind,
            options: json!({"k": 1}),
            started_at: now(),
        },
        change_set_id,
        event: event(s, &s.stack_name, status.as_str()),
        history: HistoryRecord {
            stack_id: s.stack_id.clone(),
            kind,
            change_set: None,
            template_body: stack.template_body.clone(),
            parameters: BTreeMap::new(),
            started_at: now(),
            ended_at: None,
            status: None,
            status_reason: None,
            details: None,
        },
        stack,
        rows: Vec::new(),
        removed_rows: Vec::new(),
    }
}

fn change_set(s: &StackRecord, name: &str) -> ChangeSetRecord {
    ChangeSetRecord {
        change_set_id: format!(
            "arn:aws:cloudformation:us-east-1:1:changeSet/{name}/{}",
            uuid::Uuid::new_v4()
        ),
        change_set_name: name.to_string(),
        stack_id: s.stack_id.clone(),
        stack_name: s.stack_name.clone(),
        change_set_type: ChangeSetType::Update,
        status: ChangeSetStatus::CreateComplete,
        execution_status: ExecutionStatus::Available,
        status_reason: None,
        description: None,
        template_body: "Resources: {}".into(),
        parameters: BTreeMap::new(),
        no_echo: Vec::new(),
        changes: json!([]),
        created_at: now(),
        base_version: 1,
        tags: Some(vec![Tag {
            key: "k".into(),
            value: "v".into(),
        }]),
        nested: cairn_model::stack::ChangeSetNesting {
            templates: cairn_model::nested::NestedTemplates(BTreeMap::from([(
                "Child".to_string(),
                cairn_model::nested::NestedTemplate {
                    location: "/t/child.yaml".into(),
                    body: "Resources: {}".into(),
                },
            )])),
            include_nested_stacks: true,
            upgrade_types: BTreeMap::from([("Org::Kv::Thing".to_string(), "00000002".to_string())]),
            hook_results: vec![cairn_model::hooks::HookResult {
                type_name: "Private::Guard::Mode".into(),
                status: cairn_model::hooks::HookStatus::Succeeded,
                hook_status_reason: None,
                invocation_point: "PRE_PROVISION".into(),
                failure_mode: cairn_model::hooks::FailureMode::Fail,
                invoked_at: now(),
            }],
            parent_change_set_id: Some("arn:parent-set".into()),
            root_change_set_id: Some("arn:root-set".into()),
            rollback_configuration: Some(cairn_model::rollback_triggers::RollbackConfiguration {
                rollback_triggers: Some(Vec::new()),
                monitoring_time_in_minutes: None,
            }),
            notification_arns: Some(vec!["http://127.0.0.1:9/set".into()]),
            context: cairn_model::stack::TemplateContext {
                files: BTreeMap::from([("f".to_string(), "x".to_string())]),
                environment: None,
                parameters: BTreeMap::new(),
                facade: None,
                processed: None,
            },
        },
    }
}

async fn change_sets(store: &dyn Store) {
    let s = stack("sets");
    let lease = store
        .insert_stack(
            &s,
            &event(&s, "sets", "UPDATE_IN_PROGRESS"),
            None,
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    let first = change_set(&s, "first");
    let second = change_set(&s, "second");
    store.put_change_set(&first).await.unwrap();
    store.put_change_set(&second).await.unwrap();
    assert!(matches!(
        store.put_change_set(&change_set(&s, "first")).await,
        Err(StoreError::ChangeSetExists(_))
    ));
    assert_eq!(
        store.find_change_set(&s.stack_id, "first").await.unwrap(),
        Some(first.clone())
    );
    // By id, whatever stack is named.
    assert_eq!(
        store
            .find_change_set("", &second.change_set_id)
            .await
            .unwrap(),
        Some(second.clone())
    );
    assert_eq!(store.change_sets(&s.stack_id).await.unwrap().len(), 2);
    store
        .obsolete_change_set(&second.change_set_id, "moved")
        .await
        .unwrap();
    let obsolete = store
        .find_change_set(&s.stack_id, "second")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(obsolete.execution_status, ExecutionStatus::Obsolete);
    // Executing one removes the others, and the end removes it too.
    store
        .begin_operation(
            &lease,
            &started(
                &s,
                OperationKind::Update,
                StackStatus::UpdateInProgress,
                Some(first.change_set_id.clone()),
            ),
        )
        .await
        .unwrap();
    let left = store.change_sets(&s.stack_id).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].execution_status, ExecutionStatus::ExecuteInProgress);
    store
        .set_stack_status(
            &lease,
            StackStatus::UpdateComplete,
            None,
            &event(&s, "sets", "UPDATE_COMPLETE"),
        )
        .await
        .unwrap();
    assert!(store.change_sets(&s.stack_id).await.unwrap().is_empty());
    let third = change_set(&s, "third");
    store.put_change_set(&third).await.unwrap();
    store.delete_change_set(&third.change_set_id).await.unwrap();
    assert_eq!(
        store.find_change_set(&s.stack_id, "third").await.unwrap(),
        None
    );
}

async fn exports_groups_and_drift(store: &dyn Store) {
    let a = stack("exporter");
    let la = store
        .insert_stack(
            &a,
            &event(&a, "exporter", "CREATE_IN_PROGRESS"),
            None,
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    let b = stack("other");
    let lb = store
        .insert_stack(
            &b,
            &event(&b, "other", "CREATE_IN_PROGRESS"),
            None,
            "h:1:b",
            60_000,
        )
        .await
        .unwrap();
    store
        .put_exports(&la, &[("Vpc".into(), "vpc-1".into())])
        .await
        .unwrap();
    match store
        .put_exports(&lb, &[("Vpc".into(), "vpc-2".into())])
        .await
    {
        Err(StoreError::ExportExists { name, stack }) => {
            assert_eq!(name, "Vpc");
            assert_eq!(stack, "exporter");
        }
        other => panic!("expected ExportExists, got {other:?}"),
    }
    assert_eq!(
        store.export("Vpc").await.unwrap(),
        Some(("vpc-1".to_string(), a.stack_id.clone()))
    );
    store.put_imports(&lb, &["Vpc".to_string()]).await.unwrap();
    assert_eq!(store.importers("Vpc").await.unwrap(), ["other"]);
    assert_eq!(store.exports().await.unwrap().len(), 1);
    store.delete_exports(&la).await.unwrap();
    assert_eq!(store.export("Vpc").await.unwrap(), None);
    // Groups: keyed by physical id, written with events, removed by None.
    let state = json!({"members": ["m-1"]});
    store
        .put_group(
            &la,
            "G",
            "g-1",
            Some(&state),
            &[event(&a, "m-1", "CREATE_COMPLETE")],
        )
        .await
        .unwrap();
    assert_eq!(
        store.group(&a.stack_id, "g-1").await.unwrap(),
        Some(state.clone())
    );
    assert_eq!(
        store.groups(&a.stack_id).await.unwrap(),
        vec![("G".to_string(), "g-1".to_string(), state)]
    );
    store.put_group(&la, "G", "g-1", None, &[]).await.unwrap();
    assert!(store.groups(&a.stack_id).await.unwrap().is_empty());
    // Drift detections: by id, and the latest per stack.
    store
        .put_drift_detection(&a.stack_id, "d-1", &now(), &json!({"n": 1}))
        .await
        .unwrap();
    store
        .put_drift_detection(&a.stack_id, "d-2", &now(), &json!({"n": 2}))
        .await
        .unwrap();
    assert_eq!(
        store.drift_detection("d-1").await.unwrap(),
        Some(json!({"n": 1}))
    );
    assert_eq!(
        store.last_drift_detection(&a.stack_id).await.unwrap(),
        Some(json!({"n": 2}))
    );
    assert_eq!(store.last_drift_detection(&b.stack_id).await.unwrap(), None);
}

/// A follower that reads a stack's events by how many it has seen
/// (`cairn deploy`, the console, DescribeStackEvents' pages) while the
/// operation's writes land concurrently sees each event once, none
/// skipped: events become readable in the order they are read in.
async fn a_follower_sees_every_event_once(store: Arc<dyn Store>) {
    let (s, lease) = inserted(store.as_ref(), "followed").await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let follower = {
        let (store, id, done) = (store.clone(), s.stack_id.clone(), done.clone());
        tokio::spawn(async move {
            let mut seen: Vec<String> = Vec::new();
            loop {
                // Read whether the writers were done before the read: a
                // read after they were sees everything.
                let last = done.load(std::sync::atomic::Ordering::SeqCst);
                let read = store.events_from(&id, seen.len()).await.unwrap();
                seen.extend(read.into_iter().map(|e| e.event_id));
                if last {
                    return seen;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    // Each resource's writes one after the other, as the engine makes them;
    // many resources at once.
    let mut writers = Vec::new();
    for i in 0..24 {
        let (store, lease, s) = (store.clone(), lease.clone(), s.clone());
        writers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for step in ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"].repeat(10) {
                let row = resource(&s, &format!("F{i}"));
                let ev = event(&s, &format!("F{i}"), step);
                ids.push(ev.event_id.clone());
                store.put_resource(&lease, &row, vec![ev]).await.unwrap();
            }
            ids
        }));
    }
    let mut written = 1;
    for w in writers {
        written += w.await.unwrap().len();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = follower.await.unwrap();
    let stored: Vec<String> = store
        .events(&s.stack_id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_id)
        .collect();
    assert_eq!(stored.len(), written);
    let once: std::collections::HashSet<&String> = seen.iter().collect();
    assert_eq!(
        (seen.len(), once.len()),
        (written, written),
        "the follower saw {} events ({} distinct) of {written}",
        seen.len(),
        once.len()
    );
    assert_eq!(seen, stored, "the follower read them in the stored order");
}

/// A new stack `name` (its first event written with it) and its lease.
async fn inserted(store: &dyn Store, name: &str) -> (StackRecord, Lease) {
    let s = stack(name);
    let first = event(&s, name, "CREATE_IN_PROGRESS");
    let lease = store
        .insert_stack(&s, &first, None, "h:1:a", 60_000)
        .await
        .unwrap();
    (s, lease)
}

/// Many writers at once: exactly one of the owners racing for a stack gets
/// its lease, and writes made in parallel under one lease all land.
async fn concurrent_writers(store: Arc<dyn Store>) {
    let (s, lease) = inserted(store.as_ref(), "raced").await;
    store.release_lease(&lease).await.unwrap();
    let mut racers = Vec::new();
    for i in 0..16 {
        let store = store.clone();
        let id = s.stack_id.clone();
        racers.push(tokio::spawn(async move {
            store.acquire_lease(&id, &format!("h:1:{i}"), 60_000).await
        }));
    }
    let mut won = Vec::new();
    for r in racers {
        match r.await.unwrap() {
            Ok(l) => won.push(l),
            Err(StoreError::Busy { .. }) => {}
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(won.len(), 1, "{won:?}");
    let lease = won.remove(0);
    let mut writers = Vec::new();
    for i in 0..32 {
        let store = store.clone();
        let lease = lease.clone();
        let row = resource(&s, &format!("R{i}"));
        let ev = event(&s, &format!("R{i}"), "CREATE_COMPLETE");
        writers.push(tokio::spawn(async move {
            store.put_resource(&lease, &row, vec![ev]).await
        }));
    }
    for w in writers {
        w.await.unwrap().unwrap();
    }
    assert_eq!(store.resources(&s.stack_id).await.unwrap().len(), 32);
    assert_eq!(store.event_count(&s.stack_id).await.unwrap(), 33);
    // A stale owner's write among the current owner's (one group commit on
    // PostgreSQL): it alone is refused, the others land.
    let stale = Lease {
        token: lease.token - 1,
        owner: "h:1:gone".into(),
        ..lease.clone()
    };
    let mut writers = Vec::new();
    for i in 0..17 {
        let store = store.clone();
        let lease = if i == 8 { stale.clone() } else { lease.clone() };
        let row = resource(&s, &format!("S{i}"));
        let ev = event(&s, &format!("S{i}"), "CREATE_COMPLETE");
        writers.push(tokio::spawn(async move {
            store.put_resource(&lease, &row, vec![ev]).await
        }));
    }
    for (i, w) in writers.into_iter().enumerate() {
        let written = w.await.unwrap();
        if i == 8 {
            assert!(
                matches!(written, Err(StoreError::LeaseLost(_))),
                "{written:?}"
            );
        } else {
            written.unwrap();
        }
    }
    assert_eq!(store.resources(&s.stack_id).await.unwrap().len(), 48);
    assert_eq!(store.event_count(&s.stack_id).await.unwrap(), 49);
}

/// Operations nobody holds are claimed oldest first, each by exactly one of
/// several engines claiming at once; held and ended ones are not.
async fn claims(store: Arc<dyn Store>) {
    let mut ids = Vec::new();
    for i in 0..12 {
        let s = stack(&format!("queued{i}"));
        let lease = store
            .insert_stack(
                &s,
                &event(&s, &s.stack_name, "CREATE_IN_PROGRESS"),
                None,
                "h:1:a",
                60_000,
            )
            .await
            .unwrap();
        ids.push(s.stack_id.clone());
        match i {
            // Held by a live owner: never claimed.
            0 => {}
            // Its owner stalled: the lease runs out and it is taken over.
            1 => {
                store.release_lease(&lease).await.unwrap();
                store
                    .acquire_lease(&s.stack_id, "h:9:stalled", 1)
                    .await
                    .unwrap();
            }
            // Ended: nothing to run.
            2 => {
                store
                    .set_stack_status(
                        &lease,
                        StackStatus::CreateComplete,
                        None,
                        &event(&s, &s.stack_name, "CREATE_COMPLETE"),
                    )
                    .await
                    .unwrap();
                store.release_lease(&lease).await.unwrap();
            }
            _ => store.release_lease(&lease).await.unwrap(),
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    // Oldest first, at most as many as there are owners.
    let first = store
        .claim_operations(&["e:1:x".to_string()], 60_000, true)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].lease.stack_id, ids[1]);
    assert_eq!(first[0].taken_from.as_deref(), Some("h:9:stalled"));
    assert_eq!(
        store.lease_owner(&ids[1]).await.unwrap().as_deref(),
        Some("e:1:x")
    );
    // The stalled owner's writes are refused from now on.
    let stale = Lease {
        stack_id: ids[1].clone(),
        owner: "h:9:stalled".into(),
        token: first[0].lease.token - 1,
    };
    assert!(matches!(
        store.renew_lease(&stale, 60_000).await,
        Err(StoreError::LeaseLost(_))
    ));
    // Four engines claim at once: the nine free operations are shared out,
    // none twice.
    let mut racers = Vec::new();
    for e in 0..4 {
        let store = store.clone();
        racers.push(tokio::spawn(async move {
            let owners: Vec<String> = (0..5).map(|i| format!("e:{e}:{i}")).collect();
            store.claim_operations(&owners, 60_000, true).await.unwrap()
        }));
    }
    let mut claimed = Vec::new();
    for r in racers {
        for c in r.await.unwrap() {
            assert_eq!(c.taken_from, None);
            claimed.push(c.lease.stack_id);
        }
    }
    claimed.sort();
    let mut expected: Vec<String> = ids[3..].to_vec();
    expected.sort();
    assert_eq!(claimed, expected);
    assert!(store
        .claim_operations(&["e:5:x".to_string()], 60_000, true)
        .await
        .unwrap()
        .is_empty());
    // Handed off by a full engine: any engine takes it at once; a command
    // (not a serving engine) only once the hand-off's lease time passed.
    let s = stack("handed");
    let lease = store
        .insert_stack(
            &s,
            &event(&s, "handed", "CREATE_IN_PROGRESS"),
            None,
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    store.hand_off_lease(&lease, 60_000).await.unwrap();
    assert_eq!(store.lease_owner(&s.stack_id).await.unwrap(), None);
    assert!(store
        .claim_operations(&["cli:1:x".to_string()], 60_000, false)
        .await
        .unwrap()
        .is_empty());
    let taken = store
        .claim_operations(&["e:6:x".to_string()], 60_000, true)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].taken_from, None);
    assert!(taken[0].lease.token > lease.token);
    let s = stack("stale-handoff");
    let lease = store
        .insert_stack(
            &s,
            &event(&s, "stale-handoff", "CREATE_IN_PROGRESS"),
            None,
            "h:1:a",
            60_000,
        )
        .await
        .unwrap();
    store.hand_off_lease(&lease, 1).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let taken = store
        .claim_operations(&["cli:1:x".to_string()], 60_000, false)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].lease.stack_id, s.stack_id);
}

/// A nested stack is not claimed while its parent is in progress (the
/// parent's operation drives it); once the parent ended, it is.
async fn nested_claims(store: &dyn Store) {
    let parent = StackRecord {
        parent_id: None,
        root_id: None,
        ..stack("parent")
    };
    let parent_lease = store
        .insert_stack(
            &parent,
            &event(&parent, "parent", "CREATE_IN_PROGRESS"),
            None,
            "h:1:p",
            60_000,
        )
        .await
        .unwrap();
    let child = StackRecord {
        parent_id: Some(parent.stack_id.clone()),
        root_id: Some(parent.stack_id.clone()),
        ..stack("parent-Child-ABCDEFGHIJKLM")
    };
    let lease = store
        .insert_stack(
            &child,
            &event(&child, &child.stack_name, "CREATE_IN_PROGRESS"),
            None,
            "h:1:c",
            60_000,
        )
        .await
        .unwrap();
    store.release_lease(&lease).await.unwrap();
    let found = store.find_stack(&child.stack_id).await.unwrap().unwrap();
    assert_eq!(found.parent_id.as_deref(), Some(parent.stack_id.as_str()));
    assert!(store
        .claim_operations(&["e:1:x".to_string()], 60_000, true)
        .await
        .unwrap()
        .is_empty());
    store
        .set_stack_status(
            &parent_lease,
            StackStatus::CreateComplete,
            None,
            &event(&parent, "parent", "CREATE_COMPLETE"),
        )
        .await
        .unwrap();
    let taken = store
        .claim_operations(&["e:1:x".to_string()], 60_000, true)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].lease.stack_id, child.stack_id);
}

/// A response kept by one engine is found by another; the first counts.
async fn callback_responses(store: &dyn Store) {
    let secret = store.callback_secret().await.unwrap();
    assert_eq!(secret.len(), 32);
    assert_eq!(store.callback_secret().await.unwrap(), secret, "made once");
    assert!(store
        .put_callback_response("req-1", b"{\"Status\":\"SUCCESS\"}")
        .await
        .unwrap());
    assert!(!store
        .put_callback_response("req-1", b"second")
        .await
        .unwrap());
    let found = store
        .callback_responses(&["req-0".to_string(), "req-1".to_string()])
        .await
        .unwrap();
    assert_eq!(
        found,
        vec![("req-1".to_string(), b"{\"Status\":\"SUCCESS\"}".to_vec())]
    );
    assert!(store.callback_responses(&[]).await.unwrap().is_empty());
}

/// Signals are kept per resource in arrival order; a repeated UniqueId
/// replaces the earlier one in its place; clearing forgets one resource's.
async fn signals(store: &dyn Store) {
    let signal =
        |logical: &str, id: &str, status: &str, data: &str| cairn_model::stack::SignalRecord {
            stack_id: "stack-1".into(),
            logical_id: logical.into(),
            unique_id: id.into(),
            status: status
                .parse()
                .unwrap_or_else(|e| panic!("a conformance check names {e}")),
            reason: Some(format!("reason {id}")),
            data: Some(data.into()),
            received_at: "2026-01-01T00:00:00.000Z".into(),
        };
    store
        .put_signal(&signal("H", "b", "SUCCESS", "1"))
        .await
        .unwrap();
    store
        .put_signal(&signal("H", "a", "SUCCESS", "2"))
        .await
        .unwrap();
    store
        .put_signal(&signal("Other", "a", "FAILURE", "x"))
        .await
        .unwrap();
    store
        .put_signal(&signal("H", "b", "SUCCESS", "3"))
        .await
        .unwrap();
    let kept = store.signals("stack-1", "H").await.unwrap();
    let seen: Vec<(&str, Option<&str>)> = kept
        .iter()
        .map(|s| (s.unique_id.as_str(), s.data.as_deref()))
        .collect();
    assert_eq!(seen, vec![("b", Some("3")), ("a", Some("2"))]);
    // add_signal keeps a new id only: the one kept stays.
    assert!(store
        .add_signal(&signal("H", "c", "SUCCESS", "4"))
        .await
        .unwrap());
    assert!(!store
        .add_signal(&signal("H", "c", "FAILURE", "5"))
        .await
        .unwrap());
    let kept = store.signals("stack-1", "H").await.unwrap();
    assert_eq!(
        (kept.len(), kept[2].status.as_str(), kept[2].data.as_deref()),
        (3, "SUCCESS", Some("4"))
    );
    store.clear_signals("stack-1", "H").await.unwrap();
    assert!(store.signals("stack-1", "H").await.unwrap().is_empty());
    assert_eq!(store.signals("stack-1", "Other").await.unwrap().len(), 1);
}
