//! Import circles between the files of one crate, read from the code.
//!
//! A crate's module tree is read from its root (`src/lib.rs`, else
//! `src/main.rs`) by its `mod` declarations; what is only compiled for
//! tests (`#[cfg(test)]` items: `mod tests`, the crash simulator, test-only
//! files) is left out, since a test may reach anywhere in its crate. Every
//! path a file names (`use` declarations, their `{…}` trees, and
//! `crate::`/`super::`/`self::` paths in code) is resolved module by
//! module to the file that defines what it names, through re-exports
//! (`pub use`, named or glob). A file that takes something from another is
//! an arrow between them, except between a module and its own ancestors: a
//! module's children are its private parts in Rust (they see its private
//! items by design, and it hands theirs on). A circle of arrows between
//! files is an error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What [`file_circles`] found in one crate.
pub struct Found {
    /// How many files the crate has (test-only ones left out).
    pub files: usize,
    /// One message per circle.
    pub circles: Vec<String>,
}

/// The import circles between the files of crate `name`, whose sources
/// are in `src`.
pub fn file_circles(name: &str, src: &Path) -> Found {
    let tree = ModuleTree::read(src);
    let root = src.parent().unwrap_or(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut names: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &tree.modules {
        for path in &file.paths {
            let Some((target, item)) = tree.resolve(module, path, 0) else {
                continue;
            };
            if is_prefix(&target, module) || is_prefix(module, &target) {
                continue;
            }
            let (from, to) = (tree.shown(module, root), tree.shown(&target, root));
            edges.entry(from.clone()).or_default().insert(to.clone());
            names
                .entry((from, to))
                .or_default()
                .insert(item.unwrap_or_else(|| target.last().cloned().unwrap_or_default()));
        }
    }
    let circles = crate::layers::cycles(&edges)
        .into_iter()
        .map(|circle| {
            let ties: Vec<String> = circle
                .windows(2)
                .map(|pair| {
                    let taken = names
                        .get(&(pair[0].clone(), pair[1].clone()))
                        .map(|n| n.iter().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_default();
                    format!("{} takes {taken} from {}", pair[0], pair[1])
                })
                .collect();
            format!(
                "{name}: its files import each other in a circle: {} ({})",
                circle.join(" → "),
                ties.join("; ")
            )
        })
        .collect();
    Found {
        files: tree.modules.len(),
        circles,
    }
}

/// Whether `a` is `b` or one of its ancestors.
fn is_prefix(a: &[String], b: &[String]) -> bool {
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// One file of the crate, as far as imports go.
struct File {
    path: PathBuf,
    /// The child modules it declares.
    children: BTreeSet<String>,
    /// The items it defines (functions, types, traits, constants, macros).
    defines: BTreeSet<String>,
    /// Its re-exports: the name it hands on → the path it names.
    reexports: BTreeMap<String, Vec<String>>,
    /// Its glob re-exports (`pub use x::*`): the modules' paths.
    globs: Vec<Vec<String>>,
    /// Every path it names (imports and paths in code).
    paths: Vec<Vec<String>>,
}

/// The crate's modules (module path → its file).
struct ModuleTree {
    modules: BTreeMap<Vec<String>, File>,
}

impl ModuleTree {
    fn read(src: &Path) -> ModuleTree {
        let mut tree = ModuleTree {
            modules: BTreeMap::new(),
        };
        let root = if src.join("lib.rs").is_file() {
            src.join("lib.rs")
        } else {
            src.join("main.rs")
        };
        tree.add(Vec::new(), root, src.to_path_buf());
        tree
    }

    /// Reads `path` as module `module`, whose children's files are in `dir`.
    fn add(&mut self, module: Vec<String>, path: PathBuf, dir: PathBuf) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        let code = without_tests(&blank_comments_and_strings(&text));
        let file = read_file(&code, path);
        let children: Vec<String> = file.children.iter().cloned().collect();
        self.modules.insert(module.clone(), file);
        for child in children {
            let (file, child_dir) = if dir.join(format!("{child}.rs")).is_file() {
                (dir.join(format!("{child}.rs")), dir.join(&child))
            } else {
                (dir.join(&child).join("mod.rs"), dir.join(&child))
            };
            let mut m = module.clone();
            m.push(child);
            self.add(m, file, child_dir);
        }
    }

    /// The file of `module`, relative to the crate's directory.
    fn shown(&self, module: &[String], root: &Path) -> String {
        let Some(f) = self.modules.get(module) else {
            return module.join("::");
        };
        let base = root.parent().unwrap_or(root);
        f.path
            .strip_prefix(base)
            .unwrap_or(&f.path)
            .display()
            .to_string()
    }

    /// The module that defines what `path` (named in `from`) names, and the
    /// item's name in it; `None` for another crate's.
    fn resolve(
        &self,
        from: &[String],
        path: &[String],
        depth: usize,
    ) -> Option<(Vec<String>, Option<String>)> {
        if depth > 8 || path.is_empty() {
            return None;
        }
        let mut at: Vec<String> = from.to_vec();
        let mut i = 0;
        match path[0].as_str() {
            "crate" => {
                at.clear();
                i = 1;
            }
            "self" => i = 1,
            "super" => {
                while path.get(i).is_some_and(|s| s == "super") {
                    at.pop()?;
                    i += 1;
                }
            }
            first if self.modules.get(from)?.children.contains(first) => {}
            _ => return None,
        }
        while let Some(seg) = path.get(i) {
            let file = self.modules.get(&at)?;
            if !file.children.contains(seg) {
                break;
            }
            at.push(seg.clone());
            i += 1;
        }
        let Some(item) = path.get(i).cloned() else {
            return Some((at, None));
        };
        let file = self.modules.get(&at)?;
        if file.defines.contains(&item) {
            return Some((at, Some(item)));
        }
        if let Some(target) = file.reexports.get(&item) {
            if let Some(found) = self.resolve(&at, target, depth + 1) {
                return Some(found);
            }
        }
        for glob in &file.globs {
            let mut through = glob.clone();
            through.push(item.clone());
            if let Some((m, Some(found))) = self.resolve(&at, &through, depth + 1) {
                if self
                    .modules
                    .get(&m)
                    .is_some_and(|f| f.defines.contains(&found))
                {
                    return Some((m, Some(found)));
                }
            }
        }
        Some((at, Some(item)))
    }
}

/// `text` with comments removed and string and character literals
/// blanked (a path in a message or a comment is no import).
fn blank_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    _ => j += 1,
                }
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), else a lifetime.
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `code` without the items compiled only for tests (`#[cfg(test)]`).
fn without_tests(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let after = &rest[at + MARK.len()..];
        // The item: up to its `;`, or its `{ … }` block.
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, ch) in after.char_indices() {
            match ch {
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Identifier-ish words and the punctuation that matters to paths.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// The imports, re-exports, declarations and paths of one file's code.
fn read_file(code: &str, path: PathBuf) -> File {
    let t = tokens(code);
    let mut file = File {
        path,
        children: BTreeSet::new(),
        defines: BTreeSet::new(),
        reexports: BTreeMap::new(),
        globs: Vec::new(),
        paths: Vec::new(),
    };
    let mut i = 0;
    while i < t.len() {
        let word = t[i].as_str();
        let next = t.get(i + 1).map(String::as_str);
        match word {
            "mod" if next.is_some_and(is_ident) => {
                let name = t[i + 1].clone();
                if t.get(i + 2).map(String::as_str) == Some(";") {
                    file.children.insert(name);
                } else {
                    file.defines.insert(name);
                }
                i += 2;
            }
            "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union"
                if next.is_some_and(is_ident) =>
            {
                file.defines.insert(t[i + 1].clone());
                i += 2;
            }
            "macro_rules" if next == Some("!") => {
                if let Some(name) = t.get(i + 2) {
                    file.defines.insert(name.clone());
                }
                i += 3;
            }
            "use" => {
                let public = is_public_before(&t, i);
                let end = t[i..]
                    .iter()
                    .position(|x| x == ";")
                    .map_or(t.len(), |k| i + k);
                for (target, alias) in use_tree(&t[i + 1..end]) {
                    if alias == "*" {
                        if public {
                            file.globs.push(target.clone());
                        }
                    } else if public {
                        file.reexports.insert(alias, target.clone());
                    }
                    file.paths.push(target);
                }
                i = end + 1;
            }
            "crate" | "super" | "self" if next == Some("::") => {
                let mut p = vec![t[i].clone()];
                let mut j = i + 1;
                while t.get(j).map(String::as_str) == Some("::")
                    && t.get(j + 1).is_some_and(|s| is_ident(s))
                {
                    p.push(t[j + 1].clone());
                    j += 2;
                }
                file.paths.push(p);
                i = j;
            }
            _ => i += 1,
        }
    }
    file
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Whether the `use` at `i` is public in any way (`pub`, `pub(crate)`, …).
fn is_public_before(t: &[String], i: usize) -> bool {
    match i.checked_sub(1).map(|k| t[k].as_str()) {
        Some("pub") => true,
        Some(")") => {
            // pub(crate), pub(super), pub(in path)
            let open = t[..i].iter().rposition(|x| x == "(");
            open.is_some_and(|o| o > 0 && t[o - 1] == "pub")
        }
        _ => false,
    }
}

/// The paths of a use tree's tokens (`a::b::{c, d as e, f::*}`), each with
/// the name it binds (`*` for a glob).
fn use_tree(t: &[String]) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut pos = 0;
    tree_at(t, &mut pos, &mut Vec::new(), &mut out);
    out
}

fn tree_at(
    t: &[String],
    pos: &mut usize,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    let depth = prefix.len();
    loop {
        match t.get(*pos).map(String::as_str) {
            None | Some("}") | Some(",") => break,
            Some("::") => *pos += 1,
            Some("{") => {
                *pos += 1;
                loop {
                    tree_at(t, pos, prefix, out);
                    match t.get(*pos).map(String::as_str) {
                        Some(",") => *pos += 1,
                        Some("}") => {
                            *pos += 1;
                            break;
                        }
                        _ => break,
                    }
                    if t.get(*pos).map(String::as_str) == Some("}") {
                        *pos += 1;
                        break;
                    }
                }
                prefix.truncate(depth);
                return;
            }
            Some("*") => {
                *pos += 1;
                out.push((prefix.clone(), "*".into()));
                prefix.truncate(depth);
                return;
            }
            Some(word) => {
                let word = word.to_string();
                *pos += 1;
                if t.get(*pos).map(String::as_str) == Some("as") {
                    let alias = t.get(*pos + 1).cloned().unwrap_or_default();
                    *pos += 2;
                    let mut p = prefix.clone();
                    if word != "self" {
                        p.push(word);
                    }
                    out.push((p, alias));
                    prefix.truncate(depth);
                    return;
                }
                if t.get(*pos).map(String::as_str) != Some("::") {
                    let mut p = prefix.clone();
                    let bound = if word == "self" {
                        p.last().cloned().unwrap_or_default()
                    } else {
                        p.push(word.clone());
                        word
                    };
                    out.push((p, bound));
                    prefix.truncate(depth);
                    return;
                }
                prefix.push(word);
            }
        }
    }
    prefix.truncate(depth);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(paths: &[(Vec<String>, String)]) -> Vec<String> {
        paths
            .iter()
            .map(|(p, a)| format!("{} as {a}", p.join("::")))
            .collect()
    }

    #[test]
    fn use_trees_are_expanded() {
        let t = tokens("super::{protocol, kinds::{Updates as U, self}, dag::*}");
        assert_eq!(
            strings(&use_tree(&t)),
            [
                "super::protocol as protocol",
                "super::kinds::Updates as U",
                "super::kinds as kinds",
                "super::dag as *",
            ]
        );
        let t = tokens("crate::stack::{now, CallKind}");
        assert_eq!(
            strings(&use_tree(&t)),
            [
                "crate::stack::now as now",
                "crate::stack::CallKind as CallKind"
            ]
        );
    }

    #[test]
    fn comments_strings_and_tests_are_no_imports() {
        let code = without_tests(&blank_comments_and_strings(
            "use a::b; // crate::c\nlet s = \"crate::d\"; let r = r#\"super::e\"#; let c = '\"';\n#[cfg(test)]\nmod tests {\n    use crate::f;\n}\nuse crate::g;\n",
        ));
        let f = read_file(&code, PathBuf::from("x.rs"));
        let paths: Vec<String> = f.paths.iter().map(|p| p.join("::")).collect();
        assert_eq!(paths, ["a::b", "crate::g"]);
    }

    /// Writes a crate of `files` (path → text) and returns its circles.
    fn circles_of(files: &[(&str, &str)]) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!(
            "xtask-imports-{}-{}",
            std::process::id(),
            files.len() * 1000 + files.iter().map(|f| f.1.len()).sum::<usize>()
        ));
        let src = dir.join("src");
        for (path, text) in files {
            let p = src.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let found = file_circles("demo", &src);
        std::fs::remove_dir_all(&dir).unwrap();
        // Shown from the workspace: here, the crate's directory's parent.
        let crate_dir = format!("{}/", dir.file_name().unwrap().to_string_lossy());
        found
            .circles
            .into_iter()
            .map(|c| c.replace(&crate_dir, ""))
            .collect()
    }

    #[test]
    fn a_super_circle_between_siblings_is_found_and_ancestors_are_not_one() {
        let base = [
            ("lib.rs", "pub mod engine;\npub mod model;\n"),
            ("model.rs", "pub struct Thing;\n"),
            (
                "engine/mod.rs",
                "mod protocol;\nmod update;\npub use protocol::Attempt;\npub struct Op;\n",
            ),
            (
                "engine/protocol.rs",
                "use super::Op;\nuse crate::model::Thing;\npub enum Attempt { First }\n",
            ),
            (
                "engine/update.rs",
                "use super::{Attempt, Op};\npub struct UpdateChange;\n",
            ),
        ];
        assert!(circles_of(&base).is_empty());
        let mut bad = base.to_vec();
        bad[3] = (
            "engine/protocol.rs",
            "use super::Op;\nuse super::update::UpdateChange;\npub enum Attempt { First }\n",
        );
        // update.rs takes Attempt through mod.rs's re-export: from protocol.rs.
        assert_eq!(
            circles_of(&bad),
            ["demo: its files import each other in a circle: src/engine/protocol.rs → src/engine/update.rs → src/engine/protocol.rs (src/engine/protocol.rs takes UpdateChange from src/engine/update.rs; src/engine/update.rs takes Attempt from src/engine/protocol.rs)"]
        );
    }

    #[test]
    fn self_paths_and_paths_in_code_count() {
        let files = [
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "pub fn f() { crate::b::g() }\n"),
            ("b/mod.rs", "mod inner;\npub use self::inner::g;\n"),
            ("b/inner.rs", "pub fn g() { crate::a::f() }\n"),
        ];
        assert_eq!(
            circles_of(&files),
            ["demo: its files import each other in a circle: src/a.rs → src/b/inner.rs → src/a.rs (src/a.rs takes g from src/b/inner.rs; src/b/inner.rs takes f from src/a.rs)"]
        );
    }
}
