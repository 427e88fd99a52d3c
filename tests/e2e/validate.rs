use serde_json::json;

use crate::support::Scratch;

#[test]
fn valid_template_prints_description_and_parameters() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Description: demo\nParameters:\n  Size: {Type: Number, Default: 3, Description: how many}\n  Pw: {Type: String, NoEcho: true, Default: x}\nResources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref Size}\n",
    );
    let run = s.cairn(&["validate", t.to_str().unwrap(), "--output", "json"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        run.json(),
        json!({
            "Parameters": [
                {"ParameterKey": "Size", "NoEcho": false, "DefaultValue": "3", "Description": "how many"},
                {"ParameterKey": "Pw", "NoEcho": true, "DefaultValue": "****"}
            ],
            "Capabilities": [],
            "Description": "demo"
        })
    );
    let run = s.cairn(&["validate", t.to_str().unwrap()]);
    assert_eq!(run.code(), 0);
    assert_eq!(
        run.stdout(),
        format!(
            "Template {} is valid.\nDescription: demo\nParameters:\n  Size [Number] (default 3) - how many\n  Pw [String] (default ****) NoEcho\n",
            t.display()
        )
    );
}

#[test]
fn invalid_templates_exit_1_with_the_precise_error() {
    let s = Scratch::new();
    let cases = [
        (
            "{\"Resources\": {\"A\": {\"Type\": \"Cairn::Test::Resource\"}}, \"a\": 1}",
            "Template format error: Invalid template property or properties [a]",
        ),
        (
            "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref Nope}\n",
            "Template format error: Unresolved resource dependencies [Nope] in the Resources block of the template",
        ),
        (
            "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref B}\n  B:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Ref A}\n",
            "Template format error: Circular dependency between resources: [A, B]",
        ),
        ("Resources:\n  A:\n    Type: Acme::Nothing\n", "Template format error: Unrecognized resource types: [Acme::Nothing]"),
        (
            "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Bogus: 1}\n",
            "Properties validation failed for resource A with message: #: extraneous key [Bogus] is not permitted",
        ),
        ("Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties: {Value: !Bogus x}\n", "Unsupported YAML tag !Bogus"),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let t = s.write(&format!("t{i}.yaml"), text);
        let run = s.cairn(&["validate", t.to_str().unwrap()]);
        assert_eq!(run.code(), 1, "case {i}: {}", run.stdout());
        let first_line = run.stderr().lines().next().unwrap_or_default().to_string();
        assert!(
            first_line.starts_with(&format!("error: {}: {expected}", t.display())),
            "case {i}: {first_line}"
        );
        assert_eq!(
            run.stderr().lines().count(),
            1,
            "case {i}: one line: {}",
            run.stderr()
        );
    }
}

#[test]
fn yaml_errors_carry_line_and_column() {
    let s = Scratch::new();
    let t = s.write("t.yaml", "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value: !Select [3, [a]]\n");
    let bad = s.write("b.yaml", "Resources:\n  A:\n    Properties: {}\n");
    let run = s.cairn(&["validate", bad.to_str().unwrap()]);
    assert_eq!(
        run.stderr().trim_end(),
        format!(
            "error: {}: Template format error: Every Resources object must contain a Type member. (at /Resources/A, line 3, column 5)",
            bad.display()
        )
    );
    // The static pass's errors carry them too.
    let run = s.cairn(&["validate", t.to_str().unwrap()]);
    assert_eq!(
        run.stderr().trim_end(),
        format!(
            "error: {}: Template error: Fn::Select cannot select nonexistent value at index 3 (at /Resources/A/Properties/Value/Fn::Select, line 5, column 14)",
            t.display()
        )
    );
}

