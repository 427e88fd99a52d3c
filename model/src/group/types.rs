//! The group resource types: their schemas, their properties read into a
//! [`GroupSpec`], and the launch configuration's provider.
//!
//! `Cairn::Group::LaunchConfiguration` is an ordinary provider (it stores
//! nothing: its evaluated properties, kept in its resource row, are the
//! member definition). The two group types are run by the engine
//! (`engine::group`), which needs the store and the registry to manage
//! members; the provider registered for them only carries their schemas.

use cairn_sdk::{
    CreateRequest, CreateResult, DeleteRequest, DriftRequest, DriftResult, PropertySchema,
    PropertyType, ProviderError, ResourceProvider, ResourceSchema, UpdateRequest, UpdateResult,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use crate::template::types::{AUTO_SCALING_GROUP, INSTANCE_GROUP, LAUNCH_CONFIGURATION};

/// Aliases the default configuration adds (unless configured otherwise or
/// served by a provider).
pub const DEFAULT_ALIASES: [(&str, &str); 3] = [
    ("OS::Heat::InstanceGroup", INSTANCE_GROUP),
    ("AWS::AutoScaling::AutoScalingGroup", AUTO_SCALING_GROUP),
    (
        "AWS::AutoScaling::LaunchConfiguration",
        LAUNCH_CONFIGURATION,
    ),
];

/// Whether the engine runs this (canonical) type as a group.
pub fn is_group(canonical_type: &str) -> bool {
    canonical_type == INSTANCE_GROUP || canonical_type == AUTO_SCALING_GROUP
}

/// What a group's properties ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    /// The launch configuration's physical name (its `Ref`).
    pub launch_configuration: String,
    pub size: usize,
    pub prefix: String,
    /// Members to remove (Heat's removal_policies: member names, indices
    /// or physical ids): on every create and update that names them, even
    /// when the size does not shrink, and never to be reused.
    pub removal: Vec<String>,
    /// Heat's `removal_policies_mode: update`: the indices removed before
    /// are forgotten (they may be used again); `append` (the default)
    /// keeps them.
    pub removal_reset: bool,
    /// `MemberUpdate: InPlace` (Heat's ResourceGroup): a new launch
    /// configuration reaches members under their own names and indices
    /// ([`super::in_place`]); otherwise new members replace them (seed 002).
    pub in_place: bool,
}

fn uint(props: &Map<String, Value>, key: &str, logical_id: &str) -> Result<Option<usize>, String> {
    match props.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(|n| Some(n as usize))
            .ok_or_else(|| {
                format!("{key} of {logical_id} must be a non-negative integer, not {v}")
            }),
    }
}

/// Reads a group's evaluated properties.
pub fn spec(
    canonical_type: &str,
    logical_id: &str,
    props: &Map<String, Value>,
) -> Result<GroupSpec, super::GroupError> {
    spec_text(canonical_type, logical_id, props).map_err(super::GroupError::InvalidProperties)
}

/// [`spec`], its texts.
fn spec_text(
    canonical_type: &str,
    logical_id: &str,
    props: &Map<String, Value>,
) -> Result<GroupSpec, String> {
    let launch_configuration = props
        .get("LaunchConfigurationName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            format!(
                "LaunchConfigurationName of {logical_id} is required: Ref a {LAUNCH_CONFIGURATION}"
            )
        })?
        .to_string();
    let size = if canonical_type == AUTO_SCALING_GROUP {
        let min = uint(props, "MinSize", logical_id)?.unwrap_or(0);
        let max = uint(props, "MaxSize", logical_id)?.unwrap_or(0);
        if min > max {
            return Err(format!(
                "{logical_id}: MinSize can not be greater than MaxSize"
            ));
        }
        let desired = uint(props, "DesiredCapacity", logical_id)?.unwrap_or(min);
        if desired < min || desired > max {
            return Err(format!(
                "{logical_id}: DesiredCapacity must be between MinSize and MaxSize"
            ));
        }
        desired
    } else {
        uint(props, "Size", logical_id)?.unwrap_or(0)
    };
    let prefix = props
        .get("MemberNamePrefix")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(logical_id)
        .to_string();
    let removal = props
        .get("RemovalPolicies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|p| {
            p.get("resource_list")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .map(|v| {
            v.as_str()
                .map(String::from)
                .unwrap_or_else(|| v.to_string())
        })
        .collect();
    let removal_reset = match props.get("RemovalPoliciesMode").and_then(Value::as_str) {
        None | Some("append") => false,
        Some("update") => true,
        Some(other) => {
            return Err(format!(
                "RemovalPoliciesMode of {logical_id} must be append or update, not {other}"
            ))
        }
    };
    let in_place = match props.get("MemberUpdate").and_then(Value::as_str) {
        None | Some("Replace") => false,
        Some("InPlace") => true,
        Some(other) => {
            return Err(format!(
                "MemberUpdate of {logical_id} must be InPlace or Replace, not {other}"
            ))
        }
    };
    Ok(GroupSpec {
        launch_configuration,
        size,
        prefix,
        removal,
        removal_reset,
        in_place,
    })
}

