//! Exact outputs of every intrinsic function and condition, in both forms.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::eval::{Evaluated, Evaluator, Lookup, Resolver, StackContext, StaticPass};
use super::model::Template;
use super::parameters::ParameterValues;

struct Live;

impl Resolver for Live {
    fn resource_ref(&self, id: &str) -> Lookup {
        Lookup::Value(json!(format!("phys-{id}")))
    }
    fn resource_attribute(&self, id: &str, attr: &str) -> Lookup {
        match attr {
            "Missing" => Lookup::Absent,
            "List" => Lookup::Value(json!(["x", "y"])),
            _ => Lookup::Value(json!(format!("{id}.{attr}"))),
        }
    }
    fn import_value(&self, name: &str) -> Lookup {
        if name == "nope" {
            Lookup::Absent
        } else {
            Lookup::Value(json!(format!("imported-{name}")))
        }
    }
}

const BASE: &str = r#"
Parameters:
  Env: {Type: String, Default: prod, AllowedValues: [prod, dev]}
  Size: {Type: Number, Default: "1000.0"}
  Zones: {Type: CommaDelimitedList, Default: "a,b,c"}
  Other: {Type: String, Default: prod}
Mappings:
  Regions:
    eu-west-1: {Ami: ami-eu, Count: 2}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
  IsDev: !Not [!Condition IsProd]
  Both: !And [!Condition IsProd, !Equals [!Ref Size, "1000.0"]]
  Either: !Or [!Condition IsDev, !Equals [a, b]]
  Nested: !And [!Or [!Condition IsDev, !Condition IsProd], !Not [!Condition IsDev]]
Resources:
  Bucket: {Type: T}
  Queue: {Type: T, Condition: IsDev}
"#;

fn template(extra: &str) -> Template {
    Template::parse(&format!("{BASE}{extra}")).unwrap_or_else(|e| panic!("{e}"))
}

fn ctx() -> StackContext {
    let mut c = StackContext::new("demo", "1111-2222", "eu-west-1", "123456789012");
    c.availability_zones.insert(
        "us-east-1".into(),
        vec!["us-east-1x".into(), "us-east-1y".into()],
    );
    c.notification_arns = vec!["arn:sns".into()];
    c
}

fn params(t: &Template, given: &[(&str, &str)]) -> ParameterValues {
    let given: BTreeMap<String, String> = given
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ParameterValues::resolve(&t.parameters, &given).unwrap()
}

/// Evaluates `expr` (YAML, may use short forms) with resources resolved.
fn eval_with(expr: &str, given: &[(&str, &str)]) -> Result<Evaluated, String> {
    let t = template("");
    let p = params(&t, given);
    let c = ctx();
    let ev = Evaluator::new(&t, &p, &c, &Live).map_err(|e| e.message().to_string())?;
    let (v, _) = super::yaml::parse(&format!("X: {expr}")).map_err(|e| e.to_string())?;
    ev.eval(&v["X"], "/X").map_err(|e| e.message().to_string())
}

fn eval(expr: &str) -> Value {
    match eval_with(expr, &[]) {
        Ok(Evaluated::Value(v)) => v,
        other => panic!("{expr}: {other:?}"),
    }
}

fn eval_err(expr: &str) -> String {
    match eval_with(expr, &[]) {
        Err(e) => e,
        other => panic!("{expr}: expected an error, got {other:?}"),
    }
}

