//! Behaviour tests of the check runtime, one binary.

mod common;
mod determinism;
mod fixtures;
mod never_panics;
mod squawk_rules;
mod strings;
mod waiting;
