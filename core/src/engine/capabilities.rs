//! CloudFormation's capabilities: a template that makes IAM resources,
//! names them, or is expanded by a transform, must be acknowledged
//! (`--capabilities` / `Capabilities.member.N`), else the operation is
//! refused with `InsufficientCapabilitiesException`: `Requires
//! capabilities : [CAPABILITY_IAM]`. A provider's schema may require a
//! capability of its own for any of its types (`RequiredCapabilities`),
//! so that a platform team can demand an acknowledgement for dangerous
//! types. Nested stacks count: their templates are the parent's too.

use std::collections::BTreeSet;

use crate::registry::Registry;
use crate::template::Template;

pub const IAM: &str = "CAPABILITY_IAM";
pub const NAMED_IAM: &str = "CAPABILITY_NAMED_IAM";
pub const AUTO_EXPAND: &str = "CAPABILITY_AUTO_EXPAND";

/// CloudFormation's IAM types, each with the property that names it (a
/// named one needs CAPABILITY_NAMED_IAM).
const IAM_TYPES: [(&str, Option<&str>); 8] = [
    ("AWS::IAM::AccessKey", None),
    ("AWS::IAM::Group", Some("GroupName")),
    ("AWS::IAM::InstanceProfile", Some("InstanceProfileName")),
    ("AWS::IAM::ManagedPolicy", Some("ManagedPolicyName")),
    ("AWS::IAM::Policy", None),
    ("AWS::IAM::Role", Some("RoleName")),
    ("AWS::IAM::User", Some("UserName")),
    ("AWS::IAM::UserToGroupAddition", None),
];

/// What a template requires: the capabilities, and the resource types
/// that require them (ValidateTemplate's `CapabilitiesReason`).
#[derive(Debug, Default, PartialEq)]
pub struct Required {
    pub capabilities: BTreeSet<String>,
    pub types: BTreeSet<String>,
}

impl Required {
    /// `Capabilities` as ValidateTemplate shows them (sorted).
    pub fn list(&self) -> Vec<String> {
        self.capabilities.iter().cloned().collect()
    }

    /// ValidateTemplate's `CapabilitiesReason`.
    pub fn reason(&self) -> Option<String> {
        if self.capabilities.is_empty() {
            return None;
        }
        if self.types.is_empty() {
            return Some("The template contains a transform that expands it.".into());
        }
        let types: Vec<&str> = self.types.iter().map(String::as_str).collect();
        Some(format!(
            "The following resource(s) require capabilities: [{}]",
            types.join(", ")
        ))
    }

    /// Adds what `template` (its text `body`) requires. `direct`: the
    /// template is run as it is, not reviewed in a change set (then a
    /// transform needs CAPABILITY_AUTO_EXPAND).
    pub fn add(&mut self, template: &Template, body: &str, registry: &Registry, direct: bool) {
        for r in &template.resources {
            if let Some((_, name)) = IAM_TYPES.iter().find(|(t, _)| *t == r.type_name) {
                let named = name.is_some_and(|n| r.properties.contains_key(n));
                self.capabilities
                    .insert(if named { NAMED_IAM } else { IAM }.to_string());
                self.types.insert(r.type_name.clone());
            }
            if let Some(schema) = registry.schema(&r.type_name) {
                for c in &schema.required_capabilities {
                    self.capabilities.insert(c.clone());
                    self.types.insert(r.type_name.clone());
                }
            }
        }
        self.add_transforms(body, direct);
    }

    /// Adds CAPABILITY_AUTO_EXPAND when `body` names a transform and is run
    /// `direct`ly (a template whose macros have not run yet is known by
    /// this alone).
    pub fn add_transforms(&mut self, body: &str, direct: bool) {
        let transformed = body.contains("Transform")
            && Template::body_of(body).is_ok_and(|b| crate::template::transform::any(&b));
        if direct && transformed {
            self.capabilities.insert(AUTO_EXPAND.to_string());
        }
    }

    /// The capabilities `given` lacks, in CloudFormation's text; NAMED_IAM
    /// covers IAM.
    pub fn missing(&self, given: &[String]) -> Option<String> {
        let has = |c: &str| given.iter().any(|g| g == c);
        // CAPABILITY_NAMED_IAM, given or asked for, covers CAPABILITY_IAM.
        let named = has(NAMED_IAM) || self.capabilities.contains(NAMED_IAM);
        let missing: Vec<&str> = self
            .capabilities
            .iter()
            .map(String::as_str)
            .filter(|c| !(has(c) || (*c == IAM && named)))
            .collect();
        if missing.is_empty() {
            return None;
        }
        Some(format!("Requires capabilities : [{}]", missing.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn required(body: &str, direct: bool) -> Required {
        let t = Template::parse(body).unwrap();
        let mut r = Required::default();
        r.add(&t, body, &Registry::new(), direct);
        r
    }

    #[test]
    fn iam_resources_need_iam_and_named_ones_named_iam() {
        let r = required(
            "Resources:\n  R: {Type: AWS::IAM::Role, Properties: {}}\n",
            true,
        );
        assert_eq!(r.list(), vec![IAM]);
        assert_eq!(
            r.missing(&[]).as_deref(),
            Some("Requires capabilities : [CAPABILITY_IAM]")
        );
        assert_eq!(r.missing(&[NAMED_IAM.into()]), None);
        assert_eq!(
            r.reason().as_deref(),
            Some("The following resource(s) require capabilities: [AWS::IAM::Role]")
        );
        let r = required(
            "Resources:\n  R: {Type: AWS::IAM::Role, Properties: {RoleName: x}}\n",
            true,
        );
        assert_eq!(
            r.missing(&[IAM.into()]).as_deref(),
            Some("Requires capabilities : [CAPABILITY_NAMED_IAM]")
        );
        let r = required(
            "Resources:\n  R: {Type: AWS::IAM::Role, Properties: {RoleName: x}}\n  U: {Type: AWS::IAM::User}\n",
            true,
        );
        assert_eq!(
            r.missing(&[]).as_deref(),
            Some("Requires capabilities : [CAPABILITY_NAMED_IAM]")
        );
        let r = required("Resources:\n  R: {Type: T}\n", true);
        assert_eq!(r.missing(&[]), None);
    }
}
