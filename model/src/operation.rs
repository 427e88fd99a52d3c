//! An operation's options: what its record in the store keeps beside its
//! kind, so that the engine that runs it (this one after a crash, or
//! another after a takeover) runs it as it was started, and the records
//! they hold (an update's journal, what a continued update supersedes,
//! `cairn update`'s plan). The store keeps the options as one JSON object
//! whose keys are these fields' names; the engine reads and writes them
//! only as [`OperationOptions`].

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::import::Adoption;
use crate::nested::NestedTemplates;
use crate::rollback_triggers::RollbackConfiguration;
use crate::stack::{OutputRecord, Snapshot, StackRecord, Tag};

/// The options of one operation. Each is read on its own: one that an
/// older Cairn wrote differently is left out (as if not given), never a
/// reason to refuse the others.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct OperationOptions {
    /// The STACK-target hooks judging the operation while one of them
    /// answered IN_PROGRESS (a HOOK call: the waiting hook's token and
    /// where the hooks stand), so a crash resumes that hook.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub stack_hooks: Option<crate::stack::PendingCall>,
    /// A delete's resources to keep (DeleteStack's RetainResources).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub retain: Vec<String>,
    /// A create's TimeoutInMinutes (a nested stack's update carries its
    /// parent's).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout_in_minutes: Option<u64>,
    /// An update's journal: the stack it started from.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub previous: Option<StackState>,
    /// An update's journal: the stack it goes to.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub target: Option<StackState>,
    /// The nested templates its stack resources use.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "NestedTemplates::is_empty"
    )]
    pub nested_templates: NestedTemplates,
    /// The stack policy an update is checked against, as written.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub stack_policy: Option<String>,
    /// An update's failure stops it in UPDATE_FAILED (no rollback).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "is_false"
    )]
    pub disable_rollback: bool,
    /// The update continues a kept failed update (its rows are folded in
    /// the write that starts it).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "is_false"
    )]
    pub continues: bool,
    /// The physical resources a kept failed update left that the stack no
    /// longer uses, deleted by this update's cleanup.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub superseded: Vec<Superseded>,
    /// How many events the stack had when a continuing update started: its
    /// own are the ones after.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub events_before: Option<u64>,
    /// `cairn update`'s plan.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub plan: Option<ReconcilePlan>,
    /// An import's resources and the physical ids they adopt.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub imports: Option<Vec<Adoption>>,
    /// The parent's request a nested stack's update was started for (a
    /// re-issued request finds it).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_request: Option<String>,
    /// An update asked to move resources to their types' default versions
    /// (`--upgrade-types`): each registered type and the version it moves
    /// to, decided when the update was planned.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub upgrade_types: BTreeMap<String, String>,
    /// The W3C `traceparent` of the operation's first run, when traces are
    /// exported: a run that resumes it (after a crash, on another engine)
    /// links its own trace to this one.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub trace: Option<String>,
}

impl OperationOptions {
    /// The options a store's JSON holds (nothing, or not an object: none).
    pub fn from_value(value: &Value) -> OperationOptions {
        serde_json::from_value(value.clone()).unwrap_or_default()
    }

    /// The JSON the store keeps.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Default::default()))
    }

    /// An update's journal: where it started and where it goes.
    pub fn journal(&self) -> Result<(StackState, StackState), MissingJournal> {
        Ok((
            self.previous.clone().ok_or(MissingJournal("Previous"))?,
            self.target.clone().ok_or(MissingJournal("Target"))?,
        ))
    }
}

/// An update operation whose record lacks one side of its journal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the update's journal in the state file lacks its {0} template")]
pub struct MissingJournal(pub &'static str);

/// The stack fields an update replaces, as journaled for both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StackState {
    pub template_body: String,
    pub parameters: BTreeMap<String, String>,
    pub no_echo: Vec<String>,
    pub description: Option<String>,
    pub outputs: Vec<OutputRecord>,
    #[serde(default)]
    pub tags: Vec<Tag>,
    #[serde(
        default,
        skip_serializing_if = "crate::stack::TemplateContext::is_empty"
    )]
    pub context: crate::stack::TemplateContext,
    /// The capabilities the operation was given (DescribeStacks').
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// The rollback triggers and monitoring period (see
    /// `rollback_triggers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_configuration: Option<RollbackConfiguration>,
}

