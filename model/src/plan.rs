//! The planner: what an update does to each resource. The update executor asks
//! [`decide`] about each resource with the values it has at that moment; the
//! preview ([`plan`]) asks the same function with the values known before the
//! update starts, and marks what depends on values only the update will learn
//! as `Dynamic`. One decision function, so a plan never disagrees with the
//! update it describes.

use std::collections::{HashMap, HashSet};

use cairn_sdk::{ResourceSchema, UpdateBehavior};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::catalog::TypeCatalog;
use crate::graph::{references, Graph};
use crate::stack::{ResourceRecord, ResourceStatus};
use crate::template::eval::Evaluator;
use crate::template::model::Resource;
use crate::template::parameters::ParameterValues;
use crate::template::source::child;
use crate::template::{Template, TemplateError};
use crate::validate;

/// What an update does to one existing resource, given its old and new
/// evaluated properties and metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    NoChange,
    /// Only Metadata changed: recorded, no provider call.
    MetadataOnly,
    /// The provider updates it in place (physical id kept, unless the provider
    /// answers with a new one).
    InPlace {
        changed: Vec<String>,
    },
    /// A CreateOnly property changed: a new physical resource is created and the
    /// old one deleted in cleanup.
    Replace {
        changed: Vec<String>,
    },
    /// An Immutable property changed: the update fails on this resource.
    Unsupported {
        property: String,
    },
}

/// Top-level property names whose values differ (added, removed or changed),
/// sorted.
pub fn changed_properties(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<String> {
    let mut names: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}

fn behavior(schema: Option<&ResourceSchema>, property: &str) -> UpdateBehavior {
    schema
        .map(|s| s.update_behavior(property))
        .unwrap_or(UpdateBehavior::Mutable)
}

pub fn decide(
    schema: Option<&ResourceSchema>,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    old_metadata: Option<&Value>,
    new_metadata: Option<&Value>,
) -> Decision {
    let changed = changed_properties(old, new);
    if changed.is_empty() {
        return if old_metadata != new_metadata {
            Decision::MetadataOnly
        } else {
            Decision::NoChange
        };
    }
    if let Some(p) = changed
        .iter()
        .find(|p| behavior(schema, p) == UpdateBehavior::Immutable)
    {
        return Decision::Unsupported {
            property: p.clone(),
        };
    }
    if changed
        .iter()
        .any(|p| behavior(schema, p) == UpdateBehavior::CreateOnly)
    {
        return Decision::Replace { changed };
    }
    Decision::InPlace { changed }
}

/// One entry of a change set's `Changes`, in CloudFormation's field names.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ResourceChange {
    pub action: String,
    pub logical_resource_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_resource_id: Option<String>,
    pub resource_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    pub scope: Vec<String>,
    pub details: Vec<ChangeDetail>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeDetail {
    pub target: ChangeTarget,
    pub evaluation: String,
    pub change_source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causing_entity: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeTarget {
    pub attribute: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub requires_recreation: String,
    /// The value before and after, where Cairn shows them (a resource's
    /// move to another version of its type).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub values: Option<ChangedValues>,
}

/// CloudFormation's `BeforeValue` / `AfterValue` / `AttributeChangeType`
/// of a change's target.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangedValues {
    pub before_value: String,
    pub after_value: String,
    pub attribute_change_type: String,
}

/// The change scope and detail attribute of a resource's move to another
/// version of its registered type (beyond CloudFormation, whose resources
/// always use the type's default version).
pub const TYPE_VERSION: &str = "TypeVersion";

/// The registered type versions an update runs its resources on: each
/// resource its own (the version it was made with), unless the update
/// moves its type (`--upgrade-types`) to the version given here.
#[derive(Debug, Clone, Copy)]
pub struct TypeVersions<'a> {
    pub upgrade: &'a std::collections::BTreeMap<String, String>,
}

impl TypeVersions<'static> {
    /// Every resource keeps its version.
    pub fn kept() -> TypeVersions<'static> {
        static NONE: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
        TypeVersions { upgrade: &NONE }
    }
}

