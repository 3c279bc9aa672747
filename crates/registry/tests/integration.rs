//! Behaviour tests of the registry library: one binary, one module per concern.

mod authoring;
mod bootstrap;
mod checks;
mod common;
mod docs;
mod fixtures;
mod instance;
mod manifest_fuzz;
mod migration_example;
mod path_properties;
mod published;
mod report_contract;
mod research_checks;
mod research_method;
mod shared_documents;
mod shipped_release;
mod sources;
mod untrusted_files;
