//! Who may decide on a sign-off, and what a decision's note must be (`docs/engine.md` §6.2).

use rimthan_registry::{Approval, RoleName};

use crate::model::{
    approval::{Approver, Basis, FacilitatorOf, Identity, MAX_NOTE_BYTES},
    codes::{Code, Failure},
    session::Principal,
};

/// Whether `approver` may decide on a step of `approval` in a session started by `participant`.
pub(crate) fn may_decide(
    approval: &Approval,
    approver: &Approver,
    participant: Option<&Principal>,
) -> Result<Basis, Failure> {
    if approver.identity == Identity::Asserted {
        // Nobody authenticates here: the operator at the machine decides under the name they
        // give, and whether that is the participant cannot be proven (the basis says so). A
        // session an authenticated participant started is for verified credentials only.
        return match participant {
            None => Ok(Basis::LocalOperator),
            Some(_) => Err(Failure::new(
                Code::ApprovalNotAuthenticated,
                "an authenticated participant started this session; decide with your own \
                 credentials, not an asserted name",
            )),
        };
    }
    let own = participant.is_some_and(|p| p.subject == approver.principal.subject);
    if own && !approval.self_approval {
        return Err(Failure::new(
            Code::ApprovalNotAllowed,
            "you started this session, and this step must be signed off by someone else",
        ));
    }
    let same_org = participant
        .and_then(|p| p.organization.as_deref())
        .is_some_and(|o| approver.principal.organization.as_deref() == Some(o));
    let facilitator = approval.facilitators
        && match approver.facilitator {
            FacilitatorOf::Everyone => true,
            FacilitatorOf::OwnOrganization => same_org || participant.is_none(),
            FacilitatorOf::Nobody => false,
        };
    let held = approver.roles.iter().find(|r| approval.roles.contains(r));
    let org_ok = participant.and_then(|p| p.organization.as_ref()).is_none() || same_org;
    // The role the step names is the primary ground; a facilitator decides where none is held.
    match held {
        Some(role) if org_ok => return Ok(Basis::Role(role.clone())),
        _ if facilitator => return Ok(Basis::Facilitator),
        _ => {}
    }
    let mut who = Vec::new();
    if approval.facilitators {
        who.push("a facilitator of the session's organization".to_owned());
    }
    if !approval.roles.is_empty() {
        let roles: Vec<&str> = approval.roles.iter().map(RoleName::as_str).collect();
        who.push(format!(
            "someone of the session's organization holding the role {}",
            roles.join(" or ")
        ));
    }
    Err(Failure::new(
        Code::ApprovalNotAllowed,
        format!("this step is signed off by {}", who.join(", or ")),
    ))
}

/// A note or reason: required where `required`, at most [`MAX_NOTE_BYTES`], trimmed.
pub(crate) fn note(
    text: Option<&str>,
    required: bool,
    what: &str,
) -> Result<Option<String>, Failure> {
    let text = text.map(str::trim).filter(|t| !t.is_empty());
    match text {
        None if required => Err(Failure::new(
            Code::ApprovalNoteRequired,
            format!("give a {what}: the participant and the audit log read it"),
        )),
        Some(t) if t.len() > MAX_NOTE_BYTES => Err(Failure::new(
            Code::ApprovalNoteRequired,
            format!(
                "the {what} is {} bytes; keep it to {MAX_NOTE_BYTES}",
                t.len()
            ),
        )),
        other => Ok(other.map(str::to_owned)),
    }
}