/// The member definition a launch configuration's properties give.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberDefinition {
    pub member_type: String,
    pub properties: Map<String, Value>,
    /// Replaced by each member's index in its properties' strings (Heat's
    /// ResourceGroup index_var).
    pub index_var: Option<String>,
}

impl MemberDefinition {
    /// The properties of the member with `index`.
    pub fn properties_of(&self, index: u64) -> Map<String, Value> {
        let Some(var) = self.index_var.as_deref().filter(|v| !v.is_empty()) else {
            return self.properties.clone();
        };
        fn put(v: &Value, var: &str, index: &str) -> Value {
            match v {
                Value::String(s) => Value::String(s.replace(var, index)),
                Value::Array(a) => Value::Array(a.iter().map(|x| put(x, var, index)).collect()),
                Value::Object(m) => Value::Object(
                    m.iter()
                        .map(|(k, x)| (k.replace(var, index), put(x, var, index)))
                        .collect(),
                ),
                other => other.clone(),
            }
        }
        let i = index.to_string();
        self.properties
            .iter()
            .map(|(k, v)| (k.clone(), put(v, var, &i)))
            .collect()
    }
}

/// The member type of a launch configuration written with AWS's
/// properties (`ImageId`, `InstanceType`, …), as Heat's InstanceGroup and
/// AutoScalingGroup make their members (instance_group.py's
/// `SCALED_RESOURCE_TYPE`): served by whichever provider serves it.
pub const AWS_MEMBER_TYPE: &str = "AWS::EC2::Instance";

/// The properties of AWS's (and Heat's) launch configuration that its
/// members are made with, as `AWS::EC2::Instance` names them
/// (heat/engine/resources/aws/autoscaling/launch_config.py).
pub const AWS_MEMBER_PROPERTIES: [&str; 11] = [
    "ImageId",
    "InstanceType",
    "KeyName",
    "UserData",
    "SecurityGroups",
    "KernelId",
    "RamDiskId",
    "BlockDeviceMappings",
    "NovaSchedulerHints",
    "IamInstanceProfile",
    "EbsOptimized",
];

/// The launch configuration's properties CloudFormation has that an
/// instance does not take: accepted, not passed to the members.
const AWS_LAUNCH_ONLY: [&str; 9] = [
    "AssociatePublicIpAddress",
    "ClassicLinkVPCId",
    "ClassicLinkVPCSecurityGroups",
    "InstanceId",
    "InstanceMonitoring",
    "LaunchConfigurationName",
    "MetadataOptions",
    "PlacementTenancy",
    "SpotPrice",
];

