//! Resource import, the pure part: what CloudFormation checks before an
//! IMPORT change set is made (UG `resource-import.md`):
//!
//! - each resource to import is in the template, with the type given, and
//!   has a `DeletionPolicy`;
//! - its `ResourceIdentifier` names the type's primary identifier (the
//!   values make the physical id, see `ResourceSchema::physical_id_of`);
//! - no resource is imported twice, by logical id or by physical id;
//! - the template changes nothing else: no resource is created, deleted or
//!   modified besides the imported ones, and the Outputs do not change.
//!
//! What needs the world (the resource exists: a provider's `read`; it is
//! in no other stack: the state) is the engine's.

use serde_json::{Map, Value};

use crate::catalog::TypeCatalog;
use crate::plan::ResourceChange;
use crate::template::Template;

/// One entry of `ResourcesToImport` (or of `cairn import --resources`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceToImport {
    pub resource_type: String,
    pub logical_id: String,
    pub identifier: Map<String, Value>,
}

/// A resource to import, checked: the physical id its identifier makes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Adoption {
    pub logical_id: String,
    pub resource_type: String,
    pub physical_id: String,
}

/// Why resources cannot be imported (CloudFormation's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The list of resources to import is not well formed.
    #[error("{0}")]
    Malformed(String),
    /// The template or the resources break an import's rules.
    #[error("{0}")]
    Refused(String),
}

/// `ResourcesToImport` as a JSON (or YAML-read) list of
/// `{ResourceType, LogicalResourceId, ResourceIdentifier: {…}}`.
pub fn parse_resources(v: &Value) -> Result<Vec<ResourceToImport>, ImportError> {
    resources_of(v).map_err(ImportError::Malformed)
}

/// [`parse_resources`], its texts.
fn resources_of(v: &Value) -> Result<Vec<ResourceToImport>, String> {
    let Some(items) = v.as_array() else {
        return Err("the resources to import must be a list of {ResourceType, LogicalResourceId, ResourceIdentifier}".into());
    };
    if items.is_empty() {
        return Err("there are no resources to import".into());
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = |k: &str| {
                item.get(k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| format!("resource to import #{} has no {k}", i + 1))
            };
            let identifier = item
                .get("ResourceIdentifier")
                .and_then(Value::as_object)
                .filter(|m| !m.is_empty())
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "resource to import #{} has no ResourceIdentifier (a map of its type's primary identifier)",
                        i + 1
                    )
                })?;
            Ok(ResourceToImport {
                resource_type: text("ResourceType")?,
                logical_id: text("LogicalResourceId")?,
                identifier,
            })
        })
        .collect()
}

/// Checks an import of `wanted` into a stack whose template becomes
/// `template`: `changes` is the plan from the stack's current template (for
/// a new stack, every resource is an Add), `old_outputs` the current
/// template's Outputs (`None` for a new stack). The physical ids to adopt,
/// or CloudFormation's refusal.
pub fn check(
    template: &Template,
    wanted: &[ResourceToImport],
    changes: &[ResourceChange],
    old_outputs: Option<&[crate::template::Output]>,
    catalog: &dyn TypeCatalog,
) -> Result<Vec<Adoption>, ImportError> {
    checked(template, wanted, changes, old_outputs, catalog).map_err(ImportError::Refused)
}