impl StackState {
    pub fn of(s: &StackRecord) -> StackState {
        StackState {
            context: s.context.clone(),
            template_body: s.template_body.clone(),
            parameters: s.parameters.clone(),
            no_echo: s.no_echo.clone(),
            description: s.description.clone(),
            outputs: s.outputs.clone(),
            tags: s.tags.clone(),
            capabilities: s.capabilities.clone(),
            rollback_configuration: s.rollback_configuration.clone(),
        }
    }

    /// Sets the stack's template, parameters and description (not outputs).
    pub fn apply_template(&self, s: &mut StackRecord) {
        s.rollback_configuration = self.rollback_configuration.clone();
        s.context = self.context.clone();
        s.capabilities = self.capabilities.clone();
        s.tags = self.tags.clone();
        s.template_body = self.template_body.clone();
        s.parameters = self.parameters.clone();
        s.no_echo = self.no_echo.clone();
        s.description = self.description.clone();
    }

    /// Sets the stack's template, parameters, description and outputs.
    pub fn apply(&self, s: &mut StackRecord) {
        self.apply_template(s);
        s.outputs = self.outputs.clone();
    }
}

/// A physical resource no row of the stack uses any more, still to delete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Superseded {
    pub logical_id: String,
    pub target: Snapshot,
}

/// Which phases run (seed 003's flags; all phases by default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct ReconcileFlags {
    /// Keep the template and parameters; still heal and fix drift.
    pub drift_only: bool,
    pub skip_install: bool,
    pub skip_uninstall: bool,
    pub skip_reinstall: bool,
    pub skip_heal: bool,
    pub skip_drift_check: bool,
    /// A failed delete while uninstalling does not stop the update.
    pub ignore_failure: bool,
}

/// One change of the template, at its most top-level entity
/// (`Resources.Web`, `Resources.Db.Properties.Size`, `Outputs.Url`, …).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Step {
    /// `add`, `remove` or `modify`.
    pub action: String,
    pub entity: String,
}

/// What an update will do, as far as it is known before it runs (status and
/// drift are learned while it runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReconcilePlan {
    pub stack_name: String,
    pub steps: Vec<Step>,
    pub changed_parameters: Vec<String>,
    pub uninstall: Vec<String>,
    pub install: Vec<String>,
    /// Changed in a way that cannot be applied in place.
    pub reinstall: Vec<String>,
    /// Changed in a way the provider applies in place (if its drift check
    /// agrees).
    pub modify: Vec<String>,
    pub flags: ReconcileFlags,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One option, or its default when it does not read as its type.
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(d)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_store_keeps_each_option_under_its_cloudformation_style_name() {
        let options = OperationOptions {
            retain: vec!["A".into()],
            timeout_in_minutes: Some(5),
            stack_policy: Some("{}".into()),
            disable_rollback: true,
            continues: true,
            events_before: Some(12),
            parent_request: Some("r-1".into()),
            ..Default::default()
        };
        assert_eq!(
            options.to_value(),
            json!({
                "Retain": ["A"],
                "TimeoutInMinutes": 5,
                "StackPolicy": "{}",
                "DisableRollback": true,
                "Continues": true,
                "EventsBefore": 12,
                "ParentRequest": "r-1",
            })
        );
        assert_eq!(OperationOptions::from_value(&options.to_value()), options);
        // Nothing given: an empty object.
        assert_eq!(OperationOptions::default().to_value(), json!({}));
    }

    #[test]
    fn an_option_that_does_not_read_is_left_out_and_the_others_kept() {
        let read = OperationOptions::from_value(&json!({
            "TimeoutInMinutes": "five",
            "Retain": ["A", "B"],
            "DisableRollback": "yes",
            "Unknown": 1,
        }));
        assert_eq!(read.timeout_in_minutes, None);
        assert_eq!(read.retain, ["A", "B"]);
        assert!(!read.disable_rollback);
        assert_eq!(
            OperationOptions::from_value(&Value::Null),
            OperationOptions::default()
        );
    }

    #[test]
    fn a_journal_without_its_templates_says_which_is_missing() {
        let err = OperationOptions::default()
            .journal()
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("the update's journal in the state file lacks its Previous template")
        );
    }
}
