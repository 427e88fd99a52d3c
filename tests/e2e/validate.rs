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
    // Select is evaluated at deploy time; validate catches the structural error below.
    let bad = s.write("b.yaml", "Resources:\n  A:\n    Properties: {}\n");
    let run = s.cairn(&["validate", bad.to_str().unwrap()]);
    assert_eq!(
        run.stderr().trim_end(),
        format!(
            "error: {}: Template format error: Every Resources object must contain a Type member. (at /Resources/A, line 3, column 5)",
            bad.display()
        )
    );
    assert_eq!(s.cairn(&["validate", t.to_str().unwrap()]).code(), 0);
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
