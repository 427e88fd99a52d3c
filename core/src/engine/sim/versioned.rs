//! A registered type in the simulator: `Sim::Versioned::Thing`, whose
//! versions are each served by their own provider over the one simulated
//! cloud. Each provider tells the cloud which version made or last changed
//! a resource, so a run can check that a resource's row names the version
//! whose provider handled it: a resource keeps its version through plain
//! updates, moves with `--upgrade-types`, and goes back with a rollback,
//! whatever write a crash came before.

use std::sync::Arc;

use cairn_package::{Builder, Handler, TypeKind, SCHEMA};
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, ProviderError,
    ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};

use super::cloud::{schema, Cloud};
use crate::engine::types::{RegisterOptions, SecretSource};
use crate::engine::Engine;
use crate::registry::{PackageSource, RegisteredType, Registry, Starter, Transport, VersionLoader};
use crate::store::Store;
use crate::type_registry::{RegistrationStatus, RegistryTypeKind, TypeVersionRecord};

pub const VERSIONED: &str = "Sim::Versioned::Thing";

/// One version's provider.
struct Versioned {
    cloud: Arc<Cloud>,
    version: String,
}

impl Versioned {
    /// A create's outcome, its resource recorded as this version's.
    fn made(
        &self,
        made: Result<CreateResult, ProviderError>,
    ) -> Result<CreateResult, ProviderError> {
        if let Ok(m) = &made {
            self.cloud.served(&m.physical_resource_id, &self.version);
        }
        made
    }

    /// An update's outcome, its resource (a new one, if it answered one)
    /// recorded as this version's.
    fn changed(
        &self,
        req: &UpdateRequest,
        changed: Result<UpdateResult, ProviderError>,
    ) -> Result<UpdateResult, ProviderError> {
        if let Ok(u) = &changed {
            let physical = u
                .physical_resource_id
                .as_deref()
                .unwrap_or(&req.physical_resource_id);
            self.cloud.served(physical, &self.version);
        }
        changed
    }
}

#[async_trait::async_trait]
impl ResourceProvider for Versioned {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![schema(VERSIONED)]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.made(self.cloud.create(req).await)
    }

    async fn recover_create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.made(self.cloud.recover_create(req).await)
    }

    async fn cancel_create(
        &self,
        req: &CreateRequest,
    ) -> Result<cairn_sdk::Cancellation, ProviderError> {
        self.cloud.cancel_create(req).await
    }

    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        self.changed(req, self.cloud.update(req).await)
    }

    async fn recover_update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        self.changed(req, self.cloud.recover_update(req).await)
    }

    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        self.cloud.delete(req).await
    }

    async fn recover_delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        self.cloud.recover_delete(req).await
    }

    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        self.cloud.check_drift(req).await
    }
}

/// Starts each registered version's provider over the cloud.
pub(super) struct Loader(pub Arc<Cloud>);

impl VersionLoader for Loader {
    fn starter(
        &self,
        version: &TypeVersionRecord,
        _package: PackageSource,
        _configuration: Option<String>,
    ) -> Starter {
        let cloud = self.0.clone();
        let version = version.version_id.clone();
        Box::new(move || {
            Ok(vec![RegisteredType {
                schema: schema(VERSIONED),
                provider: Arc::new(Versioned {
                    cloud: cloud.clone(),
                    version: version.clone(),
                }),
                provider_name: format!("{VERSIONED} version {version}"),
                transport: Transport::Webhook,
                version: version.clone(),
            }])
        })
    }
}

fn package() -> Vec<u8> {
    let cfn = cairn_package::schema::to_cloudformation(&schema(VERSIONED));
    Builder::new(TypeKind::Resource, VERSIONED)
        .handler(Handler::Webhook {
            url: "http://127.0.0.1:9/".into(),
        })
        .file(SCHEMA, cfn.to_string().into_bytes())
        .build(None)
        .unwrap_or_default()
}

