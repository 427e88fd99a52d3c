//! `AllowedPattern`: CloudFormation checks parameter values against Java
//! regular expressions, Heat (HOT's `allowed_pattern`) against Python's
//! `re`. fancy-regex gives look-ahead and look-behind; what a dialect
//! accepts and Rust's syntax refuses is rewritten first: for Java, a `-`
//! next to a class escape such as `[\w-\+]` (Java takes the `-`
//! literally); for Python, a quantified look-around (`(?=x)*`, which Python
//! allows and which always matches when it may repeat zero times), `\Z`
//! and `(?P=name)`. The pattern must match the whole value.

use fancy_regex::Regex;

/// A compiled AllowedPattern, anchored to the whole value.
pub struct AllowedPattern(Regex);

/// Whose regular expressions a pattern is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Java's, as CloudFormation reads AllowedPattern.
    Java,
    /// Python's `re`, as Heat reads `allowed_pattern`
    /// (heat/engine/constraints.py, `AllowedPattern`).
    Python,
}

/// An AllowedPattern that does not compile (the regular expression's own
/// error, in the dialect it was written in).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatternError(pub String);

impl AllowedPattern {
    /// Compiles `pattern`, written in `dialect`.
    pub fn new(pattern: &str, dialect: Dialect) -> Result<AllowedPattern, PatternError> {
        Self::compile(pattern, dialect).map_err(PatternError)
    }

    /// [`AllowedPattern::new`], its texts.
    fn compile(pattern: &str, dialect: Dialect) -> Result<AllowedPattern, String> {
        let rust = match dialect {
            Dialect::Java => javaish(pattern),
            Dialect::Python => pythonish(pattern),
        };
        Regex::new(&format!("^(?:{rust})$"))
            .map(AllowedPattern)
            .map_err(|e| e.to_string())
    }

    /// Whether `value` matches; a pattern that backtracks past fancy-regex's
    /// limit does not match.
    pub fn matches(&self, value: &str) -> bool {
        self.0.is_match(value).unwrap_or(false)
    }
}

/// Escape sequences that stand for a class of characters: a `-` next to one
/// inside `[...]` cannot be a range, so Java reads it as a literal `-`.
fn is_class_escape(c: char) -> bool {
    matches!(c, 'w' | 'W' | 'd' | 'D' | 's' | 'S' | 'p' | 'P')
}

/// `pattern` with every `-` that Java reads literally inside a character
/// class escaped, so Rust's syntax reads it the same way.
fn javaish(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut in_class = false;
    // Whether the previous item in the class was a class escape.
    let mut after_class_escape = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let next = chars[i + 1];
            out.push(c);
            out.push(next);
            after_class_escape = in_class && is_class_escape(next);
            i += 2;
            continue;
        }
        if !in_class {
            if c == '[' {
                in_class = true;
                after_class_escape = false;
                out.push(c);
                // A leading `^` or `]` belongs to the class.
                if chars.get(i + 1) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
            } else {
                out.push(c);
            }
            i += 1;
            continue;
        }
        match c {
            ']' => {
                in_class = false;
                out.push(c);
            }
            '-' => {
                let next_is_escape = chars.get(i + 1) == Some(&'\\')
                    && chars.get(i + 2).is_some_and(|n| is_class_escape(*n));
                if after_class_escape || next_is_escape {
                    out.push_str("\\-");
                } else {
                    out.push('-');
                }
            }
            _ => out.push(c),
        }
        after_class_escape = false;
        i += 1;
    }
    out
}

