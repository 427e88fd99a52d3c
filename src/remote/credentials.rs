//! Credentials and region from the AWS CLI's shared files.

use std::collections::BTreeMap;

use anyhow::Context;

/// The AWS CLI's shared files for the profile in use (AWS_PROFILE, else
/// `default`): `~/.aws/credentials` (or AWS_SHARED_CREDENTIALS_FILE) and
/// `~/.aws/config` (or AWS_CONFIG_FILE, where the section is `profile X`).
pub(super) struct SharedConfig {
    values: BTreeMap<String, String>,
}

impl SharedConfig {
    pub fn load() -> anyhow::Result<SharedConfig> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".into());
        let home = env("HOME").map(std::path::PathBuf::from);
        let file = |var: &str, name: &str| {
            env(var)
                .map(std::path::PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
        };
        let config_section = if profile == "default" {
            profile.clone()
        } else {
            format!("profile {profile}")
        };
        let mut values = BTreeMap::new();
        // The credentials file's values win over the config file's.
        for (path, section) in [
            (file("AWS_CONFIG_FILE", "config"), config_section),
            (
                file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
                profile.clone(),
            ),
        ] {
            let Some(path) = path.filter(|p| p.exists()) else {
                continue;
            };
            let parsed = ini::Ini::load_from_file(&path)
                .with_context(|| format!("cannot read the AWS config file {}", path.display()))?;
            if let Some(props) = parsed.section(Some(section.as_str())) {
                for (k, v) in props.iter() {
                    values.insert(k.to_string(), v.to_string());
                }
            }
        }
        Ok(SharedConfig { values })
    }

    pub fn get(&self, key: &str) -> Option<String> {
        self.values.get(key).filter(|v| !v.is_empty()).cloned()
    }
}