#[test]
fn ref_parameters_pseudo_and_resources() {
    assert_eq!(eval("!Ref Env"), json!("prod"));
    assert_eq!(eval("!Ref Size"), json!("1000.0"));
    assert_eq!(eval("!Ref Zones"), json!(["a", "b", "c"]));
    assert_eq!(eval("!Ref Bucket"), json!("phys-Bucket"));
    assert_eq!(eval("!Ref AWS::StackName"), json!("demo"));
    assert_eq!(
        eval("!Ref AWS::StackId"),
        json!("arn:aws:cloudformation:eu-west-1:123456789012:stack/demo/1111-2222")
    );
    assert_eq!(eval("!Ref AWS::Region"), json!("eu-west-1"));
    assert_eq!(eval("!Ref AWS::AccountId"), json!("123456789012"));
    assert_eq!(eval("!Ref AWS::Partition"), json!("aws"));
    assert_eq!(eval("!Ref AWS::URLSuffix"), json!("amazonaws.com"));
    assert_eq!(eval("!Ref AWS::NotificationARNs"), json!(["arn:sns"]));
    assert_eq!(eval_with("!Ref AWS::NoValue", &[]), Ok(Evaluated::NoValue));
    assert_eq!(
        eval_err("!Ref Nope"),
        "Template format error: Unresolved resource dependencies [Nope] in the Resources block of the template"
    );
    // A resource whose condition is false cannot be referenced.
    assert_eq!(
        eval_err("!Ref Queue"),
        "Template format error: Unresolved resource dependencies [Queue] in the Resources block of the template"
    );
}

#[test]
fn getatt_both_forms() {
    assert_eq!(eval("!GetAtt Bucket.Arn"), json!("Bucket.Arn"));
    assert_eq!(eval("{'Fn::GetAtt': [Bucket, Arn]}"), json!("Bucket.Arn"));
    assert_eq!(eval("{'Fn::GetAtt': Bucket.Arn}"), json!("Bucket.Arn"));
    assert_eq!(eval("!GetAtt [Bucket, !Ref Env]"), json!("Bucket.prod"));
    assert_eq!(
        eval_err("!GetAtt Nope.Arn"),
        "Template error: instance of Fn::GetAtt references undefined resource Nope"
    );
    assert_eq!(
        eval_err("!GetAtt Bucket.Missing"),
        "Template error: resource Bucket does not provide attribute Missing for Fn::GetAtt"
    );
    assert_eq!(
        eval_err("{'Fn::GetAtt': [Bucket]}"),
        "Template error: every Fn::GetAtt object requires two non-empty parameters"
    );
}

#[test]
fn join() {
    assert_eq!(eval("!Join ['-', [a, !Ref Env, 3]]"), json!("a-prod-3"));
    assert_eq!(eval("!Join [',', !Ref Zones]"), json!("a,b,c"));
    assert_eq!(eval("!Join ['', []]"), json!(""));
    assert_eq!(eval("!Join ['-', [a, !Ref AWS::NoValue, b]]"), json!("a-b"));
    assert!(eval_err("!Join ['-', a]")
        .starts_with("Template error: every Fn::Join object requires two parameters"));
}

#[test]
fn sub_string_and_list_forms() {
    assert_eq!(
        eval("!Sub 'x-${Env}-${AWS::Region}'"),
        json!("x-prod-eu-west-1")
    );
    assert_eq!(
        eval("!Sub '${Bucket}/${Bucket.Arn}'"),
        json!("phys-Bucket/Bucket.Arn")
    );
    assert_eq!(
        eval("!Sub '${!Literal} and ${Env}'"),
        json!("${Literal} and prod")
    );
    assert_eq!(
        eval("!Sub ['${A}-${B}', {A: !Ref Env, B: 7}]"),
        json!("prod-7")
    );
    assert_eq!(eval("!Sub 'no vars'"), json!("no vars"));
    assert_eq!(
        eval_err("!Sub '${Nope}'"),
        "Template format error: Unresolved resource dependencies [Nope] in the Resources block of the template"
    );
    assert_eq!(
        eval_err("!Sub '${Zones}'"),
        "Template error: variable Zones in Fn::Sub expression must resolve to a string, not a list or object"
    );
}

