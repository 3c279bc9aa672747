//! The engine's one error type: what no tool result can express. Domain outcomes (blocked,
//! rejected, revise) are results, not errors.

use crate::store::{StoreError, StoreErrorKind};

/// A call could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// An argument is malformed in a way its schema cannot say (an invalid glob, say).
    #[error("{field}: {message}")]
    InvalidArgument {
        /// The argument, as a path such as `repository_policy.forbidden_paths[0]`.
        field: String,
        /// What is wrong and what to change.
        message: String,
    },
    /// The store failed; nothing was acknowledged.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Concurrent writers kept winning the compare-and-swap.
    #[error("the session changed {attempts} times while this call ran; retry it")]
    Contended {
        /// How often it retried.
        attempts: u32,
    },
    /// The registry no longer holds a release a session is pinned to.
    #[error(
        "release {0} of a stored session is not in the registry; restore it (releases are never removed)"
    )]
    PinnedReleaseMissing(String),
    /// A stored session refers to something its pinned release does not hold: the store or
    /// the registry was changed outside the server.
    #[error(
        "session {session} refers to {what}, which its pinned release does not hold; the store or the registry was changed outside the server"
    )]
    SessionInconsistent {
        /// The session.
        session: String,
        /// What it refers to.
        what: String,
    },
}

impl EngineError {
    /// The stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::InvalidArgument { .. } => "invalid_argument",
            EngineError::Store(e) => match e.kind {
                StoreErrorKind::Unavailable => "store_unavailable",
                StoreErrorKind::Migration => "store_migration_failed",
                StoreErrorKind::Corrupt => "store_corrupt",
                _ => "store_error",
            },
            EngineError::Contended { .. } => "session_contended",
            EngineError::PinnedReleaseMissing(_) => "pinned_release_missing",
            EngineError::SessionInconsistent { .. } => "stored_session_inconsistent",
        }
    }
}
