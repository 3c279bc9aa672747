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
//!
//! # Floors
//!
//! Each floor imports only those below it (`docs/engine.md` §10): plain data (`model/`)
//! at the ground; [`store`] on it; pure judgements in `rules/`, with `rules/transition.rs` the one
//! place a session's stage changes; what others verify in `evidence/`; and the operations in
//! `engine/`, each a read, a transition and one compare-and-swap (`engine/transact.rs`). This
//! file only chooses what the crate shows.

pub mod cache;
mod engine;
mod error;
mod evidence;
mod model;
mod releases;
mod rules;
pub mod store;

/// Sign-off: the decisions, who decides and what a waiting step holds.
pub mod approval {
    pub use crate::model::approval::*;
}

/// The hash-chained audit log: digests, verification of rows, and walks over a store.
pub mod chain {
    pub use crate::evidence::audit::{verify_audit, verify_audit_trusting, verify_session_chain};
    pub use crate::model::chain::*;
    pub use crate::model::seal::*;
}

/// The signed provenance statement: shapes, keys, signing, verification and making one.
pub mod provenance {
    pub use crate::evidence::statement::{StatementFacts, session_statement, statement_for};
    pub use crate::model::provenance::*;
}

pub use engine::{
    ACTIVE_STEP_CACHE_BOUNDS, Engine, MAX_WAITING_LISTED, TIMER_BATCH, TRACE_TARGET, TimersFired,
    Waiting,
};
pub use error::EngineError;
pub use model::audit::{AuditCheck, AuditDecision, AuditEntry, Judgement, Operation, Outcome};
pub use model::bounds::{
    MAX_FORBIDDEN_PATHS, MAX_GLOB_BYTES, MAX_SCHEMA_ERROR_CHARS, MAX_SCHEMA_ERRORS,
};
pub use model::checkpoint::{Checkpoint, CheckpointKey, MIN_SECRET_BYTES};
pub use model::checks::{CheckFinding, CheckRecord, CheckVerdict, MAX_KEPT_CHECK_FINDINGS};
pub use model::codes::{Code, Failure};
pub use model::notify::{
    DeliveryOutcome, DeliveryRecord, EventKind, Notice, NotifyConfig, OutboxCounts, WebhookDelivery,
};
pub use model::payload::*;
pub use model::request::*;
pub use model::session::{
    AcceptedArtifact, Deadline, Finding, HostBinding, Principal, REPORT_ROUNDS_KEPT, ReportRound,
    Session, SessionId, Status, WorkflowRef,
};
pub use releases::{Releases, Serving};
pub use rules::reports::{MAX_REPORT_EXTRA_BYTES, MAX_REPORT_EXTRA_FIELDS};
pub use store::{
    Pruned, SessionQuery, SessionSummary, StatsQuery, Store, StoreError, WorkflowCount,
    WorkflowStats,
};
