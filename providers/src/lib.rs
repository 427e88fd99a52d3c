//! `cairn-providers`: the resource types built into Cairn.
//!
//! - `Cairn::Test::Resource` ([`test_resource`]): a resource backed by one JSON
//!   file per physical resource, for tests and for trying Cairn out.
//! - `Cairn::Local::File` ([`local_file`]): a file on the local machine.
//! - `Cairn::Random::String` ([`random_string`]): a random string, kept until a
//!   CreateOnly property changes.

pub mod local_file;
pub mod random_string;
pub mod test_resource;

use std::path::Path;
use std::sync::Arc;

use cairn_core::config::Config;
use cairn_core::registry::{Registry, RegistryError, Transport};

/// The registry of built-in providers plus the configured type aliases.
/// `data_dir` is where file-backed providers keep their resources.
pub fn registry(config: &Config, data_dir: &Path) -> Result<Registry, RegistryError> {
    let mut r = Registry::new();
    r.register(
        "builtin:test",
        Transport::Builtin,
        Arc::new(test_resource::TestResourceProvider::new(
            data_dir.join("test-resources"),
        )),
        None,
    )?;
    r.register(
        "builtin:local",
        Transport::Builtin,
        Arc::new(local_file::LocalFileProvider),
        None,
    )?;
    r.register(
        "builtin:random",
        Transport::Builtin,
        Arc::new(random_string::RandomStringProvider),
        None,
    )?;
    for (alias, target) in &config.type_aliases {
        r.alias(alias, target)?;
    }
    Ok(r)
}
