//! An update that gives the stack exactly what it has: refused ("No
//! updates are to be performed.") from the stack's record alone, before
//! the template is parsed, evaluated and planned.
//!
//! The full check ([`super::update::PreparedUpdate::changes_nothing`])
//! plans the update and finds no resource to change; for the same text,
//! the same parameter values, no context and no tags, its answer is known
//! without doing that work, as CloudFormation knows it by comparing the
//! templates: the same input evaluates to the same properties. That holds
//! only for a template whose evaluation reads nothing but its text and its
//! parameters, so any template that reads beyond them (macros and
//! transforms, nested stacks' files, modules, SSM parameter types, dynamic
//! references, other stacks' exports and outputs, HOT's files and
//! environments) takes the full path, as does a stack a failed update left
//! (`UPDATE_FAILED`: running it again continues that update).

use super::kinds::Updates;
use super::update::{settled, supplied_values, UpdateStackInput, UpgradeTypes};
use crate::stack::StackRecord;

/// What, written anywhere in a template's text, makes its evaluation read
/// beyond its text and parameters (or its kind of template have its own
/// rules): a plain substring test, so a false positive only costs the full
/// check.
const READS_BEYOND_ITS_TEXT: &[&str] = &[
    // Macros, AWS::Include, AWS::LanguageExtensions, SAM: run again on
    // every update.
    "Transform",
    // Nested stacks: their templates are files read on each update.
    "AWS::CloudFormation::Stack",
    "TemplateURL",
    // Registry modules: expanded from the registry's current version.
    "::MODULE",
    // SSM parameter types and dynamic references: resolved values.
    "AWS::SSM::Parameter",
    "{{resolve:",
    // Other stacks' exports and outputs.
    "ImportValue",
    "GetStackOutput",
    // HOT: provider templates, get_file, environments.
    "heat_template_version",
    // What the engine's configuration or the update's own arguments give
    // (the configuration may have changed since).
    "AWS::Region",
    "AWS::AccountId",
    "AWS::Partition",
    "AWS::URLSuffix",
    "GetAZs",
    "AWS::NotificationARNs",
];

/// Whether evaluating `text` may read more than `text` and its parameters.
fn reads_beyond_its_text(text: &str) -> bool {
    READS_BEYOND_ITS_TEXT.iter().any(|m| text.contains(m))
}

impl Updates<'_> {
    /// [`gives_what_it_has`], for `start_update` (an update's steps are
    /// methods of its kind, wherever they are written).
    pub(super) fn changes_nothing_known(
        &self,
        input: &UpdateStackInput,
        stack: &StackRecord,
    ) -> bool {
        gives_what_it_has(input, stack)
    }
}

