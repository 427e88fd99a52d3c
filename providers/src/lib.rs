//! `cairn-providers`: the resource types built into Cairn.
//!
//! - `Cairn::Test::Resource` ([`test_resource`]): a resource backed by one JSON
//!   file per physical resource, for tests and for trying Cairn out.
//! - `Cairn::Local::File` ([`local_file`]): a file on the local machine.
//! - `Cairn::Random::String` ([`random_string`]): a random string, kept until a
//!   CreateOnly property changes.
//!
//! [`builtins`] hands them to `cairn_core::registry::assemble`, which adds
//! the engine's group types, custom resources and the configured providers.

#![forbid(unsafe_code)]

mod deadline;
pub mod heat;
pub mod local_file;
pub mod random_string;
pub mod test_resource;

use std::path::Path;
use std::sync::Arc;

use cairn_sdk::ResourceProvider;

/// The built-in providers, by the names `kind = "builtin"` entries use
/// (`cairn_core::registry::assemble::Builtin`). `data_dir` is where
/// file-backed providers keep their resources.
pub fn builtins(data_dir: &Path) -> Vec<(&'static str, Arc<dyn ResourceProvider>)> {
    let all: Vec<(&'static str, Arc<dyn ResourceProvider>)> = vec![
        (
            "builtin:test",
            Arc::new(test_resource::TestResourceProvider::new(
                data_dir.join("test-resources"),
            )),
        ),
        ("builtin:local", Arc::new(local_file::LocalFileProvider)),
        (
            "builtin:random",
            Arc::new(random_string::RandomStringProvider),
        ),
        ("builtin:heat", Arc::new(heat::HeatTypes)),
    ];
    all.into_iter()
        .map(|(name, p)| {
            let checked: Arc<dyn ResourceProvider> = Arc::new(deadline::Deadlined(p));
            (name, checked)
        })
        .collect()
}
