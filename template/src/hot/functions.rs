//! HOT's functions that have no CloudFormation equivalent, on evaluated
//! values, with Heat's semantics and error texts
//! (`heat/engine/hot/functions.py`). The HOT front end lowers each to an
//! internal intrinsic (`Fn::Heat::…`) that the evaluator hands here once
//! its arguments are known.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};
use sha2::Digest as _;

pub type Outcome = Result<Value, String>;

/// `get_param`/`get_attr` paths: map keys and list indices (as numbers or
/// numeric strings); a path that does not lead anywhere yields `""`, as in
/// Heat.
pub fn path(value: Value, components: &[Value], fn_name: &str) -> Outcome {
    let mut current = value;
    for c in components {
        let next = match (&current, c) {
            (Value::Object(m), Value::String(k)) => m.get(k).cloned(),
            (Value::Object(m), Value::Number(n)) => m.get(&n.to_string()).cloned(),
            (Value::Array(a), Value::Number(n)) => n.as_u64().and_then(|i| a.get(i as usize).cloned()),
            (Value::Array(a), Value::String(s)) => match s.parse::<usize>() {
                Ok(i) => a.get(i).cloned(),
                Err(_) => {
                    return Err(format!(
                        "Path components in '{fn_name}' must be a string that can be parsed into an integer."
                    ))
                }
            },
            (Value::Object(_) | Value::Array(_), _) => {
                return Err(format!("Path components in \"{fn_name}\" must be strings"))
            }
            _ => return Err(format!("\"{fn_name}\" can't traverse path")),
        };
        match next {
            Some(v) => current = v,
            None => return Ok(Value::String(String::new())),
        }
    }
    Ok(current)
}

/// `resource.N…` of a ResourceGroup: `by_index` maps member indices to ids
/// (no path) or to attribute maps (path: the attribute, then its path).
pub fn group_member(by_index: &Value, index: &str, path: &[Value], group: &str) -> Outcome {
    let Some(member) = by_index.get(index) else {
        return Err(format!(
            "Member '{index}' not found in group resource '{group}'."
        ));
    };
    self::path(member.clone(), path, "get_attr")
}

/// An attribute of every member of a ResourceGroup (`attributes` maps each
/// member's attributes by index): a list in member order, or (`as_map`,
/// Heat's `[g, attributes, attr]`) a map of index to value.
pub fn group_members(attributes: &Value, attr: &Value, path: &[Value], as_map: bool) -> Outcome {
    let Value::Object(members) = attributes else {
        return Ok(if as_map { json!({}) } else { json!([]) });
    };
    let mut ordered: Vec<(u64, &String, &Value)> = members
        .iter()
        .map(|(k, v)| (k.parse().unwrap_or(u64::MAX), k, v))
        .collect();
    ordered.sort_by_key(|(i, _, _)| *i);
    let mut full = vec![attr.clone()];
    full.extend_from_slice(path);
    let values: Vec<(String, Value)> = ordered
        .into_iter()
        .map(|(_, k, v)| self::path(v.clone(), &full, "get_attr").map(|x| (k.clone(), x)))
        .collect::<Result<_, _>>()?;
    Ok(if as_map {
        Value::Object(values.into_iter().collect())
    } else {
        Value::Array(values.into_iter().map(|(_, v)| v).collect())
    })
}

