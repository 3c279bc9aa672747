//! Sign-off of a step that declares `approval` (`docs/engine.md` §6.2): what a session waiting
//! for it holds, who may decide, and what each decision records. The engine never learns who a
//! person is from the request: the caller's verified credentials say it ([`Approver`]).

use std::collections::BTreeMap;

use rimthan_registry::{CheckId, RoleName, Sha256Digest, StepId};
use serde::{Deserialize, Serialize};

use crate::{
    model::codes::{Code, Failure},
    model::session::{AcceptedArtifact, Finding, Principal, SessionId},
};

/// The longest name an operator may decide under where nobody authenticates, in bytes.
pub const MAX_ASSERTED_NAME_BYTES: usize = 128;

/// The longest note or reason an approver may give, in bytes.
pub const MAX_NOTE_BYTES: usize = 4096;

/// A step that passed its validators, waiting for sign-off (status `awaiting_approval`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The step.
    pub step: StepId,
    /// The outputs the sign-off covers; they join the ledger when the step is approved.
    pub outputs: BTreeMap<String, AcceptedArtifact>,
    /// Error findings of failed checks; each must be waived before the step can be approved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waivable: Vec<Finding>,
    /// Approvals given so far, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Signoff>,
    /// Findings waived so far, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waivers: Vec<Waiver>,
    /// Each output's text (path → text), proven to be the bytes the sign-off covers: what the
    /// approver reads. Sessions that waited before texts were kept have none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub texts: BTreeMap<String, String>,
    /// The texts of the round an approver last sent back, to read this round against.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub previous_texts: BTreeMap<String, String>,
    /// RFC 3339 time the sign-off was asked for; absent in sessions stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    /// When its deciders are reminded, until they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_at: Option<String>,
    /// When they were reminded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminded_at: Option<String>,
    /// When it expires, undecided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// What expiry does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expiry: Option<rimthan_registry::OnExpiry>,
}

/// On what ground someone decided on a step: a role its approval names, or being a
/// facilitator the approval admits. Decisions recorded before this was kept have none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// A role the step's approval names, held by their credentials (`{"role": "dba"}`).
    Role(RoleName),
    /// A facilitator of the session's organization, or of every organization.
    Facilitator,
    /// The operator at the machine of a server that authenticates nobody, under a name they
    /// gave: nothing proves who they are, nor that they are not the participant.
    LocalOperator,
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Role(role) => f.write_str(role.as_str()),
            Self::Facilitator => f.write_str("facilitator"),
            Self::LocalOperator => f.write_str("local operator"),
        }
    }
}

/// One person's approval of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Signoff {
    /// Who approved: their credentials' subject.
    pub subject: String,
    /// Their organization, when their credentials name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// On what ground they approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
    /// Whether verified credentials named them; `false` (and only then written) for a name the
    /// operator at the machine asserted.
    #[serde(default = "verified", skip_serializing_if = "is_verified")]
    pub authenticated: bool,
    /// RFC 3339 time.
    pub at: String,
    /// What they said, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A failed check's finding an approver accepted, with their reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Waiver {
    /// The step.
    pub step: String,
    /// The check.
    pub check_id: String,
    /// The check's rule.
    pub rule: String,
    /// The output the finding is in.
    pub path: String,
    /// That output's sha256 when waived: a changed output is judged again, unwaived.
    #[schemars(with = "String")]
    pub output_sha256: Sha256Digest,
    /// Who waived it.
    pub subject: String,
    /// On what ground they waived it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
    /// Whether verified credentials named them; `false` (and only then written) for a name the
    /// operator at the machine asserted.
    #[serde(default = "verified", skip_serializing_if = "is_verified")]
    pub authenticated: bool,
    /// Why.
    pub reason: String,
    /// RFC 3339 time.
    pub at: String,
}

fn verified() -> bool {
    true
}

fn is_verified(authenticated: &bool) -> bool {
    *authenticated
}