impl TypeVersions<'_> {
    /// The version `row` (of the canonical type `type_name`) is updated
    /// with.
    pub fn target<'r>(&'r self, type_name: &str, row: &'r ResourceRecord) -> Option<&'r str> {
        self.upgrade
            .get(type_name)
            .map(String::as_str)
            .or(row.type_version.as_deref())
    }

    /// The move of `row` to another version, from and to, when the update
    /// makes one (a row made before versions were recorded moves from
    /// "unrecorded").
    pub fn moves(&self, type_name: &str, row: &ResourceRecord) -> Option<(String, String)> {
        let to = self.upgrade.get(type_name)?;
        match row.type_version.as_deref() {
            Some(from) if from == to => None,
            from => Some((from.unwrap_or("unrecorded").to_string(), to.clone())),
        }
    }

    /// The detail a move shows in a change set.
    pub fn detail((from, to): (String, String)) -> ChangeDetail {
        ChangeDetail {
            target: ChangeTarget {
                attribute: TYPE_VERSION.into(),
                name: None,
                requires_recreation: "Never".into(),
                values: Some(ChangedValues {
                    before_value: from,
                    after_value: to,
                    attribute_change_type: "Modify".into(),
                }),
            },
            evaluation: "Static".into(),
            change_source: "DirectModification".into(),
            causing_entity: None,
        }
    }
}

fn recreation(b: UpdateBehavior) -> &'static str {
    match b {
        UpdateBehavior::CreateOnly => "Always",
        UpdateBehavior::Mutable | UpdateBehavior::MutableWithInterruption => "Never",
        // Cannot be updated at all: the update will fail, it never recreates.
        UpdateBehavior::Immutable => "Never",
    }
}

/// The template an update starts from, as far as the planner needs it.
pub struct Previous<'a> {
    pub template: &'a Template,
    pub params: &'a ParameterValues,
}

