//! YAML templates: saphyr's event parser turned into the JSON long form.
//!
//! Short-form tags are canonicalised as cfn-flip does: `!Ref x` → `{"Ref": x}`,
//! `!Condition c` → `{"Condition": c}`, `!GetAtt a.b` → `{"Fn::GetAtt": ["a", "b"]}`,
//! every other `!Fn` → `{"Fn::Fn": …}`. Each node's line and column is recorded
//! under its JSON pointer so later errors can point at the source.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};
use serde_json::{Map, Number, Value};

use super::source::{push_segment, Location, SourceMap};
use super::TemplateError;

/// The tags CloudFormation accepts, with the long-form key each stands for.
const SHORT_FORMS: &[(&str, &str)] = &[
    ("Ref", "Ref"),
    ("Condition", "Condition"),
    ("GetAtt", "Fn::GetAtt"),
    ("Sub", "Fn::Sub"),
    ("Join", "Fn::Join"),
    ("Select", "Fn::Select"),
    ("Split", "Fn::Split"),
    ("If", "Fn::If"),
    ("Equals", "Fn::Equals"),
    ("And", "Fn::And"),
    ("Or", "Fn::Or"),
    ("Not", "Fn::Not"),
    ("FindInMap", "Fn::FindInMap"),
    ("Base64", "Fn::Base64"),
    ("GetAZs", "Fn::GetAZs"),
    ("ImportValue", "Fn::ImportValue"),
    ("GetStackOutput", "Fn::GetStackOutput"),
    ("Cidr", "Fn::Cidr"),
    ("Length", "Fn::Length"),
    ("ToJsonString", "Fn::ToJsonString"),
    // AWS::Include inside a section.
    ("Transform", "Fn::Transform"),
    // The rule functions of a Rules section.
    ("Contains", "Fn::Contains"),
    ("EachMemberEquals", "Fn::EachMemberEquals"),
    ("EachMemberIn", "Fn::EachMemberIn"),
    ("RefAll", "Fn::RefAll"),
    ("ValueOf", "Fn::ValueOf"),
    ("ValueOfAll", "Fn::ValueOfAll"),
];

enum Frame {
    Seq {
        items: Vec<Value>,
        tag: Option<String>,
        anchor: usize,
        span: Span,
    },
    Map {
        map: Map<String, Value>,
        key: Option<String>,
        tag: Option<String>,
        anchor: usize,
        span: Span,
    },
}

/// How deep collections may nest: serde_json's own limit, so YAML, JSON
/// and every recursive pass after parsing (evaluation, the graph, schema
/// coercion, JSON output) see at most this depth.
pub const MAX_DEPTH: usize = 128;

/// What alias expansion may add, in nodes plus characters of strings and
/// keys: ten times the template's own size, at least 1,000,000 and at most
/// 20,000,000 (a "billion laughs" template is refused, not expanded).
fn alias_budget(text_len: usize) -> u64 {
    (text_len as u64)
        .saturating_mul(10)
        .clamp(1_000_000, 20_000_000)
}

/// An anchored node, with what copying it costs.
struct Anchored {
    value: Value,
    /// Nodes plus characters of strings and keys.
    weight: u64,
    /// Levels of collections it holds (a scalar: 0).
    depth: usize,
}

/// A value's weight and depth (see [`Anchored`]), without recursion.
fn measure(value: &Value) -> (u64, usize) {
    let mut weight = 0u64;
    let mut depth = 0usize;
    let mut todo: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, d)) = todo.pop() {
        weight = weight.saturating_add(1);
        match v {
            Value::String(s) => weight = weight.saturating_add(s.len() as u64),
            Value::Array(items) => {
                depth = depth.max(d + 1);
                todo.extend(items.iter().map(|i| (i, d + 1)));
            }
            Value::Object(map) => {
                depth = depth.max(d + 1);
                for (k, i) in map {
                    weight = weight.saturating_add(k.len() as u64);
                    todo.push((i, d + 1));
                }
            }
            _ => {}
        }
    }
    (weight, depth)
}

