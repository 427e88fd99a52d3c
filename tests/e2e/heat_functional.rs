//! HOT cases for the areas of Heat's functional tests
//! (`heat_integrationtests/functional` in github `openstack/heat`). Each
//! test names the Heat test whose behaviour it asserts; the templates are
//! written here, not taken from Heat.

use serde_json::json;

use crate::heat_fidelity::physical_id;
use crate::support::Scratch;

/// `cairn outputs --output json`'s list.
fn outputs(s: &Scratch, stack: &str) -> serde_json::Value {
    s.cairn(&["outputs", stack, "--output", "json"]).json()["Outputs"].clone()
}

/// Deploys `template` as `stack`; the run must succeed.
fn deploy(s: &Scratch, stack: &str, template: &std::path::Path) {
    let run = s.cairn(&["deploy", stack, template.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
}

const GROWING_BEFORE: &str = "heat_template_version: 2015-10-15
resources:
  source:
    type: OS::Heat::TestResource
    properties:
      value: seed
";

const GROWING_AFTER: &str = "heat_template_version: 2015-10-15
resources:
  source:
    type: OS::Heat::TestResource
    properties:
      value: seed
  copy:
    type: OS::Heat::TestResource
    properties:
      value: {get_attr: [source, output]}
outputs:
  copied:
    description: what the new resource copied
    value: {get_attr: [copy, output]}
";

/// Follows `test_stack_outputs.py::test_outputs_update_new_resource`: an
/// update that adds a resource reading another's attribute, and an output
/// reading the new resource, shows the value with its description.
#[test]
fn an_output_of_a_resource_an_update_added() {
    let s = Scratch::new();
    let t = s.write("grow.yaml", GROWING_BEFORE);
    deploy(&s, "grow", &t);
    s.write("grow.yaml", GROWING_AFTER);
    deploy(&s, "grow", &t);
    assert_eq!(
        outputs(&s, "grow"),
        json!([{
            "OutputKey": "copied",
            "OutputValue": "seed",
            "Description": "what the new resource copied"
        }])
    );
}

const WRAPPER: &str = "heat_template_version: 2015-10-15
resources:
  inner:
    type: piece.yaml
outputs:
  good:
    description: the child's resolvable output
    value: {get_attr: [inner, good]}
  broken:
    description: the child's unresolvable output
    value: {get_attr: [inner, broken]}
";

const PIECE: &str = "heat_template_version: 2015-10-15
resources:
  thing:
    type: OS::Heat::TestResource
    properties:
      value: fine
outputs:
  good:
    value: {get_attr: [thing, output]}
  broken:
    value: {get_param: missing_one}
";

/// Follows `test_stack_outputs.py::test_output_error_nested`: a template
/// resource whose child cannot resolve one output. The parent's output
/// reading it has no value and Heat's `output_error` ("Error in <resource>
/// output <name>: <the child's error>"); the other output has its value;
/// the same after the stack is deployed again.
#[test]
fn a_nested_output_error_reaches_the_parents_output() {
    let s = Scratch::new();
    s.write("piece.yaml", PIECE);
    let t = s.write("wrapper.yaml", WRAPPER);
    deploy(&s, "wrap", &t);
    let expected = json!([
        {
            "OutputKey": "good",
            "OutputValue": "fine",
            "Description": "the child's resolvable output"
        },
        {
            "OutputKey": "broken",
            "OutputValue": null,
            "Description": "the child's unresolvable output",
            "OutputError": "Error in inner output broken: The Parameter (missing_one) was not provided."
        }
    ]);
    assert_eq!(outputs(&s, "wrap"), expected);
    // Heat's test updates with the same template; Cairn refuses an update
    // that changes nothing, and the outputs stay.
    let again = s.cairn(&["deploy", "wrap", t.to_str().unwrap_or_default()]);
    assert!(
        again.stderr().contains("No updates are to be performed."),
        "{}",
        again.stderr()
    );
    assert_eq!(outputs(&s, "wrap"), expected);
}

/// A map resource read by keys that other resources hold, the keys
/// changing on update (`first`, `second`, `third`: each key's resource;
/// `extra`: a fourth key added on update, or none).
fn lookup_template(first: &str, second: &str, third: &str, extra: Option<&str>) -> String {
    let extra_resource = extra
        .map(|k| {
            format!(
                "  key_extra:\n    type: OS::Heat::Value\n    properties:\n      value: {k}\n  \
                 read_extra:\n    type: OS::Heat::Value\n    properties:\n      value: {{get_attr: [table, value, {{get_attr: [key_extra, value]}}]}}\n"
            )
        })
        .unwrap_or_default();
    let extra_dep = if extra.is_some() { ", key_extra" } else { "" };
    let extra_output = if extra.is_some() {
        "  via_extra:\n    value: {get_attr: [read_extra, value]}\n"
    } else {
        ""
    };
    format!(
        "heat_template_version: ocata
resources:
  table:
    type: OS::Heat::Value
    depends_on: [key_one, key_two, after_three{extra_dep}]
    properties:
      value: {{red: apple, yellow: lemon, green: lime, purple: plum}}
  key_one:
    type: OS::Heat::Value
    properties:
      value: {first}
  key_two:
    type: OS::Heat::Value
    properties:
      value: {second}
  key_three:
    type: OS::Heat::Value
    properties:
      value: {third}
  after_three:
    type: OS::Heat::Value
    depends_on: key_three
    properties:
      value: unused
  read_one:
    type: OS::Heat::Value
    properties:
      value: {{get_attr: [table, value, {{get_attr: [key_one, value]}}]}}
{extra_resource}outputs:
  via_resource:
    value: {{get_attr: [read_one, value]}}
  direct:
    value: {{get_attr: [table, value, {{get_attr: [key_two, value]}}]}}
  indirect:
    value: {{get_attr: [table, value, {{get_attr: [key_three, value]}}]}}
{extra_output}"
    )
}

/// Follows `test_nested_get_attr.py` (`test_nested_get_attr_create`,
/// `test_nested_get_attr_update`): `get_attr` whose path is another
/// `get_attr`, in a resource's property and in outputs, with the keys
/// changing on update and a new reader added.
#[test]
fn get_attr_inside_get_attr_on_create_and_update() {
    let s = Scratch::new();
    let t = s.write(
        "lookup.yaml",
        &lookup_template("red", "yellow", "green", None),
    );
    deploy(&s, "lookup", &t);
    let text = |s: &Scratch| s.cairn(&["outputs", "lookup"]).stdout();
    assert_eq!(
        text(&s),
        "via_resource = apple\ndirect = lemon\nindirect = lime\n"
    );
    s.write(
        "lookup.yaml",
        &lookup_template("yellow", "green", "red", Some("purple")),
    );
    deploy(&s, "lookup", &t);
    assert_eq!(
        text(&s),
        "via_resource = lemon\ndirect = lime\nindirect = apple\nvia_extra = plum\n"
    );
}

/// A ResourceGroup of `count` members of `My::Word` (the environment maps
/// it to OS::Heat::RandomString), each `width` characters, seasoned with
/// `seed`, and with `removal` as its removal_policies list.
fn word_group(count: u32, seed: &str, removal: &str) -> String {
    format!(
        "heat_template_version: 2014-10-16
resources:
  words:
    type: OS::Heat::ResourceGroup
    properties:
      count: {count}
      removal_policies: [{{resource_list: [{removal}]}}]
      resource_def:
        type: My::Word
        properties:
          length: 24
          salt: {seed}
outputs:
  first:
    value: {{get_attr: [words, resource.0.value]}}
  second:
    value: {{get_attr: [words, resource.1.value]}}
  every:
    value: {{get_attr: [words, value]}}
"
    )
}

const WORD_ENVIRONMENT: &str = "resource_registry:\n  My::Word: OS::Heat::RandomString\n";

/// The group's members: (name, physical id), in order.
fn words(s: &Scratch) -> Vec<(String, String)> {
    s.cairn(&["resources", "rg", "--output", "json"]).json()["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["GroupResourceId"] == "words")
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (text("LogicalResourceId"), text("PhysicalResourceId"))
        })
        .collect()
}

fn names(members: &[(String, String)]) -> Vec<&str> {
    members.iter().map(|(n, _)| n.as_str()).collect()
}

/// Follows test_resource_group.py: `test_create` (members of a type the
/// environment maps, `resource.N.value` and the list of every member's
/// value), `test_update_increase_decrease_count` (2 → 5 → 3),
/// `test_update_nochange` (the same template again leaves the values),
/// `test_props_update` (a changed resource_def property replaces the
/// members, not the group) and `test_update_removal_policies` (naming
/// three middle members removes them and new indices make up the count).
#[test]
fn resource_groups_as_heats_functional_tests_check_them() {
    let s = Scratch::new();
    let env = s.write("env.yaml", WORD_ENVIRONMENT);
    let env = env.to_str().unwrap_or_default();
    let t = s.write("rg.yaml", &word_group(2, "first", ""));
    let t = t.to_str().unwrap_or_default();
    let deploy = |s: &Scratch| {
        let run = s.cairn(&["deploy", "rg", t, "-e", env]);
        assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    };
    deploy(&s);
    let out = outputs(&s, "rg");
    let value = |o: &serde_json::Value, i: usize| {
        o[i]["OutputValue"].as_str().unwrap_or_default().to_string()
    };
    let (first, second) = (value(&out, 0), value(&out, 1));
    assert_eq!((first.len(), second.len()), (24, 24));
    assert_eq!(value(&out, 2), json!([first, second]).to_string());
    assert_eq!(names(&words(&s)), ["words-0", "words-1"]);

    // The same template and environment again: nothing changes.
    let again = s.cairn(&["deploy", "rg", t, "-e", env]);
    assert!(
        again.stderr().contains("No updates are to be performed."),
        "{}",
        again.stderr()
    );
    assert_eq!(value(&outputs(&s, "rg"), 0), first);

    s.write("rg.yaml", &word_group(5, "first", ""));
    deploy(&s);
    assert_eq!(names(&words(&s)).len(), 5);
    s.write("rg.yaml", &word_group(3, "first", ""));
    deploy(&s);
    assert_eq!(names(&words(&s)), ["words-0", "words-1", "words-2"]);

    // A changed property of the members' definition replaces each member
    // under its own name (in one batch: there is no rolling_update; a
    // member that is a nested stack is replaced, see the README); the
    // group stays.
    let group_id = |s: &Scratch| physical_id(s, "rg", "words");
    let (group_before, before) = (group_id(&s), words(&s));
    assert!(!group_before.is_empty());
    s.write("rg.yaml", &word_group(3, "second", ""));
    deploy(&s);
    let after = words(&s);
    assert_eq!(after.len(), 3);
    assert!(
        after.iter().all(|m| !before.contains(m)),
        "{before:?} {after:?}"
    );
    assert_eq!(names(&after), ["words-0", "words-1", "words-2"]);
    assert_eq!(group_id(&s), group_before);

    // Five members, then three in the middle removed at the same count.
    let s = Scratch::new();
    let env = s.write("env.yaml", WORD_ENVIRONMENT);
    let env = env.to_str().unwrap_or_default();
    let t = s.write("rg.yaml", &word_group(5, "x", ""));
    let t = t.to_str().unwrap_or_default();
    assert_eq!(s.cairn(&["deploy", "rg", t, "-e", env]).code(), 0);
    s.write("rg.yaml", &word_group(5, "x", "'1', '2', '3'"));
    let run = s.cairn(&["deploy", "rg", t, "-e", env]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        names(&words(&s)),
        ["words-0", "words-4", "words-5", "words-6", "words-7"]
    );
}

const PIECE_GROUP: &str = "heat_template_version: 2013-05-23
resources:
  pieces:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def:
        type: My::Piece
outputs:
  shapes:
    value: {get_attr: [pieces, shape]}
";

/// A provider template whose one output is `shape`.
fn piece(shape: &str) -> String {
    format!(
        "heat_template_version: 2013-05-23\nresources:\n  cut:\n    type: OS::Heat::Value\n    properties:\n      value: {shape}\noutputs:\n  shape:\n    value: {{get_attr: [cut, value]}}\n"
    )
}

/// Follows test_resource_group.py::test_update_nochange_resource_needs_update:
/// the group's template and properties are unchanged but the provider
/// template its members are (through the environment) changed: the
/// members are updated to it.
#[test]
fn a_changed_member_template_updates_the_members() {
    let s = Scratch::new();
    s.write("piece.yaml", &piece("square"));
    let env = s.write("env.yaml", "resource_registry:\n  My::Piece: piece.yaml\n");
    let t = s.write("pieces.yaml", PIECE_GROUP);
    let args = [
        "deploy",
        "pieces",
        t.to_str().unwrap_or_default(),
        "-e",
        env.to_str().unwrap_or_default(),
    ];
    let run = s.cairn(&args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "pieces"]).stdout(),
        "shapes = [\"square\",\"square\"]\n"
    );
    s.write("piece.yaml", &piece("circle"));
    let run = s.cairn(&args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        s.cairn(&["outputs", "pieces"]).stdout(),
        "shapes = [\"circle\",\"circle\"]\n"
    );
}

