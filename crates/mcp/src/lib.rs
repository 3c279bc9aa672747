//! The MCP surface of the rimthan workflow engine, built on the official Rust SDK (`rmcp`).
//!
//! # Brief overview
//!
//! [`RimthanServer`] implements `rmcp`'s `ServerHandler` over an engine: the resource
//! catalogue of the verified registry (sorted, paginated, private-cache scoped, routed by the
//! release each URI names), the bootstrap prompt, and the four workflow tools whose schemas are
//! generated from the engine's request and result types. [`http`] serves it over Streamable HTTP
//! on both protocol revisions (2026-07-28 stateless and 2025-11-25 sessions); `rmcp`'s stdio
//! transport serves it to a local harness.

pub mod admin;
pub mod admin_client;
pub mod auth;
mod body;
pub mod bootstrap;
mod caller;
mod catalogue;
pub mod conn;
mod credentials;
mod framing;
pub mod http;
mod metrics;
pub mod oidc;
mod profile;
mod prompts;
mod read_cache;
pub mod reload;
pub mod report;
mod server;
mod sessions;
pub mod tasks;
pub mod telemetry;
pub mod throttle;
mod tools;
mod traced;
pub mod webhooks;

pub use catalogue::{MAX_URI_BYTES, META_CACHE_SCOPE, PAGE_SIZE, TTL_IMMUTABLE_MS, TTL_MOVING_MS};
pub use metrics::{Gauges, Metrics};
pub use profile::Profile;
pub use prompts::{LEGACY_PROMPT, START_PROMPT};
pub use server::{RimthanServer, SERVER_NAME};
pub use tools::{ACTIVE_STEP, PREPARE, START, SUBMIT, WorkflowTool};
pub use traced::Transport;
