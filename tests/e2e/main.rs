//! End-to-end tests: they drive the real `cairn` binary.

mod browser;
mod changesets;
mod console;
mod crash;
mod drift;
mod engines;
mod groups;
mod heat_fidelity;
mod hostile;
mod hot;
mod hot_corpus;
mod nested;
mod outage;
mod plugins;
mod postgres;
mod provider_kit;
mod provider_scaffold;
mod reconcile;
mod serve;
mod signals;
mod stacks;
mod support;
mod update;
mod validate;
mod webdriver;
mod webhooks;