#[test]
fn select_split_length() {
    assert_eq!(eval("!Select [1, [a, b, c]]"), json!("b"));
    assert_eq!(eval("!Select ['0', !Ref Zones]"), json!("a"));
    assert_eq!(
        eval_err("!Select [5, [a]]"),
        "Template error: Fn::Select cannot select nonexistent value at index 5"
    );
    assert_eq!(eval("!Split [',', 'a,b,,c']"), json!(["a", "b", "", "c"]));
    assert_eq!(
        eval("!Select [2, !Split ['/', !Sub '${Env}/x/y']]"),
        json!("y")
    );
    assert_eq!(eval("{'Fn::Length': [a, b, c]}"), json!(3));
    assert_eq!(eval("!Length [a, !Ref AWS::NoValue]"), json!(1));
    assert_eq!(eval("{'Fn::Length': !Ref Zones}"), json!(3));
}

#[test]
fn find_in_map_with_default() {
    assert_eq!(
        eval("!FindInMap [Regions, !Ref AWS::Region, Ami]"),
        json!("ami-eu")
    );
    assert_eq!(eval("!FindInMap [Regions, eu-west-1, Count]"), json!(2));
    assert_eq!(
        eval("!FindInMap [Regions, us-east-1, Ami, {DefaultValue: fallback}]"),
        json!("fallback")
    );
    assert_eq!(
        eval_err("!FindInMap [Regions, us-east-1, Ami]"),
        "Template error: Unable to get mapping for Regions::us-east-1::Ami"
    );
    assert_eq!(
        eval_err("!FindInMap [Nope, a, b]"),
        "Template error: Mapping named 'Nope' is not present in the 'Mappings' section of template."
    );
}

#[test]
fn base64_getazs_importvalue_tojson_cidr() {
    assert_eq!(eval("!Base64 'hello ${x}'"), json!("aGVsbG8gJHt4fQ=="));
    assert_eq!(eval("!Base64 {'Fn::Sub': '${Env}'}"), json!("cHJvZA=="));
    assert_eq!(
        eval("!GetAZs ''"),
        json!(["eu-west-1a", "eu-west-1b", "eu-west-1c"])
    );
    assert_eq!(
        eval("!GetAZs us-east-1"),
        json!(["us-east-1x", "us-east-1y"])
    );
    assert_eq!(eval("!ImportValue shared"), json!("imported-shared"));
    assert_eq!(
        eval("{'Fn::ImportValue': !Sub '${Env}-vpc'}"),
        json!("imported-prod-vpc")
    );
    assert_eq!(eval_err("!ImportValue nope"), "No export named nope found.");
    assert_eq!(
        eval("!ToJsonString {a: [1, !Ref Env], b: true}"),
        json!("{\"a\":[1,\"prod\"],\"b\":true}")
    );
    assert_eq!(
        eval("!Cidr ['10.0.0.0/16', 2, 8]"),
        json!(["10.0.0.0/24", "10.0.1.0/24"])
    );
    assert_eq!(
        eval("!Select [1, !Cidr ['10.0.0.0/24', '4', '6']]"),
        json!("10.0.0.64/26")
    );
}

#[test]
fn conditions_and_if() {
    let t = template("");
    let p = params(&t, &[]);
    let c = ctx();
    let ev = Evaluator::new(&t, &p, &c, &Live).unwrap();
    assert!(ev.condition("IsProd"));
    assert!(!ev.condition("IsDev"));
    assert!(ev.condition("Both"));
    assert!(!ev.condition("Either"));
    assert!(ev.condition("Nested"));
    let p = params(&t, &[("Env", "dev")]);
    let ev = Evaluator::new(&t, &p, &c, &Live).unwrap();
    assert!(
        !ev.condition("IsProd")
            && ev.condition("IsDev")
            && ev.condition("Either")
            && !ev.condition("Nested")
    );

    assert_eq!(eval("!If [IsProd, big, small]"), json!("big"));
    assert_eq!(
        eval_with("!If [IsDev, big, small]", &[("Env", "dev")]),
        Ok(Evaluated::Value(json!("big")))
    );
    assert_eq!(
        eval_with("!If [IsProd, !Ref AWS::NoValue, x]", &[]),
        Ok(Evaluated::NoValue)
    );
    // The branch not taken is not evaluated: its error never surfaces.
    assert_eq!(eval("!If [IsProd, ok, !Ref DoesNotExist]"), json!("ok"));
    assert_eq!(
        eval_err("!If [Nope, a, b]"),
        "Template error: unresolved condition dependency Nope in Fn::If"
    );
    assert_eq!(
        eval("{a: !If [IsDev, 1, !Ref AWS::NoValue], b: 2}"),
        json!({"b": 2})
    );
    assert_eq!(
        eval("[1, !If [IsDev, 2, !Ref AWS::NoValue], 3]"),
        json!([1, 3])
    );
}

