//! Property-based tests: a template's JSON and YAML renderings evaluate
//! identically, and no input (valid or not) makes parsing or evaluation panic.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::graph::Graph;
use crate::template::eval::{Evaluator, Lookup, Resolver, StackContext, StaticPass};
use crate::template::model::Template;
use crate::template::parameters::ParameterValues;

struct Live;

impl Resolver for Live {
    fn resource_ref(&self, id: &str) -> Lookup {
        Lookup::Value(json!(format!("phys-{id}")))
    }
    fn resource_attribute(&self, id: &str, attr: &str) -> Lookup {
        Lookup::Value(json!(format!("{id}/{attr}")))
    }
    fn import_value(&self, name: &str) -> Lookup {
        Lookup::Value(json!(format!("imp-{name}")))
    }
}

/// An expression with its two YAML renderings decided at generation time.
#[derive(Debug, Clone)]
enum Expr {
    Str(String),
    Num(i64),
    Ref(&'static str),
    GetAtt(&'static str, bool),
    Join(String, Vec<Expr>, bool),
    Sub(Vec<String>, bool),
    Select(i64, Vec<Expr>, bool),
    If(&'static str, Box<Expr>, Box<Expr>, bool),
    Base64(Box<Expr>, bool),
    Split(String, Box<Expr>, bool),
    FindInMap(&'static str, &'static str, bool),
    List(Vec<Expr>),
    Obj(Vec<(String, Expr)>),
}

const PARAMS: &[&str] = &[
    "Env",
    "Count",
    "Zones",
    "AWS::Region",
    "AWS::NoValue",
    "Res",
];
const CONDS: &[&str] = &["IsProd", "IsDev"];

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        "[a-z0-9 ,.-]{0,8}".prop_map(Expr::Str),
        (-5i64..50).prop_map(Expr::Num),
        prop::sample::select(PARAMS).prop_map(Expr::Ref),
        (any::<bool>()).prop_map(|s| Expr::GetAtt("Res", s)),
        (prop::sample::select(&["eu", "us", "zz"][..]), any::<bool>())
            .prop_map(|(k, s)| Expr::FindInMap(k, "Ami", s)),
        (
            prop::collection::vec(
                prop::sample::select(
                    &["Env", "Res", "Res.Arn", "!Lit", "AWS::StackName", "Count"][..]
                )
                .prop_map(String::from),
                0..3
            ),
            any::<bool>()
        )
            .prop_map(|(v, s)| Expr::Sub(v, s)),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (
                "[-,/]",
                prop::collection::vec(inner.clone(), 0..4),
                any::<bool>()
            )
                .prop_map(|(d, v, s)| Expr::Join(d, v, s)),
            (
                -1i64..4,
                prop::collection::vec(inner.clone(), 0..4),
                any::<bool>()
            )
                .prop_map(|(i, v, s)| Expr::Select(i, v, s)),
            (
                prop::sample::select(CONDS),
                inner.clone(),
                inner.clone(),
                any::<bool>()
            )
                .prop_map(|(c, a, b, s)| Expr::If(c, Box::new(a), Box::new(b), s)),
            (inner.clone(), any::<bool>()).prop_map(|(e, s)| Expr::Base64(Box::new(e), s)),
            ("[-,]", inner.clone(), any::<bool>()).prop_map(|(d, e, s)| Expr::Split(
                d,
                Box::new(e),
                s
            )),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Expr::List),
            // Keys unique: a template with a duplicate key is an error in YAML
            // and silently collapsed in a JSON map, so the two would differ.
            prop::collection::btree_map("[A-Z][a-z]{0,4}", inner, 0..3)
                .prop_map(|m| Expr::Obj(m.into_iter().collect())),
        ]
    })
}

fn sub_text(vars: &[String]) -> String {
    vars.iter()
        .map(|v| format!("x${{{v}}}"))
        .collect::<Vec<_>>()
        .join("-")
}

