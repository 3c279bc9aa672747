//! Behaviour tests of the registry library: one binary, one module per concern.

mod bootstrap;
mod common;
mod fixtures;
mod manifest_fuzz;
mod path_properties;
mod shipped_release;
mod sources;
