//! The README's intrinsic-function and YAML tables, row by row: where
//! CloudFormation takes each function (its intrinsic-function reference,
//! the template section references, cfn-lint's E8003 list for Conditions
//! and the cross-stack reference rules for exports) and what CloudFormation's
//! YAML reader takes, each accepted or refused by `cairn validate` with the
//! text the README gives.

use crate::support::Scratch;

/// A resource every case may name.
const B: &str = "  B: {Type: Cairn::Test::Resource}\n";

/// What `cairn validate` must answer: valid, or an error containing this.
enum Expect {
    Valid,
    Refused(&'static str),
}
use Expect::{Refused, Valid};

/// (row, template without the resource B, expected answer).
fn intrinsic_cases() -> Vec<(&'static str, String, Expect)> {
    let with_b = |before: &str, after: &str| format!("{before}Resources:\n{B}{after}");
    let prop = |value: &str| {
        format!(
            "Resources:\n{B}  C: {{Type: Cairn::Test::Resource, Properties: {{Value: {value}}}}}\n"
        )
    };
    let cond = |expr: &str| {
        with_b(
            &format!("Mappings:\n  M: {{a: {{b: c}}}}\nConditions:\n  C: !Equals [{expr}, x]\n"),
            "",
        )
    };
    vec![
        // Resources' properties take every function.
        ("properties: Ref of a resource and a pseudo parameter", prop("[!Ref B, !Ref AWS::Region]"), Valid),
        ("properties: Fn::GetAtt", prop("!GetAtt B.Arn"), Valid),
        ("properties: Fn::Base64, Fn::GetAZs, Fn::Cidr", prop("[!Base64 x, !Select [0, !GetAZs ''], !Select [0, !Cidr ['10.0.0.0/16', 2, 8]]]"), Valid),
        ("properties: Fn::Join, Fn::Select, Fn::Split, Fn::Sub", prop("[!Join ['-', [a, b]], !Select [1, !Split [',', 'a,b']], !Sub '${AWS::StackName}-${B}']"), Valid),
        ("properties: Fn::If", with_b("Conditions:\n  C: !Equals [a, a]\n", "  D: {Type: Cairn::Test::Resource, Properties: {Value: !If [C, a, !Ref AWS::NoValue]}}\n"), Valid),
        ("properties: Fn::Length and Fn::ToJsonString with AWS::LanguageExtensions", format!("Transform: AWS::LanguageExtensions\n{}", prop("[!Length [1, 2], !ToJsonString {a: 1}, !FindInMap [M, a, b, {DefaultValue: d}]]")).replace("Resources:", "Mappings:\n  M: {x: {y: z}}\nResources:"), Valid),
        ("properties: Fn::Length without AWS::LanguageExtensions", prop("!Length [1, 2]"), Refused("Template error: Encountered unsupported function: Fn::Length (it comes with Transform: AWS::LanguageExtensions)")),
        ("properties: Fn::ToJsonString without AWS::LanguageExtensions", prop("!ToJsonString {a: 1}"), Refused("Template error: Encountered unsupported function: Fn::ToJsonString (it comes with Transform: AWS::LanguageExtensions)")),
        ("properties: Fn::FindInMap's DefaultValue without AWS::LanguageExtensions", prop("!FindInMap [M, a, b, {DefaultValue: d}]"), Refused("Template error: Fn::FindInMap's DefaultValue (it comes with Transform: AWS::LanguageExtensions)")),
        ("DeletionPolicy: a Ref without AWS::LanguageExtensions", "Parameters:\n  P: {Type: String, Default: Delete}\nResources:\n  B: {Type: Cairn::Test::Resource, DeletionPolicy: !Ref P}\n".to_string(), Refused("Template format error: DeletionPolicy of resource B must be a string (a Ref to a parameter comes with Transform: AWS::LanguageExtensions)")),
        ("DeletionPolicy: a Ref with AWS::LanguageExtensions", "Transform: AWS::LanguageExtensions\nParameters:\n  P: {Type: String, Default: Delete}\nResources:\n  B: {Type: Cairn::Test::Resource, DeletionPolicy: !Ref P}\n".to_string(), Valid),
        ("properties: an unknown function", prop("{'Fn::Foo': 1}"), Refused("Template error: Encountered unsupported function: Fn::Foo")),
        ("properties: a rule function", prop("{'Fn::ValueOf': [P, Tags]}"), Refused("Encountered unsupported function: Fn::ValueOf")),
        // Metadata, UpdatePolicy and CreationPolicy take functions.
        ("Metadata", with_b("", "  D: {Type: Cairn::Test::Resource, Metadata: {r: !Ref AWS::Region, a: !GetAtt B.Arn}}\n"), Valid),
        ("UpdatePolicy and CreationPolicy", with_b("", "  D: {Type: Cairn::Test::Resource, UpdatePolicy: {AutoScalingRollingUpdate: {MaxBatchSize: !Ref AWS::AccountId}}, CreationPolicy: {ResourceSignal: {Count: !Ref AWS::AccountId}}}\n"), Valid),
        // Conditions: parameters, mappings and the string functions.
        ("Conditions: Ref of a parameter, Fn::FindInMap", cond("!FindInMap [M, a, b]"), Valid),
        ("Conditions: Fn::Sub, Fn::Join, Fn::Select, Fn::Split", cond("!Sub '${AWS::Region}'"), Valid),
        ("Conditions: Fn::Join", cond("!Join ['', [!Select [0, !Split [',', 'x,y']]]]"), Valid),
        ("Conditions: Fn::If (Cairn) and Fn::Length", format!("Transform: AWS::LanguageExtensions\n{}", with_b("Conditions:\n  A: !Equals [a, a]\n  C: !Equals [!If [A, !Length [1, 2], 0], 2]\n", "")), Valid),
        ("Conditions: Ref of a resource", cond("!Ref B"), Refused("Template format error: Unresolved dependencies [B]. Cannot reference resources in the Conditions block of the template")),
        ("Conditions: Fn::GetAtt", cond("!GetAtt B.Arn"), Refused("Unresolved dependencies [B]. Cannot reference resources in the Conditions block of the template")),
        ("Conditions: Fn::ImportValue", cond("!ImportValue e"), Refused("Template error: Fn::ImportValue cannot be used in the Conditions block")),
        ("Conditions: Fn::GetStackOutput", cond("!GetStackOutput {StackName: s, OutputName: o}"), Refused("Template error: Fn::GetStackOutput cannot be used in the Conditions block")),
        ("Conditions: Fn::Base64", cond("!Base64 x"), Refused("Template error: Fn::Base64 cannot be used in the Conditions block")),
        ("Conditions: Fn::GetAZs", cond("!Select [0, !GetAZs '']"), Refused("Template error: Fn::GetAZs cannot be used in the Conditions block")),
        ("Conditions: Fn::Cidr", cond("!Select [0, !Cidr ['10.0.0.0/16', 2, 8]]"), Refused("Template error: Fn::Cidr cannot be used in the Conditions block")),
        // Outputs: the Value takes every function; an Export Name and an
        // import are known before any resource is made.
        ("Outputs: Value", with_b("", "Outputs:\n  O: {Value: !GetAtt B.Arn}\n"), Valid),
        ("Outputs: Export Name from parameters", with_b("", "Outputs:\n  O: {Value: x, Export: {Name: !Sub '${AWS::StackName}-o'}}\n"), Valid),
        ("Outputs: Export Name with Fn::If", with_b("Conditions:\n  A: !Equals [a, a]\n", "Outputs:\n  O: {Value: x, Export: {Name: !If [A, e1, e2]}}\n"), Valid),
        ("Outputs: Export Name reading a resource", with_b("", "Outputs:\n  O: {Value: x, Export: {Name: !GetAtt B.Arn}}\n"), Refused("Template error: The Export Name of output O cannot use Ref or Fn::GetAtt of a resource")),
        ("Fn::ImportValue reading a resource", prop("!ImportValue {'Fn::Sub': '${B}-x'}"), Refused("Template error: Fn::ImportValue cannot use Ref or Fn::GetAtt of a resource")),
        ("Outputs: Description", with_b("", "Outputs:\n  O: {Value: x, Description: !Ref AWS::Region}\n"), Refused("Template format error: Description of output O must be a string: CloudFormation takes no parameter or function there")),
        // Sections that take no function.
        ("Description", with_b("Description: !Ref AWS::Region\n", ""), Refused("Template format error: Description must be a string")),
        ("Parameters: Default", with_b("Parameters:\n  P: {Type: String, Default: !Ref AWS::Region}\n", ""), Refused("Template format error: Default of parameter P must be a string")),
        ("Mappings: a value", with_b("Mappings:\n  M: {a: {b: !Ref AWS::Region}}\n", ""), Refused("Template format error: Every Mappings attribute must be a String or a List.")),
        ("Mappings: strings, numbers and lists", with_b("Mappings:\n  M: {a: {b: x, c: 2, d: [x, y]}}\n", ""), Valid),
        ("Type", "Resources:\n  B: {Type: !Ref AWS::Region}\n".to_string(), Refused("Template format error: Every Resources object must contain a Type member of type String.")),
        ("DependsOn", with_b("", "  D: {Type: Cairn::Test::Resource, DependsOn: !Ref B}\n"), Refused("Template format error: DependsOn must be a string or a list of strings (resource D)")),
        ("the Condition attribute", with_b("", "  D: {Type: Cairn::Test::Resource, Condition: !Ref AWS::Region}\n"), Refused("Template format error: Condition of resource D must be a condition name")),
    ]
}

/// (row, template, expected answer) of the YAML table.
fn yaml_cases() -> Vec<(&'static str, String, Expect)> {
    let doc = |body: &str| {
        format!("Resources:\n{B}  C:\n    Type: Cairn::Test::Resource\n    Properties:\n{body}")
    };
    vec![
        ("every short form is its long form", format!("Transform: AWS::LanguageExtensions\n{}", doc("      Value: [!Ref B, !GetAtt B.Arn, !GetAtt [B, Arn], !Sub x, !Join ['', [a]], !Select [0, [a]], !Split [',', a], !Base64 a, !GetAZs '', !Cidr ['10.0.0.0/16', 1, 8], !Length [1], !ToJsonString {a: 1}]\n")), Valid),
        ("anchors and aliases", doc("      Value: &v {a: 1}\n      Description: x\n      Tags: *v\n"), Valid),
        ("!!str, !!int and the core schema's scalars", doc("      Value: [!!str 1, !!int 2, yes, 0x10, .nan, ~]\n"), Valid),
        ("!!int of text that is no integer", doc("      Value: !!int x\n"), Refused("Template format error: !!int x is not of type int")),
        ("two tags on one node", doc("      Value: !Base64 !Sub x\n"), Refused("Template format error: YAML not well-formed.")),
        ("a short form inside a short form", doc("      Value: !GetStackOutput {StackName: !Ref AWS::StackName, OutputName: !Sub o}\n"), Refused("has no output o (the stack does not exist")),
        ("an unknown tag", doc("      Value: !Bogus x\n"), Refused("Unsupported YAML tag !Bogus; valid tags are !Ref, !Condition, !GetAtt")),
        ("!GetAtt without an attribute", doc("      Value: !GetAtt B\n"), Refused("Template error: every Fn::GetAtt object requires two non-empty parameters; !GetAtt")),
        ("a duplicate key", doc("      Value: 1\n      Value: 2\n"), Refused("Template format error: duplicate key [Value]")),
        ("a mapping as a key", doc("      {a: 1}: x\n"), Refused("Template format error: YAML mapping keys must be scalars")),
        ("an alias to no anchor", doc("      Value: *nowhere\n"), Refused("Template format error: YAML")),
        ("YAML that is not well-formed", doc("      Value: [1, 2\n"), Refused("Template format error: YAML not well-formed.")),
    ]
}

fn sweep(cases: Vec<(&'static str, String, Expect)>) {
    let s = Scratch::new();
    let mut wrong = Vec::new();
    for (i, (row, template, expect)) in cases.into_iter().enumerate() {
        let path = s.write(&format!("case-{i}.yaml"), &template);
        let run = s.cairn(&["validate", path.to_str().unwrap_or_default()]);
        let answer = format!("{}{}", run.stdout(), run.stderr());
        let right = match expect {
            Valid => run.code() == 0,
            Refused(text) => run.code() != 0 && answer.contains(text),
        };
        if !right {
            wrong.push(format!("{row}: {answer}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "rows that do not hold:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_intrinsic_function_table_holds() {
    sweep(intrinsic_cases());
}

#[test]
fn the_yaml_table_holds() {
    sweep(yaml_cases());
}
