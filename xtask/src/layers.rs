//! `cargo xtask layers`: the crates' layering, checked from `cargo metadata`.
//!
//! Cairn's crates depend one way (ARCHITECTURE.md): a crate may depend only
//! on crates of a lower layer, a pure crate has no I/O stack anywhere in
//! what it links, and inside a crate the top-level modules do not import
//! each other in a cycle. Breaking any is an error here, and CI runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// A workspace crate's place in the layering.
struct Layer {
    name: &'static str,
    /// Lower numbers are lower layers; a crate may depend only on crates
    /// of a strictly lower layer (so crates of one layer never on each
    /// other).
    level: u8,
    /// Pure: no I/O stack in anything it links.
    pure: bool,
}

const LAYERS: &[Layer] = &[
    Layer {
        name: "cairn-sdk",
        level: 0,
        pure: false,
    },
    Layer {
        name: "cairn-template",
        level: 0,
        pure: true,
    },
    Layer {
        name: "cairn-pg-tls",
        level: 0,
        pure: false,
    },
    Layer {
        name: "cairn-config",
        level: 1,
        pure: true,
    },
    Layer {
        name: "cairn-model",
        level: 1,
        pure: true,
    },
    Layer {
        name: "cairn-providers",
        level: 1,
        pure: false,
    },
    Layer {
        name: "cairn-provider-postgres",
        level: 1,
        pure: false,
    },
    Layer {
        name: "cairn-store",
        level: 2,
        pure: false,
    },
    Layer {
        name: "cairn-plugin",
        level: 2,
        pure: false,
    },
    Layer {
        name: "cairn-webhook",
        level: 3,
        pure: false,
    },
    Layer {
        name: "cairn-core",
        level: 3,
        pure: false,
    },
    Layer {
        name: "cairn-api",
        level: 4,
        pure: false,
    },
    Layer {
        name: "cairn",
        level: 5,
        pure: false,
    },
];

/// What a pure crate must not link: async runtimes, servers, clients,
/// databases, dynamic loading.
const IO_CRATES: &[&str] = &[
    "tokio",
    "axum",
    "reqwest",
    "hyper",
    "rusqlite",
    "tokio-postgres",
    "libloading",
];