impl MemberDefinition {
    pub fn of(props: &Map<String, Value>) -> Option<MemberDefinition> {
        // AWS's form: no MemberType, an ImageId; members are instances.
        if props.get("MemberType").is_none() && props.contains_key("ImageId") {
            return Some(MemberDefinition {
                member_type: AWS_MEMBER_TYPE.to_string(),
                properties: AWS_MEMBER_PROPERTIES
                    .iter()
                    .filter_map(|k| {
                        let v = props.get(*k).filter(|v| !v.is_null())?;
                        Some((k.to_string(), v.clone()))
                    })
                    .collect(),
                index_var: None,
            });
        }
        Some(MemberDefinition {
            member_type: props.get("MemberType")?.as_str()?.to_string(),
            properties: props
                .get("MemberProperties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            index_var: props
                .get("IndexVariable")
                .and_then(Value::as_str)
                .map(String::from),
        })
    }
}

/// `<stack>-<logical id>-<12 characters>` derived from the request id, so a
/// re-issued create (same request id) gets the same name.
pub fn physical_name(stack_name: &str, logical_id: &str, request_id: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let suffix: String = Sha256::digest(request_id.as_bytes())
        .iter()
        .take(12)
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect();
    format!("{stack_name}-{logical_id}-{suffix}")
}

fn group_schema(type_name: &str) -> ResourceSchema {
    ResourceSchema::new(type_name)
        .property(
            "LaunchConfigurationName",
            PropertySchema::string()
                .required()
                .describe("Ref of the Cairn::Group::LaunchConfiguration its members are made from; a new one rolls the members out under the UpdatePolicy"),
        )
        .property(
            "RemovalPolicies",
            PropertySchema::json().describe(
                "[{resource_list: [member names, indices or physical ids]}]: removed on create and update even when the size does not shrink, their indices never used again (Heat's removal_policies)",
            ),
        )
        .property(
            "RemovalPoliciesMode",
            PropertySchema::string().describe(
                "append (default: the indices removed before stay unused) or update (they are forgotten; Heat's removal_policies_mode)",
            ),
        )
        .property(
            "MemberUpdate",
            PropertySchema::string().describe(
                "Replace (default: a new launch configuration's members replace the old ones under new names, seed 002) or InPlace (members keep their names and indices and are updated in place, or replaced under the same name when their type needs it; Heat's ResourceGroup)",
            ),
        )
        .property(
            "MemberNamePrefix",
            PropertySchema::string()
                .create_only()
                .describe("members are named <prefix>-<n> (default: the group's logical id)"),
        )
        .property(
            "AvailabilityZones",
            PropertySchema::list(PropertyType::String)
                .create_only()
                .describe("accepted for Heat and CloudFormation templates; not used"),
        )
        .attribute("MemberIds", "the members' physical ids, in member order")
        .attribute("MemberNames", "the members' names, in member order")
        .attribute(
            "MemberIdsByIndex",
            "a map of each member's index to its physical id (Heat's refs_map)",
        )
        .attribute(
            "RemovedIndices",
            "the indices RemovalPolicies removed, never used again (Heat's removed_rsrc_list)",
        )
        .attribute(
            "MemberAttributes",
            "a map of each member's index to its attributes (Heat's resource.N.attr and attributes)",
        )
        .ref_returns("the group's physical name")
}

/// The schemas of the group types and the launch configuration's provider.
pub struct GroupTypes;

#[async_trait::async_trait]
impl ResourceProvider for GroupTypes {
    fn schema(&self) -> Vec<ResourceSchema> {
        // AWS's launch configuration properties (Heat's too): its members
        // are then AWS::EC2::Instance.
        let aws = |schema: ResourceSchema| {
            AWS_MEMBER_PROPERTIES
                .iter()
                .chain(AWS_LAUNCH_ONLY.iter())
                .fold(schema, |s, k| {
                    s.property(*k, PropertySchema::json().create_only())
                })
        };
        vec![
            aws(ResourceSchema::new(LAUNCH_CONFIGURATION))
                .describe("what a group's members are: any resource type and its properties")
                .property(
                    "MemberType",
                    PropertySchema::string()
                        .create_only()
                        .describe("the members' type; without it, AWS's ImageId, InstanceType, … make AWS::EC2::Instance members"),
                )
                .property("MemberProperties", PropertySchema::json().create_only())
                .property(
                    "IndexVariable",
                    PropertySchema::string()
                        .create_only()
                        .describe("replaced by each member's index in MemberProperties' strings (Heat's index_var)"),
                )
                .ref_returns("its physical name, new with every replacement"),
            group_schema(INSTANCE_GROUP)
                .describe("a fixed-size group of members")
                .property("Size", PropertySchema::integer().required())
                .attribute(
                    "InstanceList",
                    "the members' PublicIp attributes, comma-delimited (0.0.0.0 for a member without one; Heat's OS::Heat::InstanceGroup)",
                ),
            group_schema(AUTO_SCALING_GROUP)
                .describe("a group sized between MinSize and MaxSize")
                .property("MinSize", PropertySchema::integer().required())
                .property("MaxSize", PropertySchema::integer().required())
                .property("DesiredCapacity", PropertySchema::integer()),
        ]
    }

    async fn create(&self, req: &CreateRequest) -> Result<CreateResult, ProviderError> {
        self.launch_configuration_only(&req.context.resource_type)?;
        let ctx = &req.context;
        Ok(CreateResult {
            physical_resource_id: physical_name(
                &ctx.stack_name,
                &ctx.logical_resource_id,
                &ctx.request_id,
            ),
            attributes: Map::new(),
            no_echo: false,
        })
    }