/// What an update would do, computed before it runs. `ev` evaluates the new
/// template with the stack's current physical ids and attributes; `rows` are
/// the stack's resources. An empty list means "No updates are to be performed."
// The planner's inputs are each needed and distinct; a struct would only
// rename them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    template: &Template,
    ev: &Evaluator<'_>,
    graph: &Graph,
    registry: &dyn TypeCatalog,
    rows: &[ResourceRecord],
    previous: &Previous<'_>,
    params: &ParameterValues,
    nested: &crate::nested::NestedTemplates,
    versions: TypeVersions<'_>,
) -> Result<Vec<ResourceChange>, TemplateError> {
    let live: HashMap<&str, &ResourceRecord> = rows
        .iter()
        .filter(|r| is_live(r))
        .map(|r| (r.logical_id.as_str(), r))
        .collect();
    let changed_params: HashSet<&str> = params
        .raw
        .iter()
        .filter(|(k, v)| previous.params.raw.get(*k) != Some(*v))
        .map(|(k, _)| k.as_str())
        .collect();
    // Resources whose Ref will change (added or replaced) or whose attributes
    // may (changed in place): what depends on them is known only at run time.
    let mut new_ref: HashSet<String> = HashSet::new();
    let mut new_attrs: HashSet<String> = HashSet::new();
    let mut changes = Vec::new();
    for i in graph.topological_order() {
        let name = graph.name(i);
        let Some(r) = template.resource(name) else {
            continue;
        };
        let type_name = registry.canonical(&r.type_name).to_string();
        let Some(row) = live.get(name) else {
            new_ref.insert(name.to_string());
            new_attrs.insert(name.to_string());
            changes.push(ResourceChange {
                action: "Add".into(),
                logical_resource_id: name.to_string(),
                physical_resource_id: None,
                resource_type: type_name,
                replacement: None,
                scope: Vec::new(),
                details: Vec::new(),
            });
            continue;
        };
        // An adopted resource (HOT's external_id) is never updated: Heat
        // skips it while its id stays, and refuses a new one.
        if let Some(id) = external_id(ev, r)? {
            if row.physical_id.as_deref() == Some(id.as_str()) {
                continue;
            }
            return Err(TemplateError::new(external_id_changed(name, &r.type_name)));
        }
        let path = child(&child("/Resources", name), "Properties");
        let (props, _) = ev.eval_object(&r.properties, &path)?;
        let props = validate::check_properties(name, &r.type_name, &props, registry)
            .map_err(|e| e.locate(&template.source_map))?;
        // A nested stack changes with its template's text too.
        let props = if crate::nested::is_stack(&type_name) {
            crate::nested::with_digest(name, props, nested, Some(&row.properties))
        } else if type_name == crate::group::types::LAUNCH_CONFIGURATION {
            let recorded = row
                .properties
                .get("MemberProperties")
                .and_then(Value::as_object);
            crate::nested::with_member_digest(name, props, registry, nested, recorded)
        } else {
            props
        };
        let metadata = evaluate_metadata(ev, r.metadata.as_ref(), name)?;
        // A HOT resource whose type changed is replaced (the engine
        // refuses a CloudFormation template's type change before planning).
        let type_changed = registry.canonical(&row.resource_type) != type_name;
        // Decided by the schema of the version the resource is updated
        // with.
        let found = match type_changed {
            true => registry.schema(&r.type_name),
            false => registry.version_schema(&type_name, versions.target(&type_name, row)),
        };
        let schema = found.as_deref();
        let old_raw = previous.template.resource(name);
        // Statically known differences.
        let decision = decide(
            schema,
            &row.properties,
            &props,
            row.metadata.as_ref(),
            metadata.as_ref(),
        );
        let static_changed = match &decision {
            Decision::InPlace { changed } | Decision::Replace { changed } => changed.clone(),
            Decision::Unsupported { .. } => changed_properties(&row.properties, &props),
            _ if type_changed => changed_properties(&row.properties, &props),
            _ => Vec::new(),
        };
        let mut replacement = if type_changed || r.replace_on_update {
            "True"
        } else {
            "False"
        };
        let mut details = static_details(
            &static_changed,
            schema,
            r,
            old_raw,
            &changed_params,
            &mut replacement,
        );
        details.extend(dynamic_details(
            r,
            schema,
            &static_changed,
            (&new_ref, &new_attrs),
            &mut replacement,
        ));
        if type_changed {
            // Every property goes to the new resource.
            for d in &mut details {
                d.target.requires_recreation = "Always".into();
            }
        }
        // Replaced on every update, whatever changed (Heat's
        // UpdateWaitConditionHandle).
        if r.replace_on_update && details.is_empty() {
            details.push(ChangeDetail {
                target: ChangeTarget {
                    values: None,
                    attribute: "Properties".into(),
                    name: None,
                    requires_recreation: "Always".into(),
                },
                evaluation: "Static".into(),
                change_source: "Automatic".into(),
                causing_entity: None,
            });
        }
        let mut scope = Vec::new();
        if !details.is_empty() {
            scope.push("Properties".to_string());
        }
        for (attribute, changed) in [
            ("Metadata", row.metadata.as_ref() != metadata.as_ref()),
            // CloudFormation lists an UpdatePolicy change as a Modify of its
            // own scope; nothing is called (a group reads its policy when it
            // rolls).
            (
                "UpdatePolicy",
                old_raw.is_some_and(|o| o.update_policy != r.update_policy),
            ),
        ] {
            if changed {
                scope.push(attribute.to_string());
                details.push(section_detail(attribute));
            }
        }
        if let Some(moved) = versions.moves(&type_name, row).filter(|_| !type_changed) {
            scope.push(TYPE_VERSION.to_string());
            details.push(TypeVersions::detail(moved));
        }
        if details.is_empty() && !type_changed {
            continue;
        }
        if replacement != "False" {
            new_ref.insert(name.to_string());
        }
        new_attrs.insert(name.to_string());
        changes.push(ResourceChange {
            action: "Modify".into(),
            logical_resource_id: name.to_string(),
            physical_resource_id: row.physical_id.clone(),
            resource_type: if type_changed {
                r.type_name.clone()
            } else {
                row.resource_type.clone()
            },
            replacement: Some(replacement.into()),
            scope,
            details,
        });
    }
    changes.extend(removals(rows, graph));
    Ok(changes)
}