fn to_json(e: &Expr) -> Value {
    let f = |name: &str, arg: Value| {
        let mut m = Map::new();
        m.insert(name.to_string(), arg);
        Value::Object(m)
    };
    match e {
        Expr::Str(s) => json!(s),
        Expr::Num(n) => json!(n),
        Expr::Ref(p) => f("Ref", json!(p)),
        Expr::GetAtt(r, _) => f("Fn::GetAtt", json!([r, "Arn"])),
        Expr::Join(d, v, _) => f(
            "Fn::Join",
            json!([d, v.iter().map(to_json).collect::<Vec<_>>()]),
        ),
        Expr::Sub(v, _) => f("Fn::Sub", json!(sub_text(v))),
        Expr::Select(i, v, _) => f(
            "Fn::Select",
            json!([i, v.iter().map(to_json).collect::<Vec<_>>()]),
        ),
        Expr::If(c, a, b, _) => f("Fn::If", json!([c, to_json(a), to_json(b)])),
        Expr::Base64(x, _) => f("Fn::Base64", to_json(x)),
        Expr::Split(d, x, _) => f("Fn::Split", json!([d, to_json(x)])),
        Expr::FindInMap(k, s, _) => f("Fn::FindInMap", json!(["Regions", k, s])),
        Expr::List(v) => Value::Array(v.iter().map(to_json).collect()),
        Expr::Obj(kv) => Value::Object(kv.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Flow-style YAML; `short` picks the `!Tag` form. A tag may not directly follow
/// another tag, so a tagged node in tag-argument position uses the long form.
fn to_yaml(e: &Expr, tag_ok: bool) -> String {
    let list = |v: &[Expr]| {
        format!(
            "[{}]",
            v.iter()
                .map(|x| to_yaml(x, true))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let long = |name: &str, arg: String| format!("{{{}: {arg}}}", q(name));
    let pick = |short: bool, tag: &str, name: &str, arg: String| {
        if short && tag_ok {
            format!("!{tag} {arg}")
        } else {
            long(name, arg)
        }
    };
    match e {
        Expr::Str(s) => q(s),
        Expr::Num(n) => n.to_string(),
        Expr::Ref(p) => {
            if tag_ok {
                format!("!Ref {}", q(p))
            } else {
                long("Ref", q(p))
            }
        }
        Expr::GetAtt(r, s) => pick(
            *s,
            "GetAtt",
            "Fn::GetAtt",
            if *s && tag_ok {
                format!("{r}.Arn")
            } else {
                format!("[{r}, Arn]")
            },
        ),
        Expr::Join(d, v, s) => pick(*s, "Join", "Fn::Join", format!("[{}, {}]", q(d), list(v))),
        Expr::Sub(v, s) => pick(*s, "Sub", "Fn::Sub", q(&sub_text(v))),
        Expr::Select(i, v, s) => pick(*s, "Select", "Fn::Select", format!("[{i}, {}]", list(v))),
        Expr::If(c, a, b, s) => pick(
            *s,
            "If",
            "Fn::If",
            format!("[{c}, {}, {}]", to_yaml(a, true), to_yaml(b, true)),
        ),
        Expr::Base64(x, s) => {
            let short = *s && tag_ok;
            pick(*s, "Base64", "Fn::Base64", to_yaml(x, !short))
        }
        Expr::Split(d, x, s) => pick(
            *s,
            "Split",
            "Fn::Split",
            format!("[{}, {}]", q(d), to_yaml(x, true)),
        ),
        Expr::FindInMap(k, sk, s) => pick(
            *s,
            "FindInMap",
            "Fn::FindInMap",
            format!("[Regions, {k}, {sk}]"),
        ),
        Expr::List(v) => list(v),
        Expr::Obj(kv) => format!(
            "{{{}}}",
            kv.iter()
                .map(|(k, v)| format!("{k}: {}", to_yaml(v, true)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

const HEADER_YAML: &str = "Parameters:\n  Env: {Type: String, Default: prod}\n  Count: {Type: Number, Default: '3'}\n  Zones: {Type: CommaDelimitedList, Default: 'a,b'}\nMappings:\n  Regions:\n    eu: {Ami: ami-1}\n    us: {Ami: ami-2}\nConditions:\n  IsProd: !Equals [!Ref Env, prod]\n  IsDev: !Not [!Condition IsProd]\n";

fn header_json() -> Value {
    json!({
        "Parameters": {
            "Env": {"Type": "String", "Default": "prod"},
            "Count": {"Type": "Number", "Default": "3"},
            "Zones": {"Type": "CommaDelimitedList", "Default": "a,b"}
        },
        "Mappings": {"Regions": {"eu": {"Ami": "ami-1"}, "us": {"Ami": "ami-2"}}},
        "Conditions": {
            "IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
            "IsDev": {"Fn::Not": [{"Condition": "IsProd"}]}
        }
    })
}

/// Evaluates the properties of resource `X` fully, as messages for comparison.
fn evaluate(t: &Template) -> Result<(Value, bool), String> {
    let p = ParameterValues::resolve(&t.parameters, &BTreeMap::new())
        .map_err(|e| e.message().to_string())?;
    let c = StackContext::new("s", "u", "eu-west-1", "1");
    let ev = Evaluator::new(t, &p, &c, &Live).map_err(|e| e.message().to_string())?;
    let r = t.resource("X").ok_or("no X")?;
    let (v, pending) = ev
        .eval_object(&r.properties, "/Resources/X/Properties")
        .map_err(|e| e.message().to_string())?;
    Ok((Value::Object(v), pending))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn json_and_yaml_renderings_evaluate_identically(exprs in prop::collection::vec(expr(), 1..4)) {
        let mut props = Map::new();
        let mut yaml_props = String::new();
        for (i, e) in exprs.iter().enumerate() {
            props.insert(format!("P{i}"), to_json(e));
            yaml_props.push_str(&format!("      P{i}: {}\n", to_yaml(e, true)));
        }
        let mut body = header_json();
        body["Resources"] = json!({"Res": {"Type": "T"}, "X": {"Type": "T", "Properties": Value::Object(props)}});
        let json_text = serde_json::to_string_pretty(&body).unwrap();
        let yaml_text = format!("{HEADER_YAML}Resources:\n  Res: {{Type: T}}\n  X:\n    Type: T\n    Properties:\n{yaml_props}");
        let from_json = Template::parse(&json_text).map_err(|e| e.message().to_string());
        let from_yaml = Template::parse(&yaml_text).map_err(|e| e.message().to_string());
        prop_assert!(from_yaml.is_ok(), "YAML rendering failed to parse: {:?}\n{}", from_yaml.err(), yaml_text);
        let (from_json, from_yaml) = (from_json.unwrap(), from_yaml.unwrap());
        // Long forms may differ in scalar type only (`!Base64 0` reads the tagged
        // scalar as the string "0", as cfn-flip does); evaluation must agree.
        let (a, b) = (evaluate(&from_json), evaluate(&from_yaml));
        prop_assert_eq!(a, b);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = Template::parse(&text);
    }

    #[test]
    fn arbitrary_yaml_like_text_never_panics(text in "[-:!{}\\[\\], a-zA-Z0-9'\"\n&*|>#]{0,300}") {
        if let Ok(t) = Template::parse(&text) {
            let _ = evaluate(&t);
        }
    }

    #[test]
    fn arbitrary_templates_never_panic_in_graph_or_evaluation(body in arbitrary_template()) {
        if let Ok(t) = Template::from_value(body, Default::default()) {
            let _ = Graph::build(&t, &|_| None);
            let p = ParameterValues::resolve(&t.parameters, &BTreeMap::new());
            if let Ok(p) = p {
                let c = StackContext::new("s", "u", "r", "1");
                for resolver in [&Live as &dyn Resolver, &StaticPass] {
                    if let Ok(ev) = Evaluator::new(&t, &p, &c, resolver) {
                        for r in &t.resources {
                            let _ = ev.eval_object(&r.properties, "/");
                        }
                        for o in &t.outputs {
                            let _ = ev.eval(&o.value, "/");
                        }
                    }
                }
            }
        }
    }
}

/// Arbitrary JSON whose objects often use intrinsic-function keys, in a template
/// shell, to reach deep into evaluation with malformed arguments.
fn arbitrary_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..10).prop_map(|n| json!(n)),
        prop::sample::select(
            &[
                "",
                "A",
                "B",
                "C1",
                "P",
                "AWS::NoValue",
                "A.Arn",
                "${A}",
                "${!x}",
                "${",
                "10.0.0.0/16",
                ","
            ][..]
        )
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(5, 40, 4, |inner| {
        let keys = prop::sample::select(
            &[
                "Ref",
                "Fn::GetAtt",
                "Fn::Join",
                "Fn::Sub",
                "Fn::Select",
                "Fn::Split",
                "Fn::If",
                "Fn::Equals",
                "Fn::And",
                "Fn::Or",
                "Fn::Not",
                "Condition",
                "Fn::FindInMap",
                "Fn::Base64",
                "Fn::GetAZs",
                "Fn::ImportValue",
                "Fn::Cidr",
                "Fn::Length",
                "Fn::ToJsonString",
                "Fn::Bogus",
                "Key",
                "DefaultValue",
            ][..],
        );
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            (keys, inner.clone()).prop_map(|(k, v)| json!({ k: v })),
            prop::collection::vec(("[A-C]", inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn arbitrary_template() -> impl Strategy<Value = Value> {
    (arbitrary_value(), arbitrary_value(), arbitrary_value(), arbitrary_value()).prop_map(|(pa, pb, cond, out)| {
        json!({
            "Parameters": {"P": {"Type": "String", "Default": "x"}},
            "Mappings": {"M": {"A": {"B": "v"}}},
            "Conditions": {"C1": cond},
            "Resources": {"A": {"Type": "T", "Properties": {"X": pa}}, "B": {"Type": "T", "Properties": {"Y": pb}}},
            "Outputs": {"O": {"Value": out}}
        })
    })
}

/// A YAML document of `levels` anchored lists, each holding `fan_out`
/// aliases of the one before (and, with `in_intrinsic`, the last inside a
/// `!Join`), its first level a scalar of `scalar_len` characters: the
/// "billion laughs" family.
fn alias_yaml(levels: usize, fan_out: usize, scalar_len: usize, in_intrinsic: bool) -> String {
    let mut t = format!("Metadata:\n  a0: &a0 \"{}\"\n", "x".repeat(scalar_len));
    for level in 1..=levels {
        let prev = format!("*a{}", level - 1);
        let items = vec![prev.as_str(); fan_out].join(", ");
        t.push_str(&format!("  a{level}: &a{level} [{items}]\n"));
    }
    t.push_str("Resources:\n  R:\n    Type: T\n");
    if in_intrinsic {
        t.push_str(&format!("    Properties: {{V: !Join [',', *a{levels}]}}\n"));
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the shape, parsing ends with the template or the alias
    /// limit's error, and what it builds stays within the budget.
    #[test]
    fn alias_expansion_never_exceeds_its_budget(
        levels in 1usize..12,
        fan_out in 1usize..12,
        scalar_len in 0usize..5000,
        in_intrinsic in any::<bool>(),
    ) {
        let text = alias_yaml(levels, fan_out, scalar_len, in_intrinsic);
        match crate::template::yaml::parse(&text) {
            Ok((value, _)) => {
                let size = serde_json::to_string(&value).map(|s| s.len()).unwrap_or(0);
                prop_assert!(size < 60_000_000, "{size} bytes from {} bytes", text.len());
            }
            Err(e) => {
                let shown = e.to_string();
                prop_assert!(
                    shown.contains("YAML aliases expand to more than")
                        || shown.contains("levels deep"),
                    "{shown}"
                );
            }
        }
    }
}