struct Builder {
    stack: Vec<Frame>,
    /// What alias expansion has added so far, and what it may add.
    expanded: u64,
    budget: u64,
    /// JSON pointer of the node being built, kept as one string (recording a
    /// location per node is then one copy, not a join of every segment).
    pointer: String,
    /// Length of `pointer` before each segment pushed onto it.
    marks: Vec<usize>,
    anchors: HashMap<usize, Anchored>,
    root: Option<Value>,
    locations: SourceMap,
    /// Documents begun so far (a template is one).
    documents: usize,
}

fn loc(span: &Span) -> Location {
    Location::at(span.start.line(), span.start.col() + 1)
}

fn tag_name(tag: &Tag) -> String {
    format!("{}{}", tag.handle, tag.suffix)
}

/// Resolves a plain scalar by the YAML 1.2 core schema. Quoted and block scalars
/// are always strings; values JSON cannot hold (`.nan`, `.inf`) stay strings.
fn plain_scalar(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let looks_numeric = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == '-' || c == '+' || c == '.');
    if looks_numeric {
        if let Ok(i) = s.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Some(hex) = s.strip_prefix("0x") {
            if let Ok(i) = i64::from_str_radix(hex, 16) {
                return Value::Number(i.into());
            }
        }
        if let Some(oct) = s.strip_prefix("0o") {
            if let Ok(i) = i64::from_str_radix(oct, 8) {
                return Value::Number(i.into());
            }
        }
        let float_like = s
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'));
        if float_like {
            if let Some(n) = s.parse::<f64>().ok().and_then(Number::from_f64) {
                return Value::Number(n);
            }
        }
    }
    Value::String(s.to_string())
}

