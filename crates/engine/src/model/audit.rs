//! The audit log's record: who changed what, and who was refused (`docs/engine.md` §7). Every
//! field is typed; the stores spell them with the wire names below.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};

use crate::{
    model::checks::{CheckRecord, CheckVerdict},
    model::codes::Code,
    model::request::Severity,
    model::session::{SessionId, Status, WorkflowRef},
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
    /// One of the four workflow operations, named as its tool without the `rimthan.` prefix,
    /// or one of an approver's three decisions.
    Operation {
        /// `rimthan.start_workflow`.
        StartWorkflow = "start_workflow",
        /// `rimthan.get_active_step`.
        GetActiveStep = "get_active_step",
        /// `rimthan.prepare_step_validation`.
        PrepareStepValidation = "prepare_step_validation",
        /// `rimthan.submit_step_reports`.
        SubmitStepReports = "submit_step_reports",
        /// An approver approved a step (`/admin` or `rimthan sessions approve`).
        ApproveStep = "approve_step",
        /// An approver sent a step back.
        SendBackStep = "send_back_step",
        /// An approver waived a failed check's finding.
        WaiveFinding = "waive_finding",
        /// The server reminded a step's deciders that its sign-off waits.
        RemindApproval = "remind_approval",
        /// A step's sign-off expired undecided.
        ExpireApproval = "expire_approval",
        /// A step's deadline passed before its work was submitted.
        ExpireDeadline = "expire_deadline",
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
        /// The step waits for sign-off.
        AwaitingApproval = "awaiting_approval",
        /// The last step passed.
        Completed = "completed",
        /// A sign-off or a deadline expired and ended the session.
        Expired = "expired",
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
            Status::AwaitingApproval => Outcome::AwaitingApproval,
            Status::Completed => Outcome::Completed,
            Status::Expired => Outcome::Expired,
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
    /// The caller's organization, when their credentials name one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// The workflow the call concerned, once it was resolved: the session's, or the one a
    /// blocked start asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowRef>,
    /// The verdict on a step, for a submission that was judged (it advanced, completed or sent
    /// the step back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    /// The deterministic checks a preparation ran: what each read, by digest, and where it
    /// found what; never the text, nor a message (which may quote it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<AuditCheck>,
    /// An approver's decision: the step, their note or reason, and what a waiver covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<AuditDecision>,
    /// RFC 3339 time.
    pub at: String,
}

/// An approver's decision as the audit log records it (`docs/engine.md` §6.2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditDecision {
    /// The step decided on.
    pub step: String,
    /// The note (approve, send back) or reason (waive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A waiver's check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_id: Option<String>,
    /// A waiver's rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// A waiver's output path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A waiver's output digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_sha256: Option<String>,
    /// Whether the decider's name was only asserted (where nobody authenticates), not
    /// verified; written only when it was.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asserted: bool,
}

/// What the validators of one step decided on a submission: the facts the facilitator's
/// aggregates are counted from (`docs/engine.md` §7.5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// The judged step's id.
    pub step: String,
    /// Its index in the workflow.
    pub step_index: u64,
    /// The validators that failed it, sorted; empty when it passed.
    pub failed: Vec<String>,
    /// When it passed: seconds from entering the step to passing it, when the session knows
    /// when it entered (sessions stored before this was recorded do not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
}

/// One check's result as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCheck {
    /// The check's id.
    pub id: String,
    /// sha256 of the check's signed document.
    pub sha256: String,
    /// Its verdict.
    pub verdict: CheckVerdict,
    /// What it read: path → sha256.
    pub inputs: BTreeMap<String, String>,
    /// Where it found what (the kept findings of the record).
    pub findings: Vec<AuditCheckFinding>,
    /// How many findings it reported in all.
    pub finding_count: usize,
}

/// One finding as the audit log keeps it: rule and place, no message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCheckFinding {
    /// The rule's id.
    pub rule: String,
    /// `error` or `warning`.
    pub severity: Severity,
    /// The file concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its 1-based line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl From<&CheckRecord> for AuditCheck {
    fn from(record: &CheckRecord) -> Self {
        AuditCheck {
            id: record.id.clone(),
            sha256: record.sha256.clone(),
            verdict: record.verdict,
            inputs: record.inputs.clone(),
            findings: record
                .findings
                .iter()
                .map(|f| AuditCheckFinding {
                    rule: f.rule.clone(),
                    severity: f.severity,
                    path: f.path.clone(),
                    line: f.line,
                })
                .collect(),
            finding_count: record.finding_count,
        }
    }
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
