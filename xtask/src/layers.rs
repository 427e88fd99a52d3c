//! `cargo xtask layers`: the crates' layering, checked from `cargo metadata`.
//!
//! Cairn's crates depend one way (ARCHITECTURE.md): a crate may depend only
//! on the crates the table [`CRATES`] allows it, a pure crate has no I/O
//! stack anywhere in what it links, and inside a crate no files import
//! each other in a circle (`imports`). Breaking any is an error here, and
//! CI runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// A workspace crate, what it may depend on, and whether it is pure.
struct Crate {
    name: &'static str,
    /// The workspace crates it may depend on, in any kind of dependency
    /// (a test may not reach up either). Every other edge between
    /// workspace crates is refused.
    may_use: &'static [&'static str],
    /// Pure: no I/O stack in anything it links.
    pure: bool,
}

/// The allowed edges between the workspace's crates: the layering of
/// ARCHITECTURE.md written out. `cairn-sdk`, `cairn-template` and
/// `cairn-pg-tls` at the bottom; the pure `cairn-config` and `cairn-model`
/// over them; the store's traits, its backends (SQLite, PostgreSQL) and
/// the transports; the engine (which knows no transport and no backend:
/// its tests use the in-memory store); the API; the binary, which wires
/// everything.
const CRATES: &[Crate] = &[
    Crate {
        name: "cairn-sdk",
        may_use: &[],
        pure: false,
    },
    Crate {
        name: "cairn-template",
        may_use: &[],
        pure: true,
    },
    Crate {
        name: "cairn-pg-tls",
        may_use: &[],
        pure: false,
    },
    Crate {
        name: "cairn-config",
        may_use: &["cairn-sdk"],
        pure: true,
    },
    Crate {
        name: "cairn-model",
        may_use: &["cairn-sdk", "cairn-template"],
        pure: true,
    },
    Crate {
        name: "cairn-providers",
        may_use: &["cairn-sdk"],
        pure: false,
    },
    Crate {
        name: "cairn-provider-postgres",
        may_use: &["cairn-sdk", "cairn-pg-tls"],
        pure: false,
    },
    Crate {
        name: "cairn-store",
        may_use: &["cairn-model"],
        pure: false,
    },
    Crate {
        name: "cairn-store-sqlite",
        may_use: &["cairn-store", "cairn-model"],
        pure: false,
    },
    Crate {
        name: "cairn-store-postgres",
        may_use: &["cairn-store", "cairn-model", "cairn-pg-tls"],
        pure: false,
    },
    Crate {
        name: "cairn-plugin",
        may_use: &["cairn-sdk"],
        pure: false,
    },
    Crate {
        name: "cairn-package",
        may_use: &["cairn-sdk"],
        pure: true,
    },
    Crate {
        name: "cairn-webhook",
        may_use: &["cairn-sdk", "cairn-config", "cairn-model", "cairn-store"],
        pure: false,
    },
    Crate {
        name: "cairn-core",
        may_use: &[
            "cairn-sdk",
            "cairn-package",
            "cairn-template",
            "cairn-config",
            "cairn-model",
            "cairn-store",
        ],
        pure: false,
    },
    Crate {
        name: "cairn-api",
        may_use: &["cairn-core", "cairn-sdk"],
        pure: false,
    },
    Crate {
        name: "cairn",
        may_use: &[
            "cairn-core",
            "cairn-api",
            "cairn-sdk",
            "cairn-providers",
            "cairn-plugin",
            "cairn-webhook",
            "cairn-store-sqlite",
            "cairn-store-postgres",
            "cairn-package",
        ],
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
    let mut files = 0;
    for c in CRATES {
        if let Some(dir) = graph.source_dir(c.name) {
            let found = crate::imports::file_circles(c.name, &dir);
            files += found.files;
            problems.extend(found.circles);
        }
    }
    if problems.is_empty() {
        Ok(format!(
            "{} crates, {} dependencies between workspace crates, each one the table allows; {} pure; no import circle between the {files} files of any",
            CRATES.len(),
            graph.workspace_edges(),
            CRATES.iter().filter(|c| c.pure).count()
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

fn crate_named(name: &str) -> Option<&'static Crate> {
    CRATES.iter().find(|c| c.name == name)
}

fn violations(graph: &Graph, cargo: &str, root: &std::path::Path) -> Vec<String> {
    let mut out = table_is_one_way();
    for member in graph.member_ids() {
        let name = graph.name(member);
        let Some(krate) = crate_named(name) else {
            continue;
        };
        for dep in graph.deps.get(member).into_iter().flatten() {
            if !graph.members.contains(dep) {
                continue;
            }
            let dep_name = graph.name(dep);
            if crate_named(dep_name).is_none() {
                out.push(format!(
                    "{name} depends on {dep_name}, which is not in xtask's table of crates (an example, a test plugin or a tool): nothing layered may depend on it"
                ));
            } else if !krate.may_use.contains(&dep_name) {
                out.push(format!(
                    "{name} depends on {dep_name}, an edge xtask/src/layers.rs's table does not allow ({name} may use: {}): the crates depend one way (ARCHITECTURE.md)",
                    if krate.may_use.is_empty() { "no workspace crate".to_string() } else { krate.may_use.join(", ") }
                ));
            }
        }
        if krate.pure {
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
    for c in CRATES {
        if !graph.member_ids().any(|m| graph.name(m) == c.name) {
            out.push(format!(
                "{} is in xtask's table of crates but not in the workspace: update xtask/src/layers.rs",
                c.name
            ));
        }
    }
    out
}

/// The table itself names only its own crates and has no circle, so that
/// the edges it allows are one way.
fn table_is_one_way() -> Vec<String> {
    let mut out = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in CRATES {
        for used in c.may_use {
            if crate_named(used).is_none() {
                out.push(format!(
                    "xtask's table lets {} use {used}, which the table does not list",
                    c.name
                ));
            }
            edges
                .entry(c.name.to_string())
                .or_default()
                .insert(used.to_string());
        }
    }
    for circle in cycles(&edges) {
        out.push(format!(
            "xtask's table of crates allows a circle: {}",
            circle.join(" → ")
        ));
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

/// One cycle (as a path back to its start) per strongly connected group of
/// modules that import each other.
pub fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
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
}