#[test]
fn missing_file_and_bad_config_are_one_clear_line() {
    let s = Scratch::new();
    let run = s.cairn(&["validate", "nope.yaml"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .starts_with("error: cannot read template nope.yaml: "),
        "{}",
        run.stderr()
    );
    let cfg = s.write("c.toml", "[engine]\nmax_concurency = 1\n");
    let t = s.write("t.yaml", "Resources:\n  A: {Type: Cairn::Test::Resource}\n");
    let run = s.cairn(&[
        "--config",
        cfg.to_str().unwrap(),
        "validate",
        t.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().starts_with(&format!(
            "error: invalid config file {}: line 2: unknown field `max_concurency`",
            cfg.display()
        )),
        "{}",
        run.stderr()
    );
    assert_eq!(run.stderr().lines().count(), 1, "{}", run.stderr());
}

/// `cairn validate` runs the static pass `cairn deploy` runs before anything
/// starts (parameters from the defaults and -p, conditions, every intrinsic
/// that needs no provider output) and reports every error it finds.
#[test]
fn validate_runs_the_static_pass_and_reports_every_error() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Transform: AWS::LanguageExtensions\nParameters:\n  Index: {Type: Number, Default: 0}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Select [99999999999999999999, [a]]}}\n  B: {Type: Cairn::Test::Resource, Properties: {Value: !Select [-1, [a]]}}\n  C: {Type: Cairn::Test::Resource, Properties: {Value: !Join [',', !Split ['', 'abc']]}}\n  D: {Type: Cairn::Test::Resource, Properties: {Value: !Length 5}}\n  E: {Type: Cairn::Test::Resource, Properties: {Value: !Join [',', !Cidr ['0.0.0.0/0', 256, 32]]}}\n  F: {Type: Cairn::Test::Resource, Properties: {Value: !Select [!Ref Index, [a]]}}\n",
    );
    let path = t.to_str().unwrap_or_default();
    let run = s.cairn(&["validate", path]);
    assert_eq!(run.code(), 1, "{}", run.stdout());
    let stderr = run.stderr();
    let errors: Vec<&str> = stderr.lines().collect();
    let expected = [
        "Template error: Fn::Select index must be an integer (at /Resources/A/",
        "Template error: Fn::Select cannot select nonexistent value at index -1 (at /Resources/B/",
        "Template error: Fn::Split delimiter must not be empty (at /Resources/C/",
        "Template error: Fn::Length requires a list (at /Resources/D/",
        "Template error: Fn::Cidr: a /0 block holds only 1 subnets of 32 host bits, 256 requested (at /Resources/E/",
    ];
    assert_eq!(errors.len(), expected.len(), "{}", run.stderr());
    for (line, want) in errors.iter().zip(expected) {
        assert!(
            line.starts_with(&format!("error: {path}: {want}")),
            "{line}"
        );
    }
    // The same template is refused by deploy with the first of them, and a
    // parameter given with -p is checked as deploy checks it.
    let run = s.cairn(&["deploy", "st", path]);
    assert_eq!(run.code(), 1);
    assert!(run.stderr().contains(expected[0]), "{}", run.stderr());
    let t = s.write(
        "p.yaml",
        "Parameters:\n  Index: {Type: Number, Default: 0}\nResources:\n  F: {Type: Cairn::Test::Resource, Properties: {Value: !Select [!Ref Index, [a]]}}\n",
    );
    let p = t.to_str().unwrap_or_default();
    assert_eq!(s.cairn(&["validate", p]).code(), 0);
    let run = s.cairn(&["validate", p, "-p", "Index=3"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Template error: Fn::Select cannot select nonexistent value at index 3"),
        "{}",
        run.stderr()
    );
    // Without a value for a parameter that has no default, the template is
    // still valid (as ValidateTemplate says), with a note.
    let t = s.write(
        "n.yaml",
        "Parameters:\n  Need: {Type: String}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref Need}}\n",
    );
    let run = s.cairn(&["validate", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run
        .stderr()
        .contains("note: parameters [Need] have no default"));
}

/// An output that is used and names a resource whose condition is false:
/// CloudFormation's text, from validate and deploy alike.
#[test]
fn an_output_of_a_resource_whose_condition_is_false_is_refused_in_the_outputs_block() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Conditions:\n  No: !Equals [a, b]\nResources:\n  R: {Type: Cairn::Test::Resource, Condition: No}\n  S: {Type: Cairn::Test::Resource}\nOutputs:\n  O: {Value: !Ref R}\n  Fine: {Value: !Ref R, Condition: No}\n",
    );
    let path = t.to_str().unwrap_or_default();
    let text = "Template format error: Unresolved resource dependencies [R] in the Outputs block of the template (at /Outputs/O";
    for args in [&["validate", path][..], &["deploy", "st", path]] {
        let run = s.cairn(args);
        assert_eq!(run.code(), 1, "{args:?}");
        assert!(run.stderr().contains(text), "{args:?}: {}", run.stderr());
    }
}