    /// Every property is CreateOnly: the engine replaces a launch
    /// configuration instead of updating it, so there is nothing to change.
    async fn update(&self, req: &UpdateRequest) -> Result<UpdateResult, ProviderError> {
        self.launch_configuration_only(&req.context.resource_type)?;
        Ok(UpdateResult {
            physical_resource_id: None,
            attributes: Map::new(),
            no_echo: false,
        })
    }

    /// A launch configuration exists only in the store: it cannot drift.
    async fn check_drift(&self, req: &DriftRequest) -> Result<DriftResult, ProviderError> {
        self.launch_configuration_only(&req.context.resource_type)?;
        Ok(DriftResult::InSync)
    }

    /// A launch configuration is a name and the row's properties: nothing
    /// outside the store to delete.
    async fn delete(&self, req: &DeleteRequest) -> Result<(), ProviderError> {
        self.launch_configuration_only(&req.context.resource_type)
    }
}

impl GroupTypes {
    fn launch_configuration_only(&self, type_name: &str) -> Result<(), ProviderError> {
        let group = is_group(type_name)
            || DEFAULT_ALIASES
                .iter()
                .any(|(alias, target)| *alias == type_name && is_group(target));
        if !group {
            return Ok(());
        }
        Err(ProviderError::invalid_request(format!(
            "{type_name} is run by Cairn's engine, not called as a provider"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn reads_sizes_and_prefix() {
        let s = spec(
            INSTANCE_GROUP,
            "Web",
            &props(json!({"LaunchConfigurationName": "lc-1", "Size": 3})),
        )
        .unwrap();
        assert_eq!(
            s,
            GroupSpec {
                launch_configuration: "lc-1".into(),
                size: 3,
                prefix: "Web".into(),
                removal: Vec::new(),
                removal_reset: false,
                in_place: false,
            }
        );
        let s = spec(
            INSTANCE_GROUP,
            "G",
            &props(json!({"LaunchConfigurationName": "lc", "Size": 2, "RemovalPolicies": [{"resource_list": ["1", "G-3"]}]})),
        )
        .unwrap();
        assert_eq!(s.removal, vec!["1".to_string(), "G-3".to_string()]);
        assert!(!s.in_place);
        let kept = |v: Value| {
            spec(
                INSTANCE_GROUP,
                "G",
                &props(json!({"LaunchConfigurationName": "lc", "MemberUpdate": v})),
            )
        };
        assert!(kept(json!("InPlace")).is_ok_and(|s| s.in_place));
        assert_eq!(
            kept(json!("Rename")).map_err(|e| e.to_string()),
            Err("MemberUpdate of G must be InPlace or Replace, not Rename".to_string())
        );
        let def = MemberDefinition {
            member_type: "T".into(),
            properties: props(json!({"Name": "web-%index%", "Tags": {"k-%index%": ["%index%"]}})),
            index_var: Some("%index%".into()),
        };
        assert_eq!(
            Value::Object(def.properties_of(4)),
            json!({"Name": "web-4", "Tags": {"k-4": ["4"]}})
        );
        let s = spec(
            AUTO_SCALING_GROUP,
            "Asg",
            &props(json!({"LaunchConfigurationName": "lc", "MinSize": "1", "MaxSize": "4", "MemberNamePrefix": "vm"})),
        )
        .unwrap();
        assert_eq!((s.size, s.prefix.as_str()), (1, "vm"));
    }

    #[test]
    fn auto_scaling_bounds_are_checked() {
        let e = spec(
            AUTO_SCALING_GROUP,
            "Asg",
            &props(json!({"LaunchConfigurationName": "lc", "MinSize": 3, "MaxSize": 2})),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "Asg: MinSize can not be greater than MaxSize");
        let e = spec(
            AUTO_SCALING_GROUP,
            "Asg",
            &props(json!({"LaunchConfigurationName": "lc", "MinSize": 1, "MaxSize": 2, "DesiredCapacity": 5})),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "Asg: DesiredCapacity must be between MinSize and MaxSize"
        );
    }

    #[test]
    fn physical_names_follow_the_request_id() {
        let a = physical_name("s", "Lc", "req-1");
        assert_eq!(a, physical_name("s", "Lc", "req-1"));
        assert_ne!(a, physical_name("s", "Lc", "req-2"));
        assert!(a.starts_with("s-Lc-") && a.len() == "s-Lc-".len() + 12);
    }
}
