//! Test support shared by the behaviour tests of every crate, their benches and the `cargo fuzz`
//! targets, so each drives the same faithful scripted harness and re-signing helpers instead of
//! a copy of them. Not published; a dev-dependency only.

pub mod engine;
pub mod fs;
pub mod registry;