/// Heat's JSON text of a value: keys sorted, as `jsonutils.dumps(...,
/// sort_keys=True)` writes them.
fn dumps(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

/// `list_join: [delim, list1, list2, …]`.
pub fn list_join(args: &[Value]) -> Outcome {
    let example = "\"list_join\" : [ \" \", [ \"str1\", \"str2\"] ...]";
    let Some((delim, lists)) = args.split_first() else {
        return Err(format!(
            "Incorrect arguments to \"list_join\" should be: {example}"
        ));
    };
    if lists.is_empty() {
        return Err(format!(
            "Incorrect arguments to \"list_join\" should be: {example}"
        ));
    }
    let Value::String(delim) = delim else {
        return Err("\"list_join\" delimiter must be a string".into());
    };
    let mut parts = Vec::new();
    for l in lists {
        match l {
            Value::Null => {}
            Value::Array(items) => {
                for item in items {
                    parts.push(match item {
                        Value::Null => String::new(),
                        Value::String(s) => s.clone(),
                        Value::Object(_) | Value::Array(_) => dumps(item),
                        other => {
                            return Err(format!(
                                "Items to join must be string, map or list not {other}"
                            ))
                        }
                    });
                }
            }
            Value::String(s) if s.is_empty() => {}
            _ => return Err("\"list_join\" must operate on a list".into()),
        }
    }
    Ok(Value::String(parts.join(delim)))
}

/// `str_replace` (and `_strict`, `_vstrict`): longer placeholders first,
/// equal lengths in order; map and list values as JSON.
pub fn str_replace(fn_name: &str, template: &Value, params: &Value) -> Outcome {
    let strict = fn_name != "str_replace";
    let allow_empty = fn_name != "str_replace_vstrict";
    let Value::String(template) = template else {
        return Err(format!("\"{fn_name}\" template must be a string"));
    };
    let Value::Object(params) = params else {
        return Err(format!("\"{fn_name}\" params must be a map"));
    };
    let empty = |param: &str| {
        format!(
            "{fn_name} has an undefined or empty value for param {param}, must be a defined non-empty value"
        )
    };
    let mut keys: Vec<&String> = params.keys().collect();
    keys.sort();
    keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
    let mut values = Vec::new();
    for k in &keys {
        let text = match &params[k.as_str()] {
            Value::Null if allow_empty => String::new(),
            Value::Null => return Err(empty(k)),
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
            v @ (Value::Object(_) | Value::Array(_)) => {
                let is_empty = match v {
                    Value::Object(m) => m.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                if is_empty && !allow_empty {
                    return Err(empty(k));
                }
                dumps(v)
            }
        };
        if text.is_empty() && !allow_empty {
            return Err(empty(k));
        }
        values.push(text);
    }
    let mut unreplaced: BTreeSet<&str> = keys.iter().map(|k| k.as_str()).collect();
    // Split by the first (longest) key, then each piece by the next, and
    // join back with the values: a value is never searched again.
    fn replace(
        pieces: Vec<String>,
        keys: &[&String],
        values: &[String],
        unreplaced: &mut BTreeSet<&str>,
    ) -> Vec<String> {
        let Some((key, rest)) = keys.split_first() else {
            return pieces;
        };
        let (value, rest_values) = (&values[0], &values[1..]);
        pieces
            .into_iter()
            .map(|piece| {
                let split: Vec<String> = piece.split(key.as_str()).map(String::from).collect();
                if split.len() > 1 {
                    unreplaced.remove(key.as_str());
                }
                replace(split, rest, rest_values, unreplaced).join(value)
            })
            .collect()
    }
    let mut found: BTreeSet<&str> = unreplaced.clone();
    let out = replace(vec![template.clone()], &keys, &values, &mut found);
    unreplaced = found;
    if strict && !unreplaced.is_empty() {
        let mut missing: Vec<&str> = unreplaced.into_iter().collect();
        missing.sort_by_key(|k| std::cmp::Reverse(k.len()));
        return Err(format!(
            "The following params were not found in the template: {}",
            missing.join(",")
        ));
    }
    Ok(Value::String(out.into_iter().next().unwrap_or_default()))
}

/// `repeat: {template, for_each: {var: list|map}, permutations}`.
/// `maps`: for_each values may be maps (their keys), from 2016-10-14;
/// `permutations` is read from 2017-09-01 (before, always a nested loop).
pub fn repeat(args: &Value, maps: bool, permutations_allowed: bool) -> Outcome {
    let Value::Object(args) = args else {
        return Err("Arguments to \"repeat\" must be a map".into());
    };
    let (Some(template), Some(for_each)) = (args.get("template"), args.get("for_each")) else {
        return Err("\"repeat\" syntax should be repeat:\n  template: This is %var%\n  for_each:\n    %var%: ['a', 'b', 'c']".into());
    };
    let Value::Object(for_each) = for_each else {
        return Err("The \"for_each\" argument to \"repeat\" must contain a map".into());
    };
    let nested = match args.get("permutations") {
        None => true,
        Some(Value::Bool(b)) if permutations_allowed => *b,
        Some(_) if permutations_allowed => {
            return Err("\"permutations\" should be boolean type for repeat function.".into())
        }
        Some(_) => true,
    };
    let mut keys = Vec::new();
    let mut lists: Vec<Vec<String>> = Vec::new();
    for (k, v) in for_each {
        let items: Vec<String> = match v {
            Value::Null => Vec::new(),
            Value::Array(a) => a.iter().map(text_of).collect(),
            Value::Object(m) if maps && nested => m.keys().cloned().collect(),
            _ => {
                return Err(format!(
                    "The values of the \"for_each\" argument to \"repeat\" must be {}",
                    if maps && nested {
                        "lists or maps"
                    } else {
                        "lists"
                    }
                ))
            }
        };
        keys.push(k.clone());
        lists.push(items);
    }
    let combos: Vec<Vec<String>> = if nested {
        lists.iter().fold(vec![Vec::new()], |acc, list| {
            acc.iter()
                .flat_map(|prefix| {
                    list.iter().map(move |item| {
                        let mut p = prefix.clone();
                        p.push(item.clone());
                        p
                    })
                })
                .collect()
        })
    } else {
        let lens: BTreeSet<usize> = lists.iter().map(Vec::len).collect();
        if lens.len() > 1 {
            return Err(
                "For repeat, the length of for_each values should be equal if no nested loop."
                    .into(),
            );
        }
        let n = lens.into_iter().next().unwrap_or(0);
        (0..n)
            .map(|i| lists.iter().map(|l| l[i].clone()).collect())
            .collect()
    };
    Ok(Value::Array(
        combos
            .iter()
            .map(|values| substitute(template, &keys, values))
            .collect(),
    ))
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn substitute(template: &Value, keys: &[String], values: &[String]) -> Value {
    match template {
        Value::String(s) => {
            let mut out = s.clone();
            for (k, v) in keys.iter().zip(values) {
                out = out.replace(k.as_str(), v);
            }
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|e| substitute(e, keys, values)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let key = match substitute(&Value::String(k.clone()), keys, values) {
                        Value::String(s) => s,
                        _ => k.clone(),
                    };
                    (key, substitute(v, keys, values))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `digest: [algorithm, value]`: md5, sha1, sha224, sha256, sha384, sha512.
pub fn digest(args: &Value) -> Outcome {
    let Value::Array(a) = args else {
        return Err("Argument to function \"digest\" must be a list of strings".into());
    };
    if !a.iter().all(Value::is_string) {
        return Err("Argument to function \"digest\" must be a list of strings".into());
    }
    if a.len() != 2 {
        return Err("Function \"digest\" usage: [\"<algorithm>\", \"<value>\"]".into());
    }
    let (alg, value) = (
        a[0].as_str().unwrap_or_default().to_ascii_lowercase(),
        a[1].as_str().unwrap_or_default(),
    );
    // Heat encodes the value as latin-1.
    let bytes: Vec<u8> = value.chars().map(|c| c as u32 as u8).collect();
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let out =
        match alg.as_str() {
            "md5" => hex(&md5::Md5::digest(&bytes)),
            "sha1" => hex(&sha1::Sha1::digest(&bytes)),
            "sha224" => hex(&sha2::Sha224::digest(&bytes)),
            "sha256" => hex(&sha2::Sha256::digest(&bytes)),
            "sha384" => hex(&sha2::Sha384::digest(&bytes)),
            "sha512" => hex(&sha2::Sha512::digest(&bytes)),
            _ => return Err(
                "Algorithm must be one of ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512']"
                    .into(),
            ),
        };
    Ok(Value::String(out))
}

/// `str_split: [delimiter, string, index?]`.
pub fn str_split(args: &Value) -> Outcome {
    let example = "\"str_split\" : [ \",\", \"apples,pears\", <index>]";
    let Value::Array(a) = args else {
        return Err(format!(
            "Incorrect arguments to \"str_split\" should be: {example}"
        ));
    };
    let (Some(Value::String(delim)), Some(s)) = (a.first(), a.get(1)) else {
        return Err(format!(
            "Incorrect arguments to \"str_split\" should be: {example}"
        ));
    };
    let Value::String(s) = s else {
        if s.is_null() {
            return Ok(Value::Null);
        }
        return Err(format!(
            "Incorrect arguments to \"str_split\" should be: {example}"
        ));
    };
    let parts: Vec<Value> = s
        .split(delim.as_str())
        .map(|p| Value::String(p.into()))
        .collect();
    match a.get(2) {
        None => Ok(Value::Array(parts)),
        Some(i) => {
            let index: i64 = text_of(i)
                .trim()
                .parse()
                .map_err(|_| format!("Incorrect index to \"str_split\" should be: {example}"))?;
            let len = parts.len() as i64;
            let at = if index < 0 { len + index } else { index };
            if at < 0 || at >= len {
                return Err(format!(
                    "Incorrect index to \"str_split\" should be between 0 and {}",
                    len - 1
                ));
            }
            Ok(parts[at as usize].clone())
        }
    }
}

/// `map_merge: [map, …]`: later maps win.
pub fn map_merge(args: &Value) -> Outcome {
    let Value::Array(maps) = args else {
        return Err("Incorrect arguments to \"map_merge\" should be: \"map_merge\" : [ { \"key1\": \"val1\" }, { \"key2\": \"val2\" } ]".into());
    };
    let mut out = Map::new();
    for m in maps {
        match m {
            Value::Null => {}
            Value::Object(m) => out.extend(m.clone()),
            other => {
                return Err(format!(
                    "Incorrect arguments: Items to merge must be maps. {other} is not a map"
                ))
            }
        }
    }
    Ok(Value::Object(out))
}

/// `map_replace: [map, {keys: {old: new}, values: {old: new}}]`.
pub fn map_replace(args: &Value) -> Outcome {
    let example = "\"map_replace\" : [ { \"key1\": \"val1\" }, {\"keys\": {\"key1\": \"key2\"}, \"values\": {\"val1\": \"val2\"}}]";
    let bad = || format!("Incorrect arguments to \"map_replace\" should be: {example}");
    let Value::Array(a) = args else {
        return Err(bad());
    };
    if a.len() != 2 {
        return Err(bad());
    }
    let as_map = |v: &Value| -> Result<Map<String, Value>, String> {
        match v {
            Value::Null => Ok(Map::new()),
            Value::Object(m) => Ok(m.clone()),
            _ => Err(format!(
                "Incorrect arguments: to \"map_replace\", arguments must be a list of maps. Example:  {example}"
            )),
        }
    };
    let input = as_map(&a[0])?;
    let repl = as_map(&a[1])?;
    if repl.keys().any(|k| k != "keys" && k != "values") {
        return Err(bad());
    }
    let keys = as_map(repl.get("keys").unwrap_or(&Value::Null))?;
    let values = as_map(repl.get("values").unwrap_or(&Value::Null))?;
    let mut out = Map::new();
    for (k, v) in &input {
        let key = match keys.get(k).and_then(Value::as_str) {
            None => k.clone(),
            Some(new) if input.contains_key(new) && new != k => {
                return Err(format!(
                    "key replacement {new} collides with a key in the input map"
                ))
            }
            Some(new) if out.contains_key(new) => {
                return Err(format!(
                    "key replacement {new} collides with a key in the output map"
                ))
            }
            Some(new) => new.to_string(),
        };
        let value = match v {
            Value::String(s) => values.get(s).cloned().unwrap_or_else(|| v.clone()),
            _ => v.clone(),
        };
        out.insert(key, value);
    }
    Ok(Value::Object(out))
}

/// `list_concat: [list, …]` (`unique`: without repeats, first kept).
pub fn list_concat(args: &Value, unique: bool) -> Outcome {
    let name = if unique {
        "list_concat_unique"
    } else {
        "list_concat"
    };
    let Value::Array(lists) = args else {
        return Err(format!("Incorrect arguments to \"{name}\" should be: \"{name}\" : [ [ \"v1\", \"v2\" ], [ \"v3\" ] ]"));
    };
    let mut out: Vec<Value> = Vec::new();
    for l in lists {
        match l {
            Value::Null => {}
            Value::Array(items) => {
                for i in items {
                    if !unique || !out.contains(i) {
                        out.push(i.clone());
                    }
                }
            }
            other => {
                return Err(format!(
                    "Incorrect arguments: Items to concat must be lists. {other} is not a list"
                ))
            }
        }
    }
    Ok(Value::Array(out))
}

/// `contains: [value, sequence]`.
pub fn contains(args: &Value) -> Outcome {
    let Value::Array(a) = args else {
        return Err(
            "Arguments to \"contains\" must be of the form: [value1, [value1, value2]]".into(),
        );
    };
    if a.len() != 2 {
        return Err(
            "Arguments to \"contains\" must be of the form: [value1, [value1, value2]]".into(),
        );
    }
    match &a[1] {
        Value::Array(items) => Ok(Value::Bool(items.contains(&a[0]))),
        Value::String(s) => Ok(Value::Bool(a[0].as_str().is_some_and(|v| s.contains(v)))),
        Value::Object(m) => Ok(Value::Bool(
            a[0].as_str().is_some_and(|v| m.contains_key(v)),
        )),
        _ => Err("\"contains\" should have a list or a string as its second argument".into()),
    }
}

/// HOT 2013-05-23's `Fn::Select: [index, collection]` with Heat's
/// semantics (heat/engine/cfn/functions.py, `Select`): a map is indexed by
/// key, a list by position; a missing key, an index past the end or a
/// null collection give `""`; a string collection is read as JSON first.
pub fn select(args: &Value) -> Outcome {
    let Value::Array(a) = args else {
        return Err("Arguments to \"Fn::Select\" must be a list".into());
    };
    let [index, collection] = a.as_slice() else {
        return Err("Arguments to \"Fn::Select\" must be of the form: [index, collection]".into());
    };
    let parsed;
    let collection = match collection {
        Value::String(text) => {
            parsed =
                serde_json::from_str::<Value>(text).map_err(|e| format!("\"Fn::Select\": {e}"))?;
            &parsed
        }
        other => other,
    };
    match collection {
        Value::Object(m) => match index {
            Value::String(key) => Ok(m.get(key).cloned().unwrap_or(json!(""))),
            _ => Err("Index to \"Fn::Select\" must be a string".into()),
        },
        Value::Array(items) => {
            let position = match index {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.parse::<u64>().ok(),
                _ => None,
            };
            let Some(position) = position else {
                return Err("Index to \"Fn::Select\" must be an integer".into());
            };
            Ok(usize::try_from(position)
                .ok()
                .and_then(|p| items.get(p))
                .cloned()
                .unwrap_or(json!("")))
        }
        Value::Null => Ok(json!("")),
        _ => Err("Arguments to Fn::Select not fully resolved".into()),
    }
}

/// `filter: [values, list]`.
pub fn filter(args: &Value) -> Outcome {
    let Value::Array(a) = args else {
        return Err("Argument to \"filter\" must be a list".into());
    };
    if a.len() != 2 {
        return Err(format!(
            "\"filter\" expected 2 arguments of the form [values, sequence] but got {} arguments instead",
            a.len()
        ));
    }
    let sequence = match &a[1] {
        Value::Null => return Ok(Value::Null),
        Value::Array(s) if s.is_empty() => return Ok(a[1].clone()),
        Value::Array(s) => s,
        _ => return Err("\"filter\" only works with lists".into()),
    };
    let values = match &a[0] {
        Value::Null => return Ok(a[1].clone()),
        Value::Array(v) if v.is_empty() => return Ok(a[1].clone()),
        Value::Array(v) => v,
        _ => return Err("\"filter\" filters a list of values".into()),
    };
    Ok(Value::Array(
        sequence
            .iter()
            .filter(|i| !values.contains(i))
            .cloned()
            .collect(),
    ))
}

/// `make_url: {scheme, username, password, host, port, path, query,
/// fragment}`, each part escaped.
pub fn make_url(args: &Value) -> Outcome {
    use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
    const KEYS: &[&str] = &[
        "scheme", "username", "password", "host", "port", "path", "query", "fragment",
    ];
    // RFC 3986 unreserved characters stay; a path keeps its slashes.
    const PART: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    const PATH: &AsciiSet = &PART.remove(b'/');
    // Python's urlencode: quote_plus (a space is '+'), and Heat keeps '/'.
    const SPACED: &AsciiSet = &PART.remove(b' ');
    let plus = |t: &str| {
        utf8_percent_encode(t, SPACED)
            .to_string()
            .replace(' ', "+")
            .replace("%2F", "/")
    };
    let Value::Object(a) = args else {
        return Err("The arguments to \"make_url\" must be a map".into());
    };
    let invalid: Vec<&str> = a
        .keys()
        .map(String::as_str)
        .filter(|k| !KEYS.contains(k))
        .collect();
    if !invalid.is_empty() {
        return Err(format!(
            "Invalid arguments to \"make_url\": {}",
            invalid.join(", ")
        ));
    }
    let text = |k: &str| -> Result<String, String> {
        match a.get(k) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!(
                "The \"{k}\" argument to \"make_url\" must be a string"
            )),
        }
    };
    let scheme = text("scheme")?;
    if scheme.contains(':') {
        return Err("URL \"scheme\" should not contain ':'".into());
    }
    let mut url = String::new();
    if !scheme.is_empty() {
        url.push_str(&scheme);
        url.push(':');
    }
    let host = text("host")?;
    let user = text("username")?;
    let password = text("password")?;
    let port = match a.get("port") {
        None | Some(Value::Null) => None,
        Some(p) => {
            let n: i64 = text_of(p)
                .trim()
                .parse()
                .map_err(|_| format!("Invalid URL port \"{}\" for make_url", text_of(p)))?;
            if !(1..=65535).contains(&n) {
                return Err(format!("Invalid URL port {n}, must be in range 1-65535"));
            }
            Some(n)
        }
    };
    // Python's quote(host, safe=':'); a host with ':' is an IPv6 literal.
    const HOST: &AsciiSet = &PART.remove(b':');
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&host);
    let host = utf8_percent_encode(host, HOST).to_string();
    if !host.is_empty() || !user.is_empty() || !password.is_empty() || port.is_some() {
        url.push_str("//");
        if !user.is_empty() || !password.is_empty() {
            url.push_str(&utf8_percent_encode(&user, PART).to_string());
            if !password.is_empty() {
                url.push(':');
                url.push_str(&utf8_percent_encode(&password, PART).to_string());
            }
            url.push('@');
        }
        if host.contains(':') {
            url.push_str(&format!("[{host}]"));
        } else {
            url.push_str(&host);
        }
        if let Some(p) = port {
            url.push_str(&format!(":{p}"));
        }
    }
    let path = text("path")?;
    if !path.is_empty() {
        if !url.is_empty() && !path.starts_with('/') {
            url.push('/');
        }
        url.push_str(&utf8_percent_encode(&path, PATH).to_string());
    }
    match a.get("query") {
        None | Some(Value::Null) => {}
        Some(Value::Object(q)) => {
            let pairs: Vec<String> = q
                .iter()
                .map(|(k, v)| format!("{}={}", plus(k), plus(&text_of(v))))
                .collect();
            if !pairs.is_empty() {
                url.push('?');
                url.push_str(&pairs.join("&"));
            }
        }
        Some(_) => return Err("The \"query\" argument to \"make_url\" must be a map".into()),
    }
    let fragment = text("fragment")?;
    if !fragment.is_empty() {
        url.push('#');
        url.push_str(&utf8_percent_encode(&fragment, PATH).to_string());
    }
    Ok(Value::String(url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn str_replace_prefers_longer_keys_and_never_rescans_values() {
        let out = str_replace(
            "str_replace",
            &json!("$var1 and $var10 and $var"),
            &json!({"$var": "X", "$var1": "$var", "$var10": [1, 2]}),
        )
        .unwrap();
        assert_eq!(out, json!("$var and [1,2] and X"));
        let missing = str_replace(
            "str_replace_strict",
            &json!("a"),
            &json!({"b": "c", "dd": "e"}),
        )
        .unwrap_err();
        assert_eq!(
            missing,
            "The following params were not found in the template: dd,b"
        );
        let empty =
            str_replace("str_replace_vstrict", &json!("a b"), &json!({"b": ""})).unwrap_err();
        assert!(
            empty.contains("has an undefined or empty value for param b"),
            "{empty}"
        );
    }

    #[test]
    fn list_functions() {
        assert_eq!(
            list_join(&[json!(", "), json!(["a", "b"]), json!(["c", {"k": 1}])]).unwrap(),
            json!("a, b, c, {\"k\":1}")
        );
        assert_eq!(
            list_concat(&json!([[1, 2], [2, 3]]), true).unwrap(),
            json!([1, 2, 3])
        );
        assert_eq!(
            list_concat(&json!([[1, 2], [2, 3]]), false).unwrap(),
            json!([1, 2, 2, 3])
        );
        assert_eq!(filter(&json!([[2], [1, 2, 3, 2]])).unwrap(), json!([1, 3]));
        assert_eq!(contains(&json!(["b", ["a", "b"]])).unwrap(), json!(true));
        assert_eq!(str_split(&json!([",", "a,b,c", 1])).unwrap(), json!("b"));
        assert_eq!(
            str_split(&json!([",", "a,b,c"])).unwrap(),
            json!(["a", "b", "c"])
        );
        assert!(str_split(&json!([",", "a,b", 5]))
            .unwrap_err()
            .contains("between 0 and 1"));
    }

    #[test]
    fn repeat_loops_nested_or_in_step() {
        let nested = repeat(
            &json!({"template": "%a%-%b%", "for_each": {"%a%": ["x", "y"], "%b%": ["1", "2"]}}),
            true,
            true,
        )
        .unwrap();
        assert_eq!(nested, json!(["x-1", "x-2", "y-1", "y-2"]));
        let zipped = repeat(
            &json!({"template": {"k-%a%": "%b%"}, "for_each": {"%a%": ["x", "y"], "%b%": ["1", "2"]}, "permutations": false}),
            true,
            true,
        )
        .unwrap();
        assert_eq!(zipped, json!([{"k-x": "1"}, {"k-y": "2"}]));
    }

    #[test]
    fn maps_digests_urls_and_paths() {
        assert_eq!(
            map_merge(&json!([{"a": 1, "b": 2}, {"b": 3}])).unwrap(),
            json!({"a": 1, "b": 3})
        );
        assert_eq!(
            map_replace(
                &json!([{"k1": "v1", "k2": "v2"}, {"keys": {"k1": "K1"}, "values": {"v2": "V2"}}])
            )
            .unwrap(),
            json!({"K1": "v1", "k2": "V2"})
        );
        assert_eq!(
            digest(&json!(["sha256", "abc"])).unwrap(),
            json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            digest(&json!(["md5", "abc"])).unwrap(),
            json!("900150983cd24fb0d6963f7d28e17f72")
        );
        assert_eq!(
            make_url(&json!({"scheme": "https", "host": "example.com", "port": 8443, "path": "/a b", "query": {"x": "1 2"}, "fragment": "f"})).unwrap(),
            // The query as Python's urlencode writes it: a space is '+'.
            json!("https://example.com:8443/a%20b?x=1+2#f")
        );
        assert_eq!(
            make_url(&json!({"host": "[::1]", "password": "p w", "query": {"a/b": "c d+"}}))
                .unwrap(),
            json!("//:p%20w@[::1]?a/b=c+d%2B")
        );
        assert_eq!(
            path(
                json!({"a": [1, {"b": "c"}]}),
                &[json!("a"), json!("1"), json!("b")],
                "get_param"
            )
            .unwrap(),
            json!("c")
        );
        assert_eq!(
            path(json!({"a": 1}), &[json!("z")], "get_param").unwrap(),
            json!("")
        );
    }
}
