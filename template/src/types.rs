//! The resource types and TemplateURL schemes the template language itself
//! names: HOT's lowering writes them, and the engine's models (wait
//! conditions, nested stacks, groups) serve them. They live here, with the
//! language, so the language needs nothing from the layers above it.

/// A wait condition's handle (the URL signals are sent to).
pub const WAIT_CONDITION_HANDLE: &str = "AWS::CloudFormation::WaitConditionHandle";
/// A wait condition: waits for its handle's signals.
pub const WAIT_CONDITION: &str = "AWS::CloudFormation::WaitCondition";
/// A nested stack; also the type CloudFormation records the stack's own
/// events under.
pub const STACK_TYPE: &str = "AWS::CloudFormation::Stack";
/// Cairn's group types (HOT's scaling and resource groups lower to them).
pub const LAUNCH_CONFIGURATION: &str = "Cairn::Group::LaunchConfiguration";
pub const INSTANCE_GROUP: &str = "Cairn::Group::InstanceGroup";
pub const AUTO_SCALING_GROUP: &str = "Cairn::Group::AutoScalingGroup";
/// The TemplateURL scheme of a template handed in with the stack's
/// template context (a HOT provider template).
pub const CONTEXT_FILE: &str = "cairn-file:";
/// The TemplateURL scheme of a template given inline (HOT's
/// `OS::Heat::Stack` `template`): the text follows the scheme.
pub const INLINE: &str = "cairn-inline:";

/// The attribute of a nested stack resource holding its child's resources
/// (HOT lowers `get_attr: [r, resource.<name>.<attr>]` of a template
/// resource onto it).
pub const NESTED_RESOURCES_ATTRIBUTE: &str = "Resources";

/// The attribute that stands for all of a resource's attributes, as one
/// map (HOT's `get_attr: [resource]`, lowered to `Fn::GetAtt`).
pub const ALL_ATTRIBUTES: &str = "Cairn::AllAttributes";

/// The attribute of a nested stack resource whose HOT child reported
/// outputs with an `output_error`: output name → error. `Fn::GetAtt` of
/// such an output fails with Heat's text (`Error in <resource> output
/// <name>: <error>`) instead of "does not provide attribute".
pub const NESTED_OUTPUT_ERRORS_ATTRIBUTE: &str = "OutputErrors";

/// `AWS::CloudFormation::CustomResource` or `Custom::<Name>`.
pub fn is_custom_resource(type_name: &str) -> bool {
    type_name == "AWS::CloudFormation::CustomResource" || type_name.starts_with("Custom::")
}
