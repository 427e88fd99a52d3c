//! End-to-end tests: they drive the real `cairn` binary.

mod crash;
mod stacks;
mod support;
mod update;
mod validate;