const SIGNALS: &str = "heat_template_version: 2013-05-23
resources:
  handle:
    type: OS::Heat::WaitConditionHandle
  machine:
    type: Cairn::Test::Resource
    properties:
      Value:
        str_replace:
          template: |
            notify --data-binary '{\"status\": \"SUCCESS\"}'
            notify --data-binary '{\"status\": \"SUCCESS\", \"reason\": \"second\"}'
            notify --data-binary '{\"status\": \"SUCCESS\", \"reason\": \"third\", \"data\": \"three\"}'
            notify --data-binary '{\"status\": \"SUCCESS\", \"reason\": \"fourth\", \"data\": \"four\"}'
            notify --data-binary '{\"status\": \"SUCCESS\", \"id\": \"twice\"}'
            notify --data-binary '{\"status\": \"SUCCESS\", \"id\": \"twice\"}'
            for i in $(seq 1 20); do notify --data-binary '{\"status\": \"SUCCESS\"}' & done
            wait
          params:
            notify: {get_attr: [handle, curl_cli]}
  waiting:
    type: OS::Heat::WaitCondition
    depends_on: machine
    properties:
      count: 25
      handle: {get_resource: handle}
      timeout: 120
outputs:
  data:
    value: {get_attr: [waiting, data]}
";

/// Follows test_os_wait_condition.py::test_create_stack_with_multi_signal_waitcondition:
/// a machine's script signals the handle 26 times through its `curl_cli`
/// (with and without reason and data, two with the same id, twenty at
/// once); the wait condition counts 25 (the same id once) and the stack
/// completes.
#[test]
fn a_wait_condition_counts_many_signals_and_one_id_once() {
    let s = crate::update::scratch();
    let t = s.write("signals.yaml", SIGNALS);
    let mut deploy = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "sig",
        t.to_str().unwrap_or_default(),
    ]);
    let script = crate::hot::value_once_created(&s, "sig", "machine");
    let ran = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("sh runs");
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        deploy.wait().expect("deploy ends").success(),
        "{}",
        s.spawned_stderr()
    );
    let data: serde_json::Value = serde_json::from_str(
        outputs(&s, "sig")[0]["OutputValue"]
            .as_str()
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    let data = data.as_object().cloned().unwrap_or_default();
    assert_eq!(data.len(), 25, "{data:?}");
    assert!(data.contains_key("twice"), "{data:?}");
    let values: Vec<&serde_json::Value> = data.values().collect();
    assert!(
        values.contains(&&json!("three")) && values.contains(&&json!("four")),
        "{data:?}"
    );
}

