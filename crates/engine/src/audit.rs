//! The audit log's record: who changed what, and who was refused (`docs/engine.md` §7). Every
//! field is typed; the stores spell them with the wire names below.

use serde::{Serialize, Serializer};

use crate::{
    codes::Code,
    session::{SessionId, Status},
};

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$doc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$doc])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The value a wire spelling names, if any.
            pub fn from_wire(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// One of the four workflow operations, named as its tool without the `rimthan.` prefix.
    Operation {
        /// `rimthan.start_workflow`.
        StartWorkflow = "start_workflow",
        /// `rimthan.get_active_step`.
        GetActiveStep = "get_active_step",
        /// `rimthan.prepare_step_validation`.
        PrepareStepValidation = "prepare_step_validation",
        /// `rimthan.submit_step_reports`.
        SubmitStepReports = "submit_step_reports",
    }
}

wire_enum! {
    /// How a call ended: the result's `status`, or `replayed` for an identical retry answered
    /// from the session as it stands.
    Outcome {
        /// The session is on a step (after a start, a read or an advance).
        Active = "active",
        /// A validator failed; the step is to be revised.
        Revise = "revise",
        /// The last step passed.
        Completed = "completed",
        /// A validation plan was issued.
        Ready = "ready",
        /// A start was refused for blockers; nothing was stored.
        Blocked = "blocked",
        /// The call was refused with codes.
        Rejected = "rejected",
        /// An identical retry got the answer it lost.
        Replayed = "replayed",
    }
}

impl From<Status> for Outcome {
    fn from(status: Status) -> Self {
        match status {
            Status::Active => Outcome::Active,
            Status::Revise => Outcome::Revise,
            Status::Completed => Outcome::Completed,
        }
    }
}

/// One audited call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// The session, when the call touched one (a blocked start touches none).
    pub session_id: Option<SessionId>,
    /// The session's sequence after the call.
    pub seq: Option<u64>,
    /// The operation.
    pub tool: Operation,
    /// How it ended.
    pub outcome: Outcome,
    /// Codes reported, in order.
    pub codes: Vec<Code>,
    /// sha256 of the canonical attestation, when one was submitted.
    pub attestation_sha256: Option<String>,
    /// sha256 of the canonical report set, when one was submitted.
    pub reports_sha256: Option<String>,
    /// The caller's subject, when auth is on.
    pub principal: Option<String>,
    /// RFC 3339 time.
    pub at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_spellings_round_trip() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_wire(op.as_str()), Some(*op));
        }
        for outcome in Outcome::ALL {
            assert_eq!(Outcome::from_wire(outcome.as_str()), Some(*outcome));
        }
        assert_eq!(Operation::from_wire("rimthan.start_workflow"), None);
    }
}
