//! HOT (Heat Orchestration Templates) through the real binary: a stack in
//! HOT deploys, updates and deletes on the same engine; the same stack in
//! CloudFormation gives the same resources, events and outputs; each
//! version enables exactly its functions.

use crate::support::Scratch;
use crate::update::{cairn, scratch, sequence_after};

const WEB: &str = "heat_template_version: 2018-08-31
description: A HOT stack on Cairn's test resources
parameters:
  name:
    type: string
    default: web
    constraints:
      - length: {min: 2, max: 10}
        description: name must be 2 to 10 characters
  size:
    type: number
    default: 3
  tags:
    type: json
    default: {team: ops, env: dev}
  zones:
    type: comma_delimited_list
    default: a,b
  enabled:
    type: boolean
    default: true
  secret:
    type: string
    default: s3cret
    hidden: true
conditions:
  on: {get_param: enabled}
  big: {equals: [{get_param: size}, 3]}
  both: {and: [on, big]}
resources:
  base:
    type: Cairn::Test::Resource
    properties:
      Value:
        str_replace:
          template: $name-$size
          params:
            $name: {get_param: name}
            $size: {get_param: size}
  detail:
    type: Cairn::Test::Resource
    depends_on: base
    condition: both
    properties:
      Value:
        list_join: ['/', [{get_attr: [base, Value]}, {get_param: [tags, team]}], {get_param: zones}]
      Tags:
        map_merge: [{get_param: tags}, {extra: 'yes'}]
      Description: {digest: [sha256, {get_param: name}]}
  hosts:
    type: Cairn::Test::Resource
    properties:
      Value:
        repeat:
          template: host-%z%
          for_each:
            '%z%': {get_param: zones}
outputs:
  joined:
    value: {get_attr: [detail, Value]}
    condition: both
  hosts:
    value: {get_attr: [hosts, Value]}
  first_host:
    value: {get_attr: [hosts, Value, 0]}
  split:
    value: {str_split: ['-', {get_attr: [base, Value]}, 0]}
  url:
    value: {make_url: {scheme: https, host: {get_param: name}, port: 443, path: /x y}}
  concat:
    value: {list_concat_unique: [{get_param: zones}, [b, c]]}
  tag_keys:
    value: {map_replace: [{get_param: tags}, {keys: {team: owner}}]}
  kept:
    value: {filter: [[b], {get_param: zones}]}
  has_b:
    value: {if: [big, yes-big, not-big]}
";

fn outputs(s: &Scratch, stack: &str) -> String {
    cairn(s, &["outputs", stack]).stdout()
}

