//! MCP surface behaviour tests: one binary, one module per concern.

mod auth;
mod common;
mod http;
mod operation;
mod profiles;
mod resources;
mod tools;
