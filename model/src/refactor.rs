//! Stack refactoring (CloudFormation's CreateStackRefactor): resources
//! renamed within a stack or moved between stacks by rewriting the state,
//! with no provider call. This is the pure part: which resource goes
//! where (`resolve`: the caller's `ResourceMappings`, and what is found by
//! logical id), and the rules that keep a refactor from creating,
//! deleting or changing anything. The engine checks the configuration of
//! each resource by planning each new template over the moved rows.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many stacks in one refactor (CloudFormation's limit).
pub const MAX_STACKS: usize = 5;

/// Where a resource is: a stack and a logical id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ResourceLocation {
    pub stack_name: String,
    pub logical_resource_id: String,
}

impl std::fmt::Display for ResourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.stack_name, self.logical_resource_id)
    }
}

/// `ResourceMappings`: a resource's place now and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ResourceMapping {
    pub source: ResourceLocation,
    pub destination: ResourceLocation,
}

/// How a move was found: given (`MANUAL`) or by its logical id (`AUTO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Detection {
    Auto,
    Manual,
}

/// One resource moved or renamed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Move {
    pub mapping: ResourceMapping,
    pub detection: Detection,
    pub resource_type: String,
}

/// One stack of a refactor as the rules see it.
#[derive(Debug, Clone)]
pub struct StackSides {
    pub stack_name: String,
    /// Its live resources now: logical id → type.
    pub live: BTreeMap<String, String>,
    /// The resources of its new template: logical id → type.
    pub wanted: BTreeMap<String, String>,
}

/// Types a refactor does not move: what the engine keeps beside the row
/// under its stack and logical id (a nested stack's own stack, a group's
/// members, a wait condition's signals and its handle's URL).
pub fn immovable(canonical_type: &str) -> bool {
    use crate::template::types::{WAIT_CONDITION, WAIT_CONDITION_HANDLE};
    crate::nested::is_stack(canonical_type)
        || canonical_type.starts_with("Cairn::Group::")
        || [WAIT_CONDITION, WAIT_CONDITION_HANDLE].contains(&canonical_type)
}

/// The moves that turn every stack's live resources into its new
/// template's, or why there are none: a resource no stack has now (a
/// create), one no template keeps (a delete), one sent to two places, a
/// type changed. `mappings` are the caller's; the rest is found by logical
/// id (a resource that leaves one stack's template and appears under the
/// same id in another's).
pub fn resolve(
    stacks: &[StackSides],
    mappings: &[ResourceMapping],
) -> Result<Vec<Move>, RefactorError> {
    moves_of(stacks, mappings).map_err(RefactorError)
}

/// Why a refactor cannot be made: what it would create, delete or change
/// (CloudFormation's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RefactorError(pub String);