#[test]
fn condition_errors() {
    let bad = |conds: &str| -> String {
        let t = Template::parse(&format!(
            "Conditions:\n{conds}\nResources:\n  R: {{Type: T}}\n"
        ))
        .unwrap();
        let p = ParameterValues::default();
        let c = ctx();
        match Evaluator::new(&t, &p, &c, &Live) {
            Ok(_) => panic!("expected error"),
            Err(e) => e.message().to_string(),
        }
    };
    assert_eq!(
        bad("  A: !Condition B\n  B: !Condition A"),
        "Template format error: Circular dependency between conditions: [A]"
    );
    assert_eq!(
        bad("  A: !Equals [!Ref R, x]"),
        "Template format error: Unresolved dependencies [R]. Cannot reference resources in the Conditions block of the template"
    );
    assert_eq!(
        bad("  A: !And [!Equals [a, a]]"),
        "Template error: Fn::And requires a list argument with 2 to 10 conditions"
    );
    assert_eq!(
        bad("  A: !Not [a, b]"),
        "Template error: Fn::Not requires a list argument with one condition"
    );
    // What Fn::Equals may hold in Conditions: parameters, mappings and the
    // string functions; not these.
    for (f, arg) in [
        ("Fn::Base64", "x"),
        ("Fn::GetAZs", "''"),
        ("Fn::Cidr", "['10.0.0.0/16', 2, 8]"),
        ("Fn::GetStackOutput", "{StackName: s, OutputName: o}"),
    ] {
        assert_eq!(
            bad(&format!("  A: !Equals [{{'{f}': {arg}}}, x]")),
            format!("Template error: {f} cannot be used in the Conditions block")
        );
    }
}

#[test]
fn static_pass_keeps_resource_references_pending() {
    let t = template("");
    let p = params(&t, &[]);
    let c = ctx();
    let ev = Evaluator::new(&t, &p, &c, &StaticPass).unwrap();
    let (v, _) = super::yaml::parse("A: !Ref Env\nB: !Sub '${Bucket.Arn}-${Env}'\nC: [x, !Ref Bucket]\nD: !If [IsProd, !Ref AWS::NoValue, 1]").unwrap();
    let (out, pending) = ev
        .eval_object(v.as_object().unwrap(), "/Resources/X/Properties")
        .unwrap();
    assert!(pending);
    assert_eq!(
        Value::Object(out),
        json!({"A": "prod", "B": {"Fn::Sub": "${Bucket.Arn}-${Env}"}, "C": ["x", {"Ref": "Bucket"}]})
    );
}

#[test]
fn unsupported_function_and_error_location() {
    let t = Template::parse(
        "Resources:\n  R:\n    Type: T\n    Properties:\n      P: !Select [9, [a]]\n",
    )
    .unwrap();
    let p = ParameterValues::default();
    let c = ctx();
    let ev = Evaluator::new(&t, &p, &c, &Live).unwrap();
    let r = &t.resources[0];
    let e = ev
        .eval_object(&r.properties, "/Resources/R/Properties")
        .unwrap_err();
    assert_eq!(e.path(), "/Resources/R/Properties/P/Fn::Select");
    assert_eq!(e.location().map(|l| l.line), Some(5));
    assert_eq!(
        e.to_string(),
        "Template error: Fn::Select cannot select nonexistent value at index 9 (at /Resources/R/Properties/P/Fn::Select, line 5, column 10)"
    );
    assert_eq!(
        eval_err("{'Fn::Bogus': 1}"),
        "Template error: Encountered unsupported function: Fn::Bogus"
    );
}
