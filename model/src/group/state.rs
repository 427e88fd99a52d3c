//! What the store keeps of one group (keyed by the group's physical id): its
//! members and, while one runs, the rolling replacement with its batch
//! cursor. Written after every member transition, so a crash resumes from
//! exactly where it stopped.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::naming::Batch;
use super::policy::RollingUpdate;
use crate::stack::{PendingCall, ResourceStatus};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GroupState {
    /// Ordered by index.
    pub members: Vec<Member>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Indices RemovalPolicies removed (Heat's name blacklist): no new
    /// member takes one. Sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<u64>,
    /// The last batch of a batched create (HOT's batch_create) announced:
    /// a create resumed after a crash does not announce it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_batch: Option<usize>,
    /// Members replaced under their own name (a group whose members keep
    /// their names) while their replacement is made: deleted once it is,
    /// put back when it fails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<Member>,
    /// Physical resources a member's provider made while updating it and
    /// that the member does not keep (an update that answered with a new
    /// id, or failed naming one): deleted whatever happens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<Member>,
}

/// One member: a resource of the launch configuration's `MemberType`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Member {
    pub name: String,
    pub index: u64,
    pub resource_type: String,
    /// The launch configuration (physical name) it was made from.
    pub launch_configuration: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_id: Option<String>,
    pub status: ResourceStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    pub properties: Map<String, Value>,
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// A create or delete call whose outcome is not recorded yet: re-issued
    /// with the same request id after a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingCall>,
    /// While an update of the member in place is recorded: the properties
    /// it had (the update's old properties, also when it is resumed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_properties: Option<Map<String, Value>>,
    pub updated_at: String,
}

impl Member {
    /// Exists and serves (created, not failed, not being deleted).
    pub fn is_in_service(&self) -> bool {
        self.physical_id.is_some()
            && self.pending.is_none()
            && matches!(
                self.status,
                ResourceStatus::CreateComplete | ResourceStatus::UpdateComplete
            )
    }
}

/// A rolling replacement in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Rollout {
    /// The launch configuration the members are being moved to.
    pub target: String,
    /// The policy it runs under; a rollback of it runs under the same one.
    pub policy: RollingUpdate,
    pub batches: Vec<Batch>,
    /// Batches finished (the cursor).
    pub done: usize,
    /// With WaitOnResourceSignals: when the batch `done` started waiting
    /// for signals (a resumed batch keeps its deadline and its signals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals_since: Option<(usize, String)>,
}

impl GroupState {
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.name == name)
    }

    pub fn member_mut(&mut self, name: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.name == name)
    }

    /// Inserts or replaces `m`, keeping index order.
    pub fn put(&mut self, m: Member) {
        match self.members.iter_mut().find(|x| x.name == m.name) {
            Some(slot) => *slot = m,
            None => {
                let at = self.members.partition_point(|x| x.index < m.index);
                self.members.insert(at, m);
            }
        }
    }

    pub fn remove(&mut self, name: &str) {
        self.members.retain(|m| m.name != name);
    }

    pub fn indices(&self) -> Vec<u64> {
        self.members.iter().map(|m| m.index).collect()
    }

    /// The indices no new member may take: the members' and the removed.
    pub fn taken(&self) -> Vec<u64> {
        let mut all = self.indices();
        all.extend(&self.removed);
        all
    }

    /// `MemberIds`, `MemberNames`, `MemberIdsByIndex`, `MemberAttributes`
    /// (index → the member's attributes) and `InstanceList`: the members in
    /// service, in order.
    pub fn attributes(&self) -> Map<String, Value> {
        let live: Vec<&Member> = self.members.iter().filter(|m| m.is_in_service()).collect();
        let mut a = Map::new();
        // heat/engine/resources/openstack/heat/instance_group.py,
        // `_resolve_attribute`: each member's PublicIp or 0.0.0.0, joined;
        // nothing (null) for a group without members.
        let ips: Vec<&str> = live
            .iter()
            .map(
                |m| match m.attributes.get("PublicIp").and_then(Value::as_str) {
                    Some(ip) if !ip.is_empty() => ip,
                    _ => "0.0.0.0",
                },
            )
            .collect();
        a.insert(
            "InstanceList".into(),
            if ips.is_empty() {
                Value::Null
            } else {
                Value::String(ips.join(","))
            },
        );
        a.insert(
            "MemberIds".into(),
            live.iter()
                .map(|m| Value::String(m.physical_id.clone().unwrap_or_default()))
                .collect(),
        );
        a.insert(
            "MemberNames".into(),
            live.iter().map(|m| Value::String(m.name.clone())).collect(),
        );
        a.insert(
            "MemberIdsByIndex".into(),
            Value::Object(
                live.iter()
                    .map(|m| {
                        let id = m.physical_id.clone().unwrap_or_default();
                        (m.index.to_string(), Value::String(id))
                    })
                    .collect(),
            ),
        );
        a.insert(
            "RemovedIndices".into(),
            self.removed
                .iter()
                .map(|i| Value::String(i.to_string()))
                .collect(),
        );
        a.insert(
            "MemberAttributes".into(),
            Value::Object(
                live.iter()
                    .map(|m| (m.index.to_string(), Value::Object(m.attributes.clone())))
                    .collect(),
            ),
        );
        a
    }
}