/// How an approver's name is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// From credentials the server verified.
    Verified,
    /// Only asserted, by the operator at the machine of a server that authenticates nobody.
    Asserted,
}

/// Which sessions a facilitator may act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FacilitatorOf {
    /// Not a facilitator.
    Nobody,
    /// Their own organization's sessions.
    OwnOrganization,
    /// Every organization's sessions.
    Everyone,
}

/// Who is deciding, as their verified credentials say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approver {
    /// Their subject and organization.
    pub principal: Principal,
    /// Whether they are a facilitator, and of whom.
    pub facilitator: FacilitatorOf,
    /// The roles their credentials grant.
    pub roles: Vec<RoleName>,
    /// Whether credentials named them, or they only said who they are.
    pub identity: Identity,
}

/// What an approver decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Approve the step, with an optional note.
    Approve {
        /// The note.
        note: Option<String>,
    },
    /// Send the step back for revision; the note becomes a finding.
    SendBack {
        /// Why.
        note: String,
    },
    /// Accept one failed check's finding.
    Waive {
        /// The check.
        check: CheckId,
        /// Its rule.
        rule: String,
        /// The output path the finding is in.
        path: String,
        /// Why.
        reason: String,
    },
}

/// A decision on a session waiting for sign-off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRequest {
    /// The session.
    pub session: SessionId,
    /// The step the approver looked at.
    pub step: StepId,
    /// The session revision the approver looked at: a decision on anything older is refused.
    pub revision: u64,
    /// The outputs' digests the approver read, by path: a decision is refused when an output
    /// the waiting sign-off covers is not the one read. Empty binds nothing.
    pub expected: BTreeMap<String, Sha256Digest>,
    /// The decision.
    pub decision: Decision,
}

/// The most output digests a decision may name.
pub const MAX_EXPECTED_OUTPUTS: usize = 64;

/// What a decision did.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum DecisionResult {
    /// The decision was recorded.
    Recorded {
        /// The session's status after it.
        status: crate::model::session::Status,
        /// Its revision after it.
        revision: u64,
        /// Approvals given, after it.
        approvals: usize,
        /// Approvals the step needs.
        approvals_needed: u8,
        /// Failed check findings still to be waived.
        unwaived: usize,
    },
    /// Refused; nothing changed.
    Refused {
        /// Why.
        failure: Failure,
    },
}

/// The refusal for a session this approver may not know of, word for word the one for an id
/// no session has: a session's existence and state are its organization's to know.
pub fn unknown_session(id: &str) -> Failure {
    Failure::new(Code::SessionNotFound, "no session has this id").with("session_id", id)
}

impl Approver {
    /// The operator at the machine of a server that authenticates nobody, deciding under the
    /// name they give: what they decide is recorded as asserted (`docs/operations/facilitator.md`
    /// §5). None for a name that is empty once trimmed, longer than
    /// [`MAX_ASSERTED_NAME_BYTES`], or holding a control character.
    pub fn asserted(name: &str) -> Option<Self> {
        let name = name.trim();
        let fit = !name.is_empty()
            && name.len() <= MAX_ASSERTED_NAME_BYTES
            && !name.chars().any(char::is_control);
        fit.then(|| Self {
            principal: Principal {
                subject: name.to_owned(),
                organization: None,
            },
            facilitator: FacilitatorOf::Nobody,
            roles: Vec::new(),
            identity: Identity::Asserted,
        })
    }

    /// Whether they may learn anything of a session started by `participant`: people of its
    /// organization, facilitators of every organization, and anyone for a session of no
    /// organization. Every door checks it before any other check, so nothing else about the
    /// session leaks.
    pub fn may_know(&self, participant: Option<&Principal>) -> bool {
        match participant.and_then(|p| p.organization.as_deref()) {
            None => true,
            Some(org) => {
                self.facilitator == FacilitatorOf::Everyone
                    || self.principal.organization.as_deref() == Some(org)
            }
        }
    }
}
