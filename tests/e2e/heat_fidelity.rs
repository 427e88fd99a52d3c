//! HOT stacks as Heat runs them, where Heat differs from CloudFormation.
//! Each test names the Heat source whose behaviour it asserts (github
//! `openstack/heat`).

use crate::support::Scratch;

/// The stack's id as `cairn describe` reports it.
fn stack_id(s: &Scratch, stack: &str) -> String {
    s.cairn(&["describe", stack, "--output", "json"]).json()["Stacks"][0]["StackId"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The physical id of `logical` (a group member too) in `stack`.
pub(crate) fn physical_id(s: &Scratch, stack: &str, logical: &str) -> String {
    s.cairn(&["resources", stack, "--output", "json"]).json()["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["LogicalResourceId"] == logical)
        .and_then(|r| r["PhysicalResourceId"].as_str().map(str::to_string))
        .unwrap_or_default()
}

const PSEUDO: &str = "heat_template_version: 2016-10-14
resources:
  r:
    type: Cairn::Test::Resource
    properties:
      Value:
        list_join: [',', [{get_param: OS::stack_name}, {get_param: OS::region}]]
outputs:
  name:
    value: {get_param: OS::stack_name}
  id:
    value: {get_param: OS::stack_id}
  project:
    value: {get_param: OS::project_id}
  region:
    value: {get_param: OS::region}
  in_resource:
    value: {get_attr: [r, Value]}
";

/// heat/engine/hot/parameters.py, `PSEUDO_PARAMETERS`: `OS::stack_id`
/// (the stack's UUID), `OS::stack_name`, `OS::project_id`, `OS::region`
/// are parameters of every HOT template without being declared.
#[test]
fn heats_pseudo_parameters_are_the_stacks_name_id_project_and_region() {
    let s = Scratch::new();
    let t = s.write("pseudo.yaml", PSEUDO);
    let run = s.cairn(&["deploy", "pseudo", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let id = stack_id(&s, "pseudo");
    let uuid = id.rsplit('/').next().unwrap_or_default();
    assert_eq!(uuid.len(), 36, "{id}");
    assert_eq!(
        s.cairn(&["outputs", "pseudo"]).stdout(),
        format!(
            "name = pseudo\nid = {uuid}\nproject = 123456789012\nregion = us-east-1\nin_resource = pseudo,us-east-1\n"
        )
    );
}

const EMPTY: &str = "heat_template_version: 2018-08-31
parameters:
  greeting:
    type: string
    default: hello
outputs:
  said:
    value: {get_param: greeting}
";

/// heat/engine/template.py, `create_empty_template`: a HOT template with
/// parameters and outputs but no resources is a stack Heat creates and
/// deletes (CloudFormation refuses it: "At least one Resources member must
/// be defined.").
#[test]
fn a_hot_template_without_resources_is_a_stack() {
    let s = Scratch::new();
    let t = s.write("empty.yaml", EMPTY);
    let t = t.to_str().unwrap_or_default();
    let run = s.cairn(&["deploy", "empty", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().ends_with("stack empty is CREATE_COMPLETE\n"),
        "{}",
        run.stdout()
    );
    assert_eq!(s.cairn(&["outputs", "empty"]).stdout(), "said = hello\n");
    let gone = s.cairn(&["delete", "empty"]);
    assert_eq!(gone.code(), 0, "{}", gone.stderr());
    // CloudFormation's rule is unchanged.
    let cfn = s.write(
        "empty.json",
        r#"{"Parameters": {"P": {"Type": "String"}}, "Resources": {}}"#,
    );
    let refused = s.cairn(&["deploy", "cfn", cfn.to_str().unwrap_or_default()]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused
            .stderr()
            .contains("Template format error: At least one Resources member must be defined."),
        "{}",
        refused.stderr()
    );
}

const NAMED: &str = "heat_template_version: 2018-08-31
resources:
  r:
    type: OS::Heat::None
";

/// Heat's stack name rule (`[a-zA-Z][a-zA-Z0-9_.-]{0,254}`, its "Invalid
/// stack name" check) applies to HOT stacks: `cu_nochange` and `v1.2` are
/// names Heat's functional tests use; CloudFormation's rule still applies
/// to CloudFormation templates.
#[test]
fn a_hot_stack_takes_the_names_heat_allows() {
    let s = Scratch::new();
    let t = s.write("named.yaml", NAMED);
    let t = t.to_str().unwrap_or_default();
    for name in ["cu_nochange", "v1.2"] {
        let run = s.cairn(&["deploy", name, t]);
        assert_eq!(run.code(), 0, "{name}: {}", run.stderr());
        assert!(
            run.stdout()
                .ends_with(&format!("stack {name} is CREATE_COMPLETE\n")),
            "{}",
            run.stdout()
        );
    }
    let refused = s.cairn(&["deploy", "1st", t]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr().contains(
            "Invalid stack name 1st must contain only alphanumeric or \"_-.\" characters, must start with alpha and must be 255 characters or less."
        ),
        "{}",
        refused.stderr()
    );
    let cfn = s.write(
        "named.json",
        r#"{"Resources": {"R": {"Type": "Cairn::Test::Resource", "Properties": {"Value": "x"}}}}"#,
    );
    let refused = s.cairn(&["deploy", "cu_nochange2", cfn.to_str().unwrap_or_default()]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr().contains(
            "Value 'cu_nochange2' at 'stackName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z][-a-zA-Z0-9]* and have length less than or equal to 128"
        ),
        "{}",
        refused.stderr()
    );
}

const SELECT: &str = "heat_template_version: 2013-05-23
parameters:
  sizes:
    type: json
    default: {small: 1, large: 4}
resources:
  r:
    type: OS::Heat::None
outputs:
  by_key:
    value: {Fn::Select: [large, {get_param: sizes}]}
  missing_key:
    value: {Fn::Select: [huge, {get_param: sizes}]}
  by_position:
    value: {Fn::Select: ['1', [a, b, c]]}
  past_the_end:
    value: {Fn::Select: [5, [a, b]]}
";

/// heat/engine/cfn/functions.py, `Select`: in HOT 2013-05-23 `Fn::Select`
/// takes a map's key as well as a list's position, and a missing key or an
/// index past the end gives "" (CloudFormation's Fn::Select refuses both).
#[test]
fn hot_2013_select_takes_a_maps_key() {
    let s = Scratch::new();
    let t = s.write("select.yaml", SELECT);
    let run = s.cairn(&["deploy", "select", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "select"]).stdout(),
        "by_key = 4\nmissing_key = \nby_position = b\npast_the_end = \n"
    );
}

const PARENT: &str = "heat_template_version: 2018-08-31
resources:
  child:
    type: OS::Heat::Stack
    properties:
      template: {get_file: child.yaml}
      parameters:
        word: hi
outputs:
  echoed:
    value: {get_attr: [child, outputs, echoed]}
";

const CHILD: &str = "heat_template_version: 2018-08-31
parameters:
  word:
    type: string
resources:
  r:
    type: OS::Heat::None
outputs:
  echoed:
    value: {get_param: word}
";

/// heat/engine/resources/openstack/heat/remote_stack.py (`OS::Heat::Stack`):
/// its `template` property is resolved like any other, so
/// `template: {get_file: child.yaml}` is the file's text.
#[test]
fn an_os_heat_stacks_template_may_be_a_get_file() {
    let s = Scratch::new();
    s.write("child.yaml", CHILD);
    let t = s.write("parent.yaml", PARENT);
    let run = s.cairn(&["deploy", "parent", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(s.cairn(&["outputs", "parent"]).stdout(), "echoed = hi\n");
}

const USES_FILE_TYPE: &str = "heat_template_version: 2018-08-31
resources:
  web:
    type: server.yaml
    properties:
      flavor: m1.small
outputs:
  flavor:
    value: {get_attr: [web, chosen]}
";

const SERVER: &str = "heat_template_version: 2018-08-31
parameters:
  flavor:
    type: string
resources:
  disk:
    type: volume.template
    properties:
      size: 10
  box:
    type: Cairn::Test::Resource
    properties:
      Value: {get_param: flavor}
outputs:
  chosen:
    # The volume's size output is a number (Heat's get_param of a number
    # parameter), which list_join refuses: str_replace takes it.
    value:
      str_replace:
        template: $flavor+$size
        params: {$flavor: {get_attr: [box, Value]}, $size: {get_attr: [disk, size]}}
";

const VOLUME: &str = "heat_template_version: 2018-08-31
parameters:
  size:
    type: number
resources:
  r:
    type: OS::Heat::None
outputs:
  size:
    value: {get_param: size}
";

/// heat/engine/environment.py (a type ending in `.yaml` or `.template` is
/// a template resource) and heat/engine/resources/template_resource.py:
/// `type: server.yaml` is a nested stack of that file (read beside the
/// template; its own file types beside it), its properties the file's
/// parameters, `get_attr` its outputs.
#[test]
fn a_template_file_is_a_resource_type() {
    let s = Scratch::new();
    s.write("server.yaml", SERVER);
    s.write("volume.template", VOLUME);
    let t = s.write("main.yaml", USES_FILE_TYPE);
    let run = s.cairn(&["deploy", "files", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "files"]).stdout(),
        "flavor = m1.small+10\n"
    );
    let gone = s.cairn(&["delete", "files"]);
    assert_eq!(gone.code(), 0, "{}", gone.stderr());
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
    // A file that is not there is named with the template that needs it.
    let missing = s.write(
        "lost.yaml",
        "heat_template_version: 2018-08-31\nresources:\n  x:\n    type: nowhere.yaml\n",
    );
    let refused = s.cairn(&["deploy", "lost", missing.to_str().unwrap_or_default()]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused
            .stderr()
            .contains("lost.yaml: type nowhere.yaml: cannot read "),
        "{}",
        refused.stderr()
    );
}

const WRAPPING_ENV: &str = "resource_registry:
  Cairn::Test::Resource: wrapped.yaml
";

const WRAPPED: &str = "heat_template_version: 2018-08-31
parameters:
  Value:
    type: string
resources:
  inner:
    type: Cairn::Test::Resource
    properties:
      Value: {list_join: ['-', [wrapped, {get_param: Value}]]}
outputs:
  Value:
    value: {get_attr: [inner, Value]}
";

const WRAPS: &str = "heat_template_version: 2018-08-31
resources:
  thing:
    type: Cairn::Test::Resource
    properties:
      Value: outer
outputs:
  value:
    value: {get_attr: [thing, Value]}
";

/// heat/engine/resources/template_resource.py (the registry lookup that
/// ignores the resource's own template): a type mapped to a template that
/// itself uses the type gets the real type inside that template, instead
/// of nesting itself until the depth limit.
#[test]
fn a_template_that_uses_the_type_it_stands_for_gets_the_real_type() {
    let s = Scratch::new();
    s.write("wrapped.yaml", WRAPPED);
    let env = s.write("env.yaml", WRAPPING_ENV);
    let t = s.write("wraps.yaml", WRAPS);
    let run = s.cairn(&[
        "deploy",
        "wraps",
        t.to_str().unwrap_or_default(),
        "-e",
        env.to_str().unwrap_or_default(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "wraps"]).stdout(),
        "value = wrapped-outer\n"
    );
    // One real resource: the wrapper is a nested stack, its inside the type.
    assert_eq!(s.resource_files().len(), 1, "{:?}", s.resource_files());
    let gone = s.cairn(&["delete", "wraps"]);
    assert_eq!(gone.code(), 0, "{}", gone.stderr());
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
}

const ALL_OUTPUTS: &str = "heat_template_version: 2018-08-31
resources:
  inner:
    type: OS::Heat::Stack
    properties:
      template:
        heat_template_version: 2018-08-31
        resources:
          r:
            type: OS::Heat::None
        outputs:
          zone:
            value: az-1
          size:
            value: large
outputs:
  all:
    value: {get_attr: [inner, outputs]}
  one:
    value: {get_attr: [inner, outputs, zone]}
";

/// heat/engine/resources/openstack/heat/remote_stack.py (`OS::Heat::Stack`'s
/// `outputs` attribute, "a dict of key-value pairs output from the stack"):
/// `get_attr: [stack, outputs]` is the map of all of them.
#[test]
fn an_os_heat_stacks_outputs_attribute_is_the_map_of_its_outputs() {
    let s = Scratch::new();
    let t = s.write("all.yaml", ALL_OUTPUTS);
    let run = s.cairn(&["deploy", "all", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "all"]).stdout(),
        "all = {\"zone\":\"az-1\",\"size\":\"large\"}\none = az-1\n"
    );
}

const PYTHON_PATTERN: &str = r"heat_template_version: 2018-08-31
parameters:
  host:
    type: string
    constraints:
      - allowed_pattern: '[A-Za-z0-9]+(?=[\.\-][a-zA-Z0-9])*\.[a-zA-z09]+'
resources:
  r:
    type: OS::Heat::None
outputs:
  host:
    value: {get_param: host}
";

/// heat/engine/constraints.py, `AllowedPattern` (`re.compile`, and the
/// match must end at the value's end): a HOT `allowed_pattern` is Python's
/// `re`, so a quantified look-ahead Java and Rust refuse is a pattern.
#[test]
fn a_hot_allowed_pattern_is_pythons() {
    let s = Scratch::new();
    let t = s.write("pattern.yaml", PYTHON_PATTERN);
    let t = t.to_str().unwrap_or_default();
    let run = s.cairn(&["deploy", "pattern", t, "-p", "host=web.example"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "pattern"]).stdout(),
        "host = web.example\n"
    );
    let refused = s.cairn(&["deploy", "bare", t, "-p", "host=web"]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr().contains(
            r#"Parameter 'host' is invalid: "web" does not match pattern "[A-Za-z0-9]+(?=[\.\-][a-zA-Z0-9])*\.[a-zA-z09]+""#
        ),
        "{}",
        refused.stderr()
    );
}

const READS_INSIDE: &str = "heat_template_version: 2018-08-31
resources:
  web:
    type: box.yaml
    properties:
      word: inside
outputs:
  value:
    value: {get_attr: [web, resource.box.Value]}
  same_value:
    value: {get_attr: [web, resource.box, Value]}
  id:
    value: {get_attr: [web, resource.box]}
";

const BOX: &str = "heat_template_version: 2018-08-31
parameters:
  word:
    type: string
resources:
  box:
    type: Cairn::Test::Resource
    properties:
      Value: {get_param: word}
";

/// heat/engine/resources/template_resource.py (`get_attribute`: a key
/// `resource.<name>…` reads the nested stack's resource): `get_attr: [r,
/// resource.box.Value]` is an attribute of `box` inside the template
/// resource's stack, `[r, resource.box]` its id.
#[test]
fn a_template_resources_inner_resources_attributes_are_readable() {
    let s = Scratch::new();
    s.write("box.yaml", BOX);
    let t = s.write("reads.yaml", READS_INSIDE);
    let run = s.cairn(&["deploy", "reads", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let files = s.resource_files();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        s.cairn(&["outputs", "reads"]).stdout(),
        format!(
            "value = inside\nsame_value = inside\nid = {}\n",
            files[0].trim_end_matches(".json")
        )
    );
}

const OUTPUT_ERRORS: &str = "heat_template_version: 2016-10-14
parameters:
  n:
    type: number
    default: 1
resources:
  servers:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: n}
      resource_def:
        type: OS::Heat::None
outputs:
  first:
    value: {get_attr: [servers, resource.0]}
  second:
    value: {get_attr: [servers, resource.1]}
  undeclared:
    description: not a parameter of this template
    value: {get_param: flavor}
";

/// heat/engine/api.py, `format_stack_output`: an output whose value
/// cannot be resolved does not fail the stack; it is reported with an
/// `output_error` (and no value) while the others keep theirs. `get_param`
/// of an undeclared name in an output is such an error
/// (heat/engine/hot/functions.py, GetParam: UserParameterMissing), not a
/// validation failure. A CloudFormation template's unresolvable output
/// still fails the operation.
#[test]
fn a_hot_output_that_cannot_be_resolved_reports_an_output_error() {
    let s = Scratch::new();
    let t = s.write("outputs.yaml", OUTPUT_ERRORS);
    let t = t.to_str().unwrap_or_default();
    let run = s.cairn(&["deploy", "outs", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().ends_with("stack outs is CREATE_COMPLETE\n"),
        "{}",
        run.stdout()
    );
    let first = physical_id(&s, "outs", "servers-0");
    assert!(!first.is_empty());
    assert_eq!(
        s.cairn(&["outputs", "outs"]).stdout(),
        format!(
            "first = {first}\n\
             second has no value: output_error: Member '1' not found in group resource 'servers'.\n\
             undeclared has no value: output_error: The Parameter (flavor) was not provided.\n"
        )
    );
    let json = s.cairn(&["outputs", "outs", "--output", "json"]).json();
    assert_eq!(
        json["Outputs"][1],
        serde_json::json!({
            "OutputKey": "second",
            "OutputValue": null,
            "OutputError": "Member '1' not found in group resource 'servers'."
        })
    );
    assert_eq!(
        json["Outputs"][2]["Description"],
        "not a parameter of this template"
    );
    // Growing the group gives the output its value.
    let grown = s.cairn(&["deploy", "outs", t, "-p", "n=2"]);
    assert_eq!(grown.code(), 0, "{}", grown.stderr());
    let outputs = s.cairn(&["outputs", "outs"]).stdout();
    assert!(
        outputs.starts_with(&format!("first = {first}\nsecond = ")),
        "{outputs}"
    );
    assert!(!outputs.contains("Member '1'"), "{outputs}");

    let cfn = s.write(
        "cfn.yaml",
        "Resources:\n  R:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value: a\n\
         Outputs:\n  Bad:\n    Value: !GetAtt R.NoSuchAttribute\n",
    );
    let failed = s.cairn(&["deploy", "cfn", cfn.to_str().unwrap_or_default()]);
    assert_eq!(failed.code(), 1, "{}", failed.stdout());
}

const FACADE_PARENT: &str = "heat_template_version: 2018-08-31
resources:
  web:
    type: facade.yaml
    metadata:
      role: {get_param: OS::stack_name}
    deletion_policy: retain
    update_policy:
      batch: 2
  plain:
    type: facade.yaml
outputs:
  metadata:
    value: {get_attr: [web, metadata]}
  deletion_policy:
    value: {get_attr: [web, deletion_policy]}
  update_policy:
    value: {get_attr: [web, update_policy]}
  stored:
    value: {get_attr: [web, resource.box.Value]}
  defaults:
    value: {list_join: [' ', [{get_attr: [plain, metadata]}, {get_attr: [plain, deletion_policy]}, {get_attr: [plain, update_policy]}]]}
";

const FACADE: &str = "heat_template_version: 2018-08-31
resources:
  box:
    type: Cairn::Test::Resource
    properties:
      Value: {resource_facade: deletion_policy}
outputs:
  metadata:
    value: {resource_facade: metadata}
  deletion_policy:
    value: {resource_facade: deletion_policy}
  update_policy:
    value: {resource_facade: update_policy}
";

/// heat/engine/hot/functions.py, ResourceFacade: inside a provider
/// template, `resource_facade` reads the `metadata` (resolved),
/// `deletion_policy` and `update_policy` of the resource the template
/// implements; a resource that sets none reads `{}`, `Delete` and `{}`.
#[test]
fn a_provider_template_reads_its_resources_facade() {
    let s = Scratch::new();
    s.write("facade.yaml", FACADE);
    let t = s.write("parent.yaml", FACADE_PARENT);
    let run = s.cairn(&["deploy", "facade", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let outputs = s.cairn(&["outputs", "facade"]).stdout();
    let lines: Vec<&str> = outputs.lines().collect();
    assert_eq!(
        lines[..3],
        [
            r#"metadata = {"role":"facade"}"#,
            "deletion_policy = Retain",
            r#"update_policy = {"batch":2}"#,
        ],
        "{outputs}"
    );
    assert_eq!(lines[3], "stored = Retain", "{outputs}");
    assert_eq!(lines[4], "defaults = {} Delete {}", "{outputs}");
    let bad = s.write(
        "bad.yaml",
        "heat_template_version: 2018-08-31\nresources:\n  r:\n    type: OS::Heat::Value\n    properties:\n      value: {resource_facade: tags}\n",
    );
    let refused = s.cairn(&["validate", bad.to_str().unwrap_or_default()]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr().contains(
            r#"Incorrect arguments to "resource_facade" should be one of: metadata, deletion_policy, update_policy"#
        ),
        "{}",
        refused.stderr()
    );
}

/// heat/engine/resources/openstack/heat/instance_group.py
/// (`_resolve_attribute`, Heat's extension `InstanceList`): the members'
/// `PublicIp` attributes, comma-delimited, `0.0.0.0` for a member without
/// one.
#[test]
fn an_instance_groups_instance_list_is_its_members_public_ips() {
    use crate::update::cairn;
    let (s, _handler) = crate::webhooks::with_handler();
    let arn = crate::webhooks::ARN;
    let t = s.write(
        "servers.yaml",
        &format!(
            "heat_template_version: 2015-04-30
parameters:
  size:
    type: number
    default: 2
resources:
  config:
    type: AWS::AutoScaling::LaunchConfiguration
    properties:
      MemberType: Custom::Server
      IndexVariable: '%i%'
      MemberProperties:
        ServiceToken: {arn}
        Data:
          PublicIp: 10.0.0.%i%
  servers:
    type: OS::Heat::InstanceGroup
    properties:
      LaunchConfigurationName: {{get_resource: config}}
      Size: {{get_param: size}}
  plain_config:
    type: AWS::AutoScaling::LaunchConfiguration
    properties:
      MemberType: Cairn::Test::Resource
      MemberProperties:
        Value: no address
  plain:
    type: OS::Heat::InstanceGroup
    properties:
      LaunchConfigurationName: {{get_resource: plain_config}}
      Size: 1
outputs:
  servers:
    value: {{get_attr: [servers, InstanceList]}}
  plain:
    value: {{get_attr: [plain, InstanceList]}}
"
        ),
    );
    let t = t.to_str().unwrap_or_default();
    let run = cairn(&s, &["deploy", "ig", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        cairn(&s, &["outputs", "ig"]).stdout(),
        "servers = 10.0.0.0,10.0.0.1\nplain = 0.0.0.0\n"
    );
    let grown = cairn(&s, &["deploy", "ig", t, "-p", "size=3"]);
    assert_eq!(grown.code(), 0, "{}", grown.stderr());
    assert_eq!(
        cairn(&s, &["outputs", "ig"]).stdout(),
        "servers = 10.0.0.0,10.0.0.1,10.0.0.2\nplain = 0.0.0.0\n"
    );
}

const REMOVAL: &str = "heat_template_version: 2016-10-14
parameters:
  count:
    type: number
    default: 3
  removal:
    type: comma_delimited_list
    default: ''
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      removal_policies: [{resource_list: {get_param: removal}}]
      resource_def:
        type: OS::Heat::None
outputs:
  removed:
    value: {get_attr: [group, removed_rsrc_list]}
  refs_map:
    value: {get_attr: [group, refs_map]}
";

/// The group's members' names, in order.
fn member_names(s: &Scratch, stack: &str) -> Vec<String> {
    s.cairn(&["resources", stack, "--output", "json"]).json()["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["GroupResourceId"] == "group")
        .filter_map(|r| r["LogicalResourceId"].as_str().map(str::to_string))
        .collect()
}

/// heat/engine/resources/openstack/heat/resource_group.py (the
/// removal_policies property: "destructive on update when specified, even
/// if the count is not being reduced, and once a resource is removed, its
/// name is never reused"; `_update_name_blacklist`, `_resource_names`,
/// `removed_rsrc_list`): the named member is replaced by a new index while
/// the count stays; a later growth skips it; at create the named index is
/// skipped from the start.
#[test]
fn removal_policies_remove_members_even_without_a_shrink() {
    let s = Scratch::new();
    let t = s.write("removal.yaml", REMOVAL);
    let t = t.to_str().unwrap_or_default();
    assert_eq!(s.cairn(&["deploy", "rm", t]).code(), 0);
    assert_eq!(member_names(&s, "rm"), ["group-0", "group-1", "group-2"]);
    let id = |name: &str| physical_id(&s, "rm", name);
    let (zero, two) = (id("group-0"), id("group-2"));
    let run = s.cairn(&["deploy", "rm", t, "-p", "removal=1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(member_names(&s, "rm"), ["group-0", "group-2", "group-3"]);
    // The members not named are kept, not replaced.
    assert_eq!((id("group-0"), id("group-2")), (zero, two));
    let outputs = s.cairn(&["outputs", "rm", "--output", "json"]).json();
    assert_eq!(outputs["Outputs"][0]["OutputValue"], r#"["1"]"#);
    let run = s.cairn(&["deploy", "rm", t, "-p", "removal=1", "-p", "count=4"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        member_names(&s, "rm"),
        ["group-0", "group-2", "group-3", "group-4"]
    );
    // Created with a removal policy: index 0 is never used.
    let run = s.cairn(&["deploy", "fresh", t, "-p", "removal=0", "-p", "count=2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(member_names(&s, "fresh"), ["group-1", "group-2"]);
}

/// `r` of the type and properties given (YAML under `r:`).
fn typed(r: &str) -> String {
    format!("heat_template_version: 2016-10-14\nresources:\n  r:\n{r}")
}

/// (type, physical id, status) of `r`.
fn resource_r(s: &Scratch, stack: &str) -> (String, String, String) {
    let all = s.cairn(&["resources", stack, "--output", "json"]).json();
    let r = &all["StackResources"][0];
    let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
    (
        text("ResourceType"),
        text("PhysicalResourceId"),
        text("ResourceStatus"),
    )
}

/// heat/engine/update.py (`_process_new_resource_update`: a resource whose
/// class differs is replaced, not refused): a changed type creates a
/// resource of the new type, and the old one is deleted by its own type's
/// provider; a failed replacement rolls back to the old type and id.
#[test]
fn a_changed_type_replaces_the_resource() {
    let s = Scratch::new();
    let value = typed("    type: OS::Heat::Value\n    properties:\n      value: one\n");
    let t = s.write("t.yaml", &value);
    let t = t.to_str().unwrap_or_default();
    assert_eq!(s.cairn(&["deploy", "ty", t]).code(), 0);
    let (ty, first, _) = resource_r(&s, "ty");
    assert_eq!(ty, "OS::Heat::Value");

    s.write(
        "t.yaml",
        &typed("    type: Cairn::Test::Resource\n    properties:\n      Value: two\n"),
    );
    // The preview says so, with the new type.
    let plan = s.cairn(&["plan", "ty", t, "--output", "json"]).json();
    let change = &plan["Changes"][0]["ResourceChange"];
    assert_eq!(
        (&change["ResourceType"], &change["Replacement"]),
        (
            &serde_json::json!("Cairn::Test::Resource"),
            &serde_json::json!("True")
        )
    );
    assert_eq!(
        change["Details"][0]["Target"]["RequiresRecreation"],
        "Always"
    );
    let run = s.cairn(&["deploy", "ty", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let (ty, second, status) = resource_r(&s, "ty");
    assert_eq!(
        (ty.as_str(), status.as_str()),
        ("Cairn::Test::Resource", "UPDATE_COMPLETE")
    );
    assert_ne!(second, first);
    assert_eq!(s.resource_files(), [format!("{second}.json")]);

    s.write(
        "t.yaml",
        &typed("    type: OS::Heat::Value\n    properties:\n      value: three\n"),
    );
    let run = s.cairn(&["deploy", "ty", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let (ty, third, _) = resource_r(&s, "ty");
    assert_eq!(ty, "OS::Heat::Value");
    assert_ne!(third, second);
    // The test resource's own provider deleted it.
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());

    s.write(
        "t.yaml",
        &typed("    type: Cairn::Test::Resource\n    properties:\n      Value: four\n      Fail: create\n"),
    );
    let run = s.cairn(&["deploy", "ty", t]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let d = s.cairn(&["describe", "ty", "--output", "json"]).json();
    assert_eq!(d["Stacks"][0]["StackStatus"], "UPDATE_ROLLBACK_COMPLETE");
    let (ty, back, status) = resource_r(&s, "ty");
    assert_eq!(
        (ty.as_str(), back.as_str(), status.as_str()),
        ("OS::Heat::Value", third.as_str(), "UPDATE_COMPLETE")
    );
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
}

const MEMBER: &str = "heat_template_version: 2018-08-31
parameters:
  name:
    type: string
  fail:
    type: boolean
    default: false
conditions:
  failing: {get_param: fail}
resources:
  box:
    type: Cairn::Test::Resource
    properties:
      Value: {get_param: name}
      Fail: {if: [failing, create, []]}
outputs:
  label:
    value: {list_join: ['/', [{get_param: name}, {get_attr: [box, Value]}]]}
";

const TEMPLATE_GROUPS: &str = "heat_template_version: 2018-08-31
parameters:
  count:
    type: number
    default: 2
  word:
    type: string
    default: a
  fail:
    type: boolean
    default: false
resources:
  servers:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      resource_def:
        type: member.yaml
        properties:
          name: server-%index%
  pool:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      desired_capacity: 2
      resource:
        type: member.yaml
        properties:
          name: {get_param: word}
          fail: {get_param: fail}
outputs:
  labels:
    value: {get_attr: [servers, label]}
  by_index:
    value: {get_attr: [servers, attributes, label]}
  second:
    value: {get_attr: [servers, resource.1.label]}
  pool:
    value: {get_attr: [pool, outputs_list, label]}
";

/// heat/engine/resources/openstack/heat/resource_group.py and
/// autoscaling_group.py (members are resources of any type, a provider
/// template included: each member is then a nested stack of it, its
/// outputs the member's attributes): a ResourceGroup and an
/// AutoScalingGroup of `member.yaml` create, grow, roll out a changed
/// member definition, roll back a member that fails, and delete every
/// child stack.
#[test]
fn group_members_may_be_provider_templates() {
    let s = Scratch::new();
    s.write("member.yaml", MEMBER);
    let t = s.write("groups.yaml", TEMPLATE_GROUPS);
    let t = t.to_str().unwrap_or_default();
    let run = s.cairn(&["deploy", "tg", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "tg"]).stdout(),
        "labels = [\"server-0/server-0\",\"server-1/server-1\"]\n\
         by_index = {\"0\":\"server-0/server-0\",\"1\":\"server-1/server-1\"}\n\
         second = server-1/server-1\n\
         pool = [\"a/a\",\"a/a\"]\n"
    );
    let members = |s: &Scratch| group_members(s, "tg");
    // Shown with the type as written, as Heat shows them.
    let stack = |n: &str| (n.to_string(), "member.yaml".to_string());
    assert_eq!(
        members(&s),
        [
            stack("pool-0"),
            stack("pool-1"),
            stack("servers-0"),
            stack("servers-1")
        ]
    );
    // One backing file per member's box.
    assert_eq!(s.resource_files().len(), 4);

    let run = s.cairn(&["deploy", "tg", t, "-p", "count=3", "-p", "word=b"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout()
            .contains("Rolling update batch 1 of 2: creating pool-2, then deleting pool-0"),
        "{}",
        run.stdout()
    );
    let outputs = s.cairn(&["outputs", "tg"]).stdout();
    assert!(
        outputs.starts_with(
            "labels = [\"server-0/server-0\",\"server-1/server-1\",\"server-2/server-2\"]\n"
        ),
        "{outputs}"
    );
    assert!(outputs.ends_with("pool = [\"b/b\",\"b/b\"]\n"), "{outputs}");
    assert_eq!(s.resource_files().len(), 5);

    // A member whose template fails: the rollout is undone, the update
    // rolls back, no child stack of it is left.
    let run = s.cairn(&[
        "deploy",
        "tg",
        t,
        "-p",
        "count=3",
        "-p",
        "word=c",
        "-p",
        "fail=true",
    ]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let d = s.cairn(&["describe", "tg", "--output", "json"]).json();
    assert_eq!(d["Stacks"][0]["StackStatus"], "UPDATE_ROLLBACK_COMPLETE");
    assert!(s
        .cairn(&["outputs", "tg"])
        .stdout()
        .ends_with("pool = [\"b/b\",\"b/b\"]\n"));
    assert_eq!(s.resource_files().len(), 5);

    let gone = s.cairn(&["delete", "tg"]);
    assert_eq!(gone.code(), 0, "{}", gone.stderr());
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
    let stacks = s.cairn(&["list", "--output", "json"]).json();
    let live: Vec<&serde_json::Value> = stacks["StackSummaries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["StackStatus"] != "DELETE_COMPLETE")
        .collect();
    assert!(live.is_empty(), "{live:?}");
}

const ALIASED: &str = "heat_template_version: 2016-10-14
resources:
  secret:
    type: My::Secret
    properties: {length: 6}
  inner:
    type: wrapper.yaml
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 1
      resource_def: {type: OS::Heat::RandomString}
  handle:
    type: OS::Heat::WaitConditionHandle
";

const ALIAS_ENV: &str = "resource_registry:
  My::Secret: OS::Heat::RandomString
";

/// (logical id, type) pairs.
type Typed = Vec<(String, String)>;

/// The (logical id, type) pairs, sorted and distinct, of `key`'s list in
/// a read command's JSON (the stack's own entries left out).
fn typed_pairs(list: &serde_json::Value, key: &str, stack: &str) -> Typed {
    let mut out: Typed = list[key]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (text("LogicalResourceId"), text("ResourceType"))
        })
        .filter(|(l, _)| l != stack)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// heat/engine/resource.py (`Resource.type()` is the type the template
/// names) and heat/engine/environment.py (the registry only chooses the
/// class): a resource is listed with the type as written, whatever serves
/// it: an environment's alias, a template file, Heat's groups and wait
/// condition handles. Its events name that type too.
#[test]
fn aliased_types_are_shown_as_written() {
    let s = Scratch::new();
    s.write(
        "wrapper.yaml",
        "heat_template_version: 2016-10-14\nresources:\n  leaf:\n    type: OS::Heat::RandomString\n",
    );
    s.write("env.yaml", ALIAS_ENV);
    let t = s.write("aliased.yaml", ALIASED);
    let run = s.cairn(&[
        "deploy",
        "al",
        t.to_str().unwrap_or_default(),
        "-e",
        "env.yaml",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let resources = s.cairn(&["resources", "al", "--output", "json"]).json();
    let resources = typed_pairs(&resources, "StackResources", "al");
    let expected: Typed = [
        ("group", "OS::Heat::ResourceGroup"),
        ("group-0", "OS::Heat::RandomString"),
        ("group-launch", "Cairn::Group::LaunchConfiguration"),
        ("handle", "OS::Heat::WaitConditionHandle"),
        ("inner", "wrapper.yaml"),
        ("secret", "My::Secret"),
    ]
    .iter()
    .map(|(l, t)| (l.to_string(), t.to_string()))
    .collect();
    assert_eq!(resources, expected);
    // Every event of each names the same type.
    let events = s.cairn(&["events", "al", "--output", "json"]).json();
    assert_eq!(typed_pairs(&events, "StackEvents", "al"), expected);
}

const TYPED_OUTPUTS: &str = "heat_template_version: 2018-08-31
resources:
  inner:
    type: OS::Heat::Stack
    properties:
      template:
        heat_template_version: 2018-08-31
        conditions:
          never: false
        outputs:
          n: {value: 42}
          l: {value: [1, two]}
          m: {value: {a: 1}}
          s: {value: text}
          off: {value: x, condition: never}
  piece:
    type: piece.yaml
  probe:
    type: OS::Heat::Value
    properties:
      type: json
      value:
        all: {get_attr: [inner, outputs]}
        from_template: {get_attr: [piece, sizes]}
outputs:
  all: {value: {get_attr: [inner, outputs]}}
  n: {value: {get_attr: [inner, outputs, n]}}
  l0: {value: {get_attr: [inner, outputs, l, 0]}}
  second_size: {value: {get_attr: [piece, sizes, 1]}}
  probe: {value: {get_attr: [probe, value]}}
";

/// heat/engine/resources/openstack/heat/remote_stack.py and
/// stack_resource.py: `get_attr: [stack, outputs]` is the map of the
/// nested stack's outputs with their types (numbers, lists, maps; None
/// for one whose condition is false), as `[stack, outputs, name, path…]`
/// reads one; template_resource.py: a provider template's output read as
/// an attribute keeps its type too.
#[test]
fn nested_stack_outputs_keep_their_types() {
    let s = Scratch::new();
    s.write(
        "piece.yaml",
        "heat_template_version: 2018-08-31\noutputs:\n  sizes: {value: [10, 20]}\n",
    );
    let t = s.write("typed.yaml", TYPED_OUTPUTS);
    let run = s.cairn(&["deploy", "typed", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "typed"]).stdout(),
        "all = {\"n\":42,\"l\":[1,\"two\"],\"m\":{\"a\":1},\"s\":\"text\",\"off\":null}\n\
         n = 42\n\
         l0 = 1\n\
         second_size = 20\n\
         probe = {\"all\":{\"n\":42,\"l\":[1,\"two\"],\"m\":{\"a\":1},\"s\":\"text\",\"off\":null},\"from_template\":[10,20]}\n"
    );
    assert_eq!(s.cairn(&["delete", "typed"]).code(), 0);
}

/// heat/engine/resources/openstack/heat/remote_stack.py: an
/// OS::Heat::Stack is created with `files: self.stack.t.files`, so its
/// template (inline, or itself a `get_file`) may use `type: other.yaml`
/// and `get_file` of files given with the parent.
#[test]
fn an_os_heat_stacks_child_reads_the_parents_files() {
    let s = Scratch::new();
    s.write(
        "other.yaml",
        "heat_template_version: 2018-08-31\nparameters:\n  word: {type: string, default: hello}\noutputs:\n  word: {value: {get_param: word}}\n",
    );
    s.write("data.txt", "from a file");
    s.write(
        "child.yaml",
        "heat_template_version: 2018-08-31\nresources:\n  piece:\n    type: other.yaml\n    properties: {word: from-child-file}\noutputs:\n  piece: {value: {get_attr: [piece, word]}}\n",
    );
    let t = s.write(
        "parent.yaml",
        "heat_template_version: 2018-08-31
resources:
  inline:
    type: OS::Heat::Stack
    properties:
      template:
        heat_template_version: 2018-08-31
        resources:
          piece:
            type: other.yaml
          note:
            type: OS::Heat::Value
            properties:
              value: {get_file: data.txt}
        outputs:
          said: {value: {get_attr: [note, value]}}
          piece: {value: {get_attr: [piece, word]}}
  from_file:
    type: OS::Heat::Stack
    properties:
      template: {get_file: child.yaml}
outputs:
  said: {value: {get_attr: [inline, outputs, said]}}
  piece: {value: {get_attr: [inline, outputs, piece]}}
  nested_piece: {value: {get_attr: [from_file, outputs, piece]}}
",
    );
    let run = s.cairn(&["deploy", "files", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "files"]).stdout(),
        "said = from a file\npiece = hello\nnested_piece = from-child-file\n"
    );
    assert_eq!(s.cairn(&["delete", "files"]).code(), 0);
}

/// heat/engine/properties.py (and resource_group.py's schema): Heat's own
/// types' properties are checked before anything is made, with Heat's
/// texts: a string where a list belongs, a word where an integer does, a
/// property the type does not have, a value it does not allow.
#[test]
fn heat_types_properties_are_checked_as_heat_checks_them() {
    let s = Scratch::new();
    let group = |props: &str| {
        format!(
            "heat_template_version: 2018-08-31\nresources:\n  group:\n    type: OS::Heat::ResourceGroup\n    properties:\n      resource_def: {{type: OS::Heat::None}}\n{props}"
        )
    };
    for (props, line) in [
        (
            "      removal_policies: RP\n",
            "Property error: resources.group.properties.removal_policies: \"'RP'\" is not a list",
        ),
        (
            "      count: two\n",
            "Property error: resources.group.properties.count: Value 'two' is not an integer",
        ),
        (
            "      size: 2\n",
            "Property error: resources.group.properties: Unknown Property size",
        ),
        (
            "      removal_policies_mode: sometimes\n",
            "Property error: resources.group.properties.removal_policies_mode: \"sometimes\" is not an allowed value ('append', 'update')",
        ),
    ] {
        let t = s.write("group.yaml", &group(props));
        let run = s.cairn(&["deploy", "checked", t.to_str().unwrap_or_default()]);
        assert_eq!(run.code(), 1, "{props}");
        assert!(run.stderr().contains(line), "{props}: {}", run.stderr());
        assert_eq!(s.resource_files().len(), 0);
    }
    // A parameter's value is checked when it is known: a list given as one.
    let t = s.write(
        "group.yaml",
        &group("      count: {get_param: n}\n      removal_policies: [{resource_list: ['0']}]\n")
            .replace(
                "resources:\n",
                "parameters:\n  n: {type: number, default: 2}\nresources:\n",
            ),
    );
    let run = s.cairn(&["deploy", "checked", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(s.cairn(&["delete", "checked"]).code(), 0);
}

/// heat/engine/resources/openstack/heat/resource_group.py, `batch_create`
/// (and heat_integrationtests' test_resource_group.py batch tests): a new
/// group's members are made max_batch_size at a time, in index order, with
/// pause_time seconds between batches; an update does not batch creates.
#[test]
fn a_resource_groups_batch_create_makes_members_in_batches() {
    let s = Scratch::new();
    s.write("cairn.toml", "");
    let t = s.write(
        "batched.yaml",
        "heat_template_version: 2018-08-31
parameters:
  n: {type: number, default: 5}
resources:
  group:
    type: OS::Heat::ResourceGroup
    update_policy:
      batch_create: {max_batch_size: 2, pause_time: 1}
    properties:
      count: {get_param: n}
      resource_def:
        type: Cairn::Test::Resource
        properties: {Value: member-%index%}
",
    );
    let t = t.to_str().unwrap_or_default();
    let started = std::time::Instant::now();
    let run = s.cairn(&["deploy", "batched", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // Two pauses of a second between three batches.
    assert!(started.elapsed() >= std::time::Duration::from_secs(2));
    let events = crate::update::sequence_after(&s, "batched", 0);
    let batches: Vec<&str> = events
        .iter()
        .filter(|e| e.0 == "group" && e.2.starts_with("Batch create"))
        .map(|e| e.2.as_str())
        .collect();
    assert_eq!(
        batches,
        [
            "Batch create 1 of 3: creating group-0, group-1",
            "Batch create 2 of 3: creating group-2, group-3",
            "Batch create 3 of 3: creating group-4",
        ]
    );
    // Each batch's members are made before the next batch starts.
    let at = |what: &dyn Fn(&crate::update::Ev) -> bool| {
        events.iter().position(what).unwrap_or(usize::MAX)
    };
    for (done, next) in [
        ("group-1", "Batch create 2 of 3"),
        ("group-3", "Batch create 3 of 3"),
    ] {
        let made = at(&|e| e.0 == done && e.1 == "CREATE_COMPLETE");
        let announced = at(&|e| e.2.starts_with(next));
        assert!(made < announced, "{done} before {next}: {events:?}");
    }
    // Growing on update is not batched.
    let before = events.len();
    let run = s.cairn(&["deploy", "batched", t, "-p", "n=7"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(!crate::update::sequence_after(&s, "batched", before)
        .iter()
        .any(|e| e.2.starts_with("Batch create")));
    assert_eq!(s.resource_files().len(), 7);
    assert_eq!(s.cairn(&["delete", "batched"]).code(), 0);
}

/// heat/engine/resources/openstack/heat/resource_group.py: resource_def's
/// `type` is a property like any other, so a function may compute it
/// (`{get_param: member_type}`); a new type replaces the members under
/// their names (the group's nested stack replaces each resource whose type
/// changed). A
/// template file must be written out: Cairn reads it before the operation.
#[test]
fn a_resource_groups_member_type_may_be_computed() {
    let s = Scratch::new();
    s.write("cairn.toml", "");
    let t = s.write(
        "computed.yaml",
        "heat_template_version: 2018-08-31
parameters:
  member_type:
    type: string
    default: Cairn::Test::Resource
    constraints:
      - allowed_values: [Cairn::Test::Resource, OS::Heat::None, member.yaml, My::Server]
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: {get_param: member_type}
        properties: {}
outputs:
  refs: {value: {get_attr: [group, refs]}}
",
    );
    s.write(
        "member.yaml",
        "heat_template_version: 2018-08-31\nresources:\n  thing: {type: Cairn::Test::Resource, properties: {Value: from-template}}\n",
    );
    s.write(
        "env.yaml",
        "resource_registry:\n  My::Server: member.yaml\n",
    );
    let t = t.to_str().unwrap_or_default();
    let run = s.cairn(&["deploy", "computed", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let members = |s: &Scratch| group_members(s, "computed");
    let typed = |names: &[&str], t: &str| -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), t.to_string()))
            .collect()
    };
    assert_eq!(
        members(&s),
        typed(&["group-0", "group-1"], "Cairn::Test::Resource")
    );
    assert_eq!(s.resource_files().len(), 2);
    let run = s.cairn(&["deploy", "computed", t, "-p", "member_type=OS::Heat::None"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        members(&s),
        typed(&["group-0", "group-1"], "OS::Heat::None")
    );
    assert_eq!(s.resource_files().len(), 0);
    // A template file from a parameter: each member a nested stack of it
    // (the CLI reads the files the parameter's default and allowed_values
    // name), under the same names.
    let run = s.cairn(&["deploy", "computed", t, "-p", "member_type=member.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        members(&s)
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["group-0", "group-1"]
    );
    assert_eq!(s.resource_files().len(), 2);
    // A type the environment maps to a template, as Heat's registry maps it.
    let run = s.cairn(&[
        "deploy",
        "computed",
        t,
        "-e",
        "env.yaml",
        "-p",
        "member_type=My::Server",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(s.resource_files().len(), 2);
    assert_eq!(s.cairn(&["delete", "computed"]).code(), 0);
    assert!(s.resource_files().is_empty());
    // A file the parameter does not name in its default or allowed_values
    // was not read with the template: refused, saying what to do.
    let free = s.write(
        "free.yaml",
        &std::fs::read_to_string(s.dir.path().join("computed.yaml"))
            .unwrap_or_default()
            .replace(
                "    constraints:\n      - allowed_values: [Cairn::Test::Resource, OS::Heat::None, member.yaml, My::Server]\n",
                "",
            ),
    );
    let run = s.cairn(&[
        "deploy",
        "free",
        free.to_str().unwrap_or_default(),
        "-p",
        "member_type=member.yaml",
    ]);
    assert_ne!(run.code(), 0);
    assert!(
        s.cairn(&["events", "free"]).stdout().contains(
            "names the template file member.yaml, which was not given with the stack: Cairn reads the files a computed type may name from its parameter's default and allowed_values, so list member.yaml there"
        ),
        "{}",
        run.stderr()
    );
}

/// heat/engine/resources/aws/autoscaling/launch_config.py and
/// openstack/heat/instance_group.py: a launch configuration written with
/// AWS's properties (ImageId, InstanceType, KeyName, SecurityGroups,
/// UserData, BlockDeviceMappings) makes `AWS::EC2::Instance` members,
/// served by whichever provider serves that type (here a webhook on the
/// Python SDK), with those properties; `InstanceList` is their public
/// addresses, and AWS's AutoScalingGroup sizes them.
#[test]
fn aws_launch_configurations_make_instances_of_the_provider_serving_them() {
    let mut cmd = crate::support::python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/ec2_provider.py"
    ))
    .args([
        "--listen",
        "127.0.0.1:0",
        "--secret",
        crate::webhooks::SECRET,
    ])
    .env(
        "PYTHONPATH",
        concat!(env!("CARGO_MANIFEST_DIR"), "/sdk-python"),
    );
    let handler = crate::webhooks::Program::start(cmd);
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        &format!(
            "[webhooks]\nsecret = \"{}\"\n\n[[providers]]\nkind = \"webhook\"\nname = \"ec2\"\nurl = \"http://127.0.0.1:{}/\"\ntypes = [\"AWS::EC2::Instance\"]\n",
            crate::webhooks::SECRET,
            handler.port
        ),
    );
    let t = s.write(
        "servers.yaml",
        "heat_template_version: 2015-04-30
resources:
  config:
    type: AWS::AutoScaling::LaunchConfiguration
    properties:
      ImageId: fedora-40
      InstanceType: m1.small
      KeyName: ops
      SecurityGroups: [web]
      UserData: '#!/bin/sh'
      BlockDeviceMappings: [{DeviceName: /dev/vdb, Ebs: {VolumeSize: '10'}}]
  servers:
    type: OS::Heat::InstanceGroup
    properties:
      LaunchConfigurationName: {get_resource: config}
      Size: 2
  scaled:
    type: AWS::AutoScaling::AutoScalingGroup
    properties:
      LaunchConfigurationName: {get_resource: config}
      MinSize: 1
      MaxSize: 3
      AvailabilityZones: [nova]
outputs:
  servers: {value: {get_attr: [servers, InstanceList]}}
  made: {value: {get_attr: [servers, MemberAttributes, '0', Made]}}
",
    );
    let run = s.cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "aws",
        t.to_str().unwrap_or_default(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let outputs = s
        .cairn(&[
            "--config",
            "cairn.toml",
            "outputs",
            "aws",
            "--output",
            "json",
        ])
        .json();
    let value = |k: &str| -> String {
        outputs["Outputs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["OutputKey"] == k)
            .and_then(|o| o["OutputValue"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let list = value("servers");
    assert_eq!(list.split(',').count(), 2, "{list}");
    assert!(
        list.split(',').all(|ip| ip.starts_with("10.0.0.")),
        "{list}"
    );
    let made: serde_json::Value = serde_json::from_str(&value("made")).expect("json");
    assert_eq!(
        made,
        serde_json::json!({
            "BlockDeviceMappings": [{"DeviceName": "/dev/vdb", "Ebs": {"VolumeSize": "10"}}],
            "ImageId": "fedora-40",
            "InstanceType": "m1.small",
            "KeyName": "ops",
            "SecurityGroups": ["web"],
            "UserData": "#!/bin/sh"
        })
    );
    let members: Vec<String> = s
        .cairn(&[
            "--config",
            "cairn.toml",
            "resources",
            "aws",
            "--output",
            "json",
        ])
        .json()["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| !r["GroupResourceId"].is_null())
        .map(|r| {
            format!(
                "{} {}",
                r["ResourceType"].as_str().unwrap_or_default(),
                r["PhysicalResourceId"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(members.len(), 3, "{members:?}");
    assert!(
        members
            .iter()
            .all(|m| m.starts_with("AWS::EC2::Instance i-")),
        "{members:?}"
    );
    assert_eq!(
        s.cairn(&["--config", "cairn.toml", "delete", "aws"]).code(),
        0
    );
}

/// The group members of `stack`: (logical id, type as shown).
fn group_members(s: &Scratch, stack: &str) -> Vec<(String, String)> {
    s.cairn(&["resources", stack, "--output", "json"]).json()["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| !r["GroupResourceId"].is_null())
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (text("LogicalResourceId"), text("ResourceType"))
        })
        .collect()
}

const KEPT_GROUP: &str = "heat_template_version: 2018-08-31
parameters:
  count: {type: number, default: 3}
  value: {type: string, default: v1}
  name: {type: string, default: first}
  fail: {type: comma_delimited_list, default: ''}
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      resource_def:
        type: Cairn::Test::Resource
        properties:
          Value: {list_join: ['-', [{get_param: value}, '%index%']]}
          Name: {list_join: ['-', [{get_param: name}, '%index%']]}
          Fail: {get_param: fail}
outputs:
  refs_map: {value: {get_attr: [group, refs_map]}}
";

/// heat/engine/resources/openstack/heat/resource_group.py: an update is an
/// update of the group's nested stack, so the members keep their names and
/// indices (`%index%` and the `refs_map` keys stay); each member is updated
/// in place, or replaced under its name when its type needs that (a new
/// physical id, heat_integrationtests test_resource_group.py
/// `test_props_update`); only growth adds indices and only a shrink removes
/// them; a failed update rolls back to the same members.
#[test]
fn a_resource_group_update_keeps_its_members_names() {
    let s = Scratch::new();
    s.write("cairn.toml", "");
    let t = s.write("kept.yaml", KEPT_GROUP);
    let t = t.to_str().unwrap_or_default();
    let deploy = |args: &[&str]| {
        let mut all = vec!["deploy", "kept", t];
        for a in args {
            all.extend(["-p", a]);
        }
        let run = s.cairn(&all);
        (run.code(), run.stdout(), run.stderr())
    };
    let (code, _, err) = deploy(&[]);
    assert_eq!(code, 0, "{err}");
    let refs_map = |s: &Scratch| -> serde_json::Map<String, serde_json::Value> {
        let out = s.cairn(&["outputs", "kept", "--output", "json"]).json();
        let text = out["Outputs"][0]["OutputValue"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        serde_json::from_str(&text).unwrap_or_default()
    };
    let value_of = |s: &Scratch, physical: &serde_json::Value| {
        crate::update::file(s, physical.as_str().unwrap_or_default())["Properties"]["Value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let first = refs_map(&s);
    assert_eq!(first.keys().collect::<Vec<_>>(), ["0", "1", "2"]);

    // A changed definition and one more member: 0, 1, 2 updated in place
    // (same physical ids, new values), 3 made; one batch (no
    // rolling_update), the highest index first.
    let (code, out, err) = deploy(&["value=v2", "count=4"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Rolling update batch 1 of 1: creating group-3, then updating group-2, group-1, group-0"),
        "{out}"
    );
    let second = refs_map(&s);
    assert_eq!(second.keys().collect::<Vec<_>>(), ["0", "1", "2", "3"]);
    for i in ["0", "1", "2"] {
        assert_eq!(second[i], first[i], "member {i} kept its physical id");
        assert_eq!(value_of(&s, &second[i]), format!("v2-{i}"));
    }
    assert_eq!(s.resource_files().len(), 4);

    // A create-only property: each member replaced under its own name,
    // the old one deleted once the new one is made.
    let (code, _, err) = deploy(&["value=v2", "count=4", "name=renamed"]);
    assert_eq!(code, 0, "{err}");
    let third = refs_map(&s);
    assert_eq!(third.keys().collect::<Vec<_>>(), ["0", "1", "2", "3"]);
    assert!(third
        .iter()
        .all(|(i, id)| second[i] != *id && id.as_str().is_some_and(|p| !p.is_empty())));
    assert_eq!(s.resource_files().len(), 4);
    let old = second["0"].as_str().unwrap_or_default();
    let new = third["0"].as_str().unwrap_or_default();
    let member_0: Vec<(String, String, String)> =
        s.cairn(&["events", "kept", "--output", "json"]).json()["StackEvents"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .rev()
            .filter(|e| e["LogicalResourceId"] == "group-0")
            .map(|e| {
                let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                (
                    text("ResourceStatus"),
                    text("ResourceStatusReason"),
                    text("PhysicalResourceId"),
                )
            })
            .collect();
    let tail = &member_0[member_0.len().saturating_sub(4)..];
    let ev = |status: &str, reason: &str, physical: &str| {
        (status.to_string(), reason.to_string(), physical.to_string())
    };
    assert_eq!(
        tail,
        [
            ev(
                "UPDATE_IN_PROGRESS",
                "Requested update requires the creation of a new physical resource; hence creating one.",
                ""
            ),
            ev("UPDATE_COMPLETE", "", new),
            ev("DELETE_IN_PROGRESS", "", old),
            ev("DELETE_COMPLETE", "", old),
        ]
    );

    // Every member's update in place fails: the update rolls back, every
    // member keeps its name and physical id and has its value back.
    let (code, _, _) = deploy(&["value=v3", "count=4", "name=renamed", "fail=update"]);
    assert_ne!(code, 0);
    assert_eq!(
        s.cairn(&["describe", "kept", "--output", "json"]).json()["Stacks"][0]["StackStatus"],
        "UPDATE_ROLLBACK_COMPLETE"
    );
    let fourth = refs_map(&s);
    assert_eq!(fourth, third);
    for (i, id) in &fourth {
        assert_eq!(value_of(&s, id), format!("v2-{i}"));
    }

    // A shrink removes the highest indices; the others stay as they are.
    let (code, _, err) = deploy(&["value=v2", "count=2", "name=renamed"]);
    assert_eq!(code, 0, "{err}");
    let fifth = refs_map(&s);
    assert_eq!(fifth.keys().collect::<Vec<_>>(), ["0", "1"]);
    assert_eq!(
        (fifth["0"].clone(), fifth["1"].clone()),
        (third["0"].clone(), third["1"].clone())
    );
    assert_eq!(s.resource_files().len(), 2);
    assert_eq!(s.cairn(&["delete", "kept"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

/// heat/engine/hot/functions.py `GetAttAllAttributes` (from 2015-10-15):
/// `get_attr` with only a resource name is the map of all its attributes;
/// before that version its arguments are refused with Heat's text.
#[test]
fn get_attr_with_only_a_resource_name_is_every_attribute() {
    let s = Scratch::new();
    let t = s.write(
        "all.yaml",
        "heat_template_version: 2015-10-15
resources:
  r: {type: Cairn::Test::Resource, properties: {Name: n1, Value: hello}}
  copy: {type: Cairn::Test::Resource, properties: {Value: {get_attr: [r]}}}
outputs:
  all: {value: {get_attr: [r]}}
",
    );
    let run = s.cairn(&["deploy", "all", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = s.cairn(&["outputs", "all", "--output", "json"]).json();
    let all: serde_json::Value = serde_json::from_str(
        out["Outputs"][0]["OutputValue"]
            .as_str()
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    assert_eq!(
        all,
        serde_json::json!({"Arn": "arn:cairn:test::resource/n1", "Name": "n1", "Value": "hello"})
    );
    // A resource reading it waits for it (a dependency, as any get_attr).
    let copy = physical_id(&s, "all", "copy");
    assert_eq!(crate::update::file(&s, &copy)["Properties"]["Value"], all);
    let old = s.write(
        "old.yaml",
        "heat_template_version: 2013-05-23
resources:
  r: {type: Cairn::Test::Resource}
outputs:
  all: {value: {get_attr: [r]}}
",
    );
    let run = s.cairn(&["validate", old.to_str().unwrap_or_default()]);
    assert_ne!(run.code(), 0);
    assert!(
        run.stderr().contains(
            "Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]"
        ),
        "{}",
        run.stderr()
    );
}
