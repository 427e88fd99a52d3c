//! `AllowedPattern`: CloudFormation checks parameter values against Java
//! regular expressions. fancy-regex gives look-ahead and look-behind; what
//! Java accepts in a character class and Rust's syntax refuses (a `-` next
//! to a class escape such as `[\w-\+]`, where Java takes the `-` literally)
//! is rewritten first. The pattern must match the whole value.

use fancy_regex::Regex;

/// A compiled AllowedPattern, anchored to the whole value.
pub struct AllowedPattern(Regex);

impl AllowedPattern {
    /// Compiles `pattern` (Java syntax, as CloudFormation reads it).
    pub fn new(pattern: &str) -> Result<AllowedPattern, String> {
        Regex::new(&format!("^(?:{})$", javaish(pattern)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_patterns_cloudformation_templates_use() {
        // aws-cloudformation-templates: VPCFlowLogsS3 (look-ahead).
        let p = AllowedPattern::new(
            r"^$|^(?=^.{3,63}$)(?!.*[.-]{2})(?!.*[--.]{2})(?!^(?:(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$)[a-z0-9][a-z0-9.-]*[a-z0-9]$",
        )
        .unwrap();
        assert!(p.matches("my-flow-logs"));
        assert!(p.matches(""));
        assert!(!p.matches("my..logs"));
        assert!(!p.matches("10.0.0.1"));
        // NeptuneDB: a '-' after \w inside a class.
        let p = AllowedPattern::new(r"[\w-\+]+").unwrap();
        assert!(p.matches("db-name+1"));
        assert!(!p.matches("db name"));
        let p = AllowedPattern::new(r"[-\d]+|[a\s-]").unwrap();
        assert!(p.matches("-12"));
        assert!(p.matches("-"));
        // Ranges stay ranges, and the whole value must match.
        let p = AllowedPattern::new("[a-c]+").unwrap();
        assert!(p.matches("abc"));
        assert!(!p.matches("abcd"));
        assert!(AllowedPattern::new("(unclosed").is_err());
    }
}