/// Whether `input` gives `stack` (as just read) its own template text,
/// parameter values and tags, with nothing else that could change what
/// they evaluate to. `false` whenever in doubt (the full check decides),
/// and for a stack that cannot be updated (the full path reports why).
fn gives_what_it_has(input: &UpdateStackInput, stack: &StackRecord) -> bool {
    let Some(body) = input.template_body.as_deref() else {
        return false;
    };
    if input.upgrade_types != UpgradeTypes::Keep
        || input.context.as_ref().is_some_and(|c| !c.is_empty())
        || reads_beyond_its_text(body)
        || !settled(stack.status)
        || stack.template_body != body
        || !stack.context.is_empty()
        || input.tags.as_ref().is_some_and(|t| *t != stack.tags)
    {
        return false;
    }
    // The values as given (a default left out is not the same input as
    // the value it stood for: the full check resolves it).
    supplied_values(&input.parameters, &stack.parameters)
        .is_ok_and(|supplied| supplied == stack.parameters)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::StackStatus;

    #[test]
    fn a_template_reading_beyond_its_text_takes_the_full_check() {
        let plain = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref P}}\n";
        assert!(!reads_beyond_its_text(plain));
        for marker in READS_BEYOND_ITS_TEXT {
            let text = format!("{plain}  B: {{Type: X, Properties: {{V: '{marker}'}}}}\n");
            assert!(reads_beyond_its_text(&text), "{marker}");
        }
        assert!(reads_beyond_its_text(
            "Transform: AWS::Serverless-2016-10-31\nResources: {}\n"
        ));
        assert!(reads_beyond_its_text(
            "Resources:\n  V: {Type: X, Properties: {P: '{{resolve:ssm:/a/b}}'}}\n"
        ));
    }

    const BODY: &str = "Parameters: {P: {Type: String}}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref P}}\n";

    fn stack() -> StackRecord {
        let mut s = crate::engine::review::review_stack("s", "id-s");
        s.status = StackStatus::UpdateComplete;
        s.template_body = BODY.into();
        s.parameters = [("P".to_string(), "v".to_string())].into();
        s.tags = vec![crate::stack::Tag {
            key: "team".into(),
            value: "a".into(),
        }];
        s
    }

    fn input() -> UpdateStackInput {
        UpdateStackInput {
            stack_name: "s".into(),
            template_body: Some(BODY.into()),
            parameters: [(
                "P".to_string(),
                super::super::update::ParameterInput::Value("v".into()),
            )]
            .into(),
            tags: None,
            origin: Default::default(),
            context: None,
            disable_rollback: false,
            capabilities: None,
            stack_policy: None,
            stack_policy_during_update: None,
            rollback_configuration: None,
            notification_arns: None,
            upgrade_types: UpgradeTypes::Keep,
        }
    }

    #[test]
    fn the_stacks_own_text_values_and_tags_are_known_to_change_nothing() {
        let stack = stack();
        assert!(gives_what_it_has(&input(), &stack));
        // The same tags given again, or a previous value reused: the same.
        let mut same = input();
        same.tags = Some(stack.tags.clone());
        same.parameters.insert(
            "P".into(),
            super::super::update::ParameterInput::UsePreviousValue,
        );
        assert!(gives_what_it_has(&same, &stack));
    }

    #[test]
    fn anything_else_takes_the_full_check() {
        let stack = stack();
        type Change = Box<dyn Fn(&mut UpdateStackInput)>;
        let differs: Vec<(&str, Change)> = vec![
            (
                "another text",
                Box::new(|i| i.template_body = Some(format!("{BODY}\n"))),
            ),
            (
                "the stack's template again",
                Box::new(|i| i.template_body = None),
            ),
            (
                "another value",
                Box::new(|i| {
                    i.parameters.insert(
                        "P".into(),
                        super::super::update::ParameterInput::Value("w".into()),
                    );
                }),
            ),
            ("a value left out", Box::new(|i| i.parameters.clear())),
            ("other tags", Box::new(|i| i.tags = Some(Vec::new()))),
            (
                "a context",
                Box::new(|i| {
                    i.context = Some(crate::stack::TemplateContext {
                        files: [("f".to_string(), "x".to_string())].into(),
                        ..Default::default()
                    })
                }),
            ),
            (
                "--upgrade-types",
                Box::new(|i| i.upgrade_types = UpgradeTypes::ToDefaults),
            ),
        ];
        for (what, change) in differs {
            let mut i = input();
            change(&mut i);
            assert!(!gives_what_it_has(&i, &stack), "{what}");
        }
        let mut failed = stack.clone();
        failed.status = StackStatus::UpdateFailed;
        assert!(!gives_what_it_has(&input(), &failed), "UPDATE_FAILED");
        let mut reads = stack.clone();
        reads.template_body = format!("{BODY}Outputs: {{R: {{Value: !Ref AWS::Region}}}}\n");
        let mut i = input();
        i.template_body = Some(reads.template_body.clone());
        assert!(!gives_what_it_has(&i, &reads), "AWS::Region");
    }

    #[test]
    fn only_settled_stacks_are_what_their_template_says() {
        assert!(settled(StackStatus::UpdateRollbackComplete));
        assert!(settled(StackStatus::CreateComplete));
        assert!(!settled(StackStatus::UpdateFailed));
        assert!(!settled(StackStatus::UpdateInProgress));
        assert!(!settled(StackStatus::CreateFailed));
    }
}