impl Builder {
    fn apply_tag(
        &self,
        tag: Option<String>,
        value: Value,
        span: &Span,
    ) -> Result<Value, TemplateError> {
        let Some(tag) = tag else { return Ok(value) };
        let name = tag.strip_prefix('!').unwrap_or(&tag);
        // Standard YAML tags (`!!str` and friends, which the parser gives
        // in their full `tag:yaml.org,2002:` form) are not intrinsic
        // functions.
        let standard = name
            .strip_prefix('!')
            .or_else(|| tag.strip_prefix("tag:yaml.org,2002:"));
        if let Some(core) = standard {
            return Ok(match (core, value) {
                ("str", Value::Number(n)) => Value::String(n.to_string()),
                ("str", Value::Bool(b)) => Value::String(b.to_string()),
                // A tagged scalar arrives as text: the tag says what it is.
                ("int" | "float" | "bool" | "null", Value::String(text)) => {
                    match (core, plain_scalar(&text)) {
                        ("int", n @ Value::Number(_)) if n.is_i64() => n,
                        ("float", Value::Number(n)) => Value::Number(n),
                        ("bool", b @ Value::Bool(_)) => b,
                        ("null", Value::Null) => Value::Null,
                        _ => {
                            return Err(TemplateError::format_at(
                                format!(
                                    "Template format error: !!{core} {text} is not of type {core}"
                                ),
                                self.pointer.clone(),
                                Some(loc(span)),
                            ))
                        }
                    }
                }
                (_, v) => v,
            });
        }
        let Some((_, long)) = SHORT_FORMS.iter().find(|(short, _)| *short == name) else {
            return Err(TemplateError::format_at(
                format!(
                    "Unsupported YAML tag !{name}; valid tags are {}",
                    SHORT_FORMS
                        .iter()
                        .map(|(s, _)| format!("!{s}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                self.pointer.clone(),
                Some(loc(span)),
            ));
        };
        let arg = match (name, value) {
            ("GetAtt", Value::String(s)) => match s.split_once('.') {
                Some((res, attr)) => Value::Array(vec![Value::String(res.into()), Value::String(attr.into())]),
                None => {
                    return Err(TemplateError::format_at(
                        format!("Template error: every Fn::GetAtt object requires two non-empty parameters; !GetAtt {} has no attribute (write !GetAtt Resource.Attribute)", super::quoted(&s)),
                        self.pointer.clone(),
                        Some(loc(span)),
                    ))
                }
            },
            (_, v) => v,
        };
        let mut m = Map::new();
        m.insert((*long).to_string(), arg);
        Ok(Value::Object(m))
    }

    /// Places a finished node into its parent (or as the document root).
    fn insert(&mut self, value: Value, anchor: usize, span: &Span) -> Result<(), TemplateError> {
        if anchor > 0 {
            let (weight, depth) = measure(&value);
            self.anchors.insert(
                anchor,
                Anchored {
                    value: value.clone(),
                    weight,
                    depth,
                },
            );
        }
        match self.stack.last_mut() {
            None => {
                self.locations.insert(&self.pointer, loc(span));
                self.root = Some(value);
            }
            Some(Frame::Seq { items, .. }) => {
                let mark = self.pointer.len();
                push_segment(&mut self.pointer, &items.len().to_string());
                self.locations.insert(&self.pointer, loc(span));
                self.pointer.truncate(mark);
                items.push(value);
            }
            Some(Frame::Map { map, key, .. }) => match key.take() {
                None => {
                    let k = match value {
                        Value::String(s) => s,
                        Value::Null => String::new(),
                        other if !other.is_object() && !other.is_array() => other.to_string(),
                        _ => {
                            return Err(TemplateError::format_at(
                                "Template format error: YAML mapping keys must be scalars"
                                    .to_string(),
                                self.pointer.clone(),
                                Some(loc(span)),
                            ))
                        }
                    };
                    if map.contains_key(&k) {
                        return Err(TemplateError::format_at(
                            format!("Template format error: duplicate key [{k}]"),
                            self.pointer.clone(),
                            Some(loc(span)),
                        ));
                    }
                    self.marks.push(self.pointer.len());
                    push_segment(&mut self.pointer, &k);
                    *key = Some(k);
                }
                Some(k) => {
                    self.locations.insert(&self.pointer, loc(span));
                    if let Some(mark) = self.marks.pop() {
                        self.pointer.truncate(mark);
                    }
                    map.insert(k, value);
                }
            },
        }
        Ok(())
    }

    /// Refuses a node that would nest `more` levels below the current one
    /// past [`MAX_DEPTH`].
    fn check_depth(&self, more: usize, span: &Span) -> Result<(), TemplateError> {
        if self.stack.len() + more > MAX_DEPTH {
            return Err(TemplateError::format_at(
                format!("Template format error: the template nests collections more than {MAX_DEPTH} levels deep; flatten it"),
                self.pointer.clone(),
                Some(loc(span)),
            ));
        }
        Ok(())
    }

    fn in_key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    /// Takes the parser's events (or its error) in order.
    fn take_all<'a>(
        &mut self,
        items: impl IntoIterator<Item = Item<'a>>,
    ) -> Result<(), TemplateError> {
        items.into_iter().try_for_each(|item| self.take(item))
    }

    /// Takes the parser's next event (or its error).
    fn take(&mut self, item: Item<'_>) -> Result<(), TemplateError> {
        let (ev, span) = item.map_err(|e| {
            TemplateError::format_at(
                format!("Template format error: YAML not well-formed. {}", e.info()),
                String::new(),
                Some(Location::at(e.marker().line(), e.marker().col() + 1)),
            )
        })?;
        if let Event::DocumentStart(_) = ev {
            self.documents += 1;
            if self.documents > 1 {
                return Err(TemplateError::format_at(
                    "Template format error: a template must be a single YAML document".to_string(),
                    String::new(),
                    Some(loc(&span)),
                ));
            }
        }
        self.on_event(ev, span)
    }

    fn on_event(&mut self, ev: Event<'_>, span: Span) -> Result<(), TemplateError> {
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| tag_name(&t));
                if tag.is_some() && self.in_key_position() {
                    return Err(TemplateError::format_at(
                        "Template format error: tags are not allowed on mapping keys".to_string(),
                        self.pointer.clone(),
                        Some(loc(&span)),
                    ));
                }
                let value = match style {
                    ScalarStyle::Plain if tag.is_none() => plain_scalar(&text),
                    _ => Value::String(text.into_owned()),
                };
                let value = self.apply_tag(tag, value, &span)?;
                self.insert(value, anchor, &span)
            }
            Event::SequenceStart(anchor, tag) => {
                self.check_depth(1, &span)?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    tag: tag.map(|t| tag_name(&t)),
                    anchor,
                    span,
                });
                Ok(())
            }
            Event::MappingStart(anchor, tag) => {
                self.check_depth(1, &span)?;
                self.stack.push(Frame::Map {
                    map: Map::new(),
                    key: None,
                    tag: tag.map(|t| tag_name(&t)),
                    anchor,
                    span,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, tag, anchor, span) = match self.stack.pop() {
                    Some(Frame::Seq {
                        items,
                        tag,
                        anchor,
                        span,
                    }) => (Value::Array(items), tag, anchor, span),
                    Some(Frame::Map {
                        map,
                        tag,
                        anchor,
                        span,
                        ..
                    }) => (Value::Object(map), tag, anchor, span),
                    None => return Ok(()),
                };
                let value = self.apply_tag(tag, value, &span)?;
                self.insert(value, anchor, &span)
            }
            Event::Alias(id) => {
                let Some(anchored) = self.anchors.get(&id) else {
                    return Err(TemplateError::format_at(
                        "Template format error: YAML alias refers to an unknown anchor".to_string(),
                        self.pointer.clone(),
                        Some(loc(&span)),
                    ));
                };
                let (weight, depth) = (anchored.weight, anchored.depth);
                self.expanded = self.expanded.saturating_add(weight);
                if self.expanded > self.budget {
                    return Err(TemplateError::format_at(
                        format!(
                            "Template format error: YAML aliases expand to more than {} nodes and characters (ten times the template's size, at least 1,000,000 and at most 20,000,000); write the repeated parts out or make them smaller",
                            self.budget
                        ),
                        self.pointer.clone(),
                        Some(loc(&span)),
                    ));
                }
                self.check_depth(depth, &span)?;
                let value = self
                    .anchors
                    .get(&id)
                    .map(|a| a.value.clone())
                    .unwrap_or_default();
                self.insert(value, 0, &span)
            }
            _ => Ok(()),
        }
    }
}