/// The end of `pattern`'s group that opens at `open` (its `)`), past
/// escapes, classes and nested groups; `None` when it is not closed.
fn group_end(chars: &[char], open: usize) -> Option<usize> {
    let (mut depth, mut in_class, mut i) = (0usize, false, open);
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The quantifier at `at` (`*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, with a
/// lazy `?`): its length and whether it allows zero repetitions.
fn quantifier(chars: &[char], at: usize) -> Option<(usize, bool)> {
    let (len, zero) = match chars.get(at)? {
        '*' | '?' => (1, true),
        '+' => (1, false),
        '{' => {
            let close = chars[at..].iter().position(|&c| c == '}')?;
            let inside: String = chars[at + 1..at + close].iter().collect();
            let min = inside.split(',').next()?.trim();
            if !min.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            (close + 1, min.is_empty() || min.parse::<u64>().ok()? == 0)
        }
        _ => return None,
    };
    let lazy = usize::from(chars.get(at + len) == Some(&'?'));
    Some((len + lazy, zero))
}

/// `pattern` (Python's `re`) in Rust's syntax: a look-around that may
/// repeat zero times always matches, so it goes; one that must repeat is
/// the look-around once; `\Z` is `\z`; `(?P=name)` is `\k<name>`.
fn pythonish(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len());
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            match chars[i + 1] {
                'Z' if !in_class => out.push_str("\\z"),
                next => {
                    out.push(c);
                    out.push(next);
                }
            }
            i += 2;
            continue;
        }
        if in_class {
            in_class = c != ']';
            out.push(c);
            i += 1;
            continue;
        }
        let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
        let lookaround = ["(?=", "(?!", "(?<=", "(?<!"]
            .iter()
            .any(|p| rest.starts_with(p));
        if lookaround {
            if let Some(end) = group_end(&chars, i) {
                let group: String = chars[i..=end].iter().collect();
                let inner_start = if rest.starts_with("(?<") { 4 } else { 3 };
                let inner: String = chars[i + inner_start..end].iter().collect();
                let rewritten = format!("{}{})", &group[..inner_start], pythonish(&inner));
                match quantifier(&chars, end + 1) {
                    Some((len, true)) => i = end + 1 + len,
                    Some((len, false)) => {
                        out.push_str(&rewritten);
                        i = end + 1 + len;
                    }
                    None => {
                        out.push_str(&rewritten);
                        i = end + 1;
                    }
                }
                continue;
            }
        }
        if rest.starts_with("(?P=") {
            if let Some(close) = chars[i..].iter().position(|&c| c == ')') {
                let name: String = chars[i + 4..i + close].iter().collect();
                out.push_str(&format!("\\k<{name}>"));
                i += close + 1;
                continue;
            }
        }
        in_class = c == '[';
        if in_class && matches!(chars.get(i + 1), Some('^')) {
            out.push_str("[^");
            i += 2;
            // A `]` first in the class is literal.
            if chars.get(i) == Some(&']') {
                out.push_str("\\]");
                i += 1;
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_patterns_cloudformation_templates_use() {
        // aws-cloudformation-templates: VPCFlowLogsS3 (look-ahead).
        let p = AllowedPattern::new(
            r"^$|^(?=^.{3,63}$)(?!.*[.-]{2})(?!.*[--.]{2})(?!^(?:(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$)[a-z0-9][a-z0-9.-]*[a-z0-9]$",
            Dialect::Java,
        )
        .unwrap();
        assert!(p.matches("my-flow-logs"));
        assert!(p.matches(""));
        assert!(!p.matches("my..logs"));
        assert!(!p.matches("10.0.0.1"));
        // NeptuneDB: a '-' after \w inside a class.
        let p = AllowedPattern::new(r"[\w-\+]+", Dialect::Java).unwrap();
        assert!(p.matches("db-name+1"));
        assert!(!p.matches("db name"));
        let p = AllowedPattern::new(r"[-\d]+|[a\s-]", Dialect::Java).unwrap();
        assert!(p.matches("-12"));
        assert!(p.matches("-"));
        // Ranges stay ranges, and the whole value must match.
        let p = AllowedPattern::new("[a-c]+", Dialect::Java).unwrap();
        assert!(p.matches("abc"));
        assert!(!p.matches("abcd"));
        assert!(AllowedPattern::new("(unclosed", Dialect::Java).is_err());
    }

    #[test]
    fn python_patterns_heat_templates_use() {
        // A quantified look-ahead (the issue's host name pattern): Python
        // allows it; repeated zero times it always matches.
        let p = AllowedPattern::new(
            r"[A-Za-z0-9]+(?=[\.\-][a-zA-Z0-9])*\.[a-zA-z09]+",
            Dialect::Python,
        )
        .unwrap();
        assert!(p.matches("web.example"));
        assert!(!p.matches("web"));
        // One that must repeat is the look-ahead once.
        let p = AllowedPattern::new(r"(?=[a-z])+\w+", Dialect::Python).unwrap();
        assert!(p.matches("abc1"));
        assert!(!p.matches("1abc"));
        // \Z and a named back-reference.
        let p = AllowedPattern::new(r"(?P<x>[a-z])-(?P=x)\Z", Dialect::Python).unwrap();
        assert!(p.matches("a-a"));
        assert!(!p.matches("a-b"));
        // Java's literal '-' beside a class escape is not Python's.
        assert!(AllowedPattern::new(r"[\w-\+]+", Dialect::Python).is_err());
        assert!(AllowedPattern::new("(unclosed", Dialect::Python).is_err());
    }
}