/// AllowedPattern is a Java regular expression in CloudFormation: the
/// look-ahead of aws-cloudformation-templates' VPCFlowLogsS3 and the
/// `[\w-\+]` class of its Neptune template work, and values are checked.
#[test]
fn allowed_patterns_in_java_syntax_are_accepted_and_checked() {
    let s = Scratch::new();
    let t = s.write(
        "t.yaml",
        "Parameters:\n  Bucket:\n    Type: String\n    Default: ''\n    AllowedPattern: '^$|^(?=^.{3,63}$)(?!.*[.-]{2})(?!.*[--.]{2})(?!^(?:(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\\.){3}(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$)[a-z0-9][a-z0-9.-]*[a-z0-9]$'\n  Db:\n    Type: String\n    Default: neptune-db\n    AllowedPattern: '[\\w-\\+]+'\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref Db}}\n",
    );
    let path = t.to_str().unwrap_or_default();
    let run = s.cairn(&["validate", path]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = s.cairn(&[
        "deploy",
        "st",
        path,
        "-p",
        "Bucket=my-flow-logs",
        "-p",
        "Db=a+b-c",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let run = s.cairn(&["validate", path, "-p", "Bucket=my..logs"]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("Parameter 'Bucket' must match pattern"),
        "{}",
        run.stderr()
    );
}

/// An error about a type served through an alias says which type serves it;
/// a Rules section written with its short tags gets the Rules refusal.
#[test]
fn aliased_types_are_named_and_account_lookups_in_rules_are_refused() {
    let s = Scratch::new();
    let t = s.write(
        "g.yaml",
        "Resources:\n  G:\n    Type: AWS::AutoScaling::AutoScalingGroup\n    Properties: {LaunchTemplate: {}, LaunchConfigurationName: lc, MinSize: 1, MaxSize: 2}\n",
    );
    let run = s.cairn(&["validate", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr()
            .contains("extraneous key [LaunchTemplate] is not permitted"),
        "{}",
        run.stderr()
    );
    assert!(
        run.stderr().contains("(AWS::AutoScaling::AutoScalingGroup is an alias: it is served by Cairn::Group::AutoScalingGroup of provider engine:groups, whose schema this is)"),
        "{}",
        run.stderr()
    );
    let t = s.write(
        "r.yaml",
        "Parameters:\n  Env: {Type: String, Default: dev}\nRules:\n  ProdOnly:\n    RuleCondition: !Equals [!Ref Env, prod]\n    Assertions:\n      - Assert: !Contains [[a, b], !ValueOf [Env, Tag]]\n        AssertDescription: no\nResources:\n  A: {Type: Cairn::Test::Resource}\n",
    );
    let run = s.cairn(&["validate", t.to_str().unwrap_or_default()]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Template format error: Fn::ValueOf reads the AWS account's resources, which Cairn does not look up; assert on the parameter's value instead (at /Rules/ProdOnly/Assertions/0/Assert/Fn::Contains/1/Fn::ValueOf"),
        "{}",
        run.stderr()
    );
}

const RULES: &str = "Parameters:
  Env: {Type: String, Default: dev}
  Size: {Type: String, Default: small}
  Zones: {Type: CommaDelimitedList, Default: 'a,b'}
Rules:
  ProdIsLarge:
    RuleCondition: !Equals [!Ref Env, prod]
    Assertions:
      - Assert: !Contains [[large, xlarge], !Ref Size]
        AssertDescription: A prod stack must be large or xlarge
  KnownZones:
    Assertions:
      - Assert: !EachMemberIn [!Ref Zones, [a, b, c]]
        AssertDescription: Zones must be among a, b and c
      - Assert: !Not [!EachMemberEquals [!Ref Zones, c]]
Resources:
  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref Size}}
";

/// CloudFormation's Rules section (rules-section-structure): a rule whose
/// RuleCondition is false is skipped; a false Assert refuses the create,
/// the update and the change set before anything is made, with its
/// AssertDescription; `cairn validate -p` and deploy's static pass give
/// the same text.
#[test]
fn rules_assert_on_parameter_values_before_anything_runs() {
    let s = Scratch::new();
    let t = s.write("rules.yaml", RULES);
    let t = t.to_str().unwrap_or_default();
    // Valid with the defaults (the prod rule is skipped).
    let run = s.cairn(&["validate", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let prod_small = "A prod stack must be large or xlarge (at /Rules/ProdIsLarge/Assertions/0/Assert, line 9, column 9)";
    let run = s.cairn(&["validate", t, "-p", "Env=prod"]);
    assert_eq!(run.code(), 1);
    assert_eq!(run.stderr().trim_end(), format!("error: {t}: {prod_small}"));
    let run = s.cairn(&["deploy", "ruled", t, "-p", "Env=prod"]);
    assert_eq!(run.code(), 1);
    assert_eq!(run.stderr().trim_end(), format!("error: {t}: {prod_small}"));
    assert!(s.resource_files().is_empty());
    // Nothing was recorded: the stack does not exist.
    assert_eq!(s.cairn(&["describe", "ruled"]).code(), 1);
    let run = s.cairn(&["deploy", "ruled", t, "-p", "Env=prod", "-p", "Size=large"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // An update and a change set are refused alike; a rule without
    // AssertDescription names itself.
    let run = s.cairn(&[
        "deploy",
        "ruled",
        t,
        "-p",
        "Env=prod",
        "-p",
        "Size=large",
        "-p",
        "Zones=a,d",
    ]);
    assert_eq!(run.code(), 1);
    assert!(run.stderr().ends_with(": Zones must be among a, b and c (at /Rules/KnownZones/Assertions/0/Assert, line 13, column 9)\n"), "{}", run.stderr());
    let run = s.cairn(&[
        "plan",
        "ruled",
        t,
        "-p",
        "Env=prod",
        "-p",
        "Size=large",
        "-p",
        "Zones=c,c",
    ]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains(
            "Assertion 1 of rule KnownZones failed (at /Rules/KnownZones/Assertions/1/Assert"
        ),
        "{}",
        run.stderr()
    );
    assert_eq!(s.cairn(&["change-sets", "ruled"]).stdout(), "");
    let run = s.cairn(&[
        "deploy",
        "ruled",
        t,
        "-p",
        "Env=prod",
        "-p",
        "Size=xlarge",
        "-p",
        "Zones=a,c",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
}

/// A value a built-in type does not understand is refused before anything
/// runs, with the values it accepts (it used to be ignored silently).
#[test]
fn values_a_built_in_type_does_not_understand_are_refused() {
    let s = Scratch::new();
    for (value, shown, at) in [
        ("true", "true", "/Fail"),
        ("[create, later]", "\"later\"", "/Fail/1"),
    ] {
        let t = s.write(
            "f.yaml",
            &format!(
                "Resources:\n  A: {{Type: Cairn::Test::Resource, Properties: {{Fail: {value}}}}}\n"
            ),
        );
        let run = s.cairn(&["validate", t.to_str().unwrap_or_default()]);
        assert_eq!(run.code(), 1);
        assert!(
            run.stderr().contains(&format!("Properties validation failed for resource A with message: #{at}: {shown} is not an accepted value (accepted: create, update, delete)")),
            "{}",
            run.stderr()
        );
    }
}

/// CloudFormation accepts `Version` on a custom resource (templates
/// published by AWS carry `Version: "1.0"`) and nowhere else: `cairn
/// validate` and `cairn deploy` agree, and the custom resource deploys
/// through its handler.
#[test]
fn version_is_accepted_on_custom_resources_only() {
    let (s, h) = crate::webhooks::with_handler();
    let arn = crate::webhooks::ARN;
    let custom = s.write(
        "custom.yaml",
        &format!(
            "Resources:\n  W:\n    Type: Custom::Widget\n    Version: '1.0'\n    Properties:\n      ServiceToken: {arn}\n"
        ),
    );
    let custom = custom.to_str().unwrap_or_default();
    let valid = crate::update::cairn(&s, &["validate", custom]);
    assert_eq!(valid.code(), 0, "{}", valid.stderr());
    let run = crate::update::cairn(&s, &["deploy", "versioned", custom]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(h.calls().len(), 1);

    let plain = s.write(
        "plain.yaml",
        "Resources:\n  R:\n    Type: Cairn::Test::Resource\n    Version: '1.0'\n",
    );
    let plain = plain.to_str().unwrap_or_default();
    let text = "Template format error: Invalid template resource property 'Version'";
    for command in ["validate", "deploy"] {
        let args: Vec<&str> = if command == "validate" {
            vec!["validate", plain]
        } else {
            vec!["deploy", "plain", plain]
        };
        let refused = crate::update::cairn(&s, &args);
        assert_eq!(refused.code(), 1, "{command}");
        assert!(
            refused.stderr().contains(text),
            "{command}: {}",
            refused.stderr()
        );
    }
}

/// An IAM role, served here by `OS::Heat::None`, which takes any
/// properties (CloudFormation's IAM types are not Cairn's): named, so it
/// needs CAPABILITY_NAMED_IAM.
const ROLE: &str = "Resources:\n  Role: {Type: AWS::IAM::Role, Properties: {RoleName: app}}\n";

/// CloudFormation's capabilities (InsufficientCapabilitiesException): a
/// template with IAM resources is refused by deploy and plan until they
/// are acknowledged, a named one needs CAPABILITY_NAMED_IAM (which covers
/// CAPABILITY_IAM), and nothing is recorded meanwhile; validate names
/// what the template requires.
#[test]
fn capabilities_are_required_as_cloudformation_requires_them() {
    let s = Scratch::new();
    s.write(
        "cairn.toml",
        "[type_aliases]\n\"AWS::IAM::Role\" = \"OS::Heat::None\"\n",
    );
    let t = s.write("role.yaml", ROLE);
    let t = t.to_str().unwrap_or_default();
    let cairn = |args: &[&str]| {
        let mut all = vec!["--config", "cairn.toml"];
        all.extend_from_slice(args);
        s.cairn(&all)
    };
    let run = cairn(&["validate", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout().contains("Capabilities: CAPABILITY_NAMED_IAM (The following resource(s) require capabilities: [AWS::IAM::Role])"),
        "{}",
        run.stdout()
    );
    let refused = format!("error: {t}: Requires capabilities : [CAPABILITY_NAMED_IAM]");
    let run = cairn(&["deploy", "iam", t]);
    assert_eq!(run.code(), 1);
    assert_eq!(run.stderr().trim_end(), refused);
    let run = cairn(&["deploy", "iam", t, "--capabilities", "CAPABILITY_IAM"]);
    assert_eq!(run.stderr().trim_end(), refused);
    assert_eq!(cairn(&["describe", "iam"]).code(), 1);
    let needs_named = |run: crate::support::Run| {
        assert_eq!(run.code(), 1);
        assert!(
            run.stderr()
                .ends_with(": Requires capabilities : [CAPABILITY_NAMED_IAM]\n"),
            "{}",
            run.stderr()
        );
    };
    needs_named(cairn(&["plan", "iam", t, "--name", "first"]));
    let run = cairn(&["deploy", "iam", t, "--capabilities", "CAPABILITY_NAMED_IAM"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(cairn(&["resources", "iam"]).stdout().starts_with("Role "));
    // An update is checked too: the named role still needs
    // CAPABILITY_NAMED_IAM, which covers the unnamed one.
    let unnamed = s.write(
        "unnamed.yaml",
        "Resources:\n  Role: {Type: AWS::IAM::Role, Properties: {RoleName: app}}\n  Other: {Type: AWS::IAM::Role, Properties: {Value: x}}\n",
    );
    let unnamed = unnamed.to_str().unwrap_or_default();
    needs_named(cairn(&[
        "deploy",
        "iam",
        unnamed,
        "--capabilities",
        "CAPABILITY_IAM",
    ]));
    let run = cairn(&[
        "deploy",
        "iam",
        unnamed,
        "--capabilities",
        "CAPABILITY_NAMED_IAM",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
}

/// `AWS::Include` (issue 31 point 2, the include part): snippets beside
/// the template inserted at the top level, as a key inside Resources and
/// as a property's value; validate and deploy read them alike; run
/// directly it needs CAPABILITY_AUTO_EXPAND; a missing snippet is named.
#[test]
fn aws_include_inserts_snippets_from_files() {
    let s = Scratch::new();
    s.write("outputs.yaml", "Outputs:\n  Made: {Value: !Ref Main}\n");
    s.write(
        "more.yaml",
        "Extra:\n  Type: Cairn::Test::Resource\n  Properties: {Name: extra}\n",
    );
    s.write("value.json", "\"from-a-snippet\"");
    let t = s.write(
        "inc.yaml",
        "Transform:\n  Name: AWS::Include\n  Parameters: {Location: outputs.yaml}\nResources:\n  Main:\n    Type: Cairn::Test::Resource\n    Properties:\n      Name: main\n      Value:\n        Fn::Transform:\n          Name: AWS::Include\n          Parameters: {Location: value.json}\n  Fn::Transform:\n    Name: AWS::Include\n    Parameters: {Location: more.yaml}\n",
    );
    let t = t.to_str().unwrap_or_default();
    let run = s.cairn(&["validate", t]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stdout()
            .contains("Capabilities: CAPABILITY_AUTO_EXPAND"),
        "{}",
        run.stdout()
    );
    let run = s.cairn(&["deploy", "inc", t]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        run.stderr().trim_end(),
        format!("error: {t}: Requires capabilities : [CAPABILITY_AUTO_EXPAND]")
    );
    let run = s.cairn(&[
        "deploy",
        "inc",
        t,
        "--capabilities",
        "CAPABILITY_AUTO_EXPAND",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(s.resource_files(), vec!["extra.json", "main.json"]);
    assert_eq!(s.cairn(&["outputs", "inc"]).stdout(), "Made = main\n");
    // The original template is kept; the processed one has the snippets.
    assert!(s
        .cairn(&["template", "inc"])
        .stdout()
        .contains("Fn::Transform"));
    let processed = s.cairn(&["template", "inc", "--stage", "processed"]).json();
    assert_eq!(
        processed["Resources"]["Main"]["Properties"]["Value"],
        "from-a-snippet"
    );
    assert_eq!(
        processed["Resources"]["Extra"]["Type"],
        "Cairn::Test::Resource"
    );
    assert_eq!(
        processed["Outputs"]["Made"]["Value"],
        serde_json::json!({"Ref": "Main"})
    );
    assert!(processed.get("Transform").is_none(), "{processed}");
    // A snippet that is not there is named, by validate and deploy alike.
    let lost = s.write(
        "lost.yaml",
        "Resources:\n  Fn::Transform:\n    Name: AWS::Include\n    Parameters: {Location: nowhere.yaml}\n",
    );
    let lost = lost.to_str().unwrap_or_default();
    for args in [vec!["validate", lost], vec!["deploy", "lost", lost]] {
        let run = s.cairn(&args);
        assert_eq!(run.code(), 1);
        assert!(
            run.stderr()
                .contains("lost.yaml: AWS::Include Location nowhere.yaml: cannot read "),
            "{}",
            run.stderr()
        );
    }
    // Remote snippets are the engine's: https:// only when [nested]
    // allow_https is set, s3:// never; validate and deploy say the same.
    for (location, why) in [
        (
            "s3://bucket/r.yaml",
            "Cairn reads no S3; give it as a path beside the template, a file:/// path or an https:// URL",
        ),
        (
            "https://snippets.example/r.yaml",
            "https://snippets.example/r.yaml: only https:// URLs are fetched, and only with [nested] allow_https = true",
        ),
    ] {
        let remote = s.write(
            "remote.yaml",
            &format!("Resources:\n  Fn::Transform:\n    Name: AWS::Include\n    Parameters: {{Location: '{location}'}}\n"),
        );
        let remote = remote.to_str().unwrap_or_default();
        for args in [vec!["validate", remote], vec!["deploy", "remote", remote]] {
            let run = s.cairn(&args);
            assert_eq!(run.code(), 1);
            assert!(
                run.stderr().contains(&format!(
                    "Template format error: AWS::Include: the snippet at {location} cannot be read: {why}"
                )),
                "{args:?}: {}",
                run.stderr()
            );
        }
    }
}