#[test]
fn a_hot_stack_deploys_updates_and_deletes() {
    let s = scratch();
    let t = s.write("web.yaml", WEB);
    let t = t.to_str().unwrap_or_default();
    let valid = cairn(&s, &["validate", t]);
    assert_eq!(valid.code(), 0, "{}", valid.stderr());
    assert!(
        valid
            .stdout()
            .contains("  tags [json] (default {\"team\":\"ops\",\"env\":\"dev\"})"),
        "{}",
        valid.stdout()
    );
    let run = cairn(&s, &["deploy", "hot", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        outputs(&s, "hot"),
        "joined = web-3/ops/a/b\nhosts = [\"host-a\",\"host-b\"]\nfirst_host = host-a\nsplit = web\nurl = https://web:443/x%20y\nconcat = [\"a\",\"b\",\"c\"]\ntag_keys = {\"owner\":\"ops\",\"env\":\"dev\"}\nkept = [\"a\"]\nhas_b = yes-big\n"
    );
    // The digest of the name, as Heat's hashlib gives it.
    let res = cairn(&s, &["resources", "hot", "--output", "json"]).json();
    let detail = res["StackResources"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == "detail"))
        .and_then(|r| r["PhysicalResourceId"].as_str())
        .unwrap_or_default()
        .to_string();
    let file = crate::update::file(&s, &detail);
    assert_eq!(
        file["Properties"]["Description"],
        sha256_hex("web").as_str()
    );
    assert_eq!(
        file["Properties"]["Tags"],
        serde_json::json!({"team": "ops", "env": "dev", "extra": "yes"})
    );
    // `cairn template` gives the template as written; hidden is masked.
    assert_eq!(cairn(&s, &["template", "hot"]).stdout(), WEB);
    assert!(cairn(&s, &["describe", "hot"])
        .stdout()
        .contains("Parameter:   secret = ****"));

    // A parameter change updates what uses it; a failed constraint is
    // refused with its description.
    let before = sequence_after(&s, "hot", 0).len();
    let run = cairn(&s, &["deploy", "hot", t, "-p", "name=api", "-p", "size=4"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let changed: Vec<(String, String)> = sequence_after(&s, "hot", before)
        .into_iter()
        .filter(|e| e.1.ends_with("_COMPLETE") && e.0 != "hot")
        .map(|e| (e.0, e.1))
        .collect();
    assert_eq!(
        changed,
        vec![
            ("base".to_string(), "UPDATE_COMPLETE".to_string()),
            ("detail".to_string(), "DELETE_COMPLETE".to_string()),
        ]
    );
    assert!(outputs(&s, "hot").contains("split = api\n"));
    // The output under a false condition is listed without a value (null
    // in JSON, as Heat shows None).
    assert!(
        outputs(&s, "hot").starts_with("joined has no value\n"),
        "{}",
        outputs(&s, "hot")
    );
    let json = cairn(&s, &["outputs", "hot", "--output", "json"]).json();
    assert_eq!(json["Outputs"][0]["OutputKey"], "joined");
    assert!(json["Outputs"][0]["OutputValue"].is_null(), "{json}");
    let refused = cairn(&s, &["deploy", "hot", t, "-p", "name=x"]);
    assert!(
        refused
            .stderr()
            .contains("Parameter 'name' is invalid: name must be 2 to 10 characters"),
        "{}",
        refused.stderr()
    );
    assert_eq!(cairn(&s, &["delete", "hot"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

fn sha256_hex(text: &str) -> String {
    use std::process::Command;
    let out = Command::new("sh")
        .args(["-c", &format!("printf '%s' '{text}' | sha256sum")])
        .output()
        .expect("sha256sum runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The same stack in both languages: the same resources, events (logical
/// id, status, reason) and outputs.
#[test]
fn the_same_stack_in_cloudformation_and_hot_is_the_same_stack() {
    let s = scratch();
    let cfn = s.write(
        "cfn.yaml",
        "Parameters:
  Env: {Type: String, Default: dev}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
Resources:
  Bucket:
    Type: Cairn::Test::Resource
    Properties: {Value: !Join ['-', [data, !Ref Env]]}
  Queue:
    Type: Cairn::Test::Resource
    DependsOn: Bucket
    Properties:
      Value: !GetAtt Bucket.Value
      Description: !If [IsProd, big, small]
  Extra:
    Type: Cairn::Test::Resource
    Condition: IsProd
Outputs:
  BucketValue: {Value: !GetAtt Bucket.Value}
  QueueRef: {Value: !Ref Queue}
",
    );
    let hot = s.write(
        "hot.yaml",
        "heat_template_version: 2016-10-14
parameters:
  Env: {type: string, default: dev}
conditions:
  IsProd: {equals: [{get_param: Env}, prod]}
resources:
  Bucket:
    type: Cairn::Test::Resource
    properties: {Value: {list_join: ['-', [data, {get_param: Env}]]}}
  Queue:
    type: Cairn::Test::Resource
    depends_on: Bucket
    properties:
      Value: {get_attr: [Bucket, Value]}
      Description: {if: [IsProd, big, small]}
  Extra:
    type: Cairn::Test::Resource
    condition: IsProd
outputs:
  BucketValue: {value: {get_attr: [Bucket, Value]}}
  QueueRef: {value: {get_resource: Queue}}
",
    );
    for (stack, path) in [("same", &cfn), ("same", &hot)] {
        let run = cairn(&s, &["deploy", stack, path.to_str().unwrap_or_default()]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let events: Vec<(String, String, String)> = sequence_after(&s, stack, 0)
            .into_iter()
            .map(|e| (e.0, e.1, e.2))
            .collect();
        let resources: Vec<(String, String, String)> =
            cairn(&s, &["resources", stack, "--output", "json"]).json()["StackResources"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|r| {
                    let t = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                    (
                        t("LogicalResourceId"),
                        t("ResourceType"),
                        t("ResourceStatus"),
                    )
                })
                .collect();
        let out = outputs(&s, stack);
        let queue = resources
            .iter()
            .find(|r| r.0 == "Queue")
            .map(|r| r.0.clone())
            .unwrap_or_default();
        assert_eq!(queue, "Queue");
        assert_eq!(cairn(&s, &["delete", stack]).code(), 0);
        let seen = (
            events,
            resources,
            out.replace(&physical_suffix(&out), "<id>"),
        );
        let expected_file = s.dir.path().join("same-expected.json");
        match std::fs::read_to_string(&expected_file) {
            Err(_) => std::fs::write(&expected_file, format!("{seen:?}")).expect("write"),
            Ok(first) => assert_eq!(
                format!("{seen:?}"),
                first,
                "HOT differs from CloudFormation"
            ),
        }
    }
}

/// The physical id in `QueueRef = <id>` (it differs between two stacks).
fn physical_suffix(outputs: &str) -> String {
    outputs
        .lines()
        .find_map(|l| l.strip_prefix("QueueRef = "))
        .unwrap_or_default()
        .to_string()
}

/// Each function arrives with its version: the version before refuses it
/// naming the version it needs; its version accepts it. Removed functions
/// get Heat's text.
#[test]
fn each_version_enables_exactly_its_functions() {
    let s = scratch();
    let gates: &[(&str, &str, &str, &str)] = &[
        (
            "repeat",
            "2014-10-16",
            "2015-04-30",
            "{repeat: {template: x-%v%, for_each: {'%v%': [a]}}}",
        ),
        ("digest", "2014-10-16", "2015-04-30", "{digest: [md5, x]}"),
        (
            "str_split",
            "2015-04-30",
            "2015-10-15",
            "{str_split: [',', 'a,b', 0]}",
        ),
        (
            "map_merge",
            "2015-10-15",
            "2016-04-08",
            "{map_merge: [{a: b}]}",
        ),
        (
            "map_replace",
            "2016-04-08",
            "2016-10-14",
            "{map_replace: [{a: b}, {keys: {a: c}}]}",
        ),
        (
            "filter",
            "2016-10-14",
            "2017-02-24",
            "{filter: [[a], [a, b]]}",
        ),
        (
            "str_replace_strict",
            "2016-10-14",
            "2017-02-24",
            "{str_replace_strict: {template: ab, params: {a: c}}}",
        ),
        (
            "make_url",
            "2017-02-24",
            "2017-09-01",
            "{make_url: {scheme: http, host: h}}",
        ),
        (
            "list_concat",
            "2017-02-24",
            "2017-09-01",
            "{list_concat: [[a], [b]]}",
        ),
        (
            "list_concat_unique",
            "2017-02-24",
            "2017-09-01",
            "{list_concat_unique: [[a], [a]]}",
        ),
        (
            "contains",
            "2017-02-24",
            "2017-09-01",
            "{contains: [a, [a]]}",
        ),
        (
            "str_replace_vstrict",
            "2017-02-24",
            "2017-09-01",
            "{str_replace_vstrict: {template: ab, params: {a: c}}}",
        ),
    ];
    for (f, before, since, expr) in gates {
        let body = |v: &str| {
            format!("heat_template_version: {v}\nresources:\n  r:\n    type: Cairn::Test::Resource\n    properties:\n      Value: {expr}\n")
        };
        let old = s.write(&format!("{f}-old.yaml"), &body(before));
        let run = cairn(&s, &["validate", old.to_str().unwrap_or_default()]);
        assert_eq!(run.code(), 1, "{f} in {before}");
        assert!(
            run.stderr().contains(&format!(
                "The function \"{f}\" is not supported in heat_template_version {before}; it needs {since} or later"
            )),
            "{f}: {}",
            run.stderr()
        );
        let new = s.write(&format!("{f}-new.yaml"), &body(since));
        let run = cairn(
            &s,
            &[
                "deploy",
                &format!("gate-{}", f.replace('_', "-")),
                new.to_str().unwrap_or_default(),
            ],
        );
        assert_eq!(run.code(), 0, "{f} in {since}: {}", run.stderr());
    }
    // Removed: CloudFormation's functions after 2013-05-23, Fn::Select
    // after 2015-04-30.
    for (f, v, expr) in [
        ("Ref", "2014-10-16", "{Ref: x}"),
        ("Fn::Join", "2014-10-16", "{'Fn::Join': [',', [a]]}"),
        ("Fn::Select", "2015-10-15", "{'Fn::Select': [0, [a]]}"),
    ] {
        let t = s.write(
            "removed.yaml",
            &format!("heat_template_version: {v}\nparameters:\n  x: {{type: string, default: a}}\nresources:\n  r:\n    type: Cairn::Test::Resource\n    properties:\n      Value: {expr}\n"),
        );
        let run = cairn(&s, &["validate", t.to_str().unwrap_or_default()]);
        assert!(
            run.stderr().contains(&format!(
                "The template version is invalid: The function {f} is not supported in this version of HOT."
            )),
            "{f}: {}",
            run.stderr()
        );
    }
    // 2013-05-23 still reads them.
    let t = s.write(
        "old-cfn.yaml",
        "heat_template_version: 2013-05-23\nparameters:\n  x: {type: string, default: a}\nresources:\n  r:\n    type: Cairn::Test::Resource\n    properties:\n      Value: {'Fn::Join': ['-', [{Ref: x}, b]]}\noutputs:\n  v: {value: {get_attr: [r, Value]}}\n",
    );
    assert_eq!(
        cairn(&s, &["deploy", "old", t.to_str().unwrap_or_default()]).code(),
        0
    );
    assert_eq!(outputs(&s, "old"), "v = a-b\n");
    // Sections and keys each version lacks, an unknown version, yaql.
    let cases = [
        ("heat_template_version: 2016-04-08\nconditions: {}\nresources: {}\n", "The template section is invalid: conditions"),
        ("heat_template_version: 2016-04-08\nresources:\n  r: {type: Cairn::Test::Resource, condition: c}\n", "\"condition\" is not a valid keyword inside a resource definition"),
        ("heat_template_version: 2012-12-12\nresources: {}\n", "The template version is invalid: \"heat_template_version: 2012-12-12\". \"heat_template_version\" should be one of: 2013-05-23, 2014-10-16"),
        ("heat_template_version: pike\nresources:\n  r:\n    type: Cairn::Test::Resource\n    properties: {Value: {yaql: {expression: '1', data: {}}}}\n", "yaql is not supported by Cairn"),
    ];
    for (body, text) in cases {
        let t = s.write("case.yaml", body);
        let run = cairn(&s, &["validate", t.to_str().unwrap_or_default()]);
        assert!(run.stderr().contains(text), "{text}: {}", run.stderr());
    }
}

/// `if` with a null branch (2021-04-16) removes the property; an inline
/// condition expression works as a resource's condition.
#[test]
fn wallaby_if_null_removes_a_property_and_inline_conditions_work() {
    let s = scratch();
    let t = s.write(
        "w.yaml",
        "heat_template_version: wallaby
parameters:
  flag: {type: boolean, default: false}
conditions:
  set: {get_param: flag}
resources:
  r:
    type: Cairn::Test::Resource
    properties:
      Value: v
      Description: {if: [set, described, null]}
  only_when_set:
    type: Cairn::Test::Resource
    condition: {not: set}
outputs:
  made: {value: {if: [{equals: [{get_param: flag}, false]}, 'off', 'on']}}
",
    );
    let run = cairn(&s, &["deploy", "w", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let res = cairn(&s, &["resources", "w", "--output", "json"]).json();
    let ids: Vec<&str> = res["StackResources"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|r| r["LogicalResourceId"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, vec!["only_when_set", "r"]);
    let r = res["StackResources"][1]["PhysicalResourceId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let file = crate::update::file(&s, &r);
    assert!(file["Properties"].get("Description").is_none(), "{file}");
    assert_eq!(outputs(&s, "w"), "made = off\n");
}

/// Heat's own types: None, Value, RandomString and TestResource (a value,
/// replacement on demand, a failure that rolls the stack back).
#[test]
fn heats_own_resource_types() {
    let s = scratch();
    let body = |value: &str, fail: bool| {
        format!(
            "heat_template_version: 2018-08-31
resources:
  stub:
    type: OS::Heat::None
    properties: {{anything: [1, 2], goes: here}}
  answer:
    type: OS::Heat::Value
    properties: {{value: '42', type: number}}
  password:
    type: OS::Heat::RandomString
    properties:
      length: 16
      character_classes: [{{class: digits, min: 4}}, {{class: uppercase, min: 4}}]
  test:
    type: OS::Heat::TestResource
    properties: {{value: {value}, update_replace: true, fail: {fail}}}
outputs:
  answer: {{value: {{get_attr: [answer, value]}}}}
  password_is_ref: {{value: {{equals_check: {{get_resource: password}}}}}}
  password: {{value: {{get_attr: [password, value]}}}}
  output: {{value: {{get_attr: [test, output]}}}}
  test_ref: {{value: {{get_resource: test}}}}
"
        )
    };
    let t = s.write("heat.yaml", &body("one", false));
    let run = cairn(&s, &["deploy", "heat", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = cairn(&s, &["outputs", "heat", "--output", "json"]).json();
    let get = |k: &str| {
        out["Outputs"]
            .as_array()
            .and_then(|l| l.iter().find(|o| o["OutputKey"] == k))
            .and_then(|o| o["OutputValue"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(get("answer"), "42");
    let password = get("password");
    assert_eq!(password.len(), 16);
    assert!(
        password.chars().filter(char::is_ascii_digit).count() >= 4,
        "{password}"
    );
    assert!(
        password.chars().filter(char::is_ascii_uppercase).count() >= 4,
        "{password}"
    );
    // Heat's Ref of a RandomString is the string.
    assert_eq!(
        get("password_is_ref"),
        format!("{{\"equals_check\":\"{password}\"}}")
    );
    assert_eq!(get("output"), "one");
    let first_ref = get("test_ref");
    assert!(first_ref.starts_with("heat-test-"), "{first_ref}");

    // update_replace: a new value makes a new physical resource.
    s.write("heat.yaml", &body("two", false));
    let run = cairn(&s, &["deploy", "heat", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = cairn(&s, &["outputs", "heat", "--output", "json"]).json();
    let again = |k: &str| {
        out["Outputs"]
            .as_array()
            .and_then(|l| l.iter().find(|o| o["OutputKey"] == k))
            .and_then(|o| o["OutputValue"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(again("output"), "two");
    assert_ne!(again("test_ref"), first_ref);
    assert_eq!(again("password"), password, "RandomString is kept");

    // fail: true fails the update with Heat's text and rolls back.
    s.write("heat.yaml", &body("three", true));
    let run = cairn(&s, &["deploy", "heat", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("test UPDATE_FAILED: ValueError: resources.test: Test Resource failed test"),
        "{}",
        run.stderr()
    );
    assert_eq!(
        crate::update::status(&s, "heat"),
        "UPDATE_ROLLBACK_COMPLETE"
    );
    assert_eq!(cairn(&s, &["delete", "heat"]).code(), 0);
}

/// Environment files (`-e`, later ones win) and `get_file`: both kept with
/// the stack, so an update without -p uses them again.
#[test]
fn environments_and_get_file() {
    let s = scratch();
    std::fs::create_dir_all(s.dir.path().join("scripts")).expect("dir");
    s.write("scripts/boot.sh", "#!/bin/sh\necho boot\n");
    s.write("scripts/motd.txt", "$GREETING from the motd");
    let t = s.write(
        "files.yaml",
        "heat_template_version: 2021-04-16
parameters:
  greeting: {type: string, default: hello}
  size: {type: number, default: 1}
resources:
  script:
    type: OS::Server::Thing
    properties:
      Value: {get_file: scripts/boot.sh}
  motd:
    type: OS::Server::Other
    properties:
      Value: {str_replace: {template: {get_file: scripts/motd.txt}, params: {$GREETING: {get_param: greeting}}}}
  stub:
    type: My::Unwanted::Thing
outputs:
  script: {value: {get_attr: [script, Value]}}
  motd: {value: {get_attr: [motd, Value]}}
  size: {value: {get_param: size}}
",
    );
    s.write(
        "env1.yaml",
        "parameters:\n  greeting: hi\nresource_registry:\n  \"OS::Server::*\": \"Cairn::Test::*\"\n  \"My::Unwanted::Thing\": OS::Heat::None\n",
    );
    s.write(
        "env2.yaml",
        "parameter_defaults:\n  size: 7\nresource_registry:\n  \"OS::Server::Thing\": Cairn::Test::Resource\n  resources:\n    motd:\n      \"OS::Server::Other\": Cairn::Test::Resource\n",
    );
    let t = t.to_str().unwrap_or_default();
    let run = cairn(
        &s,
        &[
            "deploy",
            "env",
            t,
            "-e",
            "env1.yaml",
            "-e",
            "env2.yaml",
            "-p",
            "greeting=hey",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        outputs(&s, "env"),
        "script = #!/bin/sh\necho boot\n\nmotd = hey from the motd\nsize = 7\n"
    );
    let types: Vec<String> = cairn(&s, &["resources", "env", "--output", "json"]).json()
        ["StackResources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["LogicalResourceId"].as_str().unwrap_or_default(),
                r["ResourceType"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        types,
        vec![
            // Listed as written, as Heat does (served by what the
            // environment maps them to).
            "motd OS::Server::Other",
            "script OS::Server::Thing",
            "stub My::Unwanted::Thing"
        ]
    );
    // Without -p the environment's value; a changed file updates.
    s.write("scripts/boot.sh", "#!/bin/sh\necho boot v2\n");
    let run = cairn(
        &s,
        &["deploy", "env", t, "-e", "env1.yaml", "-e", "env2.yaml"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        outputs(&s, "env"),
        "script = #!/bin/sh\necho boot v2\n\nmotd = hi from the motd\nsize = 7\n"
    );
    // A file that is not there is named.
    std::fs::remove_file(s.dir.path().join("scripts/motd.txt")).expect("rm");
    let run = cairn(&s, &["deploy", "env", t, "-e", "env1.yaml"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("get_file scripts/motd.txt: cannot read"),
        "{}",
        run.stderr()
    );
    assert_eq!(cairn(&s, &["delete", "env"]).code(), 0);
}

/// `Transform: AWS::LanguageExtensions`: a loop over a list parameter of
/// table names makes resources and outputs; a new value adds and removes
/// tables; `cairn template --expanded` shows the expansion.
#[test]
fn language_extensions_for_each_over_table_names() {
    let s = scratch();
    let t = s.write(
        "tables.yaml",
        "AWSTemplateFormatVersion: '2010-09-09'
Transform: AWS::LanguageExtensions
Parameters:
  TableNames:
    Type: CommaDelimitedList
    Default: users,orders
Resources:
  Fn::ForEach::Tables:
    - TableName
    - !Ref TableNames
    - Table&{TableName}:
        Type: Cairn::Test::Resource
        Properties:
          Value: !Ref TableName
          Description: !Sub 'table-${TableName}'
Outputs:
  Fn::ForEach::TableOutputs:
    - TableName
    - !Ref TableNames
    - '&{TableName}Name':
        Value: !GetAtt [!Sub 'Table&{TableName}', Value]
",
    );
    let t = t.to_str().unwrap_or_default();
    // A transform run without review needs CAPABILITY_AUTO_EXPAND.
    let run = cairn(
        &s,
        &["deploy", "tables", t, "-p", "TableNames=users,order-items"],
    );
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        format!("error: {t}: Requires capabilities : [CAPABILITY_AUTO_EXPAND]")
    );
    let run = cairn(
        &s,
        &[
            "deploy",
            "tables",
            t,
            "-p",
            "TableNames=users,order-items",
            "--capabilities",
            "CAPABILITY_AUTO_EXPAND",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        outputs(&s, "tables"),
        "usersName = users\norderitemsName = order-items\n"
    );
    let expanded = cairn(&s, &["template", "tables", "--expanded"]).json();
    assert!(expanded.get("Transform").is_none());
    assert_eq!(
        expanded["Resources"]["Tableorderitems"]["Properties"],
        serde_json::json!({"Value": "order-items", "Description": "table-order-items"})
    );
    // The template as written is kept.
    assert!(cairn(&s, &["template", "tables"])
        .stdout()
        .contains("Fn::ForEach::Tables"));
    let before = sequence_after(&s, "tables", 0).len();
    let run = cairn(
        &s,
        &[
            "deploy",
            "tables",
            t,
            "-p",
            "TableNames=users,carts",
            "--capabilities",
            "CAPABILITY_AUTO_EXPAND",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let done: Vec<(String, String)> = sequence_after(&s, "tables", before)
        .into_iter()
        .filter(|e| e.1 == "CREATE_COMPLETE" || e.1 == "DELETE_COMPLETE")
        .map(|e| (e.0, e.1))
        .collect();
    assert_eq!(
        done,
        vec![
            ("Tablecarts".to_string(), "CREATE_COMPLETE".to_string()),
            ("Tableorderitems".to_string(), "DELETE_COMPLETE".to_string()),
        ]
    );
    assert_eq!(
        outputs(&s, "tables"),
        "usersName = users\ncartsName = carts\n"
    );
    assert_eq!(cairn(&s, &["delete", "tables"]).code(), 0);
    assert!(s.resource_files().is_empty());
    // A macro that is not defined is named.
    let other = s.write(
        "sam.yaml",
        "Transform: [AWS::LanguageExtensions, AWS::Serverless-2016-10-31]\nResources: {}\n",
    );
    let run = cairn(&s, &["validate", other.to_str().unwrap_or_default()]);
    assert!(
        run.stderr()
            .contains("No transform named 123456789012::AWS::Serverless-2016-10-31 found."),
        "{}",
        run.stderr()
    );
}

/// A provider template: the environment maps a type to a template file;
/// each resource of the type is a nested stack of it, its properties the
/// parameters, its attributes the outputs.
#[test]
fn a_provider_template_is_a_nested_stack_per_resource() {
    let s = scratch();
    std::fs::create_dir_all(s.dir.path().join("env")).expect("dir");
    s.write(
        "env/env.yaml",
        "resource_registry:\n  \"My::Server\": server.yaml\n",
    );
    s.write(
        "env/server.yaml",
        "heat_template_version: 2018-08-31
parameters:
  name: {type: string}
  flavor: {type: string}
  settings: {type: json}
resources:
  box:
    type: Cairn::Test::Resource
    properties:
      Value:
        str_replace:
          template: $n-$f-$p
          params: {$n: {get_param: name}, $f: {get_param: flavor}, $p: {get_param: [settings, ports, 1]}}
outputs:
  address: {value: {get_attr: [box, Value]}}
",
    );
    let t = s.write(
        "main.yaml",
        "heat_template_version: 2018-08-31
parameters:
  flavor: {type: string, default: small}
resources:
  web:
    type: My::Server
    properties:
      name: web-1
      flavor: {get_param: flavor}
      settings: {ports: [80, 443]}
  watcher:
    type: Cairn::Test::Resource
    properties:
      Value: {get_attr: [web, address]}
outputs:
  address: {value: {get_attr: [web, address]}}
",
    );
    let t = t.to_str().unwrap_or_default();
    let run = cairn(&s, &["deploy", "pt", t, "-e", "env/env.yaml"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(outputs(&s, "pt"), "address = web-1-small-443\n");
    let tree = cairn(&s, &["resources", "pt"]).stdout();
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, vec!["watcher", "web", "web/box"]);
    let child_id = |s: &Scratch| {
        cairn(s, &["resources", "pt", "--output", "json"]).json()["StackResources"]
            .as_array()
            .and_then(|l| l.iter().find(|r| r["LogicalResourceId"] == "web"))
            .and_then(|r| r["PhysicalResourceId"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let first = child_id(&s);
    // A property change updates the nested stack in place.
    let run = cairn(
        &s,
        &[
            "deploy",
            "pt",
            t,
            "-e",
            "env/env.yaml",
            "-p",
            "flavor=large",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(outputs(&s, "pt"), "address = web-1-large-443\n");
    assert_eq!(child_id(&s), first);
    let child_events: Vec<(String, String)> = sequence_after(&s, &first, 0)
        .into_iter()
        .filter(|e| e.0 == "box")
        .map(|e| (e.1, e.2))
        .collect();
    assert!(
        child_events.contains(&("UPDATE_COMPLETE".to_string(), String::new())),
        "{child_events:?}"
    );
    assert_eq!(cairn(&s, &["delete", "pt"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

/// The `Value` a test resource `logical` of `stack` (an operation running
/// in the background) was created with, once it is CREATE_COMPLETE: a
/// server's user data, here the script that signals a wait condition.
pub(crate) fn value_once_created(s: &Scratch, stack: &str, logical: &str) -> String {
    value_once(s, stack, logical, "CREATE_COMPLETE", "")
}

/// The `Value` of `logical` once it has `status` and its value holds
/// `holding`.
fn value_once(s: &Scratch, stack: &str, logical: &str, status: &str, holding: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        let run = cairn(s, &["resources", stack, "--output", "json"]);
        let res = if run.code() == 0 {
            run.json()
        } else {
            serde_json::Value::Null
        };
        let created = res["StackResources"]
            .as_array()
            .and_then(|l| {
                l.iter()
                    .find(|r| r["LogicalResourceId"] == logical && r["ResourceStatus"] == status)
            })
            .and_then(|r| r["PhysicalResourceId"].as_str())
            .map(String::from);
        if let Some(physical) = created {
            let value = crate::update::file(s, &physical)["Properties"]["Value"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if value.contains(holding) {
                return value;
            }
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{logical} of {stack} was never created"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Heat's wait condition: a server's user data (here a test resource's
/// value) carries the handle's `curl_cli`; running it signals the handle.
#[test]
fn heat_wait_condition_signalled_by_its_curl_cli() {
    let s = scratch();
    let t = s.write(
        "wait.yaml",
        "heat_template_version: 2018-08-31
resources:
  handle:
    type: OS::Heat::WaitConditionHandle
  server:
    type: Cairn::Test::Resource
    properties:
      Value:
        str_replace:
          template: |
            wc_notify --data-binary '{\"status\": \"SUCCESS\", \"id\": \"boot\", \"data\": \"ready\"}'
          params:
            wc_notify: {get_attr: [handle, curl_cli]}
  wait:
    type: OS::Heat::WaitCondition
    depends_on: server
    properties: {handle: {get_resource: handle}, timeout: 120}
outputs:
  data: {value: {get_attr: [wait, data]}}
",
    );
    let mut deploy = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "hw",
        t.to_str().unwrap_or_default(),
    ]);
    let script = value_once_created(&s, "hw", "server");
    assert!(
        script.starts_with("curl -i -X POST -H 'Content-Type: application/json'"),
        "{script}"
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("sh runs");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("200 OK"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        deploy.wait().expect("deploy ends").success(),
        "{}",
        s.spawned_stderr()
    );
    assert_eq!(outputs(&s, "hw"), "data = {\"boot\":\"ready\"}\n");
}

/// heat/engine/resources/openstack/heat/wait_condition_handle.py:
/// `OS::Heat::UpdateWaitConditionHandle` raises UpdateReplace on every
/// update, so each update makes a new handle and a new wait: signals sent
/// before do not count, the new configuration must signal again.
#[test]
fn an_update_wait_condition_handle_is_new_on_every_update() {
    let s = scratch();
    let t = s.write(
        "rollout.yaml",
        "heat_template_version: 2018-08-31
parameters:
  config: {type: string, default: v1}
resources:
  handle:
    type: OS::Heat::UpdateWaitConditionHandle
  server:
    type: Cairn::Test::Resource
    properties:
      Value:
        str_replace:
          template: |
            curl -sS -X PUT -H 'Content-Type:' --data-binary '{\"Status\": \"SUCCESS\", \"Reason\": \"configured\", \"UniqueId\": \"boot\", \"Data\": \"$config\"}' '$url'
          params:
            $config: {get_param: config}
            $url: {get_resource: handle}
  wait:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 120}
outputs:
  data: {value: {get_attr: [wait, data]}}
",
    );
    let signal = |script: &str| {
        let out = std::process::Command::new("sh")
            .args(["-c", script])
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{script}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let handle = |s: &Scratch| -> (String, String) {
        let listed = cairn(s, &["resources", "hr", "--output", "json"]).json();
        listed["StackResources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["LogicalResourceId"] == "handle")
            .map(|r| {
                let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                (text("ResourceType"), text("PhysicalResourceId"))
            })
            .unwrap_or_default()
    };
    let path = t.to_str().unwrap_or_default();
    let mut deploy = s.spawn_cairn(&["--config", "cairn.toml", "deploy", "hr", path]);
    signal(&value_once_created(&s, "hr", "server"));
    assert!(
        deploy.wait().expect("deploy ends").success(),
        "{}",
        s.spawned_stderr()
    );
    assert_eq!(outputs(&s, "hr"), "data = {\"boot\":\"v1\"}\n");
    let (shown, first) = handle(&s);
    assert_eq!(shown, "OS::Heat::UpdateWaitConditionHandle");

    // The change set shows the handle replaced, and the wait with it.
    let plan = cairn(
        &s,
        &["plan", "hr", path, "-p", "config=v2", "--output", "json"],
    );
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    let changes: Vec<(String, String)> = plan.json()["Changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let rc = &c["ResourceChange"];
            let text = |k: &str| rc[k].as_str().unwrap_or_default().to_string();
            (text("LogicalResourceId"), text("Replacement"))
        })
        .collect();
    assert!(
        changes.contains(&("handle".into(), "True".into())),
        "{changes:?}"
    );
    // Its handle's new URL is known only once made: CloudFormation's
    // Conditional.
    assert!(
        changes.contains(&("wait".into(), "Conditional".into())),
        "{changes:?}"
    );

    // The update waits for a signal to the new handle: v2 must report.
    let mut deploy = s.spawn_cairn(&[
        "--config",
        "cairn.toml",
        "deploy",
        "hr",
        path,
        "-p",
        "config=v2",
    ]);
    signal(&value_once(&s, "hr", "server", "UPDATE_COMPLETE", "v2"));
    assert!(
        deploy.wait().expect("deploy ends").success(),
        "{}",
        s.spawned_stderr()
    );
    assert_eq!(outputs(&s, "hr"), "data = {\"boot\":\"v2\"}\n");
    let (_, second) = handle(&s);
    assert_ne!(first, second);
    assert!(second.starts_with("http"), "{second}");
}

/// OS::Heat::Stack: a nested stack of an inline template; a parameter
/// change updates it in place; its outputs are read by path.
#[test]
fn os_heat_stack_nests_an_inline_template() {
    let s = scratch();
    let t = s.write(
        "hstack.yaml",
        "heat_template_version: 2018-08-31
parameters:
  word: {type: string, default: hello}
resources:
  inner:
    type: OS::Heat::Stack
    properties:
      parameters: {w: {get_param: word}}
      template:
        heat_template_version: 2018-08-31
        parameters:
          w: {type: string}
        resources:
          thing:
            type: Cairn::Test::Resource
            properties: {Value: {get_param: w}}
        outputs:
          said: {value: {list_join: [' ', [{get_attr: [thing, Value]}, world]]}}
outputs:
  said: {value: {get_attr: [inner, outputs, said]}}
",
    );
    let t = t.to_str().unwrap_or_default();
    assert_eq!(cairn(&s, &["deploy", "hs", t]).code(), 0);
    assert_eq!(outputs(&s, "hs"), "said = hello world\n");
    let names: Vec<String> = cairn(&s, &["resources", "hs"])
        .stdout()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert_eq!(names, vec!["inner", "inner/thing"]);
    let run = cairn(&s, &["deploy", "hs", t, "-p", "word=goodbye"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(outputs(&s, "hs"), "said = goodbye world\n");
    assert_eq!(cairn(&s, &["delete", "hs"]).code(), 0);
    assert!(s.resource_files().is_empty());
}

/// OS::Heat::ResourceGroup on the engine's groups: `%index%` in each
/// member's properties, count 5 → 3 removing the members removal_policies
/// names, a rolling update under min_in_service, `refs`. The rolling update
/// is Heat's (resource_group.py `_get_batches` and
/// `_assemble_for_rolling_update`): the members keep their names and
/// physical ids (updated in place), the highest index first, with a surge
/// member made so that min_in_service members stay untouched and removed
/// by the last batch.
#[test]
fn resource_group_counts_removes_and_rolls() {
    let s = scratch();
    let t = s.write(
        "rg.yaml",
        "heat_template_version: 2018-08-31
parameters:
  count: {type: number, default: 5}
  removal: {type: comma_delimited_list, default: ''}
  version: {type: string, default: v1}
resources:
  group:
    type: OS::Heat::ResourceGroup
    update_policy:
      rolling_update: {min_in_service: 2, max_batch_size: 2, pause_time: 0}
    properties:
      count: {get_param: count}
      removal_policies: [{resource_list: {get_param: removal}}]
      resource_def:
        type: Cairn::Test::Resource
        properties:
          Value: {list_join: ['-', [member, '%index%', {get_param: version}]]}
outputs:
  refs: {value: {get_attr: [group, refs]}}
",
    );
    let t = t.to_str().unwrap_or_default();
    let rows = |s: &Scratch| -> Vec<serde_json::Value> {
        cairn(s, &["resources", "rg", "--output", "json"]).json()["StackResources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["GroupResourceId"] == "group")
            .collect()
    };
    let members = |s: &Scratch| -> Vec<(String, String)> {
        rows(s)
            .iter()
            .map(|r| {
                let physical = r["PhysicalResourceId"].as_str().unwrap_or_default();
                let value = crate::update::file(s, physical)["Properties"]["Value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (
                    r["LogicalResourceId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    value,
                )
            })
            .collect()
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(cairn(&s, &["deploy", "rg", t]).code(), 0);
    assert_eq!(
        members(&s),
        vec![
            pair("group-0", "member-0-v1"),
            pair("group-1", "member-1-v1"),
            pair("group-2", "member-2-v1"),
            pair("group-3", "member-3-v1"),
            pair("group-4", "member-4-v1"),
        ]
    );
    let run = cairn(
        &s,
        &["deploy", "rg", t, "-p", "count=3", "-p", "removal=1,3"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        members(&s),
        vec![
            pair("group-0", "member-0-v1"),
            pair("group-2", "member-2-v1"),
            pair("group-4", "member-4-v1")
        ]
    );
    let physical_ids = |s: &Scratch| -> Vec<String> {
        rows(s)
            .iter()
            .map(|r| {
                r["PhysicalResourceId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    let kept = physical_ids(&s);
    let before = sequence_after(&s, "rg", 0).len();
    let run = cairn(
        &s,
        &[
            "deploy",
            "rg",
            t,
            "-p",
            "count=3",
            "-p",
            "removal=1,3",
            "-p",
            "version=v2",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let batches: Vec<String> = sequence_after(&s, "rg", before)
        .into_iter()
        .filter(|e| e.2.starts_with("Rolling update batch"))
        .map(|e| e.2)
        .collect();
    assert_eq!(
        batches,
        vec![
            "Rolling update batch 1 of 3: creating group-5, then updating group-4",
            "Rolling update batch 2 of 3: updating group-2, group-0",
            "Rolling update batch 3 of 3: deleting group-5",
        ]
    );
    assert_eq!(
        members(&s),
        vec![
            pair("group-0", "member-0-v2"),
            pair("group-2", "member-2-v2"),
            pair("group-4", "member-4-v2")
        ]
    );
    assert_eq!(physical_ids(&s), kept);
    // Each member's own events: updated in place, never replaced.
    let member_events: Vec<(String, String)> = sequence_after(&s, "rg", before)
        .into_iter()
        .filter(|e| e.0 == "group-4")
        .map(|e| (e.1, e.2))
        .collect();
    assert_eq!(
        member_events,
        vec![
            ("UPDATE_IN_PROGRESS".to_string(), String::new()),
            ("UPDATE_COMPLETE".to_string(), String::new())
        ]
    );
    let refs: serde_json::Value =
        serde_json::from_str(outputs(&s, "rg").trim_start_matches("refs = ").trim())
            .expect("refs is JSON");
    assert_eq!(refs.as_array().map(Vec::len), Some(3));
    assert_eq!(cairn(&s, &["delete", "rg"]).code(), 0);
    assert!(s.resource_files().is_empty());
}
