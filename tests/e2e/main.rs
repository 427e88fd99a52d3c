//! End-to-end tests: they drive the real `cairn` binary.

mod support;
mod validate;