const STAGES: &str = "heat_template_version: 2016-10-14
parameters:
  stage:
    type: string
    default: dev
    constraints:
      - allowed_values: [live, dev]
conditions:
  is_live: {equals: [{get_param: stage}, live]}
resources:
  always:
    type: OS::Heat::TestResource
    properties:
      value: always here
  live_only:
    type: OS::Heat::TestResource
    condition: is_live
    properties:
      value: only when live
outputs:
  live_value:
    condition: is_live
    value: {get_attr: [live_only, output]}
";

/// The stack's resources' logical ids, sorted.
fn logical_ids(s: &Scratch, stack: &str) -> Vec<String> {
    let mut ids: Vec<String> = s.cairn(&["resources", stack, "--output", "json"]).json()
        ["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["LogicalResourceId"].as_str().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

/// Follows test_conditions.py (`test_stack_create_update_hot_template_test_to_prod`
/// and `…_prod_to_test`): a resource and an output under a condition on a
/// parameter appear and disappear as updates flip it; while the condition
/// is false the output is listed without a value, as Heat lists it.
#[test]
fn a_condition_flipped_by_updates_adds_and_removes_a_resource() {
    let s = Scratch::new();
    let t = s.write("stages.yaml", STAGES);
    let t = t.to_str().unwrap_or_default();
    let deploy = |extra: &[&str]| {
        let mut args = vec!["deploy", "stages", t];
        args.extend_from_slice(extra);
        let run = s.cairn(&args);
        assert_eq!(run.code(), 0, "{}", run.stderr());
    };
    deploy(&[]);
    assert_eq!(logical_ids(&s, "stages"), ["always"]);
    assert_eq!(
        s.cairn(&["outputs", "stages"]).stdout(),
        "live_value has no value\n"
    );
    deploy(&["-p", "stage=live"]);
    assert_eq!(logical_ids(&s, "stages"), ["always", "live_only"]);
    assert_eq!(
        s.cairn(&["outputs", "stages"]).stdout(),
        "live_value = only when live\n"
    );
    deploy(&["-p", "stage=dev"]);
    assert_eq!(logical_ids(&s, "stages"), ["always"]);
    assert_eq!(
        s.cairn(&["outputs", "stages"]).stdout(),
        "live_value has no value\n"
    );
}

/// An AutoScalingGroup of 3 members of `member` (`attr`: the member
/// attribute or output read).
fn scaling(member: &str, attr: &str) -> String {
    format!(
        "heat_template_version: 2014-10-16
resources:
  tokens:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 2
      max_size: 5
      desired_capacity: 3
      resource:
        type: {member}
outputs:
  every:
    value: {{get_attr: [tokens, outputs_list, {attr}]}}
  at_0:
    value: {{get_attr: [tokens, resource.0.{attr}]}}
  at_1:
    value: {{get_attr: [tokens, resource.1.{attr}]}}
  at_2:
    value: {{get_attr: [tokens, resource.2.{attr}]}}
  size:
    value: {{get_attr: [tokens, current_size]}}
"
    )
}

const TOKEN: &str = "heat_template_version: 2013-05-23
resources:
  token:
    type: OS::Heat::RandomString
outputs:
  token:
    value: {get_attr: [token, value]}
";

/// Follows test_heat_autoscaling.py (`test_path_attrs`,
/// `test_path_attrs_nested`): an AutoScalingGroup's `outputs_list` of a
/// member attribute is the list of `resource.N` attributes, in order, for
/// members of a type and members that are a provider template; the
/// initial desired capacity is met.
#[test]
fn scaling_group_attribute_paths_agree() {
    let s = Scratch::new();
    s.write("token.yaml", TOKEN);
    for (stack, member, attr) in [
        ("plain", "OS::Heat::RandomString", "value"),
        ("nested", "token.yaml", "token"),
    ] {
        let t = s.write(&format!("{stack}.yaml"), &scaling(member, attr));
        deploy(&s, stack, &t);
        let out = outputs(&s, stack);
        let text = |i: usize| {
            out[i]["OutputValue"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let every: Vec<String> = serde_json::from_str(&text(0)).unwrap_or_default();
        assert_eq!(every.len(), 3, "{stack}: {out}");
        assert_eq!(every, [text(1), text(2), text(3)], "{stack}");
        assert!(every.iter().all(|v| v.len() == 32), "{stack}: {every:?}");
        assert_eq!(text(4), "3", "{stack}");
    }
}

const VAULT: &str = "heat_template_version: 2014-10-16
resources:
  safe:
    type: My::Vault
outputs:
  through_output:
    value: {get_attr: [safe, code]}
  inner_by_path:
    value: {get_attr: [safe, resource.secret, value]}
  inner_dotted:
    value: {get_attr: [safe, resource.secret.value]}
  reference:
    value: {get_resource: safe}
";

/// A provider template with a RandomString `secret`, its `code` output;
/// with `transparent`, also an `OS::stack_id` output of the secret's id.
fn vault(transparent: bool) -> String {
    let id = if transparent {
        "  OS::stack_id:\n    value: {get_resource: secret}\n"
    } else {
        ""
    };
    format!(
        "heat_template_version: 2014-10-16\nresources:\n  secret:\n    type: OS::Heat::RandomString\noutputs:\n{id}  code:\n    value: {{get_attr: [secret, value]}}\n"
    )
}

/// Follows test_template_resource.py's NestedAttributesTest
/// (`test_nested_attributes`, `test_stack_ref`, `test_transparent_ref`):
/// an output of the provider template and `resource.<name>` paths into its
/// stack read the same value; the resource's reference is its nested
/// stack's id, unless the template has an `OS::stack_id` output, which
/// then is the reference.
#[test]
fn template_resource_references_and_nested_attributes() {
    let s = Scratch::new();
    let env = s.write("env.yaml", "resource_registry:\n  My::Vault: vault.yaml\n");
    let env = env.to_str().unwrap_or_default();
    let t = s.write("safe.yaml", VAULT);
    let t = t.to_str().unwrap_or_default();
    for (stack, transparent) in [("opaque", false), ("transparent", true)] {
        s.write("vault.yaml", &vault(transparent));
        let run = s.cairn(&["deploy", stack, t, "-e", env]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let out = outputs(&s, stack);
        let text = |i: usize| {
            out[i]["OutputValue"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(text(0).len(), 32, "{out}");
        assert_eq!((text(1), text(2)), (text(0), text(0)), "{stack}");
        if transparent {
            assert_eq!(text(3), text(0));
        } else {
            assert!(
                text(3).starts_with(
                    "arn:aws:cloudformation:us-east-1:123456789012:stack/opaque-safe-"
                ),
                "{}",
                text(3)
            );
        }
    }
}

const SALTED: &str = "heat_template_version: 2014-10-16
parameters:
  first:
    type: string
    default: a
  second:
    type: string
    default: b
resources:
  inner:
    type: OS::Heat::RandomString
    properties:
      salt: {get_param: first}
outputs:
  word:
    value: {get_attr: [inner, value]}
";

/// SALTED with `salt` replaced, and extra output lines.
fn salted(salt: &str, extra_output: &str) -> String {
    SALTED
        .replace("{get_param: first}", salt)
        .replace("outputs:\n", &format!("outputs:\n{extra_output}"))
}

fn wrapper(first: &str) -> String {
    format!(
        "heat_template_version: 2014-10-16\nresources:\n  wrapped:\n    type: salted.yaml\n    properties:\n      first: {first}\n      second: y\noutputs:\n  id:\n    value: {{get_resource: wrapped}}\n  word:\n    value: {{get_attr: [wrapped, word]}}\n"
    )
}

/// Follows test_template_resource.py's TemplateResourceUpdateTest
/// scenarios: the template resource is updated in place (its nested
/// stack's id stays) whether the parent's property or the provider
/// template changes; its value changes when what it depends on changes
/// (`main_tmpl_change`, `provider_change`, `provider_props_change`) and
/// not when only an unread output is added (`provider_attr_change`); and
/// `test_change_in_file_path`: the registry mapping the type to another
/// file swaps the implementation.
#[test]
fn template_resource_updates_keep_the_nested_stack() {
    let s = Scratch::new();
    s.write("salted.yaml", SALTED);
    let t = s.write("wrap.yaml", &wrapper("x"));
    let t = t.to_str().unwrap_or_default();
    deploy(&s, "wrap", std::path::Path::new(t));
    let read = |s: &Scratch| {
        let out = outputs(s, "wrap");
        let text = |i: usize| {
            out[i]["OutputValue"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        (text(0), text(1))
    };
    let (id, first) = read(&s);
    // main_tmpl_change: the property the salt reads.
    s.write("wrap.yaml", &wrapper("z"));
    deploy(&s, "wrap", std::path::Path::new(t));
    let (id2, second) = read(&s);
    assert_eq!(id2, id);
    assert_ne!(second, first);
    // provider_attr_change: an output nothing reads is added.
    s.write(
        "salted.yaml",
        &salted("{get_param: first}", "  spare:\n    value: unread\n"),
    );
    deploy(&s, "wrap", std::path::Path::new(t));
    assert_eq!(read(&s), (id.clone(), second.clone()));
    // provider_props_change: the salt reads the other parameter.
    s.write("salted.yaml", &salted("{get_param: second}", ""));
    deploy(&s, "wrap", std::path::Path::new(t));
    let (id3, third) = read(&s);
    assert_eq!(id3, id);
    assert_ne!(third, second);
    // provider_change: a literal salt.
    s.write("salted.yaml", &salted("fixed", ""));
    deploy(&s, "wrap", std::path::Path::new(t));
    let (id4, fourth) = read(&s);
    assert_eq!(id4, id);
    assert_ne!(fourth, third);

    // test_change_in_file_path: OS::Heat::RandomString mapped to a file,
    // then to another file under another path.
    let s = Scratch::new();
    let plain = s.write(
        "plain.yaml",
        "heat_template_version: 2013-05-23\nresources:\n  r:\n    type: OS::Heat::RandomString\noutputs:\n  out:\n    value: {get_attr: [r, value]}\n",
    );
    let plain = plain.to_str().unwrap_or_default();
    s.write("first.yaml", "heat_template_version: 2013-05-23\nresources:\n  inner:\n    type: OS::Heat::RandomString\noutputs:\n  value:\n    value: {get_attr: [inner, value]}\n");
    std::fs::create_dir_all(s.dir.path().join("moved")).expect("dir");
    s.write("moved/second.yaml", "heat_template_version: 2013-05-23\nresources:\n  inner:\n    type: OS::Heat::RandomString\noutputs:\n  value:\n    value: constant\n");
    let env1 = s.write(
        "env1.yaml",
        "resource_registry:\n  OS::Heat::RandomString: first.yaml\n",
    );
    let env2 = s.write(
        "env2.yaml",
        "resource_registry:\n  OS::Heat::RandomString: moved/second.yaml\n",
    );
    let run = s.cairn(&[
        "deploy",
        "path",
        plain,
        "-e",
        env1.to_str().unwrap_or_default(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let before = s.cairn(&["outputs", "path"]).stdout();
    assert_eq!(before.len(), "out = \n".len() + 32, "{before}");
    let run = s.cairn(&[
        "deploy",
        "path",
        plain,
        "-e",
        env2.to_str().unwrap_or_default(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(s.cairn(&["outputs", "path"]).stdout(), "out = constant\n");
}

/// A HOT template with OS::Heat::TestResource `one` (and `two` when
/// `two`), `one`'s properties given as YAML flow mapping entries.
fn test_resources(one: &str, two: bool) -> String {
    let second = if two {
        "  two:\n    type: OS::Heat::TestResource\n    properties: {value: second}\n"
    } else {
        ""
    };
    format!("heat_template_version: 2013-05-23\nresources:\n  one:\n    type: OS::Heat::TestResource\n    properties: {{{one}}}\n{second}")
}

/// Follows test_create_update.py's UpdateStackTest: `test_stack_in_place_update`
/// (a changed value keeps the physical id), `test_stack_update_replace`
/// (`update_replace: true` replaces it), `test_stack_update_add_remove`,
/// `test_stack_update_rollback` (a failing added resource: the stack is
/// back to one resource; Cairn's status is CloudFormation's
/// UPDATE_ROLLBACK_COMPLETE where Heat says ROLLBACK_COMPLETE) and
/// CreateStackTest's `test_create_rollback`.
#[test]
fn create_and_update_as_heats_functional_tests_check_them() {
    let s = Scratch::new();
    let t = s.write("cu.yaml", &test_resources("value: first", false));
    let t = t.to_str().unwrap_or_default();
    let deploy = |s: &Scratch| s.cairn(&["deploy", "cu", t]);
    assert_eq!(deploy(&s).code(), 0);
    let first = physical_id(&s, "cu", "one");
    s.write("cu.yaml", &test_resources("value: changed", false));
    assert_eq!(deploy(&s).code(), 0);
    assert_eq!(physical_id(&s, "cu", "one"), first);
    s.write(
        "cu.yaml",
        &test_resources("value: again, update_replace: true", false),
    );
    assert_eq!(deploy(&s).code(), 0);
    let replaced = physical_id(&s, "cu", "one");
    assert_ne!(replaced, first);
    s.write(
        "cu.yaml",
        &test_resources("value: again, update_replace: true", true),
    );
    assert_eq!(deploy(&s).code(), 0);
    assert_eq!(logical_ids(&s, "cu"), ["one", "two"]);
    s.write(
        "cu.yaml",
        &test_resources("value: again, update_replace: true", false),
    );
    assert_eq!(deploy(&s).code(), 0);
    assert_eq!(logical_ids(&s, "cu"), ["one"]);
    // An added resource that fails: back to the one resource, unchanged.
    s.write(
        "cu.yaml",
        &test_resources("value: again, update_replace: true", true)
            .replace("{value: second}", "{value: second, fail: true}"),
    );
    assert_eq!(deploy(&s).code(), 1);
    let d = s.cairn(&["describe", "cu", "--output", "json"]).json();
    assert_eq!(d["Stacks"][0]["StackStatus"], "UPDATE_ROLLBACK_COMPLETE");
    assert_eq!(logical_ids(&s, "cu"), ["one"]);
    assert_eq!(physical_id(&s, "cu", "one"), replaced);

    let failing = s.write("fail.yaml", &test_resources("value: x, fail: true", false));
    let run = s.cairn(&["deploy", "failing", failing.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 1);
    let d = s.cairn(&["describe", "failing", "--output", "json"]).json();
    assert_eq!(d["Stacks"][0]["StackStatus"], "ROLLBACK_COMPLETE");
}

const ALIASED: &str = "heat_template_version: 2013-05-23
resources:
  thing:
    type: My::Thing
";

/// Follows test_create_update.py's `test_stack_update_alias_type` (the
/// resource's type changes to another alias of the same type: it is kept)
/// and `test_stack_update_alias_changes` (the environment maps the alias
/// to another type: the resource is replaced), and
/// `test_stack_update_provider` (a provider template that gains a
/// resource updates its nested stack in place).
#[test]
fn aliases_and_provider_templates_on_update() {
    let s = Scratch::new();
    let t = s.write("aliased.yaml", ALIASED);
    let t = t.to_str().unwrap_or_default();
    let env = |s: &Scratch, body: &str| {
        s.write("env.yaml", body)
            .to_str()
            .unwrap_or_default()
            .to_string()
    };
    let e = env(&s, "resource_registry:\n  My::Thing: OS::Heat::RandomString\n  My::Other: OS::Heat::RandomString\n");
    assert_eq!(s.cairn(&["deploy", "al", t, "-e", &e]).code(), 0);
    let first = physical_id(&s, "al", "thing");
    s.write("aliased.yaml", &ALIASED.replace("My::Thing", "My::Other"));
    let run = s.cairn(&["deploy", "al", t, "-e", &e]);
    assert!(
        run.code() == 0 || run.stderr().contains("No updates are to be performed."),
        "{}",
        run.stderr()
    );
    assert_eq!(physical_id(&s, "al", "thing"), first);
    let e = env(
        &s,
        "resource_registry:\n  My::Other: OS::Heat::TestResource\n",
    );
    let run = s.cairn(&["deploy", "al", t, "-e", &e]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_ne!(physical_id(&s, "al", "thing"), first);

    // A provider template gains a resource: the nested stack is updated,
    // not replaced.
    let s = Scratch::new();
    let provider = |s: &Scratch, two: bool| {
        s.write("provider.template", &test_resources("value: inner", two));
    };
    provider(&s, false);
    let e = env(&s, "resource_registry:\n  My::Thing: provider.template\n");
    let t = s.write("aliased.yaml", ALIASED);
    let t = t.to_str().unwrap_or_default();
    assert_eq!(s.cairn(&["deploy", "pv", t, "-e", &e]).code(), 0);
    let nested = physical_id(&s, "pv", "thing");
    provider(&s, true);
    let run = s.cairn(&["deploy", "pv", t, "-e", &e]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(physical_id(&s, "pv", "thing"), nested);
    // `cairn resources` lists the nested stack's resources under it.
    let listed = s.cairn(&["resources", "pv"]).stdout();
    assert!(
        listed.contains("thing/one") && listed.contains("thing/two"),
        "{listed}"
    );
}
