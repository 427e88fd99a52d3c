//! The template as given, marked up for reading: keys, intrinsic functions
//! (`Ref`, `Fn::…`, YAML's `!Tags`, HOT's `get_…`), strings, literals and
//! comments each in a `<span>` the stylesheet colours. It only colours
//! tokens, line by line, for JSON and YAML alike; the text is never changed
//! (the page shows exactly what was submitted), and what it does not
//! recognise stays plain.

use super::escape;

/// `template` as HTML: every character escaped, tokens wrapped in spans.
pub fn highlight(template: &str) -> String {
    let mut out = String::with_capacity(template.len() * 2);
    for (i, line) in template.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        line_html(line, &mut out);
    }
    out
}

/// HOT's intrinsic functions, which are plain keys in YAML.
const HOT_FUNCTIONS: [&str; 12] = [
    "get_param",
    "get_resource",
    "get_attr",
    "get_file",
    "list_join",
    "str_replace",
    "str_split",
    "repeat",
    "digest",
    "if",
    "yaql",
    "map_merge",
];

fn is_function(word: &str) -> bool {
    word == "Ref"
        || word == "Condition"
        || word.starts_with("Fn::")
        || word.starts_with('!')
        || HOT_FUNCTIONS.contains(&word)
}

fn is_literal(word: &str) -> bool {
    matches!(word, "true" | "false" | "null" | "True" | "False" | "~")
        || word.parse::<f64>().is_ok()
}

fn span(class: &str, text: &str, out: &mut String) {
    out.push_str("<span class=\"");
    out.push_str(class);
    out.push_str("\">");
    out.push_str(&escape(text));
    out.push_str("</span>");
}

fn line_html(line: &str, out: &mut String) {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut i = 0;
    // Whether the previous character was whitespace (or the line start):
    // a `#` there begins a YAML comment.
    let mut after_space = true;
    while i < chars.len() {
        let (at, c) = chars[i];
        match c {
            '#' if after_space => {
                span("c", &line[at..], out);
                return;
            }
            '"' | '\'' => {
                let end = closing_quote(&chars, i, c);
                let stop = chars.get(end + 1).map_or(line.len(), |&(p, _)| p);
                let token = &line[at..stop];
                let class = if is_key(&chars, end + 1) {
                    if is_function(token.trim_matches(c)) {
                        "f"
                    } else {
                        "k"
                    }
                } else {
                    "s"
                };
                span(class, token, out);
                i = end + 1;
                after_space = false;
            }
            c if c.is_whitespace() || "{}[],:-".contains(c) => {
                out.push_str(&escape(&c.to_string()));
                after_space = c.is_whitespace() || "{[,".contains(c);
                i += 1;
            }
            _ => {
                // A bare word: up to whitespace or structure; `::` and a
                // colon not followed by a space (`Fn::GetAtt`, a URL) stay
                // inside it.
                let mut end = i;
                while end < chars.len() {
                    let ch = chars[end].1;
                    if ch.is_whitespace() || "{}[],\"".contains(ch) {
                        break;
                    }
                    if ch == ':' && chars.get(end + 1).is_none_or(|&(_, n)| n.is_whitespace()) {
                        break;
                    }
                    end += 1;
                }
                let stop = chars.get(end).map_or(line.len(), |&(p, _)| p);
                let word = &line[at..stop];
                let class = if is_function(word) {
                    Some("f")
                } else if is_key(&chars, end) {
                    Some("k")
                } else if is_literal(word) {
                    Some("n")
                } else {
                    None
                };
                match class {
                    Some(class) => span(class, word, out),
                    None => out.push_str(&escape(word)),
                }
                i = end.max(i + 1);
                after_space = false;
            }
        }
    }
}

/// The index of the quote closing the string opened at `open`, or the last
/// character when it is not closed on this line.
fn closing_quote(chars: &[(usize, char)], open: usize, quote: char) -> usize {
    let mut j = open + 1;
    while j < chars.len() {
        let c = chars[j].1;
        if c == '\\' && quote == '"' {
            j += 2;
            continue;
        }
        if c == quote {
            // YAML's '' inside a single-quoted string is an escaped quote.
            if quote == '\'' && chars.get(j + 1).is_some_and(|&(_, n)| n == '\'') {
                j += 2;
                continue;
            }
            return j;
        }
        j += 1;
    }
    chars.len().saturating_sub(1)
}

/// Whether a key's colon (then a space, or the end of the line) follows at
/// `at`, past spaces.
fn is_key(chars: &[(usize, char)], at: usize) -> bool {
    let mut j = at;
    while chars.get(j).is_some_and(|&(_, c)| c == ' ') {
        j += 1;
    }
    chars.get(j).is_some_and(|&(_, c)| c == ':')
        && chars
            .get(j + 1)
            .is_none_or(|&(_, n)| n.is_whitespace() || n == '"' || n == '{' || n == '[')
}

#[cfg(test)]
mod tests {
    use super::highlight;

    #[test]
    fn yaml_keys_functions_strings_literals_and_comments() {
        let got = highlight(
            "# a comment\nResources:\n  A: {Type: 'X::Y', Properties: {N: 3, V: !Ref P, U: \"http://h\"}} # end\n  B:\n    Value: {Fn::GetAtt: [A, Id]}",
        );
        assert_eq!(
            got,
            "<span class=\"c\"># a comment</span>\n\
<span class=\"k\">Resources</span>:\n  \
<span class=\"k\">A</span>: {<span class=\"k\">Type</span>: <span class=\"s\">&#39;X::Y&#39;</span>, <span class=\"k\">Properties</span>: {<span class=\"k\">N</span>: <span class=\"n\">3</span>, <span class=\"k\">V</span>: <span class=\"f\">!Ref</span> P, <span class=\"k\">U</span>: <span class=\"s\">&quot;http://h&quot;</span>}} <span class=\"c\"># end</span>\n  \
<span class=\"k\">B</span>:\n    \
<span class=\"k\">Value</span>: {<span class=\"f\">Fn::GetAtt</span>: [A, Id]}"
        );
    }

    #[test]
    fn json_keys_and_functions_and_escaped_quotes() {
        let got = highlight(r#"{"Ref": "A", "Name": "say \"hi\"", "N": 1.5, "B": true}"#);
        assert_eq!(
            got,
            "{<span class=\"f\">&quot;Ref&quot;</span>: <span class=\"s\">&quot;A&quot;</span>, <span class=\"k\">&quot;Name&quot;</span>: <span class=\"s\">&quot;say \\&quot;hi\\&quot;&quot;</span>, <span class=\"k\">&quot;N&quot;</span>: <span class=\"n\">1.5</span>, <span class=\"k\">&quot;B&quot;</span>: <span class=\"n\">true</span>}"
        );
    }

    #[test]
    fn markup_in_a_template_is_escaped_and_the_text_kept() {
        let template = "Description: <script>alert('x')</script> # <b>\nX: 'unclosed";
        let got = highlight(template);
        assert!(!got.contains("<script>"), "{got}");
        assert!(!got.contains("<b>"), "{got}");
        // Stripping the spans and unescaping gives the template back.
        let text = got
            .replace("</span>", "")
            .split("<span class=\"")
            .enumerate()
            .map(|(i, p)| {
                if i == 0 {
                    p.to_string()
                } else {
                    p[3..].to_string()
                }
            })
            .collect::<String>()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&quot;", "\"")
            .replace("&amp;", "&");
        assert_eq!(text, template);
    }
}
