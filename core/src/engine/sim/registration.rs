//! The crash simulator's registration scenario: a package registered with
//! the engine crashing before each of the registration's durable writes,
//! then another engine on the same state reading the registry later (past
//! [`REGISTRATION_LIMIT`]). Whatever the crash point: no registration is
//! left IN_PROGRESS, every version belongs to one COMPLETE registration
//! (and every COMPLETE registration to its version), and a registration
//! made again after a crash completes.

use std::sync::Arc;

use cairn_package::{Builder, Handler, TypeKind, SCHEMA};
use cairn_sdk::{PropertySchema, ResourceSchema};

use super::World;
use crate::engine::types::{RegisterOptions, SecretSource, ABANDONED, REGISTRATION_LIMIT};
use crate::store::crash::CrashStore;
use crate::type_registry::{RegistrationStatus, RegistryTypeKind};

const TYPE: &str = "Sim::Registered::Thing";

fn package() -> Vec<u8> {
    let mut schema = ResourceSchema::new(TYPE);
    schema
        .properties
        .insert("Name".into(), PropertySchema::string());
    schema.primary_identifier = vec!["Name".into()];
    let cfn = cairn_package::schema::to_cloudformation(&schema);
    Builder::new(TypeKind::Resource, TYPE)
        .handler(Handler::Webhook {
            url: "http://127.0.0.1:9/".into(),
        })
        .file(SCHEMA, cfn.to_string().into_bytes())
        .build(None)
        .unwrap_or_default()
}

/// What is wrong with the registry's state after a crash and a later read.
async fn problems(world: &World, what: &str) -> Vec<String> {
    let later = world.engine(world.base.clone());
    let past = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::try_from(REGISTRATION_LIMIT).unwrap_or_default())
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let mut found = Vec::new();
    if let Err(e) = later.settle_registrations_at(past).await {
        found.push(format!("{what}: settling failed: {e}"));
    }
    let registrations = later.store().registrations().await.unwrap_or_default();
    let versions = later.type_versions().await.unwrap_or_default();
    for r in &registrations {
        match r.status {
            RegistrationStatus::InProgress => {
                found.push(format!("{what}: {} is stuck IN_PROGRESS", r.token))
            }
            RegistrationStatus::Complete => {
                let made = versions
                    .iter()
                    .filter(|v| Some(&v.version_id) == r.version_id.as_ref())
                    .count();
                if made != 1 {
                    found.push(format!("{what}: COMPLETE {} has {made} versions", r.token));
                }
            }
            RegistrationStatus::Failed => {
                if r.description != ABANDONED {
                    found.push(format!("{what}: FAILED for {:?}", r.description));
                }
            }
        }
    }
    let complete = registrations
        .iter()
        .filter(|r| r.status == RegistrationStatus::Complete)
        .count();
    if versions.len() != complete {
        found.push(format!(
            "{what}: {} versions for {complete} COMPLETE registrations",
            versions.len()
        ));
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_is_never_stuck_and_never_half_made() {
    let bytes = package();
    let options = RegisterOptions {
        type_name: Some(TYPE.into()),
        client_token: None,
        secret: Some(SecretSource::Env("SIM_SECRET".into())),
        test: false,
    };
    // Without a crash: two writes (the token, then the version with the
    // registration's end).
    let world = World::new();
    let counting = CrashStore::new(world.base.clone(), None);
    let engine = world.engine(counting.clone());
    let begun = engine
        .begin_registration(TYPE, RegistryTypeKind::Resource, &options)
        .await
        .expect("begins");
    let done = engine
        .finish_registration(&begun.token, &bytes, &options)
        .await
        .expect("finishes");
    assert_eq!(
        done.status,
        RegistrationStatus::Complete,
        "{}",
        done.description
    );
    let writes = counting.writes();
    assert_eq!(writes, 2);
    let mut all = problems(&world, "without a crash").await;
    let mut points = 0;
    for k in 0..=writes {
        let world = World::new();
        let crashing: Arc<CrashStore> = CrashStore::new(world.base.clone(), Some(k));
        let engine = world.engine(crashing);
        if let Ok(begun) = engine
            .begin_registration(TYPE, RegistryTypeKind::Resource, &options)
            .await
        {
            let _ = engine
                .finish_registration(&begun.token, &bytes, &options)
                .await;
        }
        points += 1;
        let what = format!("registration, crash before write {}", k + 1);
        all.extend(problems(&world, &what).await);
        // Registering again on a live engine completes.
        let again = world.engine(world.base.clone());
        let retried = match again
            .begin_registration(TYPE, RegistryTypeKind::Resource, &options)
            .await
        {
            Ok(r) => again.finish_registration(&r.token, &bytes, &options).await,
            Err(e) => Err(e),
        };
        match retried {
            Ok(r) if r.status == RegistrationStatus::Complete => {}
            other => all.push(format!("{what}: registering again gave {other:?}")),
        }
        all.extend(problems(&world, &format!("{what}, registered again")).await);
    }
    println!(
        "crash simulator: registration: {writes} writes, {points} crash points, {} problems",
        all.len()
    );
    assert!(all.is_empty(), "{all:#?}");
}
