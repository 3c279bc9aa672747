//! The rimthan workflow engine: it decides, deterministically, what a harness may do next.
//!
//! # Brief overview
//!
//! [`Engine`] implements the four workflow operations over a verified registry
//! ([`Releases`]) and a [`Store`]: a start evaluates every blocker and binds the host into a
//! session; [`CheckpointKey`] authenticates the checkpoint tokens that name a session and its
//! sequence; preparing checks attestations and persists a validation plan; submitting checks the
//! report set and advances, asks for a revision, or completes. The engine knows nothing of MCP or
//! HTTP: the MCP crate translates tool calls into these requests and results back.

pub mod approval;
mod attestation;
mod audit;
mod blockers;
mod bounds;
pub mod cache;
pub mod chain;
mod checkpoint;
mod checks;
mod codes;
mod engine;
mod error;
mod offers;
mod payload;
pub mod provenance;
mod releases;
mod reports;
mod request;
mod session;
pub mod store;
mod view;

pub use audit::{AuditDecision, AuditEntry, Judgement, Operation, Outcome, WorkflowRef};
pub use bounds::{MAX_FORBIDDEN_PATHS, MAX_GLOB_BYTES, MAX_SCHEMA_ERROR_CHARS, MAX_SCHEMA_ERRORS};
pub use checkpoint::{Checkpoint, CheckpointKey, MIN_SECRET_BYTES};
pub use checks::{CheckFinding, CheckRecord, CheckVerdict, MAX_KEPT_CHECK_FINDINGS};
pub use codes::{Code, Failure};
pub use engine::{ACTIVE_STEP_CACHE_BOUNDS, Engine, SERVER_NAME};
pub use error::EngineError;
pub use payload::*;
pub use releases::Releases;
pub use reports::{MAX_REPORT_EXTRA_BYTES, MAX_REPORT_EXTRA_FIELDS};
pub use request::*;
pub use session::{
    Finding, HostBinding, Principal, REPORT_ROUNDS_KEPT, ReportRound, Session, SessionId, Status,
};
pub use store::{
    Pruned, SessionQuery, SessionSummary, StatsQuery, Store, StoreError, WorkflowCount,
    WorkflowStats,
};