/// What the parser yields: an event and where it is, or why the text is
/// not YAML.
type Item<'a> = Result<(Event<'a>, Span), ScanError>;

/// From this size on, the text is scanned on a thread of its own while
/// the nodes are built from its events: scanning is half of a large
/// template's parse (a 10,000-resource template: ~55 of ~110 ms on this
/// project's 2-core VM, 2026-11-29); a smaller one is not worth a thread.
const SCANNED_ALONGSIDE: usize = 32 * 1024;

/// Events handed from the scanning thread to the builder at a time (one
/// hand-over each is cheap next to the events' own work).
const CHUNK: usize = 2048;

/// Parses one YAML document into the JSON long form plus a map from JSON pointer to
/// source location.
pub fn parse(text: &str) -> Result<(Value, SourceMap), TemplateError> {
    parse_scanning(text, text.len() >= SCANNED_ALONGSIDE)
}

/// [`parse`], the text scanned on a thread of its own (`alongside`) or
/// not.
fn parse_scanning(text: &str, alongside: bool) -> Result<(Value, SourceMap), TemplateError> {
    let mut b = Builder {
        stack: Vec::new(),
        expanded: 0,
        budget: alias_budget(text.len()),
        pointer: String::new(),
        marks: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        locations: SourceMap::default(),
        documents: 0,
    };
    let scanned_alongside = alongside
        && std::thread::scope(|scope| -> Result<bool, TemplateError> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Item<'_>>>(4);
            let scanning = std::thread::Builder::new()
                .name("cairn-yaml".into())
                .spawn_scoped(scope, move || scan(text, &tx));
            if scanning.is_err() {
                // No thread to be had: scanned below, as a small text is.
                return Ok(false);
            }
            // An error returns early and drops `rx`: the scanning thread's
            // next hand-over fails and it stops.
            b.take_all(rx.into_iter().flatten())?;
            Ok(true)
        })?;
    if !scanned_alongside {
        b.take_all(Parser::new_from_str(text))?;
    }
    Ok((b.root.unwrap_or(Value::Null), b.locations))
}