/// Registers a new version of [`VERSIONED`], makes it the default, and
/// has `registry` serve what the state now holds.
pub(super) async fn register_version(
    engine: &Engine,
    base: &Arc<dyn Store>,
    registry: &Registry,
    cloud: &Arc<Cloud>,
) -> Result<(), String> {
    let options = RegisterOptions {
        type_name: Some(VERSIONED.into()),
        client_token: None,
        secret: Some(SecretSource::Env("SIM_SECRET".into())),
        test: false,
    };
    let begun = engine
        .begin_registration(VERSIONED, RegistryTypeKind::Resource, &options)
        .await
        .map_err(|e| e.to_string())?;
    let done = engine
        .finish_registration(&begun.token, &package(), &options)
        .await
        .map_err(|e| e.to_string())?;
    let version = match (done.status, done.version_id) {
        (RegistrationStatus::Complete, Some(v)) => v,
        (status, _) => {
            return Err(format!(
                "registration ended {status:?}: {}",
                done.description
            ))
        }
    };
    engine
        .set_type_default_version(VERSIONED, &version)
        .await
        .map_err(|e| e.to_string())?;
    registry
        .refresh_registered(base, &Loader(cloud.clone()))
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{create, Step, World, STACK};
    use super::*;
    use crate::engine::changeset::CreateChangeSetInput;

    const TEMPLATE: &str = "Resources:\n  V:\n    Type: Sim::Versioned::Thing\n    Properties: {Name: v-one, Value: \"1\"}\n";

    /// A stack whose resource V was made with version 1 of the type.
    async fn made_on_version_one() -> (World, Arc<Engine>) {
        let world = World::new();
        let engine = world.engine(world.base.clone());
        world.run(&engine, &Step::RegisterVersion).await.unwrap();
        world.run(&engine, &create(TEMPLATE)).await.unwrap();
        (world, engine)
    }

    async fn version_of(world: &World, logical_id: &str) -> Option<String> {
        let stack = world.stack().await?;
        let rows = world.base.resources(&stack.stack_id).await.ok()?;
        rows.into_iter()
            .find(|r| r.logical_id == logical_id)
            .and_then(|r| r.type_version)
    }

    /// A resource keeps the version it was made with through a plain
    /// update; a change set with --upgrade-types shows the move; its
    /// execution moves it, by the new version's provider.
    #[test]
    fn a_resource_keeps_its_type_version_until_an_update_moves_it() {
        super::super::deep(keeps_its_version);
    }

    async fn keeps_its_version() {
        let (world, engine) = made_on_version_one().await;
        assert_eq!(version_of(&world, "V").await.as_deref(), Some("00000001"));
        world.run(&engine, &Step::RegisterVersion).await.unwrap();
        let changed = TEMPLATE.replace("\"1\"", "\"2\"");
        world
            .run(&engine, &super::super::update(&changed))
            .await
            .unwrap();
        assert_eq!(version_of(&world, "V").await.as_deref(), Some("00000001"));
        let stack = world.stack().await.unwrap();
        let rows = world.base.resources(&stack.stack_id).await.unwrap();
        let physical = rows[0].physical_id.clone().unwrap();
        assert_eq!(
            world.cloud.served_by(&physical).as_deref(),
            Some("00000001")
        );

        let input = |upgrade_types| CreateChangeSetInput {
            stack_name: STACK.into(),
            change_set_name: if upgrade_types { "moves" } else { "keeps" }.into(),
            change_set_type: None,
            template_body: None,
            parameters: Default::default(),
            description: None,
            tags: None,
            origin: Default::default(),
            include_nested_stacks: false,
            context: Default::default(),
            capabilities: None,
            resources_to_import: Vec::new(),
            rollback_configuration: None,
            notification_arns: None,
            upgrade_types,
        };
        let keeps = engine
            .change_sets()
            .create_change_set(&input(false))
            .await
            .unwrap();
        assert_eq!(
            keeps.status_reason.as_deref(),
            Some("The submitted information didn't contain changes. Submit different information to create a change set.")
        );
        let moves = engine
            .change_sets()
            .create_change_set(&input(true))
            .await
            .unwrap();
        assert_eq!(
            moves.changes,
            serde_json::json!([{"Type": "Resource", "ResourceChange": {
                "Action": "Modify",
                "LogicalResourceId": "V",
                "PhysicalResourceId": physical,
                "ResourceType": VERSIONED,
                "Replacement": "False",
                "Scope": ["TypeVersion"],
                "Details": [{
                    "Target": {
                        "Attribute": "TypeVersion",
                        "RequiresRecreation": "Never",
                        "BeforeValue": "00000001",
                        "AfterValue": "00000002",
                        "AttributeChangeType": "Modify",
                    },
                    "Evaluation": "Static",
                    "ChangeSource": "DirectModification",
                }],
            }}])
        );
        let id = engine
            .change_sets()
            .execute_change_set(STACK, "moves", crate::stack::OnFailure::Rollback)
            .await
            .unwrap();
        engine.run(&id).await.unwrap();
        assert_eq!(version_of(&world, "V").await.as_deref(), Some("00000002"));
        assert_eq!(
            world.cloud.served_by(&physical).as_deref(),
            Some("00000002")
        );
        // Moved, the old version is no longer in use.
        engine
            .deregister_type(VERSIONED, Some("00000001"))
            .await
            .unwrap();
    }

    /// The version a resource uses is not deregistered, naming the stack.
    #[test]
    fn a_version_in_use_is_not_deregistered() {
        super::super::deep(refuses_deregistering);
    }

    async fn refuses_deregistering() {
        let (world, engine) = made_on_version_one().await;
        world.run(&engine, &Step::RegisterVersion).await.unwrap();
        let refused = engine
            .deregister_type(VERSIONED, Some("00000001"))
            .await
            .map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err(format!("Version '00000001' of {VERSIONED} is used by stacks {STACK}: update them with --upgrade-types to move their resources to the default version (or delete the resources) before deregistering it"))
        );
    }
}