/// A detail for each statically known property change (`changed`, with the
/// expression it had before in `old`): whether it recreates the resource
/// (`replacement` becomes "True"), and the parameter it came from when the
/// expression stayed and a parameter it refers to changed.
fn static_details(
    changed: &[String],
    schema: Option<&ResourceSchema>,
    new: &Resource,
    old: Option<&Resource>,
    changed_params: &HashSet<&str>,
    replacement: &mut &'static str,
) -> Vec<ChangeDetail> {
    let mut details = Vec::new();
    for p in changed {
        // A nested stack whose template text changed: CloudFormation
        // shows it as an automatic change of the stack resource.
        if p == crate::nested::DIGEST {
            details.push(ChangeDetail {
                target: ChangeTarget {
                    values: None,
                    attribute: "Properties".into(),
                    name: None,
                    requires_recreation: "Never".into(),
                },
                evaluation: "Dynamic".into(),
                change_source: "Automatic".into(),
                causing_entity: None,
            });
            continue;
        }
        let b = behavior(schema, p);
        if b == UpdateBehavior::CreateOnly {
            *replacement = "True";
        }
        let same_expr = old.and_then(|o| o.properties.get(p)) == new.properties.get(p);
        let param = if same_expr {
            property_refs(new.properties.get(p), p)
                .into_iter()
                .find(|t| changed_params.contains(t.as_str()))
        } else {
            None
        };
        details.push(ChangeDetail {
            target: ChangeTarget {
                values: None,
                attribute: "Properties".into(),
                name: Some(p.clone()),
                requires_recreation: recreation(b).into(),
            },
            evaluation: "Static".into(),
            change_source: if param.is_some() {
                "ParameterReference".into()
            } else {
                "DirectModification".into()
            },
            causing_entity: param,
        });
    }
    details
}

/// The differences the update will only learn: a property (not already
/// `static_changed`) referring to a resource that gets a new id (`new_ref`)
/// or may get new attributes (`new_attrs`). A CreateOnly one makes the
/// replacement "Conditional".
fn dynamic_details(
    resource: &Resource,
    schema: Option<&ResourceSchema>,
    static_changed: &[String],
    (new_ref, new_attrs): (&HashSet<String>, &HashSet<String>),
    replacement: &mut &'static str,
) -> Vec<ChangeDetail> {
    let mut details = Vec::new();
    for (p, expr) in &resource.properties {
        if static_changed.contains(p) {
            continue;
        }
        let mut refs = Vec::new();
        references(expr, "", &|_| None, &mut refs);
        let cause = refs.iter().find(|x| {
            if x.attribute.is_some() {
                new_attrs.contains(&x.target) || new_ref.contains(&x.target)
            } else {
                new_ref.contains(&x.target)
            }
        });
        if let Some(c) = cause {
            let b = behavior(schema, p);
            if b == UpdateBehavior::CreateOnly && *replacement == "False" {
                *replacement = "Conditional";
            }
            details.push(ChangeDetail {
                target: ChangeTarget {
                    values: None,
                    attribute: "Properties".into(),
                    name: Some(p.clone()),
                    requires_recreation: if b == UpdateBehavior::CreateOnly {
                        "Conditionally".into()
                    } else {
                        "Never".into()
                    },
                },
                evaluation: "Dynamic".into(),
                change_source: if c.attribute.is_some() {
                    "ResourceAttribute".into()
                } else {
                    "ResourceReference".into()
                },
                causing_entity: Some(match &c.attribute {
                    Some(a) => format!("{}.{a}", c.target),
                    None => c.target.clone(),
                }),
            });
        }
    }
    details
}

/// The detail of a change to a whole section (`Metadata`, `UpdatePolicy`).
fn section_detail(attribute: &str) -> ChangeDetail {
    ChangeDetail {
        target: ChangeTarget {
            values: None,
            attribute: attribute.into(),
            name: None,
            requires_recreation: "Never".into(),
        },
        evaluation: "Static".into(),
        change_source: "DirectModification".into(),
        causing_entity: None,
    }
}

/// A Remove for each live row the new template no longer has, in the rows'
/// order.
fn removals(rows: &[ResourceRecord], graph: &Graph) -> Vec<ResourceChange> {
    let in_template: HashSet<&str> = graph.names().iter().map(String::as_str).collect();
    rows.iter()
        .filter(|row| is_live(row) && !in_template.contains(row.logical_id.as_str()))
        .map(|row| ResourceChange {
            action: "Remove".into(),
            logical_resource_id: row.logical_id.clone(),
            physical_resource_id: row.physical_id.clone(),
            resource_type: row.resource_type.clone(),
            replacement: None,
            scope: Vec::new(),
            details: Vec::new(),
        })
        .collect()
}

