//! MCP surface behaviour tests: one binary, one module per concern.

mod admin;
mod arguments_fuzz;
mod auth;
mod bootstrap;
mod caches;
mod common;
mod connections;
mod hostile;
mod http;
mod operation;
mod profiles;
mod resources;
mod sign_off;
mod tasks;
mod tenants;
mod tools;
