//! `validate` (in `cairn-model`) against the real registry: types,
//! attributes and properties of a registered provider, aliases included.

use crate::graph::Graph;
use crate::registry::Registry;
use crate::template::{Template, TemplateError};
use crate::validate::validate_template;
use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, PropertySchema, ProviderError, ResourceProvider,
    ResourceSchema, UpdateRequest, UpdateResult,
};
use std::sync::Arc;

struct Fake;

#[async_trait::async_trait]
impl ResourceProvider for Fake {
    fn schema(&self) -> Vec<ResourceSchema> {
        vec![ResourceSchema::new("Test::Thing")
            .property("Name", PropertySchema::string().required())
            .property("Size", PropertySchema::integer())
            .attribute("Arn", "the ARN")]
    }
    async fn create(&self, _: &CreateRequest) -> Result<CreateResult, ProviderError> {
        Err(ProviderError::internal("unused"))
    }
    async fn update(&self, _: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        Err(ProviderError::internal("unused"))
    }
    async fn delete(&self, _: &DeleteRequest) -> Result<(), ProviderError> {
        Ok(())
    }
}

fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(
        "fake",
        crate::registry::Transport::Builtin,
        Arc::new(Fake),
        None,
    )
    .unwrap();
    r.alias("OS::Thing", "Test::Thing").unwrap();
    r
}

fn check(yaml: &str) -> Result<Graph, TemplateError> {
    validate_template(&Template::parse(yaml)?, &registry())
}

#[test]
fn types_attributes_and_properties() {
    assert!(
        check("Resources:\n  A: {Type: OS::Thing, Properties: {Name: a, Size: '3'}}\n").is_ok()
    );
    assert_eq!(
        check("Resources:\n  A: {Type: Nope::X}\n  B: {Type: Nope::Y}\n")
            .unwrap_err()
            .message(),
        "Template format error: Unrecognized resource types: [Nope::X, Nope::Y]"
    );
    let e = check("Resources:\n  A: {Type: Test::Thing, Properties: {Name: a}}\n  B: {Type: Test::Thing, Properties: {Name: !GetAtt A.Bogus}}\n").unwrap_err();
    assert_eq!(
        e.message(),
        "Template error: resource A does not support attribute type Bogus in Fn::GetAtt (type Test::Thing has: Arn)"
    );
    let e =
        check("Resources:\n  A:\n    Type: Test::Thing\n    Properties: {Size: ten, Extra: 1}\n")
            .unwrap_err();
    assert_eq!(
        e.message(),
        "Properties validation failed for resource A with message: #/Size: expected type: Integer, found: String; #: extraneous key [Extra] is not permitted (valid properties: Name, Size); #: required key [Name] not found"
    );
    assert_eq!(e.location().map(|l| l.line), Some(4));
}

#[test]
fn duplicate_types_name_both_providers() {
    let mut r = registry();
    let e = r
        .register(
            "other",
            crate::registry::Transport::Dylib,
            Arc::new(Fake),
            None,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "resource type Test::Thing is claimed by two providers: fake and other; remove it from one of them (set `types` in its [[providers]] entry)"
    );
}