/// [`check`], its texts.
fn checked(
    template: &Template,
    wanted: &[ResourceToImport],
    changes: &[ResourceChange],
    old_outputs: Option<&[crate::template::Output]>,
    catalog: &dyn TypeCatalog,
) -> Result<Vec<Adoption>, String> {
    let mut seen: Vec<&str> = Vec::new();
    for w in wanted {
        if seen.contains(&w.logical_id.as_str()) {
            return Err(format!(
                "Resource {} is listed more than once in the resources to import",
                w.logical_id
            ));
        }
        seen.push(&w.logical_id);
    }
    let mut missing_policy = Vec::new();
    let mut adoptions = Vec::new();
    for w in wanted {
        let Some(r) = template.resource(&w.logical_id) else {
            return Err(format!(
                "Resource {} to import is not in the template: the template must describe the stack's resources and the ones imported",
                w.logical_id
            ));
        };
        if catalog.canonical(&r.type_name) != catalog.canonical(&w.resource_type) {
            return Err(format!(
                "Resource {} to import is a {} in the template, not a {}",
                w.logical_id, r.type_name, w.resource_type
            ));
        }
        if r.deletion_policy.is_none() {
            missing_policy.push(w.logical_id.as_str());
        }
        let Some(schema) = catalog.schema(&w.resource_type) else {
            return Err(format!(
                "Resource {} to import is a {}, which no provider serves",
                w.logical_id, w.resource_type
            ));
        };
        let physical_id = schema
            .physical_id_of(&w.identifier)
            .map_err(|e| format!("Resource {} cannot be imported: {e}", w.logical_id))?;
        if let Some(same) = adoptions.iter().find(|a: &&Adoption| {
            a.physical_id == physical_id
                && catalog.canonical(&a.resource_type) == catalog.canonical(&w.resource_type)
        }) {
            return Err(format!(
                "Resources {} and {} name the same {} ({physical_id}): a resource is imported once",
                same.logical_id, w.logical_id, w.resource_type
            ));
        }
        adoptions.push(Adoption {
            logical_id: w.logical_id.clone(),
            resource_type: w.resource_type.clone(),
            physical_id,
        });
    }
    if !missing_policy.is_empty() {
        return Err(format!(
            "The following resources to import [{}] must have DeletionPolicy attribute specified in the template.",
            missing_policy.join(", ")
        ));
    }
    // Nothing but the imports may change.
    let mut modified: Vec<&str> = changes
        .iter()
        .filter(|c| !(c.action == "Add" && seen.contains(&c.logical_resource_id.as_str())))
        .map(|c| c.logical_resource_id.as_str())
        .collect();
    modified.sort_unstable();
    modified.dedup();
    if !modified.is_empty() {
        return Err(format!(
            "You have modified resources [{}] in your template that are not being imported. Update, create or delete operations cannot be executed during import operations.",
            modified.join(", ")
        ));
    }
    if let Some(old) = old_outputs {
        if old != template.outputs.as_slice() {
            return Err(
                "As part of the import operation, you cannot modify or add [Outputs]".into(),
            );
        }
    }
    Ok(adoptions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::TypeSchema;
    use cairn_sdk::{PropertySchema, ResourceSchema};
    use serde_json::json;
    use std::sync::Arc;

    struct Catalog;

    struct Schema(ResourceSchema);

    impl crate::catalog::HasSchema for Schema {
        fn schema(&self) -> &ResourceSchema {
            &self.0
        }
    }

    impl TypeCatalog for Catalog {
        fn canonical<'a>(&'a self, type_name: &'a str) -> &'a str {
            type_name
        }
        fn schema(&self, type_name: &str) -> Option<TypeSchema> {
            let s = match type_name {
                "T::Thing" => ResourceSchema::new("T::Thing")
                    .property("Name", PropertySchema::string().create_only())
                    .property("Value", PropertySchema::string())
                    .identified_by(&["Name"]),
                "T::Plain" => ResourceSchema::new("T::Plain"),
                _ => return None,
            };
            Some(TypeSchema::new(Arc::new(Schema(s))))
        }
        fn provider_name(&self, _: &str) -> Option<String> {
            None
        }
        fn unavailable_reason(&self, _: &str) -> Option<String> {
            None
        }
    }

    fn template(text: &str) -> Template {
        Template::parse(text).unwrap()
    }

    fn wanted(list: Value) -> Vec<ResourceToImport> {
        parse_resources(&list).unwrap()
    }

    fn add(id: &str) -> ResourceChange {
        ResourceChange {
            action: "Add".into(),
            logical_resource_id: id.into(),
            physical_resource_id: None,
            resource_type: "T::Thing".into(),
            replacement: None,
            scope: Vec::new(),
            details: Vec::new(),
        }
    }

    const TWO: &str = "Resources:\n  Old: {Type: T::Thing, Properties: {Name: o}}\n  New: {Type: T::Thing, DeletionPolicy: Retain, Properties: {Name: n}}\nOutputs:\n  O: {Value: !Ref Old}\n";

    #[test]
    fn an_import_beside_an_unchanged_stack_names_its_physical_id() {
        let t = template(TWO);
        let w = wanted(
            json!([{"ResourceType": "T::Thing", "LogicalResourceId": "New", "ResourceIdentifier": {"Name": "n"}}]),
        );
        let old = template(TWO).outputs;
        assert_eq!(
            check(&t, &w, &[add("New")], Some(&old), &Catalog),
            Ok(vec![Adoption {
                logical_id: "New".into(),
                resource_type: "T::Thing".into(),
                physical_id: "n".into()
            }])
        );
    }

    #[test]
    fn cloudformations_refusals() {
        let t = template(TWO);
        let one = |list: Value| wanted(list);
        // No DeletionPolicy.
        let w = one(
            json!([{"ResourceType": "T::Thing", "LogicalResourceId": "Old", "ResourceIdentifier": {"Name": "o"}}]),
        );
        assert_eq!(
            check(&t, &w, &[add("Old")], None, &Catalog),
            Err(ImportError::Refused("The following resources to import [Old] must have DeletionPolicy attribute specified in the template.".into()))
        );
        // Another change rides along.
        let w = one(
            json!([{"ResourceType": "T::Thing", "LogicalResourceId": "New", "ResourceIdentifier": {"Name": "n"}}]),
        );
        let mut modified = add("Old");
        modified.action = "Modify".into();
        assert_eq!(
            check(&t, &w, &[add("New"), modified], None, &Catalog),
            Err(ImportError::Refused("You have modified resources [Old] in your template that are not being imported. Update, create or delete operations cannot be executed during import operations.".into()))
        );
        // Outputs changed.
        let before = template("Resources:\n  Old: {Type: T::Thing}\n").outputs;
        assert_eq!(
            check(&t, &w, &[add("New")], Some(&before), &Catalog),
            Err(ImportError::Refused(
                "As part of the import operation, you cannot modify or add [Outputs]".into()
            ))
        );
        // The identifier is not the type's.
        let w = one(
            json!([{"ResourceType": "T::Thing", "LogicalResourceId": "New", "ResourceIdentifier": {"Id": "n"}}]),
        );
        assert_eq!(
            check(&t, &w, &[add("New")], None, &Catalog),
            Err(ImportError::Refused("Resource New cannot be imported: Id is not a primary identifier of T::Thing (its identifier: Name)".into()))
        );
        // Not in the template, or of another type.
        let w = one(
            json!([{"ResourceType": "T::Thing", "LogicalResourceId": "Gone", "ResourceIdentifier": {"Name": "g"}}]),
        );
        assert!(check(&t, &w, &[], None, &Catalog)
            .unwrap_err()
            .to_string()
            .starts_with("Resource Gone to import is not in the template"));
        let w = one(
            json!([{"ResourceType": "T::Plain", "LogicalResourceId": "New", "ResourceIdentifier": {"Name": "n"}}]),
        );
        assert_eq!(
            check(&t, &w, &[add("New")], None, &Catalog),
            Err(ImportError::Refused(
                "Resource New to import is a T::Thing in the template, not a T::Plain".into()
            ))
        );
        // Twice, by logical id or by physical id.
        let w = one(json!([
            {"ResourceType": "T::Thing", "LogicalResourceId": "New", "ResourceIdentifier": {"Name": "n"}},
            {"ResourceType": "T::Thing", "LogicalResourceId": "New", "ResourceIdentifier": {"Name": "m"}}]));
        assert_eq!(
            check(&t, &w, &[add("New")], None, &Catalog),
            Err(ImportError::Refused(
                "Resource New is listed more than once in the resources to import".into()
            ))
        );
        let t2 = template("Resources:\n  A: {Type: T::Thing, DeletionPolicy: Retain}\n  B: {Type: T::Thing, DeletionPolicy: Delete}\n");
        let w = one(json!([
            {"ResourceType": "T::Thing", "LogicalResourceId": "A", "ResourceIdentifier": {"Name": "x"}},
            {"ResourceType": "T::Thing", "LogicalResourceId": "B", "ResourceIdentifier": {"Name": "x"}}]));
        assert_eq!(
            check(&t2, &w, &[add("A"), add("B")], None, &Catalog),
            Err(ImportError::Refused(
                "Resources A and B name the same T::Thing (x): a resource is imported once".into()
            ))
        );
    }

    #[test]
    fn the_list_must_be_well_formed() {
        assert_eq!(
            parse_resources(&json!([])),
            Err(ImportError::Malformed(
                "there are no resources to import".into()
            ))
        );
        assert_eq!(
            parse_resources(&json!([{"ResourceType": "T::Thing", "LogicalResourceId": "A"}])),
            Err(ImportError::Malformed("resource to import #1 has no ResourceIdentifier (a map of its type's primary identifier)".into()))
        );
        assert_eq!(
            parse_resources(
                &json!([{"LogicalResourceId": "A", "ResourceIdentifier": {"Name": "a"}}])
            ),
            Err(ImportError::Malformed(
                "resource to import #1 has no ResourceType".into()
            ))
        );
    }
}