/// Runs the check; `Ok` with a summary, `Err` with every violation.
pub fn check(cargo: &str, root: &std::path::Path) -> Result<String, String> {
    let out = Command::new(cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let metadata: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata's answer is not JSON: {e}"))?;
    let graph = Graph::read(&metadata)?;
    let mut problems = violations(&graph, cargo, root);
    for layer in LAYERS {
        if let Some(dir) = graph.source_dir(layer.name) {
            problems.extend(module_cycles(layer.name, &dir));
        }
    }
    if problems.is_empty() {
        Ok(format!(
            "{} layered crates, {} dependencies between workspace crates, all one way; {} pure; no import cycle between the top-level modules of any",
            LAYERS.len(),
            graph.workspace_edges(),
            LAYERS.iter().filter(|l| l.pure).count()
        ))
    } else {
        Err(problems.join("\n"))
    }
}

/// The resolved dependency graph: package id → name, and the ids each
/// package depends on (every kind: a test may not reach up either).
struct Graph {
    names: BTreeMap<String, String>,
    /// Workspace crate name → its `src/` directory.
    sources: BTreeMap<String, std::path::PathBuf>,
    deps: BTreeMap<String, Vec<String>>,
    members: BTreeSet<String>,
}

impl Graph {
    fn read(metadata: &Value) -> Result<Graph, String> {
        let mut names = BTreeMap::new();
        let mut sources = BTreeMap::new();
        for p in metadata["packages"].as_array().into_iter().flatten() {
            if let (Some(id), Some(name)) = (p["id"].as_str(), p["name"].as_str()) {
                names.insert(id.to_string(), name.to_string());
                if let Some(dir) = p["manifest_path"]
                    .as_str()
                    .and_then(|m| std::path::Path::new(m).parent())
                {
                    sources.insert(name.to_string(), dir.join("src"));
                }
            }
        }
        let members = metadata["workspace_members"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        let nodes = metadata["resolve"]["nodes"]
            .as_array()
            .ok_or("cargo metadata has no resolve graph")?;
        let mut deps = BTreeMap::new();
        for n in nodes {
            let Some(id) = n["id"].as_str() else { continue };
            let edges = n["deps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d["pkg"].as_str().map(str::to_string))
                .collect();
            deps.insert(id.to_string(), edges);
        }
        Ok(Graph {
            names,
            sources,
            deps,
            members,
        })
    }

    fn name<'a>(&'a self, id: &'a str) -> &'a str {
        self.names.get(id).map(String::as_str).unwrap_or(id)
    }

    fn source_dir(&self, name: &str) -> Option<std::path::PathBuf> {
        self.sources.get(name).cloned()
    }

    fn member_ids(&self) -> impl Iterator<Item = &String> {
        self.members.iter()
    }

    fn workspace_edges(&self) -> usize {
        self.member_ids()
            .flat_map(|m| self.deps.get(m).into_iter().flatten())
            .filter(|d| self.members.contains(*d))
            .count()
    }
}

fn layer_of(name: &str) -> Option<&'static Layer> {
    LAYERS.iter().find(|l| l.name == name)
}

fn violations(graph: &Graph, cargo: &str, root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for member in graph.member_ids() {
        let name = graph.name(member);
        let Some(layer) = layer_of(name) else {
            continue;
        };
        for dep in graph.deps.get(member).into_iter().flatten() {
            if !graph.members.contains(dep) {
                continue;
            }
            let dep_name = graph.name(dep);
            match layer_of(dep_name) {
                Some(d) if d.level < layer.level => {}
                Some(d) => out.push(format!(
                    "{name} (layer {}) depends on {dep_name} (layer {}): a crate may depend only on lower layers",
                    layer.level, d.level
                )),
                None => out.push(format!(
                    "{name} depends on {dep_name}, which is not a layered crate (an example, a test plugin or a tool): nothing layered may depend on it"
                )),
            }
        }
        if layer.pure {
            match linked(cargo, root, name) {
                Ok(linked) => {
                    for io in IO_CRATES.iter().filter(|c| linked.contains(**c)) {
                        out.push(format!(
                            "{name} is pure but links {io} (see `cargo tree -p {name} -e normal -i {io}`): keep I/O out of it"
                        ));
                    }
                }
                Err(e) => out.push(e),
            }
        }
    }
    for layer in LAYERS {
        if !graph.member_ids().any(|m| graph.name(m) == layer.name) {
            out.push(format!(
                "{} is in xtask's layering but not in the workspace: update xtask/src/layers.rs",
                layer.name
            ));
        }
    }
    out
}

/// The packages `name` links when built on its own (its normal
/// dependencies, transitively, with the features it asks for; the
/// workspace's resolve graph would add the features other crates ask for).
fn linked(cargo: &str, root: &std::path::Path, name: &str) -> Result<BTreeSet<String>, String> {
    let out = Command::new(cargo)
        .current_dir(root)
        .args([
            "tree", "-p", name, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree -p {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Import cycles between the top-level modules of the crate whose sources
/// are in `src` (`crate::x` paths; a file's `#[cfg(test)] mod tests` and
/// test-only files are left out: tests may reach anywhere in their crate).
fn module_cycles(name: &str, src: &std::path::Path) -> Vec<String> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut modules = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(src) else {
        return Vec::new();
    };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().to_string();
        let module = file.trim_end_matches(".rs").to_string();
        if module != "lib" && module != "main" {
            modules.insert(module);
        }
    }
    for module in &modules {
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        rust_files(&src.join(format!("{module}.rs")), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let before_tests = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            // Comments may name any module.
            let code: String = before_tests
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for used in code.split("crate::").skip(1) {
                let target: String = used
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if target != *module && modules.contains(&target) {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    cycles(&edges)
        .into_iter()
        .map(|c| {
            format!(
                "{name}: its modules import each other in a cycle: {}",
                c.join(" → ")
            )
        })
        .collect()
}

/// `path` if it is a Rust file, or every Rust file below it; test-only
/// files (`*tests.rs`, `sim/`) left out.
fn rust_files(path: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        if path.file_name().is_some_and(|n| n == "sim") {
            return;
        }
        for e in std::fs::read_dir(path).into_iter().flatten().flatten() {
            rust_files(&e.path(), out);
        }
    } else if path.extension().is_some_and(|x| x == "rs")
        && !path.to_string_lossy().ends_with("tests.rs")
    {
        out.push(path.to_path_buf());
    }
}

/// One cycle (as a path back to its start) per strongly connected group of
/// modules that import each other.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(at) = todo.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for start in edges.keys() {
        if reported.contains(start) || !reach(start).contains(start) {
            continue;
        }
        // The modules on a cycle through `start`, and one such cycle.
        let group: BTreeSet<String> = reach(start)
            .into_iter()
            .filter(|m| reach(m).contains(start))
            .collect();
        let mut path = vec![start.clone()];
        let mut at = start.clone();
        loop {
            let next = edges[&at]
                .iter()
                .find(|n| group.contains(*n) && (*n == start || !path.contains(n)))
                .cloned();
            match next {
                Some(n) if n == *start => {
                    path.push(n);
                    break;
                }
                Some(n) => {
                    path.push(n.clone());
                    at = n;
                }
                None => break,
            }
        }
        reported.extend(group);
        out.push(path);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(pairs: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            out.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        out
    }

    #[test]
    fn a_cycle_is_reported_once_as_a_path_back_to_its_start() {
        let found = cycles(&edges(&[
            ("engine", "nested"),
            ("nested", "webhook"),
            ("webhook", "engine"),
            ("engine", "store"),
            ("webhook", "store"),
        ]));
        assert_eq!(found, vec![vec!["engine", "nested", "webhook", "engine"]]);
    }

    #[test]
    fn one_way_imports_are_no_cycle() {
        let found = cycles(&edges(&[
            ("engine", "nested"),
            ("nested", "webhook"),
            ("engine", "webhook"),
            ("webhook", "store"),
        ]));
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn module_imports_are_read_from_code_not_comments_or_tests() {
        let dir = std::env::temp_dir().join(format!("xtask-layers-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("b")).unwrap();
        std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
        std::fs::write(
            src.join("a.rs"),
            "use crate::b::thing;\n// crate::c is only named\n",
        )
        .unwrap();
        std::fs::write(src.join("c.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(
            src.join("b").join("mod.rs"),
            "// only named here: crate::a\npub fn thing() {}\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
        )
        .unwrap();
        assert!(module_cycles("demo", &src).is_empty());
        std::fs::write(src.join("b").join("inner.rs"), "use crate::a::x;\n").unwrap();
        assert_eq!(
            module_cycles("demo", &src),
            vec!["demo: its modules import each other in a cycle: a → b → a".to_string()]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