/// [`resolve`], its texts.
fn moves_of(stacks: &[StackSides], mappings: &[ResourceMapping]) -> Result<Vec<Move>, String> {
    let side = |name: &str| stacks.iter().find(|s| s.stack_name == name);
    let mut moves: Vec<Move> = Vec::new();
    let mut sources: BTreeSet<ResourceLocation> = BTreeSet::new();
    let mut destinations: BTreeSet<ResourceLocation> = BTreeSet::new();
    for m in mappings {
        let (Some(from), Some(to)) = (side(&m.source.stack_name), side(&m.destination.stack_name))
        else {
            return Err(format!(
                "ResourceMappings: {} -> {}: both stacks must be among the StackDefinitions",
                m.source, m.destination
            ));
        };
        let Some(kind) = from.live.get(&m.source.logical_resource_id) else {
            return Err(format!(
                "ResourceMappings: stack {} has no resource {}",
                m.source.stack_name, m.source.logical_resource_id
            ));
        };
        let Some(wanted) = to.wanted.get(&m.destination.logical_resource_id) else {
            return Err(format!(
                "ResourceMappings: the template of stack {} has no resource {}",
                m.destination.stack_name, m.destination.logical_resource_id
            ));
        };
        if m.source == m.destination {
            return Err(format!(
                "ResourceMappings: {} is mapped to itself",
                m.source
            ));
        }
        if !sources.insert(m.source.clone()) {
            return Err(format!(
                "A resource can't be refactored into multiple stacks: {} is mapped twice",
                m.source
            ));
        }
        if !destinations.insert(m.destination.clone()) {
            return Err(format!(
                "ResourceMappings: two resources are mapped to {}",
                m.destination
            ));
        }
        moves.push(checked_move(m.clone(), Detection::Manual, kind, wanted)?);
    }
    // A mapped resource whose id its own template still has (and nothing
    // is mapped there): it would be in two places.
    for m in &moves {
        let source = &m.mapping.source;
        let kept = side(&source.stack_name)
            .is_some_and(|s| s.wanted.contains_key(&source.logical_resource_id));
        if kept && !destinations.contains(source) {
            return Err(format!(
                "A resource can't be refactored into multiple stacks: {source} stays in its template and is moved to {}",
                m.mapping.destination
            ));
        }
    }
    // What each template has that its stack does not (after the given
    // mappings): found in another stack under the same id, or a create.
    for s in stacks {
        for (logical, wanted) in &s.wanted {
            let here = ResourceLocation {
                stack_name: s.stack_name.clone(),
                logical_resource_id: logical.clone(),
            };
            let stays = s.live.contains_key(logical) && !sources.contains(&here);
            if destinations.contains(&here) || stays {
                continue;
            }
            let found: Vec<&StackSides> = stacks
                .iter()
                .filter(|o| o.stack_name != s.stack_name)
                .filter(|o| o.live.contains_key(logical) && !o.wanted.contains_key(logical))
                .collect();
            let [from] = found.as_slice() else {
                return Err(format!(
                    "Resource {logical} of stack {}'s template is in no stack of the refactor: a refactor can't create resources (create it with an update first, or map it with ResourceMappings)",
                    s.stack_name
                ));
            };
            let source = ResourceLocation {
                stack_name: from.stack_name.clone(),
                logical_resource_id: logical.clone(),
            };
            if !sources.insert(source.clone()) {
                return Err(format!(
                    "A resource can't be refactored into multiple stacks: {source} is wanted twice"
                ));
            }
            destinations.insert(here.clone());
            let kind = &from.live[logical];
            let mapping = ResourceMapping {
                source,
                destination: here,
            };
            moves.push(checked_move(mapping, Detection::Auto, kind, wanted)?);
        }
    }
    // What each stack has that no template keeps: a delete.
    for s in stacks {
        for logical in s.live.keys() {
            let here = ResourceLocation {
                stack_name: s.stack_name.clone(),
                logical_resource_id: logical.clone(),
            };
            let kept = s.wanted.contains_key(logical) && !destinations.contains(&here);
            if !kept && !sources.contains(&here) {
                return Err(format!(
                    "Resource {logical} of stack {} is in none of the refactored templates: a refactor can't delete resources (remove it with an update first)",
                    s.stack_name
                ));
            }
            if kept && sources.contains(&here) {
                return Err(format!(
                    "A resource can't be refactored into multiple stacks: {here} stays and is moved"
                ));
            }
        }
        if s.wanted.is_empty() {
            return Err(format!(
                "Stack {} would have no resources after the refactor: CloudFormation doesn't support empty stacks; add one first (an AWS::CloudFormation::WaitConditionHandle)",
                s.stack_name
            ));
        }
    }
    if moves.is_empty() {
        return Err("The refactor moves and renames no resource: the templates keep every resource where it is".into());
    }
    moves.sort_by(|a, b| a.mapping.source.cmp(&b.mapping.source));
    Ok(moves)
}

fn checked_move(
    mapping: ResourceMapping,
    detection: Detection,
    kind: &str,
    wanted: &str,
) -> Result<Move, String> {
    if kind != wanted {
        return Err(format!(
            "Resource {} ({kind}) can't become {} ({wanted}): a refactor can't change a resource's type",
            mapping.source, mapping.destination
        ));
    }
    if immovable(kind) {
        return Err(format!(
            "Resource {} ({kind}) can't be refactored: Cairn keeps its nested stack or members beside it; move what it holds instead",
            mapping.source
        ));
    }
    Ok(Move {
        mapping,
        detection,
        resource_type: kind.to_string(),
    })
}

/// The template sections a refactor may not change (CloudFormation: update
/// the stack first): the first that differs between `old` and `new`.
pub fn changed_section(old: &Value, new: &Value) -> Option<&'static str> {
    ["Parameters", "Conditions", "Mappings", "Rules", "Transform"]
        .into_iter()
        .find(|k| old.get(*k) != new.get(*k))
}