/// A resource's HOT `external_id`, evaluated: the physical id of the
/// existing resource it adopts. `Ok(None)` when it has none.
pub fn external_id(
    ev: &Evaluator<'_>,
    r: &crate::template::model::Resource,
) -> Result<Option<String>, TemplateError> {
    let Some(expr) = &r.external_id else {
        return Ok(None);
    };
    let path = child(&child("/Resources", &r.logical_id), "external_id");
    match ev.eval(expr, &path)? {
        crate::template::eval::Evaluated::Value(Value::String(id)) if !id.is_empty() => {
            Ok(Some(id))
        }
        crate::template::eval::Evaluated::Value(Value::Number(n)) => Ok(Some(n.to_string())),
        crate::template::eval::Evaluated::Pending => Err(TemplateError::new(format!(
            "external_id of {} depends on a resource that is not created yet; it must name an existing resource",
            r.logical_id
        ))
        .at(&path)),
        other => Err(TemplateError::new(format!(
            "external_id of {} must be a non-empty string, not {other:?}",
            r.logical_id
        ))
        .at(&path)),
    }
}

/// Heat's refusal of a changed `external_id`.
pub fn external_id_changed(logical_id: &str, type_name: &str) -> String {
    format!("Update to property external_id of {logical_id} ({type_name}) is not supported.")
}

/// Whether a stored resource is part of the stack (not deleted).
pub fn is_live(r: &ResourceRecord) -> bool {
    !matches!(
        r.status,
        ResourceStatus::DeleteComplete | ResourceStatus::DeleteSkipped
    )
}

/// A resource's Metadata, evaluated (`None` when absent).
pub fn evaluate_metadata(
    ev: &Evaluator<'_>,
    metadata: Option<&Value>,
    logical_id: &str,
) -> Result<Option<Value>, TemplateError> {
    let Some(m) = metadata else {
        return Ok(None);
    };
    let path = child(&child("/Resources", logical_id), "Metadata");
    match ev.eval(m, &path)? {
        crate::template::eval::Evaluated::Value(v) => Ok(Some(v)),
        // Depends on a resource not created yet: compare the expression.
        _ => Ok(Some(m.clone())),
    }
}

/// Names a property's expression refers to (parameters or resources).
fn property_refs(expr: Option<&Value>, name: &str) -> Vec<String> {
    let mut refs = Vec::new();
    if let Some(e) = expr {
        references(e, name, &|_| None, &mut refs);
    }
    refs.into_iter().map(|r| r.target).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_sdk::PropertySchema;
    use serde_json::json;

    fn schema() -> ResourceSchema {
        ResourceSchema::new("T")
            .property("Tags", PropertySchema::json())
            .property("Restart", PropertySchema::json().with_interruption())
            .property("Name", PropertySchema::string().create_only())
            .property("Fixed", PropertySchema::json().immutable())
    }

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn decisions_follow_the_schema() {
        let s = schema();
        let old = m(json!({"Tags": 1, "Restart": 1, "Name": "a", "Fixed": 1}));
        let d = |new: Value| decide(Some(&s), &old, &m(new), None, None);
        assert_eq!(
            d(json!({"Tags": 1, "Restart": 1, "Name": "a", "Fixed": 1})),
            Decision::NoChange
        );
        assert_eq!(
            d(json!({"Tags": 2, "Restart": 1, "Name": "a", "Fixed": 1})),
            Decision::InPlace {
                changed: vec!["Tags".into()]
            }
        );
        // CreateOnly wins over interruption.
        assert_eq!(
            d(json!({"Tags": 1, "Restart": 2, "Name": "b", "Fixed": 1})),
            Decision::Replace {
                changed: vec!["Name".into(), "Restart".into()]
            }
        );
        // A removed property is a change too.
        assert_eq!(
            d(json!({"Tags": 1, "Restart": 1, "Fixed": 1})),
            Decision::Replace {
                changed: vec!["Name".into()]
            }
        );
        assert_eq!(
            d(json!({"Tags": 1, "Restart": 1, "Name": "b", "Fixed": 2})),
            Decision::Unsupported {
                property: "Fixed".into()
            }
        );
        let same = old.clone();
        assert_eq!(
            decide(Some(&s), &old, &same, Some(&json!(1)), Some(&json!(2))),
            Decision::MetadataOnly
        );
    }
}