/// The scanning thread: `text`'s events in chunks, up to its first error,
/// while the builder takes them.
fn scan<'a>(text: &'a str, tx: &std::sync::mpsc::SyncSender<Vec<Item<'a>>>) {
    let mut chunk = Vec::with_capacity(CHUNK);
    for item in Parser::new_from_str(text) {
        let failed = item.is_err();
        chunk.push(item);
        if chunk.len() == CHUNK || failed {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
            if tx.send(full).is_err() || failed {
                return;
            }
        }
    }
    let _ = tx.send(chunk);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Value {
        parse(s).map(|(v, _)| v).unwrap_or_else(|e| panic!("{e}"))
    }

    fn refusal(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("expected a refusal"),
            Err(e) => e.to_string(),
        }
    }

    /// A template of `n` resources, the last of them with `last` as its
    /// properties.
    fn large(n: usize, last: &str) -> String {
        let mut t = String::from("Resources:\n");
        for i in 0..n {
            t.push_str(&format!(
                "  R{i}:\n    Type: AWS::S3::Bucket\n    Properties: {{BucketName: !Sub 'b-${{AWS::StackName}}-{i}', Tags: [{{Key: k, Value: !GetAtt R0.Arn}}]}}\n"
            ));
        }
        t.push_str(&format!(
            "  Last:\n    Type: AWS::S3::Bucket\n    Properties: {last}\n"
        ));
        t
    }

    #[test]
    fn a_large_template_scanned_alongside_reads_as_it_does_scanned_inline() {
        let text = large(2_000, "{BucketName: !Ref R1}");
        assert!(text.len() >= SCANNED_ALONGSIDE);
        let (alongside, map_a) = parse_scanning(&text, true).unwrap();
        let (inline, map_i) = parse_scanning(&text, false).unwrap();
        assert_eq!(alongside, inline);
        assert_eq!(
            alongside["Resources"]["R1999"]["Properties"]["Tags"][0]["Value"],
            json!({"Fn::GetAtt": ["R0", "Arn"]})
        );
        let last = "/Resources/Last/Properties/BucketName";
        assert_eq!(map_a.get(last), map_i.get(last));
        assert_eq!(map_a.get(last), Some(Location::at(6004, 30)));
        // `parse` takes this size alongside.
        assert_eq!(parse(&text).unwrap().0, inline);
    }

    #[test]
    fn a_large_template_scanned_alongside_is_refused_as_it_is_scanned_inline() {
        for (last, says) in [
            (
                "{BucketName: [1, 2}",
                "Template format error: YAML not well-formed.",
            ),
            ("{BucketName: !Bogus x}", "Unsupported YAML tag !Bogus"),
            (
                "{BucketName: x}\n---\nb: 1",
                "a template must be a single YAML document",
            ),
        ] {
            let text = large(2_000, last);
            let alongside = parse_scanning(&text, true).unwrap_err();
            let inline = parse_scanning(&text, false).unwrap_err();
            assert!(alongside.to_string().contains(says), "{alongside}");
            assert_eq!(alongside.to_string(), inline.to_string());
            assert_eq!(alongside.location(), inline.location());
            assert!(
                alongside.location().is_some_and(|l| l.line >= 6004),
                "{alongside}"
            );
        }
        // An error in the first chunk ends the parse: the scanning
        // thread's next hand-over fails and it stops (no hang).
        let early = format!("a: [1, 2\n{}", large(2_000, "{}"));
        assert!(parse_scanning(&early, true)
            .unwrap_err()
            .to_string()
            .contains("not well-formed"));
    }

    #[test]
    fn alias_expansion_is_bounded() {
        // Billion laughs: nine levels of ten aliases.
        let mut t = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..=9 {
            let prev = format!("*a{}", level - 1);
            let items = [prev.as_str(); 10].join(", ");
            t.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        assert!(refusal(&t).contains("YAML aliases expand to more than 1000000 nodes"));
        // A huge scalar aliased many times.
        let big = format!(
            "s: &s {}\nl: [{}]\n",
            "y".repeat(100_000),
            ["*s"; 30].join(", ")
        );
        assert!(refusal(&big).contains("YAML aliases expand"));
        // Ordinary reuse is fine.
        let v = p("a: &a {k: v}\nb: *a\nc: [*a, *a]\n");
        assert_eq!(v["c"][1], json!({"k": "v"}));
    }

    #[test]
    fn nesting_is_bounded_in_block_flow_and_aliased_form() {
        let block = format!("v:\n  {}x\n", "- ".repeat(MAX_DEPTH));
        assert!(refusal(&block).contains("more than 128 levels deep"));
        let ok = format!("v:\n  {}x\n", "- ".repeat(MAX_DEPTH - 1));
        assert!(parse(&ok).is_ok());
        let aliased = format!(
            "d: &d\n  {}x\ne:\n  {}*d\n",
            "- ".repeat(70),
            "- ".repeat(70)
        );
        assert!(refusal(&aliased).contains("more than 128 levels deep"));
    }

    #[test]
    fn short_forms_become_long_forms() {
        let v = p("A: !Ref X\nB: !GetAtt R.Attr.Sub\nC: !Sub 'a-${X}'\nD: !Join [',', [a, b]]\nE: !GetAZs ''\nF: !If [C, 1, !Ref AWS::NoValue]\nG: !Condition Cond\n");
        assert_eq!(
            v,
            json!({
                "A": {"Ref": "X"},
                "B": {"Fn::GetAtt": ["R", "Attr.Sub"]},
                "C": {"Fn::Sub": "a-${X}"},
                "D": {"Fn::Join": [",", ["a", "b"]]},
                "E": {"Fn::GetAZs": ""},
                "F": {"Fn::If": ["C", 1, {"Ref": "AWS::NoValue"}]},
                "G": {"Condition": "Cond"}
            })
        );
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        let v = p("a: 1\nb: '1'\nc: 1.50\nd: true\ne: yes\nf: ~\ng: 0x10\nh: 1e3\ni: .nan\n");
        assert_eq!(
            v,
            json!({"a": 1, "b": "1", "c": 1.5, "d": true, "e": "yes", "f": null, "g": 16, "h": 1000.0, "i": ".nan"})
        );
    }

    #[test]
    fn standard_tags_are_not_functions() {
        assert_eq!(
            p("a: !!str 1\nb: !!str true\nc: !!int 2\nd: !!bool true\ne: !!float 1.5\nf: !!str x\n"),
            json!({"a": "1", "b": "true", "c": 2, "d": true, "e": 1.5, "f": "x"})
        );
        assert!(parse("a: !!int x\n")
            .unwrap_err()
            .to_string()
            .contains("!!int x is not of type int"));
    }

    #[test]
    fn every_tag_is_known() {
        for (short, long) in SHORT_FORMS {
            let v = p(&format!("x: !{short} [a]"));
            assert_eq!(v["x"][long], json!(["a"]), "{short}");
        }
    }

    #[test]
    fn unknown_tag_is_an_error_with_location() {
        let e = parse("a:\n  b: !Bogus x\n").unwrap_err();
        assert_eq!(e.location(), Some(Location::at(2, 6)));
        assert!(
            e.to_string().starts_with("Unsupported YAML tag !Bogus"),
            "{e}"
        );
        assert_eq!(e.path(), "/a/b");
    }

    #[test]
    fn locations_are_recorded_per_pointer() {
        let (_, map) = parse("Resources:\n  A:\n    Type: X\n").unwrap();
        assert_eq!(map.get("/Resources/A/Type"), Some(Location::at(3, 11)));
        assert_eq!(map.get("/Resources/A"), Some(Location::at(3, 5)));
    }

    #[test]
    fn anchors_and_aliases() {
        assert_eq!(
            p("a: &x {k: 1}\nb: *x\n"),
            json!({"a": {"k": 1}, "b": {"k": 1}})
        );
    }

    #[test]
    fn duplicate_keys_and_bad_yaml_are_errors() {
        assert!(parse("a: 1\na: 2\n")
            .unwrap_err()
            .to_string()
            .contains("duplicate key [a]"));
        let e = parse("a: [1, 2\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Template format error: YAML not well-formed."),
            "{e}"
        );
        assert!(e.location().is_some());
    }
}