/// The resource attributes besides Properties and Metadata that a moved or
/// kept resource must keep (its policies, condition, dependencies aside):
/// the first that differs.
pub fn changed_attribute(old: &Value, new: &Value) -> Option<&'static str> {
    [
        "Type",
        "DeletionPolicy",
        "UpdateReplacePolicy",
        "UpdatePolicy",
        "CreationPolicy",
        "Condition",
    ]
    .into_iter()
    .find(|k| old.get(*k) != new.get(*k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(name: &str, live: &[(&str, &str)], wanted: &[(&str, &str)]) -> StackSides {
        let map = |l: &[(&str, &str)]| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        StackSides {
            stack_name: name.into(),
            live: map(live),
            wanted: map(wanted),
        }
    }

    fn at(stack: &str, logical: &str) -> ResourceLocation {
        ResourceLocation {
            stack_name: stack.into(),
            logical_resource_id: logical.into(),
        }
    }

    const T: &str = "Cairn::Test::Resource";

    #[test]
    fn a_move_by_logical_id_and_a_mapped_rename() {
        let stacks = [
            side(
                "a",
                &[("Keep", T), ("Db", T), ("Old", T)],
                &[("Keep", T), ("New", T)],
            ),
            side("b", &[("B", T)], &[("B", T), ("Db", T)]),
        ];
        let rename = ResourceMapping {
            source: at("a", "Old"),
            destination: at("a", "New"),
        };
        let moves = resolve(&stacks, std::slice::from_ref(&rename)).unwrap();
        assert_eq!(
            moves,
            vec![
                Move {
                    mapping: ResourceMapping {
                        source: at("a", "Db"),
                        destination: at("b", "Db")
                    },
                    detection: Detection::Auto,
                    resource_type: T.into()
                },
                Move {
                    mapping: rename,
                    detection: Detection::Manual,
                    resource_type: T.into()
                },
            ]
        );
    }

    #[test]
    fn creates_deletes_type_changes_and_empty_stacks_are_refused() {
        let create = [side("a", &[("A", T)], &[("A", T), ("New", T)])];
        assert!(resolve(&create, &[]).unwrap_err().to_string().starts_with(
            "Resource New of stack a's template is in no stack of the refactor: a refactor can't create resources"
        ));
        let delete = [
            side("a", &[("A", T), ("Gone", T)], &[("A", T)]),
            side("b", &[("B", T)], &[("B", T)]),
        ];
        assert!(resolve(&delete, &[])
            .unwrap_err()
            .to_string()
            .contains("a refactor can't delete resources"));
        let retype = [
            side("a", &[("A", T), ("X", T)], &[("A", T)]),
            side("b", &[("B", T)], &[("B", T), ("X", "Other::Type")]),
        ];
        assert!(resolve(&retype, &[])
            .unwrap_err()
            .to_string()
            .contains("a refactor can't change a resource's type"));
        let empty = [
            side("a", &[("A", T)], &[]),
            side("b", &[("B", T)], &[("B", T), ("A", T)]),
        ];
        assert!(resolve(&empty, &[])
            .unwrap_err()
            .to_string()
            .starts_with("Stack a would have no resources after the refactor"));
        let nothing = [side("a", &[("A", T)], &[("A", T)])];
        assert!(resolve(&nothing, &[]).is_err());
        let twice = [
            side("a", &[("A", T), ("X", T)], &[("A", T), ("X", T)]),
            side("b", &[("B", T)], &[("B", T), ("Y", T)]),
        ];
        let m = ResourceMapping {
            source: at("a", "X"),
            destination: at("b", "Y"),
        };
        assert!(resolve(&twice, &[m])
            .unwrap_err()
            .to_string()
            .starts_with("A resource can't be refactored into multiple stacks"));
    }

    #[test]
    fn sections_and_attributes_that_must_stay() {
        let old = serde_json::json!({"Parameters": {"P": {"Type": "String"}}});
        let new = serde_json::json!({"Parameters": {"P": {"Type": "Number"}}});
        assert_eq!(changed_section(&old, &new), Some("Parameters"));
        assert_eq!(changed_section(&old, &old), None);
        let r1 = serde_json::json!({"Type": T, "DeletionPolicy": "Retain"});
        let r2 = serde_json::json!({"Type": T});
        assert_eq!(changed_attribute(&r1, &r2), Some("DeletionPolicy"));
    }
}
